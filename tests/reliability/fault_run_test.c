/*
 * Fault injection over a whole run: open the runtime, open the micro decoder
 * (tests/reliability/micro-decoder: one GroupQueryAttention layer), admit and
 * generate a few tokens, close everything — and fail, in turn, the Nth host
 * allocation for every N the run makes, then the Nth governor grant for every N.
 * Each run must end with a clear status (out of memory or tier exhausted, with a
 * message), leave no allocation behind, and leave the governor's books at zero once
 * the model is closed. Both KV growth strategies (in place through mapped zones,
 * and by copy) are covered.
 *
 * The core, the loader, the governor and genai/ are linked in statically, so that
 * -Wl,--wrap routes their malloc, calloc, realloc, aligned_alloc, posix_memalign and
 * free, and their onyx_gov_grant and onyx_gov_zone_prepare, through this file.
 * Allocations inside other libraries (protobuf-c, jansson, libc) are neither failed
 * nor counted; the CPU provider's tensors come through the core and are.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "../core/test_support.h"
#include "onyx.h"
#include "onyx_genai.h"
#include "onyx_governor.h"

/* ------------------------------------------------------------ the wrapped calls */

void *__real_malloc(size_t size);
void *__real_calloc(size_t count, size_t size);
void *__real_realloc(void *ptr, size_t size);
void *__real_aligned_alloc(size_t alignment, size_t size);
int __real_posix_memalign(void **out, size_t alignment, size_t size);
void __real_free(void *ptr);
onyx_status __real_onyx_gov_grant(onyx_gov *gov, onyx_gov_tier tier, onyx_requester requester,
                                  uint64_t bytes, const char *label, onyx_gov_grant_id *out_grant,
                                  onyx_gov_refusal *out_refusal);
onyx_status __real_onyx_gov_zone_prepare(onyx_gov_zone *zone, uint64_t target_bytes,
                                         const char *label, onyx_gov_grant_id *out_grant,
                                         onyx_gov_refusal *out_refusal);

void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t count, size_t size);
void *__wrap_realloc(void *ptr, size_t size);
void *__wrap_aligned_alloc(size_t alignment, size_t size);
int __wrap_posix_memalign(void **out, size_t alignment, size_t size);
void __wrap_free(void *ptr);
onyx_status __wrap_onyx_gov_grant(onyx_gov *gov, onyx_gov_tier tier, onyx_requester requester,
                                  uint64_t bytes, const char *label, onyx_gov_grant_id *out_grant,
                                  onyx_gov_refusal *out_refusal);
onyx_status __wrap_onyx_gov_zone_prepare(onyx_gov_zone *zone, uint64_t target_bytes,
                                         const char *label, onyx_gov_grant_id *out_grant,
                                         onyx_gov_refusal *out_refusal);

enum { KIND_ALLOC = 0, KIND_GRANT = 1 };

/* One countdown per kind: calls to let through before failing one (-1: off). */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long countdown[2] = {-1, -1};
static long calls[2], failed[2];
static bool tracking;

/* Live tracked allocations: an open-addressing set of pointers. */
#define LIVE_CAP (1u << 20)
static void *live[LIVE_CAP];
static long live_count;
static char tombstone;

static size_t slot_of(const void *p) {
  uint64_t x = (uint64_t)(uintptr_t)p;
  x ^= x >> 31;
  x *= 0x9e3779b97f4a7c15ull;
  return (size_t)(x >> 40) & (LIVE_CAP - 1);
}

static void live_add(void *p) {
  if (p == NULL) return;
  for (size_t s = slot_of(p);; s = (s + 1) & (LIVE_CAP - 1)) {
    if (live[s] == NULL || live[s] == &tombstone) {
      live[s] = p;
      live_count++;
      return;
    }
  }
}

/* False when `p` was not allocated through the wrappers (libc's realpath, say). */
static bool live_remove(void *p) {
  if (p == NULL) return false;
  for (size_t s = slot_of(p); live[s] != NULL; s = (s + 1) & (LIVE_CAP - 1)) {
    if (live[s] == p) {
      live[s] = &tombstone;
      live_count--;
      return true;
    }
  }
  return false;
}

/* Counts a call of `kind`; true when this one is to fail. */
static bool inject(int kind) {
  if (!tracking) return false;
  calls[kind]++;
  if (countdown[kind] < 0) return false;
  if (countdown[kind]-- == 0) {
    failed[kind]++;
    countdown[kind] = -1;
    return true;
  }
  return false;
}

void *__wrap_malloc(size_t size) {
  pthread_mutex_lock(&lock);
  void *p = inject(KIND_ALLOC) ? NULL : __real_malloc(size);
  if (tracking) live_add(p);
  pthread_mutex_unlock(&lock);
  return p;
}

void *__wrap_calloc(size_t count, size_t size) {
  pthread_mutex_lock(&lock);
  void *p = inject(KIND_ALLOC) ? NULL : __real_calloc(count, size);
  if (tracking) live_add(p);
  pthread_mutex_unlock(&lock);
  return p;
}

