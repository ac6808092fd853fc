/*
 * genai_config.json: the exporters' files read as they are; unknown keys ignored;
 * a missing file, malformed JSON (with line and column), a wrong type, a missing
 * required key and an impossible value each refused with a message naming the key;
 * untrusted files (a folder, a FIFO, a huge file) refused without blocking.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <sys/stat.h>

#include "genai_test_support.h"

/* A valid config in the builder's shape; cases edit one piece of it. */
static const char *base_config =
    "{\n"
    "  \"model\": {\n"
    "    \"bos_token_id\": 1, \"context_length\": 512, \"eos_token_id\": 2,\n"
    "    \"pad_token_id\": 0, \"type\": \"llama\", \"vocab_size\": 512,\n"
    "    \"decoder\": {\n"
    "      \"session_options\": {\"log_id\": \"onnxruntime-genai\", \"provider_options\": []},\n"
    "      \"filename\": \"model.onnx\", \"head_size\": 16, \"hidden_size\": 64,\n"
    "      \"inputs\": {\"input_ids\": \"input_ids\", \"past_key_names\": "
    "\"past_key_values.%d.key\"},\n"
    "      \"outputs\": {\"logits\": \"logits\"},\n"
    "      \"num_attention_heads\": 4, \"num_hidden_layers\": 2, \"num_key_value_heads\": 2\n"
    "    }\n"
    "  },\n"
    "  \"search\": {\"do_sample\": false, \"max_length\": 128, \"num_beams\": 1,\n"
    "             \"past_present_share_buffer\": true, \"temperature\": 1.0, \"top_k\": 50,\n"
    "             \"top_p\": 1.0, \"repetition_penalty\": 1.0}\n"
    "}\n";

/* base_config with the first `from` replaced by `to`. */
static char *edited(const char *from, const char *to) {
  const char *at = strstr(base_config, from);
  assert_non_null(at);
  size_t n = strlen(base_config) - strlen(from) + strlen(to) + 1;
  char *out = malloc(n);
  assert_non_null(out);
  snprintf(out, n, "%.*s%s%s", (int)(at - base_config), base_config, to, at + strlen(from));
  return out;
}

static onyx_status parse(const char *text, onyx_genai_config **out, onyx_error **e) {
  return onyx_genai_config_parse(text, strlen(text), "test.json", out, e);
}

/* Parsing must fail with `status` and a message holding every one of `parts`. */
static void expect_refusal(const char *text, onyx_status status, const char *const *parts) {
  onyx_genai_config *c = NULL;
  onyx_error *e = NULL;
  onyx_status st = parse(text, &c, &e);
  if (st == ONYX_STATUS_OK) print_message("accepted:\n%s\n", text);
  assert_int_equal(st, status);
  assert_null(c);
  const char *msg = onyx_error_message(e);
  for (size_t i = 0; parts[i]; ++i) {
    if (strstr(msg, parts[i]) == NULL) print_message("message: %s\nlacks: %s\n", msg, parts[i]);
    assert_non_null(strstr(msg, parts[i]));
  }
  onyx_error_free(e);
}

static void test_base_config(void **state) {
  (void)state;
  onyx_genai_config *c = NULL;
  onyx_error *e = NULL;
  assert_int_equal(parse(base_config, &c, &e), ONYX_STATUS_OK);
  onyx_genai_model_desc m = {.struct_size = sizeof m};
  onyx_genai_config_model(c, &m);
  assert_string_equal(m.filename, "model.onnx");
  assert_string_equal(m.type, "llama");
  assert_int_equal(m.head_size, 16);
  assert_int_equal(m.num_hidden_layers, 2);
  assert_int_equal(m.num_key_value_heads, 2);
  assert_int_equal(m.num_attention_heads, 4);
  assert_int_equal(m.context_length, 512);
  assert_int_equal(m.vocab_size, 512);
  assert_int_equal(m.bos_token_id, 1);
  assert_int_equal(m.pad_token_id, 0);
  assert_int_equal(m.eos_count, 1);
  assert_int_equal(m.eos_token_ids[0], 2);
  onyx_genai_search s = {.struct_size = sizeof s};
  onyx_genai_config_search(c, &s);
  assert_int_equal(s.max_length, 128);
  assert_false(s.do_sample);
  assert_true(s.past_present_share_buffer);
  assert_int_equal(s.top_k, 50);
  onyx_genai_config_destroy(c);
}

