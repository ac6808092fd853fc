/*
 * The host backend: real mapped zones for CPU runs. Memory is usable right after
 * growth, the base stays put, trimmed granules read back as zero pages when grown
 * again, and the address range is released with the zone.
 */
#include <string.h>

#include "gov_test.h"

static void host_zone_grows_in_place_with_usable_memory(void **state) {
  (void)state;
  onyx_gov *gov = NULL;
  onyx_gov_backend *host = NULL;
  assert_ok(onyx_gov_create(&gov));
  assert_ok(onyx_gov_host_backend_create(0, &host));
  assert_string_equal("host", host->name);
  onyx_gov_tier t;
  assert_ok(onyx_gov_tier_add(gov, "host", 256 * MiB, &t));
  onyx_gov_zone_desc d = zone_desc(t, ONYX_REQUESTER_KV_CACHE, host, 1 * GiB, 0, "kv zone");
  onyx_gov_zone *zone = NULL;
  assert_ok(onyx_gov_zone_create(gov, &d, &zone, NULL));
  onyx_gov_zone_info info = zone_info(zone);
  assert_int_equal(2 * MiB, info.granularity);
  unsigned char *base = info.base;

  assert_ok(onyx_gov_zone_grow(zone, 3 * MiB, NULL, NULL));
  memset(base, 0x5a, 4 * MiB);
  assert_ok(onyx_gov_zone_grow(zone, 16 * MiB, NULL, NULL));
  assert_ptr_equal(base, zone_info(zone).base);
  assert_int_equal(0x5a, base[4 * MiB - 1]); /* old bytes stay, nothing was copied */
  memset(base + 4 * MiB, 0xa5, 12 * MiB);
  assert_int_equal(0xa5, base[16 * MiB - 1]);
  assert_int_equal(16 * MiB, tier_usage(gov, t).used);

  assert_ok(onyx_gov_zone_trim(zone, 2 * MiB));
  assert_int_equal(2 * MiB, tier_usage(gov, t).used);
  assert_ok(onyx_gov_zone_grow(zone, 4 * MiB, NULL, NULL));
  assert_int_equal(0x5a, base[0]);
  assert_int_equal(0, base[2 * MiB]); /* dropped pages come back zeroed */
  assert_int_equal(0, counters(gov).bytes_moved);

  onyx_gov_refusal r;
  assert_status(ONYX_STATUS_TIER_EXHAUSTED, onyx_gov_zone_grow(zone, 512 * MiB, NULL, &r));
  assert_int_equal(256 * MiB, r.limit);
  assert_books_balanced(gov);
  assert_ok(onyx_gov_zone_destroy(zone));
  assert_int_equal(0, tier_usage(gov, t).used);
  onyx_gov_destroy(gov);
  onyx_gov_host_backend_destroy(host);
}

static void host_backend_checks_granularity(void **state) {
  (void)state;
  onyx_gov_backend *b = (onyx_gov_backend *)0x1;
  assert_status(ONYX_STATUS_INVALID_ARGUMENT, onyx_gov_host_backend_create(3 * MiB, &b));
  assert_status(ONYX_STATUS_INVALID_ARGUMENT, onyx_gov_host_backend_create(512, &b));
  assert_ptr_equal((void *)0x1, b);
  assert_ok(onyx_gov_host_backend_create(64 * KiB, &b));
  uint64_t g = 0;
  assert_ok(b->granularity(b->state, &g));
  assert_int_equal(64 * KiB, g);
  onyx_gov_host_backend_destroy(b);
  onyx_gov_host_backend_destroy(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(host_zone_grows_in_place_with_usable_memory),
      cmocka_unit_test(host_backend_checks_granularity),
  };
  return cmocka_run_group_tests_name("governor host backend", tests, NULL, NULL);
}
