/*
 * Matrix multiply cores shared by MatMul and Gemm.
 *
 * float32 (and float16/bfloat16, widened while packing) use the blocked scheme of
 * Goto and van de Geijn:
 *
 *   for each NC-wide column panel of B            (B panel stays in L3)
 *     for each KC-deep slice of K
 *       pack B[KC×NC] into NR-wide column slivers  (parallel tasks)
 *       for each MC-tall row block of A            (parallel tasks)
 *         pack alpha·A[MC×KC] into MR-tall slivers (A block stays in L2)
 *         for each MR×NR tile: micro-kernel        (B sliver stays in L1)
 *
 * Packing makes every operand read in the micro-kernel contiguous whatever the
 * transposes, converts 16-bit inputs once instead of once per use, and pads edges
 * with zeros so the micro-kernel always runs a full tile. The packing buffers are
 * the kernel's declared workspace, not allocations of this file.
 *
 * The micro-kernel keeps a 6×16 tile of Y in twelve 8-float vector registers,
 * written with GCC/Clang vector extensions; on x86 an AVX2+FMA build of it is
 * picked at run time when the CPU has those. The baseline build (SSE, NEON) runs
 * the tile in two halves so it fits smaller register files. Other compilers get a
 * plain scalar tile.
 *
 * Products with fewer than MR rows (a decoder's matrix-vector steps) skip packing:
 * they read B once, in column chunks spread over the tasks, and need no scratch.
 *
 * float64 and integer products are rarer on this path; they get loop orders that
 * keep the innermost loop contiguous but no packing.
 */
#include <string.h>

#include "cpu_impl.h"

enum {
  CPU_MR = 6,   /* micro-tile rows */
  CPU_NR = 16,  /* micro-tile cols: two 8-float vectors */
  CPU_MC = 72,  /* A block rows:  72 × 256 floats = 72 KiB */
  CPU_KC = 256, /* depth of a packed slice */
  CPU_NC = 1024 /* B panel cols:  256 × 1024 floats = 1 MiB */
};

static int64_t cpu_min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t cpu_round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

/* The packing-free route: few rows, float32 operands (no conversion to hoist). */
static bool cpu_sgemm_direct(int64_t m, uint32_t dtype) {
  return m < CPU_MR && dtype == ONYX_DTYPE_FLOAT32;
}

/* Row blocks of A are dealt to at most `tasks` tasks, each with its own slot in the
 * A packing buffer. */
static int64_t cpu_a_slots(int64_t m, uint32_t tasks) {
  int64_t blocks = (m + CPU_MC - 1) / CPU_MC;
  return cpu_min64(blocks, tasks > 0 ? (int64_t)tasks : 1);
}

void onyx__cpu_sgemm_scratch(int64_t m, int64_t n, int64_t k, uint32_t ab_dtype, uint32_t tasks,
                             uint64_t *out_pack_a, uint64_t *out_pack_b) {
  *out_pack_a = *out_pack_b = 0;
  if (m <= 0 || n <= 0 || k <= 0 || cpu_sgemm_direct(m, ab_dtype)) return;
  int64_t kc = cpu_min64(k, CPU_KC);
  int64_t mc = cpu_round_up(cpu_min64(m, CPU_MC), CPU_MR);
  int64_t nc = cpu_round_up(cpu_min64(n, CPU_NC), CPU_NR);
  *out_pack_a = (uint64_t)(cpu_a_slots(m, tasks) * mc * kc);
  *out_pack_b = (uint64_t)(kc * nc);
}

/* ------------------------------------------------------------------ micro-kernel */

typedef void (*cpu_micro_fn)(int64_t kc, const float *ap, const float *bp, float *y, int64_t ldy,
                             int64_t mr, int64_t nr);

/* Adds a finished tile into y, all of it or the mr×nr corner at an edge. */
static inline void cpu_tile_store(const float *tile, float *y, int64_t ldy, int64_t mr,
                                  int64_t nr) {
  for (int64_t r = 0; r < mr; ++r)
    for (int64_t v = 0; v < nr; ++v) y[r * ldy + v] += tile[r * CPU_NR + v];
}

