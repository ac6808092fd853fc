/*
 * MatMul and Gemm through cuBLASLt.
 *
 * Row-major to cuBLASLt's column-major: a row-major Y (M x N) is a column-major
 * Y^T (N x M), and Y^T = op(B)^T op(A)^T, so B is passed as cuBLASLt's first
 * operand and A as its second, with no data moved.
 *
 * MatMul broadcasts its batch axes like numpy, taking the cheapest form that the
 * shapes allow:
 *   fold     B has no batch: A's batch rows stack into one GEMM of batch*M rows;
 *   strided  A has no batch (stride 0), or both batches are the same shape;
 *   loop     anything else (e.g. [2,1,M,K] x [1,3,K,N]): one GEMM per output batch.
 * 16-bit inputs accumulate in float32 (CUBLAS_COMPUTE_32F); float32 uses plain FP32
 * unless the provider option allow_tf32 is on.
 *
 * Workspace: cuBLASLt's scratch is declared as a STEP region sized from the output
 * geometry (split-K partial sums), never cudaMalloc'd; the heuristic is told the size
 * of the view it got, so every algorithm it returns fits. Other kernels reach the
 * same path for a plain row-major product through onyx__cuda_lt_product (the prompt
 * route of RMSNormMatMul), their scratch sized by onyx__cuda_lt_workspace_bytes.
 *
 * Decode: a 16-bit MatMul of at most 4 rows takes cuda_gemv.cu's kernel instead (one
 * launch, the weights streamed at the copy bandwidth; option.gemv = false keeps
 * cuBLASLt), with a SESSION region of float32 partials per K split where K is split
 * (added in a fixed order: the result does not depend on block timing).
 *
 * com.microsoft FusedMatMul is MatMul with alpha and a transposed B (transB), the form
 * the transpose_weights pass gives a decode product's constant weight: B as [N, K]
 * takes the [N, K] GEMV (cuda_gemv_nk.cuh: no partials), and prompts cuBLASLt with B
 * transposed. transA and the transBatch attributes are declined at placement.
 *
 * Start-up: cuBLASLt sets itself up on its first product (tens of milliseconds: the
 * library, its first heuristic, its first kernels loaded). The provider runs one tiny
 * product of each type when it opens (onyx__cuda_matmul_warm_up), so that the cost
 * lands there, logged, and not in a session's first run.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cuda_impl.h"

enum { MM_FOLD, MM_STRIDED, MM_LOOP };

typedef struct mm_geo {
  int64_t m, n, k;
  int64_t batch; /* output matrices */
  int mode;
  int64_t stride_a, stride_b; /* elements between consecutive matrices (strided) */
  uint32_t out_rank;
  int64_t out_dims[ONYX_MAX_RANK];
  /* loop: the output batch axes and each operand's matrix stride along them */
  uint32_t brank;
  int64_t bdims[ONYX_MAX_RANK];
  int64_t a_bstride[ONYX_MAX_RANK], b_bstride[ONYX_MAX_RANK];
} mm_geo;

/* How a node's products take their operands: cuBLASLt's transposes and alpha. */
typedef struct lt_op {
  bool trans_a, trans_b;
  float alpha;
} lt_op;

typedef struct mm_state {
  onyx__cuda_node head;
  bool gemm;
  bool fused; /* FusedMatMul: MatMul's broadcasting, alpha, transB */
  bool trans_a, trans_b;
  float alpha, beta;
  onyx__cuda_lt_cache cache;
  /* The GEMV route's SESSION block: where it was zeroed last, and how many bytes. */
  void *gemv_zeroed;
  uint64_t gemv_zeroed_bytes;
} mm_state;

/* ------------------------------------------------------------------ geometry */

