/*
 * Device side of MatMulNBits: the decode GEMV and the prefill route's dequantization.
 *
 * GEMV. Each warp owns a tile of 16 columns of Y (16 rows of B) and multiplies it with
 * up to 8 rows of A on the tensor cores (mma m16n8k16, float32 accumulators): B's 16
 * rows are the mma's A operand, A's rows (padded to 8 with zeros) its B operand. B is
 * streamed once in the model's own layout, 16 bytes a lane (8 where rows are not
 * 16-byte multiples), and every code is dequantized in registers — (q − zp) formed
 * exactly through the 16-bit magic-number trick, then multiplied by its block's scale
 * in the activations' type — straight into the mma's register fragments.
 *
 * The fragment layout asks for consecutive k in a lane, four lanes a row; the sum
 * over k does not care about order, so a lane instead takes 32 consecutive codes of
 * its row (one 16-byte load) and the activations are stored in shared memory in the
 * matching order: per group of 8 codes (4 for 8-bit codes) the pairs that the
 * dequantization yields, (k0, k4), (k1, k5), ... Each lane then reads its activation
 * fragment as plain consecutive words.
 *
 * Small matrices have few tiles, so a tile's K can be split over up to 16 warps of a
 * block (split_k), their partial sums added through shared memory. A decode step is
 * ~100-170 such products of 0.06-5 MB, each about as short as a kernel's start-up, so
 * the kernel is launched as a programmatic dependent (PDL) of the one before it, lets
 * its own dependent in at once, and asks for its weights (into L2, and its first codes
 * into registers) before it waits for the previous kernel's results: the weights
 * are constants (a cp.async ring of shared memory in place of the register loads was
 * tried: slower at every 0.5B shape on the H200).
 *
 * One row of A with 4-bit codes in blocks of 32 or more takes the block-sum form of
 * this GEMV (nbits_gemv2 below): scales applied after the mma, in float32. It asks
 * nothing into L2 (its register loads keep enough in flight), and for the lm_head a
 * persistent grid whose producer warp bulk-copies tiles into a ring of shared memory
 * (mbarriers) was tried: at best equal on the H200 (28.6 against 28.5 us), slower with
 * 8 consumer warps (32.1), so the block form stays.
 *
 * Dequantize (prefill): one thread per 8 codes of a row, (q − zp) · scale in float32
 * rounded once to the output type, as the CPU provider's definition computes it.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_half8.cuh"
#include "cuda_nbits.h"
#include "cuda_silu.cuh"
#include "onyx_abi.h"

namespace {

constexpr int kWarps = 8;     /* per block, or split_k warps when more */
constexpr int kMaxSplit = 16; /* warps sharing one tile's K */
constexpr int kRedBytes = kMaxSplit * 32 * 4 * (int)sizeof(float);
constexpr int kPrefetch = ONYX__CUDA_NBITS_TUNE_PREFETCH, kEarly = ONYX__CUDA_NBITS_TUNE_EARLY;
/* Kernel forms: codes loaded into registers two chunk groups at a time (kPlain) or
 * double buffered (kPipe, split K). */
constexpr int kPlain = 0, kPipe = 1;
/* Weights up to this many bytes are asked into L2 before the wait (larger ones, the
 * lm_head, ran slower so on the H200: they stream at the bandwidth anyway). */
constexpr int64_t kPrefetchMaxBytes = 16ll << 20;

struct gemv_params {
  const uint8_t *b;
  const uint16_t *scales;
  const uint8_t *zp_packed;
  const uint16_t *zp_float;
  const uint16_t *bias;
  const uint16_t *a;
  uint16_t *y;
  int m, n, k, kb, bs_log2, row_bytes, zp_row, zp_kind;
  int nj;       /* chunk groups per row: ceil(row_bytes / (4 * VEC)) */
  int wk;       /* warps per tile */
  int kc;       /* activations per row in shared memory (nj groups, zero past K) */
  int a_stride; /* halves between rows of activations in shared memory */
  int red_off;  /* bytes from the activations to the split-K sums in shared memory */
  int tune;     /* ONYX__CUDA_NBITS_TUNE_* bits */
  int sc2;      /* v2: a lane's two scales one aligned 32-bit load (blocks of 32, even kb) */
  /* The A operand's prologue (ONYX__CUDA_NBITS_PRO_*): a itself; the RMS norm of
   * a (= X) + skip times gamma, S = X + skip from block 0; or silu(gate)·up of
   * a (= GU, rows of 2K: the gate's K, then the up's). */
  int pro;
  const uint16_t *skip, *gamma;
  uint16_t *sum;
  float eps;
  int vec8; /* K a multiple of 8 and every row pointer 16-byte aligned: A in 16-byte loads */
};

__device__ __forceinline__ uint32_t h2u(__half2 h) {
  uint32_t u;
  memcpy(&u, &h, 4);
  return u;
}
__device__ __forceinline__ __half2 u2h(uint32_t u) {
  __half2 h;
  memcpy(&h, &u, 4);
  return h;
}
__device__ __forceinline__ uint32_t b2u(__nv_bfloat162 h) {
  uint32_t u;
  memcpy(&u, &h, 4);
  return u;
}
__device__ __forceinline__ __nv_bfloat162 u2b(uint32_t u) {
  __nv_bfloat162 h;
  memcpy(&h, &u, 4);
  return h;
}

/* 16-bit float types by their raw bits. */
template <typename T> struct f16t;
template <> struct f16t<__half> {
  static __device__ __forceinline__ float to_f(uint16_t r) {
    return __half2float(__ushort_as_half(r));
  }
  static __device__ __forceinline__ uint16_t from_f(float v) {
    return __half_as_ushort(__float2half_rn(v));
  }
};
template <> struct f16t<__nv_bfloat16> {
  static __device__ __forceinline__ float to_f(uint16_t r) {
    return __bfloat162float(__ushort_as_bfloat16(r));
  }
  static __device__ __forceinline__ uint16_t from_f(float v) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
  }
};

/*
 * Dequantization constants of one row and block. Raw pairs come out as magic + q:
 * float16 1024 + q (4- and 8-bit codes), bfloat16 128 + q (4-bit codes). off is
 * magic + zero point for integer zero points (q − zp exact), magic alone for float
 * ones (q exact, then q · s − zp · s in one fused rounding). s2, b2: scale and
 * −zp · s as pairs of T; sf, bf: the same in float32 (bfloat16 with 8-bit codes,
 * whose magic is a float16 one).
 */
struct deq {
  uint32_t off, off16, s2, b2; /* off16: −(64 + zp) for float16 codes read as 1024 + 16q */
  float sf, bf;
};

template <typename T, int BITS> struct dq;

/* float16 activations: 4-bit or 8-bit codes, float16 arithmetic. */
template <int BITS> struct dq<__half, BITS> {
  static __device__ __forceinline__ deq make(float s, float zp, bool float_zp) {
    deq d;
    __half2 s2 = __float2half2_rn(s);
    d.off = h2u(__float2half2_rn(1024.0f + (float_zp ? 0.0f : zp)));
    d.off16 = h2u(__float2half2_rn(-64.0f - (float_zp ? 0.0f : zp)));
    d.s2 = h2u(s2);
    d.b2 = h2u(__float2half2_rn(float_zp ? -zp * s : 0.0f));
    d.sf = s;
    d.bf = 0.0f;
    return d;
  }
  /* 4-bit pairs i = 0..3 of a word: codes (i, i + 4). Odd pairs are taken in place,
   * as 1024 + 16q, and scaled by 1/16 in the fused step (exact: small integers), so
   * a word costs one shift and four single-instruction masks. */
  static __device__ __forceinline__ uint32_t pair(uint32_t w, int i, const deq &d) {
    __half2 h;
    if (BITS == 4) {
      const uint32_t v = i >= 2 ? w >> 8 : w;
      if (i & 1)
        h = __hfma2(u2h((v & 0x00F000F0u) | 0x64006400u), u2h(0x2C002C00u), u2h(d.off16));
      else
        h = __hsub2(u2h((v & 0x000F000Fu) | 0x64006400u), u2h(d.off));
    } else {
      h = __hsub2(u2h(__byte_perm(w, 0x64646464u, i == 0 ? 0x4240u : 0x4341u)), u2h(d.off));
    }
    return h2u(__hfma2(h, u2h(d.s2), u2h(d.b2)));
  }
};

