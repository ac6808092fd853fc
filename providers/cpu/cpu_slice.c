/*
 * Ops that select or replicate elements: Slice, Split, Expand, Trilu.
 *
 * Like the other byte-moving ops they work for every fixed-size dtype. Slice and
 * Split take their parameters from attributes in old opsets and from host integer
 * inputs in new ones; infer needs those values (the planner knows them when they
 * are constants or shape arithmetic) and declines without them.
 */
#include <string.h>

#include "cpu_impl.h"

/* Common check: input 0 must have a fixed-size dtype. */
static onyx_status cpu_fixed(onyx_compute_ctx *ctx, const onyx_tensor *x) {
  if (onyx_dtype_size(x->dtype) != 0) return ONYX_STATUS_OK;
  ctx->set_error(ctx, "input 0 has dtype %s, which is not supported",
                 onyx__cpu_dtype_name(x->dtype));
  return ONYX_STATUS_UNSUPPORTED;
}

/* n elements of `es` bytes, `stride` elements apart in the source. */
static void cpu_copy_strided(unsigned char *dst, const unsigned char *src, int64_t n,
                             int64_t stride, size_t es) {
  if (stride == 1) {
    memcpy(dst, src, (size_t)n * es);
    return;
  }
  for (int64_t i = 0; i < n; ++i) memcpy(dst + (size_t)i * es, src + (size_t)(i * stride) * es, es);
}

/* ------------------------------------------------------------------ Slice */

typedef struct cpu_slice_state {
  onyx__cpu_node base;
  /* Opset 1-9: attributes (NULL when absent). */
  const int64_t *starts, *ends, *axes;
  size_t starts_count, ends_count, axes_count;
} cpu_slice_state;

/* Per input axis: first element, step and extent of the output. */
typedef struct cpu_slice_plan {
  int64_t start[ONYX_MAX_RANK], step[ONYX_MAX_RANK], out[ONYX_MAX_RANK];
} cpu_slice_plan;

