/*
 * Holders: weak, explicit, priority-ordered registration; reclaim only when free
 * capacity cannot cover a request, lowest priority first, and only when the holders
 * can cover the shortfall.
 */
#include <string.h>

#include "gov_test.h"

typedef struct test_holder {
  char tag;
  onyx_gov_holder_id id;
  onyx_gov_grant_id grants[8];
  uint64_t sizes[8];
  int count;
  int calls;
  uint64_t last_want;
  bool lie;             /* report bytes without releasing anything */
  bool unregister_self; /* unregister from inside the callback */
} test_holder;

static char call_log[16];
static int call_count;

static uint64_t reclaim_cb(void *user, onyx_gov *gov, onyx_gov_tier tier, uint64_t want) {
  (void)tier;
  test_holder *h = user;
  h->calls++;
  h->last_want = want;
  if (call_count < (int)sizeof call_log - 1) call_log[call_count++] = h->tag;
  if (h->unregister_self) assert_ok(onyx_gov_holder_unregister(gov, h->id));
  if (h->lie) return want;
  uint64_t freed = 0;
  while (freed < want && h->count > 0) {
    --h->count;
    assert_ok(onyx_gov_release(gov, h->grants[h->count]));
    freed += h->sizes[h->count];
  }
  return freed;
}

/* Registers `h` and gives it `n` grants of `each` bytes it adopts. */
static void holder_fill(onyx_gov *gov, onyx_gov_tier t, test_holder *h, char tag, int32_t priority,
                        onyx_requester requester, int n, uint64_t each) {
  memset(h, 0, sizeof *h);
  h->tag = tag;
  char label[16] = "holder ?";
  label[7] = tag;
  assert_ok(onyx_gov_holder_register(gov, t, priority, label, reclaim_cb, h, &h->id));
  for (int i = 0; i < n; ++i) {
    assert_ok(onyx_gov_grant(gov, t, requester, each, label, &h->grants[i], NULL));
    assert_ok(onyx_gov_holder_adopt(gov, h->id, h->grants[i]));
    h->sizes[i] = each;
  }
  h->count = n;
}

static void holder_drop(onyx_gov *gov, test_holder *h) {
  while (h->count > 0) assert_ok(onyx_gov_release(gov, h->grants[--h->count]));
  (void)onyx_gov_holder_unregister(gov, h->id);
}

static int setup(void **state) {
  onyx_gov *gov = NULL;
  assert_ok(onyx_gov_create(&gov));
  call_count = 0;
  memset(call_log, 0, sizeof call_log);
  *state = gov;
  return 0;
}

static int teardown(void **state) {
  onyx_gov *gov = *state;
  assert_books_balanced(gov);
  onyx_gov_destroy(gov);
  return 0;
}

static void free_capacity_preferred_over_eviction(void **state) {
  onyx_gov *gov = *state;
  onyx_gov_tier t;
  assert_ok(onyx_gov_tier_add(gov, "cuda:0", 10 * MiB, &t));
  test_holder a;
  holder_fill(gov, t, &a, 'A', 0, ONYX_REQUESTER_KV_CACHE, 4, 1 * MiB);
  onyx_gov_grant_id g;
  assert_ok(onyx_gov_grant(gov, t, ONYX_REQUESTER_WORKSPACE_STEP, 6 * MiB, NULL, &g, NULL));
  assert_int_equal(0, a.calls);
  assert_int_equal(4 * MiB, tier_usage(gov, t).reclaimable);
  assert_ok(onyx_gov_release(gov, g));
  holder_drop(gov, &a);
}

/* The tier is filled explicitly (no incidental slack), so the request can only be
 * met by reclaim, which must go B (priority 1), then C (3), and never reach A (5). */
