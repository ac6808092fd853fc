/*
 * ai.onyx::RMSNormMatMul on the CPU provider: Y = rmsnorm(X + skip)·gamma · W and
 * S = X + skip against a float64 reference, for float32, float16 and bfloat16, with and
 * without skip, odd K and N, one row and several, one thread and four; refusals (W as
 * [N, K], transB = 1, among them) and infer. Inputs are fresh each run (the seed is printed;
 * NORM_MATMUL_SEED repeats one); outputs start poisoned (the harness fills them with 0xFF bytes).
 *
 * Usage: cpu_norm_matmul_test [path/to/libonyx_cpu.so]   (default: ONYX_CPU_SO)
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
static const float g_eps = 1e-6f;

typedef struct nmm_case {
  double *x, *skip, *gamma, *w;
  void *dx, *dskip, *dgamma, *dw;
} nmm_case;

static void case_free(nmm_case *c) {
  free(c->x), free(c->skip), free(c->gamma), free(c->w);
  free(c->dx), free(c->dskip), free(c->dgamma), free(c->dw);
}

/* Row r's reference: h (k values) and the S it implies. */
static void reference_row(const nmm_case *c, int64_t r, int64_t k, double *h) {
  double ss = 0;
  for (int64_t j = 0; j < k; ++j) {
    double v = c->x[r * k + j] + (c->skip ? c->skip[r * k + j] : 0.0);
    ss += v * v;
  }
  double inv = 1.0 / sqrt(ss / (double)k + (double)g_eps);
  for (int64_t j = 0; j < k; ++j)
    h[j] = (c->x[r * k + j] + (c->skip ? c->skip[r * k + j] : 0.0)) * inv * c->gamma[j];
}

/* One geometry, one dtype, one provider: Y and S against float64. */
static void check_case(kh_provider *p, uint32_t dtype, int64_t rows, int64_t k, int64_t n,
                       bool with_skip) {
  nmm_case c = {0};
  c.x = malloc((size_t)(rows * k) * sizeof(double));
  c.gamma = malloc((size_t)k * sizeof(double));
  c.w = malloc((size_t)(k * n) * sizeof(double));
  c.dx = kv_random(dtype, rows * k, -3.0f, 3.0f, c.x);
  c.dgamma = kv_random(dtype, k, 0.5f, 1.5f, c.gamma);
  c.dw = kv_random(dtype, k * n, -0.5f, 0.5f, c.w);
  if (with_skip) {
    c.skip = malloc((size_t)(rows * k) * sizeof(double));
    c.dskip = kv_random(dtype, rows * k, -3.0f, 3.0f, c.skip);
  }
  int64_t xd[] = {1, rows, k}, gd[] = {k}, wd[] = {k, n}, yd[] = {1, rows, n};
  onyx_tensor tx = kh_tensor(dtype, 3, xd, c.dx), ts = kh_tensor(dtype, 3, xd, c.dskip);
  onyx_tensor tg = kh_tensor(dtype, 1, gd, c.dgamma), tw = kh_tensor(dtype, 2, wd, c.dw);
  const onyx_tensor *in[] = {&tx, with_skip ? &ts : NULL, &tg, &tw};
  onyx_attr eps = kh_attr_float("epsilon", g_eps);
  kh_node node = {.op = "RMSNormMatMul",
                  .domain = "ai.onyx",
                  .opset = 1,
                  .attrs = &eps,
                  .attr_count = 1,
                  .output_count = with_skip ? 2 : 1};
  kh_result r;
  kh_run(p, &node, in, 4, &r);
  expect_ok(&r);
  expect_shape(&r.out[0], dtype, 3, yd);
  /* float32: the sum of squares in double, one rounding of h, a float32 dot product;
   * 16-bit: h rounded to T, then that dot product rounded once (2^-11, 2^-8). */
  const double rtol = dtype == ONYX_DTYPE_FLOAT32   ? 1e-5
                      : dtype == ONYX_DTYPE_FLOAT16 ? 2e-3
                                                    : 1.6e-2;
  double *h = malloc((size_t)k * sizeof *h);
  for (int64_t row = 0; row < rows; ++row) {
    reference_row(&c, row, k, h);
    for (int64_t col = 0; col < n; ++col) {
      double want = 0, scale = 0;
      for (int64_t j = 0; j < k; ++j) {
        want += h[j] * c.w[j * n + col];
        scale += fabs(h[j] * c.w[j * n + col]);
      }
      double got = kv_value(dtype, r.out[0].data, row * n + col);
      if (!(fabs(got - want) <= rtol * (scale + fabs(want))))
        fail_msg("%s rows %lld K %lld N %lld%s: Y[%lld, %lld] got %.9g, want %.9g",
                 kv_dtype_name(dtype), (long long)rows, (long long)k, (long long)n,
                 with_skip ? "" : " (no skip)", (long long)row, (long long)col, got, want);
    }
  }
  if (with_skip) {
    expect_shape(&r.out[1], dtype, 3, xd);
    const double stol = dtype == ONYX_DTYPE_FLOAT32   ? 1.2e-7
                        : dtype == ONYX_DTYPE_FLOAT16 ? 1e-3
                                                      : 8e-3;
    for (int64_t i = 0; i < rows * k; ++i) {
      double want = c.x[i] + c.skip[i], got = kv_value(dtype, r.out[1].data, i);
      if (!(fabs(got - want) <= stol * fabs(want)))
        fail_msg("%s: S[%lld] got %.9g, want %.9g", kv_dtype_name(dtype), (long long)i, got, want);
    }
  }
  free(h);
  kh_result_free(&r);
  case_free(&c);
}

