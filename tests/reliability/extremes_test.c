/*
 * Every size computed from input, fed its extreme: the checked-arithmetic helper at
 * its boundaries, the KV cache with head sizes and lengths whose byte counts pass
 * 64 bits (a wrapped row size once divided by zero, a wrapped unit size once gave a
 * 512-token view to a 2^62-token cache, and copy growth once doubled its bucket
 * forever), and session inputs and plans whose geometry overflows. Each is refused
 * with a message that names the numbers, or admitted and refused by the governor;
 * none crashes, hangs or allocates what it cannot hold. The tools' and the
 * generation library's extremes run from extremes.sh.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../core/test_support.h"
#include "checked_math.h"
#include "onyx.h"

#define BIG (INT64_C(1) << 62)

static void assert_contains_(const char *hay, const char *needle, const char *file, int line) {
  if (hay == NULL || strstr(hay, needle) == NULL) {
    print_error("%s:%d: expected '%s' in '%s'\n", file, line, needle, hay ? hay : "(null)");
    _fail(file, line);
  }
}
#define assert_contains(hay, needle) assert_contains_((hay), (needle), __FILE__, __LINE__)

/* ------------------------------------------------------------ the helper */

static void checked_math_boundaries(void **state) {
  (void)state;
  uint64_t u = 0;
  assert_false(onyx__ckd_add_u64(&u, UINT64_MAX - 1, 1));
  assert_true(u == UINT64_MAX);
  assert_true(onyx__ckd_add_u64(&u, UINT64_MAX, 1));
  assert_false(onyx__ckd_mul_u64(&u, UINT64_C(1) << 32, (UINT64_C(1) << 32) - 1));
  assert_true(onyx__ckd_mul_u64(&u, UINT64_C(1) << 32, UINT64_C(1) << 32));
  assert_false(onyx__ckd_mul_u64(&u, 0, UINT64_MAX));
  size_t z = 0;
  assert_true(onyx__ckd_array(&z, SIZE_MAX / 8 + 1, 8));
  assert_false(onyx__ckd_array(&z, SIZE_MAX / 8, 8));
  assert_true(onyx__ckd_add_size(&z, SIZE_MAX, 1));
  int64_t c = 0;
  assert_false(onyx__ckd_mul_count(&c, INT64_C(1) << 31, INT64_C(1) << 31));
  assert_true(c == INT64_C(1) << 62);
  assert_true(onyx__ckd_mul_count(&c, INT64_C(1) << 32, INT64_C(1) << 31)); /* 2^63 */
  assert_true(onyx__ckd_mul_count(&c, -1, 1));
  assert_true(onyx__ckd_add_count(&c, INT64_MAX, 1));
  assert_false(onyx__ckd_add_count(&c, INT64_MAX - 1, 1));
  assert_false(onyx__ckd_round_up_u64(&u, 1, 4096));
  assert_true(u == 4096);
  assert_true(onyx__ckd_round_up_u64(&u, UINT64_MAX - 10, 4096));
  assert_true(onyx__ckd_round_up_u64(&u, 1, 0));

  const int64_t square[] = {INT64_C(1) << 32, INT64_C(1) << 32};
  assert_true(onyx__ckd_numel(&c, square, 2));
  const int64_t negative[] = {4, -1};
  assert_true(onyx__ckd_numel(&c, negative, 2));
  assert_false(onyx__ckd_numel(&c, NULL, 0));
  assert_true(c == 1);
  const int64_t wide[] = {INT64_C(1) << 61};
  uint64_t bytes = 0;
  assert_false(onyx__ckd_bytes(&bytes, wide, 1, 2));
  assert_true(onyx__ckd_bytes(&bytes, wide, 1, 4)); /* 2^63: past INT64_MAX */
  assert_true(onyx__ckd_bytes(&bytes, wide, ONYX_MAX_RANK + 1, 1));
  onyx_tensor t = {.dtype = ONYX_DTYPE_FLOAT32, .rank = 2, .dims = {3, 5}};
  assert_false(onyx__ckd_tensor_bytes(&bytes, &t));
  assert_true(bytes == 60);
}

/* ------------------------------------------------------------ KV cache */

