/*
 * The Hopper prefill route (sm_90a): float16/bfloat16, head size 64 or 128, causal or not,
 * GQA, query and K/V read in place through strides by TMA.
 *
 * Why it is shaped this way:
 * - A work item is 128 query rows of one query head (b, h). K/V tiles of 128 keys stream
 *   through a 2-stage shared-memory ring filled by TMA (cp.async.bulk.tensor) that
 *   completes on mbarriers; the query heads of a KV group are neighbouring items, so
 *   their K/V tiles come from L2.
 * - The grid is persistent (one CTA per SM, each taking items in turn), so the loads of
 *   an item's Q and first K/V tiles run while the previous item finishes.
 * - Three warpgroups: one producer (one thread issues every TMA load; the warpgroup
 *   gives its registers back with setmaxnreg) and two consumers of 64 rows each (they
 *   take 240 registers). S = Q·Kᵀ is a wgmma with both operands in shared memory; P
 *   stays in registers as the A operand of O += P·V (V read MN-major, transposed by the
 *   tensor core). Accumulation is float32.
 * - Online softmax in the log2 domain (ex2.approx), the row sum kept per thread and
 *   reduced once at the end. Only tiles that cross a row's key limit (the causal
 *   diagonal, the end of the keys) evaluate a mask; tiles are visited from the last key
 *   tile down, so the masked ones come first.
 * - Items are dealt statically, heavy row blocks first in a snake
 *   (cuda_attn_hopper_sched.cuh). K/V loads ask L2 to keep their lines (evict_last), Q
 *   loads to drop theirs first. An item's first Q·Kᵀ goes out with the last P·V of the
 *   item before, so the tensor cores work through its epilogue.
 * - Keys past a batch's limit but inside the tensor are loaded (TMA only clips at the
 *   tensor's end) and may hold anything: their scores are masked with a select, and the
 *   value rows of the boundary tile are zeroed in shared memory before P·V (0·NaN would
 *   otherwise leak into O).
 * - In the first prompt the K/V tiles come from the new rows themselves, and they go on
 *   to the presents from the rings they were loaded into (p.fill_present): the producer
 *   thread TMA-stores each key tile once, from the item whose row block is that tile
 *   (store_present); a padded batch's rows are copied by the producer warpgroup's three
 *   other warps instead (copy_present). A fill launch before the kernel cost about 4 %
 *   of the op (B4 S4096).
 * - Each consumer stages its 64 rows of O / l in shared memory and TMA-stores them
 *   (store_rows_tma): a few instructions where 64 stores a thread went before. With the
 *   present stores, 4.7 % faster at B4 S4096 than the copy warps and plain stores (H9).
 *
 * Shared-memory tiles are TMA boxes of 64 columns × rows with the 128-byte swizzle; a
 * tile of head size D is D / 64 such column blocks. Everything the existing flash kernel
 * handles beyond this (rotary, softcap, window, masks, sinks, smooth softmax, shared KV
 * buffers, other head sizes, decode) stays there: onyx__cuda_attn_hopper_refusal (in
 * cuda_attn_route.c) names the reason.
 *
 * This file is compiled for sm_90a alone (sources.cmake), whatever the target's
 * architectures: wgmma and setmaxnreg exist nowhere else. On any other device the
 * kernels have no image and onyx__cuda_attn_hopper_available says no.
 */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <atomic>
#include <mutex>

#include "cuda_attn_device.cuh"
#include "cuda_attn_hopper_sched.cuh"
#include "cuda_attn_impl.h"
#include "cuda_attn_wgmma.cuh"

namespace onyx_cuda_attn {
namespace hopper {

using namespace sm90;

/* ------------------------------------------------------------------ configuration */

/* Tunings of the kernel: V tiles in v_stages buffers (K always in 2); with k_ahead the
 * producer loads key tile j + 1's K before tile j's V — the order the consumers need
 * them in (S_{j+1} = Q·K_{j+1}ᵀ goes out with P_j·V_j); with lazy the running maximum
 * moves only when a tile's exceeds it by more than kLazyLog2, so most tiles leave the
 * accumulator unscaled; with ordered_wait the wait for P·V stays after the softmax. A
 * plain wait_group there is hoisted by ptxas above the softmax (no MUFU between the two
 * waits in the SASS), so the softmax runs after the P·V, not beside it; kept that way by
 * default: on an H100 (2c478e0, 7 rotated rounds) the ordered wait read 4-6 % lower.
 * With tma_present the first prompt's presents go out by TMA stores from the rings, with
 * tma_out the output by TMA stores from shared memory. */
template <int VST, bool KAHEAD, bool LAZY, bool ORDERED_WAIT = false, bool TMA_PRESENT = false,
          bool TMA_OUT = false>
struct Tune {
  static constexpr int v_stages = VST;
  static constexpr bool k_ahead = KAHEAD;
  static constexpr bool lazy = LAZY;
  static constexpr bool ordered_wait = ORDERED_WAIT;
  static constexpr bool tma_present = TMA_PRESENT;
  static constexpr bool tma_out = TMA_OUT;
};
using TuneBase = Tune<2, false, false>;
/* The first prompt's presents (store_present) and the output (store_rows_tma) by TMA
 * stores: the production kernel's choice where the tensor maps allow (launch_production). */
using TunePresent = Tune<2, false, false, false, true>;
using TuneOut = Tune<2, false, false, false, false, true>;
using TuneStores = Tune<2, false, false, false, true, true>;
/* Probabilities then reach at most 2^8 before the row sum divides them out: far inside
 * the range of fp16/bf16 (P) and fp32 (O, l). */
constexpr float kLazyLog2 = 8.0f;

template <int D, typename R = TuneBase> struct Cfg {
  static constexpr int BM = 128; /* query rows per CTA: 2 consumer warpgroups × 64 */
  static constexpr int BN = 128; /* keys per tile */
  static constexpr int KST = 2;  /* K buffers */
  static constexpr int VST = R::v_stages;
  static constexpr bool TMA_PRESENT = R::tma_present;
  static constexpr int CHUNKS = D / 64; /* 64-column (128-byte) blocks of a row */
  static constexpr int THREADS = 384;
  static constexpr int Q_BYTES = BM * D * 2;  /* one of the two Q buffers */
  static constexpr int KV_BYTES = BN * D * 2; /* one K or V tile */
  static constexpr int K_OFF = 2 * Q_BYTES;
  static constexpr int V_OFF = K_OFF + KST * KV_BYTES;
  /* The output tile staged for its TMA store (R::tma_out): each consumer's 64 rows. */
  static constexpr int O_OFF = V_OFF + VST * KV_BYTES;
  static constexpr int O_BYTES = R::tma_out ? BM * D * 2 : 0;
  static constexpr int BAR_OFF = O_OFF + O_BYTES;
  static constexpr int N_BARS = 4 + 2 * KST + 2 * VST;
  static constexpr int SMEM = BAR_OFF + 128 + 1024; /* barriers, alignment slack */
  static_assert(D % 64 == 0, "head size must be a multiple of 64");
  static_assert(N_BARS * 8 <= 128, "barriers");
  static_assert(SMEM <= 227 * 1024, "shared memory of one CTA");
};

/* A CTA's shared memory: two Q buffers (item i uses buffer i & 1), the K and V rings and
 * their barriers. */
template <typename C> struct Tiles {
  unsigned char *q, *k, *v, *o;
  uint64_t *q_full, *q_empty, *k_full, *k_empty, *v_full, *v_empty;
  __device__ __forceinline__ explicit Tiles(unsigned char *smem)
      : q(smem), k(smem + C::K_OFF), v(smem + C::V_OFF), o(smem + C::O_OFF) {
    uint64_t *bars = reinterpret_cast<uint64_t *>(smem + C::BAR_OFF);
    q_full = bars;
    q_empty = bars + 2;
    k_full = bars + 4;
    k_empty = k_full + C::KST;
    v_full = k_empty + C::KST;
    v_empty = v_full + C::VST;
  }
};

/* Registers per thread after the split: 24 × 128 + 240 × 256 <= 64 K. */
constexpr int kProducerRegs = 24;
constexpr int kConsumerRegs = 240;
/* Named barriers (0 is __syncthreads): kBarTurn + w is consumer w's turn to issue its
 * wgmmas (the other consumer arrives on it once it has issued its own), kBarWg + w
 * consumer w alone. */
constexpr int kBarTurn = 1;
constexpr int kBarWg = 3;

template <typename T> struct Pack;
template <> struct Pack<__nv_bfloat16> {
  static __device__ __forceinline__ uint32_t two(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    uint32_t u;
    memcpy(&u, &h, 4);
    return u;
  }
};
template <> struct Pack<__half> {
  static __device__ __forceinline__ uint32_t two(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);
    uint32_t u;
    memcpy(&u, &h, 4);
    return u;
  }
};

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

/* O(64×D) += P(64×16) · V(16×D) for head size D. */
template <typename T, int D>
__device__ __forceinline__ void pv_step(float (&o)[D / 2], const uint32_t (&a)[4], uint64_t b) {
  if constexpr (D == 128)
    wgmma_rs_n128(Tag<T>(), o, a, b, 1);
  else
    wgmma_rs_n64(Tag<T>(), o, a, b, 1);
}

/* Issues S(64×BN) = Q(64×D)·K(BN×D)ᵀ for one consumer warpgroup (no fence, no commit):
 * D / 16 wgmmas, walking 32 bytes along a 128-byte row, then to the next column block. */
template <typename T, int D, int BM, int BN>
__device__ __forceinline__ void qk_issue(float (&sc)[BN / 2], uint32_t q_addr, uint32_t k_addr) {
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) {
    const uint32_t off = (kk & 3) * 32; /* 16 columns = 32 bytes into the block */
    const uint64_t da = desc_sw128(q_addr + (kk >> 2) * BM * 128 + off, 16, 1024);
    const uint64_t db = desc_sw128(k_addr + (kk >> 2) * BN * 128 + off, 16, 1024);
    wgmma_ss_n128(Tag<T>(), sc, da, db, kk > 0);
  }
}

