/*
 * Edge cases of the CPU provider's ops beyond the first set (cpu_kernels_test.c):
 * Slice, Split, Expand, Trilu, the reductions, the normalisations, comparisons and
 * selection, Max/Min/Sum, Clip, Pow, Mod, the unary math ops, Range,
 * ConstantOfShape, Size, Flatten; and that parallel runs match serial ones.
 * Expected values come from naive loops here, in double.
 *
 * Usage: cpu_ops_test [path/to/libonyx_cpu.so]   (default: ONYX_CPU_SO)
 */
#include <float.h>
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

#ifndef ONYX_CPU_SO
#define ONYX_CPU_SO "libonyx_cpu.so"
#endif

static const char *g_so_path = ONYX_CPU_SO;
static kh_provider g_cpu, g_cpu_mt;

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static float rng_float(float lo, float hi) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return lo + (hi - lo) * (float)((g_rng >> 40) * (1.0 / 16777216.0));
}
static float *rand_floats(int64_t n, float lo, float hi) {
  float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
  for (int64_t i = 0; i < n; ++i) p[i] = rng_float(lo, hi);
  return p;
}

static void run_on(kh_provider *p, const kh_node *n, const onyx_tensor *const *in, size_t count,
                   kh_result *r) {
  kh_run(p, n, in, count, r);
}
static void run(const kh_node *n, const onyx_tensor *const *in, size_t count, kh_result *r) {
  kh_run(&g_cpu, n, in, count, r);
}

static void expect_u8(const uint8_t *got, const uint8_t *want, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (got[i] != want[i]) fail_msg("element %lld: got %u, want %u", (long long)i, got[i], want[i]);
}

static onyx_tensor t1(uint32_t dtype, int64_t n, const void *data) {
  return kh_tensor(dtype, 1, &n, data);
}

/* ------------------------------------------------------------------ Slice */

static void test_slice(void **st) {
  (void)st;
  float x[24];
  for (int i = 0; i < 24; ++i) x[i] = (float)i;
  int64_t xd[] = {2, 3, 4};
  onyx_tensor tx = kh_tensor(ONYX_DTYPE_FLOAT32, 3, xd, x);
  kh_node n = {.op = "Slice", .opset = 13};
  kh_result r;

  /* Negative step from past the end, clamped: axis 2 reversed, axis 1 from 1. */
  int64_t starts[] = {100, 1}, ends[] = {INT64_MIN, 3}, axes[] = {-1, 1}, steps[] = {-2, 1};
  onyx_tensor ts = t1(ONYX_DTYPE_INT64, 2, starts), te = t1(ONYX_DTYPE_INT64, 2, ends),
              ta = t1(ONYX_DTYPE_INT64, 2, axes), tst = t1(ONYX_DTYPE_INT64, 2, steps);
  const onyx_tensor *in[] = {&tx, &ts, &te, &ta, &tst};
  run(&n, in, 5, &r);
  expect_ok(&r);
  int64_t want_d[] = {2, 2, 2};
  expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, 3, want_d);
  double want[] = {7, 5, 11, 9, 19, 17, 23, 21};
  expect_close(r.out[0].data, want, 8, 0, 0);
  kh_result_free(&r);

  /* Start past the end going forward: empty. */
  int64_t s2[] = {5}, e2[] = {10};
  onyx_tensor ts2 = t1(ONYX_DTYPE_INT64, 1, s2), te2 = t1(ONYX_DTYPE_INT64, 1, e2);
  const onyx_tensor *in2[] = {&tx, &ts2, &te2};
  run(&n, in2, 3, &r);
  expect_ok(&r);
  int64_t empty_d[] = {0, 3, 4};
  expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, 3, empty_d);
  kh_result_free(&r);

  /* Step 0 and a repeated axis are errors. */
  int64_t zero[] = {0, 0}, two_axes[] = {1, -2};
  onyx_tensor tz = t1(ONYX_DTYPE_INT64, 2, zero), tra = t1(ONYX_DTYPE_INT64, 2, two_axes);
  const onyx_tensor *bad_step[] = {&tx, &ts, &te, &ta, &tz};
  run(&n, bad_step, 5, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "step");
  const onyx_tensor *bad_axes[] = {&tx, &ts, &te, &tra};
  run(&n, bad_axes, 4, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "repeated");

  /* Opset 1-9: attributes, axes default to 0..n-1. */
  int64_t as[] = {1, 0}, ae[] = {2, -1};
  onyx_attr attrs[] = {kh_attr_ints("starts", as, 2), kh_attr_ints("ends", ae, 2)};
  kh_node old = {.op = "Slice", .opset = 9, .attrs = attrs, .attr_count = 2};
  const onyx_tensor *in3[] = {&tx};
  run(&old, in3, 1, &r);
  expect_ok(&r);
  int64_t old_d[] = {1, 2, 4};
  expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, 3, old_d);
  double want3[] = {12, 13, 14, 15, 16, 17, 18, 19};
  expect_close(r.out[0].data, want3, 8, 0, 0);
  kh_result_free(&r);
}

/* ------------------------------------------------------------------ Split */

