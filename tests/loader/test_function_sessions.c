/*
 * Model-local functions through the public API on the CPU provider: a call the
 * provider claims stays one node, an unclaimed one runs as its body, and a required
 * attribute the call leaves unset is refused naming the function, the call and the
 * attribute.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "onyx.h"

static onyx_runtime *g_rt;
static char g_ini[64];

static int setup(void **state) {
  (void)state;
  snprintf(g_ini, sizeof g_ini, "/tmp/onyx-functions-XXXXXX");
  int fd = mkstemp(g_ini);
  if (fd < 0) return -1;
  FILE *f = fdopen(fd, "w");
  if (f == NULL) return -1;
  fprintf(f, "[provider.cpu]\npath = %s\n", CPU_PROVIDER);
  fclose(f);
  onyx_error *e = NULL;
  onyx_status st = onyx_runtime_create(g_ini, &g_rt, &e);
  if (st != ONYX_STATUS_OK) fprintf(stderr, "runtime: %s\n", onyx_error_message(e));
  onyx_error_free(e);
  return st == ONYX_STATUS_OK ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  onyx_runtime_destroy(g_rt);
  unlink(g_ini);
  return 0;
}

/* Creates a session for fixture `name`; `skip` names optimizations to skip (NULL none). */
static onyx_status create(const char *name, const char *skip, onyx_session **out, char *msg,
                          size_t cap) {
  char path[512];
  snprintf(path, sizeof path, "%s/functions/%s.onnx", ONYX_LOADER_FIXTURES_DIR, name);
  onyx_session_options options = {.struct_size = sizeof options, .disable_optimizations = skip};
  onyx_error *e = NULL;
  onyx_status st = onyx_session_create(g_rt, path, &options, out, &e);
  snprintf(msg, cap, "%s", st == ONYX_STATUS_OK ? "" : onyx_error_message(e));
  onyx_error_free(e);
  return st;
}

static void expect_ops(const onyx_session *s, const char *const *ops, size_t count) {
  assert_int_equal(onyx_session_node_count(s), count);
  for (size_t i = 0; i < count; ++i) {
    assert_string_equal(onyx_session_node_op(s, i), ops[i]);
    assert_string_equal(onyx_session_node_provider(s, i), "cpu");
  }
}

/* The CPU provider has com.microsoft::SkipSimplifiedLayerNormalization: the call
 * stays a node, and the function body beside it is not used. */
static void test_claimed_call_is_kept(void **state) {
  (void)state;
  onyx_session *s = NULL;
  char msg[1024];
  assert_int_equal(create("skip_claimed", NULL, &s, msg, sizeof msg), ONYX_STATUS_OK);
  const char *ops[] = {"SkipSimplifiedLayerNormalization", "Add"};
  expect_ops(s, ops, 2);
  assert_string_equal(onyx_session_node_name(s, 0), "sk0");
  onyx_session_destroy(s);
}

/* The same body under a name nobody claims is inlined at the call site, before the
 * optimizations, which then drop the placeholders for outputs nobody reads. */
static void test_unclaimed_call_is_inlined(void **state) {
  (void)state;
  onyx_session *s = NULL;
  char msg[1024];
  assert_int_equal(create("skip_inlined", "all", &s, msg, sizeof msg), ONYX_STATUS_OK);
  const char *all[] = {"Add", "RMSNormalization", "Constant", "Constant", "Add"};
  expect_ops(s, all, 5);
  assert_string_equal(onyx_session_node_name(s, 1), "sk0/SkipRms/rms");
  onyx_session_destroy(s);
  assert_int_equal(create("skip_inlined", NULL, &s, msg, sizeof msg), ONYX_STATUS_OK);
  const char *optimized[] = {"Add", "RMSNormalization", "Add"};
  expect_ops(s, optimized, 3);
  onyx_session_destroy(s);
}

static void test_missing_required_attribute(void **state) {
  (void)state;
  onyx_session *s = NULL;
  char msg[1024];
  onyx_status st = create("missing_attr", NULL, &s, msg, sizeof msg);
  print_message("%s\n", msg);
  assert_int_not_equal(st, ONYX_STATUS_OK);
  assert_null(s);
  const char *needles[] = {"'c0/ToType/cast'", "'to'", "'local::ToType'", "at 'c0'", "'dtype'"};
  for (size_t i = 0; i < sizeof needles / sizeof *needles; ++i)
    if (strstr(msg, needles[i]) == NULL) fail_msg("message lacks %s: %s", needles[i], msg);
}

static void test_recursion_is_refused(void **state) {
  (void)state;
  onyx_session *s = NULL;
  char msg[1024];
  assert_int_equal(create("recursion", NULL, &s, msg, sizeof msg), ONYX_STATUS_INVALID_MODEL);
  assert_non_null(strstr(msg, "'local::Ping' -> 'local::Pong' -> 'local::Ping'"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_claimed_call_is_kept),
      cmocka_unit_test(test_unclaimed_call_is_inlined),
      cmocka_unit_test(test_missing_required_attribute),
      cmocka_unit_test(test_recursion_is_refused),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
