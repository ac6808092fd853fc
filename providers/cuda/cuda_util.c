/*
 * What every CUDA kernel shares: state, outputs, messages, attribute lookups, input
 * checks and reading small integer tensors (shapes, axes) the core hands over on the
 * host (the kernel tables' host_inputs).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_impl.h"

/* ------------------------------------------------------------------ messages */

/* onyx__cuda_fail and onyx__cuda_error live in providers/common/pc_msg.c. */

onyx_status onyx__cuda_check(onyx_compute_ctx *ctx, cudaError_t e, const char *what) {
  if (e == cudaSuccess) return ONYX_STATUS_OK;
  return onyx__cuda_error(ctx, ONYX_STATUS_PROVIDER_ERROR, "%s failed: %s (%s)", what,
                          cudaGetErrorString(e), cudaGetErrorName(e));
}

onyx_status onyx__cuda_check_launch(onyx_compute_ctx *ctx, const char *what) {
  return onyx__cuda_check(ctx, cudaGetLastError(), what);
}

const char *onyx__cuda_dtype_name(uint32_t dtype) {
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
  default:
    return "an unsupported dtype";
  }
}

/* ------------------------------------------------------------------ state */

void *onyx__cuda_state_new(size_t size, void *provider_state, const onyx_node_info *node, char *err,
                           size_t err_cap) {
  onyx__cuda_node *s = calloc(1, size);
  if (s == NULL) {
    onyx__cuda_fail(err, err_cap, ONYX_STATUS_OUT_OF_MEMORY, "cannot allocate kernel state");
    return NULL;
  }
  s->provider = provider_state;
  s->opset = node->opset;
  snprintf(s->op_type, sizeof s->op_type, "%s", node->op_type ? node->op_type : "?");
  s->input_count = node->input_count;
  s->output_count = node->output_count;
  for (size_t i = 0; i < node->output_count && i < ONYX__CUDA_MAX_OUTPUTS; ++i)
    s->output_present[i] = node->output_present == NULL || node->output_present[i];
  return s;
}

