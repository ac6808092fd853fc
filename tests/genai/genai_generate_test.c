/*
 * The generator on models as the exporters write them: ONNX Runtime GenAI's greedy
 * tokens on the builder's and mobius' fp32 exports (recorded here from
 * onnxruntime-genai 0.18.0, tests/models/exported), for both KV strategies — the shared buffer, and
 * present = concat(past, new) with the bytes it moves counted; stop conditions;
 * options and ids refused with the field named; configs contradicting the model
 * refused with the key and both values.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>

#include "genai_test_support.h"

static const int64_t prompt[] = {3, 14, 15, 92, 65, 35};
#define NEW 16

/* onnxruntime_genai: do_sample false, max_length 6 + 16, on the folders as committed. */
static const int64_t oracle_llama[NEW] = {413, 454, 350, 105, 473, 482, 144, 206,
                                          263, 206, 83,  342, 251, 254, 341, 148};
static const int64_t oracle_qwen2[NEW] = {382, 62,  31,  304, 493, 27,  326, 454,
                                          468, 472, 418, 348, 410, 256, 130, 275};

static onyx_runtime *rt;

static int setup(void **state) {
  (void)state;
  rt = cpu_runtime();
  return rt ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  onyx_runtime_destroy(rt);
  return 0;
}

static onyx_genai_model *open_model(const char *path) {
  onyx_genai_model *m = NULL;
  onyx_error *e = NULL;
  onyx_status st = onyx_genai_model_open(rt, path, NULL, &m, &e);
  if (st != ONYX_STATUS_OK) print_message("%s: %s\n", path, onyx_error_message(e));
  assert_int_equal(st, ONYX_STATUS_OK);
  return m;
}

/* Greedy ids after `prompt` with the options given; returns how many came. */
static size_t generate(onyx_genai_model *m, const onyx_generator_options *o, int64_t *out,
                       size_t cap, onyx_generator_stats *stats) {
  onyx_generator *g = NULL;
  onyx_error *e = NULL;
  onyx_status st = onyx_generator_create(m, o, &g, &e);
  if (st != ONYX_STATUS_OK) print_message("%s\n", onyx_error_message(e));
  assert_int_equal(st, ONYX_STATUS_OK);
  assert_int_equal(onyx_generator_append_tokens(g, prompt, 6, &e), ONYX_STATUS_OK);
  size_t n = 0;
  while (!onyx_generator_is_done(g) && n < cap) {
    st = onyx_generator_generate_next(g, &e);
    if (st != ONYX_STATUS_OK) print_message("step %zu: %s\n", n, onyx_error_message(e));
    assert_int_equal(st, ONYX_STATUS_OK);
    out[n++] = onyx_generator_last_token(g);
  }
  size_t len = 0;
  const int64_t *seq = onyx_generator_sequence(g, &len);
  assert_int_equal(len, 6 + n);
  assert_memory_equal(seq, prompt, sizeof prompt);
  assert_memory_equal(seq + 6, out, n * sizeof *out);
  if (stats) {
    stats->struct_size = sizeof *stats;
    onyx_generator_get_stats(g, stats);
  }
  onyx_generator_destroy(g);
  return n;
}

static void expect_ids(const int64_t *want, const int64_t *got, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (want[i] != got[i])
      print_message("token %zu: want %lld, got %lld\n", i, (long long)want[i], (long long)got[i]);
    assert_int_equal(want[i], got[i]);
  }
}

static onyx_generator_options greedy_options(const onyx_genai_model *m) {
  onyx_generator_options o;
  onyx_generator_options_init(m, &o);
  o.search.max_length = 6 + NEW;
  return o;
}

