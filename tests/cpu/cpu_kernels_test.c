/*
 * Tests of the CPU reference provider's kernels, run through kernel_harness (the
 * provider is dlopen'ed as the core would). Expected values come from naive
 * reference loops in this file (in double), from hand-checked bit patterns for
 * the float16/bfloat16 rounding cases, and from a few constants computed offline
 * with numpy.
 *
 * Usage: cpu_kernels_test [path/to/libonyx_cpu.so]   (default: ONYX_CPU_SO)
 * ONYX_TEST_SEED=N changes the random inputs.
 */
#include <dlfcn.h>
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
static kh_provider g_cpu;    /* serial kernels */
static kh_provider g_cpu_mt; /* with a 4-thread parallel_for */

/* ------------------------------------------------------------------ helpers */

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

static void rng_seed(uint64_t s) {
  const char *env = getenv("ONYX_TEST_SEED");
  g_rng = (env ? strtoull(env, NULL, 10) : 0x9e3779b97f4a7c15ull) ^ (s * 0x2545f4914f6cdd1dull);
  if (g_rng == 0) g_rng = 1;
}

static uint64_t rng_next(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return g_rng;
}

/* Uniform in [lo, hi). */
static float rng_float(float lo, float hi) {
  return lo + (hi - lo) * (float)((rng_next() >> 40) * (1.0 / 16777216.0));
}

static float *rand_floats(int64_t n, float lo, float hi) {
  float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
  for (int64_t i = 0; i < n; ++i) p[i] = rng_float(lo, hi);
  return p;
}

static int64_t numel(uint32_t rank, const int64_t *dims) {
  int64_t n = 1;
  for (uint32_t i = 0; i < rank; ++i) n *= dims[i];
  return n;
}

static void run(const kh_node *node, const onyx_tensor *const *in, size_t n, kh_result *r) {
  kh_run(&g_cpu, node, in, n, r);
}

static void expect_close_f64(const double *got, const double *want, int64_t n, double tol) {
  for (int64_t i = 0; i < n; ++i)
    if (!(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i]))))
      fail_msg("element %lld: got %.17g, want %.17g", (long long)i, got[i], want[i]);
}

static void expect_u16(const uint16_t *got, const uint16_t *want, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (got[i] != want[i])
      fail_msg("element %lld: got 0x%04x, want 0x%04x", (long long)i, got[i], want[i]);
}

/* Offset of output element `i` in an input broadcast to the output shape. */
static int64_t bcast_offset(int64_t i, uint32_t out_rank, const int64_t *out_dims, uint32_t rank,
                            const int64_t *dims) {
  int64_t off = 0, stride = 1;
  for (uint32_t d = out_rank; d-- > 0;) {
    int64_t c = i % out_dims[d];
    i /= out_dims[d];
    if (d >= out_rank - rank) {
      uint32_t k = d - (out_rank - rank);
      if (dims[k] != 1) off += c * stride;
      stride *= dims[k];
    }
  }
  return off;
}

static double ref_op(char op, double a, double b) {
  switch (op) {
  case '+':
    return a + b;
  case '-':
    return a - b;
  case '*':
    return a * b;
  default:
    return a / b;
  }
}

/* ------------------------------------------------------------------ provider */

static void test_entry_negotiation(void **st) {
  (void)st;
  kh_provider p;
  char err[256];
  assert_int_equal(kh_load(&p, g_so_path, NULL, 0, 1, err, sizeof err), ONYX_STATUS_OK);
  onyx_provider_entry_fn entry;
  void *sym = dlsym(p.dl, ONYX_PROVIDER_ENTRY_SYMBOL);
  memcpy(&entry, &sym, sizeof entry);
  uint32_t abi = 99;
  const onyx_provider_table *t = NULL;
  assert_int_equal(entry(0, &abi, &t), ONYX_STATUS_ABI_MISMATCH);
  assert_int_equal(abi, ONYX_ABI_VERSION);
  assert_null(t);
  assert_int_equal(entry(7, &abi, &t), ONYX_STATUS_OK); /* a newer core gets this header's ABI */
  assert_int_equal(abi, ONYX_ABI_VERSION);
  assert_non_null(t);
  assert_string_equal(t->name, "cpu");
  assert_int_equal(t->device, ONYX_DEVICE_HOST);
  assert_int_equal(t->struct_size, sizeof(onyx_provider_table));
  assert_null(t->device_alloc);
  assert_null(t->copy);
  for (size_t i = 0; i < t->kernel_count; ++i) {
    assert_int_equal(t->kernels[i]->struct_size, sizeof(onyx_kernel_table));
    assert_non_null(t->kernels[i]->compute);
  }
  /* Only the entry point is visible. */
  assert_null(dlsym(p.dl, "onyx__cpu_sgemm"));
  assert_null(dlsym(p.dl, "onyx__cpu_f32_to_f16"));
  kh_unload(&p);
}

static void test_open_options(void **st) {
  (void)st;
  kh_provider p;
  char err[256] = "";
  onyx_option ok[] = {{"threads", "1"}, {"some_future_key", "x"}};
  assert_int_equal(kh_load(&p, g_so_path, ok, 2, 4, err, sizeof err), ONYX_STATUS_OK);
  kh_unload(&p);
  onyx_option bad[] = {{"threads", "many"}};
  assert_int_equal(kh_load(&p, g_so_path, bad, 1, 1, err, sizeof err), ONYX_STATUS_INVALID_CONFIG);
  assert_non_null(strstr(err, "threads"));
}

/* ------------------------------------------------------------------ Add Sub Mul Div */

typedef struct bcast_case {
  uint32_t ra;
  int64_t a[4];
  uint32_t rb;
  int64_t b[4];
  uint32_t ry;
  int64_t y[4];
} bcast_case;

static void test_binary_broadcast_f32(void **st) {
  (void)st;
  static const bcast_case cases[] = {
      {3, {2, 3, 4}, 3, {2, 3, 4}, 3, {2, 3, 4}},
      {3, {2, 3, 4}, 1, {4}, 3, {2, 3, 4}},
      {3, {2, 1, 4}, 2, {3, 1}, 3, {2, 3, 4}},
      {0, {0}, 2, {2, 3}, 2, {2, 3}}, /* scalar + matrix */
      {2, {2, 3}, 0, {0}, 2, {2, 3}},
      {4, {1, 3, 1, 5}, 4, {2, 1, 4, 1}, 4, {2, 3, 4, 5}},
      {2, {5, 1}, 1, {1}, 2, {5, 1}},
      {2, {0, 3}, 1, {3}, 2, {0, 3}}, /* zero-size */
      {2, {3, 0}, 2, {1, 1}, 2, {3, 0}},
      {1, {1}, 0, {0}, 1, {1}},
  };
  const char *ops[] = {"Add", "Sub", "Mul", "Div"};
  const char sym[] = {'+', '-', '*', '/'};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
    for (int o = 0; o < 4; ++o) {
      rng_seed(c * 8 + (size_t)o);
      const bcast_case *k = &cases[c];
      int64_t na = numel(k->ra, k->a), nb = numel(k->rb, k->b), ny = numel(k->ry, k->y);
      float *a = rand_floats(na, -2, 2), *b = rand_floats(nb, 0.5f, 3);
      onyx_tensor ta = kh_tensor(ONYX_DTYPE_FLOAT32, k->ra, k->a, a);
      onyx_tensor tb = kh_tensor(ONYX_DTYPE_FLOAT32, k->rb, k->b, b);
      const onyx_tensor *in[] = {&ta, &tb};
      kh_node node = {.op = ops[o], .opset = 14};
      kh_result r;
      run(&node, in, 2, &r);
      expect_ok(&r);
      expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, k->ry, k->y);
      double *want = malloc((size_t)(ny ? ny : 1) * sizeof *want);
      for (int64_t i = 0; i < ny; ++i)
        want[i] = (float)ref_op(sym[o], a[bcast_offset(i, k->ry, k->y, k->ra, k->a)],
                                b[bcast_offset(i, k->ry, k->y, k->rb, k->b)]);
      expect_close(r.out[0].data, want, ny, 1e-6, 0);
      free(want);
      free(a);
      free(b);
      kh_result_free(&r);
    }
  }
}

static void test_binary_shape_mismatch(void **st) {
  (void)st;
  float a[6] = {1, 2, 3, 4, 5, 6}, b[4] = {1, 2, 3, 4};
  int64_t da[] = {2, 3}, db[] = {4};
  onyx_tensor ta = kh_tensor(ONYX_DTYPE_FLOAT32, 2, da, a);
  onyx_tensor tb = kh_tensor(ONYX_DTYPE_FLOAT32, 1, db, b);
  const onyx_tensor *in[] = {&ta, &tb};
  kh_node node = {.op = "Add", .opset = 14};
  kh_result r;
  run(&node, in, 2, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "input 1: dim 0 is 4, expected 1 or 3");
  assert_non_null(strstr(r.error, "[2,3]"));
  kh_result_free(&r);

  /* Mixed dtypes are an error too. */
  int64_t bi[4] = {1, 2, 3, 4};
  onyx_tensor tbi = kh_tensor(ONYX_DTYPE_INT64, 1, db, bi);
  const onyx_tensor *in2[] = {&ta, &tbi};
  run(&node, in2, 2, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "input 1 has dtype int64, expected float32");
  kh_result_free(&r);

  /* A missing input names its index. */
  const onyx_tensor *in3[] = {&ta, NULL};
  run(&node, in3, 2, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "input 1 is required");
  kh_result_free(&r);
}

