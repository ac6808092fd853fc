/*
 * A kernel's own reason reaches the user where planning, workspace or infer fail:
 * the callbacks without a message channel of their own hand it to the host table's
 * set_error (ABI v2), and the core puts it after the node and op. Checked on a mock
 * kernel that refuses on purpose, on the CPU provider's broadcasting, and on a v1
 * provider, whose failures still say that no reason came.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../core/test_support.h"
#include "loader_test_util.h"
#include "onyx.h"

static void assert_contains_(const char *hay, const char *needle, const char *file, int line) {
  if (hay == NULL || strstr(hay, needle) == NULL) {
    print_error("%s:%d: expected '%s' in '%s'\n", file, line, needle, hay ? hay : "(null)");
    _fail(file, line);
  }
}
#define assert_contains(hay, needle) assert_contains_((hay), (needle), __FILE__, __LINE__)

static onyx_runtime *runtime_of(const char *sections) {
  char *path = write_temp_file(".ini", sections);
  onyx_runtime *rt = NULL;
  onyx_error *e = NULL;
  onyx_status st = onyx_runtime_create(path, &rt, &e);
  if (st != ONYX_STATUS_OK) print_error("%s\n", onyx_error_message(e));
  onyx_error_free(e);
  remove_temp_file(path);
  assert_int_equal(st, ONYX_STATUS_OK);
  return rt;
}

/* One node OP(inputs...) -> y over float32 inputs of rank 2 with free dims. */
static onyx_session *session_of(onyx_runtime *rt, const char *domain, const char *op, int inputs) {
  lt_arena a = {0};
  Onnx__ModelProto *m = lt_model(&a, 17);
  if (domain[0]) lt_opset(&a, m, domain, 1);
  const int64_t free_dims[] = {-1, -1};
  static const char *names[] = {"a", "b", NULL};
  const char *ins[3] = {NULL, NULL, NULL}, *out[] = {"y", NULL};
  for (int i = 0; i < inputs; ++i) {
    ins[i] = names[i];
    lt_input(&a, m->graph, names[i], ONYX_DTYPE_FLOAT32, 2, free_dims);
  }
  Onnx__NodeProto *n = lt_node(&a, m->graph, op, "the_node", ins, out);
  if (domain[0]) n->domain = lt_str(&a, domain);
  lt_output(&a, m->graph, "y", ONYX_DTYPE_FLOAT32, -1, NULL);
  size_t size = 0;
  uint8_t *bytes = lt_pack(&a, m, &size);
  onyx_session *s = NULL;
  onyx_error *e = NULL;
  onyx_status st = onyx_session_create_from_bytes(rt, bytes, size, NULL, &s, &e);
  if (st != ONYX_STATUS_OK) print_error("%s\n", onyx_error_message(e));
  onyx_error_free(e);
  lt_arena_free(&a);
  assert_int_equal(st, ONYX_STATUS_OK);
  return s;
}

static float cells[64];

static onyx_tensor input(int64_t rows, int64_t cols) {
  for (int i = 0; i < 64; ++i) cells[i] = (float)rand() / RAND_MAX - 0.5f;
  return (onyx_tensor){.dtype = ONYX_DTYPE_FLOAT32, .rank = 2, .dims = {rows, cols}, .data = cells};
}

/* The plan's and the run's messages for these inputs (both must fail). */
static void expect_failures(onyx_session *s, const onyx_tensor *in, size_t n, const char *want) {
  onyx_plan *plan = NULL;
  onyx_error *e = NULL;
  assert_int_not_equal(onyx_session_plan(s, in, n, &plan, &e), ONYX_STATUS_OK);
  assert_null(plan);
  assert_contains(onyx_error_message(e), want);
  onyx_error_free(e);
  e = NULL;
  onyx_tensor y;
  memset(&y, 0, sizeof y);
  assert_int_not_equal(onyx_session_run(s, NULL, in, n, &y, &e), ONYX_STATUS_OK);
  assert_contains(onyx_error_message(e), want);
  onyx_error_free(e);
}

