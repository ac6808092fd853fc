/*
 * Mapped zones: one reserved address range per zone, grown in granules in place
 * (the base never moves, so views carved from it stay valid and nothing is copied).
 *
 * Growth is two-phase so that admission can happen before any work starts and the
 * slow backend calls run without the governor lock:
 *   prepare  books the granule-rounded delta: the zone's own unused allowance first,
 *            then capacity of the tier assigned to no one, then holder reclaim, else
 *            a typed refusal. The part taken from the pool is recorded on the plan.
 *   commit   maps (serialized per zone by grow_mu), then settles: bytes mapped move
 *            to `used`; pool capacity that was booked but not mapped (over-estimate,
 *            or granules another growth already mapped) goes back to the pool.
 *   release  of a prepared plan rolls it back and returns the pool capacity in full.
 * Pool capacity that was mapped stays with the zone as allowance until a trim.
 */
#include <stdlib.h>
#include <string.h>

#include "gov_impl.h"

static uint64_t round_up(uint64_t bytes, uint64_t granularity) {
  return (bytes + granularity - 1) & ~(granularity - 1);
}

static void zone_refusal(onyx_gov_zone *zone, uint64_t requested, onyx_gov_refusal *out) {
  onyx__gov_fill_refusal(zone->gov, zone->tier, zone->requester, ONYX_GOV_SCOPE_ZONE, requested, 0,
                         out);
  if (out != NULL) {
    out->limit = zone->max_bytes;
    out->used = zone->mapped;
    out->reserved = 0;
    out->reclaimable = 0;
  }
}

/* The zone's allowance not yet mapped nor promised to a prepared growth. */
static uint64_t allowance_free(const onyx_gov_zone *zone) {
  return zone->allowance - zone->mapped - zone->pending_allowance;
}

void onyx__gov_growth_unbook(onyx_gov *gov, onyx__gov_slot *slot) {
  onyx__gov_tier *t = &gov->tiers[slot->tier];
  slot->zone->pending_allowance -= slot->from_allowance;
  t->pending -= slot->from_unassigned;
  t->req[slot->requester].pending -= slot->from_unassigned;
  gov->counters.unassigned_returned += slot->from_unassigned;
}

/* Adds `fa` from the zone's allowance and `fu` from the pool to a plan. Lock held. */
static void growth_book(onyx_gov *gov, onyx__gov_slot *slot, uint64_t fa, uint64_t fu) {
  onyx__gov_tier *t = &gov->tiers[slot->tier];
  slot->bytes += fa + fu;
  slot->from_allowance += fa;
  slot->from_unassigned += fu;
  slot->zone->pending_allowance += fa;
  t->pending += fu;
  t->req[slot->requester].pending += fu;
  gov->counters.unassigned_claimed += fu;
}

/* ------------------------------------------------------------------ backend calls */

static bool handles_reserve(onyx_gov_zone *zone, size_t granules) {
  if (granules <= zone->handle_cap) return true;
  size_t cap = zone->handle_cap ? zone->handle_cap * 2 : 16;
  if (cap < granules) cap = granules;
  void **handles = realloc(zone->handles, cap * sizeof *handles);
  if (handles == NULL) return false;
  zone->handles = handles;
  zone->handle_cap = cap;
  return true;
}

/* Unmaps and releases granules [from, to), top down. grow_mu held. */
static void unmap_range(onyx_gov_zone *zone, uint64_t from, uint64_t to) {
  const onyx_gov_backend *b = &zone->backend;
  uint64_t g = zone->granularity;
  for (uint64_t off = to; off > from;) {
    off -= g;
    b->unmap(b->state, zone->base, off, g);
    b->release(b->state, zone->handles[off / g], g);
    zone->handles[off / g] = NULL;
  }
}

