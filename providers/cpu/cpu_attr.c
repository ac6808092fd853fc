/*
 * Attribute lookup. The core hands attributes over as the model spelled them; a
 * kernel asks by name and type here so that a wrong type is reported once, with
 * the attribute's name, instead of being read as garbage.
 */
#include "cpu_impl.h"

static const char *cpu_attr_type_name(uint32_t type) {
  switch (type) {
  case ONYX_ATTR_FLOAT:
    return "FLOAT";
  case ONYX_ATTR_INT:
    return "INT";
  case ONYX_ATTR_STRING:
    return "STRING";
  case ONYX_ATTR_TENSOR:
    return "TENSOR";
  case ONYX_ATTR_FLOATS:
    return "FLOATS";
  case ONYX_ATTR_INTS:
    return "INTS";
  case ONYX_ATTR_STRINGS:
    return "STRINGS";
  default:
    return "UNDEFINED";
  }
}

static onyx_status cpu_attr_wrong_type(const onyx_node_info *node, const onyx_attr *a,
                                       uint32_t want, char *err, size_t err_cap) {
  return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                        "%s: attribute '%s' must be %s, got %s", node->op_type, a->name,
                        cpu_attr_type_name(want), cpu_attr_type_name(a->type));
}

/* Lookups go through providers/common/pc_attr.c; the wording of a wrong type is ours. */

onyx_status onyx__cpu_attr_int(const onyx_node_info *node, const char *name, int64_t dflt,
                               int64_t *out, char *err, size_t err_cap) {
  if (onyx__pc_attr_int(node, name, dflt, out)) return ONYX_STATUS_OK;
  return cpu_attr_wrong_type(node, onyx__pc_attr_find(node, name), ONYX_ATTR_INT, err, err_cap);
}

onyx_status onyx__cpu_attr_float(const onyx_node_info *node, const char *name, float dflt,
                                 float *out, char *err, size_t err_cap) {
  if (onyx__pc_attr_float(node, name, dflt, out)) return ONYX_STATUS_OK;
  return cpu_attr_wrong_type(node, onyx__pc_attr_find(node, name), ONYX_ATTR_FLOAT, err, err_cap);
}

onyx_status onyx__cpu_attr_ints(const onyx_node_info *node, const char *name, const int64_t **out,
                                size_t *out_count, bool *out_present, char *err, size_t err_cap) {
  const onyx_attr *a = onyx__cpu_attr_find(node, name);
  *out = NULL;
  *out_count = 0;
  if (out_present != NULL) *out_present = false;
  if (a == NULL) return ONYX_STATUS_OK;
  if (a->type != ONYX_ATTR_INTS) return cpu_attr_wrong_type(node, a, ONYX_ATTR_INTS, err, err_cap);
  if (a->count > 0 && a->ints == NULL)
    return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "%s: attribute '%s' has %zu values but no data", node->op_type, a->name,
                          a->count);
  *out = a->ints;
  *out_count = a->count;
  if (out_present != NULL) *out_present = true;
  return ONYX_STATUS_OK;
}
