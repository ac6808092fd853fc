/*
 * The silu_matmul pass (core/optimize/silu_matmul.c) on a synthetic decoder MLP,
 *
 *   g = MatMul(x, Wg)   u = MatMul(x, Wu)   m = Mul(Mul(g, Sigmoid(g)), u)   y = MatMul(m, Wd)
 *
 * which gate_up_silu turns into h = MatMul(x, [Wg | Wu]), m = ai.onyx::SiluMul(h): it
 * fires (SiluMul and the down MatMul become one ai.onyx::SiluMulMatMul, on the CPU) and
 * y is the graph without it bit for bit on fresh random float32 inputs. It leaves the
 * pair alone when m has another reader or is a graph output, when Wd is not a constant,
 * when N is not a multiple of 8; disable_optimizations = "silu_matmul" turns it off.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pass_fixture.h"

enum { F32 = ONYX_DTYPE_FLOAT32 };
enum { K = 48, I = 40, N = 40, ROWS = 3 };

typedef enum extra_reader {
  EXTRA_NONE,
  EXTRA_M_OUTPUT, /* m is also a graph output */
  EXTRA_M_READER, /* m is read by another node */
} extra_reader;

typedef struct smm_opts {
  extra_reader extra;
  bool w_input; /* Wd is a graph input */
  int64_t n;    /* the down product's N; 0: N */
} smm_opts;

static Onnx__ModelProto *model(lt_arena *a, const smm_opts *o) {
  const int64_t n = o->n ? o->n : N;
  Onnx__ModelProto *m = lt_model(a, 17);
  Onnx__GraphProto *g = m->graph;
  lt_input(a, g, "x", F32, 2, (int64_t[]){ROWS, K});
  fx_float_init(a, g, "Wg", 2, (int64_t[]){K, I}, 0.3f, 0.0f);
  fx_float_init(a, g, "Wu", 2, (int64_t[]){K, I}, 0.3f, 0.0f);
  if (o->w_input)
    lt_input(a, g, "Wd", F32, 2, (int64_t[]){I, n});
  else
    fx_float_init(a, g, "Wd", 2, (int64_t[]){I, n}, 0.3f, 0.0f);
  lt_node(a, g, "MatMul", "gate", (const char *[]){"x", "Wg", NULL}, (const char *[]){"g", NULL});
  lt_node(a, g, "MatMul", "up", (const char *[]){"x", "Wu", NULL}, (const char *[]){"u", NULL});
  lt_node(a, g, "Sigmoid", "sig", (const char *[]){"g", NULL}, (const char *[]){"s", NULL});
  lt_node(a, g, "Mul", "act", (const char *[]){"g", "s", NULL}, (const char *[]){"c", NULL});
  lt_node(a, g, "Mul", "fin", (const char *[]){"c", "u", NULL}, (const char *[]){"m", NULL});
  lt_node(a, g, "MatMul", "down", (const char *[]){"m", "Wd", NULL}, (const char *[]){"y", NULL});
  lt_output(a, g, "y", F32, 2, (int64_t[]){ROWS, n});
  if (o->extra == EXTRA_M_OUTPUT) lt_output(a, g, "m", F32, 2, (int64_t[]){ROWS, I});
  if (o->extra == EXTRA_M_READER) {
    lt_node(a, g, "Neg", "other", (const char *[]){"m", NULL}, (const char *[]){"q", NULL});
    lt_output(a, g, "q", F32, 2, (int64_t[]){ROWS, I});
  }
  return m;
}

static void expect_fused(const smm_opts *o) {
  lt_arena a = {0};
  onyx_runtime *rt = fx_runtime_cpu();
  Onnx__ModelProto *m = model(&a, o);
  onyx_session *opt = fx_session(rt, &a, m, NULL);
  onyx_session *plain = fx_session(rt, &a, m, "silu_matmul");
  assert_int_equal(onyx_session_node_count(plain), 3); /* MatMul, SiluMul, MatMul */
  assert_int_equal(onyx_session_node_count(opt), 2);
  assert_string_equal(onyx_session_node_op(plain, 1), "SiluMul");
  assert_string_equal(onyx_session_node_op(opt, 0), "MatMul");
  assert_string_equal(onyx_session_node_op(opt, 1), "SiluMulMatMul");
  assert_string_equal(onyx_session_node_provider(opt, 1), "cpu");
  fx_expect_one_fusion(opt, plain, "silu_matmul");
  onyx_session_destroy(opt);
  onyx_session_destroy(plain);
  onyx_runtime_destroy(rt);
  lt_arena_free(&a);
}

static void expect_left(const smm_opts *o) {
  lt_arena a = {0};
  onyx_runtime *rt = fx_runtime_cpu();
  Onnx__ModelProto *m = model(&a, o);
  onyx_session *s = fx_session(rt, &a, m, NULL);
  size_t nodes = onyx_session_node_count(s);
  bool silu = false;
  for (size_t i = 0; i < nodes; ++i) {
    assert_string_not_equal(onyx_session_node_op(s, i), "SiluMulMatMul");
    silu |= strcmp(onyx_session_node_op(s, i), "SiluMul") == 0;
  }
  assert_true(silu); /* gate_up_silu fired: the pair was there to fuse */
  onyx_optimization_stats st = fx_pass_stats(s, "silu_matmul");
  assert_true(st.ran);
  assert_int_equal(st.nodes_removed, 0);
  assert_int_equal(st.nodes_skipped, 1);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
  lt_arena_free(&a);
}

static void fires_on_the_down_product(void **state) {
  (void)state;
  expect_fused(&(smm_opts){0});
  expect_fused(&(smm_opts){.n = 24});
}

static void left_when_m_is_seen(void **state) {
  (void)state;
  expect_left(&(smm_opts){.extra = EXTRA_M_OUTPUT});
  expect_left(&(smm_opts){.extra = EXTRA_M_READER});
}

static void left_when_the_weight_does_not_fit(void **state) {
  (void)state;
  expect_left(&(smm_opts){.w_input = true});
  expect_left(&(smm_opts){.n = 36});
}

static void switches_off_by_name(void **state) {
  (void)state;
  lt_arena a = {0};
  onyx_runtime *rt = fx_runtime_cpu();
  Onnx__ModelProto *m = model(&a, &(smm_opts){0});
  onyx_session *s = fx_session(rt, &a, m, "norm_matmul, silu_matmul");
  assert_int_equal(onyx_session_node_count(s), 3);
  assert_false(fx_pass_stats(s, "silu_matmul").ran);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
  lt_arena_free(&a);
}

int main(void) {
  fx_seed("silu_matmul_test", "SILU_MATMUL_SEED");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(fires_on_the_down_product),
      cmocka_unit_test(left_when_m_is_seen),
      cmocka_unit_test(left_when_the_weight_does_not_fit),
      cmocka_unit_test(switches_off_by_name),
  };
  return cmocka_run_group_tests_name("silu_matmul", tests, NULL, NULL);
}
