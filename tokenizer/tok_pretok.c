/* Pre-tokenizers: ByteLevel (GPT-2's regex and byte alphabet), Split, Metaspace,
 * Digits and Sequence. Each turns the list of pieces into a finer one; pieces that
 * are added tokens already pass through untouched. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"

typedef enum kind { BYTE_LEVEL, SPLIT, METASPACE, DIGITS, SEQUENCE } kind;
typedef enum prepend {
  PREPEND_ALWAYS = ONYX__PREPEND_ALWAYS,
  PREPEND_FIRST = ONYX__PREPEND_FIRST,
  PREPEND_NEVER = ONYX__PREPEND_NEVER
} prepend;

struct onyx__tok_pretok {
  kind kind;
  bool add_prefix_space, use_regex; /* ByteLevel */
  onyx__tok_regex re;               /* Split; ByteLevel's GPT-2 regex */
  onyx__tok_behavior behavior;
  bool invert;
  uint32_t replacement; /* Metaspace */
  char rep[4];
  size_t rep_len;
  prepend prepend;
  bool split;
  bool individual; /* Digits */
  onyx__tok_pretok **items;
  size_t count;
};

static const char supported[] = "ByteLevel, Split, Metaspace, Digits, Sequence";
/* GPT-2's pattern, as tokenizers' ByteLevel compiles it. */
static const char gpt2_regex[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

void onyx__tok_pretok_free(onyx__tok_pretok *p) {
  if (p == NULL) return;
  for (size_t i = 0; i < p->count; ++i) onyx__tok_pretok_free(p->items[i]);
  free(p->items);
  onyx__tok_regex_free(&p->re);
  free(p);
}

bool onyx__tok_pretok_byte_level(const onyx__tok_pretok *p) {
  if (p == NULL) return false;
  if (p->kind == BYTE_LEVEL) return true;
  for (size_t i = 0; i < p->count; ++i)
    if (onyx__tok_pretok_byte_level(p->items[i])) return true;
  return false;
}

static bool parse_sequence(onyx__tok_ctx *c, json_t *j, int depth, onyx__tok_pretok *p) {
  size_t mark;
  json_t *arr = onyx__tok_member(c, j, "pretokenizers", true, &mark);
  bool ok = arr != NULL;
  if (arr && !json_is_array(arr))
    ok = onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "expected an array, got %s",
                       onyx__tok_json_kind(arr));
  size_t count = ok ? json_array_size(arr) : 0;
  if (ok && count && (p->items = calloc(count, sizeof *p->items)) == NULL)
    ok = onyx__tok_bad(c, ONYX_STATUS_OUT_OF_MEMORY, "out of memory");
  for (size_t i = 0; ok && i < count; ++i) {
    size_t m = onyx__tok_push(c, "[%zu]", i);
    ok = onyx__tok_pretok_parse(c, json_array_get(arr, i), depth + 1, &p->items[i]);
    p->count += ok;
    onyx__tok_pop(c, m);
  }
  onyx__tok_pop(c, mark);
  return ok;
}

bool onyx__tok_metaspace_parse(onyx__tok_ctx *c, json_t *j, uint32_t *out_replacement,
                               int *out_scheme, bool *out_split) {
  const char *scheme = NULL;
  size_t n = 0;
  int add_prefix = -1;
  *out_scheme = ONYX__PREPEND_ALWAYS;
  *out_split = true;
  if (!onyx__tok_get_char(c, j, "replacement", true, out_replacement) ||
      !onyx__tok_get_bool(c, j, "split", out_split) ||
      !onyx__tok_get_string(c, j, "prepend_scheme", false, &scheme, &n))
    return false;
  json_t *legacy = json_object_get(j, "add_prefix_space");
  if (legacy && !json_is_null(legacy)) {
    bool v = true;
    if (!onyx__tok_get_bool(c, j, "add_prefix_space", &v)) return false;
    add_prefix = v;
  }
  if (scheme) {
    size_t mark = onyx__tok_push(c, ".prepend_scheme");
    bool ok = true;
    if (!strcmp(scheme, "always"))
      *out_scheme = ONYX__PREPEND_ALWAYS;
    else if (!strcmp(scheme, "first"))
      *out_scheme = ONYX__PREPEND_FIRST;
    else if (!strcmp(scheme, "never"))
      *out_scheme = ONYX__PREPEND_NEVER;
    else
      ok = onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "'%s' is not one of always, first, never",
                         scheme);
    onyx__tok_pop(c, mark);
    if (!ok) return false;
  }
  /* The older spelling: add_prefix_space false means never, and contradicts any
   * other declared (or defaulted) scheme, as tokenizers rules. */
  if (add_prefix == 0 && *out_scheme != ONYX__PREPEND_NEVER)
    return onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL,
                         "add_prefix_space false does not match prepend_scheme");
  return true;
}

