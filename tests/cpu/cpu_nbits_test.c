/*
 * The CPU provider's quantized-weight kernels (com.microsoft MatMulNBits and
 * GatherBlockQuantized) against the ops' definition evaluated in double here: every
 * route (int8 activations, fp32 tile kernels, the GEMM route for many rows, the
 * reference), each instruction-set build this machine runs (ONYX_CPU_NBITS_ISA caps
 * the choice), one and two threads, weights constant (packed at create, originals
 * given back, booked as weights and released) or computed (packed per run into
 * workspace). Also the refusals and their messages, a short workspace, and a refused
 * weights allocation. tests/cpu/nbits_parity.sh checks the same ops against ONNX
 * Runtime.
 *
 * Usage: cpu_nbits_test [path/to/libonyx_cpu.so]   (default: ONYX_CPU_SO)
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
static kh_provider g_cpu[2]; /* 1 and 2 threads */

/* ------------------------------------------------------------------ helpers */

static uint64_t g_rng;

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

/* Uniform in [lo, hi), never exactly zero. */
static float rng_float(float lo, float hi) {
  float v = lo + (hi - lo) * (float)((rng_next() >> 40) / 16777216.0);
  return v == 0.0f ? 0.5f : v;
}

static void set_isa(const char *isa) {
  if (isa)
    setenv("ONYX_CPU_NBITS_ISA", isa, 1);
  else
    unsetenv("ONYX_CPU_NBITS_ISA");
}

static uint16_t f32_to_half(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, e = (x >> 23) & 0xff, m = x & 0x7fffffu;
  if (e < 113) return (uint16_t)sign; /* tiny: the test's values are not */
  uint32_t h = ((e - 112) << 10) | (m >> 13);
  uint32_t rest = m & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1))) ++h;
  return (uint16_t)(sign | h);
}

static float half_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 31, m = h & 1023, x;
  x = e == 0 ? sign : sign | ((e + 112) << 23) | (m << 13);
  float f;
  memcpy(&f, &x, 4);
  return f;
}

/* ------------------------------------------------------------------ MatMulNBits */

typedef struct nb_case {
  int64_t m, k, n;
  int bits, bs;
  int zp;  /* 0 absent, 1 packed uint8, 2 float */
  int acc; /* accuracy_level */
  bool f16, bias;
} nb_case;

/* The op's inputs as it defines them, plus the codes and zero points unpacked. */
typedef struct nb_data {
  int64_t kb, blob, zp_bytes;
  float *a;                            /* m × k (the float16 values, widened, when f16) */
  uint8_t *codes;                      /* n × kb·bs */
  float *scales;                       /* n × kb */
  float *zpv;                          /* n × kb: the zero point of each block as a float */
  float *bias;                         /* n */
  void *a_in, *s_in, *zp_in, *bias_in; /* in the case's dtypes */
  uint8_t *b_in;                       /* n × kb × blob */
} nb_data;

static void *xmalloc(size_t n) {
  void *p = calloc(1, n ? n : 1);
  assert_non_null(p);
  return p;
}

/* A value rounded to the case's activation type. */
static float nb_round(const nb_case *c, float v) {
  return c->f16 ? half_to_f32(f32_to_half(v)) : v;
}

static void nb_store(const nb_case *c, void *dst, int64_t i, float v) {
  if (c->f16)
    ((uint16_t *)dst)[i] = f32_to_half(v);
  else
    ((float *)dst)[i] = v;
}

