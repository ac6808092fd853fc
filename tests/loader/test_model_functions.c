/*
 * Model-local functions: what the loader reads, and inlining with a stand-in for the
 * providers' claims. The fixtures come from make_function_fixtures.py (onnx.helper).
 * Numerical parity with ONNX Runtime runs through onyx-run (function_parity.sh); the
 * real CPU provider's claims are test_function_sessions.c. Every allocation is failed
 * in turn at the end (the test links with --wrap=malloc,calloc,realloc).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader_test_util.h"
#include "model_functions.h"

#define ERR_CAP 1024
#define NEEDLES(...) ((const char *const[]){__VA_ARGS__, NULL})

/* ------------------------------------------------------------ fault injection */

void *__real_malloc(size_t size);
void *__real_calloc(size_t count, size_t size);
void *__real_realloc(void *p, size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t count, size_t size);
void *__wrap_realloc(void *p, size_t size);

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
void *__wrap_realloc(void *p, size_t size) { return inject() ? NULL : __real_realloc(p, size); }

/* ------------------------------------------------------------ helpers */

static void fixture_path(char *buf, size_t cap, const char *name) {
  snprintf(buf, cap, "%s/functions/%s.onnx", ONYX_LOADER_FIXTURES_DIR, name);
}

static onyx__graph *load(const char *name) {
  char path[512], err[ERR_CAP];
  fixture_path(path, sizeof path, name);
  onyx__graph *g = NULL;
  onyx_status st = onyx__model_load_file(path, &g, err, sizeof err);
  if (st != ONYX_STATUS_OK) fail_msg("%s: %s", name, err);
  return g;
}

/* Claims every op named in the NULL-terminated "domain::op" list `ctx`. */
static const char *fake_claims(void *ctx, const onyx__graph *g, const onyx__node *n) {
  (void)g;
  char id[256];
  snprintf(id, sizeof id, "%s::%s", n->domain, n->op_type);
  for (const char *const *c = ctx; c != NULL && *c != NULL; ++c)
    if (strcmp(*c, id) == 0) return "fake";
  return NULL;
}

static onyx__graph *load_inlined(const char *name, const char *const *claimed) {
  onyx__graph *g = load(name);
  char err[ERR_CAP];
  onyx_status st =
      onyx__graph_inline_functions(g, fake_claims, (void *)(uintptr_t)claimed, err, sizeof err);
  if (st != ONYX_STATUS_OK) fail_msg("%s: inlining failed: %s", name, err);
  assert_null(g->functions);
  return g;
}

/* What every graph keeps after inlining: the name index agrees with the values, each
 * value is defined once, nodes are in topological order and bound to an opset. */
static void check_graph(const onyx__graph *g) {
  for (size_t v = 0; v < g->value_count; ++v) {
    assert_int_equal(onyx__graph_find_value(g, g->values[v].name), (int32_t)v);
    const onyx__value *val = &g->values[v];
    if (!val->is_input && !val->is_initializer) assert_true(val->producer >= 0);
  }
  for (size_t k = 0; k < g->node_count; ++k) {
    const onyx__node *n = &g->nodes[k];
    assert_true(n->opset > 0);
    for (size_t j = 0; j < n->input_count; ++j)
      if (n->inputs[j] >= 0) assert_true(g->values[n->inputs[j]].producer < (int32_t)k);
    for (size_t j = 0; j < n->output_count; ++j)
      if (n->outputs[j] >= 0) assert_int_equal(g->values[n->outputs[j]].producer, (int32_t)k);
  }
}

static const onyx__node *node_named(const onyx__graph *g, const char *name) {
  for (size_t k = 0; k < g->node_count; ++k)
    if (strcmp(g->nodes[k].name, name) == 0) return &g->nodes[k];
  fail_msg("no node '%s'", name);
  return NULL;
}

static const onyx_attr *find_attr(const onyx__node *n, const char *name) {
  for (size_t i = 0; i < n->attr_count; ++i)
    if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
  return NULL;
}

static const char *value_name(const onyx__graph *g, int32_t v) {
  assert_true(v >= 0 && v < (int32_t)g->value_count);
  return g->values[v].name;
}

static void expect_contains(const char *text, const char *const *needles) {
  for (; *needles != NULL; ++needles)
    if (strstr(text, *needles) == NULL) fail_msg("'%s' lacks '%s'", text, *needles);
}

/* ------------------------------------------------------------ happy paths */

