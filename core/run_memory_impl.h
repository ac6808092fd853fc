/*
 * Where one run's memory comes from. The executor (executor.c) asks this interface
 * for every activation and copy, for the STEP workspace of admission, for the views
 * of its inputs and, at the end, to finish; it never asks whether it is recording.
 * Two implementations supply it:
 *
 * - the plain run (run_memory_plain.c): governed memory, host activations through
 *   the run's pool (act_pool.c), STEP blocks booked per region; with measuring hooks
 *   it also counts what a device graph of this geometry would need (graphs.c);
 * - the recording of a device graph (run_memory_record.c): memory on the recorded
 *   device carved from the graph's arenas, host inputs bound to their staged device
 *   copies, the capture opened and closed, and anything a graph cannot hold (a
 *   transfer mid-run, an allocation beyond the measured, an unplannable run) refused
 *   with the reason, which becomes the run's message (hooks->why).
 *
 * Not thread-safe: one run, one thread (the session's).
 */
#ifndef ONYX_CORE_RUN_MEMORY_IMPL_H
#define ONYX_CORE_RUN_MEMORY_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "act_pool_impl.h"
#include "graphs_impl.h"
#include "plan_impl.h"

/* How a block goes back. */
typedef enum onyx__block_kind {
  ONYX__BLOCK_BOOKED, /* onyx__memory_alloc'd: freed through onyx__memory_free */
  ONYX__BLOCK_POOLED, /* a host block of the run's pool: goes back to it */
  ONYX__BLOCK_ARENA   /* carved from a graph's arena: the graph owns the memory */
} onyx__block_kind;

/* One allocation of the run (a value's buffer). */
typedef struct onyx__run_block {
  void *ptr;
  uint64_t bytes;           /* what was asked for (the pool's key) */
  onyx__provider *provider; /* the device instance holding it, NULL: host memory */
  onyx__block_kind kind;
} onyx__run_block;

/* A graph output as the run leaves it, for `finish`. */
typedef struct onyx__run_output {
  const onyx_tensor *view;
  bool callers;                 /* the caller's own writable memory, not the run's */
  const onyx__run_block *block; /* the run's memory holding it, NULL: borrowed */
} onyx__run_output;

typedef struct onyx__run_memory onyx__run_memory;

/* Every member is set by both implementations. `err` receives the reason of a
 * failure (a recording's refusal included). */
typedef struct onyx__run_memory_ops {
  /* `bytes` on `provider`'s device (host memory for a host instance) for a value of
   * `requester`, labelled for the governor. */
  onyx_status (*alloc)(onyx__run_memory *m, onyx__provider *provider, uint32_t requester,
                       uint64_t bytes, const char *label, onyx__run_block *out_block, char *err,
                       size_t err_cap);
  /* Gives back a block from alloc (NULL ptr: nothing). */
  void (*release)(onyx__run_memory *m, onyx__run_block *block);
  /* The memory of a host block taken out of the run and the books for the caller
   * (onyx_tensor_data_free), NULL when it cannot be (a device's, a graph's). */
  void *(*hand_over)(onyx__run_memory *m, onyx__run_block *block);
  /* May node `node` move a value between host and device (`what`: which copy)? */
  onyx_status (*transfer)(onyx__run_memory *m, const onyx__node *node, const char *what, char *err,
                          size_t err_cap);
  /* Planning was UNSUPPORTED for `why`: may the run go on unplanned? */
  onyx_status (*unplanned)(onyx__run_memory *m, const char *why, char *err, size_t err_cap);
  /* Admission: the STEP block of provider `k` (runtime order) for `plan`. */
  onyx_status (*admit_step)(onyx__run_memory *m, const onyx_plan *plan, size_t k, void **out_block,
                            char *err, size_t err_cap);
  /* Gives back a STEP block from admit_step (NULL: nothing). */
  void (*release_step)(onyx__run_memory *m, void *block);
  /* Admission replaced a SESSION block of a node on `provider`. */
  void (*session_grew)(onyx__run_memory *m, const onyx__provider *provider);
  /* Graph input `index` is bound: the implementation may put another view there
   * (*view, the device instance owning it *owner, *writable). */
  void (*bind_input)(onyx__run_memory *m, size_t index, onyx_tensor *view, onyx__provider **owner,
                     bool *writable);
  /* Admitted, before the first node. */
  onyx_status (*begin)(onyx__run_memory *m, char *err, size_t err_cap);
  /* After the last node (or the first failure, `st`): `outputs` where the graph's
   * outputs lie. Returns the run's status; on failure it may rewrite `msg`. */
  onyx_status (*finish)(onyx__run_memory *m, onyx_status st, const onyx__run_output *outputs,
                        size_t count, char *msg, size_t msg_cap);
} onyx__run_memory_ops;

struct onyx__run_memory {
  const onyx__run_memory_ops *ops;
  onyx_session *session;
  onyx__run_hooks *hooks; /* measuring or recording a device graph, NULL: neither */
  onyx__act_pool pool;    /* host activations freed by this run, for its next nodes */
  bool timed;             /* the nodes really run (a recording only queues them) */
  bool capture_open;      /* recording: the provider's capture is open */
};

/* The plain run; `hooks` (NULL: none) measure what a graph of this geometry needs. */
void onyx__run_memory_plain(onyx__run_memory *m, onyx_session *session, onyx__run_hooks *hooks);

/* The recording of a device graph into hooks (hooks->record set, arenas granted). */
void onyx__run_memory_record(onyx__run_memory *m, onyx_session *session, onyx__run_hooks *hooks);

/* The plain run's table: the recording hands it what is not on its device. */
extern const onyx__run_memory_ops onyx__run_memory_plain_ops;

/* Frees what the run still pools (end of the run, both implementations). */
void onyx__run_memory_done(onyx__run_memory *m);

#endif /* ONYX_CORE_RUN_MEMORY_IMPL_H */