static void test_split(void **st) {
  (void)st;
  float x[7] = {0, 1, 2, 3, 4, 5, 6};
  onyx_tensor tx = t1(ONYX_DTYPE_FLOAT32, 7, x);
  const onyx_tensor *in[] = {&tx};
  kh_result r;
  /* num_outputs 3 over 7: 3, 3, 1. */
  onyx_attr no[] = {kh_attr_int("num_outputs", 3)};
  kh_node n18 = {.op = "Split", .opset = 18, .attrs = no, .attr_count = 1, .output_count = 3};
  run(&n18, in, 1, &r);
  expect_ok(&r);
  int64_t d3[] = {3}, d1[] = {1};
  expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, 1, d3);
  expect_shape(&r.out[2], ONYX_DTYPE_FLOAT32, 1, d1);
  double w2[] = {6};
  expect_close(r.out[2].data, w2, 1, 0, 0);
  kh_result_free(&r);

  /* Zero-sized parts, and an unnamed output that is not allocated. */
  int64_t parts[] = {0, 5, 2};
  onyx_tensor tp = t1(ONYX_DTYPE_INT64, 3, parts);
  const onyx_tensor *in2[] = {&tx, &tp};
  bool present[] = {true, false, true};
  kh_node n13 = {.op = "Split", .opset = 13, .output_count = 3, .output_present = present};
  run(&n13, in2, 2, &r);
  expect_ok(&r);
  assert_true(r.allocated[0]);
  assert_false(r.allocated[1]);
  int64_t d0[] = {0}, d2[] = {2};
  expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, 1, d0);
  expect_shape(&r.out[2], ONYX_DTYPE_FLOAT32, 1, d2);
  double w3[] = {5, 6};
  expect_close(r.out[2].data, w3, 2, 0, 0);
  kh_result_free(&r);

  /* Sizes that do not add up; an uneven split without num_outputs. */
  int64_t bad[] = {1, 1, 1};
  onyx_tensor tb = t1(ONYX_DTYPE_INT64, 3, bad);
  const onyx_tensor *in3[] = {&tx, &tb};
  run(&n13, in3, 2, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "add up");
  kh_node even = {.op = "Split", .opset = 13, .output_count = 2};
  run(&even, in, 1, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "evenly");
}

/* ------------------------------------------------------------------ Expand, Trilu */

static void test_expand_trilu(void **st) {
  (void)st;
  float x[3] = {1, 2, 3};
  int64_t xd[] = {3, 1};
  onyx_tensor tx = kh_tensor(ONYX_DTYPE_FLOAT32, 2, xd, x);
  int64_t shape[] = {2, 1, 2};
  onyx_tensor ts = t1(ONYX_DTYPE_INT64, 3, shape);
  const onyx_tensor *in[] = {&tx, &ts};
  kh_node n = {.op = "Expand", .opset = 13};
  kh_result r;
  run(&n, in, 2, &r);
  expect_ok(&r);
  int64_t want_d[] = {2, 3, 2};
  expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, 3, want_d);
  double want[] = {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3};
  expect_close(r.out[0].data, want, 12, 0, 0);
  kh_result_free(&r);
  int64_t bad[] = {4, 2};
  onyx_tensor tb = t1(ONYX_DTYPE_INT64, 2, bad);
  const onyx_tensor *in2[] = {&tx, &tb};
  run(&n, in2, 2, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "broadcast");

  /* Trilu: upper with k = 1 and lower with k = -1 on 3x4; huge k keeps all. */
  int64_t m[12];
  for (int i = 0; i < 12; ++i) m[i] = i + 1;
  int64_t md[] = {3, 4};
  onyx_tensor tm = kh_tensor(ONYX_DTYPE_INT64, 2, md, m);
  int64_t k1 = 1, km = -1, kbig = INT64_MAX;
  onyx_tensor tk1 = kh_tensor(ONYX_DTYPE_INT64, 0, NULL, &k1),
              tkm = kh_tensor(ONYX_DTYPE_INT64, 0, NULL, &km),
              tkb = kh_tensor(ONYX_DTYPE_INT64, 0, NULL, &kbig);
  kh_node up = {.op = "Trilu", .opset = 14};
  const onyx_tensor *a[] = {&tm, &tk1};
  run(&up, a, 2, &r);
  expect_ok(&r);
  int64_t want_up[] = {0, 2, 3, 4, 0, 0, 7, 8, 0, 0, 0, 12};
  expect_i64(r.out[0].data, want_up, 12);
  kh_result_free(&r);
  onyx_attr lower[] = {kh_attr_int("upper", 0)};
  kh_node lo = {.op = "Trilu", .opset = 14, .attrs = lower, .attr_count = 1};
  const onyx_tensor *b[] = {&tm, &tkm};
  run(&lo, b, 2, &r);
  expect_ok(&r);
  int64_t want_lo[] = {0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0};
  expect_i64(r.out[0].data, want_lo, 12);
  kh_result_free(&r);
  const onyx_tensor *c[] = {&tm, &tkb};
  run(&lo, c, 2, &r);
  expect_ok(&r);
  expect_i64(r.out[0].data, m, 12);
  kh_result_free(&r);
}

/* ------------------------------------------------------------------ reductions */

