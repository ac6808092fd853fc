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
#include <math.h>
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

#define CPU_KERNEL(sym, NAME, SINCE, UNTIL, CREATE, COMPUTE, INFER)                                \
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
      .infer = INFER,                                                                              \
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
CPU_KERNEL(onyx__cpu_k_identity, "Identity", 1, 0, onyx__cpu_create_plain, cpu_identity_compute,
           onyx__cpu_infer_same)

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

/* The target shape of a Reshape of x, for compute and infer. */
static onyx_status cpu_reshape_dims(const cpu_reshape_state *s, const onyx_tensor *const *inputs,
                                    size_t input_count, uint32_t *out_rank, int64_t *shape,
                                    char *err, size_t err_cap) {
  const onyx_tensor *x = inputs[0];
  size_t rank = 0;
  if (s->base.opset < 5) {
    if (s->shape_attr_count > ONYX_MAX_RANK)
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_UNSUPPORTED, "target rank %zu exceeds %d",
                            s->shape_attr_count, ONYX_MAX_RANK);
    rank = s->shape_attr_count;
    if (rank > 0) memcpy(shape, s->shape_attr, rank * sizeof shape[0]);
  } else {
    if (input_count < 2 || inputs[1] == NULL)
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                            "input 1 (shape) is required");
    if (!onyx__cpu_has_values(inputs[1]))
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_UNSUPPORTED, "input 1 (shape) is not known");
    onyx_status st =
        onyx__cpu_int_list(inputs[1], 1, "shape", shape, ONYX_MAX_RANK, &rank, err, err_cap);
    if (st != ONYX_STATUS_OK) return st;
  }

  /* 0 copies the input's dim (unless allowzero asks for a literal 0); one -1 is
   * inferred from the element count. */
  int infer = -1;
  bool has_zero = false;
  for (size_t i = 0; i < rank; ++i) {
    if (shape[i] == -1) {
      if (infer >= 0)
        return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                              "input 1 (shape) has -1 at both %d and %zu; at most one is allowed",
                              infer, i);
      infer = (int)i;
    } else if (shape[i] < -1) {
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                            "input 1 (shape) value %lld at %zu is negative", (long long)shape[i],
                            i);
    } else if (shape[i] == 0) {
      has_zero = true;
      if (!s->allowzero) {
        if (i >= x->rank)
          return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                                "input 1 (shape) has 0 at %zu but input 0 %s has no dim there", i,
                                onyx__cpu_tensor_shape(x).s);
        shape[i] = x->dims[i];
      }
    }
  }
  if (s->allowzero && has_zero && infer >= 0)
    return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "input 1 (shape) has both 0 and -1 with allowzero = 1");
  int64_t numel = onyx_tensor_numel(x), known = 1;
  for (size_t i = 0; i < rank; ++i) {
    if ((int)i == infer) continue;
    if (__builtin_mul_overflow(known, shape[i], &known))
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                            "input 1 (shape) %s overflows",
                            onyx__cpu_shape_str((uint32_t)rank, shape).s);
  }
  if (infer >= 0) {
    if (known == 0 || numel % known != 0)
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                            "cannot infer the -1 in shape %s from %lld elements (input 0 %s)",
                            onyx__cpu_shape_str((uint32_t)rank, shape).s, (long long)numel,
                            onyx__cpu_tensor_shape(x).s);
    shape[infer] = numel / known;
    known = numel;
  }
  if (known != numel)
    return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "input 0 %s has %lld elements, shape %s needs %lld",
                          onyx__cpu_tensor_shape(x).s, (long long)numel,
                          onyx__cpu_shape_str((uint32_t)rank, shape).s, (long long)known);
  *out_rank = (uint32_t)rank;
  return ONYX_STATUS_OK;
}

static onyx_status cpu_reshape_compute(void *state, onyx_compute_ctx *ctx,
                                       const onyx_tensor *const *inputs, size_t input_count) {
  const cpu_reshape_state *s = state;
  onyx_status st = onyx__cpu_check_inputs(ctx, inputs, input_count, s->base.opset < 5 ? 1 : 2);
  if (st == ONYX_STATUS_OK) st = cpu_check_data(ctx, inputs[0]);
  if (st != ONYX_STATUS_OK) return st;
  int64_t shape[ONYX_MAX_RANK];
  uint32_t rank = 0;
  char why[256];
  st = cpu_reshape_dims(s, inputs, input_count, &rank, shape, why, sizeof why);
  if (st != ONYX_STATUS_OK) {
    ctx->set_error(ctx, "%s", why);
    return st;
  }
  return cpu_copy_as(&s->base, ctx, inputs[0], rank, shape);
}

static onyx_status cpu_reshape_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                     onyx_tensor *outputs, size_t output_count) {
  const onyx_tensor *in[2];
  if (input_count < 1 || input_count > 2 || !onyx__cpu_infer_inputs(inputs, input_count, in, 2) ||
      in[0] == NULL)
    return ONYX_STATUS_INVALID_ARGUMENT;
  int64_t shape[ONYX_MAX_RANK];
  uint32_t rank = 0;
  char why[ONYX__CPU_REASON_CAP] = "";
  onyx_status st = cpu_reshape_dims(state, in, input_count, &rank, shape, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cpu_reason(state, st, why);
  onyx__cpu_infer_out(outputs, output_count, 0, in[0]->dtype, rank, shape);
  return st;
}

CPU_KERNEL(onyx__cpu_k_reshape_1, "Reshape", 1, 4, cpu_reshape_create, cpu_reshape_compute,
           cpu_reshape_infer)
CPU_KERNEL(onyx__cpu_k_reshape_5, "Reshape", 5, 0, cpu_reshape_create, cpu_reshape_compute,
           cpu_reshape_infer)

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

/* The permutation of a Transpose of x (perm, or the dims reversed). */
static onyx_status cpu_transpose_perm(const cpu_transpose_state *s, const onyx_tensor *x,
                                      int64_t *perm, char *err, size_t err_cap) {
  const uint32_t r = x->rank;
  if (s->perm == NULL) {
    for (uint32_t d = 0; d < r; ++d) perm[d] = r - 1 - d;
    return ONYX_STATUS_OK;
  }
  bool seen[ONYX_MAX_RANK] = {false};
  bool ok = s->perm_count == r;
  for (uint32_t d = 0; ok && d < r; ++d) {
    int64_t p = s->perm[d];
    if (p < 0) p += r; /* negative entries are not in the spec; numpy accepts them */
    ok = p >= 0 && p < (int64_t)r && !seen[p];
    if (ok) seen[p] = true;
    perm[d] = p;
  }
  if (ok) return ONYX_STATUS_OK;
  uint32_t shown = (uint32_t)(s->perm_count < ONYX_MAX_RANK ? s->perm_count : ONYX_MAX_RANK);
  return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                        "attribute perm %s is not a permutation of the %u dims of input 0 %s",
                        onyx__cpu_shape_str(shown, s->perm).s, r, onyx__cpu_tensor_shape(x).s);
}

