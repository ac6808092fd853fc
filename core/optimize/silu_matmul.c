/*
 * Activation into product: a decoder MLP's SiluMul (made by gate_up_silu) and the down
 * projection that reads it,
 *
 *   a = SiluMul(gu)    y = MatMul(a, W)
 *
 * become one ai.onyx::SiluMulMatMul(gu, W) -> y (docs/ops.md); with the int4 exports'
 * down product, y = com.microsoft::MatMulNBits(a, B, scales, zp, g_idx, bias), one
 * ai.onyx::SiluMulMatMulNBits(gu, B, scales, zp, g_idx, bias) -> y with the product's
 * attributes. On a GPU a decode step is bound by kernel count: SiluMul is one small
 * launch before each layer's down product, and the fused kernel computes its blocks'
 * slices of a while it streams W, so a never goes to memory. The arithmetic is the
 * pair's: a rounded to the type as SiluMul stored it, then the product with float32
 * accumulation.
 *
 * It fires only when nothing else can see a: SiluMul's output has the MatMul as its
 * only reader (as A) and is no graph output; W a constant [I, N] of float32, float16
 * or bfloat16 with N a multiple of 8 (the CUDA kernel's 16-byte loads), I half of gu's
 * last dim where that is known; and the provider that would run SiluMul and the
 * product has a SiluMulMatMul kernel for the type (the kernel index is read as
 * placement will read it). No weight is copied.
 *
 * The MatMulNBits form asks the same of a; of the product, that B and scales (and zero
 * points, g_idx, bias where present) are constants, gu's last dim twice its K and gu of
 * its scales' type where known; the probe sees the fused node's attributes, which its
 * kernel reads. Only the CUDA provider has it: on a CPU-only runtime the pair stays.
 */
#include <stdlib.h>
#include <string.h>

#include "error_impl.h"
#include "model_load_impl.h" /* onyx__strdup */
#include "optimize_impl.h"

typedef struct smm_match {
  size_t act, mm; /* node indices: the SiluMul, the MatMul */
  int32_t gu, w, a, y;
  uint32_t dtype;
  bool nbits;
  onyx__nbits_product nb; /* the MatMulNBits form's product */
} smm_match;

static bool is_op(const onyx__node *n, const char *domain, const char *op) {
  return !strcmp(n->domain, domain) && !strcmp(n->op_type, op);
}

static bool float_type(uint32_t d) {
  return d == ONYX_DTYPE_FLOAT32 || d == ONYX_DTYPE_FLOAT16 || d == ONYX_DTYPE_BFLOAT16;
}

static bool usable_constant(const onyx__value *v) {
  return onyx__value_is_constant(v) && (v->init.data != NULL || onyx__init_bytes(v) == 0);
}

/* W's conditions against gu's known type and shape. */
static const char *check_weight(const onyx__graph *g, smm_match *m) {
  const onyx__value *wv = &g->values[m->w], *gv = &g->values[m->gu];
  if (!usable_constant(wv) || wv->init.rank != 2) return "W is not a constant matrix";
  if (wv->init.dims[0] <= 0 || wv->init.dims[1] <= 0) return "W is empty";
  if (wv->init.dims[1] % 8 != 0) return "N is not a multiple of 8 (the GPU kernel's vector)";
  if (!float_type(wv->init.dtype)) return "W is not float32, float16 or bfloat16";
  if (gv->dtype != ONYX_DTYPE_UNDEFINED && gv->dtype != wv->init.dtype)
    return "the gate|up input's type differs from W's";
  if (gv->rank > 0 && gv->dims[gv->rank - 1] >= 0 && gv->dims[gv->rank - 1] != 2 * wv->init.dims[0])
    return "the gate|up input's last dim is not twice W's K";
  m->dtype = wv->init.dtype;
  return NULL;
}

/* The MatMulNBits product p reading a, against gu's known type and shape. */
static const char *match_nbits(const onyx__graph *g, const onyx__node *p, smm_match *m) {
  const char *why = onyx__opt_nbits_product(g, p, m->a, &m->nb);
  if (why) return why;
  const onyx__value *gv = &g->values[m->gu];
  if (gv->dtype != ONYX_DTYPE_UNDEFINED && gv->dtype != m->nb.dtype)
    return "the gate|up input's type differs from the MatMulNBits' scales'";
  if (gv->rank > 0 && gv->dims[gv->rank - 1] >= 0 && gv->dims[gv->rank - 1] != 2 * m->nb.k)
    return "the gate|up input's last dim is not twice the MatMulNBits' K";
  m->nbits = true;
  m->w = m->nb.w[0];
  m->y = p->outputs[0];
  m->dtype = m->nb.dtype;
  return NULL;
}

/* The pattern at SiluMul node i, or why not. *candidate: node i is a SiluMul. */
static const char *match_at(const onyx__graph *g, size_t i, const uint32_t *readers,
                            const int32_t *reader, void *out, bool *candidate) {
  smm_match *m = out;
  const onyx__node *n = &g->nodes[i];
  memset(m, 0, sizeof *m);
  m->act = i;
  *candidate = is_op(n, "ai.onyx", "SiluMul");
  if (!*candidate) return "not a SiluMul";
  if (n->input_count != 1 || n->output_count != 1 || n->inputs[0] < 0 || n->outputs[0] < 0)
    return "not one input and one output";
  m->gu = n->inputs[0];
  m->a = n->outputs[0];
  if (readers[m->a] != 1 || g->values[m->a].is_output)
    return "its output has another reader or is a graph output";
  m->mm = (size_t)reader[m->a];
  const onyx__node *p = &g->nodes[m->mm];
  if (is_op(p, "com.microsoft", "MatMulNBits")) return match_nbits(g, p, m);
  if (!is_op(p, "", "MatMul") || p->input_count != 2 || p->output_count != 1 ||
      p->inputs[0] != m->a || p->inputs[1] == m->a || p->inputs[1] < 0 || p->outputs[0] < 0)
    return "its output feeds no MatMul or MatMulNBits as A";
  m->w = p->inputs[1];
  m->y = p->outputs[0];
  return check_weight(g, m);
}

