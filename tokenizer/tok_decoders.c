/* Decoders: each rewrites the list of token strings (tokenizers' decode_chain), and
 * decode joins what the last one leaves. ByteLevel, Metaspace, ByteFallback, Fuse,
 * Strip, Replace and Sequence. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"

typedef enum kind { BYTE_LEVEL, METASPACE, BYTE_FALLBACK, FUSE, STRIP, REPLACE, SEQUENCE } kind;

struct onyx__tok_decoder {
  kind kind;
  uint32_t ch; /* Metaspace's replacement, Strip's content */
  int scheme;  /* Metaspace's prepend_scheme */
  uint64_t start, stop;
  onyx__tok_regex re; /* Replace */
  char *content;
  size_t content_len;
  onyx__tok_decoder **items;
  size_t count;
};

static const char supported[] =
    "ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace, Sequence";

void onyx__tok_decoder_free(onyx__tok_decoder *d) {
  if (d == NULL) return;
  for (size_t i = 0; i < d->count; ++i) onyx__tok_decoder_free(d->items[i]);
  free(d->items);
  onyx__tok_regex_free(&d->re);
  free(d->content);
  free(d);
}

static bool parse_sequence(onyx__tok_ctx *c, json_t *j, int depth, onyx__tok_decoder *d) {
  size_t mark;
  json_t *arr = onyx__tok_member(c, j, "decoders", true, &mark);
  bool ok = arr != NULL;
  if (arr && !json_is_array(arr))
    ok = onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "expected an array, got %s",
                       onyx__tok_json_kind(arr));
  size_t count = ok ? json_array_size(arr) : 0;
  if (ok && count && (d->items = calloc(count, sizeof *d->items)) == NULL)
    ok = onyx__tok_bad(c, ONYX_STATUS_OUT_OF_MEMORY, "out of memory");
  for (size_t i = 0; ok && i < count; ++i) {
    size_t m = onyx__tok_push(c, "[%zu]", i);
    ok = onyx__tok_decoder_parse(c, json_array_get(arr, i), depth + 1, &d->items[i]);
    d->count += ok;
    onyx__tok_pop(c, m);
  }
  onyx__tok_pop(c, mark);
  return ok;
}

static bool parse_kind(onyx__tok_ctx *c, json_t *j, int depth, const char *type,
                       onyx__tok_decoder *d) {
  const char *s = NULL;
  size_t len = 0;
  bool split;
  if (!strcmp(type, "ByteLevel")) return d->kind = BYTE_LEVEL, true;
  if (!strcmp(type, "ByteFallback")) return d->kind = BYTE_FALLBACK, true;
  if (!strcmp(type, "Fuse")) return d->kind = FUSE, true;
  if (!strcmp(type, "Metaspace")) {
    d->kind = METASPACE;
    return onyx__tok_metaspace_parse(c, j, &d->ch, &d->scheme, &split);
  }
  if (!strcmp(type, "Strip")) {
    d->kind = STRIP;
    return onyx__tok_get_char(c, j, "content", true, &d->ch) &&
           onyx__tok_get_uint(c, j, "start", true, UINT32_MAX, &d->start) &&
           onyx__tok_get_uint(c, j, "stop", true, UINT32_MAX, &d->stop);
  }
  if (!strcmp(type, "Replace")) {
    d->kind = REPLACE;
    return onyx__tok_regex_parse(c, j, "pattern", &d->re) &&
           onyx__tok_get_string(c, j, "content", true, &s, &len) &&
           (d->content = onyx__tok_dup(c, s, len)) != NULL && ((d->content_len = len), true);
  }
  if (!strcmp(type, "Sequence")) {
    d->kind = SEQUENCE;
    return parse_sequence(c, j, depth, d);
  }
  return onyx__tok_unsupported(c, "decoder", type, supported);
}

bool onyx__tok_decoder_parse(onyx__tok_ctx *c, json_t *j, int depth, onyx__tok_decoder **out) {
  *out = NULL;
  if (depth > ONYX__TOK_MAX_DEPTH)
    return onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "Sequence nested deeper than %d",
                         ONYX__TOK_MAX_DEPTH);
  const char *type = NULL;
  if (!onyx__tok_get_type(c, j, &type)) return false;
  onyx__tok_decoder *d = calloc(1, sizeof *d);
  if (d == NULL) return onyx__tok_bad(c, ONYX_STATUS_OUT_OF_MEMORY, "out of memory");
  if (!parse_kind(c, j, depth, type, d)) {
    onyx__tok_decoder_free(d);
    return false;
  }
  *out = d;
  return true;
}

