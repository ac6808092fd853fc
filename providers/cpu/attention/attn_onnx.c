/*
 * ONNX Attention (opsets 23 and 24) on the CPU.
 *
 * Inputs Q, K, V, attn_mask, past_key, past_value, nonpad_kv_seqlen (24). Q/K/V are all
 * 4-D (B, N, S, H) or all 3-D (B, S, N·H) with q_num_heads/kv_num_heads; query head h
 * uses kv head h / (Nq / Nkv). The semantics are those of the ONNX function body and
 * the ONNX node tests:
 * - scores = scale·QKᵀ → softcap → + mask (bool false → −inf; opset 24 pads a mask
 *   whose last axis is shorter than the keys with −inf) → softmax → ·V.
 * - is_causal: query i sees key j iff j <= i + offset, offset = past length, or
 *   nonpad_kv_seqlen[b] − Sq when that input is given (then keys >= nonpad are masked).
 * - A row whose every key is masked yields zeros (and zero probabilities).
 * - present = concat(past, new) along the sequence; qk_matmul_output (B, Nq, Sq, T) in
 *   mode 0 raw, 1 after softcap, 2 after the mask, 3 after softmax.
 * Q, K, V must share one type (float32, float16 or bfloat16, computed in float32);
 * softmax_precision is accepted and the softmax always runs in float32.
 *
 * Workspace: none, except the split-K route (see attn_core.c).
 */
#include <math.h>
#include <stdio.h>

#include "attention_kernels.h"
#include "attn_impl.h"
#include "attn_params.h"
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
  onyx__attn_node head;
  int64_t q_heads, kv_heads; /* attributes, 0 when absent */
  bool causal;
  int64_t qk_mode;
  float scale, softcap;
} at_state;

static onyx_status at_create(void *provider_state, const onyx_node_info *node, void **out_state,
                             char *err, size_t err_cap) {
  onyx__pc_attn_attrs a = {0};
  int64_t mode = 0, prec = 0;
  onyx_status st;
  if ((st = onyx__attn_attr_int(node, "is_causal", 0, &a.causal, err, err_cap)) ||
      (st = onyx__attn_attr_int(node, "q_num_heads", 0, &a.q_heads, err, err_cap)) ||
      (st = onyx__attn_attr_int(node, "kv_num_heads", 0, &a.kv_heads, err, err_cap)) ||
      (st = onyx__attn_attr_int(node, "qk_matmul_output_mode", 0, &mode, err, err_cap)) ||
      (st = onyx__attn_attr_int(node, "softmax_precision", 0, &prec, err, err_cap)) ||
      (st = onyx__attn_attr_float(node, "scale", 0.0f, &a.scale, err, err_cap)) ||
      (st = onyx__attn_attr_float(node, "softcap", 0.0f, &a.softcap, err, err_cap)))
    return st;
  if ((st = onyx__pc_attn_attrs_check(&a, err, err_cap)) != ONYX_STATUS_OK) return st;
  if (mode < 0 || mode > 3)
    return onyx__pc_fail(err, err_cap, ONYX_STATUS_INVALID_MODEL,
                         "Attention: qk_matmul_output_mode must be 0..3, got %lld",
                         (long long)mode);
  if (node->output_count < 1 || (node->output_present != NULL && !node->output_present[0]))
    return onyx__pc_fail(err, err_cap, ONYX_STATUS_INVALID_MODEL,
                         "Attention: output 0 (Y) must be named");
  at_state *s = onyx__attn_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  s->q_heads = a.q_heads;
  s->kv_heads = a.kv_heads;
  s->causal = a.causal != 0;
  s->qk_mode = mode;
  s->scale = a.scale;
  s->softcap = a.softcap;
  *out_state = s;
  return ONYX_STATUS_OK;
}

/* ------------------------------------------------------------------ geometry */

/* Input geometry: checked in providers/common/attn_params.c, shared with CUDA. */
typedef onyx__pc_attn_geom at_geom;

static const onyx__pc_head_limit at_head_limit = {0, ONYX__ATTN_MAX_HEAD, "CPU kernel's"};

static onyx_status at_geometry(const at_state *st, const onyx_tensor *const *in, at_geom *g,
                               char *msg, size_t cap) {
  return onyx__pc_attn_geometry(st->q_heads, st->kv_heads, in, &at_head_limit, g, msg, cap);
}

static bool at_wants(const at_state *st, size_t out) {
  return st->head.output_count > out && st->head.output_present[out];
}

static void at_plan(const at_state *st, const at_geom *g, onyx__attn_plan *plan) {
  onyx__attn_plan_make(&st->head.threads, g->batch, g->nq, g->nkv, g->sq, g->hk, g->hv, g->total,
                       !at_wants(st, 3), plan);
}

