/*
 * ai.onyx::RMSNormMatMulNBits and ai.onyx::SiluMulMatMulNBits (docs/ops.md): a
 * MatMulNBits product whose A the kernel makes from the inputs of the node before it,
 * float16 and bfloat16. The norm_matmul and silu_matmul optimizations make them from
 * int4 exports, where each layer's norms and SiluMul were small launches of their own.
 *
 *   RMSNormMatMulNBits(X, skip, gamma, B, scales, zero_points, g_idx, bias) -> Y, S
 *     A = rmsnorm(X + skip)·gamma, S = X + skip
 *   SiluMulMatMulNBits(GU, B, scales, zero_points, g_idx, bias) -> Y
 *     A = silu(gate)·up, gate and up the two halves of GU's last dim
 *
 * Inputs after the first (3 or 1) are MatMulNBits' inputs 1 to 5, checked by the
 * shared definition (providers/common/nbits_params.h) against A's geometry. Routes
 * (cuda_nbits_route.h), from the rows alone:
 *   gemv     one launch of MatMulNBits' decode GEMV whose prologue makes A in each
 *            block's shared memory after the PDL wait (cuda_matmul_nbits.cu);
 *   prefill  the unfused producer's kernel (the norm, SiluMul) writes A into a STEP
 *            region (S into output 1), then MatMulNBits' prefill route.
 * Regions, always in this order, 0 bytes off the route: the rows of A, the dequantized
 * slice of B, cuBLASLt's scratch.
 */
#include <string.h>

#include "cuda_impl.h"
#include "cuda_nbits.h"
#include "cuda_nbits_route.h"
#include "cuda_silu_mul.h"
#include "nbits_params.h"

extern const onyx_kernel_table onyx__cuda_k_rms_norm_matmul_nbits;
extern const onyx_kernel_table onyx__cuda_k_silu_mul_matmul_nbits;

enum { NBF_WS_A, NBF_WS_DEQUANT, NBF_WS_LT, NBF_WS_COUNT };
static const char *const nbf_ws_names[NBF_WS_COUNT] = {"nbits_fused_a", "nbits_dequant",
                                                       "cublaslt_workspace"};

/* Fused input slots before MatMulNBits' own (B, scales, zero_points, g_idx, bias). */
enum { NBF_X = 0, NBF_SKIP = 1, NBF_GAMMA = 2, NBF_NORM_FIRST = 3, NBF_SILU_FIRST = 1 };

typedef struct nbf_state {
  onyx__cuda_node head;
  onyx__pc_nb_attrs attrs;
  bool norm; /* RMSNormMatMulNBits; else SiluMulMatMulNBits */
  float epsilon;
} nbf_state;

typedef struct nbf_plan {
  onyx__pc_nb_geom g;
  onyx__cuda_nb_route r;
  const onyx_tensor *skip, *gamma; /* the norm's; NULL for SiLU */
} nbf_plan;

static bool nbf_is_norm(const onyx_node_info *node) {
  return strcmp(node->op_type, "RMSNormMatMulNBits") == 0;
}

static size_t nbf_first(bool norm) { return norm ? NBF_NORM_FIRST : NBF_SILU_FIRST; }

/* ------------------------------------------------------------------ geometry */

/* The norm's own inputs against A's dtype and X's shape. */
static onyx_status nbf_norm_check(const nbf_state *s, const onyx_tensor *x, nbf_plan *p, char *why,
                                  size_t cap) {
  const onyx_tensor *skip = p->skip, *gamma = p->gamma;
  if (gamma == NULL || gamma->dtype != x->dtype || gamma->rank != 1 || gamma->dims[0] != s->attrs.k)
    return onyx__cuda_fail(why, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "input 2 (gamma) %s: [K = %lld] of input 0's dtype %s expected",
                           gamma ? onyx__cuda_tensor_shape(gamma).s : "absent",
                           (long long)s->attrs.k, onyx__cuda_dtype_name(x->dtype));
  if (skip && (skip->dtype != x->dtype || skip->rank != x->rank ||
               memcmp(skip->dims, x->dims, x->rank * sizeof x->dims[0]) != 0))
    return onyx__cuda_fail(why, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "input 1 (skip) %s must have input 0's shape %s and dtype",
                           onyx__cuda_tensor_shape(skip).s, onyx__cuda_tensor_shape(x).s);
  return ONYX_STATUS_OK;
}

