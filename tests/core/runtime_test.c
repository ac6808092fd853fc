/*
 * Providers through plugins.ini: ABI negotiation against the mock providers, the
 * errors a config can produce, placement with fallback and strict mode, and runs of
 * small models end to end.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "onyx.h"
#include "test_support.h"

/* Creates a runtime from an ini text; returns its status and keeps the message. */
static onyx_status runtime_from(const char *ini, onyx_runtime **out_rt, char *msg, size_t cap) {
  char *path = write_temp_file(".ini", ini);
  assert_non_null(path);
  onyx_error *e = NULL;
  onyx_runtime *rt = NULL;
  onyx_status st = onyx_runtime_create(path, &rt, &e);
  snprintf(msg, cap, "%s", onyx_error_message(e));
  onyx_error_free(e);
  remove_temp_file(path);
  if (out_rt)
    *out_rt = rt;
  else
    onyx_runtime_destroy(rt);
  return st;
}

static void expect_failure(const char *lib, onyx_status want, const char *needle1,
                           const char *needle2) {
  char ini[1024], msg[2048];
  snprintf(ini, sizeof ini, "[provider.mock]\npath = %s\n", lib);
  onyx_status st = runtime_from(ini, NULL, msg, sizeof msg);
  print_message("message: %s\n", msg);
  assert_int_equal(st, want);
  assert_non_null(strstr(msg, needle1));
  if (needle2) assert_non_null(strstr(msg, needle2));
}

static void wrong_abi_names_both_versions(void **state) {
  (void)state;
  expect_failure(MOCK_WRONG_ABI, ONYX_STATUS_ABI_MISMATCH, "ABI 1..3", "ABI 99");
}

static void future_abi_is_refused(void **state) {
  (void)state;
  expect_failure(MOCK_FUTURE_ABI, ONYX_STATUS_ABI_MISMATCH, "ABI 1..3", "ABI 7");
}

static void missing_entry_symbol(void **state) {
  (void)state;
  expect_failure(MOCK_NO_ENTRY, ONYX_STATUS_PROVIDER_ERROR,
                 "does not export onyx_provider_factory_entry or onyx_provider_entry", NULL);
}

static void failing_init_keeps_provider_message(void **state) {
  (void)state;
  expect_failure(MOCK_FAILING_INIT, ONYX_STATUS_PROVIDER_ERROR, "init failed",
                 "mock device 3 is on fire");
}

static void missing_library_shows_dlerror(void **state) {
  (void)state;
  /* dlerror's text for a missing file names it and says why. */
  expect_failure("/nonexistent/libonyx_nothing.so", ONYX_STATUS_NOT_FOUND,
                 "/nonexistent/libonyx_nothing.so: cannot open shared object file", NULL);
}

static void declining_provider_is_skipped_unless_strict(void **state) {
  (void)state;
  char ini[1024], msg[2048];
  onyx_runtime *rt = NULL;
  snprintf(ini, sizeof ini, "[provider.gpu]\npath = %s\n[provider.mock]\npath = %s\n",
           MOCK_DECLINES, MOCK_GOOD);
  assert_int_equal(runtime_from(ini, &rt, msg, sizeof msg), ONYX_STATUS_OK);
  assert_int_equal(onyx_runtime_provider_count(rt), 1);
  assert_string_equal(onyx_runtime_provider_name(rt, 0), "mock");
  onyx_runtime_destroy(rt);
  snprintf(ini, sizeof ini, "[onyx]\nstrict = true\n[provider.gpu]\npath = %s\n", MOCK_DECLINES);
  assert_int_equal(runtime_from(ini, NULL, msg, sizeof msg), ONYX_STATUS_DEVICE_UNAVAILABLE);
  assert_non_null(strstr(msg, "no mock device present"));
}

