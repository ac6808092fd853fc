/*
 * onyx-bench-governor: what the governor costs on its hot paths, each next to an
 * anchor measured in the same run.
 *
 *   grant+release    uncontended onyx_gov_grant + onyx_gov_release (goal < 100 ns),
 *                    anchor: malloc+free of the same size
 *   alloc+free       onyx_gov_alloc + onyx_gov_free, anchor: posix_memalign+free
 *   contended        the same grant+release from 2 threads on one tier
 *   granule growth   onyx_gov_zone_grow by one granule on the host backend, and the
 *                    trim back, anchor: raw mprotect on a reserved range
 *
 * Each figure is the median of several repetitions. Usage: onyx-bench-governor
 * [--quick]. Not a test: it prints numbers and fails only when something errors.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "onyx_governor.h"

#define MiB ((uint64_t)1 << 20)
#define REPS 7

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return v[n / 2];
}

static void check(onyx_status st, const char *what) {
  if (st != ONYX_STATUS_OK) {
    fprintf(stderr, "onyx-bench-governor: %s failed: %s\n", what, onyx_status_str(st));
    exit(1);
  }
}

/* Keeps the compiler from dropping anchor loops. */
static volatile uintptr_t sink;

static const char *const label = "node 12 GroupQueryAttention region scores";

static double bench_grant_release(onyx_gov *gov, onyx_gov_tier t, long iters) {
  double start = now_ns();
  for (long i = 0; i < iters; ++i) {
    onyx_gov_grant_id g;
    check(onyx_gov_grant(gov, t, ONYX_REQUESTER_WORKSPACE_STEP, 4096 + (uint64_t)(i & 63), label,
                         &g, NULL),
          "grant");
    check(onyx_gov_release(gov, g), "release");
  }
  return (now_ns() - start) / (double)iters;
}

static double bench_malloc_free(long iters) {
  double start = now_ns();
  for (long i = 0; i < iters; ++i) {
    void *p = malloc(4096 + (size_t)(i & 63));
    sink += (uintptr_t)p;
    free(p);
  }
  return (now_ns() - start) / (double)iters;
}

static double bench_alloc_free(onyx_gov *gov, onyx_gov_tier t, long iters) {
  double start = now_ns();
  for (long i = 0; i < iters; ++i) {
    void *p = NULL;
    check(onyx_gov_alloc(gov, t, ONYX_REQUESTER_ACTIVATIONS, 4096, 64, label, &p, NULL), "alloc");
    check(onyx_gov_free(gov, p), "free");
  }
  return (now_ns() - start) / (double)iters;
}

static double bench_memalign_free(long iters) {
  double start = now_ns();
  for (long i = 0; i < iters; ++i) {
    void *p = NULL;
    if (posix_memalign(&p, 64, 4096) != 0) exit(1);
    sink += (uintptr_t)p;
    free(p);
  }
  return (now_ns() - start) / (double)iters;
}

typedef struct contended_arg {
  onyx_gov *gov;
  onyx_gov_tier t;
  long iters;
  double ns;
} contended_arg;

static void *contended_worker(void *p) {
  contended_arg *a = p;
  a->ns = bench_grant_release(a->gov, a->t, a->iters);
  return NULL;
}

static double bench_contended(onyx_gov *gov, onyx_gov_tier t, long iters) {
  contended_arg args[2] = {{gov, t, iters, 0}, {gov, t, iters, 0}};
  pthread_t th[2];
  double start = now_ns();
  for (int i = 0; i < 2; ++i) pthread_create(&th[i], NULL, contended_worker, &args[i]);
  for (int i = 0; i < 2; ++i) pthread_join(th[i], NULL);
  /* Wall time per operation across both threads. */
  return (now_ns() - start) / (double)(2 * iters);
}

/* Grows a host zone granule by granule to `granules`, then trims it to 0. */
static void bench_growth(onyx_gov_zone *zone, uint64_t g, int granules, double *grow_ns,
                         double *trim_ns) {
  double start = now_ns();
  for (int i = 1; i <= granules; ++i)
    check(onyx_gov_zone_grow(zone, (uint64_t)i * g, NULL, NULL), "zone grow");
  double mid = now_ns();
  check(onyx_gov_zone_trim(zone, 0), "zone trim");
  double end = now_ns();
  *grow_ns = (mid - start) / granules;
  *trim_ns = (end - mid) / granules;
}

