/*
 * Input geometry of com.microsoft GroupQueryAttention and ONNX Attention (23, 24),
 * checked once for every provider that runs them: the CPU and CUDA providers compile
 * this source in (hidden), and so may a third-party provider. Shapes only: no data is
 * read, so workspace() and infer() can call these as well as compute().
 *
 * Inputs are passed in the operator's own order (the op schema fixes it), absent ones
 * as NULL. On failure a message goes into msg (err-style: NULL or cap 0 for none).
 */
#ifndef ONYX_PC_ATTN_PARAMS_H
#define ONYX_PC_ATTN_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onyx_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A provider's head-size limit, as its messages name it. */
typedef struct onyx__pc_head_limit {
  int64_t min;     /* 0: no lower bound (and Attention's message names the maximum only) */
  int64_t max;     /* largest head size (query/key or value) the kernels take */
  const char *who; /* "CPU kernel's", "CUDA kernels'": whose limit the message names */
} onyx__pc_head_limit;

/* ------------------------------------------------------------------ GroupQueryAttention */

/* The attributes every provider reads, as the node gives them (absent: the defaults
 * in brackets). How a provider reads them (and words a wrong type) is its own. */
typedef struct onyx__pc_gqa_attrs {
  int64_t nq, nkv;   /* num_heads, kv_num_heads (required) */
  float scale;       /* [0]: 1/sqrt(head size) */
  float softcap;     /* [0]: none */
  int64_t window;    /* local_window_size [-1]: none */
  int64_t causal;    /* [1] */
  int64_t kv_layout; /* Onyx: [0] BNSH, 1 the bytes (B, L, Nkv, H) */
} onyx__pc_gqa_attrs;

/* Checks their values: heads a positive multiple, the window -1 or positive (and -1
 * when not causal), causal and kv_layout 0 or 1, scale and softcap finite and not
 * negative. INVALID_MODEL with a message naming the attribute. */
onyx_status onyx__pc_gqa_attrs_check(const onyx__pc_gqa_attrs *a, char *msg, size_t cap);

/* Geometry of inputs 0..4 (query or packed QKV, key, value, past_key, past_value). */
typedef struct onyx__pc_gqa_geom {
  int64_t batch, seq, head, hidden; /* hidden: per-token width of the query input */
  bool packed;                      /* key and value absent: query holds Q, K and V */
  int64_t past_len;                 /* dims[2] of past_key, 0 without */
} onyx__pc_gqa_geom;

/* Checks the shapes of in[0..4] against nq query and nkv kv heads and fills *g
 * (zeroed first). Statuses: INVALID_ARGUMENT, or UNSUPPORTED past limit->max. */
onyx_status onyx__pc_gqa_geometry(int64_t nq, int64_t nkv, const onyx_tensor *const *in,
                                  const onyx__pc_head_limit *limit, onyx__pc_gqa_geom *g, char *msg,
                                  size_t cap);

/* Every input of GroupQueryAttention, in the op's order. */
enum {
  ONYX__PC_GQA_QUERY = 0,
  ONYX__PC_GQA_KEY,
  ONYX__PC_GQA_VALUE,
  ONYX__PC_GQA_PAST_KEY,
  ONYX__PC_GQA_PAST_VALUE,
  ONYX__PC_GQA_SEQLENS,
  ONYX__PC_GQA_TOTAL,
  ONYX__PC_GQA_COS,
  ONYX__PC_GQA_SIN,
  ONYX__PC_GQA_POS,
  ONYX__PC_GQA_BIAS,
  ONYX__PC_GQA_SINK,
  ONYX__PC_GQA_INPUTS
};

/* What the run-time inputs say (onyx__pc_gqa_inputs). */
typedef struct onyx__pc_gqa_run {
  int64_t total; /* total_sequence_length T */
  bool first;    /* the first prompt: sequence length == T */
} onyx__pc_gqa_run;

/* Checks the rest of GroupQueryAttention's inputs against the geometry of in[0..4]
 * (onyx__pc_gqa_geometry): every present input has the query's type; seqlens_k (int32,
 * batch) and total_sequence_length (int32 scalar) are given and consistent with the
 * past and sequence lengths; with `rotary`, cos_cache and sin_cache are (max_position,
 * D) with 1 <= 2D <= head size and every rotary position lies inside them;
 * position_ids, attention_bias and head_sink have their shapes. Reads the values of
 * seqlens_k, total_sequence_length and position_ids, so they must be host tensors
 * (total_sequence_length elsewhere is refused with a message).
 * `in` holds ONYX__PC_GQA_INPUTS entries (absent: NULL). INVALID_ARGUMENT on failure. */
