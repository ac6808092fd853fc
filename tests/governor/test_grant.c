/*
 * Tiers, requesters and plain grants: booking, exactly-once release, requester caps,
 * peaks, the prepare-only check, and the aligned host allocation convenience.
 */
#include <string.h>

#include "gov_test.h"

static int gov_setup(void **state) {
  onyx_gov *gov = NULL;
  assert_ok(onyx_gov_create(&gov));
  *state = gov;
  return 0;
}

static int gov_teardown(void **state) {
  onyx_gov_destroy(*state);
  return 0;
}

static void tiers_are_named_and_unique(void **state) {
  onyx_gov *gov = *state;
  onyx_gov_tier host, cuda, found;
  assert_ok(onyx_gov_tier_add(gov, "host", 8 * GiB, &host));
  assert_ok(onyx_gov_tier_add(gov, "cuda:0", 80 * GiB, &cuda));
  assert_int_not_equal(host, cuda);
  assert_status(ONYX_STATUS_INVALID_ARGUMENT, onyx_gov_tier_add(gov, "host", 1, &found));
  assert_status(ONYX_STATUS_INVALID_ARGUMENT, onyx_gov_tier_add(gov, "", 1, &found));
  assert_ok(onyx_gov_tier_find(gov, "cuda:0", &found));
  assert_int_equal(cuda, found);
  assert_status(ONYX_STATUS_NOT_FOUND, onyx_gov_tier_find(gov, "cuda:1", &found));
  onyx_gov_grant_id g;
  assert_status(ONYX_STATUS_INVALID_ARGUMENT,
                onyx_gov_grant(gov, 7, ONYX_REQUESTER_WEIGHTS, 1, NULL, &g, NULL));
  assert_status(
      ONYX_STATUS_INVALID_ARGUMENT,
      onyx_gov_grant(gov, host, (onyx_requester)ONYX_REQUESTER_COUNT_, 1, NULL, &g, NULL));
  assert_string_equal("kv_cache", onyx_gov_requester_name(ONYX_REQUESTER_KV_CACHE));
  assert_string_equal("unknown", onyx_gov_requester_name(99));
}

static void grant_books_and_release_returns(void **state) {
  onyx_gov *gov = *state;
  onyx_gov_tier t;
  assert_ok(onyx_gov_tier_add(gov, "host", 10 * MiB, &t));
  onyx_gov_grant_id a, b;
  assert_ok(onyx_gov_grant(gov, t, ONYX_REQUESTER_ACTIVATIONS, 3 * MiB, "node 1 MatMul", &a, NULL));
  assert_ok(onyx_gov_grant(gov, t, ONYX_REQUESTER_WORKSPACE_STEP, 5 * MiB, "node 2", &b, NULL));
  assert_int_not_equal(0, a.id);
  assert_int_not_equal(a.id, b.id);
  onyx_gov_tier_usage u = tier_usage(gov, t);
  assert_int_equal(8 * MiB, u.used);
  assert_int_equal(2 * MiB, u.unassigned);
  uint64_t bytes = 0;
  assert_ok(onyx_gov_grant_bytes(gov, a, &bytes));
  assert_int_equal(3 * MiB, bytes);

  onyx_gov_refusal r;
  onyx_gov_grant_id c = {12345};
  assert_status(ONYX_STATUS_TIER_EXHAUSTED,
                onyx_gov_grant(gov, t, ONYX_REQUESTER_ACTIVATIONS, 3 * MiB, NULL, &c, &r));
  assert_int_equal(12345, c.id); /* untouched on failure */
  assert_int_equal(3 * MiB, r.requested);
  assert_int_equal(10 * MiB, r.limit);
  assert_int_equal(8 * MiB, r.used);

  assert_ok(onyx_gov_release(gov, a));
  assert_ok(onyx_gov_release(gov, b));
  assert_int_equal(0, tier_usage(gov, t).used);
  assert_books_balanced(gov);
}