static void test_reduce(void **st) {
  (void)st;
  kh_result r;
  /* Empty reduced set: Sum 0, Max -inf; [2,0,3] over axis 1 keeps [2,1,3]. */
  int64_t ed[] = {2, 0, 3}, ax1[] = {1};
  onyx_tensor te = kh_tensor(ONYX_DTYPE_FLOAT32, 3, ed, NULL);
  onyx_tensor ta = t1(ONYX_DTYPE_INT64, 1, ax1);
  const onyx_tensor *in[] = {&te, &ta};
  kh_node sum = {.op = "ReduceSum", .opset = 13};
  run(&sum, in, 2, &r);
  expect_ok(&r);
  int64_t kd[] = {2, 1, 3};
  expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, 3, kd);
  double zeros[6] = {0};
  expect_close(r.out[0].data, zeros, 6, 0, 0);
  kh_result_free(&r);
  kh_node mx = {.op = "ReduceMax", .opset = 18};
  run(&mx, in, 2, &r);
  expect_ok(&r);
  double ninf[6] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
  expect_close(r.out[0].data, ninf, 6, 0, 0);
  kh_result_free(&r);

  /* noop_with_empty_axes returns the input; without it everything is reduced. */
  float x[6] = {1, -2, 3, -4, 5, -6};
  int64_t xd[] = {2, 3};
  onyx_tensor tx = kh_tensor(ONYX_DTYPE_FLOAT32, 2, xd, x);
  onyx_tensor tnone = t1(ONYX_DTYPE_INT64, 0, NULL);
  const onyx_tensor *in2[] = {&tx, &tnone};
  onyx_attr noop[] = {kh_attr_int("noop_with_empty_axes", 1)};
  kh_node sum_noop = {.op = "ReduceSum", .opset = 13, .attrs = noop, .attr_count = 1};
  run(&sum_noop, in2, 2, &r);
  expect_ok(&r);
  expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, 2, xd);
  kh_result_free(&r);
  onyx_attr nokeep[] = {kh_attr_int("keepdims", 0)};
  kh_node mean_all = {.op = "ReduceMean", .opset = 18, .attrs = nokeep, .attr_count = 1};
  const onyx_tensor *in3[] = {&tx};
  run(&mean_all, in3, 1, &r);
  expect_ok(&r);
  assert_int_equal(r.out[0].rank, 0);
  double mean_want[] = {-0.5};
  expect_close(r.out[0].data, mean_want, 1, 1e-7, 0);
  kh_result_free(&r);

  /* Integer mean truncates; Max of negatives; attribute axes (opset 11). */
  int64_t xi[] = {-7, -2, 4, -9, -1, -3};
  onyx_tensor ti = kh_tensor(ONYX_DTYPE_INT64, 2, xd, xi);
  int64_t axes_attr[] = {-1};
  onyx_attr aa[] = {kh_attr_ints("axes", axes_attr, 1), kh_attr_int("keepdims", 0)};
  kh_node mean11 = {.op = "ReduceMean", .opset = 11, .attrs = aa, .attr_count = 2};
  const onyx_tensor *in4[] = {&ti};
  run(&mean11, in4, 1, &r);
  expect_ok(&r);
  int64_t want_mean[] = {-1, -4};
  expect_i64(r.out[0].data, want_mean, 2);
  kh_result_free(&r);
  kh_node max11 = {.op = "ReduceMax", .opset = 11, .attrs = aa, .attr_count = 2};
  run(&max11, in4, 1, &r);
  expect_ok(&r);
  int64_t want_max[] = {4, -1};
  expect_i64(r.out[0].data, want_max, 2);
  kh_result_free(&r);

  int64_t far[] = {2};
  onyx_tensor tf = t1(ONYX_DTYPE_INT64, 1, far);
  const onyx_tensor *in5[] = {&tx, &tf};
  run(&sum, in5, 2, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "out of range");

  /* Non-contiguous axes {0, 2} of [3, 4, 5], against a naive loop, serial and 4 threads. */
  float *y = rand_floats(60, -1, 1);
  int64_t yd[] = {3, 4, 5}, axes02[] = {0, 2};
  onyx_tensor ty = kh_tensor(ONYX_DTYPE_FLOAT32, 3, yd, y);
  onyx_tensor t02 = t1(ONYX_DTYPE_INT64, 2, axes02);
  const onyx_tensor *in6[] = {&ty, &t02};
  double want[4] = {0};
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 4; ++b)
      for (int c = 0; c < 5; ++c) want[b] += y[(a * 4 + b) * 5 + c];
  for (int t = 0; t < 2; ++t) {
    run_on(t ? &g_cpu_mt : &g_cpu, &sum, in6, 2, &r);
    expect_ok(&r);
    expect_close(r.out[0].data, want, 4, 1e-6, 1e-6);
    kh_result_free(&r);
  }
  free(y);
}

/* ------------------------------------------------------------------ normalisations */

/* Reference LayerNorm/RMSNorm of rows × n in double. */
static void ref_norm(const float *x, const float *skip, int64_t skip_rows, const float *bias,
                     const float *g, const float *b, int64_t rows, int64_t n, double eps, bool rms,
                     double *y, double *mean_out, double *inv_out, double *sum_out) {
  for (int64_t r = 0; r < rows; ++r) {
    double s1 = 0, s2 = 0;
    for (int64_t c = 0; c < n; ++c) {
      double v = x[r * n + c] + (skip ? skip[(r % skip_rows) * n + c] : 0) + (bias ? bias[c] : 0);
      if (sum_out) sum_out[r * n + c] = v;
      s1 += v;
    }
    double mean = rms ? 0 : s1 / (double)n;
    for (int64_t c = 0; c < n; ++c) {
      double v = x[r * n + c] + (skip ? skip[(r % skip_rows) * n + c] : 0) + (bias ? bias[c] : 0);
      s2 += (v - mean) * (v - mean);
    }
    double inv = 1.0 / sqrt(s2 / (double)n + eps);
    if (mean_out) mean_out[r] = mean;
    if (inv_out) inv_out[r] = inv;
    for (int64_t c = 0; c < n; ++c) {
      double v = x[r * n + c] + (skip ? skip[(r % skip_rows) * n + c] : 0) + (bias ? bias[c] : 0);
      y[r * n + c] = (v - mean) * inv * g[c] + (b ? b[c] : 0);
    }
  }
}

static void test_layer_norm(void **st) {
  (void)st;
  const int64_t rows = 6, n = 20;
  float *x = rand_floats(rows * n, -3, 5), *g = rand_floats(n, 0.5f, 2), *b = rand_floats(n, -1, 1);
  int64_t xd[] = {2, 3, 4, 5}, gd[] = {4, 5};
  onyx_tensor tx = kh_tensor(ONYX_DTYPE_FLOAT32, 4, xd, x),
              tg = kh_tensor(ONYX_DTYPE_FLOAT32, 2, gd, g),
              tb = kh_tensor(ONYX_DTYPE_FLOAT32, 2, gd, b);
  const onyx_tensor *in[] = {&tx, &tg, &tb};
  onyx_attr attrs[] = {kh_attr_int("axis", -2), kh_attr_float("epsilon", 1e-3f)};
  kh_node ln = {
      .op = "LayerNormalization", .opset = 17, .attrs = attrs, .attr_count = 2, .output_count = 3};
  double *y = malloc(sizeof(double) * (size_t)(rows * n)), mean[6], inv[6];
  ref_norm(x, NULL, 1, NULL, g, b, rows, n, 1e-3, false, y, mean, inv, NULL);
  for (int t = 0; t < 2; ++t) {
    kh_result r;
    run_on(t ? &g_cpu_mt : &g_cpu, &ln, in, 3, &r);
    expect_ok(&r);
    int64_t sd[] = {2, 3, 1, 1};
    expect_shape(&r.out[1], ONYX_DTYPE_FLOAT32, 4, sd);
    expect_close(r.out[0].data, y, rows * n, 1e-5, 1e-5);
    expect_close(r.out[1].data, mean, rows, 1e-6, 1e-6);
    expect_close(r.out[2].data, inv, rows, 1e-6, 1e-6);
    kh_result_free(&r);
  }
  /* A scale that broadcasts only from [5] works too; one that does not fit fails. */
  int64_t g5[] = {5}, g3[] = {3};
  onyx_tensor tg5 = kh_tensor(ONYX_DTYPE_FLOAT32, 1, g5, g),
              tg3 = kh_tensor(ONYX_DTYPE_FLOAT32, 1, g3, g);
  const onyx_tensor *bad[] = {&tx, &tg3};
  kh_node ln1 = {.op = "LayerNormalization", .opset = 17, .attrs = attrs, .attr_count = 2};
  kh_result r;
  run(&ln1, bad, 2, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "normalised shape");
  const onyx_tensor *ok5[] = {&tx, &tg5};
  run(&ln1, ok5, 2, &r);
  expect_ok(&r);
  kh_result_free(&r);
  free(x);
  free(g);
  free(b);
  free(y);
}

