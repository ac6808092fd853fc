/* Growable buffers: bytes, ids, spans and pieces. Each grows geometrically and
 * refuses sizes that would overflow; a failed growth leaves the buffer as it was. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"

/* Grows *items (of `size`-byte elements, `*cap` of them) to hold `need`. */
static bool grow(void **items, size_t *cap, size_t need, size_t size) {
  if (need <= *cap) return true;
  size_t n = *cap ? *cap : 16;
  while (n < need) {
    if (n > SIZE_MAX / 2 / size) return false;
    n *= 2;
  }
  void *p = realloc(*items, n * size);
  if (p == NULL) return false;
  *items = p;
  *cap = n;
  return true;
}

bool onyx__tok_buf_reserve(onyx__tok_buf *b, size_t extra) {
  if (extra > SIZE_MAX - b->len - 1) return false;
  return grow((void **)&b->data, &b->cap, b->len + extra + 1, 1);
}

bool onyx__tok_buf_add(onyx__tok_buf *b, const void *p, size_t n) {
  if (!onyx__tok_buf_reserve(b, n)) return false;
  if (n) memcpy(b->data + b->len, p, n);
  b->len += n;
  b->data[b->len] = '\0';
  return true;
}

void onyx__tok_buf_free(onyx__tok_buf *b) {
  free(b->data);
  *b = (onyx__tok_buf){0};
}

bool onyx__tok_ids_add(onyx__tok_ids *ids, int64_t id) {
  if (!grow((void **)&ids->items, &ids->cap, ids->count + 1, sizeof *ids->items)) return false;
  ids->items[ids->count++] = id;
  return true;
}

bool onyx__tok_spans_add(onyx__tok_spans *s, size_t start, size_t end, bool match) {
  if (!grow((void **)&s->items, &s->cap, s->count + 1, sizeof *s->items)) return false;
  s->items[s->count++] = (onyx__tok_span){start, end, match};
  return true;
}

bool onyx__tok_pieces_open(onyx__tok_pieces *p, int64_t id, bool first) {
  if (!grow((void **)&p->items, &p->cap, p->count + 1, sizeof *p->items)) return false;
  if (p->text.data == NULL && !onyx__tok_buf_reserve(&p->text, 64)) return false;
  p->items[p->count++] = (onyx__tok_piece){.off = p->text.len, .len = 0, .id = id, .first = first};
  return true;
}

bool onyx__tok_pieces_add(onyx__tok_pieces *p, const char *s, size_t n, int64_t id, bool first) {
  if (!onyx__tok_pieces_open(p, id, first)) return false;
  if (!onyx__tok_buf_add(&p->text, s, n)) {
    p->count--;
    return false;
  }
  p->items[p->count - 1].len = n;
  return true;
}

void onyx__tok_pieces_clear(onyx__tok_pieces *p) {
  p->count = 0;
  p->text.len = 0;
  if (p->text.data) p->text.data[0] = '\0';
}

void onyx__tok_pieces_free(onyx__tok_pieces *p) {
  onyx__tok_buf_free(&p->text);
  free(p->items);
  *p = (onyx__tok_pieces){0};
}
