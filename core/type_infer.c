/*
 * Output dtypes for placement. Exported models rarely type their intermediate
 * values, yet placement must check kernels' type constraints; ONNX's type rules for
 * the ops below are fixed by the standard, and every other op in a decoder keeps
 * the dtype of its first typed input.
 */
#include <string.h>

#include "session_impl.h"

static const onyx_attr *find_attr(const onyx__node *n, const char *name) {
  for (size_t i = 0; i < n->attr_count; ++i)
    if (!strcmp(n->attrs[i].name, name)) return &n->attrs[i];
  return NULL;
}

static bool op_is(const onyx__node *n, const char *const *names) {
  for (; *names; ++names)
    if (!strcmp(n->op_type, *names)) return true;
  return false;
}

static uint32_t input_dtype(const onyx__node *n, const uint32_t *dtypes, size_t i) {
  return i < n->input_count && n->inputs[i] >= 0 ? dtypes[n->inputs[i]] : ONYX_DTYPE_UNDEFINED;
}

static uint32_t constant_dtype(const onyx__node *n) {
  const onyx_attr *a;
  if ((a = find_attr(n, "value")) && a->tensor) return a->tensor->dtype;
  if (find_attr(n, "value_float") || find_attr(n, "value_floats")) return ONYX_DTYPE_FLOAT32;
  if (find_attr(n, "value_int") || find_attr(n, "value_ints")) return ONYX_DTYPE_INT64;
  return ONYX_DTYPE_UNDEFINED;
}

/* The dtype of output `o` of node `n`, given its inputs' dtypes. */
static uint32_t output_dtype(const onyx__node *n, const uint32_t *dtypes, size_t o) {
  static const char *const int64_ops[] = {"Shape", "Size", "NonZero", "ArgMax", "ArgMin", NULL};
  static const char *const bool_ops[] = {
      "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not",
      "And",   "Or",   "Xor",     "IsNaN",       "IsInf",          NULL};
  if (n->domain[0] == '\0') {
    if (op_is(n, int64_ops)) return ONYX_DTYPE_INT64;
    if (op_is(n, bool_ops)) return ONYX_DTYPE_BOOL;
    if (!strcmp(n->op_type, "Cast")) {
      const onyx_attr *to = find_attr(n, "to");
      return to ? (uint32_t)to->i : ONYX_DTYPE_UNDEFINED;
    }
    if (!strcmp(n->op_type, "CastLike")) return input_dtype(n, dtypes, 1);
    if (!strcmp(n->op_type, "Constant")) return constant_dtype(n);
    if (!strcmp(n->op_type, "ConstantOfShape")) {
      const onyx_attr *v = find_attr(n, "value");
      return v && v->tensor ? v->tensor->dtype : ONYX_DTYPE_FLOAT32;
    }
    if (!strcmp(n->op_type, "Where")) return input_dtype(n, dtypes, 1);
    if (!strcmp(n->op_type, "TopK") && o == 1) return ONYX_DTYPE_INT64;
    if (!strcmp(n->op_type, "EyeLike")) {
      const onyx_attr *d = find_attr(n, "dtype");
      return d ? (uint32_t)d->i : input_dtype(n, dtypes, 0);
    }
  }
  for (size_t i = 0; i < n->input_count; ++i) {
    uint32_t d = input_dtype(n, dtypes, i);
    if (d != ONYX_DTYPE_UNDEFINED) return d;
  }
  return ONYX_DTYPE_UNDEFINED;
}

void onyx__infer_dtypes(const onyx__graph *g, uint32_t *dtypes) {
  for (size_t v = 0; v < g->value_count; ++v) dtypes[v] = g->values[v].dtype;
  for (size_t i = 0; i < g->node_count; ++i) {
    const onyx__node *n = &g->nodes[i];
    for (size_t o = 0; o < n->output_count; ++o) {
      int32_t v = n->outputs[o];
      if (v >= 0 && dtypes[v] == ONYX_DTYPE_UNDEFINED) dtypes[v] = output_dtype(n, dtypes, o);
    }
  }
}
