/*
 * Device memory, copies and the stream.
 *
 * Every byte this provider hands out was booked with the governor by the core before
 * device_alloc is called, and its grant is released right after device_free returns.
 *
 * Allocation is stream-ordered: cudaMallocAsync / cudaFreeAsync on the provider's one
 * stream, from the device's default memory pool. A free is queued behind the work
 * already on the stream, so the core may free a buffer whose last reader is still
 * queued (it does, at every value's last use) without waiting for it; the memory is
 * reused only by work queued after the free. The pool's release threshold is 0: at
 * every synchronisation (sync, the core's copies to the host, close) it hands every
 * freed byte back to the device, so between two synchronisations it holds at most what
 * was freed since the last one — memory the governor booked until the free and the
 * stream still orders — and never a cache beyond that. cuMem* VMM zones (the KV cache)
 * do not go through here (cuda_vmm.c).
 *
 * A device without memory pools (cudaDevAttrMemoryPoolsSupported = 0) keeps the
 * synchronous path: cudaMalloc, and a stream sync before each cudaFree so memory is
 * never returned while queued work may still read it.
 *
 * While the stream is being captured into a CUDA graph (cuda_graph.c) the core calls
 * none of these: a stream-ordered allocation or free would be recorded as a graph node
 * and a synchronisation would invalidate the capture. Replays leave the pool alone: a
 * graph reads and writes buffers allocated before the capture, which the core keeps,
 * and the trim in sync releases only memory nothing holds.
 */
#include <stdio.h>
#include <string.h>

#include "cuda_impl.h"

void onyx__cuda_log_error(const onyx__cuda_provider *p, const char *what, cudaError_t e) {
  if (p->host == NULL || p->host->log == NULL) return;
  char line[256];
  snprintf(line, sizeof line, "cuda: %s failed: %s", what, cudaGetErrorString(e));
  p->host->log(p->host->host_data, ONYX_LOG_ERROR, line);
}

void onyx__cuda_pool_init(onyx__cuda_provider *p) {
  p->pool = NULL;
  int supported = 0;
  cudaError_t e = cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, p->device);
  if (e != cudaSuccess || !supported) {
    (void)cudaGetLastError();
    return;
  }
  cudaMemPool_t pool = NULL;
  if (cudaDeviceGetDefaultMemPool(&pool, p->device) != cudaSuccess || pool == NULL) {
    (void)cudaGetLastError();
    return;
  }
  /* 0 is the default; set it anyway, as a statement: the governor books every byte
   * at grant time and releases it at free, so the pool must not keep freed memory
   * beyond the next synchronisation. With 0 it keeps none: it is no hidden pool. */
  uint64_t threshold = 0;
  if (cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold) != cudaSuccess) {
    (void)cudaGetLastError();
    return;
  }
  p->pool = pool;
}

onyx_status onyx__cuda_device_alloc(void *state, uint64_t bytes, void **out_ptr) {
  onyx__cuda_provider *p = state;
  if (p == NULL || out_ptr == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  if (!p->ready) return ONYX_STATUS_DEVICE_UNAVAILABLE;
  if (bytes > SIZE_MAX) return ONYX_STATUS_OUT_OF_MEMORY;
  const char *call = p->pool ? "cudaMallocAsync" : "cudaMalloc";
  if (bytes > p->total_bytes) {
    /* More than the device has: refused without asking the driver. */
    if (p->host != NULL && p->host->log != NULL) {
      char line[160];
      snprintf(line, sizeof line, "cuda: %s of %llu bytes refused: the device has %llu", call,
               (unsigned long long)bytes, (unsigned long long)p->total_bytes);
      p->host->log(p->host->host_data, ONYX_LOG_ERROR, line);
    }
    return ONYX_STATUS_OUT_OF_MEMORY;
  }
  cudaError_t e = onyx__cuda_use_device(p);
  void *ptr = NULL;
  size_t n = (size_t)(bytes ? bytes : 1);
  if (e == cudaSuccess && p->pool == NULL) {
    e = cudaMalloc(&ptr, n);
  } else if (e == cudaSuccess) {
    e = cudaMallocAsync(&ptr, n, p->stream);
    if (e == cudaErrorMemoryAllocation) {
      /* Once more after a sync: earlier stream-ordered frees complete and the pool is
       * trimmed to nothing, so every byte the governor released is the device's again. */
      (void)cudaGetLastError();
      if (cudaStreamSynchronize(p->stream) == cudaSuccess) {
        (void)cudaMemPoolTrimTo(p->pool, 0);
        e = cudaMallocAsync(&ptr, n, p->stream);
      }
    }
  }
  if (e != cudaSuccess) {
    (void)cudaGetLastError(); /* an allocation failure is not sticky; clear it */
    char what[96];
    snprintf(what, sizeof what, "%s of %llu bytes", call, (unsigned long long)bytes);
    onyx__cuda_log_error(p, what, e);
    return e == cudaErrorMemoryAllocation ? ONYX_STATUS_OUT_OF_MEMORY : ONYX_STATUS_PROVIDER_ERROR;
  }
  *out_ptr = ptr;
  return ONYX_STATUS_OK;
}

void onyx__cuda_device_free(void *state, void *ptr) {
  onyx__cuda_provider *p = state;
  if (p == NULL || ptr == NULL) return;
  (void)onyx__cuda_use_device(p);
  if (p->pool != NULL) {
    /* Queued behind every kernel and copy already on the stream: no wait here. */
    cudaError_t e = cudaFreeAsync(ptr, p->stream);
    if (e != cudaSuccess) onyx__cuda_log_error(p, "cudaFreeAsync", e);
    return;
  }
  cudaError_t e = p->stream ? cudaStreamSynchronize(p->stream) : cudaSuccess;
  if (e != cudaSuccess) onyx__cuda_log_error(p, "cudaStreamSynchronize before cudaFree", e);
  e = cudaFree(ptr);
  if (e != cudaSuccess) onyx__cuda_log_error(p, "cudaFree", e);
}

/* Whether cudaMemcpyAsync has consumed a host source by the time it returns. For
 * pageable memory it has: the driver stages the bytes into its own pinned buffer
 * before returning ("The function will return once the pageable buffer has been copied
 * to the staging memory for DMA transfer", CUDA's API synchronization behavior). For
 * page-locked or managed memory the copy is truly asynchronous and reads the source
 * when the stream reaches it; so does anything the runtime cannot classify. */
static bool host_source_staged(const void *src) {
  struct cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, src) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeUnregistered;
}

