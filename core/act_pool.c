/*
 * Activation memory reused within one run: act_pool_impl.h says why and what bounds
 * it.
 */
#include <string.h>

#include "act_pool_impl.h"

#define ACT_ALIGN 64u
#define ACT_POOL_LABEL "activation pool: a block freed by this run, kept for its next node"

static uint64_t act_round(uint64_t bytes) {
  uint64_t r = bytes == 0 ? ACT_ALIGN : (bytes + ACT_ALIGN - 1) / ACT_ALIGN * ACT_ALIGN;
  return r < bytes ? bytes : r; /* an overflow is onyx__memory_alloc's to refuse */
}

void onyx__act_pool_init(onyx__act_pool *p, onyx__memory *memory) {
  memset(p, 0, sizeof *p);
  p->memory = memory;
}

/* Frees the pooled block at index i. */
static void act_evict(onyx__act_pool *p, size_t i) {
  onyx__memory_free(p->memory, p->free[i].ptr);
  p->pooled -= p->free[i].bytes;
  memmove(&p->free[i], &p->free[i + 1], (p->count - i - 1) * sizeof p->free[0]);
  p->count--;
}

onyx_status onyx__act_pool_alloc(onyx__act_pool *p, uint64_t bytes, const char *label,
                                 void **out_ptr, char *err, size_t err_cap) {
  uint64_t want = act_round(bytes);
  /* The newest block of that size: the one most likely still in cache. */
  for (size_t i = p->count; want >= ONYX__ACT_POOL_MIN_BYTES && i-- > 0;) {
    if (p->free[i].bytes != want) continue;
    void *ptr = p->free[i].ptr;
    p->pooled -= want;
    memmove(&p->free[i], &p->free[i + 1], (p->count - i - 1) * sizeof p->free[0]);
    p->count--;
    onyx_status st =
        onyx__memory_rebook(p->memory, ptr, ONYX_REQUESTER_ACTIVATIONS, label, err, err_cap);
    if (st != ONYX_STATUS_OK) return st; /* refused: the block is gone, as a fresh one would be */
    p->live += want;
    p->reused++;
    *out_ptr = ptr;
    return ONYX_STATUS_OK;
  }
  /* A fresh block raises the live count; what is pooled beyond the peak goes first,
   * oldest first, so that the books never hold more than the run would without the
   * pool. */
  uint64_t live = p->live + want;
  uint64_t high = live > p->high ? live : p->high;
  while (p->count > 0 && live + p->pooled > high) act_evict(p, 0);
  onyx_status st = onyx__memory_alloc(p->memory, NULL, ONYX_REQUESTER_ACTIVATIONS, want, ACT_ALIGN,
                                      label, out_ptr, err, err_cap);
  if (st != ONYX_STATUS_OK) return st;
  p->live = live;
  p->high = high;
  return ONYX_STATUS_OK;
}

void onyx__act_pool_put(onyx__act_pool *p, void *ptr, uint64_t bytes) {
  if (ptr == NULL) return;
  uint64_t have = act_round(bytes);
  p->live -= have < p->live ? have : p->live;
  if (have < ONYX__ACT_POOL_MIN_BYTES) {
    onyx__memory_free(p->memory, ptr);
    return;
  }
  if (p->count == ONYX__ACT_POOL_SLOTS) act_evict(p, 0);
  /* Booked to the pool while it waits; if even that is refused the block is gone. */
  if (onyx__memory_rebook(p->memory, ptr, ONYX_REQUESTER_ACTIVATIONS, ACT_POOL_LABEL, NULL, 0) !=
      ONYX_STATUS_OK)
    return;
  p->free[p->count++] = (onyx__act_block){ptr, have};
  p->pooled += have;
}

void onyx__act_pool_forget(onyx__act_pool *p, uint64_t bytes) {
  uint64_t have = act_round(bytes);
  p->live -= have < p->live ? have : p->live;
}

void onyx__act_pool_drain(onyx__act_pool *p) {
  while (p->count > 0) act_evict(p, p->count - 1);
}
