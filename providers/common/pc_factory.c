/*
 * The entries' negotiation and the registration of v2 kernel tables, written once for
 * the providers that register their kernels as v2 tables.
 */
#include "pc_factory.h"

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
  for (size_t i = 0; i < count; ++i) {
    onyx_status st = reg->add_table(reg, tables[i]);
    if (st != ONYX_STATUS_OK) {
      err->set_error(err, "%s: kernel %s was refused", who, tables[i]->op_type);
      return st;
    }
  }
  return ONYX_STATUS_OK;
}
