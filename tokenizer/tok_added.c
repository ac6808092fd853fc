/*
 * Added tokens (added_tokens): ids given as `tokenizers` gives them, and split out of
 * the text before the model sees it — those with normalized false on the raw text,
 * the others (by their normalized form) on the normalized text. Matching is
 * leftmost-longest over a byte trie (the MatchKind of tokenizers' daachorse
 * automaton), then single_word, lstrip and rstrip as its find_matches applies them.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"

void onyx__tok_added_free(onyx__tok_added *a) {
  for (size_t i = 0; i < a->count; ++i) {
    free(a->tokens[i].content);
    free(a->tokens[i].norm);
  }
  free(a->tokens);
  onyx__tok_strmap_free(&a->by_content);
  onyx__tok_strmap_free(&a->special);
  free(a->by_id);
  free(a->raw.nodes);
  free(a->normalized.nodes);
  *a = (onyx__tok_added){0};
}

const onyx__tok_added_token *onyx__tok_added_by_id(const onyx__tok_added *a, int64_t id) {
  if (id < 0 || (uint64_t)id >= a->by_id_cap || a->by_id[id] < 0) return NULL;
  return &a->tokens[a->by_id[id]];
}

/* ------------------------------------------------------------------ the trie */

static int32_t trie_node(onyx__tok_trie *t, uint8_t byte) {
  if (t->count == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 64;
    struct onyx__tok_trienode *n = realloc(t->nodes, cap * sizeof *n);
    if (n == NULL) return -1;
    t->nodes = n;
    t->cap = cap;
  }
  t->nodes[t->count] =
      (struct onyx__tok_trienode){.child = -1, .sibling = -1, .value = -1, .byte = byte};
  return (int32_t)t->count++;
}

static int32_t trie_child(const onyx__tok_trie *t, int32_t node, uint8_t byte) {
  for (int32_t c = t->nodes[node].child; c >= 0; c = t->nodes[c].sibling)
    if (t->nodes[c].byte == byte) return c;
  return -1;
}

static bool trie_insert(onyx__tok_trie *t, const char *s, size_t n, int32_t value) {
  if (t->count == 0 && trie_node(t, 0) < 0) return false;
  int32_t node = 0;
  for (size_t i = 0; i < n; ++i) {
    uint8_t byte = (uint8_t)s[i];
    int32_t c = trie_child(t, node, byte);
    if (c < 0) {
      if ((c = trie_node(t, byte)) < 0) return false;
      t->nodes[c].sibling = t->nodes[node].child;
      t->nodes[node].child = c;
    }
    node = c;
  }
  t->nodes[node].value = value; /* the same text twice: the later token */
  t->first[(uint8_t)s[0] >> 3] |= (uint8_t)(1u << ((uint8_t)s[0] & 7));
  if (n > t->longest) t->longest = n;
  return true;
}

/* The leftmost-longest match at or after `from`: its token index (-1: none). */
static int32_t trie_find(const onyx__tok_trie *t, const char *s, size_t n, size_t from,
                         size_t *out_start, size_t *out_end) {
  if (t->count == 0) return -1;
  for (size_t p = from; p < n; ++p) {
    uint8_t b0 = (uint8_t)s[p];
    if (!(t->first[b0 >> 3] & (1u << (b0 & 7)))) continue;
    int32_t node = 0, best = -1;
    size_t end = 0;
    for (size_t k = p; k < n; ++k) {
      node = trie_child(t, node, (uint8_t)s[k]);
      if (node < 0) break;
      if (t->nodes[node].value >= 0) best = t->nodes[node].value, end = k + 1;
    }
    if (best >= 0) {
      *out_start = p;
      *out_end = end;
      return best;
    }
  }
  return -1;
}

/* ------------------------------------------------------------------ loading */

static bool read_token(onyx__tok_ctx *c, json_t *e, onyx__tok_added_token *t, uint64_t *out_id) {
  const char *s = NULL;
  size_t n = 0;
  *t = (onyx__tok_added_token){.normalized = true};
  if (!json_is_object(e))
    return onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "expected an object, got %s",
                         onyx__tok_json_kind(e));
  if (!onyx__tok_get_uint(c, e, "id", true, ONYX_TOKENIZER_MAX_ID, out_id) ||
      !onyx__tok_get_string(c, e, "content", true, &s, &n) ||
      !onyx__tok_get_bool(c, e, "single_word", &t->single_word) ||
      !onyx__tok_get_bool(c, e, "lstrip", &t->lstrip) ||
      !onyx__tok_get_bool(c, e, "rstrip", &t->rstrip) ||
      !onyx__tok_get_bool(c, e, "normalized", &t->normalized) ||
      !onyx__tok_get_bool(c, e, "special", &t->special))
    return false;
  t->content = onyx__tok_dup(c, s, n);
  t->len = n;
  return t->content != NULL;
}

