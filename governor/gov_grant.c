/*
 * Plain grants: the slot table, booking and releasing, the prepare-only check, and
 * the aligned host allocation convenience.
 *
 * Grants are ids into a slot table rather than pointers so that a second release
 * can be recognised (the slot's generation moved on) instead of touching freed
 * memory. grant + release is the hot path: one lock round each, no allocation once
 * the table has grown, and the label copied inline.
 */
#include <stdlib.h>
#include <string.h>

#include "gov_impl.h"

/* ------------------------------------------------------------------ slots */

static bool slots_grow(onyx_gov *gov) {
  uint32_t old_cap = gov->slot_cap;
  if (old_cap > (UINT32_MAX - 1) / 2) return false;
  uint32_t cap = old_cap ? old_cap * 2 : 64;
  onyx__gov_slot *slots = realloc(gov->slots, (size_t)cap * sizeof *slots);
  if (slots == NULL) return false;
  memset(slots + old_cap, 0, (size_t)(cap - old_cap) * sizeof *slots);
  /* Chain the new slots so that the lowest index is handed out first. */
  for (uint32_t i = cap; i-- > old_cap;) {
    slots[i].gen = 1;
    slots[i].next_free = gov->free_head;
    gov->free_head = i;
  }
  gov->slots = slots;
  gov->slot_cap = cap;
  return true;
}

uint32_t onyx__gov_slot_new(onyx_gov *gov) {
  if (gov->free_head == UINT32_MAX && !slots_grow(gov)) return UINT32_MAX;
  uint32_t index = gov->free_head;
  onyx__gov_slot *s = &gov->slots[index];
  gov->free_head = s->next_free;
  gov->live_slots++;
  s->next_free = UINT32_MAX;
  s->committing = 0;
  s->holder = 0;
  s->holder_gen = 0;
  s->from_allowance = 0;
  s->from_unassigned = 0;
  s->zone = NULL;
  s->ptr = NULL;
  return index;
}

void onyx__gov_slot_free(onyx_gov *gov, uint32_t index) {
  onyx__gov_slot *s = &gov->slots[index];
  s->kind = ONYX__GOV_SLOT_FREE;
  if (++s->gen == 0) s->gen = 1; /* id 0 stays "none" */
  s->next_free = gov->free_head;
  gov->free_head = index;
  gov->live_slots--;
}

onyx__gov_slot *onyx__gov_slot_find(onyx_gov *gov, onyx_gov_grant_id id, uint32_t *out_index) {
  uint32_t index = (uint32_t)(id.id & 0xffffffffu);
  if (index == 0 || index > gov->slot_cap) return NULL;
  onyx__gov_slot *s = &gov->slots[index - 1];
  if (s->kind == ONYX__GOV_SLOT_FREE || s->gen != (uint32_t)(id.id >> 32)) return NULL;
  if (out_index != NULL) *out_index = index - 1;
  return s;
}

onyx_gov_grant_id onyx__gov_slot_id(const onyx_gov *gov, uint32_t index) {
  onyx_gov_grant_id id = {((uint64_t)gov->slots[index].gen << 32) | (uint64_t)(index + 1)};
  return id;
}

static onyx_status new_slot(onyx_gov *gov, uint8_t kind, onyx_gov_tier tier, uint32_t r,
                            uint64_t bytes, const char *label, uint32_t *out_index) {
  uint32_t index = onyx__gov_slot_new(gov);
  if (index == UINT32_MAX) return ONYX_STATUS_OUT_OF_MEMORY;
  onyx__gov_slot *s = &gov->slots[index];
  s->kind = kind;
  s->tier = (uint8_t)tier;
  s->requester = (uint8_t)r;
  s->bytes = bytes;
  onyx__gov_copy_label(s->label, sizeof s->label, label);
  onyx__gov_charge(&gov->tiers[tier], r, bytes);
  gov->counters.grants++;
  *out_index = index;
  return ONYX_STATUS_OK;
}

onyx_status onyx_gov_grant(onyx_gov *gov, onyx_gov_tier tier, onyx_requester requester,
                           uint64_t bytes, const char *label, onyx_gov_grant_id *out_grant,
                           onyx_gov_refusal *out_refusal) {
  uint32_t r = (uint32_t)requester;
  if (gov == NULL || out_grant == NULL || r >= ONYX_REQUESTER_COUNT_)
    return ONYX_STATUS_INVALID_ARGUMENT;
  onyx__gov_lock(gov);
  onyx_status st = onyx__gov_tier_at(gov, tier) ? ONYX_STATUS_OK : ONYX_STATUS_INVALID_ARGUMENT;
  if (st == ONYX_STATUS_OK) st = onyx__gov_admit(gov, tier, r, bytes, out_refusal);
  uint32_t index = 0;
  if (st == ONYX_STATUS_OK) st = new_slot(gov, ONYX__GOV_SLOT_GRANT, tier, r, bytes, label, &index);
  if (st == ONYX_STATUS_OK) *out_grant = onyx__gov_slot_id(gov, index);
  onyx__gov_unlock(gov);
  return st;
}

/* Returns a plain or alloc slot's bytes and frees the slot. Lock held. */
static void drop_booking(onyx_gov *gov, uint32_t index) {
  onyx__gov_slot *s = &gov->slots[index];
  onyx__gov_holder_detach(gov, s);
  onyx__gov_uncharge(&gov->tiers[s->tier], s->requester, s->bytes);
  onyx__gov_slot_free(gov, index);
  gov->counters.releases++;
}

