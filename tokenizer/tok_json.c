/* Errors, and reading typed members of tokenizer.json with the JSON path at hand, so
 * that every refusal says where in the file it is. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"

onyx_status onyx__tok_fail(onyx_error **out_error, onyx_status status, const char *fmt, ...) {
  if (out_error == NULL) return status;
  char msg[ONYX__TOK_ERR_CAP];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return onyx_error_create(out_error, status, msg);
}

bool onyx__tok_bad(onyx__tok_ctx *c, onyx_status status, const char *fmt, ...) {
  if (c->status != ONYX_STATUS_OK) return false; /* the first error is the one to tell */
  char msg[ONYX__TOK_ERR_CAP];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  c->status = onyx__tok_fail(c->out_error, status, "%s: %s%s%s", c->origin,
                             c->path_len ? c->path : "", c->path_len ? ": " : "", msg);
  return false;
}

size_t onyx__tok_push(onyx__tok_ctx *c, const char *fmt, ...) {
  size_t mark = c->path_len;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(c->path + mark, sizeof c->path - mark, fmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  c->path_len = mark + (size_t)n < sizeof c->path ? mark + (size_t)n : sizeof c->path - 1;
  /* A top-level key has no leading dot. */
  if (mark == 0 && c->path[0] == '.') {
    memmove(c->path, c->path + 1, c->path_len);
    c->path_len--;
  }
  return mark;
}

void onyx__tok_pop(onyx__tok_ctx *c, size_t mark) {
  c->path_len = mark;
  c->path[mark] = '\0';
}

const char *onyx__tok_json_kind(const json_t *v) {
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
  default:
    return "null";
  }
}

json_t *onyx__tok_member(onyx__tok_ctx *c, json_t *obj, const char *key, bool required,
                         size_t *mark) {
  *mark = onyx__tok_push(c, ".%s", key);
  json_t *v = json_object_get(obj, key);
  if (v == NULL || json_is_null(v)) {
    if (required) onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "missing");
    return NULL;
  }
  return v;
}

static bool wrong(onyx__tok_ctx *c, const char *want, const json_t *v) {
  return onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "expected %s, got %s", want,
                       onyx__tok_json_kind(v));
}

bool onyx__tok_get_bool(onyx__tok_ctx *c, json_t *obj, const char *key, bool *out) {
  size_t mark;
  json_t *v = onyx__tok_member(c, obj, key, false, &mark);
  bool ok = true;
  if (v && !json_is_boolean(v))
    ok = wrong(c, "a boolean", v);
  else if (v)
    *out = json_is_true(v);
  onyx__tok_pop(c, mark);
  return ok;
}

bool onyx__tok_get_string(onyx__tok_ctx *c, json_t *obj, const char *key, bool required,
                          const char **out, size_t *out_len) {
  size_t mark;
  json_t *v = onyx__tok_member(c, obj, key, required, &mark);
  bool ok = v != NULL || !required;
  if (v && !json_is_string(v)) {
    ok = wrong(c, "a string", v);
  } else if (v) {
    *out = json_string_value(v);
    *out_len = json_string_length(v);
  }
  onyx__tok_pop(c, mark);
  return ok;
}

bool onyx__tok_get_uint(onyx__tok_ctx *c, json_t *obj, const char *key, bool required, uint64_t max,
                        uint64_t *out) {
  size_t mark;
  json_t *v = onyx__tok_member(c, obj, key, required, &mark);
  bool ok = v != NULL || !required;
  if (v && !json_is_integer(v)) {
    ok = wrong(c, "an integer", v);
  } else if (v) {
    json_int_t i = json_integer_value(v);
    if (i < 0 || (uint64_t)i > max)
      ok = onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "%lld is outside [0, %llu]", (long long)i,
                         (unsigned long long)max);
    else
      *out = (uint64_t)i;
  }
  onyx__tok_pop(c, mark);
  return ok;
}

bool onyx__tok_get_char(onyx__tok_ctx *c, json_t *obj, const char *key, bool required,
                        uint32_t *out_cp) {
  const char *s = NULL;
  size_t n = 0;
  if (!onyx__tok_get_string(c, obj, key, required, &s, &n)) return false;
  if (s == NULL) return true;
  size_t clen = n ? onyx__tok_utf8_len((unsigned char)s[0]) : 0;
  if (n == 0 || clen != n) {
    size_t mark = onyx__tok_push(c, ".%s", key);
    onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "expected one character, got '%.*s'", (int)n, s);
    onyx__tok_pop(c, mark);
    return false;
  }
  *out_cp = onyx__tok_utf8_decode(s, &clen);
  return true;
}

bool onyx__tok_get_type(onyx__tok_ctx *c, json_t *obj, const char **out) {
  if (!json_is_object(obj)) return wrong(c, "an object", obj);
  size_t n = 0;
  return onyx__tok_get_string(c, obj, "type", true, out, &n);
}

bool onyx__tok_unsupported(onyx__tok_ctx *c, const char *what, const char *type,
                           const char *supported) {
  size_t mark = onyx__tok_push(c, ".type");
  onyx__tok_bad(c, ONYX_STATUS_UNSUPPORTED, "%s '%s' is not supported (supported: %s)", what, type,
                supported);
  onyx__tok_pop(c, mark);
  return false;
}

char *onyx__tok_dup(onyx__tok_ctx *c, const char *s, size_t n) {
  char *d = malloc(n + 1);
  if (d == NULL) {
    onyx__tok_bad(c, ONYX_STATUS_OUT_OF_MEMORY, "out of memory (%zu bytes)", n + 1);
    return NULL;
  }
  if (n) memcpy(d, s, n);
  d[n] = '\0';
  return d;
}
