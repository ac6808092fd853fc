/*
 * Backends for the governor's mapped zones that the core assembles itself.
 *
 * The carve backend exists because a KV tensor is one dense view, yet its parts
 * (one per head, or per batch row) must grow separately: each part is a zone, and
 * the zones are slices of one reservation laid out exactly as the view's strides.
 */
#include <stdlib.h>
#include <string.h>

#include "checked_math.h"
#include "zone_backends_impl.h"

static onyx_status carve_granularity(void *state, uint64_t *out) {
  onyx__carve_backend *c = state;
  return c->parent->granularity(c->parent->state, out);
}

static onyx_status carve_reserve(void *state, uint64_t bytes, void **out_base) {
  onyx__carve_backend *c = state;
  if (bytes != c->slice_bytes || c->next + bytes > c->total_bytes) return ONYX_STATUS_OUT_OF_MEMORY;
  *out_base = c->base + c->next;
  c->next += bytes;
  return ONYX_STATUS_OK;
}

static void carve_unreserve(void *state, void *base, uint64_t bytes) {
  /* Slices return with the whole range in onyx__carve_backend_fini. */
  (void)state;
  (void)base;
  (void)bytes;
}

static onyx_status carve_create(void *state, uint64_t bytes, void **out_handle) {
  onyx__carve_backend *c = state;
  return c->parent->create(c->parent->state, bytes, out_handle);
}

static void carve_release(void *state, void *handle, uint64_t bytes) {
  onyx__carve_backend *c = state;
  c->parent->release(c->parent->state, handle, bytes);
}

static onyx_status carve_map(void *state, void *base, uint64_t offset, uint64_t bytes,
                             void *handle) {
  onyx__carve_backend *c = state;
  return c->parent->map(c->parent->state, base, offset, bytes, handle);
}

static onyx_status carve_set_access(void *state, void *base, uint64_t offset, uint64_t bytes) {
  onyx__carve_backend *c = state;
  return c->parent->set_access(c->parent->state, base, offset, bytes);
}

static void carve_unmap(void *state, void *base, uint64_t offset, uint64_t bytes) {
  onyx__carve_backend *c = state;
  c->parent->unmap(c->parent->state, base, offset, bytes);
}

static onyx_status carve_sync(void *state) {
  onyx__carve_backend *c = state;
  return c->parent->sync ? c->parent->sync(c->parent->state) : ONYX_STATUS_OK;
}

onyx_status onyx__carve_backend_init(onyx__carve_backend *c, const onyx_gov_backend *parent,
                                     uint64_t slice_bytes, uint64_t slices) {
  memset(c, 0, sizeof *c);
  uint64_t total = 0;
  if (slices == 0 || onyx__ckd_mul_u64(&total, slice_bytes, slices))
    return ONYX_STATUS_INVALID_ARGUMENT;
  void *base = NULL;
  onyx_status st = parent->reserve(parent->state, total, &base);
  if (st != ONYX_STATUS_OK) return st;
  c->parent = parent;
  c->base = base;
  c->total_bytes = total;
  c->slice_bytes = slice_bytes;
  c->table = (onyx_gov_backend){
      .struct_size = sizeof(onyx_gov_backend),
      .version = 1,
      .name = parent->name,
      .state = c,
      .granularity = carve_granularity,
      .reserve = carve_reserve,
      .unreserve = carve_unreserve,
      .create = carve_create,
      .release = carve_release,
      .map = carve_map,
      .set_access = carve_set_access,
      .unmap = carve_unmap,
      .sync = carve_sync,
  };
  return ONYX_STATUS_OK;
}

void onyx__carve_backend_fini(onyx__carve_backend *c) {
  if (c->base) c->parent->unreserve(c->parent->state, c->base, c->total_bytes);
  memset(c, 0, sizeof *c);
}

/* ------------------------------------------------------------ provider VMM */

typedef struct vmm_backend {
  onyx_gov_backend table;
  onyx__provider *provider;
} vmm_backend;

static const onyx_vmm_table *VMM(void *backend) {
  return onyx__dev_vmm(((vmm_backend *)backend)->provider);
}
static void *PSTATE(void *backend) { return ((vmm_backend *)backend)->provider->state; }

static onyx_status vmm_granularity(void *s, uint64_t *out) {
  return VMM(s)->granularity(PSTATE(s), out);
}
static onyx_status vmm_reserve(void *s, uint64_t bytes, void **out) {
  return VMM(s)->reserve(PSTATE(s), bytes, out);
}
static void vmm_unreserve(void *s, void *base, uint64_t bytes) {
  VMM(s)->unreserve(PSTATE(s), base, bytes);
}
static onyx_status vmm_create(void *s, uint64_t bytes, void **out) {
  return VMM(s)->create(PSTATE(s), bytes, out);
}
static void vmm_release(void *s, void *handle, uint64_t bytes) {
  VMM(s)->release(PSTATE(s), handle, bytes);
}
static onyx_status vmm_map(void *s, void *base, uint64_t off, uint64_t bytes, void *handle) {
  return VMM(s)->map(PSTATE(s), base, off, bytes, handle);
}
static onyx_status vmm_set_access(void *s, void *base, uint64_t off, uint64_t bytes) {
  return VMM(s)->set_access(PSTATE(s), base, off, bytes);
}
static void vmm_unmap(void *s, void *base, uint64_t off, uint64_t bytes) {
  VMM(s)->unmap(PSTATE(s), base, off, bytes);
}
static onyx_status vmm_sync(void *s) { return onyx__stream_sync(((vmm_backend *)s)->provider); }

onyx_gov_backend *onyx__vmm_backend_create(onyx__provider *p) {
  const onyx_vmm_table *v = onyx__dev_vmm(p);
  if (v == NULL) return NULL;
  if (!v->granularity || !v->reserve || !v->unreserve || !v->create || !v->release || !v->map ||
      !v->set_access || !v->unmap)
    return NULL;
  vmm_backend *b = calloc(1, sizeof *b);
  if (b == NULL) return NULL;
  b->provider = p;
  b->table = (onyx_gov_backend){.struct_size = sizeof(onyx_gov_backend),
                                .version = 1,
                                .name = "device-vmm",
                                .state = b,
                                .granularity = vmm_granularity,
                                .reserve = vmm_reserve,
                                .unreserve = vmm_unreserve,
                                .create = vmm_create,
                                .release = vmm_release,
                                .map = vmm_map,
                                .set_access = vmm_set_access,
                                .unmap = vmm_unmap,
                                .sync = vmm_sync};
  return &b->table;
}

void onyx__vmm_backend_destroy(onyx_gov_backend *backend) { free(backend ? backend->state : NULL); }
