/*
 * The tensor-core attention route (float16, bfloat16): a FlashAttention-2 style kernel.
 *
 * Why it is shaped this way:
 * - One CTA owns (row tile, batch·kv head, key split). Its rows are "virtual rows"
 *   r = s·group + hg: every query head of a KV group, for a range of query positions,
 *   so the group's heads share each K/V tile loaded into shared memory (no KV
 *   replication, group× fewer K/V loads than a CTA per query head). Decode (Sq = 1)
 *   puts the whole group in one 16-row MMA tile.
 * - Q and Y are read and written in place through strides (BSH, BNSH, packed QKV): no
 *   transposes, no staging. K/V are read in place (BNSH or BSNH present, or the key
 *   input) through (batch, head, row) strides.
 * - Scores come from mma.sync m16n8k16 (f32 accumulate) on ldmatrix fragments; the
 *   softmax is online (running max and sum per row, in the log2 domain, exp2f); P is
 *   rounded to the input type and multiplied with V by the tensor cores as well.
 * - K/V tiles stream through a cp.async ring of STAGES buffers; shared-memory rows are
 *   padded by 16 bytes so ldmatrix reads are free of bank conflicts.
 * - Decode is memory-bound: few rows, long key ranges. The DECODE tile lets the 4 warps
 *   of a CTA split each 64-key tile (each keeps its own softmax state, merged in
 *   shared memory at the end), and the grid splits keys across CTAs (flash-decoding);
 *   a merge kernel combines the splits' (m, l, O) partials.
 * - Masking (causal bottom-right, window, key limits, bias or boolean mask, softcap)
 *   is evaluated per element; rows that see no key produce zeros.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "cuda_attn_device.cuh"
#include "cuda_attn_impl.h"
#include "cuda_attn_mma.cuh"

namespace onyx_cuda_attn {

/* ------------------------------------------------------------------ configuration */

/* WM warps along rows, each MT m-tiles of 16 rows (K/V fragments are reused across
 * the MT tiles); WN warps along the BC keys of a tile (decode). */
template <int D, int WM, int WN, int MT, int BC_, int STAGES> struct Cfg {
  static constexpr int BR = 16 * MT * WM; /* rows per CTA */
  static constexpr int BC = BC_;          /* keys per tile */
  static constexpr int NT = 32 * WM * WN; /* threads */
  static constexpr int KPW = BC / WN;     /* keys per warp per tile */
  static constexpr int LD = D + 8;        /* padded shared row (elements) */
  static constexpr int OLD = D + 4;       /* padded float row of the merge buffer */
  static constexpr int QBYTES = BR * LD * 2;
  static constexpr int KVBYTES = STAGES * 2 * BC * LD * 2;
  static constexpr int OBYTES = WN * BR * OLD * 4 + 2 * WN * BR * 4;
  static constexpr int SMEM = QBYTES + (KVBYTES > OBYTES ? KVBYTES : OBYTES);
  static constexpr bool Q_REGS = MT * D <= 128; /* keep Q fragments in registers */
  static_assert(D % 16 == 0, "head size must be a multiple of 16");
  static_assert(KPW % 16 == 0, "keys per warp must be a multiple of 16");
  static_assert(WN == 1 || (WM == 1 && MT == 1), "warps split either rows or keys");
};

/* ------------------------------------------------------------------ the kernel */

