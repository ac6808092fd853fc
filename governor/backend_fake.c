/*
 * Fake backend for tests: no memory behind it. It keeps a record of every mapped
 * granule so that a test can see leaks (live handles, mapped bytes, reservations),
 * protocol mistakes (unmapping what is not mapped, unmapping used memory without a
 * sync) and can fail the Nth call of any step of a growth.
 */
#include <stdlib.h>
#include <string.h>

#include "gov_impl.h"

typedef struct fake_granule {
  uintptr_t base;
  uint64_t offset, bytes;
  bool accessible;
} fake_granule;

struct onyx_gov_fake {
  onyx_gov_backend table;
  pthread_mutex_t mu;
  uint64_t granularity;
  uintptr_t next_base;
  uint32_t fail_in[ONYX_GOV_FAKE_OP_COUNT_]; /* countdown; 0 = none pending */
  bool dirty;                                /* set_access since the last sync */
  fake_granule *granules;
  size_t granule_count, granule_cap;
  onyx_gov_fake_stats stats;
};

/* Counts the call and says whether it is the one to fail. Lock held. */
static bool fake_call(onyx_gov_fake *f, onyx_gov_fake_op op) {
  f->stats.calls[op]++;
  return f->fail_in[op] != 0 && --f->fail_in[op] == 0;
}

static fake_granule *fake_find(onyx_gov_fake *f, void *base, uint64_t offset) {
  for (size_t i = 0; i < f->granule_count; ++i)
    if (f->granules[i].base == (uintptr_t)base && f->granules[i].offset == offset)
      return &f->granules[i];
  return NULL;
}

static onyx_status fake_granularity(void *state, uint64_t *out_bytes) {
  *out_bytes = ((onyx_gov_fake *)state)->granularity;
  return ONYX_STATUS_OK;
}

static onyx_status fake_reserve(void *state, uint64_t bytes, void **out_base) {
  onyx_gov_fake *f = state;
  pthread_mutex_lock(&f->mu);
  onyx_status st = ONYX_STATUS_OUT_OF_MEMORY;
  if (!fake_call(f, ONYX_GOV_FAKE_RESERVE)) {
    /* Distinct, aligned, never dereferenced; a 1 TiB stride keeps ranges apart. */
    *out_base = (void *)f->next_base;
    f->next_base += ((uintptr_t)1 << 40) + (uintptr_t)(bytes & ~(((uint64_t)1 << 40) - 1));
    f->stats.live_reservations++;
    st = ONYX_STATUS_OK;
  }
  pthread_mutex_unlock(&f->mu);
  return st;
}

static void fake_unreserve(void *state, void *base, uint64_t bytes) {
  onyx_gov_fake *f = state;
  (void)bytes;
  pthread_mutex_lock(&f->mu);
  for (size_t i = 0; i < f->granule_count; ++i)
    if (f->granules[i].base == (uintptr_t)base) f->stats.protocol_errors++; /* still mapped */
  if (f->stats.live_reservations == 0)
    f->stats.protocol_errors++;
  else
    f->stats.live_reservations--;
  pthread_mutex_unlock(&f->mu);
}

static onyx_status fake_create(void *state, uint64_t bytes, void **out_handle) {
  onyx_gov_fake *f = state;
  pthread_mutex_lock(&f->mu);
  onyx_status st = ONYX_STATUS_OUT_OF_MEMORY;
  if (!fake_call(f, ONYX_GOV_FAKE_CREATE)) {
    /* A real allocation, so a leaked handle shows up under LeakSanitizer too. */
    uint64_t *handle = malloc(sizeof *handle);
    if (handle != NULL) {
      *handle = bytes;
      *out_handle = handle;
      f->stats.live_handles++;
      st = ONYX_STATUS_OK;
    }
  }
  pthread_mutex_unlock(&f->mu);
  return st;
}

static void fake_release(void *state, void *handle, uint64_t bytes) {
  onyx_gov_fake *f = state;
  pthread_mutex_lock(&f->mu);
  if (handle == NULL || *(uint64_t *)handle != bytes) f->stats.protocol_errors++;
  if (handle != NULL) {
    free(handle);
    f->stats.live_handles--;
  }
  pthread_mutex_unlock(&f->mu);
}

