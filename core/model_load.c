/*
 * ModelProto → onyx__graph. The file is untrusted: everything later stages rely on is
 * checked here, once, with a message that names the file and the thing — opset
 * imports, single definition of every value, topological node order, element types,
 * ranks, dims and payload sizes. The graph is built privately and handed out only
 * when complete, so a failed load leaves nothing behind.
 *
 * Value names are resolved through an open-addressing index that the graph keeps
 * (onyx__graph_find_value uses it), so loading is linear in the model size. Places
 * where a hostile file could make a count large (opset imports, local functions,
 * attributes) are checked by sorting rather than by nested loops.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_functions.h"
#include "graph_edit.h"
#include "model_load_impl.h"

/* ------------------------------------------------------------------ name index */

/* One hash for the index, shared with graph_edit.c, which rebuilds it after edits. */
static uint64_t hash_name(const char *s) { return onyx__graph_name_hash(s); }

int32_t onyx__graph_find_value(const onyx__graph *graph, const char *name) {
  if (graph == NULL || name == NULL) return -1;
  if (graph->value_index == NULL || graph->value_index_cap == 0) {
    for (size_t i = 0; i < graph->value_count; ++i) {
      if (strcmp(graph->values[i].name, name) == 0) return (int32_t)i;
    }
    return -1;
  }
  size_t mask = graph->value_index_cap - 1;
  for (size_t slot = (size_t)hash_name(name) & mask;; slot = (slot + 1) & mask) {
    int32_t v = graph->value_index[slot];
    if (v < 0) return -1;
    if (strcmp(graph->values[v].name, name) == 0) return v;
  }
}

/* The table is sized for every value up front (at most half full), so this never
 * needs to grow and always finds a free slot. */
static void index_insert(onyx__graph *g, int32_t value) {
  size_t mask = g->value_index_cap - 1;
  size_t slot = (size_t)hash_name(g->values[value].name) & mask;
  while (g->value_index[slot] >= 0) slot = (slot + 1) & mask;
  g->value_index[slot] = value;
}

/* ------------------------------------------------------------------ freeing */

void onyx__graph_free(onyx__graph *graph) {
  if (graph == NULL) return;
  free(graph->name);
  for (size_t i = 0; i < graph->value_count; ++i) {
    free(graph->values[i].name);
    free(graph->values[i].init.data);
  }
  free(graph->values);
  for (size_t i = 0; i < graph->node_count; ++i) {
    onyx__node *n = &graph->nodes[i];
    free(n->name);
    free(n->op_type);
    free(n->domain);
    free(n->inputs);
    free(n->outputs);
    onyx__attrs_free(n->attrs, n->attr_count);
  }
  free(graph->nodes);
  free(graph->inputs);
  free(graph->outputs);
  for (size_t i = 0; i < graph->opset_count; ++i) free(graph->opsets[i].domain);
  free(graph->opsets);
  free(graph->value_index);
  onyx__functions_free(graph->functions);
  onyx__function_notes_free(graph->function_notes);
  free(graph);
}

/* ------------------------------------------------------------------ opsets */

static const char *normalise_domain(const char *domain) {
  if (domain == NULL || strcmp(domain, "ai.onnx") == 0) return "";
  return domain;
}

int64_t onyx__graph_opset(const onyx__graph *graph, const char *domain) {
  if (graph == NULL) return 0;
  domain = normalise_domain(domain);
  for (size_t i = 0; i < graph->opset_count; ++i) {
    if (strcmp(graph->opsets[i].domain, domain) == 0) return graph->opsets[i].version;
  }
  return 0;
}

/* A (domain, name) key with its position in the model, for sorted look-ups. */
typedef struct sorted_key {
  const char *domain;
  const char *name; /* "" for opsets */
  size_t index;
} sorted_key;

static int compare_key(const void *a, const void *b) {
  const sorted_key *x = a;
  const sorted_key *y = b;
  int c = strcmp(x->domain, y->domain);
  if (c == 0) c = strcmp(x->name, y->name);
  if (c == 0) c = x->index < y->index ? -1 : x->index > y->index;
  return c;
}

/* Finds (domain, name) in a sorted key array; NULL when absent. */
static const sorted_key *find_key(const sorted_key *keys, size_t count, const char *domain,
                                  const char *name) {
  size_t lo = 0, hi = count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(keys[mid].domain, domain);
    if (c == 0) c = strcmp(keys[mid].name, name);
    if (c == 0) return &keys[mid];
    if (c < 0) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return NULL;
}