template <typename T, int D, int WM, int WN, int MT, int BC_, int STAGES>
__global__ void __launch_bounds__(32 * WM * WN, 1) flash_kernel(const onyx__cuda_attn_params p) {
  using C = Cfg<D, WM, WN, MT, BC_, STAGES>;
  constexpr int BR = C::BR, BC = C::BC, NT = C::NT, KPW = C::KPW, LD = C::LD;
  extern __shared__ __align__(16) unsigned char smem[];
  T *Qs = reinterpret_cast<T *>(smem);
  T *Ks = reinterpret_cast<T *>(smem + C::QBYTES);
  T *Vs = Ks + STAGES * BC * LD;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = WN == 1 ? warp : 0, wn = WN == 1 ? 0 : warp;
  const int g = lane >> 2, t4 = lane & 3;
  const int b = blockIdx.y / p.nkv, kvh = blockIdx.y % p.nkv, split = blockIdx.z;
  const int G = p.group;
  const int rows_total = p.sq * G;
  /* Last row tiles first: under a causal mask they see the most keys. */
  const int r0 = (gridDim.x - 1 - blockIdx.x) * BR;
  const BatchGeom geo = batch_geom(p, b);

  /* Keys any row of this CTA may see, then this split's share, in whole tiles. Key
   * indices fit 32 bits (the host refuses longer caches). */
  const int r_last = min(r0 + BR, rows_total) - 1;
  const int64_t s_lo = r0 / G, s_hi = r_last / G;
  int64_t hi64 = geo.limit, lo64 = 0;
  if (p.causal && geo.qpos0 + s_hi + 1 < hi64) hi64 = geo.qpos0 + s_hi + 1;
  if (p.window > 0 && geo.qpos0 + s_lo - p.window + 1 > lo64)
    lo64 = geo.qpos0 + s_lo - p.window + 1;
  if (hi64 < lo64) hi64 = lo64;
  const int lo = (int)lo64, hi = (int)hi64;
  const int ntiles = (hi - lo + BC - 1) / BC;
  const int per = (ntiles + p.n_split - 1) / p.n_split;
  const int t_begin = min(split * per, ntiles), t_end = min(t_begin + per, ntiles);
  const int n_my = t_end - t_begin;
  const int kstart = lo + t_begin * BC;
  const int kend = min(hi, lo + t_end * BC);

  const T *qb = (const T *)p.q + (int64_t)b * p.q_bs;
  const T *kb = (const T *)p.k + (int64_t)b * p.k_bs + (int64_t)kvh * p.k_gs;
  const T *vb = (const T *)p.v + (int64_t)b * p.v_bs + (int64_t)kvh * p.v_gs;

  /* Q tile → shared (rotated on the way when the problem has rotary). */
  if (p.cos == nullptr) {
    for (int i = tid; i < BR * (D / 8); i += NT) {
      int r = i / (D / 8), c = i % (D / 8), vr = r0 + r;
      bool ok = vr < rows_total;
      const T *src = qb;
      if (ok) src = qb + (int64_t)(vr / G) * p.q_ss + (int64_t)(kvh * G + vr % G) * p.q_hs + c * 8;
      cp_async16(Qs + r * LD + c * 8, src, ok);
    }
  } else {
    for (int i = tid; i < BR * D; i += NT) {
      int r = i / D, d = i % D, vr = r0 + r;
      float x = 0.0f;
      if (vr < rows_total) {
        int64_t s = vr / G;
        const T *qr = qb + s * p.q_ss + (int64_t)(kvh * G + vr % G) * p.q_hs;
        int64_t row =
            rope_row(p.pos_ids, p.pos_bs, p.pos_ss, p.pos_add_s, geo.rpos0, p.rot_rows, b, s);
        x = rope_elem(qr, d, (const T *)p.cos, (const T *)p.sin, p.rot_half, row,
                      p.interleaved != 0);
      }
      Qs[r * LD + d] = Elem<T>::store(x);
    }
  }
  cp_async_commit();

  auto load_kv = [&](int tile, int stage) {
    int ks = kstart + tile * BC;
    T *kd = Ks + stage * BC * LD, *vd = Vs + stage * BC * LD;
    for (int i = tid; i < BC * (D / 8); i += NT) {
      int r = i / (D / 8), c = i % (D / 8);
      int j = ks + r;
      bool ok = j < kend;
      cp_async16(kd + r * LD + c * 8, ok ? kb + (int64_t)j * p.k_rs + c * 8 : kb, ok);
      cp_async16(vd + r * LD + c * 8, ok ? vb + (int64_t)j * p.v_rs + c * 8 : vb, ok);
    }
  };
#pragma unroll
  for (int i = 0; i < STAGES - 1; ++i) {
    if (i < n_my) load_kv(i, i);
    cp_async_commit();
  }

  /* Per-row facts of this thread's rows: g and g + 8 of each of its warp's m-tiles.
   * The warp also learns the key range inside which no row needs a mask. */
  int rlo[MT][2], rhi[MT][2];
  int w_lo = INT_MIN, w_hi = INT_MAX;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      int vr = r0 + (wm * MT + mt) * 16 + g + rr * 8;
      if (vr < rows_total) {
        int64_t s = vr / G, pos = geo.qpos0 + s;
        int64_t rh = geo.limit;
        if (p.causal && pos + 1 < rh) rh = pos + 1;
        if (kend < rh) rh = kend;
        int64_t rl = p.window > 0 ? pos - p.window + 1 : INT_MIN;
        rhi[mt][rr] = (int)max(rh, (int64_t)INT_MIN);
        rlo[mt][rr] = (int)min(max(rl, (int64_t)INT_MIN), (int64_t)INT_MAX);
        w_lo = max(w_lo, rlo[mt][rr]);
        w_hi = min(w_hi, rhi[mt][rr]);
      } else {
        rlo[mt][rr] = INT_MAX;
        rhi[mt][rr] = INT_MIN;
      }
    }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    w_lo = max(w_lo, __shfl_xor_sync(0xffffffffu, w_lo, o));
    w_hi = min(w_hi, __shfl_xor_sync(0xffffffffu, w_hi, o));
  }
  const bool plain = p.softcap == 0.0f && p.mask == nullptr;
  const float scale_log2 = p.scale * kLog2e;

  float O[MT][D / 8][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int n = 0; n < D / 8; ++n) O[mt][n][0] = O[mt][n][1] = O[mt][n][2] = O[mt][n][3] = 0.0f;
  float m[MT][2], l[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.0f;

  constexpr int QF = C::Q_REGS ? D / 16 : 1;
  uint32_t qf[MT][QF][4];
  const int q_row = wm * MT * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, q_col = (lane >> 4) * 8;
  if (C::Q_REGS) {
    cp_async_wait<STAGES - 1>();
    __syncthreads();
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int kd = 0; kd < QF; ++kd)
        ldsm_x4(qf[mt][kd], Qs + (q_row + mt * 16) * LD + kd * 16 + q_col);
  }
  const int k_row = (lane & 7) + (lane >> 4) * 8, k_col = ((lane >> 3) & 1) * 8;
  const int v_row = (lane & 7) + ((lane >> 3) & 1) * 8, v_col = (lane >> 4) * 8;

  for (int t = 0; t < n_my; ++t) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    {
      int nt = t + STAGES - 1;
      if (nt < n_my) load_kv(nt, nt % STAGES);
      cp_async_commit();
    }
    const int stage = t % STAGES;
    const T *kt = Ks + stage * BC * LD + wn * KPW * LD;
    const T *vt = Vs + stage * BC * LD + wn * KPW * LD;

    float S[MT][KPW / 8][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int n = 0; n < KPW / 8; ++n)
        S[mt][n][0] = S[mt][n][1] = S[mt][n][2] = S[mt][n][3] = 0.0f;