static onyx_status cpu_transpose_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                       onyx_tensor *outputs, size_t output_count) {
  if (input_count < 1 || inputs[0].rank > ONYX_MAX_RANK) return ONYX_STATUS_INVALID_ARGUMENT;
  int64_t perm[ONYX_MAX_RANK], dims[ONYX_MAX_RANK];
  char why[ONYX__CPU_REASON_CAP] = "";
  onyx_status st = cpu_transpose_perm(state, &inputs[0], perm, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cpu_reason(state, st, why);
  for (uint32_t d = 0; d < inputs[0].rank; ++d) dims[d] = inputs[0].dims[perm[d]];
  onyx__cpu_infer_out(outputs, output_count, 0, inputs[0].dtype, inputs[0].rank, dims);
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

/* ---- blocked route: the input's contiguous axis is not the output's last */

enum { CPU_TILE = 32 }; /* a 32×32 tile of each side stays in L1 (8 KiB of floats) */

/* The nest of a transpose whose output axis q reads the input contiguously (stride
 * 1) while its last axis gathers: each 2-D slice (q, last) is copied in tiles, so
 * that both the reads and the writes run along cache lines. Element-at-a-time
 * gathering instead reads a new line per element: 0.3 GB/s on a 544 MB embedding. */
typedef struct cpu_tposed {
  const unsigned char *src;
  unsigned char *dst;
  size_t esize;
  uint32_t n, q;
  int64_t dims[ONYX_MAX_RANK], stride[ONYX_MAX_RANK], out_stride[ONYX_MAX_RANK];
  int64_t outer;   /* index combinations of the other axes */
  int64_t i_tiles; /* tiles along axis q */
} cpu_tposed;

#define CPU_TILE_COPY(T)                                                                           \
  static void cpu_tile_copy_##T(T *restrict dst, int64_t dst_pitch, const T *restrict src,         \
                                int64_t src_pitch, int64_t rows, int64_t cols) {                   \
    for (int64_t i = 0; i < rows; ++i)                                                             \
      for (int64_t j = 0; j < cols; ++j) dst[i * dst_pitch + j] = src[j * src_pitch + i];          \
  }
CPU_TILE_COPY(uint8_t)
CPU_TILE_COPY(uint16_t)
CPU_TILE_COPY(uint32_t)
CPU_TILE_COPY(uint64_t)

/* Tasks [begin, end) of (outer index, row of tiles along q). */
static void cpu_tposed_slice(void *arg, int64_t begin, int64_t end) {
  const cpu_tposed *t = arg;
  const int64_t last = t->n - 1, rows = t->dims[t->q], cols = t->dims[last];
  for (int64_t task = begin; task < end; ++task) {
    int64_t o = task / t->i_tiles, i0 = task % t->i_tiles * CPU_TILE;
    int64_t in_off = 0, out_off = 0;
    for (uint32_t d = t->n; d-- > 0;) { /* unravel o over the other axes */
      if (d == t->q || d == last) continue;
      int64_t k = o % t->dims[d];
      o /= t->dims[d];
      in_off += k * t->stride[d];
      out_off += k * t->out_stride[d];
    }
    in_off += i0; /* stride 1 along q */
    out_off += i0 * t->out_stride[t->q];
    int64_t h = rows - i0 < CPU_TILE ? rows - i0 : CPU_TILE;
    for (int64_t j0 = 0; j0 < cols; j0 += CPU_TILE) {
      int64_t w = cols - j0 < CPU_TILE ? cols - j0 : CPU_TILE;
      size_t si = (size_t)(in_off + j0 * t->stride[last]), so = (size_t)(out_off + j0);
      int64_t dp = t->out_stride[t->q], sp = t->stride[last];
      switch (t->esize) {
      case 1:
        cpu_tile_copy_uint8_t((uint8_t *)t->dst + so, dp, (const uint8_t *)t->src + si, sp, h, w);
        break;
      case 2:
        cpu_tile_copy_uint16_t((uint16_t *)t->dst + so, dp, (const uint16_t *)t->src + si, sp, h,
                               w);
        break;
      case 4:
        cpu_tile_copy_uint32_t((uint32_t *)t->dst + so, dp, (const uint32_t *)t->src + si, sp, h,
                               w);
        break;
      default:
        cpu_tile_copy_uint64_t((uint64_t *)t->dst + so, dp, (const uint64_t *)t->src + si, sp, h,
                               w);
        break;
      }
    }
  }
}

/* Runs the blocked route when the merged nest has an axis q < last with input
 * stride 1 and the element size is a power of two up to 8; false otherwise. */
static bool cpu_transpose_blocked(const onyx__cpu_node *node, const unsigned char *src,
                                  unsigned char *dst, size_t esize, uint32_t n, const int64_t *dims,
                                  const int64_t *stride) {
  if (n < 2 || stride[n - 1] == 1 || (esize != 1 && esize != 2 && esize != 4 && esize != 8))
    return false;
  cpu_tposed t = {.src = src, .dst = dst, .esize = esize, .n = n, .q = n};
  for (uint32_t d = 0; d + 1 < n; ++d)
    if (stride[d] == 1) t.q = d;
  if (t.q == n || dims[t.q] < CPU_TILE / 4 || dims[n - 1] < CPU_TILE / 4) return false;
  int64_t acc = 1;
  t.outer = 1;
  for (uint32_t d = n; d-- > 0;) {
    t.dims[d] = dims[d];
    t.stride[d] = stride[d];
    t.out_stride[d] = acc;
    acc *= dims[d];
    if (d != t.q && d != n - 1) t.outer *= dims[d];
  }
  t.i_tiles = (dims[t.q] + CPU_TILE - 1) / CPU_TILE;
  /* a task is a row of tiles: dims[last] · CPU_TILE elements */
  int64_t grain = ONYX__CPU_PARALLEL_GRAIN / (CPU_TILE * dims[n - 1]) + 1;
  onyx__cpu_parallel_range(node->provider, t.outer * t.i_tiles, grain, cpu_tposed_slice, &t);
  return true;
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
  char why[256];
  st = cpu_transpose_perm(s, x, perm, why, sizeof why);
  if (st != ONYX_STATUS_OK) {
    ctx->set_error(ctx, "%s", why);
    return st;
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
  if (cpu_transpose_blocked(&s->base, src, dst, esize, n, dims, stride)) return ONYX_STATUS_OK;
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

CPU_KERNEL(onyx__cpu_k_transpose, "Transpose", 1, 0, cpu_transpose_create, cpu_transpose_compute,
           cpu_transpose_infer)

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

/* The axis and output dims of a Concat, for compute and infer. */
static onyx_status cpu_concat_dims(const cpu_axis_state *s, const onyx_tensor *const *inputs,
                                   size_t input_count, int64_t *out_axis, int64_t *out_dims,
                                   char *err, size_t err_cap) {
  if (input_count == 0 || inputs[0] == NULL)
    return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT, "needs at least one input");
  const onyx_tensor *x0 = inputs[0];
  int64_t axis;
  if (x0->rank == 0 || !onyx__cpu_normalize_axis(s->axis, x0->rank, &axis))
    return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "axis %lld is out of range for input 0 %s", (long long)s->axis,
                          onyx__cpu_tensor_shape(x0).s);
  memcpy(out_dims, x0->dims, x0->rank * sizeof out_dims[0]);
  out_dims[axis] = 0;
  for (size_t i = 0; i < input_count; ++i) {
    const onyx_tensor *t = inputs[i];
    if (t == NULL)
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT, "input %zu is missing", i);
    if (t->dtype != x0->dtype)
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                            "input %zu has dtype %s, expected %s like input 0", i,
                            onyx__cpu_dtype_name(t->dtype), onyx__cpu_dtype_name(x0->dtype));
    bool ok = t->rank == x0->rank;
    for (uint32_t d = 0; ok && d < t->rank; ++d) ok = d == axis || t->dims[d] == x0->dims[d];
    if (!ok)
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                            "input %zu has shape %s, expected %s except along axis %lld", i,
                            onyx__cpu_tensor_shape(t).s, onyx__cpu_tensor_shape(x0).s,
                            (long long)axis);
    out_dims[axis] += t->dims[axis];
  }
  *out_axis = axis;
  return ONYX_STATUS_OK;
}

