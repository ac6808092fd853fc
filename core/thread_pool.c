/*
 * Thread pool. Workers sleep on a condition variable between jobs; a job hands out
 * indices through an atomic counter, so uneven items balance themselves. The caller
 * works too, which keeps a one-thread pool free of any handoff.
 *
 * A decoder step runs hundreds of short jobs back to back, and a sleeping thread takes
 * tens of microseconds to wake. So a worker that finishes a job first watches for the
 * next one for a moment before it sleeps, and the caller watches the workers finish
 * before it sleeps: the generation and busy counters are atomics for that, and the
 * condition variables stay for the long waits.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "thread_pool_impl.h"

/* How long a thread watches before sleeping: about 50-100 µs of pause instructions. */
#define POOL_SPIN 4000

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

struct onyx__thread_pool {
  uint32_t size; /* threads including the caller */
  pthread_t *workers;
  pthread_mutex_t run_lock; /* serialises callers of run */
  pthread_mutex_t lock;
  pthread_cond_t wake;
  pthread_cond_t done;
  atomic_uint_fast64_t generation; /* bumped per job so waiting workers notice a new one */
  atomic_bool stopping;
  /* the current job */
  void (*fn)(void *arg, size_t i);
  void *arg;
  size_t n;
  atomic_size_t next;
  atomic_uint busy; /* workers still inside the current job */
};

/* Set while a thread executes job items: a nested run executes inline instead of
 * waiting for workers that are busy with the outer job. */
static _Thread_local bool inside_job;

static void drain(onyx__thread_pool *p) {
  inside_job = true;
  for (;;) {
    size_t i = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
    if (i >= p->n) break;
    p->fn(p->arg, i);
  }
  inside_job = false;
}

/* Has a job after `seen` been posted (or the pool been stopped)? Acquire: the job's
 * fields, written before the generation, are visible once it is. */
static bool news(onyx__thread_pool *p, uint64_t seen) {
  return atomic_load_explicit(&p->generation, memory_order_acquire) != seen ||
         atomic_load_explicit(&p->stopping, memory_order_acquire);
}

static void *worker_main(void *arg) {
  onyx__thread_pool *p = arg;
  uint64_t seen = 0;
  for (;;) {
    for (int spin = 0; spin < POOL_SPIN && !news(p, seen); ++spin) cpu_relax();
    if (!news(p, seen)) {
      pthread_mutex_lock(&p->lock);
      while (!news(p, seen)) pthread_cond_wait(&p->wake, &p->lock);
      pthread_mutex_unlock(&p->lock);
    }
    if (atomic_load_explicit(&p->stopping, memory_order_acquire)) break;
    seen = atomic_load_explicit(&p->generation, memory_order_acquire);
    drain(p);
    if (atomic_fetch_sub_explicit(&p->busy, 1, memory_order_acq_rel) == 1) {
      /* The last one out: wake the caller if it went to sleep (under the lock, so the
       * signal cannot fall between its check and its wait). */
      pthread_mutex_lock(&p->lock);
      pthread_cond_signal(&p->done);
      pthread_mutex_unlock(&p->lock);
    }
  }
  return NULL;
}

onyx__thread_pool *onyx__thread_pool_create(uint32_t threads) {
  if (threads == 0) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    threads = cores > 0 ? (uint32_t)cores : 1u;
  }
  onyx__thread_pool *p = calloc(1, sizeof *p);
  if (p == NULL) return NULL;
  p->size = 1;
  pthread_mutex_init(&p->run_lock, NULL);
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->done, NULL);
  atomic_init(&p->next, 0);
  atomic_init(&p->generation, 0);
  atomic_init(&p->stopping, false);
  atomic_init(&p->busy, 0);
  if (threads > 1) {
    p->workers = calloc(threads - 1, sizeof *p->workers);
    if (p->workers == NULL) {
      onyx__thread_pool_destroy(p);
      return NULL;
    }
    for (uint32_t i = 0; i + 1 < threads; ++i) {
      if (pthread_create(&p->workers[i], NULL, worker_main, p) != 0) break;
      p->size++;
    }
  }
  return p;
}

void onyx__thread_pool_destroy(onyx__thread_pool *p) {
  if (p == NULL) return;
  pthread_mutex_lock(&p->lock);
  atomic_store_explicit(&p->stopping, true, memory_order_release);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->lock);
  for (uint32_t i = 0; i + 1 < p->size; ++i) pthread_join(p->workers[i], NULL);
  free(p->workers);
  pthread_cond_destroy(&p->wake);
  pthread_cond_destroy(&p->done);
  pthread_mutex_destroy(&p->lock);
  pthread_mutex_destroy(&p->run_lock);
  free(p);
}

uint32_t onyx__thread_pool_size(const onyx__thread_pool *p) { return p ? p->size : 1; }

void onyx__thread_pool_run(onyx__thread_pool *p, size_t n, void (*fn)(void *arg, size_t i),
                           void *arg) {
  if (n == 0) return;
  if (p == NULL || p->size == 1 || n == 1 || inside_job) {
    for (size_t i = 0; i < n; ++i) fn(arg, i);
    return;
  }
  pthread_mutex_lock(&p->run_lock);
  p->fn = fn;
  p->arg = arg;
  p->n = n;
  atomic_store_explicit(&p->next, 0, memory_order_relaxed);
  atomic_store_explicit(&p->busy, p->size - 1, memory_order_relaxed);
  pthread_mutex_lock(&p->lock);
  atomic_fetch_add_explicit(&p->generation, 1, memory_order_release); /* publishes the job */
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->lock);
  drain(p);
  for (int spin = 0; spin < POOL_SPIN && atomic_load_explicit(&p->busy, memory_order_acquire) > 0;
       ++spin)
    cpu_relax();
  if (atomic_load_explicit(&p->busy, memory_order_acquire) > 0) {
    pthread_mutex_lock(&p->lock);
    while (atomic_load_explicit(&p->busy, memory_order_acquire) > 0)
      pthread_cond_wait(&p->done, &p->lock);
    pthread_mutex_unlock(&p->lock);
  }
  pthread_mutex_unlock(&p->run_lock);
}
