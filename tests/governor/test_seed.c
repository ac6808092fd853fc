/*
 * The seed regression (shared/seeds/000_…, 002_…), both halves.
 *
 * A session-workspace zone whose allowance starts at 0, on a device with gigabytes
 * free and no holder registered, was refused a 2 MiB growth because growth could
 * only come from the zone's own allowance or from evicting a holder. The fix: claim
 * capacity of the tier that is assigned to no one before any eviction; a genuinely
 * full tier still gets the typed refusal with its numbers.
 */
#include <string.h>

#include "gov_test.h"

typedef struct seed {
  onyx_gov *gov;
  onyx_gov_fake *fake;
  onyx_gov_tier tier;
} seed;

static int seed_setup(void **state) {
  seed *s = test_calloc(1, sizeof *s);
  assert_ok(onyx_gov_create(&s->gov));
  assert_ok(onyx_gov_fake_create(2 * MiB, &s->fake));
  *state = s;
  return 0;
}

static int seed_teardown(void **state) {
  seed *s = *state;
  onyx_gov_destroy(s->gov);
  onyx_gov_fake_destroy(s->fake);
  test_free(s);
  return 0;
}

static int reclaim_calls;

static uint64_t must_not_reclaim(void *user, onyx_gov *gov, onyx_gov_tier tier, uint64_t want) {
  (void)user;
  (void)gov;
  (void)tier;
  (void)want;
  reclaim_calls++;
  return 0;
}

/* First half: the numbers from the write-up. requester_limit=0 (allowance),
 * tier_limit=7730940928, tier_used=375390208, growth of 2097152, no holder. */
static void free_capacity_backs_growth_with_no_holder(void **state) {
  seed *s = *state;
  assert_ok(onyx_gov_tier_add(s->gov, "cuda:0", 7730940928ull, &s->tier));
  onyx_gov_grant_id weights;
  assert_ok(onyx_gov_grant(s->gov, s->tier, ONYX_REQUESTER_WEIGHTS, 375390208ull,
                           "weights committed directly", &weights, NULL));

  onyx_gov_zone_desc d = zone_desc(s->tier, ONYX_REQUESTER_WORKSPACE_SESSION,
                                   onyx_gov_fake_backend(s->fake), 1 * GiB, 0, "ep arena zone");
  onyx_gov_zone *zone = NULL;
  assert_ok(onyx_gov_zone_create(s->gov, &d, &zone, NULL));
  void *base = zone_info(zone).base;

  /* The prepare-only planning pass agrees before anything is booked. */
  onyx_gov_refusal r;
  assert_ok(onyx_gov_zone_check(zone, 2097152, &r));

  reclaim_calls = 0;
  assert_ok(onyx_gov_zone_grow(zone, 2097152, "node 7 GroupQueryAttention q_bnsh", &r));

  onyx_gov_zone_info info = zone_info(zone);
  assert_int_equal(2097152, info.mapped);
  assert_ptr_equal(base, info.base);
  onyx_gov_tier_usage u = tier_usage(s->gov, s->tier);
  assert_int_equal(375390208ull + 2097152, u.used);
  assert_int_equal(0, u.pending);
  assert_int_equal(0, u.reserved);
  onyx_gov_counters c = counters(s->gov);
  assert_int_equal(0, c.reclaims);
  assert_int_equal(0, c.refusals);
  assert_int_equal(2097152, c.unassigned_claimed);
  assert_int_equal(0, c.unassigned_returned);
  assert_int_equal(1, c.growth_events);
  assert_int_equal(0, reclaim_calls);
  assert_fake_clean(s->fake, 2 * MiB, 2 * MiB);
  assert_books_balanced(s->gov);

  assert_ok(onyx_gov_zone_destroy(zone));
  assert_ok(onyx_gov_release(s->gov, weights));
  assert_books_balanced(s->gov);
  assert_int_equal(0, tier_usage(s->gov, s->tier).used);
}

/* The same with a holder registered: free capacity is still preferred, the holder is
 * never asked. */
static void free_capacity_preferred_over_registered_holder(void **state) {
  seed *s = *state;
  assert_ok(onyx_gov_tier_add(s->gov, "cuda:0", 7730940928ull, &s->tier));
  onyx_gov_grant_id kv;
  assert_ok(onyx_gov_grant(s->gov, s->tier, ONYX_REQUESTER_KV_CACHE, 64 * MiB, "kv", &kv, NULL));
  onyx_gov_holder_id h;
  assert_ok(onyx_gov_holder_register(s->gov, s->tier, 0, "kv offload", must_not_reclaim, NULL, &h));
  assert_ok(onyx_gov_holder_adopt(s->gov, h, kv));
  onyx_gov_zone_desc d = zone_desc(s->tier, ONYX_REQUESTER_WORKSPACE_SESSION,
                                   onyx_gov_fake_backend(s->fake), 1 * GiB, 0, "ep arena zone");
  onyx_gov_zone *zone = NULL;
  assert_ok(onyx_gov_zone_create(s->gov, &d, &zone, NULL));
  reclaim_calls = 0;
  assert_ok(onyx_gov_zone_grow(zone, 2097152, NULL, NULL));
  assert_int_equal(0, reclaim_calls);
  assert_int_equal(64 * MiB, tier_usage(s->gov, s->tier).reclaimable);
  assert_books_balanced(s->gov);
  assert_ok(onyx_gov_holder_unregister(s->gov, h));
  assert_ok(onyx_gov_zone_destroy(zone));
  assert_ok(onyx_gov_release(s->gov, kv));
}

