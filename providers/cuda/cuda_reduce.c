/*
 * ReduceSum. Axes are an attribute up to opset 12 and an optional input (1) from
 * opset 13, which the table lists in host_inputs: the core hands the values over in
 * host memory, so compute reads them without a copy back or a stream sync, and infer
 * answers from the planner's known values (UNSUPPORTED without them). No axes (absent,
 * or an empty list) reduces every axis, unless noop_with_empty_axes (13+) asks for the
 * input back unchanged. keepdims (default 1) keeps reduced axes as 1s; negative axes
 * count from the end; a repeated axis counts once.
 *
 * The host turns the node into a collapsed plan — the kept axes an output index walks
 * and the reduced axes each output sums over, neighbours that are contiguous merged,
 * size-1 axes dropped — so the device kernel's index arithmetic has as few axes as
 * possible whatever the axes set. Floats accumulate in float32, int32 and int64 in
 * 64-bit integers (wrapping, as the CPU provider's). A reduction over no elements (a
 * reduced axis of size 0) gives 0.
 */
#include <string.h>

#include "cuda_impl.h"

/* Inputs read on the host (the 13+ table's host_inputs). */
#define REDUCE13_HOST_INPUTS (UINT64_C(1) << 1) /* axes */

/* Most axes values accepted (a repeated axis counts once, so more than the rank may
 * come). */
#define REDUCE_MAX_AXES (2 * ONYX_MAX_RANK)

/* The dtypes ReduceSum computes on. */
#define REDUCE_TYPES (ONYX__CUDA_FLOAT_TYPES | ONYX__CUDA_INDEX_TYPES)

typedef struct reduce_state {
  onyx__cuda_node head;
  bool keepdims;
  bool noop_with_empty_axes;     /* 13+ */
  int64_t axes[REDUCE_MAX_AXES]; /* the attribute (to opset 12) */
  size_t axes_count;
} reduce_state;

/* The reduction of one node for one input geometry. */
typedef struct reduce_plan {
  bool noop; /* empty axes with noop_with_empty_axes: the input, copied */
  uint32_t out_rank;
  int64_t out_dims[ONYX_MAX_RANK];
  onyx__cuda_reduce_args args; /* x, y and dtype are set by compute */
} reduce_plan;

static onyx_status reduce_create(void *provider_state, const onyx_node_info *node, void **out_state,
                                 char *err, size_t err_cap) {
  int64_t keepdims = 1, noop = 0;
  onyx_status st = onyx__cuda_attr_int(node, "keepdims", 1, &keepdims, err, err_cap);
  if (st == ONYX_STATUS_OK && node->opset >= 13)
    st = onyx__cuda_attr_int(node, "noop_with_empty_axes", 0, &noop, err, err_cap);
  if (st != ONYX_STATUS_OK) return st;
  reduce_state *s = onyx__cuda_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  s->keepdims = keepdims != 0;
  s->noop_with_empty_axes = noop != 0;
  if (node->opset < 13) {
    st = onyx__cuda_attr_ints(node, "axes", s->axes, REDUCE_MAX_AXES, &s->axes_count, NULL, err,
                              err_cap);
    if (st != ONYX_STATUS_OK) {
      onyx__cuda_destroy(s);
      return st;
    }
  }
  *out_state = s;
  return ONYX_STATUS_OK;
}

/*
 * The plan for input geometry `x` and axes[0..count). Pure: used by infer and compute
 * alike. On a bad axis writes a message into err and returns INVALID_ARGUMENT.
 */
