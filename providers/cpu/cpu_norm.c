/*
 * Normalisations over the trailing axes of X:
 *   LayerNormalization (17)          Y = (X − mean)·invstd·Scale + B; outputs Mean,
 *                                    InvStdDev
 *   RMSNormalization (23)            Y = X·invrms·scale
 *   SimplifiedLayerNormalization     the same as RMS, as ONNX Runtime registers it in
 *                                    the ONNX domain; output 1 is inv_std_var
 *   com.microsoft SkipLayerNormalization and SkipSimplifiedLayerNormalization:
 *                                    X + skip [+ bias] first, normalised over the last
 *                                    axis; output 3 is that sum (a decoder's residual
 *                                    stream), output 1 the mean (0 for the
 *                                    simplified form), output 2 inv_std_var.
 *
 * Rows (the product of the leading dims) are independent and are split over the
 * provider's threads. Each row is read twice — once for the statistics, accumulated
 * in double, then again to write Y — so nothing is buffered. 16-bit inputs are
 * widened to float32 and Y is rounded once; statistics outputs are float32 (float64
 * for float64 X). Scale and bias may be the full normalised shape or broadcast from
 * its trailing dims; skip may broadcast over leading dims of X.
 */
#include <math.h>
#include <string.h>

#include "cpu_impl.h"

typedef enum cpu_norm_kind {
  CPU_LAYER_NORM,
  CPU_RMS_NORM,
  CPU_SIMPLIFIED_NORM,
  CPU_SKIP_LAYER_NORM,
  CPU_SKIP_SIMPLIFIED_NORM
} cpu_norm_kind;

typedef struct cpu_norm_state {
  onyx__cpu_node base;
  cpu_norm_kind kind;
  int64_t axis; /* the first normalised axis; the skip forms use -1 */
  float epsilon;
} cpu_norm_state;

/* Where each input and output sits, by kind (-1: the kind has none). */
typedef struct cpu_norm_layout {
  int skip, scale, beta, bias; /* inputs */
  int mean, inv, sum;          /* outputs */
} cpu_norm_layout;

static cpu_norm_layout cpu_norm_layout_of(cpu_norm_kind k) {
  switch (k) {
  case CPU_LAYER_NORM:
    return (cpu_norm_layout){-1, 1, 2, -1, 1, 2, -1};
  case CPU_RMS_NORM:
    return (cpu_norm_layout){-1, 1, -1, -1, -1, -1, -1};
  case CPU_SIMPLIFIED_NORM:
    return (cpu_norm_layout){-1, 1, -1, -1, -1, 1, -1};
  case CPU_SKIP_LAYER_NORM:
    return (cpu_norm_layout){1, 2, 3, 4, 1, 2, 3};
  default:
    return (cpu_norm_layout){1, 2, -1, 3, 1, 2, 3};
  }
}

static bool cpu_norm_is_rms(cpu_norm_kind k) {
  return k == CPU_RMS_NORM || k == CPU_SIMPLIFIED_NORM || k == CPU_SKIP_SIMPLIFIED_NORM;
}

/* The geometry of one node: rows × n, and the shape of the statistics outputs. */
typedef struct cpu_norm_plan {
  uint32_t axis;
  int64_t rows, n;
  uint32_t stat_rank;
  int64_t stat_dims[ONYX_MAX_RANK];
  uint32_t stat_dtype;
} cpu_norm_plan;

/* True when `t` broadcasts to dims[first..rank) as a block that repeats: its dims,
 * leading 1s dropped, equal the trailing dims of that shape. */
static bool cpu_trailing_block(const onyx_tensor *t, const int64_t *dims, uint32_t first,
                               uint32_t rank) {
  uint32_t lead = 0;
  while (lead < t->rank && t->dims[lead] == 1) ++lead;
  uint32_t k = t->rank - lead;
  if (k > rank - first) return false;
  for (uint32_t i = 0; i < k; ++i)
    if (t->dims[lead + i] != dims[rank - k + i]) return false;
  return true;
}

