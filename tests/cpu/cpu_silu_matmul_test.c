/*
 * ai.onyx::SiluMulMatMul on the CPU provider: Y = (silu(GU[..., :K]) · GU[..., K:]) · W
 * against a float64 reference, for float32, float16 and bfloat16, one row and several,
 * odd K and N, one thread and four; against the unfused SiluMul and MatMul kernels bit
 * for bit; refusals (shapes named; W as [N, K], transB = 1) and infer. Inputs are fresh each run
 * (the seed is printed; SILU_MATMUL_SEED repeats one); outputs start poisoned (the harness fills
 * them with 0xFF bytes).
 *
 * Usage: cpu_silu_matmul_test [path/to/libonyx_cpu.so]   (default: ONYX_CPU_SO)
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
static const kh_node g_fused = {.op = "SiluMulMatMul", .domain = "ai.onyx", .opset = 1};

typedef struct smm_case {
  double *gu, *w;
  void *dgu, *dw;
} smm_case;

/* A random case: GU [1, rows, 2k] in [-6, 6) (both tails of the sigmoid), W [k, n]. */
static smm_case case_new(uint32_t dtype, int64_t rows, int64_t k, int64_t n) {
  smm_case c;
  c.gu = malloc((size_t)(rows * 2 * k) * sizeof(double));
  c.w = malloc((size_t)(k * n) * sizeof(double));
  c.dgu = kv_random(dtype, rows * 2 * k, -6.0f, 6.0f, c.gu);
  c.dw = kv_random(dtype, k * n, -0.5f, 0.5f, c.w);
  return c;
}

static void case_free(smm_case *c) { free(c->gu), free(c->w), free(c->dgu), free(c->dw); }

/* Y against float64: a = silu(g)·u exactly, then the product. */
static void check_float64(kh_provider *p, uint32_t dtype, int64_t rows, int64_t k, int64_t n) {
  smm_case c = case_new(dtype, rows, k, n);
  int64_t gd[] = {1, rows, 2 * k}, wd[] = {k, n}, yd[] = {1, rows, n};
  onyx_tensor tg = kh_tensor(dtype, 3, gd, c.dgu), tw = kh_tensor(dtype, 2, wd, c.dw);
  const onyx_tensor *in[] = {&tg, &tw};
  kh_result r;
  kh_run(p, &g_fused, in, 2, &r);
  expect_ok(&r);
  expect_shape(&r.out[0], dtype, 3, yd);
  /* float32: a few ulp in a (the vectorised sigmoid), a float32 dot product; 16-bit: a
   * rounded to T, then the dot product rounded once (2^-11, 2^-8). */
  const double rtol = dtype == ONYX_DTYPE_FLOAT32   ? 1e-5
                      : dtype == ONYX_DTYPE_FLOAT16 ? 2e-3
                                                    : 1.6e-2;
  double *a = malloc((size_t)k * sizeof *a);
  for (int64_t row = 0; row < rows; ++row) {
    for (int64_t j = 0; j < k; ++j) {
      double g = c.gu[row * 2 * k + j], u = c.gu[row * 2 * k + k + j];
      a[j] = g / (1.0 + exp(-g)) * u;
    }
    for (int64_t col = 0; col < n; ++col) {
      double want = 0, scale = 0;
      for (int64_t j = 0; j < k; ++j) {
        want += a[j] * c.w[j * n + col];
        scale += fabs(a[j] * c.w[j * n + col]);
      }
      double got = kv_value(dtype, r.out[0].data, row * n + col);
      if (!(fabs(got - want) <= rtol * (scale + fabs(want))))
        fail_msg("%s rows %lld K %lld N %lld: Y[%lld, %lld] got %.9g, want %.9g",
                 kv_dtype_name(dtype), (long long)rows, (long long)k, (long long)n, (long long)row,
                 (long long)col, got, want);
    }
  }
  free(a);
  kh_result_free(&r);
  case_free(&c);
}

/* Y against SiluMul then MatMul on the same provider: the same bits. */
static void check_unfused(kh_provider *p, uint32_t dtype, int64_t rows, int64_t k, int64_t n) {
  smm_case c = case_new(dtype, rows, k, n);
  int64_t gd[] = {rows, 2 * k}, wd[] = {k, n};
  onyx_tensor tg = kh_tensor(dtype, 2, gd, c.dgu), tw = kh_tensor(dtype, 2, wd, c.dw);
  const onyx_tensor *in[] = {&tg, &tw}, *act_in[] = {&tg};
  kh_node act = {.op = "SiluMul", .domain = "ai.onyx", .opset = 1};
  kh_node mm = {.op = "MatMul", .opset = 17};
  kh_result fused, a, y;
  kh_run(p, &g_fused, in, 2, &fused);
  kh_run(p, &act, act_in, 1, &a);
  expect_ok(&fused);
  expect_ok(&a);
  const onyx_tensor *mm_in[] = {&a.out[0], &tw};
  kh_run(p, &mm, mm_in, 2, &y);
  expect_ok(&y);
  size_t bytes = (size_t)(rows * n) * onyx_dtype_size(dtype);
  if (memcmp(fused.out[0].data, y.out[0].data, bytes) != 0)
    fail_msg("%s rows %lld K %lld N %lld: fused Y differs from SiluMul then MatMul",
             kv_dtype_name(dtype), (long long)rows, (long long)k, (long long)n);
  kh_result_free(&fused);
  kh_result_free(&a);
  kh_result_free(&y);
  case_free(&c);
}

