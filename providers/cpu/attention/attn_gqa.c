/*
 * com.microsoft GroupQueryAttention (since 1) on the CPU.
 *
 * Inputs 0..11: query (or packed QKV), key, value, past_key, past_value, seqlens_k,
 * total_sequence_length, cos_cache, sin_cache, position_ids, attention_bias, head_sink.
 * Later ONNX Runtime inputs (quantized-KV scales, Q/K norm weights, query_seqlens) and
 * the windowed cache are refused with a message naming them.
 *
 * Semantics follow ONNX Runtime's CPU kernel, checked against it by
 * tools/parity/make_attention_cases.py:
 * - total_sequence_length T must be past_len + S (a growing cache) or at most past_len
 *   (a fixed-capacity cache); the first prompt is S == T (then every past_b is 0).
 * - Row b holds total_b = seqlens_k[b] + 1 tokens; past_b = total_b − S otherwise.
 * - Query row s sits at p = past_b + s and sees keys [max(0, p − W + 1), min(p, total_b − 1)]
 *   (W = local_window_size), which also defines rows past total_b in a right-padded
 *   first prompt.
 * - Rotary positions: past_b + s; with position_ids, position_ids[b, s], except in the
 *   first prompt where ONNX Runtime uses position_ids[0, 0] + s for every row.
 * - present (B, Nkv, max(T, past_len), H): past rows [0, past_b), the S new rows, zeros
 *   after — or, when past_len >= T and the core lets present alias past, the past buffer
 *   itself with the new rows written in place (ONNX Runtime's shared buffer).
 * - qk_output 1 writes the scores (after scale, softcap, bias) and 2 the probabilities
 *   of the keys each row attends to, zero elsewhere, as (B, Nq, S, T).
 *
 * Onyx extension: attribute kv_layout = 1 keeps the declared (B, Nkv, L, H) shape of
 * past/present but lays the bytes out (B, L, Nkv, H) (seq-major); 0 is BNSH.
 *
 * Workspace: none on every route except split-K (few (batch, kv head) tasks for the
 * threads and long rows), which needs one STEP region of partial softmax states.
 */
#include <math.h>
#include <stdio.h>

#include "attention_kernels.h"
#include "attn_impl.h"
#include "attn_params.h"
#include "pc_factory.h"

/* Input order: the op's, as attn_params.h names it. */
enum {
  GQA_QUERY = ONYX__PC_GQA_QUERY,
  GQA_KEY = ONYX__PC_GQA_KEY,
  GQA_VALUE = ONYX__PC_GQA_VALUE,
  GQA_PAST_KEY = ONYX__PC_GQA_PAST_KEY,
  GQA_PAST_VALUE = ONYX__PC_GQA_PAST_VALUE,
  GQA_SEQLENS = ONYX__PC_GQA_SEQLENS,
  GQA_TOTAL = ONYX__PC_GQA_TOTAL,
  GQA_COS = ONYX__PC_GQA_COS,
  GQA_SIN = ONYX__PC_GQA_SIN,
  GQA_POS = ONYX__PC_GQA_POS,
  GQA_BIAS = ONYX__PC_GQA_BIAS,
  GQA_SINK = ONYX__PC_GQA_SINK,
  GQA_INPUTS = ONYX__PC_GQA_INPUTS
};

static const char *const gqa_later_inputs[] = {"k_scale", "v_scale", "q_norm_weight",
                                               "k_norm_weight", "query_seqlens"};

typedef struct gqa_state {
  onyx__attn_node head;
  int64_t nq, nkv;
  float scale; /* 0: 1/sqrt(H) */
  float softcap;
  int64_t window; /* > 0 or -1 */
  bool causal, rotary, interleaved, smooth;
  int64_t qk_output;
  int64_t kv_layout; /* 0 BNSH, 1 BSNH */
} gqa_state;

