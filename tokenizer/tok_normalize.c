/* Normalizers: Unicode normal forms (utf8proc), Lowercase, Replace, Prepend and
 * Sequence. Each rewrites a whole piece of text; offsets are not tracked because
 * Onyx hands out ids and text, never alignments. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokenizer_impl.h"

typedef enum kind { NFC, NFD, NFKC, NFKD, LOWERCASE, REPLACE, PREPEND, SEQUENCE } kind;

struct onyx__tok_normalizer {
  kind kind;
  onyx__tok_regex re; /* Replace */
  char *content;      /* Replace's content, Prepend's prefix */
  size_t content_len;
  onyx__tok_normalizer **items; /* Sequence */
  size_t count;
};

static const char supported[] = "NFC, NFD, NFKC, NFKD, Lowercase, Replace, Prepend, Sequence";

void onyx__tok_normalizer_free(onyx__tok_normalizer *n) {
  if (n == NULL) return;
  for (size_t i = 0; i < n->count; ++i) onyx__tok_normalizer_free(n->items[i]);
  free(n->items);
  onyx__tok_regex_free(&n->re);
  free(n->content);
  free(n);
}

static bool parse_sequence(onyx__tok_ctx *c, json_t *j, int depth, onyx__tok_normalizer *n) {
  size_t mark;
  json_t *arr = onyx__tok_member(c, j, "normalizers", true, &mark);
  bool ok = arr != NULL;
  if (arr && !json_is_array(arr))
    ok = onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "expected an array, got %s",
                       onyx__tok_json_kind(arr));
  size_t count = ok ? json_array_size(arr) : 0;
  if (ok && count && (n->items = calloc(count, sizeof *n->items)) == NULL)
    ok = onyx__tok_bad(c, ONYX_STATUS_OUT_OF_MEMORY, "out of memory");
  for (size_t i = 0; ok && i < count; ++i) {
    size_t m = onyx__tok_push(c, "[%zu]", i);
    ok = onyx__tok_normalizer_parse(c, json_array_get(arr, i), depth + 1, &n->items[i]);
    n->count += ok;
    onyx__tok_pop(c, m);
  }
  onyx__tok_pop(c, mark);
  return ok;
}

static bool parse_kind(onyx__tok_ctx *c, json_t *j, int depth, const char *type,
                       onyx__tok_normalizer *n) {
  static const struct {
    const char *name;
    kind kind;
  } plain[] = {
      {"NFC", NFC}, {"NFD", NFD}, {"NFKC", NFKC}, {"NFKD", NFKD}, {"Lowercase", LOWERCASE}};
  for (size_t i = 0; i < sizeof plain / sizeof plain[0]; ++i)
    if (!strcmp(type, plain[i].name)) {
      n->kind = plain[i].kind;
      return true;
    }
  const char *s = NULL;
  size_t len = 0;
  if (!strcmp(type, "Sequence")) {
    n->kind = SEQUENCE;
    return parse_sequence(c, j, depth, n);
  }
  if (!strcmp(type, "Replace")) {
    n->kind = REPLACE;
    return onyx__tok_regex_parse(c, j, "pattern", &n->re) &&
           onyx__tok_get_string(c, j, "content", true, &s, &len) &&
           (n->content = onyx__tok_dup(c, s, len)) != NULL && ((n->content_len = len), true);
  }
  if (!strcmp(type, "Prepend")) {
    n->kind = PREPEND;
    return onyx__tok_get_string(c, j, "prepend", true, &s, &len) &&
           (n->content = onyx__tok_dup(c, s, len)) != NULL && ((n->content_len = len), true);
  }
  return onyx__tok_unsupported(c, "normalizer", type, supported);
}

bool onyx__tok_normalizer_parse(onyx__tok_ctx *c, json_t *j, int depth,
                                onyx__tok_normalizer **out) {
  *out = NULL;
  if (depth > ONYX__TOK_MAX_DEPTH)
    return onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "Sequence nested deeper than %d",
                         ONYX__TOK_MAX_DEPTH);
  const char *type = NULL;
  if (!onyx__tok_get_type(c, j, &type)) return false;
  onyx__tok_normalizer *n = calloc(1, sizeof *n);
  if (n == NULL) return onyx__tok_bad(c, ONYX_STATUS_OUT_OF_MEMORY, "out of memory");
  if (!parse_kind(c, j, depth, type, n)) {
    onyx__tok_normalizer_free(n);
    return false;
  }
  *out = n;
  return true;
}

/* ------------------------------------------------------------------ applying */

static onyx_status oom(onyx_error **out_error) {
  return onyx__tok_fail(out_error, ONYX_STATUS_OUT_OF_MEMORY, "out of memory while normalizing");
}

static bool all_ascii(const char *s, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if ((unsigned char)s[i] >= 0x80) return false;
  return true;
}

