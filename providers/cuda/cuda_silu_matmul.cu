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

template <class T> cudaError_t launch_typed(const onyx__cuda_smm_args *a, cudaStream_t stream) {
  silu_prologue<T> pro = {static_cast<const T *>(a->gu), (int)a->k};
  return launch<T>(pro, a->w, a->y, a->partial, a->counters, a->m, a->k, a->n, a->tune, stream);
}

} // namespace

static_assert(ONYX__CUDA_SMM_ROWS == onyx_cuda::gemv_a::kRows, "rows a launch");

extern "C" int64_t onyx__cuda_smm_split(int64_t k, int64_t n) {
  return onyx_cuda::gemv_a::split(k, n);
}

extern "C" cudaError_t onyx__cuda_launch_smm(const onyx__cuda_smm_args *a, cudaStream_t stream) {
  if (a->m < 1 || a->n < 8 || a->n % 8 != 0 || a->k < 1 || a->k > INT32_MAX / 2 ||
      a->n > INT32_MAX || onyx__cuda_smm_split(a->k, a->n) > 65535)
    return cudaErrorInvalidValue;
  if (a->dtype == ONYX_DTYPE_FLOAT16) return launch_typed<__half>(a, stream);
  if (a->dtype == ONYX_DTYPE_BFLOAT16) return launch_typed<__nv_bfloat16>(a, stream);
  return cudaErrorInvalidValue;
}
