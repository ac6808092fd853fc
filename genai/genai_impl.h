/* Private to the generation library: the parsed config, the model's bound inputs and
 * outputs, the KV strategies, sampling. Nothing here is published. */
#ifndef ONYX_GENAI_IMPL_H
#define ONYX_GENAI_IMPL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "onyx_genai.h"

#define ONYX__GENAI_ERR_CAP 1024

/* ------------------------------------------------------------------ errors */

/* Stores an onyx_error with the formatted message and returns `status`. */
onyx_status onyx__genai_fail(onyx_error **out_error, onyx_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Stores `inner`'s status with "prefix: inner message" and frees `inner`. */
onyx_status onyx__genai_wrap(onyx_error **out_error, const char *prefix, onyx_error *inner);
/* "float32", "int64", ... for messages. */
const char *onyx__genai_dtype_name(uint32_t dtype);

/* ------------------------------------------------------------------ config */

/* The names genai_config.json gives the decoder's inputs and outputs. */
typedef enum onyx__genai_name {
  ONYX__NAME_INPUT_IDS = 0,
  ONYX__NAME_ATTENTION_MASK,
  ONYX__NAME_POSITION_IDS,
  ONYX__NAME_PAST_KEY,   /* a pattern with one %d: the layer */
  ONYX__NAME_PAST_VALUE, /* pattern */
  ONYX__NAME_LOGITS,
  ONYX__NAME_PRESENT_KEY,   /* pattern */
  ONYX__NAME_PRESENT_VALUE, /* pattern */
  ONYX__NAME_COUNT_
} onyx__genai_name;

struct onyx_genai_config {
  char *origin; /* the file (or "genai_config.json") named in messages */
  char *type, *filename;
  onyx_genai_model_desc model; /* its strings point at type and filename */
  onyx_genai_search search;
  bool max_length_given; /* search.max_length was in the file */
  char *names[ONYX__NAME_COUNT_];
};

/* The JSON key of a name ("model.decoder.inputs.past_key_names"), static storage. */
const char *onyx__genai_name_key(onyx__genai_name name);

/* Reads a whole untrusted file: a regular file, opened without blocking, at most
 * `max_bytes`. *out_text is NUL-terminated and freed by the caller. */
onyx_status onyx__genai_read_file(const char *path, size_t max_bytes, char **out_text,
                                  size_t *out_size, onyx_error **out_error);

/* ------------------------------------------------------------------ decoder IO */

/* Where each input and output the loop uses sits in the session's order. */
typedef struct onyx__decoder_io {
  size_t input_ids, attention_mask, position_ids; /* SIZE_MAX when the model lacks it */
  uint32_t ids_dtype, mask_dtype, pos_dtype;      /* int64 or int32 */
  size_t logits;
  uint32_t logits_dtype;
  int64_t vocab; /* logits' last dim when fixed, else 0 */
  uint32_t layers;
  size_t *past_key, *past_value;       /* input index per layer */
  size_t *present_key, *present_value; /* output index per layer */
  int64_t kv_heads, head_size;         /* the model's where fixed, else the config's */
  int64_t past_length_dim;             /* past dim 2 when the model fixes it, else -1 */
  uint32_t kv_dtype;
} onyx__decoder_io;

/* Binds `session`'s inputs and outputs by `config`'s names; `model_name` names the
 * model file in messages. INVALID_CONFIG / INVALID_MODEL naming the key, the input
 * and both values when they disagree. */
onyx_status onyx__decoder_io_bind(const onyx_session *session, const onyx_genai_config *config,
                                  const char *model_name, onyx__decoder_io *out,
                                  onyx_error **out_error);
void onyx__decoder_io_free(onyx__decoder_io *io);

/* ------------------------------------------------------------------ model */

struct onyx_genai_model {
  onyx_runtime *runtime;
  onyx_genai_config *config;
  onyx_session *session;
  onyx__decoder_io io;
  char *path;
  uint32_t kv_kind, kv_layout;
  const char *attention;   /* static or session-owned */
  const char *kv_provider; /* session-owned, NULL: host */
};

/* ------------------------------------------------------------------ KV strategies */

/* One step's buffers, shared by the loop and the KV strategy. */
typedef struct onyx__step {
  onyx_tensor *inputs, *outputs; /* [input_count], [output_count] */
  bool *writable, *borrowed;     /* run options' arrays */
  bool *kept;                    /* outputs the strategy took over (not freed by the loop) */
  int64_t past, count;           /* tokens cached before the step, tokens fed by it */
} onyx__step;

typedef struct onyx__kv onyx__kv;

typedef struct onyx__kv_ops {
  const char *name;
  /* Would the KV for `length` tokens fit? Reserves nothing. */
  onyx_status (*admit)(onyx__kv *kv, int64_t length, onyx_error **out_error);
  /* Makes room for past + count tokens and binds the past inputs. */
  onyx_status (*bind)(onyx__kv *kv, onyx__step *step, onyx_error **out_error);
  /* After a successful run: takes what the next step needs from the outputs. */
  onyx_status (*finish)(onyx__kv *kv, onyx__step *step, onyx_error **out_error);
  /* Tokens a decode step's mask may span (the view's length), 0: the live length. */
  int64_t (*view_length)(const onyx__kv *kv);
  void (*stats)(const onyx__kv *kv, onyx_generator_stats *out);
  void (*destroy)(onyx__kv *kv);
} onyx__kv_ops;

struct onyx__kv {
  const onyx__kv_ops *ops;
};

/* The shared past/present buffer: the governed onyx_kv_cache (GroupQueryAttention). */
onyx_status onyx__kv_shared_create(onyx_genai_model *model, int64_t max_length, uint32_t growth,
                                   onyx__kv **out, onyx_error **out_error);
/* present = concat(past, new rows), fed back as the next past. */
onyx_status onyx__kv_concat_create(onyx_genai_model *model, onyx__kv **out, onyx_error **out_error);

/* ------------------------------------------------------------------ sampling */

typedef struct onyx__sampler {
  bool greedy;
  float temperature, top_p, penalty;
  int64_t top_k, vocab;
  uint64_t rng;
  struct onyx__scored *scored; /* [vocab] work array */
  uint8_t *seen;               /* [vocab] ids of the sequence, for the repetition penalty */
} onyx__sampler;

onyx_status onyx__sampler_init(onyx__sampler *s, int64_t vocab, const onyx_genai_search *search,
                               uint64_t seed);
void onyx__sampler_free(onyx__sampler *s);
/* Notes an id of the sequence (the repetition penalty applies to it). */
void onyx__sampler_note(onyx__sampler *s, int64_t id);
/* The next id from one row of float logits, which the penalty may rewrite. */
int64_t onyx__sampler_pick(onyx__sampler *s, float *logits);

/* ------------------------------------------------------------------ logits */

/* Row `row` of the last axis of `logits` (float32, float16 or bfloat16) as float.
 * Returns the count of NaN entries. */
int64_t onyx__logits_row(const onyx_tensor *logits, int64_t row, float *out);

/* Whole-row passes (logits_rowpass.c): float16 (bf16 false) or bfloat16 bits widened
 * into out, returning the NaN count; the NaN count of a float row; the first index of
 * the largest value that is not NaN (0 when all are). */
int64_t onyx__row_widen(const uint16_t *h, bool bf16, int64_t n, float *out);
int64_t onyx__row_count_nan(const float *x, int64_t n);
int64_t onyx__row_first_max(const float *x, int64_t n);

#endif /* ONYX_GENAI_IMPL_H */
