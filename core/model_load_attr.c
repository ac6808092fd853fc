/*
 * AttributeProto → onyx_attr. The graph owns everything an attr points to (names,
 * strings, arrays, TENSOR values with their data), so kernels can keep the pointers
 * from create to destroy. Kinds the ABI cannot carry (subgraphs, lists of tensors,
 * sparse tensors, type protos) are refused by name rather than dropped, because a node
 * that silently lost an attribute would compute something else.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_load_impl.h"

static const char *attr_type_name(int type) {
  switch (type) {
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
    return "FLOAT";
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
    return "INT";
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
    return "STRING";
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR:
    return "TENSOR";
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH:
    return "GRAPH";
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR:
    return "SPARSE_TENSOR";
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO:
    return "TYPE_PROTO";
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
    return "FLOATS";
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
    return "INTS";
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS:
    return "STRINGS";
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS:
    return "TENSORS";
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS:
    return "GRAPHS";
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSORS:
    return "SPARSE_TENSORS";
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTOS:
    return "TYPE_PROTOS";
  default:
    return NULL;
  }
}

/* An attribute written before `type` was mandatory says what it is by the field it
 * sets; UNDEFINED when it sets none that this loader parses. */
static int infer_type(const Onnx__AttributeProto *a) {
  if (a->has_f) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
  if (a->has_i) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
  if (a->has_s) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
  if (a->t != NULL) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
  if (a->n_floats > 0) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
  if (a->n_ints > 0) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
  if (a->n_strings > 0) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS;
  if (a->n_tensors > 0) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS;
  return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED;
}

static char *copy_bytes(const ProtobufCBinaryData *b) {
  char *s = malloc(b->len + 1);
  if (s == NULL) return NULL;
  if (b->len > 0) memcpy(s, b->data, b->len);
  s[b->len] = '\0';
  return s;
}

static void attr_clear(onyx_attr *a) {
  onyx__free_const(a->name);
  onyx__free_const(a->s);
  onyx__free_const(a->floats);
  onyx__free_const(a->ints);
  if (a->strings != NULL) {
    for (size_t j = 0; j < a->count; ++j) onyx__free_const(a->strings[j]);
    onyx__free_const(a->strings);
  }
  if (a->tensor != NULL) {
    onyx__free_const(a->tensor->data);
    onyx__free_const(a->tensor);
  }
  memset(a, 0, sizeof *a);
}

void onyx__attrs_free(onyx_attr *attrs, size_t count) {
  if (attrs == NULL) return;
  for (size_t i = 0; i < count; ++i) attr_clear(&attrs[i]);
  free(attrs);
}

/* Fills `out` (zeroed, name set) from `a`; on failure `out` may hold partial
 * allocations, which attr_clear releases. */
static onyx_status convert_one(onyx__load_ctx *ctx, const char *desc, Onnx__AttributeProto *a,
                               onyx_attr *out) {
  int type = a->has_type ? (int)a->type : ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED;
  if (type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED) type = infer_type(a);
  const char *type_name = attr_type_name(type);
  switch (type) {
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED:
    return onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL,
                           "%s: has no type and no value this loader reads (a subgraph, sparse "
                           "tensor or type proto?)",
                           desc);
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
    out->f = a->f;
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
    out->i = a->i;
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING: {
    char *s = copy_bytes(&a->s);
    if (s == NULL)
      return onyx__load_fail(ctx, ONYX_STATUS_OUT_OF_MEMORY, "%s: out of memory", desc);
    out->s = s;
    out->s_len = a->s.len;
    break;
  }
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: {
    if (a->t == NULL) {
      return onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL,
                             "%s: type is TENSOR but no tensor is set", desc);
    }
    onyx_tensor *t = malloc(sizeof *t);
    if (t == NULL)
      return onyx__load_fail(ctx, ONYX_STATUS_OUT_OF_MEMORY, "%s: out of memory", desc);
    onyx_status st = onyx__tensor_from_proto(ctx, desc, a->t, t);
    if (st != ONYX_STATUS_OK) {
      free(t);
      return st;
    }
    out->tensor = t;
    break;
  }
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
    out->count = a->n_floats;
    if (a->n_floats > 0) {
      float *v = malloc(a->n_floats * sizeof *v);
      if (v == NULL)
        return onyx__load_fail(ctx, ONYX_STATUS_OUT_OF_MEMORY, "%s: out of memory", desc);
      memcpy(v, a->floats, a->n_floats * sizeof *v);
      out->floats = v;
    }
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
    out->count = a->n_ints;
    if (a->n_ints > 0) {
      int64_t *v = malloc(a->n_ints * sizeof *v);
      if (v == NULL)
        return onyx__load_fail(ctx, ONYX_STATUS_OUT_OF_MEMORY, "%s: out of memory", desc);
      memcpy(v, a->ints, a->n_ints * sizeof *v);
      out->ints = v;
    }
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS:
    if (a->n_strings > 0) {
      char **v = calloc(a->n_strings, sizeof *v);
      if (v == NULL)
        return onyx__load_fail(ctx, ONYX_STATUS_OUT_OF_MEMORY, "%s: out of memory", desc);
      out->strings = (const char *const *)v;
      out->count = a->n_strings; /* set first: attr_clear frees the filled prefix */
      for (size_t j = 0; j < a->n_strings; ++j) {
        v[j] = copy_bytes(&a->strings[j]);
        if (v[j] == NULL) {
          return onyx__load_fail(ctx, ONYX_STATUS_OUT_OF_MEMORY, "%s: out of memory", desc);
        }
      }
    }
    break;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH:
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS:
    return onyx__load_fail(ctx, ONYX_STATUS_UNSUPPORTED,
                           "%s: is a %s attribute; subgraphs (If, Loop, Scan, ...) are not "
                           "supported",
                           desc, type_name);
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS:
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR:
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSORS:
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO:
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTOS:
    return onyx__load_fail(ctx, ONYX_STATUS_UNSUPPORTED,
                           "%s: is a %s attribute, which Onyx does not support", desc, type_name);
  default:
    return onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL, "%s: attribute type %d is not defined",
                           desc, type);
  }
  out->type = (uint32_t)type;
  return ONYX_STATUS_OK;
}

