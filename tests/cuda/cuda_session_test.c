/*
 * The CUDA provider through the core: loading from plugins.ini (declining cleanly
 * without a device, refusing in strict mode), placement, and the governor's books —
 * every byte a run takes on the device (activations, transfers, the cuBLASLt STEP
 * workspace, cached initializers) is returned, and the device's free memory with it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "model_builder.h"
#include "onyx.h"
#include "test_util.h"

static onyx_status runtime_from(const char *ini, onyx_runtime **out, char *msg, size_t cap) {
  char *path = tu_write_temp(ini);
  assert_non_null(path);
  onyx_error *e = NULL;
  onyx_runtime *rt = NULL;
  onyx_status st = onyx_runtime_create(path, &rt, &e);
  snprintf(msg, cap, "%s", e ? onyx_error_message(e) : "");
  onyx_error_free(e);
  unlink(path);
  free(path);
  *out = rt;
  return st;
}

static void cuda_first_ini(char *ini, size_t cap, bool strict) {
  snprintf(ini, cap,
           "[onyx]\nstrict = %s\n[provider.cuda]\npath = %s\noption.device = 0\n"
           "[provider.cpu]\npath = %s\n",
           strict ? "true" : "false", ONYX_CUDA_SO, ONYX_CPU_SO);
}

/* MatMul (weights) -> Add -> Softmax -> Gemm (transB): a few kernels, one with a
 * cuBLASLt workspace, initializers cached on the device. */
static uint8_t *small_model(size_t *size) {
  mb_model *m = mb_new(13);
  int64_t x[] = {4, 32}, w[] = {32, 48}, b[] = {48}, w2[] = {16, 48};
  mb_input(m, "x", ONYX_DTYPE_FLOAT32, 2, x);
  uint64_t seed = 7;
  onyx_tensor tw = tu_random_tensor(&seed, ONYX_DTYPE_FLOAT32, 2, w, -1, 1);
  onyx_tensor tb = tu_random_tensor(&seed, ONYX_DTYPE_FLOAT32, 1, b, -1, 1);
  onyx_tensor tw2 = tu_random_tensor(&seed, ONYX_DTYPE_FLOAT32, 2, w2, -1, 1);
  mb_initializer(m, "w", ONYX_DTYPE_FLOAT32, 2, w, tw.data, 32 * 48 * 4);
  mb_initializer(m, "b", ONYX_DTYPE_FLOAT32, 1, b, tb.data, 48 * 4);
  mb_initializer(m, "w2", ONYX_DTYPE_FLOAT32, 2, w2, tw2.data, 16 * 48 * 4);
  free(tw.data);
  free(tb.data);
  free(tw2.data);
  const char *n1[] = {"x", "w"}, *o1[] = {"h"};
  mb_add_node(m, "MatMul", "", n1, 2, o1, 1);
  const char *n2[] = {"h", "b"}, *o2[] = {"hb"};
  mb_add_node(m, "Add", "", n2, 2, o2, 1);
  const char *n3[] = {"hb"}, *o3[] = {"p"};
  mb_add_node(m, "Softmax", "", n3, 1, o3, 1);
  const char *n4[] = {"p", "w2"}, *o4[] = {"y"};
  mb_attr_int(mb_add_node(m, "Gemm", "", n4, 2, o4, 1), "transB", 1);
  mb_output(m, "y", ONYX_DTYPE_FLOAT32);
  uint8_t *bytes = mb_finish(m, size);
  mb_free(m);
  return bytes;
}

static void declines_cleanly_or_loads(void **state) {
  (void)state;
  char ini[2048], msg[2048];
  onyx_runtime *rt = NULL;
  cuda_first_ini(ini, sizeof ini, false);
  assert_int_equal(runtime_from(ini, &rt, msg, sizeof msg), ONYX_STATUS_OK);
  int count = 0;
  bool have = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  (void)cudaGetLastError();
  if (!have) {
    /* The CPU provider takes over; strict mode refuses with the provider's reason. */
    assert_int_equal(onyx_runtime_provider_count(rt), 1);
    assert_string_equal(onyx_runtime_provider_name(rt, 0), "cpu");
    onyx_runtime_destroy(rt);
    cuda_first_ini(ini, sizeof ini, true);
    assert_int_equal(runtime_from(ini, &rt, msg, sizeof msg), ONYX_STATUS_DEVICE_UNAVAILABLE);
    print_message("strict: %s\n", msg);
    assert_non_null(strstr(msg, "declined: no CUDA device (cudaGetDeviceCount: "));
    assert_null(rt);
    printf("skipped: no CUDA device (placement half of declines_cleanly_or_loads)\n");
    return;
  }
  assert_int_equal(onyx_runtime_provider_count(rt), 2);
  assert_string_equal(onyx_runtime_provider_name(rt, 0), "cuda");
  size_t size = 0;
  uint8_t *bytes = small_model(&size);
  onyx_session *s = NULL;
  onyx_error *e = NULL;
  onyx_session_options so = {.struct_size = sizeof so, .print_placement = true};
  assert_int_equal(onyx_session_create_from_bytes(rt, bytes, size, &so, &s, &e), ONYX_STATUS_OK);
  for (size_t i = 0; i < onyx_session_node_count(s); ++i)
    assert_string_equal(onyx_session_node_provider(s, i), "cuda");
  onyx_session_destroy(s);
  free(bytes);
  onyx_runtime_destroy(rt);
}

