/*
 * Elementwise ops: Add, Sub, Mul, Div (broadcasting binary) and Relu, Sigmoid.
 *
 * One small loop per (op, dtype), generated from the lists below, is picked at
 * compute time from the input's dtype. The broadcast plan (cpu_broadcast.c) turns
 * any pair of shapes into runs where each operand either advances by one element
 * or stays put, so the loops only handle those three cases and the compiler can
 * vectorize them.
 *
 * Integer arithmetic wraps on overflow, like the hardware and ONNX Runtime: it is
 * done in unsigned types because signed overflow is undefined in C. Integer Div
 * truncates toward zero (C semantics, as ONNX Runtime does); a zero divisor is
 * rejected before anything is written. float16/bfloat16 are computed in float32
 * and rounded once per result.
 */
#include <math.h>
#include <string.h>

#include "cpu_impl.h"

/* ------------------------------------------------------------------ scalar ops */

#define CPU_FLOAT_OPS(sfx, T)                                                                      \
  static inline T cpu_add_##sfx(T x, T y) { return x + y; }                                        \
  static inline T cpu_sub_##sfx(T x, T y) { return x - y; }                                        \
  static inline T cpu_mul_##sfx(T x, T y) { return x * y; }                                        \
  static inline T cpu_div_##sfx(T x, T y) { return x / y; }
CPU_FLOAT_OPS(f32, float)
CPU_FLOAT_OPS(f64, double)

/* 16-bit floats: widen, compute, round once. */
#define CPU_HALF_OPS(sfx, to32, from32)                                                            \
  static inline uint16_t cpu_add_##sfx(uint16_t x, uint16_t y) {                                   \
    return from32(to32(x) + to32(y));                                                              \
  }                                                                                                \
  static inline uint16_t cpu_sub_##sfx(uint16_t x, uint16_t y) {                                   \
    return from32(to32(x) - to32(y));                                                              \
  }                                                                                                \
  static inline uint16_t cpu_mul_##sfx(uint16_t x, uint16_t y) {                                   \
    return from32(to32(x) * to32(y));                                                              \
  }                                                                                                \
  static inline uint16_t cpu_div_##sfx(uint16_t x, uint16_t y) { return from32(to32(x) / to32(y)); }
CPU_HALF_OPS(f16, onyx__cpu_f16_to_f32, onyx__cpu_f32_to_f16)
CPU_HALF_OPS(bf16, onyx__cpu_bf16_to_f32, onyx__cpu_f32_to_bf16)

/* Integers: U is an unsigned type at least as wide as int, so that the arithmetic
 * neither promotes back to signed int nor overflows. Division by -1 is negation
 * (INT_MIN / -1 traps on x86); division by zero never reaches here. */
#define CPU_INT_OPS(sfx, T, U, IS_SIGNED)                                                          \
  static inline T cpu_add_##sfx(T x, T y) { return (T)((U)x + (U)y); }                             \
  static inline T cpu_sub_##sfx(T x, T y) { return (T)((U)x - (U)y); }                             \
  static inline T cpu_mul_##sfx(T x, T y) { return (T)((U)x * (U)y); }                             \
  static inline T cpu_div_##sfx(T x, T y) {                                                        \
    if (IS_SIGNED && y == (T)-1) return (T)((U)0 - (U)x);                                          \
    return (T)(x / y);                                                                             \
  }
CPU_INT_OPS(i8, int8_t, unsigned, 1)
CPU_INT_OPS(i16, int16_t, unsigned, 1)
CPU_INT_OPS(i32, int32_t, uint32_t, 1)
CPU_INT_OPS(i64, int64_t, uint64_t, 1)
CPU_INT_OPS(u8, uint8_t, unsigned, 0)
CPU_INT_OPS(u16, uint16_t, unsigned, 0)
CPU_INT_OPS(u32, uint32_t, uint32_t, 0)
CPU_INT_OPS(u64, uint64_t, uint64_t, 0)

