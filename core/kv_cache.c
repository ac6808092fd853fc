/*
 * The governed KV cache.
 *
 * Each layer has a key and a value tensor with dims (B, Nkv, L, H); L, the token
 * stride, is fixed for the cache's life when it grows in place. A tensor splits into
 * `units` that grow independently — one per (batch, head) in BNSH, one per batch
 * row in BSNH, whose live prefix is dense — and each unit is a mapped zone. The
 * zones are consecutive slices of one reservation, so a tensor view spans them.
 * Committing t tokens maps ceil(t·row / granule) granules per unit: seq-major pays
 * a floor of one granule per batch row, head-major one per head.
 *
 * Where in-place growth is impossible (no virtual memory, or a granule that a token
 * row does not divide), buffers come from plain allocations in capacity buckets,
 * and growth copies each unit into the larger bucket.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checked_math.h"
#include "error_impl.h"
#include "memory_impl.h"
#include "zone_backends_impl.h"

/* Host zones grow in 64 KiB granules: fine enough that a small model's cache does
 * not commit megabytes per head. */
#define HOST_KV_GRANULE (UINT64_C(64) << 10)
#define MIN_BUCKET 64

struct onyx_kv_cache {
  onyx_runtime *runtime;
  onyx__provider *provider; /* NULL: host memory */
  onyx_kv_cache_options opt;
  uint32_t tensors;   /* 2 × layers */
  int64_t units;      /* independently growing parts per tensor */
  uint64_t row_bytes; /* bytes of one token within a unit */
  bool in_place;
  int64_t view_length; /* L of the views */
  int64_t capacity;    /* tokens usable now */
  uint64_t growth_events, bytes_moved;
  /* in place */
  onyx_gov_backend *parent; /* host or device VMM backend */
  bool parent_is_host;
  onyx__carve_backend carve;
  onyx_gov_zone **zones; /* tensors × units */
  uint64_t unit_bytes;   /* reserved bytes per unit (view_length × row_bytes) */
  /* realloc */
  void **buffers; /* tensors */
};

/* The copy path's capacity for `length` tokens: MIN_BUCKET doubled until it holds
 * them, never past `max` (doubling stops there rather than overflowing). */
static int64_t bucket_for(int64_t length, int64_t max) {
  int64_t bucket = MIN_BUCKET;
  while (bucket < length && bucket < max) bucket = bucket > max / 2 ? max : bucket * 2;
  return bucket < max ? bucket : max;
}

/* A provider by name (its first instance), or one instance by its device ("cuda:1"). */
static onyx__provider *find_provider(onyx_runtime *rt, const char *name) {
  for (size_t i = 0; name && i < rt->provider_count; ++i)
    if (!strcmp(rt->providers[i].name, name)) return &rt->providers[i];
  for (size_t i = 0; name && i < rt->provider_count; ++i)
    if (!strcmp(rt->providers[i].tier, name)) return &rt->providers[i];
  return NULL;
}