static onyx_status reduce_plan_make(const reduce_state *s, const onyx_tensor *x,
                                    const int64_t *axes, size_t axes_count, const char *axes_what,
                                    reduce_plan *p, char *err, size_t err_cap) {
  memset(p, 0, sizeof *p);
  const uint32_t rank = x->rank;
  if (rank > ONYX_MAX_RANK)
    return onyx__cuda_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "input 0 (data) has rank %u; at most %d is supported", rank,
                           ONYX_MAX_RANK);
  bool reduced[ONYX_MAX_RANK] = {false};
  if (axes_count == 0) {
    p->noop = s->noop_with_empty_axes;
    for (uint32_t d = 0; d < rank; ++d) reduced[d] = !p->noop;
  }
  for (size_t i = 0; i < axes_count; ++i) {
    int64_t a = 0;
    if (!onyx__cuda_normalize_axis(axes[i], rank, &a)) {
      if (rank == 0)
        return onyx__cuda_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                               "axis %lld (value %zu of %s) cannot reduce input 0 (data), a "
                               "scalar: expected no axes",
                               (long long)axes[i], i, axes_what);
      return onyx__cuda_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                             "axis %lld (value %zu of %s) is out of range for input 0 (data) of "
                             "shape %s: expected an axis in %lld..%lld",
                             (long long)axes[i], i, axes_what, onyx__cuda_tensor_shape(x).s,
                             -(long long)rank, (long long)rank - 1);
    }
    reduced[a] = true;
  }
  if (p->noop) {
    p->out_rank = rank;
    memcpy(p->out_dims, x->dims, sizeof(int64_t) * rank);
    return ONYX_STATUS_OK;
  }
  /* Row-major strides of the dense input, then the kept and reduced axes in order:
   * size-1 axes dropped (they move no index), an axis merged into the previous one of
   * its kind when the two are contiguous (the previous stride is this one's extent). */
  int64_t stride[ONYX_MAX_RANK], acc = 1;
  for (uint32_t d = rank; d-- > 0;) {
    stride[d] = acc;
    acc *= x->dims[d];
  }
  onyx__cuda_reduce_args *a = &p->args;
  a->out_numel = 1;
  a->count = 1;
  for (uint32_t d = 0; d < rank; ++d) {
    const int64_t n = x->dims[d];
    if (reduced[d]) {
      a->count *= n;
      if (s->keepdims) p->out_dims[p->out_rank++] = 1;
    } else {
      a->out_numel *= n;
      p->out_dims[p->out_rank++] = n;
    }
    if (n == 1) continue;
    uint32_t *r = reduced[d] ? &a->red_rank : &a->kept_rank;
    int64_t *dims = reduced[d] ? a->red_dims : a->kept_dims;
    int64_t *strides = reduced[d] ? a->red_strides : a->kept_strides;
    if (*r > 0 && strides[*r - 1] == stride[d] * n) {
      dims[*r - 1] *= n;
      strides[*r - 1] = stride[d];
    } else {
      dims[*r] = n;
      strides[*r] = stride[d];
      ++*r;
    }
  }
  return ONYX_STATUS_OK;
}

