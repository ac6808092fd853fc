/*
 * Private to the CPU attention kernels (providers/cpu/attention/). Nothing here crosses
 * the ABI or leaves libonyx_cpu.so.
 *
 * Files, one concern each:
 *   attn_util.c    threads, float16/bfloat16 rows, attributes, kernel state, messages
 *   attn_core.c    the attention engine shared by GroupQueryAttention and Attention:
 *                  streaming (online) softmax over key tiles, grouped query heads
 *                  processed together so each K/V row is read once per group, optional
 *                  split-K with a merge pass, qk outputs
 *   attn_rope.c    rotary rows and the two RotaryEmbedding kernels
 *   attn_gqa.c     com.microsoft GroupQueryAttention
 *   attn_onnx.c    ONNX Attention (opsets 23, 24)
 *
 * The kernels are self-contained: they depend on abi/ and on the definition of
 * onyx__cpu_provider in cpu_impl.h (read for its thread pool), and call no function of
 * the rest of the provider, so tests can link them alone.
 *
 * Memory: kernel state is allocated once at create (onyx__attn_state_new, the only
 * allocation in these files). Scratch never comes from malloc: per-task tiles live on
 * the stack (bounded: ONYX__ATTN_MAX_HEAD) and anything larger is declared as workspace.
 */
#ifndef ONYX_ATTN_IMPL_H
#define ONYX_ATTN_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "onyx_abi.h"
#include "pc_attr.h"
#include "pc_msg.h"

/* Largest head size (query/key or value) the kernels take: tiles of that many floats
 * live on each task's stack. */
#define ONYX__ATTN_MAX_HEAD 1024

/* Float types the attention kernels compute (16-bit ones accumulate in float32). */
#define ONYX__ATTN_FLOAT_TYPES                                                                     \
  (ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT32) | ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT16) |                       \
   ONYX_DTYPE_BIT(ONYX_DTYPE_BFLOAT16))

/* ------------------------------------------------------------------ threads */

/* How a kernel spreads independent items over the host's threads. parallel_for NULL
 * (or num_threads 1) runs the items in order on the calling thread. */
typedef struct onyx__attn_threads {
  void (*parallel_for)(void *host_data, size_t n, void (*fn)(void *arg, size_t i), void *arg);
  void *host_data;
  uint32_t num_threads; /* >= 1 */
} onyx__attn_threads;

/* Fills *out from the CPU provider's state (NULL: serial). */
void onyx__attn_threads_from_provider(const void *provider_state, onyx__attn_threads *out);

/* Runs fn(arg, i) for i in [0, n) on the pool when there is one, else in order. */
void onyx__attn_parallel_for(const onyx__attn_threads *t, size_t n, void (*fn)(void *arg, size_t i),
                             void *arg);

/* ------------------------------------------------------------------ kernel state */

/* The head every attention kernel state starts with. */
typedef struct onyx__attn_node {
  onyx__attn_threads threads;
  int64_t opset;
  char name[64]; /* node name, for messages at create (compute messages get it from the core) */
  size_t output_count;
  bool output_present[4]; /* outputs 0..3 named by the node */
} onyx__attn_node;

/* Allocates a zeroed state of `size` bytes and fills its head; NULL (message in err)
 * when memory runs out or the node names more than four outputs. */
void *onyx__attn_state_new(size_t size, void *provider_state, const onyx_node_info *node, char *err,
                           size_t err_cap);
void onyx__attn_state_free(void *state); /* NULL-safe */

/* ------------------------------------------------------------------ messages, attributes */

/* Messages (onyx__pc_fail into err, onyx__pc_error through ctx->set_error), shape
 * text (onyx__pc_tensor_shape) and attribute lookup come from providers/common. */

/* Typed lookups: absent → dflt; another type → INVALID_ARGUMENT naming the attribute. */
onyx_status onyx__attn_attr_int(const onyx_node_info *node, const char *name, int64_t dflt,
                                int64_t *out, char *err, size_t err_cap);
onyx_status onyx__attn_attr_float(const onyx_node_info *node, const char *name, float dflt,
                                  float *out, char *err, size_t err_cap);