/* ------------------------------------------------------------------ binary loops */

typedef enum cpu_binary_op {
  CPU_ADD,
  CPU_SUB,
  CPU_MUL,
  CPU_DIV,
  CPU_BINARY_OP_COUNT
} cpu_binary_op;

/* One run: y[i] = a[i·sa] op b[i·sb] for i < n, with sa and sb each 0 or 1. */
typedef void (*cpu_binary_loop)(const void *a, int64_t sa, const void *b, int64_t sb, void *y,
                                int64_t n);

#define CPU_BINARY_LOOP(op, sfx, T)                                                                \
  static void cpu_##op##_loop_##sfx(const void *pa, int64_t sa, const void *pb, int64_t sb,        \
                                    void *py, int64_t n) {                                         \
    const T *a = pa;                                                                               \
    const T *b = pb;                                                                               \
    T *y = py;                                                                                     \
    if (sa && sb) {                                                                                \
      for (int64_t i = 0; i < n; ++i) y[i] = cpu_##op##_##sfx(a[i], b[i]);                         \
    } else if (sa) {                                                                               \
      const T s = b[0];                                                                            \
      for (int64_t i = 0; i < n; ++i) y[i] = cpu_##op##_##sfx(a[i], s);                            \
    } else if (sb) {                                                                               \
      const T s = a[0];                                                                            \
      for (int64_t i = 0; i < n; ++i) y[i] = cpu_##op##_##sfx(s, b[i]);                            \
    } else {                                                                                       \
      const T v = cpu_##op##_##sfx(a[0], b[0]);                                                    \
      for (int64_t i = 0; i < n; ++i) y[i] = v;                                                    \
    }                                                                                              \
  }

/* (suffix, C type, dtype) for every type the arithmetic kernels accept. */
#define CPU_ARITH_TYPES(X)                                                                         \
  X(f32, float, ONYX_DTYPE_FLOAT32)                                                                \
  X(f64, double, ONYX_DTYPE_FLOAT64)                                                               \
  X(f16, uint16_t, ONYX_DTYPE_FLOAT16)                                                             \
  X(bf16, uint16_t, ONYX_DTYPE_BFLOAT16)                                                           \
  X(i8, int8_t, ONYX_DTYPE_INT8)                                                                   \
  X(i16, int16_t, ONYX_DTYPE_INT16)                                                                \
  X(i32, int32_t, ONYX_DTYPE_INT32)                                                                \
  X(i64, int64_t, ONYX_DTYPE_INT64)                                                                \
  X(u8, uint8_t, ONYX_DTYPE_UINT8)                                                                 \
  X(u16, uint16_t, ONYX_DTYPE_UINT16)                                                              \
  X(u32, uint32_t, ONYX_DTYPE_UINT32)                                                              \
  X(u64, uint64_t, ONYX_DTYPE_UINT64)

#define CPU_DEFINE_BINARY_LOOPS(sfx, T, dtype)                                                     \
  CPU_BINARY_LOOP(add, sfx, T)                                                                     \
  CPU_BINARY_LOOP(sub, sfx, T)                                                                     \
  CPU_BINARY_LOOP(mul, sfx, T)                                                                     \
  CPU_BINARY_LOOP(div, sfx, T)
CPU_ARITH_TYPES(CPU_DEFINE_BINARY_LOOPS)

#define CPU_BINARY_ENTRIES(sfx, T, dtype)                                                          \
  [CPU_ADD][dtype] = cpu_add_loop_##sfx, [CPU_SUB][dtype] = cpu_sub_loop_##sfx,                    \
  [CPU_MUL][dtype] = cpu_mul_loop_##sfx, [CPU_DIV][dtype] = cpu_div_loop_##sfx,