onyx_status onyx__pc_gqa_inputs(int64_t nq, bool rotary, const onyx_tensor *const *in,
                                const onyx__pc_gqa_geom *g, onyx__pc_gqa_run *run, char *msg,
                                size_t cap);

/* The same checks without reading seqlens_k or position_ids, for a provider that keeps
 * them in device memory (it bounds their values itself, e.g. by clamping): their
 * dtypes and shapes are checked, total_sequence_length is still read (a host tensor),
 * and a cos/sin cache of no rows is refused since no position could be checked
 * against it. */
onyx_status onyx__pc_gqa_input_shapes(int64_t nq, bool rotary, const onyx_tensor *const *in,
                                      const onyx__pc_gqa_geom *g, onyx__pc_gqa_run *run, char *msg,
                                      size_t cap);

/* ------------------------------------------------------------------ ONNX Attention */

/* The attributes every provider reads (absent: the defaults in brackets). */
typedef struct onyx__pc_attn_attrs {
  int64_t causal;            /* is_causal [0] */
  int64_t q_heads, kv_heads; /* q_num_heads, kv_num_heads [0: absent] */
  float scale, softcap;      /* [0]: 1/sqrt(head size), none */
} onyx__pc_attn_attrs;

/* Checks their values: is_causal 0 or 1, the head counts not negative and (both given)
 * a multiple, scale and softcap finite and not negative. INVALID_MODEL with a message
 * naming the attribute. */
onyx_status onyx__pc_attn_attrs_check(const onyx__pc_attn_attrs *a, char *msg, size_t cap);

/* Geometry of inputs Q, K, V and past_key, past_value (indices 0, 1, 2, 4, 5). */
typedef struct onyx__pc_attn_geom {
  bool four_d; /* (B, N, S, H) inputs; else (B, S, N·H) */
  int64_t batch, nq, nkv, sq, skv, hk, hv, past, total;
} onyx__pc_attn_geom;

/* Checks the shapes (q_heads/kv_heads: the attributes, needed for 3-D inputs) and fills
 * *g (zeroed first). Statuses: INVALID_ARGUMENT, or UNSUPPORTED outside the limit. */
onyx_status onyx__pc_attn_geometry(int64_t q_heads, int64_t kv_heads, const onyx_tensor *const *in,
                                   const onyx__pc_head_limit *limit, onyx__pc_attn_geom *g,
                                   char *msg, size_t cap);

/* Every input of ONNX Attention, in the op's order. */
enum {
  ONYX__PC_AT_Q = 0,
  ONYX__PC_AT_K,
  ONYX__PC_AT_V,
  ONYX__PC_AT_MASK,
  ONYX__PC_AT_PAST_K,
  ONYX__PC_AT_PAST_V,
  ONYX__PC_AT_NONPAD,
  ONYX__PC_AT_INPUTS
};

/* K, V and the past have Q's type: UNSUPPORTED naming whose kernel needs that (`who`,
 * "CPU kernel"), since the op allows them to differ. */
onyx_status onyx__pc_attn_same_types(const onyx_tensor *const *in, const char *who, char *msg,
                                     size_t cap);

/* How attn_mask broadcasts onto the scores (B, Nq, Sq, T): element strides of each
 * axis (0 where it broadcasts) and the keys it covers (INT64_MAX: all of them). */
typedef struct onyx__pc_attn_mask {
  int64_t bs, hs, ss, js;
  int64_t len;
} onyx__pc_attn_mask;

/* Checks attn_mask (bool or a float type, rank 1..4, broadcasting right-aligned; opset
 * 24 lets its last axis be shorter than the keys) and nonpad_kv_seqlen (opset 24, int64
 * (B), not with a past) against the geometry and fills *m. With `values` (a host
 * tensor) every nonpad_kv_seqlen[b] must lie in [0, T]; a provider that keeps it on its
 * device bounds the values itself. UNSUPPORTED for a mask type no kernel takes, else
 * INVALID_ARGUMENT. */
onyx_status onyx__pc_attn_inputs(int64_t opset, const onyx_tensor *const *in,
                                 const onyx__pc_attn_geom *g, bool values, onyx__pc_attn_mask *m,
                                 char *msg, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* ONYX_PC_ATTN_PARAMS_H */