static onyx_status unicode_form(kind k, const char *s, size_t n, onyx__tok_buf *out,
                                onyx_error **out_error) {
  if (all_ascii(s, n)) /* every normal form leaves ASCII as it is */
    return onyx__tok_buf_add(out, s, n) ? ONYX_STATUS_OK : oom(out_error);
  utf8proc_option_t opt = UTF8PROC_STABLE;
  opt |= k == NFC || k == NFKC ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE;
  if (k == NFKC || k == NFKD) opt |= UTF8PROC_COMPAT;
  utf8proc_uint8_t *dst = NULL;
  utf8proc_ssize_t m = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &dst, opt);
  if (m < 0)
    return onyx__tok_fail(out_error,
                          m == UTF8PROC_ERROR_NOMEM ? ONYX_STATUS_OUT_OF_MEMORY
                                                    : ONYX_STATUS_INVALID_ARGUMENT,
                          "normalizing the text: %s", utf8proc_errmsg(m));
  bool ok = onyx__tok_buf_add(out, dst, (size_t)m);
  free(dst);
  return ok ? ONYX_STATUS_OK : oom(out_error);
}

/* Rust's char::to_lowercase: the simple mapping, and the one unconditional
 * multi-character mapping (U+0130 → i + U+0307). */
static onyx_status lowercase(const char *s, size_t n, onyx__tok_buf *out, onyx_error **out_error) {
  if (!onyx__tok_buf_reserve(out, n)) return oom(out_error);
  for (size_t i = 0; i < n;) {
    unsigned char b = (unsigned char)s[i];
    if (b < 0x80) {
      char ch = (char)(b >= 'A' && b <= 'Z' ? b + 32 : b);
      if (!onyx__tok_buf_add(out, &ch, 1)) return oom(out_error);
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp = onyx__tok_utf8_decode(s + i, &len);
    char enc[8];
    size_t m;
    if (cp == 0x130) {
      m = onyx__tok_utf8_encode('i', enc);
      m += onyx__tok_utf8_encode(0x307, enc + m);
    } else {
      m = onyx__tok_utf8_encode((uint32_t)utf8proc_tolower((utf8proc_int32_t)cp), enc);
    }
    if (!onyx__tok_buf_add(out, enc, m)) return oom(out_error);
    i += len;
  }
  return ONYX_STATUS_OK;
}

static onyx_status replace(const onyx__tok_normalizer *n, onyx__tok_run *run, const char *s,
                           size_t len, onyx__tok_buf *out, onyx_error **out_error) {
  onyx__tok_spans spans = {0};
  onyx_status st = onyx__tok_regex_find(&n->re, run, s, len, &spans, out_error);
  for (size_t i = 0; st == ONYX_STATUS_OK && i < spans.count; ++i) {
    const onyx__tok_span *sp = &spans.items[i];
    bool ok = sp->match ? onyx__tok_buf_add(out, n->content, n->content_len)
                        : onyx__tok_buf_add(out, s + sp->start, sp->end - sp->start);
    if (!ok) st = oom(out_error);
  }
  free(spans.items);
  return st;
}

/* Appends the normalized s to out. */
static onyx_status apply(const onyx__tok_normalizer *n, onyx__tok_run *run, const char *s,
                         size_t len, onyx__tok_buf *out, onyx_error **out_error) {
  switch (n->kind) {
  case NFC:
  case NFD:
  case NFKC:
  case NFKD:
    return unicode_form(n->kind, s, len, out, out_error);
  case LOWERCASE:
    return lowercase(s, len, out, out_error);
  case REPLACE:
    return replace(n, run, s, len, out, out_error);
  case PREPEND:
    if (len && !onyx__tok_buf_add(out, n->content, n->content_len)) return oom(out_error);
    return onyx__tok_buf_add(out, s, len) ? ONYX_STATUS_OK : oom(out_error);
  case SEQUENCE:
    break;
  }
  /* A Sequence: each item rewrites the previous one's result. */
  onyx__tok_buf a = {0}, b = {0};
  onyx_status st = onyx__tok_buf_add(&a, s, len) ? ONYX_STATUS_OK : oom(out_error);
  for (size_t i = 0; st == ONYX_STATUS_OK && i < n->count; ++i) {
    b.len = 0;
    st = apply(n->items[i], run, a.data, a.len, &b, out_error);
    onyx__tok_buf t = a;
    a = b;
    b = t;
  }
  if (st == ONYX_STATUS_OK && !onyx__tok_buf_add(out, a.data, a.len)) st = oom(out_error);
  onyx__tok_buf_free(&a);
  onyx__tok_buf_free(&b);
  return st;
}

onyx_status onyx__tok_normalize(const onyx__tok_normalizer *n, onyx__tok_run *run, const char *s,
                                size_t len, onyx__tok_buf *out, onyx_error **out_error) {
  out->len = 0;
  if (!onyx__tok_buf_reserve(out, len)) return oom(out_error);
  out->data[0] = '\0';
  return n ? apply(n, run, s, len, out, out_error)
           : (onyx__tok_buf_add(out, s, len) ? ONYX_STATUS_OK : oom(out_error));
}