/* ------------------------------------------------------------------ building */

/* Scratch state of one load. */
typedef struct builder {
  onyx__load_ctx *ctx;
  onyx__graph *g;
  const Onnx__GraphProto *gp;
  sorted_key *opset_keys; /* g->opsets sorted by domain */
  size_t value_cap;
} builder;

/* A value's element type and shape as a ValueInfoProto or tensor declares it. */
typedef struct value_type {
  uint32_t dtype;
  int32_t rank;
  int64_t dims[ONYX_MAX_RANK];
} value_type;

static void describe_node(char *buf, size_t cap, size_t index, const Onnx__NodeProto *np) {
  onyx__qname qn, qd, qo;
  const char *domain = normalise_domain(np->domain);
  bool named = np->name != NULL && np->name[0] != '\0';
  snprintf(buf, cap, "node %zu%s%s%s (%s%s%s)", index, named ? " '" : "",
           named ? onyx__qn(&qn, np->name) : "", named ? "'" : "", onyx__qn(&qd, domain),
           domain[0] != '\0' ? ":" : "", onyx__qn(&qo, np->op_type));
}

/* Where value `v` is defined, for "redefines" messages. */
static void describe_definition(const builder *b, int32_t v, char *buf, size_t cap) {
  const onyx__value *val = &b->g->values[v];
  if (val->producer >= 0) {
    char node[320];
    describe_node(node, sizeof node, (size_t)val->producer, b->gp->node[val->producer]);
    snprintf(buf, cap, "an output of %s", node);
  } else {
    snprintf(buf, cap, "%s", val->is_initializer ? "an initializer" : "a graph input");
  }
}

static onyx_status oom(builder *b, const char *what) {
  return onyx__load_fail(b->ctx, ONYX_STATUS_OUT_OF_MEMORY, "out of memory (%s)", what);
}

/* Appends a value named `name` with unknown type; the caller checked it is new. */
static onyx_status add_value(builder *b, const char *name, int32_t *out_index) {
  onyx__graph *g = b->g;
  if (g->value_count >= b->value_cap) {
    return onyx__load_fail(b->ctx, ONYX_STATUS_INTERNAL, "value table overflow");
  }
  char *copy = onyx__strdup(name);
  if (copy == NULL) return oom(b, "value name");
  onyx__value *v = &g->values[g->value_count];
  memset(v, 0, sizeof *v);
  v->name = copy;
  v->dtype = ONYX_DTYPE_UNDEFINED;
  v->rank = -1;
  v->producer = -1;
  int32_t index = (int32_t)g->value_count++;
  index_insert(g, index);
  *out_index = index;
  return ONYX_STATUS_OK;
}

/* Reads a ValueInfoProto's type. Non-tensor types (sequence, map, optional, sparse)
 * are refused when `tensors_only` (graph inputs and outputs, which Onyx must bind) and
 * otherwise leave the type unknown. */
static onyx_status parse_value_type(builder *b, const char *thing, const Onnx__TypeProto *type,
                                    bool tensors_only, value_type *out) {
  memset(out, 0, sizeof *out);
  out->dtype = ONYX_DTYPE_UNDEFINED;
  out->rank = -1;
  if (type == NULL) return ONYX_STATUS_OK;
  if (type->tensor_type == NULL) {
    const char *kind = type->sequence_type != NULL        ? "a sequence"
                       : type->map_type != NULL           ? "a map"
                       : type->optional_type != NULL      ? "an optional"
                       : type->sparse_tensor_type != NULL ? "a sparse tensor"
                                                          : NULL;
    if (kind != NULL && tensors_only) {
      return onyx__load_fail(b->ctx, ONYX_STATUS_UNSUPPORTED,
                             "%s: has %s type; Onyx supports dense tensors only", thing, kind);
    }
    return ONYX_STATUS_OK;
  }
  const Onnx__TypeProto__Tensor *tt = type->tensor_type;
  if (tt->has_elem_type && tt->elem_type != ONYX_DTYPE_UNDEFINED) {
    onyx_status st = onyx__check_dtype(b->ctx, thing, tt->elem_type);
    if (st != ONYX_STATUS_OK) return st;
    out->dtype = (uint32_t)tt->elem_type;
  }
  if (tt->shape != NULL) {
    const Onnx__TensorShapeProto *shape = tt->shape;
    if (shape->n_dim > ONYX_MAX_RANK) {
      return onyx__load_fail(b->ctx, ONYX_STATUS_UNSUPPORTED,
                             "%s: rank %zu exceeds the maximum rank %d", thing, shape->n_dim,
                             ONYX_MAX_RANK);
    }
    for (size_t i = 0; i < shape->n_dim; ++i) {
      const Onnx__TensorShapeProto__Dimension *d = shape->dim[i];
      if (d->has_dim_value && d->dim_value < 0) {
        return onyx__load_fail(b->ctx, ONYX_STATUS_INVALID_MODEL,
                               "%s: dim %zu is negative (%" PRId64 ")", thing, i, d->dim_value);
      }
      out->dims[i] = d->has_dim_value ? d->dim_value : -1;
    }
    out->rank = (int32_t)shape->n_dim;
  }
  return ONYX_STATUS_OK;
}

