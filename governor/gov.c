/*
 * The governor object, its tiers and requesters, and the arithmetic every booking
 * path shares. Keeping the free-capacity formula in one place (onyx__gov_unassigned)
 * is deliberate: the seed regression came from a growth path that had its own idea of
 * what was free.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gov_impl.h"

static const char *const requester_names[ONYX_REQUESTER_COUNT_] = {
    "weights", "kv_cache", "workspace_session", "workspace_step", "activations"};

const char *onyx_gov_requester_name(uint32_t requester) {
  return requester < ONYX_REQUESTER_COUNT_ ? requester_names[requester] : "unknown";
}

void onyx__gov_copy_label(char *dst, size_t cap, const char *src) {
  size_t n = src != NULL ? strnlen(src, cap - 1) : 0;
  if (n > 0) memcpy(dst, src, n);
  dst[n] = '\0';
}

onyx_status onyx_gov_create(onyx_gov **out_gov) {
  if (out_gov == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  onyx_gov *gov = calloc(1, sizeof *gov);
  if (gov == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  if (pthread_mutex_init(&gov->mu, NULL) != 0) {
    free(gov);
    return ONYX_STATUS_INTERNAL;
  }
  if (pthread_cond_init(&gov->holder_cv, NULL) != 0) {
    pthread_mutex_destroy(&gov->mu);
    free(gov);
    return ONYX_STATUS_INTERNAL;
  }
  gov->free_head = UINT32_MAX;
  *out_gov = gov;
  return ONYX_STATUS_OK;
}

void onyx_gov_destroy(onyx_gov *gov) {
  if (gov == NULL) return;
  while (gov->zones != NULL) (void)onyx_gov_zone_destroy(gov->zones);
  for (uint32_t i = 0; i < gov->slot_cap; ++i)
    if (gov->slots[i].kind == ONYX__GOV_SLOT_ALLOC) free(gov->slots[i].ptr);
  free(gov->slots);
  onyx__gov_ptrmap_free(&gov->ptrs);
  pthread_cond_destroy(&gov->holder_cv);
  pthread_mutex_destroy(&gov->mu);
  free(gov);
}

/* ------------------------------------------------------------------ tiers */

onyx__gov_tier *onyx__gov_tier_at(onyx_gov *gov, onyx_gov_tier tier) {
  if (tier >= gov->tier_count || !gov->tiers[tier].live) return NULL;
  return &gov->tiers[tier];
}

onyx_status onyx_gov_tier_add(onyx_gov *gov, const char *name, uint64_t limit_bytes,
                              onyx_gov_tier *out_tier) {
  if (gov == NULL || name == NULL || out_tier == NULL || name[0] == '\0' ||
      strlen(name) >= ONYX_GOV_NAME_MAX)
    return ONYX_STATUS_INVALID_ARGUMENT;
  onyx__gov_lock(gov);
  onyx_status st = ONYX_STATUS_OK;
  for (uint32_t i = 0; i < gov->tier_count; ++i)
    if (strcmp(gov->tiers[i].name, name) == 0) st = ONYX_STATUS_INVALID_ARGUMENT;
  if (st == ONYX_STATUS_OK && gov->tier_count == ONYX_GOV_MAX_TIERS)
    st = ONYX_STATUS_INVALID_ARGUMENT;
  if (st == ONYX_STATUS_OK) {
    onyx__gov_tier *t = &gov->tiers[gov->tier_count];
    memset(t, 0, sizeof *t);
    onyx__gov_copy_label(t->name, sizeof t->name, name);
    t->limit = limit_bytes;
    for (int r = 0; r < ONYX_REQUESTER_COUNT_; ++r) t->req[r].limit = ONYX_GOV_NO_LIMIT;
    t->live = true;
    *out_tier = gov->tier_count++;
  }
  onyx__gov_unlock(gov);
  return st;
}