onyx_status onyx__cuda_create_plain(void *provider_state, const onyx_node_info *node,
                                    void **out_state, char *err, size_t err_cap) {
  void *s = onyx__cuda_state_new(sizeof(onyx__cuda_node), provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  *out_state = s;
  return ONYX_STATUS_OK;
}

void onyx__cuda_destroy(void *state) { free(state); }

onyx_status onyx__cuda_reason(const void *state, onyx_status status, const char *why) {
  const onyx__cuda_node *node = state;
  const onyx_host_table *host = node && node->provider ? node->provider->host : NULL;
  return why && why[0] ? onyx__pc_reason(host, status, "%s", why) : status;
}

onyx_status onyx__cuda_alloc_output(const onyx__cuda_node *node, onyx_compute_ctx *ctx,
                                    size_t index, uint32_t dtype, uint32_t rank,
                                    const int64_t *dims, onyx_tensor **out_view) {
  *out_view = NULL;
  /* The core may call compute from any thread: make the device current before the
   * kernel launches that follow (cheap when it already is). */
  (void)onyx__cuda_use_device(node->provider);
  if (index >= node->output_count || index >= ONYX__CUDA_MAX_OUTPUTS ||
      !node->output_present[index])
    return ONYX_STATUS_OK;
  onyx_status st = ctx->alloc_output(ctx, index, dtype, rank, dims, out_view);
  if (st != ONYX_STATUS_OK) *out_view = NULL;
  return st;
}

/* ------------------------------------------------------------------ shapes */

bool onyx__cuda_normalize_axis(int64_t axis, int64_t rank, int64_t *out_axis) {
  if (axis < -rank || axis >= rank) return false;
  *out_axis = axis < 0 ? axis + rank : axis;
  return true;
}

int64_t onyx__cuda_dims_product(const int64_t *dims, uint32_t begin, uint32_t end) {
  int64_t n = 1;
  for (uint32_t i = begin; i < end; ++i) n *= dims[i];
  return n;
}

onyx_status onyx__cuda_check_inputs(onyx_compute_ctx *ctx, const onyx_tensor *const *inputs,
                                    size_t input_count, size_t required) {
  return onyx__cuda_check_inputs_host(ctx, inputs, input_count, required, 0);
}

onyx_status onyx__cuda_check_inputs_host(onyx_compute_ctx *ctx, const onyx_tensor *const *inputs,
                                         size_t input_count, size_t required,
                                         uint64_t host_inputs) {
  if (input_count < required)
    return onyx__cuda_error(ctx, ONYX_STATUS_INVALID_ARGUMENT,
                            "expected at least %zu inputs, got %zu", required, input_count);
  for (size_t i = 0; i < input_count; ++i) {
    const onyx_tensor *t = inputs[i];
    if (t == NULL) {
      if (i < required)
        return onyx__cuda_error(ctx, ONYX_STATUS_INVALID_ARGUMENT, "input %zu is required", i);
      continue;
    }
    if (t->rank > ONYX_MAX_RANK)
      return onyx__cuda_error(ctx, ONYX_STATUS_INVALID_ARGUMENT, "input %zu has rank %u (max %d)",
                              i, t->rank, ONYX_MAX_RANK);
    bool on_host = i < 64 && (host_inputs >> i & 1u);
    if (t->device != (on_host ? ONYX_DEVICE_HOST : ONYX_DEVICE_CUDA))
      return onyx__cuda_error(ctx, ONYX_STATUS_INVALID_ARGUMENT, "input %zu is not in %s memory", i,
                              on_host ? "host" : "CUDA device");
    if (t->data == NULL && onyx_tensor_numel(t) > 0)
      return onyx__cuda_error(ctx, ONYX_STATUS_INVALID_ARGUMENT, "input %zu has no data", i);
  }
  return ONYX_STATUS_OK;
}

/* Widens `count` int32/int64 values at `src` into out. */
static void widen_ints(uint32_t dtype, const void *src, size_t count, int64_t *out) {
  for (size_t i = 0; i < count; ++i)
    out[i] =
        dtype == ONYX_DTYPE_INT32 ? (int64_t)((const int32_t *)src)[i] : ((const int64_t *)src)[i];
}

onyx_status onyx__cuda_read_ints(onyx_compute_ctx *ctx, const onyx_tensor *t, size_t input_index,
                                 const char *what, int64_t *out, size_t cap, size_t *out_count) {
  if (t->dtype != ONYX_DTYPE_INT64 && t->dtype != ONYX_DTYPE_INT32)
    return onyx__cuda_error(ctx, ONYX_STATUS_INVALID_ARGUMENT,
                            "input %zu (%s) has type %s; int64 or int32 expected", input_index,
                            what, onyx__cuda_dtype_name(t->dtype));
  if (t->rank > 1)
    return onyx__cuda_error(ctx, ONYX_STATUS_INVALID_ARGUMENT,
                            "input %zu (%s) must be a scalar or 1-D, got shape %s", input_index,
                            what, onyx__cuda_tensor_shape(t).s);
  int64_t n = onyx_tensor_numel(t);
  if (n < 0 || (size_t)n > cap)
    return onyx__cuda_error(ctx, ONYX_STATUS_INVALID_ARGUMENT,
                            "input %zu (%s) has %lld values, at most %zu are supported",
                            input_index, what, (long long)n, cap);
  /* The kernel table lists this input in host_inputs, so the core hands it over in
   * host memory: no copy back, no stream sync. Device memory here is a table that
   * forgot the bit. */
  if (t->device != ONYX_DEVICE_HOST)
    return onyx__cuda_error(ctx, ONYX_STATUS_INTERNAL,
                            "input %zu (%s) is in device memory; the kernel table must list it "
                            "in host_inputs",
                            input_index, what);
  size_t count = (size_t)n;
  *out_count = count;
  if (count > 0) widen_ints(t->dtype, t->data, count, out);
  return ONYX_STATUS_OK;
}

onyx_status onyx__cuda_known_ints(const onyx_tensor *t, int64_t *out, size_t cap,
                                  size_t *out_count) {
  if (t == NULL || t->data == NULL || t->device != ONYX_DEVICE_HOST) return ONYX_STATUS_UNSUPPORTED;
  if ((t->dtype != ONYX_DTYPE_INT64 && t->dtype != ONYX_DTYPE_INT32) || t->rank > 1)
    return ONYX_STATUS_INVALID_ARGUMENT;
  int64_t n = onyx_tensor_numel(t);
  if (n < 0 || (size_t)n > cap) return ONYX_STATUS_INVALID_ARGUMENT;
  widen_ints(t->dtype, t->data, (size_t)n, out);
  *out_count = (size_t)n;
  return ONYX_STATUS_OK;
}

/* ------------------------------------------------------------------ attributes */

/* Lookups go through providers/common/pc_attr.c; the wording of a wrong type is ours. */

onyx_status onyx__cuda_attr_int(const onyx_node_info *node, const char *name, int64_t dflt,
                                int64_t *out, char *err, size_t err_cap) {
  if (onyx__pc_attr_int(node, name, dflt, out)) return ONYX_STATUS_OK;
  return onyx__cuda_fail(err, err_cap, ONYX_STATUS_INVALID_MODEL,
                         "%s: attribute '%s' must be an int", node->op_type, name);
}

onyx_status onyx__cuda_attr_trans_b(const onyx_node_info *node, bool *out, char *err,
                                    size_t err_cap) {
  int64_t v = 0;
  onyx_status st = onyx__cuda_attr_int(node, "transB", 0, &v, err, err_cap);
  if (st != ONYX_STATUS_OK) return st;
  if (v != 0 && v != 1)
    return onyx__cuda_fail(err, err_cap, ONYX_STATUS_INVALID_MODEL,
                           "%s: attribute 'transB' must be 0 or 1, got %lld", node->op_type,
                           (long long)v);
  *out = v == 1;
  return ONYX_STATUS_OK;
}

onyx_status onyx__cuda_attr_float(const onyx_node_info *node, const char *name, float dflt,
                                  float *out, char *err, size_t err_cap) {
  if (onyx__pc_attr_float(node, name, dflt, out)) return ONYX_STATUS_OK;
  return onyx__cuda_fail(err, err_cap, ONYX_STATUS_INVALID_MODEL,
                         "%s: attribute '%s' must be a float", node->op_type, name);
}

onyx_status onyx__cuda_attr_ints(const onyx_node_info *node, const char *name, int64_t *out,
                                 size_t cap, size_t *out_count, bool *out_present, char *err,
                                 size_t err_cap) {
  const onyx_attr *a = onyx__cuda_attr_find(node, name);
  *out_count = 0;
  if (out_present) *out_present = a != NULL;
  if (a == NULL) return ONYX_STATUS_OK;
  if (a->type != ONYX_ATTR_INTS && a->type != ONYX_ATTR_INT)
    return onyx__cuda_fail(err, err_cap, ONYX_STATUS_INVALID_MODEL,
                           "%s: attribute '%s' must be a list of ints", node->op_type, name);
  if (a->type == ONYX_ATTR_INT) {
    if (cap < 1) return ONYX_STATUS_INVALID_MODEL;
    out[0] = a->i;
    *out_count = 1;
    return ONYX_STATUS_OK;
  }
  if (a->count > cap)
    return onyx__cuda_fail(err, err_cap, ONYX_STATUS_UNSUPPORTED,
                           "%s: attribute '%s' has %zu values, at most %zu are supported",
                           node->op_type, name, a->count, cap);
  for (size_t i = 0; i < a->count; ++i) out[i] = a->ints[i];
  *out_count = a->count;
  return ONYX_STATUS_OK;
}
