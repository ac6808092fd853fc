/*
 * Device graphs: a steady-state run (a decode step) recorded once on a device
 * provider's stream and replayed on later runs with the same geometry and device
 * inputs. docs/graphs.md says when a run can be recorded and what a replay skips.
 *
 * The graph code (graphs.c) decides per run; the executor (executor.c) runs with a
 * run memory (run_memory_impl.h) whose hooks measure a run's device allocations
 * (run_memory_plain.c), or that records it with every device allocation carved from
 * arenas the graph owns (run_memory_record.c: a replay finds its buffers where the
 * recording left them).
 */
#ifndef ONYX_CORE_GRAPHS_IMPL_H
#define ONYX_CORE_GRAPHS_IMPL_H

#include <stddef.h>

#include "onyx.h"
#include "session_impl.h"

/* Device allocations are carved at this alignment (what cudaMalloc gives). */
#define ONYX__GRAPH_ALIGN 256u

static inline uint64_t onyx__graph_round(uint64_t bytes) {
  return (bytes + ONYX__GRAPH_ALIGN - 1) / ONYX__GRAPH_ALIGN * ONYX__GRAPH_ALIGN;
}

/* Fields of a caller's onyx_run_options, read as absent (NULL / false) when its
 * struct predates them. Writable inputs and borrowed outputs came together. */
#define onyx__run_options_has(o, field)                                                            \
  ((o) != NULL && (o)->struct_size >= offsetof(onyx_run_options, field) + sizeof((o)->field))

static inline const bool *onyx__run_writable(const onyx_run_options *o) {
  return onyx__run_options_has(o, out_borrowed) ? o->writable_inputs : NULL;
}

static inline bool *onyx__run_borrowed(const onyx_run_options *o) {
  return onyx__run_options_has(o, out_borrowed) ? o->out_borrowed : NULL;
}

/* Does the caller cancel the run before node `node`? */
static inline bool onyx__run_cancelled(const onyx_run_options *o, size_t node) {
  return onyx__run_options_has(o, user) && o->should_cancel && o->should_cancel(o->user, node);
}

typedef struct onyx__run_hooks {
  onyx__provider *provider; /* the device provider whose work is measured or recorded */
  bool record;              /* record this run into a graph */
  /* Measured on every run with hooks: the device bytes the run allocated on
   * `provider` (each rounded to ONYX__GRAPH_ALIGN) and its STEP workspace block. */
  uint64_t act_bytes, ws_bytes;
  uint32_t ws_align;
  /* Recording: the arenas that replace the run's device allocations. */
  char *act_base;
  uint64_t act_cap, act_used;
  char *ws_base;
  uint64_t ws_cap;
  /* Recording: [input_count] device views that replace host inputs (data NULL: the
   * input is bound as given). */
  const onyx_tensor *staged;
  /* Recording results. */
  void *graph;            /* the instantiated graph */
  onyx_tensor *out_views; /* [output_count] where each output lies after a replay */
  bool *out_from_input;   /* [output_count] the output is a writable device input */
  bool session_grew;      /* admission replaced a SESSION block on `provider` */
  bool refused;           /* the run could not be recorded; `why` says why */
  char why[256];
} onyx__run_hooks;

struct onyx__run_memory;

/* One run of the graph, node by node, its memory from `memory` (run_memory_impl.h;
 * NULL: a plain run). Outputs are collected only where out_outputs is non-NULL: a
 * recording passes NULL, and the caller replays the graph and reads them from
 * hooks->out_views. */
onyx_status onyx__execute(onyx_session *session, const onyx_run_options *options,
                          const onyx_tensor *inputs, size_t input_count, onyx_tensor *out_outputs,
                          struct onyx__run_memory *memory, onyx_error **out_error);

/* Frees the session's run bookkeeping (session destroy). */
void onyx__exec_scratch_free(onyx_session *session);

/* A run that asked for capture_graph (graphs.c). */
onyx_status onyx__graphs_run(onyx_session *session, const onyx_run_options *options,
                             const onyx_tensor *inputs, size_t input_count,
                             onyx_tensor *out_outputs, onyx_error **out_error);

/* Frees the session's graphs and their memory (session destroy). */
void onyx__graphs_free(onyx_session *session);

#endif /* ONYX_CORE_GRAPHS_IMPL_H */
