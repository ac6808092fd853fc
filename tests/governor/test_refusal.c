/*
 * The typed refusal and its message: numbers per scope, snprintf semantics.
 */
#include <string.h>

#include "gov_test.h"

static void message_names_tier_requester_and_numbers(void **state) {
  (void)state;
  onyx_gov_refusal r;
  memset(&r, 0, sizeof r);
  r.struct_size = sizeof r;
  r.version = 1;
  r.scope = ONYX_GOV_SCOPE_TIER;
  strcpy(r.tier, "host");
  r.requester = ONYX_REQUESTER_KV_CACHE;
  r.requester_name = "kv_cache";
  r.requested = 2097152;
  r.limit = 8388608;
  r.used = 7340032;
  r.reserved = 0;
  r.reclaimable = 0;
  char buf[256];
  size_t n = onyx_gov_refusal_format(&r, buf, sizeof buf);
  assert_string_equal("tier host: requested 2097152 bytes for kv_cache, limit 8388608, used "
                      "7340032, reserved 0, reclaimable 0",
                      buf);
  assert_int_equal(strlen(buf), n);

  /* snprintf semantics: the length needed, a truncated but terminated message. */
  char small[10];
  assert_int_equal(n, onyx_gov_refusal_format(&r, small, sizeof small));
  assert_string_equal("tier host", small);
  assert_int_equal(n, onyx_gov_refusal_format(&r, NULL, 0));
  assert_int_equal(0, onyx_gov_refusal_format(NULL, buf, sizeof buf));
  assert_string_equal("", buf);
}

static void scopes_and_allowance_are_spelled_out(void **state) {
  (void)state;
  onyx_gov *gov = NULL;
  onyx_gov_fake *fake = NULL;
  assert_ok(onyx_gov_create(&gov));
  assert_ok(onyx_gov_fake_create(1 * MiB, &fake));
  onyx_gov_tier t;
  assert_ok(onyx_gov_tier_add(gov, "cuda:0", 64 * MiB, &t));
  assert_ok(onyx_gov_requester_set_limit(gov, t, ONYX_REQUESTER_KV_CACHE, 3 * MiB));
  onyx_gov_zone_desc d =
      zone_desc(t, ONYX_REQUESTER_KV_CACHE, onyx_gov_fake_backend(fake), 16 * MiB, 2 * MiB, "kv");
  onyx_gov_zone *zone = NULL;
  assert_ok(onyx_gov_zone_create(gov, &d, &zone, NULL));

  onyx_gov_refusal r;
  char buf[256];
  assert_status(ONYX_STATUS_TIER_EXHAUSTED, onyx_gov_zone_grow(zone, 5 * MiB, NULL, &r));
  assert_int_equal(ONYX_GOV_SCOPE_REQUESTER, r.scope);
  assert_int_equal(5 * MiB, r.requested);
  assert_int_equal(2 * MiB, r.allowance);
  assert_int_equal(3 * MiB, r.limit);
  assert_int_equal(0, r.used);
  assert_int_equal(2 * MiB, r.reserved);
  onyx_gov_refusal_format(&r, buf, sizeof buf);
  assert_string_equal("tier cuda:0: requested 5242880 bytes for kv_cache, limit 3145728, used 0, "
                      "reserved 2097152, reclaimable 0, own allowance 2097152 (the limit is "
                      "kv_cache's cap on this tier)",
                      buf);

  assert_status(ONYX_STATUS_TIER_EXHAUSTED, onyx_gov_zone_grow(zone, 17 * MiB, NULL, &r));
  assert_int_equal(ONYX_GOV_SCOPE_ZONE, r.scope);
  assert_int_equal(16 * MiB, r.limit);
  assert_int_equal(17 * MiB, r.requested);
  onyx_gov_refusal_format(&r, buf, sizeof buf);
  assert_non_null(strstr(buf, "(the limit is the zone's reserved address space)"));

  assert_int_equal(2, counters(gov).refusals);
  assert_ok(onyx_gov_zone_destroy(zone));
  onyx_gov_destroy(gov);
  onyx_gov_fake_destroy(fake);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(message_names_tier_requester_and_numbers),
      cmocka_unit_test(scopes_and_allowance_are_spelled_out),
  };
  return cmocka_run_group_tests_name("governor refusal", tests, NULL, NULL);
}
