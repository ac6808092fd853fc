/*
 * The CPU provider's float32 GEMM through MatMul and Gemm, against a double
 * reference: sizes that cross every block edge (tile rows and columns, K slices, row
 * blocks, column panels), every route (few rows without packing, one row against a
 * prepacked B, the blocked route with B packed per call or prepacked), each
 * instruction-set build this machine runs (ONYX_CPU_GEMM_ISA caps the choice), and
 * one, two and four threads. Also the prepacking contract of ABI v2: a float32
 * constant B is copied into governed memory at create, the core is told it may free
 * the original, compute works from geometry alone, and everything is given back.
 *
 * Usage: cpu_gemm_test [path/to/libonyx_cpu.so]   (default: ONYX_CPU_SO)
 * ONYX_TEST_SEED=N changes the random inputs.
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

#ifndef ONYX_CPU_SO
#define ONYX_CPU_SO "libonyx_cpu.so"
#endif

static const char *g_so_path = ONYX_CPU_SO;
static kh_provider g_cpu[3]; /* 1, 2 and 4 threads */
static const int g_threads[3] = {1, 2, 4};

/* ------------------------------------------------------------------ helpers */

static uint64_t g_rng;

static void rng_seed(uint64_t s) {
  const char *env = getenv("ONYX_TEST_SEED");
  g_rng = (env ? strtoull(env, NULL, 10) : 0x9e3779b97f4a7c15ull) ^ (s * 0x2545f4914f6cdd1dull);
  if (g_rng == 0) g_rng = 1;
}

static float *rand_floats(int64_t n) {
  float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
  for (int64_t i = 0; i < n; ++i) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    p[i] = (float)((g_rng >> 40) * (2.0 / 16777216.0) - 1.0); /* [-1, 1) */
  }
  return p;
}

/* The reference: Y = alpha·op(A)·op(B) + beta·C (C broadcast from [cm, cn]), in
 * double, and per element the sum of |terms|, which bounds float32's rounding. */
typedef struct ref_gemm {
  int64_t m, n, k;
  bool ta, tb;
  double alpha, beta;
  const float *a, *b, *c;
  int64_t cm, cn;
} ref_gemm;

static void ref_run(const ref_gemm *g, double *y, double *mag) {
  for (int64_t i = 0; i < g->m; ++i)
    for (int64_t j = 0; j < g->n; ++j) {
      double s = 0, abs_sum = 0;
      for (int64_t p = 0; p < g->k; ++p) {
        double t = (double)(g->ta ? g->a[p * g->m + i] : g->a[i * g->k + p]) *
                   (g->tb ? g->b[j * g->k + p] : g->b[p * g->n + j]);
        s += t;
        abs_sum += fabs(t);
      }
      double c = g->c ? g->c[(g->cm == 1 ? 0 : i) * g->cn + (g->cn == 1 ? 0 : j)] : 0;
      y[i * g->n + j] = g->alpha * s + g->beta * c;
      mag[i * g->n + j] = fabs(g->alpha) * abs_sum + fabs(g->beta * c);
    }
}

/* float32 within a few units of rounding of the terms' magnitude: a product that
 * dropped or doubled one term of size ~1/4 is far outside. */
static void expect_gemm_close(const float *got, const double *want, const double *mag, int64_t n,
                              const char *what) {
  for (int64_t i = 0; i < n; ++i)
    if (!(fabs(got[i] - want[i]) <= 1e-6 * mag[i] + 1e-6))
      fail_msg("%s: element %lld: got %.9g, want %.9g (terms' magnitude %.3g)", what, (long long)i,
               got[i], want[i], mag[i]);
}

static void set_isa(const char *isa) {
  if (isa)
    setenv("ONYX_CPU_GEMM_ISA", isa, 1);
  else
    unsetenv("ONYX_CPU_GEMM_ISA");
}

/* ------------------------------------------------------------------ MatMul sizes */

typedef struct mm_size {
  int64_t m, k, n;
} mm_size;

