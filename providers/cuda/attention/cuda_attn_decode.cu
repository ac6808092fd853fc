/*
 * The decode route (float16, bfloat16; head size 64 or 128): at most 16 rows (query rows
 * × group heads) per kv head, long key ranges. Memory-bound: the floor is the K and V
 * bytes over the copy bandwidth, so everything here is about streaming them once.
 *
 * Why it is shaped this way:
 * - A work unit is (batch, kv head, key split). Its rows are the virtual rows
 *   r = s·group + hg of the flash kernel: every query head of the KV group for each
 *   query position, padded to one 16-row m16n8k16 tile, so each K/V row is read once for
 *   the whole group. Splits (the plan's, about one unit per SM) cut the key range of a
 *   (b, kv head) into equal runs of tiles.
 * - The grid has at most one CTA per SM; CTA c takes units c, c + grid, ... The K/V ring
 *   stays full across units: warp 0 is a producer and the NCW consumer warps each take
 *   KW keys of every tile (their own online-softmax state), freeing the stage with one
 *   mbarrier arrival each. No __syncthreads in the loop: the consumers' pace never stalls
 *   the loads.
 * - Loads: the producer warp issues 16-byte cp.async (under an L2 evict-first policy:
 *   the K/V stream is read once) signalled with cp.async.mbarrier.arrive. A TMA variant
 *   (one thread, a box per 64 columns of K and of V on the stage's mbarrier) measured
 *   slower (run D2) and stays for the benchmark. Both write the same layout: rows of
 *   128-byte swizzled 64-column blocks (TMA's SWIZZLE_128B), which ldmatrix reads
 *   without bank conflicts and without padding.
 * - Scores and P·V run on the tensor cores (the flash kernel's fragment code); Q stays
 *   in registers for the unit. KW = 32 gives each warp four independent score chains
 *   and one softmax per 32 keys (the 16-key step is a chain of dependent products).
 * - At the end of a unit the warp states are merged pairwise in shared memory (a tree:
 *   the buffer holds half the warps, so the ring keeps its stages). Without a split that
 *   is the output; with one, each unit writes its (m, l, O) partial, and the last unit
 *   of a (b, kv head) to arrive (an atomic counter, zeroed on the stream before the
 *   launch) merges them, 8 splits' partials a load round: no second kernel.
 * - append (a GQA shared buffer): the unit of split 0 writes the new rows into the
 *   present itself (keys rotated, as onyx__cuda_kv_fill would) and uses them from a
 *   separate 16-row shared tile; the cache tiles never use those rows (cp.async does not
 *   load them, TMA's are masked and zeroed), so the two fill launches go.
 * - Keys a row may not see (window, causal within a short chunk, the key limit, rows
 *   not loaded) are masked with a select; tiles wholly inside every row's range skip
 *   the checks. Value rows outside the unit's keys are zeros before P·V (cp.async
 *   zero-fills them; a TMA box loads whatever the buffer holds there, so the consumer
 *   warp zeroes its rows of a boundary tile): 0·NaN never reaches O.
 * - Variants (tile keys, consumer warps, stages, TMA or cp.async, an L2 evict-first
 *   hint, units prepared ahead) are templates; onyx__cuda_attn_decode_variant picks one
 *   for tests and the benchmark. Production routes by units a CTA (production_variant):
 *   units prepared ahead where the grid deals some CTA several units, v3 otherwise
 *   (PERF_NOTES.md, "Routing by units a CTA").
 * - Units prepared ahead (PRE): a CTA with several units pays each boundary on the
 *   consumers' path (the merge's barriers, then seqlens → geometry → Q, two dependent
 *   global round trips) while the ring waits full. There a unit warp loads the next
 *   unit's geometry, Q and appended rows during the current one, and the merge tree
 *   lets each warp go on once its state is put; warp 0 stores from registers.
 */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include <atomic>
#include <mutex>

#include "cuda_attn_device.cuh"
#include "cuda_attn_impl.h"
#include "cuda_attn_mma.cuh"

namespace onyx_cuda_attn {
namespace decode {

/* ------------------------------------------------------------------ PTX wrappers */

__device__ __forceinline__ void mbar_init(uint64_t *bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t *bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
/* One arrival on `bar` once every cp.async this thread issued so far has landed (the
 * barrier's count includes it: .noinc). */
__device__ __forceinline__ void cp_async_arrive(uint64_t *bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_addr(bar))
               : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_all;\n" ::: "memory");
}
/* 16 bytes global → shared (a shared address), zero-filled when !pred; with EF under
 * an L2 policy (evict-first: the streamed K/V is read once), with PF asking L2 for the
 * whole 256-byte block. */
template <bool EF, bool PF>
__device__ __forceinline__ void cp_async16_at(uint32_t dst, const void *src, bool pred,
                                              uint64_t policy) {
  int n = pred ? 16 : 0;
  if (EF && PF)
    asm volatile(
        "cp.async.cg.shared.global.L2::cache_hint.L2::256B [%0], [%1], 16, %2, %3;\n" ::"r"(dst),
        "l"(src), "r"(n), "l"(policy));
  else if (EF)
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(dst),
                 "l"(src), "r"(n), "l"(policy));
  else
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n));
}
__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(p));
  return p;
}
/* Waits until the phase of parity `parity` has completed. */
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity) {
#if __CUDA_ARCH__ >= 900
  asm volatile("{\n.reg .pred done;\nWAIT:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
               "@!done bra WAIT;\n}\n" ::"r"(smem_addr(bar)),
               "r"(parity)
               : "memory");
#else
  asm volatile("{\n.reg .pred done;\nWAIT:\n"
               "mbarrier.test_wait.parity.shared::cta.b64 done, [%0], %1;\n"
               "@!done bra WAIT;\n}\n" ::"r"(smem_addr(bar)),
               "r"(parity)
               : "memory");
#endif
}
/* Named barrier 1 over the consumer threads (the producer warp never joins). */
template <int N> __device__ __forceinline__ void consumers_sync() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(N) : "memory");
}
/* Named barrier ID over N threads (whole warps): arrive and go on (this thread's
 * earlier memory accesses are performed when the barrier completes), or wait for it. */
template <int ID, int N> __device__ __forceinline__ void bar_arrive() {
  asm volatile("bar.arrive %0, %1;\n" ::"n"(ID), "n"(N) : "memory");
}
template <int ID, int N> __device__ __forceinline__ void bar_wait() {
  asm volatile("bar.sync %0, %1;\n" ::"n"(ID), "n"(N) : "memory");
}
__device__ __forceinline__ void ldsm4(uint32_t (&r)[4], uint32_t a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
__device__ __forceinline__ void ldsm4_t(uint32_t (&r)[4], uint32_t a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
__device__ __forceinline__ void st_zero16(uint32_t a) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(a), "r"(0u) : "memory");
}

#if __CUDA_ARCH__ >= 900
/* TMA (sm_90): barrier-init visibility, expected bytes, one 4-D box, proxy order. */
__device__ __forceinline__ void mbar_fence_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t *bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
}
/* Box (c0 innermost .. c3) of the map into shared memory at dst, completing bar's bytes;
 * with EF an L2 evict-first policy (the streamed K/V is read once). */
template <bool EF>
__device__ __forceinline__ void tma_box(uint32_t dst, const void *map, int c0, int c1, int c2,
                                        int c3, uint64_t *bar, uint64_t policy) {
  if (EF)
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 ".L2::cache_hint [%0], [%1, {%2, %3, %4, %5}], [%6], %7;\n" ::"r"(dst),
                 "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_addr(bar)),
                 "l"(policy)
                 : "memory");
  else
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
                 "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_addr(bar))
                 : "memory");
}
/* Asks L2 for `bytes` (a multiple of 16) from p (16-byte aligned); nothing lands in
 * shared memory. */
__device__ __forceinline__ void l2_prefetch(const void *p, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(p), "r"(bytes) : "memory");
}
/* Orders this thread's generic shared-memory writes before later TMA writes there. */
__device__ __forceinline__ void fence_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
#endif

/* ------------------------------------------------------------------ configuration */

/* A variant: NCW consumer warps, each KW keys of every tile (BC = NCW·KW keys a tile),
 * ST ring stages, TMA boxes or cp.async, an L2 evict-first hint, a 256-byte L2 prefetch
 * (cp.async only), a bulk L2 prefetch of the tile PD ahead (cp.async, contiguous rows),
 * units prepared ahead (PRE: a warp of its own loads the next unit's geometry, Q and
 * appended rows while the consumers stream the current one; the merge waits only where
 * a warp needs another's state). */
template <int NCW_, int KW_, int ST_, bool TMA_, bool EF_ = false, bool PF_ = false, int PD_ = 0,
          bool PRE_ = false>
struct Var {
  static constexpr int NCW = NCW_, KW = KW_, ST = ST_;
  static constexpr bool TMA = TMA_, EF = EF_, PF = PF_, PRE = PRE_;
  static constexpr int PD = PD_; /* cp.async: tiles PD ahead asked into L2 (0: none) */
};