static void test_binary_int(void **st) {
  (void)st;
  int32_t a[] = {-7, 7, -7, 7, INT32_MIN, 5, INT32_MAX};
  int32_t b[] = {2, 2, -2, -2, -1, 7, 2};
  int64_t d[] = {7};
  onyx_tensor ta = kh_tensor(ONYX_DTYPE_INT32, 1, d, a), tb = kh_tensor(ONYX_DTYPE_INT32, 1, d, b);
  const onyx_tensor *in[] = {&ta, &tb};
  kh_result r;
  kh_node div = {.op = "Div", .opset = 14};
  run(&div, in, 2, &r);
  expect_ok(&r);
  /* Truncation toward zero; INT_MIN / -1 wraps instead of trapping. */
  int32_t want_div[] = {-3, 3, 3, -3, INT32_MIN, 0, INT32_MAX / 2};
  assert_memory_equal(r.out[0].data, want_div, sizeof want_div);
  kh_result_free(&r);

  kh_node add = {.op = "Add", .opset = 14};
  run(&add, in, 2, &r);
  expect_ok(&r);
  int32_t want_add[] = {-5, 9, -9, 5, INT32_MAX, 12, (int32_t)((uint32_t)INT32_MAX + 2u)};
  assert_memory_equal(r.out[0].data, want_add, sizeof want_add);
  kh_result_free(&r);

  /* Division by zero is reported, and nothing is allocated. */
  int32_t z[] = {1, 2, 0, 4, 5, 6, 7};
  onyx_tensor tz = kh_tensor(ONYX_DTYPE_INT32, 1, d, z);
  const onyx_tensor *inz[] = {&ta, &tz};
  run(&div, inz, 2, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "division by zero");
  kh_result_free(&r);

  /* Smaller and unsigned types (the ONNX tests use them). */
  uint8_t ua[] = {200, 3, 255}, ub[] = {100, 4, 2};
  int64_t d3[] = {3};
  onyx_tensor tua = kh_tensor(ONYX_DTYPE_UINT8, 1, d3, ua),
              tub = kh_tensor(ONYX_DTYPE_UINT8, 1, d3, ub);
  const onyx_tensor *inu[] = {&tua, &tub};
  kh_node mul = {.op = "Mul", .opset = 14};
  run(&mul, inu, 2, &r);
  expect_ok(&r);
  uint8_t want_mul[] = {(uint8_t)(200 * 100), 12, (uint8_t)(255 * 2)};
  assert_memory_equal(r.out[0].data, want_mul, 3);
  kh_result_free(&r);

  int64_t la[] = {INT64_MAX, -9}, lb[] = {1, 4};
  int64_t d2[] = {2};
  onyx_tensor tla = kh_tensor(ONYX_DTYPE_INT64, 1, d2, la),
              tlb = kh_tensor(ONYX_DTYPE_INT64, 1, d2, lb);
  const onyx_tensor *inl[] = {&tla, &tlb};
  kh_node sub = {.op = "Sub", .opset = 14};
  run(&sub, inl, 2, &r);
  expect_ok(&r);
  int64_t want_sub[] = {INT64_MAX - 1, -13};
  expect_i64(r.out[0].data, want_sub, 2);
  kh_result_free(&r);
}

static void test_binary_half(void **st) {
  (void)st;
  /* float16: 1 + 2^-11 is a tie that rounds to even (1.0); 1 + 3·2^-11 rounds up. */
  uint16_t a[] = {0x3C00, 0x3C00, 0x7BFF, 0x3555}; /* 1, 1, 65504, ~0.333 */
  uint16_t b[] = {0x1000, 0x1600, 0x7BFF, 0x3C00}; /* 2^-11, 3·2^-11, 65504, 1 */
  int64_t d[] = {4};
  onyx_tensor ta = kh_tensor(ONYX_DTYPE_FLOAT16, 1, d, a),
              tb = kh_tensor(ONYX_DTYPE_FLOAT16, 1, d, b);
  const onyx_tensor *in[] = {&ta, &tb};
  kh_node add = {.op = "Add", .opset = 14};
  kh_result r;
  run(&add, in, 2, &r);
  expect_ok(&r);
  uint16_t want[] = {0x3C00, 0x3C02, 0x7C00, 0x3D55};
  expect_u16(r.out[0].data, want, 4);
  kh_result_free(&r);

  /* bfloat16: 1.5 * 3 = 4.5 exactly; 1/3 rounds to nearest. */
  uint16_t ba[] = {0x3FC0, 0x3F80}, bb[] = {0x4040, 0x4040};
  int64_t d2[] = {2};
  onyx_tensor tba = kh_tensor(ONYX_DTYPE_BFLOAT16, 1, d2, ba),
              tbb = kh_tensor(ONYX_DTYPE_BFLOAT16, 1, d2, bb);
  const onyx_tensor *inb[] = {&tba, &tbb};
  kh_node mul = {.op = "Mul", .opset = 14}, div = {.op = "Div", .opset = 14};
  run(&mul, inb, 2, &r);
  expect_ok(&r);
  assert_int_equal(((uint16_t *)r.out[0].data)[0], 0x4090);
  kh_result_free(&r);
  run(&div, inb, 2, &r);
  expect_ok(&r);
  assert_int_equal(((uint16_t *)r.out[0].data)[1], 0x3EAB); /* 0.333984375 */
  kh_result_free(&r);
}

static void test_binary_legacy_broadcast(void **st) {
  (void)st;
  rng_seed(11);
  int64_t da[] = {2, 3, 4, 5}, db[] = {3, 4};
  float *a = rand_floats(120, -1, 1), *b = rand_floats(12, -1, 1);
  onyx_tensor ta = kh_tensor(ONYX_DTYPE_FLOAT32, 4, da, a),
              tb = kh_tensor(ONYX_DTYPE_FLOAT32, 2, db, b);
  const onyx_tensor *in[] = {&ta, &tb};
  onyx_attr attrs[] = {kh_attr_int("broadcast", 1), kh_attr_int("axis", 1)};
  kh_node node = {.op = "Add", .opset = 6, .attrs = attrs, .attr_count = 2};
  kh_result r;
  run(&node, in, 2, &r);
  expect_ok(&r);
  expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, 4, da);
  double want[120];
  for (int i = 0; i < 120; ++i) want[i] = (float)(a[i] + b[(i / 5) % 12]);
  expect_close(r.out[0].data, want, 120, 0, 0);
  kh_result_free(&r);

  /* Without broadcast = 1, shapes must match exactly. */
  kh_node strict = {.op = "Add", .opset = 6};
  run(&strict, in, 2, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "broadcast = 0");
  kh_result_free(&r);
  free(a);
  free(b);
}

/* ------------------------------------------------------------------ Relu Sigmoid */

static void test_unary(void **st) {
  (void)st;
  float x[] = {-3.0f, -0.5f, 0.0f, 0.25f, 4.0f, -100.0f, 100.0f, NAN};
  int64_t d[] = {8};
  onyx_tensor tx = kh_tensor(ONYX_DTYPE_FLOAT32, 1, d, x);
  const onyx_tensor *in[] = {&tx};
  kh_result r;
  kh_node relu = {.op = "Relu", .opset = 14};
  run(&relu, in, 1, &r);
  expect_ok(&r);
  double want_relu[] = {0, 0, 0, 0.25, 4, 0, 100, NAN};
  expect_close(r.out[0].data, want_relu, 8, 0, 0);
  kh_result_free(&r);

  kh_node sig = {.op = "Sigmoid", .opset = 13};
  run(&sig, in, 1, &r);
  expect_ok(&r);
  double want_sig[8];
  for (int i = 0; i < 8; ++i) want_sig[i] = 1.0 / (1.0 + exp(-(double)x[i]));
  expect_close(r.out[0].data, want_sig, 8, 1e-6, 1e-30);
  kh_result_free(&r);

  int64_t xi[] = {-5, 0, 7};
  int64_t d3[] = {3};
  onyx_tensor ti = kh_tensor(ONYX_DTYPE_INT64, 1, d3, xi);
  const onyx_tensor *ini[] = {&ti};
  run(&relu, ini, 1, &r);
  expect_ok(&r);
  int64_t want_i[] = {0, 0, 7};
  expect_i64(r.out[0].data, want_i, 3);
  kh_result_free(&r);

  /* Sigmoid has no integer kernel. */
  assert_null(kh_find(&g_cpu, "", "Sigmoid", 13, ONYX_DTYPE_INT64));
}

/* The vectorised float32 Sigmoid against double precision, in every instruction-set
 * build this machine runs: fresh random values over the whole float range that
 * matters (and beyond it, where it saturates), lengths that leave every tail size,
 * the specials at both ends of a vector. */
static void test_sigmoid_builds(void **st) {
  (void)st;
  static const char *const isas[] = {NULL, "avx2", "generic"};
  enum { N = 1000 + 15 };
  float *x = malloc(N * sizeof *x);
  double *want = malloc(N * sizeof *want);
  assert_non_null(x);
  assert_non_null(want);
  uint64_t seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)x;
  for (int i = 0; i < N; ++i) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    double u = (double)(seed >> 11) / 9007199254740992.0; /* [0, 1) */
    x[i] = (float)(i % 3 == 0 ? 200.0 * u - 100.0 : 24.0 * u - 12.0);
  }
  const float specials[] = {0.0f, -0.0f, 88.0f, -88.0f, 89.0f, -104.0f, INFINITY, -INFINITY, NAN};
  for (int i = 0; i < 9; ++i) x[i * 101 % N] = specials[i];
  for (int i = 0; i < N; ++i) want[i] = 1.0 / (1.0 + exp(-(double)x[i]));
  kh_node sig = {.op = "Sigmoid", .opset = 13};
  for (size_t b = 0; b < sizeof isas / sizeof isas[0]; ++b) {
    if (isas[b]) setenv("ONYX_CPU_GEMM_ISA", isas[b], 1);
    for (int64_t n = N - 16; n <= N; ++n) {
      onyx_tensor tx = kh_tensor(ONYX_DTYPE_FLOAT32, 1, &n, x);
      const onyx_tensor *in[] = {&tx};
      kh_result r;
      run(&sig, in, 1, &r);
      expect_ok(&r);
      expect_close(r.out[0].data, want, n, 4e-7, 1e-38);
      kh_result_free(&r);
    }
    unsetenv("ONYX_CPU_GEMM_ISA");
  }
  free(x);
  free(want);
}

/* ------------------------------------------------------------------ Softmax */

/* Reference softmax over `len` elements `inner` apart, slices at outer × inner. */
static void ref_softmax(const float *x, double *y, int64_t outer, int64_t len, int64_t inner) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      const int64_t base = o * len * inner + in;
      double mx = -INFINITY, sum = 0;
      for (int64_t i = 0; i < len; ++i) mx = fmax(mx, x[base + i * inner]);
      for (int64_t i = 0; i < len; ++i) sum += exp(x[base + i * inner] - mx);
      for (int64_t i = 0; i < len; ++i) y[base + i * inner] = exp(x[base + i * inner] - mx) / sum;
    }
}