static onyx_status cpu_norm_plan_make(const cpu_norm_state *s, const onyx_tensor *const *in,
                                      size_t count, cpu_norm_plan *p, char *err, size_t err_cap) {
  memset(p, 0, sizeof *p);
  const cpu_norm_layout L = cpu_norm_layout_of(s->kind);
  const onyx_tensor *x = in[0];
  int64_t axis;
  if (x->rank == 0 || !onyx__cpu_normalize_axis(s->axis, x->rank, &axis))
    return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "axis %lld is out of range for input 0 %s", (long long)s->axis,
                          onyx__cpu_tensor_shape(x).s);
  p->axis = (uint32_t)axis;
  p->rows = onyx__cpu_dims_product(x->dims, 0, p->axis);
  p->n = onyx__cpu_dims_product(x->dims, p->axis, x->rank);
  p->stat_rank = x->rank;
  for (uint32_t d = 0; d < x->rank; ++d) p->stat_dims[d] = d < p->axis ? x->dims[d] : 1;
  p->stat_dtype = x->dtype == ONYX_DTYPE_FLOAT64 ? ONYX_DTYPE_FLOAT64 : ONYX_DTYPE_FLOAT32;
  const int checks[] = {L.scale, L.beta, L.bias};
  for (size_t c = 0; c < 3; ++c) {
    int k = checks[c];
    if (k < 0 || (size_t)k >= count || in[k] == NULL) {
      if (k == L.scale)
        return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                              "input %d (scale) is required", k);
      continue;
    }
    if (!onyx__cpu_dtype_in(in[k]->dtype, ONYX__CPU_FLOAT_TYPES) ||
        !cpu_trailing_block(in[k], x->dims, p->axis, x->rank))
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                            "input %d is %s %s, expected a float tensor broadcasting to the "
                            "normalised shape %s",
                            k, onyx__cpu_dtype_name(in[k]->dtype), onyx__cpu_tensor_shape(in[k]).s,
                            onyx__cpu_shape_str(x->rank - p->axis, x->dims + p->axis).s);
  }
  if (L.skip >= 0) {
    const onyx_tensor *sk = (size_t)L.skip < count ? in[L.skip] : NULL;
    if (sk == NULL || !onyx__cpu_dtype_in(sk->dtype, ONYX__CPU_FLOAT_TYPES) ||
        !cpu_trailing_block(sk, x->dims, 0, x->rank) || onyx_tensor_numel(sk) % (p->n ? p->n : 1))
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                            "input 1 (skip) is %s, expected a float tensor broadcasting to "
                            "input 0 %s over whole rows",
                            sk ? onyx__cpu_tensor_shape(sk).s : "missing",
                            onyx__cpu_tensor_shape(x).s);
  }
  return ONYX_STATUS_OK;
}

