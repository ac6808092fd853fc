/*
 * ai.onyx::SiluMul on the CPU provider: Y[..., j] = silu(H[..., j]) · H[..., N + j]
 * against a float64 reference, for float32, float16 and bfloat16, odd sizes (tails of
 * every vector width, rows shorter and longer than the kernel's chunk), one thread and
 * four; float32 bit for bit against Sigmoid, Mul, Mul run as separate kernels (what
 * the gate_up_silu optimization replaces); refusals and infer.
 *
 * Inputs are fresh each run (the seed is printed; SILU_MUL_SEED repeats one). Outputs
 * start poisoned (the harness fills them with 0xFF bytes).
 *
 * Usage: cpu_silu_mul_test [path/to/libonyx_cpu.so]   (default: ONYX_CPU_SO)
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernel_expect.h"
#include "kernel_harness.h"
#include "kernel_values.h"

#ifndef ONYX_CPU_SO
#define ONYX_CPU_SO "libonyx_cpu.so"
#endif

static const char *g_so_path = ONYX_CPU_SO;
static kh_provider g_cpu, g_cpu_mt;
static const kh_node g_node = {.op = "SiluMul", .domain = "ai.onyx", .opset = 1};

/* One shape, one dtype, one provider: the output against float64. */
static void check_case(kh_provider *p, uint32_t dtype, uint32_t rank, const int64_t *dims) {
  int64_t n_in = 1;
  for (uint32_t i = 0; i < rank; ++i) n_in *= dims[i];
  const int64_t half = dims[rank - 1] / 2, rows = half > 0 ? n_in / (2 * half) : 0;
  double *h = malloc((size_t)(n_in > 0 ? n_in : 1) * sizeof *h);
  void *data = kv_random(dtype, n_in, -9.0f, 9.0f, h);
  onyx_tensor th = kh_tensor(dtype, rank, dims, data);
  const onyx_tensor *in[] = {&th};
  kh_result r;
  kh_run(p, &g_node, in, 1, &r);
  expect_ok(&r);
  int64_t want_dims[ONYX_MAX_RANK];
  memcpy(want_dims, dims, rank * sizeof dims[0]);
  want_dims[rank - 1] = half;
  expect_shape(&r.out[0], dtype, rank, want_dims);
  /* float32: the sigmoid's polynomial and three roundings; 16-bit: one rounding of
   * the float32 result (2^-11 and 2^-8 relative). */
  const double rtol = dtype == ONYX_DTYPE_FLOAT32   ? 2e-6
                      : dtype == ONYX_DTYPE_FLOAT16 ? 1.5e-3
                                                    : 8e-3;
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t j = 0; j < half; ++j) {
      double a = h[row * 2 * half + j], b = h[row * 2 * half + half + j];
      double want = a / (1.0 + exp(-a)) * b;
      double got = kv_value(dtype, r.out[0].data, row * half + j);
      if (!(fabs(got - want) <= 1e-6 + rtol * fabs(want)))
        fail_msg("%s [%lld] row %lld col %lld: got %.9g, want %.9g (a %.6g, b %.6g)",
                 dtype == ONYX_DTYPE_FLOAT32   ? "float32"
                 : dtype == ONYX_DTYPE_FLOAT16 ? "float16"
                                               : "bfloat16",
                 (long long)dims[rank - 1], (long long)row, (long long)j, got, want, a, b);
    }
  kh_result_free(&r);
  free(data);
  free(h);
}

static void test_silu_mul_against_float64(void **st) {
  (void)st;
  static const uint32_t dtypes[] = {ONYX_DTYPE_FLOAT32, ONYX_DTYPE_FLOAT16, ONYX_DTYPE_BFLOAT16};
  static const struct {
    uint32_t rank;
    int64_t dims[3];
  } shapes[] = {
      {1, {2}},
      {2, {1, 2 * 37}},
      {3, {2, 3, 2 * 7}},
      {2, {5, 2 * 257}},
      {3, {1, 1, 2 * 4864}},
      {2, {3, 2 * 1023}},
      {3, {4, 9, 2 * 130}},
      {2, {17, 2 * 15}},
  };
  for (size_t d = 0; d < 3; ++d)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s) {
      check_case(&g_cpu, dtypes[d], shapes[s].rank, shapes[s].dims);
      check_case(&g_cpu_mt, dtypes[d], shapes[s].rank, shapes[s].dims);
    }
  /* Large enough to be split over the threads, with a row boundary inside slices. */
  int64_t big[] = {61, 2 * 1111};
  for (size_t d = 0; d < 3; ++d) check_case(&g_cpu_mt, dtypes[d], 2, big);
}

/* Runs a one-input or two-input node over float32 tensors; the result's output 0. */
static float *run_f32(const char *op, const onyx_tensor *a, const onyx_tensor *b) {
  kh_node n = {.op = op, .opset = 14};
  const onyx_tensor *in[] = {a, b};
  kh_result r;
  kh_run(&g_cpu, &n, in, b ? 2 : 1, &r);
  expect_ok(&r);
  float *out = r.out[0].data;
  r.out[0].data = NULL;
  r.allocated[0] = false;
  kh_result_free(&r);
  return out;
}

