/*
 * Matrix multiply cores shared by MatMul and Gemm.
 *
 * float32 (and float16/bfloat16, widened while packing) use the blocked scheme of
 * Goto and van de Geijn. The product is cut into work items, each a row block of Y
 * (up to MC rows) by a column panel (a multiple of the 16-wide sliver, 256 to 1024
 * columns: the fewer the rows, the wider):
 *
 *   for each K slice (kc rows, cpu_gemm_pack.c)
 *     A slice of the block: alpha·A in mr-tall slivers      (stays in L2)
 *     B slice of the panel: prepacked, or packed now       (slivers of kc × 16)
 *     for each sliver:                                      (stays in L1)
 *       for each mr-row tile of the block: micro-kernel   (cpu_gemm_kernel.c)
 *
 * The Y block (128 KiB) stays in L2 across the K slices; the first slice
 * stores into Y instead of adding when the caller has nothing there (beta = 0), so Y
 * is never zeroed first. The items go to the threads through one shared counter, so
 * the threads balance themselves with no step that waits for all of them. Items run
 * panel by panel, so the threads share one B panel at a time, and there are enough
 * of them that no thread idles when there are few rows (a prompt of 32 tokens has one
 * row block: the panels are the items).
 *
 * A float32 A that is not transposed and has alpha 1 (what a MatMul gets) is read in
 * place: the micro-kernel follows its rows. Any other A is packed once per product
 * for all of K: with one row block, by each thread into its own slot of the declared
 * scratch as it starts; with several, by all threads in a first pass into one copy of
 * every block. A constant B (a weight) is packed once, when the kernel is created,
 * for all of K and N (onyx__cpu_pack_b); a product then reads it as is. Any other B
 * is packed a panel slice at a time by the item that uses it, which repeats the copy
 * once per row block: one copy per MC multiply-adds, a small price for items that
 * need no ordering between them.
 *
 * One row of A against a prepacked B (a decoder's matrix-vector step on its weights)
 * runs a row kernel over the panels instead of micro-tiles. Products with fewer than
 * six rows whose B is not prepacked skip packing altogether (cpu_gemm_direct.c).
 *
 * float64 and integer products are rarer on this path; they get loop orders that
 * keep the innermost loop contiguous but no packing.
 */
#include <stdatomic.h>
#include <string.h>

#include "cpu_gemm_impl.h"

enum {
  CPU_NR = ONYX__CPU_NR,
  CPU_MC = 144,        /* most rows of a row block: 144 × 256 floats of A = 144 KiB */
  CPU_Y_BLOCK = 32768, /* floats of a Y block (128 KiB, in L2 beside A's slice and B's) */
  CPU_NC_MIN = 256,    /* columns of a panel: Y_BLOCK / rows, within these bounds */
  CPU_NC_MAX = 1024,
  CPU_MIN_MACS = 1 << 15 /* the least work worth a thread of its own */
};

static int64_t cpu_min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t cpu_max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t cpu_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t cpu_round_up(int64_t v, int64_t m) { return cpu_ceil_div(v, m) * m; }

/* The packing-free route: few rows, float32 operands, B not prepacked. */
static bool cpu_sgemm_direct(int64_t m, uint32_t dtype, bool prepacked) {
  return m < ONYX__CPU_DIRECT_M && dtype == ONYX_DTYPE_FLOAT32 && !prepacked;
}

/* How the blocked route cuts a product into items and spreads them. */
typedef struct cpu_plan {
  const onyx__cpu_gemm_isa *isa;
  bool row;        /* one row against a prepacked B: the row kernel */
  int64_t mr;      /* height of an A sliver (1 for the row kernel) */
  int64_t kc;      /* K slice depth */
  int64_t mc;      /* rows of a row block */
  int64_t rb;      /* row blocks */
  int64_t nc;      /* columns of a panel (a multiple of NR) */
  int64_t cb;      /* panels */
  int64_t slots;   /* tasks run at once, each with its own scratch slot */
  bool pack_b;     /* B packed per item (not prepacked) */
  bool a_in_place; /* A read where it is: float32, not transposed, alpha 1 */
} cpu_plan;

