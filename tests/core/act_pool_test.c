/*
 * Activation memory reused within a run (core/act_pool.c) and outputs handed to the
 * caller without a copy (core/executor.c): a freed block goes to the next node that
 * asks for its size, the books never hold more than the run would without the pool,
 * a limit still refuses, and nothing is left booked or allocated afterwards.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "act_pool_impl.h"
#include "config_impl.h"
#include "onyx.h"
#include "test_support.h"

enum { BLOCK = 256 * 1024 };

static onyx__memory *memory_new(void) {
  onyx__memory *m = NULL;
  char err[256];
  assert_int_equal(onyx__memory_create(NULL, &m, err, sizeof err), ONYX_STATUS_OK);
  return m;
}

static uint64_t used_activations(const onyx__memory *m, uint64_t *peak) {
  uint64_t used[ONYX_REQUESTER_COUNT_], peaks[ONYX_REQUESTER_COUNT_];
  onyx__memory_usage(m, used, peaks);
  if (peak) *peak = peaks[ONYX_REQUESTER_ACTIVATIONS];
  return used[ONYX_REQUESTER_ACTIVATIONS];
}

/* A freed block comes back for the same size, the newest first; another size gets
 * fresh memory; small blocks are not kept; drain gives everything back. */
static void same_size_is_reused(void **state) {
  (void)state;
  onyx__memory *m = memory_new();
  onyx__act_pool p;
  onyx__act_pool_init(&p, m);
  char err[256];
  void *a = NULL, *b = NULL, *c = NULL, *d = NULL, *small = NULL;
  assert_int_equal(onyx__act_pool_alloc(&p, BLOCK, "a", &a, err, sizeof err), ONYX_STATUS_OK);
  assert_int_equal(onyx__act_pool_alloc(&p, BLOCK, "b", &b, err, sizeof err), ONYX_STATUS_OK);
  memset(a, 0x5a, BLOCK);
  onyx__act_pool_put(&p, a, BLOCK);
  onyx__act_pool_put(&p, b, BLOCK);
  assert_int_equal(p.pooled, 2 * BLOCK);
  assert_int_equal(used_activations(m, NULL), 2 * BLOCK); /* still booked while pooled */
  assert_int_equal(onyx__act_pool_alloc(&p, BLOCK - 10, "c", &c, err, sizeof err), ONYX_STATUS_OK);
  assert_ptr_equal(c, b); /* the same rounded size, the newest block */
  /* Another size is fresh memory; a (pooled) goes first: live 3 blocks is the new
   * high, and 3 + 1 pooled would pass it. */
  assert_int_equal(onyx__act_pool_alloc(&p, 2 * BLOCK, "d", &d, err, sizeof err), ONYX_STATUS_OK);
  assert_int_equal(p.count, 0);
  assert_int_equal(p.reused, 1);
  assert_int_equal(onyx__act_pool_alloc(&p, 100, "small", &small, err, sizeof err), ONYX_STATUS_OK);
  onyx__act_pool_put(&p, small, 100); /* below the minimum: freed at once */
  assert_int_equal(p.count, 0);
  onyx__act_pool_put(&p, c, BLOCK - 10);
  onyx__act_pool_put(&p, d, 2 * BLOCK);
  assert_int_equal(p.count, 2);
  onyx__act_pool_drain(&p);
  assert_int_equal(p.count, 0);
  assert_int_equal(used_activations(m, NULL), 0);
  onyx__memory_destroy(m);
}

/* live + pooled never exceeds the highest live so far: a fresh block of a new size
 * first frees pooled blocks, oldest first, so the books' peak is the run's own. */