/* Checks every input (in[0..count), absent ones NULL) and plans the route. */
static onyx_status nbf_plan_make(const nbf_state *s, const onyx_tensor *const *in, size_t count,
                                 nbf_plan *p, char *why, size_t cap) {
  memset(p, 0, sizeof *p);
  const size_t first = nbf_first(s->norm);
  const char *op = s->norm ? "RMSNormMatMulNBits" : "SiluMulMatMulNBits";
  if (count < first + 2 || count > first + 5 || in[NBF_X] == NULL)
    return onyx__cuda_fail(why, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "%s takes %zu to %zu inputs, input 0 present; got %zu", op, first + 2,
                           first + 5, count);
  const onyx_tensor *x = in[NBF_X];
  onyx_tensor a = *x; /* A's geometry: X's, or GU's with its last dim halved */
  if (!s->norm) {
    if (a.rank < 1 || a.dims[a.rank - 1] != 2 * s->attrs.k)
      return onyx__cuda_fail(why, cap, ONYX_STATUS_INVALID_ARGUMENT,
                             "input 0 (GU) %s: [..., 2K] with K = %lld expected",
                             onyx__cuda_tensor_shape(x).s, (long long)s->attrs.k);
    a.dims[a.rank - 1] /= 2;
  }
  const onyx_tensor *nb[ONYX__PC_NB_INPUTS] = {&a};
  for (size_t i = 1; i < ONYX__PC_NB_INPUTS; ++i)
    nb[i] = first + i - 1 < count ? in[first + i - 1] : NULL;
  onyx_status st = onyx__pc_nb_geometry(&s->attrs, nb, ONYX__PC_NB_INPUTS, &p->g, why, cap);
  if (st != ONYX_STATUS_OK) return st;
  if (p->g.t1 != ONYX_DTYPE_FLOAT16 && p->g.t1 != ONYX_DTYPE_BFLOAT16)
    return onyx__cuda_fail(why, cap, ONYX_STATUS_UNSUPPORTED,
                           "input 0 is %s: the CUDA kernels take float16 or bfloat16",
                           onyx__cuda_dtype_name(p->g.t1));
  if (s->norm) {
    p->skip = in[NBF_SKIP];
    p->gamma = in[NBF_GAMMA];
    if ((st = nbf_norm_check(s, x, p, why, cap)) != ONYX_STATUS_OK) return st;
  }
  onyx__cuda_nb_route_make(&s->attrs, p->g.m, &p->r);
  return ONYX_STATUS_OK;
}

/* The prefill route's rows of A in T, 0 on the GEMV route. */
static uint64_t nbf_a_bytes(const nbf_state *s, const nbf_plan *p) {
  if (p->r.gemv || p->g.m == 0) return 0;
  return ((uint64_t)p->g.m * (uint64_t)s->attrs.k * 2u + 255u) / 256u * 256u;
}

/* ------------------------------------------------------------------ placement, create */

/* MatMulNBits' view of the node: its inputs from slot first - 1 on (A's slot then holds
 * the fused node's input before B, which the g_idx check does not read). */
static onyx_node_info nbf_matmul_view(const onyx_node_info *node, bool norm) {
  const size_t shift = nbf_first(norm) - 1;
  onyx_node_info v = *node;
  v.input_count = node->input_count > shift ? node->input_count - shift : 0;
  if (node->input_present) v.input_present = node->input_present + shift;
  if (node->input_dtypes) v.input_dtypes = node->input_dtypes + shift;
  if (ONYX_HAS_FIELD(node, onyx_node_info, input_constants) && node->input_constants)
    v.input_constants = node->input_constants + shift;
  return v;
}