/* Panel width in slivers (at most max_s) for rb row blocks on t threads: the one
 * whose slowest thread has the least work, counted as its rounds of items times the
 * item's slivers plus one (an item's start-up). 304 slivers (N = 4864) in items of
 * 16 are 19: one thread does 10 and the other 9, 5% idle; in items of 14 they are
 * 22, 11 each. A tie keeps the wider panel. */
static int64_t cpu_balanced_nc(int64_t n, int64_t rb, int64_t max_s, int64_t t) {
  int64_t slivers = cpu_ceil_div(n, CPU_NR), best = 1, best_cost = INT64_MAX;
  for (int64_t w = cpu_min64(max_s, slivers); w >= 1; --w) {
    int64_t rounds = cpu_ceil_div(rb * cpu_ceil_div(slivers, w), t);
    int64_t cost = rounds * (w + 1);
    if (cost < best_cost) {
      best = w;
      best_cost = cost;
    }
  }
  return best;
}

static cpu_plan cpu_plan_make(const onyx__cpu_gemm *g, uint32_t tasks) {
  const int64_t m = g->m, n = g->n, k = g->k;
  const bool prepacked = g->packed_b != NULL;
  cpu_plan pl = {.isa = onyx__cpu_gemm_isa_get(), .row = m == 1 && prepacked};
  int64_t t = tasks > 0 ? (int64_t)tasks : 1;
  pl.mr = pl.row ? 1 : pl.isa->mr;
  pl.kc = onyx__cpu_gemm_kc(k);
  pl.pack_b = !prepacked;
  /* What a MatMul gets needs no packing: its rows are streams the kernel follows. */
  pl.a_in_place = g->ab_dtype == ONYX_DTYPE_FLOAT32 && !g->trans_a && g->alpha == 1.0f &&
                  (pl.row || pl.isa->micro_a != NULL);
  /* Row blocks of equal height, whole tiles each. */
  pl.rb = cpu_ceil_div(m, CPU_MC);
  pl.mc = pl.rb == 1 ? m : cpu_round_up(cpu_ceil_div(m, pl.rb), pl.mr);
  pl.rb = cpu_ceil_div(m, pl.mc);
  /* Panels as wide as a Y block of these rows allows; B packed per call takes a slot
   * of kc × panel floats, so at most half the widest. */
  int64_t nc_max = pl.pack_b ? CPU_NC_MAX / 2 : CPU_NC_MAX;
  int64_t nc = cpu_max64(CPU_NC_MIN, cpu_min64(nc_max, CPU_Y_BLOCK / pl.mc));
  if (pl.row) {
    /* Enough items for every thread, and whole rounds of them while they are few, so
     * that no thread waits through a last item alone. */
    int64_t cb = cpu_ceil_div(n, nc);
    if (pl.rb * cb < t) cb = cpu_ceil_div(t, pl.rb);
    while (pl.rb * cb < 4 * t && pl.rb * cb % t != 0) ++cb;
    pl.nc = cpu_round_up(cpu_ceil_div(n, cb), CPU_NR);
  } else {
    pl.nc = cpu_balanced_nc(n, pl.rb, nc / CPU_NR, t) * CPU_NR;
  }
  pl.cb = cpu_ceil_div(n, pl.nc);
  /* Small products stay on fewer threads: a hand-off costs microseconds. */
  int64_t by_work = cpu_max64(1, m * n * k / CPU_MIN_MACS);
  pl.slots = cpu_min64(cpu_min64(t, pl.rb * pl.cb), by_work);
  return pl;
}

/* Packed A (unless read in place), for all of K: with a single row block (a prompt),
 * each slot packs its own copy while it works, so there is nothing to wait for; with
 * several, one copy of every block is packed by all the threads first (else each item
 * would pack its block again). B, when packed per call, takes one panel slice per
 * slot. */