template <int D, class V> struct Cfg {
  static constexpr int NCW = V::NCW, KW = V::KW, ST = V::ST;
  static constexpr int BC = NCW * KW; /* keys per tile */
  static constexpr int ROWS = 16;     /* virtual rows of a unit */
  /* the producer, the consumers and (PRE) the unit warp */
  static constexpr int THREADS = 32 * (NCW + 1 + (V::PRE ? 1 : 0));
  static constexpr int SUB = BC * 128;    /* bytes of one 64-column swizzled block of a tile */
  static constexpr int TILE = BC * D * 2; /* bytes of one K or V stage */
  static constexpr int XSUB = 16 * 128;   /* the appended rows' tiles: 16 rows */
  static constexpr int XTILE = 16 * D * 2;
  static constexpr int QLD = D + 8;     /* padded Q row (elements): ldmatrix without conflicts */
  static constexpr int OLD = D + 4;     /* padded float row of a merge slot */
  static constexpr int SLOTS = NCW / 2; /* merge slots: half the warps write, half fold */
  static constexpr int Q_BYTES = ROWS * QLD * 2;
  static constexpr int O_BYTES = SLOTS * ROWS * OLD * 4;
  static constexpr int QX_BYTES = Q_BYTES + 2 * XTILE;
  static constexpr int U_BYTES =
      V::PRE ? QX_BYTES + O_BYTES : (QX_BYTES > O_BYTES ? QX_BYTES : O_BYTES);
  /* Offsets from the 1024-byte aligned base (the swizzle's atoms). Q, the appended tiles
   * and the merge slots share one region: Q and the appended rows are used at a unit's
   * start, the slots at its end, with consumer barriers between. With PRE they do not:
   * the next unit's Q and rows land while this one's warps still merge. */
  static constexpr int K_OFF = 0;
  static constexpr int V_OFF = ST * TILE;
  static constexpr int U_OFF = 2 * ST * TILE;
  static constexpr int Q_OFF = U_OFF;
  static constexpr int NK_OFF = Q_OFF + Q_BYTES;
  static constexpr int NV_OFF = NK_OFF + XTILE;
  static constexpr int O_OFF = V::PRE ? U_OFF + QX_BYTES : U_OFF;
  static constexpr int ML_OFF = U_OFF + U_BYTES;
  static constexpr int BAR_OFF = ML_OFF + 2 * SLOTS * ROWS * 4;
  /* The ring's full and empty barriers; with PRE three more: the prepared unit is
   * published, released, and the merge slots are free again. */
  static constexpr int NBAR = 2 * ST + (V::PRE ? 3 : 0);
  static constexpr int FLAG_OFF = BAR_OFF + NBAR * 8;
  static constexpr int UNIT_OFF = FLAG_OFF + 16; /* PRE: the prepared unit (a Unit) */
  static constexpr int UNIT_BYTES = V::PRE ? 128 : 0;
  static constexpr int SMEM = UNIT_OFF + UNIT_BYTES + 1024; /* + the base's alignment */
  static_assert(D == 64 || D == 128, "head sizes 64 and 128");
  static_assert(KW == 16 || KW == 32, "16 or 32 keys a warp");
  static_assert(NCW >= 2 && (NCW & (NCW - 1)) == 0, "a power of two of consumer warps");
  static_assert(32 % (D / 8) == 0, "a producer pass covers whole rows");
  static_assert(BC <= 256, "a TMA box has at most 256 rows");
  static_assert(TILE % 1024 == 0 && Q_BYTES % 16 == 0 && (OLD * 4) % 16 == 0, "aligned parts");
  static_assert(UNIT_OFF % 8 == 0, "the prepared unit's 64-bit fields");
  static_assert(SMEM <= 227 * 1024, "shared memory of one CTA");
};

/* Byte offset of 16-byte chunk c (columns 8c..8c+7) of row r in a tile of rows of
 * 128-byte swizzled 64-column blocks, `sub` bytes a block (TMA's SWIZZLE_128B layout:
 * chunk c & 7 of row r sits at chunk (c & 7) ^ (r & 7)). */
__device__ __forceinline__ uint32_t swz(int r, int c, int sub) {
  return (uint32_t)((c >> 3) * sub + r * 128 + (((c & 7) ^ (r & 7)) << 4));
}

/* ------------------------------------------------------------------ work units */

/* Unit u: (b, kv head g, split). Keys [lo, hi) matter to some row; [x_lo, x_hi) of them
 * are appended rows (read from the appended tile, never from k/v; empty without
 * append); the split's cache tiles are n_tiles tiles of BC keys from kstart, loading
 * keys below kend. past_new is kv_fill's past_b (the row of new row 0). n_eff: the
 * splits this (b, kv head) uses at its actual length (<= p.n_split, the plan's for the
 * buffer's capacity); a unit of split >= n_eff has nothing to do (live false). */
struct Unit {
  int b, g, split, head;
  BatchGeom geo;
  int lo, hi, x_lo, x_hi, past_new;
  int n_tiles, kstart, kend;
  int n_eff;
  bool live;
};

/* Splits of a key range of `keys`: split_keys keys each, at most n_split, and none
 * below 4 splits' worth (the merge's round trips cost more than 1-3 splits' keys save;
 * onyx_bench_gqa_short, 2026-12-02); split_keys 0: always n_split. A pure function of
 * the length on the device, so every unit of a (b, kv head) finds the same. */
__device__ __forceinline__ int eff_splits(int64_t keys, int n_split, int split_keys) {
  if (split_keys <= 0 || n_split <= 1) return n_split;
  if (keys < 4 * (int64_t)split_keys) return 1;
  const int64_t k = keys / split_keys;
  return k < n_split ? (int)k : n_split;
}

template <int BC>
__device__ __forceinline__ Unit unit_of(const onyx__cuda_attn_params &p, int u, int split_keys,
                                        int alone) {
  Unit it;
  it.head = u / p.n_split;
  it.split = u % p.n_split;
  it.b = it.head / p.nkv;
  it.g = it.head % p.nkv;
  it.geo = batch_geom(p, it.b);
  const BatchGeom &geo = it.geo;
  /* As the flash kernel: the causal limit of the last query row, the window of the
   * first. Key indices fit 32 bits (the hosts refuse longer caches). */
  int64_t hi = geo.limit, lo = 0;
  if (p.causal && geo.qpos0 + p.sq < hi) hi = geo.qpos0 + p.sq;
  if (p.window > 0 && geo.qpos0 - p.window + 1 > lo) lo = geo.qpos0 - p.window + 1;
  if (hi < lo) hi = lo;
  it.lo = (int)lo;
  it.hi = (int)hi;
  it.past_new = 0;
  it.x_lo = it.x_hi = 0;
  int64_t c_hi = hi;
  if (p.append) {
    /* The rows kv_fill would write: [past_b, past_b + sq) inside the buffer. */
    const int64_t past = p.first ? 0 : (int64_t)p.seqlens[it.b] + 1 - p.sq;
    int64_t a = past > lo ? past : lo, e = past + p.sq;
    if (e > hi) e = hi;
    if (e > p.kv_rows) e = p.kv_rows;
    if (a < e) {
      it.x_lo = (int)a;
      it.x_hi = (int)e;
      if (e >= hi) c_hi = a; /* the usual case: the new rows end the range */
    }
    it.past_new = (int)(past < INT_MIN ? INT_MIN : past);
  }
  const int64_t ntiles = (c_hi - lo + BC - 1) / BC;
  int ne = eff_splits(hi - lo, p.n_split, split_keys);
  /* Split 0 appends the new rows, a prologue of its own: with a spare split (alone) it
   * takes no cache tile, so that prologue runs beside the other splits' tiles. */
  const int lead = alone && p.append && ne > 1 && ne < p.n_split ? 1 : 0;
  ne += lead;
  it.n_eff = ne;
  it.live = it.split < ne;
  const int64_t si = it.split - lead, nt = ne - lead;
  const int64_t t0 = it.live && si >= 0 ? si * ntiles / nt : 0;
  const int64_t t1 = it.live && si >= 0 ? (si + 1) * ntiles / nt : 0;
  it.n_tiles = (int)(t1 - t0);
  it.kstart = (int)(lo + t0 * BC);
  const int64_t ke = lo + t1 * BC;
  it.kend = (int)(ke < c_hi ? ke : c_hi);
  return it;
}

/* Per-thread masks of rows g and g + 8: key j counts for row rr when
 * rl[rr] <= j < rh[rr]; w_lo/w_hi bound every valid row's range (for the fast path). */
struct Rows {
  int rl[2], rh[2], w_lo, w_hi;
};

__device__ __forceinline__ Rows rows_of(const onyx__cuda_attn_params &p, const Unit &it, int g) {
  Rows r;
  r.w_lo = INT_MIN;
  r.w_hi = INT_MAX;
  const int rows_total = p.sq * p.group;
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int vr = g + 8 * rr;
    if (vr < rows_total) {
      const int64_t pos = it.geo.qpos0 + vr / p.group;
      int64_t rh = it.geo.limit;
      if (p.causal && pos + 1 < rh) rh = pos + 1;
      const int64_t rl = p.window > 0 ? pos - p.window + 1 : INT_MIN;
      r.rh[rr] = (int)max(min(rh, (int64_t)INT_MAX), (int64_t)INT_MIN);
      r.rl[rr] = (int)min(max(rl, (int64_t)INT_MIN), (int64_t)INT_MAX);
      r.w_lo = max(r.w_lo, r.rl[rr]);
      r.w_hi = min(r.w_hi, r.rh[rr]);
    } else {
      r.rl[rr] = INT_MAX;
      r.rh[rr] = INT_MIN;
    }
  }
#pragma unroll
  for (int o = 4; o < 32; o <<= 1) { /* across g: lanes 4, 8, 16 apart */
    r.w_lo = max(r.w_lo, __shfl_xor_sync(0xffffffffu, r.w_lo, o));
    r.w_hi = min(r.w_hi, __shfl_xor_sync(0xffffffffu, r.w_hi, o));
  }
  return r;
}

/* ------------------------------------------------------------------ one warp's keys */

/* The running softmax state of one consumer warp: rows g and g + 8, D columns. */
template <int D> struct State {
  float o[D / 8][4];
  float m[2], l[2];
};

/* Per-lane ldmatrix offsets into a swizzled tile: row byte offsets of the K (scores)
 * and V (P·V) fragments and the swizzled chunk of each 16-column block (index & 3; the
 * block's 64-column half adds `sub`). The tile's first row is a multiple of 8. */
