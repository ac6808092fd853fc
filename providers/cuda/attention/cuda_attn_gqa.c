/*
 * com.microsoft GroupQueryAttention (since 1) on CUDA.
 *
 * Inputs 0..11: query (or packed QKV), key, value, past_key, past_value, seqlens_k,
 * total_sequence_length, cos_cache, sin_cache, position_ids, attention_bias, head_sink.
 * Semantics are those of the CPU kernel (providers/cpu/attention/attn_gqa.c), which
 * follows ONNX Runtime:
 * - total_sequence_length T must be past_len + S (a growing cache) or at most past_len
 *   (a fixed-capacity cache); the first prompt is S == T (then every past_b is 0).
 * - Row b holds total_b = seqlens_k[b] + 1 tokens; past_b = total_b − S otherwise. Query
 *   row s sits at p = past_b + s and sees keys [max(0, p − W + 1), min(p, total_b − 1)].
 * - Rotary: query rows are rotated as the attention kernel loads them; new key rows as
 *   they are written into present, so the kernels read present alone.
 * - present (B, Nkv, max(T, L), H): past rows, new rows, zeros after — or, when past_len
 *   >= T and the core lets present alias past, the past buffer itself with the new rows
 *   written in place (ONNX Runtime's shared buffer).
 * - kv_layout = 1 keeps the declared (B, Nkv, L, H) shape of past/present but lays the
 *   bytes out (B, L, Nkv, H) (seq-major); 0 is BNSH.
 *
 * Routes: float16/bfloat16 with head size 64, 80, 96, 128 or 256 run the tensor-core
 * kernel (cuda_attn_flash.cu), or on an sm_90 device the Hopper kernel
 * (cuda_attn_hopper.cu) for prefill it takes, or the decode kernel (cuda_attn_decode.cu)
 * for decode and short chunks it takes (cuda_attn_route.c); float32 and other head sizes
 * the reference kernel. On a shared buffer the decode kernel also writes the new rows
 * (keys rotated) into present, so no fill runs.
 * Workspace (each region only on its route; see cuda_attn_plan.c):
 *   gqa_splitk_partials  STEP: flash or decode route with a key split (decode with few
 *                        batch·kv heads): partials
 *   gqa_split_counters   SESSION, beside the partials: the decode route's arrival
 *                        counters, one per (b, kv head), zeroed once where the view is
 *                        new to the node and left zero by every launch (no memset a step)
 *   gqa_scores           STEP: reference route only
 * No transposes (Q, packed QKV and Y are read and written in place) and no staging.
 *
 * Not taken here (supports() says so and placement falls back): qk_output, quantized
 * KV, the windowed cache, later ONNX Runtime inputs, nodes without both presents.
 *
 * total_sequence_length sets the present shape: the table lists it in host_inputs, so the
 * core hands it over in host memory (as ONNX Runtime keeps it on the CPU) and it is read
 * in place, with no copy back and no stream sync. seqlens_k and position_ids stay on the
 * device and are never read back (decode stays free of host round trips): out-of-range
 * values are clamped there (a row then sees fewer keys, positions stick to the table's
 * ends) instead of being reported as the CPU kernel does.
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

typedef struct gqa_state {
  onyx__cuda_attn_node head;
  int64_t nq, nkv;
  float scale; /* 0: 1/sqrt(H) */
  float softcap;
  int64_t window; /* > 0 or -1 */
  bool causal, rotary, interleaved, smooth;
  int64_t kv_layout; /* 0 BNSH, 1 BSNH */
  /* The split counters' SESSION view: where it was zeroed last, and how many bytes. */
  void *counters_zeroed;
  uint64_t counters_zeroed_bytes;
} gqa_state;

static const char *const gqa_op = "GroupQueryAttention";