static onyx_status gqa_create(void *provider_state, const onyx_node_info *node, void **out_state,
                              char *err, size_t err_cap) {
  onyx__pc_gqa_attrs a = {.window = -1, .causal = 1};
  int64_t rotary = 0, inter = 0, smooth = 0, qk = 0, swc = 0, bits = 0;
  bool knone = true, vnone = true;
  onyx_status st;
  if ((st = onyx__attn_attr_int(node, "num_heads", 0, &a.nq, err, err_cap)) ||
      (st = onyx__attn_attr_int(node, "kv_num_heads", 0, &a.nkv, err, err_cap)) ||
      (st = onyx__attn_attr_float(node, "scale", 0.0f, &a.scale, err, err_cap)) ||
      (st = onyx__attn_attr_float(node, "softcap", 0.0f, &a.softcap, err, err_cap)) ||
      (st = onyx__attn_attr_int(node, "local_window_size", -1, &a.window, err, err_cap)) ||
      (st = onyx__attn_attr_int(node, "do_rotary", 0, &rotary, err, err_cap)) ||
      (st = onyx__attn_attr_int(node, "rotary_interleaved", 0, &inter, err, err_cap)) ||
      (st = onyx__attn_attr_int(node, "smooth_softmax", 0, &smooth, err, err_cap)) ||
      (st = onyx__attn_attr_int(node, "qk_output", 0, &qk, err, err_cap)) ||
      (st = onyx__attn_attr_int(node, "kv_layout", 0, &a.kv_layout, err, err_cap)) ||
      (st = onyx__attn_attr_int(node, "causal", 1, &a.causal, err, err_cap)) ||
      (st = onyx__attn_attr_int(node, "sliding_window_cache", 0, &swc, err, err_cap)) ||
      (st = onyx__attn_attr_int(node, "kv_cache_bit_width", 0, &bits, err, err_cap)) ||
      (st = onyx__attn_attr_string_is(node, "k_quant_type", "NONE", &knone, err, err_cap)) ||
      (st = onyx__attn_attr_string_is(node, "v_quant_type", "NONE", &vnone, err, err_cap)))
    return st;
  const char *op = "GroupQueryAttention";
  if ((st = onyx__pc_gqa_attrs_check(&a, err, err_cap)) != ONYX_STATUS_OK) return st;
  if (qk < 0 || qk > 2)
    return onyx__pc_fail(err, err_cap, ONYX_STATUS_INVALID_MODEL,
                         "%s: qk_output must be 0, 1 or 2, got %lld", op, (long long)qk);
  if (swc != 0)
    return onyx__pc_fail(err, err_cap, ONYX_STATUS_UNSUPPORTED,
                         "%s: sliding_window_cache = 1 (windowed KV cache) is not supported by "
                         "the CPU provider",
                         op);
  if (bits != 0 || !knone || !vnone)
    return onyx__pc_fail(err, err_cap, ONYX_STATUS_UNSUPPORTED,
                         "%s: a quantized KV cache (k_quant_type/v_quant_type/"
                         "kv_cache_bit_width) is not supported by the CPU provider",
                         op);
  for (size_t i = GQA_INPUTS; i < node->input_count; ++i) {
    if (node->input_present != NULL && !node->input_present[i]) continue;
    size_t k = i - GQA_INPUTS;
    return onyx__pc_fail(
        err, err_cap, ONYX_STATUS_UNSUPPORTED,
        "%s: input %zu (%s) is not supported by the CPU provider", op, i,
        k < sizeof gqa_later_inputs / sizeof gqa_later_inputs[0] ? gqa_later_inputs[k] : "unknown");
  }
  if (node->output_count < 1 || (node->output_present != NULL && !node->output_present[0]))
    return onyx__pc_fail(err, err_cap, ONYX_STATUS_INVALID_MODEL,
                         "%s: output 0 (output) must be named", op);
  if (qk == 0 && node->output_count > 3 &&
      (node->output_present == NULL || node->output_present[3]))
    return onyx__pc_fail(err, err_cap, ONYX_STATUS_INVALID_MODEL,
                         "%s: output 3 (output_qk) is named but qk_output is 0", op);
  gqa_state *s = onyx__attn_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  s->nq = a.nq;
  s->nkv = a.nkv;
  s->scale = a.scale;
  s->softcap = a.softcap;
  s->window = a.window;
  s->causal = a.causal != 0;
  s->rotary = rotary != 0;
  s->interleaved = inter != 0;
  s->smooth = smooth != 0;
  s->qk_output = qk;
  s->kv_layout = a.kv_layout;
  *out_state = s;
  return ONYX_STATUS_OK;
}

