/*
 * onyx-run: run a model, an ONNX backend test directory, or a folder of them.
 *
 *   onyx-run [--config plugins.ini] [--placement] [--plan] [--memory] [--rtol R]
 *            [--atol A] [--bench N] [--graphs] [--conformance] [--skip FILE] [-q] PATH...
 *
 * --bench N times N runs of each data set after checking it, or of a model file's
 * random inputs (median and best).
 * --graphs asks those runs to be recorded once as a device graph and replayed
 * (docs/graphs.md) and says what happened.
 * --profile prints each session's per-node times (first run and total) at its end.
 * --writable a,b lets kernels update those inputs in place and return them as outputs
 * (a shared past/present KV buffer), as a decoder loop does.
 * --no-optimize skips the graph optimizations at session creation (--no-optimize=a,b
 * only those passes); --optimizations lists the passes, and with a PATH says what
 * each did (docs/optimizations.md).
 *
 * PATH is a test directory (model.onnx + test_data_set_N/), a model file (run on
 * random inputs), or with --conformance a folder of test directories: every test
 * whose nodes the loaded providers claim is run, the rest are counted as not
 * claimed. Ends with "N passed, M failed"; the exit status is 1 when anything
 * failed.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "checked_math.h"
#include "config_lookup.h"
#include "graph.h"
#include "onyx.h"
#include "tensor_compare.h"
#include "untrusted_file.h"

typedef struct options {
  const char *config;
  bool placement, memory, conformance, quiet, plan;
  double rtol, atol;    /* < 0: the dtype's default */
  int bench;            /* > 0: time this many runs of each data set after checking it */
  bool graphs;          /* the timed runs ask for device graphs */
  bool profile;         /* per-node times of each session's runs */
  const char *writable; /* comma-separated input names kernels may update in place */
  const char *skip_file;
  char *skip_text;         /* the skip file, read once when the options are parsed */
  const char *no_optimize; /* passes to skip (disable_optimizations), NULL: none */
  bool optimizations;      /* list the passes, and what each did per session */
} options;

typedef struct counts {
  int passed, failed, unclaimed, skipped;
} counts;

static bool is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted entries of `dir` whose names start with `prefix`; caller frees. */
static char **list_dir(const char *dir, const char *prefix, size_t *out_count) {
  *out_count = 0;
  DIR *d = opendir(dir);
  if (d == NULL) return NULL;
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.' || strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 64;
      char **grown = realloc(names, cap * sizeof *names);
      if (grown == NULL) break;
      names = grown;
    }
    names[n] = strdup(e->d_name);
    if (names[n]) n++;
  }
  closedir(d);
  if (n) qsort(names, n, sizeof *names, cmp_str);
  *out_count = n;
  return names;
}

