/*
 * A host provider for the reliability tests:
 *   ai.onnx::Add since opset 99    a kernel written for an opset newer than the core
 *                                  knows: it claims that opset (y = a + b, float32,
 *                                  equal shapes)
 *   onyx.rel::Picky                y = x (float32); its infer refuses a first dim of 3
 *                                  and its workspace one of 5, each with its reason
 *                                  through the host table's set_error (ABI v2); its
 *                                  infer refuses 7 without a word
 */
#include <stdio.h>
#include <string.h>

#include "onyx_abi.h"

#define EXPORT __attribute__((visibility("default")))

static onyx_status add_compute(void *state, onyx_compute_ctx *ctx, const onyx_tensor *const *in,
                               size_t count) {
  (void)state;
  if (count != 2 || in[0] == NULL || in[1] == NULL || in[0]->rank != in[1]->rank ||
      memcmp(in[0]->dims, in[1]->dims, in[0]->rank * sizeof in[0]->dims[0]) != 0) {
    ctx->set_error(ctx, "Add here takes two float32 inputs of one shape");
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  onyx_tensor *out = NULL;
  onyx_status st = ctx->alloc_output(ctx, 0, ONYX_DTYPE_FLOAT32, in[0]->rank, in[0]->dims, &out);
  if (st != ONYX_STATUS_OK) return st;
  const float *a = in[0]->data, *b = in[1]->data;
  float *y = out->data;
  for (int64_t i = 0; i < onyx_tensor_numel(in[0]); ++i) y[i] = a[i] + b[i];
  return ONYX_STATUS_OK;
}

static const onyx_kernel_table add99_kernel = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "",
    .op_type = "Add",
    .since_opset = 99,
    .type_mask = ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT32),
    .compute = add_compute,
};

static const onyx_host_table *host_table;

/* The reason channel of infer and workspace, where the core offers it. */
static onyx_status refuse(onyx_status status, const char *why, int64_t dim) {
  if (host_table && ONYX_HAS_FIELD(host_table, onyx_host_table, set_error) && host_table->set_error)
    host_table->set_error(host_table->host_data, "%s %lld", why, (long long)dim);
  return status;
}

static onyx_status picky_infer(void *state, const onyx_tensor *inputs, size_t count,
                               onyx_tensor *outputs, size_t output_count) {
  (void)state;
  if (count < 1 || output_count < 1) return ONYX_STATUS_INVALID_ARGUMENT;
  if (inputs[0].rank > 0 && inputs[0].dims[0] == 3)
    return refuse(ONYX_STATUS_INVALID_ARGUMENT, "Picky takes no first dim of", 3);
  if (inputs[0].rank > 0 && inputs[0].dims[0] == 7) return ONYX_STATUS_INVALID_ARGUMENT; /* mute */
  outputs[0] = inputs[0];
  outputs[0].data = NULL;
  return ONYX_STATUS_OK;
}

static onyx_status picky_workspace(void *state, const onyx_tensor *inputs, size_t count,
                                   onyx_workspace_requirement *req) {
  (void)state, (void)req;
  if (count >= 1 && inputs[0].rank > 0 && inputs[0].dims[0] == 5)
    return refuse(ONYX_STATUS_INVALID_ARGUMENT, "Picky has no workspace route for a first dim of",
                  5);
  return ONYX_STATUS_OK;
}

static onyx_status picky_compute(void *state, onyx_compute_ctx *ctx, const onyx_tensor *const *in,
                                 size_t count) {
  (void)state;
  if (count < 1 || in[0] == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  onyx_tensor *out = NULL;
  onyx_status st = ctx->alloc_output(ctx, 0, ONYX_DTYPE_FLOAT32, in[0]->rank, in[0]->dims, &out);
  if (st == ONYX_STATUS_OK)
    memcpy(out->data, in[0]->data, (size_t)onyx_tensor_numel(in[0]) * sizeof(float));
  return st;
}

static const onyx_kernel_table picky_kernel = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "onyx.rel",
    .op_type = "Picky",
    .since_opset = 1,
    .type_mask = ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT32),
    .workspace = picky_workspace,
    .compute = picky_compute,
    .infer = picky_infer,
};

static const onyx_kernel_table *const kernels[] = {&add99_kernel, &picky_kernel};

static int state_token;

static onyx_status rm_open(const onyx_host_table *host, const onyx_option *options,
                           size_t option_count, void **out_state, char *err, size_t err_cap) {
  (void)options, (void)option_count, (void)err, (void)err_cap;
  host_table = host;
  *out_state = &state_token;
  return ONYX_STATUS_OK;
}

static void rm_close(void *state) { (void)state; }

static const onyx_provider_table table = {
    .struct_size = sizeof(onyx_provider_table),
    .abi_version = ONYX_ABI_VERSION,
    .name = "rmock",
    .device = ONYX_DEVICE_HOST,
    .open = rm_open,
    .close = rm_close,
    .kernels = kernels,
    .kernel_count = sizeof kernels / sizeof kernels[0],
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
