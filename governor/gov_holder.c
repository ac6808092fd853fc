/*
 * Holders and reclaim.
 *
 * A holder is registered weakly: the governor stores a callback and an opaque
 * pointer, never a reference it would have to drop. What a holder can give back is
 * what it adopted (grants it marked reclaimable), so the number the refusal reports
 * is the governor's own, not a promise. Reclaim runs only after free capacity was
 * found short, only when the holders still unasked can cover the whole shortfall
 * (evicting live state and refusing anyway helps no one), and lowest priority first.
 * Callbacks run without the lock: they release their grants through the governor.
 */
#include <string.h>

#include "gov_impl.h"

static onyx__gov_holder *holder_find(onyx_gov *gov, onyx_gov_holder_id id, uint32_t *out_index) {
  uint32_t index = (uint32_t)(id.id & 0xffffffffu);
  if (index == 0 || index > ONYX_GOV_MAX_HOLDERS) return NULL;
  onyx__gov_holder *h = &gov->holders[index - 1];
  if (!h->live || h->gen != (uint32_t)(id.id >> 32)) return NULL;
  if (out_index != NULL) *out_index = index - 1;
  return h;
}

onyx_status onyx_gov_holder_register(onyx_gov *gov, onyx_gov_tier tier, int32_t priority,
                                     const char *label, onyx_gov_reclaim_fn fn, void *user,
                                     onyx_gov_holder_id *out_holder) {
  if (gov == NULL || fn == NULL || out_holder == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  onyx__gov_lock(gov);
  onyx_status st = onyx__gov_tier_at(gov, tier) ? ONYX_STATUS_OK : ONYX_STATUS_INVALID_ARGUMENT;
  uint32_t index = 0;
  while (st == ONYX_STATUS_OK && index < ONYX_GOV_MAX_HOLDERS && gov->holders[index].live) ++index;
  if (st == ONYX_STATUS_OK && index == ONYX_GOV_MAX_HOLDERS) st = ONYX_STATUS_OUT_OF_MEMORY;
  if (st == ONYX_STATUS_OK) {
    onyx__gov_holder *h = &gov->holders[index];
    uint32_t gen = h->gen + 1;
    memset(h, 0, sizeof *h);
    h->gen = gen ? gen : 1;
    h->live = true;
    h->tier = tier;
    h->priority = priority;
    h->seq = gov->holder_seq++;
    h->fn = fn;
    h->user = user;
    onyx__gov_copy_label(h->label, sizeof h->label, label);
    out_holder->id = ((uint64_t)h->gen << 32) | (uint64_t)(index + 1);
  }
  onyx__gov_unlock(gov);
  return st;
}

onyx_status onyx_gov_holder_unregister(onyx_gov *gov, onyx_gov_holder_id holder) {
  if (gov == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  onyx__gov_lock(gov);
  onyx__gov_holder *h = holder_find(gov, holder, NULL);
  /* Wait out a callback running on another thread; from inside its own callback
   * the holder unregisters at once (the reclaim step notices the generation). */
  pthread_t self = pthread_self();
  while (h != NULL && h->busy && !pthread_equal(h->busy_thread, self)) {
    pthread_cond_wait(&gov->holder_cv, &gov->mu);
    h = holder_find(gov, holder, NULL);
  }
  if (h != NULL) {
    onyx__gov_tier *t = &gov->tiers[h->tier];
    t->reclaimable -= h->adopted;
    for (int r = 0; r < ONYX_REQUESTER_COUNT_; ++r) t->req[r].reclaimable -= h->adopted_req[r];
    h->adopted = 0;
    memset(h->adopted_req, 0, sizeof h->adopted_req);
    h->live = false;
    h->busy = false;
    if (++h->gen == 0) h->gen = 1; /* adopted grants now point at a stale generation */
  }
  onyx__gov_unlock(gov);
  return h != NULL ? ONYX_STATUS_OK : ONYX_STATUS_INVALID_ARGUMENT;
}

onyx_status onyx_gov_holder_adopt(onyx_gov *gov, onyx_gov_holder_id holder,
                                  onyx_gov_grant_id grant) {
  if (gov == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  onyx__gov_lock(gov);
  uint32_t index = 0;
  onyx__gov_holder *h = holder_find(gov, holder, &index);
  onyx__gov_slot *s = onyx__gov_slot_find(gov, grant, NULL);
  onyx_status st = ONYX_STATUS_INVALID_ARGUMENT;
  if (h != NULL && s != NULL && s->kind == ONYX__GOV_SLOT_GRANT && s->tier == h->tier) {
    onyx__gov_holder_detach(gov, s); /* a grant has one holder at a time */
    s->holder = index + 1;
    s->holder_gen = h->gen;
    h->adopted += s->bytes;
    h->adopted_req[s->requester] += s->bytes;
    onyx__gov_tier *t = &gov->tiers[h->tier];
    t->reclaimable += s->bytes;
    t->req[s->requester].reclaimable += s->bytes;
    st = ONYX_STATUS_OK;
  }
  onyx__gov_unlock(gov);
  return st;
}

void onyx__gov_holder_detach(onyx_gov *gov, onyx__gov_slot *slot) {
  if (slot->holder == 0) return;
  onyx__gov_holder *h = &gov->holders[slot->holder - 1];
  if (h->live && h->gen == slot->holder_gen) {
    h->adopted -= slot->bytes;
    h->adopted_req[slot->requester] -= slot->bytes;
    onyx__gov_tier *t = &gov->tiers[slot->tier];
    t->reclaimable -= slot->bytes;
    t->req[slot->requester].reclaimable -= slot->bytes;
  }
  slot->holder = 0;
}

/* Whether holder i may be asked now. */
static bool askable(const onyx__gov_holder *h, uint32_t i, onyx_gov_tier tier, uint64_t asked) {
  return h->live && !h->busy && h->tier == tier && (asked & ((uint64_t)1 << i)) == 0;
}

bool onyx__gov_reclaim_can_cover(onyx_gov *gov, onyx_gov_tier tier, uint32_t r, uint64_t short_tier,
                                 uint64_t short_req, uint64_t asked) {
  uint64_t sum_tier = 0, sum_req = 0;
  for (uint32_t i = 0; i < ONYX_GOV_MAX_HOLDERS; ++i) {
    const onyx__gov_holder *h = &gov->holders[i];
    if (!askable(h, i, tier, asked)) continue;
    sum_tier += h->adopted;
    sum_req += h->adopted_req[r];
  }
  return short_tier <= sum_tier && short_req <= sum_req;
}

bool onyx__gov_reclaim_step(onyx_gov *gov, onyx_gov_tier tier, uint32_t r, uint64_t short_tier,
                            uint64_t short_req, uint64_t *asked) {
  if (!onyx__gov_reclaim_can_cover(gov, tier, r, short_tier, short_req, *asked)) return false;
  /* The lowest priority that holds bytes that help: any bytes for a tier shortfall,
   * the requester's own for a shortfall against its cap alone. */
  onyx__gov_holder *best = NULL;
  uint32_t best_index = 0;
  for (uint32_t i = 0; i < ONYX_GOV_MAX_HOLDERS; ++i) {
    onyx__gov_holder *h = &gov->holders[i];
    if (!askable(h, i, tier, *asked)) continue;
    if ((short_tier ? h->adopted : h->adopted_req[r]) == 0) continue;
    if (best == NULL || h->priority < best->priority ||
        (h->priority == best->priority && h->seq < best->seq)) {
      best = h;
      best_index = i;
    }
  }
  if (best == NULL) return false;

  *asked |= (uint64_t)1 << best_index;
  uint32_t gen = best->gen;
  onyx_gov_reclaim_fn fn = best->fn;
  void *user = best->user;
  best->busy = true;
  best->busy_thread = pthread_self();
  uint64_t want = short_tier > short_req ? short_tier : short_req;

  onyx__gov_unlock(gov);
  uint64_t freed = fn(user, gov, tier, want);
  onyx__gov_lock(gov);

  if (best->live && best->gen == gen) best->busy = false;
  pthread_cond_broadcast(&gov->holder_cv);
  gov->counters.reclaims++;
  gov->counters.reclaimed_bytes += freed;
  return true;
}
