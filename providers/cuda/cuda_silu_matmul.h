/*
 * ai.onyx::SiluMulMatMul on CUDA: the decode launch that cuda_silu_matmul.c calls and
 * cuda_silu_matmul.cu defines (docs/ops.md).
 */
#ifndef ONYX_CUDA_SILU_MATMUL_H
#define ONYX_CUDA_SILU_MATMUL_H

#include <cuda_runtime.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Rows a launch takes: the launcher runs more as several launches of at most this many,
 * but the kernel sends more rows to its prompt route (cuda_silu_matmul.c) instead. */
#define ONYX__CUDA_SMM_ROWS 4

/* Y[m x n] = A · W with A[r, j] = silu(GU[r, j]) · GU[r, k + j] rounded to T (GU is
 * m x 2k), 16-bit T, W row-major k x n, n a multiple of 8, W 16-byte aligned. With
 * onyx__cuda_smm_split(k, n) = S > 1 the K range is split across S blocks: `partial`
 * holds S x min(m, ROWS) x n float32 sums and `counters` one unsigned per 256 columns,
 * zero at the first call and left zero by every call. */
typedef struct onyx__cuda_smm_args {
  uint32_t dtype; /* float16 or bfloat16 */
  int64_t m, n, k;
  const void *gu, *w;
  void *y;
  float *partial;
  unsigned *counters;
  int tune;  /* 0: the default; else ONYX__CUDA_GEMV_TUNE_SET | bits, as the GEMV's */
  bool w_nk; /* W is [n x k] (transB = 1): cuda_gemv_nk.cuh's kernel, no partials */
} onyx__cuda_smm_args;

int64_t onyx__cuda_smm_split(int64_t k, int64_t n);
cudaError_t onyx__cuda_launch_smm(const onyx__cuda_smm_args *a, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* ONYX_CUDA_SILU_MATMUL_H */
