/*
 * Placement: each node goes to the first provider (plugins.ini order, the fallback
 * last) with a kernel for its (domain, op, opset, dtype) that also accepts the
 * node's attributes — except shape arithmetic, which stays on the host (see
 * keep_on_host). Kernel states are created here, once per session.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error_impl.h"
#include "optimize/optimize.h"
#include "session_impl.h"

const char *onyx__dtype_str(uint32_t d) {
  switch (d) {
  case ONYX_DTYPE_FLOAT32:
    return "float32";
  case ONYX_DTYPE_UINT8:
    return "uint8";
  case ONYX_DTYPE_INT8:
    return "int8";
  case ONYX_DTYPE_UINT16:
    return "uint16";
  case ONYX_DTYPE_INT16:
    return "int16";
  case ONYX_DTYPE_INT32:
    return "int32";
  case ONYX_DTYPE_INT64:
    return "int64";
  case ONYX_DTYPE_STRING:
    return "string";
  case ONYX_DTYPE_BOOL:
    return "bool";
  case ONYX_DTYPE_FLOAT16:
    return "float16";
  case ONYX_DTYPE_FLOAT64:
    return "float64";
  case ONYX_DTYPE_UINT32:
    return "uint32";
  case ONYX_DTYPE_UINT64:
    return "uint64";
  case ONYX_DTYPE_BFLOAT16:
    return "bfloat16";
  default:
    return "unknown";
  }
}

/* Does kernel `k` take node `info`? Its opset range, every type constraint the
 * node's known dtypes can be checked against, then its own `supports` (given its
 * instance). `reason` explains a no. */
static bool kernel_matches(const onyx__kernel *k, const onyx_node_info *info,
                           const uint32_t *output_dtypes, char *reason, size_t reason_cap) {
  if (info->opset < k->since_opset || (k->until_opset != 0 && info->opset > k->until_opset)) {
    snprintf(reason, reason_cap, "opset %lld outside %lld..%lld", (long long)info->opset,
             (long long)k->since_opset, (long long)k->until_opset);
    return false;
  }
  for (size_t c = 0; c < k->type_count; ++c) {
    const onyx_type_constraint *tc = &k->types[c];
    bool in = tc->side == ONYX_TYPE_INPUT;
    size_t count = in ? info->input_count : info->output_count;
    if (tc->index >= count || (!in && output_dtypes == NULL)) continue;
    uint32_t d = in ? info->input_dtypes[tc->index] : output_dtypes[tc->index];
    if (!onyx__k_type_ok(k, tc->side, tc->index, d)) {
      snprintf(reason, reason_cap, "no %s kernel (%s %u)", onyx__dtype_str(d),
               in ? "input" : "output", tc->index);
      return false;
    }
  }
  return onyx__k_supports(k, info, reason, reason_cap);
}

/* Fills the node's onyx_node_info (arrays owned by the placed node). */
static onyx_status build_info(onyx_session *s, size_t i, onyx__placed_node *pn) {
  const onyx__node *n = &s->graph->nodes[i];
  pn->input_present = calloc(n->input_count + 1, sizeof(bool));
  pn->output_present = calloc(n->output_count + 1, sizeof(bool));
  pn->input_dtypes = calloc(n->input_count + 1, sizeof(uint32_t));
  pn->input_constants = calloc(n->input_count + 1, sizeof *pn->input_constants);
  pn->input_constant_copied = calloc(n->input_count + 1, sizeof(bool));
  pn->output_dtypes = calloc(n->output_count + 1, sizeof(uint32_t));
  if (!pn->input_present || !pn->output_present || !pn->input_dtypes || !pn->input_constants ||
      !pn->input_constant_copied || !pn->output_dtypes)
    return ONYX_STATUS_OUT_OF_MEMORY;
  for (size_t k = 0; k < n->input_count; ++k) {
    pn->input_present[k] = n->inputs[k] >= 0;
    pn->input_dtypes[k] = n->inputs[k] >= 0 ? s->dtypes[n->inputs[k]] : ONYX_DTYPE_UNDEFINED;
    const onyx__value *val = n->inputs[k] >= 0 ? &s->graph->values[n->inputs[k]] : NULL;
    if (val && onyx__value_is_constant(val)) pn->input_constants[k] = &val->init;
  }
  for (size_t k = 0; k < n->output_count; ++k) {
    pn->output_present[k] = n->outputs[k] >= 0;
    pn->output_dtypes[k] = n->outputs[k] >= 0 ? s->dtypes[n->outputs[k]] : ONYX_DTYPE_UNDEFINED;
  }
  pn->info = (onyx_node_info){
      .struct_size = sizeof(onyx_node_info),
      .version = ONYX_ABI_VERSION,
      .name = n->name,
      .domain = n->domain,
      .op_type = n->op_type,
      .opset = n->opset,
      .input_count = n->input_count,
      .output_count = n->output_count,
      .input_present = pn->input_present,
      .output_present = pn->output_present,
      .input_dtypes = pn->input_dtypes,
      .attrs = n->attrs,
      .attr_count = n->attr_count,
      .input_constants = pn->input_constants,
      .input_constant_copied = pn->input_constant_copied,
  };
  return ONYX_STATUS_OK;
}