/* Issues O(64×D) += P(64×BN)·V(BN×D): BN / 16 wgmmas, 16 keys (2 KB of rows) each. */
template <typename T, int D, int BN>
__device__ __forceinline__ void pv_issue(float (&o)[D / 2], const uint32_t (&pa)[BN / 16][4],
                                         uint32_t v_addr) {
#pragma unroll
  for (int kk = 0; kk < BN / 16; ++kk)
    pv_step<T, D>(o, pa[kk], desc_sw128(v_addr + kk * 16 * 128, BN * 128, 1024));
}

/* Online softmax of one score tile in place: masks keys at or past each row's limit when
 * `masked`, updates the running max m and sum l (log2 domain), turns the scores into
 * probabilities and returns the factor the accumulator must be scaled by. */
template <int BN, bool LAZY>
__device__ __forceinline__ void softmax_tile(float (&sc)[BN / 2], float (&m)[2], float (&l)[2],
                                             float (&alpha)[2], const int (&lim)[2], int key0,
                                             bool masked, float sl2) {
  if (masked) {
#pragma unroll
    for (int i = 0; i < BN / 8; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (key0 + 8 * i + (e & 1) >= lim[e >> 1]) sc[4 * i + e] = -INFINITY;
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    /* Four partial maxima: a tree, not one dependent chain of BN / 4. */
    float mp[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
#pragma unroll
    for (int i = 0; i < BN / 8; ++i)
      mp[i & 3] = fmaxf(mp[i & 3], fmaxf(sc[4 * i + 2 * r], sc[4 * i + 2 * r + 1]));
    float mx = fmaxf(fmaxf(mp[0], mp[1]), fmaxf(mp[2], mp[3]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    float mnew = fmaxf(m[r], mx * sl2);
    /* Lazy: keep the old maximum while the new one is within kLazyLog2 of it (-inf, the
     * start, never is: the difference is +inf, or NaN when both are -inf). */
    if (LAZY && mnew - m[r] <= kLazyLog2) mnew = m[r];
    const float muse = mnew == -INFINITY ? 0.0f : mnew;
    alpha[r] = ex2(m[r] - muse);
    m[r] = mnew;
    float sum[2] = {0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < BN / 8; ++i) {
      sc[4 * i + 2 * r] = ex2(fmaf(sc[4 * i + 2 * r], sl2, -muse));
      sc[4 * i + 2 * r + 1] = ex2(fmaf(sc[4 * i + 2 * r + 1], sl2, -muse));
      sum[i & 1] += sc[4 * i + 2 * r] + sc[4 * i + 2 * r + 1];
    }
    l[r] = l[r] * alpha[r] + (sum[0] + sum[1]);
  }
}

/* Probabilities as the A operand of P·V: accumulator columns 8i..8i+7 are k-slice i / 2,
 * registers 0, 1 (rows g, g + 8) for its first 8 keys and 2, 3 for the next 8. */
template <typename T, int BN>
__device__ __forceinline__ void to_operand(const float (&sc)[BN / 2], uint32_t (&pa)[BN / 16][4]) {
#pragma unroll
  for (int i = 0; i < BN / 8; ++i) {
    pa[i >> 1][(i & 1) * 2 + 0] = Pack<T>::two(sc[4 * i + 0], sc[4 * i + 1]);
    pa[i >> 1][(i & 1) * 2 + 1] = Pack<T>::two(sc[4 * i + 2], sc[4 * i + 3]);
  }
}

template <int D, bool LAZY>
__device__ __forceinline__ void rescale(float (&o)[D / 2], const float (&a)[2]) {
  /* Lazy: most tiles left the maximum, so every factor of the warp is 1. */
  if (LAZY && !__any_sync(0xffffffffu, a[0] != 1.0f || a[1] != 1.0f)) return;
#pragma unroll
  for (int i = 0; i < D / 8; ++i) {
    o[4 * i + 0] *= a[0];
    o[4 * i + 1] *= a[0];
    o[4 * i + 2] *= a[1];
    o[4 * i + 3] *= a[1];
  }
}

template <int D>
__device__ __forceinline__ void clear_state(float (&o)[D / 2], float (&m)[2], float (&l)[2]) {
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
  m[0] = m[1] = -INFINITY;
  l[0] = l[1] = 0.0f;
}

/* Zeroes value rows [r_lo, BN) of a V tile (D / 64 column blocks of 128-byte rows; the
 * swizzle only moves 16-byte pieces inside a row), by the 128 threads of one warpgroup,
 * and makes the zeros visible to its wgmmas. Both consumers zero the same rows (the
 * same bytes), so neither waits for the other. */
template <int D, int BN>
__device__ __forceinline__ void zero_rows(unsigned char *vt, int r_lo, int wg_tid, int bar_id) {
  const int n16 = (BN - r_lo) * 8;
  for (int i = wg_tid; i < n16 * (D / 64); i += 128) {
    const int c = i / n16, k = i % n16;
    reinterpret_cast<uint4 *>(vt + c * BN * 128 + r_lo * 128)[k] = make_uint4(0u, 0u, 0u, 0u);
  }
  fence_async_smem();
  bar_sync(bar_id, 128);
}

/* Work item: row block mi of query head bh = b · nq + h (cuda_attn_hopper_sched.cuh deals
 * them). Keys [0, hi) matter to some row of the block (rows past sq do not count);
 * n_tiles key tiles of BN cover them. */
struct Item {
  int b, h, g, m0, n_tiles;
  BatchGeom geo;
};
__device__ __forceinline__ Item item_of(const onyx__cuda_attn_params &p, int bh, int mi, int bm,
                                        int bn) {
  Item it;
  it.m0 = mi * bm;
  it.b = bh / p.nq;
  it.h = bh - it.b * p.nq;
  it.g = it.h / p.group;
  it.geo = batch_geom(p, it.b);
  const int64_t last_row = (int64_t)min(it.m0 + bm, p.sq) - 1;
  int64_t hi = it.geo.limit;
  if (p.causal && it.geo.qpos0 + last_row + 1 < hi) hi = it.geo.qpos0 + last_row + 1;
  it.n_tiles = hi > 0 ? (int)((hi + bn - 1) / bn) : 0;
  return it;
}

/* The rows of an item one consumer thread owns (row0 and row0 + 8, row0 counted from
 * the block's first row) and the key limits that decide masking. */
struct Rows {
  int row0;
  int lim[2];        /* each row's key limit (exclusive) less 2·t4: compared with key0 + 8i + e */
  int64_t first_lim; /* the block's first row's: key tiles ending at or before it need no mask */
  int zero_from;     /* value rows from here on in tile 0 (the last visited) get zeroed */
};
__device__ __forceinline__ Rows rows_of(const onyx__cuda_attn_params &p, const Item &it,
                                        int row_in_block, int t4, int bn) {
  Rows rw;
  const BatchGeom &geo = it.geo;
  rw.row0 = it.m0 + row_in_block;
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    int64_t lm = geo.limit;
    if (p.causal && geo.qpos0 + rw.row0 + 8 * rr + 1 < lm) lm = geo.qpos0 + rw.row0 + 8 * rr + 1;
    rw.lim[rr] = (int)max(lm, (int64_t)-1) - 2 * t4;
  }
  rw.first_lim = geo.limit;
  if (p.causal && geo.qpos0 + it.m0 + 1 < rw.first_lim) rw.first_lim = geo.qpos0 + it.m0 + 1;
  /* Value rows at or past the limit may hold anything (0·NaN would reach O); tiles run
   * from the last down, so the one holding the limit is tile 0. */
  rw.zero_from = geo.limit < p.kv_rows ? (int)(geo.limit - (it.n_tiles - 1) * bn) : bn;
  return rw;
}

/* After an item's first Q·Kᵀ has completed: frees its K stage (and Q when it is the
 * item's only tile) and runs the first softmax into the P·V operand. */
template <typename T, int BN>
__device__ __forceinline__ void first_softmax(float (&sc)[BN / 2], uint32_t (&pa)[BN / 16][4],
                                              float (&m)[2], float (&l)[2], float (&alpha)[2],
                                              const Rows &rw, int n, uint64_t *k_empty,
                                              uint64_t *q_empty, int lane, float sl2) {
  fence_regs(sc);
  __syncwarp();
  if (lane == 0) {
    mbar_arrive(k_empty);
    if (n == 1) mbar_arrive(q_empty);
  }
  const int key_top = (n - 1) * BN;
  /* An item's first tile: m is -inf, so lazy or not is the same. */
  softmax_tile<BN, false>(sc, m, l, alpha, rw.lim, key_top, key_top + BN > rw.first_lim, sl2);
  to_operand<T, BN>(sc, pa);
}

/* The epilogue's factor for row rr of a thread: its row sum over the quad, then 1 / l
 * (0 for a row that sees no key). */
__device__ __forceinline__ float row_scale(const float (&m)[2], float (&l)[2], int rr) {
  l[rr] += __shfl_xor_sync(0xffffffffu, l[rr], 1);
  l[rr] += __shfl_xor_sync(0xffffffffu, l[rr], 2);
  return (m[rr] == -INFINITY || !(l[rr] > 0.0f)) ? 0.0f : 1.0f / l[rr];
}

/* Epilogue: O / l straight to the output. */
template <typename T, int D>
__device__ __forceinline__ void store_rows(const onyx__cuda_attn_params &p, const Item &it,
                                           int row0, int t4, const float (&o)[D / 2],
                                           const float (&m)[2], float (&l)[2]) {
  T *ybase = (T *)p.y + (int64_t)it.b * p.y_bs + (int64_t)it.h * p.y_hs;
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const float f = row_scale(m, l, rr);
    const int row = row0 + 8 * rr;
    if (row >= p.sq) continue;
    T *dst = ybase + (int64_t)row * p.y_ss + 2 * t4;
#pragma unroll
    for (int i = 0; i < D / 8; ++i)
      *reinterpret_cast<uint32_t *>(dst + 8 * i) =
          Pack<T>::two(o[4 * i + 2 * rr] * f, o[4 * i + 2 * rr + 1] * f);
  }
}

/* Epilogue through shared memory (R::tma_out): O / l into this consumer's 64 rows of the
 * staged output tile (ob: D / 64 blocks of 64 rows × 128 bytes, swizzled as the TMA box
 * expects), then its first thread stores them with TMA stores, clipped at the prompt's
 * end like store_rows. The first barrier frees the tile: that thread has seen the store
 * of the item before finish reading it. */
template <typename T, int D>
__device__ __forceinline__ void
store_rows_tma(const CUtensorMap &ty, unsigned char *ob, const Item &it, int cw, int r0, int t4,
               int wg_tid, const float (&o)[D / 2], const float (&m)[2], float (&l)[2]) {
  if (wg_tid == 0) bulk_wait_read<0>();
  bar_sync(kBarWg + cw, 128);
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    const float f = row_scale(m, l, rr);
    const int r = r0 + 8 * rr; /* of this consumer's 64 */
    unsigned char *row = ob + r * 128 + 4 * t4;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) /* columns 8i + 2·t4: block i / 8, 16-byte chunk i % 8 */
      *reinterpret_cast<uint32_t *>(row + (i / 8) * 64 * 128 + (((i % 8) ^ (r & 7)) * 16)) =
          Pack<T>::two(o[4 * i + 2 * rr] * f, o[4 * i + 2 * rr + 1] * f);
  }
  fence_async_smem(); /* the generic writes, before the async proxy reads them */
  bar_sync(kBarWg + cw, 128);
  if (wg_tid == 0) {
#pragma unroll
    for (int c = 0; c < D / 64; ++c)
      tma_store_4d(&ty, ob + c * 64 * 128, c * 64, it.m0 + 64 * cw, it.h, it.b);
    bulk_commit();
  }
}