/* Maps granules [from, to) or none of them. grow_mu held, gov->mu not. */
static onyx_status map_range(onyx_gov_zone *zone, uint64_t from, uint64_t to) {
  const onyx_gov_backend *b = &zone->backend;
  uint64_t g = zone->granularity;
  if (from == to) return ONYX_STATUS_OK;
  if (!handles_reserve(zone, (size_t)(to / g))) return ONYX_STATUS_OUT_OF_MEMORY;
  onyx_status st = ONYX_STATUS_OK;
  uint64_t off = from;
  for (; off < to; off += g) {
    void *handle = NULL;
    st = b->create(b->state, g, &handle);
    if (st != ONYX_STATUS_OK) break;
    st = b->map(b->state, zone->base, off, g, handle);
    if (st != ONYX_STATUS_OK) {
      b->release(b->state, handle, g);
      break;
    }
    st = b->set_access(b->state, zone->base, off, g);
    if (st != ONYX_STATUS_OK) {
      b->unmap(b->state, zone->base, off, g);
      b->release(b->state, handle, g);
      break;
    }
    zone->handles[off / g] = handle;
  }
  if (st == ONYX_STATUS_OK) return ONYX_STATUS_OK;
  if (st == ONYX_STATUS_TIER_EXHAUSTED) st = ONYX_STATUS_OUT_OF_MEMORY; /* not ours to claim */
  /* All or nothing: take back what this call mapped. Nothing was handed out yet,
   * but the rule is sync before unmap, and it costs nothing on this rare path. */
  if (off > from) {
    if (b->sync != NULL) (void)b->sync(b->state);
    unmap_range(zone, from, off);
  }
  return st;
}

/* ------------------------------------------------------------------ lifetime */

static bool backend_usable(const onyx_gov_backend *b) {
  return b != NULL && b->struct_size >= sizeof(onyx_gov_backend) && b->granularity != NULL &&
         b->reserve != NULL && b->unreserve != NULL && b->create != NULL && b->release != NULL &&
         b->map != NULL && b->set_access != NULL && b->unmap != NULL;
}

