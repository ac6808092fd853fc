/*
 * ai.onyx::RMSNormMatMul (docs/ops.md): an RMS norm of X (+ skip) and the product of
 * the normed rows with a constant weight, in one node,
 *
 *   S = X + skip    Y = (S · invrms(S) · gamma) · W      outputs Y and S
 *
 * The norm_matmul optimization makes it from SkipSimplifiedLayerNormalization (or
 * SimplifiedLayerNormalization) and the MatMul that is the normed output's only
 * reader. Here the normed rows are computed exactly as cpu_norm.c computes them (float32:
 * the sum in float, the squares summed in double; 16-bit: double throughout, rounded to
 * T once) into a buffer of T, and the product runs through the same float32 GEMM as
 * the MatMul kernel, so float32 gives the unfused pair's bits where that MatMul takes the
 * same route (docs/ops.md says which). W is read as [K, N] only: transB = 1 (the [N, K]
 * layout the transpose_weights optimization gives a provider that takes it) is declined.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_impl.h"

extern const onyx_kernel_table onyx__cpu_k_rms_norm_matmul;

#define CPU_NMM_TYPES                                                                              \
  (ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT32) | ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT16) |                       \
   ONYX_DTYPE_BIT(ONYX_DTYPE_BFLOAT16))

enum { NMM_X, NMM_SKIP, NMM_GAMMA, NMM_W, NMM_INPUTS };

typedef struct cpu_nmm_state {
  onyx__cpu_node base;
  float epsilon;
  onyx__cpu_fused_w w; /* W, packed at create where it can be */
} cpu_nmm_state;

/* The checks shared by compute and infer: Y's shape in dims, or a message in why. */
static onyx_status cpu_nmm_shape(const onyx_tensor *x, const onyx_tensor *skip,
                                 const onyx_tensor *gamma, const onyx_tensor *w, int64_t *dims,
                                 char *why, size_t cap) {
  if (!onyx__cpu_dtype_in(x->dtype, CPU_NMM_TYPES))
    return onyx__cpu_fail(why, cap, ONYX_STATUS_UNSUPPORTED,
                          "input 0 has dtype %s; float32, float16 or bfloat16 expected",
                          onyx__cpu_dtype_name(x->dtype));
  if ((skip && skip->dtype != x->dtype) || gamma->dtype != x->dtype || w->dtype != x->dtype)
    return onyx__cpu_fail(why, cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "skip, gamma and W must have input 0's dtype %s",
                          onyx__cpu_dtype_name(x->dtype));
  if (x->rank < 1 || w->rank != 2 || x->dims[x->rank - 1] != w->dims[0] || w->dims[0] < 1)
    return onyx__cpu_fail(why, cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "input 0 %s and W %s: [..., K] and [K, N] with K >= 1 expected",
                          onyx__cpu_tensor_shape(x).s, onyx__cpu_tensor_shape(w).s);
  if (gamma->rank != 1 || gamma->dims[0] != w->dims[0])
    return onyx__cpu_fail(why, cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "gamma %s must be [K] with K = %lld", onyx__cpu_tensor_shape(gamma).s,
                          (long long)w->dims[0]);
  if (skip &&
      (skip->rank != x->rank || memcmp(skip->dims, x->dims, x->rank * sizeof x->dims[0]) != 0))
    return onyx__cpu_fail(why, cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "skip %s must have input 0's shape %s", onyx__cpu_tensor_shape(skip).s,
                          onyx__cpu_tensor_shape(x).s);
  memcpy(dims, x->dims, x->rank * sizeof dims[0]);
  dims[x->rank - 1] = w->dims[1];
  return ONYX_STATUS_OK;
}