#if defined(__GNUC__)
typedef float cpu_f32x8 __attribute__((vector_size(32)));

/* memcpy compiles to one unaligned vector load/store and keeps aliasing legal.
 * (Macros, not functions: passing 32-byte vectors by value would depend on
 * whether the caller was compiled with AVX.) */
#define CPU_LOAD8(v, p) memcpy(&(v), (p), sizeof(cpu_f32x8))
#define CPU_STORE8(p, v) memcpy((p), &(v), sizeof(cpu_f32x8))

/* y[mr×nr] += ap · bp over kc, where ap holds MR floats per k and bp NR floats per
 * k: the whole tile in twelve 256-bit accumulators. */
static inline __attribute__((always_inline)) void
cpu_micro_body(int64_t kc, const float *restrict ap, const float *restrict bp, float *restrict y,
               int64_t ldy, int64_t mr, int64_t nr) {
  cpu_f32x8 c[CPU_MR][2];
  for (int r = 0; r < CPU_MR; ++r) c[r][0] = c[r][1] = (cpu_f32x8){0};
  for (int64_t p = 0; p < kc; ++p) {
    cpu_f32x8 b0, b1;
    CPU_LOAD8(b0, bp + p * CPU_NR);
    CPU_LOAD8(b1, bp + p * CPU_NR + 8);
    for (int r = 0; r < CPU_MR; ++r) {
      const float a = ap[p * CPU_MR + r];
      c[r][0] += a * b0;
      c[r][1] += a * b1;
    }
  }
  if (mr == CPU_MR && nr == CPU_NR) {
    for (int r = 0; r < CPU_MR; ++r) {
      float *yr = y + r * ldy;
      cpu_f32x8 y0, y1;
      CPU_LOAD8(y0, yr);
      CPU_LOAD8(y1, yr + 8);
      y0 += c[r][0];
      y1 += c[r][1];
      CPU_STORE8(yr, y0);
      CPU_STORE8(yr + 8, y1);
    }
  } else {
    float tile[CPU_MR * CPU_NR];
    for (int r = 0; r < CPU_MR; ++r) {
      CPU_STORE8(tile + r * CPU_NR, c[r][0]);
      CPU_STORE8(tile + r * CPU_NR + 8, c[r][1]);
    }
    cpu_tile_store(tile, y, ldy, mr, nr);
  }
}

/* The baseline kernel. With only sixteen 128-bit registers (x86 without AVX) the
 * full tile would spill, so it runs the tile as two 6×8 halves: twelve
 * accumulators' worth of registers each, at the price of reading A twice. */
static void cpu_micro_generic(int64_t kc, const float *restrict ap, const float *restrict bp,
                              float *restrict y, int64_t ldy, int64_t mr, int64_t nr) {
  float tile[CPU_MR * CPU_NR];
  for (int half = 0; half < 2; ++half) {
    cpu_f32x8 c[CPU_MR];
    for (int r = 0; r < CPU_MR; ++r) c[r] = (cpu_f32x8){0};
    for (int64_t p = 0; p < kc; ++p) {
      cpu_f32x8 b;
      CPU_LOAD8(b, bp + p * CPU_NR + half * 8);
      for (int r = 0; r < CPU_MR; ++r) c[r] += ap[p * CPU_MR + r] * b;
    }
    for (int r = 0; r < CPU_MR; ++r) CPU_STORE8(tile + r * CPU_NR + half * 8, c[r]);
  }
  cpu_tile_store(tile, y, ldy, mr, nr);
}

#if defined(__x86_64__) || defined(__i386__)
#define CPU_HAVE_AVX2_KERNEL 1
__attribute__((target("avx2,fma"))) static void cpu_micro_avx2(int64_t kc, const float *ap,
                                                               const float *bp, float *y,
                                                               int64_t ldy, int64_t mr,
                                                               int64_t nr) {
  cpu_micro_body(kc, ap, bp, y, ldy, mr, nr);
}
#endif

