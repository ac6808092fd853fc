/*
 * Device graphs on the fake-device mock, whose kernels record instead of running
 * while a capture is open (tests/mock/fake_device_provider.c): the first run of a
 * geometry measures, the second records and replays, later runs replay — with the
 * new input values, writing the device buffer in place, and without a kernel's
 * compute being called. A device input that moves invalidates the graph. A step
 * whose host side reads device data, or a kernel a capture cannot record, is
 * refused with the reason and runs node by node with the right results. Nothing
 * stays booked after the session, a cancelled recording leaves the key for the next
 * run, and a graph's memory is the first the governor takes back under pressure.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "fake_session.h"

/* `fake_limit`: the fake device tier's byte limit, 0 for its default. */
static onyx_runtime *runtime_limited(uint64_t fake_limit) {
  char ini[2048], limit[64] = "";
  if (fake_limit)
    snprintf(limit, sizeof limit, "memory_limit = %llu\n", (unsigned long long)fake_limit);
  snprintf(ini, sizeof ini, "[provider.fake]\npath = %s\n%s[provider.cpu]\npath = %s\n",
           FAKE_DEVICE, limit, CPU_PROVIDER);
  return runtime_ini(ini);
}

static onyx_runtime *runtime(void) { return runtime_limited(0); }

static onyx_graph_stats graph_stats(const onyx_session *s) {
  onyx_graph_stats g = {.struct_size = sizeof g};
  onyx_session_graph_stats(s, &g);
  return g;
}

/* A [2, 3] float buffer in fake device memory, filled with `v`. */
static void *device_buffer(float v) {
  void *p = NULL;
  assert_int_equal(g_table->device_alloc(NULL, 6 * sizeof(float), &p), ONYX_STATUS_OK);
  float host[6];
  for (int i = 0; i < 6; ++i) host[i] = v;
  onyx_tensor d = {.dtype = ONYX_DTYPE_FLOAT32,
                   .device = ONYX_DEVICE_CUDA,
                   .rank = 2,
                   .dims = {2, 3},
                   .data = p};
  onyx_tensor h = d;
  h.device = ONYX_DEVICE_HOST;
  h.data = host;
  assert_int_equal(g_table->copy(NULL, &d, &h), ONYX_STATUS_OK);
  return p;
}

static float device_value(void *p) { return ((const float *)p)[0]; } /* host memory in truth */

/* The inputs of fake_graph.onnx: x on the host, kv (writable) on the device. */
static const bool STEP_WRITABLE[2] = {false, true};

static void step_inputs(onyx_tensor in[2], float *x, void *kv) {
  in[0] = (onyx_tensor){.dtype = ONYX_DTYPE_FLOAT32, .rank = 2, .dims = {2, 3}, .data = x};
  in[1] = in[0];
  in[1].device = ONYX_DEVICE_CUDA;
  in[1].data = kv;
}

/* One step of fake_graph.onnx: y = 4·x (Twice, then Scale by Shape(x)[0] = 2), and
 * the device buffer kv grows by one in place. Returns how many checks of y (for this
 * step's x) and of the outputs' ownership failed; no cmocka asserts (threads). */
static int step_errors(onyx_session *s, void *kv, float seed, bool capture) {
  float x[6];
  for (int i = 0; i < 6; ++i) x[i] = seed + 0.5f * (float)i;
  bool borrowed[2] = {false, false};
  onyx_run_options ro = {.struct_size = sizeof ro,
                         .writable_inputs = STEP_WRITABLE,
                         .out_borrowed = borrowed,
                         .capture_graph = capture};
  onyx_tensor in[2];
  step_inputs(in, x, kv);
  onyx_tensor out[2];
  memset(out, 0, sizeof out);
  onyx_error *e = NULL;
  if (onyx_session_run(s, &ro, in, 2, out, &e) != ONYX_STATUS_OK) {
    fprintf(stderr, "run: %s\n", onyx_error_message(e));
    onyx_error_free(e);
    return 1;
  }
  const float *y = out[0].data;
  int errors = !borrowed[1] || out[1].data != kv || borrowed[0];
  for (int i = 0; i < 6; ++i) errors += y[i] != 4.0f * x[i];
  onyx_tensor_data_free(out[0].data);
  return errors;
}

