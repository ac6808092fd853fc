/*
 * onyx-generate: text from a decoder model folder, as ONNX Runtime GenAI's model
 * builder and mobius write it (genai_config.json beside the model).
 *
 *   onyx-generate MODEL [--config plugins.ini] (--prompt TEXT | --prompt-ids 3,14,15)
 *                 [--max-new-tokens N] [--do-sample | --greedy] [--temperature T]
 *                 [--top-k K] [--top-p P] [--repetition-penalty R] [--seed S]
 *                 [--eos ID[,ID...] | --eos none] [--kv-growth in-place|copy]
 *                 [--graphs on|off] [--fixed-mask] [--profile] [--no-optimize[=PASSES]] [--quiet]
 *
 * MODEL is a model folder, or a model file inside one. The loop is the generation
 * library's (genai/onyx_genai.h): this command parses arguments, turns --prompt into
 * ids with the folder's tokenizer.json (the tokenizer library; bytes for a byte
 * vocabulary without one), streams the generated text (generate_text.c) and prints
 * what happened: the prompt's ids and the generated ids, the search settings used,
 * the speeds, the peak bytes per requester, the KV cache and the device graphs.
 * tokenizer_config.json's eos token stops generation too, unless --eos is given.
 *
 * The config's search section gives the defaults; options override them: without
 * --max-new-tokens the sequence may grow to search.max_length. --temperature,
 * --top-k and --top-p turn sampling on unless --greedy is given; a temperature of 0
 * is greedy.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_lookup.h"
#include "generate_text.h"
#include "onyx_genai.h"

typedef struct options {
  const char *model, *config, *prompt, *prompt_ids, *eos;
  int64_t max_new;    /* 0: up to search.max_length */
  int sample;         /* -1: the config's, 0: greedy, 1: sample */
  bool sampling_knob; /* --temperature, --top-k or --top-p given */
  bool has_temperature, has_top_k, has_top_p, has_penalty, has_seed;
  float temperature, top_p, penalty;
  int64_t top_k;
  uint64_t seed;
  uint32_t kv_growth;
  bool quiet, graphs, fixed_mask, profile;
  bool no_optimize;               /* skip the graph optimizations at session creation */
  const char *no_optimize_passes; /* --no-optimize=PASSES: only these (NULL: all) */
} options;

static void usage(void) {
  fprintf(stderr,
          "usage: onyx-generate MODEL [--config plugins.ini] (--prompt TEXT | --prompt-ids "
          "1,2,3)\n"
          "       [--max-new-tokens N] [--do-sample | --greedy] [--temperature T] [--top-k K]\n"
          "       [--top-p P] [--repetition-penalty R] [--seed S] [--eos ID[,ID...] | none]\n"
          "       [--kv-growth in-place|copy] [--graphs on|off] [--fixed-mask] [--profile]\n"
          "       [--no-optimize[=PASSES]] [--quiet]\n");
}

static int bad_value(const char *option, const char *want, const char *got) {
  fprintf(stderr, "onyx-generate: %s wants %s, got '%s'\n", option, want, got);
  return -1;
}

/* A whole decimal integer in [min, max]; nothing else in the text. */
static int parse_int(const char *option, const char *text, int64_t min, int64_t max,
                     const char *want, int64_t *out) {
  char *end = NULL;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || v < min || v > max || text[0] == ' ')
    return bad_value(option, want, text);
  *out = (int64_t)v;
  return 0;
}

/* A finite number in [min, max] (above min only, when `open_min`). */
static int parse_float(const char *option, const char *text, double min, bool open_min, double max,
                       const char *want, float *out) {
  char *end = NULL;
  errno = 0;
  double v = strtod(text, &end);
  if (end == text || *end != '\0' || errno != 0 || !isfinite(v) || v < min ||
      (open_min && v == min) || v > max || text[0] == ' ')
    return bad_value(option, want, text);
  *out = (float)v;
  return 0;
}

static int parse_seed(const char *text, uint64_t *out) {
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || text[0] < '0' || text[0] > '9')
    return bad_value("--seed", "an integer from 0 to 2^64-1", text);
  *out = v;
  return 0;
}

