/*
 * Norm into product: a decoder's RMS norm and the product that reads it,
 *
 *   h, _, _, s = SkipSimplifiedLayerNormalization(x, skip, gamma)   y = MatMul(h, W)
 *   h = SimplifiedLayerNormalization(x, gamma)                       y = MatMul(h, W)
 *
 * become one ai.onyx::RMSNormMatMul(x, skip, gamma, W) -> y, s (docs/ops.md); with the
 * int4 exports' product, y = com.microsoft::MatMulNBits(h, B, scales, zp, g_idx, bias),
 * one ai.onyx::RMSNormMatMulNBits(x, skip, gamma, B, scales, zp, g_idx, bias) -> y, s
 * with the norm's epsilon and the product's attributes. On a GPU a decode step is bound
 * by kernel count: the norm is one small launch before each of a layer's two products
 * (qkv and gate|up), and the fused kernel recomputes each row's scale in every block
 * while it streams W, so h never goes to memory.
 *
 * It fires only when nothing else can see h: the norm's normed output has the MatMul
 * as its only reader and is no graph output, its mean and inv_std_var outputs are
 * absent or unread, the norm has no bias, an explicit epsilon, axis -1 (the plain form),
 * gamma a 1-D constant of W's K and type; W a constant [K, N] of float32, float16 or
 * bfloat16 with N a multiple of 8 (the CUDA kernel's 16-byte loads; every decoder width). And the
 * provider that would run the norm and the product has an RMSNormMatMul kernel for the type (the
 * kernel index is read as placement will read it, so a runtime without the op never sees it). No
 * weight is copied: W and gamma are read where they are.
 *
 * The MatMulNBits form asks the same of the norm and of h; of the product, that B and
 * scales (and zero points, g_idx, bias where present) are constants, gamma of its K and
 * of its scales' type (A's); the probe sees the fused node's attributes, which its kernel
 * reads. Only the CUDA provider has it: on a CPU-only runtime the pair stays.
 */
#include <stdlib.h>
#include <string.h>

#include "error_impl.h"
#include "model_load_impl.h" /* onyx__strdup */
#include "optimize_impl.h"

typedef struct nmm_match {
  size_t norm, mm; /* node indices */
  bool skip_form, nbits;
  int32_t x, skip, gamma, w, h, y, sum;
  uint32_t dtype;
  onyx__nbits_product nb; /* the MatMulNBits form's product */
} nmm_match;

static bool is_op(const onyx__node *n, const char *domain, const char *op) {
  return !strcmp(n->domain, domain) && !strcmp(n->op_type, op);
}

static int32_t slot(const int32_t *a, size_t count, size_t k) { return k < count ? a[k] : -1; }

static bool float_type(uint32_t d) {
  return d == ONYX_DTYPE_FLOAT32 || d == ONYX_DTYPE_FLOAT16 || d == ONYX_DTYPE_BFLOAT16;
}

static bool usable_constant(const onyx__value *v) {
  return onyx__value_is_constant(v) && (v->init.data != NULL || onyx__init_bytes(v) == 0);
}

static bool unread(const onyx__graph *g, const uint32_t *readers, int32_t v) {
  return v < 0 || (readers[v] == 0 && !g->values[v].is_output);
}

static const onyx_attr *find_attr(const onyx__node *n, const char *name) {
  for (size_t a = 0; a < n->attr_count; ++a)
    if (!strcmp(n->attrs[a].name, name)) return &n->attrs[a];
  return NULL;
}

/* The norm's own conditions: its form, inputs, attributes and unread statistics. */
static const char *check_norm(const onyx__graph *g, const onyx__node *n, const uint32_t *readers,
                              nmm_match *m) {
  const onyx_attr *eps = find_attr(n, "epsilon"), *axis = find_attr(n, "axis");
  if (eps == NULL || eps->type != ONYX_ATTR_FLOAT) return "no float epsilon attribute";
  if (axis && (axis->type != ONYX_ATTR_INT || axis->i != -1)) return "axis is not -1";
  m->x = slot(n->inputs, n->input_count, 0);
  if (m->skip_form) {
    if (n->input_count > 4 || slot(n->inputs, n->input_count, 3) >= 0) return "it has a bias";
    m->skip = slot(n->inputs, n->input_count, 1);
    m->gamma = slot(n->inputs, n->input_count, 2);
    m->sum = slot(n->outputs, n->output_count, 3);
    if (m->skip < 0) return "no skip input";
    if (!unread(g, readers, slot(n->outputs, n->output_count, 1)) ||
        !unread(g, readers, slot(n->outputs, n->output_count, 2)))
      return "its mean or inv_std_var output is read";
    if (n->output_count > 4) return "unknown extra outputs";
  } else {
    if (n->input_count != 2) return "not two inputs";
    m->skip = m->sum = -1;
    m->gamma = n->inputs[1];
    if (!unread(g, readers, slot(n->outputs, n->output_count, 1)) || n->output_count > 2)
      return "its inv_std_var output is read";
  }
  if (m->x < 0 || m->gamma < 0) return "an input is absent";
  const onyx__value *gv = &g->values[m->gamma];
  if (!usable_constant(gv) || gv->init.rank != 1) return "gamma is not a 1-D constant";
  return NULL;
}

