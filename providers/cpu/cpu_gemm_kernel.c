/*
 * The float32 GEMM's inner loops, built once per instruction set and picked at run
 * time (onyx__cpu_gemm_isa_get):
 *
 *   micro        an mr×16 tile of Y over one K slice, from packed A and B. The tile
 *                lives in 2·mr 8-float vector registers: mr = 8 with AVX-512 (32
 *                registers; prompts of 16 or 32 rows fill whole tiles), mr = 6 with
 *                AVX2 (16 registers). Both run at the FMA units' peak on operands in
 *                cache; what differs is how often an edge tile runs part-empty.
 *   row          one row of A against a run of packed B slivers (a decoder's
 *                matrix-vector step on prepacked weights): two slivers and two k
 *                phases at a time, so eight independent sums hide the FMA latency.
 *   direct_rows  few rows of A against B read in place, eight or four rows of B per
 *                pass (cpu_gemm_direct.c drives it).
 *
 * Written with GCC/Clang vector extensions: each build is the same source compiled
 * for its target. The baseline build (SSE, NEON) runs the tile in two 6×8 halves so
 * that it fits smaller register files. Other compilers get plain scalar loops.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_gemm_impl.h"

enum { CPU_NR = ONYX__CPU_NR };

static int64_t cpu_min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Adds a finished tile (rows of NR floats) into y, or stores it there when !add: the
 * mr×nr corner at an edge. */
static inline void cpu_tile_store(const float *tile, float *y, int64_t ldy, int64_t mr, int64_t nr,
                                  bool add) {
  for (int64_t r = 0; r < mr; ++r)
    for (int64_t v = 0; v < nr; ++v)
      y[r * ldy + v] = (add ? y[r * ldy + v] : 0.0f) + tile[r * CPU_NR + v];
}

#if defined(__GNUC__)
typedef float cpu_f32x8 __attribute__((vector_size(32)));

/* memcpy compiles to one unaligned vector load/store and keeps aliasing legal.
 * (Macros, not functions: passing 32-byte vectors by value would depend on
 * whether the caller was compiled with AVX.) */
#define CPU_LOAD8(v, p) memcpy(&(v), (p), sizeof(cpu_f32x8))
#define CPU_STORE8(p, v) memcpy((p), &(v), sizeof(cpu_f32x8))

/* ------------------------------------------------------------------ micro-kernel */

/* One k step of a tile: two B vectors against `rows` values of A. */
#define CPU_TILE_STEP(p)                                                                           \
  do {                                                                                             \
    cpu_f32x8 b0, b1;                                                                              \
    CPU_LOAD8(b0, bp + (p)*CPU_NR);                                                                \
    CPU_LOAD8(b1, bp + (p)*CPU_NR + 8);                                                            \
    for (int r = 0; r < rows; ++r) {                                                               \
      const float a = in_place ? ap[r * lda + (p)] : ap[(p)*mrs + r];                              \
      c[r][0] += a * b0;                                                                           \
      c[r][1] += a * b1;                                                                           \
    }                                                                                              \
  } while (0)

/* y[rows×nr] += A · bp over kc. A is packed (ap holds `mrs` floats per k, the sliver
 * height of this build, of which the first `rows` are used) or, when `in_place`, read
 * where it is: row r at ap + r·lda. mrs, rows and in_place are constants after
 * inlining, so every (build, layout, rows) triple compiles to its own
 * register-resident loop; in place, the rows' pointers are loop-invariant too.
 *
 * pf, when not NULL, is the next B sliver slice (kc·NR floats), requested into L2 one
 * line per k step. A weight streamed from memory is read at a few GB/s, which the
 * hardware prefetchers alone do not sustain while the FMA units are busy: with it,
 * prompt-sized products on weights out of cache run 10-40% faster. */