static void config_errors_name_file_and_line(void **state) {
  (void)state;
  char msg[2048];
  char ini[1024];
  assert_int_equal(runtime_from("[onyx]\nstrict = maybe\n", NULL, msg, sizeof msg),
                   ONYX_STATUS_INVALID_CONFIG);
  assert_non_null(strstr(msg, ":2: strict must be true or false, got 'maybe'"));
  snprintf(ini, sizeof ini,
           "[provider.a]\npath = %s\n\n[provider.b]\npath = %s\n[provider.a]\n"
           "enabled = false\n",
           MOCK_GOOD, MOCK_GOOD);
  assert_int_equal(runtime_from(ini, NULL, msg, sizeof msg), ONYX_STATUS_INVALID_CONFIG);
  assert_non_null(strstr(msg, ":6: duplicate provider name 'a' (first defined at line 1)"));
  assert_int_equal(runtime_from("[provider.x]\nenabled = true\n", NULL, msg, sizeof msg),
                   ONYX_STATUS_INVALID_CONFIG);
  assert_non_null(strstr(msg, ":1: [provider.x] has no path"));
  assert_int_equal(runtime_from("[governor]\nhost = lots\n", NULL, msg, sizeof msg),
                   ONYX_STATUS_INVALID_CONFIG);
  assert_non_null(strstr(msg, "'lots' is not a byte size"));
  assert_int_equal(runtime_from("[onyx\n", NULL, msg, sizeof msg), ONYX_STATUS_INVALID_CONFIG);
  assert_non_null(strstr(msg, ":1: syntax error"));
  assert_int_equal(runtime_from("", NULL, msg, sizeof msg), ONYX_STATUS_INVALID_CONFIG);
  assert_non_null(strstr(msg, "no enabled provider"));
  onyx_error *e = NULL;
  onyx_runtime *rt = NULL;
  assert_int_equal(onyx_runtime_create("/nonexistent/plugins.ini", &rt, &e), ONYX_STATUS_NOT_FOUND);
  assert_non_null(strstr(onyx_error_message(e), "/nonexistent/plugins.ini: cannot open"));
  assert_null(rt);
  onyx_error_free(e);
}

static void unknown_keys_warn_but_load(void **state) {
  (void)state;
  char ini[1024], msg[2048];
  onyx_runtime *rt = NULL;
  snprintf(ini, sizeof ini,
           "[onyx]\ncolour = blue\n[provider.mock]\npath = %s\nflavour = x\n"
           "option.speed = fast\n[mystery]\nkey = 1\n",
           MOCK_GOOD);
  assert_int_equal(runtime_from(ini, &rt, msg, sizeof msg), ONYX_STATUS_OK);
  onyx_runtime_destroy(rt);
}

/* Runs model `name` from tests/models on [2,3] input; returns the status. */
static onyx_status run_model(onyx_runtime *rt, const char *name, const onyx_run_options *ro,
                             char *msg, size_t cap, float *out6) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", MODELS_DIR, name);
  onyx_session *s = NULL;
  onyx_error *e = NULL;
  onyx_status st = onyx_session_create(rt, path, NULL, &s, &e);
  if (st == ONYX_STATUS_OK) {
    float x[6] = {1.5f, -2.0f, 3.25f, 0.5f, -0.75f, 8.0f};
    onyx_tensor in = {.dtype = ONYX_DTYPE_FLOAT32, .rank = 2, .dims = {2, 3}, .data = x};
    onyx_tensor out;
    st = onyx_session_run(s, ro, &in, 1, &out, &e);
    if (st == ONYX_STATUS_OK) {
      assert_int_equal(out.rank, 2);
      if (out6) memcpy(out6, out.data, sizeof x);
      onyx_tensor_data_free(out.data);
    }
  }
  snprintf(msg, cap, "%s", onyx_error_message(e));
  onyx_error_free(e);
  onyx_session_destroy(s);
  return st;
}

static void good_and_null_optional_providers_run(void **state) {
  (void)state;
  const char *libs[] = {MOCK_GOOD, MOCK_NULL_OPTIONAL};
  for (int i = 0; i < 2; ++i) {
    char ini[1024], msg[2048];
    onyx_runtime *rt = NULL;
    snprintf(ini, sizeof ini, "[provider.mock]\npath = %s\n", libs[i]);
    assert_int_equal(runtime_from(ini, &rt, msg, sizeof msg), ONYX_STATUS_OK);
    float y[6];
    assert_int_equal(run_model(rt, "twice_chain.onnx", NULL, msg, sizeof msg, y), ONYX_STATUS_OK);
    assert_true(y[0] == 24.0f && y[5] == 128.0f);
    onyx_runtime_destroy(rt);
  }
}

static void unclaimed_op_fails_before_running(void **state) {
  (void)state;
  char ini[1024], msg[2048];
  onyx_runtime *rt = NULL;
  snprintf(ini, sizeof ini, "[provider.mock]\npath = %s\n", MOCK_GOOD);
  assert_int_equal(runtime_from(ini, &rt, msg, sizeof msg), ONYX_STATUS_OK);
  assert_int_equal(run_model(rt, "unclaimed.onnx", NULL, msg, sizeof msg, NULL),
                   ONYX_STATUS_UNSUPPORTED);
  assert_non_null(strstr(msg, "node 'nope' (#1): no provider has a kernel for onyx.test::Nope"));
  onyx_runtime_destroy(rt);
}

