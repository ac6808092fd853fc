/*
 * Onyx tokenizer — Hugging Face tokenizer.json (and tokenizer_config.json) in C.
 *
 * Published: every onyx_tokenizer_* name declared here.
 *
 * A tokenizer is loaded from a model folder as the exporters write it. It gives the
 * ids Hugging Face `tokenizers` gives for the same file and text (the reference
 * implementation of the format; docs/tokenizer.md says where ONNX Runtime GenAI's
 * own tokenizer differs), and turns ids back into text, all at once or streamed.
 *
 * What a file may use: the BPE model (byte-level as GPT-2, Qwen2 and Llama-3 use it;
 * with byte_fallback and the metaspace as SentencePiece-converted files use it;
 * ignore_merges, unk_token, fuse_unk, continuing_subword_prefix, end_of_word_suffix),
 * added and special tokens, the normalizers NFC, NFD, NFKC, NFKD, Lowercase, Replace,
 * Prepend and Sequence, the pre-tokenizers ByteLevel, Split, Metaspace, Digits and
 * Sequence, the decoders ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace and
 * Sequence, and the post-processors TemplateProcessing, ByteLevel and Sequence.
 * Anything else is refused at load with an UNSUPPORTED error naming its JSON path
 * ("pre_tokenizer.pretokenizers[1].type: 'Whitespace' is not supported ...");
 * malformed files are INVALID_MODEL errors naming the path, or the line and column.
 *
 * Errors travel in the core's channel (core/onyx.h): fallible calls return
 * onyx_status and, when `out_error` is non-NULL, store an onyx_error the caller frees
 * with onyx_error_free; on failure no out-parameter is written. Memory the library
 * returns (ids, text) is freed with onyx_tokenizer_free. A tokenizer is not
 * thread-safe (encoding fills its cache): use it from one thread at a time, or one
 * tokenizer per thread. Each destroy accepts NULL.
 */
#ifndef ONYX_TOKENIZER_H
#define ONYX_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onyx.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define ONYX_TOKENIZER_API __attribute__((visibility("default")))
#else
#define ONYX_TOKENIZER_API
#endif

/* Largest tokenizer.json read (bytes); tokenizer_config.json may have 4 MiB. */
#define ONYX_TOKENIZER_MAX_FILE_BYTES (64u << 20)
/* Ids run from 0 to this (about 4M, far above the largest vocabularies in use). */
#define ONYX_TOKENIZER_MAX_ID ((1 << 22) - 1)
/* Longest text encode accepts (bytes). */
#define ONYX_TOKENIZER_MAX_TEXT_BYTES (256u << 20)

typedef struct onyx_tokenizer onyx_tokenizer;

/*
 * Loads `path`: a folder holding tokenizer.json (and tokenizer_config.json, read when
 * present), or a tokenizer.json file (its folder's tokenizer_config.json is read when
 * present). Both must be regular files; they are opened without blocking and their
 * size is checked before they are read. NOT_FOUND when there is no tokenizer.json.
 */
ONYX_TOKENIZER_API onyx_status onyx_tokenizer_load(const char *path, onyx_tokenizer **out_tokenizer,
                                                   onyx_error **out_error);

/*
 * Builds a tokenizer from `size` bytes of tokenizer.json text and, when `config` is
 * non-NULL, `config_size` bytes of tokenizer_config.json text (both copied as
 * needed; neither needs a NUL). `origin` names the text in messages (NULL:
 * "tokenizer.json").
 */
ONYX_TOKENIZER_API onyx_status onyx_tokenizer_parse(const char *json, size_t size,
                                                    const char *config, size_t config_size,
                                                    const char *origin,
                                                    onyx_tokenizer **out_tokenizer,
                                                    onyx_error **out_error);

ONYX_TOKENIZER_API void onyx_tokenizer_destroy(onyx_tokenizer *tokenizer);

/* Frees ids or text returned by this library (NULL: nothing). */
ONYX_TOKENIZER_API void onyx_tokenizer_free(void *memory);

