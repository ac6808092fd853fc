/*
 * The read rate this device reaches, measured in the benchmark's own process: a plain
 * kernel that streams a buffer of the given bytes once with 16-byte loads (the decode
 * kernel's K and V bytes), every word folded into a value the kernel stores, so no load
 * is dropped. The ceiling the decode rows are read against (bench_attention_cuda.c).
 */
#ifndef ONYX_BENCH_READ_RATE_H
#define ONYX_BENCH_READ_RATE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One read-rate figure (GB/s, 1e9 bytes a second). */
typedef struct onyx_bench_read {
  double best;         /* the fastest single launch between two events */
  double median;       /* the median launch */
  double b2b;          /* calls launched back to back between one pair of events: total / calls */
  int form;            /* the launch form of best (see onyx_bench_read_form) */
  double form_gbps[4]; /* best of each form */
} onyx_bench_read;

/* What form f (0..3) of the read kernel is, in words. */
const char *onyx_bench_read_form(int f);

/* Streams `bytes` (rounded down to 16) from a fresh buffer filled with non-zero words:
 * each form timed per launch (warm-ups, then `iters` launches, each between two events)
 * and back to back (`iters` launches between one pair). 0 on success, else the CUDA
 * error; *out untouched on error. */
int onyx_bench_read_rate(size_t bytes, int iters, onyx_bench_read *out);

#ifdef __cplusplus
}
#endif

#endif