static void test_against_float64(void **st) {
  (void)st;
  static const uint32_t dtypes[] = {ONYX_DTYPE_FLOAT32, ONYX_DTYPE_FLOAT16, ONYX_DTYPE_BFLOAT16};
  static const int64_t geo[][3] = {{1, 64, 40}, {3, 37, 24},   {4, 130, 16},
                                   {7, 257, 8}, {1, 896, 136}, {9, 33, 72}};
  for (size_t d = 0; d < 3; ++d)
    for (size_t g = 0; g < sizeof geo / sizeof geo[0]; ++g)
      for (int skip = 0; skip < 2; ++skip) {
        check_case(&g_cpu, dtypes[d], geo[g][0], geo[g][1], geo[g][2], skip);
        check_case(&g_cpu_mt, dtypes[d], geo[g][0], geo[g][1], geo[g][2], skip);
      }
}

static void test_refusals(void **st) {
  (void)st;
  float buf[64] = {0};
  int64_t xd[] = {2, 8}, gd[] = {8}, g7[] = {7}, wd[] = {8, 8}, w7[] = {7, 8};
  onyx_tensor tx = kh_tensor(ONYX_DTYPE_FLOAT32, 2, xd, buf);
  onyx_tensor tg = kh_tensor(ONYX_DTYPE_FLOAT32, 1, gd, buf);
  onyx_tensor tg7 = kh_tensor(ONYX_DTYPE_FLOAT32, 1, g7, buf);
  onyx_tensor tw = kh_tensor(ONYX_DTYPE_FLOAT32, 2, wd, buf);
  onyx_tensor tw7 = kh_tensor(ONYX_DTYPE_FLOAT32, 2, w7, buf);
  onyx_tensor tw16 = kh_tensor(ONYX_DTYPE_FLOAT16, 2, wd, buf);
  kh_node node = {.op = "RMSNormMatMul", .domain = "ai.onyx", .opset = 1};
  kh_result r;
  const onyx_tensor *bad_k[] = {&tx, NULL, &tg, &tw7};
  kh_run(&g_cpu, &node, bad_k, 4, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "[..., K] and [K, N] with K >= 1 expected");
  kh_result_free(&r);
  const onyx_tensor *bad_g[] = {&tx, NULL, &tg7, &tw};
  kh_run(&g_cpu, &node, bad_g, 4, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "must be [K] with K = 8");
  kh_result_free(&r);
  const onyx_tensor *bad_t[] = {&tx, NULL, &tg, &tw16};
  kh_run(&g_cpu, &node, bad_t, 4, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "must have input 0's dtype float32");
  kh_result_free(&r);
  int64_t sd[] = {1, 8};
  onyx_tensor ts = kh_tensor(ONYX_DTYPE_FLOAT32, 2, sd, buf);
  const onyx_tensor *bad_s[] = {&tx, &ts, &tg, &tw};
  kh_node two = node;
  two.output_count = 2;
  kh_run(&g_cpu, &two, bad_s, 4, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "must have input 0's shape [2,8]");
  kh_result_free(&r);
  kh_infer_result ir;
  kh_infer(&g_cpu, &node, bad_k, 4, false, &ir);
  assert_int_equal(ir.status, ONYX_STATUS_INVALID_ARGUMENT);
  const onyx_tensor *fine[] = {&tx, NULL, &tg, &tw};
  expect_w_kn_refused(&g_cpu, &node, fine, 4);
}

static int group_setup(void **st) {
  (void)st;
  kv_seed("cpu_norm_matmul", "NORM_MATMUL_SEED");
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
      cmocka_unit_test(test_against_float64),
      cmocka_unit_test(test_refusals),
  };
  return cmocka_run_group_tests_name("cpu_norm_matmul", tests, group_setup, group_teardown);
}