/* The item's epilogue, by TMA stores (R::tma_out) or plain ones; my_row is the thread's
 * first row in the item's block, row0 the same in the prompt. */
template <typename T, int D, typename R>
__device__ __forceinline__ void store_out(const onyx__cuda_attn_params &p, const CUtensorMap &ty,
                                          unsigned char *o_rows, const Item &it, int cw, int my_row,
                                          int row0, int t4, int wg_tid, const float (&o)[D / 2],
                                          const float (&m)[2], float (&l)[2]) {
  if constexpr (R::tma_out)
    store_rows_tma<T, D>(ty, o_rows, it, cw, my_row - cw * 64, t4, wg_tid, o, m, l);
  else
    store_rows<T, D>(p, it, row0, t4, o, m, l);
}

/* The first prompt's present write (p.fill_present): the producer warpgroup's three
 * idle warps (t < 96) copy the new K/V rows of batches [b0, b1), which the TMA loads
 * also read, into the presents while the consumers compute. 16 bytes a thread a step;
 * neighbouring threads take neighbouring pieces of a row, CTA c the pieces
 * c·96 + t + i·(grid·96). */
template <int D>
__device__ __forceinline__ void
copy_rows(const uint16_t *src, int32_t s_bs, int32_t s_gs, int32_t s_rs, uint16_t *dst,
          const onyx__cuda_attn_params &p, uint32_t t, int b0, int b1) {
  constexpr uint32_t kPieces = D / 8; /* of one row */
  const uint32_t rows = (uint32_t)p.sq, nkv = (uint32_t)p.nkv;
  const uint32_t n = (uint32_t)(b1 - b0) * nkv * rows * kPieces;
  for (uint32_t i = blockIdx.x * 96u + t; i < n; i += gridDim.x * 96u) {
    const uint32_t c = i % kPieces, r = (i / kPieces) % rows, bg = i / kPieces / rows;
    const uint32_t g = bg % nkv, b = (uint32_t)b0 + bg / nkv;
    /* Offsets in elements fit 31 bits (fill_present_ok). */
    const uint32_t from = b * s_bs + g * s_gs + r * s_rs + c * 8u;
    const uint32_t to =
        b * (uint32_t)p.pr_bs + g * (uint32_t)p.pr_gs + r * (uint32_t)p.pr_rs + c * 8u;
    *reinterpret_cast<uint4 *>(dst + to) = __ldg(reinterpret_cast<const uint4 *>(src + from));
  }
}

