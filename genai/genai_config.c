/*
 * genai_config.json, as ONNX Runtime GenAI's model builder and mobius write it.
 *
 *   model:  type, vocab_size, context_length, bos_token_id, eos_token_id (an id or a
 *           list), pad_token_id,
 *           decoder: filename, head_size, hidden_size, num_attention_heads,
 *                    num_key_value_heads, num_hidden_layers,
 *                    inputs:  input_ids, attention_mask, position_ids,
 *                             past_key_names, past_value_names ("past_key_values.%d.key")
 *                    outputs: logits, present_key_names, present_value_names
 *   search: max_length, do_sample, temperature, top_k, top_p, repetition_penalty,
 *           past_present_share_buffer
 *
 * The JSON is read with jansson (Debian's libjansson): a maintained parser that
 * reports the line and column of malformed text and rejects duplicate keys, so no
 * hand-written parser faces untrusted files. Keys not listed are ignored: GenAI
 * knows many more (session options, provider options, beam search) that do not
 * change what Onyx computes. A listed key of the wrong type is an error naming it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "genai_impl.h"
#include "untrusted_file.h"

#define CONFIG_MAX_BYTES ((size_t)4 << 20)

static const struct {
  const char *section, *key, *path, *fallback;
  bool pattern;
} name_table[ONYX__NAME_COUNT_] = {
    [ONYX__NAME_INPUT_IDS] = {"inputs", "input_ids", "model.decoder.inputs.input_ids", "input_ids",
                              false},
    [ONYX__NAME_ATTENTION_MASK] = {"inputs", "attention_mask",
                                   "model.decoder.inputs.attention_mask", "attention_mask", false},
    [ONYX__NAME_POSITION_IDS] = {"inputs", "position_ids", "model.decoder.inputs.position_ids",
                                 "position_ids", false},
    [ONYX__NAME_PAST_KEY] = {"inputs", "past_key_names", "model.decoder.inputs.past_key_names",
                             "past_key_values.%d.key", true},
    [ONYX__NAME_PAST_VALUE] = {"inputs", "past_value_names",
                               "model.decoder.inputs.past_value_names", "past_key_values.%d.value",
                               true},
    [ONYX__NAME_LOGITS] = {"outputs", "logits", "model.decoder.outputs.logits", "logits", false},
    [ONYX__NAME_PRESENT_KEY] = {"outputs", "present_key_names",
                                "model.decoder.outputs.present_key_names", "present.%d.key", true},
    [ONYX__NAME_PRESENT_VALUE] = {"outputs", "present_value_names",
                                  "model.decoder.outputs.present_value_names", "present.%d.value",
                                  true},
};

const char *onyx__genai_name_key(onyx__genai_name name) {
  return name < ONYX__NAME_COUNT_ ? name_table[name].path : "?";
}

/* ------------------------------------------------------------ reading the file */

onyx_status onyx__genai_read_file(const char *path, size_t max_bytes, char **out_text,
                                  size_t *out_size, onyx_error **out_error) {
  /* The core's reader of untrusted files: opened without blocking (a FIFO in the
   * config's place must not hang the open), regular files only, size checked. */
  char why[ONYX__FILE_WHY_CAP];
  onyx_status st = onyx__file_read_all(path, NULL, max_bytes, ONYX_STATUS_INVALID_CONFIG, out_text,
                                       out_size, why, sizeof why);
  return st == ONYX_STATUS_OK ? st : onyx__genai_fail(out_error, st, "%s", why);
}

/* ------------------------------------------------------------ typed getters */

typedef struct reader {
  const char *origin;
  onyx_error **out_error;
  onyx_status status;
} reader;

static const char *type_name(const json_t *v) {
  switch (json_typeof(v)) {
  case JSON_OBJECT:
    return "an object";
  case JSON_ARRAY:
    return "an array";
  case JSON_STRING:
    return "a string";
  case JSON_INTEGER:
    return "an integer";
  case JSON_REAL:
    return "a number";
  case JSON_TRUE:
  case JSON_FALSE:
    return "a boolean";
  case JSON_NULL:
    return "null";
  }
  return "a value";
}

