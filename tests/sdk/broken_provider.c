/*
 * Providers broken on purpose for onyx-check-provider, one defect per build
 * (BROKEN_VARIANT): each must fail the check with the finding named here.
 *
 *   GOOD            none: a Relu (float32) that stages x through a workspace region
 *   TWO_EXPORTS     exports a helper beside the entry             → exports
 *   CLOSE_NULL      close(NULL) dereferences its state           → NULL-safety crashed
 *   WS_IMPURE       the requirement grows at every call          → two different requirements
 *   WS_WRITES_FIRST writes its output before checking the view   → the output was written
 *   WS_IGNORES      runs on a short view                         → expected WORKSPACE_TOO_SMALL
 *   RACY            results depend on a counter across calls     → concurrent runs differ
 *   MALLOC          takes heap memory during compute             → heap allocations
 *   WRONG           computes 1.001 * relu(x)                     → conformance
 *   NO_REASON       declines in probe without saying why         → declined without saying why
 *   ANY_ABI         accepts a core of any version, ABI 0 too     → accepts a core of ABI 0
 *   V3_GOOD         none: the same Relu as a v3 factory alone (a v3 definition)
 *   V3_SILENT       the v3 device declines at open without a word → declined without saying why
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onyx_abi.h"

#define GOOD 1
#define TWO_EXPORTS 2
#define CLOSE_NULL 3
#define WS_IMPURE 4
#define WS_WRITES_FIRST 5
#define WS_IGNORES 6
#define RACY 7
#define MALLOC 8
#define WRONG 9
#define NO_REASON 10
#define ANY_ABI 11
#define V3_GOOD 12
#define V3_SILENT 13
#define IS_V3 (BROKEN_VARIANT >= V3_GOOD)

#ifndef BROKEN_VARIANT
#error "define BROKEN_VARIANT"
#endif
#define EXPORT __attribute__((visibility("default")))

static atomic_uint calls;
static void *volatile heap_sink;

static onyx_status relu_workspace(void *state, const onyx_tensor *inputs, size_t count,
                                  onyx_workspace_requirement *req) {
  (void)state;
  if (count < 1) return ONYX_STATUS_INVALID_ARGUMENT;
  uint64_t bytes = (uint64_t)onyx_tensor_numel(&inputs[0]) * sizeof(float);
  if (BROKEN_VARIANT == WS_IMPURE) bytes += 64 * atomic_fetch_add(&calls, 1);
  req->count = 1;
  req->regions[0] = (onyx_workspace_region){"stage", bytes, 64, ONYX_LIFETIME_STEP};
  return ONYX_STATUS_OK;
}

static onyx_status relu_compute(void *state, onyx_compute_ctx *ctx,
                                const onyx_tensor *const *inputs, size_t count) {
  (void)state;
  if (count < 1 || inputs[0] == NULL || inputs[0]->dtype != ONYX_DTYPE_FLOAT32) {
    ctx->set_error(ctx, "input 0: expected float32");
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  const onyx_tensor *x = inputs[0];
  size_t n = (size_t)onyx_tensor_numel(x), need = n * sizeof(float);
  onyx_tensor *y = NULL;
  onyx_status st;
  if (BROKEN_VARIANT == WS_WRITES_FIRST) {
    if ((st = ctx->alloc_output(ctx, 0, ONYX_DTYPE_FLOAT32, x->rank, x->dims, &y)) !=
        ONYX_STATUS_OK)
      return st;
    memset(y->data, 0, need);
  }
  size_t have = ctx->workspace_count ? (size_t)ctx->workspace[0].bytes : 0;
  if (have < need && BROKEN_VARIANT != WS_IGNORES) {
    ctx->set_error(ctx, "workspace 'stage': %zu bytes, needs %zu", have, need);
    return ONYX_STATUS_WORKSPACE_TOO_SMALL;
  }
  if (y == NULL &&
      (st = ctx->alloc_output(ctx, 0, ONYX_DTYPE_FLOAT32, x->rank, x->dims, &y)) != ONYX_STATUS_OK)
    return st;
  float *stage = ctx->workspace_count ? ctx->workspace[0].data : NULL;
  size_t staged = have < need ? have / sizeof(float) : n;
  if (stage) memcpy(stage, x->data, staged * sizeof(float));
  if (BROKEN_VARIANT == MALLOC) { /* through a volatile pointer: not elided */
    heap_sink = malloc(need);
    free(heap_sink);
  }
  float bias = BROKEN_VARIANT == RACY ? 1e-3f * (float)(atomic_fetch_add(&calls, 1) % 2) : 0.0f;
  float scale = BROKEN_VARIANT == WRONG ? 1.001f : 1.0f;
  const float *src = x->data;
  float *out = y->data;
  for (size_t i = 0; i < n; ++i) {
    float v = i < staged && stage ? stage[i] : src[i];
    out[i] = (v > 0 ? v : 0) * scale + bias;
  }
  return ONYX_STATUS_OK;
}

static const onyx_kernel_table relu = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "",
    .op_type = "Relu",
    .since_opset = 14,
    .type_mask = ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT32),
    .workspace = relu_workspace,
    .compute = relu_compute,
};
static const onyx_kernel_table *const kernels[] = {&relu};

static int instance;

