/*
 * Decode products with W stored [N, K] (transB = 1: the transpose_weights pass stores a
 * 16-bit product weight so where this kernel runs it): Y[m x n] = A[m x k] · W^T for
 * few 16-bit rows (m <= 4), used by MatMul's FusedMatMul form, RMSNormMatMul and
 * SiluMulMatMul.
 *
 * Each output column is one contiguous row of W, so a group of G warps owns R whole
 * rows and reads them 512 bytes a step (16 bytes a lane), the G warps taking
 * interleaved batches of steps; sums stay in registers and end with a shuffle (and,
 * for G = 4, a fixed-order sum of the four warps in shared memory): no split of K
 * across blocks, no partials, no last-block pass — the fixed cost that dominated the
 * [K, N] kernel's small products. G is 1 unless tune bit NK_SPLIT4 asks for 4 (see
 * split_rows). W is a constant, so each warp loads its first steps of W into registers
 * (and, with tune bits 4-7, asks L2 for the rest of its rows) before the PDL wait for
 * the previous kernel: a product's weight streaming overlaps the tail of the kernel
 * before it.
 *
 * A is what a prologue computes after the wait, all K of its m rows, into shared
 * memory as T (what the unfused producer stored, so nothing is rounded twice):
 * P::fill<M>(hx, k) writes hx[r * k + i] = A[r, i] with the block's threads and ends
 * with __syncthreads(); P::from_row(r0) is the prologue of rows r0, r0 + 1, ....
 * Shared memory is m·k·sizeof(T) bytes, at most kMaxSmem (the route's condition).
 */
#ifndef ONYX_CUDA_GEMV_NK_CUH
#define ONYX_CUDA_GEMV_NK_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <stdlib.h>

#include "cuda_device.cuh"
#include "cuda_half8.cuh"

namespace onyx_cuda {
namespace gemv_nk {

constexpr int kThreads = 128, kWarps = kThreads / 32;
constexpr int kStep = 256;         /* elements of a row a warp reads a step */
constexpr int kInFlight = 4;       /* 16-byte loads of W in flight a lane (R rows x steps) */
constexpr int kRows = 4;           /* rows of A a launch */
constexpr int kMaxSmem = 44 << 10; /* A in shared memory: under the 48 KiB launch limit */
constexpr int kTargetBlocks = 264; /* two blocks per SM of an H100/H200 */

using onyx_cuda::narrow;
using onyx_cuda::pack8;
using onyx_cuda::widen8;

/* S steps of R rows from step s0: zero where past K or past the last row. */
template <class T, int R, int S>
__device__ __forceinline__ void load_steps(uint4 (&v)[S][R], const T *__restrict__ w, int row0,
                                           int s0, int lane, int k, int n) {
#pragma unroll
  for (int s = 0; s < S; ++s) {
    const int kk = ((s0 + s) * 32 + lane) * 8;
#pragma unroll
    for (int r = 0; r < R; ++r)
      v[s][r] = kk < k && row0 + r < n
                    ? __ldg(reinterpret_cast<const uint4 *>(w + (int64_t)(row0 + r) * k + kk))
                    : make_uint4(0u, 0u, 0u, 0u);
  }
}

/* acc[m][r] += A[m, step's 8 elements] · W[row r, same]. */
template <class T, int M, int R, int S>
__device__ __forceinline__ void fma_steps(float (&acc)[M][R], const uint4 (&v)[S][R], const T *hx,
                                          int s0, int lane, int k) {
#pragma unroll
  for (int s = 0; s < S; ++s) {
    const int kk = ((s0 + s) * 32 + lane) * 8;
    if (kk >= k) break;
    float a[M][8];
#pragma unroll
    for (int m = 0; m < M; ++m)
      widen8(*reinterpret_cast<const uint4 *>(hx + (int64_t)m * k + kk), hx, a[m]);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float f[8];
      widen8(v[s][r], hx, f);
#pragma unroll
      for (int m = 0; m < M; ++m)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[m][r] = fmaf(a[m][j], f[j], acc[m][r]);
    }
  }
}

/* The sums of a group's G warps, added in warp order (the same result whatever the
 * timing), alpha applied and rounded into Y by the group's first lane. */
template <class T, int M, int R, int G>
__device__ __forceinline__ void store_rows(float (&acc)[M][R], T *__restrict__ y, int row0, int n,
                                           float alpha) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) acc[m][r] += __shfl_xor_sync(0xffffffffu, acc[m][r], o);
  if (G > 1) {
    __shared__ float part[kWarps][M][R];
    if (lane == 0)
#pragma unroll
      for (int m = 0; m < M; ++m)
#pragma unroll
        for (int r = 0; r < R; ++r) part[warp][m][r] = acc[m][r];
    __syncthreads();
    if (warp % G != 0) return;
#pragma unroll
    for (int m = 0; m < M; ++m)
#pragma unroll
      for (int r = 0; r < R; ++r) {
        float t = 0.0f;
#pragma unroll
        for (int q = 0; q < G; ++q) t += part[warp + q][m][r];
        acc[m][r] = t;
      }
  }
  if (lane != 0) return;
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < R; ++r)
      if (row0 + r < n) narrow(&y[(int64_t)m * n + row0 + r], alpha * acc[m][r]);
}

