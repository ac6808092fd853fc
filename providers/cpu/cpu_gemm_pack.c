/*
 * Packing for the float32 GEMM: op(A) and op(B) copied into the layouts the
 * micro-kernels read, so that every operand read in the inner loop is contiguous
 * whatever the transposes, 16-bit inputs are converted once instead of once per use,
 * and edges are zero-padded so the micro-kernel always runs a full tile.
 *
 *   A: per K slice, slivers of mr rows (the kernel's tile height), kc columns of mr
 *      floats each, alpha folded in.
 *   B: per K slice, slivers of 16 columns, kc rows of 16 floats each. A constant B is
 *      packed once for all of K and N at kernel creation (onyx__cpu_pack_b); others
 *      a panel at a time into the product's scratch (onyx__cpu_pack_b_panel).
 *
 * Both use the same K slices (onyx__cpu_gemm_kc), so one micro-kernel call reads
 * either kind of B the same way.
 */
#include <string.h>

#include "cpu_gemm_impl.h"

enum {
  CPU_NR = ONYX__CPU_NR,
  CPU_PF_ROWS = 4,    /* rows of B ahead that row-wise packing requests */
  CPU_PACK_COLS = 512 /* columns of a prepacking task */
};

static int64_t cpu_min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t cpu_round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

/* Equal slices of at most KC rows: 896 is four slices of 224, not three of 256 and a
 * short one whose Y updates would cost as much as a long one's. */
int64_t onyx__cpu_gemm_kc(int64_t k) {
  if (k <= ONYX__CPU_KC) return k > 0 ? k : 1;
  int64_t slices = (k + ONYX__CPU_KC - 1) / ONYX__CPU_KC;
  return (k + slices - 1) / slices;
}

/* ------------------------------------------------------------------ A */

void onyx__cpu_pack_a(const onyx__cpu_gemm *g, int64_t ic, int64_t pc, int64_t mc, int64_t kc,
                      int64_t mr, float *dst) {
  const bool f32 = g->ab_dtype == ONYX_DTYPE_FLOAT32;
  for (int64_t is = 0; is < mc; is += mr, dst += kc * mr) {
    int64_t h = cpu_min64(mr, mc - is), row0 = ic + is;
    if (f32 && !g->trans_a) {
      /* The common case without the per-element type switch: rows read in order. */
      for (int64_t r = 0; r < h; ++r) {
        const float *src = (const float *)g->a + (row0 + r) * g->lda + pc;
        for (int64_t p = 0; p < kc; ++p) dst[p * mr + r] = g->alpha * src[p];
      }
    } else if (f32) {
      for (int64_t p = 0; p < kc; ++p) {
        const float *src = (const float *)g->a + (pc + p) * g->lda + row0;
        for (int64_t r = 0; r < h; ++r) dst[p * mr + r] = g->alpha * src[r];
      }
    } else {
      for (int64_t p = 0; p < kc; ++p)
        for (int64_t r = 0; r < h; ++r) {
          int64_t c = pc + p, row = row0 + r;
          dst[p * mr + r] =
              g->alpha * onyx__cpu_load_f32(g->ab_dtype, g->a,
                                            g->trans_a ? c * g->lda + row : row * g->lda + c);
        }
    }
    for (int64_t r = h; r < mr; ++r)
      for (int64_t p = 0; p < kc; ++p) dst[p * mr + r] = 0.0f;
  }
}

/* ------------------------------------------------------------------ B */

/* op(B)[kc×w] at (pc, col) → one sliver of kc rows, zero-padded to NR. Each source
 * read is contiguous: along a row of B for B, along a row of B for Bᵀ. */
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

/* float32 B, not transposed: the panel's slivers filled row by row of B, so that each
 * row segment is one contiguous read. Going sliver by sliver instead reads one cache
 * line from each of kc rows far apart, which the hardware prefetchers cannot follow. */
