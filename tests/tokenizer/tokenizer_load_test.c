/*
 * tokenizer.json refused clearly: truncated or malformed JSON (line and column), wrong
 * types, unknown component types (their JSON path named), huge or duplicated ids,
 * merges that name tokens the vocabulary lacks, a "cyclic" vocabulary (two tokens on
 * one id, so that a merge could yield its own part), nesting beyond the limit, bad
 * regexes; untrusted files (a FIFO, a folder, an oversized file) refused without
 * blocking. Also the public API's small promises: a huge vocabulary loads, invalid
 * UTF-8 text is refused, unknown ids decode to nothing, streaming holds an incomplete
 * UTF-8 sequence back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onyx_tokenizer.h"

/* Test JSON is written with ' for " (none of it needs an apostrophe). */
static char *json_of(const char *s) {
  char *out = strdup(s);
  assert_non_null(out);
  for (char *p = out; *p; ++p)
    if (*p == '\'') *p = '"';
  return out;
}

/* A small byte-fallback BPE: "a", "b", "ab", "<unk>", the bytes 0xF0..0xFF. */
#define BASE_MODEL                                                                                 \
  "'model': {'type': 'BPE', 'unk_token': '<unk>', 'byte_fallback': true,"                          \
  " 'vocab': {'<unk>': 0, 'a': 1, 'b': 2, 'ab': 3, '<s>': 4, '<0xF0>': 5, '<0x9F>': 6,"            \
  " '<0x98>': 7, '<0x80>': 8}, 'merges': ['a b']}"

static onyx_status parse(const char *spec, onyx_tokenizer **out, onyx_error **e) {
  char *text = json_of(spec);
  onyx_status st = onyx_tokenizer_parse(text, strlen(text), NULL, 0, "t.json", out, e);
  free(text);
  return st;
}

/* Loading must fail with `status` and a message holding `part`. */
static void refused(const char *spec, onyx_status status, const char *part) {
  onyx_tokenizer *t = NULL;
  onyx_error *e = NULL;
  onyx_status st = parse(spec, &t, &e);
  if (st == ONYX_STATUS_OK) print_message("accepted: %s\n", spec);
  assert_int_equal(st, status);
  assert_null(t);
  const char *msg = onyx_error_message(e);
  if (strstr(msg, part) == NULL) print_message("message: %s\nwanted: %s\n", msg, part);
  assert_non_null(strstr(msg, part));
  assert_non_null(strstr(msg, "t.json"));
  onyx_error_free(e);
}

static onyx_tokenizer *loaded(const char *spec) {
  onyx_tokenizer *t = NULL;
  onyx_error *e = NULL;
  onyx_status st = parse(spec, &t, &e);
  if (st != ONYX_STATUS_OK) print_message("refused: %s\n", onyx_error_message(e));
  assert_int_equal(st, ONYX_STATUS_OK);
  return t;
}

static void test_malformed_json(void **state) {
  (void)state;
  refused("{" BASE_MODEL, ONYX_STATUS_INVALID_MODEL, "line 1 column");
  refused("", ONYX_STATUS_INVALID_MODEL, "line 1");
  refused("[1, 2]", ONYX_STATUS_INVALID_MODEL, "expected an object, got an array");
  refused("{'model': 1, 'model': 2}", ONYX_STATUS_INVALID_MODEL, "duplicate");
  refused("{'version': '1.0'}", ONYX_STATUS_INVALID_MODEL, "model: missing");
  refused("{'version': '2.0', " BASE_MODEL "}", ONYX_STATUS_UNSUPPORTED, "version: format version");
}

