/*
 * Ops that move data without computing on it: Reshape, Transpose, Concat, Gather,
 * Unsqueeze, Squeeze, Shape, Identity, Constant.
 *
 * They work on bytes, so every fixed-size dtype is supported by the same code.
 * Shape-like inputs (Reshape's shape, Unsqueeze/Squeeze axes from opset 13,
 * Gather's indices) are host tensors read at compute time; everything they imply
 * is validated before the output is allocated, so a bad value never leaves a
 * half-written output behind.
 *
 * The output is always a copy. alias_output exists for buffers a kernel updates in
 * place (a shared KV cache); a view with a different shape is not that.
 */
#include <stdio.h>
#include <string.h>

#include "cpu_impl.h"

/* Output 0 with x's bytes under a new shape (same element count). */
static onyx_status cpu_copy_as(const onyx__cpu_node *node, onyx_compute_ctx *ctx,
                               const onyx_tensor *x, uint32_t rank, const int64_t *dims) {
  onyx_tensor *y = NULL;
  onyx_status st = onyx__cpu_alloc_output(node, ctx, x->dtype, rank, dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  size_t bytes = (size_t)onyx_tensor_numel(x) * onyx_dtype_size(x->dtype);
  if (bytes > 0) memcpy(y->data, x->data, bytes);
  return ONYX_STATUS_OK;
}

/* Common check for the byte-moving ops: input 0 must have a fixed-size dtype. */
static onyx_status cpu_check_data(onyx_compute_ctx *ctx, const onyx_tensor *x) {
  if (onyx_dtype_size(x->dtype) == 0) {
    ctx->set_error(ctx, "input 0 has dtype %s, which is not supported",
                   onyx__cpu_dtype_name(x->dtype));
    return ONYX_STATUS_UNSUPPORTED;
  }
  return ONYX_STATUS_OK;
}

#define CPU_KERNEL(sym, NAME, SINCE, UNTIL, CREATE, COMPUTE)                                       \
  const onyx_kernel_table sym = {                                                                  \
      .struct_size = sizeof(onyx_kernel_table),                                                    \
      .version = ONYX_ABI_VERSION,                                                                 \
      .domain = "",                                                                                \
      .op_type = NAME,                                                                             \
      .since_opset = SINCE,                                                                        \
      .until_opset = UNTIL,                                                                        \
      .type_input = 0,                                                                             \
      .type_mask = ONYX__CPU_FIXED_TYPES,                                                          \
      .create = CREATE,                                                                            \
      .destroy = onyx__cpu_destroy,                                                                \
      .compute = COMPUTE,                                                                          \
  };

/* ------------------------------------------------------------------ Identity */

static onyx_status cpu_identity_compute(void *state, onyx_compute_ctx *ctx,
                                        const onyx_tensor *const *inputs, size_t input_count) {
  onyx_status st = onyx__cpu_check_inputs(ctx, inputs, input_count, 1);
  if (st == ONYX_STATUS_OK) st = cpu_check_data(ctx, inputs[0]);
  if (st != ONYX_STATUS_OK) return st;
  return cpu_copy_as(state, ctx, inputs[0], inputs[0]->rank, inputs[0]->dims);
}

/* Tensors only: sequence and optional values (opset 14/16) are not ABI v1 types. */
CPU_KERNEL(onyx__cpu_k_identity, "Identity", 1, 0, onyx__cpu_create_plain, cpu_identity_compute)

/* ------------------------------------------------------------------ Reshape */

typedef struct cpu_reshape_state {
  onyx__cpu_node base;
  bool allowzero;
  /* Opset 1-4 took the target shape as an attribute. */
  const int64_t *shape_attr;
  size_t shape_attr_count;
} cpu_reshape_state;

static onyx_status cpu_reshape_create(void *provider_state, const onyx_node_info *node,
                                      void **out_state, char *err, size_t err_cap) {
  cpu_reshape_state *s = onyx__cpu_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  int64_t allowzero = 0;
  bool present = false;
  onyx_status st = onyx__cpu_attr_int(node, "allowzero", 0, &allowzero, err, err_cap);
  if (st == ONYX_STATUS_OK && node->opset < 5) {
    st = onyx__cpu_attr_ints(node, "shape", &s->shape_attr, &s->shape_attr_count, &present, err,
                             err_cap);
    if (st == ONYX_STATUS_OK && !present)
      st = onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "Reshape: attribute 'shape' is required before opset 5");
  }
  if (st != ONYX_STATUS_OK) {
    onyx__cpu_destroy(s);
    return st;
  }
  s->allowzero = allowzero != 0;
  *out_state = s;
  return ONYX_STATUS_OK;
}