static bool gqa_supports(const onyx_node_info *node, char *reason, size_t cap) {
  /* A wrong type reads as the default here; create() reports it. */
  int64_t qk = 0, swc = 0, bits = 0;
  (void)onyx__pc_attr_int(node, "qk_output", 0, &qk);
  (void)onyx__pc_attr_int(node, "sliding_window_cache", 0, &swc);
  (void)onyx__pc_attr_int(node, "kv_cache_bit_width", 0, &bits);
  const char *why = NULL;
  if (qk != 0)
    why = "qk_output is not supported by the CUDA kernel";
  else if (swc != 0)
    why = "sliding_window_cache = 1 is not supported by the CUDA kernel";
  else if (bits != 0 || !onyx__pc_attr_string_is(node, "k_quant_type", "NONE") ||
           !onyx__pc_attr_string_is(node, "v_quant_type", "NONE"))
    why = "a quantized KV cache is not supported by the CUDA kernel";
  else if (node->output_count < 3 ||
           (node->output_present != NULL && (!node->output_present[1] || !node->output_present[2])))
    why = "the CUDA kernel needs both present_key and present_value named";
  for (size_t i = GQA_INPUTS; why == NULL && i < node->input_count; ++i)
    if (node->input_present == NULL || node->input_present[i])
      why = "inputs past head_sink (quantized-KV scales, Q/K norms) are not supported";
  if (why != NULL && reason != NULL && cap > 0) snprintf(reason, cap, "%s", why);
  return why == NULL;
}

static onyx_status gqa_create(void *provider_state, const onyx_node_info *node, void **out_state,
                              char *err, size_t err_cap) {
  (void)provider_state;
  onyx__pc_gqa_attrs a = {.window = -1, .causal = 1};
  int64_t rotary = 0, inter = 0, smooth = 0;
  onyx_status st;
  if ((st = onyx__pc_attr_read_int(node, "num_heads", 0, &a.nq, err, err_cap)) ||
      (st = onyx__pc_attr_read_int(node, "kv_num_heads", 0, &a.nkv, err, err_cap)) ||
      (st = onyx__pc_attr_read_float(node, "scale", 0.0f, &a.scale, err, err_cap)) ||
      (st = onyx__pc_attr_read_float(node, "softcap", 0.0f, &a.softcap, err, err_cap)) ||
      (st = onyx__pc_attr_read_int(node, "local_window_size", -1, &a.window, err, err_cap)) ||
      (st = onyx__pc_attr_read_int(node, "do_rotary", 0, &rotary, err, err_cap)) ||
      (st = onyx__pc_attr_read_int(node, "rotary_interleaved", 0, &inter, err, err_cap)) ||
      (st = onyx__pc_attr_read_int(node, "smooth_softmax", 0, &smooth, err, err_cap)) ||
      (st = onyx__pc_attr_read_int(node, "kv_layout", 0, &a.kv_layout, err, err_cap)) ||
      (st = onyx__pc_attr_read_int(node, "causal", 1, &a.causal, err, err_cap)))
    return st;
  char why[128];
  if (!gqa_supports(node, why, sizeof why))
    return onyx__pc_fail(err, err_cap, ONYX_STATUS_UNSUPPORTED, "%s: %s", gqa_op, why);
  if ((st = onyx__pc_gqa_attrs_check(&a, err, err_cap)) != ONYX_STATUS_OK) return st;
  if (node->output_count < 1 || (node->output_present != NULL && !node->output_present[0]))
    return onyx__pc_fail(err, err_cap, ONYX_STATUS_INVALID_MODEL,
                         "%s: output 0 (output) must be named", gqa_op);
  gqa_state *s = onyx__cuda_attn_state_new(sizeof *s, node, gqa_op, err, err_cap);
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
  s->kv_layout = a.kv_layout;
  *out_state = s;
  return ONYX_STATUS_OK;
}

/* ------------------------------------------------------------------ geometry */

/* Input geometry: checked in providers/common/attn_params.c, shared with the CPU. */
typedef onyx__pc_gqa_geom gqa_geom;

static const onyx__pc_head_limit gqa_head_limit = {0, ONYX__CUDA_ATTN_REF_MAX_HEAD,
                                                   "CUDA kernels'"};

