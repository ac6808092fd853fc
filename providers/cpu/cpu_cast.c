/*
 * Cast and CastLike between every fixed-size type of ABI v1.
 *
 * Rather than 13 × 13 hand-written loops, each element goes through an exact
 * intermediate: a double for floating sources (every float16/bfloat16/float32 value
 * is a double), an int64 for signed and a uint64 for unsigned and bool sources.
 * Storing from that intermediate rounds at most once, so results match a direct
 * conversion:
 *   - to float types: round to nearest even (float64 → float16/bfloat16 is rounded
 *     once, see cpu_half.c); out of range becomes ±inf;
 *   - float to integer: truncate toward zero; NaN gives 0 and out-of-range values
 *     saturate (C leaves both undefined; ONNX leaves them unspecified);
 *   - integer to integer: keep the low bits (two's complement wrap), as C, numpy
 *     and ONNX Runtime do;
 *   - to bool: any non-zero value (NaN included) is true; bool reads as 0 or 1.
 * The work runs in chunks so the intermediate stays in L1.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cpu_impl.h"

typedef enum cpu_num_kind { CPU_NUM_F, CPU_NUM_I, CPU_NUM_U } cpu_num_kind;

typedef struct cpu_num {
  cpu_num_kind kind;
  union {
    double f;
    int64_t i;
    uint64_t u;
  } v;
} cpu_num;

enum { CPU_CAST_CHUNK = 512 };

#define CPU_LOAD(T, KIND, FIELD)                                                                   \
  for (int64_t j = 0; j < n; ++j) {                                                                \
    out[j].kind = KIND;                                                                            \
    out[j].v.FIELD = ((const T *)src)[at + j];                                                     \
  }

static void cpu_load(uint32_t dtype, const void *src, int64_t at, int64_t n, cpu_num *out) {
  switch (dtype) {
  case ONYX_DTYPE_FLOAT32:
    CPU_LOAD(float, CPU_NUM_F, f);
    break;
  case ONYX_DTYPE_FLOAT64:
    CPU_LOAD(double, CPU_NUM_F, f);
    break;
  case ONYX_DTYPE_INT8:
    CPU_LOAD(int8_t, CPU_NUM_I, i);
    break;
  case ONYX_DTYPE_INT16:
    CPU_LOAD(int16_t, CPU_NUM_I, i);
    break;
  case ONYX_DTYPE_INT32:
    CPU_LOAD(int32_t, CPU_NUM_I, i);
    break;
  case ONYX_DTYPE_INT64:
    CPU_LOAD(int64_t, CPU_NUM_I, i);
    break;
  case ONYX_DTYPE_UINT8:
    CPU_LOAD(uint8_t, CPU_NUM_U, u);
    break;
  case ONYX_DTYPE_UINT16:
    CPU_LOAD(uint16_t, CPU_NUM_U, u);
    break;
  case ONYX_DTYPE_UINT32:
    CPU_LOAD(uint32_t, CPU_NUM_U, u);
    break;
  case ONYX_DTYPE_UINT64:
    CPU_LOAD(uint64_t, CPU_NUM_U, u);
    break;
  case ONYX_DTYPE_BOOL:
    for (int64_t j = 0; j < n; ++j) {
      out[j].kind = CPU_NUM_U;
      out[j].v.u = ((const uint8_t *)src)[at + j] != 0;
    }
    break;
  case ONYX_DTYPE_FLOAT16:
  case ONYX_DTYPE_BFLOAT16:
    for (int64_t j = 0; j < n; ++j) {
      out[j].kind = CPU_NUM_F;
      out[j].v.f = onyx__cpu_load_f32(dtype, src, at + j);
    }
    break;
  default:
    break; /* rejected before compute gets here */
  }
}

/* Float → signed integer in [lo, hi]: truncate, NaN → 0, saturate. */
static int64_t cpu_f_to_i(double f, int64_t lo, int64_t hi) {
  if (isnan(f)) return 0;
  if (f <= (double)lo) return lo;
  if (f >= (double)hi) return hi; /* (double)INT64_MAX rounds up to 2^63: still right */
  return (int64_t)f;
}

/* Float → unsigned integer in [0, hi]. */
static uint64_t cpu_f_to_u(double f, uint64_t hi) {
  if (isnan(f) || f <= 0.0) return 0;
  if (f >= (double)hi) return hi;
  return (uint64_t)f;
}