template <int D>
__device__ __forceinline__ void copy_batches(const onyx__cuda_attn_params &p, uint32_t t, int b0,
                                             int b1) {
  copy_rows<D>(static_cast<const uint16_t *>(p.k), (int32_t)p.k_bs, (int32_t)p.k_gs,
               (int32_t)p.k_rs, static_cast<uint16_t *>(p.present_k), p, t, b0, b1);
  copy_rows<D>(static_cast<const uint16_t *>(p.v), (int32_t)p.v_bs, (int32_t)p.v_gs,
               (int32_t)p.v_rs, static_cast<uint16_t *>(p.present_v), p, t, b0, b1);
}

/* A batch whose every key is valid and whose queries start at position 0: each of its
 * key tiles t is loaded, whole and never zeroed in shared memory, by the item of row
 * block t (of each query head), so the TMA stores (R::tma_present) can write it. */
__device__ __forceinline__ bool plain_batch(const onyx__cuda_attn_params &p, const BatchGeom &geo) {
  return geo.limit >= p.kv_rows && geo.qpos0 == 0;
}

/* The copy warps' share of the present write: every batch, or with the TMA stores only
 * the batches those leave (not plain_batch). */
template <int D, bool TMA_PRESENT>
__device__ __forceinline__ void copy_present(const onyx__cuda_attn_params &p, uint32_t t) {
  if constexpr (!TMA_PRESENT) {
    copy_batches<D>(p, t, 0, p.batch);
  } else {
    for (int b = 0; b < p.batch; ++b)
      if (!plain_batch(p, batch_geom(p, b))) copy_batches<D>(p, t, b, b + 1);
  }
}

/* The TMA stores' share of the present write: key tile j of item it (ring position g),
 * once loaded, straight from the rings to the presents. Called for the item of the KV
 * group's first query head whose row block is the tile's (the diagonal tile under a
 * causal mask), in plain batches only. The stores read the buffers until
 * bulk_wait_read, which the producer passes before it loads into a buffer again. */
template <typename C>
__device__ __forceinline__ void store_present(const CUtensorMap &tpk, const CUtensorMap &tpv,
                                              const Tiles<C> &t, const Item &it, int j, int g) {
  const int ks = g % C::KST, vs = g % C::VST, n0 = (it.n_tiles - 1 - j) * C::BN;
  mbar_wait(&t.k_full[ks], (uint32_t)(g / C::KST) & 1u);
  mbar_wait(&t.v_full[vs], (uint32_t)(g / C::VST) & 1u);
#pragma unroll
  for (int c = 0; c < C::CHUNKS; ++c) {
    tma_store_4d(&tpk, t.k + ks * C::KV_BYTES + c * C::BN * 128, c * 64, n0, it.g, it.b);
    tma_store_4d(&tpv, t.v + vs * C::KV_BYTES + c * C::BN * 128, c * 64, n0, it.g, it.b);
  }
  bulk_commit();
}

/* One K/V tile load: key tile j (of n, visited from the last down) of item it into
 * ring buffer g % STAGES, once the consumers have freed it (g counts tiles over the
 * CTA's items). */
