/*
 * Drop-in discovery (core/config_dropin.c) through the public API: providers.d/
 * fragments beside plugins.ini and $ONYX_PROVIDER_PATH folders, what
 * onyx_runtime_found reports for each (origin, file and line, state, reason), and the
 * errors a malformed fragment gives, naming the fragment and line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "onyx.h"

/* A folder of its own per test: plugins.ini, providers.d/, a drop-in folder. */
typedef struct sandbox {
  char root[64];
  char path[256];
} sandbox;

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static const char *in(sandbox *s, const char *name) {
  snprintf(s->path, sizeof s->path, "%s/%s", s->root, name);
  return s->path;
}

static void sandbox_open(sandbox *s) {
  snprintf(s->root, sizeof s->root, "/tmp/onyx-discovery-XXXXXX");
  assert_non_null(mkdtemp(s->root));
  assert_int_equal(mkdir(in(s, "providers.d"), 0700), 0);
  assert_int_equal(mkdir(in(s, "drop"), 0700), 0);
  char ini[1024];
  snprintf(ini, sizeof ini, "[onyx]\nfallback = cpu\n\n[provider.cpu]\npath = %s\n", CPU_PROVIDER);
  write_file(in(s, "plugins.ini"), ini);
  unsetenv("ONYX_PROVIDER_PATH");
}

static void sandbox_close(sandbox *s) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", s->root);
  assert_int_equal(system(cmd), 0);
  unsetenv("ONYX_PROVIDER_PATH");
}

static void fragment(sandbox *s, const char *name, const char *text) {
  char path[256];
  snprintf(path, sizeof path, "%s/providers.d/%s", s->root, name);
  write_file(path, text);
}

static onyx_status create(sandbox *s, onyx_runtime **out_rt, char *msg, size_t cap) {
  onyx_error *e = NULL;
  onyx_status st = onyx_runtime_create(in(s, "plugins.ini"), out_rt, &e);
  snprintf(msg, cap, "%s", e ? onyx_error_message(e) : "");
  onyx_error_free(e);
  return st;
}

static onyx_provider_found found(const onyx_runtime *rt, size_t i) {
  onyx_provider_found f = {.struct_size = sizeof f};
  assert_int_equal(onyx_runtime_found(rt, i, &f), ONYX_STATUS_OK);
  print_message("found %zu: %s state %u origin %u %s:%d reason '%s'\n", i, f.name, f.state,
                f.origin, f.file, (int)f.line, f.reason);
  return f;
}

/* Fragments are read in file-name order; a second fragment naming a library already
 * listed is shadowed; hidden files and other names are ignored. */
static void test_fragments_in_order(void **unused) {
  (void)unused;
  sandbox s;
  sandbox_open(&s);
  char text[512];
  snprintf(text, sizeof text, "; b\n[provider.b]\npath = %s\n", MOCK_GOOD);
  fragment(&s, "20-b.ini", text);
  snprintf(text, sizeof text, "[provider.a]\npath = %s\n", MOCK_GOOD);
  fragment(&s, "10-a.ini", text);
  fragment(&s, ".hidden.ini", "not an ini at all [");
  fragment(&s, "notes.txt", "not an ini at all [");
  onyx_runtime *rt = NULL;
  char msg[2048];
  assert_int_equal(create(&s, &rt, msg, sizeof msg), ONYX_STATUS_OK);
  assert_int_equal(onyx_runtime_found_count(rt), 3);
  onyx_provider_found f = found(rt, 0);
  assert_string_equal(f.name, "cpu");
  assert_int_equal(f.origin, ONYX_PROVIDER_ORIGIN_CONFIG);
  assert_int_equal(f.state, ONYX_PROVIDER_STATE_LOADED);
  assert_int_equal(f.line, 4);
  assert_string_equal(f.reason, "");
  f = found(rt, 1);
  assert_string_equal(f.name, "a");
  assert_int_equal(f.origin, ONYX_PROVIDER_ORIGIN_DROP_IN);
  assert_int_equal(f.state, ONYX_PROVIDER_STATE_LOADED);
  assert_non_null(strstr(f.file, "providers.d/10-a.ini"));
  assert_int_equal(f.line, 1);
  f = found(rt, 2);
  assert_string_equal(f.name, "b");
  assert_int_equal(f.state, ONYX_PROVIDER_STATE_SHADOWED);
  assert_int_equal(f.line, 2);
  assert_non_null(strstr(f.reason, "listed already as 'a'"));
  /* Placement order: the drop-in before the fallback. */
  assert_int_equal(onyx_runtime_provider_count(rt), 2);
  assert_string_equal(onyx_runtime_provider_name(rt, 0), "a");
  assert_string_equal(onyx_runtime_provider_name(rt, 1), "cpu");
  onyx_provider_found small = {.struct_size = sizeof small - 1};
  assert_int_equal(onyx_runtime_found(rt, 0, &small), ONYX_STATUS_INVALID_ARGUMENT);
  assert_int_equal(onyx_runtime_found(rt, 3, &f), ONYX_STATUS_INVALID_ARGUMENT);
  assert_int_equal(onyx_runtime_found(NULL, 0, &f), ONYX_STATUS_INVALID_ARGUMENT);
  assert_int_equal(onyx_runtime_found_count(NULL), 0);
  onyx_runtime_destroy(rt);
  sandbox_close(&s);
}

