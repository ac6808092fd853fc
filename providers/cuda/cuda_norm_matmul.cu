/*
 * ai.onyx::RMSNormMatMul for decode (docs/ops.md): Y = rmsnorm(X + skip)·gamma · W and
 * S = X + skip, for few 16-bit rows, in one launch where a norm kernel and a GEMV
 * kernel ran before.
 *
 * The product is cuda_gemv.cu's: a block of 256 threads owns 256 columns, thread
 * (g, c) reads 16 bytes (8 columns) of rows g, g + 8, ... of its block's K range, 8
 * rows in flight, W asked into L2 64 rows ahead before the wait for the previous kernel
 * (PDL; W is a constant), K split across gridDim.y blocks when there are few column
 * blocks, the last block of a column to arrive adding the splits in split order. What
 * is new is the A operand: after the wait each block sums the squares of its rows of
 * X + skip over the whole K (K ≤ a few thousand: a few KiB from L2), takes
 * rsqrt(mean + epsilon), and writes its own K range of the normed rows, rounded to T
 * as the norm kernel's output was, into shared memory; the product reads them from
 * there. Block (0, 0) also writes S. The K range a block takes is at most kChunk
 * rows, so the normed slice fits beside the reduction buffer in static shared memory.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "cuda_device.cuh"
#include "cuda_norm_matmul.h"

using onyx_cuda::dependent_wait;
using onyx_cuda::launch_dependent;
using onyx_cuda::launch_dependents_now;

namespace {

constexpr int kThreads = 256, kGroups = 8, kCols = 256, kChunk = 512, kWarps = kThreads / 32;

__device__ __forceinline__ void widen8(uint4 v, const __half *, float *f) {
  const __half2 *h = reinterpret_cast<const __half2 *>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 t = __half22float2(h[i]);
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}

__device__ __forceinline__ void widen8(uint4 v, const __nv_bfloat16 *, float *f) {
  const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float2 t = __bfloat1622float2(h[i]);
    f[2 * i] = t.x;
    f[2 * i + 1] = t.y;
  }
}

__device__ __forceinline__ float widen(__half v) { return __half2float(v); }
__device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ void narrow(__half *p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void narrow(__nv_bfloat16 *p, float v) { *p = __float2bfloat16_rn(v); }
/* v rounded to T and back: the normed rows as the norm kernel would have stored them. */
__device__ __forceinline__ float round_to(const __half *, float v) {
  return __half2float(__float2half_rn(v));
}
__device__ __forceinline__ float round_to(const __nv_bfloat16 *, float v) {
  return __bfloat162float(__float2bfloat16_rn(v));
}

__device__ __forceinline__ void l2_prefetch_row(const void *p, unsigned bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint64_t g;
  asm("cvta.to.global.u64 %0, %1;" : "=l"(g) : "l"(p));
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(g), "r"(bytes) : "memory");
#else
  (void)p, (void)bytes;
#endif
}

template <class T>
__device__ __forceinline__ float row_value(const T *__restrict__ x, const T *__restrict__ skip,
                                           int64_t i) {
  float v = widen(x[i]);
  return skip != nullptr ? v + widen(skip[i]) : v;
}

/* The normed rows of this block's K range [kb, ke) into hx (and S from block (0, 0)). */
template <class T, int M>
__device__ __forceinline__ void
normed_rows(const T *__restrict__ x, const T *__restrict__ skip, const T *__restrict__ gamma,
            T *__restrict__ sum, int k_total, int kb, int ke, float eps, float (&hx)[M][kChunk]) {
  __shared__ float ssq[M][kWarps];
  __shared__ float inv[M];
  const bool writes_sum = sum != nullptr && blockIdx.x == 0 && blockIdx.y == 0;
  float ss[M];
#pragma unroll
  for (int m = 0; m < M; ++m) ss[m] = 0.0f;
  for (int k = threadIdx.x; k < k_total; k += kThreads)
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float v = row_value(x, skip, (int64_t)m * k_total + k);
      ss[m] = fmaf(v, v, ss[m]);
      if (writes_sum) narrow(&sum[(int64_t)m * k_total + k], v);
    }
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float t = ss[m];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
    if ((threadIdx.x & 31) == 0) ssq[m][threadIdx.x >> 5] = t;
  }
  __syncthreads();
  if (threadIdx.x < M) {
    float t = 0.0f;
#pragma unroll
    for (int q = 0; q < kWarps; ++q) t += ssq[threadIdx.x][q];
    inv[threadIdx.x] = rsqrtf(t / (float)k_total + eps);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < ke - kb; i += kThreads) {
    float g = widen(gamma[kb + i]);
#pragma unroll
    for (int m = 0; m < M; ++m)
      hx[m][i] = round_to(gamma, row_value(x, skip, (int64_t)m * k_total + kb + i) * inv[m] * g);
  }
  __syncthreads();
}

