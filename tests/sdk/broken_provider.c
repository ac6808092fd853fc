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
 */
#include <stdatomic.h>
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

EXPORT onyx_status onyx_provider_entry(uint32_t core_max_abi, uint32_t *out_abi,
                                       const onyx_provider_table **out_table);
EXPORT onyx_status onyx_provider_entry(uint32_t core_max_abi, uint32_t *out_abi,
                                       const onyx_provider_table **out_table) {
  *out_abi = ONYX_ABI_VERSION;
  if (core_max_abi < ONYX_ABI_VERSION && BROKEN_VARIANT != ANY_ABI) return ONYX_STATUS_ABI_MISMATCH;
  *out_table = &table;
  return ONYX_STATUS_OK;
}
