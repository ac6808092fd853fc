/*
 * The JSON snapshot. The state is copied under the lock and formatted after it is
 * released, so a slow stream never stalls grants on other threads.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gov_impl.h"

typedef struct zone_copy {
  char label[ONYX_GOV_LABEL_MAX];
  const char *backend;
  onyx_gov_tier tier;
  uint32_t requester;
  uintptr_t base;
  uint64_t mapped, max_bytes, allowance, granularity;
} zone_copy;

typedef struct state_copy {
  onyx__gov_tier tiers[ONYX_GOV_MAX_TIERS];
  uint32_t tier_count;
  onyx__gov_slot *grants;
  onyx_gov_grant_id *ids;
  uint32_t grant_count;
  zone_copy *zones;
  size_t zone_count;
  onyx__gov_holder holders[ONYX_GOV_MAX_HOLDERS];
  onyx_gov_counters counters;
} state_copy;

static void copy_free(state_copy *c) {
  free(c->grants);
  free(c->ids);
  free(c->zones);
  free(c);
}

static state_copy *copy_state(onyx_gov *gov) {
  state_copy *c = calloc(1, sizeof *c);
  if (c == NULL) return NULL;
  onyx__gov_lock(gov);
  size_t zone_count = 0;
  for (onyx_gov_zone *z = gov->zones; z != NULL; z = z->next) ++zone_count;
  c->grants = malloc((gov->live_slots ? gov->live_slots : 1) * sizeof *c->grants);
  c->ids = malloc((gov->live_slots ? gov->live_slots : 1) * sizeof *c->ids);
  c->zones = malloc((zone_count ? zone_count : 1) * sizeof *c->zones);
  if (c->grants == NULL || c->ids == NULL || c->zones == NULL) {
    onyx__gov_unlock(gov);
    copy_free(c);
    return NULL;
  }
  memcpy(c->tiers, gov->tiers, sizeof c->tiers);
  c->tier_count = gov->tier_count;
  for (uint32_t i = 0; i < gov->slot_cap; ++i) {
    if (gov->slots[i].kind == ONYX__GOV_SLOT_FREE) continue;
    c->ids[c->grant_count] = onyx__gov_slot_id(gov, i);
    c->grants[c->grant_count++] = gov->slots[i];
  }
  for (onyx_gov_zone *z = gov->zones; z != NULL; z = z->next) {
    zone_copy *zc = &c->zones[c->zone_count++];
    memcpy(zc->label, z->label, sizeof zc->label);
    zc->backend = z->backend.name != NULL ? z->backend.name : "";
    zc->tier = z->tier;
    zc->requester = z->requester;
    zc->base = (uintptr_t)z->base;
    zc->mapped = z->mapped;
    zc->max_bytes = z->max_bytes;
    zc->allowance = z->allowance;
    zc->granularity = z->granularity;
  }
  memcpy(c->holders, gov->holders, sizeof c->holders);
  c->counters = gov->counters;
  onyx__gov_unlock(gov);
  return c;
}

/* ------------------------------------------------------------------ writer */

typedef struct sbuf {
  char *p;
  size_t len, cap;
  bool failed;
} sbuf;

static void sb_reserve(sbuf *sb, size_t more) {
  if (sb->failed || sb->len + more + 1 <= sb->cap) return;
  size_t cap = sb->cap ? sb->cap : 4096;
  while (cap < sb->len + more + 1) cap *= 2;
  char *p = realloc(sb->p, cap);
  if (p == NULL) {
    sb->failed = true;
    return;
  }
  sb->p = p;
  sb->cap = cap;
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void
sb_printf(sbuf *sb, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) sb->failed = true;
  if (!sb->failed) sb_reserve(sb, (size_t)n);
  if (!sb->failed) {
    vsnprintf(sb->p + sb->len, sb->cap - sb->len, fmt, ap2);
    sb->len += (size_t)n;
  }
  va_end(ap2);
}

