/*
 * Normalisations over the trailing axes of X, computed in float32 (stash_type 1):
 *
 *   LayerNormalization (17)        Y = (X - mean) / sqrt(var + eps) * Scale [+ B];
 *                                  outputs Y, Mean, InvStdDev
 *   SimplifiedLayerNormalization   Y = X / sqrt(mean(X^2) + eps) * scale;
 *     (ONNX domain, as ONNX        outputs Y, inv_std_var
 *      Runtime registers it)
 *   RMSNormalization (23)          the same; output Y only
 *   SkipSimplifiedLayerNormalization (com.microsoft)
 *                                  s = input + skip [+ bias], then the RMS form of s
 *                                  over the last axis; outputs output, mean,
 *                                  inv_std_var, input_skip_bias_sum (= s); mean is
 *                                  written as 0, as ONNX Runtime does
 *
 * Mean / InvStdDev / inv_std_var are float32 with X's shape, the normalised axes
 * kept as 1. The scale may have its own float type (RMSNormalization's V); Y takes it.
 */
#include <string.h>

#include "cuda_impl.h"

enum { NORM_LAYER, NORM_SIMPLIFIED, NORM_RMS, NORM_SKIP_SIMPLIFIED };

typedef struct norm_state {
  onyx__cuda_node head;
  int kind;
  int64_t axis;
  float epsilon;
} norm_state;

static onyx_status norm_create(void *provider_state, const onyx_node_info *node, int kind,
                               void **out_state, char *err, size_t err_cap) {
  int64_t axis = -1, stash = 1;
  float eps = kind == NORM_SKIP_SIMPLIFIED ? 1e-12f : 1e-5f;
  onyx_status st;
  if ((st = onyx__cuda_attr_int(node, "axis", -1, &axis, err, err_cap)) ||
      (st = onyx__cuda_attr_int(node, "stash_type", 1, &stash, err, err_cap)) ||
      (st = onyx__cuda_attr_float(node, "epsilon", eps, &eps, err, err_cap)))
    return st;
  if (stash != 1)
    return onyx__cuda_fail(err, err_cap, ONYX_STATUS_UNSUPPORTED,
                           "%s: stash_type %lld is not supported (only 1: float32)", node->op_type,
                           (long long)stash);
  norm_state *s = onyx__cuda_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  s->kind = kind;
  s->axis = kind == NORM_SKIP_SIMPLIFIED ? -1 : axis;
  s->epsilon = eps;
  *out_state = s;
  return ONYX_STATUS_OK;
}

static bool norm_supports(const onyx_node_info *node, char *reason, size_t cap) {
  const onyx_attr *a = onyx__cuda_attr_find(node, "stash_type");
  if (a != NULL && a->type == ONYX_ATTR_INT && a->i != 1) {
    onyx__cuda_fail(reason, cap, ONYX_STATUS_UNSUPPORTED, "stash_type %lld (only 1)",
                    (long long)a->i);
    return false;
  }
  return true;
}

#define NORM_CREATE(name, KIND)                                                                    \
  static onyx_status name(void *provider_state, const onyx_node_info *node, void **out_state,      \
                          char *err, size_t err_cap) {                                             \
    return norm_create(provider_state, node, KIND, out_state, err, err_cap);                       \
  }
NORM_CREATE(layer_create, NORM_LAYER)
NORM_CREATE(simplified_create, NORM_SIMPLIFIED)
NORM_CREATE(rms_create, NORM_RMS)
NORM_CREATE(skip_create, NORM_SKIP_SIMPLIFIED)

/* Where the inputs sit for each kind. */
static size_t scale_index(int kind) { return kind == NORM_SKIP_SIMPLIFIED ? 2 : 1; }

