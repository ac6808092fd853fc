/*
 * Shape checks of GroupQueryAttention and ONNX Attention, written once: the CPU and
 * CUDA providers report the same geometry errors with the same words. Only the head
 * size limit is the provider's own (onyx__pc_head_limit).
 */
#include "attn_params.h"

#include <math.h>
#include <string.h>

#include "pc_msg.h"

/* Input order of com.microsoft GroupQueryAttention (inputs 0..4). */
enum { GQA_QUERY = 0, GQA_KEY, GQA_VALUE, GQA_PAST_KEY, GQA_PAST_VALUE };
/* Input order of ONNX Attention. */
enum { AT_Q = 0, AT_K, AT_V, AT_MASK, AT_PAST_K, AT_PAST_V };

onyx_status onyx__pc_gqa_attrs_check(const onyx__pc_gqa_attrs *a, char *msg, size_t cap) {
  const char *op = "GroupQueryAttention";
  if (a->nq <= 0 || a->nkv <= 0 || a->nq % a->nkv != 0)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_MODEL,
                         "%s: num_heads (%lld) must be a positive multiple of kv_num_heads "
                         "(%lld)",
                         op, (long long)a->nq, (long long)a->nkv);
  if (a->window == 0 || a->window < -1)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_MODEL,
                         "%s: local_window_size must be -1 or positive, got %lld", op,
                         (long long)a->window);
  if (a->causal != 0 && a->causal != 1)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_MODEL, "%s: causal must be 0 or 1, got %lld",
                         op, (long long)a->causal);
  if (a->causal == 0 && a->window != -1)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_MODEL,
                         "%s: local_window_size must be -1 when causal is 0", op);
  if (a->kv_layout != 0 && a->kv_layout != 1)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_MODEL,
                         "%s: kv_layout must be 0 (BNSH) or 1 (BSNH, seq-major), got %lld", op,
                         (long long)a->kv_layout);
  if (!(a->softcap >= 0.0f) || !(a->scale >= 0.0f) || isinf(a->scale) || isinf(a->softcap))
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_MODEL,
                         "%s: scale (%g) and softcap (%g) must be finite and not negative", op,
                         (double)a->scale, (double)a->softcap);
  return ONYX_STATUS_OK;
}

onyx_status onyx__pc_gqa_geometry(int64_t nq, int64_t nkv, const onyx_tensor *const *in,
                                  const onyx__pc_head_limit *limit, onyx__pc_gqa_geom *g, char *msg,
                                  size_t cap) {
  const onyx_tensor *q = in[GQA_QUERY], *k = in[GQA_KEY], *v = in[GQA_VALUE];
  const onyx_tensor *pk = in[GQA_PAST_KEY], *pv = in[GQA_PAST_VALUE];
  memset(g, 0, sizeof *g);
  if (q == NULL || q->rank != 3)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "query must be 3-D (batch, sequence, hidden), got %s",
                         q ? onyx__pc_tensor_shape(q).s : "nothing");
  g->batch = q->dims[0];
  g->seq = q->dims[1];
  g->hidden = q->dims[2];
  if ((k == NULL) != (v == NULL))
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "key and value must both be given or both be absent (packed QKV)");
  g->packed = k == NULL;
  int64_t heads = g->packed ? nq + 2 * nkv : nq;
  if (g->hidden % heads != 0 || g->hidden == 0)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "query width %lld is not a multiple of %lld heads%s", (long long)g->hidden,
                         (long long)heads,
                         g->packed ? " (packed: num_heads + 2*kv_num_heads)" : "");
  g->head = g->hidden / heads;
  if (g->head > limit->max)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_UNSUPPORTED,
                         "head size %lld exceeds the %s limit of %lld", (long long)g->head,
                         limit->who, (long long)limit->max);
  if (!g->packed) {
    const onyx_tensor *kv[2] = {k, v};
    for (int i = 0; i < 2; ++i)
      if (kv[i]->rank != 3 || kv[i]->dims[0] != g->batch || kv[i]->dims[1] != g->seq ||
          kv[i]->dims[2] != nkv * g->head)
        return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                             "%s must be (%lld, %lld, %lld), got %s", i ? "value" : "key",
                             (long long)g->batch, (long long)g->seq, (long long)(nkv * g->head),
                             onyx__pc_tensor_shape(kv[i]).s);
  }
  if ((pk == NULL) != (pv == NULL))
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "past_key and past_value must both be given or both be absent");
  if (pk != NULL) {
    const onyx_tensor *pp[2] = {pk, pv};
    for (int i = 0; i < 2; ++i)
      if (pp[i]->rank != 4 || pp[i]->dims[0] != g->batch || pp[i]->dims[1] != nkv ||
          pp[i]->dims[3] != g->head || pp[i]->dims[2] != pk->dims[2])
        return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                             "%s must be (%lld, %lld, L, %lld) with the same L for both, got %s",
                             i ? "past_value" : "past_key", (long long)g->batch, (long long)nkv,
                             (long long)g->head, onyx__pc_tensor_shape(pp[i]).s);
    g->past_len = pk->dims[2];
  }
  return ONYX_STATUS_OK;
}