template <typename C, int STAGES>
__device__ __forceinline__ void load_tile(const CUtensorMap &tm, unsigned char *ring,
                                          uint64_t *full, uint64_t *empty, const Item &it, int j,
                                          int g, L2Evict ev) {
  const int s = g % STAGES, n0 = (it.n_tiles - 1 - j) * C::BN;
  mbar_wait(&empty[s], ((uint32_t)(g / STAGES) & 1u) ^ 1u);
  if constexpr (C::TMA_PRESENT) bulk_wait_read<0>(); /* a present store may still read it */
  mbar_expect_tx(&full[s], C::KV_BYTES);
#pragma unroll
  for (int c = 0; c < C::CHUNKS; ++c)
    tma_load_4d(ring + s * C::KV_BYTES + c * C::BN * 128, &tm, c * 64, n0, it.g, it.b, &full[s],
                l2_policy(ev));
}

/* The producer's loads of one item, in the consumers' order: its Q into buffer
 * items & 1, its key tiles from the last down through the rings (K_j, V_j; or with
 * k_ahead K_0, then K_{j+1} before V_j). git and items count the key tiles and
 * non-empty items so far. */
template <int D, typename R>
__device__ __forceinline__ void
produce_item(const CUtensorMap &tq, const CUtensorMap &tk, const CUtensorMap &tv,
             const CUtensorMap &tpk, const CUtensorMap &tpv, const onyx__cuda_attn_params &p,
             const Item &it, unsigned char *smem, L2Evict q_ev, L2Evict kv_ev, int &git,
             int &items) {
  using C = Cfg<D, R>;
  const Tiles<C> t(smem);
  const int n = it.n_tiles;
  if (n == 0) return;
  /* The key tile this item writes to the presents (store_present), or -1. */
  int j_store = -1;
  if constexpr (R::tma_present)
    if (p.fill_present && it.h % p.group == 0 && plain_batch(p, it.geo))
      j_store = n - 1 - it.m0 / C::BM;
  const int qb = items & 1;
  mbar_wait(&t.q_empty[qb], ((uint32_t)(items >> 1) & 1u) ^ 1u);
  mbar_expect_tx(&t.q_full[qb], C::Q_BYTES);
#pragma unroll
  for (int c = 0; c < C::CHUNKS; ++c)
    tma_load_4d(t.q + qb * C::Q_BYTES + c * C::BM * 128, &tq, c * 64, it.m0, it.h, it.b,
                &t.q_full[qb], l2_policy(q_ev));
  /* Key tile j's K and V (git + j counts it over the CTA's items). */
  const auto load_k = [&](int j) {
    load_tile<C, C::KST>(tk, t.k, t.k_full, t.k_empty, it, j, git + j, kv_ev);
  };
  const auto load_v = [&](int j) {
    load_tile<C, C::VST>(tv, t.v, t.v_full, t.v_empty, it, j, git + j, kv_ev);
    if constexpr (R::tma_present)
      if (j == j_store) store_present<C>(tpk, tpv, t, it, j, git + j);
  };
  if constexpr (R::k_ahead) {
    load_k(0);
    for (int j = 1; j < n; ++j) {
      load_k(j);
      load_v(j - 1);
    }
    load_v(n - 1);
  } else {
    for (int j = 0; j < n; ++j) {
      load_k(j);
      load_v(j);
    }
  }
  git += n;
  ++items;
}

/* The producer's one thread: every TMA load, in the consumers' order (the schedule's
 * paired part, then its tail). It runs ahead into the next item (its Q into the other
 * buffer, its K/V through the rings) while the consumers finish the current one. */
template <int D, typename R>
__device__ __forceinline__ void produce(const CUtensorMap &tq, const CUtensorMap &tk,
                                        const CUtensorMap &tv, const CUtensorMap &tpk,
                                        const CUtensorMap &tpv, const onyx__cuda_attn_params &p,
                                        const Sched &sc, bool kv_evict_last, unsigned char *smem) {
  constexpr int BM = Cfg<D>::BM, BN = Cfg<D>::BN;
  tma_prefetch_map(&tq);
  tma_prefetch_map(&tk);
  tma_prefetch_map(&tv);
  /* Q is read by one CTA (the KV group's other heads read their own), K/V by every row
   * block of the group's heads: those lines are the ones worth keeping in L2. The
   * policies are made where they are used (no registers held across the loop). */
  const L2Evict q_ev = kv_evict_last ? L2Evict::first : L2Evict::normal;
  const L2Evict kv_ev = kv_evict_last ? L2Evict::last : L2Evict::normal;
  int git = 0, items = 0;
  for_each_item(sc, (int)gridDim.x, (int)blockIdx.x, [&](int bh, int mi) {
    produce_item<D, R>(tq, tk, tv, tpk, tpv, p, item_of(p, bh, mi, BM, BN), smem, q_ev, kv_ev, git,
                       items);
  });
  /* The CTA's shared memory must outlive the present stores' reads. */
  if constexpr (R::tma_present) bulk_wait<0>();
}

/* ------------------------------------------------------------------ the kernel */