static void test_rms_and_skip_norms(void **st) {
  (void)st;
  const int64_t B = 2, S = 3, H = 16, rows = B * S;
  float *x = rand_floats(rows * H, -2, 2), *skip = rand_floats(S * H, -1, 1),
        *g = rand_floats(H, 0.5f, 1.5f), *bias = rand_floats(H, -0.5f, 0.5f);
  int64_t xd[] = {B, S, H}, sd[] = {S, H}, hd[] = {H};
  onyx_tensor tx = kh_tensor(ONYX_DTYPE_FLOAT32, 3, xd, x),
              ts = kh_tensor(ONYX_DTYPE_FLOAT32, 2, sd, skip),
              tg = kh_tensor(ONYX_DTYPE_FLOAT32, 1, hd, g),
              tbias = kh_tensor(ONYX_DTYPE_FLOAT32, 1, hd, bias);
  double *y = malloc(sizeof(double) * (size_t)(rows * H)),
         *sum = malloc(sizeof(double) * (size_t)(rows * H));
  double inv[6];
  kh_result r;

  /* RMSNormalization (23), and SimplifiedLayerNormalization with inv_std_var. */
  ref_norm(x, NULL, 1, NULL, g, NULL, rows, H, 1e-5, true, y, NULL, inv, NULL);
  const onyx_tensor *in[] = {&tx, &tg};
  kh_node rms = {.op = "RMSNormalization", .opset = 23};
  run(&rms, in, 2, &r);
  expect_ok(&r);
  expect_close(r.out[0].data, y, rows * H, 1e-5, 1e-5);
  kh_result_free(&r);
  kh_node sln = {.op = "SimplifiedLayerNormalization", .opset = 17, .output_count = 2};
  run(&sln, in, 2, &r);
  expect_ok(&r);
  expect_close(r.out[0].data, y, rows * H, 1e-5, 1e-5);
  expect_close(r.out[1].data, inv, rows, 1e-6, 1e-6);
  kh_result_free(&r);

  /* com.microsoft SkipSimplifiedLayerNormalization: skip (S, H) broadcast over B,
   * bias, output 3 is x + skip + bias; output 1 (mean) unnamed. */
  ref_norm(x, skip, S, bias, g, NULL, rows, H, 1e-6, true, y, NULL, inv, sum);
  onyx_attr eps[] = {kh_attr_float("epsilon", 1e-6f)};
  bool present[] = {true, false, true, true};
  kh_node ssln = {.op = "SkipSimplifiedLayerNormalization",
                  .domain = "com.microsoft",
                  .opset = 1,
                  .attrs = eps,
                  .attr_count = 1,
                  .output_count = 4,
                  .output_present = present};
  const onyx_tensor *in2[] = {&tx, &ts, &tg, &tbias};
  run(&ssln, in2, 4, &r);
  expect_ok(&r);
  assert_false(r.allocated[1]);
  int64_t stat_d[] = {B, S, 1};
  expect_shape(&r.out[2], ONYX_DTYPE_FLOAT32, 3, stat_d);
  expect_shape(&r.out[3], ONYX_DTYPE_FLOAT32, 3, xd);
  expect_close(r.out[0].data, y, rows * H, 1e-5, 1e-5);
  expect_close(r.out[2].data, inv, rows, 1e-6, 1e-6);
  expect_close(r.out[3].data, sum, rows * H, 1e-6, 1e-6);
  kh_result_free(&r);

  /* SkipLayerNormalization with beta and bias. */
  double mean[6];
  ref_norm(x, skip, S, bias, g, bias, rows, H, 1e-6, false, y, mean, inv, sum);
  kh_node sln2 = {.op = "SkipLayerNormalization",
                  .domain = "com.microsoft",
                  .opset = 1,
                  .attrs = eps,
                  .attr_count = 1,
                  .output_count = 4};
  const onyx_tensor *in3[] = {&tx, &ts, &tg, &tbias, &tbias};
  run(&sln2, in3, 5, &r);
  expect_ok(&r);
  expect_close(r.out[0].data, y, rows * H, 1e-5, 1e-5);
  expect_close(r.out[1].data, mean, rows, 1e-6, 1e-6);
  expect_close(r.out[3].data, sum, rows * H, 1e-6, 1e-6);
  kh_result_free(&r);

  /* A skip that does not cover whole rows is refused. */
  int64_t bad_d[] = {H - 1};
  onyx_tensor tbad = kh_tensor(ONYX_DTYPE_FLOAT32, 1, bad_d, skip);
  const onyx_tensor *in4[] = {&tx, &tbad, &tg};
  run(&ssln, in4, 3, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "skip");

  /* float16 RMSNorm: computed in float32, rounded once. */
  uint16_t xh[4] = {0x3c00, 0x4000, 0xc000, 0x3800}; /* 1, 2, -2, 0.5 */
  uint16_t gh[4] = {0x3c00, 0x3c00, 0x3c00, 0x3c00};
  int64_t d4[] = {4};
  onyx_tensor txh = kh_tensor(ONYX_DTYPE_FLOAT16, 1, d4, xh),
              tgh = kh_tensor(ONYX_DTYPE_FLOAT16, 1, d4, gh);
  const onyx_tensor *in5[] = {&txh, &tgh};
  run(&rms, in5, 2, &r);
  expect_ok(&r);
  /* rms = sqrt((1 + 4 + 4 + 0.25) / 4) = 1.5207; 1 / 1.5207 = 0.6576 → 0x3943 */
  assert_int_equal(((uint16_t *)r.out[0].data)[0], 0x3943);
  kh_result_free(&r);
  free(x);
  free(skip);
  free(g);
  free(bias);
  free(y);
  free(sum);
}