/* Sets up zones: returns false (and cleans up) when in-place growth is not possible. */
static bool setup_in_place(onyx_kv_cache *kv, char *err, size_t cap, onyx_status *st) {
  *st = ONYX_STATUS_OK;
  if (kv->provider) {
    kv->parent = onyx__vmm_backend_create(kv->provider);
  } else {
    kv->parent_is_host = true;
    if (onyx_gov_host_backend_create(HOST_KV_GRANULE, &kv->parent) != ONYX_STATUS_OK)
      kv->parent = NULL;
  }
  if (kv->parent == NULL) return false;
  uint64_t gran = 0;
  if (kv->parent->granularity(kv->parent->state, &gran) != ONYX_STATUS_OK || gran == 0 ||
      gran % kv->row_bytes != 0)
    return false; /* a token row must tile the granule for the strides to line up */
  /* max_length × row_bytes (unit_bytes) fit at create; rounding up to the granule may still
   * overflow, and a view shorter than max_length would let tokens land past it. */
  uint64_t slices = (uint64_t)kv->tensors * (uint64_t)kv->units, reserve = 0;
  if (onyx__ckd_round_up_u64(&kv->unit_bytes, kv->unit_bytes, gran) ||
      onyx__ckd_mul_u64(&reserve, kv->unit_bytes, slices) ||
      kv->unit_bytes / kv->row_bytes > (uint64_t)INT64_MAX) {
    *st = ONYX_STATUS_INVALID_ARGUMENT;
    onyx__errf(err, cap, "KV cache: %lld tokens of %llu-byte rows in %llu zones overflow 64 bits",
               (long long)kv->opt.max_length, (unsigned long long)kv->row_bytes,
               (unsigned long long)slices);
    return false;
  }
  kv->view_length = (int64_t)(kv->unit_bytes / kv->row_bytes);
  *st = onyx__carve_backend_init(&kv->carve, kv->parent, kv->unit_bytes, slices);
  if (*st != ONYX_STATUS_OK) {
    onyx__errf(err, cap, "KV cache: cannot reserve %llu bytes of address space",
               (unsigned long long)reserve);
    return false;
  }
  kv->zones = calloc(slices, sizeof *kv->zones);
  if (kv->zones == NULL) {
    *st = ONYX_STATUS_OUT_OF_MEMORY;
    return false;
  }
  onyx_gov *gov = onyx__memory_governor(kv->runtime->memory);
  uint32_t tier = onyx__memory_tier_of(kv->runtime->memory, kv->provider);
  for (uint64_t z = 0; z < slices; ++z) {
    char label[96];
    snprintf(label, sizeof label, "kv cache layer %llu %s unit %llu",
             (unsigned long long)(z / (uint64_t)kv->units / 2),
             (z / (uint64_t)kv->units) % 2 ? "value" : "key",
             (unsigned long long)(z % (uint64_t)kv->units));
    onyx_gov_zone_desc d = {.struct_size = sizeof d,
                            .version = 1,
                            .tier = tier,
                            .requester = ONYX_REQUESTER_KV_CACHE,
                            .backend = &kv->carve.table,
                            .max_bytes = kv->unit_bytes,
                            .allowance_bytes = 0,
                            .label = label};
    onyx_gov_refusal refusal;
    *st = onyx_gov_zone_create(gov, &d, &kv->zones[z], &refusal);
    if (*st != ONYX_STATUS_OK) {
      onyx__errf(err, cap, "KV cache: cannot create zone %llu: %s", (unsigned long long)z,
                 onyx_status_str(*st));
      return false;
    }
  }
  kv->in_place = true;
  return true;
}

static void teardown_in_place(onyx_kv_cache *kv) {
  uint64_t slices = (uint64_t)kv->tensors * (uint64_t)kv->units;
  for (uint64_t z = 0; kv->zones && z < slices; ++z) onyx_gov_zone_destroy(kv->zones[z]);
  free(kv->zones);
  kv->zones = NULL;
  if (kv->carve.base) onyx__carve_backend_fini(&kv->carve);
  if (kv->parent) {
    if (kv->parent_is_host)
      onyx_gov_host_backend_destroy(kv->parent);
    else
      onyx__vmm_backend_destroy(kv->parent);
  }
  kv->parent = NULL;
  kv->in_place = false;
}

/* The cache's geometry in bytes, every product checked: a head size or a length
 * from a config can be anything, and a wrapped row or unit size would divide by zero
 * or leave a view shorter than the tokens it promises to hold. */
