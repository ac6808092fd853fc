/*
 * The executor's host<->device paths on the fake-device mock (a device provider whose
 * "device memory" is host memory behind device_alloc/copy): a kernel's host_inputs
 * keep an input on the host (or bring a device value back), never to the device; a
 * table that predates the field moves it like any other input; a graph split across
 * cpu and the device gives the right outputs and leaves no byte booked; a kernel may
 * not alias an output to a copy made for its call; weights a device kernel reads are
 * on the device once the session exists, and refused then when they do not fit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "fake_session.h"

static onyx_runtime *runtime(bool with_cpu) {
  char ini[2048];
  if (with_cpu)
    snprintf(ini, sizeof ini, "[provider.fake]\npath = %s\n[provider.cpu]\npath = %s\n",
             FAKE_DEVICE, CPU_PROVIDER);
  else
    snprintf(ini, sizeof ini, "[provider.fake]\npath = %s\n", FAKE_DEVICE);
  return runtime_ini(ini);
}

static const float X[6] = {1.5f, -2.0f, 3.25f, 0.5f, -0.75f, 8.0f};

/* The caller's int64 buffer is what the kernel reads: no copy either way. */
static void host_input_stays_in_the_callers_buffer(void **state) {
  (void)state;
  onyx_runtime *rt = runtime(false);
  onyx_session *s = session(rt, "fake_scale.onnx");
  float x[6];
  memcpy(x, X, sizeof x);
  int64_t n[1] = {3};
  onyx_tensor in[2] = {
      {.dtype = ONYX_DTYPE_FLOAT32, .rank = 2, .dims = {2, 3}, .data = x},
      {.dtype = ONYX_DTYPE_INT64, .rank = 1, .dims = {1}, .data = n},
  };
  onyx_fake_device_stats before = stats();
  onyx_tensor out;
  assert_int_equal(run(s, NULL, in, 2, &out), ONYX_STATUS_OK);
  onyx_fake_device_stats after = stats();
  assert_int_equal(after.scale_computes - before.scale_computes, 1);
  assert_true(after.in0_on_device); /* x went through device_alloc + copy */
  assert_int_equal(after.in1_device, ONYX_DEVICE_HOST);
  assert_false(after.in1_on_device);
  assert_ptr_equal(after.in1_data, n); /* the caller's own buffer */
  assert_true(after.ws_on_device);
  assert_int_equal(after.copies_h2d - before.copies_h2d, 1); /* x only, never n */
  assert_int_equal(after.copies_d2h - before.copies_d2h, 1); /* the output */
  assert_int_equal(after.syncs - before.syncs, 1);           /* for the output alone */
  assert_int_equal(out.device, ONYX_DEVICE_HOST);
  for (int i = 0; i < 6; ++i) assert_true(((float *)out.data)[i] == 3.0f * X[i]);
  onyx_tensor_data_free(out.data);
  assert_nothing_booked(rt);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
  assert_int_equal(stats().live_blocks, 0);
}

/* A value produced on the device is brought back to the host for the kernel. */
static void device_value_is_brought_back(void **state) {
  (void)state;
  onyx_runtime *rt = runtime(false);
  onyx_session *s = session(rt, "fake_count_scale.onnx");
  float x[6];
  memcpy(x, X, sizeof x);
  onyx_tensor in = {.dtype = ONYX_DTYPE_FLOAT32, .rank = 2, .dims = {2, 3}, .data = x};
  onyx_fake_device_stats before = stats();
  onyx_tensor out;
  assert_int_equal(run(s, NULL, &in, 1, &out), ONYX_STATUS_OK);
  onyx_fake_device_stats after = stats();
  assert_int_equal(after.scale_computes - before.scale_computes, 1);
  assert_true(after.in0_on_device);
  assert_int_equal(after.in1_device, ONYX_DEVICE_HOST);
  assert_false(after.in1_on_device);
  /* Count's output came back (d2h + sync), then y; x went up once per consumer. */
  assert_int_equal(after.copies_d2h - before.copies_d2h, 2);
  assert_int_equal(after.copies_h2d - before.copies_h2d, 2);
  for (int i = 0; i < 6; ++i) assert_true(((float *)out.data)[i] == 6.0f * X[i]);
  onyx_tensor_data_free(out.data);
  assert_nothing_booked(rt);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
}