/* ------------------------------------------------------------------ comparisons, selection */

static void test_compare_where(void **st) {
  (void)st;
  kh_result r;
  int64_t a[] = {1, 5, INT64_MAX, -3}, b[] = {5, INT64_MAX - 1};
  int64_t ad[] = {2, 2}, bd[] = {2};
  onyx_tensor ta = kh_tensor(ONYX_DTYPE_INT64, 2, ad, a),
              tb = kh_tensor(ONYX_DTYPE_INT64, 1, bd, b);
  const onyx_tensor *in[] = {&ta, &tb};
  static const struct {
    const char *op;
    uint8_t want[4];
  } cases[] = {{"Equal", {0, 0, 0, 0}},
               {"Greater", {0, 0, 1, 0}},
               {"Less", {1, 1, 0, 1}},
               {"GreaterOrEqual", {0, 0, 1, 0}},
               {"LessOrEqual", {1, 1, 0, 1}}};
  for (size_t i = 0; i < 5; ++i) {
    kh_node n = {.op = cases[i].op, .opset = 13};
    run(&n, in, 2, &r);
    expect_ok(&r);
    expect_shape(&r.out[0], ONYX_DTYPE_BOOL, 2, ad);
    expect_u8(r.out[0].data, cases[i].want, 4);
    kh_result_free(&r);
  }
  /* Mixed dtypes are refused. */
  float f[] = {1, 2};
  onyx_tensor tf = kh_tensor(ONYX_DTYPE_FLOAT32, 1, bd, f);
  const onyx_tensor *mixed[] = {&ta, &tf};
  kh_node eq = {.op = "Equal", .opset = 13};
  run(&eq, mixed, 2, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "dtype");

  /* And/Or/Xor/Not on broadcast bools; Where picks by a broadcast condition. */
  uint8_t p[] = {1, 0, 1, 0}, q[] = {1, 0};
  onyx_tensor tp = kh_tensor(ONYX_DTYPE_BOOL, 2, ad, p), tq = kh_tensor(ONYX_DTYPE_BOOL, 1, bd, q);
  const onyx_tensor *lin[] = {&tp, &tq};
  static const struct {
    const char *op;
    uint8_t want[4];
  } logic[] = {{"And", {1, 0, 1, 0}}, {"Or", {1, 0, 1, 0}}, {"Xor", {0, 0, 0, 0}}};
  for (size_t i = 0; i < 3; ++i) {
    kh_node n = {.op = logic[i].op, .opset = 7};
    run(&n, lin, 2, &r);
    expect_ok(&r);
    expect_u8(r.out[0].data, logic[i].want, 4);
    kh_result_free(&r);
  }
  kh_node not = {.op = "Not", .opset = 1};
  const onyx_tensor *nin[] = {&tp};
  run(&not, nin, 1, &r);
  expect_ok(&r);
  uint8_t want_not[] = {0, 1, 0, 1};
  expect_u8(r.out[0].data, want_not, 4);
  kh_result_free(&r);

  uint8_t cond[] = {1, 0};
  int64_t cd[] = {2, 1};
  onyx_tensor tc = kh_tensor(ONYX_DTYPE_BOOL, 2, cd, cond);
  float xs[] = {1, 2, 3}, ys = -1;
  int64_t x3[] = {3};
  onyx_tensor tx = kh_tensor(ONYX_DTYPE_FLOAT32, 1, x3, xs),
              ty = kh_tensor(ONYX_DTYPE_FLOAT32, 0, NULL, &ys);
  const onyx_tensor *win[] = {&tc, &tx, &ty};
  kh_node where = {.op = "Where", .opset = 16};
  run(&where, win, 3, &r);
  expect_ok(&r);
  int64_t wd[] = {2, 3};
  expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, 2, wd);
  double want_w[] = {1, 2, 3, -1, -1, -1};
  expect_close(r.out[0].data, want_w, 6, 0, 0);
  kh_result_free(&r);
  const onyx_tensor *wbad[] = {&tx, &tx, &ty};
  run(&where, wbad, 3, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "condition");
}

