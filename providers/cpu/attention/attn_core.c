/*
 * The attention engine behind GroupQueryAttention and Attention.
 *
 * Why it is shaped this way:
 * - Decode is memory-bound: a step reads every K and V row once. So a task owns one
 *   (batch, kv head) pair and handles all the query heads of that group together
 *   ("lanes"): each K/V row is loaded (and, for 16-bit types, widened) once and used
 *   by every lane. KV repeats are never materialised.
 * - Softmax is streamed (online): per lane a running max m, a running denominator l
 *   and an unnormalised accumulator acc[Hv], rescaled when the max grows. Scores of a
 *   tile of keys live on the stack, so no route needs an S×T scores buffer and decode
 *   needs no workspace at all.
 * - When there are fewer (batch, kv head, row block) tasks than threads and the rows
 *   are long, the key range is split; each split writes (m, l, acc) partials to a
 *   workspace region and a merge pass combines them.
 * - Q and Y are addressed through strides, so (B, S, N·H), (B, N, S, H) and packed QKV
 *   are read in place: no transposes, no staging. The KV layout (BNSH or seq-major
 *   BSNH) is only a stride too.
 * - The inner products are small register-blocked kernels on 8-float vectors (four
 *   lanes × one or two keys for Q·Kᵀ, four lanes × 16 values for P·V), exp is a
 *   polynomial that vectorises, and the task is compiled three times (baseline,
 *   AVX2+FMA, AVX-512) with the widest the CPU has picked at run time. Auto-vectorised
 *   scalar loops were tried first: GCC -O2/-O3 left them scalar or latency-bound.
 * - Decode value rows are copied into an L1 tile in address order before P·V walks
 *   them column-wise; with many query rows (prefill) they are cache-resident and read
 *   in place.
 */
#include <math.h>

#include "attn_impl.h"

#define ATTN_KT 64                   /* most keys per tile */
#define ATTN_TILE_FLOATS 4096        /* widened K (and V) rows of one tile, in floats */
#define ATTN_LANES 16                /* most (row, head) lanes per task */
#define ATTN_LANE_FLOATS 4096        /* float budget for the lanes' q rows (and again for acc) */
#define ATTN_SPLIT_MIN_KEYS 256      /* a key split covers at least this many keys */
#define ATTN_STREAM_BYTES (24 << 20) /* KV bytes of a step beyond which it streams from memory */

_Static_assert(ATTN_LANE_FLOATS >= ONYX__ATTN_MAX_HEAD, "one lane must fit the largest head");
_Static_assert(ATTN_TILE_FLOATS >= ONYX__ATTN_MAX_HEAD, "one key row must fit a tile");

/* The hot helpers are inlined into the task body, which is compiled once per ISA level
 * (see attn_task below), so they must always inline. */
#if defined(__GNUC__)
#define ATTN_INLINE static inline __attribute__((always_inline))
#else
#define ATTN_INLINE static inline
#endif

/* ------------------------------------------------------------------ vector kernels */

/*
 * The micro-kernels use GCC/Clang vector extensions (8 floats), which the compiler
 * lowers to two SSE operations on baseline x86-64, one AVX operation in the AVX2 and
 * AVX-512 builds of the task (see attn_task), and NEON pairs on AArch64. The arithmetic
 * order is the same everywhere, so every ISA gives bit-identical results; plain loops
 * stand in for other compilers. Loads and stores go through memcpy (no alignment or
 * aliasing assumptions). Each kernel keeps eight independent accumulator chains so
 * that it is bound by throughput, not by the latency of one chain of additions.
 */
#if defined(__GNUC__) && !defined(ONYX_ATTN_NO_VEC)
#define ATTN_VEC 1
typedef float attn_v8 __attribute__((vector_size(32)));
typedef int32_t attn_i8 __attribute__((vector_size(32)));

/* Macros rather than functions: a function returning a 32-byte vector changes the
 * psABI between the baseline and AVX builds (GCC warns). */
#define ATTN_LD(dst, src) memcpy(&(dst), (src), sizeof(attn_v8))
#define ATTN_ST(dst, src) memcpy((dst), &(src), sizeof(attn_v8))
#define ATTN_VSUM(a)                                                                               \
  ((((a)[0] + (a)[4]) + ((a)[1] + (a)[5])) + (((a)[2] + (a)[6]) + ((a)[3] + (a)[7])))
#endif

/* n elements of dtype at src → float32 at dst; float16 and bfloat16 are widened 8 at a
 * time with integer vector operations (exact, as onyx__attn_f16_to_f32_fast). */
ATTN_INLINE void attn_widen(uint32_t dtype, const void *src, int64_t n, float *restrict dst) {
#if defined(ATTN_VEC)
  typedef uint16_t attn_h8 __attribute__((vector_size(16)));
  typedef uint32_t attn_u8 __attribute__((vector_size(32)));
  if (dtype == ONYX_DTYPE_FLOAT16 || dtype == ONYX_DTYPE_BFLOAT16) {
    const uint16_t *h = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      attn_h8 hv;
      memcpy(&hv, h + i, sizeof hv);
      attn_u8 x = __builtin_convertvector(hv, attn_u8), out;
      if (dtype == ONYX_DTYPE_BFLOAT16) {
        out = x << 16;
      } else {
        attn_v8 f = (attn_v8)((x & 0x7fffu) << 13) * 5.192296858534828e+33f; /* 2^112 */
        out = (attn_u8)f | ((attn_u8)((x & 0x7c00u) == 0x7c00u) & 0x7f800000u) |
              ((x & 0x8000u) << 16);
      }
      memcpy(dst + i, &out, sizeof out);
    }
    for (; i < n; ++i) dst[i] = onyx__attn_load(dtype, h, i);
    return;
  }