/* A table whose struct_size ends before host_inputs has none: n moves to the device. */
static void old_table_moves_the_input(void **state) {
  (void)state;
  onyx_runtime *rt = runtime(false);
  onyx_session *s = session(rt, "fake_scale_old.onnx");
  float x[6];
  memcpy(x, X, sizeof x);
  int64_t n[1] = {3};
  onyx_tensor in[2] = {
      {.dtype = ONYX_DTYPE_FLOAT32, .rank = 2, .dims = {2, 3}, .data = x},
      {.dtype = ONYX_DTYPE_INT64, .rank = 1, .dims = {1}, .data = n},
  };
  onyx_fake_device_stats before = stats();
  onyx_tensor out;
  assert_int_equal(run(s, NULL, in, 2, &out), ONYX_STATUS_OK);
  onyx_fake_device_stats after = stats();
  assert_int_equal(after.scale_computes - before.scale_computes, 1);
  assert_int_equal(after.in1_device, ONYX_DEVICE_CUDA);
  assert_true(after.in1_on_device);
  assert_int_equal(after.copies_h2d - before.copies_h2d, 2);
  for (int i = 0; i < 6; ++i) assert_true(((float *)out.data)[i] == 3.0f * X[i]);
  onyx_tensor_data_free(out.data);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
}

/* Twice (fake) -> Relu (cpu) -> Twice (fake): host->device, device->host, host->device
 * and the output back; every byte given back afterwards. */
static void split_across_cpu_and_device(void **state) {
  (void)state;
  onyx_runtime *rt = runtime(true);
  onyx_session *s = session(rt, "fake_split.onnx");
  float x[6];
  memcpy(x, X, sizeof x);
  onyx_tensor in = {.dtype = ONYX_DTYPE_FLOAT32, .rank = 2, .dims = {2, 3}, .data = x};
  for (int round = 0; round < 2; ++round) {
    onyx_fake_device_stats before = stats();
    onyx_tensor out;
    assert_int_equal(run(s, NULL, &in, 1, &out), ONYX_STATUS_OK);
    onyx_fake_device_stats after = stats();
    assert_int_equal(after.copies_h2d - before.copies_h2d, 2);
    assert_int_equal(after.copies_d2h - before.copies_d2h, 2);
    /* One sync per copy to the host; copies to the device stay queued. */
    assert_int_equal(after.syncs - before.syncs, 2);
    assert_int_equal(after.live_blocks, before.live_blocks);
    for (int i = 0; i < 6; ++i) {
      float want = 4.0f * (X[i] > 0 ? X[i] : 0.0f);
      assert_true(((float *)out.data)[i] == want);
    }
    onyx_tensor_data_free(out.data);
    assert_nothing_booked(rt);
  }
  uint64_t peak[ONYX_REQUESTER_COUNT_];
  onyx_runtime_memory_usage(rt, NULL, peak);
  assert_true(peak[ONYX_REQUESTER_ACTIVATIONS] > 0);
  assert_memory_equal(x, X, sizeof x);
  onyx_session_destroy(s);
  assert_nothing_booked(rt);
  onyx_runtime_destroy(rt);
  assert_int_equal(stats().live_blocks, 0);
  assert_int_equal(stats().allocs, stats().frees);
}

/* A writable caller input moved to the device for the call: the copy dies with the
 * call, so the kernel's alias is refused and it writes a fresh output. */
static void alias_to_a_moved_input_is_refused(void **state) {
  (void)state;
  onyx_runtime *rt = runtime(false);
  onyx_session *s = session(rt, "fake_inplace.onnx");
  float x[6];
  memcpy(x, X, sizeof x);
  onyx_tensor in = {.dtype = ONYX_DTYPE_FLOAT32, .rank = 2, .dims = {2, 3}, .data = x};
  bool writable[1] = {true}, borrowed[1] = {true};
  onyx_run_options ro = {
      .struct_size = sizeof ro, .writable_inputs = writable, .out_borrowed = borrowed};
  onyx_tensor out;
  assert_int_equal(run(s, &ro, &in, 1, &out), ONYX_STATUS_OK);
  assert_false(stats().inplace_aliased);
  assert_false(borrowed[0]);
  assert_int_equal(out.device, ONYX_DEVICE_HOST);
  for (int i = 0; i < 6; ++i) assert_true(((float *)out.data)[i] == X[i] + 1.0f);
  assert_memory_equal(x, X, sizeof x);
  onyx_tensor_data_free(out.data);
  assert_nothing_booked(rt);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
}

