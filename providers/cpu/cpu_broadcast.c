/*
 * Numpy multidirectional broadcasting, reduced to the shortest loop nest.
 *
 * Elementwise kernels spend their time in the innermost loop, so the plan drops
 * size-1 output axes and merges neighbouring axes wherever every input walks them
 * as one (contiguously, or not at all). [2,3,4] + [2,3,4] becomes one run of 24;
 * [8,16] + [16] becomes 8 runs of 16 with the second input restarting each run;
 * a scalar operand is a run with stride 0.
 */
#include <string.h>

#include "cpu_impl.h"

onyx_status onyx__cpu_bcast_init(onyx__cpu_bcast *b, size_t count, const uint32_t *ranks,
                                 const int64_t *const *dims, char *err, size_t err_cap) {
  memset(b, 0, sizeof *b);
  if (count == 0 || count > ONYX__CPU_BCAST_MAX_INPUTS)
    return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INTERNAL, "broadcast of %zu inputs", count);
  b->count = count;
  for (size_t k = 0; k < count; ++k) {
    if (ranks[k] > ONYX_MAX_RANK)
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                            "input %zu has rank %u, more than %d", k, ranks[k], ONYX_MAX_RANK);
    if (ranks[k] > b->out_rank) b->out_rank = ranks[k];
  }

  /* Output shape, right-aligned: each axis is the one extent all non-1 dims agree on.
   * `owner` remembers which input set it, for the message. */
  for (uint32_t d = 0; d < b->out_rank; ++d) {
    int64_t out = 1;
    size_t owner = 0;
    for (size_t k = 0; k < count; ++k) {
      uint32_t lead = b->out_rank - ranks[k];
      if (d < lead) continue;
      int64_t v = dims[k][d - lead];
      if (v == 1) continue;
      if (out == 1) {
        out = v;
        owner = k;
      } else if (v != out) {
        return onyx__cpu_fail(
            err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
            "input %zu: dim %u is %lld, expected 1 or %lld to broadcast with input %zu "
            "(shapes %s and %s)",
            k, d - lead, (long long)v, (long long)out, owner,
            onyx__cpu_shape_str(ranks[owner], dims[owner]).s,
            onyx__cpu_shape_str(ranks[k], dims[k]).s);
      }
    }
    b->out_dims[d] = out;
  }
  /* Shapes can come from values (Expand's shape input): their product is checked
   * before anything is sized by it. Each input's extents are 1 or the output's, so
   * its own strides below stay within this product. */
  if (!onyx__cpu_checked_numel(b->out_rank, b->out_dims, &b->out_numel))
    return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "the broadcast shape %s has a negative dim or more than 2^63 elements",
                          onyx__cpu_shape_str(b->out_rank, b->out_dims).s);

  /* Element strides of every input along every output axis (0 where broadcast). */
  int64_t full[ONYX__CPU_BCAST_MAX_INPUTS][ONYX_MAX_RANK];
  for (size_t k = 0; k < count; ++k) {
    uint32_t lead = b->out_rank - ranks[k];
    int64_t stride = 1;
    for (uint32_t d = b->out_rank; d-- > 0;) {
      if (d < lead) {
        full[k][d] = 0;
        continue;
      }
      int64_t v = dims[k][d - lead];
      full[k][d] = (v == 1) ? 0 : stride;
      stride *= v;
    }
  }

  /* Drop size-1 axes and merge an axis into the previous one when every input's
   * stride there equals its stride here times this extent. */
  uint32_t r = 0;
  for (uint32_t d = 0; d < b->out_rank; ++d) {
    if (b->out_dims[d] == 1) continue;
    bool merge = r > 0;
    for (size_t k = 0; merge && k < count; ++k)
      merge = b->strides[k][r - 1] == full[k][d] * b->out_dims[d];
    if (merge) {
      b->loop_dims[r - 1] *= b->out_dims[d];
      for (size_t k = 0; k < count; ++k) b->strides[k][r - 1] = full[k][d];
    } else {
      b->loop_dims[r] = b->out_dims[d];
      for (size_t k = 0; k < count; ++k) b->strides[k][r] = full[k][d];
      ++r;
    }
  }
  if (r == 0) { /* every output axis is 1: one run of one element */
    b->loop_dims[0] = 1;
    for (size_t k = 0; k < count; ++k) b->strides[k][0] = 0;
    r = 1;
  }
  b->loop_rank = r;
  return ONYX_STATUS_OK;
}