/* tune: ONYX__CUDA_GEMV_TUNE_EARLY lets the next kernel in at the start; bits 4-7
 * nonzero ask L2 for each row's bytes past the first steps before the wait. Warp
 * (group, j) of a block takes batches j, j + G, ... of S steps of its group's rows. */
template <class T, int M, int R, int G, class P>
__global__ void __launch_bounds__(kThreads)
    kernel(P pro, const T *__restrict__ w, T *__restrict__ y, int k, int n, float alpha, int tune) {
  constexpr int S = G == 1 ? kInFlight / R : 2; /* steps in flight a batch */
  extern __shared__ uint4 smem[];
  T *hx = reinterpret_cast<T *>(smem);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, j = warp % G;
  const int row0 = (blockIdx.x * (kWarps / G) + warp / G) * R;
  const int steps = (k + kStep - 1) / kStep;
  uint4 v[S][R];
  load_steps<T, R, S>(v, w, row0, j * S, lane, k, n);
  const int ahead = S * kStep; /* elements in registers: prefetch the rest (G = 1) */
  if (G == 1 && (tune >> 4) & 15 && lane < R && row0 + lane < n && k > ahead)
    onyx_cuda::l2_prefetch_bytes(w + (int64_t)(row0 + lane) * k + ahead,
                                 (unsigned)(k - ahead) * sizeof(T));
  if (tune & ONYX__CUDA_GEMV_TUNE_EARLY) launch_dependents_now();
  dependent_wait();
  pro.template fill<M>(hx, k);
  float acc[M][R];
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < R; ++r) acc[m][r] = 0.0f;
  for (int s0 = j * S; s0 < steps; s0 += G * S) {
    uint4 next[S][R];
    if (s0 + G * S < steps) load_steps<T, R, S>(next, w, row0, s0 + G * S, lane, k, n);
    fma_steps<T, M, R, S>(acc, v, hx, s0, lane, k);
#pragma unroll
    for (int s = 0; s < S; ++s)
#pragma unroll
      for (int r = 0; r < R; ++r) v[s][r] = next[s][r];
  }
  store_rows<T, M, R, G>(acc, y, row0, n, alpha);
}

/* Rows of W a warp: the most (4, 2, 1) that still gives the device enough blocks. */
inline int rows_per_warp(int64_t n) {
  for (int r = 4; r > 1; r /= 2)
    if ((n + kWarps * r - 1) / (kWarps * r) >= kTargetBlocks) return r;
  return 1;
}

/* Four warps a row only when tune bit SPLIT4 asks: on the H200 it wins the down
 * product in a chain of its own (107 us against 118 for 24) but loses in the decoder
 * (955 us a step with one warp a row, 1,010 with four on the down product), where each
 * of its 4x as many blocks recomputes the whole A row in its prologue. */
inline bool split_rows(int tune) { return (tune & ONYX__CUDA_GEMV_TUNE_NK_SPLIT4) != 0; }

/* Whether m rows of k fit the route: A in shared memory, 16-byte rows. */
inline bool fits(int64_t m, int64_t k, int64_t n, size_t esize) {
  int64_t rows = m < kRows ? m : kRows;
  return m >= 1 && k >= 8 && k % 8 == 0 && n >= 1 && k <= INT32_MAX && n <= INT32_MAX &&
         rows * k * (int64_t)esize <= kMaxSmem;
}

