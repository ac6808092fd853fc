/*
 * The packing-free route of the float32 GEMM: products with fewer than six rows (a
 * decoder's matrix-vector steps) whose B is not prepacked. They read B once, in place,
 * and are bound by memory bandwidth, not arithmetic, so copying B first would only
 * add a second pass over it. They need no scratch unless they split K.
 */
#include <string.h>

#include "cpu_gemm_impl.h"

static int64_t cpu_min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t cpu_round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

/*
 * With several threads these products split B's rows (K): each thread then streams
 * one contiguous block of B, where a split of the columns would give it a short run
 * of every row. The price is a partial Y per extra thread (declared scratch) and a
 * merge pass.
 */
static int64_t cpu_direct_parts(int64_t m, int64_t n, int64_t k, uint32_t tasks) {
  int64_t t = tasks > 0 ? (int64_t)tasks : 1;
  if (t < 2 || m * n * k < (int64_t)1 << 18) return 1;
  return cpu_min64(t, k / 64 > 1 ? k / 64 : 1);
}

uint64_t onyx__cpu_direct_scratch(int64_t m, int64_t n, int64_t k, uint32_t tasks) {
  return (uint64_t)((cpu_direct_parts(m, n, k, tasks) - 1) * m * n);
}

/* Sum of a[i]·b[i] with eight lanes of partial sums (the compiler may not reorder
 * a float reduction by itself). */
static float cpu_dot(const float *a, const float *b, int64_t k) {
#if defined(__GNUC__)
  typedef float f32x8 __attribute__((vector_size(32)));
  f32x8 acc0 = {0}, acc1 = {0};
  int64_t p = 0;
  for (; p + 16 <= k; p += 16) {
    f32x8 a0, a1, b0, b1;
    memcpy(&a0, a + p, sizeof a0);
    memcpy(&a1, a + p + 8, sizeof a1);
    memcpy(&b0, b + p, sizeof b0);
    memcpy(&b1, b + p + 8, sizeof b1);
    acc0 += a0 * b0;
    acc1 += a1 * b1;
  }
  acc0 += acc1;
  float lanes[8];
  memcpy(lanes, &acc0, sizeof lanes);
  float s = ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) +
            ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
  for (; p < k; ++p) s += a[p] * b[p];
  return s;
#else
  float s = 0.0f;
  for (int64_t p = 0; p < k; ++p) s += a[p] * b[p];
  return s;
#endif
}

/* K split: task t reads rows [t·chunk, (t+1)·chunk) of B, one contiguous block and so
 * one long stream; task 0 adds into Y, the others into their own partial sums. */
typedef struct cpu_direct_k {
  const onyx__cpu_gemm *g;
  int64_t chunk; /* rows of B per task (a multiple of 4) */
  int64_t parts;
  float *partial; /* (parts − 1) × m × n */
  onyx__cpu_rows_fn rows;
} cpu_direct_k;

static void cpu_direct_k_task(void *arg, size_t task) {
  const cpu_direct_k *d = arg;
  const onyx__cpu_gemm *g = d->g;
  int64_t p0 = (int64_t)task * d->chunk, p1 = cpu_min64(g->k, p0 + d->chunk);
  if (task == 0) {
    d->rows(g, g->y, g->ldy, p0, p1, 0, g->n);
    return;
  }
  float *part = d->partial + ((int64_t)task - 1) * g->m * g->n;
  memset(part, 0, (size_t)(g->m * g->n) * sizeof(float));
  if (p0 < p1) d->rows(g, part, g->n, p0, p1, 0, g->n);
}

/* Y += the partial sums, a column range per task. */
static void cpu_direct_k_merge(void *arg, size_t task) {
  const cpu_direct_k *d = arg;
  const onyx__cpu_gemm *g = d->g;
  int64_t per = cpu_round_up((g->n + d->parts - 1) / d->parts, ONYX__CPU_NR);
  int64_t j0 = (int64_t)task * per, j1 = cpu_min64(g->n, j0 + per);
  for (int64_t t = 1; t < d->parts; ++t) {
    const float *part = d->partial + (t - 1) * g->m * g->n;
    for (int64_t i = 0; i < g->m; ++i)
      for (int64_t j = j0; j < j1; ++j) g->y[i * g->ldy + j] += part[i * g->n + j];
  }
}

typedef struct cpu_direct {
  const onyx__cpu_gemm *g;
  int64_t chunk; /* columns per task */
  onyx__cpu_rows_fn rows;
} cpu_direct;

/* Columns [j0, j1) of every row of Y; B is read once, in order. */
static void cpu_direct_task(void *arg, size_t task) {
  const cpu_direct *d = arg;
  const onyx__cpu_gemm *g = d->g;
  const float *a = g->a, *b = g->b;
  int64_t j0 = (int64_t)task * d->chunk, j1 = cpu_min64(g->n, j0 + d->chunk);
  if (j0 >= j1) return;
  if (!g->trans_b) {
    d->rows(g, g->y, g->ldy, 0, g->k, j0, j1);
    return;
  }
  /* Bᵀ: each column of op(B) is a contiguous row of B, so y[i,j] is a dot product. */
  for (int64_t j = j0; j < j1; ++j) {
    const float *br = b + j * g->ldb;
    for (int64_t i = 0; i < g->m; ++i) {
      float s;
      if (!g->trans_a) {
        s = cpu_dot(a + i * g->lda, br, g->k);
      } else {
        s = 0.0f;
        for (int64_t p = 0; p < g->k; ++p) s += a[p * g->lda + i] * br[p];
      }
      g->y[i * g->ldy + j] += g->alpha * s;
    }
  }
}

void onyx__cpu_direct(const onyx__cpu_provider *p, const onyx__cpu_gemm *g, float *scratch) {
  uint32_t tasks = p != NULL ? p->num_threads : 1;
  onyx__cpu_rows_fn rows = onyx__cpu_gemm_isa_get()->direct_rows;
  int64_t parts = cpu_direct_parts(g->m, g->n, g->k, tasks);
  if (!g->trans_b && parts > 1 && scratch != NULL) {
    cpu_direct_k d = {g, cpu_round_up((g->k + parts - 1) / parts, 4), parts, scratch, rows};
    onyx__cpu_parallel_for(p, (size_t)parts, cpu_direct_k_task, &d);
    /* A small merge costs less than waking the threads again. */
    if ((parts - 1) * g->m * g->n <= 65536)
      for (int64_t t = 0; t < parts; ++t) cpu_direct_k_merge(&d, (size_t)t);
    else
      onyx__cpu_parallel_for(p, (size_t)parts, cpu_direct_k_merge, &d);
    return;
  }
  /* Split columns only when each task gets a worthwhile share (≥ 32K MACs). */
  int64_t per_col = g->m * g->k;
  int64_t want = cpu_min64(tasks, (g->n * per_col) / 32768 + 1);
  int64_t chunk = cpu_round_up((g->n + want - 1) / want, ONYX__CPU_NR);
  cpu_direct d = {g, chunk, rows};
  onyx__cpu_parallel_for(p, (size_t)((g->n + chunk - 1) / chunk), cpu_direct_task, &d);
}
