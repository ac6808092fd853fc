/*
 * Host backend for mapped zones, so CPU runs grow zones in place the way a GPU does.
 *
 * Reserve is an inaccessible, unaccounted mapping (PROT_NONE, MAP_NORESERVE); growth
 * commits a granule by making it readable and writable; unmap drops its pages
 * (MADV_DONTNEED) and makes it inaccessible again, so a stale view faults instead of
 * reading recycled memory. Anonymous memory has no separate physical object, so
 * create/release/map are bookkeeping only. Pages are populated on first touch.
 */
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gov_impl.h"

typedef struct host_backend {
  onyx_gov_backend table; /* first, so the table pointer is the object */
  uint64_t granularity;
} host_backend;

static onyx_status host_granularity(void *state, uint64_t *out_bytes) {
  *out_bytes = ((const host_backend *)state)->granularity;
  return ONYX_STATUS_OK;
}

static onyx_status host_reserve(void *state, uint64_t bytes, void **out_base) {
  (void)state;
  if (bytes > SIZE_MAX) return ONYX_STATUS_OUT_OF_MEMORY;
  void *base =
      mmap(NULL, (size_t)bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return ONYX_STATUS_OUT_OF_MEMORY;
  *out_base = base;
  return ONYX_STATUS_OK;
}

static void host_unreserve(void *state, void *base, uint64_t bytes) {
  (void)state;
  munmap(base, (size_t)bytes);
}

static onyx_status host_create(void *state, uint64_t bytes, void **out_handle) {
  (void)bytes;
  *out_handle = state; /* any non-NULL token */
  return ONYX_STATUS_OK;
}

static void host_release(void *state, void *handle, uint64_t bytes) {
  (void)state;
  (void)handle;
  (void)bytes;
}

static onyx_status host_map(void *state, void *base, uint64_t offset, uint64_t bytes,
                            void *handle) {
  (void)state;
  (void)base;
  (void)offset;
  (void)bytes;
  (void)handle;
  return ONYX_STATUS_OK;
}

static onyx_status host_set_access(void *state, void *base, uint64_t offset, uint64_t bytes) {
  (void)state;
  if (mprotect((char *)base + offset, (size_t)bytes, PROT_READ | PROT_WRITE) != 0)
    return ONYX_STATUS_OUT_OF_MEMORY;
  return ONYX_STATUS_OK;
}

static void host_unmap(void *state, void *base, uint64_t offset, uint64_t bytes) {
  (void)state;
  char *at = (char *)base + offset;
  madvise(at, (size_t)bytes, MADV_DONTNEED);
  mprotect(at, (size_t)bytes, PROT_NONE);
}

onyx_status onyx_gov_host_backend_create(uint64_t granularity, onyx_gov_backend **out_backend) {
  if (out_backend == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  long page = sysconf(_SC_PAGESIZE);
  if (granularity == 0) granularity = (uint64_t)2 << 20;
  if ((granularity & (granularity - 1)) != 0 || (page > 0 && granularity < (uint64_t)page))
    return ONYX_STATUS_INVALID_ARGUMENT;
  host_backend *hb = calloc(1, sizeof *hb);
  if (hb == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  hb->granularity = granularity;
  hb->table.struct_size = (uint32_t)sizeof hb->table;
  hb->table.version = 1;
  hb->table.name = "host";
  hb->table.state = hb;
  hb->table.granularity = host_granularity;
  hb->table.reserve = host_reserve;
  hb->table.unreserve = host_unreserve;
  hb->table.create = host_create;
  hb->table.release = host_release;
  hb->table.map = host_map;
  hb->table.set_access = host_set_access;
  hb->table.unmap = host_unmap;
  hb->table.sync = NULL; /* host work is synchronous */
  *out_backend = &hb->table;
  return ONYX_STATUS_OK;
}

void onyx_gov_host_backend_destroy(onyx_gov_backend *backend) {
  free(backend); /* the table is the first member of the allocation */
}