static bool parse_metaspace(onyx__tok_ctx *c, json_t *j, onyx__tok_pretok *p) {
  int scheme = 0;
  if (!onyx__tok_metaspace_parse(c, j, &p->replacement, &scheme, &p->split)) return false;
  p->prepend = (prepend)scheme;
  p->rep_len = onyx__tok_utf8_encode(p->replacement, p->rep);
  return true;
}

static bool parse_kind(onyx__tok_ctx *c, json_t *j, int depth, const char *type,
                       onyx__tok_pretok *p) {
  if (!strcmp(type, "ByteLevel")) {
    p->kind = BYTE_LEVEL;
    p->add_prefix_space = p->use_regex = true;
    return onyx__tok_get_bool(c, j, "add_prefix_space", &p->add_prefix_space) &&
           onyx__tok_get_bool(c, j, "use_regex", &p->use_regex) &&
           (!p->use_regex ||
            onyx__tok_regex_compile(c, gpt2_regex, sizeof gpt2_regex - 1, false, &p->re));
  }
  if (!strcmp(type, "Split")) {
    p->kind = SPLIT;
    return onyx__tok_regex_parse(c, j, "pattern", &p->re) &&
           onyx__tok_behavior_parse(c, j, &p->behavior) &&
           onyx__tok_get_bool(c, j, "invert", &p->invert);
  }
  if (!strcmp(type, "Metaspace")) {
    p->kind = METASPACE;
    return parse_metaspace(c, j, p);
  }
  if (!strcmp(type, "Digits")) {
    p->kind = DIGITS;
    return onyx__tok_get_bool(c, j, "individual_digits", &p->individual);
  }
  if (!strcmp(type, "Sequence")) {
    p->kind = SEQUENCE;
    return parse_sequence(c, j, depth, p);
  }
  return onyx__tok_unsupported(c, "pre_tokenizer", type, supported);
}

bool onyx__tok_pretok_parse(onyx__tok_ctx *c, json_t *j, int depth, onyx__tok_pretok **out) {
  *out = NULL;
  if (depth > ONYX__TOK_MAX_DEPTH)
    return onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "Sequence nested deeper than %d",
                         ONYX__TOK_MAX_DEPTH);
  const char *type = NULL;
  if (!onyx__tok_get_type(c, j, &type)) return false;
  onyx__tok_pretok *p = calloc(1, sizeof *p);
  if (p == NULL) return onyx__tok_bad(c, ONYX_STATUS_OUT_OF_MEMORY, "out of memory");
  if (!parse_kind(c, j, depth, type, p)) {
    onyx__tok_pretok_free(p);
    return false;
  }
  *out = p;
  return true;
}

/* ------------------------------------------------------------------ applying */

static onyx_status oom(onyx_error **out_error) {
  return onyx__tok_fail(out_error, ONYX_STATUS_OUT_OF_MEMORY, "out of memory while pre-tokenizing");
}

/* Appends the kept, non-empty spans of src as pieces (mapped to the byte-level
 * alphabet when `bytes`). */
static bool emit(onyx__tok_pieces *out, const char *src, const onyx__tok_spans *spans, bool first,
                 bool bytes) {
  const onyx__tok_bytemap *bm = bytes ? onyx__tok_bytemap_get() : NULL;
  for (size_t i = 0; i < spans->count; ++i) {
    const onyx__tok_span *sp = &spans->items[i];
    if (sp->end == sp->start) continue; /* empty parts are dropped */
    bool f = first && sp->start == 0;
    if (!bytes) {
      if (!onyx__tok_pieces_add(out, src + sp->start, sp->end - sp->start, -1, f)) return false;
      continue;
    }
    if (!onyx__tok_pieces_open(out, -1, f) ||
        !onyx__tok_buf_reserve(&out->text, 2 * (sp->end - sp->start)))
      return false;
    char *w = out->text.data + out->text.len;
    for (size_t k = sp->start; k < sp->end; ++k) {
      unsigned char b = (unsigned char)src[k];
      w[0] = bm->utf8[b][0];
      w[1] = bm->utf8[b][1];
      w += bm->utf8_len[b];
    }
    size_t len = (size_t)(w - (out->text.data + out->text.len));
    out->text.len += len;
    out->text.data[out->text.len] = '\0';
    out->items[out->count - 1].len = len;
  }
  return true;
}

static bool is_char(uint32_t cp, const void *arg) { return cp == *(const uint32_t *)arg; }
static bool is_numeric(uint32_t cp, const void *arg) {
  (void)arg;
  return onyx__tok_is_numeric(cp);
}

