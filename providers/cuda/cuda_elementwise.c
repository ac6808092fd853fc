/*
 * Elementwise ops on the device: Add Sub Mul Div Pow Equal (numpy broadcasting),
 * Neg Sqrt Sigmoid Tanh Relu Erf, and Where (three-way broadcasting). Add Sub Mul Div
 * and Equal also take int32/int64 (Equal bool too); the rest take float types.
 *
 * Host side: validation, the broadcast plan and infer; the kernels are in
 * cuda_elementwise.cu.
 */
#include <string.h>

#include "cuda_impl.h"

typedef struct ew_state {
  onyx__cuda_node head;
  int op; /* onyx__cuda_binary_op or onyx__cuda_unary_op */
} ew_state;

static onyx_status ew_create(void *provider_state, const onyx_node_info *node, int op,
                             void **out_state, char *err, size_t err_cap) {
  ew_state *s = onyx__cuda_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  s->op = op;
  *out_state = s;
  return ONYX_STATUS_OK;
}

/* ------------------------------------------------------------------ binary */

/* Operand types by op. Add Sub Mul Div take a float type, computed in float32 for the
 * 16-bit ones, or int32/int64, computed exactly in their own type: a decoder's
 * attention-mask arithmetic (seqlens_k = ReduceSum(mask) - 1) stays on the device.
 * Equal also compares bools. Pow takes a float base only. */
#define ARITH_TYPES (ONYX__CUDA_FLOAT_TYPES | ONYX__CUDA_INDEX_TYPES)
#define EQUAL_TYPES (ARITH_TYPES | ONYX_DTYPE_BIT(ONYX_DTYPE_BOOL))

/* Checks the operand types of a binary op; the message goes through err. */
static onyx_status binary_types(int op, uint32_t a, uint32_t b, char *err, size_t err_cap) {
  uint64_t mask = ARITH_TYPES;
  const char *expected = "float32, float16, bfloat16, int32 or int64";
  if (op == ONYX__CUDA_POW) {
    mask = ONYX__CUDA_FLOAT_TYPES;
    expected = "float32, float16 or bfloat16";
  } else if (op == ONYX__CUDA_EQUAL) {
    mask = EQUAL_TYPES;
    expected = "float32, float16, bfloat16, int32, int64 or bool";
  }
  if (!onyx__cuda_dtype_in(a, mask))
    return onyx__cuda_fail(err, err_cap, ONYX_STATUS_UNSUPPORTED,
                           "input 0 has type %s; %s expected", onyx__cuda_dtype_name(a), expected);
  if (op == ONYX__CUDA_POW) {
    if (!onyx__cuda_dtype_in(b, ONYX__CUDA_FLOAT_TYPES | ONYX__CUDA_INDEX_TYPES))
      return onyx__cuda_fail(err, err_cap, ONYX_STATUS_UNSUPPORTED,
                             "exponent has type %s; a float type, int32 or int64 expected",
                             onyx__cuda_dtype_name(b));
  } else if (a != b) {
    return onyx__cuda_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "inputs have types %s and %s; they must match", onyx__cuda_dtype_name(a),
                           onyx__cuda_dtype_name(b));
  }
  return ONYX_STATUS_OK;
}

static bool binary_supports(const onyx_node_info *node, char *reason, size_t cap) {
  if (node->input_count < 2 || node->input_dtypes == NULL) return true;
  uint32_t a = node->input_dtypes[0], b = node->input_dtypes[1];
  if (a == ONYX_DTYPE_UNDEFINED || b == ONYX_DTYPE_UNDEFINED) return true;
  int op = ONYX__CUDA_ADD; /* stands for Add Sub Mul Div, which take the same types */
  if (!strcmp(node->op_type, "Pow"))
    op = ONYX__CUDA_POW;
  else if (!strcmp(node->op_type, "Equal"))
    op = ONYX__CUDA_EQUAL;
  return binary_types(op, a, b, reason, cap) == ONYX_STATUS_OK;
}

