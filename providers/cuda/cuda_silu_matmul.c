/*
 * ai.onyx::SiluMulMatMul (docs/ops.md): Y = (silu(GU[..., :K]) · GU[..., K:]) · W,
 * float16 and bfloat16. Made by the silu_matmul optimization. The refusals are the CPU
 * kernel's, in its words, plus the launch's: N a multiple of 8, W 16-byte aligned.
 *
 * Two routes, chosen from the rows alone (so workspace and compute agree):
 *   decode  at most ONYX__CUDA_SMM_ROWS rows: one launch (cuda_silu_matmul.cu) where
 *           the SiluMul kernel and the decode GEMV ran before. Its SESSION region holds
 *           the K-split partials and counters (as the GEMV's), zeroed where the view is
 *           new to the node.
 *   prompt  more rows: the SiluMul kernel (cuda_silu_mul.cu) writes A into a STEP
 *           region, then cuda_matmul.c's cuBLASLt path multiplies it by W with its STEP
 *           scratch: the unfused pair's kernels, one tensor fewer.
 * Each route declares only its own regions; the other's are 0 bytes.
 *
 * transB = 1 (the transpose_weights pass): W is stored [N, K]; the decode route is then
 * the [N, K] kernel (cuda_gemv_nk.cuh, no partials) where it fits, cuBLASLt with W
 * transposed otherwise.
 */
#include <string.h>

#include "cuda_fused_route.h"
#include "cuda_impl.h"
#include "cuda_silu_matmul.h"
#include "cuda_silu_mul.h"

extern const onyx_kernel_table onyx__cuda_k_silu_mul_matmul;

#define CUDA_SMM_TYPES (ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT16) | ONYX_DTYPE_BIT(ONYX_DTYPE_BFLOAT16))

enum { SMM_GU, SMM_W, SMM_INPUTS };

/* Workspace regions: the decode route's partials, the prompt route's A and cuBLASLt
 * scratch. */
enum { SMM_WS_PARTIALS, SMM_WS_A, SMM_WS_LT, SMM_WS_COUNT };

typedef struct smm_state {
  onyx__cuda_node head;
  void *zeroed; /* the SESSION view last zeroed, and its bytes */
  uint64_t zeroed_bytes;
  onyx__cuda_lt_cache lt; /* the prompt route's cuBLASLt heuristic answer */
  bool trans_b;           /* W is [N, K] */
} smm_state;

typedef onyx__cuda_fused_geo smm_geo;

static smm_geo smm_geometry(const smm_state *s, const onyx_tensor *gu, const onyx_tensor *w) {
  return onyx__cuda_fused_geometry(w, s->trans_b, onyx_tensor_numel(gu), 2, gu->dtype);
}

_Static_assert(ONYX__CUDA_FUSED_ROWS == ONYX__CUDA_SMM_ROWS, "the decode route's rows");

static onyx_status smm_shape(const onyx_tensor *gu, const onyx_tensor *w, bool nk, int64_t *dims,
                             char *why, size_t cap) {
  if (!onyx__cuda_dtype_in(gu->dtype, CUDA_SMM_TYPES))
    return onyx__cuda_fail(why, cap, ONYX_STATUS_UNSUPPORTED,
                           "input 0 has dtype %s; float16 or bfloat16 expected",
                           onyx__cuda_dtype_name(gu->dtype));
  if (w->dtype != gu->dtype)
    return onyx__cuda_fail(why, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "W has dtype %s; input 0's dtype %s expected",
                           onyx__cuda_dtype_name(w->dtype), onyx__cuda_dtype_name(gu->dtype));
  const int64_t k = w->rank == 2 ? w->dims[nk ? 1 : 0] : 0;
  const int64_t n = w->rank == 2 ? w->dims[nk ? 0 : 1] : 0;
  if (gu->rank < 1 || w->rank != 2 || k < 1 || gu->dims[gu->rank - 1] != 2 * k)
    return onyx__cuda_fail(why, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "input 0 %s and W %s: [..., 2K] (gate and up halves) and %s with "
                           "K >= 1 expected",
                           onyx__cuda_tensor_shape(gu).s, onyx__cuda_tensor_shape(w).s,
                           nk ? "[N, K] (transB = 1)" : "[K, N]");
  if ((nk ? k : n) % 8 != 0 || k > INT32_MAX / 2 || n > INT32_MAX)
    return onyx__cuda_fail(why, cap, ONYX_STATUS_UNSUPPORTED,
                           "W %s: %s must be a multiple of 8 (the kernel's 16-byte loads)",
                           onyx__cuda_tensor_shape(w).s, nk ? "K" : "N");
  memcpy(dims, gu->dims, gu->rank * sizeof dims[0]);
  dims[gu->rank - 1] = n;
  return ONYX_STATUS_OK;
}