static void cpu_pack_b_rows(const onyx__cpu_gemm *g, int64_t pc, int64_t jc, int64_t kc, int64_t nc,
                            float *dst) {
  const float *b = g->b;
  int64_t slivers = (nc + CPU_NR - 1) / CPU_NR;
  for (int64_t p = 0; p < kc; ++p) {
    const float *src = b + (pc + p) * g->ldb + jc;
#if defined(__GNUC__)
    /* Each row segment is a new short stream; asking for a later row's lines now keeps
     * enough of them in flight to read at the memory's bandwidth. */
    if (p + CPU_PF_ROWS < kc) {
      const char *ahead = (const char *)(src + CPU_PF_ROWS * g->ldb);
      for (int64_t o = 0; o < nc * 4; o += 64) __builtin_prefetch(ahead + o, 0, 3);
    }
#endif
    for (int64_t sl = 0; sl < slivers; ++sl) {
      int64_t js = sl * CPU_NR, w = cpu_min64(CPU_NR, nc - js);
      float *d = dst + (sl * kc + p) * CPU_NR;
      if (w == CPU_NR) {
        memcpy(d, src + js, CPU_NR * sizeof(float));
      } else {
        for (int64_t v = 0; v < w; ++v) d[v] = src[js + v];
        for (int64_t v = w; v < CPU_NR; ++v) d[v] = 0.0f;
      }
    }
  }
}

void onyx__cpu_pack_b_panel(const onyx__cpu_gemm *g, int64_t pc, int64_t jc, int64_t kc, int64_t nc,
                            float *dst) {
  if (!g->trans_b && g->ab_dtype == ONYX_DTYPE_FLOAT32) {
    cpu_pack_b_rows(g, pc, jc, kc, nc, dst);
    return;
  }
  for (int64_t js = 0; js < nc; js += CPU_NR)
    cpu_pack_b_sliver(g, pc, jc + js, kc, cpu_min64(CPU_NR, nc - js),
                      dst + (js / CPU_NR) * kc * CPU_NR);
}

uint64_t onyx__cpu_packed_b_floats(int64_t k, int64_t n) {
  if (k <= 0 || n <= 0) return 0;
  return (uint64_t)(k * cpu_round_up(n, CPU_NR));
}

/* Prepacking: task t packs one (K slice, column range) piece of the whole B. */
typedef struct cpu_prepack {
  const onyx__cpu_gemm *g;
  onyx__cpu_packed_b pb;
  float *dst;
  int64_t col_tasks; /* column ranges per K slice */
} cpu_prepack;

static void cpu_prepack_task(void *arg, size_t task) {
  const cpu_prepack *t = arg;
  int64_t pc = (int64_t)task / t->col_tasks * t->pb.kc;
  int64_t jc = (int64_t)task % t->col_tasks * CPU_PACK_COLS;
  int64_t kc = cpu_min64(t->pb.kc, t->pb.k - pc), nc = cpu_min64(CPU_PACK_COLS, t->pb.n - jc);
  float *dst = t->dst + (onyx__cpu_packed_b_at(&t->pb, pc, jc / CPU_NR) - t->pb.data);
  onyx__cpu_pack_b_panel(t->g, pc, jc, kc, nc, dst);
}

void onyx__cpu_pack_b(const onyx__cpu_provider *p, const onyx__cpu_gemm *g, float *dst,
                      onyx__cpu_packed_b *out) {
  *out = (onyx__cpu_packed_b){.k = g->k,
                              .n = g->n,
                              .kc = onyx__cpu_gemm_kc(g->k),
                              .n_pad = cpu_round_up(g->n, CPU_NR),
                              .data = dst};
  if (g->k <= 0 || g->n <= 0) return;
  cpu_prepack t = {g, *out, dst, (g->n + CPU_PACK_COLS - 1) / CPU_PACK_COLS};
  int64_t slices = (g->k + out->kc - 1) / out->kc;
  onyx__cpu_parallel_for(p, (size_t)(slices * t.col_tasks), cpu_prepack_task, &t);
}