/* 64 × 64 float32 weights: 16 KiB on the host (the loaded model) and on the device. */
static void weights_reach_the_device_at_creation(void **state) {
  (void)state;
  onyx_runtime *rt = runtime(false);
  onyx_fake_device_stats before = stats();
  onyx_session *s = session(rt, "fake_weights.onnx");
  onyx_fake_device_stats after = stats();
  assert_int_equal(after.copies_h2d - before.copies_h2d, 1);
  uint64_t used[ONYX_REQUESTER_COUNT_];
  onyx_runtime_memory_usage(rt, used, NULL);
  assert_int_equal(used[ONYX_REQUESTER_WEIGHTS], 2 * 16384);
  onyx_tensor out;
  before = stats();
  assert_int_equal(run(s, NULL, NULL, 0, &out), ONYX_STATUS_OK);
  after = stats();
  assert_int_equal(after.copies_h2d, before.copies_h2d); /* not copied again */
  assert_float_equal(((float *)out.data)[1], 2.0f * 0.25f * -2.0f, 0.0f);
  onyx_tensor_data_free(out.data);
  onyx_session_destroy(s);
  assert_nothing_booked(rt);
  onyx_runtime_destroy(rt);
}

static void weights_that_do_not_fit_refuse_the_session(void **state) {
  (void)state;
  char ini[2048];
  snprintf(ini, sizeof ini, "[provider.fake]\npath = %s\nmemory_limit = 8KiB\n", FAKE_DEVICE);
  onyx_runtime *rt = runtime_ini(ini);
  char path[1024];
  snprintf(path, sizeof path, "%s/fake_weights.onnx", MODELS_DIR);
  onyx_session *s = NULL;
  onyx_error *e = NULL;
  assert_int_equal(onyx_session_create(rt, path, NULL, &s, &e), ONYX_STATUS_TIER_EXHAUSTED);
  const char *msg = onyx_error_message(e);
  print_message("refused: %s\n", msg);
  assert_non_null(strstr(msg, "initializer 'w'"));
  assert_non_null(strstr(msg, "16384"));
  assert_null(s);
  onyx_error_free(e);
  assert_nothing_booked(rt);
  onyx_runtime_destroy(rt);
}

/* Strict mode: Shape (only cpu has it) is shape arithmetic, kept on the host and not a
 * fallback; the tensors stay on the device. y = Twice(x) scaled by Shape(x)[0] = 2. */
static void strict_keeps_shape_arithmetic_on_the_host(void **state) {
  (void)state;
  char ini[2048];
  snprintf(ini, sizeof ini,
           "[onyx]\nstrict = true\n[provider.fake]\npath = %s\n"
           "[provider.cpu]\npath = %s\n",
           FAKE_DEVICE, CPU_PROVIDER);
  onyx_runtime *rt = runtime_ini(ini);
  onyx_session *s = session(rt, "fake_graph.onnx");
  for (size_t i = 0; i < onyx_session_node_count(s); ++i) {
    bool shape = strcmp(onyx_session_node_op(s, i), "Shape") == 0;
    assert_string_equal(onyx_session_node_provider(s, i), shape ? "cpu" : "fake");
  }
  float x[6], kv[6] = {0};
  memcpy(x, X, sizeof x);
  onyx_tensor in[2] = {
      {.dtype = ONYX_DTYPE_FLOAT32, .rank = 2, .dims = {2, 3}, .data = x},
      {.dtype = ONYX_DTYPE_FLOAT32, .rank = 2, .dims = {2, 3}, .data = kv},
  };
  onyx_tensor out[2];
  assert_int_equal(run(s, NULL, in, 2, out), ONYX_STATUS_OK);
  for (int i = 0; i < 6; ++i) assert_true(((float *)out[0].data)[i] == 4.0f * X[i]);
  onyx_tensor_data_free(out[0].data);
  onyx_tensor_data_free(out[1].data);
  onyx_session_destroy(s);
  assert_nothing_booked(rt);
  onyx_runtime_destroy(rt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(host_input_stays_in_the_callers_buffer),
      cmocka_unit_test(device_value_is_brought_back),
      cmocka_unit_test(old_table_moves_the_input),
      cmocka_unit_test(split_across_cpu_and_device),
      cmocka_unit_test(alias_to_a_moved_input_is_refused),
      cmocka_unit_test(weights_reach_the_device_at_creation),
      cmocka_unit_test(weights_that_do_not_fit_refuse_the_session),
      cmocka_unit_test(strict_keeps_shape_arithmetic_on_the_host),
  };
  return cmocka_run_group_tests(tests, fake_setup, fake_teardown);
}