/* Fills what `v` does not know yet from `t`; the first declaration wins. */
static void merge_type(onyx__value *v, const value_type *t) {
  if (v->dtype == ONYX_DTYPE_UNDEFINED) v->dtype = t->dtype;
  if (v->rank < 0 && t->rank >= 0) {
    v->rank = t->rank;
    memcpy(v->dims, t->dims, sizeof v->dims);
  }
}

static onyx_status build_opsets(builder *b, const Onnx__ModelProto *m) {
  onyx__graph *g = b->g;
  size_t n = m->n_opset_import;
  if (n == 0) return ONYX_STATUS_OK;
  g->opsets = calloc(n, sizeof *g->opsets);
  b->opset_keys = calloc(n, sizeof *b->opset_keys);
  if (g->opsets == NULL || b->opset_keys == NULL) return oom(b, "opset imports");
  for (size_t i = 0; i < n; ++i) {
    const Onnx__OperatorSetIdProto *op = m->opset_import[i];
    const char *domain = normalise_domain(op->domain);
    onyx__qname qd;
    if (!op->has_version || op->version < 1) {
      return onyx__load_fail(b->ctx, ONYX_STATUS_INVALID_MODEL,
                             "opset import %zu (domain '%s') has %s version", i,
                             onyx__qn(&qd, domain[0] != '\0' ? domain : "ai.onnx"),
                             op->has_version ? "an invalid" : "no");
    }
    g->opsets[i].domain = onyx__strdup(domain);
    if (g->opsets[i].domain == NULL) return oom(b, "opset imports");
    g->opsets[i].version = op->version;
    g->opset_count = i + 1;
    b->opset_keys[i] = (sorted_key){g->opsets[i].domain, "", i};
  }
  qsort(b->opset_keys, n, sizeof *b->opset_keys, compare_key);
  for (size_t i = 1; i < n; ++i) {
    if (strcmp(b->opset_keys[i - 1].domain, b->opset_keys[i].domain) == 0) {
      size_t first = b->opset_keys[i - 1].index, second = b->opset_keys[i].index;
      onyx__qname qd;
      const char *domain = g->opsets[first].domain;
      return onyx__load_fail(b->ctx, ONYX_STATUS_INVALID_MODEL,
                             "domain '%s' is imported twice (opset imports %zu and %zu, versions "
                             "%" PRId64 " and %" PRId64 ")",
                             onyx__qn(&qd, domain[0] != '\0' ? domain : "ai.onnx"), first, second,
                             g->opsets[first].version, g->opsets[second].version);
    }
  }
  return ONYX_STATUS_OK;
}

static onyx_status build_initializers(builder *b) {
  const Onnx__GraphProto *gp = b->gp;
  onyx__qname qn;
  for (size_t i = 0; i < gp->n_initializer; ++i) {
    Onnx__TensorProto *tp = gp->initializer[i];
    char thing[160];
    if (tp->name == NULL || tp->name[0] == '\0') {
      return onyx__load_fail(b->ctx, ONYX_STATUS_INVALID_MODEL, "initializer %zu has no name", i);
    }
    snprintf(thing, sizeof thing, "initializer %zu '%s'", i, onyx__qn(&qn, tp->name));
    int32_t prior = onyx__graph_find_value(b->g, tp->name);
    if (prior >= 0) {
      return onyx__load_fail(b->ctx, ONYX_STATUS_INVALID_MODEL,
                             "%s: the name is defined twice (initializers %" PRId32 " and %zu)",
                             thing, prior, i);
    }
    onyx_tensor t;
    onyx_status st = onyx__tensor_from_proto(b->ctx, thing, tp, &t);
    if (st != ONYX_STATUS_OK) return st;
    int32_t v = -1;
    st = add_value(b, tp->name, &v);
    if (st != ONYX_STATUS_OK) {
      free(t.data);
      return st;
    }
    onyx__value *val = &b->g->values[v];
    val->is_initializer = true;
    val->init = t;
    val->dtype = t.dtype;
    val->rank = (int32_t)t.rank;
    memcpy(val->dims, t.dims, sizeof val->dims);
  }
  return ONYX_STATUS_OK;
}

