/*
 * Fuzz target: the tokenizer loader (tokenizer/, over jansson, PCRE2 and utf8proc).
 * The input is tokenizer.json text, optionally followed by a NUL and
 * tokenizer_config.json text. A refusal must come with a message; a tokenizer that
 * loads must then encode, decode and stream sample texts (and the input's own start,
 * when it is UTF-8) without a fault. Seeds: tests/tokenizer/make_fuzz_seeds.py;
 * dictionary: tokenizer.dict.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_target.h"
#include "onyx_tokenizer.h"

static void exercise(onyx_tokenizer *t, const char *text, size_t size) {
  int64_t *ids = NULL;
  size_t n = 0;
  onyx_error *e = NULL;
  if (onyx_tokenizer_encode(t, text, size, true, &ids, &n, &e) != ONYX_STATUS_OK) {
    if (onyx_error_message(e)[0] == '\0') abort();
    onyx_error_free(e);
    return;
  }
  for (int skip = 0; skip < 2; ++skip) {
    char *out = NULL;
    size_t out_size = 0;
    if (onyx_tokenizer_decode(t, ids, n, skip, &out, &out_size, &e) == ONYX_STATUS_OK)
      onyx_tokenizer_free(out);
    else
      onyx_error_free(e);
  }
  onyx_tokenizer_stream *s = NULL;
  if (onyx_tokenizer_stream_create(t, true, &s, NULL) == ONYX_STATUS_OK) {
    for (size_t i = 0; i < n; ++i) {
      const char *chunk = NULL;
      size_t chunk_size = 0;
      if (onyx_tokenizer_stream_step(s, ids[i], &chunk, &chunk_size, &e) != ONYX_STATUS_OK) {
        onyx_error_free(e);
        break;
      }
    }
    onyx_tokenizer_stream_destroy(s);
  }
  onyx_tokenizer_free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = (const char *)data;
  const char *sep = size ? memchr(text, '\0', size) : NULL;
  size_t json_size = sep ? (size_t)(sep - text) : size;
  onyx_tokenizer *t = NULL;
  onyx_error *e = NULL;
  if (onyx_tokenizer_parse(text, json_size, sep ? sep + 1 : NULL, sep ? size - json_size - 1 : 0,
                           "fuzz.json", &t, &e) != ONYX_STATUS_OK) {
    if (e == NULL || onyx_error_message(e)[0] == '\0') abort(); /* every refusal says why */
    onyx_error_free(e);
    return 0;
  }
  static const char *samples[] = {"Hello world, the GNU GPL.", "  two  spaces\t\n\n\r\n",
                                  "h\xC3\xA9llo \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\xA4\x97 ab<s>",
                                  "1234567 don't", ""};
  for (size_t i = 0; i < sizeof samples / sizeof samples[0]; ++i)
    exercise(t, samples[i], strlen(samples[i]));
  exercise(t, text, json_size < 128 ? json_size : 128); /* refused when not UTF-8 */
  int64_t ids[80];
  for (int i = 0; i < 80; ++i) ids[i] = i < 64 ? i : (int64_t)1 << (i - 40);
  char *out = NULL;
  size_t out_size = 0;
  if (onyx_tokenizer_decode(t, ids, 80, false, &out, &out_size, &e) == ONYX_STATUS_OK)
    onyx_tokenizer_free(out);
  else
    onyx_error_free(e);
  onyx_tokenizer_destroy(t);
  return 0;
}
