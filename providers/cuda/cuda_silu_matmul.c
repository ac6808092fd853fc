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
 */
#include <string.h>

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
} smm_state;

/* The prompt route: more rows than the decode kernel takes in one launch. */
static bool smm_prompt(int64_t rows) { return rows > ONYX__CUDA_SMM_ROWS; }

static onyx_status smm_shape(const onyx_tensor *gu, const onyx_tensor *w, int64_t *dims, char *why,
                             size_t cap) {
  if (!onyx__cuda_dtype_in(gu->dtype, CUDA_SMM_TYPES))
    return onyx__cuda_fail(why, cap, ONYX_STATUS_UNSUPPORTED,
                           "input 0 has dtype %s; float16 or bfloat16 expected",
                           onyx__cuda_dtype_name(gu->dtype));
  if (w->dtype != gu->dtype)
    return onyx__cuda_fail(why, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "W has dtype %s; input 0's dtype %s expected",
                           onyx__cuda_dtype_name(w->dtype), onyx__cuda_dtype_name(gu->dtype));
  if (gu->rank < 1 || w->rank != 2 || w->dims[0] < 1 || gu->dims[gu->rank - 1] != 2 * w->dims[0])
    return onyx__cuda_fail(why, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "input 0 %s and W %s: [..., 2K] (gate and up halves) and [K, N] with "
                           "K >= 1 expected",
                           onyx__cuda_tensor_shape(gu).s, onyx__cuda_tensor_shape(w).s);
  if (w->dims[1] % 8 != 0 || w->dims[0] > INT32_MAX / 2 || w->dims[1] > INT32_MAX)
    return onyx__cuda_fail(why, cap, ONYX_STATUS_UNSUPPORTED,
                           "W %s: N must be a multiple of 8 (the kernel's 16-byte loads)",
                           onyx__cuda_tensor_shape(w).s);
  memcpy(dims, gu->dims, gu->rank * sizeof dims[0]);
  dims[gu->rank - 1] = w->dims[1];
  return ONYX_STATUS_OK;
}

/* SESSION bytes of the decode route: partials of min(rows, ROWS) rows per K split,
 * then a counter per 256 columns; 0 when K is not split. */
static uint64_t smm_partial_bytes(int64_t rows, int64_t k, int64_t n) {
  int64_t split = onyx__cuda_smm_split(k, n);
  if (split <= 1 || rows <= 0) return 0;
  int64_t m = rows < ONYX__CUDA_SMM_ROWS ? rows : ONYX__CUDA_SMM_ROWS;
  return (uint64_t)(split * m * n) * 4u;
}

static uint64_t smm_session_bytes(int64_t rows, int64_t k, int64_t n) {
  if (smm_prompt(rows)) return 0;
  uint64_t p = smm_partial_bytes(rows, k, n);
  return p ? p + ((uint64_t)n + 255u) / 256u * 4u : 0;
}

/* STEP bytes of the prompt route: A in T (0 on the decode route). */
static uint64_t smm_a_bytes(int64_t rows, int64_t k, uint32_t dtype) {
  return smm_prompt(rows) ? (uint64_t)(rows * k) * onyx_dtype_size(dtype) : 0;
}

static uint64_t smm_lt_bytes(int64_t rows, int64_t k, int64_t n) {
  return smm_prompt(rows) ? onyx__cuda_lt_workspace_bytes(rows, n, k) : 0;
}

/* View `i` of the step, or NULL when it is missing or shorter than `need`. */
static const onyx_workspace_view *smm_view(const onyx_compute_ctx *ctx, size_t i, uint64_t need) {
  const onyx_workspace_view *v = ctx->workspace_count > i ? &ctx->workspace[i] : NULL;
  return v != NULL && v->data != NULL && v->bytes >= need ? v : NULL;
}

static onyx_status smm_too_small(onyx_compute_ctx *ctx, size_t i, const char *what, uint64_t need) {
  uint64_t got = ctx->workspace_count > i ? ctx->workspace[i].bytes : 0;
  return onyx__cuda_error(ctx, ONYX_STATUS_WORKSPACE_TOO_SMALL,
                          "SiluMulMatMul %s view has %llu bytes, %llu required", what,
                          (unsigned long long)got, (unsigned long long)need);
}

