/*
 * The 16-bit element helpers of the decode GEMV kernels (cuda_gemv.cu, cuda_gemv_a.cuh,
 * cuda_gemv_nk.cuh): float16 and bfloat16 widened to float and rounded back, eight at a
 * time for a 16-byte load or store, and the Hopper bulk L2 prefetch they ask weights
 * with. Overloads take a T pointer only to pick the type.
 */
#ifndef ONYX_CUDA_HALF8_CUH
#define ONYX_CUDA_HALF8_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace onyx_cuda {

static __device__ __forceinline__ void widen8(uint4 v, const __half *, float *f) {
  const __half2 *h = reinterpret_cast<const __half2 *>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 t = __half22float2(h[i]);
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}

static __device__ __forceinline__ void widen8(uint4 v, const __nv_bfloat16 *, float *f) {
  const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 t = __bfloat1622float2(h[i]);
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}

static __device__ __forceinline__ float widen(__half v) { return __half2float(v); }
static __device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
static __device__ __forceinline__ void narrow(__half *p, float v) { *p = __float2half_rn(v); }
static __device__ __forceinline__ void narrow(__nv_bfloat16 *p, float v) {
  *p = __float2bfloat16_rn(v);
}

/* v rounded to T and back: a value as the unfused producer would have stored it. */
static __device__ __forceinline__ float round_to(const __half *, float v) {
  return __half2float(__float2half_rn(v));
}
static __device__ __forceinline__ float round_to(const __nv_bfloat16 *, float v) {
  return __bfloat162float(__float2bfloat16_rn(v));
}

/* Eight floats rounded to T and packed into 16 bytes. */
template <class T> static __device__ __forceinline__ uint4 pack8(const float *f) {
  uint4 v;
  T *h = reinterpret_cast<T *>(&v);
#pragma unroll
  for (int i = 0; i < 8; ++i) narrow(&h[i], f[i]);
  return v;
}

/* `bytes` (a multiple of 16) from p asked into L2 (Hopper bulk prefetch; nothing before). */
static __device__ __forceinline__ void l2_prefetch_bytes(const void *p, unsigned bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint64_t g;
  asm("cvta.to.global.u64 %0, %1;" : "=l"(g) : "l"(p));
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(g), "r"(bytes) : "memory");
#else
  (void)p, (void)bytes;
#endif
}

} // namespace onyx_cuda

#endif /* ONYX_CUDA_HALF8_CUH */