static void check_oracle(const char *folder, const int64_t *want) {
  onyx_genai_model *m = open_model(folder);
  onyx_genai_model_info info = {.struct_size = sizeof info};
  onyx_genai_model_get_info(m, &info);
  assert_int_equal(info.kv_kind, ONYX_GENAI_KV_SHARED);
  assert_string_equal(info.attention, "GroupQueryAttention");
  assert_int_equal(info.head_size, 16); /* symbolic in the model: the config's */
  onyx_generator_options o = greedy_options(m);
  int64_t got[NEW];
  onyx_generator_stats s;
  assert_int_equal(generate(m, &o, got, NEW, &s), NEW);
  expect_ids(want, got, NEW);
  assert_int_equal(s.prefill_tokens, 6);
  assert_int_equal(s.decode_tokens, NEW - 1);
  assert_int_equal(s.kv_bytes_moved, 0); /* in place: a step copies no KV */

  /* The same model with present = concat(past, new) fed back: the same ids, and
   * every byte of the past copied once per step inside the model and once out. */
  o.search.past_present_share_buffer = false;
  memset(got, 0, sizeof got);
  assert_int_equal(generate(m, &o, got, NEW, &s), NEW);
  expect_ids(want, got, NEW);
  assert_int_equal(s.kv_kind, ONYX_GENAI_KV_CONCAT);
  uint64_t row = 2 * info.layers * (uint64_t)info.kv_heads * (uint64_t)info.head_size * 4;
  uint64_t past_tokens = 0, present_tokens = 0;
  for (int step = 0; step < NEW; ++step) {
    uint64_t past = step == 0 ? 0 : 6 + (uint64_t)step - 1, fed = step == 0 ? 6 : 1;
    past_tokens += past;
    present_tokens += past + fed;
  }
  assert_int_equal(s.kv_bytes_model, past_tokens * row);
  assert_int_equal(s.kv_bytes_out, present_tokens * row);
  assert_int_equal(s.kv_bytes_moved, (past_tokens + present_tokens) * row);
  assert_int_equal(s.kv_bytes_now, (6 + NEW - 1) * row);
  onyx_genai_model_destroy(m);
}

static void test_builder_llama(void **state) {
  (void)state;
  check_oracle(EXPORTED_DIR "/builder-fp32-llama", oracle_llama);
}

static void test_builder_qwen2(void **state) {
  (void)state;
  check_oracle(EXPORTED_DIR "/builder-fp32-qwen2", oracle_qwen2);
}

/* mobius: ONNX Attention-23 with position_ids and present = concat(past, new), model
 * functions inlined at load; the same checkpoints, so ONNX Runtime GenAI's same ids. */
static void check_mobius(const char *folder, const int64_t *want) {
  onyx_genai_model *m = open_model(folder);
  onyx_genai_model_info info = {.struct_size = sizeof info};
  onyx_genai_model_get_info(m, &info);
  assert_int_equal(info.kv_kind, ONYX_GENAI_KV_CONCAT);
  assert_string_equal(info.attention, "Attention");
  assert_true(info.has_position_ids);
  onyx_generator_options o = greedy_options(m);
  assert_true(o.search.do_sample); /* mobius writes do_sample with top_k 1: greedy */
  assert_int_equal(o.search.top_k, 1);
  int64_t got[NEW];
  onyx_generator_stats s;
  assert_int_equal(generate(m, &o, got, NEW, &s), NEW);
  expect_ids(want, got, NEW);
  assert_true(s.kv_bytes_moved > 0 && s.kv_bytes_moved == s.kv_bytes_model + s.kv_bytes_out);
  o.search.past_present_share_buffer = true; /* Attention's past cannot be its present */
  onyx_generator *g = NULL;
  onyx_error *e = NULL;
  assert_int_equal(onyx_generator_create(m, &o, &g, &e), ONYX_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(onyx_error_message(e), "search.past_present_share_buffer"));
  onyx_error_free(e);
  onyx_genai_model_destroy(m);
}

static void test_mobius_llama(void **state) {
  (void)state;
  check_mobius(EXPORTED_DIR "/mobius-fp32-llama", oracle_llama);
}

static void test_mobius_qwen2(void **state) {
  (void)state;
  check_mobius(EXPORTED_DIR "/mobius-fp32-qwen2", oracle_qwen2);
}

/* A model file inside its folder works as the folder does; growth by copy too. */
static void test_model_file_and_copy_growth(void **state) {
  (void)state;
  onyx_genai_model *m = open_model(EXPORTED_DIR "/builder-fp32-llama/model.onnx");
  onyx_generator_options o = greedy_options(m);
  o.kv_growth = ONYX_KV_GROWTH_REALLOC;
  o.fixed_mask = true;
  int64_t got[NEW];
  onyx_generator_stats s;
  assert_int_equal(generate(m, &o, got, NEW, &s), NEW);
  expect_ids(oracle_llama, got, NEW);
  assert_false(s.kv.in_place);
  onyx_genai_model_destroy(m);
}