#pragma unroll
    for (int kd = 0; kd < D / 16; ++kd) {
      uint32_t a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        if (C::Q_REGS) {
#pragma unroll
          for (int e = 0; e < 4; ++e) a[mt][e] = qf[mt][C::Q_REGS ? kd : 0][e];
        } else {
          ldsm_x4(a[mt], Qs + (q_row + mt * 16) * LD + kd * 16 + q_col);
        }
      }
#pragma unroll
      for (int np = 0; np < KPW / 16; ++np) {
        uint32_t bk[4];
        ldsm_x4(bk, kt + (np * 16 + k_row) * LD + kd * 16 + k_col);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          Mma<T>::run(S[mt][2 * np], a[mt], bk[0], bk[1]);
          Mma<T>::run(S[mt][2 * np + 1], a[mt], bk[2], bk[3]);
        }
      }
    }

    /* Scale, softcap, mask → log2-domain scores (−inf where masked). Tiles inside
     * every row's range of this warp skip the per-element checks. */
    const int key0 = kstart + t * BC + wn * KPW;
    const bool inside = plain && key0 >= w_lo && key0 + KPW <= w_hi;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int n = 0; n < KPW / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int rr = e >> 1;
          const int j = key0 + n * 8 + 2 * t4 + (e & 1);
          float x;
          if (plain) {
            x = S[mt][n][e] * scale_log2;
          } else {
            x = S[mt][n][e] * p.scale;
            if (p.softcap != 0.0f) x = p.softcap * tanhf(x / p.softcap);
            if (p.mask != nullptr && j < rhi[mt][rr] && j >= rlo[mt][rr]) {
              /* Row offset recomputed here: the mask route is not the fast path. */
              const int vr = r0 + (wm * MT + mt) * 16 + g + rr * 8;
              const int64_t off = (int64_t)b * p.m_bs + (int64_t)(kvh * G + vr % G) * p.m_hs +
                                  (int64_t)(vr / G) * p.m_ss + (int64_t)j * p.m_js;
              x = mask_add(p.mask, p.mask_dtype, off, x);
            }
            x *= kLog2e;
          }
          S[mt][n][e] = (inside || (j >= rlo[mt][rr] && j < rhi[mt][rr])) ? x : -INFINITY;
        }
      }

      /* Online softmax. */
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int n = 0; n < KPW / 8; ++n) {
        mx[0] = fmaxf(mx[0], fmaxf(S[mt][n][0], S[mt][n][1]));
        mx[1] = fmaxf(mx[1], fmaxf(S[mt][n][2], S[mt][n][3]));
      }
      float muse[2];
