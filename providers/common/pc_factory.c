/*
 * The entries' negotiation and the registration of kernel tables and definitions,
 * written once for the providers whose kernels keep the v2 table shape.
 */
#include "pc_factory.h"

#include <string.h>

onyx_status onyx__pc_factory_negotiate(const onyx_provider_factory *factory, uint32_t core_max_abi,
                                       uint32_t *out_abi,
                                       const onyx_provider_factory **out_factory) {
  if (out_abi == NULL || out_factory == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  *out_abi = ONYX_ABI_V3;
  if (core_max_abi < ONYX_ABI_V3) return ONYX_STATUS_ABI_MISMATCH;
  *out_factory = factory;
  return ONYX_STATUS_OK;
}

onyx_status onyx__pc_table_negotiate(const onyx_provider_table *table, uint32_t core_max_abi,
                                     uint32_t *out_abi, const onyx_provider_table **out_table) {
  if (out_abi == NULL || out_table == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  *out_abi = ONYX_ABI_VERSION;
  if (core_max_abi < ONYX_ABI_VERSION) return ONYX_STATUS_ABI_MISMATCH;
  *out_table = table;
  return ONYX_STATUS_OK;
}

onyx_status onyx__pc_add_tables(onyx_kernel_registry *reg, const onyx_kernel_table *const *tables,
                                size_t count, const char *who, onyx_sink *err) {
  return onyx__pc_add_kernels(reg, tables, count, NULL, 0, who, err);
}

/* The definition that stands in for table t under v3, or NULL. */
static const onyx_kernel_def *replacement(const onyx_kernel_table *t,
                                          const onyx_kernel_def *const *defs, size_t def_count) {
  if (t == NULL || t->domain == NULL || t->op_type == NULL) return NULL; /* the core refuses it */
  for (size_t i = 0; i < def_count; ++i)
    if (!strcmp(defs[i]->domain, t->domain) && !strcmp(defs[i]->op_type, t->op_type) &&
        defs[i]->since_opset == t->since_opset)
      return defs[i];
  return NULL;
}

static onyx_status refused(onyx_status st, const char *who, const char *op, onyx_sink *err) {
  err->set_error(err, "%s: kernel %s was refused", who, op);
  return st;
}

onyx_status onyx__pc_add_kernels(onyx_kernel_registry *reg, const onyx_kernel_table *const *tables,
                                 size_t count, const onyx_kernel_def *const *defs, size_t def_count,
                                 const char *who, onyx_sink *err) {
  for (size_t i = 0; i < count; ++i) {
    const onyx_kernel_def *d = replacement(tables[i], defs, def_count);
    onyx_status st = d != NULL ? reg->add(reg, d) : reg->add_table(reg, tables[i]);
    if (st != ONYX_STATUS_OK) return refused(st, who, tables[i]->op_type, err);
  }
  for (size_t i = 0; i < def_count; ++i) {
    bool named = false;
    for (size_t k = 0; k < count && !named; ++k)
      named = replacement(tables[k], &defs[i], 1) != NULL;
    if (named) continue;
    onyx_status st = reg->add(reg, defs[i]);
    if (st != ONYX_STATUS_OK) return refused(st, who, defs[i]->op_type, err);
  }
  return ONYX_STATUS_OK;
}

onyx_status onyx__pc_create_via_v2(onyx__pc_create_v2_fn create, void *instance,
                                   const onyx_node_info *node, void **out_state, onyx_sink *err) {
  char msg[512] = "";
  onyx_status st = create(instance, node, out_state, msg, sizeof msg);
  if (st != ONYX_STATUS_OK && msg[0]) err->set_error(err, "%s", msg);
  return st;
}

onyx_status onyx__pc_supports_via_v2(onyx__pc_supports_v2_fn supports, const onyx_node_info *node,
                                     onyx_sink *err) {
  char why[512] = "";
  if (supports(node, why, sizeof why)) return ONYX_STATUS_OK;
  if (why[0]) err->set_error(err, "%s", why);
  return ONYX_STATUS_UNSUPPORTED;
}