/* The MatMulNBits product p reading h, against gamma and X. */
static const char *match_nbits(const onyx__graph *g, const onyx__node *p, nmm_match *m) {
  const char *why = onyx__opt_nbits_product(g, p, m->h, &m->nb);
  if (why) return why;
  if (find_attr(p, "epsilon")) return "the MatMulNBits has an epsilon attribute of its own";
  const onyx__value *gv = &g->values[m->gamma];
  if (gv->init.dims[0] != m->nb.k) return "gamma's length is not the MatMulNBits' K";
  if (gv->init.dtype != m->nb.dtype) return "gamma and the MatMulNBits' scales differ in type";
  uint32_t xd = g->values[m->x].dtype;
  if (xd != ONYX_DTYPE_UNDEFINED && xd != m->nb.dtype) return "X's type differs from the scales'";
  m->nbits = true;
  m->w = m->nb.w[0];
  m->y = p->outputs[0];
  m->dtype = m->nb.dtype;
  return NULL;
}

/* The pattern at norm node i, or why not. *candidate: node i is a norm of either form. */
static const char *match_at(const onyx__graph *g, size_t i, const uint32_t *readers,
                            const int32_t *reader, void *out, bool *candidate) {
  nmm_match *m = out;
  const onyx__node *n = &g->nodes[i];
  memset(m, 0, sizeof *m);
  m->norm = i;
  m->skip_form = is_op(n, "com.microsoft", "SkipSimplifiedLayerNormalization");
  *candidate = m->skip_form || is_op(n, "", "SimplifiedLayerNormalization");
  if (!*candidate) return "not an RMS norm";
  const char *why = check_norm(g, n, readers, m);
  if (why) return why;
  m->h = slot(n->outputs, n->output_count, 0);
  if (m->h < 0 || readers[m->h] != 1 || g->values[m->h].is_output)
    return "its normed output has another reader or is a graph output";
  m->mm = (size_t)reader[m->h];
  const onyx__node *p = &g->nodes[m->mm];
  if (is_op(p, "com.microsoft", "MatMulNBits")) return match_nbits(g, p, m);
  if (!is_op(p, "", "MatMul") || p->input_count != 2 || p->output_count != 1 ||
      p->inputs[0] != m->h || p->outputs[0] < 0)
    return "its normed output feeds no MatMul or MatMulNBits as A";
  m->w = p->inputs[1];
  m->y = p->outputs[0];
  const onyx__value *wv = &g->values[m->w], *gv = &g->values[m->gamma];
  if (m->w < 0 || !usable_constant(wv) || wv->init.rank != 2) return "W is not a constant matrix";
  if (wv->init.dims[0] != gv->init.dims[0] || wv->init.dims[0] <= 0 || wv->init.dims[1] <= 0)
    return "gamma's length is not W's K";
  if (wv->init.dims[1] % 8 != 0) return "N is not a multiple of 8 (the GPU kernel's vector)";
  if (!float_type(wv->init.dtype) || gv->init.dtype != wv->init.dtype)
    return "W and gamma are not of one float32, float16 or bfloat16 type";
  uint32_t xd = g->values[m->x].dtype;
  if (xd != ONYX_DTYPE_UNDEFINED && xd != wv->init.dtype) return "X's type differs from W's";
  m->dtype = wv->init.dtype;
  return NULL;
}

/* The norm's inputs then the product's B, scales, zero_points, g_idx, bias. */
static void nbits_inputs(const nmm_match *m, int32_t in[8]) {
  in[0] = m->x, in[1] = m->skip, in[2] = m->gamma;
  memcpy(in + 3, m->nb.w, sizeof m->nb.w);
}

/* As check_providers, for the MatMulNBits form; the fused node probed with its own
 * attributes (the norm's epsilon, then the product's). */
static const char *check_providers_nbits(onyx__opt_ctx *ctx, const nmm_match *m) {
  const onyx__node *n = &ctx->graph->nodes[m->norm], *p = &ctx->graph->nodes[m->mm];
  int32_t fused_in[8];
  nbits_inputs(m, fused_in);
  return onyx__opt_nbits_check_providers(
      ctx, n, p, find_attr(n, "epsilon"), "RMSNormMatMulNBits", fused_in, 8, m->dtype,
      "the norm and the product would run on different providers",
      "their provider has no RMSNormMatMulNBits kernel");
}