static void nb_make(const nb_case *c, uint64_t seed, nb_data *d) {
  rng_seed(seed);
  memset(d, 0, sizeof *d);
  const int64_t kb = d->kb = (c->k + c->bs - 1) / c->bs, hi = (int64_t)1 << c->bits;
  d->blob = c->bs * c->bits / 8;
  d->zp_bytes = (kb * c->bits + 7) / 8;
  const size_t es = c->f16 ? 2 : 4;
  d->a = xmalloc((size_t)(c->m * c->k) * 4);
  d->a_in = xmalloc((size_t)(c->m * c->k) * es);
  for (int64_t i = 0; i < c->m * c->k; ++i) {
    d->a[i] = nb_round(c, rng_float(-2.0f, 2.0f));
    nb_store(c, d->a_in, i, d->a[i]);
  }
  d->codes = xmalloc((size_t)(c->n * kb * c->bs));
  d->b_in = xmalloc((size_t)(c->n * kb * d->blob));
  for (int64_t i = 0; i < c->n * kb * c->bs; ++i) {
    d->codes[i] = (uint8_t)(rng_next() % (uint64_t)hi);
    d->b_in[i * c->bits / 8] |= (uint8_t)(d->codes[i] << ((i * c->bits) % 8));
  }
  d->scales = xmalloc((size_t)(c->n * kb) * 4);
  d->s_in = xmalloc((size_t)(c->n * kb) * es);
  d->zpv = xmalloc((size_t)(c->n * kb) * 4);
  d->zp_in = xmalloc((size_t)(c->n * (c->zp == 2 ? kb * (int64_t)es : d->zp_bytes)));
  const float scale = 4.0f / (float)(hi * sqrt((double)c->k));
  for (int64_t n = 0; n < c->n; ++n)
    for (int64_t b = 0; b < kb; ++b) {
      int64_t i = n * kb + b;
      d->scales[i] = nb_round(c, rng_float(0.5f, 1.5f) * scale);
      nb_store(c, d->s_in, i, d->scales[i]);
      if (c->zp == 1) {
        unsigned z = (unsigned)(rng_next() % (uint64_t)hi);
        d->zpv[i] = (float)z;
        ((uint8_t *)d->zp_in)[n * d->zp_bytes + b * c->bits / 8] |=
            (uint8_t)(z << ((b * c->bits) % 8));
      } else if (c->zp == 2) {
        d->zpv[i] = nb_round(c, rng_float(0.0f, (float)(hi - 1)));
        nb_store(c, d->zp_in, i, d->zpv[i]);
      } else {
        d->zpv[i] = (float)(hi / 2);
      }
    }
  d->bias = xmalloc((size_t)c->n * 4);
  d->bias_in = xmalloc((size_t)c->n * es);
  for (int64_t n = 0; n < c->n; ++n) {
    d->bias[n] = nb_round(c, rng_float(-1.0f, 1.0f));
    nb_store(c, d->bias_in, n, d->bias[n]);
  }
}

static void nb_free(nb_data *d) {
  void *all[] = {d->a,    d->codes, d->scales, d->zpv,     d->bias,
                 d->a_in, d->s_in,  d->zp_in,  d->bias_in, d->b_in};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) free(all[i]);
}

/* The definition in double, with A quantized as the int8 route does when int8; also the
 * sum of |terms| per element, which bounds float32 rounding. */
static void nb_want(const nb_case *c, const nb_data *d, bool int8, double *y, double *mag) {
  const int64_t kb = d->kb, bs = c->bs;
  float *q = xmalloc((size_t)(kb * bs) * 4), *qs = xmalloc((size_t)kb * 4);
  for (int64_t m = 0; m < c->m; ++m) {
    const float *a = d->a + m * c->k;
    for (int64_t b = 0; b < kb; ++b) {
      float amax = 0.0f;
      for (int64_t j = b * bs; j < (b + 1) * bs && j < c->k; ++j) amax = fmaxf(amax, fabsf(a[j]));
      float inv = amax != 0.0f ? 127.0f / amax : 0.0f;
      qs[b] = int8 ? amax / 127.0f : 1.0f;
      for (int64_t j = b * bs; j < (b + 1) * bs; ++j)
        q[j] = j >= c->k ? 0.0f : int8 ? nearbyintf(a[j] * inv) : a[j];
    }
    for (int64_t n = 0; n < c->n; ++n) {
      double s = 0, abs_sum = 0;
      for (int64_t b = 0; b < kb; ++b) {
        double blk = 0, blk_abs = 0;
        for (int64_t j = b * bs; j < (b + 1) * bs && j < c->k; ++j) {
          double w = ((double)d->codes[(n * kb) * bs + j] - d->zpv[n * kb + b]);
          blk += q[j] * w;
          blk_abs += fabs(q[j] * w) + fabs(q[j] * d->zpv[n * kb + b]);
        }
        double f = (double)d->scales[n * kb + b] * qs[b];
        s += blk * f;
        abs_sum += blk_abs * fabs(f);
      }
      if (c->bias) s += d->bias[n];
      y[m * c->n + n] = s;
      mag[m * c->n + n] = abs_sum + (c->bias ? fabs(d->bias[n]) : 0.0);
    }
  }
  free(q);
  free(qs);
}