onyx_status onyx_gov_tier_find(onyx_gov *gov, const char *name, onyx_gov_tier *out_tier) {
  if (gov == NULL || name == NULL || out_tier == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  onyx_status st = ONYX_STATUS_NOT_FOUND;
  onyx__gov_lock(gov);
  for (uint32_t i = 0; i < gov->tier_count; ++i) {
    if (strcmp(gov->tiers[i].name, name) == 0) {
      *out_tier = i;
      st = ONYX_STATUS_OK;
      break;
    }
  }
  onyx__gov_unlock(gov);
  return st;
}

onyx_status onyx_gov_tier_set_limit(onyx_gov *gov, onyx_gov_tier tier, uint64_t limit_bytes) {
  if (gov == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  onyx__gov_lock(gov);
  onyx__gov_tier *t = onyx__gov_tier_at(gov, tier);
  if (t != NULL) t->limit = limit_bytes;
  onyx__gov_unlock(gov);
  return t != NULL ? ONYX_STATUS_OK : ONYX_STATUS_INVALID_ARGUMENT;
}

onyx_status onyx_gov_requester_set_limit(onyx_gov *gov, onyx_gov_tier tier,
                                         onyx_requester requester, uint64_t limit_bytes) {
  if (gov == NULL || (uint32_t)requester >= ONYX_REQUESTER_COUNT_)
    return ONYX_STATUS_INVALID_ARGUMENT;
  onyx__gov_lock(gov);
  onyx__gov_tier *t = onyx__gov_tier_at(gov, tier);
  if (t != NULL) t->req[requester].limit = limit_bytes;
  onyx__gov_unlock(gov);
  return t != NULL ? ONYX_STATUS_OK : ONYX_STATUS_INVALID_ARGUMENT;
}

onyx_status onyx_gov_tier_usage_get(onyx_gov *gov, onyx_gov_tier tier,
                                    onyx_gov_tier_usage *out_usage) {
  if (gov == NULL || out_usage == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  onyx__gov_lock(gov);
  onyx__gov_tier *t = onyx__gov_tier_at(gov, tier);
  if (t != NULL) {
    out_usage->limit = t->limit;
    out_usage->used = t->used;
    out_usage->reserved = t->reserved;
    out_usage->pending = t->pending;
    out_usage->unassigned = onyx__gov_unassigned(t);
    out_usage->reclaimable = t->reclaimable;
    out_usage->peak = t->peak;
  }
  onyx__gov_unlock(gov);
  return t != NULL ? ONYX_STATUS_OK : ONYX_STATUS_INVALID_ARGUMENT;
}

onyx_status onyx_gov_requester_usage_get(onyx_gov *gov, onyx_gov_tier tier,
                                         onyx_requester requester,
                                         onyx_gov_requester_usage *out_usage) {
  if (gov == NULL || out_usage == NULL || (uint32_t)requester >= ONYX_REQUESTER_COUNT_)
    return ONYX_STATUS_INVALID_ARGUMENT;
  onyx__gov_lock(gov);
  onyx__gov_tier *t = onyx__gov_tier_at(gov, tier);
  if (t != NULL) {
    const onyx__gov_req *q = &t->req[requester];
    out_usage->limit = q->limit;
    out_usage->used = q->used;
    out_usage->peak = q->peak;
    out_usage->reserved = q->reserved;
    out_usage->pending = q->pending;
    out_usage->reclaimable = q->reclaimable;
  }
  onyx__gov_unlock(gov);
  return t != NULL ? ONYX_STATUS_OK : ONYX_STATUS_INVALID_ARGUMENT;
}

void onyx_gov_reset_peaks(onyx_gov *gov) {
  if (gov == NULL) return;
  onyx__gov_lock(gov);
  for (uint32_t i = 0; i < gov->tier_count; ++i) {
    onyx__gov_tier *t = &gov->tiers[i];
    t->peak = t->used;
    for (int r = 0; r < ONYX_REQUESTER_COUNT_; ++r) t->req[r].peak = t->req[r].used;
  }
  onyx__gov_unlock(gov);
}

void onyx_gov_counters_get(onyx_gov *gov, onyx_gov_counters *out_counters) {
  if (gov == NULL || out_counters == NULL) return;
  onyx__gov_lock(gov);
  *out_counters = gov->counters;
  onyx__gov_unlock(gov);
}

void onyx_gov_note_bytes_moved(onyx_gov *gov, uint64_t bytes) {
  if (gov == NULL) return;
  onyx__gov_lock(gov);
  gov->counters.bytes_moved += bytes;
  onyx__gov_unlock(gov);
}

/* ------------------------------------------------------------------ arithmetic */

uint64_t onyx__gov_unassigned(const onyx__gov_tier *t) {
  uint64_t booked = onyx__gov_add_sat(onyx__gov_add_sat(t->used, t->reserved), t->pending);
  return onyx__gov_sub0(t->limit, booked);
}

void onyx__gov_shortfall(const onyx__gov_tier *t, uint32_t r, uint64_t need, uint64_t *out_tier,
                         uint64_t *out_req) {
  uint64_t free_bytes = onyx__gov_unassigned(t);
  *out_tier = onyx__gov_sub0(need, free_bytes);
  const onyx__gov_req *q = &t->req[r];
  *out_req = 0;
  if (q->limit != ONYX_GOV_NO_LIMIT) {
    uint64_t charge = onyx__gov_add_sat(onyx__gov_add_sat(q->used, q->reserved), q->pending);
    *out_req = onyx__gov_sub0(onyx__gov_add_sat(charge, need), q->limit);
  }
}

void onyx__gov_charge(onyx__gov_tier *t, uint32_t r, uint64_t bytes) {
  onyx__gov_req *q = &t->req[r];
  q->used += bytes;
  if (q->used > q->peak) q->peak = q->used;
  t->used += bytes;
  if (t->used > t->peak) t->peak = t->used;
}

void onyx__gov_uncharge(onyx__gov_tier *t, uint32_t r, uint64_t bytes) {
  t->req[r].used -= bytes;
  t->used -= bytes;
}

/* ------------------------------------------------------------------ audit */

typedef struct audit_books {
  uint64_t used, reserved, pending, reclaimable;
} audit_books;

static bool audit_differs(char *msg, size_t cap, const char *tier, const char *who,
                          const char *what, uint64_t running, uint64_t recomputed) {
  if (running == recomputed) return false;
  if (msg != NULL && cap > 0)
    snprintf(msg, cap, "tier %s %s: %s is %" PRIu64 " but the grants and zones add to %" PRIu64,
             tier, who, what, running, recomputed);
  return true;
}

onyx_status onyx_gov_audit(onyx_gov *gov, char *msg, size_t msg_cap) {
  if (gov == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  audit_books books[ONYX_GOV_MAX_TIERS][ONYX_REQUESTER_COUNT_];
  memset(books, 0, sizeof books);
  bool bad = false;
  onyx__gov_lock(gov);
  uint32_t free_count = 0;
  for (uint32_t i = gov->free_head; i != UINT32_MAX && free_count <= gov->slot_cap;
       i = gov->slots[i].next_free)
    ++free_count;
  if (free_count + gov->live_slots != gov->slot_cap) {
    bad = true;
    if (msg != NULL && msg_cap > 0)
      snprintf(msg, msg_cap, "slot table: %u free + %u live != %u slots", free_count,
               gov->live_slots, gov->slot_cap);
  }
  for (uint32_t i = 0; i < gov->slot_cap; ++i) {
    const onyx__gov_slot *s = &gov->slots[i];
    if (s->kind == ONYX__GOV_SLOT_FREE) continue;
    audit_books *b = &books[s->tier][s->requester];
    if (s->kind == ONYX__GOV_SLOT_GROWTH) {
      b->pending += s->from_unassigned;
    } else {
      b->used += s->bytes;
      if (s->holder != 0) {
        const onyx__gov_holder *h = &gov->holders[s->holder - 1];
        if (h->live && h->gen == s->holder_gen) b->reclaimable += s->bytes;
      }
    }
  }
  for (onyx_gov_zone *z = gov->zones; z != NULL && !bad; z = z->next) {
    if (z->allowance < z->mapped + z->pending_allowance) {
      bad = true;
      if (msg != NULL && msg_cap > 0)
        snprintf(msg, msg_cap,
                 "zone %s: allowance %" PRIu64 " < mapped %" PRIu64 " + pending allowance %" PRIu64,
                 z->label, z->allowance, z->mapped, z->pending_allowance);
      break;
    }
    audit_books *b = &books[z->tier][z->requester];
    b->used += z->mapped;
    b->reserved += z->allowance - z->mapped;
    uint64_t pend = 0;
    for (uint32_t i = 0; i < gov->slot_cap; ++i)
      if (gov->slots[i].kind == ONYX__GOV_SLOT_GROWTH && gov->slots[i].zone == z)
        pend += gov->slots[i].from_allowance;
    bad = audit_differs(msg, msg_cap, gov->tiers[z->tier].name, z->label, "pending allowance",
                        z->pending_allowance, pend);
  }
  for (uint32_t ti = 0; ti < gov->tier_count && !bad; ++ti) {
    const onyx__gov_tier *t = &gov->tiers[ti];
    audit_books sum = {0, 0, 0, 0};
    for (uint32_t r = 0; r < ONYX_REQUESTER_COUNT_ && !bad; ++r) {
      const audit_books *b = &books[ti][r];
      const onyx__gov_req *q = &t->req[r];
      const char *who = onyx_gov_requester_name(r);
      bad =
          audit_differs(msg, msg_cap, t->name, who, "used", q->used, b->used) ||
          audit_differs(msg, msg_cap, t->name, who, "reserved", q->reserved, b->reserved) ||
          audit_differs(msg, msg_cap, t->name, who, "pending", q->pending, b->pending) ||
          audit_differs(msg, msg_cap, t->name, who, "reclaimable", q->reclaimable, b->reclaimable);
      sum.used += b->used;
      sum.reserved += b->reserved;
      sum.pending += b->pending;
      sum.reclaimable += b->reclaimable;
    }
    if (!bad)
      bad = audit_differs(msg, msg_cap, t->name, "total", "used", t->used, sum.used) ||
            audit_differs(msg, msg_cap, t->name, "total", "reserved", t->reserved, sum.reserved) ||
            audit_differs(msg, msg_cap, t->name, "total", "pending", t->pending, sum.pending) ||
            audit_differs(msg, msg_cap, t->name, "total", "reclaimable", t->reclaimable,
                          sum.reclaimable);
  }
  onyx__gov_unlock(gov);
  if (!bad && msg != NULL && msg_cap > 0) msg[0] = '\0';
  return bad ? ONYX_STATUS_INTERNAL : ONYX_STATUS_OK;
}