static void test_softmax_axes(void **st) {
  (void)st;
  rng_seed(21);
  int64_t d[] = {3, 4, 5};
  float *x = rand_floats(60, -4, 4);
  x[7] = 1000.0f; /* large values must not overflow */
  x[8] = 999.0f;
  onyx_tensor tx = kh_tensor(ONYX_DTYPE_FLOAT32, 3, d, x);
  const onyx_tensor *in[] = {&tx};
  double want[60];
  struct {
    int64_t opset, axis;
    bool has_axis;
    int64_t outer, len, inner;
  } cases[] = {
      {13, 0, true, 1, 3, 20},
      {13, 1, true, 3, 4, 5},
      {13, 2, true, 12, 5, 1},
      {13, -1, true, 12, 5, 1},
      {13, 0, false, 12, 5, 1},
      {13, -3, true, 1, 3, 20},
      /* Before 13: coerced to 2-D at axis (default 1). */
      {11, 0, false, 3, 20, 1},
      {11, 0, true, 1, 60, 1},
      {1, 2, true, 12, 5, 1},
      {11, -2, true, 3, 20, 1},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
    onyx_attr axis = kh_attr_int("axis", cases[c].axis);
    kh_node node = {.op = "Softmax",
                    .opset = cases[c].opset,
                    .attrs = &axis,
                    .attr_count = cases[c].has_axis ? 1 : 0};
    kh_result r;
    run(&node, in, 1, &r);
    expect_ok(&r);
    expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, 3, d);
    ref_softmax(x, want, cases[c].outer, cases[c].len, cases[c].inner);
    expect_close(r.out[0].data, want, 60, 1e-5, 1e-7);
    kh_result_free(&r);
  }

  onyx_attr bad = kh_attr_int("axis", 3);
  kh_node node = {.op = "Softmax", .opset = 13, .attrs = &bad, .attr_count = 1};
  kh_result r;
  run(&node, in, 1, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "axis 3 is out of range");
  kh_result_free(&r);
  free(x);
}

static void test_softmax_half(void **st) {
  (void)st;
  /* float16 [1, 2, 3]: numpy's float32 softmax rounded to float16. */
  uint16_t x[] = {0x3C00, 0x4000, 0x4200};
  int64_t d[] = {1, 3};
  onyx_tensor tx = kh_tensor(ONYX_DTYPE_FLOAT16, 2, d, x);
  const onyx_tensor *in[] = {&tx};
  kh_node node = {.op = "Softmax", .opset = 13};
  kh_result r;
  run(&node, in, 1, &r);
  expect_ok(&r);
  uint16_t want[] = {0x2DC3, 0x33D5, 0x3952};
  expect_u16(r.out[0].data, want, 3);
  kh_result_free(&r);
}

/* ------------------------------------------------------------------ MatMul */

/* Reference: out[b] = A[ba] · B[bb] with numpy broadcasting of batch dims. */
static void ref_matmul(const float *a, uint32_t ra, const int64_t *da, const float *b, uint32_t rb,
                       const int64_t *db, double *y, uint32_t ry, const int64_t *dy) {
  int64_t m = ra >= 2 ? da[ra - 2] : 1, k = da[ra - 1];
  int64_t n = rb >= 2 ? db[rb - 1] : 1;
  uint32_t bra = ra > 2 ? ra - 2 : 0, brb = rb > 2 ? rb - 2 : 0;
  uint32_t bry = bra > brb ? bra : brb;
  int64_t batches = numel(bry, dy);
  for (int64_t bi = 0; bi < batches; ++bi) {
    int64_t oa = bcast_offset(bi, bry, dy, bra, da), ob = bcast_offset(bi, bry, dy, brb, db);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p)
          s += (double)a[(oa * m + i) * k + p] * b[(ob * k + p) * n + j];
        y[(bi * m + i) * n + j] = s;
      }
  }
  (void)ry;
}

typedef struct mm_case {
  uint32_t ra;
  int64_t a[4];
  uint32_t rb;
  int64_t b[4];
  uint32_t ry;
  int64_t y[4];
} mm_case;

static void check_matmul_cases(kh_provider *p, const mm_case *cases, size_t count) {
  for (size_t c = 0; c < count; ++c) {
    rng_seed(100 + c);
    const mm_case *k = &cases[c];
    int64_t na = numel(k->ra, k->a), nb = numel(k->rb, k->b), ny = numel(k->ry, k->y);
    float *a = rand_floats(na, -1, 1), *b = rand_floats(nb, -1, 1);
    onyx_tensor ta = kh_tensor(ONYX_DTYPE_FLOAT32, k->ra, k->a, a);
    onyx_tensor tb = kh_tensor(ONYX_DTYPE_FLOAT32, k->rb, k->b, b);
    const onyx_tensor *in[] = {&ta, &tb};
    kh_node node = {.op = "MatMul", .opset = 13};
    kh_result r;
    kh_run(p, &node, in, 2, &r);
    expect_ok(&r);
    expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, k->ry, k->y);
    double *want = calloc((size_t)(ny ? ny : 1), sizeof *want);
    ref_matmul(a, k->ra, k->a, b, k->rb, k->b, want, k->ry, k->y);
    expect_close(r.out[0].data, want, ny, 1e-5, 1e-5);
    free(want);
    free(a);
    free(b);
    kh_result_free(&r);
  }
}

static void test_matmul_shapes(void **st) {
  (void)st;
  static const mm_case cases[] = {
      {2, {3, 4}, 2, {4, 5}, 2, {3, 5}},
      {3, {2, 3, 4}, 2, {4, 5}, 3, {2, 3, 5}},          /* folded into one GEMM */
      {4, {2, 1, 3, 4}, 3, {3, 4, 5}, 4, {2, 3, 3, 5}}, /* batch broadcast */
      {2, {3, 4}, 3, {2, 4, 5}, 3, {2, 3, 5}},
      {1, {4}, 3, {2, 4, 5}, 2, {2, 5}}, /* 1-D first operand */
      {3, {2, 3, 4}, 1, {4}, 2, {2, 3}}, /* 1-D second operand */
      {4, {1, 2, 3, 4}, 1, {4}, 3, {1, 2, 3}},
      {1, {4}, 1, {4}, 0, {0}}, /* dot product → scalar */
      {1, {4}, 2, {4, 3}, 1, {3}},
      {2, {67, 300}, 2, {300, 129}, 2, {67, 129}}, /* crosses MC, KC, NR edges */
      {2, {1, 70}, 2, {70, 1100}, 2, {1, 1100}},   /* crosses NC */
      {3, {3, 0, 4}, 2, {4, 5}, 3, {3, 0, 5}},     /* zero rows */
      {2, {3, 0}, 2, {0, 5}, 2, {3, 5}},           /* K = 0: zeros */
  };
  check_matmul_cases(&g_cpu, cases, sizeof cases / sizeof cases[0]);
}

static void test_matmul_parallel(void **st) {
  (void)st;
  static const mm_case cases[] = {
      {2, {300, 200}, 2, {200, 100}, 2, {300, 100}},
      {3, {5, 70, 33}, 2, {33, 40}, 3, {5, 70, 40}},
      {3, {3, 130, 20}, 3, {3, 20, 30}, 3, {3, 130, 30}},
      /* Fewer row blocks than threads: each task takes a column range (a prompt). */
      {2, {32, 300}, 2, {300, 1100}, 2, {32, 1100}},
      {2, {200, 33}, 2, {33, 40}, 2, {200, 40}}, /* several row blocks per column range */
      /* Fewer than six rows: B streamed four rows at a time, K not a multiple of four,
       * short row segments (prefetched) and long ones. */
      {2, {1, 70}, 2, {70, 1100}, 2, {1, 1100}},
      {2, {5, 71}, 2, {71, 3000}, 2, {5, 3000}},
      {2, {3, 2}, 2, {2, 9000}, 2, {3, 9000}},
      /* Larger ones split K over the threads and merge partial sums (serially for a
       * short Y, in parallel for a long one). */
      {2, {5, 333}, 2, {333, 700}, 2, {5, 700}},
      {2, {2, 300}, 2, {300, 20000}, 2, {2, 20000}},
  };
  check_matmul_cases(&g_cpu_mt, cases, sizeof cases / sizeof cases[0]);
}

static void test_matmul_types(void **st) {
  (void)st;
  int64_t da[] = {2, 3}, db[] = {3, 2}, dy[] = {2, 2};
  kh_node node = {.op = "MatMul", .opset = 13};
  kh_result r;

  double a64[] = {1, 2, 3, 4, 5, 6}, b64[] = {0.5, -1, 2, 0.25, -3, 1};
  onyx_tensor ta = kh_tensor(ONYX_DTYPE_FLOAT64, 2, da, a64),
              tb = kh_tensor(ONYX_DTYPE_FLOAT64, 2, db, b64);
  const onyx_tensor *in[] = {&ta, &tb};
  run(&node, in, 2, &r);
  expect_ok(&r);
  double want64[] = {-4.5, 2.5, -6, 3.25};
  expect_close_f64(r.out[0].data, want64, 4, 0);
  kh_result_free(&r);

  int32_t a32[] = {1, -2, 3, 4, 5, -6}, b32[] = {7, 8, 9, 10, 11, 12};
  onyx_tensor ti = kh_tensor(ONYX_DTYPE_INT32, 2, da, a32),
              tj = kh_tensor(ONYX_DTYPE_INT32, 2, db, b32);
  const onyx_tensor *ini[] = {&ti, &tj};
  run(&node, ini, 2, &r);
  expect_ok(&r);
  int32_t want32[] = {22, 24, 7, 10};
  assert_memory_equal(r.out[0].data, want32, sizeof want32);
  expect_shape(&r.out[0], ONYX_DTYPE_INT32, 2, dy);
  kh_result_free(&r);

  /* float16: accumulated in float32, rounded once. */
  uint16_t ah[] = {0x3C00, 0x4000, 0x4200, 0x4400, 0x4500, 0x4600}; /* 1..6 */
  uint16_t bh[] = {0x3800, 0xBC00, 0x4000, 0x3400, 0xC200, 0x3C00}; /* .5 -1 2 .25 -3 1 */
  onyx_tensor th = kh_tensor(ONYX_DTYPE_FLOAT16, 2, da, ah),
              tk = kh_tensor(ONYX_DTYPE_FLOAT16, 2, db, bh);
  const onyx_tensor *inh[] = {&th, &tk};
  run(&node, inh, 2, &r);
  expect_ok(&r);
  uint16_t wanth[] = {0xC480, 0x4100, 0xC600, 0x4280}; /* -4.5 2.5 -6 3.25 */
  expect_u16(r.out[0].data, wanth, 4);
  assert_true(r.workspace_bytes > 0); /* pack buffers and the float32 accumulator */
  kh_result_free(&r);

  uint16_t abf[] = {0x3F80, 0x4000, 0x4040, 0x4080, 0x40A0, 0x40C0};
  uint16_t bbf[] = {0x3F00, 0xBF80, 0x4000, 0x3E80, 0xC040, 0x3F80};
  onyx_tensor tbf = kh_tensor(ONYX_DTYPE_BFLOAT16, 2, da, abf),
              tcf = kh_tensor(ONYX_DTYPE_BFLOAT16, 2, db, bbf);
  const onyx_tensor *inbf[] = {&tbf, &tcf};
  run(&node, inbf, 2, &r);
  expect_ok(&r);
  uint16_t wantbf[] = {0xC090, 0x4020, 0xC0C0, 0x4050};
  expect_u16(r.out[0].data, wantbf, 4);
  kh_result_free(&r);
}