static onyx_status matmul_geometry(const onyx_tensor *a, const onyx_tensor *b, bool trans_b,
                                   mm_geo *g, char *err, size_t err_cap) {
  memset(g, 0, sizeof *g);
  if (a->rank < 1 || b->rank < 1 || a->rank > ONYX_MAX_RANK || b->rank > ONYX_MAX_RANK)
    return onyx__cuda_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "MatMul needs inputs of rank 1..%d, got %s and %s", ONYX_MAX_RANK,
                           onyx__cuda_tensor_shape(a).s, onyx__cuda_tensor_shape(b).s);
  /* A vector A is a 1 x K matrix, a vector B a K x 1 one; the axis is dropped again. */
  g->m = a->rank == 1 ? 1 : a->dims[a->rank - 2];
  int64_t ka = a->dims[a->rank - 1];
  /* transB: B's last two axes are [N, K] (a vector B has none to swap). */
  const bool tb = trans_b && b->rank > 1;
  int64_t kb = b->rank == 1 ? b->dims[0] : b->dims[b->rank - (tb ? 1 : 2)];
  g->n = b->rank == 1 ? 1 : b->dims[b->rank - (tb ? 2 : 1)];
  if (ka != kb)
    return onyx__cuda_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "MatMul inner dimensions differ: A %s has K = %lld, B %s has K = %lld",
                           onyx__cuda_tensor_shape(a).s, (long long)ka,
                           onyx__cuda_tensor_shape(b).s, (long long)kb);
  g->k = ka;
  uint32_t ra = a->rank > 2 ? a->rank - 2 : 0, rb = b->rank > 2 ? b->rank - 2 : 0;
  g->brank = ra > rb ? ra : rb;
  int64_t na = 1, nb = 1;
  bool same = true; /* equal batch axes once right-aligned */
  for (uint32_t d = 0; d < g->brank; ++d) {
    int64_t da = d + ra >= g->brank ? a->dims[d + ra - g->brank] : 1;
    int64_t db = d + rb >= g->brank ? b->dims[d + rb - g->brank] : 1;
    if (da != db && da != 1 && db != 1)
      return onyx__cuda_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                             "MatMul batch axes of A %s and B %s do not broadcast",
                             onyx__cuda_tensor_shape(a).s, onyx__cuda_tensor_shape(b).s);
    same = same && da == db;
    g->bdims[d] = da == 1 ? db : da;
    na *= da;
    nb *= db;
  }
  g->batch = onyx__cuda_dims_product(g->bdims, 0, g->brank);
  /* Matrix strides along the batch axes (0 where an operand is broadcast). */
  int64_t sa = g->m * g->k, sb = g->k * g->n;
  for (uint32_t d = g->brank; d-- > 0;) {
    int64_t da = d + ra >= g->brank ? a->dims[d + ra - g->brank] : 1;
    int64_t db = d + rb >= g->brank ? b->dims[d + rb - g->brank] : 1;
    g->a_bstride[d] = da == 1 ? 0 : sa;
    g->b_bstride[d] = db == 1 ? 0 : sb;
    sa *= da;
    sb *= db;
  }
  g->out_rank = 0;
  for (uint32_t d = 0; d < g->brank; ++d) g->out_dims[g->out_rank++] = g->bdims[d];
  if (a->rank > 1) g->out_dims[g->out_rank++] = g->m;
  if (b->rank > 1) g->out_dims[g->out_rank++] = g->n;
  if (nb == 1) {
    g->mode = MM_FOLD;
  } else if (na == 1) {
    g->mode = MM_STRIDED;
    g->stride_a = 0;
    g->stride_b = g->k * g->n;
  } else if (same) {
    g->mode = MM_STRIDED;
    g->stride_a = g->m * g->k;
    g->stride_b = g->k * g->n;
  } else {
    g->mode = MM_LOOP;
  }
  return ONYX_STATUS_OK;
}

static onyx_status gemm_geometry(const mm_state *s, const onyx_tensor *a, const onyx_tensor *b,
                                 mm_geo *g, char *err, size_t err_cap) {
  memset(g, 0, sizeof *g);
  if (a->rank != 2 || b->rank != 2)
    return onyx__cuda_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "Gemm needs 2-D A and B, got %s and %s", onyx__cuda_tensor_shape(a).s,
                           onyx__cuda_tensor_shape(b).s);
  g->m = s->trans_a ? a->dims[1] : a->dims[0];
  int64_t ka = s->trans_a ? a->dims[0] : a->dims[1];
  int64_t kb = s->trans_b ? b->dims[1] : b->dims[0];
  g->n = s->trans_b ? b->dims[0] : b->dims[1];
  if (ka != kb)
    return onyx__cuda_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "Gemm inner dimensions differ: op(A) has K = %lld, op(B) K = %lld "
                           "(A %s, B %s, transA %d, transB %d)",
                           (long long)ka, (long long)kb, onyx__cuda_tensor_shape(a).s,
                           onyx__cuda_tensor_shape(b).s, s->trans_a, s->trans_b);
  g->k = ka;
  g->batch = 1;
  g->mode = MM_FOLD;
  g->out_rank = 2;
  g->out_dims[0] = g->m;
  g->out_dims[1] = g->n;
  return ONYX_STATUS_OK;
}

static onyx_status mm_geometry(const mm_state *s, const onyx_tensor *a, const onyx_tensor *b,
                               mm_geo *g, char *err, size_t err_cap) {
  return s->gemm ? gemm_geometry(s, a, b, g, err, err_cap)
                 : matmul_geometry(a, b, s->fused && s->trans_b, g, err, err_cap);
}

/* cuBLASLt's scratch for this output: room for split-K partial sums of the whole
 * output in float32 (several splits), at least 1 MiB and at most the 32 MiB that
 * cuBLAS itself uses on Hopper. 0 when there is nothing to multiply. */
static uint64_t lt_scratch_bytes(double rows, int64_t n, int64_t k) {
  if (rows == 0 || n == 0 || k == 0) return 0;
  const uint64_t lo = 1u << 20, hi = 32u << 20;
  double want = rows * (double)n * 16.0;
  if (want <= (double)lo) return lo;
  if (want >= (double)hi) return hi;
  return ((uint64_t)want + 255u) / 256u * 256u;
}

