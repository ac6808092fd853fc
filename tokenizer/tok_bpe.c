/*
 * The BPE model: a vocabulary, ranked merges, and the merge loop of `tokenizers`
 * (models/bpe/word.rs) — a word starts as one symbol per character (or per byte
 * token under byte_fallback, or an unknown token), and the lowest-ranked adjacent
 * pair is merged until none is left. The pairs wait in a binary heap ordered by
 * (rank, position), so a word of n symbols costs O(n log n), not the quadratic
 * rescan; entries made stale by a neighbouring merge are dropped when popped.
 * Words already seen come from a cache (a pre-token's ids depend on its text only).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"

/* tokenizers' cache: 10000 words shorter than 256 bytes. */
#define CACHE_WORDS 10000
#define CACHE_MAX_LEN 256
#define CHAR_TABLE 0x10000

void onyx__tok_bpe_free(onyx__tok_bpe *b) {
  onyx__tok_strmap_free(&b->vocab);
  free(b->tokens);
  onyx__tok_pairmap_free(&b->merges);
  free(b->unk_token);
  free(b->prefix);
  free(b->suffix);
  free(b->char_ids);
  onyx__tok_strmap_free(&b->cache);
  free(b->cache_ids.items);
  free(b->sym);
  free(b->heap);
  onyx__tok_buf_free(&b->key);
  *b = (onyx__tok_bpe){0};
}

int64_t onyx__tok_bpe_id(const onyx__tok_bpe *b, const char *s, size_t n) {
  uint32_t id;
  return onyx__tok_strmap_get(&b->vocab, s, n, &id) ? (int64_t)id : -1;
}

const char *onyx__tok_bpe_token(const onyx__tok_bpe *b, int64_t id, size_t *out_len) {
  if (id < 0 || (uint64_t)id >= b->tokens_cap || b->tokens[id].len == UINT32_MAX) return NULL;
  *out_len = b->tokens[id].len;
  return onyx__tok_strmap_key(&b->vocab, b->tokens[id].off);
}

/* ------------------------------------------------------------------ loading */

static bool optional_string(onyx__tok_ctx *c, json_t *m, const char *key, char **out,
                            size_t *out_len) {
  const char *s = NULL;
  size_t n = 0;
  if (!onyx__tok_get_string(c, m, key, false, &s, &n)) return false;
  if (s == NULL) return true;
  *out = onyx__tok_dup(c, s, n);
  if (out_len) *out_len = n;
  return *out != NULL;
}

static bool read_options(onyx__tok_ctx *c, json_t *m, onyx__tok_bpe *b) {
  size_t mark;
  json_t *d = onyx__tok_member(c, m, "dropout", false, &mark);
  bool ok = true;
  if (d && !json_is_number(d))
    ok = onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "expected a number, got %s",
                       onyx__tok_json_kind(d));
  else if (d && (json_number_value(d) < 0 || json_number_value(d) > 1))
    ok = onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "%g is outside [0, 1]", json_number_value(d));
  else if (d && json_number_value(d) > 0)
    ok = onyx__tok_bad(c, ONYX_STATUS_UNSUPPORTED,
                       "%g: BPE-dropout (random merges, for training) is not supported",
                       json_number_value(d));
  onyx__tok_pop(c, mark);
  return ok && optional_string(c, m, "unk_token", &b->unk_token, NULL) &&
         optional_string(c, m, "continuing_subword_prefix", &b->prefix, &b->prefix_len) &&
         optional_string(c, m, "end_of_word_suffix", &b->suffix, &b->suffix_len) &&
         onyx__tok_get_bool(c, m, "fuse_unk", &b->fuse_unk) &&
         onyx__tok_get_bool(c, m, "byte_fallback", &b->byte_fallback) &&
         onyx__tok_get_bool(c, m, "ignore_merges", &b->ignore_merges);
}