/* bfloat16 activations, 4-bit codes: bfloat16 arithmetic (128 + q is exact). */
template <> struct dq<__nv_bfloat16, 4> {
  static __device__ __forceinline__ deq make(float s, float zp, bool float_zp) {
    deq d;
    d.off = b2u(__float2bfloat162_rn(128.0f + (float_zp ? 0.0f : zp)));
    d.off16 = 0;
    d.s2 = b2u(__float2bfloat162_rn(s));
    d.b2 = b2u(__float2bfloat162_rn(float_zp ? -zp * s : 0.0f));
    d.sf = s;
    d.bf = 0.0f;
    return d;
  }
  static __device__ __forceinline__ uint32_t pair(uint32_t w, int i, const deq &d) {
    uint32_t r = ((w >> (4 * i)) & 0x000F000Fu) | 0x43004300u;
    __nv_bfloat162 h = __hsub2(u2b(r), u2b(d.off));
    return b2u(__hfma2(h, u2b(d.s2), u2b(d.b2)));
  }
};

/* bfloat16 activations, 8-bit codes: 128 + 255 is not a bfloat16, so q − zp is formed
 * in float16 (exact), and the product with the scale in float32. */
template <> struct dq<__nv_bfloat16, 8> {
  static __device__ __forceinline__ deq make(float s, float zp, bool float_zp) {
    deq d;
    d.off = h2u(__float2half2_rn(1024.0f + (float_zp ? 0.0f : zp)));
    d.off16 = 0;
    d.s2 = 0;
    d.b2 = 0;
    d.sf = s;
    d.bf = float_zp ? -zp * s : 0.0f;
    return d;
  }
  static __device__ __forceinline__ uint32_t pair(uint32_t w, int i, const deq &d) {
    uint32_t r = __byte_perm(w, 0x64646464u, i == 0 ? 0x4240u : 0x4341u);
    float2 f = __half22float2(__hsub2(u2h(r), u2h(d.off)));
    return b2u(__floats2bfloat162_rn(fmaf(f.x, d.sf, d.bf), fmaf(f.y, d.sf, d.bf)));
  }
};

