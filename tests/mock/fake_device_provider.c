/*
 * A device provider without a device: its `device` is ONYX_DEVICE_CUDA, but its
 * "device memory" is plain host memory handed out by device_alloc and tracked block
 * by block. It lets CI (no GPU) drive the executor's host<->device paths: every
 * transfer goes through this provider's copy (which checks that each side really is
 * device or host memory as its tensor claims), kernels check that their inputs are
 * where the core promised, and the test reads what happened through
 * onyx_fake_device_stats_get (fake_device.h).
 *
 * Ops (domain onyx.fake, float32 data):
 *   Twice     y = 2x
 *   Scale     y = x * n[0]; n (input 1, int64) is read on the host: host_inputs bit 1.
 *             Declares a 64-byte STEP workspace (on the device).
 *   ScaleOld  Scale from a table whose struct_size ends before host_inputs (the bit
 *             is set beyond it and must be ignored): n arrives in device memory.
 *   Count     c = [numel(x)] as int64, on the device (a device-produced shape value)
 *   Inplace   y = x + 1, written into x when alias_output accepts
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_device.h"
#include "onyx_abi.h"

#define EXPORT __attribute__((visibility("default")))

/* ------------------------------------------------------------------ "device" memory */

#define MAX_BLOCKS 4096

typedef struct block {
  char *ptr;
  uint64_t bytes;
} block;

static block g_blocks[MAX_BLOCKS];
static onyx_fake_device_stats g_stats;

static block *find_block(const void *p, uint64_t bytes) {
  const char *c = p;
  for (size_t i = 0; c != NULL && i < MAX_BLOCKS; ++i) {
    block *b = &g_blocks[i];
    if (b->ptr != NULL && c >= b->ptr && c <= b->ptr + b->bytes && bytes <= b->bytes &&
        (uint64_t)(c - b->ptr) <= b->bytes - bytes)
      return b;
  }
  return NULL;
}

static bool on_device(const void *p, uint64_t bytes) { return find_block(p, bytes) != NULL; }