static onyx_status cpu_concat_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                    onyx_tensor *outputs, size_t output_count) {
  const onyx_tensor *in[ONYX__CPU_INFER_MAX_INPUTS];
  if (!onyx__cpu_infer_inputs(inputs, input_count, in, ONYX__CPU_INFER_MAX_INPUTS))
    return ONYX_STATUS_UNSUPPORTED;
  int64_t axis, dims[ONYX_MAX_RANK];
  char why[ONYX__CPU_REASON_CAP] = "";
  onyx_status st = cpu_concat_dims(state, in, input_count, &axis, dims, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cpu_reason(state, st, why);
  onyx__cpu_infer_out(outputs, output_count, 0, in[0]->dtype, in[0]->rank, dims);
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
  int64_t axis, out_dims[ONYX_MAX_RANK];
  char why[256];
  st = cpu_concat_dims(s, inputs, input_count, &axis, out_dims, why, sizeof why);
  if (st != ONYX_STATUS_OK) {
    ctx->set_error(ctx, "%s", why);
    return st;
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

CPU_KERNEL(onyx__cpu_k_concat, "Concat", 1, 0, cpu_concat_create, cpu_concat_compute,
           cpu_concat_infer)

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

/* Output geometry of a Gather (indices' values are not needed). */
static onyx_status cpu_gather_dims(const cpu_axis_state *s, const onyx_tensor *x,
                                   const onyx_tensor *idx, uint32_t *out_rank, int64_t *out_dims,
                                   char *err, size_t err_cap) {
  if (idx->dtype != ONYX_DTYPE_INT64 && idx->dtype != ONYX_DTYPE_INT32)
    return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "input 1 (indices) has dtype %s, expected int32 or int64",
                          onyx__cpu_dtype_name(idx->dtype));
  int64_t axis;
  if (x->rank == 0 || !onyx__cpu_normalize_axis(s->axis, x->rank, &axis))
    return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "axis %lld is out of range for input 0 %s", (long long)s->axis,
                          onyx__cpu_tensor_shape(x).s);
  const uint32_t ax = (uint32_t)axis;
  uint32_t r = x->rank - 1 + idx->rank;
  if (r > ONYX_MAX_RANK)
    return onyx__cpu_fail(err, err_cap, ONYX_STATUS_UNSUPPORTED, "output rank %u exceeds %d", r,
                          ONYX_MAX_RANK);
  r = 0;
  for (uint32_t d = 0; d < ax; ++d) out_dims[r++] = x->dims[d];
  for (uint32_t d = 0; d < idx->rank; ++d) out_dims[r++] = idx->dims[d];
  for (uint32_t d = ax + 1; d < x->rank; ++d) out_dims[r++] = x->dims[d];
  *out_rank = r;
  return ONYX_STATUS_OK;
}

static onyx_status cpu_gather_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                    onyx_tensor *outputs, size_t output_count) {
  if (input_count != 2) return ONYX_STATUS_INVALID_ARGUMENT;
  int64_t dims[ONYX_MAX_RANK];
  uint32_t rank = 0;
  char why[ONYX__CPU_REASON_CAP] = "";
  onyx_status st = cpu_gather_dims(state, &inputs[0], &inputs[1], &rank, dims, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cpu_reason(state, st, why);
  onyx__cpu_infer_out(outputs, output_count, 0, inputs[0].dtype, rank, dims);
  return st;
}

static onyx_status cpu_gather_compute(void *state, onyx_compute_ctx *ctx,
                                      const onyx_tensor *const *inputs, size_t input_count) {
  const cpu_axis_state *s = state;
  onyx_status st = onyx__cpu_check_inputs(ctx, inputs, input_count, 2);
  if (st == ONYX_STATUS_OK) st = cpu_check_data(ctx, inputs[0]);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *x = inputs[0], *idx = inputs[1];
  int64_t out_dims[ONYX_MAX_RANK];
  uint32_t out_rank = 0;
  char why[256];
  st = cpu_gather_dims(s, x, idx, &out_rank, out_dims, why, sizeof why);
  if (st != ONYX_STATUS_OK) {
    ctx->set_error(ctx, "%s", why);
    return st;
  }
  int64_t axis;
  onyx__cpu_normalize_axis(s->axis, x->rank, &axis);
  const uint32_t ax = (uint32_t)axis;
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

CPU_KERNEL(onyx__cpu_k_gather, "Gather", 1, 0, cpu_gather_create, cpu_gather_compute,
           cpu_gather_infer)

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
static onyx_status cpu_axes_get(const cpu_axes_state *s, const onyx_tensor *const *inputs,
                                size_t input_count, int64_t *axes, size_t *out_count,
                                bool *out_present, char *err, size_t err_cap) {
  if (s->base.opset < 13) {
    if (s->axes_count > ONYX_MAX_RANK)
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_UNSUPPORTED,
                            "attribute axes has %zu entries, at most %d are supported",
                            s->axes_count, ONYX_MAX_RANK);
    if (s->axes_count > 0) memcpy(axes, s->axes, s->axes_count * sizeof axes[0]);
    *out_count = s->axes_count;
    *out_present = s->axes_present;
    return ONYX_STATUS_OK;
  }
  *out_present = input_count > 1 && inputs[1] != NULL;
  *out_count = 0;
  if (!*out_present) return ONYX_STATUS_OK;
  if (!onyx__cpu_has_values(inputs[1]))
    return onyx__cpu_fail(err, err_cap, ONYX_STATUS_UNSUPPORTED, "input 1 (axes) is not known");
  return onyx__cpu_int_list(inputs[1], 1, "axes", axes, ONYX_MAX_RANK, out_count, err, err_cap);
}

/* Output dims of an Unsqueeze (is_squeeze false) or a Squeeze. */
static onyx_status cpu_axes_dims(const cpu_axes_state *s, bool is_squeeze,
                                 const onyx_tensor *const *inputs, size_t input_count,
                                 uint32_t *out_rank, int64_t *out_dims, char *err, size_t err_cap) {
  const onyx_tensor *x = inputs[0];
  int64_t axes[ONYX_MAX_RANK];
  size_t count = 0;
  bool present = false;
  onyx_status st = cpu_axes_get(s, inputs, input_count, axes, &count, &present, err, err_cap);
  if (st != ONYX_STATUS_OK) return st;
  if (!is_squeeze) {
    if (s->base.opset >= 13 && !present)
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                            "input 1 (axes) is required");
    /* Axes index the output, whose rank is the input's plus one per axis. */
    const int64_t r = (int64_t)x->rank + (int64_t)count;
    if (r > ONYX_MAX_RANK)
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_UNSUPPORTED, "output rank %lld exceeds %d",
                            (long long)r, ONYX_MAX_RANK);
    bool inserted[ONYX_MAX_RANK] = {false};
    for (size_t i = 0; i < count; ++i) {
      int64_t a;
      if (!onyx__cpu_normalize_axis(axes[i], r, &a))
        return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                              "axis %lld is out of range for output rank %lld", (long long)axes[i],
                              (long long)r);
      if (inserted[a])
        return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                              "axis %lld appears twice in axes", (long long)axes[i]);
      inserted[a] = true;
    }
    for (int64_t d = 0, j = 0; d < r; ++d) out_dims[d] = inserted[d] ? 1 : x->dims[j++];
    *out_rank = (uint32_t)r;
    return ONYX_STATUS_OK;
  }
  bool removed[ONYX_MAX_RANK] = {false};
  if (!present || count == 0) {
    /* No axes (or an empty list, as ONNX Runtime reads it): every size-1 dim goes. */
    for (uint32_t d = 0; d < x->rank; ++d) removed[d] = x->dims[d] == 1;
  }
  for (size_t i = 0; i < count; ++i) {
    int64_t a;
    if (!onyx__cpu_normalize_axis(axes[i], x->rank, &a))
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                            "axis %lld is out of range for input 0 %s", (long long)axes[i],
                            onyx__cpu_tensor_shape(x).s);
    if (x->dims[a] != 1)
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                            "axis %lld of input 0 %s is %lld, expected 1", (long long)axes[i],
                            onyx__cpu_tensor_shape(x).s, (long long)x->dims[a]);
    if (removed[a])
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                            "axis %lld appears twice in axes", (long long)axes[i]);
    removed[a] = true;
  }
  uint32_t r = 0;
  for (uint32_t d = 0; d < x->rank; ++d)
    if (!removed[d]) out_dims[r++] = x->dims[d];
  *out_rank = r;
  return ONYX_STATUS_OK;
}