/* The low bits of any intermediate as a uint64 (integers wrap; floats saturate
 * into the destination's own range first, see cpu_store). */
static uint64_t cpu_bits(const cpu_num *x) {
  return x->kind == CPU_NUM_I ? (uint64_t)x->v.i : x->v.u;
}

static double cpu_as_double(const cpu_num *x) {
  switch (x->kind) {
  case CPU_NUM_F:
    return x->v.f;
  case CPU_NUM_I:
    return (double)x->v.i;
  default:
    return (double)x->v.u;
  }
}

#define CPU_STORE_SIGNED(T, LO, HI)                                                                \
  for (int64_t j = 0; j < n; ++j)                                                                  \
    ((T *)dst)[at + j] =                                                                           \
        in[j].kind == CPU_NUM_F ? (T)cpu_f_to_i(in[j].v.f, LO, HI) : (T)cpu_bits(&in[j]);

#define CPU_STORE_UNSIGNED(T, HI)                                                                  \
  for (int64_t j = 0; j < n; ++j)                                                                  \
    ((T *)dst)[at + j] =                                                                           \
        in[j].kind == CPU_NUM_F ? (T)cpu_f_to_u(in[j].v.f, HI) : (T)cpu_bits(&in[j]);

static void cpu_store(uint32_t dtype, void *dst, int64_t at, int64_t n, const cpu_num *in) {
  switch (dtype) {
  case ONYX_DTYPE_FLOAT32:
    /* From an integer, convert directly so the value is rounded only once. */
    for (int64_t j = 0; j < n; ++j)
      ((float *)dst)[at + j] = in[j].kind == CPU_NUM_F   ? (float)in[j].v.f
                               : in[j].kind == CPU_NUM_I ? (float)in[j].v.i
                                                         : (float)in[j].v.u;
    break;
  case ONYX_DTYPE_FLOAT64:
    for (int64_t j = 0; j < n; ++j) ((double *)dst)[at + j] = cpu_as_double(&in[j]);
    break;
  case ONYX_DTYPE_FLOAT16:
    for (int64_t j = 0; j < n; ++j)
      ((uint16_t *)dst)[at + j] = onyx__cpu_f64_to_f16(cpu_as_double(&in[j]));
    break;
  case ONYX_DTYPE_BFLOAT16:
    for (int64_t j = 0; j < n; ++j)
      ((uint16_t *)dst)[at + j] = onyx__cpu_f64_to_bf16(cpu_as_double(&in[j]));
    break;
  case ONYX_DTYPE_INT8:
    CPU_STORE_SIGNED(int8_t, INT8_MIN, INT8_MAX);
    break;
  case ONYX_DTYPE_INT16:
    CPU_STORE_SIGNED(int16_t, INT16_MIN, INT16_MAX);
    break;
  case ONYX_DTYPE_INT32:
    CPU_STORE_SIGNED(int32_t, INT32_MIN, INT32_MAX);
    break;
  case ONYX_DTYPE_INT64:
    CPU_STORE_SIGNED(int64_t, INT64_MIN, INT64_MAX);
    break;
  case ONYX_DTYPE_UINT8:
    CPU_STORE_UNSIGNED(uint8_t, UINT8_MAX);
    break;
  case ONYX_DTYPE_UINT16:
    CPU_STORE_UNSIGNED(uint16_t, UINT16_MAX);
    break;
  case ONYX_DTYPE_UINT32:
    CPU_STORE_UNSIGNED(uint32_t, UINT32_MAX);
    break;
  case ONYX_DTYPE_UINT64:
    CPU_STORE_UNSIGNED(uint64_t, UINT64_MAX);
    break;
  case ONYX_DTYPE_BOOL:
    for (int64_t j = 0; j < n; ++j)
      ((uint8_t *)dst)[at + j] = in[j].kind == CPU_NUM_F ? in[j].v.f != 0.0 : cpu_bits(&in[j]) != 0;
    break;
  default:
    break;
  }
}

/* Converts n elements. The float32 ↔ 16-bit pairs that mixed-precision models use
 * most get direct loops; everything else goes through the intermediate. */