/* The id tokenizers' add_tokens gives: the content's id (an added token's, else the
 * model's), else the next free id, counted from the size of the model's vocabulary. */
static bool assign_id(onyx__tok_ctx *c, onyx__tok_added *a, const onyx__tok_bpe *bpe,
                      const onyx__tok_added_token *t, uint32_t *next, uint32_t *out_index,
                      bool *out_new) {
  uint32_t idx;
  if (onyx__tok_strmap_get(&a->by_content, t->content, t->len, &idx)) {
    *out_index = idx;
    *out_new = false;
    return true;
  }
  int64_t id = onyx__tok_bpe_id(bpe, t->content, t->len);
  if (id < 0) id = (*next)++;
  if (id > ONYX_TOKENIZER_MAX_ID)
    return onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "'%s' would get id %lld, beyond %d",
                         t->content, (long long)id, ONYX_TOKENIZER_MAX_ID);
  *out_index = (uint32_t)a->count;
  *out_new = true;
  a->tokens[a->count].id = (uint32_t)id;
  return true;
}

static bool normalize_content(onyx__tok_ctx *c, const onyx__tok_normalizer *norm,
                              onyx__tok_run *run, onyx__tok_added_token *t) {
  if (!t->normalized || norm == NULL) return true;
  onyx__tok_buf out = {0};
  onyx_error *e = NULL;
  if (onyx__tok_normalize(norm, run, t->content, t->len, &out, &e) != ONYX_STATUS_OK) {
    onyx__tok_bad(c, onyx_error_status(e), "normalizing '%s': %s", t->content,
                  onyx_error_message(e));
    onyx_error_free(e);
    onyx__tok_buf_free(&out);
    return false;
  }
  if (out.len == 0) {
    onyx__tok_buf_free(&out);
    return onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "'%s' normalizes to nothing", t->content);
  }
  if (out.len != t->len || memcmp(out.data, t->content, out.len) != 0) {
    t->norm = out.data;
    t->norm_len = out.len;
  } else {
    onyx__tok_buf_free(&out);
  }
  return true;
}

/* Adds one entry of added_tokens (a repeated content updates the earlier token). */
static bool add_one(onyx__tok_ctx *c, onyx__tok_added *a, const onyx__tok_bpe *bpe,
                    const onyx__tok_normalizer *norm, onyx__tok_run *run, json_t *e,
                    uint32_t *next) {
  onyx__tok_added_token t;
  uint64_t file_id = 0;
  if (!read_token(c, e, &t, &file_id)) {
    free(t.content);
    return false;
  }
  if (t.len == 0) { /* tokenizers ignores an empty content */
    free(t.content);
    return true;
  }
  uint32_t idx = 0;
  bool fresh = false;
  if (!assign_id(c, a, bpe, &t, next, &idx, &fresh) || !normalize_content(c, norm, run, &t)) {
    free(t.content);
    free(t.norm);
    return false;
  }
  onyx__tok_added_token *slot = &a->tokens[idx];
  if ((t.special && !onyx__tok_strmap_put(&a->special, t.content, t.len, 0, NULL)) ||
      (fresh && !onyx__tok_strmap_put(&a->by_content, t.content, t.len, idx, NULL))) {
    free(t.content);
    free(t.norm);
    return onyx__tok_bad(c, ONYX_STATUS_OUT_OF_MEMORY, "out of memory");
  }
  t.id = slot->id; /* assign_id put it there */
  if (fresh) {
    a->count++;
  } else { /* the later entry's flags win, as tokenizers' map insert does */
    free(slot->content);
    free(slot->norm);
  }
  *slot = t;
  return true;
}

static bool build_index(onyx__tok_ctx *c, onyx__tok_added *a) {
  uint32_t top = 0;
  for (size_t i = 0; i < a->count; ++i)
    if (a->tokens[i].id + 1 > top) top = a->tokens[i].id + 1;
  a->by_id_cap = top;
  a->by_id = malloc((top ? top : 1) * sizeof *a->by_id);
  if (a->by_id == NULL) return onyx__tok_bad(c, ONYX_STATUS_OUT_OF_MEMORY, "out of memory");
  for (size_t i = 0; i < top; ++i) a->by_id[i] = -1;
  for (size_t i = 0; i < a->count; ++i) {
    const onyx__tok_added_token *t = &a->tokens[i];
    a->by_id[t->id] = (int32_t)i;
    bool ok = t->normalized ? trie_insert(&a->normalized, t->norm ? t->norm : t->content,
                                          t->norm ? t->norm_len : t->len, (int32_t)i)
                            : trie_insert(&a->raw, t->content, t->len, (int32_t)i);
    if (!ok) return onyx__tok_bad(c, ONYX_STATUS_OUT_OF_MEMORY, "out of memory");
  }
  return true;
}