static void test_wrong_types(void **state) {
  (void)state;
  refused("{'model': []}", ONYX_STATUS_INVALID_MODEL, "model: expected an object, got an array");
  refused("{'model': {'type': 'BPE', 'vocab': [], 'merges': []}}", ONYX_STATUS_INVALID_MODEL,
          "model.vocab: expected an object, got an array");
  refused("{'model': {'type': 'BPE', 'vocab': {'a': 'x'}, 'merges': []}}",
          ONYX_STATUS_INVALID_MODEL, "model.vocab: 'a': expected an id, got a string");
  refused("{'model': {'type': 'BPE', 'vocab': {'a': 0}, 'merges': {}}}", ONYX_STATUS_INVALID_MODEL,
          "model.merges: expected an array, got an object");
  refused("{'model': {'type': 'BPE', 'vocab': {'a': 0, 'aa': 1}, 'merges': [['a', 'a'], 7]}}",
          ONYX_STATUS_INVALID_MODEL, "model.merges[1]: expected a pair of strings");
  refused("{'model': {'type': 'BPE', 'vocab': {'a': 0}, 'merges': ['a a a']}}",
          ONYX_STATUS_INVALID_MODEL, "model.merges[0]: 'a a a' is not two tokens");
  refused("{'model': {'type': 7}}", ONYX_STATUS_INVALID_MODEL, "model.type: expected a string");
  refused("{'model': {'type': 'BPE', 'vocab': {}, 'merges': [], 'byte_fallback': 1}}",
          ONYX_STATUS_INVALID_MODEL, "model.byte_fallback: expected a boolean, got an integer");
  refused("{" BASE_MODEL ", 'added_tokens': [{'id': 9}]}", ONYX_STATUS_INVALID_MODEL,
          "added_tokens[0].content: missing");
  refused("{" BASE_MODEL ", 'added_tokens': {}}", ONYX_STATUS_INVALID_MODEL,
          "added_tokens: expected an array");
  refused("{" BASE_MODEL ", 'pre_tokenizer': {'type': 'Metaspace', 'replacement': 'ab'}}",
          ONYX_STATUS_INVALID_MODEL, "pre_tokenizer.replacement: expected one character");
  refused("{" BASE_MODEL ", 'pre_tokenizer': {'type': 'Split', 'pattern': {'Regex': 'x'},"
          " 'behavior': 'Sideways', 'invert': false}}",
          ONYX_STATUS_INVALID_MODEL, "pre_tokenizer.behavior: 'Sideways' is not one of");
  refused("{" BASE_MODEL ", 'decoder': {'type': 'Strip', 'content': ' ', 'start': -1, 'stop': 0}}",
          ONYX_STATUS_INVALID_MODEL, "decoder.start: -1 is outside");
}

static void test_unknown_components(void **state) {
  (void)state;
  refused("{'model': {'type': 'WordPiece', 'vocab': {}}}", ONYX_STATUS_UNSUPPORTED,
          "model.type: model 'WordPiece' is not supported (supported: BPE)");
  refused("{" BASE_MODEL ", 'normalizer': {'type': 'Sequence', 'normalizers': [{'type': 'NFC'},"
          " {'type': 'BertNormalizer'}]}}",
          ONYX_STATUS_UNSUPPORTED,
          "normalizer.normalizers[1].type: normalizer 'BertNormalizer' is not supported");
  refused("{" BASE_MODEL ", 'pre_tokenizer': {'type': 'Sequence', 'pretokenizers': ["
          "{'type': 'Digits', 'individual_digits': true}, {'type': 'Whitespace'}]}}",
          ONYX_STATUS_UNSUPPORTED,
          "pre_tokenizer.pretokenizers[1].type: pre_tokenizer 'Whitespace'");
  refused("{" BASE_MODEL ", 'decoder': {'type': 'WordPiece'}}", ONYX_STATUS_UNSUPPORTED,
          "decoder.type: decoder 'WordPiece' is not supported");
  refused("{" BASE_MODEL ", 'post_processor': {'type': 'RobertaProcessing'}}",
          ONYX_STATUS_UNSUPPORTED, "post_processor.type: post_processor 'RobertaProcessing'");
  refused("{" BASE_MODEL ", 'normalizer': {'kind': 'NFC'}}", ONYX_STATUS_INVALID_MODEL,
          "normalizer.type: missing");
  refused("{'model': {'type': 'BPE', 'vocab': {}, 'merges': [], 'dropout': 0.1}}",
          ONYX_STATUS_UNSUPPORTED, "model.dropout: 0.1: BPE-dropout");
  refused("{" BASE_MODEL ", 'post_processor': {'type': 'TemplateProcessing', 'single': ["
          "{'SpecialToken': {'id': '<s>', 'type_id': 0}}, {'Sequence': {'id': 'A', 'type_id': 0}}],"
          " 'special_tokens': {}}}",
          ONYX_STATUS_INVALID_MODEL, "'<s>' is not in special_tokens");
}