#endif
  onyx__attn_load_row(dtype, src, n, dst);
}

#if !defined(ATTN_VEC)
ATTN_INLINE float attn_hsum8(const float *a) {
  return ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
}
#endif

ATTN_INLINE float attn_dot(const float *restrict a, const float *restrict b, int64_t n) {
  int64_t i = 0;
  float t = 0.0f;
#if defined(ATTN_VEC)
  attn_v8 s0 = {0}, s1 = {0}, s2 = {0}, s3 = {0}, x, y;
  for (; i + 32 <= n; i += 32) {
    ATTN_LD(x, a + i), ATTN_LD(y, b + i), s0 += x * y;
    ATTN_LD(x, a + i + 8), ATTN_LD(y, b + i + 8), s1 += x * y;
    ATTN_LD(x, a + i + 16), ATTN_LD(y, b + i + 16), s2 += x * y;
    ATTN_LD(x, a + i + 24), ATTN_LD(y, b + i + 24), s3 += x * y;
  }
  for (; i + 8 <= n; i += 8) ATTN_LD(x, a + i), ATTN_LD(y, b + i), s0 += x * y;
  for (; i < n; ++i) t += a[i] * b[i];
  s0 = (s0 + s1) + (s2 + s3);
  return t + ATTN_VSUM(s0);
#else
  float s[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) s[k] += a[i + k] * b[i + k];
  for (; i < n; ++i) t += a[i] * b[i];
  return t + attn_hsum8(s);
#endif
}

/* out[l] = q_l · k for four lanes whose rows are n floats apart in q: one pass over k
 * feeds the four lanes, two accumulators each. */
ATTN_INLINE void attn_dot4(const float *restrict q, const float *restrict k, int64_t n,
                           float *restrict out) {
  const float *q0 = q, *q1 = q + n, *q2 = q + 2 * n, *q3 = q + 3 * n;
#if defined(ATTN_VEC)
  int64_t i = 0;
  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
  attn_v8 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, b0 = {0}, b1 = {0}, b2 = {0}, b3 = {0};
  attn_v8 kv, x;
  for (; i + 16 <= n; i += 16) {
    ATTN_LD(kv, k + i);
    ATTN_LD(x, q0 + i), a0 += x * kv;
    ATTN_LD(x, q1 + i), a1 += x * kv;
    ATTN_LD(x, q2 + i), a2 += x * kv;
    ATTN_LD(x, q3 + i), a3 += x * kv;
    ATTN_LD(kv, k + i + 8);
    ATTN_LD(x, q0 + i + 8), b0 += x * kv;
    ATTN_LD(x, q1 + i + 8), b1 += x * kv;
    ATTN_LD(x, q2 + i + 8), b2 += x * kv;
    ATTN_LD(x, q3 + i + 8), b3 += x * kv;
  }
  if (i + 8 <= n) {
    ATTN_LD(kv, k + i);
    ATTN_LD(x, q0 + i), a0 += x * kv;
    ATTN_LD(x, q1 + i), a1 += x * kv;
    ATTN_LD(x, q2 + i), a2 += x * kv;
    ATTN_LD(x, q3 + i), a3 += x * kv;
    i += 8;
  }
  for (; i < n; ++i) {
    s0 += q0[i] * k[i];
    s1 += q1[i] * k[i];
    s2 += q2[i] * k[i];
    s3 += q3[i] * k[i];
  }
  a0 += b0, a1 += b1, a2 += b2, a3 += b3;
  out[0] = s0 + ATTN_VSUM(a0);
  out[1] = s1 + ATTN_VSUM(a1);
  out[2] = s2 + ATTN_VSUM(a2);
  out[3] = s3 + ATTN_VSUM(a3);
#else
  out[0] = attn_dot(q0, k, n);
  out[1] = attn_dot(q1, k, n);
  out[2] = attn_dot(q2, k, n);
  out[3] = attn_dot(q3, k, n);
#endif
}

/* Scores of four lanes against two keys at once: the eight products share each loaded
 * query chunk between the two keys (out0/out1 get the four lanes' dots). */
ATTN_INLINE void attn_dot4x2(const float *restrict q, const float *restrict k0,
                             const float *restrict k1, int64_t n, float *restrict out0,
                             float *restrict out1) {
#if defined(ATTN_VEC)
  const float *q0 = q, *q1 = q + n, *q2 = q + 2 * n, *q3 = q + 3 * n;
  attn_v8 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, b0 = {0}, b1 = {0}, b2 = {0}, b3 = {0};
  attn_v8 x, y, z;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    ATTN_LD(x, k0 + i);
    ATTN_LD(y, k1 + i);
    ATTN_LD(z, q0 + i), a0 += z * x, b0 += z * y;
    ATTN_LD(z, q1 + i), a1 += z * x, b1 += z * y;
    ATTN_LD(z, q2 + i), a2 += z * x, b2 += z * y;
    ATTN_LD(z, q3 + i), a3 += z * x, b3 += z * y;
  }
  float t[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  for (; i < n; ++i)
    for (int l = 0; l < 4; ++l) {
      t[l] += q[l * n + i] * k0[i];
      t[4 + l] += q[l * n + i] * k1[i];
    }
  out0[0] = t[0] + ATTN_VSUM(a0), out1[0] = t[4] + ATTN_VSUM(b0);
  out0[1] = t[1] + ATTN_VSUM(a1), out1[1] = t[5] + ATTN_VSUM(b1);
  out0[2] = t[2] + ATTN_VSUM(a2), out1[2] = t[6] + ATTN_VSUM(b2);
  out0[3] = t[3] + ATTN_VSUM(a3), out1[3] = t[7] + ATTN_VSUM(b3);
#else
  attn_dot4(q, k0, n, out0);
  attn_dot4(q, k1, n, out1);
#endif
}

