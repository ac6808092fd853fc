/*
 * Layout ops on the device: Reshape Squeeze Unsqueeze Identity (a device-to-device
 * copy under a new shape), Transpose Slice Expand (a strided copy), Concat (one 2-D
 * copy per input), Gather, Cast and CastLike.
 *
 * Output shapes that depend on values (Reshape's shape, Slice's starts/ends/axes/
 * steps, Expand's shape, axes inputs of opset 13) come from inputs the tables list in
 * host_inputs: the core hands them over in host memory, so compute reads them in place
 * (no copy back, no stream sync); infer() answers from the planner's known host
 * values, or UNSUPPORTED without them. Every shape rule is one function used by both.
 */
#include <string.h>

#include "cuda_impl.h"

/* Most values an int-list input (shape, axes, starts...) may carry. */
#define SHAPE_MAX_VALUES ONYX_MAX_RANK

typedef struct shape_state {
  onyx__cuda_node head;
  int64_t axis;                /* Concat, Gather */
  bool allowzero;              /* Reshape 14 */
  int64_t ints[ONYX_MAX_RANK]; /* perm (Transpose), axes (Squeeze/Unsqueeze 1) */
  size_t int_count;
  bool has_ints;
  /* Slice 1: starts, ends, axes as attributes */
  int64_t starts[ONYX_MAX_RANK], ends[ONYX_MAX_RANK], axes[ONYX_MAX_RANK];
  size_t starts_count, ends_count, axes_count;
  bool has_axes;
  uint32_t to; /* Cast */
} shape_state;

/* Inputs read on the host (the tables' host_inputs). */
#define RESHAPE_HOST_INPUTS (UINT64_C(1) << 1)   /* shape */
#define AXES13_HOST_INPUTS (UINT64_C(1) << 1)    /* axes of Squeeze/Unsqueeze 13 */
#define SLICE10_HOST_INPUTS (UINT64_C(0xF) << 1) /* starts, ends, axes, steps */
#define EXPAND_HOST_INPUTS (UINT64_C(1) << 1)    /* shape */

/* Where int-list values come from: compute reads its host inputs, infer reads the
 * planner's known host values. */
typedef struct int_source {
  onyx_compute_ctx *ctx; /* NULL in infer */
} int_source;

static onyx_status source_ints(const int_source *src, const onyx_tensor *t, size_t index,
                               const char *what, int64_t *out, size_t *count) {
  if (src->ctx != NULL)
    return onyx__cuda_read_ints(src->ctx, t, index, what, out, SHAPE_MAX_VALUES, count);
  return onyx__cuda_known_ints(t, out, SHAPE_MAX_VALUES, count);
}

/* Reports a shape-rule failure: through ctx in compute, silently in infer. */
static onyx_status shape_fail(const int_source *src, onyx_status st, const char *msg) {
  if (src->ctx != NULL) return onyx__cuda_error(src->ctx, st, "%s", msg);
  return st;
}

static onyx_status copy_compute(onyx_compute_ctx *ctx, const onyx__cuda_node *node,
                                const onyx_tensor *x, uint32_t rank, const int64_t *dims) {
  onyx_tensor *y = NULL;
  onyx_status st = onyx__cuda_alloc_output(node, ctx, 0, x->dtype, rank, dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  size_t bytes = (size_t)onyx_tensor_numel(x) * onyx_dtype_size(x->dtype);
  if (bytes == 0) return ONYX_STATUS_OK;
  return onyx__cuda_check(
      ctx,
      cudaMemcpyAsync(y->data, x->data, bytes, cudaMemcpyDeviceToDevice, (cudaStream_t)ctx->stream),
      "cudaMemcpyAsync");
}

/* Geometry of an infer output. */
static void set_output(onyx_tensor *out, uint32_t dtype, uint32_t rank, const int64_t *dims) {
  out->dtype = dtype;
  out->rank = rank;
  memcpy(out->dims, dims, sizeof(int64_t) * rank);
}

/* ------------------------------------------------------------------ Reshape */

static onyx_status reshape_create(void *provider_state, const onyx_node_info *node,
                                  void **out_state, char *err, size_t err_cap) {
  int64_t allowzero = 0;
  onyx_status st = onyx__cuda_attr_int(node, "allowzero", 0, &allowzero, err, err_cap);
  if (st != ONYX_STATUS_OK) return st;
  shape_state *s = onyx__cuda_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  s->allowzero = allowzero != 0;
  *out_state = s;
  return ONYX_STATUS_OK;
}

static onyx_status reshape_dims(const shape_state *s, const int_source *src, const onyx_tensor *x,
                                const onyx_tensor *shape, uint32_t *rank, int64_t *dims) {
  int64_t v[SHAPE_MAX_VALUES];
  size_t n = 0;
  onyx_status st = source_ints(src, shape, 1, "shape", v, &n);
  if (st != ONYX_STATUS_OK) return st;
  char msg[256];
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < n; ++i) {
    int64_t d = v[i];
    if (d == 0 && !s->allowzero) {
      if (i >= x->rank) {
        snprintf(msg, sizeof msg, "shape[%zu] = 0 copies a dim the input %s lacks", i,
                 onyx__cuda_tensor_shape(x).s);
        return shape_fail(src, ONYX_STATUS_INVALID_ARGUMENT, msg);
      }
      d = x->dims[i];
    } else if (d == -1) {
      if (infer_at >= 0)
        return shape_fail(src, ONYX_STATUS_INVALID_ARGUMENT, "shape has more than one -1");
      infer_at = (int64_t)i;
      d = 1;
    } else if (d < -1) {
      snprintf(msg, sizeof msg, "shape[%zu] = %lld is invalid", i, (long long)d);
      return shape_fail(src, ONYX_STATUS_INVALID_ARGUMENT, msg);
    }
    dims[i] = d;
    known *= d;
  }
  int64_t numel = onyx_tensor_numel(x);
  if (infer_at >= 0) {
    if (known == 0 || numel % known != 0) {
      snprintf(msg, sizeof msg, "cannot reshape %s: %lld elements do not fill the -1 dim",
               onyx__cuda_tensor_shape(x).s, (long long)numel);
      return shape_fail(src, ONYX_STATUS_INVALID_ARGUMENT, msg);
    }
    dims[infer_at] = numel / known;
    known = numel;
  }
  if (known != numel) {
    snprintf(msg, sizeof msg, "cannot reshape %s (%lld elements) to %s",
             onyx__cuda_tensor_shape(x).s, (long long)numel,
             onyx__cuda_shape_str((uint32_t)n, dims).s);
    return shape_fail(src, ONYX_STATUS_INVALID_ARGUMENT, msg);
  }
  *rank = (uint32_t)n;
  return ONYX_STATUS_OK;
}