/* Pass 1: types, bounds and the highest id; pass 2: the map and the id table. */
static bool read_vocab(onyx__tok_ctx *c, json_t *m, onyx__tok_bpe *b) {
  size_t mark;
  json_t *v = onyx__tok_member(c, m, "vocab", true, &mark);
  bool ok = v != NULL;
  if (v && !json_is_object(v))
    ok = onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "expected an object, got %s",
                       onyx__tok_json_kind(v));
  const char *key;
  size_t klen;
  json_t *val;
  json_int_t top = -1;
  if (ok) {
    json_object_keylen_foreach(v, key, klen, val) {
      json_int_t id = json_is_integer(val) ? json_integer_value(val) : -1;
      if (!json_is_integer(val) || id < 0 || id > ONYX_TOKENIZER_MAX_ID) {
        ok = json_is_integer(val)
                 ? onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "'%.*s': id %lld is outside [0, %d]",
                                 (int)klen, key, (long long)id, ONYX_TOKENIZER_MAX_ID)
                 : onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "'%.*s': expected an id, got %s",
                                 (int)klen, key, onyx__tok_json_kind(val));
        break;
      }
      if (id > top) top = id;
    }
  }
  if (ok) {
    b->tokens_cap = (size_t)(top + 1);
    b->tokens = malloc((b->tokens_cap ? b->tokens_cap : 1) * sizeof *b->tokens);
    if (b->tokens == NULL) ok = onyx__tok_bad(c, ONYX_STATUS_OUT_OF_MEMORY, "out of memory");
  }
  for (size_t i = 0; ok && i < b->tokens_cap; ++i) b->tokens[i].len = UINT32_MAX;
  if (ok) {
    json_object_keylen_foreach(v, key, klen, val) {
      size_t id = (size_t)json_integer_value(val);
      if (b->tokens[id].len != UINT32_MAX) {
        ok = onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL,
                           "'%.*s' and '%s' both have id %zu (an id names one token)", (int)klen,
                           key, onyx__tok_strmap_key(&b->vocab, b->tokens[id].off), id);
        break;
      }
      uint32_t off = (uint32_t)b->vocab.keys.len;
      if (!onyx__tok_strmap_put(&b->vocab, key, klen, (uint32_t)id, NULL)) {
        ok = onyx__tok_bad(c, ONYX_STATUS_OUT_OF_MEMORY, "out of memory");
        break;
      }
      b->tokens[id] = (struct onyx__tok_idslot){off, (uint32_t)klen};
    }
  }
  onyx__tok_pop(c, mark);
  return ok;
}

/* One merge as two strings: "a b" (the older spelling) or ["a", "b"]. */
static bool merge_parts(onyx__tok_ctx *c, json_t *e, bool strings, const char **a, size_t *an,
                        const char **bs, size_t *bn) {
  if (strings) {
    if (!json_is_string(e))
      return onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL,
                           "expected a string as the first merge, "
                           "got %s",
                           onyx__tok_json_kind(e));
    const char *s = json_string_value(e);
    size_t n = json_string_length(e);
    const char *sp = memchr(s, ' ', n);
    if (sp == NULL || memchr(sp + 1, ' ', n - (size_t)(sp + 1 - s)) != NULL)
      return onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL,
                           "'%.*s' is not two tokens separated by one space", (int)n, s);
    *a = s, *an = (size_t)(sp - s), *bs = sp + 1, *bn = n - *an - 1;
    return true;
  }
  if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_string(json_array_get(e, 0)) ||
      !json_is_string(json_array_get(e, 1)))
    return onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL,
                         "expected a pair of strings like the first merge, got %s",
                         onyx__tok_json_kind(e));
  *a = json_string_value(json_array_get(e, 0)), *an = json_string_length(json_array_get(e, 0));
  *bs = json_string_value(json_array_get(e, 1)), *bn = json_string_length(json_array_get(e, 1));
  return true;
}

static bool read_merge(onyx__tok_ctx *c, onyx__tok_bpe *b, json_t *e, bool strings, uint32_t rank) {
  const char *a = NULL, *bs = NULL;
  size_t an = 0, bn = 0;
  if (!merge_parts(c, e, strings, &a, &an, &bs, &bn)) return false;
  uint32_t ia, ib, im;
  if (!onyx__tok_strmap_get(&b->vocab, a, an, &ia))
    return onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "'%.*s' is not in model.vocab", (int)an, a);
  if (!onyx__tok_strmap_get(&b->vocab, bs, bn, &ib))
    return onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "'%.*s' is not in model.vocab", (int)bn, bs);
  /* The merged token: a, then b without the continuing_subword_prefix. */
  if (bn < b->prefix_len)
    return onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL,
                         "'%.*s' is shorter than the continuing_subword_prefix", (int)bn, bs);
  b->key.len = 0;
  if (!onyx__tok_buf_add(&b->key, a, an) ||
      !onyx__tok_buf_add(&b->key, bs + b->prefix_len, bn - b->prefix_len))
    return onyx__tok_bad(c, ONYX_STATUS_OUT_OF_MEMORY, "out of memory");
  if (!onyx__tok_strmap_get(&b->vocab, b->key.data, b->key.len, &im))
    return onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "the merge '%.*s' is not in model.vocab",
                         (int)b->key.len, b->key.data);
  if (!onyx__tok_pairmap_put(&b->merges, ia, ib, rank, im))
    return onyx__tok_bad(c, ONYX_STATUS_OUT_OF_MEMORY, "out of memory");
  return true;
}

