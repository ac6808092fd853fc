/*
 * Two devices in one session (ABI v3): the fake device built as a v3 factory reports
 * two devices, the runtime opens an instance of each with a governor tier each
 * (fake:0, fake:1), device 1 alone registers Triple (its capability), and placement
 * follows plugins.ini's `devices` order. A model that crosses from one device to the
 * other gets its values copied directly between them (peer copies), gives the right
 * result, and leaves every tier's books at zero. A v2 provider loads beside it. A
 * kernel that refuses a geometry or a node says why through the v3 sink, and the
 * user reads those words.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "fake_session.h"

static void *g_lib3;
static onyx_fake_device_stats_fn g_stats3;

static onyx_fake_device_stats stats3(void) {
  onyx_fake_device_stats s;
  g_stats3(&s);
  return s;
}

static int setup3(void **state) {
  (void)state;
  g_lib3 = dlopen(FAKE_DEVICE3, RTLD_NOW | RTLD_LOCAL);
  if (g_lib3 == NULL) return -1;
  *(void **)&g_stats3 = dlsym(g_lib3, ONYX_FAKE_DEVICE_STATS_SYMBOL);
  /* A v3 provider exports the factory entry alone. */
  if (dlsym(g_lib3, ONYX_PROVIDER_ENTRY_SYMBOL) != NULL) return -1;
  return g_stats3 && dlsym(g_lib3, ONYX_PROVIDER_FACTORY_SYMBOL) ? 0 : -1;
}

static int teardown3(void **state) {
  (void)state;
  dlclose(g_lib3);
  return 0;
}

static onyx_runtime *runtime3(const char *devices_line) {
  char ini[2048];
  snprintf(ini, sizeof ini, "[provider.fake]\npath = %s\n%s\n[provider.cpu]\npath = %s\n",
           FAKE_DEVICE3, devices_line, CPU_PROVIDER);
  return runtime_ini(ini);
}

static const float X[6] = {1.5f, -2.0f, 3.25f, 0.5f, -0.75f, 8.0f};

static onyx_tensor x_in(float *x) {
  memcpy(x, X, sizeof X);
  return (onyx_tensor){.dtype = ONYX_DTYPE_FLOAT32, .rank = 2, .dims = {2, 3}, .data = x};
}

/* A number after `"field":` in the snapshot's entry of tier `tier`. */
static uint64_t tier_field(const char *json, const char *tier, const char *field) {
  char key[64], fkey[64];
  snprintf(key, sizeof key, "{\"name\":\"%s\"", tier);
  snprintf(fkey, sizeof fkey, "\"%s\":", field);
  const char *at = strstr(json, key);
  assert_non_null(at);
  at = strstr(at, fkey);
  assert_non_null(at);
  return strtoull(at + strlen(fkey), NULL, 10);
}

static char *snapshot(const onyx_runtime *rt) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  onyx_runtime_write_memory_json(rt, f);
  fclose(f);
  return buf;
}

static void expect_devices(onyx_session *s, const char *const *want, size_t n) {
  assert_int_equal(onyx_session_node_count(s), n);
  for (size_t i = 0; i < n; ++i) assert_string_equal(onyx_session_node_device(s, i), want[i]);
}