static onyx_status binary_compute(void *state, onyx_compute_ctx *ctx,
                                  const onyx_tensor *const *inputs, size_t input_count) {
  const ew_state *s = state;
  onyx_status st = onyx__cuda_check_inputs(ctx, inputs, input_count, 2);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *a = inputs[0], *b = inputs[1];
  char err[384];
  if ((st = binary_types(s->op, a->dtype, b->dtype, err, sizeof err)) != ONYX_STATUS_OK)
    return onyx__cuda_error(ctx, st, "%s", err);
  onyx__cuda_walk w;
  uint32_t rank = 0;
  int64_t dims[ONYX_MAX_RANK];
  const onyx_tensor *shapes[2] = {a, b};
  if ((st = onyx__cuda_broadcast(&w, &rank, dims, 2, shapes, err, sizeof err)) != ONYX_STATUS_OK)
    return onyx__cuda_error(ctx, st, "%s", err);
  uint32_t out_dtype = s->op == ONYX__CUDA_EQUAL ? ONYX_DTYPE_BOOL : a->dtype;
  onyx_tensor *y = NULL;
  st = onyx__cuda_alloc_output(&s->head, ctx, 0, out_dtype, rank, dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  cudaError_t e = onyx__cuda_launch_binary((onyx__cuda_binary_op)s->op, a->dtype, b->dtype, a->data,
                                           b->data, y->data, &w, (cudaStream_t)ctx->stream);
  return onyx__cuda_check(ctx, e, s->head.op_type);
}

static onyx_status binary_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                onyx_tensor *outputs, size_t output_count) {
  onyx__cuda_infer_begin(outputs, output_count);
  const ew_state *s = state;
  if (input_count < 2 || output_count < 1) return ONYX_STATUS_INVALID_ARGUMENT;
  const onyx_tensor *shapes[2] = {&inputs[0], &inputs[1]};
  char why[ONYX__CUDA_REASON_CAP] = "";
  onyx_status st =
      onyx__cuda_broadcast_shape(2, shapes, &outputs[0].rank, outputs[0].dims, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cuda_reason(state, st, why);
  outputs[0].dtype = s->op == ONYX__CUDA_EQUAL ? ONYX_DTYPE_BOOL : inputs[0].dtype;
  return ONYX_STATUS_OK;
}

#define CUDA_BINARY_KERNEL(sym, OP, NAME, SINCE, TYPES)                                            \
  static onyx_status sym##_create(void *provider_state, const onyx_node_info *node,                \
                                  void **out_state, char *err, size_t err_cap) {                   \
    return ew_create(provider_state, node, OP, out_state, err, err_cap);                           \
  }                                                                                                \
  const onyx_kernel_table onyx__cuda_k_##sym = {                                                   \
      .struct_size = sizeof(onyx_kernel_table),                                                    \
      .version = ONYX_ABI_VERSION,                                                                 \
      .domain = "",                                                                                \
      .op_type = NAME,                                                                             \
      .since_opset = SINCE,                                                                        \
      .until_opset = 0,                                                                            \
      .type_input = 0,                                                                             \
      .type_mask = TYPES,                                                                          \
      .supports = binary_supports,                                                                 \
      .create = sym##_create,                                                                      \
      .destroy = onyx__cuda_destroy,                                                               \
      .workspace = NULL,                                                                           \
      .compute = binary_compute,                                                                   \
      .infer = binary_infer,                                                                       \
  };

/* Opsets 1-6 carried the legacy `broadcast` attribute; these take numpy rules. */
CUDA_BINARY_KERNEL(add, ONYX__CUDA_ADD, "Add", 7, ARITH_TYPES)
CUDA_BINARY_KERNEL(sub, ONYX__CUDA_SUB, "Sub", 7, ARITH_TYPES)
CUDA_BINARY_KERNEL(mul, ONYX__CUDA_MUL, "Mul", 7, ARITH_TYPES)
CUDA_BINARY_KERNEL(div, ONYX__CUDA_DIV, "Div", 7, ARITH_TYPES)
CUDA_BINARY_KERNEL(pow, ONYX__CUDA_POW, "Pow", 7, ONYX__CUDA_FLOAT_TYPES)
CUDA_BINARY_KERNEL(equal, ONYX__CUDA_EQUAL, "Equal", 7, EQUAL_TYPES)

/* ------------------------------------------------------------------ unary */

static onyx_status unary_compute(void *state, onyx_compute_ctx *ctx,
                                 const onyx_tensor *const *inputs, size_t input_count) {
  const ew_state *s = state;
  onyx_status st = onyx__cuda_check_inputs(ctx, inputs, input_count, 1);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *x = inputs[0];
  if (!onyx__cuda_dtype_in(x->dtype, ONYX__CUDA_FLOAT_TYPES))
    return onyx__cuda_error(ctx, ONYX_STATUS_UNSUPPORTED,
                            "input has type %s; float32, float16 or bfloat16 expected",
                            onyx__cuda_dtype_name(x->dtype));
  onyx_tensor *y = NULL;
  st = onyx__cuda_alloc_output(&s->head, ctx, 0, x->dtype, x->rank, x->dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  cudaError_t e = onyx__cuda_launch_unary((onyx__cuda_unary_op)s->op, x->dtype, x->data, y->data,
                                          onyx_tensor_numel(x), (cudaStream_t)ctx->stream);
  return onyx__cuda_check(ctx, e, s->head.op_type);
}

static onyx_status same_shape_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                    onyx_tensor *outputs, size_t output_count) {
  onyx__cuda_infer_begin(outputs, output_count);
  (void)state;
  if (input_count < 1 || output_count < 1) return ONYX_STATUS_INVALID_ARGUMENT;
  outputs[0] = inputs[0];
  outputs[0].data = NULL;
  return ONYX_STATUS_OK;
}

