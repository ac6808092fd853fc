/*
 * The norm_matmul pass (core/optimize/norm_matmul.c) on synthetic decoder pieces:
 *
 *   h, _, _, s = SkipSimplifiedLayerNormalization(x, r, gamma)   y = MatMul(h, W)
 *   h = SimplifiedLayerNormalization(x, gamma)                    y = MatMul(h, W)
 *
 * It fires (one ai.onyx::RMSNormMatMul node left, on the CPU) and the outputs, y and
 * the residual sum s, are the unoptimized graph's bit for bit on fresh random float32
 * inputs. It leaves the pair alone when h has another reader or is a graph output,
 * when the mean output is read, when W is not a constant, when W's K is not gamma's,
 * when epsilon is not given; disable_optimizations = "norm_matmul" turns it off.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pass_fixture.h"

enum { F32 = ONYX_DTYPE_FLOAT32 };
enum { K = 48, N = 40, ROWS = 3 };

typedef enum extra_reader {
  EXTRA_NONE,
  EXTRA_H_OUTPUT, /* h is also a graph output */
  EXTRA_H_READER, /* h is read by another node */
  EXTRA_MEAN,     /* the skip form's mean output is a graph output */
} extra_reader;

typedef struct nmm_opts {
  bool plain;    /* SimplifiedLayerNormalization, no skip */
  bool sum_read; /* s read by a node, not only a graph output */
  extra_reader extra;
  bool w_input;    /* W is a graph input */
  bool k_differs;  /* gamma one longer than W's K */
  bool no_epsilon; /* epsilon left to its default */
} nmm_opts;