typedef struct nb_run_opts {
  bool constant;   /* B, scales, zero points as constants of the session */
  int threads_ix;  /* g_cpu index */
  const char *isa; /* ONYX_CPU_NBITS_ISA, NULL: the best */
  bool refuse_mem; /* host->mem_alloc refuses */
  uint64_t shortfall;
} nb_run_opts;

static onyx_attr g_nb_attrs[6];

static kh_node nb_node(const nb_case *c, const bool *cons) {
  g_nb_attrs[0] = kh_attr_int("K", c->k);
  g_nb_attrs[1] = kh_attr_int("N", c->n);
  g_nb_attrs[2] = kh_attr_int("bits", c->bits);
  g_nb_attrs[3] = kh_attr_int("block_size", c->bs);
  g_nb_attrs[4] = kh_attr_int("accuracy_level", c->acc);
  return (kh_node){.op = "MatMulNBits",
                   .domain = "com.microsoft",
                   .opset = 1,
                   .attrs = g_nb_attrs,
                   .attr_count = 5,
                   .constant_inputs = cons};
}

/* Runs the case; the caller frees r. Inputs in the op's order (g_idx absent). */
static void nb_run(const nb_case *c, const nb_data *d, const nb_run_opts *o, kh_result *r) {
  const uint32_t t1 = c->f16 ? ONYX_DTYPE_FLOAT16 : ONYX_DTYPE_FLOAT32;
  int64_t da[2] = {c->m, c->k}, db[3] = {c->n, d->kb, d->blob}, ds[2] = {c->n, d->kb};
  int64_t dz[2] = {c->n, c->zp == 2 ? d->kb : d->zp_bytes}, dbias[1] = {c->n};
  onyx_tensor ta = kh_tensor(t1, 2, da, d->a_in), tb = kh_tensor(ONYX_DTYPE_UINT8, 3, db, d->b_in);
  onyx_tensor ts = kh_tensor(t1, 2, ds, d->s_in);
  onyx_tensor tz = kh_tensor(c->zp == 2 ? t1 : ONYX_DTYPE_UINT8, 2, dz, d->zp_in);
  onyx_tensor tbias = kh_tensor(t1, 1, dbias, d->bias_in);
  const onyx_tensor *in[6] = {&ta, &tb, &ts, c->zp ? &tz : NULL, NULL, c->bias ? &tbias : NULL};
  const bool cons[6] = {false, true, true, true, false, true};
  kh_node node = nb_node(c, o->constant ? cons : NULL);
  node.refuse_mem_alloc = o->refuse_mem;
  node.workspace_shortfall = o->shortfall;
  set_isa(o->isa);
  kh_run(&g_cpu[o->threads_ix], &node, in, c->bias ? 6 : c->zp ? 4 : 3, r);
  set_isa(NULL);
}

/* Whether ONNX Runtime's rules put this case on the int8 route. */
static bool nb_int8(const nb_case *c, bool constant) {
  if (c->acc != 4 || !constant || c->zp == 2) return false;
  return c->bits != 2 || (c->bs >= 32 && c->bs <= 128);
}