static void books_balance(void **state) {
  (void)state;
  if (!cuda_device_present("books_balance")) {
    skip();
    return;
  }
  char ini[2048], msg[2048];
  onyx_runtime *rt = NULL;
  cuda_first_ini(ini, sizeof ini, true);
  assert_int_equal(runtime_from(ini, &rt, msg, sizeof msg), ONYX_STATUS_OK);
  size_t free0 = 0, total = 0;
  assert_int_equal(cudaMemGetInfo(&free0, &total), cudaSuccess);
  size_t size = 0;
  uint8_t *bytes = small_model(&size);
  onyx_session *s = NULL;
  onyx_error *e = NULL;
  assert_int_equal(onyx_session_create_from_bytes(rt, bytes, size, NULL, &s, &e), ONYX_STATUS_OK);

  uint64_t seed = 3;
  int64_t xd[] = {4, 32};
  onyx_tensor x = tu_random_tensor(&seed, ONYX_DTYPE_FLOAT32, 2, xd, -1, 1);
  /* The plan sees the cuBLASLt workspace as STEP memory on the CUDA tier. */
  onyx_plan *plan = NULL;
  assert_int_equal(onyx_session_plan(s, &x, 1, &plan, &e), ONYX_STATUS_OK);
  uint64_t step = onyx_plan_bytes(plan, ONYX_LIFETIME_STEP, "cuda:0");
  print_message("planned STEP workspace on cuda:0: %llu bytes\n", (unsigned long long)step);
  assert_true(step >= (1u << 20));
  onyx_plan_destroy(plan);

  float first[64];
  for (int run = 0; run < 3; ++run) {
    onyx_tensor y;
    memset(&y, 0, sizeof y);
    onyx_status st = onyx_session_run(s, NULL, &x, 1, &y, &e);
    if (st != ONYX_STATUS_OK) fail_msg("run %d: %s", run, onyx_error_message(e));
    assert_int_equal(y.rank, 2);
    assert_int_equal(y.dims[0], 4);
    assert_int_equal(y.dims[1], 16);
    if (run == 0)
      memcpy(first, y.data, sizeof first);
    else
      assert_memory_equal(first, y.data, sizeof first); /* deterministic */
    onyx_tensor_data_free(y.data);
    uint64_t used[ONYX_REQUESTER_COUNT_], peak[ONYX_REQUESTER_COUNT_];
    onyx_runtime_memory_usage(rt, used, peak);
    print_message("run %d: used step %llu, activations %llu; peak step %llu\n", run,
                  (unsigned long long)used[ONYX_REQUESTER_WORKSPACE_STEP],
                  (unsigned long long)used[ONYX_REQUESTER_ACTIVATIONS],
                  (unsigned long long)peak[ONYX_REQUESTER_WORKSPACE_STEP]);
    assert_int_equal(used[ONYX_REQUESTER_WORKSPACE_STEP], 0);
    assert_true(peak[ONYX_REQUESTER_WORKSPACE_STEP] >= (1u << 20));
  }
  free(x.data);
  onyx_session_destroy(s);
  free(bytes);
  uint64_t used[ONYX_REQUESTER_COUNT_];
  onyx_runtime_memory_usage(rt, used, NULL);
  for (int r = 0; r < ONYX_REQUESTER_COUNT_; ++r) {
    if (used[r] != 0)
      fail_msg("%llu bytes of %s still booked after the session ended", (unsigned long long)used[r],
               onyx_requester_name((uint32_t)r));
  }
  size_t free1 = 0;
  assert_int_equal(cudaMemGetInfo(&free1, &total), cudaSuccess);
  print_message("device free memory %zu before, %zu after\n", free0, free1);
  /* Everything cudaMalloc'd went back (2 MiB of slack for the driver's own use). */
  assert_true(free1 + (2u << 20) >= free0);
  onyx_runtime_destroy(rt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(declines_cleanly_or_loads),
      cmocka_unit_test(books_balance),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