/* The exporters' own files, untouched. */
static void test_exported_files(void **state) {
  (void)state;
  onyx_genai_config *c = NULL;
  onyx_error *e = NULL;
  onyx_status st = onyx_genai_config_load(EXPORTED_DIR "/builder-fp32-llama", &c, &e);
  if (st != ONYX_STATUS_OK) print_message("%s\n", onyx_error_message(e));
  assert_int_equal(st, ONYX_STATUS_OK);
  onyx_genai_model_desc m = {.struct_size = sizeof m};
  onyx_genai_search s = {.struct_size = sizeof s};
  onyx_genai_config_model(c, &m);
  onyx_genai_config_search(c, &s);
  assert_int_equal(m.num_key_value_heads, 1);
  assert_int_equal(m.head_size, 16);
  assert_int_equal(s.max_length, 512);
  assert_true(s.past_present_share_buffer);
  onyx_genai_config_destroy(c);

  st = onyx_genai_config_load(EXPORTED_DIR "/mobius-fp32-qwen2/genai_config.json", &c, &e);
  if (st != ONYX_STATUS_OK) print_message("%s\n", onyx_error_message(e));
  assert_int_equal(st, ONYX_STATUS_OK);
  onyx_genai_config_search(c, &s);
  onyx_genai_config_model(c, &m);
  assert_true(s.do_sample);
  assert_int_equal(s.top_k, 1);
  assert_false(s.past_present_share_buffer);
  assert_int_equal(m.context_length, 4096);
  assert_int_equal(s.max_length, 4096);
  onyx_genai_config_destroy(c);

  st = onyx_genai_config_load(TINY_DIR, &c, &e);
  if (st != ONYX_STATUS_OK) print_message("%s\n", onyx_error_message(e));
  assert_int_equal(st, ONYX_STATUS_OK);
  onyx_genai_config_model(c, &m);
  assert_int_equal(m.eos_count, 0); /* a byte vocabulary without eos */
  assert_int_equal(m.vocab_size, 256);
  onyx_genai_config_destroy(c);
}

static void test_defaults_and_unknown_keys(void **state) {
  (void)state;
  const char *text = "{\"model\": {\"context_length\": 64, \"future_key\": {\"x\": [1, 2]},\n"
                     " \"decoder\": {\"filename\": \"m.onnx\", \"head_size\": 8,\n"
                     "  \"num_hidden_layers\": 1, \"num_key_value_heads\": 1,\n"
                     "  \"sliding_window\": {\"window_size\": 4}}},\n"
                     " \"engine\": {\"anything\": true}}";
  onyx_genai_config *c = NULL;
  onyx_error *e = NULL;
  assert_int_equal(parse(text, &c, &e), ONYX_STATUS_OK);
  onyx_genai_model_desc m = {.struct_size = sizeof m};
  onyx_genai_search s = {.struct_size = sizeof s};
  onyx_genai_config_model(c, &m);
  onyx_genai_config_search(c, &s);
  assert_int_equal(m.eos_count, 0);
  assert_int_equal(m.bos_token_id, -1);
  assert_int_equal(m.vocab_size, 0);
  assert_int_equal(s.max_length, 64); /* the context */
  assert_false(s.do_sample);
  assert_false(s.past_present_share_buffer);
  assert_true(s.temperature == 1.0f && s.top_p == 1.0f && s.repetition_penalty == 1.0f);
  assert_int_equal(s.top_k, 0);
  /* An older caller's shorter struct gets only what it has room for. */
  struct {
    uint32_t struct_size;
    int64_t max_length;
  } old = {.struct_size = sizeof old};
  onyx_genai_config_search(c, (onyx_genai_search *)(void *)&old);
  assert_int_equal(old.max_length, 64);
  onyx_genai_config_destroy(c);
}

static void test_eos_list_and_real_integers(void **state) {
  (void)state;
  char *text = edited("\"eos_token_id\": 2", "\"eos_token_id\": [2, 7, 11]");
  char *text2 = edited("\"head_size\": 16", "\"head_size\": 16.0");
  onyx_genai_config *c = NULL;
  onyx_error *e = NULL;
  assert_int_equal(parse(text, &c, &e), ONYX_STATUS_OK);
  onyx_genai_model_desc m = {.struct_size = sizeof m};
  onyx_genai_config_model(c, &m);
  assert_int_equal(m.eos_count, 3);
  assert_int_equal(m.eos_token_ids[2], 11);
  onyx_genai_config_destroy(c);
  assert_int_equal(parse(text2, &c, &e), ONYX_STATUS_OK); /* GenAI reads numbers as doubles */
  onyx_genai_config_destroy(c);
  free(text);
  free(text2);
}

