/*
 * The generation loop: each step feeds the tokens not yet in the KV cache (the
 * prompt, then the last id picked), runs the decoder, and picks the next id from the
 * last row of logits.
 *
 * The request's worst case is admitted before anything runs: the KV cache for
 * max_length tokens when the prompt arrives, the prefill's workspace plan before
 * the first run. A step commits only once everything it produced checked out, so a
 * failed step leaves the sequence and the KV cache as they were.
 *
 * With a shared KV buffer on a device provider that records graphs, decode steps
 * are captured once and replayed; their attention mask then spans the whole KV
 * view, zeros after the live tokens, so that every decode step has one geometry
 * (fixed_mask does the same without graphs).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checked_math.h"
#include "genai_impl.h"

struct onyx_generator {
  onyx_genai_model *model;
  onyx_generator_options opt;
  uint32_t kv_kind;
  onyx__kv *kv;
  onyx__step step;
  size_t nin, nout;
  int64_t *seq;    /* [max_length] prompt and generated ids */
  size_t len, fed; /* ids in seq; ids already in the KV cache */
  int64_t last;    /* last id picked, -1 before the first step */
  bool done, admitted, graphs;
  void *ids, *mask, *pos; /* step inputs, int64 or int32 as the model wants */
  int64_t mask_cap;
  int64_t mask_valid, mask_ones; /* mask[0, valid) holds `ones` ones, then zeros */
  int64_t vocab;                 /* 0 until known */
  float *row;                    /* [vocab] the last logits row, as float */
  onyx__sampler smp;
  bool sampler_ready;
  onyx_generator_stats stats;
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void onyx_generator_options_init(const onyx_genai_model *m, onyx_generator_options *out) {
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  out->search.struct_size = sizeof out->search;
  out->seed = 42;
  out->graphs = true;
  out->kv_growth = ONYX_KV_GROWTH_IN_PLACE;
  if (m == NULL) return;
  onyx_genai_config_search(m->config, &out->search);
  out->eos_count = m->config->model.eos_count;
  memcpy(out->eos, m->config->model.eos_token_ids, sizeof out->eos);
}

/* Every value a caller may set, checked once, naming the field. */
static onyx_status check_options(const onyx_genai_model *m, const onyx_generator_options *o,
                                 onyx_error **out_error) {
  const onyx_genai_search *s = &o->search;
  const char *bad = NULL;
  char why[160] = "";
  int64_t context = m->config->model.context_length;
  if (s->max_length < 1 || s->max_length > context) {
    bad = "search.max_length";
    snprintf(why, sizeof why, "%lld is outside 1..%lld, the model's context_length",
             (long long)s->max_length, (long long)context);
  } else if (!isfinite(s->temperature) || s->temperature < 0) {
    bad = "search.temperature";
    snprintf(why, sizeof why, "%g must be finite and not negative", (double)s->temperature);
  } else if (s->top_k < 0) {
    bad = "search.top_k";
    snprintf(why, sizeof why, "%lld must not be negative", (long long)s->top_k);
  } else if (!(s->top_p > 0 && s->top_p <= 1)) {
    bad = "search.top_p";
    snprintf(why, sizeof why, "%g must be in (0, 1]", (double)s->top_p);
  } else if (!isfinite(s->repetition_penalty) || !(s->repetition_penalty > 0)) {
    bad = "search.repetition_penalty";
    snprintf(why, sizeof why, "%g must be positive and finite", (double)s->repetition_penalty);
  } else if (o->eos_count > ONYX_GENAI_MAX_EOS) {
    bad = "eos_count";
    snprintf(why, sizeof why, "%u is more than %d", o->eos_count, ONYX_GENAI_MAX_EOS);
  } else if (o->kv_growth > ONYX_KV_GROWTH_REALLOC) {
    bad = "kv_growth";
    snprintf(why, sizeof why, "%u is no onyx_kv_growth", o->kv_growth);
  }
  for (uint32_t i = 0; bad == NULL && i < o->eos_count; ++i) {
    if (o->eos[i] >= 0) continue;
    bad = "eos";
    snprintf(why, sizeof why, "id %lld is negative", (long long)o->eos[i]);
  }
  if (bad == NULL && s->past_present_share_buffer && strstr(m->attention, "Attention") &&
      strcmp(m->attention, "GroupQueryAttention") != 0) {
    bad = "search.past_present_share_buffer";
    snprintf(why, sizeof why, "true needs GroupQueryAttention; %s's attention is %s", m->path,
             m->attention);
  }
  if (bad == NULL && !s->past_present_share_buffer && m->kv_layout != 0) {
    bad = "search.past_present_share_buffer";
    snprintf(why, sizeof why, "false needs a head-major KV layout; the model declares kv_layout %u",
             m->kv_layout);
  }
  if (bad == NULL) return ONYX_STATUS_OK;
  return onyx__genai_fail(out_error, ONYX_STATUS_INVALID_ARGUMENT, "generator option %s: %s", bad,
                          why);
}