void *__wrap_realloc(void *ptr, size_t size) {
  pthread_mutex_lock(&lock);
  void *p = NULL;
  if (!inject(KIND_ALLOC)) {
    bool known = live_remove(ptr);
    p = __real_realloc(ptr, size);
    if (p == NULL && known) live_add(ptr); /* the old block stays the caller's */
    if (p != NULL && (known || (tracking && ptr == NULL))) live_add(p);
  }
  pthread_mutex_unlock(&lock);
  return p;
}

void *__wrap_aligned_alloc(size_t alignment, size_t size) {
  pthread_mutex_lock(&lock);
  void *p = inject(KIND_ALLOC) ? NULL : __real_aligned_alloc(alignment, size);
  if (tracking) live_add(p);
  pthread_mutex_unlock(&lock);
  return p;
}

int __wrap_posix_memalign(void **out, size_t alignment, size_t size) {
  pthread_mutex_lock(&lock);
  int rc = inject(KIND_ALLOC) ? 12 /* ENOMEM */ : __real_posix_memalign(out, alignment, size);
  if (tracking && rc == 0) live_add(*out);
  pthread_mutex_unlock(&lock);
  return rc;
}

void __wrap_free(void *ptr) {
  pthread_mutex_lock(&lock);
  live_remove(ptr);
  __real_free(ptr);
  pthread_mutex_unlock(&lock);
}

static bool inject_grant(void) {
  pthread_mutex_lock(&lock);
  bool fail = inject(KIND_GRANT);
  pthread_mutex_unlock(&lock);
  return fail;
}

static void refuse(onyx_gov_refusal *r, uint64_t bytes) {
  if (r == NULL) return;
  memset(r, 0, sizeof *r);
  r->struct_size = sizeof *r;
  r->version = 1;
  r->requested = bytes;
  snprintf(r->tier, sizeof r->tier, "%s", "injected");
  r->requester_name = "injected";
}

onyx_status __wrap_onyx_gov_grant(onyx_gov *gov, onyx_gov_tier tier, onyx_requester requester,
                                  uint64_t bytes, const char *label, onyx_gov_grant_id *out_grant,
                                  onyx_gov_refusal *out_refusal) {
  if (inject_grant()) {
    refuse(out_refusal, bytes);
    return ONYX_STATUS_TIER_EXHAUSTED;
  }
  return __real_onyx_gov_grant(gov, tier, requester, bytes, label, out_grant, out_refusal);
}

onyx_status __wrap_onyx_gov_zone_prepare(onyx_gov_zone *zone, uint64_t target_bytes,
                                         const char *label, onyx_gov_grant_id *out_grant,
                                         onyx_gov_refusal *out_refusal) {
  if (inject_grant()) {
    refuse(out_refusal, target_bytes);
    return ONYX_STATUS_TIER_EXHAUSTED;
  }
  return __real_onyx_gov_zone_prepare(zone, target_bytes, label, out_grant, out_refusal);
}

/* ------------------------------------------------------------ the run */

typedef struct outcome {
  onyx_status status;
  char message[1024];
  long leaked;      /* tracked allocations still live after everything was closed */
  uint64_t booked;  /* bytes the governor still booked once the model was closed */
  size_t generated; /* tokens generated */
  int64_t ids[8];   /* the sequence, prompt included */
} outcome;

static char ini_path[512];

static onyx_status fail_with(outcome *o, onyx_status st, onyx_error *e) {
  o->status = st;
  snprintf(o->message, sizeof o->message, "%s", e ? onyx_error_message(e) : "");
  onyx_error_free(e);
  return st;
}

/* Loads the micro decoder and generates up to 4 tokens after a 3-token prompt. */
static void run_once(uint32_t growth, outcome *o) {
  memset(o, 0, sizeof *o);
  long live_before = live_count;
  onyx_runtime *rt = NULL;
  onyx_genai_model *m = NULL;
  onyx_generator *g = NULL;
  onyx_error *e = NULL;
  onyx_status st = onyx_runtime_create(ini_path, &rt, &e);
  if (st != ONYX_STATUS_OK) fail_with(o, st, e);
  if (st == ONYX_STATUS_OK && (st = onyx_genai_model_open(rt, MICRO_DECODER, NULL, &m, &e)))
    fail_with(o, st, e);
  if (st == ONYX_STATUS_OK) {
    onyx_generator_options go;
    onyx_generator_options_init(m, &go);
    go.search.max_length = 7;
    go.kv_growth = growth;
    go.eos_count = 0;
    if ((st = onyx_generator_create(m, &go, &g, &e)) != ONYX_STATUS_OK) fail_with(o, st, e);
  }
  const int64_t prompt[] = {5, 17, 3};
  if (st == ONYX_STATUS_OK && (st = onyx_generator_append_tokens(g, prompt, 3, &e)))
    fail_with(o, st, e);
  while (st == ONYX_STATUS_OK && !onyx_generator_is_done(g)) {
    if ((st = onyx_generator_generate_next(g, &e)) != ONYX_STATUS_OK)
      fail_with(o, st, e);
    else
      o->generated++;
  }
  size_t n = 0;
  const int64_t *seq = g ? onyx_generator_sequence(g, &n) : NULL;
  for (size_t i = 0; seq && i < n && i < 8; ++i) o->ids[i] = seq[i];
  onyx_generator_destroy(g);
  onyx_genai_model_destroy(m);
  if (rt) {
    uint64_t used[ONYX_REQUESTER_COUNT_], peak[ONYX_REQUESTER_COUNT_];
    onyx_runtime_memory_usage(rt, used, peak);
    for (int r = 0; r < ONYX_REQUESTER_COUNT_; ++r) o->booked += used[r];
  }
  onyx_runtime_destroy(rt);
  o->leaked = live_count - live_before;
}