struct Lanes {
  uint32_t krow, vrow, kc[4], vc[4];
};

__device__ __forceinline__ Lanes lanes_of(int lane) {
  Lanes ln;
  const int x = lane & 7;
  ln.krow = (uint32_t)(((lane & 7) + (lane >> 4) * 8) * 128);
  ln.vrow = (uint32_t)(((lane & 7) + ((lane >> 3) & 1) * 8) * 128);
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    ln.kc[a] = (uint32_t)(((2 * a + ((lane >> 3) & 1)) ^ x) << 4);
    ln.vc[a] = (uint32_t)(((2 * a + (lane >> 4)) ^ x) << 4);
  }
  return ln;
}

/* Scores of 8·NB keys (rows of the tile at kt, shared address, from key0) for this
 * warp's rows, masked to [a, b) \ [x, y) and each row's range, then the online softmax
 * and O += P·V (vt). sub: bytes of a 64-column block of the tile. */
template <typename T, int D, int NB>
__device__ __forceinline__ void keys(State<D> &st, const uint32_t (&qf)[D / 16][4], uint32_t kt,
                                     uint32_t vt, int sub, int key0, const Rows &rw, int a, int b,
                                     int x, int y, float sl2, const Lanes &ln, int lane) {
  const int t4 = lane & 3;
  float s[NB][4];
#pragma unroll
  for (int n = 0; n < NB; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
  for (int kd = 0; kd < D / 16; ++kd) {
#pragma unroll
    for (int n2 = 0; n2 < NB / 2; ++n2) {
      uint32_t bk[4];
      ldsm4(bk, kt + (kd >> 2) * sub + n2 * 16 * 128 + ln.krow + ln.kc[kd & 3]);
      Mma<T>::run(s[2 * n2], qf[kd], bk[0], bk[1]);
      Mma<T>::run(s[2 * n2 + 1], qf[kd], bk[2], bk[3]);
    }
  }
  const bool inside = key0 >= max(rw.w_lo, a) && key0 + 8 * NB <= min(rw.w_hi, b) &&
                      (key0 + 8 * NB <= x || key0 >= y);
#pragma unroll
  for (int n = 0; n < NB; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int rr = e >> 1, j = key0 + n * 8 + 2 * t4 + (e & 1);
      const float v = s[n][e] * sl2;
      const bool ok =
          inside || (j >= rw.rl[rr] && j < rw.rh[rr] && j >= a && j < b && (j < x || j >= y));
      s[n][e] = ok ? v : -INFINITY;
    }
  float muse[2];
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    float mx = fmaxf(s[0][2 * rr], s[0][2 * rr + 1]);
#pragma unroll
    for (int n = 1; n < NB; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * rr], s[n][2 * rr + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float mnew = fmaxf(st.m[rr], mx);
    muse[rr] = mnew == -INFINITY ? 0.0f : mnew;
    const float alpha = ex2(st.m[rr] - muse[rr]);
    st.m[rr] = mnew;
    st.l[rr] *= alpha;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      st.o[n][2 * rr] *= alpha;
      st.o[n][2 * rr + 1] *= alpha;
    }
  }
#pragma unroll
  for (int n = 0; n < NB; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float pe = ex2(s[n][e] - muse[e >> 1]);
      s[n][e] = pe;
      st.l[e >> 1] += pe;
    }
#pragma unroll
  for (int kk = 0; kk < NB / 2; ++kk) {
    uint32_t pa[4];
    pa[0] = Mma<T>::pack(s[2 * kk][0], s[2 * kk][1]);
    pa[1] = Mma<T>::pack(s[2 * kk][2], s[2 * kk][3]);
    pa[2] = Mma<T>::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
    pa[3] = Mma<T>::pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
      uint32_t bv[4];
      ldsm4_t(bv, vt + (dp >> 2) * sub + kk * 16 * 128 + ln.vrow + ln.vc[dp & 3]);
      Mma<T>::run(st.o[2 * dp], pa, bv[0], bv[1]);
      Mma<T>::run(st.o[2 * dp + 1], pa, bv[2], bv[3]);
    }
  }
}

/* A TMA tile holds whatever the buffer has past the unit's keys: this warp's value rows
 * (KW from key0, at vt) that are not the unit's keys become zeros. */
template <int D, int KW>
__device__ __forceinline__ void zero_foreign_rows(uint32_t vt, int sub, int key0, int kend, int x,
                                                  int y, int lane) {
  constexpr int CPR = D / 8;
#pragma unroll
  for (int i = lane; i < KW * CPR; i += 32) {
    const int r = i / CPR, c = i % CPR, j = key0 + r;
    if (j >= kend || (j >= x && j < y)) st_zero16(vt + swz(r, c, sub));
  }
}

/* ------------------------------------------------------------------ unit prologue */

/* Chunk i of the unit's Q rows (16 bytes: row i / (D/8), columns from 8·(i % (D/8))),
 * rotated with rotary; zeros in rows past the unit's. */
template <typename T, int D>
__device__ __forceinline__ uint4 q_chunk(const onyx__cuda_attn_params &p, const Unit &it, int i) {
  constexpr int CPR = D / 8;
  const int r = i / CPR, c = i % CPR;
  uint4 v = make_uint4(0u, 0u, 0u, 0u);
  if (r < p.sq * p.group) {
    const int s = r / p.group, h = it.g * p.group + r % p.group;
    const T *src =
        (const T *)p.q + (int64_t)it.b * p.q_bs + (int64_t)s * p.q_ss + (int64_t)h * p.q_hs;
    if (p.cos == nullptr) {
      v = *reinterpret_cast<const uint4 *>(src + c * 8);
    } else {
      const int64_t row =
          rope_row(p.pos_ids, p.pos_bs, p.pos_ss, p.pos_add_s, it.geo.rpos0, p.rot_rows, it.b, s);
      T e8[8];
#pragma unroll
      for (int e = 0; e < 8; ++e)
        e8[e] = Elem<T>::store(rope_elem(src, c * 8 + e, (const T *)p.cos, (const T *)p.sin,
                                         p.rot_half, row, p.interleaved != 0));
      memcpy(&v, e8, 16);
    }
  }
  return v;
}

/* Q rows of the unit → shared memory (rotated on the way with rotary), rows past the
 * unit's zeroed; by the consumer threads (NT of them). */
template <typename T, int D, int LD, int NT>
__device__ __forceinline__ void load_q(const onyx__cuda_attn_params &p, const Unit &it, T *qs,
                                       int ctid) {
  constexpr int CPR = D / 8;
  for (int i = ctid; i < 16 * CPR; i += NT)
    *reinterpret_cast<uint4 *>(qs + (i / CPR) * LD + (i % CPR) * 8) = q_chunk<T, D>(p, it, i);
}

/* The new rows of (b, g) (append): written to the present (keys rotated as kv_fill
 * does) and to the appended tiles nk/nv (swizzled, 16 rows), row s at key
 * past_new + s; rows outside the buffer or past sq are zeros in the tiles. By the
 * consumer threads (NT of them). */
template <typename T, int D, int NT>
__device__ __forceinline__ void append_rows(const onyx__cuda_attn_params &p, const Unit &it,
                                            unsigned char *nk, unsigned char *nv, int ctid) {
  const T *sk = (const T *)p.new_k + (int64_t)it.b * p.nk_bs + (int64_t)it.g * p.nk_gs;
  const T *sv = (const T *)p.new_v + (int64_t)it.b * p.nk_bs + (int64_t)it.g * p.nk_gs;
  T *dk = (T *)const_cast<void *>(p.k) + (int64_t)it.b * p.k_bs + (int64_t)it.g * p.k_gs;
  T *dv = (T *)const_cast<void *>(p.v) + (int64_t)it.b * p.v_bs + (int64_t)it.g * p.v_gs;
  for (int i = ctid; i < 16 * D; i += NT) {
    const int s = i / D, d = i % D;
    const int64_t j = (int64_t)it.past_new + s;
    T kv = Elem<T>::store(0.0f), vv = kv;
    if (s < p.sq && j >= 0 && j < p.kv_rows) {
      const T *kr = sk + (int64_t)s * p.nk_ss;
      if (p.cos != nullptr) {
        const int64_t row =
            rope_row(p.pos_ids, p.pos_bs, p.pos_ss, p.pos_add_s, it.past_new, p.rot_rows, it.b, s);
        kv = Elem<T>::store(rope_elem(kr, d, (const T *)p.cos, (const T *)p.sin, p.rot_half, row,
                                      p.interleaved != 0));
      } else {
        kv = kr[d];
      }
      vv = sv[(int64_t)s * p.nk_ss + d];
      dk[j * p.k_rs + d] = kv;
      dv[j * p.v_rs + d] = vv;
    }
    const uint32_t at = swz(s, d / 8, 16 * 128) + (d % 8) * 2;
    *reinterpret_cast<T *>(nk + at) = kv;
    *reinterpret_cast<T *>(nv + at) = vv;
  }
}

/* ------------------------------------------------------------------ unit epilogue */

/* Output row (b, s, h) from an unnormalised accumulator: o·f, 4 columns from c. */
template <typename T>
__device__ __forceinline__ void store4(const onyx__cuda_attn_params &p, int b, int s, int h, int c,
                                       float4 o, float f) {
  T out[4] = {Elem<T>::store(o.x * f), Elem<T>::store(o.y * f), Elem<T>::store(o.z * f),
              Elem<T>::store(o.w * f)};
  T *dst = (T *)p.y + (int64_t)b * p.y_bs + (int64_t)s * p.y_ss + (int64_t)h * p.y_hs + c;
  uint2 u;
  memcpy(&u, out, 8);
  *reinterpret_cast<uint2 *>(dst) = u;
}

