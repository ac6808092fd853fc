/*
 * com.microsoft GatherBlockQuantized on CUDA: a Gather on block-quantized data,
 * dequantized on the way out (the embedding table of int4 decoder exports, which shares
 * its codes with the output projection's MatMulNBits). Same inputs and refusals as the
 * CPU provider: the checks are providers/common/nbits_params.c; the kernel is
 * cuda_gather_block_quantized.cu. Only the gathered rows are dequantized.
 */
#include <string.h>

#include "cuda_impl.h"
#include "cuda_nbits.h"
#include "nbits_params.h"

typedef struct gbq_state {
  onyx__cuda_node head;
  onyx__pc_gbq_attrs attrs;
} gbq_state;

static onyx_status gbq_create(void *provider_state, const onyx_node_info *node, void **out_state,
                              char *err, size_t err_cap) {
  onyx__pc_gbq_attrs a;
  onyx_status st = onyx__pc_gbq_attrs_read(node, &a, err, err_cap);
  if (st != ONYX_STATUS_OK) return st;
  gbq_state *s = onyx__cuda_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  s->attrs = a;
  *out_state = s;
  return ONYX_STATUS_OK;
}

static onyx_status gbq_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                             onyx_tensor *outputs, size_t output_count) {
  onyx__cuda_infer_begin(outputs, output_count);
  const gbq_state *s = state;
  const onyx_tensor *in[4];
  if (input_count > 4 || output_count < 1)
    return onyx__cuda_reason(state, ONYX_STATUS_INVALID_ARGUMENT,
                             "expected at most 4 inputs and 1 output");
  for (size_t i = 0; i < input_count; ++i)
    in[i] = inputs[i].dtype == ONYX_DTYPE_UNDEFINED ? NULL : &inputs[i];
  onyx__pc_gbq_geom g;
  char why[ONYX__CUDA_REASON_CAP] = "";
  onyx_status st = onyx__pc_gbq_geometry(&s->attrs, in, input_count, &g, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cuda_reason(state, st, why);
  outputs[0].dtype = g.out_dtype;
  outputs[0].rank = g.out_rank;
  memcpy(outputs[0].dims, g.out_dims, sizeof(int64_t) * g.out_rank);
  return ONYX_STATUS_OK;
}

static onyx_status gbq_compute(void *state, onyx_compute_ctx *ctx, const onyx_tensor *const *inputs,
                               size_t input_count) {
  const gbq_state *s = state;
  onyx_status st = onyx__cuda_check_inputs(ctx, inputs, input_count, 3);
  if (st != ONYX_STATUS_OK) return st;
  onyx__pc_gbq_geom g;
  char why[ONYX__CUDA_REASON_CAP];
  st = onyx__pc_gbq_geometry(&s->attrs, inputs, input_count, &g, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cuda_error(ctx, st, "%s", why);
  onyx_tensor *out = NULL;
  st = onyx__cuda_alloc_output(&s->head, ctx, 0, g.out_dtype, g.out_rank, g.out_dims, &out);
  if (st != ONYX_STATUS_OK || out == NULL) return st;
  const onyx_tensor *zp = onyx__cuda_input(inputs, input_count, 3);
  onyx__cuda_gbq_args a = {
      .data_dtype = g.data_dtype,
      .index_dtype = inputs[1]->dtype,
      .scale_dtype = g.out_dtype,
      .bits = (int)s->attrs.bits,
      .block_size = s->attrs.block_size,
      .outer = onyx__cuda_dims_product(g.dims, 0, g.gather_axis),
      .gather_dim = g.dims[g.gather_axis],
      .inner = onyx__cuda_dims_product(g.dims, g.gather_axis + 1, g.rank),
      .count = onyx_tensor_numel(inputs[1]),
      .q_dim = g.dims[g.quantize_axis],
      .q_inner = onyx__cuda_dims_product(g.dims, g.quantize_axis + 1, g.rank),
      .blocks = g.blocks,
      .zp_row = zp != NULL && zp->rank > 0 ? zp->dims[zp->rank - 1] : 0,
      .data = inputs[0]->data,
      .indices = inputs[1]->data,
      .scales = inputs[2]->data,
      .zp = zp ? zp->data : NULL,
      .out = out->data,
  };
  return onyx__cuda_check(ctx, onyx__cuda_launch_gbq(&a, (cudaStream_t)ctx->stream),
                          "GatherBlockQuantized");
}

const onyx_kernel_table onyx__cuda_k_gather_block_quantized = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "com.microsoft",
    .op_type = "GatherBlockQuantized",
    .since_opset = 1,
    .until_opset = 0,
    .type_input = 0,
    .type_mask = ONYX_DTYPE_BIT(ONYX_DTYPE_UINT8) | ONYX_DTYPE_BIT(ONYX_DTYPE_INT4) |
                 ONYX_DTYPE_BIT(ONYX_DTYPE_UINT4),
    .create = gbq_create,
    .destroy = onyx__cuda_destroy,
    .compute = gbq_compute,
    .infer = gbq_infer,
};
