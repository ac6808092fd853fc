/*
 * External data: tensors whose bytes live in a file beside the model. The location
 * must stay inside the model folder (no absolute paths, no "..", no symlink that
 * leaves), and the byte range must lie inside the file and match dims × dtype.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loader_test_util.h"

#define ERR_CAP 1024
#define NEEDLES(...) ((const char *const[]){__VA_ARGS__, NULL})

typedef struct fixture {
  char *root;           /* scratch folder */
  char model_dir[4096]; /* root/model */
  char model_path[4096];
  lt_arena arena;
} fixture;

static void path_join(char *out, size_t cap, const char *a, const char *b) {
  int n = snprintf(out, cap, "%s/%s", a, b);
  assert_true(n > 0 && (size_t)n < cap);
}

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (f == NULL) return -1;
  f->root = lt_mkdtemp();
  path_join(f->model_dir, sizeof f->model_dir, f->root, "model");
  path_join(f->model_path, sizeof f->model_path, f->model_dir, "model.onnx");
  char p[4096], q[4096];
  assert_int_equal(mkdir(f->model_dir, 0755), 0);
  float w[12];
  for (int i = 0; i < 12; ++i) w[i] = (float)i;
  path_join(p, sizeof p, f->model_dir, "weights.bin");
  lt_write_file(p, w, sizeof w);
  path_join(p, sizeof p, f->root, "outside.bin");
  lt_write_file(p, w, sizeof w);
  path_join(p, sizeof p, f->model_dir, "sub");
  assert_int_equal(mkdir(p, 0755), 0);
  path_join(p, sizeof p, f->model_dir, "sub/inner.bin");
  lt_write_file(p, w, sizeof w);
  path_join(p, sizeof p, f->model_dir, "adir");
  assert_int_equal(mkdir(p, 0755), 0);
  /* Symlinks: one that leaves the folder, one that stays, one folder link that leaves. */
  path_join(p, sizeof p, f->root, "outside.bin");
  path_join(q, sizeof q, f->model_dir, "link_out.bin");
  assert_int_equal(symlink(p, q), 0);
  path_join(q, sizeof q, f->model_dir, "link_in.bin");
  assert_int_equal(symlink("weights.bin", q), 0);
  path_join(q, sizeof q, f->model_dir, "dirlink");
  assert_int_equal(symlink(f->root, q), 0);
  path_join(q, sizeof q, f->root, "alias");
  assert_int_equal(symlink("model", q), 0);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  lt_rmtree(f->root);
  free(f->root);
  lt_arena_free(&f->arena);
  free(f);
  return 0;
}

/* A model whose initializer "w" (FLOAT, dims) is external at location/offset/length. */
static Onnx__ModelProto *external_model(fixture *f, size_t rank, const int64_t *dims,
                                        const char *location, const char *offset,
                                        const char *length, Onnx__TensorProto **out_t) {
  lt_arena *a = &f->arena;
  Onnx__ModelProto *m = lt_model(a, 17);
  Onnx__TensorProto *t = lt_tensor(a, "w", ONYX_DTYPE_FLOAT32, rank, dims);
  lt_external(a, t, location, offset, length);
  lt_initializer(a, m->graph, t);
  lt_output(a, m->graph, "w", 0, -1, NULL);
  if (out_t != NULL) *out_t = t;
  return m;
}

static onyx_status load_at(fixture *f, const char *path, const Onnx__ModelProto *m,
                           onyx__graph **out, char *err) {
  size_t size;
  uint8_t *bytes = lt_pack(&f->arena, m, &size);
  lt_write_file(path, bytes, size);
  return onyx__model_load_file(path, out, err, ERR_CAP);
}

static void expect_ok(fixture *f, const Onnx__ModelProto *m, float first, int64_t count) {
  onyx__graph *g = NULL;
  char err[ERR_CAP];
  onyx_status st = load_at(f, f->model_path, m, &g, err);
  if (st != ONYX_STATUS_OK) fail_msg("%s", err);
  lt_check_graph(g);
  const onyx__value *w = &g->values[onyx__graph_find_value(g, "w")];
  assert_int_equal(onyx_tensor_numel(&w->init), count);
  const float *d = w->init.data;
  for (int64_t i = 0; i < count; ++i) assert_true(d[i] == first + (float)i);
  onyx__graph_free(g);
}