/* Runs A[m×k]·B[k×n] on one configuration and checks it against want. */
static void check_matmul_once(const mm_size *z, const float *a, const float *b, const double *want,
                              const double *mag, int threads_ix, bool constant, const char *isa) {
  int64_t da[2] = {z->m, z->k}, db[2] = {z->k, z->n}, dy[2] = {z->m, z->n};
  onyx_tensor ta = kh_tensor(ONYX_DTYPE_FLOAT32, 2, da, a);
  onyx_tensor tb = kh_tensor(ONYX_DTYPE_FLOAT32, 2, db, b);
  const onyx_tensor *in[] = {&ta, &tb};
  const bool cons[2] = {false, true};
  kh_node node = {.op = "MatMul", .opset = 13, .constant_inputs = constant ? cons : NULL};
  kh_result r;
  set_isa(isa);
  kh_run(&g_cpu[threads_ix], &node, in, 2, &r);
  set_isa(NULL);
  char what[160];
  snprintf(what, sizeof what, "MatMul %lldx%lldx%lld (M×K×N), %d threads, B %s, isa %s",
           (long long)z->m, (long long)z->k, (long long)z->n, g_threads[threads_ix],
           constant ? "constant" : "computed", isa ? isa : "best");
  if (r.status != ONYX_STATUS_OK)
    fail_msg("%s: %s at %s: %s", what, onyx_status_str(r.status), r.stage, r.error);
  expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, 2, dy);
  assert_int_equal(r.constants_copied, constant ? 2u : 0u);
  assert_int_equal(r.governed_live_after, 0);
  expect_gemm_close(r.out[0].data, want, mag, z->m * z->n, what);
  kh_result_free(&r);
}

static void check_matmul_sizes(const mm_size *sizes, size_t count) {
  static const char *const isas[] = {"avx2", "generic"};
  for (size_t c = 0; c < count; ++c) {
    const mm_size *z = &sizes[c];
    rng_seed(300 + c);
    float *a = rand_floats(z->m * z->k), *b = rand_floats(z->k * z->n);
    size_t ny = (size_t)(z->m * z->n > 0 ? z->m * z->n : 1);
    double *want = malloc(ny * sizeof *want), *mag = malloc(ny * sizeof *mag);
    ref_gemm g = {z->m, z->n, z->k, false, false, 1.0, 0.0, a, b, NULL, 1, 1};
    ref_run(&g, want, mag);
    for (int t = 0; t < 3; ++t)
      for (int constant = 0; constant < 2; ++constant)
        check_matmul_once(z, a, b, want, mag, t, constant, NULL);
    /* The builds below the best one, on two threads. */
    for (size_t i = 0; i < sizeof isas / sizeof isas[0]; ++i)
      for (int constant = 0; constant < 2; ++constant)
        check_matmul_once(z, a, b, want, mag, 1, constant, isas[i]);
    free(want);
    free(mag);
    free(a);
    free(b);
  }
}

static void test_matmul_small_m(void **st) {
  (void)st;
  /* Decoder steps: one row (the row kernel on prepacked B), up to five (no packing),
   * K not a multiple of the unroll, N not a multiple of the 16-wide sliver. */
  static const mm_size sizes[] = {
      {1, 1, 1},     {1, 7, 33},   {1, 300, 100}, {1, 257, 1030}, {1, 896, 128},  {2, 33, 47},
      {3, 129, 517}, {4, 70, 300}, {5, 333, 700}, {1, 513, 17},   {2, 300, 2000}, {5, 16, 16},
  };
  check_matmul_sizes(sizes, sizeof sizes / sizeof sizes[0]);
}

static void test_matmul_tiles(void **st) {
  (void)st;
  /* Rows around the 6- and 8-row tiles and the 144-row block; K around the 256-deep
   * slice; N around slivers and 512-column panels. */
  static const mm_size sizes[] = {
      {6, 64, 16},    {7, 100, 37},  {8, 256, 64},   {9, 257, 31},   {13, 40, 200},
      {16, 300, 129}, {17, 31, 513}, {31, 255, 47},  {32, 512, 96},  {33, 100, 1030},
      {48, 513, 64},  {100, 77, 33}, {145, 90, 100}, {150, 260, 40}, {289, 33, 530},
  };
  check_matmul_sizes(sizes, sizeof sizes / sizeof sizes[0]);
}

/* ------------------------------------------------------------------ batches */