static onyx_status build_inputs(builder *b) {
  const Onnx__GraphProto *gp = b->gp;
  onyx__graph *g = b->g;
  if (gp->n_input > 0) {
    g->inputs = calloc(gp->n_input, sizeof *g->inputs);
    if (g->inputs == NULL) return oom(b, "graph inputs");
  }
  onyx__qname qn;
  for (size_t i = 0; i < gp->n_input; ++i) {
    const Onnx__ValueInfoProto *vi = gp->input[i];
    char thing[160];
    if (vi->name == NULL || vi->name[0] == '\0') {
      return onyx__load_fail(b->ctx, ONYX_STATUS_INVALID_MODEL, "graph input %zu has no name", i);
    }
    snprintf(thing, sizeof thing, "graph input %zu '%s'", i, onyx__qn(&qn, vi->name));
    value_type t;
    onyx_status st = parse_value_type(b, thing, vi->type, true, &t);
    if (st != ONYX_STATUS_OK) return st;
    int32_t v = onyx__graph_find_value(g, vi->name);
    if (v >= 0 && g->values[v].is_initializer) {
      /* An input with a default value: the initializer is what Onyx uses. */
      const onyx__value *init = &g->values[v];
      if (t.dtype != ONYX_DTYPE_UNDEFINED && t.dtype != init->dtype) {
        return onyx__load_fail(b->ctx, ONYX_STATUS_INVALID_MODEL,
                               "%s: declared %s but its initializer is %s", thing,
                               onyx__dtype_name(t.dtype), onyx__dtype_name(init->dtype));
      }
      continue;
    }
    if (v >= 0) {
      size_t first = 0;
      while (first < g->input_count && g->inputs[first] != v) ++first;
      return onyx__load_fail(b->ctx, ONYX_STATUS_INVALID_MODEL,
                             "%s: the name is listed twice (graph inputs %zu and %zu)", thing,
                             first, i);
    }
    st = add_value(b, vi->name, &v);
    if (st != ONYX_STATUS_OK) return st;
    g->values[v].is_input = true;
    merge_type(&g->values[v], &t);
    g->inputs[g->input_count++] = v;
  }
  return ONYX_STATUS_OK;
}

/* The message for a node input that names no value defined so far. */
static onyx_status undefined_input(builder *b, const char *desc, size_t node_index, size_t input,
                                   const char *name) {
  const Onnx__GraphProto *gp = b->gp;
  onyx__qname qn;
  for (size_t k = node_index; k < gp->n_node; ++k) {
    const Onnx__NodeProto *np = gp->node[k];
    for (size_t j = 0; j < np->n_output; ++j) {
      if (strcmp(np->output[j], name) != 0) continue;
      if (k == node_index) {
        return onyx__load_fail(b->ctx, ONYX_STATUS_INVALID_MODEL,
                               "%s: input %zu '%s' is an output of the same node (a cycle)", desc,
                               input, onyx__qn(&qn, name));
      }
      char later[320];
      describe_node(later, sizeof later, k, np);
      return onyx__load_fail(b->ctx, ONYX_STATUS_INVALID_MODEL,
                             "%s: input %zu '%s' is produced by the later %s; nodes must be in "
                             "topological order",
                             desc, input, onyx__qn(&qn, name), later);
    }
  }
  return onyx__load_fail(b->ctx, ONYX_STATUS_INVALID_MODEL,
                         "%s: input %zu '%s' is not defined by a graph input, an initializer or an "
                         "earlier node",
                         desc, input, onyx__qn(&qn, name));
}