static onyx_status cpu_axes_compute(bool is_squeeze, void *state, onyx_compute_ctx *ctx,
                                    const onyx_tensor *const *inputs, size_t input_count) {
  const cpu_axes_state *s = state;
  onyx_status st = onyx__cpu_check_inputs(ctx, inputs, input_count, 1);
  if (st == ONYX_STATUS_OK) st = cpu_check_data(ctx, inputs[0]);
  if (st != ONYX_STATUS_OK) return st;
  int64_t dims[ONYX_MAX_RANK];
  uint32_t rank = 0;
  char why[256];
  st = cpu_axes_dims(s, is_squeeze, inputs, input_count, &rank, dims, why, sizeof why);
  if (st != ONYX_STATUS_OK) {
    ctx->set_error(ctx, "%s", why);
    return st;
  }
  return cpu_copy_as(&s->base, ctx, inputs[0], rank, dims);
}

static onyx_status cpu_axes_infer(bool is_squeeze, void *state, const onyx_tensor *inputs,
                                  size_t input_count, onyx_tensor *outputs, size_t output_count) {
  const onyx_tensor *in[2];
  if (input_count < 1 || input_count > 2 || !onyx__cpu_infer_inputs(inputs, input_count, in, 2) ||
      in[0] == NULL)
    return ONYX_STATUS_INVALID_ARGUMENT;
  int64_t dims[ONYX_MAX_RANK];
  uint32_t rank = 0;
  char why[ONYX__CPU_REASON_CAP] = "";
  onyx_status st = cpu_axes_dims(state, is_squeeze, in, input_count, &rank, dims, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cpu_reason(state, st, why);
  onyx__cpu_infer_out(outputs, output_count, 0, in[0]->dtype, rank, dims);
  return st;
}

static onyx_status cpu_unsqueeze_compute(void *state, onyx_compute_ctx *ctx,
                                         const onyx_tensor *const *inputs, size_t input_count) {
  return cpu_axes_compute(false, state, ctx, inputs, input_count);
}
static onyx_status cpu_squeeze_compute(void *state, onyx_compute_ctx *ctx,
                                       const onyx_tensor *const *inputs, size_t input_count) {
  return cpu_axes_compute(true, state, ctx, inputs, input_count);
}
static onyx_status cpu_unsqueeze_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                       onyx_tensor *outputs, size_t output_count) {
  return cpu_axes_infer(false, state, inputs, input_count, outputs, output_count);
}
static onyx_status cpu_squeeze_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                     onyx_tensor *outputs, size_t output_count) {
  return cpu_axes_infer(true, state, inputs, input_count, outputs, output_count);
}

