/*
 * com.microsoft MatMulNBits on CUDA: Y = A · dequant(B)ᵀ (+ bias) with float16 or
 * bfloat16 A (providers/common/nbits_params.h has the definition and the checks, shared
 * with the CPU provider). Float32 A, 2-bit codes and g_idx other than the trivial map
 * are declined at placement with the reason, so the CPU provider takes those nodes.
 *
 * Routes, from the geometry alone (docs/quantized-weights.md):
 * - GEMV (M <= 8 rows and their activations fit in shared memory): the packed weights
 *   are streamed once and dequantized in registers into tensor-core fragments
 *   (cuda_matmul_nbits.cu). No workspace.
 * - dequantize + cuBLASLt (prefill): B is dequantized into STEP workspace, a slice of
 *   columns at a time (at most 64 MiB), and each slice is one cuBLASLt product with
 *   float32 accumulation, the bias added by its epilogue. Workspace: the slice and
 *   cuBLASLt's scratch.
 * B, scales and zero points are read in the model's layout where the core put them on
 * the device: nothing is repacked, nothing is kept beyond a run. accuracy_level is
 * accepted and ignored: the products are in the activations' type with float32 sums,
 * as ONNX Runtime's CUDA provider does.
 */
#include <stdio.h>
#include <string.h>

#include "cuda_impl.h"
#include "cuda_nbits.h"
#include "cuda_nbits_route.h"
#include "nbits_params.h"

/* Largest dequantized slice of B the prefill route asks for. */
#define NB_SLICE_BYTES (64u << 20)

typedef struct nb_state {
  onyx__cuda_node head;
  onyx__pc_nb_attrs attrs;
} nb_state;

/* ------------------------------------------------------------------ placement, create */

static onyx_status nb_check_node(const onyx_node_info *node, onyx__pc_nb_attrs *a, char *why,
                                 size_t cap) {
  onyx_status st = onyx__pc_nb_attrs_read(node, a, why, cap);
  if (st != ONYX_STATUS_OK) return st;
  if (a->bits != 4 && a->bits != 8)
    return onyx__cuda_fail(why, cap, ONYX_STATUS_UNSUPPORTED,
                           "bits = %lld: the CUDA provider has 4- and 8-bit kernels",
                           (long long)a->bits);
  /* g_idx: only the map that reorders nothing (providers/common/nbits_params.c). */
  return onyx__pc_nb_g_idx_check(node, a, why, cap);
}

static bool nb_supports(const onyx_node_info *node, char *reason, size_t reason_cap) {
  onyx__pc_nb_attrs a;
  return nb_check_node(node, &a, reason, reason_cap) == ONYX_STATUS_OK;
}

static onyx_status nb_create(void *provider_state, const onyx_node_info *node, void **out_state,
                             char *err, size_t err_cap) {
  onyx__pc_nb_attrs a;
  onyx_status st = nb_check_node(node, &a, err, err_cap);
  if (st != ONYX_STATUS_OK) return st;
  nb_state *s = onyx__cuda_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  s->attrs = a;
  *out_state = s;
  return ONYX_STATUS_OK;
}

/* ------------------------------------------------------------------ plan */

enum { NB_WS_DEQUANT = ONYX__CUDA_NB_WS_DEQUANT, NB_WS_LT = ONYX__CUDA_NB_WS_LT, NB_WS_COUNT };

typedef struct nb_plan {
  onyx__pc_nb_geom g;
  onyx__cuda_nb_route r;
} nb_plan;

