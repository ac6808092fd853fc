/*
 * ai.onyx::SiluMulMatMul (docs/ops.md): an MLP's activation and its down product in
 * one node,
 *
 *   A = silu(GU[..., :I]) · GU[..., I:]  (rounded to T)    Y = A · W
 *
 * The silu_matmul optimization makes it from ai.onyx::SiluMul and the MatMul that is
 * its output's only reader. A is computed by the SiluMul kernel's own code
 * (onyx__cpu_silu_mul_rows) into a buffer of T, and the product runs through the same
 * float32 GEMM as the MatMul kernel, W packed at create as that kernel packs it, so the
 * fused node gives the unfused pair's bits where that MatMul takes the same route. W is
 * read as [K, N] only: transB = 1 (transpose_weights' [N, K] layout) is declined.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_impl.h"

extern const onyx_kernel_table onyx__cpu_k_silu_mul_matmul;

#define CPU_SMM_TYPES                                                                              \
  (ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT32) | ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT16) |                       \
   ONYX_DTYPE_BIT(ONYX_DTYPE_BFLOAT16))

enum { SMM_GU, SMM_W, SMM_INPUTS };

typedef struct cpu_smm_state {
  onyx__cpu_node base;
  onyx__cpu_fused_w w; /* W, packed at create where it can be */
} cpu_smm_state;

/* The checks shared by compute and infer: Y's shape in dims, or a message in why. */
static onyx_status cpu_smm_shape(const onyx_tensor *gu, const onyx_tensor *w, int64_t *dims,
                                 char *why, size_t cap) {
  if (!onyx__cpu_dtype_in(gu->dtype, CPU_SMM_TYPES))
    return onyx__cpu_fail(why, cap, ONYX_STATUS_UNSUPPORTED,
                          "input 0 has dtype %s; float32, float16 or bfloat16 expected",
                          onyx__cpu_dtype_name(gu->dtype));
  if (w->dtype != gu->dtype)
    return onyx__cpu_fail(why, cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "W has dtype %s; input 0's dtype %s expected",
                          onyx__cpu_dtype_name(w->dtype), onyx__cpu_dtype_name(gu->dtype));
  if (gu->rank < 1 || w->rank != 2 || w->dims[0] < 1 || gu->dims[gu->rank - 1] != 2 * w->dims[0])
    return onyx__cpu_fail(why, cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "input 0 %s and W %s: [..., 2K] (gate and up halves) and [K, N] with "
                          "K >= 1 expected",
                          onyx__cpu_tensor_shape(gu).s, onyx__cpu_tensor_shape(w).s);
  memcpy(dims, gu->dims, gu->rank * sizeof dims[0]);
  dims[gu->rank - 1] = w->dims[1];
  return ONYX_STATUS_OK;
}