static onyx_status cpu_reshape_compute(void *state, onyx_compute_ctx *ctx,
                                       const onyx_tensor *const *inputs, size_t input_count) {
  const cpu_reshape_state *s = state;
  bool from_attr = s->base.opset < 5;
  onyx_status st = onyx__cpu_check_inputs(ctx, inputs, input_count, from_attr ? 1 : 2);
  if (st == ONYX_STATUS_OK) st = cpu_check_data(ctx, inputs[0]);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *x = inputs[0];

  int64_t shape[ONYX_MAX_RANK];
  size_t rank = 0;
  if (from_attr) {
    if (s->shape_attr_count > ONYX_MAX_RANK) {
      ctx->set_error(ctx, "target rank %zu exceeds %d", s->shape_attr_count, ONYX_MAX_RANK);
      return ONYX_STATUS_UNSUPPORTED;
    }
    rank = s->shape_attr_count;
    if (rank > 0) memcpy(shape, s->shape_attr, rank * sizeof shape[0]);
  } else {
    st = onyx__cpu_read_int_list(ctx, inputs[1], 1, "shape", shape, ONYX_MAX_RANK, &rank);
    if (st != ONYX_STATUS_OK) return st;
  }

  /* 0 copies the input's dim (unless allowzero asks for a literal 0); one -1 is
   * inferred from the element count. */
  int infer = -1;
  bool has_zero = false;
  for (size_t i = 0; i < rank; ++i) {
    if (shape[i] == -1) {
      if (infer >= 0) {
        ctx->set_error(ctx, "input 1 (shape) has -1 at both %d and %zu; at most one is allowed",
                       infer, i);
        return ONYX_STATUS_INVALID_ARGUMENT;
      }
      infer = (int)i;
    } else if (shape[i] < -1) {
      ctx->set_error(ctx, "input 1 (shape) value %lld at %zu is negative", (long long)shape[i], i);
      return ONYX_STATUS_INVALID_ARGUMENT;
    } else if (shape[i] == 0) {
      has_zero = true;
      if (!s->allowzero) {
        if (i >= x->rank) {
          ctx->set_error(ctx, "input 1 (shape) has 0 at %zu but input 0 %s has no dim there", i,
                         onyx__cpu_tensor_shape(x).s);
          return ONYX_STATUS_INVALID_ARGUMENT;
        }
        shape[i] = x->dims[i];
      }
    }
  }
  if (s->allowzero && has_zero && infer >= 0) {
    ctx->set_error(ctx, "input 1 (shape) has both 0 and -1 with allowzero = 1");
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  int64_t numel = onyx_tensor_numel(x), known = 1;
  for (size_t i = 0; i < rank; ++i) {
    if ((int)i == infer) continue;
    if (__builtin_mul_overflow(known, shape[i], &known)) {
      ctx->set_error(ctx, "input 1 (shape) %s overflows",
                     onyx__cpu_shape_str((uint32_t)rank, shape).s);
      return ONYX_STATUS_INVALID_ARGUMENT;
    }
  }
  if (infer >= 0) {
    if (known == 0 || numel % known != 0) {
      ctx->set_error(ctx, "cannot infer the -1 in shape %s from %lld elements (input 0 %s)",
                     onyx__cpu_shape_str((uint32_t)rank, shape).s, (long long)numel,
                     onyx__cpu_tensor_shape(x).s);
      return ONYX_STATUS_INVALID_ARGUMENT;
    }
    shape[infer] = numel / known;
    known = numel;
  }
  if (known != numel) {
    ctx->set_error(ctx, "input 0 %s has %lld elements, shape %s needs %lld",
                   onyx__cpu_tensor_shape(x).s, (long long)numel,
                   onyx__cpu_shape_str((uint32_t)rank, shape).s, (long long)known);
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  return cpu_copy_as(&s->base, ctx, x, (uint32_t)rank, shape);
}

CPU_KERNEL(onyx__cpu_k_reshape_1, "Reshape", 1, 4, cpu_reshape_create, cpu_reshape_compute)
CPU_KERNEL(onyx__cpu_k_reshape_5, "Reshape", 5, 0, cpu_reshape_create, cpu_reshape_compute)

/* ------------------------------------------------------------------ Transpose */

typedef struct cpu_transpose_state {
  onyx__cpu_node base;
  const int64_t *perm; /* NULL: reverse the dims */
  size_t perm_count;
} cpu_transpose_state;

static onyx_status cpu_transpose_create(void *provider_state, const onyx_node_info *node,
                                        void **out_state, char *err, size_t err_cap) {
  cpu_transpose_state *s = onyx__cpu_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  onyx_status st = onyx__cpu_attr_ints(node, "perm", &s->perm, &s->perm_count, NULL, err, err_cap);
  if (st != ONYX_STATUS_OK) {
    onyx__cpu_destroy(s);
    return st;
  }
  *out_state = s;
  return ONYX_STATUS_OK;
}

/* Copies n elements of `esize` bytes read `stride` elements apart. Fixed sizes let
 * the compiler turn each memcpy into one load and one store. */
static void cpu_gather_run(unsigned char *dst, const unsigned char *src, int64_t n, int64_t stride,
                           size_t esize) {
  switch (esize) {
  case 1:
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i * stride];
    break;
  case 2:
    for (int64_t i = 0; i < n; ++i) memcpy(dst + 2 * i, src + 2 * i * stride, 2);
    break;
  case 4:
    for (int64_t i = 0; i < n; ++i) memcpy(dst + 4 * i, src + 4 * i * stride, 4);
    break;
  default:
    for (int64_t i = 0; i < n; ++i) memcpy(dst + 8 * i, src + 8 * i * stride, 8);
    break;
  }
}

static onyx_status cpu_transpose_compute(void *state, onyx_compute_ctx *ctx,
                                         const onyx_tensor *const *inputs, size_t input_count) {
  const cpu_transpose_state *s = state;
  onyx_status st = onyx__cpu_check_inputs(ctx, inputs, input_count, 1);
  if (st == ONYX_STATUS_OK) st = cpu_check_data(ctx, inputs[0]);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *x = inputs[0];
  const uint32_t r = x->rank;

  int64_t perm[ONYX_MAX_RANK];
  if (s->perm == NULL) {
    for (uint32_t d = 0; d < r; ++d) perm[d] = r - 1 - d;
  } else {
    bool seen[ONYX_MAX_RANK] = {false};
    bool ok = s->perm_count == r;
    for (uint32_t d = 0; ok && d < r; ++d) {
      int64_t p = s->perm[d];
      if (p < 0) p += r; /* negative entries are not in the spec; numpy accepts them */
      ok = p >= 0 && p < (int64_t)r && !seen[p];
      if (ok) seen[p] = true;
      perm[d] = p;
    }
    if (!ok) {
      uint32_t shown = (uint32_t)(s->perm_count < ONYX_MAX_RANK ? s->perm_count : ONYX_MAX_RANK);
      ctx->set_error(ctx, "attribute perm %s is not a permutation of the %u dims of input 0 %s",
                     onyx__cpu_shape_str(shown, s->perm).s, r, onyx__cpu_tensor_shape(x).s);
      return ONYX_STATUS_INVALID_ARGUMENT;
    }
  }

  int64_t in_stride[ONYX_MAX_RANK], out_dims[ONYX_MAX_RANK];
  int64_t acc = 1;
  for (uint32_t d = r; d-- > 0;) {
    in_stride[d] = acc;
    acc *= x->dims[d];
  }
  for (uint32_t d = 0; d < r; ++d) out_dims[d] = x->dims[perm[d]];

  onyx_tensor *y = NULL;
  st = onyx__cpu_alloc_output(&s->base, ctx, x->dtype, r, out_dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  int64_t numel = onyx_tensor_numel(x);
  if (numel == 0) return ONYX_STATUS_OK;

  /* Loop nest over the output: drop size-1 axes, merge axes that are also
   * neighbours in the input, so e.g. [B,S,H,D]→[B,H,S,D] copies D-long runs. */
  int64_t dims[ONYX_MAX_RANK], stride[ONYX_MAX_RANK];
  uint32_t n = 0;
  for (uint32_t d = 0; d < r; ++d) {
    if (out_dims[d] == 1) continue;
    int64_t sd = in_stride[perm[d]];
    if (n > 0 && stride[n - 1] == sd * out_dims[d]) {
      dims[n - 1] *= out_dims[d];
      stride[n - 1] = sd;
    } else {
      dims[n] = out_dims[d];
      stride[n] = sd;
      ++n;
    }
  }
  if (n == 0) {
    dims[0] = 1;
    stride[0] = 1;
    n = 1;
  }

  const size_t esize = onyx_dtype_size(x->dtype);
  const unsigned char *src = x->data;
  unsigned char *dst = y->data;
  const int64_t run = dims[n - 1], run_stride = stride[n - 1];
  int64_t idx[ONYX_MAX_RANK] = {0}, off = 0;
  for (int64_t done = 0; done < numel; done += run) {
    if (run_stride == 1)
      memcpy(dst + done * esize, src + off * esize, (size_t)run * esize);
    else
      cpu_gather_run(dst + done * esize, src + off * esize, run, run_stride, esize);
    for (uint32_t d = n - 1; d-- > 0;) {
      off += stride[d];
      if (++idx[d] < dims[d]) break;
      off -= stride[d] * dims[d];
      idx[d] = 0;
    }
  }
  return ONYX_STATUS_OK;
}

CPU_KERNEL(onyx__cpu_k_transpose, "Transpose", 1, 0, cpu_transpose_create, cpu_transpose_compute)

/* ------------------------------------------------------------------ Concat */

typedef struct cpu_axis_state {
  onyx__cpu_node base;
  int64_t axis;
} cpu_axis_state;

static onyx_status cpu_concat_create(void *provider_state, const onyx_node_info *node,
                                     void **out_state, char *err, size_t err_cap) {
  cpu_axis_state *s = onyx__cpu_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  onyx_status st = onyx__cpu_attr_int(node, "axis", 1, &s->axis, err, err_cap);
  /* The default of 1 existed only before opset 4. */
  if (st == ONYX_STATUS_OK && node->opset >= 4 && onyx__cpu_attr_find(node, "axis") == NULL)
    st = onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                        "Concat: attribute 'axis' is required from opset 4");
  if (st != ONYX_STATUS_OK) {
    onyx__cpu_destroy(s);
    return st;
  }
  *out_state = s;
  return ONYX_STATUS_OK;
}

static onyx_status cpu_concat_compute(void *state, onyx_compute_ctx *ctx,
                                      const onyx_tensor *const *inputs, size_t input_count) {
  const cpu_axis_state *s = state;
  if (input_count == 0) {
    ctx->set_error(ctx, "needs at least one input");
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  onyx_status st = onyx__cpu_check_inputs(ctx, inputs, input_count, input_count);
  if (st == ONYX_STATUS_OK) st = cpu_check_data(ctx, inputs[0]);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *x0 = inputs[0];
  int64_t axis;
  if (x0->rank == 0 || !onyx__cpu_normalize_axis(s->axis, x0->rank, &axis)) {
    ctx->set_error(ctx, "axis %lld is out of range for input 0 %s", (long long)s->axis,
                   onyx__cpu_tensor_shape(x0).s);
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  int64_t out_dims[ONYX_MAX_RANK];
  memcpy(out_dims, x0->dims, x0->rank * sizeof out_dims[0]);
  out_dims[axis] = 0;
  for (size_t i = 0; i < input_count; ++i) {
    const onyx_tensor *t = inputs[i];
    if (t->dtype != x0->dtype) {
      ctx->set_error(ctx, "input %zu has dtype %s, expected %s like input 0", i,
                     onyx__cpu_dtype_name(t->dtype), onyx__cpu_dtype_name(x0->dtype));
      return ONYX_STATUS_INVALID_ARGUMENT;
    }
    bool ok = t->rank == x0->rank;
    for (uint32_t d = 0; ok && d < t->rank; ++d) ok = d == axis || t->dims[d] == x0->dims[d];
    if (!ok) {
      ctx->set_error(ctx, "input %zu has shape %s, expected %s except along axis %lld", i,
                     onyx__cpu_tensor_shape(t).s, onyx__cpu_tensor_shape(x0).s, (long long)axis);
      return ONYX_STATUS_INVALID_ARGUMENT;
    }
    out_dims[axis] += t->dims[axis];
  }

  onyx_tensor *y = NULL;
  st = onyx__cpu_alloc_output(&s->base, ctx, x0->dtype, x0->rank, out_dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  /* Each outer index takes one contiguous slab from every input in turn. */
  const size_t esize = onyx_dtype_size(x0->dtype);
  const int64_t outer = onyx__cpu_dims_product(out_dims, 0, (uint32_t)axis);
  const int64_t inner = onyx__cpu_dims_product(out_dims, (uint32_t)axis + 1, x0->rank);
  unsigned char *dst = y->data;
  for (int64_t o = 0; o < outer; ++o) {
    for (size_t i = 0; i < input_count; ++i) {
      size_t slab = (size_t)(inputs[i]->dims[axis] * inner) * esize;
      if (slab == 0) continue;
      memcpy(dst, (const unsigned char *)inputs[i]->data + (size_t)o * slab, slab);
      dst += slab;
    }
  }
  return ONYX_STATUS_OK;
}

CPU_KERNEL(onyx__cpu_k_concat, "Concat", 1, 0, cpu_concat_create, cpu_concat_compute)

/* ------------------------------------------------------------------ Gather */

static onyx_status cpu_gather_create(void *provider_state, const onyx_node_info *node,
                                     void **out_state, char *err, size_t err_cap) {
  cpu_axis_state *s = onyx__cpu_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  onyx_status st = onyx__cpu_attr_int(node, "axis", 0, &s->axis, err, err_cap);
  if (st != ONYX_STATUS_OK) {
    onyx__cpu_destroy(s);
    return st;
  }
  *out_state = s;
  return ONYX_STATUS_OK;
}

static int64_t cpu_index_at(const onyx_tensor *t, int64_t i) {
  return t->dtype == ONYX_DTYPE_INT64 ? ((const int64_t *)t->data)[i]
                                      : ((const int32_t *)t->data)[i];
}

static onyx_status cpu_gather_compute(void *state, onyx_compute_ctx *ctx,
                                      const onyx_tensor *const *inputs, size_t input_count) {
  const cpu_axis_state *s = state;
  onyx_status st = onyx__cpu_check_inputs(ctx, inputs, input_count, 2);
  if (st == ONYX_STATUS_OK) st = cpu_check_data(ctx, inputs[0]);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *x = inputs[0], *idx = inputs[1];
  if (idx->dtype != ONYX_DTYPE_INT64 && idx->dtype != ONYX_DTYPE_INT32) {
    ctx->set_error(ctx, "input 1 (indices) has dtype %s, expected int32 or int64",
                   onyx__cpu_dtype_name(idx->dtype));
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  int64_t axis;
  if (x->rank == 0 || !onyx__cpu_normalize_axis(s->axis, x->rank, &axis)) {
    ctx->set_error(ctx, "axis %lld is out of range for input 0 %s", (long long)s->axis,
                   onyx__cpu_tensor_shape(x).s);
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  const uint32_t ax = (uint32_t)axis;
  uint32_t out_rank = x->rank - 1 + idx->rank;
  if (out_rank > ONYX_MAX_RANK) {
    ctx->set_error(ctx, "output rank %u exceeds %d", out_rank, ONYX_MAX_RANK);
    return ONYX_STATUS_UNSUPPORTED;
  }
  /* Negative indices count from the end (opset 11); anything else outside the
   * axis is an error, found before the output exists. */
  const int64_t extent = x->dims[ax];
  const int64_t count = onyx_tensor_numel(idx);
  const int64_t outer = onyx__cpu_dims_product(x->dims, 0, ax);
  const int64_t inner = onyx__cpu_dims_product(x->dims, ax + 1, x->rank);
  if (outer * inner > 0) {
    for (int64_t i = 0; i < count; ++i) {
      int64_t v = cpu_index_at(idx, i);
      if (v < -extent || v >= extent) {
        ctx->set_error(ctx, "input 1 (indices) value %lld at %lld is out of range [%lld, %lld)",
                       (long long)v, (long long)i, (long long)-extent, (long long)extent);
        return ONYX_STATUS_INVALID_ARGUMENT;
      }
    }
  }
  int64_t out_dims[ONYX_MAX_RANK];
  uint32_t r = 0;
  for (uint32_t d = 0; d < ax; ++d) out_dims[r++] = x->dims[d];
  for (uint32_t d = 0; d < idx->rank; ++d) out_dims[r++] = idx->dims[d];
  for (uint32_t d = ax + 1; d < x->rank; ++d) out_dims[r++] = x->dims[d];

  onyx_tensor *y = NULL;
  st = onyx__cpu_alloc_output(&s->base, ctx, x->dtype, out_rank, out_dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  const size_t slab = (size_t)inner * onyx_dtype_size(x->dtype);
  if (slab == 0) return ONYX_STATUS_OK;
  const unsigned char *src = x->data;
  unsigned char *dst = y->data;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < count; ++i) {
      int64_t v = cpu_index_at(idx, i);
      if (v < 0) v += extent;
      memcpy(dst, src + (size_t)(o * extent + v) * slab, slab);
      dst += slab;
    }
  }
  return ONYX_STATUS_OK;
}

CPU_KERNEL(onyx__cpu_k_gather, "Gather", 1, 0, cpu_gather_create, cpu_gather_compute)

/* ------------------------------------------------------------------ Unsqueeze, Squeeze */

/* Before opset 13 the axes were an attribute; from 13 they are input 1. */
typedef struct cpu_axes_state {
  onyx__cpu_node base;
  const int64_t *axes;
  size_t axes_count;
  bool axes_present;
} cpu_axes_state;

static onyx_status cpu_axes_create(void *provider_state, const onyx_node_info *node,
                                   void **out_state, char *err, size_t err_cap) {
  cpu_axes_state *s = onyx__cpu_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  onyx_status st = ONYX_STATUS_OK;
  if (node->opset < 13) {
    st =
        onyx__cpu_attr_ints(node, "axes", &s->axes, &s->axes_count, &s->axes_present, err, err_cap);
    if (st == ONYX_STATUS_OK && !s->axes_present && strcmp(node->op_type, "Unsqueeze") == 0)
      st = onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "Unsqueeze: attribute 'axes' is required before opset 13");
  }
  if (st != ONYX_STATUS_OK) {
    onyx__cpu_destroy(s);
    return st;
  }
  *out_state = s;
  return ONYX_STATUS_OK;
}

/* The axes list from the attribute or input 1; *out_present false when absent. */
static onyx_status cpu_axes_get(const cpu_axes_state *s, onyx_compute_ctx *ctx,
                                const onyx_tensor *const *inputs, size_t input_count, int64_t *axes,
                                size_t *out_count, bool *out_present) {
  if (s->base.opset < 13) {
    if (s->axes_count > ONYX_MAX_RANK) {
      ctx->set_error(ctx, "attribute axes has %zu entries, at most %d are supported", s->axes_count,
                     ONYX_MAX_RANK);
      return ONYX_STATUS_UNSUPPORTED;
    }
    if (s->axes_count > 0) memcpy(axes, s->axes, s->axes_count * sizeof axes[0]);
    *out_count = s->axes_count;
    *out_present = s->axes_present;
    return ONYX_STATUS_OK;
  }
  *out_present = input_count > 1 && inputs[1] != NULL;
  *out_count = 0;
  if (!*out_present) return ONYX_STATUS_OK;
  return onyx__cpu_read_int_list(ctx, inputs[1], 1, "axes", axes, ONYX_MAX_RANK, out_count);
}

static onyx_status cpu_unsqueeze_compute(void *state, onyx_compute_ctx *ctx,
                                         const onyx_tensor *const *inputs, size_t input_count) {
  const cpu_axes_state *s = state;
  onyx_status st = onyx__cpu_check_inputs(ctx, inputs, input_count, s->base.opset < 13 ? 1 : 2);
  if (st == ONYX_STATUS_OK) st = cpu_check_data(ctx, inputs[0]);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *x = inputs[0];
  int64_t axes[ONYX_MAX_RANK];
  size_t count = 0;
  bool present;
  st = cpu_axes_get(s, ctx, inputs, input_count, axes, &count, &present);
  if (st != ONYX_STATUS_OK) return st;

  /* Axes index the output, whose rank is the input's plus one per axis. */
  const int64_t out_rank = (int64_t)x->rank + (int64_t)count;
  if (out_rank > ONYX_MAX_RANK) {
    ctx->set_error(ctx, "output rank %lld exceeds %d", (long long)out_rank, ONYX_MAX_RANK);
    return ONYX_STATUS_UNSUPPORTED;
  }
  bool inserted[ONYX_MAX_RANK] = {false};
  for (size_t i = 0; i < count; ++i) {
    int64_t a;
    if (!onyx__cpu_normalize_axis(axes[i], out_rank, &a)) {
      ctx->set_error(ctx, "axis %lld is out of range for output rank %lld", (long long)axes[i],
                     (long long)out_rank);
      return ONYX_STATUS_INVALID_ARGUMENT;
    }
    if (inserted[a]) {
      ctx->set_error(ctx, "axis %lld appears twice in axes", (long long)axes[i]);
      return ONYX_STATUS_INVALID_ARGUMENT;
    }
    inserted[a] = true;
  }
  int64_t out_dims[ONYX_MAX_RANK];
  for (int64_t d = 0, j = 0; d < out_rank; ++d) out_dims[d] = inserted[d] ? 1 : x->dims[j++];
  return cpu_copy_as(&s->base, ctx, x, (uint32_t)out_rank, out_dims);
}

static onyx_status cpu_squeeze_compute(void *state, onyx_compute_ctx *ctx,
                                       const onyx_tensor *const *inputs, size_t input_count) {
  const cpu_axes_state *s = state;
  onyx_status st = onyx__cpu_check_inputs(ctx, inputs, input_count, 1);
  if (st == ONYX_STATUS_OK) st = cpu_check_data(ctx, inputs[0]);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *x = inputs[0];
  int64_t axes[ONYX_MAX_RANK];
  size_t count = 0;
  bool present;
  st = cpu_axes_get(s, ctx, inputs, input_count, axes, &count, &present);
  if (st != ONYX_STATUS_OK) return st;

  bool removed[ONYX_MAX_RANK] = {false};
  if (!present || count == 0) {
    /* No axes (or an empty list, as ONNX Runtime reads it): every size-1 dim goes. */
    for (uint32_t d = 0; d < x->rank; ++d) removed[d] = x->dims[d] == 1;
  }
  for (size_t i = 0; i < count; ++i) {
    int64_t a;
    if (!onyx__cpu_normalize_axis(axes[i], x->rank, &a)) {
      ctx->set_error(ctx, "axis %lld is out of range for input 0 %s", (long long)axes[i],
                     onyx__cpu_tensor_shape(x).s);
      return ONYX_STATUS_INVALID_ARGUMENT;
    }
    if (x->dims[a] != 1) {
      ctx->set_error(ctx, "axis %lld of input 0 %s is %lld, expected 1", (long long)axes[i],
                     onyx__cpu_tensor_shape(x).s, (long long)x->dims[a]);
      return ONYX_STATUS_INVALID_ARGUMENT;
    }
    if (removed[a]) {
      ctx->set_error(ctx, "axis %lld appears twice in axes", (long long)axes[i]);
      return ONYX_STATUS_INVALID_ARGUMENT;
    }
    removed[a] = true;
  }
  int64_t out_dims[ONYX_MAX_RANK];
  uint32_t r = 0;
  for (uint32_t d = 0; d < x->rank; ++d)
    if (!removed[d]) out_dims[r++] = x->dims[d];
  return cpu_copy_as(&s->base, ctx, x, r, out_dims);
}

CPU_KERNEL(onyx__cpu_k_unsqueeze_1, "Unsqueeze", 1, 12, cpu_axes_create, cpu_unsqueeze_compute)
CPU_KERNEL(onyx__cpu_k_unsqueeze_13, "Unsqueeze", 13, 0, cpu_axes_create, cpu_unsqueeze_compute)
CPU_KERNEL(onyx__cpu_k_squeeze_1, "Squeeze", 1, 12, cpu_axes_create, cpu_squeeze_compute)
CPU_KERNEL(onyx__cpu_k_squeeze_13, "Squeeze", 13, 0, cpu_axes_create, cpu_squeeze_compute)

/* ------------------------------------------------------------------ Shape */

typedef struct cpu_shape_state {
  onyx__cpu_node base;
  int64_t start, end; /* opset 15: a slice of the dims */
  bool end_present;
} cpu_shape_state;

static onyx_status cpu_shape_create(void *provider_state, const onyx_node_info *node,
                                    void **out_state, char *err, size_t err_cap) {
  cpu_shape_state *s = onyx__cpu_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  onyx_status st = ONYX_STATUS_OK;
  if (node->opset >= 15) {
    st = onyx__cpu_attr_int(node, "start", 0, &s->start, err, err_cap);
    if (st == ONYX_STATUS_OK) st = onyx__cpu_attr_int(node, "end", 0, &s->end, err, err_cap);
    s->end_present = onyx__cpu_attr_find(node, "end") != NULL;
  }
  if (st != ONYX_STATUS_OK) {
    onyx__cpu_destroy(s);
    return st;
  }
  *out_state = s;
  return ONYX_STATUS_OK;
}

static onyx_status cpu_shape_compute(void *state, onyx_compute_ctx *ctx,
                                     const onyx_tensor *const *inputs, size_t input_count) {
  const cpu_shape_state *s = state;
  onyx_status st = onyx__cpu_check_inputs(ctx, inputs, input_count, 1);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *x = inputs[0];
  /* Negative start/end count from the back; both clamp to [0, rank]; an empty
   * slice is a valid, empty result. */
  const int64_t r = x->rank;
  int64_t start = s->start, end = s->end_present ? s->end : r;
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = start < 0 ? 0 : start > r ? r : start;
  end = end < 0 ? 0 : end > r ? r : end;
  int64_t len = end > start ? end - start : 0;

  onyx_tensor *y = NULL;
  st = onyx__cpu_alloc_output(&s->base, ctx, ONYX_DTYPE_INT64, 1, &len, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  for (int64_t i = 0; i < len; ++i) ((int64_t *)y->data)[i] = x->dims[start + i];
  return ONYX_STATUS_OK;
}

/* Shape reads only the geometry, so it accepts every dtype, strings included. */
#define CPU_SHAPE_KERNEL(sym, SINCE, UNTIL)                                                        \
  const onyx_kernel_table sym = {                                                                  \
      .struct_size = sizeof(onyx_kernel_table),                                                    \
      .version = ONYX_ABI_VERSION,                                                                 \
      .domain = "",                                                                                \
      .op_type = "Shape",                                                                          \
      .since_opset = SINCE,                                                                        \
      .until_opset = UNTIL,                                                                        \
      .type_input = 0,                                                                             \
      .type_mask = 0,                                                                              \
      .create = cpu_shape_create,                                                                  \
      .destroy = onyx__cpu_destroy,                                                                \
      .compute = cpu_shape_compute,                                                                \
  };
CPU_SHAPE_KERNEL(onyx__cpu_k_shape_1, 1, 14)
CPU_SHAPE_KERNEL(onyx__cpu_k_shape_15, 15, 0)

/* ------------------------------------------------------------------ Constant */

typedef struct cpu_constant_state {
  onyx__cpu_node base;
  onyx_tensor value; /* data points into the attribute or at `scalar` */
  union {
    float f;
    int64_t i;
  } scalar;
} cpu_constant_state;

/* Fills `value` from whichever of the value attributes the node has. */
static onyx_status cpu_constant_parse(const onyx_node_info *node, cpu_constant_state *s, char *err,
                                      size_t err_cap) {
  static const char *const unsupported[] = {"sparse_value", "value_string", "value_strings"};
  for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; ++i)
    if (onyx__cpu_attr_find(node, unsupported[i]) != NULL)
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_UNSUPPORTED,
                            "Constant: attribute '%s' is not supported by the cpu provider",
                            unsupported[i]);
  static const char *const names[] = {"value", "value_float", "value_floats", "value_int",
                                      "value_ints"};
  static const uint32_t types[] = {ONYX_ATTR_TENSOR, ONYX_ATTR_FLOAT, ONYX_ATTR_FLOATS,
                                   ONYX_ATTR_INT, ONYX_ATTR_INTS};
  const onyx_attr *found = NULL;
  size_t which = 0;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i) {
    const onyx_attr *a = onyx__cpu_attr_find(node, names[i]);
    if (a == NULL) continue;
    if (found != NULL)
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                            "Constant: both '%s' and '%s' are set; exactly one is allowed",
                            found->name, a->name);
    if (a->type != types[i])
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                            "Constant: attribute '%s' has the wrong type", a->name);
    found = a;
    which = i;
  }
  if (found == NULL)
    return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "Constant: no value attribute");

  onyx_tensor *v = s == NULL ? NULL : &s->value;
  onyx_tensor probe;
  if (v == NULL) v = &probe; /* supports() parses without keeping anything */
  memset(v, 0, sizeof *v);
  v->device = ONYX_DEVICE_HOST;
  switch (which) {
  case 0: {
    const onyx_tensor *t = found->tensor;
    if (t == NULL)
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                            "Constant: attribute 'value' has no tensor");
    if (onyx_dtype_size(t->dtype) == 0)
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_UNSUPPORTED,
                            "Constant: value of dtype %s is not supported",
                            onyx__cpu_dtype_name(t->dtype));
    if (t->rank > ONYX_MAX_RANK || (t->data == NULL && onyx_tensor_numel(t) != 0))
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                            "Constant: attribute 'value' is malformed");
    *v = *t;
    break;
  }
  case 1:
  case 3:
    v->dtype = which == 1 ? ONYX_DTYPE_FLOAT32 : ONYX_DTYPE_INT64;
    v->rank = 0;
    if (s != NULL) {
      if (which == 1)
        s->scalar.f = found->f;
      else
        s->scalar.i = found->i;
      v->data = &s->scalar;
    }
    break;
  default:
    v->dtype = which == 2 ? ONYX_DTYPE_FLOAT32 : ONYX_DTYPE_INT64;
    v->rank = 1;
    v->dims[0] = (int64_t)found->count;
    /* A view's data is not const in ABI v1; this one is only ever read. */
    v->data = which == 2 ? (void *)(uintptr_t)found->floats : (void *)(uintptr_t)found->ints;
    if (found->count > 0 && v->data == NULL)
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                            "Constant: attribute '%s' has no data", found->name);
    break;
  }
  return ONYX_STATUS_OK;
}

