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

/* ------------------------------------------------------------------ ONNX Attention */

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

#ifdef __cplusplus
}
#endif

#endif /* ONYX_PC_ATTN_PARAMS_H */
