/*
 * Governor internals shared by its files. Not installed, not for the core.
 *
 * One mutex (gov->mu) guards every number below. A zone additionally has grow_mu,
 * which serializes the slow backend calls of that zone so that they run without
 * gov->mu held; lock order is zone->grow_mu, then gov->mu. Reclaim callbacks run with
 * neither held.
 */
#ifndef ONYX_GOV_IMPL_H
#define ONYX_GOV_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "onyx_governor.h"

/* Kinds of grant slots. */
enum {
  ONYX__GOV_SLOT_FREE = 0,
  ONYX__GOV_SLOT_GRANT = 1, /* plain booking */
  ONYX__GOV_SLOT_ALLOC = 2, /* booking + host memory (onyx_gov_alloc) */
  ONYX__GOV_SLOT_GROWTH = 3 /* prepared, uncommitted zone growth */
};

/* One requester on one tier. */
typedef struct onyx__gov_req {
  uint64_t limit; /* ONYX_GOV_NO_LIMIT when uncapped */
  uint64_t used;  /* granted + mapped */
  uint64_t peak;
  uint64_t reserved;    /* Σ its zones' allowance - mapped */
  uint64_t pending;     /* Σ its growth plans' from_unassigned */
  uint64_t reclaimable; /* Σ its grants adopted by live holders */
} onyx__gov_req;

typedef struct onyx__gov_tier {
  bool live;
  char name[ONYX_GOV_NAME_MAX];
  uint64_t limit;
  uint64_t used;        /* Σ requesters' used */
  uint64_t reserved;    /* Σ requesters' reserved */
  uint64_t pending;     /* Σ requesters' pending */
  uint64_t reclaimable; /* Σ requesters' reclaimable */
  uint64_t peak;
  onyx__gov_req req[ONYX_REQUESTER_COUNT_];
} onyx__gov_tier;

/* A grant slot. Ids are (gen << 32) | (index + 1); gen changes whenever the slot is
 * freed, so a stale id never matches a later grant in the same slot. */
typedef struct onyx__gov_slot {
  uint32_t gen;
  uint32_t next_free; /* free-list link (index), UINT32_MAX ends it */
  uint8_t kind;       /* ONYX__GOV_SLOT_* */
  uint8_t tier;
  uint8_t requester;
  uint8_t committing;       /* GROWTH: a commit is mapping it; release is refused */
  uint32_t holder;          /* adopting holder index + 1, 0 when none */
  uint32_t holder_gen;      /* its generation at adoption */
  uint64_t bytes;           /* GRANT/ALLOC: booked; GROWTH: planned delta */
  uint64_t from_allowance;  /* GROWTH: part booked from the zone's allowance */
  uint64_t from_unassigned; /* GROWTH: part claimed from the tier's pool */
  onyx_gov_zone *zone;      /* GROWTH */
  void *ptr;                /* ALLOC */
  char label[ONYX_GOV_LABEL_MAX];
} onyx__gov_slot;

typedef struct onyx__gov_holder {
  bool live;
  bool busy; /* a callback is running */
  uint32_t gen;
  onyx_gov_tier tier;
  int32_t priority;
  uint64_t seq; /* registration order, breaks priority ties */
  onyx_gov_reclaim_fn fn;
  void *user;
  pthread_t busy_thread;
  uint64_t adopted; /* bytes of adopted live grants */
  uint64_t adopted_req[ONYX_REQUESTER_COUNT_];
  char label[ONYX_GOV_LABEL_MAX];
} onyx__gov_holder;

/* Address → slot index, open addressing with backward-shift deletion. */
typedef struct onyx__gov_ptrmap {
  void **keys; /* NULL: empty */
  uint32_t *vals;
  size_t cap; /* power of two, or 0 */
  size_t count;
} onyx__gov_ptrmap;

struct onyx_gov {
  pthread_mutex_t mu;
  pthread_cond_t holder_cv; /* signalled when a holder callback finishes */
  onyx__gov_tier tiers[ONYX_GOV_MAX_TIERS];
  uint32_t tier_count;
  onyx__gov_slot *slots;
  uint32_t slot_cap;
  uint32_t free_head;
  uint32_t live_slots;
  onyx__gov_holder holders[ONYX_GOV_MAX_HOLDERS];
  uint64_t holder_seq;
  onyx_gov_zone *zones; /* doubly linked list of live zones */
  onyx__gov_ptrmap ptrs;
  onyx_gov_counters counters;
};

struct onyx_gov_zone {
  onyx_gov *gov;
  onyx_gov_backend backend;
  pthread_mutex_t grow_mu;
  onyx_gov_tier tier;
  uint32_t requester;
  char label[ONYX_GOV_LABEL_MAX];
  void *base;
  uint64_t max_bytes;
  uint64_t granularity;
  /* Guarded by gov->mu; `mapped` changes only with grow_mu held too. */
  uint64_t mapped;
  uint64_t allowance;         /* >= mapped + pending_allowance */
  uint64_t base_allowance;    /* what the zone was created with */
  uint64_t pending_allowance; /* Σ its growth plans' from_allowance */
  /* Guarded by grow_mu. */
  void **handles; /* one per mapped granule */
  size_t handle_cap;
  onyx_gov_zone *prev, *next;
};