static void test_matmul_errors(void **st) {
  (void)st;
  float a[12] = {0}, b[12] = {0};
  int64_t da[] = {3, 4}, db[] = {3, 4};
  onyx_tensor ta = kh_tensor(ONYX_DTYPE_FLOAT32, 2, da, a),
              tb = kh_tensor(ONYX_DTYPE_FLOAT32, 2, db, b);
  const onyx_tensor *in[] = {&ta, &tb};
  kh_node node = {.op = "MatMul", .opset = 13};
  kh_result r;
  run(&node, in, 2, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "input 1 dim 0 is 3, expected 4");
  kh_result_free(&r);

  int64_t d3a[] = {2, 3, 4}, d3b[] = {3, 4, 5};
  float big[60] = {0};
  onyx_tensor t3a = kh_tensor(ONYX_DTYPE_FLOAT32, 3, d3a, big),
              t3b = kh_tensor(ONYX_DTYPE_FLOAT32, 3, d3b, big);
  const onyx_tensor *in3[] = {&t3a, &t3b};
  run(&node, in3, 2, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "expected 1 or 2");
  kh_result_free(&r);

  /* A workspace view shorter than declared is refused before anything happens.
   * (Enough rows for the packed route; fewer than six rows need no workspace.) */
  int64_t dm[] = {8, 4}, dk[] = {4, 3};
  float a8[32] = {0};
  onyx_tensor tm = kh_tensor(ONYX_DTYPE_FLOAT32, 2, dm, a8);
  onyx_tensor tk = kh_tensor(ONYX_DTYPE_FLOAT32, 2, dk, b);
  const onyx_tensor *ink[] = {&tm, &tk};
  kh_node shortws = {.op = "MatMul", .opset = 13, .workspace_shortfall = 4};
  run(&shortws, ink, 2, &r);
  expect_fail(&r, ONYX_STATUS_WORKSPACE_TOO_SMALL, "required");
  kh_result_free(&r);
}

/* ------------------------------------------------------------------ Gemm */

/* Gemm against a double-precision reference for every transpose, alpha/beta and C
 * shape, for one M×N×K, serially and on four threads. */
static void check_gemm(int64_t M, int64_t N, int64_t K) {
  struct {
    int ta, tb;
    float alpha, beta;
    uint32_t rc;
    int64_t c[2];
    bool has_c;
  } cases[] = {
      {0, 0, 1.0f, 1.0f, 0, {0, 0}, false}, {1, 0, 0.5f, 2.0f, 2, {M, N}, true},
      {0, 1, 1.5f, -1.0f, 1, {N, 0}, true}, {1, 1, 1.0f, 0.5f, 2, {M, 1}, true},
      {0, 0, 2.0f, 1.0f, 2, {1, N}, true},  {1, 1, -1.0f, 3.0f, 0, {0, 0}, true},
      {0, 1, 1.0f, 0.0f, 2, {M, N}, true},  {0, 0, 1.0f, 1.0f, 1, {1, 0}, true},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
    for (int mt = 0; mt < 2; ++mt) {
      rng_seed(200 + c);
      float *a = rand_floats(M * K, -1, 1), *b = rand_floats(K * N, -1, 1);
      int64_t nc = cases[c].has_c ? numel(cases[c].rc, cases[c].c) : 0;
      float *cv = rand_floats(nc, -1, 1);
      int64_t da[2] = {cases[c].ta ? K : M, cases[c].ta ? M : K};
      int64_t db[2] = {cases[c].tb ? N : K, cases[c].tb ? K : N};
      onyx_tensor ta = kh_tensor(ONYX_DTYPE_FLOAT32, 2, da, a),
                  tb = kh_tensor(ONYX_DTYPE_FLOAT32, 2, db, b);
      onyx_tensor tc = kh_tensor(ONYX_DTYPE_FLOAT32, cases[c].rc, cases[c].c, cv);
      const onyx_tensor *in[] = {&ta, &tb, cases[c].has_c ? &tc : NULL};
      onyx_attr attrs[] = {kh_attr_int("transA", cases[c].ta), kh_attr_int("transB", cases[c].tb),
                           kh_attr_float("alpha", cases[c].alpha),
                           kh_attr_float("beta", cases[c].beta)};
      kh_node node = {.op = "Gemm", .opset = 13, .attrs = attrs, .attr_count = 4};
      kh_result r;
      kh_run(mt ? &g_cpu_mt : &g_cpu, &node, in, 3, &r);
      expect_ok(&r);
      int64_t dy[] = {M, N};
      expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, 2, dy);
      double *want = malloc((size_t)(M * N) * sizeof *want);
      int64_t cm = cases[c].rc == 2 ? cases[c].c[0] : 1;
      int64_t cn = cases[c].rc >= 1 ? cases[c].c[cases[c].rc - 1] : 1;
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          double s = 0;
          for (int64_t p = 0; p < K; ++p)
            s += (double)(cases[c].ta ? a[p * M + i] : a[i * K + p]) *
                 (cases[c].tb ? b[j * K + p] : b[p * N + j]);
          double cval = cases[c].has_c ? cv[(cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j)] : 0;
          want[i * N + j] = cases[c].alpha * s + cases[c].beta * cval;
        }
      expect_close(r.out[0].data, want, M * N, 1e-4, 1e-4);
      free(want);
      free(a);
      free(b);
      free(cv);
      kh_result_free(&r);
    }
  }
}

static void test_gemm(void **st) {
  (void)st;
  check_gemm(70, 1030, 300); /* packed route: crosses the MC, NC and KC block edges */
  check_gemm(1, 1030, 300);  /* unpacked route for few rows (matrix-vector) */
  check_gemm(5, 37, 19);
  check_gemm(32, 700, 530); /* column ranges on four threads, several K slices */
  check_gemm(4, 300, 70);   /* unpacked, K not a multiple of four */
}

static void test_gemm_types_and_errors(void **st) {
  (void)st;
  int64_t da[] = {2, 2}, dc[] = {2};
  double a[] = {1, 2, 3, 4}, b[] = {5, 6, 7, 8}, c[] = {10, 20};
  onyx_tensor ta = kh_tensor(ONYX_DTYPE_FLOAT64, 2, da, a),
              tb = kh_tensor(ONYX_DTYPE_FLOAT64, 2, da, b);
  onyx_tensor tc = kh_tensor(ONYX_DTYPE_FLOAT64, 1, dc, c);
  const onyx_tensor *in[] = {&ta, &tb, &tc};
  onyx_attr attrs[] = {kh_attr_int("transB", 1), kh_attr_float("alpha", 2.0f)};
  kh_node node = {.op = "Gemm", .opset = 11, .attrs = attrs, .attr_count = 2};
  kh_result r;
  run(&node, in, 3, &r);
  expect_ok(&r);
  /* 2·A·Bᵀ + C = 2·[[17,23],[39,53]] + [10,20] */
  double want[] = {44, 66, 88, 126};
  expect_close_f64(r.out[0].data, want, 4, 0);
  kh_result_free(&r);

  uint16_t ah[] = {0x3C00, 0x4000, 0x4200, 0x4400}, bh[] = {0x4500, 0x4600, 0x4700, 0x4800};
  uint16_t ch[] = {0x4900, 0x4D00};
  onyx_tensor tah = kh_tensor(ONYX_DTYPE_FLOAT16, 2, da, ah),
              tbh = kh_tensor(ONYX_DTYPE_FLOAT16, 2, da, bh);
  onyx_tensor tch = kh_tensor(ONYX_DTYPE_FLOAT16, 1, dc, ch);
  const onyx_tensor *inh[] = {&tah, &tbh, &tch};
  run(&node, inh, 3, &r);
  expect_ok(&r);
  uint16_t wanth[] = {0x5180, 0x5420, 0x5580, 0x57E0}; /* 44 66 88 126 */
  expect_u16(r.out[0].data, wanth, 4);
  kh_result_free(&r);

  /* C must broadcast to [M,N] one way: [3] cannot. */
  int64_t dbad[] = {3};
  double cbad[] = {1, 2, 3};
  onyx_tensor tbad = kh_tensor(ONYX_DTYPE_FLOAT64, 1, dbad, cbad);
  const onyx_tensor *inbad[] = {&ta, &tb, &tbad};
  run(&node, inbad, 3, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "input 2 (C) has shape [3]");
  kh_result_free(&r);

  int64_t d23[] = {2, 3};
  onyx_tensor t23 = kh_tensor(ONYX_DTYPE_FLOAT64, 2, d23, cbad);
  const onyx_tensor *ink[] = {&ta, &t23};
  run(&node, ink, 2, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "input 1 dim 1 is 3, expected 2");
  kh_result_free(&r);

  int64_t d1[] = {4};
  onyx_tensor t1 = kh_tensor(ONYX_DTYPE_FLOAT64, 1, d1, a);
  const onyx_tensor *in1[] = {&t1, &tb};
  run(&node, in1, 2, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "input 0 has shape [4], expected a 2-D matrix");
  kh_result_free(&r);
}