template <typename T, int D, bool PING, bool CHAIN, typename R = TuneBase>
__global__ void __launch_bounds__(384, 1)
    hopper_kernel(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,
                  const __grid_constant__ CUtensorMap tv, const __grid_constant__ CUtensorMap tpk,
                  const __grid_constant__ CUtensorMap tpv, const __grid_constant__ CUtensorMap ty,
                  const onyx__cuda_attn_params p, const Sched sched, bool kv_evict_last) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using C = Cfg<D, R>;
  constexpr int BM = C::BM, BN = C::BN, KST = C::KST, VST = C::VST;
  extern __shared__ unsigned char smem_raw[];
  /* 128-byte swizzled TMA boxes and wgmma descriptors assume 1024-byte aligned atoms. */
  unsigned char *smem = smem_raw + ((1024 - (saddr(smem_raw) & 1023)) & 1023);
  const Tiles<C> t(smem);
  unsigned char *qs = t.q, *ks = t.k, *vs = t.v;
  uint64_t *q_full = t.q_full, *q_empty = t.q_empty, *k_full = t.k_full, *v_full = t.v_full;
  uint64_t *k_empty = t.k_empty, *v_empty = t.v_empty;

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, wg = warp >> 2;

  if (tid == 0) {
    for (int b = 0; b < 2; ++b) {
      mbar_init(&q_full[b], 1);
      mbar_init(&q_empty[b], 8); /* one arrival per consumer warp */
    }
    for (int s = 0; s < KST; ++s) {
      mbar_init(&k_full[s], 1);
      mbar_init(&k_empty[s], 8);
    }
    for (int s = 0; s < VST; ++s) {
      mbar_init(&v_full[s], 1);
      mbar_init(&v_empty[s], 8);
    }
    mbar_fence_init();
  }
  __syncthreads();

  if (wg == 0) {
    /* ---------------- producer warpgroup: one thread issues every load (produce), the
     * other three warps copy the first prompt's presents. */
    regs_shrink<kProducerRegs>();
    /* The warp index through a shuffle is provably warp-uniform: ptxas then keeps the
     * producer's loop state in uniform registers (without it, that loop spilled at 24). */
    if (__shfl_sync(0xffffffffu, warp, 0) == 0) {
      if (lane == 0) produce<D, R>(tq, tk, tv, tpk, tpv, p, sched, kv_evict_last, smem);
    } else if (p.fill_present) {
      copy_present<D, R::tma_present>(p, (uint32_t)tid - 32u);
    }
    return;
  }

  /* ---------------- consumers: warpgroup cw owns rows [64·cw, 64·cw + 64) of an item.
   * Per key tile j: issue S_j = Q·K_jᵀ and O += P_{j-1}·V_{j-1} together, wait for S_j
   * only, so the softmax of S_j runs while the tensor cores do P_{j-1}·V_{j-1}; the two
   * consumers take turns to issue (ping-pong), so one's softmax also covers the other's
   * matrix products. Across items (CHAIN) the last P·V of one goes out with the first
   * Q·Kᵀ of the next, whose softmax then runs after this item's epilogue. */
  regs_grow<kConsumerRegs>();
  const int cw = wg - 1, wq = warp & 3, gq = lane >> 2, t4 = lane & 3, wg_tid = tid - 128 * wg;
  const float sl2 = p.scale * kLog2e;
  const int my_turn = kBarTurn + cw, other_turn = kBarTurn + (cw ^ 1);
  if (PING && cw == 1) bar_arrive(kBarTurn, 256); /* consumer 0 issues first */
  const int my_row = cw * 64 + wq * 16 + gq;      /* in the item's block: rows my_row, my_row + 8 */
  /* This consumer's 64 rows of Q buffer b. */
  const auto q_rows = [&](int b) { return saddr(qs + b * C::Q_BYTES) + cw * 64 * 128; };
  unsigned char *const o_rows = t.o + cw * 64 * D * 2; /* its staged output (R::tma_out) */

  int git = 0, items = 0; /* key tiles and non-empty items so far */
  /* primed (CHAIN): the current item's first tile went out with the last P·V of the
   * item before and its softmax is done (o, m, l, alpha, pa hold it). */
  bool primed = false;
  Item it;
  Rows rw;
  float o[D / 2], m[2], l[2], alpha[2], sc[BN / 2];
  uint32_t pa[BN / 16][4];
  const int G = (int)gridDim.x, me = (int)blockIdx.x;
  Cursor cur;
  int bh, mi;
  for (bool more = next_item(sched, G, me, cur, bh, mi); more;) {
    if (!primed) {
      it = item_of(p, bh, mi, BM, BN);
      rw = rows_of(p, it, my_row, t4, BN);
    }
    const int n = it.n_tiles;
    const uint32_t q_addr = q_rows(items & 1);
    if (!primed) {
      clear_state<D>(o, m, l);
      if (n > 0) {
        const int s0 = git % KST, qb = items & 1;
        mbar_wait(&q_full[qb], (uint32_t)(items >> 1) & 1u);
        mbar_wait(&k_full[s0], (uint32_t)(git / KST) & 1u);
        if (PING) bar_sync(my_turn, 256);
        wgmma_fence();
        qk_issue<T, D, BM, BN>(sc, q_addr, saddr(ks + s0 * C::KV_BYTES));
        wgmma_commit();
        if (PING) bar_arrive(other_turn, 256);
        wgmma_wait<0>();
        first_softmax<T, BN>(sc, pa, m, l, alpha, rw, n, &k_empty[s0], &q_empty[qb], lane, sl2);
      }
    }

    for (int j = 1; j < n; ++j) {
      const int g = git + j, s = g % KST, sp = (g - 1) % VST, key0 = (n - 1 - j) * BN;
      mbar_wait(&k_full[s], (uint32_t)(g / KST) & 1u);
      mbar_wait(&v_full[sp], (uint32_t)((g - 1) / VST) & 1u);
      if (j == 1 && rw.zero_from < BN)
        zero_rows<D, BN>(vs + sp * C::KV_BYTES, rw.zero_from, wg_tid, kBarWg + cw);
      rescale<D, R::lazy>(o, alpha); /* by the last softmax's factor: no P·V is in flight */
      if (PING) bar_sync(my_turn, 256);
      wgmma_fence();
      qk_issue<T, D, BM, BN>(sc, q_addr, saddr(ks + s * C::KV_BYTES));
      wgmma_commit();
      pv_issue<T, D, BN>(o, pa, saddr(vs + sp * C::KV_BYTES));
      wgmma_commit();
      if (PING) bar_arrive(other_turn, 256);
      wgmma_wait<1>(); /* S_j is ready; P·V of the tile before still runs */
      fence_regs(sc);
      __syncwarp();
      if (lane == 0) {
        mbar_arrive(&k_empty[s]);
        if (j == n - 1) mbar_arrive(&q_empty[items & 1]); /* the item's last use of Q */
      }
      softmax_tile<BN, R::lazy>(sc, m, l, alpha, rw.lim, key0, key0 + BN > rw.first_lim, sl2);
      if constexpr (R::ordered_wait)
        wgmma_wait_after<0>(l[1]); /* the softmax ran beside the P·V in flight */
      else
        wgmma_wait<0>();
      fence_regs(o);
      __syncwarp();
      if (lane == 0) mbar_arrive(&v_empty[sp]);
      to_operand<T, BN>(sc, pa);
    }

    /* The next item; with CHAIN, when both have keys, its first Q·Kᵀ is issued with
     * this item's last P·V, so the tensor cores work through this epilogue and the
     * next item's first softmax instead of waiting between items. */
    Item nx = it; /* the next item's, when there is one */
    Rows nr = rw;
    bool chain = false;
    const bool more_n = next_item(sched, G, me, cur, bh, mi);
    if constexpr (CHAIN) {
      if (more_n) {
        nx = item_of(p, bh, mi, BM, BN);
        nr = rows_of(p, nx, my_row, t4, BN);
      }
      /* Through a shuffle: provably warp-uniform, so ptxas keeps the wgmmas unserialized. */
      chain = __shfl_sync(0xffffffffu, (int)(n > 0 && more_n && nx.n_tiles > 0), 0) != 0;
    }
    const int gl = git + n - 1, sl = gl % VST;
    if (n > 0) { /* the last tile's V, and the accumulator ready for its P·V */
      mbar_wait(&v_full[sl], (uint32_t)(gl / VST) & 1u);
      if (n == 1 && rw.zero_from < BN)
        zero_rows<D, BN>(vs + sl * C::KV_BYTES, rw.zero_from, wg_tid, kBarWg + cw);
      rescale<D, R::lazy>(o, alpha);
    }
    /* Two whole branches, each with its own waits and releases: with one shared tail
     * after them ptxas serializes every wgmma of the chained kernel (no C7520 note;
     * a WARPGROUP.DEPBAR after each HGMMA in the SASS). */
    if (chain) {
      /* The last P·V with the next item's first Q·Kᵀ. */
      const int s0n = (git + n) % KST, qbn = (items + 1) & 1;
      mbar_wait(&q_full[qbn], (uint32_t)((items + 1) >> 1) & 1u);
      mbar_wait(&k_full[s0n], (uint32_t)((git + n) / KST) & 1u);
      if (PING) bar_sync(my_turn, 256);
      wgmma_fence();
      pv_issue<T, D, BN>(o, pa, saddr(vs + sl * C::KV_BYTES));
      wgmma_commit();
      qk_issue<T, D, BM, BN>(sc, q_rows(qbn), saddr(ks + s0n * C::KV_BYTES));
      wgmma_commit();
      if (PING) bar_arrive(other_turn, 256);
      wgmma_wait<1>(); /* the P·V is done; the next Q·Kᵀ still runs */
      fence_regs(o);
      __syncwarp();
      if (lane == 0) mbar_arrive(&v_empty[sl]);
      git += n;
      ++items;
      store_out<T, D, R>(p, ty, o_rows, it, cw, my_row, rw.row0, t4, wg_tid, o, m, l);
      clear_state<D>(o, m, l);
      wgmma_wait<0>();
      first_softmax<T, BN>(sc, pa, m, l, alpha, nr, nx.n_tiles, &k_empty[s0n], &q_empty[qbn], lane,
                           sl2);
    } else {
      if (n > 0) {
        /* P·V of the last tile. */
        if (PING) bar_sync(my_turn, 256);
        wgmma_fence();
        pv_issue<T, D, BN>(o, pa, saddr(vs + sl * C::KV_BYTES));
        wgmma_commit();
        if (PING) bar_arrive(other_turn, 256);
        wgmma_wait<0>();
        fence_regs(o);
        __syncwarp();
        if (lane == 0) mbar_arrive(&v_empty[sl]);
        git += n;
        ++items;
      }
      store_out<T, D, R>(p, ty, o_rows, it, cw, my_row, rw.row0, t4, wg_tid, o, m, l);
    }
    primed = chain;
    if constexpr (CHAIN) {
      it = nx;
      rw = nr;
    }
    more = more_n;
  }
  /* Consumer 1 arrived once more than consumer 0 waited (its first arrival lets
   * consumer 0 start): take that turn so no barrier is left half-passed. */
  if (PING && cw == 0) bar_sync(kBarTurn, 256);
  /* The CTA's shared memory must outlive the output stores' reads. */
  if constexpr (R::tma_out)
    if (wg_tid == 0) bulk_wait<0>();