/* The last unit of a split (b, kv head) merges its n_eff splits' partials into the
 * output. It runs after the slowest unit, so its latency is the launch's tail: the
 * partials of 8 splits are loaded at once (one L2 round trip a chunk, not a chain per
 * split) and folded into a running maximum. Partial rows keep the plan's n_split
 * stride. */
template <typename T, int D, int NT>
__device__ __forceinline__ void merge_splits(const onyx__cuda_attn_params &p, const Unit &it,
                                             int ctid) {
  constexpr int CH = 8;
  const int ns = p.n_split, ne = it.n_eff, rows_total = p.sq * p.group;
  const float *part_o = p.partials;
  const float *part_ml = p.partials + (int64_t)p.batch * p.nq * p.sq * ns * D;
  for (int i = ctid; i < rows_total * (D / 4); i += NT) {
    const int r = i / (D / 4), c = (i % (D / 4)) * 4;
    const int s = r / p.group, h = it.g * p.group + r % p.group;
    const int64_t prow0 = (((int64_t)it.b * p.nq + h) * p.sq + s) * ns;
    const float2 *ml = reinterpret_cast<const float2 *>(part_ml + prow0 * 2);
    const float *po = part_o + prow0 * D + c;
    float M = -INFINITY, L = 0.0f;
    float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int k0 = 0; k0 < ne; k0 += CH) {
      float2 mk[CH];
      float4 ok[CH];
#pragma unroll
      for (int j = 0; j < CH; ++j) {
        const bool in = k0 + j < ne;
        mk[j] = in ? __ldcg(ml + k0 + j) : make_float2(-INFINITY, 0.0f);
        ok[j] = in ? __ldcg(reinterpret_cast<const float4 *>(po + (int64_t)(k0 + j) * D))
                   : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
      float cm = M;
#pragma unroll
      for (int j = 0; j < CH; ++j) cm = fmaxf(cm, mk[j].x);
      if (cm == -INFINITY) continue; /* no key so far */
      const float a = exp2f(M - cm); /* 0 while M is still -inf */
      L *= a;
      o.x *= a;
      o.y *= a;
      o.z *= a;
      o.w *= a;
#pragma unroll
      for (int j = 0; j < CH; ++j) {
        const float w = mk[j].x == -INFINITY ? 0.0f : exp2f(mk[j].x - cm);
        L += mk[j].y * w;
        o.x += ok[j].x * w;
        o.y += ok[j].y * w;
        o.z += ok[j].z * w;
        o.w += ok[j].w * w;
      }
      M = cm;
    }
    float sink2 = 0.0f;
    const bool has_sink = sink_log2<T>(p, h, &sink2);
    store4<T>(p, it.b, s, h, c, o, finish_factor(M, L, has_sink, sink2));
  }
}

/* A warp's state (rows g, g + 8) into merge slot o/m/l, or folded in from one. */
template <int D, int OLD>
__device__ __forceinline__ void put_state(const State<D> &st, float *o, float *m, float *l,
                                          int lane) {
  const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    *reinterpret_cast<float2 *>(o + g * OLD + n * 8 + 2 * t4) = make_float2(st.o[n][0], st.o[n][1]);
    *reinterpret_cast<float2 *>(o + (g + 8) * OLD + n * 8 + 2 * t4) =
        make_float2(st.o[n][2], st.o[n][3]);
  }
  if (t4 == 0) {
    m[g] = st.m[0];
    l[g] = st.l[0];
    m[g + 8] = st.m[1];
    l[g + 8] = st.l[1];
  }
}

template <int D, int OLD>
__device__ __forceinline__ void fold_state(State<D> &st, const float *o, const float *m,
                                           const float *l, int lane) {
  const int g = lane >> 2, t4 = lane & 3;
  float fa[2], fb[2];
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const float mo = m[g + 8 * rr], mnew = fmaxf(st.m[rr], mo);
    const float muse = mnew == -INFINITY ? 0.0f : mnew;
    fa[rr] = ex2(st.m[rr] - muse);
    fb[rr] = ex2(mo - muse);
    st.m[rr] = mnew;
    st.l[rr] = st.l[rr] * fa[rr] + l[g + 8 * rr] * fb[rr];
  }
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    const float2 u = *reinterpret_cast<const float2 *>(o + g * OLD + n * 8 + 2 * t4);
    const float2 w = *reinterpret_cast<const float2 *>(o + (g + 8) * OLD + n * 8 + 2 * t4);
    st.o[n][0] = st.o[n][0] * fa[0] + u.x * fb[0];
    st.o[n][1] = st.o[n][1] * fa[0] + u.y * fb[0];
    st.o[n][2] = st.o[n][2] * fa[1] + w.x * fb[1];
    st.o[n][3] = st.o[n][3] * fa[1] + w.y * fb[1];
  }
}

/* This split's partial is out (each thread fenced its stores): count it; the last to
 * arrive merges. Every other unit of the head has arrived by then, so it resets the
 * counter at once. By the consumer threads (NT). */
template <typename T, int D, int NT>
__device__ __forceinline__ void count_split(const onyx__cuda_attn_params &p, const Unit &it,
                                            int *flag, int ctid) {
  consumers_sync<NT>();
  if (ctid == 0) {
    float *part_ml = p.partials + (int64_t)p.batch * p.nq * p.sq * p.n_split * D;
    unsigned *count = p.counters != nullptr
                          ? p.counters
                          : reinterpret_cast<unsigned *>(part_ml + (int64_t)p.batch * p.nq * p.sq *
                                                                       p.n_split * 2);
    const unsigned before = atomicAdd(count + it.head, 1u);
    const bool last = before == (unsigned)(it.n_eff - 1);
    if (last) atomicExch(count + it.head, 0u);
    *flag = last;
    __threadfence();
  }
  consumers_sync<NT>();
  if (*flag) merge_splits<T, D, NT>(p, it, ctid);
}

/* The warp states → one per row (a tree through the slots), then the output (a single
 * effective split) or this split's partial; the last split to arrive merges and leaves
 * its counter at zero for the next launch. By the consumer threads. */
template <typename T, int D, class C>
__device__ __forceinline__ void finish_unit(const onyx__cuda_attn_params &p, const Unit &it,
                                            State<D> &st, unsigned char *smem, int cw, int lane,
                                            int ctid) {
  constexpr int NT = 32 * C::NCW, OLD = C::OLD;
  float *osm = reinterpret_cast<float *>(smem + C::O_OFF);
  float *msm = reinterpret_cast<float *>(smem + C::ML_OFF), *lsm = msm + C::SLOTS * 16;
  int *flag = reinterpret_cast<int *>(smem + C::FLAG_OFF);
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    st.l[rr] += __shfl_xor_sync(0xffffffffu, st.l[rr], 1);
    st.l[rr] += __shfl_xor_sync(0xffffffffu, st.l[rr], 2);
  }
  consumers_sync<NT>(); /* every warp is done with Q and the appended tiles (the slots) */
#pragma unroll
  for (int h = C::NCW / 2; h >= 1; h >>= 1) {
    if (cw >= h && cw < 2 * h)
      put_state<D, OLD>(st, osm + (cw - h) * 16 * OLD, msm + (cw - h) * 16, lsm + (cw - h) * 16,
                        lane);
    consumers_sync<NT>();
    if (cw < h) fold_state<D, OLD>(st, osm + cw * 16 * OLD, msm + cw * 16, lsm + cw * 16, lane);
    consumers_sync<NT>();
  }
  if (cw == 0) put_state<D, OLD>(st, osm, msm, lsm, lane);
  consumers_sync<NT>();

  const int rows_total = p.sq * p.group, ns = p.n_split;
  const bool split = it.n_eff > 1;
  float *part_o = p.partials;
  float *part_ml = p.partials + (int64_t)p.batch * p.nq * p.sq * ns * D;
  for (int i = ctid; i < rows_total * (D / 4); i += NT) {
    const int r = i / (D / 4), c = (i % (D / 4)) * 4;
    const int s = r / p.group, h = it.g * p.group + r % p.group;
    const float M = msm[r], L = lsm[r];
    const float4 o = *reinterpret_cast<const float4 *>(osm + r * OLD + c);
    if (split) {
      const int64_t prow = (((int64_t)it.b * p.nq + h) * p.sq + s) * ns + it.split;
      *reinterpret_cast<float4 *>(part_o + prow * D + c) = o;
      if (c == 0) {
        part_ml[prow * 2] = M;
        part_ml[prow * 2 + 1] = L;
      }
    } else {
      float sink2 = 0.0f;
      const bool has_sink = sink_log2<T>(p, h, &sink2);
      store4<T>(p, it.b, s, h, c, o, finish_factor(M, L, has_sink, sink2));
    }
  }
  if (!split) return;
  __threadfence();
  count_split<T, D, NT>(p, it, flag, ctid);
}

/* ------------------------------------------------------------------ the producer */