/* STRING attribute compared with `expect` (absent counts as equal). */
onyx_status onyx__attn_attr_string_is(const onyx_node_info *node, const char *name,
                                      const char *expect, bool *out_equal, char *err,
                                      size_t err_cap);

/* "float32", "float16", ... for messages. */
const char *onyx__attn_dtype_name(uint32_t dtype);

/* Input i, or NULL when absent or beyond count. */
static inline const onyx_tensor *onyx__attn_input(const onyx_tensor *const *inputs, size_t count,
                                                  size_t i) {
  return i < count ? inputs[i] : NULL;
}

/* Checks that every present input is a host tensor with data and sane dims. */
onyx_status onyx__attn_check_host(onyx_compute_ctx *ctx, const onyx_tensor *const *inputs,
                                  size_t input_count);

/* infer(): output k of the given geometry (data NULL: geometry only); nothing when
 * k >= count. */
void onyx__attn_infer_out(onyx_tensor *outputs, size_t count, size_t k, uint32_t dtype,
                          uint32_t rank, const int64_t *dims);

/* Whether `dtype` is float32, float16 or bfloat16. */
static inline bool onyx__attn_is_float(uint32_t dtype) {
  return dtype < 64 && (ONYX__ATTN_FLOAT_TYPES & ONYX_DTYPE_BIT(dtype)) != 0;
}

/* ------------------------------------------------------------------ float16 / bfloat16 */

static inline float onyx__attn_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t em = h & 0x7fffu;
  uint32_t bits;
  float f;
  if (em >= 0x7c00u) {
    bits = sign | 0x7f800000u | ((em & 0x3ffu) << 13); /* inf, nan */
  } else if (em >= 0x0400u) {
    bits = sign | ((em + 0x1c000u) << 13); /* normal: rebias the exponent by 112 */
  } else {
    f = (float)em * 5.9604644775390625e-8f; /* subnormal or zero: em · 2^-24, exact */
    memcpy(&bits, &f, sizeof bits);
    bits |= sign;
  }
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* Round to nearest even; overflow gives inf, nan stays nan. */
static inline uint16_t onyx__attn_f32_to_f16(float value) {
  uint32_t x;
  memcpy(&x, &value, sizeof x);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
  if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
  if (ax < 0x38800000u) {
    /* Below the smallest normal half: adding 0.5 rounds to a multiple of 2^-24. */
    float a, t;
    memcpy(&a, &ax, sizeof a);
    t = a + 0.5f;
    uint32_t r;
    memcpy(&r, &t, sizeof r);
    return (uint16_t)(sign | (r - 0x3f000000u));
  }
  ax += 0xc8000fffu + ((ax >> 13) & 1u);
  return (uint16_t)(sign | (ax >> 13));
}