static void nb_check(const nb_case *c, const nb_data *d, const nb_run_opts *o, const double *want,
                     const double *mag) {
  kh_result r;
  nb_run(c, d, o, &r);
  char what[256];
  snprintf(what, sizeof what,
           "MatMulNBits M%lld K%lld N%lld bits %d block %d zp %d acc %d %s%s, %s weights, "
           "%d threads, isa %s",
           (long long)c->m, (long long)c->k, (long long)c->n, c->bits, c->bs, c->zp, c->acc,
           c->f16 ? "float16" : "float32", c->bias ? " +bias" : "",
           o->constant ? "constant" : "computed", o->threads_ix + 1, o->isa ? o->isa : "best");
  if (r.status != ONYX_STATUS_OK)
    fail_msg("%s: %s at %s: %s", what, onyx_status_str(r.status), r.stage, r.error);
  int64_t dy[2] = {c->m, c->n};
  expect_shape(&r.out[0], c->f16 ? ONYX_DTYPE_FLOAT16 : ONYX_DTYPE_FLOAT32, 2, dy);
  const bool packed = o->constant && !o->refuse_mem && !(o->isa && !strcmp(o->isa, "reference"));
  uint32_t copied = packed ? (1u << 1) | (1u << 2) | (c->zp ? 1u << 3 : 0u) : 0u;
  if (r.constants_copied != copied)
    fail_msg("%s: constants copied 0x%x, want 0x%x", what, r.constants_copied, copied);
  assert_int_equal(r.governed_live_after, 0);
  if (packed && r.governed_bytes == 0) fail_msg("%s: nothing booked as weights", what);
  for (int64_t i = 0; i < c->m * c->n; ++i) {
    double got = c->f16 ? half_to_f32(((const uint16_t *)r.out[0].data)[i])
                        : ((const float *)r.out[0].data)[i];
    double tol = 2e-6 * mag[i] + 1e-6 + (c->f16 ? 2e-3 * fabs(want[i]) + 1e-3 : 0.0);
    if (!(fabs(got - want[i]) <= tol))
      fail_msg("%s: element %lld: got %.9g, want %.9g (terms' magnitude %.3g)", what, (long long)i,
               got, want[i], mag[i]);
  }
  kh_result_free(&r);
}

static void nb_check_all(const nb_case *cases, size_t count, bool every_isa) {
  static const char *const isas[] = {NULL, "avx512", "avx2", "generic", "reference"};
  for (size_t i = 0; i < count; ++i) {
    const nb_case *c = &cases[i];
    nb_data d;
    nb_make(c, 100 + i, &d);
    size_t ny = (size_t)(c->m * c->n);
    double *w8 = xmalloc(ny * 8), *w32 = xmalloc(ny * 8), *mag = xmalloc(ny * 8);
    nb_want(c, &d, true, w8, mag);
    nb_want(c, &d, false, w32, mag);
    for (size_t s = 0; s < (every_isa ? 5u : 1u); ++s)
      for (int th = 0; th < 2; ++th)
        for (int cons = 0; cons < 2; ++cons) {
          nb_run_opts o = {.constant = cons, .threads_ix = th, .isa = isas[s]};
          nb_check(c, &d, &o, nb_int8(c, o.constant) ? w8 : w32, mag);
        }
    free(w8);
    free(w32);
    free(mag);
    nb_free(&d);
  }
}

static void test_nbits_decode_and_prefill(void **st) {
  (void)st;
  static const nb_case cases[] = {
      /* m, k, n, bits, bs, zp, acc, f16, bias */
      {1, 71, 37, 4, 32, 0, 4, false, false},   {1, 71, 37, 4, 32, 1, 0, false, true},
      {3, 100, 17, 8, 16, 1, 4, false, true},   {9, 256, 48, 4, 64, 2, 4, false, false},
      {20, 300, 33, 4, 128, 1, 4, false, true}, {20, 300, 33, 4, 128, 1, 0, false, true},
      {17, 200, 40, 8, 32, 0, 0, false, false}, {5, 520, 19, 4, 256, 1, 4, false, false},
      {2, 96, 21, 2, 32, 1, 4, false, true},    {4, 80, 18, 2, 16, 0, 4, false, false},
      {1, 64, 30, 4, 16, 0, 4, true, true},     {18, 96, 30, 4, 32, 1, 0, true, false},
  };
  nb_check_all(cases, sizeof cases / sizeof cases[0], true);
}