/* ------------------------------------------------------------------ applying */

static onyx_status oom(onyx_error **out_error) {
  return onyx__tok_fail(out_error, ONYX_STATUS_OUT_OF_MEMORY, "out of memory while decoding");
}

/* All tokens' bytes (each token's characters mapped back through the byte-level
 * alphabet when all are in it, else its own bytes), made valid UTF-8. */
static bool byte_level(const onyx__tok_pieces *in, onyx__tok_buf *raw, onyx__tok_pieces *out) {
  const onyx__tok_bytemap *bm = onyx__tok_bytemap_get();
  raw->len = 0;
  for (size_t i = 0; i < in->count; ++i) {
    const char *s = onyx__tok_piece_text(in, i);
    size_t n = in->items[i].len, mark = raw->len;
    bool mapped = true;
    for (size_t k = 0; k < n && mapped;) {
      size_t len;
      uint32_t cp = onyx__tok_utf8_decode(s + k, &len);
      int b = cp < 0x144 ? bm->byte_of[cp] : -1;
      unsigned char byte = (unsigned char)b;
      if (b < 0 || !onyx__tok_buf_add(raw, &byte, 1)) mapped = false;
      k += len;
    }
    if (!mapped) {
      raw->len = mark;
      if (!onyx__tok_buf_add(raw, s, n)) return false;
    }
  }
  return onyx__tok_pieces_open(out, -1, false) &&
         onyx__tok_utf8_lossy(raw->data, raw->len, &out->text) &&
         ((out->items[0].len = out->text.len), true);
}

/* "<0xHH>" → the byte (Rust's u8::from_str_radix on the two characters, which also
 * takes "+H"). */
static int byte_token(const char *s, size_t n) {
  if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
  int v = 0, digits = 0;
  for (int i = 3; i < 5; ++i) {
    char ch = s[i];
    int d = ch >= '0' && ch <= '9'   ? ch - '0'
            : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
            : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                     : -1;
    if (d < 0 && !(i == 3 && ch == '+')) return -1;
    if (d >= 0) v = v * 16 + d, ++digits;
  }
  return digits ? v : -1;
}

static bool flush_bytes(onyx__tok_buf *bytes, onyx__tok_pieces *out) {
  if (bytes->len == 0) return true;
  bool ok = true;
  if (onyx__tok_utf8_check(bytes->data, bytes->len) == bytes->len)
    ok = onyx__tok_pieces_add(out, bytes->data, bytes->len, -1, false);
  else /* one U+FFFD per byte */
    for (size_t i = 0; ok && i < bytes->len; ++i)
      ok = onyx__tok_pieces_add(out, "\xEF\xBF\xBD", 3, -1, false);
  bytes->len = 0;
  return ok;
}

static bool byte_fallback(const onyx__tok_pieces *in, onyx__tok_buf *bytes, onyx__tok_pieces *out) {
  bytes->len = 0;
  for (size_t i = 0; i < in->count; ++i) {
    const char *s = onyx__tok_piece_text(in, i);
    size_t n = in->items[i].len;
    int b = byte_token(s, n);
    if (b >= 0) {
      unsigned char byte = (unsigned char)b;
      if (!onyx__tok_buf_add(bytes, &byte, 1)) return false;
      continue;
    }
    if (!flush_bytes(bytes, out) || !onyx__tok_pieces_add(out, s, n, -1, false)) return false;
  }
  return flush_bytes(bytes, out);
}

/* Metaspace: the replacement becomes a space, and vanishes from the first token
 * unless the scheme is never. */
static bool metaspace(const onyx__tok_decoder *d, const onyx__tok_pieces *in,
                      onyx__tok_pieces *out) {
  for (size_t i = 0; i < in->count; ++i) {
    const char *s = onyx__tok_piece_text(in, i);
    size_t n = in->items[i].len;
    if (!onyx__tok_pieces_open(out, -1, false)) return false;
    for (size_t k = 0; k < n;) {
      size_t len;
      uint32_t cp = onyx__tok_utf8_decode(s + k, &len);
      bool ok = cp != d->ch ? onyx__tok_buf_add(&out->text, s + k, len)
                : (i == 0 && d->scheme != ONYX__PREPEND_NEVER)
                    ? true
                    : onyx__tok_buf_add(&out->text, " ", 1);
      if (!ok) return false;
      k += len;
    }
    out->items[out->count - 1].len = out->text.len - out->items[out->count - 1].off;
  }
  return true;
}

