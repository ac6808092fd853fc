/*
 * Comparisons and selection: Equal, Greater, Less, GreaterOrEqual, LessOrEqual
 * (numeric → bool), And, Or, Xor, Not (bool), Where, Max, Min and Sum (variadic),
 * Clip.
 *
 * All broadcast like numpy through the loop nest of cpu_broadcast.c, split over
 * the provider's threads when large. float16 and bfloat16 compare as float32
 * (every value widens exactly); Max, Min and Where copy the chosen element's bits,
 * so they never round. Max and Min propagate NaN as numpy's maximum/minimum do.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "cpu_impl.h"

#define CPU_NUMERIC_TYPES (ONYX__CPU_FLOAT_TYPES | ONYX__CPU_INT_TYPES)
#define CPU_BOOL_TYPE ONYX_DTYPE_BIT(ONYX_DTYPE_BOOL)

#define CPU_LOAD_SAME(v) (v)

/* (suffix, storage type, compare type, loader) for every numeric type and bool. */
#define CPU_CMP_TYPES(X)                                                                           \
  X(f32, float, float, CPU_LOAD_SAME, ONYX_DTYPE_FLOAT32)                                          \
  X(f64, double, double, CPU_LOAD_SAME, ONYX_DTYPE_FLOAT64)                                        \
  X(f16, uint16_t, float, onyx__cpu_f16_to_f32, ONYX_DTYPE_FLOAT16)                                \
  X(bf16, uint16_t, float, onyx__cpu_bf16_to_f32, ONYX_DTYPE_BFLOAT16)                             \
  X(i8, int8_t, int8_t, CPU_LOAD_SAME, ONYX_DTYPE_INT8)                                            \
  X(i16, int16_t, int16_t, CPU_LOAD_SAME, ONYX_DTYPE_INT16)                                        \
  X(i32, int32_t, int32_t, CPU_LOAD_SAME, ONYX_DTYPE_INT32)                                        \
  X(i64, int64_t, int64_t, CPU_LOAD_SAME, ONYX_DTYPE_INT64)                                        \
  X(u8, uint8_t, uint8_t, CPU_LOAD_SAME, ONYX_DTYPE_UINT8)                                         \
  X(u16, uint16_t, uint16_t, CPU_LOAD_SAME, ONYX_DTYPE_UINT16)                                     \
  X(u32, uint32_t, uint32_t, CPU_LOAD_SAME, ONYX_DTYPE_UINT32)                                     \
  X(u64, uint64_t, uint64_t, CPU_LOAD_SAME, ONYX_DTYPE_UINT64)                                     \
  X(b8, uint8_t, uint8_t, CPU_LOAD_SAME, ONYX_DTYPE_BOOL)

/* ------------------------------------------------------------------ to-bool ops */

typedef enum cpu_bool_op {
  CPU_EQ,
  CPU_GT,
  CPU_LT,
  CPU_GE,
  CPU_LE,
  CPU_AND,
  CPU_OR,
  CPU_XOR
} cpu_bool_op;

/* y[i] = a[i·sa] op b[i·sb], sa and sb each 0 or 1. */
typedef void (*cpu_cmp_loop)(cpu_bool_op op, const void *a, int64_t sa, const void *b, int64_t sb,
                             uint8_t *y, int64_t n);

#define CPU_CMP_CASE(OP, EXPR, V, LOAD)                                                            \
  case OP:                                                                                         \
    for (int64_t i = 0; i < n; ++i) {                                                              \
      const V x = LOAD(a[i * sa]), z = LOAD(b[i * sb]);                                            \
      y[i] = (uint8_t)(EXPR);                                                                      \
    }                                                                                              \
    break;

#define CPU_CMP_LOOP(sfx, T, V, LOAD, DTYPE)                                                       \
  static void cpu_cmp_##sfx(cpu_bool_op op, const void *pa, int64_t sa, const void *pb,            \
                            int64_t sb, uint8_t *y, int64_t n) {                                   \
    const T *a = pa, *b = pb;                                                                      \
    switch (op) {                                                                                  \
      CPU_CMP_CASE(CPU_EQ, x == z, V, LOAD)                                                        \
      CPU_CMP_CASE(CPU_GT, x > z, V, LOAD)                                                         \
      CPU_CMP_CASE(CPU_LT, x < z, V, LOAD)                                                         \
      CPU_CMP_CASE(CPU_GE, x >= z, V, LOAD)                                                        \
      CPU_CMP_CASE(CPU_LE, x <= z, V, LOAD)                                                        \
      CPU_CMP_CASE(CPU_AND, (x != 0) & (z != 0), V, LOAD)                                          \
      CPU_CMP_CASE(CPU_OR, (x != 0) | (z != 0), V, LOAD)                                           \
      CPU_CMP_CASE(CPU_XOR, (x != 0) ^ (z != 0), V, LOAD)                                          \
    }                                                                                              \
  }