static void cpu_convert(uint32_t from, const void *src, uint32_t to, void *dst, int64_t n) {
  if (n <= 0) return; /* zero-size views may have NULL data */
  if (from == to) {
    memcpy(dst, src, (size_t)n * onyx_dtype_size(from));
    return;
  }
  if (from == ONYX_DTYPE_FLOAT32 && (to == ONYX_DTYPE_FLOAT16 || to == ONYX_DTYPE_BFLOAT16)) {
    for (int64_t i = 0; i < n; ++i) onyx__cpu_store_f32(to, dst, i, ((const float *)src)[i]);
    return;
  }
  if (to == ONYX_DTYPE_FLOAT32 && (from == ONYX_DTYPE_FLOAT16 || from == ONYX_DTYPE_BFLOAT16)) {
    for (int64_t i = 0; i < n; ++i) ((float *)dst)[i] = onyx__cpu_load_f32(from, src, i);
    return;
  }
  cpu_num buf[CPU_CAST_CHUNK];
  for (int64_t at = 0; at < n; at += CPU_CAST_CHUNK) {
    int64_t len = n - at < CPU_CAST_CHUNK ? n - at : CPU_CAST_CHUNK;
    cpu_load(from, src, at, len, buf);
    cpu_store(to, dst, at, len, buf);
  }
}

/* ------------------------------------------------------------------ kernels */

typedef struct cpu_cast_state {
  onyx__cpu_node base;
  uint32_t to; /* Cast only; CastLike takes it from input 1 */
} cpu_cast_state;

/* Opset 1 spelled `to` as a string naming the TensorProto type. */
static uint32_t cpu_dtype_from_name(const char *s) {
  static const struct {
    const char *name;
    uint32_t dtype;
  } names[] = {{"FLOAT", ONYX_DTYPE_FLOAT32},    {"UINT8", ONYX_DTYPE_UINT8},
               {"INT8", ONYX_DTYPE_INT8},        {"UINT16", ONYX_DTYPE_UINT16},
               {"INT16", ONYX_DTYPE_INT16},      {"INT32", ONYX_DTYPE_INT32},
               {"INT64", ONYX_DTYPE_INT64},      {"BOOL", ONYX_DTYPE_BOOL},
               {"FLOAT16", ONYX_DTYPE_FLOAT16},  {"DOUBLE", ONYX_DTYPE_FLOAT64},
               {"UINT32", ONYX_DTYPE_UINT32},    {"UINT64", ONYX_DTYPE_UINT64},
               {"BFLOAT16", ONYX_DTYPE_BFLOAT16}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i)
    if (strcmp(s, names[i].name) == 0) return names[i].dtype;
  return ONYX_DTYPE_UNDEFINED;
}

/* The target type of a Cast node, or a message saying why there is none. */
static onyx_status cpu_cast_target(const onyx_node_info *node, uint32_t *out_to, char *err,
                                   size_t err_cap) {
  const onyx_attr *a = onyx__cpu_attr_find(node, "to");
  if (a == NULL)
    return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "Cast: attribute 'to' is required");
  int64_t to;
  if (a->type == ONYX_ATTR_INT) {
    to = a->i;
  } else if (a->type == ONYX_ATTR_STRING && a->s != NULL) {
    to = cpu_dtype_from_name(a->s);
  } else {
    return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "Cast: attribute 'to' must be INT (or STRING before opset 6)");
  }
  if (to < 0 || to > 63 || !onyx__cpu_dtype_in((uint32_t)to, ONYX__CPU_FIXED_TYPES))
    return onyx__cpu_fail(err, err_cap, ONYX_STATUS_UNSUPPORTED,
                          "Cast: target type %s is not supported by the cpu provider",
                          a->type == ONYX_ATTR_INT ? onyx__cpu_dtype_name((uint32_t)a->i) : a->s);
  *out_to = (uint32_t)to;
  return ONYX_STATUS_OK;
}

/* Placement asks first, so an unsupported target can go to another provider or
 * fail early. A malformed node is left for create() to report. */
static bool cpu_cast_supports(const onyx_node_info *node, char *reason, size_t reason_cap) {
  uint32_t to = ONYX_DTYPE_UNDEFINED;
  return cpu_cast_target(node, &to, reason, reason_cap) != ONYX_STATUS_UNSUPPORTED;
}

/* `saturate` (opset 19) and `round_mode` (opset 28) only affect float8/float4
 * targets, which ABI v1 has no dtype for; they are accepted and have no effect. */
static onyx_status cpu_cast_create(void *provider_state, const onyx_node_info *node,
                                   void **out_state, char *err, size_t err_cap) {
  uint32_t to = ONYX_DTYPE_UNDEFINED;
  onyx_status st = cpu_cast_target(node, &to, err, err_cap);
  if (st != ONYX_STATUS_OK) return st;
  cpu_cast_state *s = onyx__cpu_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  s->to = to;
  *out_state = s;
  return ONYX_STATUS_OK;
}

