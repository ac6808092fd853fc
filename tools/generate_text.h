/* onyx-generate's text side: how a prompt becomes ids and generated ids become text. */
#ifndef ONYX_TOOLS_GENERATE_TEXT_H
#define ONYX_TOOLS_GENERATE_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onyx_tokenizer.h"

/* The model folder's tokenizer.json when it has one (tokenizer/onyx_tokenizer.h);
 * else, for a byte vocabulary (256 to 260 ids, the bundled tiny decoder's), bytes. */
typedef struct onyx_tool_text {
  onyx_tokenizer *tokenizer;     /* NULL: the folder has no tokenizer.json */
  onyx_tokenizer_stream *stream; /* text of the ids as they come (NULL: not streaming) */
  bool bytes;                    /* ids below 256 are bytes of text */
  bool ids_open;                 /* a "[" of raw ids was printed after the stream failed */
} onyx_tool_text;

/* Opens the text side of the model whose file is `model_path`: loads the folder's
 * tokenizer.json when present. Returns 0, or -1 with the reason in `why`. */
int onyx_tool_text_open(const char *model_path, int64_t vocab_size, onyx_tool_text *out, char *why,
                        size_t why_cap);
void onyx_tool_text_close(onyx_tool_text *t);

/* The prompt's ids (malloc'ed, the caller frees): the tokenizer's encode (with the
 * template's BOS), or the bytes for a byte vocabulary. -1 with the reason otherwise. */
int onyx_tool_text_encode(const onyx_tool_text *t, const char *prompt, int64_t **out_ids,
                          size_t *out_count, char *why, size_t why_cap);

/* Starts streaming text after the prompt's ids (their text is printed when
 * `print_prompt`, for a prompt given as ids). */
void onyx_tool_text_begin(onyx_tool_text *t, const int64_t *prompt, size_t count,
                          bool print_prompt);
/* Prints generated id number `index`: its text, else the number. */
void onyx_tool_text_put(onyx_tool_text *t, int64_t id, size_t index);
/* Ends the streamed line. */
void onyx_tool_text_end(const onyx_tool_text *t);

/* tokenizer_config.json's eos token as an id, or -1. */
int64_t onyx_tool_text_eos(const onyx_tool_text *t);

#endif /* ONYX_TOOLS_GENERATE_TEXT_H */