bool onyx__kernel_search(onyx_runtime *rt, const onyx_node_info *info,
                         const uint32_t *output_dtypes, bool host_only,
                         onyx__provider **out_provider, const onyx__kernel **out_kernel,
                         char *why_not, size_t why_cap) {
  char reason[ONYX__KERNEL_REASON_CAP];
  size_t count = 0;
  const onyx__kernel *const *found = onyx__kernel_lookup(rt, info->domain, info->op_type, &count);
  for (size_t i = 0; i < count; ++i) { /* placement order: instance, then registration */
    const onyx__kernel *k = found[i];
    if (host_only && !onyx__dev_is_host(k->instance)) continue;
    reason[0] = '\0';
    if (kernel_matches(k, info, output_dtypes, reason, sizeof reason)) {
      *out_kernel = k;
      *out_provider = k->instance;
      return true;
    }
    size_t len = why_not ? strlen(why_not) : 0;
    if (why_not && reason[0] && len + 64 < why_cap)
      snprintf(why_not + len, why_cap - len, "%s%s (%s): %s", len ? "; " : "", k->instance->name,
               k->instance->tier, reason);
  }
  return false;
}

/* Places `pn` on the first instance with a kernel that matches it (see
 * onyx__kernel_search). */
static bool find_kernel(onyx_runtime *rt, onyx__placed_node *pn, bool host_only, char *why_not,
                        size_t why_cap) {
  return onyx__kernel_search(rt, &pn->info, pn->output_dtypes, host_only, &pn->provider,
                             &pn->kernel, why_not, why_cap);
}

/* ------------------------------------------------------------ shape arithmetic */

static bool int_dtype(uint32_t d) {
  return d == ONYX_DTYPE_INT64 || d == ONYX_DTYPE_INT32 || d == ONYX_DTYPE_BOOL;
}

/* Is node i shape arithmetic — Shape or Size, an integer Constant (when constant
 * folding is off, the builder's Gather index is one), or integer results computed
 * from shape values (`shape_val`) and integer initializers alone? */
static bool shape_arithmetic(const onyx_session *s, size_t i, const bool *shape_val) {
  const onyx__node *n = &s->graph->nodes[i];
  if (n->domain[0] == '\0' && (!strcmp(n->op_type, "Shape") || !strcmp(n->op_type, "Size")))
    return true;
  bool any_shape = n->domain[0] == '\0' && !strcmp(n->op_type, "Constant");
  for (size_t k = 0; k < n->input_count; ++k) {
    int32_t v = n->inputs[k];
    if (v < 0) continue;
    bool int_init = s->graph->values[v].is_initializer && int_dtype(s->dtypes[v]);
    if (!shape_val[v] && !int_init) return false;
    any_shape |= shape_val[v];
  }
  for (size_t o = 0; o < n->output_count; ++o)
    if (n->outputs[o] >= 0 && !int_dtype(s->dtypes[n->outputs[o]])) return false;
  return any_shape;
}

/*
 * Shape arithmetic stays on the host: its results are a few integers that kernels
 * read there (a total sequence length, a reshape target — their host_inputs), so on
 * a device each would cost a copy there and a synchronising copy back (and a device
 * graph could not hold it). A node a device provider took moves to the first host
 * provider with a kernel for it, in strict mode too: strict asks that the model's
 * tensors be computed on the preferred providers, and these are not tensors of the
 * model but facts about their shapes, known on the host before any kernel runs.
 */
static void keep_on_host(onyx_session *s, onyx__placed_node *pn) {
  if (onyx__dev_is_host(pn->provider)) return;
  find_kernel(s->runtime, pn, true, NULL, 0);
}

void onyx__unplace_nodes(onyx_session *s) {
  if (s->nodes == NULL) return;
  for (size_t i = 0; i < s->graph->node_count; ++i) {
    onyx__placed_node *pn = &s->nodes[i];
    if (pn->state && pn->kernel) onyx__k_destroy(pn->kernel, pn->state);
    free(pn->input_present);
    free(pn->output_dtypes);
    free(pn->output_present);
    free(pn->input_dtypes);
    free(pn->input_constants);
    free(pn->input_constant_copied);
  }
  free(s->nodes);
  s->nodes = NULL;
}

/* Places node i: the first provider with a matching kernel, shape arithmetic kept on
 * the host, then the kernel's state. */
