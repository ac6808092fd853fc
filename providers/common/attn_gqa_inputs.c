/*
 * GroupQueryAttention's run-time inputs checked once for every provider: the types
 * of the tensors beside the query, seqlens_k and total_sequence_length, the rotary
 * caches and positions, attention_bias and head_sink. The shapes of inputs 0..4 are
 * attn_params.c's; what a provider supports beyond the op (its dtypes, extra inputs)
 * stays its own. A provider that keeps seqlens_k and position_ids on its device asks
 * for the shapes alone (onyx__pc_gqa_input_shapes): their values are then its own to
 * bound.
 */
#include <stdbool.h>
#include <stdint.h>

#include "attn_params.h"
#include "pc_msg.h"

/* Every tensor that shares the query's type has it. */
static onyx_status same_types(const onyx_tensor *const *in, char *msg, size_t cap) {
  static const int idx[] = {ONYX__PC_GQA_KEY,        ONYX__PC_GQA_VALUE, ONYX__PC_GQA_PAST_KEY,
                            ONYX__PC_GQA_PAST_VALUE, ONYX__PC_GQA_COS,   ONYX__PC_GQA_SIN,
                            ONYX__PC_GQA_BIAS,       ONYX__PC_GQA_SINK};
  static const char *const name[] = {"key",       "value",     "past_key",       "past_value",
                                     "cos_cache", "sin_cache", "attention_bias", "head_sink"};
  uint32_t dt = in[ONYX__PC_GQA_QUERY]->dtype;
  for (size_t i = 0; i < sizeof idx / sizeof idx[0]; ++i) {
    const onyx_tensor *t = in[idx[i]];
    if (t != NULL && t->dtype != dt)
      return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "%s (input %d) has type %s; the query's type %s expected", name[i],
                           idx[i], onyx__pc_dtype_name(t->dtype), onyx__pc_dtype_name(dt));
  }
  return ONYX_STATUS_OK;
}

/* seqlens_k and total_sequence_length, against the past and sequence lengths. */
static onyx_status lengths(const onyx_tensor *const *in, const onyx__pc_gqa_geom *g, bool values,
                           onyx__pc_gqa_run *run, char *msg, size_t cap) {
  const onyx_tensor *seqlens_t = in[ONYX__PC_GQA_SEQLENS], *total_t = in[ONYX__PC_GQA_TOTAL];
  if (seqlens_t == NULL || total_t == NULL)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "seqlens_k (input 5) and total_sequence_length (input 6) are required");
  if (seqlens_t->dtype != ONYX_DTYPE_INT32 || seqlens_t->rank != 1 ||
      seqlens_t->dims[0] != g->batch)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "seqlens_k must be int32 (%lld), got %s %s", (long long)g->batch,
                         onyx__pc_dtype_name(seqlens_t->dtype), onyx__pc_tensor_shape(seqlens_t).s);
  if (total_t->dtype != ONYX_DTYPE_INT32 || onyx_tensor_numel(total_t) != 1)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "total_sequence_length must be an int32 scalar, got %s %s",
                         onyx__pc_dtype_name(total_t->dtype), onyx__pc_tensor_shape(total_t).s);
  /* Its value sets the present length: every provider reads it here, on the host. */
  if (total_t->device != ONYX_DEVICE_HOST)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "total_sequence_length (input 6) must be in host memory");
  const int32_t *seqlens = seqlens_t->data;
  int64_t S = g->seq, L = g->past_len, T = ((const int32_t *)total_t->data)[0];
  if (T < 1 || !(T == L + S || T <= L))
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "total_sequence_length %lld must equal past length %lld + sequence "
                         "length %lld (growing cache) or be at most the past length (shared "
                         "buffer)",
                         (long long)T, (long long)L, (long long)S);
  run->total = T;
  run->first = S == T;
  for (int64_t b = 0; values && b < g->batch; ++b) {
    int64_t total = (int64_t)seqlens[b] + 1;
    bool ok = run->first ? (total >= 1 && total <= S) : (total >= S && total <= T);
    if (!ok)
      return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "seqlens_k[%lld] = %lld gives %lld tokens, outside [%lld, %lld] for "
                           "sequence length %lld and total_sequence_length %lld",
                           (long long)b, (long long)seqlens[b], (long long)total,
                           (long long)(run->first ? 1 : S), (long long)(run->first ? S : T),
                           (long long)S, (long long)T);
  }
  return ONYX_STATUS_OK;
}