static void step(onyx_session *s, void *kv, float seed, bool capture) {
  assert_int_equal(step_errors(s, kv, seed, capture), 0);
}

static void replays_with_new_inputs_and_writes_in_place(void **state) {
  (void)state;
  onyx_runtime *rt = runtime();
  onyx_session *s = session(rt, "fake_graph.onnx");
  void *kv = device_buffer(10.0f);
  assert_true(graph_stats(s).available);

  step(s, kv, 1.0f, true); /* measures */
  onyx_graph_stats g = graph_stats(s);
  assert_int_equal(g.captures, 0);
  assert_int_equal(g.replays, 0);
  assert_float_equal(device_value(kv), 11.0f, 0.0f);

  onyx_fake_device_stats before = stats();
  step(s, kv, -3.0f, true); /* records, then replays once */
  g = graph_stats(s);
  assert_int_equal(g.captures, 1);
  assert_int_equal(g.replays, 1);
  assert_true(g.held_bytes > 0);
  assert_float_equal(device_value(kv), 12.0f, 0.0f); /* recorded, not run twice */
  onyx_fake_device_stats after = stats();
  assert_int_equal(after.captures_begun - before.captures_begun, 1);
  assert_int_equal(after.graph_launches - before.graph_launches, 1);
  assert_int_equal(after.capture_misuse, before.capture_misuse);
  assert_int_equal(after.live_graphs, 1);

  before = stats();
  for (int k = 0; k < 5; ++k) step(s, kv, 2.25f * (float)k - 7.0f, true);
  after = stats();
  g = graph_stats(s);
  assert_int_equal(g.replays, 6);
  assert_int_equal(g.captures, 1);
  assert_int_equal(after.graph_launches - before.graph_launches, 5);
  assert_int_equal(after.submits, before.submits); /* no kernel compute ran */
  assert_int_equal(after.allocs, before.allocs);   /* and nothing was allocated */
  assert_float_equal(device_value(kv), 17.0f, 0.0f);

  /* A plain run of the same session is not affected by the graph. */
  step(s, kv, 0.75f, false);
  assert_float_equal(device_value(kv), 18.0f, 0.0f);
  assert_int_equal(graph_stats(s).replays, 6);

  onyx_session_destroy(s);
  g_table->device_free(NULL, kv);
  assert_int_equal(stats().live_graphs, 0);
  assert_nothing_booked(rt);
  onyx_runtime_destroy(rt);
}

static void a_moved_device_input_invalidates(void **state) {
  (void)state;
  onyx_runtime *rt = runtime();
  onyx_session *s = session(rt, "fake_graph.onnx");
  void *kv = device_buffer(0.0f);
  step(s, kv, 1.0f, true);
  step(s, kv, 2.0f, true);
  assert_int_equal(graph_stats(s).captures, 1);
  /* The buffer "grew by copy": a new address. The old graph must not be replayed. */
  void *moved = device_buffer(device_value(kv));
  g_table->device_free(NULL, kv);
  step(s, moved, 3.0f, true); /* invalidates, measures again */
  onyx_graph_stats g = graph_stats(s);
  assert_int_equal(g.invalidations, 1);
  assert_int_equal(g.replays, 1);
  assert_int_equal(stats().live_graphs, 0);
  step(s, moved, 4.0f, true); /* records at the new address */
  step(s, moved, 5.0f, true);
  g = graph_stats(s);
  assert_int_equal(g.captures, 2);
  assert_int_equal(g.replays, 3);
  assert_float_equal(device_value(moved), 5.0f, 0.0f);

  onyx_session_release_graphs(s);
  g = graph_stats(s);
  assert_int_equal(g.invalidations, 2);
  assert_int_equal(g.held_bytes, 0);
  assert_int_equal(stats().live_graphs, 0);
  step(s, moved, 6.0f, true); /* measures again after the release */
  assert_float_equal(device_value(moved), 6.0f, 0.0f);
  onyx_session_destroy(s);
  g_table->device_free(NULL, moved);
  assert_nothing_booked(rt);
  onyx_runtime_destroy(rt);
}

