/*
 * MatMul and Gemm.
 *
 * Both reduce to the GEMM cores in cpu_gemm.c. What lives here is the shape logic
 * (numpy-style batch broadcasting and 1-D operands for MatMul; transposes and the
 * unidirectional broadcast of C for Gemm) and the workspace contract: float32 and
 * 16-bit float products declare their packing buffers, and 16-bit outputs a float32
 * accumulator, as workspace sized from the input geometry. The same plan function
 * computes both the requirement and what compute() checks the views against, so
 * the two cannot disagree.
 *
 * A float32 B that is a constant of the session (a weight) is packed at create time
 * into the GEMM's layout, in memory booked with the governor as weights, and the core
 * is told it may free the original: every product then reads the packed copy, and
 * input 1 arrives at compute as geometry only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_impl.h"

/* Workspace regions, always in this order. */
enum { CPU_WS_PACK_A, CPU_WS_PACK_B, CPU_WS_ACC, CPU_WS_COUNT };
static const char *const cpu_ws_names[CPU_WS_COUNT] = {"gemm_pack_a", "gemm_pack_b",
                                                       "gemm_acc_f32"};

#define CPU_MATMUL_TYPES                                                                           \
  (ONYX__CPU_FLOAT_TYPES | ONYX_DTYPE_BIT(ONYX_DTYPE_INT32) | ONYX_DTYPE_BIT(ONYX_DTYPE_INT64) |   \
   ONYX_DTYPE_BIT(ONYX_DTYPE_UINT32) | ONYX_DTYPE_BIT(ONYX_DTYPE_UINT64))

static bool cpu_uses_sgemm(uint32_t dtype) {
  return dtype == ONYX_DTYPE_FLOAT32 || dtype == ONYX_DTYPE_FLOAT16 || dtype == ONYX_DTYPE_BFLOAT16;
}

/* ------------------------------------------------------------------ prepacked B */

/* A constant B packed at create time; data NULL when B is packed per call. */
typedef struct cpu_packed {
  onyx__cpu_packed_b b;
  void *mem; /* from host->mem_alloc (weights), freed with the kernel */
} cpu_packed;

/*
 * Packs input 1 when it is a float32 matrix constant and the core offers governed
 * memory, and tells the core it may free the original. Anything else (no constant
 * information, another dtype, a batch of matrices, memory refused) leaves B to be
 * packed per call: the prepack only ever saves time.
 */
static void cpu_prepack(const onyx__cpu_node *base, const onyx_node_info *node, bool trans_b,
                        cpu_packed *out) {
  memset(out, 0, sizeof *out);
  if (!ONYX_HAS_FIELD(node, onyx_node_info, input_constants) || node->input_constants == NULL ||
      node->input_count < 2 || node->input_dtypes == NULL ||
      node->input_dtypes[0] != ONYX_DTYPE_FLOAT32)
    return;
  const onyx_tensor *b = node->input_constants[1];
  const onyx_host_table *host = base->provider ? base->provider->host : NULL;
  if (b == NULL || b->dtype != ONYX_DTYPE_FLOAT32 || b->rank != 2 || b->data == NULL ||
      b->device != ONYX_DEVICE_HOST || host == NULL || host->mem_alloc == NULL ||
      host->mem_free == NULL || b->dims[0] <= 0 || b->dims[1] <= 0)
    return;
  onyx__cpu_gemm g = {.trans_b = trans_b,
                      .k = trans_b ? b->dims[1] : b->dims[0],
                      .n = trans_b ? b->dims[0] : b->dims[1],
                      .ab_dtype = ONYX_DTYPE_FLOAT32,
                      .b = b->data,
                      .ldb = b->dims[1]};
  char label[96];
  snprintf(label, sizeof label, "%s '%s' packed B", base->op_type, node->name ? node->name : "");
  uint64_t bytes = onyx__cpu_packed_b_floats(g.k, g.n) * sizeof(float);
  if (host->mem_alloc(host->host_data, ONYX_REQUESTER_WEIGHTS, bytes, 64, label, &out->mem) !=
      ONYX_STATUS_OK) {
    out->mem = NULL;
    return;
  }
  onyx__cpu_pack_b(base->provider, &g, out->mem, &out->b);
  if (ONYX_HAS_FIELD(node, onyx_node_info, input_constant_copied) &&
      node->input_constant_copied != NULL)
    node->input_constant_copied[1] = true;
}

