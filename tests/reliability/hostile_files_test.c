/*
 * Hostile and careless files: plugins.ini lines too long for the parser, NUL bytes,
 * duplicate keys, misspelt tiers, numbers out of range, a directory or a FIFO where a
 * config, a model or external data should be. Each is refused with a message that
 * names the file, the line where there is one, and what would be accepted; nothing
 * blocks (a FIFO without a writer would hang a blocking open for ever), nothing is
 * read silently in pieces.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "../core/test_support.h"
#include "onyx.h"

static void assert_contains_(const char *hay, const char *needle, const char *file, int line) {
  if (hay == NULL || strstr(hay, needle) == NULL) {
    print_error("%s:%d: expected '%s' in '%s'\n", file, line, needle, hay ? hay : "(null)");
    _fail(file, line);
  }
}
#define assert_contains(hay, needle) assert_contains_((hay), (needle), __FILE__, __LINE__)

/* Loads `text` as plugins.ini; the message (or "") goes to msg. */
static onyx_status load_ini(const char *text, char *msg, size_t cap) {
  char *path = write_temp_file(".ini", text);
  assert_non_null(path);
  onyx_runtime *rt = NULL;
  onyx_error *e = NULL;
  onyx_status st = onyx_runtime_create(path, &rt, &e);
  snprintf(msg, cap, "%s", e ? onyx_error_message(e) : "");
  if (st == ONYX_STATUS_OK) assert_null(e);
  onyx_error_free(e);
  onyx_runtime_destroy(rt);
  remove_temp_file(path);
  return st;
}

static void expect_refused(const char *text, const char *needle) {
  char msg[4096];
  onyx_status st = load_ini(text, msg, sizeof msg);
  if (st != ONYX_STATUS_INVALID_CONFIG) print_error("accepted or wrong status %d: %s\n", st, text);
  assert_int_equal(st, ONYX_STATUS_INVALID_CONFIG);
  assert_contains(msg, needle);
}

/* ------------------------------------------------------------ plugins.ini */

/* A line past inih's buffer was split, its tail read as a key of its own: a provider
 * silently disabled, or another library loaded. Now it is an error at its line; a
 * line that just fits is read whole. */
static void long_lines_are_refused_at_their_line(void **state) {
  (void)state;
  char text[2048], msg[4096];
  /* "path = " and the provider's path padded with "/." segments to 197 characters in
   * all, the most a line may have. */
  char padded[512] = "";
  size_t want = 197 - strlen("path = ") - strlen(CPU_PROVIDER);
  assert_true(want < 400 && CPU_PROVIDER[0] == '/');
  if (want % 2) strcat(padded, "/");
  for (size_t i = 0; i < want / 2; ++i) strcat(padded, "/.");
  snprintf(text, sizeof text, "[provider.cpu]\npath = %s%s\n", padded, CPU_PROVIDER);
  assert_int_equal(load_ini(text, msg, sizeof msg), ONYX_STATUS_OK);
  snprintf(text, sizeof text, "[provider.cpu]\npath = /.%s%s\nenabled = true\n", padded,
           CPU_PROVIDER);
  expect_refused(text, ":2: line is 199 characters; the longest line plugins.ini may have is 197");
  /* The tail of the old split: "enabled = false" after 180 characters of comment. */
  char comment[300];
  memset(comment, 'x', 230);
  comment[230] = '\0';
  snprintf(text, sizeof text, "[provider.cpu]\npath = %s\n; %s enabled = false\n", CPU_PROVIDER,
           comment);
  expect_refused(text, ":3: line is 248 characters");
}

static void nul_bytes_are_refused(void **state) {
  (void)state;
  char text[1024], msg[256];
  int n = snprintf(text, sizeof text, "[provider.cpu]\npath = %s", CPU_PROVIDER);
  memcpy(text + n, "\0/evil.so\n", 11);
  char *path = write_temp_file(".ini", "");
  FILE *f = fopen(path, "wb");
  fwrite(text, 1, (size_t)n + 10, f);
  fclose(f);
  onyx_runtime *rt = NULL;
  onyx_error *e = NULL;
  assert_int_equal(onyx_runtime_create(path, &rt, &e), ONYX_STATUS_INVALID_CONFIG);
  snprintf(msg, sizeof msg, "%s", onyx_error_message(e));
  assert_contains(msg, ":2: line holds a NUL byte");
  onyx_error_free(e);
  remove_temp_file(path);
}