void onyx_generator_destroy(onyx_generator *g) {
  if (g == NULL) return;
  if (g->kv) g->kv->ops->destroy(g->kv);
  if (g->sampler_ready) onyx__sampler_free(&g->smp);
  free(g->seq);
  free(g->step.inputs);
  free(g->step.outputs);
  free(g->step.writable);
  free(g->step.borrowed);
  free(g->step.kept);
  free(g->ids);
  free(g->mask);
  free(g->pos);
  free(g->row);
  free(g);
}

static onyx_status alloc_buffers(onyx_generator *g, onyx_error **out_error) {
  /* max_length comes from a config or a caller: its byte count is checked, or a
   * wrapped size would leave the loop writing past a small buffer. */
  size_t n = (size_t)g->opt.search.max_length, ids_bytes = 0, mask_bytes = 0;
  size_t mask_n = (size_t)g->mask_cap;
  if ((uint64_t)g->opt.search.max_length > SIZE_MAX || (uint64_t)g->mask_cap > SIZE_MAX ||
      onyx__ckd_array(&ids_bytes, n, sizeof(int64_t)) ||
      onyx__ckd_array(&mask_bytes, mask_n, sizeof(int64_t)))
    return onyx__genai_fail(out_error, ONYX_STATUS_INVALID_ARGUMENT,
                            "search.max_length %lld: its id buffers (%lld tokens of 8 bytes) do "
                            "not fit this machine's address space",
                            (long long)g->opt.search.max_length, (long long)g->mask_cap);
  g->seq = malloc(ids_bytes);
  g->step.inputs = calloc(g->nin + 1, sizeof(onyx_tensor));
  g->step.outputs = calloc(g->nout + 1, sizeof(onyx_tensor));
  g->step.writable = calloc(g->nin + 1, sizeof(bool));
  g->step.borrowed = calloc(g->nout + 1, sizeof(bool));
  g->step.kept = calloc(g->nout + 1, sizeof(bool));
  g->ids = malloc(ids_bytes);
  g->mask = malloc(mask_bytes);
  g->pos = malloc(ids_bytes);
  if (!g->seq || !g->step.inputs || !g->step.outputs || !g->step.writable || !g->step.borrowed ||
      !g->step.kept || !g->ids || !g->mask || !g->pos)
    return onyx__genai_fail(out_error, ONYX_STATUS_OUT_OF_MEMORY,
                            "generator buffers for %zu tokens", n);
  return ONYX_STATUS_OK;
}

