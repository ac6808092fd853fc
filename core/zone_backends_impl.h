/* Governor backends the core builds: slices of one reservation, and a provider's
 * device virtual memory. */
#ifndef ONYX_CORE_ZONE_BACKENDS_IMPL_H
#define ONYX_CORE_ZONE_BACKENDS_IMPL_H

#include "onyx_governor.h"
#include "provider_impl.h"

/*
 * A backend whose `reserve` hands out consecutive `slice_bytes` slices of one
 * address range that `parent` reserved up front, so that many zones lie back to
 * back and one tensor view can span them. Everything else goes to the parent.
 */
typedef struct onyx__carve_backend {
  onyx_gov_backend table; /* pass &table to zone descriptors */
  const onyx_gov_backend *parent;
  char *base; /* the parent's reservation */
  uint64_t total_bytes;
  uint64_t slice_bytes;
  uint64_t next; /* offset of the next slice to hand out */
} onyx__carve_backend;

onyx_status onyx__carve_backend_init(onyx__carve_backend *carve, const onyx_gov_backend *parent,
                                     uint64_t slice_bytes, uint64_t slices);
void onyx__carve_backend_fini(onyx__carve_backend *carve);

/* A governor backend over a provider's onyx_vmm_table (sync = the provider's sync).
 * Returns NULL when the provider has no VMM or when out of memory. */
onyx_gov_backend *onyx__vmm_backend_create(onyx__provider *provider);
void onyx__vmm_backend_destroy(onyx_gov_backend *backend);

#endif /* ONYX_CORE_ZONE_BACKENDS_IMPL_H */