static void double_release_is_detected_not_a_crash(void **state) {
  onyx_gov *gov = *state;
  onyx_gov_tier t;
  assert_ok(onyx_gov_tier_add(gov, "host", 10 * MiB, &t));
  onyx_gov_grant_id a, b;
  assert_ok(onyx_gov_grant(gov, t, ONYX_REQUESTER_ACTIVATIONS, 1 * MiB, NULL, &a, NULL));
  assert_ok(onyx_gov_release(gov, a));
  assert_status(ONYX_STATUS_INVALID_ARGUMENT, onyx_gov_release(gov, a));
  /* The slot is reused by the next grant; the stale id still does not match it. */
  assert_ok(onyx_gov_grant(gov, t, ONYX_REQUESTER_ACTIVATIONS, 2 * MiB, NULL, &b, NULL));
  assert_int_not_equal(a.id, b.id);
  assert_status(ONYX_STATUS_INVALID_ARGUMENT, onyx_gov_release(gov, a));
  assert_int_equal(2 * MiB, tier_usage(gov, t).used);
  onyx_gov_grant_id none = {0}, bogus = {((uint64_t)77 << 32) | 99999};
  assert_status(ONYX_STATUS_INVALID_ARGUMENT, onyx_gov_release(gov, none));
  assert_status(ONYX_STATUS_INVALID_ARGUMENT, onyx_gov_release(gov, bogus));
  assert_int_equal(4, counters(gov).double_releases);
  assert_ok(onyx_gov_release(gov, b));
  assert_books_balanced(gov);
}

static void requester_cap_refuses_with_its_own_numbers(void **state) {
  onyx_gov *gov = *state;
  onyx_gov_tier t;
  assert_ok(onyx_gov_tier_add(gov, "host", 100 * MiB, &t));
  assert_ok(onyx_gov_requester_set_limit(gov, t, ONYX_REQUESTER_KV_CACHE, 4 * MiB));
  onyx_gov_grant_id a, b;
  assert_ok(onyx_gov_grant(gov, t, ONYX_REQUESTER_KV_CACHE, 3 * MiB, NULL, &a, NULL));
  onyx_gov_refusal r;
  assert_status(ONYX_STATUS_TIER_EXHAUSTED,
                onyx_gov_grant(gov, t, ONYX_REQUESTER_KV_CACHE, 2 * MiB, NULL, &b, &r));
  assert_int_equal(ONYX_GOV_SCOPE_REQUESTER, r.scope);
  assert_int_equal(4 * MiB, r.limit);
  assert_int_equal(3 * MiB, r.used);
  assert_int_equal(2 * MiB, r.requested);
  /* Other requesters are not capped by it; removing the cap lets it through. */
  assert_ok(onyx_gov_grant(gov, t, ONYX_REQUESTER_WEIGHTS, 50 * MiB, NULL, &b, NULL));
  assert_ok(onyx_gov_release(gov, b));
  assert_ok(onyx_gov_requester_set_limit(gov, t, ONYX_REQUESTER_KV_CACHE, ONYX_GOV_NO_LIMIT));
  assert_ok(onyx_gov_grant(gov, t, ONYX_REQUESTER_KV_CACHE, 2 * MiB, NULL, &b, NULL));
  assert_ok(onyx_gov_release(gov, a));
  assert_ok(onyx_gov_release(gov, b));
  assert_books_balanced(gov);
}