/* Sum of a[i]·b[i] with eight lanes of partial sums (the compiler may not reorder
 * a float reduction by itself). */
static float cpu_dot(const float *a, const float *b, int64_t k) {
  cpu_f32x8 acc0 = {0}, acc1 = {0};
  int64_t p = 0;
  for (; p + 16 <= k; p += 16) {
    cpu_f32x8 a0, a1, b0, b1;
    CPU_LOAD8(a0, a + p);
    CPU_LOAD8(a1, a + p + 8);
    CPU_LOAD8(b0, b + p);
    CPU_LOAD8(b1, b + p + 8);
    acc0 += a0 * b0;
    acc1 += a1 * b1;
  }
  acc0 += acc1;
  float lanes[8];
  CPU_STORE8(lanes, acc0);
  float s = ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) +
            ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
  for (; p < k; ++p) s += a[p] * b[p];
  return s;
}

#else /* no vector extensions: a scalar tile */

static void cpu_micro_generic(int64_t kc, const float *ap, const float *bp, float *y, int64_t ldy,
                              int64_t mr, int64_t nr) {
  float tile[CPU_MR * CPU_NR] = {0};
  for (int64_t p = 0; p < kc; ++p)
    for (int r = 0; r < CPU_MR; ++r)
      for (int v = 0; v < CPU_NR; ++v)
        tile[r * CPU_NR + v] += ap[p * CPU_MR + r] * bp[p * CPU_NR + v];
  cpu_tile_store(tile, y, ldy, mr, nr);
}

static float cpu_dot(const float *a, const float *b, int64_t k) {
  float s = 0.0f;
  for (int64_t p = 0; p < k; ++p) s += a[p] * b[p];
  return s;
}
#endif

static cpu_micro_fn cpu_pick_micro(void) {
#if defined(CPU_HAVE_AVX2_KERNEL)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return cpu_micro_avx2;
#endif
  return cpu_micro_generic;
}

/* ------------------------------------------------------------------ packing */

/* op(B)[kc×nc] at (pc, jc) → NR-wide slivers, each kc rows of NR floats. */
static void cpu_pack_b_sliver(const onyx__cpu_gemm *g, int64_t pc, int64_t col, int64_t kc,
                              int64_t w, float *dst) {
  for (int64_t p = 0; p < kc; ++p) {
    float *row = dst + p * CPU_NR;
    int64_t r = pc + p;
    if (!g->trans_b && g->ab_dtype == ONYX_DTYPE_FLOAT32) {
      memcpy(row, (const float *)g->b + r * g->ldb + col, (size_t)w * sizeof(float));
    } else {
      for (int64_t v = 0; v < w; ++v) {
        int64_t c = col + v;
        row[v] =
            onyx__cpu_load_f32(g->ab_dtype, g->b, g->trans_b ? c * g->ldb + r : r * g->ldb + c);
      }
    }
    for (int64_t v = w; v < CPU_NR; ++v) row[v] = 0.0f;
  }
}

/* alpha·op(A)[mc×kc] at (ic, pc) → MR-tall slivers, each kc columns of MR floats.
 * Folding alpha in here costs nothing and keeps it out of the micro-kernel. */
static void cpu_pack_a(const onyx__cpu_gemm *g, int64_t ic, int64_t pc, int64_t mc, int64_t kc,
                       float *dst) {
  for (int64_t is = 0; is < mc; is += CPU_MR) {
    int64_t h = cpu_min64(CPU_MR, mc - is);
    for (int64_t p = 0; p < kc; ++p) {
      float *col = dst + p * CPU_MR;
      int64_t c = pc + p;
      for (int64_t r = 0; r < h; ++r) {
        int64_t row = ic + is + r;
        col[r] = g->alpha * onyx__cpu_load_f32(g->ab_dtype, g->a,
                                               g->trans_a ? c * g->lda + row : row * g->lda + c);
      }
      for (int64_t r = h; r < CPU_MR; ++r) col[r] = 0.0f;
    }
    dst += kc * CPU_MR;
  }
}

