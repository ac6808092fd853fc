/*
 * Onyx generation library — decoder models as the exporters write them.
 *
 * Published: every onyx_genai_* and onyx_generator_* name declared here.
 *
 * A model folder holds a decoder (model.onnx and its external data) and the
 * genai_config.json that ONNX Runtime GenAI's model builder and mobius write beside
 * it: the decoder's file name, its KV geometry, the names of its inputs and outputs,
 * the special token ids and the search defaults. onyx_genai_model_open reads the
 * folder, creates the session and binds the inputs and outputs by the config's name
 * patterns, checking the config against the model. A generator then runs the loop:
 * prefill, decode steps, sampling, the KV cache, stop conditions.
 *
 * Objects are opaque; each destroy accepts NULL. Fallible calls return onyx_status
 * and, when `out_error` is non-NULL, store an onyx_error (core/onyx.h) that the
 * caller frees with onyx_error_free; on failure no out-parameter is written. Objects
 * are not thread-safe: use a generator from one thread at a time. Option structs
 * start with struct_size (set it to sizeof the struct); fields are append-only.
 */
#ifndef ONYX_GENAI_H
#define ONYX_GENAI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onyx.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define ONYX_GENAI_API __attribute__((visibility("default")))
#else
#define ONYX_GENAI_API
#endif

/* Most end-of-sequence ids a config or a caller may name. */
#define ONYX_GENAI_MAX_EOS 16

/* ------------------------------------------------------------------ config */

/* A parsed genai_config.json. Keys Onyx does not use are ignored (GenAI has many);
 * a known key of the wrong type, a missing required key or an impossible value is
 * an INVALID_CONFIG error naming the key (and, for malformed JSON, the line and
 * column). */
typedef struct onyx_genai_config onyx_genai_config;

/* Reads `path`: a model folder (its genai_config.json) or genai_config.json itself.
 * The file must be a regular file of at most 4 MiB. */
ONYX_GENAI_API onyx_status onyx_genai_config_load(const char *path, onyx_genai_config **out_config,
                                                  onyx_error **out_error);
/* Parses `size` bytes of JSON text (copied). `origin` names the text in messages
 * (a path; NULL: "genai_config.json"). */
ONYX_GENAI_API onyx_status onyx_genai_config_parse(const char *text, size_t size,
                                                   const char *origin,
                                                   onyx_genai_config **out_config,
                                                   onyx_error **out_error);
ONYX_GENAI_API void onyx_genai_config_destroy(onyx_genai_config *config);

/* The "search" section: defaults of a generation, which a caller may override. */
typedef struct onyx_genai_search {
  uint32_t struct_size;           /* sizeof(onyx_genai_search) */
  int64_t max_length;             /* total tokens, prompt included (default: context_length) */
  bool do_sample;                 /* false: greedy (the first maximum) */
  float temperature;              /* > 0 when sampling (default 1) */
  int64_t top_k;                  /* 0: off */
  float top_p;                    /* (0, 1]; 1: off */
  float repetition_penalty;       /* > 0; 1: off (HF semantics over prompt and output) */
  bool past_present_share_buffer; /* past and present are one buffer (GroupQueryAttention) */
  /* fields above: v1 */
} onyx_genai_search;

/* What a config says about the model (strings owned by the config). */
typedef struct onyx_genai_model_desc {
  uint32_t struct_size;   /* sizeof(onyx_genai_model_desc) */
  const char *type;       /* model.type ("qwen2", "llama"), "" when absent */
  const char *filename;   /* model.decoder.filename */
  int64_t vocab_size;     /* 0 when absent */
  int64_t context_length; /* tokens the model's positions cover */
  int64_t num_hidden_layers;
  int64_t num_attention_heads; /* 0 when absent */
  int64_t num_key_value_heads;
  int64_t head_size;
  int64_t hidden_size;  /* 0 when absent */
  int64_t bos_token_id; /* -1 when absent */
  int64_t pad_token_id; /* -1 when absent */
  uint32_t eos_count;   /* entries of eos_token_ids (0: none) */
  int64_t eos_token_ids[ONYX_GENAI_MAX_EOS];
  /* fields above: v1 */
} onyx_genai_model_desc;

