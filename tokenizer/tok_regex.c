/*
 * Patterns of Split, Replace and ByteLevel: regexes written for Oniguruma (what
 * `tokenizers` compiles them with), run by PCRE2 with UTF and Unicode properties.
 *
 * The two dialects agree on what tokenizer files use (\p{..} classes, lookahead,
 * (?i:..), possessive and counted repeats) except for a few escapes, rewritten here
 * to Oniguruma's meaning before PCRE2 sees them: \s is White_Space (PCRE2 also takes
 * U+180E), \w is letters, marks, numbers and connector punctuation (PCRE2 leaves out
 * marks and most connectors), \h is a hex digit (PCRE2: horizontal space), \uHHHH is
 * a code point. Oniguruma's Ruby syntax also makes ^ and $ match at line breaks and
 * lets . match a newline, and its (?m) is PCRE2's (?s). Negated forms inside a
 * bracket (\S in [..]) and nested brackets have no PCRE2 spelling and are refused.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"

#define WS_CLASS                                                                                   \
  "\\t-\\r\\x{20}\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}"                     \
  "\\x{202f}\\x{205f}\\x{3000}"
#define WORD_CLASS "\\p{L}\\p{M}\\p{N}\\p{Pc}"
#define HEX_CLASS "0-9a-fA-F"

static bool hex4(const char *p, size_t left) {
  if (left < 4) return false;
  for (int i = 0; i < 4; ++i) {
    char ch = p[i];
    if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F')))
      return false;
  }
  return true;
}

/* One escape \c at p[0..1]: appends its PCRE2 spelling; returns bytes consumed, 0 for
 * one PCRE2 cannot say. */
static size_t translate_escape(const char *p, size_t left, bool in_class, onyx__tok_buf *o,
                               bool *ok) {
  char e = left > 1 ? p[1] : '\0';
  const char *cls = e == 's' || e == 'S'   ? WS_CLASS
                    : e == 'w' || e == 'W' ? WORD_CLASS
                    : e == 'h' || e == 'H' ? HEX_CLASS
                                           : NULL;
  bool negated = e == 'S' || e == 'W' || e == 'H';
  if (cls) {
    if (in_class && negated) return 0;
    *ok = in_class ? onyx__tok_buf_add(o, cls, strlen(cls))
                   : onyx__tok_buf_add(o, negated ? "[^" : "[", negated ? 2 : 1) &&
                         onyx__tok_buf_add(o, cls, strlen(cls)) && onyx__tok_buf_add(o, "]", 1);
    return 2;
  }
  if (e == 'u' && hex4(p + 2, left - 2)) {
    *ok = onyx__tok_buf_add(o, "\\x{", 3) && onyx__tok_buf_add(o, p + 2, 4) &&
          onyx__tok_buf_add(o, "}", 1);
    return 6;
  }
  size_t n = left > 1 ? 2 : 1;
  *ok = onyx__tok_buf_add(o, p, n);
  return n;
}

/* "(?imx-imx:" or "(?imx)": Oniguruma's m is dotall, PCRE2's s. */
static size_t translate_options(const char *p, size_t left, onyx__tok_buf *o, bool *ok) {
  size_t i = 2;
  while (i < left && (p[i] == 'i' || p[i] == 'm' || p[i] == 'x' || p[i] == '-')) ++i;
  if (i == 2 || i >= left || (p[i] != ':' && p[i] != ')')) {
    *ok = onyx__tok_buf_add(o, p, 2);
    return 2;
  }
  *ok = onyx__tok_buf_add(o, "(?", 2);
  for (size_t k = 2; *ok && k < i; ++k) *ok = onyx__tok_buf_add(o, p[k] == 'm' ? "s" : p + k, 1);
  return i;
}

/* The PCRE2 spelling of an Oniguruma pattern, or false with the reason. */
static bool translate(const char *p, size_t n, onyx__tok_buf *o, const char **why) {
  bool in_class = false, ok = true;
  size_t i = 0;
  while (i < n && ok) {
    char ch = p[i];
    if (ch == '\\') {
      size_t used = translate_escape(p + i, n - i, in_class, o, &ok);
      if (used == 0) {
        *why = "a negated escape (\\S, \\W, \\H) inside a bracket has no PCRE2 spelling";
        return false;
      }
      i += used;
    } else if (!in_class && ch == '(' && i + 1 < n && p[i + 1] == '?') {
      i += translate_options(p + i, n - i, o, &ok);
    } else if (!in_class && ch == '[') {
      in_class = true;
      size_t start = i++;
      if (i < n && p[i] == '^') ++i;
      if (i < n && p[i] == ']') ++i; /* a leading ] is a literal */
      ok = onyx__tok_buf_add(o, p + start, i - start);
    } else if (in_class && ch == '[') {
      if (i + 1 < n && p[i + 1] == ':') { /* [:alpha:] */
        const char *end = memchr(p + i + 2, ']', n - i - 2);
        if (end == NULL) {
          *why = "an unterminated POSIX class";
          return false;
        }
        size_t len = (size_t)(end - (p + i)) + 1;
        ok = onyx__tok_buf_add(o, p + i, len);
        i += len;
      } else {
        *why = "a bracket inside a bracket (Oniguruma's nested classes) has no PCRE2 spelling";
        return false;
      }
    } else if (in_class && ch == '&' && i + 1 < n && p[i + 1] == '&') {
      *why = "class intersection (&&) has no PCRE2 spelling";
      return false;
    } else {
      if (in_class && ch == ']') in_class = false;
      ok = onyx__tok_buf_add(o, p + i, 1);
      ++i;
    }
  }
  if (!ok) *why = "out of memory";
  return ok;
}