static void test_malformed(void **state) {
  (void)state;
  /* Line 3 of base_config loses its closing brace's partner. */
  char *text = edited("\"pad_token_id\": 0,", "\"pad_token_id\": 0,,");
  expect_refusal(text, ONYX_STATUS_INVALID_CONFIG,
                 (const char *[]){"test.json", "malformed JSON", "line 4, column", NULL});
  free(text);
  size_t half = strlen(base_config) / 2;
  char *cut = malloc(half + 1);
  memcpy(cut, base_config, half);
  cut[half] = '\0';
  expect_refusal(cut, ONYX_STATUS_INVALID_CONFIG, (const char *[]){"malformed JSON", "line", NULL});
  free(cut);
  expect_refusal("", ONYX_STATUS_INVALID_CONFIG, (const char *[]){"malformed JSON", NULL});
  expect_refusal("[1, 2]", ONYX_STATUS_INVALID_CONFIG,
                 (const char *[]){"top level must be an object", NULL});
  char *dup = edited("\"head_size\": 16,", "\"head_size\": 16, \"head_size\": 32,");
  expect_refusal(dup, ONYX_STATUS_INVALID_CONFIG, (const char *[]){"duplicate", "head_size", NULL});
  free(dup);
}

static void test_wrong_types(void **state) {
  (void)state;
  static const char *const cases[][3] = {
      {"\"head_size\": 16", "\"head_size\": \"16\"", "model.decoder.head_size must be an integer"},
      {"\"num_hidden_layers\": 2", "\"num_hidden_layers\": 2.5",
       "model.decoder.num_hidden_layers must be an integer, got 2.5"},
      {"\"num_key_value_heads\": 2", "\"num_key_value_heads\": null",
       "model.decoder.num_key_value_heads must be an integer, got null"},
      {"\"eos_token_id\": 2", "\"eos_token_id\": \"2\"", "model.eos_token_id must be an integer"},
      {"\"eos_token_id\": 2", "\"eos_token_id\": [2, \"x\"]", "model.eos_token_id[1]"},
      {"\"filename\": \"model.onnx\"", "\"filename\": 3",
       "model.decoder.filename must be a string"},
      {"\"do_sample\": false", "\"do_sample\": 0", "search.do_sample must be true or false"},
      {"\"temperature\": 1.0", "\"temperature\": \"hot\"", "search.temperature must be a number"},
      {"\"past_key_names\": \"past_key_values.%d.key\"", "\"past_key_names\": [\"a\"]",
       "model.decoder.inputs.past_key_names must be a string, got an array"},
      {"\"outputs\": {\"logits\": \"logits\"}", "\"outputs\": [1]",
       "model.decoder.outputs must be an object"},
      {"\"search\": {", "\"search\": 1, \"x\": {", "search must be an object"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    char *text = edited(cases[i][0], cases[i][1]);
    expect_refusal(text, ONYX_STATUS_INVALID_CONFIG,
                   (const char *[]){"test.json", cases[i][2], NULL});
    free(text);
  }
}

static void test_missing_keys(void **state) {
  (void)state;
  static const char *const cases[][3] = {
      {"\"head_size\": 16,", "", "model.decoder.head_size is missing"},
      {"\"num_hidden_layers\": 2,", "", "model.decoder.num_hidden_layers is missing"},
      {", \"num_key_value_heads\": 2", "", "model.decoder.num_key_value_heads is missing"},
      {"\"filename\": \"model.onnx\",", "", "model.decoder.filename is missing"},
      {"\"context_length\": 512,", "", "model.context_length is missing"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    char *text = edited(cases[i][0], cases[i][1]);
    expect_refusal(text, ONYX_STATUS_INVALID_CONFIG, (const char *[]){cases[i][2], NULL});
    free(text);
  }
  expect_refusal("{\"search\": {}}", ONYX_STATUS_INVALID_CONFIG,
                 (const char *[]){"model is missing", NULL});
  expect_refusal("{\"model\": {\"context_length\": 8}}", ONYX_STATUS_INVALID_CONFIG,
                 (const char *[]){"model.decoder is missing", NULL});
}

static void test_bad_values(void **state) {
  (void)state;
  static const char *const cases[][3] = {
      {"\"num_hidden_layers\": 2", "\"num_hidden_layers\": 0",
       "model.decoder.num_hidden_layers must be at least 1, got 0"},
      {"\"head_size\": 16", "\"head_size\": -16", "model.decoder.head_size must be at least 1"},
      {"\"eos_token_id\": 2", "\"eos_token_id\": -2", "model.eos_token_id must be at least 0"},
      {"\"num_attention_heads\": 4", "\"num_attention_heads\": 3",
       "num_attention_heads (3) must be a multiple of model.decoder.num_key_value_heads (2)"},
      {"\"top_p\": 1.0", "\"top_p\": 1.5", "search.top_p must be in (0, 1], got 1.5"},
      {"\"temperature\": 1.0", "\"temperature\": -1", "search.temperature must not be negative"},
      {"\"repetition_penalty\": 1.0", "\"repetition_penalty\": 0",
       "search.repetition_penalty must be positive"},
      {"\"top_k\": 50", "\"top_k\": -1", "search.top_k must be at least 0"},
      {"\"max_length\": 128", "\"max_length\": 0", "search.max_length must be at least 1"},
      {"past_key_values.%d.key", "past_key_values.key",
       "model.decoder.inputs.past_key_names 'past_key_values.key' must hold one %d"},
      {"past_key_values.%d.key", "past_key_values.%d.%s.key", "must hold one %d"},
      {"\"filename\": \"model.onnx\"", "\"filename\": \"../model.onnx\"",
       "model.decoder.filename '../model.onnx' must be a path inside the model folder"},
      {"\"filename\": \"model.onnx\"", "\"filename\": \"/etc/model.onnx\"",
       "must be a path inside the model folder"},
      {"\"filename\": \"model.onnx\"", "\"filename\": \"\"", "must be a non-empty string"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    char *text = edited(cases[i][0], cases[i][1]);
    expect_refusal(text, ONYX_STATUS_INVALID_CONFIG, (const char *[]){cases[i][2], NULL});
    free(text);
  }
  /* A max_length beyond the context is the context: positions end there. */
  char *text = edited("\"max_length\": 128", "\"max_length\": 100000");
  onyx_genai_config *c = NULL;
  onyx_error *e = NULL;
  assert_int_equal(parse(text, &c, &e), ONYX_STATUS_OK);
  onyx_genai_search s = {.struct_size = sizeof s};
  onyx_genai_config_search(c, &s);
  assert_int_equal(s.max_length, 512);
  onyx_genai_config_destroy(c);
  free(text);
}

static void expect_load_refusal(const char *path, onyx_status status, const char *part) {
  onyx_genai_config *c = NULL;
  onyx_error *e = NULL;
  assert_int_equal(onyx_genai_config_load(path, &c, &e), status);
  assert_null(c);
  if (strstr(onyx_error_message(e), part) == NULL)
    print_message("message: %s\nlacks: %s\n", onyx_error_message(e), part);
  assert_non_null(strstr(onyx_error_message(e), part));
  onyx_error_free(e);
}

/* Files are untrusted: only regular files of a sane size are read, and nothing blocks. */
static void test_untrusted_files(void **state) {
  (void)state;
  char dir[256], path[512];
  make_temp_dir(dir, sizeof dir);
  expect_load_refusal(dir, ONYX_STATUS_NOT_FOUND, "genai_config.json: not found");
  snprintf(path, sizeof path, "%s/genai_config.json", dir);
  assert_int_equal(mkdir(path, 0700), 0);
  expect_load_refusal(dir, ONYX_STATUS_INVALID_CONFIG, "not a regular file");
  rmdir(path);
  assert_int_equal(mkfifo(path, 0600), 0); /* no writer: a blocking open would hang */
  expect_load_refusal(dir, ONYX_STATUS_INVALID_CONFIG, "not a regular file");
  unlink(path);
  size_t big = (size_t)5 << 20;
  char *blob = malloc(big);
  assert_non_null(blob);
  memset(blob, ' ', big);
  write_file(dir, "genai_config.json", blob, big);
  free(blob);
  expect_load_refusal(path, ONYX_STATUS_INVALID_CONFIG, "over the limit of 4194304");
  write_text(dir, "genai_config.json", "{\"model\": ");
  expect_load_refusal(dir, ONYX_STATUS_INVALID_CONFIG,
                      "genai_config.json: malformed JSON at line 1");
  remove_dir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_base_config),
      cmocka_unit_test(test_exported_files),
      cmocka_unit_test(test_defaults_and_unknown_keys),
      cmocka_unit_test(test_eos_list_and_real_integers),
      cmocka_unit_test(test_malformed),
      cmocka_unit_test(test_wrong_types),
      cmocka_unit_test(test_missing_keys),
      cmocka_unit_test(test_bad_values),
      cmocka_unit_test(test_untrusted_files),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
