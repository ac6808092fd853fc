/*
 * The attention kernels' planning reasons reach the user (issue #16): GroupQueryAttention
 * and ONNX Attention are v3 definitions on the CPU provider, whose infer hands the
 * geometry check's words (input, expected vs got) to the core's sink, and the core puts
 * them after node and op in the planning error of onyx_session_plan and
 * onyx_session_run. Statuses are those the kernels always returned.
 */
#include <setjmp.h>
#include <stdbool.h>
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

static onyx_runtime *cpu_runtime(void) {
  char ini[512];
  snprintf(ini, sizeof ini, "[provider.cpu]\npath = %s\n", CPU_PROVIDER);
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

static onyx_session *session_of(onyx_runtime *rt, lt_arena *a, Onnx__ModelProto *m) {
  size_t size = 0;
  uint8_t *bytes = lt_pack(a, m, &size);
  onyx_session *s = NULL;
  onyx_error *e = NULL;
  onyx_status st = onyx_session_create_from_bytes(rt, bytes, size, NULL, &s, &e);
  if (st != ONYX_STATUS_OK) print_error("%s\n", onyx_error_message(e));
  onyx_error_free(e);
  lt_arena_free(a);
  assert_int_equal(st, ONYX_STATUS_OK);
  return s;
}

static void int_attr(lt_arena *a, Onnx__NodeProto *n, const char *name, int64_t v) {
  Onnx__AttributeProto *at = lt_attr(a, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
  at->has_i = 1;
  at->i = v;
}

/* GroupQueryAttention, num_heads 2, kv_num_heads 1, over inputs with free dims; with
 * total_from_float, total_sequence_length is Cast from a float32 input (a value the
 * planner does not know). */
static onyx_session *gqa_session(onyx_runtime *rt, bool total_from_float) {
  lt_arena a = {0};
  Onnx__ModelProto *m = lt_model(&a, 17);
  lt_opset(&a, m, "com.microsoft", 1);
  static const char *ins[] = {
      "query", "key", "value", "past_key", "past_value", "seqlens_k", "total_sequence_length",
      NULL};
  static const char *outs[] = {"output", "present_key", "present_value", NULL};
  const int64_t free4[] = {-1, -1, -1, -1}, one[] = {1};
  for (int i = 0; i < 3; ++i) lt_input(&a, m->graph, ins[i], ONYX_DTYPE_FLOAT32, 3, free4);
  for (int i = 3; i < 5; ++i) lt_input(&a, m->graph, ins[i], ONYX_DTYPE_FLOAT32, 4, free4);
  lt_input(&a, m->graph, ins[5], ONYX_DTYPE_INT32, 1, free4);
  if (total_from_float) {
    static const char *cast_in[] = {"total_float", NULL};
    static const char *cast_out[] = {"total_sequence_length", NULL};
    lt_input(&a, m->graph, cast_in[0], ONYX_DTYPE_FLOAT32, 1, one);
    Onnx__NodeProto *c = lt_node(&a, m->graph, "Cast", "cast", cast_in, cast_out);
    int_attr(&a, c, "to", ONYX_DTYPE_INT32);
  } else {
    lt_input(&a, m->graph, ins[6], ONYX_DTYPE_INT32, 1, one);
  }
  Onnx__NodeProto *n = lt_node(&a, m->graph, "GroupQueryAttention", "gqa", ins, outs);
  n->domain = lt_str(&a, "com.microsoft");
  int_attr(&a, n, "num_heads", 2);
  int_attr(&a, n, "kv_num_heads", 1);
  for (int i = 0; i < 3; ++i) lt_output(&a, m->graph, outs[i], ONYX_DTYPE_FLOAT32, -1, NULL);
  return session_of(rt, &a, m);
}

static float cells[7][64];
static int32_t seqlens[1], total[1];

static onyx_tensor f32(int slot, uint32_t rank, const int64_t *dims) {
  onyx_tensor t = {.dtype = ONYX_DTYPE_FLOAT32, .rank = rank, .data = cells[slot]};
  for (uint32_t i = 0; i < rank; ++i) t.dims[i] = dims[i];
  for (int i = 0; i < 64; ++i) cells[slot][i] = (float)rand() / RAND_MAX - 0.5f;
  return t;
}

/* Batch 1, 2 new tokens, head size 4, a past of 3 rows: query (1, 2, 8), key and value
 * (1, 2, 4), past (1, past_heads, 3, 4), total_sequence_length `tot`. */
static void gqa_inputs(onyx_tensor *in, int64_t past_heads, int32_t tot) {
  const int64_t q[] = {1, 2, 8}, kv[] = {1, 2, 4}, past[] = {1, past_heads, 3, 4};
  in[0] = f32(0, 3, q);
  in[1] = f32(1, 3, kv);
  in[2] = f32(2, 3, kv);
  in[3] = f32(3, 4, past);
  in[4] = f32(4, 4, past);
  seqlens[0] = tot - 1;
  total[0] = tot;
  in[5] = (onyx_tensor){.dtype = ONYX_DTYPE_INT32, .rank = 1, .dims = {1}, .data = seqlens};
  in[6] = (onyx_tensor){.dtype = ONYX_DTYPE_INT32, .rank = 1, .dims = {1}, .data = total};
}

/* The plan's message for these inputs, which must fail with `want_status`. */
static void expect_plan_failure(onyx_session *s, const onyx_tensor *in, size_t n,
                                onyx_status want_status, const char *want) {
  onyx_plan *plan = NULL;
  onyx_error *e = NULL;
  onyx_status st = onyx_session_plan(s, in, n, &plan, &e);
  print_message("plan: %s\n", onyx_error_message(e));
  assert_int_equal(st, want_status);
  assert_null(plan);
  assert_contains(onyx_error_message(e), want);
  onyx_error_free(e);
}

/* The same through a run: the planning error is the run's, outputs untouched. */
static void expect_run_failure(onyx_session *s, const onyx_tensor *in, size_t n,
                               onyx_status want_status, const char *want) {
  onyx_tensor y[3];
  memset(y, 0, sizeof y);
  onyx_error *e = NULL;
  onyx_status st = onyx_session_run(s, NULL, in, n, y, &e);
  print_message("run: %s\n", onyx_error_message(e));
  assert_int_equal(st, want_status);
  assert_contains(onyx_error_message(e), want);
  for (int i = 0; i < 3; ++i) assert_null(y[i].data);
  onyx_error_free(e);
}

/* A run of the valid GroupQueryAttention inputs: present holds T = 5 rows. */
static void expect_run_ok(onyx_session *s, const onyx_tensor *in, size_t n) {
  onyx_tensor y[3];
  memset(y, 0, sizeof y);
  onyx_error *e = NULL;
  onyx_status st = onyx_session_run(s, NULL, in, n, y, &e);
  if (st != ONYX_STATUS_OK) print_error("%s\n", onyx_error_message(e));
  assert_int_equal(st, ONYX_STATUS_OK);
  assert_null(e);
  assert_int_equal(y[1].rank, 4);
  assert_int_equal(y[1].dims[2], 5);
  for (int i = 0; i < 3; ++i) onyx_tensor_data_free(y[i].data);
}

static void gqa_bad_past_is_named(void **state) {
  (void)state;
  onyx_runtime *rt = cpu_runtime();
  onyx_session *s = gqa_session(rt, false);
  onyx_tensor in[7];
  gqa_inputs(in, 2, 5); /* a past of 2 kv heads where the node has 1 */
  const char *want = "(#0, GroupQueryAttention on cpu): its kernel cannot infer output shapes for "
                     "this geometry: GroupQueryAttention: past_key must be (1, 1, L, 4) with the "
                     "same L for both, got [1,2,3,4] (invalid argument)";
  expect_plan_failure(s, in, 7, ONYX_STATUS_INVALID_ARGUMENT, want);
  expect_run_failure(s, in, 7, ONYX_STATUS_INVALID_ARGUMENT, want);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
}

static void gqa_total_sequence_length_is_named(void **state) {
  (void)state;
  onyx_runtime *rt = cpu_runtime();
  onyx_session *s = gqa_session(rt, false);
  onyx_tensor in[7];
  /* Not known when planning (Cast from a float32 input): no present shape. */
  onyx_session *cast = gqa_session(rt, true);
  gqa_inputs(in, 1, 5);
  static float total_float[1] = {5.0f};
  in[6] = (onyx_tensor){.dtype = ONYX_DTYPE_FLOAT32, .rank = 1, .dims = {1}, .data = total_float};
  const char *unknown = "(#1, GroupQueryAttention on cpu): its kernel cannot infer output shapes "
                        "for this geometry: GroupQueryAttention: the value of input 6 "
                        "(total_sequence_length) is not known when planning; the present and "
                        "output_qk shapes need it (unsupported)";
  expect_plan_failure(cast, in, 7, ONYX_STATUS_UNSUPPORTED, unknown);
  expect_run_ok(cast, in, 7); /* a run does without a plan, node by node */
  onyx_session_destroy(cast);
  /* A value the kernel refuses, found at infer before anything runs. */
  gqa_inputs(in, 1, 0);
  const char *want = "GroupQueryAttention: input 6 (total_sequence_length) is 0; at least 1 "
                     "expected (invalid argument)";
  expect_plan_failure(s, in, 7, ONYX_STATUS_INVALID_ARGUMENT, want);
  expect_run_failure(s, in, 7, ONYX_STATUS_INVALID_ARGUMENT, want);
  /* A geometry it takes runs, and no stale reason is left behind. */
  gqa_inputs(in, 1, 5);
  expect_run_ok(s, in, 7);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
}

/* ONNX Attention (opset 23) over 4-D Q, K, V with free dims. */
static void attention_geometry_is_named(void **state) {
  (void)state;
  onyx_runtime *rt = cpu_runtime();
  lt_arena a = {0};
  Onnx__ModelProto *m = lt_model(&a, 23);
  static const char *ins[] = {"Q", "K", "V", NULL}, *outs[] = {"Y", NULL};
  const int64_t free4[] = {-1, -1, -1, -1};
  for (int i = 0; i < 3; ++i) lt_input(&a, m->graph, ins[i], ONYX_DTYPE_FLOAT32, 4, free4);
  lt_node(&a, m->graph, "Attention", "attn", ins, outs);
  lt_output(&a, m->graph, "Y", ONYX_DTYPE_FLOAT32, -1, NULL);
  onyx_session *s = session_of(rt, &a, m);
  const int64_t q[] = {1, 2, 3, 4}, kv[] = {2, 2, 3, 4};
  onyx_tensor in[3] = {f32(0, 4, q), f32(1, 4, kv), f32(2, 4, kv)};
  const char *want = "(#0, Attention on cpu): its kernel cannot infer output shapes for this "
                     "geometry: Attention: Q [1,2,3,4], K [2,2,3,4] and V [2,2,3,4] disagree on "
                     "the batch size (invalid argument)";
  expect_plan_failure(s, in, 3, ONYX_STATUS_INVALID_ARGUMENT, want);
  expect_run_failure(s, in, 3, ONYX_STATUS_INVALID_ARGUMENT, want);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(gqa_bad_past_is_named),
      cmocka_unit_test(gqa_total_sequence_length_is_named),
      cmocka_unit_test(attention_geometry_is_named),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
