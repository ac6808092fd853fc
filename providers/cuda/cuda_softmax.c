/*
 * Softmax. Opsets 1-12 flatten the input to 2-D at `axis` (default 1) and normalise
 * each row of the flattened shape; opset 13 normalises along `axis` alone (default
 * -1). Both reduce to an (outer, axis, inner) view for the device kernel.
 */
#include "cuda_impl.h"

typedef struct softmax_state {
  onyx__cuda_node head;
  int64_t axis;
} softmax_state;

static onyx_status softmax_create(void *provider_state, const onyx_node_info *node,
                                  void **out_state, char *err, size_t err_cap) {
  int64_t axis = 0;
  onyx_status st =
      onyx__cuda_attr_int(node, "axis", node->opset >= 13 ? -1 : 1, &axis, err, err_cap);
  if (st != ONYX_STATUS_OK) return st;
  softmax_state *s = onyx__cuda_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  s->axis = axis;
  *out_state = s;
  return ONYX_STATUS_OK;
}

static onyx_status softmax_compute(void *state, onyx_compute_ctx *ctx,
                                   const onyx_tensor *const *inputs, size_t input_count) {
  const softmax_state *s = state;
  onyx_status st = onyx__cuda_check_inputs(ctx, inputs, input_count, 1);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *x = inputs[0];
  if (!onyx__cuda_dtype_in(x->dtype, ONYX__CUDA_FLOAT_TYPES))
    return onyx__cuda_error(ctx, ONYX_STATUS_UNSUPPORTED,
                            "input has type %s; float32, float16 or bfloat16 expected",
                            onyx__cuda_dtype_name(x->dtype));
  int64_t rank = x->rank, axis = 0;
  /* A scalar has one element on a virtual axis. */
  if (rank == 0) {
    if (s->axis != 0 && s->axis != -1)
      return onyx__cuda_error(ctx, ONYX_STATUS_INVALID_ARGUMENT,
                              "axis %lld is out of range for a scalar", (long long)s->axis);
  } else if (!onyx__cuda_normalize_axis(s->axis, rank, &axis)) {
    return onyx__cuda_error(ctx, ONYX_STATUS_INVALID_ARGUMENT,
                            "axis %lld is out of range for input %s", (long long)s->axis,
                            onyx__cuda_tensor_shape(x).s);
  }
  int64_t outer = onyx__cuda_dims_product(x->dims, 0, (uint32_t)axis);
  int64_t len, inner;
  if (s->head.opset < 13) {
    len = onyx__cuda_dims_product(x->dims, (uint32_t)axis, x->rank);
    inner = 1;
  } else {
    len = rank == 0 ? 1 : x->dims[axis];
    inner = rank == 0 ? 1 : onyx__cuda_dims_product(x->dims, (uint32_t)axis + 1, x->rank);
  }
  onyx_tensor *y = NULL;
  st = onyx__cuda_alloc_output(&s->head, ctx, 0, x->dtype, x->rank, x->dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  cudaError_t e = onyx__cuda_launch_softmax(x->dtype, x->data, y->data, outer, len, inner,
                                            (cudaStream_t)ctx->stream);
  return onyx__cuda_check(ctx, e, "Softmax");
}

static onyx_status softmax_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                 onyx_tensor *outputs, size_t output_count) {
  onyx__cuda_infer_begin(outputs, output_count);
  (void)state;
  if (input_count < 1 || output_count < 1) return ONYX_STATUS_INVALID_ARGUMENT;
  outputs[0] = inputs[0];
  outputs[0].data = NULL;
  return ONYX_STATUS_OK;
}

#define CUDA_SOFTMAX_KERNEL(sym, SINCE, UNTIL)                                                     \
  const onyx_kernel_table sym = {                                                                  \
      .struct_size = sizeof(onyx_kernel_table),                                                    \
      .version = ONYX_ABI_VERSION,                                                                 \
      .domain = "",                                                                                \
      .op_type = "Softmax",                                                                        \
      .since_opset = SINCE,                                                                        \
      .until_opset = UNTIL,                                                                        \
      .type_input = 0,                                                                             \
      .type_mask = ONYX__CUDA_FLOAT_TYPES,                                                         \
      .supports = NULL,                                                                            \
      .create = softmax_create,                                                                    \
      .destroy = onyx__cuda_destroy,                                                               \
      .workspace = NULL,                                                                           \
      .compute = softmax_compute,                                                                  \
      .infer = softmax_infer,                                                                      \
  };

CUDA_SOFTMAX_KERNEL(onyx__cuda_k_softmax_1, 1, 12)
CUDA_SOFTMAX_KERNEL(onyx__cuda_k_softmax_13, 13, 0)