static bool bad(reader *r, onyx_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static bool bad(reader *r, onyx_status st, const char *fmt, ...) {
  if (r->status != ONYX_STATUS_OK) return false; /* keep the first error */
  char msg[ONYX__GENAI_ERR_CAP];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  r->status = onyx__genai_fail(r->out_error, st, "%s: %s", r->origin, msg);
  return false;
}

static bool wrong_type(reader *r, const char *key, const char *want, const json_t *v) {
  return bad(r, ONYX_STATUS_INVALID_CONFIG, "%s must be %s, got %s", key, want, type_name(v));
}

/* A section: absent (NULL, fine unless required) or an object. */
static json_t *get_object(reader *r, json_t *parent, const char *name, const char *key,
                          bool required) {
  json_t *v = parent ? json_object_get(parent, name) : NULL;
  if (v == NULL) {
    if (required && parent) bad(r, ONYX_STATUS_INVALID_CONFIG, "%s is missing", key);
    return NULL;
  }
  if (!json_is_object(v)) {
    wrong_type(r, key, "an object", v);
    return NULL;
  }
  return v;
}

/* An integer: a JSON integer, or a number with no fraction (GenAI reads numbers as
 * doubles, so 512.0 is what it would accept too). */
static bool as_int(reader *r, const json_t *v, const char *key, int64_t *out) {
  if (json_is_integer(v)) {
    *out = (int64_t)json_integer_value(v);
    return true;
  }
  if (json_is_real(v)) {
    double d = json_real_value(v);
    if (d == floor(d) && fabs(d) < 9.0e15) {
      *out = (int64_t)d;
      return true;
    }
    return bad(r, ONYX_STATUS_INVALID_CONFIG, "%s must be an integer, got %g", key, d);
  }
  return wrong_type(r, key, "an integer", v);
}

/* Reads obj[name] into *out when present; `min` is the smallest value allowed. */
static bool get_int(reader *r, json_t *obj, const char *name, const char *key, bool required,
                    int64_t min, int64_t *out) {
  json_t *v = obj ? json_object_get(obj, name) : NULL;
  if (v == NULL) return required ? bad(r, ONYX_STATUS_INVALID_CONFIG, "%s is missing", key) : true;
  int64_t x = 0;
  if (!as_int(r, v, key, &x)) return false;
  if (x < min)
    return bad(r, ONYX_STATUS_INVALID_CONFIG, "%s must be at least %lld, got %lld", key,
               (long long)min, (long long)x);
  *out = x;
  return true;
}

static bool get_float(reader *r, json_t *obj, const char *name, const char *key, float *out) {
  json_t *v = obj ? json_object_get(obj, name) : NULL;
  if (v == NULL) return true;
  if (!json_is_number(v)) return wrong_type(r, key, "a number", v);
  double d = json_number_value(v);
  if (!isfinite(d) || fabs(d) > 1e30)
    return bad(r, ONYX_STATUS_INVALID_CONFIG, "%s must be a finite number, got %g", key, d);
  *out = (float)d;
  return true;
}

static bool get_bool(reader *r, json_t *obj, const char *name, const char *key, bool *out) {
  json_t *v = obj ? json_object_get(obj, name) : NULL;
  if (v == NULL) return true;
  if (!json_is_boolean(v)) return wrong_type(r, key, "true or false", v);
  *out = json_is_true(v);
  return true;
}

static char *dup_text(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

/* A string (not empty, no NUL inside) copied into *out; `fallback` when absent. */
static bool get_string(reader *r, json_t *obj, const char *name, const char *key,
                       const char *fallback, char **out) {
  json_t *v = obj ? json_object_get(obj, name) : NULL;
  const char *s = fallback;
  if (v != NULL) {
    if (!json_is_string(v)) return wrong_type(r, key, "a string", v);
    s = json_string_value(v);
    if (json_string_length(v) != strlen(s) || *s == '\0')
      return bad(r, ONYX_STATUS_INVALID_CONFIG, "%s must be a non-empty string without NUL", key);
  }
  if (s == NULL) return bad(r, ONYX_STATUS_INVALID_CONFIG, "%s is missing", key);
  *out = dup_text(s);
  return *out ? true : bad(r, ONYX_STATUS_OUT_OF_MEMORY, "%s: out of memory", key);
}

/* ------------------------------------------------------------ checks of values */

/* A per-layer pattern holds exactly one %d and no other conversion. */
static bool check_pattern(reader *r, const char *key, const char *p) {
  int d = 0;
  for (const char *c = p; *c; ++c) {
    if (*c != '%') continue;
    if (c[1] == 'd') {
      ++d;
      ++c;
    } else {
      d = 99;
    }
  }
  if (d == 1) return true;
  return bad(r, ONYX_STATUS_INVALID_CONFIG,
             "%s '%s' must hold one %%d (the layer) and no other %% conversion", key, p);
}

/* The decoder file stays inside the model folder: relative, no "..". */
static bool check_filename(reader *r, const char *f) {
  bool up = false;
  for (const char *c = f; *c; ++c)
    if ((c == f || c[-1] == '/') && c[0] == '.' && c[1] == '.' && (c[2] == '/' || c[2] == '\0'))
      up = true;
  if (f[0] != '/' && !up) return true;
  return bad(r, ONYX_STATUS_INVALID_CONFIG,
             "model.decoder.filename '%s' must be a path inside the model folder", f);
}

static bool read_eos(reader *r, json_t *model, onyx_genai_model_desc *m) {
  json_t *v = json_object_get(model, "eos_token_id");
  const char *key = "model.eos_token_id";
  if (v == NULL) return true;
  if (!json_is_array(v)) {
    if (!json_is_number(v)) return wrong_type(r, key, "an integer or a list of integers", v);
    int64_t id = 0;
    if (!as_int(r, v, key, &id)) return false;
    if (id < 0)
      return bad(r, ONYX_STATUS_INVALID_CONFIG, "%s must be at least 0, got %lld", key,
                 (long long)id);
    m->eos_token_ids[0] = id;
    m->eos_count = 1;
    return true;
  }
  size_t n = json_array_size(v);
  if (n > ONYX_GENAI_MAX_EOS)
    return bad(r, ONYX_STATUS_INVALID_CONFIG, "%s lists %zu ids, at most %d are supported", key, n,
               ONYX_GENAI_MAX_EOS);
  for (size_t i = 0; i < n; ++i) {
    char item[48];
    snprintf(item, sizeof item, "%s[%zu]", key, i);
    int64_t id = 0;
    if (!as_int(r, json_array_get(v, i), item, &id)) return false;
    if (id < 0)
      return bad(r, ONYX_STATUS_INVALID_CONFIG, "%s must be at least 0, got %lld", item,
                 (long long)id);
    m->eos_token_ids[i] = id;
  }
  m->eos_count = (uint32_t)n;
  return true;
}

static void read_model(reader *r, json_t *model, onyx_genai_config *c) {
  onyx_genai_model_desc *m = &c->model;
  json_t *dec = get_object(r, model, "decoder", "model.decoder", true);
  get_string(r, model, "type", "model.type", "", &c->type);
  get_int(r, model, "vocab_size", "model.vocab_size", false, 1, &m->vocab_size);
  get_int(r, model, "context_length", "model.context_length", true, 1, &m->context_length);
  get_int(r, model, "bos_token_id", "model.bos_token_id", false, 0, &m->bos_token_id);
  get_int(r, model, "pad_token_id", "model.pad_token_id", false, 0, &m->pad_token_id);
  read_eos(r, model, m);
  if (dec == NULL) return;
  if (get_string(r, dec, "filename", "model.decoder.filename", NULL, &c->filename))
    check_filename(r, c->filename);
  get_int(r, dec, "num_hidden_layers", "model.decoder.num_hidden_layers", true, 1,
          &m->num_hidden_layers);
  get_int(r, dec, "num_key_value_heads", "model.decoder.num_key_value_heads", true, 1,
          &m->num_key_value_heads);
  get_int(r, dec, "head_size", "model.decoder.head_size", true, 1, &m->head_size);
  get_int(r, dec, "num_attention_heads", "model.decoder.num_attention_heads", false, 1,
          &m->num_attention_heads);
  get_int(r, dec, "hidden_size", "model.decoder.hidden_size", false, 1, &m->hidden_size);
  if (r->status == ONYX_STATUS_OK && m->num_attention_heads > 0 &&
      m->num_attention_heads % m->num_key_value_heads != 0)
    bad(r, ONYX_STATUS_INVALID_CONFIG,
        "model.decoder.num_attention_heads (%lld) must be a multiple of "
        "model.decoder.num_key_value_heads (%lld)",
        (long long)m->num_attention_heads, (long long)m->num_key_value_heads);
  json_t *sections[2] = {get_object(r, dec, "inputs", "model.decoder.inputs", false),
                         get_object(r, dec, "outputs", "model.decoder.outputs", false)};
  for (int n = 0; n < ONYX__NAME_COUNT_; ++n) {
    json_t *sec = sections[name_table[n].section[0] == 'o'];
    const char *key = onyx__genai_name_key((onyx__genai_name)n);
    if (get_string(r, sec, name_table[n].key, key, name_table[n].fallback, &c->names[n]) &&
        name_table[n].pattern)
      check_pattern(r, key, c->names[n]);
  }
}

static void read_search(reader *r, json_t *search, onyx_genai_config *c) {
  onyx_genai_search *s = &c->search;
  c->max_length_given = search && json_object_get(search, "max_length") != NULL;
  get_int(r, search, "max_length", "search.max_length", false, 1, &s->max_length);
  get_bool(r, search, "do_sample", "search.do_sample", &s->do_sample);
  get_float(r, search, "temperature", "search.temperature", &s->temperature);
  get_int(r, search, "top_k", "search.top_k", false, 0, &s->top_k);
  get_float(r, search, "top_p", "search.top_p", &s->top_p);
  get_float(r, search, "repetition_penalty", "search.repetition_penalty", &s->repetition_penalty);
  get_bool(r, search, "past_present_share_buffer", "search.past_present_share_buffer",
           &s->past_present_share_buffer);
  if (s->temperature < 0)
    bad(r, ONYX_STATUS_INVALID_CONFIG, "search.temperature must not be negative, got %g",
        (double)s->temperature);
  /* GenAI's own default top_p is 0, which it treats as off: so do we. */
  if (s->top_p == 0) s->top_p = 1;
  if (!(s->top_p > 0 && s->top_p <= 1))
    bad(r, ONYX_STATUS_INVALID_CONFIG, "search.top_p must be in (0, 1], got %g", (double)s->top_p);
  if (!(s->repetition_penalty > 0))
    bad(r, ONYX_STATUS_INVALID_CONFIG, "search.repetition_penalty must be positive, got %g",
        (double)s->repetition_penalty);
}

/* ------------------------------------------------------------ public */

void onyx_genai_config_destroy(onyx_genai_config *c) {
  if (c == NULL) return;
  free(c->origin);
  free(c->type);
  free(c->filename);
  for (int n = 0; n < ONYX__NAME_COUNT_; ++n) free(c->names[n]);
  free(c);
}

onyx_status onyx_genai_config_parse(const char *text, size_t size, const char *origin,
                                    onyx_genai_config **out, onyx_error **out_error) {
  if ((text == NULL && size > 0) || out == NULL)
    return onyx__genai_fail(out_error, ONYX_STATUS_INVALID_ARGUMENT,
                            "onyx_genai_config_parse: text and out_config are required");
  if (origin == NULL) origin = "genai_config.json";
  json_error_t jerr;
  json_t *root = json_loadb(text ? text : "", size, JSON_REJECT_DUPLICATES, &jerr);
  if (root == NULL)
    return onyx__genai_fail(out_error, ONYX_STATUS_INVALID_CONFIG,
                            "%s: malformed JSON at line %d, column %d: %s", origin, jerr.line,
                            jerr.column, jerr.text);
  onyx_genai_config *c = calloc(1, sizeof *c);
  if (c == NULL || (c->origin = dup_text(origin)) == NULL) {
    free(c);
    json_decref(root);
    return onyx__genai_fail(out_error, ONYX_STATUS_OUT_OF_MEMORY, "%s: out of memory", origin);
  }
  c->model = (onyx_genai_model_desc){
      .struct_size = sizeof c->model, .bos_token_id = -1, .pad_token_id = -1};
  c->search = (onyx_genai_search){.struct_size = sizeof c->search,
                                  .temperature = 1.0f,
                                  .top_p = 1.0f,
                                  .repetition_penalty = 1.0f};
  reader r = {.origin = origin, .out_error = out_error};
  if (!json_is_object(root)) {
    wrong_type(&r, "the top level", "an object", root);
  } else {
    json_t *model = get_object(&r, root, "model", "model", true);
    if (model) read_model(&r, model, c);
    json_t *search = get_object(&r, root, "search", "search", false);
    if (r.status == ONYX_STATUS_OK) read_search(&r, search, c);
  }
  json_decref(root);
  if (r.status != ONYX_STATUS_OK) {
    onyx_genai_config_destroy(c);
    return r.status;
  }
  if (!c->max_length_given || c->search.max_length > c->model.context_length)
    c->search.max_length = c->model.context_length; /* positions end there */
  c->model.type = c->type;
  c->model.filename = c->filename;
  *out = c;
  return ONYX_STATUS_OK;
}

onyx_status onyx_genai_config_load(const char *path, onyx_genai_config **out,
                                   onyx_error **out_error) {
  if (path == NULL || out == NULL)
    return onyx__genai_fail(out_error, ONYX_STATUS_INVALID_ARGUMENT,
                            "onyx_genai_config_load: path and out_config are required");
  char file[4096];
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
    snprintf(file, sizeof file, "%s/genai_config.json", path);
  else
    snprintf(file, sizeof file, "%s", path);
  char *text = NULL;
  size_t size = 0;
  onyx_error *inner = NULL;
  onyx_status status = onyx__genai_read_file(file, CONFIG_MAX_BYTES, &text, &size, &inner);
  if (status == ONYX_STATUS_NOT_FOUND) {
    onyx_error_free(inner);
    return onyx__genai_fail(out_error, status,
                            "%s: not found (a model folder, as ONNX Runtime GenAI's builder and "
                            "mobius write it, holds genai_config.json beside the model)",
                            file);
  }
  if (status != ONYX_STATUS_OK) {
    if (out_error)
      *out_error = inner;
    else
      onyx_error_free(inner);
    return status;
  }
  status = onyx_genai_config_parse(text, size, file, out, out_error);
  free(text);
  return status;
}

void onyx_genai_config_search(const onyx_genai_config *c, onyx_genai_search *out) {
  uint32_t size = out->struct_size;
  if (c == NULL || size < sizeof(uint32_t)) return;
  onyx_genai_search copy = c->search;
  memcpy(out, &copy, size < sizeof copy ? size : sizeof copy);
  out->struct_size = size;
}

void onyx_genai_config_model(const onyx_genai_config *c, onyx_genai_model_desc *out) {
  uint32_t size = out->struct_size;
  if (c == NULL || size < sizeof(uint32_t)) return;
  onyx_genai_model_desc copy = c->model;
  memcpy(out, &copy, size < sizeof copy ? size : sizeof copy);
  out->struct_size = size;
}