/* Geometry shared by compute and infer: rows, cols and the normalised axis. */
static onyx_status norm_geometry(const norm_state *s, const onyx_tensor *x, int64_t *out_axis,
                                 int64_t *rows, int64_t *cols, char *err, size_t cap) {
  int64_t axis = 0;
  if (x->rank == 0 || !onyx__cuda_normalize_axis(s->axis, x->rank, &axis))
    return onyx__cuda_fail(err, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "axis %lld is out of range for input %s", (long long)s->axis,
                           onyx__cuda_tensor_shape(x).s);
  *out_axis = axis;
  *rows = onyx__cuda_dims_product(x->dims, 0, (uint32_t)axis);
  *cols = onyx__cuda_dims_product(x->dims, (uint32_t)axis, x->rank);
  return ONYX_STATUS_OK;
}

/* A per-column parameter (scale, B, bias): `cols` values, or one. */
static onyx_status check_param(onyx_compute_ctx *ctx, const onyx_tensor *t, const char *what,
                               int64_t cols, uint32_t want_dtype) {
  if (t == NULL) return ONYX_STATUS_OK;
  int64_t n = onyx_tensor_numel(t);
  if (n != cols && n != 1)
    return onyx__cuda_error(ctx, ONYX_STATUS_INVALID_ARGUMENT,
                            "%s %s must hold the %lld normalised values (or one)", what,
                            onyx__cuda_tensor_shape(t).s, (long long)cols);
  if (want_dtype != ONYX_DTYPE_UNDEFINED && t->dtype != want_dtype)
    return onyx__cuda_error(ctx, ONYX_STATUS_INVALID_ARGUMENT, "%s has type %s, expected %s", what,
                            onyx__cuda_dtype_name(t->dtype), onyx__cuda_dtype_name(want_dtype));
  if (!onyx__cuda_dtype_in(t->dtype, ONYX__CUDA_FLOAT_TYPES))
    return onyx__cuda_error(ctx, ONYX_STATUS_UNSUPPORTED, "%s has type %s", what,
                            onyx__cuda_dtype_name(t->dtype));
  return ONYX_STATUS_OK;
}