static onyx_status gqa_geometry(const gqa_state *st, const onyx_tensor *const *in, gqa_geom *g,
                                char *msg, size_t cap) {
  return onyx__pc_gqa_geometry(st->nq, st->nkv, in, &gqa_head_limit, g, msg, cap);
}

/* The plan of a geometry: keys of any row are bounded by L + S (T is L + S or <= L). */
static void gqa_plan(const gqa_state *st, uint32_t dtype, const gqa_geom *g,
                     onyx__cuda_attn_plan *plan) {
  onyx__cuda_attn_plan_make(dtype, g->batch, st->nq, st->nkv, g->seq, g->head, g->head,
                            g->past_len + g->seq, plan);
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
    return onyx__pc_sink_fail(err, ONYX_STATUS_OK, "%s: %s", gqa_op, msg);
  onyx__cuda_attn_plan plan;
  gqa_plan(st, in[GQA_QUERY]->dtype, &g, &plan);
  onyx__cuda_attn_region(out_req, "gqa_splitk_partials", plan.partials_bytes);
  onyx__cuda_attn_region(out_req, "gqa_scores", plan.scores_bytes);
  /* SESSION: the decode route's counters are left zero by each launch (no memset in a
   * step), so they must outlive it; zeroed where the view is new to this node. */
  if (plan.counters_bytes > 0 && out_req->count < ONYX_MAX_WORKSPACE_REGIONS)
    out_req->regions[out_req->count++] = (onyx_workspace_region){
        "gqa_split_counters", plan.counters_bytes, 256, ONYX_LIFETIME_SESSION};
  return ONYX_STATUS_OK;
}

static onyx_status gqa_workspace(void *state, const onyx_tensor *inputs, size_t input_count,
                                 onyx_workspace_requirement *out_req) {
  return gqa_workspace3(state, inputs, input_count, out_req, NULL);
}

/* The present length is a value: UNSUPPORTED, and why, when planning does not have it. */
static onyx_status gqa_planned_total(const onyx_tensor *t, onyx_sink *err) {
  if (t == NULL)
    return onyx__pc_sink_fail(err, ONYX_STATUS_UNSUPPORTED,
                              "%s: input 6 (total_sequence_length) is absent; the present "
                              "shape needs its value",
                              gqa_op);
  if (t->dtype != ONYX_DTYPE_INT32)
    return onyx__pc_sink_fail(err, ONYX_STATUS_UNSUPPORTED,
                              "%s: input 6 (total_sequence_length) is %s; int32 expected", gqa_op,
                              onyx__pc_dtype_name(t->dtype));
  if (t->data == NULL)
    return onyx__pc_sink_fail(err, ONYX_STATUS_UNSUPPORTED,
                              "%s: the value of input 6 (total_sequence_length) is not known "
                              "when planning; the present shape needs it",
                              gqa_op);
  return ONYX_STATUS_OK;
}

/* Every geometry failure is INVALID_ARGUMENT here, as it always was. */
static onyx_status gqa_infer3(void *state, const onyx_tensor *inputs, size_t input_count,
                              onyx_tensor *outputs, size_t output_count, onyx_sink *err) {
  const gqa_state *st = state;
  const onyx_tensor *in[GQA_INPUTS];
  gqa_planning_inputs(inputs, input_count, in);
  gqa_geom g;
  char msg[512];
  if (gqa_geometry(st, in, &g, msg, sizeof msg) != ONYX_STATUS_OK)
    return onyx__pc_sink_fail(err, ONYX_STATUS_INVALID_ARGUMENT, "%s: %s", gqa_op, msg);
  const onyx_tensor *total = in[GQA_TOTAL];
  onyx_status status;
  if (output_count > 1 && (status = gqa_planned_total(total, err)) != ONYX_STATUS_OK) return status;
  uint32_t dt = in[GQA_QUERY]->dtype;
  for (size_t i = 0; i < output_count; ++i) memset(&outputs[i], 0, sizeof outputs[i]);
  if (output_count > 0) {
    outputs[0].dtype = dt;
    outputs[0].rank = 3;
    outputs[0].dims[0] = g.batch;
    outputs[0].dims[1] = g.seq;
    outputs[0].dims[2] = st->nq * g.head;
  }
  if (output_count > 1) {
    int64_t T = ((const int32_t *)total->data)[0];
    int64_t P = T > g.past_len ? T : g.past_len;
    for (size_t i = 1; i < 3 && i < output_count; ++i) {
      outputs[i].dtype = dt;
      outputs[i].rank = 4;
      outputs[i].dims[0] = g.batch;
      outputs[i].dims[1] = st->nkv;
      outputs[i].dims[2] = P;
      outputs[i].dims[3] = g.head;
    }
  }
  return ONYX_STATUS_OK;
}

