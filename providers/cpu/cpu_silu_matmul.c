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
 * fused node gives the unfused pair's bits where that MatMul takes the same route.
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
  onyx__cpu_packed_b packed; /* a float32 W packed at create (data NULL: per call) */
  void *packed_mem;          /* from host->mem_alloc (weights), freed with the kernel */
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

/* The product the MatMul kernel would run for A (rows x k of T) · W, data unset. */
static onyx__cpu_gemm cpu_smm_gemm(const cpu_smm_state *s, uint32_t t, int64_t rows, int64_t k,
                                   int64_t n) {
  return (onyx__cpu_gemm){.m = rows,
                          .n = n,
                          .k = k,
                          .alpha = 1.0f,
                          .ab_dtype = t,
                          .lda = k,
                          .ldb = n,
                          .ldy = n,
                          .packed_b = s->packed.data ? &s->packed : NULL,
                          .overwrite_y = true};
}

/* Scratch a run takes, in one SESSION region (a decode step allocates nothing): A in T,
 * the GEMM's packing buffers and, for 16-bit T, its float32 accumulator; each part
 * 64-byte aligned. */
typedef struct cpu_smm_scratch {
  uint64_t pack_a, pack_b, acc, total; /* byte offsets (A at 0), then the size */
} cpu_smm_scratch;

static uint64_t cpu_smm_up64(uint64_t b) { return (b + 63) / 64 * 64; }

static cpu_smm_scratch cpu_smm_scratch_of(const cpu_smm_state *s, uint32_t t, int64_t rows,
                                          int64_t k, int64_t n) {
  cpu_smm_scratch sc = {0};
  if (rows <= 0 || n <= 0 || k <= 0) return sc;
  onyx__cpu_gemm g = cpu_smm_gemm(s, t, rows, k, n);
  uint64_t pa = 0, pb = 0;
  onyx__cpu_sgemm_scratch(&g, s->base.provider ? s->base.provider->num_threads : 1, &pa, &pb);
  sc.pack_a = cpu_smm_up64((uint64_t)(rows * k) * onyx_dtype_size(t));
  sc.pack_b = sc.pack_a + cpu_smm_up64(pa * sizeof(float));
  sc.acc = sc.pack_b + cpu_smm_up64(pb * sizeof(float));
  sc.total = sc.acc + (t == ONYX_DTYPE_FLOAT32 ? 0 : (uint64_t)(rows * n) * sizeof(float));
  return sc;
}

/* Y = A·W through the MatMul kernel's GEMM, A at the start of the scratch `ws`. */
static void cpu_smm_product(const cpu_smm_state *s, uint32_t t, const cpu_smm_scratch *sc,
                            unsigned char *ws, const onyx_tensor *w, int64_t rows, void *y) {
  onyx__cpu_gemm g = cpu_smm_gemm(s, t, rows, w->dims[0], w->dims[1]);
  g.a = ws;
  g.b = w->data;
  g.y = t == ONYX_DTYPE_FLOAT32 ? y : (float *)(ws + sc->acc);
  onyx__cpu_sgemm(s->base.provider, &g, sc->pack_b > sc->pack_a ? (float *)(ws + sc->pack_a) : NULL,
                  sc->acc > sc->pack_b ? (float *)(ws + sc->pack_b) : NULL);
  if (t != ONYX_DTYPE_FLOAT32)
    for (int64_t i = 0; i < rows * w->dims[1]; ++i) onyx__cpu_store_f32(t, y, i, g.y[i]);
}

/* W's shape and dtype against what was packed at create. */
static onyx_status cpu_smm_check_packed(const cpu_smm_state *s, onyx_compute_ctx *ctx,
                                        const onyx_tensor *gu, const onyx_tensor *w) {
  if (s->packed.data == NULL ||
      (gu->dtype == ONYX_DTYPE_FLOAT32 && w->dims[0] == s->packed.k && w->dims[1] == s->packed.n))
    return ONYX_STATUS_OK;
  ctx->set_error(ctx,
                 "W has dtype %s and shape %s, but the kernel packed a float32 constant of "
                 "%lldx%lld (KxN) at creation",
                 onyx__cpu_dtype_name(w->dtype), onyx__cpu_tensor_shape(w).s,
                 (long long)s->packed.k, (long long)s->packed.n);
  return ONYX_STATUS_INVALID_ARGUMENT;
}