/* A copy between two GPUs (ABI v3 sibling instances, both with PEER_COPY: the core calls
 * the destination's copy after syncing the source's). It returns with the copy done:
 * the source's free is queued on the source instance's stream, which this stream does
 * not order. */
static cudaError_t peer_copy(const onyx__cuda_provider *p, void *dst, int dst_dev, const void *src,
                             int src_dev, size_t bytes) {
  cudaError_t e = cudaMemcpyPeerAsync(dst, dst_dev, src, src_dev, bytes, p->stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(p->stream);
  return e;
}

onyx_status onyx__cuda_copy(void *state, onyx_tensor *dst, const onyx_tensor *src) {
  onyx__cuda_provider *p = state;
  if (p == NULL || dst == NULL || src == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  if (!p->ready) return ONYX_STATUS_DEVICE_UNAVAILABLE;
  if (dst->dtype != src->dtype || dst->rank != src->rank ||
      memcmp(dst->dims, src->dims,
             sizeof(int64_t) * (dst->rank <= ONYX_MAX_RANK ? dst->rank : ONYX_MAX_RANK)) != 0)
    return ONYX_STATUS_INVALID_ARGUMENT;
  /* Sub-byte types (INT4, UINT4) pack two elements a byte, the last one rounded up. */
  const uint64_t bits = onyx_dtype_bits(src->dtype);
  uint64_t numel = 1;
  for (uint32_t i = 0; i < src->rank; ++i) {
    if (src->dims[i] < 0) return ONYX_STATUS_INVALID_ARGUMENT;
    numel *= (uint64_t)src->dims[i];
  }
  const uint64_t bytes = (numel * bits + 7) / 8;
  if (bytes == 0) return ONYX_STATUS_OK;
  if (dst->data == NULL || src->data == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  bool from_dev = src->device == ONYX_DEVICE_CUDA, to_dev = dst->device == ONYX_DEVICE_CUDA;
  enum cudaMemcpyKind kind = from_dev ? (to_dev ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
                                      : (to_dev ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
  cudaError_t e = onyx__cuda_use_device(p);
  if (from_dev && to_dev && src->device_id != dst->device_id) {
    if (e == cudaSuccess)
      e = peer_copy(p, dst->data, (int)dst->device_id, src->data, (int)src->device_id,
                    (size_t)bytes);
    if (e == cudaSuccess) return ONYX_STATUS_OK;
    onyx__cuda_log_error(p, "peer copy between CUDA devices", e);
    return ONYX_STATUS_PROVIDER_ERROR;
  }
  if (e == cudaSuccess) e = cudaMemcpyAsync(dst->data, src->data, (size_t)bytes, kind, p->stream);
  /* The ABI's contract: copy returns once the source may be reused. A device source
   * is read in stream order (its free is queued behind this copy); a host source must
   * have been read by now — wait for the stream where the driver has not staged it. */
  if (e == cudaSuccess && kind == cudaMemcpyHostToDevice && !host_source_staged(src->data))
    e = cudaStreamSynchronize(p->stream);
  if (e != cudaSuccess) {
    onyx__cuda_log_error(p, "cudaMemcpyAsync", e);
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
    onyx__cuda_log_error(p, "cudaStreamSynchronize", e);
    return ONYX_STATUS_PROVIDER_ERROR;
  }
  /* The release threshold of 0 already returns freed pool memory at a synchronisation;
   * trimming here makes "nothing kept past sync" hold whatever the driver's heuristics
   * (a no-op when the pool holds nothing unused). */
  if (p->pool != NULL) (void)cudaMemPoolTrimTo(p->pool, 0);
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