/* Comma-separated ids ("3,14,15"): each a whole integer >= 0. */
static int parse_ids(const char *option, const char *text, int64_t *ids, size_t cap,
                     size_t *count) {
  size_t n = 0;
  const char *p = text;
  while (*p) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    if (end == p || errno != 0 || v < 0 || (*end != ',' && *end != '\0') || n == cap || *p < '0' ||
        *p > '9')
      return bad_value(option, "comma-separated ids (integers >= 0)", text);
    ids[n++] = v;
    p = *end == ',' ? end + 1 : end;
    if (*end == ',' && *p == '\0') return bad_value(option, "comma-separated ids", text);
  }
  if (n == 0) return bad_value(option, "at least one id", text);
  *count = n;
  return 0;
}

static int parse_flag(const char *a, options *o) {
  if (!strcmp(a, "--quiet"))
    o->quiet = true;
  else if (!strcmp(a, "--fixed-mask"))
    o->fixed_mask = true;
  else if (!strcmp(a, "--profile"))
    o->profile = true;
  else if (!strcmp(a, "--no-optimize"))
    o->no_optimize = true;
  else if (!strncmp(a, "--no-optimize=", 14)) {
    o->no_optimize = true;
    o->no_optimize_passes = a + 14;
  } else if (!strcmp(a, "--do-sample"))
    o->sample = 1;
  else if (!strcmp(a, "--greedy"))
    o->sample = 0;
  else
    return 0;
  return 1;
}

static int parse_valued(const char *a, const char *v, options *o) {
  if (!strcmp(a, "--config")) {
    o->config = v;
  } else if (!strcmp(a, "--prompt")) {
    o->prompt = v;
  } else if (!strcmp(a, "--prompt-ids")) {
    o->prompt_ids = v;
  } else if (!strcmp(a, "--eos")) {
    o->eos = v;
  } else if (!strcmp(a, "--max-new-tokens")) {
    return parse_int(a, v, 1, INT32_MAX, "an integer from 1 to 2147483647", &o->max_new);
  } else if (!strcmp(a, "--temperature")) {
    o->has_temperature = o->sampling_knob = true;
    return parse_float(a, v, 0, false, 1e6, "a finite number from 0 to 1e6", &o->temperature);
  } else if (!strcmp(a, "--top-k")) {
    o->has_top_k = o->sampling_knob = true;
    return parse_int(a, v, 0, INT32_MAX, "an integer from 0 (off) to 2147483647", &o->top_k);
  } else if (!strcmp(a, "--top-p")) {
    o->has_top_p = o->sampling_knob = true;
    return parse_float(a, v, 0, true, 1, "a number in (0, 1]", &o->top_p);
  } else if (!strcmp(a, "--repetition-penalty")) {
    o->has_penalty = true;
    return parse_float(a, v, 0, true, 1e6, "a finite number above 0, at most 1e6 (1: off)",
                       &o->penalty);
  } else if (!strcmp(a, "--seed")) {
    o->has_seed = true;
    return parse_seed(v, &o->seed);
  } else if (!strcmp(a, "--graphs")) {
    if (strcmp(v, "on") && strcmp(v, "off")) return bad_value(a, "on or off", v);
    o->graphs = !strcmp(v, "on");
  } else if (!strcmp(a, "--kv-growth")) {
    if (strcmp(v, "in-place") && strcmp(v, "copy")) return bad_value(a, "in-place or copy", v);
    o->kv_growth = !strcmp(v, "copy") ? ONYX_KV_GROWTH_REALLOC : ONYX_KV_GROWTH_IN_PLACE;
  } else {
    fprintf(stderr, "onyx-generate: unknown option %s\n", a);
    return -1;
  }
  return 0;
}

/* 0: run; 1: --help was printed; -1: refused (the message printed). */
static int parse_args(int argc, char **argv, options *o) {
  *o = (options){.sample = -1, .graphs = true};
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    if (a[0] != '-' && o->model == NULL) {
      o->model = a;
      continue;
    }
    if (parse_flag(a, o)) continue;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage();
      return 1;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "onyx-generate: %s needs a value\n", a);
      return -1;
    }
    if (parse_valued(a, argv[++i], o) != 0) return -1;
  }
  if (o->model == NULL || (o->prompt == NULL) == (o->prompt_ids == NULL)) {
    usage();
    return -1;
  }
  if (o->prompt && o->prompt[0] == '\0') {
    fprintf(stderr, "onyx-generate: empty prompt\n");
    return -1;
  }
  return 0;
}

