/*
 * Every ONNX backend node test model and data file: each loads, or fails with a
 * message that names the file. The node tests are valid ONNX, so a failure must say
 * UNSUPPORTED (string tensors, subgraphs, float8, ...), never INVALID_MODEL. Loaded
 * graphs are checked for the loader's invariants.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loader_test_util.h"

#define ERR_CAP 1024

static int compare_names(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void test_node_corpus(void **state) {
  (void)state;
  DIR *d = opendir(ONYX_NODE_TESTS_DIR);
  if (d == NULL) skip();
  char **names = NULL;
  size_t count = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, "test_", 5) != 0) continue;
    if (count == cap) {
      cap = cap ? cap * 2 : 256;
      names = realloc(names, cap * sizeof *names);
      assert_non_null(names);
    }
    names[count] = strdup(e->d_name);
    assert_non_null(names[count++]);
  }
  closedir(d);
  qsort(names, count, sizeof *names, compare_names);

  size_t ok = 0, unsupported = 0, pb_ok = 0, pb_failed = 0;
  for (size_t i = 0; i < count; ++i) {
    char path[4096], err[ERR_CAP];
    snprintf(path, sizeof path, "%s/%s/model.onnx", ONYX_NODE_TESTS_DIR, names[i]);
    onyx__graph *g = NULL;
    onyx_status st = onyx__model_load_file(path, &g, err, sizeof err);
    if (st == ONYX_STATUS_OK) {
      lt_check_graph(g);
      onyx__graph_free(g);
      ++ok;
    } else {
      lt_check_error(st, ONYX_STATUS_UNSUPPORTED, err, path, NULL);
      ++unsupported;
    }
    for (int set = 0; set < 8; ++set) {
      for (int io = 0; io < 2; ++io) {
        for (int k = 0;; ++k) {
          snprintf(path, sizeof path, "%s/%s/test_data_set_%d/%s_%d.pb", ONYX_NODE_TESTS_DIR,
                   names[i], set, io ? "output" : "input", k);
          FILE *f = fopen(path, "rb");
          if (f == NULL) break;
          fclose(f);
          onyx_tensor t;
          char *name = NULL;
          st = onyx__tensor_proto_load_file(path, &t, &name, err, sizeof err);
          if (st == ONYX_STATUS_OK) {
            assert_true(t.rank <= ONYX_MAX_RANK);
            assert_true((onyx_tensor_numel(&t) > 0) == (t.data != NULL));
            free(t.data);
            free(name);
            ++pb_ok;
          } else {
            /* Sequence and optional test data are not TensorProtos at all. */
            lt_check_error(st, ONYX_STATUS_OK, err, path, NULL);
            ++pb_failed;
          }
        }
      }
    }
    free(names[i]);
  }
  free(names);
  print_message("models: %zu loaded, %zu unsupported; data files: %zu loaded, %zu refused\n", ok,
                unsupported, pb_ok, pb_failed);
  assert_true(ok * 10 >= (ok + unsupported) * 8);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_node_corpus),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
