/*
 * Mapped zones: growth order, in-place growth, per-plan accounting of unassigned
 * capacity (rollback, over-estimate, granule reuse), the address-space cap, trim.
 */
#include <string.h>

#include "gov_test.h"

typedef struct fixture {
  onyx_gov *gov;
  onyx_gov_fake *fake;
  onyx_gov_tier t;
} fixture;

#define G (2 * MiB) /* fake granularity */

static int setup(void **state) {
  fixture *f = test_calloc(1, sizeof *f);
  assert_ok(onyx_gov_create(&f->gov));
  assert_ok(onyx_gov_fake_create(G, &f->fake));
  assert_ok(onyx_gov_tier_add(f->gov, "cuda:0", 64 * MiB, &f->t));
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  assert_books_balanced(f->gov);
  onyx_gov_destroy(f->gov);
  /* Everything the zones had is gone: no mapping, handle or reservation left. */
  onyx_gov_fake_stats s;
  onyx_gov_fake_stats_get(f->fake, &s);
  assert_int_equal(0, s.live_reservations);
  assert_int_equal(0, s.live_handles);
  assert_int_equal(0, s.mapped_bytes);
  assert_int_equal(0, s.protocol_errors);
  assert_int_equal(0, s.unsynced_unmaps);
  onyx_gov_fake_destroy(f->fake);
  test_free(f);
  return 0;
}

static onyx_gov_zone *make_zone(fixture *f, uint64_t max_bytes, uint64_t allowance) {
  onyx_gov_zone_desc d = zone_desc(f->t, ONYX_REQUESTER_WORKSPACE_SESSION,
                                   onyx_gov_fake_backend(f->fake), max_bytes, allowance, "arena");
  onyx_gov_zone *zone = NULL;
  assert_ok(onyx_gov_zone_create(f->gov, &d, &zone, NULL));
  return zone;
}

static void growth_takes_own_allowance_first_and_base_stays(void **state) {
  fixture *f = *state;
  onyx_gov_zone *zone = make_zone(f, 64 * MiB, 4 * MiB);
  void *base = zone_info(zone).base;
  assert_int_equal(4 * MiB, tier_usage(f->gov, f->t).reserved);

  assert_ok(onyx_gov_zone_grow(zone, 2 * MiB, NULL, NULL));
  assert_int_equal(0, counters(f->gov).unassigned_claimed);
  onyx_gov_tier_usage u = tier_usage(f->gov, f->t);
  assert_int_equal(2 * MiB, u.used);
  assert_int_equal(2 * MiB, u.reserved);

  assert_ok(onyx_gov_zone_grow(zone, 8 * MiB, NULL, NULL));
  assert_int_equal(4 * MiB, counters(f->gov).unassigned_claimed);
  onyx_gov_zone_info info = zone_info(zone);
  assert_ptr_equal(base, info.base);
  assert_int_equal(8 * MiB, info.mapped);
  assert_int_equal(8 * MiB, info.allowance);
  u = tier_usage(f->gov, f->t);
  assert_int_equal(8 * MiB, u.used);
  assert_int_equal(0, u.reserved);
  assert_int_equal(56 * MiB, u.unassigned);
  assert_int_equal(2, counters(f->gov).growth_events);
  assert_int_equal(0, counters(f->gov).bytes_moved);
  assert_fake_clean(f->fake, 8 * MiB, G);

  /* Growing to what is already mapped is a no-op, not an event. */
  assert_ok(onyx_gov_zone_grow(zone, 5 * MiB, NULL, NULL));
  assert_int_equal(2, counters(f->gov).growth_events);
  assert_ok(onyx_gov_zone_destroy(zone));
  assert_int_equal(0, tier_usage(f->gov, f->t).used);
}