static void expect_fail(fixture *f, const Onnx__ModelProto *m, onyx_status want,
                        const char *const *needles) {
  onyx__graph *g = NULL;
  char err[ERR_CAP];
  onyx_status st = load_at(f, f->model_path, m, &g, err);
  lt_check_error(st, want, err, f->model_path, needles);
  assert_null(g);
}

static const int64_t d34[] = {3, 4};
static const int64_t d8[] = {8};

static void test_inside_folder(void **state) {
  fixture *f = *state;
  expect_ok(f, external_model(f, 2, d34, "weights.bin", NULL, NULL, NULL), 0.0f, 12);
  expect_ok(f, external_model(f, 2, d34, "weights.bin", "0", "48", NULL), 0.0f, 12);
  expect_ok(f, external_model(f, 1, d8, "weights.bin", "16", "32", NULL), 4.0f, 8);
  expect_ok(f, external_model(f, 1, d8, "weights.bin", "16", NULL, NULL), 4.0f, 8);
  expect_ok(f, external_model(f, 2, d34, "sub/inner.bin", NULL, NULL, NULL), 0.0f, 12);
  expect_ok(f, external_model(f, 2, d34, "./weights.bin", NULL, NULL, NULL), 0.0f, 12);
  expect_ok(f, external_model(f, 2, d34, "link_in.bin", NULL, NULL, NULL), 0.0f, 12);
  const int64_t d0[] = {0};
  expect_ok(f, external_model(f, 1, d0, "weights.bin", "48", "0", NULL), 0.0f, 0);

  /* The model folder reached through a symlink is still the model folder. */
  char alias[4096];
  path_join(alias, sizeof alias, f->root, "alias/model.onnx");
  onyx__graph *g = NULL;
  char err[ERR_CAP];
  onyx_status st =
      load_at(f, alias, external_model(f, 2, d34, "weights.bin", NULL, NULL, NULL), &g, err);
  if (st != ONYX_STATUS_OK) fail_msg("%s", err);
  onyx__graph_free(g);
}

static void test_escapes(void **state) {
  fixture *f = *state;
  expect_fail(f, external_model(f, 2, d34, "../outside.bin", NULL, NULL, NULL),
              ONYX_STATUS_INVALID_MODEL,
              NEEDLES("initializer 0 'w': external data location '../outside.bin' contains a "
                      "'..' component"));
  expect_fail(f, external_model(f, 2, d34, "sub/../weights.bin", NULL, NULL, NULL),
              ONYX_STATUS_INVALID_MODEL, NEEDLES("'..' component"));
  char abs_path[4096];
  path_join(abs_path, sizeof abs_path, f->root, "outside.bin");
  expect_fail(f, external_model(f, 2, d34, abs_path, NULL, NULL, NULL), ONYX_STATUS_INVALID_MODEL,
              NEEDLES("is an absolute path"));
  char model_abs[4096];
  path_join(model_abs, sizeof model_abs, f->model_dir, "weights.bin");
  expect_fail(f, external_model(f, 2, d34, model_abs, NULL, NULL, NULL), ONYX_STATUS_INVALID_MODEL,
              NEEDLES("is an absolute path"));
  expect_fail(f, external_model(f, 2, d34, "link_out.bin", NULL, NULL, NULL),
              ONYX_STATUS_INVALID_MODEL,
              NEEDLES("initializer 0 'w': external data location 'link_out.bin' resolves to",
                      "outside.bin', outside the model folder"));
  expect_fail(f, external_model(f, 2, d34, "dirlink/outside.bin", NULL, NULL, NULL),
              ONYX_STATUS_INVALID_MODEL, NEEDLES("outside the model folder"));
  /* A path through a link that leaves and comes back names a file inside: allowed. */
  expect_ok(f, external_model(f, 2, d34, "dirlink/model/weights.bin", NULL, NULL, NULL), 0.0f, 12);
  expect_fail(f, external_model(f, 2, d34, "missing.bin", NULL, NULL, NULL), ONYX_STATUS_NOT_FOUND,
              NEEDLES("external data file 'missing.bin'"));
  expect_fail(f, external_model(f, 2, d34, "adir", NULL, NULL, NULL), ONYX_STATUS_INVALID_MODEL,
              NEEDLES("external data 'adir' is not a regular file"));
}