/* The rotary caches and every position read from them. */
static onyx_status rotary_inputs(const onyx_tensor *const *in, const onyx__pc_gqa_geom *g,
                                 bool values, const onyx__pc_gqa_run *run, char *msg, size_t cap) {
  const onyx_tensor *cos = in[ONYX__PC_GQA_COS], *sin = in[ONYX__PC_GQA_SIN];
  const onyx_tensor *pos = in[ONYX__PC_GQA_POS];
  int64_t B = g->batch, S = g->seq, H = g->head;
  if (cos == NULL || sin == NULL)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "do_rotary = 1 needs cos_cache (input 7) and sin_cache (input 8)");
  /* Without the positions' values, an empty cache is refused here: no position fits. */
  if (cos->rank != 2 || cos->dims[1] < 1 || 2 * cos->dims[1] > H || (!values && cos->dims[0] < 1) ||
      sin->rank != 2 || sin->dims[0] != cos->dims[0] || sin->dims[1] != cos->dims[1])
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "cos_cache %s and sin_cache %s must both be (max_position, D) with "
                         "1 <= 2*D <= head size %lld",
                         onyx__pc_tensor_shape(cos).s, onyx__pc_tensor_shape(sin).s, (long long)H);
  if (pos != NULL &&
      (pos->dtype != ONYX_DTYPE_INT64 || pos->rank != 2 || pos->dims[0] != B || pos->dims[1] != S))
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "position_ids must be int64 (%lld, %lld), got %s %s", (long long)B,
                         (long long)S, onyx__pc_dtype_name(pos->dtype),
                         onyx__pc_tensor_shape(pos).s);
  if (!values) return ONYX_STATUS_OK;
  /* ONNX Runtime reads only position_ids[0, 0] in the first prompt. */
  const int64_t *ids = pos ? pos->data : NULL;
  const int32_t *seqlens = in[ONYX__PC_GQA_SEQLENS]->data;
  int64_t bs = run->first ? 0 : S, ss = run->first ? 0 : 1, add_s = run->first ? 1 : 0;
  for (int64_t b = 0; b < B; ++b) {
    int64_t past = run->first ? 0 : (int64_t)seqlens[b] + 1 - S;
    for (int64_t s = 0; s < S; ++s) {
      int64_t p = ids != NULL ? ids[b * bs + s * ss] + s * add_s : past + s;
      if (p < 0 || p >= cos->dims[0])
        return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                             "rotary position %lld (batch %lld, token %lld) is outside the "
                             "cos/sin cache of %lld rows",
                             (long long)p, (long long)b, (long long)s, (long long)cos->dims[0]);
    }
  }
  return ONYX_STATUS_OK;
}

static onyx_status gqa_inputs(int64_t nq, bool rotary, bool values, const onyx_tensor *const *in,
                              const onyx__pc_gqa_geom *g, onyx__pc_gqa_run *run, char *msg,
                              size_t cap) {
  *run = (onyx__pc_gqa_run){0};
  onyx_status st = same_types(in, msg, cap);
  if (st == ONYX_STATUS_OK) st = lengths(in, g, values, run, msg, cap);
  if (st == ONYX_STATUS_OK && rotary) st = rotary_inputs(in, g, values, run, msg, cap);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *bias = in[ONYX__PC_GQA_BIAS], *sink = in[ONYX__PC_GQA_SINK];
  int64_t B = g->batch, S = g->seq, T = run->total;
  if (bias != NULL &&
      (bias->rank != 4 || (bias->dims[0] != 1 && bias->dims[0] != B) ||
       (bias->dims[1] != 1 && bias->dims[1] != nq) || bias->dims[2] != S || bias->dims[3] != T))
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "attention_bias must be (%lld or 1, %lld or 1, %lld, %lld), got %s",
                         (long long)B, (long long)nq, (long long)S, (long long)T,
                         onyx__pc_tensor_shape(bias).s);
  if (sink != NULL && (sink->rank != 1 || sink->dims[0] != nq))
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT, "head_sink must be (%lld), got %s",
                         (long long)nq, onyx__pc_tensor_shape(sink).s);
  return ONYX_STATUS_OK;
}

onyx_status onyx__pc_gqa_inputs(int64_t nq, bool rotary, const onyx_tensor *const *in,
                                const onyx__pc_gqa_geom *g, onyx__pc_gqa_run *run, char *msg,
                                size_t cap) {
  return gqa_inputs(nq, rotary, true, in, g, run, msg, cap);
}

onyx_status onyx__pc_gqa_input_shapes(int64_t nq, bool rotary, const onyx_tensor *const *in,
                                      const onyx__pc_gqa_geom *g, onyx__pc_gqa_run *run, char *msg,
                                      size_t cap) {
  return gqa_inputs(nq, rotary, false, in, g, run, msg, cap);
}