template <typename T>
__device__ __forceinline__ void mma16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void mma16816<__half>(float c[4], const uint32_t a[4], uint32_t b0,
                                                 uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
               "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float c[4], const uint32_t a[4],
                                                        uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
               "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Scale and zero point of (row, block) as raw bits: the scale's in the low half, the
 * zero point above (its integer value, or a float one's bits). Loaded with the codes,
 * so that both requests are in flight together. */
template <int BITS>
__device__ __forceinline__ uint32_t load_sz(const gemv_params &p, int row, int blk) {
  const size_t si = (size_t)row * p.kb + blk;
  const uint32_t s = __ldg(p.scales + si);
  uint32_t z = 1u << (BITS - 1);
  if (p.zp_kind == 1) {
    const int bit = blk * BITS;
    z = (__ldg(p.zp_packed + (size_t)row * p.zp_row + (bit >> 3)) >> (bit & 7)) &
        ((1u << BITS) - 1u);
  } else if (p.zp_kind == 2) {
    z = __ldg(p.zp_float + si);
  }
  return s | z << 16;
}

/* The raw scale and zero point into dequantization constants. */
template <typename T, int BITS>
__device__ __forceinline__ deq make_deq(const gemv_params &p, uint32_t sz) {
  const float s = f16t<T>::to_f((uint16_t)(sz & 0xFFFFu));
  const float zp = p.zp_kind == 2 ? f16t<T>::to_f((uint16_t)(sz >> 16)) : (float)(sz >> 16);
  return dq<T, BITS>::make(s, zp, p.zp_kind == 2);
}

/* Scale lookups per lane chunk: one per 16 codes (a block holds at least 16). */
template <int BITS, int VEC> struct lanes {
  static constexpr int CPL = VEC * 8 / BITS;
  static constexpr int SPL = CPL >= 16 ? CPL / 16 : 1;
};

/* VEC bytes of one row of B, streamed past the caches (zeros past the row's end). */
template <int VEC>
__device__ __forceinline__ void load_codes(const uint8_t *src, bool ok, uint32_t (&w)[VEC / 4]) {
  if constexpr (VEC == 16) {
    const uint4 v = ok ? __ldcs(reinterpret_cast<const uint4 *>(src)) : make_uint4(0, 0, 0, 0);
    w[0] = v.x;
    w[1] = v.y;
    w[2] = v.z;
    w[3] = v.w;
  } else {
    const uint2 v = ok ? __ldcs(reinterpret_cast<const uint2 *>(src)) : make_uint2(0, 0);
    w[0] = v.x;
    w[1] = v.y;
  }
}

/* Element e of X + skip in float (the norm prologue's row value). */
template <typename T> __device__ __forceinline__ float x_plus_skip(const gemv_params &p, size_t e) {
  const float v = f16t<T>::to_f(__ldg(p.a + e));
  return p.skip != nullptr ? v + f16t<T>::to_f(__ldg(p.skip + e)) : v;
}

/* inv[m] = 1 / rms(X + skip) of each row, by the whole block (block 0 also writes S):
 * every block reads the rows (K up to a few thousand, from L2) so that none waits for
 * another. Ends with the block synchronised. */
template <typename T> __device__ void norm_scales(const gemv_params &p, float *inv) {
  __shared__ float part[ONYX__CUDA_NBITS_GEMV_MAX_M][kMaxSplit];
  const bool writes_sum = p.sum != nullptr && blockIdx.x == 0;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  for (int mm = 0; mm < p.m; ++mm) {
    const size_t row = (size_t)mm * p.k;
    float ss = 0.0f;
    for (int k = threadIdx.x; k < p.k; k += blockDim.x) {
      const float v = x_plus_skip<T>(p, row + k);
      ss = fmaf(v, v, ss);
      if (writes_sum) p.sum[row + k] = f16t<T>::from_f(v);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xFFFFFFFFu, ss, o);
    if (lane == 0) part[mm][warp] = ss;
  }
  __syncthreads();
  if ((int)threadIdx.x < p.m) {
    float t = 0.0f;
    for (int w = 0; w < warps; ++w) t += part[threadIdx.x][w];
    inv[threadIdx.x] = rsqrtf(t / (float)p.k + p.eps);
  }
  __syncthreads();
}

/* Element (mm, k) of A as the prologue makes it, rounded to T once as the unfused
 * producer (the norm, SiluMul) stored it. */
template <typename T>
__device__ __forceinline__ uint16_t act_value(const gemv_params &p, int mm, int k,
                                              const float *inv) {
  if (p.pro == ONYX__CUDA_NBITS_PRO_NORM) {
    const float g = f16t<T>::to_f(__ldg(p.gamma + k));
    return f16t<T>::from_f(x_plus_skip<T>(p, (size_t)mm * p.k + k) * inv[mm] * g);
  }
  if (p.pro == ONYX__CUDA_NBITS_PRO_SILU) {
    const uint16_t *r = p.a + (size_t)mm * 2 * p.k + k;
    return f16t<T>::from_f(
        onyx_cuda::silu_mul_fast(f16t<T>::to_f(__ldg(r)), f16t<T>::to_f(__ldg(r + p.k))));
  }
  return p.a[(size_t)mm * p.k + k];
}

/* Activations, in the dequantization's pair order, into shared memory: rows of kc
 * halves (zero past K), a_stride apart. */
template <typename T, int BITS>
__device__ __forceinline__ void fill_activations(const gemv_params &p, uint16_t *sa) {
  constexpr int G = BITS == 4 ? 8 : 4;
  __shared__ float inv[ONYX__CUDA_NBITS_GEMV_MAX_M];
  if (p.pro == ONYX__CUDA_NBITS_PRO_NORM) norm_scales<T>(p, inv);
  const int per_row = p.kc / G, groups = p.m * per_row;
  for (int t = threadIdx.x; t < groups; t += blockDim.x) {
    const int mm = t / per_row, k0 = (t % per_row) * G;
    uint16_t v[G];
#pragma unroll
    for (int i = 0; i < G; ++i)
      v[i] = k0 + i < p.k ? act_value<T>(p, mm, k0 + i, inv) : (uint16_t)0;
    uint16_t *dst = sa + (size_t)mm * p.a_stride + k0;
    if constexpr (BITS == 4) {
      uint4 o;
      o.x = (uint32_t)v[0] | (uint32_t)v[4] << 16;
      o.y = (uint32_t)v[1] | (uint32_t)v[5] << 16;
      o.z = (uint32_t)v[2] | (uint32_t)v[6] << 16;
      o.w = (uint32_t)v[3] | (uint32_t)v[7] << 16;
      *reinterpret_cast<uint4 *>(dst) = o;
    } else {
      uint2 o;
      o.x = (uint32_t)v[0] | (uint32_t)v[2] << 16;
      o.y = (uint32_t)v[1] | (uint32_t)v[3] << 16;
      *reinterpret_cast<uint2 *>(dst) = o;
    }
  }
}

/* ---- the same in 16-byte loads (vec8): a thread takes 8 consecutive elements */

/* Eight elements of src from element e, widened to float. */
template <typename T>
__device__ __forceinline__ void load8(const uint16_t *src, size_t e, float (&v)[8]) {
  onyx_cuda::widen8(__ldg(reinterpret_cast<const uint4 *>(src + e)),
                    static_cast<const T *>(nullptr), v);
}

/* Eight elements of X + skip from element e. */
template <typename T>
__device__ __forceinline__ void x_plus_skip8(const gemv_params &p, size_t e, float (&v)[8]) {
  load8<T>(p.a, e, v);
  if (p.skip == nullptr) return;
  float s[8];
  load8<T>(p.skip, e, s);
#pragma unroll
  for (int j = 0; j < 8; ++j) v[j] += s[j];
}

/* norm_scales with 16-byte loads (the rows are read again from L1 by the fill). */
template <typename T> __device__ void norm_scales8(const gemv_params &p, float *inv) {
  __shared__ float part[ONYX__CUDA_NBITS_GEMV_MAX_M][kMaxSplit];
  const bool writes_sum = p.sum != nullptr && blockIdx.x == 0;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, warps = blockDim.x >> 5;
  const int chunks = p.k / 8;
  for (int mm = 0; mm < p.m; ++mm) {
    const size_t row = (size_t)mm * p.k;
    float ss = 0.0f;
    for (int c = threadIdx.x; c < chunks; c += blockDim.x) {
      float v[8];
      x_plus_skip8<T>(p, row + (size_t)c * 8, v);
#pragma unroll
      for (int j = 0; j < 8; ++j) ss = fmaf(v[j], v[j], ss);
      if (writes_sum)
        *reinterpret_cast<uint4 *>(p.sum + row + (size_t)c * 8) = onyx_cuda::pack8<T>(v);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xFFFFFFFFu, ss, o);
    if (lane == 0) part[mm][warp] = ss;
  }
  __syncthreads();
  if ((int)threadIdx.x < p.m) {
    float t = 0.0f;
    for (int w = 0; w < warps; ++w) t += part[threadIdx.x][w];
    inv[threadIdx.x] = rsqrtf(t / (float)p.k + p.eps);
  }
  __syncthreads();
}

/* Eight consecutive activations (raw words, two a word, in k order) into shared memory
 * in the pair order: (k0, k4), (k1, k5), ... for 4-bit codes, per 4 for 8-bit ones. */
template <int BITS> __device__ __forceinline__ void store8(uint16_t *dst, uint4 w) {
  if constexpr (BITS == 4) {
    *reinterpret_cast<uint4 *>(dst) =
        make_uint4(__byte_perm(w.x, w.z, 0x5410), __byte_perm(w.x, w.z, 0x7632),
                   __byte_perm(w.y, w.w, 0x5410), __byte_perm(w.y, w.w, 0x7632));
  } else {
    *reinterpret_cast<uint2 *>(dst) =
        make_uint2(__byte_perm(w.x, w.y, 0x5410), __byte_perm(w.x, w.y, 0x7632));
    *reinterpret_cast<uint2 *>(dst + 4) =
        make_uint2(__byte_perm(w.z, w.w, 0x5410), __byte_perm(w.z, w.w, 0x7632));
  }
}

/* Eight elements of A from (mm, k0) as the prologue makes them, as raw words. */
template <typename T>
__device__ __forceinline__ uint4 act8(const gemv_params &p, int mm, int k0, const float *inv) {
  if (p.pro == ONYX__CUDA_NBITS_PRO_NONE)
    return __ldg(reinterpret_cast<const uint4 *>(p.a + (size_t)mm * p.k + k0));
  float v[8];
  if (p.pro == ONYX__CUDA_NBITS_PRO_NORM) {
    float g[8];
    x_plus_skip8<T>(p, (size_t)mm * p.k + k0, v);
    load8<T>(p.gamma, (size_t)k0, g);
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = v[j] * inv[mm] * g[j];
  } else {
    float u[8];
    load8<T>(p.a, (size_t)mm * 2 * p.k + k0, v);
    load8<T>(p.a, (size_t)mm * 2 * p.k + p.k + k0, u);
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = onyx_cuda::silu_mul_fast(v[j], u[j]);
  }
  return onyx_cuda::pack8<T>(v);
}

/* fill_activations in 16-byte loads: K a multiple of 8, so each thread's 8 elements are
 * one group of 4-bit codes (two of 8-bit ones); zeros from K to kc. */
template <typename T, int BITS>
__device__ __forceinline__ void fill_activations8(const gemv_params &p, uint16_t *sa) {
  __shared__ float inv[ONYX__CUDA_NBITS_GEMV_MAX_M];
  if (p.pro == ONYX__CUDA_NBITS_PRO_NORM) norm_scales8<T>(p, inv);
  const int chunks = p.k / 8, pads = (p.kc - p.k) / 8;
#pragma unroll 2
  for (int t = threadIdx.x; t < p.m * chunks; t += blockDim.x) {
    const int mm = t / chunks, k0 = (t % chunks) * 8;
    store8<BITS>(sa + (size_t)mm * p.a_stride + k0, act8<T>(p, mm, k0, inv));
  }
  for (int t = threadIdx.x; t < p.m * pads; t += blockDim.x)
    *reinterpret_cast<uint4 *>(sa + (size_t)(t / pads) * p.a_stride + p.k + (t % pads) * 8) =
        make_uint4(0u, 0u, 0u, 0u);
}

template <typename T, int BITS>
__device__ __forceinline__ void fill_a(const gemv_params &p, uint16_t *sa) {
  if (p.vec8)
    fill_activations8<T, BITS>(p, sa);
  else
    fill_activations<T, BITS>(p, sa);
}

/*
 * One lane's share of a chunk group: VEC bytes of rows r0 and r1 (w0, w1) against the
 * activations of batch row g, from code kbase on. CPL codes a row, 4 a row per mma
 * step; z0, z1: the raw scale and zero point of each 16 codes (load_sz).
 */
template <typename T, int BITS, int VEC>
__device__ __forceinline__ void
chunk_mma(const gemv_params &p, const uint32_t (&w0)[VEC / 4], const uint32_t (&w1)[VEC / 4],
          const uint32_t (&z0)[lanes<BITS, VEC>::SPL], const uint32_t (&z1)[lanes<BITS, VEC>::SPL],
          int kbase, const uint16_t *sa, int g, float c[4]) {
  constexpr int WPL = VEC / 4, CPW = 32 / BITS, CPL = WPL * CPW, STEPS = CPL / 4;
  constexpr int SPL = lanes<BITS, VEC>::SPL, WPS = 16 / CPW;
  uint32_t bw[CPL / 2];
  if (g < p.m) {
    const uint16_t *src = sa + (size_t)g * p.a_stride + kbase;
#pragma unroll
    for (int i = 0; i < CPL / 8; ++i) {
      uint4 v = reinterpret_cast<const uint4 *>(src)[i];
      bw[4 * i] = v.x;
      bw[4 * i + 1] = v.y;
      bw[4 * i + 2] = v.z;
      bw[4 * i + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < CPL / 2; ++i) bw[i] = 0;
  }
  deq d0[SPL], d1[SPL];
#pragma unroll
  for (int sg = 0; sg < SPL; ++sg) {
    d0[sg] = make_deq<T, BITS>(p, z0[sg]);
    d1[sg] = make_deq<T, BITS>(p, z1[sg]);
  }
#pragma unroll
  for (int s = 0; s < STEPS; ++s) {
    const int q = BITS == 4 ? s / 2 : s;
    const int sg = q / WPS < SPL ? q / WPS : SPL - 1;
    const int i = BITS == 4 ? (s & 1) * 2 : 0;
    uint32_t a[4];
    a[0] = dq<T, BITS>::pair(w0[q], i, d0[sg]);
    a[1] = dq<T, BITS>::pair(w1[q], i, d1[sg]);
    a[2] = dq<T, BITS>::pair(w0[q], i + 1, d0[sg]);
    a[3] = dq<T, BITS>::pair(w1[q], i + 1, d1[sg]);
    mma16816<T>(c, a, bw[2 * s], bw[2 * s + 1]);
  }
}

/* Two chunk groups of a lane's two rows (j and j + wk): codes, their scales and zero
 * points, and the first code of each. */
template <int BITS, int VEC> struct batch {
  static constexpr int SPL = lanes<BITS, VEC>::SPL;
  uint32_t a0[VEC / 4], a1[VEC / 4], b0[VEC / 4], b1[VEC / 4];
  uint32_t za0[SPL], za1[SPL], zb0[SPL], zb1[SPL];
  int ka, kb;
  bool vb;
};

/* The raw scales of the SPL code groups from code k0 on (blocks past the row's last
 * read as the last: their codes are zeros). */
template <int BITS, int VEC>
__device__ __forceinline__ void load_scales(const gemv_params &p, int r0, int r1, int k0,
                                            uint32_t (&z0)[lanes<BITS, VEC>::SPL],
                                            uint32_t (&z1)[lanes<BITS, VEC>::SPL]) {
#pragma unroll
  for (int sg = 0; sg < lanes<BITS, VEC>::SPL; ++sg) {
    if (sg > 0 && p.bs_log2 >= 5) { /* one block covers the lane's 32 codes */
      z0[sg] = z0[0];
      z1[sg] = z1[0];
      continue;
    }
    int blk = (k0 + 16 * sg) >> p.bs_log2;
    blk = blk < p.kb ? blk : p.kb - 1;
    z0[sg] = load_sz<BITS>(p, r0, blk);
    z1[sg] = load_sz<BITS>(p, r1, blk);
  }
}

template <int BITS, int VEC>
__device__ __forceinline__ void load_batch(const gemv_params &p, const uint8_t *row0,
                                           const uint8_t *row1, int r0, int r1, int j, int c4,
                                           batch<BITS, VEC> &t) {
  constexpr int CODES = VEC * 8 / BITS;
  const int jb = j + p.wk;
  const int oa = j * 4 * VEC + c4 * VEC, ob = jb * 4 * VEC + c4 * VEC;
  t.ka = (oa / VEC) * CODES;
  t.kb = (ob / VEC) * CODES;
  const bool va = j < p.nj && oa < p.row_bytes;
  t.vb = jb < p.nj;
  const bool vb = t.vb && ob < p.row_bytes;
  load_codes<VEC>(row0 + oa, va, t.a0);
  load_codes<VEC>(row1 + oa, va, t.a1);
  load_codes<VEC>(row0 + ob, vb, t.b0);
  load_codes<VEC>(row1 + ob, vb, t.b1);
  load_scales<BITS, VEC>(p, r0, r1, t.ka, t.za0, t.za1);
  if (t.vb) load_scales<BITS, VEC>(p, r0, r1, t.kb, t.zb0, t.zb1);
}

/* Bytes [begin, end) from base requested into L2 (cp.async.bulk.prefetch, Hopper),
 * trimmed inward to 16-byte bounds, in 4 KiB pieces over the warp's lanes. */
__device__ __forceinline__ void l2_prefetch(const void *base, size_t begin, size_t end, int lane) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr uint64_t kPiece = 4096;
  uint64_t g;
  asm("cvta.to.global.u64 %0, %1;" : "=l"(g) : "l"(base));
  const uint64_t lo = (g + begin + 15) & ~(uint64_t)15, hi = (g + end) & ~(uint64_t)15;
  for (uint64_t a = lo + (uint64_t)lane * kPiece; a < hi; a += 32 * kPiece) {
    const uint32_t n = (uint32_t)(hi - a < kPiece ? hi - a : kPiece);
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(a), "r"(n) : "memory");
  }
#else
  (void)base, (void)begin, (void)end, (void)lane;
#endif
}

/* Every weight byte of rows [n0, n1): codes, scales, zero points. */
__device__ __forceinline__ void prefetch_rows(const gemv_params &p, int n0, int n1, int lane) {
  l2_prefetch(p.b, (size_t)n0 * p.row_bytes, (size_t)n1 * p.row_bytes, lane);
  l2_prefetch(p.scales, (size_t)n0 * p.kb * 2, (size_t)n1 * p.kb * 2, lane);
  if (p.zp_kind == 1) l2_prefetch(p.zp_packed, (size_t)n0 * p.zp_row, (size_t)n1 * p.zp_row, lane);
  if (p.zp_kind == 2) l2_prefetch(p.zp_float, (size_t)n0 * p.kb * 2, (size_t)n1 * p.kb * 2, lane);
}

/*
 * Launched as a programmatic dependent of the kernel before it (where the stream
 * allows). The weights are constants — only A and Y depend on earlier work — so
 * everything before griddepcontrol.wait may read them: with TUNE_PREFETCH one warp
 * asks L2 for every weight byte of the block's rows (a few bulk requests), with
 * TUNE_EARLY the next kernel is let in at once (it may do the same for its own
 * weights while this one runs; it waits for this grid's end before reading Y), and
 * with PIPE the first codes are loaded into registers. Then the wait, the
 * activations, and the loop. PIPE (split K, few tiles: latency-bound) loads the next
 * chunk groups while the current ones are multiplied; without PIPE a warp loads two
 * chunk groups and then multiplies them, in fewer registers (three blocks an SM).
 */
template <typename T, int BITS, int VEC, int MODE>
__global__ void __launch_bounds__(MODE == kPlain ? kWarps * 32 : kMaxSplit * 32, 1)
    nbits_gemv(gemv_params p) {
  extern __shared__ __align__(16) unsigned char smem[];
  uint16_t *sa = reinterpret_cast<uint16_t *>(smem);
  float *red = reinterpret_cast<float *>(smem + p.red_off);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, c4 = lane & 3;
  const int tiles_per_block = (int)(blockDim.x >> 5) / p.wk;
  const int tile = blockIdx.x * tiles_per_block + warp / p.wk, part = warp % p.wk;
  const int n0 = tile * 16;
  const bool active = n0 < p.n;
  if ((p.tune & kPrefetch) && warp == 0) {
    const int b0 = blockIdx.x * tiles_per_block * 16, b1 = b0 + tiles_per_block * 16;
    prefetch_rows(p, b0, b1 < p.n ? b1 : p.n, lane);
  }
  if (p.tune & kEarly) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  /* Rows past N read the last row (their results are dropped). */
  const int r0 = n0 + g < p.n ? n0 + g : p.n - 1;
  const int r1 = n0 + g + 8 < p.n ? n0 + g + 8 : p.n - 1;
  const uint8_t *row0 = p.b + (size_t)r0 * p.row_bytes;
  const uint8_t *row1 = p.b + (size_t)r1 * p.row_bytes;
  float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  if constexpr (MODE == kPlain) {
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    fill_a<T, BITS>(p, sa);
    __syncthreads();
    for (int j = part; active && j < p.nj; j += 2 * p.wk) {
      batch<BITS, VEC> t;
      load_batch<BITS, VEC>(p, row0, row1, r0, r1, j, c4, t);
      chunk_mma<T, BITS, VEC>(p, t.a0, t.a1, t.za0, t.za1, t.ka, sa, g, c);
      if (t.vb) chunk_mma<T, BITS, VEC>(p, t.b0, t.b1, t.zb0, t.zb1, t.kb, sa, g, c);
    }
  } else {
    batch<BITS, VEC> cur;
    if (active) load_batch<BITS, VEC>(p, row0, row1, r0, r1, part, c4, cur);
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    fill_a<T, BITS>(p, sa);
    __syncthreads();
    for (int j = part; active && j < p.nj; j += 2 * p.wk) {
      batch<BITS, VEC> next;
      if (j + 2 * p.wk < p.nj) load_batch<BITS, VEC>(p, row0, row1, r0, r1, j + 2 * p.wk, c4, next);
      chunk_mma<T, BITS, VEC>(p, cur.a0, cur.a1, cur.za0, cur.za1, cur.ka, sa, g, c);
      if (cur.vb) chunk_mma<T, BITS, VEC>(p, cur.b0, cur.b1, cur.zb0, cur.zb1, cur.kb, sa, g, c);
      cur = next;
    }
  }
  /* Every weight this block needs is requested: the next kernel may start its own. */
  if (!(p.tune & kEarly)) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  if (p.wk > 1) {
    float *mine = red + ((size_t)warp * 32 + lane) * 4;
#pragma unroll
    for (int i = 0; i < 4; ++i) mine[i] = c[i];
    __syncthreads();
    if (part != 0) return;
    for (int q = 1; q < p.wk; ++q) {
      const float *o = red + ((size_t)(warp + q) * 32 + lane) * 4;
#pragma unroll
      for (int i = 0; i < 4; ++i) c[i] += o[i];
    }
  }
  if (!active) return;
    /* c[0], c[1]: column n0 + g of Y, rows 2·c4 and 2·c4 + 1; c[2], c[3]: column + 8. */
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int n = n0 + g + (i >> 1) * 8, mm = 2 * c4 + (i & 1);
    if (n >= p.n || mm >= p.m) continue;
    float v = c[i];
    if (p.bias != nullptr) v += f16t<T>::to_f(p.bias[n]);
    p.y[(size_t)mm * p.n + n] = f16t<T>::from_f(v);
  }
}

