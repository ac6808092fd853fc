/*
 * KV strategy: one governed buffer per past/present pair (onyx_kv_cache, booked as
 * kv_cache), passed as a writable past input whose capacity exceeds the tokens in
 * it. GroupQueryAttention writes the new rows in place and hands the buffer back as
 * present, so a step copies no KV; the buffer grows in place through mapped zones,
 * or by copy into a larger bucket where that is impossible (--kv-growth copy).
 */
#include <stdlib.h>

#include "genai_impl.h"

typedef struct kv_shared {
  onyx__kv base;
  const onyx_genai_model *model;
  onyx_kv_cache *cache;
} kv_shared;

static onyx_status shared_admit(onyx__kv *kv, int64_t length, onyx_error **out_error) {
  kv_shared *k = (kv_shared *)kv;
  onyx_error *e = NULL;
  if (onyx_kv_cache_check(k->cache, length, &e) == ONYX_STATUS_OK) return ONYX_STATUS_OK;
  return onyx__genai_wrap(out_error, "admission refused (prompt + max new tokens)", e);
}

static onyx_status shared_bind(onyx__kv *kv, onyx__step *step, onyx_error **out_error) {
  kv_shared *k = (kv_shared *)kv;
  const onyx__decoder_io *io = &k->model->io;
  onyx_error *e = NULL;
  if (onyx_kv_cache_reserve(k->cache, step->past + step->count, &e) != ONYX_STATUS_OK)
    return onyx__genai_wrap(out_error, "KV cache growth", e);
  for (uint32_t l = 0; l < io->layers; ++l) {
    onyx_kv_cache_views(k->cache, l, &step->inputs[io->past_key[l]],
                        &step->inputs[io->past_value[l]]);
    step->writable[io->past_key[l]] = step->writable[io->past_value[l]] = true;
  }
  return ONYX_STATUS_OK;
}

/* The new rows are in the cache only if present came back as the cache itself. */
static onyx_status shared_finish(onyx__kv *kv, onyx__step *step, onyx_error **out_error) {
  kv_shared *k = (kv_shared *)kv;
  const onyx__decoder_io *io = &k->model->io;
  const size_t *present[2] = {io->present_key, io->present_value};
  const size_t *past[2] = {io->past_key, io->past_value};
  for (uint32_t l = 0; l < io->layers; ++l) {
    for (int kv_i = 0; kv_i < 2; ++kv_i) {
      size_t o = present[kv_i][l];
      if (step->borrowed[o] && step->outputs[o].data == step->inputs[past[kv_i][l]].data) continue;
      return onyx__genai_fail(out_error, ONYX_STATUS_UNSUPPORTED,
                              "%s: output '%s' was not written in place into its past buffer "
                              "(search.past_present_share_buffer needs attention that shares "
                              "past and present, as GroupQueryAttention does)",
                              k->model->path, onyx_session_output_info(k->model->session, o).name);
    }
  }
  return ONYX_STATUS_OK;
}

static int64_t shared_view_length(const onyx__kv *kv) {
  onyx_kv_cache_stats ks;
  onyx_kv_cache_get_stats(((const kv_shared *)kv)->cache, &ks);
  return ks.view_length;
}

static void shared_stats(const onyx__kv *kv, onyx_generator_stats *out) {
  const kv_shared *k = (const kv_shared *)kv;
  onyx_kv_cache_get_stats(k->cache, &out->kv);
  out->kv_bytes_moved = out->kv.bytes_moved;
  out->kv_bytes_now = out->kv.committed_bytes;
}

static void shared_destroy(onyx__kv *kv) {
  kv_shared *k = (kv_shared *)kv;
  if (k == NULL) return;
  onyx_kv_cache_destroy(k->cache);
  free(k);
}

static const onyx__kv_ops shared_ops = {.name = "shared",
                                        .admit = shared_admit,
                                        .bind = shared_bind,
                                        .finish = shared_finish,
                                        .view_length = shared_view_length,
                                        .stats = shared_stats,
                                        .destroy = shared_destroy};

onyx_status onyx__kv_shared_create(onyx_genai_model *m, int64_t max_length, uint32_t growth,
                                   onyx__kv **out, onyx_error **out_error) {
  kv_shared *k = calloc(1, sizeof *k);
  if (k == NULL) return onyx__genai_fail(out_error, ONYX_STATUS_OUT_OF_MEMORY, "out of memory");
  k->base.ops = &shared_ops;
  k->model = m;
  /* The cache lives where attention runs, in the layout attention declares. */
  onyx_kv_cache_options ko = {.struct_size = sizeof ko,
                              .layers = m->io.layers,
                              .batch = 1,
                              .kv_heads = m->io.kv_heads,
                              .head_size = m->io.head_size,
                              .dtype = m->io.kv_dtype,
                              .layout = m->kv_layout,
                              .max_length = max_length,
                              .growth = growth,
                              .provider = m->kv_provider};
  onyx_error *e = NULL;
  if (onyx_kv_cache_create(m->runtime, &ko, &k->cache, &e) != ONYX_STATUS_OK) {
    free(k);
    return onyx__genai_wrap(out_error, "KV cache", e);
  }
  *out = &k->base;
  return ONYX_STATUS_OK;
}
