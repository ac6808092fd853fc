/*
 * Attribute lookup shared by the providers: one loop over the node's attributes, one
 * place deciding what "absent" and "another type" mean.
 */
#include "pc_attr.h"

#include <string.h>

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