CPU_CMP_TYPES(CPU_CMP_LOOP)

#define CPU_CMP_ENTRY(sfx, T, V, LOAD, DTYPE) [DTYPE] = cpu_cmp_##sfx,
static const cpu_cmp_loop cpu_cmp_loops[ONYX_DTYPE_BFLOAT16 + 1] = {CPU_CMP_TYPES(CPU_CMP_ENTRY)};

typedef struct cpu_bool_state {
  onyx__cpu_node base;
  cpu_bool_op op;
  uint64_t types;
} cpu_bool_state;

typedef struct cpu_walk {
  const onyx__cpu_bcast *plan;
  onyx__cpu_bcast_run_fn run;
  const unsigned char *in[3];
  size_t esize[3];
  unsigned char *y;
  size_t y_esize;
  int op; /* cpu_bool_op, or CPU_FOLD_* for Max, Min, Sum */
  cpu_cmp_loop cmp;
  uint32_t dtype;
} cpu_walk;

enum { CPU_FOLD_MAX, CPU_FOLD_MIN, CPU_FOLD_SUM };

static void cpu_walk_slice(void *arg, int64_t begin, int64_t end) {
  const cpu_walk *w = arg;
  onyx__cpu_bcast_walk_range(w->plan, begin, end, w->run, arg);
}

static void cpu_bool_run(void *arg, const int64_t *off, int64_t out_off, int64_t n,
                         const int64_t *strides) {
  const cpu_walk *w = arg;
  w->cmp((cpu_bool_op)w->op, w->in[0] + (size_t)off[0] * w->esize[0], strides[0],
         w->in[1] + (size_t)off[1] * w->esize[1], strides[1], w->y + out_off, n);
}

/* The broadcast plan of `count` inputs (at most 3 here), for compute and infer. */
static onyx_status cpu_plan(size_t count, const onyx_tensor *const *in, onyx__cpu_bcast *plan,
                            char *err, size_t err_cap) {
  uint32_t ranks[3];
  const int64_t *dims[3];
  for (size_t k = 0; k < count; ++k) {
    ranks[k] = in[k]->rank;
    dims[k] = in[k]->dims;
  }
  return onyx__cpu_bcast_init(plan, count, ranks, dims, err, err_cap);
}

