/*
 * ai.onyx::RMSNormMatMul for decode (docs/ops.md): Y = rmsnorm(X + skip)·gamma · W and
 * S = X + skip, for few 16-bit rows, in one launch where a norm kernel and a GEMV
 * kernel ran before.
 *
 * The product is the fused-A GEMV of cuda_gemv_a.cuh (cuda_gemv.cu's, W into L2 before
 * the PDL wait, K split with partials). What is particular here is its prologue, the A
 * operand: after the wait each block sums the squares of its rows of X + skip over the
 * whole K (K ≤ a few thousand: a few KiB from L2), takes rsqrt(mean + epsilon), and
 * writes its own K range of the normed rows, rounded to T as the norm kernel's output
 * was, into shared memory; the product reads them from there. Block (0, 0) also
 * writes S.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "cuda_gemv_a.cuh"
#include "cuda_gemv_nk.cuh"
#include "cuda_norm_matmul.h"

namespace {

using namespace onyx_cuda::gemv_a;

template <class T>
__device__ __forceinline__ float row_value(const T *__restrict__ x, const T *__restrict__ skip,
                                           int64_t i) {
  /* __ldg: the prologue's inputs reach the kernel inside a struct, which keeps no
   * __restrict__; the read-only path is stated instead (the loads the kernel had). */
  float v = widen(__ldg(&x[i]));
  return skip != nullptr ? v + widen(__ldg(&skip[i])) : v;
}

/* inv[m] = 1 / rms of each row from each thread's partial sums of squares ss[m], by a
 * block of THREADS threads. Ends with the block synchronised. */
template <int M, int THREADS>
__device__ __forceinline__ void block_inv_rms(const float (&ss)[M], int k_total, float eps,
                                              float *inv) {
  __shared__ float ssq[M][THREADS / 32];
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
    for (int q = 0; q < THREADS / 32; ++q) t += ssq[threadIdx.x][q];
    inv[threadIdx.x] = rsqrtf(t / (float)k_total + eps);
  }
  __syncthreads();
}

/* inv[m] = 1 / rms(X + skip) of each row, by a block of THREADS threads (and S written
 * by the block that writes_sum). Ends with the block synchronised. */
template <class T, int M, int THREADS>
__device__ __forceinline__ void row_scales(const T *__restrict__ x, const T *__restrict__ skip,
                                           T *__restrict__ sum, bool writes_sum, int k_total,
                                           float eps, float *inv) {
  float ss[M];
#pragma unroll
  for (int m = 0; m < M; ++m) ss[m] = 0.0f;
  for (int k = threadIdx.x; k < k_total; k += THREADS)
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float v = row_value(x, skip, (int64_t)m * k_total + k);
      ss[m] = fmaf(v, v, ss[m]);
      if (writes_sum) narrow(&sum[(int64_t)m * k_total + k], v);
    }
  block_inv_rms<M, THREADS>(ss, k_total, eps, inv);
}

/* The normed rows of this block's K range [kb, ke) into hx (and S from block (0, 0)). */
template <class T, int M>
__device__ __forceinline__ void
normed_rows(const T *__restrict__ x, const T *__restrict__ skip, const T *__restrict__ gamma,
            T *__restrict__ sum, int k_total, int kb, int ke, float eps, float (&hx)[M][kChunk]) {
  __shared__ float inv[M];
  const bool writes_sum = sum != nullptr && blockIdx.x == 0 && blockIdx.y == 0;
  row_scales<T, M, kThreads>(x, skip, sum, writes_sum, k_total, eps, inv);
  for (int i = threadIdx.x; i < ke - kb; i += kThreads) {
    float g = widen(__ldg(&gamma[kb + i]));
#pragma unroll
    for (int m = 0; m < M; ++m)
      hx[m][i] = round_to(gamma, row_value(x, skip, (int64_t)m * k_total + kb + i) * inv[m] * g);
  }
  __syncthreads();
}

/* The A operand of RMSNormMatMul: the normed rows of X + skip (S from block (0, 0)). */
template <class T> struct norm_prologue {
  const T *x, *skip, *gamma;
  T *sum;
  int k_total;
  float eps;

  norm_prologue from_row(int64_t r0) const {
    norm_prologue p = *this;
    p.x = x + r0 * k_total;
    p.skip = skip ? skip + r0 * k_total : nullptr;
    p.sum = sum ? sum + r0 * k_total : nullptr;
    return p;
  }

  template <int M> __device__ __forceinline__ void fill(int kb, int ke, float (&hx)[M][kChunk]) {
    normed_rows<T, M>(x, skip, gamma, sum, k_total, kb, ke, eps, hx);
  }
};

/* The same A for the [N, K] kernel: every block writes all K of its rows, as T (the
 * norm kernel's output type), into hx[m * k + i]; block 0 writes S. */