static void test_max_min_sum_clip(void **st) {
  (void)st;
  kh_result r;
  float a[] = {1, NAN, -3}, b[] = {2, 0}, c = 0.5f;
  int64_t ad[] = {3, 1}, bd[] = {2};
  onyx_tensor ta = kh_tensor(ONYX_DTYPE_FLOAT32, 2, ad, a),
              tb = kh_tensor(ONYX_DTYPE_FLOAT32, 1, bd, b),
              tc = kh_tensor(ONYX_DTYPE_FLOAT32, 0, NULL, &c);
  const onyx_tensor *in[] = {&ta, &tb, &tc};
  kh_node mx = {.op = "Max", .opset = 13}, mn = {.op = "Min", .opset = 13},
          sm = {.op = "Sum", .opset = 13};
  run(&mx, in, 3, &r);
  expect_ok(&r);
  int64_t od[] = {3, 2};
  expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, 2, od);
  double want_max[] = {2, 1, NAN, NAN, 2, 0.5};
  expect_close(r.out[0].data, want_max, 6, 0, 0);
  kh_result_free(&r);
  run(&mn, in, 3, &r);
  expect_ok(&r);
  double want_min[] = {0.5, 0, NAN, NAN, -3, -3};
  expect_close(r.out[0].data, want_min, 6, 0, 0);
  kh_result_free(&r);
  run(&sm, in, 3, &r);
  expect_ok(&r);
  double want_sum[] = {3.5, 1.5, NAN, NAN, -0.5, -2.5};
  expect_close(r.out[0].data, want_sum, 6, 1e-7, 0);
  kh_result_free(&r);
  run(&mx, in, 1, &r); /* one input: a copy */
  expect_ok(&r);
  expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, 2, ad);
  kh_result_free(&r);

  /* Clip: min > max gives max everywhere; integers; opset 6 attributes. */
  int32_t xi[] = {-5, 0, 7, 100};
  int32_t lo = 3, hi = 1;
  int64_t d4[] = {4};
  onyx_tensor txi = kh_tensor(ONYX_DTYPE_INT32, 1, d4, xi),
              tlo = kh_tensor(ONYX_DTYPE_INT32, 0, NULL, &lo),
              thi = kh_tensor(ONYX_DTYPE_INT32, 0, NULL, &hi);
  kh_node clip = {.op = "Clip", .opset = 13};
  const onyx_tensor *cin[] = {&txi, &tlo, &thi};
  run(&clip, cin, 3, &r);
  expect_ok(&r);
  int32_t *y = r.out[0].data;
  for (int i = 0; i < 4; ++i) assert_int_equal(y[i], 1);
  kh_result_free(&r);
  const onyx_tensor *cin2[] = {&txi, NULL, &tlo};
  run(&clip, cin2, 3, &r);
  expect_ok(&r);
  y = r.out[0].data;
  assert_int_equal(y[0], -5);
  assert_int_equal(y[3], 3);
  kh_result_free(&r);
  float xf[] = {-2, 0.5f, 9, INFINITY};
  onyx_tensor txf = kh_tensor(ONYX_DTYPE_FLOAT32, 1, d4, xf);
  onyx_attr ca[] = {kh_attr_float("min", -1.0f)};
  kh_node clip6 = {.op = "Clip", .opset = 6, .attrs = ca, .attr_count = 1};
  const onyx_tensor *cin3[] = {&txf};
  run(&clip6, cin3, 1, &r);
  expect_ok(&r);
  double want_c[] = {-1, 0.5, 9, FLT_MAX};
  expect_close(r.out[0].data, want_c, 4, 0, 0);
  kh_result_free(&r);
}

/* ------------------------------------------------------------------ arithmetic, unary */

static void test_pow_mod(void **st) {
  (void)st;
  kh_result r;
  int32_t base[] = {1, 2, 3};
  float ex[] = {4, 5, 0.5f};
  int64_t d3[] = {3};
  onyx_tensor tb = kh_tensor(ONYX_DTYPE_INT32, 1, d3, base),
              te = kh_tensor(ONYX_DTYPE_FLOAT32, 1, d3, ex);
  const onyx_tensor *in[] = {&tb, &te};
  kh_node pow = {.op = "Pow", .opset = 15};
  run(&pow, in, 2, &r);
  expect_ok(&r);
  int32_t *y = r.out[0].data;
  assert_int_equal(y[0], 1);
  assert_int_equal(y[1], 32);
  assert_int_equal(y[2], 1); /* 3^0.5 = 1.73 truncates */
  kh_result_free(&r);
  float xf[] = {-1.5f, 2, 3}, two = 2;
  onyx_tensor txf = kh_tensor(ONYX_DTYPE_FLOAT32, 1, d3, xf),
              t2 = kh_tensor(ONYX_DTYPE_FLOAT32, 0, NULL, &two);
  const onyx_tensor *in2[] = {&txf, &t2};
  run(&pow, in2, 2, &r);
  expect_ok(&r);
  double want_sq[] = {2.25, 4, 9};
  expect_close(r.out[0].data, want_sq, 3, 0, 0);
  kh_result_free(&r);

  /* Mod: Python sign rule for integers (fmod 0), C fmod for floats; x % 0 refused. */
  int64_t a[] = {-7, 7, -7, 7}, b[] = {3, -3, -3, 3};
  int64_t d4[] = {4};
  onyx_tensor ta = kh_tensor(ONYX_DTYPE_INT64, 1, d4, a),
              tbb = kh_tensor(ONYX_DTYPE_INT64, 1, d4, b);
  const onyx_tensor *min[] = {&ta, &tbb};
  kh_node mod = {.op = "Mod", .opset = 13};
  run(&mod, min, 2, &r);
  expect_ok(&r);
  int64_t want_mod[] = {2, -2, -1, 1};
  expect_i64(r.out[0].data, want_mod, 4);
  kh_result_free(&r);
  onyx_attr fm[] = {kh_attr_int("fmod", 1)};
  kh_node fmod_ = {.op = "Mod", .opset = 13, .attrs = fm, .attr_count = 1};
  run(&fmod_, min, 2, &r);
  expect_ok(&r);
  int64_t want_fmod[] = {-1, 1, -1, 1};
  expect_i64(r.out[0].data, want_fmod, 4);
  kh_result_free(&r);
  int64_t zero[] = {1, 0, 1, 1};
  onyx_tensor tz = kh_tensor(ONYX_DTYPE_INT64, 1, d4, zero);
  const onyx_tensor *zin[] = {&ta, &tz};
  run(&mod, zin, 2, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "zero");
}

