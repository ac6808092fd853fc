/*
 * Calls into kernels, whichever contract registered them. A v3 kernel gets the
 * instance and a sink; a v1/v2 kernel gets the provider state and its old channels
 * (err buffers for create and supports, the host table's set_error for infer and
 * workspace, ctx->set_error for compute). Either way the caller receives the kernel's
 * own words in one buffer, so every message names the same things.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "error_impl.h"
#include "provider_impl.h"

bool onyx__k_type_ok(const onyx__kernel *k, uint32_t side, size_t index, uint32_t dtype) {
  if (dtype == ONYX_DTYPE_UNDEFINED) return true;
  for (size_t i = 0; i < k->type_count; ++i) {
    const onyx_type_constraint *c = &k->types[i];
    if (c->side != side || c->index != index || c->types == 0) continue;
    if (dtype >= 64 || !(c->types & ONYX_DTYPE_BIT(dtype))) return false;
  }
  return true;
}

bool onyx__k_supports(const onyx__kernel *k, const onyx_node_info *node, char *reason, size_t cap) {
  if (k->v2) return k->v2->supports == NULL || k->v2->supports(node, reason, cap);
  if (k->v3->supports == NULL) return true;
  onyx__sink sink;
  return k->v3->supports(k->instance->state, node, onyx__sink_init(&sink, reason, cap)) ==
         ONYX_STATUS_OK;
}

onyx_status onyx__k_create(const onyx__kernel *k, const onyx_node_info *node, void **out_state,
                           char *err, size_t cap) {
  if (err && cap) err[0] = '\0';
  if (k->v2) {
    *out_state = NULL;
    if (k->v2->create == NULL) return ONYX_STATUS_OK;
    return k->v2->create(k->instance->state, node, out_state, err, cap);
  }
  if (k->v3->create == NULL) { /* stateless: the kernel works on its instance */
    *out_state = k->instance->state;
    return ONYX_STATUS_OK;
  }
  *out_state = NULL;
  onyx__sink sink;
  return k->v3->create(k->instance->state, node, out_state, onyx__sink_init(&sink, err, cap));
}

void onyx__k_destroy(const onyx__kernel *k, void *state) {
  if (k == NULL || state == NULL) return;
  if (k->v2 && k->v2->destroy) k->v2->destroy(state);
  if (k->v3 && k->v3->create && k->v3->destroy) k->v3->destroy(state);
}

bool onyx__k_has_infer(const onyx__kernel *k) {
  return k->v2 ? onyx__kernel_has(k->v2, infer) && k->v2->infer : k->v3->infer != NULL;
}

bool onyx__k_has_workspace(const onyx__kernel *k) {
  return k->v2 ? k->v2->workspace != NULL : k->v3->workspace != NULL;
}

/* A v2 kernel's reason, given through the host table's set_error on this thread. */
static void take_thread_reason(char *err, size_t cap) {
  if (err && cap) snprintf(err, cap, "%s", onyx__kernel_reason());
  onyx__kernel_reason_clear();
}

onyx_status onyx__k_infer(const onyx__kernel *k, void *state, const onyx_tensor *inputs,
                          size_t input_count, onyx_tensor *outputs, size_t output_count, char *err,
                          size_t cap) {
  if (k->v3) {
    onyx__sink sink;
    return k->v3->infer(state, inputs, input_count, outputs, output_count,
                        onyx__sink_init(&sink, err, cap));
  }
  onyx__kernel_reason_clear();
  onyx_status st = k->v2->infer(state, inputs, input_count, outputs, output_count);
  take_thread_reason(err, cap);
  return st;
}

onyx_status onyx__k_workspace(const onyx__kernel *k, void *state, const onyx_tensor *inputs,
                              size_t input_count, onyx_workspace_requirement *req, char *err,
                              size_t cap) {
  if (k->v3) {
    onyx__sink sink;
    return k->v3->workspace(state, inputs, input_count, req, onyx__sink_init(&sink, err, cap));
  }
  onyx__kernel_reason_clear();
  onyx_status st = k->v2->workspace(state, inputs, input_count, req);
  take_thread_reason(err, cap);
  return st;
}

/* A v3 compute's sink forwards to the context's set_error, so that both reach the
 * caller's buffer. */
static void compute_sink_set_error(onyx_sink *sink, const char *fmt, ...) {
  onyx_compute_ctx *ctx = sink->core_data;
  char msg[ONYX__KERNEL_REASON_CAP];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  ctx->set_error(ctx, "%s", msg);
}

onyx_status onyx__k_compute(const onyx__kernel *k, void *state, onyx_compute_ctx *ctx,
                            const onyx_tensor *const *inputs, size_t input_count) {
  if (k->v2) return k->v2->compute(state, ctx, inputs, input_count);
  onyx_sink sink = {.struct_size = sizeof sink,
                    .version = ONYX_ABI_LATEST,
                    .core_data = ctx,
                    .set_error = compute_sink_set_error};
  return k->v3->compute(state, ctx, inputs, input_count, &sink);
}
