/*
 * The governed KV cache: in-place growth keeps the base and copies nothing, growth
 * by copy moves exactly the old buckets and keeps the data, admission refuses with
 * the governor's numbers, and a refused growth leaves the cache as it was.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "onyx.h"
#include "test_support.h"

static onyx_runtime *runtime_with(const char *governor) {
  char ini[1024];
  snprintf(ini, sizeof ini, "[governor]\n%s\n[provider.cpu]\npath = %s\n", governor, CPU_PROVIDER);
  char *path = write_temp_file(".ini", ini);
  onyx_runtime *rt = NULL;
  onyx_error *e = NULL;
  onyx_status st = onyx_runtime_create(path, &rt, &e);
  if (st != ONYX_STATUS_OK) print_message("%s\n", onyx_error_message(e));
  assert_int_equal(st, ONYX_STATUS_OK);
  remove_temp_file(path);
  return rt;
}

static onyx_kv_cache *make_cache(onyx_runtime *rt, uint32_t layout, uint32_t growth,
                                 int64_t max_length) {
  onyx_kv_cache_options o = {.struct_size = sizeof o,
                             .layers = 2,
                             .batch = 1,
                             .kv_heads = 2,
                             .head_size = 32,
                             .dtype = ONYX_DTYPE_FLOAT32,
                             .layout = layout,
                             .max_length = max_length,
                             .growth = growth};
  onyx_kv_cache *kv = NULL;
  onyx_error *e = NULL;
  onyx_status st = onyx_kv_cache_create(rt, &o, &kv, &e);
  if (st != ONYX_STATUS_OK) print_message("%s\n", onyx_error_message(e));
  assert_int_equal(st, ONYX_STATUS_OK);
  return kv;
}

/* Writes token t of (head h, dim d) of layer 0's key as a recognisable value. */
static float pattern(int64_t h, int64_t t, int64_t d) { return (float)(h * 100000 + t * 100 + d); }

static size_t offset_of(const onyx_tensor *k, uint32_t layout, int64_t h, int64_t t, int64_t d) {
  int64_t heads = k->dims[1], len = k->dims[2], hs = k->dims[3];
  return layout == 0 ? (size_t)((h * len + t) * hs + d) : (size_t)((t * heads + h) * hs + d);
}

static void fill(const onyx_kv_cache *kv, uint32_t layout, int64_t tokens) {
  onyx_tensor k, v;
  assert_int_equal(onyx_kv_cache_views(kv, 0, &k, &v), ONYX_STATUS_OK);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t d = 0; d < 32; ++d)
        ((float *)k.data)[offset_of(&k, layout, h, t, d)] = pattern(h, t, d);
}

static void expect_filled(const onyx_kv_cache *kv, uint32_t layout, int64_t tokens) {
  onyx_tensor k, v;
  assert_int_equal(onyx_kv_cache_views(kv, 0, &k, &v), ONYX_STATUS_OK);
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t d = 0; d < 32; ++d)
        assert_true(((float *)k.data)[offset_of(&k, layout, h, t, d)] == pattern(h, t, d));
}

static void grows_in_place_without_moving(void **state) {
  (void)state;
  for (uint32_t layout = 0; layout < 2; ++layout) {
    onyx_runtime *rt = runtime_with("host = 1GiB");
    onyx_kv_cache *kv = make_cache(rt, layout, ONYX_KV_GROWTH_IN_PLACE, 4096);
    onyx_error *e = NULL;
    assert_int_equal(onyx_kv_cache_reserve(kv, 100, &e), ONYX_STATUS_OK);
    onyx_tensor k0, v0, k1, v1;
    onyx_kv_cache_views(kv, 0, &k0, &v0);
    fill(kv, layout, 100);
    onyx_kv_cache_stats before, after;
    onyx_kv_cache_get_stats(kv, &before);
    assert_true(before.in_place);
    assert_int_equal(onyx_kv_cache_reserve(kv, 3000, &e), ONYX_STATUS_OK);
    onyx_kv_cache_get_stats(kv, &after);
    onyx_kv_cache_views(kv, 0, &k1, &v1);
    assert_ptr_equal(k0.data, k1.data); /* the base stays put */
    assert_int_equal(after.bytes_moved, 0);
    assert_int_equal(after.growth_events, before.growth_events + 1);
    assert_true(after.capacity >= 3000);
    assert_true(after.committed_bytes > before.committed_bytes);
    expect_filled(kv, layout, 100);
    /* Committed memory is booked as kv_cache. */
    uint64_t used[ONYX_REQUESTER_COUNT_];
    onyx_runtime_memory_usage(rt, used, NULL);
    assert_int_equal(used[ONYX_REQUESTER_KV_CACHE], after.committed_bytes);
    onyx_kv_cache_destroy(kv);
    onyx_runtime_memory_usage(rt, used, NULL);
    assert_int_equal(used[ONYX_REQUESTER_KV_CACHE], 0);
    onyx_runtime_destroy(rt);
  }
}