static void test_matmul_batches(void **st) {
  (void)st;
  /* {rank A, dims A, rank B, dims B, constant B}: batches of A folded into one tall
   * product against a constant matrix, 1-D A, and batch broadcast (B with batch dims
   * is never prepacked). */
  static const struct {
    uint32_t ra;
    int64_t a[4];
    uint32_t rb;
    int64_t b[4];
    bool constant;
  } cases[] = {
      {3, {3, 7, 40}, 2, {40, 50}, true},
      {4, {2, 2, 9, 33}, 2, {33, 70}, true},
      {1, {40}, 2, {40, 37}, true},
      {4, {2, 1, 10, 20}, 3, {3, 20, 17}, true},
      {3, {1, 13, 20}, 4, {2, 3, 20, 30}, false},
      {2, {12, 20}, 3, {4, 20, 18}, true},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
    rng_seed(400 + c);
    uint32_t ra = cases[c].ra, rb = cases[c].rb;
    int64_t m = ra >= 2 ? cases[c].a[ra - 2] : 1, k = cases[c].a[ra - 1], n = cases[c].b[rb - 1];
    int64_t batch_a = 1, batch_b = 1;
    for (uint32_t d = 0; d + 2 < ra; ++d) batch_a *= cases[c].a[d];
    for (uint32_t d = 0; d + 2 < rb; ++d) batch_b *= cases[c].b[d];
    float *a = rand_floats(batch_a * m * k), *b = rand_floats(batch_b * k * n);
    onyx_tensor ta = kh_tensor(ONYX_DTYPE_FLOAT32, ra, cases[c].a, a);
    onyx_tensor tb = kh_tensor(ONYX_DTYPE_FLOAT32, rb, cases[c].b, b);
    const onyx_tensor *in[] = {&ta, &tb};
    const bool cons[2] = {false, cases[c].constant};
    kh_node node = {.op = "MatMul", .opset = 13, .constant_inputs = cons};
    for (int t = 0; t < 3; t += 2) {
      kh_result r;
      kh_run(&g_cpu[t], &node, in, 2, &r);
      expect_ok(&r);
      assert_int_equal(r.constants_copied, cases[c].constant && rb == 2 ? 2u : 0u);
      /* Batch dims broadcast right-aligned; every output matrix checked. */
      uint32_t bra = ra > 2 ? ra - 2 : 0, brb = rb > 2 ? rb - 2 : 0, bry = bra > brb ? bra : brb;
      int64_t out_batch[2] = {1, 1}, batches = 1;
      for (uint32_t d = 0; d < bry; ++d) {
        int64_t da = d + bra >= bry ? cases[c].a[d + bra - bry] : 1;
        int64_t db = d + brb >= bry ? cases[c].b[d + brb - bry] : 1;
        out_batch[d] = da > db ? da : db;
        batches *= out_batch[d];
      }
      double *want = malloc((size_t)(m * n) * sizeof *want),
             *mag = malloc((size_t)(m * n) * sizeof *mag);
      for (int64_t bi = 0; bi < batches; ++bi) {
        /* Index of this output batch in A's and B's batch dims (bry ≤ 2 here). */
        int64_t idx[2] = {bry == 2 ? bi / out_batch[1] : bi, bry == 2 ? bi % out_batch[1] : 0};
        int64_t oa = 0, ob = 0;
        for (uint32_t d = 0; d < bry; ++d) {
          if (d + bra >= bry) {
            int64_t dim = cases[c].a[d + bra - bry];
            oa = oa * dim + (dim == 1 ? 0 : idx[d]);
          }
          if (d + brb >= bry) {
            int64_t dim = cases[c].b[d + brb - bry];
            ob = ob * dim + (dim == 1 ? 0 : idx[d]);
          }
        }
        ref_gemm g = {m, n, k, false, false, 1.0, 0.0, a + oa * m * k, b + ob * k * n, NULL, 1, 1};
        ref_run(&g, want, mag);
        expect_gemm_close((const float *)r.out[0].data + bi * m * n, want, mag, m * n,
                          "batched MatMul");
      }
      free(want);
      free(mag);
      kh_result_free(&r);
    }
    free(a);
    free(b);
  }
}

/* ------------------------------------------------------------------ Gemm */