/* One step of U rows k, k + 8, ... of the thread's 8 columns, A from shared memory. */
template <class T, int M, int U>
__device__ __forceinline__ void nmm_rows(const float (&hx)[M][kChunk], const T *wp, int k, int kb,
                                         int n, float (&acc)[M][8]) {
  uint4 v[U];
#pragma unroll
  for (int u = 0; u < U; ++u)
    v[u] = __ldg(reinterpret_cast<const uint4 *>(wp + (int64_t)(k + u * kGroups) * n));
#pragma unroll
  for (int u = 0; u < U; ++u) {
    float f[8];
    widen8(v[u], wp, f);
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float xv = hx[m][k - kb + u * kGroups];
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[m][j] = fmaf(xv, f[j], acc[m][j]);
    }
  }
}

template <class T, int M, int U>
__global__ void __launch_bounds__(kThreads)
    nmm_kernel(const T *__restrict__ x, const T *__restrict__ skip, const T *__restrict__ gamma,
               const T *__restrict__ w, T *__restrict__ y, T *__restrict__ sum,
               float *__restrict__ partial, unsigned *__restrict__ counters, int k_total, int n,
               int chunk, float eps, int tune) {
  __shared__ float red[kGroups][M][kCols];
  __shared__ float hx[M][kChunk];
  __shared__ bool last;
  const int lane = threadIdx.x & 31, g = threadIdx.x >> 5;
  const int c0 = blockIdx.x * kCols + lane * 8;
  const int kb = blockIdx.y * chunk;
  const int ke = min(k_total, kb + chunk);
  const int ahead = ((tune >> 4) & 15) * 32;
  const int col_block = blockIdx.x * kCols;
  const unsigned seg = (unsigned)(min(kCols, n - col_block) * (int)sizeof(T));
  if (ahead > 0 && lane < U)
    for (int r = kb + g + lane * kGroups; r < min(ke, kb + ahead); r += U * kGroups)
      l2_prefetch_row(w + (int64_t)r * n + col_block, seg);
  if (tune & ONYX__CUDA_GEMV_TUNE_EARLY) launch_dependents_now();
  dependent_wait();
  normed_rows<T, M>(x, skip, gamma, sum, k_total, kb, ke, eps, hx);
  float acc[M][8];
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[m][j] = 0.0f;
  if (c0 < n) {
    const T *wp = w + c0;
    int k = kb + g;
    for (; k + (U - 1) * kGroups < ke; k += U * kGroups) {
      if (ahead > 0 && lane < U && k + lane * kGroups + ahead < ke)
        l2_prefetch_row(w + (int64_t)(k + lane * kGroups + ahead) * n + col_block, seg);
      nmm_rows<T, M, U>(hx, wp, k, kb, n, acc);
    }
    for (; k < ke; k += kGroups) nmm_rows<T, M, 1>(hx, wp, k, kb, n, acc);
  }
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int j = 0; j < 8; ++j) red[g][m][j * 32 + lane] = acc[m][j];
  __syncthreads();
  const int col = threadIdx.x, cn = blockIdx.x * kCols + col;
  const int slot = (col & 7) * 32 + (col >> 3);
  float total[M];
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float s = 0.0f;
#pragma unroll
    for (int q = 0; q < kGroups; ++q) s += red[q][m][slot];
    total[m] = s;
  }
  if (gridDim.y == 1) {
    if (cn < n)
#pragma unroll
      for (int m = 0; m < M; ++m) narrow(&y[(int64_t)m * n + cn], total[m]);
    return;
  }
  if (cn < n)
