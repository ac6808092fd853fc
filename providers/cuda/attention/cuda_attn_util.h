/*
 * Host-side helpers of the CUDA attention ops (private): node state, input placement
 * checks, workspace views and small reads of device scalars.
 */
#ifndef ONYX_CUDA_ATTN_UTIL_H
#define ONYX_CUDA_ATTN_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onyx_abi.h"
#include "pc_attr.h"
#include "pc_msg.h"

/* The head every CUDA attention kernel state starts with. */
typedef struct onyx__cuda_attn_node {
  int64_t opset;
  size_t output_count;
  bool output_present[4]; /* outputs 0..3 named by the node */
} onyx__cuda_attn_node;

/* Allocates a zeroed state of `size` bytes and fills its head; NULL (message in err)
 * when memory runs out or the node names more than four outputs. */
void *onyx__cuda_attn_state_new(size_t size, const onyx_node_info *node, const char *op, char *err,
                                size_t err_cap);
void onyx__cuda_attn_state_free(void *state); /* NULL-safe */

/* Messages (onyx__pc_fail into err, onyx__pc_error through ctx->set_error), shape text
 * (onyx__pc_tensor_shape), dtype names (onyx__pc_dtype_name) and attribute reads
 * (onyx__pc_attr_read_int, ...) come from providers/common. */

static inline const onyx_tensor *onyx__cuda_attn_input(const onyx_tensor *const *inputs,
                                                       size_t count, size_t i) {
  return i < count ? inputs[i] : NULL;
}

/* Checks that every present input other than those in host_ok (a bit per index) is a
 * CUDA tensor with data when it has elements. */
onyx_status onyx__cuda_attn_check_device(onyx_compute_ctx *ctx, const onyx_tensor *const *inputs,
                                         size_t input_count, uint32_t host_ok);

/* The workspace view called name with at least `need` bytes, or NULL and a
 * WORKSPACE_TOO_SMALL status reported through ctx. */
onyx_status onyx__cuda_attn_workspace(onyx_compute_ctx *ctx, const char *name, uint64_t need,
                                      void **out);

/* Copies `bytes` of a tensor to host memory: a plain copy for host tensors, else a
 * device-to-host copy on the stream followed by a stream synchronisation. */
onyx_status onyx__cuda_attn_read(onyx_compute_ctx *ctx, const onyx_tensor *t, void *dst,
                                 size_t bytes);

/* Adds a region to a requirement when bytes > 0. */
void onyx__cuda_attn_region(onyx_workspace_requirement *req, const char *name, uint64_t bytes);

/* Reports a CUDA error code from a launch. */
onyx_status onyx__cuda_attn_launch_error(onyx_compute_ctx *ctx, const char *what, int err);

#endif /* ONYX_CUDA_ATTN_UTIL_H */