static bool read_merges(onyx__tok_ctx *c, json_t *m, onyx__tok_bpe *b) {
  size_t mark;
  json_t *arr = onyx__tok_member(c, m, "merges", true, &mark);
  bool ok = arr != NULL;
  if (arr && !json_is_array(arr))
    ok = onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "expected an array, got %s",
                       onyx__tok_json_kind(arr));
  size_t n = ok ? json_array_size(arr) : 0;
  bool strings = n && json_is_string(json_array_get(arr, 0));
  uint32_t rank = 0;
  for (size_t i = 0; ok && i < n; ++i) {
    json_t *e = json_array_get(arr, i);
    /* The older text format's header line, which tokenizers skips. */
    if (strings && json_is_string(e) && !strncmp(json_string_value(e), "#version", 8)) continue;
    size_t m2 = onyx__tok_push(c, "[%zu]", i);
    ok = read_merge(c, b, e, strings, rank++);
    onyx__tok_pop(c, m2);
  }
  onyx__tok_pop(c, mark);
  return ok;
}

/* The byte tokens and the one-character tokens, looked up once here. */
static bool build_tables(onyx__tok_ctx *c, onyx__tok_bpe *b) {
  for (int i = 0; i < 256; ++i) {
    char name[8];
    snprintf(name, sizeof name, "<0x%02X>", i);
    uint32_t id;
    b->byte_ids[i] = onyx__tok_strmap_get(&b->vocab, name, 6, &id) ? (int32_t)id : -1;
  }
  b->unk_id = -1;
  uint32_t id;
  if (b->unk_token && onyx__tok_strmap_get(&b->vocab, b->unk_token, strlen(b->unk_token), &id))
    b->unk_id = id;
  b->char_ids = malloc(CHAR_TABLE * sizeof *b->char_ids);
  if (b->char_ids == NULL) return onyx__tok_bad(c, ONYX_STATUS_OUT_OF_MEMORY, "out of memory");
  for (size_t i = 0; i < CHAR_TABLE; ++i) b->char_ids[i] = -1;
  for (size_t i = 0; i < b->tokens_cap; ++i) {
    size_t len = b->tokens[i].len;
    if (len == UINT32_MAX || len == 0 || len > 3) continue;
    const char *s = onyx__tok_strmap_key(&b->vocab, b->tokens[i].off);
    size_t clen;
    if (onyx__tok_utf8_check(s, len) != len || onyx__tok_utf8_len((unsigned char)s[0]) != len)
      continue;
    uint32_t cp = onyx__tok_utf8_decode(s, &clen);
    if (cp < CHAR_TABLE) b->char_ids[cp] = (int32_t)i;
  }
  return true;
}

bool onyx__tok_bpe_parse(onyx__tok_ctx *c, json_t *model, onyx__tok_bpe *out) {
  *out = (onyx__tok_bpe){.unk_id = -1};
  if (!json_is_object(model))
    return onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "expected an object, got %s",
                         onyx__tok_json_kind(model));
  json_t *type = json_object_get(model, "type");
  if (type && !json_is_string(type)) {
    size_t mark = onyx__tok_push(c, ".type");
    onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "expected a string, got %s",
                  onyx__tok_json_kind(type));
    onyx__tok_pop(c, mark);
    return false;
  }
  if (type ? strcmp(json_string_value(type), "BPE") != 0 : json_object_get(model, "merges") == NULL)
    return onyx__tok_unsupported(c, "model", type ? json_string_value(type) : "(no type)", "BPE");
  bool ok = read_options(c, model, out) && read_vocab(c, model, out) &&
            read_merges(c, model, out) && build_tables(c, out);
  if (!ok) onyx__tok_bpe_free(out);
  return ok;
}

/* ------------------------------------------------------------------ encoding */

static onyx_status oom(onyx_error **out_error) {
  return onyx__tok_fail(out_error, ONYX_STATUS_OUT_OF_MEMORY, "out of memory in the BPE model");
}

/* The id of one character as a symbol (with the prefix when not first, the suffix
 * when last), or -1; the symbol's text is left in b->key when it was built. */