void onyx__cuda_nb_route_make(const onyx__pc_nb_attrs *a, int64_t m, onyx__cuda_nb_route *r) {
  memset(r, 0, sizeof *r);
  if (m == 0) return;
  r->gemv = m <= ONYX__CUDA_NBITS_GEMV_MAX_M &&
            onyx__cuda_nbits_gemv_smem((int)a->bits, m, a->k_blocks, a->block_size) <=
                ONYX__CUDA_NBITS_GEMV_MAX_SMEM;
  if (r->gemv) return;
  const uint64_t row = (uint64_t)a->k * 2u;
  int64_t slice = (int64_t)(NB_SLICE_BYTES / row) / 16 * 16;
  if (slice < 16) slice = 16;
  r->slice_n = slice < a->n ? slice : a->n;
  r->ws[NB_WS_DEQUANT] = ((uint64_t)r->slice_n * row + 255u) / 256u * 256u;
  /* cuBLASLt's scratch: split-K partial sums of one slice's output, 1 to 32 MiB. */
  double want = (double)m * (double)r->slice_n * 16.0;
  uint64_t lt = want < (double)(1u << 20) ? (1u << 20) : (uint64_t)want;
  r->ws[NB_WS_LT] = lt > (32u << 20) ? (32u << 20) : (lt + 255u) / 256u * 256u;
}

static onyx_status nb_plan_make(const nb_state *s, const onyx_tensor *const *in, size_t count,
                                nb_plan *p, char *why, size_t cap) {
  memset(p, 0, sizeof *p);
  const onyx__pc_nb_attrs *a = &s->attrs;
  onyx_status st = onyx__pc_nb_geometry(a, in, count, &p->g, why, cap);
  if (st != ONYX_STATUS_OK) return st;
  if (p->g.t1 != ONYX_DTYPE_FLOAT16 && p->g.t1 != ONYX_DTYPE_BFLOAT16)
    return onyx__cuda_fail(why, cap, ONYX_STATUS_UNSUPPORTED,
                           "input 0 (A) is %s: the CUDA kernels take float16 or bfloat16",
                           onyx__cuda_dtype_name(p->g.t1));
  onyx__cuda_nb_route_make(a, p->g.m, &p->r);
  return ONYX_STATUS_OK;
}

/* Infer and workspace get inputs as an array: absent ones have dtype UNDEFINED. */
static bool nb_in(const onyx_tensor *inputs, size_t count, const onyx_tensor **out) {
  if (count > ONYX__PC_NB_INPUTS) return false;
  for (size_t i = 0; i < count; ++i)
    out[i] = inputs[i].dtype == ONYX_DTYPE_UNDEFINED ? NULL : &inputs[i];
  return true;
}