static void seq_major_commits_less_than_head_major(void **state) {
  (void)state;
  onyx_runtime *rt = runtime_with("host = 1GiB");
  onyx_kv_cache_stats bnsh, bsnh;
  onyx_kv_cache *a = make_cache(rt, 0, ONYX_KV_GROWTH_IN_PLACE, 4096);
  onyx_kv_cache *b = make_cache(rt, 1, ONYX_KV_GROWTH_IN_PLACE, 4096);
  assert_int_equal(onyx_kv_cache_reserve(a, 10, NULL), ONYX_STATUS_OK);
  assert_int_equal(onyx_kv_cache_reserve(b, 10, NULL), ONYX_STATUS_OK);
  onyx_kv_cache_get_stats(a, &bnsh);
  onyx_kv_cache_get_stats(b, &bsnh);
  /* One granule per (tensor, head) head-major, per tensor seq-major. */
  assert_int_equal(bnsh.committed_bytes, 2 * bsnh.committed_bytes);
  onyx_kv_cache_destroy(a);
  onyx_kv_cache_destroy(b);
  onyx_runtime_destroy(rt);
}

static void grows_by_copy_moving_the_old_buckets(void **state) {
  (void)state;
  for (uint32_t layout = 0; layout < 2; ++layout) {
    onyx_runtime *rt = runtime_with("host = 1GiB");
    onyx_kv_cache *kv = make_cache(rt, layout, ONYX_KV_GROWTH_REALLOC, 1000);
    onyx_error *e = NULL;
    assert_int_equal(onyx_kv_cache_reserve(kv, 50, &e), ONYX_STATUS_OK);
    onyx_kv_cache_stats s1, s2;
    onyx_kv_cache_get_stats(kv, &s1);
    assert_false(s1.in_place);
    assert_int_equal(s1.capacity, 64);
    assert_int_equal(s1.bytes_moved, 0); /* nothing to move from an empty cache */
    fill(kv, layout, 50);
    assert_int_equal(onyx_kv_cache_reserve(kv, 65, &e), ONYX_STATUS_OK);
    onyx_kv_cache_get_stats(kv, &s2);
    assert_int_equal(s2.capacity, 128);
    /* 4 tensors × (2 heads × 32 floats) × 64 tokens of the old bucket. */
    assert_int_equal(s2.bytes_moved, 4u * 2 * 32 * 4 * 64);
    assert_int_equal(s2.growth_events, s1.growth_events + 1);
    expect_filled(kv, layout, 50);
    onyx_kv_cache_destroy(kv);
    onyx_runtime_destroy(rt);
  }
}

static void admission_refuses_with_numbers(void **state) {
  (void)state;
  onyx_runtime *rt = runtime_with("requester.kv_cache = 1MiB");
  onyx_kv_cache *kv = make_cache(rt, 1, ONYX_KV_GROWTH_IN_PLACE, 100000);
  onyx_error *e = NULL;
  assert_int_equal(onyx_kv_cache_check(kv, 100, &e), ONYX_STATUS_OK);
  assert_int_equal(onyx_kv_cache_check(kv, 90000, &e), ONYX_STATUS_TIER_EXHAUSTED);
  print_message("%s\n", onyx_error_message(e));
  assert_non_null(strstr(onyx_error_message(e), "kv_cache"));
  assert_non_null(strstr(onyx_error_message(e), "limit 1048576"));
  onyx_error_free(e);
  /* A refused growth changes nothing. */
  assert_int_equal(onyx_kv_cache_reserve(kv, 100, NULL), ONYX_STATUS_OK);
  onyx_kv_cache_stats before, after;
  onyx_kv_cache_get_stats(kv, &before);
  assert_int_equal(onyx_kv_cache_reserve(kv, 90000, &e), ONYX_STATUS_TIER_EXHAUSTED);
  onyx_error_free(e);
  onyx_kv_cache_get_stats(kv, &after);
  assert_int_equal(after.committed_bytes, before.committed_bytes);
  assert_int_equal(after.capacity, before.capacity);
  uint64_t used[ONYX_REQUESTER_COUNT_];
  onyx_runtime_memory_usage(rt, used, NULL);
  assert_int_equal(used[ONYX_REQUESTER_KV_CACHE], before.committed_bytes);
  onyx_kv_cache_destroy(kv);
  onyx_runtime_destroy(rt);
}

static void provider_memory_limit_caps_its_tier(void **state) {
  (void)state;
  char ini[1024];
  snprintf(ini, sizeof ini, "[provider.cpu]\npath = %s\nmemory_limit = 2MiB\n", CPU_PROVIDER);
  char *path = write_temp_file(".ini", ini);
  onyx_runtime *rt = NULL;
  assert_int_equal(onyx_runtime_create(path, &rt, NULL), ONYX_STATUS_OK);
  remove_temp_file(path);
  onyx_kv_cache *kv = make_cache(rt, 1, ONYX_KV_GROWTH_REALLOC, 100000);
  onyx_error *e = NULL;
  assert_int_equal(onyx_kv_cache_check(kv, 1000, &e), ONYX_STATUS_OK);
  assert_int_equal(onyx_kv_cache_check(kv, 50000, &e), ONYX_STATUS_TIER_EXHAUSTED);
  assert_non_null(strstr(onyx_error_message(e), "tier host"));
  assert_non_null(strstr(onyx_error_message(e), "limit 2097152"));
  onyx_error_free(e);
  onyx_kv_cache_destroy(kv);
  onyx_runtime_destroy(rt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(grows_in_place_without_moving),
      cmocka_unit_test(seq_major_commits_less_than_head_major),
      cmocka_unit_test(grows_by_copy_moving_the_old_buckets),
      cmocka_unit_test(admission_refuses_with_numbers),
      cmocka_unit_test(provider_memory_limit_caps_its_tier),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
