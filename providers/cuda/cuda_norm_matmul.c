/*
 * ai.onyx::RMSNormMatMul (docs/ops.md): Y = rmsnorm(X + skip)·gamma · W, S = X + skip,
 * float16 and bfloat16, in one launch (cuda_norm_matmul.cu) where the norm and the
 * decode GEMV ran before. Made by the norm_matmul optimization. The refusals are the
 * CPU kernel's, in its words, plus the launch's: N a multiple of 8, W 16-byte aligned.
 * Its SESSION region holds the K-split partials and counters (as the GEMV's), zeroed
 * where the view is new to the node.
 */
#include <string.h>

#include "cuda_impl.h"
#include "cuda_norm_matmul.h"

extern const onyx_kernel_table onyx__cuda_k_rms_norm_matmul;

#define CUDA_NMM_TYPES (ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT16) | ONYX_DTYPE_BIT(ONYX_DTYPE_BFLOAT16))

enum { NMM_X, NMM_SKIP, NMM_GAMMA, NMM_W, NMM_INPUTS };

typedef struct nmm_state {
  onyx__cuda_node head;
  float epsilon;
  void *zeroed; /* the SESSION view last zeroed, and its bytes */
  uint64_t zeroed_bytes;
} nmm_state;

static onyx_status nmm_shape(const onyx_tensor *x, const onyx_tensor *skip,
                             const onyx_tensor *gamma, const onyx_tensor *w, int64_t *dims,
                             char *why, size_t cap) {
  if (!onyx__cuda_dtype_in(x->dtype, CUDA_NMM_TYPES))
    return onyx__cuda_fail(why, cap, ONYX_STATUS_UNSUPPORTED,
                           "input 0 has dtype %s; float16 or bfloat16 expected",
                           onyx__cuda_dtype_name(x->dtype));
  if ((skip && skip->dtype != x->dtype) || gamma->dtype != x->dtype || w->dtype != x->dtype)
    return onyx__cuda_fail(why, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "skip, gamma and W must have input 0's dtype %s",
                           onyx__cuda_dtype_name(x->dtype));
  if (x->rank < 1 || w->rank != 2 || x->dims[x->rank - 1] != w->dims[0] || w->dims[0] < 1)
    return onyx__cuda_fail(why, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "input 0 %s and W %s: [..., K] and [K, N] with K >= 1 expected",
                           onyx__cuda_tensor_shape(x).s, onyx__cuda_tensor_shape(w).s);
  if (gamma->rank != 1 || gamma->dims[0] != w->dims[0])
    return onyx__cuda_fail(why, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "gamma %s must be [K] with K = %lld", onyx__cuda_tensor_shape(gamma).s,
                           (long long)w->dims[0]);
  if (skip &&
      (skip->rank != x->rank || memcmp(skip->dims, x->dims, x->rank * sizeof x->dims[0]) != 0))
    return onyx__cuda_fail(why, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "skip %s must have input 0's shape %s", onyx__cuda_tensor_shape(skip).s,
                           onyx__cuda_tensor_shape(x).s);
  if (w->dims[1] % 8 != 0 || w->dims[0] > INT32_MAX || w->dims[1] > INT32_MAX)
    return onyx__cuda_fail(why, cap, ONYX_STATUS_UNSUPPORTED,
                           "W %s: N must be a multiple of 8 (the kernel's 16-byte loads)",
                           onyx__cuda_tensor_shape(w).s);
  memcpy(dims, x->dims, x->rank * sizeof dims[0]);
  dims[x->rank - 1] = w->dims[1];
  return ONYX_STATUS_OK;
}

/* SESSION bytes: partials of min(rows, ROWS) rows per K split, then a counter per 256
 * columns; 0 when K is not split. */
static uint64_t nmm_partial_bytes(int64_t rows, int64_t k, int64_t n) {
  int64_t split = onyx__cuda_nmm_split(k, n);
  if (split <= 1 || rows <= 0) return 0;
  int64_t m = rows < ONYX__CUDA_NMM_ROWS ? rows : ONYX__CUDA_NMM_ROWS;
  return (uint64_t)(split * m * n) * 4u;
}

static uint64_t nmm_session_bytes(int64_t rows, int64_t k, int64_t n) {
  uint64_t p = nmm_partial_bytes(rows, k, n);
  return p ? p + ((uint64_t)n + 255u) / 256u * 4u : 0;
}

static onyx_status nmm_run(nmm_state *s, onyx_compute_ctx *ctx, onyx__cuda_nmm_args *a) {
  uint64_t need = nmm_session_bytes(a->m, a->k, a->n);
  const onyx_workspace_view *ws = ctx->workspace_count > 0 ? &ctx->workspace[0] : NULL;
  if (need > 0 && (ws == NULL || ws->data == NULL || ws->bytes < need))
    return onyx__cuda_error(ctx, ONYX_STATUS_WORKSPACE_TOO_SMALL,
                            "RMSNormMatMul partials view has %llu bytes, %llu required",
                            (unsigned long long)(ws ? ws->bytes : 0), (unsigned long long)need);
  cudaStream_t stream = (cudaStream_t)ctx->stream;
  if (need > 0 && (ws->data != s->zeroed || need > s->zeroed_bytes)) {
    onyx_status st = onyx__cuda_check(ctx, cudaMemsetAsync(ws->data, 0, (size_t)need, stream),
                                      "cudaMemsetAsync");
    if (st != ONYX_STATUS_OK) return st;
    s->zeroed = ws->data;
    s->zeroed_bytes = need;
  }
  a->partial = need ? (float *)ws->data : NULL;
  a->counters = need ? (unsigned *)((char *)ws->data + nmm_partial_bytes(a->m, a->k, a->n)) : NULL;
  return onyx__cuda_check(ctx, onyx__cuda_launch_nmm(a, stream), "RMSNormMatMul");
}