CPU_KERNEL(onyx__cpu_k_unsqueeze_1, "Unsqueeze", 1, 12, cpu_axes_create, cpu_unsqueeze_compute,
           cpu_unsqueeze_infer)
CPU_KERNEL(onyx__cpu_k_unsqueeze_13, "Unsqueeze", 13, 0, cpu_axes_create, cpu_unsqueeze_compute,
           cpu_unsqueeze_infer)
CPU_KERNEL(onyx__cpu_k_squeeze_1, "Squeeze", 1, 12, cpu_axes_create, cpu_squeeze_compute,
           cpu_squeeze_infer)
CPU_KERNEL(onyx__cpu_k_squeeze_13, "Squeeze", 13, 0, cpu_axes_create, cpu_squeeze_compute,
           cpu_squeeze_infer)

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

/* The slice [start, start + len) of x's dims that Shape returns. Negative
 * start/end count from the back; both clamp to [0, rank]; an empty slice is a
 * valid, empty result. */
static void cpu_shape_range(const cpu_shape_state *s, const onyx_tensor *x, int64_t *out_start,
                            int64_t *out_len) {
  const int64_t r = x->rank;
  int64_t start = s->start, end = s->end_present ? s->end : r;
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = start < 0 ? 0 : start > r ? r : start;
  end = end < 0 ? 0 : end > r ? r : end;
  *out_start = start;
  *out_len = end > start ? end - start : 0;
}

/* Shape and Size read geometry alone (geometry_inputs): their input may lie in
 * device memory, so it is checked for presence only. */