static onyx_status fake_device_alloc(void *state, uint64_t bytes, void **out_ptr) {
  (void)state;
  for (size_t i = 0; i < MAX_BLOCKS; ++i) {
    if (g_blocks[i].ptr != NULL) continue;
    char *p = aligned_alloc(256, (size_t)((bytes + 255) / 256 * 256 + 256));
    if (p == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
    g_blocks[i] = (block){p, bytes ? bytes : 1};
    g_stats.allocs++;
    g_stats.live_blocks++;
    g_stats.live_bytes += g_blocks[i].bytes;
    *out_ptr = p;
    return ONYX_STATUS_OK;
  }
  return ONYX_STATUS_OUT_OF_MEMORY;
}

static void fake_device_free(void *state, void *ptr) {
  (void)state;
  if (ptr == NULL) return;
  for (size_t i = 0; i < MAX_BLOCKS; ++i) {
    if (g_blocks[i].ptr != ptr) continue;
    g_stats.frees++;
    g_stats.live_blocks--;
    g_stats.live_bytes -= g_blocks[i].bytes;
    free(ptr);
    g_blocks[i] = (block){NULL, 0};
    return;
  }
  fprintf(stderr, "fake device: device_free of %p, which it never handed out\n", ptr);
  abort();
}

static uint64_t tensor_bytes(const onyx_tensor *t) {
  int64_t n = onyx_tensor_numel(t);
  return n < 0 ? 0 : (uint64_t)n * onyx_dtype_size(t->dtype);
}

/* Each side must be what its tensor says: device memory inside a live block, host
 * memory outside every block. */
static bool side_ok(const onyx_tensor *t, uint64_t bytes) {
  if (bytes == 0) return true;
  if (t->device == ONYX_DEVICE_CUDA) return on_device(t->data, bytes);
  return t->device == ONYX_DEVICE_HOST && t->data != NULL && !on_device(t->data, 1);
}

static onyx_status fake_copy(void *state, onyx_tensor *dst, const onyx_tensor *src) {
  (void)state;
  uint64_t bytes = tensor_bytes(src);
  if (dst->dtype != src->dtype || dst->rank != src->rank || tensor_bytes(dst) != bytes ||
      (dst->device == ONYX_DEVICE_HOST && src->device == ONYX_DEVICE_HOST) ||
      !side_ok(dst, bytes) || !side_ok(src, bytes)) {
    fprintf(stderr, "fake device: bad copy (%u -> %u, %llu bytes)\n", src->device, dst->device,
            (unsigned long long)bytes);
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  if (dst->device == ONYX_DEVICE_CUDA && src->device == ONYX_DEVICE_CUDA)
    g_stats.copies_d2d++;
  else if (dst->device == ONYX_DEVICE_CUDA)
    g_stats.copies_h2d++;
  else
    g_stats.copies_d2h++;
  if (bytes) memmove(dst->data, src->data, (size_t)bytes);
  return ONYX_STATUS_OK;
}

static onyx_status fake_sync(void *state) {
  (void)state;
  g_stats.syncs++;
  return ONYX_STATUS_OK;
}

static onyx_status fake_capacity(void *state, uint64_t *out_bytes) {
  (void)state;
  *out_bytes = 256ull << 20;
  return ONYX_STATUS_OK;
}

EXPORT void onyx_fake_device_stats_get(onyx_fake_device_stats *out);
EXPORT void onyx_fake_device_stats_get(onyx_fake_device_stats *out) { *out = g_stats; }

/* ------------------------------------------------------------------ kernels */

static onyx_status need_device(onyx_compute_ctx *ctx, const onyx_tensor *t, size_t i) {
  if (t == NULL || t->device != ONYX_DEVICE_CUDA || !on_device(t->data, tensor_bytes(t))) {
    ctx->set_error(ctx, "input %zu is not in fake device memory", i);
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  return ONYX_STATUS_OK;
}

static onyx_status same_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                              onyx_tensor *outputs, size_t output_count) {
  (void)state;
  if (input_count < 1 || output_count < 1) return ONYX_STATUS_INVALID_ARGUMENT;
  outputs[0] = inputs[0];
  outputs[0].data = NULL;
  return ONYX_STATUS_OK;
}

static onyx_status twice_compute(void *state, onyx_compute_ctx *ctx,
                                 const onyx_tensor *const *inputs, size_t input_count) {
  (void)state;
  onyx_status st = need_device(ctx, input_count > 0 ? inputs[0] : NULL, 0);
  if (st != ONYX_STATUS_OK) return st;
  onyx_tensor *y = NULL;
  st = ctx->alloc_output(ctx, 0, ONYX_DTYPE_FLOAT32, inputs[0]->rank, inputs[0]->dims, &y);
  if (st != ONYX_STATUS_OK) return st;
  const float *x = inputs[0]->data;
  float *out = y->data;
  for (int64_t i = 0; i < onyx_tensor_numel(inputs[0]); ++i) out[i] = 2.0f * x[i];
  return ONYX_STATUS_OK;
}

static onyx_status scale_workspace(void *state, const onyx_tensor *inputs, size_t count,
                                   onyx_workspace_requirement *req) {
  (void)state;
  (void)inputs;
  (void)count;
  req->count = 1;
  req->regions[0] = (onyx_workspace_region){"scale_scratch", 64, 64, ONYX_LIFETIME_STEP};
  return ONYX_STATUS_OK;
}

static onyx_status scale_run(onyx_compute_ctx *ctx, const onyx_tensor *const *inputs,
                             size_t input_count, bool n_on_host) {
  if (input_count < 2 || inputs[0] == NULL || inputs[1] == NULL) {
    ctx->set_error(ctx, "Scale takes x and n");
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  const onyx_tensor *x = inputs[0], *n = inputs[1];
  g_stats.scale_computes++;
  g_stats.in0_on_device = on_device(x->data, tensor_bytes(x));
  g_stats.in1_device = n->device;
  g_stats.in1_on_device = on_device(n->data, tensor_bytes(n));
  g_stats.in1_data = n->data;
  g_stats.ws_on_device = ctx->workspace_count == 1 && ctx->workspace[0].bytes >= 64 &&
                         on_device(ctx->workspace[0].data, 64);
  onyx_status st = need_device(ctx, x, 0);
  if (st != ONYX_STATUS_OK) return st;
  if (n_on_host ? n->device != ONYX_DEVICE_HOST || g_stats.in1_on_device
                : need_device(ctx, n, 1) != ONYX_STATUS_OK) {
    ctx->set_error(ctx, "input 1 is not in %s memory", n_on_host ? "host" : "fake device");
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  if (!g_stats.ws_on_device) {
    ctx->set_error(ctx, "workspace is not in fake device memory");
    return ONYX_STATUS_WORKSPACE_TOO_SMALL;
  }
  if (n->dtype != ONYX_DTYPE_INT64 || onyx_tensor_numel(n) < 1) {
    ctx->set_error(ctx, "n must hold at least one int64");
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  memset(ctx->workspace[0].data, 0xAB, 64);
  float k = (float)((const int64_t *)n->data)[0];
  onyx_tensor *y = NULL;
  st = ctx->alloc_output(ctx, 0, ONYX_DTYPE_FLOAT32, x->rank, x->dims, &y);
  if (st != ONYX_STATUS_OK) return st;
  const float *xs = x->data;
  float *out = y->data;
  for (int64_t i = 0; i < onyx_tensor_numel(x); ++i) out[i] = k * xs[i];
  return ONYX_STATUS_OK;
}

static onyx_status scale_compute(void *state, onyx_compute_ctx *ctx,
                                 const onyx_tensor *const *inputs, size_t input_count) {
  (void)state;
  return scale_run(ctx, inputs, input_count, true);
}

static onyx_status scale_old_compute(void *state, onyx_compute_ctx *ctx,
                                     const onyx_tensor *const *inputs, size_t input_count) {
  (void)state;
  return scale_run(ctx, inputs, input_count, false);
}

static onyx_status count_compute(void *state, onyx_compute_ctx *ctx,
                                 const onyx_tensor *const *inputs, size_t input_count) {
  (void)state;
  onyx_status st = need_device(ctx, input_count > 0 ? inputs[0] : NULL, 0);
  if (st != ONYX_STATUS_OK) return st;
  onyx_tensor *c = NULL;
  int64_t one = 1;
  st = ctx->alloc_output(ctx, 0, ONYX_DTYPE_INT64, 1, &one, &c);
  if (st != ONYX_STATUS_OK) return st;
  ((int64_t *)c->data)[0] = onyx_tensor_numel(inputs[0]);
  return ONYX_STATUS_OK;
}

static onyx_status count_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                               onyx_tensor *outputs, size_t output_count) {
  (void)state;
  (void)inputs;
  if (input_count < 1 || output_count < 1) return ONYX_STATUS_INVALID_ARGUMENT;
  outputs[0] = (onyx_tensor){.dtype = ONYX_DTYPE_INT64, .rank = 1, .dims = {1}};
  return ONYX_STATUS_OK;
}

static onyx_status inplace_compute(void *state, onyx_compute_ctx *ctx,
                                   const onyx_tensor *const *inputs, size_t input_count) {
  (void)state;
  onyx_status st = need_device(ctx, input_count > 0 ? inputs[0] : NULL, 0);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *x = inputs[0];
  g_stats.inplace_aliased = ctx->alias_output(ctx, 0, 0) == ONYX_STATUS_OK;
  float *out = x->data;
  if (!g_stats.inplace_aliased) {
    onyx_tensor *y = NULL;
    st = ctx->alloc_output(ctx, 0, ONYX_DTYPE_FLOAT32, x->rank, x->dims, &y);
    if (st != ONYX_STATUS_OK) return st;
    out = y->data;
  }
  const float *xs = x->data;
  for (int64_t i = 0; i < onyx_tensor_numel(x); ++i) out[i] = xs[i] + 1.0f;
  return ONYX_STATUS_OK;
}

#define FAKE_KERNEL(sym, NAME, SIZE, COMPUTE, INFER, WORKSPACE, HOST)                              \
  static const onyx_kernel_table sym = {                                                           \
      .struct_size = SIZE,                                                                         \
      .version = ONYX_ABI_VERSION,                                                                 \
      .domain = "onyx.fake",                                                                       \
      .op_type = NAME,                                                                             \
      .since_opset = 1,                                                                            \
      .type_mask = ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT32),                                             \
      .workspace = WORKSPACE,                                                                      \
      .compute = COMPUTE,                                                                          \
      .infer = INFER,                                                                              \
      .host_inputs = HOST,                                                                         \
  };

FAKE_KERNEL(k_twice, "Twice", sizeof(onyx_kernel_table), twice_compute, same_infer, NULL, 0)
FAKE_KERNEL(k_scale, "Scale", sizeof(onyx_kernel_table), scale_compute, same_infer, scale_workspace,
            UINT64_C(1) << 1)
/* A table built before host_inputs existed: the bit lies past its struct_size. */
FAKE_KERNEL(k_scale_old, "ScaleOld", offsetof(onyx_kernel_table, host_inputs), scale_old_compute,
            same_infer, scale_workspace, UINT64_C(1) << 1)
FAKE_KERNEL(k_count, "Count", sizeof(onyx_kernel_table), count_compute, count_infer, NULL, 0)
FAKE_KERNEL(k_inplace, "Inplace", sizeof(onyx_kernel_table), inplace_compute, same_infer, NULL, 0)

static const onyx_kernel_table *const kernels[] = {&k_twice, &k_scale, &k_scale_old, &k_count,
                                                   &k_inplace};

/* ------------------------------------------------------------------ provider */

static int g_state;

static onyx_status fake_open(const onyx_host_table *host, const onyx_option *options,
                             size_t option_count, void **out_state, char *err, size_t err_cap) {
  (void)host;
  (void)options;
  (void)option_count;
  (void)err;
  (void)err_cap;
  *out_state = &g_state;
  return ONYX_STATUS_OK;
}

static void fake_close(void *state) { (void)state; }

static const onyx_provider_table table = {
    .struct_size = sizeof(onyx_provider_table),
    .abi_version = ONYX_ABI_VERSION,
    .name = "fake",
    .device = ONYX_DEVICE_CUDA,
    .open = fake_open,
    .close = fake_close,
    .kernels = kernels,
    .kernel_count = sizeof kernels / sizeof kernels[0],
    .device_alloc = fake_device_alloc,
    .device_free = fake_device_free,
    .copy = fake_copy,
    .sync = fake_sync,
    .memory_capacity = fake_capacity,
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
