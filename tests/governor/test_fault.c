/*
 * Fault injection: a failure at every step of a growth (create, map, set access of
 * each granule) leaves the books exactly as they were, no granule mapped or handle
 * held, and the zone still usable. Growth is all or nothing.
 */
#include <string.h>

#include "gov_test.h"

#define G (2 * MiB)

typedef struct world {
  onyx_gov *gov;
  onyx_gov_fake *fake;
  onyx_gov_tier t;
  onyx_gov_zone *zone;
  onyx_gov_grant_id weights;
} world;

static void world_open(world *w) {
  memset(w, 0, sizeof *w);
  assert_ok(onyx_gov_create(&w->gov));
  assert_ok(onyx_gov_fake_create(G, &w->fake));
  assert_ok(onyx_gov_tier_add(w->gov, "cuda:0", 64 * MiB, &w->t));
  assert_ok(
      onyx_gov_grant(w->gov, w->t, ONYX_REQUESTER_WEIGHTS, 10 * MiB, "weights", &w->weights, NULL));
  onyx_gov_zone_desc d = zone_desc(w->t, ONYX_REQUESTER_WORKSPACE_SESSION,
                                   onyx_gov_fake_backend(w->fake), 64 * MiB, 2 * MiB, "arena");
  assert_ok(onyx_gov_zone_create(w->gov, &d, &w->zone, NULL));
  assert_ok(onyx_gov_zone_grow(w->zone, 4 * MiB, NULL, NULL)); /* 2 granules live */
}

static void world_close(world *w) {
  assert_ok(onyx_gov_zone_destroy(w->zone));
  assert_ok(onyx_gov_release(w->gov, w->weights));
  assert_books_balanced(w->gov);
  assert_int_equal(0, tier_usage(w->gov, w->t).used);
  onyx_gov_destroy(w->gov);
  onyx_gov_fake_stats s;
  onyx_gov_fake_stats_get(w->fake, &s);
  assert_int_equal(0, s.live_reservations);
  assert_int_equal(0, s.live_handles);
  assert_int_equal(0, s.protocol_errors);
  onyx_gov_fake_destroy(w->fake);
}

typedef struct books {
  onyx_gov_tier_usage tier;
  onyx_gov_zone_info zone;
  uint64_t claimed_net;
} books;

static books books_of(world *w) {
  books b;
  b.tier = tier_usage(w->gov, w->t);
  b.zone = zone_info(w->zone);
  onyx_gov_counters k = counters(w->gov);
  b.claimed_net = k.unassigned_claimed - k.unassigned_returned;
  return b;
}

static void assert_books_equal(const books *want, const books *got) {
  assert_int_equal(want->tier.used, got->tier.used);
  assert_int_equal(want->tier.reserved, got->tier.reserved);
  assert_int_equal(want->tier.pending, got->tier.pending);
  assert_int_equal(want->tier.unassigned, got->tier.unassigned);
  assert_ptr_equal(want->zone.base, got->zone.base);
  assert_int_equal(want->zone.mapped, got->zone.mapped);
  assert_int_equal(want->zone.allowance, got->zone.allowance);
  assert_int_equal(want->claimed_net, got->claimed_net);
}

static const onyx_gov_fake_op growth_steps[] = {ONYX_GOV_FAKE_CREATE, ONYX_GOV_FAKE_MAP,
                                                ONYX_GOV_FAKE_SET_ACCESS};

/* Growth 4 → 12 MiB is four granules; fail each step of each one. */
static void failure_at_every_step_of_grow(void **state) {
  (void)state;
  for (size_t s = 0; s < sizeof growth_steps / sizeof growth_steps[0]; ++s) {
    for (uint32_t n = 1; n <= 4; ++n) {
      world w;
      world_open(&w);
      books before = books_of(&w);
      onyx_gov_fake_fail_nth(w.fake, growth_steps[s], n);
      onyx_status st = onyx_gov_zone_grow(w.zone, 12 * MiB, NULL, NULL);
      if (st == ONYX_STATUS_OK) fail_msg("step %zu, granule %u: growth succeeded", s, n);
      books after = books_of(&w);
      assert_books_equal(&before, &after);
      assert_fake_clean(w.fake, 4 * MiB, G);
      assert_books_balanced(w.gov);
      assert_int_equal(1, counters(w.gov).growth_events); /* only the setup's */
      /* The zone is still good for the same growth. */
      assert_ok(onyx_gov_zone_grow(w.zone, 12 * MiB, NULL, NULL));
      assert_fake_clean(w.fake, 12 * MiB, G);
      assert_ptr_equal(before.zone.base, zone_info(w.zone).base);
      world_close(&w);
    }
  }
}