static int64_t symbol_id(onyx__tok_bpe *b, const char *ch, size_t len, bool first, bool last,
                         bool *built) {
  bool pre = !first && b->prefix_len, suf = last && b->suffix_len;
  *built = false;
  if (!pre && !suf && len <= 3) {
    size_t clen;
    uint32_t cp = onyx__tok_utf8_decode(ch, &clen);
    return b->char_ids[cp];
  }
  b->key.len = 0;
  if ((pre && !onyx__tok_buf_add(&b->key, b->prefix, b->prefix_len)) ||
      !onyx__tok_buf_add(&b->key, ch, len) ||
      (suf && !onyx__tok_buf_add(&b->key, b->suffix, b->suffix_len)))
    return -2;
  *built = true;
  uint32_t id;
  return onyx__tok_strmap_get(&b->vocab, b->key.data, b->key.len, &id) ? (int64_t)id : -1;
}

static bool add_symbol(onyx__tok_bpe *b, size_t *count, uint32_t id, size_t len) {
  if (*count == b->sym_cap) {
    size_t cap = b->sym_cap ? b->sym_cap * 2 : 64;
    onyx__tok_symbol *s = realloc(b->sym, cap * sizeof *s);
    if (s == NULL) return false;
    b->sym = s;
    b->sym_cap = cap;
  }
  size_t i = (*count)++;
  b->sym[i] =
      (onyx__tok_symbol){.id = id, .prev = (int32_t)i - 1, .next = -1, .len = (uint32_t)len};
  if (i) b->sym[i - 1].next = (int32_t)i;
  return true;
}

/* Under byte_fallback: the byte tokens of a character (with its affixes), if the
 * vocabulary has every one. */
static int fallback_bytes(onyx__tok_bpe *b, const char *ch, size_t len, bool first, bool last,
                          bool built, size_t *count) {
  const char *s = ch;
  size_t n = len;
  if (!built && ((!first && b->prefix_len) || (last && b->suffix_len))) {
    symbol_id(b, ch, len, first, last, &built); /* builds the affixed text */
  }
  if (built) s = b->key.data, n = b->key.len;
  for (size_t k = 0; k < n; ++k)
    if (b->byte_ids[(unsigned char)s[k]] < 0) return 0;
  for (size_t k = 0; k < n; ++k)
    if (!add_symbol(b, count, (uint32_t)b->byte_ids[(unsigned char)s[k]], 1)) return -1;
  return 1;
}

/* tokenizers' merge_word up to the merges: one symbol per character. */
static onyx_status initial_symbols(onyx__tok_bpe *b, const char *s, size_t n, size_t *out_count,
                                   onyx_error **out_error) {
  size_t count = 0, unk_len = 0;
  bool unk = false; /* an unknown stretch waiting to become one symbol */
  for (size_t i = 0; i < n;) {
    size_t len = onyx__tok_utf8_len((unsigned char)s[i]);
    bool first = i == 0, last = i + len >= n, built;
    int64_t id = symbol_id(b, s + i, len, first, last, &built);
    if (id == -2) return oom(out_error);
    if (id >= 0) {
      if (unk && !add_symbol(b, &count, (uint32_t)b->unk_id, unk_len)) return oom(out_error);
      unk = false;
      if (!add_symbol(b, &count, (uint32_t)id, len)) return oom(out_error);
    } else {
      /* tokenizers leaves a waiting unknown symbol waiting across byte tokens. */
      int fb = b->byte_fallback ? fallback_bytes(b, s + i, len, first, last, built, &count) : 0;
      if (fb < 0) return oom(out_error);
      if (fb == 0 && b->unk_token) {
        if (b->unk_id < 0)
          return onyx__tok_fail(out_error, ONYX_STATUS_INVALID_MODEL,
                                "tokenizer.json: model.unk_token '%s' is not in model.vocab",
                                b->unk_token);
        if (unk && b->fuse_unk) {
          unk_len += len;
        } else {
          if (unk && !add_symbol(b, &count, (uint32_t)b->unk_id, unk_len)) return oom(out_error);
          unk = true;
          unk_len = len;
        }
      }
      /* Neither: the character is dropped, as tokenizers drops it. */
    }
    i += len;
  }
  if (unk && !add_symbol(b, &count, (uint32_t)b->unk_id, unk_len)) return oom(out_error);
  *out_count = count;
  return ONYX_STATUS_OK;
}

static inline bool merge_before(const onyx__tok_merge *x, const onyx__tok_merge *y) {
  return x->rank != y->rank ? x->rank < y->rank : x->pos < y->pos;
}