onyx_status onyx_generator_create(onyx_genai_model *m, const onyx_generator_options *options,
                                  onyx_generator **out, onyx_error **out_error) {
  if (m == NULL || out == NULL || (options && options->struct_size < sizeof(uint32_t)))
    return onyx__genai_fail(out_error, ONYX_STATUS_INVALID_ARGUMENT,
                            "onyx_generator_create: model and out_generator are required");
  onyx_generator *g = calloc(1, sizeof *g);
  if (g == NULL) return onyx__genai_fail(out_error, ONYX_STATUS_OUT_OF_MEMORY, "out of memory");
  g->model = m;
  onyx_generator_options_init(m, &g->opt);
  if (options) {
    /* An older caller's shorter struct keeps the defaults of the fields it lacks. */
    size_t n = options->struct_size < sizeof g->opt ? options->struct_size : sizeof g->opt;
    memcpy(&g->opt, options, n);
    g->opt.struct_size = sizeof g->opt;
  }
  g->last = -1;
  g->nin = onyx_session_input_count(m->session);
  g->nout = onyx_session_output_count(m->session);
  g->vocab = m->io.vocab > 0 ? m->io.vocab : m->config->model.vocab_size;
  g->kv_kind =
      g->opt.search.past_present_share_buffer ? ONYX_GENAI_KV_SHARED : ONYX_GENAI_KV_CONCAT;
  onyx_status st = check_options(m, &g->opt, out_error);
  if (st == ONYX_STATUS_OK)
    st = g->kv_kind == ONYX_GENAI_KV_SHARED
             ? onyx__kv_shared_create(m, g->opt.search.max_length, g->opt.kv_growth, &g->kv,
                                      out_error)
             : onyx__kv_concat_create(m, &g->kv, out_error);
  if (st == ONYX_STATUS_OK) {
    int64_t view = g->kv->ops->view_length(g->kv);
    g->mask_cap = view > g->opt.search.max_length ? view : g->opt.search.max_length;
    onyx_graph_stats gs = {.struct_size = sizeof gs};
    onyx_session_graph_stats(m->session, &gs);
    g->graphs = g->opt.graphs && gs.available && g->kv_kind == ONYX_GENAI_KV_SHARED;
    st = alloc_buffers(g, out_error);
  }
  if (st != ONYX_STATUS_OK) {
    onyx_generator_destroy(g);
    return st;
  }
  g->stats.kv_kind = g->kv_kind;
  g->stats.graphs = g->graphs;
  *out = g;
  return ONYX_STATUS_OK;
}

onyx_status onyx_generator_append_tokens(onyx_generator *g, const int64_t *ids, size_t count,
                                         onyx_error **out_error) {
  if (g == NULL || (ids == NULL && count > 0) || count == 0)
    return onyx__genai_fail(out_error, ONYX_STATUS_INVALID_ARGUMENT,
                            "onyx_generator_append_tokens: a generator and at least one id");
  size_t max = (size_t)g->opt.search.max_length;
  if (count > max - g->len)
    return onyx__genai_fail(out_error, ONYX_STATUS_INVALID_ARGUMENT,
                            "%zu ids after %zu would pass search.max_length %zu", count, g->len,
                            max);
  for (size_t i = 0; i < count; ++i)
    if (ids[i] < 0 || (g->vocab > 0 && ids[i] >= g->vocab))
      return onyx__genai_fail(out_error, ONYX_STATUS_INVALID_ARGUMENT,
                              "id %lld at position %zu is outside the vocabulary (0..%lld)",
                              (long long)ids[i], g->len + i, (long long)g->vocab - 1);
  if (!g->admitted) {
    onyx_status st = g->kv->ops->admit(g->kv, g->opt.search.max_length, out_error);
    if (st != ONYX_STATUS_OK) return st;
    g->admitted = true;
  }
  memcpy(g->seq + g->len, ids, count * sizeof *ids);
  for (size_t i = 0; g->sampler_ready && i < count; ++i) onyx__sampler_note(&g->smp, ids[i]);
  g->len += count;
  g->done = g->len >= max; /* no room for another id */
  return ONYX_STATUS_OK;
}

static void put_index(void *buf, uint32_t dtype, int64_t i, int64_t v) {
  if (dtype == ONYX_DTYPE_INT32)
    ((int32_t *)buf)[i] = (int32_t)v;
  else
    ((int64_t *)buf)[i] = v;
}

/* The first `mask_len` mask entries as `ones` ones then zeros. The buffer keeps its
 * contents between steps and only what changed is written: with graphs a decode mask
 * spans the whole KV view (thousands of entries) for one new token. */
static void fill_mask(onyx_generator *g, int64_t mask_len, int64_t ones) {
  uint32_t dtype = g->model->io.mask_dtype;
  for (; g->mask_valid < mask_len; ++g->mask_valid) put_index(g->mask, dtype, g->mask_valid, 0);
  int64_t lo = ones < g->mask_ones ? ones : g->mask_ones;
  int64_t hi = ones < g->mask_ones ? g->mask_ones : ones;
  for (int64_t i = lo; i < hi; ++i) put_index(g->mask, dtype, i, i < ones);
  g->mask_ones = ones;
}