/* The statuses an injected fault may end a run with. */
static bool clear_status(onyx_status st) {
  return st == ONYX_STATUS_OUT_OF_MEMORY || st == ONYX_STATUS_TIER_EXHAUSTED;
}

static long faults_injected, runs_made;

/* Fails call N of `kind` for N = 0, 1, ... until a run completes with none failed. */
static void fail_every(int kind, uint32_t growth, const outcome *clean) {
  long n = 0;
  long statuses[32] = {0};
  for (;; ++n) {
    outcome o;
    pthread_mutex_lock(&lock);
    calls[0] = calls[1] = failed[0] = failed[1] = 0;
    countdown[kind] = n;
    pthread_mutex_unlock(&lock);
    run_once(growth, &o);
    pthread_mutex_lock(&lock);
    countdown[kind] = -1;
    long hit = failed[kind];
    pthread_mutex_unlock(&lock);
    runs_made++;
    if (o.leaked != 0 || o.booked != 0) {
      print_error("%s %ld (growth %u): %ld allocations leaked, %llu bytes still booked; run "
                  "ended %s: %s\n",
                  kind == KIND_ALLOC ? "allocation" : "grant", n, growth, o.leaked,
                  (unsigned long long)o.booked, onyx_status_str(o.status), o.message);
      fail();
    }
    if (hit == 0) {
      /* Past the last call: the run must be the clean one. */
      assert_int_equal(o.status, ONYX_STATUS_OK);
      assert_int_equal(o.generated, clean->generated);
      assert_memory_equal(o.ids, clean->ids, sizeof o.ids);
      break;
    }
    faults_injected++;
    if (o.status == ONYX_STATUS_OK) {
      /* A fault absorbed on the way (a kernel that could not prepack its weights runs
       * from the originals; a host zone that could not be set up grows by copy): the
       * run must still have produced every token. */
      assert_int_equal(o.generated, clean->generated);
      assert_memory_equal(o.ids, clean->ids, sizeof o.ids);
      statuses[0]++;
      continue;
    }
    if (!clear_status(o.status) || o.message[0] == '\0') {
      print_error("%s %ld (growth %u): run ended %s with '%s'\n",
                  kind == KIND_ALLOC ? "allocation" : "grant", n, growth, onyx_status_str(o.status),
                  o.message);
      fail();
    }
    statuses[o.status < 32 ? o.status : 31]++;
  }
  print_message("growth %s: %ld %s failed in turn, one run each: %ld ended out of memory, %ld "
                "tier exhausted, %ld absorbed\n",
                growth == ONYX_KV_GROWTH_IN_PLACE ? "in place" : "by copy", n,
                kind == KIND_ALLOC ? "host allocations" : "governor grants",
                statuses[ONYX_STATUS_OUT_OF_MEMORY], statuses[ONYX_STATUS_TIER_EXHAUSTED],
                statuses[0]);
}

static int setup(void **state) {
  (void)state;
  char text[1024];
  snprintf(text, sizeof text,
           "[onyx]\nthreads = 1\n[governor]\nhost = 256MiB\n[provider.cpu]\npath = %s\n",
           CPU_PROVIDER);
  char *path = write_temp_file(".ini", text);
  if (path == NULL) return -1;
  snprintf(ini_path, sizeof ini_path, "%s", path);
  free(path);
  tracking = true;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  tracking = false;
  unlink(ini_path);
  print_message("fault injection: %ld faults injected over %ld whole runs\n", faults_injected,
                runs_made);
  return 0;
}

static void every_fault_over_a_generation(uint32_t growth) {
  outcome clean;
  run_once(growth, &clean);
  if (clean.status != ONYX_STATUS_OK) print_error("clean run: %s\n", clean.message);
  assert_int_equal(clean.status, ONYX_STATUS_OK);
  assert_int_equal(clean.generated, 4);
  assert_int_equal(clean.leaked, 0);
  assert_int_equal(clean.booked, 0);
  fail_every(KIND_ALLOC, growth, &clean);
  fail_every(KIND_GRANT, growth, &clean);
}

static void in_place(void **state) {
  (void)state;
  every_fault_over_a_generation(ONYX_KV_GROWTH_IN_PLACE);
}

static void by_copy(void **state) {
  (void)state;
  every_fault_over_a_generation(ONYX_KV_GROWTH_REALLOC);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(in_place),
      cmocka_unit_test(by_copy),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
