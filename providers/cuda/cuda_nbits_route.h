/*
 * The routes of a MatMulNBits product (cuda_matmul_nbits.c), shared with its fused
 * forms (cuda_nbits_fused.c), from the geometry alone so that workspace and compute
 * agree:
 *   gemv     at most ONYX__CUDA_NBITS_GEMV_MAX_M rows whose activations fit in shared
 *            memory: one launch of the decode GEMV, no workspace;
 *   prefill  the rest: B dequantized into a STEP region a slice of columns at a time,
 *            each slice one cuBLASLt product (its STEP scratch).
 */
#ifndef ONYX_CUDA_NBITS_ROUTE_H
#define ONYX_CUDA_NBITS_ROUTE_H

#include <stdbool.h>
#include <stdint.h>

#include "cuda_impl.h"
#include "cuda_nbits.h"
#include "nbits_params.h"

/* The prefill route's regions, in MatMulNBits' order. */
enum { ONYX__CUDA_NB_WS_DEQUANT, ONYX__CUDA_NB_WS_LT };

typedef struct onyx__cuda_nb_route {
  bool gemv;
  int64_t slice_n; /* prefill: columns of B dequantized at a time */
  uint64_t ws[2];  /* prefill: bytes of the dequantized slice and of cuBLASLt's scratch */
} onyx__cuda_nb_route;

/* The route of `m` rows (none for m = 0). */
void onyx__cuda_nb_route_make(const onyx__pc_nb_attrs *a, int64_t m, onyx__cuda_nb_route *r);

/* The prefill route of args (args->a: the rows of A, in the activations' type): per
 * slice of columns, dequantize into `dequant` (r->ws[0] bytes), then one product. */
onyx_status onyx__cuda_nb_prefill(const onyx__cuda_provider *prov, onyx_compute_ctx *ctx,
                                  const onyx__pc_nb_attrs *at, const onyx__cuda_nb_route *r,
                                  const onyx__cuda_nbits_args *args, void *dequant,
                                  const onyx_workspace_view *lt_ws);

#endif /* ONYX_CUDA_NBITS_ROUTE_H */