static void cpu_packed_free(const onyx__cpu_node *base, cpu_packed *pk) {
  if (pk->mem != NULL) base->provider->host->mem_free(base->provider->host->host_data, pk->mem);
  pk->mem = NULL;
}

/*
 * The input checks of onyx__cpu_check_inputs, except that a prepacked input 1 may
 * come without data (the core freed it); its geometry must be what was packed.
 */
static onyx_status cpu_check_inputs(onyx_compute_ctx *ctx, const cpu_packed *pk, bool trans_b,
                                    const onyx_tensor *const *inputs, size_t input_count) {
  if (pk->mem == NULL) return onyx__cpu_check_inputs(ctx, inputs, input_count, 2);
  if (input_count < 2 || inputs[1] == NULL) {
    ctx->set_error(ctx, "input 1 is required but missing");
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  const onyx_tensor *rest[3] = {inputs[0], NULL, input_count > 2 ? inputs[2] : NULL};
  onyx_status st = onyx__cpu_check_inputs(ctx, rest, input_count > 3 ? 3 : input_count, 1);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *b = inputs[1];
  int64_t k = b->rank == 2 ? b->dims[trans_b ? 1 : 0] : -1;
  int64_t n = b->rank == 2 ? b->dims[trans_b ? 0 : 1] : -1;
  if (b->dtype != ONYX_DTYPE_FLOAT32 || k != pk->b.k || n != pk->b.n) {
    ctx->set_error(ctx,
                   "input 1 has dtype %s and shape %s, but the kernel packed a float32 constant "
                   "of %lld×%lld (K×N) at creation",
                   onyx__cpu_dtype_name(b->dtype), onyx__cpu_tensor_shape(b).s, (long long)pk->b.k,
                   (long long)pk->b.n);
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  return ONYX_STATUS_OK;
}

/* ------------------------------------------------------------------ workspace */

/* Bytes of each region for the product g describes (geometry, transposes, alpha,
 * dtype, prepacked B: the data pointers are not read), zero where unused. */
static void cpu_gemm_ws_bytes(const onyx__cpu_node *node, const onyx__cpu_gemm *g,
                              uint64_t out_bytes[CPU_WS_COUNT]) {
  memset(out_bytes, 0, CPU_WS_COUNT * sizeof out_bytes[0]);
  if (!cpu_uses_sgemm(g->ab_dtype) || g->m <= 0 || g->n <= 0) return;
  uint64_t pa = 0, pb = 0;
  onyx__cpu_sgemm_scratch(g, node->provider ? node->provider->num_threads : 1, &pa, &pb);
  out_bytes[CPU_WS_PACK_A] = pa * sizeof(float);
  out_bytes[CPU_WS_PACK_B] = pb * sizeof(float);
  /* 16-bit outputs accumulate in float32 and are rounded once at the end. */
  if (g->ab_dtype != ONYX_DTYPE_FLOAT32)
    out_bytes[CPU_WS_ACC] = (uint64_t)(g->m * g->n) * sizeof(float);
}

/* The product a MatMul plan runs, without its data: workspace() and compute() both
 * size the workspace from it. */
static onyx__cpu_gemm cpu_mm_gemm(int64_t m, int64_t n, int64_t k, uint32_t dtype,
                                  const onyx__cpu_packed_b *packed_b) {
  return (onyx__cpu_gemm){.m = m,
                          .n = n,
                          .k = k,
                          .alpha = 1.0f,
                          .ab_dtype = dtype,
                          .lda = k,
                          .ldb = n,
                          .ldy = n,
                          .packed_b = packed_b,
                          .overwrite_y = true};
}

static void cpu_ws_fill(const uint64_t bytes[CPU_WS_COUNT], onyx_workspace_requirement *req) {
  req->count = 0;
  bool any = false;
  for (int i = 0; i < CPU_WS_COUNT; ++i) any = any || bytes[i] > 0;
  if (!any) return; /* the whole requirement is NONE */
  for (int i = 0; i < CPU_WS_COUNT; ++i) {
    req->regions[i].name = cpu_ws_names[i];
    req->regions[i].bytes = bytes[i];
    req->regions[i].alignment = 64;
    req->regions[i].lifetime = ONYX_LIFETIME_STEP;
  }
  req->count = CPU_WS_COUNT;
}

/* Checks the views the core carved against what the plan needs; writes nothing. */
static onyx_status cpu_ws_views(onyx_compute_ctx *ctx, const uint64_t bytes[CPU_WS_COUNT],
                                float *out[CPU_WS_COUNT]) {
  size_t have =
      ctx->struct_size >= offsetof(onyx_compute_ctx, workspace_count) + sizeof ctx->workspace_count
          ? ctx->workspace_count
          : 0;
  for (int i = 0; i < CPU_WS_COUNT; ++i) {
    out[i] = NULL;
    if (bytes[i] == 0) continue;
    const onyx_workspace_view *v = (size_t)i < have ? &ctx->workspace[i] : NULL;
    if (v == NULL || v->data == NULL || v->bytes < bytes[i]) {
      ctx->set_error(ctx, "workspace region %d (%s) has %llu bytes, %llu required", i,
                     cpu_ws_names[i], v ? (unsigned long long)v->bytes : 0ull,
                     (unsigned long long)bytes[i]);
      return ONYX_STATUS_WORKSPACE_TOO_SMALL;
    }
    out[i] = v->data;
  }
  return ONYX_STATUS_OK;
}

/* Converts an m×n float32 accumulator into the 16-bit output. */
static void cpu_store_acc(uint32_t dtype, const float *acc, void *y, int64_t count) {
  for (int64_t i = 0; i < count; ++i) onyx__cpu_store_f32(dtype, y, i, acc[i]);
}

/* ------------------------------------------------------------------ MatMul */

/*
 * numpy.matmul semantics: the last two dims multiply, the leading (batch) dims
 * broadcast; a 1-D first operand is a row vector and a 1-D second operand a
 * column vector, and the matching dim is dropped from the output.
 */
typedef struct cpu_mm_plan {
  int64_t m, n, k;
  uint32_t out_rank;
  int64_t out_dims[ONYX_MAX_RANK];
  int64_t out_numel;
  /* When B has no batch dims the batches of A are consecutive rows of one tall
   * matrix: a single GEMM with gemm_m = batches · M covers them all. */
  bool fold;
  int64_t gemm_m;
  onyx__cpu_bcast batch; /* batch broadcast when not folded */
} cpu_mm_plan;

static onyx_status cpu_mm_plan_make(const onyx_tensor *a, const onyx_tensor *b, cpu_mm_plan *p,
                                    char *err, size_t err_cap) {
  memset(p, 0, sizeof *p);
  if (a->rank == 0 || b->rank == 0)
    return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "input %d is a scalar, expected at least 1-D", a->rank == 0 ? 0 : 1);
  uint32_t ra = a->rank, rb = b->rank;
  p->m = ra >= 2 ? a->dims[ra - 2] : 1;
  p->k = a->dims[ra - 1];
  int64_t kb = rb >= 2 ? b->dims[rb - 2] : b->dims[0];
  p->n = rb >= 2 ? b->dims[rb - 1] : 1;
  if (kb != p->k)
    return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "input 1 dim %u is %lld, expected %lld (the last dim of input 0); "
                          "shapes %s and %s",
                          rb >= 2 ? rb - 2 : 0, (long long)kb, (long long)p->k,
                          onyx__cpu_tensor_shape(a).s, onyx__cpu_tensor_shape(b).s);

  uint32_t ranks[2] = {ra > 2 ? ra - 2 : 0, rb > 2 ? rb - 2 : 0};
  const int64_t *dims[2] = {a->dims, b->dims};
  onyx_status st = onyx__cpu_bcast_init(&p->batch, 2, ranks, dims, err, err_cap);
  if (st != ONYX_STATUS_OK) return st;

  p->out_rank = p->batch.out_rank;
  memcpy(p->out_dims, p->batch.out_dims, p->out_rank * sizeof p->out_dims[0]);
  if (ra >= 2) p->out_dims[p->out_rank++] = p->m;
  if (rb >= 2) p->out_dims[p->out_rank++] = p->n;
  p->out_numel = onyx__cpu_dims_product(p->out_dims, 0, p->out_rank);
  p->fold = ranks[1] == 0;
  p->gemm_m = p->fold ? p->batch.out_numel * p->m : p->m;
  return ONYX_STATUS_OK;
}