/* Indexed by op and dtype value; NULL where unsupported. */
static const cpu_binary_loop cpu_binary_loops[CPU_BINARY_OP_COUNT][ONYX_DTYPE_BFLOAT16 + 1] = {
    CPU_ARITH_TYPES(CPU_BINARY_ENTRIES)};

#define CPU_ARITH_MASK (ONYX__CPU_FLOAT_TYPES | ONYX__CPU_INT_TYPES)

/* ------------------------------------------------------------------ binary kernels */

typedef struct cpu_binary_state {
  onyx__cpu_node base;
  cpu_binary_op op;
  /* Opset 1-6 broadcasting: off unless broadcast = 1, then B's shape lines up
   * with A's starting at `axis` (default: B matches A's trailing dims). */
  bool legacy;
  bool legacy_broadcast;
  bool axis_given;
  int64_t axis;
} cpu_binary_state;

static onyx_status cpu_binary_create(cpu_binary_op op, void *provider_state,
                                     const onyx_node_info *node, void **out_state, char *err,
                                     size_t err_cap) {
  cpu_binary_state *s = onyx__cpu_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  s->op = op;
  s->legacy = node->opset < 7;
  if (s->legacy) {
    int64_t broadcast = 0;
    onyx_status st = onyx__cpu_attr_int(node, "broadcast", 0, &broadcast, err, err_cap);
    if (st == ONYX_STATUS_OK) st = onyx__cpu_attr_int(node, "axis", 0, &s->axis, err, err_cap);
    if (st != ONYX_STATUS_OK) {
      onyx__cpu_destroy(s);
      return st;
    }
    s->legacy_broadcast = broadcast != 0;
    s->axis_given = onyx__cpu_attr_find(node, "axis") != NULL;
  }
  *out_state = s;
  return ONYX_STATUS_OK;
}

/* The shape B is broadcast from under opset 1-6 rules: B's dims placed at `axis`
 * inside a rank(A) shape of ones. */
