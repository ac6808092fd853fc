/*
 * Numpy broadcasting and strided walks, planned on the host.
 *
 * A device kernel pays for every axis it decomposes an index over (a division and a
 * remainder per axis per element), so plans are collapsed first: size-1 axes go and
 * neighbouring axes that every input walks as one merge. [2,3,4] + [2,3,4] becomes a
 * single axis of 24; [8,16] + [16] two axes; a scalar operand an axis of stride 0.
 */
#include <string.h>

#include "cuda_impl.h"

onyx_status onyx__cuda_broadcast_shape(size_t count, const onyx_tensor *const *shapes,
                                       uint32_t *out_rank, int64_t *out_dims, char *err,
                                       size_t err_cap) {
  uint32_t rank = 0;
  for (size_t k = 0; k < count; ++k) {
    if (shapes[k]->rank > ONYX_MAX_RANK)
      return onyx__cuda_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                             "input %zu has rank %u, more than %d", k, shapes[k]->rank,
                             ONYX_MAX_RANK);
    if (shapes[k]->rank > rank) rank = shapes[k]->rank;
  }
  for (uint32_t d = 0; d < rank; ++d) {
    int64_t out = 1;
    size_t owner = 0;
    bool zero = false;
    for (size_t k = 0; k < count; ++k) {
      uint32_t lead = rank - shapes[k]->rank;
      if (d < lead) continue;
      int64_t v = shapes[k]->dims[d - lead];
      if (v == 1) continue;
      if (v == 0) zero = true;
      if (out == 1) {
        out = v;
        owner = k;
      } else if (v != out) {
        return onyx__cuda_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                               "input %zu %s does not broadcast with input %zu %s (axis %u: "
                               "%lld vs %lld)",
                               k, onyx__cuda_tensor_shape(shapes[k]).s, owner,
                               onyx__cuda_tensor_shape(shapes[owner]).s, d, (long long)v,
                               (long long)out);
      }
    }
    out_dims[d] = zero ? 0 : out;
  }
  *out_rank = rank;
  return ONYX_STATUS_OK;
}

void onyx__cuda_walk_collapse(onyx__cuda_walk *w) {
  uint32_t r = 0;
  onyx__cuda_walk c = *w;
  /* Drop size-1 axes: they contribute nothing to any offset. */
  for (uint32_t d = 0; d < w->rank; ++d) {
    if (w->dims[d] == 1) continue;
    c.dims[r] = w->dims[d];
    for (uint32_t k = 0; k < w->count; ++k) c.strides[k][r] = w->strides[k][d];
    ++r;
  }
  if (r == 0) {
    c.dims[0] = 1;
    for (uint32_t k = 0; k < w->count; ++k) c.strides[k][0] = 0;
    r = 1;
  }
  /* Merge axis d into d+1 (the inner one) when every input steps over d by exactly
   * the span of d+1. */
  uint32_t out = 0;
  for (uint32_t d = 0; d < r; ++d) {
    if (out > 0) {
      bool merge = true;
      for (uint32_t k = 0; k < w->count && merge; ++k)
        merge = c.strides[k][out - 1] == c.strides[k][d] * c.dims[d];
      if (merge) {
        c.dims[out - 1] *= c.dims[d];
        for (uint32_t k = 0; k < w->count; ++k) c.strides[k][out - 1] = c.strides[k][d];
        continue;
      }
    }
    c.dims[out] = c.dims[d];
    for (uint32_t k = 0; k < w->count; ++k) c.strides[k][out] = c.strides[k][d];
    ++out;
  }
  c.rank = out;
  for (uint32_t d = out; d < ONYX_MAX_RANK; ++d) {
    c.dims[d] = 0;
    for (uint32_t k = 0; k < ONYX__CUDA_BCAST_MAX_INPUTS; ++k) c.strides[k][d] = 0;
  }
  *w = c;
}

onyx_status onyx__cuda_broadcast(onyx__cuda_walk *w, uint32_t *out_rank, int64_t *out_dims,
                                 size_t count, const onyx_tensor *const *shapes, char *err,
                                 size_t err_cap) {
  memset(w, 0, sizeof *w);
  if (count == 0 || count > ONYX__CUDA_BCAST_MAX_INPUTS)
    return onyx__cuda_fail(err, err_cap, ONYX_STATUS_INTERNAL, "broadcast of %zu inputs", count);
  onyx_status st = onyx__cuda_broadcast_shape(count, shapes, out_rank, out_dims, err, err_cap);
  if (st != ONYX_STATUS_OK) return st;
  uint32_t rank = *out_rank;
  w->count = (uint32_t)count;
  w->rank = rank;
  w->numel = onyx__cuda_dims_product(out_dims, 0, rank);
  for (uint32_t d = 0; d < rank; ++d) w->dims[d] = out_dims[d];
  for (size_t k = 0; k < count; ++k) {
    uint32_t lead = rank - shapes[k]->rank;
    int64_t stride = 1;
    for (uint32_t d = rank; d-- > 0;) {
      if (d < lead) {
        w->strides[k][d] = 0;
        continue;
      }
      int64_t v = shapes[k]->dims[d - lead];
      w->strides[k][d] = v == 1 ? 0 : stride;
      stride *= v;
    }
  }
  if (rank == 0) {
    w->rank = 1;
    w->dims[0] = 1;
  }
  onyx__cuda_walk_collapse(w);
  return ONYX_STATUS_OK;
}