static onyx_status build_node(builder *b, size_t k) {
  const Onnx__GraphProto *gp = b->gp;
  onyx__graph *g = b->g;
  const Onnx__NodeProto *np = gp->node[k];
  onyx__node *n = &g->nodes[k];
  g->node_count = k + 1; /* zeroed by calloc, so freeing a partial node is safe */
  char desc[320];
  describe_node(desc, sizeof desc, k, np);
  onyx__qname qn;

  if (np->op_type == NULL || np->op_type[0] == '\0') {
    return onyx__load_fail(b->ctx, ONYX_STATUS_INVALID_MODEL, "%s: has no op_type", desc);
  }
  const char *domain = normalise_domain(np->domain);
  n->name = onyx__strdup(np->name);
  n->op_type = onyx__strdup(np->op_type);
  n->domain = onyx__strdup(domain);
  if (n->name == NULL || n->op_type == NULL || n->domain == NULL) return oom(b, "node names");

  const sorted_key *opset = find_key(b->opset_keys, g->opset_count, domain, "");
  if (opset == NULL) {
    if (domain[0] == '\0') {
      return onyx__load_fail(b->ctx, ONYX_STATUS_INVALID_MODEL,
                             "%s: is in the ONNX domain but the model imports no ai.onnx opset",
                             desc);
    }
    return onyx__load_fail(b->ctx, ONYX_STATUS_INVALID_MODEL,
                           "%s: is in domain '%s' but the model imports no opset for it", desc,
                           onyx__qn(&qn, domain));
  }
  n->opset = g->opsets[opset->index].version;

  if (np->n_input > 0) {
    n->inputs = malloc(np->n_input * sizeof *n->inputs);
    if (n->inputs == NULL) return oom(b, "node inputs");
  }
  n->input_count = np->n_input;
  for (size_t j = 0; j < np->n_input; ++j) {
    const char *name = np->input[j];
    if (name[0] == '\0') {
      n->inputs[j] = -1;
      continue;
    }
    int32_t v = onyx__graph_find_value(g, name);
    if (v < 0) return undefined_input(b, desc, k, j, name);
    n->inputs[j] = v;
  }

  onyx_status st = onyx__attrs_from_proto(b->ctx, desc, np->attribute, np->n_attribute, &n->attrs);
  if (st != ONYX_STATUS_OK) return st;
  n->attr_count = np->n_attribute;

  if (np->n_output > 0) {
    n->outputs = malloc(np->n_output * sizeof *n->outputs);
    if (n->outputs == NULL) return oom(b, "node outputs");
  }
  n->output_count = np->n_output;
  for (size_t j = 0; j < np->n_output; ++j) {
    const char *name = np->output[j];
    if (name[0] == '\0') {
      n->outputs[j] = -1;
      continue;
    }
    int32_t v = onyx__graph_find_value(g, name);
    if (v >= 0) {
      char where[360];
      describe_definition(b, v, where, sizeof where);
      return onyx__load_fail(b->ctx, ONYX_STATUS_INVALID_MODEL,
                             "%s: output %zu '%s' is already defined as %s", desc, j,
                             onyx__qn(&qn, name), where);
    }
    st = add_value(b, name, &v);
    if (st != ONYX_STATUS_OK) return st;
    g->values[v].producer = (int32_t)k;
    n->outputs[j] = v;
  }
  return ONYX_STATUS_OK;
}

static onyx_status build_outputs(builder *b) {
  const Onnx__GraphProto *gp = b->gp;
  onyx__graph *g = b->g;
  if (gp->n_output > 0) {
    g->outputs = calloc(gp->n_output, sizeof *g->outputs);
    if (g->outputs == NULL) return oom(b, "graph outputs");
  }
  onyx__qname qn;
  for (size_t i = 0; i < gp->n_output; ++i) {
    const Onnx__ValueInfoProto *vi = gp->output[i];
    char thing[160];
    if (vi->name == NULL || vi->name[0] == '\0') {
      return onyx__load_fail(b->ctx, ONYX_STATUS_INVALID_MODEL, "graph output %zu has no name", i);
    }
    snprintf(thing, sizeof thing, "graph output %zu '%s'", i, onyx__qn(&qn, vi->name));
    int32_t v = onyx__graph_find_value(g, vi->name);
    if (v < 0) {
      return onyx__load_fail(b->ctx, ONYX_STATUS_INVALID_MODEL,
                             "%s: is not defined by any node, graph input or initializer", thing);
    }
    if (g->values[v].is_output) {
      size_t first = 0;
      while (first < g->output_count && g->outputs[first] != v) ++first;
      return onyx__load_fail(b->ctx, ONYX_STATUS_INVALID_MODEL,
                             "%s: the name is listed twice (graph outputs %zu and %zu)", thing,
                             first, i);
    }
    value_type t;
    onyx_status st = parse_value_type(b, thing, vi->type, true, &t);
    if (st != ONYX_STATUS_OK) return st;
    onyx__value *val = &g->values[v];
    val->is_output = true;
    if (!val->is_initializer) merge_type(val, &t);
    g->outputs[g->output_count++] = v;
  }
  return ONYX_STATUS_OK;
}