typedef struct cpu_mm_state {
  onyx__cpu_node base;
  cpu_packed packed;
} cpu_mm_state;

static onyx_status cpu_matmul_create(void *provider_state, const onyx_node_info *node,
                                     void **out_state, char *err, size_t err_cap) {
  cpu_mm_state *s = onyx__cpu_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  cpu_prepack(&s->base, node, false, &s->packed);
  *out_state = s;
  return ONYX_STATUS_OK;
}

static void cpu_matmul_destroy(void *state) {
  cpu_mm_state *s = state;
  if (s == NULL) return;
  cpu_packed_free(&s->base, &s->packed);
  free(s);
}

static onyx_status cpu_matmul_workspace(void *state, const onyx_tensor *inputs, size_t input_count,
                                        onyx_workspace_requirement *req) {
  const cpu_mm_state *s = state;
  req->count = 0;
  if (input_count < 2) return ONYX_STATUS_OK; /* compute() will report it */
  cpu_mm_plan p;
  if (cpu_mm_plan_make(&inputs[0], &inputs[1], &p, NULL, 0) != ONYX_STATUS_OK)
    return ONYX_STATUS_OK; /* likewise: a bad shape is compute()'s error to report */
  uint64_t bytes[CPU_WS_COUNT];
  onyx__cpu_gemm g =
      cpu_mm_gemm(p.gemm_m, p.n, p.k, inputs[0].dtype, s->packed.mem != NULL ? &s->packed.b : NULL);
  cpu_gemm_ws_bytes(&s->base, &g, bytes);
  cpu_ws_fill(bytes, req);
  return ONYX_STATUS_OK;
}