/* ------------------------------------------------------------------ Cast */

static uint16_t run_cast_to_16(uint32_t from, const void *x, uint32_t to) {
  int64_t d[] = {1};
  onyx_tensor t = kh_tensor(from, 1, d, x);
  const onyx_tensor *in[] = {&t};
  onyx_attr a = kh_attr_int("to", to);
  kh_node node = {.op = "Cast", .opset = 19, .attrs = &a, .attr_count = 1};
  kh_result r;
  run(&node, in, 1, &r);
  expect_ok(&r);
  uint16_t v = ((uint16_t *)r.out[0].data)[0];
  kh_result_free(&r);
  return v;
}

static uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static void test_cast_f16_rounding(void **st) {
  (void)st;
  struct {
    float in;
    uint16_t want;
  } cases[] = {
      {1.0f, 0x3C00},
      {-2.0f, 0xC000},
      {65504.0f, 0x7BFF},
      {65519.0f, 0x7BFF}, /* below the halfway point to infinity */
      {65520.0f, 0x7C00}, /* halfway: ties to even = infinity */
      {1e9f, 0x7C00},
      {-INFINITY, 0xFC00},
      {1.0f + 0x1p-11f, 0x3C00},     /* tie → even */
      {1.0f + 3 * 0x1p-11f, 0x3C02}, /* tie → even (up) */
      {1.0f + 0x1p-11f + 0x1p-20f, 0x3C01},
      {0x1p-14f, 0x0400}, /* smallest normal */
      {0x1p-24f, 0x0001}, /* smallest subnormal */
      {0x1p-25f, 0x0000}, /* tie with zero → even */
      {0x1.8p-25f, 0x0001},
      {3 * 0x1p-25f, 0x0002}, /* 1.5 ulp subnormal tie → even (2) */
      {0x1.ff8p-15f, 0x03FF}, /* largest subnormal, exact */
      {0x1.ffcp-15f, 0x0400}, /* tie → even: up into the normals */
      {-0.0f, 0x8000},
      {0.333333343f, 0x3555},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    uint16_t got = run_cast_to_16(ONYX_DTYPE_FLOAT32, &cases[i].in, ONYX_DTYPE_FLOAT16);
    if (got != cases[i].want)
      fail_msg("cast %a to float16: got 0x%04x, want 0x%04x", (double)cases[i].in, got,
               cases[i].want);
  }
  float nan = NAN;
  uint16_t h = run_cast_to_16(ONYX_DTYPE_FLOAT32, &nan, ONYX_DTYPE_FLOAT16);
  assert_true((h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0);

  /* float64 → float16 rounds once: 1 + 2^-11 + 2^-40 is just above the tie, so it
   * rounds up; a detour through float32 would lose 2^-40 and round to 1.0. */
  double d = 1.0 + 0x1p-11 + 0x1p-40;
  assert_int_equal(run_cast_to_16(ONYX_DTYPE_FLOAT64, &d, ONYX_DTYPE_FLOAT16), 0x3C01);
  double d2 = 0.47892547; /* from test_cast_DOUBLE_to_FLOAT16: numpy says 0.479 = 0x37AA */
  assert_int_equal(run_cast_to_16(ONYX_DTYPE_FLOAT64, &d2, ONYX_DTYPE_FLOAT16), 0x37AA);

  /* Every float16 survives a round trip through float32 bit-exactly. */
  static uint16_t all[65536];
  for (uint32_t i = 0; i < 65536; ++i) all[i] = (uint16_t)i;
  int64_t dall[] = {65536};
  onyx_tensor t = kh_tensor(ONYX_DTYPE_FLOAT16, 1, dall, all);
  const onyx_tensor *in[] = {&t};
  onyx_attr to32 = kh_attr_int("to", ONYX_DTYPE_FLOAT32);
  kh_node n1 = {.op = "Cast", .opset = 13, .attrs = &to32, .attr_count = 1};
  kh_result r1, r2;
  run(&n1, in, 1, &r1);
  expect_ok(&r1);
  const float *f = r1.out[0].data;
  assert_true(f[0x3C00] == 1.0f && f[0x0001] == 0x1p-24f && f[0x7BFF] == 65504.0f);
  assert_true(isinf(f[0x7C00]) && isnan(f[0x7E00]) && f[0x8000] == 0.0f && signbit(f[0x8000]));
  onyx_attr to16 = kh_attr_int("to", ONYX_DTYPE_FLOAT16);
  kh_node n2 = {.op = "Cast", .opset = 13, .attrs = &to16, .attr_count = 1};
  const onyx_tensor *in2[] = {&r1.out[0]};
  run(&n2, in2, 1, &r2);
  expect_ok(&r2);
  const uint16_t *back = r2.out[0].data;
  for (uint32_t i = 0; i < 65536; ++i) {
    bool is_nan = (i & 0x7C00) == 0x7C00 && (i & 0x3FF) != 0;
    if (is_nan) {
      assert_true((back[i] & 0x7C00) == 0x7C00 && (back[i] & 0x3FF) != 0);
    } else if (back[i] != i) {
      fail_msg("float16 0x%04x came back as 0x%04x", i, back[i]);
    }
  }
  kh_result_free(&r1);
  kh_result_free(&r2);
}

static void test_cast_bf16_rounding(void **st) {
  (void)st;
  struct {
    uint32_t in;
    uint16_t want;
  } cases[] = {
      {0x3F800000u, 0x3F80},                                  /* 1.0 */
      {0x3F808000u, 0x3F80},                                  /* tie → even (down) */
      {0x3F818000u, 0x3F82},                                  /* tie → even (up) */
      {0x3F808001u, 0x3F81},                                  /* just above the tie */
      {0x7F7FFFFFu, 0x7F80},                                  /* FLT_MAX rounds to infinity */
      {0xFF800000u, 0xFF80},           {0x00000001u, 0x0000}, /* denormal flushes by rounding */
      {f32_bits(0.81910545f), 0x3F52}, /* test_cast_FLOAT_to_BFLOAT16: 0.8203125 */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    float v = bits_f32(cases[i].in);
    uint16_t got = run_cast_to_16(ONYX_DTYPE_FLOAT32, &v, ONYX_DTYPE_BFLOAT16);
    if (got != cases[i].want)
      fail_msg("cast 0x%08x to bfloat16: got 0x%04x, want 0x%04x", cases[i].in, got, cases[i].want);
  }
  float nan = NAN;
  uint16_t h = run_cast_to_16(ONYX_DTYPE_FLOAT32, &nan, ONYX_DTYPE_BFLOAT16);
  assert_true((h & 0x7F80) == 0x7F80 && (h & 0x7F) != 0);

  /* bfloat16 → float16 and back go through an exact intermediate. */
  uint16_t bf = 0x3F52;
  uint16_t f16 = run_cast_to_16(ONYX_DTYPE_BFLOAT16, &bf, ONYX_DTYPE_FLOAT16);
  assert_int_equal(f16, 0x3A90);     /* 0.8203125 is exact in float16 */
  double d = 1.0 + 0x1p-8 + 0x1p-40; /* above the bf16 tie: rounds up once */
  assert_int_equal(run_cast_to_16(ONYX_DTYPE_FLOAT64, &d, ONYX_DTYPE_BFLOAT16), 0x3F81);
}

static void test_cast_ints_and_bool(void **st) {
  (void)st;
  float x[] = {2.9f, -2.9f, NAN, 3e9f, -3e9f, 0.0f, -0.5f, 1.0f};
  int64_t d[] = {8};
  onyx_tensor t = kh_tensor(ONYX_DTYPE_FLOAT32, 1, d, x);
  const onyx_tensor *in[] = {&t};
  kh_result r;
  onyx_attr to_i32 = kh_attr_int("to", ONYX_DTYPE_INT32);
  kh_node n = {.op = "Cast", .opset = 13, .attrs = &to_i32, .attr_count = 1};
  run(&n, in, 1, &r);
  expect_ok(&r);
  int32_t want_i32[] = {2, -2, 0, INT32_MAX, INT32_MIN, 0, 0, 1};
  assert_memory_equal(r.out[0].data, want_i32, sizeof want_i32);
  kh_result_free(&r);

  onyx_attr to_bool = kh_attr_int("to", ONYX_DTYPE_BOOL);
  kh_node nb = {.op = "Cast", .opset = 13, .attrs = &to_bool, .attr_count = 1};
  run(&nb, in, 1, &r);
  expect_ok(&r);
  uint8_t want_b[] = {1, 1, 1, 1, 1, 0, 1, 1};
  assert_memory_equal(r.out[0].data, want_b, 8);
  /* ... and back to float: 0 or 1. */
  const onyx_tensor *inb[] = {&r.out[0]};
  onyx_attr to_f = kh_attr_int("to", ONYX_DTYPE_FLOAT32);
  kh_node nf = {.op = "Cast", .opset = 13, .attrs = &to_f, .attr_count = 1};
  kh_result r2;
  run(&nf, inb, 1, &r2);
  expect_ok(&r2);
  double want_f[] = {1, 1, 1, 1, 1, 0, 1, 1};
  expect_close(r2.out[0].data, want_f, 8, 0, 0);
  kh_result_free(&r2);
  kh_result_free(&r);

  /* Integer narrowing wraps; int64 → float32 rounds once. */
  int64_t big[] = {300, -129, (1LL << 40) + 1, 16777217};
  int64_t d4[] = {4};
  onyx_tensor tb = kh_tensor(ONYX_DTYPE_INT64, 1, d4, big);
  const onyx_tensor *in64[] = {&tb};
  onyx_attr to_i8 = kh_attr_int("to", ONYX_DTYPE_INT8);
  kh_node n8 = {.op = "Cast", .opset = 13, .attrs = &to_i8, .attr_count = 1};
  run(&n8, in64, 1, &r);
  expect_ok(&r);
  int8_t want_i8[] = {44, 127, 1, 1};
  assert_memory_equal(r.out[0].data, want_i8, 4);
  kh_result_free(&r);
  run(&nf, in64, 1, &r);
  expect_ok(&r);
  assert_true(((float *)r.out[0].data)[3] == 16777216.0f);
  kh_result_free(&r);

  /* Zero-size tensors cast to zero-size tensors (and NULL data is fine). */
  int64_t dz[] = {0, 3};
  onyx_tensor tz = kh_tensor(ONYX_DTYPE_FLOAT32, 2, dz, NULL);
  const onyx_tensor *inz[] = {&tz};
  run(&n8, inz, 1, &r);
  expect_ok(&r);
  expect_shape(&r.out[0], ONYX_DTYPE_INT8, 2, dz);
  kh_result_free(&r);

  /* Opset 1 names the target type as a string. */
  onyx_attr to_s = kh_attr_string("to", "DOUBLE");
  kh_node n1 = {.op = "Cast", .opset = 1, .attrs = &to_s, .attr_count = 1};
  run(&n1, in, 1, &r);
  expect_ok(&r);
  assert_int_equal(r.out[0].dtype, ONYX_DTYPE_FLOAT64);
  assert_true(((double *)r.out[0].data)[0] == (double)2.9f);
  kh_result_free(&r);

  /* A target outside ABI v1 (float8e4m3fn = 17) is refused at placement. */
  onyx_attr to_f8 = kh_attr_int("to", 17);
  kh_node n17 = {.op = "Cast", .opset = 19, .attrs = &to_f8, .attr_count = 1};
  run(&n17, in, 1, &r);
  expect_fail(&r, ONYX_STATUS_UNSUPPORTED, "not supported");
  kh_result_free(&r);

  /* CastLike takes the type of input 1. */
  uint16_t like = 0;
  int64_t d1[] = {1};
  onyx_tensor tl = kh_tensor(ONYX_DTYPE_FLOAT16, 1, d1, &like);
  const onyx_tensor *incl[] = {&t, &tl};
  kh_node ncl = {.op = "CastLike", .opset = 15};
  run(&ncl, incl, 2, &r);
  expect_ok(&r);
  assert_int_equal(r.out[0].dtype, ONYX_DTYPE_FLOAT16);
  assert_int_equal(((uint16_t *)r.out[0].data)[7], 0x3C00);
  kh_result_free(&r);
}

/* ------------------------------------------------------------------ Gather */

static void test_gather(void **st) {
  (void)st;
  float x[12];
  for (int i = 0; i < 12; ++i) x[i] = (float)i + 0.5f;
  int64_t dx[] = {3, 4};
  onyx_tensor tx = kh_tensor(ONYX_DTYPE_FLOAT32, 2, dx, x);
  kh_result r;

  /* Axis 0 with negative indices and 2-D indices. */
  int64_t idx[] = {-1, 0, 2, -3};
  int64_t di[] = {2, 2};
  onyx_tensor ti = kh_tensor(ONYX_DTYPE_INT64, 2, di, idx);
  const onyx_tensor *in[] = {&tx, &ti};
  kh_node n0 = {.op = "Gather", .opset = 13};
  run(&n0, in, 2, &r);
  expect_ok(&r);
  int64_t dy[] = {2, 2, 4};
  expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, 3, dy);
  double want0[16];
  int rows[] = {2, 0, 2, 0};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) want0[i * 4 + j] = x[rows[i] * 4 + j];
  expect_close(r.out[0].data, want0, 16, 0, 0);
  kh_result_free(&r);

  /* Axis 1 (and -1) with int32 indices. */
  int32_t idx32[] = {3, -4, 1};
  int64_t di1[] = {3};
  onyx_tensor ti32 = kh_tensor(ONYX_DTYPE_INT32, 1, di1, idx32);
  const onyx_tensor *in1[] = {&tx, &ti32};
  for (int ax = 0; ax < 2; ++ax) {
    onyx_attr axis = kh_attr_int("axis", ax ? -1 : 1);
    kh_node n1 = {.op = "Gather", .opset = 13, .attrs = &axis, .attr_count = 1};
    run(&n1, in1, 2, &r);
    expect_ok(&r);
    int64_t dy1[] = {3, 3};
    expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, 2, dy1);
    double want1[9];
    int cols[] = {3, 0, 1};
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) want1[i * 3 + j] = x[i * 4 + cols[j]];
    expect_close(r.out[0].data, want1, 9, 0, 0);
    kh_result_free(&r);
  }

  /* Scalar index drops the axis. */
  int64_t s = -2;
  onyx_tensor ts = kh_tensor(ONYX_DTYPE_INT64, 0, NULL, &s);
  const onyx_tensor *ins[] = {&tx, &ts};
  run(&n0, ins, 2, &r);
  expect_ok(&r);
  int64_t dys[] = {4};
  expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, 1, dys);
  assert_true(((float *)r.out[0].data)[0] == 4.5f);
  kh_result_free(&r);

  /* Out of range: reported before any output exists. */
  int64_t bad[] = {0, 3};
  int64_t db[] = {2};
  onyx_tensor tbad = kh_tensor(ONYX_DTYPE_INT64, 1, db, bad);
  const onyx_tensor *inb[] = {&tx, &tbad};
  run(&n0, inb, 2, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "value 3 at 1 is out of range [-3, 3)");
  kh_result_free(&r);

  /* Any dtype moves as bytes: bool data. */
  uint8_t bx[] = {1, 0, 0, 1};
  int64_t dbx[] = {4};
  onyx_tensor tbx = kh_tensor(ONYX_DTYPE_BOOL, 1, dbx, bx);
  int64_t bi[] = {3, 1};
  onyx_tensor tbi = kh_tensor(ONYX_DTYPE_INT64, 1, db, bi);
  const onyx_tensor *inbx[] = {&tbx, &tbi};
  run(&n0, inbx, 2, &r);
  expect_ok(&r);
  uint8_t wantb[] = {1, 0};
  assert_memory_equal(r.out[0].data, wantb, 2);
  kh_result_free(&r);
}