static onyx_status cpu_slice_plan_make(const cpu_slice_state *s, const onyx_tensor *const *in,
                                       size_t count, cpu_slice_plan *p, char *err, size_t err_cap) {
  const onyx_tensor *x = in[0];
  const uint32_t r = x->rank;
  int64_t starts[ONYX_MAX_RANK], ends[ONYX_MAX_RANK], axes[ONYX_MAX_RANK], steps[ONYX_MAX_RANK];
  size_t ns = 0, ne = 0, na = 0, nst = 0;
  bool has_axes = false, has_steps = false;
  onyx_status st = ONYX_STATUS_OK;
  if (s->base.opset < 10) {
    if (s->starts_count > ONYX_MAX_RANK || s->ends_count > ONYX_MAX_RANK ||
        s->axes_count > ONYX_MAX_RANK)
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_UNSUPPORTED, "more than %d slice axes",
                            ONYX_MAX_RANK);
    ns = s->starts_count;
    ne = s->ends_count;
    na = s->axes_count;
    has_axes = s->axes != NULL;
    if (ns) memcpy(starts, s->starts, ns * sizeof starts[0]);
    if (ne) memcpy(ends, s->ends, ne * sizeof ends[0]);
    if (na) memcpy(axes, s->axes, na * sizeof axes[0]);
  } else {
    static const char *const what[] = {"", "starts", "ends", "axes", "steps"};
    int64_t *dst[] = {NULL, starts, ends, axes, steps};
    size_t *cnt[] = {NULL, &ns, &ne, &na, &nst};
    if (count < 3 || in[1] == NULL || in[2] == NULL)
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                            "inputs 1 (starts) and 2 (ends) are required");
    for (size_t k = 1; k < 5 && st == ONYX_STATUS_OK; ++k) {
      if (k >= count || in[k] == NULL) continue;
      if (!onyx__cpu_has_values(in[k]))
        return onyx__cpu_fail(err, err_cap, ONYX_STATUS_UNSUPPORTED, "input %zu (%s) is not known",
                              k, what[k]);
      st = onyx__cpu_int_list(in[k], k, what[k], dst[k], ONYX_MAX_RANK, cnt[k], err, err_cap);
      if (k == 3) has_axes = true;
      if (k == 4) has_steps = true;
    }
    if (st != ONYX_STATUS_OK) return st;
  }
  if (ne != ns || (has_axes && na != ns) || (has_steps && nst != ns))
    return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "starts, ends, axes and steps have %zu, %zu, %zu and %zu values", ns, ne,
                          has_axes ? na : ns, has_steps ? nst : ns);
  for (uint32_t d = 0; d < r; ++d) {
    p->start[d] = 0;
    p->step[d] = 1;
    p->out[d] = x->dims[d];
  }
  bool seen[ONYX_MAX_RANK] = {false};
  for (size_t i = 0; i < ns; ++i) {
    int64_t a = has_axes ? axes[i] : (int64_t)i;
    if (!onyx__cpu_normalize_axis(a, r, &a) || seen[a])
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                            "axis %lld is out of range or repeated for input 0 %s",
                            (long long)(has_axes ? axes[i] : (int64_t)i),
                            onyx__cpu_tensor_shape(x).s);
    seen[a] = true;
    const int64_t dim = x->dims[a];
    int64_t step = has_steps ? steps[i] : 1;
    if (step == 0)
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT, "step %zu is 0", i);
    /* A step longer than the axis takes one element at most, like a step of dim. */
    const int64_t most = dim > 0 ? dim : 1;
    if (step > most) step = most;
    if (step < -most) step = -most;
    int64_t b = starts[i], e = ends[i];
    if (b < 0) b += dim;
    if (e < 0) e += dim;
    /* Clamp: [0, dim] going forward, [-1, dim-1] going backward (-1: before 0). */
    if (step > 0) {
      b = b < 0 ? 0 : b > dim ? dim : b;
      e = e < 0 ? 0 : e > dim ? dim : e;
    } else {
      b = b < 0 ? -1 : b > dim - 1 ? dim - 1 : b;
      e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
    }
    int64_t span = step > 0 ? e - b : b - e;
    int64_t len = span > 0 ? (span - 1) / (step > 0 ? step : -step) + 1 : 0;
    p->start[a] = b;
    p->step[a] = step;
    p->out[a] = len > 0 ? len : 0;
  }
  return ONYX_STATUS_OK;
}