/* acc_l += Σ_j p_l[j] · v_j for four lanes (acc rows n apart, p rows ps apart): each V
 * chunk is loaded once for the four lanes and the accumulators stay in registers over
 * the tile's keys. */
ATTN_INLINE void attn_pv4(float *restrict acc, int64_t n, const float *restrict p, int64_t ps,
                          const float *const *vp, int64_t nk) {
  int64_t d = 0;
#if defined(ATTN_VEC)
  float *c0 = acc, *c1 = acc + n, *c2 = acc + 2 * n, *c3 = acc + 3 * n;
  const float *p0 = p, *p1 = p + ps, *p2 = p + 2 * ps, *p3 = p + 3 * ps;
  for (; d + 16 <= n; d += 16) {
    attn_v8 a0, a1, a2, a3, b0, b1, b2, b3, v, w;
    ATTN_LD(a0, c0 + d), ATTN_LD(a1, c1 + d), ATTN_LD(a2, c2 + d), ATTN_LD(a3, c3 + d);
    ATTN_LD(b0, c0 + d + 8), ATTN_LD(b1, c1 + d + 8), ATTN_LD(b2, c2 + d + 8);
    ATTN_LD(b3, c3 + d + 8);
    for (int64_t j = 0; j < nk; ++j) {
      ATTN_LD(v, vp[j] + d);
      ATTN_LD(w, vp[j] + d + 8);
      a0 += v * p0[j], b0 += w * p0[j];
      a1 += v * p1[j], b1 += w * p1[j];
      a2 += v * p2[j], b2 += w * p2[j];
      a3 += v * p3[j], b3 += w * p3[j];
    }
    ATTN_ST(c0 + d, a0), ATTN_ST(c1 + d, a1), ATTN_ST(c2 + d, a2), ATTN_ST(c3 + d, a3);
    ATTN_ST(c0 + d + 8, b0), ATTN_ST(c1 + d + 8, b1), ATTN_ST(c2 + d + 8, b2);
    ATTN_ST(c3 + d + 8, b3);
  }
#endif
  for (; d < n; ++d)
    for (int64_t j = 0; j < nk; ++j) {
      float v = vp[j][d];
      acc[d] += p[j] * v;
      acc[n + d] += p[ps + j] * v;
      acc[2 * n + d] += p[2 * ps + j] * v;
      acc[3 * n + d] += p[3 * ps + j] * v;
    }
}

/* The same for one lane, 32 values of acc at a time. */
ATTN_INLINE void attn_pv1(float *restrict acc, int64_t n, const float *restrict p,
                          const float *const *vp, int64_t nk) {
  int64_t d = 0;
#if defined(ATTN_VEC)
  for (; d + 32 <= n; d += 32) {
    attn_v8 a0, a1, a2, a3, v;
    ATTN_LD(a0, acc + d), ATTN_LD(a1, acc + d + 8), ATTN_LD(a2, acc + d + 16);
    ATTN_LD(a3, acc + d + 24);
    for (int64_t j = 0; j < nk; ++j) {
      const float *vr = vp[j] + d;
      ATTN_LD(v, vr), a0 += v * p[j];
      ATTN_LD(v, vr + 8), a1 += v * p[j];
      ATTN_LD(v, vr + 16), a2 += v * p[j];
      ATTN_LD(v, vr + 24), a3 += v * p[j];
    }
    ATTN_ST(acc + d, a0), ATTN_ST(acc + d + 8, a1), ATTN_ST(acc + d + 16, a2);
    ATTN_ST(acc + d + 24, a3);
  }
  for (; d + 8 <= n; d += 8) {
    attn_v8 a0, v;
    ATTN_LD(a0, acc + d);
    for (int64_t j = 0; j < nk; ++j) ATTN_LD(v, vp[j] + d), a0 += v * p[j];
    ATTN_ST(acc + d, a0);
  }
#endif
  for (; d < n; ++d)
    for (int64_t j = 0; j < nk; ++j) acc[d] += p[j] * vp[j][d];
}

ATTN_INLINE void attn_axpy(float *restrict y, float a, const float *restrict x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

ATTN_INLINE void attn_scale(float *restrict y, float a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] *= a;
}

/* exp(v) for v <= 0 without a libm call: Cody–Waite reduction by ln 2 and a degree-6
 * polynomial (about 1 ulp); exp(−inf) = 0 and anything below −87 gives 0. */