static inline float onyx__attn_bf16_to_f32(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static inline uint16_t onyx__attn_f32_to_bf16(float value) {
  uint32_t x;
  memcpy(&x, &value, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

/* Element i of a float32/float16/bfloat16 array as float32. */
static inline float onyx__attn_load(uint32_t dtype, const void *p, int64_t i) {
  switch (dtype) {
  case ONYX_DTYPE_FLOAT16:
    return onyx__attn_f16_to_f32(((const uint16_t *)p)[i]);
  case ONYX_DTYPE_BFLOAT16:
    return onyx__attn_bf16_to_f32(((const uint16_t *)p)[i]);
  default:
    return ((const float *)p)[i];
  }
}

static inline void onyx__attn_store(uint32_t dtype, void *p, int64_t i, float v) {
  switch (dtype) {
  case ONYX_DTYPE_FLOAT16:
    ((uint16_t *)p)[i] = onyx__attn_f32_to_f16(v);
    break;
  case ONYX_DTYPE_BFLOAT16:
    ((uint16_t *)p)[i] = onyx__attn_f32_to_bf16(v);
    break;
  default:
    ((float *)p)[i] = v;
    break;
  }
}

/* Branch-free float16 → float32 (exact, inf/nan kept) that vectorises in loops:
 * the half's bits shifted into a float and rescaled by 2^112 handle normals and
 * subnormals alike. */
static inline float onyx__attn_f16_to_f32_fast(uint16_t h) {
  uint32_t bits = (uint32_t)(h & 0x7fffu) << 13;
  float f;
  memcpy(&f, &bits, sizeof f);
  f *= 5.192296858534828e+33f; /* 2^112 */
  memcpy(&bits, &f, sizeof bits);
  bits |= (h & 0x7c00u) == 0x7c00u ? 0x7f800000u : 0u; /* inf, nan */
  bits |= (uint32_t)(h & 0x8000u) << 16;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* n contiguous elements at src (dtype) → float32 dst. */
static inline void onyx__attn_load_row(uint32_t dtype, const void *src, int64_t n,
                                       float *restrict dst) {
  if (dtype == ONYX_DTYPE_FLOAT16) {
    const uint16_t *restrict s = src;
    for (int64_t i = 0; i < n; ++i) dst[i] = onyx__attn_f16_to_f32_fast(s[i]);
  } else if (dtype == ONYX_DTYPE_BFLOAT16) {
    const uint16_t *restrict s = src;
    for (int64_t i = 0; i < n; ++i) {
      uint32_t bits = (uint32_t)s[i] << 16;
      memcpy(&dst[i], &bits, sizeof bits);
    }
  } else {
    memcpy(dst, src, (size_t)n * sizeof(float));
  }
}
/* n float32 values → contiguous elements of dtype at dst. */
void onyx__attn_store_row(uint32_t dtype, void *dst, int64_t n, const float *src);

/* Byte pointer to element `index` of an array of `esize`-byte elements. */
static inline const unsigned char *onyx__attn_at(const void *base, int64_t index, size_t esize) {
  return (const unsigned char *)base + (size_t)index * esize;
}
static inline unsigned char *onyx__attn_at_mut(void *base, int64_t index, size_t esize) {
  return (unsigned char *)base + (size_t)index * esize;
}

/* ------------------------------------------------------------------ rotary */

/* A rotary table: row p of cos/sin holds `half` values (rotary dim = 2·half). */
typedef struct onyx__attn_rope {
  const void *cos;
  const void *sin;
  uint32_t dtype;   /* of cos/sin */
  int64_t half;     /* rotary_dim / 2 */
  int64_t rows;     /* positions in the table (or rows of a per-token table) */
  bool interleaved; /* pairs (2i, 2i+1) instead of halves (i, i + half) */
} onyx__attn_rope;

/* Rotates the first 2·half values of the float32 row x in place with table row `row`.
 * The caller has checked 0 <= row < rope->rows. */
void onyx__attn_rope_row(const onyx__attn_rope *rope, int64_t row, float *x);

/* ------------------------------------------------------------------ attention engine */

/* What the engine writes into an optional scores output (B, Nq, Sq, qk_cols). */
typedef enum onyx__attn_qk_mode {
  ONYX__ATTN_QK_NONE = 0,
  ONYX__ATTN_QK_GQA_SCORES, /* GQA qk_output 1: scaled, softcapped, biased scores of the
                               keys a row attends to; 0 elsewhere (ONNX Runtime's layout) */
  ONYX__ATTN_QK_GQA_PROBS,  /* GQA qk_output 2: probabilities; 0 elsewhere */
  ONYX__ATTN_QK_RAW,        /* Attention mode 0: scale·QKᵀ for every key */
  ONYX__ATTN_QK_SOFTCAP,    /* Attention mode 1: after softcap, every key */
  ONYX__ATTN_QK_MASKED,     /* Attention mode 2: after the mask (−inf where masked) */
  ONYX__ATTN_QK_PROBS       /* Attention mode 3: after softmax (0 where masked) */
} onyx__attn_qk_mode;

/* One source of key/value rows: element strides per batch, kv head and row. */
typedef struct onyx__attn_kv_seg {
  const void *k;
  int64_t k_bs, k_gs, k_rs;
  const void *v;
  int64_t v_bs, v_gs, v_rs;
} onyx__attn_kv_seg;

/* Per batch row geometry, filled by the op. */
typedef struct onyx__attn_batch_geom {
  int64_t kv_len;    /* keys [0, kv_len) exist */
  int64_t key_limit; /* keys >= key_limit are masked (padding); <= kv_len */
  int64_t seg0_len;  /* keys [0, seg0_len) come from seg[0], the rest from seg[1] */
  int64_t q_pos0;    /* absolute position of query row 0; row s sits at q_pos0 + s */
  int64_t rope_pos0; /* rotary position of new token 0 when no position ids are given */
} onyx__attn_batch_geom;

typedef struct onyx__attn_problem {
  uint32_t dtype; /* of q, k, v, y */
  int64_t batch, nq, nkv, sq, hk, hv;
  float scale;
  float softcap; /* 0: off */

  /* Query element (b, s, h, d) at q[b·q_bs + s·q_ss + h·q_hs + d]; likewise y. */
  const void *q;
  int64_t q_bs, q_ss, q_hs;
  void *y;
  int64_t y_bs, y_ss, y_hs;

  onyx__attn_kv_seg seg[2];
  void (*geom)(const void *geom_arg, int64_t b, onyx__attn_batch_geom *out);
  const void *geom_arg;

  bool causal;    /* row at position p sees keys <= p */
  int64_t window; /* > 0: row at p sees keys >= p − window + 1 */

  /* Rotary, applied to query rows and to seg[1] key rows (new tokens). The position of
   * new token s of batch b is pos_ids[b·pos_bs + s·pos_ss] + s·pos_add_s when pos_ids
   * is given, else rope_pos0 + s. */
  const onyx__attn_rope *rope;
  const int64_t *pos_ids;
  int64_t pos_bs, pos_ss, pos_add_s;

  /* Additive bias (float type) or boolean mask (true keeps), element (b, h, s, j) at
   * mask[b·m_bs + h·m_hs + s·m_ss + j·m_js]; keys j >= mask_len are masked. */
  const void *mask;
  uint32_t mask_dtype;
  int64_t m_bs, m_hs, m_ss, m_js;
  int64_t mask_len; /* INT64_MAX without a length limit */

  /* Softmax sink: head_sink[h] (dtype) or 0 with smooth softmax; both off: none. */
  const void *sink;
  bool smooth;

  onyx__attn_qk_mode qk_mode;
  void *qk; /* (B, Nq, Sq, qk_cols) of dtype */
  int64_t qk_cols;

  /* Split-K partials, (B, Nq, Sq, plan.n_split, hv + 2) floats; used only when the
   * plan splits keys (then onyx__attn_partials_bytes says how many bytes). */
  float *partials;
} onyx__attn_problem;

/* How the engine will cut a problem into tasks; a pure function of geometry and the
 * thread count, shared by workspace() and compute() so that both agree. */
typedef struct onyx__attn_plan {
  int64_t lanes_heads; /* query heads of one group handled together */
  int64_t lanes_rows;  /* query rows handled together */
  int64_t head_chunks; /* ceil(group / lanes_heads) */
  int64_t row_blocks;  /* ceil(sq / lanes_rows) */
  int64_t n_split;     /* key splits (1: none) */
} onyx__attn_plan;

/* Plans a problem of this geometry; max_keys bounds the keys of any row. */
void onyx__attn_plan_make(const onyx__attn_threads *threads, int64_t batch, int64_t nq, int64_t nkv,
                          int64_t sq, int64_t hk, int64_t hv, int64_t max_keys, bool allow_split,
                          onyx__attn_plan *out);

/* Bytes of split-K partials a plan needs (0 without a split). */
uint64_t onyx__attn_partials_bytes(const onyx__attn_plan *plan, int64_t batch, int64_t nq,
                                   int64_t sq, int64_t hv);

/* Runs the problem (validated by the caller) with the plan. */
void onyx__attn_run(const onyx__attn_threads *threads, const onyx__attn_problem *p,
                    const onyx__attn_plan *plan);

#endif /* ONYX_ATTN_IMPL_H */
