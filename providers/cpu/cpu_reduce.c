/*
 * ReduceSum, ReduceMean, ReduceMax.
 *
 * Axes were an attribute until opset 13 (ReduceSum) or 18 (the others) and are an
 * optional input since; with no axes every axis is reduced, unless
 * noop_with_empty_axes asks for the input back unchanged. keepdims (default 1)
 * keeps reduced axes as 1s.
 *
 * Each output element is independent: its reduced elements are walked with an
 * odometer over the reduced axes, whose innermost (merged) run is a strided loop
 * with the dtype switch outside it. Output elements are split over the provider's
 * threads. Floats accumulate in double, integers in 64-bit (wrapping); the mean of
 * integers truncates. Reducing an empty set gives 0 (Sum), NaN (Mean of floats)
 * or the lowest value, -inf for floats (Max).
 */
#include <math.h>
#include <string.h>

#include "cpu_impl.h"

typedef enum cpu_reduce_op { CPU_RSUM, CPU_RMEAN, CPU_RMAX } cpu_reduce_op;

typedef struct cpu_reduce_state {
  onyx__cpu_node base;
  cpu_reduce_op op;
  bool axes_from_input; /* opset 13 (Sum) / 18 (others) on */
  bool keepdims;
  bool noop_with_empty_axes;
  const int64_t *axes; /* the attribute form; NULL when absent */
  size_t axes_count;
} cpu_reduce_state;

/* The reduction of one node for one input geometry. */
typedef struct cpu_reduce_plan {
  bool noop; /* empty axes with noop_with_empty_axes: a copy */
  bool reduced[ONYX_MAX_RANK];
  uint32_t out_rank;
  int64_t out_dims[ONYX_MAX_RANK];
  int64_t out_numel, count; /* reduced elements per output element */
  /* Kept axes (what an output index walks) and reduced axes (merged where they
   * are contiguous), with input strides in elements. */
  uint32_t nk, nr;
  int64_t kdims[ONYX_MAX_RANK], kstride[ONYX_MAX_RANK];
  int64_t rdims[ONYX_MAX_RANK], rstride[ONYX_MAX_RANK];
} cpu_reduce_plan;

static onyx_status cpu_reduce_plan_make(const cpu_reduce_state *s, const onyx_tensor *const *in,
                                        size_t n, cpu_reduce_plan *p, char *err, size_t err_cap) {
  memset(p, 0, sizeof *p);
  const onyx_tensor *x = in[0];
  const uint32_t r = x->rank;
  int64_t axes[ONYX_MAX_RANK * 2];
  size_t count = 0;
  if (!s->axes_from_input) {
    if (s->axes_count > sizeof axes / sizeof axes[0])
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_UNSUPPORTED, "attribute axes has %zu entries",
                            s->axes_count);
    count = s->axes_count;
    if (count) memcpy(axes, s->axes, count * sizeof axes[0]);
  } else if (n > 1 && in[1] != NULL) {
    if (!onyx__cpu_has_values(in[1]))
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_UNSUPPORTED, "input 1 (axes) is not known");
    onyx_status st = onyx__cpu_int_list(in[1], 1, "axes", axes, sizeof axes / sizeof axes[0],
                                        &count, err, err_cap);
    if (st != ONYX_STATUS_OK) return st;
  }
  if (count == 0 && s->noop_with_empty_axes) p->noop = true;
  if (count == 0)
    for (uint32_t d = 0; d < r; ++d) p->reduced[d] = !p->noop;
  for (size_t i = 0; i < count; ++i) {
    int64_t a;
    if (!onyx__cpu_normalize_axis(axes[i], r, &a))
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                            "axis %lld is out of range for input 0 %s", (long long)axes[i],
                            onyx__cpu_tensor_shape(x).s);
    p->reduced[a] = true;
  }
  p->count = 1;
  int64_t stride[ONYX_MAX_RANK], acc = 1;
  for (uint32_t d = r; d-- > 0;) {
    stride[d] = acc;
    acc *= x->dims[d];
  }
  for (uint32_t d = 0; d < r; ++d) {
    if (p->reduced[d]) {
      p->count *= x->dims[d];
      if (s->keepdims) p->out_dims[p->out_rank++] = 1;
      if (p->nr > 0 && p->rstride[p->nr - 1] == stride[d] * x->dims[d]) {
        p->rdims[p->nr - 1] *= x->dims[d];
        p->rstride[p->nr - 1] = stride[d];
      } else {
        p->rdims[p->nr] = x->dims[d];
        p->rstride[p->nr++] = stride[d];
      }
    } else {
      p->out_dims[p->out_rank++] = x->dims[d];
      p->kdims[p->nk] = x->dims[d];
      p->kstride[p->nk++] = stride[d];
    }
  }
  p->out_numel = onyx__cpu_dims_product(p->out_dims, 0, p->out_rank);
  return ONYX_STATUS_OK;
}

