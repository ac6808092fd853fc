/*
 * Decoding: ids → token strings (an added token's text, in its normalized form when
 * the normalizer changes it, else the model's token), special ones skipped when asked,
 * then the decoder chain and the join. Streaming follows tokenizers' DecodeStream:
 * decode a short window of ids before and after the new one and hand out what grew,
 * holding back text that ends in U+FFFD (a UTF-8 sequence still incomplete).
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"

static onyx_status oom(onyx_error **out_error) {
  return onyx__tok_fail(out_error, ONYX_STATUS_OUT_OF_MEMORY, "out of memory while decoding");
}

onyx_status onyx__tok_id_strings(onyx_tokenizer *t, const int64_t *ids, size_t count,
                                 bool skip_special, onyx__tok_pieces *out, onyx_error **out_error) {
  onyx__tok_pieces_clear(out);
  for (size_t i = 0; i < count; ++i) {
    const onyx__tok_added_token *a = onyx__tok_added_by_id(&t->added, ids[i]);
    size_t len = 0;
    const char *s =
        a ? (a->norm ? a->norm : a->content) : onyx__tok_bpe_token(&t->bpe, ids[i], &len);
    if (a) len = a->norm ? a->norm_len : a->len;
    if (s == NULL) continue; /* an id with no token: skipped, as tokenizers does */
    uint32_t unused;
    if (skip_special && onyx__tok_strmap_get(&t->added.special, s, len, &unused)) continue;
    if (!onyx__tok_pieces_add(out, s, len, -1, false)) return oom(out_error);
  }
  return ONYX_STATUS_OK;
}

/* Decodes into *text (replaced). */
static onyx_status decode_into(onyx_tokenizer *t, const int64_t *ids, size_t count,
                               bool skip_special, onyx__tok_buf *text, onyx_error **out_error) {
  onyx__tok_pieces *a = &t->work[0], *b = &t->work[1];
  onyx_status st = onyx__tok_id_strings(t, ids, count, skip_special, a, out_error);
  if (st == ONYX_STATUS_OK && t->decoder)
    st = onyx__tok_decoder_apply(t->decoder, &t->run, a, b, out_error);
  if (st != ONYX_STATUS_OK) return st;
  text->len = 0;
  if (!onyx__tok_buf_reserve(text, a->text.len + a->count)) return oom(out_error);
  text->data[0] = '\0';
  for (size_t i = 0; i < a->count; ++i) {
    /* Without a decoder tokens are joined by spaces (tokenizers' default). */
    if ((i && !t->decoder && !onyx__tok_buf_add(text, " ", 1)) ||
        !onyx__tok_buf_add(text, onyx__tok_piece_text(a, i), a->items[i].len))
      return oom(out_error);
  }
  return ONYX_STATUS_OK;
}

onyx_status onyx_tokenizer_decode(onyx_tokenizer *t, const int64_t *ids, size_t count,
                                  bool skip_special_tokens, char **out_text, size_t *out_size,
                                  onyx_error **out_error) {
  if (t == NULL || out_text == NULL || out_size == NULL || (ids == NULL && count))
    return onyx__tok_fail(out_error, ONYX_STATUS_INVALID_ARGUMENT,
                          "onyx_tokenizer_decode: NULL tokenizer, ids or output");
  onyx__tok_buf text = {0};
  onyx_status st = decode_into(t, ids, count, skip_special_tokens, &text, out_error);
  if (st != ONYX_STATUS_OK) {
    onyx__tok_buf_free(&text);
    return st;
  }
  *out_text = text.data;
  *out_size = text.len;
  return ONYX_STATUS_OK;
}

/* ------------------------------------------------------------------ streaming */

struct onyx_tokenizer_stream {
  onyx_tokenizer *t;
  bool skip;
  onyx__tok_ids ids;    /* the window: ids from prefix_index back */
  onyx__tok_buf prefix; /* the window's text up to prefix_index */
  size_t prefix_index;
  onyx__tok_buf text, out;
};

onyx_status onyx_tokenizer_stream_create(onyx_tokenizer *t, bool skip_special_tokens,
                                         onyx_tokenizer_stream **out_stream,
                                         onyx_error **out_error) {
  if (t == NULL || out_stream == NULL)
    return onyx__tok_fail(out_error, ONYX_STATUS_INVALID_ARGUMENT,
                          "onyx_tokenizer_stream_create: NULL tokenizer or out_stream");
  onyx_tokenizer_stream *s = calloc(1, sizeof *s);
  if (s == NULL || !onyx__tok_buf_reserve(&s->prefix, 16) || !onyx__tok_buf_reserve(&s->out, 16)) {
    onyx_tokenizer_stream_destroy(s);
    return oom(out_error);
  }
  s->t = t;
  s->skip = skip_special_tokens;
  *out_stream = s;
  return ONYX_STATUS_OK;
}

void onyx_tokenizer_stream_destroy(onyx_tokenizer_stream *s) {
  if (s == NULL) return;
  free(s->ids.items);
  onyx__tok_buf_free(&s->prefix);
  onyx__tok_buf_free(&s->text);
  onyx__tok_buf_free(&s->out);
  free(s);
}

static bool ends_with_replacement(const onyx__tok_buf *b) {
  return b->len >= 3 && !memcmp(b->data + b->len - 3, "\xEF\xBF\xBD", 3);
}

onyx_status onyx_tokenizer_stream_step(onyx_tokenizer_stream *s, int64_t id, const char **out_text,
                                       size_t *out_size, onyx_error **out_error) {
  if (s == NULL || out_text == NULL || out_size == NULL)
    return onyx__tok_fail(out_error, ONYX_STATUS_INVALID_ARGUMENT,
                          "onyx_tokenizer_stream_step: NULL stream or output");
  onyx_status st = ONYX_STATUS_OK;
  if (s->prefix.len == 0 && s->ids.count) {
    st = decode_into(s->t, s->ids.items, s->ids.count, s->skip, &s->text, out_error);
    if (st != ONYX_STATUS_OK) return st;
    if (!ends_with_replacement(&s->text)) {
      onyx__tok_buf t = s->prefix;
      s->prefix = s->text;
      s->text = t;
      s->prefix_index = s->ids.count;
    }
  }
  if (!onyx__tok_ids_add(&s->ids, id)) return oom(out_error);
  st = decode_into(s->t, s->ids.items, s->ids.count, s->skip, &s->text, out_error);
  if (st != ONYX_STATUS_OK) {
    s->ids.count--;
    return st;
  }
  s->out.len = 0;
  s->out.data[0] = '\0';
  if (s->text.len > s->prefix.len && !ends_with_replacement(&s->text)) {
    if (memcmp(s->text.data, s->prefix.data, s->prefix.len) != 0)
      return onyx__tok_fail(out_error, ONYX_STATUS_INTERNAL,
                            "streamed decoding: the text of the ids so far no longer starts with "
                            "what was already given out (id %lld)",
                            (long long)id);
    if (!onyx__tok_buf_add(&s->out, s->text.data + s->prefix.len, s->text.len - s->prefix.len))
      return oom(out_error);
    size_t keep = s->ids.count - s->prefix_index;
    memmove(s->ids.items, s->ids.items + s->prefix_index, keep * sizeof *s->ids.items);
    s->ids.count = keep;
    st = decode_into(s->t, s->ids.items, s->ids.count, s->skip, &s->prefix, out_error);
    if (st != ONYX_STATUS_OK) return st;
    s->prefix_index = keep;
  }
  *out_text = s->out.data;
  *out_size = s->out.len;
  return ONYX_STATUS_OK;
}
