/*
 * Device memory, copies and the stream.
 *
 * Every byte this provider hands out was booked with the governor by the core before
 * device_alloc is called, so allocation is plain cudaMalloc / cudaFree: a private pool
 * or a caching allocator here would hide memory from the governor.
 *
 * Ordering: kernels and copies are queued on the provider's one non-blocking stream,
 * and the core calls sync after each transfer. device_free synchronizes that stream
 * before cudaFree, so memory is never returned while queued work may still read it.
 */
#include <stdio.h>
#include <string.h>

#include "cuda_impl.h"

static void log_cuda_error(const onyx__cuda_provider *p, const char *what, cudaError_t e) {
  if (p->host == NULL || p->host->log == NULL) return;
  char line[256];
  snprintf(line, sizeof line, "cuda: %s failed: %s", what, cudaGetErrorString(e));
  p->host->log(p->host->host_data, ONYX_LOG_ERROR, line);
}

onyx_status onyx__cuda_device_alloc(void *state, uint64_t bytes, void **out_ptr) {
  onyx__cuda_provider *p = state;
  if (p == NULL || out_ptr == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  if (!p->ready) return ONYX_STATUS_DEVICE_UNAVAILABLE;
  if (bytes > SIZE_MAX) return ONYX_STATUS_OUT_OF_MEMORY;
  cudaError_t e = onyx__cuda_use_device(p);
  void *ptr = NULL;
  if (e == cudaSuccess) e = cudaMalloc(&ptr, (size_t)(bytes ? bytes : 1));
  if (e != cudaSuccess) {
    (void)cudaGetLastError(); /* an allocation failure is not sticky; clear it */
    char what[96];
    snprintf(what, sizeof what, "cudaMalloc of %llu bytes", (unsigned long long)bytes);
    log_cuda_error(p, what, e);
    return e == cudaErrorMemoryAllocation ? ONYX_STATUS_OUT_OF_MEMORY : ONYX_STATUS_PROVIDER_ERROR;
  }
  *out_ptr = ptr;
  return ONYX_STATUS_OK;
}

void onyx__cuda_device_free(void *state, void *ptr) {
  onyx__cuda_provider *p = state;
  if (p == NULL || ptr == NULL) return;
  (void)onyx__cuda_use_device(p);
  cudaError_t e = p->stream ? cudaStreamSynchronize(p->stream) : cudaSuccess;
  if (e != cudaSuccess) log_cuda_error(p, "cudaStreamSynchronize before cudaFree", e);
  e = cudaFree(ptr);
  if (e != cudaSuccess) log_cuda_error(p, "cudaFree", e);
}

onyx_status onyx__cuda_copy(void *state, onyx_tensor *dst, const onyx_tensor *src) {
  onyx__cuda_provider *p = state;
  if (p == NULL || dst == NULL || src == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  if (!p->ready) return ONYX_STATUS_DEVICE_UNAVAILABLE;
  if (dst->dtype != src->dtype || dst->rank != src->rank ||
      memcmp(dst->dims, src->dims,
             sizeof(int64_t) * (dst->rank <= ONYX_MAX_RANK ? dst->rank : ONYX_MAX_RANK)) != 0)
    return ONYX_STATUS_INVALID_ARGUMENT;
  uint64_t bytes = onyx_dtype_size(src->dtype);
  for (uint32_t i = 0; i < src->rank; ++i) {
    if (src->dims[i] < 0) return ONYX_STATUS_INVALID_ARGUMENT;
    bytes *= (uint64_t)src->dims[i];
  }
  if (bytes == 0) return ONYX_STATUS_OK;
  if (dst->data == NULL || src->data == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  bool from_dev = src->device == ONYX_DEVICE_CUDA, to_dev = dst->device == ONYX_DEVICE_CUDA;
  enum cudaMemcpyKind kind = from_dev ? (to_dev ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
                                      : (to_dev ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
  cudaError_t e = onyx__cuda_use_device(p);
  if (e == cudaSuccess) e = cudaMemcpyAsync(dst->data, src->data, (size_t)bytes, kind, p->stream);
  if (e != cudaSuccess) {
    log_cuda_error(p, "cudaMemcpyAsync", e);
    return ONYX_STATUS_PROVIDER_ERROR;
  }
  return ONYX_STATUS_OK;
}

onyx_status onyx__cuda_sync(void *state) {
  onyx__cuda_provider *p = state;
  if (p == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  if (!p->ready) return ONYX_STATUS_DEVICE_UNAVAILABLE;
  cudaError_t e = onyx__cuda_use_device(p);
  if (e == cudaSuccess) e = cudaStreamSynchronize(p->stream);
  if (e != cudaSuccess) {
    /* An error from an earlier kernel surfaces here; say so in the log. */
    log_cuda_error(p, "cudaStreamSynchronize", e);
    return ONYX_STATUS_PROVIDER_ERROR;
  }
  return ONYX_STATUS_OK;
}

onyx_status onyx__cuda_memory_capacity(void *state, uint64_t *out_bytes) {
  const onyx__cuda_provider *p = state;
  if (p == NULL || out_bytes == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  if (!p->ready) return ONYX_STATUS_DEVICE_UNAVAILABLE;
  *out_bytes = p->total_bytes;
  return ONYX_STATUS_OK;
}

void *onyx__cuda_stream(void *state) {
  const onyx__cuda_provider *p = state;
  return p != NULL && p->ready ? (void *)p->stream : NULL;
}