/* Row r normed into a (T), S into sum (may be NULL), as cpu_norm.c's rows. */
static void cpu_nmm_norm_row(const cpu_nmm_state *s, const onyx_tensor *x, const onyx_tensor *skip,
                             const onyx_tensor *gamma, int64_t r, int64_t k, void *a, void *sum) {
  const uint32_t t = x->dtype;
  double s2 = 0;
  if (t == ONYX_DTYPE_FLOAT32) {
    const float *xr = (const float *)x->data + r * k, *g = gamma->data;
    const float *sk = skip ? (const float *)skip->data + r * k : NULL;
    float *ar = (float *)a + r * k, *sr = sum ? (float *)sum + r * k : NULL;
    for (int64_t c = 0; c < k; ++c) {
      float v = xr[c];
      if (sk) v += sk[c];
      if (sr) sr[c] = v;
      ar[c] = v; /* kept until the scale is known */
      s2 += (double)v * v;
    }
    const float fi = (float)(1.0 / sqrt((k ? s2 / (double)k : 0.0) + (double)s->epsilon));
    for (int64_t c = 0; c < k; ++c) ar[c] = (ar[c] - 0.0f) * fi * g[c];
    return;
  }
  for (int64_t c = 0; c < k; ++c) {
    double v = onyx__cpu_load_f64(t, x->data, r * k + c);
    if (skip) v += onyx__cpu_load_f64(t, skip->data, r * k + c);
    s2 += v * v;
    if (sum) onyx__cpu_store_f64(t, sum, r * k + c, v);
  }
  const double inv = 1.0 / sqrt((k ? s2 / (double)k : 0.0) + (double)s->epsilon);
  for (int64_t c = 0; c < k; ++c) {
    double v = onyx__cpu_load_f64(t, x->data, r * k + c);
    if (skip) v += onyx__cpu_load_f64(t, skip->data, r * k + c);
    onyx__cpu_store_f64(t, a, r * k + c, v * inv * onyx__cpu_load_f64(t, gamma->data, c));
  }
}