static void strict_mode_forbids_fallback(void **state) {
  (void)state;
  char ini[1024], msg[2048];
  onyx_runtime *rt = NULL;
  /* mock is preferred, cpu the fallback: Relu only cpu claims. */
  snprintf(ini, sizeof ini,
           "[onyx]\nstrict = true\n[provider.mock]\npath = %s\n"
           "[provider.cpu]\npath = %s\n",
           MOCK_GOOD, CPU_PROVIDER);
  assert_int_equal(runtime_from(ini, &rt, msg, sizeof msg), ONYX_STATUS_OK);
  assert_int_equal(run_model(rt, "mixed.onnx", NULL, msg, sizeof msg, NULL),
                   ONYX_STATUS_UNSUPPORTED);
  assert_non_null(strstr(msg, "would fall back to provider 'cpu'"));
  onyx_runtime_destroy(rt);
  snprintf(ini, sizeof ini, "[provider.mock]\npath = %s\n[provider.cpu]\npath = %s\n", MOCK_GOOD,
           CPU_PROVIDER);
  assert_int_equal(runtime_from(ini, &rt, msg, sizeof msg), ONYX_STATUS_OK);
  float y[6];
  assert_int_equal(run_model(rt, "mixed.onnx", NULL, msg, sizeof msg, y), ONYX_STATUS_OK);
  assert_true(y[0] == 3.0f && y[1] == 0.0f);
  onyx_runtime_destroy(rt);
}

static bool cancel_at_two(void *user, size_t next_node) {
  (void)user;
  return next_node == 2;
}

static void cancel_between_nodes(void **state) {
  (void)state;
  char ini[1024], msg[2048];
  onyx_runtime *rt = NULL;
  snprintf(ini, sizeof ini, "[provider.mock]\npath = %s\n", MOCK_GOOD);
  assert_int_equal(runtime_from(ini, &rt, msg, sizeof msg), ONYX_STATUS_OK);
  onyx_run_options ro = {.struct_size = sizeof ro, .should_cancel = cancel_at_two};
  assert_int_equal(run_model(rt, "twice_chain.onnx", &ro, msg, sizeof msg, NULL),
                   ONYX_STATUS_CANCELLED);
  assert_non_null(strstr(msg, "cancelled before node #2"));
  onyx_runtime_destroy(rt);
}

static void bad_inputs_are_named(void **state) {
  (void)state;
  char ini[1024], msg[2048];
  onyx_runtime *rt = NULL;
  snprintf(ini, sizeof ini, "[provider.mock]\npath = %s\n", MOCK_GOOD);
  assert_int_equal(runtime_from(ini, &rt, msg, sizeof msg), ONYX_STATUS_OK);
  char path[1024];
  snprintf(path, sizeof path, "%s/twice.onnx", MODELS_DIR);
  onyx_session *s = NULL;
  onyx_error *e = NULL;
  assert_int_equal(onyx_session_create(rt, path, NULL, &s, &e), ONYX_STATUS_OK);
  int64_t x[6] = {0};
  onyx_tensor in = {.dtype = ONYX_DTYPE_INT64, .rank = 2, .dims = {2, 3}, .data = x};
  onyx_tensor out;
  assert_int_equal(onyx_session_run(s, NULL, &in, 1, &out, &e), ONYX_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(onyx_error_message(e), "input 'x': expected dtype float32, got int64"));
  onyx_error_free(e);
  float xf[8] = {0};
  onyx_tensor in2 = {.dtype = ONYX_DTYPE_FLOAT32, .rank = 2, .dims = {2, 4}, .data = xf};
  assert_int_equal(onyx_session_run(s, NULL, &in2, 1, &out, &e), ONYX_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(onyx_error_message(e), "input 'x': dim 1 expected 3, got 4"));
  onyx_error_free(e);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(wrong_abi_names_both_versions),
      cmocka_unit_test(future_abi_is_refused),
      cmocka_unit_test(missing_entry_symbol),
      cmocka_unit_test(failing_init_keeps_provider_message),
      cmocka_unit_test(missing_library_shows_dlerror),
      cmocka_unit_test(declining_provider_is_skipped_unless_strict),
      cmocka_unit_test(config_errors_name_file_and_line),
      cmocka_unit_test(unknown_keys_warn_but_load),
      cmocka_unit_test(good_and_null_optional_providers_run),
      cmocka_unit_test(unclaimed_op_fails_before_running),
      cmocka_unit_test(strict_mode_forbids_fallback),
      cmocka_unit_test(cancel_between_nodes),
      cmocka_unit_test(bad_inputs_are_named),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
