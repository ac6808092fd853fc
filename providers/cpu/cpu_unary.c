/*
 * Unary elementwise ops: Relu, Sigmoid, Sqrt, Neg, Exp, Log, Abs, Reciprocal,
 * Tanh, Erf, Sin, Cos, Gelu (opset 20, exact or tanh), and com.microsoft Gelu and
 * FastGelu (with its optional bias).
 *
 * Each op has a float32 loop and a float64 loop generated from one expression, so
 * the compiler sees a plain loop it can vectorise; float16/bfloat16 are widened a
 * chunk at a time into a stack buffer, run through the float32 loop and rounded
 * once. Neg, Abs and Relu also take integers (wrapping like the hardware: the
 * negation of the smallest value is itself). Large tensors are split over the
 * provider's threads.
 */
#include <math.h>
#include <string.h>

#include "cpu_impl.h"

typedef enum cpu_unary_op {
  CPU_RELU,
  CPU_SIGMOID,
  CPU_SQRT,
  CPU_NEG,
  CPU_EXP,
  CPU_LOG,
  CPU_ABS,
  CPU_RECIPROCAL,
  CPU_TANH,
  CPU_ERF,
  CPU_SIN,
  CPU_COS,
  CPU_GELU,      /* 0.5·x·(1 + erf(x/√2)) */
  CPU_GELU_TANH, /* 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) */
  CPU_UNARY_OP_COUNT
} cpu_unary_op;

/* Sigmoid written so that exp() never overflows: for x < 0 use e^x / (1 + e^x). */
static inline float cpu_sigmoid_f(float x) {
  if (x >= 0) return 1.0f / (1.0f + expf(-x));
  float e = expf(x);
  return e / (1.0f + e);
}
static inline double cpu_sigmoid_d(double x) {
  if (x >= 0) return 1.0 / (1.0 + exp(-x));
  double e = exp(x);
  return e / (1.0 + e);
}

#define CPU_SQRT_2_PI 0.7978845608028654
#define CPU_SQRT_HALF 0.7071067811865476

/* (op, float32 expression, float64 expression) of v. NaN passes through Relu
 * (NaN < 0 is false), as numpy's maximum(x, 0) does. */
#define CPU_UNARY_OPS(X)                                                                           \
  X(CPU_RELU, relu, v < 0 ? 0.0f : v, v < 0 ? 0.0 : v)                                             \
  X(CPU_SIGMOID, sigmoid, cpu_sigmoid_f(v), cpu_sigmoid_d(v))                                      \
  X(CPU_SQRT, sqrt, sqrtf(v), sqrt(v))                                                             \
  X(CPU_NEG, neg, -v, -v)                                                                          \
  X(CPU_EXP, exp, expf(v), exp(v))                                                                 \
  X(CPU_LOG, log, logf(v), log(v))                                                                 \
  X(CPU_ABS, abs, fabsf(v), fabs(v))                                                               \
  X(CPU_RECIPROCAL, reciprocal, 1.0f / v, 1.0 / v)                                                 \
  X(CPU_TANH, tanh, tanhf(v), tanh(v))                                                             \
  X(CPU_ERF, erf, erff(v), erf(v))                                                                 \
  X(CPU_SIN, sin, sinf(v), sin(v))                                                                 \
  X(CPU_COS, cos, cosf(v), cos(v))                                                                 \
  X(CPU_GELU, gelu, 0.5f * v * (1.0f + erff(v * (float)CPU_SQRT_HALF)),                            \
    0.5 * v * (1.0 + erf(v * CPU_SQRT_HALF)))                                                      \
  X(CPU_GELU_TANH, gelu_tanh,                                                                      \
    0.5f * v * (1.0f + tanhf((float)CPU_SQRT_2_PI * (v + 0.044715f * v * v * v))),                 \
    0.5 * v * (1.0 + tanh(CPU_SQRT_2_PI * (v + 0.044715 * v * v * v))))

typedef void (*cpu_f32_loop)(const float *x, float *y, int64_t n);
typedef void (*cpu_f64_loop)(const double *x, double *y, int64_t n);