#define ATTN_EXP_C1 1.9875691500e-4f
#define ATTN_EXP_C2 1.3981999507e-3f
#define ATTN_EXP_C3 8.3334519073e-3f
#define ATTN_EXP_C4 4.1665795894e-2f
#define ATTN_EXP_C5 1.6666665459e-1f
#define ATTN_EXP_C6 5.0000001201e-1f

ATTN_INLINE float attn_exp(float v) {
  float x = v < -87.0f ? -87.0f : v;
  float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round(x / ln 2) */
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float q = ATTN_EXP_C1;
  q = q * r + ATTN_EXP_C2;
  q = q * r + ATTN_EXP_C3;
  q = q * r + ATTN_EXP_C4;
  q = q * r + ATTN_EXP_C5;
  q = q * r + ATTN_EXP_C6;
  q = q * r * r + r + 1.0f;
  uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
  float scale;
  memcpy(&scale, &bits, sizeof scale);
  return v < -87.0f ? 0.0f : q * scale;
}

/* row[j] = exp(row[j] − m) (0 where row[j] is −inf); returns the sum. */
ATTN_INLINE float attn_exp_row(float *restrict row, int64_t n, float m) {
  int64_t j = 0;
  float t = 0.0f;
#if defined(ATTN_VEC)
  attn_v8 sum = {0};
  for (; j + 8 <= n; j += 8) {
    attn_v8 v, x, nn, r, q, sc;
    ATTN_LD(v, row + j);
    v -= m;
    attn_i8 low = v < -87.0f;
    x = (attn_v8)((low & (attn_i8)((attn_v8){0} - 87.0f)) | (~low & (attn_i8)v));
    nn = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    r = x - nn * 0.693359375f;
    r = r - nn * -2.12194440e-4f;
    q = r * ATTN_EXP_C1 + ATTN_EXP_C2;
    q = q * r + ATTN_EXP_C3;
    q = q * r + ATTN_EXP_C4;
    q = q * r + ATTN_EXP_C5;
    q = q * r + ATTN_EXP_C6;
    q = q * r * r + r + 1.0f;
    attn_i8 e = (__builtin_convertvector(nn, attn_i8) + 127) << 23;
    sc = (attn_v8)e;
    q = (attn_v8)(~low & (attn_i8)(q * sc));
    ATTN_ST(row + j, q);
    sum += q;
  }
  t = ATTN_VSUM(sum);
#endif
  for (; j < n; ++j) {
    row[j] = attn_exp(row[j] - m);
    t += row[j];
  }
  return t;
}

/* The largest value of row[0, n) (−inf when empty or all −inf). */
ATTN_INLINE float attn_row_max(const float *restrict row, int64_t n) {
  int64_t j = 0;
  float m = -INFINITY;
#if defined(ATTN_VEC)
  if (n >= 8) {
    attn_v8 mv, v;
    ATTN_LD(mv, row);
    for (j = 8; j + 8 <= n; j += 8) {
      ATTN_LD(v, row + j);
      attn_i8 gt = v > mv;
      mv = (attn_v8)((gt & (attn_i8)v) | (~gt & (attn_i8)mv));
    }
    for (int k = 0; k < 8; ++k) m = mv[k] > m ? mv[k] : m;
  }
#endif
  for (; j < n; ++j) m = row[j] > m ? row[j] : m;
  return m;
}

/* ------------------------------------------------------------------ plan */

void onyx__attn_plan_make(const onyx__attn_threads *threads, int64_t batch, int64_t nq, int64_t nkv,
                          int64_t sq, int64_t hk, int64_t hv, int64_t max_keys, bool allow_split,
                          onyx__attn_plan *out) {
  int64_t group = nkv > 0 ? nq / nkv : 1;
  if (group < 1) group = 1;
  int64_t hmax = hk > hv ? hk : hv;
  if (hmax < 1) hmax = 1;
  int64_t lanes = ATTN_LANE_FLOATS / hmax;
  if (lanes > ATTN_LANES) lanes = ATTN_LANES;
  if (lanes < 1) lanes = 1;
  out->lanes_heads = group < lanes ? group : lanes;
  int64_t rows = lanes / out->lanes_heads;
  if (rows > sq) rows = sq;
  if (rows < 1) rows = 1;
  out->lanes_rows = rows;
  out->head_chunks = (group + out->lanes_heads - 1) / out->lanes_heads;
  out->row_blocks = sq > 0 ? (sq + rows - 1) / rows : 0;
  out->n_split = 1;
  if (allow_split && threads != NULL && threads->parallel_for != NULL && threads->num_threads > 1) {
    int64_t tasks = batch * nkv * out->head_chunks * out->row_blocks;
    int64_t nt = (int64_t)threads->num_threads;
    if (tasks > 0 && tasks < nt && max_keys >= 2 * ATTN_SPLIT_MIN_KEYS) {
      int64_t want = (nt + tasks - 1) / tasks;
      int64_t cap = max_keys / ATTN_SPLIT_MIN_KEYS;
      out->n_split = want < cap ? want : cap;
      if (out->n_split < 1) out->n_split = 1;
    }
  }
}

uint64_t onyx__attn_partials_bytes(const onyx__attn_plan *plan, int64_t batch, int64_t nq,
                                   int64_t sq, int64_t hv) {
  if (plan->n_split <= 1) return 0;
  return (uint64_t)batch * (uint64_t)nq * (uint64_t)sq * (uint64_t)plan->n_split *
         (uint64_t)(hv + 2) * sizeof(float);
}