/* One instance per device, a tier each; the chain crosses devices and back. */
static void one_session_on_two_devices(void **state) {
  (void)state;
  onyx_runtime *rt = runtime3("");
  assert_int_equal(onyx_runtime_provider_count(rt), 3);
  assert_string_equal(onyx_runtime_provider_device(rt, 0), "fake:0");
  assert_string_equal(onyx_runtime_provider_device(rt, 1), "fake:1");
  assert_string_equal(onyx_runtime_provider_device(rt, 2), "host");
  assert_string_equal(onyx_runtime_provider_name(rt, 1), "fake");
  assert_non_null(onyx_runtime_kernel_def(rt, 0, 0)); /* v3 registrations */
  assert_null(onyx_runtime_kernel(rt, 0, 0));
  /* Device 0 lacks Triple: one registration fewer. */
  assert_int_equal(onyx_runtime_kernel_count(rt, 0) + 1, onyx_runtime_kernel_count(rt, 1));

  onyx_session *s = session(rt, "fake_two_devices.onnx");
  static const char *const want[] = {"fake:0", "fake:1", "fake:0", "fake:1"};
  expect_devices(s, want, 4);
  float x[6];
  onyx_tensor in = x_in(x), out;
  onyx_fake_device_stats before = stats3();
  assert_int_equal(run(s, NULL, &in, 1, &out), ONYX_STATUS_OK);
  onyx_fake_device_stats after = stats3();
  for (int i = 0; i < 6; ++i) assert_true(((float *)out.data)[i] == 24.0f * X[i]);
  onyx_tensor_data_free(out.data);
  /* x up to device 0, a -> 1, b -> 0, c -> 1 between the devices, y down from 1. */
  assert_int_equal(after.copies_h2d - before.copies_h2d, 1);
  assert_int_equal(after.copies_peer - before.copies_peer, 3);
  assert_int_equal(after.copies_d2h - before.copies_d2h, 1);
  assert_int_equal(after.computes_on[0] - before.computes_on[0], 2);
  assert_int_equal(after.computes_on[1] - before.computes_on[1], 2);

  /* Each device's tier saw its own activations, and is back to zero. */
  char *json = snapshot(rt);
  assert_true(tier_field(json, "fake:0", "peak") > 0);
  assert_true(tier_field(json, "fake:1", "peak") > 0);
  assert_int_equal(tier_field(json, "fake:0", "used"), 0);
  assert_int_equal(tier_field(json, "fake:1", "used"), 0);
  free(json);
  assert_nothing_booked(rt);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
  assert_int_equal(stats3().live_blocks, 0);
  assert_int_equal(stats3().live_bytes_on[0], 0);
  assert_int_equal(stats3().live_bytes_on[1], 0);
}

/* An initializer read on both devices is copied to each once, at session creation. */
static void shared_weights_on_each_device(void **state) {
  (void)state;
  onyx_runtime *rt = runtime3("");
  onyx_fake_device_stats before = stats3();
  onyx_session *s = session(rt, "fake_shared_weights.onnx");
  onyx_fake_device_stats made = stats3();
  uint64_t w = 64 * 64 * sizeof(float);
  assert_true(made.live_bytes_on[0] - before.live_bytes_on[0] >= w);
  assert_true(made.live_bytes_on[1] - before.live_bytes_on[1] >= w);
  assert_int_equal(made.copies_h2d - before.copies_h2d, 2);
  onyx_tensor out[2];
  for (int k = 0; k < 2; ++k) {
    assert_int_equal(run(s, NULL, NULL, 0, out), ONYX_STATUS_OK);
    for (int i = 0; i < 64 * 64; ++i) {
      float x = 0.25f * (float)((i % 7) - 3);
      assert_true(((float *)out[0].data)[i] == 2.0f * x);
      assert_true(((float *)out[1].data)[i] == 3.0f * x);
    }
    onyx_tensor_data_free(out[0].data);
    onyx_tensor_data_free(out[1].data);
  }
  assert_int_equal(stats3().copies_h2d - made.copies_h2d, 0); /* no weight copied per run */
  onyx_session_destroy(s);
  assert_int_equal(stats3().live_bytes_on[0], before.live_bytes_on[0]);
  assert_int_equal(stats3().live_bytes_on[1], before.live_bytes_on[1]);
  assert_nothing_booked(rt);
  onyx_runtime_destroy(rt);
}

/* Devices that do not report peer copies exchange values through the host. */
static void without_peer_copies_values_go_through_the_host(void **state) {
  (void)state;
  onyx_runtime *rt = runtime3("option.no_peer = 1");
  onyx_session *s = session(rt, "fake_two_devices.onnx");
  float x[6];
  onyx_tensor in = x_in(x), out;
  onyx_fake_device_stats before = stats3();
  assert_int_equal(run(s, NULL, &in, 1, &out), ONYX_STATUS_OK);
  onyx_fake_device_stats after = stats3();
  for (int i = 0; i < 6; ++i) assert_true(((float *)out.data)[i] == 24.0f * X[i]);
  onyx_tensor_data_free(out.data);
  assert_int_equal(after.copies_peer - before.copies_peer, 0);
  assert_int_equal(after.copies_h2d - before.copies_h2d, 4); /* x, then a, b, c again */
  assert_int_equal(after.copies_d2h - before.copies_d2h, 4); /* a, b, c, then y */
  assert_nothing_booked(rt);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
}