/* Accumulators of one output element. */
typedef struct cpu_acc {
  double f;
  uint64_t u; /* integer sums wrap in unsigned arithmetic */
  int64_t imax;
  uint64_t umax;
  bool nan;
} cpu_acc;

static bool cpu_is_float(uint32_t t) { return onyx__cpu_dtype_in(t, ONYX__CPU_FLOAT_TYPES); }
static bool cpu_is_unsigned(uint32_t t) {
  return t == ONYX_DTYPE_UINT8 || t == ONYX_DTYPE_UINT16 || t == ONYX_DTYPE_UINT32 ||
         t == ONYX_DTYPE_UINT64 || t == ONYX_DTYPE_BOOL;
}

static int64_t cpu_load_i64(uint32_t t, const void *p, int64_t i) {
  switch (t) {
  case ONYX_DTYPE_INT8:
    return ((const int8_t *)p)[i];
  case ONYX_DTYPE_INT16:
    return ((const int16_t *)p)[i];
  case ONYX_DTYPE_INT32:
    return ((const int32_t *)p)[i];
  case ONYX_DTYPE_INT64:
    return ((const int64_t *)p)[i];
  case ONYX_DTYPE_UINT8:
  case ONYX_DTYPE_BOOL:
    return ((const uint8_t *)p)[i];
  case ONYX_DTYPE_UINT16:
    return ((const uint16_t *)p)[i];
  case ONYX_DTYPE_UINT32:
    return ((const uint32_t *)p)[i];
  default:
    return (int64_t)((const uint64_t *)p)[i];
  }
}