/* The loader keeps a call as an ordinary node and the function aside. */
static void test_loader_keeps_calls_as_nodes(void **state) {
  (void)state;
  onyx__graph *g = load("twice");
  assert_non_null(g->functions);
  assert_int_equal(g->node_count, 3);
  assert_string_equal(g->nodes[0].op_type, "Affine");
  assert_string_equal(g->nodes[0].domain, "local");
  assert_null(g->function_notes);
  onyx__graph_free(g);
}

/* One function called twice: each call gets its own values, and a value name the
 * graph already holds is not reused. */
static void test_function_used_twice(void **state) {
  (void)state;
  onyx__graph *g = load_inlined("twice", NULL);
  check_graph(g);
  const char *names[] = {"c0/Affine/mul", "c0/Affine/add", "c0/Affine/neg", "c1/Affine/mul",
                         "c1/Affine/add", "c1/Affine/neg", "tail"};
  assert_int_equal(g->node_count, 7);
  for (size_t k = 0; k < 7; ++k) assert_string_equal(g->nodes[k].name, names[k]);
  /* Internal values are prefixed; formal inputs and outputs are the call's names. */
  const onyx__node *mul0 = node_named(g, "c0/Affine/mul");
  assert_string_equal(value_name(g, mul0->inputs[0]), "x");
  assert_string_equal(value_name(g, mul0->inputs[1]), "w0");
  assert_string_equal(value_name(g, mul0->outputs[0]), "c0/Affine/p");
  assert_string_equal(value_name(g, node_named(g, "c0/Affine/add")->outputs[0]), "y0");
  /* c0 leaves output t unused; "c0/Affine/t" is a graph input, so it gets a suffix. */
  assert_string_equal(value_name(g, node_named(g, "c0/Affine/neg")->outputs[0]), "c0/Affine/t_1");
  assert_true(g->values[onyx__graph_find_value(g, "c0/Affine/t")].is_input);
  assert_string_equal(value_name(g, node_named(g, "c1/Affine/neg")->outputs[0]), "t1");
  assert_string_equal(value_name(g, node_named(g, "c1/Affine/mul")->inputs[0]), "y0");
  /* The function's value_info types its internal values. */
  const onyx__value *p = &g->values[onyx__graph_find_value(g, "c1/Affine/p")];
  assert_int_equal(p->dtype, ONYX_DTYPE_FLOAT32);
  assert_int_equal(p->rank, 2);
  assert_int_equal(p->dims[1], 3);
  const onyx__function_notes *nt = g->function_notes;
  assert_int_equal(nt->call_count, 2);
  assert_int_equal(nt->inlined_count, 2);
  assert_string_equal(nt->calls[1].call, "c1");
  assert_string_equal(nt->calls[1].function, "local::Affine");
  assert_null(nt->calls[1].provider);
  assert_int_equal(nt->calls[1].nodes, 3);
  onyx__graph_free(g);
}

/* References take the call's value, else the function's default, else are omitted. */
static void test_attribute_references(void **state) {
  (void)state;
  onyx__graph *g = load_inlined("attrs", NULL);
  check_graph(g);
  const onyx__node *g0 = node_named(g, "c0/Lin/gemm");
  assert_float_equal(find_attr(g0, "alpha")->f, 2.0f, 0.0f); /* the call */
  assert_float_equal(find_attr(g0, "beta")->f, 0.25f, 0.0f); /* the default */
  assert_null(find_attr(g0, "transB"));                      /* omitted */
  assert_int_equal(g0->opset, 13);
  const onyx__node *g1 = node_named(g, "c1/Lin/gemm");
  assert_float_equal(find_attr(g1, "alpha")->f, 0.5f, 0.0f);
  assert_float_equal(find_attr(g1, "beta")->f, 3.0f, 0.0f); /* the call wins over the default */
  assert_int_equal(find_attr(g1, "transB")->i, 1);
  const onyx__function_notes *nt = g->function_notes;
  assert_string_equal(nt->calls[0].omitted, "'tb'");
  assert_null(nt->calls[1].omitted);
  assert_int_equal(nt->omission_count, 1);
  assert_string_equal(nt->omissions[0].node, "c0/Lin/gemm");
  onyx__graph_free(g);
}

/* A required attribute the call does not set: the body node lacks it, and the
 * kernel's refusal is extended with the function, the call and the attribute. */
