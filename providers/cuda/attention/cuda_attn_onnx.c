/*
 * ONNX Attention (opsets 23 and 24) on CUDA.
 *
 * Inputs Q, K, V, attn_mask, past_key, past_value, nonpad_kv_seqlen (24). Q/K/V are all
 * 4-D (B, N, S, H) or all 3-D (B, S, N·H) with q_num_heads/kv_num_heads; query head h
 * uses kv head h / (Nq / Nkv). Semantics are those of the CPU kernel
 * (providers/cpu/attention/attn_onnx.c) and the ONNX node tests:
 * - scores = scale·QKᵀ → softcap → + mask (bool false → −inf; opset 24 pads a mask
 *   whose last axis is shorter than the keys with −inf) → softmax → ·V.
 * - is_causal: query i sees key j iff j <= i + offset, offset = past length, or
 *   nonpad_kv_seqlen[b] − Sq when that input is given (then keys >= nonpad are masked).
 * - A row whose every key is masked yields zeros.
 * - present = concat(past, new) along the sequence (BNSH).
 *
 * Routes as for GroupQueryAttention: float16/bfloat16 with Hk == Hv in {64, 80, 96,
 * 128, 256} run the tensor-core kernel (the Hopper kernel for the prefill it takes, on an
 * sm_90 device), everything else the reference kernel. The kernels read keys from
 * present when it is produced, else straight from K (no past), else from a staging
 * region (past given, present not named); without a past, the Hopper kernel reads K and
 * V where they are and writes the presents itself (at_run_fused_present). Workspace
 * (STEP):
 *   attention_splitk_partials  flash route with a key split
 *   attention_scores           reference route only
 *   attention_kv_staging       past given but present_key/present_value not both named
 * qk_matmul_output is not taken (supports() says so).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "attn_params.h"
#include "cuda_attention_kernels.h"
#include "cuda_attn_impl.h"
#include "cuda_attn_util.h"
#include "pc_factory.h"

/* Input order: the op's, as attn_params.h names it. */
enum {
  AT_Q = ONYX__PC_AT_Q,
  AT_K = ONYX__PC_AT_K,
  AT_V = ONYX__PC_AT_V,
  AT_MASK = ONYX__PC_AT_MASK,
  AT_PAST_K = ONYX__PC_AT_PAST_K,
  AT_PAST_V = ONYX__PC_AT_PAST_V,
  AT_NONPAD = ONYX__PC_AT_NONPAD,
  AT_INPUTS = ONYX__PC_AT_INPUTS
};

typedef struct at_state {
  onyx__cuda_attn_node head;
  int64_t q_heads, kv_heads; /* attributes, 0 when absent */
  bool causal;
  float scale, softcap;
} at_state;

static bool at_wants(const at_state *st, size_t out) {
  return st->head.output_count > out && st->head.output_present[out];
}

static bool at_supports(const onyx_node_info *node, char *reason, size_t cap) {
  const char *why = NULL;
  if (node->output_count > 3 && (node->output_present == NULL || node->output_present[3]))
    why = "qk_matmul_output is not supported by the CUDA kernel";
  if (why != NULL && reason != NULL && cap > 0) snprintf(reason, cap, "%s", why);
  return why == NULL;
}