static void test_stop_conditions(void **state) {
  (void)state;
  onyx_genai_model *m = open_model(EXPORTED_DIR "/builder-fp32-llama");
  onyx_generator_options o = greedy_options(m);
  o.eos_count = 2;
  o.eos[0] = 999999;
  o.eos[1] = oracle_llama[4]; /* the fifth id ends it */
  int64_t got[NEW];
  assert_int_equal(generate(m, &o, got, NEW, NULL), 5);
  expect_ids(oracle_llama, got, 5);
  o = greedy_options(m);
  o.search.max_length = 6 + 3;
  assert_int_equal(generate(m, &o, got, NEW, NULL), 3);

  /* Done means done; and appending more resumes. */
  onyx_generator *g = NULL;
  onyx_error *e = NULL;
  o.search.max_length = 6 + 2 + 2;
  assert_int_equal(onyx_generator_create(m, &o, &g, &e), ONYX_STATUS_OK);
  assert_int_equal(onyx_generator_generate_next(g, &e), ONYX_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(onyx_error_message(e), "append tokens first"));
  onyx_error_free(e);
  assert_int_equal(onyx_generator_append_tokens(g, prompt, 6, &e), ONYX_STATUS_OK);
  assert_int_equal(onyx_generator_generate_next(g, &e), ONYX_STATUS_OK);
  assert_int_equal(onyx_generator_last_token(g), oracle_llama[0]);
  assert_int_equal(onyx_generator_generate_next(g, &e), ONYX_STATUS_OK);
  assert_int_equal(onyx_generator_append_tokens(g, prompt, 3, &e), ONYX_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(onyx_error_message(e), "would pass search.max_length 10"));
  onyx_error_free(e);
  int64_t more[1] = {7};
  assert_int_equal(onyx_generator_append_tokens(g, more, 1, &e), ONYX_STATUS_OK);
  assert_int_equal(onyx_generator_generate_next(g, &e), ONYX_STATUS_OK);
  assert_true(onyx_generator_is_done(g));
  assert_int_equal(onyx_generator_generate_next(g, &e), ONYX_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(onyx_error_message(e), "done"));
  onyx_error_free(e);
  onyx_generator_destroy(g);
  /* A prompt that fills max_length leaves no room: done before any step. */
  o.search.max_length = 6;
  assert_int_equal(onyx_generator_create(m, &o, &g, &e), ONYX_STATUS_OK);
  assert_int_equal(onyx_generator_append_tokens(g, prompt, 6, &e), ONYX_STATUS_OK);
  assert_true(onyx_generator_is_done(g));
  assert_int_equal(onyx_generator_generate_next(g, &e), ONYX_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(onyx_error_message(e), "done"));
  onyx_error_free(e);
  onyx_generator_destroy(g);
  onyx_genai_model_destroy(m);
}

/* Sampling is reproducible from its seed; the repetition penalty changes greedy ids. */
static void test_sampling_and_penalty(void **state) {
  (void)state;
  onyx_genai_model *m = open_model(EXPORTED_DIR "/builder-fp32-llama");
  onyx_generator_options o = greedy_options(m);
  o.search.do_sample = true;
  o.search.temperature = 0.9f;
  o.search.top_k = 40;
  o.search.top_p = 0.95f;
  o.seed = 1234;
  int64_t a[NEW], b[NEW];
  assert_int_equal(generate(m, &o, a, NEW, NULL), NEW);
  assert_int_equal(generate(m, &o, b, NEW, NULL), NEW);
  expect_ids(a, b, NEW);
  o.search.top_k = 1; /* top_k 1 is greedy, whatever the seed */
  assert_int_equal(generate(m, &o, a, NEW, NULL), NEW);
  expect_ids(oracle_llama, a, NEW);
  o = greedy_options(m);
  o.search.repetition_penalty = 1000.0f; /* no id may come twice while others are left */
  assert_int_equal(generate(m, &o, a, NEW, NULL), NEW);
  for (int i = 0; i < NEW; ++i)
    for (int j = 0; j < 6; ++j) assert_int_not_equal(a[i], prompt[j]);
  for (int i = 0; i < NEW; ++i)
    for (int j = 0; j < i; ++j) assert_int_not_equal(a[i], a[j]);
  onyx_genai_model_destroy(m);
}

