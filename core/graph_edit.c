/*
 * Graph edits for the optimization passes. The loader builds the graph once; the
 * passes then fold, rewire and drop nodes in place. Values are never removed —
 * a value whose producer is gone is simply read by no one — so that value indices
 * held elsewhere (per-value arrays of the session) stay valid across passes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error_impl.h"
#include "graph_edit.h"
#include "model_load_impl.h" /* onyx__attrs_free: attributes are freed as the loader made them */

onyx_status onyx__graph_index_rebuild(onyx__graph *g) {
  size_t cap = 16;
  while (cap < 2 * g->value_count) cap *= 2;
  int32_t *index = malloc(cap * sizeof *index);
  free(g->value_index);
  g->value_index = index;
  g->value_index_cap = index ? cap : 0;
  if (index == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  memset(index, 0xff, cap * sizeof *index); /* every slot -1 */
  for (size_t v = 0; v < g->value_count; ++v) {
    size_t slot = (size_t)onyx__graph_name_hash(g->values[v].name) & (cap - 1);
    while (index[slot] >= 0) slot = (slot + 1) & (cap - 1);
    index[slot] = (int32_t)v;
  }
  return ONYX_STATUS_OK;
}

onyx_status onyx__graph_add_value(onyx__graph *g, const char *name, int32_t *out_value) {
  if (name == NULL || name[0] == '\0' || onyx__graph_find_value(g, name) >= 0)
    return ONYX_STATUS_INVALID_ARGUMENT;
  if (g->value_count >= (size_t)INT32_MAX) return ONYX_STATUS_UNSUPPORTED;
  char *copy = onyx__strdup(name);
  onyx__value *grown = copy ? realloc(g->values, (g->value_count + 1) * sizeof *grown) : NULL;
  if (grown == NULL) {
    free(copy);
    return ONYX_STATUS_OUT_OF_MEMORY;
  }
  g->values = grown;
  onyx__value *v = &g->values[g->value_count];
  memset(v, 0, sizeof *v);
  v->name = copy;
  v->dtype = ONYX_DTYPE_UNDEFINED;
  v->rank = -1;
  v->producer = -1;
  int32_t index = (int32_t)g->value_count++;
  /* The index is at most half full; past that (or without one) it is rebuilt. */
  if (g->value_index == NULL || 2 * g->value_count > g->value_index_cap) {
    if (onyx__graph_index_rebuild(g) != ONYX_STATUS_OK) {
      /* Lookups fall back to scanning: slower, still correct. */
    }
  } else {
    size_t mask = g->value_index_cap - 1;
    size_t slot = (size_t)onyx__graph_name_hash(copy) & mask;
    while (g->value_index[slot] >= 0) slot = (slot + 1) & mask;
    g->value_index[slot] = index;
  }
  *out_value = index;
  return ONYX_STATUS_OK;
}

void onyx__graph_set_initializer(onyx__graph *g, int32_t v, onyx_tensor t) {
  onyx__value *val = &g->values[v];
  if (val->is_initializer && val->init.data != t.data) free(val->init.data);
  t.device = ONYX_DEVICE_HOST;
  t.device_id = 0;
  val->init = t;
  val->is_initializer = true;
  val->dtype = t.dtype;
  val->rank = (int32_t)t.rank;
  for (size_t d = 0; d < ONYX_MAX_RANK; ++d) val->dims[d] = d < t.rank ? t.dims[d] : 0;
  val->producer = -1;
}

size_t onyx__graph_replace_uses(onyx__graph *g, int32_t from, int32_t to) {
  size_t changed = 0;
  for (size_t i = 0; i < g->node_count; ++i) {
    onyx__node *n = &g->nodes[i];
    for (size_t k = 0; k < n->input_count; ++k) {
      if (n->inputs[k] != from) continue;
      n->inputs[k] = to;
      ++changed;
    }
  }
  return changed;
}

void onyx__graph_set_node_output(onyx__graph *g, size_t node, size_t k, int32_t v) {
  onyx__node *n = &g->nodes[node];
  if (n->outputs[k] >= 0 && g->values[n->outputs[k]].producer == (int32_t)node)
    g->values[n->outputs[k]].producer = -1;
  n->outputs[k] = v;
  if (v >= 0) g->values[v].producer = (int32_t)node;
}

static void node_free(onyx__node *n) {
  free(n->name);
  free(n->op_type);
  free(n->domain);
  free(n->inputs);
  free(n->outputs);
  onyx__attrs_free(n->attrs, n->attr_count);
}

size_t onyx__graph_remove_nodes(onyx__graph *g, const bool *dead) {
  size_t kept = 0;
  for (size_t i = 0; i < g->node_count; ++i) {
    onyx__node *n = &g->nodes[i];
    if (dead[i]) {
      for (size_t k = 0; k < n->output_count; ++k)
        if (n->outputs[k] >= 0 && g->values[n->outputs[k]].producer == (int32_t)i)
          g->values[n->outputs[k]].producer = -1;
      node_free(n);
      continue;
    }
    for (size_t k = 0; k < n->output_count; ++k)
      if (n->outputs[k] >= 0) g->values[n->outputs[k]].producer = (int32_t)kept;
    g->nodes[kept++] = *n;
  }
  size_t removed = g->node_count - kept;
  g->node_count = kept;
  return removed;
}

/* Is value v available before node i runs? */
static bool defined_before(const onyx__graph *g, int32_t v, size_t i) {
  const onyx__value *val = &g->values[v];
  if (val->is_initializer || val->is_input) return true;
  return val->producer >= 0 && (size_t)val->producer < i;
}

onyx_status onyx__graph_check(const onyx__graph *g, char *err, size_t cap) {
  for (size_t i = 0; i < g->node_count; ++i) {
    const onyx__node *n = &g->nodes[i];
    for (size_t k = 0; k < n->input_count; ++k) {
      int32_t v = n->inputs[k];
      if (v < 0 || defined_before(g, v, i)) continue;
      onyx__errf(err, cap, "node '%s' (#%zu, %s): input %zu '%s' is not defined before it", n->name,
                 i, n->op_type, k, g->values[v].name);
      return ONYX_STATUS_INTERNAL;
    }
    for (size_t k = 0; k < n->output_count; ++k) {
      int32_t v = n->outputs[k];
      if (v < 0 || (g->values[v].producer == (int32_t)i && !g->values[v].is_initializer)) continue;
      onyx__errf(err, cap, "node '%s' (#%zu, %s): output %zu '%s' is not recorded as its own",
                 n->name, i, n->op_type, k, g->values[v].name);
      return ONYX_STATUS_INTERNAL;
    }
  }
  for (size_t o = 0; o < g->output_count; ++o) {
    const onyx__value *val = &g->values[g->outputs[o]];
    if (val->is_initializer || val->is_input || val->producer >= 0) continue;
    onyx__errf(err, cap, "graph output %zu '%s' has no producer", o, val->name);
    return ONYX_STATUS_INTERNAL;
  }
  return ONYX_STATUS_OK;
}