static onyx_status at_create(void *provider_state, const onyx_node_info *node, void **out_state,
                             char *err, size_t err_cap) {
  (void)provider_state;
  onyx__pc_attn_attrs a = {0};
  int64_t mode = 0, prec = 0;
  onyx_status st;
  if ((st = onyx__pc_attr_read_int(node, "is_causal", 0, &a.causal, err, err_cap)) ||
      (st = onyx__pc_attr_read_int(node, "q_num_heads", 0, &a.q_heads, err, err_cap)) ||
      (st = onyx__pc_attr_read_int(node, "kv_num_heads", 0, &a.kv_heads, err, err_cap)) ||
      (st = onyx__pc_attr_read_int(node, "qk_matmul_output_mode", 0, &mode, err, err_cap)) ||
      (st = onyx__pc_attr_read_int(node, "softmax_precision", 0, &prec, err, err_cap)) ||
      (st = onyx__pc_attr_read_float(node, "scale", 0.0f, &a.scale, err, err_cap)) ||
      (st = onyx__pc_attr_read_float(node, "softcap", 0.0f, &a.softcap, err, err_cap)))
    return st;
  char why[128];
  if (!at_supports(node, why, sizeof why))
    return onyx__pc_fail(err, err_cap, ONYX_STATUS_UNSUPPORTED, "Attention: %s", why);
  if ((st = onyx__pc_attn_attrs_check(&a, err, err_cap)) != ONYX_STATUS_OK) return st;
  if (node->output_count < 1 || (node->output_present != NULL && !node->output_present[0]))
    return onyx__pc_fail(err, err_cap, ONYX_STATUS_INVALID_MODEL,
                         "Attention: output 0 (Y) must be named");
  at_state *s = onyx__cuda_attn_state_new(sizeof *s, node, "Attention", err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  s->q_heads = a.q_heads;
  s->kv_heads = a.kv_heads;
  s->causal = a.causal != 0;
  s->scale = a.scale;
  s->softcap = a.softcap;
  *out_state = s;
  return ONYX_STATUS_OK;
}

/* ------------------------------------------------------------------ geometry */

/* Input geometry: checked in providers/common/attn_params.c, shared with the CPU. */
typedef onyx__pc_attn_geom at_geom;

static const onyx__pc_head_limit at_head_limit = {1, ONYX__CUDA_ATTN_REF_MAX_HEAD, "CUDA kernels'"};

static onyx_status at_geometry(const at_state *st, const onyx_tensor *const *in, at_geom *g,
                               char *msg, size_t cap) {
  return onyx__pc_attn_geometry(st->q_heads, st->kv_heads, in, &at_head_limit, g, msg, cap);
}

/* Whether keys must be staged: a past is given and the presents are not both produced. */
static bool at_staged(const at_state *st, const at_geom *g) {
  return g->past > 0 && !(at_wants(st, 1) && at_wants(st, 2));
}

static uint64_t at_staging_bytes(const at_state *st, const at_geom *g, uint32_t dtype) {
  if (!at_staged(st, g)) return 0;
  return (uint64_t)g->batch * (uint64_t)g->nkv * (uint64_t)g->total * (uint64_t)(g->hk + g->hv) *
         onyx_dtype_size(dtype);
}

/* Input views of a planning call (undefined dtype: absent). */
static void at_planning_inputs(const onyx_tensor *inputs, size_t input_count,
                               const onyx_tensor **in) {
  for (size_t i = 0; i < AT_INPUTS; ++i)
    in[i] = i < input_count && inputs[i].dtype != ONYX_DTYPE_UNDEFINED ? &inputs[i] : NULL;
}

/* v3 (err may be NULL: the v2 entry). */
static onyx_status at_workspace3(void *state, const onyx_tensor *inputs, size_t input_count,
                                 onyx_workspace_requirement *out_req, onyx_sink *err) {
  const at_state *st = state;
  const onyx_tensor *in[AT_INPUTS];
  at_planning_inputs(inputs, input_count, in);
  out_req->count = 0;
  at_geom g;
  char msg[512];
  /* Invalid geometry needs no workspace (OK, so the reason is only informative);
   * compute() reports it. */
  if (at_geometry(st, in, &g, msg, sizeof msg) != ONYX_STATUS_OK)
    return onyx__pc_sink_fail(err, ONYX_STATUS_OK, "Attention: %s", msg);
  uint32_t dt = in[AT_Q]->dtype;
  onyx__cuda_attn_plan plan;
  onyx__cuda_attn_plan_make(dt, g.batch, g.nq, g.nkv, g.sq, g.hk, g.hv, g.total, &plan);
  onyx__cuda_attn_region(out_req, "attention_splitk_partials", plan.partials_bytes);
  onyx__cuda_attn_region(out_req, "attention_scores", plan.scores_bytes);
  onyx__cuda_attn_region(out_req, "attention_kv_staging", at_staging_bytes(st, &g, dt));
  return ONYX_STATUS_OK;
}

static onyx_status at_workspace(void *state, const onyx_tensor *inputs, size_t input_count,
                                onyx_workspace_requirement *out_req) {
  return at_workspace3(state, inputs, input_count, out_req, NULL);
}

/* Every geometry failure is INVALID_ARGUMENT here, as it always was. */
static onyx_status at_infer3(void *state, const onyx_tensor *inputs, size_t input_count,
                             onyx_tensor *outputs, size_t output_count, onyx_sink *err) {
  const at_state *st = state;
  const onyx_tensor *in[AT_INPUTS];
  at_planning_inputs(inputs, input_count, in);
  at_geom g;
  char msg[512];
  if (at_geometry(st, in, &g, msg, sizeof msg) != ONYX_STATUS_OK)
    return onyx__pc_sink_fail(err, ONYX_STATUS_INVALID_ARGUMENT, "Attention: %s", msg);
  uint32_t dt = in[AT_Q]->dtype;
  for (size_t i = 0; i < output_count; ++i) memset(&outputs[i], 0, sizeof outputs[i]);
  if (output_count > 0) {
    outputs[0].dtype = dt;
    if (g.four_d) {
      outputs[0].rank = 4;
      outputs[0].dims[0] = g.batch;
      outputs[0].dims[1] = g.nq;
      outputs[0].dims[2] = g.sq;
      outputs[0].dims[3] = g.hv;
    } else {
      outputs[0].rank = 3;
      outputs[0].dims[0] = g.batch;
      outputs[0].dims[1] = g.sq;
      outputs[0].dims[2] = g.nq * g.hv;
    }
  }
  for (size_t i = 1; i < 3 && i < output_count; ++i) {
    outputs[i].dtype = dt;
    outputs[i].rank = 4;
    outputs[i].dims[0] = g.batch;
    outputs[i].dims[1] = g.nkv;
    outputs[i].dims[2] = g.total;
    outputs[i].dims[3] = i == 1 ? g.hk : g.hv;
  }
  return ONYX_STATUS_OK;
}

static onyx_status at_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                            onyx_tensor *outputs, size_t output_count) {
  return at_infer3(state, inputs, input_count, outputs, output_count, NULL);
}

