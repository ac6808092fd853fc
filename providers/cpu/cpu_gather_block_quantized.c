/*
 * com.microsoft GatherBlockQuantized: a Gather on block-quantized data, dequantized on
 * the way out: output[..., i, ...] = (code − zero_point) · scale of data[..., indices[i],
 * ...], with the scale and zero point of the element's block along quantize_axis.
 * Decoders use it for the embedding table that shares its int4 codes with the output
 * projection (MatMulNBits); only the gathered rows are ever dequantized.
 *
 * data is uint8 holding 8/bits codes a byte along its last axis (then gather_axis is 0
 * and quantize_axis the last axis), or int4 / uint4 (any axes). Default zero points:
 * 2^(bits−1) for uint8, 0 for int4 and uint4. An index out of [−s, s) gives zeros, as
 * ONNX Runtime defines it. Checks: providers/common/nbits_params.c.
 */
#include <string.h>

#include "cpu_nbits.h"

typedef struct gbq_state {
  onyx__cpu_node base;
  onyx__pc_gbq_attrs attrs;
} gbq_state;

static onyx_status gbq_create(void *provider_state, const onyx_node_info *node, void **out_state,
                              char *err, size_t err_cap) {
  gbq_state *s = onyx__cpu_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  onyx_status st = onyx__pc_gbq_attrs_read(node, &s->attrs, err, err_cap);
  if (st != ONYX_STATUS_OK) {
    onyx__cpu_destroy(s);
    return st;
  }
  *out_state = s;
  return ONYX_STATUS_OK;
}

static onyx_status gbq_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                             onyx_tensor *outputs, size_t output_count) {
  const gbq_state *s = state;
  const onyx_tensor *in[4];
  onyx__pc_gbq_geom g;
  if (!onyx__cpu_infer_inputs(inputs, input_count, in, 4) ||
      onyx__pc_gbq_geometry(&s->attrs, in, input_count, &g, NULL, 0) != ONYX_STATUS_OK)
    return ONYX_STATUS_INVALID_ARGUMENT;
  onyx__cpu_infer_out(outputs, output_count, 0, g.out_dtype, g.out_rank, g.out_dims);
  return ONYX_STATUS_OK;
}

typedef struct gbq_job {
  const onyx__pc_gbq_attrs *a;
  const onyx__pc_gbq_geom *g;
  const onyx_tensor *data, *indices, *scales, *zp;
  onyx_tensor *out;
  int64_t outer, gather_dim, inner, count; /* count: elements of indices */
  int64_t q_dim, q_inner;                  /* dims[quantize_axis], product of the dims after */
  int64_t zp_row;                          /* uint8 zero points: bytes per last-axis row */
} gbq_job;

/* Code at logical flat index f of data (or of the zero points: same packing rules). */
static inline int gbq_code(uint32_t dtype, int bits, const uint8_t *p, int64_t f) {
  if (dtype == ONYX_DTYPE_UINT8) {
    int64_t bit = f * bits;
    return (p[bit / 8] >> (bit % 8)) & ((1 << bits) - 1);
  }
  int v = (p[f / 2] >> (4 * (f % 2))) & 0xF;
  return dtype == ONYX_DTYPE_INT4 && v >= 8 ? v - 16 : v;
}

/* Zero point of the block whose scale sits at flat index si. */
static inline float gbq_zero_point(const gbq_job *j, int64_t si) {
  const int bits = (int)j->a->bits;
  if (j->zp == NULL) return j->g->data_dtype == ONYX_DTYPE_UINT8 ? (float)(1 << (bits - 1)) : 0.0f;
  if (j->g->data_dtype != ONYX_DTYPE_UINT8)
    return (float)gbq_code(j->zp->dtype, 4, j->zp->data, si);
  /* uint8 zero points pack the blocks of one last-axis row into zp_row bytes. */
  const int64_t row = si / j->g->blocks, col = si % j->g->blocks;
  return (float)gbq_code(ONYX_DTYPE_UINT8, bits, (const uint8_t *)j->zp->data + row * j->zp_row,
                         col);
}

