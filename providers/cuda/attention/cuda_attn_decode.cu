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
 *   (b, kv head) into equal runs of 64-key tiles.
 * - The grid has at most one CTA per SM; CTA c takes units c, c + grid, ... The K/V ring
 *   stays full across units: warp 0 is a producer that only issues 16-byte cp.async
 *   loads into a ring of 4 tiles (up to 128 KB in flight per SM) and signals each tile
 *   on an mbarrier with cp.async.mbarrier.arrive; the 4 consumer warps each take 16 keys
 *   of every tile (their own online-softmax state) and free the stage with one arrival
 *   each. No __syncthreads in the loop: the consumers' pace never stalls the loads.
 * - Scores and P·V run on the tensor cores (the flash kernel's fragment code); Q stays
 *   in registers for the unit. At the end of a unit the 4 warp states are merged in
 *   shared memory. Without a split that is the output; with one, each unit writes its
 *   (m, l, O) partial, and the last unit of a (b, kv head) to arrive (an atomic counter,
 *   zeroed on the stream before the launch) merges them: no second kernel.
 * - append (a GQA shared buffer): the unit of split 0 writes the new rows into the
 *   present itself (keys rotated, as onyx__cuda_kv_fill would) and uses them from a
 *   separate 16-row shared tile; the cache tiles never load those rows (zero-filled and
 *   masked), so no unit reads a row another one writes, and the two fill launches go.
 * - Keys a row may not see (window, causal within a short chunk, the key limit, rows
 *   not loaded) are masked with a select; tiles wholly inside every row's range skip
 *   the checks. Rows that are never loaded are zero-filled, so P·V never meets stale
 *   values there.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include <atomic>

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
/* Named barrier 1 over the 128 consumer threads (the producer warp never joins). */
__device__ __forceinline__ void consumers_sync() {
  asm volatile("bar.sync 1, 128;\n" ::: "memory");
}

/* ------------------------------------------------------------------ configuration */

template <int D> struct Cfg {
  static constexpr int BC = 64;   /* keys per tile */
  static constexpr int ST = 4;    /* ring stages */
  static constexpr int NCW = 4;   /* consumer warps, 16 keys of each tile each */
  static constexpr int ROWS = 16; /* virtual rows of a unit */
  static constexpr int THREADS = 32 * (NCW + 1);
  static constexpr int LD = D + 8;  /* padded shared row (elements): ldmatrix without conflicts */
  static constexpr int OLD = D + 4; /* padded float row of the merge buffer */
  static constexpr int TILE = BC * LD * 2;    /* bytes of one K or V stage */
  static constexpr int SMALL = ROWS * LD * 2; /* bytes of Q or one appended-rows tile */
  static constexpr int K_OFF = 0;
  static constexpr int V_OFF = K_OFF + ST * TILE;
  static constexpr int Q_OFF = V_OFF + ST * TILE;
  static constexpr int NK_OFF = Q_OFF + SMALL;
  static constexpr int NV_OFF = NK_OFF + SMALL;
  static constexpr int O_OFF = NV_OFF + SMALL;
  static constexpr int ML_OFF = O_OFF + NCW * ROWS * OLD * 4;
  static constexpr int BAR_OFF = ML_OFF + 2 * NCW * ROWS * 4;
  static constexpr int FLAG_OFF = BAR_OFF + 2 * ST * 8;
  static constexpr int SMEM = FLAG_OFF + 16;
  static_assert(D == 64 || D == 128, "head sizes 64 and 128");
  static_assert(BC == 16 * NCW, "each consumer warp takes 16 keys of a tile");
  static_assert(32 % (D / 8) == 0, "a producer pass covers whole rows");
  static_assert(TILE % 16 == 0 && SMALL % 16 == 0 && (OLD * 4) % 16 == 0, "16-byte rows");
  static_assert(SMEM <= 227 * 1024, "shared memory of one CTA");
};

/* ------------------------------------------------------------------ work units */

/* Unit u: (b, kv head g, split). Keys [lo, hi) matter to some row; [x_lo, x_hi) of them
 * are appended rows (read from the appended tile, never from k/v; empty without
 * append); the split's cache tiles are n_tiles tiles of BC keys from kstart, loading
 * keys below kend. past_new is kv_fill's past_b (the row of new row 0). */
struct Unit {
  int b, g, split, head;
  BatchGeom geo;
  int lo, hi, x_lo, x_hi, past_new;
  int n_tiles, kstart, kend;
};

template <int BC> __device__ __forceinline__ Unit unit_of(const onyx__cuda_attn_params &p, int u) {
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
  const int64_t t0 = it.split * ntiles / p.n_split, t1 = (it.split + 1) * ntiles / p.n_split;
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

/* Scores of 16 keys (rows of kt from key0) for this warp's rows, masked to
 * [a, b) \ [x, y) and each row's range, then the online softmax and O += P·V (vt). */
template <typename T, int D, int LD>
__device__ __forceinline__ void keys16(State<D> &st, const uint32_t (&qf)[D / 16][4], const T *kt,
                                       const T *vt, int key0, const Rows &rw, int a, int b, int x,
                                       int y, float sl2, int lane) {
  const int t4 = lane & 3;
  const int k_row = (lane & 7) + (lane >> 4) * 8, k_col = ((lane >> 3) & 1) * 8;
  const int v_row = (lane & 7) + ((lane >> 3) & 1) * 8, v_col = (lane >> 4) * 8;
  float s[2][4];
#pragma unroll
  for (int n = 0; n < 2; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
  for (int kd = 0; kd < D / 16; ++kd) {
    uint32_t bk[4];
    ldsm_x4(bk, kt + k_row * LD + kd * 16 + k_col);
    Mma<T>::run(s[0], qf[kd], bk[0], bk[1]);
    Mma<T>::run(s[1], qf[kd], bk[2], bk[3]);
  }
  const bool inside =
      key0 >= max(rw.w_lo, a) && key0 + 16 <= min(rw.w_hi, b) && (key0 + 16 <= x || key0 >= y);
#pragma unroll
  for (int n = 0; n < 2; ++n)
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
    float mx = fmaxf(fmaxf(s[0][2 * rr], s[0][2 * rr + 1]), fmaxf(s[1][2 * rr], s[1][2 * rr + 1]));
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
  for (int n = 0; n < 2; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float pe = ex2(s[n][e] - muse[e >> 1]);
      s[n][e] = pe;
      st.l[e >> 1] += pe;
    }
  uint32_t pa[4];
  pa[0] = Mma<T>::pack(s[0][0], s[0][1]);
  pa[1] = Mma<T>::pack(s[0][2], s[0][3]);
  pa[2] = Mma<T>::pack(s[1][0], s[1][1]);
  pa[3] = Mma<T>::pack(s[1][2], s[1][3]);
#pragma unroll
  for (int dp = 0; dp < D / 16; ++dp) {
    uint32_t bv[4];
    ldsm_x4_t(bv, vt + v_row * LD + dp * 16 + v_col);
    Mma<T>::run(st.o[2 * dp], pa, bv[0], bv[1]);
    Mma<T>::run(st.o[2 * dp + 1], pa, bv[2], bv[3]);
  }
}

/* ------------------------------------------------------------------ unit prologue */

/* Q rows of the unit → shared memory (rotated on the way with rotary), rows past the
 * unit's zeroed; by the 128 consumer threads. */
template <typename T, int D, int LD>
__device__ __forceinline__ void load_q(const onyx__cuda_attn_params &p, const Unit &it, T *qs,
                                       int ctid) {
  constexpr int CPR = D / 8;
  const int rows_total = p.sq * p.group;
  const T *qb = (const T *)p.q + (int64_t)it.b * p.q_bs;
  for (int i = ctid; i < 16 * CPR; i += 128) {
    const int r = i / CPR, c = i % CPR;
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (r < rows_total) {
      const int s = r / p.group, h = it.g * p.group + r % p.group;
      const T *src = qb + (int64_t)s * p.q_ss + (int64_t)h * p.q_hs;
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
    *reinterpret_cast<uint4 *>(qs + r * LD + c * 8) = v;
  }
}

/* The new rows of (b, g) (append): written to the present (keys rotated as kv_fill
 * does) and to the appended tiles nk/nv, row s at key past_new + s; rows outside the
 * buffer or past sq are zeros in the tiles. By the 128 consumer threads. */
template <typename T, int D, int LD>
__device__ __forceinline__ void append_rows(const onyx__cuda_attn_params &p, const Unit &it, T *nk,
                                            T *nv, int ctid) {
  const T *sk = (const T *)p.new_k + (int64_t)it.b * p.nk_bs + (int64_t)it.g * p.nk_gs;
  const T *sv = (const T *)p.new_v + (int64_t)it.b * p.nk_bs + (int64_t)it.g * p.nk_gs;
  T *dk = (T *)const_cast<void *>(p.k) + (int64_t)it.b * p.k_bs + (int64_t)it.g * p.k_gs;
  T *dv = (T *)const_cast<void *>(p.v) + (int64_t)it.b * p.v_bs + (int64_t)it.g * p.v_gs;
  for (int i = ctid; i < 16 * D; i += 128) {
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
    nk[s * LD + d] = kv;
    nv[s * LD + d] = vv;
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

/* The last unit of a split (b, kv head) merges every split's partial into the output. */
template <typename T, int D>
__device__ __forceinline__ void merge_splits(const onyx__cuda_attn_params &p, const Unit &it,
                                             int ctid) {
  const int ns = p.n_split, rows_total = p.sq * p.group;
  const float *part_o = p.partials;
  const float *part_ml = p.partials + (int64_t)p.batch * p.nq * p.sq * ns * D;
  for (int i = ctid; i < rows_total * (D / 4); i += 128) {
    const int r = i / (D / 4), c = (i % (D / 4)) * 4;
    const int s = r / p.group, h = it.g * p.group + r % p.group;
    const int64_t prow0 = (((int64_t)it.b * p.nq + h) * p.sq + s) * ns;
    float M = -INFINITY;
    for (int k = 0; k < ns; ++k) M = fmaxf(M, __ldcg(part_ml + (prow0 + k) * 2));
    float L = 0.0f;
    float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (M != -INFINITY)
      for (int k = 0; k < ns; ++k) {
        const float mk = __ldcg(part_ml + (prow0 + k) * 2);
        if (mk == -INFINITY) continue;
        const float w = exp2f(mk - M);
        L += __ldcg(part_ml + (prow0 + k) * 2 + 1) * w;
        const float4 ok = __ldcg(reinterpret_cast<const float4 *>(part_o + (prow0 + k) * D + c));
        o.x += ok.x * w;
        o.y += ok.y * w;
        o.z += ok.z * w;
        o.w += ok.w * w;
      }
    float sink2 = 0.0f;
    const bool has_sink = sink_log2<T>(p, h, &sink2);
    store4<T>(p, it.b, s, h, c, o, finish_factor(M, L, has_sink, sink2));
  }
}

/* The 4 warp states → one per row (shared memory), then the output or this split's
 * partial; the last split to arrive merges. By the 128 consumer threads. */
template <typename T, int D>
__device__ __forceinline__ void finish_unit(const onyx__cuda_attn_params &p, const Unit &it,
                                            State<D> &st, unsigned char *smem, int cw, int lane,
                                            int ctid) {
  using C = Cfg<D>;
  float *osm = reinterpret_cast<float *>(smem + C::O_OFF);
  float *msm = reinterpret_cast<float *>(smem + C::ML_OFF), *lsm = msm + C::NCW * 16;
  int *flag = reinterpret_cast<int *>(smem + C::FLAG_OFF);
  const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
  for (int rr = 0; rr < 2; ++rr) {
    st.l[rr] += __shfl_xor_sync(0xffffffffu, st.l[rr], 1);
    st.l[rr] += __shfl_xor_sync(0xffffffffu, st.l[rr], 2);
  }
  float *o0 = osm + (cw * 16 + g) * C::OLD, *o1 = o0 + 8 * C::OLD;
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    *reinterpret_cast<float2 *>(o0 + n * 8 + 2 * t4) = make_float2(st.o[n][0], st.o[n][1]);
    *reinterpret_cast<float2 *>(o1 + n * 8 + 2 * t4) = make_float2(st.o[n][2], st.o[n][3]);
  }
  if (t4 == 0) {
    msm[cw * 16 + g] = st.m[0];
    lsm[cw * 16 + g] = st.l[0];
    msm[cw * 16 + g + 8] = st.m[1];
    lsm[cw * 16 + g + 8] = st.l[1];
  }
  consumers_sync();

  const int rows_total = p.sq * p.group, ns = p.n_split;
  float *part_o = p.partials;
  float *part_ml = p.partials + (int64_t)p.batch * p.nq * p.sq * ns * D;
  for (int i = ctid; i < rows_total * (D / 4); i += 128) {
    const int r = i / (D / 4), c = (i % (D / 4)) * 4;
    const int s = r / p.group, h = it.g * p.group + r % p.group;
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < C::NCW; ++w) M = fmaxf(M, msm[w * 16 + r]);
    float L = 0.0f;
    float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (M != -INFINITY) {
#pragma unroll
      for (int w = 0; w < C::NCW; ++w) {
        const float mw = msm[w * 16 + r];
        if (mw == -INFINITY) continue;
        const float f = exp2f(mw - M);
        L += lsm[w * 16 + r] * f;
        const float4 ow = *reinterpret_cast<const float4 *>(osm + (w * 16 + r) * C::OLD + c);
        o.x += ow.x * f;
        o.y += ow.y * f;
        o.z += ow.z * f;
        o.w += ow.w * f;
      }
    }
    if (ns > 1) {
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
  if (ns <= 1) return;
  /* This split's partial is out: count it; the last to arrive merges. */
  __threadfence();
  consumers_sync();
  if (ctid == 0) {
    unsigned *count =
        reinterpret_cast<unsigned *>(part_ml + (int64_t)p.batch * p.nq * p.sq * ns * 2);
    const unsigned before = atomicAdd(count + it.head, 1u);
    *flag = before == (unsigned)(ns - 1);
    __threadfence();
  }
  consumers_sync();
  if (*flag) merge_splits<T, D>(p, it, ctid);
}

/* ------------------------------------------------------------------ the kernel */

template <typename T, int D>
__global__ void __launch_bounds__(Cfg<D>::THREADS, 1)
    decode_kernel(const onyx__cuda_attn_params p, int units) {
  using C = Cfg<D>;
  constexpr int BC = C::BC, ST = C::ST, LD = C::LD;
  extern __shared__ __align__(16) unsigned char smem[];
  T *ks = reinterpret_cast<T *>(smem + C::K_OFF);
  T *vs = reinterpret_cast<T *>(smem + C::V_OFF);
  uint64_t *full = reinterpret_cast<uint64_t *>(smem + C::BAR_OFF), *empty = full + ST;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;

  if (tid == 0) {
    for (int s = 0; s < ST; ++s) {
      mbar_init(&full[s], 32);      /* one cp.async arrival per producer lane */
      mbar_init(&empty[s], C::NCW); /* one arrival per consumer warp */
    }
  }
  __syncthreads();

  if (warp == 0) {
    /* ---------------- producer: K and V rows of every tile of every unit, in order,
     * each lane a fixed 16-byte column of every second (D 128) or fourth (D 64) row. */
    constexpr int CPR = D / 8, RPP = 32 / CPR;
    const int c = lane % CPR, r0 = lane / CPR;
    int git = 0;
    for (int u = blockIdx.x; u < units; u += gridDim.x) {
      const Unit it = unit_of<BC>(p, u);
      const T *kb = (const T *)p.k + (int64_t)it.b * p.k_bs + (int64_t)it.g * p.k_gs;
      const T *vb = (const T *)p.v + (int64_t)it.b * p.v_bs + (int64_t)it.g * p.v_gs;
      for (int t = 0; t < it.n_tiles; ++t, ++git) {
        const int s = git % ST;
        mbar_wait(&empty[s], ((uint32_t)(git / ST) & 1u) ^ 1u);
        const int k0 = it.kstart + t * BC;
        T *kd = ks + s * BC * LD + c * 8, *vd = vs + s * BC * LD + c * 8;
        const T *kp = kb + (int64_t)(k0 + r0) * p.k_rs + c * 8;
        const T *vp = vb + (int64_t)(k0 + r0) * p.v_rs + c * 8;
        const int64_t kstep = (int64_t)RPP * p.k_rs, vstep = (int64_t)RPP * p.v_rs;
#pragma unroll
        for (int i = 0; i < BC / RPP; ++i, kp += kstep, vp += vstep) {
          const int r = r0 + i * RPP, j = k0 + r;
          const bool ok = j < it.kend && (j < it.x_lo || j >= it.x_hi);
          cp_async16(kd + r * LD, ok ? kp : kb, ok);
          cp_async16(vd + r * LD, ok ? vp : vb, ok);
        }
        cp_async_arrive(&full[s]);
      }
    }
    cp_async_wait_all();
    return;
  }

  /* ---------------- consumers: warp cw takes keys [16·cw, 16·cw + 16) of every tile. */
  const int cw = warp - 1, ctid = tid - 32, g = lane >> 2;
  T *qs = reinterpret_cast<T *>(smem + C::Q_OFF);
  T *nk = reinterpret_cast<T *>(smem + C::NK_OFF), *nv = reinterpret_cast<T *>(smem + C::NV_OFF);
  const float sl2 = p.scale * kLog2e;
  const int q_row = (lane & 7) + ((lane >> 3) & 1) * 8, q_col = (lane >> 4) * 8;
  int git = 0;
  for (int u = blockIdx.x; u < units; u += gridDim.x) {
    const Unit it = unit_of<BC>(p, u);
    const bool appended = p.append && it.split == 0;
    load_q<T, D, LD>(p, it, qs, ctid);
    if (appended) append_rows<T, D, LD>(p, it, nk, nv, ctid);
    consumers_sync();
    uint32_t qf[D / 16][4];
#pragma unroll
    for (int kd = 0; kd < D / 16; ++kd) ldsm_x4(qf[kd], qs + q_row * LD + kd * 16 + q_col);
    const Rows rw = rows_of(p, it, g);
    State<D> st;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) st.o[n][0] = st.o[n][1] = st.o[n][2] = st.o[n][3] = 0.0f;
    st.m[0] = st.m[1] = -INFINITY;
    st.l[0] = st.l[1] = 0.0f;

    if (appended && cw == 0 && it.x_lo < it.x_hi)
      keys16<T, D, LD>(st, qf, nk, nv, it.past_new, rw, it.x_lo, it.x_hi, 0, 0, sl2, lane);
    for (int t = 0; t < it.n_tiles; ++t, ++git) {
      const int s = git % ST;
      mbar_wait(&full[s], (uint32_t)(git / ST) & 1u);
      const int key0 = it.kstart + t * BC + cw * 16;
      keys16<T, D, LD>(st, qf, ks + (s * BC + cw * 16) * LD, vs + (s * BC + cw * 16) * LD, key0, rw,
                       it.kstart, it.kend, it.x_lo, it.x_hi, sl2, lane);
      __syncwarp();
      if (lane == 0) mbar_arrive(&empty[s]);
    }
    finish_unit<T, D>(p, it, st, smem, cw, lane, ctid);
  }
}

/* ------------------------------------------------------------------ host side */

/* Per device: CTAs of this kernel per SM times SMs (0: not probed, -1: does not run). */
template <typename T, int D> struct Slots { static std::atomic<int> per_device[64]; };
template <typename T, int D> std::atomic<int> Slots<T, D>::per_device[64];

template <typename T, int D> static int slots(int dev) {
  using C = Cfg<D>;
  int v = Slots<T, D>::per_device[dev].load(std::memory_order_relaxed);
  if (v != 0) return v;
  v = -1;
  int sms = 0, occ = 0;
  auto kern = decode_kernel<T, D>;
  if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM) ==
          cudaSuccess &&
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess &&
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kern, C::THREADS, C::SMEM) ==
          cudaSuccess &&
      sms > 0 && occ > 0)
    v = sms * occ;
  else
    (void)cudaGetLastError();
  Slots<T, D>::per_device[dev].store(v, std::memory_order_relaxed);
  return v;
}

template <typename T, int D>
static cudaError_t launch(const onyx__cuda_attn_params &p, int dev, cudaStream_t stream) {
  using C = Cfg<D>;
  const int n = slots<T, D>(dev);
  if (n <= 0) return cudaErrorInvalidDeviceFunction;
  const int64_t heads = (int64_t)p.batch * p.nkv, units = heads * p.n_split;
  if (units <= 0) return cudaSuccess;
  if (units > INT32_MAX) return cudaErrorInvalidValue;
  if (p.n_split > 1) {
    /* The arrival counters after the partials start at zero in every launch. */
    unsigned char *count =
        (unsigned char *)p.partials +
        onyx__cuda_attn_partials_floats(p.batch, p.nq, p.sq, p.hv, p.n_split) * sizeof(float);
    cudaError_t e = cudaMemsetAsync(count, 0, (size_t)heads * sizeof(uint32_t), stream);
    if (e != cudaSuccess) return e;
  }
  const int grid = units < n ? (int)units : n;
  decode_kernel<T, D><<<grid, C::THREADS, C::SMEM, stream>>>(p, (int)units);
  return cudaGetLastError();
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
  return slots<__nv_bfloat16, 128>(dev) > 0 && slots<__nv_bfloat16, 64>(dev) > 0 &&
         slots<__half, 128>(dev) > 0 && slots<__half, 64>(dev) > 0;
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