/* ------------------------------------------------------------------ rows */

typedef struct attn_ctx {
  const onyx__attn_problem *p;
  const onyx__attn_plan *plan;
  int64_t group;
  int64_t kt; /* keys per tile */
  size_t esize;
} attn_ctx;

ATTN_INLINE int64_t attn_pos(const onyx__attn_problem *p, int64_t b,
                             const onyx__attn_batch_geom *geom, int64_t s) {
  if (p->pos_ids != NULL) return p->pos_ids[b * p->pos_bs + s * p->pos_ss] + s * p->pos_add_s;
  return geom->rope_pos0 + s;
}

/* The bytes of key (which = 0) or value (1) row `row` of segment sg. */
ATTN_INLINE const unsigned char *attn_kv_src(const attn_ctx *c, int which, int64_t b, int64_t g,
                                             const onyx__attn_kv_seg *sg, int64_t row) {
  if (which == 0)
    return onyx__attn_at(sg->k, b * sg->k_bs + g * sg->k_gs + row * sg->k_rs, c->esize);
  return onyx__attn_at(sg->v, b * sg->v_bs + g * sg->v_gs + row * sg->v_rs, c->esize);
}

/* Asks for key and value rows [j, j + n) ∩ [0, to) of (b, g) ahead of use. Decode reads
 * every KV row once from memory, and the hardware prefetcher alone keeps too few lines
 * in flight to reach the memory bandwidth: each task scores a tile that is already
 * (mostly) in cache while the next tile's lines are on their way. */
ATTN_INLINE void attn_kv_prefetch(const attn_ctx *c, int64_t b, int64_t g,
                                  const onyx__attn_batch_geom *geom, int64_t j, int64_t n,
                                  int64_t to) {
#if defined(__GNUC__)
  const onyx__attn_problem *p = c->p;
  int64_t kb = p->hk * (int64_t)c->esize, vb = p->hv * (int64_t)c->esize;
  for (int64_t jj = j; jj < j + n && jj < to; ++jj) {
    const onyx__attn_kv_seg *sg = &p->seg[0];
    int64_t row = jj;
    if (jj >= geom->seg0_len) {
      sg = &p->seg[1];
      row = jj - geom->seg0_len;
    }
    const unsigned char *k = attn_kv_src(c, 0, b, g, sg, row);
    const unsigned char *v = attn_kv_src(c, 1, b, g, sg, row);
    for (int64_t o = 0; o < kb; o += 64) __builtin_prefetch(k + o, 0, 3);
    for (int64_t o = 0; o < vb; o += 64) __builtin_prefetch(v + o, 0, 3);
  }
#else
  (void)c, (void)b, (void)g, (void)geom, (void)j, (void)n, (void)to;
#endif
}

/* Key (which = 0) or value (1) row j of (b, g) as float32: a pointer into the tensor
 * when it is float32 and needs no rotation, else widened (and rotated) into buf. */
ATTN_INLINE const float *attn_kv_row(const attn_ctx *c, int which, int64_t b, int64_t g,
                                     const onyx__attn_batch_geom *geom, int64_t j, float *buf,
                                     bool copy) {
  const onyx__attn_problem *p = c->p;
  const onyx__attn_kv_seg *sg = &p->seg[0];
  int64_t row = j;
  bool rotate = false;
  if (j >= geom->seg0_len) {
    sg = &p->seg[1];
    row = j - geom->seg0_len;
    rotate = which == 0 && p->rope != NULL;
  }
  const unsigned char *src = attn_kv_src(c, which, b, g, sg, row);
  int64_t n = which == 0 ? p->hk : p->hv;
  /* Float32 rows are read in place unless the caller asks for a copy (see attn_task). */
  if (p->dtype == ONYX_DTYPE_FLOAT32 && !rotate && !copy) return (const float *)(const void *)src;
  attn_widen(p->dtype, src, n, buf);
  if (rotate) onyx__attn_rope_row(p->rope, attn_pos(p, b, geom, row), buf);
  return buf;
}

/* The sink of head h, if the problem has one. */
static bool attn_sink(const onyx__attn_problem *p, int64_t h, float *out) {
  if (p->sink != NULL) {
    *out = onyx__attn_load(p->dtype, p->sink, h);
    return true;
  }
  if (p->smooth) {
    *out = 0.0f;
    return true;
  }
  return false;
}

/* Softmax normalisation of a finished row: p_j = exp(x_j − mm) / denom. */
typedef struct attn_norm {
  bool empty; /* no key contributed: the row is zeros */
  float mm, denom;
} attn_norm;

static attn_norm attn_norm_make(const onyx__attn_problem *p, int64_t h, float m, float l) {
  attn_norm n = {true, 0.0f, 1.0f};
  if (m == -INFINITY || !(l > 0.0f)) return n;
  float sink = 0.0f;
  bool has_sink = attn_sink(p, h, &sink);
  n.empty = false;
  n.mm = (has_sink && sink > m) ? sink : m;
  n.denom = l * expf(m - n.mm) + (has_sink ? expf(sink - n.mm) : 0.0f);
  return n;
}