static onyx_status place_node(onyx_session *s, size_t i, bool has_preferred, bool *shape_val,
                              uint32_t *readers, char *err, size_t err_cap) {
  onyx_runtime *rt = s->runtime;
  onyx__placed_node *pn = &s->nodes[i];
  const onyx__node *n = &s->graph->nodes[i];
  if (build_info(s, i, pn) != ONYX_STATUS_OK) return ONYX_STATUS_OUT_OF_MEMORY;
  char why_not[512] = "";
  find_kernel(rt, pn, false, why_not, sizeof why_not);
  const char *dom = n->domain[0] ? n->domain : "ai.onnx";
  uint32_t d0 = pn->info.input_count ? pn->input_dtypes[0] : ONYX_DTYPE_UNDEFINED;
  if (pn->kernel == NULL) {
    onyx__errf(err, err_cap,
               "node '%s' (#%zu): no provider has a kernel for %s::%s opset %lld with "
               "input 0 of type %s%s%s%s",
               n->name, i, dom, n->op_type, (long long)n->opset, onyx__dtype_str(d0),
               why_not[0] ? " (" : "", why_not, why_not[0] ? ")" : "");
    return ONYX_STATUS_UNSUPPORTED;
  }
  bool shape = shape_arithmetic(s, i, shape_val);
  if (shape) {
    keep_on_host(s, pn);
    for (size_t o = 0; o < n->output_count; ++o)
      if (n->outputs[o] >= 0) shape_val[n->outputs[o]] = true;
  }
  /* Strict: every tensor on the preferred providers; host shape arithmetic aside. */
  bool host_shape = shape && onyx__dev_is_host(pn->provider);
  if (rt->config->strict && has_preferred && pn->provider->is_fallback && !host_shape) {
    onyx__errf(err, err_cap,
               "node '%s' (#%zu): %s::%s would fall back to provider '%s', which strict "
               "mode in %s forbids",
               n->name, i, dom, n->op_type, pn->provider->name, rt->config->path);
    return ONYX_STATUS_UNSUPPORTED;
  }
  char kerr[512] = "";
  onyx_status st = onyx__k_create(pn->kernel, &pn->info, &pn->state, kerr, sizeof kerr);
  if (st != ONYX_STATUS_OK) {
    pn->state = NULL;
    onyx__errf(err, err_cap, "node '%s' (#%zu, %s on %s, device %s): %s: %s", n->name, i,
               n->op_type, pn->provider->name, pn->provider->tier, onyx_status_str(st),
               kerr[0] ? kerr : "create failed");
    return st;
  }
  /* A constant the kernel copied (prepacked) is freed as soon as its last reader
   * has done so, node by node, so that the original and the copy coexist for one
   * tensor at a time. */
  return onyx__release_copied_constants(s, i, readers, err, err_cap);
}

onyx_status onyx__place_nodes(onyx_session *s, char *err, size_t err_cap) {
  onyx_runtime *rt = s->runtime;
  const onyx__graph *g = s->graph;
  s->nodes = calloc(g->node_count ? g->node_count : 1, sizeof *s->nodes);
  bool *shape_val = calloc(g->value_count + 1, sizeof *shape_val);
  uint32_t *readers = onyx__value_readers(g);
  if (s->nodes == NULL || shape_val == NULL || readers == NULL) {
    free(shape_val);
    free(readers);
    return ONYX_STATUS_OUT_OF_MEMORY;
  }
  bool has_preferred = false;
  for (size_t p = 0; p < rt->provider_count; ++p) has_preferred |= !rt->providers[p].is_fallback;
  onyx_status st = ONYX_STATUS_OK;
  for (size_t i = 0; i < g->node_count && st == ONYX_STATUS_OK; ++i)
    st = place_node(s, i, has_preferred, shape_val, readers, err, err_cap);
  free(shape_val);
  free(readers);
  return st;
}

/* ------------------------------------------------------------ claims */

/* Does kernel `k` take graph node `n` by opset and the dtypes the model declares? */
static bool claims(const onyx__kernel *k, const onyx__graph *g, const onyx__node *n) {
  if (n->opset < k->since_opset || (k->until_opset != 0 && n->opset > k->until_opset)) return false;
  for (size_t c = 0; c < k->type_count; ++c) {
    const onyx_type_constraint *tc = &k->types[c];
    bool in = tc->side == ONYX_TYPE_INPUT;
    if (tc->index >= (in ? n->input_count : n->output_count)) continue;
    int32_t v = in ? n->inputs[tc->index] : n->outputs[tc->index];
    uint32_t d = v >= 0 ? g->values[v].dtype : ONYX_DTYPE_UNDEFINED;
    if (!onyx__k_type_ok(k, tc->side, tc->index, d)) return false;
  }
  return true;
}

const char *onyx__claiming_provider(const onyx_runtime *rt, const onyx__graph *g,
                                    const onyx__node *n) {
  bool has_preferred = false;
  for (size_t p = 0; p < rt->provider_count; ++p) has_preferred |= !rt->providers[p].is_fallback;
  size_t count = 0;
  const onyx__kernel *const *found = onyx__kernel_lookup(rt, n->domain, n->op_type, &count);
  for (size_t i = 0; i < count; ++i) {
    if (rt->config->strict && has_preferred && found[i]->instance->is_fallback) continue;
    if (claims(found[i], g, n)) return found[i]->instance->name;
  }
  return NULL;
}
