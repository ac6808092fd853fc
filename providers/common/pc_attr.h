/*
 * Attribute lookup by name and type, shared by the CPU and CUDA providers (source
 * compiled into each, hidden). The bool lookups report a mismatch by returning false
 * and leave the message to the caller; the onyx__pc_attr_read_* ones word it themselves
 * (one wording for every kernel that uses them).
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

/* The ONNX name of an attribute type for messages ("INT", "FLOATS"; "UNDEFINED" past
 * the known ones). */
const char *onyx__pc_attr_type_name(uint32_t type);

/* For create(): absent → *out = dflt; an INT (FLOAT) → its value; another type →
 * INVALID_ARGUMENT with "<op>: attribute '<name>' must be INT, got FLOATS" in err
 * (err-style: NULL or cap 0 for none), *out untouched. */
onyx_status onyx__pc_attr_read_int(const onyx_node_info *node, const char *name, int64_t dflt,
                                   int64_t *out, char *err, size_t err_cap);
onyx_status onyx__pc_attr_read_float(const onyx_node_info *node, const char *name, float dflt,
                                     float *out, char *err, size_t err_cap);

/* Whether the STRING attribute called name is `expect` byte for byte; absent counts as
 * equal, another type as different. */
bool onyx__pc_attr_string_is(const onyx_node_info *node, const char *name, const char *expect);

#ifdef __cplusplus
}
#endif

#endif /* ONYX_PC_ATTR_H */