static inline __attribute__((always_inline)) void
cpu_micro_tile(int64_t kc, const float *restrict ap, int64_t lda, const float *restrict bp,
               const float *pf, float *restrict y, int64_t ldy, int64_t nr, bool add, const int mrs,
               const bool in_place, const int rows) {
  cpu_f32x8 c[ONYX__CPU_MR_MAX][2];
  for (int r = 0; r < rows; ++r) c[r][0] = c[r][1] = (cpu_f32x8){0};
  if (pf != NULL) {
    for (int64_t p = 0; p < kc; ++p) {
      __builtin_prefetch(pf + p * CPU_NR, 0, 1);
      CPU_TILE_STEP(p);
    }
  } else {
    for (int64_t p = 0; p < kc; ++p) CPU_TILE_STEP(p);
  }
  if (nr == CPU_NR) {
    for (int r = 0; r < rows; ++r) {
      float *yr = y + r * ldy;
      if (add) {
        cpu_f32x8 y0, y1;
        CPU_LOAD8(y0, yr);
        CPU_LOAD8(y1, yr + 8);
        c[r][0] += y0;
        c[r][1] += y1;
      }
      CPU_STORE8(yr, c[r][0]);
      CPU_STORE8(yr + 8, c[r][1]);
    }
  } else {
    float tile[ONYX__CPU_MR_MAX * CPU_NR];
    for (int r = 0; r < rows; ++r) {
      CPU_STORE8(tile + r * CPU_NR, c[r][0]);
      CPU_STORE8(tile + r * CPU_NR + 8, c[r][1]);
    }
    cpu_tile_store(tile, y, ldy, rows, nr, add);
  }
}

/* A tile of mr <= mrs rows: an edge of Y (a 33-row prompt ends in a 1-row tile) runs
 * only the rows it has. */
#define CPU_TILE_CASE(R)                                                                           \
  case R:                                                                                          \
    if (R <= mrs) cpu_micro_tile(kc, ap, lda, bp, pf, y, ldy, nr, add, mrs, in_place, R);          \
    break;
static inline __attribute__((always_inline)) void
cpu_micro_body(int64_t kc, const float *restrict ap, int64_t lda, const float *restrict bp,
               const float *pf, float *restrict y, int64_t ldy, int64_t mr, int64_t nr, bool add,
               const int mrs, const bool in_place) {
  switch (mr) {
    CPU_TILE_CASE(1)
    CPU_TILE_CASE(2)
    CPU_TILE_CASE(3)
    CPU_TILE_CASE(4)
    CPU_TILE_CASE(5)
    CPU_TILE_CASE(6)
    CPU_TILE_CASE(7)
    CPU_TILE_CASE(8)
  default:
    break;
  }
}
#undef CPU_TILE_CASE

/* The baseline kernel. With only sixteen 128-bit registers (x86 without AVX) the
 * full tile would spill, so it runs the tile as two 6×8 halves: twelve
 * accumulators' worth of registers each, at the price of reading A twice. */
static void cpu_micro_generic(int64_t kc, const float *restrict ap, const float *restrict bp,
                              float *restrict y, int64_t ldy, int64_t mr, int64_t nr, bool add) {
  float tile[6 * CPU_NR];
  for (int half = 0; half < 2; ++half) {
    cpu_f32x8 c[6];
    for (int r = 0; r < 6; ++r) c[r] = (cpu_f32x8){0};
    for (int64_t p = 0; p < kc; ++p) {
      cpu_f32x8 b;
      CPU_LOAD8(b, bp + p * CPU_NR + half * 8);
      for (int r = 0; r < 6; ++r) c[r] += ap[p * 6 + r] * b;
    }
    for (int r = 0; r < 6; ++r) CPU_STORE8(tile + r * CPU_NR + half * 8, c[r]);
  }
  cpu_tile_store(tile, y, ldy, mr, nr, add);
}

/* ------------------------------------------------------------------ one row */

/* y[0:nr) += lo, hi (= when !add): the sums of one sliver (a macro for the reason
 * CPU_LOAD8 is). */
#define CPU_ROW_STORE(lo, hi, y, nr, add)                                                          \
  do {                                                                                             \
    cpu_f32x8 lo_ = (lo), hi_ = (hi), y0_, y1_;                                                    \
    float *y_ = (y);                                                                               \
    if ((nr) == CPU_NR) {                                                                          \
      if (add) {                                                                                   \
        CPU_LOAD8(y0_, y_);                                                                        \
        CPU_LOAD8(y1_, y_ + 8);                                                                    \
        lo_ += y0_;                                                                                \
        hi_ += y1_;                                                                                \
      }                                                                                            \
      CPU_STORE8(y_, lo_);                                                                         \
      CPU_STORE8(y_ + 8, hi_);                                                                     \
    } else {                                                                                       \
      float tile_[CPU_NR];                                                                         \
      CPU_STORE8(tile_, lo_);                                                                      \
      CPU_STORE8(tile_ + 8, hi_);                                                                  \
      cpu_tile_store(tile_, y_, 0, 1, (nr), (add));                                                \
    }                                                                                              \
  } while (0)