static onyx_status cpu_norm_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                  onyx_tensor *outputs, size_t output_count) {
  const cpu_norm_state *s = state;
  const onyx_tensor *in[8];
  if (input_count == 0 || !onyx__cpu_infer_inputs(inputs, input_count, in, 8) || in[0] == NULL)
    return ONYX_STATUS_INVALID_ARGUMENT;
  cpu_norm_plan p;
  char why[ONYX__CPU_REASON_CAP] = "";
  onyx_status st = cpu_norm_plan_make(s, in, input_count, &p, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cpu_reason(state, st, why);
  const cpu_norm_layout L = cpu_norm_layout_of(s->kind);
  const onyx_tensor *x = in[0];
  onyx__cpu_infer_out(outputs, output_count, 0, x->dtype, x->rank, x->dims);
  if (L.mean >= 0)
    onyx__cpu_infer_out(outputs, output_count, (size_t)L.mean, p.stat_dtype, p.stat_rank,
                        p.stat_dims);
  if (L.inv >= 0)
    onyx__cpu_infer_out(outputs, output_count, (size_t)L.inv, p.stat_dtype, p.stat_rank,
                        p.stat_dims);
  if (L.sum >= 0)
    onyx__cpu_infer_out(outputs, output_count, (size_t)L.sum, x->dtype, x->rank, x->dims);
  return ONYX_STATUS_OK;
}

typedef struct cpu_norm_job {
  const cpu_norm_state *s;
  const cpu_norm_plan *p;
  const onyx_tensor *x, *skip, *scale, *beta, *bias;
  onyx_tensor *y, *mean, *inv, *sum;
} cpu_norm_job;

/* Element j of row r of the (skip-added) input. */
static inline double cpu_norm_in(const cpu_norm_job *j, int64_t r, int64_t c) {
  const int64_t n = j->p->n;
  double v = onyx__cpu_load_f64(j->x->dtype, j->x->data, r * n + c);
  if (j->skip) {
    int64_t srows = onyx_tensor_numel(j->skip) / n;
    v += onyx__cpu_load_f64(j->skip->dtype, j->skip->data, (r % srows) * n + c);
  }
  if (j->bias)
    v += onyx__cpu_load_f64(j->bias->dtype, j->bias->data, c % onyx_tensor_numel(j->bias));
  return v;
}

static bool cpu_is_f32(const onyx_tensor *t, int64_t n) {
  return t == NULL || (t->dtype == ONYX_DTYPE_FLOAT32 && (n < 0 || onyx_tensor_numel(t) == n));
}

/* Rows [begin, end). float32 with full-size scale, beta and bias (the decoder case)
 * has its own loops, summing x + skip + bias in float as ONNX Runtime does; every
 * other mix goes through double loads. */
static void cpu_norm_rows(void *arg, int64_t begin, int64_t end) {
  const cpu_norm_job *j = arg;
  const int64_t n = j->p->n;
  const bool rms = cpu_norm_is_rms(j->s->kind);
  const int64_t sn = onyx_tensor_numel(j->scale), bn = j->beta ? onyx_tensor_numel(j->beta) : 1;
  const int64_t srows = j->skip && n > 0 ? onyx_tensor_numel(j->skip) / n : 1;
  const uint32_t yt = j->x->dtype;
  const bool fast = yt == ONYX_DTYPE_FLOAT32 && cpu_is_f32(j->scale, n) && cpu_is_f32(j->beta, n) &&
                    cpu_is_f32(j->bias, n) && cpu_is_f32(j->skip, -1);
  for (int64_t r = begin; r < end; ++r) {
    double s1 = 0, s2 = 0;
    const float *x = (const float *)j->x->data + r * n;
    const float *sk = fast && j->skip ? (const float *)j->skip->data + (r % srows) * n : NULL;
    const float *bi = fast && j->bias ? (const float *)j->bias->data : NULL;
    float *sum = fast && j->sum ? (float *)j->sum->data + r * n : NULL;
    if (fast) {
      for (int64_t c = 0; c < n; ++c) {
        float v = x[c];
        if (sk) v += sk[c];
        if (bi) v += bi[c];
        if (sum) sum[c] = v;
        s1 += v;
        s2 += (double)v * v;
      }
    } else {
      for (int64_t c = 0; c < n; ++c) {
        double v = cpu_norm_in(j, r, c);
        s1 += v;
        s2 += v * v;
        if (j->sum) onyx__cpu_store_f64(yt, j->sum->data, r * n + c, v);
      }
    }
    double mean = rms || n == 0 ? 0.0 : s1 / (double)n;
    double var = n == 0 ? 0.0 : s2 / (double)n - mean * mean;
    if (var < 0) var = 0;
    double inv = 1.0 / sqrt(var + (double)j->s->epsilon);
    if (j->mean) onyx__cpu_store_f64(j->mean->dtype, j->mean->data, r, mean);
    if (j->inv) onyx__cpu_store_f64(j->inv->dtype, j->inv->data, r, inv);
    if (j->y == NULL) continue;
    if (fast) {
      const float *g = j->scale->data, *b = j->beta ? j->beta->data : NULL;
      float *y = (float *)j->y->data + r * n;
      const float fm = (float)mean, fi = (float)inv;
      for (int64_t c = 0; c < n; ++c) {
        float v = sum ? sum[c] : x[c] + (sk ? sk[c] : 0.0f) + (bi ? bi[c] : 0.0f);
        y[c] = (v - fm) * fi * g[c] + (b ? b[c] : 0.0f);
      }
      continue;
    }
    for (int64_t c = 0; c < n; ++c) {
      double v = cpu_norm_in(j, r, c);
      double out = (v - mean) * inv * onyx__cpu_load_f64(j->scale->dtype, j->scale->data, c % sn);
      if (j->beta) out += onyx__cpu_load_f64(j->beta->dtype, j->beta->data, c % bn);
      onyx__cpu_store_f64(yt, j->y->data, r * n + c, out);
    }
  }
}

static onyx_status cpu_norm_compute(void *state, onyx_compute_ctx *ctx,
                                    const onyx_tensor *const *inputs, size_t input_count) {
  const cpu_norm_state *s = state;
  const cpu_norm_layout L = cpu_norm_layout_of(s->kind);
  onyx_status st = onyx__cpu_check_inputs(ctx, inputs, input_count, 1);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *x = inputs[0];
  if (!onyx__cpu_dtype_in(x->dtype, ONYX__CPU_FLOAT_TYPES)) {
    ctx->set_error(ctx, "input 0 has dtype %s, which is not supported",
                   onyx__cpu_dtype_name(x->dtype));
    return ONYX_STATUS_UNSUPPORTED;
  }
  cpu_norm_plan p;
  char why[320];
  st = cpu_norm_plan_make(s, inputs, input_count, &p, why, sizeof why);
  if (st != ONYX_STATUS_OK) {
    ctx->set_error(ctx, "%s", why);
    return st;
  }
#define CPU_IN(k) ((k) >= 0 && (size_t)(k) < input_count ? inputs[k] : NULL)
  cpu_norm_job j = {.s = s,
                    .p = &p,
                    .x = x,
                    .skip = CPU_IN(L.skip),
                    .scale = CPU_IN(L.scale),
                    .beta = CPU_IN(L.beta),
                    .bias = CPU_IN(L.bias)};
#undef CPU_IN
  st = onyx__cpu_alloc_output(&s->base, ctx, x->dtype, x->rank, x->dims, &j.y);
  if (st == ONYX_STATUS_OK && L.mean >= 0)
    st = onyx__cpu_alloc_output_at(&s->base, ctx, (size_t)L.mean, p.stat_dtype, p.stat_rank,
                                   p.stat_dims, &j.mean);
  if (st == ONYX_STATUS_OK && L.inv >= 0)
    st = onyx__cpu_alloc_output_at(&s->base, ctx, (size_t)L.inv, p.stat_dtype, p.stat_rank,
                                   p.stat_dims, &j.inv);
  if (st == ONYX_STATUS_OK && L.sum >= 0)
    st =
        onyx__cpu_alloc_output_at(&s->base, ctx, (size_t)L.sum, x->dtype, x->rank, x->dims, &j.sum);
  if (st != ONYX_STATUS_OK) return st;
  /* The simplified skip form's mean output means nothing; it is written as 0. */
  int64_t grain = p.n > 0 ? ONYX__CPU_PARALLEL_GRAIN / (4 * p.n) : 1;
  onyx__cpu_parallel_range(s->base.provider, p.rows, grain > 0 ? grain : 1, cpu_norm_rows, &j);
  return ONYX_STATUS_OK;
}

static onyx_status cpu_norm_create(cpu_norm_kind kind, float eps_default, void *provider_state,
                                   const onyx_node_info *node, void **out_state, char *err,
                                   size_t err_cap) {
  cpu_norm_state *s = onyx__cpu_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  s->kind = kind;
  s->axis = -1;
  onyx_status st = onyx__cpu_attr_float(node, "epsilon", eps_default, &s->epsilon, err, err_cap);
  if (st == ONYX_STATUS_OK && kind != CPU_SKIP_LAYER_NORM && kind != CPU_SKIP_SIMPLIFIED_NORM)
    st = onyx__cpu_attr_int(node, "axis", -1, &s->axis, err, err_cap);
  if (st != ONYX_STATUS_OK) {
    onyx__cpu_destroy(s);
    return st;
  }
  *out_state = s;
  return ONYX_STATUS_OK;
}

/* stash_type (1: statistics in float) is accepted and ignored: they are computed
 * in double either way. */
#define CPU_NORM_KERNEL(sym, KIND, DOMAIN, NAME, SINCE, EPS)                                       \
  static onyx_status cpu_create_##sym(void *p, const onyx_node_info *node, void **out, char *err,  \
                                      size_t cap) {                                                \
    return cpu_norm_create(KIND, EPS, p, node, out, err, cap);                                     \
  }                                                                                                \
  const onyx_kernel_table onyx__cpu_k_##sym = {                                                    \
      .struct_size = sizeof(onyx_kernel_table),                                                    \
      .version = ONYX_ABI_VERSION,                                                                 \
      .domain = DOMAIN,                                                                            \
      .op_type = NAME,                                                                             \
      .since_opset = SINCE,                                                                        \
      .until_opset = 0,                                                                            \
      .type_input = 0,                                                                             \
      .type_mask = ONYX__CPU_FLOAT_TYPES,                                                          \
      .create = cpu_create_##sym,                                                                  \
      .destroy = onyx__cpu_destroy,                                                                \
      .compute = cpu_norm_compute,                                                                 \
      .infer = cpu_norm_infer,                                                                     \
  };

CPU_NORM_KERNEL(layer_norm, CPU_LAYER_NORM, "", "LayerNormalization", 17, 1e-5f)
CPU_NORM_KERNEL(rms_norm, CPU_RMS_NORM, "", "RMSNormalization", 23, 1e-5f)
CPU_NORM_KERNEL(simplified_layer_norm, CPU_SIMPLIFIED_NORM, "", "SimplifiedLayerNormalization", 1,
                1e-5f)
CPU_NORM_KERNEL(skip_layer_norm, CPU_SKIP_LAYER_NORM, "com.microsoft", "SkipLayerNormalization", 1,
                1e-12f)
CPU_NORM_KERNEL(skip_simplified_layer_norm, CPU_SKIP_SIMPLIFIED_NORM, "com.microsoft",
                "SkipSimplifiedLayerNormalization", 1, 1e-12f)