typedef struct named_index {
  const char *name;
  size_t index;
} named_index;

static int compare_named(const void *a, const void *b) {
  const named_index *x = a;
  const named_index *y = b;
  int c = strcmp(x->name, y->name);
  if (c != 0) return c;
  return x->index < y->index ? -1 : x->index > y->index;
}

/* Sorting keeps the check O(n log n) for a hostile node with many attributes. */
static onyx_status check_unique_names(onyx__load_ctx *ctx, const char *node_desc,
                                      const onyx_attr *attrs, size_t count) {
  if (count < 2) return ONYX_STATUS_OK;
  named_index *sorted = malloc(count * sizeof *sorted);
  if (sorted == NULL) {
    return onyx__load_fail(ctx, ONYX_STATUS_OUT_OF_MEMORY, "%s: out of memory", node_desc);
  }
  for (size_t i = 0; i < count; ++i) sorted[i] = (named_index){attrs[i].name, i};
  qsort(sorted, count, sizeof *sorted, compare_named);
  onyx_status st = ONYX_STATUS_OK;
  for (size_t i = 1; i < count; ++i) {
    if (strcmp(sorted[i - 1].name, sorted[i].name) == 0) {
      onyx__qname qn;
      st = onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL,
                           "%s: attribute '%s' appears twice (attributes %zu and %zu)", node_desc,
                           onyx__qn(&qn, sorted[i].name), sorted[i - 1].index, sorted[i].index);
      break;
    }
  }
  free(sorted);
  return st;
}

onyx_status onyx__attrs_from_proto(onyx__load_ctx *ctx, const char *node_desc,
                                   Onnx__AttributeProto **protos, size_t count,
                                   onyx_attr **out_attrs) {
  if (count == 0) {
    *out_attrs = NULL;
    return ONYX_STATUS_OK;
  }
  onyx_attr *attrs = calloc(count, sizeof *attrs);
  if (attrs == NULL) {
    return onyx__load_fail(ctx, ONYX_STATUS_OUT_OF_MEMORY, "%s: out of memory for %zu attributes",
                           node_desc, count);
  }
  onyx_status st = ONYX_STATUS_OK;
  size_t done = 0;
  for (; done < count; ++done) {
    Onnx__AttributeProto *a = protos[done];
    onyx__qname qn;
    char desc[448];
    if (a->name == NULL || a->name[0] == '\0') {
      st = onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL, "%s: attribute %zu has no name",
                           node_desc, done);
      break;
    }
    snprintf(desc, sizeof desc, "%s: attribute '%s'", node_desc, onyx__qn(&qn, a->name));
    char *name = onyx__strdup(a->name);
    if (name == NULL) {
      st = onyx__load_fail(ctx, ONYX_STATUS_OUT_OF_MEMORY, "%s: out of memory", desc);
      break;
    }
    attrs[done].name = name;
    st = convert_one(ctx, desc, a, &attrs[done]);
    if (st != ONYX_STATUS_OK) {
      ++done; /* attrs[done] holds partial allocations */
      break;
    }
  }
  if (st == ONYX_STATUS_OK) st = check_unique_names(ctx, node_desc, attrs, count);
  if (st != ONYX_STATUS_OK) {
    onyx__attrs_free(attrs, done);
    return st;
  }
  *out_attrs = attrs;
  return ONYX_STATUS_OK;
}
