/* onyx-generate's text side. A folder with tokenizer.json gets Hugging Face's
 * tokenization (the tokenizer library); the bundled tiny decoder, which has none and
 * a vocabulary of bytes, keeps its bytes; anything else takes ids only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "generate_text.h"

int onyx_tool_text_open(const char *model_path, int64_t vocab_size, onyx_tool_text *out, char *why,
                        size_t why_cap) {
  *out = (onyx_tool_text){.bytes = vocab_size >= 256 && vocab_size <= 260};
  char dir[4096], json[4200];
  snprintf(dir, sizeof dir, "%s", model_path);
  char *slash = strrchr(dir, '/');
  if (slash)
    *slash = '\0';
  else
    snprintf(dir, sizeof dir, ".");
  snprintf(json, sizeof json, "%s/tokenizer.json", dir);
  struct stat st;
  if (stat(json, &st) != 0) return 0; /* no tokenizer: bytes or ids */
  onyx_error *e = NULL;
  if (onyx_tokenizer_load(dir, &out->tokenizer, &e) != ONYX_STATUS_OK) {
    snprintf(why, why_cap, "%s", onyx_error_message(e));
    onyx_error_free(e);
    return -1;
  }
  out->bytes = false;
  return 0;
}

void onyx_tool_text_close(onyx_tool_text *t) {
  onyx_tokenizer_stream_destroy(t->stream);
  onyx_tokenizer_destroy(t->tokenizer);
  *t = (onyx_tool_text){0};
}

int onyx_tool_text_encode(const onyx_tool_text *t, const char *prompt, int64_t **out_ids,
                          size_t *out_count, char *why, size_t why_cap) {
  size_t n = strlen(prompt);
  if (t->tokenizer) {
    onyx_error *e = NULL;
    int64_t *ids = NULL;
    if (onyx_tokenizer_encode(t->tokenizer, prompt, n, true, &ids, out_count, &e) !=
        ONYX_STATUS_OK) {
      snprintf(why, why_cap, "--prompt: %s", onyx_error_message(e));
      onyx_error_free(e);
      return -1;
    }
    /* The library's buffer is freed with onyx_tokenizer_free: hand out a plain copy. */
    *out_ids = malloc((*out_count ? *out_count : 1) * sizeof **out_ids);
    if (*out_ids) memcpy(*out_ids, ids, *out_count * sizeof *ids);
    onyx_tokenizer_free(ids);
  } else if (t->bytes) {
    *out_ids = malloc((n ? n : 1) * sizeof **out_ids);
    for (size_t i = 0; *out_ids && i < n; ++i) (*out_ids)[i] = (unsigned char)prompt[i];
    *out_count = n;
  } else {
    snprintf(why, why_cap,
             "--prompt needs a tokenizer.json beside the model (or a byte vocabulary); "
             "pass the prompt as --prompt-ids");
    return -1;
  }
  if (*out_ids == NULL) snprintf(why, why_cap, "out of memory");
  return *out_ids ? 0 : -1;
}

static void put_text(const char *s, size_t n) {
  fwrite(s, 1, n, stdout);
  fflush(stdout);
}

void onyx_tool_text_begin(onyx_tool_text *t, const int64_t *prompt, size_t count,
                          bool print_prompt) {
  if (t->tokenizer == NULL ||
      onyx_tokenizer_stream_create(t->tokenizer, true, &t->stream, NULL) != ONYX_STATUS_OK)
    return;
  /* The prompt's ids go first, so that the first generated word is decoded in
   * context (a metaspace decoder drops the space of the very first token). */
  for (size_t i = 0; i < count; ++i) {
    const char *s = NULL;
    size_t n = 0;
    if (onyx_tokenizer_stream_step(t->stream, prompt[i], &s, &n, NULL) != ONYX_STATUS_OK) {
      onyx_tokenizer_stream_destroy(t->stream);
      t->stream = NULL;
      return;
    }
    if (print_prompt) put_text(s, n);
  }
}

void onyx_tool_text_put(onyx_tool_text *t, int64_t id, size_t index) {
  if (t->stream) {
    const char *s = NULL;
    size_t n = 0;
    onyx_error *e = NULL;
    if (onyx_tokenizer_stream_step(t->stream, id, &s, &n, &e) == ONYX_STATUS_OK) {
      put_text(s, n);
      return;
    }
    fprintf(stderr, "\nonyx-generate: decoding the output: %s; ids from here on\n",
            onyx_error_message(e));
    onyx_error_free(e);
    onyx_tokenizer_stream_destroy(t->stream);
    t->stream = NULL;
  }
  if (t->bytes && id < 256) {
    putchar((int)id);
  } else if (t->tokenizer) {
    printf("%s%lld", t->ids_open ? " " : "[", (long long)id);
    t->ids_open = true;
  } else {
    printf("%s%lld", index ? " " : "[", (long long)id); /* as onyx-generate always did */
  }
  fflush(stdout);
}

void onyx_tool_text_end(const onyx_tool_text *t) {
  bool text = t->bytes || (t->tokenizer && !t->ids_open);
  printf("%s\n", text ? "" : "]");
}

int64_t onyx_tool_text_eos(const onyx_tool_text *t) {
  if (t->tokenizer == NULL) return -1;
  onyx_tokenizer_info info = {.struct_size = sizeof info};
  onyx_tokenizer_get_info(t->tokenizer, &info);
  return info.eos_id;
}