template <class T, int M, class P>
cudaError_t launch_m(const P &pro, const T *w, T *y, int k, int n, float alpha, int tune,
                     cudaStream_t stream) {
  const size_t smem = (size_t)M * (size_t)k * sizeof(T);
  if (split_rows(tune))
    return launch_dependent_smem(kernel<T, M, 1, kWarps, P>, dim3((unsigned)n), kThreads, smem,
                                 stream, pro, w, y, k, n, alpha, tune);
  const int r = rows_per_warp(n);
  const dim3 grid((unsigned)((n + kWarps * r - 1) / (kWarps * r)));
  if (r == 4)
    return launch_dependent_smem(kernel<T, M, 4, 1, P>, grid, kThreads, smem, stream, pro, w, y, k,
                                 n, alpha, tune);
  if (r == 2)
    return launch_dependent_smem(kernel<T, M, 2, 1, P>, grid, kThreads, smem, stream, pro, w, y, k,
                                 n, alpha, tune);
  return launch_dependent_smem(kernel<T, M, 1, 1, P>, grid, kThreads, smem, stream, pro, w, y, k, n,
                               alpha, tune);
}

/* The default form, measured on the H200 in the 24-layer Qwen2.5-0.5B-shaped fp16 decoder
 * (tools/bench/bench_genai_cuda.py): the next kernel let in only as blocks end (955 us a
 * step; 1,147 us when let in at the start, where the following kernels' blocks sit on
 * the SMs waiting while the products they follow still stream — though the small qkv
 * and o products of a bare chain gain from it), nothing asked into L2 (1,169 us with
 * the ask). */
inline int default_tune() { return 0; }

/* ONYX_CUDA_GEMV_NK_TUNE, a number of ONYX__CUDA_GEMV_TUNE_* bits, replaces the default
 * of every [N, K] launch (the device bench runs each form through the whole decoder). */
inline int env_tune() {
  static int v = -2;
  if (v == -2) {
    const char *e = getenv("ONYX_CUDA_GEMV_NK_TUNE");
    v = e != nullptr && *e != '\0' ? (int)strtol(e, nullptr, 0) | ONYX__CUDA_GEMV_TUNE_SET : -1;
  }
  return v;
}

/* Y[m x n] = A · W^T, kRows rows of A a launch. tune_in: 0 for the default. */
template <class T, class P>
cudaError_t launch(const P &pro, const void *wv, void *yv, int64_t m, int64_t k, int64_t n,
                   float alpha, int tune_in, cudaStream_t stream) {
  if (!fits(m, k, n, sizeof(T))) return cudaErrorInvalidValue;
  const T *w = static_cast<const T *>(wv);
  T *y = static_cast<T *>(yv);
  const int tune = tune_in & ONYX__CUDA_GEMV_TUNE_SET ? tune_in
                   : env_tune() >= 0                  ? env_tune()
                                                      : default_tune();
  for (int64_t r0 = 0; r0 < m; r0 += kRows) {
    const int64_t rows = m - r0 < kRows ? m - r0 : kRows;
    const P p = pro.from_row(r0);
    T *yr = y + r0 * n;
    cudaError_t e;
    switch (rows) {
    case 1:
      e = launch_m<T, 1>(p, w, yr, (int)k, (int)n, alpha, tune, stream);
      break;
    case 2:
      e = launch_m<T, 2>(p, w, yr, (int)k, (int)n, alpha, tune, stream);
      break;
    case 3:
      e = launch_m<T, 3>(p, w, yr, (int)k, (int)n, alpha, tune, stream);
      break;
    default:
      e = launch_m<T, 4>(p, w, yr, (int)k, (int)n, alpha, tune, stream);
      break;
    }
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

/* The plain prologue: A is a tensor, rows of k contiguous (MatMul's X). */
template <class T> struct copy_prologue {
  const T *x;
  int64_t k;

  copy_prologue from_row(int64_t r0) const { return copy_prologue{x + r0 * k, k}; }

  template <int M> __device__ __forceinline__ void fill(T *hx, int kk) const {
    const uint4 *src = reinterpret_cast<const uint4 *>(x);
    uint4 *dst = reinterpret_cast<uint4 *>(hx);
    for (int i = threadIdx.x; i < M * kk / 8; i += kThreads) dst[i] = src[i];
    __syncthreads();
  }
};

} // namespace gemv_nk
} // namespace onyx_cuda

#endif /* ONYX_CUDA_GEMV_NK_CUH */