static void test_unary_math(void **st) {
  (void)st;
  kh_result r;
  const int64_t n = 9;
  float x[] = {-4, -1.5f, -0.25f, 0, 0.3f, 1, 2.5f, 6, 0.7f};
  int64_t d[] = {3, 3};
  onyx_tensor tx = kh_tensor(ONYX_DTYPE_FLOAT32, 2, d, x);
  const onyx_tensor *in[] = {&tx};
  static const struct {
    const char *op;
    const char *domain;
    int kind;
  } ops[] = {{"Exp", NULL, 0},  {"Tanh", NULL, 1},
             {"Erf", NULL, 2},  {"Sin", NULL, 3},
             {"Cos", NULL, 4},  {"Neg", NULL, 5},
             {"Abs", NULL, 6},  {"Reciprocal", NULL, 7},
             {"Gelu", NULL, 8}, {"Gelu", "com.microsoft", 8}};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; ++i) {
    kh_node nd = {.op = ops[i].op, .domain = ops[i].domain, .opset = ops[i].domain ? 1 : 20};
    run(&nd, in, 1, &r);
    expect_ok(&r);
    double want[9];
    for (int k = 0; k < n; ++k) {
      double v = x[k];
      switch (ops[i].kind) {
      case 0:
        want[k] = exp(v);
        break;
      case 1:
        want[k] = tanh(v);
        break;
      case 2:
        want[k] = erf(v);
        break;
      case 3:
        want[k] = sin(v);
        break;
      case 4:
        want[k] = cos(v);
        break;
      case 5:
        want[k] = -v;
        break;
      case 6:
        want[k] = fabs(v);
        break;
      case 7:
        want[k] = 1 / v;
        break;
      default:
        want[k] = 0.5 * v * (1 + erf(v / sqrt(2.0)));
        break;
      }
    }
    expect_close(r.out[0].data, want, n, 1e-6, 1e-7);
    kh_result_free(&r);
  }
  /* Gelu tanh approximation, and com.microsoft FastGelu with a bias. */
  onyx_attr ap[] = {kh_attr_string("approximate", "tanh")};
  kh_node gt = {.op = "Gelu", .opset = 20, .attrs = ap, .attr_count = 1};
  run(&gt, in, 1, &r);
  expect_ok(&r);
  double want[9], want_b[9];
  float bias[] = {0.1f, -0.2f, 0.3f};
  for (int k = 0; k < n; ++k) {
    double v = x[k], vb = v + bias[k % 3];
    want[k] = 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    want_b[k] = 0.5 * vb * (1 + tanh(sqrt(2 / M_PI) * (vb + 0.044715 * vb * vb * vb)));
  }
  expect_close(r.out[0].data, want, n, 1e-6, 1e-7);
  kh_result_free(&r);
  int64_t bd[] = {3};
  onyx_tensor tbias = kh_tensor(ONYX_DTYPE_FLOAT32, 1, bd, bias);
  const onyx_tensor *fin[] = {&tx, &tbias};
  kh_node fast = {.op = "FastGelu", .domain = "com.microsoft", .opset = 1};
  run(&fast, fin, 2, &r);
  expect_ok(&r);
  expect_close(r.out[0].data, want_b, n, 1e-6, 1e-7);
  kh_result_free(&r);
  onyx_attr badap[] = {kh_attr_string("approximate", "erf")};
  kh_node gbad = {.op = "Gelu", .opset = 20, .attrs = badap, .attr_count = 1};
  run(&gbad, in, 1, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "approximate");

  /* Integer Neg wraps at the minimum; bfloat16 Sqrt rounds once. */
  int32_t xi[] = {INT32_MIN, -3, 4};
  int64_t d3[] = {3};
  onyx_tensor ti = kh_tensor(ONYX_DTYPE_INT32, 1, d3, xi);
  const onyx_tensor *iin[] = {&ti};
  kh_node neg = {.op = "Neg", .opset = 13};
  run(&neg, iin, 1, &r);
  expect_ok(&r);
  int32_t *yi = r.out[0].data;
  assert_int_equal(yi[0], INT32_MIN);
  assert_int_equal(yi[1], 3);
  assert_int_equal(yi[2], -4);
  kh_result_free(&r);
  uint16_t xb[] = {0x4080, 0x4000}; /* 4, 2 */
  int64_t d2[] = {2};
  onyx_tensor tbf = kh_tensor(ONYX_DTYPE_BFLOAT16, 1, d2, xb);
  const onyx_tensor *bin[] = {&tbf};
  kh_node sq = {.op = "Sqrt", .opset = 13};
  run(&sq, bin, 1, &r);
  expect_ok(&r);
  uint16_t *yb = r.out[0].data;
  assert_int_equal(yb[0], 0x4000); /* 2 */
  assert_int_equal(yb[1], 0x3fb5); /* 1.4142 rounds to 1.4140625 */
  kh_result_free(&r);
}

/* ------------------------------------------------------------------ generators */