static onyx_status cpu_smm_compute(void *state, onyx_compute_ctx *ctx, const onyx_tensor *const *in,
                                   size_t input_count) {
  const cpu_smm_state *s = state;
  /* A W packed at create may come without data (the core freed the original). */
  const onyx_tensor *checked[SMM_INPUTS] = {NULL};
  for (size_t i = 0; i < input_count && i < SMM_INPUTS; ++i)
    checked[i] = i == SMM_W && s->packed.data ? NULL : in[i];
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
  if ((st = cpu_smm_check_packed(s, ctx, gu, w)) != ONYX_STATUS_OK) return st;
  onyx_tensor *y = NULL;
  st = onyx__cpu_alloc_output(&s->base, ctx, gu->dtype, gu->rank, dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  const int64_t k = w->dims[0], n = w->dims[1], rows = onyx_tensor_numel(gu) / (2 * k);
  const cpu_smm_scratch sc = cpu_smm_scratch_of(s, gu->dtype, rows, k, n);
  if (sc.total == 0) return ONYX_STATUS_OK;
  const onyx_workspace_view *v = ctx->workspace_count > 0 ? &ctx->workspace[0] : NULL;
  if (v == NULL || v->data == NULL || v->bytes < sc.total) {
    ctx->set_error(ctx,
                   "workspace region 0 (silu_mul_matmul_scratch) has %llu bytes, %llu required",
                   v ? (unsigned long long)v->bytes : 0ull, (unsigned long long)sc.total);
    return ONYX_STATUS_WORKSPACE_TOO_SMALL;
  }
  onyx__cpu_silu_mul_rows(s->base.provider, gu->dtype, gu->data, v->data, rows, k);
  cpu_smm_product(s, gu->dtype, &sc, v->data, w, rows, y->data);
  return ONYX_STATUS_OK;
}

static onyx_status cpu_smm_workspace(void *state, const onyx_tensor *in, size_t input_count,
                                     onyx_workspace_requirement *req) {
  req->count = 0;
  if (input_count != SMM_INPUTS) return ONYX_STATUS_INVALID_ARGUMENT;
  if (in[SMM_W].rank != 2) return ONYX_STATUS_OK; /* compute refuses it, naming the shapes */
  const int64_t k = in[SMM_W].dims[0], n = in[SMM_W].dims[1];
  const int64_t rows = k > 0 ? onyx_tensor_numel(&in[SMM_GU]) / (2 * k) : 0;
  const cpu_smm_scratch sc = cpu_smm_scratch_of(state, in[SMM_GU].dtype, rows, k, n);
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

/* Packs W when it is a float32 matrix constant and the core offers governed memory
 * (as the MatMul kernel does, so the product takes the MatMul's route), and tells the
 * core it may free the original. Anything else leaves W packed per call. */
static void cpu_smm_prepack(cpu_smm_state *s, const onyx_node_info *node) {
  if (!ONYX_HAS_FIELD(node, onyx_node_info, input_constants) || node->input_constants == NULL ||
      node->input_count != SMM_INPUTS || node->input_dtypes == NULL ||
      node->input_dtypes[SMM_GU] != ONYX_DTYPE_FLOAT32)
    return;
  const onyx_tensor *w = node->input_constants[SMM_W];
  const onyx_host_table *host = s->base.provider ? s->base.provider->host : NULL;
  if (w == NULL || w->dtype != ONYX_DTYPE_FLOAT32 || w->rank != 2 || w->data == NULL ||
      w->device != ONYX_DEVICE_HOST || host == NULL || host->mem_alloc == NULL ||
      host->mem_free == NULL || w->dims[0] <= 0 || w->dims[1] <= 0)
    return;
  onyx__cpu_gemm g = {.k = w->dims[0],
                      .n = w->dims[1],
                      .ab_dtype = ONYX_DTYPE_FLOAT32,
                      .b = w->data,
                      .ldb = w->dims[1]};
  char label[96];
  snprintf(label, sizeof label, "SiluMulMatMul '%s' packed W", node->name ? node->name : "");
  uint64_t bytes = onyx__cpu_packed_b_floats(g.k, g.n) * sizeof(float);
  if (host->mem_alloc(host->host_data, ONYX_REQUESTER_WEIGHTS, bytes, 64, label, &s->packed_mem) !=
      ONYX_STATUS_OK) {
    s->packed_mem = NULL;
    return;
  }
  onyx__cpu_pack_b(s->base.provider, &g, s->packed_mem, &s->packed);
  if (ONYX_HAS_FIELD(node, onyx_node_info, input_constant_copied) &&
      node->input_constant_copied != NULL)
    node->input_constant_copied[SMM_W] = true;
}

static void cpu_smm_destroy(void *state) {
  cpu_smm_state *s = state;
  if (s == NULL) return;
  if (s->packed_mem != NULL)
    s->base.provider->host->mem_free(s->base.provider->host->host_data, s->packed_mem);
  free(s);
}

static onyx_status cpu_smm_create(void *provider_state, const onyx_node_info *node,
                                  void **out_state, char *err, size_t err_cap) {
  cpu_smm_state *s = onyx__cpu_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  cpu_smm_prepack(s, node);
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
    .create = cpu_smm_create,
    .destroy = cpu_smm_destroy,
    .workspace = cpu_smm_workspace,
    .compute = cpu_smm_compute,
    .infer = cpu_smm_infer,
};