#else
  (void)tq;
  (void)tk;
  (void)tv;
  (void)tpk;
  (void)tpv;
  (void)ty;
  (void)p;
  (void)sched;
  (void)kv_evict_last;
  __trap(); /* never launched: only built for sm_90a */
#endif
}

/* ------------------------------------------------------------------ host side */

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

/* A 4-D map (d, rows, heads, batch) of 16-bit elements with element strides, boxes of
 * 64 columns × box_rows rows, 128-byte swizzle, zero fill past the tensor's end. */
static bool make_map(CUtensorMap *map, uint32_t dtype, const void *base, int64_t d, int64_t rows,
                     int64_t heads, int64_t batch, int64_t s_row, int64_t s_head, int64_t s_batch,
                     int box_rows) {
  PFN_cuTensorMapEncodeTiled_v12000 fn = encode_fn();
  if (fn == nullptr) return false;
  cuuint64_t dims[4] = {(cuuint64_t)d, (cuuint64_t)rows, (cuuint64_t)heads, (cuuint64_t)batch};
  cuuint64_t strides[3] = {(cuuint64_t)s_row * 2, (cuuint64_t)s_head * 2, (cuuint64_t)s_batch * 2};
  cuuint32_t box[4] = {64, (cuuint32_t)box_rows, 1, 1};
  cuuint32_t estr[4] = {1, 1, 1, 1};
  CUtensorMapDataType t = dtype == ONYX_DTYPE_BFLOAT16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                       : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  CUresult r = fn(map, t, 4, const_cast<void *>(base), dims, strides, box, estr,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS;
}

/* What launch returns when the driver refuses a tensor map: nothing ran, the caller
 * falls back to the flash kernel. */
constexpr cudaError_t kNotTaken = (cudaError_t)-1;

/* The kernel's tensor maps: Q, K, V, the presents (pk, pv) and the output (y, boxes of
 * 64 rows). Where presents or out is false the kernel does not use those maps (they may
 * be copies of k, v and q). */
struct Maps {
  CUtensorMap q, k, v, pk, pv, y;
  bool presents, out; /* the TMA stores may use pk/pv and y */
};

template <typename T, int D, bool PING, bool CHAIN, typename R>
static cudaError_t launch_kernel(const Maps &m, const onyx__cuda_attn_params &p, int sms,
                                 cudaStream_t stream) {
  using C = Cfg<D, R>;
  auto kern = hopper_kernel<T, D, PING, CHAIN, R>;
  cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM);
  if (e != cudaSuccess) return e;
  const int m_blocks = (p.sq + C::BM - 1) / C::BM, heads = p.batch * p.nq;
  const int64_t items = (int64_t)m_blocks * heads;
  /* Persistent: one CTA per SM. Variant 2 (tests, benchmark): a CTA per item. */
  const int64_t ctas = (items < sms || onyx__cuda_attn_hopper_variant == 2) ? items : sms;
  /* Heavy first; paired units on request (measured no faster, cuda_attn_hopper_sched.cuh). */
  const Sched sc = plan_sched(m_blocks, heads, (int)ctas, onyx__cuda_attn_hopper_schedule == 1);
  const bool hints = onyx__cuda_attn_hopper_l2_hints != 0;
  kern<<<(unsigned)ctas, C::THREADS, C::SMEM, stream>>>(m.q, m.k, m.v, m.pk, m.pv, m.y, p, sc,
                                                        hints);
  return cudaGetLastError();
}

/* The production kernel (H9 in PERF_NOTES): the presents and the output written by TMA
 * stores where their maps allow (B4 S4096 on an H100, medians of 5 rotated rounds: 530
 * against 507 TFLOP/s with the copy warps and plain stores); the copy warps and plain
 * stores otherwise. */
template <typename T, int D>
static cudaError_t launch_production(const Maps &m, const onyx__cuda_attn_params &p, int sms,
                                     cudaStream_t stream) {
  if (m.out && m.presents) return launch_kernel<T, D, true, true, TuneStores>(m, p, sms, stream);
  if (m.out) return launch_kernel<T, D, true, true, TuneOut>(m, p, sms, stream);
  if (m.presents) return launch_kernel<T, D, true, true, TunePresent>(m, p, sms, stream);
  return launch_kernel<T, D, true, true, TuneBase>(m, p, sms, stream);
}

/* m with its TMA stores limited to those named (tunings 8-11). */
static Maps with_stores(Maps m, bool presents, bool out) {
  m.presents = m.presents && presents;
  m.out = m.out && out;
  return m;
}