static int64_t smm_split(const smm_geo *g) { return onyx__cuda_smm_split(g->k, g->n); }

/* The decode route: one launch, its partials zeroed where the view is new. */
static onyx_status smm_run(smm_state *s, onyx_compute_ctx *ctx, const smm_geo *g,
                           onyx__cuda_smm_args *a) {
  uint64_t need = onyx__cuda_fused_session_bytes(g, smm_split(g));
  const onyx_workspace_view *ws = onyx__cuda_fused_view(ctx, SMM_WS_PARTIALS, need);
  if (need > 0 && ws == NULL)
    return onyx__cuda_fused_too_small(ctx, "SiluMulMatMul", SMM_WS_PARTIALS, "partials", need);
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
      need ? (unsigned *)((char *)ws->data + onyx__cuda_fused_partial_bytes(g, smm_split(g)))
           : NULL;
  return onyx__cuda_check(ctx, onyx__cuda_launch_smm(a, stream), "SiluMulMatMul");
}

/* The prompt route: the SiluMul kernel into the A view, then the cuBLASLt product of A
 * and W. Both views are checked before either launch, so a short one writes nothing. */
static onyx_status smm_prompt_run(smm_state *s, onyx_compute_ctx *ctx, const smm_geo *g,
                                  const onyx__cuda_smm_args *a) {
  const uint64_t need_a = onyx__cuda_fused_a_bytes(g);
  const uint64_t need_lt = onyx__cuda_fused_lt_bytes(g);
  const onyx_workspace_view *av = onyx__cuda_fused_view(ctx, SMM_WS_A, need_a);
  const onyx_workspace_view *lt = onyx__cuda_fused_view(ctx, SMM_WS_LT, need_lt);
  if (av == NULL)
    return onyx__cuda_fused_too_small(ctx, "SiluMulMatMul", SMM_WS_A, "activation", need_a);
  if (lt == NULL)
    return onyx__cuda_fused_too_small(ctx, "SiluMulMatMul", SMM_WS_LT, "cuBLASLt workspace",
                                      need_lt);
  onyx_status st = onyx__cuda_check(
      ctx,
      onyx__cuda_launch_silu_mul(a->dtype, a->gu, av->data, a->m, a->k, (cudaStream_t)ctx->stream),
      "SiluMulMatMul: the activation of the rows");
  if (st != ONYX_STATUS_OK) return st;
  return onyx__cuda_lt_product(s->head.provider, &s->lt, ctx, a->dtype, av->data, a->w, g->nk, a->y,
                               a->m, a->n, a->k, lt);
}