static void expect_option_refusal(onyx_genai_model *m, const onyx_generator_options *o,
                                  const char *part) {
  onyx_generator *g = NULL;
  onyx_error *e = NULL;
  assert_int_equal(onyx_generator_create(m, o, &g, &e), ONYX_STATUS_INVALID_ARGUMENT);
  assert_null(g);
  if (strstr(onyx_error_message(e), part) == NULL)
    print_message("message: %s\nlacks: %s\n", onyx_error_message(e), part);
  assert_non_null(strstr(onyx_error_message(e), part));
  onyx_error_free(e);
}

static void test_bad_options_and_ids(void **state) {
  (void)state;
  onyx_genai_model *m = open_model(EXPORTED_DIR "/builder-fp32-llama");
  onyx_generator_options o = greedy_options(m);
  o.search.max_length = 513;
  expect_option_refusal(m, &o, "search.max_length: 513 is outside 1..512");
  o = greedy_options(m);
  o.search.temperature = NAN;
  expect_option_refusal(m, &o, "search.temperature");
  o = greedy_options(m);
  o.search.top_p = 0;
  expect_option_refusal(m, &o, "search.top_p");
  o = greedy_options(m);
  o.search.repetition_penalty = -1;
  expect_option_refusal(m, &o, "search.repetition_penalty");
  o = greedy_options(m);
  o.search.top_k = -2;
  expect_option_refusal(m, &o, "search.top_k");
  o = greedy_options(m);
  o.eos_count = 1;
  o.eos[0] = -3;
  expect_option_refusal(m, &o, "eos: id -3");

  onyx_generator *g = NULL;
  onyx_error *e = NULL;
  o = greedy_options(m);
  assert_int_equal(onyx_generator_create(m, &o, &g, &e), ONYX_STATUS_OK);
  int64_t bad[2] = {5, 512};
  assert_int_equal(onyx_generator_append_tokens(g, bad, 2, &e), ONYX_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(onyx_error_message(e), "id 512 at position 1 is outside the vocabulary"));
  onyx_error_free(e);
  size_t n = 9;
  assert_null(onyx_generator_sequence(NULL, &n));
  assert_int_equal(n, 0);
  onyx_generator_sequence(g, &n);
  assert_int_equal(n, 0); /* the refused ids left nothing */
  onyx_generator_destroy(g);
  onyx_generator_destroy(NULL);
  onyx_genai_model_destroy(NULL);
  onyx_genai_config_destroy(NULL);
  onyx_genai_model_destroy(m);
}

/* A folder holding a copy of the tiny decoder with `config` as its genai_config.json. */
static void expect_open_refusal(const char *config, onyx_status status, const char *const *parts) {
  char dir[256];
  make_temp_dir(dir, sizeof dir);
  copy_file(TINY_DIR, dir, "model.onnx");
  write_text(dir, "genai_config.json", config);
  onyx_genai_model *m = NULL;
  onyx_error *e = NULL;
  onyx_status st = onyx_genai_model_open(rt, dir, NULL, &m, &e);
  remove_dir(dir);
  if (st == ONYX_STATUS_OK) print_message("accepted: %s\n", config);
  assert_int_equal(st, status);
  assert_null(m);
  for (size_t i = 0; parts[i]; ++i) {
    if (strstr(onyx_error_message(e), parts[i]) == NULL)
      print_message("message: %s\nlacks: %s\n", onyx_error_message(e), parts[i]);
    assert_non_null(strstr(onyx_error_message(e), parts[i]));
  }
  onyx_error_free(e);
}

/* The tiny decoder fixes its KV heads (2) and head size (32), and has 4 layers. */
#define TINY_CONFIG(layers, kv, head, extra)                                                       \
  "{\"model\": {\"context_length\": 1024, \"vocab_size\": 256," extra                              \
  " \"decoder\": {\"filename\": \"model.onnx\", \"num_hidden_layers\": " #layers                   \
  ", \"num_key_value_heads\": " #kv ", \"head_size\": " #head "}},"                                \
  " \"search\": {\"past_present_share_buffer\": true}}"