template <typename T, int D>
static cudaError_t launch(const onyx__cuda_attn_params &p, int sms, cudaStream_t stream) {
  constexpr int BM = Cfg<D>::BM, BN = Cfg<D>::BN;
  Maps m;
  if (!make_map(&m.q, p.dtype, p.q, D, p.sq, p.nq, p.batch, p.q_ss, p.q_hs, p.q_bs, BM) ||
      !make_map(&m.k, p.dtype, p.k, D, p.kv_rows, p.nkv, p.batch, p.k_rs, p.k_gs, p.k_bs, BN) ||
      !make_map(&m.v, p.dtype, p.v, D, p.kv_rows, p.nkv, p.batch, p.v_rs, p.v_gs, p.v_bs, BN))
    return kNotTaken;
  /* The presents' rows past the prompt's are not the first prompt's to write. */
  m.presents =
      p.fill_present &&
      make_map(&m.pk, p.dtype, p.present_k, D, p.sq, p.nkv, p.batch, p.pr_rs, p.pr_gs, p.pr_bs,
               BN) &&
      make_map(&m.pv, p.dtype, p.present_v, D, p.sq, p.nkv, p.batch, p.pr_rs, p.pr_gs, p.pr_bs, BN);
  if (!m.presents) m.pk = m.k, m.pv = m.v;
  m.out = make_map(&m.y, p.dtype, p.y, D, p.sq, p.nq, p.batch, p.y_ss, p.y_hs, p.y_bs, 64);
  if (!m.out) m.y = m.q;
  /* The production kernel chains an item's first Q·Kᵀ to the last P·V of the item
   * before (B4 S4096 on an H100, medians of 7 rotated rounds: 537 against 514 TFLOP/s
   * unchained). Variants (tests and the benchmark): 1 no ping-pong between the consumers
   * (unchained too), 3 unchained; tunings (onyx__cuda_attn_hopper_tune) 1 K ahead of V,
   * 2 three V buffers, 3 both, 4 lazy rescaling, 5 lazy with three V buffers, 6 the wait
   * for P·V kept after the softmax, 7 lazy with that wait (1-7 with the copy warps and
   * plain stores); 8 (benchmark only: the presents are left unwritten) what the present
   * write costs, 9 only the presents by TMA stores, 10 neither (the kernel before H9), 11
   * only the output by TMA stores, 12 lazy with both. */
  const int v = onyx__cuda_attn_hopper_variant, tune = onyx__cuda_attn_hopper_tune;
  if (v == 1) return launch_kernel<T, D, false, false, TuneBase>(m, p, sms, stream);
  if (v == 3) return launch_kernel<T, D, true, false, TuneBase>(m, p, sms, stream);
  switch (tune) {
  case 1:
    return launch_kernel<T, D, true, true, Tune<2, true, false>>(m, p, sms, stream);
  case 2:
    return launch_kernel<T, D, true, true, Tune<3, false, false>>(m, p, sms, stream);
  case 3:
    return launch_kernel<T, D, true, true, Tune<3, true, false>>(m, p, sms, stream);
  case 4:
    return launch_kernel<T, D, true, true, Tune<2, false, true>>(m, p, sms, stream);
  case 5:
    return launch_kernel<T, D, true, true, Tune<3, false, true>>(m, p, sms, stream);
  case 6:
    return launch_kernel<T, D, true, true, Tune<2, false, false, true>>(m, p, sms, stream);
  case 7:
    return launch_kernel<T, D, true, true, Tune<2, false, true, true>>(m, p, sms, stream);
  case 8: { /* timing only */
    onyx__cuda_attn_params unwritten = p;
    unwritten.fill_present = 0;
    return launch_production<T, D>(with_stores(m, false, true), unwritten, sms, stream);
  }
  case 9:
    return launch_production<T, D>(with_stores(m, true, false), p, sms, stream);
  case 10:
    return launch_production<T, D>(with_stores(m, false, false), p, sms, stream);
  case 11:
    return launch_production<T, D>(with_stores(m, false, true), p, sms, stream);
  case 12:
    if (m.out && m.presents)
      return launch_kernel<T, D, true, true, Tune<2, false, true, false, true, true>>(m, p, sms,
                                                                                      stream);
    return launch_kernel<T, D, true, true, Tune<2, false, true>>(m, p, sms, stream);
  default:
    return launch_production<T, D>(m, p, sms, stream);
  }
}

/* Per device: 0 unknown, 1 the route runs here, 2 it does not; and its SM count. */
static std::atomic<int> g_available[64];
static std::atomic<int> g_sms[64];

static int probe(int dev) {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return 2;
  }
  if (major != 9 || minor != 0 || encode_fn() == nullptr) return 2;
  /* The kernels exist only as sm_90a machine code: an image must load for this device. */
  cudaFuncAttributes a;
  const void *kernels[4] = {(const void *)hopper_kernel<__nv_bfloat16, 128, true, true>,
                            (const void *)hopper_kernel<__nv_bfloat16, 64, true, true>,
                            (const void *)hopper_kernel<__half, 128, true, true>,
                            (const void *)hopper_kernel<__half, 64, true, true>};
  for (const void *k : kernels)
    if (cudaFuncGetAttributes(&a, k) != cudaSuccess) {
      (void)cudaGetLastError();
      return 2;
    }
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
      sms <= 0) {
    (void)cudaGetLastError();
    return 2;
  }
  g_sms[dev].store(sms, std::memory_order_relaxed);
  return 1;
}

} // namespace hopper
} // namespace onyx_cuda_attn

extern "C" int onyx__cuda_attn_hopper_available(void) {
  using namespace onyx_cuda_attn::hopper;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  if (dev < 0 || dev >= 64) return 0;
  int v = g_available[dev].load(std::memory_order_relaxed);
  if (v == 0) {
    v = probe(dev);
    g_available[dev].store(v, std::memory_order_relaxed);
  }
  return v == 1;
}

extern "C" int onyx__cuda_attn_hopper(const onyx__cuda_attn_params *p, void *stream) {
  using namespace onyx_cuda_attn::hopper;
  cudaStream_t s = (cudaStream_t)stream;
  if (p->batch <= 0 || p->sq <= 0 || p->nq <= 0) return 0;
  if (!onyx__cuda_attn_hopper_available()) return (int)cudaErrorInvalidDevice;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return (int)cudaGetLastError();
  const int sms = g_sms[dev].load(std::memory_order_relaxed);
  const bool bf = p->dtype == ONYX_DTYPE_BFLOAT16;
  if (p->dtype != ONYX_DTYPE_BFLOAT16 && p->dtype != ONYX_DTYPE_FLOAT16)
    return (int)cudaErrorInvalidValue;
  if (p->hk == 128 && p->hv == 128)
    return (int)(bf ? launch<__nv_bfloat16, 128>(*p, sms, s) : launch<__half, 128>(*p, sms, s));
  if (p->hk == 64 && p->hv == 64)
    return (int)(bf ? launch<__nv_bfloat16, 64>(*p, sms, s) : launch<__half, 64>(*p, sms, s));
  return (int)cudaErrorInvalidValue;
}