/* Rows in several groups of the tile kernels, several tiles a task, many K slices. */
static void test_nbits_larger(void **st) {
  (void)st;
  static const nb_case cases[] = {
      {1, 1024, 520, 4, 32, 0, 4, false, false},
      {33, 640, 96, 4, 32, 1, 4, false, true},
      {40, 700, 70, 8, 64, 1, 0, false, false},
  };
  nb_check_all(cases, sizeof cases / sizeof cases[0], false);
}

/* A refused weights allocation packs per run instead; a short workspace is refused. */
static void test_nbits_memory(void **st) {
  (void)st;
  const nb_case c = {4, 96, 20, 4, 32, 1, 4, false, true};
  nb_data d;
  nb_make(&c, 7, &d);
  double *want = xmalloc(4 * 20 * 8), *mag = xmalloc(4 * 20 * 8);
  nb_want(&c, &d, true, want, mag);
  nb_run_opts o = {.constant = true, .refuse_mem = true};
  nb_check(&c, &d, &o, want, mag);
  kh_result r;
  nb_run_opts shortish = {.constant = true, .shortfall = 1};
  nb_run(&c, &d, &shortish, &r);
  expect_fail(&r, ONYX_STATUS_WORKSPACE_TOO_SMALL, "nbits_a_int8");
  kh_result_free(&r);
  free(want);
  free(mag);
  nb_free(&d);
}

/* One refusal: attributes (or their absence) and the message fragment. */
typedef struct nb_bad {
  const char *what;
  int64_t k, n, bits, bs, acc, prepacked;
  bool drop_k;
  onyx_status status;
  const char *fragment;
} nb_bad;

static void test_nbits_refusals(void **st) {
  (void)st;
  static const nb_bad bad[] = {
      {"no K", 32, 8, 4, 16, 0, 0, true, ONYX_STATUS_INVALID_ARGUMENT, "attribute 'K' is required"},
      {"3 bits", 32, 8, 3, 16, 0, 0, false, ONYX_STATUS_UNSUPPORTED, "bits = 3 is not supported"},
      {"block 24", 32, 8, 4, 24, 0, 0, false, ONYX_STATUS_INVALID_ARGUMENT,
       "block_size = 24 must be a power of two"},
      {"block 8", 32, 8, 4, 8, 0, 0, false, ONYX_STATUS_INVALID_ARGUMENT, "from 16 to"},
      {"accuracy 5", 32, 8, 4, 16, 5, 0, false, ONYX_STATUS_INVALID_ARGUMENT, "accuracy_level = 5"},
      {"prepacked", 32, 8, 4, 16, 0, 1, false, ONYX_STATUS_UNSUPPORTED, "weight_prepacked = 1"},
  };
  float a[32] = {1};
  uint8_t b[8 * 2 * 8] = {0};
  float s[16] = {1};
  int64_t da[2] = {1, 32}, db[3] = {8, 2, 8}, ds[2] = {8, 2};
  onyx_tensor ta = kh_tensor(ONYX_DTYPE_FLOAT32, 2, da, a);
  onyx_tensor tb = kh_tensor(ONYX_DTYPE_UINT8, 3, db, b),
              ts = kh_tensor(ONYX_DTYPE_FLOAT32, 2, ds, s);
  const onyx_tensor *in[3] = {&ta, &tb, &ts};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    const nb_bad *x = &bad[i];
    onyx_attr at[] = {kh_attr_int("N", x->n),
                      kh_attr_int("bits", x->bits),
                      kh_attr_int("block_size", x->bs),
                      kh_attr_int("accuracy_level", x->acc),
                      kh_attr_int("weight_prepacked", x->prepacked),
                      kh_attr_int("K", x->k)};
    kh_node node = {.op = "MatMulNBits",
                    .domain = "com.microsoft",
                    .opset = 1,
                    .attrs = at,
                    .attr_count = x->drop_k ? 5 : 6};
    kh_result r;
    kh_run(&g_cpu[0], &node, in, 3, &r);
    expect_fail(&r, x->status, x->fragment);
    kh_result_free(&r);
  }
}

