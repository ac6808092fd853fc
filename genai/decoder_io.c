/*
 * Binding a decoder's inputs and outputs by genai_config.json's names, and checking
 * the config against the model.
 *
 * The names are GenAI's: plain names for input_ids, attention_mask, position_ids and
 * logits, and per-layer patterns ("past_key_values.%d.key") for the KV cache. An
 * input the model lacks is not fed (attention_mask and position_ids are optional);
 * an input the config does not name is an error, since nothing could feed it.
 * Exporters leave dims symbolic (the builder writes the head size as `kv_cache_dim`):
 * the session reports those as -1 and the config's value stands. A dim the model
 * fixes must agree with the config.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genai_impl.h"

typedef struct binder {
  const onyx_session *s;
  const onyx_genai_config *c;
  const char *model;
  onyx_error **out_error;
} binder;

static size_t find_input(const onyx_session *s, const char *name) {
  for (size_t i = 0; i < onyx_session_input_count(s); ++i)
    if (!strcmp(onyx_session_input_info(s, i).name, name)) return i;
  return SIZE_MAX;
}

static size_t find_output(const onyx_session *s, const char *name) {
  for (size_t i = 0; i < onyx_session_output_count(s); ++i)
    if (!strcmp(onyx_session_output_info(s, i).name, name)) return i;
  return SIZE_MAX;
}

/* Does `name` match `pattern` (one %d, checked by the config reader)? The layer in *out. */
static bool match_pattern(const char *pattern, const char *name, long *out) {
  const char *at = strstr(pattern, "%d");
  size_t pl = (size_t)(at - pattern), sl = strlen(at + 2), nl = strlen(name);
  if (nl <= pl + sl || strncmp(name, pattern, pl) != 0 || strcmp(name + nl - sl, at + 2) != 0)
    return false;
  long v = 0;
  for (const char *c = name + pl; c < name + nl - sl; ++c) {
    if (*c < '0' || *c > '9' || v > 1000000) return false;
    v = v * 10 + (*c - '0');
  }
  *out = v;
  return true;
}

static void layer_name(const char *pattern, long layer, char *buf, size_t cap) {
  const char *at = strstr(pattern, "%d");
  snprintf(buf, cap, "%.*s%ld%s", (int)(at - pattern), pattern, layer, at + 2);
}

static bool is_index_type(uint32_t dt) { return dt == ONYX_DTYPE_INT64 || dt == ONYX_DTYPE_INT32; }

static bool is_float_type(uint32_t dt) {
  return dt == ONYX_DTYPE_FLOAT32 || dt == ONYX_DTYPE_FLOAT16 || dt == ONYX_DTYPE_BFLOAT16;
}

/* An index input (input_ids, attention_mask, position_ids): (batch, length) integers. */
static onyx_status bind_index(binder *b, onyx__genai_name which, bool required, size_t *index,
                              uint32_t *dtype) {
  const char *name = b->c->names[which];
  *index = find_input(b->s, name);
  if (*index == SIZE_MAX) {
    if (!required) return ONYX_STATUS_OK;
    return onyx__genai_fail(b->out_error, ONYX_STATUS_INVALID_CONFIG,
                            "%s: %s '%s' names no input of %s", b->c->origin,
                            onyx__genai_name_key(which), name, b->model);
  }
  onyx_value_info v = onyx_session_input_info(b->s, *index);
  if (!is_index_type(v.dtype) || (v.rank != -1 && v.rank != 2) ||
      (v.rank == 2 && v.dims[0] != -1 && v.dims[0] != 1))
    return onyx__genai_fail(b->out_error, ONYX_STATUS_INVALID_MODEL,
                            "%s: input '%s' must be (batch, length) int64 or int32 with a batch "
                            "of 1 or symbolic, got rank %d %s",
                            b->model, name, v.rank, onyx__genai_dtype_name(v.dtype));
  *dtype = v.dtype;
  return ONYX_STATUS_OK;
}

/* One dim of a KV value against the config: a fixed dim must equal it. */
static onyx_status check_dim(binder *b, const onyx_value_info *v, int d, const char *key,
                             int64_t want) {
  if (v->rank != 4 || v->dims[d] < 0 || v->dims[d] == want) return ONYX_STATUS_OK;
  return onyx__genai_fail(b->out_error, ONYX_STATUS_INVALID_CONFIG,
                          "%s: %s is %lld, but %s fixes dim %d of '%s' to %lld", b->c->origin, key,
                          (long long)want, b->model, d, v->name, (long long)v->dims[d]);
}