bool onyx__tok_regex_compile(onyx__tok_ctx *c, const char *pattern, size_t len, bool literal,
                             onyx__tok_regex *out) {
  *out = (onyx__tok_regex){0};
  if (literal && len > 0) {
    out->literal = onyx__tok_dup(c, pattern, len);
    out->literal_len = len;
    return out->literal != NULL;
  }
  onyx__tok_buf t = {0};
  const char *why = NULL;
  uint32_t flags = PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE | PCRE2_DOTALL | PCRE2_NEVER_BACKSLASH_C;
  if (literal) /* the empty literal: it matches between every two characters */
    flags = PCRE2_UTF | PCRE2_LITERAL;
  else if (!translate(pattern, len, &t, &why)) {
    onyx__tok_buf_free(&t);
    return onyx__tok_bad(c, ONYX_STATUS_UNSUPPORTED, "regex '%.*s': %s", (int)len, pattern, why);
  }
  int err = 0;
  PCRE2_SIZE at = 0;
  out->code = pcre2_compile((PCRE2_SPTR)(literal ? pattern : t.data), literal ? len : t.len, flags,
                            &err, &at, NULL);
  onyx__tok_buf_free(&t);
  if (out->code == NULL) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    return onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "regex '%.*s' does not compile: %s",
                         (int)len, pattern, (const char *)msg);
  }
  pcre2_jit_compile(out->code, PCRE2_JIT_COMPLETE); /* the interpreter runs it otherwise */
  return true;
}

bool onyx__tok_regex_parse(onyx__tok_ctx *c, json_t *obj, const char *key, onyx__tok_regex *out) {
  size_t mark;
  json_t *v = onyx__tok_member(c, obj, key, true, &mark);
  bool ok = false;
  if (v && !json_is_object(v)) {
    onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL,
                  "expected {\"String\": ...} or {\"Regex\": ...}, "
                  "got %s",
                  onyx__tok_json_kind(v));
  } else if (v) {
    json_t *s = json_object_get(v, "String"), *r = json_object_get(v, "Regex");
    json_t *p = s ? s : r;
    if (p == NULL || (s && r) || json_object_size(v) != 1)
      onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "expected one of String or Regex");
    else if (!json_is_string(p))
      onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "expected a string pattern, got %s",
                    onyx__tok_json_kind(p));
    else
      ok = onyx__tok_regex_compile(c, json_string_value(p), json_string_length(p), s != NULL, out);
  }
  onyx__tok_pop(c, mark);
  return ok;
}

void onyx__tok_regex_free(onyx__tok_regex *re) {
  pcre2_code_free(re->code);
  free(re->literal);
  *re = (onyx__tok_regex){0};
}

static bool literal_find(const onyx__tok_regex *re, const char *s, size_t n, onyx__tok_spans *out) {
  size_t prev = 0, at = 0;
  while (at + re->literal_len <= n) {
    const char *hit = memchr(s + at, re->literal[0], n - at - re->literal_len + 1);
    if (hit == NULL) break;
    if (memcmp(hit, re->literal, re->literal_len) != 0) {
      at = (size_t)(hit - s) + 1;
      continue;
    }
    size_t start = (size_t)(hit - s), end = start + re->literal_len;
    if (prev != start && !onyx__tok_spans_add(out, prev, start, false)) return false;
    if (!onyx__tok_spans_add(out, start, end, true)) return false;
    prev = at = end;
  }
  return prev == n || onyx__tok_spans_add(out, prev, n, false);
}