static void pool_stays_under_the_peak(void **state) {
  (void)state;
  onyx__memory *m = memory_new();
  onyx__act_pool p;
  onyx__act_pool_init(&p, m);
  char err[256];
  void *a = NULL, *b = NULL, *c = NULL, *big = NULL;
  assert_int_equal(onyx__act_pool_alloc(&p, BLOCK, "a", &a, err, sizeof err), ONYX_STATUS_OK);
  assert_int_equal(onyx__act_pool_alloc(&p, BLOCK, "b", &b, err, sizeof err), ONYX_STATUS_OK);
  assert_int_equal(onyx__act_pool_alloc(&p, BLOCK, "c", &c, err, sizeof err), ONYX_STATUS_OK);
  onyx__act_pool_put(&p, a, BLOCK);
  onyx__act_pool_put(&p, b, BLOCK);
  /* live 1 block, pooled 2, high 3: a 2-block request must free both pooled blocks
   * (1 + 2 + 2 would pass the new high of 3) */
  assert_int_equal(onyx__act_pool_alloc(&p, 2 * BLOCK, "big", &big, err, sizeof err),
                   ONYX_STATUS_OK);
  assert_int_equal(p.count, 0);
  uint64_t peak = 0;
  assert_int_equal(used_activations(m, &peak), 3 * BLOCK);
  assert_int_equal(peak, 3 * BLOCK);
  onyx__act_pool_put(&p, c, BLOCK);
  onyx__act_pool_put(&p, big, 2 * BLOCK);
  onyx__act_pool_drain(&p);
  assert_int_equal(used_activations(m, NULL), 0);
  onyx__memory_destroy(m);
}

/* A block taken from the pool is booked again, and a cap lowered meanwhile refuses
 * it with the governor's numbers; the refused block is freed, nothing stays booked. */
static void reuse_is_admitted_like_new_memory(void **state) {
  (void)state;
  onyx__memory *m = memory_new();
  onyx__act_pool p;
  onyx__act_pool_init(&p, m);
  char err[512] = "";
  void *a = NULL, *b = NULL;
  assert_int_equal(onyx__act_pool_alloc(&p, BLOCK, "a", &a, err, sizeof err), ONYX_STATUS_OK);
  onyx__act_pool_put(&p, a, BLOCK);
  onyx_gov *gov = onyx__memory_governor(m);
  onyx_gov_tier host;
  assert_int_equal(onyx_gov_tier_find(gov, "host", &host), ONYX_STATUS_OK);
  assert_int_equal(onyx_gov_requester_set_limit(gov, host, ONYX_REQUESTER_ACTIVATIONS, BLOCK / 2),
                   ONYX_STATUS_OK);
  assert_int_equal(onyx__act_pool_alloc(&p, BLOCK, "node 7 Neg output 0", &b, err, sizeof err),
                   ONYX_STATUS_TIER_EXHAUSTED);
  assert_non_null(strstr(err, "node 7 Neg output 0"));
  assert_int_equal(p.count, 0);
  assert_int_equal(used_activations(m, NULL), 0);
  onyx__act_pool_drain(&p);
  onyx__memory_destroy(m);
}

/* ------------------------------------------------------------------ whole runs */

static onyx_runtime *runtime_cpu(const char *governor) {
  char ini[1024];
  snprintf(ini, sizeof ini, "[governor]\n%s\n[provider.cpu]\npath = %s\n", governor, CPU_PROVIDER);
  char *path = write_temp_file(".ini", ini);
  onyx_runtime *rt = NULL;
  onyx_error *e = NULL;
  onyx_status st = onyx_runtime_create(path, &rt, &e);
  if (st != ONYX_STATUS_OK) print_message("%s\n", onyx_error_message(e));
  assert_int_equal(st, ONYX_STATUS_OK);
  remove_temp_file(path);
  return rt;
}

static onyx_session *chain_session(onyx_runtime *rt) {
  onyx_session *s = NULL;
  onyx_error *e = NULL;
  onyx_status st = onyx_session_create(rt, MODELS_DIR "/act_chain.onnx", NULL, &s, &e);
  if (st != ONYX_STATUS_OK) print_message("%s\n", onyx_error_message(e));
  assert_int_equal(st, ONYX_STATUS_OK);
  return s;
}

static void runtime_activations(const onyx_runtime *rt, uint64_t *used, uint64_t *peak) {
  uint64_t u[ONYX_REQUESTER_COUNT_], p[ONYX_REQUESTER_COUNT_];
  onyx_runtime_memory_usage(rt, u, p);
  *used = u[ONYX_REQUESTER_ACTIVATIONS];
  *peak = p[ONYX_REQUESTER_ACTIVATIONS];
}