static inline __attribute__((always_inline)) void cpu_row_body(int64_t kc, const float *restrict a,
                                                               const float *restrict bp,
                                                               float *restrict y, int64_t n,
                                                               bool add) {
  const int64_t step = kc * CPU_NR; /* floats per sliver */
  int64_t j = 0;
  for (; j + 2 * CPU_NR <= n; j += 2 * CPU_NR, bp += 2 * step) {
    const float *b0 = bp, *b1 = bp + step;
    cpu_f32x8 c[8];
    for (int i = 0; i < 8; ++i) c[i] = (cpu_f32x8){0};
    int64_t p = 0;
    /* The pair after next, requested into L2 as this one is read: a weight streamed
     * from memory arrives 10-20% faster than on the hardware prefetchers alone. */
    const float *ahead = j + 4 * CPU_NR <= n ? bp + 2 * step : NULL;
    for (; p + 2 <= kc; p += 2) {
      if (ahead != NULL) {
        __builtin_prefetch(ahead + p * CPU_NR, 0, 1);
        __builtin_prefetch(ahead + (p + 1) * CPU_NR, 0, 1);
        __builtin_prefetch(ahead + step + p * CPU_NR, 0, 1);
        __builtin_prefetch(ahead + step + (p + 1) * CPU_NR, 0, 1);
      }
      for (int h = 0; h < 2; ++h) {
        const float av = a[p + h];
        const int64_t o = (p + h) * CPU_NR;
        cpu_f32x8 x0, x1, x2, x3;
        CPU_LOAD8(x0, b0 + o);
        CPU_LOAD8(x1, b0 + o + 8);
        CPU_LOAD8(x2, b1 + o);
        CPU_LOAD8(x3, b1 + o + 8);
        c[4 * h + 0] += av * x0;
        c[4 * h + 1] += av * x1;
        c[4 * h + 2] += av * x2;
        c[4 * h + 3] += av * x3;
      }
    }
    for (; p < kc; ++p) {
      cpu_f32x8 x0, x1, x2, x3;
      CPU_LOAD8(x0, b0 + p * CPU_NR);
      CPU_LOAD8(x1, b0 + p * CPU_NR + 8);
      CPU_LOAD8(x2, b1 + p * CPU_NR);
      CPU_LOAD8(x3, b1 + p * CPU_NR + 8);
      c[0] += a[p] * x0;
      c[1] += a[p] * x1;
      c[2] += a[p] * x2;
      c[3] += a[p] * x3;
    }
    CPU_ROW_STORE(c[0] + c[4], c[1] + c[5], y + j, CPU_NR, add);
    CPU_ROW_STORE(c[2] + c[6], c[3] + c[7], y + j + CPU_NR, CPU_NR, add);
  }
  for (; j < n; j += CPU_NR, bp += step) {
    cpu_f32x8 c[4];
    for (int i = 0; i < 4; ++i) c[i] = (cpu_f32x8){0};
    int64_t p = 0;
    for (; p + 2 <= kc; p += 2) {
      for (int h = 0; h < 2; ++h) {
        cpu_f32x8 x0, x1;
        CPU_LOAD8(x0, bp + (p + h) * CPU_NR);
        CPU_LOAD8(x1, bp + (p + h) * CPU_NR + 8);
        c[2 * h] += a[p + h] * x0;
        c[2 * h + 1] += a[p + h] * x1;
      }
    }
    for (; p < kc; ++p) {
      cpu_f32x8 x0, x1;
      CPU_LOAD8(x0, bp + p * CPU_NR);
      CPU_LOAD8(x1, bp + p * CPU_NR + 8);
      c[0] += a[p] * x0;
      c[1] += a[p] * x1;
    }
    CPU_ROW_STORE(c[0] + c[2], c[1] + c[3], y + j, cpu_min64(CPU_NR, n - j), add);
  }
}

/* ------------------------------------------------------------------ direct rows */

/* y[0, n) += c0·b0 + c1·b1 + c2·b2 + c3·b3, added in that order (as four single-row
 * updates would): four rows of B per pass, so y is loaded and stored once per four. */