/* One strided run of n elements from `base` into the accumulator. */
static void cpu_reduce_run(cpu_reduce_op op, uint32_t t, const void *x, int64_t base, int64_t n,
                           int64_t stride, cpu_acc *a) {
  if (t == ONYX_DTYPE_FLOAT32) {
    const float *p = (const float *)x + base;
    if (op == CPU_RMAX) {
      for (int64_t i = 0; i < n; ++i) {
        float v = p[i * stride];
        if (v > a->f) a->f = v;
        if (isnan(v)) a->nan = true;
      }
    } else {
      double sum = 0;
      for (int64_t i = 0; i < n; ++i) sum += p[i * stride];
      a->f += sum;
    }
    return;
  }
  if (cpu_is_float(t)) {
    for (int64_t i = 0; i < n; ++i) {
      double v = onyx__cpu_load_f64(t, x, base + i * stride);
      if (op != CPU_RMAX)
        a->f += v;
      else if (isnan(v))
        a->nan = true;
      else if (v > a->f)
        a->f = v;
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = cpu_load_i64(t, x, base + i * stride);
    if (op != CPU_RMAX)
      a->u += (uint64_t)v;
    else if (cpu_is_unsigned(t) && (uint64_t)v > a->umax)
      a->umax = (uint64_t)v;
    else if (!cpu_is_unsigned(t) && v > a->imax)
      a->imax = v;
  }
}

typedef struct cpu_reduce_job {
  const cpu_reduce_state *s;
  const cpu_reduce_plan *p;
  uint32_t dtype;
  const void *x;
  void *y;
} cpu_reduce_job;

static void cpu_reduce_slice(void *arg, int64_t begin, int64_t end) {
  const cpu_reduce_job *j = arg;
  const cpu_reduce_plan *p = j->p;
  const uint32_t t = j->dtype;
  const cpu_reduce_op op = j->s->op;
  for (int64_t o = begin; o < end; ++o) {
    /* Input offset of this output element, from its index over the kept axes. */
    int64_t base = 0, rest = o;
    for (uint32_t d = p->nk; d-- > 0;) {
      base += (rest % p->kdims[d]) * p->kstride[d];
      rest /= p->kdims[d];
    }
    cpu_acc a = {.f = op == CPU_RMAX ? -INFINITY : 0.0, .imax = INT64_MIN};
    if (p->count > 0) {
      if (p->nr == 0) {
        cpu_reduce_run(op, t, j->x, base, 1, 1, &a);
      } else {
        const uint32_t last = p->nr - 1;
        int64_t idx[ONYX_MAX_RANK] = {0}, off = base;
        for (int64_t done = 0; done < p->count; done += p->rdims[last]) {
          cpu_reduce_run(op, t, j->x, off, p->rdims[last], p->rstride[last], &a);
          for (uint32_t d = last; d-- > 0;) {
            off += p->rstride[d];
            if (++idx[d] < p->rdims[d]) break;
            off -= p->rstride[d] * p->rdims[d];
            idx[d] = 0;
          }
        }
      }
    }
    if (cpu_is_float(t)) {
      double v = a.f;
      if (op == CPU_RMAX && a.nan) v = NAN;
      if (op == CPU_RMEAN) v = p->count > 0 ? v / (double)p->count : NAN;
      onyx__cpu_store_f64(t, j->y, o, v);
      continue;
    }
    /* Integers: the low bits of the 64-bit result, as a wrapping cast would. */
    uint64_t u;
    if (op == CPU_RMAX)
      u = cpu_is_unsigned(t) ? a.umax : (p->count > 0 ? (uint64_t)a.imax : (uint64_t)INT64_MIN);
    else if (op == CPU_RMEAN && p->count > 0)
      u = cpu_is_unsigned(t) ? a.u / (uint64_t)p->count : (uint64_t)((int64_t)a.u / p->count);
    else
      u = a.u;
    if (op == CPU_RMAX && p->count == 0 && !cpu_is_unsigned(t)) {
      /* The lowest value of the type. */
      size_t es = onyx_dtype_size(t);
      u = (uint64_t)1 << (8 * es - 1); /* the low bytes are all that is stored */
    }
    size_t es = onyx_dtype_size(t);
    unsigned char *dst = (unsigned char *)j->y + (size_t)o * es;
    switch (es) {
    case 1: {
      uint8_t v = t == ONYX_DTYPE_BOOL ? u != 0 : (uint8_t)u;
      memcpy(dst, &v, 1);
      break;
    }
    case 2: {
      uint16_t v = (uint16_t)u;
      memcpy(dst, &v, 2);
      break;
    }
    case 4: {
      uint32_t v = (uint32_t)u;
      memcpy(dst, &v, 4);
      break;
    }
    default:
      memcpy(dst, &u, 8);
      break;
    }
  }
}

static onyx_status cpu_reduce_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                    onyx_tensor *outputs, size_t output_count) {
  const onyx_tensor *in[2];
  if (input_count < 1 || input_count > 2 || !onyx__cpu_infer_inputs(inputs, input_count, in, 2) ||
      in[0] == NULL)
    return ONYX_STATUS_INVALID_ARGUMENT;
  cpu_reduce_plan p;
  char why[ONYX__CPU_REASON_CAP] = "";
  onyx_status st = cpu_reduce_plan_make(state, in, input_count, &p, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cpu_reason(state, st, why);
  if (p.noop)
    onyx__cpu_infer_out(outputs, output_count, 0, in[0]->dtype, in[0]->rank, in[0]->dims);
  else
    onyx__cpu_infer_out(outputs, output_count, 0, in[0]->dtype, p.out_rank, p.out_dims);
  return ONYX_STATUS_OK;
}

static onyx_status cpu_reduce_compute(void *state, onyx_compute_ctx *ctx,
                                      const onyx_tensor *const *inputs, size_t input_count) {
  const cpu_reduce_state *s = state;
  onyx_status st = onyx__cpu_check_inputs(ctx, inputs, input_count, 1);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *x = inputs[0];
  uint64_t types = ONYX__CPU_FLOAT_TYPES | ONYX__CPU_INT_TYPES;
  if (s->op == CPU_RMAX) types |= ONYX_DTYPE_BIT(ONYX_DTYPE_BOOL);
  if (!onyx__cpu_dtype_in(x->dtype, types)) {
    ctx->set_error(ctx, "input 0 has dtype %s, which is not supported",
                   onyx__cpu_dtype_name(x->dtype));
    return ONYX_STATUS_UNSUPPORTED;
  }
  cpu_reduce_plan p;
  char why[256];
  st = cpu_reduce_plan_make(s, inputs, input_count, &p, why, sizeof why);
  if (st != ONYX_STATUS_OK) {
    ctx->set_error(ctx, "%s", why);
    return st;
  }
  onyx_tensor *y = NULL;
  if (p.noop) {
    st = onyx__cpu_alloc_output(&s->base, ctx, x->dtype, x->rank, x->dims, &y);
    if (st == ONYX_STATUS_OK && y != NULL && onyx_tensor_numel(x) > 0)
      memcpy(y->data, x->data, (size_t)onyx_tensor_numel(x) * onyx_dtype_size(x->dtype));
    return st;
  }
  st = onyx__cpu_alloc_output(&s->base, ctx, x->dtype, p.out_rank, p.out_dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  cpu_reduce_job j = {s, &p, x->dtype, x->data, y->data};
  int64_t grain = p.count > 0 ? ONYX__CPU_PARALLEL_GRAIN / p.count : ONYX__CPU_PARALLEL_GRAIN;
  onyx__cpu_parallel_range(s->base.provider, p.out_numel, grain > 0 ? grain : 1, cpu_reduce_slice,
                           &j);
  return ONYX_STATUS_OK;
}

static onyx_status cpu_reduce_create(cpu_reduce_op op, int64_t input_since, void *provider_state,
                                     const onyx_node_info *node, void **out_state, char *err,
                                     size_t err_cap) {
  cpu_reduce_state *s = onyx__cpu_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  s->op = op;
  s->axes_from_input = node->opset >= input_since;
  int64_t keepdims = 1, noop = 0;
  onyx_status st = onyx__cpu_attr_int(node, "keepdims", 1, &keepdims, err, err_cap);
  if (st == ONYX_STATUS_OK)
    st = onyx__cpu_attr_int(node, "noop_with_empty_axes", 0, &noop, err, err_cap);
  if (st == ONYX_STATUS_OK && !s->axes_from_input)
    st = onyx__cpu_attr_ints(node, "axes", &s->axes, &s->axes_count, NULL, err, err_cap);
  if (st != ONYX_STATUS_OK) {
    onyx__cpu_destroy(s);
    return st;
  }
  s->keepdims = keepdims != 0;
  s->noop_with_empty_axes = noop != 0;
  *out_state = s;
  return ONYX_STATUS_OK;
}

#define CPU_REDUCE_KERNEL(sym, OP, NAME, SINCE, UNTIL, INPUT_SINCE, TYPES)                         \
  static onyx_status cpu_create_##sym(void *p, const onyx_node_info *node, void **out, char *err,  \
                                      size_t cap) {                                                \
    return cpu_reduce_create(OP, INPUT_SINCE, p, node, out, err, cap);                             \
  }                                                                                                \
  const onyx_kernel_table onyx__cpu_k_##sym = {                                                    \
      .struct_size = sizeof(onyx_kernel_table),                                                    \
      .version = ONYX_ABI_VERSION,                                                                 \
      .domain = "",                                                                                \
      .op_type = NAME,                                                                             \
      .since_opset = SINCE,                                                                        \
      .until_opset = UNTIL,                                                                        \
      .type_input = 0,                                                                             \
      .type_mask = TYPES,                                                                          \
      .create = cpu_create_##sym,                                                                  \
      .destroy = onyx__cpu_destroy,                                                                \
      .compute = cpu_reduce_compute,                                                               \
      .infer = cpu_reduce_infer,                                                                   \
  };

#define CPU_RTYPES (ONYX__CPU_FLOAT_TYPES | ONYX__CPU_INT_TYPES)
CPU_REDUCE_KERNEL(reduce_sum_1, CPU_RSUM, "ReduceSum", 1, 12, 13, CPU_RTYPES)
CPU_REDUCE_KERNEL(reduce_sum_13, CPU_RSUM, "ReduceSum", 13, 0, 13, CPU_RTYPES)
CPU_REDUCE_KERNEL(reduce_mean_1, CPU_RMEAN, "ReduceMean", 1, 17, 18, CPU_RTYPES)
CPU_REDUCE_KERNEL(reduce_mean_18, CPU_RMEAN, "ReduceMean", 18, 0, 18, CPU_RTYPES)
CPU_REDUCE_KERNEL(reduce_max_1, CPU_RMAX, "ReduceMax", 1, 17, 18, CPU_RTYPES)
/* Opset 20 added bool. */
CPU_REDUCE_KERNEL(reduce_max_18, CPU_RMAX, "ReduceMax", 18, 0, 18,
                  CPU_RTYPES | ONYX_DTYPE_BIT(ONYX_DTYPE_BOOL))