static void test_hostile_vocab(void **state) {
  (void)state;
  refused("{'model': {'type': 'BPE', 'vocab': {'a': 1099511627776}, 'merges': []}}",
          ONYX_STATUS_INVALID_MODEL, "model.vocab: 'a': id 1099511627776 is outside [0, 4194303]");
  refused("{'model': {'type': 'BPE', 'vocab': {'a': -1}, 'merges': []}}", ONYX_STATUS_INVALID_MODEL,
          "id -1 is outside");
  /* "Cyclic": ab on a's id, so merging a and b would give a back. */
  refused("{'model': {'type': 'BPE', 'vocab': {'a': 0, 'b': 1, 'ab': 0}, 'merges': ['a b']}}",
          ONYX_STATUS_INVALID_MODEL, "both have id 0");
  refused("{'model': {'type': 'BPE', 'vocab': {'a': 0, 'b': 1}, 'merges': ['a c']}}",
          ONYX_STATUS_INVALID_MODEL, "model.merges[0]: 'c' is not in model.vocab");
  refused("{'model': {'type': 'BPE', 'vocab': {'a': 0, 'b': 1}, 'merges': ['a b']}}",
          ONYX_STATUS_INVALID_MODEL, "model.merges[0]: the merge 'ab' is not in model.vocab");
  refused("{" BASE_MODEL ", 'added_tokens': [{'id': 99999999, 'content': 'x'}]}",
          ONYX_STATUS_INVALID_MODEL, "added_tokens[0].id: 99999999 is outside");
  /* The top id is fine, and so is a sparse table up to it. */
  onyx_tokenizer *t = loaded("{'model': {'type': 'BPE', 'vocab': {'a': 4194303}, 'merges': []}}");
  int64_t *ids = NULL;
  size_t n = 0;
  assert_int_equal(onyx_tokenizer_encode(t, "aa", 2, true, &ids, &n, NULL), ONYX_STATUS_OK);
  assert_int_equal(n, 2);
  assert_int_equal(ids[0], 4194303);
  onyx_tokenizer_free(ids);
  onyx_tokenizer_destroy(t);
}

static void test_regex_and_depth(void **state) {
  (void)state;
  refused("{" BASE_MODEL ", 'pre_tokenizer': {'type': 'Split', 'pattern': {'Regex': '(a'},"
          " 'behavior': 'Isolated', 'invert': false}}",
          ONYX_STATUS_INVALID_MODEL, "pre_tokenizer.pattern: regex '(a' does not compile");
  refused("{" BASE_MODEL ", 'pre_tokenizer': {'type': 'Split', 'pattern': {'Regex': '[\\\\Sa]'},"
          " 'behavior': 'Isolated', 'invert': false}}",
          ONYX_STATUS_UNSUPPORTED, "inside a bracket has no PCRE2 spelling");
  refused("{" BASE_MODEL ", 'normalizer': {'type': 'Replace', 'pattern': {'Glob': '*'},"
          " 'content': ''}}",
          ONYX_STATUS_INVALID_MODEL, "normalizer.pattern: expected one of String or Regex");
  /* Sequence in Sequence, 20 deep. */
  char spec[4096];
  size_t at = (size_t)snprintf(spec, sizeof spec, "{%s, 'normalizer': ", BASE_MODEL);
  for (int i = 0; i < 20; ++i)
    at += (size_t)snprintf(spec + at, sizeof spec - at, "{'type': 'Sequence', 'normalizers': [");
  at += (size_t)snprintf(spec + at, sizeof spec - at, "{'type': 'NFC'}");
  for (int i = 0; i < 20; ++i) at += (size_t)snprintf(spec + at, sizeof spec - at, "]}");
  snprintf(spec + at, sizeof spec - at, "}");
  refused(spec, ONYX_STATUS_INVALID_MODEL, "nested deeper than 16");
}