static void duplicate_keys_are_refused(void **state) {
  (void)state;
  char text[2048];
  snprintf(text, sizeof text, "[provider.cpu]\npath = %s\nenabled = true\nenabled = false\n",
           CPU_PROVIDER);
  expect_refused(text, ":4: duplicate key 'enabled' in [provider.cpu] (first set at line 3)");
  snprintf(text, sizeof text,
           "[onyx]\nthreads = 2\n[provider.cpu]\npath = %s\n[onyx]\nthreads = 4\n", CPU_PROVIDER);
  expect_refused(text, ":6: duplicate key 'threads' in [onyx] (first set at line 2)");
  snprintf(text, sizeof text, "[provider.cpu]\npath = %s\noption.threads = 1\noption.threads = 2\n",
           CPU_PROVIDER);
  expect_refused(text, ":4: duplicate key 'option.threads'");
  snprintf(text, sizeof text, "[governor]\nhost = 1GiB\nhost = 2GiB\n[provider.cpu]\npath = %s\n",
           CPU_PROVIDER);
  expect_refused(text, ":3: duplicate key 'host' in [governor]");
}

/* An indented line is a key of its own, not a continuation of the value above. */
static void indented_keys_are_keys(void **state) {
  (void)state;
  char text[2048], msg[512];
  snprintf(text, sizeof text, "[provider.cpu]\npath = %s\n   enabled = true\n", CPU_PROVIDER);
  assert_int_equal(load_ini(text, msg, sizeof msg), ONYX_STATUS_OK);
  snprintf(text, sizeof text, "[provider.cpu]\npath = %s\n   path = /other.so\n", CPU_PROVIDER);
  expect_refused(text, ":3: duplicate key 'path'");
}

static void tiers_must_name_a_tier(void **state) {
  (void)state;
  char text[2048], msg[512];
  snprintf(text, sizeof text, "[governor]\nhots = 1KiB\n[provider.cpu]\npath = %s\n", CPU_PROVIDER);
  expect_refused(text, ":2: [governor] 'hots' names no memory tier: [governor] limits the host");
  snprintf(text, sizeof text, "[provider.cpu]\npath = %s\n[governor]\ncuda0 = 1GiB\n",
           CPU_PROVIDER);
  expect_refused(text, ":4: [governor] 'cuda0' names no memory tier");
  /* inih splits at ':': the device's tier is capped by memory_limit, and says so. */
  snprintf(text, sizeof text, "[provider.cpu]\npath = %s\n[governor]\ncuda:0 = 1GiB\n",
           CPU_PROVIDER);
  expect_refused(text, ":4: 'cuda:0 = 1GiB' cannot be a [governor] key: inih reads ':' as '='");
  snprintf(text, sizeof text, "[governor]\nhost = 1GiB\n[provider.cpu]\npath = %s\n", CPU_PROVIDER);
  assert_int_equal(load_ini(text, msg, sizeof msg), ONYX_STATUS_OK);
  snprintf(text, sizeof text, "[governor]\nrequester.kv = 1GiB\n[provider.cpu]\npath = %s\n",
           CPU_PROVIDER);
  expect_refused(text, "unknown requester 'kv' (known: weights, kv_cache");
}

static void values_out_of_range_name_the_range(void **state) {
  (void)state;
  char text[2048];
  const char *bad_bytes[] = {"0",      "-1GiB", "99999999999TiB", "18446744073709551616",
                             "8 GB x", "1.5GiB"};
  for (size_t i = 0; i < sizeof bad_bytes / sizeof bad_bytes[0]; ++i) {
    snprintf(text, sizeof text, "[governor]\nhost = %s\n[provider.cpu]\npath = %s\n", bad_bytes[i],
             CPU_PROVIDER);
    expect_refused(text, "is not a byte size from 1 byte to 16 EiB");
    snprintf(text, sizeof text, "[provider.cpu]\npath = %s\nmemory_limit = %s\n", CPU_PROVIDER,
             bad_bytes[i]);
    expect_refused(text, ":3: memory_limit: '");
  }
  snprintf(text, sizeof text, "[onyx]\nthreads = 1025\n[provider.cpu]\npath = %s\n", CPU_PROVIDER);
  expect_refused(text, ":2: threads must be 0..1024, got '1025'");
  snprintf(text, sizeof text, "[onyx]\nthreads = -1\n[provider.cpu]\npath = %s\n", CPU_PROVIDER);
  expect_refused(text, "threads must be 0..1024");
  snprintf(text, sizeof text, "[onyx]\nstrict = 2\n[provider.cpu]\npath = %s\n", CPU_PROVIDER);
  expect_refused(text, ":2: strict must be true or false, got '2' (yes/no, on/off and 1/0");
  snprintf(text, sizeof text, "[onyx]\nfallback = cpx\n[provider.cpu]\npath = %s\n", CPU_PROVIDER);
  expect_refused(text, ":2: fallback 'cpx' names no [provider.cpx] section");
  snprintf(text, sizeof text, "[onyx]\nfallback =\n[provider.cpu]\npath = %s\n", CPU_PROVIDER);
  expect_refused(text, ":2: fallback must name a [provider.NAME] section");
  /* Hostile counts stay bounded. */
  char *many = malloc(70 * 64 + 1);
  many[0] = '\0';
  for (int i = 0; i < 70; ++i) sprintf(many + strlen(many), "[provider.p%d]\npath = x.so\n", i);
  expect_refused(many, "at most 64 provider sections are allowed");
  free(many);
}