typedef struct cpu_mm_run {
  const onyx__cpu_node *node;
  const onyx__cpu_packed_b *packed_b; /* NULL: B packed per call */
  const cpu_mm_plan *plan;
  uint32_t dtype;
  size_t esize;
  const unsigned char *a, *b;
  unsigned char *y;
  float *ws[CPU_WS_COUNT];
} cpu_mm_run;

/* One product: rows x cols of A(ai) · B(bi) into Y(yi), all in units of whole
 * matrices of their operand. */
static void cpu_mm_one(const cpu_mm_run *r, int64_t ai, int64_t bi, int64_t yi) {
  const cpu_mm_plan *p = r->plan;
  const int64_t m = p->gemm_m, n = p->n, k = p->k;
  const void *a = r->a + (size_t)(ai * m * k) * r->esize;
  const void *b = r->b + (size_t)(bi * k * n) * r->esize;
  void *y = r->y + (size_t)(yi * m * n) * r->esize;
  switch (r->dtype) {
  case ONYX_DTYPE_FLOAT32:
  case ONYX_DTYPE_FLOAT16:
  case ONYX_DTYPE_BFLOAT16: {
    float *acc = r->dtype == ONYX_DTYPE_FLOAT32 ? y : r->ws[CPU_WS_ACC];
    onyx__cpu_gemm g = cpu_mm_gemm(m, n, k, r->dtype, r->packed_b);
    g.a = a;
    g.b = b;
    g.y = acc;
    onyx__cpu_sgemm(r->node->provider, &g, r->ws[CPU_WS_PACK_A], r->ws[CPU_WS_PACK_B]);
    if (r->dtype != ONYX_DTYPE_FLOAT32) cpu_store_acc(r->dtype, acc, y, m * n);
    break;
  }
  case ONYX_DTYPE_FLOAT64:
    memset(y, 0, (size_t)(m * n) * sizeof(double));
    onyx__cpu_dgemm(false, false, m, n, k, 1.0, a, k, b, n, y, n);
    break;
  default:
    onyx__cpu_igemm(r->dtype, m, n, k, a, b, y);
    break;
  }
}