static uint64_t mm_workspace_bytes(const mm_geo *g) {
  if (g->batch == 0) return 0;
  return lt_scratch_bytes((double)g->m * (double)(g->mode == MM_LOOP ? 1 : g->batch), g->n, g->k);
}

uint64_t onyx__cuda_lt_workspace_bytes(int64_t m, int64_t n, int64_t k) {
  return lt_scratch_bytes((double)m, n, k);
}

/* The GEMV route (cuda_gemv.cu): a MatMul of at most ONYX__CUDA_GEMV_MAX_ROWS rows
 * (a decode step) in a 16-bit type with B shared by every row (fold), N a multiple of
 * 8 — or, B as [N, K] (FusedMatMul transB), the shapes the [N, K] kernel takes. Taken
 * at compute when the operands are also 16-byte aligned; cuBLASLt otherwise. */
static bool gemv_route(const mm_state *s, const mm_geo *g, uint32_t dtype) {
  int64_t rows = g->m * g->batch;
  bool base = !s->gemm && s->head.provider->gemv && g->mode == MM_FOLD && rows >= 1 &&
              rows <= ONYX__CUDA_GEMV_MAX_ROWS &&
              (dtype == ONYX_DTYPE_FLOAT16 || dtype == ONYX_DTYPE_BFLOAT16);
  if (!base) return false;
  if (s->trans_b) return onyx__cuda_gemv_nk_fits(rows, g->k, g->n, onyx_dtype_size(dtype));
  return s->alpha == 1.0f && g->n >= 8 && g->n % 8 == 0 && g->n <= INT32_MAX && g->k >= 1 &&
         g->k <= INT32_MAX;
}

/* Its SESSION region: float32 partial sums of each K split, then a counter per 256
 * columns, when K is split across blocks; 0 bytes otherwise. */
static uint64_t gemv_partial_bytes(const mm_geo *g) {
  uint64_t split = (uint64_t)onyx__cuda_gemv_split(g->k, g->n);
  return split * (uint64_t)(g->m * g->batch) * (uint64_t)g->n * 4u;
}

static uint64_t gemv_session_bytes(const mm_state *s, const mm_geo *g, uint32_t dtype) {
  if (!gemv_route(s, g, dtype) || s->trans_b || onyx__cuda_gemv_split(g->k, g->n) <= 1) return 0;
  return gemv_partial_bytes(g) + ((uint64_t)g->n + 255u) / 256u * 4u;
}

/* ------------------------------------------------------------------ create */

enum { MM_MATMUL, MM_GEMM, MM_FUSED };

/* FusedMatMul's attributes this kernel takes: transB and alpha, no transA or batch
 * transposes; *reason says which it does not. */
static onyx_status fused_attrs(const onyx_node_info *node, int64_t *tb, float *alpha, char *err,
                               size_t err_cap) {
  static const char *const declined[] = {"transA", "transBatchA", "transBatchB"};
  onyx_status st;
  for (size_t i = 0; i < sizeof declined / sizeof declined[0]; ++i) {
    int64_t v = 0;
    if ((st = onyx__cuda_attr_int(node, declined[i], 0, &v, err, err_cap))) return st;
    if (v != 0)
      return onyx__cuda_fail(err, err_cap, ONYX_STATUS_UNSUPPORTED,
                             "FusedMatMul with %s = %lld is not supported on CUDA (only transB "
                             "and alpha)",
                             declined[i], (long long)v);
  }
  if ((st = onyx__cuda_attr_int(node, "transB", 0, tb, err, err_cap))) return st;
  return onyx__cuda_attr_float(node, "alpha", 1.0f, alpha, err, err_cap);
}

static bool fused_supports(const onyx_node_info *node, char *reason, size_t reason_cap) {
  int64_t tb = 0;
  float alpha = 1.0f;
  return fused_attrs(node, &tb, &alpha, reason, reason_cap) == ONYX_STATUS_OK;
}

static onyx_status mm_create(void *provider_state, const onyx_node_info *node, int kind,
                             void **out_state, char *err, size_t err_cap) {
  int64_t ta = 0, tb = 0;
  float alpha = 1.0f, beta = 1.0f;
  onyx_status st;
  if (kind == MM_GEMM && ((st = onyx__cuda_attr_int(node, "transA", 0, &ta, err, err_cap)) ||
                          (st = onyx__cuda_attr_int(node, "transB", 0, &tb, err, err_cap)) ||
                          (st = onyx__cuda_attr_float(node, "alpha", 1.0f, &alpha, err, err_cap)) ||
                          (st = onyx__cuda_attr_float(node, "beta", 1.0f, &beta, err, err_cap))))
    return st;
  if (kind == MM_FUSED && (st = fused_attrs(node, &tb, &alpha, err, err_cap))) return st;
  mm_state *s = onyx__cuda_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  s->gemm = kind == MM_GEMM;
  s->fused = kind == MM_FUSED;
  s->trans_a = ta != 0;
  s->trans_b = tb != 0;
  s->alpha = alpha;
  s->beta = beta;
  *out_state = s;
  return ONYX_STATUS_OK;
}

