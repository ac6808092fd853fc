/*
 * ONNX Attention's inputs beside the geometry of Q, K, V and the past (attn_params.c),
 * checked once for every provider: the types Q shares with K, V and the past, attn_mask
 * and how it broadcasts, nonpad_kv_seqlen. What a provider supports beyond the op (its
 * dtypes, its grid) stays its own.
 */
#include <stdbool.h>
#include <stdint.h>

#include "attn_params.h"
#include "pc_msg.h"

onyx_status onyx__pc_attn_same_types(const onyx_tensor *const *in, const char *who, char *msg,
                                     size_t cap) {
  static const int idx[] = {ONYX__PC_AT_K, ONYX__PC_AT_V, ONYX__PC_AT_PAST_K, ONYX__PC_AT_PAST_V};
  static const char *const name[] = {"K", "V", "past_key", "past_value"};
  uint32_t dt = in[ONYX__PC_AT_Q]->dtype;
  for (size_t i = 0; i < sizeof idx / sizeof idx[0]; ++i) {
    const onyx_tensor *t = in[idx[i]];
    if (t != NULL && t->dtype != dt)
      return onyx__pc_fail(msg, cap, ONYX_STATUS_UNSUPPORTED,
                           "%s has type %s; the %s needs Q, K, V and the past in one type (%s)",
                           name[i], onyx__pc_dtype_name(t->dtype), who, onyx__pc_dtype_name(dt));
  }
  return ONYX_STATUS_OK;
}

static bool at_float_type(uint32_t t) {
  return t == ONYX_DTYPE_FLOAT32 || t == ONYX_DTYPE_FLOAT16 || t == ONYX_DTYPE_BFLOAT16;
}

/* attn_mask, right-aligned onto (B, Nq, Sq, T). */
static onyx_status at_mask(int64_t opset, const onyx_tensor *mask, const onyx__pc_attn_geom *g,
                           onyx__pc_attn_mask *m, char *msg, size_t cap) {
  int64_t B = g->batch, T = g->total;
  if (mask->dtype != ONYX_DTYPE_BOOL && !at_float_type(mask->dtype))
    return onyx__pc_fail(msg, cap, ONYX_STATUS_UNSUPPORTED,
                         "attn_mask has type %s; bool, float32, float16 or bfloat16 expected",
                         onyx__pc_dtype_name(mask->dtype));
  if (mask->rank < 1 || mask->rank > 4)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "attn_mask must have rank 1 to 4, got %s", onyx__pc_tensor_shape(mask).s);
  int64_t md[4] = {1, 1, 1, 1};
  for (uint32_t i = 0; i < mask->rank; ++i) md[4 - mask->rank + i] = mask->dims[i];
  int64_t want[3] = {B, g->nq, g->sq};
  for (int i = 0; i < 3; ++i)
    if (md[i] != 1 && md[i] != want[i])
      return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "attn_mask %s does not broadcast to (%lld, %lld, %lld, %lld)",
                           onyx__pc_tensor_shape(mask).s, (long long)B, (long long)g->nq,
                           (long long)g->sq, (long long)T);
  if (md[3] == T) {
    /* the usual case */
  } else if (md[3] < T && opset >= 24) {
    m->len = md[3]; /* keys past the mask are padding (−inf) */
  } else if (md[3] == 1) {
    m->js = 0; /* broadcast along the keys */
  } else {
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "attn_mask %s: its last axis must be the %lld keys (past + new)",
                         onyx__pc_tensor_shape(mask).s, (long long)T);
  }
  m->ss = md[2] == 1 ? 0 : md[3];
  m->hs = md[1] == 1 ? 0 : md[2] * md[3];
  m->bs = md[0] == 1 ? 0 : md[1] * md[2] * md[3];
  return ONYX_STATUS_OK;
}

/* nonpad_kv_seqlen (opset 24): the valid keys of each batch row. */
static onyx_status at_nonpad(int64_t opset, const onyx_tensor *nonpad, const onyx__pc_attn_geom *g,
                             bool values, char *msg, size_t cap) {
  int64_t B = g->batch, T = g->total;
  if (opset < 24)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "nonpad_kv_seqlen (input 6) needs opset 24, the model uses %lld",
                         (long long)opset);
  if (nonpad->dtype != ONYX_DTYPE_INT64 || nonpad->rank != 1 || nonpad->dims[0] != B)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "nonpad_kv_seqlen must be int64 (%lld), got %s %s", (long long)B,
                         onyx__pc_dtype_name(nonpad->dtype), onyx__pc_tensor_shape(nonpad).s);
  if (g->past > 0)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "nonpad_kv_seqlen cannot be combined with past_key/past_value");
  const int64_t *v = nonpad->data;
  for (int64_t b = 0; values && b < B; ++b)
    if (v[b] < 0 || v[b] > T)
      return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "nonpad_kv_seqlen[%lld] = %lld is outside [0, %lld]", (long long)b,
                           (long long)v[b], (long long)T);
  return ONYX_STATUS_OK;
}

onyx_status onyx__pc_attn_inputs(int64_t opset, const onyx_tensor *const *in,
                                 const onyx__pc_attn_geom *g, bool values, onyx__pc_attn_mask *m,
                                 char *msg, size_t cap) {
  *m = (onyx__pc_attn_mask){.js = 1, .len = INT64_MAX};
  onyx_status st = ONYX_STATUS_OK;
  if (in[ONYX__PC_AT_MASK] != NULL) st = at_mask(opset, in[ONYX__PC_AT_MASK], g, m, msg, cap);
  if (st == ONYX_STATUS_OK && in[ONYX__PC_AT_NONPAD] != NULL)
    st = at_nonpad(opset, in[ONYX__PC_AT_NONPAD], g, values, msg, cap);
  return st;
}