#define CPU_UNARY_LOOPS(OP, name, EXPR_F, EXPR_D)                                                  \
  static void cpu_##name##_f32(const float *x, float *y, int64_t n) {                              \
    for (int64_t i = 0; i < n; ++i) {                                                              \
      const float v = x[i];                                                                        \
      y[i] = EXPR_F;                                                                               \
    }                                                                                              \
  }                                                                                                \
  static void cpu_##name##_f64(const double *x, double *y, int64_t n) {                            \
    for (int64_t i = 0; i < n; ++i) {                                                              \
      const double v = x[i];                                                                       \
      y[i] = EXPR_D;                                                                               \
    }                                                                                              \
  }
CPU_UNARY_OPS(CPU_UNARY_LOOPS)

#define CPU_UNARY_F32_ENTRY(OP, name, EXPR_F, EXPR_D) [OP] = cpu_##name##_f32,
#define CPU_UNARY_F64_ENTRY(OP, name, EXPR_F, EXPR_D) [OP] = cpu_##name##_f64,
static const cpu_f32_loop cpu_f32_loops[CPU_UNARY_OP_COUNT] = {CPU_UNARY_OPS(CPU_UNARY_F32_ENTRY)};
static const cpu_f64_loop cpu_f64_loops[CPU_UNARY_OP_COUNT] = {CPU_UNARY_OPS(CPU_UNARY_F64_ENTRY)};

/* The float32 loop of an op: Sigmoid's is the vectorised one of cpu_vmath.c (the
 * table's calls libm per element and branches on the sign). */
static cpu_f32_loop cpu_f32_loop_of(cpu_unary_op op) {
  return op == CPU_SIGMOID ? onyx__cpu_sigmoid_f32 : cpu_f32_loops[op];
}

/* Integer Neg / Abs / Relu in unsigned arithmetic, so INT_MIN wraps instead of
 * overflowing. */
#define CPU_INT_UNARY(T, U)                                                                        \
  static void cpu_int_unary_##T(cpu_unary_op op, const T *x, T *y, int64_t n) {                    \
    for (int64_t i = 0; i < n; ++i) {                                                              \
      T v = x[i];                                                                                  \
      if (op == CPU_NEG || (op == CPU_ABS && v < 0))                                               \
        v = (T)((U)0 - (U)v);                                                                      \
      else if (op == CPU_RELU && v < 0)                                                            \
        v = 0;                                                                                     \
      y[i] = v;                                                                                    \
    }                                                                                              \
  }
CPU_INT_UNARY(int8_t, unsigned)
CPU_INT_UNARY(int16_t, unsigned)
CPU_INT_UNARY(int32_t, uint32_t)
CPU_INT_UNARY(int64_t, uint64_t)

/* ------------------------------------------------------------------ kernel */

typedef struct cpu_unary_state {
  onyx__cpu_node base;
  cpu_unary_op op;
  uint64_t types;
  bool bias; /* FastGelu: input 1 is a bias added along the last axis first */
} cpu_unary_state;

typedef struct cpu_unary_job {
  const cpu_unary_state *s;
  uint32_t dtype;
  const void *x;
  void *y;
  const void *bias; /* same dtype as x, or NULL */
  int64_t bias_n;
} cpu_unary_job;

enum { CPU_UNARY_CHUNK = 256 };

/* Elements [begin, end): through float32 chunks when there is a bias or a 16-bit
 * type, directly otherwise. */
