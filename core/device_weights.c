/*
 * Weights on the device: at session creation every initializer that a device kernel
 * reads as data is copied once to that kernel's device and booked there as weights.
 * Kernels on two devices that read the same initializer get a copy on each.
 * Doing it here, not on the first run, puts the refusal where it belongs — a model
 * whose weights do not fit the device tier is refused when it is loaded, with the
 * governor's numbers — and keeps the upload out of the first run's time.
 */
#include <stdio.h>

#include "error_impl.h"
#include "memory_impl.h"
#include "optimize/optimize.h"
#include "session_impl.h"

/* Does node i read input k's data on its device (not on the host, not its geometry)? */
static bool read_on_device(const onyx__placed_node *pn, size_t k) {
  if (onyx__dev_is_host(pn->provider)) return false;
  uint64_t host = pn->kernel->host_inputs;
  uint64_t geometry = pn->kernel->geometry_inputs;
  return k >= 64 || !((host | geometry) >> k & 1u);
}

static onyx_status upload(onyx_session *s, size_t v, onyx__provider *p, char *err, size_t cap) {
  const onyx__value *val = &s->graph->values[v];
  uint64_t bytes = onyx__init_bytes(val);
  char label[160];
  snprintf(label, sizeof label, "initializer '%s' on %s", val->name, p->tier);
  void *ptr = NULL;
  onyx_status st = onyx__memory_alloc(s->runtime->memory, p, ONYX_REQUESTER_WEIGHTS, bytes, 64,
                                      label, &ptr, err, cap);
  if (st != ONYX_STATUS_OK) return st;
  onyx_tensor dst = val->init;
  dst.device = p->device;
  dst.device_id = p->device_id;
  dst.data = ptr;
  char why[ONYX__KERNEL_REASON_CAP] = "";
  onyx__stream_enter(p);
  st = bytes ? onyx__dev_copy(p, &dst, &val->init, why, sizeof why) : ONYX_STATUS_OK;
  onyx__stream_leave(p);
  if (st != ONYX_STATUS_OK) {
    onyx__memory_free(s->runtime->memory, ptr);
    onyx__errf(err, cap,
               "copying initializer '%s' (%llu bytes) to provider '%s' (%s) failed: %s%s%s",
               val->name, (unsigned long long)bytes, p->name, p->tier, onyx_status_str(st),
               why[0] ? ": " : "", why);
    return st;
  }
  s->device_inits[v * s->runtime->provider_count + (size_t)(p - s->runtime->providers)] = ptr;
  return ONYX_STATUS_OK;
}

onyx_status onyx__upload_device_weights(onyx_session *s, char *err, size_t cap) {
  const onyx__graph *g = s->graph;
  for (size_t i = 0; i < g->node_count; ++i) {
    const onyx__node *n = &g->nodes[i];
    const onyx__placed_node *pn = &s->nodes[i];
    for (size_t k = 0; k < n->input_count; ++k) {
      int32_t v = n->inputs[k];
      if (v < 0 || !g->values[v].is_initializer ||
          onyx__device_init(s, (size_t)v, pn->provider) != NULL || !read_on_device(pn, k) ||
          onyx__input_copied(s, i, k))
        continue;
      char why[ONYX_ERR_CAP];
      onyx_status st = upload(s, (size_t)v, pn->provider, why, sizeof why);
      if (st != ONYX_STATUS_OK) {
        onyx__errf(err, cap, "node '%s' (#%zu, %s on %s): weights: %s", n->name, i, n->op_type,
                   pn->provider->name, why);
        return st;
      }
    }
  }
  return ONYX_STATUS_OK;
}