static onyx_status nbf_check_node(const onyx_node_info *node, onyx__pc_nb_attrs *a, float *eps,
                                  char *why, size_t cap) {
  onyx_status st = onyx__pc_nb_attrs_read(node, a, why, cap);
  if (st != ONYX_STATUS_OK) return st;
  if (a->bits != 4 && a->bits != 8)
    return onyx__cuda_fail(why, cap, ONYX_STATUS_UNSUPPORTED,
                           "bits = %lld: the CUDA provider has 4- and 8-bit kernels",
                           (long long)a->bits);
  const bool norm = nbf_is_norm(node);
  if (norm && (st = onyx__cuda_attr_float(node, "epsilon", 1e-5f, eps, why, cap)) != ONYX_STATUS_OK)
    return st;
  const onyx_node_info view = nbf_matmul_view(node, norm);
  return onyx__pc_nb_g_idx_check(&view, a, why, cap);
}

static bool nbf_supports(const onyx_node_info *node, char *reason, size_t reason_cap) {
  onyx__pc_nb_attrs a;
  float eps = 0.0f;
  return nbf_check_node(node, &a, &eps, reason, reason_cap) == ONYX_STATUS_OK;
}

static onyx_status nbf_create(void *provider_state, const onyx_node_info *node, void **out_state,
                              char *err, size_t err_cap) {
  onyx__pc_nb_attrs a;
  float eps = 1e-5f;
  onyx_status st = nbf_check_node(node, &a, &eps, err, err_cap);
  if (st != ONYX_STATUS_OK) return st;
  nbf_state *s = onyx__cuda_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  s->attrs = a;
  s->norm = nbf_is_norm(node);
  s->epsilon = eps;
  *out_state = s;
  return ONYX_STATUS_OK;
}

/* ------------------------------------------------------------------ infer, workspace */

/* Infer and workspace get inputs as an array: absent ones have dtype UNDEFINED. */
static bool nbf_in(const onyx_tensor *inputs, size_t count, const onyx_tensor **out) {
  if (count > NBF_NORM_FIRST + 5) return false;
  for (size_t i = 0; i < count; ++i)
    out[i] = inputs[i].dtype == ONYX_DTYPE_UNDEFINED ? NULL : &inputs[i];
  return true;
}

