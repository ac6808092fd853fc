/*
 * Attribute lookup. The core hands attributes over as the model spelled them; a
 * kernel asks by name and type here so that a wrong type is reported once, with
 * the attribute's name, instead of being read as garbage.
 */
#include "cpu_impl.h"

static onyx_status cpu_attr_wrong_type(const onyx_node_info *node, const onyx_attr *a,
                                       uint32_t want, char *err, size_t err_cap) {
  return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                        "%s: attribute '%s' must be %s, got %s", node->op_type, a->name,
                        onyx__pc_attr_type_name(want), onyx__pc_attr_type_name(a->type));
}

/* INT and FLOAT reads are providers/common/pc_attr.c's, wording included. */

onyx_status onyx__cpu_attr_int(const onyx_node_info *node, const char *name, int64_t dflt,
                               int64_t *out, char *err, size_t err_cap) {
  return onyx__pc_attr_read_int(node, name, dflt, out, err, err_cap);
}

onyx_status onyx__cpu_attr_float(const onyx_node_info *node, const char *name, float dflt,
                                 float *out, char *err, size_t err_cap) {
  return onyx__pc_attr_read_float(node, name, dflt, out, err, err_cap);
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