/* Copies the config's values into *out (whose struct_size the caller sets). */
ONYX_GENAI_API void onyx_genai_config_search(const onyx_genai_config *config,
                                             onyx_genai_search *out);
ONYX_GENAI_API void onyx_genai_config_model(const onyx_genai_config *config,
                                            onyx_genai_model_desc *out);

/* ------------------------------------------------------------------ model */

/* A decoder session bound to its config: created once, used by any number of
 * generators in turn. */
typedef struct onyx_genai_model onyx_genai_model;

typedef struct onyx_genai_model_options {
  uint32_t struct_size;                /* sizeof(onyx_genai_model_options) */
  const onyx_session_options *session; /* passed to onyx_session_create; NULL: defaults */
  /* fields above: v1 */
} onyx_genai_model_options;

/* How the KV cache goes from one step to the next. */
typedef enum onyx_genai_kv_kind {
  /* past and present are one governed buffer with capacity, written in place
   * (GroupQueryAttention, search.past_present_share_buffer true) */
  ONYX_GENAI_KV_SHARED = 0,
  /* present = concat(past, new rows), fed back as the next past (Attention-23/24,
   * or GroupQueryAttention with the share off) */
  ONYX_GENAI_KV_CONCAT = 1
} onyx_genai_kv_kind;

/* What the model turned out to be (strings owned by the model). */
typedef struct onyx_genai_model_info {
  uint32_t struct_size; /* sizeof(onyx_genai_model_info) */
  const char *path;     /* the model file opened */
  uint32_t layers;
  int64_t kv_heads, head_size;
  uint32_t kv_dtype;       /* onyx_dtype of past/present */
  uint32_t kv_kind;        /* onyx_genai_kv_kind */
  uint32_t kv_layout;      /* 0: BNSH, 1: BSNH (GroupQueryAttention's kv_layout) */
  const char *attention;   /* op of the attention nodes ("GroupQueryAttention", "Attention") */
  const char *kv_provider; /* provider running attention, where the KV cache lives */
  uint32_t logits_dtype;   /* float32, float16 or bfloat16 */
  int64_t vocab_size;      /* logits' last dim when fixed, else the config's, else 0 */
  bool has_position_ids, has_attention_mask;
  int64_t context_length;
  /* fields above: v1 */
} onyx_genai_model_info;

/*
 * Opens `path`: a model folder with genai_config.json, or a model file inside one
 * (which then replaces model.decoder.filename). Reads the config, creates the
 * session on `runtime` (which must outlive the model) and binds the inputs and
 * outputs. A config that contradicts the model (a head size, KV head count or
 * layer count the model fixes otherwise, an input the patterns do not name) is an
 * INVALID_CONFIG error naming the key and both values. `options` may be NULL.
 */
ONYX_GENAI_API onyx_status onyx_genai_model_open(onyx_runtime *runtime, const char *path,
                                                 const onyx_genai_model_options *options,
                                                 onyx_genai_model **out_model,
                                                 onyx_error **out_error);
ONYX_GENAI_API void onyx_genai_model_destroy(onyx_genai_model *model);
ONYX_GENAI_API void onyx_genai_model_get_info(const onyx_genai_model *model,
                                              onyx_genai_model_info *out);
/* The model's config and session, owned by the model (valid until it is destroyed). */
ONYX_GENAI_API const onyx_genai_config *onyx_genai_model_config(const onyx_genai_model *model);
ONYX_GENAI_API onyx_session *onyx_genai_model_session(onyx_genai_model *model);

/* ------------------------------------------------------------------ generator */

typedef struct onyx_generator onyx_generator;

