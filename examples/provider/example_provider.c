/*
 * libonyx_example.so — a provider built outside the Onyx tree, against the installed
 * SDK alone (find_package(Onyx) → Onyx::abi, or pkg-config onyx-abi), to the v3
 * contract (onyx_factory.h): a factory of one host device whose instance registers
 * three float32 kernels in the domain com.example, opset 1:
 *
 *   Scale(x) attributes alpha, beta   y = alpha * x + beta; per-node state made once at
 *                                     create, in memory from the host table (governed)
 *   RowSoftmax(x)                     softmax along the last axis; declares a STEP
 *                                     workspace region for one row of exponentials
 *   TakeRows(x, k)                    the first k rows of x (k: an int64 scalar or [1]);
 *                                     k is a host input: its value sizes the output
 *
 * Every callback that can fail says why through the onyx_sink it is handed. The kernels
 * (first half) know nothing of how the library is found; the ABI glue (second half:
 * definitions, the instance, the factory, the entry point) is what a new ABI version
 * changes. Only onyx_provider_factory_entry is exported (-fvisibility=hidden).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <onyx_abi.h>

/* ------------------------------------------------------------------ the instance */

/* The one device's instance: the host table it was opened with (valid until close),
 * through which per-node state is allocated so that the governor sees it. */
typedef struct example_instance {
  const onyx_host_table *host;
} example_instance;

/* ------------------------------------------------------------------ helpers */

static const onyx_attr *find_attr(const onyx_node_info *node, const char *name) {
  for (size_t i = 0; i < node->attr_count; ++i)
    if (!strcmp(node->attrs[i].name, name)) return &node->attrs[i];
  return NULL;
}