static void rollback_returns_exactly_the_unassigned_claimed(void **state) {
  fixture *f = *state;
  onyx_gov_grant_id w;
  assert_ok(onyx_gov_grant(f->gov, f->t, ONYX_REQUESTER_WEIGHTS, 10 * MiB, NULL, &w, NULL));
  onyx_gov_zone *zone = make_zone(f, 64 * MiB, 2 * MiB);
  onyx_gov_tier_usage before = tier_usage(f->gov, f->t);
  assert_int_equal(52 * MiB, before.unassigned);

  onyx_gov_grant_id plan;
  assert_ok(onyx_gov_zone_prepare(zone, 6 * MiB, "node 3 Attention scratch", &plan, NULL));
  uint64_t planned = 0;
  assert_ok(onyx_gov_grant_bytes(f->gov, plan, &planned));
  assert_int_equal(6 * MiB, planned);
  onyx_gov_tier_usage mid = tier_usage(f->gov, f->t);
  assert_int_equal(4 * MiB, mid.pending); /* 2 MiB came from the zone's allowance */
  assert_int_equal(48 * MiB, mid.unassigned);
  assert_int_equal(2 * MiB, mid.reserved);
  assert_books_balanced(f->gov);

  assert_ok(onyx_gov_release(f->gov, plan));
  onyx_gov_tier_usage after = tier_usage(f->gov, f->t);
  assert_int_equal(before.unassigned, after.unassigned);
  assert_int_equal(0, after.pending);
  assert_int_equal(before.reserved, after.reserved);
  assert_int_equal(before.used, after.used);
  onyx_gov_counters k = counters(f->gov);
  assert_int_equal(4 * MiB, k.unassigned_claimed);
  assert_int_equal(4 * MiB, k.unassigned_returned);
  assert_int_equal(0, zone_info(zone).mapped);
  assert_status(ONYX_STATUS_INVALID_ARGUMENT, onyx_gov_release(f->gov, plan));
  assert_status(ONYX_STATUS_INVALID_ARGUMENT, onyx_gov_zone_commit(zone, plan, 6 * MiB, NULL));

  /* The allowance is intact and usable again. */
  assert_ok(onyx_gov_zone_grow(zone, 2 * MiB, NULL, NULL));
  assert_int_equal(4 * MiB, counters(f->gov).unassigned_claimed);
  assert_ok(onyx_gov_zone_destroy(zone));
  assert_ok(onyx_gov_release(f->gov, w));
}

static void over_estimate_returns_the_difference(void **state) {
  fixture *f = *state;
  onyx_gov_zone *zone = make_zone(f, 64 * MiB, 0);
  onyx_gov_grant_id plan;
  assert_ok(onyx_gov_zone_prepare(zone, 8 * MiB, NULL, &plan, NULL));
  assert_int_equal(8 * MiB, tier_usage(f->gov, f->t).pending);
  assert_ok(onyx_gov_zone_commit(zone, plan, 3 * MiB, NULL)); /* rounds to 4 MiB */
  onyx_gov_zone_info info = zone_info(zone);
  assert_int_equal(4 * MiB, info.mapped);
  assert_int_equal(4 * MiB, info.allowance);
  onyx_gov_tier_usage u = tier_usage(f->gov, f->t);
  assert_int_equal(0, u.pending);
  assert_int_equal(0, u.reserved);
  assert_int_equal(4 * MiB, u.used);
  assert_int_equal(60 * MiB, u.unassigned);
  onyx_gov_counters k = counters(f->gov);
  assert_int_equal(8 * MiB, k.unassigned_claimed);
  assert_int_equal(4 * MiB, k.unassigned_returned);
  assert_status(ONYX_STATUS_INVALID_ARGUMENT, onyx_gov_release(f->gov, plan)); /* consumed */
  assert_fake_clean(f->fake, 4 * MiB, G);
  assert_ok(onyx_gov_zone_destroy(zone));
}