static onyx_status reduce_compute(void *state, onyx_compute_ctx *ctx,
                                  const onyx_tensor *const *inputs, size_t input_count) {
  const reduce_state *s = state;
  const bool axes_input = s->head.opset >= 13;
  onyx_status st = onyx__cuda_check_inputs_host(ctx, inputs, input_count, 1,
                                                axes_input ? REDUCE13_HOST_INPUTS : 0);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *x = inputs[0];
  if (!onyx__cuda_dtype_in(x->dtype, REDUCE_TYPES))
    return onyx__cuda_error(ctx, ONYX_STATUS_UNSUPPORTED,
                            "input 0 (data) has type %s; float32, float16, bfloat16, int32 or "
                            "int64 expected",
                            onyx__cuda_dtype_name(x->dtype));
  int64_t axes[REDUCE_MAX_AXES];
  size_t axes_count = 0;
  const char *axes_what = "attribute axes";
  if (!axes_input) {
    axes_count = s->axes_count;
    memcpy(axes, s->axes, sizeof(int64_t) * axes_count);
  } else if (onyx__cuda_input(inputs, input_count, 1) != NULL) {
    axes_what = "input 1 (axes)";
    st = onyx__cuda_read_ints(ctx, inputs[1], 1, "axes", axes, REDUCE_MAX_AXES, &axes_count);
    if (st != ONYX_STATUS_OK) return st;
  }
  reduce_plan p;
  char err[320];
  st = reduce_plan_make(s, x, axes, axes_count, axes_what, &p, err, sizeof err);
  if (st != ONYX_STATUS_OK) return onyx__cuda_error(ctx, st, "%s", err);
  onyx_tensor *y = NULL;
  st = onyx__cuda_alloc_output(&s->head, ctx, 0, x->dtype, p.out_rank, p.out_dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  cudaStream_t stream = (cudaStream_t)ctx->stream;
  if (p.noop) {
    size_t bytes = (size_t)onyx_tensor_numel(x) * onyx_dtype_size(x->dtype);
    if (bytes == 0) return ONYX_STATUS_OK;
    return onyx__cuda_check(
        ctx, cudaMemcpyAsync(y->data, x->data, bytes, cudaMemcpyDeviceToDevice, stream),
        "cudaMemcpyAsync");
  }
  p.args.dtype = x->dtype;
  p.args.x = x->data;
  p.args.y = y->data;
  return onyx__cuda_check(ctx, onyx__cuda_launch_reduce_sum(&p.args, stream), "ReduceSum");
}

static onyx_status reduce_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                onyx_tensor *outputs, size_t output_count) {
  onyx__cuda_infer_begin(outputs, output_count);
  const reduce_state *s = state;
  if (input_count < 1 || output_count < 1) return ONYX_STATUS_INVALID_ARGUMENT;
  const onyx_tensor *x = &inputs[0];
  int64_t axes[REDUCE_MAX_AXES];
  size_t axes_count = 0;
  if (s->head.opset < 13) {
    axes_count = s->axes_count;
    memcpy(axes, s->axes, sizeof(int64_t) * axes_count);
  } else if (input_count > 1 && inputs[1].dtype != ONYX_DTYPE_UNDEFINED &&
             onyx_tensor_numel(&inputs[1]) != 0) {
    /* An empty axes list needs no values; any other needs the planner's. */
    onyx_status st = onyx__cuda_known_ints(&inputs[1], axes, REDUCE_MAX_AXES, &axes_count);
    if (st != ONYX_STATUS_OK) return st;
  }
  reduce_plan p;
  char why[ONYX__CUDA_REASON_CAP] = "";
  onyx_status st = reduce_plan_make(s, x, axes, axes_count, "axes", &p, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cuda_reason(state, st, why);
  outputs[0].dtype = x->dtype;
  outputs[0].rank = p.out_rank;
  memcpy(outputs[0].dims, p.out_dims, sizeof(int64_t) * p.out_rank);
  return ONYX_STATUS_OK;
}

#define CUDA_REDUCE_KERNEL(sym, SINCE, UNTIL, HOST)                                                \
  const onyx_kernel_table sym = {                                                                  \
      .struct_size = sizeof(onyx_kernel_table),                                                    \
      .version = ONYX_ABI_VERSION,                                                                 \
      .domain = "",                                                                                \
      .op_type = "ReduceSum",                                                                      \
      .since_opset = SINCE,                                                                        \
      .until_opset = UNTIL,                                                                        \
      .type_input = 0,                                                                             \
      .type_mask = REDUCE_TYPES,                                                                   \
      .supports = NULL,                                                                            \
      .create = reduce_create,                                                                     \
      .destroy = onyx__cuda_destroy,                                                               \
      .workspace = NULL,                                                                           \
      .compute = reduce_compute,                                                                   \
      .infer = reduce_infer,                                                                       \
      .host_inputs = HOST,                                                                         \
  };

CUDA_REDUCE_KERNEL(onyx__cuda_k_reduce_sum_1, 1, 12, 0)
CUDA_REDUCE_KERNEL(onyx__cuda_k_reduce_sum_13, 13, 0, REDUCE13_HOST_INPUTS)