static onyx_status cpu_slice_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                   onyx_tensor *outputs, size_t output_count) {
  const onyx_tensor *in[5];
  if (input_count < 1 || !onyx__cpu_infer_inputs(inputs, input_count, in, 5) || in[0] == NULL)
    return ONYX_STATUS_INVALID_ARGUMENT;
  cpu_slice_plan p;
  char why[ONYX__CPU_REASON_CAP] = "";
  onyx_status st = cpu_slice_plan_make(state, in, input_count, &p, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cpu_reason(state, st, why);
  onyx__cpu_infer_out(outputs, output_count, 0, in[0]->dtype, in[0]->rank, p.out);
  return st;
}

static onyx_status cpu_slice_compute(void *state, onyx_compute_ctx *ctx,
                                     const onyx_tensor *const *inputs, size_t input_count) {
  const cpu_slice_state *s = state;
  onyx_status st = onyx__cpu_check_inputs(ctx, inputs, input_count, 1);
  if (st == ONYX_STATUS_OK) st = cpu_fixed(ctx, inputs[0]);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *x = inputs[0];
  cpu_slice_plan p;
  char why[256];
  st = cpu_slice_plan_make(s, inputs, input_count, &p, why, sizeof why);
  if (st != ONYX_STATUS_OK) {
    ctx->set_error(ctx, "%s", why);
    return st;
  }
  onyx_tensor *y = NULL;
  st = onyx__cpu_alloc_output(&s->base, ctx, x->dtype, x->rank, p.out, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  const uint32_t r = x->rank;
  const int64_t numel = onyx_tensor_numel(y);
  if (numel == 0) return ONYX_STATUS_OK;
  const size_t es = onyx_dtype_size(x->dtype);
  int64_t stride[ONYX_MAX_RANK], acc = 1, base = 0;
  for (uint32_t d = r; d-- > 0;) {
    stride[d] = acc;
    acc *= x->dims[d];
  }
  for (uint32_t d = 0; d < r; ++d) base += p.start[d] * stride[d];
  const unsigned char *src = x->data;
  unsigned char *dst = y->data;
  if (r == 0) {
    memcpy(dst, src, es);
    return ONYX_STATUS_OK;
  }
  /* Odometer over the output; the last axis is one strided run. */
  const uint32_t last = r - 1;
  const int64_t run = p.out[last], run_stride = p.step[last] * stride[last];
  int64_t idx[ONYX_MAX_RANK] = {0}, off = base;
  for (int64_t done = 0; done < numel; done += run) {
    cpu_copy_strided(dst + (size_t)done * es, src + (size_t)off * es, run, run_stride, es);
    for (uint32_t d = last; d-- > 0;) {
      off += p.step[d] * stride[d];
      if (++idx[d] < p.out[d]) break;
      off -= p.step[d] * stride[d] * p.out[d];
      idx[d] = 0;
    }
  }
  return ONYX_STATUS_OK;
}

static onyx_status cpu_slice_create(void *provider_state, const onyx_node_info *node,
                                    void **out_state, char *err, size_t err_cap) {
  cpu_slice_state *s = onyx__cpu_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  onyx_status st = ONYX_STATUS_OK;
  if (node->opset < 10) {
    bool has_starts = false, has_ends = false;
    st = onyx__cpu_attr_ints(node, "starts", &s->starts, &s->starts_count, &has_starts, err,
                             err_cap);
    if (st == ONYX_STATUS_OK)
      st = onyx__cpu_attr_ints(node, "ends", &s->ends, &s->ends_count, &has_ends, err, err_cap);
    if (st == ONYX_STATUS_OK)
      st = onyx__cpu_attr_ints(node, "axes", &s->axes, &s->axes_count, NULL, err, err_cap);
    if (st == ONYX_STATUS_OK && (!has_starts || !has_ends))
      st = onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "Slice: attributes 'starts' and 'ends' are required before opset 10");
  }
  if (st != ONYX_STATUS_OK) {
    onyx__cpu_destroy(s);
    return st;
  }
  *out_state = s;
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

CPU_KERNEL(onyx__cpu_k_slice_1, "Slice", 1, 9, cpu_slice_create, cpu_slice_compute, cpu_slice_infer)
CPU_KERNEL(onyx__cpu_k_slice_10, "Slice", 10, 0, cpu_slice_create, cpu_slice_compute,
           cpu_slice_infer)

/* ------------------------------------------------------------------ Split */

typedef struct cpu_split_state {
  onyx__cpu_node base;
  int64_t axis;
  const int64_t *split; /* attribute form; NULL when absent */
  size_t split_count;
  int64_t num_outputs; /* opset 18; 0 when absent */
} cpu_split_state;

/* Extent of each output along the axis. */
static onyx_status cpu_split_sizes(const cpu_split_state *s, const onyx_tensor *const *in,
                                   size_t count, int64_t *axis_out, int64_t *sizes, char *err,
                                   size_t err_cap) {
  const onyx_tensor *x = in[0];
  const size_t outs = s->base.output_count;
  int64_t axis;
  if (x->rank == 0 || !onyx__cpu_normalize_axis(s->axis, x->rank, &axis))
    return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "axis %lld is out of range for input 0 %s", (long long)s->axis,
                          onyx__cpu_tensor_shape(x).s);
  const int64_t dim = x->dims[axis];
  const onyx_tensor *split_in = count > 1 ? in[1] : NULL;
  size_t n = 0;
  if (split_in != NULL) {
    if (!onyx__cpu_has_values(split_in))
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_UNSUPPORTED, "input 1 (split) is not known");
    if (onyx_tensor_numel(split_in) != (int64_t)outs)
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                            "input 1 (split) has %lld values for %zu outputs",
                            (long long)onyx_tensor_numel(split_in), outs);
    onyx_status st = onyx__cpu_int_list(split_in, 1, "split", sizes, outs, &n, err, err_cap);
    if (st != ONYX_STATUS_OK) return st;
  } else if (s->split != NULL) {
    if (s->split_count != outs)
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                            "attribute split has %zu values for %zu outputs", s->split_count, outs);
    memcpy(sizes, s->split, outs * sizeof sizes[0]);
    n = outs;
  }
  if (n > 0) {
    int64_t sum = 0;
    for (size_t i = 0; i < n; ++i) {
      if (sizes[i] < 0)
        return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT, "split %zu is negative",
                              i);
      sum += sizes[i];
    }
    if (sum != dim)
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                            "split sizes add up to %lld, axis %lld has %lld", (long long)sum,
                            (long long)axis, (long long)dim);
  } else if (s->num_outputs > 0) {
    /* Opset 18: ceil(dim / n) each, the last one smaller when uneven. */
    if ((size_t)s->num_outputs != outs)
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                            "num_outputs is %lld but the node has %zu outputs",
                            (long long)s->num_outputs, outs);
    int64_t chunk = (dim + s->num_outputs - 1) / s->num_outputs, left = dim;
    for (size_t i = 0; i < outs; ++i) {
      sizes[i] = left < chunk ? left : chunk;
      left -= sizes[i];
    }
  } else {
    if (dim % (int64_t)outs != 0)
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                            "axis %lld of %lld does not split evenly into %zu outputs",
                            (long long)axis, (long long)dim, outs);
    for (size_t i = 0; i < outs; ++i) sizes[i] = dim / (int64_t)outs;
  }
  *axis_out = axis;
  return ONYX_STATUS_OK;
}