static onyx_status apply_value_info(builder *b) {
  const Onnx__GraphProto *gp = b->gp;
  onyx__qname qn;
  for (size_t i = 0; i < gp->n_value_info; ++i) {
    const Onnx__ValueInfoProto *vi = gp->value_info[i];
    if (vi->name == NULL || vi->name[0] == '\0') continue;
    int32_t v = onyx__graph_find_value(b->g, vi->name);
    /* value_info is a hint: entries for names the graph lacks are stale, not wrong. */
    if (v < 0 || b->g->values[v].is_initializer) continue;
    char thing[160];
    snprintf(thing, sizeof thing, "value_info %zu '%s'", i, onyx__qn(&qn, vi->name));
    value_type t;
    onyx_status st = parse_value_type(b, thing, vi->type, false, &t);
    if (st != ONYX_STATUS_OK) return st;
    merge_type(&b->g->values[v], &t);
  }
  return ONYX_STATUS_OK;
}

static onyx_status build_graph(builder *b, Onnx__ModelProto *m) {
  onyx__graph *g = b->g;
  g->ir_version = m->has_ir_version ? m->ir_version : 0;
  onyx_status st = build_opsets(b, m);
  if (st != ONYX_STATUS_OK) return st;
  const Onnx__GraphProto *gp = m->graph;
  if (gp == NULL)
    return onyx__load_fail(b->ctx, ONYX_STATUS_INVALID_MODEL, "the model has no graph");
  b->gp = gp;
  g->name = onyx__strdup(gp->name);
  if (g->name == NULL) return oom(b, "graph name");
  if (gp->n_sparse_initializer > 0) {
    return onyx__load_fail(b->ctx, ONYX_STATUS_UNSUPPORTED,
                           "the graph has %zu sparse initializers; sparse tensors are not "
                           "supported",
                           gp->n_sparse_initializer);
  }
  /* Calls stay ordinary nodes here; the session inlines those no provider claims. */
  st = onyx__functions_load(b->ctx, m, &g->functions);
  if (st != ONYX_STATUS_OK) return st;

  /* Every value is an initializer, a graph input or a node output: size both tables
   * for all of them now so that indices stay stable and the index never grows. */
  size_t total = gp->n_initializer + gp->n_input;
  for (size_t k = 0; k < gp->n_node; ++k) total += gp->node[k]->n_output;
  if (total > (size_t)INT32_MAX || gp->n_node > (size_t)INT32_MAX) {
    return onyx__load_fail(b->ctx, ONYX_STATUS_UNSUPPORTED,
                           "the graph has %zu nodes and up to %zu values; the limit is %d each",
                           gp->n_node, total, INT32_MAX);
  }
  b->value_cap = total;
  size_t cap = 16;
  while (cap < 2 * total) cap *= 2;
  g->values = calloc(total > 0 ? total : 1, sizeof *g->values);
  g->value_index = malloc(cap * sizeof *g->value_index);
  if (g->values == NULL || g->value_index == NULL) return oom(b, "value tables");
  memset(g->value_index, 0xff, cap * sizeof *g->value_index); /* every slot -1 */
  g->value_index_cap = cap;
  if (gp->n_node > 0) {
    g->nodes = calloc(gp->n_node, sizeof *g->nodes);
    if (g->nodes == NULL) return oom(b, "nodes");
  }

  st = build_initializers(b);
  if (st == ONYX_STATUS_OK) st = build_inputs(b);
  for (size_t k = 0; st == ONYX_STATUS_OK && k < gp->n_node; ++k) st = build_node(b, k);
  if (st == ONYX_STATUS_OK) st = build_outputs(b);
  if (st == ONYX_STATUS_OK) st = apply_value_info(b);
  return st;
}