/* Runs a one-input model [2, 3] -> [2, 3] and returns y[i] / x[i] checks via `f`. */
static void run_unary(onyx_session *s, float seed, float (*f)(float)) {
  float x[6];
  for (int i = 0; i < 6; ++i) x[i] = seed - 1.25f * (float)i;
  onyx_run_options ro = {.struct_size = sizeof ro, .capture_graph = true};
  onyx_tensor in = {.dtype = ONYX_DTYPE_FLOAT32, .rank = 2, .dims = {2, 3}, .data = x};
  onyx_tensor out;
  assert_int_equal(run(s, &ro, &in, 1, &out), ONYX_STATUS_OK);
  for (int i = 0; i < 6; ++i) assert_float_equal(((float *)out.data)[i], f(x[i]), 0.0f);
  onyx_tensor_data_free(out.data);
}

static float twice_relu_twice(float x) { return x > 0 ? 4.0f * x : 0.0f; }
static float twice_minus_one(float x) { return 2.0f * x - 1.0f; }

static void host_reading_device_data_is_refused(void **state) {
  (void)state;
  onyx_runtime *rt = runtime();
  onyx_session *s = session(rt, "fake_split.onnx"); /* Twice (fake), Relu (cpu), Twice */
  for (int k = 0; k < 4; ++k) run_unary(s, 3.0f - (float)k, twice_relu_twice);
  onyx_graph_stats g = graph_stats(s);
  assert_int_equal(g.captures, 0);
  assert_int_equal(g.replays, 0);
  assert_int_equal(g.refusals, 1);
  assert_non_null(strstr(g.last_refusal, "relu"));
  assert_non_null(strstr(g.last_refusal, "between host and device"));
  assert_int_equal(g.held_bytes, 0);
  assert_int_equal(stats().capture_misuse, 0); /* the core never let it reach the device */
  onyx_session_destroy(s);
  assert_nothing_booked(rt);
  onyx_runtime_destroy(rt);
}

static void uncapturable_kernel_is_refused(void **state) {
  (void)state;
  onyx_runtime *rt = runtime();
  onyx_session *s = session(rt, "fake_legacy.onnx");
  for (int k = 0; k < 4; ++k) run_unary(s, 1.5f * (float)k, twice_minus_one);
  onyx_graph_stats g = graph_stats(s);
  assert_int_equal(g.captures, 0);
  assert_int_equal(g.refusals, 1);
  assert_non_null(strstr(g.last_refusal, "could not complete the capture"));
  assert_int_equal(stats().live_graphs, 0);
  onyx_session_destroy(s);
  assert_nothing_booked(rt);
  onyx_runtime_destroy(rt);
}

static bool cancel_at_node_1(void *user, size_t next) {
  (void)user;
  return next == 1;
}

static void cancelled_recording_keeps_the_key(void **state) {
  (void)state;
  onyx_runtime *rt = runtime();
  onyx_session *s = session(rt, "fake_graph.onnx");
  void *kv = device_buffer(0.0f);
  step(s, kv, 1.0f, true);
  float x[6] = {1, 2, 3, 4, 5, 6};
  onyx_run_options ro = {.struct_size = sizeof ro,
                         .should_cancel = cancel_at_node_1,
                         .writable_inputs = STEP_WRITABLE,
                         .capture_graph = true};
  onyx_tensor in[2];
  step_inputs(in, x, kv);
  onyx_tensor out[2];
  onyx_error *e = NULL;
  assert_int_equal(onyx_session_run(s, &ro, in, 2, out, &e), ONYX_STATUS_CANCELLED);
  onyx_error_free(e);
  onyx_graph_stats g = graph_stats(s);
  assert_int_equal(g.captures, 0);
  assert_int_equal(g.refusals, 0);
  assert_int_equal(g.held_bytes, 0);
  assert_float_equal(device_value(kv), 1.0f, 0.0f); /* nothing ran */
  step(s, kv, 2.0f, true);                          /* records now */
  assert_int_equal(graph_stats(s).captures, 1);
  assert_float_equal(device_value(kv), 2.0f, 0.0f);
  onyx_session_destroy(s);
  g_table->device_free(NULL, kv);
  assert_nothing_booked(rt);
  onyx_runtime_destroy(rt);
}