static void free_list(char **names, size_t n) {
  for (size_t i = 0; i < n; ++i) free(names[i]);
  free(names);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void report_error(const char *what, onyx_error *e) {
  fprintf(stderr, "%s: %s: %s\n", what, onyx_status_str(onyx_error_status(e)),
          onyx_error_message(e));
}

/* Prints the workspace plan for these inputs and whether the governor can admit it. */
static void print_plan(onyx_session *s, const onyx_tensor *inputs, size_t n) {
  onyx_plan *plan = NULL;
  onyx_error *e = NULL;
  if (onyx_session_plan(s, inputs, n, &plan, &e) != ONYX_STATUS_OK) {
    fprintf(stderr, "plan: %s: %s\n", onyx_status_str(onyx_error_status(e)), onyx_error_message(e));
    onyx_error_free(e);
    return;
  }
  onyx_plan_print(plan, stdout);
  if (onyx_plan_check(plan, &e) == ONYX_STATUS_OK) {
    printf("  admission: fits\n");
  } else {
    printf("  admission: refused: %s\n", onyx_error_message(e));
    onyx_error_free(e);
  }
  onyx_plan_destroy(plan);
}

/* Is `name` in the comma-separated `list`? */
static bool listed(const char *list, const char *name) {
  size_t len = strlen(name);
  for (const char *p = list; p && *p;) {
    const char *end = strchr(p, ',');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    if (n == len && !strncmp(p, name, n)) return true;
    p = end ? end + 1 : NULL;
  }
  return false;
}

/* Run options for --writable: inputs the kernels may update in place (a shared KV
 * buffer) and outputs handed back as those very buffers, not copies. */
typedef struct run_setup {
  onyx_run_options ro;
  bool *writable, *borrowed;
} run_setup;

static bool run_setup_init(run_setup *rs, const onyx_session *s, const options *o) {
  size_t nin = onyx_session_input_count(s), nout = onyx_session_output_count(s);
  rs->writable = calloc(nin + 1, sizeof(bool));
  rs->borrowed = calloc(nout + 1, sizeof(bool));
  for (size_t i = 0; rs->writable && i < nin; ++i)
    rs->writable[i] = listed(o->writable, onyx_session_input_info(s, i).name);
  rs->ro = (onyx_run_options){
      .struct_size = sizeof rs->ro, .writable_inputs = rs->writable, .out_borrowed = rs->borrowed};
  return rs->writable && rs->borrowed;
}

static void run_setup_free(run_setup *rs) {
  free(rs->writable);
  free(rs->borrowed);
}

/* Frees the outputs of a run except those that are the caller's own buffers. */
static void free_outputs(const run_setup *rs, onyx_tensor *outs, size_t nout) {
  for (size_t i = 0; i < nout; ++i)
    if (!rs->borrowed[i]) onyx_tensor_data_free(outs[i].data);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Times `runs` runs (after two warm-up runs) and prints the median and the best. */
static void bench_runs(onyx_session *s, const run_setup *rs, const onyx_tensor *inputs, size_t nin,
                       size_t nout, int runs, bool graphs) {
  onyx_run_options ro = rs->ro;
  ro.capture_graph = graphs;
  double *ms = calloc((size_t)runs, sizeof *ms);
  onyx_tensor *outs = calloc(nout + 1, sizeof *outs);
  if (ms == NULL || outs == NULL) {
    free(ms);
    free(outs);
    return;
  }
  int done = 0;
  for (int r = -2; r < runs; ++r) {
    onyx_error *e = NULL;
    double t0 = now_s();
    if (onyx_session_run(s, &ro, inputs, nin, outs, &e) != ONYX_STATUS_OK) {
      fprintf(stderr, "bench: %s\n", onyx_error_message(e));
      onyx_error_free(e);
      break;
    }
    double t = (now_s() - t0) * 1e3;
    free_outputs(rs, outs, nout);
    if (r >= 0) ms[done++] = t;
  }
  if (done > 0) {
    qsort(ms, (size_t)done, sizeof *ms, cmp_double);
    printf("bench: median %.4f ms, best %.4f ms over %d runs\n", ms[done / 2], ms[0], done);
  }
  if (graphs) {
    onyx_graph_stats g = {.struct_size = sizeof g};
    onyx_session_graph_stats(s, &g);
    printf("bench: device graphs %s: %llu captures, %llu replays, %llu refusals%s%s\n",
           g.available ? "available" : "not available", (unsigned long long)g.captures,
           (unsigned long long)g.replays, (unsigned long long)g.refusals,
           g.last_refusal[0] ? ": " : "", g.last_refusal);
  }
  free(ms);
  free(outs);
}

/* Runs one test_data_set_N folder; prints per-output errors; true when all match. */
static bool run_data_set(onyx_session *s, const char *set_dir, const options *o) {
  size_t nin = onyx_session_input_count(s), nout = onyx_session_output_count(s);
  onyx_tensor *inputs = calloc(nin + 1, sizeof *inputs);
  onyx_tensor *wants = calloc(nout + 1, sizeof *wants);
  onyx_tensor *gots = calloc(nout + 1, sizeof *gots);
  run_setup rs;
  bool ok = run_setup_init(&rs, s, o) && inputs && wants && gots;
  char path[4096], err[1024];
  for (size_t i = 0; ok && i < nin; ++i) {
    snprintf(path, sizeof path, "%s/input_%zu.pb", set_dir, i);
    if (onyx__tensor_proto_load_file(path, &inputs[i], NULL, err, sizeof err) != ONYX_STATUS_OK) {
      fprintf(stderr, "  %s\n", err);
      ok = false;
    }
  }
  for (size_t i = 0; ok && i < nout; ++i) {
    snprintf(path, sizeof path, "%s/output_%zu.pb", set_dir, i);
    if (onyx__tensor_proto_load_file(path, &wants[i], NULL, err, sizeof err) != ONYX_STATUS_OK) {
      fprintf(stderr, "  %s\n", err);
      ok = false;
    }
  }
  bool ran = false;
  if (ok && o->plan) print_plan(s, inputs, nin);
  if (ok) {
    onyx_error *e = NULL;
    if (onyx_session_run(s, &rs.ro, inputs, nin, gots, &e) != ONYX_STATUS_OK) {
      fprintf(stderr, "  %s: run failed: %s: %s\n", set_dir, onyx_status_str(onyx_error_status(e)),
              onyx_error_message(e));
      onyx_error_free(e);
      ok = false;
    } else {
      ran = true;
    }
  }
  for (size_t i = 0; ran && i < nout; ++i) {
    double rtol, atol;
    tensor_default_tolerance(wants[i].dtype, &rtol, &atol);
    if (o->rtol >= 0) rtol = o->rtol;
    if (o->atol >= 0) atol = o->atol;
    tensor_diff d = tensor_compare(&gots[i], &wants[i], rtol, atol);
    const char *name = onyx_session_output_info(s, i).name;
    if (!d.ok) ok = false;
    if (!d.ok || !o->quiet) {
      if (d.why[0]) {
        fprintf(stderr, "  %s output %zu '%s': MISMATCH %s\n", set_dir, i, name, d.why);
      } else {
        fprintf(d.ok ? stdout : stderr, "  %s output %zu '%s': %s worst abs %.3g rel %.3g%s",
                set_dir, i, name, d.ok ? "ok" : "MISMATCH", d.worst_abs, d.worst_rel,
                d.ok ? "\n" : "");
        if (!d.ok)
          fprintf(stderr, " (%lld of %lld elements; first at %lld: got %.9g want %.9g)\n",
                  (long long)d.mismatches, (long long)onyx_tensor_numel(&wants[i]),
                  (long long)d.first_bad, d.first_got, d.first_want);
      }
    }
  }
  if (ran && o->bench > 0) bench_runs(s, &rs, inputs, nin, nout, o->bench, o->graphs);
  if (ran) free_outputs(&rs, gots, nout);
  for (size_t i = 0; i < nin; ++i) free(inputs[i].data);
  for (size_t i = 0; i < nout; ++i) free(wants[i].data);
  run_setup_free(&rs);
  free(inputs);
  free(wants);
  free(gots);
  return ok;
}

static void print_bytes(const char *what, uint64_t b) {
  if (b >= (1u << 20))
    printf("%s %.1f MiB", what, (double)b / (1 << 20));
  else
    printf("%s %llu bytes", what, (unsigned long long)b);
}

/* What each optimization pass did to the session's graph. */
static void print_optimizations(onyx_runtime *rt, const onyx_session *s, const char *path) {
  printf("optimizations of %s:\n", path);
  for (size_t i = 0; i < onyx_optimization_count(); ++i) {
    onyx_optimization_stats st = {.struct_size = sizeof st};
    if (onyx_session_optimization_stats(s, i, &st) != ONYX_STATUS_OK) continue;
    printf("  %-22s ", onyx_optimization_name(i));
    if (!st.ran) {
      printf("disabled\n");
      continue;
    }
    printf("removed %llu nodes", (unsigned long long)st.nodes_removed);
    if (st.nodes_folded) printf(" (%llu folded)", (unsigned long long)st.nodes_folded);
    if (st.nodes_skipped) printf(", left %llu", (unsigned long long)st.nodes_skipped);
    print_bytes(",", st.bytes_added);
    print_bytes(" added,", st.bytes_released);
    print_bytes(" released; weights peak", st.weights_peak_bytes);
    printf(" (%.2f ms)\n", st.milliseconds);
  }
  uint64_t used[ONYX_REQUESTER_COUNT_], peak[ONYX_REQUESTER_COUNT_];
  onyx_runtime_memory_usage(rt, used, peak);
  print_bytes("  weights booked now", used[ONYX_REQUESTER_WEIGHTS]);
  print_bytes(", governor peak", peak[ONYX_REQUESTER_WEIGHTS]);
  printf("; %zu nodes remain\n", onyx_session_node_count(s));
}

static void list_optimizations(void) {
  for (size_t i = 0; i < onyx_optimization_count(); ++i)
    printf("%-22s %s\n", onyx_optimization_name(i), onyx_optimization_description(i));
}

/* Runs one ONNX test directory. Returns 1 pass, 0 fail, -1 not claimed. */
static int run_test_dir(onyx_runtime *rt, const char *dir, const options *o, bool claim_only) {
  char model[4096];
  snprintf(model, sizeof model, "%s/model.onnx", dir);
  onyx_session_options so = {.struct_size = sizeof so,
                             .print_placement = o->placement,
                             .profile = o->profile,
                             .disable_optimizations = o->no_optimize};
  onyx_session *s = NULL;
  onyx_error *e = NULL;
  if (onyx_session_create(rt, model, &so, &s, &e) != ONYX_STATUS_OK) {
    bool unclaimed = onyx_error_status(e) == ONYX_STATUS_UNSUPPORTED ||
                     onyx_error_status(e) == ONYX_STATUS_INVALID_MODEL;
    if (claim_only && unclaimed) {
      if (!o->quiet) printf("%s: not claimed: %s\n", dir, onyx_error_message(e));
      onyx_error_free(e);
      return -1;
    }
    report_error(model, e);
    onyx_error_free(e);
    return 0;
  }
  if (o->optimizations) print_optimizations(rt, s, dir);
  size_t nsets = 0;
  char **sets = list_dir(dir, "test_data_set_", &nsets);
  bool ok = nsets > 0;
  if (nsets == 0) fprintf(stderr, "%s: no test_data_set_N folders\n", dir);
  for (size_t i = 0; i < nsets; ++i) {
    char set_dir[4096];
    snprintf(set_dir, sizeof set_dir, "%s/%s", dir, sets[i]);
    if (!run_data_set(s, set_dir, o)) ok = false;
  }
  free_list(sets, nsets);
  if (o->profile) onyx_session_write_profile(s, stdout);
  onyx_session_destroy(s);
  printf("%s: %s\n", dir, ok ? "PASS" : "FAIL");
  return ok ? 1 : 0;
}

/* Random inputs larger than this are refused rather than allocated and filled. */
#define RANDOM_INPUT_MAX_BYTES (UINT64_C(1) << 30)

/* Fills a host tensor with fresh random values fitting its dtype; false with the
 * reason in `why` when the model's dims make that impossible. */
static bool random_tensor(const onyx_value_info *info, onyx_tensor *t, char *why, size_t cap) {
  memset(t, 0, sizeof *t);
  t->dtype = info->dtype;
  t->rank = info->rank < 0 ? 0 : (uint32_t)info->rank;
  for (uint32_t d = 0; d < t->rank && d < ONYX_MAX_RANK; ++d)
    t->dims[d] = info->dims[d] < 0 ? 1 : info->dims[d];
  size_t esz = onyx_dtype_size(t->dtype);
  uint64_t bytes = 0;
  if (esz == 0) {
    snprintf(why, cap, "its dtype %s has no fixed element size", dtype_to_string(t->dtype));
    return false;
  }
  bool over = onyx__ckd_tensor_bytes(&bytes, t);
  if (over || bytes > RANDOM_INPUT_MAX_BYTES) {
    char desc[200], size[32] = "more than 2^63";
    if (!over) snprintf(size, sizeof size, "%llu", (unsigned long long)bytes);
    snprintf(why, cap, "%s is %s bytes; a random input may have at most %llu",
             tensor_describe(t, desc, sizeof desc), size,
             (unsigned long long)RANDOM_INPUT_MAX_BYTES);
    return false;
  }
  int64_t n = onyx_tensor_numel(t);
  t->data = malloc(bytes ? (size_t)bytes : 1);
  if (t->data == NULL) {
    snprintf(why, cap, "out of memory for %llu bytes", (unsigned long long)bytes);
    return false;
  }
  for (int64_t i = 0; i < n; ++i) {
    double u = (double)rand() / RAND_MAX;
    switch (t->dtype) {
    case ONYX_DTYPE_FLOAT32:
      ((float *)t->data)[i] = (float)(2 * u - 1);
      break;
    case ONYX_DTYPE_FLOAT64:
      ((double *)t->data)[i] = 2 * u - 1;
      break;
    case ONYX_DTYPE_INT64:
      ((int64_t *)t->data)[i] = (int64_t)(u * 8);
      break;
    case ONYX_DTYPE_INT32:
      ((int32_t *)t->data)[i] = (int32_t)(u * 8);
      break;
    default:
      memset((char *)t->data + i * (int64_t)esz, (int)(u * 255) & 0x3f, esz);
      break;
    }
  }
  return true;
}

static int run_model(onyx_runtime *rt, const char *path, const options *o) {
  onyx_session_options so = {.struct_size = sizeof so,
                             .print_placement = o->placement,
                             .profile = o->profile,
                             .disable_optimizations = o->no_optimize};
  onyx_session *s = NULL;
  onyx_error *e = NULL;
  if (onyx_session_create(rt, path, &so, &s, &e) != ONYX_STATUS_OK) {
    report_error(path, e);
    onyx_error_free(e);
    return 0;
  }
  if (o->optimizations) print_optimizations(rt, s, path);
  size_t nin = onyx_session_input_count(s), nout = onyx_session_output_count(s);
  onyx_tensor *inputs = calloc(nin + 1, sizeof *inputs), *outs = calloc(nout + 1, sizeof *outs);
  bool ok = inputs && outs;
  for (size_t i = 0; ok && i < nin; ++i) {
    onyx_value_info info = onyx_session_input_info(s, i);
    char why[400] = "";
    if (!random_tensor(&info, &inputs[i], why, sizeof why)) {
      fprintf(stderr, "%s: cannot make a random value for input '%s': %s\n", path, info.name, why);
      ok = false;
    }
  }
  if (ok && o->plan) print_plan(s, inputs, nin);
  if (ok) {
    double t0 = now_s();
    if (onyx_session_run(s, NULL, inputs, nin, outs, &e) != ONYX_STATUS_OK) {
      report_error(path, e);
      onyx_error_free(e);
      ok = false;
    } else {
      double ms = (now_s() - t0) * 1e3;
      for (size_t i = 0; i < nout; ++i) {
        char desc[160];
        printf("output %zu '%s': %s\n", i, onyx_session_output_info(s, i).name,
               tensor_describe(&outs[i], desc, sizeof desc));
        onyx_tensor_data_free(outs[i].data);
      }
      printf("%s: ran in %.3f ms\n", path, ms);
    }
  }
  run_setup rs;
  if (ok && o->bench > 0 && run_setup_init(&rs, s, o)) {
    bench_runs(s, &rs, inputs, nin, nout, o->bench, o->graphs);
    run_setup_free(&rs);
  }
  for (size_t i = 0; inputs && i < nin; ++i) free(inputs[i].data);
  free(inputs);
  free(outs);
  if (o->profile) onyx_session_write_profile(s, stdout);
  onyx_session_destroy(s);
  return ok ? 1 : 0;
}

/* Whether `name` starts a line of the skip list ("test_name reason..."; # comments);
 * the reason goes to `reason`. */
static bool skipped(const char *list, const char *name, char *reason, size_t cap) {
  size_t name_len = strlen(name);
  for (const char *line = list; line && *line;) {
    const char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    size_t word = strcspn(line, " \t\n");
    if (line[0] != '#' && word == name_len && word <= len && !strncmp(line, name, word)) {
      const char *r = line + word + strspn(line + word, " \t");
      int rest = (int)(len - (size_t)(r - line));
      snprintf(reason, cap, "%.*s", rest > 0 ? rest : 0, r);
      return true;
    }
    line = end ? end + 1 : NULL;
  }
  return false;
}

static void run_conformance(onyx_runtime *rt, const char *root, const options *o, counts *c) {
  size_t n = 0;
  char **tests = list_dir(root, "", &n);
  for (size_t i = 0; i < n; ++i) {
    char dir[4096], model[4200], reason[512];
    snprintf(dir, sizeof dir, "%s/%s", root, tests[i]);
    snprintf(model, sizeof model, "%s/model.onnx", dir);
    if (!is_dir(dir) || !is_file(model)) continue;
    if (skipped(o->skip_text, tests[i], reason, sizeof reason)) {
      printf("%s: SKIP (%s)\n", dir, reason);
      c->skipped++;
      continue;
    }
    int r = run_test_dir(rt, dir, o, true);
    if (r > 0)
      c->passed++;
    else if (r == 0)
      c->failed++;
    else
      c->unclaimed++;
  }
  free_list(tests, n);
}

static void usage(void) {
  fprintf(stderr,
          "usage: onyx-run [--config plugins.ini] [--placement] [--plan] [--memory] [--rtol R]\n"
          "                [--atol A] [--bench N] [--graphs] [--profile] [--writable NAMES]\n"
          "                [--no-optimize[=PASSES]] [--optimizations]\n"
          "                [--conformance] [--skip FILE] [-q] PATH...\n"
          "       onyx-run --optimizations   (lists the graph optimization passes)\n");
}

/* Prints why an option was refused, then the usage; returns the exit status 2. */
static int refuse(const char *fmt, const char *option, const char *value) {
  fprintf(stderr, "onyx-run: ");
  fprintf(stderr, fmt, option, value);
  fprintf(stderr, "\n");
  usage();
  return 2;
}

/* A whole decimal integer in [min, max], nothing else in the text. */
static bool parse_int_in(const char *text, long min, long max, int *out) {
  char *end = NULL;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (end == text || *end != '\0' || errno != 0 || v < min || v > max ||
      !isdigit((unsigned char)text[0]))
    return false;
  *out = (int)v;
  return true;
}

/* A finite number in [0, max], nothing else in the text (NaN and infinities refused). */
static bool parse_tolerance(const char *text, double max, double *out) {
  char *end = NULL;
  errno = 0;
  double v = strtod(text, &end);
  if (end == text || *end != '\0' || errno != 0 || !isfinite(v) || v < 0 || v > max ||
      isspace((unsigned char)text[0]))
    return false;
  *out = v;
  return true;
}

/* Each comma-separated name is an optimization pass (or "all"): NULL when so, else
 * the first one that is not. */
static const char *unknown_pass(const char *list, char *bad, size_t cap) {
  for (const char *p = list;;) {
    const char *end = strchr(p, ',');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    bool known = n == 3 && !strncmp(p, "all", 3);
    for (size_t i = 0; !known && i < onyx_optimization_count(); ++i)
      known = strlen(onyx_optimization_name(i)) == n && !strncmp(p, onyx_optimization_name(i), n);
    if (!known) {
      snprintf(bad, cap, "%.*s", (int)(n > 64 ? 64 : n), p);
      return bad;
    }
    if (end == NULL) return NULL;
    p = end + 1;
  }
}

/* Options may come before, between or after the paths; "--" ends them. Returns -1 to
 * run, else the exit status (0 for --help). */
static int parse_args(int argc, char **argv, options *o, const char **paths, int *path_count) {
  *o = (options){.rtol = -1, .atol = -1};
  *path_count = 0;
  bool options_done = false;
  for (int i = 1; i < argc; ++i) {
    const char *a = argv[i];
    if (options_done || a[0] != '-' || a[1] == '\0') {
      paths[(*path_count)++] = a;
      continue;
    }
    if (!strcmp(a, "--")) {
      options_done = true;
      continue;
    }
    static const char *const valued[] = {"--config", "--bench", "--writable",
                                         "--skip",   "--rtol",  "--atol"};
    bool takes_value = false;
    for (size_t k = 0; k < sizeof valued / sizeof valued[0]; ++k)
      takes_value |= !strcmp(a, valued[k]);
    const char *v = NULL;
    if (takes_value) {
      if (i + 1 >= argc) return refuse("%s needs a value%s", a, "");
      v = argv[++i];
    }
    if (!strcmp(a, "--config")) {
      if (v[0] == '\0') return refuse("%s wants a plugins.ini path, got '%s'", a, v);
      o->config = v;
    } else if (!strcmp(a, "--bench")) {
      if (!parse_int_in(v, 1, 1000000, &o->bench))
        return refuse("%s wants a number of runs from 1 to 1000000, got '%s'", a, v);
    } else if (!strcmp(a, "--rtol") || !strcmp(a, "--atol")) {
      if (!parse_tolerance(v, 1e6, !strcmp(a, "--rtol") ? &o->rtol : &o->atol))
        return refuse("%s wants a finite number from 0 to 1e6, got '%s'", a, v);
    } else if (!strcmp(a, "--writable")) {
      if (v[0] == '\0' || v[0] == ',' || v[strlen(v) - 1] == ',' || strstr(v, ",,"))
        return refuse("%s wants comma-separated input names, got '%s'", a, v);
      o->writable = v;
    } else if (!strcmp(a, "--skip")) {
      /* Read once, through the reader of untrusted files: a FIFO must not hang us. */
      char why[ONYX__FILE_WHY_CAP];
      size_t size = 0;
      free(o->skip_text);
      o->skip_text = NULL;
      if (onyx__file_read_all(v, "", 1u << 20, ONYX_STATUS_INVALID_ARGUMENT, &o->skip_text, &size,
                              why, sizeof why) != ONYX_STATUS_OK)
        return refuse("--skip %s: %s", v, why);
      o->skip_file = v;
    } else if (!strcmp(a, "--placement")) {
      o->placement = true;
    } else if (!strcmp(a, "--memory")) {
      o->memory = true;
    } else if (!strcmp(a, "--plan")) {
      o->plan = true;
    } else if (!strcmp(a, "--graphs")) {
      o->graphs = true;
    } else if (!strcmp(a, "--profile")) {
      o->profile = true;
    } else if (!strcmp(a, "--conformance")) {
      o->conformance = true;
    } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
      o->quiet = true;
    } else if (!strcmp(a, "--no-optimize")) {
      o->no_optimize = "all";
    } else if (!strncmp(a, "--no-optimize=", 14)) {
      char bad[80];
      if (unknown_pass(a + 14, bad, sizeof bad))
        return refuse("%s: '%s' is no optimization pass (onyx-run --optimizations lists them)", a,
                      bad);
      o->no_optimize = a + 14;
    } else if (!strcmp(a, "--optimizations")) {
      o->optimizations = true;
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage();
      return 0;
    } else {
      return refuse("unknown option '%s'%s", a, "");
    }
  }
  if (*path_count == 0 && o->optimizations) {
    list_optimizations();
    return 0;
  }
  if (*path_count == 0) return refuse("no PATH given%s%s", "", "");
  if (o->graphs && o->bench == 0) return refuse("%s needs --bench N%s", "--graphs", "");
  return -1;
}

/* Runs every PATH; the exit status. */
static int run_paths(const options *o, const char *const *paths, int path_count) {
  char config[4096], why[8192];
  if (onyx_tool_find_config(o->config, config, sizeof config, why, sizeof why) != 0) {
    fprintf(stderr, "onyx-run: %s\n", why);
    return 2;
  }
  onyx_runtime *rt = NULL;
  onyx_error *e = NULL;
  if (onyx_runtime_create(config, &rt, &e) != ONYX_STATUS_OK) {
    report_error("onyx-run", e);
    onyx_error_free(e);
    return 2;
  }
  counts c = {0};
  for (int i = 0; i < path_count; ++i) {
    const char *p = paths[i];
    char model[4096];
    snprintf(model, sizeof model, "%s/model.onnx", p);
    if (o->conformance && is_dir(p)) {
      run_conformance(rt, p, o, &c);
    } else if (is_dir(p) && is_file(model)) {
      if (run_test_dir(rt, p, o, false) > 0)
        c.passed++;
      else
        c.failed++;
    } else if (is_file(p)) {
      if (run_model(rt, p, o) > 0)
        c.passed++;
      else
        c.failed++;
    } else {
      fprintf(stderr, "%s: not a model file or ONNX test directory\n", p);
      c.failed++;
    }
  }
  if (o->memory) {
    uint64_t peak[ONYX_REQUESTER_COUNT_];
    onyx_runtime_memory_usage(rt, NULL, peak);
    printf("peak bytes per requester:");
    for (uint32_t r = 0; r < ONYX_REQUESTER_COUNT_; ++r)
      printf(" %s=%llu", onyx_requester_name(r), (unsigned long long)peak[r]);
    printf("\nmemory snapshot: ");
    onyx_runtime_write_memory_json(rt, stdout);
  }
  onyx_runtime_destroy(rt);
  if (o->conformance)
    printf("conformance: %d not claimed by the loaded providers, %d skipped by list\n", c.unclaimed,
           c.skipped);
  printf("%d passed, %d failed\n", c.passed, c.failed);
  if (o->conformance && c.passed + c.failed == 0) {
    fprintf(stderr, "onyx-run: no test ran\n");
    return 1;
  }
  return c.failed ? 1 : 0;
}

int main(int argc, char **argv) {
  options o;
  const char **paths = calloc((size_t)argc + 1, sizeof *paths);
  if (paths == NULL) return 2;
  int path_count = 0;
  int rc = parse_args(argc, argv, &o, paths, &path_count);
  if (rc < 0) rc = run_paths(&o, paths, path_count);
  free(o.skip_text);
  free(paths);
  return rc;
}