/* x through seven Negs, v3 kept as an output: three blocks live at most (v3, the
 * value being read, the one being written), reused node after node, whatever the
 * row count; both outputs are the run's own memory, handed over and freed by the
 * caller; the books end at zero. */
static void chain_runs_reuse_and_hand_over(void **state) {
  (void)state;
  onyx_runtime *rt = runtime_cpu("");
  onyx_session *s = chain_session(rt);
  const int64_t rows[] = {64, 16, 64, 65};
  uint64_t seed = 0x243f6a8885a308d3ull ^ (uint64_t)(uintptr_t)rt;
  for (size_t k = 0; k < sizeof rows / sizeof rows[0]; ++k) {
    int64_t n = rows[k] * 1024;
    float *x = malloc((size_t)n * sizeof *x);
    assert_non_null(x);
    for (int64_t i = 0; i < n; ++i) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      x[i] = (float)((double)(seed >> 11) / 9007199254740992.0 * 8.0 - 4.0);
    }
    onyx_tensor in = {.dtype = ONYX_DTYPE_FLOAT32, .rank = 2, .dims = {rows[k], 1024}, .data = x};
    onyx_tensor out[2];
    onyx_error *e = NULL;
    onyx_status st = onyx_session_run(s, NULL, &in, 1, out, &e);
    if (st != ONYX_STATUS_OK) print_message("%s\n", onyx_error_message(e));
    assert_int_equal(st, ONYX_STATUS_OK);
    for (int o = 0; o < 2; ++o) {
      assert_int_equal(out[o].dims[0], rows[k]);
      const float *y = out[o].data;
      for (int64_t i = 0; i < n; ++i)
        if (y[i] != -x[i]) fail_msg("run %zu output %d element %lld", k, o, (long long)i);
    }
    uint64_t used = 0, peak = 0;
    runtime_activations(rt, &used, &peak);
    assert_int_equal(used, 0); /* the outputs left the books with the memory */
    onyx_tensor_data_free(out[0].data);
    onyx_tensor_data_free(out[1].data);
    free(x);
  }
  uint64_t used = 0, peak = 0;
  runtime_activations(rt, &used, &peak);
  assert_int_equal(used, 0);
  assert_int_equal(peak, 3 * 65 * 1024 * sizeof(float)); /* as without the pool */
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
}

/* A cap the chain's three blocks exceed refuses the run with the node named and
 * leaves nothing booked; a run that fits still passes afterwards. */
static void chain_refused_by_a_cap(void **state) {
  (void)state;
  onyx_runtime *rt = runtime_cpu("requester.activations = 600KiB");
  onyx_session *s = chain_session(rt);
  float *x = calloc(64 * 1024, sizeof *x);
  assert_non_null(x);
  for (int i = 0; i < 64 * 1024; ++i) x[i] = (float)(i % 97) - 48.0f;
  onyx_tensor in = {.dtype = ONYX_DTYPE_FLOAT32, .rank = 2, .dims = {64, 1024}, .data = x};
  onyx_tensor out[2];
  onyx_error *e = NULL;
  assert_int_equal(onyx_session_run(s, NULL, &in, 1, out, &e), ONYX_STATUS_TIER_EXHAUSTED);
  assert_non_null(strstr(onyx_error_message(e), "neg_5"));
  onyx_error_free(e);
  uint64_t used = 0, peak = 0;
  runtime_activations(rt, &used, &peak);
  assert_int_equal(used, 0);
  in.dims[0] = 32; /* three blocks of 128 KiB fit */
  e = NULL;
  assert_int_equal(onyx_session_run(s, NULL, &in, 1, out, &e), ONYX_STATUS_OK);
  for (int i = 0; i < 32 * 1024; ++i) assert_true(((float *)out[1].data)[i] == -x[i]);
  onyx_tensor_data_free(out[0].data);
  onyx_tensor_data_free(out[1].data);
  runtime_activations(rt, &used, &peak);
  assert_int_equal(used, 0);
  free(x);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(same_size_is_reused),
      cmocka_unit_test(pool_stays_under_the_peak),
      cmocka_unit_test(reuse_is_admitted_like_new_memory),
      cmocka_unit_test(chain_runs_reuse_and_hand_over),
      cmocka_unit_test(chain_refused_by_a_cap),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