/* A fragment that is not exactly one [provider.NAME] section is an error naming the
 * fragment and line; nothing is loaded. */
static void test_malformed_fragments(void **unused) {
  (void)unused;
  static const struct {
    const char *text, *needle;
  } cases[] = {
      {"[provider.a]\npath = x.so\n\n[provider.b]\npath = y.so\n",
       "bad.ini:4: a providers.d fragment names one provider; [provider.b] is a second"},
      {"; only a comment\n", "bad.ini: a providers.d fragment names one provider"},
      {"[governor]\nhost = 1GiB\n", "bad.ini:1: [governor] belongs in plugins.ini"},
      {"[provider.a]\nenabled = true\n", "bad.ini:1: [provider.a] has no path"},
      {"[provider.a]\npath = x.so\nenabled = maybe\n", "bad.ini:3: enabled must be true or false"},
      {"[provider.a\n", "bad.ini:1: syntax error"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    sandbox s;
    sandbox_open(&s);
    fragment(&s, "bad.ini", cases[i].text);
    onyx_runtime *rt = NULL;
    char msg[2048];
    assert_int_equal(create(&s, &rt, msg, sizeof msg), ONYX_STATUS_INVALID_CONFIG);
    print_message("case %zu: %s\n", i, msg);
    assert_non_null(strstr(msg, cases[i].needle));
    assert_null(rt);
    sandbox_close(&s);
  }
}

/* A fragment's relative path resolves against providers.d/; enabled = false is
 * reported as disabled; a declining provider as declined. */
static void test_states(void **unused) {
  (void)unused;
  sandbox s;
  sandbox_open(&s);
  assert_int_equal(symlink(MOCK_GOOD, in(&s, "providers.d/libmock.so")), 0);
  fragment(&s, "a.ini", "[provider.rel]\npath = libmock.so\n");
  char text[512];
  snprintf(text, sizeof text, "[provider.off]\npath = %s\nenabled = false\n", MOCK_DECLINES);
  fragment(&s, "b.ini", text);
  /* A copy, not a link: an earlier entry (even a disabled one) claims its library. */
  char cmd[512];
  snprintf(cmd, sizeof cmd, "cp '%s' '%s/declines.so'", MOCK_DECLINES, s.root);
  assert_int_equal(system(cmd), 0);
  snprintf(text, sizeof text, "[provider.no]\npath = %s/declines.so\n", s.root);
  fragment(&s, "c.ini", text);
  onyx_runtime *rt = NULL;
  char msg[2048];
  assert_int_equal(create(&s, &rt, msg, sizeof msg), ONYX_STATUS_OK);
  assert_int_equal(onyx_runtime_found_count(rt), 4);
  assert_int_equal(found(rt, 1).state, ONYX_PROVIDER_STATE_LOADED);
  assert_non_null(strstr(found(rt, 1).library, "providers.d/libmock.so"));
  assert_int_equal(found(rt, 2).state, ONYX_PROVIDER_STATE_DISABLED);
  assert_string_equal(found(rt, 2).reason, "enabled = false");
  assert_int_equal(found(rt, 3).state, ONYX_PROVIDER_STATE_DECLINED);
  assert_non_null(strstr(found(rt, 3).reason, "no mock device present"));
  onyx_runtime_destroy(rt);
  sandbox_close(&s);
}

/* A drop-in that does not load is skipped with the reason, naming its fragment and
 * line, unless strict = true; a plugins.ini section that does not load stays an error. */
static void test_failing_drop_in(void **unused) {
  (void)unused;
  sandbox s;
  sandbox_open(&s);
  fragment(&s, "gone.ini", "; a library that is not there\n[provider.gone]\npath = libgone.so\n");
  onyx_runtime *rt = NULL;
  char msg[2048];
  assert_int_equal(create(&s, &rt, msg, sizeof msg), ONYX_STATUS_OK);
  onyx_provider_found f = found(rt, 1);
  assert_int_equal(f.state, ONYX_PROVIDER_STATE_FAILED);
  assert_non_null(strstr(f.reason, "providers.d/gone.ini:2: provider 'gone': cannot load"));
  assert_int_equal(onyx_runtime_provider_count(rt), 1);
  onyx_runtime_destroy(rt);
  char ini[1024];
  snprintf(ini, sizeof ini, "[onyx]\nstrict = true\n[provider.cpu]\npath = %s\n", CPU_PROVIDER);
  write_file(in(&s, "plugins.ini"), ini);
  assert_int_equal(create(&s, &rt, msg, sizeof msg), ONYX_STATUS_NOT_FOUND);
  assert_non_null(strstr(msg, "providers.d/gone.ini:2: provider 'gone': cannot load"));
  snprintf(ini, sizeof ini, "[provider.gone]\npath = libgone.so\n[provider.cpu]\npath = %s\n",
           CPU_PROVIDER);
  write_file(in(&s, "plugins.ini"), ini);
  unlink(in(&s, "providers.d/gone.ini"));
  assert_int_equal(create(&s, &rt, msg, sizeof msg), ONYX_STATUS_NOT_FOUND);
  assert_non_null(strstr(msg, "plugins.ini:1: provider 'gone': cannot load"));
  sandbox_close(&s);
}

/* $ONYX_PROVIDER_PATH: folders (fragments, then libonyx_NAME.so), files, missing
 * entries skipped; a name plugins.ini has is shadowed. */
static void test_provider_path(void **unused) {
  (void)unused;
  sandbox s;
  sandbox_open(&s);
  assert_int_equal(symlink(MOCK_GOOD, in(&s, "drop/libonyx_dropped.so")), 0);
  assert_int_equal(symlink(CPU_PROVIDER, in(&s, "drop/libonyx_cpu.so")), 0);
  assert_int_equal(symlink(MOCK_GOOD, in(&s, "drop/libother.so")), 0); /* not libonyx_*: ignored */
  char text[512], env[1024];
  snprintf(text, sizeof text, "[provider.named]\npath = %s\nenabled = false\n", MOCK_DECLINES);
  write_file(in(&s, "named.ini"), text);
  snprintf(env, sizeof env, "%s/missing::%s/drop:%s/named.ini", s.root, s.root, s.root);
  setenv("ONYX_PROVIDER_PATH", env, 1);
  onyx_runtime *rt = NULL;
  char msg[2048];
  assert_int_equal(create(&s, &rt, msg, sizeof msg), ONYX_STATUS_OK);
  assert_int_equal(onyx_runtime_found_count(rt), 4);
  onyx_provider_found f = found(rt, 1);
  assert_string_equal(f.name, "dropped");
  assert_int_equal(f.origin, ONYX_PROVIDER_ORIGIN_PATH);
  assert_int_equal(f.state, ONYX_PROVIDER_STATE_LOADED);
  assert_int_equal(f.line, 0);
  assert_non_null(strstr(f.file, "/drop"));
  f = found(rt, 2);
  assert_string_equal(f.name, "named");
  assert_int_equal(f.origin, ONYX_PROVIDER_ORIGIN_PATH);
  assert_int_equal(f.state, ONYX_PROVIDER_STATE_DISABLED);
  f = found(rt, 3);
  assert_string_equal(f.name, "cpu");
  assert_int_equal(f.state, ONYX_PROVIDER_STATE_SHADOWED);
  assert_non_null(strstr(f.reason, "the name 'cpu' is taken by"));
  assert_non_null(strstr(f.reason, "plugins.ini:4"));
  onyx_runtime_destroy(rt);

  /* A file entry that is neither a fragment nor a provider library. */
  snprintf(env, sizeof env, "%s/plugins.ini.bak", s.root);
  write_file(env, "");
  setenv("ONYX_PROVIDER_PATH", env, 1);
  assert_int_equal(create(&s, &rt, msg, sizeof msg), ONYX_STATUS_INVALID_CONFIG);
  print_message("%s\n", msg);
  assert_non_null(strstr(msg, "ONYX_PROVIDER_PATH: "));
  assert_non_null(strstr(msg, "plugins.ini.bak"));
  sandbox_close(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fragments_in_order),
      cmocka_unit_test(test_malformed_fragments),
      cmocka_unit_test(test_states),
      cmocka_unit_test(test_failing_drop_in),
      cmocka_unit_test(test_provider_path),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
