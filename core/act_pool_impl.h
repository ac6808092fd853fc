/*
 * Activation memory reused within one run (act_pool.c). A prompt's 24 decoder
 * layers ask for the same output sizes 24 times; a block the allocator gave back to
 * the system is faulted in and zeroed again page by page, which was 15-25% of a
 * float32 prefill. The pool keeps the host blocks a run frees and gives them to the
 * next node that asks for exactly that many bytes.
 *
 * Governed as before: a pooled block stays booked (as "activation pool" while it
 * waits, to whoever takes it after), and the pool never holds more than the run
 * would hold at its peak without it: live + pooled <= the highest live so far, so
 * the activations' peak in the books is unchanged. Everything pooled is freed when
 * the run ends. Not thread-safe: one run, one thread (the executor's).
 */
#ifndef ONYX_CORE_ACT_POOL_IMPL_H
#define ONYX_CORE_ACT_POOL_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "memory_impl.h"

/* Blocks below this stay with malloc: it reuses them without faults already. */
#define ONYX__ACT_POOL_MIN_BYTES 65536u
#define ONYX__ACT_POOL_SLOTS 64u

typedef struct onyx__act_block {
  void *ptr;
  uint64_t bytes;
} onyx__act_block;

typedef struct onyx__act_pool {
  onyx__memory *memory;
  onyx__act_block free[ONYX__ACT_POOL_SLOTS]; /* oldest first */
  size_t count;
  uint64_t live;   /* bytes handed out and not yet put back */
  uint64_t pooled; /* bytes waiting in free[] */
  uint64_t high;   /* the most ever live at once */
  uint64_t reused; /* blocks handed out again (for tests) */
} onyx__act_pool;

void onyx__act_pool_init(onyx__act_pool *pool, onyx__memory *memory);

/* A host block of `bytes` (64-byte aligned) for an activation labelled `label`:
 * a pooled one of the same size, else a fresh one (after freeing pooled blocks as
 * far as the bound needs). Errors as onyx__memory_alloc's. */
onyx_status onyx__act_pool_alloc(onyx__act_pool *pool, uint64_t bytes, const char *label,
                                 void **out_ptr, char *err, size_t err_cap);

/* Takes back a block from onyx__act_pool_alloc of `bytes` (the same count). */
void onyx__act_pool_put(onyx__act_pool *pool, void *ptr, uint64_t bytes);

/* A block from onyx__act_pool_alloc leaves the pool's count for good (handed to a
 * caller, or freed by other means). */
void onyx__act_pool_forget(onyx__act_pool *pool, uint64_t bytes);

/* Frees every pooled block (end of the run). */
void onyx__act_pool_drain(onyx__act_pool *pool);

#endif /* ONYX_CORE_ACT_POOL_IMPL_H */