/* The decode route: one launch, its partials zeroed where the view is new. */
static onyx_status smm_run(smm_state *s, onyx_compute_ctx *ctx, onyx__cuda_smm_args *a) {
  uint64_t need = smm_session_bytes(a->m, a->k, a->n);
  const onyx_workspace_view *ws = smm_view(ctx, SMM_WS_PARTIALS, need);
  if (need > 0 && ws == NULL) return smm_too_small(ctx, SMM_WS_PARTIALS, "partials", need);
  cudaStream_t stream = (cudaStream_t)ctx->stream;
  if (need > 0 && (ws->data != s->zeroed || need > s->zeroed_bytes)) {
    onyx_status st = onyx__cuda_check(ctx, cudaMemsetAsync(ws->data, 0, (size_t)need, stream),
                                      "cudaMemsetAsync");
    if (st != ONYX_STATUS_OK) return st;
    s->zeroed = ws->data;
    s->zeroed_bytes = need;
  }
  a->partial = need ? (float *)ws->data : NULL;
  a->counters = need ? (unsigned *)((char *)ws->data + smm_partial_bytes(a->m, a->k, a->n)) : NULL;
  return onyx__cuda_check(ctx, onyx__cuda_launch_smm(a, stream), "SiluMulMatMul");
}

/* The prompt route: the SiluMul kernel into the A view, then the cuBLASLt product of A
 * and W. Both views are checked before either launch, so a short one writes nothing. */
static onyx_status smm_prompt_run(smm_state *s, onyx_compute_ctx *ctx,
                                  const onyx__cuda_smm_args *a) {
  const uint64_t need_a = smm_a_bytes(a->m, a->k, a->dtype);
  const uint64_t need_lt = smm_lt_bytes(a->m, a->k, a->n);
  const onyx_workspace_view *av = smm_view(ctx, SMM_WS_A, need_a);
  const onyx_workspace_view *lt = smm_view(ctx, SMM_WS_LT, need_lt);
  if (av == NULL) return smm_too_small(ctx, SMM_WS_A, "activation", need_a);
  if (lt == NULL) return smm_too_small(ctx, SMM_WS_LT, "cuBLASLt workspace", need_lt);
  onyx_status st = onyx__cuda_check(
      ctx,
      onyx__cuda_launch_silu_mul(a->dtype, a->gu, av->data, a->m, a->k, (cudaStream_t)ctx->stream),
      "SiluMulMatMul: the activation of the rows");
  if (st != ONYX_STATUS_OK) return st;
  return onyx__cuda_lt_product(s->head.provider, &s->lt, ctx, a->dtype, av->data, a->w, a->y, a->m,
                               a->n, a->k, lt);
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
  if ((st = smm_shape(gu, w, dims, why, sizeof why)) != ONYX_STATUS_OK)
    return onyx__cuda_error(ctx, st, "%s", why);
  if (((uintptr_t)w->data & 15u) != 0)
    return onyx__cuda_error(ctx, ONYX_STATUS_UNSUPPORTED, "W is not 16-byte aligned");
  onyx_tensor *y = NULL;
  st = onyx__cuda_alloc_output(&s->head, ctx, 0, gu->dtype, gu->rank, dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  const int64_t k = w->dims[0], rows = onyx_tensor_numel(gu) / (2 * k);
  if (rows == 0) return ONYX_STATUS_OK;
  onyx__cuda_smm_args a = {.dtype = gu->dtype,
                           .m = rows,
                           .n = w->dims[1],
                           .k = k,
                           .gu = gu->data,
                           .w = w->data,
                           .y = y->data};
  return smm_prompt(rows) ? smm_prompt_run(s, ctx, &a) : smm_run(s, ctx, &a);
}

static onyx_status smm_workspace(void *state, const onyx_tensor *in, size_t input_count,
                                 onyx_workspace_requirement *req) {
  req->count = 0;
  if (input_count != SMM_INPUTS) return ONYX_STATUS_INVALID_ARGUMENT;
  (void)state;
  if (in[SMM_W].rank != 2 || in[SMM_W].dims[0] <= 0) return ONYX_STATUS_OK; /* compute refuses */
  const int64_t k = in[SMM_W].dims[0], n = in[SMM_W].dims[1];
  const int64_t rows = onyx_tensor_numel(&in[SMM_GU]) / (2 * k);
  req->count = SMM_WS_COUNT;
  /* SESSION: kept per node, so the counters stay clean from one step to the next. */
  req->regions[SMM_WS_PARTIALS] = (onyx_workspace_region){.name = "silu_mul_matmul_partials",
                                                          .bytes = smm_session_bytes(rows, k, n),
                                                          .alignment = 256,
                                                          .lifetime = ONYX_LIFETIME_SESSION};
  /* STEP: read by the product right after the SiluMul kernel writes it, in one call. */
  req->regions[SMM_WS_A] = (onyx_workspace_region){.name = "silu_mul_matmul_activation",
                                                   .bytes = smm_a_bytes(rows, k, in[SMM_GU].dtype),
                                                   .alignment = 256,
                                                   .lifetime = ONYX_LIFETIME_STEP};
  req->regions[SMM_WS_LT] = (onyx_workspace_region){.name = "cublaslt_workspace",
                                                    .bytes = smm_lt_bytes(rows, k, n),
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
  onyx_status st = smm_shape(&in[SMM_GU], &in[SMM_W], dims, why, sizeof why);
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
  smm_state *s = onyx__cuda_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
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