onyx_status onyx_gov_release(onyx_gov *gov, onyx_gov_grant_id grant) {
  if (gov == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  onyx__gov_lock(gov);
  uint32_t index = 0;
  onyx__gov_slot *s = onyx__gov_slot_find(gov, grant, &index);
  onyx_status st = ONYX_STATUS_OK;
  if (s == NULL || s->kind == ONYX__GOV_SLOT_ALLOC) {
    gov->counters.double_releases++;
    st = ONYX_STATUS_INVALID_ARGUMENT;
  } else if (s->kind == ONYX__GOV_SLOT_GROWTH) {
    if (s->committing) {
      st = ONYX_STATUS_INVALID_ARGUMENT; /* being committed on another thread */
    } else {
      onyx__gov_growth_unbook(gov, s);
      onyx__gov_slot_free(gov, index);
      gov->counters.releases++;
    }
  } else {
    drop_booking(gov, index);
  }
  onyx__gov_unlock(gov);
  return st;
}

onyx_status onyx_gov_grant_bytes(onyx_gov *gov, onyx_gov_grant_id grant, uint64_t *out_bytes) {
  if (gov == NULL || out_bytes == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  onyx__gov_lock(gov);
  const onyx__gov_slot *s = onyx__gov_slot_find(gov, grant, NULL);
  if (s != NULL) *out_bytes = s->bytes;
  onyx__gov_unlock(gov);
  return s != NULL ? ONYX_STATUS_OK : ONYX_STATUS_NOT_FOUND;
}

onyx_status onyx_gov_check(onyx_gov *gov, onyx_gov_tier tier, onyx_requester requester,
                           uint64_t bytes, onyx_gov_refusal *out_refusal) {
  uint32_t r = (uint32_t)requester;
  if (gov == NULL || r >= ONYX_REQUESTER_COUNT_) return ONYX_STATUS_INVALID_ARGUMENT;
  onyx__gov_lock(gov);
  onyx_status st = ONYX_STATUS_INVALID_ARGUMENT;
  if (onyx__gov_tier_at(gov, tier) != NULL)
    st = onyx__gov_would_fit(gov, tier, r, bytes, bytes, 0, out_refusal)
             ? ONYX_STATUS_OK
             : ONYX_STATUS_TIER_EXHAUSTED;
  onyx__gov_unlock(gov);
  return st;
}

/* ------------------------------------------------------------------ host memory */

onyx_status onyx_gov_alloc(onyx_gov *gov, onyx_gov_tier tier, onyx_requester requester,
                           uint64_t bytes, uint32_t alignment, const char *label, void **out_ptr,
                           onyx_gov_refusal *out_refusal) {
  uint32_t r = (uint32_t)requester;
  if (alignment == 0) alignment = 64;
  if (gov == NULL || out_ptr == NULL || r >= ONYX_REQUESTER_COUNT_ ||
      (alignment & (alignment - 1)) != 0 || bytes > SIZE_MAX - alignment)
    return ONYX_STATUS_INVALID_ARGUMENT;
  if (alignment < sizeof(void *)) alignment = sizeof(void *);

  /* Book first, so that a request the tier cannot hold is a typed refusal and never
   * an allocation failure; allocate outside the lock. */
  onyx__gov_lock(gov);
  onyx_status st = onyx__gov_tier_at(gov, tier) ? ONYX_STATUS_OK : ONYX_STATUS_INVALID_ARGUMENT;
  if (st == ONYX_STATUS_OK) st = onyx__gov_admit(gov, tier, r, bytes, out_refusal);
  uint32_t index = 0;
  if (st == ONYX_STATUS_OK) st = new_slot(gov, ONYX__GOV_SLOT_ALLOC, tier, r, bytes, label, &index);
  onyx__gov_unlock(gov);
  if (st != ONYX_STATUS_OK) return st;

  void *ptr = NULL;
  if (posix_memalign(&ptr, alignment, bytes ? (size_t)bytes : 1) != 0) ptr = NULL;
  onyx__gov_lock(gov);
  if (ptr != NULL && onyx__gov_ptrmap_put(&gov->ptrs, ptr, index)) {
    gov->slots[index].ptr = ptr;
  } else {
    drop_booking(gov, index);
    gov->counters.grants--; /* it never became a grant */
    gov->counters.releases--;
    st = ONYX_STATUS_OUT_OF_MEMORY;
  }
  onyx__gov_unlock(gov);
  if (st != ONYX_STATUS_OK) {
    free(ptr);
    return st;
  }
  *out_ptr = ptr;
  return ONYX_STATUS_OK;
}

onyx_status onyx_gov_free(onyx_gov *gov, void *ptr) {
  if (ptr == NULL) return ONYX_STATUS_OK;
  if (gov == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  onyx__gov_lock(gov);
  uint32_t index = 0;
  bool known = onyx__gov_ptrmap_take(&gov->ptrs, ptr, &index);
  if (known)
    drop_booking(gov, index);
  else
    gov->counters.double_releases++;
  onyx__gov_unlock(gov);
  if (!known) return ONYX_STATUS_INVALID_ARGUMENT;
  free(ptr);
  return ONYX_STATUS_OK;
}