/* A request that would not fit beside a graph takes the graph's memory first. */
static void graph_memory_is_reclaimed_first(void **state) {
  (void)state;
  /* 1 MiB for the KV cache below plus 1 KiB: less than the graph holds. */
  onyx_runtime *rt = runtime_limited((1u << 20) + 1024);
  onyx_session *s = session(rt, "fake_graph.onnx");
  void *kv = device_buffer(0.0f);
  for (int k = 0; k < 3; ++k) step(s, kv, (float)k, true);
  onyx_graph_stats g = graph_stats(s);
  assert_int_equal(g.captures, 1);
  assert_true(g.held_bytes > 1024);

  onyx_kv_cache_options ko = {.struct_size = sizeof ko,
                              .layers = 1,
                              .batch = 1,
                              .kv_heads = 1,
                              .head_size = 64,
                              .dtype = ONYX_DTYPE_FLOAT32,
                              .max_length = 2048,
                              .growth = ONYX_KV_GROWTH_REALLOC,
                              .provider = "fake"};
  onyx_kv_cache *cache = NULL;
  onyx_error *e = NULL;
  assert_int_equal(onyx_kv_cache_create(rt, &ko, &cache, &e), ONYX_STATUS_OK);
  onyx_status st = onyx_kv_cache_reserve(cache, 2048, &e); /* 2 × 512 KiB */
  if (st != ONYX_STATUS_OK) print_message("reserve: %s\n", onyx_error_message(e));
  onyx_error_free(e);
  assert_int_equal(st, ONYX_STATUS_OK);
  g = graph_stats(s);
  assert_int_equal(g.reclaims, 1);
  assert_int_equal(g.held_bytes, 0);
  assert_int_equal(g.invalidations, 0);
  assert_int_equal(stats().live_graphs, 0);
  onyx_kv_cache_destroy(cache);

  step(s, kv, 5.0f, true); /* measured again */
  step(s, kv, 6.0f, true); /* and recorded */
  assert_int_equal(graph_stats(s).captures, 2);
  assert_float_equal(device_value(kv), 5.0f, 0.0f);
  onyx_session_destroy(s);
  g_table->device_free(NULL, kv);
  assert_nothing_booked(rt);
  onyx_runtime_destroy(rt);
}

/* Two sessions on one device from two threads: one records again and again (its
 * graphs released every few steps), the other runs node by node. Nothing of one may
 * land in the other's capture: every output is right and every in-place update
 * happens exactly once. */
typedef struct worker {
  onyx_session *s;
  void *kv;
  bool capture;
  int steps, release_every, errors;
} worker;

static void *worker_main(void *arg) {
  worker *w = arg;
  for (int k = 0; k < w->steps; ++k) {
    w->errors += step_errors(w->s, w->kv, 0.125f * (float)k - 3.0f, w->capture);
    if (w->release_every && k % w->release_every == w->release_every - 1)
      onyx_session_release_graphs(w->s);
  }
  return NULL;
}