static inline __attribute__((always_inline)) void
cpu_axpy4(float *restrict y, const float c[4], const float *restrict b0, const float *restrict b1,
          const float *restrict b2, const float *restrict b3, int64_t n) {
  int64_t j = 0;
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
  for (; j + 8 <= n; j += 8) {
    cpu_f32x8 acc, x;
    CPU_LOAD8(acc, y + j);
    for (int r = 0; r < 8; ++r) {
      CPU_LOAD8(x, b + r * ldb + j);
      acc += c[r] * x;
    }
    CPU_STORE8(y + j, acc);
  }
  for (; j < n; ++j) {
    float acc = y[j];
    for (int r = 0; r < 8; ++r) acc += c[r] * b[r * ldb + j];
    y[j] = acc;
  }
}

#else /* no vector extensions: scalar loops */

static void cpu_micro_generic(int64_t kc, const float *ap, const float *bp, float *y, int64_t ldy,
                              int64_t mr, int64_t nr, bool add) {
  float tile[6 * CPU_NR] = {0};
  for (int64_t p = 0; p < kc; ++p)
    for (int r = 0; r < 6; ++r)
      for (int v = 0; v < CPU_NR; ++v) tile[r * CPU_NR + v] += ap[p * 6 + r] * bp[p * CPU_NR + v];
  cpu_tile_store(tile, y, ldy, mr, nr, add);
}

static void cpu_row_body(int64_t kc, const float *a, const float *bp, float *y, int64_t n,
                         bool add) {
  for (int64_t j = 0; j < n; j += CPU_NR, bp += kc * CPU_NR) {
    float tile[CPU_NR] = {0};
    for (int64_t p = 0; p < kc; ++p)
      for (int v = 0; v < CPU_NR; ++v) tile[v] += a[p] * bp[p * CPU_NR + v];
    cpu_tile_store(tile, y + j, 0, 1, cpu_min64(CPU_NR, n - j), add);
  }
}

static void cpu_axpy4(float *y, const float c[4], const float *b0, const float *b1, const float *b2,
                      const float *b3, int64_t n) {
  for (int64_t j = 0; j < n; ++j) y[j] += c[0] * b0[j] + c[1] * b1[j] + c[2] * b2[j] + c[3] * b3[j];
}

static void cpu_axpy8(float *y, const float c[8], const float *b, int64_t ldb, int64_t n) {
  for (int64_t j = 0; j < n; ++j)
    for (int r = 0; r < 8; ++r) y[j] += c[r] * b[r * ldb + j];
}
#endif

enum {
  CPU_DIRECT_JB = 512,       /* columns per inner block: four rows of it stay in L1 */
  CPU_DIRECT_PF_BYTES = 8192 /* rows segments shorter than this get software prefetch */
};

/* Requests rows [r0, r1) of B's segment at column j0, seg bytes each. */
static inline void cpu_prefetch_rows(const float *b, int64_t ldb, int64_t r0, int64_t r1,
                                     int64_t j0, int64_t seg) {
#if defined(__GNUC__)
  for (int64_t r = r0; r < r1; ++r) {
    const char *ahead = (const char *)(b + r * ldb + j0);
    for (int64_t o = 0; o < seg; o += 64) __builtin_prefetch(ahead + o, 0, 3);
  }
#else
  (void)b, (void)ldb, (void)r0, (void)r1, (void)j0, (void)seg;
#endif
}

/* y[i, j0:j1] += alpha·A(i, p)·B[p, j0:j1] over rows p in [p0, p1) of B (not
 * transposed), eight then four rows at a time; y has row stride ldy. When a row's run
 * is short (a few KiB, a new stream for the prefetchers each time), the rows a few
 * steps ahead are requested explicitly to keep enough lines in flight to read at
 * memory speed. */