/* Writes y(b, s, h) = acc · exp(m − mm) / denom; acc is clobbered. */
static void attn_finish(const attn_ctx *c, int64_t b, int64_t h, int64_t s, float m, float l,
                        float *acc) {
  const onyx__attn_problem *p = c->p;
  attn_norm n = attn_norm_make(p, h, m, l);
  if (n.empty)
    memset(acc, 0, (size_t)p->hv * sizeof(float));
  else
    attn_scale(acc, expf(m - n.mm) / n.denom, p->hv);
  unsigned char *dst = onyx__attn_at_mut(p->y, b * p->y_bs + s * p->y_ss + h * p->y_hs, c->esize);
  onyx__attn_store_row(p->dtype, dst, p->hv, acc);
}

/* ------------------------------------------------------------------ lanes */

typedef struct attn_lane {
  int64_t h, s;     /* query head and row */
  int64_t lo, hi;   /* keys [lo, hi) the row may attend to */
  int64_t mask_off; /* element offset of mask row (b, h, s) */
  float m, l;
  bool active; /* has probabilities in the current tile */
} attn_lane;

/* x plus the mask of key j of a lane (−inf where a boolean mask is false). */
ATTN_INLINE float attn_mask_add(const onyx__attn_problem *p, const attn_lane *ln, int64_t j,
                                float x) {
  if (p->mask == NULL) return x;
  int64_t at = ln->mask_off + j * p->m_js;
  if (p->mask_dtype == ONYX_DTYPE_BOOL) return ((const uint8_t *)p->mask)[at] == 0 ? -INFINITY : x;
  return x + onyx__attn_load(p->mask_dtype, p->mask, at);
}

ATTN_INLINE float attn_softcap(const onyx__attn_problem *p, float x) {
  return p->softcap > 0.0f ? p->softcap * tanhf(x / p->softcap) : x;
}

/* Score after softcap and mask, from the scaled score of key j. */
ATTN_INLINE float attn_post(const onyx__attn_problem *p, const attn_lane *ln, int64_t j, float x) {
  return attn_mask_add(p, ln, j, attn_softcap(p, x));
}

/* Writes the qk output row of a finished lane (see onyx__attn_qk_mode). */
static void attn_qk_row(const attn_ctx *c, int64_t b, int64_t g, const onyx__attn_batch_geom *geom,
                        const attn_lane *ln, const float *q, float *kbuf) {
  const onyx__attn_problem *p = c->p;
  int64_t cols = p->qk_cols;
  unsigned char *row =
      onyx__attn_at_mut(p->qk, ((b * p->nq + ln->h) * p->sq + ln->s) * cols, c->esize);
  attn_norm n = attn_norm_make(p, ln->h, ln->m, ln->l);
  bool gqa = p->qk_mode == ONYX__ATTN_QK_GQA_SCORES || p->qk_mode == ONYX__ATTN_QK_GQA_PROBS;
  for (int64_t j = 0; j < cols; ++j) {
    bool inside = j >= ln->lo && j < ln->hi;
    float out = 0.0f;
    if (gqa) {
      if (inside) {
        float x = attn_post(
            p, ln, j, attn_dot(q, attn_kv_row(c, 0, b, g, geom, j, kbuf, false), p->hk) * p->scale);
        if (p->qk_mode == ONYX__ATTN_QK_GQA_SCORES)
          out = x;
        else
          out = (n.empty || x == -INFINITY) ? 0.0f : expf(x - n.mm) / n.denom;
      }
    } else if (j < geom->kv_len) {
      float raw = attn_dot(q, attn_kv_row(c, 0, b, g, geom, j, kbuf, false), p->hk) * p->scale;
      float capped = attn_softcap(p, raw);
      float masked = inside ? attn_mask_add(p, ln, j, capped) : -INFINITY;
      switch (p->qk_mode) {
      case ONYX__ATTN_QK_RAW:
        out = raw;
        break;
      case ONYX__ATTN_QK_SOFTCAP:
        out = capped;
        break;
      case ONYX__ATTN_QK_MASKED:
        out = masked;
        break;
      default:
        out = (n.empty || masked == -INFINITY) ? 0.0f : expf(masked - n.mm) / n.denom;
        break;
      }
    } else if (p->qk_mode == ONYX__ATTN_QK_MASKED) {
      out = -INFINITY;
    }
    onyx__attn_store(p->dtype, row, j, out);
  }
}

/* One task: (batch b, kv head g, head chunk, row block, key split). Always inlined into
 * the per-ISA entry points below. */