static void test_missing_required_attribute(void **state) {
  (void)state;
  onyx__graph *g = load_inlined("missing_attr", NULL);
  const onyx__node *cast = node_named(g, "c0/ToType/cast");
  assert_null(find_attr(cast, "to"));
  char err[ERR_CAP] = "node 'c0/ToType/cast' (#0, Cast on cpu): Cast: attribute 'to' is required";
  onyx__function_notes_explain(g, err, sizeof err);
  print_message("%s\n", err);
  expect_contains(err, NEEDLES("'to' is required", "'local::ToType'", "at 'c0'", "'dtype'"));
  /* A message about another node is left alone. */
  char other[ERR_CAP] = "node 'tail' (#1): no kernel";
  onyx__function_notes_explain(g, other, sizeof other);
  assert_string_equal(other, "node 'tail' (#1): no kernel");
  onyx__graph_free(g);
}

/* Calls inside bodies expand recursively; attributes are forwarded level by level. */
static void test_nested_functions(void **state) {
  (void)state;
  onyx__graph *g = load_inlined("nested", NULL);
  check_graph(g);
  assert_int_equal(g->node_count, 3);
  const onyx__node *sm = node_named(g, "c0/Outer/mid/Mid/inner/Inner/softmax");
  assert_int_equal(find_attr(sm, "axis")->i, 0);
  assert_string_equal(value_name(g, sm->inputs[0]), "x");
  const onyx__node *add = node_named(g, "c0/Outer/mid/Mid/add");
  assert_int_equal(add->inputs[0], sm->outputs[0]);
  assert_string_equal(value_name(g, add->outputs[0]), "c0/Outer/m");
  assert_string_equal(value_name(g, node_named(g, "c0/Outer/square")->outputs[0]), "y");
  const onyx__function_notes *nt = g->function_notes;
  assert_int_equal(nt->call_count, 3);
  assert_int_equal(nt->calls[0].depth, 0);
  assert_int_equal(nt->calls[0].nodes, 3);
  assert_string_equal(nt->calls[1].call, "c0/Outer/mid");
  assert_int_equal(nt->calls[1].depth, 1);
  assert_int_equal(nt->calls[1].nodes, 2);
  assert_string_equal(nt->calls[2].function, "local::Inner");
  assert_int_equal(nt->calls[2].depth, 2);
  onyx__graph_free(g);
}

/* A claimed call inside a body stays a node, with its references resolved. */
static void test_nested_claimed_call_is_kept(void **state) {
  (void)state;
  onyx__graph *g = load_inlined("nested", NEEDLES("local::Mid"));
  check_graph(g);
  assert_int_equal(g->node_count, 2);
  const onyx__node *mid = node_named(g, "c0/Outer/mid");
  assert_string_equal(mid->op_type, "Mid");
  assert_int_equal(mid->opset, 1); /* Outer's import of "local" */
  assert_int_equal(find_attr(mid, "axis")->i, 0);
  assert_string_equal(g->function_notes->calls[1].provider, "fake");
  assert_int_equal(g->function_notes->inlined_count, 1);
  onyx__graph_free(g);
}

/* Body nodes bind to the function's opset imports, not the model's. */
static void test_function_opset_imports(void **state) {
  (void)state;
  onyx__graph *g = load_inlined("own_opset", NULL);
  check_graph(g);
  assert_int_equal(onyx__graph_opset(g, ""), 18);
  assert_int_equal(node_named(g, "c0/SoftGelu/softmax")->opset, 13);
  const onyx__node *gelu = node_named(g, "c0/SoftGelu/gelu");
  assert_string_equal(gelu->domain, "com.microsoft");
  assert_int_equal(gelu->opset, 1); /* the model imports no com.microsoft */
  assert_int_equal(onyx__graph_opset(g, "com.microsoft"), 0);
  onyx__graph_free(g);
}

/* A call a provider claims stays a node (its fused kernel wins); unclaimed, the same
 * call becomes the mobius body, unused outputs given fresh values. */
