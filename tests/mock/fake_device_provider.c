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
 *   Legacy    y = x - 1, a kernel that does something a capture cannot record: run
 *             while capturing, it invalidates the capture (as a CUDA sync would)
 *
 * Graphs: like a CUDA stream, the provider records instead of running while a
 * capture is open — every kernel's device work is an `op` (function + arguments,
 * host values read at compute time baked in) run at once, or appended to the open
 * capture and run again at each launch. Copies, syncs and allocations during a
 * capture invalidate it, as they would on a GPU (pageable copies, syncs).
 *
 * Threads: one "device" — every entry point holds one recursive mutex — with one
 * "stream": work submitted from any thread while a capture is open lands in that
 * capture, as on a CUDA stream. Keeping other threads' work out of a capture is the
 * core's job (stream_lock.c).
 *
 * Built twice (FAKE_ABI):
 *   2  onyx_mock_fake_device: a v2 provider table, device kind CUDA, one device — the
 *      old contract, which the core must keep loading.
 *   3  onyx_mock_fake_device3: a v3 factory with two devices of kind OTHER (tiers
 *      fake:0 and fake:1; option.devices = N reports N), one instance each. Every
 *      block belongs to one device; kernels check that their inputs lie on their own
 *      instance's device, copies may go between the two (peer copies), and two more
 *      v3 kernels show what the contract adds:
 *        Triple  y = 3x, registered only by devices of capability 2.0 and up (device 1)
 *        Picky   y = x, whose infer refuses anything but rank 2 through its sink
 *      Twice declines a node whose int attribute `device` names another device.
 *      Options (plugins.ini option.KEY): count = N reports N devices; no_peer = 1 drops
 *      ONYX_DEVICE_CAP_PEER_COPY (values then go through the host); absent = N makes
 *      device N decline at open (DEVICE_UNAVAILABLE, saying why); bad_kernel = N makes
 *      device N register a kernel without compute.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_device.h"
#include "onyx_abi.h"

#define EXPORT __attribute__((visibility("default")))

#ifndef FAKE_ABI
#define FAKE_ABI 2
#endif
#if FAKE_ABI == 3
#define FAKE_KIND ONYX_DEVICE_OTHER
#define FAKE_DEVICES 2
#else
#define FAKE_KIND ONYX_DEVICE_CUDA
#define FAKE_DEVICES 1
#endif

/* ------------------------------------------------------------------ "device" memory */

#define MAX_BLOCKS 4096

typedef struct block {
  char *ptr;
  uint64_t bytes;
  int dev; /* the device it belongs to */
} block;

/* One opened device. */
typedef struct fake_instance {
  int ordinal;
  bool bad_kernel; /* v3 option bad_kernel = N: device N registers an incomplete kernel */
} fake_instance;

static fake_instance g_instances[FAKE_DEVICES];
/* The device whose kernel runs now (set by the v3 wrappers; 0 for v2). */
static int g_dev;

static block g_blocks[MAX_BLOCKS];
static onyx_fake_device_stats g_stats;
static pthread_mutex_t g_mu = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

/* Entry points run under g_mu: `return LOCKED(call)`. */
#define LOCKED(type, call)                                                                         \
  do {                                                                                             \
    pthread_mutex_lock(&g_mu);                                                                     \
    type r_ = call;                                                                                \
    pthread_mutex_unlock(&g_mu);                                                                   \
    return r_;                                                                                     \
  } while (0)

/* ------------------------------------------------------------------ device work */

typedef struct op {
  void (*fn)(const struct op *);
  const float *x;
  float *y;
  int64_t n;
  float k;
  void *scratch;
} op;

typedef struct graph {
  op *ops;
  size_t count, cap;
} graph;

static graph *g_capture;       /* the open capture, NULL: none */
static bool g_capture_invalid; /* something not capturable happened during it */

