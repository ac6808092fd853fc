/*
 * onyx-generate: token generation from a decoder in the ONNX Runtime GenAI layout.
 *
 *   onyx-generate MODEL [--config plugins.ini] (--prompt TEXT | --prompt-ids 3,14,15)
 *                 [--max-new-tokens N] [--temperature T] [--top-k K] [--top-p P]
 *                 [--seed S] [--eos ID] [--kv-growth in-place|copy] [--graphs on|off]
 *                 [--fixed-mask] [--profile] [--no-optimize] [--quiet]
 *
 * MODEL is a model file or a folder holding model.onnx. The KV cache is owned by
 * this loop and governed (requester kv_cache): past and present share its buffers,
 * which grow in place (mapped zones) or by copy into capacity buckets. Their layout
 * (BNSH or BSNH) is the one the model's GroupQueryAttention nodes declare in their
 * kv_layout attribute. Before the
 * request starts, its worst case (prompt + max new tokens) is admitted or refused.
 * Where a device provider runs the model and can capture, decode steps are recorded
 * once as a device graph and replayed (--graphs off runs them node by node): their
 * attention mask then spans the whole KV view, zeros after the live tokens, so
 * that every decode step has the same geometry (--fixed-mask does the same without
 * graphs, on any provider: the tokens must not change).
 * Byte-level vocabularies stream text; others stream ids. The last lines give the
 * ids, the speeds, the peak bytes per requester and the KV growth.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "onyx.h"
#include "sampling.h"

typedef struct options {
  const char *model, *config, *prompt, *prompt_ids;
  int64_t max_new, eos, top_k;
  float temperature, top_p;
  uint64_t seed;
  uint32_t kv_layout, kv_growth;
  bool quiet, graphs, fixed_mask, profile;
  bool no_optimize; /* skip the graph optimizations at session creation */
} options;

/* Where each graph input and output of the decoder is. */
typedef struct decoder_io {
  size_t input_ids, attention_mask, position_ids; /* SIZE_MAX when absent */
  size_t layers;
  size_t *past_key, *past_value; /* input index per layer */
  size_t logits;
  size_t *present_key, *present_value; /* output index per layer */
  int64_t kv_heads, head_size;
  uint32_t kv_dtype;
} decoder_io;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int fail(const char *what, onyx_error *e) {
  fprintf(stderr, "onyx-generate: %s: %s: %s\n", what, onyx_status_str(onyx_error_status(e)),
          onyx_error_message(e));
  onyx_error_free(e);
  return 1;
}

static void usage(void) {
  fprintf(stderr,
          "usage: onyx-generate MODEL [--config plugins.ini] (--prompt TEXT | --prompt-ids "
          "1,2,3)\n"
          "       [--max-new-tokens N] [--temperature T] [--top-k K] [--top-p P] [--seed S]\n"
          "       [--eos ID] [--kv-growth in-place|copy] [--graphs on|off] [--fixed-mask]\n"
          "       [--profile] [--no-optimize] [--quiet]\n");
}

/* Parses "k.v" style indices out of names like "past_key_values.3.key". */
static bool layer_of(const char *name, const char *prefix, const char *suffix, size_t *out) {
  size_t pl = strlen(prefix), sl = strlen(suffix), nl = strlen(name);
  if (nl <= pl + sl || strncmp(name, prefix, pl) || strcmp(name + nl - sl, suffix)) return false;
  char *end = NULL;
  unsigned long v = strtoul(name + pl, &end, 10);
  if (end != name + nl - sl) return false;
  *out = v;
  return true;
}