static void cpu_mm_batch_run(void *arg, const int64_t *in_off, int64_t out_off, int64_t n,
                             const int64_t *in_strides) {
  for (int64_t i = 0; i < n; ++i)
    cpu_mm_one(arg, in_off[0] + i * in_strides[0], in_off[1] + i * in_strides[1], out_off + i);
}

static onyx_status cpu_matmul_compute(void *state, onyx_compute_ctx *ctx,
                                      const onyx_tensor *const *inputs, size_t input_count) {
  const cpu_mm_state *s = state;
  const onyx__cpu_node *node = &s->base;
  onyx_status st = cpu_check_inputs(ctx, &s->packed, false, inputs, input_count);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *a = inputs[0], *b = inputs[1];
  if (!onyx__cpu_dtype_in(a->dtype, CPU_MATMUL_TYPES)) {
    ctx->set_error(ctx, "input 0 has dtype %s, which is not supported",
                   onyx__cpu_dtype_name(a->dtype));
    return ONYX_STATUS_UNSUPPORTED;
  }
  if (b->dtype != a->dtype) {
    ctx->set_error(ctx, "input 1 has dtype %s, expected %s like input 0",
                   onyx__cpu_dtype_name(b->dtype), onyx__cpu_dtype_name(a->dtype));
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  cpu_mm_plan plan;
  char why[256];
  st = cpu_mm_plan_make(a, b, &plan, why, sizeof why);
  if (st != ONYX_STATUS_OK) {
    ctx->set_error(ctx, "%s", why);
    return st;
  }
  cpu_mm_run run = {.node = node,
                    .packed_b = s->packed.mem != NULL ? &s->packed.b : NULL,
                    .plan = &plan,
                    .dtype = a->dtype,
                    .esize = onyx_dtype_size(a->dtype),
                    .a = a->data,
                    .b = b->data};
  uint64_t bytes[CPU_WS_COUNT];
  onyx__cpu_gemm geom = cpu_mm_gemm(plan.gemm_m, plan.n, plan.k, a->dtype, run.packed_b);
  cpu_gemm_ws_bytes(node, &geom, bytes);
  st = cpu_ws_views(ctx, bytes, run.ws);
  if (st != ONYX_STATUS_OK) return st;

  onyx_tensor *y = NULL;
  st = onyx__cpu_alloc_output(node, ctx, a->dtype, plan.out_rank, plan.out_dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL || plan.out_numel == 0) return st;
  run.y = y->data;
  if (plan.fold)
    cpu_mm_one(&run, 0, 0, 0);
  else
    onyx__cpu_bcast_walk(&plan.batch, cpu_mm_batch_run, &run);
  return ONYX_STATUS_OK;
}

static onyx_status cpu_matmul_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                    onyx_tensor *outputs, size_t output_count) {
  (void)state;
  if (input_count < 2) return ONYX_STATUS_INVALID_ARGUMENT;
  cpu_mm_plan p;
  char why[ONYX__CPU_REASON_CAP] = "";
  onyx_status st = cpu_mm_plan_make(&inputs[0], &inputs[1], &p, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cpu_reason(state, st, why);
  onyx__cpu_infer_out(outputs, output_count, 0, inputs[0].dtype, p.out_rank, p.out_dims);
  return st;
}

const onyx_kernel_table onyx__cpu_k_matmul = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "",
    .op_type = "MatMul",
    .since_opset = 1,
    .until_opset = 0,
    .type_input = 0,
    .type_mask = CPU_MATMUL_TYPES,
    .create = cpu_matmul_create,
    .destroy = cpu_matmul_destroy,
    .workspace = cpu_matmul_workspace,
    .compute = cpu_matmul_compute,
    .infer = cpu_matmul_infer,
};