/* A float32 input with at least one axis, or a message saying what it is instead. */
static onyx_status check_float(onyx_compute_ctx *ctx, const onyx_tensor *const *inputs,
                               size_t count, size_t index) {
  if (index >= count || inputs[index] == NULL) {
    ctx->set_error(ctx, "input %zu is missing", index);
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  const onyx_tensor *x = inputs[index];
  if (x->dtype != ONYX_DTYPE_FLOAT32 || x->rank == 0) {
    ctx->set_error(ctx, "input %zu: expected float32 of rank >= 1, got dtype %u rank %u", index,
                   x->dtype, x->rank);
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  return ONYX_STATUS_OK;
}

/* Output = input geometry (Scale, RowSoftmax). */
static onyx_status same_shape_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                    onyx_tensor *outputs, size_t output_count, onyx_sink *err) {
  (void)state;
  if (input_count < 1 || output_count < 1) {
    err->set_error(err, "expected one input and one output, got %zu and %zu", input_count,
                   output_count);
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  outputs[0] = inputs[0];
  outputs[0].data = NULL; /* geometry only */
  return ONYX_STATUS_OK;
}

/* ------------------------------------------------------------------ Scale */

typedef struct scale_state {
  float alpha, beta;
  const onyx_host_table *host; /* to free the state through */
} scale_state;

static onyx_status scale_create(void *instance, const onyx_node_info *node, void **out_state,
                                onyx_sink *err) {
  const onyx_host_table *host = ((example_instance *)instance)->host;
  scale_state s = {1.0f, 0.0f, host};
  const char *names[2] = {"alpha", "beta"};
  float *fields[2] = {&s.alpha, &s.beta};
  for (int i = 0; i < 2; ++i) {
    const onyx_attr *a = find_attr(node, names[i]);
    if (a == NULL) continue;
    if (a->type != ONYX_ATTR_FLOAT) {
      err->set_error(err, "attribute %s must be a float, got type %u", names[i], a->type);
      return ONYX_STATUS_INVALID_ARGUMENT;
    }
    *fields[i] = a->f;
  }
  /* Memory kept beyond the call comes from the host table: the governor books it. */
  void *p = NULL;
  onyx_status st = host->mem_alloc(host->host_data, ONYX_REQUESTER_WEIGHTS, sizeof s, 16,
                                   "com.example Scale state", &p);
  if (st != ONYX_STATUS_OK) {
    err->set_error(err, "%zu bytes for the node state refused", sizeof s);
    return st;
  }
  memcpy(p, &s, sizeof s);
  *out_state = p;
  return ONYX_STATUS_OK;
}

static void scale_destroy(void *state) {
  if (state == NULL) return;
  const onyx_host_table *host = ((scale_state *)state)->host;
  host->mem_free(host->host_data, state);
}

static onyx_status scale_compute(void *state, onyx_compute_ctx *ctx,
                                 const onyx_tensor *const *inputs, size_t input_count,
                                 onyx_sink *err) {
  (void)err; /* ctx->set_error reaches the same place */
  const scale_state *s = state;
  onyx_status st = check_float(ctx, inputs, input_count, 0);
  if (st != ONYX_STATUS_OK) return st;
  onyx_tensor *y = NULL;
  st = ctx->alloc_output(ctx, 0, ONYX_DTYPE_FLOAT32, inputs[0]->rank, inputs[0]->dims, &y);
  if (st != ONYX_STATUS_OK) return st;
  const float *x = inputs[0]->data;
  float *out = y->data;
  for (int64_t i = 0; i < onyx_tensor_numel(inputs[0]); ++i) out[i] = s->alpha * x[i] + s->beta;
  return ONYX_STATUS_OK;
}

/* ------------------------------------------------------------------ RowSoftmax */

/* One row of exponentials, float32: the scratch the core hands over. */
static uint64_t row_bytes(const onyx_tensor *x) {
  return (uint64_t)x->dims[x->rank - 1] * sizeof(float);
}

static onyx_status softmax_workspace(void *state, const onyx_tensor *inputs, size_t input_count,
                                     onyx_workspace_requirement *out_req, onyx_sink *err) {
  (void)state;
  if (input_count < 1 || inputs[0].rank == 0) {
    err->set_error(err, "input 0 must have at least one axis");
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  out_req->count = 1;
  out_req->regions[0] = (onyx_workspace_region){.name = "exp_row",
                                                .bytes = row_bytes(&inputs[0]),
                                                .alignment = 64,
                                                .lifetime = ONYX_LIFETIME_STEP};
  return ONYX_STATUS_OK;
}

static onyx_status softmax_compute(void *state, onyx_compute_ctx *ctx,
                                   const onyx_tensor *const *inputs, size_t input_count,
                                   onyx_sink *err) {
  (void)state;
  (void)err;
  onyx_status st = check_float(ctx, inputs, input_count, 0);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *x = inputs[0];
  /* Validate before writing anything: a short view is refused with nothing written. */
  if (ctx->workspace_count < 1 || ctx->workspace[0].bytes < row_bytes(x)) {
    ctx->set_error(ctx, "workspace 'exp_row' has %llu bytes, needs %llu",
                   (unsigned long long)(ctx->workspace_count ? ctx->workspace[0].bytes : 0),
                   (unsigned long long)row_bytes(x));
    return ONYX_STATUS_WORKSPACE_TOO_SMALL;
  }
  onyx_tensor *y = NULL;
  st = ctx->alloc_output(ctx, 0, ONYX_DTYPE_FLOAT32, x->rank, x->dims, &y);
  if (st != ONYX_STATUS_OK) return st;
  int64_t cols = x->dims[x->rank - 1], rows = cols ? onyx_tensor_numel(x) / cols : 0;
  float *e = ctx->workspace[0].data;
  for (int64_t r = 0; r < rows; ++r) {
    const float *in = (const float *)x->data + r * cols;
    float *out = (float *)y->data + r * cols;
    float max = in[0], sum = 0.0f;
    for (int64_t c = 1; c < cols; ++c) max = in[c] > max ? in[c] : max;
    for (int64_t c = 0; c < cols; ++c) sum += e[c] = expf(in[c] - max);
    for (int64_t c = 0; c < cols; ++c) out[c] = e[c] / sum;
  }
  return ONYX_STATUS_OK;
}

/* ------------------------------------------------------------------ TakeRows */

/* k from input 1 (int64, one element), checked against x's rows; -1 when unusable. */
static int64_t take_count(const onyx_tensor *x, const onyx_tensor *k) {
  if (k == NULL || k->data == NULL || k->dtype != ONYX_DTYPE_INT64 || onyx_tensor_numel(k) != 1)
    return -1;
  int64_t v = *(const int64_t *)k->data;
  return v >= 0 && v <= x->dims[0] ? v : -1;
}

static onyx_status take_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                              onyx_tensor *outputs, size_t output_count, onyx_sink *err) {
  (void)state;
  if (input_count < 2 || output_count < 1 || inputs[0].rank == 0) {
    err->set_error(err, "takes x (rank >= 1) and k, gives one output");
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  if (inputs[1].data == NULL) {
    err->set_error(err, "k (input 1) is not known before the run");
    return ONYX_STATUS_UNSUPPORTED;
  }
  int64_t k = take_count(&inputs[0], &inputs[1]);
  if (k < 0) {
    err->set_error(err, "input 1 (k): expected one int64 in 0..%lld", (long long)inputs[0].dims[0]);
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  outputs[0] = inputs[0];
  outputs[0].dims[0] = k;
  outputs[0].data = NULL;
  return ONYX_STATUS_OK;
}

static onyx_status take_compute(void *state, onyx_compute_ctx *ctx,
                                const onyx_tensor *const *inputs, size_t input_count,
                                onyx_sink *err) {
  (void)state;
  (void)err;
  onyx_status st = check_float(ctx, inputs, input_count, 0);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *x = inputs[0];
  int64_t k = take_count(x, input_count > 1 ? inputs[1] : NULL);
  if (k < 0) {
    ctx->set_error(ctx, "input 1 (k): expected one int64 in 0..%lld on the host",
                   (long long)x->dims[0]);
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  int64_t dims[ONYX_MAX_RANK];
  memcpy(dims, x->dims, sizeof dims);
  dims[0] = k;
  onyx_tensor *y = NULL;
  st = ctx->alloc_output(ctx, 0, ONYX_DTYPE_FLOAT32, x->rank, dims, &y);
  if (st != ONYX_STATUS_OK) return st;
  int64_t row = x->dims[0] ? onyx_tensor_numel(x) / x->dims[0] : 0;
  if (k * row > 0) memcpy(y->data, x->data, (size_t)(k * row) * sizeof(float));
  return ONYX_STATUS_OK;
}

/* ------------------------------------------------------------------ ABI glue */

static const onyx_type_constraint float_x[] = {
    {ONYX_TYPE_INPUT, 0, ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT32)},
    {ONYX_TYPE_OUTPUT, 0, ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT32)}};
static const onyx_type_constraint float_x_int_k[] = {
    {ONYX_TYPE_INPUT, 0, ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT32)},
    {ONYX_TYPE_INPUT, 1, ONYX_DTYPE_BIT(ONYX_DTYPE_INT64)},
    {ONYX_TYPE_OUTPUT, 0, ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT32)}};

static const onyx_kernel_def kernels[] = {
    {.struct_size = sizeof(onyx_kernel_def),
     .version = ONYX_ABI_V3,
     .domain = "com.example",
     .op_type = "Scale",
     .since_opset = 1,
     .types = float_x,
     .type_count = 2,
     .create = scale_create,
     .destroy = scale_destroy,
     .infer = same_shape_infer,
     .compute = scale_compute},
    {.struct_size = sizeof(onyx_kernel_def),
     .version = ONYX_ABI_V3,
     .domain = "com.example",
     .op_type = "RowSoftmax",
     .since_opset = 1,
     .types = float_x,
     .type_count = 2,
     .infer = same_shape_infer,
     .workspace = softmax_workspace,
     .compute = softmax_compute},
    {.struct_size = sizeof(onyx_kernel_def),
     .version = ONYX_ABI_V3,
     .domain = "com.example",
     .op_type = "TakeRows",
     .since_opset = 1,
     .types = float_x_int_k,
     .type_count = 3,
     .host_inputs = 1u << 1, /* k is read on the host, wherever the device's memory is */
     .infer = take_infer,
     .compute = take_compute},
};

static onyx_status example_kernels(void *instance, onyx_kernel_registry *reg, onyx_sink *err) {
  (void)instance;
  for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; ++i) {
    onyx_status st = reg->add(reg, &kernels[i]);
    if (st != ONYX_STATUS_OK) {
      err->set_error(err, "registering %s: %s", kernels[i].op_type, onyx_status_str(st));
      return st;
    }
  }
  return ONYX_STATUS_OK;
}

