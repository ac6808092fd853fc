/*
 * Attribute lookup by name and type, shared by the CPU and CUDA providers (source
 * compiled into each, hidden). Each provider words its own "wrong type" message (the
 * wording is part of its tested behaviour), so these report a mismatch by returning
 * false and leave the message to the caller.
 */
#ifndef ONYX_PC_ATTR_H
#define ONYX_PC_ATTR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onyx_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The attribute called name, or NULL (also when node->attrs is NULL). Borrowed from
 * the node: valid while the node info is. */
const onyx_attr *onyx__pc_attr_find(const onyx_node_info *node, const char *name);

/* Absent: *out = dflt, true. An INT: *out = its value, true. Another type: false, *out
 * untouched. */
bool onyx__pc_attr_int(const onyx_node_info *node, const char *name, int64_t dflt, int64_t *out);

/* The same for a FLOAT. */
bool onyx__pc_attr_float(const onyx_node_info *node, const char *name, float dflt, float *out);

#ifdef __cplusplus
}
#endif

#endif /* ONYX_PC_ATTR_H */