/* K and V rows of every tile of every unit of this CTA, in order, into the ring. */
template <typename T, int D, class V>
__device__ __forceinline__ void produce(const onyx__cuda_attn_params &p, int units, int split_keys,
                                        int alone, const CUtensorMap *tk, const CUtensorMap *tv,
                                        uint32_t ks, uint32_t vs, uint64_t *full, uint64_t *empty,
                                        int lane) {
  using C = Cfg<D, V>;
  constexpr int BC = C::BC, ST = C::ST;
  int git = 0;
  if (V::TMA) {
#if __CUDA_ARCH__ >= 900
    /* One thread issues D / 64 boxes of K and of V per tile. */
    if (lane != 0) return;
    const uint64_t policy = V::EF ? evict_first_policy() : 0;
    for (int u = blockIdx.x; u < units; u += gridDim.x) {
      const Unit it = unit_of<BC>(p, u, split_keys, alone);
      for (int t = 0; t < it.n_tiles; ++t, ++git) {
        const int s = git % ST;
        mbar_wait(&empty[s], ((uint32_t)(git / ST) & 1u) ^ 1u);
        mbar_expect_tx(&full[s], 2 * C::TILE);
        const int k0 = it.kstart + t * BC;
#pragma unroll
        for (int h = 0; h < D / 64; ++h) {
          tma_box<V::EF>(ks + s * C::TILE + h * C::SUB, tk, h * 64, k0, it.g, it.b, &full[s],
                         policy);
          tma_box<V::EF>(vs + s * C::TILE + h * C::SUB, tv, h * 64, k0, it.g, it.b, &full[s],
                         policy);
        }
      }
    }
#else
    (void)tk;
    (void)tv;
    __trap(); /* never launched: the host takes TMA variants only on sm_90 images */
#endif
    return;
  }
  /* cp.async: each lane a fixed 16-byte column of every second (D 128) or fourth (D 64)
   * row; rows outside the unit's cache keys are zero-filled. */
  constexpr int CPR = D / 8, RPP = 32 / CPR;
  const int c = lane % CPR, r0 = lane / CPR;
  const uint64_t policy = V::EF ? evict_first_policy() : 0;
  /* The L2 prefetch reads whole tiles of rows, so only rows without gaps between. */
  const bool l2p = V::PD > 0 && lane == 0 && p.k_rs == D && p.v_rs == D;
  for (int u = blockIdx.x; u < units; u += gridDim.x) {
    const Unit it = unit_of<BC>(p, u, split_keys, alone);
    const T *kb = (const T *)p.k + (int64_t)it.b * p.k_bs + (int64_t)it.g * p.k_gs;
    const T *vb = (const T *)p.v + (int64_t)it.b * p.v_bs + (int64_t)it.g * p.v_gs;
    for (int t = 0; t < it.n_tiles; ++t, ++git) {
#if __CUDA_ARCH__ >= 900
      if (l2p && t + V::PD < it.n_tiles) {
        /* Before waiting for a free stage: DRAM works PD tiles ahead of the ring. */
        const int a = it.kstart + (t + V::PD) * BC, e = min(a + BC, it.kend);
        if (a < e) {
          l2_prefetch(kb + (int64_t)a * D, (uint32_t)(e - a) * D * 2);
          l2_prefetch(vb + (int64_t)a * D, (uint32_t)(e - a) * D * 2);
        }
      }
#endif
      const int s = git % ST;
      mbar_wait(&empty[s], ((uint32_t)(git / ST) & 1u) ^ 1u);
      const int k0 = it.kstart + t * BC;
      const uint32_t kd = ks + s * C::TILE, vd = vs + s * C::TILE;
      const T *kp = kb + (int64_t)(k0 + r0) * p.k_rs + c * 8;
      const T *vp = vb + (int64_t)(k0 + r0) * p.v_rs + c * 8;
      const int64_t kstep = (int64_t)RPP * p.k_rs, vstep = (int64_t)RPP * p.v_rs;
#pragma unroll 8
      for (int i = 0; i < BC / RPP; ++i, kp += kstep, vp += vstep) {
        const int r = r0 + i * RPP, j = k0 + r;
        const bool ok = j < it.kend && (j < it.x_lo || j >= it.x_hi);
        const uint32_t at = swz(r, c, C::SUB);
        cp_async16_at<V::EF, V::PF>(kd + at, ok ? kp : kb, ok, policy);
        cp_async16_at<V::EF, V::PF>(vd + at, ok ? vp : vb, ok, policy);
      }
      cp_async_arrive(&full[s]);
    }
  }
  cp_async_wait_all();
}

/* ------------------------------------------------------------------ prepared units (PRE) */

/* The unit buffer (Q, the appended tiles, the Unit at UNIT_OFF) is a one-slot ring
 * between the unit warp and the consumers: ub[0] (32 arrivals, one a lane) publishes a
 * unit, ub[1] (one arrival a consumer warp) releases it once every warp holds Q in
 * registers and the appended keys are done. ub[2] (one arrival, warp 0) says a unit's
 * merge slots are read, so the next unit's first putters may write them. The consumers
 * prepare their first unit themselves (nothing runs beside it yet); the unit warp
 * prepares every later one while the consumers stream the one before. */

/* The unit's appended rows (append_rows' work) by the unit warp: each lane's loads of
 * G elements in flight together (a round trip, two with rotary, for a decode row);
 * tile rows past sq zeros. */
template <typename T, int D>
__device__ __forceinline__ void ahead_append(const onyx__cuda_attn_params &p, const Unit &it,
                                             unsigned char *nk, unsigned char *nv, int lane) {
  constexpr int G = 4;
  const int rows = p.sq < 16 ? p.sq : 16, n = rows * D;
  const T *sk = (const T *)p.new_k + (int64_t)it.b * p.nk_bs + (int64_t)it.g * p.nk_gs;
  const T *sv = (const T *)p.new_v + (int64_t)it.b * p.nk_bs + (int64_t)it.g * p.nk_gs;
  T *dk = (T *)const_cast<void *>(p.k) + (int64_t)it.b * p.k_bs + (int64_t)it.g * p.k_gs;
  T *dv = (T *)const_cast<void *>(p.v) + (int64_t)it.b * p.v_bs + (int64_t)it.g * p.v_gs;
  for (int i0 = 0; i0 < n; i0 += 32 * G) {
    T kv[G], vv[G];
    bool ok[G];
#pragma unroll
    for (int e = 0; e < G; ++e) {
      const int i = i0 + lane + 32 * e, s = i / D, d = i % D;
      const int64_t j = (int64_t)it.past_new + s;
      ok[e] = i < n && j >= 0 && j < p.kv_rows;
      kv[e] = vv[e] = Elem<T>::store(0.0f);
      if (!ok[e]) continue;
      const T *kr = sk + (int64_t)s * p.nk_ss;
      if (p.cos != nullptr) {
        const int64_t row =
            rope_row(p.pos_ids, p.pos_bs, p.pos_ss, p.pos_add_s, it.past_new, p.rot_rows, it.b, s);
        kv[e] = Elem<T>::store(rope_elem(kr, d, (const T *)p.cos, (const T *)p.sin, p.rot_half, row,
                                         p.interleaved != 0));
      } else {
        kv[e] = kr[d];
      }
      vv[e] = sv[(int64_t)s * p.nk_ss + d];
    }
#pragma unroll
    for (int e = 0; e < G; ++e) {
      const int i = i0 + lane + 32 * e, s = i / D, d = i % D;
      if (i >= n) continue;
      if (ok[e]) {
        const int64_t j = (int64_t)it.past_new + s;
        dk[j * p.k_rs + d] = kv[e];
        dv[j * p.v_rs + d] = vv[e];
      }
      const uint32_t at = swz(s, d / 8, 16 * 128) + (d % 8) * 2;
      *reinterpret_cast<T *>(nk + at) = kv[e];
      *reinterpret_cast<T *>(nv + at) = vv[e];
    }
  }
  for (int i = rows * (D / 8) + lane; i < 16 * (D / 8); i += 32) {
    const uint32_t at = swz(i / (D / 8), i % (D / 8), 16 * 128);
    *reinterpret_cast<uint4 *>(nk + at) = make_uint4(0u, 0u, 0u, 0u);
    *reinterpret_cast<uint4 *>(nv + at) = make_uint4(0u, 0u, 0u, 0u);
  }
}

/* The unit warp: for each live unit of this CTA after the first, its Q rows (loaded
 * before the buffer is free: every load in flight at once), then, once the consumers
 * released the unit before, its appended rows, Q and geometry into the buffer, published
 * on ub[0]; a unit with live = false ends the consumers' loop. */
template <typename T, int D, class V>
__device__ __forceinline__ void prepare_units(const onyx__cuda_attn_params &p, int units,
                                              int split_keys, int alone, unsigned char *smem,
                                              uint64_t *ub, int lane) {
  using C = Cfg<D, V>;
  constexpr int CPR = D / 8, N = 16 * CPR / 32;
  T *qs = reinterpret_cast<T *>(smem + C::Q_OFF);
  Unit *us = reinterpret_cast<Unit *>(smem + C::UNIT_OFF);
  static_assert(sizeof(Unit) <= C::UNIT_BYTES, "the unit buffer holds a Unit");
  int n = 0; /* live units seen */
  for (int u = blockIdx.x; u < units; u += gridDim.x) {
    const Unit it = unit_of<C::BC>(p, u, split_keys, alone);
    if (!it.live) continue;
    if (n++ == 0) continue; /* the consumers' own */
    uint4 q[N];
#pragma unroll
    for (int k = 0; k < N; ++k) q[k] = q_chunk<T, D>(p, it, lane + 32 * k);
    mbar_wait(&ub[1], (uint32_t)(n - 2) & 1u); /* unit n - 2 released */
    if (p.append && it.split == 0)
      ahead_append<T, D>(p, it, smem + C::NK_OFF, smem + C::NV_OFF, lane);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const int i = lane + 32 * k;
      *reinterpret_cast<uint4 *>(qs + (i / CPR) * C::QLD + (i % CPR) * 8) = q[k];
    }
    if (lane == 0) *us = it;
    mbar_arrive(&ub[0]);
  }
  if (n == 0) return; /* the consumers found none either */
  mbar_wait(&ub[1], (uint32_t)(n - 1) & 1u);
  if (lane == 0) us->live = false;
  mbar_arrive(&ub[0]);
}