static void test_contradictions(void **state) {
  (void)state;
  expect_open_refusal(TINY_CONFIG(4, 2, 16, ""), ONYX_STATUS_INVALID_CONFIG,
                      (const char *[]){"model.decoder.head_size is 16", "dim 3",
                                       "'past_key_values.0.key' to 32", NULL});
  expect_open_refusal(TINY_CONFIG(4, 4, 32, ""), ONYX_STATUS_INVALID_CONFIG,
                      (const char *[]){"model.decoder.num_key_value_heads is 4", "to 2", NULL});
  expect_open_refusal(TINY_CONFIG(3, 2, 32, ""), ONYX_STATUS_INVALID_CONFIG,
                      (const char *[]){"model.decoder.num_hidden_layers is 3", "has 4 inputs",
                                       "past_key_values.%d.key", NULL});
  expect_open_refusal(TINY_CONFIG(5, 2, 32, ""), ONYX_STATUS_INVALID_CONFIG,
                      (const char *[]){"num_hidden_layers is 5", "has 4 inputs", NULL});
  expect_open_refusal(
      "{\"model\": {\"context_length\": 1024, \"vocab_size\": 300, \"decoder\": {\"filename\": "
      "\"model.onnx\", \"num_hidden_layers\": 4, \"num_key_value_heads\": 2, \"head_size\": 32}}}",
      ONYX_STATUS_INVALID_CONFIG, (const char *[]){"model.vocab_size is 300", "to 256", NULL});
  expect_open_refusal(
      "{\"model\": {\"context_length\": 1024, \"decoder\": {\"filename\": \"model.onnx\", "
      "\"num_hidden_layers\": 4, \"num_key_value_heads\": 2, \"head_size\": 32,"
      " \"inputs\": {\"input_ids\": \"tokens\"}}}}",
      ONYX_STATUS_INVALID_CONFIG,
      (const char *[]){"model.decoder.inputs.input_ids 'tokens' names no input", NULL});
  expect_open_refusal(
      "{\"model\": {\"context_length\": 1024, \"decoder\": {\"filename\": \"model.onnx\", "
      "\"num_hidden_layers\": 4, \"num_key_value_heads\": 2, \"head_size\": 32,"
      " \"inputs\": {\"attention_mask\": \"mask\"}}}}",
      ONYX_STATUS_INVALID_CONFIG,
      (const char *[]){"has input 'attention_mask', which no name", NULL});
  expect_open_refusal(
      "{\"model\": {\"context_length\": 1024, \"decoder\": {\"filename\": \"model.onnx\", "
      "\"num_hidden_layers\": 4, \"num_key_value_heads\": 2, \"head_size\": 32,"
      " \"outputs\": {\"present_value_names\": \"present_value.%d\"}}}}",
      ONYX_STATUS_INVALID_CONFIG,
      (const char *[]){"model.decoder.outputs.present_value_names 'present_value.%d' matches no "
                       "output",
                       NULL});
  expect_open_refusal(
      "{\"model\": {\"context_length\": 1024, \"decoder\": {\"filename\": \"absent.onnx\", "
      "\"num_hidden_layers\": 4, \"num_key_value_heads\": 2, \"head_size\": 32}}}",
      ONYX_STATUS_NOT_FOUND, (const char *[]){"absent.onnx", NULL});
  /* And the config as it should be: accepted. */
  char dir[256];
  make_temp_dir(dir, sizeof dir);
  copy_file(TINY_DIR, dir, "model.onnx");
  write_text(dir, "genai_config.json", TINY_CONFIG(4, 2, 32, ""));
  onyx_genai_model *m = NULL;
  onyx_error *e = NULL;
  assert_int_equal(onyx_genai_model_open(rt, dir, NULL, &m, &e), ONYX_STATUS_OK);
  onyx_genai_model_destroy(m);
  remove_dir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_builder_llama),
      cmocka_unit_test(test_builder_qwen2),
      cmocka_unit_test(test_mobius_llama),
      cmocka_unit_test(test_mobius_qwen2),
      cmocka_unit_test(test_model_file_and_copy_growth),
      cmocka_unit_test(test_stop_conditions),
      cmocka_unit_test(test_sampling_and_penalty),
      cmocka_unit_test(test_bad_options_and_ids),
      cmocka_unit_test(test_contradictions),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