/* ------------------------------------------------------- decode GEMV, block sums */

/*
 * v2, for M = 1, 4-bit codes, 16-byte loads and blocks of 32 codes or more: a lane's
 * 32 codes of a row then lie in one block, so the scale can wait until after the mma.
 * Only the lane whose group equals its place in the row (g == c4) gives the mma its
 * activations (the others read a row of zeros), so column c of the mma's output holds
 * the unscaled sum (q − zp) · a over the chunk of lane c alone: four blocks' sums
 * side by side. (q − zp) is exact in T and its products with the activations exact
 * in float32, and each sum is scaled in float32 — one mask and one subtraction per
 * pair of codes, against the old loop's three operations and its per-block constants.
 * A warp loads NB chunk groups of its two rows at once (the first batch before the
 * PDL wait) and multiplies them after: 4 (the lm_head's 448-byte rows in two batches,
 * 94 registers) was as fast as 8 (one batch, 128 registers) at every 0.5B shape on the
 * H200 and faster at the lm_head (25.4 us against 27.2; 35.4 on the old loop).
 * The old loop's inner body was ~770 instructions per 128 codes a lane (sm_90a SASS),
 * this one's ~101 per 64: the lm_head had been issue-bound, not memory-bound.
 */
/* (v & mask) | magic in one LOP3 (the compiler's two immediates take two). */
template <uint32_t MASK> __device__ __forceinline__ uint32_t and_or(uint32_t v, uint32_t magic) {
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(r) : "r"(v), "n"(MASK), "r"(magic));
  return r;
}