/* ------------------------------------------------------------------ geometry */

/* Input geometry: checked in providers/common/attn_params.c, shared with CUDA. */
typedef onyx__pc_gqa_geom gqa_geom;

static const onyx__pc_head_limit gqa_head_limit = {0, ONYX__ATTN_MAX_HEAD, "CPU kernel's"};

/* Shapes only (data may be NULL). On failure writes a message into msg. */
static onyx_status gqa_geometry(const gqa_state *st, const onyx_tensor *const *in, gqa_geom *g,
                                char *msg, size_t cap) {
  return onyx__pc_gqa_geometry(st->nq, st->nkv, in, &gqa_head_limit, g, msg, cap);
}

static bool gqa_wants_qk(const gqa_state *st) {
  return st->qk_output != 0 && st->head.output_count > 3 && st->head.output_present[3];
}

static void gqa_plan(const gqa_state *st, const gqa_geom *g, onyx__attn_plan *plan) {
  onyx__attn_plan_make(&st->head.threads, g->batch, st->nq, st->nkv, g->seq, g->head, g->head,
                       g->past_len + g->seq, !gqa_wants_qk(st), plan);
}

/* Input views of a planning call (undefined dtype: absent). */
static void gqa_planning_inputs(const onyx_tensor *inputs, size_t input_count,
                                const onyx_tensor **in) {
  for (size_t i = 0; i < GQA_INPUTS; ++i)
    in[i] = i < input_count && inputs[i].dtype != ONYX_DTYPE_UNDEFINED ? &inputs[i] : NULL;
}

/* v3 (err may be NULL: the v2 entry). */
static onyx_status gqa_workspace3(void *state, const onyx_tensor *inputs, size_t input_count,
                                  onyx_workspace_requirement *out_req, onyx_sink *err) {
  const gqa_state *st = state;
  const onyx_tensor *in[GQA_INPUTS];
  gqa_planning_inputs(inputs, input_count, in);
  out_req->count = 0;
  gqa_geom g;
  char msg[512];
  /* Invalid geometry needs no workspace (OK, so the reason is only informative);
   * compute() reports it. */
  if (gqa_geometry(st, in, &g, msg, sizeof msg) != ONYX_STATUS_OK)
    return onyx__pc_sink_fail(err, ONYX_STATUS_OK, "GroupQueryAttention: %s", msg);
  onyx__attn_plan plan;
  gqa_plan(st, &g, &plan);
  uint64_t bytes = onyx__attn_partials_bytes(&plan, g.batch, st->nq, g.seq, g.head);
  if (bytes > 0) {
    out_req->regions[0].name = "gqa_splitk_partials";
    out_req->regions[0].bytes = bytes;
    out_req->regions[0].alignment = 64;
    out_req->regions[0].lifetime = ONYX_LIFETIME_STEP;
    out_req->count = 1;
  }
  return ONYX_STATUS_OK;
}

static onyx_status gqa_workspace(void *state, const onyx_tensor *inputs, size_t input_count,
                                 onyx_workspace_requirement *out_req) {
  return gqa_workspace3(state, inputs, input_count, out_req, NULL);
}

/* The value of total_sequence_length at planning: UNSUPPORTED when it is not known
 * (then the present shape cannot be planned), INVALID_ARGUMENT when it is below 1. */