static Onnx__ModelProto *model(lt_arena *a, const nmm_opts *o) {
  Onnx__ModelProto *m = lt_model(a, 17);
  lt_opset(a, m, "com.microsoft", 1);
  Onnx__GraphProto *g = m->graph;
  lt_input(a, g, "x", F32, 2, (int64_t[]){ROWS, K});
  if (!o->plain) lt_input(a, g, "r", F32, 2, (int64_t[]){ROWS, K});
  fx_float_init(a, g, "gamma", 1, (int64_t[]){o->k_differs ? K + 1 : K}, 0.5f, 1.0f);
  if (o->w_input)
    lt_input(a, g, "W", F32, 2, (int64_t[]){K, N});
  else
    fx_float_init(a, g, "W", 2, (int64_t[]){K, N}, 0.3f, 0.0f);
  Onnx__NodeProto *n;
  if (o->plain) {
    n = lt_node(a, g, "SimplifiedLayerNormalization", "norm", (const char *[]){"x", "gamma", NULL},
                (const char *[]){"h", NULL});
  } else {
    const char *mean = o->extra == EXTRA_MEAN ? "mean" : "";
    n = lt_node(a, g, "SkipSimplifiedLayerNormalization", "norm",
                (const char *[]){"x", "r", "gamma", NULL},
                (const char *[]){"h", mean, "", "s", NULL});
    n->domain = lt_str(a, "com.microsoft");
  }
  if (!o->no_epsilon) {
    Onnx__AttributeProto *at =
        lt_attr(a, n, "epsilon", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    at->has_f = 1;
    at->f = 1e-6f;
  }
  lt_node(a, g, "MatMul", "mm", (const char *[]){"h", "W", NULL}, (const char *[]){"y", NULL});
  lt_output(a, g, "y", F32, 2, (int64_t[]){ROWS, N});
  if (!o->plain && o->sum_read) {
    lt_node(a, g, "Neg", "res", (const char *[]){"s", NULL}, (const char *[]){"z", NULL});
    lt_output(a, g, "z", F32, 2, (int64_t[]){ROWS, K});
  } else if (!o->plain) {
    lt_output(a, g, "s", F32, 2, (int64_t[]){ROWS, K});
  }
  if (o->extra == EXTRA_H_OUTPUT) lt_output(a, g, "h", F32, 2, (int64_t[]){ROWS, K});
  if (o->extra == EXTRA_MEAN) lt_output(a, g, "mean", F32, 2, (int64_t[]){ROWS, 1});
  if (o->extra == EXTRA_H_READER) {
    lt_node(a, g, "Neg", "other", (const char *[]){"h", NULL}, (const char *[]){"q", NULL});
    lt_output(a, g, "q", F32, 2, (int64_t[]){ROWS, K});
  }
  return m;
}

static void expect_fused(const nmm_opts *o) {
  lt_arena a = {0};
  onyx_runtime *rt = fx_runtime_cpu();
  Onnx__ModelProto *m = model(&a, o);
  onyx_session *opt = fx_session(rt, &a, m, NULL);
  onyx_session *plain = fx_session(rt, &a, m, "norm_matmul");
  size_t extra = o->sum_read && !o->plain;
  assert_int_equal(onyx_session_node_count(plain), 2 + extra);
  assert_int_equal(onyx_session_node_count(opt), 1 + extra);
  assert_string_equal(onyx_session_node_op(opt, 0), "RMSNormMatMul");
  assert_string_equal(onyx_session_node_provider(opt, 0), "cpu");
  fx_expect_one_fusion(opt, plain, "norm_matmul");
  onyx_session_destroy(opt);
  onyx_session_destroy(plain);
  onyx_runtime_destroy(rt);
  lt_arena_free(&a);
}

static void expect_left(const nmm_opts *o) {
  lt_arena a = {0};
  onyx_runtime *rt = fx_runtime_cpu();
  Onnx__ModelProto *m = model(&a, o);
  onyx_session *s = fx_session(rt, &a, m, NULL);
  size_t nodes = onyx_session_node_count(s);
  for (size_t i = 0; i < nodes; ++i)
    assert_string_not_equal(onyx_session_node_op(s, i), "RMSNormMatMul");
  onyx_optimization_stats st = fx_pass_stats(s, "norm_matmul");
  assert_true(st.ran);
  assert_int_equal(st.nodes_removed, 0);
  assert_int_equal(st.nodes_skipped, 1);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
  lt_arena_free(&a);
}

static void fires_on_the_skip_form(void **state) {
  (void)state;
  expect_fused(&(nmm_opts){0});
  expect_fused(&(nmm_opts){.sum_read = true});
}

static void fires_on_the_plain_form(void **state) {
  (void)state;
  expect_fused(&(nmm_opts){.plain = true});
}

static void left_when_h_is_seen(void **state) {
  (void)state;
  for (int plain = 0; plain < 2; ++plain) {
    expect_left(&(nmm_opts){.plain = plain, .extra = EXTRA_H_OUTPUT});
    expect_left(&(nmm_opts){.plain = plain, .extra = EXTRA_H_READER});
  }
  expect_left(&(nmm_opts){.extra = EXTRA_MEAN});
}

static void left_when_the_weight_does_not_fit(void **state) {
  (void)state;
  expect_left(&(nmm_opts){.w_input = true});
  expect_left(&(nmm_opts){.plain = true, .w_input = true});
  expect_left(&(nmm_opts){.no_epsilon = true});
}

static void switches_off_by_name(void **state) {
  (void)state;
  lt_arena a = {0};
  onyx_runtime *rt = fx_runtime_cpu();
  Onnx__ModelProto *m = model(&a, &(nmm_opts){0});
  onyx_session *s = fx_session(rt, &a, m, "norm_matmul");
  assert_int_equal(onyx_session_node_count(s), 2);
  assert_false(fx_pass_stats(s, "norm_matmul").ran);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
  lt_arena_free(&a);
}

int main(void) {
  fx_seed("norm_matmul_test", "NORM_MATMUL_SEED");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(fires_on_the_skip_form), cmocka_unit_test(fires_on_the_plain_form),
      cmocka_unit_test(left_when_h_is_seen),    cmocka_unit_test(left_when_the_weight_does_not_fit),
      cmocka_unit_test(switches_off_by_name),
  };
  return cmocka_run_group_tests_name("norm_matmul", tests, NULL, NULL);
}