/* A past input or present output of one layer: (batch, kv heads, length, head size). */
static onyx_status check_kv(binder *b, const onyx_value_info *v, onyx__decoder_io *io, bool past) {
  if ((v->rank != -1 && v->rank != 4) || !is_float_type(v->dtype) ||
      (v->rank == 4 && v->dims[0] != -1 && v->dims[0] != 1))
    return onyx__genai_fail(b->out_error, ONYX_STATUS_INVALID_MODEL,
                            "%s: '%s' must be (batch, kv heads, length, head size) of float32, "
                            "float16 or bfloat16 with a batch of 1 or symbolic, got rank %d "
                            "%s",
                            b->model, v->name, v->rank, onyx__genai_dtype_name(v->dtype));
  onyx_status st;
  if ((st = check_dim(b, v, 1, "model.decoder.num_key_value_heads", io->kv_heads)) ||
      (st = check_dim(b, v, 3, "model.decoder.head_size", io->head_size)))
    return st;
  if (io->kv_dtype == ONYX_DTYPE_UNDEFINED) io->kv_dtype = v->dtype;
  if (v->dtype != io->kv_dtype)
    return onyx__genai_fail(b->out_error, ONYX_STATUS_INVALID_MODEL,
                            "%s: '%s' is %s, the other KV values %s", b->model, v->name,
                            onyx__genai_dtype_name(v->dtype), onyx__genai_dtype_name(io->kv_dtype));
  if (past && v->rank == 4 && v->dims[2] >= 0) io->past_length_dim = v->dims[2];
  return ONYX_STATUS_OK;
}

/* Layers the model has for a pattern: the count of matching names and the highest. */
static void count_layers(binder *b, onyx__genai_name which, bool inputs, long *count,
                         long *highest) {
  const char *pattern = b->c->names[which];
  size_t n = inputs ? onyx_session_input_count(b->s) : onyx_session_output_count(b->s);
  *count = 0;
  *highest = -1;
  for (size_t i = 0; i < n; ++i) {
    onyx_value_info v =
        inputs ? onyx_session_input_info(b->s, i) : onyx_session_output_info(b->s, i);
    long layer = 0;
    if (!match_pattern(pattern, v.name, &layer)) continue;
    ++*count;
    if (layer > *highest) *highest = layer;
  }
}

/* "a, b, c" of the session's inputs (or outputs), cut short to fit. */
static void list_names(const onyx_session *s, bool inputs, char *buf, size_t cap) {
  size_t n = inputs ? onyx_session_input_count(s) : onyx_session_output_count(s), used = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < n && used + 8 < cap; ++i) {
    onyx_value_info v = inputs ? onyx_session_input_info(s, i) : onyx_session_output_info(s, i);
    int w = snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", v.name);
    if (w < 0 || (size_t)w >= cap - used) {
      snprintf(buf + (cap > 5 ? cap - 5 : 0), 5, "...");
      return;
    }
    used += (size_t)w;
  }
}

/* Every layer's value for one pattern; `slots` receives the indices. */
static onyx_status bind_layers(binder *b, onyx__genai_name which, bool inputs, onyx__decoder_io *io,
                               size_t *slots) {
  const char *pattern = b->c->names[which];
  long count = 0, highest = -1;
  count_layers(b, which, inputs, &count, &highest);
  if (count == 0) {
    char names[512];
    list_names(b->s, inputs, names, sizeof names);
    return onyx__genai_fail(b->out_error, ONYX_STATUS_INVALID_CONFIG,
                            "%s: %s '%s' matches no %s of %s (it has %s)", b->c->origin,
                            onyx__genai_name_key(which), pattern, inputs ? "input" : "output",
                            b->model, names);
  }
  if (count != (long)io->layers || highest + 1 != (long)io->layers)
    return onyx__genai_fail(b->out_error, ONYX_STATUS_INVALID_CONFIG,
                            "%s: model.decoder.num_hidden_layers is %u, but %s has %ld %s named "
                            "by %s '%s' (highest layer %ld)",
                            b->c->origin, io->layers, b->model, count,
                            inputs ? "inputs" : "outputs", onyx__genai_name_key(which), pattern,
                            highest);
  for (uint32_t l = 0; l < io->layers; ++l) {
    char name[512];
    layer_name(pattern, l, name, sizeof name);
    slots[l] = inputs ? find_input(b->s, name) : find_output(b->s, name);
    if (slots[l] == SIZE_MAX)
      return onyx__genai_fail(b->out_error, ONYX_STATUS_INVALID_CONFIG,
                              "%s: %s has no %s '%s' (%s '%s', layer %u)", b->c->origin, b->model,
                              inputs ? "input" : "output", name, onyx__genai_name_key(which),
                              pattern, l);
    onyx_value_info v =
        inputs ? onyx_session_input_info(b->s, slots[l]) : onyx_session_output_info(b->s, slots[l]);
    onyx_status st = check_kv(b, &v, io, inputs);
    if (st != ONYX_STATUS_OK) return st;
  }
  return ONYX_STATUS_OK;
}