static int fail(const char *what, onyx_error *e) {
  fprintf(stderr, "onyx-generate: %s%s%s: %s\n", what ? what : "", what ? ": " : "",
          onyx_status_str(onyx_error_status(e)), onyx_error_message(e));
  onyx_error_free(e);
  return 1;
}

/* The options over the model's defaults. */
static int generator_options(const options *o, const onyx_genai_model *m, size_t prompt_len,
                             onyx_generator_options *go) {
  onyx_generator_options_init(m, go);
  onyx_genai_search *s = &go->search;
  if (o->max_new > 0) s->max_length = (int64_t)prompt_len + o->max_new;
  if (o->sample >= 0)
    s->do_sample = o->sample == 1;
  else if (o->sampling_knob)
    s->do_sample = true;
  if (o->has_temperature) s->temperature = o->temperature;
  if (o->has_top_k) s->top_k = o->top_k;
  if (o->has_top_p) s->top_p = o->top_p;
  if (o->has_penalty) s->repetition_penalty = o->penalty;
  if (o->has_seed) go->seed = o->seed;
  go->kv_growth = o->kv_growth;
  go->graphs = o->graphs;
  go->fixed_mask = o->fixed_mask;
  if (o->eos && !strcmp(o->eos, "none")) {
    go->eos_count = 0;
  } else if (o->eos) {
    size_t n = 0;
    if (parse_ids("--eos", o->eos, go->eos, ONYX_GENAI_MAX_EOS, &n) != 0) return -1;
    go->eos_count = (uint32_t)n;
  }
  return 0;
}

static void print_search(const onyx_generator_options *go, size_t prompt_len) {
  const onyx_genai_search *s = &go->search;
  bool greedy = !s->do_sample || s->top_k == 1 || s->temperature <= 0;
  if (greedy)
    printf("search: greedy%s", s->do_sample ? " (sampling with top_k 1 or temperature 0)" : "");
  else
    printf("search: sampling, temperature %g, top_k %lld, top_p %g, seed %llu",
           (double)s->temperature, (long long)s->top_k, (double)s->top_p,
           (unsigned long long)go->seed);
  printf("; max_length %lld (%zu prompt + up to %lld new); repetition_penalty %g; eos",
         (long long)s->max_length, prompt_len, (long long)s->max_length - (long long)prompt_len,
         (double)s->repetition_penalty);
  if (go->eos_count == 0) printf(" none");
  for (uint32_t i = 0; i < go->eos_count; ++i)
    printf("%s%lld", i ? "," : " ", (long long)go->eos[i]);
  printf("\n");
}

static void print_kv(const onyx_genai_model_info *mi, const onyx_generator_stats *gs) {
  const onyx_kv_cache_stats *ks = &gs->kv;
  if (gs->kv_kind == ONYX_GENAI_KV_SHARED)
    printf("kv cache: shared past/present buffer, %s, %s, capacity %lld tokens, %llu bytes "
           "committed, %llu growth events, KV bytes moved %llu\n",
           mi->kv_layout ? "BSNH" : "BNSH", ks->in_place ? "in place" : "by copy",
           (long long)ks->capacity, (unsigned long long)ks->committed_bytes,
           (unsigned long long)ks->growth_events, (unsigned long long)gs->kv_bytes_moved);
  else
    printf("kv cache: present = concat(past, new rows) fed back as past (%s), %llu bytes now, "
           "KV bytes moved %llu (%llu copied by the model into present, %llu copied out of "
           "the runs)\n",
           mi->attention, (unsigned long long)gs->kv_bytes_now,
           (unsigned long long)gs->kv_bytes_moved, (unsigned long long)gs->kv_bytes_model,
           (unsigned long long)gs->kv_bytes_out);
}