static void granule_reuse_returns_the_difference(void **state) {
  fixture *f = *state;
  onyx_gov_zone *zone = make_zone(f, 64 * MiB, 0);
  onyx_gov_grant_id p1, p2;
  assert_ok(onyx_gov_zone_prepare(zone, 4 * MiB, "first", &p1, NULL));
  assert_ok(onyx_gov_zone_prepare(zone, 4 * MiB, "second", &p2, NULL));
  assert_int_equal(8 * MiB, tier_usage(f->gov, f->t).pending);
  assert_ok(onyx_gov_zone_commit(zone, p1, 4 * MiB, NULL));
  assert_int_equal(4 * MiB, tier_usage(f->gov, f->t).pending);
  /* The second plan finds its granules already mapped: nothing to map, all back. */
  assert_ok(onyx_gov_zone_commit(zone, p2, 4 * MiB, NULL));
  onyx_gov_tier_usage u = tier_usage(f->gov, f->t);
  assert_int_equal(0, u.pending);
  assert_int_equal(4 * MiB, u.used);
  assert_int_equal(60 * MiB, u.unassigned);
  onyx_gov_counters k = counters(f->gov);
  assert_int_equal(8 * MiB, k.unassigned_claimed);
  assert_int_equal(4 * MiB, k.unassigned_returned);
  assert_int_equal(1, k.growth_events);
  onyx_gov_fake_stats s;
  onyx_gov_fake_stats_get(f->fake, &s);
  assert_int_equal(2, s.calls[ONYX_GOV_FAKE_CREATE]);
  assert_ok(onyx_gov_zone_destroy(zone));
}

static void commit_books_a_larger_target_without_reclaim(void **state) {
  fixture *f = *state;
  onyx_gov_zone *zone = make_zone(f, 64 * MiB, 0);
  onyx_gov_grant_id plan, big;
  assert_ok(onyx_gov_zone_prepare(zone, 2 * MiB, NULL, &plan, NULL));
  assert_ok(onyx_gov_zone_commit(zone, plan, 6 * MiB, NULL));
  assert_int_equal(6 * MiB, zone_info(zone).mapped);
  assert_int_equal(6 * MiB, counters(f->gov).unassigned_claimed);

  /* A target the tier cannot hold: typed refusal, the plan stays prepared. */
  onyx_gov_grant_id w;
  assert_ok(onyx_gov_grant(f->gov, f->t, ONYX_REQUESTER_WEIGHTS, 54 * MiB, NULL, &w, NULL));
  assert_ok(onyx_gov_zone_prepare(zone, 8 * MiB, NULL, &big, NULL));
  onyx_gov_refusal r;
  assert_status(ONYX_STATUS_TIER_EXHAUSTED, onyx_gov_zone_commit(zone, big, 12 * MiB, &r));
  assert_int_equal(6 * MiB, r.requested);
  assert_int_equal(6 * MiB, zone_info(zone).mapped);
  assert_int_equal(2 * MiB, tier_usage(f->gov, f->t).pending);
  assert_books_balanced(f->gov);
  assert_ok(onyx_gov_zone_commit(zone, big, 8 * MiB, NULL));
  assert_int_equal(2 * MiB, tier_usage(f->gov, f->t).unassigned);
  assert_ok(onyx_gov_release(f->gov, w));
  assert_ok(onyx_gov_zone_destroy(zone));
}

static void commit_checks_the_plan_belongs_to_the_zone(void **state) {
  fixture *f = *state;
  onyx_gov_zone *a = make_zone(f, 8 * MiB, 0);
  onyx_gov_zone *b = make_zone(f, 8 * MiB, 0);
  onyx_gov_grant_id plan, plain;
  assert_ok(onyx_gov_zone_prepare(a, 2 * MiB, NULL, &plan, NULL));
  assert_status(ONYX_STATUS_INVALID_ARGUMENT, onyx_gov_zone_commit(b, plan, 2 * MiB, NULL));
  assert_ok(onyx_gov_grant(f->gov, f->t, ONYX_REQUESTER_WEIGHTS, 1, NULL, &plain, NULL));
  assert_status(ONYX_STATUS_INVALID_ARGUMENT, onyx_gov_zone_commit(a, plain, 2 * MiB, NULL));
  assert_ok(onyx_gov_zone_commit(a, plan, 2 * MiB, NULL));
  assert_ok(onyx_gov_release(f->gov, plain));
  assert_ok(onyx_gov_zone_destroy(b));
  assert_ok(onyx_gov_zone_destroy(a));
}