static const char *model_field_name(uint32_t field) {
  switch (field) {
  case 1:
    return "ir_version";
  case 2:
    return "producer_name";
  case 3:
    return "producer_version";
  case 4:
    return "domain";
  case 5:
    return "model_version";
  case 6:
    return "doc_string";
  case 7:
    return "graph";
  case 8:
    return "opset_import";
  case 14:
    return "metadata_props";
  case 20:
    return "training_info";
  case 25:
    return "functions";
  default:
    return NULL;
  }
}

static onyx_status parse_model(onyx__load_ctx *ctx, const void *bytes, size_t size,
                               Onnx__ModelProto **out) {
  static const uint8_t empty = 0;
  const uint8_t *data = size > 0 ? bytes : &empty;
  Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, size, data);
  if (m == NULL) {
    char why[192];
    onyx__protobuf_diagnose(data, size, model_field_name, why, sizeof why);
    return onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL, "not a valid ONNX model (%zu bytes): %s",
                           size, why);
  }
  *out = m;
  return ONYX_STATUS_OK;
}

static onyx_status load_parsed(onyx__load_ctx *ctx, Onnx__ModelProto *m, onyx__graph **out_graph) {
  builder b = {.ctx = ctx};
  b.g = calloc(1, sizeof *b.g);
  onyx_status st = b.g != NULL ? build_graph(&b, m) : oom(&b, "graph");
  free(b.opset_keys);
  if (st != ONYX_STATUS_OK) {
    onyx__graph_free(b.g);
    return st;
  }
  *out_graph = b.g;
  return ONYX_STATUS_OK;
}

onyx_status onyx__model_load_bytes(const void *bytes, size_t size, const char *base_dir,
                                   const char *what, onyx__graph **out_graph, char *err,
                                   size_t err_cap) {
  onyx__load_ctx ctx = {.what = what != NULL ? what : "<bytes>",
                        .base_dir = base_dir,
                        .err = err,
                        .err_cap = err_cap};
  if (err != NULL && err_cap > 0) err[0] = '\0';
  if (out_graph == NULL || (bytes == NULL && size > 0)) {
    return onyx__load_fail(&ctx, ONYX_STATUS_INVALID_ARGUMENT,
                           "bytes and out_graph must not be NULL");
  }
  if ((uint64_t)size > ONYX_MODEL_MAX_BYTES) {
    return onyx__load_fail(&ctx, ONYX_STATUS_INVALID_MODEL, "%zu bytes is over the limit of %llu",
                           size, (unsigned long long)ONYX_MODEL_MAX_BYTES);
  }
  Onnx__ModelProto *m = NULL;
  onyx_status st = parse_model(&ctx, bytes, size, &m);
  if (st == ONYX_STATUS_OK) {
    st = load_parsed(&ctx, m, out_graph);
    onnx__model_proto__free_unpacked(m, NULL);
  }
  onyx__load_ctx_release(&ctx);
  return st;
}

onyx_status onyx__model_load_file(const char *path, onyx__graph **out_graph, char *err,
                                  size_t err_cap) {
  onyx__load_ctx ctx = {.what = path != NULL ? path : "<null>", .err = err, .err_cap = err_cap};
  if (err != NULL && err_cap > 0) err[0] = '\0';
  if (path == NULL || out_graph == NULL) {
    return onyx__load_fail(&ctx, ONYX_STATUS_INVALID_ARGUMENT,
                           "path and out_graph must not be NULL");
  }
  void *bytes = NULL;
  size_t size = 0;
  onyx_status st = onyx__read_file(&ctx, path, ONYX_MODEL_MAX_BYTES, &bytes, &size);
  if (st != ONYX_STATUS_OK) return st;
  Onnx__ModelProto *m = NULL;
  st = parse_model(&ctx, bytes, size, &m);
  free(bytes); /* the parsed copy is all that is needed from here on */
  if (st != ONYX_STATUS_OK) return st;
  char *base_dir = onyx__dirname(path);
  if (base_dir == NULL) {
    st = onyx__load_fail(&ctx, ONYX_STATUS_OUT_OF_MEMORY, "out of memory");
  } else {
    ctx.base_dir = base_dir;
    st = load_parsed(&ctx, m, out_graph);
  }
  onnx__model_proto__free_unpacked(m, NULL);
  onyx__load_ctx_release(&ctx);
  free(base_dir);
  return st;
}
