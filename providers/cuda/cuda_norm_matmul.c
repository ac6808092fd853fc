/*
 * ai.onyx::RMSNormMatMul (docs/ops.md): Y = rmsnorm(X + skip)·gamma · W, S = X + skip,
 * float16 and bfloat16. Made by the norm_matmul optimization. The refusals are the CPU
 * kernel's, in its words, plus the launch's: N a multiple of 8, W 16-byte aligned.
 *
 * Two routes, chosen from the rows alone (so workspace and compute agree):
 *   decode  at most ONYX__CUDA_NMM_ROWS rows: one launch (cuda_norm_matmul.cu) where the
 *           norm and the decode GEMV ran before. Its SESSION region holds the K-split
 *           partials and counters (as the GEMV's), zeroed where the view is new to the
 *           node.
 *   prompt  more rows: the norm kernel (cuda_norm.cu) writes the normed rows into a
 *           STEP region and S into output 1, then cuda_matmul.c's cuBLASLt path
 *           multiplies them by W with its STEP scratch: the unfused pair's kernels, one
 *           tensor fewer. A GEMV would stream W once every 4 rows.
 * Each route declares only its own regions; the other's are 0 bytes.
 *
 * transB = 1 (the transpose_weights pass): W is stored [N, K]. The decode route is then
 * the [N, K] kernel (cuda_gemv_nk.cuh: no partials, so no SESSION bytes) for the rows
 * and K it fits; the rest, and prompts, take cuBLASLt with W transposed.
 */
#include <string.h>

#include "cuda_fused_route.h"
#include "cuda_impl.h"
#include "cuda_norm_matmul.h"

extern const onyx_kernel_table onyx__cuda_k_rms_norm_matmul;

#define CUDA_NMM_TYPES (ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT16) | ONYX_DTYPE_BIT(ONYX_DTYPE_BFLOAT16))

enum { NMM_X, NMM_SKIP, NMM_GAMMA, NMM_W, NMM_INPUTS };

/* Workspace regions: the decode route's partials, the prompt route's normed rows and
 * cuBLASLt scratch. */
enum { NMM_WS_PARTIALS, NMM_WS_NORMED, NMM_WS_LT, NMM_WS_COUNT };

typedef struct nmm_state {
  onyx__cuda_node head;
  float epsilon;
  bool trans_b; /* W is [N, K] */
  void *zeroed; /* the SESSION view last zeroed, and its bytes */
  uint64_t zeroed_bytes;
  onyx__cuda_lt_cache lt; /* the prompt route's cuBLASLt heuristic answer */
} nmm_state;

typedef onyx__cuda_fused_geo nmm_geo;

static nmm_geo nmm_geometry(const nmm_state *s, const onyx_tensor *x, const onyx_tensor *w) {
  return onyx__cuda_fused_geometry(w, s->trans_b, onyx_tensor_numel(x), 1, x->dtype);
}

_Static_assert(ONYX__CUDA_FUSED_ROWS == ONYX__CUDA_NMM_ROWS, "the decode route's rows");

static onyx_status nmm_shape(const onyx_tensor *x, const onyx_tensor *skip,
                             const onyx_tensor *gamma, const onyx_tensor *w, bool nk, int64_t *dims,
                             char *why, size_t cap) {
  if (!onyx__cuda_dtype_in(x->dtype, CUDA_NMM_TYPES))
    return onyx__cuda_fail(why, cap, ONYX_STATUS_UNSUPPORTED,
                           "input 0 has dtype %s; float16 or bfloat16 expected",
                           onyx__cuda_dtype_name(x->dtype));
  if ((skip && skip->dtype != x->dtype) || gamma->dtype != x->dtype || w->dtype != x->dtype)
    return onyx__cuda_fail(why, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "skip, gamma and W must have input 0's dtype %s",
                           onyx__cuda_dtype_name(x->dtype));
  const int64_t k = w->rank == 2 ? w->dims[nk ? 1 : 0] : 0,
                n = w->rank == 2 ? w->dims[nk ? 0 : 1] : 0;
  if (x->rank < 1 || w->rank != 2 || x->dims[x->rank - 1] != k || k < 1)
    return onyx__cuda_fail(why, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "input 0 %s and W %s: [..., K] and %s with K >= 1 expected",
                           onyx__cuda_tensor_shape(x).s, onyx__cuda_tensor_shape(w).s,
                           nk ? "[N, K] (transB = 1)" : "[K, N]");
  if (gamma->rank != 1 || gamma->dims[0] != k)
    return onyx__cuda_fail(why, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "gamma %s must be [K] with K = %lld", onyx__cuda_tensor_shape(gamma).s,
                           (long long)k);
  if (skip &&
      (skip->rank != x->rank || memcmp(skip->dims, x->dims, x->rank * sizeof x->dims[0]) != 0))
    return onyx__cuda_fail(why, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "skip %s must have input 0's shape %s", onyx__cuda_tensor_shape(skip).s,
                           onyx__cuda_tensor_shape(x).s);
  if ((nk ? k : n) % 8 != 0 || k > INT32_MAX || n > INT32_MAX)
    return onyx__cuda_fail(why, cap, ONYX_STATUS_UNSUPPORTED,
                           "W %s: %s must be a multiple of 8 (the kernel's 16-byte loads)",
                           onyx__cuda_tensor_shape(w).s, nk ? "K" : "N");
  memcpy(dims, x->dims, x->rank * sizeof dims[0]);
  dims[x->rank - 1] = n;
  return ONYX_STATUS_OK;
}