static onyx_status nmm_compute(void *state, onyx_compute_ctx *ctx, const onyx_tensor *const *in,
                               size_t input_count) {
  nmm_state *s = state;
  onyx_status st = onyx__cuda_check_inputs(ctx, in, input_count, 1);
  if (st != ONYX_STATUS_OK) return st;
  if (input_count != NMM_INPUTS || !in[NMM_GAMMA] || !in[NMM_W])
    return onyx__cuda_error(ctx, ONYX_STATUS_INVALID_ARGUMENT,
                            "RMSNormMatMul takes X, skip (may be absent), gamma and W; got %zu "
                            "inputs",
                            input_count);
  const onyx_tensor *x = in[NMM_X], *skip = in[NMM_SKIP], *gamma = in[NMM_GAMMA], *w = in[NMM_W];
  int64_t dims[ONYX_MAX_RANK];
  char why[ONYX__CUDA_REASON_CAP] = "";
  if ((st = nmm_shape(x, skip, gamma, w, dims, why, sizeof why)) != ONYX_STATUS_OK)
    return onyx__cuda_error(ctx, st, "%s", why);
  if (((uintptr_t)w->data & 15u) != 0)
    return onyx__cuda_error(ctx, ONYX_STATUS_UNSUPPORTED, "W is not 16-byte aligned");
  onyx_tensor *y = NULL, *sum = NULL;
  st = onyx__cuda_alloc_output(&s->head, ctx, 0, x->dtype, x->rank, dims, &y);
  if (st == ONYX_STATUS_OK && skip)
    st = onyx__cuda_alloc_output(&s->head, ctx, 1, x->dtype, x->rank, x->dims, &sum);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  const int64_t k = w->dims[0], rows = onyx_tensor_numel(x) / k;
  if (rows == 0) return ONYX_STATUS_OK;
  onyx__cuda_nmm_args a = {.dtype = x->dtype,
                           .m = rows,
                           .n = w->dims[1],
                           .k = k,
                           .x = x->data,
                           .skip = skip ? skip->data : NULL,
                           .gamma = gamma->data,
                           .w = w->data,
                           .y = y->data,
                           .sum = sum ? sum->data : NULL,
                           .epsilon = s->epsilon};
  return nmm_run(s, ctx, &a);
}

static onyx_status nmm_workspace(void *state, const onyx_tensor *in, size_t input_count,
                                 onyx_workspace_requirement *req) {
  req->count = 0;
  if (input_count != NMM_INPUTS || in[NMM_W].rank != 2 || in[NMM_W].dims[0] <= 0)
    return ONYX_STATUS_INVALID_ARGUMENT;
  (void)state;
  const int64_t k = in[NMM_W].dims[0], n = in[NMM_W].dims[1];
  req->count = 1;
  /* SESSION: kept per node, so the counters stay clean from one step to the next. */
  req->regions[0] =
      (onyx_workspace_region){.name = "rms_norm_matmul_partials",
                              .bytes = nmm_session_bytes(onyx_tensor_numel(&in[NMM_X]) / k, k, n),
                              .alignment = 256,
                              .lifetime = ONYX_LIFETIME_SESSION};
  return ONYX_STATUS_OK;
}

static onyx_status nmm_infer(void *state, const onyx_tensor *in, size_t input_count,
                             onyx_tensor *outputs, size_t output_count) {
  onyx__cuda_infer_begin(outputs, output_count);
  if (input_count != NMM_INPUTS || output_count < 1 || in[NMM_X].dtype == ONYX_DTYPE_UNDEFINED)
    return ONYX_STATUS_INVALID_ARGUMENT;
  const onyx_tensor *skip = in[NMM_SKIP].dtype == ONYX_DTYPE_UNDEFINED ? NULL : &in[NMM_SKIP];
  int64_t dims[ONYX_MAX_RANK];
  char why[ONYX__CUDA_REASON_CAP] = "";
  onyx_status st = nmm_shape(&in[NMM_X], skip, &in[NMM_GAMMA], &in[NMM_W], dims, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cuda_reason(state, st, why);
  for (size_t o = 0; o < output_count && o < (skip ? 2u : 1u); ++o) {
    memset(&outputs[o], 0, sizeof outputs[o]);
    outputs[o].dtype = in[NMM_X].dtype;
    outputs[o].device = in[NMM_X].device;
    outputs[o].rank = in[NMM_X].rank;
    memcpy(outputs[o].dims, o == 0 ? dims : in[NMM_X].dims, in[NMM_X].rank * sizeof dims[0]);
  }
  return ONYX_STATUS_OK;
}

static onyx_status nmm_create(void *provider_state, const onyx_node_info *node, void **out_state,
                              char *err, size_t err_cap) {
  float eps = 1e-5f;
  onyx_status st = onyx__cuda_attr_float(node, "epsilon", 1e-5f, &eps, err, err_cap);
  if (st != ONYX_STATUS_OK) return st;
  nmm_state *s = onyx__cuda_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  s->epsilon = eps;
  *out_state = s;
  return ONYX_STATUS_OK;
}

const onyx_kernel_table onyx__cuda_k_rms_norm_matmul = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "ai.onyx",
    .op_type = "RMSNormMatMul",
    .since_opset = 1,
    .until_opset = 0,
    .type_input = 0,
    .type_mask = CUDA_NMM_TYPES,
    .supports = NULL,
    .create = nmm_create,
    .destroy = onyx__cuda_destroy,
    .workspace = nmm_workspace,
    .compute = nmm_compute,
    .infer = nmm_infer,
};