static onyx_status cpu_smm_compute(void *state, onyx_compute_ctx *ctx, const onyx_tensor *const *in,
                                   size_t input_count) {
  const cpu_smm_state *s = state;
  /* A W packed at create may come without data (the core freed the original). */
  const onyx_tensor *checked[SMM_INPUTS] = {NULL};
  for (size_t i = 0; i < input_count && i < SMM_INPUTS; ++i)
    checked[i] = i == SMM_W && s->w.packed.data ? NULL : in[i];
  onyx_status st =
      onyx__cpu_check_inputs(ctx, checked, input_count < SMM_INPUTS ? input_count : SMM_INPUTS, 1);
  if (st != ONYX_STATUS_OK) return st;
  if (input_count != SMM_INPUTS || !in[SMM_GU] || !in[SMM_W]) {
    ctx->set_error(ctx, "SiluMulMatMul takes GU and W; got %zu inputs", input_count);
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  const onyx_tensor *gu = in[SMM_GU], *w = in[SMM_W];
  int64_t dims[ONYX_MAX_RANK];
  char why[ONYX__CPU_REASON_CAP] = "";
  if ((st = cpu_smm_shape(gu, w, dims, why, sizeof why)) != ONYX_STATUS_OK) {
    ctx->set_error(ctx, "%s", why);
    return st;
  }
  if ((st = onyx__cpu_fused_check_packed(&s->w, ctx, gu->dtype, w)) != ONYX_STATUS_OK) return st;
  onyx_tensor *y = NULL;
  st = onyx__cpu_alloc_output(&s->base, ctx, gu->dtype, gu->rank, dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  const int64_t k = w->dims[0], n = w->dims[1], rows = onyx_tensor_numel(gu) / (2 * k);
  const onyx__cpu_fused_scratch sc =
      onyx__cpu_fused_scratch_of(&s->w, s->base.provider, gu->dtype, rows, k, n);
  if (sc.total == 0) return ONYX_STATUS_OK;
  const onyx_workspace_view *v = ctx->workspace_count > 0 ? &ctx->workspace[0] : NULL;
  if (v == NULL || v->data == NULL || v->bytes < sc.total) {
    ctx->set_error(ctx,
                   "workspace region 0 (silu_mul_matmul_scratch) has %llu bytes, %llu required",
                   v ? (unsigned long long)v->bytes : 0ull, (unsigned long long)sc.total);
    return ONYX_STATUS_WORKSPACE_TOO_SMALL;
  }
  onyx__cpu_silu_mul_rows(s->base.provider, gu->dtype, gu->data, v->data, rows, k);
  onyx__cpu_fused_product(&s->w, s->base.provider, gu->dtype, &sc, v->data, w, rows, y->data);
  return ONYX_STATUS_OK;
}

/* One SESSION region (a decode step allocates nothing): A in T, then the GEMM's
 * scratch (onyx__cpu_fused_scratch). */
static onyx_status cpu_smm_workspace(void *state, const onyx_tensor *in, size_t input_count,
                                     onyx_workspace_requirement *req) {
  req->count = 0;
  if (input_count != SMM_INPUTS) return ONYX_STATUS_INVALID_ARGUMENT;
  if (in[SMM_W].rank != 2) return ONYX_STATUS_OK; /* compute refuses it, naming the shapes */
  const int64_t k = in[SMM_W].dims[0], n = in[SMM_W].dims[1];
  const int64_t rows = k > 0 ? onyx_tensor_numel(&in[SMM_GU]) / (2 * k) : 0;
  const cpu_smm_state *s = state;
  const onyx__cpu_fused_scratch sc =
      onyx__cpu_fused_scratch_of(&s->w, s->base.provider, in[SMM_GU].dtype, rows, k, n);
  if (sc.total == 0) return ONYX_STATUS_OK;
  req->count = 1;
  req->regions[0] = (onyx_workspace_region){.name = "silu_mul_matmul_scratch",
                                            .bytes = sc.total,
                                            .alignment = 64,
                                            .lifetime = ONYX_LIFETIME_SESSION};
  return ONYX_STATUS_OK;
}

static onyx_status cpu_smm_infer(void *state, const onyx_tensor *in, size_t input_count,
                                 onyx_tensor *outputs, size_t output_count) {
  if (input_count != SMM_INPUTS || in[SMM_GU].dtype == ONYX_DTYPE_UNDEFINED)
    return ONYX_STATUS_INVALID_ARGUMENT;
  int64_t dims[ONYX_MAX_RANK];
  char why[ONYX__CPU_REASON_CAP] = "";
  onyx_status st = cpu_smm_shape(&in[SMM_GU], &in[SMM_W], dims, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cpu_reason(state, st, why);
  onyx__cpu_infer_out(outputs, output_count, 0, in[SMM_GU].dtype, in[SMM_GU].rank, dims);
  return ONYX_STATUS_OK;
}

static void cpu_smm_destroy(void *state) {
  cpu_smm_state *s = state;
  if (s == NULL) return;
  onyx__cpu_fused_w_free(&s->w, s->base.provider);
  free(s);
}

/* transpose_weights asks first: declining transB = 1 keeps W as [K, N] here. */
static bool cpu_smm_supports(const onyx_node_info *node, char *reason, size_t reason_cap) {
  return onyx__cpu_fused_w_kn_only(node, reason, reason_cap) != ONYX_STATUS_UNSUPPORTED;
}

static onyx_status cpu_smm_create(void *provider_state, const onyx_node_info *node,
                                  void **out_state, char *err, size_t err_cap) {
  onyx_status tb = onyx__cpu_fused_w_kn_only(node, err, err_cap);
  if (tb != ONYX_STATUS_OK) return tb;
  cpu_smm_state *s = onyx__cpu_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  onyx__cpu_fused_w_pack(&s->w, s->base.provider, node, SMM_GU, SMM_W, SMM_INPUTS, "SiluMulMatMul");
  *out_state = s;
  return ONYX_STATUS_OK;
}

const onyx_kernel_table onyx__cpu_k_silu_mul_matmul = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "ai.onyx",
    .op_type = "SiluMulMatMul",
    .since_opset = 1,
    .until_opset = 0,
    .type_input = 0,
    .type_mask = CPU_SMM_TYPES,
    .supports = cpu_smm_supports,
    .create = cpu_smm_create,
    .destroy = cpu_smm_destroy,
    .workspace = cpu_smm_workspace,
    .compute = cpu_smm_compute,
    .infer = cpu_smm_infer,
};