/* 300k tokens and 100k merges load, and encode gives the longest merge. */
static void test_huge_vocab(void **state) {
  (void)state;
  size_t cap = 16u << 20, at = 0;
  char *text = malloc(cap);
  assert_non_null(text);
  at += (size_t)snprintf(text + at, cap - at, "{\"model\": {\"type\": \"BPE\", \"vocab\": {");
  for (int i = 0; i < 300000; ++i)
    at += (size_t)snprintf(text + at, cap - at, "%s\"t%d\": %d", i ? ", " : "", i, i);
  at += (size_t)snprintf(text + at, cap - at, ", \"x\": 300000, \"xx\": 300001}, \"merges\": [");
  for (int i = 0; i < 100000; ++i)
    at +=
        (size_t)snprintf(text + at, cap - at, "%s[\"t%d\", \"%d\"]", i ? ", " : "", i / 10, i % 10);
  at += (size_t)snprintf(text + at, cap - at, "]}}");
  /* Merges whose right side is not a token are refused with their index. */
  onyx_tokenizer *t = NULL;
  onyx_error *e = NULL;
  assert_int_equal(onyx_tokenizer_parse(text, at, NULL, 0, "big.json", &t, &e),
                   ONYX_STATUS_INVALID_MODEL);
  assert_non_null(strstr(onyx_error_message(e), "model.merges[0]: '0' is not in model.vocab"));
  onyx_error_free(e);
  char *m = strstr(text, "\"merges\": [");
  snprintf(m, cap - (size_t)(m - text), "\"merges\": [[\"x\", \"x\"]]}}");
  at = strlen(text);
  assert_int_equal(onyx_tokenizer_parse(text, at, NULL, 0, "big.json", &t, &e), ONYX_STATUS_OK);
  onyx_tokenizer_info info = {.struct_size = sizeof info};
  onyx_tokenizer_get_info(t, &info);
  assert_int_equal(info.vocab_size, 300002);
  int64_t *ids = NULL;
  size_t n = 0;
  assert_int_equal(onyx_tokenizer_encode(t, "xxx", 3, true, &ids, &n, NULL), ONYX_STATUS_OK);
  assert_int_equal(n, 2);
  assert_int_equal(ids[0], 300001);
  assert_int_equal(ids[1], 300000);
  onyx_tokenizer_free(ids);
  onyx_tokenizer_destroy(t);
  free(text);
}

static void write_file(const char *path, const char *spec) {
  char *text = json_of(spec);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  free(text);
}

static void load_refused(const char *path, onyx_status status, const char *part) {
  onyx_tokenizer *t = NULL;
  onyx_error *e = NULL;
  assert_int_equal(onyx_tokenizer_load(path, &t, &e), status);
  if (strstr(onyx_error_message(e), part) == NULL)
    print_message("message: %s\nwanted: %s\n", onyx_error_message(e), part);
  assert_non_null(strstr(onyx_error_message(e), part));
  onyx_error_free(e);
}

static void test_untrusted_files(void **state) {
  (void)state;
  char dir[] = "/tmp/onyx_tok_XXXXXX", path[512], cfg[512];
  assert_non_null(mkdtemp(dir));
  load_refused(dir, ONYX_STATUS_NOT_FOUND, "tokenizer.json");
  snprintf(path, sizeof path, "%s/tokenizer.json", dir);
  assert_int_equal(mkfifo(path, 0600), 0); /* an open that blocked would hang the test */
  load_refused(dir, ONYX_STATUS_INVALID_MODEL, "is a FIFO, not a regular file");
  unlink(path);
  assert_int_equal(mkdir(path, 0700), 0);
  load_refused(dir, ONYX_STATUS_INVALID_MODEL, "is a directory");
  rmdir(path);
  int fd = open(path, O_CREAT | O_WRONLY, 0600);
  assert_true(fd >= 0);
  assert_int_equal(ftruncate(fd, (off_t)ONYX_TOKENIZER_MAX_FILE_BYTES + 1), 0); /* sparse */
  close(fd);
  load_refused(dir, ONYX_STATUS_INVALID_MODEL, "over the limit");
  write_file(path, "{" BASE_MODEL "}");
  snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", dir);
  write_file(cfg, "{'eos_token': 5}");
  load_refused(dir, ONYX_STATUS_INVALID_MODEL,
               "tokenizer_config.json: eos_token: expected a string or an object, got a number");
  write_file(cfg, "{'bos_token': {'content': '<s>'}, 'eos_token': 'a', 'add_bos_token': true, "
                  "'model_max_length': 1000000000000000019884624838656}");
  onyx_tokenizer *t = NULL;
  assert_int_equal(onyx_tokenizer_load(path, &t, NULL), ONYX_STATUS_OK);
  onyx_tokenizer_info info = {.struct_size = sizeof info};
  onyx_tokenizer_get_info(t, &info);
  assert_int_equal(info.bos_id, 4);
  assert_int_equal(info.eos_id, 1);
  assert_int_equal(info.pad_id, -1);
  assert_int_equal(info.add_bos_token, 1);
  assert_int_equal(info.add_eos_token, -1);
  onyx_tokenizer_destroy(t);
  unlink(cfg);
  unlink(path);
  rmdir(dir);
}