/* A JSON string literal, escaped. */
static void sb_str(sbuf *sb, const char *s) {
  sb_reserve(sb, 2 + strlen(s) * 6);
  if (sb->failed) return;
  char *o = sb->p + sb->len;
  *o++ = '"';
  for (const unsigned char *c = (const unsigned char *)s; *c; ++c) {
    if (*c == '"' || *c == '\\') {
      *o++ = '\\';
      *o++ = (char)*c;
    } else if (*c < 0x20) {
      o += sprintf(o, "\\u%04x", *c);
    } else {
      *o++ = (char)*c;
    }
  }
  *o++ = '"';
  *o = '\0';
  sb->len = (size_t)(o - sb->p);
}

static void sb_key_str(sbuf *sb, const char *key, const char *value) {
  sb_printf(sb, "\"%s\":", key);
  sb_str(sb, value);
}

static void sb_key_u64(sbuf *sb, const char *key, uint64_t value) {
  sb_printf(sb, ",\"%s\":%" PRIu64, key, value);
}

static const char *kind_name(uint8_t kind) {
  switch (kind) {
  case ONYX__GOV_SLOT_GRANT:
    return "grant";
  case ONYX__GOV_SLOT_ALLOC:
    return "alloc";
  case ONYX__GOV_SLOT_GROWTH:
    return "growth";
  default:
    return "free";
  }
}

static void render(const state_copy *c, sbuf *sb) {
  sb_printf(sb, "{\"tiers\":[");
  for (uint32_t i = 0; i < c->tier_count; ++i) {
    const onyx__gov_tier *t = &c->tiers[i];
    sb_printf(sb, "%s{", i ? "," : "");
    sb_key_str(sb, "name", t->name);
    sb_key_u64(sb, "limit", t->limit);
    sb_key_u64(sb, "used", t->used);
    sb_key_u64(sb, "reserved", t->reserved);
    sb_key_u64(sb, "pending", t->pending);
    sb_key_u64(sb, "unassigned", onyx__gov_unassigned(t));
    sb_key_u64(sb, "reclaimable", t->reclaimable);
    sb_key_u64(sb, "peak", t->peak);
    sb_printf(sb, ",\"requesters\":[");
    for (uint32_t r = 0; r < ONYX_REQUESTER_COUNT_; ++r) {
      const onyx__gov_req *q = &t->req[r];
      sb_printf(sb, "%s{", r ? "," : "");
      sb_key_str(sb, "name", onyx_gov_requester_name(r));
      sb_key_u64(sb, "used", q->used);
      sb_key_u64(sb, "peak", q->peak);
      if (q->limit == ONYX_GOV_NO_LIMIT)
        sb_printf(sb, ",\"limit\":null");
      else
        sb_key_u64(sb, "limit", q->limit);
      sb_key_u64(sb, "reserved", q->reserved);
      sb_key_u64(sb, "pending", q->pending);
      sb_key_u64(sb, "reclaimable", q->reclaimable);
      sb_printf(sb, "}");
    }
    sb_printf(sb, "]}");
  }
  sb_printf(sb, "],\"grants\":[");
  for (uint32_t i = 0; i < c->grant_count; ++i) {
    const onyx__gov_slot *s = &c->grants[i];
    sb_printf(sb, "%s{\"id\":%" PRIu64 ",", i ? "," : "", c->ids[i].id);
    sb_key_str(sb, "tier", c->tiers[s->tier].name);
    sb_printf(sb, ",");
    sb_key_str(sb, "requester", onyx_gov_requester_name(s->requester));
    sb_printf(sb, ",");
    sb_key_str(sb, "kind", kind_name(s->kind));
    sb_key_u64(sb, "bytes", s->bytes);
    sb_printf(sb, ",");
    sb_key_str(sb, "owner", s->label);
    if (s->kind == ONYX__GOV_SLOT_GROWTH) {
      sb_key_u64(sb, "from_allowance", s->from_allowance);
      sb_key_u64(sb, "unassigned", s->from_unassigned);
    }
    if (s->holder != 0) {
      const onyx__gov_holder *h = &c->holders[s->holder - 1];
      if (h->live && h->gen == s->holder_gen) {
        sb_printf(sb, ",");
        sb_key_str(sb, "holder", h->label);
      }
    }
    sb_printf(sb, "}");
  }
  sb_printf(sb, "],\"zones\":[");
  for (size_t i = 0; i < c->zone_count; ++i) {
    const zone_copy *z = &c->zones[i];
    sb_printf(sb, "%s{", i ? "," : "");
    sb_key_str(sb, "owner", z->label);
    sb_printf(sb, ",");
    sb_key_str(sb, "tier", c->tiers[z->tier].name);
    sb_printf(sb, ",");
    sb_key_str(sb, "requester", onyx_gov_requester_name(z->requester));
    sb_printf(sb, ",");
    sb_key_str(sb, "backend", z->backend);
    sb_printf(sb, ",\"base\":\"0x%" PRIxPTR "\"", z->base);
    sb_key_u64(sb, "mapped", z->mapped);
    sb_key_u64(sb, "reserved", z->max_bytes);
    sb_key_u64(sb, "allowance", z->allowance);
    sb_key_u64(sb, "granularity", z->granularity);
    sb_printf(sb, "}");
  }
  sb_printf(sb, "],\"holders\":[");
  bool first = true;
  for (uint32_t i = 0; i < ONYX_GOV_MAX_HOLDERS; ++i) {
    const onyx__gov_holder *h = &c->holders[i];
    if (!h->live) continue;
    sb_printf(sb, "%s{\"id\":%" PRIu64 ",", first ? "" : ",",
              ((uint64_t)h->gen << 32) | (uint64_t)(i + 1));
    first = false;
    sb_key_str(sb, "owner", h->label);
    sb_printf(sb, ",");
    sb_key_str(sb, "tier", c->tiers[h->tier].name);
    sb_printf(sb, ",\"priority\":%" PRId32, h->priority);
    sb_key_u64(sb, "reclaimable", h->adopted);
    sb_printf(sb, "}");
  }
  const onyx_gov_counters *k = &c->counters;
  sb_printf(sb, "],\"counters\":{\"grants\":%" PRIu64, k->grants);
  sb_key_u64(sb, "releases", k->releases);
  sb_key_u64(sb, "refusals", k->refusals);
  sb_key_u64(sb, "double_releases", k->double_releases);
  sb_key_u64(sb, "reclaims", k->reclaims);
  sb_key_u64(sb, "reclaimed_bytes", k->reclaimed_bytes);
  sb_key_u64(sb, "growth_events", k->growth_events);
  sb_key_u64(sb, "bytes_mapped", k->bytes_mapped);
  sb_key_u64(sb, "bytes_unmapped", k->bytes_unmapped);
  sb_key_u64(sb, "unassigned_claimed", k->unassigned_claimed);
  sb_key_u64(sb, "unassigned_returned", k->unassigned_returned);
  sb_key_u64(sb, "bytes_moved", k->bytes_moved);
  sb_printf(sb, "}}");
}