onyx_status onyx__pc_attn_attrs_check(const onyx__pc_attn_attrs *a, char *msg, size_t cap) {
  if (a->causal != 0 && a->causal != 1)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_MODEL,
                         "Attention: is_causal must be 0 or 1, got %lld", (long long)a->causal);
  if (a->q_heads < 0 || a->kv_heads < 0 ||
      (a->q_heads > 0 && a->kv_heads > 0 && a->q_heads % a->kv_heads != 0))
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_MODEL,
                         "Attention: q_num_heads (%lld) must be a multiple of kv_num_heads "
                         "(%lld)",
                         (long long)a->q_heads, (long long)a->kv_heads);
  if (!(a->softcap >= 0.0f) || isinf(a->softcap) || !(a->scale >= 0.0f) || isinf(a->scale))
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_MODEL,
                         "Attention: scale (%g) and softcap (%g) must be finite and not negative",
                         (double)a->scale, (double)a->softcap);
  return ONYX_STATUS_OK;
}

/* Attention's head-size check: the maximum alone (min 0) or a range. */
static onyx_status attn_head_limit(const onyx__pc_head_limit *limit, int64_t hk, int64_t hv,
                                   char *msg, size_t cap) {
  if (limit->min > 0) {
    if (hk > limit->max || hv > limit->max || hk < limit->min || hv < limit->min)
      return onyx__pc_fail(msg, cap, ONYX_STATUS_UNSUPPORTED,
                           "head sizes %lld/%lld are outside the %s range %lld..%lld",
                           (long long)hk, (long long)hv, limit->who, (long long)limit->min,
                           (long long)limit->max);
  } else if (hk > limit->max || hv > limit->max) {
    return onyx__pc_fail(msg, cap, ONYX_STATUS_UNSUPPORTED,
                         "head sizes %lld/%lld exceed the %s limit of %lld", (long long)hk,
                         (long long)hv, limit->who, (long long)limit->max);
  }
  return ONYX_STATUS_OK;
}