static onyx_status gqa_planned_total(const onyx_tensor *t, int64_t *out, onyx_sink *err) {
  const char *op = "GroupQueryAttention";
  if (t == NULL)
    return onyx__pc_sink_fail(err, ONYX_STATUS_UNSUPPORTED,
                              "%s: input 6 (total_sequence_length) is absent; the present and "
                              "output_qk shapes need its value",
                              op);
  if (t->dtype != ONYX_DTYPE_INT32 || onyx_tensor_numel(t) != 1)
    return onyx__pc_sink_fail(err, ONYX_STATUS_UNSUPPORTED,
                              "%s: input 6 (total_sequence_length) must be one int32, got %s %s",
                              op, onyx__pc_dtype_name(t->dtype), onyx__pc_tensor_shape(t).s);
  if (t->data == NULL)
    return onyx__pc_sink_fail(err, ONYX_STATUS_UNSUPPORTED,
                              "%s: the value of input 6 (total_sequence_length) is not known "
                              "when planning; the present and output_qk shapes need it",
                              op);
  *out = ((const int32_t *)t->data)[0];
  if (*out < 1)
    return onyx__pc_sink_fail(err, ONYX_STATUS_INVALID_ARGUMENT,
                              "%s: input 6 (total_sequence_length) is %lld; at least 1 expected",
                              op, (long long)*out);
  return ONYX_STATUS_OK;
}

/* Output geometry for the planner: output from shapes alone; present and output_qk
 * need the value of total_sequence_length (known when it is shape arithmetic, as in
 * ONNX Runtime GenAI's graphs), else UNSUPPORTED. */
static onyx_status gqa_infer3(void *state, const onyx_tensor *inputs, size_t input_count,
                              onyx_tensor *outputs, size_t output_count, onyx_sink *err) {
  const gqa_state *st = state;
  const onyx_tensor *in[GQA_INPUTS];
  gqa_planning_inputs(inputs, input_count, in);
  gqa_geom g;
  char msg[512];
  onyx_status status = gqa_geometry(st, in, &g, msg, sizeof msg);
  if (status != ONYX_STATUS_OK)
    return onyx__pc_sink_fail(err, status, "GroupQueryAttention: %s", msg);
  uint32_t dt = in[GQA_QUERY]->dtype;
  bool want_present = (st->head.output_count > 1 && st->head.output_present[1]) ||
                      (st->head.output_count > 2 && st->head.output_present[2]);
  int64_t total = 0;
  if ((want_present || gqa_wants_qk(st)) &&
      (status = gqa_planned_total(in[GQA_TOTAL], &total, err)) != ONYX_STATUS_OK)
    return status;
  int64_t ydims[3] = {g.batch, g.seq, st->nq * g.head};
  onyx__attn_infer_out(outputs, output_count, 0, dt, 3, ydims);
  int64_t pdims[4] = {g.batch, st->nkv, total > g.past_len ? total : g.past_len, g.head};
  for (size_t k = 1; k < 3; ++k)
    if (st->head.output_count > k && st->head.output_present[k])
      onyx__attn_infer_out(outputs, output_count, k, dt, 4, pdims);
  if (gqa_wants_qk(st)) {
    int64_t qdims[4] = {g.batch, st->nq, g.seq, total};
    onyx__attn_infer_out(outputs, output_count, 3, dt, 4, qdims);
  }
  return ONYX_STATUS_OK;
}

static onyx_status gqa_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                             onyx_tensor *outputs, size_t output_count) {
  return gqa_infer3(state, inputs, input_count, outputs, output_count, NULL);
}

/* ------------------------------------------------------------------ compute */

typedef struct gqa_geom_arg {
  const int32_t *seqlens;
  bool first;
  bool from_present; /* keys and values are read from present (all rows) */
  int64_t seq;
} gqa_geom_arg;