static void address_space_is_capped(void **state) {
  fixture *f = *state;
  onyx_gov_zone *zone = make_zone(f, 7 * MiB, 0); /* rounds to 8 MiB */
  assert_int_equal(8 * MiB, zone_info(zone).max_bytes);
  onyx_gov_refusal r;
  assert_status(ONYX_STATUS_TIER_EXHAUSTED, onyx_gov_zone_check(zone, 8 * MiB + 1, &r));
  assert_status(ONYX_STATUS_TIER_EXHAUSTED, onyx_gov_zone_grow(zone, 8 * MiB + 1, NULL, &r));
  assert_int_equal(ONYX_GOV_SCOPE_ZONE, r.scope);
  assert_int_equal(8 * MiB, r.limit);
  assert_ok(onyx_gov_zone_grow(zone, 8 * MiB, NULL, NULL));
  assert_ok(onyx_gov_zone_destroy(zone));

  onyx_gov_zone_desc d = zone_desc(f->t, ONYX_REQUESTER_KV_CACHE, onyx_gov_fake_backend(f->fake),
                                   4 * MiB, 6 * MiB, NULL);
  onyx_gov_zone *z2 = (onyx_gov_zone *)0x1;
  assert_status(ONYX_STATUS_INVALID_ARGUMENT, onyx_gov_zone_create(f->gov, &d, &z2, NULL));
  d.allowance_bytes = 0;
  d.max_bytes = 0;
  assert_status(ONYX_STATUS_INVALID_ARGUMENT, onyx_gov_zone_create(f->gov, &d, &z2, NULL));
  d.max_bytes = 4 * MiB;
  d.struct_size = 8;
  assert_status(ONYX_STATUS_INVALID_ARGUMENT, onyx_gov_zone_create(f->gov, &d, &z2, NULL));
  d.struct_size = sizeof d;
  onyx_gov_backend broken = *onyx_gov_fake_backend(f->fake);
  broken.set_access = NULL;
  d.backend = &broken;
  assert_status(ONYX_STATUS_INVALID_ARGUMENT, onyx_gov_zone_create(f->gov, &d, &z2, NULL));
  assert_ptr_equal((void *)0x1, z2);
}

static void allowance_that_does_not_fit_is_refused_and_nothing_reserved(void **state) {
  fixture *f = *state;
  onyx_gov_zone_desc d = zone_desc(f->t, ONYX_REQUESTER_KV_CACHE, onyx_gov_fake_backend(f->fake),
                                   1 * GiB, 128 * MiB, "kv");
  onyx_gov_zone *zone = NULL;
  onyx_gov_refusal r;
  assert_status(ONYX_STATUS_TIER_EXHAUSTED, onyx_gov_zone_create(f->gov, &d, &zone, &r));
  assert_null(zone);
  assert_int_equal(128 * MiB, r.requested);
  assert_int_equal(64 * MiB, r.limit);
  onyx_gov_fake_stats s;
  onyx_gov_fake_stats_get(f->fake, &s);
  assert_int_equal(0, s.live_reservations);
  assert_int_equal(0, tier_usage(f->gov, f->t).reserved);
}

static void trim_unmaps_after_sync_and_returns_capacity(void **state) {
  fixture *f = *state;
  onyx_gov_zone *zone = make_zone(f, 64 * MiB, 2 * MiB);
  assert_ok(onyx_gov_zone_grow(zone, 8 * MiB, NULL, NULL));
  assert_ok(onyx_gov_zone_trim(zone, 3 * MiB));
  onyx_gov_zone_info info = zone_info(zone);
  assert_int_equal(4 * MiB, info.mapped);
  assert_int_equal(4 * MiB, info.allowance);
  assert_fake_clean(f->fake, 4 * MiB, G);
  assert_int_equal(60 * MiB, tier_usage(f->gov, f->t).unassigned);

  /* A failed sync unmaps nothing. */
  onyx_gov_fake_fail_nth(f->fake, ONYX_GOV_FAKE_SYNC, 1);
  assert_status(ONYX_STATUS_PROVIDER_ERROR, onyx_gov_zone_trim(zone, 0));
  assert_int_equal(4 * MiB, zone_info(zone).mapped);
  assert_fake_clean(f->fake, 4 * MiB, G);

  assert_ok(onyx_gov_zone_trim(zone, 0));
  info = zone_info(zone);
  assert_int_equal(0, info.mapped);
  assert_int_equal(2 * MiB, info.allowance); /* back to what it was created with */
  onyx_gov_tier_usage u = tier_usage(f->gov, f->t);
  assert_int_equal(0, u.used);
  assert_int_equal(2 * MiB, u.reserved);
  assert_int_equal(8 * MiB, counters(f->gov).bytes_unmapped);
  assert_fake_clean(f->fake, 0, G);
  assert_ok(onyx_gov_zone_destroy(zone));
}