/* One output slice of `inner` elements from data slice (o, idx). */
static void gbq_slice(const gbq_job *j, int64_t o, int64_t idx, int64_t out_base) {
  const int bits = (int)j->a->bits;
  const int64_t bs = j->a->block_size, f0 = (o * j->gather_dim + idx) * j->inner;
  const uint8_t *d = j->data->data;
  const uint32_t dt = j->g->data_dtype, st = j->scales->dtype, ot = j->out->dtype;
  if (j->q_inner == 1 && j->g->gather_axis < j->g->quantize_axis) {
    /* Quantized along the last axis, whole rows of it in the slice: blocks run along. */
    for (int64_t e0 = 0; e0 < j->inner; e0 += j->q_dim) {
      const int64_t f = f0 + e0, srow = (f / j->q_dim) * j->g->blocks;
      for (int64_t b = 0; b * bs < j->q_dim; ++b) {
        const float scale = onyx__cpu_load_f32(st, j->scales->data, srow + b);
        const float zp = gbq_zero_point(j, srow + b);
        const int64_t e1 = (b + 1) * bs < j->q_dim ? (b + 1) * bs : j->q_dim;
        for (int64_t e = b * bs; e < e1; ++e)
          onyx__cpu_store_f32(ot, j->out->data, out_base + e0 + e,
                              ((float)gbq_code(dt, bits, d, f + e) - zp) * scale);
      }
    }
    return;
  }
  for (int64_t e = 0; e < j->inner; ++e) {
    const int64_t f = f0 + e, after = f % j->q_inner, c = (f / j->q_inner) % j->q_dim;
    const int64_t before = f / (j->q_inner * j->q_dim);
    const int64_t si = (before * j->g->blocks + c / bs) * j->q_inner + after;
    const float v = ((float)gbq_code(dt, bits, d, f) - gbq_zero_point(j, si)) *
                    onyx__cpu_load_f32(st, j->scales->data, si);
    onyx__cpu_store_f32(ot, j->out->data, out_base + e, v);
  }
}

/* Slices [s0, s1): slice s = (outer index, position in indices). */
static void gbq_slices(void *arg, int64_t s0, int64_t s1) {
  const gbq_job *j = arg;
  const size_t esize = onyx_dtype_size(j->out->dtype);
  for (int64_t s = s0; s < s1; ++s) {
    const int64_t o = s / j->count, i = s % j->count;
    int64_t idx = onyx__cpu_int_at(j->indices, i);
    if (idx < 0) idx += j->gather_dim;
    if (idx < 0 || idx >= j->gather_dim) { /* out of range: zeros, as the op defines */
      memset((char *)j->out->data + (size_t)(s * j->inner) * esize, 0, (size_t)j->inner * esize);
      continue;
    }
    gbq_slice(j, o, idx, s * j->inner);
  }
}

static onyx_status gbq_compute(void *state, onyx_compute_ctx *ctx, const onyx_tensor *const *inputs,
                               size_t input_count) {
  const gbq_state *s = state;
  onyx_status st = onyx__cpu_check_inputs(ctx, inputs, input_count, 3);
  if (st != ONYX_STATUS_OK) return st;
  onyx__pc_gbq_geom g;
  char why[512];
  st = onyx__pc_gbq_geometry(&s->attrs, inputs, input_count, &g, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__pc_error(ctx, st, "%s", why);
  onyx_tensor *out = NULL;
  st = onyx__cpu_alloc_output(&s->base, ctx, g.out_dtype, g.out_rank, g.out_dims, &out);
  if (st != ONYX_STATUS_OK || out == NULL) return st;
  gbq_job j = {.a = &s->attrs,
               .g = &g,
               .data = inputs[0],
               .indices = inputs[1],
               .scales = inputs[2],
               .zp = input_count > 3 ? inputs[3] : NULL,
               .out = out,
               .outer = onyx__cpu_dims_product(g.dims, 0, g.gather_axis),
               .gather_dim = g.dims[g.gather_axis],
               .inner = onyx__cpu_dims_product(g.dims, g.gather_axis + 1, g.rank),
               .count = onyx_tensor_numel(inputs[1]),
               .q_dim = g.dims[g.quantize_axis],
               .q_inner = onyx__cpu_dims_product(g.dims, g.quantize_axis + 1, g.rank)};
  if (j.zp != NULL && j.zp->rank > 0) j.zp_row = j.zp->dims[j.zp->rank - 1];
  /* Each slice dequantizes `inner` elements: a few hundred of them make a task. */
  int64_t grain = j.inner > 0 ? ONYX__CPU_PARALLEL_GRAIN / (8 * j.inner) : 1;
  onyx__cpu_parallel_range(s->base.provider, j.outer * j.count, grain > 0 ? grain : 1, gbq_slices,
                           &j);
  return ONYX_STATUS_OK;
}

const onyx_kernel_table onyx__cpu_k_gather_block_quantized = {
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
    .destroy = onyx__cpu_destroy,
    .compute = gbq_compute,
    .infer = gbq_infer,
};