/* Shapes and dtypes that do not fit the attributes, named in the message. */
static void test_nbits_bad_inputs(void **st) {
  (void)st;
  const nb_case c = {2, 40, 10, 4, 16, 1, 0, false, true};
  nb_data d;
  nb_make(&c, 11, &d);
  int64_t da[2] = {2, 40}, db[3] = {10, 3, 8}, ds[2] = {10, 3}, dz[2] = {10, 2}, dbias[1] = {10};
  int64_t bad_a[2] = {2, 41}, bad_b[3] = {10, 2, 8}, bad_s[2] = {10, 2}, bad_z[2] = {10, 3};
  int64_t bad_bias[1] = {9}, gidx_d[1] = {40};
  int32_t gidx[40], gidx_trivial[40];
  for (int k = 0; k < 40; ++k) {
    gidx[k] = (k * 7) % 3;
    gidx_trivial[k] = k / 16;
  }
  onyx_tensor ta = kh_tensor(ONYX_DTYPE_FLOAT32, 2, da, d.a_in);
  onyx_tensor tb = kh_tensor(ONYX_DTYPE_UINT8, 3, db, d.b_in);
  onyx_tensor ts = kh_tensor(ONYX_DTYPE_FLOAT32, 2, ds, d.s_in);
  onyx_tensor tz = kh_tensor(ONYX_DTYPE_UINT8, 2, dz, d.zp_in);
  onyx_tensor tbias = kh_tensor(ONYX_DTYPE_FLOAT32, 1, dbias, d.bias_in);
  onyx_tensor tg = kh_tensor(ONYX_DTYPE_INT32, 1, gidx_d, gidx);
  onyx_tensor tg_ok = kh_tensor(ONYX_DTYPE_INT32, 1, gidx_d, gidx_trivial);
  struct {
    int slot;
    onyx_tensor t;
    const char *fragment;
  } bad[] = {
      {0, kh_tensor(ONYX_DTYPE_FLOAT32, 2, bad_a, d.a_in), "input 0 (A)"},
      {1, kh_tensor(ONYX_DTYPE_UINT8, 3, bad_b, d.b_in), "input 1 (B)"},
      {2, kh_tensor(ONYX_DTYPE_FLOAT32, 2, bad_s, d.s_in), "input 2 (scales)"},
      {2, kh_tensor(ONYX_DTYPE_FLOAT16, 2, ds, d.s_in), "input 2 (scales) is float16"},
      {3, kh_tensor(ONYX_DTYPE_UINT8, 2, bad_z, d.zp_in), "input 3 (zero_points) is uint8"},
      {3, kh_tensor(ONYX_DTYPE_INT8, 2, dz, d.zp_in), "input 3 (zero_points) is int8"},
      {5, kh_tensor(ONYX_DTYPE_FLOAT32, 1, bad_bias, d.bias_in), "input 5 (bias)"},
  };
  const nb_case *cc = &c;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i)
    for (int cons = 0; cons < 2; ++cons) {
      const onyx_tensor *in[6] = {&ta, &tb, &ts, &tz, NULL, &tbias};
      in[bad[i].slot] = &bad[i].t;
      const bool constants[6] = {false, true, true, true, false, false};
      kh_node node = nb_node(cc, cons ? constants : NULL);
      kh_result r;
      kh_run(&g_cpu[0], &node, in, 6, &r);
      expect_fail(&r, ONYX_STATUS_INVALID_ARGUMENT, bad[i].fragment);
      kh_result_free(&r);
    }
  /* g_idx: only the trivial map, as a constant, is accepted. */
  const bool gcons[6] = {false, false, false, false, true, false};
  const onyx_tensor *in[6] = {&ta, &tb, &ts, &tz, &tg, &tbias};
  kh_node node = nb_node(cc, gcons);
  kh_result r;
  kh_run(&g_cpu[0], &node, in, 6, &r);
  expect_fail(&r, ONYX_STATUS_UNSUPPORTED, "g_idx");
  kh_result_free(&r);
  node = nb_node(cc, NULL);
  kh_run(&g_cpu[0], &node, in, 6, &r);
  expect_fail(&r, ONYX_STATUS_UNSUPPORTED, "g_idx");
  kh_result_free(&r);
  in[4] = &tg_ok;
  node = nb_node(cc, gcons);
  kh_run(&g_cpu[0], &node, in, 6, &r);
  expect_ok(&r);
  kh_result_free(&r);
  nb_free(&d);
}