static onyx_status reshape_compute(void *state, onyx_compute_ctx *ctx,
                                   const onyx_tensor *const *inputs, size_t input_count) {
  const shape_state *s = state;
  onyx_status st = onyx__cuda_check_inputs_host(ctx, inputs, input_count, 2, RESHAPE_HOST_INPUTS);
  if (st != ONYX_STATUS_OK) return st;
  int_source src = {ctx};
  uint32_t rank = 0;
  int64_t dims[ONYX_MAX_RANK];
  if ((st = reshape_dims(s, &src, inputs[0], inputs[1], &rank, dims)) != ONYX_STATUS_OK) return st;
  return copy_compute(ctx, &s->head, inputs[0], rank, dims);
}

static onyx_status reshape_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                 onyx_tensor *outputs, size_t output_count) {
  onyx__cuda_infer_begin(outputs, output_count);
  if (input_count < 2 || output_count < 1) return ONYX_STATUS_INVALID_ARGUMENT;
  int_source src = {NULL};
  uint32_t rank = 0;
  int64_t dims[ONYX_MAX_RANK];
  onyx_status st = reshape_dims(state, &src, &inputs[0], &inputs[1], &rank, dims);
  if (st == ONYX_STATUS_OK) set_output(&outputs[0], inputs[0].dtype, rank, dims);
  return st;
}

/* ------------------------------------------------------------------ Squeeze / Unsqueeze */

static onyx_status axes_create(void *provider_state, const onyx_node_info *node, void **out_state,
                               char *err, size_t err_cap) {
  shape_state *s = onyx__cuda_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  onyx_status st = onyx__cuda_attr_ints(node, "axes", s->ints, ONYX_MAX_RANK, &s->int_count,
                                        &s->has_ints, err, err_cap);
  if (st != ONYX_STATUS_OK) {
    onyx__cuda_destroy(s);
    return st;
  }
  *out_state = s;
  return ONYX_STATUS_OK;
}

/* The axes: the attribute (opset < 13) or input 1 (13+, optional for Squeeze). */
static onyx_status axes_values(const shape_state *s, const int_source *src,
                               const onyx_tensor *axes_input, int64_t *axes, size_t *count,
                               bool *present) {
  if (s->head.opset < 13) {
    memcpy(axes, s->ints, sizeof(int64_t) * s->int_count);
    *count = s->int_count;
    *present = s->has_ints;
    return ONYX_STATUS_OK;
  }
  *present = axes_input != NULL;
  *count = 0;
  if (axes_input == NULL) return ONYX_STATUS_OK;
  return source_ints(src, axes_input, 1, "axes", axes, count);
}

static onyx_status squeeze_dims(const shape_state *s, const int_source *src, const onyx_tensor *x,
                                const onyx_tensor *axes_input, uint32_t *rank, int64_t *dims) {
  int64_t axes[SHAPE_MAX_VALUES];
  size_t n = 0;
  bool present = false;
  onyx_status st = axes_values(s, src, axes_input, axes, &n, &present);
  if (st != ONYX_STATUS_OK) return st;
  bool drop[ONYX_MAX_RANK] = {false};
  char msg[256];
  if (!present) {
    for (uint32_t d = 0; d < x->rank; ++d) drop[d] = x->dims[d] == 1;
  } else {
    for (size_t i = 0; i < n; ++i) {
      int64_t a = 0;
      if (!onyx__cuda_normalize_axis(axes[i], x->rank, &a) || x->dims[a] != 1) {
        snprintf(msg, sizeof msg, "cannot squeeze axis %lld of %s", (long long)axes[i],
                 onyx__cuda_tensor_shape(x).s);
        return shape_fail(src, ONYX_STATUS_INVALID_ARGUMENT, msg);
      }
      drop[a] = true;
    }
  }
  uint32_t r = 0;
  for (uint32_t d = 0; d < x->rank; ++d)
    if (!drop[d]) dims[r++] = x->dims[d];
  *rank = r;
  return ONYX_STATUS_OK;
}

static onyx_status unsqueeze_dims(const shape_state *s, const int_source *src, const onyx_tensor *x,
                                  const onyx_tensor *axes_input, uint32_t *rank, int64_t *dims) {
  int64_t axes[SHAPE_MAX_VALUES];
  size_t n = 0;
  bool present = false;
  onyx_status st = axes_values(s, src, axes_input, axes, &n, &present);
  if (st != ONYX_STATUS_OK) return st;
  uint32_t out_rank = x->rank + (uint32_t)n;
  char msg[256];
  if (!present || out_rank > ONYX_MAX_RANK) {
    snprintf(msg, sizeof msg, "Unsqueeze of %s needs axes giving a rank of at most %d",
             onyx__cuda_tensor_shape(x).s, ONYX_MAX_RANK);
    return shape_fail(src, ONYX_STATUS_INVALID_ARGUMENT, msg);
  }
  bool inserted[ONYX_MAX_RANK] = {false};
  for (size_t i = 0; i < n; ++i) {
    int64_t a = 0;
    if (!onyx__cuda_normalize_axis(axes[i], out_rank, &a) || inserted[a]) {
      snprintf(msg, sizeof msg, "axis %lld is out of range or repeated for output rank %u",
               (long long)axes[i], out_rank);
      return shape_fail(src, ONYX_STATUS_INVALID_ARGUMENT, msg);
    }
    inserted[a] = true;
  }
  uint32_t next = 0;
  for (uint32_t d = 0; d < out_rank; ++d) dims[d] = inserted[d] ? 1 : x->dims[next++];
  *rank = out_rank;
  return ONYX_STATUS_OK;
}

typedef onyx_status (*axes_rule)(const shape_state *, const int_source *, const onyx_tensor *,
                                 const onyx_tensor *, uint32_t *, int64_t *);

