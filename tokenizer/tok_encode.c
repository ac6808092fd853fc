/*
 * Encoding, in the order of tokenizers' encode_single_sequence: added tokens with
 * normalized false are split out of the raw text; each remaining part is normalized
 * and split on the added tokens matched in normalized form; the pre-tokenizer cuts
 * the rest into pre-tokens; the BPE model turns each into ids; the post-processor's
 * template adds its ids (a BOS) around them.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"

static onyx_status oom(onyx_error **out_error) {
  return onyx__tok_fail(out_error, ONYX_STATUS_OUT_OF_MEMORY, "out of memory while encoding");
}

/* Normalizes each text piece of `in` into `out` (empty results are dropped). */
static onyx_status normalize_pieces(onyx_tokenizer *t, const onyx__tok_pieces *in,
                                    onyx__tok_pieces *out, onyx_error **out_error) {
  onyx__tok_pieces_clear(out);
  onyx__tok_buf *norm = &t->run.tmp[1];
  for (size_t i = 0; i < in->count; ++i) {
    const onyx__tok_piece *p = &in->items[i];
    bool ok;
    if (p->id >= 0) {
      ok = onyx__tok_pieces_add(out, "", 0, p->id, p->first);
    } else {
      onyx_status st = onyx__tok_normalize(t->normalizer, &t->run, onyx__tok_piece_text(in, i),
                                           p->len, norm, out_error);
      if (st != ONYX_STATUS_OK) return st;
      ok = norm->len == 0 || onyx__tok_pieces_add(out, norm->data, norm->len, -1, p->first);
    }
    if (!ok) return oom(out_error);
  }
  return ONYX_STATUS_OK;
}

static onyx_status pipeline(onyx_tokenizer *t, const char *text, size_t size, onyx__tok_ids *ids,
                            onyx_error **out_error) {
  onyx__tok_pieces *a = &t->work[0], *b = &t->work[1], *swap;
  onyx__tok_pieces_clear(a);
  if (size && !onyx__tok_pieces_add(a, text, size, -1, true)) return oom(out_error);
  if (t->added.raw.count) {
    if (!onyx__tok_added_split(&t->added, &t->added.raw, a, b)) return oom(out_error);
    swap = a, a = b, b = swap;
  }
  if (t->normalizer) {
    onyx_status st = normalize_pieces(t, a, b, out_error);
    if (st != ONYX_STATUS_OK) return st;
    swap = a, a = b, b = swap;
  }
  if (t->added.normalized.count) {
    if (!onyx__tok_added_split(&t->added, &t->added.normalized, a, b)) return oom(out_error);
    swap = a, a = b, b = swap;
  }
  if (t->pretok) {
    onyx_status st = onyx__tok_pretokenize(t->pretok, &t->run, a, b, out_error);
    if (st != ONYX_STATUS_OK) return st;
  }
  for (size_t i = 0; i < a->count; ++i) {
    const onyx__tok_piece *p = &a->items[i];
    if (p->id >= 0) {
      if (!onyx__tok_ids_add(ids, p->id)) return oom(out_error);
      continue;
    }
    onyx_status st =
        onyx__tok_bpe_encode(&t->bpe, onyx__tok_piece_text(a, i), p->len, ids, out_error);
    if (st != ONYX_STATUS_OK) return st;
  }
  return ONYX_STATUS_OK;
}

onyx_status onyx_tokenizer_encode(onyx_tokenizer *t, const char *text, size_t size,
                                  bool add_special_tokens, int64_t **out_ids, size_t *out_count,
                                  onyx_error **out_error) {
  if (t == NULL || out_ids == NULL || out_count == NULL || (text == NULL && size))
    return onyx__tok_fail(out_error, ONYX_STATUS_INVALID_ARGUMENT,
                          "onyx_tokenizer_encode: NULL tokenizer, text or output");
  if (size > ONYX_TOKENIZER_MAX_TEXT_BYTES)
    return onyx__tok_fail(out_error, ONYX_STATUS_INVALID_ARGUMENT,
                          "text of %zu bytes is over the limit of %u", size,
                          ONYX_TOKENIZER_MAX_TEXT_BYTES);
  size_t bad = onyx__tok_utf8_check(text, size);
  if (bad != size)
    return onyx__tok_fail(out_error, ONYX_STATUS_INVALID_ARGUMENT,
                          "the text is not valid UTF-8 at byte %zu (0x%02x)", bad,
                          (unsigned)(unsigned char)text[bad]);
  onyx__tok_ids ids = {0};
  const onyx__tok_template *tp = &t->post;
  bool ok = true;
  for (size_t i = 0; add_special_tokens && ok && i < tp->before.count; ++i)
    ok = onyx__tok_ids_add(&ids, tp->before.items[i]);
  onyx_status st = ok ? pipeline(t, text, size, &ids, out_error) : oom(out_error);
  for (size_t i = 0; st == ONYX_STATUS_OK && add_special_tokens && i < tp->after.count; ++i)
    if (!onyx__tok_ids_add(&ids, tp->after.items[i])) st = oom(out_error);
  if (st == ONYX_STATUS_OK && ids.items == NULL && (ids.items = malloc(sizeof *ids.items)) == NULL)
    st = oom(out_error);
  if (st != ONYX_STATUS_OK) {
    free(ids.items);
    return st;
  }
  *out_ids = ids.items;
  *out_count = ids.count;
  return ONYX_STATUS_OK;
}
