/*
 * Model loading: the happy paths (a model built here with every feature, a file the
 * ONNX Python writer produced, ONNX node tests) and every validation the loader
 * promises, each checked for its status and for a message that names the thing.
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
#include <sys/stat.h>
#include <time.h>

#include "loader_test_util.h"

#define ERR_CAP 1024

/* Loads packed `m`; returns the status, fills err, frees any graph after checking
 * its invariants. */
static onyx_status load_model(lt_arena *a, const Onnx__ModelProto *m, char *err) {
  size_t size;
  uint8_t *bytes = lt_pack(a, m, &size);
  onyx__graph *g = (onyx__graph *)(uintptr_t)0x1; /* must stay untouched on failure */
  onyx_status st = onyx__model_load_bytes(bytes, size, NULL, "m.onnx", &g, err, ERR_CAP);
  if (st == ONYX_STATUS_OK) {
    lt_check_graph(g);
    onyx__graph_free(g);
  } else {
    assert_ptr_equal(g, (onyx__graph *)(uintptr_t)0x1);
  }
  return st;
}

/* Asserts that `m` fails with `want` and a message with every needle. */
static void expect_error(lt_arena *a, const Onnx__ModelProto *m, onyx_status want,
                         const char *const *needles) {
  char err[ERR_CAP];
  onyx_status st = load_model(a, m, err);
  lt_check_error(st, want, err, "m.onnx: ", needles);
}

#define NEEDLES(...) ((const char *const[]){__VA_ARGS__, NULL})

static const onyx__value *value(const onyx__graph *g, const char *name) {
  int32_t v = onyx__graph_find_value(g, name);
  if (v < 0) fail_msg("value '%s' not found", name);
  return &g->values[v];
}

static const onyx_attr *attr(const onyx__node *n, const char *name) {
  for (size_t i = 0; i < n->attr_count; ++i) {
    if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
  }
  fail_msg("attribute '%s' not found", name);
  return NULL;
}

/* ------------------------------------------------------------------ happy paths */

static void test_rich_model(void **state) {
  (void)state;
  lt_arena a = {0};
  size_t size;
  uint8_t *bytes = lt_pack(&a, lt_rich_model(&a), &size);
  onyx__graph *g = NULL;
  char err[ERR_CAP];
  onyx_status st = onyx__model_load_bytes(bytes, size, NULL, NULL, &g, err, sizeof err);
  if (st != ONYX_STATUS_OK) fail_msg("load failed: %s", err);
  lt_check_graph(g);

  assert_int_equal(g->ir_version, 8);
  assert_string_equal(g->name, "test_graph");
  assert_int_equal(g->opset_count, 2);
  assert_int_equal(onyx__graph_opset(g, ""), 17);
  assert_int_equal(onyx__graph_opset(g, "ai.onnx"), 17);
  assert_int_equal(onyx__graph_opset(g, NULL), 17);
  assert_int_equal(onyx__graph_opset(g, "com.test"), 1);
  assert_int_equal(onyx__graph_opset(g, "com.nope"), 0);

  /* "bias" is both a graph input and an initializer: an initializer only. */
  assert_int_equal(g->input_count, 1);
  assert_string_equal(g->values[g->inputs[0]].name, "x");
  const onyx__value *x = value(g, "x");
  assert_true(x->is_input);
  assert_int_equal(x->dtype, ONYX_DTYPE_FLOAT32);
  assert_int_equal(x->rank, 2);
  assert_int_equal(x->dims[0], 2);
  assert_int_equal(x->dims[1], 3);
  const onyx__value *bias = value(g, "bias");
  assert_true(bias->is_initializer);
  assert_false(bias->is_input);
  const float *bf = bias->init.data;
  assert_true(bf[0] == 0.5f && bf[1] == 1.5f && bf[2] == 2.5f);

  const onyx__value *w = value(g, "W");
  assert_int_equal(w->init.rank, 2);
  assert_int_equal(w->init.dims[1], 3);
  for (int i = 0; i < 6; ++i) assert_true(((const float *)w->init.data)[i] == (float)(i + 1));
  const int64_t *idx = value(g, "idx")->init.data;
  assert_int_equal(idx[0], 0);
  assert_int_equal(idx[1], 1);
  const uint16_t *h = value(g, "h")->init.data;
  assert_int_equal(h[0], 0x3c00);
  assert_int_equal(h[1], 0xc000);
  const uint8_t *flag = value(g, "flag")->init.data;
  assert_int_equal(flag[0], 1);
  assert_int_equal(flag[1], 0);
  assert_int_equal(flag[2], 1);
  const uint32_t *u32 = value(g, "u32")->init.data;
  assert_int_equal(u32[0], 7);
  assert_int_equal(u32[1], 5);
  const onyx__value *empty = value(g, "empty");
  assert_int_equal(empty->rank, 1);
  assert_int_equal(empty->dims[0], 0);
  assert_null(empty->init.data);
  const onyx__value *scalar = value(g, "scalar");
  assert_int_equal(scalar->rank, 0);
  assert_true(*(const double *)scalar->init.data == 2.5);

  const onyx__value *t = value(g, "t");
  assert_int_equal(t->producer, 0);
  assert_int_equal(t->rank, 2);
  assert_int_equal(t->dims[1], 3);
  const onyx__value *u = value(g, "u");
  assert_int_equal(u->dims[0], -1); /* symbolic */
  assert_int_equal(u->dims[1], 3);
  const onyx__value *y = value(g, "y");
  assert_true(y->is_output);
  assert_int_equal(y->producer, 2);
  assert_int_equal(y->dtype, ONYX_DTYPE_FLOAT32);
  assert_int_equal(y->dims[0], 2);
  assert_int_equal(y->dims[1], -1);
  assert_int_equal(onyx__graph_find_value(g, "ghost"), -1);
  assert_int_equal(onyx__graph_find_value(g, NULL), -1);
  assert_int_equal(onyx__graph_find_value(NULL, "x"), -1);

  assert_int_equal(g->node_count, 3);
  assert_string_equal(g->nodes[0].name, "n0");
  assert_string_equal(g->nodes[0].domain, "");
  assert_int_equal(g->nodes[0].opset, 17);
  const onyx__node *c = &g->nodes[2];
  assert_string_equal(c->name, "");
  assert_string_equal(c->op_type, "Custom");
  assert_string_equal(c->domain, "com.test");
  assert_int_equal(c->opset, 1);
  assert_int_equal(c->input_count, 3);
  assert_int_equal(c->inputs[0], onyx__graph_find_value(g, "u"));
  assert_int_equal(c->inputs[1], -1);
  assert_int_equal(c->inputs[2], onyx__graph_find_value(g, "idx"));
  assert_int_equal(c->output_count, 2);
  assert_int_equal(c->outputs[1], -1);

  assert_int_equal(c->attr_count, 9);
  assert_true(attr(c, "alpha")->type == ONYX_ATTR_FLOAT && attr(c, "alpha")->f == 0.25f);
  assert_int_equal(attr(c, "k")->type, ONYX_ATTR_INT);
  assert_int_equal(attr(c, "k")->i, -3);
  assert_int_equal(attr(c, "mode")->type, ONYX_ATTR_STRING);
  assert_string_equal(attr(c, "mode")->s, "abc");
  assert_int_equal(attr(c, "mode")->s_len, 3);
  const onyx_attr *tv = attr(c, "value");
  assert_int_equal(tv->type, ONYX_ATTR_TENSOR);
  assert_int_equal(tv->tensor->dtype, ONYX_DTYPE_INT64);
  assert_int_equal(tv->tensor->rank, 1);
  assert_int_equal(((const int64_t *)tv->tensor->data)[1], 5);
  const onyx_attr *sc = attr(c, "scales");
  assert_int_equal(sc->type, ONYX_ATTR_FLOATS);
  assert_int_equal(sc->count, 2);
  assert_true(sc->floats[1] == 2.0f);
  const onyx_attr *ax = attr(c, "axes");
  assert_int_equal(ax->type, ONYX_ATTR_INTS);
  assert_int_equal(ax->count, 3);
  assert_int_equal(ax->ints[1], -1);
  const onyx_attr *nm = attr(c, "names");
  assert_int_equal(nm->type, ONYX_ATTR_STRINGS);
  assert_int_equal(nm->count, 2);
  assert_string_equal(nm->strings[1], "qq");
  assert_int_equal(attr(c, "empty_ints")->type, ONYX_ATTR_INTS);
  assert_int_equal(attr(c, "empty_ints")->count, 0);
  assert_int_equal(attr(c, "untyped")->type, ONYX_ATTR_INT);
  assert_int_equal(attr(c, "untyped")->i, 42);

  onyx__graph_free(g);
  lt_arena_free(&a);
}