/* ------------------------------------------------------------------ shape ops */

static void test_reshape(void **st) {
  (void)st;
  float x[24];
  for (int i = 0; i < 24; ++i) x[i] = (float)i;
  int64_t dx[] = {2, 3, 4};
  onyx_tensor tx = kh_tensor(ONYX_DTYPE_FLOAT32, 3, dx, x);
  struct {
    int64_t opset;
    int allowzero;
    size_t n;
    int64_t shape[4];
    uint32_t ry;
    int64_t y[4];
  } cases[] = {
      {13, 0, 2, {4, -1}, 2, {4, 6}},      {13, 0, 3, {0, -1, 2}, 3, {2, 6, 2}},
      {14, 0, 1, {-1}, 1, {24}},           {14, 0, 4, {2, 0, 2, 2}, 4, {2, 3, 2, 2}},
      {14, 0, 3, {0, 0, 4}, 3, {2, 3, 4}},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
    int64_t ds[] = {(int64_t)cases[c].n};
    onyx_tensor ts = kh_tensor(ONYX_DTYPE_INT64, 1, ds, cases[c].shape);
    const onyx_tensor *in[] = {&tx, &ts};
    onyx_attr az = kh_attr_int("allowzero", cases[c].allowzero);
    kh_node n = {.op = "Reshape", .opset = cases[c].opset, .attrs = &az, .attr_count = 1};
    kh_result r;
    run(&n, in, 2, &r);
    expect_ok(&r);
    expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, cases[c].ry, cases[c].y);
    assert_memory_equal(r.out[0].data, x, sizeof x);
    kh_result_free(&r);
  }

  /* allowzero = 1 keeps a literal 0: a zero-size input can take shape [0, 24]... */
  int64_t dz[] = {0, 24};
  onyx_tensor tz = kh_tensor(ONYX_DTYPE_FLOAT32, 2, dz, NULL);
  int64_t sz[] = {24, 0};
  int64_t ds2[] = {2};
  onyx_tensor tsz = kh_tensor(ONYX_DTYPE_INT64, 1, ds2, sz);
  const onyx_tensor *inz[] = {&tz, &tsz};
  onyx_attr az1 = kh_attr_int("allowzero", 1);
  kh_node nz = {.op = "Reshape", .opset = 14, .attrs = &az1, .attr_count = 1};
  kh_result r;
  run(&nz, inz, 2, &r);
  expect_ok(&r);
  int64_t want_z[] = {24, 0};
  expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, 2, want_z);
  kh_result_free(&r);
  /* ... while without it, 0 copies the input's dim: [24, 24] needs 576 elements. */
  kh_node nz0 = {.op = "Reshape", .opset = 14};
  run(&nz0, inz, 2, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "has 0 elements, shape [24,24] needs 576");
  kh_result_free(&r);

  /* Errors: element count, two -1. */
  int64_t s5[] = {5, -1};
  onyx_tensor t5 = kh_tensor(ONYX_DTYPE_INT64, 1, ds2, s5);
  const onyx_tensor *in5[] = {&tx, &t5};
  run(&nz0, in5, 2, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "cannot infer");
  kh_result_free(&r);
  int64_t s11[] = {-1, -1};
  onyx_tensor t11 = kh_tensor(ONYX_DTYPE_INT64, 1, ds2, s11);
  const onyx_tensor *in11[] = {&tx, &t11};
  run(&nz0, in11, 2, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "at most one");
  kh_result_free(&r);

  /* Opset 1-4 took the shape as an attribute. */
  int64_t sh[] = {6, 4};
  onyx_attr shape_attr = kh_attr_ints("shape", sh, 2);
  kh_node n1 = {.op = "Reshape", .opset = 1, .attrs = &shape_attr, .attr_count = 1};
  const onyx_tensor *in1[] = {&tx};
  run(&n1, in1, 1, &r);
  expect_ok(&r);
  expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, 2, sh);
  kh_result_free(&r);
}