/* ------------------------------------------------------------------ blocked route */

/* One (jc, pc) step, shared by the tasks that work on it. */
typedef struct cpu_sgemm_step {
  const onyx__cpu_gemm *g;
  cpu_micro_fn micro;
  int64_t pc, kc, jc, nc;
  int64_t blocks, slots, slivers;
  float *pack_a; /* slots × MC (rounded) × kc */
  float *pack_b;
} cpu_sgemm_step;

/* Task t packs B slivers t, t + slots, ... */
static void cpu_pack_b_task(void *arg, size_t task) {
  const cpu_sgemm_step *s = arg;
  for (int64_t sl = (int64_t)task; sl < s->slivers; sl += s->slots) {
    int64_t js = sl * CPU_NR;
    cpu_pack_b_sliver(s->g, s->pc, s->jc + js, s->kc, cpu_min64(CPU_NR, s->nc - js),
                      s->pack_b + sl * s->kc * CPU_NR);
  }
}

/* Task t computes row blocks t, t + slots, ... into its own A slot. */
static void cpu_sgemm_task(void *arg, size_t task) {
  const cpu_sgemm_step *s = arg;
  const onyx__cpu_gemm *g = s->g;
  int64_t mc_max = cpu_round_up(cpu_min64(g->m, CPU_MC), CPU_MR);
  float *pa = s->pack_a + (int64_t)task * mc_max * s->kc;
  for (int64_t blk = (int64_t)task; blk < s->blocks; blk += s->slots) {
    int64_t ic = blk * CPU_MC;
    int64_t mc = cpu_min64(CPU_MC, g->m - ic);
    cpu_pack_a(g, ic, s->pc, mc, s->kc, pa);
    for (int64_t js = 0; js < s->nc; js += CPU_NR) {
      const float *bp = s->pack_b + (js / CPU_NR) * s->kc * CPU_NR;
      int64_t nr = cpu_min64(CPU_NR, s->nc - js);
      for (int64_t is = 0; is < mc; is += CPU_MR) {
        s->micro(s->kc, pa + (is / CPU_MR) * s->kc * CPU_MR, bp,
                 g->y + (ic + is) * g->ldy + s->jc + js, g->ldy, cpu_min64(CPU_MR, mc - is), nr);
      }
    }
  }
}

/* ------------------------------------------------------------------ direct route */

typedef struct cpu_direct {
  const onyx__cpu_gemm *g;
  int64_t chunk; /* columns per task */
} cpu_direct;