/* plugins.ini's `devices` picks the instances and their order. */
static void devices_line_orders_placement(void **state) {
  (void)state;
  onyx_runtime *rt = runtime3("devices = 1, 0");
  assert_string_equal(onyx_runtime_provider_device(rt, 0), "fake:1");
  assert_string_equal(onyx_runtime_provider_device(rt, 1), "fake:0");
  onyx_session *s = session(rt, "fake_two_devices.onnx");
  static const char *const want[] = {"fake:1", "fake:1", "fake:1", "fake:1"};
  expect_devices(s, want, 4);
  float x[6];
  onyx_tensor in = x_in(x), out;
  onyx_fake_device_stats before = stats3();
  assert_int_equal(run(s, NULL, &in, 1, &out), ONYX_STATUS_OK);
  assert_int_equal(stats3().copies_peer - before.copies_peer, 0);
  for (int i = 0; i < 6; ++i) assert_true(((float *)out.data)[i] == 24.0f * X[i]);
  onyx_tensor_data_free(out.data);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
}

/* A v2 provider (the same fake device, old contract) beside the v3 one: values go
 * between the two providers' devices through the host. Run with the v2 build of the
 * current headers and with the one compiled against the frozen v2 headers. */
static void side_by_side(const char *old_provider) {
  char ini[2048];
  snprintf(ini, sizeof ini,
           "[provider.old]\npath = %s\n[provider.fake]\npath = %s\n[provider.cpu]\npath = %s\n",
           old_provider, FAKE_DEVICE3, CPU_PROVIDER);
  onyx_runtime *rt = runtime_ini(ini);
  assert_int_equal(onyx_runtime_provider_count(rt), 4);
  assert_string_equal(onyx_runtime_provider_device(rt, 0), "cuda:0"); /* v2: device 0 */
  assert_non_null(onyx_runtime_kernel(rt, 0, 0));                     /* a v2 table */
  onyx_session *s = session(rt, "fake_two_devices.onnx");
  /* The v2 Twice has no supports(): it takes the pinned node too. */
  static const char *const want[] = {"cuda:0", "fake:1", "cuda:0", "cuda:0"};
  expect_devices(s, want, 4);
  assert_string_equal(onyx_session_node_provider(s, 0), "old");
  float x[6];
  onyx_tensor in = x_in(x), out;
  assert_int_equal(run(s, NULL, &in, 1, &out), ONYX_STATUS_OK);
  for (int i = 0; i < 6; ++i) assert_true(((float *)out.data)[i] == 24.0f * X[i]);
  onyx_tensor_data_free(out.data);
  assert_nothing_booked(rt);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
}

static void v2_and_v3_side_by_side(void **state) {
  (void)state;
  side_by_side(FAKE_DEVICE);
}

static void frozen_v2_headers_build_loads(void **state) {
  (void)state;
  side_by_side(FAKE_DEVICE_V2HDR);
}

static onyx_status try_session(onyx_runtime *rt, const char *model, char *msg, size_t cap) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", MODELS_DIR, model);
  onyx_session *s = NULL;
  onyx_error *e = NULL;
  onyx_status st = onyx_session_create(rt, path, NULL, &s, &e);
  snprintf(msg, cap, "%s", onyx_error_message(e));
  onyx_error_free(e);
  onyx_session_destroy(s);
  return st;
}

/* Placement refusals carry what the instance said (supports given the instance). */
static void refusals_name_device_and_reason(void **state) {
  (void)state;
  onyx_runtime *rt = runtime3("devices = 0");
  char msg[2048];
  assert_int_equal(try_session(rt, "fake_pinned.onnx", msg, sizeof msg), ONYX_STATUS_UNSUPPORTED);
  assert_non_null(strstr(msg, "node 'pinned'"));
  assert_non_null(strstr(msg, "fake (fake:0): the node asks for device 1; this is fake device 0"));
  assert_int_equal(try_session(rt, "fake_two_devices.onnx", msg, sizeof msg),
                   ONYX_STATUS_UNSUPPORTED);
  assert_non_null(strstr(msg, "no provider has a kernel for onyx.fake::Triple"));
  onyx_runtime_destroy(rt);
}

