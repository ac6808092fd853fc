/*
 * The device's read rate, for the decode rows of bench_attention_cuda.c: how fast a
 * kernel that does nothing but read can stream the same bytes. Four launch forms, since
 * the pattern may matter: one grid striding over the whole buffer (the layout DRAM likes
 * best), or each CTA streaming its own contiguous piece (the decode kernel's shape: a
 * CTA per SM on its own K/V rows); streaming loads (ld.global.cs, as the decode
 * kernel's evict-first hint) or plain ones. Every thread keeps 8 loads in flight.
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include <algorithm>

#include "bench_read_rate.h"

namespace {

constexpr int kUnroll = 8;

template <bool CS> __device__ __forceinline__ uint4 ld16(const uint4 *p) {
  if (CS) return __ldcs(p);
  return *p;
}

/* Reads src[0, n) once; each warp stores the XOR of what it read (so no load is dead)
 * into its own word of sink. CHUNK: CTA b reads its contiguous share; else the grid
 * strides. */
template <bool CS, bool CHUNK>
__global__ void read_kernel(const uint4 *__restrict__ src, size_t n, unsigned *sink) {
  size_t i, end, stride;
  if (CHUNK) {
    const size_t per = (n + gridDim.x - 1) / gridDim.x;
    const size_t at = per * blockIdx.x, begin = at < n ? at : n;
    end = begin + per < n ? begin + per : n;
    i = begin + threadIdx.x;
    stride = blockDim.x;
  } else {
    end = n;
    i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    stride = (size_t)gridDim.x * blockDim.x;
  }
  unsigned acc = 0u;
  for (; i + (kUnroll - 1) * stride < end; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = ld16<CS>(src + i + u * stride);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < end; i += stride) {
    const uint4 v = ld16<CS>(src + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
#pragma unroll
  for (int o = 16; o >= 1; o >>= 1) acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31u) == 0u) sink[blockIdx.x * (blockDim.x / 32u) + threadIdx.x / 32u] = acc;
}

/* Non-zero words, different everywhere (nothing a compressing memory could fold). */
__global__ void fill_kernel(uint32_t *p, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    uint32_t x = (uint32_t)i * 2654435761u + 0x9e3779b9u;
    x ^= x >> 15;
    x *= 2246822519u;
    p[i] = x | 1u;
  }
}

struct Form {
  const char *name;
  int ctas_per_sm, threads;
  bool cs, chunk;
};

const Form kForms[4] = {
    {"grid-stride, 4 CTAs/SM x 512, ld.cs", 4, 512, true, false},
    {"grid-stride, 4 CTAs/SM x 512, plain ld", 4, 512, false, false},
    {"a piece per CTA, 1 CTA/SM x 1024, ld.cs", 1, 1024, true, true},
    {"a piece per CTA, 4 CTAs/SM x 512, ld.cs", 4, 512, true, true},
};

void launch(const Form &f, int sms, const uint4 *src, size_t n, unsigned *sink) {
  const int grid = sms * f.ctas_per_sm;
  if (f.cs && f.chunk)
    read_kernel<true, true><<<grid, f.threads>>>(src, n, sink);
  else if (f.cs)
    read_kernel<true, false><<<grid, f.threads>>>(src, n, sink);
  else if (f.chunk)
    read_kernel<false, true><<<grid, f.threads>>>(src, n, sink);
  else
    read_kernel<false, false><<<grid, f.threads>>>(src, n, sink);
}

/* Per-launch times (ms) of form f, sorted, and the back-to-back mean. */
cudaError_t time_form(const Form &f, int sms, const uint4 *src, size_t n, unsigned *sink, int iters,
                      float *ts, float *b2b) {
  cudaEvent_t a, b;
  cudaError_t e = cudaEventCreate(&a);
  if (e != cudaSuccess) return e;
  e = cudaEventCreate(&b);
  if (e != cudaSuccess) {
    cudaEventDestroy(a);
    return e;
  }
  for (int i = 0; i < 5; ++i) launch(f, sms, src, n, sink);
  for (int i = 0; i < iters && e == cudaSuccess; ++i) {
    cudaEventRecord(a, 0);
    launch(f, sms, src, n, sink);
    cudaEventRecord(b, 0);
    e = cudaEventSynchronize(b);
    if (e == cudaSuccess) e = cudaEventElapsedTime(&ts[i], a, b);
  }
  if (e == cudaSuccess) {
    cudaEventRecord(a, 0);
    for (int i = 0; i < iters; ++i) launch(f, sms, src, n, sink);
    cudaEventRecord(b, 0);
    e = cudaEventSynchronize(b);
    float all = 0.0f;
    if (e == cudaSuccess) e = cudaEventElapsedTime(&all, a, b);
    *b2b = all / (float)iters;
  }
  if (e == cudaSuccess) e = cudaGetLastError();
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ts, ts + iters);
  return e;
}

} // namespace

extern "C" const char *onyx_bench_read_form(int f) {
  return f >= 0 && f < 4 ? kForms[f].name : "?";
}

extern "C" int onyx_bench_read_rate(size_t bytes, int iters, onyx_bench_read *out) {
  const size_t n = bytes / 16;
  if (n == 0 || iters <= 0 || iters > 1000) return (int)cudaErrorInvalidValue;
  int dev = 0, sms = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (e != cudaSuccess) return (int)e;
  uint4 *src = nullptr;
  unsigned *sink = nullptr;
  e = cudaMalloc(&src, n * 16);
  if (e == cudaSuccess) e = cudaMalloc(&sink, (size_t)sms * 4 * 32 * sizeof(unsigned));
  if (e == cudaSuccess) {
    fill_kernel<<<sms * 8, 256>>>(reinterpret_cast<uint32_t *>(src), n * 4);
    e = cudaGetLastError();
  }
  float ts[1000];
  onyx_bench_read r = {};
  const double gb = (double)(n * 16) / 1e6; /* GB/s from ms */
  for (int f = 0; f < 4 && e == cudaSuccess; ++f) {
    float b2b = 0.0f;
    e = time_form(kForms[f], sms, src, n, sink, iters, ts, &b2b);
    if (e != cudaSuccess) break;
    r.form_gbps[f] = gb / ts[0];
    if (r.form_gbps[f] > r.best) {
      r.best = r.form_gbps[f];
      r.median = gb / ts[iters / 2];
      r.form = f;
    }
    if (gb / b2b > r.b2b) r.b2b = gb / b2b;
  }
  cudaFree(src);
  cudaFree(sink);
  if (e != cudaSuccess) return (int)e;
  *out = r;
  return 0;
}