static inline __attribute__((always_inline)) void cpu_direct_rows_body(const onyx__cpu_gemm *g,
                                                                       float *y, int64_t ldy,
                                                                       int64_t p0, int64_t p1,
                                                                       int64_t j0, int64_t j1) {
  const float *a = g->a, *b = g->b;
  int64_t seg = (j1 - j0) * (int64_t)sizeof(float);
  int64_t pf = seg < CPU_DIRECT_PF_BYTES && j1 - j0 < g->ldb ? 8 : 0; /* rows ahead */
  int64_t p = p0;
  for (; p + 8 <= p1; p += 8) {
    if (pf > 0) cpu_prefetch_rows(b, g->ldb, p + pf, cpu_min64(p + pf + 8, p1), j0, seg);
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
    if (pf > 0) cpu_prefetch_rows(b, g->ldb, p + pf, cpu_min64(p + pf + 4, p1), j0, seg);
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

/* ------------------------------------------------------------------ the builds */

static void cpu_row_generic(int64_t kc, const float *a, const float *bp, float *y, int64_t n,
                            bool add) {
  cpu_row_body(kc, a, bp, y, n, add);
}

static void cpu_direct_rows_generic(const onyx__cpu_gemm *g, float *y, int64_t ldy, int64_t p0,
                                    int64_t p1, int64_t j0, int64_t j1) {
  cpu_direct_rows_body(g, y, ldy, p0, p1, j0, j1);
}

/* The baseline build packs A always (micro_a NULL): its kernel reads each A value
 * twice, and a packed sliver is one stream where rows in place are six. */
static const onyx__cpu_gemm_isa cpu_isa_generic = {
    "generic", 6, cpu_micro_generic, NULL, cpu_row_generic, cpu_direct_rows_generic};

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define CPU_HAVE_X86_BUILDS 1

#define CPU_AVX2 __attribute__((target("avx2,fma")))
#define CPU_AVX512 __attribute__((target("avx512f,avx512vl,avx2,fma")))

CPU_AVX2 static void cpu_micro_avx2(int64_t kc, const float *ap, const float *bp, float *y,
                                    int64_t ldy, int64_t mr, int64_t nr, bool add) {
  cpu_micro_body(kc, ap, 0, bp, NULL, y, ldy, mr, nr, add, 6, false);
}
CPU_AVX2 static void cpu_micro_a_avx2(int64_t kc, const float *a, int64_t lda, const float *bp,
                                      const float *pf, float *y, int64_t ldy, int64_t mr,
                                      int64_t nr, bool add) {
  cpu_micro_body(kc, a, lda, bp, pf, y, ldy, mr, nr, add, 6, true);
}
CPU_AVX2 static void cpu_row_avx2(int64_t kc, const float *a, const float *bp, float *y, int64_t n,
                                  bool add) {
  cpu_row_body(kc, a, bp, y, n, add);
}
CPU_AVX2 static void cpu_direct_rows_avx2(const onyx__cpu_gemm *g, float *y, int64_t ldy,
                                          int64_t p0, int64_t p1, int64_t j0, int64_t j1) {
  cpu_direct_rows_body(g, y, ldy, p0, p1, j0, j1);
}

CPU_AVX512 static void cpu_micro_avx512(int64_t kc, const float *ap, const float *bp, float *y,
                                        int64_t ldy, int64_t mr, int64_t nr, bool add) {
  cpu_micro_body(kc, ap, 0, bp, NULL, y, ldy, mr, nr, add, 8, false);
}
CPU_AVX512 static void cpu_micro_a_avx512(int64_t kc, const float *a, int64_t lda, const float *bp,
                                          const float *pf, float *y, int64_t ldy, int64_t mr,
                                          int64_t nr, bool add) {
  cpu_micro_body(kc, a, lda, bp, pf, y, ldy, mr, nr, add, 8, true);
}

static const onyx__cpu_gemm_isa cpu_isa_avx2 = {
    "avx2", 6, cpu_micro_avx2, cpu_micro_a_avx2, cpu_row_avx2, cpu_direct_rows_avx2};
/* The row and direct loops gain nothing from the wider register file: AVX2 builds. */
static const onyx__cpu_gemm_isa cpu_isa_avx512 = {
    "avx512", 8, cpu_micro_avx512, cpu_micro_a_avx512, cpu_row_avx2, cpu_direct_rows_avx2};
#endif

const onyx__cpu_gemm_isa *onyx__cpu_gemm_isa_get(void) {
  const char *cap = getenv("ONYX_CPU_GEMM_ISA");
  if (cap != NULL && strcmp(cap, "generic") == 0) return &cpu_isa_generic;
#if defined(CPU_HAVE_X86_BUILDS)
  __builtin_cpu_init();
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl");
  if (avx512 && (cap == NULL || strcmp(cap, "avx2") != 0)) return &cpu_isa_avx512;
  if (avx2) return &cpu_isa_avx2;
#endif
  return &cpu_isa_generic;
}