/* Columns [j0, j1) of every row of Y; B is read once, in order. */
static void cpu_direct_task(void *arg, size_t task) {
  const cpu_direct *d = arg;
  const onyx__cpu_gemm *g = d->g;
  const float *a = g->a, *b = g->b;
  int64_t j0 = (int64_t)task * d->chunk, j1 = cpu_min64(g->n, j0 + d->chunk);
  if (!g->trans_b) {
    /* y[i, j0:j1] += alpha·A(i,p) · B[p, j0:j1]: rows of B stream through once. */
    for (int64_t p = 0; p < g->k; ++p) {
      const float *restrict br = b + p * g->ldb;
      for (int64_t i = 0; i < g->m; ++i) {
        const float av = g->alpha * (g->trans_a ? a[p * g->lda + i] : a[i * g->lda + p]);
        float *restrict yr = g->y + i * g->ldy;
        for (int64_t j = j0; j < j1; ++j) yr[j] += av * br[j];
      }
    }
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

void onyx__cpu_sgemm(const onyx__cpu_provider *p, const onyx__cpu_gemm *g, float *pack_a,
                     float *pack_b) {
  if (g->m <= 0 || g->n <= 0 || g->k <= 0) return;
  uint32_t tasks = p != NULL ? p->num_threads : 1;

  if (cpu_sgemm_direct(g->m, g->ab_dtype)) {
    /* Split columns only when each task gets a worthwhile share (≥ 32K MACs). */
    int64_t per_col = g->m * g->k;
    int64_t want = cpu_min64(tasks, (g->n * per_col) / 32768 + 1);
    int64_t chunk = cpu_round_up((g->n + want - 1) / want, CPU_NR);
    cpu_direct d = {g, chunk};
    onyx__cpu_parallel_for(p, (size_t)((g->n + chunk - 1) / chunk), cpu_direct_task, &d);
    return;
  }

  cpu_sgemm_step s = {.g = g,
                      .micro = cpu_pick_micro(),
                      .blocks = (g->m + CPU_MC - 1) / CPU_MC,
                      .slots = cpu_a_slots(g->m, tasks),
                      .pack_a = pack_a,
                      .pack_b = pack_b};
  for (s.jc = 0; s.jc < g->n; s.jc += CPU_NC) {
    s.nc = cpu_min64(CPU_NC, g->n - s.jc);
    s.slivers = (s.nc + CPU_NR - 1) / CPU_NR;
    for (s.pc = 0; s.pc < g->k; s.pc += CPU_KC) {
      s.kc = cpu_min64(CPU_KC, g->k - s.pc);
      onyx__cpu_parallel_for(p, (size_t)cpu_min64(s.slots, s.slivers), cpu_pack_b_task, &s);
      onyx__cpu_parallel_for(p, (size_t)s.slots, cpu_sgemm_task, &s);
    }
  }
}

/* ------------------------------------------------------------------ float64, int */

void onyx__cpu_dgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                     const double *a, int64_t lda, const double *b, int64_t ldb, double *y,
                     int64_t ldy) {
  for (int64_t i = 0; i < m; ++i) {
    double *yr = y + i * ldy;
    if (!trans_b) {
      /* y[i,:] += A(i,p) · B[p,:] — the inner loop streams rows of B. */
      for (int64_t p = 0; p < k; ++p) {
        double av = alpha * (trans_a ? a[p * lda + i] : a[i * lda + p]);
        const double *br = b + p * ldb;
        for (int64_t j = 0; j < n; ++j) yr[j] += av * br[j];
      }
    } else {
      /* y[i,j] += A(i,:) · B[j,:] — B's rows are contiguous along k. */
      for (int64_t j = 0; j < n; ++j) {
        const double *br = b + j * ldb;
        double sum = 0.0;
        if (!trans_a) {
          const double *ar = a + i * lda;
          for (int64_t p = 0; p < k; ++p) sum += ar[p] * br[p];
        } else {
          for (int64_t p = 0; p < k; ++p) sum += a[p * lda + i] * br[p];
        }
        yr[j] += alpha * sum;
      }
    }
  }
}

/* Two's-complement products wrap the same way for signed and unsigned types, so
 * one unsigned loop per width serves both. */
#define CPU_IGEMM(name, U)                                                                         \
  static void name(int64_t m, int64_t n, int64_t k, const U *a, const U *b, U *y) {                \
    for (int64_t i = 0; i < m; ++i) {                                                              \
      U *yr = y + i * n;                                                                           \
      for (int64_t j = 0; j < n; ++j) yr[j] = 0;                                                   \
      for (int64_t p = 0; p < k; ++p) {                                                            \
        const U av = a[i * k + p];                                                                 \
        const U *br = b + p * n;                                                                   \
        for (int64_t j = 0; j < n; ++j) yr[j] += av * br[j];                                       \
      }                                                                                            \
    }                                                                                              \
  }
CPU_IGEMM(cpu_igemm32, uint32_t)
CPU_IGEMM(cpu_igemm64, uint64_t)

void onyx__cpu_igemm(uint32_t dtype, int64_t m, int64_t n, int64_t k, const void *a, const void *b,
                     void *y) {
  if (onyx_dtype_size(dtype) == 8)
    cpu_igemm64(m, n, k, a, b, y);
  else
    cpu_igemm32(m, n, k, a, b, y);
}