onyx_status onyx__pc_attn_geometry(int64_t q_heads, int64_t kv_heads, const onyx_tensor *const *in,
                                   const onyx__pc_head_limit *limit, onyx__pc_attn_geom *g,
                                   char *msg, size_t cap) {
  const onyx_tensor *q = in[AT_Q], *k = in[AT_K], *v = in[AT_V];
  const onyx_tensor *pk = in[AT_PAST_K], *pv = in[AT_PAST_V];
  memset(g, 0, sizeof *g);
  if (q == NULL || k == NULL || v == NULL)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT, "Q, K and V are required");
  if (q->rank != k->rank || q->rank != v->rank || (q->rank != 3 && q->rank != 4))
    return onyx__pc_fail(
        msg, cap, ONYX_STATUS_INVALID_ARGUMENT, "Q %s, K %s and V %s must all be 4-D or all be 3-D",
        onyx__pc_tensor_shape(q).s, onyx__pc_tensor_shape(k).s, onyx__pc_tensor_shape(v).s);
  g->batch = q->dims[0];
  if (k->dims[0] != g->batch || v->dims[0] != g->batch)
    return onyx__pc_fail(
        msg, cap, ONYX_STATUS_INVALID_ARGUMENT, "Q %s, K %s and V %s disagree on the batch size",
        onyx__pc_tensor_shape(q).s, onyx__pc_tensor_shape(k).s, onyx__pc_tensor_shape(v).s);
  if (q->rank == 4) {
    g->four_d = true;
    g->nq = q->dims[1];
    g->sq = q->dims[2];
    g->hk = q->dims[3];
    g->nkv = k->dims[1];
    g->skv = k->dims[2];
    if (k->dims[3] != g->hk || v->dims[1] != g->nkv || v->dims[2] != g->skv)
      return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "K %s must be (B, Nkv, Skv, %lld) and V %s (B, Nkv, Skv, Hv)",
                           onyx__pc_tensor_shape(k).s, (long long)g->hk,
                           onyx__pc_tensor_shape(v).s);
    g->hv = v->dims[3];
  } else {
    if (q_heads <= 0 || kv_heads <= 0)
      return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "3-D inputs need the q_num_heads and kv_num_heads attributes");
    g->nq = q_heads;
    g->nkv = kv_heads;
    g->sq = q->dims[1];
    g->skv = k->dims[1];
    if (q->dims[2] % g->nq != 0 || k->dims[2] % g->nkv != 0 || v->dims[2] % g->nkv != 0 ||
        v->dims[1] != g->skv)
      return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "Q %s, K %s, V %s do not split into %lld query and %lld kv heads",
                           onyx__pc_tensor_shape(q).s, onyx__pc_tensor_shape(k).s,
                           onyx__pc_tensor_shape(v).s, (long long)g->nq, (long long)g->nkv);
    g->hk = q->dims[2] / g->nq;
    g->hv = v->dims[2] / g->nkv;
    if (k->dims[2] / g->nkv != g->hk)
      return onyx__pc_fail(
          msg, cap, ONYX_STATUS_INVALID_ARGUMENT, "K %s head size differs from Q %s head size %lld",
          onyx__pc_tensor_shape(k).s, onyx__pc_tensor_shape(q).s, (long long)g->hk);
  }
  if (g->nkv <= 0 || g->nq % g->nkv != 0)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "query heads %lld must be a positive multiple of kv heads %lld",
                         (long long)g->nq, (long long)g->nkv);
  onyx_status status = attn_head_limit(limit, g->hk, g->hv, msg, cap);
  if (status != ONYX_STATUS_OK) return status;
  if ((pk == NULL) != (pv == NULL))
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "past_key and past_value must both be given or both be absent");
  if (pk != NULL) {
    if (pk->rank != 4 || pk->dims[0] != g->batch || pk->dims[1] != g->nkv || pk->dims[3] != g->hk ||
        pv->rank != 4 || pv->dims[0] != g->batch || pv->dims[1] != g->nkv ||
        pv->dims[2] != pk->dims[2] || pv->dims[3] != g->hv)
      return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "past_key %s must be (%lld, %lld, P, %lld) and past_value %s "
                           "(%lld, %lld, P, %lld)",
                           onyx__pc_tensor_shape(pk).s, (long long)g->batch, (long long)g->nkv,
                           (long long)g->hk, onyx__pc_tensor_shape(pv).s, (long long)g->batch,
                           (long long)g->nkv, (long long)g->hv);
    g->past = pk->dims[2];
  }
  g->total = g->past + g->skv;
  return ONYX_STATUS_OK;
}
