/*
 * The entries and kernel registration of a provider whose kernels keep the v2 table
 * shape, some of them also written as v3 definitions (the CPU and CUDA providers; a
 * third-party provider may use them too): the negotiation of the v3 factory entry and
 * of the v2 table entry, one add_table (or add, for a kernel that has a definition) per
 * kernel with a message naming the kernel that was refused, and the bridges that let a
 * definition reuse a table's create and supports. Source compiled into each
 * provider, hidden; the two entries are declared here with default visibility.
 */
#ifndef ONYX_PC_FACTORY_H
#define ONYX_PC_FACTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onyx_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The exported entries (ONYX_PROVIDER_FACTORY_SYMBOL, ONYX_PROVIDER_ENTRY_SYMBOL),
 * declared once with default visibility; the provider's own file defines the ones it
 * exports, usually as a call of onyx__pc_factory_negotiate / onyx__pc_table_negotiate. */
__attribute__((visibility("default"))) onyx_status
onyx_provider_factory_entry(uint32_t core_max_abi, uint32_t *out_abi,
                            const onyx_provider_factory **out_factory);
__attribute__((visibility("default"))) onyx_status
onyx_provider_entry(uint32_t core_max_abi, uint32_t *out_abi,
                    const onyx_provider_table **out_table);

#ifndef __cplusplus
/* The entry points must match the published typedefs exactly. */
_Static_assert(_Generic(&onyx_provider_factory_entry, onyx_provider_factory_fn : 1, default : 0),
               "onyx_provider_factory_entry must have the onyx_provider_factory_fn type");
_Static_assert(_Generic(&onyx_provider_entry, onyx_provider_entry_fn : 1, default : 0),
               "onyx_provider_entry must have the onyx_provider_entry_fn type");
#endif

/* The factory entry's answer: ABI v3 in *out_abi, and `factory` when the core speaks
 * v3 or later; an older core gets ABI_MISMATCH (and 3, the version it would need).
 * INVALID_ARGUMENT for a NULL out pointer. */
onyx_status onyx__pc_factory_negotiate(const onyx_provider_factory *factory, uint32_t core_max_abi,
                                       uint32_t *out_abi,
                                       const onyx_provider_factory **out_factory);

/* The v2 entry's answer: this build's ONYX_ABI_VERSION (2) in *out_abi, and `table`
 * when the core speaks it; an older core gets ABI_MISMATCH. INVALID_ARGUMENT for a
 * NULL out pointer. */
onyx_status onyx__pc_table_negotiate(const onyx_provider_table *table, uint32_t core_max_abi,
                                     uint32_t *out_abi, const onyx_provider_table **out_table);

/* reg->add_table for each of the `count` tables, in order. On a refusal: says "<who>:
 * kernel <op> was refused" through err (who: "cpu", "cuda: device 1") and returns the
 * registry's status; the tables after it are not offered. */
onyx_status onyx__pc_add_tables(onyx_kernel_registry *reg, const onyx_kernel_table *const *tables,
                                size_t count, const char *who, onyx_sink *err);

/* As onyx__pc_add_tables, for a provider some of whose kernels are v3 definitions: in
 * the tables' order, a table that one of `defs` replaces (same domain, op_type and
 * since_opset) is registered as that definition (reg->add) instead; definitions no table
 * names follow the tables. A v2 entry keeps offering the tables themselves. */
onyx_status onyx__pc_add_kernels(onyx_kernel_registry *reg, const onyx_kernel_table *const *tables,
                                 size_t count, const onyx_kernel_def *const *defs, size_t def_count,
                                 const char *who, onyx_sink *err);

/* A v3 create or supports written over the v2 one: its reason (err buffer) goes to the
 * sink, its status is returned unchanged (supports: OK, or UNSUPPORTED when it
 * declines). */
typedef onyx_status (*onyx__pc_create_v2_fn)(void *provider_state, const onyx_node_info *node,
                                             void **out_state, char *err, size_t err_cap);
typedef bool (*onyx__pc_supports_v2_fn)(const onyx_node_info *node, char *reason, size_t cap);
onyx_status onyx__pc_create_via_v2(onyx__pc_create_v2_fn create, void *instance,
                                   const onyx_node_info *node, void **out_state, onyx_sink *err);
onyx_status onyx__pc_supports_via_v2(onyx__pc_supports_v2_fn supports, const onyx_node_info *node,
                                     onyx_sink *err);

#ifdef __cplusplus
}
#endif

#endif /* ONYX_PC_FACTORY_H */