static onyx_status axes_compute(void *state, onyx_compute_ctx *ctx,
                                const onyx_tensor *const *inputs, size_t input_count,
                                axes_rule rule) {
  const shape_state *s = state;
  onyx_status st = onyx__cuda_check_inputs_host(ctx, inputs, input_count, 1,
                                                s->head.opset >= 13 ? AXES13_HOST_INPUTS : 0);
  if (st != ONYX_STATUS_OK) return st;
  int_source src = {ctx};
  uint32_t rank = 0;
  int64_t dims[ONYX_MAX_RANK];
  st = rule(s, &src, inputs[0], onyx__cuda_input(inputs, input_count, 1), &rank, dims);
  if (st != ONYX_STATUS_OK) return st;
  return copy_compute(ctx, &s->head, inputs[0], rank, dims);
}

static onyx_status axes_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                              onyx_tensor *outputs, size_t output_count, axes_rule rule) {
  if (input_count < 1 || output_count < 1) return ONYX_STATUS_INVALID_ARGUMENT;
  int_source src = {NULL};
  const onyx_tensor *axes =
      input_count > 1 && inputs[1].dtype != ONYX_DTYPE_UNDEFINED ? &inputs[1] : NULL;
  uint32_t rank = 0;
  int64_t dims[ONYX_MAX_RANK];
  onyx_status st = rule(state, &src, &inputs[0], axes, &rank, dims);
  if (st == ONYX_STATUS_OK) set_output(&outputs[0], inputs[0].dtype, rank, dims);
  return st;
}

static onyx_status squeeze_compute(void *state, onyx_compute_ctx *ctx,
                                   const onyx_tensor *const *inputs, size_t input_count) {
  return axes_compute(state, ctx, inputs, input_count, squeeze_dims);
}
static onyx_status squeeze_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                 onyx_tensor *outputs, size_t output_count) {
  onyx__cuda_infer_begin(outputs, output_count);
  return axes_infer(state, inputs, input_count, outputs, output_count, squeeze_dims);
}
static onyx_status unsqueeze_compute(void *state, onyx_compute_ctx *ctx,
                                     const onyx_tensor *const *inputs, size_t input_count) {
  return axes_compute(state, ctx, inputs, input_count, unsqueeze_dims);
}
static onyx_status unsqueeze_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                   onyx_tensor *outputs, size_t output_count) {
  onyx__cuda_infer_begin(outputs, output_count);
  return axes_infer(state, inputs, input_count, outputs, output_count, unsqueeze_dims);
}

/* ------------------------------------------------------------------ Identity */

static onyx_status identity_compute(void *state, onyx_compute_ctx *ctx,
                                    const onyx_tensor *const *inputs, size_t input_count) {
  const onyx__cuda_node *s = state;
  onyx_status st = onyx__cuda_check_inputs(ctx, inputs, input_count, 1);
  if (st != ONYX_STATUS_OK) return st;
  return copy_compute(ctx, s, inputs[0], inputs[0]->rank, inputs[0]->dims);
}

static onyx_status same_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                              onyx_tensor *outputs, size_t output_count) {
  onyx__cuda_infer_begin(outputs, output_count);
  (void)state;
  if (input_count < 1 || output_count < 1) return ONYX_STATUS_INVALID_ARGUMENT;
  set_output(&outputs[0], inputs[0].dtype, inputs[0].rank, inputs[0].dims);
  return ONYX_STATUS_OK;
}

/* ------------------------------------------------------------------ Transpose */

/* The permutation (default: reversed axes), checked. */
static onyx_status transpose_perm(const shape_state *s, const onyx_tensor *x, int64_t *perm,
                                  char *err, size_t cap) {
  size_t n = s->int_count;
  if (!s->has_ints) {
    for (uint32_t d = 0; d < x->rank; ++d) perm[d] = (int64_t)x->rank - 1 - d;
    return ONYX_STATUS_OK;
  }
  bool seen[ONYX_MAX_RANK] = {false};
  if (n != x->rank)
    return onyx__cuda_fail(err, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "perm has %zu axes, input %s has rank %u", n,
                           onyx__cuda_tensor_shape(x).s, x->rank);
  for (size_t i = 0; i < n; ++i) {
    int64_t a = 0;
    if (!onyx__cuda_normalize_axis(s->ints[i], x->rank, &a) || seen[a])
      return onyx__cuda_fail(err, cap, ONYX_STATUS_INVALID_ARGUMENT,
                             "perm is not a permutation of the %u axes", x->rank);
    seen[a] = true;
    perm[i] = a;
  }
  return ONYX_STATUS_OK;
}

static onyx_status transpose_create_perm(void *provider_state, const onyx_node_info *node,
                                         void **out_state, char *err, size_t err_cap) {
  shape_state *s = onyx__cuda_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  onyx_status st = onyx__cuda_attr_ints(node, "perm", s->ints, ONYX_MAX_RANK, &s->int_count,
                                        &s->has_ints, err, err_cap);
  if (st != ONYX_STATUS_OK) {
    onyx__cuda_destroy(s);
    return st;
  }
  *out_state = s;
  return ONYX_STATUS_OK;
}