static void test_range_constant_of_shape(void **st) {
  (void)st;
  kh_result r;
  int32_t s = 10, l = -3, dl = -4;
  onyx_tensor ts = kh_tensor(ONYX_DTYPE_INT32, 0, NULL, &s),
              tl = kh_tensor(ONYX_DTYPE_INT32, 0, NULL, &l),
              td = kh_tensor(ONYX_DTYPE_INT32, 0, NULL, &dl);
  const onyx_tensor *in[] = {&ts, &tl, &td};
  kh_node range = {.op = "Range", .opset = 11};
  run(&range, in, 3, &r);
  expect_ok(&r);
  int64_t d4[] = {4};
  expect_shape(&r.out[0], ONYX_DTYPE_INT32, 1, d4);
  int32_t *y = r.out[0].data;
  assert_int_equal(y[0], 10);
  assert_int_equal(y[3], -2);
  kh_result_free(&r);
  float fs = 1, fl = 5, fd = 1.5f;
  onyx_tensor tfs = kh_tensor(ONYX_DTYPE_FLOAT32, 0, NULL, &fs),
              tfl = kh_tensor(ONYX_DTYPE_FLOAT32, 0, NULL, &fl),
              tfd = kh_tensor(ONYX_DTYPE_FLOAT32, 0, NULL, &fd);
  const onyx_tensor *fin[] = {&tfs, &tfl, &tfd};
  run(&range, fin, 3, &r);
  expect_ok(&r);
  double want[] = {1, 2.5, 4};
  expect_close(r.out[0].data, want, 3, 0, 0);
  kh_result_free(&r);
  int32_t zero = 0;
  onyx_tensor tz = kh_tensor(ONYX_DTYPE_INT32, 0, NULL, &zero);
  const onyx_tensor *zin[] = {&ts, &tl, &tz};
  run(&range, zin, 3, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "delta");

  /* ConstantOfShape: float zero by default; an empty shape is a scalar. */
  int64_t shape[] = {2, 3};
  onyx_tensor tsh = kh_tensor(ONYX_DTYPE_INT64, 1, (int64_t[]){2}, shape);
  const onyx_tensor *cin[] = {&tsh};
  kh_node cos_ = {.op = "ConstantOfShape", .opset = 9};
  run(&cos_, cin, 1, &r);
  expect_ok(&r);
  expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, 2, shape);
  double zeros[6] = {0};
  expect_close(r.out[0].data, zeros, 6, 0, 0);
  kh_result_free(&r);
  int64_t v = -9;
  onyx_tensor tv = kh_tensor(ONYX_DTYPE_INT64, 1, (int64_t[]){1}, &v);
  onyx_attr va[] = {kh_attr_tensor("value", &tv)};
  kh_node cosv = {.op = "ConstantOfShape", .opset = 20, .attrs = va, .attr_count = 1};
  onyx_tensor tempty = kh_tensor(ONYX_DTYPE_INT64, 1, (int64_t[]){0}, NULL);
  const onyx_tensor *ein[] = {&tempty};
  run(&cosv, ein, 1, &r);
  expect_ok(&r);
  assert_int_equal(r.out[0].rank, 0);
  assert_int_equal(*(int64_t *)r.out[0].data, -9);
  kh_result_free(&r);
  int64_t negshape[] = {2, -1};
  onyx_tensor tneg = kh_tensor(ONYX_DTYPE_INT64, 1, (int64_t[]){2}, negshape);
  const onyx_tensor *nin[] = {&tneg};
  run(&cos_, nin, 1, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "negative");

  /* Size and Flatten. */
  float x[24] = {0};
  int64_t xd[] = {2, 3, 4};
  onyx_tensor tx = kh_tensor(ONYX_DTYPE_FLOAT32, 3, xd, x);
  const onyx_tensor *xin[] = {&tx};
  kh_node size = {.op = "Size", .opset = 13};
  run(&size, xin, 1, &r);
  expect_ok(&r);
  assert_int_equal(*(int64_t *)r.out[0].data, 24);
  kh_result_free(&r);
  onyx_attr fa[] = {kh_attr_int("axis", -1)};
  kh_node flat = {.op = "Flatten", .opset = 13, .attrs = fa, .attr_count = 1};
  run(&flat, xin, 1, &r);
  expect_ok(&r);
  int64_t fd2[] = {6, 4};
  expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, 2, fd2);
  kh_result_free(&r);
}

/* ------------------------------------------------------------------ parallel */

/* Large elementwise work split over 4 threads gives the serial result exactly. */
static void test_parallel_matches_serial(void **st) {
  (void)st;
  const int64_t rows = 257, cols = 1031;
  float *a = rand_floats(rows * cols, -2, 2), *b = rand_floats(cols, -2, 2);
  int64_t ad[] = {rows, cols}, bd[] = {cols};
  onyx_tensor ta = kh_tensor(ONYX_DTYPE_FLOAT32, 2, ad, a),
              tb = kh_tensor(ONYX_DTYPE_FLOAT32, 1, bd, b);
  const onyx_tensor *in2[] = {&ta, &tb};
  const onyx_tensor *in1[] = {&ta};
  static const struct {
    const char *op;
    const char *domain;
    size_t inputs;
  } ops[] = {{"Add", NULL, 2},
             {"Mul", NULL, 2},
             {"Pow", NULL, 2},
             {"Max", NULL, 2},
             {"Greater", NULL, 2},
             {"Where", NULL, 0},
             {"Tanh", NULL, 1},
             {"Sigmoid", NULL, 1},
             {"Gelu", "com.microsoft", 1},
             {"SimplifiedLayerNormalization", NULL, 2},
             {"ReduceSum", NULL, 1},
             {"Clip", NULL, 1}};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; ++i) {
    kh_node n = {.op = ops[i].op, .domain = ops[i].domain, .opset = ops[i].domain ? 1 : 17};
    kh_result r1, r4;
    if (ops[i].inputs == 0) { /* Where: condition from Greater */
      kh_node gt = {.op = "Greater", .opset = 13};
      kh_result c;
      run(&gt, in2, 2, &c);
      expect_ok(&c);
      const onyx_tensor *win[] = {&c.out[0], &ta, &tb};
      run_on(&g_cpu, &n, win, 3, &r1);
      run_on(&g_cpu_mt, &n, win, 3, &r4);
      kh_result_free(&c);
    } else {
      run_on(&g_cpu, &n, ops[i].inputs == 2 ? in2 : in1, ops[i].inputs, &r1);
      run_on(&g_cpu_mt, &n, ops[i].inputs == 2 ? in2 : in1, ops[i].inputs, &r4);
    }
    expect_ok(&r1);
    expect_ok(&r4);
    size_t bytes = (size_t)onyx_tensor_numel(&r1.out[0]) * onyx_dtype_size(r1.out[0].dtype);
    if (memcmp(r1.out[0].data, r4.out[0].data, bytes) != 0)
      fail_msg("%s: 4 threads differ from 1", ops[i].op);
    kh_result_free(&r1);
    kh_result_free(&r4);
  }
  free(a);
  free(b);
}

/* ------------------------------------------------------------------ main */

static int group_setup(void **st) {
  (void)st;
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
      cmocka_unit_test(test_slice),
      cmocka_unit_test(test_split),
      cmocka_unit_test(test_expand_trilu),
      cmocka_unit_test(test_reduce),
      cmocka_unit_test(test_layer_norm),
      cmocka_unit_test(test_rms_and_skip_norms),
      cmocka_unit_test(test_compare_where),
      cmocka_unit_test(test_max_min_sum_clip),
      cmocka_unit_test(test_pow_mod),
      cmocka_unit_test(test_unary_math),
      cmocka_unit_test(test_range_constant_of_shape),
      cmocka_unit_test(test_parallel_matches_serial),
  };
  return cmocka_run_group_tests_name("cpu_ops", tests, group_setup, group_teardown);
}