/* ------------------------------------------------------------------ GatherBlockQuantized */

/* A uint8 table of 4-bit codes [rows, cols/2] with blocks of 16 and packed zero points:
 * rows gathered, an index from the end, one out of range (zeros, as the op defines). */
static void test_gbq_uint8(void **st) {
  (void)st;
  enum { ROWS = 6, COLS = 40, BS = 16, NB = 3 };
  rng_seed(21);
  uint8_t codes[ROWS][COLS], data[ROWS][COLS / 2] = {{0}}, zp[ROWS][2] = {{0}};
  float scales[ROWS][NB];
  unsigned zpv[ROWS][NB];
  for (int r = 0; r < ROWS; ++r) {
    for (int c = 0; c < COLS; ++c) {
      codes[r][c] = (uint8_t)(rng_next() % 16);
      data[r][c / 2] |= (uint8_t)(codes[r][c] << (4 * (c % 2)));
    }
    for (int b = 0; b < NB; ++b) {
      scales[r][b] = rng_float(0.5f, 2.0f);
      zpv[r][b] = (unsigned)(rng_next() % 16);
      zp[r][b / 2] |= (uint8_t)(zpv[r][b] << (4 * (b % 2)));
    }
  }
  int64_t idx[4] = {4, -1, 6, 0}, dd[2] = {ROWS, COLS / 2}, ds[2] = {ROWS, NB}, dz[2] = {ROWS, 2};
  int64_t di[1] = {4};
  onyx_tensor td = kh_tensor(ONYX_DTYPE_UINT8, 2, dd, data),
              ti = kh_tensor(ONYX_DTYPE_INT64, 1, di, idx);
  onyx_tensor ts = kh_tensor(ONYX_DTYPE_FLOAT32, 2, ds, scales),
              tz = kh_tensor(ONYX_DTYPE_UINT8, 2, dz, zp);
  const onyx_tensor *in[4] = {&td, &ti, &ts, &tz};
  onyx_attr at[] = {kh_attr_int("block_size", BS), kh_attr_int("bits", 4)};
  kh_node node = {.op = "GatherBlockQuantized",
                  .domain = "com.microsoft",
                  .opset = 1,
                  .attrs = at,
                  .attr_count = 2};
  for (int th = 0; th < 2; ++th) {
    kh_result r;
    kh_run(&g_cpu[th], &node, in, 4, &r);
    expect_ok(&r);
    int64_t dy[2] = {4, COLS};
    expect_shape(&r.out[0], ONYX_DTYPE_FLOAT32, 2, dy);
    double want[4 * COLS];
    for (int i = 0; i < 4; ++i) {
      int64_t row = idx[i] < 0 ? idx[i] + ROWS : idx[i];
      for (int c = 0; c < COLS; ++c)
        want[i * COLS + c] =
            row >= ROWS ? 0.0 : ((double)codes[row][c] - zpv[row][c / BS]) * scales[row][c / BS];
    }
    expect_close(r.out[0].data, want, 4 * COLS, 1e-6, 1e-6);
    kh_result_free(&r);
  }
}