/* ------------------------------------------------------------------ Gemm */

typedef struct cpu_gemm_state {
  onyx__cpu_node base;
  bool trans_a, trans_b;
  float alpha, beta;
  cpu_packed packed;
} cpu_gemm_state;

static onyx_status cpu_gemm_create(void *provider_state, const onyx_node_info *node,
                                   void **out_state, char *err, size_t err_cap) {
  cpu_gemm_state *s = onyx__cpu_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  int64_t ta = 0, tb = 0;
  /* Opset 1-6 also had `broadcast`; C is always broadcast here, which accepts
   * every model those opsets accept. */
  onyx_status st = onyx__cpu_attr_int(node, "transA", 0, &ta, err, err_cap);
  if (st == ONYX_STATUS_OK) st = onyx__cpu_attr_int(node, "transB", 0, &tb, err, err_cap);
  if (st == ONYX_STATUS_OK) st = onyx__cpu_attr_float(node, "alpha", 1.0f, &s->alpha, err, err_cap);
  if (st == ONYX_STATUS_OK) st = onyx__cpu_attr_float(node, "beta", 1.0f, &s->beta, err, err_cap);
  if (st != ONYX_STATUS_OK) {
    onyx__cpu_destroy(s);
    return st;
  }
  s->trans_a = ta != 0;
  s->trans_b = tb != 0;
  cpu_prepack(&s->base, node, s->trans_b, &s->packed);
  *out_state = s;
  return ONYX_STATUS_OK;
}

static void cpu_gemm_destroy(void *state) {
  cpu_gemm_state *s = state;
  if (s == NULL) return;
  cpu_packed_free(&s->base, &s->packed);
  free(s);
}

/* The product a Gemm node runs for these dims, without its data (workspace() and
 * compute() both size the workspace from it). */
static onyx__cpu_gemm cpu_gemm_gemm(const cpu_gemm_state *s, int64_t m, int64_t n, int64_t k,
                                    uint32_t dtype, const onyx_tensor *a, const onyx_tensor *b) {
  return (onyx__cpu_gemm){.trans_a = s->trans_a,
                          .trans_b = s->trans_b,
                          .m = m,
                          .n = n,
                          .k = k,
                          .alpha = s->alpha,
                          .ab_dtype = dtype,
                          .lda = a->dims[1],
                          .ldb = b->dims[1],
                          .ldy = n,
                          .packed_b = s->packed.mem != NULL ? &s->packed.b : NULL};
}