static onyx_status gqa_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                             onyx_tensor *outputs, size_t output_count) {
  return gqa_infer3(state, inputs, input_count, outputs, output_count, NULL);
}

/* ------------------------------------------------------------------ compute */

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

/* What the CUDA kernels cannot run, from the geometry alone. total_sequence_length is
 * an int32, so the present's max(T, L) rows pass 2^31 - 1 only through the past. */
static onyx_status gqa_limits(onyx_compute_ctx *ctx, const gqa_state *st, const gqa_geom *g) {
  if (g->batch == 0 || g->seq == 0)
    return onyx__pc_error(ctx, ONYX_STATUS_UNSUPPORTED, "empty batch or sequence (%lld, %lld)",
                          (long long)g->batch, (long long)g->seq);
  if (g->batch * st->nkv > 65535)
    return onyx__pc_error(ctx, ONYX_STATUS_UNSUPPORTED,
                          "batch %lld times kv heads %lld exceeds the CUDA kernel's grid",
                          (long long)g->batch, (long long)st->nkv);
  if (g->past_len > INT32_MAX)
    return onyx__pc_error(ctx, ONYX_STATUS_UNSUPPORTED,
                          "a KV cache of %lld rows exceeds the CUDA kernel's 2^31 - 1",
                          (long long)g->past_len);
  return ONYX_STATUS_OK;
}

/* Where the new rows are: element (b, s, g, d) at kv[i] + b·bs + s·ss + g·H + d. */
typedef struct gqa_new_rows {
  const void *const *kv;
  int64_t bs, ss;
} gqa_new_rows;

/* Writes present i (0 keys, 1 values): past rows unless the buffer is shared (copy_past
 * false), the new rows (keys rotated), zeros after. */
static int gqa_fill(const gqa_state *st, const onyx__cuda_attn_params *p, int i,
                    const gqa_new_rows *src, void *present, bool copy_past, const onyx_tensor *past,
                    int64_t L, int64_t P, void *stream) {
  const int64_t H = p->hk;
  gqa_cache_strides ps = gqa_cache(st, L, H), cs = gqa_cache(st, P, H);
  onyx__cuda_kv_fill f;
  memset(&f, 0, sizeof f);
  f.dtype = p->dtype;
  f.batch = p->batch;
  f.nkv = p->nkv;
  f.head = (int32_t)H;
  f.seq = p->sq;
  f.rows = P;
  f.dst = present;
  f.d_bs = cs.bs;
  f.d_gs = cs.gs;
  f.d_rs = cs.rs;
  f.past = past != NULL ? past->data : NULL;
  f.p_bs = ps.bs;
  f.p_gs = ps.gs;
  f.p_rs = ps.rs;
  f.src = src->kv[i];
  f.s_bs = src->bs;
  f.s_gs = H;
  f.s_rs = src->ss;
  f.copy_past = copy_past;
  f.past_cap = L;
  f.mode = ONYX__CUDA_ATTN_GQA;
  f.seqlens = p->seqlens;
  f.first = p->first;
  if (i == 0 && st->rotary) {
    f.cos = p->cos;
    f.sin = p->sin;
    f.rot_half = p->rot_half;
    f.rot_rows = p->rot_rows;
    f.interleaved = p->interleaved;
    f.pos_ids = p->pos_ids;
    f.pos_bs = p->pos_bs;
    f.pos_ss = p->pos_ss;
    f.pos_add_s = p->pos_add_s;
  }
  return onyx__cuda_attn_kv_fill(&f, stream);
}