static onyx_status nb_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                            onyx_tensor *outputs, size_t output_count) {
  onyx__cuda_infer_begin(outputs, output_count);
  const onyx_tensor *in[ONYX__PC_NB_INPUTS];
  nb_plan p;
  char why[ONYX__CUDA_REASON_CAP] = "";
  if (output_count < 1 || !nb_in(inputs, input_count, in))
    return onyx__cuda_reason(state, ONYX_STATUS_INVALID_ARGUMENT, "expected 1 output, <= 6 inputs");
  onyx_status st = nb_plan_make(state, in, input_count, &p, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cuda_reason(state, st, why);
  outputs[0].dtype = p.g.t1;
  outputs[0].rank = p.g.out_rank;
  memcpy(outputs[0].dims, p.g.out_dims, sizeof(int64_t) * p.g.out_rank);
  return ONYX_STATUS_OK;
}

static onyx_status nb_workspace(void *state, const onyx_tensor *inputs, size_t input_count,
                                onyx_workspace_requirement *req) {
  const onyx_tensor *in[ONYX__PC_NB_INPUTS];
  nb_plan p;
  char why[ONYX__CUDA_REASON_CAP] = "";
  req->count = 0;
  if (!nb_in(inputs, input_count, in))
    return onyx__cuda_reason(state, ONYX_STATUS_INVALID_ARGUMENT, "more than 6 inputs");
  onyx_status st = nb_plan_make(state, in, input_count, &p, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cuda_reason(state, st, why);
  if (p.r.gemv || p.g.m == 0) return ONYX_STATUS_OK; /* the GEMV needs none */
  req->count = NB_WS_COUNT;
  req->regions[NB_WS_DEQUANT] =
      (onyx_workspace_region){"nbits_dequant", p.r.ws[NB_WS_DEQUANT], 256, ONYX_LIFETIME_STEP};
  req->regions[NB_WS_LT] =
      (onyx_workspace_region){"cublaslt_workspace", p.r.ws[NB_WS_LT], 256, ONYX_LIFETIME_STEP};
  return ONYX_STATUS_OK;
}

/* ------------------------------------------------------------------ cuBLASLt */

/* Largest power of two (<= 256) dividing the address and the leading dimension. */
static uint32_t nb_align(const void *ptr, int64_t ld_bytes) {
  uintptr_t bits = (uintptr_t)ptr | (uintptr_t)256 | (uintptr_t)ld_bytes;
  uint32_t a = 1;
  while (a < 256 && (bits & a) == 0) a <<= 1;
  return a;
}

typedef struct nb_lt {
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t lw, la, ly;
  cublasLtMatmulPreference_t pref;
} nb_lt;

static void nb_lt_free(nb_lt *c) {
  if (c->pref) cublasLtMatmulPreferenceDestroy(c->pref);
  if (c->ly) cublasLtMatrixLayoutDestroy(c->ly);
  if (c->la) cublasLtMatrixLayoutDestroy(c->la);
  if (c->lw) cublasLtMatrixLayoutDestroy(c->lw);
  if (c->desc) cublasLtMatmulDescDestroy(c->desc);
}

/*
 * Y[:, n0 : n0 + n] = A · Wᵀ (+ bias[n0 : n0 + n]) for the dequantized slice W
 * (n x K row-major). Column-major, Yᵀ (n x M, ld N) = W (K x n col-major)ᵀ · Aᵀ (K x M).
 */
static onyx_status nb_lt_product(const onyx__cuda_provider *prov, const onyx__pc_nb_attrs *at,
                                 onyx_compute_ctx *ctx, uint32_t dtype, const void *a,
                                 const void *w, const void *bias, void *y, int64_t m, int64_t n,
                                 const onyx_workspace_view *lt_ws) {
  const int64_t k = at->k, ldy = at->n;
  cudaDataType_t t = dtype == ONYX_DTYPE_FLOAT16 ? CUDA_R_16F : CUDA_R_16BF;
  nb_lt c;
  memset(&c, 0, sizeof c);
  int32_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
  cublasStatus_t bs = cublasLtMatmulDescCreate(&c.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  if (bs == CUBLAS_STATUS_SUCCESS)
    bs = cublasLtMatmulDescSetAttribute(c.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof op_t);
  if (bs == CUBLAS_STATUS_SUCCESS)
    bs = cublasLtMatmulDescSetAttribute(c.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof op_n);
  if (bs == CUBLAS_STATUS_SUCCESS && bias != NULL) {
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    bs = cublasLtMatmulDescSetAttribute(c.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    if (bs == CUBLAS_STATUS_SUCCESS)
      bs = cublasLtMatmulDescSetAttribute(c.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                          sizeof bias);
    if (bs == CUBLAS_STATUS_SUCCESS)
      bs =
          cublasLtMatmulDescSetAttribute(c.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &t, sizeof t);
  }
  if (bs == CUBLAS_STATUS_SUCCESS)
    bs = cublasLtMatrixLayoutCreate(&c.lw, t, (uint64_t)k, (uint64_t)n, k);
  if (bs == CUBLAS_STATUS_SUCCESS)
    bs = cublasLtMatrixLayoutCreate(&c.la, t, (uint64_t)k, (uint64_t)m, k);
  if (bs == CUBLAS_STATUS_SUCCESS)
    bs = cublasLtMatrixLayoutCreate(&c.ly, t, (uint64_t)n, (uint64_t)m, ldy);
  if (bs == CUBLAS_STATUS_SUCCESS) bs = cublasLtMatmulPreferenceCreate(&c.pref);
  uint64_t ws_bytes = lt_ws != NULL && lt_ws->data != NULL ? lt_ws->bytes : 0;
  if (bs == CUBLAS_STATUS_SUCCESS)
    bs = cublasLtMatmulPreferenceSetAttribute(c.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                              &ws_bytes, sizeof ws_bytes);
  const uint32_t align[4] = {nb_align(w, k * 2), nb_align(a, k * 2), nb_align(y, ldy * 2),
                             nb_align(y, ldy * 2)};
  static const cublasLtMatmulPreferenceAttributes_t align_attr[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4 && bs == CUBLAS_STATUS_SUCCESS; ++i)
    bs = cublasLtMatmulPreferenceSetAttribute(c.pref, align_attr[i], &align[i], sizeof align[i]);
  cublasLtMatmulHeuristicResult_t result;
  int found = 0;
  memset(&result, 0, sizeof result);
  if (bs == CUBLAS_STATUS_SUCCESS)
    bs = cublasLtMatmulAlgoGetHeuristic(prov->lt, c.desc, c.lw, c.la, c.ly, c.ly, c.pref, 1,
                                        &result, &found);
  if (bs == CUBLAS_STATUS_SUCCESS && found > 0) {
    const float alpha = 1.0f, beta = 0.0f;
    bs = cublasLtMatmul(prov->lt, c.desc, &alpha, w, c.lw, a, c.la, &beta, y, c.ly, y, c.ly,
                        &result.algo, ws_bytes ? lt_ws->data : NULL, (size_t)ws_bytes,
                        (cudaStream_t)ctx->stream);
  }
  nb_lt_free(&c);
  if (bs != CUBLAS_STATUS_SUCCESS)
    return onyx__cuda_error(ctx, ONYX_STATUS_PROVIDER_ERROR, "cuBLASLt failed: %s",
                            cublasLtGetStatusString(bs));
  if (found == 0)
    return onyx__cuda_error(ctx, ONYX_STATUS_UNSUPPORTED,
                            "cuBLASLt has no algorithm for %s %lldx%lldx%lld with %llu workspace "
                            "bytes",
                            onyx__cuda_dtype_name(dtype), (long long)m, (long long)n, (long long)k,
                            (unsigned long long)ws_bytes);
  return ONYX_STATUS_OK;
}

onyx_status onyx__cuda_nb_prefill(const onyx__cuda_provider *prov, onyx_compute_ctx *ctx,
                                  const onyx__pc_nb_attrs *at, const onyx__cuda_nb_route *r,
                                  const onyx__cuda_nbits_args *args, void *dequant,
                                  const onyx_workspace_view *lt_ws) {
  const size_t es = 2;
  for (int64_t n0 = 0; n0 < at->n; n0 += r->slice_n) {
    onyx__cuda_nbits_args sl = *args;
    sl.n = at->n - n0 < r->slice_n ? at->n - n0 : r->slice_n;
    sl.b = (const uint8_t *)args->b + n0 * at->k_blocks * at->blob;
    sl.scales = (const char *)args->scales + (size_t)(n0 * at->k_blocks) * es;
    if (args->zp_kind == ONYX__PC_NB_ZP_PACKED)
      sl.zp = (const uint8_t *)args->zp + n0 * at->zp_bytes;
    else if (args->zp_kind == ONYX__PC_NB_ZP_FLOAT)
      sl.zp = (const char *)args->zp + (size_t)(n0 * at->k_blocks) * es;
    cudaError_t e = onyx__cuda_launch_nbits_dequant(&sl, dequant, (cudaStream_t)ctx->stream);
    if (e != cudaSuccess) return onyx__cuda_check(ctx, e, "MatMulNBits: dequantizing B");
    const void *bias = args->bias ? (const char *)args->bias + (size_t)n0 * es : NULL;
    onyx_status st = nb_lt_product(prov, at, ctx, args->dtype, args->a, dequant, bias,
                                   (char *)args->y + (size_t)n0 * es, args->m, sl.n, lt_ws);
    if (st != ONYX_STATUS_OK) return st;
  }
  return ONYX_STATUS_OK;
}

/* ------------------------------------------------------------------ compute */

static onyx_status nb_compute(void *state, onyx_compute_ctx *ctx, const onyx_tensor *const *inputs,
                              size_t input_count) {
  const nb_state *s = state;
  onyx_status st = onyx__cuda_check_inputs(ctx, inputs, input_count, 3);
  if (st != ONYX_STATUS_OK) return st;
  nb_plan p;
  char why[ONYX__CUDA_REASON_CAP];
  st = nb_plan_make(s, inputs, input_count, &p, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cuda_error(ctx, st, "%s", why);
  void *ws[NB_WS_COUNT] = {NULL, NULL};
  for (int i = 0; i < NB_WS_COUNT; ++i) {
    if (p.r.ws[i] == 0) continue;
    const onyx_workspace_view *v = (size_t)i < ctx->workspace_count ? &ctx->workspace[i] : NULL;
    if (v == NULL || v->data == NULL || v->bytes < p.r.ws[i])
      return onyx__cuda_error(ctx, ONYX_STATUS_WORKSPACE_TOO_SMALL,
                              "workspace region %d (%s) has %llu bytes, %llu required", i,
                              i == NB_WS_DEQUANT ? "nbits_dequant" : "cublaslt_workspace",
                              v ? (unsigned long long)v->bytes : 0ull,
                              (unsigned long long)p.r.ws[i]);
    ws[i] = v->data;
  }
  onyx_tensor *y = NULL;
  st = onyx__cuda_alloc_output(&s->head, ctx, 0, p.g.t1, p.g.out_rank, p.g.out_dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL || p.g.m == 0) return st;
  const onyx__pc_nb_attrs *a = &s->attrs;
  const onyx_tensor *zp = onyx__cuda_input(inputs, input_count, ONYX__PC_NB_ZP);
  const onyx_tensor *bias = onyx__cuda_input(inputs, input_count, ONYX__PC_NB_BIAS);
  onyx__cuda_nbits_args args = {.dtype = p.g.t1,
                                .bits = (int)a->bits,
                                .m = p.g.m,
                                .n = a->n,
                                .k = a->k,
                                .block_size = a->block_size,
                                .k_blocks = a->k_blocks,
                                .zp_kind = (int)p.g.w.zp,
                                .zp_row = a->zp_bytes,
                                .a = inputs[ONYX__PC_NB_A]->data,
                                .b = inputs[ONYX__PC_NB_B]->data,
                                .scales = inputs[ONYX__PC_NB_SCALES]->data,
                                .zp = zp ? zp->data : NULL,
                                .bias = bias ? bias->data : NULL,
                                .y = y->data,
                                .sm_count = s->head.provider->sm_count,
                                .split_k = 0,
                                .tune = 0,
                                .plain = !onyx__cuda_pdl};
  if (!p.r.gemv)
    return onyx__cuda_nb_prefill(s->head.provider, ctx, a, &p.r, &args, ws[NB_WS_DEQUANT],
                                 &ctx->workspace[NB_WS_LT]);
  return onyx__cuda_check(ctx, onyx__cuda_launch_nbits_gemv(&args, (cudaStream_t)ctx->stream),
                          "MatMulNBits GEMV");
}

const onyx_kernel_table onyx__cuda_k_matmul_nbits = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "com.microsoft",
    .op_type = "MatMulNBits",
    .since_opset = 1,
    .until_opset = 0,
    .type_input = 0,
    .type_mask = ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT16) | ONYX_DTYPE_BIT(ONYX_DTYPE_BFLOAT16),
    .supports = nb_supports,
    .create = nb_create,
    .destroy = onyx__cuda_destroy,
    .workspace = nb_workspace,
    .compute = nb_compute,
    .infer = nb_infer,
};
