/*
 * Which provider placement would pick for a node a pass is about to make: the passes
 * that fuse nodes ask before they rewrite, so a fusion never leaves a node no provider
 * runs, or moves work to another provider.
 */
#include "optimize_impl.h"

enum { PROBE_MAX_INPUTS = 8 };

onyx__provider *onyx__opt_provider_for_attrs(onyx_runtime *rt, const onyx__graph *g,
                                             const onyx__node *like, const onyx_attr *attrs,
                                             size_t attr_count, const char *domain, const char *op,
                                             int64_t opset, const int32_t *inputs,
                                             size_t input_count, uint32_t d) {
  bool present[PROBE_MAX_INPUTS] = {false}, out_present[1] = {true};
  uint32_t dtypes[PROBE_MAX_INPUTS] = {0};
  if (input_count > PROBE_MAX_INPUTS) return NULL;
  for (size_t k = 0; k < input_count; ++k) {
    int32_t v = inputs[k];
    present[k] = v >= 0;
    dtypes[k] = v < 0                                    ? ONYX_DTYPE_UNDEFINED
                : onyx__value_is_constant(&g->values[v]) ? g->values[v].init.dtype
                                                         : d;
  }
  onyx_node_info info = {.struct_size = sizeof info,
                         .version = ONYX_ABI_VERSION,
                         .name = like->name,
                         .domain = domain,
                         .op_type = op,
                         .opset = opset,
                         .input_count = input_count,
                         .output_count = 1,
                         .input_present = present,
                         .output_present = out_present,
                         .input_dtypes = dtypes,
                         .attrs = attrs,
                         .attr_count = attr_count};
  onyx__provider *p = NULL;
  const onyx__kernel *k = NULL;
  return onyx__kernel_search(rt, &info, NULL, false, &p, &k, NULL, 0) ? p : NULL;
}

onyx__provider *onyx__opt_provider_for(onyx_runtime *rt, const onyx__graph *g,
                                       const onyx__node *like, const char *domain, const char *op,
                                       int64_t opset, const int32_t *inputs, size_t input_count,
                                       uint32_t d) {
  return onyx__opt_provider_for_attrs(rt, g, like, like->attrs, like->attr_count, domain, op, opset,
                                      inputs, input_count, d);
}