static const char *check_providers(onyx__opt_ctx *ctx, const void *match) {
  const nmm_match *m = match;
  if (m->nbits) return check_providers_nbits(ctx, m);
  onyx_runtime *rt = ctx->session->runtime;
  const onyx__graph *g = ctx->graph;
  const onyx__node *n = &g->nodes[m->norm], *p = &g->nodes[m->mm];
  const int32_t fused_in[4] = {m->x, m->skip, m->gamma, m->w};
  onyx__provider *pn = onyx__opt_provider_for(rt, g, n, n->domain, n->op_type, n->opset, n->inputs,
                                              n->input_count, m->dtype);
  onyx__provider *pm =
      onyx__opt_provider_for(rt, g, p, "", "MatMul", p->opset, p->inputs, 2, m->dtype);
  onyx__provider *pf =
      onyx__opt_provider_for(rt, g, n, "ai.onyx", "RMSNormMatMul", 1, fused_in, 4, m->dtype);
  if (pn == NULL || pn != pm) return "the norm and the product would run on different providers";
  if (pf != pn) return "their provider has no RMSNormMatMul kernel";
  return NULL;
}

/* Node m->norm becomes RMSNormMatMulNBits(x, skip, gamma, B, scales, zp, g_idx, bias) ->
 * y, sum with epsilon and the product's attributes (moved, not copied); the MatMulNBits
 * is flagged dead. Everything is allocated before the graph changes. */
static onyx_status rewrite_nbits(onyx__graph *g, const nmm_match *m, bool *dead) {
  onyx__node *n = &g->nodes[m->norm], *p = &g->nodes[m->mm];
  const onyx_attr *eps = find_attr(n, "epsilon");
  size_t count = 0;
  onyx_attr *attrs = onyx__opt_nbits_attrs(eps, p, &count);
  int32_t *in = malloc(8 * sizeof *in), *out = malloc(2 * sizeof *out);
  char *op = onyx__strdup("RMSNormMatMulNBits"), *domain = onyx__strdup("ai.onyx");
  if (attrs == NULL || in == NULL || out == NULL || op == NULL || domain == NULL) {
    free(attrs), free(in), free(out), free(op), free(domain);
    return ONYX_STATUS_OUT_OF_MEMORY;
  }
  for (size_t k = 0; k < n->output_count; ++k)
    if (n->outputs[k] >= 0 && n->outputs[k] != m->sum) g->values[n->outputs[k]].producer = -1;
  nbits_inputs(m, in);
  out[0] = m->y, out[1] = m->sum;
  onyx__opt_nbits_take_attrs(n, p, eps, attrs, count);
  free(n->inputs), free(n->outputs), free(n->op_type), free(n->domain);
  n->inputs = in, n->input_count = 8;
  n->outputs = out, n->output_count = 2;
  n->op_type = op, n->domain = domain, n->opset = 1;
  p->outputs[0] = -1;
  g->values[m->y].producer = (int32_t)m->norm;
  dead[m->mm] = true;
  return ONYX_STATUS_OK;
}

/* Node m->norm becomes RMSNormMatMul(x, skip, gamma, W) -> y, sum; the MatMul is
 * flagged dead (its output now the fused node's). */
static onyx_status rewrite(onyx__graph *g, const void *match, bool *dead) {
  const nmm_match *m = match;
  if (m->nbits) return rewrite_nbits(g, m, dead);
  int32_t *in = malloc(4 * sizeof *in), *out = malloc(2 * sizeof *out);
  char *op = onyx__strdup("RMSNormMatMul"), *domain = onyx__strdup("ai.onyx");
  if (in == NULL || out == NULL || op == NULL || domain == NULL) {
    free(in), free(out), free(op), free(domain);
    return ONYX_STATUS_OUT_OF_MEMORY;
  }
  onyx__node *n = &g->nodes[m->norm];
  for (size_t k = 0; k < n->output_count; ++k)
    if (n->outputs[k] >= 0 && n->outputs[k] != m->sum) g->values[n->outputs[k]].producer = -1;
  in[0] = m->x, in[1] = m->skip, in[2] = m->gamma, in[3] = m->w;
  out[0] = m->y, out[1] = m->sum;
  free(n->inputs), free(n->outputs), free(n->op_type), free(n->domain);
  n->inputs = in, n->input_count = 4;
  n->outputs = out, n->output_count = 2;
  n->op_type = op, n->domain = domain, n->opset = 1;
  g->nodes[m->mm].outputs[0] = -1;
  g->values[m->y].producer = (int32_t)m->norm;
  dead[m->mm] = true;
  return ONYX_STATUS_OK;
}

onyx_status onyx__opt_norm_matmul(onyx__opt_ctx *ctx) {
  static const onyx__opt_fusion fusion = {"norm_matmul", sizeof(nmm_match), match_at,
                                          check_providers, rewrite};
  return onyx__opt_fuse_each(ctx, &fusion);
}
