/*
 * Several threads against one tier: plain grants and releases, a zone growing and
 * trimming, a holder adopting grants and giving them back on reclaim, and readers
 * taking snapshots and audits. At the end every book is back to zero and the
 * counters agree. Run it under -DONYX_SANITIZE=thread as well.
 */
#include <pthread.h>
#include <string.h>

#include "gov_test.h"

enum { WORKERS = 3, ITERATIONS = 20000, HELD = 8, KV_MAX = 16, AUX_MIN = 2000 };

typedef struct shared {
  onyx_gov *gov;
  onyx_gov_tier t;
  onyx_gov_zone *zone;
  pthread_mutex_t kv_mu;
  onyx_gov_grant_id kv[KV_MAX];
  uint64_t kv_bytes[KV_MAX];
  int kv_count;
  onyx_gov_holder_id holder;
  int stop;
  pthread_mutex_t stop_mu;
} shared;

static uint64_t next_rand(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static uint64_t kv_reclaim(void *user, onyx_gov *gov, onyx_gov_tier tier, uint64_t want) {
  (void)tier;
  shared *sh = user;
  uint64_t freed = 0;
  pthread_mutex_lock(&sh->kv_mu);
  while (freed < want && sh->kv_count > 0) {
    --sh->kv_count;
    if (onyx_gov_release(gov, sh->kv[sh->kv_count]) == ONYX_STATUS_OK)
      freed += sh->kv_bytes[sh->kv_count];
  }
  pthread_mutex_unlock(&sh->kv_mu);
  return freed;
}

static void *worker(void *arg) {
  shared *sh = arg;
  uint64_t seed = (uint64_t)(uintptr_t)&seed | 1;
  onyx_gov_grant_id held[HELD];
  int n = 0;
  for (int i = 0; i < ITERATIONS; ++i) {
    uint64_t r = next_rand(&seed);
    if (n < HELD && (r & 1)) {
      uint64_t bytes = 4 * KiB + (r >> 8) % (1 * MiB);
      onyx_requester who = (onyx_requester)((r >> 40) % ONYX_REQUESTER_COUNT_);
      onyx_gov_refusal refusal;
      onyx_status st = onyx_gov_grant(sh->gov, sh->t, who, bytes, "worker", &held[n], &refusal);
      if (st == ONYX_STATUS_OK)
        ++n;
      else
        assert_int_equal(ONYX_STATUS_TIER_EXHAUSTED, st);
    } else if (n > 0) {
      int k = (int)((r >> 16) % (uint64_t)n);
      assert_ok(onyx_gov_release(sh->gov, held[k]));
      assert_status(ONYX_STATUS_INVALID_ARGUMENT, onyx_gov_release(sh->gov, held[k]));
      held[k] = held[--n];
    }
  }
  while (n > 0) assert_ok(onyx_gov_release(sh->gov, held[--n]));
  return NULL;
}

/* Helper threads run until the workers are done, and at least `min` rounds, so that
 * they overlap the workers whatever the scheduler does. */
static int stopped(shared *sh, int *rounds, int min) {
  if ((*rounds)++ < min) return 0;
  pthread_mutex_lock(&sh->stop_mu);
  int s = sh->stop;
  pthread_mutex_unlock(&sh->stop_mu);
  return s;
}

static void *zone_thread(void *arg) {
  shared *sh = arg;
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  int rounds = 0;
  while (!stopped(sh, &rounds, AUX_MIN)) {
    uint64_t r = next_rand(&seed);
    uint64_t target = (r % 8) * MiB;
    if (r & (1u << 10)) {
      onyx_status st = onyx_gov_zone_grow(sh->zone, target, "zone thread", NULL);
      if (st != ONYX_STATUS_OK) assert_int_equal(ONYX_STATUS_TIER_EXHAUSTED, st);
    } else if (r & (1u << 11)) {
      onyx_gov_grant_id plan;
      if (onyx_gov_zone_prepare(sh->zone, target, NULL, &plan, NULL) == ONYX_STATUS_OK) {
        if (r & (1u << 12))
          (void)onyx_gov_zone_commit(sh->zone, plan, target / 2, NULL);
        else
          assert_ok(onyx_gov_release(sh->gov, plan));
        (void)onyx_gov_release(sh->gov, plan); /* consumed or already released: refused */
      }
    } else {
      assert_ok(onyx_gov_zone_trim(sh->zone, target));
    }
  }
  return NULL;
}

static void *kv_thread(void *arg) {
  shared *sh = arg;
  uint64_t seed = 0x2545f4914f6cdd1dull;
  int rounds = 0;
  while (!stopped(sh, &rounds, AUX_MIN)) {
    uint64_t r = next_rand(&seed);
    uint64_t bytes = 64 * KiB + r % (512 * KiB);
    onyx_gov_grant_id g;
    /* Granted outside kv_mu: the grant itself may call kv_reclaim on this thread. */
    if (onyx_gov_grant(sh->gov, sh->t, ONYX_REQUESTER_KV_CACHE, bytes, "kv block", &g, NULL) !=
        ONYX_STATUS_OK)
      continue;
    assert_ok(onyx_gov_holder_adopt(sh->gov, sh->holder, g));
    pthread_mutex_lock(&sh->kv_mu);
    if (sh->kv_count < KV_MAX) {
      sh->kv[sh->kv_count] = g;
      sh->kv_bytes[sh->kv_count++] = bytes;
      g.id = 0;
    }
    pthread_mutex_unlock(&sh->kv_mu);
    if (g.id != 0) assert_ok(onyx_gov_release(sh->gov, g));
  }
  return NULL;
}

static void *reader_thread(void *arg) {
  shared *sh = arg;
  static char buf[1 << 16];
  int rounds = 0;
  while (!stopped(sh, &rounds, AUX_MIN / 10)) {
    size_t len = 0;
    onyx_status st = onyx_gov_snapshot_json(sh->gov, buf, sizeof buf, &len);
    if (st != ONYX_STATUS_OK) assert_true(len >= sizeof buf);
    assert_books_balanced(sh->gov);
  }
  return NULL;
}

static void threads_keep_the_books_balanced(void **state) {
  (void)state;
  onyx_gov_fake *fake = NULL;
  assert_ok(onyx_gov_fake_create(1 * MiB, &fake));
  shared sh;
  memset(&sh, 0, sizeof sh);
  pthread_mutex_init(&sh.kv_mu, NULL);
  pthread_mutex_init(&sh.stop_mu, NULL);
  assert_ok(onyx_gov_create(&sh.gov));
  assert_ok(onyx_gov_tier_add(sh.gov, "cuda:0", 16 * MiB, &sh.t));
  assert_ok(onyx_gov_requester_set_limit(sh.gov, sh.t, ONYX_REQUESTER_KV_CACHE, 6 * MiB));
  onyx_gov_zone_desc d = zone_desc(sh.t, ONYX_REQUESTER_WORKSPACE_SESSION,
                                   onyx_gov_fake_backend(fake), 8 * MiB, 1 * MiB, "arena");
  assert_ok(onyx_gov_zone_create(sh.gov, &d, &sh.zone, NULL));
  assert_ok(onyx_gov_holder_register(sh.gov, sh.t, 0, "kv", kv_reclaim, &sh, &sh.holder));

  pthread_t workers[WORKERS], zt, kt, rt;
  for (int i = 0; i < WORKERS; ++i)
    assert_int_equal(0, pthread_create(&workers[i], NULL, worker, &sh));
  assert_int_equal(0, pthread_create(&zt, NULL, zone_thread, &sh));
  assert_int_equal(0, pthread_create(&kt, NULL, kv_thread, &sh));
  assert_int_equal(0, pthread_create(&rt, NULL, reader_thread, &sh));
  for (int i = 0; i < WORKERS; ++i) pthread_join(workers[i], NULL);
  pthread_mutex_lock(&sh.stop_mu);
  sh.stop = 1;
  pthread_mutex_unlock(&sh.stop_mu);
  pthread_join(zt, NULL);
  pthread_join(kt, NULL);
  pthread_join(rt, NULL);

  assert_books_balanced(sh.gov);
  assert_ok(onyx_gov_holder_unregister(sh.gov, sh.holder));
  while (sh.kv_count > 0) assert_ok(onyx_gov_release(sh.gov, sh.kv[--sh.kv_count]));
  assert_ok(onyx_gov_zone_destroy(sh.zone));
  onyx_gov_tier_usage u = tier_usage(sh.gov, sh.t);
  assert_int_equal(0, u.used);
  assert_int_equal(0, u.reserved);
  assert_int_equal(0, u.pending);
  assert_int_equal(0, u.reclaimable);
  assert_int_equal(16 * MiB, u.unassigned);
  onyx_gov_counters k = counters(sh.gov);
  print_message("grants %llu refusals %llu reclaims %llu growth events %llu\n",
                (unsigned long long)k.grants, (unsigned long long)k.refusals,
                (unsigned long long)k.reclaims, (unsigned long long)k.growth_events);
  assert_int_equal(k.grants, k.releases);
  assert_int_equal(k.bytes_mapped, k.bytes_unmapped);
  assert_true(k.grants > 0);
  assert_books_balanced(sh.gov);
  onyx_gov_fake_stats s;
  onyx_gov_fake_stats_get(fake, &s);
  assert_int_equal(0, s.live_handles);
  assert_int_equal(0, s.protocol_errors);
  assert_int_equal(0, s.unsynced_unmaps);
  onyx_gov_destroy(sh.gov);
  onyx_gov_fake_destroy(fake);
  pthread_mutex_destroy(&sh.kv_mu);
  pthread_mutex_destroy(&sh.stop_mu);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(threads_keep_the_books_balanced),
  };
  return cmocka_run_group_tests_name("governor threads", tests, NULL, NULL);
}
