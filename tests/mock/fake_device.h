/*
 * What the fake-device mock (fake_device_provider.c) lets a test see. The test
 * dlopen()s the same library the runtime loaded (the same instance) and reads these
 * through the exported onyx_fake_device_stats_get.
 */
#ifndef ONYX_TESTS_FAKE_DEVICE_H
#define ONYX_TESTS_FAKE_DEVICE_H

#include <stdbool.h>
#include <stdint.h>

typedef struct onyx_fake_device_stats {
  /* Device memory: blocks handed out by device_alloc and not yet freed. */
  uint64_t allocs, frees, live_blocks, live_bytes;
  /* copy() calls per direction, and sync() calls. */
  uint64_t copies_h2d, copies_d2h, copies_d2d, syncs;
  /* What the last Scale / ScaleOld compute saw. */
  uint64_t scale_computes;
  bool in0_on_device;   /* input 0's data lies inside a live device block */
  uint32_t in1_device;  /* input 1's device kind */
  bool in1_on_device;   /* input 1's data lies inside a live device block */
  const void *in1_data; /* input 1's data pointer */
  bool ws_on_device;    /* its STEP workspace view lies inside a live device block */
  /* The last Inplace compute: whether alias_output accepted. */
  bool inplace_aliased;
  /* Graphs: captures begun, launches, graphs alive, and device calls made while a
   * capture was open (each invalidates it). */
  uint64_t captures_begun, graph_launches, live_graphs, capture_misuse;
  uint64_t submits; /* device work submitted by kernels' compute (a replay submits none) */
  /* The v3 build's two devices: bytes live on each, copies between them, and the
   * computes whose inputs were checked on each. */
  uint64_t live_bytes_on[2];
  uint64_t copies_peer;
  uint64_t computes_on[2];
} onyx_fake_device_stats;

#define ONYX_FAKE_DEVICE_STATS_SYMBOL "onyx_fake_device_stats_get"
typedef void (*onyx_fake_device_stats_fn)(onyx_fake_device_stats *out);

#endif /* ONYX_TESTS_FAKE_DEVICE_H */
