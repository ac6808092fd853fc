/*
 * Address → grant slot map for onyx_gov_free, which gets nothing but the pointer.
 * Open addressing with linear probing and backward-shift deletion, so there are no
 * tombstones to sweep; kept at most half full.
 */
#include <stdlib.h>

#include "gov_impl.h"

static size_t hash_ptr(const void *p, size_t cap) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return (size_t)x & (cap - 1);
}

static bool rehash(onyx__gov_ptrmap *map, size_t cap) {
  void **keys = calloc(cap, sizeof *keys);
  uint32_t *vals = calloc(cap, sizeof *vals);
  if (keys == NULL || vals == NULL) {
    free(keys);
    free(vals);
    return false;
  }
  for (size_t i = 0; i < map->cap; ++i) {
    if (map->keys[i] == NULL) continue;
    size_t h = hash_ptr(map->keys[i], cap);
    while (keys[h] != NULL) h = (h + 1) & (cap - 1);
    keys[h] = map->keys[i];
    vals[h] = map->vals[i];
  }
  free(map->keys);
  free(map->vals);
  map->keys = keys;
  map->vals = vals;
  map->cap = cap;
  return true;
}

bool onyx__gov_ptrmap_put(onyx__gov_ptrmap *map, void *key, uint32_t val) {
  if ((map->count + 1) * 2 > map->cap && !rehash(map, map->cap ? map->cap * 2 : 64)) return false;
  size_t h = hash_ptr(key, map->cap);
  while (map->keys[h] != NULL && map->keys[h] != key) h = (h + 1) & (map->cap - 1);
  if (map->keys[h] == NULL) map->count++;
  map->keys[h] = key;
  map->vals[h] = val;
  return true;
}

bool onyx__gov_ptrmap_take(onyx__gov_ptrmap *map, void *key, uint32_t *out_val) {
  if (map->cap == 0 || key == NULL) return false;
  size_t mask = map->cap - 1;
  size_t h = hash_ptr(key, map->cap);
  while (map->keys[h] != key) {
    if (map->keys[h] == NULL) return false;
    h = (h + 1) & mask;
  }
  *out_val = map->vals[h];
  /* Shift later members of the run back so that every key stays reachable from its
   * home slot without crossing an empty one. */
  size_t hole = h;
  for (size_t i = (h + 1) & mask; map->keys[i] != NULL; i = (i + 1) & mask) {
    size_t home = hash_ptr(map->keys[i], map->cap);
    bool movable = hole <= i ? (home <= hole || home > i) : (home <= hole && home > i);
    if (movable) {
      map->keys[hole] = map->keys[i];
      map->vals[hole] = map->vals[i];
      hole = i;
    }
  }
  map->keys[hole] = NULL;
  map->count--;
  return true;
}

void onyx__gov_ptrmap_free(onyx__gov_ptrmap *map) {
  free(map->keys);
  free(map->vals);
  map->keys = NULL;
  map->vals = NULL;
  map->cap = map->count = 0;
}