static void test_ranges(void **state) {
  fixture *f = *state;
  expect_fail(f, external_model(f, 2, d34, "weights.bin", "40", "48", NULL),
              ONYX_STATUS_INVALID_MODEL,
              NEEDLES("initializer 0 'w': external data 'weights.bin' range offset 40 + length 48 "
                      "runs past the end of the file (48 bytes)"));
  expect_fail(f, external_model(f, 1, d8, "weights.bin", "24", NULL, NULL),
              ONYX_STATUS_INVALID_MODEL, NEEDLES("offset 24 + length 32 runs past the end"));
  expect_fail(f, external_model(f, 2, d34, "weights.bin", "0", "8", NULL),
              ONYX_STATUS_INVALID_MODEL,
              NEEDLES("external data length is 8 bytes but dims and dtype need 48"));
  expect_fail(f, external_model(f, 2, d34, "weights.bin", "99999999999999999999", "48", NULL),
              ONYX_STATUS_INVALID_MODEL,
              NEEDLES("offset '99999999999999999999' is not a non-negative decimal integer"));
  expect_fail(f, external_model(f, 2, d34, "weights.bin", "-1", "48", NULL),
              ONYX_STATUS_INVALID_MODEL, NEEDLES("offset '-1'"));
  expect_fail(f, external_model(f, 2, d34, "weights.bin", "9223372036854775807", "48", NULL),
              ONYX_STATUS_INVALID_MODEL, NEEDLES("runs past the end"));
  expect_fail(f, external_model(f, 2, d34, "weights.bin", "0", "x48", NULL),
              ONYX_STATUS_INVALID_MODEL, NEEDLES("length 'x48'"));
  const int64_t huge[] = {INT64_C(1) << 40};
  expect_fail(f, external_model(f, 1, huge, "weights.bin", NULL, NULL, NULL),
              ONYX_STATUS_INVALID_MODEL, NEEDLES("runs past the end of the file"));
}

static void test_malformed_entries(void **state) {
  fixture *f = *state;
  lt_arena *a = &f->arena;
  Onnx__TensorProto *t;
  Onnx__ModelProto *m = external_model(f, 2, d34, "weights.bin", NULL, NULL, &t);
  lt_raw(a, t, "", 0);
  expect_fail(f, m, ONYX_STATUS_INVALID_MODEL,
              NEEDLES("data_location is EXTERNAL but the tensor also carries inline data"));

  m = external_model(f, 2, d34, "weights.bin", NULL, NULL, &t);
  t->external_data[0]->key = lt_str(a, "place");
  expect_fail(f, m, ONYX_STATUS_INVALID_MODEL, NEEDLES("external_data has no 'location'"));

  m = external_model(f, 2, d34, "weights.bin", "0", NULL, &t);
  t->external_data[1]->key = lt_str(a, "location");
  expect_fail(f, m, ONYX_STATUS_INVALID_MODEL,
              NEEDLES("external_data key 'location' appears twice"));

  /* Unknown keys (checksum) are ignored. */
  m = external_model(f, 2, d34, "weights.bin", "0", "48", &t);
  t->external_data[1]->key = lt_str(a, "checksum");
  expect_ok(f, m, 0.0f, 12);
}

static void test_bytes_without_folder(void **state) {
  fixture *f = *state;
  size_t size;
  uint8_t *bytes =
      lt_pack(&f->arena, external_model(f, 2, d34, "weights.bin", NULL, NULL, NULL), &size);
  onyx__graph *g = NULL;
  char err[ERR_CAP];
  lt_check_error(onyx__model_load_bytes(bytes, size, NULL, "mem", &g, err, sizeof err),
                 ONYX_STATUS_INVALID_MODEL, err,
                 "mem: ", NEEDLES("external data ('weights.bin') is not allowed"));
  assert_int_equal(onyx__model_load_bytes(bytes, size, f->model_dir, "mem", &g, err, sizeof err),
                   ONYX_STATUS_OK);
  lt_check_graph(g);
  onyx__graph_free(g);
}