static onyx_status cpu_bool_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                  onyx_tensor *outputs, size_t output_count) {
  (void)state;
  if (input_count < 2) return ONYX_STATUS_INVALID_ARGUMENT;
  const onyx_tensor *in[2] = {&inputs[0], &inputs[1]};
  onyx__cpu_bcast plan;
  char why[ONYX__CPU_REASON_CAP] = "";
  onyx_status st = cpu_plan(2, in, &plan, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cpu_reason(state, st, why);
  onyx__cpu_infer_out(outputs, output_count, 0, ONYX_DTYPE_BOOL, plan.out_rank, plan.out_dims);
  return st;
}

static onyx_status cpu_bool_compute(void *state, onyx_compute_ctx *ctx,
                                    const onyx_tensor *const *inputs, size_t input_count) {
  const cpu_bool_state *s = state;
  onyx_status st = onyx__cpu_check_inputs(ctx, inputs, input_count, 2);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *a = inputs[0], *b = inputs[1];
  if (!onyx__cpu_dtype_in(a->dtype, s->types)) {
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
  st = cpu_plan(2, inputs, &plan, why, sizeof why);
  if (st != ONYX_STATUS_OK) {
    ctx->set_error(ctx, "%s", why);
    return st;
  }
  onyx_tensor *y = NULL;
  st = onyx__cpu_alloc_output(&s->base, ctx, ONYX_DTYPE_BOOL, plan.out_rank, plan.out_dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  size_t es = onyx_dtype_size(a->dtype);
  cpu_walk w = {.plan = &plan,
                .run = cpu_bool_run,
                .in = {a->data, b->data},
                .esize = {es, es},
                .y = y->data,
                .op = (int)s->op,
                .cmp = cpu_cmp_loops[a->dtype]};
  onyx__cpu_parallel_range(s->base.provider, plan.out_numel, ONYX__CPU_PARALLEL_GRAIN,
                           cpu_walk_slice, &w);
  return ONYX_STATUS_OK;
}

#define CPU_BOOL_KERNEL(sym, OP, NAME, SINCE, TYPES)                                               \
  static onyx_status cpu_create_##sym(void *p, const onyx_node_info *node, void **out, char *err,  \
                                      size_t cap) {                                                \
    cpu_bool_state *s = onyx__cpu_state_new(sizeof *s, p, node, err, cap);                         \
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
      .since_opset = SINCE,                                                                        \
      .until_opset = 0,                                                                            \
      .type_input = 0,                                                                             \
      .type_mask = TYPES,                                                                          \
      .create = cpu_create_##sym,                                                                  \
      .destroy = onyx__cpu_destroy,                                                                \
      .compute = cpu_bool_compute,                                                                 \
      .infer = cpu_bool_infer,                                                                     \
  };

/* Opsets before 7 broadcast through attributes; only numpy broadcasting is done. */
CPU_BOOL_KERNEL(equal, CPU_EQ, "Equal", 7, CPU_NUMERIC_TYPES | CPU_BOOL_TYPE)
CPU_BOOL_KERNEL(greater, CPU_GT, "Greater", 7, CPU_NUMERIC_TYPES)
CPU_BOOL_KERNEL(less, CPU_LT, "Less", 7, CPU_NUMERIC_TYPES)
CPU_BOOL_KERNEL(greater_equal, CPU_GE, "GreaterOrEqual", 12, CPU_NUMERIC_TYPES)
CPU_BOOL_KERNEL(less_equal, CPU_LE, "LessOrEqual", 12, CPU_NUMERIC_TYPES)
CPU_BOOL_KERNEL(and, CPU_AND, "And", 7, CPU_BOOL_TYPE)
CPU_BOOL_KERNEL(or, CPU_OR, "Or", 7, CPU_BOOL_TYPE)
CPU_BOOL_KERNEL(xor, CPU_XOR, "Xor", 7, CPU_BOOL_TYPE)

/* ------------------------------------------------------------------ Not */

static void cpu_not_slice(void *arg, int64_t begin, int64_t end) {
  const cpu_walk *w = arg;
  for (int64_t i = begin; i < end; ++i) w->y[i] = w->in[0][i] == 0;
}

static onyx_status cpu_not_compute(void *state, onyx_compute_ctx *ctx,
                                   const onyx_tensor *const *inputs, size_t input_count) {
  const onyx__cpu_node *node = state;
  onyx_status st = onyx__cpu_check_inputs(ctx, inputs, input_count, 1);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *x = inputs[0];
  if (x->dtype != ONYX_DTYPE_BOOL) {
    ctx->set_error(ctx, "input 0 has dtype %s, expected bool", onyx__cpu_dtype_name(x->dtype));
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  onyx_tensor *y = NULL;
  st = onyx__cpu_alloc_output(node, ctx, ONYX_DTYPE_BOOL, x->rank, x->dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  cpu_walk w = {.in = {x->data}, .y = y->data};
  onyx__cpu_parallel_range(node->provider, onyx_tensor_numel(x), ONYX__CPU_PARALLEL_GRAIN,
                           cpu_not_slice, &w);
  return ONYX_STATUS_OK;
}

const onyx_kernel_table onyx__cpu_k_not = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "",
    .op_type = "Not",
    .since_opset = 1,
    .until_opset = 0,
    .type_input = 0,
    .type_mask = CPU_BOOL_TYPE,
    .create = onyx__cpu_create_plain,
    .destroy = onyx__cpu_destroy,
    .compute = cpu_not_compute,
    .infer = onyx__cpu_infer_same,
};

/* ------------------------------------------------------------------ Where */

/* Copies n elements of `es` bytes, from a source that advances by `stride` (0 or 1)
 * elements. */
static inline void cpu_copy_elems(unsigned char *dst, const unsigned char *src, int64_t stride,
                                  int64_t n, size_t es) {
  if (stride) {
    memcpy(dst, src, (size_t)n * es);
    return;
  }
  for (int64_t i = 0; i < n; ++i) memcpy(dst + (size_t)i * es, src, es);
}

static void cpu_where_run(void *arg, const int64_t *off, int64_t out_off, int64_t n,
                          const int64_t *strides) {
  const cpu_walk *w = arg;
  const size_t es = w->y_esize;
  const unsigned char *c = w->in[0] + off[0];
  const unsigned char *x = w->in[1] + (size_t)off[1] * es, *z = w->in[2] + (size_t)off[2] * es;
  unsigned char *y = w->y + (size_t)out_off * es;
  if (strides[0] == 0) { /* one condition for the run: a plain copy */
    cpu_copy_elems(y, c[0] ? x : z, c[0] ? strides[1] : strides[2], n, es);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const unsigned char *src =
        c[i] ? x + (size_t)(i * strides[1]) * es : z + (size_t)(i * strides[2]) * es;
    memcpy(y + (size_t)i * es, src, es);
  }
}

static onyx_status cpu_where_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                   onyx_tensor *outputs, size_t output_count) {
  (void)state;
  if (input_count < 3) return ONYX_STATUS_INVALID_ARGUMENT;
  const onyx_tensor *in[3] = {&inputs[0], &inputs[1], &inputs[2]};
  onyx__cpu_bcast plan;
  char why[ONYX__CPU_REASON_CAP] = "";
  onyx_status st = cpu_plan(3, in, &plan, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cpu_reason(state, st, why);
  onyx__cpu_infer_out(outputs, output_count, 0, inputs[1].dtype, plan.out_rank, plan.out_dims);
  return st;
}

static onyx_status cpu_where_compute(void *state, onyx_compute_ctx *ctx,
                                     const onyx_tensor *const *inputs, size_t input_count) {
  const onyx__cpu_node *node = state;
  onyx_status st = onyx__cpu_check_inputs(ctx, inputs, input_count, 3);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *c = inputs[0], *x = inputs[1], *z = inputs[2];
  if (c->dtype != ONYX_DTYPE_BOOL) {
    ctx->set_error(ctx, "input 0 (condition) has dtype %s, expected bool",
                   onyx__cpu_dtype_name(c->dtype));
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  if (onyx_dtype_size(x->dtype) == 0 || z->dtype != x->dtype) {
    ctx->set_error(ctx, "inputs 1 and 2 have dtypes %s and %s, expected one fixed-size dtype",
                   onyx__cpu_dtype_name(x->dtype), onyx__cpu_dtype_name(z->dtype));
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  onyx__cpu_bcast plan;
  char why[256];
  st = cpu_plan(3, inputs, &plan, why, sizeof why);
  if (st != ONYX_STATUS_OK) {
    ctx->set_error(ctx, "%s", why);
    return st;
  }
  onyx_tensor *y = NULL;
  st = onyx__cpu_alloc_output(node, ctx, x->dtype, plan.out_rank, plan.out_dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  cpu_walk w = {.plan = &plan,
                .run = cpu_where_run,
                .in = {c->data, x->data, z->data},
                .y = y->data,
                .y_esize = onyx_dtype_size(x->dtype)};
  onyx__cpu_parallel_range(node->provider, plan.out_numel, ONYX__CPU_PARALLEL_GRAIN, cpu_walk_slice,
                           &w);
  return ONYX_STATUS_OK;
}

/* The type constraint is on X (input 1); the condition is always bool. */
const onyx_kernel_table onyx__cpu_k_where = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "",
    .op_type = "Where",
    .since_opset = 9,
    .until_opset = 0,
    .type_input = 1,
    .type_mask = ONYX__CPU_FIXED_TYPES,
    .create = onyx__cpu_create_plain,
    .destroy = onyx__cpu_destroy,
    .compute = cpu_where_compute,
    .infer = cpu_where_infer,
};

/* ------------------------------------------------------------------ Max, Min */

/* isnan for any element type (integers convert exactly enough: never NaN). */
static inline bool cpu_nan(double v) { return isnan(v); }

/* y[i] = max/min(y[i], b[i·sb]) in place, or y[i] = b[i·sb] (copy) for the first
 * input. NaN wins, as in numpy. */
#define CPU_MINMAX_LOOP(sfx, T, V, LOAD, DTYPE)                                                    \
  static void cpu_minmax_##sfx(bool is_max, const void *pb, int64_t sb, void *py, int64_t n) {     \
    const T *b = pb;                                                                               \
    T *y = py;                                                                                     \
    for (int64_t i = 0; i < n; ++i) {                                                              \
      const V u = LOAD(y[i]), v = LOAD(b[i * sb]);                                                 \
      bool take = is_max ? (v > u || cpu_nan(v)) : (v < u || cpu_nan(v));                          \
      if (take && !cpu_nan(u)) y[i] = b[i * sb];                                                   \
    }                                                                                              \
  }
CPU_CMP_TYPES(CPU_MINMAX_LOOP)

/* y[i] += b[i·sb]: integers wrap (unsigned arithmetic), 16-bit floats round once
 * per addition, as a chain of Adds would. */
#define CPU_SUM_LOOP(sfx, T, U, LOAD, STORE)                                                       \
  static void cpu_sum_##sfx(const void *pb, int64_t sb, void *py, int64_t n) {                     \
    const T *b = pb;                                                                               \
    T *y = py;                                                                                     \
    for (int64_t i = 0; i < n; ++i) y[i] = STORE((U)LOAD(y[i]) + (U)LOAD(b[i * sb]));              \
  }
#define CPU_SAME(v) (v)
CPU_SUM_LOOP(f32, float, float, CPU_SAME, CPU_SAME)
CPU_SUM_LOOP(f64, double, double, CPU_SAME, CPU_SAME)
CPU_SUM_LOOP(f16, uint16_t, float, onyx__cpu_f16_to_f32, onyx__cpu_f32_to_f16)
CPU_SUM_LOOP(bf16, uint16_t, float, onyx__cpu_bf16_to_f32, onyx__cpu_f32_to_bf16)
CPU_SUM_LOOP(i8, int8_t, unsigned, CPU_SAME, (int8_t))
CPU_SUM_LOOP(i16, int16_t, unsigned, CPU_SAME, (int16_t))
CPU_SUM_LOOP(i32, int32_t, uint32_t, CPU_SAME, (int32_t))
CPU_SUM_LOOP(i64, int64_t, uint64_t, CPU_SAME, (int64_t))
CPU_SUM_LOOP(u8, uint8_t, unsigned, CPU_SAME, (uint8_t))
CPU_SUM_LOOP(u16, uint16_t, unsigned, CPU_SAME, (uint16_t))
CPU_SUM_LOOP(u32, uint32_t, uint32_t, CPU_SAME, (uint32_t))
CPU_SUM_LOOP(u64, uint64_t, uint64_t, CPU_SAME, (uint64_t))

typedef void (*cpu_sum_loop)(const void *b, int64_t sb, void *y, int64_t n);
static const cpu_sum_loop cpu_sum_loops[ONYX_DTYPE_BFLOAT16 + 1] = {
    [ONYX_DTYPE_FLOAT32] = cpu_sum_f32, [ONYX_DTYPE_FLOAT64] = cpu_sum_f64,
    [ONYX_DTYPE_FLOAT16] = cpu_sum_f16, [ONYX_DTYPE_BFLOAT16] = cpu_sum_bf16,
    [ONYX_DTYPE_INT8] = cpu_sum_i8,     [ONYX_DTYPE_INT16] = cpu_sum_i16,
    [ONYX_DTYPE_INT32] = cpu_sum_i32,   [ONYX_DTYPE_INT64] = cpu_sum_i64,
    [ONYX_DTYPE_UINT8] = cpu_sum_u8,    [ONYX_DTYPE_UINT16] = cpu_sum_u16,
    [ONYX_DTYPE_UINT32] = cpu_sum_u32,  [ONYX_DTYPE_UINT64] = cpu_sum_u64};

typedef void (*cpu_minmax_loop)(bool is_max, const void *b, int64_t sb, void *y, int64_t n);
#define CPU_MINMAX_ENTRY(sfx, T, V, LOAD, DTYPE) [DTYPE] = cpu_minmax_##sfx,
static const cpu_minmax_loop cpu_minmax_loops[ONYX_DTYPE_BFLOAT16 + 1] = {
    CPU_CMP_TYPES(CPU_MINMAX_ENTRY)};

static void cpu_minmax_run(void *arg, const int64_t *off, int64_t out_off, int64_t n,
                           const int64_t *strides) {
  const cpu_walk *w = arg;
  const size_t es = w->y_esize;
  unsigned char *y = w->y + (size_t)out_off * es;
  const unsigned char *b = w->in[1] + (size_t)off[1] * es;
  if (w->in[0] == NULL)
    cpu_copy_elems(y, b, strides[1], n, es);
  else if (w->op == CPU_FOLD_SUM)
    cpu_sum_loops[w->dtype](b, strides[1], y, n);
  else
    cpu_minmax_loops[w->dtype](w->op == CPU_FOLD_MAX, b, strides[1], y, n);
}

typedef struct cpu_minmax_state {
  onyx__cpu_node base;
  int op; /* CPU_FOLD_* */
} cpu_minmax_state;

static onyx_status cpu_minmax_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                    onyx_tensor *outputs, size_t output_count) {
  (void)state;
  const onyx_tensor *in[ONYX__CPU_INFER_MAX_INPUTS];
  if (input_count == 0 ||
      !onyx__cpu_infer_inputs(inputs, input_count, in, ONYX__CPU_INFER_MAX_INPUTS))
    return ONYX_STATUS_UNSUPPORTED;
  uint32_t rank;
  int64_t dims[ONYX_MAX_RANK];
  char why[ONYX__CPU_REASON_CAP] = "";
  onyx_status st = onyx__cpu_bcast_shape(input_count, in, &rank, dims, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cpu_reason(state, st, why);
  onyx__cpu_infer_out(outputs, output_count, 0, inputs[0].dtype, rank, dims);
  return st;
}

static onyx_status cpu_minmax_compute(void *state, onyx_compute_ctx *ctx,
                                      const onyx_tensor *const *inputs, size_t input_count) {
  const cpu_minmax_state *s = state;
  if (input_count == 0) {
    ctx->set_error(ctx, "needs at least one input");
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  onyx_status st = onyx__cpu_check_inputs(ctx, inputs, input_count, input_count);
  if (st != ONYX_STATUS_OK) return st;
  const uint32_t dtype = inputs[0]->dtype;
  if (!onyx__cpu_dtype_in(dtype, CPU_NUMERIC_TYPES)) {
    ctx->set_error(ctx, "input 0 has dtype %s, which is not supported",
                   onyx__cpu_dtype_name(dtype));
    return ONYX_STATUS_UNSUPPORTED;
  }
  for (size_t i = 1; i < input_count; ++i) {
    if (inputs[i]->dtype != dtype) {
      ctx->set_error(ctx, "input %zu has dtype %s, expected %s like input 0", i,
                     onyx__cpu_dtype_name(inputs[i]->dtype), onyx__cpu_dtype_name(dtype));
      return ONYX_STATUS_INVALID_ARGUMENT;
    }
  }
  uint32_t rank;
  int64_t dims[ONYX_MAX_RANK];
  char why[256];
  st = onyx__cpu_bcast_shape(input_count, inputs, &rank, dims, why, sizeof why);
  if (st != ONYX_STATUS_OK) {
    ctx->set_error(ctx, "%s", why);
    return st;
  }
  onyx_tensor *y = NULL;
  st = onyx__cpu_alloc_output(&s->base, ctx, dtype, rank, dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  /* Fold the inputs into y one at a time: y = input 0 broadcast, then y = op(y, xi). */
  for (size_t i = 0; i < input_count; ++i) {
    onyx__cpu_bcast plan;
    uint32_t ranks[2] = {rank, inputs[i]->rank};
    const int64_t *d[2] = {dims, inputs[i]->dims};
    st = onyx__cpu_bcast_init(&plan, 2, ranks, d, why, sizeof why);
    if (st != ONYX_STATUS_OK) { /* cannot happen: the shape above covers every input */
      ctx->set_error(ctx, "%s", why);
      return ONYX_STATUS_INTERNAL;
    }
    cpu_walk w = {.plan = &plan,
                  .run = cpu_minmax_run,
                  .in = {i == 0 ? NULL : y->data, inputs[i]->data},
                  .y = y->data,
                  .y_esize = onyx_dtype_size(dtype),
                  .op = s->op,
                  .dtype = dtype};
    onyx__cpu_parallel_range(s->base.provider, plan.out_numel, ONYX__CPU_PARALLEL_GRAIN,
                             cpu_walk_slice, &w);
  }
  return ONYX_STATUS_OK;
}

#define CPU_MINMAX_KERNEL(sym, OP, NAME, TYPES)                                                    \
  static onyx_status cpu_create_##sym(void *p, const onyx_node_info *node, void **out, char *err,  \
                                      size_t cap) {                                                \
    cpu_minmax_state *s = onyx__cpu_state_new(sizeof *s, p, node, err, cap);                       \
    if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;                                               \
    s->op = OP;                                                                                    \
    *out = s;                                                                                      \
    return ONYX_STATUS_OK;                                                                         \
  }                                                                                                \
  const onyx_kernel_table onyx__cpu_k_##sym = {                                                    \
      .struct_size = sizeof(onyx_kernel_table),                                                    \
      .version = ONYX_ABI_VERSION,                                                                 \
      .domain = "",                                                                                \
      .op_type = NAME,                                                                             \
      .since_opset = 8,                                                                            \
      .until_opset = 0,                                                                            \
      .type_input = 0,                                                                             \
      .type_mask = TYPES,                                                                          \
      .create = cpu_create_##sym,                                                                  \
      .destroy = onyx__cpu_destroy,                                                                \
      .compute = cpu_minmax_compute,                                                               \
      .infer = cpu_minmax_infer,                                                                   \
  };

/* Opset 8 added broadcasting; 12 and 13 only added types. Sum takes floats. */
CPU_MINMAX_KERNEL(max, CPU_FOLD_MAX, "Max", CPU_NUMERIC_TYPES)
CPU_MINMAX_KERNEL(min, CPU_FOLD_MIN, "Min", CPU_NUMERIC_TYPES)
CPU_MINMAX_KERNEL(sum, CPU_FOLD_SUM, "Sum", ONYX__CPU_FLOAT_TYPES)

/* ------------------------------------------------------------------ Clip */

typedef struct cpu_clip_state {
  onyx__cpu_node base;
  float attr_min, attr_max; /* before opset 11 */
} cpu_clip_state;

typedef struct cpu_clip_job {
  uint32_t dtype;
  const void *x;
  void *y;
  const void *lo, *hi; /* one element each in x's dtype, or NULL */
  float flo, fhi;      /* float bounds (attributes, or from 16-bit inputs) */
} cpu_clip_job;

#define CPU_CLIP_CASE(DTYPE, T)                                                                    \
  case DTYPE: {                                                                                    \
    const T *x = j->x;                                                                             \
    T *y = j->y;                                                                                   \
    const bool has_lo = j->lo != NULL, has_hi = j->hi != NULL;                                     \
    const T lo = has_lo ? *(const T *)j->lo : (T)0, hi = has_hi ? *(const T *)j->hi : (T)0;        \
    for (int64_t i = begin; i < end; ++i) {                                                        \
      T v = x[i];                                                                                  \
      if (has_lo && v < lo) v = lo;                                                                \
      if (has_hi && v > hi) v = hi;                                                                \
      y[i] = v;                                                                                    \
    }                                                                                              \
    break;                                                                                         \
  }

static void cpu_clip_slice(void *arg, int64_t begin, int64_t end) {
  const cpu_clip_job *j = arg;
  switch (j->dtype) {
    CPU_CLIP_CASE(ONYX_DTYPE_FLOAT64, double)
    CPU_CLIP_CASE(ONYX_DTYPE_INT8, int8_t)
    CPU_CLIP_CASE(ONYX_DTYPE_INT16, int16_t)
    CPU_CLIP_CASE(ONYX_DTYPE_INT32, int32_t)
    CPU_CLIP_CASE(ONYX_DTYPE_INT64, int64_t)
    CPU_CLIP_CASE(ONYX_DTYPE_UINT8, uint8_t)
    CPU_CLIP_CASE(ONYX_DTYPE_UINT16, uint16_t)
    CPU_CLIP_CASE(ONYX_DTYPE_UINT32, uint32_t)
    CPU_CLIP_CASE(ONYX_DTYPE_UINT64, uint64_t)
  default: /* float32, float16, bfloat16 with float bounds */
    for (int64_t i = begin; i < end; ++i) {
      float v = onyx__cpu_load_f32(j->dtype, j->x, i);
      if (v < j->flo) v = j->flo;
      if (v > j->fhi) v = j->fhi;
      onyx__cpu_store_f32(j->dtype, j->y, i, v);
    }
    break;
  }
}

static onyx_status cpu_clip_compute(void *state, onyx_compute_ctx *ctx,
                                    const onyx_tensor *const *inputs, size_t input_count) {
  const cpu_clip_state *s = state;
  onyx_status st = onyx__cpu_check_inputs(ctx, inputs, input_count, 1);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *x = inputs[0];
  if (!onyx__cpu_dtype_in(x->dtype, CPU_NUMERIC_TYPES)) {
    ctx->set_error(ctx, "input 0 has dtype %s, which is not supported",
                   onyx__cpu_dtype_name(x->dtype));
    return ONYX_STATUS_UNSUPPORTED;
  }
  cpu_clip_job j = {.dtype = x->dtype, .x = x->data, .flo = -INFINITY, .fhi = INFINITY};
  if (s->base.opset < 11) {
    j.flo = s->attr_min;
    j.fhi = s->attr_max;
  } else {
    for (size_t k = 1; k < 3; ++k) {
      const onyx_tensor *b = k < input_count ? inputs[k] : NULL;
      if (b == NULL) continue;
      if (b->dtype != x->dtype || onyx_tensor_numel(b) != 1) {
        ctx->set_error(ctx, "input %zu (%s) is %s %s, expected a %s scalar", k,
                       k == 1 ? "min" : "max", onyx__cpu_dtype_name(b->dtype),
                       onyx__cpu_tensor_shape(b).s, onyx__cpu_dtype_name(x->dtype));
        return ONYX_STATUS_INVALID_ARGUMENT;
      }
      if (k == 1)
        j.lo = b->data;
      else
        j.hi = b->data;
    }
    if (x->dtype == ONYX_DTYPE_FLOAT32 || x->dtype == ONYX_DTYPE_FLOAT16 ||
        x->dtype == ONYX_DTYPE_BFLOAT16) {
      if (j.lo) j.flo = onyx__cpu_load_f32(x->dtype, j.lo, 0);
      if (j.hi) j.fhi = onyx__cpu_load_f32(x->dtype, j.hi, 0);
    }
  }
  if (s->base.opset < 11 && !onyx__cpu_dtype_in(x->dtype, ONYX__CPU_FLOAT_TYPES)) {
    ctx->set_error(ctx, "input 0 has dtype %s; Clip before opset 11 takes floats only",
                   onyx__cpu_dtype_name(x->dtype));
    return ONYX_STATUS_UNSUPPORTED;
  }
  double dlo = j.flo, dhi = j.fhi; /* float64 under attribute bounds */
  if (s->base.opset < 11 && x->dtype == ONYX_DTYPE_FLOAT64) {
    j.lo = &dlo;
    j.hi = &dhi;
  }
  onyx_tensor *y = NULL;
  st = onyx__cpu_alloc_output(&s->base, ctx, x->dtype, x->rank, x->dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  j.y = y->data;
  onyx__cpu_parallel_range(s->base.provider, onyx_tensor_numel(x), ONYX__CPU_PARALLEL_GRAIN,
                           cpu_clip_slice, &j);
  return ONYX_STATUS_OK;
}

/* Opset 6-10 defaults are ±FLT_MAX (the schema's), opset 1-5 ±infinity. */
static onyx_status cpu_clip_create(void *provider_state, const onyx_node_info *node,
                                   void **out_state, char *err, size_t err_cap) {
  cpu_clip_state *s = onyx__cpu_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  float dflt = node->opset >= 6 ? FLT_MAX : INFINITY;
  onyx_status st = onyx__cpu_attr_float(node, "min", -dflt, &s->attr_min, err, err_cap);
  if (st == ONYX_STATUS_OK)
    st = onyx__cpu_attr_float(node, "max", dflt, &s->attr_max, err, err_cap);
  if (st != ONYX_STATUS_OK) {
    onyx__cpu_destroy(s);
    return st;
  }
  *out_state = s;
  return ONYX_STATUS_OK;
}

#define CPU_CLIP_KERNEL(sym, SINCE, UNTIL)                                                         \
  const onyx_kernel_table onyx__cpu_k_##sym = {                                                    \
      .struct_size = sizeof(onyx_kernel_table),                                                    \
      .version = ONYX_ABI_VERSION,                                                                 \
      .domain = "",                                                                                \
      .op_type = "Clip",                                                                           \
      .since_opset = SINCE,                                                                        \
      .until_opset = UNTIL,                                                                        \
      .type_input = 0,                                                                             \
      .type_mask = CPU_NUMERIC_TYPES,                                                              \
      .create = cpu_clip_create,                                                                   \
      .destroy = onyx__cpu_destroy,                                                                \
      .compute = cpu_clip_compute,                                                                 \
      .infer = onyx__cpu_infer_same,                                                               \
  };
CPU_CLIP_KERNEL(clip_1, 1, 10)  /* bounds are attributes */
CPU_CLIP_KERNEL(clip_11, 11, 0) /* bounds are optional scalar inputs */
