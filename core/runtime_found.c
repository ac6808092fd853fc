/* onyx_runtime_found: what discovery found (config_dropin.c) and what the runtime made
 * of each, for onyx-list and for applications that say why a provider is missing. */
#include <string.h>

#include "onyx.h"
#include "provider_impl.h"

static bool is_loaded(const onyx_runtime *rt, const char *name) {
  for (size_t i = 0; i < rt->provider_count; ++i)
    if (!strcmp(rt->providers[i].name, name)) return true;
  return false;
}

size_t onyx_runtime_found_count(const onyx_runtime *rt) {
  return rt ? rt->config->provider_count + rt->config->shadowed_count : 0;
}

onyx_status onyx_runtime_found(const onyx_runtime *rt, size_t index, onyx_provider_found *out) {
  if (rt == NULL || out == NULL || out->struct_size < sizeof *out ||
      index >= onyx_runtime_found_count(rt))
    return ONYX_STATUS_INVALID_ARGUMENT;
  const onyx__config *c = rt->config;
  const onyx__provider_config *p =
      index < c->provider_count ? &c->providers[index] : &c->shadowed[index - c->provider_count];
  uint32_t state = p->state;
  const char *reason = p->reason ? p->reason : "";
  if (state == ONYX_PROVIDER_STATE_LOADED && !p->enabled) {
    state = ONYX_PROVIDER_STATE_DISABLED;
    reason = "enabled = false";
  } else if (state == ONYX_PROVIDER_STATE_LOADED && !is_loaded(rt, p->name)) {
    /* The runtime carries on without an enabled provider only when its probe declined
     * (it logs the provider's reason). */
    state = ONYX_PROVIDER_STATE_DECLINED;
    if (!p->reason) reason = "its probe found no usable device (the runtime's log says why)";
  }
  *out = (onyx_provider_found){
      .struct_size = sizeof *out,
      .name = p->name,
      .library = p->path,
      .file = p->file,
      .line = p->line,
      .origin = p->origin,
      .state = state,
      .reason = reason,
  };
  return ONYX_STATUS_OK;
}
