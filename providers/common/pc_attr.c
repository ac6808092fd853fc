/*
 * Attribute lookup shared by the providers: one loop over the node's attributes, one
 * place deciding what "absent" and "another type" mean.
 */
#include "pc_attr.h"

#include <string.h>

#include "pc_msg.h"

const onyx_attr *onyx__pc_attr_find(const onyx_node_info *node, const char *name) {
  if (node->attrs == NULL) return NULL;
  for (size_t i = 0; i < node->attr_count; ++i)
    if (node->attrs[i].name != NULL && strcmp(node->attrs[i].name, name) == 0)
      return &node->attrs[i];
  return NULL;
}

bool onyx__pc_attr_int(const onyx_node_info *node, const char *name, int64_t dflt, int64_t *out) {
  const onyx_attr *a = onyx__pc_attr_find(node, name);
  if (a == NULL) {
    *out = dflt;
    return true;
  }
  if (a->type != ONYX_ATTR_INT) return false;
  *out = a->i;
  return true;
}

bool onyx__pc_attr_float(const onyx_node_info *node, const char *name, float dflt, float *out) {
  const onyx_attr *a = onyx__pc_attr_find(node, name);
  if (a == NULL) {
    *out = dflt;
    return true;
  }
  if (a->type != ONYX_ATTR_FLOAT) return false;
  *out = a->f;
  return true;
}

const char *onyx__pc_attr_type_name(uint32_t type) {
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

/* The message of a read that found another type (the attribute is present). */
static onyx_status attr_wrong_type(const onyx_node_info *node, const char *name, uint32_t want,
                                   char *err, size_t err_cap) {
  const onyx_attr *a = onyx__pc_attr_find(node, name);
  return onyx__pc_fail(
      err, err_cap, ONYX_STATUS_INVALID_ARGUMENT, "%s: attribute '%s' must be %s, got %s",
      node->op_type != NULL ? node->op_type : "node", name, onyx__pc_attr_type_name(want),
      onyx__pc_attr_type_name(a != NULL ? a->type : ONYX_ATTR_UNDEFINED));
}

onyx_status onyx__pc_attr_read_int(const onyx_node_info *node, const char *name, int64_t dflt,
                                   int64_t *out, char *err, size_t err_cap) {
  if (onyx__pc_attr_int(node, name, dflt, out)) return ONYX_STATUS_OK;
  return attr_wrong_type(node, name, ONYX_ATTR_INT, err, err_cap);
}

onyx_status onyx__pc_attr_read_float(const onyx_node_info *node, const char *name, float dflt,
                                     float *out, char *err, size_t err_cap) {
  if (onyx__pc_attr_float(node, name, dflt, out)) return ONYX_STATUS_OK;
  return attr_wrong_type(node, name, ONYX_ATTR_FLOAT, err, err_cap);
}

bool onyx__pc_attr_string_is(const onyx_node_info *node, const char *name, const char *expect) {
  const onyx_attr *a = onyx__pc_attr_find(node, name);
  if (a == NULL) return true;
  return a->type == ONYX_ATTR_STRING && a->s != NULL && a->s_len == strlen(expect) &&
         memcmp(a->s, expect, a->s_len) == 0;
}