onyx_status onyx_gov_zone_create(onyx_gov *gov, const onyx_gov_zone_desc *desc,
                                 onyx_gov_zone **out_zone, onyx_gov_refusal *out_refusal) {
  if (gov == NULL || desc == NULL || out_zone == NULL ||
      desc->struct_size < sizeof(onyx_gov_zone_desc) || !backend_usable(desc->backend) ||
      desc->requester >= ONYX_REQUESTER_COUNT_ || desc->max_bytes == 0)
    return ONYX_STATUS_INVALID_ARGUMENT;
  const onyx_gov_backend *b = desc->backend;
  uint64_t g = 0;
  onyx_status st = b->granularity(b->state, &g);
  if (st != ONYX_STATUS_OK) return st;
  if (g == 0 || (g & (g - 1)) != 0 || desc->max_bytes > UINT64_MAX - g)
    return ONYX_STATUS_INVALID_ARGUMENT;
  uint64_t max_bytes = round_up(desc->max_bytes, g);
  if (desc->allowance_bytes > max_bytes || max_bytes / g > SIZE_MAX / sizeof(void *))
    return ONYX_STATUS_INVALID_ARGUMENT;

  onyx_gov_zone *zone = calloc(1, sizeof *zone);
  if (zone == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  if (pthread_mutex_init(&zone->grow_mu, NULL) != 0) {
    free(zone);
    return ONYX_STATUS_INTERNAL;
  }
  zone->gov = gov;
  zone->backend = *b;
  zone->tier = desc->tier;
  zone->requester = desc->requester;
  onyx__gov_copy_label(zone->label, sizeof zone->label, desc->label);
  zone->max_bytes = max_bytes;
  zone->granularity = g;

  st = b->reserve(b->state, max_bytes, &zone->base);
  if (st == ONYX_STATUS_OK) {
    onyx__gov_lock(gov);
    onyx__gov_tier *t = onyx__gov_tier_at(gov, desc->tier);
    if (t == NULL) st = ONYX_STATUS_INVALID_ARGUMENT;
    /* The allowance is booked like a grant: pool first, then holders. */
    if (st == ONYX_STATUS_OK)
      st = onyx__gov_admit(gov, desc->tier, zone->requester, desc->allowance_bytes, out_refusal);
    if (st == ONYX_STATUS_OK) {
      zone->allowance = zone->base_allowance = desc->allowance_bytes;
      t->reserved += zone->allowance;
      t->req[zone->requester].reserved += zone->allowance;
      zone->next = gov->zones;
      if (gov->zones != NULL) gov->zones->prev = zone;
      gov->zones = zone;
    }
    onyx__gov_unlock(gov);
    if (st != ONYX_STATUS_OK) b->unreserve(b->state, zone->base, max_bytes);
  }
  if (st != ONYX_STATUS_OK) {
    pthread_mutex_destroy(&zone->grow_mu);
    free(zone);
    return st;
  }
  *out_zone = zone;
  return ONYX_STATUS_OK;
}

onyx_status onyx_gov_zone_destroy(onyx_gov_zone *zone) {
  if (zone == NULL) return ONYX_STATUS_OK;
  onyx_gov *gov = zone->gov;
  const onyx_gov_backend *b = &zone->backend;
  pthread_mutex_lock(&zone->grow_mu);

  onyx__gov_lock(gov);
  for (uint32_t i = 0; i < gov->slot_cap; ++i) {
    onyx__gov_slot *s = &gov->slots[i];
    if (s->kind != ONYX__GOV_SLOT_GROWTH || s->zone != zone) continue;
    onyx__gov_growth_unbook(gov, s);
    onyx__gov_slot_free(gov, i);
    gov->counters.releases++;
  }
  uint64_t mapped = zone->mapped;
  onyx__gov_unlock(gov);

  onyx_status st = ONYX_STATUS_OK;
  if (mapped > 0) {
    if (b->sync != NULL) st = b->sync(b->state);
    unmap_range(zone, 0, mapped);
  }

  onyx__gov_lock(gov);
  onyx__gov_tier *t = &gov->tiers[zone->tier];
  onyx__gov_uncharge(t, zone->requester, mapped);
  t->reserved -= zone->allowance - mapped;
  t->req[zone->requester].reserved -= zone->allowance - mapped;
  gov->counters.bytes_unmapped += mapped;
  if (zone->prev != NULL)
    zone->prev->next = zone->next;
  else
    gov->zones = zone->next;
  if (zone->next != NULL) zone->next->prev = zone->prev;
  onyx__gov_unlock(gov);

  pthread_mutex_unlock(&zone->grow_mu);
  b->unreserve(b->state, zone->base, zone->max_bytes);
  pthread_mutex_destroy(&zone->grow_mu);
  free(zone->handles);
  free(zone);
  return st;
}

void onyx_gov_zone_info_get(onyx_gov_zone *zone, onyx_gov_zone_info *out_info) {
  if (zone == NULL || out_info == NULL) return;
  onyx__gov_lock(zone->gov);
  out_info->base = zone->base;
  out_info->mapped = zone->mapped;
  out_info->max_bytes = zone->max_bytes;
  out_info->allowance = zone->allowance;
  out_info->granularity = zone->granularity;
  onyx__gov_unlock(zone->gov);
}

/* ------------------------------------------------------------------ growth */

onyx_status onyx_gov_zone_prepare(onyx_gov_zone *zone, uint64_t target_bytes, const char *label,
                                  onyx_gov_grant_id *out_grant, onyx_gov_refusal *out_refusal) {
  if (zone == NULL || out_grant == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  onyx_gov *gov = zone->gov;
  onyx__gov_lock(gov);
  if (target_bytes > zone->max_bytes) {
    zone_refusal(zone, target_bytes, out_refusal);
    gov->counters.refusals++;
    onyx__gov_unlock(gov);
    return ONYX_STATUS_TIER_EXHAUSTED;
  }
  uint64_t target = round_up(target_bytes, zone->granularity);
  onyx__gov_tier *t = &gov->tiers[zone->tier];
  uint32_t r = zone->requester;
  uint64_t asked = 0, delta, fa, fu;
  /* Recomputed after every reclaim: the lock was dropped and the zone may have moved. */
  for (;;) {
    delta = onyx__gov_sub0(target, zone->mapped);
    fa = delta < allowance_free(zone) ? delta : allowance_free(zone);
    fu = delta - fa;
    uint64_t short_tier, short_req;
    onyx__gov_shortfall(t, r, fu, &short_tier, &short_req);
    if (short_tier == 0 && short_req == 0) break;
    if (!onyx__gov_reclaim_step(gov, zone->tier, r, short_tier, short_req, &asked)) {
      onyx_status st = onyx__gov_refuse_growth(gov, zone->tier, r, short_tier, short_req, delta, fa,
                                               out_refusal);
      onyx__gov_unlock(gov);
      return st;
    }
  }
  uint32_t index = onyx__gov_slot_new(gov);
  if (index == UINT32_MAX) {
    onyx__gov_unlock(gov);
    return ONYX_STATUS_OUT_OF_MEMORY;
  }
  onyx__gov_slot *s = &gov->slots[index];
  s->kind = ONYX__GOV_SLOT_GROWTH;
  s->tier = (uint8_t)zone->tier;
  s->requester = (uint8_t)r;
  s->zone = zone;
  s->bytes = 0;
  onyx__gov_copy_label(s->label, sizeof s->label, label != NULL ? label : zone->label);
  growth_book(gov, s, fa, fu);
  gov->counters.grants++;
  *out_grant = onyx__gov_slot_id(gov, index);
  onyx__gov_unlock(gov);
  return ONYX_STATUS_OK;
}

onyx_status onyx_gov_zone_commit(onyx_gov_zone *zone, onyx_gov_grant_id grant,
                                 uint64_t target_bytes, onyx_gov_refusal *out_refusal) {
  if (zone == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  onyx_gov *gov = zone->gov;
  pthread_mutex_lock(&zone->grow_mu);
  onyx__gov_lock(gov);
  uint32_t index = 0;
  onyx__gov_slot *s = onyx__gov_slot_find(gov, grant, &index);
  onyx_status st = ONYX_STATUS_OK;
  if (s == NULL || s->kind != ONYX__GOV_SLOT_GROWTH || s->zone != zone || s->committing) {
    st = ONYX_STATUS_INVALID_ARGUMENT;
  } else if (target_bytes > zone->max_bytes) {
    zone_refusal(zone, target_bytes, out_refusal);
    gov->counters.refusals++;
    st = ONYX_STATUS_TIER_EXHAUSTED;
  }
  uint64_t from = zone->mapped, delta = 0, extra_a = 0, extra_u = 0;
  if (st == ONYX_STATUS_OK) {
    delta = onyx__gov_sub0(round_up(target_bytes, zone->granularity), from);
    if (delta > s->bytes) {
      /* More than planned (a trim ran in between, or a larger target): book the
       * difference without reclaim — holders may be growing this very zone. */
      uint64_t extra = delta - s->bytes;
      extra_a = extra < allowance_free(zone) ? extra : allowance_free(zone);
      extra_u = extra - extra_a;
      uint64_t short_tier, short_req;
      onyx__gov_shortfall(&gov->tiers[zone->tier], zone->requester, extra_u, &short_tier,
                          &short_req);
      if (short_tier != 0 || short_req != 0) {
        st = onyx__gov_refuse_growth(gov, zone->tier, zone->requester, short_tier, short_req, delta,
                                     s->from_allowance + extra_a, out_refusal);
      } else {
        growth_book(gov, s, extra_a, extra_u);
      }
    }
  }
  if (st != ONYX_STATUS_OK) {
    if (s == NULL) gov->counters.double_releases++;
    onyx__gov_unlock(gov);
    pthread_mutex_unlock(&zone->grow_mu);
    return st;
  }
  s->committing = 1;
  onyx__gov_unlock(gov);

  st = map_range(zone, from, from + delta);

  onyx__gov_lock(gov);
  s = &gov->slots[index];
  s->committing = 0;
  if (st != ONYX_STATUS_OK) {
    /* Back to exactly the prepared plan. */
    onyx__gov_tier *t = &gov->tiers[zone->tier];
    s->bytes -= extra_a + extra_u;
    s->from_allowance -= extra_a;
    s->from_unassigned -= extra_u;
    zone->pending_allowance -= extra_a;
    t->pending -= extra_u;
    t->req[zone->requester].pending -= extra_u;
    gov->counters.unassigned_returned += extra_u;
  } else {
    onyx__gov_tier *t = &gov->tiers[zone->tier];
    onyx__gov_req *q = &t->req[zone->requester];
    uint64_t use_a = delta < s->from_allowance ? delta : s->from_allowance;
    uint64_t use_u = delta - use_a; /* <= from_unassigned: delta <= bytes */
    zone->pending_allowance -= s->from_allowance;
    t->pending -= s->from_unassigned;
    q->pending -= s->from_unassigned;
    /* Mapped pool capacity becomes the zone's; the unmapped rest goes back. */
    zone->allowance += use_u;
    zone->mapped += delta;
    t->reserved -= use_a;
    q->reserved -= use_a;
    onyx__gov_charge(t, zone->requester, delta);
    gov->counters.unassigned_returned += s->from_unassigned - use_u;
    if (delta > 0) gov->counters.growth_events++;
    gov->counters.bytes_mapped += delta;
    gov->counters.releases++;
    onyx__gov_slot_free(gov, index);
  }
  onyx__gov_unlock(gov);
  pthread_mutex_unlock(&zone->grow_mu);
  return st;
}

onyx_status onyx_gov_zone_grow(onyx_gov_zone *zone, uint64_t target_bytes, const char *label,
                               onyx_gov_refusal *out_refusal) {
  onyx_gov_grant_id plan = {0};
  onyx_status st = onyx_gov_zone_prepare(zone, target_bytes, label, &plan, out_refusal);
  if (st != ONYX_STATUS_OK) return st;
  st = onyx_gov_zone_commit(zone, plan, target_bytes, out_refusal);
  if (st != ONYX_STATUS_OK) (void)onyx_gov_release(zone->gov, plan);
  return st;
}

onyx_status onyx_gov_zone_check(onyx_gov_zone *zone, uint64_t target_bytes,
                                onyx_gov_refusal *out_refusal) {
  if (zone == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  onyx_gov *gov = zone->gov;
  onyx__gov_lock(gov);
  onyx_status st = ONYX_STATUS_OK;
  if (target_bytes > zone->max_bytes) {
    zone_refusal(zone, target_bytes, out_refusal);
    st = ONYX_STATUS_TIER_EXHAUSTED;
  } else {
    uint64_t delta = onyx__gov_sub0(round_up(target_bytes, zone->granularity), zone->mapped);
    uint64_t fa = delta < allowance_free(zone) ? delta : allowance_free(zone);
    st = onyx__gov_would_fit(gov, zone->tier, zone->requester, delta - fa, delta, fa, out_refusal)
             ? ONYX_STATUS_OK
             : ONYX_STATUS_TIER_EXHAUSTED;
  }
  onyx__gov_unlock(gov);
  return st;
}

onyx_status onyx_gov_zone_trim(onyx_gov_zone *zone, uint64_t keep_bytes) {
  if (zone == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  onyx_gov *gov = zone->gov;
  const onyx_gov_backend *b = &zone->backend;
  pthread_mutex_lock(&zone->grow_mu);
  /* `mapped` changes only under grow_mu, which this thread holds. */
  uint64_t mapped = zone->mapped;
  uint64_t keep = keep_bytes >= mapped ? mapped : round_up(keep_bytes, zone->granularity);
  onyx_status st = ONYX_STATUS_OK;
  if (keep < mapped) {
    if (b->sync != NULL) st = b->sync(b->state);
    if (st == ONYX_STATUS_OK) {
      unmap_range(zone, keep, mapped);
      onyx__gov_lock(gov);
      onyx__gov_tier *t = &gov->tiers[zone->tier];
      onyx__gov_req *q = &t->req[zone->requester];
      uint64_t freed = mapped - keep;
      uint64_t old_reserved = zone->allowance - mapped;
      uint64_t allowance = keep + zone->pending_allowance;
      if (allowance < zone->base_allowance) allowance = zone->base_allowance;
      zone->mapped = keep;
      zone->allowance = allowance;
      onyx__gov_uncharge(t, zone->requester, freed);
      t->reserved = t->reserved - old_reserved + (allowance - keep);
      q->reserved = q->reserved - old_reserved + (allowance - keep);
      gov->counters.bytes_unmapped += freed;
      onyx__gov_unlock(gov);
    }
  }
  pthread_mutex_unlock(&zone->grow_mu);
  return st;
}