/* ------------------------------------------------------------------ compute */

/* Strides of the new K/V rows (i = 0 keys, 1 values): element (b, g, j, d) at
 * b·bs + g·gs + j·rs + d. */
typedef struct at_rows {
  int64_t bs[2], gs[2], rs[2];
} at_rows;

static at_rows at_new_rows(const at_geom *g) {
  at_rows r;
  const int64_t hs[2] = {g->hk, g->hv};
  for (int i = 0; i < 2; ++i) {
    if (g->four_d) {
      r.bs[i] = g->nkv * g->skv * hs[i], r.gs[i] = g->skv * hs[i], r.rs[i] = hs[i];
    } else {
      r.bs[i] = g->skv * g->nkv * hs[i], r.gs[i] = hs[i], r.rs[i] = g->nkv * hs[i];
    }
  }
  return r;
}

/* Everything of the kernels' parameters but the keys and values (and the workspace). */
static void at_query_params(const at_state *st, const at_geom *g, uint32_t dt,
                            const onyx_tensor *const *in, const onyx_tensor *y,
                            onyx__cuda_attn_params *p) {
  p->dtype = dt;
  p->batch = (int32_t)g->batch;
  p->nq = (int32_t)g->nq;
  p->nkv = (int32_t)g->nkv;
  p->group = (int32_t)(g->nq / g->nkv);
  p->sq = (int32_t)g->sq;
  p->hk = (int32_t)g->hk;
  p->hv = (int32_t)g->hv;
  p->scale = st->scale > 0.0f ? st->scale : 1.0f / sqrtf((float)g->hk);
  p->softcap = st->softcap;
  p->q = in[AT_Q]->data;
  p->y = y->data;
  if (g->four_d) {
    p->q_bs = g->nq * g->sq * g->hk, p->q_ss = g->hk, p->q_hs = g->sq * g->hk;
    p->y_bs = g->nq * g->sq * g->hv, p->y_ss = g->hv, p->y_hs = g->sq * g->hv;
  } else {
    p->q_bs = g->sq * g->nq * g->hk, p->q_ss = g->nq * g->hk, p->q_hs = g->hk;
    p->y_bs = g->sq * g->nq * g->hv, p->y_ss = g->nq * g->hv, p->y_hs = g->hv;
  }
  p->kv_rows = g->total;
  p->mode = ONYX__CUDA_ATTN_ONNX;
  p->total = g->total;
  p->past = g->past;
  p->causal = st->causal;
}