static onyx_status smm_compute(void *state, onyx_compute_ctx *ctx, const onyx_tensor *const *in,
                               size_t input_count) {
  smm_state *s = state;
  onyx_status st = onyx__cuda_check_inputs(ctx, in, input_count, 1);
  if (st != ONYX_STATUS_OK) return st;
  if (input_count != SMM_INPUTS || !in[SMM_GU] || !in[SMM_W])
    return onyx__cuda_error(ctx, ONYX_STATUS_INVALID_ARGUMENT,
                            "SiluMulMatMul takes GU and W; got %zu inputs", input_count);
  const onyx_tensor *gu = in[SMM_GU], *w = in[SMM_W];
  int64_t dims[ONYX_MAX_RANK];
  char why[ONYX__CUDA_REASON_CAP] = "";
  if ((st = smm_shape(gu, w, s->trans_b, dims, why, sizeof why)) != ONYX_STATUS_OK)
    return onyx__cuda_error(ctx, st, "%s", why);
  if (((uintptr_t)w->data & 15u) != 0)
    return onyx__cuda_error(ctx, ONYX_STATUS_UNSUPPORTED, "W is not 16-byte aligned");
  onyx_tensor *y = NULL;
  st = onyx__cuda_alloc_output(&s->head, ctx, 0, gu->dtype, gu->rank, dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  const smm_geo g = smm_geometry(s, gu, w);
  if (g.rows == 0) return ONYX_STATUS_OK;
  onyx__cuda_smm_args a = {.dtype = gu->dtype,
                           .m = g.rows,
                           .n = g.n,
                           .k = g.k,
                           .gu = gu->data,
                           .w = w->data,
                           .y = y->data,
                           .w_nk = g.nk};
  return onyx__cuda_fused_prompt(&g) ? smm_prompt_run(s, ctx, &g, &a) : smm_run(s, ctx, &g, &a);
}

static onyx_status smm_workspace(void *state, const onyx_tensor *in, size_t input_count,
                                 onyx_workspace_requirement *req) {
  req->count = 0;
  if (input_count != SMM_INPUTS) return ONYX_STATUS_INVALID_ARGUMENT;
  const smm_state *s = state;
  if (in[SMM_W].rank != 2 || in[SMM_W].dims[s->trans_b ? 1 : 0] <= 0)
    return ONYX_STATUS_OK; /* compute refuses */
  const smm_geo g = smm_geometry(s, &in[SMM_GU], &in[SMM_W]);
  req->count = SMM_WS_COUNT;
  /* SESSION: kept per node, so the counters stay clean from one step to the next. */
  req->regions[SMM_WS_PARTIALS] =
      (onyx_workspace_region){.name = "silu_mul_matmul_partials",
                              .bytes = onyx__cuda_fused_session_bytes(&g, smm_split(&g)),
                              .alignment = 256,
                              .lifetime = ONYX_LIFETIME_SESSION};
  /* STEP: read by the product right after the SiluMul kernel writes it, in one call. */
  req->regions[SMM_WS_A] = (onyx_workspace_region){.name = "silu_mul_matmul_activation",
                                                   .bytes = onyx__cuda_fused_a_bytes(&g),
                                                   .alignment = 256,
                                                   .lifetime = ONYX_LIFETIME_STEP};
  req->regions[SMM_WS_LT] = (onyx_workspace_region){.name = "cublaslt_workspace",
                                                    .bytes = onyx__cuda_fused_lt_bytes(&g),
                                                    .alignment = 256,
                                                    .lifetime = ONYX_LIFETIME_STEP};
  return ONYX_STATUS_OK;
}

static onyx_status smm_infer(void *state, const onyx_tensor *in, size_t input_count,
                             onyx_tensor *outputs, size_t output_count) {
  onyx__cuda_infer_begin(outputs, output_count);
  if (input_count != SMM_INPUTS || output_count < 1 || in[SMM_GU].dtype == ONYX_DTYPE_UNDEFINED)
    return ONYX_STATUS_INVALID_ARGUMENT;
  int64_t dims[ONYX_MAX_RANK];
  char why[ONYX__CUDA_REASON_CAP] = "";
  const bool nk = ((const smm_state *)state)->trans_b;
  onyx_status st = smm_shape(&in[SMM_GU], &in[SMM_W], nk, dims, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cuda_reason(state, st, why);
  memset(&outputs[0], 0, sizeof outputs[0]);
  outputs[0].dtype = in[SMM_GU].dtype;
  outputs[0].device = in[SMM_GU].device;
  outputs[0].rank = in[SMM_GU].rank;
  memcpy(outputs[0].dims, dims, in[SMM_GU].rank * sizeof dims[0]);
  return ONYX_STATUS_OK;
}

static onyx_status smm_create(void *provider_state, const onyx_node_info *node, void **out_state,
                              char *err, size_t err_cap) {
  bool trans_b = false;
  onyx_status st = onyx__cuda_attr_trans_b(node, &trans_b, err, err_cap);
  if (st != ONYX_STATUS_OK) return st;
  smm_state *s = onyx__cuda_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  s->trans_b = trans_b;
  *out_state = s;
  return ONYX_STATUS_OK;
}

const onyx_kernel_table onyx__cuda_k_silu_mul_matmul = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "ai.onyx",
    .op_type = "SiluMulMatMul",
    .since_opset = 1,
    .until_opset = 0,
    .type_input = 0,
    .type_mask = CUDA_SMM_TYPES,
    .supports = NULL,
    .create = smm_create,
    .destroy = onyx__cuda_destroy,
    .workspace = smm_workspace,
    .compute = smm_compute,
    .infer = smm_infer,
};