static bool strip(const onyx__tok_decoder *d, const onyx__tok_pieces *in, onyx__tok_pieces *out) {
  for (size_t i = 0; i < in->count; ++i) {
    const char *s = onyx__tok_piece_text(in, i);
    size_t n = in->items[i].len, len, lo = 0, hi = n;
    for (uint64_t k = 0; k < d->start && lo < n; ++k) {
      if (onyx__tok_utf8_decode(s + lo, &len) != d->ch) break;
      lo += len;
    }
    for (uint64_t k = 0; k < d->stop && hi > 0; ++k) {
      size_t at = hi - 1;
      while (at > 0 && ((unsigned char)s[at] & 0xC0) == 0x80) --at;
      if (onyx__tok_utf8_decode(s + at, &len) != d->ch) break;
      hi = at;
    }
    /* tokenizers panics when the cuts cross; the token is then empty here. */
    if (!onyx__tok_pieces_add(out, s + lo, hi > lo ? hi - lo : 0, -1, false)) return false;
  }
  return true;
}

static onyx_status replace(const onyx__tok_decoder *d, onyx__tok_run *run,
                           const onyx__tok_pieces *in, onyx__tok_pieces *out,
                           onyx_error **out_error) {
  onyx__tok_spans spans = {0};
  onyx_status st = ONYX_STATUS_OK;
  for (size_t i = 0; st == ONYX_STATUS_OK && i < in->count; ++i) {
    const char *s = onyx__tok_piece_text(in, i);
    st = onyx__tok_regex_find(&d->re, run, s, in->items[i].len, &spans, out_error);
    if (st != ONYX_STATUS_OK) break;
    if (!onyx__tok_pieces_open(out, -1, false)) st = oom(out_error);
    for (size_t k = 0; st == ONYX_STATUS_OK && k < spans.count; ++k) {
      const onyx__tok_span *sp = &spans.items[k];
      bool ok = sp->match ? onyx__tok_buf_add(&out->text, d->content, d->content_len)
                          : onyx__tok_buf_add(&out->text, s + sp->start, sp->end - sp->start);
      if (!ok) st = oom(out_error);
    }
    if (st == ONYX_STATUS_OK)
      out->items[out->count - 1].len = out->text.len - out->items[out->count - 1].off;
  }
  free(spans.items);
  return st;
}

static onyx_status apply_one(const onyx__tok_decoder *d, onyx__tok_run *run,
                             const onyx__tok_pieces *in, onyx__tok_pieces *out,
                             onyx_error **out_error) {
  bool ok = true;
  switch (d->kind) {
  case BYTE_LEVEL:
    ok = byte_level(in, &run->tmp[1], out);
    break;
  case BYTE_FALLBACK:
    ok = byte_fallback(in, &run->tmp[1], out);
    break;
  case FUSE:
    ok = onyx__tok_pieces_add(out, in->text.data ? in->text.data : "", 0, -1, false);
    for (size_t i = 0; ok && i < in->count; ++i)
      ok = onyx__tok_buf_add(&out->text, onyx__tok_piece_text(in, i), in->items[i].len);
    if (ok) out->items[0].len = out->text.len;
    break;
  case METASPACE:
    ok = metaspace(d, in, out);
    break;
  case STRIP:
    ok = strip(d, in, out);
    break;
  case REPLACE:
    return replace(d, run, in, out, out_error);
  case SEQUENCE:
    break;
  }
  return ok ? ONYX_STATUS_OK : oom(out_error);
}

onyx_status onyx__tok_decoder_apply(const onyx__tok_decoder *d, onyx__tok_run *run,
                                    onyx__tok_pieces *io, onyx__tok_pieces *spare,
                                    onyx_error **out_error) {
  if (d->kind == SEQUENCE) {
    for (size_t i = 0; i < d->count; ++i) {
      onyx_status st = onyx__tok_decoder_apply(d->items[i], run, io, spare, out_error);
      if (st != ONYX_STATUS_OK) return st;
    }
    return ONYX_STATUS_OK;
  }
  onyx__tok_pieces_clear(spare);
  onyx_status st = apply_one(d, run, io, spare, out_error);
  if (st == ONYX_STATUS_OK) {
    onyx__tok_pieces t = *io;
    *io = *spare;
    *spare = t;
  }
  return st;
}
