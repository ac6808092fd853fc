/*
 * The C side of the oracle tests (oracle_test.py): loads a tokenizer and answers a
 * file of cases, one JSON object per line, with one JSON object per line:
 *
 *   {"text": T}      → {"ids": encode(T), "plain": encode(T, no special tokens),
 *                        "decoded": decode(ids), "skipped": decode(ids, skip special)}
 *                      with "stream": true also "stream": [the text of each step over
 *                        ids, special tokens skipped]
 *   {"decode": [..]} → {"decoded": ..., "skipped": ...}
 *
 * or {"error": message} for a case the library refuses. One process answers every
 * case, so that thousands of strings cost one start (and run under the sanitizers).
 *
 *   tok_driver TOKENIZER (folder or tokenizer.json) CASES.jsonl OUT.jsonl
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onyx_tokenizer.h"

static json_t *error_of(onyx_error *e) {
  json_t *o = json_pack("{s:s}", "error", onyx_error_message(e));
  onyx_error_free(e);
  return o;
}

static json_t *ids_array(const int64_t *ids, size_t n) {
  json_t *a = json_array();
  for (size_t i = 0; i < n; ++i) json_array_append_new(a, json_integer(ids[i]));
  return a;
}

static json_t *decoded(onyx_tokenizer *t, const int64_t *ids, size_t n, bool skip, onyx_error **e) {
  char *text = NULL;
  size_t size = 0;
  if (onyx_tokenizer_decode(t, ids, n, skip, &text, &size, e) != ONYX_STATUS_OK) return NULL;
  json_t *s = json_stringn(text, size);
  onyx_tokenizer_free(text);
  return s;
}

static json_t *streamed(onyx_tokenizer *t, const int64_t *ids, size_t n, onyx_error **e) {
  onyx_tokenizer_stream *s = NULL;
  if (onyx_tokenizer_stream_create(t, true, &s, e) != ONYX_STATUS_OK) return NULL;
  json_t *a = json_array();
  for (size_t i = 0; i < n; ++i) {
    const char *text = NULL;
    size_t size = 0;
    if (onyx_tokenizer_stream_step(s, ids[i], &text, &size, e) != ONYX_STATUS_OK) {
      json_decref(a);
      a = NULL;
      break;
    }
    json_array_append_new(a, json_stringn(text, size));
  }
  onyx_tokenizer_stream_destroy(s);
  return a;
}

static json_t *decode_case(onyx_tokenizer *t, json_t *list) {
  size_t n = json_array_size(list);
  int64_t *ids = malloc((n ? n : 1) * sizeof *ids);
  for (size_t i = 0; i < n; ++i) ids[i] = json_integer_value(json_array_get(list, i));
  onyx_error *e = NULL;
  json_t *d = decoded(t, ids, n, false, &e), *k = d ? decoded(t, ids, n, true, &e) : NULL;
  free(ids);
  if (k == NULL) {
    json_decref(d);
    return error_of(e);
  }
  return json_pack("{s:o,s:o}", "decoded", d, "skipped", k);
}

static json_t *text_case(onyx_tokenizer *t, const char *text, size_t size, bool stream) {
  int64_t *ids = NULL, *plain = NULL;
  size_t n = 0, np = 0;
  onyx_error *e = NULL;
  if (onyx_tokenizer_encode(t, text, size, true, &ids, &n, &e) != ONYX_STATUS_OK)
    return error_of(e);
  if (onyx_tokenizer_encode(t, text, size, false, &plain, &np, &e) != ONYX_STATUS_OK) {
    onyx_tokenizer_free(ids);
    return error_of(e);
  }
  json_t *d = decoded(t, ids, n, false, &e), *k = d ? decoded(t, ids, n, true, &e) : NULL;
  json_t *s = k && stream ? streamed(t, ids, n, &e) : NULL;
  json_t *out = k && (s || !stream)
                    ? json_pack("{s:o,s:o,s:o,s:o}", "ids", ids_array(ids, n), "plain",
                                ids_array(plain, np), "decoded", d, "skipped", k)
                    : NULL;
  if (out && s) json_object_set_new(out, "stream", s);
  if (out == NULL) {
    json_decref(d);
    json_decref(k);
    out = error_of(e);
  }
  onyx_tokenizer_free(ids);
  onyx_tokenizer_free(plain);
  return out;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: tok_driver TOKENIZER CASES.jsonl OUT.jsonl\n");
    return 2;
  }
  onyx_tokenizer *t = NULL;
  onyx_error *e = NULL;
  if (onyx_tokenizer_load(argv[1], &t, &e) != ONYX_STATUS_OK) {
    fprintf(stderr, "tok_driver: %s\n", onyx_error_message(e));
    onyx_error_free(e);
    return 1;
  }
  FILE *in = fopen(argv[2], "r"), *out = fopen(argv[3], "w");
  if (in == NULL || out == NULL) {
    fprintf(stderr, "tok_driver: cannot open %s or %s\n", argv[2], argv[3]);
    if (in) fclose(in);
    if (out) fclose(out);
    onyx_tokenizer_destroy(t);
    return 1;
  }
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  int rc = 0;
  while ((len = getline(&line, &cap, in)) > 0) {
    json_error_t jerr;
    json_t *c = json_loadb(line, (size_t)len, JSON_ALLOW_NUL, &jerr);
    json_t *text = c ? json_object_get(c, "text") : NULL,
           *list = c ? json_object_get(c, "decode") : NULL;
    if (text == NULL && list == NULL) {
      fprintf(stderr, "tok_driver: bad case line: %.80s\n", line);
      json_decref(c);
      rc = 1;
      break;
    }
    json_t *r = text ? text_case(t, json_string_value(text), json_string_length(text),
                                 json_is_true(json_object_get(c, "stream")))
                     : decode_case(t, list);
    char *dump = json_dumps(r, JSON_COMPACT | JSON_ENSURE_ASCII);
    fprintf(out, "%s\n", dump);
    free(dump);
    json_decref(r);
    json_decref(c);
  }
  free(line);
  fclose(in);
  fclose(out);
  onyx_tokenizer_destroy(t);
  return rc;
}