/* M, N, K from A and B, or a message naming the offending input. */
static onyx_status cpu_gemm_dims(const cpu_gemm_state *s, const onyx_tensor *a,
                                 const onyx_tensor *b, int64_t *m, int64_t *n, int64_t *k,
                                 char *err, size_t err_cap) {
  for (int i = 0; i < 2; ++i) {
    const onyx_tensor *t = i ? b : a;
    if (t->rank != 2)
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                            "input %d has shape %s, expected a 2-D matrix", i,
                            onyx__cpu_tensor_shape(t).s);
  }
  *m = s->trans_a ? a->dims[1] : a->dims[0];
  *k = s->trans_a ? a->dims[0] : a->dims[1];
  int64_t kb = s->trans_b ? b->dims[1] : b->dims[0];
  *n = s->trans_b ? b->dims[0] : b->dims[1];
  if (kb != *k)
    return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "input 1 dim %d is %lld, expected %lld (K of input 0, transA=%d "
                          "transB=%d); shapes %s and %s",
                          s->trans_b ? 1 : 0, (long long)kb, (long long)*k, s->trans_a, s->trans_b,
                          onyx__cpu_tensor_shape(a).s, onyx__cpu_tensor_shape(b).s);
  return ONYX_STATUS_OK;
}

static onyx_status cpu_gemm_workspace(void *state, const onyx_tensor *inputs, size_t input_count,
                                      onyx_workspace_requirement *req) {
  const cpu_gemm_state *s = state;
  req->count = 0;
  int64_t m = 0, n = 0, k = 0;
  if (input_count < 2 ||
      cpu_gemm_dims(s, &inputs[0], &inputs[1], &m, &n, &k, NULL, 0) != ONYX_STATUS_OK)
    return ONYX_STATUS_OK; /* compute() reports bad shapes */
  uint64_t bytes[CPU_WS_COUNT];
  onyx__cpu_gemm g = cpu_gemm_gemm(s, m, n, k, inputs[0].dtype, &inputs[0], &inputs[1]);
  cpu_gemm_ws_bytes(&s->base, &g, bytes);
  cpu_ws_fill(bytes, req);
  return ONYX_STATUS_OK;
}

/* Y (float32 or float64 buffer) = beta·C broadcast to [M,N], or zero. C may be a
 * scalar, [N], [1,N], [M,1], [M,N] or any of those with 1s. */
static void cpu_gemm_init_y(const onyx_tensor *c, float beta, int64_t m, int64_t n, bool dbl,
                            void *y) {
  if (c == NULL || beta == 0.0f) {
    memset(y, 0, (size_t)(m * n) * (dbl ? sizeof(double) : sizeof(float)));
    return;
  }
  int64_t cm = c->rank == 2 ? c->dims[0] : 1;
  int64_t cn = c->rank >= 1 ? c->dims[c->rank - 1] : 1;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      int64_t ci = (cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j);
      if (dbl)
        ((double *)y)[i * n + j] = (double)beta * ((const double *)c->data)[ci];
      else
        ((float *)y)[i * n + j] = beta * onyx__cpu_load_f32(c->dtype, c->data, ci);
    }
  }
}