ATTN_INLINE void attn_task_body(void *arg, size_t index) {
  const attn_ctx *c = arg;
  const onyx__attn_problem *p = c->p;
  const onyx__attn_plan *plan = c->plan;
  int64_t idx = (int64_t)index;
  int64_t split = idx % plan->n_split;
  idx /= plan->n_split;
  int64_t rb = idx % plan->row_blocks;
  idx /= plan->row_blocks;
  int64_t hc = idx % plan->head_chunks;
  idx /= plan->head_chunks;
  int64_t g = idx % p->nkv;
  int64_t b = idx / p->nkv;

  onyx__attn_batch_geom geom;
  p->geom(p->geom_arg, b, &geom);

  int64_t h0 = g * c->group + hc * plan->lanes_heads;
  int64_t nh = c->group - hc * plan->lanes_heads;
  if (nh > plan->lanes_heads) nh = plan->lanes_heads;
  int64_t s0 = rb * plan->lanes_rows;
  int64_t nr = p->sq - s0;
  if (nr > plan->lanes_rows) nr = plan->lanes_rows;
  int64_t nl = nh * nr;
  int64_t hk = p->hk, hv = p->hv, kt = c->kt;
  bool post = p->softcap > 0.0f || p->mask != NULL;
  /* With one query row (decode) every K and V row is read once. When the step's KV
   * is larger than a last-level cache it streams from memory, and copying each value
   * tile in address order (many lines in flight) before P·V walks it column-wise beats
   * walking memory column-wise; a cache-resident KV is faster read in place. With many
   * rows the tile is reused from cache and read in place. */
  bool copy_v = p->sq == 1 &&
                geom.kv_len * p->batch * p->nkv * (hk + hv) * (int64_t)c->esize > ATTN_STREAM_BYTES;

  float qbuf[ATTN_LANE_FLOATS];
  float acc[ATTN_LANE_FLOATS];
  float ktile[ATTN_TILE_FLOATS];
  float vtile[ATTN_TILE_FLOATS];
  float sc[ATTN_LANES][ATTN_KT];
  const float *kp[ATTN_KT];
  const float *vp[ATTN_KT];
  attn_lane lanes[ATTN_LANES];

  int64_t ulo = INT64_MAX, uhi = 0;
  for (int64_t r = 0; r < nr; ++r) {
    for (int64_t hh = 0; hh < nh; ++hh) {
      int64_t li = r * nh + hh;
      attn_lane *ln = &lanes[li];
      ln->h = h0 + hh;
      ln->s = s0 + r;
      float *q = qbuf + li * hk;
      const unsigned char *src =
          onyx__attn_at(p->q, b * p->q_bs + ln->s * p->q_ss + ln->h * p->q_hs, c->esize);
      attn_widen(p->dtype, src, hk, q);
      if (p->rope != NULL) onyx__attn_rope_row(p->rope, attn_pos(p, b, &geom, ln->s), q);
      int64_t pos = geom.q_pos0 + ln->s;
      int64_t hi = geom.key_limit < p->mask_len ? geom.key_limit : p->mask_len;
      if (p->causal && hi > pos + 1) hi = pos + 1;
      int64_t lo = 0;
      if (p->window > 0 && pos - p->window + 1 > lo) lo = pos - p->window + 1;
      if (hi < lo) hi = lo;
      ln->lo = lo;
      ln->hi = hi;
      ln->mask_off = b * p->m_bs + ln->h * p->m_hs + ln->s * p->m_ss;
      ln->m = -INFINITY;
      ln->l = 0.0f;
      memset(acc + li * hv, 0, (size_t)hv * sizeof(float));
      if (lo < hi) {
        if (lo < ulo) ulo = lo;
        if (hi > uhi) uhi = hi;
      }
    }
  }

  int64_t klo = 0, khi = 0;
  if (ulo < uhi) {
    int64_t piece = (uhi - ulo + plan->n_split - 1) / plan->n_split;
    klo = ulo + split * piece;
    khi = klo + piece < uhi ? klo + piece : uhi;
  }

  /* While a tile is scored, the next tile's rows are requested (decode only: with more
   * lanes than one register block the rows are reused from cache anyway). */
  int64_t pf_to = nl <= 4 ? khi : 0;
  for (int64_t j0 = klo; j0 < khi; j0 += kt) {
    int64_t jn = khi - j0 < kt ? khi - j0 : kt;
    /* Key and value rows of the tile, each read (and widened) once for all lanes. */
    for (int64_t jj = 0; jj < jn; ++jj)
      kp[jj] = attn_kv_row(c, 0, b, g, &geom, j0 + jj, ktile + jj * hk, false);
    for (int64_t jj = 0; jj < jn; ++jj)
      vp[jj] = attn_kv_row(c, 1, b, g, &geom, j0 + jj, vtile + jj * hv, copy_v);
    int64_t li = 0;
    for (; li + 4 <= nl; li += 4) {
      int64_t jj = 0;
      for (; jj + 2 <= jn; jj += 2) {
        float d0[4], d1[4];
        if (li == 0) attn_kv_prefetch(c, b, g, &geom, j0 + kt + jj, 2, pf_to);
        attn_dot4x2(qbuf + li * hk, kp[jj], kp[jj + 1], hk, d0, d1);
        for (int t = 0; t < 4; ++t) {
          sc[li + t][jj] = d0[t] * p->scale;
          sc[li + t][jj + 1] = d1[t] * p->scale;
        }
      }
      for (; jj < jn; ++jj) {
        float d4[4];
        if (li == 0) attn_kv_prefetch(c, b, g, &geom, j0 + kt + jj, 1, pf_to);
        attn_dot4(qbuf + li * hk, kp[jj], hk, d4);
        for (int t = 0; t < 4; ++t) sc[li + t][jj] = d4[t] * p->scale;
      }
    }
    for (; li < nl; ++li)
      for (int64_t jj = 0; jj < jn; ++jj) {
        if (li == 0) attn_kv_prefetch(c, b, g, &geom, j0 + kt + jj, 1, pf_to);
        sc[li][jj] = attn_dot(qbuf + li * hk, kp[jj], hk) * p->scale;
      }
    /* Range, softcap, mask, and the online softmax update per lane. */
    for (li = 0; li < nl; ++li) {
      attn_lane *ln = &lanes[li];
      float *row = sc[li];
      int64_t in_lo = ln->lo - j0, in_hi = ln->hi - j0; /* the lane's keys in this tile */
      if (in_lo < 0) in_lo = 0;
      if (in_hi > jn) in_hi = jn;
      if (in_hi < in_lo) in_hi = in_lo;
      for (int64_t jj = 0; jj < in_lo; ++jj) row[jj] = -INFINITY;
      for (int64_t jj = in_hi; jj < jn; ++jj) row[jj] = -INFINITY;
      if (post)
        for (int64_t jj = in_lo; jj < in_hi; ++jj) row[jj] = attn_post(p, ln, j0 + jj, row[jj]);
      float tmax = attn_row_max(row + in_lo, in_hi - in_lo);
      if (tmax == -INFINITY) { /* nothing in this tile for the lane */
        memset(row, 0, (size_t)jn * sizeof(float));
        continue;
      }
      if (tmax > ln->m) {
        float alpha = attn_exp(ln->m - tmax); /* 0 when m was −inf */
        ln->l *= alpha;
        attn_scale(acc + li * hv, alpha, hv);
        ln->m = tmax;
      }
      ln->l += attn_exp_row(row, jn, ln->m);
    }
    /* P·V: each value row is read once for all lanes. */
    for (li = 0; li + 4 <= nl; li += 4) attn_pv4(acc + li * hv, hv, sc[li], ATTN_KT, vp, jn);
    for (; li < nl; ++li) attn_pv1(acc + li * hv, hv, sc[li], vp, jn);
  }

  if (plan->n_split > 1) {
    for (int64_t li = 0; li < nl; ++li) {
      const attn_lane *ln = &lanes[li];
      float *dst =
          p->partials + (((b * p->nq + ln->h) * p->sq + ln->s) * plan->n_split + split) * (hv + 2);
      dst[0] = ln->m;
      dst[1] = ln->l;
      memcpy(dst + 2, acc + li * hv, (size_t)hv * sizeof(float));
    }
    return;
  }
  for (int64_t li = 0; li < nl; ++li) {
    const attn_lane *ln = &lanes[li];
    if (p->qk_mode != ONYX__ATTN_QK_NONE) attn_qk_row(c, b, g, &geom, ln, qbuf + li * hk, ktile);
    attn_finish(c, b, ln->h, ln->s, ln->m, ln->l, acc + li * hv);
  }
}