/* Warp 0's merged state (rows g, g + 8) → the output (a single effective split) or
 * this split's partial, straight from registers. */
template <typename T, int D>
__device__ __forceinline__ void store_state(const onyx__cuda_attn_params &p, const Unit &it,
                                            const State<D> &st, bool split, int lane) {
  const int g = lane >> 2, t4 = lane & 3, ns = p.n_split, rows_total = p.sq * p.group;
  float *part_o = p.partials;
  float *part_ml = p.partials + (int64_t)p.batch * p.nq * p.sq * ns * D;
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const int r = g + 8 * rr;
    if (r >= rows_total) continue;
    const int s = r / p.group, h = it.g * p.group + r % p.group;
    if (split) {
      const int64_t prow = (((int64_t)it.b * p.nq + h) * p.sq + s) * ns + it.split;
      float *po = part_o + prow * D + 2 * t4;
#pragma unroll
      for (int n = 0; n < D / 8; ++n)
        *reinterpret_cast<float2 *>(po + n * 8) = make_float2(st.o[n][2 * rr], st.o[n][2 * rr + 1]);
      if (t4 == 0) {
        part_ml[prow * 2] = st.m[rr];
        part_ml[prow * 2 + 1] = st.l[rr];
      }
      continue;
    }
    float sink2 = 0.0f;
    const bool has_sink = sink_log2<T>(p, h, &sink2);
    const float f = finish_factor(st.m[rr], st.l[rr], has_sink, sink2);
    T *dst = (T *)p.y + (int64_t)it.b * p.y_bs + (int64_t)s * p.y_ss + (int64_t)h * p.y_hs + 2 * t4;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      const T two[2] = {Elem<T>::store(st.o[n][2 * rr] * f),
                        Elem<T>::store(st.o[n][2 * rr + 1] * f)};
      uint32_t w;
      memcpy(&w, two, 4);
      *reinterpret_cast<uint32_t *>(dst + n * 8) = w;
    }
  }
}

/* Round H of the PRE merge tree (barrier ID): the warps [H, 2H) put their state in a
 * slot, arrive and leave; the warps [0, H) wait there and fold. A putter writes
 * the slot it read itself last (cw + off; round 1: a slot of the unit before, once ub[2]
 * says it is read), so no warp waits for a slot's readers. */
template <int D, class C, int H, int ID>
__device__ __forceinline__ void tree_round(State<D> &st, float *osm, float *msm, float *lsm,
                                           int off, uint64_t *ub, int j, int cw, int lane) {
  constexpr int OLD = C::OLD;
  if (cw >= H) {
    if (H == C::NCW / 2 && j > 0) mbar_wait(&ub[2], (uint32_t)(j - 1) & 1u);
    const int sl = cw + off;
    put_state<D, OLD>(st, osm + sl * 16 * OLD, msm + sl * 16, lsm + sl * 16, lane);
    __syncwarp(); /* bar is .aligned: the whole warp, converged */
    bar_arrive<ID, 64 * H>();
    return;
  }
  __syncwarp();
  bar_wait<ID, 64 * H>();
  const int sl = cw + H + off;
  fold_state<D, OLD>(st, osm + sl * 16 * OLD, msm + sl * 16, lsm + sl * 16, lane);
  if constexpr (H > 1) tree_round<D, C, H / 2, ID + 1>(st, osm, msm, lsm, off + H, ub, j, cw, lane);
}

/* finish_unit with waits only where a warp needs another's state (tree_round): a warp
 * that has put its state goes on to the next unit; warp 0 ends with every state and
 * stores from registers. A split unit then counts itself as finish_unit does, every
 * warp waiting for the merge. */
template <typename T, int D, class C>
__device__ __forceinline__ void finish_prepared(const onyx__cuda_attn_params &p, const Unit &it,
                                                State<D> &st, unsigned char *smem, uint64_t *ub,
                                                int j, int cw, int lane, int ctid) {
  constexpr int NT = 32 * C::NCW;
  float *osm = reinterpret_cast<float *>(smem + C::O_OFF);
  float *msm = reinterpret_cast<float *>(smem + C::ML_OFF), *lsm = msm + C::SLOTS * 16;
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    st.l[rr] += __shfl_xor_sync(0xffffffffu, st.l[rr], 1);
    st.l[rr] += __shfl_xor_sync(0xffffffffu, st.l[rr], 2);
  }
  tree_round<D, C, C::NCW / 2, 2>(st, osm, msm, lsm, -C::NCW / 2, ub, j, cw, lane);
  const bool split = it.n_eff > 1;
  if (cw == 0) {
    __syncwarp();
    if (lane == 0) mbar_arrive(&ub[2]); /* every slot of this unit is read */
    store_state<T, D>(p, it, st, split, lane);
  }
  if (!split) return;
  if (cw == 0) __threadfence(); /* warp 0 wrote the partial */
  count_split<T, D, NT>(p, it, reinterpret_cast<int *>(smem + C::FLAG_OFF), ctid);
}

/* The consumers of a PRE variant: their first unit prepared by themselves as the
 * other variants do, every later one taken from the unit warp. */
template <typename T, int D, class V>
__device__ __forceinline__ void
consume_prepared(const onyx__cuda_attn_params &p, int units, int split_keys, int alone,
                 unsigned char *smem, uint32_t ks, uint32_t vs, uint64_t *full, uint64_t *empty,
                 uint64_t *ub, int warp, int lane) {
  using C = Cfg<D, V>;
  constexpr int BC = C::BC, ST = C::ST, KW = C::KW, NT = 32 * C::NCW;
  static_assert(!V::TMA, "PRE variants load by cp.async");
  const int cw = warp - 1, ctid = (warp - 1) * 32 + lane, g = lane >> 2;
  T *qs = reinterpret_cast<T *>(smem + C::Q_OFF);
  unsigned char *nk = smem + C::NK_OFF, *nv = smem + C::NV_OFF;
  const Unit *us = reinterpret_cast<const Unit *>(smem + C::UNIT_OFF);
  const float sl2 = p.scale * kLog2e;
  const int q_row = (lane & 7) + ((lane >> 3) & 1) * 8, q_col = (lane >> 4) * 8;
  const Lanes ln = lanes_of(lane);
  const uint32_t wrow = (uint32_t)(cw * KW * 128);
  Unit it;
  int u = blockIdx.x;
  for (;; u += gridDim.x) {
    if (u >= units) return;
    it = unit_of<BC>(p, u, split_keys, alone);
    if (it.live) break;
  }
  if (!(p.append && it.split == 0))
    load_q<T, D, C::QLD, NT>(p, it, qs, ctid);
  else if (ctid < NT / 2)
    load_q<T, D, C::QLD, NT / 2>(p, it, qs, ctid);
  else
    append_rows<T, D, NT / 2>(p, it, nk, nv, ctid - NT / 2);
  consumers_sync<NT>();
  int git = 0;
  for (int j = 0;; ++j) {
    if (j > 0) {
      mbar_wait(&ub[0], (uint32_t)(j - 1) & 1u);
      it = *us;
      if (!it.live) return;
    }
    uint32_t qf[D / 16][4];
#pragma unroll
    for (int kd = 0; kd < D / 16; ++kd) ldsm_x4(qf[kd], qs + q_row * C::QLD + kd * 16 + q_col);
    const Rows rw = rows_of(p, it, g);
    State<D> st;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) st.o[n][0] = st.o[n][1] = st.o[n][2] = st.o[n][3] = 0.0f;
    st.m[0] = st.m[1] = -INFINITY;
    st.l[0] = st.l[1] = 0.0f;
    /* The last warp (the first to leave the merge) takes the appended rows. */
    if (p.append && it.split == 0 && cw == C::NCW - 1 && it.x_lo < it.x_hi)
      keys<T, D, 2>(st, qf, smem_addr(nk), smem_addr(nv), C::XSUB, it.past_new, rw, it.x_lo,
                    it.x_hi, 0, 0, sl2, ln, lane);
    __syncwarp();
    if (lane == 0) mbar_arrive(&ub[1]); /* Q, the appended tiles and the unit are read */
    for (int t = 0; t < it.n_tiles; ++t, ++git) {
      const int s = git % ST;
      mbar_wait(&full[s], (uint32_t)(git / ST) & 1u);
      const int key0 = it.kstart + t * BC + cw * KW;
      keys<T, D, KW / 8>(st, qf, ks + s * C::TILE + wrow, vs + s * C::TILE + wrow, C::SUB, key0, rw,
                         it.kstart, it.kend, it.x_lo, it.x_hi, sl2, ln, lane);
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[s]);
    }
    finish_prepared<T, D, C>(p, it, st, smem, ub, j, cw, lane, ctid);
  }
}

/* ------------------------------------------------------------------ the kernel */