/* A Constant node's TENSOR attribute may be external too. */
static void test_external_attribute(void **state) {
  fixture *f = *state;
  lt_arena *a = &f->arena;
  Onnx__ModelProto *m = lt_model(a, 17);
  Onnx__NodeProto *n = lt_node(a, m->graph, "Constant", "c", NULL, (const char *[]){"y", NULL});
  Onnx__AttributeProto *at = lt_attr(a, n, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
  at->t = lt_tensor(a, NULL, ONYX_DTYPE_FLOAT32, 2, d34);
  lt_external(a, at->t, "weights.bin", NULL, NULL);
  lt_output(a, m->graph, "y", 0, -1, NULL);
  onyx__graph *g = NULL;
  char err[ERR_CAP];
  onyx_status st = load_at(f, f->model_path, m, &g, err);
  if (st != ONYX_STATUS_OK) fail_msg("%s", err);
  const onyx_tensor *t = g->nodes[0].attrs[0].tensor;
  assert_true(((const float *)t->data)[11] == 11.0f);
  onyx__graph_free(g);

  at->t->external_data[0]->value = lt_str(a, "../outside.bin");
  expect_fail(f, m, ONYX_STATUS_INVALID_MODEL,
              NEEDLES("node 0 'c' (Constant): attribute 'value': external data location "
                      "'../outside.bin'"));
}

/* A test-data TensorProto file may keep its bytes beside it. */
static void test_tensor_file_external(void **state) {
  fixture *f = *state;
  Onnx__TensorProto *t = lt_tensor(&f->arena, "w", ONYX_DTYPE_FLOAT32, 1, d8);
  lt_external(&f->arena, t, "weights.bin", "8", "32");
  size_t size;
  uint8_t *bytes = lt_pack_tensor(&f->arena, t, &size);
  char path[4096];
  path_join(path, sizeof path, f->model_dir, "input_0.pb");
  lt_write_file(path, bytes, size);
  onyx_tensor out;
  char err[ERR_CAP];
  onyx_status st = onyx__tensor_proto_load_file(path, &out, NULL, err, sizeof err);
  if (st != ONYX_STATUS_OK) fail_msg("%s", err);
  assert_true(((const float *)out.data)[0] == 2.0f);
  free(out.data);

  t->external_data[0]->value = lt_str(&f->arena, "link_out.bin");
  bytes = lt_pack_tensor(&f->arena, t, &size);
  lt_write_file(path, bytes, size);
  lt_check_error(onyx__tensor_proto_load_file(path, &out, NULL, err, sizeof err),
                 ONYX_STATUS_INVALID_MODEL, err, path, NEEDLES("outside the model folder"));
}

/* What onnx.save_model(..., save_as_external_data=True) writes (make_fixtures.py). */
static void test_fixture_from_onnx(void **state) {
  (void)state;
  onyx__graph *g = NULL;
  char err[ERR_CAP];
  onyx_status st =
      onyx__model_load_file(ONYX_LOADER_FIXTURES_DIR "/external/model.onnx", &g, err, sizeof err);
  if (st != ONYX_STATUS_OK) fail_msg("%s", err);
  lt_check_graph(g);
  const onyx__value *w = &g->values[onyx__graph_find_value(g, "w")];
  assert_int_equal(w->init.rank, 2);
  for (int i = 0; i < 12; ++i) assert_true(((const float *)w->init.data)[i] == (float)i);
  const onyx__value *b = &g->values[onyx__graph_find_value(g, "b")];
  assert_int_equal(b->dtype, ONYX_DTYPE_INT64);
  assert_int_equal(((const int64_t *)b->init.data)[3], 40);
  onyx__graph_free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_inside_folder, setup, teardown),
      cmocka_unit_test_setup_teardown(test_escapes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ranges, setup, teardown),
      cmocka_unit_test_setup_teardown(test_malformed_entries, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bytes_without_folder, setup, teardown),
      cmocka_unit_test_setup_teardown(test_external_attribute, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tensor_file_external, setup, teardown),
      cmocka_unit_test(test_fixture_from_onnx),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
