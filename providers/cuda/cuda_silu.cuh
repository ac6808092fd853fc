/*
 * silu(a)·b in float32 as ai.onyx::SiluMul computes it, for every kernel that computes
 * SiluMul's output (cuda_silu_mul.cu, and cuda_silu_matmul.cu, which must reproduce its
 * bits): s = sigmoid(a) (the stable form of the Sigmoid kernel), then (a·s)·b, in the
 * order of the Sigmoid, Mul, Mul kernels it replaces.
 */
#ifndef ONYX_CUDA_SILU_CUH
#define ONYX_CUDA_SILU_CUH

#include <math.h>

namespace onyx_cuda {

static __device__ __forceinline__ float silu_mul(float a, float b) {
  /* Sigmoid stable on both tails: exp of a non-positive number only. */
  float s;
  if (a >= 0.0f) {
    s = 1.0f / (1.0f + expf(-a));
  } else {
    float z = expf(a);
    s = z / (1.0f + z);
  }
  float act = a * s;
  return act * b;
}

/* The same with the hardware's approximate exp2 and reciprocal: within a few float32
 * ulps of silu_mul, far below a 16-bit type's rounding. For prologues that every block
 * of a grid repeats over a whole row (cuda_matmul_nbits.cu: 56 blocks each make the
 * 4,864 activations of a 0.5B down product), where silu_mul's exact expf and division
 * were the kernel's critical path. */
static __device__ __forceinline__ float silu_mul_fast(float a, float b) {
  return a * b * __frcp_rn(1.0f + exp2f(-a * 1.4426950408889634f));
}

} // namespace onyx_cuda

#endif /* ONYX_CUDA_SILU_CUH */