static void recording_excludes_other_threads(void **state) {
  (void)state;
  onyx_runtime *rt = runtime();
  worker w[2] = {
      {.s = session(rt, "fake_graph.onnx"),
       .kv = device_buffer(0.0f),
       .capture = true,
       .steps = 300,
       .release_every = 5},
      {.s = session(rt, "fake_graph.onnx"), .kv = device_buffer(0.0f), .steps = 600},
  };
  uint64_t misuse = stats().capture_misuse;
  pthread_t t[2];
  for (int i = 0; i < 2; ++i) assert_int_equal(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
  for (int i = 0; i < 2; ++i) pthread_join(t[i], NULL);
  onyx_graph_stats g = graph_stats(w[0].s);
  print_message("recorder: %llu captures, %llu replays; errors %d / %d\n",
                (unsigned long long)g.captures, (unsigned long long)g.replays, w[0].errors,
                w[1].errors);
  assert_int_equal(w[0].errors, 0);
  assert_int_equal(w[1].errors, 0);
  assert_true(g.captures >= 50);
  assert_float_equal(device_value(w[0].kv), 300.0f, 0.0f);
  assert_float_equal(device_value(w[1].kv), 600.0f, 0.0f);
  assert_int_equal(stats().capture_misuse, misuse);
  for (int i = 0; i < 2; ++i) {
    onyx_session_destroy(w[i].s);
    g_table->device_free(NULL, w[i].kv);
  }
  assert_nothing_booked(rt);
  onyx_runtime_destroy(rt);
}

/* A profiled session times its nodes on plain runs and its replays as one line. */
static void profile_times_nodes_and_replays(void **state) {
  (void)state;
  onyx_runtime *rt = runtime();
  char path[1024];
  snprintf(path, sizeof path, "%s/fake_graph.onnx", MODELS_DIR);
  onyx_session_options so = {.struct_size = sizeof so, .profile = true};
  onyx_session *s = NULL;
  onyx_error *e = NULL;
  assert_int_equal(onyx_session_create(rt, path, &so, &s, &e), ONYX_STATUS_OK);
  void *kv = device_buffer(0.0f);
  for (int k = 0; k < 5; ++k) step(s, kv, (float)k, true); /* measure, record, 4 replays */
  FILE *f = tmpfile();
  assert_non_null(f);
  onyx_session_write_profile(s, f);
  rewind(f);
  char text[4096];
  size_t len = fread(text, 1, sizeof text - 1, f);
  text[len] = '\0';
  fclose(f);
  print_message("%s", text);
  assert_non_null(strstr(text, "1 planned runs, 4 graph replays"));
  assert_non_null(strstr(text, "Twice"));
  assert_non_null(strstr(text, "Inplace"));
  assert_non_null(strstr(text, "(device graph replays)"));
  onyx_session_destroy(s);
  g_table->device_free(NULL, kv);
  assert_nothing_booked(rt);
  onyx_runtime_destroy(rt);
}

/* A caller built against the header before capture_graph runs plainly. */
static void older_options_struct_never_captures(void **state) {
  (void)state;
  onyx_runtime *rt = runtime();
  onyx_session *s = session(rt, "fake_split.onnx");
  float x[6] = {1, -2, 3, -4, 5, -6};
  onyx_run_options ro = {.struct_size = offsetof(onyx_run_options, capture_graph),
                         .capture_graph = true};
  onyx_tensor in = {.dtype = ONYX_DTYPE_FLOAT32, .rank = 2, .dims = {2, 3}, .data = x};
  onyx_tensor out;
  for (int k = 0; k < 3; ++k) {
    assert_int_equal(run(s, &ro, &in, 1, &out), ONYX_STATUS_OK);
    onyx_tensor_data_free(out.data);
  }
  onyx_graph_stats g = graph_stats(s);
  assert_int_equal(g.captures + g.refusals + g.replays, 0);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(replays_with_new_inputs_and_writes_in_place),
      cmocka_unit_test(a_moved_device_input_invalidates),
      cmocka_unit_test(host_reading_device_data_is_refused),
      cmocka_unit_test(uncapturable_kernel_is_refused),
      cmocka_unit_test(cancelled_recording_keeps_the_key),
      cmocka_unit_test(graph_memory_is_reclaimed_first),
      cmocka_unit_test(recording_excludes_other_threads),
      cmocka_unit_test(profile_times_nodes_and_replays),
      cmocka_unit_test(older_options_struct_never_captures),
  };
  return cmocka_run_group_tests(tests, fake_setup, fake_teardown);
}
