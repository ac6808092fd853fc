/*
 * A small fake core for the CUDA attention tests and the benchmark: device tensors
 * with host mirrors (the exact values after rounding to the element type, as doubles),
 * a compute context whose outputs are cudaMalloc'ed and poisoned (0xFF bytes: NaN in
 * every float type) before each run, and workspace regions allocated per requirement
 * (also poisoned).
 */
#ifndef ONYX_CUDA_ATTN_HARNESS_H
#define ONYX_CUDA_ATTN_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onyx_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* True when a CUDA device is usable (cudaGetDeviceCount succeeds with >= 1). */
bool ch_have_device(void);

/* Deterministic random numbers. */
typedef struct ch_rng {
  uint64_t s;
} ch_rng;
double ch_uniform(ch_rng *r); /* in (-1, 1), never near 0 */

/* Float conversions of the test (round to nearest even). */
uint16_t ch_f32_to_f16(float v);
float ch_f16_to_f32(uint16_t h);
uint16_t ch_f32_to_bf16(float v);
float ch_bf16_to_f32(uint16_t h);
/* v rounded to dtype (float32, float16, bfloat16) and back. */
double ch_round(uint32_t dtype, double v);

/* A tensor on the device with its host mirror. */
typedef struct ch_tensor {
  onyx_tensor t; /* device view */
  double *val;   /* float types: values as stored; NULL otherwise */
  void *raw;     /* host bytes */
  size_t bytes;
} ch_tensor;

/* Float tensor of fresh random values in (-scale, scale). */
void ch_tensor_random(ch_tensor *out, uint32_t dtype, uint32_t rank, const int64_t *dims,
                      ch_rng *rng, double scale);
/* Float tensor from given values (rounded to dtype). */
void ch_tensor_values(ch_tensor *out, uint32_t dtype, uint32_t rank, const int64_t *dims,
                      const double *values);
/* Any tensor from raw host bytes; on_host keeps it in host memory (no device copy). */
void ch_tensor_bytes(ch_tensor *out, uint32_t dtype, uint32_t rank, const int64_t *dims,
                     const void *bytes, bool on_host);
void ch_tensor_free(ch_tensor *t);

/* Elements of a device float buffer as doubles (malloc'ed). */
double *ch_download(uint32_t dtype, const void *dev, size_t n);

/* The fake compute context. */
typedef struct ch_ctx {
  onyx_compute_ctx ctx;
  const onyx_tensor *const *inputs;
  size_t input_count;
  bool allow_alias;
  onyx_tensor outs[4];
  bool out_set[4];
  bool out_aliased[4];
  void *out_mem[4]; /* owned device memory of allocated outputs */
  onyx_workspace_view views[ONYX_MAX_WORKSPACE_REGIONS];
  void *ws_mem[ONYX_MAX_WORKSPACE_REGIONS];
  char err[512];
  int repeat; /* ch_run: compute this many more times on the same state and workspace
                 first (outputs freed in between, workspace kept) */
} ch_ctx;

/* Sets up a context (stream = the default stream). */
void ch_ctx_init(ch_ctx *c, const onyx_tensor *const *inputs, size_t n, bool allow_alias);
/* Allocates (and poisons) one view per region; shrink_region >= 0 makes that region
 * `shrink` bytes shorter than required. */
void ch_ctx_workspace(ch_ctx *c, const onyx_workspace_requirement *req, int shrink_region,
                      uint64_t shrink);
void ch_ctx_free(ch_ctx *c);

/* A node under test: attributes and presence flags. */
typedef struct ch_node {
  onyx_node_info info;
  onyx_attr attrs[24];
  bool in_present[16];
  bool out_present[4];
  uint32_t in_dtypes[16];
} ch_node;

void ch_node_init(ch_node *n, const char *domain, const char *op, int64_t opset, size_t inputs,
                  size_t outputs);
void ch_node_int(ch_node *n, const char *name, int64_t v);
void ch_node_float(ch_node *n, const char *name, float v);

/* create → workspace → compute → synchronise (compute 1 + ctx->repeat times, as
 * consecutive steps of one node would). Returns the last compute's status (or
 * create's); *out_req receives the requirement; the state is destroyed before
 * returning. */
onyx_status ch_run(const onyx_kernel_table *kt, ch_node *node, const onyx_tensor *const *in,
                   size_t n, ch_ctx *ctx, onyx_workspace_requirement *out_req, int shrink_region,
                   uint64_t shrink);

/* Bytes of the region called name in a requirement (0 when absent). */
uint64_t ch_region_bytes(const onyx_workspace_requirement *req, const char *name);

/* Compares n values; prints the first few mismatches and a summary line with `what`.
 * Returns the number of elements outside atol + rtol·|ref| (NaN always counts). */
size_t ch_compare(const char *what, const double *got, const double *ref, size_t n, double atol,
                  double rtol);

#ifdef __cplusplus
}
#endif

#endif /* ONYX_CUDA_ATTN_HARNESS_H */