static void reclaim_in_priority_order_when_needed(void **state) {
  onyx_gov *gov = *state;
  onyx_gov_tier t;
  assert_ok(onyx_gov_tier_add(gov, "cuda:0", 16 * MiB, &t));
  test_holder a, b, c;
  holder_fill(gov, t, &a, 'A', 5, ONYX_REQUESTER_WEIGHTS, 1, 4 * MiB);
  holder_fill(gov, t, &b, 'B', 1, ONYX_REQUESTER_KV_CACHE, 2, 1 * MiB);
  holder_fill(gov, t, &c, 'C', 3, ONYX_REQUESTER_KV_CACHE, 1, 4 * MiB);
  onyx_gov_grant_id slack, g;
  assert_ok(onyx_gov_grant(gov, t, ONYX_REQUESTER_WEIGHTS, 6 * MiB, "slack", &slack, NULL));
  assert_int_equal(0, tier_usage(gov, t).unassigned);

  assert_ok(onyx_gov_grant(gov, t, ONYX_REQUESTER_WORKSPACE_STEP, 5 * MiB, NULL, &g, NULL));
  assert_string_equal("BC", call_log);
  assert_int_equal(5 * MiB, b.last_want);
  assert_int_equal(3 * MiB, c.last_want);
  assert_int_equal(0, a.calls);
  onyx_gov_counters k = counters(gov);
  assert_int_equal(2, k.reclaims);
  assert_int_equal(6 * MiB, k.reclaimed_bytes);
  onyx_gov_tier_usage u = tier_usage(gov, t);
  assert_int_equal(15 * MiB, u.used);
  assert_int_equal(4 * MiB, u.reclaimable);
  assert_ok(onyx_gov_release(gov, g));
  assert_ok(onyx_gov_release(gov, slack));
  holder_drop(gov, &a);
  holder_drop(gov, &b);
  holder_drop(gov, &c);
}

static void equal_priority_goes_in_registration_order(void **state) {
  onyx_gov *gov = *state;
  onyx_gov_tier t;
  assert_ok(onyx_gov_tier_add(gov, "cuda:0", 4 * MiB, &t));
  test_holder a, b;
  holder_fill(gov, t, &a, 'A', 2, ONYX_REQUESTER_KV_CACHE, 2, 1 * MiB);
  holder_fill(gov, t, &b, 'B', 2, ONYX_REQUESTER_KV_CACHE, 2, 1 * MiB);
  onyx_gov_grant_id g;
  assert_ok(onyx_gov_grant(gov, t, ONYX_REQUESTER_WORKSPACE_STEP, 1 * MiB, NULL, &g, NULL));
  assert_string_equal("A", call_log);
  assert_ok(onyx_gov_release(gov, g));
  holder_drop(gov, &a);
  holder_drop(gov, &b);
}

static void no_eviction_when_holders_cannot_cover(void **state) {
  onyx_gov *gov = *state;
  onyx_gov_tier t;
  assert_ok(onyx_gov_tier_add(gov, "cuda:0", 8 * MiB, &t));
  test_holder a;
  holder_fill(gov, t, &a, 'A', 0, ONYX_REQUESTER_KV_CACHE, 2, 1 * MiB);
  onyx_gov_grant_id w, g;
  assert_ok(onyx_gov_grant(gov, t, ONYX_REQUESTER_WEIGHTS, 5 * MiB, NULL, &w, NULL));
  onyx_gov_refusal r;
  assert_status(ONYX_STATUS_TIER_EXHAUSTED,
                onyx_gov_check(gov, t, ONYX_REQUESTER_WORKSPACE_STEP, 4 * MiB, &r));
  assert_status(ONYX_STATUS_TIER_EXHAUSTED,
                onyx_gov_grant(gov, t, ONYX_REQUESTER_WORKSPACE_STEP, 4 * MiB, NULL, &g, &r));
  assert_int_equal(0, a.calls);
  assert_int_equal(2 * MiB, r.reclaimable);
  assert_int_equal(7 * MiB, r.used);
  /* The check says a 3 MiB grant fits (1 free + 2 reclaimable) and asks no one. */
  assert_ok(onyx_gov_check(gov, t, ONYX_REQUESTER_WORKSPACE_STEP, 3 * MiB, &r));
  assert_int_equal(0, a.calls);
  assert_ok(onyx_gov_release(gov, w));
  holder_drop(gov, &a);
}