static onyx_status cpu_geometry_input(onyx_compute_ctx *ctx, const onyx_tensor *const *inputs,
                                      size_t input_count) {
  if (input_count < 1 || inputs[0] == NULL || inputs[0]->rank > ONYX_MAX_RANK) {
    ctx->set_error(ctx, "input 0 is required (rank at most %d)", ONYX_MAX_RANK);
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  return ONYX_STATUS_OK;
}

static onyx_status cpu_shape_compute(void *state, onyx_compute_ctx *ctx,
                                     const onyx_tensor *const *inputs, size_t input_count) {
  const cpu_shape_state *s = state;
  onyx_status st = cpu_geometry_input(ctx, inputs, input_count);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *x = inputs[0];
  int64_t start, len;
  cpu_shape_range(s, x, &start, &len);
  onyx_tensor *y = NULL;
  st = onyx__cpu_alloc_output(&s->base, ctx, ONYX_DTYPE_INT64, 1, &len, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  for (int64_t i = 0; i < len; ++i) ((int64_t *)y->data)[i] = x->dims[start + i];
  return ONYX_STATUS_OK;
}

/* Shape knows its values from geometry alone: it hands them to the planner, so
 * shape arithmetic downstream (Gather, Concat, Reshape) can be planned. */
static onyx_status cpu_shape_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                   onyx_tensor *outputs, size_t output_count) {
  if (input_count < 1 || inputs[0].rank > ONYX_MAX_RANK) return ONYX_STATUS_INVALID_ARGUMENT;
  int64_t start, len;
  cpu_shape_range(state, &inputs[0], &start, &len);
  int64_t *vals = onyx__cpu_infer_out(outputs, output_count, 0, ONYX_DTYPE_INT64, 1, &len);
  if (vals != NULL) {
    for (int64_t i = 0; i < len; ++i) vals[i] = inputs[0].dims[start + i];
    outputs[0].data = vals;
  }
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
      .infer = cpu_shape_infer,                                                                    \
      .geometry_inputs = 1,                                                                        \
  };
CPU_SHAPE_KERNEL(onyx__cpu_k_shape_1, 1, 14)
CPU_SHAPE_KERNEL(onyx__cpu_k_shape_15, 15, 0)

/* ------------------------------------------------------------------ Flatten */

static onyx_status cpu_flatten_dims(const cpu_axis_state *s, const onyx_tensor *x, int64_t *dims,
                                    char *err, size_t err_cap) {
  int64_t axis = s->axis;
  if (axis < 0) axis += x->rank;
  if (axis < 0 || axis > (int64_t)x->rank)
    return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "axis %lld is out of range for input 0 %s", (long long)s->axis,
                          onyx__cpu_tensor_shape(x).s);
  dims[0] = onyx__cpu_dims_product(x->dims, 0, (uint32_t)axis);
  dims[1] = onyx__cpu_dims_product(x->dims, (uint32_t)axis, x->rank);
  return ONYX_STATUS_OK;
}

static onyx_status cpu_flatten_compute(void *state, onyx_compute_ctx *ctx,
                                       const onyx_tensor *const *inputs, size_t input_count) {
  const cpu_axis_state *s = state;
  onyx_status st = onyx__cpu_check_inputs(ctx, inputs, input_count, 1);
  if (st == ONYX_STATUS_OK) st = cpu_check_data(ctx, inputs[0]);
  if (st != ONYX_STATUS_OK) return st;
  int64_t dims[2];
  char why[256];
  st = cpu_flatten_dims(s, inputs[0], dims, why, sizeof why);
  if (st != ONYX_STATUS_OK) {
    ctx->set_error(ctx, "%s", why);
    return st;
  }
  return cpu_copy_as(&s->base, ctx, inputs[0], 2, dims);
}

static onyx_status cpu_flatten_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                     onyx_tensor *outputs, size_t output_count) {
  if (input_count < 1 || inputs[0].rank > ONYX_MAX_RANK) return ONYX_STATUS_INVALID_ARGUMENT;
  int64_t dims[2];
  char why[ONYX__CPU_REASON_CAP] = "";
  onyx_status st = cpu_flatten_dims(state, &inputs[0], dims, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cpu_reason(state, st, why);
  onyx__cpu_infer_out(outputs, output_count, 0, inputs[0].dtype, 2, dims);
  return st;
}

static onyx_status cpu_flatten_create(void *provider_state, const onyx_node_info *node,
                                      void **out_state, char *err, size_t err_cap) {
  cpu_axis_state *s = onyx__cpu_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  onyx_status st = onyx__cpu_attr_int(node, "axis", 1, &s->axis, err, err_cap);
  if (st != ONYX_STATUS_OK) {
    onyx__cpu_destroy(s);
    return st;
  }
  *out_state = s;
  return ONYX_STATUS_OK;
}

CPU_KERNEL(onyx__cpu_k_flatten, "Flatten", 1, 0, cpu_flatten_create, cpu_flatten_compute,
           cpu_flatten_infer)

/* ------------------------------------------------------------------ Size */

static onyx_status cpu_size_compute(void *state, onyx_compute_ctx *ctx,
                                    const onyx_tensor *const *inputs, size_t input_count) {
  onyx_status st = cpu_geometry_input(ctx, inputs, input_count);
  if (st != ONYX_STATUS_OK) return st;
  onyx_tensor *y = NULL;
  st = onyx__cpu_alloc_output(state, ctx, ONYX_DTYPE_INT64, 0, NULL, &y);
  if (st == ONYX_STATUS_OK && y != NULL) *(int64_t *)y->data = onyx_tensor_numel(inputs[0]);
  return st;
}

/* Like Shape, Size knows its value from geometry alone. */
static onyx_status cpu_size_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                  onyx_tensor *outputs, size_t output_count) {
  (void)state;
  if (input_count < 1 || inputs[0].rank > ONYX_MAX_RANK) return ONYX_STATUS_INVALID_ARGUMENT;
  int64_t *vals = onyx__cpu_infer_out(outputs, output_count, 0, ONYX_DTYPE_INT64, 0, NULL);
  if (vals != NULL) {
    *vals = onyx_tensor_numel(&inputs[0]);
    outputs[0].data = vals;
  }
  return ONYX_STATUS_OK;
}

const onyx_kernel_table onyx__cpu_k_size = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "",
    .op_type = "Size",
    .since_opset = 1,
    .until_opset = 0,
    .type_input = 0,
    .type_mask = 0, /* reads only the geometry */
    .create = onyx__cpu_create_plain,
    .destroy = onyx__cpu_destroy,
    .compute = cpu_size_compute,
    .infer = cpu_size_infer,
    .geometry_inputs = 1,
};

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