static void at_collect(const onyx_tensor *const *inputs, size_t n, const onyx_tensor **in) {
  for (size_t i = 0; i < AT_INPUTS; ++i) in[i] = onyx__attn_input(inputs, n, i);
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
  onyx__attn_plan plan;
  at_plan(st, &g, &plan);
  uint64_t bytes = onyx__attn_partials_bytes(&plan, g.batch, g.nq, g.sq, g.hv);
  if (bytes > 0) {
    out_req->regions[0].name = "attention_splitk_partials";
    out_req->regions[0].bytes = bytes;
    out_req->regions[0].alignment = 64;
    out_req->regions[0].lifetime = ONYX_LIFETIME_STEP;
    out_req->count = 1;
  }
  return ONYX_STATUS_OK;
}

static onyx_status at_workspace(void *state, const onyx_tensor *inputs, size_t input_count,
                                onyx_workspace_requirement *out_req) {
  return at_workspace3(state, inputs, input_count, out_req, NULL);
}

/* Output geometry for the planner: every output follows from the input shapes. */
static onyx_status at_infer3(void *state, const onyx_tensor *inputs, size_t input_count,
                             onyx_tensor *outputs, size_t output_count, onyx_sink *err) {
  const at_state *st = state;
  const onyx_tensor *in[AT_INPUTS];
  at_planning_inputs(inputs, input_count, in);
  at_geom g;
  char msg[512];
  onyx_status status = at_geometry(st, in, &g, msg, sizeof msg);
  if (status != ONYX_STATUS_OK) return onyx__pc_sink_fail(err, status, "Attention: %s", msg);
  uint32_t dt = in[AT_Q]->dtype;
  int64_t y4[4] = {g.batch, g.nq, g.sq, g.hv}, y3[3] = {g.batch, g.sq, g.nq * g.hv};
  onyx__attn_infer_out(outputs, output_count, 0, dt, g.four_d ? 4 : 3, g.four_d ? y4 : y3);
  for (size_t k = 1; k < 3; ++k) {
    int64_t pd[4] = {g.batch, g.nkv, g.total, k == 1 ? g.hk : g.hv};
    if (at_wants(st, k)) onyx__attn_infer_out(outputs, output_count, k, dt, 4, pd);
  }
  int64_t qd[4] = {g.batch, g.nq, g.sq, g.total};
  if (at_wants(st, 3)) onyx__attn_infer_out(outputs, output_count, 3, dt, 4, qd);
  return ONYX_STATUS_OK;
}

static onyx_status at_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                            onyx_tensor *outputs, size_t output_count) {
  return at_infer3(state, inputs, input_count, outputs, output_count, NULL);
}

/* ------------------------------------------------------------------ compute */

typedef struct at_geom_arg {
  const int64_t *nonpad;
  int64_t past, total, sq;
} at_geom_arg;

static void at_batch_geom(const void *arg, int64_t b, onyx__attn_batch_geom *out) {
  const at_geom_arg *a = arg;
  out->kv_len = a->total;
  out->seg0_len = a->past;
  out->rope_pos0 = 0;
  if (a->nonpad != NULL) {
    out->key_limit = a->nonpad[b];
    out->q_pos0 = a->nonpad[b] - a->sq;
  } else {
    out->key_limit = a->total;
    out->q_pos0 = a->past;
  }
}

typedef struct at_present_job {
  uint32_t dtype;
  int64_t nkv, past, skv, total, head;
  const void *past_data;
  const void *src; /* new rows, element (b, g, j, d) at src[b·bs + g·gs + j·rs + d] */
  int64_t bs, gs, rs;
  void *present;
} at_present_job;

static void at_present_task(void *arg, size_t index) {
  const at_present_job *j = arg;
  int64_t b = (int64_t)index / j->nkv, g = (int64_t)index % j->nkv;
  size_t es = onyx_dtype_size(j->dtype);
  int64_t h = j->head;
  unsigned char *dst = onyx__attn_at_mut(j->present, (b * j->nkv + g) * j->total * h, es);
  if (j->past > 0)
    memcpy(dst, onyx__attn_at(j->past_data, (b * j->nkv + g) * j->past * h, es),
           (size_t)(j->past * h) * es);
  for (int64_t r = 0; r < j->skv; ++r)
    memcpy(dst + (size_t)((j->past + r) * h) * es,
           onyx__attn_at(j->src, b * j->bs + g * j->gs + r * j->rs, es), (size_t)h * es);
}

