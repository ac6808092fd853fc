/*
 * Host-side helpers of the CUDA attention ops. Kernel state is the only host
 * allocation (at create); device memory comes from the core (outputs) or from
 * workspace views, never from cudaMalloc here.
 */
#include "cuda_attn_util.h"

#include <cuda_runtime_api.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_attn_impl.h"

void *onyx__cuda_attn_state_new(size_t size, const onyx_node_info *node, const char *op, char *err,
                                size_t err_cap) {
  if (node->output_count > 4) {
    onyx__pc_fail(err, err_cap, ONYX_STATUS_INVALID_MODEL,
                  "%s: %zu outputs named, at most 4 expected", op, node->output_count);
    return NULL;
  }
  onyx__cuda_attn_node *s = calloc(1, size);
  if (s == NULL) {
    onyx__pc_fail(err, err_cap, ONYX_STATUS_OUT_OF_MEMORY, "%s: out of host memory", op);
    return NULL;
  }
  s->opset = node->opset;
  s->output_count = node->output_count;
  for (size_t i = 0; i < node->output_count; ++i)
    s->output_present[i] = node->output_present == NULL || node->output_present[i];
  return s;
}

void onyx__cuda_attn_state_free(void *state) { free(state); }

onyx_status onyx__cuda_attn_check_device(onyx_compute_ctx *ctx, const onyx_tensor *const *inputs,
                                         size_t input_count, uint32_t host_ok) {
  for (size_t i = 0; i < input_count; ++i) {
    const onyx_tensor *t = inputs[i];
    if (t == NULL) continue;
    bool host_allowed = i < 32 && (host_ok & (1u << i)) != 0;
    if (t->device != ONYX_DEVICE_CUDA && !(host_allowed && t->device == ONYX_DEVICE_HOST))
      return onyx__pc_error(ctx, ONYX_STATUS_INVALID_ARGUMENT,
                            "input %zu is not in CUDA device memory", i);
    if (t->data == NULL && onyx_tensor_numel(t) > 0)
      return onyx__pc_error(ctx, ONYX_STATUS_INVALID_ARGUMENT, "input %zu has no data", i);
    for (uint32_t d = 0; d < t->rank; ++d)
      if (t->dims[d] < 0)
        return onyx__pc_error(ctx, ONYX_STATUS_INVALID_ARGUMENT,
                              "input %zu has a negative dimension", i);
  }
  return ONYX_STATUS_OK;
}

onyx_status onyx__cuda_attn_workspace(onyx_compute_ctx *ctx, const char *name, uint64_t need,
                                      void **out) {
  *out = NULL;
  uint64_t have = 0;
  for (size_t i = 0; ctx->workspace != NULL && i < ctx->workspace_count; ++i) {
    const onyx_workspace_view *v = &ctx->workspace[i];
    if (v->name != NULL && strcmp(v->name, name) == 0) {
      have = v->data != NULL ? v->bytes : 0;
      if (have >= need) {
        *out = v->data;
        return ONYX_STATUS_OK;
      }
      break;
    }
  }
  return onyx__pc_error(ctx, ONYX_STATUS_WORKSPACE_TOO_SMALL,
                        "workspace region %s has %llu bytes, %llu needed", name,
                        (unsigned long long)have, (unsigned long long)need);
}

onyx_status onyx__cuda_attn_read(onyx_compute_ctx *ctx, const onyx_tensor *t, void *dst,
                                 size_t bytes) {
  if (t->device == ONYX_DEVICE_HOST) {
    memcpy(dst, t->data, bytes);
    return ONYX_STATUS_OK;
  }
  cudaStream_t s = (cudaStream_t)ctx->stream;
  cudaError_t e = cudaMemcpyAsync(dst, t->data, bytes, cudaMemcpyDeviceToHost, s);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  if (e != cudaSuccess)
    return onyx__pc_error(ctx, ONYX_STATUS_PROVIDER_ERROR,
                          "reading %zu bytes from the device failed: %s", bytes,
                          cudaGetErrorString(e));
  return ONYX_STATUS_OK;
}

void onyx__cuda_attn_region(onyx_workspace_requirement *req, const char *name, uint64_t bytes) {
  if (bytes == 0 || req->count >= ONYX_MAX_WORKSPACE_REGIONS) return;
  onyx_workspace_region *r = &req->regions[req->count++];
  r->name = name;
  r->bytes = bytes;
  r->alignment = 256;
  r->lifetime = ONYX_LIFETIME_STEP;
}

onyx_status onyx__cuda_attn_launch_error(onyx_compute_ctx *ctx, const char *what, int err) {
  return onyx__pc_error(ctx, ONYX_STATUS_PROVIDER_ERROR, "%s failed: %s (CUDA error %d)", what,
                        onyx__cuda_attn_error_text(err), err);
}
