/*
 * ai.onyx::SiluMul on CUDA: the launch that cuda_silu_mul.c calls and
 * cuda_silu_mul.cu defines (docs/ops.md).
 */
#ifndef ONYX_CUDA_SILU_MUL_H
#define ONYX_CUDA_SILU_MUL_H

#include <cuda_runtime.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Y[r, j] = silu(H[r, j]) · H[r, n + j] for r < rows, j < n; H is rows × 2n, Y rows × n,
 * both of `dtype` (float32, float16 or bfloat16) in device memory. Launches on
 * `stream` only: no allocation, no synchronisation (safe inside a device graph). */
cudaError_t onyx__cuda_launch_silu_mul(uint32_t dtype, const void *h, void *y, int64_t rows,
                                       int64_t n, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* ONYX_CUDA_SILU_MUL_H */