static onyx_status nbf_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                             onyx_tensor *outputs, size_t output_count) {
  onyx__cuda_infer_begin(outputs, output_count);
  const nbf_state *s = state;
  const onyx_tensor *in[NBF_NORM_FIRST + 5];
  nbf_plan p;
  char why[ONYX__CUDA_REASON_CAP] = "";
  if (output_count < 1 || !nbf_in(inputs, input_count, in))
    return onyx__cuda_reason(state, ONYX_STATUS_INVALID_ARGUMENT,
                             "expected 1 or 2 outputs, <= 8 inputs");
  onyx_status st = nbf_plan_make(s, in, input_count, &p, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cuda_reason(state, st, why);
  outputs[0].dtype = p.g.t1;
  outputs[0].rank = p.g.out_rank;
  memcpy(outputs[0].dims, p.g.out_dims, sizeof(int64_t) * p.g.out_rank);
  if (p.skip && output_count > 1) {
    outputs[1].dtype = p.g.t1;
    outputs[1].rank = in[NBF_X]->rank;
    memcpy(outputs[1].dims, in[NBF_X]->dims, sizeof(int64_t) * in[NBF_X]->rank);
  }
  return ONYX_STATUS_OK;
}

static onyx_status nbf_workspace(void *state, const onyx_tensor *inputs, size_t input_count,
                                 onyx_workspace_requirement *req) {
  const nbf_state *s = state;
  const onyx_tensor *in[NBF_NORM_FIRST + 5];
  nbf_plan p;
  char why[ONYX__CUDA_REASON_CAP] = "";
  req->count = 0;
  if (!nbf_in(inputs, input_count, in))
    return onyx__cuda_reason(state, ONYX_STATUS_INVALID_ARGUMENT, "more than 8 inputs");
  onyx_status st = nbf_plan_make(s, in, input_count, &p, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cuda_reason(state, st, why);
  const uint64_t bytes[NBF_WS_COUNT] = {nbf_a_bytes(s, &p), p.r.ws[ONYX__CUDA_NB_WS_DEQUANT],
                                        p.r.ws[ONYX__CUDA_NB_WS_LT]};
  req->count = NBF_WS_COUNT;
  for (int i = 0; i < NBF_WS_COUNT; ++i)
    req->regions[i] = (onyx_workspace_region){nbf_ws_names[i], bytes[i], 256, ONYX_LIFETIME_STEP};
  return ONYX_STATUS_OK;
}

/* ------------------------------------------------------------------ compute */

/* The prefill route: A by the unfused producer's kernel into its view, then the product. */
static onyx_status nbf_prefill(const nbf_state *s, onyx_compute_ctx *ctx, const nbf_plan *p,
                               onyx__cuda_nbits_args *args, void *const ws[NBF_WS_COUNT]) {
  cudaStream_t stream = (cudaStream_t)ctx->stream;
  cudaError_t e;
  if (s->norm) {
    onyx__cuda_norm_args n = {.simplified = true,
                              .x_dtype = args->dtype,
                              .scale_dtype = args->dtype,
                              .y_dtype = args->dtype,
                              .sum_dtype = args->dtype,
                              .x = args->a,
                              .skip = args->skip,
                              .skip_numel = args->skip ? args->m * args->k : 0,
                              .scale = args->gamma,
                              .scale_numel = args->k,
                              .y = ws[NBF_WS_A],
                              .sum = args->sum,
                              .rows = args->m,
                              .cols = args->k,
                              .epsilon = args->epsilon};
    e = onyx__cuda_launch_norm(&n, stream);
  } else {
    e = onyx__cuda_launch_silu_mul(args->dtype, args->a, ws[NBF_WS_A], args->m, args->k, stream);
  }
  onyx_status st = onyx__cuda_check(ctx, e,
                                    s->norm ? "RMSNormMatMulNBits: the norm of the rows"
                                            : "SiluMulMatMulNBits: silu(gate)·up");
  if (st != ONYX_STATUS_OK) return st;
  args->a = ws[NBF_WS_A];
  args->prologue = ONYX__CUDA_NBITS_PRO_NONE;
  return onyx__cuda_nb_prefill(s->head.provider, ctx, &s->attrs, &p->r, args, ws[NBF_WS_DEQUANT],
                               &ctx->workspace[NBF_WS_LT]);
}

/* The views of the route's regions, every one checked before anything runs. */
static onyx_status nbf_views(const nbf_state *s, onyx_compute_ctx *ctx, const nbf_plan *p,
                             void *ws[NBF_WS_COUNT]) {
  const uint64_t need[NBF_WS_COUNT] = {nbf_a_bytes(s, p), p->r.ws[ONYX__CUDA_NB_WS_DEQUANT],
                                       p->r.ws[ONYX__CUDA_NB_WS_LT]};
  for (size_t i = 0; i < NBF_WS_COUNT; ++i) {
    ws[i] = NULL;
    if (need[i] == 0) continue;
    const onyx_workspace_view *v = i < ctx->workspace_count ? &ctx->workspace[i] : NULL;
    if (v == NULL || v->data == NULL || v->bytes < need[i])
      return onyx__cuda_error(ctx, ONYX_STATUS_WORKSPACE_TOO_SMALL,
                              "workspace region %zu (%s) has %llu bytes, %llu required", i,
                              nbf_ws_names[i], v ? (unsigned long long)v->bytes : 0ull,
                              (unsigned long long)need[i]);
    ws[i] = v->data;
  }
  return ONYX_STATUS_OK;
}

static onyx__cuda_nbits_args nbf_args(const nbf_state *s, const nbf_plan *p,
                                      const onyx_tensor *const *in, size_t count, void *y,
                                      void *sum) {
  const size_t first = nbf_first(s->norm);
  const onyx_tensor *zp = onyx__cuda_input(in, count, first + ONYX__PC_NB_ZP - 1);
  const onyx_tensor *bias = onyx__cuda_input(in, count, first + ONYX__PC_NB_BIAS - 1);
  const onyx__pc_nb_attrs *a = &s->attrs;
  return (onyx__cuda_nbits_args){.dtype = p->g.t1,
                                 .bits = (int)a->bits,
                                 .m = p->g.m,
                                 .n = a->n,
                                 .k = a->k,
                                 .block_size = a->block_size,
                                 .k_blocks = a->k_blocks,
                                 .zp_kind = (int)p->g.w.zp,
                                 .zp_row = a->zp_bytes,
                                 .a = in[NBF_X]->data,
                                 .b = in[first + ONYX__PC_NB_B - 1]->data,
                                 .scales = in[first + ONYX__PC_NB_SCALES - 1]->data,
                                 .zp = zp ? zp->data : NULL,
                                 .bias = bias ? bias->data : NULL,
                                 .y = y,
                                 .sm_count = s->head.provider->sm_count,
                                 .plain = !onyx__cuda_pdl,
                                 .prologue = s->norm ? ONYX__CUDA_NBITS_PRO_NORM
                                                     : ONYX__CUDA_NBITS_PRO_SILU,
                                 .skip = p->skip ? p->skip->data : NULL,
                                 .gamma = p->gamma ? p->gamma->data : NULL,
                                 .sum = sum,
                                 .epsilon = s->epsilon};
}

static onyx_status nbf_compute(void *state, onyx_compute_ctx *ctx, const onyx_tensor *const *inputs,
                               size_t input_count) {
  const nbf_state *s = state;
  /* Input 0 is required; skip is optional, B and scales are checked by the plan. */
  onyx_status st = onyx__cuda_check_inputs(ctx, inputs, input_count, 1);
  if (st != ONYX_STATUS_OK) return st;
  nbf_plan p;
  char why[ONYX__CUDA_REASON_CAP];
  st = nbf_plan_make(s, inputs, input_count, &p, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cuda_error(ctx, st, "%s", why);
  void *ws[NBF_WS_COUNT];
  if ((st = nbf_views(s, ctx, &p, ws)) != ONYX_STATUS_OK) return st;
  onyx_tensor *y = NULL, *sum = NULL;
  const onyx_tensor *x = inputs[NBF_X];
  st = onyx__cuda_alloc_output(&s->head, ctx, 0, p.g.t1, p.g.out_rank, p.g.out_dims, &y);
  if (st == ONYX_STATUS_OK && p.skip)
    st = onyx__cuda_alloc_output(&s->head, ctx, 1, p.g.t1, x->rank, x->dims, &sum);
  if (st != ONYX_STATUS_OK || y == NULL || p.g.m == 0) return st;
  onyx__cuda_nbits_args args =
      nbf_args(s, &p, inputs, input_count, y->data, sum ? sum->data : NULL);
  if (!p.r.gemv) return nbf_prefill(s, ctx, &p, &args, ws);
  return onyx__cuda_check(ctx, onyx__cuda_launch_nbits_gemv(&args, (cudaStream_t)ctx->stream),
                          s->norm ? "RMSNormMatMulNBits GEMV" : "SiluMulMatMulNBits GEMV");
}

#define NBF_TABLE(op)                                                                              \
  {                                                                                                \
    .struct_size = sizeof(onyx_kernel_table), .version = ONYX_ABI_VERSION, .domain = "ai.onyx",    \
    .op_type = op, .since_opset = 1, .until_opset = 0, .type_input = 0,                            \
    .type_mask = ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT16) | ONYX_DTYPE_BIT(ONYX_DTYPE_BFLOAT16),         \
    .supports = nbf_supports, .create = nbf_create, .destroy = onyx__cuda_destroy,                 \
    .workspace = nbf_workspace, .compute = nbf_compute, .infer = nbf_infer,                        \
  }

const onyx_kernel_table onyx__cuda_k_rms_norm_matmul_nbits = NBF_TABLE("RMSNormMatMulNBits");
const onyx_kernel_table onyx__cuda_k_silu_mul_matmul_nbits = NBF_TABLE("SiluMulMatMulNBits");