static void check_gemm(int64_t m, int64_t n, int64_t k) {
  static const struct {
    int ta, tb;
    float alpha, beta;
    int c_kind; /* 0 none, 1 [N], 2 [M,1], 3 [M,N] */
  } cases[] = {{0, 0, 1.0f, 1.0f, 0},  {0, 1, 0.5f, 2.0f, 1}, {1, 0, -1.5f, 1.0f, 2},
               {1, 1, 2.0f, -1.0f, 3}, {0, 1, 1.0f, 0.0f, 3}, {1, 1, 1.0f, 1.0f, 1}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
    rng_seed(500 + c + (uint64_t)(m * 7 + n * 3 + k));
    float *a = rand_floats(m * k), *b = rand_floats(k * n), *cv = rand_floats(m * n);
    int64_t da[2] = {cases[c].ta ? k : m, cases[c].ta ? m : k};
    int64_t db[2] = {cases[c].tb ? n : k, cases[c].tb ? k : n};
    int64_t dc[3][2] = {{n, 0}, {m, 1}, {m, n}};
    int kind = cases[c].c_kind;
    onyx_tensor ta = kh_tensor(ONYX_DTYPE_FLOAT32, 2, da, a);
    onyx_tensor tb = kh_tensor(ONYX_DTYPE_FLOAT32, 2, db, b);
    onyx_tensor tc = kh_tensor(ONYX_DTYPE_FLOAT32, kind == 1 ? 1 : 2, kind ? dc[kind - 1] : da, cv);
    const onyx_tensor *in[] = {&ta, &tb, kind ? &tc : NULL};
    onyx_attr attrs[] = {kh_attr_int("transA", cases[c].ta), kh_attr_int("transB", cases[c].tb),
                         kh_attr_float("alpha", cases[c].alpha),
                         kh_attr_float("beta", cases[c].beta)};
    double *want = malloc((size_t)(m * n) * sizeof *want),
           *mag = malloc((size_t)(m * n) * sizeof *mag);
    ref_gemm g = {m,
                  n,
                  k,
                  cases[c].ta,
                  cases[c].tb,
                  cases[c].alpha,
                  cases[c].beta,
                  a,
                  b,
                  kind ? cv : NULL,
                  kind == 2 || kind == 3 ? m : 1,
                  kind == 2 ? 1 : n};
    ref_run(&g, want, mag);
    for (int constant = 0; constant < 2; ++constant)
      for (int t = 0; t < 3; t += 1) {
        const bool cons[3] = {false, true, constant == 1 && kind != 0};
        kh_node node = {.op = "Gemm",
                        .opset = 13,
                        .attrs = attrs,
                        .attr_count = 4,
                        .constant_inputs = constant ? cons : NULL};
        kh_result r;
        kh_run(&g_cpu[t], &node, in, 3, &r);
        char what[160];
        snprintf(what, sizeof what, "Gemm %lldx%lldx%lld transA=%d transB=%d C kind %d, B %s",
                 (long long)m, (long long)k, (long long)n, cases[c].ta, cases[c].tb, kind,
                 constant ? "constant" : "computed");
        if (r.status != ONYX_STATUS_OK) fail_msg("%s: %s", what, r.error);
        assert_int_equal(r.constants_copied, constant ? 2u : 0u);
        assert_int_equal(r.governed_live_after, 0);
        expect_gemm_close(r.out[0].data, want, mag, m * n, what);
        kh_result_free(&r);
      }
    free(want);
    free(mag);
    free(a);
    free(b);
    free(cv);
  }
}

static void test_gemm_transposes(void **st) {
  (void)st;
  check_gemm(1, 37, 300);
  check_gemm(3, 130, 45);
  check_gemm(17, 100, 513);
  check_gemm(70, 530, 260);
}

/* ------------------------------------------------------------------ the contract */

