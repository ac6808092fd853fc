/*
 * Core memory: the governor books every byte; this file allocates behind the
 * booking. A grant is taken first (refusal = TIER_EXHAUSTED with the governor's
 * numbers, before any memory is touched), then the memory; failing that, the grant
 * is released. Each live allocation is remembered by address in an open-addressing
 * table so that free needs nothing but the pointer (the host table's mem_free has
 * nothing else).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checked_math.h"
#include "error_impl.h"
#include "memory_impl.h"
#include "onyx_governor.h"
#include "provider_impl.h"

typedef struct allocation {
  void *ptr;                /* NULL: empty slot; TOMBSTONE: deleted */
  onyx_gov_grant_id grant;  /* the booking of a plain allocation */
  onyx__provider *provider; /* NULL for host memory */
  onyx_gov_grant_id *parts; /* a block booked in parts: its grants (heap), else NULL */
  uint32_t part_count;
} allocation;

static char tombstone_;
#define TOMBSTONE ((void *)&tombstone_)

struct onyx__memory {
  onyx_gov *gov;
  onyx_gov_tier host_tier;
  const onyx__config *config;
  pthread_mutex_t lock; /* guards the table; the governor has its own */
  allocation *slots;
  size_t capacity; /* power of two */
  size_t live, deleted;
};

const char *onyx__requester_name(uint32_t r) { return onyx_gov_requester_name(r); }

/* Device memory is allocated and freed in the order of the provider's stream: both
 * hold the stream lock shared, so that neither lands in another thread's capture. */
static onyx_status dev_alloc(onyx__provider *p, uint64_t bytes, void **out) {
  onyx__stream_enter(p);
  onyx_status st = onyx__dev_alloc(p, bytes, out);
  onyx__stream_leave(p);
  return st;
}

static void dev_free(onyx__provider *p, void *ptr) {
  onyx__stream_enter(p);
  onyx__dev_free(p, ptr);
  onyx__stream_leave(p);
}

static size_t hash_ptr(const void *p, size_t cap) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return (size_t)x & (cap - 1);
}

static bool table_grow(onyx__memory *m) {
  size_t cap = m->capacity ? m->capacity * 2 : 256;
  allocation *slots = calloc(cap, sizeof *slots);
  if (slots == NULL) return false;
  for (size_t i = 0; i < m->capacity; ++i) {
    allocation a = m->slots[i];
    if (a.ptr == NULL || a.ptr == TOMBSTONE) continue;
    size_t h = hash_ptr(a.ptr, cap);
    while (slots[h].ptr != NULL) h = (h + 1) & (cap - 1);
    slots[h] = a;
  }
  free(m->slots);
  m->slots = slots;
  m->capacity = cap;
  m->deleted = 0;
  return true;
}

/* Remembers a live allocation by its address; false when the table cannot grow. */
static bool table_insert(onyx__memory *m, allocation a) {
  pthread_mutex_lock(&m->lock);
  bool ok = (m->live + m->deleted + 1) * 2 <= m->capacity || table_grow(m);
  if (ok) {
    size_t h = hash_ptr(a.ptr, m->capacity);
    while (m->slots[h].ptr != NULL && m->slots[h].ptr != TOMBSTONE) h = (h + 1) & (m->capacity - 1);
    if (m->slots[h].ptr == TOMBSTONE) m->deleted--;
    m->slots[h] = a;
    m->live++;
  }
  pthread_mutex_unlock(&m->lock);
  return ok;
}

/* The configured limit of a tier, or `fallback` when plugins.ini sets none. */
static uint64_t configured_limit(const onyx__config *c, const char *tier, uint64_t fallback) {
  for (size_t i = 0; c && i < c->tier_count; ++i)
    if (!strcmp(c->tiers[i].tier, tier)) return c->tiers[i].bytes;
  return fallback;
}

onyx_status onyx__memory_tier(onyx__memory *m, const char *name, uint64_t default_limit,
                              uint32_t *out_tier) {
  onyx_gov_tier t;
  if (onyx_gov_tier_find(m->gov, name, &t) == ONYX_STATUS_OK) {
    *out_tier = t;
    return ONYX_STATUS_OK;
  }
  onyx_status st =
      onyx_gov_tier_add(m->gov, name, configured_limit(m->config, name, default_limit), &t);
  for (int r = 0; st == ONYX_STATUS_OK && r < ONYX_REQUESTER_COUNT_; ++r)
    if (m->config && m->config->requester_limits[r])
      st = onyx_gov_requester_set_limit(m->gov, t, (onyx_requester)r,
                                        m->config->requester_limits[r]);
  if (st == ONYX_STATUS_OK) *out_tier = t;
  return st;
}