/* The attribute's geometry, and its values when they are a small integer tensor. */
static onyx_status cpu_constant_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                      onyx_tensor *outputs, size_t output_count) {
  (void)inputs;
  (void)input_count;
  const cpu_constant_state *s = state;
  const onyx_tensor *v = &s->value;
  void *vals = onyx__cpu_infer_out(outputs, output_count, 0, v->dtype, v->rank, v->dims);
  if (vals != NULL && (v->data != NULL || onyx_tensor_numel(v) == 0)) {
    size_t bytes = (size_t)onyx_tensor_numel(v) * onyx_dtype_size(v->dtype);
    if (bytes > 0) memcpy(vals, v->data, bytes);
    outputs[0].data = vals;
  }
  return ONYX_STATUS_OK;
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
    .infer = cpu_constant_infer,
};

/* ------------------------------------------------------------------ ConstantOfShape */

typedef struct cpu_cos_state {
  onyx__cpu_node base;
  uint32_t dtype;
  unsigned char value[8]; /* one element of dtype */
} cpu_cos_state;

static onyx_status cpu_cos_create(void *provider_state, const onyx_node_info *node,
                                  void **out_state, char *err, size_t err_cap) {
  cpu_cos_state *s = onyx__cpu_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  s->dtype = ONYX_DTYPE_FLOAT32; /* the default value is a float32 zero */
  const onyx_attr *a = onyx__cpu_attr_find(node, "value");
  onyx_status st = ONYX_STATUS_OK;
  if (a != NULL) {
    const onyx_tensor *t = a->type == ONYX_ATTR_TENSOR ? a->tensor : NULL;
    if (t == NULL || onyx_tensor_numel(t) != 1 || t->data == NULL || onyx_dtype_size(t->dtype) == 0)
      st = onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "ConstantOfShape: attribute 'value' must be a one-element tensor of a "
                          "fixed-size dtype");
    else {
      s->dtype = t->dtype;
      memcpy(s->value, t->data, onyx_dtype_size(t->dtype));
    }
  }
  if (st != ONYX_STATUS_OK) {
    onyx__cpu_destroy(s);
    return st;
  }
  *out_state = s;
  return ONYX_STATUS_OK;
}

static onyx_status cpu_cos_dims(const onyx_tensor *shape_t, uint32_t *rank, int64_t *dims,
                                char *err, size_t err_cap) {
  if (!onyx__cpu_has_values(shape_t))
    return onyx__cpu_fail(err, err_cap, ONYX_STATUS_UNSUPPORTED, "input 0 (shape) is not known");
  size_t n = 0;
  onyx_status st = onyx__cpu_int_list(shape_t, 0, "shape", dims, ONYX_MAX_RANK, &n, err, err_cap);
  if (st != ONYX_STATUS_OK) return st;
  int64_t numel;
  if (!onyx__cpu_checked_numel((uint32_t)n, dims, &numel))
    return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "input 0 (shape) %s has a negative dim or overflows",
                          onyx__cpu_shape_str((uint32_t)n, dims).s);
  *rank = (uint32_t)n;
  return ONYX_STATUS_OK;
}

static onyx_status cpu_cos_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                 onyx_tensor *outputs, size_t output_count) {
  const cpu_cos_state *s = state;
  if (input_count != 1) return ONYX_STATUS_INVALID_ARGUMENT;
  uint32_t rank = 0;
  int64_t dims[ONYX_MAX_RANK];
  char why[ONYX__CPU_REASON_CAP] = "";
  onyx_status st = cpu_cos_dims(&inputs[0], &rank, dims, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cpu_reason(state, st, why);
  unsigned char *vals = onyx__cpu_infer_out(outputs, output_count, 0, s->dtype, rank, dims);
  if (vals != NULL) {
    size_t es = onyx_dtype_size(s->dtype);
    for (int64_t i = 0; i < onyx_tensor_numel(&outputs[0]); ++i)
      memcpy(vals + (size_t)i * es, s->value, es);
    outputs[0].data = vals;
  }
  return ONYX_STATUS_OK;
}

static onyx_status cpu_cos_compute(void *state, onyx_compute_ctx *ctx,
                                   const onyx_tensor *const *inputs, size_t input_count) {
  const cpu_cos_state *s = state;
  onyx_status st = onyx__cpu_check_inputs(ctx, inputs, input_count, 1);
  if (st != ONYX_STATUS_OK) return st;
  uint32_t rank = 0;
  int64_t dims[ONYX_MAX_RANK];
  char why[256];
  st = cpu_cos_dims(inputs[0], &rank, dims, why, sizeof why);
  if (st != ONYX_STATUS_OK) {
    ctx->set_error(ctx, "%s", why);
    return st;
  }
  onyx_tensor *y = NULL;
  st = onyx__cpu_alloc_output(&s->base, ctx, s->dtype, rank, dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  const size_t es = onyx_dtype_size(s->dtype);
  const int64_t n = onyx_tensor_numel(y);
  unsigned char *dst = y->data;
  bool zero = true;
  for (size_t b = 0; b < es; ++b) zero = zero && s->value[b] == 0;
  if (zero && n > 0) {
    memset(dst, 0, (size_t)n * es);
    return ONYX_STATUS_OK;
  }
  for (int64_t i = 0; i < n; ++i) memcpy(dst + (size_t)i * es, s->value, es);
  return ONYX_STATUS_OK;
}

/* The type constraint is on the shape input (int64). */
const onyx_kernel_table onyx__cpu_k_constant_of_shape = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "",
    .op_type = "ConstantOfShape",
    .since_opset = 9,
    .until_opset = 0,
    .type_input = 0,
    .type_mask = ONYX_DTYPE_BIT(ONYX_DTYPE_INT64),
    .create = cpu_cos_create,
    .destroy = onyx__cpu_destroy,
    .compute = cpu_cos_compute,
    .infer = cpu_cos_infer,
};

/* ------------------------------------------------------------------ Range */

#define CPU_RANGE_TYPES                                                                            \
  (ONYX__CPU_FLOAT_TYPES | ONYX_DTYPE_BIT(ONYX_DTYPE_INT16) | ONYX_DTYPE_BIT(ONYX_DTYPE_INT32) |   \
   ONYX_DTYPE_BIT(ONYX_DTYPE_INT64))

/* The one element of an int16/int32/int64 tensor. */
static int64_t cpu_scalar_i64(uint32_t t, const void *p) {
  return t == ONYX_DTYPE_INT16   ? ((const int16_t *)p)[0]
         : t == ONYX_DTYPE_INT32 ? ((const int32_t *)p)[0]
                                 : ((const int64_t *)p)[0];
}

/* max(ceil((limit − start) / delta), 0): exactly for integers, in double for floats
 * (from the difference taken in the inputs' type, as ONNX Runtime does). */
static onyx_status cpu_range_count(const onyx_tensor *const *in, int64_t *out_n, char *err,
                                   size_t err_cap) {
  for (int k = 0; k < 3; ++k) {
    if (in[k] == NULL || in[k]->dtype != in[0]->dtype || onyx_tensor_numel(in[k]) != 1)
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                            "inputs start, limit and delta must be scalars of one dtype");
    if (!onyx__cpu_has_values(in[k]))
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_UNSUPPORTED, "input %d is not known", k);
  }
  const uint32_t t = in[0]->dtype;
  int64_t n;
  if (onyx__cpu_dtype_in(t, ONYX__CPU_FLOAT_TYPES)) {
    double start = onyx__cpu_load_f64(t, in[0]->data, 0);
    double limit = onyx__cpu_load_f64(t, in[1]->data, 0);
    double delta = onyx__cpu_load_f64(t, in[2]->data, 0);
    double diff = t == ONYX_DTYPE_FLOAT64 ? limit - start : (double)(float)(limit - start);
    double c = ceil(diff / delta);
    if (delta == 0 || !(c < 4e18))
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                            "range of %g to %g by %g has no finite length", start, limit, delta);
    n = c > 0 ? (int64_t)c : 0;
  } else {
    const int64_t s0 = cpu_scalar_i64(t, in[0]->data), l0 = cpu_scalar_i64(t, in[1]->data);
    const int64_t d0 = cpu_scalar_i64(t, in[2]->data);
    if (d0 == 0) return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT, "delta is 0");
    int64_t diff;
    if (__builtin_sub_overflow(l0, s0, &diff) || d0 == INT64_MIN)
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                            "range of %lld to %lld overflows", (long long)s0, (long long)l0);
    if (d0 > 0)
      n = diff > 0 ? (diff - 1) / d0 + 1 : 0;
    else
      n = diff < 0 ? (-(diff + 1)) / -d0 + 1 : 0;
  }
  *out_n = n;
  return ONYX_STATUS_OK;
}

