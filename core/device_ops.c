/*
 * Device calls of an instance, whichever contract it speaks: a v1/v2 provider table
 * (the provider state first) or a v3 instance table (the instance first, a sink
 * last). The rest of the core calls these and never reads either table itself.
 */
#include <stdio.h>
#include <string.h>

#include "error_impl.h"
#include "provider_impl.h"

onyx_status onyx__dev_alloc(onyx__provider *p, uint64_t bytes, void **out_ptr) {
  if (p->ops) return p->ops->device_alloc(p->state, bytes, out_ptr, onyx__sink_quiet());
  return p->table->device_alloc(p->state, bytes, out_ptr);
}

void onyx__dev_free(onyx__provider *p, void *ptr) {
  if (p->ops)
    p->ops->device_free(p->state, ptr);
  else
    p->table->device_free(p->state, ptr);
}

onyx_status onyx__dev_copy(onyx__provider *p, onyx_tensor *dst, const onyx_tensor *src, char *err,
                           size_t cap) {
  if (p->table) return p->table->copy(p->state, dst, src);
  onyx__sink sink;
  return p->ops->copy(p->state, dst, src, onyx__sink_init(&sink, err, cap));
}

bool onyx__dev_has_sync(const onyx__provider *p) {
  return p->ops ? p->ops->sync != NULL : p->table->sync != NULL;
}

onyx_status onyx__dev_sync_raw(const onyx__provider *p) {
  if (!onyx__dev_has_sync(p)) return ONYX_STATUS_OK;
  if (p->ops) return p->ops->sync(p->state, onyx__sink_quiet());
  return p->table->sync(p->state);
}

onyx_status onyx__dev_capacity(onyx__provider *p, uint64_t *out_bytes) {
  if (p->ops)
    return p->ops->memory_capacity
               ? p->ops->memory_capacity(p->state, out_bytes, onyx__sink_quiet())
               : ONYX_STATUS_UNSUPPORTED;
  if (!onyx__provider_has(p->table, memory_capacity) || p->table->memory_capacity == NULL)
    return ONYX_STATUS_UNSUPPORTED;
  return p->table->memory_capacity(p->state, out_bytes);
}

static const void *extension(const onyx__provider *p, const char *name) {
  if (p->ops->get_extension == NULL) return NULL;
  return p->ops->get_extension(p->state, name);
}

const onyx_vmm_table *onyx__dev_vmm(const onyx__provider *p) {
  if (p == NULL || onyx__dev_is_host(p)) return NULL;
  if (p->ops) return extension(p, ONYX_EXT_VMM);
  return onyx__provider_has(p->table, vmm) ? p->table->vmm : NULL;
}

const onyx_graph_table *onyx__dev_graphs(const onyx__provider *p) {
  if (p == NULL || onyx__dev_is_host(p)) return NULL;
  if (p->ops) return extension(p, ONYX_EXT_GRAPHS);
  return onyx__provider_has(p->table, graphs) ? p->table->graphs : NULL;
}

bool onyx__dev_siblings(const onyx__provider *a, const onyx__provider *b) {
  return a && b && a->factory != NULL && a->factory == b->factory &&
         (a->info.caps & b->info.caps & ONYX_DEVICE_CAP_PEER_COPY) != 0;
}

void *onyx__provider_stream(const onyx__provider *p) {
  if (p == NULL) return NULL;
  if (p->ops) return p->ops->stream ? p->ops->stream(p->state) : NULL;
  if (!onyx__provider_has(p->table, stream) || p->table->stream == NULL) return NULL;
  return p->table->stream(p->state);
}

onyx__provider *onyx__device_provider(onyx_runtime *rt, uint32_t device, int32_t device_id) {
  for (size_t i = 0; rt && device != ONYX_DEVICE_HOST && i < rt->provider_count; ++i)
    if (rt->providers[i].device == device && rt->providers[i].device_id == device_id)
      return &rt->providers[i];
  return NULL;
}
