/*
 * Softmax.
 *
 * The definition changed at opset 13. Before it, the input was coerced to 2-D at
 * `axis` (default 1): rows are dims[0..axis), and each row is normalised over all
 * of dims[axis..) flattened. From opset 13 the normalisation runs along the single
 * axis `axis` (default -1). Both are "outer × length × inner" loops; the old form
 * is the case inner = 1 with the trailing dims folded into the length.
 *
 * Each slice subtracts its maximum before exponentiating so large inputs do not
 * overflow. 16-bit floats are computed in float32 and rounded once per result.
 */
#include <math.h>

#include "cpu_impl.h"

typedef struct cpu_softmax_state {
  onyx__cpu_node base;
  int64_t axis;
} cpu_softmax_state;

static onyx_status cpu_softmax_create(void *provider_state, const onyx_node_info *node,
                                      void **out_state, char *err, size_t err_cap) {
  cpu_softmax_state *s = onyx__cpu_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  onyx_status st =
      onyx__cpu_attr_int(node, "axis", node->opset >= 13 ? -1 : 1, &s->axis, err, err_cap);
  if (st != ONYX_STATUS_OK) {
    onyx__cpu_destroy(s);
    return st;
  }
  *out_state = s;
  return ONYX_STATUS_OK;
}

/* One slice of `len` elements `stride` apart, in double. */
static void cpu_softmax_f64(const double *x, double *y, int64_t len, int64_t stride) {
  double mx = -INFINITY;
  for (int64_t i = 0; i < len; ++i) mx = fmax(mx, x[i * stride]);
  double sum = 0.0;
  for (int64_t i = 0; i < len; ++i) {
    double e = exp(x[i * stride] - mx);
    y[i * stride] = e;
    sum += e;
  }
  for (int64_t i = 0; i < len; ++i) y[i * stride] /= sum;
}

/* The same in float32. float32 output holds the exponentials between passes; a
 * 16-bit output cannot hold them exactly, so they are computed again instead of
 * being stored rounded. */
static void cpu_softmax_f32(uint32_t dtype, const void *x, void *y, int64_t base, int64_t len,
                            int64_t stride) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < len; ++i) mx = fmaxf(mx, onyx__cpu_load_f32(dtype, x, base + i * stride));
  float sum = 0.0f;
  if (dtype == ONYX_DTYPE_FLOAT32) {
    const float *xf = (const float *)x + base;
    float *yf = (float *)y + base;
    for (int64_t i = 0; i < len; ++i) {
      float e = expf(xf[i * stride] - mx);
      yf[i * stride] = e;
      sum += e;
    }
    for (int64_t i = 0; i < len; ++i) yf[i * stride] /= sum;
    return;
  }
  for (int64_t i = 0; i < len; ++i)
    sum += expf(onyx__cpu_load_f32(dtype, x, base + i * stride) - mx);
  for (int64_t i = 0; i < len; ++i) {
    int64_t at = base + i * stride;
    onyx__cpu_store_f32(dtype, y, at, expf(onyx__cpu_load_f32(dtype, x, at) - mx) / sum);
  }
}

static onyx_status cpu_softmax_compute(void *state, onyx_compute_ctx *ctx,
                                       const onyx_tensor *const *inputs, size_t input_count) {
  const cpu_softmax_state *s = state;
  onyx_status st = onyx__cpu_check_inputs(ctx, inputs, input_count, 1);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *x = inputs[0];
  if (!onyx__cpu_dtype_in(x->dtype, ONYX__CPU_FLOAT_TYPES)) {
    ctx->set_error(ctx, "input 0 has dtype %s, which is not supported",
                   onyx__cpu_dtype_name(x->dtype));
    return ONYX_STATUS_UNSUPPORTED;
  }
  /* A scalar is a one-element slice (rank 0 accepts axis 0 and -1 like rank 1). */
  int64_t rank = x->rank, axis;
  if (!onyx__cpu_normalize_axis(s->axis, rank > 0 ? rank : 1, &axis)) {
    ctx->set_error(ctx, "axis %lld is out of range for input 0 of rank %lld", (long long)s->axis,
                   (long long)rank);
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  if (rank == 0) axis = 0;
  const uint32_t ax = (uint32_t)axis, r = (uint32_t)rank;
  int64_t outer = onyx__cpu_dims_product(x->dims, 0, ax);
  int64_t len, inner;
  if (s->base.opset >= 13) {
    len = r > 0 ? x->dims[ax] : 1;
    inner = r > 0 ? onyx__cpu_dims_product(x->dims, ax + 1, r) : 1;
  } else {
    len = onyx__cpu_dims_product(x->dims, ax, r);
    inner = 1;
  }

  onyx_tensor *y = NULL;
  st = onyx__cpu_alloc_output(&s->base, ctx, x->dtype, x->rank, x->dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  if (len == 0) return ONYX_STATUS_OK;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      int64_t base = o * len * inner + in;
      if (x->dtype == ONYX_DTYPE_FLOAT64)
        cpu_softmax_f64((const double *)x->data + base, (double *)y->data + base, len, inner);
      else
        cpu_softmax_f32(x->dtype, x->data, y->data, base, len, inner);
    }
  }
  return ONYX_STATUS_OK;
}

#define CPU_SOFTMAX_KERNEL(sfx, SINCE, UNTIL)                                                      \
  const onyx_kernel_table onyx__cpu_k_softmax_##sfx = {                                            \
      .struct_size = sizeof(onyx_kernel_table),                                                    \
      .version = ONYX_ABI_VERSION,                                                                 \
      .domain = "",                                                                                \
      .op_type = "Softmax",                                                                        \
      .since_opset = SINCE,                                                                        \
      .until_opset = UNTIL,                                                                        \
      .type_input = 0,                                                                             \
      .type_mask = ONYX__CPU_FLOAT_TYPES,                                                          \
      .create = cpu_softmax_create,                                                                \
      .destroy = onyx__cpu_destroy,                                                                \
      .compute = cpu_softmax_compute,                                                              \
      .infer = onyx__cpu_infer_same,                                                               \
  };

CPU_SOFTMAX_KERNEL(1, 1, 12)  /* 2-D coercion at axis, default 1 */
CPU_SOFTMAX_KERNEL(13, 13, 0) /* along one axis, default -1 */