static void gqa_batch_geom(const void *arg, int64_t b, onyx__attn_batch_geom *out) {
  const gqa_geom_arg *a = arg;
  int64_t total = (int64_t)a->seqlens[b] + 1;
  int64_t past = a->first ? 0 : total - a->seq;
  out->kv_len = total;
  out->key_limit = total;
  out->seg0_len = a->from_present ? total : past;
  out->q_pos0 = past;
  out->rope_pos0 = past;
}

/* Element strides of a past/present buffer with `rows` rows per (b, g). */
typedef struct gqa_cache_strides {
  int64_t bs, gs, rs;
} gqa_cache_strides;

static gqa_cache_strides gqa_cache(const gqa_state *st, int64_t rows, int64_t head) {
  gqa_cache_strides c;
  if (st->kv_layout == 1) { /* (B, L, Nkv, H) bytes */
    c.bs = rows * st->nkv * head;
    c.gs = head;
    c.rs = st->nkv * head;
  } else { /* (B, Nkv, L, H) */
    c.bs = st->nkv * rows * head;
    c.gs = rows * head;
    c.rs = head;
  }
  return c;
}

typedef struct gqa_present_job {
  const gqa_state *st;
  uint32_t dtype;
  int64_t batch, seq, head, present_rows;
  const int32_t *seqlens;
  bool first;
  bool copy_past; /* not aliased: copy past rows and zero the tail */
  const void *past;
  gqa_cache_strides ps, cs;
  void *present;
  const void *src; /* new rows: element (b, s, g, d) at src[b·src_bs + s·src_ss + g·H + d] */
  int64_t src_bs, src_ss;
  const onyx__attn_rope *rope; /* NULL for values */
  const int64_t *pos_ids;
  int64_t pos_bs, pos_ss, pos_add_s;
} gqa_present_job;

/* One (b, g): past rows, new rows (rotated keys), zero tail. */
static void gqa_present_task(void *arg, size_t index) {
  const gqa_present_job *j = arg;
  int64_t nkv = j->st->nkv, h = j->head;
  int64_t b = (int64_t)index / nkv, g = (int64_t)index % nkv;
  size_t es = onyx_dtype_size(j->dtype);
  int64_t total = (int64_t)j->seqlens[b] + 1;
  int64_t past = j->first ? 0 : total - j->seq;
  int64_t base = b * j->cs.bs + g * j->cs.gs;
  if (j->copy_past) {
    int64_t pbase = b * j->ps.bs + g * j->ps.gs;
    for (int64_t r = 0; r < past; ++r)
      memcpy(onyx__attn_at_mut(j->present, base + r * j->cs.rs, es),
             onyx__attn_at(j->past, pbase + r * j->ps.rs, es), (size_t)h * es);
    for (int64_t r = past + j->seq; r < j->present_rows; ++r)
      memset(onyx__attn_at_mut(j->present, base + r * j->cs.rs, es), 0, (size_t)h * es);
  }
  float buf[ONYX__ATTN_MAX_HEAD];
  for (int64_t s = 0; s < j->seq; ++s) {
    const unsigned char *src = onyx__attn_at(j->src, b * j->src_bs + s * j->src_ss + g * h, es);
    unsigned char *dst = onyx__attn_at_mut(j->present, base + (past + s) * j->cs.rs, es);
    if (j->rope == NULL) {
      memcpy(dst, src, (size_t)h * es);
      continue;
    }
    int64_t pos = j->pos_ids != NULL ? j->pos_ids[b * j->pos_bs + s * j->pos_ss] + s * j->pos_add_s
                                     : past + s;
    onyx__attn_load_row(j->dtype, src, h, buf);
    onyx__attn_rope_row(j->rope, pos, buf);
    onyx__attn_store_row(j->dtype, dst, h, buf);
  }
}

