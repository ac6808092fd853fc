/*
 * One CUDA GroupQueryAttention problem (bfloat16) set up for timing, shared by the
 * attention benchmarks (bench_attention_cuda.c, bench_attention_rounds.c): fresh random
 * inputs, the op created on the provider's kernel table, outputs preallocated so no
 * allocation falls inside a timed loop, and the timing itself — as the PyTorch anchor
 * times (tools/torch_sdpa_gqa.py): WARM warm-up calls, then ITERS calls each between
 * CUDA events, the median.
 */
#ifndef ONYX_BENCH_ATTENTION_OP_H
#define ONYX_BENCH_ATTENTION_OP_H

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda_attn_harness.h"
#include "onyx_abi.h"

#define CHECK(call)                                                                                \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));       \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

enum { WARM = 10, ITERS = 50 };

/* A compute context whose outputs are preallocated (no allocation in the timed loop). */
typedef struct bench_ctx {
  onyx_compute_ctx ctx;
  const onyx_tensor *const *inputs;
  onyx_tensor outs[3];
  void *mem[3];
  size_t cap[3];
  char err[512];
} bench_ctx;

/* Prefill: a first prompt of S rows (presents written, causal). Decode: one token
 * against a shared KV buffer of S rows (present aliases past, the new row in place). */
typedef struct bench_op {
  bool prefill;
  int B, hq, hkv, s, d;
  void *state;
  bench_ctx c;
  ch_node node;
  ch_tensor q, k, v, pk, pv, sl, tot;
  const onyx_tensor *in[7];
} bench_op;

/* Sets op up (exits with a message when the op cannot be created). */
void bench_op_open(bench_op *op, bool prefill, int B, int hq, int hkv, int s, int d);
/* Milliseconds a call: the median of ITERS event-timed calls, or with b2b ITERS calls
 * back to back between one pair of events (the host's time per call hidden). Fresh
 * workspace views for the current overrides; their bytes out through *ws. */
float bench_op_time(bench_op *op, uint64_t *ws, bool b2b);
/* The problem's FLOPs (prefill, causal) or K/V bytes read (decode). */
double bench_op_work(const bench_op *op);
void bench_op_close(bench_op *op);

#endif