/* The step's index inputs: ids, a mask of `mask_len` (ones for live tokens), positions. */
static void fill_inputs(onyx_generator *g, int64_t mask_len) {
  const onyx__decoder_io *io = &g->model->io;
  onyx__step *st = &g->step;
  int64_t total = st->past + st->count;
  for (int64_t i = 0; i < st->count; ++i) {
    put_index(g->ids, io->ids_dtype, i, g->seq[st->past + i]);
    if (io->position_ids != SIZE_MAX) put_index(g->pos, io->pos_dtype, i, st->past + i);
  }
  st->inputs[io->input_ids] =
      (onyx_tensor){.dtype = io->ids_dtype, .rank = 2, .dims = {1, st->count}, .data = g->ids};
  if (io->position_ids != SIZE_MAX)
    st->inputs[io->position_ids] =
        (onyx_tensor){.dtype = io->pos_dtype, .rank = 2, .dims = {1, st->count}, .data = g->pos};
  if (io->attention_mask != SIZE_MAX) {
    fill_mask(g, mask_len, total);
    st->inputs[io->attention_mask] =
        (onyx_tensor){.dtype = io->mask_dtype, .rank = 2, .dims = {1, mask_len}, .data = g->mask};
  }
}

/* The prefill's workspace plan must fit too, before the first kernel. */
static onyx_status admit_prefill(onyx_generator *g, onyx_error **out_error) {
  onyx_plan *plan = NULL;
  onyx_error *e = NULL;
  onyx_status st = onyx_session_plan(g->model->session, g->step.inputs, g->nin, &plan, &e);
  if (st == ONYX_STATUS_OK) st = onyx_plan_check(plan, &e);
  onyx_plan_destroy(plan);
  if (st == ONYX_STATUS_UNSUPPORTED) { /* unplannable graphs are admitted run by run */
    onyx_error_free(e);
    return ONYX_STATUS_OK;
  }
  return st == ONYX_STATUS_OK
             ? st
             : onyx__genai_wrap(out_error, "admission refused (prefill workspace)", e);
}

/* Checks the logits and reads their last row; the sampler starts once vocab is known. */
static onyx_status read_logits(onyx_generator *g, onyx_error **out_error) {
  const onyx_tensor *t = &g->step.outputs[g->model->io.logits];
  int64_t numel = onyx_tensor_numel(t), vocab = t->rank >= 1 ? t->dims[t->rank - 1] : 0;
  if (t->rank < 2 || vocab <= 0 || (g->vocab > 0 && vocab != g->vocab) || numel < vocab)
    return onyx__genai_fail(out_error, ONYX_STATUS_INVALID_MODEL,
                            "%s: logits came back with rank %u and a last dim of %lld (vocabulary "
                            "%lld)",
                            g->model->path, t->rank, (long long)vocab, (long long)g->vocab);
  if (!g->sampler_ready) {
    g->vocab = vocab;
    size_t row_bytes = 0;
    g->row = onyx__ckd_array(&row_bytes, (size_t)vocab, sizeof *g->row) ? NULL : malloc(row_bytes);
    if (g->row == NULL ||
        onyx__sampler_init(&g->smp, vocab, &g->opt.search, g->opt.seed) != ONYX_STATUS_OK)
      return onyx__genai_fail(out_error, ONYX_STATUS_OUT_OF_MEMORY, "sampler for %lld ids",
                              (long long)vocab);
    g->sampler_ready = true;
    for (size_t i = 0; i < g->len; ++i) onyx__sampler_note(&g->smp, g->seq[i]);
  }
  int64_t nan = onyx__logits_row(t, numel / vocab - 1, g->row);
  if (nan > 0)
    return onyx__genai_fail(out_error, ONYX_STATUS_INVALID_MODEL,
                            "%s: %lld of the %lld logits of the last row are NaN", g->model->path,
                            (long long)nan, (long long)vocab);
  return ONYX_STATUS_OK;
}