static onyx_status norm_compute(void *state, onyx_compute_ctx *ctx,
                                const onyx_tensor *const *inputs, size_t input_count) {
  const norm_state *s = state;
  size_t si = scale_index(s->kind);
  onyx_status st = onyx__cuda_check_inputs(ctx, inputs, input_count, si + 1);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *x = inputs[0], *scale = inputs[si];
  const onyx_tensor *skip = s->kind == NORM_SKIP_SIMPLIFIED ? inputs[1] : NULL;
  const onyx_tensor *bias =
      s->kind == NORM_SKIP_SIMPLIFIED ? onyx__cuda_input(inputs, input_count, 3) : NULL;
  const onyx_tensor *shift =
      s->kind == NORM_LAYER ? onyx__cuda_input(inputs, input_count, 2) : NULL;
  if (!onyx__cuda_dtype_in(x->dtype, ONYX__CUDA_FLOAT_TYPES))
    return onyx__cuda_error(ctx, ONYX_STATUS_UNSUPPORTED,
                            "input has type %s; float32, float16 or bfloat16 expected",
                            onyx__cuda_dtype_name(x->dtype));
  char err[256];
  int64_t axis = 0, rows = 0, cols = 0;
  if ((st = norm_geometry(s, x, &axis, &rows, &cols, err, sizeof err)) != ONYX_STATUS_OK)
    return onyx__cuda_error(ctx, st, "%s", err);
  /* LayerNormalization and the skip form keep every parameter in X's type; the RMS
   * forms let the scale choose the output type. */
  bool mixed = s->kind == NORM_SIMPLIFIED || s->kind == NORM_RMS;
  uint32_t param_dtype = mixed ? ONYX_DTYPE_UNDEFINED : x->dtype;
  if ((st = check_param(ctx, scale, "scale", cols, param_dtype)) != ONYX_STATUS_OK ||
      (st = check_param(ctx, shift, "B", cols, x->dtype)) != ONYX_STATUS_OK ||
      (st = check_param(ctx, bias, "bias", cols, x->dtype)) != ONYX_STATUS_OK)
    return st;
  if (bias != NULL && onyx_tensor_numel(bias) != cols)
    return onyx__cuda_error(ctx, ONYX_STATUS_INVALID_ARGUMENT, "bias %s must hold %lld values",
                            onyx__cuda_tensor_shape(bias).s, (long long)cols);
  int64_t skip_numel = 0;
  if (skip != NULL) {
    /* skip is input's shape, or its trailing axes (broadcast over the batch). */
    bool ok = skip->dtype == x->dtype && skip->rank <= x->rank && skip->rank >= 1;
    for (uint32_t d = 0; ok && d < skip->rank; ++d) {
      int64_t sd = skip->dims[skip->rank - 1 - d], xd = x->dims[x->rank - 1 - d];
      ok = sd == xd || (sd == 1 && d + 1 == skip->rank && skip->rank == x->rank);
    }
    skip_numel = onyx_tensor_numel(skip);
    if (!ok || skip_numel == 0 || onyx_tensor_numel(x) % skip_numel != 0)
      return onyx__cuda_error(ctx, ONYX_STATUS_INVALID_ARGUMENT,
                              "skip %s (%s) must be input's shape %s (%s) or its trailing axes",
                              onyx__cuda_tensor_shape(skip).s, onyx__cuda_dtype_name(skip->dtype),
                              onyx__cuda_tensor_shape(x).s, onyx__cuda_dtype_name(x->dtype));
  }

  /* Outputs. Statistics have X's shape with the normalised axes kept as 1. */
  uint32_t y_dtype = mixed ? scale->dtype : x->dtype;
  int64_t stat_dims[ONYX_MAX_RANK];
  for (uint32_t d = 0; d < x->rank; ++d) stat_dims[d] = (int64_t)d < axis ? x->dims[d] : 1;
  onyx_tensor *y = NULL, *mean = NULL, *inv = NULL, *sum = NULL;
  st = onyx__cuda_alloc_output(&s->head, ctx, 0, y_dtype, x->rank, x->dims, &y);
  switch (s->kind) {
  case NORM_LAYER:
    if (st == ONYX_STATUS_OK)
      st = onyx__cuda_alloc_output(&s->head, ctx, 1, ONYX_DTYPE_FLOAT32, x->rank, stat_dims, &mean);
    if (st == ONYX_STATUS_OK)
      st = onyx__cuda_alloc_output(&s->head, ctx, 2, ONYX_DTYPE_FLOAT32, x->rank, stat_dims, &inv);
    break;
  case NORM_SIMPLIFIED:
    if (st == ONYX_STATUS_OK)
      st = onyx__cuda_alloc_output(&s->head, ctx, 1, ONYX_DTYPE_FLOAT32, x->rank, stat_dims, &inv);
    break;
  case NORM_SKIP_SIMPLIFIED:
    if (st == ONYX_STATUS_OK)
      st = onyx__cuda_alloc_output(&s->head, ctx, 1, ONYX_DTYPE_FLOAT32, x->rank, stat_dims, &mean);
    if (st == ONYX_STATUS_OK)
      st = onyx__cuda_alloc_output(&s->head, ctx, 2, ONYX_DTYPE_FLOAT32, x->rank, stat_dims, &inv);
    if (st == ONYX_STATUS_OK)
      st = onyx__cuda_alloc_output(&s->head, ctx, 3, x->dtype, x->rank, x->dims, &sum);
    break;
  default:
    break;
  }
  if (st != ONYX_STATUS_OK) return st;
  if (y == NULL && mean == NULL && inv == NULL && sum == NULL) return ONYX_STATUS_OK;

  /* Y may be unnamed (a residual stream read only through input_skip_bias_sum). */
  onyx__cuda_norm_args a;
  memset(&a, 0, sizeof a);
  a.simplified = s->kind != NORM_LAYER;
  a.x_dtype = x->dtype;
  a.scale_dtype = scale->dtype;
  a.y_dtype = y_dtype;
  a.sum_dtype = x->dtype;
  a.x = x->data;
  a.skip = skip ? skip->data : NULL;
  a.skip_numel = skip_numel;
  a.bias = bias ? bias->data : NULL;
  a.scale = scale->data;
  a.scale_numel = onyx_tensor_numel(scale);
  a.shift = shift ? shift->data : NULL;
  a.shift_numel = shift ? onyx_tensor_numel(shift) : 0;
  a.y = y ? y->data : NULL;
  a.mean = mean ? mean->data : NULL;
  a.inv_std = inv ? inv->data : NULL;
  a.sum = sum ? sum->data : NULL;
  a.rows = rows;
  a.cols = cols;
  a.epsilon = s->epsilon;
  cudaError_t e = onyx__cuda_launch_norm(&a, (cudaStream_t)ctx->stream);
  return onyx__cuda_check(ctx, e, s->head.op_type);
}