template <typename T> struct dq_raw;
template <> struct dq_raw<__half> {
  /* 1024 + zp, and −(64 + zp) for the odd pairs read in place as 1024 + 16q. */
  static __device__ __forceinline__ uint32_t off(uint32_t z) { return (0x6400u + z) * 0x10001u; }
  static __device__ __forceinline__ uint32_t off16(uint32_t z) {
    return (0xD400u + (z << 4)) * 0x10001u;
  }
  static __device__ __forceinline__ uint32_t pair(uint32_t w, int i, uint32_t o, uint32_t o16) {
    const uint32_t v = i >= 2 ? w >> 8 : w;
    if (i & 1)
      return h2u(__hfma2(u2h(and_or<0x00F000F0u>(v, 0x64006400u)), u2h(0x2C002C00u), u2h(o16)));
    return h2u(__hsub2(u2h(and_or<0x000F000Fu>(v, 0x64006400u)), u2h(o)));
  }
};
template <> struct dq_raw<__nv_bfloat16> {
  /* 128 + zp (exact: the bfloat16 step at 128 is 1). */
  static __device__ __forceinline__ uint32_t off(uint32_t z) { return (0x4300u + z) * 0x10001u; }
  static __device__ __forceinline__ uint32_t off16(uint32_t) { return 0; }
  static __device__ __forceinline__ uint32_t pair(uint32_t w, int i, uint32_t o, uint32_t) {
    const uint32_t r = and_or<0x000F000Fu>(w >> (4 * i), 0x43004300u);
    return b2u(__hsub2(u2b(r), u2b(o)));
  }
};

/* A warp's batch: NB chunk groups of its lane's two rows, the raw scales of the two
 * chunks whose sums the lane holds, and (ZP) the raw zero-point bytes of its own. */
template <int NB, bool ZP> struct batch2 {
  uint32_t w0[NB][4], w1[NB][4], s0[NB], s1[NB];
  uint32_t z0[ZP ? NB : 1], z1[ZP ? NB : 1];
};

/* Scales of blocks blk and blk2 of row r as a pair (low: blk). */
__device__ __forceinline__ uint32_t load_s2(const gemv_params &p, int r, int blk, int blk2) {
  const uint16_t *s = p.scales + (size_t)r * p.kb;
  if (p.sc2) return __ldg(reinterpret_cast<const uint32_t *>(s + blk));
  return (uint32_t)__ldg(s + blk) | (uint32_t)__ldg(s + blk2) << 16;
}