/* Second half: a genuinely full tier still answers with the typed refusal and the
 * right numbers, and evicts nothing when the holders could not cover it anyway. */
static void typed_refusal_when_neither_free_nor_holder_covers(void **state) {
  seed *s = *state;
  assert_ok(onyx_gov_tier_add(s->gov, "cuda:0", 16 * MiB, &s->tier));
  onyx_gov_grant_id weights, kv;
  assert_ok(
      onyx_gov_grant(s->gov, s->tier, ONYX_REQUESTER_WEIGHTS, 12 * MiB, "weights", &weights, NULL));
  assert_ok(onyx_gov_grant(s->gov, s->tier, ONYX_REQUESTER_KV_CACHE, 1 * MiB, "kv", &kv, NULL));
  onyx_gov_holder_id h;
  assert_ok(onyx_gov_holder_register(s->gov, s->tier, 0, "kv offload", must_not_reclaim, NULL, &h));
  assert_ok(onyx_gov_holder_adopt(s->gov, h, kv));

  onyx_gov_zone_desc d = zone_desc(s->tier, ONYX_REQUESTER_WORKSPACE_SESSION,
                                   onyx_gov_fake_backend(s->fake), 1 * GiB, 0, "ep arena zone");
  onyx_gov_zone *zone = NULL;
  assert_ok(onyx_gov_zone_create(s->gov, &d, &zone, NULL));

  /* 6 MiB wanted; 16 - 13 = 3 MiB free; the holder could give 1 MiB: short by 2. */
  onyx_gov_refusal check;
  assert_status(ONYX_STATUS_TIER_EXHAUSTED, onyx_gov_zone_check(zone, 6 * MiB, &check));
  onyx_gov_refusal r;
  memset(&r, 0xa5, sizeof r);
  reclaim_calls = 0;
  assert_status(ONYX_STATUS_TIER_EXHAUSTED, onyx_gov_zone_grow(zone, 6 * MiB, NULL, &r));
  assert_int_equal(0, reclaim_calls);
  assert_int_equal(sizeof r, r.struct_size);
  assert_int_equal(ONYX_GOV_SCOPE_TIER, r.scope);
  assert_string_equal("cuda:0", r.tier);
  assert_string_equal("workspace_session", r.requester_name);
  assert_int_equal(ONYX_REQUESTER_WORKSPACE_SESSION, r.requester);
  assert_int_equal(6 * MiB, r.requested);
  assert_int_equal(0, r.allowance);
  assert_int_equal(16 * MiB, r.limit);
  assert_int_equal(13 * MiB, r.used);
  assert_int_equal(0, r.reserved);
  assert_int_equal(1 * MiB, r.reclaimable);
  assert_memory_equal(&check.requested, &r.requested,
                      sizeof r - offsetof(onyx_gov_refusal, requested));

  char msg[256];
  size_t n = onyx_gov_refusal_format(&r, msg, sizeof msg);
  assert_int_equal(strlen(msg), n);
  assert_string_equal("tier cuda:0: requested 6291456 bytes for workspace_session, limit 16777216,"
                      " used 13631488, reserved 0, reclaimable 1048576",
                      msg);

  /* Nothing moved: no mapping, nothing booked, the holder untouched. */
  assert_int_equal(0, zone_info(zone).mapped);
  onyx_gov_tier_usage u = tier_usage(s->gov, s->tier);
  assert_int_equal(13 * MiB, u.used);
  assert_int_equal(0, u.pending);
  assert_int_equal(1, counters(s->gov).refusals);
  onyx_gov_fake_stats fs;
  onyx_gov_fake_stats_get(s->fake, &fs);
  assert_int_equal(0, fs.calls[ONYX_GOV_FAKE_CREATE]);
  assert_books_balanced(s->gov);

  /* Without any holder the refusal is the same, reclaimable 0. */
  assert_ok(onyx_gov_holder_unregister(s->gov, h));
  assert_status(ONYX_STATUS_TIER_EXHAUSTED, onyx_gov_zone_grow(zone, 6 * MiB, NULL, &r));
  assert_int_equal(0, r.reclaimable);
  /* And what does fit still grows. */
  assert_ok(onyx_gov_zone_grow(zone, 2 * MiB, NULL, NULL));
  assert_books_balanced(s->gov);
  assert_ok(onyx_gov_zone_destroy(zone));
  assert_ok(onyx_gov_release(s->gov, weights));
  assert_ok(onyx_gov_release(s->gov, kv));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(free_capacity_backs_growth_with_no_holder, seed_setup,
                                      seed_teardown),
      cmocka_unit_test_setup_teardown(free_capacity_preferred_over_registered_holder, seed_setup,
                                      seed_teardown),
      cmocka_unit_test_setup_teardown(typed_refusal_when_neither_free_nor_holder_covers, seed_setup,
                                      seed_teardown),
  };
  return cmocka_run_group_tests_name("governor seed regression", tests, NULL, NULL);
}