/* Planning fails with the kernel's own words, given through its v3 sink. */
static void planning_failure_shows_the_kernels_reason(void **state) {
  (void)state;
  onyx_runtime *rt = runtime3("");
  onyx_session *s = session(rt, "fake_picky.onnx");
  float x[6];
  onyx_tensor in = x_in(x), out;
  assert_int_equal(run(s, NULL, &in, 1, &out), ONYX_STATUS_OK); /* a matrix: fine */
  onyx_tensor_data_free(out.data);
  in.rank = 3;
  in.dims[0] = 1, in.dims[1] = 2, in.dims[2] = 3;
  onyx_error *e = NULL;
  assert_int_equal(onyx_session_run(s, NULL, &in, 1, &out, &e), ONYX_STATUS_INVALID_ARGUMENT);
  const char *msg = onyx_error_message(e);
  print_message("%s\n", msg);
  assert_non_null(strstr(msg, "planning node 'picky' (#0, Picky on fake, device fake:0)"));
  assert_non_null(strstr(msg, "Picky on fake device 0 takes a matrix; input 0 has rank 3"));
  onyx_error_free(e);
  assert_nothing_booked(rt);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
}

/* A `devices` entry beyond what the provider reports is a configuration error. */
static void devices_beyond_the_provider_are_refused(void **state) {
  (void)state;
  char ini[1024], path_msg[2048];
  snprintf(ini, sizeof ini, "[provider.fake]\npath = %s\ndevices = 0, 5\n", FAKE_DEVICE3);
  char *path = write_temp_file(".ini", ini);
  onyx_runtime *rt = NULL;
  onyx_error *e = NULL;
  assert_int_equal(onyx_runtime_create(path, &rt, &e), ONYX_STATUS_INVALID_CONFIG);
  snprintf(path_msg, sizeof path_msg, "%s", onyx_error_message(e));
  assert_non_null(strstr(path_msg, "devices names device 5, but it reports 2"));
  onyx_error_free(e);
  remove_temp_file(path);
  assert_int_equal(stats3().live_blocks, 0);
}

static onyx_status runtime_msg(const char *ini, onyx_runtime **out, char *msg, size_t cap) {
  char *path = write_temp_file(".ini", ini);
  assert_non_null(path);
  onyx_error *e = NULL;
  onyx_status st = onyx_runtime_create(path, out, &e);
  snprintf(msg, cap, "%s", onyx_error_message(e));
  onyx_error_free(e);
  remove_temp_file(path);
  return st;
}

/* A device that declines at open is left out (the others still open); a kernel
 * registered without compute fails the load, naming provider, device and kernel. */
static void open_and_registration_failures(void **state) {
  (void)state;
  char ini[1024], msg[2048];
  snprintf(ini, sizeof ini, "[provider.fake]\npath = %s\noption.absent = 1\n", FAKE_DEVICE3);
  onyx_runtime *rt = NULL;
  assert_int_equal(runtime_msg(ini, &rt, msg, sizeof msg), ONYX_STATUS_OK);
  assert_int_equal(onyx_runtime_provider_count(rt), 1);
  assert_string_equal(onyx_runtime_provider_device(rt, 0), "fake:0");
  onyx_runtime_destroy(rt);
  snprintf(ini, sizeof ini, "[provider.fake]\npath = %s\noption.absent = 0\ndevices = 0\n",
           FAKE_DEVICE3);
  rt = NULL;
  assert_int_equal(runtime_msg(ini, &rt, msg, sizeof msg), ONYX_STATUS_INVALID_CONFIG);
  assert_null(rt); /* nothing else to load: no enabled provider */
  snprintf(ini, sizeof ini, "[provider.fake]\npath = %s\noption.bad_kernel = 1\n", FAKE_DEVICE3);
  assert_int_equal(runtime_msg(ini, &rt, msg, sizeof msg), ONYX_STATUS_PROVIDER_ERROR);
  assert_non_null(strstr(msg, "provider 'fake'"));
  assert_non_null(strstr(msg, "device fake:1: kernel registration 0 (onyx.fake::Broken) is "
                              "incomplete"));
  assert_int_equal(stats3().live_blocks, 0);
}