/* A trim must not take back allowance a prepared plan was promised. */
static void trim_keeps_allowance_promised_to_a_plan(void **state) {
  fixture *f = *state;
  onyx_gov_zone *zone = make_zone(f, 64 * MiB, 4 * MiB);
  onyx_gov_grant_id p1;
  assert_ok(onyx_gov_zone_prepare(zone, 4 * MiB, NULL, &p1, NULL)); /* all from allowance */
  assert_int_equal(0, tier_usage(f->gov, f->t).pending);
  assert_ok(onyx_gov_zone_grow(zone, 8 * MiB, NULL, NULL)); /* all from the pool */
  assert_int_equal(12 * MiB, zone_info(zone).allowance);
  assert_ok(onyx_gov_zone_trim(zone, 2 * MiB));
  onyx_gov_zone_info info = zone_info(zone);
  assert_int_equal(2 * MiB, info.mapped);
  assert_int_equal(6 * MiB, info.allowance); /* mapped + the 4 MiB promised to p1 */
  assert_books_balanced(f->gov);
  assert_ok(onyx_gov_zone_commit(zone, p1, 4 * MiB, NULL));
  info = zone_info(zone);
  assert_int_equal(4 * MiB, info.mapped);
  assert_int_equal(6 * MiB, info.allowance);
  assert_int_equal(2 * MiB, tier_usage(f->gov, f->t).reserved);
  assert_books_balanced(f->gov);
  assert_ok(onyx_gov_zone_destroy(zone));
  assert_int_equal(64 * MiB, tier_usage(f->gov, f->t).unassigned);
}

static void destroy_rolls_back_prepared_growth(void **state) {
  fixture *f = *state;
  onyx_gov_zone *zone = make_zone(f, 64 * MiB, 2 * MiB);
  assert_ok(onyx_gov_zone_grow(zone, 4 * MiB, NULL, NULL));
  onyx_gov_grant_id plan;
  assert_ok(onyx_gov_zone_prepare(zone, 10 * MiB, NULL, &plan, NULL));
  assert_ok(onyx_gov_zone_destroy(zone));
  assert_status(ONYX_STATUS_INVALID_ARGUMENT, onyx_gov_release(f->gov, plan));
  onyx_gov_tier_usage u = tier_usage(f->gov, f->t);
  assert_int_equal(0, u.used);
  assert_int_equal(0, u.reserved);
  assert_int_equal(0, u.pending);
  onyx_gov_counters k = counters(f->gov);
  assert_int_equal(k.unassigned_claimed, k.unassigned_returned + 2 * MiB); /* 2 were mapped */
  assert_ok(onyx_gov_zone_destroy(NULL));
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(growth_takes_own_allowance_first_and_base_stays),
      T(rollback_returns_exactly_the_unassigned_claimed),
      T(over_estimate_returns_the_difference),
      T(granule_reuse_returns_the_difference),
      T(commit_books_a_larger_target_without_reclaim),
      T(commit_checks_the_plan_belongs_to_the_zone),
      T(address_space_is_capped),
      T(allowance_that_does_not_fit_is_refused_and_nothing_reserved),
      T(trim_unmaps_after_sync_and_returns_capacity),
      T(trim_keeps_allowance_promised_to_a_plan),
      T(destroy_rolls_back_prepared_growth),
  };
#undef T
  return cmocka_run_group_tests_name("governor zones", tests, NULL, NULL);
}
