/*
 * A provider that breaks the ABI on purpose, one way per build (MOCK_VARIANT):
 *   GOOD          a working provider with one op, onyx.test::Twice (y = 2x, float32),
 *                 whose kernel declares STEP and SESSION workspace
 *   WRONG_ABI     declines: needs ABI 99
 *   FUTURE_ABI    answers ABI 7, which no core speaks yet
 *   NO_ENTRY      exports no entry symbol
 *   FAILING_INIT  open() fails with a message
 *   NULL_OPTIONAL every optional member NULL (probe, supports, create, destroy,
 *                 workspace, sync)
 *   DECLINES      probe() says no device is present
 */
#include <stdio.h>
#include <string.h>

#include "onyx_abi.h"

#define VARIANT_GOOD 1
#define VARIANT_WRONG_ABI 2
#define VARIANT_FUTURE_ABI 3
#define VARIANT_NO_ENTRY 4
#define VARIANT_FAILING_INIT 5
#define VARIANT_NULL_OPTIONAL 6
#define VARIANT_DECLINES 7

#ifndef MOCK_VARIANT
#error "define MOCK_VARIANT"
#endif

#define EXPORT __attribute__((visibility("default")))

static onyx_status twice_compute(void *state, onyx_compute_ctx *ctx,
                                 const onyx_tensor *const *inputs, size_t input_count) {
  (void)state;
  if (input_count < 1 || inputs[0] == NULL || inputs[0]->dtype != ONYX_DTYPE_FLOAT32) {
    ctx->set_error(ctx, "Twice takes one float32 input");
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  for (size_t i = 0; i < ctx->workspace_count; ++i) {
    if (ctx->workspace[i].bytes < 64) { /* what twice_workspace asks for */
      ctx->set_error(ctx, "workspace region '%s' has %llu bytes, needs 64", ctx->workspace[i].name,
                     (unsigned long long)ctx->workspace[i].bytes);
      return ONYX_STATUS_WORKSPACE_TOO_SMALL;
    }
    memset(ctx->workspace[i].data, 0xAB, 64); /* touch it: ASan checks the carving */
  }
  onyx_tensor *out = NULL;
  onyx_status st =
      ctx->alloc_output(ctx, 0, ONYX_DTYPE_FLOAT32, inputs[0]->rank, inputs[0]->dims, &out);
  if (st != ONYX_STATUS_OK) return st;
  const float *x = inputs[0]->data;
  float *y = out->data;
  for (int64_t i = 0; i < onyx_tensor_numel(inputs[0]); ++i) y[i] = 2.0f * x[i];
  return ONYX_STATUS_OK;
}

#if MOCK_VARIANT != VARIANT_NULL_OPTIONAL
static onyx_status twice_workspace(void *state, const onyx_tensor *inputs, size_t count,
                                   onyx_workspace_requirement *req) {
  (void)state;
  (void)inputs;
  (void)count;
  req->count = 2;
  req->regions[0] = (onyx_workspace_region){"step_scratch", 64, 64, ONYX_LIFETIME_STEP};
  req->regions[1] = (onyx_workspace_region){"session_scratch", 64, 128, ONYX_LIFETIME_SESSION};
  return ONYX_STATUS_OK;
}
#endif

static const onyx_kernel_table twice_kernel = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "onyx.test",
    .op_type = "Twice",
    .since_opset = 1,
    .type_mask = ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT32),
#if MOCK_VARIANT != VARIANT_NULL_OPTIONAL
    .workspace = twice_workspace,
#endif
    .compute = twice_compute,
};

static const onyx_kernel_table *const kernels[] = {&twice_kernel};

static int open_count;

static onyx_status mock_open(const onyx_host_table *host, const onyx_option *options,
                             size_t option_count, void **out_state, char *err, size_t err_cap) {
  (void)host;
  (void)options;
  (void)option_count;
#if MOCK_VARIANT == VARIANT_FAILING_INIT
  (void)out_state;
  (void)open_count;
  snprintf(err, err_cap, "mock device 3 is on fire");
  return ONYX_STATUS_PROVIDER_ERROR;
#else
  (void)err;
  (void)err_cap;
  *out_state = &open_count;
  open_count++;
  return ONYX_STATUS_OK;
#endif
}

static void mock_close(void *state) {
  int *count = state;
  if (count != NULL) (*count)--; /* close(NULL) is a no-op, as the ABI asks */
}

#if MOCK_VARIANT == VARIANT_DECLINES
static bool mock_probe(void *state, char *why, size_t cap) {
  (void)state;
  snprintf(why, cap, "no mock device present");
  return false;
}
#endif

static const onyx_provider_table table = {
    .struct_size = sizeof(onyx_provider_table),
    .abi_version = 1, /* a v1 provider: the core still loads it */
    .name = "mock",
    .device = ONYX_DEVICE_HOST,
    .open = mock_open,
    .close = mock_close,
#if MOCK_VARIANT == VARIANT_DECLINES
    .probe = mock_probe,
#endif
    .kernels = kernels,
    .kernel_count = 1,
};

/* Variants that never hand the table out still reference it. */
const onyx_provider_table *mock_table_for_tests(void);
const onyx_provider_table *mock_table_for_tests(void) { return &table; }

#if MOCK_VARIANT != VARIANT_NO_ENTRY
EXPORT onyx_status onyx_provider_entry(uint32_t core_max_abi, uint32_t *out_abi,
                                       const onyx_provider_table **out_table);
EXPORT onyx_status onyx_provider_entry(uint32_t core_max_abi, uint32_t *out_abi,
                                       const onyx_provider_table **out_table) {
#if MOCK_VARIANT == VARIANT_WRONG_ABI
  (void)core_max_abi;
  (void)out_table;
  *out_abi = 99;
  return ONYX_STATUS_ABI_MISMATCH;
#elif MOCK_VARIANT == VARIANT_FUTURE_ABI
  (void)core_max_abi;
  *out_abi = 7;
  *out_table = &table;
  return ONYX_STATUS_OK;
#else
  if (core_max_abi < 1) {
    *out_abi = 1;
    return ONYX_STATUS_ABI_MISMATCH;
  }
  *out_abi = 1;
  *out_table = &table;
  return ONYX_STATUS_OK;
#endif
}
#else
EXPORT int onyx_provider_entry_misspelled(void);
EXPORT int onyx_provider_entry_misspelled(void) { return 0; }
#endif