/* Outputs of one Split node at most (a node's output list is small in practice). */
#define CPU_SPLIT_MAX_OUTPUTS 1024

static onyx_status cpu_split_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                   onyx_tensor *outputs, size_t output_count) {
  const cpu_split_state *s = state;
  const onyx_tensor *in[2];
  int64_t sizes[CPU_SPLIT_MAX_OUTPUTS], axis;
  if (input_count < 1 || input_count > 2 || !onyx__cpu_infer_inputs(inputs, input_count, in, 2) ||
      in[0] == NULL || s->base.output_count > CPU_SPLIT_MAX_OUTPUTS)
    return ONYX_STATUS_UNSUPPORTED;
  char why[ONYX__CPU_REASON_CAP] = "";
  onyx_status st = cpu_split_sizes(s, in, input_count, &axis, sizes, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cpu_reason(state, st, why);
  int64_t dims[ONYX_MAX_RANK];
  memcpy(dims, in[0]->dims, in[0]->rank * sizeof dims[0]);
  for (size_t k = 0; k < s->base.output_count; ++k) {
    dims[axis] = sizes[k];
    onyx__cpu_infer_out(outputs, output_count, k, in[0]->dtype, in[0]->rank, dims);
  }
  return ONYX_STATUS_OK;
}

static onyx_status cpu_split_compute(void *state, onyx_compute_ctx *ctx,
                                     const onyx_tensor *const *inputs, size_t input_count) {
  const cpu_split_state *s = state;
  onyx_status st = onyx__cpu_check_inputs(ctx, inputs, input_count, 1);
  if (st == ONYX_STATUS_OK) st = cpu_fixed(ctx, inputs[0]);
  if (st != ONYX_STATUS_OK) return st;
  if (s->base.output_count > CPU_SPLIT_MAX_OUTPUTS) {
    ctx->set_error(ctx, "%zu outputs, at most %d are supported", s->base.output_count,
                   CPU_SPLIT_MAX_OUTPUTS);
    return ONYX_STATUS_UNSUPPORTED;
  }
  const onyx_tensor *x = inputs[0];
  int64_t sizes[CPU_SPLIT_MAX_OUTPUTS], axis;
  char why[256];
  st = cpu_split_sizes(s, inputs, input_count, &axis, sizes, why, sizeof why);
  if (st != ONYX_STATUS_OK) {
    ctx->set_error(ctx, "%s", why);
    return st;
  }
  const size_t es = onyx_dtype_size(x->dtype);
  const int64_t outer = onyx__cpu_dims_product(x->dims, 0, (uint32_t)axis);
  const int64_t inner = onyx__cpu_dims_product(x->dims, (uint32_t)axis + 1, x->rank);
  const int64_t dim = x->dims[axis];
  int64_t dims[ONYX_MAX_RANK], at = 0;
  memcpy(dims, x->dims, x->rank * sizeof dims[0]);
  for (size_t k = 0; k < s->base.output_count; ++k) {
    dims[axis] = sizes[k];
    onyx_tensor *y = NULL;
    st = onyx__cpu_alloc_output_at(&s->base, ctx, k, x->dtype, x->rank, dims, &y);
    if (st != ONYX_STATUS_OK) return st;
    const size_t slab = (size_t)(sizes[k] * inner) * es;
    for (int64_t o = 0; y != NULL && slab > 0 && o < outer; ++o)
      memcpy((unsigned char *)y->data + (size_t)o * slab,
             (const unsigned char *)x->data + (size_t)((o * dim + at) * inner) * es, slab);
    at += sizes[k];
  }
  return ONYX_STATUS_OK;
}

static onyx_status cpu_split_create(void *provider_state, const onyx_node_info *node,
                                    void **out_state, char *err, size_t err_cap) {
  cpu_split_state *s = onyx__cpu_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  onyx_status st = onyx__cpu_attr_int(node, "axis", 0, &s->axis, err, err_cap);
  if (st == ONYX_STATUS_OK && node->opset < 13)
    st = onyx__cpu_attr_ints(node, "split", &s->split, &s->split_count, NULL, err, err_cap);
  if (st == ONYX_STATUS_OK && node->opset >= 18)
    st = onyx__cpu_attr_int(node, "num_outputs", 0, &s->num_outputs, err, err_cap);
  if (st != ONYX_STATUS_OK) {
    onyx__cpu_destroy(s);
    return st;
  }
  *out_state = s;
  return ONYX_STATUS_OK;
}

/* Opset 1 also accepted the split as input 1, which the shared code reads too. */
CPU_KERNEL(onyx__cpu_k_split_1, "Split", 1, 12, cpu_split_create, cpu_split_compute,
           cpu_split_infer)
CPU_KERNEL(onyx__cpu_k_split_13, "Split", 13, 0, cpu_split_create, cpu_split_compute,
           cpu_split_infer)

/* ------------------------------------------------------------------ Expand */

static onyx_status cpu_expand_shape(const onyx_tensor *const *in, size_t count, uint32_t *rank,
                                    int64_t *dims, char *err, size_t err_cap) {
  if (count < 2 || in[1] == NULL)
    return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "input 1 (shape) is required");
  if (!onyx__cpu_has_values(in[1]))
    return onyx__cpu_fail(err, err_cap, ONYX_STATUS_UNSUPPORTED, "input 1 (shape) is not known");
  int64_t shape[ONYX_MAX_RANK];
  size_t n = 0;
  onyx_status st = onyx__cpu_int_list(in[1], 1, "shape", shape, ONYX_MAX_RANK, &n, err, err_cap);
  if (st != ONYX_STATUS_OK) return st;
  for (size_t i = 0; i < n; ++i)
    if (shape[i] < 0)
      return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_ARGUMENT,
                            "input 1 (shape) value %lld is negative", (long long)shape[i]);
  onyx_tensor t = {.dtype = in[0]->dtype, .rank = (uint32_t)n};
  memcpy(t.dims, shape, n * sizeof shape[0]);
  const onyx_tensor *both[2] = {in[0], &t};
  return onyx__cpu_bcast_shape(2, both, rank, dims, err, err_cap);
}

