/*
 * Broadcasting arithmetic: Add, Sub, Mul, Div, Pow (whose exponent may have
 * another type than its base) and Mod.
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
 * and rounded once per result. Large outputs are split into slices of the
 * broadcast walk that run on the provider's threads.
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
static onyx_status cpu_legacy_b_shape(const cpu_binary_state *s, const onyx_tensor *a,
                                      const onyx_tensor *b, int64_t *out_dims, char *err,
                                      size_t err_cap) {
  if (!s->legacy_broadcast) {
    if (a->rank != b->rank || memcmp(a->dims, b->dims, a->rank * sizeof a->dims[0]) != 0)
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                            "input 1 has shape %s, expected %s like input 0 (broadcast = 0)",
                            onyx__cpu_tensor_shape(b).s, onyx__cpu_tensor_shape(a).s);
    memcpy(out_dims, b->dims, b->rank * sizeof b->dims[0]);
    return ONYX_STATUS_OK;
  }
  int64_t axis = s->axis_given ? s->axis : (int64_t)a->rank - (int64_t)b->rank;
  if (axis < 0) axis += a->rank;
  if (b->rank > a->rank || axis < 0 || axis + (int64_t)b->rank > (int64_t)a->rank)
    return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "input 1 shape %s does not fit input 0 shape %s at axis %lld",
                          onyx__cpu_tensor_shape(b).s, onyx__cpu_tensor_shape(a).s,
                          (long long)axis);
  for (uint32_t d = 0; d < a->rank; ++d) out_dims[d] = 1;
  for (uint32_t d = 0; d < b->rank; ++d) out_dims[axis + d] = b->dims[d];
  return ONYX_STATUS_OK;
}

/* The broadcast plan of a binary node, for compute and infer alike. */
static onyx_status cpu_binary_plan(const cpu_binary_state *s, const onyx_tensor *a,
                                   const onyx_tensor *b, onyx__cpu_bcast *plan, char *err,
                                   size_t err_cap) {
  int64_t b_dims[ONYX_MAX_RANK];
  uint32_t ranks[2] = {a->rank, b->rank};
  const int64_t *dims[2] = {a->dims, b->dims};
  if (s->legacy) {
    onyx_status st = cpu_legacy_b_shape(s, a, b, b_dims, err, err_cap);
    if (st != ONYX_STATUS_OK) return st;
    ranks[1] = a->rank;
    dims[1] = b_dims;
  }
  onyx_status st = onyx__cpu_bcast_init(plan, 2, ranks, dims, err, err_cap);
  if (st != ONYX_STATUS_OK) return st;
  if (s->legacy && plan->out_rank == a->rank &&
      memcmp(plan->out_dims, a->dims, a->rank * sizeof a->dims[0]) != 0)
    return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "input 1 shape %s cannot grow input 0 shape %s (opset %lld)",
                          onyx__cpu_tensor_shape(b).s, onyx__cpu_tensor_shape(a).s,
                          (long long)s->base.opset);
  return ONYX_STATUS_OK;
}