static onyx_status norm_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                              onyx_tensor *outputs, size_t output_count) {
  onyx__cuda_infer_begin(outputs, output_count);
  const norm_state *s = state;
  size_t si = scale_index(s->kind);
  if (input_count <= si || output_count < 1) return ONYX_STATUS_INVALID_ARGUMENT;
  const onyx_tensor *x = &inputs[0];
  int64_t axis = 0, rows = 0, cols = 0;
  char why[ONYX__CUDA_REASON_CAP] = "";
  onyx_status st = norm_geometry(s, x, &axis, &rows, &cols, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cuda_reason(state, st, why);
  bool mixed = s->kind == NORM_SIMPLIFIED || s->kind == NORM_RMS;
  for (size_t o = 0; o < output_count; ++o) {
    onyx_tensor *t = &outputs[o];
    t->rank = x->rank;
    for (uint32_t d = 0; d < x->rank; ++d) t->dims[d] = (int64_t)d < axis ? x->dims[d] : 1;
    t->dtype = ONYX_DTYPE_FLOAT32;
  }
  outputs[0].dtype = mixed ? inputs[si].dtype : x->dtype;
  memcpy(outputs[0].dims, x->dims, sizeof(int64_t) * x->rank);
  if (s->kind == NORM_SKIP_SIMPLIFIED && output_count > 3) {
    outputs[3].dtype = x->dtype;
    memcpy(outputs[3].dims, x->dims, sizeof(int64_t) * x->rank);
  }
  return ONYX_STATUS_OK;
}

#define CUDA_NORM_KERNEL(sym, DOMAIN, NAME, SINCE, CREATE)                                         \
  const onyx_kernel_table sym = {                                                                  \
      .struct_size = sizeof(onyx_kernel_table),                                                    \
      .version = ONYX_ABI_VERSION,                                                                 \
      .domain = DOMAIN,                                                                            \
      .op_type = NAME,                                                                             \
      .since_opset = SINCE,                                                                        \
      .until_opset = 0,                                                                            \
      .type_input = 0,                                                                             \
      .type_mask = ONYX__CUDA_FLOAT_TYPES,                                                         \
      .supports = norm_supports,                                                                   \
      .create = CREATE,                                                                            \
      .destroy = onyx__cuda_destroy,                                                               \
      .workspace = NULL,                                                                           \
      .compute = norm_compute,                                                                     \
      .infer = norm_infer,                                                                         \
  };

CUDA_NORM_KERNEL(onyx__cuda_k_layernorm, "", "LayerNormalization", 17, layer_create)
CUDA_NORM_KERNEL(onyx__cuda_k_simplified_layernorm, "", "SimplifiedLayerNormalization", 1,
                 simplified_create)
CUDA_NORM_KERNEL(onyx__cuda_k_rmsnorm, "", "RMSNormalization", 23, rms_create)
CUDA_NORM_KERNEL(onyx__cuda_k_skip_simplified_layernorm, "com.microsoft",
                 "SkipSimplifiedLayerNormalization", 1, skip_create)