/* The same page-table work done by hand: the floor the host backend sits on. */
static void bench_raw_mprotect(uint64_t g, int granules, double *grow_ns, double *trim_ns) {
  size_t bytes = (size_t)g * (size_t)granules;
  char *base = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) exit(1);
  double start = now_ns();
  for (int i = 0; i < granules; ++i)
    if (mprotect(base + (size_t)i * g, (size_t)g, PROT_READ | PROT_WRITE) != 0) exit(1);
  double mid = now_ns();
  for (int i = granules; i-- > 0;) {
    madvise(base + (size_t)i * g, (size_t)g, MADV_DONTNEED);
    mprotect(base + (size_t)i * g, (size_t)g, PROT_NONE);
  }
  double end = now_ns();
  munmap(base, bytes);
  *grow_ns = (mid - start) / granules;
  *trim_ns = (end - mid) / granules;
}

int main(int argc, char **argv) {
  bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
  long iters = quick ? 200000 : 2000000;
  int granules = quick ? 64 : 512; /* 128 MiB or 1 GiB of 2 MiB granules */

  onyx_gov *gov = NULL;
  onyx_gov_tier t;
  check(onyx_gov_create(&gov), "create");
  check(onyx_gov_tier_add(gov, "host", 64ull << 30, &t), "tier");

  double a[REPS], b[REPS], c[REPS], d[REPS], e[REPS];
  bench_grant_release(gov, t, iters / 10); /* warm the slot table and caches */
  for (int r = 0; r < REPS; ++r) {
    a[r] = bench_grant_release(gov, t, iters);
    b[r] = bench_malloc_free(iters);
    c[r] = bench_alloc_free(gov, t, iters / 4);
    d[r] = bench_memalign_free(iters / 4);
    e[r] = bench_contended(gov, t, iters / 4);
  }
  double grant = median(a, REPS), anchor = median(b, REPS);
  double alloc = median(c, REPS), alloc_anchor = median(d, REPS);
  printf("grant+release (uncontended): %7.1f ns/op   anchor malloc+free: %6.1f ns/op   "
         "ratio %.2f   goal < 100 ns: %s\n",
         grant, anchor, grant / anchor, grant < 100.0 ? "met" : "MISSED");
  printf("alloc+free (governed host):  %7.1f ns/op   anchor posix_memalign+free: %6.1f ns/op   "
         "ratio %.2f\n",
         alloc, alloc_anchor, alloc / alloc_anchor);
  printf("grant+release (2 threads):   %7.1f ns/op wall\n", median(e, REPS));

  onyx_gov_backend *host = NULL;
  check(onyx_gov_host_backend_create(2 * MiB, &host), "host backend");
  onyx_gov_zone_desc desc = {
      sizeof desc, 1,           t, ONYX_REQUESTER_KV_CACHE, host, (uint64_t)granules * 2 * MiB,
      0,           "bench zone"};
  onyx_gov_zone *zone = NULL;
  check(onyx_gov_zone_create(gov, &desc, &zone, NULL), "zone create");
  double gg[REPS], gt[REPS], rg[REPS], rt[REPS];
  for (int r = 0; r < REPS; ++r) {
    bench_growth(zone, 2 * MiB, granules, &gg[r], &gt[r]);
    bench_raw_mprotect(2 * MiB, granules, &rg[r], &rt[r]);
  }
  double grow = median(gg, REPS), raw_grow = median(rg, REPS);
  double trim = median(gt, REPS), raw_trim = median(rt, REPS);
  printf("granule growth (host, 2 MiB): %6.0f ns/granule   anchor mprotect: %6.0f ns   "
         "ratio %.2f\n",
         grow, raw_grow, grow / raw_grow);
  printf("granule trim   (host, 2 MiB): %6.0f ns/granule   anchor madvise+mprotect: %6.0f ns   "
         "ratio %.2f\n",
         trim, raw_trim, trim / raw_trim);

  onyx_gov_counters k;
  onyx_gov_counters_get(gov, &k);
  printf("counters: grants %llu, growth events %llu, bytes mapped %llu, refusals %llu\n",
         (unsigned long long)k.grants, (unsigned long long)k.growth_events,
         (unsigned long long)k.bytes_mapped, (unsigned long long)k.refusals);
  check(onyx_gov_zone_destroy(zone), "zone destroy");
  onyx_gov_destroy(gov);
  onyx_gov_host_backend_destroy(host);
  return 0;
}