static onyx_status cpu_binary_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                    onyx_tensor *outputs, size_t output_count) {
  if (input_count < 2) return ONYX_STATUS_INVALID_ARGUMENT;
  onyx__cpu_bcast plan;
  char why[ONYX__CPU_REASON_CAP] = "";
  onyx_status st = cpu_binary_plan(state, &inputs[0], &inputs[1], &plan, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cpu_reason(state, st, why);
  onyx__cpu_infer_out(outputs, output_count, 0, inputs[0].dtype, plan.out_rank, plan.out_dims);
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
  const onyx__cpu_bcast *plan;
} cpu_binary_walk;

static void cpu_binary_run(void *arg, const int64_t *in_off, int64_t out_off, int64_t n,
                           const int64_t *in_strides) {
  const cpu_binary_walk *w = arg;
  w->loop(w->a + (size_t)in_off[0] * w->esize, in_strides[0], w->b + (size_t)in_off[1] * w->esize,
          in_strides[1], w->y + (size_t)out_off * w->esize, n);
}

static void cpu_binary_slice(void *arg, int64_t begin, int64_t end) {
  const cpu_binary_walk *w = arg;
  onyx__cpu_bcast_walk_range(w->plan, begin, end, cpu_binary_run, arg);
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
  onyx__cpu_bcast plan;
  char why[256];
  st = cpu_binary_plan(s, a, b, &plan, why, sizeof why);
  if (st != ONYX_STATUS_OK) {
    ctx->set_error(ctx, "%s", why);
    return st;
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
                       onyx_dtype_size(a->dtype),         &plan};
  onyx__cpu_parallel_range(s->base.provider, plan.out_numel, ONYX__CPU_PARALLEL_GRAIN,
                           cpu_binary_slice, &w);
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
      .infer = cpu_binary_infer,                                                                   \
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

/* ------------------------------------------------------------------ Pow */

/*
 * Pow(X, Y): Y may have another type than X (opset 12), so the general loop goes
 * through double and stores in X's type (integer results truncate, as numpy's
 * float power cast back does). float32 with float32 exponents has its own loop,
 * with x·x for the exponent 2 that normalisation graphs use.
 */
#define CPU_POW_BASE_TYPES                                                                         \
  (ONYX__CPU_FLOAT_TYPES | ONYX_DTYPE_BIT(ONYX_DTYPE_INT32) | ONYX_DTYPE_BIT(ONYX_DTYPE_INT64))

typedef struct cpu_pow_walk {
  const onyx_tensor *a, *b;
  void *y;
  const onyx__cpu_bcast *plan;
} cpu_pow_walk;

static void cpu_pow_run(void *arg, const int64_t *in_off, int64_t out_off, int64_t n,
                        const int64_t *in_strides) {
  const cpu_pow_walk *w = arg;
  const uint32_t ta = w->a->dtype, tb = w->b->dtype;
  if (ta == ONYX_DTYPE_FLOAT32 && tb == ONYX_DTYPE_FLOAT32) {
    const float *a = (const float *)w->a->data + in_off[0];
    const float *b = (const float *)w->b->data + in_off[1];
    float *y = (float *)w->y + out_off;
    const int64_t sa = in_strides[0], sb = in_strides[1];
    if (sb == 0 && b[0] == 2.0f)
      for (int64_t i = 0; i < n; ++i) y[i] = a[i * sa] * a[i * sa];
    else
      for (int64_t i = 0; i < n; ++i) y[i] = powf(a[i * sa], b[i * sb]);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    double x = onyx__cpu_load_f64(ta, w->a->data, in_off[0] + i * in_strides[0]);
    double e = onyx__cpu_load_f64(tb, w->b->data, in_off[1] + i * in_strides[1]);
    onyx__cpu_store_f64(ta, w->y, out_off + i, pow(x, e));
  }
}

static void cpu_pow_slice(void *arg, int64_t begin, int64_t end) {
  const cpu_pow_walk *w = arg;
  onyx__cpu_bcast_walk_range(w->plan, begin, end, cpu_pow_run, arg);
}

static onyx_status cpu_pow_plan(const onyx_tensor *a, const onyx_tensor *b, onyx__cpu_bcast *plan,
                                char *err, size_t err_cap) {
  uint32_t ranks[2] = {a->rank, b->rank};
  const int64_t *dims[2] = {a->dims, b->dims};
  return onyx__cpu_bcast_init(plan, 2, ranks, dims, err, err_cap);
}

static onyx_status cpu_pow_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                 onyx_tensor *outputs, size_t output_count) {
  (void)state;
  if (input_count < 2) return ONYX_STATUS_INVALID_ARGUMENT;
  onyx__cpu_bcast plan;
  char why[ONYX__CPU_REASON_CAP] = "";
  onyx_status st = cpu_pow_plan(&inputs[0], &inputs[1], &plan, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cpu_reason(state, st, why);
  onyx__cpu_infer_out(outputs, output_count, 0, inputs[0].dtype, plan.out_rank, plan.out_dims);
  return st;
}

static onyx_status cpu_pow_compute(void *state, onyx_compute_ctx *ctx,
                                   const onyx_tensor *const *inputs, size_t input_count) {
  const onyx__cpu_node *node = state;
  onyx_status st = onyx__cpu_check_inputs(ctx, inputs, input_count, 2);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *a = inputs[0], *b = inputs[1];
  if (!onyx__cpu_dtype_in(a->dtype, CPU_POW_BASE_TYPES) ||
      !onyx__cpu_dtype_in(b->dtype, CPU_ARITH_MASK)) {
    ctx->set_error(ctx, "dtypes %s ^ %s are not supported", onyx__cpu_dtype_name(a->dtype),
                   onyx__cpu_dtype_name(b->dtype));
    return ONYX_STATUS_UNSUPPORTED;
  }
  onyx__cpu_bcast plan;
  char why[256];
  st = cpu_pow_plan(a, b, &plan, why, sizeof why);
  if (st != ONYX_STATUS_OK) {
    ctx->set_error(ctx, "%s", why);
    return st;
  }
  onyx_tensor *y = NULL;
  st = onyx__cpu_alloc_output(node, ctx, a->dtype, plan.out_rank, plan.out_dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  cpu_pow_walk w = {a, b, y->data, &plan};
  onyx__cpu_parallel_range(node->provider, plan.out_numel, ONYX__CPU_PARALLEL_GRAIN / 4,
                           cpu_pow_slice, &w);
  return ONYX_STATUS_OK;
}

/* Opset 1-6 Pow broadcast with attributes; models that old are not supported. */
const onyx_kernel_table onyx__cpu_k_pow = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "",
    .op_type = "Pow",
    .since_opset = 7,
    .until_opset = 0,
    .type_input = 0,
    .type_mask = CPU_POW_BASE_TYPES,
    .create = onyx__cpu_create_plain,
    .destroy = onyx__cpu_destroy,
    .compute = cpu_pow_compute,
    .infer = cpu_pow_infer,
};

/* ------------------------------------------------------------------ Mod */

/*
 * Mod(A, B): with fmod = 0 (integers only) the result takes the divisor's sign, as
 * Python's %; with fmod = 1 it takes the dividend's, as C's fmod. Integers go
 * through int64 (uint64 for the unsigned types); a zero divisor is rejected first.
 */
typedef struct cpu_mod_state {
  onyx__cpu_node base;
  bool fmod;
} cpu_mod_state;

typedef struct cpu_mod_walk {
  const onyx_tensor *a, *b;
  void *y;
  const onyx__cpu_bcast *plan;
  bool fmod;
} cpu_mod_walk;

static bool cpu_is_unsigned(uint32_t t) {
  return t == ONYX_DTYPE_UINT8 || t == ONYX_DTYPE_UINT16 || t == ONYX_DTYPE_UINT32 ||
         t == ONYX_DTYPE_UINT64;
}

static uint64_t cpu_load_bits(uint32_t t, const void *p, int64_t i) {
  switch (onyx_dtype_size(t)) {
  case 1:
    return t == ONYX_DTYPE_INT8 ? (uint64_t)(int64_t)((const int8_t *)p)[i]
                                : ((const uint8_t *)p)[i];
  case 2:
    return t == ONYX_DTYPE_INT16 ? (uint64_t)(int64_t)((const int16_t *)p)[i]
                                 : ((const uint16_t *)p)[i];
  case 4:
    return t == ONYX_DTYPE_INT32 ? (uint64_t)(int64_t)((const int32_t *)p)[i]
                                 : ((const uint32_t *)p)[i];
  default:
    return ((const uint64_t *)p)[i];
  }
}

static void cpu_store_bits(uint32_t t, void *p, int64_t i, uint64_t v) {
  switch (onyx_dtype_size(t)) {
  case 1:
    ((uint8_t *)p)[i] = (uint8_t)v;
    break;
  case 2:
    ((uint16_t *)p)[i] = (uint16_t)v;
    break;
  case 4:
    ((uint32_t *)p)[i] = (uint32_t)v;
    break;
  default:
    ((uint64_t *)p)[i] = v;
    break;
  }
}

static void cpu_mod_run(void *arg, const int64_t *in_off, int64_t out_off, int64_t n,
                        const int64_t *in_strides) {
  const cpu_mod_walk *w = arg;
  const uint32_t t = w->a->dtype;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t ia = in_off[0] + i * in_strides[0], ib = in_off[1] + i * in_strides[1];
    if (onyx__cpu_dtype_in(t, ONYX__CPU_FLOAT_TYPES)) {
      double x = onyx__cpu_load_f64(t, w->a->data, ia), d = onyx__cpu_load_f64(t, w->b->data, ib);
      double r = fmod(x, d);
      if (!w->fmod && r != 0 && (r < 0) != (d < 0)) r += d;
      onyx__cpu_store_f64(t, w->y, out_off + i, r);
    } else if (cpu_is_unsigned(t)) {
      uint64_t x = cpu_load_bits(t, w->a->data, ia), d = cpu_load_bits(t, w->b->data, ib);
      cpu_store_bits(t, w->y, out_off + i, x % d);
    } else {
      int64_t x = (int64_t)cpu_load_bits(t, w->a->data, ia);
      int64_t d = (int64_t)cpu_load_bits(t, w->b->data, ib);
      int64_t r = d == -1 ? 0 : x % d; /* INT64_MIN % -1 traps on x86 */
      if (!w->fmod && r != 0 && (r < 0) != (d < 0)) r += d;
      cpu_store_bits(t, w->y, out_off + i, (uint64_t)r);
    }
  }
}

static void cpu_mod_slice(void *arg, int64_t begin, int64_t end) {
  const cpu_mod_walk *w = arg;
  onyx__cpu_bcast_walk_range(w->plan, begin, end, cpu_mod_run, arg);
}

static onyx_status cpu_mod_compute(void *state, onyx_compute_ctx *ctx,
                                   const onyx_tensor *const *inputs, size_t input_count) {
  const cpu_mod_state *s = state;
  onyx_status st = onyx__cpu_check_inputs(ctx, inputs, input_count, 2);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *a = inputs[0], *b = inputs[1];
  if (!onyx__cpu_dtype_in(a->dtype, CPU_ARITH_MASK) || b->dtype != a->dtype) {
    ctx->set_error(ctx, "dtypes %s and %s are not supported (one numeric dtype expected)",
                   onyx__cpu_dtype_name(a->dtype), onyx__cpu_dtype_name(b->dtype));
    return ONYX_STATUS_UNSUPPORTED;
  }
  bool is_float = onyx__cpu_dtype_in(a->dtype, ONYX__CPU_FLOAT_TYPES);
  if (is_float && !s->fmod) {
    ctx->set_error(ctx, "floating-point Mod needs fmod = 1");
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  onyx__cpu_bcast plan;
  char why[256];
  st = cpu_pow_plan(a, b, &plan, why, sizeof why);
  if (st != ONYX_STATUS_OK) {
    ctx->set_error(ctx, "%s", why);
    return st;
  }
  if (!is_float && plan.out_numel > 0 && cpu_has_zero(b)) {
    ctx->set_error(ctx, "integer modulo by zero (input 1 has a zero element)");
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  onyx_tensor *y = NULL;
  st = onyx__cpu_alloc_output(&s->base, ctx, a->dtype, plan.out_rank, plan.out_dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  cpu_mod_walk w = {a, b, y->data, &plan, s->fmod};
  onyx__cpu_parallel_range(s->base.provider, plan.out_numel, ONYX__CPU_PARALLEL_GRAIN / 4,
                           cpu_mod_slice, &w);
  return ONYX_STATUS_OK;
}

static onyx_status cpu_mod_create(void *provider_state, const onyx_node_info *node,
                                  void **out_state, char *err, size_t err_cap) {
  cpu_mod_state *s = onyx__cpu_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  int64_t fmod_attr = 0;
  onyx_status st = onyx__cpu_attr_int(node, "fmod", 0, &fmod_attr, err, err_cap);
  if (st != ONYX_STATUS_OK) {
    onyx__cpu_destroy(s);
    return st;
  }
  s->fmod = fmod_attr != 0;
  *out_state = s;
  return ONYX_STATUS_OK;
}

const onyx_kernel_table onyx__cpu_k_mod = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "",
    .op_type = "Mod",
    .since_opset = 10,
    .until_opset = 0,
    .type_input = 0,
    .type_mask = CPU_ARITH_MASK,
    .create = cpu_mod_create,
    .destroy = onyx__cpu_destroy,
    .compute = cpu_mod_compute,
    .infer = cpu_pow_infer,
};