static onyx_status size_cache(onyx_kv_cache *kv, size_t esz, char *err, size_t cap) {
  const onyx_kv_cache_options *o = &kv->opt;
  bool seq_major = o->layout == 1;
  uint64_t total = 0;
  bool over =
      o->layers > UINT32_MAX / 2 ||
      onyx__ckd_mul_count(&kv->units, o->batch, seq_major ? 1 : o->kv_heads) ||
      onyx__ckd_mul_u64(&kv->row_bytes, (uint64_t)o->head_size, esz) ||
      (seq_major && onyx__ckd_mul_u64(&kv->row_bytes, kv->row_bytes, (uint64_t)o->kv_heads)) ||
      onyx__ckd_mul_u64(&kv->unit_bytes, kv->row_bytes, (uint64_t)o->max_length) ||
      onyx__ckd_mul_u64(&total, kv->unit_bytes, (uint64_t)kv->units) ||
      onyx__ckd_mul_u64(&total, total, 2 * (uint64_t)o->layers) || total > (uint64_t)INT64_MAX;
  if (over) {
    onyx__errf(err, cap,
               "onyx_kv_cache_create: %u layers x batch %lld x %lld kv heads x head size %lld x "
               "%zu-byte elements x %lld tokens overflows 64 bits",
               o->layers, (long long)o->batch, (long long)o->kv_heads, (long long)o->head_size, esz,
               (long long)o->max_length);
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  kv->tensors = 2 * o->layers;
  return ONYX_STATUS_OK;
}

void onyx_kv_cache_destroy(onyx_kv_cache *kv) {
  if (kv == NULL) return;
  teardown_in_place(kv);
  for (uint32_t t = 0; kv->buffers && t < kv->tensors; ++t)
    onyx__memory_free(kv->runtime->memory, kv->buffers[t]);
  /* Device frees are stream-ordered: sync so the memory is back when this returns. */
  if (kv->buffers) (void)onyx__stream_sync(kv->provider);
  free(kv->buffers);
  free(kv);
}

onyx_status onyx_kv_cache_create(onyx_runtime *rt, const onyx_kv_cache_options *o,
                                 onyx_kv_cache **out, onyx_error **out_error) {
  if (rt == NULL || o == NULL || out == NULL || o->struct_size < sizeof *o)
    return onyx__error_set(out_error, ONYX_STATUS_INVALID_ARGUMENT,
                           "onyx_kv_cache_create: runtime, options and out_cache are required");
  size_t esz = onyx_dtype_size(o->dtype);
  if (o->layers == 0 || o->batch <= 0 || o->kv_heads <= 0 || o->head_size <= 0 ||
      o->max_length <= 0 || esz == 0 || o->layout > 1 || o->growth > 1) {
    char msg[256];
    snprintf(msg, sizeof msg,
             "onyx_kv_cache_create: invalid geometry (layers %u, batch %lld, "
             "kv_heads %lld, head_size %lld, max_length %lld, dtype %u, layout %u)",
             o->layers, (long long)o->batch, (long long)o->kv_heads, (long long)o->head_size,
             (long long)o->max_length, o->dtype, o->layout);
    return onyx__error_set(out_error, ONYX_STATUS_INVALID_ARGUMENT, msg);
  }
  onyx__provider *prov = NULL;
  if (o->provider) {
    prov = find_provider(rt, o->provider);
    if (prov == NULL) {
      char msg[256];
      snprintf(msg, sizeof msg, "onyx_kv_cache_create: no provider '%s' is loaded", o->provider);
      return onyx__error_set(out_error, ONYX_STATUS_NOT_FOUND, msg);
    }
    if (onyx__dev_is_host(prov)) prov = NULL;
  }
  onyx_kv_cache *kv = calloc(1, sizeof *kv);
  if (kv == NULL) return onyx__error_set(out_error, ONYX_STATUS_OUT_OF_MEMORY, NULL);
  kv->runtime = rt;
  kv->provider = prov;
  kv->opt = *o;
  kv->opt.provider = NULL; /* not kept: the caller owns the string */
  char err[ONYX_ERR_CAP] = "";
  onyx_status st = size_cache(kv, esz, err, sizeof err);
  if (st != ONYX_STATUS_OK) {
    free(kv);
    return onyx__error_set(out_error, st, err);
  }
  if (o->growth == ONYX_KV_GROWTH_IN_PLACE && !setup_in_place(kv, err, sizeof err, &st)) {
    teardown_in_place(kv);
    if (st != ONYX_STATUS_OK) {
      onyx_kv_cache_destroy(kv);
      return onyx__error_set(out_error, st, err);
    }
    onyx__log(ONYX_LOG_INFO, "KV cache: in-place growth unavailable here; growing by copy");
  }
  if (!kv->in_place) {
    kv->buffers = calloc(kv->tensors, sizeof *kv->buffers);
    if (kv->buffers == NULL) {
      onyx_kv_cache_destroy(kv);
      return onyx__error_set(out_error, ONYX_STATUS_OUT_OF_MEMORY, NULL);
    }
  }
  *out = kv;
  return ONYX_STATUS_OK;
}

/* ------------------------------------------------------------ growth */

static onyx_status grow_in_place(onyx_kv_cache *kv, int64_t length, char *err, size_t cap) {
  uint64_t slices = (uint64_t)kv->tensors * (uint64_t)kv->units;
  uint64_t target = (uint64_t)length * kv->row_bytes;
  onyx_gov_grant_id *plans = calloc(slices, sizeof *plans);
  if (plans == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  onyx_gov_zone_info before;
  onyx_gov_zone_info_get(kv->zones[0], &before);
  /* Admission for every zone first; only then map anything. */
  onyx_status st = ONYX_STATUS_OK;
  uint64_t z = 0;
  for (; z < slices && st == ONYX_STATUS_OK; ++z) {
    onyx_gov_refusal refusal;
    st = onyx_gov_zone_prepare(kv->zones[z], target, "kv cache growth", &plans[z], &refusal);
    if (st != ONYX_STATUS_OK) {
      char numbers[512];
      onyx_gov_refusal_format(&refusal, numbers, sizeof numbers);
      onyx__errf(err, cap, "KV cache growth to %lld tokens refused: %s", (long long)length,
                 numbers);
    }
  }
  uint64_t committed = 0;
  for (uint64_t k = 0; st == ONYX_STATUS_OK && k < slices; ++k, ++committed) {
    onyx_gov_refusal refusal;
    st = onyx_gov_zone_commit(kv->zones[k], plans[k], target, &refusal);
    if (st != ONYX_STATUS_OK)
      onyx__errf(err, cap, "KV cache growth to %lld tokens: mapping failed: %s", (long long)length,
                 onyx_status_str(st));
    else
      plans[k].id = 0;
  }
  if (st != ONYX_STATUS_OK) {
    /* All or nothing: unmap what this growth mapped and roll back the rest. */
    for (uint64_t k = 0; k < committed; ++k) onyx_gov_zone_trim(kv->zones[k], before.mapped);
    for (uint64_t k = 0; k < slices; ++k)
      if (plans[k].id) onyx_gov_release(onyx__memory_governor(kv->runtime->memory), plans[k]);
  }
  free(plans);
  if (st != ONYX_STATUS_OK) return st;
  onyx_gov_zone_info after;
  onyx_gov_zone_info_get(kv->zones[0], &after);
  if (after.mapped > before.mapped) kv->growth_events++;
  int64_t fits = (int64_t)(after.mapped / kv->row_bytes);
  kv->capacity = fits < kv->view_length ? fits : kv->view_length;
  return ONYX_STATUS_OK;
}

/* Copies `bytes` from src to dst in the cache's memory (host or device). */
static onyx_status copy_bytes(onyx_kv_cache *kv, void *dst, const void *src, uint64_t bytes) {
  if (kv->provider == NULL) {
    memcpy(dst, src, (size_t)bytes);
    return ONYX_STATUS_OK;
  }
  onyx_tensor d = {.dtype = ONYX_DTYPE_UINT8,
                   .device = kv->provider->device,
                   .device_id = kv->provider->device_id,
                   .rank = 1,
                   .dims = {(int64_t)bytes},
                   .data = dst};
  onyx_tensor s = d;
  s.data = (void *)(uintptr_t)src;
  onyx__stream_enter(kv->provider);
  onyx_status st = onyx__dev_copy(kv->provider, &d, &s, NULL, 0);
  onyx__stream_leave(kv->provider);
  return st;
}

static onyx_status grow_by_copy(onyx_kv_cache *kv, int64_t length, char *err, size_t cap) {
  int64_t bucket = bucket_for(length, kv->opt.max_length);
  uint64_t unit_new = (uint64_t)bucket * kv->row_bytes;
  uint64_t unit_old = (uint64_t)kv->capacity * kv->row_bytes;
  uint64_t bytes = unit_new * (uint64_t)kv->units;
  void **fresh = calloc(kv->tensors, sizeof *fresh);
  if (fresh == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  onyx_status st = ONYX_STATUS_OK;
  for (uint32_t t = 0; t < kv->tensors && st == ONYX_STATUS_OK; ++t) {
    char label[96];
    snprintf(label, sizeof label, "kv cache layer %u %s (%lld tokens)", t / 2,
             t % 2 ? "value" : "key", (long long)bucket);
    st = onyx__memory_alloc(kv->runtime->memory, kv->provider, ONYX_REQUESTER_KV_CACHE, bytes, 256,
                            label, &fresh[t], err, cap);
  }
  uint64_t moved = 0;
  for (uint32_t t = 0; t < kv->tensors && st == ONYX_STATUS_OK && kv->buffers[t]; ++t) {
    for (int64_t u = 0; u < kv->units && st == ONYX_STATUS_OK; ++u) {
      st = copy_bytes(kv, (char *)fresh[t] + (uint64_t)u * unit_new,
                      (const char *)kv->buffers[t] + (uint64_t)u * unit_old, unit_old);
      moved += unit_old;
    }
  }
  if (st == ONYX_STATUS_OK) st = onyx__stream_sync(kv->provider);
  for (uint32_t t = 0; t < kv->tensors; ++t) {
    void *drop = st == ONYX_STATUS_OK ? kv->buffers[t] : fresh[t];
    onyx__memory_free(kv->runtime->memory, drop);
    if (st == ONYX_STATUS_OK) kv->buffers[t] = fresh[t];
  }
  free(fresh);
  if (st != ONYX_STATUS_OK) return st;
  kv->capacity = bucket;
  kv->view_length = bucket;
  kv->growth_events++;
  kv->bytes_moved += moved;
  onyx_gov_note_bytes_moved(onyx__memory_governor(kv->runtime->memory), moved);
  return ONYX_STATUS_OK;
}

static onyx_status check_length(const onyx_kv_cache *kv, int64_t length, char *err, size_t cap) {
  if (kv->in_place && kv->view_length < kv->opt.max_length) {
    onyx__errf(err, cap, "KV cache: views hold %lld tokens, fewer than max_length %lld",
               (long long)kv->view_length, (long long)kv->opt.max_length);
    return ONYX_STATUS_INTERNAL;
  }
  if (length <= 0 || length > kv->opt.max_length) {
    onyx__errf(err, cap, "KV cache: %lld tokens requested, the cache holds 1..%lld",
               (long long)length, (long long)kv->opt.max_length);
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  return ONYX_STATUS_OK;
}

onyx_status onyx_kv_cache_reserve(onyx_kv_cache *kv, int64_t length, onyx_error **out_error) {
  if (kv == NULL) return onyx__error_set(out_error, ONYX_STATUS_INVALID_ARGUMENT, "no cache");
  char err[ONYX_ERR_CAP] = "";
  onyx_status st = check_length(kv, length, err, sizeof err);
  if (st == ONYX_STATUS_OK && length > kv->capacity)
    st = kv->in_place ? grow_in_place(kv, length, err, sizeof err)
                      : grow_by_copy(kv, length, err, sizeof err);
  return st == ONYX_STATUS_OK ? st : onyx__error_set(out_error, st, err);
}

onyx_status onyx_kv_cache_check(onyx_kv_cache *kv, int64_t length, onyx_error **out_error) {
  if (kv == NULL) return onyx__error_set(out_error, ONYX_STATUS_INVALID_ARGUMENT, "no cache");
  char err[ONYX_ERR_CAP] = "";
  onyx_status st = check_length(kv, length, err, sizeof err);
  if (st != ONYX_STATUS_OK || length <= kv->capacity)
    return st == ONYX_STATUS_OK ? st : onyx__error_set(out_error, st, err);
  /* What the growth would book in total, asked of the tier at once. */
  uint64_t need;
  if (kv->in_place) {
    onyx_gov_zone_info info;
    onyx_gov_zone_info_get(kv->zones[0], &info);
    /* Bounded by the reservation (length <= max_length, checked above). */
    uint64_t per_zone = 0;
    onyx__ckd_round_up_u64(&per_zone, (uint64_t)length * kv->row_bytes, info.granularity);
    need = (per_zone - info.mapped) * (uint64_t)kv->tensors * (uint64_t)kv->units;
  } else {
    int64_t bucket = bucket_for(length, kv->opt.max_length);
    need = (uint64_t)bucket * kv->row_bytes * (uint64_t)kv->units * kv->tensors;
  }
  st = onyx__memory_check(kv->runtime->memory,
                          onyx__memory_tier_of(kv->runtime->memory, kv->provider),
                          ONYX_REQUESTER_KV_CACHE, need, err, sizeof err);
  if (st == ONYX_STATUS_OK) return st;
  char msg[ONYX_ERR_CAP + 96];
  snprintf(msg, sizeof msg, "KV cache for %lld tokens does not fit: %s", (long long)length, err);
  return onyx__error_set(out_error, st, msg);
}

onyx_status onyx_kv_cache_views(const onyx_kv_cache *kv, uint32_t layer, onyx_tensor *key,
                                onyx_tensor *value) {
  if (kv == NULL || layer >= kv->opt.layers || key == NULL || value == NULL || kv->capacity == 0)
    return ONYX_STATUS_INVALID_ARGUMENT;
  onyx_tensor *out[2] = {key, value};
  for (uint32_t k = 0; k < 2; ++k) {
    uint32_t t = 2 * layer + k;
    void *data =
        kv->in_place
            ? (void *)((char *)kv->carve.base + (uint64_t)t * (uint64_t)kv->units * kv->unit_bytes)
            : kv->buffers[t];
    *out[k] =
        (onyx_tensor){.dtype = kv->opt.dtype,
                      .device = kv->provider ? kv->provider->device : ONYX_DEVICE_HOST,
                      .device_id = kv->provider ? kv->provider->device_id : 0,
                      .rank = 4,
                      .dims = {kv->opt.batch, kv->opt.kv_heads, kv->view_length, kv->opt.head_size},
                      .data = data};
  }
  return ONYX_STATUS_OK;
}

void onyx_kv_cache_get_stats(const onyx_kv_cache *kv, onyx_kv_cache_stats *out) {
  memset(out, 0, sizeof *out);
  if (kv == NULL) return;
  out->in_place = kv->in_place;
  out->capacity = kv->capacity;
  out->view_length = kv->view_length;
  out->growth_events = kv->growth_events;
  out->bytes_moved = kv->bytes_moved;
  if (kv->in_place && kv->zones) {
    onyx_gov_zone_info info;
    onyx_gov_zone_info_get(kv->zones[0], &info);
    out->committed_bytes = info.mapped * kv->tensors * (uint64_t)kv->units;
  } else {
    out->committed_bytes =
        (uint64_t)kv->capacity * kv->row_bytes * kv->tensors * (uint64_t)kv->units;
  }
}