static void a_holder_that_frees_nothing_ends_in_refusal(void **state) {
  onyx_gov *gov = *state;
  onyx_gov_tier t;
  assert_ok(onyx_gov_tier_add(gov, "cuda:0", 4 * MiB, &t));
  test_holder a, b;
  holder_fill(gov, t, &a, 'A', 0, ONYX_REQUESTER_KV_CACHE, 2, 1 * MiB);
  holder_fill(gov, t, &b, 'B', 1, ONYX_REQUESTER_KV_CACHE, 2, 1 * MiB);
  a.lie = true;
  onyx_gov_grant_id g;
  onyx_gov_refusal r;
  /* Needs 3 MiB: A is asked, lies; B alone (2 MiB) cannot cover what is left. */
  assert_status(ONYX_STATUS_TIER_EXHAUSTED,
                onyx_gov_grant(gov, t, ONYX_REQUESTER_WORKSPACE_STEP, 3 * MiB, NULL, &g, &r));
  assert_int_equal(1, a.calls);
  assert_int_equal(0, b.calls);
  holder_drop(gov, &a);
  holder_drop(gov, &b);
}

static void unregistered_holder_is_never_called(void **state) {
  onyx_gov *gov = *state;
  onyx_gov_tier t;
  assert_ok(onyx_gov_tier_add(gov, "cuda:0", 4 * MiB, &t));
  test_holder a;
  holder_fill(gov, t, &a, 'A', 0, ONYX_REQUESTER_KV_CACHE, 4, 1 * MiB);
  assert_ok(onyx_gov_holder_unregister(gov, a.id));
  assert_status(ONYX_STATUS_INVALID_ARGUMENT, onyx_gov_holder_unregister(gov, a.id));
  onyx_gov_tier_usage u = tier_usage(gov, t);
  assert_int_equal(0, u.reclaimable);
  assert_int_equal(4 * MiB, u.used); /* its grants stay live */
  onyx_gov_grant_id g;
  assert_status(ONYX_STATUS_TIER_EXHAUSTED,
                onyx_gov_grant(gov, t, ONYX_REQUESTER_WORKSPACE_STEP, 1 * MiB, NULL, &g, NULL));
  assert_int_equal(0, a.calls);
  assert_status(ONYX_STATUS_INVALID_ARGUMENT, onyx_gov_holder_adopt(gov, a.id, a.grants[0]));
  holder_drop(gov, &a);
}

static void holder_may_unregister_from_its_callback(void **state) {
  onyx_gov *gov = *state;
  onyx_gov_tier t;
  assert_ok(onyx_gov_tier_add(gov, "cuda:0", 4 * MiB, &t));
  test_holder a;
  holder_fill(gov, t, &a, 'A', 0, ONYX_REQUESTER_KV_CACHE, 4, 1 * MiB);
  a.unregister_self = true;
  onyx_gov_grant_id g;
  assert_ok(onyx_gov_grant(gov, t, ONYX_REQUESTER_WORKSPACE_STEP, 2 * MiB, NULL, &g, NULL));
  assert_int_equal(1, a.calls);
  assert_int_equal(0, tier_usage(gov, t).reclaimable);
  /* A fresh registration may reuse the slot; the old id stays dead. */
  test_holder b;
  holder_fill(gov, t, &b, 'B', 0, ONYX_REQUESTER_KV_CACHE, 0, 0);
  assert_status(ONYX_STATUS_INVALID_ARGUMENT, onyx_gov_holder_unregister(gov, a.id));
  assert_ok(onyx_gov_release(gov, g));
  holder_drop(gov, &a);
  holder_drop(gov, &b);
}