static onyx_status cpu_nmm_compute(void *state, onyx_compute_ctx *ctx, const onyx_tensor *const *in,
                                   size_t input_count) {
  const cpu_nmm_state *s = state;
  /* A W packed at create may come without data (the core freed the original). */
  const onyx_tensor *checked[NMM_INPUTS] = {NULL};
  for (size_t i = 0; i < input_count && i < NMM_INPUTS; ++i)
    checked[i] = i == NMM_W && s->w.packed.data ? NULL : in[i];
  onyx_status st =
      onyx__cpu_check_inputs(ctx, checked, input_count < NMM_INPUTS ? input_count : NMM_INPUTS, 1);
  if (st != ONYX_STATUS_OK) return st;
  if (input_count != NMM_INPUTS || !in[NMM_X] || !in[NMM_GAMMA] || !in[NMM_W]) {
    ctx->set_error(ctx, "RMSNormMatMul takes X, skip (may be absent), gamma and W; got %zu inputs",
                   input_count);
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  const onyx_tensor *x = in[NMM_X], *skip = in[NMM_SKIP], *gamma = in[NMM_GAMMA], *w = in[NMM_W];
  int64_t dims[ONYX_MAX_RANK];
  char why[ONYX__CPU_REASON_CAP] = "";
  st = cpu_nmm_shape(x, skip, gamma, w, dims, why, sizeof why);
  if (st != ONYX_STATUS_OK) {
    ctx->set_error(ctx, "%s", why);
    return st;
  }
  st = onyx__cpu_fused_check_packed(&s->w, ctx, x->dtype, w);
  if (st != ONYX_STATUS_OK) return st;
  onyx_tensor *y = NULL, *sum = NULL;
  st = onyx__cpu_alloc_output(&s->base, ctx, x->dtype, x->rank, dims, &y);
  if (st == ONYX_STATUS_OK && skip)
    st = onyx__cpu_alloc_output_at(&s->base, ctx, 1, x->dtype, x->rank, x->dims, &sum);
  if (st != ONYX_STATUS_OK) return st;
  const int64_t k = w->dims[0], n = w->dims[1], rows = k ? onyx_tensor_numel(x) / k : 0;
  const onyx__cpu_fused_scratch sc =
      onyx__cpu_fused_scratch_of(&s->w, s->base.provider, x->dtype, rows, k, n);
  if (sc.total == 0 || y == NULL) {
    for (int64_t r = 0; sum && r < rows; ++r) /* no product: S alone */
      cpu_nmm_norm_row(s, x, skip, gamma, r, k, sum->data, sum->data);
    return ONYX_STATUS_OK;
  }
  const onyx_workspace_view *v = ctx->workspace_count > 0 ? &ctx->workspace[0] : NULL;
  if (v == NULL || v->data == NULL || v->bytes < sc.total) {
    ctx->set_error(ctx,
                   "workspace region 0 (rms_norm_matmul_scratch) has %llu bytes, %llu required",
                   v ? (unsigned long long)v->bytes : 0ull, (unsigned long long)sc.total);
    return ONYX_STATUS_WORKSPACE_TOO_SMALL;
  }
  for (int64_t r = 0; r < rows; ++r)
    cpu_nmm_norm_row(s, x, skip, gamma, r, k, v->data, sum ? sum->data : NULL);
  onyx__cpu_fused_product(&s->w, s->base.provider, x->dtype, &sc, v->data, w, rows, y->data);
  return ONYX_STATUS_OK;
}

/* One region: the normed rows (T), then the GEMM's scratch (onyx__cpu_fused_scratch).
 * SESSION, kept by the node per geometry, not STEP: a STEP block is granted anew every
 * run, and a decode step should allocate nothing (plan_cache_test). */
static onyx_status cpu_nmm_workspace(void *state, const onyx_tensor *in, size_t input_count,
                                     onyx_workspace_requirement *req) {
  req->count = 0;
  if (input_count != NMM_INPUTS || in[NMM_W].rank != 2) return ONYX_STATUS_INVALID_ARGUMENT;
  const int64_t k = in[NMM_W].dims[0], n = in[NMM_W].dims[1];
  const int64_t rows = k > 0 ? onyx_tensor_numel(&in[NMM_X]) / k : 0;
  const cpu_nmm_state *s = state;
  const onyx__cpu_fused_scratch sc =
      onyx__cpu_fused_scratch_of(&s->w, s->base.provider, in[NMM_X].dtype, rows, k, n);
  if (sc.total == 0) return ONYX_STATUS_OK;
  req->count = 1;
  req->regions[0] = (onyx_workspace_region){.name = "rms_norm_matmul_scratch",
                                            .bytes = sc.total,
                                            .alignment = 64,
                                            .lifetime = ONYX_LIFETIME_SESSION};
  return ONYX_STATUS_OK;
}

static onyx_status cpu_nmm_infer(void *state, const onyx_tensor *in, size_t input_count,
                                 onyx_tensor *outputs, size_t output_count) {
  if (input_count != NMM_INPUTS || in[NMM_X].dtype == ONYX_DTYPE_UNDEFINED)
    return ONYX_STATUS_INVALID_ARGUMENT;
  const onyx_tensor *skip = in[NMM_SKIP].dtype == ONYX_DTYPE_UNDEFINED ? NULL : &in[NMM_SKIP];
  int64_t dims[ONYX_MAX_RANK];
  char why[ONYX__CPU_REASON_CAP] = "";
  onyx_status st =
      cpu_nmm_shape(&in[NMM_X], skip, &in[NMM_GAMMA], &in[NMM_W], dims, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cpu_reason(state, st, why);
  onyx__cpu_infer_out(outputs, output_count, 0, in[NMM_X].dtype, in[NMM_X].rank, dims);
  if (skip)
    onyx__cpu_infer_out(outputs, output_count, 1, in[NMM_X].dtype, in[NMM_X].rank, in[NMM_X].dims);
  return ONYX_STATUS_OK;
}

static void cpu_nmm_destroy(void *state) {
  cpu_nmm_state *s = state;
  if (s == NULL) return;
  onyx__cpu_fused_w_free(&s->w, s->base.provider);
  free(s);
}

/* transpose_weights asks first: declining transB = 1 keeps W as [K, N] here. */
static bool cpu_nmm_supports(const onyx_node_info *node, char *reason, size_t reason_cap) {
  return onyx__cpu_fused_w_kn_only(node, reason, reason_cap) != ONYX_STATUS_UNSUPPORTED;
}

static onyx_status cpu_nmm_create(void *provider_state, const onyx_node_info *node,
                                  void **out_state, char *err, size_t err_cap) {
  onyx_status tb = onyx__cpu_fused_w_kn_only(node, err, err_cap);
  if (tb != ONYX_STATUS_OK) return tb;
  cpu_nmm_state *s = onyx__cpu_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  onyx_status st = onyx__cpu_attr_float(node, "epsilon", 1e-5f, &s->epsilon, err, err_cap);
  if (st != ONYX_STATUS_OK) {
    onyx__cpu_destroy(s);
    return st;
  }
  onyx__cpu_fused_w_pack(&s->w, s->base.provider, node, NMM_X, NMM_W, NMM_INPUTS, "RMSNormMatMul");
  *out_state = s;
  return ONYX_STATUS_OK;
}

const onyx_kernel_table onyx__cpu_k_rms_norm_matmul = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "ai.onyx",
    .op_type = "RMSNormMatMul",
    .since_opset = 1,
    .until_opset = 0,
    .type_input = 0,
    .type_mask = CPU_NMM_TYPES,
    .supports = cpu_nmm_supports,
    .create = cpu_nmm_create,
    .destroy = cpu_nmm_destroy,
    .workspace = cpu_nmm_workspace,
    .compute = cpu_nmm_compute,
    .infer = cpu_nmm_infer,
};