#pragma unroll
      for (int rr = 0; rr < 2; ++rr) {
        mx[rr] = fmaxf(mx[rr], __shfl_xor_sync(0xffffffffu, mx[rr], 1));
        mx[rr] = fmaxf(mx[rr], __shfl_xor_sync(0xffffffffu, mx[rr], 2));
        float mnew = fmaxf(m[mt][rr], mx[rr]);
        muse[rr] = mnew == -INFINITY ? 0.0f : mnew;
        float alpha = ex2(m[mt][rr] - muse[rr]);
        m[mt][rr] = mnew;
        l[mt][rr] *= alpha;
#pragma unroll
        for (int n = 0; n < D / 8; ++n) {
          O[mt][n][2 * rr] *= alpha;
          O[mt][n][2 * rr + 1] *= alpha;
        }
      }
#pragma unroll
      for (int n = 0; n < KPW / 8; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float pe = ex2(S[mt][n][e] - muse[e >> 1]);
          S[mt][n][e] = pe;
          l[mt][e >> 1] += pe;
        }
      }
    }

    /* O += P·V. */
#pragma unroll
    for (int kk = 0; kk < KPW / 16; ++kk) {
      uint32_t a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        a[mt][0] = Mma<T>::pack(S[mt][2 * kk][0], S[mt][2 * kk][1]);
        a[mt][1] = Mma<T>::pack(S[mt][2 * kk][2], S[mt][2 * kk][3]);
        a[mt][2] = Mma<T>::pack(S[mt][2 * kk + 1][0], S[mt][2 * kk + 1][1]);
        a[mt][3] = Mma<T>::pack(S[mt][2 * kk + 1][2], S[mt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t bv[4];
        ldsm_x4_t(bv, vt + (kk * 16 + v_row) * LD + dp * 16 + v_col);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          Mma<T>::run(O[mt][2 * dp], a[mt], bv[0], bv[1]);
          Mma<T>::run(O[mt][2 * dp + 1], a[mt], bv[2], bv[3]);
        }
      }
    }
  }

  /* Merge the warps' states through shared memory (the K/V ring is free now). */
  cp_async_wait<0>();
  __syncthreads();
  float *Osm = reinterpret_cast<float *>(smem + C::QBYTES);
  float *msm = Osm + WN * BR * C::OLD;
  float *lsm = msm + WN * BR;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int rr = 0; rr < 2; ++rr) {
      l[mt][rr] += __shfl_xor_sync(0xffffffffu, l[mt][rr], 1);
      l[mt][rr] += __shfl_xor_sync(0xffffffffu, l[mt][rr], 2);
    }
    const int rl = (wm * MT + mt) * 16 + g;
    float *o0 = Osm + (wn * BR + rl) * C::OLD, *o1 = o0 + 8 * C::OLD;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      *reinterpret_cast<float2 *>(o0 + n * 8 + 2 * t4) = make_float2(O[mt][n][0], O[mt][n][1]);
      *reinterpret_cast<float2 *>(o1 + n * 8 + 2 * t4) = make_float2(O[mt][n][2], O[mt][n][3]);
    }
    if (t4 == 0) {
      msm[wn * BR + rl] = m[mt][0];
      lsm[wn * BR + rl] = l[mt][0];
      msm[wn * BR + rl + 8] = m[mt][1];
      lsm[wn * BR + rl + 8] = l[mt][1];
    }
  }
  __syncthreads();

  const int64_t prow_base = (int64_t)b * p.nq;
  float *part_o = p.partials;
  float *part_ml = p.partials + (int64_t)p.batch * p.nq * p.sq * p.n_split * p.hv;
  for (int i = tid; i < BR * (D / 4); i += NT) {
    const int r = i / (D / 4), c = (i % (D / 4)) * 4, vr = r0 + r;
    if (vr >= rows_total) continue;
    const int64_t s = vr / G;
    const int h = kvh * G + vr % G;
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < WN; ++w) M = fmaxf(M, msm[w * BR + r]);
    float L = 0.0f;
    float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (M != -INFINITY) {
#pragma unroll
      for (int w = 0; w < WN; ++w) {
        float mw = msm[w * BR + r];
        if (mw == -INFINITY) continue;
        float f = exp2f(mw - M);
        L += lsm[w * BR + r] * f;
        float4 ow = *reinterpret_cast<const float4 *>(Osm + (w * BR + r) * C::OLD + c);
        o.x += ow.x * f;
        o.y += ow.y * f;
        o.z += ow.z * f;
        o.w += ow.w * f;
      }
    }
    if (p.n_split > 1) {
      int64_t prow = ((prow_base + h) * p.sq + s) * p.n_split + split;
      *reinterpret_cast<float4 *>(part_o + prow * D + c) = o;
      if (c == 0) {
        part_ml[prow * 2] = M;
        part_ml[prow * 2 + 1] = L;
      }
    } else {
      float sink2 = 0.0f;
      bool has_sink = sink_log2<T>(p, h, &sink2);
      float f = finish_factor(M, L, has_sink, sink2);
      T out[4] = {Elem<T>::store(o.x * f), Elem<T>::store(o.y * f), Elem<T>::store(o.z * f),
                  Elem<T>::store(o.w * f)};
      T *dst = (T *)p.y + (int64_t)b * p.y_bs + s * p.y_ss + (int64_t)h * p.y_hs + c;
      uint2 u;
      memcpy(&u, out, 8);
      *reinterpret_cast<uint2 *>(dst) = u;
    }
  }
}

