/*
 * The routes of the fused decode products (ai.onyx RMSNormMatMul in cuda_norm_matmul.c,
 * SiluMulMatMul in cuda_silu_matmul.c): which one a call takes and the workspace each
 * declares, from the product's geometry alone, so that workspace and compute agree.
 *
 *   decode  at most ONYX__CUDA_FUSED_ROWS rows: one launch. W as [K, N]: the fused-A
 *           GEMV (cuda_gemv_a.cuh), whose K split needs a SESSION region of partials
 *           and counters; W as [N, K] (transB = 1): the [N, K] GEMV (cuda_gemv_nk.cuh),
 *           none, where its shared memory holds A.
 *   prompt  the rest: A into a STEP region by the unfused producer's kernel, then the
 *           cuBLASLt product (its STEP scratch).
 */
#ifndef ONYX_CUDA_FUSED_ROUTE_H
#define ONYX_CUDA_FUSED_ROUTE_H

#include <stdbool.h>
#include <stdint.h>

#include "cuda_impl.h"

#define ONYX__CUDA_FUSED_ROWS 4

/* A fused product's geometry: rows of A, K and N (from W's layout), the element type. */
typedef struct onyx__cuda_fused_geo {
  bool nk; /* W stored [N, K] */
  int64_t rows, k, n;
  uint32_t dtype;
} onyx__cuda_fused_geo;

/* The geometry of A (`a_numel` elements, `a_row` of them per K of a row: 1 for
 * RMSNormMatMul's X, 2 for SiluMulMatMul's GU) times W. */
onyx__cuda_fused_geo onyx__cuda_fused_geometry(const onyx_tensor *w, bool nk, int64_t a_numel,
                                               int64_t a_row, uint32_t dtype);
bool onyx__cuda_fused_prompt(const onyx__cuda_fused_geo *g);
/* The decode route's SESSION bytes: partials of min(rows, ROWS) rows per K split (split
 * from the kernel), then a counter per 256 columns; 0 when unsplit, [N, K] or prompt. */
uint64_t onyx__cuda_fused_partial_bytes(const onyx__cuda_fused_geo *g, int64_t split);
uint64_t onyx__cuda_fused_session_bytes(const onyx__cuda_fused_geo *g, int64_t split);
/* The prompt route's STEP bytes: A in T, and cuBLASLt's scratch (0 on the decode route). */
uint64_t onyx__cuda_fused_a_bytes(const onyx__cuda_fused_geo *g);
uint64_t onyx__cuda_fused_lt_bytes(const onyx__cuda_fused_geo *g);

/* View `i` of the step, or NULL when it is missing or shorter than `need`. */
const onyx_workspace_view *onyx__cuda_fused_view(const onyx_compute_ctx *ctx, size_t i,
                                                 uint64_t need);
/* The error for a view that is too small: "<op> <what> view has B bytes, N required". */
onyx_status onyx__cuda_fused_too_small(onyx_compute_ctx *ctx, const char *op, size_t i,
                                       const char *what, uint64_t need);

#endif /* ONYX_CUDA_FUSED_ROUTE_H */