/* No past, both presents produced: attention reads K and V where they are and the
 * Hopper kernel copies them into the presents beside its matrix products (no fill
 * launch first). ONYX__CUDA_ATTN_NOT_TAKEN where the kernel does not take it (nothing
 * ran). */
static int at_run_fused_present(const onyx__cuda_attn_params *base,
                                const onyx__cuda_attn_plan *plan, const at_geom *g,
                                const onyx_tensor *const *in, onyx_tensor *const pres[2],
                                const at_rows *nr, void *stream) {
  if (onyx__cuda_attn_fused_present == 0 || g->hk != g->hv) return ONYX__CUDA_ATTN_NOT_TAKEN;
  onyx__cuda_attn_params p = *base;
  p.k = in[AT_K]->data;
  p.k_bs = nr->bs[0], p.k_gs = nr->gs[0], p.k_rs = nr->rs[0];
  p.v = in[AT_V]->data;
  p.v_bs = nr->bs[1], p.v_gs = nr->gs[1], p.v_rs = nr->rs[1];
  p.fill_present = 1;
  p.present_k = pres[0]->data;
  p.present_v = pres[1]->data;
  p.pr_bs = g->nkv * g->total * g->hk; /* BNSH, as the presents always are */
  p.pr_gs = g->total * g->hk;
  p.pr_rs = g->hk;
  if (onyx__cuda_attn_hopper_refusal(&p, plan) != NULL) return ONYX__CUDA_ATTN_NOT_TAKEN;
  return onyx__cuda_attn_run(&p, plan, NULL, p.kv_rows, stream);
}

/* The presents (and the staging region) filled from past and the new rows; p's keys and
 * values set to where the kernels read them: present, staging or the inputs. */
static onyx_status at_fill_kv(onyx_compute_ctx *ctx, const at_state *st, const at_geom *g,
                              const onyx_tensor *const *in, onyx_tensor *const pres[2],
                              void *staging, const at_rows *nr, onyx__cuda_attn_params *p) {
  const int64_t hs[2] = {g->hk, g->hv}, B = g->batch, T = g->total;
  const size_t es = onyx_dtype_size(p->dtype);
  const void *src_kv[2];
  int64_t s_bs[2], s_gs[2], s_rs[2];
  for (int i = 0; i < 2; ++i) {
    void *stage = staging == NULL ? NULL
                  : i == 0        ? staging
                           : (unsigned char *)staging + (size_t)(B * g->nkv * T * g->hk) * es;
    void *targets[2] = {pres[i] != NULL ? pres[i]->data : NULL, stage};
    for (int t = 0; t < 2; ++t) {
      if (targets[t] == NULL) continue;
      onyx__cuda_kv_fill f;
      memset(&f, 0, sizeof f);
      f.dtype = p->dtype;
      f.batch = (int32_t)B;
      f.nkv = (int32_t)g->nkv;
      f.head = (int32_t)hs[i];
      f.seq = (int32_t)g->skv;
      f.rows = T;
      f.dst = targets[t];
      f.d_bs = g->nkv * T * hs[i];
      f.d_gs = T * hs[i];
      f.d_rs = hs[i];
      f.past = in[AT_PAST_K + i] != NULL ? in[AT_PAST_K + i]->data : NULL;
      f.p_bs = g->nkv * g->past * hs[i];
      f.p_gs = g->past * hs[i];
      f.p_rs = hs[i];
      f.src = in[AT_K + i]->data;
      f.s_bs = nr->bs[i];
      f.s_gs = nr->gs[i];
      f.s_rs = nr->rs[i];
      f.copy_past = 1;
      f.mode = ONYX__CUDA_ATTN_ONNX;
      f.past_rows = g->past;
      f.past_cap = g->past;
      int e = onyx__cuda_attn_kv_fill(&f, ctx->stream);
      if (e != 0) return onyx__cuda_attn_launch_error(ctx, "present fill", e);
    }
    if (pres[i] != NULL && !at_staged(st, g)) {
      src_kv[i] = pres[i]->data;
    } else if (stage != NULL) {
      src_kv[i] = stage;
    } else {
      src_kv[i] = in[AT_K + i]->data; /* no past: the new rows are all the keys */
      s_bs[i] = nr->bs[i];
      s_gs[i] = nr->gs[i];
      s_rs[i] = nr->rs[i];
      continue;
    }
    s_bs[i] = g->nkv * T * hs[i];
    s_gs[i] = T * hs[i];
    s_rs[i] = hs[i];
  }
  p->k = src_kv[0];
  p->k_bs = s_bs[0], p->k_gs = s_gs[0], p->k_rs = s_rs[0];
  p->v = src_kv[1];
  p->v_bs = s_bs[1], p->v_gs = s_gs[1], p->v_rs = s_rs[1];
  return ONYX_STATUS_OK;
}