static void test_transpose(void **st) {
  (void)st;
  int64_t dx[] = {2, 3, 4, 5};
  int64_t x[120];
  for (int i = 0; i < 120; ++i) x[i] = i * 7 + 1;
  onyx_tensor tx = kh_tensor(ONYX_DTYPE_INT64, 4, dx, x);
  const onyx_tensor *in[] = {&tx};
  int64_t perms[][4] = {{0, 1, 2, 3}, {3, 2, 1, 0}, {0, 2, 1, 3}, {1, 0, 3, 2},
                        {2, 3, 0, 1}, {0, 1, 3, 2}, {3, 0, 1, 2}};
  for (size_t c = 0; c < sizeof perms / sizeof perms[0]; ++c) {
    onyx_attr perm = kh_attr_ints("perm", perms[c], 4);
    kh_node n = {.op = "Transpose", .opset = 13, .attrs = &perm, .attr_count = 1};
    kh_result r;
    run(&n, in, 1, &r);
    expect_ok(&r);
    int64_t dy[4], want[120];
    for (int d = 0; d < 4; ++d) dy[d] = dx[perms[c][d]];
    expect_shape(&r.out[0], ONYX_DTYPE_INT64, 4, dy);
    int64_t in_stride[4] = {60, 20, 5, 1};
    for (int64_t i = 0; i < 120; ++i) {
      int64_t rem = i, off = 0;
      for (int d = 3; d >= 0; --d) {
        off += (rem % dy[d]) * in_stride[perms[c][d]];
        rem /= dy[d];
      }
      want[i] = x[off];
    }
    expect_i64(r.out[0].data, want, 120);
    kh_result_free(&r);
  }

  /* Default perm reverses; 16-bit dtype; size-1 dims. */
  uint16_t h[6] = {1, 2, 3, 4, 5, 6};
  int64_t dh[] = {1, 2, 3};
  onyx_tensor th = kh_tensor(ONYX_DTYPE_FLOAT16, 3, dh, h);
  const onyx_tensor *inh[] = {&th};
  kh_node nd = {.op = "Transpose", .opset = 21};
  kh_result r;
  run(&nd, inh, 1, &r);
  expect_ok(&r);
  int64_t dyh[] = {3, 2, 1};
  expect_shape(&r.out[0], ONYX_DTYPE_FLOAT16, 3, dyh);
  uint16_t wanth[] = {1, 4, 2, 5, 3, 6};
  expect_u16(r.out[0].data, wanth, 6);
  kh_result_free(&r);

  int64_t bad[] = {0, 0, 1, 2};
  onyx_attr perm = kh_attr_ints("perm", bad, 4);
  kh_node nb = {.op = "Transpose", .opset = 13, .attrs = &perm, .attr_count = 1};
  run(&nb, in, 1, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "not a permutation");
  kh_result_free(&r);

  /* Zero-size. */
  int64_t dz[] = {0, 3};
  onyx_tensor tz = kh_tensor(ONYX_DTYPE_FLOAT32, 2, dz, NULL);
  const onyx_tensor *inz[] = {&tz};
  run(&nd, inz, 1, &r);
  expect_ok(&r);
  int64_t dzy[] = {3, 0};
  expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, 2, dzy);
  kh_result_free(&r);
}

/* The tiled route (the input's contiguous axis is not the output's last), against
 * the index arithmetic: edges that are not whole tiles, outer axes on both sides,
 * every element size, fresh random bytes. */
static void test_transpose_tiled(void **st) {
  (void)st;
  static const struct {
    uint32_t rank;
    int64_t dims[4], perm[4];
  } cases[] = {{2, {37, 70}, {1, 0}},
               {2, {300, 9}, {1, 0}},
               {3, {5, 33, 40}, {0, 2, 1}},
               {3, {33, 40, 5}, {2, 1, 0}},
               {4, {3, 45, 9, 33}, {0, 3, 1, 2}},
               {4, {3, 45, 9, 33}, {3, 2, 1, 0}},
               {4, {3, 45, 9, 33}, {2, 0, 3, 1}}};
  static const uint32_t dtypes[] = {ONYX_DTYPE_UINT8, ONYX_DTYPE_FLOAT16, ONYX_DTYPE_FLOAT32,
                                    ONYX_DTYPE_INT64};
  uint64_t seed = 0xd1b54a32d192ed03ull ^ (uint64_t)(uintptr_t)&seed;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
    const uint32_t rank = cases[c].rank;
    int64_t numel = 1, in_stride[4], dy[4];
    for (uint32_t d = rank; d-- > 0;) {
      in_stride[d] = numel;
      numel *= cases[c].dims[d];
    }
    for (uint32_t d = 0; d < rank; ++d) dy[d] = cases[c].dims[cases[c].perm[d]];
    for (size_t t = 0; t < sizeof dtypes / sizeof dtypes[0]; ++t) {
      size_t es = onyx_dtype_size(dtypes[t]);
      unsigned char *x = malloc((size_t)numel * es), *want = malloc((size_t)numel * es);
      assert_non_null(x);
      assert_non_null(want);
      for (int64_t i = 0; i < numel * (int64_t)es; ++i) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (unsigned char)(seed >> 56);
      }
      for (int64_t i = 0; i < numel; ++i) {
        int64_t rem = i, off = 0;
        for (uint32_t d = rank; d-- > 0;) {
          off += rem % dy[d] * in_stride[cases[c].perm[d]];
          rem /= dy[d];
        }
        memcpy(want + i * es, x + off * es, es);
      }
      onyx_tensor tx = kh_tensor(dtypes[t], rank, cases[c].dims, x);
      const onyx_tensor *in[] = {&tx};
      onyx_attr perm = kh_attr_ints("perm", cases[c].perm, rank);
      kh_node n = {.op = "Transpose", .opset = 13, .attrs = &perm, .attr_count = 1};
      kh_result r;
      run(&n, in, 1, &r);
      expect_ok(&r);
      expect_shape(&r.out[0], dtypes[t], rank, dy);
      if (memcmp(r.out[0].data, want, (size_t)numel * es) != 0)
        fail_msg("case %zu, %zu-byte elements: the tiled transpose differs", c, es);
      kh_result_free(&r);
      free(x);
      free(want);
    }
  }
}

static void test_concat(void **st) {
  (void)st;
  int32_t a[] = {1, 2, 3, 4, 5, 6}, b[] = {7, 8}, c[] = {9, 10, 11, 12};
  int64_t da[] = {2, 3}, db[] = {2, 1}, dc[] = {2, 2}, dz[] = {2, 0};
  onyx_tensor ta = kh_tensor(ONYX_DTYPE_INT32, 2, da, a),
              tb = kh_tensor(ONYX_DTYPE_INT32, 2, db, b);
  onyx_tensor tc = kh_tensor(ONYX_DTYPE_INT32, 2, dc, c),
              tz = kh_tensor(ONYX_DTYPE_INT32, 2, dz, NULL);
  const onyx_tensor *in[] = {&ta, &tz, &tb, &tc};
  onyx_attr axis = kh_attr_int("axis", -1);
  kh_node n = {.op = "Concat", .opset = 13, .attrs = &axis, .attr_count = 1};
  kh_result r;
  run(&n, in, 4, &r);
  expect_ok(&r);
  int64_t dy[] = {2, 6};
  expect_shape(&r.out[0], ONYX_DTYPE_INT32, 2, dy);
  int32_t want[] = {1, 2, 3, 7, 9, 10, 4, 5, 6, 8, 11, 12};
  assert_memory_equal(r.out[0].data, want, sizeof want);
  kh_result_free(&r);

  onyx_attr axis0 = kh_attr_int("axis", 0);
  kh_node n0 = {.op = "Concat", .opset = 13, .attrs = &axis0, .attr_count = 1};
  const onyx_tensor *in0[] = {&ta, &tb};
  run(&n0, in0, 2, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT,
              "input 1 has shape [2,1], expected [2,3] except along axis 0");
  kh_result_free(&r);

  /* Axis is required from opset 4. */
  kh_node nna = {.op = "Concat", .opset = 13};
  run(&nna, in0, 2, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "required");
  kh_result_free(&r);
}

static void test_unsqueeze_squeeze(void **st) {
  (void)st;
  float x[6] = {1, 2, 3, 4, 5, 6};
  int64_t dx[] = {2, 3};
  onyx_tensor tx = kh_tensor(ONYX_DTYPE_FLOAT32, 2, dx, x);
  kh_result r;

  /* Opset 13: axes as input, negative and unsorted. */
  int64_t axes[] = {-1, 0, 2};
  int64_t dax[] = {3};
  onyx_tensor tax = kh_tensor(ONYX_DTYPE_INT64, 1, dax, axes);
  const onyx_tensor *in[] = {&tx, &tax};
  kh_node un = {.op = "Unsqueeze", .opset = 13};
  run(&un, in, 2, &r);
  expect_ok(&r);
  int64_t dy[] = {1, 2, 1, 3, 1};
  expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, 5, dy);
  assert_memory_equal(r.out[0].data, x, sizeof x);
  kh_result_free(&r);

  /* Opset 11: axes as attribute. */
  int64_t ax1[] = {1};
  onyx_attr aattr = kh_attr_ints("axes", ax1, 1);
  kh_node un11 = {.op = "Unsqueeze", .opset = 11, .attrs = &aattr, .attr_count = 1};
  const onyx_tensor *in1[] = {&tx};
  run(&un11, in1, 1, &r);
  expect_ok(&r);
  int64_t dy1[] = {2, 1, 3};
  expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, 3, dy1);
  kh_result_free(&r);

  int64_t dup[] = {0, -4};
  int64_t d2[] = {2};
  onyx_tensor tdup = kh_tensor(ONYX_DTYPE_INT64, 1, d2, dup);
  const onyx_tensor *indup[] = {&tx, &tdup};
  run(&un, indup, 2, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "twice");
  kh_result_free(&r);

  /* Squeeze: all size-1 dims when axes are absent, else just those named. */
  int64_t dq[] = {1, 2, 1, 3, 1};
  onyx_tensor tq = kh_tensor(ONYX_DTYPE_FLOAT32, 5, dq, x);
  const onyx_tensor *inq[] = {&tq, NULL};
  kh_node sq = {.op = "Squeeze", .opset = 13};
  run(&sq, inq, 2, &r);
  expect_ok(&r);
  expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, 2, dx);
  kh_result_free(&r);
  int64_t sax[] = {-1, 0};
  onyx_tensor tsax = kh_tensor(ONYX_DTYPE_INT64, 1, d2, sax);
  const onyx_tensor *inq2[] = {&tq, &tsax};
  run(&sq, inq2, 2, &r);
  expect_ok(&r);
  int64_t dq2[] = {2, 1, 3};
  expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, 3, dq2);
  kh_result_free(&r);
  int64_t bad[] = {1};
  int64_t d1[] = {1};
  onyx_tensor tbad = kh_tensor(ONYX_DTYPE_INT64, 1, d1, bad);
  const onyx_tensor *inbad[] = {&tq, &tbad};
  run(&sq, inbad, 2, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "is 2, expected 1");
  kh_result_free(&r);
  /* An empty axes list squeezes every size-1 dim, as ONNX Runtime does. */
  int64_t d0[] = {0};
  onyx_tensor tempty = kh_tensor(ONYX_DTYPE_INT64, 1, d0, NULL);
  const onyx_tensor *inqe[] = {&tq, &tempty};
  run(&sq, inqe, 2, &r);
  expect_ok(&r);
  expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, 2, dx);
  kh_result_free(&r);
  /* Opset 11 attribute form. */
  int64_t s11[] = {2};
  onyx_attr sattr = kh_attr_ints("axes", s11, 1);
  kh_node sq11 = {.op = "Squeeze", .opset = 11, .attrs = &sattr, .attr_count = 1};
  const onyx_tensor *inq11[] = {&tq};
  run(&sq11, inq11, 1, &r);
  expect_ok(&r);
  int64_t dq11[] = {1, 2, 3, 1};
  expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, 4, dq11);
  kh_result_free(&r);
}