static int find_io(const onyx_session *s, decoder_io *io) {
  memset(io, 0, sizeof *io);
  io->input_ids = io->attention_mask = io->position_ids = io->logits = SIZE_MAX;
  size_t nin = onyx_session_input_count(s), nout = onyx_session_output_count(s), layer;
  for (size_t i = 0; i < nin; ++i) {
    onyx_value_info v = onyx_session_input_info(s, i);
    if (layer_of(v.name, "past_key_values.", ".key", &layer) && layer + 1 > io->layers)
      io->layers = layer + 1;
  }
  io->past_key = calloc(io->layers + 1, sizeof(size_t));
  io->past_value = calloc(io->layers + 1, sizeof(size_t));
  io->present_key = calloc(io->layers + 1, sizeof(size_t));
  io->present_value = calloc(io->layers + 1, sizeof(size_t));
  if (!io->past_key || !io->past_value || !io->present_key || !io->present_value) return -1;
  for (size_t l = 0; l < io->layers; ++l)
    io->past_key[l] = io->past_value[l] = io->present_key[l] = io->present_value[l] = SIZE_MAX;
  for (size_t i = 0; i < nin; ++i) {
    onyx_value_info v = onyx_session_input_info(s, i);
    if (!strcmp(v.name, "input_ids"))
      io->input_ids = i;
    else if (!strcmp(v.name, "attention_mask"))
      io->attention_mask = i;
    else if (!strcmp(v.name, "position_ids"))
      io->position_ids = i;
    else if (layer_of(v.name, "past_key_values.", ".key", &layer)) {
      io->past_key[layer] = i;
      if (v.rank != 4) {
        fprintf(stderr, "onyx-generate: input '%s' must have rank 4 (B, Nkv, past, H)\n", v.name);
        return -1;
      }
      io->kv_heads = v.dims[1];
      io->head_size = v.dims[3];
      io->kv_dtype = v.dtype;
    } else if (layer_of(v.name, "past_key_values.", ".value", &layer) && layer < io->layers) {
      io->past_value[layer] = i;
    } else {
      fprintf(stderr,
              "onyx-generate: unexpected model input '%s' (the GenAI layout has "
              "input_ids, attention_mask, position_ids, past_key_values.N.key/value)\n",
              v.name);
      return -1;
    }
  }
  for (size_t o = 0; o < nout; ++o) {
    onyx_value_info v = onyx_session_output_info(s, o);
    if (!strcmp(v.name, "logits"))
      io->logits = o;
    else if (layer_of(v.name, "present.", ".key", &layer) && layer < io->layers)
      io->present_key[layer] = o;
    else if (layer_of(v.name, "present.", ".value", &layer) && layer < io->layers)
      io->present_value[layer] = o;
  }
  if (io->input_ids == SIZE_MAX || io->attention_mask == SIZE_MAX || io->logits == SIZE_MAX ||
      io->layers == 0 || io->kv_heads <= 0 || io->head_size <= 0) {
    fprintf(stderr, "onyx-generate: the model is not a decoder in the GenAI layout (needs "
                    "input_ids, attention_mask, past_key_values.N.key/value with fixed heads and "
                    "head size, logits)\n");
    return -1;
  }
  for (size_t l = 0; l < io->layers; ++l) {
    if (io->past_key[l] == SIZE_MAX || io->past_value[l] == SIZE_MAX) {
      fprintf(stderr, "onyx-generate: layer %zu lacks a past key or value input\n", l);
      return -1;
    }
  }
  return 0;
}

static int parse_ids(const char *text, int64_t **out, size_t *count) {
  size_t n = 0, cap = 16;
  int64_t *ids = malloc(cap * sizeof *ids);
  const char *p = text;
  while (ids && *p) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    if (end == p || errno || v < 0) {
      free(ids);
      return -1;
    }
    if (n == cap) {
      int64_t *g = realloc(ids, (cap *= 2) * sizeof *ids);
      if (!g) break;
      ids = g;
    }
    ids[n++] = v;
    p = *end == ',' ? end + 1 : end;
    if (*end && *end != ',') {
      free(ids);
      return -1;
    }
  }
  *out = ids;
  *count = n;
  return ids && n > 0 ? 0 : -1;
}

static int parse_args(int argc, char **argv, options *o) {
  *o = (options){.config = getenv("ONYX_CONFIG") ? getenv("ONYX_CONFIG") : "plugins.ini",
                 .max_new = 64,
                 .eos = -1,
                 .top_p = 1.0f,
                 .seed = 42,
                 .graphs = true};
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (a[0] != '-' && o->model == NULL) {
      o->model = a;
      continue;
    }
    if (!strcmp(a, "--no-optimize")) {
      o->no_optimize = true;
      continue;
    }
    if (!strcmp(a, "--quiet") || !strcmp(a, "--fixed-mask") || !strcmp(a, "--profile")) {
      *(a[2] == 'q' ? &o->quiet : a[2] == 'f' ? &o->fixed_mask : &o->profile) = true;
      continue;
    }
    if (v == NULL) {
      fprintf(stderr, "onyx-generate: %s needs a value\n", a);
      return -1;
    }
    ++i;
    if (!strcmp(a, "--config"))
      o->config = v;
    else if (!strcmp(a, "--prompt"))
      o->prompt = v;
    else if (!strcmp(a, "--prompt-ids"))
      o->prompt_ids = v;
    else if (!strcmp(a, "--max-new-tokens"))
      o->max_new = atoll(v);
    else if (!strcmp(a, "--temperature"))
      o->temperature = (float)atof(v);
    else if (!strcmp(a, "--top-k"))
      o->top_k = atoll(v);
    else if (!strcmp(a, "--top-p"))
      o->top_p = (float)atof(v);
    else if (!strcmp(a, "--seed"))
      o->seed = strtoull(v, NULL, 10);
    else if (!strcmp(a, "--eos"))
      o->eos = atoll(v);
    else if (!strcmp(a, "--graphs") && (!strcmp(v, "on") || !strcmp(v, "off")))
      o->graphs = !strcmp(v, "on");
    else if (!strcmp(a, "--kv-growth") && (!strcmp(v, "in-place") || !strcmp(v, "copy")))
      o->kv_growth = !strcmp(v, "copy") ? ONYX_KV_GROWTH_REALLOC : ONYX_KV_GROWTH_IN_PLACE;
    else {
      fprintf(stderr, "onyx-generate: bad option %s %s\n", a, v);
      return -1;
    }
  }
  if (o->model == NULL || (o->prompt == NULL) == (o->prompt_ids == NULL) || o->max_new < 0) {
    usage();
    return -1;
  }
  return 0;
}

