/*
 * ai.onyx::SiluMulMatMul for decode (docs/ops.md): Y = (silu(GU[:, :K]) · GU[:, K:]) · W
 * for few 16-bit rows, in one launch where the SiluMul kernel and a GEMV ran before.
 *
 * The product is the fused-A GEMV of cuda_gemv_a.cuh (cuda_gemv.cu's, W into L2 before
 * the PDL wait, K split with partials). Its prologue: after the wait each block computes
 * its own K range of A = silu(gate)·up from GU (no reduction: each element its own),
 * with the SiluMul kernel's arithmetic (cuda_silu.cuh) and rounded to T as that kernel
 * stored it, into shared memory. K up to 18944 (a 7B MLP) splits into at least
 * K / 512 blocks, so the slice always fits.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "cuda_gemv_a.cuh"
#include "cuda_gemv_nk.cuh"
#include "cuda_silu.cuh"
#include "cuda_silu_matmul.h"

namespace {

using namespace onyx_cuda::gemv_a;

/* The A operand of SiluMulMatMul: SiluMul's output, rows of GU (2K each). */
template <class T> struct silu_prologue {
  const T *gu;
  int k_total;

  silu_prologue from_row(int64_t r0) const {
    silu_prologue p = *this;
    p.gu = gu + r0 * 2 * (int64_t)k_total;
    return p;
  }

  template <int M> __device__ __forceinline__ void fill(int kb, int ke, float (&hx)[M][kChunk]) {
    for (int i = threadIdx.x; i < ke - kb; i += kThreads)
#pragma unroll
      for (int m = 0; m < M; ++m) {
        const T *r = gu + (int64_t)m * 2 * k_total + kb + i;
        hx[m][i] = round_to(gu, onyx_cuda::silu_mul(widen(__ldg(r)), widen(__ldg(r + k_total))));
      }
    __syncthreads();
  }
};

/* The same A for the [N, K] kernel: all K of each row, as T, into hx[m * k + i]. */
template <class T> struct silu_prologue_nk {
  const T *gu;
  int k_total;

  silu_prologue_nk from_row(int64_t r0) const {
    silu_prologue_nk p = *this;
    p.gu = gu + r0 * 2 * (int64_t)k_total;
    return p;
  }

  /* Every block computes all of A (K up to a few thousand): 16-byte loads, all of a
   * thread's issued before any is used, so it costs about one L2 round trip. GU's rows
   * are 16-byte aligned (the launcher checks; K is a multiple of 8 on this route). */
  template <int M> __device__ __forceinline__ void fill(T *hx, int k) const {
    const int chunks = k / 8;
    for (int c = threadIdx.x; c < M * chunks; c += onyx_cuda::gemv_nk::kThreads) {
      const int m = c / chunks, i = (c - m * chunks) * 8;
      const T *r = gu + (int64_t)m * 2 * k + i;
      float a[8], b[8], o[8];
      onyx_cuda::widen8(__ldg(reinterpret_cast<const uint4 *>(r)), r, a);
      onyx_cuda::widen8(__ldg(reinterpret_cast<const uint4 *>(r + k)), r, b);
#pragma unroll
      for (int j = 0; j < 8; ++j) o[j] = onyx_cuda::silu_mul(a[j], b[j]);
      *reinterpret_cast<uint4 *>(hx + (int64_t)m * k + i) = onyx_cuda::pack8<T>(o);
    }
    __syncthreads();
  }
};

template <class T> cudaError_t launch_typed(const onyx__cuda_smm_args *a, cudaStream_t stream) {
  if (a->w_nk) {
    silu_prologue_nk<T> nk = {static_cast<const T *>(a->gu), (int)a->k};
    return onyx_cuda::gemv_nk::launch<T>(nk, a->w, a->y, a->m, a->k, a->n, 1.0f, a->tune, stream);
  }
  silu_prologue<T> pro = {static_cast<const T *>(a->gu), (int)a->k};
  return launch<T>(pro, a->w, a->y, a->partial, a->counters, a->m, a->k, a->n, a->tune, stream);
}

} // namespace

static_assert(ONYX__CUDA_SMM_ROWS == onyx_cuda::gemv_a::kRows, "rows a launch");

extern "C" int64_t onyx__cuda_smm_split(int64_t k, int64_t n) {
  return onyx_cuda::gemv_a::split(k, n);
}

extern "C" cudaError_t onyx__cuda_launch_smm(const onyx__cuda_smm_args *a, cudaStream_t stream) {
  if (a->w_nk && (a->k > INT32_MAX / 2 || (((uintptr_t)a->w | (uintptr_t)a->gu) & 15u) != 0))
    return cudaErrorInvalidValue;
  if (!a->w_nk && (a->m < 1 || a->n < 8 || a->n % 8 != 0 || a->k < 1 || a->k > INT32_MAX / 2 ||
                   a->n > INT32_MAX || onyx__cuda_smm_split(a->k, a->n) > 65535))
    return cudaErrorInvalidValue;
  if (a->dtype == ONYX_DTYPE_FLOAT16) return launch_typed<__half>(a, stream);
  if (a->dtype == ONYX_DTYPE_BFLOAT16) return launch_typed<__nv_bfloat16>(a, stream);
  return cudaErrorInvalidValue;
}
