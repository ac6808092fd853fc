/*
 * A model folder opened: genai_config.json read, the decoder's session created, its
 * inputs and outputs bound, and the KV strategy chosen from what the graph's
 * attention does.
 *
 * GroupQueryAttention can write new rows into a past buffer with capacity and hand
 * it back as present (ONNX Runtime GenAI's past_present_share_buffer). ONNX
 * Attention-23/24 defines present as concat(past, new): its past cannot be that
 * buffer, so the KV goes from present to the next past.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "genai_impl.h"

static char *dup_text(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

/* The folder holding the config and the model file, from what the caller named. */
static onyx_status resolve(const char *path, char *dir, size_t dir_cap, char *file, size_t file_cap,
                           onyx_error **out_error) {
  struct stat st;
  if (stat(path, &st) != 0)
    return onyx__genai_fail(out_error, ONYX_STATUS_NOT_FOUND, "%s: no such model folder or file",
                            path);
  if (S_ISDIR(st.st_mode)) {
    snprintf(dir, dir_cap, "%s", path);
    file[0] = '\0'; /* the config names it */
    return ONYX_STATUS_OK;
  }
  const char *slash = strrchr(path, '/');
  if (slash == NULL)
    snprintf(dir, dir_cap, ".");
  else
    snprintf(dir, dir_cap, "%.*s", (int)(slash - path) + (slash == path), path);
  snprintf(file, file_cap, "%s", path);
  return ONYX_STATUS_OK;
}

/* Which attention the graph runs, where, and in which KV layout. */
static onyx_status find_attention(onyx_genai_model *m, onyx_error **out_error) {
  onyx_session *s = m->session;
  bool gqa = false, onnx = false, first = true;
  for (size_t n = 0; n < onyx_session_node_count(s); ++n) {
    const char *op = onyx_session_node_op(s, n);
    bool is_gqa = !strcmp(op, "GroupQueryAttention");
    if (!is_gqa && strcmp(op, "Attention") != 0) continue;
    gqa |= is_gqa;
    onnx |= !is_gqa;
    uint32_t layout = is_gqa ? (uint32_t)onyx_session_node_attr_int(s, n, "kv_layout", 0) : 0;
    if (!first && layout != m->kv_layout)
      return onyx__genai_fail(out_error, ONYX_STATUS_UNSUPPORTED,
                              "%s: attention nodes disagree on kv_layout (%u and %u)", m->path,
                              m->kv_layout, layout);
    if (first) m->kv_provider = onyx_session_node_provider(s, n);
    m->kv_layout = layout;
    first = false;
  }
  m->attention = gqa && onnx ? "GroupQueryAttention and Attention"
                 : gqa       ? "GroupQueryAttention"
                 : onnx      ? "Attention"
                             : "none found";
  bool share = m->config->search.past_present_share_buffer;
  if (share && onnx)
    return onyx__genai_fail(out_error, ONYX_STATUS_INVALID_CONFIG,
                            "%s: search.past_present_share_buffer is true, but %s's attention is "
                            "ONNX Attention, whose present is concat(past, new): past and present "
                            "cannot be one buffer",
                            m->config->origin, m->path);
  if (!share && m->kv_layout != 0)
    return onyx__genai_fail(out_error, ONYX_STATUS_UNSUPPORTED,
                            "%s: kv_layout %u (seq-major) needs search.past_present_share_buffer",
                            m->path, m->kv_layout);
  m->kv_kind = share ? ONYX_GENAI_KV_SHARED : ONYX_GENAI_KV_CONCAT;
  if (share && m->io.past_length_dim >= 0)
    return onyx__genai_fail(out_error, ONYX_STATUS_UNSUPPORTED,
                            "%s: the past inputs fix their length to %lld; a shared KV buffer "
                            "needs it symbolic",
                            m->path, (long long)m->io.past_length_dim);
  return ONYX_STATUS_OK;
}

void onyx_genai_model_destroy(onyx_genai_model *m) {
  if (m == NULL) return;
  onyx__decoder_io_free(&m->io);
  onyx_session_destroy(m->session);
  onyx_genai_config_destroy(m->config);
  free(m->path);
  free(m);
}

onyx_status onyx_genai_model_open(onyx_runtime *rt, const char *path,
                                  const onyx_genai_model_options *options, onyx_genai_model **out,
                                  onyx_error **out_error) {
  if (rt == NULL || path == NULL || out == NULL ||
      (options && options->struct_size < sizeof(uint32_t)))
    return onyx__genai_fail(out_error, ONYX_STATUS_INVALID_ARGUMENT,
                            "onyx_genai_model_open: runtime, path and out_model are required");
  const onyx_session_options *so =
      options && options->struct_size >=
                     offsetof(onyx_genai_model_options, session) + sizeof options->session
          ? options->session
          : NULL;
  char dir[4096], file[4096], cfg[4200];
  onyx_status st = resolve(path, dir, sizeof dir, file, sizeof file, out_error);
  if (st != ONYX_STATUS_OK) return st;
  onyx_genai_model *m = calloc(1, sizeof *m);
  if (m == NULL) return onyx__genai_fail(out_error, ONYX_STATUS_OUT_OF_MEMORY, "out of memory");
  m->runtime = rt;
  snprintf(cfg, sizeof cfg, "%s/genai_config.json", dir);
  st = onyx_genai_config_load(cfg, &m->config, out_error);
  if (st == ONYX_STATUS_OK) {
    if (file[0] == '\0') snprintf(file, sizeof file, "%s/%s", dir, m->config->filename);
    m->path = dup_text(file);
    if (m->path == NULL)
      st = onyx__genai_fail(out_error, ONYX_STATUS_OUT_OF_MEMORY, "out of memory");
  }
  if (st == ONYX_STATUS_OK) st = onyx_session_create(rt, m->path, so, &m->session, out_error);
  if (st == ONYX_STATUS_OK)
    st = onyx__decoder_io_bind(m->session, m->config, m->path, &m->io, out_error);
  if (st == ONYX_STATUS_OK) st = find_attention(m, out_error);
  if (st != ONYX_STATUS_OK) {
    onyx_genai_model_destroy(m);
    return st;
  }
  *out = m;
  return ONYX_STATUS_OK;
}

void onyx_genai_model_get_info(const onyx_genai_model *m, onyx_genai_model_info *out) {
  uint32_t size = out->struct_size;
  if (m == NULL || size < sizeof(uint32_t)) return;
  onyx_genai_model_info info = {.struct_size = size,
                                .path = m->path,
                                .layers = m->io.layers,
                                .kv_heads = m->io.kv_heads,
                                .head_size = m->io.head_size,
                                .kv_dtype = m->io.kv_dtype,
                                .kv_kind = m->kv_kind,
                                .kv_layout = m->kv_layout,
                                .attention = m->attention,
                                .kv_provider = m->kv_provider,
                                .logits_dtype = m->io.logits_dtype,
                                .vocab_size =
                                    m->io.vocab > 0 ? m->io.vocab : m->config->model.vocab_size,
                                .has_position_ids = m->io.position_ids != SIZE_MAX,
                                .has_attention_mask = m->io.attention_mask != SIZE_MAX,
                                .context_length = m->config->model.context_length};
  memcpy(out, &info, size < sizeof info ? size : sizeof info);
}

const onyx_genai_config *onyx_genai_model_config(const onyx_genai_model *m) {
  return m ? m->config : NULL;
}

onyx_session *onyx_genai_model_session(onyx_genai_model *m) { return m ? m->session : NULL; }