static void print_stats(onyx_runtime *rt, onyx_genai_model *m, const onyx_generator *g,
                        const options *o) {
  onyx_genai_model_info mi = {.struct_size = sizeof mi};
  onyx_genai_model_get_info(m, &mi);
  onyx_generator_stats gs = {.struct_size = sizeof gs};
  onyx_generator_get_stats(g, &gs);
  double tp = gs.prefill_seconds, td = gs.decode_seconds;
  printf("prefill: %llu tokens in %.2f ms (%.1f tokens/s); decode: %llu tokens in %.2f ms "
         "(%.1f tokens/s)\n",
         (unsigned long long)gs.prefill_tokens, tp * 1e3,
         tp > 0 ? (double)gs.prefill_tokens / tp : 0, (unsigned long long)gs.decode_tokens,
         td * 1e3, td > 0 ? (double)gs.decode_tokens / td : 0);
  uint64_t peak[ONYX_REQUESTER_COUNT_];
  onyx_runtime_memory_usage(rt, NULL, peak);
  printf("peak bytes:");
  for (uint32_t r = 0; r < ONYX_REQUESTER_COUNT_; ++r)
    printf(" %s=%llu", onyx_requester_name(r), (unsigned long long)peak[r]);
  printf("\n");
  print_kv(&mi, &gs);
  onyx_graph_stats graphs = {.struct_size = sizeof graphs};
  onyx_session_graph_stats(onyx_genai_model_session(m), &graphs);
  if (!gs.graphs)
    printf("device graphs: off (%s)\n", !o->graphs ? "--graphs off"
                                        : gs.kv_kind != ONYX_GENAI_KV_SHARED
                                            ? "a KV cache grown by concatenation changes "
                                              "every step's geometry"
                                            : "no device provider here records graphs");
  else
    printf("device graphs: %llu captures, %llu replays, %llu invalidations, %llu reclaims, "
           "%llu refusals%s%s, %llu bytes held\n",
           (unsigned long long)graphs.captures, (unsigned long long)graphs.replays,
           (unsigned long long)graphs.invalidations, (unsigned long long)graphs.reclaims,
           (unsigned long long)graphs.refusals, graphs.last_refusal[0] ? ": " : "",
           graphs.last_refusal, (unsigned long long)graphs.held_bytes);
}

/* tokenizer_config.json's eos joins the config's, unless --eos chose. */
static void add_eos(const options *o, const onyx_tool_text *text, onyx_generator_options *go) {
  int64_t eos = onyx_tool_text_eos(text);
  if (o->eos || eos < 0 || go->eos_count == ONYX_GENAI_MAX_EOS) return;
  for (uint32_t i = 0; i < go->eos_count; ++i)
    if (go->eos[i] == eos) return;
  go->eos[go->eos_count++] = eos;
}

static void print_ids(const char *what, const int64_t *ids, size_t from, size_t to) {
  printf("%s:", what);
  for (size_t i = from; i < to; ++i) printf(" %lld", (long long)ids[i]);
  printf("\n");
}

static int generate(const options *o, onyx_runtime *rt, onyx_genai_model *m, onyx_tool_text *text,
                    const int64_t *prompt, size_t prompt_len) {
  onyx_generator_options go;
  if (generator_options(o, m, prompt_len, &go) != 0) return 2;
  add_eos(o, text, &go);
  onyx_generator *g = NULL;
  onyx_error *e = NULL;
  if (onyx_generator_create(m, &go, &g, &e) != ONYX_STATUS_OK) return fail(NULL, e);
  if (onyx_generator_append_tokens(g, prompt, prompt_len, &e) != ONYX_STATUS_OK) {
    onyx_generator_destroy(g);
    return fail(NULL, e);
  }
  if (!o->quiet && o->prompt) {
    fputs(o->prompt, stdout);
    fflush(stdout);
  }
  if (!o->quiet) onyx_tool_text_begin(text, prompt, prompt_len, o->prompt == NULL);
  int rc = 0;
  size_t made = 0;
  while (!onyx_generator_is_done(g)) {
    if (onyx_generator_generate_next(g, &e) != ONYX_STATUS_OK) {
      if (!o->quiet && made) onyx_tool_text_end(text);
      rc = fail(NULL, e);
      break;
    }
    if (!o->quiet) onyx_tool_text_put(text, onyx_generator_last_token(g), made);
    ++made;
  }
  if (rc == 0 && !o->quiet) onyx_tool_text_end(text);
  size_t n = 0;
  const int64_t *seq = onyx_generator_sequence(g, &n);
  if (made > 0) {
    print_ids("prompt ids", seq, 0, prompt_len);
    print_ids("ids", seq, prompt_len, n);
  }
  if (rc == 0) {
    print_search(&go, prompt_len);
    print_stats(rt, m, g, o);
  }
  onyx_generator_destroy(g);
  return rc;
}