static void cpu_unary_slice(void *arg, int64_t begin, int64_t end) {
  const cpu_unary_job *j = arg;
  const cpu_unary_op op = j->s->op;
  const size_t esize = onyx_dtype_size(j->dtype);
  const unsigned char *x = (const unsigned char *)j->x + (size_t)begin * esize;
  unsigned char *y = (unsigned char *)j->y + (size_t)begin * esize;
  const int64_t n = end - begin;
  switch (j->dtype) {
  case ONYX_DTYPE_FLOAT64:
    if (j->bias == NULL) {
      cpu_f64_loops[op]((const double *)x, (double *)y, n);
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      double v = ((const double *)x)[i] + ((const double *)j->bias)[(begin + i) % j->bias_n];
      cpu_f64_loops[op](&v, (double *)y + i, 1);
    }
    return;
  case ONYX_DTYPE_FLOAT32:
    if (j->bias == NULL) {
      cpu_f32_loop_of(op)((const float *)x, (float *)y, n);
      return;
    }
    /* A biased float32 goes through the chunk buffer below. */
    /* fall through */
  case ONYX_DTYPE_FLOAT16:
  case ONYX_DTYPE_BFLOAT16: {
    float buf[CPU_UNARY_CHUNK];
    for (int64_t at = 0; at < n; at += CPU_UNARY_CHUNK) {
      int64_t len = n - at < CPU_UNARY_CHUNK ? n - at : CPU_UNARY_CHUNK;
      for (int64_t i = 0; i < len; ++i) {
        buf[i] = onyx__cpu_load_f32(j->dtype, x, at + i);
        if (j->bias) buf[i] += onyx__cpu_load_f32(j->dtype, j->bias, (begin + at + i) % j->bias_n);
      }
      cpu_f32_loop_of(op)(buf, buf, len);
      for (int64_t i = 0; i < len; ++i) onyx__cpu_store_f32(j->dtype, y, at + i, buf[i]);
    }
    return;
  }
  case ONYX_DTYPE_INT8:
    cpu_int_unary_int8_t(op, (const int8_t *)x, (int8_t *)y, n);
    return;
  case ONYX_DTYPE_INT16:
    cpu_int_unary_int16_t(op, (const int16_t *)x, (int16_t *)y, n);
    return;
  case ONYX_DTYPE_INT32:
    cpu_int_unary_int32_t(op, (const int32_t *)x, (int32_t *)y, n);
    return;
  case ONYX_DTYPE_INT64:
    cpu_int_unary_int64_t(op, (const int64_t *)x, (int64_t *)y, n);
    return;
  default: /* unsigned: only Abs and Relu take them, and both are the identity */
    memcpy(y, x, (size_t)n * esize);
    return;
  }
}

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
  const onyx_tensor *bias = s->bias && input_count > 1 ? inputs[1] : NULL;
  int64_t bias_n = bias ? onyx_tensor_numel(bias) : 0;
  if (bias != NULL) {
    int64_t last = x->rank ? x->dims[x->rank - 1] : 1;
    if (bias->dtype != x->dtype || bias->rank != 1 || bias_n != last) {
      ctx->set_error(ctx, "input 1 (bias) is %s %s, expected %s [%lld] (the last dim of input 0)",
                     onyx__cpu_dtype_name(bias->dtype), onyx__cpu_tensor_shape(bias).s,
                     onyx__cpu_dtype_name(x->dtype), (long long)last);
      return ONYX_STATUS_INVALID_ARGUMENT;
    }
  }
  onyx_tensor *y = NULL;
  st = onyx__cpu_alloc_output(&s->base, ctx, x->dtype, x->rank, x->dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  cpu_unary_job j = {s, x->dtype, x->data, y->data, bias_n > 0 ? bias->data : NULL, bias_n};
  /* Transcendentals cost ~10x a simple op: smaller slices pay off. */
  int64_t grain = s->op == CPU_RELU || s->op == CPU_NEG || s->op == CPU_ABS
                      ? ONYX__CPU_PARALLEL_GRAIN
                      : ONYX__CPU_PARALLEL_GRAIN / 8;
  onyx__cpu_parallel_range(s->base.provider, onyx_tensor_numel(x), grain, cpu_unary_slice, &j);
  return ONYX_STATUS_OK;
}

/* Gelu (opset 20) reads `approximate`: "none" or "tanh". */
static onyx_status cpu_unary_create_op(cpu_unary_op op, uint64_t types, bool bias,
                                       void *provider_state, const onyx_node_info *node,
                                       void **out_state, char *err, size_t err_cap) {
  if (op == CPU_GELU && strcmp(node->domain ? node->domain : "", "") == 0) {
    const onyx_attr *a = onyx__cpu_attr_find(node, "approximate");
    if (a != NULL && (a->type != ONYX_ATTR_STRING || a->s == NULL ||
                      (strcmp(a->s, "none") != 0 && strcmp(a->s, "tanh") != 0)))
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                            "Gelu: attribute 'approximate' must be \"none\" or \"tanh\"");
    if (a != NULL && strcmp(a->s, "tanh") == 0) op = CPU_GELU_TANH;
  }
  cpu_unary_state *s = onyx__cpu_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  s->op = op;
  s->types = types;
  s->bias = bias;
  *out_state = s;
  return ONYX_STATUS_OK;
}