static onyx_status cpu_gemm_compute(void *state, onyx_compute_ctx *ctx,
                                    const onyx_tensor *const *inputs, size_t input_count) {
  const cpu_gemm_state *s = state;
  onyx_status st = cpu_check_inputs(ctx, &s->packed, s->trans_b, inputs, input_count);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *a = inputs[0], *b = inputs[1];
  const onyx_tensor *c = input_count > 2 ? inputs[2] : NULL;
  if (!onyx__cpu_dtype_in(a->dtype, ONYX__CPU_FLOAT_TYPES)) {
    ctx->set_error(ctx, "input 0 has dtype %s, which is not supported",
                   onyx__cpu_dtype_name(a->dtype));
    return ONYX_STATUS_UNSUPPORTED;
  }
  for (size_t i = 1; i < 3; ++i) {
    const onyx_tensor *t = i == 1 ? b : c;
    if (t != NULL && t->dtype != a->dtype) {
      ctx->set_error(ctx, "input %zu has dtype %s, expected %s like input 0", i,
                     onyx__cpu_dtype_name(t->dtype), onyx__cpu_dtype_name(a->dtype));
      return ONYX_STATUS_INVALID_ARGUMENT;
    }
  }
  int64_t m = 0, n = 0, k = 0;
  char why[256];
  st = cpu_gemm_dims(s, a, b, &m, &n, &k, why, sizeof why);
  if (st != ONYX_STATUS_OK) {
    ctx->set_error(ctx, "%s", why);
    return st;
  }
  if (c != NULL) {
    /* C broadcasts one way only: to [M,N], never the other way round. */
    int64_t want[2] = {m, n};
    bool ok = c->rank <= 2;
    for (uint32_t d = 0; ok && d < c->rank; ++d) {
      int64_t w = want[2 - c->rank + d];
      ok = c->dims[d] == 1 || c->dims[d] == w;
    }
    if (!ok) {
      ctx->set_error(ctx, "input 2 (C) has shape %s, expected one that broadcasts to [%lld,%lld]",
                     onyx__cpu_tensor_shape(c).s, (long long)m, (long long)n);
      return ONYX_STATUS_INVALID_ARGUMENT;
    }
  }
  onyx__cpu_gemm g = cpu_gemm_gemm(s, m, n, k, a->dtype, a, b);
  float *ws[CPU_WS_COUNT];
  uint64_t bytes[CPU_WS_COUNT];
  cpu_gemm_ws_bytes(&s->base, &g, bytes);
  st = cpu_ws_views(ctx, bytes, ws);
  if (st != ONYX_STATUS_OK) return st;

  int64_t dims[2] = {m, n};
  onyx_tensor *y = NULL;
  st = onyx__cpu_alloc_output(&s->base, ctx, a->dtype, 2, dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL || m == 0 || n == 0) return st;

  if (a->dtype == ONYX_DTYPE_FLOAT64) {
    cpu_gemm_init_y(c, s->beta, m, n, true, y->data);
    onyx__cpu_dgemm(s->trans_a, s->trans_b, m, n, k, s->alpha, a->data, a->dims[1], b->data,
                    b->dims[1], y->data, n);
    return ONYX_STATUS_OK;
  }
  float *acc = a->dtype == ONYX_DTYPE_FLOAT32 ? y->data : ws[CPU_WS_ACC];
  bool overwrite = c == NULL || s->beta == 0.0f; /* Y is the product alone */
  if (!overwrite) cpu_gemm_init_y(c, s->beta, m, n, false, acc);
  g.a = a->data;
  g.b = b->data;
  g.y = acc;
  g.overwrite_y = overwrite;
  onyx__cpu_sgemm(s->base.provider, &g, ws[CPU_WS_PACK_A], ws[CPU_WS_PACK_B]);
  if (a->dtype != ONYX_DTYPE_FLOAT32) cpu_store_acc(a->dtype, acc, y->data, m * n);
  return ONYX_STATUS_OK;
}

static onyx_status cpu_gemm_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                  onyx_tensor *outputs, size_t output_count) {
  if (input_count < 2) return ONYX_STATUS_INVALID_ARGUMENT;
  int64_t dims[2], k;
  char why[ONYX__CPU_REASON_CAP] = "";
  onyx_status st =
      cpu_gemm_dims(state, &inputs[0], &inputs[1], &dims[0], &dims[1], &k, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cpu_reason(state, st, why);
  onyx__cpu_infer_out(outputs, output_count, 0, inputs[0].dtype, 2, dims);
  return st;
}

/* Opset 11 made C optional, opset 7 made it broadcast unidirectionally; one kernel
 * covers every version because it accepts the most permissive form of each. */
const onyx_kernel_table onyx__cpu_k_gemm = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "",
    .op_type = "Gemm",
    .since_opset = 1,
    .until_opset = 0,
    .type_input = 0,
    .type_mask = ONYX__CPU_FLOAT_TYPES,
    .create = cpu_gemm_create,
    .destroy = cpu_gemm_destroy,
    .workspace = cpu_gemm_workspace,
    .compute = cpu_gemm_compute,
    .infer = cpu_gemm_infer,
};