static void mock_reasons_reach_the_user(void **state) {
  (void)state;
  char ini[512];
  snprintf(ini, sizeof ini, "[provider.rmock]\npath = %s\n", RELIABILITY_MOCK);
  onyx_runtime *rt = runtime_of(ini);
  onyx_session *s = session_of(rt, "onyx.rel", "Picky", 1);
  onyx_tensor x = input(3, 2);
  expect_failures(s, &x, 1,
                  "planning node 'the_node' (#0, Picky on rmock): its kernel cannot infer output "
                  "shapes for this geometry: Picky takes no first dim of 3 (invalid argument)");
  x = input(5, 2);
  expect_failures(s, &x, 1,
                  "its workspace callback failed: Picky has no workspace route for a "
                  "first dim of 5 (invalid argument)");
  /* A geometry it takes runs, and no stale reason is left behind. */
  x = input(4, 2);
  onyx_tensor y;
  onyx_error *e = NULL;
  assert_int_equal(onyx_session_run(s, NULL, &x, 1, &y, &e), ONYX_STATUS_OK);
  assert_true(((float *)y.data)[7] == cells[7]);
  onyx_tensor_data_free(y.data);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
}

static void cpu_reasons_reach_the_user(void **state) {
  (void)state;
  char ini[512];
  snprintf(ini, sizeof ini, "[provider.cpu]\npath = %s\n", CPU_PROVIDER);
  onyx_runtime *rt = runtime_of(ini);
  onyx_session *s = session_of(rt, "", "Add", 2);
  onyx_tensor in[2] = {input(2, 3), input(2, 4)};
  expect_failures(s, in, 2,
                  "(#0, Add on cpu): its kernel cannot infer output shapes for this "
                  "geometry: ");
  expect_failures(s, in, 2, "[2,3]");
  onyx_plan *plan = NULL;
  onyx_error *e = NULL;
  assert_int_not_equal(onyx_session_plan(s, in, 2, &plan, &e), ONYX_STATUS_OK);
  print_message("the CPU's reason: %s\n", onyx_error_message(e));
  onyx_error_free(e);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
}

/* A kernel that gives no reason (a v1 provider has no channel) still gets a message
 * naming node, op and status; a v1 provider loads and plans as before. */
static void silent_kernels_still_say_what_failed(void **state) {
  (void)state;
  char ini[1024];
  snprintf(ini, sizeof ini, "[provider.rmock]\npath = %s\n[provider.ws]\npath = %s\n",
           RELIABILITY_MOCK, MOCK_WS);
  onyx_runtime *rt = runtime_of(ini);
  onyx_session *s = session_of(rt, "onyx.rel", "Picky", 1);
  onyx_tensor x = input(7, 2);
  onyx_plan *plan = NULL;
  onyx_error *e = NULL;
  assert_int_equal(onyx_session_plan(s, &x, 1, &plan, &e), ONYX_STATUS_INVALID_ARGUMENT);
  assert_contains(onyx_error_message(e), "(#0, Picky on rmock): its kernel cannot infer output "
                                         "shapes for this geometry (invalid argument; the kernel "
                                         "gave no reason)");
  onyx_error_free(e);
  e = NULL;
  onyx_session_destroy(s);
  assert_int_equal(onyx_session_create(rt, MODELS_DIR "/ws_chain.onnx", NULL, &s, &e),
                   ONYX_STATUS_OK);
  onyx_tensor w = {.dtype = ONYX_DTYPE_FLOAT32, .rank = 3, .dims = {1, 4, 8}, .data = cells};
  assert_int_equal(onyx_session_plan(s, &w, 1, &plan, &e), ONYX_STATUS_OK);
  onyx_plan_destroy(plan);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(mock_reasons_reach_the_user),
      cmocka_unit_test(cpu_reasons_reach_the_user),
      cmocka_unit_test(silent_kernels_still_say_what_failed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