template <int NB, bool ZP>
__device__ __forceinline__ void load_batch2(const gemv_params &p, const uint8_t *row0,
                                            const uint8_t *row1, int r0, int r1, int jb, int c4,
                                            batch2<NB, ZP> &t) {
  const int cs = 2 * (c4 & 1);
#pragma unroll
  for (int u = 0; u < NB; ++u) {
    const int j = jb + u * p.wk;
    const int oa = j * 64 + c4 * 16;
    const bool ok = j < p.nj;
    load_codes<16>(row0 + oa, ok && oa < p.row_bytes, t.w0[u]);
    load_codes<16>(row1 + oa, ok && oa < p.row_bytes, t.w1[u]);
    t.s0[u] = t.s1[u] = 0;
    if (ok) {
      /* Chunks past the row read the last blocks (their sums are zero). */
      int ba = ((j * 4 + cs) * 32) >> p.bs_log2, bb = ((j * 4 + cs + 1) * 32) >> p.bs_log2;
      if (p.sc2) ba = ba < p.kb - 2 ? ba : p.kb - 2;
      ba = ba < p.kb - 1 ? ba : p.kb - 1;
      bb = bb < p.kb - 1 ? bb : p.kb - 1;
      t.s0[u] = load_s2(p, r0, ba, bb);
      t.s1[u] = load_s2(p, r1, ba, bb);
      if constexpr (ZP) {
        int bo = ((j * 4 + c4) * 32) >> p.bs_log2;
        bo = bo < p.kb - 1 ? bo : p.kb - 1;
        t.z0[u] = (uint32_t)__ldg(p.zp_packed + (size_t)r0 * p.zp_row + (bo >> 1)) >> 4 * (bo & 1);
        t.z1[u] = (uint32_t)__ldg(p.zp_packed + (size_t)r1 * p.zp_row + (bo >> 1)) >> 4 * (bo & 1);
      }
    }
  }
}

/* Chunk group u of the batch into the lane's two row sums. */
template <typename T, int NB, bool ZP, bool TWO>
__device__ __forceinline__ void chunk_sums(const batch2<NB, ZP> &t, int u, const uint16_t *src,
                                           float &acc0, float &acc1) {
  uint32_t bw[16];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint4 v = reinterpret_cast<const uint4 *>(src)[i];
    bw[4 * i] = v.x;
    bw[4 * i + 1] = v.y;
    bw[4 * i + 2] = v.z;
    bw[4 * i + 3] = v.w;
  }
  const uint32_t za = ZP ? t.z0[ZP ? u : 0] & 15u : 8u, zb = ZP ? t.z1[ZP ? u : 0] & 15u : 8u;
  const uint32_t oa = dq_raw<T>::off(za), ob = dq_raw<T>::off(zb);
  const uint32_t oa16 = dq_raw<T>::off16(za), ob16 = dq_raw<T>::off16(zb);
  /* TWO: the odd steps into a second accumulator, so two mma chains of 4 run side by
   * side instead of one of 8 (the split-K layer products, whose time after the PDL wait
   * is latency: chain 282 against 286 us on the H200; the lm_head, which streams, lost
   * 0.5 % and keeps one chain). */
  float c[4] = {0.0f, 0.0f, 0.0f, 0.0f}, d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int s = 0; s < 8; ++s) {
    const int q = s >> 1, i = (s & 1) * 2;
    uint32_t a[4];
    a[0] = dq_raw<T>::pair(t.w0[u][q], i, oa, oa16);
    a[1] = dq_raw<T>::pair(t.w1[u][q], i, ob, ob16);
    a[2] = dq_raw<T>::pair(t.w0[u][q], i + 1, oa, oa16);
    a[3] = dq_raw<T>::pair(t.w1[u][q], i + 1, ob, ob16);
    mma16816<T>(TWO && (s & 1) ? d : c, a, bw[2 * s], bw[2 * s + 1]);
  }
  if (TWO) {
#pragma unroll
    for (int e = 0; e < 4; ++e) c[e] += d[e];
  }
  /* c[0], c[1]: row g, the chunks of lanes 2·c4 and 2·c4 + 1; c[2], c[3]: row g + 8. */
  acc0 = fmaf(f16t<T>::to_f((uint16_t)(t.s0[u] & 0xFFFFu)), c[0], acc0);
  acc0 = fmaf(f16t<T>::to_f((uint16_t)(t.s0[u] >> 16)), c[1], acc0);
  acc1 = fmaf(f16t<T>::to_f((uint16_t)(t.s1[u] & 0xFFFFu)), c[2], acc1);
  acc1 = fmaf(f16t<T>::to_f((uint16_t)(t.s1[u] >> 16)), c[3], acc1);
}

/* OCC3: blocks of kWarps warps, three an SM (registers capped at 85; ptxas spills 12
 * bytes, outside the loop): for one warp a tile without zero points (the lm_head),
 * whose 1,187 blocks of the 0.5B shape then fill 3 waves on 132 SMs where two an SM
 * left a half-empty fifth wave. */
template <typename T, int NB, bool ZP, bool OCC3>
__global__ void __launch_bounds__(OCC3 ? kWarps * 32 : kMaxSplit * 32, OCC3 ? 3 : 1)
    nbits_gemv2(gemv_params p) {
  extern __shared__ __align__(16) unsigned char smem[];
  uint16_t *sa = reinterpret_cast<uint16_t *>(smem);
  float *red = reinterpret_cast<float *>(smem + p.red_off);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, c4 = lane & 3;
  const int tiles_per_block = (int)(blockDim.x >> 5) / p.wk;
  const int tile = blockIdx.x * tiles_per_block + warp / p.wk, part = warp % p.wk;
  const int n0 = tile * 16;
  const bool active = n0 < p.n;
  if ((p.tune & kPrefetch) && warp == 0) {
    const int b0 = blockIdx.x * tiles_per_block * 16, b1 = b0 + tiles_per_block * 16;
    prefetch_rows(p, b0, b1 < p.n ? b1 : p.n, lane);
  }
  if (p.tune & kEarly) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  const int r0 = n0 + g < p.n ? n0 + g : p.n - 1;
  const int r1 = n0 + g + 8 < p.n ? n0 + g + 8 : p.n - 1;
  const uint8_t *row0 = p.b + (size_t)r0 * p.row_bytes;
  const uint8_t *row1 = p.b + (size_t)r1 * p.row_bytes;
  batch2<NB, ZP> t;
  if (active) load_batch2<NB, ZP>(p, row0, row1, r0, r1, part, c4, t);
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  fill_a<T, 4>(p, sa);
  if (threadIdx.x < 16) reinterpret_cast<uint32_t *>(sa + p.kc)[threadIdx.x] = 0u;
  __syncthreads();
  float acc0 = 0.0f, acc1 = 0.0f;
  for (int jb = part; active && jb < p.nj; jb += NB * p.wk) {
    if (jb != part) load_batch2<NB, ZP>(p, row0, row1, r0, r1, jb, c4, t);
#pragma unroll
    for (int u = 0; u < NB; ++u) {
      const int j = jb + u * p.wk;
      if (j >= p.nj) break;
      const uint16_t *src = g == c4 ? sa + (j * 4 + c4) * 32 : sa + p.kc;
      chunk_sums<T, NB, ZP, !OCC3>(t, u, src, acc0, acc1);
    }
  }
  if (!(p.tune & kEarly)) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  /* Lanes c4 = 0 and 1 hold a row's four chunk columns between them. */
  acc0 += __shfl_xor_sync(0xFFFFFFFFu, acc0, 1);
  acc1 += __shfl_xor_sync(0xFFFFFFFFu, acc1, 1);
  if (p.wk > 1) {
    float *mine = red + ((size_t)warp * 32 + lane) * 2;
    mine[0] = acc0;
    mine[1] = acc1;
    __syncthreads();
    if (part != 0) return;
    for (int q = 1; q < p.wk; ++q) {
      const float *o = red + ((size_t)(warp + q) * 32 + lane) * 2;
      acc0 += o[0];
      acc1 += o[1];
    }
  }
  if (!active || c4 != 0) return;
  const int na = n0 + g, nb = n0 + g + 8;
  if (na < p.n)
    p.y[na] = f16t<T>::from_f(p.bias != nullptr ? acc0 + f16t<T>::to_f(p.bias[na]) : acc0);
  if (nb < p.n)
    p.y[nb] = f16t<T>::from_f(p.bias != nullptr ? acc1 + f16t<T>::to_f(p.bias[nb]) : acc1);
}