static void requester_cap_reclaims_that_requesters_bytes(void **state) {
  onyx_gov *gov = *state;
  onyx_gov_tier t;
  assert_ok(onyx_gov_tier_add(gov, "cuda:0", 100 * MiB, &t));
  assert_ok(onyx_gov_requester_set_limit(gov, t, ONYX_REQUESTER_KV_CACHE, 4 * MiB));
  test_holder w, kv;
  holder_fill(gov, t, &w, 'W', 0, ONYX_REQUESTER_WEIGHTS, 2, 2 * MiB);
  holder_fill(gov, t, &kv, 'K', 9, ONYX_REQUESTER_KV_CACHE, 3, 1 * MiB);
  onyx_gov_grant_id g;
  assert_ok(onyx_gov_grant(gov, t, ONYX_REQUESTER_KV_CACHE, 2 * MiB, NULL, &g, NULL));
  assert_string_equal("K", call_log); /* weights' bytes would not help the kv cap */
  assert_int_equal(1 * MiB, kv.last_want);
  assert_ok(onyx_gov_release(gov, g));
  holder_drop(gov, &w);
  holder_drop(gov, &kv);
}

static void zone_growth_reclaims_when_the_tier_is_full(void **state) {
  onyx_gov *gov = *state;
  onyx_gov_fake *fake = NULL;
  assert_ok(onyx_gov_fake_create(2 * MiB, &fake));
  onyx_gov_tier t;
  assert_ok(onyx_gov_tier_add(gov, "cuda:0", 8 * MiB, &t));
  test_holder a;
  holder_fill(gov, t, &a, 'A', 0, ONYX_REQUESTER_KV_CACHE, 4, 2 * MiB);
  onyx_gov_zone_desc d = zone_desc(t, ONYX_REQUESTER_WORKSPACE_SESSION, onyx_gov_fake_backend(fake),
                                   64 * MiB, 0, "arena");
  onyx_gov_zone *zone = NULL;
  assert_ok(onyx_gov_zone_create(gov, &d, &zone, NULL));
  assert_ok(onyx_gov_zone_grow(zone, 3 * MiB, NULL, NULL));
  assert_int_equal(1, a.calls);
  assert_int_equal(4 * MiB, a.last_want);
  assert_int_equal(4 * MiB, zone_info(zone).mapped);
  assert_books_balanced(gov);
  assert_ok(onyx_gov_zone_destroy(zone));
  holder_drop(gov, &a);
  assert_fake_clean(fake, 0, 2 * MiB);
  onyx_gov_fake_destroy(fake);
}

static void adopt_checks_its_arguments(void **state) {
  onyx_gov *gov = *state;
  onyx_gov_tier t, u;
  assert_ok(onyx_gov_tier_add(gov, "cuda:0", 8 * MiB, &t));
  assert_ok(onyx_gov_tier_add(gov, "host", 8 * MiB, &u));
  test_holder a;
  holder_fill(gov, t, &a, 'A', 0, ONYX_REQUESTER_KV_CACHE, 1, 1 * MiB);
  onyx_gov_grant_id other;
  assert_ok(onyx_gov_grant(gov, u, ONYX_REQUESTER_KV_CACHE, 1 * MiB, NULL, &other, NULL));
  assert_status(ONYX_STATUS_INVALID_ARGUMENT, onyx_gov_holder_adopt(gov, a.id, other));
  /* Adopting twice does not count twice. */
  assert_ok(onyx_gov_holder_adopt(gov, a.id, a.grants[0]));
  assert_int_equal(1 * MiB, tier_usage(gov, t).reclaimable);
  assert_ok(onyx_gov_release(gov, other));
  assert_status(ONYX_STATUS_INVALID_ARGUMENT, onyx_gov_holder_adopt(gov, a.id, other));
  holder_drop(gov, &a);
  assert_int_equal(0, tier_usage(gov, t).reclaimable);
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(free_capacity_preferred_over_eviction),
      T(reclaim_in_priority_order_when_needed),
      T(equal_priority_goes_in_registration_order),
      T(no_eviction_when_holders_cannot_cover),
      T(a_holder_that_frees_nothing_ends_in_refusal),
      T(unregistered_holder_is_never_called),
      T(holder_may_unregister_from_its_callback),
      T(requester_cap_reclaims_that_requesters_bytes),
      T(zone_growth_reclaims_when_the_tier_is_full),
      T(adopt_checks_its_arguments),
  };
#undef T
  return cmocka_run_group_tests_name("governor holders", tests, NULL, NULL);
}