/* float32: the fused kernel gives exactly the bits of Sigmoid, Mul and Mul. */
static void test_silu_mul_f32_matches_unfused(void **st) {
  (void)st;
  const int64_t rows = 3, n = 301;
  float *h = malloc((size_t)(rows * 2 * n) * sizeof *h);
  float *g = malloc((size_t)(rows * n) * sizeof *g), *u = malloc((size_t)(rows * n) * sizeof *u);
  for (int64_t i = 0; i < rows * 2 * n; ++i) h[i] = kv_rng_float(-12.0f, 12.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      g[r * n + j] = h[r * 2 * n + j];
      u[r * n + j] = h[r * 2 * n + n + j];
    }
  int64_t hd[] = {rows, 2 * n}, gd[] = {rows, n};
  onyx_tensor th = kh_tensor(ONYX_DTYPE_FLOAT32, 2, hd, h);
  onyx_tensor tg = kh_tensor(ONYX_DTYPE_FLOAT32, 2, gd, g),
              tu = kh_tensor(ONYX_DTYPE_FLOAT32, 2, gd, u);
  float *sig = run_f32("Sigmoid", &tg, NULL);
  onyx_tensor ts = kh_tensor(ONYX_DTYPE_FLOAT32, 2, gd, sig);
  float *act = run_f32("Mul", &tg, &ts);
  onyx_tensor ta = kh_tensor(ONYX_DTYPE_FLOAT32, 2, gd, act);
  float *want = run_f32("Mul", &ta, &tu);
  const onyx_tensor *in[] = {&th};
  kh_result r;
  kh_run(&g_cpu_mt, &g_node, in, 1, &r);
  expect_ok(&r);
  if (memcmp(r.out[0].data, want, (size_t)(rows * n) * sizeof(float)) != 0)
    fail_msg("%s", "SiluMul float32 differs from Sigmoid, Mul, Mul");
  kh_result_free(&r);
  free(h);
  free(g);
  free(u);
  free(sig);
  free(act);
  free(want);
}

static void test_silu_mul_refusals(void **st) {
  (void)st;
  float x[6] = {1, 2, 3, 4, 5, 6};
  kh_result r;
  int64_t odd[] = {2, 3};
  onyx_tensor t_odd = kh_tensor(ONYX_DTYPE_FLOAT32, 2, odd, x);
  const onyx_tensor *in[] = {&t_odd};
  kh_run(&g_cpu, &g_node, in, 1, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "[2,3] must have at least one dim and an even");
  kh_result_free(&r);

  onyx_tensor t_scalar = kh_tensor(ONYX_DTYPE_FLOAT32, 0, NULL, x);
  in[0] = &t_scalar;
  kh_run(&g_cpu, &g_node, in, 1, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "even last dim");
  kh_result_free(&r);

  /* No kernel for other types: placement finds none. */
  int64_t d2[] = {2};
  int32_t ints[2] = {1, 2};
  onyx_tensor t_int = kh_tensor(ONYX_DTYPE_INT32, 1, d2, ints);
  in[0] = &t_int;
  assert_null(kh_kernel_for(&g_cpu, &g_node, in, 1));
  double dbl[2] = {1, 2};
  onyx_tensor t_dbl = kh_tensor(ONYX_DTYPE_FLOAT64, 1, d2, dbl);
  in[0] = &t_dbl;
  assert_null(kh_kernel_for(&g_cpu, &g_node, in, 1));

  /* Empty rows are fine: [3, 0] gives [3, 0]. */
  int64_t empty[] = {3, 0};
  onyx_tensor t_empty = kh_tensor(ONYX_DTYPE_FLOAT32, 2, empty, x);
  in[0] = &t_empty;
  kh_run(&g_cpu, &g_node, in, 1, &r);
  expect_ok(&r);
  expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, 2, empty);
  kh_result_free(&r);

  /* infer refuses what compute refuses, with the same words. */
  in[0] = &t_odd;
  kh_infer_result ir;
  kh_infer(&g_cpu, &g_node, in, 1, false, &ir);
  assert_int_equal(ir.status, ONYX_STATUS_INVALID_ARGUMENT);
  int64_t ok_dims[] = {4, 1, 6}, half_dims[] = {4, 1, 3};
  float y[24] = {0};
  onyx_tensor t_ok = kh_tensor(ONYX_DTYPE_FLOAT16, 3, ok_dims, y);
  in[0] = &t_ok;
  kh_infer(&g_cpu, &g_node, in, 1, false, &ir);
  assert_int_equal(ir.status, ONYX_STATUS_OK);
  expect_shape(&ir.out[0], ONYX_DTYPE_FLOAT16, 3, half_dims);
}

static int group_setup(void **st) {
  (void)st;
  kv_seed("cpu_silu_mul", "SILU_MUL_SEED");
  char err[512];
  if (kh_load(&g_cpu, g_so_path, NULL, 0, 1, err, sizeof err) != ONYX_STATUS_OK ||
      kh_load(&g_cpu_mt, g_so_path, NULL, 0, 4, err, sizeof err) != ONYX_STATUS_OK) {
    fprintf(stderr, "cannot load %s: %s\n", g_so_path, err);
    return -1;
  }
  return 0;
}

static int group_teardown(void **st) {
  (void)st;
  kh_unload(&g_cpu);
  kh_unload(&g_cpu_mt);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1) g_so_path = argv[1];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_silu_mul_against_float64),
      cmocka_unit_test(test_silu_mul_f32_matches_unfused),
      cmocka_unit_test(test_silu_mul_refusals),
  };
  return cmocka_run_group_tests_name("cpu_silu_mul", tests, group_setup, group_teardown);
}