static const int64_t g_geo[][3] = {{1, 64, 40}, {3, 37, 24},   {4, 130, 16},
                                   {7, 257, 8}, {1, 896, 136}, {9, 33, 72}};

static void test_against_float64(void **st) {
  (void)st;
  static const uint32_t dtypes[] = {ONYX_DTYPE_FLOAT32, ONYX_DTYPE_FLOAT16, ONYX_DTYPE_BFLOAT16};
  for (size_t d = 0; d < 3; ++d)
    for (size_t g = 0; g < sizeof g_geo / sizeof g_geo[0]; ++g) {
      check_float64(&g_cpu, dtypes[d], g_geo[g][0], g_geo[g][1], g_geo[g][2]);
      check_float64(&g_cpu_mt, dtypes[d], g_geo[g][0], g_geo[g][1], g_geo[g][2]);
    }
}

static void test_unfused_bits(void **st) {
  (void)st;
  static const uint32_t dtypes[] = {ONYX_DTYPE_FLOAT32, ONYX_DTYPE_FLOAT16, ONYX_DTYPE_BFLOAT16};
  for (size_t d = 0; d < 3; ++d)
    for (size_t g = 0; g < sizeof g_geo / sizeof g_geo[0]; ++g) {
      check_unfused(&g_cpu, dtypes[d], g_geo[g][0], g_geo[g][1], g_geo[g][2]);
      check_unfused(&g_cpu_mt, dtypes[d], g_geo[g][0], g_geo[g][1], g_geo[g][2]);
    }
}

static void expect_refused(const onyx_tensor *gu, const onyx_tensor *w, onyx_status st,
                           const char *fragment) {
  const onyx_tensor *in[] = {gu, w};
  kh_result r;
  kh_run(&g_cpu, &g_fused, in, 2, &r);
  expect_fail(&r, st, fragment);
  kh_result_free(&r);
  kh_infer_result ir;
  kh_infer(&g_cpu, &g_fused, in, 2, false, &ir);
  assert_int_equal(ir.status, st);
}

static void test_refusals(void **st) {
  (void)st;
  float buf[64] = {0};
  int64_t gd[] = {2, 16}, god[] = {2, 15}, wd[] = {8, 8}, w7[] = {7, 8}, w1[] = {8}, w0[] = {0, 8};
  onyx_tensor tg = kh_tensor(ONYX_DTYPE_FLOAT32, 2, gd, buf);
  onyx_tensor todd = kh_tensor(ONYX_DTYPE_FLOAT32, 2, god, buf);
  onyx_tensor tw = kh_tensor(ONYX_DTYPE_FLOAT32, 2, wd, buf);
  onyx_tensor tw7 = kh_tensor(ONYX_DTYPE_FLOAT32, 2, w7, buf);
  onyx_tensor tw1 = kh_tensor(ONYX_DTYPE_FLOAT32, 1, w1, buf);
  onyx_tensor tw0 = kh_tensor(ONYX_DTYPE_FLOAT32, 2, w0, buf);
  onyx_tensor tw16 = kh_tensor(ONYX_DTYPE_FLOAT16, 2, wd, buf);
  expect_refused(&tg, &tw7, ONYX_STATUS_INVALID_ARGUMENT,
                 "input 0 [2,16] and W [7,8]: [..., 2K] (gate and up halves) and [K, N] with K "
                 ">= 1 expected");
  expect_refused(&todd, &tw, ONYX_STATUS_INVALID_ARGUMENT, "input 0 [2,15] and W [8,8]");
  expect_refused(&tg, &tw1, ONYX_STATUS_INVALID_ARGUMENT, "input 0 [2,16] and W [8]");
  expect_refused(&tg, &tw0, ONYX_STATUS_INVALID_ARGUMENT, "with K >= 1 expected");
  expect_refused(&tg, &tw16, ONYX_STATUS_INVALID_ARGUMENT,
                 "W has dtype float16; input 0's dtype float32 expected");
  const onyx_tensor *fine[] = {&tg, &tw};
  expect_w_kn_refused(&g_cpu, &g_fused, fine, 2);
}

static int group_setup(void **st) {
  (void)st;
  kv_seed("cpu_silu_matmul", "SILU_MATMUL_SEED");
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
      cmocka_unit_test(test_unfused_bits),
      cmocka_unit_test(test_refusals),
  };
  return cmocka_run_group_tests_name("cpu_silu_matmul", tests, group_setup, group_teardown);
}