/* The first prompt (every past_b 0, presents of S rows) on the Hopper route: attention
 * reads the new rows where they are and the kernel copies them into the presents beside
 * its matrix products, so no fill launch runs first (H200: +4 % at B1 S4096, +15-24 % at
 * short prompts of large batches, where the fill launch weighed most). Returns
 * ONYX__CUDA_ATTN_NOT_TAKEN where the kernel does not take it (nothing ran). */
static int gqa_run_fused_present(const onyx__cuda_attn_params *base,
                                 const onyx__cuda_attn_plan *plan, const void *const new_kv[2],
                                 int64_t k_bs, int64_t k_ss, void *const present[2],
                                 gqa_cache_strides cs, void *stream) {
  if (onyx__cuda_attn_fused_present == 0) return ONYX__CUDA_ATTN_NOT_TAKEN;
  onyx__cuda_attn_params p = *base;
  p.k = new_kv[0];
  p.v = new_kv[1];
  p.k_bs = p.v_bs = k_bs;
  p.k_gs = p.v_gs = p.hk;
  p.k_rs = p.v_rs = k_ss;
  p.kv_rows = p.sq;
  p.fill_present = 1;
  p.present_k = present[0];
  p.present_v = present[1];
  p.pr_bs = cs.bs;
  p.pr_gs = cs.gs;
  p.pr_rs = cs.rs;
  if (onyx__cuda_attn_hopper_refusal(&p, plan) != NULL) return ONYX__CUDA_ATTN_NOT_TAKEN;
  return onyx__cuda_attn_run(&p, plan, NULL, p.sq, stream);
}