static void peak_is_tracked_per_requester_per_tier(void **state) {
  onyx_gov *gov = *state;
  onyx_gov_tier host, dev;
  assert_ok(onyx_gov_tier_add(gov, "host", 100 * MiB, &host));
  assert_ok(onyx_gov_tier_add(gov, "cuda:0", 100 * MiB, &dev));
  onyx_gov_grant_id a, b, c;
  assert_ok(onyx_gov_grant(gov, host, ONYX_REQUESTER_ACTIVATIONS, 5 * MiB, NULL, &a, NULL));
  assert_ok(onyx_gov_grant(gov, host, ONYX_REQUESTER_ACTIVATIONS, 7 * MiB, NULL, &b, NULL));
  assert_ok(onyx_gov_release(gov, a));
  assert_ok(onyx_gov_grant(gov, dev, ONYX_REQUESTER_ACTIVATIONS, 1 * MiB, NULL, &c, NULL));
  onyx_gov_requester_usage q;
  assert_ok(onyx_gov_requester_usage_get(gov, host, ONYX_REQUESTER_ACTIVATIONS, &q));
  assert_int_equal(7 * MiB, q.used);
  assert_int_equal(12 * MiB, q.peak);
  assert_int_equal(ONYX_GOV_NO_LIMIT, q.limit);
  assert_ok(onyx_gov_requester_usage_get(gov, dev, ONYX_REQUESTER_ACTIVATIONS, &q));
  assert_int_equal(1 * MiB, q.peak);
  assert_ok(onyx_gov_requester_usage_get(gov, host, ONYX_REQUESTER_WEIGHTS, &q));
  assert_int_equal(0, q.peak);
  onyx_gov_reset_peaks(gov);
  assert_ok(onyx_gov_requester_usage_get(gov, host, ONYX_REQUESTER_ACTIVATIONS, &q));
  assert_int_equal(7 * MiB, q.peak);
  assert_ok(onyx_gov_release(gov, b));
  assert_ok(onyx_gov_release(gov, c));
}

static void check_reserves_nothing(void **state) {
  onyx_gov *gov = *state;
  onyx_gov_tier t;
  assert_ok(onyx_gov_tier_add(gov, "host", 10 * MiB, &t));
  onyx_gov_refusal r;
  assert_ok(onyx_gov_check(gov, t, ONYX_REQUESTER_WORKSPACE_STEP, 10 * MiB, &r));
  assert_int_equal(10 * MiB, r.requested);
  assert_int_equal(0, r.used);
  assert_status(ONYX_STATUS_TIER_EXHAUSTED,
                onyx_gov_check(gov, t, ONYX_REQUESTER_WORKSPACE_STEP, 10 * MiB + 1, &r));
  assert_int_equal(0, tier_usage(gov, t).used);
  assert_int_equal(0, counters(gov).grants);
  assert_int_equal(0, counters(gov).refusals);
}

static void lowering_the_tier_limit_refuses_new_requests_only(void **state) {
  onyx_gov *gov = *state;
  onyx_gov_tier t;
  assert_ok(onyx_gov_tier_add(gov, "host", 10 * MiB, &t));
  onyx_gov_grant_id a, b;
  assert_ok(onyx_gov_grant(gov, t, ONYX_REQUESTER_WEIGHTS, 8 * MiB, NULL, &a, NULL));
  assert_ok(onyx_gov_tier_set_limit(gov, t, 4 * MiB));
  assert_int_equal(0, tier_usage(gov, t).unassigned);
  assert_status(ONYX_STATUS_TIER_EXHAUSTED,
                onyx_gov_grant(gov, t, ONYX_REQUESTER_WEIGHTS, 1, NULL, &b, NULL));
  assert_ok(onyx_gov_release(gov, a));
  assert_ok(onyx_gov_grant(gov, t, ONYX_REQUESTER_WEIGHTS, 4 * MiB, NULL, &b, NULL));
  assert_ok(onyx_gov_release(gov, b));
}

static void labels_are_copied_and_truncated(void **state) {
  onyx_gov *gov = *state;
  onyx_gov_tier t;
  assert_ok(onyx_gov_tier_add(gov, "host", 10 * MiB, &t));
  char label[300];
  memset(label, 'x', sizeof label - 1);
  label[sizeof label - 1] = '\0';
  onyx_gov_grant_id a;
  assert_ok(onyx_gov_grant(gov, t, ONYX_REQUESTER_WEIGHTS, 1, label, &a, NULL));
  label[0] = 'y'; /* the governor kept its own copy */
  char json[4096];
  assert_ok(onyx_gov_snapshot_json(gov, json, sizeof json, NULL));
  assert_null(strstr(json, "\"y"));
  char want[ONYX_GOV_LABEL_MAX + 2];
  want[0] = '"';
  memset(want + 1, 'x', ONYX_GOV_LABEL_MAX - 1);
  want[ONYX_GOV_LABEL_MAX] = '"';
  want[ONYX_GOV_LABEL_MAX + 1] = '\0';
  assert_non_null(strstr(json, want));
  assert_ok(onyx_gov_release(gov, a));
}