/* gu then the product's B, scales, zero_points, g_idx, bias. */
static void nbits_inputs(const smm_match *m, int32_t in[6]) {
  in[0] = m->gu;
  memcpy(in + 1, m->nb.w, sizeof m->nb.w);
}

/* As check_providers, for the MatMulNBits form; the fused node probed with the
 * product's attributes (its own). */
static const char *check_providers_nbits(onyx__opt_ctx *ctx, const smm_match *m) {
  const onyx__node *n = &ctx->graph->nodes[m->act], *p = &ctx->graph->nodes[m->mm];
  int32_t fused_in[6];
  nbits_inputs(m, fused_in);
  return onyx__opt_nbits_check_providers(ctx, n, p, NULL, "SiluMulMatMulNBits", fused_in, 6,
                                         m->dtype,
                                         "SiluMul and the product would run on different providers",
                                         "their provider has no SiluMulMatMulNBits kernel");
}

static const char *check_providers(onyx__opt_ctx *ctx, const void *match) {
  const smm_match *m = match;
  if (m->nbits) return check_providers_nbits(ctx, m);
  onyx_runtime *rt = ctx->session->runtime;
  const onyx__graph *g = ctx->graph;
  const onyx__node *n = &g->nodes[m->act], *p = &g->nodes[m->mm];
  const int32_t fused_in[2] = {m->gu, m->w};
  onyx__provider *pa = onyx__opt_provider_for(rt, g, n, n->domain, n->op_type, n->opset, n->inputs,
                                              n->input_count, m->dtype);
  onyx__provider *pm =
      onyx__opt_provider_for(rt, g, p, "", "MatMul", p->opset, p->inputs, 2, m->dtype);
  onyx__provider *pf =
      onyx__opt_provider_for(rt, g, n, "ai.onyx", "SiluMulMatMul", 1, fused_in, 2, m->dtype);
  if (pa == NULL || pa != pm) return "SiluMul and the product would run on different providers";
  if (pf != pa) return "their provider has no SiluMulMatMul kernel";
  return NULL;
}

/* Node m->act becomes SiluMulMatMulNBits(gu, B, scales, zp, g_idx, bias) -> y with the
 * product's attributes (moved, not copied; SiluMul's own, if any, dropped); the
 * MatMulNBits is flagged dead. Everything is allocated before the graph changes. */
static onyx_status rewrite_nbits(onyx__graph *g, const smm_match *m, bool *dead) {
  onyx__node *n = &g->nodes[m->act], *p = &g->nodes[m->mm];
  size_t count = 0;
  onyx_attr *attrs = onyx__opt_nbits_attrs(NULL, p, &count);
  int32_t *in = malloc(6 * sizeof *in);
  char *op = onyx__strdup("SiluMulMatMulNBits");
  if ((attrs == NULL && count > 0) || in == NULL || op == NULL) {
    free(attrs), free(in), free(op);
    return ONYX_STATUS_OUT_OF_MEMORY;
  }
  g->values[m->a].producer = -1;
  nbits_inputs(m, in);
  onyx__opt_nbits_take_attrs(n, p, NULL, attrs, count);
  free(n->inputs), free(n->op_type);
  n->inputs = in, n->input_count = 6;
  n->outputs[0] = m->y;
  n->op_type = op, n->opset = 1;
  p->outputs[0] = -1;
  g->values[m->y].producer = (int32_t)m->act;
  dead[m->mm] = true;
  return ONYX_STATUS_OK;
}

/* Node m->act becomes SiluMulMatMul(gu, W) -> y; the MatMul is flagged dead (its
 * output now the fused node's). */
static onyx_status rewrite(onyx__graph *g, const void *match, bool *dead) {
  const smm_match *m = match;
  if (m->nbits) return rewrite_nbits(g, m, dead);
  int32_t *in = malloc(2 * sizeof *in);
  char *op = onyx__strdup("SiluMulMatMul");
  if (in == NULL || op == NULL) {
    free(in), free(op);
    return ONYX_STATUS_OUT_OF_MEMORY;
  }
  onyx__node *n = &g->nodes[m->act];
  g->values[m->a].producer = -1;
  in[0] = m->gu, in[1] = m->w;
  free(n->inputs), free(n->op_type);
  n->inputs = in, n->input_count = 2;
  n->outputs[0] = m->y;
  n->op_type = op, n->opset = 1;
  g->nodes[m->mm].outputs[0] = -1;
  g->values[m->y].producer = (int32_t)m->act;
  dead[m->mm] = true;
  return ONYX_STATUS_OK;
}

onyx_status onyx__opt_silu_matmul(onyx__opt_ctx *ctx) {
  static const onyx__opt_fusion fusion = {"silu_matmul", sizeof(smm_match), match_at,
                                          check_providers, rewrite};
  return onyx__opt_fuse_each(ctx, &fusion);
}