static onyx_status gqa_compute(void *state, onyx_compute_ctx *ctx, const onyx_tensor *const *inputs,
                               size_t input_count) {
  const gqa_state *st = state;
  onyx_status status = onyx__attn_check_host(ctx, inputs, input_count);
  if (status != ONYX_STATUS_OK) return status;
  for (size_t i = GQA_INPUTS; i < input_count; ++i)
    if (inputs[i] != NULL)
      return onyx__pc_error(ctx, ONYX_STATUS_UNSUPPORTED,
                            "input %zu is not supported by the CPU provider", i);
  const onyx_tensor *in[GQA_INPUTS];
  for (size_t i = 0; i < GQA_INPUTS; ++i) in[i] = onyx__attn_input(inputs, input_count, i);
  const onyx_tensor *q = in[GQA_QUERY];
  char msg[512];
  gqa_geom g;
  if ((status = gqa_geometry(st, in, &g, msg, sizeof msg)) != ONYX_STATUS_OK)
    return onyx__pc_error(ctx, status, "%s", msg);
  uint32_t dt = q->dtype;
  if (!onyx__attn_is_float(dt))
    return onyx__pc_error(ctx, ONYX_STATUS_UNSUPPORTED,
                          "query has type %s; float32, float16 or bfloat16 expected",
                          onyx__attn_dtype_name(dt));
  /* Everything beside inputs 0..4 is checked once for every provider. */
  onyx__pc_gqa_run run;
  if ((status = onyx__pc_gqa_inputs(st->nq, st->rotary, in, &g, &run, msg, sizeof msg)) !=
      ONYX_STATUS_OK)
    return onyx__pc_error(ctx, status, "%s", msg);
  const int32_t *seqlens = in[GQA_SEQLENS]->data;
  int64_t S = g.seq, B = g.batch, H = g.head, L = g.past_len;
  int64_t T = run.total;
  bool first = run.first;
  int64_t P = T > L ? T : L;

  /* Rotary tables and positions (their shapes and every position checked above). */
  onyx__attn_rope rope;
  memset(&rope, 0, sizeof rope);
  const int64_t *pos_ids = NULL;
  int64_t pos_bs = 0, pos_ss = 0, pos_add_s = 0;
  if (st->rotary) {
    const onyx_tensor *cos = in[GQA_COS], *sin = in[GQA_SIN], *pos = in[GQA_POS];
    rope.cos = cos->data;
    rope.sin = sin->data;
    rope.dtype = dt;
    rope.half = cos->dims[1];
    rope.rows = cos->dims[0];
    rope.interleaved = st->interleaved;
    if (pos != NULL) {
      pos_ids = pos->data;
      if (first) { /* ONNX Runtime reads only position_ids[0, 0] in the first prompt */
        pos_add_s = 1;
      } else {
        pos_bs = S;
        pos_ss = 1;
      }
    }
  }
  const onyx_tensor *bias = in[GQA_BIAS], *sink = in[GQA_SINK];

  /* Workspace: only the split-K route has any. */
  onyx__attn_plan plan;
  gqa_plan(st, &g, &plan);
  uint64_t need = onyx__attn_partials_bytes(&plan, B, st->nq, S, H);
  float *partials = NULL;
  if (need > 0) {
    if (ctx->workspace == NULL || ctx->workspace_count < 1 || ctx->workspace[0].bytes < need ||
        ctx->workspace[0].data == NULL)
      return onyx__pc_error(ctx, ONYX_STATUS_WORKSPACE_TOO_SMALL,
                            "workspace region gqa_splitk_partials has %llu bytes, %llu needed",
                            (unsigned long long)(ctx->workspace != NULL && ctx->workspace_count > 0
                                                     ? ctx->workspace[0].bytes
                                                     : 0),
                            (unsigned long long)need);
    partials = ctx->workspace[0].data;
  }

  /* Outputs. */
  onyx_tensor *y = NULL, *qk = NULL;
  void *present[2] = {NULL, NULL};
  bool aliased[2] = {false, false};
  int64_t ydims[3] = {B, S, st->nq * H};
  if ((status = ctx->alloc_output(ctx, 0, dt, 3, ydims, &y)) != ONYX_STATUS_OK) return status;
  int64_t pdims[4] = {B, st->nkv, P, H};
  for (int i = 0; i < 2; ++i) {
    if (st->head.output_count <= (size_t)(1 + i) || !st->head.output_present[1 + i]) continue;
    const onyx_tensor *past = in[GQA_PAST_KEY + i];
    if (past != NULL && L >= T && ctx->alias_output != NULL &&
        ctx->alias_output(ctx, (size_t)(1 + i), (size_t)(GQA_PAST_KEY + i)) == ONYX_STATUS_OK) {
      aliased[i] = true;
      present[i] = past->data;
      continue;
    }
    onyx_tensor *view = NULL;
    if ((status = ctx->alloc_output(ctx, (size_t)(1 + i), dt, 4, pdims, &view)) != ONYX_STATUS_OK)
      return status;
    present[i] = view->data;
  }
  if (gqa_wants_qk(st)) {
    int64_t qdims[4] = {B, st->nq, S, T};
    if ((status = ctx->alloc_output(ctx, 3, dt, 4, qdims, &qk)) != ONYX_STATUS_OK) return status;
  }

  /* New rows: element (b, s, g, d) of the new keys and values. */
  size_t es = onyx_dtype_size(dt);
  const void *new_k, *new_v;
  int64_t k_bs, k_ss;
  if (g.packed) {
    new_k = onyx__attn_at(q->data, st->nq * H, es);
    new_v = onyx__attn_at(q->data, (st->nq + st->nkv) * H, es);
    k_bs = S * g.hidden;
    k_ss = g.hidden;
  } else {
    new_k = in[GQA_KEY]->data;
    new_v = in[GQA_VALUE]->data;
    k_bs = S * st->nkv * H;
    k_ss = st->nkv * H;
  }
  gqa_cache_strides past_s = gqa_cache(st, L, H), pres_s = gqa_cache(st, P, H);
  for (int i = 0; i < 2; ++i) {
    if (present[i] == NULL) continue;
    gqa_present_job job;
    memset(&job, 0, sizeof job);
    job.st = st;
    job.dtype = dt;
    job.batch = B;
    job.seq = S;
    job.head = H;
    job.present_rows = P;
    job.seqlens = seqlens;
    job.first = first;
    job.copy_past = !aliased[i];
    job.past = in[GQA_PAST_KEY + i] != NULL ? in[GQA_PAST_KEY + i]->data : NULL;
    job.ps = past_s;
    job.cs = pres_s;
    job.present = present[i];
    job.src = i == 0 ? new_k : new_v;
    job.src_bs = k_bs;
    job.src_ss = k_ss;
    job.rope = (i == 0 && st->rotary) ? &rope : NULL;
    job.pos_ids = pos_ids;
    job.pos_bs = pos_bs;
    job.pos_ss = pos_ss;
    job.pos_add_s = pos_add_s;
    if (job.past == NULL) job.copy_past = true; /* nothing to copy; zero the tail */
    onyx__attn_parallel_for(&st->head.threads, (size_t)(B * st->nkv), gqa_present_task, &job);
  }

  /* Attention. */
  gqa_geom_arg garg = {seqlens, first, present[0] != NULL && present[1] != NULL, S};
  onyx__attn_problem p;
  memset(&p, 0, sizeof p);
  p.dtype = dt;
  p.batch = B;
  p.nq = st->nq;
  p.nkv = st->nkv;
  p.sq = S;
  p.hk = H;
  p.hv = H;
  p.scale = st->scale > 0.0f ? st->scale : 1.0f / sqrtf((float)H);
  p.softcap = st->softcap;
  p.q = q->data;
  p.q_bs = S * g.hidden;
  p.q_ss = g.hidden;
  p.q_hs = H;
  p.y = y->data;
  p.y_bs = S * st->nq * H;
  p.y_ss = st->nq * H;
  p.y_hs = H;
  if (garg.from_present) {
    p.seg[0] = (onyx__attn_kv_seg){present[0], pres_s.bs, pres_s.gs, pres_s.rs,
                                   present[1], pres_s.bs, pres_s.gs, pres_s.rs};
  } else {
    if (in[GQA_PAST_KEY] != NULL)
      p.seg[0] = (onyx__attn_kv_seg){in[GQA_PAST_KEY]->data,   past_s.bs, past_s.gs, past_s.rs,
                                     in[GQA_PAST_VALUE]->data, past_s.bs, past_s.gs, past_s.rs};
    p.seg[1] = (onyx__attn_kv_seg){new_k, k_bs, H, k_ss, new_v, k_bs, H, k_ss};
  }
  p.geom = gqa_batch_geom;
  p.geom_arg = &garg;
  p.causal = st->causal;
  p.window = st->window > 0 ? st->window : 0;
  if (st->rotary) {
    p.rope = &rope;
    p.pos_ids = pos_ids;
    p.pos_bs = pos_bs;
    p.pos_ss = pos_ss;
    p.pos_add_s = pos_add_s;
  }
  p.mask_len = INT64_MAX;
  if (bias != NULL) {
    p.mask = bias->data;
    p.mask_dtype = dt;
    p.m_bs = bias->dims[0] == 1 ? 0 : bias->dims[1] * S * T;
    p.m_hs = bias->dims[1] == 1 ? 0 : S * T;
    p.m_ss = T;
    p.m_js = 1;
  }
  p.sink = sink != NULL ? sink->data : NULL;
  p.smooth = st->smooth;
  if (qk != NULL) {
    p.qk_mode = st->qk_output == 1 ? ONYX__ATTN_QK_GQA_SCORES : ONYX__ATTN_QK_GQA_PROBS;
    p.qk = qk->data;
    p.qk_cols = T;
  }
  p.partials = partials;
  onyx__attn_run(&st->head.threads, &p, &plan);
  return ONYX_STATUS_OK;
}