#define CPU_SIGNED_INT_TYPES                                                                       \
  (ONYX_DTYPE_BIT(ONYX_DTYPE_INT8) | ONYX_DTYPE_BIT(ONYX_DTYPE_INT16) |                            \
   ONYX_DTYPE_BIT(ONYX_DTYPE_INT32) | ONYX_DTYPE_BIT(ONYX_DTYPE_INT64))

/* Opset 1 carried a `consumed_inputs` attribute that means nothing to a runtime
 * with its own memory planning; it is ignored. Later opsets only added types. */
#define CPU_UNARY_KERNEL(sym, OP, DOMAIN, NAME, SINCE, TYPES, BIAS)                                \
  static onyx_status cpu_create_##sym(void *p, const onyx_node_info *node, void **out, char *err,  \
                                      size_t cap) {                                                \
    return cpu_unary_create_op(OP, TYPES, BIAS, p, node, out, err, cap);                           \
  }                                                                                                \
  const onyx_kernel_table onyx__cpu_k_##sym = {                                                    \
      .struct_size = sizeof(onyx_kernel_table),                                                    \
      .version = ONYX_ABI_VERSION,                                                                 \
      .domain = DOMAIN,                                                                            \
      .op_type = NAME,                                                                             \
      .since_opset = SINCE,                                                                        \
      .until_opset = 0,                                                                            \
      .type_input = 0,                                                                             \
      .type_mask = TYPES,                                                                          \
      .create = cpu_create_##sym,                                                                  \
      .destroy = onyx__cpu_destroy,                                                                \
      .compute = cpu_unary_compute,                                                                \
      .infer = onyx__cpu_infer_same,                                                               \
  };

#define CPU_F ONYX__CPU_FLOAT_TYPES
/* Relu gained signed integer types at opset 14; accepting them earlier is harmless. */
CPU_UNARY_KERNEL(relu, CPU_RELU, "", "Relu", 1, CPU_F | CPU_SIGNED_INT_TYPES, false)
CPU_UNARY_KERNEL(sigmoid, CPU_SIGMOID, "", "Sigmoid", 1, CPU_F, false)
CPU_UNARY_KERNEL(sqrt, CPU_SQRT, "", "Sqrt", 1, CPU_F, false)
CPU_UNARY_KERNEL(neg, CPU_NEG, "", "Neg", 1, CPU_F | CPU_SIGNED_INT_TYPES, false)
CPU_UNARY_KERNEL(exp, CPU_EXP, "", "Exp", 1, CPU_F, false)
CPU_UNARY_KERNEL(log, CPU_LOG, "", "Log", 1, CPU_F, false)
CPU_UNARY_KERNEL(abs, CPU_ABS, "", "Abs", 1, CPU_F | ONYX__CPU_INT_TYPES, false)
CPU_UNARY_KERNEL(reciprocal, CPU_RECIPROCAL, "", "Reciprocal", 1, CPU_F, false)
CPU_UNARY_KERNEL(tanh, CPU_TANH, "", "Tanh", 1, CPU_F, false)
CPU_UNARY_KERNEL(erf, CPU_ERF, "", "Erf", 9, CPU_F, false)
CPU_UNARY_KERNEL(sin, CPU_SIN, "", "Sin", 7, CPU_F, false)
CPU_UNARY_KERNEL(cos, CPU_COS, "", "Cos", 7, CPU_F, false)
CPU_UNARY_KERNEL(gelu, CPU_GELU, "", "Gelu", 20, CPU_F, false)
CPU_UNARY_KERNEL(ms_gelu, CPU_GELU, "com.microsoft", "Gelu", 1, CPU_F, false)
CPU_UNARY_KERNEL(ms_fast_gelu, CPU_GELU_TANH, "com.microsoft", "FastGelu", 1, CPU_F, true)
