/*
 * Graph edits (core/graph_edit.c) on loaded graphs: every edit keeps topological
 * order, producers and the name index.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "graph_edit.h"
#include "loader_test_util.h"
#include "optimize/optimize.h"

enum { F32 = ONYX_DTYPE_FLOAT32 };

/* x → Relu → a → Neg → b → Abs → y, with an initializer w read by nothing. */
static onyx__graph *chain(lt_arena *a) {
  Onnx__ModelProto *m = lt_model(a, 17);
  Onnx__GraphProto *g = m->graph;
  lt_input(a, g, "x", F32, 1, (int64_t[]){4});
  Onnx__TensorProto *w = lt_tensor(a, "w", F32, 1, (int64_t[]){4});
  lt_floats(a, w, (float[]){1, 2, 3, 4}, 4);
  lt_initializer(a, g, w);
  lt_node(a, g, "Relu", "r", (const char *[]){"x", NULL}, (const char *[]){"a", NULL});
  lt_node(a, g, "Neg", "n", (const char *[]){"a", NULL}, (const char *[]){"b", NULL});
  lt_node(a, g, "Abs", "s", (const char *[]){"b", NULL}, (const char *[]){"y", NULL});
  lt_output(a, g, "y", F32, 1, (int64_t[]){4});
  size_t size = 0;
  uint8_t *bytes = lt_pack(a, m, &size);
  onyx__graph *graph = NULL;
  char err[256] = "";
  assert_int_equal(onyx__model_load_bytes(bytes, size, NULL, "chain", &graph, err, sizeof err),
                   ONYX_STATUS_OK);
  return graph;
}

/* The edits' invariants; unlike a fresh load, values without a producer may remain
 * (read by no one), so the loader tests' lt_check_graph does not apply. */
static void expect_consistent(const onyx__graph *g) {
  char err[256] = "";
  onyx_status st = onyx__graph_check(g, err, sizeof err);
  if (st != ONYX_STATUS_OK) fail_msg("%s", err);
  for (size_t i = 0; i < g->value_count; ++i)
    assert_int_equal(onyx__graph_find_value(g, g->values[i].name), (int32_t)i);
}

static void added_values_are_found_by_name(void **state) {
  (void)state;
  lt_arena a = {0};
  onyx__graph *g = chain(&a);
  size_t before = g->value_count;
  for (int i = 0; i < 300; ++i) { /* well past the index's first capacity */
    char name[32];
    snprintf(name, sizeof name, "added_%d", i);
    int32_t v = -1;
    assert_int_equal(onyx__graph_add_value(g, name, &v), ONYX_STATUS_OK);
    assert_int_equal(v, (int32_t)(before + (size_t)i));
    assert_int_equal(g->values[v].producer, -1);
  }
  int32_t v = -1;
  assert_int_equal(onyx__graph_add_value(g, "a", &v), ONYX_STATUS_INVALID_ARGUMENT);
  assert_int_equal(onyx__graph_add_value(g, "", &v), ONYX_STATUS_INVALID_ARGUMENT);
  for (size_t i = 0; i < g->value_count; ++i)
    assert_int_equal(onyx__graph_find_value(g, g->values[i].name), (int32_t)i);
  assert_int_equal(onyx__graph_index_rebuild(g), ONYX_STATUS_OK);
  expect_consistent(g);
  onyx__graph_free(g);
  lt_arena_free(&a);
}

static void removing_nodes_keeps_order_and_producers(void **state) {
  (void)state;
  lt_arena a = {0};
  onyx__graph *g = chain(&a);
  int32_t x = onyx__graph_find_value(g, "x"), av = onyx__graph_find_value(g, "a");
  int32_t b = onyx__graph_find_value(g, "b"), y = onyx__graph_find_value(g, "y");
  /* Drop Neg: Abs reads a instead of b. */
  assert_int_equal(onyx__graph_replace_uses(g, b, av), 1);
  bool dead[3] = {false, true, false};
  assert_int_equal(onyx__graph_remove_nodes(g, dead), 1);
  assert_int_equal(g->node_count, 2);
  assert_string_equal(g->nodes[1].op_type, "Abs");
  assert_int_equal(g->values[y].producer, 1);
  assert_int_equal(g->values[b].producer, -1);
  expect_consistent(g);
  /* Relu now makes y directly: Abs goes, the output keeps its name. */
  onyx__graph_set_node_output(g, 0, 0, y);
  bool dead2[2] = {false, true};
  onyx__graph_remove_nodes(g, dead2);
  assert_int_equal(g->values[y].producer, 0);
  assert_int_equal(g->values[av].producer, -1);
  assert_int_equal(g->nodes[0].inputs[0], x);
  expect_consistent(g);
  onyx__graph_free(g);
  lt_arena_free(&a);
}

static void an_initializer_replaces_a_node(void **state) {
  (void)state;
  lt_arena a = {0};
  onyx__graph *g = chain(&a);
  int32_t av = onyx__graph_find_value(g, "a");
  float *data = malloc(4 * sizeof *data);
  for (int i = 0; i < 4; ++i) data[i] = (float)i - 1.5f;
  onyx_tensor t = {.dtype = ONYX_DTYPE_FLOAT32, .rank = 1, .dims = {4}, .data = data};
  onyx__graph_set_initializer(g, av, t);
  bool dead[3] = {true, false, false};
  onyx__graph_remove_nodes(g, dead);
  assert_true(g->values[av].is_initializer);
  assert_true(onyx__value_is_constant(&g->values[av]));
  assert_int_equal(g->values[av].producer, -1);
  assert_int_equal(g->values[av].rank, 1);
  expect_consistent(g);
  onyx__graph_free(g); /* frees data with the graph */
  lt_arena_free(&a);
}

static void a_reader_before_its_producer_is_caught(void **state) {
  (void)state;
  lt_arena a = {0};
  onyx__graph *g = chain(&a);
  onyx__node tmp = g->nodes[0];
  g->nodes[0] = g->nodes[1];
  g->nodes[1] = tmp;
  char err[256] = "";
  assert_int_equal(onyx__graph_check(g, err, sizeof err), ONYX_STATUS_INTERNAL);
  assert_non_null(strstr(err, "input 0 'a' is not defined before it"));
  g->nodes[1] = g->nodes[0];
  g->nodes[0] = tmp;
  onyx__graph_free(g);
  lt_arena_free(&a);
}

/* A graph input whose default is an initializer can be overridden: not a constant. */
static void an_input_with_a_default_is_not_a_constant(void **state) {
  (void)state;
  onyx__value v = {.is_initializer = true, .is_input = true};
  assert_false(onyx__value_is_constant(&v));
  v.is_input = false;
  assert_true(onyx__value_is_constant(&v));
  v.is_initializer = false;
  assert_false(onyx__value_is_constant(&v));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(added_values_are_found_by_name),
      cmocka_unit_test(removing_nodes_keeps_order_and_producers),
      cmocka_unit_test(an_initializer_replaces_a_node),
      cmocka_unit_test(a_reader_before_its_producer_is_caught),
      cmocka_unit_test(an_input_with_a_default_is_not_a_constant),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