static void alloc_is_aligned_booked_and_freed_once(void **state) {
  onyx_gov *gov = *state;
  onyx_gov_tier t;
  assert_ok(onyx_gov_tier_add(gov, "host", 4 * MiB, &t));
  void *p[8];
  for (int i = 0; i < 8; ++i) {
    assert_ok(onyx_gov_alloc(gov, t, ONYX_REQUESTER_ACTIVATIONS, 256 * KiB + (uint64_t)i,
                             (uint32_t)(64u << (i % 4)), "act", &p[i], NULL));
    assert_int_equal(0, (uintptr_t)p[i] % (64u << (i % 4)));
    memset(p[i], i, 256 * KiB + (size_t)i);
  }
  assert_int_equal(8 * 256 * KiB + 28, tier_usage(gov, t).used);
  void *q = (void *)0x1;
  onyx_gov_refusal r;
  assert_status(ONYX_STATUS_TIER_EXHAUSTED,
                onyx_gov_alloc(gov, t, ONYX_REQUESTER_ACTIVATIONS, 3 * MiB, 0, NULL, &q, &r));
  assert_ptr_equal((void *)0x1, q);
  assert_status(ONYX_STATUS_INVALID_ARGUMENT,
                onyx_gov_alloc(gov, t, ONYX_REQUESTER_ACTIVATIONS, 1, 48, NULL, &q, NULL));
  for (int i = 0; i < 8; i += 2) assert_ok(onyx_gov_free(gov, p[i]));
  assert_books_balanced(gov);
  assert_status(ONYX_STATUS_INVALID_ARGUMENT, onyx_gov_free(gov, p[0])); /* known-freed */
  assert_ok(onyx_gov_free(gov, NULL));
  for (int i = 1; i < 8; i += 2) assert_ok(onyx_gov_free(gov, p[i]));
  assert_int_equal(0, tier_usage(gov, t).used);
  assert_int_equal(1, counters(gov).double_releases);
  /* Left live on purpose: onyx_gov_destroy frees it (LeakSanitizer checks). */
  assert_ok(onyx_gov_alloc(gov, t, ONYX_REQUESTER_ACTIVATIONS, 100, 0, NULL, &q, NULL));
}

static void many_allocs_exercise_the_address_map(void **state) {
  onyx_gov *gov = *state;
  onyx_gov_tier t;
  assert_ok(onyx_gov_tier_add(gov, "host", 1 * GiB, &t));
  enum { N = 2000 };
  void **p = test_malloc(N * sizeof *p);
  for (int i = 0; i < N; ++i)
    assert_ok(onyx_gov_alloc(gov, t, ONYX_REQUESTER_ACTIVATIONS, 16, 16, NULL, &p[i], NULL));
  /* Free in a scattered order so deletions land in the middle of probe runs. */
  for (int k = 0; k < N; ++k) assert_ok(onyx_gov_free(gov, p[(k * 7919) % N]));
  assert_int_equal(0, tier_usage(gov, t).used);
  assert_int_equal(0, counters(gov).double_releases);
  assert_books_balanced(gov);
  test_free(p);
}

int main(void) {
#define T(name) cmocka_unit_test_setup_teardown(name, gov_setup, gov_teardown)
  const struct CMUnitTest tests[] = {
      T(tiers_are_named_and_unique),
      T(grant_books_and_release_returns),
      T(double_release_is_detected_not_a_crash),
      T(requester_cap_refuses_with_its_own_numbers),
      T(peak_is_tracked_per_requester_per_tier),
      T(check_reserves_nothing),
      T(lowering_the_tier_limit_refuses_new_requests_only),
      T(labels_are_copied_and_truncated),
      T(alloc_is_aligned_booked_and_freed_once),
      T(many_allocs_exercise_the_address_map),
  };
#undef T
  return cmocka_run_group_tests_name("governor grants", tests, NULL, NULL);
}