static onyx_status cpu_range_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                   onyx_tensor *outputs, size_t output_count) {
  (void)state;
  const onyx_tensor *in[3];
  if (input_count != 3 || !onyx__cpu_infer_inputs(inputs, input_count, in, 3))
    return ONYX_STATUS_INVALID_ARGUMENT;
  int64_t n;
  char why[ONYX__CPU_REASON_CAP] = "";
  onyx_status st = cpu_range_count(in, &n, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cpu_reason(state, st, why);
  onyx__cpu_infer_out(outputs, output_count, 0, in[0]->dtype, 1, &n);
  return st;
}

static onyx_status cpu_range_compute(void *state, onyx_compute_ctx *ctx,
                                     const onyx_tensor *const *inputs, size_t input_count) {
  const onyx__cpu_node *node = state;
  onyx_status st = onyx__cpu_check_inputs(ctx, inputs, input_count, 3);
  if (st != ONYX_STATUS_OK) return st;
  const uint32_t t = inputs[0]->dtype;
  if (!onyx__cpu_dtype_in(t, CPU_RANGE_TYPES)) {
    ctx->set_error(ctx, "input 0 has dtype %s, which is not supported", onyx__cpu_dtype_name(t));
    return ONYX_STATUS_UNSUPPORTED;
  }
  int64_t n;
  char why[256];
  st = cpu_range_count(inputs, &n, why, sizeof why);
  if (st != ONYX_STATUS_OK) {
    ctx->set_error(ctx, "%s", why);
    return st;
  }
  onyx_tensor *y = NULL;
  st = onyx__cpu_alloc_output(node, ctx, t, 1, &n, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  if (onyx__cpu_dtype_in(t, ONYX__CPU_FLOAT_TYPES)) {
    const double start = onyx__cpu_load_f64(t, inputs[0]->data, 0);
    const double delta = onyx__cpu_load_f64(t, inputs[2]->data, 0);
    for (int64_t i = 0; i < n; ++i) onyx__cpu_store_f64(t, y->data, i, start + (double)i * delta);
    return ONYX_STATUS_OK;
  }
  /* Integers: start + i·delta stays within [start, limit), so it never overflows. */
  const int64_t start = cpu_scalar_i64(t, inputs[0]->data);
  const int64_t delta = cpu_scalar_i64(t, inputs[2]->data);
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = start + i * delta;
    if (t == ONYX_DTYPE_INT16)
      ((int16_t *)y->data)[i] = (int16_t)v;
    else if (t == ONYX_DTYPE_INT32)
      ((int32_t *)y->data)[i] = (int32_t)v;
    else
      ((int64_t *)y->data)[i] = v;
  }
  return ONYX_STATUS_OK;
}

const onyx_kernel_table onyx__cpu_k_range = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "",
    .op_type = "Range",
    .since_opset = 11,
    .until_opset = 0,
    .type_input = 0,
    .type_mask = CPU_RANGE_TYPES,
    .create = onyx__cpu_create_plain,
    .destroy = onyx__cpu_destroy,
    .compute = cpu_range_compute,
    .infer = cpu_range_infer,
};