static onyx_status gqa_compute(void *state, onyx_compute_ctx *ctx, const onyx_tensor *const *inputs,
                               size_t input_count) {
  const gqa_state *st = state;
  for (size_t i = GQA_INPUTS; i < input_count; ++i)
    if (inputs[i] != NULL)
      return onyx__pc_error(ctx, ONYX_STATUS_UNSUPPORTED,
                            "input %zu is not supported by the CUDA kernel", i);
  const onyx_tensor *in[GQA_INPUTS];
  for (size_t i = 0; i < GQA_INPUTS; ++i) in[i] = onyx__cuda_attn_input(inputs, input_count, i);
  onyx_status status = onyx__cuda_attn_check_device(ctx, in, GQA_INPUTS, 1u << GQA_TOTAL);
  if (status != ONYX_STATUS_OK) return status;
  const onyx_tensor *q = in[GQA_QUERY];
  char msg[512];
  gqa_geom g;
  if ((status = gqa_geometry(st, in, &g, msg, sizeof msg)) != ONYX_STATUS_OK)
    return onyx__pc_error(ctx, status, "%s", msg);
  uint32_t dt = q->dtype;
  if (dt != ONYX_DTYPE_FLOAT32 && dt != ONYX_DTYPE_FLOAT16 && dt != ONYX_DTYPE_BFLOAT16)
    return onyx__pc_error(ctx, ONYX_STATUS_UNSUPPORTED,
                          "query has type %s; float32, float16 or bfloat16 expected",
                          onyx__pc_dtype_name(dt));
  int64_t S = g.seq, B = g.batch, H = g.head, L = g.past_len;
  if ((status = gqa_limits(ctx, st, &g)) != ONYX_STATUS_OK) return status;
  /* Everything beside inputs 0..4 is checked once for every provider; seqlens_k and
   * position_ids stay on the device, so only their shapes are (values are clamped). */
  onyx__pc_gqa_run run;
  if ((status = onyx__pc_gqa_input_shapes(st->nq, st->rotary, in, &g, &run, msg, sizeof msg)) !=
      ONYX_STATUS_OK)
    return onyx__pc_error(ctx, status, "%s", msg);
  const onyx_tensor *seqlens_t = in[GQA_SEQLENS];
  int64_t T = run.total;
  bool first = run.first;
  int64_t P = T > L ? T : L;

  /* Rotary tables and positions (their shapes checked above). */
  onyx__cuda_attn_params p;
  memset(&p, 0, sizeof p);
  if (st->rotary) {
    const onyx_tensor *cos = in[GQA_COS], *sin = in[GQA_SIN], *pos = in[GQA_POS];
    p.cos = cos->data;
    p.sin = sin->data;
    p.rot_half = (int32_t)cos->dims[1];
    p.rot_rows = cos->dims[0];
    p.interleaved = st->interleaved;
    if (pos != NULL) {
      p.pos_ids = pos->data;
      if (first) { /* ONNX Runtime reads only position_ids[0, 0] in the first prompt */
        p.pos_add_s = 1;
      } else {
        p.pos_bs = S;
        p.pos_ss = 1;
      }
    }
  }
  const onyx_tensor *bias = in[GQA_BIAS], *sink = in[GQA_SINK];

  /* Workspace of this route. */
  onyx__cuda_attn_plan plan;
  gqa_plan(st, dt, &g, &plan);
  void *partials = NULL, *scores = NULL, *counters = NULL;
  if (plan.partials_bytes > 0 &&
      (status = onyx__cuda_attn_workspace(ctx, "gqa_splitk_partials", plan.partials_bytes,
                                          &partials)) != ONYX_STATUS_OK)
    return status;
  if (plan.scores_bytes > 0 &&
      (status = onyx__cuda_attn_workspace(ctx, "gqa_scores", plan.scores_bytes, &scores)) !=
          ONYX_STATUS_OK)
    return status;
  if (plan.counters_bytes > 0 &&
      (status = onyx__cuda_attn_workspace(ctx, "gqa_split_counters", plan.counters_bytes,
                                          &counters)) != ONYX_STATUS_OK)
    return status;
  gqa_state *mut = state;
  if (counters != NULL &&
      (counters != mut->counters_zeroed || plan.counters_bytes > mut->counters_zeroed_bytes)) {
    int e = onyx__cuda_attn_zero(counters, plan.counters_bytes, ctx->stream);
    if (e != 0) return onyx__cuda_attn_launch_error(ctx, "split counters' zeroing", e);
    mut->counters_zeroed = counters;
    mut->counters_zeroed_bytes = plan.counters_bytes;
  }

  /* Outputs. */
  onyx_tensor *y = NULL;
  void *present[2] = {NULL, NULL};
  bool aliased[2] = {false, false};
  int64_t ydims[3] = {B, S, st->nq * H};
  if ((status = ctx->alloc_output(ctx, 0, dt, 3, ydims, &y)) != ONYX_STATUS_OK) return status;
  int64_t pdims[4] = {B, st->nkv, P, H};
  for (int i = 0; i < 2; ++i) {
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

  /* New rows: element (b, s, g, d) of the new keys and values. */
  size_t es = onyx_dtype_size(dt);
  const void *new_kv[2];
  int64_t k_bs, k_ss;
  if (g.packed) {
    new_kv[0] = (const unsigned char *)q->data + (size_t)(st->nq * H) * es;
    new_kv[1] = (const unsigned char *)q->data + (size_t)((st->nq + st->nkv) * H) * es;
    k_bs = S * g.hidden;
    k_ss = g.hidden;
  } else {
    new_kv[0] = in[GQA_KEY]->data;
    new_kv[1] = in[GQA_VALUE]->data;
    k_bs = S * st->nkv * H;
    k_ss = st->nkv * H;
  }
  gqa_cache_strides cs = gqa_cache(st, P, H);
  /* Attention over present, set up before the fill: on a shared buffer the decode route
   * writes the new rows itself (no fill launches). */
  p.dtype = dt;
  p.batch = (int32_t)B;
  p.nq = (int32_t)st->nq;
  p.nkv = (int32_t)st->nkv;
  p.group = (int32_t)(st->nq / st->nkv);
  p.sq = (int32_t)S;
  p.hk = p.hv = (int32_t)H;
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
  p.k = present[0];
  p.v = present[1];
  p.k_bs = p.v_bs = cs.bs;
  p.k_gs = p.v_gs = cs.gs;
  p.k_rs = p.v_rs = cs.rs;
  p.kv_rows = P;
  p.mode = ONYX__CUDA_ATTN_GQA;
  p.seqlens = seqlens_t->data;
  p.first = first;
  p.mask_len = INT64_MAX;
  p.causal = st->causal;
  p.window = st->window > 0 ? st->window : 0;
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
  p.partials = partials;
  p.counters = counters;
  p.n_split = plan.n_split;
  p.shared_kv = aliased[0] || aliased[1];
  if (aliased[0] && aliased[1] && onyx__cuda_attn_decode_refusal(&p, &plan) == NULL) {
    p.append = 1;
    p.new_k = new_kv[0];
    p.new_v = new_kv[1];
    p.nk_bs = k_bs;
    p.nk_gs = H;
    p.nk_ss = k_ss;
  }
  if (!p.append) {
    if (first && !aliased[0] && !aliased[1] && P == S && !st->rotary) {
      int e = gqa_run_fused_present(&p, &plan, new_kv, k_bs, k_ss, present, cs, ctx->stream);
      if (e != ONYX__CUDA_ATTN_NOT_TAKEN)
        return e == 0 ? ONYX_STATUS_OK
                      : onyx__cuda_attn_launch_error(ctx, "GroupQueryAttention kernel", e);
    }
    gqa_new_rows src = {new_kv, k_bs, k_ss};
    for (int i = 0; i < 2; ++i) {
      int e = gqa_fill(st, &p, i, &src, present[i], !aliased[i], in[GQA_PAST_KEY + i], L, P,
                       ctx->stream);
      if (e != 0) return onyx__cuda_attn_launch_error(ctx, "present fill", e);
    }
  }

  int e = onyx__cuda_attn_run(&p, &plan, scores, P, ctx->stream);
  if (e != 0) return onyx__cuda_attn_launch_error(ctx, "GroupQueryAttention kernel", e);
  return ONYX_STATUS_OK;
}

const onyx_kernel_table onyx_cuda_gqa_kernel = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "com.microsoft",
    .op_type = "GroupQueryAttention",
    .since_opset = 1,
    .until_opset = 0,
    .type_input = 0,
    .type_mask = ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT32) | ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT16) |
                 ONYX_DTYPE_BIT(ONYX_DTYPE_BFLOAT16),
    .supports = gqa_supports,
    .create = gqa_create,
    .destroy = onyx__cuda_attn_state_free,
    .workspace = gqa_workspace,
    .compute = gqa_compute,
    .infer = gqa_infer,
    .host_inputs = UINT64_C(1) << GQA_TOTAL, /* total_sequence_length, read in place */
};