static onyx_runtime *cpu_runtime(void) {
  char ini[1024];
  snprintf(ini, sizeof ini, "[governor]\nhost = 64MiB\n[provider.cpu]\npath = %s\n", CPU_PROVIDER);
  char *path = write_temp_file(".ini", ini);
  onyx_runtime *rt = NULL;
  onyx_error *e = NULL;
  onyx_status st = onyx_runtime_create(path, &rt, &e);
  if (st != ONYX_STATUS_OK) print_error("%s\n", onyx_error_message(e));
  onyx_error_free(e);
  remove_temp_file(path);
  assert_int_equal(st, ONYX_STATUS_OK);
  return rt;
}

/* Creates a cache; returns its status and keeps the message in msg. */
static onyx_status kv_try(onyx_runtime *rt, uint32_t layers, int64_t heads, int64_t head_size,
                          int64_t max_length, uint32_t growth, onyx_kv_cache **out, char *msg,
                          size_t cap) {
  onyx_kv_cache_options o = {.struct_size = sizeof o,
                             .layers = layers,
                             .batch = 1,
                             .kv_heads = heads,
                             .head_size = head_size,
                             .dtype = ONYX_DTYPE_FLOAT32,
                             .layout = 0,
                             .max_length = max_length,
                             .growth = growth};
  onyx_error *e = NULL;
  *out = NULL;
  onyx_status st = onyx_kv_cache_create(rt, &o, out, &e);
  snprintf(msg, cap, "%s", e ? onyx_error_message(e) : "");
  onyx_error_free(e);
  return st;
}

static void kv_head_size_overflow(void **state) {
  (void)state;
  onyx_runtime *rt = cpu_runtime();
  char msg[1024];
  for (uint32_t growth = 0; growth < 2; ++growth) {
    onyx_kv_cache *kv = NULL;
    /* 2^62 floats a row: 2^64 bytes, once wrapped to a row of 0 and a division by it. */
    assert_int_equal(kv_try(rt, 2, 2, BIG, 16, growth, &kv, msg, sizeof msg),
                     ONYX_STATUS_INVALID_ARGUMENT);
    assert_null(kv);
    assert_contains(msg, "head size 4611686018427387904");
    assert_contains(msg, "overflows 64 bits");
  }
  onyx_runtime_destroy(rt);
}

static void kv_length_overflow(void **state) {
  (void)state;
  onyx_runtime *rt = cpu_runtime();
  char msg[1024];
  const int64_t lengths[] = {BIG, BIG + 2, INT64_MAX};
  for (uint32_t growth = 0; growth < 2; ++growth) {
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; ++i) {
      onyx_kv_cache *kv = NULL;
      /* Once admitted in place with a 512-token view. */
      assert_int_equal(kv_try(rt, 4, 2, 32, lengths[i], growth, &kv, msg, sizeof msg),
                       ONYX_STATUS_INVALID_ARGUMENT);
      assert_null(kv);
      assert_contains(msg, "tokens overflows 64 bits");
    }
  }
  onyx_runtime_destroy(rt);
}

/* A length whose bytes fit 64 bits but no machine: admission says so, growth by copy
 * sizes its bucket without doubling past it (once an endless loop), and a cache
 * grown in place keeps views as long as it promises. */
static void kv_huge_but_representable(void **state) {
  (void)state;
  onyx_runtime *rt = cpu_runtime();
  char msg[1024];
  const int64_t length = INT64_C(1) << 56; /* x 1 head x 1 float x 2 tensors = 2^59 bytes */
  onyx_kv_cache *kv = NULL;
  assert_int_equal(kv_try(rt, 1, 1, 1, length, ONYX_KV_GROWTH_REALLOC, &kv, msg, sizeof msg),
                   ONYX_STATUS_OK);
  onyx_error *e = NULL;
  assert_int_equal(onyx_kv_cache_check(kv, length, &e), ONYX_STATUS_TIER_EXHAUSTED);
  assert_contains(onyx_error_message(e), "does not fit");
  onyx_error_free(e);
  e = NULL;
  assert_int_equal(onyx_kv_cache_reserve(kv, length - 1, &e), ONYX_STATUS_TIER_EXHAUSTED);
  onyx_error_free(e);
  e = NULL;
  assert_int_equal(onyx_kv_cache_reserve(kv, 100, &e), ONYX_STATUS_OK);
  onyx_kv_cache_stats ks;
  onyx_kv_cache_get_stats(kv, &ks);
  assert_true(ks.capacity >= 100 && ks.view_length == ks.capacity);
  onyx_kv_cache_destroy(kv);

  /* In place: 2^59 bytes of address space is more than a host reservation takes here;
   * either it is refused at once or its views span every token it admits. */
  onyx_status st = kv_try(rt, 1, 1, 1, length, ONYX_KV_GROWTH_IN_PLACE, &kv, msg, sizeof msg);
  if (st == ONYX_STATUS_OK) {
    onyx_kv_cache_get_stats(kv, &ks);
    assert_true(!ks.in_place || ks.view_length >= length);
    assert_int_equal(onyx_kv_cache_check(kv, length, &e), ONYX_STATUS_TIER_EXHAUSTED);
    onyx_error_free(e);
    onyx_kv_cache_destroy(kv);
  } else {
    assert_contains(msg, "KV cache");
  }
  onyx_runtime_destroy(rt);
}