/* Merges the split-K partials of one (b, h, s) row into the output. */
template <typename T>
__global__ void __launch_bounds__(128) merge_kernel(const onyx__cuda_attn_params p) {
  __shared__ float wgt[ONYX__CUDA_ATTN_MAX_SPLITS];
  __shared__ float red[2];
  const int64_t row = blockIdx.x;
  const int s = (int)(row % p.sq), h = (int)((row / p.sq) % p.nq),
            b = (int)(row / ((int64_t)p.sq * p.nq));
  const int ns = p.n_split, hv = p.hv;
  const float *part_o = p.partials + row * ns * hv;
  const float *ml = p.partials + (int64_t)p.batch * p.nq * p.sq * ns * hv + row * ns * 2;
  if (threadIdx.x == 0) {
    float M = -INFINITY;
    for (int i = 0; i < ns; ++i) M = fmaxf(M, ml[2 * i]);
    float L = 0.0f;
    for (int i = 0; i < ns; ++i) {
      float mi = ml[2 * i];
      float w = (M == -INFINITY || mi == -INFINITY) ? 0.0f : exp2f(mi - M);
      wgt[i] = w;
      L += ml[2 * i + 1] * w;
    }
    float sink2 = 0.0f;
    bool has_sink = sink_log2<T>(p, h, &sink2);
    red[0] = finish_factor(M, L, has_sink, sink2);
  }
  __syncthreads();
  const float f = red[0];
  T *dst = (T *)p.y + (int64_t)b * p.y_bs + (int64_t)s * p.y_ss + (int64_t)h * p.y_hs;
  for (int d = threadIdx.x; d < hv; d += blockDim.x) {
    float acc = 0.0f;
    for (int i = 0; i < ns; ++i) acc += part_o[(int64_t)i * hv + d] * wgt[i];
    dst[d] = Elem<T>::store(acc * f);
  }
}

