/*
 * The decode GEMV of the fused product kernels (cuda_norm_matmul.cu, cuda_silu_matmul.cu):
 * Y[m x n] = A · W for few 16-bit rows, where A is no tensor but what a prologue
 * computes, after the PDL wait, for the block's own K range into shared memory.
 *
 * The product is cuda_gemv.cu's: a block of 256 threads owns 256 columns, thread
 * (g, c) reads 16 bytes (8 columns) of rows g, g + 8, ... of its block's K range, 8
 * rows in flight, W asked into L2 64 rows ahead before the wait for the previous kernel
 * (PDL; W is a constant), K split across gridDim.y blocks when there are few column
 * blocks, the last block of a column to arrive adding the splits in split order. A
 * block's K range is at most kChunk rows, so the A slice fits beside the reduction
 * buffer in static shared memory (40 KiB at 4 rows); onyx__cuda_gemv_a_split raises the
 * split to keep it so (K = 18944: 37 splits).
 *
 * A prologue P is a small struct passed by value: P::fill<M>(kb, ke, hx) writes
 * hx[m][i] = A[m, kb + i] for i < ke - kb, ending with __syncthreads(); P::from_row(r0)
 * is the prologue of rows r0, r0 + 1, ... (the launcher runs ROWS rows a launch).
 */
#ifndef ONYX_CUDA_GEMV_A_CUH
#define ONYX_CUDA_GEMV_A_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "cuda_device.cuh"
#include "cuda_half8.cuh"

namespace onyx_cuda {
namespace gemv_a {

constexpr int kThreads = 256, kGroups = 8, kCols = 256, kChunk = 512, kWarps = kThreads / 32;
constexpr int kRows = 4;                          /* rows a launch */
constexpr int64_t kPrefetchMaxBytes = 16ll << 20; /* as cuda_gemv.cu's */

using onyx_cuda::narrow;
using onyx_cuda::round_to;
using onyx_cuda::widen;
using onyx_cuda::widen8;

__device__ __forceinline__ void l2_prefetch_row(const void *p, unsigned bytes) {
  onyx_cuda::l2_prefetch_bytes(p, bytes);
}

/* One step of U rows k, k + 8, ... of the thread's 8 columns, A from shared memory. */
template <class T, int M, int U>
__device__ __forceinline__ void rows_step(const float (&hx)[M][kChunk], const T *wp, int k, int kb,
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

template <class T, int M, int U, class P>
__global__ void __launch_bounds__(kThreads)
    kernel(P pro, const T *__restrict__ w, T *__restrict__ y, float *__restrict__ partial,
           unsigned *__restrict__ counters, int k_total, int n, int chunk, int tune) {
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
  pro.template fill<M>(kb, ke, hx);
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
      rows_step<T, M, U>(hx, wp, k, kb, n, acc);
    }
    for (; k < ke; k += kGroups) rows_step<T, M, 1>(hx, wp, k, kb, n, acc);
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

/* The K split: the GEMV's, raised so that no block takes more than kChunk rows. */
inline int64_t split(int64_t k, int64_t n) {
  int64_t s = onyx__cuda_gemv_split(k, n), need = (k + kChunk - 1) / kChunk;
  return s > need ? s : need;
}

/* One launch of m <= kRows rows: Y rows at y, A from pro. */
template <class T, int U, class P>
cudaError_t launch_rows(const P &pro, const T *w, T *y, float *partial, unsigned *counters,
                        int64_t m, int64_t k64, int64_t n64, int tune, cudaStream_t stream) {
  int sp = (int)split(k64, n64);
  int chunk = (int)((k64 + sp - 1) / sp);
  dim3 grid((unsigned)((n64 + kCols - 1) / kCols), (unsigned)sp);
  int k = (int)k64, n = (int)n64;
#define GEMV_A_LAUNCH(M)                                                                           \
  launch_dependent(kernel<T, M, U, P>, grid, kThreads, stream, pro, w, y, partial, counters, k, n, \
                   chunk, tune)
  switch (m) {
  case 1:
    return GEMV_A_LAUNCH(1);
  case 2:
    return GEMV_A_LAUNCH(2);
  case 3:
    return GEMV_A_LAUNCH(3);
  default:
    return GEMV_A_LAUNCH(4);
  }
#undef GEMV_A_LAUNCH
}

/* Y[m x n] = A · W, kRows rows a launch (each launch streams W again: correct, but the
 * kernels send prompts to their cuBLASLt route). tune_in: 0 for the default. */
template <class T, class P>
cudaError_t launch(const P &pro, const void *wv, void *yv, float *partial, unsigned *counters,
                   int64_t m, int64_t k, int64_t n, int tune_in, cudaStream_t stream) {
  const T *w = static_cast<const T *>(wv);
  T *y = static_cast<T *>(yv);
  const bool small = k * n * (int64_t)sizeof(T) <= kPrefetchMaxBytes;
  const int tune =
      tune_in & ONYX__CUDA_GEMV_TUNE_SET
          ? tune_in
          : ONYX__CUDA_GEMV_TUNE_UNROLL8 | ONYX__CUDA_GEMV_TUNE_EARLY | (small ? 2 << 4 : 0);
  for (int64_t r0 = 0; r0 < m; r0 += kRows) {
    int64_t rows = m - r0 < kRows ? m - r0 : kRows;
    P p = pro.from_row(r0);
    cudaError_t e =
        tune & ONYX__CUDA_GEMV_TUNE_UNROLL8
            ? launch_rows<T, 8>(p, w, y + r0 * n, partial, counters, rows, k, n, tune, stream)
            : launch_rows<T, 4>(p, w, y + r0 * n, partial, counters, rows, k, n, tune, stream);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

} // namespace gemv_a
} // namespace onyx_cuda

#endif /* ONYX_CUDA_GEMV_A_CUH */