/* The model file for MODEL (a file, or a folder with model.onnx). */
static void model_path(const char *model, char *buf, size_t cap) {
  struct stat st;
  if (stat(model, &st) == 0 && S_ISDIR(st.st_mode))
    snprintf(buf, cap, "%s/model.onnx", model);
  else
    snprintf(buf, cap, "%s", model);
}

typedef struct step_buffers {
  onyx_tensor *inputs, *outputs;
  bool *writable, *borrowed;
  int64_t *ids, *mask, *pos;
} step_buffers;

/* Fills the inputs for a step feeding `count` tokens after `past` cached ones. The
 * attention mask spans `mask_len` >= past + count tokens, zeros after the live ones
 * (seqlens_k counts the ones; a fixed length keeps decode steps one geometry). */
static void fill_step(const decoder_io *io, const onyx_kv_cache *kv, step_buffers *b,
                      const int64_t *tokens, int64_t past, int64_t count, int64_t mask_len) {
  int64_t total = past + count;
  for (int64_t i = 0; i < count; ++i) b->ids[i] = tokens[i];
  for (int64_t i = 0; i < mask_len; ++i) b->mask[i] = i < total;
  for (int64_t i = 0; i < count; ++i) b->pos[i] = past + i;
  b->inputs[io->input_ids] =
      (onyx_tensor){.dtype = ONYX_DTYPE_INT64, .rank = 2, .dims = {1, count}, .data = b->ids};
  b->inputs[io->attention_mask] =
      (onyx_tensor){.dtype = ONYX_DTYPE_INT64, .rank = 2, .dims = {1, mask_len}, .data = b->mask};
  if (io->position_ids != SIZE_MAX)
    b->inputs[io->position_ids] =
        (onyx_tensor){.dtype = ONYX_DTYPE_INT64, .rank = 2, .dims = {1, count}, .data = b->pos};
  for (size_t l = 0; l < io->layers; ++l) {
    onyx_kv_cache_views(kv, (uint32_t)l, &b->inputs[io->past_key[l]],
                        &b->inputs[io->past_value[l]]);
    b->writable[io->past_key[l]] = b->writable[io->past_value[l]] = true;
  }
}

