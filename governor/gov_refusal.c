/*
 * Typed refusal: the numbers behind ONYX_STATUS_TIER_EXHAUSTED and their message.
 * A refusal is what a server turns into a 429 before headers, so it carries enough to
 * tell "the tier is full" from "this class was never provisioned" at a glance.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "gov_impl.h"

void onyx__gov_fill_refusal(onyx_gov *gov, onyx_gov_tier tier, uint32_t r, uint32_t scope,
                            uint64_t requested, uint64_t allowance, onyx_gov_refusal *out) {
  if (out == NULL) return;
  const onyx__gov_tier *t = &gov->tiers[tier];
  memset(out, 0, sizeof *out);
  out->struct_size = (uint32_t)sizeof *out;
  out->version = 1;
  out->scope = scope;
  out->requester = r;
  onyx__gov_copy_label(out->tier, sizeof out->tier, t->name);
  out->requester_name = onyx_gov_requester_name(r);
  out->requested = requested;
  out->allowance = allowance;
  if (scope == ONYX_GOV_SCOPE_REQUESTER) {
    const onyx__gov_req *q = &t->req[r];
    out->limit = q->limit;
    out->used = q->used;
    out->reserved = q->reserved + q->pending;
    out->reclaimable = q->reclaimable;
  } else {
    out->limit = t->limit;
    out->used = t->used;
    out->reserved = t->reserved + t->pending;
    out->reclaimable = t->reclaimable;
  }
}

/* snprintf that appends at *len, keeping the total length needed. */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static void
append(char *buf, size_t cap, size_t *len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *at = (buf != NULL && *len < cap) ? buf + *len : NULL;
  size_t room = at != NULL ? cap - *len : 0;
  int n = vsnprintf(at, room, fmt, ap);
  va_end(ap);
  if (n > 0) *len += (size_t)n;
}

size_t onyx_gov_refusal_format(const onyx_gov_refusal *refusal, char *buf, size_t cap) {
  if (buf != NULL && cap > 0) buf[0] = '\0';
  if (refusal == NULL) return 0;
  const char *who = refusal->requester_name != NULL ? refusal->requester_name
                                                    : onyx_gov_requester_name(refusal->requester);
  size_t len = 0;
  append(buf, cap, &len,
         "tier %s: requested %" PRIu64 " bytes for %s, limit %" PRIu64 ", used %" PRIu64
         ", reserved %" PRIu64 ", reclaimable %" PRIu64,
         refusal->tier, refusal->requested, who, refusal->limit, refusal->used, refusal->reserved,
         refusal->reclaimable);
  if (refusal->allowance > 0)
    append(buf, cap, &len, ", own allowance %" PRIu64, refusal->allowance);
  if (refusal->scope == ONYX_GOV_SCOPE_REQUESTER)
    append(buf, cap, &len, " (the limit is %s's cap on this tier)", who);
  else if (refusal->scope == ONYX_GOV_SCOPE_ZONE)
    append(buf, cap, &len, " (the limit is the zone's reserved address space)");
  return len;
}