static void test_shape_op(void **st) {
  (void)st;
  int64_t dx[] = {3, 4, 5};
  onyx_tensor tx = kh_tensor(ONYX_DTYPE_FLOAT32, 3, dx, NULL);
  tx.data = (void *)dx; /* Shape never reads data; any non-NULL pointer does */
  const onyx_tensor *in[] = {&tx};
  struct {
    int64_t opset;
    bool has_start, has_end;
    int64_t start, end;
    int64_t n;
    int64_t want[3];
  } cases[] = {
      {15, false, false, 0, 0, 3, {3, 4, 5}}, {15, true, false, 1, 0, 2, {4, 5}},
      {15, false, true, 0, -1, 2, {3, 4}},    {15, true, true, -10, 10, 3, {3, 4, 5}},
      {15, true, true, 2, 1, 0, {0}},         {15, true, false, -1, 0, 1, {5}},
      {13, true, true, 1, 2, 3, {3, 4, 5}}, /* before 15, start/end do not exist */
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
    onyx_attr attrs[2];
    size_t na = 0;
    if (cases[c].has_start) attrs[na++] = kh_attr_int("start", cases[c].start);
    if (cases[c].has_end) attrs[na++] = kh_attr_int("end", cases[c].end);
    kh_node n = {.op = "Shape", .opset = cases[c].opset, .attrs = attrs, .attr_count = na};
    kh_result r;
    run(&n, in, 1, &r);
    expect_ok(&r);
    expect_shape(&r.out[0], ONYX_DTYPE_INT64, 1, &cases[c].n);
    expect_i64(r.out[0].data, cases[c].want, cases[c].n);
    kh_result_free(&r);
  }
  /* A scalar's shape is empty. */
  float s = 1;
  onyx_tensor ts = kh_tensor(ONYX_DTYPE_FLOAT32, 0, NULL, &s);
  const onyx_tensor *ins[] = {&ts};
  kh_node n = {.op = "Shape", .opset = 1};
  kh_result r;
  run(&n, ins, 1, &r);
  expect_ok(&r);
  int64_t zero = 0;
  expect_shape(&r.out[0], ONYX_DTYPE_INT64, 1, &zero);
  kh_result_free(&r);
}

static void test_constant_identity(void **st) {
  (void)st;
  kh_result r;
  double v[] = {1.5, -2.5, 3.25};
  int64_t dv[] = {3, 1};
  onyx_tensor tv = kh_tensor(ONYX_DTYPE_FLOAT64, 2, dv, v);
  onyx_attr value = kh_attr_tensor("value", &tv);
  kh_node n = {.op = "Constant", .opset = 13, .attrs = &value, .attr_count = 1};
  run(&n, NULL, 0, &r);
  expect_ok(&r);
  expect_shape(&r.out[0], ONYX_DTYPE_FLOAT64, 2, dv);
  expect_close_f64(r.out[0].data, v, 3, 0);
  kh_result_free(&r);

  onyx_attr vf = kh_attr_float("value_float", 0.75f);
  kh_node nf = {.op = "Constant", .opset = 13, .attrs = &vf, .attr_count = 1};
  run(&nf, NULL, 0, &r);
  expect_ok(&r);
  expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, 0, NULL);
  assert_true(*(float *)r.out[0].data == 0.75f);
  kh_result_free(&r);

  int64_t ints[] = {4, -5};
  onyx_attr vi = kh_attr_ints("value_ints", ints, 2);
  kh_node ni = {.op = "Constant", .opset = 13, .attrs = &vi, .attr_count = 1};
  run(&ni, NULL, 0, &r);
  expect_ok(&r);
  int64_t d2[] = {2};
  expect_shape(&r.out[0], ONYX_DTYPE_INT64, 1, d2);
  expect_i64(r.out[0].data, ints, 2);
  kh_result_free(&r);

  onyx_attr vint = kh_attr_int("value_int", -9);
  kh_node nint = {.op = "Constant", .opset = 13, .attrs = &vint, .attr_count = 1};
  run(&nint, NULL, 0, &r);
  expect_ok(&r);
  expect_shape(&r.out[0], ONYX_DTYPE_INT64, 0, NULL);
  assert_int_equal(*(int64_t *)r.out[0].data, -9);
  kh_result_free(&r);

  float fl[] = {1, 2, 3};
  onyx_attr vfs = kh_attr_floats("value_floats", fl, 0); /* empty list: shape [0] */
  kh_node nfs = {.op = "Constant", .opset = 13, .attrs = &vfs, .attr_count = 1};
  run(&nfs, NULL, 0, &r);
  expect_ok(&r);
  int64_t d0[] = {0};
  expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, 1, d0);
  kh_result_free(&r);

  kh_node none = {.op = "Constant", .opset = 13};
  run(&none, NULL, 0, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "no value");
  kh_result_free(&r);
  onyx_attr two[] = {vf, vint};
  kh_node both = {.op = "Constant", .opset = 13, .attrs = two, .attr_count = 2};
  run(&both, NULL, 0, &r);
  expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, "exactly one");
  kh_result_free(&r);

  /* Identity copies any dtype. */
  uint8_t b[] = {1, 0, 1};
  int64_t d3[] = {3};
  onyx_tensor tb = kh_tensor(ONYX_DTYPE_BOOL, 1, d3, b);
  const onyx_tensor *in[] = {&tb};
  kh_node id = {.op = "Identity", .opset = 21};
  run(&id, in, 1, &r);
  expect_ok(&r);
  expect_shape(&r.out[0], ONYX_DTYPE_BOOL, 1, d3);
  assert_memory_equal(r.out[0].data, b, 3);
  assert_ptr_not_equal(r.out[0].data, b);
  kh_result_free(&r);
}

/* An output the node does not name is not allocated. */
static void test_unnamed_output(void **st) {
  (void)st;
  float x[] = {1, 2};
  int64_t d[] = {2};
  onyx_tensor t = kh_tensor(ONYX_DTYPE_FLOAT32, 1, d, x);
  const onyx_tensor *in[] = {&t, &t};
  bool present[] = {false};
  kh_node n = {.op = "Add", .opset = 14, .output_count = 1, .output_present = present};
  kh_result r;
  run(&n, in, 2, &r);
  expect_ok(&r);
  assert_int_equal(r.alloc_calls, 0);
  kh_result_free(&r);
}

/* Every kernel table is well-formed and its opset ranges per (domain, op) do not
 * overlap. */
static void test_kernel_tables(void **st) {
  (void)st;
  const onyx_provider_table *t = g_cpu.table;
  for (size_t i = 0; i < t->kernel_count; ++i) {
    const onyx_kernel_table *a = t->kernels[i];
    assert_non_null(a->domain);
    assert_true(a->since_opset >= 1);
    assert_true(a->until_opset == 0 || a->until_opset >= a->since_opset);
    assert_true(a->destroy != NULL || a->create == NULL);
    for (size_t j = i + 1; j < t->kernel_count; ++j) {
      const onyx_kernel_table *b = t->kernels[j];
      if (strcmp(a->domain, b->domain) != 0 || strcmp(a->op_type, b->op_type) != 0) continue;
      int64_t a_end = a->until_opset ? a->until_opset : INT64_MAX;
      int64_t b_end = b->until_opset ? b->until_opset : INT64_MAX;
      if (a->since_opset <= b_end && b->since_opset <= a_end)
        fail_msg("%s: kernels %zu and %zu overlap", a->op_type, i, j);
    }
  }
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
      cmocka_unit_test(test_entry_negotiation),
      cmocka_unit_test(test_open_options),
      cmocka_unit_test(test_kernel_tables),
      cmocka_unit_test(test_binary_broadcast_f32),
      cmocka_unit_test(test_binary_shape_mismatch),
      cmocka_unit_test(test_binary_int),
      cmocka_unit_test(test_binary_half),
      cmocka_unit_test(test_binary_legacy_broadcast),
      cmocka_unit_test(test_unary),
      cmocka_unit_test(test_sigmoid_builds),
      cmocka_unit_test(test_softmax_axes),
      cmocka_unit_test(test_softmax_half),
      cmocka_unit_test(test_matmul_shapes),
      cmocka_unit_test(test_matmul_parallel),
      cmocka_unit_test(test_matmul_types),
      cmocka_unit_test(test_matmul_errors),
      cmocka_unit_test(test_gemm),
      cmocka_unit_test(test_gemm_types_and_errors),
      cmocka_unit_test(test_cast_f16_rounding),
      cmocka_unit_test(test_cast_bf16_rounding),
      cmocka_unit_test(test_cast_ints_and_bool),
      cmocka_unit_test(test_gather),
      cmocka_unit_test(test_reshape),
      cmocka_unit_test(test_transpose),
      cmocka_unit_test(test_transpose_tiled),
      cmocka_unit_test(test_concat),
      cmocka_unit_test(test_unsqueeze_squeeze),
      cmocka_unit_test(test_shape_op),
      cmocka_unit_test(test_constant_identity),
      cmocka_unit_test(test_unnamed_output),
  };
  return cmocka_run_group_tests_name("cpu_kernels", tests, group_setup, group_teardown);
}