/* A KV cache on one device, named by its tier. */
static void kv_cache_on_a_named_device(void **state) {
  (void)state;
  onyx_runtime *rt = runtime3("");
  onyx_kv_cache_options o = {.struct_size = sizeof o,
                             .layers = 2,
                             .batch = 1,
                             .kv_heads = 2,
                             .head_size = 8,
                             .dtype = ONYX_DTYPE_FLOAT32,
                             .max_length = 64,
                             .growth = ONYX_KV_GROWTH_REALLOC,
                             .provider = "fake:1"};
  onyx_kv_cache *kv = NULL;
  onyx_error *e = NULL;
  uint64_t on1 = stats3().live_bytes_on[1], on0 = stats3().live_bytes_on[0];
  assert_int_equal(onyx_kv_cache_create(rt, &o, &kv, &e), ONYX_STATUS_OK);
  assert_int_equal(onyx_kv_cache_reserve(kv, 16, &e), ONYX_STATUS_OK);
  onyx_tensor k, v;
  assert_int_equal(onyx_kv_cache_views(kv, 1, &k, &v), ONYX_STATUS_OK);
  assert_int_equal(k.device, ONYX_DEVICE_OTHER);
  assert_int_equal(k.device_id, 1);
  assert_true(stats3().live_bytes_on[1] > on1);
  assert_int_equal(stats3().live_bytes_on[0], on0);
  onyx_kv_cache_destroy(kv);
  assert_nothing_booked(rt);
  onyx_runtime_destroy(rt);
}

static void run_captured(onyx_session *s, float seed) {
  float x[6];
  for (int i = 0; i < 6; ++i) x[i] = seed - 1.25f * (float)i;
  onyx_run_options ro = {.struct_size = sizeof ro, .capture_graph = true};
  onyx_tensor in = {.dtype = ONYX_DTYPE_FLOAT32, .rank = 2, .dims = {2, 3}, .data = x}, out;
  assert_int_equal(run(s, &ro, &in, 1, &out), ONYX_STATUS_OK);
  for (int i = 0; i < 6; ++i) assert_true(((float *)out.data)[i] == 24.0f * x[i]);
  onyx_tensor_data_free(out.data);
}

/* Device graphs are per instance (its "onyx.graphs" extension): a session on one
 * instance records and replays; one spread over two runs node by node. */
static void graphs_are_per_instance(void **state) {
  (void)state;
  onyx_runtime *rt = runtime3("devices = 1");
  onyx_session *s = session(rt, "fake_two_devices.onnx");
  onyx_graph_stats g = {.struct_size = sizeof g};
  onyx_session_graph_stats(s, &g);
  assert_true(g.available);
  for (int k = 0; k < 4; ++k) run_captured(s, 2.0f + (float)k);
  onyx_session_graph_stats(s, &g);
  assert_int_equal(g.captures, 1);
  assert_true(g.replays >= 1);
  onyx_session_destroy(s);
  assert_nothing_booked(rt);
  onyx_runtime_destroy(rt);

  rt = runtime3("");
  s = session(rt, "fake_two_devices.onnx");
  g = (onyx_graph_stats){.struct_size = sizeof g};
  onyx_session_graph_stats(s, &g);
  assert_false(g.available);
  for (int k = 0; k < 3; ++k) run_captured(s, 1.0f - (float)k);
  onyx_session_graph_stats(s, &g);
  assert_int_equal(g.captures, 0);
  onyx_session_destroy(s);
  assert_nothing_booked(rt);
  onyx_runtime_destroy(rt);
  assert_int_equal(stats3().live_graphs, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(one_session_on_two_devices),
      cmocka_unit_test(without_peer_copies_values_go_through_the_host),
      cmocka_unit_test(shared_weights_on_each_device),
      cmocka_unit_test(devices_line_orders_placement),
      cmocka_unit_test(v2_and_v3_side_by_side),
      cmocka_unit_test(frozen_v2_headers_build_loads),
      cmocka_unit_test(refusals_name_device_and_reason),
      cmocka_unit_test(planning_failure_shows_the_kernels_reason),
      cmocka_unit_test(devices_beyond_the_provider_are_refused),
      cmocka_unit_test(graphs_are_per_instance),
      cmocka_unit_test(open_and_registration_failures),
      cmocka_unit_test(kv_cache_on_a_named_device),
  };
  return cmocka_run_group_tests(tests, setup3, teardown3);
}
