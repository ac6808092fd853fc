/* Open-addressing hash maps for the vocabulary, the merges and the cache. Their hash
 * is keyed by a per-process random seed: a tokenizer.json is untrusted, and a fixed
 * hash would let a file pile its keys on one slot and make loading quadratic. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "tokenizer_impl.h"

__extension__ typedef unsigned __int128 onyx__tok_u128;

static inline uint64_t mum(uint64_t a, uint64_t b) {
  onyx__tok_u128 r = (onyx__tok_u128)a * b;
  return (uint64_t)r ^ (uint64_t)(r >> 64);
}

uint64_t onyx__tok_hash(const void *p, size_t n, uint64_t seed) {
  const unsigned char *s = p;
  uint64_t h = seed ^ mum(n ^ 0x9E3779B97F4A7C15ULL, 0xA0761D6478BD642FULL);
  while (n >= 8) {
    uint64_t v;
    memcpy(&v, s, 8);
    h = mum(h ^ v, 0xE7037ED1A0B428DBULL ^ seed);
    s += 8;
    n -= 8;
  }
  uint64_t v = 0;
  if (n) memcpy(&v, s, n);
  return mum(h ^ v ^ ((uint64_t)n << 59), 0x8EBC6AF09C88C6E3ULL);
}

static uint64_t seed_value;
static pthread_once_t seed_once = PTHREAD_ONCE_INIT;

static void seed_make(void) {
  uint64_t s = 0;
  if (getrandom(&s, sizeof s, GRND_NONBLOCK) != (ssize_t)sizeof s) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    s = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)getpid();
  }
  seed_value = s | 1;
}

uint64_t onyx__tok_seed(void) {
  pthread_once(&seed_once, seed_make);
  return seed_value;
}

/* ------------------------------------------------------------------ strings */

static uint32_t tag_of(uint64_t h) { return (uint32_t)(h >> 32) | 1; }

static bool strmap_grow(onyx__tok_strmap *m) {
  size_t cap = m->cap ? m->cap * 2 : 64;
  if (cap > SIZE_MAX / sizeof *m->slots) return false;
  struct onyx__tok_strslot *slots = calloc(cap, sizeof *slots);
  if (slots == NULL) return false;
  for (size_t i = 0; i < m->cap; ++i) {
    struct onyx__tok_strslot s = m->slots[i];
    if (s.tag == 0) continue;
    uint64_t h = onyx__tok_hash(m->keys.data + s.off, s.len, m->seed);
    size_t j = (size_t)h & (cap - 1);
    while (slots[j].tag) j = (j + 1) & (cap - 1);
    slots[j] = s;
  }
  free(m->slots);
  m->slots = slots;
  m->cap = cap;
  return true;
}

/* The slot of key, or the empty slot where it would go. */
static struct onyx__tok_strslot *strmap_find(const onyx__tok_strmap *m, const char *key, size_t len,
                                             uint64_t h) {
  uint32_t tag = tag_of(h);
  size_t mask = m->cap - 1;
  for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
    struct onyx__tok_strslot *s = &m->slots[i];
    if (s->tag == 0) return s;
    if (s->tag == tag && s->len == len && memcmp(m->keys.data + s->off, key, len) == 0) return s;
  }
}

bool onyx__tok_strmap_put(onyx__tok_strmap *m, const char *key, size_t len, uint32_t value,
                          bool *out_replaced) {
  if (len > UINT32_MAX - 1 || m->keys.len > UINT32_MAX - len - 1) return false;
  if (m->seed == 0) m->seed = onyx__tok_seed();
  if ((m->count + 1) * 4 > m->cap * 3 && !strmap_grow(m)) return false;
  uint64_t h = onyx__tok_hash(key, len, m->seed);
  struct onyx__tok_strslot *s = strmap_find(m, key, len, h);
  if (out_replaced) *out_replaced = s->tag != 0;
  if (s->tag) {
    s->value = value;
    return true;
  }
  uint32_t off = (uint32_t)m->keys.len;
  if (!onyx__tok_buf_add(&m->keys, key, len) || !onyx__tok_buf_add(&m->keys, "", 1)) return false;
  *s = (struct onyx__tok_strslot){
      .off = off, .len = (uint32_t)len, .value = value, .tag = tag_of(h)};
  m->count++;
  return true;
}

bool onyx__tok_strmap_get(const onyx__tok_strmap *m, const char *key, size_t len,
                          uint32_t *out_value) {
  if (m->count == 0) return false;
  const struct onyx__tok_strslot *s = strmap_find(m, key, len, onyx__tok_hash(key, len, m->seed));
  if (s->tag == 0) return false;
  *out_value = s->value;
  return true;
}

void onyx__tok_strmap_free(onyx__tok_strmap *m) {
  free(m->slots);
  onyx__tok_buf_free(&m->keys);
  *m = (onyx__tok_strmap){0};
}

/* ------------------------------------------------------------------ pairs */

static bool pairmap_grow(onyx__tok_pairmap *m) {
  size_t cap = m->cap ? m->cap * 2 : 64;
  if (cap > SIZE_MAX / sizeof *m->slots) return false;
  struct onyx__tok_pairslot *slots = malloc(cap * sizeof *slots);
  if (slots == NULL) return false;
  for (size_t i = 0; i < cap; ++i) slots[i].key = UINT64_MAX;
  for (size_t i = 0; i < m->cap; ++i) {
    if (m->slots[i].key == UINT64_MAX) continue;
    size_t j = onyx__tok_pair_mix(m->slots[i].key, m->seed) & (cap - 1);
    while (slots[j].key != UINT64_MAX) j = (j + 1) & (cap - 1);
    slots[j] = m->slots[i];
  }
  free(m->slots);
  m->slots = slots;
  m->cap = cap;
  return true;
}

bool onyx__tok_pairmap_put(onyx__tok_pairmap *m, uint32_t a, uint32_t b, uint32_t rank,
                           uint32_t merged) {
  if (m->seed == 0) m->seed = onyx__tok_seed();
  if ((m->count + 1) * 2 > m->cap && !pairmap_grow(m)) return false;
  uint64_t key = (uint64_t)a << 32 | b;
  size_t mask = m->cap - 1;
  size_t i = onyx__tok_pair_mix(key, m->seed) & mask;
  while (m->slots[i].key != UINT64_MAX && m->slots[i].key != key) i = (i + 1) & mask;
  if (m->slots[i].key == UINT64_MAX) m->count++;
  /* A pair listed twice keeps the later rank, as tokenizers' HashMap collect does. */
  m->slots[i] = (struct onyx__tok_pairslot){.key = key, .rank = rank, .merged = merged};
  return true;
}

void onyx__tok_pairmap_free(onyx__tok_pairmap *m) {
  free(m->slots);
  *m = (onyx__tok_pairmap){0};
}