/* The prompt's ids: --prompt-ids, or --prompt through the model's text side. */
static int prompt_of(const options *o, const onyx_tool_text *text, int64_t **out, size_t *count) {
  if (o->prompt) {
    char why[1024];
    if (onyx_tool_text_encode(text, o->prompt, out, count, why, sizeof why) == 0) return 0;
    fprintf(stderr, "onyx-generate: %s: %s\n", o->model, why);
    return -1;
  }
  size_t cap = strlen(o->prompt_ids) / 2 + 1;
  *out = malloc(cap * sizeof **out);
  if (*out == NULL) fprintf(stderr, "onyx-generate: out of memory\n");
  return *out && parse_ids("--prompt-ids", o->prompt_ids, *out, cap, count) == 0 ? 0 : -1;
}

/* Opens the model's text side and makes the prompt's ids. 0, or 2 (refused). */
static int prepare_text(const options *o, onyx_genai_model *m, onyx_tool_text *text,
                        int64_t **prompt, size_t *prompt_len) {
  onyx_genai_model_info mi = {.struct_size = sizeof mi};
  onyx_genai_model_get_info(m, &mi);
  char why[1024];
  if (onyx_tool_text_open(mi.path, mi.vocab_size, text, why, sizeof why) != 0) {
    /* Ids need no tokenizer: with --prompt-ids an unreadable one only costs the text. */
    fprintf(stderr, "onyx-generate: %s: tokenizer: %s%s\n", o->model, why,
            o->prompt ? "" : " (ids only)");
    if (o->prompt) return 2;
  }
  if (o->prompt == NULL) text->bytes = false; /* ids in, ids out, as before tokenizers */
  return prompt_of(o, text, prompt, prompt_len) == 0 ? 0 : 2;
}

int main(int argc, char **argv) {
  options o;
  int parsed = parse_args(argc, argv, &o);
  if (parsed != 0) return parsed > 0 ? 0 : 2;
  size_t prompt_len = 0;
  int64_t *prompt = NULL;
  if (o.prompt_ids && prompt_of(&o, NULL, &prompt, &prompt_len) != 0) { /* refused early */
    free(prompt);
    return 2;
  }
  free(prompt);
  prompt = NULL;
  char config[4096], why[8192];
  if (onyx_tool_find_config(o.config, config, sizeof config, why, sizeof why)) {
    fprintf(stderr, "onyx-generate: %s\n", why);
    return 2;
  }
  onyx_runtime *rt = NULL;
  onyx_genai_model *m = NULL;
  onyx_tool_text text = {0};
  onyx_error *e = NULL;
  int rc = 1;
  onyx_session_options so = {.struct_size = sizeof so,
                             .profile = o.profile,
                             .disable_optimizations = !o.no_optimize         ? NULL
                                                      : o.no_optimize_passes ? o.no_optimize_passes
                                                                             : "all"};
  onyx_genai_model_options mo = {.struct_size = sizeof mo, .session = &so};
  if (onyx_runtime_create(config, &rt, &e) != ONYX_STATUS_OK)
    rc = fail(config, e);
  else if (onyx_genai_model_open(rt, o.model, &mo, &m, &e) != ONYX_STATUS_OK)
    rc = fail(o.model, e);
  else if ((rc = prepare_text(&o, m, &text, &prompt, &prompt_len)) == 0)
    rc = generate(&o, rt, m, &text, prompt, prompt_len);
  if (m && o.profile) onyx_session_write_profile(onyx_genai_model_session(m), stdout);
  onyx_tool_text_close(&text);
  onyx_genai_model_destroy(m);
  onyx_runtime_destroy(rt);
  free(prompt);
  return rc;
}
