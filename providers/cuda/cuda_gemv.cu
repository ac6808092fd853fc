/*
 * Decode products, Y[M x N] = X[M x K] · W[K x N] with few rows (M <= 4, a batch-1
 * decode step) in float16 or bfloat16, W row-major: the weights stream once, at the
 * copy bandwidth, where cuBLASLt's tile kernels read them with too few blocks in
 * flight for one row.
 *
 * A block of 256 threads owns 256 columns: thread (g, c) reads 16 bytes (8 columns)
 * of rows k = g, g + 8, ... of its block's K range, so each warp reads 512 contiguous
 * bytes of a row, and eight rows are in flight per thread (four with tune bit
 * UNROLL8 off). W is a constant: for weights of up to 16 MiB (a layer's products)
 * each warp also asks L2 for its rows 64 ahead, starting before it waits for the
 * previous kernel (PDL), and each kernel lets its dependent in at its start. The 8 row groups are
 * summed in shared memory, in float32. When there are too few column blocks to fill the device, K
 * is split across gridDim.y blocks: each writes its sums into its own rows of a float32 partial
 * buffer, and the last block of a column block to arrive (an atomic counter) adds them in split
 * order — the same result whatever the arrival order — rounds the total into Y and zeroes its
 * counter for the next call, so the counters are clean at every entry (the caller zeroes them
 * once).
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <stdlib.h>

#include "cuda_device.cuh"
#include "cuda_half8.cuh"
#include "cuda_gemv_nk.cuh"

using onyx_cuda::dependent_wait;
using onyx_cuda::launch_dependent;
using onyx_cuda::launch_dependents_now;

namespace {

constexpr int kThreads = 256, kGroups = 8, kCols = 256;

using onyx_cuda::narrow;
using onyx_cuda::widen;
using onyx_cuda::widen8;

/* 512 bytes (one warp's columns of a row) of W asked into L2 (Hopper bulk prefetch). */
__device__ __forceinline__ void l2_prefetch_row(const void *p, unsigned bytes) {
  onyx_cuda::l2_prefetch_bytes(p, bytes);
}

/* One step of U rows k, k + 8, ... of the thread's 8 columns: loads, then FMAs. */
template <class T, int M, int U>
__device__ __forceinline__ void gemv_rows(const T *__restrict__ x, const T *wp, int k, int k_total,
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
      float xv = widen(x[(int64_t)m * k_total + k + u * kGroups]);
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[m][j] = fmaf(xv, f[j], acc[m][j]);
    }
  }
}

/* tune: ONYX__CUDA_GEMV_TUNE_* bits (U is the unroll bit's). W is constant, so the
 * rows to prefetch may be asked for before the wait for the previous kernel. */
template <class T, int M, int U>
__global__ void __launch_bounds__(kThreads)
    gemv_kernel(const T *__restrict__ x, const T *__restrict__ w, T *__restrict__ y,
                float *__restrict__ partial, unsigned *__restrict__ counters, int k_total, int n,
                int chunk, int tune) {
  __shared__ float red[kGroups][M][kCols];
  __shared__ bool last;
  const int lane = threadIdx.x & 31, g = threadIdx.x >> 5;
  const int c0 = blockIdx.x * kCols + lane * 8;
  const int kb = blockIdx.y * chunk;
  const int ke = min(k_total, kb + chunk);
  const int ahead = ((tune >> 4) & 15) * 32;
  const int col_block = blockIdx.x * kCols;
  const unsigned seg = (unsigned)(min(kCols, n - col_block) * (int)sizeof(T));
  /* Lane u < U of warp g asks for row k + u·8 + ahead of each step. */
  if (ahead > 0 && lane < U)
    for (int r = kb + g + lane * kGroups; r < min(ke, kb + ahead); r += U * kGroups)
      l2_prefetch_row(w + (int64_t)r * n + col_block, seg);
  if (tune & ONYX__CUDA_GEMV_TUNE_EARLY) launch_dependents_now();
  dependent_wait();
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
      gemv_rows<T, M, U>(x, wp, k, k_total, n, acc);
    }
    for (; k < ke; k += kGroups) gemv_rows<T, M, 1>(x, wp, k, k_total, n, acc);
  }
  /* Column lane*8 + j sits at j*32 + lane: consecutive lanes, consecutive banks. */
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int j = 0; j < 8; ++j) red[g][m][j * 32 + lane] = acc[m][j];
  __syncthreads();
  const int col = threadIdx.x, cn = blockIdx.x * kCols + col;
  const int slot = (col & 7) * 32 + (col >> 3);
  float sum[M];
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float s = 0.0f;
#pragma unroll
    for (int q = 0; q < kGroups; ++q) s += red[q][m][slot];
    sum[m] = s;
  }
  if (gridDim.y == 1) {
    if (cn < n)
#pragma unroll
      for (int m = 0; m < M; ++m) narrow(&y[(int64_t)m * n + cn], sum[m]);
    return;
  }
  /* Each split writes its own sums; the last to arrive adds them in split order, so
   * the result does not depend on which block finished first. */
  if (cn < n)
#pragma unroll
    for (int m = 0; m < M; ++m) partial[((int64_t)blockIdx.y * M + m) * n + cn] = sum[m];
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

