/*
 * Plans cached by input geometry (core/plan_cache.c) and a run path without heap
 * allocations of its own (core/executor.c, core/planner.c), on the tiny decoder and
 * the CPU provider: a repeated geometry hits (no plan built), a new one misses, the
 * values planning reads (the attention mask's shape arithmetic) are part of the key,
 * the least recently used geometry goes first, results are bit-identical to runs
 * that plan afresh, a prefill and decode loop fed back its own presents gives the
 * same tokens either way, and a warm run calls malloc, calloc and realloc not once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "onyx.h"
#include "plan_impl.h"
#include "session_impl.h"
#include "test_support.h"

/* ------------------------------------------------------------ a malloc counter */

/* The test binary's malloc, calloc and realloc count their calls while `counting`
 * and hand on to glibc's. Sanitizers interpose the allocator themselves: there the
 * count is not taken (and the test says so). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define COUNTS_MALLOC 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define COUNTS_MALLOC 0
#endif
#endif
#ifndef COUNTS_MALLOC
#define COUNTS_MALLOC 1
#endif

static int counting;
static unsigned long heap_calls;

#if COUNTS_MALLOC
extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *ptr, size_t size);

void *malloc(size_t size) {
  if (__atomic_load_n(&counting, __ATOMIC_RELAXED))
    __atomic_add_fetch(&heap_calls, 1, __ATOMIC_RELAXED);
  return __libc_malloc(size);
}

void *calloc(size_t count, size_t size) {
  if (__atomic_load_n(&counting, __ATOMIC_RELAXED))
    __atomic_add_fetch(&heap_calls, 1, __ATOMIC_RELAXED);
  return __libc_calloc(count, size);
}

void *realloc(void *ptr, size_t size) {
  if (__atomic_load_n(&counting, __ATOMIC_RELAXED))
    __atomic_add_fetch(&heap_calls, 1, __ATOMIC_RELAXED);
  return __libc_realloc(ptr, size);
}
#endif

/* ------------------------------------------------------------ the tiny decoder */

enum { LAYERS = 4, KV_HEADS = 2, HEAD = 32, VOCAB = 256, INPUTS = 2 + 2 * LAYERS };

static onyx_runtime *runtime_cpu(void) {
  char ini[1024];
  snprintf(ini, sizeof ini, "[provider.cpu]\npath = %s\n", CPU_PROVIDER);
  char *path = write_temp_file(".ini", ini);
  onyx_runtime *rt = NULL;
  onyx_error *e = NULL;
  onyx_status st = onyx_runtime_create(path, &rt, &e);
  if (st != ONYX_STATUS_OK) print_message("%s\n", onyx_error_message(e));
  assert_int_equal(st, ONYX_STATUS_OK);
  remove_temp_file(path);
  return rt;
}

static onyx_session *decoder(onyx_runtime *rt) {
  onyx_session *s = NULL;
  onyx_error *e = NULL;
  onyx_status st = onyx_session_create(rt, TINY_DECODER, NULL, &s, &e);
  if (st != ONYX_STATUS_OK) print_message("%s\n", onyx_error_message(e));
  assert_int_equal(st, ONYX_STATUS_OK);
  return s;
}

/* One step's inputs: ids [1, S], a mask of ones [1, P + S] with `masked` leading
 * zeros (left padding), and the past [1, 2, P, 32] per layer (given or drawn). */
typedef struct step {
  int64_t ids[64], mask[128];
  float *past[2 * LAYERS];
  onyx_tensor in[INPUTS];
} step;

static void step_make(step *st, const int64_t *ids, int64_t S, int64_t P, int64_t masked,
                      float *const *past) {
  memset(st, 0, sizeof *st);
  for (int64_t i = 0; i < S; ++i) st->ids[i] = ids[i];
  for (int64_t i = 0; i < P + S; ++i) st->mask[i] = i >= masked;
  st->in[0] = (onyx_tensor){.dtype = ONYX_DTYPE_INT64, .rank = 2, .dims = {1, S}, .data = st->ids};
  st->in[1] =
      (onyx_tensor){.dtype = ONYX_DTYPE_INT64, .rank = 2, .dims = {1, P + S}, .data = st->mask};
  for (int k = 0; k < 2 * LAYERS; ++k) {
    st->past[k] = past ? past[k] : NULL;
    st->in[2 + k] = (onyx_tensor){.dtype = ONYX_DTYPE_FLOAT32,
                                  .rank = 4,
                                  .dims = {1, KV_HEADS, P, HEAD},
                                  .data = st->past[k]};
  }
}