static onyx_status matmul_create(void *provider_state, const onyx_node_info *node, void **out_state,
                                 char *err, size_t err_cap) {
  return mm_create(provider_state, node, MM_MATMUL, out_state, err, err_cap);
}

static onyx_status fused_create(void *provider_state, const onyx_node_info *node, void **out_state,
                                char *err, size_t err_cap) {
  return mm_create(provider_state, node, MM_FUSED, out_state, err, err_cap);
}

static onyx_status gemm_create(void *provider_state, const onyx_node_info *node, void **out_state,
                               char *err, size_t err_cap) {
  return mm_create(provider_state, node, MM_GEMM, out_state, err, err_cap);
}

/* ------------------------------------------------------------------ workspace, infer */

static onyx_status mm_workspace(void *state, const onyx_tensor *inputs, size_t input_count,
                                onyx_workspace_requirement *out_req) {
  const mm_state *s = state;
  if (input_count < 2) return ONYX_STATUS_INVALID_ARGUMENT;
  mm_geo g;
  char why[ONYX__CUDA_REASON_CAP] = "";
  onyx_status st = mm_geometry(s, &inputs[0], &inputs[1], &g, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cuda_reason(state, st, why);
  out_req->count = 2;
  out_req->regions[0] = (onyx_workspace_region){.name = "cublaslt_workspace",
                                                .bytes = mm_workspace_bytes(&g),
                                                .alignment = 256,
                                                .lifetime = ONYX_LIFETIME_STEP};
  /* SESSION: kept per node, so the partials stay clean from one step to the next. */
  out_req->regions[1] = (onyx_workspace_region){.name = "gemv_partials",
                                                .bytes = gemv_session_bytes(s, &g, inputs[0].dtype),
                                                .alignment = 256,
                                                .lifetime = ONYX_LIFETIME_SESSION};
  return ONYX_STATUS_OK;
}

static onyx_status mm_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                            onyx_tensor *outputs, size_t output_count) {
  onyx__cuda_infer_begin(outputs, output_count);
  const mm_state *s = state;
  if (input_count < 2 || output_count < 1) return ONYX_STATUS_INVALID_ARGUMENT;
  mm_geo g;
  char why[ONYX__CUDA_REASON_CAP] = "";
  onyx_status st = mm_geometry(s, &inputs[0], &inputs[1], &g, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cuda_reason(state, st, why);
  outputs[0].dtype = inputs[0].dtype;
  outputs[0].rank = g.out_rank;
  memcpy(outputs[0].dims, g.out_dims, sizeof(int64_t) * g.out_rank);
  return ONYX_STATUS_OK;
}

/* ------------------------------------------------------------------ cuBLASLt */

static cudaDataType_t lt_type(uint32_t dtype) {
  switch (dtype) {
  case ONYX_DTYPE_FLOAT16:
    return CUDA_R_16F;
  case ONYX_DTYPE_BFLOAT16:
    return CUDA_R_16BF;
  default:
    return CUDA_R_32F;
  }
}

/* Largest power of two (<= 256) dividing every address the operand will take. */
static uint32_t alignment_of(const void *p, int64_t stride_elems, size_t esize) {
  uintptr_t bits = (uintptr_t)p | (uintptr_t)256;
  if (stride_elems != 0) bits |= (uintptr_t)(stride_elems * (int64_t)esize);
  uint32_t a = 1;
  while (a < 256 && (bits & a) == 0) a <<= 1;
  return a;
}

typedef struct lt_call {
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la, lb, lc; /* la: cuBLASLt's A (our B), lb: our A, lc: C = D */
  cublasLtMatmulPreference_t pref;
} lt_call;

static void lt_call_free(lt_call *c) {
  if (c->pref) cublasLtMatmulPreferenceDestroy(c->pref);
  if (c->lc) cublasLtMatrixLayoutDestroy(c->lc);
  if (c->lb) cublasLtMatrixLayoutDestroy(c->lb);
  if (c->la) cublasLtMatrixLayoutDestroy(c->la);
  if (c->desc) cublasLtMatmulDescDestroy(c->desc);
}

static onyx_status lt_fail(onyx_compute_ctx *ctx, const char *what, cublasStatus_t bs) {
  return onyx__cuda_error(ctx, ONYX_STATUS_PROVIDER_ERROR, "cuBLASLt %s failed: %s", what,
                          cublasLtGetStatusString(bs));
}

/* Layout of a rows x cols column-major matrix with leading dimension ld, batched. */
static cublasStatus_t lt_layout(cublasLtMatrixLayout_t *out, cudaDataType_t t, int64_t rows,
                                int64_t cols, int64_t ld, int32_t batch, int64_t stride) {
  cublasStatus_t bs = cublasLtMatrixLayoutCreate(out, t, (uint64_t)rows, (uint64_t)cols, ld);
  if (bs != CUBLAS_STATUS_SUCCESS || batch <= 1) return bs;
  bs = cublasLtMatrixLayoutSetAttribute(*out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                        sizeof batch);
  if (bs == CUBLAS_STATUS_SUCCESS)
    bs = cublasLtMatrixLayoutSetAttribute(*out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                          &stride, sizeof stride);
  return bs;
}

/*
 * One (possibly strided-batched) product: Y[M x N] = alpha op(A) op(B) + beta Y.
 * `align` holds the alignments of A, B and Y over every matrix of the call.
 */
static onyx_status lt_matmul(const onyx__cuda_provider *p, onyx__cuda_lt_cache *cache,
                             const lt_op *op, onyx_compute_ctx *ctx, uint32_t dtype, const void *a,
                             const void *b, void *y, int64_t m, int64_t n, int64_t k, int32_t batch,
                             int64_t stride_a, int64_t stride_b, float beta,
                             const uint32_t align[3], const onyx_workspace_view *ws) {
  cudaDataType_t t = lt_type(dtype);
  cublasComputeType_t compute = dtype == ONYX_DTYPE_FLOAT32 && p->allow_tf32
                                    ? CUBLAS_COMPUTE_32F_FAST_TF32
                                    : CUBLAS_COMPUTE_32F;
  lt_call c;
  memset(&c, 0, sizeof c);
  cublasStatus_t bs = cublasLtMatmulDescCreate(&c.desc, compute, CUDA_R_32F);
  int32_t op_a = op->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N; /* cuBLASLt's A is our B */
  int32_t op_b = op->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (bs == CUBLAS_STATUS_SUCCESS)
    bs = cublasLtMatmulDescSetAttribute(c.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a);
  if (bs == CUBLAS_STATUS_SUCCESS)
    bs = cublasLtMatmulDescSetAttribute(c.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b);
  /* Our B (K x N row-major, or N x K when transposed) as column-major. */
  if (bs == CUBLAS_STATUS_SUCCESS)
    bs = op->trans_b ? lt_layout(&c.la, t, k, n, k, batch, stride_b)
                     : lt_layout(&c.la, t, n, k, n, batch, stride_b);
  if (bs == CUBLAS_STATUS_SUCCESS)
    bs = op->trans_a ? lt_layout(&c.lb, t, m, k, m, batch, stride_a)
                     : lt_layout(&c.lb, t, k, m, k, batch, stride_a);
  if (bs == CUBLAS_STATUS_SUCCESS) bs = lt_layout(&c.lc, t, n, m, n, batch, m * n);
  if (bs == CUBLAS_STATUS_SUCCESS) bs = cublasLtMatmulPreferenceCreate(&c.pref);
  uint64_t ws_bytes = ws != NULL && ws->data != NULL ? ws->bytes : 0;
  if (bs == CUBLAS_STATUS_SUCCESS)
    bs = cublasLtMatmulPreferenceSetAttribute(c.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                              &ws_bytes, sizeof ws_bytes);
  static const cublasLtMatmulPreferenceAttributes_t align_attr[3] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, /* our A is cuBLASLt's B */
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES};
  for (int i = 0; i < 3 && bs == CUBLAS_STATUS_SUCCESS; ++i)
    bs = cublasLtMatmulPreferenceSetAttribute(c.pref, align_attr[i], &align[i], sizeof align[i]);
  if (bs == CUBLAS_STATUS_SUCCESS)
    bs = cublasLtMatmulPreferenceSetAttribute(c.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                              &align[2], sizeof align[2]);
  if (bs != CUBLAS_STATUS_SUCCESS) {
    lt_call_free(&c);
    return lt_fail(ctx, "descriptor setup", bs);
  }

  bool hit = cache->valid && cache->dtype == dtype && cache->m == m && cache->n == n &&
             cache->k == k && cache->batch == batch && cache->stride_a == stride_a &&
             cache->stride_b == stride_b && cache->beta_nonzero == (beta != 0.0f) &&
             cache->ws_bytes == ws_bytes && !memcmp(cache->align, align, sizeof cache->align);
  if (!hit) {
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    memset(&result, 0, sizeof result);
    bs = cublasLtMatmulAlgoGetHeuristic(p->lt, c.desc, c.la, c.lb, c.lc, c.lc, c.pref, 1, &result,
                                        &found);
    if (bs != CUBLAS_STATUS_SUCCESS || found == 0) {
      lt_call_free(&c);
      if (bs != CUBLAS_STATUS_SUCCESS) return lt_fail(ctx, "heuristic", bs);
      return onyx__cuda_error(ctx, ONYX_STATUS_UNSUPPORTED,
                              "cuBLASLt has no algorithm for %s %lldx%lldx%lld (batch %d) with "
                              "%llu workspace bytes",
                              onyx__cuda_dtype_name(dtype), (long long)m, (long long)n,
                              (long long)k, (int)batch, (unsigned long long)ws_bytes);
    }
    *cache = (onyx__cuda_lt_cache){.valid = true,
                                   .dtype = dtype,
                                   .m = m,
                                   .n = n,
                                   .k = k,
                                   .batch = batch,
                                   .stride_a = stride_a,
                                   .stride_b = stride_b,
                                   .beta_nonzero = beta != 0.0f,
                                   .ws_bytes = ws_bytes,
                                   .algo = result.algo};
    memcpy(cache->align, align, sizeof cache->align);
  }
  float alpha = op->alpha;
  bs =
      cublasLtMatmul(p->lt, c.desc, &alpha, b, c.la, a, c.lb, &beta, y, c.lc, y, c.lc, &cache->algo,
                     ws_bytes ? ws->data : NULL, (size_t)ws_bytes, (cudaStream_t)ctx->stream);
  lt_call_free(&c);
  if (bs != CUBLAS_STATUS_SUCCESS) {
    cache->valid = false;
    return lt_fail(ctx, "matmul", bs);
  }
  return ONYX_STATUS_OK;
}