static void config_paths_that_are_not_files(void **state) {
  (void)state;
  char dir[] = "/tmp/onyx-hostile-XXXXXX";
  assert_non_null(mkdtemp(dir));
  onyx_runtime *rt = NULL;
  onyx_error *e = NULL;
  assert_int_equal(onyx_runtime_create(dir, &rt, &e), ONYX_STATUS_INVALID_CONFIG);
  assert_contains(onyx_error_message(e), "is not a regular file (it is a directory)");
  onyx_error_free(e);
  char fifo[300];
  snprintf(fifo, sizeof fifo, "%s/plugins.ini", dir);
  assert_int_equal(mkfifo(fifo, 0600), 0); /* no writer: a blocking open would hang */
  e = NULL;
  assert_int_equal(onyx_runtime_create(fifo, &rt, &e), ONYX_STATUS_INVALID_CONFIG);
  assert_contains(onyx_error_message(e), "plugins.ini: is not a regular file (it is a FIFO)");
  assert_null(rt);
  onyx_error_free(e);
  unlink(fifo);
  rmdir(dir);
}

/* ------------------------------------------------------------ models */

static onyx_runtime *cpu_runtime(void) {
  char text[1024];
  snprintf(text, sizeof text, "[provider.cpu]\npath = %s\n", CPU_PROVIDER);
  char *path = write_temp_file(".ini", text);
  onyx_runtime *rt = NULL;
  onyx_error *e = NULL;
  assert_int_equal(onyx_runtime_create(path, &rt, &e), ONYX_STATUS_OK);
  remove_temp_file(path);
  return rt;
}

static void copy_file(const char *from, const char *to) {
  FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
  assert_non_null(in);
  assert_non_null(out);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0) assert_int_equal(fwrite(buf, 1, n, out), n);
  fclose(in);
  fclose(out);
}

static void model_paths_that_are_not_files(void **state) {
  (void)state;
  onyx_runtime *rt = cpu_runtime();
  char dir[] = "/tmp/onyx-hostile-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char model[300], weights[300];
  snprintf(model, sizeof model, "%s/model.onnx", dir);
  snprintf(weights, sizeof weights, "%s/weights.bin", dir);
  onyx_session *s = NULL;
  onyx_error *e = NULL;
  /* The model a FIFO: refused at once. */
  assert_int_equal(mkfifo(model, 0600), 0);
  assert_int_equal(onyx_session_create(rt, model, NULL, &s, &e), ONYX_STATUS_IO_ERROR);
  assert_contains(onyx_error_message(e), "model.onnx: is not a regular file (it is a FIFO)");
  onyx_error_free(e);
  e = NULL;
  unlink(model);
  /* The model a directory. */
  assert_int_equal(mkdir(model, 0700), 0);
  assert_int_equal(onyx_session_create(rt, model, NULL, &s, &e), ONYX_STATUS_IO_ERROR);
  assert_contains(onyx_error_message(e), "is not a regular file (it is a directory)");
  onyx_error_free(e);
  e = NULL;
  rmdir(model);
  /* Its external data a FIFO: refused, naming the tensor and the location. */
  copy_file(FIXTURES_DIR "/external/model.onnx", model);
  assert_int_equal(mkfifo(weights, 0600), 0);
  assert_int_equal(onyx_session_create(rt, model, NULL, &s, &e), ONYX_STATUS_INVALID_MODEL);
  assert_contains(onyx_error_message(e),
                  "external data 'weights.bin' is not a regular file (it is a FIFO)");
  onyx_error_free(e);
  e = NULL;
  unlink(weights);
  /* Its external data shorter than the tensor: refused by range, before any read. */
  FILE *f = fopen(weights, "wb");
  fputs("short", f);
  fclose(f);
  assert_int_equal(onyx_session_create(rt, model, NULL, &s, &e), ONYX_STATUS_INVALID_MODEL);
  assert_contains(onyx_error_message(e), "runs past the end of the file (5 bytes)");
  onyx_error_free(e);
  assert_null(s);
  unlink(weights);
  unlink(model);
  rmdir(dir);
  onyx_runtime_destroy(rt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(long_lines_are_refused_at_their_line),
      cmocka_unit_test(nul_bytes_are_refused),
      cmocka_unit_test(duplicate_keys_are_refused),
      cmocka_unit_test(indented_keys_are_keys),
      cmocka_unit_test(tiers_must_name_a_tier),
      cmocka_unit_test(values_out_of_range_name_the_range),
      cmocka_unit_test(config_paths_that_are_not_files),
      cmocka_unit_test(model_paths_that_are_not_files),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