static bool cpu_plan_shared_a(const cpu_plan *pl) { return pl->rb > 1 && !pl->a_in_place; }

static int64_t cpu_plan_block_floats(const cpu_plan *pl, int64_t k) {
  return cpu_round_up(pl->mc, pl->mr) * k;
}

static int64_t cpu_plan_a_floats(const cpu_plan *pl, int64_t k) {
  if (pl->a_in_place) return 0;
  return (cpu_plan_shared_a(pl) ? pl->rb : pl->slots) * cpu_plan_block_floats(pl, k);
}

static int64_t cpu_plan_b_floats(const cpu_plan *pl) { return pl->pack_b ? pl->kc * pl->nc : 0; }

void onyx__cpu_sgemm_scratch(const onyx__cpu_gemm *g, uint32_t tasks, uint64_t *out_pack_a,
                             uint64_t *out_pack_b) {
  *out_pack_a = *out_pack_b = 0;
  if (g->m <= 0 || g->n <= 0 || g->k <= 0) return;
  if (cpu_sgemm_direct(g->m, g->ab_dtype, g->packed_b != NULL)) {
    *out_pack_a = onyx__cpu_direct_scratch(g->m, g->n, g->k, tasks);
    return;
  }
  cpu_plan pl = cpu_plan_make(g, tasks);
  *out_pack_a = (uint64_t)cpu_plan_a_floats(&pl, g->k);
  *out_pack_b = (uint64_t)(pl.slots * cpu_plan_b_floats(&pl));
}

/* ------------------------------------------------------------------ blocked route */

typedef struct cpu_run {
  const onyx__cpu_gemm *g;
  cpu_plan pl;
  float *pack_a, *pack_b;
  atomic_llong next; /* the next item to take */
} cpu_run;

/* One item: row block ib by panel jb of Y, over all of K. pa holds the block's A for
 * all of K, or gets it slice by slice when `pack_a` (the first item of a slot that
 * packs its own). */
static void cpu_item(const cpu_run *r, int64_t ib, int64_t jb, const float *pa, float *pack_a,
                     float *pb) {
  const onyx__cpu_gemm *g = r->g;
  const cpu_plan *pl = &r->pl;
  const int64_t mr = pl->mr;
  int64_t i0 = ib * pl->mc, mc = cpu_min64(pl->mc, g->m - i0);
  int64_t j0 = jb * pl->nc, nc = cpu_min64(pl->nc, g->n - j0);
  float *y = g->y + i0 * g->ldy + j0;
  for (int64_t pc = 0; pc < g->k; pc += pl->kc) {
    int64_t kc = cpu_min64(pl->kc, g->k - pc);
    const bool add = pc > 0 || !g->overwrite_y;
    const float *ap =
        pl->a_in_place ? (const float *)g->a + i0 * g->lda + pc : pa + cpu_round_up(mc, mr) * pc;
    if (pack_a != NULL) onyx__cpu_pack_a(g, i0, pc, mc, kc, mr, pack_a + cpu_round_up(mc, mr) * pc);
    const float *bp = pb;
    if (g->packed_b != NULL)
      bp = onyx__cpu_packed_b_at(g->packed_b, pc, j0 / CPU_NR);
    else
      onyx__cpu_pack_b_panel(g, pc, j0, kc, nc, pb);
    if (pl->row) {
      pl->isa->row(kc, ap, bp, y, nc, add);
      continue;
    }
    for (int64_t js = 0; js < nc; js += CPU_NR, bp += kc * CPU_NR) {
      int64_t nr = cpu_min64(CPU_NR, nc - js);
      /* A prepacked B comes from memory: the first tile requests the next sliver
       * slice, in this panel or the next K slice's first. */
      const float *next = NULL;
      if (g->packed_b != NULL && js + CPU_NR < nc)
        next = bp + kc * CPU_NR;
      else if (g->packed_b != NULL && pc + kc < g->k)
        next = onyx__cpu_packed_b_at(g->packed_b, pc + kc, j0 / CPU_NR);
      for (int64_t is = 0; is < mc; is += mr) {
        float *yt = y + is * g->ldy + js;
        int64_t h = cpu_min64(mr, mc - is);
        if (pl->a_in_place)
          pl->isa->micro_a(kc, ap + is * g->lda, g->lda, bp, is == 0 ? next : NULL, yt, g->ldy, h,
                           nr, add);
        else
          pl->isa->micro(kc, ap + is * kc, bp, yt, g->ldy, h, nr, add);
      }
    }
  }
}

