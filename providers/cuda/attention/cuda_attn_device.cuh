/*
 * Device helpers shared by the CUDA attention kernels (CUDA C++ only; private).
 * Element types, per-batch geometry, rotary positions and mask reads: the same
 * definitions for the flash, reference and KV-fill kernels, so the routes agree.
 */
#ifndef ONYX_CUDA_ATTN_DEVICE_CUH
#define ONYX_CUDA_ATTN_DEVICE_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda_attn_impl.h"
#include "onyx_tensor.h"

namespace onyx_cuda_attn {

constexpr float kLog2e = 1.4426950408889634f;

/* Element conversions per storage type. */
template <typename T> struct Elem;
template <> struct Elem<float> {
  static __device__ __forceinline__ float load(float x) { return x; }
  static __device__ __forceinline__ float store(float x) { return x; }
};
template <> struct Elem<__half> {
  static __device__ __forceinline__ float load(__half x) { return __half2float(x); }
  static __device__ __forceinline__ __half store(float x) { return __float2half_rn(x); }
};
template <> struct Elem<__nv_bfloat16> {
  static __device__ __forceinline__ float load(__nv_bfloat16 x) { return __bfloat162float(x); }
  static __device__ __forceinline__ __nv_bfloat16 store(float x) { return __float2bfloat16_rn(x); }
};

template <typename T> __device__ __forceinline__ float ld(const T *p, int64_t i) {
  return Elem<T>::load(p[i]);
}

/* Per-batch geometry: keys [0, limit) may be attended; query row s sits at qpos0 + s;
 * its rotary position (without position ids) is rpos0 + s. */
struct BatchGeom {
  int64_t limit, qpos0, rpos0;
};

__device__ __forceinline__ BatchGeom batch_geom(const onyx__cuda_attn_params &p, int b) {
  BatchGeom g;
  if (p.mode == ONYX__CUDA_ATTN_GQA) {
    int64_t total = (int64_t)p.seqlens[b] + 1;
    if (total < 0) total = 0;
    if (total > p.kv_rows) total = p.kv_rows;
    int64_t past = p.first ? 0 : total - p.sq;
    g.limit = total;
    g.qpos0 = past;
    g.rpos0 = past;
  } else {
    int64_t lim = p.total;
    g.qpos0 = p.past;
    if (p.nonpad != nullptr) {
      int64_t n = p.nonpad[b];
      lim = n < 0 ? 0 : (n > p.total ? p.total : n);
      g.qpos0 = n - p.sq;
    }
    if (lim > p.mask_len) lim = p.mask_len;
    if (lim > p.kv_rows) lim = p.kv_rows;
    g.limit = lim;
    g.rpos0 = 0;
  }
  return g;
}

/* Rotary table row of new token s of batch b, clamped into the table. */
__device__ __forceinline__ int64_t rope_row(const int64_t *pos_ids, int64_t pos_bs, int64_t pos_ss,
                                            int64_t pos_add_s, int64_t rpos0, int64_t rows, int b,
                                            int64_t s) {
  int64_t pos = pos_ids != nullptr ? pos_ids[b * pos_bs + s * pos_ss] + s * pos_add_s : rpos0 + s;
  if (pos < 0) pos = 0;
  if (pos >= rows) pos = rows - 1;
  return pos;
}

/* Element d of a row x (length ≥ 2·half) after rotation with table row `row`. */
template <typename T>
__device__ __forceinline__ float rope_elem(const T *x, int d, const T *cos, const T *sin, int half,
                                           int64_t row, bool interleaved) {
  if (d >= 2 * half) return ld(x, d);
  int i = interleaved ? d >> 1 : (d < half ? d : d - half);
  float c = ld(cos, row * half + i), s = ld(sin, row * half + i);
  float x1, x2;
  bool second;
  if (interleaved) {
    x1 = ld(x, 2 * i);
    x2 = ld(x, 2 * i + 1);
    second = (d & 1) != 0;
  } else {
    x1 = ld(x, i);
    x2 = ld(x, i + half);
    second = d >= half;
  }
  return second ? s * x1 + c * x2 : c * x1 - s * x2;
}

/* x plus the mask element at `at` (−inf where a boolean mask is false). */
__device__ __forceinline__ float mask_add(const void *mask, uint32_t dtype, int64_t at, float x) {
  switch (dtype) {
  case ONYX_DTYPE_BOOL:
    return ((const uint8_t *)mask)[at] != 0 ? x : -INFINITY;
  case ONYX_DTYPE_FLOAT16:
    return x + __half2float(((const __half *)mask)[at]);
  case ONYX_DTYPE_BFLOAT16:
    return x + __bfloat162float(((const __nv_bfloat16 *)mask)[at]);
  default:
    return x + ((const float *)mask)[at];
  }
}

/* Factor that turns an unnormalised accumulator with running max m and sum l (in the
 * log2 domain) into the output: exp2(m − mm) / (l·exp2(m − mm) + exp2(sink − mm)).
 * 0 when no key contributed (the row is zeros). */
__device__ __forceinline__ float finish_factor(float m, float l, bool has_sink, float sink2) {
  if (m == -INFINITY || !(l > 0.0f)) return 0.0f;
  float mm = (has_sink && sink2 > m) ? sink2 : m;
  float e = exp2f(m - mm);
  float denom = l * e + (has_sink ? exp2f(sink2 - mm) : 0.0f);
  return e / denom;
}

/* The sink of head h in the log2 domain; false when the problem has none. */
template <typename T>
__device__ __forceinline__ bool sink_log2(const onyx__cuda_attn_params &p, int h, float *out) {
  if (p.sink != nullptr) {
    *out = ld((const T *)p.sink, h) * kLog2e;
    return true;
  }
  if (p.smooth) {
    *out = 0.0f;
    return true;
  }
  return false;
}

} // namespace onyx_cuda_attn

#endif /* ONYX_CUDA_ATTN_DEVICE_CUH */