int main(int argc, char **argv) {
  options o;
  if (parse_args(argc, argv, &o) != 0) return 2;
  int64_t *prompt = NULL;
  size_t prompt_len = 0;
  if (o.prompt_ids) {
    if (parse_ids(o.prompt_ids, &prompt, &prompt_len) != 0) {
      fprintf(stderr, "onyx-generate: --prompt-ids wants comma-separated ids, got '%s'\n",
              o.prompt_ids);
      return 2;
    }
  } else {
    prompt_len = strlen(o.prompt);
    prompt = malloc((prompt_len + 1) * sizeof *prompt);
    for (size_t i = 0; prompt && i < prompt_len; ++i) prompt[i] = (unsigned char)o.prompt[i];
    if (prompt_len == 0) {
      fprintf(stderr, "onyx-generate: empty prompt\n");
      return 2;
    }
  }
  onyx_runtime *rt = NULL;
  onyx_session *s = NULL;
  onyx_error *e = NULL;
  char path[4096];
  model_path(o.model, path, sizeof path);
  if (onyx_runtime_create(o.config, &rt, &e) != ONYX_STATUS_OK) return fail(o.config, e);
  onyx_session_options so = {.struct_size = sizeof so,
                             .profile = o.profile,
                             .disable_optimizations = o.no_optimize ? "all" : NULL};
  if (onyx_session_create(rt, path, &so, &s, &e) != ONYX_STATUS_OK) return fail(path, e);
  decoder_io io;
  if (find_io(s, &io) != 0) return 1;

  /* The KV cache lives where attention runs, in the layout attention declares. */
  const char *kv_provider = NULL;
  bool first = true;
  for (size_t n = 0; n < onyx_session_node_count(s); ++n) {
    if (strcmp(onyx_session_node_op(s, n), "GroupQueryAttention") != 0) continue;
    uint32_t layout = (uint32_t)onyx_session_node_attr_int(s, n, "kv_layout", 0);
    if (!first && layout != o.kv_layout) {
      fprintf(stderr, "onyx-generate: GroupQueryAttention nodes disagree on kv_layout\n");
      return 1;
    }
    if (first) kv_provider = onyx_session_node_provider(s, n);
    o.kv_layout = layout;
    first = false;
  }
  int64_t max_total = (int64_t)prompt_len + o.max_new;
  onyx_kv_cache_options ko = {.struct_size = sizeof ko,
                              .layers = (uint32_t)io.layers,
                              .batch = 1,
                              .kv_heads = io.kv_heads,
                              .head_size = io.head_size,
                              .dtype = io.kv_dtype,
                              .layout = o.kv_layout,
                              .max_length = max_total,
                              .growth = o.kv_growth,
                              .provider = kv_provider};
  onyx_kv_cache *kv = NULL;
  if (onyx_kv_cache_create(rt, &ko, &kv, &e) != ONYX_STATUS_OK) return fail("KV cache", e);

  /* Admission: the whole request's KV, before anything runs. */
  if (onyx_kv_cache_check(kv, max_total, &e) != ONYX_STATUS_OK)
    return fail("admission refused (prompt + max new tokens)", e);

  /* A fixed mask spans the KV views, which may be longer than the request (in place,
   * they are rounded up to whole granules; by copy, they never exceed it). */
  onyx_kv_cache_stats kv0;
  onyx_kv_cache_get_stats(kv, &kv0);
  int64_t mask_cap = kv0.view_length > max_total ? kv0.view_length : max_total;
  size_t nin = onyx_session_input_count(s), nout = onyx_session_output_count(s);
  step_buffers b = {.inputs = calloc(nin, sizeof(onyx_tensor)),
                    .outputs = calloc(nout, sizeof(onyx_tensor)),
                    .writable = calloc(nin, sizeof(bool)),
                    .borrowed = calloc(nout, sizeof(bool)),
                    .ids = malloc((size_t)max_total * sizeof(int64_t)),
                    .mask = malloc((size_t)mask_cap * sizeof(int64_t)),
                    .pos = malloc((size_t)max_total * sizeof(int64_t))};
  int64_t *generated = malloc(((size_t)o.max_new + 1) * sizeof(int64_t));
  if (!b.inputs || !b.outputs || !b.writable || !b.borrowed || !b.ids || !b.mask || !b.pos ||
      !generated) {
    fprintf(stderr, "onyx-generate: out of memory\n");
    return 1;
  }
  onyx_run_options ro = {
      .struct_size = sizeof ro, .writable_inputs = b.writable, .out_borrowed = b.borrowed};
  onyx_graph_stats gs = {.struct_size = sizeof gs};
  onyx_session_graph_stats(s, &gs);
  const bool graphs = o.graphs && gs.available;
  sampler smp;
  bool sampler_ready = false;
  bool byte_vocab = false;
  int64_t past = 0, n_gen = 0;
  double t_prefill = 0, t_decode = 0;
  const int64_t *feed = prompt;
  int64_t feed_len = (int64_t)prompt_len;
  int rc = 0;
  if (!o.quiet && o.prompt) {
    fputs(o.prompt, stdout);
    fflush(stdout);
  }
  while (n_gen < o.max_new) {
    if (onyx_kv_cache_reserve(kv, past + feed_len, &e) != ONYX_STATUS_OK) {
      rc = fail("KV cache growth", e);
      break;
    }
    /* Decode steps with graphs: the mask spans the KV view, one geometry throughout. */
    onyx_kv_cache_stats ks;
    onyx_kv_cache_get_stats(kv, &ks);
    bool decode = past > 0;
    int64_t mask_len = (graphs || o.fixed_mask) && decode ? ks.view_length : past + feed_len;
    ro.capture_graph = graphs && decode;
    fill_step(&io, kv, &b, feed, past, feed_len, mask_len);
    if (past == 0) {
      /* Admission, continued: the prefill's workspace plan must fit too. */
      onyx_plan *plan = NULL;
      if (onyx_session_plan(s, b.inputs, nin, &plan, &e) != ONYX_STATUS_OK ||
          onyx_plan_check(plan, &e) != ONYX_STATUS_OK) {
        onyx_plan_destroy(plan);
        rc = fail("admission refused (prefill workspace)", e);
        break;
      }
      onyx_plan_destroy(plan);
    }
    double t0 = now_s();
    if (onyx_session_run(s, &ro, b.inputs, nin, b.outputs, &e) != ONYX_STATUS_OK) {
      rc = fail(past == 0 ? "prefill" : "decode step", e);
      break;
    }
    double dt = now_s() - t0;
    if (past == 0)
      t_prefill += dt;
    else
      t_decode += dt;
    const onyx_tensor *logits = &b.outputs[io.logits];
    int64_t vocab = logits->dims[logits->rank - 1];
    if (!sampler_ready) {
      if (logits->dtype != ONYX_DTYPE_FLOAT32 ||
          sampler_init(&smp, vocab, o.temperature, o.top_k, o.top_p, o.seed) != 0) {
        fprintf(stderr, "onyx-generate: logits must be float32 (got dtype %u)\n", logits->dtype);
        rc = 1;
        break;
      }
      sampler_ready = true;
      byte_vocab = vocab >= 256 && vocab <= 260 && o.prompt != NULL;
    }
    const float *last = (const float *)logits->data + (feed_len - 1) * vocab;
    int64_t next = sampler_pick(&smp, last);
    for (size_t k = 0; k < nout; ++k)
      if (!b.borrowed[k]) onyx_tensor_data_free(b.outputs[k].data);
    past += feed_len;
    generated[n_gen++] = next;
    if (!o.quiet) {
      if (byte_vocab && next < 256)
        putchar((int)next);
      else
        printf("%s%lld", n_gen > 1 ? " " : "[", (long long)next);
      fflush(stdout);
    }
    if (next == o.eos) break;
    feed = &generated[n_gen - 1];
    feed_len = 1;
  }
  if (!o.quiet) printf("%s\n", byte_vocab ? "" : "]");
  printf("ids:");
  for (int64_t i = 0; i < n_gen; ++i) printf(" %lld", (long long)generated[i]);
  printf("\n");
  if (rc == 0) {
    onyx_kv_cache_stats ks;
    onyx_kv_cache_get_stats(kv, &ks);
    uint64_t peak[ONYX_REQUESTER_COUNT_];
    onyx_runtime_memory_usage(rt, NULL, peak);
    int64_t decoded = n_gen > 1 ? n_gen - 1 : 0;
    printf("prefill: %zu tokens in %.2f ms (%.1f tokens/s); decode: %lld tokens in %.2f ms "
           "(%.1f tokens/s)\n",
           prompt_len, t_prefill * 1e3, t_prefill > 0 ? (double)prompt_len / t_prefill : 0,
           (long long)decoded, t_decode * 1e3, t_decode > 0 ? (double)decoded / t_decode : 0);
    printf("peak bytes:");
    for (uint32_t r = 0; r < ONYX_REQUESTER_COUNT_; ++r)
      printf(" %s=%llu", onyx_requester_name(r), (unsigned long long)peak[r]);
    printf("\nkv cache: %s, %s, capacity %lld tokens, %llu bytes committed, %llu growth "
           "events, %llu bytes moved\n",
           o.kv_layout ? "BSNH" : "BNSH", ks.in_place ? "in place" : "by copy",
           (long long)ks.capacity, (unsigned long long)ks.committed_bytes,
           (unsigned long long)ks.growth_events, (unsigned long long)ks.bytes_moved);
    onyx_session_graph_stats(s, &gs);
    if (!graphs)
      printf("device graphs: off (%s)\n",
             o.graphs ? "no device provider here records graphs" : "--graphs off");
    else
      printf("device graphs: %llu captures, %llu replays, %llu invalidations, %llu reclaims, "
             "%llu refusals%s%s, %llu bytes held\n",
             (unsigned long long)gs.captures, (unsigned long long)gs.replays,
             (unsigned long long)gs.invalidations, (unsigned long long)gs.reclaims,
             (unsigned long long)gs.refusals, gs.last_refusal[0] ? ": " : "", gs.last_refusal,
             (unsigned long long)gs.held_bytes);
  }
  if (o.profile) onyx_session_write_profile(s, stdout);
  if (sampler_ready) sampler_free(&smp);
  free(generated);
  free(b.inputs);
  free(b.outputs);
  free(b.writable);
  free(b.borrowed);
  free(b.ids);
  free(b.mask);
  free(b.pos);
  free(io.past_key);
  free(io.past_value);
  free(io.present_key);
  free(io.present_value);
  free(prompt);
  onyx_kv_cache_destroy(kv);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
  return rc;
}
