/*
 * onyx__tensor_proto_load_file: ONNX test data files (input_K.pb / output_K.pb) with
 * the same validation as initializers, plus the failure modes of a file.
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

#include "loader_test_util.h"

#define ERR_CAP 1024
#define NEEDLES(...) ((const char *const[]){__VA_ARGS__, NULL})

typedef struct fixture {
  char *dir;
  char path[4096];
  lt_arena arena;
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  if (f == NULL) return -1;
  f->dir = lt_mkdtemp();
  snprintf(f->path, sizeof f->path, "%s/input_0.pb", f->dir);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  lt_rmtree(f->dir);
  free(f->dir);
  lt_arena_free(&f->arena);
  free(f);
  return 0;
}

static void write_tensor(fixture *f, const Onnx__TensorProto *t) {
  size_t size;
  uint8_t *bytes = lt_pack_tensor(&f->arena, t, &size);
  lt_write_file(f->path, bytes, size);
}

static void test_node_test_file(void **state) {
  (void)state;
  struct stat st;
  const char *path = ONYX_NODE_TESTS_DIR "/test_add/test_data_set_0/input_0.pb";
  if (stat(path, &st) != 0) skip();
  onyx_tensor t;
  memset(&t, 0xa5, sizeof t);
  char *name = NULL;
  char err[ERR_CAP];
  onyx_status s = onyx__tensor_proto_load_file(path, &t, &name, err, sizeof err);
  if (s != ONYX_STATUS_OK) fail_msg("%s", err);
  assert_int_equal(t.dtype, ONYX_DTYPE_FLOAT32);
  assert_int_equal(t.device, ONYX_DEVICE_HOST);
  assert_int_equal(t.device_id, 0);
  assert_int_equal(t.rank, 3);
  assert_int_equal(t.dims[0], 3);
  assert_int_equal(t.dims[1], 4);
  assert_int_equal(t.dims[2], 5);
  for (int i = 3; i < ONYX_MAX_RANK; ++i) assert_int_equal(t.dims[i], 0);
  assert_non_null(t.data);
  assert_non_null(name);
  assert_string_equal(name, "x");
  free(name);
  free(t.data);
  /* out_name may be NULL. */
  s = onyx__tensor_proto_load_file(path, &t, NULL, err, sizeof err);
  assert_int_equal(s, ONYX_STATUS_OK);
  free(t.data);
}

static void test_typed_fields(void **state) {
  fixture *f = *state;
  lt_arena *a = &f->arena;
  const int64_t d4[] = {4};
  Onnx__TensorProto *t = lt_tensor(a, "u16", ONYX_DTYPE_UINT16, 1, d4);
  lt_int32s(a, t, (const int32_t[]){0, 1, 65535, 70000}, 4);
  write_tensor(f, t);
  onyx_tensor out;
  char *name = NULL;
  char err[ERR_CAP];
  assert_int_equal(onyx__tensor_proto_load_file(f->path, &out, &name, err, sizeof err),
                   ONYX_STATUS_OK);
  const uint16_t *u = out.data;
  assert_int_equal(u[2], 65535);
  assert_int_equal(u[3], 70000 & 0xffff); /* the low bits, as ONNX stores them */
  assert_string_equal(name, "u16");
  free(out.data);
  free(name);

  t = lt_tensor(a, "i8", ONYX_DTYPE_INT8, 1, d4);
  lt_int32s(a, t, (const int32_t[]){-128, -1, 0, 127}, 4);
  write_tensor(f, t);
  assert_int_equal(onyx__tensor_proto_load_file(f->path, &out, NULL, err, sizeof err),
                   ONYX_STATUS_OK);
  const int8_t *i8 = out.data;
  assert_int_equal(i8[0], -128);
  assert_int_equal(i8[1], -1);
  assert_int_equal(i8[3], 127);
  free(out.data);

  t = lt_tensor(a, "bf", ONYX_DTYPE_BFLOAT16, 1, d4);
  lt_raw(a, t, "\x80\x3f\x00\x40\x00\x00\x80\xbf", 8);
  write_tensor(f, t);
  assert_int_equal(onyx__tensor_proto_load_file(f->path, &out, NULL, err, sizeof err),
                   ONYX_STATUS_OK);
  assert_int_equal(((const uint16_t *)out.data)[0], 0x3f80);
  assert_int_equal(((const uint16_t *)out.data)[3], 0xbf80);
  free(out.data);

  t = lt_tensor(a, "u64", ONYX_DTYPE_UINT64, 1, d4);
  t->uint64_data = lt_alloc(a, 4 * sizeof(uint64_t));
  t->uint64_data[3] = UINT64_MAX;
  t->n_uint64_data = 4;
  write_tensor(f, t);
  assert_int_equal(onyx__tensor_proto_load_file(f->path, &out, NULL, err, sizeof err),
                   ONYX_STATUS_OK);
  assert_true(((const uint64_t *)out.data)[3] == UINT64_MAX);
  free(out.data);

  /* Zero elements: no data, and no payload needed. */
  const int64_t d30[] = {3, 0};
  t = lt_tensor(a, NULL, ONYX_DTYPE_INT32, 2, d30);
  write_tensor(f, t);
  name = (char *)(uintptr_t)1;
  assert_int_equal(onyx__tensor_proto_load_file(f->path, &out, &name, err, sizeof err),
                   ONYX_STATUS_OK);
  assert_null(out.data);
  assert_null(name); /* the file names no tensor */
  assert_int_equal(out.rank, 2);
}