static void test_ai_onnx_domain_normalised(void **state) {
  (void)state;
  lt_arena a = {0};
  Onnx__ModelProto *m = lt_model(&a, 0);
  lt_opset(&a, m, "ai.onnx", 13);
  lt_input(&a, m->graph, "x", ONYX_DTYPE_FLOAT32, -1, NULL);
  Onnx__NodeProto *n =
      lt_node(&a, m->graph, "Relu", "r", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
  n->domain = lt_str(&a, "ai.onnx");
  lt_output(&a, m->graph, "y", 0, -1, NULL);
  size_t size;
  uint8_t *bytes = lt_pack(&a, m, &size);
  onyx__graph *g = NULL;
  char err[ERR_CAP];
  assert_int_equal(onyx__model_load_bytes(bytes, size, NULL, NULL, &g, err, sizeof err),
                   ONYX_STATUS_OK);
  lt_check_graph(g);
  assert_string_equal(g->opsets[0].domain, "");
  assert_string_equal(g->nodes[0].domain, "");
  assert_int_equal(g->nodes[0].opset, 13);
  const onyx__value *x = value(g, "x");
  assert_int_equal(x->dtype, ONYX_DTYPE_FLOAT32);
  assert_int_equal(x->rank, -1); /* no shape given */
  const onyx__value *y = value(g, "y");
  assert_true(y->is_output);
  assert_int_equal(y->dtype, ONYX_DTYPE_UNDEFINED); /* no elem_type given */
  assert_int_equal(y->rank, -1);
  onyx__graph_free(g);
  lt_arena_free(&a);
}

/* An input passed straight through as an output, and an initializer as an output. */
static void test_passthrough_outputs(void **state) {
  (void)state;
  lt_arena a = {0};
  Onnx__ModelProto *m = lt_model(&a, 17);
  const int64_t d1[] = {1};
  lt_input(&a, m->graph, "x", ONYX_DTYPE_INT32, 1, d1);
  Onnx__TensorProto *t = lt_tensor(&a, "c", ONYX_DTYPE_INT32, 1, d1);
  lt_int32s(&a, t, (const int32_t[]){9}, 1);
  lt_initializer(&a, m->graph, t);
  lt_output(&a, m->graph, "x", ONYX_DTYPE_INT32, 1, d1);
  lt_output(&a, m->graph, "c", ONYX_DTYPE_INT32, 1, d1);
  char err[ERR_CAP];
  assert_int_equal(load_model(&a, m, err), ONYX_STATUS_OK);
  lt_arena_free(&a);
}

static char *node_test_path(const char *test, const char *file) {
  size_t n = strlen(ONYX_NODE_TESTS_DIR) + strlen(test) + strlen(file) + 3;
  char *p = malloc(n);
  assert_non_null(p);
  snprintf(p, n, "%s/%s/%s", ONYX_NODE_TESTS_DIR, test, file);
  return p;
}

static bool node_tests_present(void) {
  struct stat st;
  return stat(ONYX_NODE_TESTS_DIR, &st) == 0 && S_ISDIR(st.st_mode);
}

static void load_pb(const char *test, const char *file, onyx_tensor *out) {
  char *path = node_test_path(test, file);
  char err[ERR_CAP];
  char *name = NULL;
  onyx_status st = onyx__tensor_proto_load_file(path, out, &name, err, sizeof err);
  if (st != ONYX_STATUS_OK) fail_msg("%s", err);
  free(name);
  free(path);
}

static void test_node_test_add(void **state) {
  (void)state;
  if (!node_tests_present()) skip();
  char *path = node_test_path("test_add", "model.onnx");
  onyx__graph *g = NULL;
  char err[ERR_CAP];
  onyx_status st = onyx__model_load_file(path, &g, err, sizeof err);
  if (st != ONYX_STATUS_OK) fail_msg("%s", err);
  lt_check_graph(g);
  assert_int_equal(g->input_count, 2);
  assert_int_equal(g->output_count, 1);
  assert_int_equal(g->node_count, 1);
  assert_string_equal(g->nodes[0].op_type, "Add");
  assert_true(g->nodes[0].opset >= 7);
  const onyx__value *x = &g->values[g->inputs[0]];
  assert_string_equal(x->name, "x");
  assert_int_equal(x->dtype, ONYX_DTYPE_FLOAT32);
  assert_int_equal(x->rank, 3);
  assert_int_equal(x->dims[0], 3);
  assert_int_equal(x->dims[1], 4);
  assert_int_equal(x->dims[2], 5);
  const onyx__value *out = &g->values[g->outputs[0]];
  assert_string_equal(out->name, "sum");
  assert_int_equal(out->producer, 0);

  /* The test data: output_0 is exactly input_0 + input_1. */
  onyx_tensor in0, in1, ref;
  load_pb("test_add", "test_data_set_0/input_0.pb", &in0);
  load_pb("test_add", "test_data_set_0/input_1.pb", &in1);
  load_pb("test_add", "test_data_set_0/output_0.pb", &ref);
  assert_int_equal(in0.dtype, ONYX_DTYPE_FLOAT32);
  assert_int_equal(in0.rank, 3);
  assert_int_equal(in0.dims[2], 5);
  assert_int_equal(in0.device, ONYX_DEVICE_HOST);
  assert_int_equal(onyx_tensor_numel(&in0), 60);
  for (int i = 0; i < 60; ++i) {
    float want = ((const float *)ref.data)[i];
    float got = ((const float *)in0.data)[i] + ((const float *)in1.data)[i];
    assert_true(want == got);
  }
  free(in0.data);
  free(in1.data);
  free(ref.data);
  onyx__graph_free(g);
  free(path);
}

/* A Constant node's TENSOR attribute holds what the test expects as output. */
static void test_node_test_constant(void **state) {
  (void)state;
  if (!node_tests_present()) skip();
  char *path = node_test_path("test_constant", "model.onnx");
  onyx__graph *g = NULL;
  char err[ERR_CAP];
  onyx_status st = onyx__model_load_file(path, &g, err, sizeof err);
  if (st != ONYX_STATUS_OK) fail_msg("%s", err);
  lt_check_graph(g);
  assert_int_equal(g->node_count, 1);
  const onyx_attr *v = attr(&g->nodes[0], "value");
  assert_int_equal(v->type, ONYX_ATTR_TENSOR);
  onyx_tensor ref;
  load_pb("test_constant", "test_data_set_0/output_0.pb", &ref);
  assert_int_equal(v->tensor->dtype, ref.dtype);
  assert_int_equal(v->tensor->rank, ref.rank);
  size_t bytes = (size_t)onyx_tensor_numel(&ref) * onyx_dtype_size(ref.dtype);
  assert_true(bytes > 0);
  assert_memory_equal(v->tensor->data, ref.data, bytes);
  free(ref.data);
  onyx__graph_free(g);
  free(path);
}

/* A file written by onnx.helper / numpy_helper (make_fixtures.py). */
static void test_fixture_initializers(void **state) {
  (void)state;
  onyx__graph *g = NULL;
  char err[ERR_CAP];
  onyx_status st =
      onyx__model_load_file(ONYX_LOADER_FIXTURES_DIR "/initializers.onnx", &g, err, sizeof err);
  if (st != ONYX_STATUS_OK) fail_msg("%s", err);
  lt_check_graph(g);
  assert_int_equal(g->input_count, 1); /* b_typed is an initializer */
  assert_string_equal(g->values[g->inputs[0]].name, "x");
  assert_int_equal(g->values[g->inputs[0]].dims[0], -1);
  const float *w = value(g, "w_raw")->init.data;
  for (int i = 0; i < 6; ++i) assert_true(w[i] == 0.5f * (float)i);
  const int8_t *i8 = value(g, "i8_raw")->init.data;
  assert_int_equal(i8[0], -128);
  assert_int_equal(i8[3], 127);
  const uint16_t *f16r = value(g, "f16_raw")->init.data;
  const uint16_t *f16t = value(g, "f16_typed")->init.data;
  assert_int_equal(f16r[0], 0x3c00);
  assert_int_equal(f16r[1], 0xc000);
  assert_memory_equal(f16r, f16t, 4);
  const float *b = value(g, "b_typed")->init.data;
  assert_true(b[0] == 0.25f && b[1] == -1.5f && b[2] == 3.0f);
  const int64_t *i64 = value(g, "i64_typed")->init.data;
  assert_int_equal(i64[0], -(INT64_C(1) << 40));
  assert_int_equal(i64[1], 7);
  const uint16_t *u16 = value(g, "u16_typed")->init.data;
  assert_int_equal(u16[0], 65535);
  assert_int_equal(u16[1], 3);
  const uint8_t *bl = value(g, "bool_typed")->init.data;
  assert_true(bl[0] == 1 && bl[1] == 0 && bl[2] == 1);
  const uint32_t *u32 = value(g, "u32_typed")->init.data;
  assert_int_equal(u32[0], 4000000000u);
  assert_int_equal(value(g, "f64_typed")->rank, 0);
  assert_true(*(const double *)value(g, "f64_typed")->init.data == 2.5);
  assert_int_equal(value(g, "t")->dims[0], 2);
  onyx__graph_free(g);
}

/* ------------------------------------------------------------------ malformed input */

static void test_malformed_bytes(void **state) {
  (void)state;
  static const struct {
    const char *bytes;
    size_t size;
    const char *needle;
  } cases[] = {
      {"\xff\xff\xff\xff", 4, "not a valid ONNX model"},
      {"hello, this is not protobuf", 27, "not a valid ONNX model"},
      {"\x3a\x64", 2, "field 7 (graph) at byte 0 declares 100 bytes but 0 remain"},
      {"\x3a\x02\x0a", 3, "declares 2 bytes but 1 remain"},
      {"\x08", 1, "field 1 (ir_version)"},
      {"\x38\x01", 2, "not a valid ONNX model"}, /* graph with the varint wire type */
      {"\x3a\x02\x0a\xff", 4, "nested message"},
      {"\x0b", 1, "wire type 3"},
      {"", 0, "the model has no graph"},
      {"\x08\x07", 2, "the model has no graph"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    onyx__graph *g = NULL;
    char err[ERR_CAP];
    onyx_status st = onyx__model_load_bytes(cases[i].bytes, cases[i].size, NULL, "bad.onnx", &g,
                                            err, sizeof err);
    lt_check_error(st, ONYX_STATUS_INVALID_MODEL, err, "bad.onnx: ", NEEDLES(cases[i].needle));
    assert_null(g);
  }
}

/* Every prefix of a valid model either loads or fails with a message; none crashes
 * or leaks (the sanitizer build checks the latter). */
static void test_truncated_bytes(void **state) {
  (void)state;
  lt_arena a = {0};
  size_t size;
  uint8_t *bytes = lt_pack(&a, lt_rich_model(&a), &size);
  size_t failures = 0;
  for (size_t n = 0; n <= size; ++n) {
    uint8_t *copy = malloc(n ? n : 1); /* exact size, so an overread is caught */
    assert_non_null(copy);
    memcpy(copy, bytes, n);
    onyx__graph *g = NULL;
    char err[ERR_CAP];
    onyx_status st = onyx__model_load_bytes(copy, n, NULL, "cut.onnx", &g, err, sizeof err);
    free(copy);
    if (st == ONYX_STATUS_OK) {
      lt_check_graph(g);
      onyx__graph_free(g);
    } else {
      lt_check_error(st, ONYX_STATUS_OK, err, "cut.onnx: ", NULL);
      ++failures;
    }
    if (n == size) assert_int_equal(st, ONYX_STATUS_OK);
  }
  print_message("%zu of %zu prefixes rejected\n", failures, size);
  assert_true(failures >= size / 2);
  lt_arena_free(&a);
}

static void test_truncated_file(void **state) {
  (void)state;
  lt_arena a = {0};
  size_t size;
  uint8_t *bytes = lt_pack(&a, lt_rich_model(&a), &size);
  char *dir = lt_mkdtemp();
  char path[4096];
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  for (size_t n = 0; n < size; ++n) {
    lt_write_file(path, bytes, n);
    onyx__graph *g = NULL;
    char err[ERR_CAP];
    onyx_status st = onyx__model_load_file(path, &g, err, sizeof err);
    if (st == ONYX_STATUS_OK) {
      lt_check_graph(g);
      onyx__graph_free(g);
    } else {
      lt_check_error(st, ONYX_STATUS_INVALID_MODEL, err, path, NULL);
    }
  }
  /* A cut inside the graph field (the first, and largest) is reported as such. */
  lt_write_file(path, bytes, size / 2);
  onyx__graph *g = NULL;
  char err[ERR_CAP];
  lt_check_error(onyx__model_load_file(path, &g, err, sizeof err), ONYX_STATUS_INVALID_MODEL, err,
                 path, NEEDLES("field 7 (graph)", "truncated"));
  lt_rmtree(dir);
  free(dir);
  lt_arena_free(&a);
}

/* Random byte edits of a valid model: never a crash, always a message on failure. */
static void test_random_mutations(void **state) {
  (void)state;
  unsigned seed = (unsigned)time(NULL);
  const char *env = getenv("ONYX_TEST_SEED");
  if (env != NULL) seed = (unsigned)strtoul(env, NULL, 10);
  print_message("seed %u (set ONYX_TEST_SEED to replay)\n", seed);
  srand(seed);
  lt_arena a = {0};
  size_t size;
  uint8_t *bytes = lt_pack(&a, lt_rich_model(&a), &size);
  uint8_t *copy = malloc(size);
  assert_non_null(copy);
  size_t ok = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    memcpy(copy, bytes, size);
    int edits = 1 + rand() % 4;
    for (int e = 0; e < edits; ++e) copy[(size_t)rand() % size] = (uint8_t)rand();
    size_t n = (rand() % 8 == 0) ? (size_t)rand() % size : size;
    onyx__graph *g = NULL;
    char err[ERR_CAP];
    onyx_status st = onyx__model_load_bytes(copy, n, NULL, "mut.onnx", &g, err, sizeof err);
    if (st == ONYX_STATUS_OK) {
      lt_check_graph(g);
      onyx__graph_free(g);
      ++ok;
    } else {
      lt_check_error(st, ONYX_STATUS_OK, err, "mut.onnx: ", NULL);
    }
  }
  print_message("%zu of 3000 mutants loaded\n", ok);
  free(copy);
  lt_arena_free(&a);
}

/* ------------------------------------------------------------------ tensors */

/* A model whose one initializer is `t`, otherwise valid. */
static Onnx__ModelProto *model_with_initializer(lt_arena *a, Onnx__TensorProto *t) {
  Onnx__ModelProto *m = lt_model(a, 17);
  lt_initializer(a, m->graph, t);
  lt_output(a, m->graph, t->name, 0, -1, NULL);
  return m;
}

static void test_dims_overflow(void **state) {
  (void)state;
  lt_arena a = {0};
  const int64_t huge[] = {INT64_C(1) << 40, INT64_C(1) << 40};
  expect_error(&a, model_with_initializer(&a, lt_tensor(&a, "big", ONYX_DTYPE_FLOAT32, 2, huge)),
               ONYX_STATUS_INVALID_MODEL,
               NEEDLES("initializer 0 'big'", "element count", "overflows",
                       "[1099511627776,1099511627776]"));
  const int64_t bytes_overflow[] = {INT64_C(1) << 62};
  expect_error(
      &a, model_with_initializer(&a, lt_tensor(&a, "b", ONYX_DTYPE_FLOAT32, 1, bytes_overflow)),
      ONYX_STATUS_INVALID_MODEL, NEEDLES("initializer 0 'b'", "byte size", "overflows"));
  const int64_t max_then_two[] = {INT64_MAX, 2};
  expect_error(&a,
               model_with_initializer(&a, lt_tensor(&a, "c", ONYX_DTYPE_UINT8, 2, max_then_two)),
               ONYX_STATUS_INVALID_MODEL, NEEDLES("overflows"));
  /* A zero anywhere makes zero elements, however large the rest. */
  const int64_t zero_huge[] = {0, INT64_MAX, INT64_MAX};
  char err[ERR_CAP];
  assert_int_equal(
      load_model(&a,
                 model_with_initializer(&a, lt_tensor(&a, "z", ONYX_DTYPE_FLOAT32, 3, zero_huge)),
                 err),
      ONYX_STATUS_OK);
  const int64_t neg[] = {2, -3};
  expect_error(&a, model_with_initializer(&a, lt_tensor(&a, "n", ONYX_DTYPE_FLOAT32, 2, neg)),
               ONYX_STATUS_INVALID_MODEL, NEEDLES("initializer 0 'n'", "dim 1 is negative (-3)"));
  const int64_t rank9[] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  expect_error(&a, model_with_initializer(&a, lt_tensor(&a, "r", ONYX_DTYPE_FLOAT32, 9, rank9)),
               ONYX_STATUS_UNSUPPORTED, NEEDLES("initializer 0 'r'", "rank 9", "maximum rank 8"));
  lt_arena_free(&a);
}

static void test_payload_mismatch(void **state) {
  (void)state;
  lt_arena a = {0};
  const int64_t d2[] = {2};
  Onnx__TensorProto *t = lt_tensor(&a, "w", ONYX_DTYPE_FLOAT32, 1, d2);
  lt_raw(&a, t, "12345", 5);
  expect_error(&a, model_with_initializer(&a, t), ONYX_STATUS_INVALID_MODEL,
               NEEDLES("initializer 0 'w'", "raw_data has 5 bytes", "[2] x FLOAT need 8"));

  t = lt_tensor(&a, "w", ONYX_DTYPE_FLOAT32, 1, d2);
  lt_floats(&a, t, (const float[]){1, 2, 3}, 3);
  expect_error(&a, model_with_initializer(&a, t), ONYX_STATUS_INVALID_MODEL,
               NEEDLES("float_data has 3 values but dims [2] need 2"));

  t = lt_tensor(&a, "w", ONYX_DTYPE_FLOAT32, 1, d2);
  expect_error(&a, model_with_initializer(&a, t), ONYX_STATUS_INVALID_MODEL,
               NEEDLES("float_data has 0 values", "carries no data"));

  t = lt_tensor(&a, "w", ONYX_DTYPE_FLOAT32, 1, d2);
  lt_int64s(&a, t, (const int64_t[]){1, 2}, 2);
  expect_error(&a, model_with_initializer(&a, t), ONYX_STATUS_INVALID_MODEL,
               NEEDLES("FLOAT tensor carries int64_data", "float_data"));

  t = lt_tensor(&a, "w", ONYX_DTYPE_FLOAT32, 1, d2);
  lt_floats(&a, t, (const float[]){1, 2}, 2);
  lt_raw(&a, t, "12345678", 8);
  expect_error(&a, model_with_initializer(&a, t), ONYX_STATUS_INVALID_MODEL,
               NEEDLES("both raw_data (8 bytes) and float_data (2 values)"));

  t = lt_tensor(&a, "w", ONYX_DTYPE_INT64, 1, d2);
  lt_int64s(&a, t, (const int64_t[]){1}, 1);
  expect_error(&a, model_with_initializer(&a, t), ONYX_STATUS_INVALID_MODEL,
               NEEDLES("int64_data has 1 values but dims [2] need 2"));

  t = lt_tensor(&a, "w", ONYX_DTYPE_UINT64, 1, d2);
  lt_int64s(&a, t, (const int64_t[]){1, 2}, 2);
  expect_error(&a, model_with_initializer(&a, t), ONYX_STATUS_INVALID_MODEL,
               NEEDLES("UINT64 tensor carries int64_data", "uint64_data"));

  t = lt_tensor(&a, "w", ONYX_DTYPE_FLOAT64, 1, d2);
  lt_floats(&a, t, (const float[]){1, 2}, 2);
  expect_error(&a, model_with_initializer(&a, t), ONYX_STATUS_INVALID_MODEL,
               NEEDLES("DOUBLE tensor carries float_data", "double_data"));

  t = lt_tensor(&a, "w", ONYX_DTYPE_INT8, 1, d2);
  lt_int32s(&a, t, (const int32_t[]){1, 2, 3}, 3);
  expect_error(&a, model_with_initializer(&a, t), ONYX_STATUS_INVALID_MODEL,
               NEEDLES("int32_data has 3 values but dims [2] need 2"));

  t = lt_tensor(&a, "w", ONYX_DTYPE_FLOAT32, 1, d2);
  t->string_data = lt_alloc(&a, sizeof(ProtobufCBinaryData));
  t->n_string_data = 1;
  expect_error(&a, model_with_initializer(&a, t), ONYX_STATUS_INVALID_MODEL,
               NEEDLES("carries string_data"));
  lt_arena_free(&a);
}

/* INT4 and UINT4 (quantized weights): two elements a byte, from raw_data or from
 * int32_data holding one packed byte an entry; an odd count rounds up. */
static void test_tensor_int4(void **state) {
  (void)state;
  lt_arena a = {0};
  const int64_t d3[] = {3};
  char err[ERR_CAP];
  Onnx__TensorProto *t = lt_tensor(&a, "q", ONYX_DTYPE_INT4, 1, d3);
  lt_raw(&a, t, "\x9f\x07", 2);
  Onnx__ModelProto *m = model_with_initializer(&a, t);
  size_t size;
  uint8_t *bytes = lt_pack(&a, m, &size);
  onyx__graph *g = NULL;
  onyx_status st = onyx__model_load_bytes(bytes, size, NULL, "m.onnx", &g, err, ERR_CAP);
  if (st != ONYX_STATUS_OK) fail_msg("%s", err);
  const onyx__value *v = value(g, "q");
  assert_int_equal(v->init.dtype, ONYX_DTYPE_INT4);
  assert_int_equal(v->init.dims[0], 3);
  assert_memory_equal(v->init.data, "\x9f\x07", 2);
  onyx__graph_free(g);

  t = lt_tensor(&a, "u", ONYX_DTYPE_UINT4, 1, d3);
  lt_int32s(&a, t, (const int32_t[]){0x21, 0x03}, 2);
  m = model_with_initializer(&a, t);
  bytes = lt_pack(&a, m, &size);
  g = NULL;
  st = onyx__model_load_bytes(bytes, size, NULL, "m.onnx", &g, err, ERR_CAP);
  if (st != ONYX_STATUS_OK) fail_msg("%s", err);
  assert_memory_equal(value(g, "u")->init.data, "\x21\x03", 2);
  onyx__graph_free(g);

  t = lt_tensor(&a, "q", ONYX_DTYPE_INT4, 1, d3);
  lt_raw(&a, t, "\x01\x02\x03", 3);
  expect_error(&a, model_with_initializer(&a, t), ONYX_STATUS_INVALID_MODEL,
               NEEDLES("raw_data has 3 bytes but dims [3] x INT4 need 2"));
  t = lt_tensor(&a, "u", ONYX_DTYPE_UINT4, 1, d3);
  lt_int32s(&a, t, (const int32_t[]){1, 2, 3}, 3);
  expect_error(&a, model_with_initializer(&a, t), ONYX_STATUS_INVALID_MODEL,
               NEEDLES("int32_data has 3 values but dims [3] need 2"));
  lt_arena_free(&a);
}

static void test_tensor_dtypes(void **state) {
  (void)state;
  lt_arena a = {0};
  const int64_t d1[] = {1};
  Onnx__TensorProto *t = lt_tensor(&a, "s", ONYX_DTYPE_STRING, 1, d1);
  t->string_data = lt_alloc(&a, sizeof(ProtobufCBinaryData));
  t->n_string_data = 1;
  expect_error(&a, model_with_initializer(&a, t), ONYX_STATUS_UNSUPPORTED,
               NEEDLES("initializer 0 's'", "STRING tensor", "not support string tensors"));
  t = lt_tensor(&a, "u", 99, 1, d1);
  expect_error(&a, model_with_initializer(&a, t), ONYX_STATUS_INVALID_MODEL,
               NEEDLES("initializer 0 'u'", "element type 99 is not an ONNX data type"));
  t = lt_tensor(&a, "u", -5, 1, d1);
  expect_error(&a, model_with_initializer(&a, t), ONYX_STATUS_INVALID_MODEL,
               NEEDLES("element type -5 is not an ONNX data type"));
  t = lt_tensor(&a, "f8", 17, 1, d1);
  lt_raw(&a, t, "\x01", 1);
  expect_error(&a, model_with_initializer(&a, t), ONYX_STATUS_UNSUPPORTED,
               NEEDLES("element type 17 (FLOAT8E4M3FN) is not supported"));
  t = lt_tensor(&a, "c", 14, 1, d1);
  expect_error(&a, model_with_initializer(&a, t), ONYX_STATUS_UNSUPPORTED, NEEDLES("COMPLEX64"));
  t = lt_tensor(&a, "nodt", 0, 1, d1);
  t->has_data_type = 0;
  expect_error(&a, model_with_initializer(&a, t), ONYX_STATUS_INVALID_MODEL,
               NEEDLES("initializer 0 'nodt'", "has no data_type"));
  t = lt_tensor(&a, "seg", ONYX_DTYPE_FLOAT32, 1, d1);
  t->segment = lt_alloc(&a, sizeof *t->segment);
  onnx__tensor_proto__segment__init(t->segment);
  expect_error(&a, model_with_initializer(&a, t), ONYX_STATUS_UNSUPPORTED, NEEDLES("segment"));
  t = lt_tensor(&a, "loc", ONYX_DTYPE_FLOAT32, 1, d1);
  lt_floats(&a, t, (const float[]){1}, 1);
  t->has_data_location = 1;
  t->data_location = (Onnx__TensorProto__DataLocation)7;
  expect_error(&a, model_with_initializer(&a, t), ONYX_STATUS_INVALID_MODEL,
               NEEDLES("data_location 7"));
  t = lt_tensor(&a, "", ONYX_DTYPE_FLOAT32, 1, d1);
  lt_floats(&a, t, (const float[]){1}, 1);
  Onnx__ModelProto *m = lt_model(&a, 17);
  lt_initializer(&a, m->graph, t);
  expect_error(&a, m, ONYX_STATUS_INVALID_MODEL, NEEDLES("initializer 0 has no name"));
  lt_arena_free(&a);
}

/* ------------------------------------------------------------------ graph structure */

static void test_topological_order(void **state) {
  (void)state;
  lt_arena a = {0};
  Onnx__ModelProto *m = lt_model(&a, 17);
  lt_input(&a, m->graph, "x", ONYX_DTYPE_FLOAT32, -1, NULL);
  lt_node(&a, m->graph, "Relu", "second", (const char *[]){"t", NULL}, (const char *[]){"y", NULL});
  lt_node(&a, m->graph, "Relu", "first", (const char *[]){"x", NULL}, (const char *[]){"t", NULL});
  lt_output(&a, m->graph, "y", 0, -1, NULL);
  expect_error(&a, m, ONYX_STATUS_INVALID_MODEL,
               NEEDLES("node 0 'second' (Relu): input 0 't' is produced by the later node 1 "
                       "'first' (Relu)",
                       "topological order"));

  m = lt_model(&a, 17);
  lt_input(&a, m->graph, "x", ONYX_DTYPE_FLOAT32, -1, NULL);
  lt_node(&a, m->graph, "Add", NULL, (const char *[]){"x", "nope", NULL},
          (const char *[]){"y", NULL});
  lt_output(&a, m->graph, "y", 0, -1, NULL);
  expect_error(&a, m, ONYX_STATUS_INVALID_MODEL,
               NEEDLES("node 0 (Add): input 1 'nope' is not defined by a graph input, an "
                       "initializer or an earlier node"));

  m = lt_model(&a, 17);
  lt_node(&a, m->graph, "Relu", "loop", (const char *[]){"z", NULL}, (const char *[]){"z", NULL});
  expect_error(&a, m, ONYX_STATUS_INVALID_MODEL,
               NEEDLES("node 0 'loop' (Relu): input 0 'z' is an output of the same node"));
  lt_arena_free(&a);
}

static void test_opset_imports(void **state) {
  (void)state;
  lt_arena a = {0};
  Onnx__ModelProto *m = lt_model(&a, 0);
  lt_opset(&a, m, "com.other", 1);
  lt_input(&a, m->graph, "x", ONYX_DTYPE_FLOAT32, -1, NULL);
  lt_node(&a, m->graph, "Relu", "r", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
  expect_error(&a, m, ONYX_STATUS_INVALID_MODEL,
               NEEDLES("node 0 'r' (Relu): is in the ONNX domain but the model imports no ai.onnx "
                       "opset"));

  m = lt_model(&a, 17);
  lt_input(&a, m->graph, "x", ONYX_DTYPE_FLOAT32, -1, NULL);
  Onnx__NodeProto *n =
      lt_node(&a, m->graph, "Fused", "f", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
  n->domain = lt_str(&a, "com.vendor");
  expect_error(&a, m, ONYX_STATUS_INVALID_MODEL,
               NEEDLES("node 0 'f' (com.vendor:Fused): is in domain 'com.vendor' but the model "
                       "imports no opset for it"));

  m = lt_model(&a, 17);
  lt_opset(&a, m, "ai.onnx", 13);
  expect_error(&a, m, ONYX_STATUS_INVALID_MODEL,
               NEEDLES("domain 'ai.onnx' is imported twice (opset imports 0 and 1, versions 17 "
                       "and 13)"));

  m = lt_model(&a, 17);
  m->opset_import[0]->has_version = 0;
  expect_error(&a, m, ONYX_STATUS_INVALID_MODEL, NEEDLES("opset import 0", "has no version"));
  m = lt_model(&a, 17);
  m->opset_import[0]->version = -2;
  expect_error(&a, m, ONYX_STATUS_INVALID_MODEL, NEEDLES("has an invalid version"));

  m = lt_model(&a, 17);
  m->graph = NULL;
  expect_error(&a, m, ONYX_STATUS_INVALID_MODEL, NEEDLES("the model has no graph"));

  /* No nodes in the default domain: no ai.onnx import needed. */
  m = lt_model(&a, 0);
  lt_input(&a, m->graph, "x", ONYX_DTYPE_FLOAT32, -1, NULL);
  lt_output(&a, m->graph, "x", 0, -1, NULL);
  char err[ERR_CAP];
  assert_int_equal(load_model(&a, m, err), ONYX_STATUS_OK);
  lt_arena_free(&a);
}

static void test_duplicate_definitions(void **state) {
  (void)state;
  lt_arena a = {0};
  const int64_t d1[] = {1};
  Onnx__ModelProto *m = lt_model(&a, 17);
  for (int i = 0; i < 2; ++i) {
    Onnx__TensorProto *t = lt_tensor(&a, "w", ONYX_DTYPE_FLOAT32, 1, d1);
    lt_floats(&a, t, (const float[]){1}, 1);
    lt_initializer(&a, m->graph, t);
  }
  expect_error(&a, m, ONYX_STATUS_INVALID_MODEL,
               NEEDLES("initializer 1 'w': the name is defined twice (initializers 0 and 1)"));

  m = lt_model(&a, 17);
  lt_input(&a, m->graph, "x", ONYX_DTYPE_FLOAT32, -1, NULL);
  lt_input(&a, m->graph, "x", ONYX_DTYPE_FLOAT32, -1, NULL);
  expect_error(&a, m, ONYX_STATUS_INVALID_MODEL,
               NEEDLES("graph input 1 'x': the name is listed twice (graph inputs 0 and 1)"));

  m = lt_model(&a, 17);
  lt_input(&a, m->graph, "x", ONYX_DTYPE_FLOAT32, -1, NULL);
  lt_node(&a, m->graph, "Relu", "r", (const char *[]){"x", NULL}, (const char *[]){"x", NULL});
  expect_error(&a, m, ONYX_STATUS_INVALID_MODEL,
               NEEDLES("node 0 'r' (Relu): output 0 'x' is already defined as a graph input"));

  m = lt_model(&a, 17);
  lt_input(&a, m->graph, "x", ONYX_DTYPE_FLOAT32, -1, NULL);
  lt_node(&a, m->graph, "Relu", "a", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
  lt_node(&a, m->graph, "Relu", "b", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
  expect_error(&a, m, ONYX_STATUS_INVALID_MODEL,
               NEEDLES("node 1 'b' (Relu): output 0 'y' is already defined as an output of node 0 "
                       "'a' (Relu)"));

  m = lt_model(&a, 17);
  lt_input(&a, m->graph, "x", ONYX_DTYPE_FLOAT32, -1, NULL);
  lt_node(&a, m->graph, "Split", "s", (const char *[]){"x", NULL},
          (const char *[]){"p", "p", NULL});
  expect_error(&a, m, ONYX_STATUS_INVALID_MODEL,
               NEEDLES("output 1 'p' is already defined as an output of node 0 's' (Split)"));

  m = lt_model(&a, 17);
  Onnx__TensorProto *t = lt_tensor(&a, "w", ONYX_DTYPE_FLOAT32, 1, d1);
  lt_floats(&a, t, (const float[]){1}, 1);
  lt_initializer(&a, m->graph, t);
  lt_node(&a, m->graph, "Relu", "r", (const char *[]){"w", NULL}, (const char *[]){"w", NULL});
  expect_error(&a, m, ONYX_STATUS_INVALID_MODEL, NEEDLES("already defined as an initializer"));

  m = lt_model(&a, 17);
  lt_input(&a, m->graph, "x", ONYX_DTYPE_FLOAT32, -1, NULL);
  lt_output(&a, m->graph, "x", 0, -1, NULL);
  lt_output(&a, m->graph, "x", 0, -1, NULL);
  expect_error(&a, m, ONYX_STATUS_INVALID_MODEL,
               NEEDLES("graph output 1 'x': the name is listed twice (graph outputs 0 and 1)"));

  m = lt_model(&a, 17);
  lt_input(&a, m->graph, "x", ONYX_DTYPE_FLOAT32, -1, NULL);
  Onnx__NodeProto *n =
      lt_node(&a, m->graph, "Relu", "r", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
  lt_attr(&a, n, "k", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
  lt_attr(&a, n, "j", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
  lt_attr(&a, n, "k", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
  expect_error(&a, m, ONYX_STATUS_INVALID_MODEL,
               NEEDLES("node 0 'r' (Relu): attribute 'k' appears twice (attributes 0 and 2)"));
  lt_arena_free(&a);
}

/* A model with one Relu node carrying one attribute of `type`. */
static Onnx__ModelProto *model_with_attr(lt_arena *a, const char *name, int type,
                                         Onnx__AttributeProto **out_attr) {
  Onnx__ModelProto *m = lt_model(a, 17);
  lt_input(a, m->graph, "x", ONYX_DTYPE_FLOAT32, -1, NULL);
  Onnx__NodeProto *n = lt_node(a, m->graph, "Loop", "body_node", (const char *[]){"x", NULL},
                               (const char *[]){"y", NULL});
  *out_attr = lt_attr(a, n, name, type);
  lt_output(a, m->graph, "y", 0, -1, NULL);
  return m;
}

static void test_attributes(void **state) {
  (void)state;
  lt_arena a = {0};
  Onnx__AttributeProto *at;
  expect_error(
      &a, model_with_attr(&a, "body", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH, &at),
      ONYX_STATUS_UNSUPPORTED,
      NEEDLES("node 0 'body_node' (Loop): attribute 'body': is a GRAPH attribute", "subgraphs"));
  expect_error(&a,
               model_with_attr(&a, "branches", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS, &at),
               ONYX_STATUS_UNSUPPORTED, NEEDLES("attribute 'branches': is a GRAPHS attribute"));
  expect_error(&a, model_with_attr(&a, "ts", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS, &at),
               ONYX_STATUS_UNSUPPORTED, NEEDLES("attribute 'ts': is a TENSORS attribute"));
  expect_error(&a,
               model_with_attr(&a, "sp", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR, &at),
               ONYX_STATUS_UNSUPPORTED, NEEDLES("SPARSE_TENSOR attribute"));
  expect_error(&a,
               model_with_attr(&a, "tp", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO, &at),
               ONYX_STATUS_UNSUPPORTED, NEEDLES("TYPE_PROTO attribute"));
  expect_error(&a, model_with_attr(&a, "odd", 77, &at), ONYX_STATUS_INVALID_MODEL,
               NEEDLES("attribute 'odd': attribute type 77 is not defined"));
  expect_error(&a, model_with_attr(&a, "bare", 0, &at), ONYX_STATUS_INVALID_MODEL,
               NEEDLES("attribute 'bare': has no type"));
  expect_error(&a, model_with_attr(&a, "v", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR, &at),
               ONYX_STATUS_INVALID_MODEL, NEEDLES("attribute 'v': type is TENSOR but no tensor"));
  Onnx__ModelProto *m =
      model_with_attr(&a, "v", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR, &at);
  const int64_t d3[] = {3};
  at->t = lt_tensor(&a, NULL, ONYX_DTYPE_FLOAT32, 1, d3);
  lt_floats(&a, at->t, (const float[]){1}, 1);
  expect_error(&a, m, ONYX_STATUS_INVALID_MODEL,
               NEEDLES("node 0 'body_node' (Loop): attribute 'v': float_data has 1 values but "
                       "dims [3] need 3"));
  m = model_with_attr(&a, "", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, &at);
  expect_error(&a, m, ONYX_STATUS_INVALID_MODEL, NEEDLES("attribute 0 has no name"));
  lt_arena_free(&a);
}

static void test_graph_io(void **state) {
  (void)state;
  lt_arena a = {0};
  Onnx__ModelProto *m = lt_model(&a, 17);
  lt_output(&a, m->graph, "missing", 0, -1, NULL);
  expect_error(&a, m, ONYX_STATUS_INVALID_MODEL,
               NEEDLES("graph output 0 'missing': is not defined by any node, graph input or "
                       "initializer"));

  m = lt_model(&a, 17);
  lt_input(&a, m->graph, "", ONYX_DTYPE_FLOAT32, -1, NULL);
  expect_error(&a, m, ONYX_STATUS_INVALID_MODEL, NEEDLES("graph input 0 has no name"));

  m = lt_model(&a, 17);
  lt_input(&a, m->graph, "x", 99, -1, NULL);
  expect_error(&a, m, ONYX_STATUS_INVALID_MODEL,
               NEEDLES("graph input 0 'x': element type 99 is not an ONNX data type"));

  m = lt_model(&a, 17);
  lt_input(&a, m->graph, "s", ONYX_DTYPE_STRING, -1, NULL);
  expect_error(&a, m, ONYX_STATUS_UNSUPPORTED, NEEDLES("graph input 0 's': is a STRING tensor"));

  const int64_t neg[] = {2, -7};
  m = lt_model(&a, 17);
  lt_input(&a, m->graph, "x", ONYX_DTYPE_FLOAT32, 2, neg);
  m->graph->input[0]->type->tensor_type->shape->dim[1]->has_dim_value = 1;
  m->graph->input[0]->type->tensor_type->shape->dim[1]->dim_value = -7;
  expect_error(&a, m, ONYX_STATUS_INVALID_MODEL,
               NEEDLES("graph input 0 'x': dim 1 is negative (-7)"));

  const int64_t r9[] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  m = lt_model(&a, 17);
  lt_input(&a, m->graph, "x", ONYX_DTYPE_FLOAT32, 9, r9);
  expect_error(&a, m, ONYX_STATUS_UNSUPPORTED, NEEDLES("graph input 0 'x': rank 9 exceeds"));

  m = lt_model(&a, 17);
  lt_input(&a, m->graph, "x", ONYX_DTYPE_FLOAT32, -1, NULL);
  lt_node(&a, m->graph, "Relu", "r", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
  lt_push(&a, &m->graph->value_info, &m->graph->n_value_info,
          lt_value_info(&a, "y", ONYX_DTYPE_FLOAT32, 9, r9));
  expect_error(&a, m, ONYX_STATUS_UNSUPPORTED, NEEDLES("value_info 0 'y': rank 9 exceeds"));

  m = lt_model(&a, 17);
  lt_input(&a, m->graph, "seq", 0, -1, NULL);
  Onnx__TypeProto *tp = m->graph->input[0]->type;
  tp->tensor_type = NULL;
  tp->sequence_type = lt_alloc(&a, sizeof *tp->sequence_type);
  onnx__type_proto__sequence__init(tp->sequence_type);
  expect_error(&a, m, ONYX_STATUS_UNSUPPORTED,
               NEEDLES("graph input 0 'seq': has a sequence type", "dense tensors only"));

  /* An input whose default value has another dtype than the input declares. */
  const int64_t d1[] = {1};
  m = lt_model(&a, 17);
  lt_input(&a, m->graph, "w", ONYX_DTYPE_INT64, 1, d1);
  Onnx__TensorProto *t = lt_tensor(&a, "w", ONYX_DTYPE_FLOAT32, 1, d1);
  lt_floats(&a, t, (const float[]){1}, 1);
  lt_initializer(&a, m->graph, t);
  expect_error(&a, m, ONYX_STATUS_INVALID_MODEL,
               NEEDLES("graph input 0 'w': declared INT64 but its initializer is FLOAT"));

  m = lt_model(&a, 17);
  lt_input(&a, m->graph, "x", ONYX_DTYPE_FLOAT32, -1, NULL);
  lt_node(&a, m->graph, "", "r", (const char *[]){"x", NULL}, (const char *[]){"y", NULL});
  expect_error(&a, m, ONYX_STATUS_INVALID_MODEL, NEEDLES("node 0 'r' (): has no op_type"));

  m = lt_model(&a, 17);
  lt_push(&a, &m->graph->sparse_initializer, &m->graph->n_sparse_initializer,
          lt_alloc(&a, sizeof(Onnx__SparseTensorProto)));
  onnx__sparse_tensor_proto__init(m->graph->sparse_initializer[0]);
  expect_error(&a, m, ONYX_STATUS_UNSUPPORTED, NEEDLES("1 sparse initializers"));

  /* A node that calls a function the model defines loads as an ordinary node; the
   * session inlines it (test_model_functions.c). */
  m = lt_model(&a, 17);
  lt_opset(&a, m, "local", 1);
  Onnx__FunctionProto *f = lt_alloc(&a, sizeof *f);
  onnx__function_proto__init(f);
  f->name = lt_str(&a, "MyGelu");
  f->domain = lt_str(&a, "local");
  lt_push(&a, &m->functions, &m->n_functions, f);
  lt_input(&a, m->graph, "x", ONYX_DTYPE_FLOAT32, -1, NULL);
  Onnx__NodeProto *n = lt_node(&a, m->graph, "MyGelu", "g", (const char *[]){"x", NULL},
                               (const char *[]){"y", NULL});
  n->domain = lt_str(&a, "local");
  char err[ERR_CAP];
  assert_int_equal(load_model(&a, m, err), ONYX_STATUS_OK);
  lt_arena_free(&a);
}

/* Hostile names are printed safely and long ones cut. */
static void test_message_hygiene(void **state) {
  (void)state;
  lt_arena a = {0};
  char long_name[400];
  memset(long_name, 'n', sizeof long_name - 1);
  long_name[sizeof long_name - 1] = '\0';
  Onnx__ModelProto *m = lt_model(&a, 17);
  lt_node(&a, m->graph, "Relu", "bad\nname\x1b[31m", (const char *[]){long_name, NULL},
          (const char *[]){"y", NULL});
  char err[ERR_CAP];
  onyx_status st = load_model(&a, m, err);
  lt_check_error(st, ONYX_STATUS_INVALID_MODEL, err,
                 "m.onnx: ", NEEDLES("node 0 'bad?name?[31m' (Relu)", "nnn...'"));
  assert_null(strchr(err, '\n'));
  lt_arena_free(&a);
}

static void test_arguments_and_buffers(void **state) {
  (void)state;
  onyx__graph *g = NULL;
  char err[ERR_CAP];
  assert_int_equal(onyx__model_load_bytes(NULL, 4, NULL, NULL, &g, err, sizeof err),
                   ONYX_STATUS_INVALID_ARGUMENT);
  assert_int_equal(onyx__model_load_bytes("", 0, NULL, NULL, NULL, err, sizeof err),
                   ONYX_STATUS_INVALID_ARGUMENT);
  assert_int_equal(onyx__model_load_file(NULL, &g, err, sizeof err), ONYX_STATUS_INVALID_ARGUMENT);
  /* No buffer, and a tiny one: still a status, and a terminated message. */
  assert_int_equal(onyx__model_load_bytes("\xff", 1, NULL, NULL, &g, NULL, 0),
                   ONYX_STATUS_INVALID_MODEL);
  char tiny[6];
  memset(tiny, 'x', sizeof tiny);
  assert_int_equal(onyx__model_load_bytes("\xff", 1, NULL, NULL, &g, tiny, sizeof tiny),
                   ONYX_STATUS_INVALID_MODEL);
  assert_int_equal(strlen(tiny), 5);
  assert_null(g);
  onyx__graph_free(NULL);
  assert_int_equal(onyx__graph_opset(NULL, ""), 0);

  assert_int_equal(onyx__model_load_file("/nonexistent/dir/model.onnx", &g, err, sizeof err),
                   ONYX_STATUS_NOT_FOUND);
  lt_check_error(ONYX_STATUS_NOT_FOUND, ONYX_STATUS_NOT_FOUND, err,
                 "/nonexistent/dir/model.onnx: ", NEEDLES("cannot open"));
  char *dir = lt_mkdtemp();
  lt_check_error(onyx__model_load_file(dir, &g, err, sizeof err), ONYX_STATUS_IO_ERROR, err, dir,
                 NEEDLES("is not a regular file"));
  lt_rmtree(dir);
  free(dir);
  assert_null(g);
}

/* A hand-built graph (no name index) still answers find_value and frees cleanly. */
static void test_hand_built_graph(void **state) {
  (void)state;
  onyx__graph *g = calloc(1, sizeof *g);
  assert_non_null(g);
  g->values = calloc(2, sizeof *g->values);
  assert_non_null(g->values);
  g->value_count = 2;
  g->values[0].name = strdup("a");
  g->values[1].name = strdup("b");
  assert_int_equal(onyx__graph_find_value(g, "b"), 1);
  assert_int_equal(onyx__graph_find_value(g, "c"), -1);
  onyx__graph_free(g);
}

/* Many values: the name index stays correct well past its initial size. */
static void test_many_values(void **state) {
  (void)state;
  lt_arena a = {0};
  Onnx__ModelProto *m = lt_model(&a, 17);
  lt_input(&a, m->graph, "v0", ONYX_DTYPE_FLOAT32, -1, NULL);
  char prev[32] = "v0", next[32];
  for (int i = 1; i < 3000; ++i) {
    snprintf(next, sizeof next, "v%d", i);
    lt_node(&a, m->graph, "Relu", NULL, (const char *[]){prev, NULL}, (const char *[]){next, NULL});
    memcpy(prev, next, sizeof prev);
  }
  lt_output(&a, m->graph, prev, 0, -1, NULL);
  size_t size;
  uint8_t *bytes = lt_pack(&a, m, &size);
  onyx__graph *g = NULL;
  char err[ERR_CAP];
  assert_int_equal(onyx__model_load_bytes(bytes, size, NULL, NULL, &g, err, sizeof err),
                   ONYX_STATUS_OK);
  lt_check_graph(g);
  assert_int_equal(g->value_count, 3000);
  assert_int_equal(onyx__graph_find_value(g, "v2999"), 2999);
  onyx__graph_free(g);
  lt_arena_free(&a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rich_model),          cmocka_unit_test(test_ai_onnx_domain_normalised),
      cmocka_unit_test(test_passthrough_outputs), cmocka_unit_test(test_node_test_add),
      cmocka_unit_test(test_node_test_constant),  cmocka_unit_test(test_fixture_initializers),
      cmocka_unit_test(test_malformed_bytes),     cmocka_unit_test(test_truncated_bytes),
      cmocka_unit_test(test_truncated_file),      cmocka_unit_test(test_random_mutations),
      cmocka_unit_test(test_dims_overflow),       cmocka_unit_test(test_payload_mismatch),
      cmocka_unit_test(test_tensor_dtypes),       cmocka_unit_test(test_topological_order),
      cmocka_unit_test(test_opset_imports),       cmocka_unit_test(test_duplicate_definitions),
      cmocka_unit_test(test_attributes),          cmocka_unit_test(test_graph_io),
      cmocka_unit_test(test_message_hygiene),     cmocka_unit_test(test_arguments_and_buffers),
      cmocka_unit_test(test_hand_built_graph),    cmocka_unit_test(test_many_values),
      cmocka_unit_test(test_tensor_int4),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