/* ONYX_CUDA_NBITS_TUNE, a number of ONYX__CUDA_NBITS_TUNE_* bits, replaces the choice
 * from the shape: the device checks run every form through the whole provider so.
 * Read once (a race only reads it twice). */
int env_tune() {
  static int v = -2;
  if (v == -2) {
    const char *e = getenv("ONYX_CUDA_NBITS_TUNE");
    v = e != nullptr && *e != '\0' ? (int)strtol(e, nullptr, 0) : -1;
  }
  return v;
}

int log2_of(int64_t v) {
  int l = 0;
  while ((INT64_C(1) << l) < v) ++l;
  return l;
}

/* Chunk groups of a row and activations kept per row, for loads of VEC bytes. */
void gemv_geometry(int bits, int64_t k_blocks, int64_t block_size, int vec, int *nj, int *kc) {
  const int64_t row_bytes = k_blocks * block_size * bits / 8;
  *nj = (int)((row_bytes + 4 * vec - 1) / (4 * vec));
  *kc = *nj * 4 * vec * 8 / bits;
}

/* Warps per tile: doubled while there are fewer than about 8 warps an SM in all and
 * fewer warps than a row has chunk groups. On the H200 this picks the fastest split
 * of the bench's sweep for every Qwen2.5-0.5B shape at M = 1 (tests/cuda/
 * bench_nbits_gemv.c): 8 for 896x896 and 128x896, 4 for 4864x896, 16 for 896x4864,
 * 1 for the lm_head. */
int choose_split(int64_t tiles, int nj, int sm_count) {
  const int64_t want = (int64_t)(sm_count > 0 ? sm_count : 132) * 8;
  int wk = 1;
  while (wk < kMaxSplit && tiles * wk < want && wk < nj) wk *= 2;
  return wk;
}

/* One launch of kern: a programmatic dependent of the kernel before unless plain (or
 * refused: a stream or driver without programmatic launches). Past 48 KiB of shared
 * memory the kernel must opt in; *raised holds what it was raised to (idempotent, so
 * a race is harmless; not a stream operation, so it may come during a capture). */
cudaError_t launch_params(void (*kern)(gemv_params), const gemv_params &p, size_t smem,
                          unsigned blocks, unsigned threads, bool plain, cudaStream_t stream,
                          size_t *raised) {
  if (smem > (48u << 10) && smem > *raised) {
    cudaError_t e =
        cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return e;
    *raised = smem;
  }
  if (!plain) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(blocks);
    cfg.blockDim = dim3(threads);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cudaLaunchAttribute attr[1] = {};
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    if (cudaLaunchKernelEx(&cfg, kern, p) == cudaSuccess) return cudaSuccess;
    (void)cudaGetLastError();
  }
  kern<<<blocks, threads, smem, stream>>>(p);
  return cudaGetLastError();
}

unsigned block_threads(const gemv_params &p) {
  return 32u * (unsigned)(p.wk > kWarps ? p.wk : kWarps);
}

/* launch_params for one kernel instance, with that instance's own opt-in record. */
template <void (*Kern)(gemv_params)>
cudaError_t launch_one(const gemv_params &p, size_t smem, unsigned blocks, bool plain,
                       cudaStream_t stream) {
  static size_t raised = 0;
  return launch_params(Kern, p, smem, blocks, block_threads(p), plain, stream, &raised);
}

template <typename T>
cudaError_t launch_gemv2_t(const gemv_params &p, size_t smem, unsigned blocks, bool plain,
                           cudaStream_t stream) {
  const bool nb8 = (p.tune & ONYX__CUDA_NBITS_TUNE_NB8) != 0;
  const bool occ3 = p.wk == 1 && !(p.tune & ONYX__CUDA_NBITS_TUNE_OCC2);
  if (p.zp_kind == 1) /* the zero points' registers leave room for 4 chunk groups only */
    return launch_one<nbits_gemv2<T, 4, true, false>>(p, smem, blocks, plain, stream);
  if (nb8) return launch_one<nbits_gemv2<T, 8, false, false>>(p, smem, blocks, plain, stream);
  return occ3 ? launch_one<nbits_gemv2<T, 4, false, true>>(p, smem, blocks, plain, stream)
              : launch_one<nbits_gemv2<T, 4, false, false>>(p, smem, blocks, plain, stream);
}

/* Split K pipelined unless told not to; one warp a tile unpipelined. */
template <typename T, int BITS, int VEC>
cudaError_t launch_gemv_pipe(const gemv_params &p, size_t smem, unsigned blocks, bool plain,
                             cudaStream_t stream) {
  return p.wk > 1 && !(p.tune & ONYX__CUDA_NBITS_TUNE_NOPIPE)
             ? launch_one<nbits_gemv<T, BITS, VEC, kPipe>>(p, smem, blocks, plain, stream)
             : launch_one<nbits_gemv<T, BITS, VEC, kPlain>>(p, smem, blocks, plain, stream);
}

template <typename T>
cudaError_t launch_gemv_t(const gemv_params &p, int bits, int vec, size_t smem, unsigned blocks,
                          bool plain, cudaStream_t stream) {
  if (bits == 4)
    return vec == 16 ? launch_gemv_pipe<T, 4, 16>(p, smem, blocks, plain, stream)
                     : launch_gemv_pipe<T, 4, 8>(p, smem, blocks, plain, stream);
  return vec == 16 ? launch_gemv_pipe<T, 8, 16>(p, smem, blocks, plain, stream)
                   : launch_gemv_pipe<T, 8, 8>(p, smem, blocks, plain, stream);
}

/* ------------------------------------------------------------------ dequantize */

template <typename T> __global__ void nbits_dequant(gemv_params p, int bits, uint16_t *w) {
  const int64_t gpr = (p.k + 7) / 8, total = (int64_t)p.n * gpr;
  const int mask = (1 << bits) - 1;
  for (int64_t t = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; t < total;
       t += (int64_t)gridDim.x * blockDim.x) {
    const int n = (int)(t / gpr), k0 = (int)(t % gpr) * 8;
    const uint8_t *row = p.b + (size_t)n * p.row_bytes;
    int blk = -1;
    float s = 0.0f, zp = 0.0f;
    for (int i = 0; i < 8 && k0 + i < p.k; ++i) {
      const int k = k0 + i;
      if (k >> p.bs_log2 != blk) {
        blk = k >> p.bs_log2;
        const size_t si = (size_t)n * p.kb + blk;
        s = f16t<T>::to_f(p.scales[si]);
        zp = (float)(1 << (bits - 1));
        if (p.zp_kind == 1) {
          const int bit = blk * bits;
          zp = (float)((p.zp_packed[(size_t)n * p.zp_row + (bit >> 3)] >> (bit & 7)) & mask);
        } else if (p.zp_kind == 2) {
          zp = f16t<T>::to_f(p.zp_float[si]);
        }
      }
      const int bit = k * bits;
      const int q = (row[bit >> 3] >> (bit & 7)) & mask;
      w[(size_t)n * p.k + k] = f16t<T>::from_f(((float)q - zp) * s);
    }
  }
}