static onyx_status render_gov(onyx_gov *gov, sbuf *sb) {
  state_copy *c = copy_state(gov);
  if (c == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  render(c, sb);
  copy_free(c);
  if (sb->failed) {
    free(sb->p);
    return ONYX_STATUS_OUT_OF_MEMORY;
  }
  return ONYX_STATUS_OK;
}

onyx_status onyx_gov_snapshot_json(onyx_gov *gov, char *buf, size_t cap, size_t *out_len) {
  if (gov == NULL || (buf == NULL && cap > 0)) return ONYX_STATUS_INVALID_ARGUMENT;
  sbuf sb = {NULL, 0, 0, false};
  onyx_status st = render_gov(gov, &sb);
  if (st != ONYX_STATUS_OK) return st;
  if (out_len != NULL) *out_len = sb.len;
  if (sb.len < cap)
    memcpy(buf, sb.p, sb.len + 1);
  else
    st = ONYX_STATUS_INVALID_ARGUMENT;
  free(sb.p);
  return st;
}

onyx_status onyx_gov_snapshot_write(onyx_gov *gov, FILE *stream) {
  if (gov == NULL || stream == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  sbuf sb = {NULL, 0, 0, false};
  onyx_status st = render_gov(gov, &sb);
  if (st != ONYX_STATUS_OK) return st;
  if (fwrite(sb.p, 1, sb.len, stream) != sb.len) st = ONYX_STATUS_IO_ERROR;
  free(sb.p);
  return st;
}