/* The one host device's instance (the core opens a device once at a time). */
static example_instance the_instance;

static void example_close(void *instance) {
  if (instance) ((example_instance *)instance)->host = NULL;
}

static const onyx_instance_table instance_table = {
    .struct_size = sizeof(onyx_instance_table),
    .version = ONYX_ABI_V3,
    .close = example_close,
    .kernels = example_kernels,
    /* Host memory: no device_alloc, copy, sync or stream. */
};

static onyx_status example_device_count(const onyx_option *options, size_t option_count,
                                        uint32_t *out_count, onyx_sink *err) {
  if (option_count > 0) {
    err->set_error(err, "unknown option '%s' (the example takes none)", options[0].key);
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  *out_count = 1;
  return ONYX_STATUS_OK;
}

static onyx_status example_device_info(uint32_t index, onyx_device_info *out_info, onyx_sink *err) {
  if (index != 0) {
    err->set_error(err, "device %u: the example has device 0 alone", index);
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  snprintf(out_info->name, sizeof out_info->name, "example host device");
  out_info->kind = ONYX_DEVICE_HOST;
  out_info->ordinal = 0;
  return ONYX_STATUS_OK;
}

static onyx_status example_open(const onyx_host_table *host, uint32_t index,
                                const onyx_option *options, size_t option_count,
                                void **out_instance, onyx_sink *err) {
  uint32_t count = 0;
  onyx_status st = example_device_count(options, option_count, &count, err);
  if (st != ONYX_STATUS_OK) return st;
  if (index != 0) {
    err->set_error(err, "device %u: the example has device 0 alone", index);
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  the_instance.host = host;
  *out_instance = &the_instance;
  return ONYX_STATUS_OK;
}

static const onyx_provider_factory example_factory = {
    .struct_size = sizeof(onyx_provider_factory),
    .abi_version = ONYX_ABI_V3,
    .name = "example",
    .device_count = example_device_count,
    .device_info = example_device_info,
    .open = example_open,
    .instance = &instance_table,
};

__attribute__((visibility("default"))) onyx_status
onyx_provider_factory_entry(uint32_t core_max_abi, uint32_t *out_abi,
                            const onyx_provider_factory **out_factory);
__attribute__((visibility("default"))) onyx_status
onyx_provider_factory_entry(uint32_t core_max_abi, uint32_t *out_abi,
                            const onyx_provider_factory **out_factory) {
  *out_abi = ONYX_ABI_V3; /* the version it speaks, or the lowest it could */
  if (core_max_abi < ONYX_ABI_V3) return ONYX_STATUS_ABI_MISMATCH;
  *out_factory = &example_factory;
  return ONYX_STATUS_OK;
}