template <class T, int U>
cudaError_t launch_unrolled(const onyx__cuda_gemv_args *a, int tune, cudaStream_t stream) {
  const T *x = static_cast<const T *>(a->x);
  const T *w = static_cast<const T *>(a->w);
  T *y = static_cast<T *>(a->y);
  int split = (int)onyx__cuda_gemv_split(a->k, a->n);
  int chunk = (int)((a->k + split - 1) / split);
  dim3 grid((unsigned)((a->n + kCols - 1) / kCols), (unsigned)split);
  int k = (int)a->k, n = (int)a->n;
  switch (a->m) {
  case 1:
    return launch_dependent(gemv_kernel<T, 1, U>, grid, kThreads, stream, x, w, y, a->partial,
                            a->counters, k, n, chunk, tune);
  case 2:
    return launch_dependent(gemv_kernel<T, 2, U>, grid, kThreads, stream, x, w, y, a->partial,
                            a->counters, k, n, chunk, tune);
  case 3:
    return launch_dependent(gemv_kernel<T, 3, U>, grid, kThreads, stream, x, w, y, a->partial,
                            a->counters, k, n, chunk, tune);
  default:
    return launch_dependent(gemv_kernel<T, 4, U>, grid, kThreads, stream, x, w, y, a->partial,
                            a->counters, k, n, chunk, tune);
  }
}

/* ONYX_CUDA_GEMV_TUNE, a number of ONYX__CUDA_GEMV_TUNE_* bits, replaces the choice
 * below: the device checks run each form through the whole provider so. */
int env_tune() {
  static int v = -2;
  if (v == -2) {
    const char *e = getenv("ONYX_CUDA_GEMV_TUNE");
    v = e != nullptr && *e != '\0' ? (int)strtol(e, nullptr, 0) : -1;
  }
  return v;
}

/* Chosen on the H200 by the device bench (tests/cuda/bench_gemv_chain.c): 8 rows in
 * flight (the lm_head 70.8 us against 73.2); rows asked into L2 64 ahead for weights
 * up to 16 MiB (a layer's products 5-10% faster in a chain), not beyond (the lm_head
 * 84.8 us so: it streams at the bandwidth anyway). */
constexpr int64_t kPrefetchMaxBytes = 16ll << 20;

template <class T> cudaError_t launch_typed(const onyx__cuda_gemv_args *a, cudaStream_t stream) {
  const bool small = a->k * a->n * (int64_t)sizeof(T) <= kPrefetchMaxBytes;
  const int forced = env_tune();
  const int tune = a->tune & ONYX__CUDA_GEMV_TUNE_SET ? a->tune
                   : forced >= 0                      ? forced
                                 : ONYX__CUDA_GEMV_TUNE_UNROLL8 | ONYX__CUDA_GEMV_TUNE_EARLY |
                                       (small ? 2 << 4 : 0);
  return tune & ONYX__CUDA_GEMV_TUNE_UNROLL8 ? launch_unrolled<T, 8>(a, tune, stream)
                                             : launch_unrolled<T, 4>(a, tune, stream);
}

} // namespace

extern "C" int64_t onyx__cuda_gemv_split(int64_t k, int64_t n) {
  /* Enough blocks for two per SM of an H100/H200-sized device, each at least 32 rows. */
  int64_t col_blocks = (n + kCols - 1) / kCols;
  int64_t want = (264 + col_blocks - 1) / col_blocks;
  int64_t most = k / 32 > 0 ? k / 32 : 1;
  if (want > most) want = most;
  if (want > 65535) want = 65535;
  return want < 1 ? 1 : want;
}

extern "C" bool onyx__cuda_gemv_nk_fits(int64_t m, int64_t k, int64_t n, size_t esize) {
  return onyx_cuda::gemv_nk::fits(m, k, n, esize);
}

/* W as [N, K]: cuda_gemv_nk.cuh's kernel, A copied into shared memory. */
template <class T>
static cudaError_t launch_nk(const onyx__cuda_gemv_args *a, cudaStream_t stream) {
  using namespace onyx_cuda::gemv_nk;
  copy_prologue<T> pro = {static_cast<const T *>(a->x), a->k};
  return launch<T>(pro, a->w, a->y, a->m, a->k, a->n, a->alpha, a->tune, stream);
}

extern "C" cudaError_t onyx__cuda_launch_gemv(const onyx__cuda_gemv_args *a, cudaStream_t stream) {
  if (a->w_nk) {
    if (a->m > ONYX__CUDA_GEMV_MAX_ROWS || (((uintptr_t)a->x | (uintptr_t)a->w) & 15u) != 0)
      return cudaErrorInvalidValue;
    if (a->dtype == ONYX_DTYPE_FLOAT16) return launch_nk<__half>(a, stream);
    if (a->dtype == ONYX_DTYPE_BFLOAT16) return launch_nk<__nv_bfloat16>(a, stream);
    return cudaErrorInvalidValue;
  }
  if (a->m < 1 || a->m > ONYX__CUDA_GEMV_MAX_ROWS || a->n < 8 || a->n % 8 != 0 || a->k < 1 ||
      a->k > INT32_MAX || a->n > INT32_MAX)
    return cudaErrorInvalidValue;
  if (a->dtype == ONYX_DTYPE_FLOAT16) return launch_typed<__half>(a, stream);
  if (a->dtype == ONYX_DTYPE_BFLOAT16) return launch_typed<__nv_bfloat16>(a, stream);
  return cudaErrorInvalidValue;
}