onyx_status onyx__tok_regex_find(const onyx__tok_regex *re, onyx__tok_run *run, const char *s,
                                 size_t n, onyx__tok_spans *out, onyx_error **out_error) {
  out->count = 0;
  if (n == 0)
    return onyx__tok_spans_add(out, 0, 0, false)
               ? ONYX_STATUS_OK
               : onyx__tok_fail(out_error, ONYX_STATUS_OUT_OF_MEMORY, "out of memory");
  if (re->code == NULL)
    return literal_find(re, s, n, out)
               ? ONYX_STATUS_OK
               : onyx__tok_fail(out_error, ONYX_STATUS_OUT_OF_MEMORY, "out of memory");
  size_t prev = 0, from = 0, last_match_end = SIZE_MAX;
  while (from <= n) {
    int rc =
        pcre2_match(re->code, (PCRE2_SPTR)s, n, from, PCRE2_NO_UTF_CHECK, run->match, run->mctx);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      return onyx__tok_fail(out_error, ONYX_STATUS_INVALID_ARGUMENT,
                            "a pre-tokenizer regex failed on the text (at byte %zu): %s", from,
                            (const char *)msg);
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(run->match);
    size_t start = ov[0], end = ov[1];
    if (start == end && end == last_match_end) {
      /* Oniguruma's find_iter: no empty match right after a match; step one char. */
      from += from < n ? onyx__tok_utf8_len((unsigned char)s[from]) : 1;
      continue;
    }
    from = last_match_end = end;
    if ((prev != start && !onyx__tok_spans_add(out, prev, start, false)) ||
        !onyx__tok_spans_add(out, start, end, true))
      return onyx__tok_fail(out_error, ONYX_STATUS_OUT_OF_MEMORY, "out of memory");
    prev = end;
  }
  if (prev != n && !onyx__tok_spans_add(out, prev, n, false))
    return onyx__tok_fail(out_error, ONYX_STATUS_OUT_OF_MEMORY, "out of memory");
  return ONYX_STATUS_OK;
}

bool onyx__tok_chars_find(const char *s, size_t n, bool (*test)(uint32_t cp, const void *arg),
                          const void *arg, onyx__tok_spans *out) {
  out->count = 0;
  if (n == 0) return onyx__tok_spans_add(out, 0, 0, false);
  size_t last = 0;
  for (size_t i = 0; i < n;) {
    size_t len;
    uint32_t cp = onyx__tok_utf8_decode(s + i, &len);
    if (test(cp, arg)) {
      if (last < i && !onyx__tok_spans_add(out, last, i, false)) return false;
      if (!onyx__tok_spans_add(out, i, i + len, true)) return false;
      last = i + len;
    }
    i += len;
  }
  return last >= n || onyx__tok_spans_add(out, last, n, false);
}

bool onyx__tok_behavior_parse(onyx__tok_ctx *c, json_t *obj, onyx__tok_behavior *out) {
  static const char *names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext",
                                "Contiguous"};
  const char *s = NULL;
  size_t n = 0;
  if (!onyx__tok_get_string(c, obj, "behavior", true, &s, &n)) return false;
  for (int i = 0; i < 5; ++i)
    if (!strcmp(s, names[i])) {
      *out = (onyx__tok_behavior)i;
      return true;
    }
  size_t mark = onyx__tok_push(c, ".behavior");
  onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL,
                "'%s' is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, "
                "Contiguous",
                s);
  onyx__tok_pop(c, mark);
  return false;
}

/* The folds of tokenizers' NormalizedString::split, in place. */
bool onyx__tok_spans_apply(onyx__tok_spans *s, onyx__tok_behavior behavior) {
  size_t n = s->count, w = 0;
  onyx__tok_span *it = s->items;
  bool prev = false;
  switch (behavior) {
  case ONYX__SPLIT_ISOLATED:
    return true;
  case ONYX__SPLIT_REMOVED:
    for (size_t i = 0; i < n; ++i)
      if (!it[i].match) it[w++] = it[i];
    break;
  case ONYX__SPLIT_CONTIGUOUS:
  case ONYX__SPLIT_MERGED_WITH_PREVIOUS:
    for (size_t i = 0; i < n; ++i) {
      onyx__tok_span sp = it[i];
      bool join = behavior == ONYX__SPLIT_CONTIGUOUS ? sp.match == prev : sp.match && !prev;
      if (join && w > 0)
        it[w - 1].end = sp.end;
      else
        it[w++] = sp;
      prev = sp.match;
    }
    break;
  case ONYX__SPLIT_MERGED_WITH_NEXT: {
    w = n;
    for (size_t i = n; i-- > 0;) {
      onyx__tok_span sp = it[i];
      if (sp.match && !prev && w < n)
        it[w].start = sp.start;
      else
        it[--w] = sp;
      prev = sp.match;
    }
    memmove(it, it + w, (n - w) * sizeof *it);
    w = n - w;
    break;
  }
  }
  s->count = w;
  return true;
}
