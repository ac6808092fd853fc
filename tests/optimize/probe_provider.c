/*
 * A host provider with one kernel, test.onyx::Probe, that reports what the core told
 * it about its inputs (ABI v2): output 0 holds, per input, 1 where
 * node->input_constants offered a constant and 0 where it did not; output 1 the sum
 * of each input's values. With attribute copy = 1 the kernel copies every constant
 * input at create into governed weights memory (PROBE_PAD bytes longer than the
 * original, so that the books tell the copy from it), says so through
 * input_constant_copied, and sums its own copy at compute — where the core hands it
 * the input's geometry alone (data NULL once released).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onyx_abi.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_INPUTS 8
#define PROBE_PAD 64 /* keep in step with optimize_test.c */

typedef struct probe_state {
  const onyx_host_table *host;
  size_t count;
  float flags[MAX_INPUTS];
  float *copies[MAX_INPUTS]; /* own copies of constant inputs (copy = 1) */
  int64_t numel[MAX_INPUTS];
} probe_state;

static onyx_status probe_open(const onyx_host_table *host, const onyx_option *options,
                              size_t option_count, void **out_state, char *err, size_t err_cap) {
  (void)options;
  (void)option_count;
  (void)err;
  (void)err_cap;
  *out_state = (void *)(uintptr_t)host;
  return ONYX_STATUS_OK;
}

static void probe_close(void *state) { (void)state; }

static int64_t attr_int(const onyx_node_info *node, const char *name) {
  for (size_t a = 0; a < node->attr_count; ++a)
    if (!strcmp(node->attrs[a].name, name)) return node->attrs[a].i;
  return 0;
}

static void probe_destroy(void *state) {
  probe_state *s = state;
  if (s == NULL) return;
  for (size_t i = 0; i < s->count; ++i) s->host->mem_free(s->host->host_data, s->copies[i]);
  free(s);
}

static onyx_status probe_create(void *provider_state, const onyx_node_info *node, void **out_state,
                                char *err, size_t err_cap) {
  if (node->input_count > MAX_INPUTS) {
    snprintf(err, err_cap, "at most %d inputs", MAX_INPUTS);
    return ONYX_STATUS_UNSUPPORTED;
  }
  probe_state *s = calloc(1, sizeof *s);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  s->host = provider_state;
  s->count = node->input_count;
  bool v2 = ONYX_HAS_FIELD(node, onyx_node_info, input_constant_copied);
  const onyx_tensor *const *constants = v2 ? node->input_constants : NULL;
  bool copy = attr_int(node, "copy") != 0 && v2 && node->input_constant_copied != NULL;
  for (size_t i = 0; i < node->input_count; ++i) {
    const onyx_tensor *c = constants ? constants[i] : NULL;
    s->flags[i] = c != NULL ? 1.0f : 0.0f;
    if (c == NULL || !copy || c->dtype != ONYX_DTYPE_FLOAT32) continue;
    s->numel[i] = onyx_tensor_numel(c);
    void *p = NULL;
    onyx_status st =
        s->host->mem_alloc(s->host->host_data, ONYX_REQUESTER_WEIGHTS,
                           (uint64_t)s->numel[i] * sizeof(float) + PROBE_PAD, 64, "probe copy", &p);
    if (st != ONYX_STATUS_OK) {
      probe_destroy(s);
      snprintf(err, err_cap, "cannot book the copy of input %zu", i);
      return st;
    }
    memcpy(p, c->data, (size_t)s->numel[i] * sizeof(float));
    s->copies[i] = p;
    node->input_constant_copied[i] = true;
  }
  *out_state = s;
  return ONYX_STATUS_OK;
}

static double sum_of(const float *x, int64_t n) {
  double acc = 0;
  for (int64_t i = 0; i < n; ++i) acc += x[i];
  return acc;
}

static onyx_status probe_compute(void *state, onyx_compute_ctx *ctx,
                                 const onyx_tensor *const *inputs, size_t n) {
  probe_state *s = state;
  int64_t dims[1] = {(int64_t)n};
  onyx_tensor *flags = NULL, *sums = NULL;
  onyx_status st = ctx->alloc_output(ctx, 0, ONYX_DTYPE_FLOAT32, 1, dims, &flags);
  if (st == ONYX_STATUS_OK) st = ctx->alloc_output(ctx, 1, ONYX_DTYPE_FLOAT32, 1, dims, &sums);
  if (st != ONYX_STATUS_OK) return st;
  for (size_t i = 0; i < n; ++i) {
    ((float *)flags->data)[i] = s->flags[i];
    const onyx_tensor *in = inputs[i];
    if (in == NULL || in->dtype != ONYX_DTYPE_FLOAT32 || in->device != ONYX_DEVICE_HOST) {
      ctx->set_error(ctx, "input %zu must be a host float32 tensor", i);
      return ONYX_STATUS_INVALID_ARGUMENT;
    }
    if (s->copies[i] != NULL && onyx_tensor_numel(in) != s->numel[i]) {
      ctx->set_error(ctx, "input %zu lost its geometry", i);
      return ONYX_STATUS_INTERNAL;
    }
    const float *x = s->copies[i] ? s->copies[i] : in->data;
    ((float *)sums->data)[i] = (float)sum_of(x, onyx_tensor_numel(in));
  }
  return ONYX_STATUS_OK;
}

static const onyx_kernel_table probe_kernel = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "test.onyx",
    .op_type = "Probe",
    .since_opset = 1,
    .create = probe_create,
    .destroy = probe_destroy,
    .compute = probe_compute,
};

static const onyx_kernel_table *const kernels[] = {&probe_kernel};

static const onyx_provider_table table = {
    .struct_size = sizeof(onyx_provider_table),
    .abi_version = ONYX_ABI_VERSION,
    .name = "probe",
    .device = ONYX_DEVICE_HOST,
    .open = probe_open,
    .close = probe_close,
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