static void test_prepack_contract(void **st) {
  (void)st;
  int64_t m = 9, k = 70, n = 37;
  rng_seed(600);
  float *a = rand_floats(m * k), *b = rand_floats(k * n);
  int64_t da[2] = {m, k}, db[2] = {k, n};
  onyx_tensor ta = kh_tensor(ONYX_DTYPE_FLOAT32, 2, da, a);
  onyx_tensor tb = kh_tensor(ONYX_DTYPE_FLOAT32, 2, db, b);
  const onyx_tensor *in[] = {&ta, &tb};
  double want[9 * 37], mag[9 * 37];
  ref_gemm g = {m, n, k, false, false, 1.0, 0.0, a, b, NULL, 1, 1};
  ref_run(&g, want, mag);

  /* A constant float32 B: packed (K × N rounded up to 16 columns) in governed memory,
   * the original given back, and less workspace than packing per call. */
  const bool b_const[2] = {false, true};
  kh_node node = {.op = "MatMul", .opset = 13, .constant_inputs = b_const};
  kh_result r, plain;
  kh_run(&g_cpu[1], &node, in, 2, &r);
  expect_ok(&r);
  assert_int_equal(r.constants_copied, 2u);
  assert_int_equal(r.governed_bytes, (uint64_t)(k * 48) * sizeof(float));
  assert_int_equal(r.governed_live_after, 0);
  expect_gemm_close(r.out[0].data, want, mag, m * n, "prepacked");
  kh_node unpacked = {.op = "MatMul", .opset = 13};
  kh_run(&g_cpu[1], &unpacked, in, 2, &plain);
  expect_ok(&plain);
  assert_true(r.workspace_bytes < plain.workspace_bytes);
  kh_result_free(&r);
  kh_result_free(&plain);

  /* Governed memory refused: B stays where it is and is packed per call. */
  kh_node refused = node;
  refused.refuse_mem_alloc = true;
  kh_run(&g_cpu[1], &refused, in, 2, &r);
  expect_ok(&r);
  assert_int_equal(r.constants_copied, 0u);
  assert_int_equal(r.governed_bytes, 0u);
  expect_gemm_close(r.out[0].data, want, mag, m * n, "refused");
  kh_result_free(&r);

  /* A constant A is not B: nothing is copied. */
  const bool a_const[2] = {true, false};
  kh_node a_node = {.op = "MatMul", .opset = 13, .constant_inputs = a_const};
  kh_run(&g_cpu[0], &a_node, in, 2, &r);
  expect_ok(&r);
  assert_int_equal(r.constants_copied, 0u);
  expect_gemm_close(r.out[0].data, want, mag, m * n, "constant A");
  kh_result_free(&r);

  /* 16-bit and float64 constants keep their own routes (packing them to float32 would
   * double or keep their bytes for nothing). */
  uint16_t ah[6] = {0x3C00, 0x4000, 0x4200, 0x4400, 0x4500, 0x4600}; /* 1..6 */
  uint16_t bh[6] = {0x3800, 0xBC00, 0x4000, 0x3400, 0xC200, 0x3C00}; /* .5 -1 2 .25 -3 1 */
  int64_t d23[2] = {2, 3}, d32[2] = {3, 2};
  onyx_tensor th = kh_tensor(ONYX_DTYPE_FLOAT16, 2, d23, ah),
              tk = kh_tensor(ONYX_DTYPE_FLOAT16, 2, d32, bh);
  const onyx_tensor *inh[] = {&th, &tk};
  kh_run(&g_cpu[0], &node, inh, 2, &r);
  expect_ok(&r);
  assert_int_equal(r.constants_copied, 0u);
  const uint16_t wanth[4] = {0xC480, 0x4100, 0xC600, 0x4280}; /* -4.5 2.5 -6 3.25 */
  assert_memory_equal(r.out[0].data, wanth, sizeof wanth);
  kh_result_free(&r);

  double a64[6] = {1, 2, 3, 4, 5, 6}, b64[6] = {0.5, -1, 2, 0.25, -3, 1};
  onyx_tensor t64a = kh_tensor(ONYX_DTYPE_FLOAT64, 2, d23, a64),
              t64b = kh_tensor(ONYX_DTYPE_FLOAT64, 2, d32, b64);
  const onyx_tensor *in64[] = {&t64a, &t64b};
  kh_run(&g_cpu[0], &node, in64, 2, &r);
  expect_ok(&r);
  assert_int_equal(r.constants_copied, 0u);
  const double want64[4] = {-4.5, 2.5, -6, 3.25};
  assert_memory_equal(r.out[0].data, want64, sizeof want64);
  kh_result_free(&r);

  /* A workspace short of what was declared is refused before anything is written,
   * prepacked or not (alpha 2: A is packed, so there is a region to shorten). */
  onyx_attr alpha2[] = {kh_attr_float("alpha", 2.0f)};
  for (int constant = 0; constant < 2; ++constant) {
    kh_node shortws = {.op = "Gemm",
                       .opset = 13,
                       .attrs = alpha2,
                       .attr_count = 1,
                       .constant_inputs = constant ? b_const : NULL,
                       .workspace_shortfall = 4};
    kh_run(&g_cpu[1], &shortws, in, 2, &r);
    expect_fail(&r, ONYX_STATUS_WORKSPACE_TOO_SMALL, "required");
    assert_int_equal(r.governed_live_after, 0);
    kh_result_free(&r);
  }

  /* Bad A against a prepacked B: the usual message, nothing allocated. */
  int64_t dbad[2] = {m, k + 1};
  onyx_tensor tbad = kh_tensor(ONYX_DTYPE_FLOAT32, 2, dbad, a);
  const onyx_tensor *inbad[] = {&tbad, &tb};
  kh_run(&g_cpu[1], &node, inbad, 2, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "input 1 dim 0 is 70, expected 71");
  assert_int_equal(r.governed_live_after, 0);
  kh_result_free(&r);
  free(a);
  free(b);
}

int main(int argc, char **argv) {
  if (argc > 1) g_so_path = argv[1];
  char err[512];
  for (int t = 0; t < 3; ++t)
    if (kh_load(&g_cpu[t], g_so_path, NULL, 0, (uint32_t)g_threads[t], err, sizeof err) !=
        ONYX_STATUS_OK) {
      fprintf(stderr, "cannot load %s: %s\n", g_so_path, err);
      return 1;
    }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_matmul_small_m),   cmocka_unit_test(test_matmul_tiles),
      cmocka_unit_test(test_matmul_batches),   cmocka_unit_test(test_gemm_transposes),
      cmocka_unit_test(test_prepack_contract),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  for (int t = 0; t < 3; ++t) kh_unload(&g_cpu[t]);
  return failed;
}
