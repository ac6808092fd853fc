/*
 * Fault injection: every allocation the loader makes is failed in turn (the test links
 * with -Wl,--wrap=malloc,--wrap=calloc), and each failure must come back as
 * OUT_OF_MEMORY with a message, no output and nothing leaked (the sanitizer build
 * checks leaks). protobuf-c and libc allocate through their own references, so only
 * the loader's allocations are counted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader_test_util.h"

#define ERR_CAP 1024

void *__real_malloc(size_t size);
void *__real_calloc(size_t count, size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t count, size_t size);

static long g_countdown = -1; /* allocations to let through before failing one; -1: off */
static long g_failed;

static int inject(void) {
  if (g_countdown < 0) return 0;
  if (g_countdown-- == 0) {
    ++g_failed;
    g_countdown = -1;
    return 1;
  }
  return 0;
}

void *__wrap_malloc(size_t size) { return inject() ? NULL : __real_malloc(size); }

void *__wrap_calloc(size_t count, size_t size) {
  return inject() ? NULL : __real_calloc(count, size);
}

typedef onyx_status (*load_fn)(void *arg, char *err);

/* Fails allocation 0, 1, 2, ... of `fn` until a run makes no allocation fail. */
static void fail_each_allocation(load_fn fn, void *arg) {
  long n = 0;
  for (;; ++n) {
    char err[ERR_CAP];
    err[0] = '\0';
    g_failed = 0;
    g_countdown = n;
    onyx_status st = fn(arg, err);
    g_countdown = -1;
    if (g_failed == 0) {
      if (st != ONYX_STATUS_OK) fail_msg("clean run failed: %s", err);
      break;
    }
    if (st != ONYX_STATUS_OUT_OF_MEMORY) {
      fail_msg("allocation %ld failed: want OUT_OF_MEMORY, got %s: %s", n, onyx_status_str(st),
               err);
    }
    if (err[0] == '\0') fail_msg("allocation %ld failed without a message", n);
  }
  print_message("%ld allocations, each failed once\n", n);
  assert_true(n > 0);
}

typedef struct bytes_arg {
  const uint8_t *bytes;
  size_t size;
} bytes_arg;

static onyx_status load_bytes(void *arg, char *err) {
  bytes_arg *b = arg;
  onyx__graph *g = NULL;
  onyx_status st = onyx__model_load_bytes(b->bytes, b->size, NULL, NULL, &g, err, ERR_CAP);
  if (st == ONYX_STATUS_OK) {
    lt_check_graph(g);
    onyx__graph_free(g);
  } else {
    assert_null(g);
  }
  return st;
}

static onyx_status load_file(void *arg, char *err) {
  onyx__graph *g = NULL;
  onyx_status st = onyx__model_load_file(arg, &g, err, ERR_CAP);
  if (st == ONYX_STATUS_OK) onyx__graph_free(g);
  return st;
}

static onyx_status load_tensor_file(void *arg, char *err) {
  onyx_tensor t;
  char *name = NULL;
  onyx_status st = onyx__tensor_proto_load_file(arg, &t, &name, err, ERR_CAP);
  if (st == ONYX_STATUS_OK) {
    free(t.data);
    free(name);
  }
  return st;
}

static void test_rich_model(void **state) {
  (void)state;
  lt_arena a = {0};
  bytes_arg b;
  b.bytes = lt_pack(&a, lt_rich_model(&a), &b.size);
  fail_each_allocation(load_bytes, &b);
  lt_arena_free(&a);
}

static void test_external_fixture(void **state) {
  (void)state;
  fail_each_allocation(load_file, ONYX_LOADER_FIXTURES_DIR "/external/model.onnx");
  fail_each_allocation(load_file, ONYX_LOADER_FIXTURES_DIR "/initializers.onnx");
}

static void test_tensor_file(void **state) {
  (void)state;
  FILE *f = fopen(ONYX_NODE_TESTS_DIR "/test_add/test_data_set_0/input_0.pb", "rb");
  if (f == NULL) skip();
  fclose(f);
  fail_each_allocation(load_tensor_file,
                       ONYX_NODE_TESTS_DIR "/test_add/test_data_set_0/input_0.pb");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rich_model),
      cmocka_unit_test(test_external_fixture),
      cmocka_unit_test(test_tensor_file),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