static int64_t nmm_split(const nmm_geo *g) { return onyx__cuda_nmm_split(g->k, g->n); }

/* The decode route: one launch, its partials zeroed where the view is new. */
static onyx_status nmm_run(nmm_state *s, onyx_compute_ctx *ctx, const nmm_geo *g,
                           onyx__cuda_nmm_args *a) {
  uint64_t need = onyx__cuda_fused_session_bytes(g, nmm_split(g));
  const onyx_workspace_view *ws = onyx__cuda_fused_view(ctx, NMM_WS_PARTIALS, need);
  if (need > 0 && ws == NULL)
    return onyx__cuda_fused_too_small(ctx, "RMSNormMatMul", NMM_WS_PARTIALS, "partials", need);
  cudaStream_t stream = (cudaStream_t)ctx->stream;
  if (need > 0 && (ws->data != s->zeroed || need > s->zeroed_bytes)) {
    onyx_status st = onyx__cuda_check(ctx, cudaMemsetAsync(ws->data, 0, (size_t)need, stream),
                                      "cudaMemsetAsync");
    if (st != ONYX_STATUS_OK) return st;
    s->zeroed = ws->data;
    s->zeroed_bytes = need;
  }
  a->partial = need ? (float *)ws->data : NULL;
  a->counters =
      need ? (unsigned *)((char *)ws->data + onyx__cuda_fused_partial_bytes(g, nmm_split(g)))
           : NULL;
  return onyx__cuda_check(ctx, onyx__cuda_launch_nmm(a, stream), "RMSNormMatMul");
}

/* The prompt route: the norm kernel into the normed-rows view (S into output 1), then
 * the cuBLASLt product of those rows and W. Both views are checked before either
 * launch, so a short one writes nothing. */