static void heap_push(onyx__tok_merge *h, size_t *n, onyx__tok_merge m) {
  size_t i = (*n)++;
  while (i > 0) {
    size_t up = (i - 1) / 2;
    if (!merge_before(&m, &h[up])) break;
    h[i] = h[up];
    i = up;
  }
  h[i] = m;
}

static onyx__tok_merge heap_pop(onyx__tok_merge *h, size_t *n) {
  onyx__tok_merge top = h[0], last = h[--*n];
  size_t i = 0, count = *n;
  for (;;) {
    size_t l = 2 * i + 1, best = l;
    if (l >= count) break;
    if (l + 1 < count && merge_before(&h[l + 1], &h[l])) best = l + 1;
    if (!merge_before(&h[best], &last)) break;
    h[i] = h[best];
    i = best;
  }
  if (count) h[i] = last;
  return top;
}

static void push_pair(onyx__tok_bpe *b, size_t *hn, size_t left) {
  const onyx__tok_symbol *s = b->sym;
  const struct onyx__tok_pairslot *m =
      onyx__tok_pairmap_get(&b->merges, s[left].id, s[s[left].next].id);
  if (m) heap_push(b->heap, hn, (onyx__tok_merge){m->rank, (uint32_t)left, m->merged});
}

/* tokenizers' Word::merge_all, without dropout. */
static bool merge_all(onyx__tok_bpe *b, size_t count) {
  if (count < 2) return true;
  size_t need = 3 * count; /* the initial pairs plus at most two per merge */
  if (need > b->heap_cap) {
    onyx__tok_merge *h = realloc(b->heap, need * sizeof *h);
    if (h == NULL) return false;
    b->heap = h;
    b->heap_cap = need;
  }
  onyx__tok_symbol *s = b->sym;
  size_t hn = 0;
  for (size_t i = 0; i + 1 < count; ++i) push_pair(b, &hn, i);
  while (hn) {
    onyx__tok_merge top = heap_pop(b->heap, &hn);
    onyx__tok_symbol *cur = &s[top.pos];
    if (cur->len == 0 || cur->next < 0) continue;
    onyx__tok_symbol right = s[cur->next];
    const struct onyx__tok_pairslot *m = onyx__tok_pairmap_get(&b->merges, cur->id, right.id);
    if (m == NULL || m->merged != top.merged) continue; /* stale */
    s[cur->next].len = 0;
    cur->id = top.merged;
    cur->len += right.len;
    cur->next = right.next;
    if (right.next >= 0) s[right.next].prev = (int32_t)top.pos;
    if (cur->prev >= 0) push_pair(b, &hn, (size_t)cur->prev);
    if (cur->next >= 0) push_pair(b, &hn, top.pos);
  }
  return true;
}

onyx_status onyx__tok_bpe_encode(onyx__tok_bpe *b, const char *s, size_t n, onyx__tok_ids *out,
                                 onyx_error **out_error) {
  if (n == 0) return ONYX_STATUS_OK;
  uint32_t v;
  if (b->ignore_merges && onyx__tok_strmap_get(&b->vocab, s, n, &v))
    return onyx__tok_ids_add(out, v) ? ONYX_STATUS_OK : oom(out_error);
  if (onyx__tok_strmap_get(&b->cache, s, n, &v)) {
    /* A cached word: its ids start at v in cache_ids, ended by -1. */
    for (const int64_t *p = b->cache_ids.items + v; *p >= 0; ++p)
      if (!onyx__tok_ids_add(out, *p)) return oom(out_error);
    return ONYX_STATUS_OK;
  }
  size_t count = 0;
  onyx_status st = initial_symbols(b, s, n, &count, out_error);
  if (st != ONYX_STATUS_OK) return st;
  if (!merge_all(b, count)) return oom(out_error);
  size_t start = out->count;
  for (size_t i = 0; i < count; ++i)
    if (b->sym[i].len && !onyx__tok_ids_add(out, b->sym[i].id)) return oom(out_error);
  if (n < CACHE_MAX_LEN && b->cache.count < CACHE_WORDS && b->cache_ids.count < UINT32_MAX / 2) {
    size_t at = b->cache_ids.count;
    bool ok = true;
    for (size_t i = start; ok && i < out->count; ++i)
      ok = onyx__tok_ids_add(&b->cache_ids, out->items[i]);
    ok = ok && onyx__tok_ids_add(&b->cache_ids, -1) &&
         onyx__tok_strmap_put(&b->cache, s, n, (uint32_t)at, NULL);
    if (!ok) b->cache_ids.count = at; /* the cache is an optimization: skip it */
  }
  return ONYX_STATUS_OK;
}