static onyx_status at_compute(void *state, onyx_compute_ctx *ctx, const onyx_tensor *const *inputs,
                              size_t input_count) {
  const at_state *st = state;
  onyx_status status = onyx__attn_check_host(ctx, inputs, input_count);
  if (status != ONYX_STATUS_OK) return status;
  const onyx_tensor *in[AT_INPUTS];
  at_collect(inputs, input_count, in);
  char msg[256];
  at_geom g;
  if ((status = at_geometry(st, in, &g, msg, sizeof msg)) != ONYX_STATUS_OK)
    return onyx__pc_error(ctx, status, "%s", msg);
  uint32_t dt = in[AT_Q]->dtype;
  if (!onyx__attn_is_float(dt))
    return onyx__pc_error(ctx, ONYX_STATUS_UNSUPPORTED,
                          "Q has type %s; float32, float16 or bfloat16 expected",
                          onyx__attn_dtype_name(dt));
  /* Everything beside the geometry is checked once for every provider. */
  if ((status = onyx__pc_attn_same_types(in, "CPU kernel", msg, sizeof msg)) != ONYX_STATUS_OK)
    return onyx__pc_error(ctx, status, "%s", msg);
  onyx__pc_attn_mask mk;
  if ((status = onyx__pc_attn_inputs(st->head.opset, in, &g, true, &mk, msg, sizeof msg)) !=
      ONYX_STATUS_OK)
    return onyx__pc_error(ctx, status, "%s", msg);
  int64_t B = g.batch, T = g.total;
  const onyx_tensor *mask = in[AT_MASK];
  int64_t m_bs = mk.bs, m_hs = mk.hs, m_ss = mk.ss, m_js = mk.js, mask_len = mk.len;
  const int64_t *nonpad = in[AT_NONPAD] != NULL ? in[AT_NONPAD]->data : NULL;

  onyx__attn_plan plan;
  at_plan(st, &g, &plan);
  uint64_t need = onyx__attn_partials_bytes(&plan, B, g.nq, g.sq, g.hv);
  float *partials = NULL;
  if (need > 0) {
    uint64_t have =
        ctx->workspace != NULL && ctx->workspace_count > 0 ? ctx->workspace[0].bytes : 0;
    if (have < need || ctx->workspace[0].data == NULL)
      return onyx__pc_error(ctx, ONYX_STATUS_WORKSPACE_TOO_SMALL,
                            "workspace region attention_splitk_partials has %llu bytes, %llu "
                            "needed",
                            (unsigned long long)have, (unsigned long long)need);
    partials = ctx->workspace[0].data;
  }

  /* Outputs. */
  onyx_tensor *y = NULL, *pres[2] = {NULL, NULL}, *qk = NULL;
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
  if (at_wants(st, 3)) {
    int64_t qd[4] = {B, g.nq, g.sq, T};
    if ((status = ctx->alloc_output(ctx, 3, dt, 4, qd, &qk)) != ONYX_STATUS_OK) return status;
  }

  /* New K/V rows: element (b, g, j, d). */
  int64_t k_bs, k_gs, k_rs, v_bs, v_gs, v_rs;
  if (g.four_d) {
    k_bs = g.nkv * g.skv * g.hk, k_gs = g.skv * g.hk, k_rs = g.hk;
    v_bs = g.nkv * g.skv * g.hv, v_gs = g.skv * g.hv, v_rs = g.hv;
  } else {
    k_bs = g.skv * g.nkv * g.hk, k_gs = g.hk, k_rs = g.nkv * g.hk;
    v_bs = g.skv * g.nkv * g.hv, v_gs = g.hv, v_rs = g.nkv * g.hv;
  }
  for (int i = 0; i < 2; ++i) {
    if (pres[i] == NULL) continue;
    at_present_job job = {dt,
                          g.nkv,
                          g.past,
                          g.skv,
                          T,
                          i == 0 ? g.hk : g.hv,
                          in[AT_PAST_K + i] != NULL ? in[AT_PAST_K + i]->data : NULL,
                          in[AT_K + i]->data,
                          i == 0 ? k_bs : v_bs,
                          i == 0 ? k_gs : v_gs,
                          i == 0 ? k_rs : v_rs,
                          pres[i]->data};
    onyx__attn_parallel_for(&st->head.threads, (size_t)(B * g.nkv), at_present_task, &job);
  }

  at_geom_arg garg = {nonpad, g.past, T, g.sq};
  onyx__attn_problem p;
  memset(&p, 0, sizeof p);
  p.dtype = dt;
  p.batch = B;
  p.nq = g.nq;
  p.nkv = g.nkv;
  p.sq = g.sq;
  p.hk = g.hk;
  p.hv = g.hv;
  p.scale = st->scale > 0.0f ? st->scale : 1.0f / sqrtf((float)g.hk);
  p.softcap = st->softcap;
  p.q = in[AT_Q]->data;
  p.y = y->data;
  if (g.four_d) {
    p.q_bs = g.nq * g.sq * g.hk, p.q_ss = g.hk, p.q_hs = g.sq * g.hk;
    p.y_bs = g.nq * g.sq * g.hv, p.y_ss = g.hv, p.y_hs = g.sq * g.hv;
  } else {
    p.q_bs = g.sq * g.nq * g.hk, p.q_ss = g.nq * g.hk, p.q_hs = g.hk;
    p.y_bs = g.sq * g.nq * g.hv, p.y_ss = g.nq * g.hv, p.y_hs = g.hv;
  }
  if (in[AT_PAST_K] != NULL)
    p.seg[0] = (onyx__attn_kv_seg){in[AT_PAST_K]->data, g.nkv * g.past * g.hk, g.past * g.hk, g.hk,
                                   in[AT_PAST_V]->data, g.nkv * g.past * g.hv, g.past * g.hv, g.hv};
  p.seg[1] =
      (onyx__attn_kv_seg){in[AT_K]->data, k_bs, k_gs, k_rs, in[AT_V]->data, v_bs, v_gs, v_rs};
  p.geom = at_batch_geom;
  p.geom_arg = &garg;
  p.causal = st->causal;
  p.mask_len = mask_len;
  if (mask != NULL) {
    p.mask = mask->data;
    p.mask_dtype = mask->dtype;
    p.m_bs = m_bs;
    p.m_hs = m_hs;
    p.m_ss = m_ss;
    p.m_js = m_js;
  }
  if (qk != NULL) {
    static const onyx__attn_qk_mode modes[4] = {ONYX__ATTN_QK_RAW, ONYX__ATTN_QK_SOFTCAP,
                                                ONYX__ATTN_QK_MASKED, ONYX__ATTN_QK_PROBS};
    p.qk_mode = modes[st->qk_mode];
    p.qk = qk->data;
    p.qk_cols = T;
  }
  p.partials = partials;
  onyx__attn_run(&st->head.threads, &p, &plan);
  return ONYX_STATUS_OK;
}