/* Declines only what this provider cannot do; a malformed node is create()'s
 * error to report, whichever provider would get it. */
static bool cpu_constant_supports(const onyx_node_info *node, char *reason, size_t reason_cap) {
  return cpu_constant_parse(node, NULL, reason, reason_cap) != ONYX_STATUS_UNSUPPORTED;
}

static onyx_status cpu_constant_create(void *provider_state, const onyx_node_info *node,
                                       void **out_state, char *err, size_t err_cap) {
  cpu_constant_state *s = onyx__cpu_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  onyx_status st = cpu_constant_parse(node, s, err, err_cap);
  if (st != ONYX_STATUS_OK) {
    onyx__cpu_destroy(s);
    return st;
  }
  *out_state = s;
  return ONYX_STATUS_OK;
}

/* The attribute stays valid until destroy, so each run copies straight from it. */
static onyx_status cpu_constant_compute(void *state, onyx_compute_ctx *ctx,
                                        const onyx_tensor *const *inputs, size_t input_count) {
  (void)inputs;
  (void)input_count;
  const cpu_constant_state *s = state;
  return cpu_copy_as(&s->base, ctx, &s->value, s->value.rank, s->value.dims);
}

const onyx_kernel_table onyx__cpu_k_constant = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "",
    .op_type = "Constant",
    .since_opset = 1,
    .until_opset = 0,
    .type_input = 0,
    .type_mask = 0, /* no inputs to constrain */
    .supports = cpu_constant_supports,
    .create = cpu_constant_create,
    .destroy = onyx__cpu_destroy,
    .compute = cpu_constant_compute,
};