static void run_ok(onyx_session *s, const step *st, onyx_tensor *out) {
  for (size_t i = 0; i < 1 + 2 * LAYERS; ++i) out[i] = (onyx_tensor){0};
  onyx_error *e = NULL;
  onyx_status rs = onyx_session_run(s, NULL, st->in, INPUTS, out, &e);
  if (rs != ONYX_STATUS_OK) print_message("%s\n", onyx_error_message(e));
  assert_int_equal(rs, ONYX_STATUS_OK);
}

static void outputs_free(onyx_tensor *out) {
  for (size_t i = 0; i < 1 + 2 * LAYERS; ++i) onyx_tensor_data_free(out[i].data);
}

static size_t tensor_bytes(const onyx_tensor *t) {
  size_t n = onyx_dtype_size(t->dtype);
  for (uint32_t d = 0; d < t->rank; ++d) n *= (size_t)t->dims[d];
  return n;
}

static void assert_same_outputs(const onyx_tensor *a, const onyx_tensor *b) {
  for (size_t i = 0; i < 1 + 2 * LAYERS; ++i) {
    assert_int_equal(a[i].rank, b[i].rank);
    for (uint32_t d = 0; d < a[i].rank; ++d) assert_int_equal(a[i].dims[d], b[i].dims[d]);
    assert_int_equal(tensor_bytes(&a[i]), tensor_bytes(&b[i]));
    assert_memory_equal(a[i].data, b[i].data, tensor_bytes(&a[i]));
  }
}

static onyx__plan_cache_stats stats(const onyx_session *s) {
  onyx__plan_cache_stats c;
  onyx__plan_cache_stats_get(s, &c);
  return c;
}

static void random_ids(int64_t *ids, int64_t n, unsigned *seed) {
  for (int64_t i = 0; i < n; ++i) ids[i] = 1 + (int64_t)(rand_r(seed) % (VOCAB - 1));
}

/* ------------------------------------------------------------ tests */

/* The same geometry again is a hit, bit-identical to the planned run; another
 * sequence length misses, and so do other values of the small host integer inputs
 * that planning reads (the GQA's sequence lengths are shape arithmetic on the mask). */
static void repeated_geometry_hits(void **state) {
  (void)state;
  onyx_runtime *rt = runtime_cpu();
  onyx_session *s = decoder(rt);
  unsigned seed = 16;
  int64_t ids[16];
  random_ids(ids, 16, &seed);
  step a;
  step_make(&a, ids, 16, 0, 0, NULL);
  onyx_tensor first[1 + 2 * LAYERS], again[1 + 2 * LAYERS];
  run_ok(s, &a, first);
  assert_int_equal(stats(s).builds, 1);
  assert_int_equal(stats(s).hits, 0);
  run_ok(s, &a, again);
  assert_int_equal(stats(s).builds, 1);
  assert_int_equal(stats(s).hits, 1);
  assert_same_outputs(first, again);
  outputs_free(again);
  /* Other token ids: a miss. Planning hands every small host integer value it knows
   * to the kernels' infer, which may read it, so those values are part of the key. */
  random_ids(ids, 16, &seed);
  step b;
  step_make(&b, ids, 16, 0, 0, NULL);
  run_ok(s, &b, again);
  outputs_free(again);
  assert_int_equal(stats(s).builds, 2);
  /* A new sequence length is a miss. */
  step c;
  step_make(&c, ids, 12, 0, 0, NULL);
  uint64_t builds = stats(s).builds;
  run_ok(s, &c, again);
  outputs_free(again);
  assert_int_equal(stats(s).builds, builds + 1);
  /* A left-padded mask of the same shape: the values differ, so the plan may. */
  step d;
  step_make(&d, ids, 16, 0, 3, NULL);
  builds = stats(s).builds;
  run_ok(s, &d, again);
  outputs_free(again);
  assert_int_equal(stats(s).builds, builds + 1);
  outputs_free(first);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
}

/* A few geometries are kept, the least recently used goes first. */
static void least_recently_used_goes(void **state) {
  (void)state;
  onyx_runtime *rt = runtime_cpu();
  onyx_session *s = decoder(rt);
  unsigned seed = 7;
  int64_t ids[16];
  random_ids(ids, 16, &seed);
  onyx_tensor out[1 + 2 * LAYERS];
  step st;
  for (int64_t S = 1; S <= 5; ++S) { /* five lengths through a cache of four */
    step_make(&st, ids, S, 0, 0, NULL);
    run_ok(s, &st, out);
    outputs_free(out);
  }
  assert_int_equal(stats(s).builds, 5);
  assert_int_equal(stats(s).evictions, 1);
  step_make(&st, ids, 5, 0, 0, NULL); /* the newest: kept */
  run_ok(s, &st, out);
  outputs_free(out);
  assert_int_equal(stats(s).hits, 1);
  step_make(&st, ids, 1, 0, 0, NULL); /* the oldest: gone */
  run_ok(s, &st, out);
  outputs_free(out);
  assert_int_equal(stats(s).builds, 6);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
}

