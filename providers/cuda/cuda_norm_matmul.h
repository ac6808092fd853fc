/*
 * ai.onyx::RMSNormMatMul on CUDA: the launch that cuda_norm_matmul.c calls and
 * cuda_norm_matmul.cu defines (docs/ops.md).
 */
#ifndef ONYX_CUDA_NORM_MATMUL_H
#define ONYX_CUDA_NORM_MATMUL_H

#include <cuda_runtime.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Rows a launch takes: the launcher runs more as several launches of at most this many,
 * but the kernel sends more rows to its prompt route (cuda_norm_matmul.c) instead. */
#define ONYX__CUDA_NMM_ROWS 4

/* Y[m x n] = rmsnorm(X + skip)·gamma [m x k] · W[k x n] and S = X + skip, 16-bit T,
 * W row-major, n a multiple of 8, W 16-byte aligned; skip and sum NULL for the plain
 * form. With onyx__cuda_nmm_split(k, n) = S > 1 the K range is split across S blocks:
 * `partial` holds S x min(m, ROWS) x n float32 sums and `counters` one unsigned per 256
 * columns, zero at the first call and left zero by every call. */
typedef struct onyx__cuda_nmm_args {
  uint32_t dtype; /* float16 or bfloat16 */
  int64_t m, n, k;
  const void *x, *skip, *gamma, *w;
  void *y, *sum;
  float epsilon;
  float *partial;
  unsigned *counters;
  int tune;  /* 0: the default; else ONYX__CUDA_GEMV_TUNE_SET | bits, as the GEMV's */
  bool w_nk; /* W is [n x k] (transB = 1): cuda_gemv_nk.cuh's kernel, no partials */
} onyx__cuda_nmm_args;

int64_t onyx__cuda_nmm_split(int64_t k, int64_t n);
cudaError_t onyx__cuda_launch_nmm(const onyx__cuda_nmm_args *a, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* ONYX_CUDA_NORM_MATMUL_H */