static onyx_status cpu_legacy_b_shape(const cpu_binary_state *s, onyx_compute_ctx *ctx,
                                      const onyx_tensor *a, const onyx_tensor *b,
                                      int64_t *out_dims) {
  if (!s->legacy_broadcast) {
    if (a->rank != b->rank || memcmp(a->dims, b->dims, a->rank * sizeof a->dims[0]) != 0) {
      ctx->set_error(ctx, "input 1 has shape %s, expected %s like input 0 (broadcast = 0)",
                     onyx__cpu_tensor_shape(b).s, onyx__cpu_tensor_shape(a).s);
      return ONYX_STATUS_INVALID_ARGUMENT;
    }
    memcpy(out_dims, b->dims, b->rank * sizeof b->dims[0]);
    return ONYX_STATUS_OK;
  }
  int64_t axis = s->axis_given ? s->axis : (int64_t)a->rank - (int64_t)b->rank;
  if (axis < 0) axis += a->rank;
  if (b->rank > a->rank || axis < 0 || axis + (int64_t)b->rank > (int64_t)a->rank) {
    ctx->set_error(ctx, "input 1 shape %s does not fit input 0 shape %s at axis %lld",
                   onyx__cpu_tensor_shape(b).s, onyx__cpu_tensor_shape(a).s, (long long)axis);
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  for (uint32_t d = 0; d < a->rank; ++d) out_dims[d] = 1;
  for (uint32_t d = 0; d < b->rank; ++d) out_dims[axis + d] = b->dims[d];
  return ONYX_STATUS_OK;
}

/* True when some element of an integer tensor is zero. */
static bool cpu_has_zero(const onyx_tensor *t) {
  size_t esize = onyx_dtype_size(t->dtype);
  const unsigned char *p = t->data;
  static const unsigned char zero[8] = {0};
  int64_t n = onyx_tensor_numel(t);
  for (int64_t i = 0; i < n; ++i)
    if (memcmp(p + (size_t)i * esize, zero, esize) == 0) return true;
  return false;
}

typedef struct cpu_binary_walk {
  cpu_binary_loop loop;
  const unsigned char *a, *b;
  unsigned char *y;
  size_t esize;
} cpu_binary_walk;

static void cpu_binary_run(void *arg, const int64_t *in_off, int64_t out_off, int64_t n,
                           const int64_t *in_strides) {
  const cpu_binary_walk *w = arg;
  w->loop(w->a + (size_t)in_off[0] * w->esize, in_strides[0], w->b + (size_t)in_off[1] * w->esize,
          in_strides[1], w->y + (size_t)out_off * w->esize, n);
}

static onyx_status cpu_binary_compute(void *state, onyx_compute_ctx *ctx,
                                      const onyx_tensor *const *inputs, size_t input_count) {
  const cpu_binary_state *s = state;
  onyx_status st = onyx__cpu_check_inputs(ctx, inputs, input_count, 2);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *a = inputs[0], *b = inputs[1];
  if (!onyx__cpu_dtype_in(a->dtype, CPU_ARITH_MASK)) {
    ctx->set_error(ctx, "input 0 has dtype %s, which is not supported",
                   onyx__cpu_dtype_name(a->dtype));
    return ONYX_STATUS_UNSUPPORTED;
  }
  if (b->dtype != a->dtype) {
    ctx->set_error(ctx, "input 1 has dtype %s, expected %s like input 0",
                   onyx__cpu_dtype_name(b->dtype), onyx__cpu_dtype_name(a->dtype));
    return ONYX_STATUS_INVALID_ARGUMENT;
  }

  int64_t b_dims[ONYX_MAX_RANK];
  uint32_t ranks[2] = {a->rank, b->rank};
  const int64_t *dims[2] = {a->dims, b->dims};
  if (s->legacy) {
    st = cpu_legacy_b_shape(s, ctx, a, b, b_dims);
    if (st != ONYX_STATUS_OK) return st;
    ranks[1] = a->rank;
    dims[1] = b_dims;
  }
  onyx__cpu_bcast plan;
  char why[256];
  st = onyx__cpu_bcast_init(&plan, 2, ranks, dims, why, sizeof why);
  if (st != ONYX_STATUS_OK) {
    ctx->set_error(ctx, "%s", why);
    return st;
  }
  if (s->legacy && plan.out_rank == a->rank &&
      memcmp(plan.out_dims, a->dims, a->rank * sizeof a->dims[0]) != 0) {
    ctx->set_error(ctx, "input 1 shape %s cannot grow input 0 shape %s (opset %lld)",
                   onyx__cpu_tensor_shape(b).s, onyx__cpu_tensor_shape(a).s,
                   (long long)s->base.opset);
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  if (s->op == CPU_DIV && onyx__cpu_dtype_in(a->dtype, ONYX__CPU_INT_TYPES) && plan.out_numel > 0 &&
      cpu_has_zero(b)) {
    ctx->set_error(ctx, "integer division by zero (input 1 has a zero element)");
    return ONYX_STATUS_INVALID_ARGUMENT;
  }

  onyx_tensor *y = NULL;
  st = onyx__cpu_alloc_output(&s->base, ctx, a->dtype, plan.out_rank, plan.out_dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  cpu_binary_walk w = {cpu_binary_loops[s->op][a->dtype], a->data, b->data, y->data,
                       onyx_dtype_size(a->dtype)};
  onyx__cpu_bcast_walk(&plan, cpu_binary_run, &w);
  return ONYX_STATUS_OK;
}

#define CPU_BINARY_KERNEL(sym, OP, NAME, SINCE, UNTIL)                                             \
  static onyx_status cpu_create_##sym(void *p, const onyx_node_info *node, void **out, char *err,  \
                                      size_t cap) {                                                \
    return cpu_binary_create(OP, p, node, out, err, cap);                                          \
  }                                                                                                \
  const onyx_kernel_table onyx__cpu_k_##sym = {                                                    \
      .struct_size = sizeof(onyx_kernel_table),                                                    \
      .version = ONYX_ABI_VERSION,                                                                 \
      .domain = "",                                                                                \
      .op_type = NAME,                                                                             \
      .since_opset = SINCE,                                                                        \
      .until_opset = UNTIL,                                                                        \
      .type_input = 0,                                                                             \
      .type_mask = CPU_ARITH_MASK,                                                                 \
      .create = cpu_create_##sym,                                                                  \
      .destroy = onyx__cpu_destroy,                                                                \
      .compute = cpu_binary_compute,                                                               \
  };

/* Opset 7 replaced the broadcast/axis attributes with numpy broadcasting. */
CPU_BINARY_KERNEL(add_1, CPU_ADD, "Add", 1, 6)
CPU_BINARY_KERNEL(add_7, CPU_ADD, "Add", 7, 0)
CPU_BINARY_KERNEL(sub_1, CPU_SUB, "Sub", 1, 6)
CPU_BINARY_KERNEL(sub_7, CPU_SUB, "Sub", 7, 0)
CPU_BINARY_KERNEL(mul_1, CPU_MUL, "Mul", 1, 6)
CPU_BINARY_KERNEL(mul_7, CPU_MUL, "Mul", 7, 0)
CPU_BINARY_KERNEL(div_1, CPU_DIV, "Div", 1, 6)
CPU_BINARY_KERNEL(div_7, CPU_DIV, "Div", 7, 0)

/* ------------------------------------------------------------------ unary ops */

typedef enum cpu_unary_op { CPU_RELU, CPU_SIGMOID } cpu_unary_op;

/* NaN passes through Relu (NaN < 0 is false), as numpy's maximum(x, 0) does. */
static inline double cpu_relu(double x) { return x < 0 ? 0.0 : x; }
static inline float cpu_relu_f(float x) { return x < 0 ? 0.0f : x; }

/* Written so that exp() never overflows: for x < 0 use e^x / (1 + e^x). */
static inline double cpu_sigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + exp(-x));
  double e = exp(x);
  return e / (1.0 + e);
}
static inline float cpu_sigmoid_f(float x) {
  if (x >= 0) return 1.0f / (1.0f + expf(-x));
  float e = expf(x);
  return e / (1.0f + e);
}