static inline void onyx__gov_lock(onyx_gov *gov) { pthread_mutex_lock(&gov->mu); }
static inline void onyx__gov_unlock(onyx_gov *gov) { pthread_mutex_unlock(&gov->mu); }

static inline uint64_t onyx__gov_sub0(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

static inline uint64_t onyx__gov_add_sat(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* Copies a label, truncating; NULL gives "". */
void onyx__gov_copy_label(char *dst, size_t cap, const char *src);

/* Tier pointer when `tier` names a live tier, else NULL. Lock held. */
onyx__gov_tier *onyx__gov_tier_at(onyx_gov *gov, onyx_gov_tier tier);

/* limit - used - reserved - pending, 0 when negative. Lock held. */
uint64_t onyx__gov_unassigned(const onyx__gov_tier *t);

/* How far `need` more bytes of unassigned capacity for requester r overshoot the
 * tier (*out_tier) and the requester's cap (*out_req); both 0 means it fits. */
void onyx__gov_shortfall(const onyx__gov_tier *t, uint32_t r, uint64_t need, uint64_t *out_tier,
                         uint64_t *out_req);

/* Books `bytes` as used by requester r (peaks follow). Lock held. */
void onyx__gov_charge(onyx__gov_tier *t, uint32_t r, uint64_t bytes);
void onyx__gov_uncharge(onyx__gov_tier *t, uint32_t r, uint64_t bytes);

/* Whether holders that have not been asked yet (bit i of *asked set = asked) can
 * cover the shortfalls. Lock held. */
bool onyx__gov_reclaim_can_cover(onyx_gov *gov, onyx_gov_tier tier, uint32_t r, uint64_t short_tier,
                                 uint64_t short_req, uint64_t asked);

/* Asks the lowest-priority unasked holder of the tier that can help to reclaim;
 * drops and retakes the lock around the callback. Returns false when no holder is
 * left to ask or the holders left cannot cover the shortfalls. Lock held. */
bool onyx__gov_reclaim_step(onyx_gov *gov, onyx_gov_tier tier, uint32_t r, uint64_t short_tier,
                            uint64_t short_req, uint64_t *asked);

/* Books nothing: fits `need` bytes of pool capacity for requester r, asking holders
 * when the pool falls short and they can cover it; else fills *out_refusal (requested
 * = need), counts it and returns TIER_EXHAUSTED. Lock held (dropped during reclaim). */
onyx_status onyx__gov_admit(onyx_gov *gov, onyx_gov_tier tier, uint32_t r, uint64_t need,
                            onyx_gov_refusal *out_refusal);

/* Prepare-only: whether `need` pool bytes fit now or holders could cover them. Fills
 * *out_refusal with the current numbers either way. Lock held; calls no holder. */
bool onyx__gov_would_fit(onyx_gov *gov, onyx_gov_tier tier, uint32_t r, uint64_t need,
                         uint64_t requested, uint64_t allowance, onyx_gov_refusal *out_refusal);

/* Fills, counts and returns a TIER or REQUESTER refusal for a zone growth whose
 * shortfalls are given. Lock held. */
onyx_status onyx__gov_refuse_growth(onyx_gov *gov, onyx_gov_tier tier, uint32_t r,
                                    uint64_t short_tier, uint64_t short_req, uint64_t requested,
                                    uint64_t allowance, onyx_gov_refusal *out_refusal);

/* Fills a refusal for scope TIER or REQUESTER from the current books. Lock held. */
void onyx__gov_fill_refusal(onyx_gov *gov, onyx_gov_tier tier, uint32_t r, uint32_t scope,
                            uint64_t requested, uint64_t allowance, onyx_gov_refusal *out);

/* Slot table. Lock held. */
uint32_t onyx__gov_slot_new(onyx_gov *gov); /* UINT32_MAX when out of memory */
void onyx__gov_slot_free(onyx_gov *gov, uint32_t index);
onyx__gov_slot *onyx__gov_slot_find(onyx_gov *gov, onyx_gov_grant_id id, uint32_t *out_index);
onyx_gov_grant_id onyx__gov_slot_id(const onyx_gov *gov, uint32_t index);

/* Detaches a grant slot from its holder, if any (the holder's reclaimable drops). */
void onyx__gov_holder_detach(onyx_gov *gov, onyx__gov_slot *slot);

/* Rolls back a growth plan's booking (does not free the slot). Lock held. */
void onyx__gov_growth_unbook(onyx_gov *gov, onyx__gov_slot *slot);

/* Address map. Lock held. */
bool onyx__gov_ptrmap_put(onyx__gov_ptrmap *map, void *key, uint32_t val);
bool onyx__gov_ptrmap_take(onyx__gov_ptrmap *map, void *key, uint32_t *out_val);
void onyx__gov_ptrmap_free(onyx__gov_ptrmap *map);

#endif /* ONYX_GOV_IMPL_H */