/* The task compiled for the baseline ISA and, on x86-64 with GCC or Clang, again for
 * AVX2+FMA and AVX-512; onyx__attn_run picks one by what the CPU supports. */
static void attn_task(void *arg, size_t index) { attn_task_body(arg, index); }

#if defined(__x86_64__) && defined(__GNUC__) && !defined(ONYX_ATTN_NO_DISPATCH)
#define ATTN_DISPATCH 1
__attribute__((target("avx2,fma,f16c"))) static void attn_task_avx2(void *arg, size_t index) {
  attn_task_body(arg, index);
}
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,f16c"))) static void
attn_task_avx512(void *arg, size_t index) {
  attn_task_body(arg, index);
}
#endif

typedef void (*attn_task_fn)(void *arg, size_t index);

static attn_task_fn attn_pick_task(void) {
#if defined(ATTN_DISPATCH)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq"))
    return attn_task_avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return attn_task_avx2;
#endif
  return attn_task;
}

/* Merges the split-K partials of every row of (b, h). */
static void attn_merge(void *arg, size_t index) {
  const attn_ctx *c = arg;
  const onyx__attn_problem *p = c->p;
  int64_t ns = c->plan->n_split, hv = p->hv;
  int64_t b = (int64_t)index / p->nq, h = (int64_t)index % p->nq;
  float acc[ONYX__ATTN_MAX_HEAD];
  for (int64_t s = 0; s < p->sq; ++s) {
    const float *part = p->partials + ((b * p->nq + h) * p->sq + s) * ns * (hv + 2);
    float m = -INFINITY;
    for (int64_t i = 0; i < ns; ++i)
      if (part[i * (hv + 2)] > m) m = part[i * (hv + 2)];
    float l = 0.0f;
    memset(acc, 0, (size_t)hv * sizeof(float));
    if (m != -INFINITY) {
      for (int64_t i = 0; i < ns; ++i) {
        const float *pi = part + i * (hv + 2);
        if (pi[0] == -INFINITY) continue;
        float w = expf(pi[0] - m);
        l += pi[1] * w;
        attn_axpy(acc, w, pi + 2, hv);
      }
    }
    attn_finish(c, b, h, s, m, l, acc);
  }
}

void onyx__attn_run(const onyx__attn_threads *threads, const onyx__attn_problem *p,
                    const onyx__attn_plan *plan) {
  attn_ctx c;
  c.p = p;
  c.plan = plan;
  c.group = p->nq / p->nkv;
  c.esize = onyx_dtype_size(p->dtype);
  int64_t hmax = p->hk > p->hv ? p->hk : p->hv;
  c.kt = hmax > 0 ? ATTN_TILE_FLOATS / hmax : ATTN_KT;
  if (c.kt > ATTN_KT) c.kt = ATTN_KT;
  if (c.kt < 1) c.kt = 1;
  size_t tasks = (size_t)(p->batch * p->nkv * plan->head_chunks * plan->row_blocks * plan->n_split);
  onyx__attn_parallel_for(threads, tasks, attn_pick_task(), &c);
  if (plan->n_split > 1)
    onyx__attn_parallel_for(threads, (size_t)(p->batch * p->nq), attn_merge, &c);
}
