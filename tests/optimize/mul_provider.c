/*
 * A host provider with a float32 Mul (same shapes only) and nothing else, placed
 * before the CPU provider by gate_up_silu_test.c: the final Mul of an MLP then runs
 * where no SiluMul kernel exists, and the fusion must leave the MLP alone.
 */
#include <stdio.h>
#include <string.h>

#include "onyx_abi.h"

#define EXPORT __attribute__((visibility("default")))

static onyx_status mul_open(const onyx_host_table *host, const onyx_option *options,
                            size_t option_count, void **out_state, char *err, size_t err_cap) {
  (void)host;
  (void)options;
  (void)option_count;
  (void)err;
  (void)err_cap;
  *out_state = NULL;
  return ONYX_STATUS_OK;
}

static void mul_close(void *state) { (void)state; }

static onyx_status mul_compute(void *state, onyx_compute_ctx *ctx, const onyx_tensor *const *inputs,
                               size_t n) {
  (void)state;
  const onyx_tensor *a = n == 2 ? inputs[0] : NULL, *b = n == 2 ? inputs[1] : NULL;
  if (a == NULL || b == NULL || a->rank != b->rank ||
      memcmp(a->dims, b->dims, a->rank * sizeof a->dims[0]) != 0) {
    ctx->set_error(ctx, "mulonly: two float32 inputs of one shape expected");
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  onyx_tensor *y = NULL;
  onyx_status st = ctx->alloc_output(ctx, 0, ONYX_DTYPE_FLOAT32, a->rank, a->dims, &y);
  if (st != ONYX_STATUS_OK) return st;
  const float *x = a->data, *z = b->data;
  float *out = y->data;
  for (int64_t i = 0; i < onyx_tensor_numel(a); ++i) out[i] = x[i] * z[i];
  return ONYX_STATUS_OK;
}

static const onyx_kernel_table mul_kernel = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "",
    .op_type = "Mul",
    .since_opset = 7,
    .type_input = 0,
    .type_mask = ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT32),
    .compute = mul_compute,
};

static const onyx_kernel_table *const kernels[] = {&mul_kernel};

static const onyx_provider_table table = {
    .struct_size = sizeof(onyx_provider_table),
    .abi_version = ONYX_ABI_VERSION,
    .name = "mulonly",
    .device = ONYX_DEVICE_HOST,
    .open = mul_open,
    .close = mul_close,
    .kernels = kernels,
    .kernel_count = 1,
};

EXPORT onyx_status onyx_provider_entry(uint32_t core_max_abi, uint32_t *out_abi,
                                       const onyx_provider_table **out_table);
EXPORT onyx_status onyx_provider_entry(uint32_t core_max_abi, uint32_t *out_abi,
                                       const onyx_provider_table **out_table) {
  *out_abi = ONYX_ABI_VERSION;
  if (core_max_abi < ONYX_ABI_VERSION) return ONYX_STATUS_ABI_MISMATCH;
  *out_table = &table;
  return ONYX_STATUS_OK;
}