static onyx_status broken_open(const onyx_host_table *host, const onyx_option *options,
                               size_t option_count, void **out_state, char *err, size_t cap) {
  (void)host;
  (void)options;
  (void)option_count;
  (void)err;
  (void)cap;
  *out_state = &instance;
  return ONYX_STATUS_OK;
}

static void broken_close(void *state) {
  if (BROKEN_VARIANT == CLOSE_NULL) {
    volatile int *p = state;
    *p = 0; /* the defect: state may be NULL */
  }
}

static bool broken_probe(void *state, char *why, size_t cap) {
  (void)state;
  (void)why;
  (void)cap;
  return BROKEN_VARIANT != NO_REASON;
}

static const onyx_provider_table table = {
    .struct_size = sizeof(onyx_provider_table),
    .abi_version = ONYX_ABI_VERSION,
    .name = "broken",
    .device = ONYX_DEVICE_HOST,
    .open = broken_open,
    .close = broken_close,
    .probe = broken_probe,
    .kernels = kernels,
    .kernel_count = 1,
};

#if BROKEN_VARIANT == TWO_EXPORTS
EXPORT int broken_helper(void);
EXPORT int broken_helper(void) { return 1; }
#endif

#if !IS_V3
EXPORT onyx_status onyx_provider_entry(uint32_t core_max_abi, uint32_t *out_abi,
                                       const onyx_provider_table **out_table);
EXPORT onyx_status onyx_provider_entry(uint32_t core_max_abi, uint32_t *out_abi,
                                       const onyx_provider_table **out_table) {
  *out_abi = ONYX_ABI_VERSION;
  if (core_max_abi < ONYX_ABI_VERSION && BROKEN_VARIANT != ANY_ABI) return ONYX_STATUS_ABI_MISMATCH;
  *out_table = &table;
  return ONYX_STATUS_OK;
}
#else
/* The v3 shape of the same kernel: the v2 callbacks behind the sink-taking ones. */
static onyx_status v3_workspace(void *state, const onyx_tensor *inputs, size_t count,
                                onyx_workspace_requirement *req, onyx_sink *err) {
  (void)err;
  return relu_workspace(state, inputs, count, req);
}

static onyx_status v3_compute(void *state, onyx_compute_ctx *ctx, const onyx_tensor *const *inputs,
                              size_t count, onyx_sink *err) {
  (void)err;
  return relu_compute(state, ctx, inputs, count);
}

static const onyx_type_constraint relu_types[] = {
    {ONYX_TYPE_INPUT, 0, ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT32)}};
static const onyx_kernel_def relu_def = {
    .struct_size = sizeof(onyx_kernel_def),
    .version = ONYX_ABI_V3,
    .domain = "",
    .op_type = "Relu",
    .since_opset = 14,
    .types = relu_types,
    .type_count = 1,
    .workspace = v3_workspace,
    .compute = v3_compute,
};

static void v3_close(void *inst) { (void)inst; }

static onyx_status v3_kernels(void *inst, onyx_kernel_registry *reg, onyx_sink *err) {
  (void)inst;
  (void)err;
  return reg->add(reg, &relu_def);
}

static const onyx_instance_table instance_table = {
    .struct_size = sizeof(onyx_instance_table),
    .version = ONYX_ABI_V3,
    .close = v3_close,
    .kernels = v3_kernels,
};

static onyx_status v3_device_count(const onyx_option *options, size_t count, uint32_t *out,
                                   onyx_sink *err) {
  (void)options;
  (void)count;
  (void)err;
  *out = 1;
  return ONYX_STATUS_OK;
}

static onyx_status v3_device_info(uint32_t index, onyx_device_info *info, onyx_sink *err) {
  (void)err;
  if (index != 0) return ONYX_STATUS_INVALID_ARGUMENT;
  snprintf(info->name, sizeof info->name, "broken host");
  info->kind = ONYX_DEVICE_HOST;
  return ONYX_STATUS_OK;
}

static onyx_status v3_open(const onyx_host_table *host, uint32_t index, const onyx_option *options,
                           size_t count, void **out_instance, onyx_sink *err) {
  (void)host;
  (void)index;
  (void)options;
  (void)count;
  (void)err;
  if (BROKEN_VARIANT == V3_SILENT) return ONYX_STATUS_DEVICE_UNAVAILABLE; /* the defect */
  *out_instance = &instance;
  return ONYX_STATUS_OK;
}

static const onyx_provider_factory factory = {
    .struct_size = sizeof(onyx_provider_factory),
    .abi_version = ONYX_ABI_V3,
    .name = "broken3",
    .device_count = v3_device_count,
    .device_info = v3_device_info,
    .open = v3_open,
    .instance = &instance_table,
};

/* The v2 table stays referenced (it is the same kernel's other shape). */
const onyx_provider_table *broken_table(void);
const onyx_provider_table *broken_table(void) { return &table; }

EXPORT onyx_status onyx_provider_factory_entry(uint32_t core_max_abi, uint32_t *out_abi,
                                               const onyx_provider_factory **out_factory);
EXPORT onyx_status onyx_provider_factory_entry(uint32_t core_max_abi, uint32_t *out_abi,
                                               const onyx_provider_factory **out_factory) {
  *out_abi = ONYX_ABI_V3;
  if (core_max_abi < ONYX_ABI_V3) return ONYX_STATUS_ABI_MISMATCH;
  *out_factory = &factory;
  return ONYX_STATUS_OK;
}
#endif