/* Every model input must be one the loop feeds. */
static onyx_status check_unnamed_inputs(binder *b, const onyx__decoder_io *io) {
  size_t n = onyx_session_input_count(b->s);
  bool *fed = calloc(n + 1, sizeof *fed);
  if (fed == NULL)
    return onyx__genai_fail(b->out_error, ONYX_STATUS_OUT_OF_MEMORY, "out of memory");
  size_t fixed[3] = {io->input_ids, io->attention_mask, io->position_ids};
  for (int k = 0; k < 3; ++k)
    if (fixed[k] != SIZE_MAX) fed[fixed[k]] = true;
  for (uint32_t l = 0; l < io->layers; ++l) fed[io->past_key[l]] = fed[io->past_value[l]] = true;
  onyx_status st = ONYX_STATUS_OK;
  for (size_t i = 0; i < n && st == ONYX_STATUS_OK; ++i)
    if (!fed[i])
      st = onyx__genai_fail(b->out_error, ONYX_STATUS_INVALID_CONFIG,
                            "%s: %s has input '%s', which no name in model.decoder.inputs "
                            "matches: nothing would feed it",
                            b->c->origin, b->model, onyx_session_input_info(b->s, i).name);
  free(fed);
  return st;
}

static onyx_status bind_logits(binder *b, onyx__decoder_io *io) {
  const char *name = b->c->names[ONYX__NAME_LOGITS];
  io->logits = find_output(b->s, name);
  if (io->logits == SIZE_MAX)
    return onyx__genai_fail(b->out_error, ONYX_STATUS_INVALID_CONFIG,
                            "%s: %s '%s' names no output of %s", b->c->origin,
                            onyx__genai_name_key(ONYX__NAME_LOGITS), name, b->model);
  onyx_value_info v = onyx_session_output_info(b->s, io->logits);
  if (!is_float_type(v.dtype))
    return onyx__genai_fail(b->out_error, ONYX_STATUS_UNSUPPORTED,
                            "%s: logits '%s' are %s; float32, float16 or bfloat16 expected",
                            b->model, name, onyx__genai_dtype_name(v.dtype));
  io->logits_dtype = v.dtype;
  if (v.rank >= 1 && v.dims[v.rank - 1] > 0) io->vocab = v.dims[v.rank - 1];
  int64_t want = b->c->model.vocab_size;
  if (want > 0 && io->vocab > 0 && want != io->vocab)
    return onyx__genai_fail(b->out_error, ONYX_STATUS_INVALID_CONFIG,
                            "%s: model.vocab_size is %lld, but %s fixes the last dim of '%s' to "
                            "%lld",
                            b->c->origin, (long long)want, b->model, name, (long long)io->vocab);
  return ONYX_STATUS_OK;
}

void onyx__decoder_io_free(onyx__decoder_io *io) {
  free(io->past_key);
  free(io->past_value);
  free(io->present_key);
  free(io->present_value);
  memset(io, 0, sizeof *io);
}

onyx_status onyx__decoder_io_bind(const onyx_session *s, const onyx_genai_config *c,
                                  const char *model_name, onyx__decoder_io *io,
                                  onyx_error **out_error) {
  binder b = {s, c, model_name, out_error};
  memset(io, 0, sizeof *io);
  io->layers = (uint32_t)c->model.num_hidden_layers;
  io->kv_heads = c->model.num_key_value_heads;
  io->head_size = c->model.head_size;
  io->past_length_dim = -1;
  size_t n = io->layers;
  io->past_key = calloc(n, sizeof(size_t));
  io->past_value = calloc(n, sizeof(size_t));
  io->present_key = calloc(n, sizeof(size_t));
  io->present_value = calloc(n, sizeof(size_t));
  onyx_status st = ONYX_STATUS_OK;
  if (!io->past_key || !io->past_value || !io->present_key || !io->present_value)
    st = onyx__genai_fail(out_error, ONYX_STATUS_OUT_OF_MEMORY, "binding %u layers", io->layers);
  if (st == ONYX_STATUS_OK)
    st = bind_index(&b, ONYX__NAME_INPUT_IDS, true, &io->input_ids, &io->ids_dtype);
  if (st == ONYX_STATUS_OK)
    st = bind_index(&b, ONYX__NAME_ATTENTION_MASK, false, &io->attention_mask, &io->mask_dtype);
  if (st == ONYX_STATUS_OK)
    st = bind_index(&b, ONYX__NAME_POSITION_IDS, false, &io->position_ids, &io->pos_dtype);
  if (st == ONYX_STATUS_OK) st = bind_layers(&b, ONYX__NAME_PAST_KEY, true, io, io->past_key);
  if (st == ONYX_STATUS_OK) st = bind_layers(&b, ONYX__NAME_PAST_VALUE, true, io, io->past_value);
  if (st == ONYX_STATUS_OK)
    st = bind_layers(&b, ONYX__NAME_PRESENT_KEY, false, io, io->present_key);
  if (st == ONYX_STATUS_OK)
    st = bind_layers(&b, ONYX__NAME_PRESENT_VALUE, false, io, io->present_value);
  if (st == ONYX_STATUS_OK) st = bind_logits(&b, io);
  if (st == ONYX_STATUS_OK) st = check_unnamed_inputs(&b, io);
  if (st != ONYX_STATUS_OK) onyx__decoder_io_free(io);
  return st;
}