static onyx_status byte_level(const onyx__tok_pretok *p, onyx__tok_run *run, const char *s,
                              size_t n, bool first, onyx__tok_spans *spans, onyx__tok_pieces *out,
                              onyx_error **out_error) {
  onyx__tok_buf *t = &run->tmp[0];
  t->len = 0;
  if (p->add_prefix_space && (n == 0 || s[0] != ' ')) {
    if (!onyx__tok_buf_add(t, " ", 1) || !onyx__tok_buf_add(t, s, n)) return oom(out_error);
    s = t->data;
    n = t->len;
  }
  if (p->use_regex) {
    onyx_status st = onyx__tok_regex_find(&p->re, run, s, n, spans, out_error);
    if (st != ONYX_STATUS_OK) return st;
  } else {
    spans->count = 0;
    if (!onyx__tok_spans_add(spans, 0, n, false)) return oom(out_error);
  }
  return emit(out, s, spans, first, true) ? ONYX_STATUS_OK : oom(out_error);
}

static onyx_status metaspace(const onyx__tok_pretok *p, onyx__tok_run *run, const char *s, size_t n,
                             bool first, onyx__tok_spans *spans, onyx__tok_pieces *out,
                             onyx_error **out_error) {
  onyx__tok_buf *t = &run->tmp[0];
  t->len = 0;
  bool starts = n >= p->rep_len && !memcmp(s, p->rep, p->rep_len);
  /* A space at the start becomes the replacement too, so test after replacing. */
  if (n && s[0] == ' ') starts = true;
  bool add = p->prepend == PREPEND_ALWAYS || (p->prepend == PREPEND_FIRST && first);
  if (add && !starts && n && !onyx__tok_buf_add(t, p->rep, p->rep_len)) return oom(out_error);
  for (size_t i = 0; i < n;) {
    const char *run_end = memchr(s + i, ' ', n - i);
    size_t stop = run_end ? (size_t)(run_end - s) : n;
    if (!onyx__tok_buf_add(t, s + i, stop - i)) return oom(out_error);
    if (run_end && !onyx__tok_buf_add(t, p->rep, p->rep_len)) return oom(out_error);
    i = run_end ? stop + 1 : n;
  }
  if (!p->split) {
    spans->count = 0;
    if (!onyx__tok_spans_add(spans, 0, t->len, false)) return oom(out_error);
  } else if (!onyx__tok_chars_find(t->data, t->len, is_char, &p->replacement, spans) ||
             !onyx__tok_spans_apply(spans, ONYX__SPLIT_MERGED_WITH_NEXT)) {
    return oom(out_error);
  }
  return emit(out, t->data, spans, first, false) ? ONYX_STATUS_OK : oom(out_error);
}

/* One piece through one (non-Sequence) pre-tokenizer. */
static onyx_status one_piece(const onyx__tok_pretok *p, onyx__tok_run *run, const char *s, size_t n,
                             bool first, onyx__tok_spans *spans, onyx__tok_pieces *out,
                             onyx_error **out_error) {
  onyx_status st = ONYX_STATUS_OK;
  switch (p->kind) {
  case BYTE_LEVEL:
    return byte_level(p, run, s, n, first, spans, out, out_error);
  case METASPACE:
    return metaspace(p, run, s, n, first, spans, out, out_error);
  case SPLIT:
    st = onyx__tok_regex_find(&p->re, run, s, n, spans, out_error);
    if (st != ONYX_STATUS_OK) return st;
    if (p->invert)
      for (size_t i = 0; i < spans->count; ++i) spans->items[i].match = !spans->items[i].match;
    onyx__tok_spans_apply(spans, p->behavior);
    break;
  case DIGITS:
    if (!onyx__tok_chars_find(s, n, is_numeric, NULL, spans)) return oom(out_error);
    onyx__tok_spans_apply(spans, p->individual ? ONYX__SPLIT_ISOLATED : ONYX__SPLIT_CONTIGUOUS);
    break;
  case SEQUENCE:
    break;
  }
  return emit(out, s, spans, first, false) ? ONYX_STATUS_OK : oom(out_error);
}

onyx_status onyx__tok_pretokenize(const onyx__tok_pretok *p, onyx__tok_run *run,
                                  onyx__tok_pieces *io, onyx__tok_pieces *spare,
                                  onyx_error **out_error) {
  if (p->kind == SEQUENCE) {
    for (size_t i = 0; i < p->count; ++i) {
      onyx_status st = onyx__tok_pretokenize(p->items[i], run, io, spare, out_error);
      if (st != ONYX_STATUS_OK) return st;
    }
    return ONYX_STATUS_OK;
  }
  onyx__tok_pieces_clear(spare);
  onyx__tok_spans spans = {0};
  onyx_status st = ONYX_STATUS_OK;
  for (size_t i = 0; st == ONYX_STATUS_OK && i < io->count; ++i) {
    const onyx__tok_piece *pc = &io->items[i];
    if (pc->id >= 0)
      st = onyx__tok_pieces_add(spare, "", 0, pc->id, pc->first) ? ONYX_STATUS_OK : oom(out_error);
    else
      st = one_piece(p, run, onyx__tok_piece_text(io, i), pc->len, pc->first, &spans, spare,
                     out_error);
  }
  free(spans.items);
  if (st == ONYX_STATUS_OK) {
    onyx__tok_pieces t = *io;
    *io = *spare;
    *spare = t;
  }
  return st;
}