template <typename T, int D, int WM, int WN, int MT, int BC, int STAGES>
static cudaError_t launch(const onyx__cuda_attn_params &p, int32_t row_tiles, cudaStream_t stream) {
  using C = Cfg<D, WM, WN, MT, BC, STAGES>;
  auto kern = flash_kernel<T, D, WM, WN, MT, BC, STAGES>;
  cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM);
  if (e != cudaSuccess) return e;
  dim3 grid((unsigned)row_tiles, (unsigned)(p.batch * p.nkv), (unsigned)p.n_split);
  kern<<<grid, C::NT, C::SMEM, stream>>>(p);
  e = cudaGetLastError();
  if (e != cudaSuccess || p.n_split <= 1) return e;
  merge_kernel<T><<<(unsigned)((int64_t)p.batch * p.nq * p.sq), 128, 0, stream>>>(p);
  return cudaGetLastError();
}

template <typename T, int D>
static cudaError_t launch_tile(const onyx__cuda_attn_params &p, uint32_t tile, int32_t row_tiles,
                               cudaStream_t stream) {
  switch (tile) {
  case ONYX__CUDA_TILE_DECODE:
    return launch<T, D, 1, 4, 1, 64, 2>(p, row_tiles, stream);
  case ONYX__CUDA_TILE_DECODE3:
    return launch<T, D, 1, 4, 1, 64, 3>(p, row_tiles, stream);
  case ONYX__CUDA_TILE_PREFILL128:
    if constexpr (D <= 128) return launch<T, D, 8, 1, 1, 64, 2>(p, row_tiles, stream);
    return cudaErrorInvalidValue;
  case ONYX__CUDA_TILE_PREFILL_M2:
    if constexpr (D <= 128) return launch<T, D, 4, 1, 2, 32, 2>(p, row_tiles, stream);
    return cudaErrorInvalidValue;
  default:
    return launch<T, D, 4, 1, 1, 64, 2>(p, row_tiles, stream);
  }
}

template <typename T>
static cudaError_t launch_head(const onyx__cuda_attn_params &p, uint32_t tile, int32_t row_tiles,
                               cudaStream_t stream) {
  switch (p.hk) {
  case 64:
    return launch_tile<T, 64>(p, tile, row_tiles, stream);
  case 80:
    return launch_tile<T, 80>(p, tile, row_tiles, stream);
  case 96:
    return launch_tile<T, 96>(p, tile, row_tiles, stream);
  case 128:
    return launch_tile<T, 128>(p, tile, row_tiles, stream);
  case 256:
    return launch_tile<T, 256>(p, tile, row_tiles, stream);
  default:
    return cudaErrorInvalidValue;
  }
}

} // namespace onyx_cuda_attn

extern "C" int onyx__cuda_attn_flash(const onyx__cuda_attn_params *p, uint32_t tile,
                                     int32_t row_tiles, void *stream) {
  using namespace onyx_cuda_attn;
  cudaStream_t s = (cudaStream_t)stream;
  if (row_tiles <= 0 || p->batch <= 0 || p->sq <= 0) return 0;
  if (p->dtype == ONYX_DTYPE_FLOAT16) return (int)launch_head<__half>(*p, tile, row_tiles, s);
  if (p->dtype == ONYX_DTYPE_BFLOAT16)
    return (int)launch_head<__nv_bfloat16>(*p, tile, row_tiles, s);
  return (int)cudaErrorInvalidValue;
}

extern "C" const char *onyx__cuda_attn_error_text(int err) {
  return cudaGetErrorString((cudaError_t)err);
}