onyx_status onyx__memory_create(const onyx__config *config, onyx__memory **out, char *err,
                                size_t err_cap) {
  onyx__memory *m = calloc(1, sizeof *m);
  if (m == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  pthread_mutex_init(&m->lock, NULL);
  m->config = config;
  onyx_status st = onyx_gov_create(&m->gov);
  /* Without a configured limit the host tier is the machine's physical memory. */
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t ram = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : UINT64_MAX / 2;
  if (st == ONYX_STATUS_OK) st = onyx__memory_tier(m, "host", ram, &m->host_tier);
  if (st != ONYX_STATUS_OK) {
    onyx__errf(err, err_cap, "memory governor: cannot set up the host tier: %s",
               onyx_status_str(st));
    onyx__memory_destroy(m);
    return st;
  }
  *out = m;
  return ONYX_STATUS_OK;
}

void onyx__memory_destroy(onyx__memory *m) {
  if (m == NULL) return;
  for (size_t i = 0; i < m->capacity; ++i) {
    allocation *a = &m->slots[i];
    if (a->ptr == NULL || a->ptr == TOMBSTONE) continue;
    /* Device blocks cannot be returned once their provider is closed: report them. */
    uint64_t bytes = 0, part = 0;
    if (a->parts == NULL) onyx_gov_grant_bytes(m->gov, a->grant, &bytes);
    for (uint32_t k = 0; k < a->part_count; ++k)
      if (onyx_gov_grant_bytes(m->gov, a->parts[k], &part) == ONYX_STATUS_OK) bytes += part;
    onyx__log(ONYX_LOG_WARN, "memory: %llu bytes still allocated at shutdown",
              (unsigned long long)bytes);
    if (a->provider == NULL) free(a->ptr);
    free(a->parts);
  }
  free(m->slots);
  onyx_gov_destroy(m->gov);
  pthread_mutex_destroy(&m->lock);
  free(m);
}

onyx_gov *onyx__memory_governor(onyx__memory *m) { return m->gov; }

onyx_status onyx__memory_cap_tier(onyx__memory *m, uint32_t tier, uint64_t bytes) {
  onyx_gov_tier_usage u;
  onyx_status st = onyx_gov_tier_usage_get(m->gov, tier, &u);
  if (st == ONYX_STATUS_OK && bytes < u.limit) st = onyx_gov_tier_set_limit(m->gov, tier, bytes);
  return st;
}

uint32_t onyx__memory_tier_of(const onyx__memory *m, const struct onyx__provider *p) {
  return !onyx__dev_is_host(p) ? p->gov_tier : m->host_tier;
}

onyx_status onyx__memory_alloc(onyx__memory *m, onyx__provider *provider, uint32_t requester,
                               uint64_t bytes, uint32_t alignment, const char *label,
                               void **out_ptr, char *err, size_t err_cap) {
  if (requester >= ONYX_REQUESTER_COUNT_) return ONYX_STATUS_INVALID_ARGUMENT;
  if (alignment == 0) alignment = 64;
  if ((alignment & (alignment - 1)) != 0) return ONYX_STATUS_INVALID_ARGUMENT;
  if (alignment < sizeof(void *)) alignment = sizeof(void *);
  bool device = !onyx__dev_is_host(provider);
  uint64_t rounded = bytes == 0 ? alignment : (bytes + alignment - 1) / alignment * alignment;
  if (rounded < bytes || rounded > SIZE_MAX) {
    onyx__errf(err, err_cap, "allocation of %llu bytes for %s overflows", (unsigned long long)bytes,
               label ? label : "?");
    return ONYX_STATUS_OUT_OF_MEMORY;
  }
  onyx_gov_grant_id grant;
  onyx_gov_refusal refusal;
  onyx_status st = onyx_gov_grant(m->gov, onyx__memory_tier_of(m, provider),
                                  (onyx_requester)requester, rounded, label, &grant, &refusal);
  if (st != ONYX_STATUS_OK) {
    char numbers[512];
    onyx_gov_refusal_format(&refusal, numbers, sizeof numbers);
    onyx__errf(err, err_cap, "%s (for %s)", numbers, label ? label : "?");
    return st;
  }
  void *ptr = NULL;
  if (device) {
    if (dev_alloc(provider, rounded, &ptr) != ONYX_STATUS_OK) ptr = NULL;
  } else {
    ptr = aligned_alloc(alignment, (size_t)rounded);
  }
  bool stored =
      ptr != NULL &&
      table_insert(m,
                   (allocation){.ptr = ptr, .grant = grant, .provider = device ? provider : NULL});
  if (!stored) {
    if (ptr && device)
      dev_free(provider, ptr);
    else
      free(ptr);
    onyx_gov_release(m->gov, grant);
    onyx__errf(err, err_cap,
               "out of memory: %llu bytes for %s (%s) on %s, granted but the "
               "allocation failed",
               (unsigned long long)rounded, onyx__requester_name(requester), label ? label : "?",
               device ? provider->tier : "host");
    return ONYX_STATUS_OUT_OF_MEMORY;
  }
  *out_ptr = ptr;
  return ONYX_STATUS_OK;
}

onyx_status onyx__memory_alloc_parts(onyx__memory *m, onyx__provider *provider, uint32_t requester,
                                     uint32_t alignment, const onyx__memory_part *parts,
                                     size_t part_count, void **out_ptr, char *err, size_t err_cap) {
  if (requester >= ONYX_REQUESTER_COUNT_ || (part_count && parts == NULL))
    return ONYX_STATUS_INVALID_ARGUMENT;
  if (alignment == 0) alignment = 64;
  if ((alignment & (alignment - 1)) != 0) return ONYX_STATUS_INVALID_ARGUMENT;
  if (alignment < sizeof(void *)) alignment = sizeof(void *);
  bool device = !onyx__dev_is_host(provider);
  uint64_t total = 0;
  uint32_t live = 0;
  for (size_t i = 0; i < part_count; ++i) {
    if (parts[i].bytes == 0) continue;
    if (onyx__ckd_add_u64(&total, total, parts[i].bytes) || total > SIZE_MAX) {
      onyx__errf(err, err_cap, "a block of %zu parts overflows", part_count);
      return ONYX_STATUS_OUT_OF_MEMORY;
    }
    live++;
  }
  if (total == 0) return ONYX_STATUS_INVALID_ARGUMENT;
  /* The whole block first: a refusal names the bytes the caller really needs, and
   * no part is booked for a block that cannot be had. */
  onyx_gov_tier tier = onyx__memory_tier_of(m, provider);
  onyx_gov_refusal refusal;
  char numbers[512];
  onyx_status st = onyx_gov_check(m->gov, tier, (onyx_requester)requester, total, &refusal);
  if (st != ONYX_STATUS_OK) {
    onyx_gov_refusal_format(&refusal, numbers, sizeof numbers);
    const char *first = "?";
    for (size_t i = 0; i < part_count; ++i)
      if (parts[i].bytes) {
        first = parts[i].label ? parts[i].label : "?";
        break;
      }
    if (live == 1)
      onyx__errf(err, err_cap, "%s (for %s)", numbers, first);
    else
      onyx__errf(err, err_cap, "%s (for %s and %u more parts of the block)", numbers, first,
                 live - 1);
    return st;
  }
  onyx_gov_grant_id *ids = calloc(live, sizeof *ids);
  if (ids == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  uint32_t granted = 0;
  for (size_t i = 0; i < part_count && st == ONYX_STATUS_OK; ++i) {
    if (parts[i].bytes == 0) continue;
    st = onyx_gov_grant(m->gov, tier, (onyx_requester)requester, parts[i].bytes, parts[i].label,
                        &ids[granted], &refusal);
    if (st == ONYX_STATUS_OK)
      granted++;
    else {
      onyx_gov_refusal_format(&refusal, numbers, sizeof numbers);
      onyx__errf(err, err_cap, "%s (for %s, part of a %llu-byte block)", numbers,
                 parts[i].label ? parts[i].label : "?", (unsigned long long)total);
    }
  }
  void *ptr = NULL;
  if (st == ONYX_STATUS_OK) {
    if (device) {
      if (dev_alloc(provider, total, &ptr) != ONYX_STATUS_OK) ptr = NULL;
      if (ptr && ((uintptr_t)ptr & (alignment - 1)) != 0) {
        dev_free(provider, ptr);
        ptr = NULL;
        onyx__errf(err, err_cap, "provider '%s' returned device memory aligned below %u bytes",
                   provider->name, alignment);
        st = ONYX_STATUS_PROVIDER_ERROR;
      }
    } else if (posix_memalign(&ptr, alignment, (size_t)total) != 0) {
      ptr = NULL;
    }
    if (st == ONYX_STATUS_OK && ptr == NULL) {
      onyx__errf(err, err_cap,
                 "out of memory: %llu bytes for %s (%s) on %s, granted but the "
                 "allocation failed",
                 (unsigned long long)total, onyx__requester_name(requester),
                 parts[0].label ? parts[0].label : "?", device ? provider->tier : "host");
      st = ONYX_STATUS_OUT_OF_MEMORY;
    }
  }
  if (st == ONYX_STATUS_OK && !table_insert(m, (allocation){.ptr = ptr,
                                                            .provider = device ? provider : NULL,
                                                            .parts = ids,
                                                            .part_count = granted})) {
    if (device)
      dev_free(provider, ptr);
    else
      free(ptr);
    onyx__errf(err, err_cap, "out of memory: cannot record a %llu-byte block",
               (unsigned long long)total);
    st = ONYX_STATUS_OUT_OF_MEMORY;
  }
  if (st != ONYX_STATUS_OK) {
    for (uint32_t k = 0; k < granted; ++k) onyx_gov_release(m->gov, ids[k]);
    free(ids);
    return st;
  }
  *out_ptr = ptr;
  return ONYX_STATUS_OK;
}

void onyx__memory_free(onyx__memory *m, void *ptr) {
  if (m == NULL || ptr == NULL) return;
  pthread_mutex_lock(&m->lock);
  size_t h = hash_ptr(ptr, m->capacity);
  for (size_t probes = 0; probes < m->capacity; ++probes, h = (h + 1) & (m->capacity - 1)) {
    allocation *a = &m->slots[h];
    if (a->ptr == NULL) break;
    if (a->ptr != ptr) continue;
    allocation found = *a;
    a->ptr = TOMBSTONE;
    m->live--;
    m->deleted++;
    pthread_mutex_unlock(&m->lock);
    if (found.provider)
      dev_free(found.provider, ptr);
    else
      free(ptr);
    if (found.parts == NULL) onyx_gov_release(m->gov, found.grant);
    for (uint32_t k = 0; k < found.part_count; ++k) onyx_gov_release(m->gov, found.parts[k]);
    free(found.parts);
    return;
  }
  pthread_mutex_unlock(&m->lock);
  onyx__log(ONYX_LOG_ERROR, "memory: free of %p, which the core did not allocate", ptr);
}

/* The table slot of a live plain (single-grant) host allocation, or NULL. Called
 * with the lock held. */
static allocation *find_plain_host(onyx__memory *m, const void *ptr) {
  size_t h = hash_ptr(ptr, m->capacity);
  for (size_t probes = 0; m->capacity && probes < m->capacity;
       ++probes, h = (h + 1) & (m->capacity - 1)) {
    allocation *a = &m->slots[h];
    if (a->ptr == NULL) break;
    if (a->ptr == ptr) return a->provider == NULL && a->parts == NULL ? a : NULL;
  }
  return NULL;
}

onyx_status onyx__memory_rebook(onyx__memory *m, void *ptr, uint32_t requester, const char *label,
                                char *err, size_t err_cap) {
  if (m == NULL || ptr == NULL || requester >= ONYX_REQUESTER_COUNT_)
    return ONYX_STATUS_INVALID_ARGUMENT;
  pthread_mutex_lock(&m->lock);
  allocation *a = find_plain_host(m, ptr);
  onyx_gov_grant_id old = a ? a->grant : (onyx_gov_grant_id){0};
  pthread_mutex_unlock(&m->lock);
  uint64_t bytes = 0;
  if (a == NULL || onyx_gov_grant_bytes(m->gov, old, &bytes) != ONYX_STATUS_OK) {
    onyx__errf(err, err_cap, "memory: rebook of %p, which is not a host block the core allocated",
               ptr);
    return ONYX_STATUS_NOT_FOUND;
  }
  /* Given back first, then asked for like any new block: the books never count the
   * bytes twice, and a limit lowered meanwhile refuses the new owner. */
  onyx_gov_release(m->gov, old);
  onyx_gov_grant_id grant;
  onyx_gov_refusal refusal;
  onyx_status st = onyx_gov_grant(m->gov, m->host_tier, (onyx_requester)requester, bytes, label,
                                  &grant, &refusal);
  pthread_mutex_lock(&m->lock);
  a = find_plain_host(m, ptr); /* again: the table may have grown meanwhile */
  if (a != NULL && st == ONYX_STATUS_OK) {
    a->grant = grant;
  } else if (a != NULL) {
    a->ptr = TOMBSTONE; /* unbooked now: the block goes */
    m->live--;
    m->deleted++;
  }
  pthread_mutex_unlock(&m->lock);
  if (st != ONYX_STATUS_OK) {
    free(ptr);
    char numbers[512];
    onyx_gov_refusal_format(&refusal, numbers, sizeof numbers);
    onyx__errf(err, err_cap, "%s (for %s)", numbers, label ? label : "?");
  }
  return st;
}

void *onyx__memory_detach(onyx__memory *m, void *ptr) {
  if (m == NULL || ptr == NULL) return NULL;
  pthread_mutex_lock(&m->lock);
  allocation *a = find_plain_host(m, ptr);
  onyx_gov_grant_id grant = a ? a->grant : (onyx_gov_grant_id){0};
  if (a != NULL) {
    a->ptr = TOMBSTONE;
    m->live--;
    m->deleted++;
  }
  pthread_mutex_unlock(&m->lock);
  if (a == NULL) return NULL;
  onyx_gov_release(m->gov, grant);
  return ptr;
}

onyx_status onyx__memory_adopt(onyx__memory *m, void *ptr, onyx_gov_holder_id holder) {
  if (m == NULL || ptr == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  pthread_mutex_lock(&m->lock);
  allocation found = {0};
  size_t h = hash_ptr(ptr, m->capacity);
  for (size_t probes = 0; m->capacity && probes < m->capacity;
       ++probes, h = (h + 1) & (m->capacity - 1)) {
    if (m->slots[h].ptr == NULL) break;
    if (m->slots[h].ptr == ptr) {
      found = m->slots[h];
      break;
    }
  }
  pthread_mutex_unlock(&m->lock);
  if (found.ptr == NULL) return ONYX_STATUS_NOT_FOUND;
  onyx_status st = ONYX_STATUS_OK;
  if (found.parts == NULL) st = onyx_gov_holder_adopt(m->gov, holder, found.grant);
  for (uint32_t k = 0; k < found.part_count && st == ONYX_STATUS_OK; ++k)
    st = onyx_gov_holder_adopt(m->gov, holder, found.parts[k]);
  return st;
}

void onyx__memory_usage(const onyx__memory *m, uint64_t used[ONYX_REQUESTER_COUNT_],
                        uint64_t peak[ONYX_REQUESTER_COUNT_]) {
  for (int r = 0; r < ONYX_REQUESTER_COUNT_; ++r) {
    if (used) used[r] = 0;
    if (peak) peak[r] = 0;
  }
  for (onyx_gov_tier t = 0; t < ONYX_GOV_MAX_TIERS; ++t) {
    for (int r = 0; r < ONYX_REQUESTER_COUNT_; ++r) {
      onyx_gov_requester_usage u;
      if (onyx_gov_requester_usage_get(m->gov, t, (onyx_requester)r, &u) != ONYX_STATUS_OK) break;
      if (used) used[r] += u.used;
      if (peak) peak[r] += u.peak;
    }
  }
}

onyx_status onyx__memory_check(onyx__memory *m, uint32_t tier, uint32_t requester, uint64_t bytes,
                               char *err, size_t err_cap) {
  onyx_gov_refusal refusal;
  onyx_status st = onyx_gov_check(m->gov, tier, (onyx_requester)requester, bytes, &refusal);
  if (st != ONYX_STATUS_OK) onyx_gov_refusal_format(&refusal, err, err_cap);
  return st;
}

void onyx__memory_write_json(const onyx__memory *m, FILE *f) { onyx_gov_snapshot_write(m->gov, f); }