typedef struct onyx_generator_options {
  uint32_t struct_size;     /* sizeof(onyx_generator_options) */
  onyx_genai_search search; /* from the config; override fields as needed */
  uint64_t seed;            /* sampling's random state (default 42) */
  uint32_t eos_count;       /* stop after any of these ids (default: the config's) */
  int64_t eos[ONYX_GENAI_MAX_EOS];
  uint32_t kv_growth; /* onyx_kv_growth of a shared KV buffer (default in place) */
  /* Record decode steps as device graphs and replay them, where a device provider
   * runs the model and can capture (default true; a shared KV buffer only). */
  bool graphs;
  /* Decode masks span the whole KV view, zeros after the live tokens, as replayed
   * graphs need, also without graphs (a shared KV buffer only). */
  bool fixed_mask;
  /* fields above: v1 */
} onyx_generator_options;

/* Fills *out with the model's defaults: its config's search section and eos ids. */
ONYX_GENAI_API void onyx_generator_options_init(const onyx_genai_model *model,
                                                onyx_generator_options *out);

/* Creates a generator over `model` (which must outlive it). Checks the options:
 * INVALID_ARGUMENT naming the field for a value out of range, and for a max_length
 * beyond the model's context_length. `options` may be NULL for the defaults. */
ONYX_GENAI_API onyx_status onyx_generator_create(onyx_genai_model *model,
                                                 const onyx_generator_options *options,
                                                 onyx_generator **out_generator,
                                                 onyx_error **out_error);
ONYX_GENAI_API void onyx_generator_destroy(onyx_generator *generator);

/* Appends `count` ids (the prompt), fed to the model at the next step. The first
 * call admits the whole request: the KV cache for max_length tokens must fit, or
 * TIER_EXHAUSTED with the governor's numbers comes back before anything runs.
 * INVALID_ARGUMENT when the sequence would pass max_length. */
ONYX_GENAI_API onyx_status onyx_generator_append_tokens(onyx_generator *generator,
                                                        const int64_t *ids, size_t count,
                                                        onyx_error **out_error);

/* Runs the model on the tokens not yet fed (the prompt, then the last token) and
 * picks the next one, which joins the sequence. Fails when done or nothing is
 * pending; a failed step leaves the sequence as it was. */
ONYX_GENAI_API onyx_status onyx_generator_generate_next(onyx_generator *generator,
                                                        onyx_error **out_error);

/* True once an eos id was picked or the sequence reached max_length. */
ONYX_GENAI_API bool onyx_generator_is_done(const onyx_generator *generator);
/* The sequence so far (prompt and generated ids), owned by the generator and valid
 * until its next call; *out_count receives its length. */
ONYX_GENAI_API const int64_t *onyx_generator_sequence(const onyx_generator *generator,
                                                      size_t *out_count);
/* The last id picked, -1 before the first step. */
ONYX_GENAI_API int64_t onyx_generator_last_token(const onyx_generator *generator);

typedef struct onyx_generator_stats {
  uint32_t struct_size;                   /* sizeof(onyx_generator_stats) */
  uint64_t prefill_tokens, decode_tokens; /* tokens fed by the first step / by later ones */
  double prefill_seconds, decode_seconds; /* time inside onyx_session_run */
  uint32_t kv_kind;                       /* onyx_genai_kv_kind */
  onyx_kv_cache_stats kv;                 /* a shared buffer's cache (zeros for concat) */
  /* KV bytes copied because of how the cache grows: growth by copy (shared), or for
   * concat the past rows the model copies into present every step plus present
   * copied out of each run to the caller's memory. */
  uint64_t kv_bytes_moved;
  uint64_t kv_bytes_model; /* concat: past rows copied into present inside the model */
  uint64_t kv_bytes_out;   /* concat: present copied out of each run */
  uint64_t kv_bytes_now;   /* bytes the KV of the sequence takes now */
  bool graphs;             /* decode steps were asked to run as device graphs */
  /* fields above: v1 */
} onyx_generator_stats;

ONYX_GENAI_API void onyx_generator_get_stats(const onyx_generator *generator,
                                             onyx_generator_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* ONYX_GENAI_H */
