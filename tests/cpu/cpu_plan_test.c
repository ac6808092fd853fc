/*
 * The planner and the CPU kernels' infer together, through the public API: a
 * decoder's shape arithmetic (Shape → Gather → Unsqueeze → Concat → Reshape) on
 * activations whose values the planner never knows can only be planned because
 * Shape's infer hands its values back (the ABI's infer values buffer). The model,
 * shape_chain.onnx, is written by make_plan_model.py beside this file.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "onyx.h"

static onyx_runtime *g_rt;

static void expect_ok(onyx_status st, onyx_error *e, const char *what) {
  if (st != ONYX_STATUS_OK)
    fail_msg("%s: %s: %s", what, onyx_status_str(st), e ? onyx_error_message(e) : "");
}

static onyx_tensor host(uint32_t dtype, uint32_t rank, const int64_t *dims, void *data) {
  onyx_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = dtype;
  t.rank = rank;
  for (uint32_t i = 0; i < rank; ++i) t.dims[i] = dims[i];
  t.data = data;
  return t;
}

/* Plans and runs the model for batch b, sequence s, mask length t. */
static void plan_and_run(int64_t b, int64_t s, int64_t t) {
  onyx_session *sess = NULL;
  onyx_error *e = NULL;
  expect_ok(onyx_session_create(g_rt, PLAN_MODEL, NULL, &sess, &e), e, "session");
  int64_t xd[] = {b, s, 8}, md[] = {b, t};
  float *x = malloc((size_t)(b * s * 8) * sizeof *x);
  int64_t *mask = malloc((size_t)(b * t) * sizeof *mask);
  for (int64_t i = 0; i < b * s * 8; ++i) x[i] = (float)((i * 37) % 11) / 11.0f - 0.5f;
  for (int64_t i = 0; i < b * t; ++i) mask[i] = 1;
  onyx_tensor in[2] = {host(ONYX_DTYPE_FLOAT32, 3, xd, x), host(ONYX_DTYPE_INT64, 2, md, mask)};

  onyx_plan *plan = NULL;
  onyx_status st = onyx_session_plan(sess, in, 2, &plan, &e);
  expect_ok(st, e, "plan");
  onyx_plan_destroy(plan);

  onyx_tensor out[3];
  memset(out, 0, sizeof out);
  expect_ok(onyx_session_run(sess, NULL, in, 2, out, &e), e, "run");
  assert_int_equal(out[0].rank, 3);
  assert_int_equal(out[0].dims[0], b);
  assert_int_equal(out[0].dims[1], s);
  assert_int_equal(out[0].dims[2], 8);
  for (int64_t i = 0; i < b * s * 8; ++i) assert_true(isfinite(((float *)out[0].data)[i]));
  assert_int_equal(out[1].dtype, ONYX_DTYPE_INT32);
  assert_int_equal(out[1].rank, 1);
  for (int64_t i = 0; i < b; ++i) assert_int_equal(((int32_t *)out[1].data)[i], t - 1);
  assert_int_equal(out[2].rank, 0);
  assert_int_equal(*(int32_t *)out[2].data, t);
  for (int i = 0; i < 3; ++i) onyx_tensor_data_free(out[i].data);
  free(x);
  free(mask);
  onyx_session_destroy(sess);
}

static void test_plan_decoder_shape_chain(void **st) {
  (void)st;
  plan_and_run(2, 3, 5);
  plan_and_run(1, 1, 9);
  /* A mask too large for its values to be known: still planned, by infer. */
  plan_and_run(2, 1, 4097);
}

static int setup(void **st) {
  (void)st;
  char path[] = "/tmp/onyx_cpu_plan_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return -1;
  char ini[1024];
  int n = snprintf(ini, sizeof ini, "[provider.cpu]\npath = %s\n", CPU_PROVIDER);
  bool ok = write(fd, ini, (size_t)n) == n;
  close(fd);
  onyx_error *e = NULL;
  ok = ok && onyx_runtime_create(path, &g_rt, &e) == ONYX_STATUS_OK;
  if (!ok) fprintf(stderr, "runtime: %s\n", e ? onyx_error_message(e) : "cannot write config");
  onyx_error_free(e);
  unlink(path);
  return ok ? 0 : -1;
}

static int teardown(void **st) {
  (void)st;
  onyx_runtime_destroy(g_rt);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_plan_decoder_shape_chain)};
  return cmocka_run_group_tests_name("cpu_plan", tests, setup, teardown);
}
