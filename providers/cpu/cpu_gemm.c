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
 * When there are fewer MC-row blocks than threads (a prompt of a few dozen tokens),
 * the tasks split the columns instead and each runs the loop above on its own range,
 * packing B a few slivers at a time while the next ones are prefetched, so that the
 * weight read overlaps the arithmetic.
 *
 * Products with fewer than MR rows (a decoder's matrix-vector steps) skip packing:
 * they read B once, four rows at a time, in column chunks spread over the tasks, and
 * need no scratch. They are bound by memory bandwidth, not arithmetic.
 *
 * float64 and integer products are rarer on this path; they get loop orders that
 * keep the innermost loop contiguous but no packing.
 */
#include <string.h>

#include "cpu_impl.h"

enum {
  CPU_MR = 6,     /* micro-tile rows */
  CPU_NR = 16,    /* micro-tile cols: two 8-float vectors */
  CPU_MC = 72,    /* A block rows:  72 × 256 floats = 72 KiB */
  CPU_KC = 256,   /* depth of a packed slice */
  CPU_NC = 1024,  /* B panel cols:  256 × 1024 floats = 1 MiB */
  CPU_GROUP = 8,  /* B slivers packed at a time on the column-split route */
  CPU_PF_ROWS = 4 /* rows of B ahead that packing requests */
};

static int64_t cpu_min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t cpu_round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

/* The packing-free route: few rows, float32 operands (no conversion to hoist). */
static bool cpu_sgemm_direct(int64_t m, uint32_t dtype) {
  return m < CPU_MR && dtype == ONYX_DTYPE_FLOAT32;
}

/*
 * Products with few rows read B once and are bound by memory bandwidth. With several
 * threads they split B's rows (K): each thread then streams one contiguous block of
 * B, where a split of the columns would give it a short run of every row. The price
 * is a partial Y per extra thread (declared scratch) and a merge pass.
 */
static int64_t cpu_direct_parts(int64_t m, int64_t n, int64_t k, uint32_t tasks) {
  int64_t t = tasks > 0 ? (int64_t)tasks : 1;
  if (t < 2 || m * n * k < (int64_t)1 << 18) return 1;
  return cpu_min64(t, k / 64 > 1 ? k / 64 : 1);
}

/*
 * How the blocked route shares the work. With at least as many MC-row blocks as tasks,
 * the row blocks are dealt to the tasks and every (column panel, K slice) step packs
 * B once for all of them. With fewer (a prompt of a few dozen tokens) that would leave
 * threads idle, so each task instead takes a range of columns and runs the whole
 * product on it: packing its own B slivers and its own copy of A (cheap: A is short),
 * all in one parallel pass, with no step shared between tasks.
 */
typedef struct cpu_split {
  int64_t slots;     /* tasks that run at once, each with its own A (and B) slot */
  int64_t col_chunk; /* > 0: columns per task (column split); 0: row blocks dealt */
  int64_t b_cols;    /* columns of one B slot (rounded to NR) */
} cpu_split;

static cpu_split cpu_split_make(int64_t m, int64_t n, uint32_t tasks) {
  int64_t t = tasks > 0 ? (int64_t)tasks : 1;
  int64_t blocks = (m + CPU_MC - 1) / CPU_MC;
  cpu_split sp = {0, 0, 0};
  if (blocks >= t || t == 1 || n <= CPU_NR) {
    sp.slots = cpu_min64(blocks, t);
    sp.b_cols = cpu_round_up(cpu_min64(n, CPU_NC), CPU_NR);
    return sp;
  }
  sp.col_chunk = cpu_round_up((n + t - 1) / t, CPU_NR);
  sp.slots = (n + sp.col_chunk - 1) / sp.col_chunk;
  sp.b_cols = cpu_min64(sp.col_chunk, CPU_NC);
  return sp;
}

void onyx__cpu_sgemm_scratch(int64_t m, int64_t n, int64_t k, uint32_t ab_dtype, uint32_t tasks,
                             uint64_t *out_pack_a, uint64_t *out_pack_b) {
  *out_pack_a = *out_pack_b = 0;
  if (m <= 0 || n <= 0 || k <= 0) return;
  if (cpu_sgemm_direct(m, ab_dtype)) {
    *out_pack_a = (uint64_t)((cpu_direct_parts(m, n, k, tasks) - 1) * m * n);
    return;
  }
  cpu_split sp = cpu_split_make(m, n, tasks);
  int64_t kc = cpu_min64(k, CPU_KC);
  int64_t mc = cpu_round_up(cpu_min64(m, CPU_MC), CPU_MR);
  *out_pack_a = (uint64_t)(sp.slots * mc * kc);
  *out_pack_b = (uint64_t)((sp.col_chunk > 0 ? sp.slots : 1) * kc * sp.b_cols);
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
cpu_micro_rows(int64_t kc, const float *restrict ap, const float *restrict bp, float *restrict y,
               int64_t ldy, int64_t mr, int64_t nr, const int rows) {
  cpu_f32x8 c[CPU_MR][2];
  for (int r = 0; r < rows; ++r) c[r][0] = c[r][1] = (cpu_f32x8){0};
  for (int64_t p = 0; p < kc; ++p) {
    cpu_f32x8 b0, b1;
    CPU_LOAD8(b0, bp + p * CPU_NR);
    CPU_LOAD8(b1, bp + p * CPU_NR + 8);
    for (int r = 0; r < rows; ++r) {
      const float a = ap[p * CPU_MR + r];
      c[r][0] += a * b0;
      c[r][1] += a * b1;
    }
  }
  if (mr == rows && nr == CPU_NR) {
    for (int r = 0; r < rows; ++r) {
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
    for (int r = 0; r < rows; ++r) {
      CPU_STORE8(tile + r * CPU_NR, c[r][0]);
      CPU_STORE8(tile + r * CPU_NR + 8, c[r][1]);
    }
    cpu_tile_store(tile, y, ldy, mr, nr);
  }
}

/* A tile of mr <= MR rows: the bottom edge of Y (a 32-row prompt ends in a 2-row tile)
 * runs only the rows it has instead of a full tile of zero rows. */
static inline __attribute__((always_inline)) void
cpu_micro_body(int64_t kc, const float *restrict ap, const float *restrict bp, float *restrict y,
               int64_t ldy, int64_t mr, int64_t nr) {
  if (mr == CPU_MR)
    cpu_micro_rows(kc, ap, bp, y, ldy, mr, nr, CPU_MR);
  else if (mr > 2)
    cpu_micro_rows(kc, ap, bp, y, ldy, mr, nr, 4 + (mr > 4));
  else
    cpu_micro_rows(kc, ap, bp, y, ldy, mr, nr, 2);
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

/* op(B)[kc×w] at (pc, col) → one NR-wide sliver of kc rows, zero-padded to NR. Each
 * source read is contiguous: along a row of B for B, along a row of B for Bᵀ. */
static void cpu_pack_b_sliver(const onyx__cpu_gemm *g, int64_t pc, int64_t col, int64_t kc,
                              int64_t w, float *dst) {
  if (g->trans_b) {
    for (int64_t v = 0; v < w; ++v) {
      int64_t base = (col + v) * g->ldb + pc;
      for (int64_t p = 0; p < kc; ++p)
        dst[p * CPU_NR + v] = onyx__cpu_load_f32(g->ab_dtype, g->b, base + p);
    }
  } else {
    for (int64_t p = 0; p < kc; ++p) {
      int64_t base = (pc + p) * g->ldb + col;
      for (int64_t v = 0; v < w; ++v)
        dst[p * CPU_NR + v] = onyx__cpu_load_f32(g->ab_dtype, g->b, base + v);
    }
  }
  for (int64_t p = 0; p < kc; ++p)
    for (int64_t v = w; v < CPU_NR; ++v) dst[p * CPU_NR + v] = 0.0f;
}

/* float32 B, not transposed: slivers [sl0, sl1) of the panel at (pc, jc), walking B row
 * by row so that each row segment is one contiguous read. Going sliver by sliver
 * instead reads one cache line from each of kc rows far apart, which the hardware
 * prefetchers cannot follow; this is the whole weight read of a prompt step. */
static void cpu_pack_b_rows(const onyx__cpu_gemm *g, int64_t pc, int64_t jc, int64_t kc, int64_t nc,
                            int64_t sl0, int64_t sl1, float *pack) {
  const float *b = g->b;
  for (int64_t p = 0; p < kc; ++p) {
    const float *src = b + (pc + p) * g->ldb + jc;
#if defined(__GNUC__)
    /* Each row segment is a new short stream; asking for a later row's lines now keeps
     * enough of them in flight to read at the memory's bandwidth. */
    if (p + CPU_PF_ROWS < kc) {
      const char *ahead = (const char *)(src + CPU_PF_ROWS * g->ldb);
      for (int64_t o = sl0 * CPU_NR * 4; o < cpu_min64(sl1 * CPU_NR, nc) * 4; o += 64)
        __builtin_prefetch(ahead + o, 0, 3);
    }
#endif
    for (int64_t sl = sl0; sl < sl1; ++sl) {
      int64_t js = sl * CPU_NR, w = cpu_min64(CPU_NR, nc - js);
      float *dst = pack + (sl * kc + p) * CPU_NR;
      if (w == CPU_NR) {
        memcpy(dst, src + js, CPU_NR * sizeof(float));
      } else {
        for (int64_t v = 0; v < w; ++v) dst[v] = src[js + v];
        for (int64_t v = w; v < CPU_NR; ++v) dst[v] = 0.0f;
      }
    }
  }
}

/* alpha·op(A)[mc×kc] at (ic, pc) → MR-tall slivers, each kc columns of MR floats.
 * Folding alpha in here costs nothing and keeps it out of the micro-kernel. */
static void cpu_pack_a(const onyx__cpu_gemm *g, int64_t ic, int64_t pc, int64_t mc, int64_t kc,
                       float *dst) {
  for (int64_t is = 0; is < mc; is += CPU_MR) {
    int64_t h = cpu_min64(CPU_MR, mc - is);
    if (!g->trans_a && g->ab_dtype == ONYX_DTYPE_FLOAT32) {
      /* The common case without the per-element type switch: rows read in order. */
      for (int64_t r = 0; r < h; ++r) {
        const float *src = (const float *)g->a + (ic + is + r) * g->lda + pc;
        for (int64_t p = 0; p < kc; ++p) dst[p * CPU_MR + r] = g->alpha * src[p];
      }
      for (int64_t r = h; r < CPU_MR; ++r)
        for (int64_t p = 0; p < kc; ++p) dst[p * CPU_MR + r] = 0.0f;
      dst += kc * CPU_MR;
      continue;
    }
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

/* Task t packs a contiguous run of the panel's slivers. */
static void cpu_pack_b_task(void *arg, size_t task) {
  const cpu_sgemm_step *s = arg;
  int64_t per = (s->slivers + s->slots - 1) / s->slots;
  int64_t sl0 = (int64_t)task * per, sl1 = cpu_min64(s->slivers, sl0 + per);
  if (!s->g->trans_b && s->g->ab_dtype == ONYX_DTYPE_FLOAT32) {
    cpu_pack_b_rows(s->g, s->pc, s->jc, s->kc, s->nc, sl0, sl1, s->pack_b);
    return;
  }
  for (int64_t sl = sl0; sl < sl1; ++sl) {
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

/* Column split: task t owns columns [t·chunk, (t+1)·chunk) of Y and runs every panel,
 * K slice and row block of them with its own A and B slots. */
typedef struct cpu_sgemm_cols {
  const onyx__cpu_gemm *g;
  cpu_micro_fn micro;
  cpu_split sp;
  float *pack_a, *pack_b;
} cpu_sgemm_cols;

/* Part of the next group's B: rows [r0, r1) of the region at (row0, col) w columns wide. */
static void cpu_prefetch_b(const onyx__cpu_gemm *g, int64_t row0, int64_t col, int64_t w,
                           int64_t r0, int64_t r1) {
#if defined(__GNUC__)
  const float *b = g->b;
  for (int64_t r = r0; r < r1; ++r) {
    const char *src = (const char *)(b + (row0 + r) * g->ldb + col);
    for (int64_t o = 0; o < w * (int64_t)sizeof(float); o += 64) __builtin_prefetch(src + o, 0, 3);
  }
#else
  (void)g, (void)row0, (void)col, (void)w, (void)r0, (void)r1;
#endif
}

static void cpu_sgemm_col_task(void *arg, size_t task) {
  const cpu_sgemm_cols *cs = arg;
  const onyx__cpu_gemm *g = cs->g;
  int64_t kc_max = cpu_min64(g->k, CPU_KC);
  int64_t mc_max = cpu_round_up(cpu_min64(g->m, CPU_MC), CPU_MR);
  float *pa = cs->pack_a + (int64_t)task * mc_max * kc_max;
  float *pb = cs->pack_b + (int64_t)task * kc_max * cs->sp.b_cols;
  int64_t j0 = (int64_t)task * cs->sp.col_chunk;
  int64_t j1 = cpu_min64(g->n, j0 + cs->sp.col_chunk);
  int64_t blocks = (g->m + CPU_MC - 1) / CPU_MC;
  /* Float32 B is packed a group of slivers at a time, just before the group is used,
   * while the next group's rows are requested from memory a few per micro-tile: the
   * weight read overlaps the arithmetic instead of preceding it. */
  bool stream = !g->trans_b && g->ab_dtype == ONYX_DTYPE_FLOAT32;
  for (int64_t jc = j0; jc < j1; jc += cs->sp.b_cols) {
    int64_t nc = cpu_min64(cs->sp.b_cols, j1 - jc);
    int64_t slivers = (nc + CPU_NR - 1) / CPU_NR;
    for (int64_t pc = 0; pc < g->k; pc += CPU_KC) {
      int64_t kc = cpu_min64(CPU_KC, g->k - pc);
      for (int64_t blk = 0; blk < blocks; ++blk) {
        int64_t ic = blk * CPU_MC, mc = cpu_min64(CPU_MC, g->m - ic);
        int64_t tiles = (mc + CPU_MR - 1) / CPU_MR;
        cpu_pack_a(g, ic, pc, mc, kc, pa);
        for (int64_t sl0 = 0; sl0 < slivers; sl0 += CPU_GROUP) {
          int64_t sl1 = cpu_min64(slivers, sl0 + CPU_GROUP);
          /* The group after this one: later in this panel slice, else the next slice. */
          int64_t nrow = pc, ncol = jc + sl1 * CPU_NR, nkc = kc;
          int64_t nw = cpu_min64((sl1 + CPU_GROUP) * CPU_NR, nc) - sl1 * CPU_NR;
          if (sl1 >= slivers) {
            nrow = pc + kc, ncol = jc, nkc = cpu_min64(CPU_KC, g->k - nrow);
            nw = cpu_min64(CPU_GROUP * CPU_NR, nc);
          }
          bool pf = stream && blk == 0 && nkc > 0 && nw > 0;
          int64_t calls = (sl1 - sl0) * tiles, per = pf ? (nkc + calls - 1) / calls : 0;
          if (blk == 0) {
            if (stream) {
              cpu_pack_b_rows(g, pc, jc, kc, nc, sl0, sl1, pb);
            } else {
              for (int64_t sl = sl0; sl < sl1; ++sl)
                cpu_pack_b_sliver(g, pc, jc + sl * CPU_NR, kc, cpu_min64(CPU_NR, nc - sl * CPU_NR),
                                  pb + sl * kc * CPU_NR);
            }
          }
          int64_t call = 0;
          for (int64_t sl = sl0; sl < sl1; ++sl) {
            int64_t js = sl * CPU_NR, nr = cpu_min64(CPU_NR, nc - js);
            for (int64_t t = 0; t < tiles; ++t, ++call) {
              if (pf)
                cpu_prefetch_b(g, nrow, ncol, nw, cpu_min64(call * per, nkc),
                               cpu_min64((call + 1) * per, nkc));
              int64_t is = t * CPU_MR;
              cs->micro(kc, pa + t * kc * CPU_MR, pb + sl * kc * CPU_NR,
                        g->y + (ic + is) * g->ldy + jc + js, g->ldy, cpu_min64(CPU_MR, mc - is),
                        nr);
            }
          }
        }
      }
    }
  }
}

/* ------------------------------------------------------------------ direct route */

typedef void (*cpu_rows_fn)(const onyx__cpu_gemm *g, float *y, int64_t ldy, int64_t p0, int64_t p1,
                            int64_t j0, int64_t j1);

typedef struct cpu_direct {
  const onyx__cpu_gemm *g;
  int64_t chunk; /* columns per task */
  cpu_rows_fn rows;
} cpu_direct;

/* y[0, n) += c0·b0 + c1·b1 + c2·b2 + c3·b3, added in that order (as four single-row
 * updates would): four rows of B per pass, so y is loaded and stored once per four. */
static inline __attribute__((always_inline)) void
cpu_axpy4(float *restrict y, const float c[4], const float *restrict b0, const float *restrict b1,
          const float *restrict b2, const float *restrict b3, int64_t n) {
  int64_t j = 0;
#if defined(__GNUC__)
  for (; j + 8 <= n; j += 8) {
    cpu_f32x8 acc, x0, x1, x2, x3;
    CPU_LOAD8(acc, y + j);
    CPU_LOAD8(x0, b0 + j);
    CPU_LOAD8(x1, b1 + j);
    CPU_LOAD8(x2, b2 + j);
    CPU_LOAD8(x3, b3 + j);
    acc += c[0] * x0;
    acc += c[1] * x1;
    acc += c[2] * x2;
    acc += c[3] * x3;
    CPU_STORE8(y + j, acc);
  }
#endif
  for (; j < n; ++j) {
    float acc = y[j];
    acc += c[0] * b0[j];
    acc += c[1] * b1[j];
    acc += c[2] * b2[j];
    acc += c[3] * b3[j];
    y[j] = acc;
  }
}

/* The same over eight rows of B: y is loaded and stored once per eight. */
static inline __attribute__((always_inline)) void
cpu_axpy8(float *restrict y, const float c[8], const float *restrict b, int64_t ldb, int64_t n) {
  int64_t j = 0;
#if defined(__GNUC__)
  for (; j + 8 <= n; j += 8) {
    cpu_f32x8 acc, x;
    CPU_LOAD8(acc, y + j);
    for (int r = 0; r < 8; ++r) {
      CPU_LOAD8(x, b + r * ldb + j);
      acc += c[r] * x;
    }
    CPU_STORE8(y + j, acc);
  }
#endif
  for (; j < n; ++j) {
    float acc = y[j];
    for (int r = 0; r < 8; ++r) acc += c[r] * b[r * ldb + j];
    y[j] = acc;
  }
}

enum {
  CPU_DIRECT_JB = 512,       /* columns per inner block: four rows of it stay in L1 */
  CPU_DIRECT_PF_BYTES = 8192 /* rows segments shorter than this get software prefetch */
};

/* y[i, j0:j1] += alpha·A(i, p)·B[p, j0:j1] over rows p in [p0, p1) of B (not
 * transposed), four rows at a time; y has row stride ldy. When a row's run is short
 * (a few KiB, a new stream for the prefetchers each time), the rows a few steps ahead
 * are requested explicitly to keep enough lines in flight to read at memory speed. */
static inline __attribute__((always_inline)) void cpu_direct_rows_body(const onyx__cpu_gemm *g,
                                                                       float *y, int64_t ldy,
                                                                       int64_t p0, int64_t p1,
                                                                       int64_t j0, int64_t j1) {
  const float *a = g->a, *b = g->b;
  int64_t seg = (j1 - j0) * (int64_t)sizeof(float);
  int64_t pf = seg < CPU_DIRECT_PF_BYTES && j1 - j0 < g->ldb ? 8 : 0; /* rows ahead */
  int64_t p = p0;
  for (; p + 8 <= p1; p += 8) {
#if defined(__GNUC__)
    for (int64_t r = p + pf; pf > 0 && r < p + pf + 8 && r < p1; ++r) {
      const char *ahead = (const char *)(b + r * g->ldb + j0);
      for (int64_t o = 0; o < seg; o += 64) __builtin_prefetch(ahead + o, 0, 3);
    }
#endif
    const float *b0 = b + p * g->ldb;
    for (int64_t jb = j0; jb < j1; jb += CPU_DIRECT_JB) {
      int64_t w = cpu_min64(CPU_DIRECT_JB, j1 - jb);
      for (int64_t i = 0; i < g->m; ++i) {
        float c[8];
        for (int r = 0; r < 8; ++r)
          c[r] = g->alpha * (g->trans_a ? a[(p + r) * g->lda + i] : a[i * g->lda + p + r]);
        cpu_axpy8(y + i * ldy + jb, c, b0 + jb, g->ldb, w);
      }
    }
  }
  for (; p + 4 <= p1; p += 4) {
#if defined(__GNUC__)
    for (int64_t r = p + pf; pf > 0 && r < p + pf + 4 && r < p1; ++r) {
      const char *ahead = (const char *)(b + r * g->ldb + j0);
      for (int64_t o = 0; o < seg; o += 64) __builtin_prefetch(ahead + o, 0, 3);
    }
#endif
    const float *b0 = b + p * g->ldb, *b1 = b0 + g->ldb, *b2 = b1 + g->ldb, *b3 = b2 + g->ldb;
    for (int64_t jb = j0; jb < j1; jb += CPU_DIRECT_JB) {
      int64_t w = cpu_min64(CPU_DIRECT_JB, j1 - jb);
      for (int64_t i = 0; i < g->m; ++i) {
        float c[4];
        for (int r = 0; r < 4; ++r)
          c[r] = g->alpha * (g->trans_a ? a[(p + r) * g->lda + i] : a[i * g->lda + p + r]);
        cpu_axpy4(y + i * ldy + jb, c, b0 + jb, b1 + jb, b2 + jb, b3 + jb, w);
      }
    }
  }
  for (; p < p1; ++p) {
    const float *restrict br = b + p * g->ldb;
    for (int64_t i = 0; i < g->m; ++i) {
      const float av = g->alpha * (g->trans_a ? a[p * g->lda + i] : a[i * g->lda + p]);
      float *restrict yr = y + i * ldy;
      for (int64_t j = j0; j < j1; ++j) yr[j] += av * br[j];
    }
  }
}

/* The rows loop built twice: for the baseline ISA, and with AVX2 and FMA (picked at
 * run time), where the eight-float vectors are single registers instead of pairs that
 * spill. Matrix-vector products stream B at memory speed only in the second. */
static void cpu_direct_rows_generic(const onyx__cpu_gemm *g, float *y, int64_t ldy, int64_t p0,
                                    int64_t p1, int64_t j0, int64_t j1) {
  cpu_direct_rows_body(g, y, ldy, p0, p1, j0, j1);
}

#if defined(CPU_HAVE_AVX2_KERNEL)
__attribute__((target("avx2,fma"))) static void cpu_direct_rows_avx2(const onyx__cpu_gemm *g,
                                                                     float *y, int64_t ldy,
                                                                     int64_t p0, int64_t p1,
                                                                     int64_t j0, int64_t j1) {
  cpu_direct_rows_body(g, y, ldy, p0, p1, j0, j1);
}
#endif

static cpu_rows_fn cpu_pick_rows(void) {
#if defined(CPU_HAVE_AVX2_KERNEL)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return cpu_direct_rows_avx2;
#endif
  return cpu_direct_rows_generic;
}

/* K split: task t reads rows [t·chunk, (t+1)·chunk) of B, one contiguous block and so
 * one long stream; task 0 adds into Y, the others into their own partial sums. */
typedef struct cpu_direct_k {
  const onyx__cpu_gemm *g;
  int64_t chunk; /* rows of B per task (a multiple of 4) */
  int64_t parts;
  float *partial; /* (parts − 1) × m × n */
  cpu_rows_fn rows;
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
  int64_t per = cpu_round_up((g->n + d->parts - 1) / d->parts, CPU_NR);
  int64_t j0 = (int64_t)task * per, j1 = cpu_min64(g->n, j0 + per);
  for (int64_t t = 1; t < d->parts; ++t) {
    const float *part = d->partial + (t - 1) * g->m * g->n;
    for (int64_t i = 0; i < g->m; ++i)
      for (int64_t j = j0; j < j1; ++j) g->y[i * g->ldy + j] += part[i * g->n + j];
  }
}

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

void onyx__cpu_sgemm(const onyx__cpu_provider *p, const onyx__cpu_gemm *g, float *pack_a,
                     float *pack_b) {
  if (g->m <= 0 || g->n <= 0 || g->k <= 0) return;
  uint32_t tasks = p != NULL ? p->num_threads : 1;

  if (cpu_sgemm_direct(g->m, g->ab_dtype)) {
    int64_t parts = cpu_direct_parts(g->m, g->n, g->k, tasks);
    if (!g->trans_b && parts > 1 && pack_a != NULL) {
      cpu_direct_k d = {g, cpu_round_up((g->k + parts - 1) / parts, 4), parts, pack_a,
                        cpu_pick_rows()};
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
    int64_t chunk = cpu_round_up((g->n + want - 1) / want, CPU_NR);
    cpu_direct d = {g, chunk, cpu_pick_rows()};
    onyx__cpu_parallel_for(p, (size_t)((g->n + chunk - 1) / chunk), cpu_direct_task, &d);
    return;
  }

  cpu_split sp = cpu_split_make(g->m, g->n, tasks);
  if (sp.col_chunk > 0) {
    cpu_sgemm_cols cs = {g, cpu_pick_micro(), sp, pack_a, pack_b};
    onyx__cpu_parallel_for(p, (size_t)sp.slots, cpu_sgemm_col_task, &cs);
    return;
  }
  cpu_sgemm_step s = {.g = g,
                      .micro = cpu_pick_micro(),
                      .blocks = (g->m + CPU_MC - 1) / CPU_MC,
                      .slots = sp.slots,
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
