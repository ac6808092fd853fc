/*
 * Plans by input geometry. A plan is a function of what the planner reads: every
 * input's dtype, rank, dims and device, and the values of the inputs it carries as
 * known (small integer tensors on the host: shape arithmetic, lengths, masks). Those
 * are the key. The rest of what it reads is fixed when the session is created
 * (initializers, placement, kernel states, whose infer and workspace are pure by
 * the contract), except the session's SESSION blocks, which admission grows: a plan
 * taken from the cache has its SESSION numbers brought up to them
 * (onyx__plan_fit_session), the only part of a plan that depends on them.
 *
 * A hit skips every infer, shape-arithmetic evaluation and workspace call of the
 * geometry pass. A few keys are kept, the least recently used going first: a decode
 * loop changes geometry every step (its past grows), so there it misses; a prompt
 * or a model run again on the same geometry hits. The cached plans are host memory
 * of the session, not booked: they are small beside what a run books.
 *
 * Not thread-safe: a session runs on one thread at a time. A plan is borrowed by one
 * run; a run nested in it (a callback running the session again) builds its own.
 */
#include <stdlib.h>
#include <string.h>

#include "checked_math.h"
#include "plan_impl.h"

/* Geometries a session keeps plans for. */
#define PLAN_CACHE_MAX 4

typedef struct plan_entry {
  onyx_plan *plan;     /* NULL: the entry is free */
  onyx_tensor *key;    /* [inputs]: geometry, data NULL */
  unsigned char *data; /* the values of the inputs planning knows, one after another */
  size_t data_bytes;
  uint64_t last_used;
  bool in_use; /* borrowed by a run */
} plan_entry;

struct onyx__plan_cache {
  plan_entry entries[PLAN_CACHE_MAX];
  uint64_t clock;
  onyx__plan_cache_stats stats;
};

/* The bytes of input t that the key holds: its values where planning knows them. */
static size_t key_bytes(const onyx_tensor *t) {
  uint64_t bytes = 0;
  if (!onyx__plan_value_known(t) || onyx__ckd_tensor_bytes(&bytes, t)) return 0;
  return (size_t)bytes;
}

static bool same_geometry(const onyx_tensor *a, const onyx_tensor *b) {
  if (a->dtype != b->dtype || a->rank != b->rank || a->device != b->device ||
      a->device_id != b->device_id)
    return false;
  for (uint32_t d = 0; d < a->rank && d < ONYX_MAX_RANK; ++d)
    if (a->dims[d] != b->dims[d]) return false;
  return true;
}

static bool entry_matches(const plan_entry *e, const onyx_tensor *in, size_t n) {
  size_t at = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!same_geometry(&e->key[i], &in[i])) return false;
    size_t b = key_bytes(&in[i]);
    /* A known input of 0 bytes still differs from an unknown one. */
    bool known = onyx__plan_value_known(&in[i]);
    if (known != (e->key[i].data != NULL)) return false;
    if (b > e->data_bytes - at || (b && memcmp(e->data + at, in[i].data, b) != 0)) return false;
    at += b;
  }
  return at == e->data_bytes;
}

static void entry_clear(plan_entry *e) {
  onyx_plan_destroy(e->plan);
  free(e->key);
  free(e->data);
  memset(e, 0, sizeof *e);
}

/* Keeps `plan` under the key of `in` (it becomes the cache's); false when no entry
 * can take it (every one borrowed, or no memory for the key). */
static bool entry_store(onyx__plan_cache *c, onyx_plan *plan, const onyx_tensor *in, size_t n) {
  plan_entry *slot = NULL;
  for (size_t k = 0; k < PLAN_CACHE_MAX; ++k) {
    plan_entry *e = &c->entries[k];
    if (e->in_use) continue;
    if (e->plan == NULL) {
      slot = e;
      break;
    }
    if (slot == NULL || e->last_used < slot->last_used) slot = e;
  }
  if (slot == NULL) return false;
  size_t bytes = 0;
  for (size_t i = 0; i < n; ++i) bytes += key_bytes(&in[i]);
  onyx_tensor *key = calloc(n + 1, sizeof *key);
  unsigned char *data = malloc(bytes + 1);
  if (key == NULL || data == NULL) {
    free(key);
    free(data);
    return false;
  }
  if (slot->plan) c->stats.evictions++;
  entry_clear(slot);
  size_t at = 0;
  for (size_t i = 0; i < n; ++i) {
    size_t b = key_bytes(&in[i]);
    key[i] = in[i];
    /* data marks a known input; it points into the entry's own copy of the values */
    key[i].data = onyx__plan_value_known(&in[i]) ? data + at : NULL;
    if (b) memcpy(data + at, in[i].data, b);
    at += b;
  }
  *slot = (plan_entry){.plan = plan,
                       .key = key,
                       .data = data,
                       .data_bytes = bytes,
                       .last_used = ++c->clock,
                       .in_use = true};
  return true;
}

static plan_entry *entry_of(onyx__plan_cache *c, const onyx_plan *plan) {
  for (size_t k = 0; c && plan && k < PLAN_CACHE_MAX; ++k)
    if (c->entries[k].plan == plan) return &c->entries[k];
  return NULL;
}

onyx_status onyx__plan_acquire(onyx_session *s, const onyx_tensor *inputs, size_t input_count,
                               onyx_plan **out_plan, char *err, size_t err_cap) {
  if (s->plan_cache == NULL) s->plan_cache = calloc(1, sizeof *s->plan_cache);
  onyx__plan_cache *c = s->plan_cache;
  for (size_t k = 0; c && input_count == s->graph->input_count && k < PLAN_CACHE_MAX; ++k) {
    plan_entry *e = &c->entries[k];
    if (e->plan == NULL || e->in_use || !entry_matches(e, inputs, input_count)) continue;
    e->in_use = true;
    e->last_used = ++c->clock;
    c->stats.hits++;
    onyx__plan_fit_session(e->plan);
    *out_plan = e->plan;
    return ONYX_STATUS_OK;
  }
  onyx_plan *plan = NULL;
  onyx_status st = onyx__plan_build(s, inputs, input_count, &plan, err, err_cap);
  if (c) c->stats.builds++;
  if (st != ONYX_STATUS_OK) return st;
  /* Not kept: used by this run alone (onyx__plan_release destroys it). */
  if (c) (void)entry_store(c, plan, inputs, input_count);
  *out_plan = plan;
  return ONYX_STATUS_OK;
}

void onyx__plan_release(onyx_session *s, onyx_plan *plan) {
  plan_entry *e = entry_of(s->plan_cache, plan);
  if (e)
    e->in_use = false;
  else
    onyx_plan_destroy(plan);
}

void onyx__plan_cache_stats_get(const onyx_session *s, onyx__plan_cache_stats *out) {
  memset(out, 0, sizeof *out);
  if (s->plan_cache) *out = s->plan_cache->stats;
}

void onyx__plan_cache_free(onyx_session *s) {
  onyx__plan_cache *c = s->plan_cache;
  if (c == NULL) return;
  for (size_t k = 0; k < PLAN_CACHE_MAX; ++k) entry_clear(&c->entries[k]);
  free(c);
  s->plan_cache = NULL;
}