bool onyx__tok_added_parse(onyx__tok_ctx *c, json_t *arr, const onyx__tok_bpe *bpe,
                           const onyx__tok_normalizer *norm, onyx__tok_run *run,
                           onyx__tok_added *out) {
  *out = (onyx__tok_added){0};
  size_t n = arr ? json_array_size(arr) : 0;
  if (arr && !json_is_array(arr))
    return onyx__tok_bad(c, ONYX_STATUS_INVALID_MODEL, "expected an array, got %s",
                         onyx__tok_json_kind(arr));
  if (n && (out->tokens = calloc(n, sizeof *out->tokens)) == NULL)
    return onyx__tok_bad(c, ONYX_STATUS_OUT_OF_MEMORY, "out of memory");
  uint32_t next = (uint32_t)bpe->vocab.count;
  bool ok = true;
  for (size_t i = 0; ok && i < n; ++i) {
    size_t mark = onyx__tok_push(c, "[%zu]", i);
    ok = add_one(c, out, bpe, norm, run, json_array_get(arr, i), &next);
    onyx__tok_pop(c, mark);
  }
  ok = ok && build_index(c, out);
  if (!ok) onyx__tok_added_free(out);
  return ok;
}

/* ------------------------------------------------------------------ splitting */

static bool ends_with_word(const char *s, size_t n) {
  if (n == 0) return false;
  size_t i = n - 1, len;
  while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80) --i;
  return onyx__tok_is_word(onyx__tok_utf8_decode(s + i, &len));
}

static bool starts_with_word(const char *s, size_t n) {
  size_t len;
  return n > 0 && onyx__tok_is_word(onyx__tok_utf8_decode(s, &len));
}

/* Where the whitespace that ends s[0..n) begins. */
static size_t trailing_space_start(const char *s, size_t n) {
  size_t at = n;
  while (at > 0) {
    size_t i = at - 1, len;
    while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80) --i;
    if (!onyx__tok_is_whitespace(onyx__tok_utf8_decode(s + i, &len))) break;
    at = i;
  }
  return at;
}

/* How many bytes of whitespace s[0..n) starts with. */
static size_t leading_space(const char *s, size_t n) {
  size_t i = 0, len;
  while (i < n && onyx__tok_is_whitespace(onyx__tok_utf8_decode(s + i, &len))) i += len;
  return i;
}

static bool split_one(const onyx__tok_added *a, const onyx__tok_trie *trie, const char *s, size_t n,
                      bool first, onyx__tok_pieces *out) {
  size_t from = 0, start_offset = 0, ms, me;
  int32_t idx;
  while ((idx = trie_find(trie, s, n, from, &ms, &me)) >= 0) {
    from = me;
    const onyx__tok_added_token *t = &a->tokens[idx];
    if (t->single_word &&
        !((ms == 0 || !ends_with_word(s, ms)) && (me == n || !starts_with_word(s + me, n - me))))
      continue;
    size_t start = ms, stop = me;
    if (t->lstrip) {
      size_t ls = trailing_space_start(s, ms);
      start = ls > start_offset ? ls : start_offset;
    }
    if (t->rstrip) stop += leading_space(s + stop, n - stop);
    if (start_offset < start && !onyx__tok_pieces_add(out, s + start_offset, start - start_offset,
                                                      -1, first && start_offset == 0))
      return false;
    if (!onyx__tok_pieces_add(out, "", 0, t->id, false)) return false;
    start_offset = stop;
  }
  return start_offset == n || onyx__tok_pieces_add(out, s + start_offset, n - start_offset, -1,
                                                   first && start_offset == 0);
}

bool onyx__tok_added_split(const onyx__tok_added *a, const onyx__tok_trie *trie,
                           const onyx__tok_pieces *in, onyx__tok_pieces *out) {
  onyx__tok_pieces_clear(out);
  for (size_t i = 0; i < in->count; ++i) {
    const onyx__tok_piece *p = &in->items[i];
    bool ok = p->id >= 0 ? onyx__tok_pieces_add(out, "", 0, p->id, p->first)
              : p->len == 0
                  ? true /* an empty piece is dropped */
                  : split_one(a, trie, onyx__tok_piece_text(in, i), p->len, p->first, out);
    if (!ok) return false;
  }
  return true;
}