static void test_gbq_refusals(void **st) {
  (void)st;
  uint8_t data[4 * 16] = {0};
  float scales[4 * 2] = {1};
  int64_t idx[1] = {0}, dd[2] = {4, 16}, ds[2] = {4, 2}, bad_s[2] = {4, 3}, di[1] = {1};
  onyx_tensor td = kh_tensor(ONYX_DTYPE_UINT8, 2, dd, data),
              ti = kh_tensor(ONYX_DTYPE_INT64, 1, di, idx);
  onyx_tensor ts = kh_tensor(ONYX_DTYPE_FLOAT32, 2, ds, scales);
  onyx_tensor tbad_s = kh_tensor(ONYX_DTYPE_FLOAT32, 2, bad_s, scales);
  onyx_tensor tbad_i = kh_tensor(ONYX_DTYPE_FLOAT32, 1, di, scales);
  onyx_tensor tbad_d = kh_tensor(ONYX_DTYPE_INT8, 2, dd, data);
  struct {
    const onyx_tensor *d, *i, *s;
    int64_t gather_axis, bs;
    onyx_status status;
    const char *fragment;
  } bad[] = {
      {&td, &ti, &tbad_s, 0, 16, ONYX_STATUS_INVALID_ARGUMENT, "input 2 (scales)"},
      {&td, &tbad_i, &ts, 0, 16, ONYX_STATUS_INVALID_ARGUMENT, "input 1 (indices) is float32"},
      {&td, &ti, &ts, 1, 16, ONYX_STATUS_INVALID_ARGUMENT, "needs gather_axis 0"},
      {&td, &ti, &ts, 0, 12, ONYX_STATUS_INVALID_ARGUMENT, "block_size = 12"},
      /* int8 data is not claimed at all: placement says so */
      {&tbad_d, &ti, &ts, 0, 16, ONYX_STATUS_NOT_FOUND, "no kernel for GatherBlockQuantized"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    onyx_attr at[] = {kh_attr_int("block_size", bad[i].bs),
                      kh_attr_int("gather_axis", bad[i].gather_axis)};
    kh_node node = {.op = "GatherBlockQuantized",
                    .domain = "com.microsoft",
                    .opset = 1,
                    .attrs = at,
                    .attr_count = 2};
    const onyx_tensor *in[3] = {bad[i].d, bad[i].i, bad[i].s};
    kh_result r;
    kh_run(&g_cpu[0], &node, in, 3, &r);
    expect_fail(&r, bad[i].status, bad[i].fragment);
    kh_result_free(&r);
  }
}

/* ------------------------------------------------------------------ main */

static int group_setup(void **st) {
  (void)st;
  char err[512];
  for (int i = 0; i < 2; ++i)
    if (kh_load(&g_cpu[i], g_so_path, NULL, 0, (uint32_t)(i + 1), err, sizeof err) !=
        ONYX_STATUS_OK) {
      fprintf(stderr, "cannot load %s: %s\n", g_so_path, err);
      return -1;
    }
  return 0;
}

static int group_teardown(void **st) {
  (void)st;
  for (int i = 0; i < 2; ++i) kh_unload(&g_cpu[i]);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1) g_so_path = argv[1];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_nbits_decode_and_prefill),
      cmocka_unit_test(test_nbits_larger),
      cmocka_unit_test(test_nbits_memory),
      cmocka_unit_test(test_nbits_refusals),
      cmocka_unit_test(test_nbits_bad_inputs),
      cmocka_unit_test(test_gbq_uint8),
      cmocka_unit_test(test_gbq_refusals),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
