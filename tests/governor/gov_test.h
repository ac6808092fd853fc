/*
 * Helpers shared by the governor tests. Header-only (static inline) so that each
 * test stays one self-contained executable.
 */
#ifndef ONYX_GOV_TEST_H
#define ONYX_GOV_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "onyx_governor.h"

#define KiB ((uint64_t)1 << 10)
#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)

/* cmocka prints both values on failure; these keep the call sites short. */
#define assert_ok(expr) assert_int_equal(ONYX_STATUS_OK, (expr))
#define assert_status(want, expr) assert_int_equal((want), (expr))

/* Fails with the first difference when the governor's running totals disagree with
 * what its live grants and zones add up to. */
static inline void assert_books_balanced(onyx_gov *gov) {
  char msg[256];
  if (onyx_gov_audit(gov, msg, sizeof msg) != ONYX_STATUS_OK)
    fail_msg("governor books out of balance: %s", msg);
}

/* Fails unless the fake backend holds nothing beyond `mapped` bytes of mapped,
 * accessible granules and was used by the rules (no protocol errors, no unmap of
 * used memory before a sync). */
static inline void assert_fake_clean(onyx_gov_fake *fake, uint64_t mapped, uint64_t granularity) {
  onyx_gov_fake_stats s;
  onyx_gov_fake_stats_get(fake, &s);
  assert_int_equal(mapped, s.mapped_bytes);
  assert_int_equal(mapped, s.accessible_bytes);
  assert_int_equal(mapped / granularity, s.live_handles);
  assert_int_equal(0, s.protocol_errors);
  assert_int_equal(0, s.unsynced_unmaps);
}

static inline onyx_gov_tier_usage tier_usage(onyx_gov *gov, onyx_gov_tier tier) {
  onyx_gov_tier_usage u;
  assert_ok(onyx_gov_tier_usage_get(gov, tier, &u));
  return u;
}

static inline onyx_gov_zone_info zone_info(onyx_gov_zone *zone) {
  onyx_gov_zone_info info;
  onyx_gov_zone_info_get(zone, &info);
  return info;
}

static inline onyx_gov_counters counters(onyx_gov *gov) {
  onyx_gov_counters c;
  onyx_gov_counters_get(gov, &c);
  return c;
}

static inline onyx_gov_zone_desc zone_desc(onyx_gov_tier tier, onyx_requester requester,
                                           const onyx_gov_backend *backend, uint64_t max_bytes,
                                           uint64_t allowance, const char *label) {
  onyx_gov_zone_desc d;
  d.struct_size = (uint32_t)sizeof d;
  d.version = 1;
  d.tier = tier;
  d.requester = (uint32_t)requester;
  d.backend = backend;
  d.max_bytes = max_bytes;
  d.allowance_bytes = allowance;
  d.label = label;
  return d;
}

#endif /* ONYX_GOV_TEST_H */