static void free_outputs(onyx_generator *g) {
  for (size_t k = 0; k < g->nout; ++k)
    if (!g->step.borrowed[k] && !g->step.kept[k]) onyx_tensor_data_free(g->step.outputs[k].data);
}

static bool is_eos(const onyx_generator *g, int64_t id) {
  for (uint32_t i = 0; i < g->opt.eos_count; ++i)
    if (g->opt.eos[i] == id) return true;
  return false;
}

onyx_status onyx_generator_generate_next(onyx_generator *g, onyx_error **out_error) {
  if (g == NULL || g->done || g->fed == g->len)
    return onyx__genai_fail(out_error, ONYX_STATUS_INVALID_ARGUMENT,
                            g == NULL ? "onyx_generator_generate_next: no generator"
                            : g->done ? "the generator is done (an eos id or search.max_length)"
                                      : "no ids to feed: append tokens first");
  onyx__step *st = &g->step;
  st->past = (int64_t)g->fed;
  st->count = (int64_t)(g->len - g->fed);
  memset(st->inputs, 0, g->nin * sizeof *st->inputs);
  memset(st->writable, 0, g->nin * sizeof *st->writable);
  memset(st->borrowed, 0, g->nout * sizeof *st->borrowed);
  memset(st->kept, 0, g->nout * sizeof *st->kept);
  onyx_status status = g->kv->ops->bind(g->kv, st, out_error);
  if (status != ONYX_STATUS_OK) return status;
  bool decode = st->past > 0;
  int64_t view = g->kv->ops->view_length(g->kv);
  int64_t mask_len =
      (g->graphs || g->opt.fixed_mask) && decode && view > 0 ? view : st->past + st->count;
  fill_inputs(g, mask_len);
  if (!decode && (status = admit_prefill(g, out_error)) != ONYX_STATUS_OK) return status;
  onyx_run_options ro = {.struct_size = sizeof ro,
                         .writable_inputs = st->writable,
                         .out_borrowed = st->borrowed,
                         .capture_graph = g->graphs && decode};
  onyx_error *e = NULL;
  double t0 = now_s();
  if (onyx_session_run(g->model->session, &ro, st->inputs, g->nin, st->outputs, &e) !=
      ONYX_STATUS_OK)
    return onyx__genai_wrap(out_error, decode ? "decode step" : "prefill", e);
  double dt = now_s() - t0;
  uint64_t rng = 0;
  int64_t next = -1;
  status = read_logits(g, out_error);
  if (status == ONYX_STATUS_OK) {
    rng = g->smp.rng;
    next = onyx__sampler_pick(&g->smp, g->row);
    status = g->kv->ops->finish(g->kv, st, out_error);
  }
  free_outputs(g);
  if (status != ONYX_STATUS_OK) {
    if (next >= 0) g->smp.rng = rng; /* as if this step had not run */
    return status;
  }
  /* Committed: the fed ids are in the KV cache and the next id joins the sequence. */
  if (decode) {
    g->stats.decode_seconds += dt;
    g->stats.decode_tokens += (uint64_t)st->count;
  } else {
    g->stats.prefill_seconds += dt;
    g->stats.prefill_tokens += (uint64_t)st->count;
  }
  g->fed = g->len;
  g->seq[g->len++] = next;
  g->last = next;
  onyx__sampler_note(&g->smp, next);
  g->done = is_eos(g, next) || g->len >= (size_t)g->opt.search.max_length;
  return ONYX_STATUS_OK;
}

bool onyx_generator_is_done(const onyx_generator *g) { return g == NULL || g->done; }

const int64_t *onyx_generator_sequence(const onyx_generator *g, size_t *out_count) {
  if (out_count) *out_count = g ? g->len : 0;
  return g ? g->seq : NULL;
}

int64_t onyx_generator_last_token(const onyx_generator *g) { return g ? g->last : -1; }

void onyx_generator_get_stats(const onyx_generator *g, onyx_generator_stats *out) {
  uint32_t size = out->struct_size;
  if (g == NULL || size < sizeof(uint32_t)) return;
  onyx_generator_stats s = g->stats;
  g->kv->ops->stats(g->kv, &s);
  s.struct_size = size;
  memcpy(out, &s, size < sizeof s ? size : sizeof s);
}