const onyx_kernel_table onyx_cpu_gqa_kernel = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "com.microsoft",
    .op_type = "GroupQueryAttention",
    .since_opset = 1,
    .until_opset = 0,
    .type_input = 0,
    .type_mask = ONYX__ATTN_FLOAT_TYPES,
    .supports = NULL,
    .create = gqa_create,
    .destroy = onyx__attn_state_free,
    .workspace = gqa_workspace,
    .compute = gqa_compute,
    .infer = gqa_infer,
};

/* ------------------------------------------------------------------ v3 */

/* The v3 definition (what the provider's factory registers): the same kernel, with the
 * planning callbacks' reasons going to the core's sink. */
static onyx_status gqa_create3(void *instance, const onyx_node_info *node, void **out_state,
                               onyx_sink *err) {
  return onyx__pc_create_via_v2(gqa_create, instance, node, out_state, err);
}

static onyx_status gqa_compute3(void *state, onyx_compute_ctx *ctx,
                                const onyx_tensor *const *inputs, size_t input_count,
                                onyx_sink *err) {
  (void)err; /* ctx->set_error reaches the same place */
  return gqa_compute(state, ctx, inputs, input_count);
}

static const onyx_type_constraint gqa_types[] = {
    {ONYX_TYPE_INPUT, GQA_QUERY, ONYX__ATTN_FLOAT_TYPES}};

const onyx_kernel_def onyx_cpu_gqa_def = {
    .struct_size = sizeof(onyx_kernel_def),
    .version = ONYX_ABI_V3,
    .domain = "com.microsoft",
    .op_type = "GroupQueryAttention",
    .since_opset = 1,
    .until_opset = 0,
    .types = gqa_types,
    .type_count = sizeof gqa_types / sizeof gqa_types[0],
    .create = gqa_create3,
    .destroy = onyx__attn_state_free,
    .infer = gqa_infer3,
    .workspace = gqa_workspace3,
    .compute = gqa_compute3,
};