/* What a tokenizer holds. */
typedef struct onyx_tokenizer_info {
  uint32_t struct_size; /* sizeof(onyx_tokenizer_info) */
  /* Distinct ids: the model's vocabulary and the added tokens outside it (what
   * `tokenizers` reports as get_vocab_size(with_added_tokens=True)). */
  int64_t vocab_size;
  int64_t added_tokens; /* entries of added_tokens (special or not) */
  /* tokenizer_config.json's bos_token, eos_token, pad_token and unk_token as ids
   * (-1 when the file or the key is absent, or the token has no id). */
  int64_t bos_id, eos_id, pad_id, unk_id;
  /* tokenizer_config.json's add_bos_token / add_eos_token, for information: encode
   * follows tokenizer.json's post_processor, as `tokenizers` does. -1: absent. */
  int32_t add_bos_token, add_eos_token;
  bool byte_level; /* the model's tokens are GPT-2 byte-level characters */
  /* fields above: v1 */
} onyx_tokenizer_info;

/* Fills *out (whose struct_size the caller sets). */
ONYX_TOKENIZER_API void onyx_tokenizer_get_info(const onyx_tokenizer *tokenizer,
                                                onyx_tokenizer_info *out);

/*
 * Encodes `size` bytes of UTF-8 text (INVALID_ARGUMENT naming the byte offset when it
 * is not valid UTF-8). With `add_special_tokens`, the post_processor's template adds
 * its tokens (a BOS), as `tokenizers`' encode(text) does by default. *out_ids
 * receives `*out_count` ids (a buffer to free with onyx_tokenizer_free; non-NULL
 * also for zero ids).
 */
ONYX_TOKENIZER_API onyx_status onyx_tokenizer_encode(onyx_tokenizer *tokenizer, const char *text,
                                                     size_t size, bool add_special_tokens,
                                                     int64_t **out_ids, size_t *out_count,
                                                     onyx_error **out_error);

/*
 * Decodes `count` ids into text as `tokenizers`' decode does: ids with no token are
 * skipped, special tokens too when `skip_special_tokens`; invalid UTF-8 that byte
 * tokens make becomes U+FFFD. *out_text receives `*out_size` bytes and a NUL (free
 * with onyx_tokenizer_free).
 */
ONYX_TOKENIZER_API onyx_status onyx_tokenizer_decode(onyx_tokenizer *tokenizer, const int64_t *ids,
                                                     size_t count, bool skip_special_tokens,
                                                     char **out_text, size_t *out_size,
                                                     onyx_error **out_error);

/* The id of one token's exact text (added tokens first, then the model's
 * vocabulary), or -1. */
ONYX_TOKENIZER_API int64_t onyx_tokenizer_token_to_id(const onyx_tokenizer *tokenizer,
                                                      const char *token, size_t size);
/* The text of an id (owned by the tokenizer, not NUL-terminated; *out_size receives
 * its length), or NULL when no token has that id. */
ONYX_TOKENIZER_API const char *onyx_tokenizer_id_to_token(const onyx_tokenizer *tokenizer,
                                                          int64_t id, size_t *out_size);

/* ------------------------------------------------------------------ streaming */

/*
 * Text as ids arrive, one at a time: each step gives the text the new id completes,
 * holding back an incomplete UTF-8 sequence (byte tokens) until the bytes that end it
 * arrive, and never repeating text — the concatenation of the steps is what decode
 * gives for all the ids (the algorithm of `tokenizers`' DecodeStream). Feed a
 * prompt's ids first (and drop their text) so that the first generated word is
 * decoded in context.
 */
typedef struct onyx_tokenizer_stream onyx_tokenizer_stream;

/* `tokenizer` must outlive the stream. */
ONYX_TOKENIZER_API onyx_status onyx_tokenizer_stream_create(onyx_tokenizer *tokenizer,
                                                            bool skip_special_tokens,
                                                            onyx_tokenizer_stream **out_stream,
                                                            onyx_error **out_error);
ONYX_TOKENIZER_API void onyx_tokenizer_stream_destroy(onyx_tokenizer_stream *stream);

/* Adds `id`; *out_text receives the new text (owned by the stream, valid until its
 * next call; NUL-terminated) and *out_size its length, 0 when the id completes
 * nothing yet. */
ONYX_TOKENIZER_API onyx_status onyx_tokenizer_stream_step(onyx_tokenizer_stream *stream, int64_t id,
                                                          const char **out_text, size_t *out_size,
                                                          onyx_error **out_error);

#ifdef __cplusplus
}
#endif

#endif /* ONYX_TOKENIZER_H */