/* Greedy next token from logits [1, S, V]: the last position's argmax. */
static int64_t next_token(const onyx_tensor *logits) {
  const float *row = (const float *)logits->data + (logits->dims[1] - 1) * VOCAB;
  int64_t best = 0;
  for (int64_t v = 1; v < VOCAB; ++v)
    if (row[v] > row[best]) best = v;
  return best;
}

/* Prefill then decode steps, each fed the presents of the step before, on `s`;
 * `fresh` drops the cached plans before each run (every run plans afresh). The
 * logits of every step go to `logits` ([steps + 1][VOCAB], the last position). */
static void generate(onyx_session *s, bool fresh, int steps, float *logits) {
  unsigned seed = 3;
  int64_t prompt[10];
  random_ids(prompt, 10, &seed);
  onyx_tensor out[1 + 2 * LAYERS];
  step st;
  step_make(&st, prompt, 10, 0, 0, NULL);
  int64_t P = 0, S = 10;
  float *past[2 * LAYERS] = {0};
  for (int k = 0; k <= steps; ++k) {
    if (fresh) onyx__plan_cache_free(s);
    run_ok(s, &st, out);
    memcpy(logits + (size_t)k * VOCAB,
           (const float *)out[0].data + (size_t)(out[0].dims[1] - 1) * VOCAB,
           VOCAB * sizeof(float));
    int64_t tok = next_token(&out[0]);
    for (int i = 0; i < 2 * LAYERS; ++i) {
      onyx_tensor_data_free(past[i]);
      past[i] = out[1 + i].data; /* present [1, 2, P + S, 32] becomes the past */
    }
    onyx_tensor_data_free(out[0].data);
    P += S;
    S = 1;
    step_make(&st, &tok, 1, P, 0, past);
  }
  for (int i = 0; i < 2 * LAYERS; ++i) onyx_tensor_data_free(past[i]);
}

/* A decode loop gives the same logits, bit for bit, whether plans are cached or not;
 * each decode step's geometry is new (the past grows), so the loop misses. */
static void decode_loop_is_unchanged(void **state) {
  (void)state;
  enum { STEPS = 6 };
  onyx_runtime *rt = runtime_cpu();
  onyx_session *cached = decoder(rt), *fresh = decoder(rt);
  static float a[(STEPS + 1) * VOCAB], b[(STEPS + 1) * VOCAB];
  generate(cached, false, STEPS, a);
  generate(fresh, true, STEPS, b);
  assert_memory_equal(a, b, sizeof a);
  assert_int_equal(stats(cached).builds, STEPS + 1);
  assert_int_equal(stats(cached).hits, 0);
  onyx_session_destroy(cached);
  onyx_session_destroy(fresh);
  onyx_runtime_destroy(rt);
}

/* After warm-up a run of a cached geometry calls malloc, calloc and realloc not
 * once: the executor's arrays are the session's, the plan is the cache's, and what
 * a run does allocate (activations, workspace, the outputs handed over) is governed
 * memory that core/memory.c takes with aligned_alloc and posix_memalign. */