/* A slot takes items until none are left: panel by panel, row blocks within, so that
 * the threads share one B panel at a time. */
static void cpu_slot_task(void *arg, size_t slot) {
  cpu_run *r = arg;
  const cpu_plan *pl = &r->pl;
  const int64_t block = cpu_plan_block_floats(pl, r->g->k), items = pl->rb * pl->cb;
  bool shared = cpu_plan_shared_a(pl);
  float *own = shared || pl->a_in_place ? NULL : r->pack_a + (int64_t)slot * block;
  float *pb = pl->pack_b ? r->pack_b + (int64_t)slot * cpu_plan_b_floats(pl) : NULL;
  for (bool first = true;; first = false) {
    int64_t item = atomic_fetch_add_explicit(&r->next, 1, memory_order_relaxed);
    if (item >= items) break;
    int64_t ib = item % pl->rb;
    const float *pa = shared ? r->pack_a + ib * block : own;
    cpu_item(r, ib, item / pl->rb, pa, first ? own : NULL, pb);
  }
}

/* The shared pre-pass: task t packs one (row block, K slice) of A. */
static void cpu_pack_a_task(void *arg, size_t task) {
  const cpu_run *r = arg;
  const cpu_plan *pl = &r->pl;
  const onyx__cpu_gemm *g = r->g;
  int64_t slices = cpu_ceil_div(g->k, pl->kc);
  int64_t ib = (int64_t)task / slices, pc = (int64_t)task % slices * pl->kc;
  int64_t i0 = ib * pl->mc, mc = cpu_min64(pl->mc, g->m - i0);
  float *dst = r->pack_a + ib * cpu_plan_block_floats(pl, g->k) + cpu_round_up(mc, pl->mr) * pc;
  onyx__cpu_pack_a(g, i0, pc, mc, cpu_min64(pl->kc, g->k - pc), pl->mr, dst);
}

/* Y = 0, for the routes that only add into Y. */
static void cpu_zero_y(const onyx__cpu_gemm *g) {
  for (int64_t i = 0; i < g->m; ++i) memset(g->y + i * g->ldy, 0, (size_t)g->n * sizeof(float));
}

void onyx__cpu_sgemm(const onyx__cpu_provider *p, const onyx__cpu_gemm *g, float *pack_a,
                     float *pack_b) {
  if (g->m <= 0 || g->n <= 0) return;
  if (g->k <= 0) {
    if (g->overwrite_y) cpu_zero_y(g);
    return;
  }
  uint32_t tasks = p != NULL ? p->num_threads : 1;
  bool prepacked = g->packed_b != NULL;
  if (cpu_sgemm_direct(g->m, g->ab_dtype, prepacked)) {
    if (g->overwrite_y) cpu_zero_y(g);
    onyx__cpu_direct(p, g, pack_a);
    return;
  }
  cpu_run r = {.g = g, .pl = cpu_plan_make(g, tasks), .pack_a = pack_a, .pack_b = pack_b};
  atomic_init(&r.next, 0);
  if (cpu_plan_shared_a(&r.pl))
    onyx__cpu_parallel_for(p, (size_t)(r.pl.rb * cpu_ceil_div(g->k, r.pl.kc)), cpu_pack_a_task, &r);
  onyx__cpu_parallel_for(p, (size_t)r.pl.slots, cpu_slot_task, &r);
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
