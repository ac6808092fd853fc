/*
 * What norm_matmul and silu_matmul share for their MatMulNBits forms
 * (ai.onyx::RMSNormMatMulNBits, ai.onyx::SiluMulMatMulNBits; docs/ops.md): the product's
 * own conditions, and the fused node's attributes, made once as borrowed copies for the
 * provider probe and then moved onto the fused node without another allocation, so that
 * a rewrite that got its memory cannot fail half-way.
 */
#include <stdlib.h>
#include <string.h>

#include "model_load_impl.h" /* onyx__attrs_free: attributes are freed as the loader made them */
#include "optimize_impl.h"

static bool float_type(uint32_t d) {
  return d == ONYX_DTYPE_FLOAT32 || d == ONYX_DTYPE_FLOAT16 || d == ONYX_DTYPE_BFLOAT16;
}

static bool usable_constant(const onyx__value *v) {
  return onyx__value_is_constant(v) && (v->init.data != NULL || onyx__init_bytes(v) == 0);
}

static bool positive_int(const onyx__node *n, const char *name, int64_t *out) {
  for (size_t a = 0; a < n->attr_count; ++a)
    if (!strcmp(n->attrs[a].name, name))
      return n->attrs[a].type == ONYX_ATTR_INT && (*out = n->attrs[a].i) > 0;
  return false;
}

const char *onyx__opt_nbits_product(const onyx__graph *g, const onyx__node *p, int32_t a,
                                    onyx__nbits_product *out) {
  memset(out, 0, sizeof *out);
  if (p->input_count < 3 || p->input_count > 1 + ONYX__NBITS_WEIGHTS || p->output_count != 1 ||
      p->inputs[0] != a || p->outputs[0] < 0)
    return "it feeds no MatMulNBits as A";
  for (size_t s = 0; s < ONYX__NBITS_WEIGHTS; ++s) {
    int32_t v = s + 1 < p->input_count ? p->inputs[s + 1] : -1;
    out->w[s] = v;
    if (v >= 0 && !usable_constant(&g->values[v]))
      return "the MatMulNBits' B, scales, zero_points, g_idx or bias is not a constant";
  }
  if (out->w[0] < 0 || out->w[1] < 0) return "the MatMulNBits has no B or no scales";
  if (!positive_int(p, "K", &out->k) || !positive_int(p, "N", &out->n))
    return "the MatMulNBits has no positive K and N attributes";
  out->dtype = g->values[out->w[1]].init.dtype;
  if (!float_type(out->dtype))
    return "the MatMulNBits' scales are not float32, float16 or bfloat16";
  return NULL;
}

onyx_attr *onyx__opt_nbits_attrs(const onyx_attr *lead, const onyx__node *p, size_t *out_count) {
  size_t count = (lead != NULL) + p->attr_count;
  *out_count = count;
  onyx_attr *attrs = count ? malloc(count * sizeof *attrs) : NULL;
  if (attrs == NULL) return NULL;
  if (lead) attrs[0] = *lead;
  if (p->attr_count) memcpy(attrs + (lead != NULL), p->attrs, p->attr_count * sizeof *attrs);
  return attrs;
}

void onyx__opt_nbits_take_attrs(onyx__node *head, onyx__node *p, const onyx_attr *lead,
                                onyx_attr *attrs, size_t count) {
  /* lead's names and arrays now belong to attrs: clear it so that freeing head's list
   * frees only the attributes the fused node drops. */
  for (size_t a = 0; a < head->attr_count; ++a)
    if (&head->attrs[a] == lead) memset(&head->attrs[a], 0, sizeof head->attrs[a]);
  onyx__attrs_free(head->attrs, head->attr_count);
  free(p->attrs); /* its contents moved */
  p->attrs = NULL;
  p->attr_count = 0;
  head->attrs = attrs;
  head->attr_count = count;
}

const char *onyx__opt_nbits_check_providers(onyx__opt_ctx *ctx, const onyx__node *head,
                                            const onyx__node *p, const onyx_attr *lead,
                                            const char *fused_op, const int32_t *inputs,
                                            size_t input_count, uint32_t dtype, const char *apart,
                                            const char *missing) {
  onyx_runtime *rt = ctx->session->runtime;
  const onyx__graph *g = ctx->graph;
  onyx__provider *ph = onyx__opt_provider_for(rt, g, head, head->domain, head->op_type, head->opset,
                                              head->inputs, head->input_count, dtype);
  onyx__provider *pm = onyx__opt_provider_for(rt, g, p, "com.microsoft", "MatMulNBits", p->opset,
                                              p->inputs, p->input_count, dtype);
  if (ph == NULL || ph != pm) return apart;
  size_t count = p->attr_count;
  onyx_attr *merged = lead ? onyx__opt_nbits_attrs(lead, p, &count) : NULL;
  if (lead && merged == NULL) return "out of memory";
  onyx__provider *pf =
      onyx__opt_provider_for_attrs(rt, g, head, lead ? merged : p->attrs, count, "ai.onyx",
                                   fused_op, 1, inputs, input_count, dtype);
  free(merged);
  return pf == ph ? NULL : missing;
}