static onyx_status transpose_compute(void *state, onyx_compute_ctx *ctx,
                                     const onyx_tensor *const *inputs, size_t input_count) {
  const shape_state *s = state;
  onyx_status st = onyx__cuda_check_inputs(ctx, inputs, input_count, 1);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *x = inputs[0];
  int64_t perm[ONYX_MAX_RANK];
  char err[256];
  if ((st = transpose_perm(s, x, perm, err, sizeof err)) != ONYX_STATUS_OK)
    return onyx__cuda_error(ctx, st, "%s", err);
  int64_t in_stride[ONYX_MAX_RANK], dims[ONYX_MAX_RANK];
  int64_t stride = 1;
  for (uint32_t d = x->rank; d-- > 0;) {
    in_stride[d] = stride;
    stride *= x->dims[d];
  }
  onyx__cuda_walk w;
  memset(&w, 0, sizeof w);
  w.count = 1;
  w.rank = x->rank ? x->rank : 1;
  w.dims[0] = 1;
  for (uint32_t d = 0; d < x->rank; ++d) {
    dims[d] = x->dims[perm[d]];
    w.dims[d] = dims[d];
    w.strides[0][d] = in_stride[perm[d]];
  }
  w.numel = onyx_tensor_numel(x);
  onyx_tensor *y = NULL;
  st = onyx__cuda_alloc_output(&s->head, ctx, 0, x->dtype, x->rank, dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  onyx__cuda_walk_collapse(&w);
  cudaError_t e = onyx__cuda_launch_strided_copy(onyx_dtype_size(x->dtype), x->data, y->data, &w,
                                                 (cudaStream_t)ctx->stream);
  return onyx__cuda_check(ctx, e, "Transpose");
}

static onyx_status transpose_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                   onyx_tensor *outputs, size_t output_count) {
  onyx__cuda_infer_begin(outputs, output_count);
  if (input_count < 1 || output_count < 1) return ONYX_STATUS_INVALID_ARGUMENT;
  int64_t perm[ONYX_MAX_RANK], dims[ONYX_MAX_RANK];
  char why[ONYX__CUDA_REASON_CAP] = "";
  onyx_status st = transpose_perm(state, &inputs[0], perm, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cuda_reason(state, st, why);
  for (uint32_t d = 0; d < inputs[0].rank; ++d) dims[d] = inputs[0].dims[perm[d]];
  set_output(&outputs[0], inputs[0].dtype, inputs[0].rank, dims);
  return ONYX_STATUS_OK;
}

/* ------------------------------------------------------------------ Concat */

static onyx_status axis_create(void *provider_state, const onyx_node_info *node, int64_t dflt,
                               bool required, void **out_state, char *err, size_t err_cap) {
  if (required && onyx__cuda_attr_find(node, "axis") == NULL)
    return onyx__cuda_fail(err, err_cap, ONYX_STATUS_INVALID_MODEL,
                           "%s: attribute 'axis' is required", node->op_type);
  int64_t axis = dflt;
  onyx_status st = onyx__cuda_attr_int(node, "axis", dflt, &axis, err, err_cap);
  if (st != ONYX_STATUS_OK) return st;
  shape_state *s = onyx__cuda_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  s->axis = axis;
  *out_state = s;
  return ONYX_STATUS_OK;
}

static onyx_status concat_create(void *provider_state, const onyx_node_info *node, void **out_state,
                                 char *err, size_t err_cap) {
  return axis_create(provider_state, node, 0, true, out_state, err, err_cap);
}

static onyx_status concat_dims(const shape_state *s, const onyx_tensor *const *in, size_t n,
                               int64_t *axis_out, int64_t *dims, char *err, size_t cap) {
  if (n == 0 || in[0] == NULL)
    return onyx__cuda_fail(err, cap, ONYX_STATUS_INVALID_ARGUMENT, "Concat needs inputs");
  const onyx_tensor *first = in[0];
  int64_t axis = 0;
  if (!onyx__cuda_normalize_axis(s->axis, first->rank, &axis))
    return onyx__cuda_fail(err, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "axis %lld is out of range for %s", (long long)s->axis,
                           onyx__cuda_tensor_shape(first).s);
  memcpy(dims, first->dims, sizeof(int64_t) * first->rank);
  dims[axis] = 0;
  for (size_t k = 0; k < n; ++k) {
    const onyx_tensor *t = in[k];
    bool ok = t != NULL && t->rank == first->rank && t->dtype == first->dtype;
    for (uint32_t d = 0; ok && d < t->rank; ++d)
      ok = (int64_t)d == axis || t->dims[d] == first->dims[d];
    if (!ok)
      return onyx__cuda_fail(err, cap, ONYX_STATUS_INVALID_ARGUMENT,
                             "input %zu %s does not match input 0 %s %s outside axis %lld", k,
                             t ? onyx__cuda_tensor_shape(t).s : "(absent)",
                             onyx__cuda_tensor_shape(first).s, onyx__cuda_dtype_name(first->dtype),
                             (long long)axis);
    dims[axis] += t->dims[axis];
  }
  *axis_out = axis;
  return ONYX_STATUS_OK;
}

static onyx_status concat_compute(void *state, onyx_compute_ctx *ctx,
                                  const onyx_tensor *const *inputs, size_t input_count) {
  const shape_state *s = state;
  onyx_status st = onyx__cuda_check_inputs(ctx, inputs, input_count, input_count);
  if (st != ONYX_STATUS_OK) return st;
  char err[384];
  int64_t axis = 0, dims[ONYX_MAX_RANK];
  if ((st = concat_dims(s, inputs, input_count, &axis, dims, err, sizeof err)) != ONYX_STATUS_OK)
    return onyx__cuda_error(ctx, st, "%s", err);
  const onyx_tensor *first = inputs[0];
  onyx_tensor *y = NULL;
  st = onyx__cuda_alloc_output(&s->head, ctx, 0, first->dtype, first->rank, dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  size_t es = onyx_dtype_size(first->dtype);
  int64_t outer = onyx__cuda_dims_product(dims, 0, (uint32_t)axis);
  int64_t inner = onyx__cuda_dims_product(dims, (uint32_t)axis + 1, first->rank);
  int64_t out_pitch = dims[axis] * inner, at = 0;
  for (size_t k = 0; k < input_count; ++k) {
    int64_t cols = inputs[k]->dims[axis] * inner;
    cudaError_t e =
        onyx__cuda_launch_copy2d(es, inputs[k]->data, (char *)y->data + at * (int64_t)es, outer,
                                 cols, cols, out_pitch, (cudaStream_t)ctx->stream);
    if ((st = onyx__cuda_check(ctx, e, "Concat")) != ONYX_STATUS_OK) return st;
    at += cols;
  }
  return ONYX_STATUS_OK;
}

static onyx_status concat_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                onyx_tensor *outputs, size_t output_count) {
  onyx__cuda_infer_begin(outputs, output_count);
  if (input_count < 1 || output_count < 1 || input_count > 64) return ONYX_STATUS_INVALID_ARGUMENT;
  const onyx_tensor *in[64];
  for (size_t k = 0; k < input_count; ++k) in[k] = &inputs[k];
  int64_t axis = 0, dims[ONYX_MAX_RANK];
  char why[ONYX__CUDA_REASON_CAP] = "";
  onyx_status st = concat_dims(state, in, input_count, &axis, dims, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cuda_reason(state, st, why);
  set_output(&outputs[0], inputs[0].dtype, inputs[0].rank, dims);
  return st;
}

/* ------------------------------------------------------------------ Slice */

static onyx_status slice_create(void *provider_state, const onyx_node_info *node, void **out_state,
                                char *err, size_t err_cap) {
  shape_state *s = onyx__cuda_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  onyx_status st = ONYX_STATUS_OK;
  if (node->opset < 10) {
    bool has_starts = false, has_ends = false;
    if ((st = onyx__cuda_attr_ints(node, "starts", s->starts, ONYX_MAX_RANK, &s->starts_count,
                                   &has_starts, err, err_cap)) == ONYX_STATUS_OK &&
        (st = onyx__cuda_attr_ints(node, "ends", s->ends, ONYX_MAX_RANK, &s->ends_count, &has_ends,
                                   err, err_cap)) == ONYX_STATUS_OK)
      st = onyx__cuda_attr_ints(node, "axes", s->axes, ONYX_MAX_RANK, &s->axes_count, &s->has_axes,
                                err, err_cap);
    if (st == ONYX_STATUS_OK && (!has_starts || !has_ends))
      st = onyx__cuda_fail(err, err_cap, ONYX_STATUS_INVALID_MODEL,
                           "Slice: attributes 'starts' and 'ends' are required");
  }
  if (st != ONYX_STATUS_OK) {
    onyx__cuda_destroy(s);
    return st;
  }
  *out_state = s;
  return ONYX_STATUS_OK;
}

/* Output dims plus the input walk (offset and per-axis strides) of a Slice. */
static onyx_status slice_plan(const shape_state *s, const int_source *src,
                              const onyx_tensor *const *in, size_t n, int64_t *dims,
                              onyx__cuda_walk *w) {
  const onyx_tensor *x = in[0];
  int64_t starts[SHAPE_MAX_VALUES], ends[SHAPE_MAX_VALUES], axes[SHAPE_MAX_VALUES],
      steps[SHAPE_MAX_VALUES];
  size_t ns = 0, ne = 0, na = 0, nst = 0;
  bool has_axes = false, has_steps = false;
  onyx_status st = ONYX_STATUS_OK;
  if (s->head.opset < 10) {
    memcpy(starts, s->starts, sizeof starts);
    memcpy(ends, s->ends, sizeof ends);
    memcpy(axes, s->axes, sizeof axes);
    ns = s->starts_count;
    ne = s->ends_count;
    na = s->axes_count;
    has_axes = s->has_axes;
  } else {
    if (n < 3 || in[1] == NULL || in[2] == NULL)
      return shape_fail(src, ONYX_STATUS_INVALID_ARGUMENT, "starts and ends are required");
    if ((st = source_ints(src, in[1], 1, "starts", starts, &ns)) != ONYX_STATUS_OK ||
        (st = source_ints(src, in[2], 2, "ends", ends, &ne)) != ONYX_STATUS_OK)
      return st;
    if (n > 3 && in[3] != NULL) {
      has_axes = true;
      if ((st = source_ints(src, in[3], 3, "axes", axes, &na)) != ONYX_STATUS_OK) return st;
    }
    if (n > 4 && in[4] != NULL) {
      has_steps = true;
      if ((st = source_ints(src, in[4], 4, "steps", steps, &nst)) != ONYX_STATUS_OK) return st;
    }
  }
  char msg[256];
  if (ns != ne || (has_axes && na != ns) || (has_steps && nst != ns) || ns > x->rank) {
    snprintf(msg, sizeof msg,
             "starts (%zu), ends (%zu), axes and steps must have one value "
             "per sliced axis of %s",
             ns, ne, onyx__cuda_tensor_shape(x).s);
    return shape_fail(src, ONYX_STATUS_INVALID_ARGUMENT, msg);
  }
  int64_t begin[ONYX_MAX_RANK], step[ONYX_MAX_RANK];
  bool seen[ONYX_MAX_RANK] = {false};
  for (uint32_t d = 0; d < x->rank; ++d) {
    begin[d] = 0;
    step[d] = 1;
    dims[d] = x->dims[d];
  }
  for (size_t i = 0; i < ns; ++i) {
    int64_t a = has_axes ? axes[i] : (int64_t)i;
    if (!onyx__cuda_normalize_axis(a, x->rank, &a) || seen[a]) {
      snprintf(msg, sizeof msg, "axis %lld is out of range or repeated for %s",
               (long long)(has_axes ? axes[i] : (int64_t)i), onyx__cuda_tensor_shape(x).s);
      return shape_fail(src, ONYX_STATUS_INVALID_ARGUMENT, msg);
    }
    seen[a] = true;
    int64_t d = x->dims[a], k = has_steps ? steps[i] : 1;
    if (k == 0) return shape_fail(src, ONYX_STATUS_INVALID_ARGUMENT, "a step of 0");
    int64_t b = starts[i], e = ends[i];
    if (b < 0) b += d;
    if (e < 0) e += d;
    if (k > 0) {
      b = b < 0 ? 0 : (b > d ? d : b);
      e = e < 0 ? 0 : (e > d ? d : e);
      dims[a] = e > b ? (e - b + k - 1) / k : 0;
    } else {
      /* As numpy (and ONNX Runtime) do: a start before the axis selects nothing. */
      b = b < 0 ? -1 : (b > d - 1 ? d - 1 : b);
      e = e < -1 ? -1 : (e > d - 1 ? d - 1 : e);
      dims[a] = b > e ? (b - e + (-k) - 1) / (-k) : 0;
    }
    begin[a] = b;
    step[a] = k;
  }
  if (w != NULL) {
    memset(w, 0, sizeof *w);
    w->count = 1;
    w->rank = x->rank ? x->rank : 1;
    w->dims[0] = 1;
    int64_t stride = 1;
    for (uint32_t d = x->rank; d-- > 0;) {
      w->dims[d] = dims[d];
      w->strides[0][d] = stride * step[d];
      if (dims[d] > 0) w->offset[0] += begin[d] * stride;
      stride *= x->dims[d];
    }
    w->numel = onyx__cuda_dims_product(dims, 0, x->rank);
  }
  return ONYX_STATUS_OK;
}

static onyx_status slice_compute(void *state, onyx_compute_ctx *ctx,
                                 const onyx_tensor *const *inputs, size_t input_count) {
  const shape_state *s = state;
  onyx_status st =
      onyx__cuda_check_inputs_host(ctx, inputs, input_count, s->head.opset < 10 ? 1 : 3,
                                   s->head.opset < 10 ? 0 : SLICE10_HOST_INPUTS);
  if (st != ONYX_STATUS_OK) return st;
  int_source src = {ctx};
  int64_t dims[ONYX_MAX_RANK];
  onyx__cuda_walk w;
  if ((st = slice_plan(s, &src, inputs, input_count, dims, &w)) != ONYX_STATUS_OK) return st;
  const onyx_tensor *x = inputs[0];
  onyx_tensor *y = NULL;
  st = onyx__cuda_alloc_output(&s->head, ctx, 0, x->dtype, x->rank, dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  onyx__cuda_walk_collapse(&w);
  cudaError_t e = onyx__cuda_launch_strided_copy(onyx_dtype_size(x->dtype), x->data, y->data, &w,
                                                 (cudaStream_t)ctx->stream);
  return onyx__cuda_check(ctx, e, "Slice");
}

static onyx_status slice_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                               onyx_tensor *outputs, size_t output_count) {
  onyx__cuda_infer_begin(outputs, output_count);
  if (input_count < 1 || output_count < 1 || input_count > 5) return ONYX_STATUS_INVALID_ARGUMENT;
  const onyx_tensor *in[5] = {NULL, NULL, NULL, NULL, NULL};
  for (size_t k = 0; k < input_count; ++k)
    in[k] = inputs[k].dtype != ONYX_DTYPE_UNDEFINED ? &inputs[k] : NULL;
  int_source src = {NULL};
  int64_t dims[ONYX_MAX_RANK];
  onyx_status st = slice_plan(state, &src, in, input_count, dims, NULL);
  if (st == ONYX_STATUS_OK) set_output(&outputs[0], inputs[0].dtype, inputs[0].rank, dims);
  return st;
}

/* ------------------------------------------------------------------ Expand */

static onyx_status expand_plan(const int_source *src, const onyx_tensor *x,
                               const onyx_tensor *shape, uint32_t *rank, int64_t *dims,
                               onyx__cuda_walk *w) {
  int64_t v[SHAPE_MAX_VALUES];
  size_t n = 0;
  onyx_status st = source_ints(src, shape, 1, "shape", v, &n);
  if (st != ONYX_STATUS_OK) return st;
  onyx_tensor target;
  memset(&target, 0, sizeof target);
  target.rank = (uint32_t)n;
  memcpy(target.dims, v, sizeof(int64_t) * n);
  const onyx_tensor *shapes[2] = {x, &target};
  char msg[384];
  onyx__cuda_walk tmp;
  st = onyx__cuda_broadcast(w ? w : &tmp, rank, dims, 2, shapes, msg, sizeof msg);
  if (st != ONYX_STATUS_OK) return shape_fail(src, st, msg);
  if (w != NULL) {
    w->count = 1; /* keep the input's strides only */
    onyx__cuda_walk_collapse(w);
  }
  return ONYX_STATUS_OK;
}

static onyx_status expand_compute(void *state, onyx_compute_ctx *ctx,
                                  const onyx_tensor *const *inputs, size_t input_count) {
  const onyx__cuda_node *s = state;
  onyx_status st = onyx__cuda_check_inputs_host(ctx, inputs, input_count, 2, EXPAND_HOST_INPUTS);
  if (st != ONYX_STATUS_OK) return st;
  int_source src = {ctx};
  uint32_t rank = 0;
  int64_t dims[ONYX_MAX_RANK];
  onyx__cuda_walk w;
  if ((st = expand_plan(&src, inputs[0], inputs[1], &rank, dims, &w)) != ONYX_STATUS_OK) return st;
  onyx_tensor *y = NULL;
  st = onyx__cuda_alloc_output(s, ctx, 0, inputs[0]->dtype, rank, dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  cudaError_t e = onyx__cuda_launch_strided_copy(onyx_dtype_size(inputs[0]->dtype), inputs[0]->data,
                                                 y->data, &w, (cudaStream_t)ctx->stream);
  return onyx__cuda_check(ctx, e, "Expand");
}

static onyx_status expand_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                onyx_tensor *outputs, size_t output_count) {
  onyx__cuda_infer_begin(outputs, output_count);
  (void)state;
  if (input_count < 2 || output_count < 1) return ONYX_STATUS_INVALID_ARGUMENT;
  int_source src = {NULL};
  uint32_t rank = 0;
  int64_t dims[ONYX_MAX_RANK];
  onyx_status st = expand_plan(&src, &inputs[0], &inputs[1], &rank, dims, NULL);
  if (st == ONYX_STATUS_OK) set_output(&outputs[0], inputs[0].dtype, rank, dims);
  return st;
}

/* ------------------------------------------------------------------ Gather */

static onyx_status gather_create(void *provider_state, const onyx_node_info *node, void **out_state,
                                 char *err, size_t err_cap) {
  return axis_create(provider_state, node, 0, false, out_state, err, err_cap);
}

static bool gather_supports(const onyx_node_info *node, char *reason, size_t cap) {
  if (node->input_count < 2 || node->input_dtypes == NULL) return true;
  uint32_t d = node->input_dtypes[1];
  if (d == ONYX_DTYPE_UNDEFINED || onyx__cuda_dtype_in(d, ONYX__CUDA_INDEX_TYPES)) return true;
  onyx__cuda_fail(reason, cap, ONYX_STATUS_UNSUPPORTED, "indices of type %s",
                  onyx__cuda_dtype_name(d));
  return false;
}

static onyx_status gather_dims(const shape_state *s, const onyx_tensor *x, const onyx_tensor *idx,
                               int64_t *axis_out, uint32_t *rank, int64_t *dims, char *err,
                               size_t cap) {
  int64_t axis = 0;
  if (x->rank == 0 || !onyx__cuda_normalize_axis(s->axis, x->rank, &axis))
    return onyx__cuda_fail(err, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "axis %lld is out of range for data %s", (long long)s->axis,
                           onyx__cuda_tensor_shape(x).s);
  if (!onyx__cuda_dtype_in(idx->dtype, ONYX__CUDA_INDEX_TYPES))
    return onyx__cuda_fail(err, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "indices have type %s; int32 or int64 expected",
                           onyx__cuda_dtype_name(idx->dtype));
  uint32_t r = x->rank - 1 + idx->rank;
  if (r > ONYX_MAX_RANK)
    return onyx__cuda_fail(err, cap, ONYX_STATUS_UNSUPPORTED, "output rank %u exceeds %d", r,
                           ONYX_MAX_RANK);
  uint32_t o = 0;
  for (uint32_t d = 0; d < (uint32_t)axis; ++d) dims[o++] = x->dims[d];
  for (uint32_t d = 0; d < idx->rank; ++d) dims[o++] = idx->dims[d];
  for (uint32_t d = (uint32_t)axis + 1; d < x->rank; ++d) dims[o++] = x->dims[d];
  *rank = r;
  *axis_out = axis;
  return ONYX_STATUS_OK;
}

static onyx_status gather_compute(void *state, onyx_compute_ctx *ctx,
                                  const onyx_tensor *const *inputs, size_t input_count) {
  const shape_state *s = state;
  onyx_status st = onyx__cuda_check_inputs(ctx, inputs, input_count, 2);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *x = inputs[0], *idx = inputs[1];
  char err[256];
  int64_t axis = 0, dims[ONYX_MAX_RANK];
  uint32_t rank = 0;
  if ((st = gather_dims(s, x, idx, &axis, &rank, dims, err, sizeof err)) != ONYX_STATUS_OK)
    return onyx__cuda_error(ctx, st, "%s", err);
  onyx_tensor *y = NULL;
  st = onyx__cuda_alloc_output(&s->head, ctx, 0, x->dtype, rank, dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  int64_t outer = onyx__cuda_dims_product(x->dims, 0, (uint32_t)axis);
  int64_t inner = onyx__cuda_dims_product(x->dims, (uint32_t)axis + 1, x->rank);
  cudaError_t e = onyx__cuda_launch_gather(
      onyx_dtype_size(x->dtype), x->data, idx->data, idx->dtype, y->data, outer, x->dims[axis],
      onyx_tensor_numel(idx), inner, (cudaStream_t)ctx->stream);
  return onyx__cuda_check(ctx, e, "Gather");
}

static onyx_status gather_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                onyx_tensor *outputs, size_t output_count) {
  onyx__cuda_infer_begin(outputs, output_count);
  if (input_count < 2 || output_count < 1) return ONYX_STATUS_INVALID_ARGUMENT;
  int64_t axis = 0, dims[ONYX_MAX_RANK];
  uint32_t rank = 0;
  char why[ONYX__CUDA_REASON_CAP] = "";
  onyx_status st = gather_dims(state, &inputs[0], &inputs[1], &axis, &rank, dims, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cuda_reason(state, st, why);
  set_output(&outputs[0], inputs[0].dtype, rank, dims);
  return st;
}

/* ------------------------------------------------------------------ Cast, CastLike */

#define CAST_TARGETS                                                                               \
  (ONYX__CUDA_FLOAT_TYPES | ONYX__CUDA_INDEX_TYPES | ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT64) |          \
   ONYX_DTYPE_BIT(ONYX_DTYPE_BOOL) | ONYX_DTYPE_BIT(ONYX_DTYPE_INT8) |                             \
   ONYX_DTYPE_BIT(ONYX_DTYPE_UINT8) | ONYX_DTYPE_BIT(ONYX_DTYPE_INT16) |                           \
   ONYX_DTYPE_BIT(ONYX_DTYPE_UINT16) | ONYX_DTYPE_BIT(ONYX_DTYPE_UINT32) |                         \
   ONYX_DTYPE_BIT(ONYX_DTYPE_UINT64))

/* Cast's inputs: the float types, and int32/int64/bool, so that a decoder's
 * attention-mask arithmetic (int64 sums cast to int32 seqlens_k) stays on the device.
 * The kernel converts like a C cast: integers to narrower integers keep the low bits,
 * to bool compare with zero, floats to integers truncate toward zero. */
#define CAST_SOURCES                                                                               \
  (ONYX__CUDA_FLOAT_TYPES | ONYX__CUDA_INDEX_TYPES | ONYX_DTYPE_BIT(ONYX_DTYPE_BOOL))

static bool cast_supports(const onyx_node_info *node, char *reason, size_t cap) {
  const onyx_attr *a = onyx__cuda_attr_find(node, "to");
  if (a == NULL || a->type != ONYX_ATTR_INT || a->i < 0 || a->i > 63 ||
      !onyx__cuda_dtype_in((uint32_t)a->i, CAST_TARGETS)) {
    onyx__cuda_fail(reason, cap, ONYX_STATUS_UNSUPPORTED, "Cast to dtype %lld",
                    a && a->type == ONYX_ATTR_INT ? (long long)a->i : -1LL);
    return false;
  }
  return true;
}

static bool castlike_supports(const onyx_node_info *node, char *reason, size_t cap) {
  if (node->input_count < 2 || node->input_dtypes == NULL) return true;
  uint32_t d = node->input_dtypes[1];
  if (d == ONYX_DTYPE_UNDEFINED || onyx__cuda_dtype_in(d, CAST_TARGETS)) return true;
  onyx__cuda_fail(reason, cap, ONYX_STATUS_UNSUPPORTED, "CastLike to %s", onyx__cuda_dtype_name(d));
  return false;
}

static onyx_status cast_create(void *provider_state, const onyx_node_info *node, void **out_state,
                               char *err, size_t err_cap) {
  int64_t to = -1;
  onyx_status st = onyx__cuda_attr_int(node, "to", -1, &to, err, err_cap);
  if (st != ONYX_STATUS_OK) return st;
  if (to < 0 || to > 63 || !onyx__cuda_dtype_in((uint32_t)to, CAST_TARGETS))
    return onyx__cuda_fail(err, err_cap, ONYX_STATUS_UNSUPPORTED, "Cast: target dtype %lld",
                           (long long)to);
  shape_state *s = onyx__cuda_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  s->to = (uint32_t)to;
  *out_state = s;
  return ONYX_STATUS_OK;
}

static onyx_status castlike_create(void *provider_state, const onyx_node_info *node,
                                   void **out_state, char *err, size_t err_cap) {
  shape_state *s = onyx__cuda_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  *out_state = s;
  return ONYX_STATUS_OK;
}

static onyx_status cast_run(const shape_state *s, onyx_compute_ctx *ctx, const onyx_tensor *x,
                            uint32_t to) {
  if (!onyx__cuda_dtype_in(x->dtype, CAST_SOURCES))
    return onyx__cuda_error(ctx, ONYX_STATUS_UNSUPPORTED,
                            "input 0 has type %s; float32, float16, bfloat16, int32, int64 or "
                            "bool expected",
                            onyx__cuda_dtype_name(x->dtype));
  if (!onyx__cuda_dtype_in(to, CAST_TARGETS))
    return onyx__cuda_error(ctx, ONYX_STATUS_UNSUPPORTED, "cast from %s to %s",
                            onyx__cuda_dtype_name(x->dtype), onyx__cuda_dtype_name(to));
  onyx_tensor *y = NULL;
  onyx_status st = onyx__cuda_alloc_output(&s->head, ctx, 0, to, x->rank, x->dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  cudaError_t e = onyx__cuda_launch_cast(x->dtype, to, x->data, y->data, onyx_tensor_numel(x),
                                         (cudaStream_t)ctx->stream);
  return onyx__cuda_check(ctx, e, "Cast");
}

static onyx_status cast_compute(void *state, onyx_compute_ctx *ctx,
                                const onyx_tensor *const *inputs, size_t input_count) {
  const shape_state *s = state;
  onyx_status st = onyx__cuda_check_inputs(ctx, inputs, input_count, 1);
  if (st != ONYX_STATUS_OK) return st;
  return cast_run(s, ctx, inputs[0], s->to);
}

static onyx_status castlike_compute(void *state, onyx_compute_ctx *ctx,
                                    const onyx_tensor *const *inputs, size_t input_count) {
  const shape_state *s = state;
  onyx_status st = onyx__cuda_check_inputs(ctx, inputs, input_count, 2);
  if (st != ONYX_STATUS_OK) return st;
  return cast_run(s, ctx, inputs[0], inputs[1]->dtype);
}

static onyx_status cast_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                              onyx_tensor *outputs, size_t output_count) {
  onyx__cuda_infer_begin(outputs, output_count);
  const shape_state *s = state;
  if (input_count < 1 || output_count < 1) return ONYX_STATUS_INVALID_ARGUMENT;
  set_output(&outputs[0], s->to, inputs[0].rank, inputs[0].dims);
  return ONYX_STATUS_OK;
}

static onyx_status castlike_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                  onyx_tensor *outputs, size_t output_count) {
  onyx__cuda_infer_begin(outputs, output_count);
  (void)state;
  if (input_count < 2 || output_count < 1) return ONYX_STATUS_INVALID_ARGUMENT;
  set_output(&outputs[0], inputs[1].dtype, inputs[0].rank, inputs[0].dims);
  return ONYX_STATUS_OK;
}

/* ------------------------------------------------------------------ tables */

#define CUDA_TYPED_KERNEL(sym, NAME, SINCE, UNTIL, SUPPORTS, CREATE, COMPUTE, INFER, HOST, TYPES)  \
  const onyx_kernel_table sym = {                                                                  \
      .struct_size = sizeof(onyx_kernel_table),                                                    \
      .version = ONYX_ABI_VERSION,                                                                 \
      .domain = "",                                                                                \
      .op_type = NAME,                                                                             \
      .since_opset = SINCE,                                                                        \
      .until_opset = UNTIL,                                                                        \
      .type_input = 0,                                                                             \
      .type_mask = TYPES,                                                                          \
      .supports = SUPPORTS,                                                                        \
      .create = CREATE,                                                                            \
      .destroy = onyx__cuda_destroy,                                                               \
      .workspace = NULL,                                                                           \
      .compute = COMPUTE,                                                                          \
      .infer = INFER,                                                                              \
      .host_inputs = HOST,                                                                         \
  };

/* The layout ops move float data; Cast and CastLike also take integers and bools. */
#define CUDA_SHAPE_KERNEL(sym, NAME, SINCE, UNTIL, SUPPORTS, CREATE, COMPUTE, INFER, HOST)         \
  CUDA_TYPED_KERNEL(sym, NAME, SINCE, UNTIL, SUPPORTS, CREATE, COMPUTE, INFER, HOST,               \
                    ONYX__CUDA_FLOAT_TYPES)

/* Reshape 1-4 took the shape as an attribute; not claimed. */
CUDA_SHAPE_KERNEL(onyx__cuda_k_reshape, "Reshape", 5, 0, NULL, reshape_create, reshape_compute,
                  reshape_infer, RESHAPE_HOST_INPUTS)
CUDA_SHAPE_KERNEL(onyx__cuda_k_squeeze_1, "Squeeze", 1, 12, NULL, axes_create, squeeze_compute,
                  squeeze_infer, 0)
CUDA_SHAPE_KERNEL(onyx__cuda_k_squeeze_13, "Squeeze", 13, 0, NULL, axes_create, squeeze_compute,
                  squeeze_infer, AXES13_HOST_INPUTS)
CUDA_SHAPE_KERNEL(onyx__cuda_k_unsqueeze_1, "Unsqueeze", 1, 12, NULL, axes_create,
                  unsqueeze_compute, unsqueeze_infer, 0)
CUDA_SHAPE_KERNEL(onyx__cuda_k_unsqueeze_13, "Unsqueeze", 13, 0, NULL, axes_create,
                  unsqueeze_compute, unsqueeze_infer, AXES13_HOST_INPUTS)
CUDA_SHAPE_KERNEL(onyx__cuda_k_identity, "Identity", 1, 0, NULL, onyx__cuda_create_plain,
                  identity_compute, same_infer, 0)
CUDA_SHAPE_KERNEL(onyx__cuda_k_transpose, "Transpose", 1, 0, NULL, transpose_create_perm,
                  transpose_compute, transpose_infer, 0)
/* Concat 1-3 had a default axis; 4+ requires it. */
CUDA_SHAPE_KERNEL(onyx__cuda_k_concat, "Concat", 4, 0, NULL, concat_create, concat_compute,
                  concat_infer, 0)
CUDA_SHAPE_KERNEL(onyx__cuda_k_slice_1, "Slice", 1, 9, NULL, slice_create, slice_compute,
                  slice_infer, 0)
CUDA_SHAPE_KERNEL(onyx__cuda_k_slice_10, "Slice", 10, 0, NULL, slice_create, slice_compute,
                  slice_infer, SLICE10_HOST_INPUTS)
CUDA_SHAPE_KERNEL(onyx__cuda_k_expand, "Expand", 8, 0, NULL, onyx__cuda_create_plain,
                  expand_compute, expand_infer, EXPAND_HOST_INPUTS)
CUDA_SHAPE_KERNEL(onyx__cuda_k_gather, "Gather", 1, 0, gather_supports, gather_create,
                  gather_compute, gather_infer, 0)
/* Cast 1-5 named the target type with a string; not claimed. */
CUDA_TYPED_KERNEL(onyx__cuda_k_cast, "Cast", 6, 0, cast_supports, cast_create, cast_compute,
                  cast_infer, 0, CAST_SOURCES)
CUDA_TYPED_KERNEL(onyx__cuda_k_castlike, "CastLike", 15, 0, castlike_supports, castlike_create,
                  castlike_compute, castlike_infer, 0, CAST_SOURCES)