#define CPU_RELU_INT(T, x) ((x) < 0 ? (T)0 : (x))

static void cpu_unary_apply(cpu_unary_op op, uint32_t dtype, const void *src, void *dst,
                            int64_t n) {
  switch (dtype) {
  case ONYX_DTYPE_FLOAT32: {
    const float *x = src;
    float *y = dst;
    if (op == CPU_RELU)
      for (int64_t i = 0; i < n; ++i) y[i] = cpu_relu_f(x[i]);
    else
      for (int64_t i = 0; i < n; ++i) y[i] = cpu_sigmoid_f(x[i]);
    break;
  }
  case ONYX_DTYPE_FLOAT64: {
    const double *x = src;
    double *y = dst;
    for (int64_t i = 0; i < n; ++i) y[i] = op == CPU_RELU ? cpu_relu(x[i]) : cpu_sigmoid(x[i]);
    break;
  }
  case ONYX_DTYPE_FLOAT16:
  case ONYX_DTYPE_BFLOAT16:
    for (int64_t i = 0; i < n; ++i) {
      float v = onyx__cpu_load_f32(dtype, src, i);
      onyx__cpu_store_f32(dtype, dst, i, op == CPU_RELU ? cpu_relu_f(v) : cpu_sigmoid_f(v));
    }
    break;
  case ONYX_DTYPE_INT8:
    for (int64_t i = 0; i < n; ++i)
      ((int8_t *)dst)[i] = CPU_RELU_INT(int8_t, ((const int8_t *)src)[i]);
    break;
  case ONYX_DTYPE_INT16:
    for (int64_t i = 0; i < n; ++i)
      ((int16_t *)dst)[i] = CPU_RELU_INT(int16_t, ((const int16_t *)src)[i]);
    break;
  case ONYX_DTYPE_INT32:
    for (int64_t i = 0; i < n; ++i)
      ((int32_t *)dst)[i] = CPU_RELU_INT(int32_t, ((const int32_t *)src)[i]);
    break;
  case ONYX_DTYPE_INT64:
    for (int64_t i = 0; i < n; ++i)
      ((int64_t *)dst)[i] = CPU_RELU_INT(int64_t, ((const int64_t *)src)[i]);
    break;
  default:
    break; /* excluded by the dtype check in cpu_unary_compute */
  }
}