static void test_file_errors(void **state) {
  fixture *f = *state;
  lt_arena *a = &f->arena;
  onyx_tensor out;
  memset(&out, 0x5a, sizeof out);
  onyx_tensor before = out;
  char *name = NULL;
  char err[ERR_CAP];

  lt_check_error(onyx__tensor_proto_load_file("/nonexistent/x.pb", &out, &name, err, sizeof err),
                 ONYX_STATUS_NOT_FOUND, err, "/nonexistent/x.pb: ", NEEDLES("cannot open"));

  lt_write_file(f->path, "\xff\xff\xff", 3);
  lt_check_error(onyx__tensor_proto_load_file(f->path, &out, &name, err, sizeof err),
                 ONYX_STATUS_INVALID_MODEL, err, f->path, NEEDLES("not a valid TensorProto"));

  lt_write_file(f->path, "", 0);
  lt_check_error(onyx__tensor_proto_load_file(f->path, &out, &name, err, sizeof err),
                 ONYX_STATUS_INVALID_MODEL, err, f->path,
                 NEEDLES("unnamed tensor: has no data_type"));

  const int64_t d3[] = {3};
  Onnx__TensorProto *t = lt_tensor(a, "s", ONYX_DTYPE_STRING, 1, d3);
  write_tensor(f, t);
  lt_check_error(onyx__tensor_proto_load_file(f->path, &out, &name, err, sizeof err),
                 ONYX_STATUS_UNSUPPORTED, err, f->path, NEEDLES("tensor 's': is a STRING tensor"));

  t = lt_tensor(a, "w", ONYX_DTYPE_FLOAT32, 1, d3);
  lt_raw(a, t, "0123456789", 10);
  write_tensor(f, t);
  lt_check_error(onyx__tensor_proto_load_file(f->path, &out, &name, err, sizeof err),
                 ONYX_STATUS_INVALID_MODEL, err, f->path,
                 NEEDLES("tensor 'w': raw_data has 10 bytes but dims [3] x FLOAT need 12"));

  /* Every prefix of a valid file. */
  t = lt_tensor(a, "w", ONYX_DTYPE_FLOAT32, 1, d3);
  lt_floats(a, t, (const float[]){1, 2, 3}, 3);
  size_t size;
  uint8_t *bytes = lt_pack_tensor(a, t, &size);
  size_t loaded = 0;
  for (size_t n = 0; n < size; ++n) {
    lt_write_file(f->path, bytes, n);
    onyx_tensor cut = before;
    char *cut_name = NULL;
    onyx_status s = onyx__tensor_proto_load_file(f->path, &cut, &cut_name, err, sizeof err);
    if (s == ONYX_STATUS_OK) { /* a cut between fields can leave a valid message */
      assert_int_equal(onyx_tensor_numel(&cut), 3);
      free(cut.data);
      free(cut_name);
      ++loaded;
      continue;
    }
    lt_check_error(s, ONYX_STATUS_OK, err, f->path, NULL);
    assert_memory_equal(&cut, &before, sizeof cut); /* untouched by a failure */
    assert_null(cut_name);
  }
  assert_true(loaded <= 1);
  assert_int_equal(onyx__tensor_proto_load_file(NULL, &out, &name, err, sizeof err),
                   ONYX_STATUS_INVALID_ARGUMENT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_node_test_file, setup, teardown),
      cmocka_unit_test_setup_teardown(test_typed_fields, setup, teardown),
      cmocka_unit_test_setup_teardown(test_file_errors, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