static void test_claimed_call_stays_a_node(void **state) {
  (void)state;
  onyx__graph *g =
      load_inlined("skip_claimed", NEEDLES("com.microsoft::SkipSimplifiedLayerNormalization"));
  check_graph(g);
  assert_int_equal(g->node_count, 2);
  assert_string_equal(g->nodes[0].op_type, "SkipSimplifiedLayerNormalization");
  assert_string_equal(g->nodes[0].name, "sk0");
  assert_string_equal(g->function_notes->calls[0].provider, "fake");
  assert_int_equal(g->function_notes->inlined_count, 0);
  onyx__graph_free(g);

  g = load_inlined("skip_claimed", NULL);
  check_graph(g);
  assert_int_equal(g->node_count, 5);
  const onyx__node *rms = node_named(g, "sk0/SkipSimplifiedLayerNormalization/rms");
  assert_string_equal(value_name(g, rms->outputs[0]), "out");
  assert_float_equal(find_attr(rms, "epsilon")->f, 1e-6f, 0.0f);  /* the call's, not 1e-5 */
  const char *mean = "sk0/SkipSimplifiedLayerNormalization/mean"; /* node and value */
  assert_string_equal(value_name(g, node_named(g, mean)->outputs[0]), mean);
  const onyx__node *add = node_named(g, "sk0/SkipSimplifiedLayerNormalization/add");
  assert_string_equal(value_name(g, add->outputs[0]), "sum");
  onyx__graph_free(g);
}

/* Overloads (IR 10) are part of a function's identity. */
static void test_overloads(void **state) {
  (void)state;
  onyx__graph *g = load_inlined("overload", NULL);
  check_graph(g);
  assert_string_equal(node_named(g, "c0/Scale/add")->op_type, "Add");
  assert_string_equal(node_named(g, "c1/Scale/mul")->op_type, "Mul");
  assert_string_equal(g->function_notes->calls[1].function, "local::Scale overload 'square'");
  onyx__graph_free(g);
}

/* A body Onyx cannot represent does not refuse the model; only a call that must be
 * inlined does, saying why. A claimed call is fine. */
static void test_function_that_cannot_be_inlined(void **state) {
  (void)state;
  onyx__graph *g = load_inlined("unusable", NULL);
  assert_int_equal(g->node_count, 1);
  assert_null(g->function_notes); /* nothing called a function */
  onyx__graph_free(g);

  g = load_inlined("unusable_called", NEEDLES("local::Branchy"));
  assert_int_equal(g->node_count, 1);
  onyx__graph_free(g);

  g = load("unusable_called");
  char err[ERR_CAP];
  onyx_status st = onyx__graph_inline_functions(g, NULL, NULL, err, sizeof err);
  lt_check_error(st, ONYX_STATUS_UNSUPPORTED, err, NULL,
                 NEEDLES("node 'c0'", "'local::Branchy'", "cannot inline", "GRAPH attribute"));
  onyx__graph_free(g);
}

/* ------------------------------------------------------------ errors */

static void expect_load_error(const char *name, onyx_status want, const char *const *needles) {
  char path[512], err[ERR_CAP];
  fixture_path(path, sizeof path, name);
  onyx__graph *g = (onyx__graph *)(uintptr_t)0x1; /* must stay untouched on failure */
  onyx_status st = onyx__model_load_file(path, &g, err, sizeof err);
  print_message("%s: %s\n", name, err);
  lt_check_error(st, want, err, path, needles);
  assert_ptr_equal(g, (onyx__graph *)(uintptr_t)0x1);
}

/* Inlining fails with `want`, and the graph is as the loader made it. */
static void expect_inline_error(const char *name, onyx_status want, const char *const *needles) {
  onyx__graph *g = load(name);
  size_t nodes = g->node_count, values = g->value_count;
  char err[ERR_CAP];
  onyx_status st = onyx__graph_inline_functions(g, NULL, NULL, err, sizeof err);
  print_message("%s: %s\n", name, err);
  lt_check_error(st, want, err, NULL, needles);
  assert_int_equal(g->node_count, nodes);
  assert_int_equal(g->value_count, values);
  assert_non_null(g->functions);
  assert_null(g->function_notes);
  lt_check_graph(g);
  onyx__graph_free(g);
}

static void test_recursion_is_refused(void **state) {
  (void)state;
  expect_inline_error("recursion", ONYX_STATUS_INVALID_MODEL,
                      NEEDLES("'local::Ping' -> 'local::Pong' -> 'local::Ping'", "recursion"));
}