gemv_params make_params(const onyx__cuda_nbits_args *a) {
  gemv_params p;
  memset(&p, 0, sizeof p);
  p.b = static_cast<const uint8_t *>(a->b);
  p.scales = static_cast<const uint16_t *>(a->scales);
  p.zp_packed = a->zp_kind == 1 ? static_cast<const uint8_t *>(a->zp) : nullptr;
  p.zp_float = a->zp_kind == 2 ? static_cast<const uint16_t *>(a->zp) : nullptr;
  p.bias = static_cast<const uint16_t *>(a->bias);
  p.a = static_cast<const uint16_t *>(a->a);
  p.y = static_cast<uint16_t *>(a->y);
  p.m = (int)a->m;
  p.n = (int)a->n;
  p.k = (int)a->k;
  p.kb = (int)a->k_blocks;
  p.bs_log2 = log2_of(a->block_size);
  p.row_bytes = (int)(a->k_blocks * a->block_size * a->bits / 8);
  p.zp_row = (int)a->zp_row;
  p.zp_kind = a->zp_kind;
  p.pro = a->prologue;
  p.skip = static_cast<const uint16_t *>(a->skip);
  p.gamma = static_cast<const uint16_t *>(a->gamma);
  p.sum = static_cast<uint16_t *>(a->sum);
  p.eps = a->epsilon;
  const uintptr_t rows = reinterpret_cast<uintptr_t>(a->a) | reinterpret_cast<uintptr_t>(a->skip) |
                         reinterpret_cast<uintptr_t>(a->gamma) |
                         reinterpret_cast<uintptr_t>(a->sum);
  p.vec8 = a->k % 8 == 0 && (rows & 15u) == 0;
  return p;
}

} // namespace

extern "C" size_t onyx__cuda_nbits_gemv_smem(int bits, int64_t m, int64_t k_blocks,
                                             int64_t block_size) {
  int nj = 0, kc = 0;
  gemv_geometry(bits, k_blocks, block_size, 16, &nj, &kc);
  return (size_t)kRedBytes + (size_t)m * (size_t)(kc + 8) * 2u;
}

extern "C" cudaError_t onyx__cuda_launch_nbits_gemv(const onyx__cuda_nbits_args *a,
                                                    cudaStream_t stream) {
  if (a->m <= 0 || a->n <= 0) return cudaSuccess;
  if (a->m > ONYX__CUDA_NBITS_GEMV_MAX_M || (a->bits != 4 && a->bits != 8) || a->k <= 0)
    return cudaErrorInvalidValue;
  if (a->prologue < ONYX__CUDA_NBITS_PRO_NONE || a->prologue > ONYX__CUDA_NBITS_PRO_SILU ||
      (a->prologue == ONYX__CUDA_NBITS_PRO_NORM && a->gamma == nullptr))
    return cudaErrorInvalidValue;
  gemv_params p = make_params(a);
  const uintptr_t addr = reinterpret_cast<uintptr_t>(a->b);
  int vec = (addr % 16 == 0 && p.row_bytes % 16 == 0) ? 16 : 8;
  if (addr % 8 != 0 || p.row_bytes % 8 != 0) return cudaErrorMisalignedAddress;
  gemv_geometry(a->bits, a->k_blocks, a->block_size, vec, &p.nj, &p.kc);
  p.a_stride = p.kc + 8;
  const int64_t tiles = (a->n + 15) / 16;
  p.wk = a->split_k > 0 ? a->split_k : choose_split(tiles, p.nj, a->sm_count);
  if (p.wk < 1 || p.wk > kMaxSplit || (p.wk & (p.wk - 1)) != 0) return cudaErrorInvalidValue;
  const int64_t wbytes = (int64_t)p.n * (p.row_bytes + p.kb * 2 + (p.zp_kind == 1 ? p.zp_row : 0));
  /* The block-sum kernel: one row of A, a lane's 32 codes in one block. */
  const bool v2_shape = p.m == 1 && a->bits == 4 && vec == 16 && p.bs_log2 >= 5 && p.zp_kind != 2;
  /* The block-sum kernel streams its codes fast enough that asking them into L2 before
   * the wait costs more than it saves (chained on the H200, 24 layers + lm_head took 284
   * us without it against 299 with): its default asks nothing. */
  const bool prefetch =
      wbytes <= kPrefetchMaxBytes && (!v2_shape || (a->tune & ONYX__CUDA_NBITS_TUNE_V1));
  const int chosen = kEarly | (prefetch ? kPrefetch : 0) | ONYX__CUDA_NBITS_TUNE_V2;
  const int forced = env_tune();
  p.tune = a->tune & ONYX__CUDA_NBITS_TUNE_SET ? a->tune : forced >= 0 ? forced : chosen;
  p.tune |= a->tune & (ONYX__CUDA_NBITS_TUNE_NB8 | ONYX__CUDA_NBITS_TUNE_OCC2);
  if (a->tune & ONYX__CUDA_NBITS_TUNE_V1) p.tune &= ~ONYX__CUDA_NBITS_TUNE_V2;
  const bool v2 = (p.tune & ONYX__CUDA_NBITS_TUNE_V2) && v2_shape;
  if (v2) {
    p.sc2 = p.bs_log2 == 5 && p.kb % 2 == 0 && reinterpret_cast<uintptr_t>(a->scales) % 4 == 0;
    const int64_t tpb2 = p.wk >= kWarps ? 1 : kWarps / p.wk;
    const int warps2 = p.wk > kWarps ? p.wk : kWarps;
    /* Activations, a row of 32 zero halves, the split-K sums (two a lane). */
    p.red_off = (int)(((size_t)(p.kc + 32) * 2u + 15u) / 16u * 16u);
    const size_t smem2 = (size_t)p.red_off + (p.wk > 1 ? (size_t)warps2 * 32u * 2u * 4u : 0u);
    if (smem2 > ONYX__CUDA_NBITS_GEMV_MAX_SMEM) return cudaErrorInvalidValue;
    const unsigned blocks2 = (unsigned)((tiles + tpb2 - 1) / tpb2);
    if (a->dtype == ONYX_DTYPE_FLOAT16)
      return launch_gemv2_t<__half>(p, smem2, blocks2, a->plain, stream);
    return launch_gemv2_t<__nv_bfloat16>(p, smem2, blocks2, a->plain, stream);
  }
  /* The unpipelined loop runs in blocks of at most kWarps warps. */
  if ((p.tune & ONYX__CUDA_NBITS_TUNE_NOPIPE) && p.wk > kWarps) p.wk = kWarps;
  const int64_t tpb = p.wk >= kWarps ? 1 : kWarps / p.wk;
  const unsigned blocks = (unsigned)((tiles + tpb - 1) / tpb);
  const int warps = p.wk > kWarps ? p.wk : kWarps;
  p.red_off = (int)(((size_t)p.m * (size_t)p.a_stride * 2u + 15u) / 16u * 16u);
  const size_t smem = (size_t)p.red_off + (p.wk > 1 ? (size_t)warps * 32u * 4u * 4u : 0u);
  if (smem > ONYX__CUDA_NBITS_GEMV_MAX_SMEM) return cudaErrorInvalidValue;
  if (a->dtype == ONYX_DTYPE_FLOAT16)
    return launch_gemv_t<__half>(p, a->bits, vec, smem, blocks, a->plain, stream);
  return launch_gemv_t<__nv_bfloat16>(p, a->bits, vec, smem, blocks, a->plain, stream);
}

extern "C" cudaError_t onyx__cuda_launch_nbits_dequant(const onyx__cuda_nbits_args *a, void *w,
                                                       cudaStream_t stream) {
  if (a->n <= 0 || a->k <= 0) return cudaSuccess;
  gemv_params p = make_params(a);
  const int64_t total = a->n * ((a->k + 7) / 8);
  int64_t blocks = (total + 255) / 256;
  if (blocks > 65535LL * 16) blocks = 65535LL * 16;
  uint16_t *out = static_cast<uint16_t *>(w);
  if (a->dtype == ONYX_DTYPE_FLOAT16)
    nbits_dequant<__half><<<(unsigned)blocks, 256, 0, stream>>>(p, a->bits, out);
  else
    nbits_dequant<__nv_bfloat16><<<(unsigned)blocks, 256, 0, stream>>>(p, a->bits, out);
  return cudaGetLastError();
}