template <typename T, int D, class V>
__global__ void __launch_bounds__(Cfg<D, V>::THREADS, 1)
    decode_kernel(const __grid_constant__ CUtensorMap tk, const __grid_constant__ CUtensorMap tv,
                  const onyx__cuda_attn_params p, int units, int split_keys, int alone) {
  using C = Cfg<D, V>;
  constexpr int BC = C::BC, ST = C::ST, KW = C::KW, NT = 32 * C::NCW;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  /* The swizzle's atoms and TMA's destinations: a 1024-byte aligned base. */
  const uint32_t raw = smem_addr(smem_raw);
  unsigned char *smem = smem_raw + (((raw + 1023u) & ~1023u) - raw);
  const uint32_t base = smem_addr(smem);
  const uint32_t ks = base + C::K_OFF, vs = base + C::V_OFF;
  uint64_t *full = reinterpret_cast<uint64_t *>(smem + C::BAR_OFF), *empty = full + ST;
  uint64_t *ub = full + 2 * ST; /* PRE: the unit buffer's barriers */
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;

  if (tid == 0) {
    for (int s = 0; s < ST; ++s) {
      mbar_init(&full[s], V::TMA ? 1 : 32); /* the expect_tx arrival, or one per lane */
      mbar_init(&empty[s], C::NCW);         /* one arrival per consumer warp */
    }
    if (V::PRE) {
      mbar_init(&ub[0], 32);     /* published: one arrival a lane of the unit warp */
      mbar_init(&ub[1], C::NCW); /* released: one a consumer warp */
      mbar_init(&ub[2], 1);      /* merge slots read: warp 0 */
    }
#if __CUDA_ARCH__ >= 900
    if (V::TMA) mbar_fence_init();
#endif
  }
  __syncthreads();
#if __CUDA_ARCH__ >= 900
  /* A programmatic dependent (PDL): the kernel before may still run until here, and
   * nothing global is touched before it is done. Then the next kernel may launch: its
   * own wait holds it until this grid has finished, and every CTA of this one is
   * resident by now (the grid is at most one wave). */
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif

  if (warp == 0) {
    produce<T, D, V>(p, units, split_keys, alone, &tk, &tv, ks, vs, full, empty, lane);
    return;
  }
  if constexpr (V::PRE) {
    if (warp == C::NCW + 1)
      prepare_units<T, D, V>(p, units, split_keys, alone, smem, ub, lane);
    else
      consume_prepared<T, D, V>(p, units, split_keys, alone, smem, ks, vs, full, empty, ub, warp,
                                lane);
    return;
  }

  /* ---------------- consumers: warp cw takes keys [KW·cw, KW·cw + KW) of every tile. */
  const int cw = warp - 1, ctid = tid - 32, g = lane >> 2;
  T *qs = reinterpret_cast<T *>(smem + C::Q_OFF);
  unsigned char *nk = smem + C::NK_OFF, *nv = smem + C::NV_OFF;
  const float sl2 = p.scale * kLog2e;
  const int q_row = (lane & 7) + ((lane >> 3) & 1) * 8, q_col = (lane >> 4) * 8;
  const Lanes ln = lanes_of(lane);
  const uint32_t wrow = (uint32_t)(cw * KW * 128); /* this warp's first row in a tile */
  int git = 0;
  for (int u = blockIdx.x; u < units; u += gridDim.x) {
    const Unit it = unit_of<BC>(p, u, split_keys, alone);
    if (!it.live) continue; /* past this length's splits: no keys, no partial */
    const bool appended = p.append && it.split == 0;
    consumers_sync<NT>(); /* the previous unit's slots are read (they alias Q) */
    /* With new rows, half the threads load Q and half append: the two chains of
     * global loads (rotary tables included) overlap instead of following each other. */
    if (!appended)
      load_q<T, D, C::QLD, NT>(p, it, qs, ctid);
    else if (ctid < NT / 2)
      load_q<T, D, C::QLD, NT / 2>(p, it, qs, ctid);
    else
      append_rows<T, D, NT / 2>(p, it, nk, nv, ctid - NT / 2);
    consumers_sync<NT>();
    uint32_t qf[D / 16][4];
#pragma unroll
    for (int kd = 0; kd < D / 16; ++kd) ldsm_x4(qf[kd], qs + q_row * C::QLD + kd * 16 + q_col);
    const Rows rw = rows_of(p, it, g);
    State<D> st;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) st.o[n][0] = st.o[n][1] = st.o[n][2] = st.o[n][3] = 0.0f;
    st.m[0] = st.m[1] = -INFINITY;
    st.l[0] = st.l[1] = 0.0f;

    if (appended && cw == 0 && it.x_lo < it.x_hi)
      keys<T, D, 2>(st, qf, smem_addr(nk), smem_addr(nv), C::XSUB, it.past_new, rw, it.x_lo,
                    it.x_hi, 0, 0, sl2, ln, lane);
    for (int t = 0; t < it.n_tiles; ++t, ++git) {
      const int s = git % ST;
      mbar_wait(&full[s], (uint32_t)(git / ST) & 1u);
      const int key0 = it.kstart + t * BC + cw * KW;
      const uint32_t kt = ks + s * C::TILE + wrow, vt = vs + s * C::TILE + wrow;
      const bool foreign = key0 + KW > it.kend || (key0 < it.x_hi && key0 + KW > it.x_lo);
      if (V::TMA && foreign) {
        zero_foreign_rows<D, KW>(vt, C::SUB, key0, it.kend, it.x_lo, it.x_hi, lane);
        __syncwarp();
      }
      keys<T, D, KW / 8>(st, qf, kt, vt, C::SUB, key0, rw, it.kstart, it.kend, it.x_lo, it.x_hi,
                         sl2, ln, lane);
#if __CUDA_ARCH__ >= 900
      if (V::TMA && foreign) fence_async_smem(); /* the zeros before the next box lands */
#endif
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[s]);
    }
    finish_unit<T, D, C>(p, it, st, smem, cw, lane, ctid);
  }
}

/* ------------------------------------------------------------------ host side */

/* The variants (run D2 measured TMA boxes below 16-byte cp.async; the best TMA one is
 * kept as v7): v1 D1's shape (4 warps × 16 keys, 4 stages); v2 32 keys a warp (128-key
 * tiles, 3 stages); v3 v2 with the L2 evict-first hint; v4 v3 with 256-byte L2
 * prefetch; v5 8 warps × 16 keys with the hint; v6 v3 asking L2 for the tile 3 ahead;
 * v7 TMA with the hint; v8 v3 with units prepared ahead (PRE: the unit boundary off the
 * consumers' path, PERF_NOTES.md "Unit boundary"). */
using V1 = Var<4, 16, 4, false>;
using V2 = Var<4, 32, 3, false>;
using V3 = Var<4, 32, 3, false, true>;
using V4 = Var<4, 32, 3, false, true, true>;
using V5 = Var<8, 16, 3, false, true>;
using V6 = Var<4, 32, 3, false, true, false, 3>;
using V7 = Var<4, 32, 3, true, true>;
using V8 = Var<4, 32, 3, false, true, false, 0, true>;
/* Production (onyx__cuda_attn_decode_variant 0) routes by units a CTA, in
 * production_variant: v8 where the launch's grid deals some CTA more than one unit (B64:
 * 512 units on 132 CTAs; its unit warp prepares each later unit during the one before,
 * B64 1.02 -> 1.09x cuDNN per call), v3 where every CTA takes one unit at most (B1, B16:
 * there is no later unit to prepare and the sixth warp costs a lone CTA, B1·4K v8/v3
 * 0.934). Best (v3) needs no TMA and runs every problem: v7 falls back to it for layouts
 * or devices TMA cannot take, and production keeps it where v8 has no slot. */
using Best = V3;
constexpr int kBest = 3;
constexpr int kPrepared = 8;

/* cuTensorMapEncodeTiled through cudart's driver entry point (no libcuda link). */
static PFN_cuTensorMapEncodeTiled_v12000 encode_fn() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    void *ptr = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000, cudaEnableDefault,
                                         &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
      fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(ptr);
    else
      (void)cudaGetLastError();
  });
  return fn;
}

/* What a map is made from: K or V of one launch. */
struct MapKey {
  const void *base;
  uint32_t dtype;
  int64_t d, rows, heads, batch, s_row, s_head, s_batch;
  int box_rows;
  bool operator==(const MapKey &o) const {
    return base == o.base && dtype == o.dtype && d == o.d && rows == o.rows && heads == o.heads &&
           batch == o.batch && s_row == o.s_row && s_head == o.s_head && s_batch == o.s_batch &&
           box_rows == o.box_rows;
  }
};

/* A 4-D map (d, rows, heads, batch) of 16-bit elements with element strides, boxes of
 * 64 columns × box_rows rows, 128-byte swizzle, zero fill past the tensor's end. The
 * last two maps of this thread are kept: decode calls repeat the same buffers, and the
 * encode is host time in front of the launch. */
static bool make_map(CUtensorMap *map, const MapKey &k, int slot) {
  thread_local MapKey last[2];
  thread_local CUtensorMap made[2];
  thread_local bool have[2] = {false, false};
  if (have[slot] && last[slot] == k) {
    *map = made[slot];
    return true;
  }
  PFN_cuTensorMapEncodeTiled_v12000 fn = encode_fn();
  if (fn == nullptr) return false;
  cuuint64_t dims[4] = {(cuuint64_t)k.d, (cuuint64_t)k.rows, (cuuint64_t)k.heads,
                        (cuuint64_t)k.batch};
  cuuint64_t strides[3] = {(cuuint64_t)k.s_row * 2, (cuuint64_t)k.s_head * 2,
                           (cuuint64_t)k.s_batch * 2};
  cuuint32_t box[4] = {64, (cuuint32_t)k.box_rows, 1, 1};
  cuuint32_t estr[4] = {1, 1, 1, 1};
  CUtensorMapDataType t = k.dtype == ONYX_DTYPE_BFLOAT16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                         : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  CUresult r = fn(map, t, 4, const_cast<void *>(k.base), dims, strides, box, estr,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) return false;
  last[slot] = k;
  made[slot] = *map;
  have[slot] = true;
  return true;
}

/* TMA reads 16-byte aligned bases with strides of whole 16-byte pieces below 2^40
 * bytes. */
static bool tma_layout(const void *base, int64_t s0, int64_t s1, int64_t s2) {
  const int64_t lim = (int64_t)1 << 39; /* elements of 2 bytes */
  if (base == nullptr || ((uintptr_t)base & 15u) != 0) return false;
  const int64_t s[3] = {s0, s1, s2};
  for (int i = 0; i < 3; ++i)
    if (s[i] <= 0 || s[i] % 8 != 0 || s[i] >= lim) return false;
  return true;
}