static onyx_status cpu_expand_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                    onyx_tensor *outputs, size_t output_count) {
  (void)state;
  const onyx_tensor *in[2];
  uint32_t rank;
  int64_t dims[ONYX_MAX_RANK];
  if (input_count != 2 || !onyx__cpu_infer_inputs(inputs, input_count, in, 2) || in[0] == NULL)
    return ONYX_STATUS_INVALID_ARGUMENT;
  char why[ONYX__CPU_REASON_CAP] = "";
  onyx_status st = cpu_expand_shape(in, input_count, &rank, dims, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cpu_reason(state, st, why);
  onyx__cpu_infer_out(outputs, output_count, 0, in[0]->dtype, rank, dims);
  return st;
}

typedef struct cpu_expand_walk {
  const unsigned char *x;
  unsigned char *y;
  size_t es;
} cpu_expand_walk;

static void cpu_expand_run(void *arg, const int64_t *off, int64_t out_off, int64_t n,
                           const int64_t *strides) {
  const cpu_expand_walk *w = arg;
  const unsigned char *src = w->x + (size_t)off[1] * w->es;
  unsigned char *dst = w->y + (size_t)out_off * w->es;
  if (strides[1]) {
    memcpy(dst, src, (size_t)n * w->es);
    return;
  }
  for (int64_t i = 0; i < n; ++i) memcpy(dst + (size_t)i * w->es, src, w->es);
}

static onyx_status cpu_expand_compute(void *state, onyx_compute_ctx *ctx,
                                      const onyx_tensor *const *inputs, size_t input_count) {
  const onyx__cpu_node *node = state;
  onyx_status st = onyx__cpu_check_inputs(ctx, inputs, input_count, 2);
  if (st == ONYX_STATUS_OK) st = cpu_fixed(ctx, inputs[0]);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *x = inputs[0];
  uint32_t rank;
  int64_t dims[ONYX_MAX_RANK];
  char why[256];
  st = cpu_expand_shape(inputs, input_count, &rank, dims, why, sizeof why);
  onyx__cpu_bcast plan;
  if (st == ONYX_STATUS_OK) {
    uint32_t ranks[2] = {rank, x->rank};
    const int64_t *d[2] = {dims, x->dims};
    st = onyx__cpu_bcast_init(&plan, 2, ranks, d, why, sizeof why);
  }
  if (st != ONYX_STATUS_OK) {
    ctx->set_error(ctx, "%s", why);
    return st;
  }
  onyx_tensor *y = NULL;
  st = onyx__cpu_alloc_output(node, ctx, x->dtype, rank, dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  cpu_expand_walk w = {x->data, y->data, onyx_dtype_size(x->dtype)};
  onyx__cpu_bcast_walk(&plan, cpu_expand_run, &w);
  return ONYX_STATUS_OK;
}

CPU_KERNEL(onyx__cpu_k_expand, "Expand", 8, 0, onyx__cpu_create_plain, cpu_expand_compute,
           cpu_expand_infer)

/* ------------------------------------------------------------------ Trilu */

typedef struct cpu_trilu_state {
  onyx__cpu_node base;
  bool upper;
} cpu_trilu_state;

static onyx_status cpu_trilu_create(void *provider_state, const onyx_node_info *node,
                                    void **out_state, char *err, size_t err_cap) {
  cpu_trilu_state *s = onyx__cpu_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  int64_t upper = 1;
  onyx_status st = onyx__cpu_attr_int(node, "upper", 1, &upper, err, err_cap);
  if (st != ONYX_STATUS_OK) {
    onyx__cpu_destroy(s);
    return st;
  }
  s->upper = upper != 0;
  *out_state = s;
  return ONYX_STATUS_OK;
}

static onyx_status cpu_trilu_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                   onyx_tensor *outputs, size_t output_count) {
  if (input_count < 1 || inputs[0].rank < 2) return ONYX_STATUS_INVALID_ARGUMENT;
  return onyx__cpu_infer_same(state, inputs, input_count, outputs, output_count);
}

/* Keeps element (i, j) of each trailing N×M matrix when j − i ≥ k (upper) or
 * j − i ≤ k (lower); zeroes the rest. */
static onyx_status cpu_trilu_compute(void *state, onyx_compute_ctx *ctx,
                                     const onyx_tensor *const *inputs, size_t input_count) {
  const cpu_trilu_state *s = state;
  onyx_status st = onyx__cpu_check_inputs(ctx, inputs, input_count, 1);
  if (st == ONYX_STATUS_OK) st = cpu_fixed(ctx, inputs[0]);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *x = inputs[0];
  if (x->rank < 2) {
    ctx->set_error(ctx, "input 0 %s has rank %u, expected at least 2", onyx__cpu_tensor_shape(x).s,
                   x->rank);
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  int64_t k = 0;
  if (input_count > 1 && inputs[1] != NULL) {
    const onyx_tensor *kt = inputs[1];
    if ((kt->dtype != ONYX_DTYPE_INT64 && kt->dtype != ONYX_DTYPE_INT32) ||
        onyx_tensor_numel(kt) != 1) {
      ctx->set_error(ctx, "input 1 (k) is %s %s, expected an int64 scalar",
                     onyx__cpu_dtype_name(kt->dtype), onyx__cpu_tensor_shape(kt).s);
      return ONYX_STATUS_INVALID_ARGUMENT;
    }
    k = onyx__cpu_int_at(kt, 0);
  }
  /* Beyond ±(rows + cols) every k keeps all or nothing; clamping avoids overflow. */
  const int64_t bound = x->dims[x->rank - 2] + x->dims[x->rank - 1];
  k = k > bound ? bound : k < -bound ? -bound : k;
  onyx_tensor *y = NULL;
  st = onyx__cpu_alloc_output(&s->base, ctx, x->dtype, x->rank, x->dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  const int64_t rows = x->dims[x->rank - 2], cols = x->dims[x->rank - 1];
  const int64_t mats = onyx__cpu_dims_product(x->dims, 0, x->rank - 2);
  const size_t es = onyx_dtype_size(x->dtype);
  const unsigned char *src = x->data;
  unsigned char *dst = y->data;
  for (int64_t m = 0; m < mats; ++m) {
    for (int64_t i = 0; i < rows; ++i) {
      /* Kept columns form one range [lo, hi) per row. */
      int64_t lo = s->upper ? i + k : 0, hi = s->upper ? cols : i + k + 1;
      lo = lo < 0 ? 0 : lo > cols ? cols : lo;
      hi = hi < 0 ? 0 : hi > cols ? cols : hi;
      if (hi < lo) hi = lo;
      const size_t row = (size_t)((m * rows + i) * cols) * es;
      memset(dst + row, 0, (size_t)cols * es);
      if (hi > lo)
        memcpy(dst + row + (size_t)lo * es, src + row + (size_t)lo * es, (size_t)(hi - lo) * es);
    }
  }
  return ONYX_STATUS_OK;
}

CPU_KERNEL(onyx__cpu_k_trilu, "Trilu", 14, 0, cpu_trilu_create, cpu_trilu_compute, cpu_trilu_infer)