#define CUDA_UNARY_KERNEL(sym, OP, NAME, SINCE)                                                    \
  static onyx_status sym##_create(void *provider_state, const onyx_node_info *node,                \
                                  void **out_state, char *err, size_t err_cap) {                   \
    return ew_create(provider_state, node, OP, out_state, err, err_cap);                           \
  }                                                                                                \
  const onyx_kernel_table onyx__cuda_k_##sym = {                                                   \
      .struct_size = sizeof(onyx_kernel_table),                                                    \
      .version = ONYX_ABI_VERSION,                                                                 \
      .domain = "",                                                                                \
      .op_type = NAME,                                                                             \
      .since_opset = SINCE,                                                                        \
      .until_opset = 0,                                                                            \
      .type_input = 0,                                                                             \
      .type_mask = ONYX__CUDA_FLOAT_TYPES,                                                         \
      .supports = NULL,                                                                            \
      .create = sym##_create,                                                                      \
      .destroy = onyx__cuda_destroy,                                                               \
      .workspace = NULL,                                                                           \
      .compute = unary_compute,                                                                    \
      .infer = same_shape_infer,                                                                   \
  };

/* Opsets before 6 carried `consumed_inputs`; they are not claimed. */
CUDA_UNARY_KERNEL(neg, ONYX__CUDA_NEG, "Neg", 6)
CUDA_UNARY_KERNEL(sqrt, ONYX__CUDA_SQRT, "Sqrt", 6)
CUDA_UNARY_KERNEL(sigmoid, ONYX__CUDA_SIGMOID, "Sigmoid", 6)
CUDA_UNARY_KERNEL(tanh, ONYX__CUDA_TANH, "Tanh", 6)
CUDA_UNARY_KERNEL(relu, ONYX__CUDA_RELU, "Relu", 6)
CUDA_UNARY_KERNEL(erf, ONYX__CUDA_ERF, "Erf", 9)

/* ------------------------------------------------------------------ Where */

static onyx_status where_compute(void *state, onyx_compute_ctx *ctx,
                                 const onyx_tensor *const *inputs, size_t input_count) {
  const onyx__cuda_node *s = state;
  onyx_status st = onyx__cuda_check_inputs(ctx, inputs, input_count, 3);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *c = inputs[0], *x = inputs[1], *y = inputs[2];
  if (c->dtype != ONYX_DTYPE_BOOL)
    return onyx__cuda_error(ctx, ONYX_STATUS_INVALID_ARGUMENT,
                            "condition has type %s; bool expected",
                            onyx__cuda_dtype_name(c->dtype));
  if (x->dtype != y->dtype)
    return onyx__cuda_error(ctx, ONYX_STATUS_INVALID_ARGUMENT,
                            "X (%s) and Y (%s) must have the same type",
                            onyx__cuda_dtype_name(x->dtype), onyx__cuda_dtype_name(y->dtype));
  char err[384];
  onyx__cuda_walk w;
  uint32_t rank = 0;
  int64_t dims[ONYX_MAX_RANK];
  const onyx_tensor *shapes[3] = {c, x, y};
  if ((st = onyx__cuda_broadcast(&w, &rank, dims, 3, shapes, err, sizeof err)) != ONYX_STATUS_OK)
    return onyx__cuda_error(ctx, st, "%s", err);
  onyx_tensor *out = NULL;
  st = onyx__cuda_alloc_output(s, ctx, 0, x->dtype, rank, dims, &out);
  if (st != ONYX_STATUS_OK || out == NULL) return st;
  cudaError_t e = onyx__cuda_launch_where(onyx_dtype_size(x->dtype), c->data, x->data, y->data,
                                          out->data, &w, (cudaStream_t)ctx->stream);
  return onyx__cuda_check(ctx, e, "Where");
}

static onyx_status where_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                               onyx_tensor *outputs, size_t output_count) {
  onyx__cuda_infer_begin(outputs, output_count);
  (void)state;
  if (input_count < 3 || output_count < 1) return ONYX_STATUS_INVALID_ARGUMENT;
  const onyx_tensor *shapes[3] = {&inputs[0], &inputs[1], &inputs[2]};
  char why[ONYX__CUDA_REASON_CAP] = "";
  onyx_status st =
      onyx__cuda_broadcast_shape(3, shapes, &outputs[0].rank, outputs[0].dims, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cuda_reason(state, st, why);
  outputs[0].dtype = inputs[1].dtype;
  return st;
}

const onyx_kernel_table onyx__cuda_k_where = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "",
    .op_type = "Where",
    .since_opset = 9,
    .until_opset = 0,
    .type_input = 1, /* X: the data; the condition is bool */
    .type_mask = ONYX__CUDA_FLOAT_TYPES,
    .supports = NULL,
    .create = onyx__cuda_create_plain,
    .destroy = onyx__cuda_destroy,
    .workspace = NULL,
    .compute = where_compute,
    .infer = where_infer,
};
