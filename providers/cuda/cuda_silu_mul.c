/*
 * ai.onyx::SiluMul (docs/ops.md): H [..., 2N] -> Y [..., N],
 * Y[..., j] = silu(H[..., j]) · H[..., N + j], float32/float16/bfloat16 computed in
 * float32. Made by the gate_up_silu optimization from a decoder MLP's Sigmoid, Mul
 * and Mul: one launch instead of three (cuda_silu_mul.cu). The same refusals, in the
 * same words, as the CPU kernel.
 */
#include <string.h>

#include "cuda_impl.h"
#include "cuda_silu_mul.h"

extern const onyx_kernel_table onyx__cuda_k_silu_mul;

/* The output geometry of input `h`, or a message in why. */
static onyx_status silu_mul_shape(const onyx_tensor *h, uint32_t *rank, int64_t *dims, char *why,
                                  size_t cap) {
  if (!onyx__cuda_dtype_in(h->dtype, ONYX__CUDA_FLOAT_TYPES))
    return onyx__cuda_fail(why, cap, ONYX_STATUS_UNSUPPORTED,
                           "input 0 has dtype %s; float32, float16 or bfloat16 expected",
                           onyx__cuda_dtype_name(h->dtype));
  if (h->rank < 1 || h->dims[h->rank - 1] % 2 != 0)
    return onyx__cuda_fail(why, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "input 0 %s must have at least one dim and an even last dim "
                           "(gate and up halves)",
                           onyx__cuda_tensor_shape(h).s);
  *rank = h->rank;
  memcpy(dims, h->dims, h->rank * sizeof dims[0]);
  dims[h->rank - 1] /= 2;
  return ONYX_STATUS_OK;
}

static onyx_status silu_mul_compute(void *state, onyx_compute_ctx *ctx,
                                    const onyx_tensor *const *inputs, size_t input_count) {
  const onyx__cuda_node *s = state;
  onyx_status st = onyx__cuda_check_inputs(ctx, inputs, input_count, 1);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *h = inputs[0];
  uint32_t rank = 0;
  int64_t dims[ONYX_MAX_RANK];
  char why[ONYX__CUDA_REASON_CAP] = "";
  if ((st = silu_mul_shape(h, &rank, dims, why, sizeof why)) != ONYX_STATUS_OK)
    return onyx__cuda_error(ctx, st, "%s", why);
  onyx_tensor *y = NULL;
  st = onyx__cuda_alloc_output(s, ctx, 0, h->dtype, rank, dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  int64_t n = dims[rank - 1], total = onyx_tensor_numel(y);
  cudaError_t e = onyx__cuda_launch_silu_mul(h->dtype, h->data, y->data, n ? total / n : 0, n,
                                             (cudaStream_t)ctx->stream);
  return onyx__cuda_check(ctx, e, "SiluMul");
}

static onyx_status silu_mul_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                  onyx_tensor *outputs, size_t output_count) {
  onyx__cuda_infer_begin(outputs, output_count);
  if (input_count < 1 || output_count < 1 || inputs[0].dtype == ONYX_DTYPE_UNDEFINED)
    return ONYX_STATUS_INVALID_ARGUMENT;
  uint32_t rank = 0;
  int64_t dims[ONYX_MAX_RANK];
  char why[ONYX__CUDA_REASON_CAP] = "";
  onyx_status st = silu_mul_shape(&inputs[0], &rank, dims, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cuda_reason(state, st, why);
  memset(&outputs[0], 0, sizeof outputs[0]);
  outputs[0].dtype = inputs[0].dtype;
  outputs[0].device = inputs[0].device;
  outputs[0].rank = rank;
  memcpy(outputs[0].dims, dims, rank * sizeof dims[0]);
  return ONYX_STATUS_OK;
}

const onyx_kernel_table onyx__cuda_k_silu_mul = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "ai.onyx",
    .op_type = "SiluMul",
    .since_opset = 1,
    .until_opset = 0,
    .type_input = 0,
    .type_mask = ONYX__CUDA_FLOAT_TYPES,
    .supports = NULL,
    .create = onyx__cuda_create_plain,
    .destroy = onyx__cuda_destroy,
    .workspace = NULL,
    .compute = silu_mul_compute,
    .infer = silu_mul_infer,
};