static onyx_status at_compute(void *state, onyx_compute_ctx *ctx, const onyx_tensor *const *inputs,
                              size_t input_count) {
  const at_state *st = state;
  const onyx_tensor *in[AT_INPUTS];
  for (size_t i = 0; i < AT_INPUTS; ++i) in[i] = onyx__cuda_attn_input(inputs, input_count, i);
  onyx_status status = onyx__cuda_attn_check_device(ctx, in, AT_INPUTS, 0);
  if (status != ONYX_STATUS_OK) return status;
  char msg[512];
  at_geom g;
  if ((status = at_geometry(st, in, &g, msg, sizeof msg)) != ONYX_STATUS_OK)
    return onyx__pc_error(ctx, status, "%s", msg);
  uint32_t dt = in[AT_Q]->dtype;
  if (dt != ONYX_DTYPE_FLOAT32 && dt != ONYX_DTYPE_FLOAT16 && dt != ONYX_DTYPE_BFLOAT16)
    return onyx__pc_error(ctx, ONYX_STATUS_UNSUPPORTED,
                          "Q has type %s; float32, float16 or bfloat16 expected",
                          onyx__pc_dtype_name(dt));
  if ((status = onyx__pc_attn_same_types(in, "CUDA kernel", msg, sizeof msg)) != ONYX_STATUS_OK)
    return onyx__pc_error(ctx, status, "%s", msg);
  int64_t B = g.batch, T = g.total;
  if (B == 0 || g.sq == 0)
    return onyx__pc_error(ctx, ONYX_STATUS_UNSUPPORTED, "empty batch or query sequence");
  if (T > INT32_MAX || B * g.nkv > 65535)
    return onyx__pc_error(ctx, ONYX_STATUS_UNSUPPORTED,
                          "%lld keys or %lld batch x kv heads exceed the CUDA kernel's grid",
                          (long long)T, (long long)(B * g.nkv));

  onyx__cuda_attn_params p;
  memset(&p, 0, sizeof p);
  p.mask_len = INT64_MAX;
  /* Mask and nonpad_kv_seqlen are checked once for every provider; nonpad's values stay
   * on the device, clamped to [0, total] there. */
  onyx__pc_attn_mask mk;
  if ((status = onyx__pc_attn_inputs(st->head.opset, in, &g, false, &mk, msg, sizeof msg)) !=
      ONYX_STATUS_OK)
    return onyx__pc_error(ctx, status, "%s", msg);
  const onyx_tensor *mask = in[AT_MASK];
  if (mask != NULL) {
    p.mask = mask->data;
    p.mask_dtype = mask->dtype;
    p.mask_len = mk.len;
    p.m_bs = mk.bs;
    p.m_hs = mk.hs;
    p.m_ss = mk.ss;
    p.m_js = mk.js;
  }
  if (in[AT_NONPAD] != NULL) p.nonpad = in[AT_NONPAD]->data;

  onyx__cuda_attn_plan plan;
  onyx__cuda_attn_plan_make(dt, B, g.nq, g.nkv, g.sq, g.hk, g.hv, T, &plan);
  void *partials = NULL, *scores = NULL, *staging = NULL;
  uint64_t staging_bytes = at_staging_bytes(st, &g, dt);
  if (plan.partials_bytes > 0 &&
      (status = onyx__cuda_attn_workspace(ctx, "attention_splitk_partials", plan.partials_bytes,
                                          &partials)) != ONYX_STATUS_OK)
    return status;
  if (plan.scores_bytes > 0 &&
      (status = onyx__cuda_attn_workspace(ctx, "attention_scores", plan.scores_bytes, &scores)) !=
          ONYX_STATUS_OK)
    return status;
  if (staging_bytes > 0 &&
      (status = onyx__cuda_attn_workspace(ctx, "attention_kv_staging", staging_bytes, &staging)) !=
          ONYX_STATUS_OK)
    return status;

  /* Outputs. */
  onyx_tensor *y = NULL, *pres[2] = {NULL, NULL};
  int64_t ydims4[4] = {B, g.nq, g.sq, g.hv}, ydims3[3] = {B, g.sq, g.nq * g.hv};
  if ((status = ctx->alloc_output(ctx, 0, dt, g.four_d ? 4 : 3, g.four_d ? ydims4 : ydims3, &y)) !=
      ONYX_STATUS_OK)
    return status;
  for (int i = 0; i < 2; ++i) {
    if (!at_wants(st, (size_t)(1 + i))) continue;
    int64_t pd[4] = {B, g.nkv, T, i == 0 ? g.hk : g.hv};
    if ((status = ctx->alloc_output(ctx, (size_t)(1 + i), dt, 4, pd, &pres[i])) != ONYX_STATUS_OK)
      return status;
  }

  at_rows nr = at_new_rows(&g);
  at_query_params(st, &g, dt, in, y, &p);
  p.partials = partials;
  p.n_split = plan.n_split;
  if (g.past == 0 && pres[0] != NULL && pres[1] != NULL) {
    int e = at_run_fused_present(&p, &plan, &g, in, pres, &nr, ctx->stream);
    if (e == 0) return ONYX_STATUS_OK;
    if (e != ONYX__CUDA_ATTN_NOT_TAKEN)
      return onyx__cuda_attn_launch_error(ctx, "Attention kernel", e);
  }
  if ((status = at_fill_kv(ctx, st, &g, in, pres, staging, &nr, &p)) != ONYX_STATUS_OK)
    return status;
  int e = onyx__cuda_attn_run(&p, &plan, scores, T, ctx->stream);
  if (e != 0) return onyx__cuda_attn_launch_error(ctx, "Attention kernel", e);
  return ONYX_STATUS_OK;
}