/* Per device and variant: CTAs per SM times SMs (0: not probed, -1: does not run). A
 * TMA variant runs only from an sm_90 (or newer) image. */
template <typename T, int D, class V> struct Slots { static std::atomic<int> per_device[64]; };
template <typename T, int D, class V> std::atomic<int> Slots<T, D, V>::per_device[64];

template <typename T, int D, class V> static int slots(int dev) {
  using C = Cfg<D, V>;
  int v = Slots<T, D, V>::per_device[dev].load(std::memory_order_relaxed);
  if (v != 0) return v;
  v = -1;
  int sms = 0, occ = 0;
  auto kern = decode_kernel<T, D, V>;
  cudaFuncAttributes a;
  if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM) ==
          cudaSuccess &&
      cudaFuncGetAttributes(&a, kern) == cudaSuccess &&
      (!V::TMA || (a.binaryVersion >= 90 && encode_fn() != nullptr)) &&
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess &&
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kern, C::THREADS, C::SMEM) ==
          cudaSuccess &&
      sms > 0 && occ > 0)
    v = sms * occ;
  else
    (void)cudaGetLastError();
  Slots<T, D, V>::per_device[dev].store(v, std::memory_order_relaxed);
  return v;
}

/* What launch_v returns when a TMA variant cannot run this problem: nothing ran. */
constexpr cudaError_t kNotTaken = (cudaError_t)-1;

/* Work units of a launch: every planned split of every (b, kv head), live or not (the
 * lengths that cut splits are on the device). */
static int64_t units_of(const onyx__cuda_attn_params &p) {
  return (int64_t)p.batch * p.nkv * p.n_split;
}

/* CTAs of a launch of units > 0 on slots > 0 resident CTAs (CTA c takes units c,
 * c + grid, ...): one a unit up to the slots, or onyx__cuda_attn_decode_grid's count. */
static int grid_of(int64_t units, int slots) {
  int grid = units < slots ? (int)units : slots;
  if (onyx__cuda_attn_decode_grid > 0 && onyx__cuda_attn_decode_grid < grid) {
    grid = onyx__cuda_attn_decode_grid;
  } else if (onyx__cuda_attn_decode_grid < 0) {
    const int64_t rounds = (units + grid - 1) / grid; /* the same rounds, even CTAs */
    grid = (int)((units + rounds - 1) / rounds);
  }
  return grid;
}

/* The production variant (see Best): units prepared ahead where the grid v8 would be
 * launched on deals some CTA more than one unit, else v3. */
template <typename T, int D>
static int production_variant(const onyx__cuda_attn_params &p, int dev) {
  const int n = slots<T, D, V8>(dev);
  const int64_t units = units_of(p);
  if (n <= 0 || units <= 0 || units > INT32_MAX) return kBest;
  return units > grid_of(units, n) ? kPrepared : kBest;
}

/* What the last launch ran (tests and the benchmark). */
static std::atomic<int> last_variant{0}, last_grid{0};
static std::atomic<int64_t> last_units{0};

/* Launches variant `id` (V). */
template <typename T, int D, class V>
static cudaError_t launch_v(const onyx__cuda_attn_params &p, int dev, cudaStream_t stream, int id) {
  using C = Cfg<D, V>;
  const int n = slots<T, D, V>(dev);
  if (n <= 0) return V::TMA ? kNotTaken : cudaErrorInvalidDeviceFunction;
  const int64_t heads = (int64_t)p.batch * p.nkv, units = units_of(p);
  if (units <= 0) return cudaSuccess;
  if (units > INT32_MAX) return cudaErrorInvalidValue;
  CUtensorMap tk, tv;
  memset(&tk, 0, sizeof tk);
  memset(&tv, 0, sizeof tv);
  if (V::TMA) {
    const MapKey mk = {p.k, p.dtype, D, p.kv_rows, p.nkv, p.batch, p.k_rs, p.k_gs, p.k_bs, C::BC};
    const MapKey mv = {p.v, p.dtype, D, p.kv_rows, p.nkv, p.batch, p.v_rs, p.v_gs, p.v_bs, C::BC};
    if (!tma_layout(p.k, p.k_rs, p.k_gs, p.k_bs) || !tma_layout(p.v, p.v_rs, p.v_gs, p.v_bs) ||
        p.kv_rows <= 0 || !make_map(&tk, mk, 0) || !make_map(&tv, mv, 1))
      return kNotTaken;
  }
  const bool zero_first = p.n_split > 1 && p.counters == nullptr;
  if (zero_first) {
    /* Counters in the partials (STEP memory, whatever it held): zeroed in every launch.
     * The caller's own counters are zero already (the kernel leaves them so). */
    unsigned char *count =
        (unsigned char *)p.partials +
        onyx__cuda_attn_partials_floats(p.batch, p.nq, p.sq, p.hv, p.n_split) * sizeof(float);
    cudaError_t e = cudaMemsetAsync(count, 0, (size_t)heads * sizeof(uint32_t), stream);
    if (e != cudaSuccess) return e;
  }
  const int grid = grid_of(units, n);
  last_variant.store(id, std::memory_order_relaxed);
  last_units.store(units, std::memory_order_relaxed);
  last_grid.store(grid, std::memory_order_relaxed);
  const int split_keys =
      onyx__cuda_attn_decode_split_keys > 0 ? onyx__cuda_attn_decode_split_keys : 0;
  const int alone = onyx__cuda_attn_decode_split0_alone != 0;
  auto kern = decode_kernel<T, D, V>;
  if (onyx__cuda_attn_pdl && !zero_first) {
    /* A programmatic dependent of the kernel before (not of a memset). */
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(C::THREADS);
    cfg.dynamicSmemBytes = C::SMEM;
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    if (cudaLaunchKernelEx(&cfg, kern, tk, tv, p, (int)units, split_keys, alone) == cudaSuccess)
      return cudaSuccess;
    (void)cudaGetLastError(); /* refused (an old driver): a plain launch below */
  }
  kern<<<grid, C::THREADS, C::SMEM, stream>>>(tk, tv, p, (int)units, split_keys, alone);
  return cudaGetLastError();
}

/* Variant v (1..8), or the production one (production_variant) for 0; a TMA variant
 * that cannot take the problem (layout, device, a refused map) runs as Best. */
template <typename T, int D>
static cudaError_t launch(const onyx__cuda_attn_params &p, int dev, cudaStream_t stream) {
  int v = onyx__cuda_attn_decode_variant;
  if (v < 1 || v > 8) v = production_variant<T, D>(p, dev);
  cudaError_t e = kNotTaken;
  switch (v) {
  case 1:
    e = launch_v<T, D, V1>(p, dev, stream, 1);
    break;
  case 2:
    e = launch_v<T, D, V2>(p, dev, stream, 2);
    break;
  case 3:
    e = launch_v<T, D, V3>(p, dev, stream, 3);
    break;
  case 4:
    e = launch_v<T, D, V4>(p, dev, stream, 4);
    break;
  case 5:
    e = launch_v<T, D, V5>(p, dev, stream, 5);
    break;
  case 6:
    e = launch_v<T, D, V6>(p, dev, stream, 6);
    break;
  case 8:
    e = launch_v<T, D, V8>(p, dev, stream, 8);
    break;
  default:
    e = launch_v<T, D, V7>(p, dev, stream, 7);
    break;
  }
  if (e == kNotTaken) e = launch_v<T, D, Best>(p, dev, stream, kBest);
  return e;
}

} // namespace decode
} // namespace onyx_cuda_attn

extern "C" int onyx__cuda_attn_decode_available(void) {
  using namespace onyx_cuda_attn::decode;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  if (dev < 0 || dev >= 64) return 0;
  /* The production variant (cp.async) runs every problem the route takes. */
  return slots<__nv_bfloat16, 128, Best>(dev) > 0 && slots<__nv_bfloat16, 64, Best>(dev) > 0 &&
         slots<__half, 128, Best>(dev) > 0 && slots<__half, 64, Best>(dev) > 0;
}

extern "C" int onyx__cuda_attn_decode(const onyx__cuda_attn_params *p, void *stream) {
  using namespace onyx_cuda_attn::decode;
  cudaStream_t s = (cudaStream_t)stream;
  if (p->batch <= 0 || p->sq <= 0 || p->nkv <= 0) return 0;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return (int)cudaGetLastError();
  if (dev < 0 || dev >= 64) return (int)cudaErrorInvalidDevice;
  const bool bf = p->dtype == ONYX_DTYPE_BFLOAT16;
  if (p->dtype != ONYX_DTYPE_BFLOAT16 && p->dtype != ONYX_DTYPE_FLOAT16)
    return (int)cudaErrorInvalidValue;
  if (p->hk == 128 && p->hv == 128)
    return (int)(bf ? launch<__nv_bfloat16, 128>(*p, dev, s) : launch<__half, 128>(*p, dev, s));
  if (p->hk == 64 && p->hv == 64)
    return (int)(bf ? launch<__nv_bfloat16, 64>(*p, dev, s) : launch<__half, 64>(*p, dev, s));
  return (int)cudaErrorInvalidValue;
}

extern "C" void onyx__cuda_attn_decode_last(int *out_variant, int64_t *out_units, int *out_grid) {
  using namespace onyx_cuda_attn::decode;
  *out_variant = last_variant.load(std::memory_order_relaxed);
  *out_units = last_units.load(std::memory_order_relaxed);
  *out_grid = last_grid.load(std::memory_order_relaxed);
}

extern "C" int onyx__cuda_attn_zero(void *dst, uint64_t bytes, void *stream) {
  return (int)cudaMemsetAsync(dst, 0, (size_t)bytes, (cudaStream_t)stream);
}
