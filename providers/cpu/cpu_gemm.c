/*
 * Matrix multiply cores shared by MatMul and Gemm.
 *
 * float32 (and float16/bfloat16, widened while packing) use the classic blocked
 * scheme of Goto and van de Geijn:
 *
 *   for each NC-wide column panel of B          (B panel stays in L3)
 *     for each KC-deep slice of the K dimension
 *       pack B[KC×NC] into NR-wide column slivers
 *       for each MC-tall row block of A           (parallel tasks)
 *         pack alpha·A[MC×KC] into MR-tall row slivers (A block stays in L2)
 *         for each MR×NR tile: micro-kernel      (B sliver stays in L1)
 *
 * Packing makes every operand read in the micro-kernel contiguous whatever the
 * transposes, converts 16-bit inputs once instead of once per use, and pads the
 * edges with zeros so the micro-kernel has fixed trip counts the compiler can
 * unroll and vectorize from plain C. The packing buffers are the kernel's
 * declared workspace, not allocations of this file.
 *
 * float64 and integer products are rarer on this path; they get loop orders that
 * keep the innermost loop contiguous but no packing.
 */
#include <string.h>

#include "cpu_impl.h"

enum {
  CPU_MR = 4,    /* micro-tile rows: 4 broadcasts of A per k */
  CPU_NR = 16,   /* micro-tile cols: 16 floats, a few SIMD registers wide */
  CPU_MC = 64,   /* A block rows:   64 × 256 floats = 64 KiB */
  CPU_KC = 256,  /* depth of a packed slice */
  CPU_NC = 1024  /* B panel cols:   256 × 1024 floats = 1 MiB */
};

static int64_t cpu_min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t cpu_round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

/* Row blocks of A are dealt to at most `tasks` tasks, each with its own slot in the
 * A packing buffer. */
static int64_t cpu_a_slots(int64_t m, uint32_t tasks) {
  int64_t blocks = (m + CPU_MC - 1) / CPU_MC;
  return cpu_min64(blocks, tasks > 0 ? (int64_t)tasks : 1);
}

void onyx__cpu_sgemm_scratch(int64_t m, int64_t n, int64_t k, uint32_t tasks,
                             uint64_t *out_pack_a, uint64_t *out_pack_b) {
  *out_pack_a = *out_pack_b = 0;
  if (m <= 0 || n <= 0 || k <= 0) return;
  int64_t kc = cpu_min64(k, CPU_KC);
  int64_t mc = cpu_round_up(cpu_min64(m, CPU_MC), CPU_MR);
  int64_t nc = cpu_round_up(cpu_min64(n, CPU_NC), CPU_NR);
  *out_pack_a = (uint64_t)(cpu_a_slots(m, tasks) * mc * kc);
  *out_pack_b = (uint64_t)(kc * nc);
}

/* op(B)[kc×nc] at (pc, jc) → NR-wide slivers, each kc rows of NR floats. */
static void cpu_pack_b(const onyx__cpu_gemm *g, int64_t pc, int64_t jc, int64_t kc,
                       int64_t nc, float *dst) {
  for (int64_t js = 0; js < nc; js += CPU_NR) {
    int64_t w = cpu_min64(CPU_NR, nc - js);
    for (int64_t p = 0; p < kc; ++p) {
      float *row = dst + p * CPU_NR;
      int64_t r = pc + p;
      if (!g->trans_b && g->ab_dtype == ONYX_DTYPE_FLOAT32) {
        memcpy(row, (const float *)g->b + r * g->ldb + jc + js, (size_t)w * sizeof(float));
      } else {
        for (int64_t v = 0; v < w; ++v) {
          int64_t c = jc + js + v;
          row[v] = onyx__cpu_load_f32(g->ab_dtype, g->b,
                                      g->trans_b ? c * g->ldb + r : r * g->ldb + c);
        }
      }
      for (int64_t v = w; v < CPU_NR; ++v) row[v] = 0.0f;
    }
    dst += kc * CPU_NR;
  }
}

/* alpha·op(A)[mc×kc] at (ic, pc) → MR-tall slivers, each kc columns of MR floats.
 * Folding alpha in here costs nothing and keeps it out of the micro-kernel. */
