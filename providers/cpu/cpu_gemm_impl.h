/*
 * Private to the CPU provider: the pieces of the float32 GEMM shared by its files.
 *
 *   cpu_gemm.c         routes, blocking and the thread split (onyx__cpu_sgemm)
 *   cpu_gemm_pack.c    packing A and B into the micro-kernel's layouts, prepacking
 *   cpu_gemm_kernel.c  micro-kernels per instruction set, picked at run time
 *   cpu_gemm_direct.c  the packing-free route for products with few rows
 *
 * cpu_impl.h declares what the MatMul and Gemm kernels call.
 */
#ifndef ONYX_CPU_GEMM_IMPL_H
#define ONYX_CPU_GEMM_IMPL_H

#include "cpu_impl.h"

enum {
  ONYX__CPU_NR = 16,     /* columns of a micro-tile and of a packed B sliver */
  ONYX__CPU_MR_MAX = 8,  /* most rows of a micro-tile over the instruction sets */
  ONYX__CPU_KC = 256,    /* the deepest K slice (a B sliver slice stays in L1) */
  ONYX__CPU_DIRECT_M = 6 /* products with fewer rows than this skip packing */
};

/* ------------------------------------------------------------------ kernels */

/* y[mr×nr] += ap · bp over kc (y = ap · bp when !add: y is not read): ap holds the
 * ISA's `mr` floats per k (an A sliver), bp NR floats per k (a B sliver slice); y has
 * row pitch ldy. mr and nr may be smaller than the tile at an edge; the packed
 * operands are zero-padded to the full tile. */
typedef void (*onyx__cpu_micro_fn)(int64_t kc, const float *ap, const float *bp, float *y,
                                   int64_t ldy, int64_t mr, int64_t nr, bool add);

/* The same with A read in place (float32, not transposed, alpha 1): row r of the tile
 * at a + r·lda. Saves packing A when A is what a MatMul gets. pf (may be NULL) is the
 * B sliver slice that comes next, kc·NR floats, which the kernel requests into L2 as
 * it goes (a prepacked weight streams from memory). */
typedef void (*onyx__cpu_micro_a_fn)(int64_t kc, const float *a, int64_t lda, const float *bp,
                                     const float *pf, float *y, int64_t ldy, int64_t mr, int64_t nr,
                                     bool add);

/* y[0, n) += a · (B slivers) over kc for one row of A (= when !add): a holds kc
 * floats, bp the ceil(n/NR) slivers of one K slice one after the other, kc·NR floats
 * each. */
typedef void (*onyx__cpu_row_fn)(int64_t kc, const float *a, const float *bp, float *y, int64_t n,
                                 bool add);

/* y[i, j0:j1] += alpha·A(i, p)·B[p, j0:j1] for p in [p0, p1), B read in place (not
 * transposed); y has row pitch ldy. The direct route's inner loop. */
typedef void (*onyx__cpu_rows_fn)(const onyx__cpu_gemm *g, float *y, int64_t ldy, int64_t p0,
                                  int64_t p1, int64_t j0, int64_t j1);

/* The kernels of one instruction set. */
typedef struct onyx__cpu_gemm_isa {
  const char *name; /* "avx512", "avx2" or "generic", for messages and benchmarks */
  int64_t mr;       /* rows of a micro-tile: the height of a packed A sliver */
  onyx__cpu_micro_fn micro;
  onyx__cpu_micro_a_fn micro_a; /* NULL: this build always packs A */
  onyx__cpu_row_fn row;
  onyx__cpu_rows_fn direct_rows;
} onyx__cpu_gemm_isa;

/* The best kernels this CPU runs: AVX-512 (F and VL: 32 vector registers, so an
 * 8×16 tile), else AVX2 with FMA (6×16), else the baseline build. The environment
 * variable ONYX_CPU_GEMM_ISA=avx2|generic caps the choice (tests and benchmarks run
 * every route on one machine). The same answer every call within a process. */
const onyx__cpu_gemm_isa *onyx__cpu_gemm_isa_get(void);

/* ------------------------------------------------------------------ packing */

/* Rows of the K slice starting at row pc of a depth-k product: every slice but the
 * last is kc deep. The slices are the same for prepacked B and per-call packing. */
int64_t onyx__cpu_gemm_kc(int64_t k);

/* alpha·op(A)[mc×kc] at (ic, pc) → ceil(mc/mr) slivers of kc·mr floats (zero rows
 * below mc). */
void onyx__cpu_pack_a(const onyx__cpu_gemm *g, int64_t ic, int64_t pc, int64_t mc, int64_t kc,
                      int64_t mr, float *dst);

/* op(B)[kc×nc] at (pc, jc) → ceil(nc/NR) slivers of kc·NR floats, zero-padded. */
void onyx__cpu_pack_b_panel(const onyx__cpu_gemm *g, int64_t pc, int64_t jc, int64_t kc, int64_t nc,
                            float *dst);

/* Where the NR-wide sliver s of the K slice starting at row pc lies in a prepacked B:
 * each slice is n_pad columns of slivers, kc rows of NR floats each. */
static inline const float *onyx__cpu_packed_b_at(const onyx__cpu_packed_b *pb, int64_t pc,
                                                 int64_t s) {
  int64_t kc = pb->k - pc < pb->kc ? pb->k - pc : pb->kc;
  return pb->data + pc * pb->n_pad + s * kc * ONYX__CPU_NR;
}

/* ------------------------------------------------------------------ direct route */

/* Scratch of the direct route in floats (partial sums when it splits K). */
uint64_t onyx__cpu_direct_scratch(int64_t m, int64_t n, int64_t k, uint32_t tasks);

/* Runs a product with fewer than ONYX__CPU_DIRECT_M rows, float32, B in place. */
void onyx__cpu_direct(const onyx__cpu_provider *p, const onyx__cpu_gemm *g, float *scratch);

#endif /* ONYX_CPU_GEMM_IMPL_H */