template <class T> struct norm_prologue_nk {
  const T *x, *skip, *gamma;
  T *sum;
  int k_total;
  float eps;

  norm_prologue_nk from_row(int64_t r0) const {
    norm_prologue_nk p = *this;
    p.x = x + r0 * k_total;
    p.skip = skip ? skip + r0 * k_total : nullptr;
    p.sum = sum ? sum + r0 * k_total : nullptr;
    return p;
  }

  /* Eight elements of X + skip from element e, in float (as row_value). */
  __device__ __forceinline__ void row8(int64_t e, float *v) const {
    onyx_cuda::widen8(__ldg(reinterpret_cast<const uint4 *>(x + e)), x, v);
    if (skip == nullptr) return;
    float s[8];
    onyx_cuda::widen8(__ldg(reinterpret_cast<const uint4 *>(skip + e)), x, s);
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] += s[j];
  }

  /* Every block normalises all of its rows (K up to a few thousand), in 16-byte loads
   * (the second pass hits L1): the sums of squares, then the normed rows into hx;
   * block 0 writes S. X, skip and gamma are 16-byte aligned (the launcher checks). */
  template <int M> __device__ __forceinline__ void fill(T *hx, int k) const {
    constexpr int kNkThreads = onyx_cuda::gemv_nk::kThreads;
    __shared__ float inv[M];
    const int chunks = k / 8;
    const bool writes_sum = sum != nullptr && blockIdx.x == 0;
    float ss[M];
#pragma unroll
    for (int m = 0; m < M; ++m) ss[m] = 0.0f;
    for (int c = threadIdx.x; c < chunks; c += kNkThreads)
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float v[8];
        row8((int64_t)m * k + c * 8, v);
#pragma unroll
        for (int j = 0; j < 8; ++j) ss[m] = fmaf(v[j], v[j], ss[m]);
        if (writes_sum)
          *reinterpret_cast<uint4 *>(sum + (int64_t)m * k + c * 8) = onyx_cuda::pack8<T>(v);
      }
    block_inv_rms<M, kNkThreads>(ss, k, eps, inv);
    for (int c = threadIdx.x; c < chunks; c += kNkThreads) {
      float g[8];
      onyx_cuda::widen8(__ldg(reinterpret_cast<const uint4 *>(gamma + c * 8)), x, g);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float v[8];
        row8((int64_t)m * k + c * 8, v);
#pragma unroll
        for (int j = 0; j < 8; ++j) v[j] = v[j] * inv[m] * g[j];
        *reinterpret_cast<uint4 *>(hx + (int64_t)m * k + c * 8) = onyx_cuda::pack8<T>(v);
      }
    }
    __syncthreads();
  }
};

template <class T> cudaError_t launch_nk(const onyx__cuda_nmm_args *a, cudaStream_t stream) {
  norm_prologue_nk<T> pro = {static_cast<const T *>(a->x),
                             static_cast<const T *>(a->skip),
                             static_cast<const T *>(a->gamma),
                             static_cast<T *>(a->sum),
                             (int)a->k,
                             a->epsilon};
  return onyx_cuda::gemv_nk::launch<T>(pro, a->w, a->y, a->m, a->k, a->n, 1.0f, a->tune, stream);
}

template <class T> cudaError_t launch_typed(const onyx__cuda_nmm_args *a, cudaStream_t stream) {
  if (a->w_nk) return launch_nk<T>(a, stream);
  norm_prologue<T> pro = {static_cast<const T *>(a->x),
                          static_cast<const T *>(a->skip),
                          static_cast<const T *>(a->gamma),
                          static_cast<T *>(a->sum),
                          (int)a->k,
                          a->epsilon};
  return launch<T>(pro, a->w, a->y, a->partial, a->counters, a->m, a->k, a->n, a->tune, stream);
}

} // namespace

static_assert(ONYX__CUDA_NMM_ROWS == onyx_cuda::gemv_a::kRows, "rows a launch");

extern "C" int64_t onyx__cuda_nmm_split(int64_t k, int64_t n) {
  return onyx_cuda::gemv_a::split(k, n);
}

extern "C" cudaError_t onyx__cuda_launch_nmm(const onyx__cuda_nmm_args *a, cudaStream_t stream) {
  const uintptr_t nk_bits = (uintptr_t)a->w | (uintptr_t)a->x | (uintptr_t)a->skip |
                            (uintptr_t)a->gamma | (uintptr_t)a->sum;
  if (a->w_nk && (a->k > INT32_MAX || (nk_bits & 15u) != 0)) return cudaErrorInvalidValue;
  if (!a->w_nk && (a->m < 1 || a->n < 8 || a->n % 8 != 0 || a->k < 1 || a->k > INT32_MAX ||
                   a->n > INT32_MAX || onyx__cuda_nmm_split(a->k, a->n) > 65535))
    return cudaErrorInvalidValue;
  if (a->dtype == ONYX_DTYPE_FLOAT16) return launch_typed<__half>(a, stream);
  if (a->dtype == ONYX_DTYPE_BFLOAT16) return launch_typed<__nv_bfloat16>(a, stream);
  return cudaErrorInvalidValue;
}