static void test_encode_decode_promises(void **state) {
  (void)state;
  onyx_tokenizer *t = loaded("{" BASE_MODEL ", 'decoder': {'type': 'Sequence', 'decoders': ["
                             "{'type': 'ByteFallback'}, {'type': 'Fuse'}]}}");
  int64_t *ids = NULL;
  size_t n = 0;
  onyx_error *e = NULL;
  assert_int_equal(onyx_tokenizer_encode(t, "ab\xff", 3, true, &ids, &n, &e),
                   ONYX_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(onyx_error_message(e), "not valid UTF-8 at byte 2"));
  onyx_error_free(e);
  /* 😀 is F0 9F 98 80: byte tokens, all in the vocabulary; c is unknown: <unk>. */
  assert_int_equal(onyx_tokenizer_encode(t,
                                         "ab\xF0\x9F\x98\x80"
                                         "c",
                                         7, true, &ids, &n, NULL),
                   ONYX_STATUS_OK);
  int64_t want[] = {3, 5, 6, 7, 8, 0};
  assert_int_equal(n, 6);
  assert_memory_equal(ids, want, sizeof want);
  onyx_tokenizer_free(ids);
  /* Streaming gives nothing until the fourth byte of the emoji. */
  onyx_tokenizer_stream *s = NULL;
  assert_int_equal(onyx_tokenizer_stream_create(t, true, &s, NULL), ONYX_STATUS_OK);
  const char *expect[] = {"ab", "", "", "", "\xF0\x9F\x98\x80", "<unk>"};
  for (int i = 0; i < 6; ++i) {
    const char *text = NULL;
    size_t size = 99;
    assert_int_equal(onyx_tokenizer_stream_step(s, want[i], &text, &size, NULL), ONYX_STATUS_OK);
    assert_int_equal(size, strlen(expect[i]));
    assert_memory_equal(text, expect[i], size);
  }
  onyx_tokenizer_stream_destroy(s);
  /* Ids with no token are skipped; a lone byte is U+FFFD. */
  int64_t odd[] = {-5, 1, 1000, 5, 2};
  char *text = NULL;
  size_t size = 0;
  assert_int_equal(onyx_tokenizer_decode(t, odd, 5, false, &text, &size, NULL), ONYX_STATUS_OK);
  assert_string_equal(text, "a\xEF\xBF\xBD"
                            "b");
  onyx_tokenizer_free(text);
  assert_int_equal(onyx_tokenizer_token_to_id(t, "ab", 2), 3);
  assert_int_equal(onyx_tokenizer_token_to_id(t, "zz", 2), -1);
  size_t len = 0;
  assert_memory_equal(onyx_tokenizer_id_to_token(t, 3, &len), "ab", 2);
  assert_int_equal(len, 2);
  assert_null(onyx_tokenizer_id_to_token(t, 77, &len));
  onyx_tokenizer_destroy(t);
  /* unk_token outside the vocabulary: an error when a character needs it. */
  t = loaded("{'model': {'type': 'BPE', 'unk_token': '?', 'vocab': {'a': 0}, 'merges': []}}");
  assert_int_equal(onyx_tokenizer_encode(t, "ab", 2, true, &ids, &n, &e),
                   ONYX_STATUS_INVALID_MODEL);
  assert_non_null(strstr(onyx_error_message(e), "unk_token '?' is not in model.vocab"));
  onyx_error_free(e);
  onyx_tokenizer_destroy(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_malformed_json),     cmocka_unit_test(test_wrong_types),
      cmocka_unit_test(test_unknown_components), cmocka_unit_test(test_hostile_vocab),
      cmocka_unit_test(test_regex_and_depth),    cmocka_unit_test(test_huge_vocab),
      cmocka_unit_test(test_untrusted_files),    cmocka_unit_test(test_encode_decode_promises),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