static onyx_status fake_map(void *state, void *base, uint64_t offset, uint64_t bytes,
                            void *handle) {
  onyx_gov_fake *f = state;
  pthread_mutex_lock(&f->mu);
  onyx_status st = ONYX_STATUS_PROVIDER_ERROR;
  if (!fake_call(f, ONYX_GOV_FAKE_MAP)) {
    if (handle == NULL || fake_find(f, base, offset) != NULL) f->stats.protocol_errors++;
    if (f->granule_count == f->granule_cap) {
      size_t cap = f->granule_cap ? f->granule_cap * 2 : 64;
      fake_granule *g = realloc(f->granules, cap * sizeof *g);
      if (g == NULL) {
        pthread_mutex_unlock(&f->mu);
        return ONYX_STATUS_OUT_OF_MEMORY;
      }
      f->granules = g;
      f->granule_cap = cap;
    }
    fake_granule rec = {(uintptr_t)base, offset, bytes, false};
    f->granules[f->granule_count++] = rec;
    f->stats.mapped_bytes += bytes;
    st = ONYX_STATUS_OK;
  }
  pthread_mutex_unlock(&f->mu);
  return st;
}

static onyx_status fake_set_access(void *state, void *base, uint64_t offset, uint64_t bytes) {
  onyx_gov_fake *f = state;
  pthread_mutex_lock(&f->mu);
  onyx_status st = ONYX_STATUS_PROVIDER_ERROR;
  if (!fake_call(f, ONYX_GOV_FAKE_SET_ACCESS)) {
    fake_granule *g = fake_find(f, base, offset);
    if (g == NULL || g->bytes != bytes || g->accessible) {
      f->stats.protocol_errors++;
    } else {
      g->accessible = true;
      f->stats.accessible_bytes += bytes;
      f->dirty = true;
    }
    st = ONYX_STATUS_OK;
  }
  pthread_mutex_unlock(&f->mu);
  return st;
}

static void fake_unmap(void *state, void *base, uint64_t offset, uint64_t bytes) {
  onyx_gov_fake *f = state;
  pthread_mutex_lock(&f->mu);
  f->stats.unmaps++;
  fake_granule *g = fake_find(f, base, offset);
  if (g == NULL || g->bytes != bytes) {
    f->stats.protocol_errors++;
  } else {
    if (g->accessible) {
      f->stats.accessible_bytes -= bytes;
      if (f->dirty) f->stats.unsynced_unmaps++;
    }
    f->stats.mapped_bytes -= bytes;
    *g = f->granules[--f->granule_count];
  }
  pthread_mutex_unlock(&f->mu);
}

static onyx_status fake_sync(void *state) {
  onyx_gov_fake *f = state;
  pthread_mutex_lock(&f->mu);
  onyx_status st = ONYX_STATUS_PROVIDER_ERROR;
  if (!fake_call(f, ONYX_GOV_FAKE_SYNC)) {
    f->dirty = false;
    st = ONYX_STATUS_OK;
  }
  pthread_mutex_unlock(&f->mu);
  return st;
}

onyx_status onyx_gov_fake_create(uint64_t granularity, onyx_gov_fake **out_fake) {
  if (out_fake == NULL || granularity == 0 || (granularity & (granularity - 1)) != 0)
    return ONYX_STATUS_INVALID_ARGUMENT;
  onyx_gov_fake *f = calloc(1, sizeof *f);
  if (f == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  if (pthread_mutex_init(&f->mu, NULL) != 0) {
    free(f);
    return ONYX_STATUS_INTERNAL;
  }
  f->granularity = granularity;
  f->next_base = (uintptr_t)1 << 44;
  f->table.struct_size = (uint32_t)sizeof f->table;
  f->table.version = 1;
  f->table.name = "fake";
  f->table.state = f;
  f->table.granularity = fake_granularity;
  f->table.reserve = fake_reserve;
  f->table.unreserve = fake_unreserve;
  f->table.create = fake_create;
  f->table.release = fake_release;
  f->table.map = fake_map;
  f->table.set_access = fake_set_access;
  f->table.unmap = fake_unmap;
  f->table.sync = fake_sync;
  *out_fake = f;
  return ONYX_STATUS_OK;
}

void onyx_gov_fake_destroy(onyx_gov_fake *fake) {
  if (fake == NULL) return;
  free(fake->granules);
  pthread_mutex_destroy(&fake->mu);
  free(fake);
}

const onyx_gov_backend *onyx_gov_fake_backend(onyx_gov_fake *fake) {
  return fake != NULL ? &fake->table : NULL;
}

void onyx_gov_fake_fail_nth(onyx_gov_fake *fake, onyx_gov_fake_op op, uint32_t n) {
  if (fake == NULL || (uint32_t)op >= ONYX_GOV_FAKE_OP_COUNT_) return;
  pthread_mutex_lock(&fake->mu);
  fake->fail_in[op] = n;
  pthread_mutex_unlock(&fake->mu);
}

void onyx_gov_fake_stats_get(onyx_gov_fake *fake, onyx_gov_fake_stats *out_stats) {
  if (fake == NULL || out_stats == NULL) return;
  pthread_mutex_lock(&fake->mu);
  *out_stats = fake->stats;
  pthread_mutex_unlock(&fake->mu);
}