const onyx_kernel_table onyx_cpu_attention_kernel = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "",
    .op_type = "Attention",
    .since_opset = 23,
    .until_opset = 24,
    .type_input = 0,
    .type_mask = ONYX__ATTN_FLOAT_TYPES,
    .supports = NULL,
    .create = at_create,
    .destroy = onyx__attn_state_free,
    .workspace = at_workspace,
    .compute = at_compute,
    .infer = at_infer,
};

/* The v3 definition (what the provider's factory registers): the same kernel, with the
 * planning callbacks' reasons going to the core's sink. */
static onyx_status at_create3(void *instance, const onyx_node_info *node, void **out_state,
                              onyx_sink *err) {
  return onyx__pc_create_via_v2(at_create, instance, node, out_state, err);
}

static onyx_status at_compute3(void *state, onyx_compute_ctx *ctx, const onyx_tensor *const *inputs,
                               size_t input_count, onyx_sink *err) {
  (void)err; /* ctx->set_error reaches the same place */
  return at_compute(state, ctx, inputs, input_count);
}

static const onyx_type_constraint at_types[] = {{ONYX_TYPE_INPUT, AT_Q, ONYX__ATTN_FLOAT_TYPES}};

const onyx_kernel_def onyx_cpu_attention_def = {
    .struct_size = sizeof(onyx_kernel_def),
    .version = ONYX_ABI_V3,
    .domain = "",
    .op_type = "Attention",
    .since_opset = 23,
    .until_opset = 24,
    .types = at_types,
    .type_count = sizeof at_types / sizeof at_types[0],
    .create = at_create3,
    .destroy = onyx__attn_state_free,
    .infer = at_infer3,
    .workspace = at_workspace3,
    .compute = at_compute3,
};

const onyx_kernel_def *const onyx_cpu_attention_defs[] = {&onyx_cpu_gqa_def,
                                                          &onyx_cpu_attention_def};
const size_t onyx_cpu_attention_def_count =
    sizeof onyx_cpu_attention_defs / sizeof onyx_cpu_attention_defs[0];

const onyx_kernel_table *const onyx_cpu_attention_kernels[] = {
    &onyx_cpu_gqa_kernel, &onyx_cpu_attention_kernel, &onyx_cpu_rotary_kernel,
    &onyx_cpu_ms_rotary_kernel};
const size_t onyx_cpu_attention_kernel_count =
    sizeof onyx_cpu_attention_kernels / sizeof onyx_cpu_attention_kernels[0];