static onyx_status cpu_cast_run(const onyx__cpu_node *node, onyx_compute_ctx *ctx,
                                const onyx_tensor *x, uint32_t to) {
  if (!onyx__cpu_dtype_in(x->dtype, ONYX__CPU_FIXED_TYPES)) {
    ctx->set_error(ctx, "input 0 has dtype %s, which is not supported",
                   onyx__cpu_dtype_name(x->dtype));
    return ONYX_STATUS_UNSUPPORTED;
  }
  onyx_tensor *y = NULL;
  onyx_status st = onyx__cpu_alloc_output(node, ctx, to, x->rank, x->dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  cpu_convert(x->dtype, x->data, to, y->data, onyx_tensor_numel(x));
  return ONYX_STATUS_OK;
}

static onyx_status cpu_cast_compute(void *state, onyx_compute_ctx *ctx,
                                    const onyx_tensor *const *inputs, size_t input_count) {
  const cpu_cast_state *s = state;
  onyx_status st = onyx__cpu_check_inputs(ctx, inputs, input_count, 1);
  if (st != ONYX_STATUS_OK) return st;
  return cpu_cast_run(&s->base, ctx, inputs[0], s->to);
}

static onyx_status cpu_castlike_compute(void *state, onyx_compute_ctx *ctx,
                                        const onyx_tensor *const *inputs, size_t input_count) {
  const onyx__cpu_node *node = state;
  onyx_status st = onyx__cpu_check_inputs(ctx, inputs, input_count, 2);
  if (st != ONYX_STATUS_OK) return st;
  uint32_t to = inputs[1]->dtype;
  if (!onyx__cpu_dtype_in(to, ONYX__CPU_FIXED_TYPES)) {
    ctx->set_error(ctx, "input 1 (target_type) has dtype %s, which is not supported",
                   onyx__cpu_dtype_name(to));
    return ONYX_STATUS_UNSUPPORTED;
  }
  return cpu_cast_run(node, ctx, inputs[0], to);
}

static bool cpu_castlike_supports(const onyx_node_info *node, char *reason, size_t reason_cap) {
  uint32_t to =
      node->input_count > 1 && node->input_dtypes ? node->input_dtypes[1] : ONYX_DTYPE_UNDEFINED;
  if (to == ONYX_DTYPE_UNDEFINED || onyx__cpu_dtype_in(to, ONYX__CPU_FIXED_TYPES)) return true;
  if (reason != NULL && reason_cap > 0)
    snprintf(reason, reason_cap, "CastLike: target type %s is not supported",
             onyx__cpu_dtype_name(to));
  return false;
}

static onyx_status cpu_cast_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                  onyx_tensor *outputs, size_t output_count) {
  const cpu_cast_state *s = state;
  if (input_count < 1) return ONYX_STATUS_INVALID_ARGUMENT;
  onyx__cpu_infer_out(outputs, output_count, 0, s->to, inputs[0].rank, inputs[0].dims);
  return ONYX_STATUS_OK;
}

static onyx_status cpu_castlike_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                      onyx_tensor *outputs, size_t output_count) {
  (void)state;
  if (input_count < 2) return ONYX_STATUS_INVALID_ARGUMENT;
  onyx__cpu_infer_out(outputs, output_count, 0, inputs[1].dtype, inputs[0].rank, inputs[0].dims);
  return ONYX_STATUS_OK;
}

const onyx_kernel_table onyx__cpu_k_cast = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "",
    .op_type = "Cast",
    .since_opset = 1,
    .until_opset = 0,
    .type_input = 0,
    .type_mask = ONYX__CPU_FIXED_TYPES,
    .supports = cpu_cast_supports,
    .create = cpu_cast_create,
    .destroy = onyx__cpu_destroy,
    .compute = cpu_cast_compute,
    .infer = cpu_cast_infer,
};

const onyx_kernel_table onyx__cpu_k_castlike = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "",
    .op_type = "CastLike",
    .since_opset = 15,
    .until_opset = 0,
    .type_input = 0,
    .type_mask = ONYX__CPU_FIXED_TYPES,
    .supports = cpu_castlike_supports,
    .create = onyx__cpu_create_plain,
    .destroy = onyx__cpu_destroy,
    .compute = cpu_castlike_compute,
    .infer = cpu_castlike_infer,
};