/* ------------------------------------------------------------------ v3 */

/* The v3 definition (what the provider's factory registers on every GPU): the same
 * kernel, with the planning callbacks' reasons going to the core's sink. */
static onyx_status gqa_supports3(void *instance, const onyx_node_info *node, onyx_sink *err) {
  (void)instance;
  return onyx__pc_supports_via_v2(gqa_supports, node, err);
}

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

static const onyx_type_constraint gqa_types[] = {{ONYX_TYPE_INPUT, GQA_QUERY,
                                                  ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT32) |
                                                      ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT16) |
                                                      ONYX_DTYPE_BIT(ONYX_DTYPE_BFLOAT16)}};

const onyx_kernel_def onyx_cuda_gqa_def = {
    .struct_size = sizeof(onyx_kernel_def),
    .version = ONYX_ABI_V3,
    .domain = "com.microsoft",
    .op_type = "GroupQueryAttention",
    .since_opset = 1,
    .until_opset = 0,
    .types = gqa_types,
    .type_count = sizeof gqa_types / sizeof gqa_types[0],
    .host_inputs = UINT64_C(1) << GQA_TOTAL, /* total_sequence_length, read in place */
    .supports = gqa_supports3,
    .create = gqa_create3,
    .destroy = onyx__cuda_attn_state_free,
    .infer = gqa_infer3,
    .workspace = gqa_workspace3,
    .compute = gqa_compute3,
};
