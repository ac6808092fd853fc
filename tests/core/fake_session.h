/*
 * Helpers of the core tests that drive the fake-device mock (fake_device.h): the
 * library opened once per test program (the very instance the runtime dlopens, so
 * its counters are the runtime's), runtimes from ini text, sessions on the test
 * models, runs that print the error, and a check that nothing stays booked.
 * Include after <cmocka.h>; FAKE_DEVICE and MODELS_DIR come from CMake.
 */
#ifndef ONYX_TESTS_FAKE_SESSION_H
#define ONYX_TESTS_FAKE_SESSION_H

#include <dlfcn.h>

#include "fake_device.h"
#include "onyx.h"
#include "test_support.h"

static onyx_fake_device_stats_fn g_stats_get;
static const onyx_provider_table *g_table; /* the fake provider's own table */
static void *g_lib;

static inline onyx_fake_device_stats stats(void) {
  onyx_fake_device_stats s;
  g_stats_get(&s);
  return s;
}

static inline int fake_setup(void **state) {
  (void)state;
  g_lib = dlopen(FAKE_DEVICE, RTLD_NOW | RTLD_LOCAL);
  if (g_lib == NULL) {
    fprintf(stderr, "dlopen %s: %s\n", FAKE_DEVICE, dlerror());
    return -1;
  }
  *(void **)&g_stats_get = dlsym(g_lib, ONYX_FAKE_DEVICE_STATS_SYMBOL);
  onyx_provider_entry_fn entry;
  *(void **)&entry = dlsym(g_lib, ONYX_PROVIDER_ENTRY_SYMBOL);
  uint32_t abi = 0;
  if (entry == NULL || entry(ONYX_ABI_VERSION, &abi, &g_table) != ONYX_STATUS_OK) return -1;
  return g_stats_get ? 0 : -1;
}

static inline int fake_teardown(void **state) {
  (void)state;
  if (g_lib) dlclose(g_lib);
  return 0;
}

static inline onyx_runtime *runtime_ini(const char *ini) {
  char *path = write_temp_file(".ini", ini);
  assert_non_null(path);
  onyx_error *e = NULL;
  onyx_runtime *rt = NULL;
  onyx_status st = onyx_runtime_create(path, &rt, &e);
  if (st != ONYX_STATUS_OK) print_message("runtime: %s\n", onyx_error_message(e));
  onyx_error_free(e);
  remove_temp_file(path);
  assert_int_equal(st, ONYX_STATUS_OK);
  return rt;
}

static inline onyx_session *session(onyx_runtime *rt, const char *model) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", MODELS_DIR, model);
  onyx_session *s = NULL;
  onyx_error *e = NULL;
  onyx_status st = onyx_session_create(rt, path, NULL, &s, &e);
  if (st != ONYX_STATUS_OK) print_message("session: %s\n", onyx_error_message(e));
  onyx_error_free(e);
  assert_int_equal(st, ONYX_STATUS_OK);
  return s;
}

static inline onyx_status run(onyx_session *s, const onyx_run_options *ro, const onyx_tensor *in,
                              size_t n, onyx_tensor *out) {
  onyx_error *e = NULL;
  onyx_status st = onyx_session_run(s, ro, in, n, out, &e);
  if (st != ONYX_STATUS_OK) print_message("run: %s\n", onyx_error_message(e));
  onyx_error_free(e);
  return st;
}

static inline void assert_nothing_booked(const onyx_runtime *rt) {
  uint64_t used[ONYX_REQUESTER_COUNT_];
  onyx_runtime_memory_usage(rt, used, NULL);
  for (int r = 0; r < ONYX_REQUESTER_COUNT_; ++r) {
    if (used[r])
      print_message("%s still holds %llu bytes\n", onyx_requester_name((uint32_t)r),
                    (unsigned long long)used[r]);
    assert_int_equal(used[r], 0);
  }
}

#endif /* ONYX_TESTS_FAKE_SESSION_H */
