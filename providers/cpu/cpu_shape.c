/*
 * Shape helpers and the parts of a kernel's life that every op shares: state
 * allocation, output allocation, input checks and the text of error messages.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_impl.h"

/* onyx__cpu_fail and the shape text live in providers/common/pc_msg.c. */

const char *onyx__cpu_dtype_name(uint32_t dtype) {
  switch (dtype) {
  case ONYX_DTYPE_FLOAT32:
    return "float32";
  case ONYX_DTYPE_UINT8:
    return "uint8";
  case ONYX_DTYPE_INT8:
    return "int8";
  case ONYX_DTYPE_UINT16:
    return "uint16";
  case ONYX_DTYPE_INT16:
    return "int16";
  case ONYX_DTYPE_INT32:
    return "int32";
  case ONYX_DTYPE_INT64:
    return "int64";
  case ONYX_DTYPE_STRING:
    return "string";
  case ONYX_DTYPE_BOOL:
    return "bool";
  case ONYX_DTYPE_FLOAT16:
    return "float16";
  case ONYX_DTYPE_FLOAT64:
    return "float64";
  case ONYX_DTYPE_UINT32:
    return "uint32";
  case ONYX_DTYPE_UINT64:
    return "uint64";
  case ONYX_DTYPE_BFLOAT16:
    return "bfloat16";
  case ONYX_DTYPE_UNDEFINED:
    return "undefined";
  default: {
    /* ONNX types this ABI version has no name for (float8, int4, ...). */
    static const char *const names[] = {"dtype 17", "dtype 18", "dtype 19", "dtype 20", "dtype 21",
                                        "dtype 22", "dtype 23", "dtype 24", "dtype 25", "dtype 26"};
    if (dtype >= 17 && dtype <= 26) return names[dtype - 17];
    return "unknown dtype";
  }
  }
}

bool onyx__cpu_normalize_axis(int64_t axis, int64_t rank, int64_t *out_axis) {
  if (axis < -rank || axis >= rank) return false;
  *out_axis = axis < 0 ? axis + rank : axis;
  return true;
}

int64_t onyx__cpu_dims_product(const int64_t *dims, uint32_t begin, uint32_t end) {
  int64_t n = 1;
  for (uint32_t i = begin; i < end; ++i) n *= dims[i];
  return n;
}

bool onyx__cpu_checked_numel(uint32_t rank, const int64_t *dims, int64_t *out_numel) {
  int64_t n = 1;
  bool zero = false;
  for (uint32_t i = 0; i < rank; ++i) {
    if (dims[i] < 0) return false;
    if (dims[i] == 0) zero = true;
  }
  if (zero) {
    *out_numel = 0;
    return true;
  }
  for (uint32_t i = 0; i < rank; ++i) {
    if (__builtin_mul_overflow(n, dims[i], &n)) return false;
  }
  *out_numel = n;
  return true;
}

onyx_status onyx__cpu_int_list(const onyx_tensor *t, size_t input_index, const char *what,
                               int64_t *out, size_t cap, size_t *out_count, char *err,
                               size_t err_cap) {
  if (t->dtype != ONYX_DTYPE_INT64 && t->dtype != ONYX_DTYPE_INT32)
    return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "input %zu (%s) must be int64, got %s", input_index, what,
                          onyx__cpu_dtype_name(t->dtype));
  if (t->rank > 1)
    return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "input %zu (%s) must be 1-D, got shape %s", input_index, what,
                          onyx__cpu_tensor_shape(t).s);
  int64_t n = onyx_tensor_numel(t);
  if ((uint64_t)n > cap)
    return onyx__cpu_fail(err, err_cap, ONYX_STATUS_UNSUPPORTED,
                          "input %zu (%s) has %lld values, at most %zu are supported", input_index,
                          what, (long long)n, cap);
  if (n > 0 && t->data == NULL)
    return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "input %zu (%s) has no host data", input_index, what);
  for (int64_t i = 0; i < n; ++i) out[i] = onyx__cpu_int_at(t, i);
  *out_count = (size_t)n;
  return ONYX_STATUS_OK;
}

onyx_status onyx__cpu_read_int_list(onyx_compute_ctx *ctx, const onyx_tensor *t, size_t input_index,
                                    const char *what, int64_t *out, size_t cap, size_t *out_count) {
  char why[256];
  onyx_status st = onyx__cpu_int_list(t, input_index, what, out, cap, out_count, why, sizeof why);
  if (st != ONYX_STATUS_OK) ctx->set_error(ctx, "%s", why);
  return st;
}