/* The same through prepare/commit: a failed commit leaves the plan prepared (booked,
 * nothing mapped); releasing it restores the books exactly. */
static void failed_commit_keeps_the_plan_and_release_rolls_back(void **state) {
  (void)state;
  for (size_t s = 0; s < sizeof growth_steps / sizeof growth_steps[0]; ++s) {
    for (uint32_t n = 1; n <= 4; ++n) {
      world w;
      world_open(&w);
      books before = books_of(&w);
      onyx_gov_grant_id plan;
      assert_ok(onyx_gov_zone_prepare(w.zone, 12 * MiB, NULL, &plan, NULL));
      books prepared = books_of(&w);
      assert_int_equal(8 * MiB, prepared.tier.pending);
      onyx_gov_fake_fail_nth(w.fake, growth_steps[s], n);
      assert_int_not_equal(ONYX_STATUS_OK, onyx_gov_zone_commit(w.zone, plan, 12 * MiB, NULL));
      books failed = books_of(&w);
      assert_books_equal(&prepared, &failed);
      assert_fake_clean(w.fake, 4 * MiB, G);
      /* A larger commit target that also fails undoes its extra booking too. */
      onyx_gov_fake_fail_nth(w.fake, growth_steps[s], n);
      assert_int_not_equal(ONYX_STATUS_OK, onyx_gov_zone_commit(w.zone, plan, 16 * MiB, NULL));
      failed = books_of(&w);
      assert_books_equal(&prepared, &failed);
      assert_ok(onyx_gov_release(w.gov, plan));
      books after = books_of(&w);
      assert_books_equal(&before, &after);
      assert_books_balanced(w.gov);
      world_close(&w);
    }
  }
}

static void failed_reserve_books_nothing(void **state) {
  (void)state;
  onyx_gov *gov = NULL;
  onyx_gov_fake *fake = NULL;
  assert_ok(onyx_gov_create(&gov));
  assert_ok(onyx_gov_fake_create(G, &fake));
  onyx_gov_tier t;
  assert_ok(onyx_gov_tier_add(gov, "cuda:0", 64 * MiB, &t));
  onyx_gov_zone_desc d =
      zone_desc(t, ONYX_REQUESTER_KV_CACHE, onyx_gov_fake_backend(fake), 64 * MiB, 8 * MiB, "kv");
  onyx_gov_fake_fail_nth(fake, ONYX_GOV_FAKE_RESERVE, 1);
  onyx_gov_zone *zone = NULL;
  assert_status(ONYX_STATUS_OUT_OF_MEMORY, onyx_gov_zone_create(gov, &d, &zone, NULL));
  assert_null(zone);
  onyx_gov_tier_usage u = tier_usage(gov, t);
  assert_int_equal(0, u.reserved);
  assert_int_equal(64 * MiB, u.unassigned);
  onyx_gov_fake_stats s;
  onyx_gov_fake_stats_get(fake, &s);
  assert_int_equal(0, s.live_reservations);
  assert_books_balanced(gov);
  onyx_gov_destroy(gov);
  onyx_gov_fake_destroy(fake);
}

/* Destroy reports a failed sync but still gives everything back. */
static void destroy_with_failed_sync_still_releases(void **state) {
  (void)state;
  world w;
  world_open(&w);
  onyx_gov_fake_fail_nth(w.fake, ONYX_GOV_FAKE_SYNC, 1);
  assert_status(ONYX_STATUS_PROVIDER_ERROR, onyx_gov_zone_destroy(w.zone));
  onyx_gov_fake_stats s;
  onyx_gov_fake_stats_get(w.fake, &s);
  assert_int_equal(0, s.live_handles);
  assert_int_equal(0, s.mapped_bytes);
  assert_int_equal(0, s.live_reservations);
  onyx_gov_tier_usage u = tier_usage(w.gov, w.t);
  assert_int_equal(10 * MiB, u.used);
  assert_int_equal(0, u.reserved);
  assert_ok(onyx_gov_release(w.gov, w.weights));
  assert_books_balanced(w.gov);
  onyx_gov_destroy(w.gov);
  onyx_gov_fake_destroy(w.fake);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(failure_at_every_step_of_grow),
      cmocka_unit_test(failed_commit_keeps_the_plan_and_release_rolls_back),
      cmocka_unit_test(failed_reserve_books_nothing),
      cmocka_unit_test(destroy_with_failed_sync_still_releases),
  };
  return cmocka_run_group_tests_name("governor faults", tests, NULL, NULL);
}