static onyx_status nmm_prompt_run(nmm_state *s, onyx_compute_ctx *ctx, const nmm_geo *g,
                                  const onyx__cuda_nmm_args *a) {
  const uint64_t need_h = onyx__cuda_fused_a_bytes(g);
  const uint64_t need_lt = onyx__cuda_fused_lt_bytes(g);
  const onyx_workspace_view *h = onyx__cuda_fused_view(ctx, NMM_WS_NORMED, need_h);
  const onyx_workspace_view *lt = onyx__cuda_fused_view(ctx, NMM_WS_LT, need_lt);
  if (h == NULL)
    return onyx__cuda_fused_too_small(ctx, "RMSNormMatMul", NMM_WS_NORMED, "normed-rows", need_h);
  if (lt == NULL)
    return onyx__cuda_fused_too_small(ctx, "RMSNormMatMul", NMM_WS_LT, "cuBLASLt workspace",
                                      need_lt);
  onyx__cuda_norm_args n = {.simplified = true,
                            .x_dtype = a->dtype,
                            .scale_dtype = a->dtype,
                            .y_dtype = a->dtype,
                            .sum_dtype = a->dtype,
                            .x = a->x,
                            .skip = a->skip,
                            .skip_numel = a->skip ? a->m * a->k : 0,
                            .scale = a->gamma,
                            .scale_numel = a->k,
                            .y = h->data,
                            .sum = a->sum,
                            .rows = a->m,
                            .cols = a->k,
                            .epsilon = a->epsilon};
  onyx_status st = onyx__cuda_check(ctx, onyx__cuda_launch_norm(&n, (cudaStream_t)ctx->stream),
                                    "RMSNormMatMul: the norm of the rows");
  if (st != ONYX_STATUS_OK) return st;
  return onyx__cuda_lt_product(s->head.provider, &s->lt, ctx, a->dtype, h->data, a->w, g->nk, a->y,
                               a->m, a->n, a->k, lt);
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
  if ((st = nmm_shape(x, skip, gamma, w, s->trans_b, dims, why, sizeof why)) != ONYX_STATUS_OK)
    return onyx__cuda_error(ctx, st, "%s", why);
  if (((uintptr_t)w->data & 15u) != 0)
    return onyx__cuda_error(ctx, ONYX_STATUS_UNSUPPORTED, "W is not 16-byte aligned");
  onyx_tensor *y = NULL, *sum = NULL;
  st = onyx__cuda_alloc_output(&s->head, ctx, 0, x->dtype, x->rank, dims, &y);
  if (st == ONYX_STATUS_OK && skip)
    st = onyx__cuda_alloc_output(&s->head, ctx, 1, x->dtype, x->rank, x->dims, &sum);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  const nmm_geo g = nmm_geometry(s, x, w);
  if (g.rows == 0) return ONYX_STATUS_OK;
  onyx__cuda_nmm_args a = {.dtype = x->dtype,
                           .m = g.rows,
                           .n = g.n,
                           .k = g.k,
                           .x = x->data,
                           .skip = skip ? skip->data : NULL,
                           .gamma = gamma->data,
                           .w = w->data,
                           .y = y->data,
                           .sum = sum ? sum->data : NULL,
                           .epsilon = s->epsilon,
                           .w_nk = g.nk};
  return onyx__cuda_fused_prompt(&g) ? nmm_prompt_run(s, ctx, &g, &a) : nmm_run(s, ctx, &g, &a);
}

static onyx_status nmm_workspace(void *state, const onyx_tensor *in, size_t input_count,
                                 onyx_workspace_requirement *req) {
  req->count = 0;
  const nmm_state *s = state;
  if (input_count != NMM_INPUTS || in[NMM_W].rank != 2 || in[NMM_W].dims[s->trans_b ? 1 : 0] <= 0)
    return ONYX_STATUS_INVALID_ARGUMENT;
  const nmm_geo g = nmm_geometry(s, &in[NMM_X], &in[NMM_W]);
  req->count = NMM_WS_COUNT;
  /* SESSION: kept per node, so the counters stay clean from one step to the next. */
  req->regions[NMM_WS_PARTIALS] =
      (onyx_workspace_region){.name = "rms_norm_matmul_partials",
                              .bytes = onyx__cuda_fused_session_bytes(&g, nmm_split(&g)),
                              .alignment = 256,
                              .lifetime = ONYX_LIFETIME_SESSION};
  /* STEP: read by the product right after the norm writes them, in the same call. */
  req->regions[NMM_WS_NORMED] = (onyx_workspace_region){.name = "rms_norm_matmul_normed",
                                                        .bytes = onyx__cuda_fused_a_bytes(&g),
                                                        .alignment = 256,
                                                        .lifetime = ONYX_LIFETIME_STEP};
  req->regions[NMM_WS_LT] = (onyx_workspace_region){.name = "cublaslt_workspace",
                                                    .bytes = onyx__cuda_fused_lt_bytes(&g),
                                                    .alignment = 256,
                                                    .lifetime = ONYX_LIFETIME_STEP};
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
  const bool nk = ((const nmm_state *)state)->trans_b;
  onyx_status st =
      nmm_shape(&in[NMM_X], skip, &in[NMM_GAMMA], &in[NMM_W], nk, dims, why, sizeof why);
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
  bool trans_b = false;
  onyx_status st = onyx__cuda_attr_float(node, "epsilon", 1e-5f, &eps, err, err_cap);
  if (st == ONYX_STATUS_OK) st = onyx__cuda_attr_trans_b(node, &trans_b, err, err_cap);
  if (st != ONYX_STATUS_OK) return st;
  nmm_state *s = onyx__cuda_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  s->epsilon = eps;
  s->trans_b = trans_b;
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