onyx_status onyx__cpu_check_inputs(onyx_compute_ctx *ctx, const onyx_tensor *const *inputs,
                                   size_t input_count, size_t required) {
  for (size_t i = 0; i < required; ++i) {
    if (i >= input_count || inputs[i] == NULL) {
      ctx->set_error(ctx, "input %zu is required but missing", i);
      return ONYX_STATUS_INVALID_ARGUMENT;
    }
  }
  for (size_t i = 0; i < input_count; ++i) {
    const onyx_tensor *t = inputs[i];
    if (t == NULL) continue;
    /* A host kernel can only read host memory; the core copies before calling. */
    if (t->device != ONYX_DEVICE_HOST) {
      ctx->set_error(ctx, "input %zu is not in host memory", i);
      return ONYX_STATUS_INVALID_ARGUMENT;
    }
    if (t->rank > ONYX_MAX_RANK) {
      ctx->set_error(ctx, "input %zu has rank %u, more than %d", i, t->rank, ONYX_MAX_RANK);
      return ONYX_STATUS_INVALID_ARGUMENT;
    }
    if (t->data == NULL && onyx_tensor_numel(t) != 0) {
      ctx->set_error(ctx, "input %zu has %lld elements but no data", i,
                     (long long)onyx_tensor_numel(t));
      return ONYX_STATUS_INVALID_ARGUMENT;
    }
  }
  return ONYX_STATUS_OK;
}

/* ------------------------------------------------------------------ kernel state */

void *onyx__cpu_state_new(size_t size, void *provider_state, const onyx_node_info *node, char *err,
                          size_t err_cap) {
  onyx__cpu_node *s = calloc(1, size);
  if (s == NULL) {
    onyx__cpu_fail(err, err_cap, ONYX_STATUS_OUT_OF_MEMORY,
                   "%s: cannot allocate %zu bytes of kernel state", node->op_type, size);
    return NULL;
  }
  s->provider = provider_state;
  s->opset = node->opset;
  snprintf(s->op_type, sizeof s->op_type, "%s", node->op_type ? node->op_type : "?");
  /* An output slot the node leaves unnamed is not wanted. A node that lists no
   * outputs at all still gets output 0 computed, which is harmless. */
  s->want_output =
      node->output_count == 0 || node->output_present == NULL || node->output_present[0];
  s->output_count = node->output_count ? node->output_count : 1;
  for (size_t k = 0; k < s->output_count && k < 64; ++k)
    if (node->output_count == 0 || node->output_present == NULL || node->output_present[k])
      s->outputs_named |= UINT64_C(1) << k;
  return s;
}

onyx_status onyx__cpu_create_plain(void *provider_state, const onyx_node_info *node,
                                   void **out_state, char *err, size_t err_cap) {
  void *s = onyx__cpu_state_new(sizeof(onyx__cpu_node), provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  *out_state = s;
  return ONYX_STATUS_OK;
}

void onyx__cpu_destroy(void *state) { free(state); }

onyx_status onyx__cpu_alloc_output(const onyx__cpu_node *node, onyx_compute_ctx *ctx,
                                   uint32_t dtype, uint32_t rank, const int64_t *dims,
                                   onyx_tensor **out_view) {
  *out_view = NULL;
  if (!node->want_output) return ONYX_STATUS_OK;
  return onyx__cpu_alloc_output_at(node, ctx, 0, dtype, rank, dims, out_view);
}

onyx_status onyx__cpu_alloc_output_at(const onyx__cpu_node *node, onyx_compute_ctx *ctx,
                                      size_t index, uint32_t dtype, uint32_t rank,
                                      const int64_t *dims, onyx_tensor **out_view) {
  *out_view = NULL;
  if (index > 0 && !onyx__cpu_output_named(node, index)) return ONYX_STATUS_OK;
  if (rank > ONYX_MAX_RANK) {
    ctx->set_error(ctx, "output rank %u exceeds the ABI limit of %d", rank, ONYX_MAX_RANK);
    return ONYX_STATUS_UNSUPPORTED;
  }
  /* A scalar has no dims; still hand over a valid pointer. */
  static const int64_t no_dims[1] = {0};
  onyx_tensor *view = NULL;
  onyx_status st = ctx->alloc_output(ctx, index, dtype, rank, rank ? dims : no_dims, &view);
  if (st != ONYX_STATUS_OK || view == NULL) {
    ctx->set_error(ctx, "cannot allocate output %zu (%s %s): %s", index,
                   onyx__cpu_dtype_name(dtype), onyx__cpu_shape_str(rank, dims).s,
                   onyx_status_str(st));
    return st != ONYX_STATUS_OK ? st : ONYX_STATUS_INTERNAL;
  }
  if (view->data == NULL && onyx_tensor_numel(view) != 0) {
    ctx->set_error(ctx, "output %zu was allocated without data", index);
    return ONYX_STATUS_INTERNAL;
  }
  *out_view = view;
  return ONYX_STATUS_OK;
}