static void capture_misuse(const char *what) {
  if (g_capture == NULL) return;
  g_capture_invalid = true;
  g_stats.capture_misuse++;
  fprintf(stderr, "fake device: %s during a capture invalidates it\n", what);
}

/* Runs `o` now, or records it into the open capture. */
static onyx_status submit(op o) {
  g_stats.submits++;
  if (g_capture == NULL) {
    o.fn(&o);
    return ONYX_STATUS_OK;
  }
  if (g_capture->count == g_capture->cap) {
    size_t cap = g_capture->cap ? 2 * g_capture->cap : 16;
    op *grown = realloc(g_capture->ops, cap * sizeof *grown);
    if (grown == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
    g_capture->ops = grown;
    g_capture->cap = cap;
  }
  g_capture->ops[g_capture->count++] = o;
  return ONYX_STATUS_OK;
}

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

/* On device `dev` in particular. */
static bool on_dev(const void *p, uint64_t bytes, int dev) {
  const block *b = find_block(p, bytes);
  return b != NULL && b->dev == dev;
}

static int dev_of(void *state) { return state ? ((fake_instance *)state)->ordinal : 0; }

static onyx_status fake_device_alloc_unlocked(void *state, uint64_t bytes, void **out_ptr) {
  capture_misuse("device_alloc");
  for (size_t i = 0; i < MAX_BLOCKS; ++i) {
    if (g_blocks[i].ptr != NULL) continue;
    char *p = aligned_alloc(256, (size_t)((bytes + 255) / 256 * 256 + 256));
    if (p == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
    g_blocks[i] = (block){p, bytes ? bytes : 1, dev_of(state)};
    g_stats.allocs++;
    g_stats.live_blocks++;
    g_stats.live_bytes += g_blocks[i].bytes;
    g_stats.live_bytes_on[g_blocks[i].dev] += g_blocks[i].bytes;
    *out_ptr = p;
    return ONYX_STATUS_OK;
  }
  return ONYX_STATUS_OUT_OF_MEMORY;
}

static onyx_status fake_device_alloc(void *state, uint64_t bytes, void **out_ptr) {
  LOCKED(onyx_status, fake_device_alloc_unlocked(state, bytes, out_ptr));
}

static void fake_device_free_unlocked(void *state, void *ptr) {
  if (ptr == NULL) return;
  capture_misuse("device_free");
  for (size_t i = 0; i < MAX_BLOCKS; ++i) {
    if (g_blocks[i].ptr != ptr) continue;
    if (g_blocks[i].dev != dev_of(state)) {
      fprintf(stderr, "fake device %d: device_free of a block of device %d\n", dev_of(state),
              g_blocks[i].dev);
      abort();
    }
    g_stats.frees++;
    g_stats.live_blocks--;
    g_stats.live_bytes -= g_blocks[i].bytes;
    g_stats.live_bytes_on[g_blocks[i].dev] -= g_blocks[i].bytes;
    free(ptr);
    g_blocks[i] = (block){NULL, 0, 0};
    return;
  }
  fprintf(stderr, "fake device: device_free of %p, which it never handed out\n", ptr);
  abort();
}

static void fake_device_free(void *state, void *ptr) {
  pthread_mutex_lock(&g_mu);
  fake_device_free_unlocked(state, ptr);
  pthread_mutex_unlock(&g_mu);
}

static uint64_t tensor_bytes(const onyx_tensor *t) {
  int64_t n = onyx_tensor_numel(t);
  return n < 0 ? 0 : (uint64_t)n * onyx_dtype_size(t->dtype);
}

/* Each side must be what its tensor says: device memory inside a live block of the
 * device its device_id names, host memory outside every block. */
static bool side_ok(const onyx_tensor *t, uint64_t bytes) {
  if (bytes == 0) return true;
  if (t->device == FAKE_KIND) return on_dev(t->data, bytes, t->device_id);
  return t->device == ONYX_DEVICE_HOST && t->data != NULL && !on_device(t->data, 1);
}

static onyx_status fake_copy_unlocked(void *state, onyx_tensor *dst, const onyx_tensor *src) {
  capture_misuse("copy");
  uint64_t bytes = tensor_bytes(src);
  if (dst->dtype != src->dtype || dst->rank != src->rank || tensor_bytes(dst) != bytes ||
      (dst->device == ONYX_DEVICE_HOST && src->device == ONYX_DEVICE_HOST) ||
      !side_ok(dst, bytes) || !side_ok(src, bytes)) {
    fprintf(stderr, "fake device: bad copy (%u -> %u, %llu bytes)\n", src->device, dst->device,
            (unsigned long long)bytes);
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  /* The core calls the destination's instance for a device-side destination. */
  if (dst->device == FAKE_KIND && dst->device_id != dev_of(state)) {
    fprintf(stderr, "fake device %d: asked to copy into device %d\n", dev_of(state),
            dst->device_id);
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  if (dst->device == FAKE_KIND && src->device == FAKE_KIND && dst->device_id != src->device_id)
    g_stats.copies_peer++;
  else if (dst->device == FAKE_KIND && src->device == FAKE_KIND)
    g_stats.copies_d2d++;
  else if (dst->device == FAKE_KIND)
    g_stats.copies_h2d++;
  else
    g_stats.copies_d2h++;
  if (bytes) memmove(dst->data, src->data, (size_t)bytes);
  return ONYX_STATUS_OK;
}

static onyx_status fake_copy(void *state, onyx_tensor *dst, const onyx_tensor *src) {
  LOCKED(onyx_status, fake_copy_unlocked(state, dst, src));
}

static onyx_status fake_sync_unlocked(void *state) {
  (void)state;
  capture_misuse("sync");
  g_stats.syncs++;
  return ONYX_STATUS_OK;
}

static onyx_status fake_sync(void *state) { LOCKED(onyx_status, fake_sync_unlocked(state)); }

static onyx_status fake_capacity(void *state, uint64_t *out_bytes) {
  (void)state;
  *out_bytes = 256ull << 20;
  return ONYX_STATUS_OK;
}

EXPORT void onyx_fake_device_stats_get(onyx_fake_device_stats *out);
EXPORT void onyx_fake_device_stats_get(onyx_fake_device_stats *out) {
  pthread_mutex_lock(&g_mu);
  *out = g_stats;
  pthread_mutex_unlock(&g_mu);
}

/* ------------------------------------------------------------------ kernels */

/* The core's callbacks run without g_mu. A kernel's compute holds it (once), and the
 * core's allocation takes the stream lock and then calls fake_device_alloc, which takes
 * g_mu: holding g_mu across the call would order the two locks both ways (TSan reports
 * the inversion). The compute's device is put back with the lock. */
static onyx_status core_alloc_output(onyx_compute_ctx *ctx, size_t index, uint32_t dtype,
                                     uint32_t rank, const int64_t *dims, onyx_tensor **out) {
  int dev = g_dev;
  pthread_mutex_unlock(&g_mu);
  onyx_status st = ctx->alloc_output(ctx, index, dtype, rank, dims, out);
  pthread_mutex_lock(&g_mu);
  g_dev = dev;
  return st;
}

static onyx_status core_alias_output(onyx_compute_ctx *ctx, size_t index, size_t input_index) {
  int dev = g_dev;
  pthread_mutex_unlock(&g_mu);
  onyx_status st = ctx->alias_output(ctx, index, input_index);
  pthread_mutex_lock(&g_mu);
  g_dev = dev;
  return st;
}

static onyx_status need_device(onyx_compute_ctx *ctx, const onyx_tensor *t, size_t i) {
  if (t == NULL || t->device != FAKE_KIND || t->device_id != g_dev ||
      !on_dev(t->data, tensor_bytes(t), g_dev)) {
    ctx->set_error(ctx, "input %zu is not in the memory of fake device %d", i, g_dev);
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  g_stats.computes_on[g_dev]++;
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

static void op_scale(const op *o) {
  for (int64_t i = 0; i < o->n; ++i) o->y[i] = o->k * o->x[i];
  if (o->scratch) memset(o->scratch, 0xAB, 64);
}

static void op_add(const op *o) {
  for (int64_t i = 0; i < o->n; ++i) o->y[i] = o->x[i] + o->k;
}

static void op_count(const op *o) { *(int64_t *)(void *)o->y = o->n; }

/* Input 0 must be in device memory; output 0 gets its geometry. */
static onyx_status unary_output(onyx_compute_ctx *ctx, const onyx_tensor *const *inputs,
                                size_t input_count, onyx_tensor **y) {
  onyx_status st = need_device(ctx, input_count > 0 ? inputs[0] : NULL, 0);
  if (st != ONYX_STATUS_OK) return st;
  return core_alloc_output(ctx, 0, ONYX_DTYPE_FLOAT32, inputs[0]->rank, inputs[0]->dims, y);
}

static onyx_status twice_compute(void *state, onyx_compute_ctx *ctx,
                                 const onyx_tensor *const *inputs, size_t input_count) {
  (void)state;
  onyx_tensor *y = NULL;
  onyx_status st = unary_output(ctx, inputs, input_count, &y);
  if (st != ONYX_STATUS_OK) return st;
  return submit((op){.fn = op_scale,
                     .x = inputs[0]->data,
                     .y = y->data,
                     .n = onyx_tensor_numel(inputs[0]),
                     .k = 2.0f});
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
                         on_dev(ctx->workspace[0].data, 64, g_dev);
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
  /* n is read now, on the host: a recorded graph keeps this value. On the device
   * (ScaleOld) reading it here stands for a kernel's read at run time. */
  float k = (float)((const int64_t *)n->data)[0];
  onyx_tensor *y = NULL;
  st = core_alloc_output(ctx, 0, ONYX_DTYPE_FLOAT32, x->rank, x->dims, &y);
  if (st != ONYX_STATUS_OK) return st;
  return submit((op){.fn = op_scale,
                     .x = x->data,
                     .y = y->data,
                     .n = onyx_tensor_numel(x),
                     .k = k,
                     .scratch = ctx->workspace[0].data});
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
  st = core_alloc_output(ctx, 0, ONYX_DTYPE_INT64, 1, &one, &c);
  if (st != ONYX_STATUS_OK) return st;
  return submit((op){.fn = op_count, .y = c->data, .n = onyx_tensor_numel(inputs[0])});
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
  g_stats.inplace_aliased = core_alias_output(ctx, 0, 0) == ONYX_STATUS_OK;
  float *out = x->data;
  if (!g_stats.inplace_aliased) {
    onyx_tensor *y = NULL;
    st = core_alloc_output(ctx, 0, ONYX_DTYPE_FLOAT32, x->rank, x->dims, &y);
    if (st != ONYX_STATUS_OK) return st;
    out = y->data;
  }
  return submit((op){.fn = op_add, .x = x->data, .y = out, .n = onyx_tensor_numel(x), .k = 1.0f});
}

static onyx_status legacy_compute(void *state, onyx_compute_ctx *ctx,
                                  const onyx_tensor *const *inputs, size_t input_count) {
  (void)state;
  onyx_tensor *y = NULL;
  onyx_status st = unary_output(ctx, inputs, input_count, &y);
  if (st != ONYX_STATUS_OK) return st;
  capture_misuse("the Legacy kernel");
  return submit((op){.fn = op_add,
                     .x = inputs[0]->data,
                     .y = y->data,
                     .n = onyx_tensor_numel(inputs[0]),
                     .k = -1.0f});
}

#if FAKE_ABI == 2
#define FAKE_KERNEL(sym, NAME, SIZE, COMPUTE, INFER, WORKSPACE, HOST)                              \
  static onyx_status sym##_compute(void *state, onyx_compute_ctx *ctx,                             \
                                   const onyx_tensor *const *inputs, size_t input_count) {         \
    LOCKED(onyx_status, COMPUTE(state, ctx, inputs, input_count));                                 \
  }                                                                                                \
  static const onyx_kernel_table sym = {                                                           \
      .struct_size = SIZE,                                                                         \
      .version = ONYX_ABI_VERSION,                                                                 \
      .domain = "onyx.fake",                                                                       \
      .op_type = NAME,                                                                             \
      .since_opset = 1,                                                                            \
      .type_mask = ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT32),                                             \
      .workspace = WORKSPACE,                                                                      \
      .compute = sym##_compute,                                                                    \
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
FAKE_KERNEL(k_legacy, "Legacy", sizeof(onyx_kernel_table), legacy_compute, same_infer, NULL, 0)

static const onyx_kernel_table *const kernels[] = {&k_twice, &k_scale,   &k_scale_old,
                                                   &k_count, &k_inplace, &k_legacy};

#endif

/* ------------------------------------------------------------------ graphs */

static onyx_status fake_graph_begin_unlocked(void *state) {
  (void)state;
  if (g_capture != NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  g_capture = calloc(1, sizeof *g_capture);
  if (g_capture == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  g_capture_invalid = false;
  g_stats.captures_begun++;
  return ONYX_STATUS_OK;
}

static onyx_status fake_graph_begin(void *state) {
  LOCKED(onyx_status, fake_graph_begin_unlocked(state));
}

static void graph_free(graph *gr) {
  if (gr == NULL) return;
  free(gr->ops);
  free(gr);
}

static onyx_status fake_graph_end_unlocked(void *state, bool keep, void **out_graph) {
  (void)state;
  graph *gr = g_capture;
  if (gr == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  g_capture = NULL;
  if (!keep || g_capture_invalid) {
    graph_free(gr);
    return g_capture_invalid ? ONYX_STATUS_PROVIDER_ERROR : ONYX_STATUS_OK;
  }
  g_stats.live_graphs++;
  *out_graph = gr;
  return ONYX_STATUS_OK;
}

static onyx_status fake_graph_end(void *state, bool keep, void **out_graph) {
  LOCKED(onyx_status, fake_graph_end_unlocked(state, keep, out_graph));
}

static onyx_status fake_graph_launch_unlocked(void *state, void *g) {
  (void)state;
  const graph *gr = g;
  if (gr == NULL || g_capture != NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  for (size_t i = 0; i < gr->count; ++i) gr->ops[i].fn(&gr->ops[i]);
  g_stats.graph_launches++;
  return ONYX_STATUS_OK;
}

static onyx_status fake_graph_launch(void *state, void *g) {
  LOCKED(onyx_status, fake_graph_launch_unlocked(state, g));
}

static void fake_graph_destroy_unlocked(void *state, void *g) {
  (void)state;
  if (g == NULL) return;
  g_stats.live_graphs--;
  graph_free(g);
}

static void fake_graph_destroy(void *state, void *g) {
  pthread_mutex_lock(&g_mu);
  fake_graph_destroy_unlocked(state, g);
  pthread_mutex_unlock(&g_mu);
}

static const onyx_graph_table graphs = {
    .struct_size = sizeof(onyx_graph_table),
    .version = ONYX_ABI_VERSION,
    .begin = fake_graph_begin,
    .end = fake_graph_end,
    .launch = fake_graph_launch,
    .destroy = fake_graph_destroy,
};

/* ------------------------------------------------------------------ provider */

#if FAKE_ABI == 2

static onyx_status fake_open(const onyx_host_table *host, const onyx_option *options,
                             size_t option_count, void **out_state, char *err, size_t err_cap) {
  (void)host;
  (void)options;
  (void)option_count;
  (void)err;
  (void)err_cap;
  *out_state = &g_instances[0];
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
    .graphs = &graphs,
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

#else /* FAKE_ABI == 3 */
#include "fake_device_v3.inc"
#endif
