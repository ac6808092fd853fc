/*
 * Core memory: allocation plus booking. Each live allocation is remembered by its
 * address in an open-addressing table so that free needs nothing but the pointer
 * (the host table's mem_free has nothing else).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "error_impl.h"
#include "memory_impl.h"
#include "provider_impl.h"

typedef struct allocation {
  void *ptr; /* NULL: empty slot; TOMBSTONE: deleted */
  uint64_t bytes;
  uint32_t requester;
  onyx__provider *provider; /* NULL for host memory */
} allocation;

static char tombstone_;
#define TOMBSTONE ((void *)&tombstone_)

struct onyx__memory {
  pthread_mutex_t lock;
  allocation *slots;
  size_t capacity; /* power of two */
  size_t live, deleted;
  uint64_t used[ONYX_REQUESTER_COUNT_];
  uint64_t peak[ONYX_REQUESTER_COUNT_];
  uint64_t host_limit; /* 0 = no limit */
  uint64_t host_used;
  uint64_t requester_limit[ONYX_REQUESTER_COUNT_];
  uint64_t grants, refusals;
};

static const char *requester_names[ONYX_REQUESTER_COUNT_] = {
    "weights", "kv_cache", "workspace_session", "workspace_step", "activations"};

const char *onyx__requester_name(uint32_t r) {
  return r < ONYX_REQUESTER_COUNT_ ? requester_names[r] : "unknown";
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

onyx_status onyx__memory_create(const onyx__config *config, onyx__memory **out, char *err,
                                size_t err_cap) {
  (void)err;
  (void)err_cap;
  onyx__memory *m = calloc(1, sizeof *m);
  if (m == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  pthread_mutex_init(&m->lock, NULL);
  if (config) {
    for (size_t i = 0; i < config->tier_count; ++i)
      if (!strcmp(config->tiers[i].tier, "host")) m->host_limit = config->tiers[i].bytes;
    memcpy(m->requester_limit, config->requester_limits, sizeof m->requester_limit);
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
    onyx__log(ONYX_LOG_WARN, "memory: %llu bytes of %s still allocated at shutdown",
              (unsigned long long)a->bytes, onyx__requester_name(a->requester));
    if (a->provider == NULL) free(a->ptr);
  }
  free(m->slots);
  pthread_mutex_destroy(&m->lock);
  free(m);
}

onyx_status onyx__memory_alloc(onyx__memory *m, onyx__provider *provider, uint32_t requester,
                               uint64_t bytes, uint32_t alignment, const char *label,
                               void **out_ptr, char *err, size_t err_cap) {
  if (requester >= ONYX_REQUESTER_COUNT_) return ONYX_STATUS_INVALID_ARGUMENT;
  if (alignment == 0) alignment = 64;
  if ((alignment & (alignment - 1)) != 0) return ONYX_STATUS_INVALID_ARGUMENT;
  if (alignment < sizeof(void *)) alignment = sizeof(void *);
  bool device = provider && provider->table->device != ONYX_DEVICE_HOST;
  uint64_t rounded = bytes == 0 ? alignment : (bytes + alignment - 1) / alignment * alignment;
  if (rounded < bytes || rounded > SIZE_MAX) {
    onyx__errf(err, err_cap, "allocation of %llu bytes for %s overflows",
               (unsigned long long)bytes, label ? label : "?");
    return ONYX_STATUS_OUT_OF_MEMORY;
  }
  pthread_mutex_lock(&m->lock);
  uint64_t rlimit = m->requester_limit[requester];
  bool over_tier = !device && m->host_limit && m->host_used + rounded > m->host_limit;
  bool over_req = rlimit && m->used[requester] + rounded > rlimit;
  if (over_tier || over_req) {
    m->refusals++;
    onyx__errf(err, err_cap,
               "tier %s exhausted: requested %llu bytes for %s (%s), limit %llu, used %llu",
               device ? provider->tier : "host", (unsigned long long)rounded,
               requester_names[requester], label ? label : "?",
               (unsigned long long)(over_req ? rlimit : m->host_limit),
               (unsigned long long)(over_req ? m->used[requester] : m->host_used));
    pthread_mutex_unlock(&m->lock);
    return ONYX_STATUS_TIER_EXHAUSTED;
  }
  if ((m->live + m->deleted + 1) * 2 > m->capacity && !table_grow(m)) {
    pthread_mutex_unlock(&m->lock);
    return ONYX_STATUS_OUT_OF_MEMORY;
  }
  void *ptr = NULL;
  if (device) {
    onyx_status st = provider->table->device_alloc(provider->state, rounded, &ptr);
    if (st != ONYX_STATUS_OK || ptr == NULL) ptr = NULL;
  } else {
    ptr = aligned_alloc(alignment, (size_t)rounded);
  }
  if (ptr == NULL) {
    m->refusals++;
    pthread_mutex_unlock(&m->lock);
    onyx__errf(err, err_cap, "out of memory: %llu bytes for %s (%s) on %s",
               (unsigned long long)rounded, requester_names[requester], label ? label : "?",
               device ? provider->tier : "host");
    return ONYX_STATUS_OUT_OF_MEMORY;
  }
  size_t h = hash_ptr(ptr, m->capacity);
  while (m->slots[h].ptr != NULL && m->slots[h].ptr != TOMBSTONE) h = (h + 1) & (m->capacity - 1);
  if (m->slots[h].ptr == TOMBSTONE) m->deleted--;
  m->slots[h] = (allocation){ptr, rounded, requester, device ? provider : NULL};
  m->live++;
  m->grants++;
  m->used[requester] += rounded;
  if (!device) m->host_used += rounded;
  if (m->used[requester] > m->peak[requester]) m->peak[requester] = m->used[requester];
  pthread_mutex_unlock(&m->lock);
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
    m->used[found.requester] -= found.bytes;
    if (found.provider == NULL) m->host_used -= found.bytes;
    pthread_mutex_unlock(&m->lock);
    if (found.provider)
      found.provider->table->device_free(found.provider->state, ptr);
    else
      free(ptr);
    return;
  }
  pthread_mutex_unlock(&m->lock);
  onyx__log(ONYX_LOG_ERROR, "memory: free of %p, which the core did not allocate", ptr);
}

void onyx__memory_usage(const onyx__memory *m, uint64_t used[ONYX_REQUESTER_COUNT_],
                        uint64_t peak[ONYX_REQUESTER_COUNT_]) {
  onyx__memory *mm = (onyx__memory *)(uintptr_t)m;
  pthread_mutex_lock(&mm->lock);
  for (int r = 0; r < ONYX_REQUESTER_COUNT_; ++r) {
    if (used) used[r] = m->used[r];
    if (peak) peak[r] = m->peak[r];
  }
  pthread_mutex_unlock(&mm->lock);
}

void onyx__memory_write_json(const onyx__memory *m, FILE *f) {
  uint64_t used[ONYX_REQUESTER_COUNT_], peak[ONYX_REQUESTER_COUNT_];
  onyx__memory_usage(m, used, peak);
  fprintf(f, "{\"requesters\": {");
  for (int r = 0; r < ONYX_REQUESTER_COUNT_; ++r)
    fprintf(f, "%s\"%s\": {\"used\": %llu, \"peak\": %llu}", r ? ", " : "", requester_names[r],
            (unsigned long long)used[r], (unsigned long long)peak[r]);
  fprintf(f, "}}\n");
}