const onyx_kernel_table onyx_cuda_attention_kernel = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "",
    .op_type = "Attention",
    .since_opset = 23,
    .until_opset = 24,
    .type_input = 0,
    .type_mask = ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT32) | ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT16) |
                 ONYX_DTYPE_BIT(ONYX_DTYPE_BFLOAT16),
    .supports = at_supports,
    .create = at_create,
    .destroy = onyx__cuda_attn_state_free,
    .workspace = at_workspace,
    .compute = at_compute,
    .infer = at_infer,
};

/* ------------------------------------------------------------------ v3 */

/* The v3 definition (what the provider's factory registers on every GPU): the same
 * kernel, with the planning callbacks' reasons going to the core's sink. */
static onyx_status at_supports3(void *instance, const onyx_node_info *node, onyx_sink *err) {
  (void)instance;
  return onyx__pc_supports_via_v2(at_supports, node, err);
}

static onyx_status at_create3(void *instance, const onyx_node_info *node, void **out_state,
                              onyx_sink *err) {
  return onyx__pc_create_via_v2(at_create, instance, node, out_state, err);
}

static onyx_status at_compute3(void *state, onyx_compute_ctx *ctx, const onyx_tensor *const *inputs,
                               size_t input_count, onyx_sink *err) {
  (void)err; /* ctx->set_error reaches the same place */
  return at_compute(state, ctx, inputs, input_count);
}

static const onyx_type_constraint at_types[] = {{ONYX_TYPE_INPUT, AT_Q,
                                                 ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT32) |
                                                     ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT16) |
                                                     ONYX_DTYPE_BIT(ONYX_DTYPE_BFLOAT16)}};

const onyx_kernel_def onyx_cuda_attention_def = {
    .struct_size = sizeof(onyx_kernel_def),
    .version = ONYX_ABI_V3,
    .domain = "",
    .op_type = "Attention",
    .since_opset = 23,
    .until_opset = 24,
    .types = at_types,
    .type_count = sizeof at_types / sizeof at_types[0],
    .supports = at_supports3,
    .create = at_create3,
    .destroy = onyx__cuda_attn_state_free,
    .infer = at_infer3,
    .workspace = at_workspace3,
    .compute = at_compute3,
};