#pragma unroll
    for (int m = 0; m < M; ++m) partial[((int64_t)blockIdx.y * M + m) * n + cn] = total[m];
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(&counters[blockIdx.x], 1u) == gridDim.y - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  if (cn < n)
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float t = 0.0f;
      for (unsigned q = 0; q < gridDim.y; ++q) t += __ldcg(&partial[((int64_t)q * M + m) * n + cn]);
      narrow(&y[(int64_t)m * n + cn], t);
    }
  if (threadIdx.x == 0) counters[blockIdx.x] = 0;
}

/* One launch of m <= ROWS rows starting at row r0. */
template <class T, int U>
cudaError_t launch_rows(const onyx__cuda_nmm_args *a, int64_t r0, int64_t m, int tune,
                        cudaStream_t stream) {
  const T *x = static_cast<const T *>(a->x) + r0 * a->k;
  const T *skip = a->skip ? static_cast<const T *>(a->skip) + r0 * a->k : nullptr;
  const T *gamma = static_cast<const T *>(a->gamma), *w = static_cast<const T *>(a->w);
  T *y = static_cast<T *>(a->y) + r0 * a->n;
  T *sum = a->sum ? static_cast<T *>(a->sum) + r0 * a->k : nullptr;
  int split = (int)onyx__cuda_nmm_split(a->k, a->n);
  int chunk = (int)((a->k + split - 1) / split);
  dim3 grid((unsigned)((a->n + kCols - 1) / kCols), (unsigned)split);
  int k = (int)a->k, n = (int)a->n;
#define NMM_LAUNCH(M)                                                                              \
  launch_dependent(nmm_kernel<T, M, U>, grid, kThreads, stream, x, skip, gamma, w, y, sum,         \
                   a->partial, a->counters, k, n, chunk, a->epsilon, tune)
  switch (m) {
  case 1:
    return NMM_LAUNCH(1);
  case 2:
    return NMM_LAUNCH(2);
  case 3:
    return NMM_LAUNCH(3);
  default:
    return NMM_LAUNCH(4);
  }
#undef NMM_LAUNCH
}

constexpr int64_t kPrefetchMaxBytes = 16ll << 20; /* as cuda_gemv.cu's */

template <class T> cudaError_t launch_typed(const onyx__cuda_nmm_args *a, cudaStream_t stream) {
  const bool small = a->k * a->n * (int64_t)sizeof(T) <= kPrefetchMaxBytes;
  const int tune =
      a->tune & ONYX__CUDA_GEMV_TUNE_SET
          ? a->tune
          : ONYX__CUDA_GEMV_TUNE_UNROLL8 | ONYX__CUDA_GEMV_TUNE_EARLY | (small ? 2 << 4 : 0);
  /* More rows than a launch takes run ROWS at a time, each launch streaming W again:
   * correct, but cuda_norm_matmul.c sends such prompts to the norm + cuBLASLt route. */
  for (int64_t r0 = 0; r0 < a->m; r0 += ONYX__CUDA_NMM_ROWS) {
    int64_t m = a->m - r0 < ONYX__CUDA_NMM_ROWS ? a->m - r0 : ONYX__CUDA_NMM_ROWS;
    cudaError_t e = tune & ONYX__CUDA_GEMV_TUNE_UNROLL8 ? launch_rows<T, 8>(a, r0, m, tune, stream)
                                                        : launch_rows<T, 4>(a, r0, m, tune, stream);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

} // namespace

extern "C" int64_t onyx__cuda_nmm_split(int64_t k, int64_t n) {
  int64_t split = onyx__cuda_gemv_split(k, n), need = (k + kChunk - 1) / kChunk;
  return split > need ? split : need;
}

extern "C" cudaError_t onyx__cuda_launch_nmm(const onyx__cuda_nmm_args *a, cudaStream_t stream) {
  if (a->m < 1 || a->n < 8 || a->n % 8 != 0 || a->k < 1 || a->k > INT32_MAX || a->n > INT32_MAX ||
      onyx__cuda_nmm_split(a->k, a->n) > 65535)
    return cudaErrorInvalidValue;
  if (a->dtype == ONYX_DTYPE_FLOAT16) return launch_typed<__half>(a, stream);
  if (a->dtype == ONYX_DTYPE_BFLOAT16) return launch_typed<__nv_bfloat16>(a, stream);
  return cudaErrorInvalidValue;
}