static void test_malformed_functions(void **state) {
  (void)state;
  expect_load_error("bad_undefined", ONYX_STATUS_INVALID_MODEL,
                    NEEDLES("function 0 'local::F'", "node 0 'add'", "input 1 'ghost'"));
  expect_load_error("bad_duplicate", ONYX_STATUS_INVALID_MODEL,
                    NEEDLES("'local::F' is defined twice (functions 0 and 1)"));
  expect_load_error("bad_ref", ONYX_STATUS_INVALID_MODEL,
                    NEEDLES("'local::F'", "attribute 'axis' refers to 'nope'", "not declare"));
  expect_load_error("bad_output", ONYX_STATUS_INVALID_MODEL,
                    NEEDLES("'local::F'", "output 1 'never' is not produced"));
  expect_load_error("bad_overload", ONYX_STATUS_INVALID_MODEL,
                    NEEDLES("node 0 'c0'", "overload 'zzz' of 'local::F'"));
  expect_inline_error("bad_opset", ONYX_STATUS_INVALID_MODEL,
                      NEEDLES("'local::F' inlined at 'c0'", "'c0/F/mystery'", "domain 'other'"));
  expect_inline_error("bad_attr_type", ONYX_STATUS_INVALID_MODEL,
                      NEEDLES("'local::F' inlined at 'c0'", "attribute 'axis'", "as INT",
                              "the call sets it FLOAT"));
  expect_inline_error("bad_arity", ONYX_STATUS_INVALID_MODEL,
                      NEEDLES("node 'c0'", "'local::F' with 2 inputs; it has 1"));
}

/* ------------------------------------------------------------ out of memory */

typedef onyx_status (*step_fn)(const char *name, char *err);

static onyx_status load_step(const char *name, char *err) {
  char path[512];
  fixture_path(path, sizeof path, name);
  onyx__graph *g = NULL;
  onyx_status st = onyx__model_load_file(path, &g, err, ERR_CAP);
  if (st != ONYX_STATUS_OK) assert_null(g);
  onyx__graph_free(g);
  return st;
}

/* Loads with every allocation allowed, then inlines under injection: a failure must
 * leave the graph as loaded. */
static onyx_status inline_step(const char *name, char *err) {
  long countdown = g_countdown;
  g_countdown = -1;
  onyx__graph *g = load(name);
  size_t nodes = g->node_count, values = g->value_count;
  g_countdown = countdown;
  onyx_status st = onyx__graph_inline_functions(g, NULL, NULL, err, ERR_CAP);
  long saved = g_countdown;
  g_countdown = -1;
  if (st != ONYX_STATUS_OK) {
    assert_int_equal(g->node_count, nodes);
    assert_int_equal(g->value_count, values);
    lt_check_graph(g);
  } else {
    check_graph(g);
  }
  onyx__graph_free(g);
  g_countdown = saved;
  return st;
}

static void fail_each_allocation(step_fn step, const char *name) {
  long n = 0;
  for (;; ++n) {
    char err[ERR_CAP] = "";
    g_failed = 0;
    g_countdown = n;
    onyx_status st = step(name, err);
    g_countdown = -1;
    if (g_failed == 0) {
      if (st != ONYX_STATUS_OK) fail_msg("%s: clean run failed: %s", name, err);
      break;
    }
    if (st != ONYX_STATUS_OUT_OF_MEMORY)
      fail_msg("%s: allocation %ld failed: got %s: %s", name, n, onyx_status_str(st), err);
    if (err[0] == '\0') fail_msg("%s: allocation %ld failed without a message", name, n);
  }
  print_message("%s: %ld allocations, each failed once\n", name, n);
  assert_true(n > 0);
}

static void test_out_of_memory(void **state) {
  (void)state;
  const char *models[] = {"twice", "attrs", "nested", "skip_claimed", "overload", "unusable"};
  for (size_t i = 0; i < sizeof models / sizeof *models; ++i) {
    fail_each_allocation(load_step, models[i]);
    fail_each_allocation(inline_step, models[i]);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_loader_keeps_calls_as_nodes),
      cmocka_unit_test(test_function_used_twice),
      cmocka_unit_test(test_attribute_references),
      cmocka_unit_test(test_missing_required_attribute),
      cmocka_unit_test(test_nested_functions),
      cmocka_unit_test(test_nested_claimed_call_is_kept),
      cmocka_unit_test(test_function_opset_imports),
      cmocka_unit_test(test_claimed_call_stays_a_node),
      cmocka_unit_test(test_overloads),
      cmocka_unit_test(test_function_that_cannot_be_inlined),
      cmocka_unit_test(test_recursion_is_refused),
      cmocka_unit_test(test_malformed_functions),
      cmocka_unit_test(test_out_of_memory),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
