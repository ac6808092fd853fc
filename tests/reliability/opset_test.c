/*
 * Opset imports newer than anything loaded supports are refused at session creation,
 * naming the node, its op and the opset (a model importing ai.onnx opset 99 once ran
 * on today's kernels, which ONNX Runtime refuses) — unless a kernel claims that
 * opset. Models are built in memory with the loader tests' helpers.
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

/* y = OP(a, b) (or OP(a)) on float32 [2, 3], in `domain` at `opset`. */
static uint8_t *model_of(lt_arena *a, const char *domain, int64_t opset, const char *op,
                         bool binary, size_t *size) {
  Onnx__ModelProto *m = lt_model(a, domain[0] ? 17 : opset);
  if (domain[0]) lt_opset(a, m, domain, opset);
  const int64_t dims[] = {2, 3};
  lt_input(a, m->graph, "a", ONYX_DTYPE_FLOAT32, 2, dims);
  if (binary) lt_input(a, m->graph, "b", ONYX_DTYPE_FLOAT32, 2, dims);
  const char *two[] = {"a", "b", NULL}, *one[] = {"a", NULL}, *out[] = {"y", NULL};
  Onnx__NodeProto *n = lt_node(a, m->graph, op, "the_node", binary ? two : one, out);
  if (domain[0]) n->domain = lt_str(a, domain);
  lt_output(a, m->graph, "y", ONYX_DTYPE_FLOAT32, 2, dims);
  return lt_pack(a, m, size);
}

static onyx_status create(onyx_runtime *rt, const uint8_t *bytes, size_t size, char *msg,
                          size_t cap) {
  onyx_session *s = NULL;
  onyx_error *e = NULL;
  onyx_status st = onyx_session_create_from_bytes(rt, bytes, size, NULL, &s, &e);
  snprintf(msg, cap, "%s", e ? onyx_error_message(e) : "");
  onyx_error_free(e);
  onyx_session_destroy(s);
  return st;
}

static void newer_default_opset_is_refused(void **state) {
  (void)state;
  char ini[512], msg[1024];
  snprintf(ini, sizeof ini, "[provider.cpu]\npath = %s\n", CPU_PROVIDER);
  onyx_runtime *rt = runtime_of(ini);
  lt_arena a = {0};
  size_t size = 0;
  uint8_t *bytes = model_of(&a, "", 99, "Add", true, &size);
  assert_int_equal(create(rt, bytes, size, msg, sizeof msg), ONYX_STATUS_UNSUPPORTED);
  assert_contains(msg, "node 0 'the_node' (Add): the model imports ai.onnx opset 99, newer than "
                       "this build supports (ai.onnx up to opset 28)");
  assert_contains(msg, "no kernel claims Add at opset 99");
  /* The newest known opset still runs on the open-ended kernels. */
  bytes = model_of(&a, "", 28, "Add", true, &size);
  assert_int_equal(create(rt, bytes, size, msg, sizeof msg), ONYX_STATUS_OK);
  lt_arena_free(&a);
  onyx_runtime_destroy(rt);
}

/* A kernel that names opset 99 itself claims it for its op; the other ops of the
 * domain stay bounded. */
static void a_kernel_may_claim_a_newer_opset(void **state) {
  (void)state;
  char ini[1024], msg[1024];
  snprintf(ini, sizeof ini, "[provider.rmock]\npath = %s\n[provider.cpu]\npath = %s\n",
           RELIABILITY_MOCK, CPU_PROVIDER);
  onyx_runtime *rt = runtime_of(ini);
  lt_arena a = {0};
  size_t size = 0;
  uint8_t *bytes = model_of(&a, "", 99, "Add", true, &size);
  onyx_session *s = NULL;
  onyx_error *e = NULL;
  assert_int_equal(onyx_session_create_from_bytes(rt, bytes, size, NULL, &s, &e), ONYX_STATUS_OK);
  assert_string_equal(onyx_session_node_provider(s, 0), "rmock");
  float av[6], bv[6];
  for (int i = 0; i < 6; ++i) {
    av[i] = (float)rand() / RAND_MAX - 0.5f;
    bv[i] = (float)rand() / RAND_MAX + 0.25f;
  }
  onyx_tensor in[2] = {
      {.dtype = ONYX_DTYPE_FLOAT32, .rank = 2, .dims = {2, 3}, .data = av},
      {.dtype = ONYX_DTYPE_FLOAT32, .rank = 2, .dims = {2, 3}, .data = bv},
  };
  onyx_tensor y;
  memset(&y, 0, sizeof y);
  assert_int_equal(onyx_session_run(s, NULL, in, 2, &y, &e), ONYX_STATUS_OK);
  for (int i = 0; i < 6; ++i) assert_true(((float *)y.data)[i] == av[i] + bv[i]);
  onyx_tensor_data_free(y.data);
  onyx_session_destroy(s);
  bytes = model_of(&a, "", 99, "Relu", false, &size);
  assert_int_equal(create(rt, bytes, size, msg, sizeof msg), ONYX_STATUS_UNSUPPORTED);
  assert_contains(msg, "(Relu): the model imports ai.onnx opset 99");
  lt_arena_free(&a);
  onyx_runtime_destroy(rt);
}

/* A domain the core does not list is bounded by its kernels: the workspace mock's
 * Scratch registers opset 1 (open-ended), so opset 2 of onyx.ws is refused. */
static void other_domains_are_bounded_by_their_kernels(void **state) {
  (void)state;
  char ini[512], msg[1024];
  snprintf(ini, sizeof ini, "[provider.wsmock]\npath = %s\n", MOCK_WS);
  onyx_runtime *rt = runtime_of(ini);
  lt_arena a = {0};
  size_t size = 0;
  uint8_t *bytes = model_of(&a, "onyx.ws", 2, "Scratch", false, &size);
  assert_int_equal(create(rt, bytes, size, msg, sizeof msg), ONYX_STATUS_UNSUPPORTED);
  assert_contains(msg, "(onyx.ws::Scratch): the model imports onyx.ws opset 2, newer than this "
                       "build supports (onyx.ws up to opset 1)");
  bytes = model_of(&a, "onyx.ws", 1, "Scratch", false, &size);
  assert_int_equal(create(rt, bytes, size, msg, sizeof msg), ONYX_STATUS_OK);
  lt_arena_free(&a);
  onyx_runtime_destroy(rt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(newer_default_opset_is_refused),
      cmocka_unit_test(a_kernel_may_claim_a_newer_opset),
      cmocka_unit_test(other_domains_are_bounded_by_their_kernels),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