onyx_status onyx__cuda_lt_product(const onyx__cuda_provider *p, onyx__cuda_lt_cache *cache,
                                  onyx_compute_ctx *ctx, uint32_t dtype, const void *a,
                                  const void *b, bool trans_b, void *y, int64_t m, int64_t n,
                                  int64_t k, const onyx_workspace_view *ws) {
  const lt_op plain = {.trans_a = false, .trans_b = trans_b, .alpha = 1.0f};
  size_t es = onyx_dtype_size(dtype);
  const uint32_t align[3] = {alignment_of(a, 0, es), alignment_of(b, 0, es),
                             alignment_of(y, 0, es)};
  return lt_matmul(p, cache, &plain, ctx, dtype, a, b, y, m, n, k, 1, 0, 0, 0.0f, align, ws);
}

/* ------------------------------------------------------------------ start-up */

/* One 64 x 64 x 64 product of `dtype` on `buf` (operands and output overlap: only
 * the work matters). */
static cublasStatus_t warm_product(const onyx__cuda_provider *p, uint32_t dtype, void *buf) {
  cudaDataType_t t = lt_type(dtype);
  lt_call c;
  memset(&c, 0, sizeof c);
  cublasStatus_t bs = cublasLtMatmulDescCreate(&c.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  if (bs == CUBLAS_STATUS_SUCCESS) bs = lt_layout(&c.la, t, 64, 64, 64, 1, 0);
  if (bs == CUBLAS_STATUS_SUCCESS) bs = lt_layout(&c.lb, t, 64, 64, 64, 1, 0);
  if (bs == CUBLAS_STATUS_SUCCESS) bs = lt_layout(&c.lc, t, 64, 64, 64, 1, 0);
  if (bs == CUBLAS_STATUS_SUCCESS) bs = cublasLtMatmulPreferenceCreate(&c.pref);
  cublasLtMatmulHeuristicResult_t r;
  int found = 0;
  memset(&r, 0, sizeof r);
  if (bs == CUBLAS_STATUS_SUCCESS)
    bs = cublasLtMatmulAlgoGetHeuristic(p->lt, c.desc, c.la, c.lb, c.lc, c.lc, c.pref, 1, &r,
                                        &found);
  float alpha = 1.0f, beta = 0.0f;
  char *y = (char *)buf + 64 * 64 * 4;
  if (bs == CUBLAS_STATUS_SUCCESS && found > 0)
    bs = cublasLtMatmul(p->lt, c.desc, &alpha, buf, c.la, buf, c.lb, &beta, y, c.lc, y, c.lc,
                        &r.algo, NULL, 0, p->stream);
  lt_call_free(&c);
  return bs;
}

double onyx__cuda_matmul_warm_up(const onyx__cuda_provider *p) {
  static const uint32_t types[] = {ONYX_DTYPE_FLOAT16, ONYX_DTYPE_BFLOAT16, ONYX_DTYPE_FLOAT32};
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  void *buf = NULL;
  if (cudaMalloc(&buf, 2 * 64 * 64 * 4) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1.0;
  }
  bool ok = cudaMemsetAsync(buf, 0, 2 * 64 * 64 * 4, p->stream) == cudaSuccess;
  for (size_t i = 0; ok && i < sizeof types / sizeof types[0]; ++i)
    ok = warm_product(p, types[i], buf) == CUBLAS_STATUS_SUCCESS;
  ok = cudaStreamSynchronize(p->stream) == cudaSuccess && ok;
  (void)cudaFree(buf);
  (void)cudaGetLastError();
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (!ok) return -1.0;
  return (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
}

/* Y = A·B on the GEMV kernel; its SESSION view zeroed where it is new to this node. */
static onyx_status gemv_run(mm_state *s, onyx_compute_ctx *ctx, const mm_geo *g, uint32_t dtype,
                            const void *a, const void *b, void *y) {
  uint64_t need = gemv_session_bytes(s, g, dtype);
  const onyx_workspace_view *ws = ctx->workspace_count > 1 ? &ctx->workspace[1] : NULL;
  if (need > 0 && (ws == NULL || ws->data == NULL || ws->bytes < need))
    return onyx__cuda_error(ctx, ONYX_STATUS_WORKSPACE_TOO_SMALL,
                            "GEMV partials view has %llu bytes, %llu required",
                            (unsigned long long)(ws ? ws->bytes : 0), (unsigned long long)need);
  cudaStream_t stream = (cudaStream_t)ctx->stream;
  if (need > 0 && (ws->data != s->gemv_zeroed || need > s->gemv_zeroed_bytes)) {
    onyx_status st = onyx__cuda_check(ctx, cudaMemsetAsync(ws->data, 0, (size_t)need, stream),
                                      "cudaMemsetAsync");
    if (st != ONYX_STATUS_OK) return st;
    s->gemv_zeroed = ws->data;
    s->gemv_zeroed_bytes = need;
  }
  int64_t rows = g->m * g->batch;
  onyx__cuda_gemv_args args = {
      .dtype = dtype,
      .m = rows,
      .n = g->n,
      .k = g->k,
      .x = a,
      .w = b,
      .y = y,
      .partial = need ? (float *)ws->data : NULL,
      .counters = need ? (unsigned *)((char *)ws->data + gemv_partial_bytes(g)) : NULL,
      .w_nk = s->trans_b,
      .alpha = s->alpha};
  return onyx__cuda_check(ctx, onyx__cuda_launch_gemv(&args, stream), "GEMV");
}

/* Gemm's C: broadcast into Y before the product, which then adds beta*Y. */
static onyx_status gemm_fill_c(onyx_compute_ctx *ctx, const onyx_tensor *c, onyx_tensor *y) {
  if (c->dtype != y->dtype)
    return onyx__cuda_error(ctx, ONYX_STATUS_INVALID_ARGUMENT, "C has type %s, A has %s",
                            onyx__cuda_dtype_name(c->dtype), onyx__cuda_dtype_name(y->dtype));
  onyx__cuda_walk w;
  uint32_t rank = 0;
  int64_t dims[ONYX_MAX_RANK];
  char err[384];
  const onyx_tensor *shapes[2] = {y, c};
  onyx_status st = onyx__cuda_broadcast(&w, &rank, dims, 2, shapes, err, sizeof err);
  if (st == ONYX_STATUS_OK && (rank != 2 || dims[0] != y->dims[0] || dims[1] != y->dims[1]))
    st = ONYX_STATUS_INVALID_ARGUMENT;
  if (st != ONYX_STATUS_OK)
    return onyx__cuda_error(ctx, ONYX_STATUS_INVALID_ARGUMENT,
                            "C %s does not broadcast to the output %s",
                            onyx__cuda_tensor_shape(c).s, onyx__cuda_tensor_shape(y).s);
  /* Keep only C's strides: a one-input walk over the output. */
  for (uint32_t d = 0; d < ONYX_MAX_RANK; ++d) w.strides[0][d] = w.strides[1][d];
  w.offset[0] = 0;
  w.count = 1;
  onyx__cuda_walk_collapse(&w);
  cudaError_t e = onyx__cuda_launch_strided_copy(onyx_dtype_size(c->dtype), c->data, y->data, &w,
                                                 (cudaStream_t)ctx->stream);
  return onyx__cuda_check(ctx, e, "Gemm: broadcasting C");
}

static onyx_status mm_compute(void *state, onyx_compute_ctx *ctx, const onyx_tensor *const *inputs,
                              size_t input_count) {
  mm_state *s = state;
  onyx_status st = onyx__cuda_check_inputs(ctx, inputs, input_count, 2);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *a = inputs[0], *b = inputs[1];
  const onyx_tensor *c = s->gemm ? onyx__cuda_input(inputs, input_count, 2) : NULL;
  if (!onyx__cuda_dtype_in(a->dtype, ONYX__CUDA_FLOAT_TYPES) || b->dtype != a->dtype)
    return onyx__cuda_error(ctx, ONYX_STATUS_UNSUPPORTED,
                            "A (%s) and B (%s) must both be float32, float16 or bfloat16",
                            onyx__cuda_dtype_name(a->dtype), onyx__cuda_dtype_name(b->dtype));
  char err[384];
  mm_geo g;
  if ((st = mm_geometry(s, a, b, &g, err, sizeof err)) != ONYX_STATUS_OK)
    return onyx__cuda_error(ctx, st, "%s", err);
  uint64_t need = mm_workspace_bytes(&g);
  const onyx_workspace_view *ws = ctx->workspace_count > 0 ? &ctx->workspace[0] : NULL;
  if (need > 0 && (ws == NULL || ws->bytes < need || ws->data == NULL))
    return onyx__cuda_error(ctx, ONYX_STATUS_WORKSPACE_TOO_SMALL,
                            "cuBLASLt workspace view has %llu bytes, %llu required",
                            (unsigned long long)(ws ? ws->bytes : 0), (unsigned long long)need);
  onyx_tensor *y = NULL;
  st = onyx__cuda_alloc_output(&s->head, ctx, 0, a->dtype, g.out_rank, g.out_dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  int64_t total = onyx_tensor_numel(y);
  if (total == 0) return ONYX_STATUS_OK;
  cudaStream_t stream = (cudaStream_t)ctx->stream;
  size_t es = onyx_dtype_size(a->dtype);
  float beta = 0.0f;
  if (c != NULL && s->beta != 0.0f) {
    if ((st = gemm_fill_c(ctx, c, y)) != ONYX_STATUS_OK) return st;
    beta = s->beta;
  }
  if (g.k == 0) {
    /* An empty inner dimension: the product is zero, Y = beta·C. */
    if (beta == 0.0f)
      return onyx__cuda_check(ctx, cudaMemsetAsync(y->data, 0, (size_t)total * es, stream),
                              "cudaMemsetAsync");
    if (beta == 1.0f) return ONYX_STATUS_OK;
    return onyx__cuda_error(ctx, ONYX_STATUS_UNSUPPORTED,
                            "Gemm with K = 0, a C input and beta = %g is not supported", beta);
  }

  const char *ap = a->data, *bp = b->data;
  char *yp = y->data;
  uint32_t align[3];
  const onyx__cuda_provider *p = s->head.provider;
  const lt_op op = {.trans_a = s->trans_a, .trans_b = s->trans_b, .alpha = s->alpha};
  const uintptr_t operand_bits = (uintptr_t)bp | (s->trans_b ? (uintptr_t)ap : 0);
  if (gemv_route(s, &g, a->dtype) && beta == 0.0f && (operand_bits & 15u) == 0)
    return gemv_run(s, ctx, &g, a->dtype, ap, bp, yp);
  if (g.mode == MM_FOLD) {
    align[0] = alignment_of(ap, 0, es);
    align[1] = alignment_of(bp, 0, es);
    align[2] = alignment_of(yp, 0, es);
    return lt_matmul(p, &s->cache, &op, ctx, a->dtype, ap, bp, yp, g.m * g.batch, g.n, g.k, 1, 0, 0,
                     beta, align, ws);
  }
  if (g.mode == MM_STRIDED) {
    if (g.batch > INT32_MAX)
      return onyx__cuda_error(ctx, ONYX_STATUS_UNSUPPORTED, "MatMul batch of %lld is too large",
                              (long long)g.batch);
    align[0] = alignment_of(ap, g.stride_a, es);
    align[1] = alignment_of(bp, g.stride_b, es);
    align[2] = alignment_of(yp, g.m * g.n, es);
    return lt_matmul(p, &s->cache, &op, ctx, a->dtype, ap, bp, yp, g.m, g.n, g.k, (int32_t)g.batch,
                     g.stride_a, g.stride_b, beta, align, ws);
  }
  /* Loop: one product per output matrix, operands found through the batch strides. */
  align[0] = alignment_of(ap, g.m * g.k, es);
  align[1] = alignment_of(bp, g.k * g.n, es);
  align[2] = alignment_of(yp, g.m * g.n, es);
  for (int64_t i = 0; i < g.batch; ++i) {
    int64_t rem = i, oa = 0, ob = 0;
    for (uint32_t d = g.brank; d-- > 0;) {
      int64_t idx = rem % g.bdims[d];
      rem /= g.bdims[d];
      oa += idx * g.a_bstride[d];
      ob += idx * g.b_bstride[d];
    }
    st = lt_matmul(p, &s->cache, &op, ctx, a->dtype, ap + oa * (int64_t)es, bp + ob * (int64_t)es,
                   yp + i * g.m * g.n * (int64_t)es, g.m, g.n, g.k, 1, 0, 0, beta, align, ws);
    if (st != ONYX_STATUS_OK) return st;
  }
  return ONYX_STATUS_OK;
}

const onyx_kernel_table onyx__cuda_k_matmul = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "",
    .op_type = "MatMul",
    .since_opset = 1,
    .until_opset = 0,
    .type_input = 0,
    .type_mask = ONYX__CUDA_FLOAT_TYPES,
    .supports = NULL,
    .create = matmul_create,
    .destroy = onyx__cuda_destroy,
    .workspace = mm_workspace,
    .compute = mm_compute,
    .infer = mm_infer,
};

const onyx_kernel_table onyx__cuda_k_gemm = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "",
    .op_type = "Gemm",
    .since_opset = 1,
    .until_opset = 0,
    .type_input = 0,
    .type_mask = ONYX__CUDA_FLOAT_TYPES,
    .supports = NULL,
    .create = gemm_create,
    .destroy = onyx__cuda_destroy,
    .workspace = mm_workspace,
    .compute = mm_compute,
    .infer = mm_infer,
};

const onyx_kernel_table onyx__cuda_k_fused_matmul = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "com.microsoft",
    .op_type = "FusedMatMul",
    .since_opset = 1,
    .until_opset = 0,
    .type_input = 0,
    .type_mask = ONYX__CUDA_FLOAT_TYPES,
    .supports = fused_supports,
    .create = fused_create,
    .destroy = onyx__cuda_destroy,
    .workspace = mm_workspace,
    .compute = mm_compute,
    .infer = mm_infer,
};