static void cpu_pack_a(const onyx__cpu_gemm *g, int64_t ic, int64_t pc, int64_t mc,
                       int64_t kc, float *dst) {
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

/* y[mr×nr] += ap·bp over kc. The accumulator tile lives in registers; the edge
 * tile (mr < MR or nr < NR) computes in full on the zero padding and stores less. */
static void cpu_micro_kernel(int64_t kc, const float *restrict ap, const float *restrict bp,
                             float *restrict y, int64_t ldy, int64_t mr, int64_t nr) {
  float acc[CPU_MR][CPU_NR];
  memset(acc, 0, sizeof acc);
  for (int64_t p = 0; p < kc; ++p) {
    const float *b = bp + p * CPU_NR;
    const float *a = ap + p * CPU_MR;
    for (int r = 0; r < CPU_MR; ++r) {
      const float av = a[r];
      for (int v = 0; v < CPU_NR; ++v) acc[r][v] += av * b[v];
    }
  }
  if (mr == CPU_MR && nr == CPU_NR) {
    for (int r = 0; r < CPU_MR; ++r)
      for (int v = 0; v < CPU_NR; ++v) y[r * ldy + v] += acc[r][v];
  } else {
    for (int64_t r = 0; r < mr; ++r)
      for (int64_t v = 0; v < nr; ++v) y[r * ldy + v] += acc[r][v];
  }
}

/* One parallel task: the row blocks task, task + slots, task + 2·slots, ... */
typedef struct cpu_sgemm_step {
  const onyx__cpu_gemm *g;
  int64_t pc, kc, jc, nc;
  int64_t blocks, slots;
  float *pack_a; /* slots × (MC rounded) × kc */
  const float *pack_b;
} cpu_sgemm_step;

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
        int64_t mr = cpu_min64(CPU_MR, mc - is);
        cpu_micro_kernel(s->kc, pa + (is / CPU_MR) * s->kc * CPU_MR, bp,
                         g->y + (ic + is) * g->ldy + s->jc + js, g->ldy, mr, nr);
      }
    }
  }
}

void onyx__cpu_sgemm(const onyx__cpu_provider *p, const onyx__cpu_gemm *g, float *pack_a,
                     float *pack_b) {
  if (g->m <= 0 || g->n <= 0 || g->k <= 0) return;
  uint32_t tasks = p != NULL ? p->num_threads : 1;
  cpu_sgemm_step s = {.g = g,
                      .blocks = (g->m + CPU_MC - 1) / CPU_MC,
                      .slots = cpu_a_slots(g->m, tasks),
                      .pack_a = pack_a,
                      .pack_b = pack_b};
  for (s.jc = 0; s.jc < g->n; s.jc += CPU_NC) {
    s.nc = cpu_min64(CPU_NC, g->n - s.jc);
    for (s.pc = 0; s.pc < g->k; s.pc += CPU_KC) {
      s.kc = cpu_min64(CPU_KC, g->k - s.pc);
      cpu_pack_b(g, s.pc, s.jc, s.kc, s.nc, pack_b);
      onyx__cpu_parallel_for(p, (size_t)s.slots, cpu_sgemm_task, &s);
    }
  }
}

void onyx__cpu_dgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                     double alpha, const double *a, int64_t lda, const double *b,
                     int64_t ldb, double *y, int64_t ldy) {
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
#define CPU_IGEMM(name, U)                                                         \
  static void name(int64_t m, int64_t n, int64_t k, const U *a, const U *b, U *y) { \
    for (int64_t i = 0; i < m; ++i) {                                               \
      U *yr = y + i * n;                                                            \
      for (int64_t j = 0; j < n; ++j) yr[j] = 0;                                    \
      for (int64_t p = 0; p < k; ++p) {                                             \
        const U av = a[i * k + p];                                                  \
        const U *br = b + p * n;                                                    \
        for (int64_t j = 0; j < n; ++j) yr[j] += av * br[j];                        \
      }                                                                             \
    }                                                                               \
  }
CPU_IGEMM(cpu_igemm32, uint32_t)
CPU_IGEMM(cpu_igemm64, uint64_t)

void onyx__cpu_igemm(uint32_t dtype, int64_t m, int64_t n, int64_t k, const void *a,
                     const void *b, void *y) {
  if (onyx_dtype_size(dtype) == 8)
    cpu_igemm64(m, n, k, a, b, y);
  else
    cpu_igemm32(m, n, k, a, b, y);
}