static void warm_run_calls_no_malloc(void **state) {
  (void)state;
  if (!COUNTS_MALLOC) {
    print_message("skipped: a sanitizer owns malloc in this build\n");
    skip();
  }
  onyx_runtime *rt = runtime_cpu();
  onyx_session *s = decoder(rt);
  unsigned seed = 11;
  int64_t ids[4];
  random_ids(ids, 4, &seed);
  static float past_data[2 * LAYERS][KV_HEADS * 20 * HEAD];
  float *past[2 * LAYERS];
  for (int k = 0; k < 2 * LAYERS; ++k) {
    for (size_t i = 0; i < KV_HEADS * 20 * HEAD; ++i)
      past_data[k][i] = (float)rand_r(&seed) / (float)RAND_MAX - 0.5f;
    past[k] = past_data[k];
  }
  /* Prefill-shaped (S = 4 after 20 past tokens) and decode-shaped (S = 1). */
  step steps[2];
  step_make(&steps[0], ids, 4, 20, 0, past);
  step_make(&steps[1], ids, 1, 20, 0, past);
  onyx_tensor out[1 + 2 * LAYERS];
  for (int k = 0; k < 2; ++k) {
    /* Warm-up: the plan is built (the counter sees that), the session's arrays made. */
    __atomic_store_n(&heap_calls, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&counting, 1, __ATOMIC_RELAXED);
    run_ok(s, &steps[k], out);
    __atomic_store_n(&counting, 0, __ATOMIC_RELAXED);
    assert_true(__atomic_load_n(&heap_calls, __ATOMIC_RELAXED) > 0);
    outputs_free(out);
    __atomic_store_n(&heap_calls, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&counting, 1, __ATOMIC_RELAXED);
    onyx_error *e = NULL;
    onyx_status rs = onyx_session_run(s, NULL, steps[k].in, INPUTS, out, &e);
    __atomic_store_n(&counting, 0, __ATOMIC_RELAXED);
    assert_int_equal(rs, ONYX_STATUS_OK);
    unsigned long calls = __atomic_load_n(&heap_calls, __ATOMIC_RELAXED);
    print_message("S = %lld: %lu malloc/calloc/realloc calls in a warm run\n",
                  (long long)steps[k].in[0].dims[1], calls);
    assert_int_equal(calls, 0);
    outputs_free(out);
  }
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
}

/* A cached plan meets SESSION blocks that grew after it was made: on the workspace
 * mock (tests/models/ws_chain.onnx: four nodes, STEP and SESSION regions sized by
 * the sequence), sequence 2, then 4 (the SESSION blocks grow), then 2 again — a hit,
 * which must not grant them again (the plan's SESSION numbers are refitted to the
 * session's blocks) — and the result is right. */
static void hit_after_session_growth(void **state) {
  (void)state;
  char ini[1024];
  snprintf(ini, sizeof ini, "[provider.wsmock]\npath = %s\n", MOCK_WS);
  char *path = write_temp_file(".ini", ini);
  onyx_runtime *rt = NULL;
  onyx_error *e = NULL;
  assert_int_equal(onyx_runtime_create(path, &rt, &e), ONYX_STATUS_OK);
  remove_temp_file(path);
  onyx_session *s = NULL;
  assert_int_equal(onyx_session_create(rt, MODELS_DIR "/ws_chain.onnx", NULL, &s, &e),
                   ONYX_STATUS_OK);
  unsigned seed = 5;
  float x[4 * 8], y[4 * 8];
  void *blocks[16] = {0};
  uint64_t used[ONYX_REQUESTER_COUNT_] = {0}, before = 0;
  static const int64_t seqs[] = {2, 4, 2};
  for (size_t k = 0; k < 3; ++k) {
    for (int i = 0; i < 4 * 8; ++i) x[i] = (float)rand_r(&seed) / (float)RAND_MAX * 8.0f - 4.0f;
    onyx_tensor in = {.dtype = ONYX_DTYPE_FLOAT32, .rank = 3, .dims = {1, seqs[k], 8}, .data = x};
    onyx_tensor out = {0};
    if (k == 2)
      for (size_t i = 0; i < s->graph->node_count && i < 16; ++i)
        blocks[i] = s->nodes[i].session_ws;
    assert_int_equal(onyx_session_run(s, NULL, &in, 1, &out, &e), ONYX_STATUS_OK);
    memcpy(y, out.data, (size_t)seqs[k] * 8 * sizeof(float));
    onyx_tensor_data_free(out.data);
    for (int i = 0; i < seqs[k] * 8; ++i) assert_float_equal(y[i], x[i] + 4.0f, 1e-6);
    onyx_runtime_memory_usage(rt, used, NULL);
    if (k == 1) before = used[ONYX_REQUESTER_WORKSPACE_SESSION];
  }
  assert_int_equal(stats(s).builds, 2);
  assert_int_equal(stats(s).hits, 1);
  assert_int_equal(used[ONYX_REQUESTER_WORKSPACE_SESSION], before);
  for (size_t i = 0; i < s->graph->node_count && i < 16; ++i)
    assert_ptr_equal(blocks[i], s->nodes[i].session_ws); /* kept, not granted again */
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(repeated_geometry_hits),   cmocka_unit_test(least_recently_used_goes),
      cmocka_unit_test(decode_loop_is_unchanged), cmocka_unit_test(warm_run_calls_no_malloc),
      cmocka_unit_test(hit_after_session_growth),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