void onyx__cpu_bcast_walk(const onyx__cpu_bcast *b, onyx__cpu_bcast_run_fn fn, void *arg) {
  onyx__cpu_bcast_walk_range(b, 0, b->out_numel, fn, arg);
}

void onyx__cpu_bcast_walk_range(const onyx__cpu_bcast *b, int64_t begin, int64_t end,
                                onyx__cpu_bcast_run_fn fn, void *arg) {
  if (end > b->out_numel) end = b->out_numel;
  if (begin >= end) return;
  const uint32_t last = b->loop_rank - 1;
  const int64_t n = b->loop_dims[last];
  int64_t inner[ONYX__CPU_BCAST_MAX_INPUTS];
  int64_t off[ONYX__CPU_BCAST_MAX_INPUTS] = {0};
  int64_t idx[ONYX_MAX_RANK] = {0};
  int64_t here[ONYX__CPU_BCAST_MAX_INPUTS];
  for (size_t k = 0; k < b->count; ++k) inner[k] = b->strides[k][last];

  /* Start the odometer at the run holding `begin`. */
  int64_t run = begin / n, pos = begin % n;
  for (uint32_t d = last; d-- > 0;) {
    idx[d] = run % b->loop_dims[d];
    run /= b->loop_dims[d];
    for (size_t k = 0; k < b->count; ++k) off[k] += idx[d] * b->strides[k][d];
  }
  /* Each tick is one inner run, cut to [begin, end). */
  for (int64_t out = begin; out < end;) {
    int64_t len = n - pos < end - out ? n - pos : end - out;
    for (size_t k = 0; k < b->count; ++k) here[k] = off[k] + pos * inner[k];
    fn(arg, here, out, len, inner);
    out += len;
    pos = 0;
    for (uint32_t d = last; d-- > 0;) {
      for (size_t k = 0; k < b->count; ++k) off[k] += b->strides[k][d];
      if (++idx[d] < b->loop_dims[d]) break;
      for (size_t k = 0; k < b->count; ++k) off[k] -= b->strides[k][d] * b->loop_dims[d];
      idx[d] = 0;
    }
  }
}

onyx_status onyx__cpu_bcast_shape(size_t count, const onyx_tensor *const *inputs,
                                  uint32_t *out_rank, int64_t *out_dims, char *err,
                                  size_t err_cap) {
  uint32_t r = 0;
  for (size_t k = 0; k < count; ++k) {
    if (inputs[k] == NULL) continue;
    if (inputs[k]->rank > ONYX_MAX_RANK)
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                            "input %zu has rank %u, more than %d", k, inputs[k]->rank,
                            ONYX_MAX_RANK);
    if (inputs[k]->rank > r) r = inputs[k]->rank;
  }
  for (uint32_t d = 0; d < r; ++d) out_dims[d] = 1;
  for (size_t k = 0; k < count; ++k) {
    const onyx_tensor *t = inputs[k];
    if (t == NULL) continue;
    uint32_t lead = r - t->rank;
    for (uint32_t d = 0; d < t->rank; ++d) {
      int64_t v = t->dims[d], *o = &out_dims[lead + d];
      if (v == 1 || v == *o) continue;
      if (*o != 1)
        return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                              "input %zu: dim %u is %lld, expected 1 or %lld to broadcast "
                              "(shape %s)",
                              k, d, (long long)v, (long long)*o, onyx__cpu_tensor_shape(t).s);
      *o = v;
    }
  }
  *out_rank = r;
  return ONYX_STATUS_OK;
}