typedef struct cpu_unary_state {
  onyx__cpu_node base;
  cpu_unary_op op;
  uint64_t types;
} cpu_unary_state;

#define CPU_SIGNED_INT_TYPES                                                                       \
  (ONYX_DTYPE_BIT(ONYX_DTYPE_INT8) | ONYX_DTYPE_BIT(ONYX_DTYPE_INT16) |                            \
   ONYX_DTYPE_BIT(ONYX_DTYPE_INT32) | ONYX_DTYPE_BIT(ONYX_DTYPE_INT64))

static onyx_status cpu_unary_compute(void *state, onyx_compute_ctx *ctx,
                                     const onyx_tensor *const *inputs, size_t input_count) {
  const cpu_unary_state *s = state;
  onyx_status st = onyx__cpu_check_inputs(ctx, inputs, input_count, 1);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *x = inputs[0];
  if (!onyx__cpu_dtype_in(x->dtype, s->types)) {
    ctx->set_error(ctx, "input 0 has dtype %s, which is not supported",
                   onyx__cpu_dtype_name(x->dtype));
    return ONYX_STATUS_UNSUPPORTED;
  }
  onyx_tensor *y = NULL;
  st = onyx__cpu_alloc_output(&s->base, ctx, x->dtype, x->rank, x->dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  cpu_unary_apply(s->op, x->dtype, x->data, y->data, onyx_tensor_numel(x));
  return ONYX_STATUS_OK;
}

/* Opset 1 carried a `consumed_inputs` attribute that means nothing to a runtime
 * with its own memory planning; it is ignored. */
#define CPU_UNARY_KERNEL(sym, OP, NAME, TYPES)                                                     \
  static onyx_status cpu_create_##sym(void *p, const onyx_node_info *node, void **out, char *err,  \
                                      size_t cap) {                                                \
    cpu_unary_state *s = onyx__cpu_state_new(sizeof *s, p, node, err, cap);                        \
    if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;                                               \
    s->op = OP;                                                                                    \
    s->types = TYPES;                                                                              \
    *out = s;                                                                                      \
    return ONYX_STATUS_OK;                                                                         \
  }                                                                                                \
  const onyx_kernel_table onyx__cpu_k_##sym = {                                                    \
      .struct_size = sizeof(onyx_kernel_table),                                                    \
      .version = ONYX_ABI_VERSION,                                                                 \
      .domain = "",                                                                                \
      .op_type = NAME,                                                                             \
      .since_opset = 1,                                                                            \
      .until_opset = 0,                                                                            \
      .type_input = 0,                                                                             \
      .type_mask = TYPES,                                                                          \
      .create = cpu_create_##sym,                                                                  \
      .destroy = onyx__cpu_destroy,                                                                \
      .compute = cpu_unary_compute,                                                                \
  };

/* Relu gained signed integer types at opset 14; accepting them earlier is harmless. */
CPU_UNARY_KERNEL(relu, CPU_RELU, "Relu", ONYX__CPU_FLOAT_TYPES | CPU_SIGNED_INT_TYPES)
CPU_UNARY_KERNEL(sigmoid, CPU_SIGMOID, "Sigmoid", ONYX__CPU_FLOAT_TYPES)