static void kv_layers_overflow(void **state) {
  (void)state;
  onyx_runtime *rt = cpu_runtime();
  char msg[1024];
  onyx_kv_cache *kv = NULL;
  assert_int_equal(kv_try(rt, UINT32_MAX, 1, 1, 1, ONYX_KV_GROWTH_REALLOC, &kv, msg, sizeof msg),
                   ONYX_STATUS_INVALID_ARGUMENT);
  assert_contains(msg, "4294967295 layers");
  onyx_runtime_destroy(rt);
}

/* ------------------------------------------------------------ sessions */

static onyx_runtime *ws_runtime(void) {
  char ini[1024];
  snprintf(ini, sizeof ini, "[governor]\nhost = 64MiB\n[provider.wsmock]\npath = %s\n", MOCK_WS);
  char *path = write_temp_file(".ini", ini);
  onyx_runtime *rt = NULL;
  onyx_error *e = NULL;
  onyx_status st = onyx_runtime_create(path, &rt, &e);
  if (st != ONYX_STATUS_OK) print_error("%s\n", onyx_error_message(e));
  onyx_error_free(e);
  remove_temp_file(path);
  assert_int_equal(st, ONYX_STATUS_OK);
  return rt;
}

/* x [1, S, 8]: S so large that the input's bytes pass 2^63 is refused by name, by
 * run and by plan alike; S whose bytes fit but no memory plans and is refused by
 * admission with the governor's numbers. */
static void session_geometry_overflow(void **state) {
  (void)state;
  onyx_runtime *rt = ws_runtime();
  onyx_session *s = NULL;
  onyx_error *e = NULL;
  assert_int_equal(onyx_session_create(rt, MODELS_DIR "/ws_chain.onnx", NULL, &s, &e),
                   ONYX_STATUS_OK);
  static float cell;
  onyx_tensor x = {.dtype = ONYX_DTYPE_FLOAT32, .rank = 3, .dims = {1, BIG, 8}, .data = &cell};
  onyx_tensor y;
  memset(&y, 0, sizeof y);
  assert_int_equal(onyx_session_run(s, NULL, &x, 1, &y, &e), ONYX_STATUS_INVALID_ARGUMENT);
  assert_contains(onyx_error_message(e), "input 'x': invalid dtype or dims");
  onyx_error_free(e);
  e = NULL;
  onyx_plan *plan = NULL;
  assert_int_equal(onyx_session_plan(s, &x, 1, &plan, &e), ONYX_STATUS_INVALID_ARGUMENT);
  onyx_error_free(e);
  e = NULL;
  x.dims[1] = INT64_C(1) << 28; /* 8 GiB of input: representable, never read or allocated */
  onyx_status st = onyx_session_plan(s, &x, 1, &plan, &e);
  if (st == ONYX_STATUS_OK) {
    assert_int_not_equal(onyx_plan_check(plan, &e), ONYX_STATUS_OK);
    onyx_plan_destroy(plan);
  }
  onyx_error_free(e);
  e = NULL;
  assert_int_not_equal(onyx_session_run(s, NULL, &x, 1, &y, &e), ONYX_STATUS_OK);
  onyx_error_free(e);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(checked_math_boundaries), cmocka_unit_test(kv_head_size_overflow),
      cmocka_unit_test(kv_length_overflow),      cmocka_unit_test(kv_huge_but_representable),
      cmocka_unit_test(kv_layers_overflow),      cmocka_unit_test(session_geometry_overflow),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
