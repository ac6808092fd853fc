/*
 * MatMulNBits tile kernels for x86, each built for its instruction set with target
 * attributes and picked at run time (onyx__nb_isa_x86), so one binary runs everywhere:
 *
 *   avx512vnni  int8 route: one vpdpbusd per 16 columns × 4 k (codes unsigned, A signed)
 *   avx512      int8 route through vpmaddubsw + vpmaddwd; the fp32 route for both
 *   avx2        the same on 8-lane vectors, a 16-column tile as two halves
 *
 * A 64-byte group of codes is loaded once and shifted/masked into one operand per bit
 * field (cpu_nbits.h draws the layout); per row of A, a 4-byte broadcast of its codes
 * or 4 float broadcasts meet it. Integer dot products of a block are exact in int32;
 * the zero point comes off as zp · sum(q) per block, and the block's product scale
 * (scale of B · scale of A) is applied once per block in float32. The fp32 route forms
 * (code − zero point) exactly, widens it to float and multiplies by the scale once per
 * block. Nothing dequantized is ever stored.
 *
 * Each kernel body is specialised by inlining on (bits, rows): a switch below picks the
 * copy, so the accumulators of a tile live in registers. Decode (one row) spreads a
 * block over several accumulators, so that the chain of dependent multiply-adds never
 * limits a kernel that should be waiting on memory.
 */
#include <string.h>

#include "cpu_nbits.h"

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#include <immintrin.h>

#define NB_AVX2 __attribute__((target("avx2,fma,f16c")))
#define NB_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")))
#define NB_VNNI                                                                                    \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx2,fma,f16c")))
#define NB_INLINE static inline __attribute__((always_inline))

/* The (bits, rows) specialisations of a body: BODY(bits, mr) for each. Four rows at
 * most: with more, the accumulators of a 16-column tile no longer fit the registers
 * beside the codes and the broadcasts, and the tile runs slower (one row: decode). */
#define NB_MR_CASES(BODY, B)                                                                       \
  switch (mr) {                                                                                    \
  case 1:                                                                                          \
    BODY(B, 1);                                                                                    \
    break;                                                                                         \
  case 2:                                                                                          \
    BODY(B, 2);                                                                                    \
    break;                                                                                         \
  case 3:                                                                                          \
    BODY(B, 3);                                                                                    \
    break;                                                                                         \
  default:                                                                                         \
    BODY(B, 4);                                                                                    \
    break;                                                                                         \
  }
#define NB_CASES(BODY)                                                                             \
  switch (w->bits) {                                                                               \
  case 2:                                                                                          \
    NB_MR_CASES(BODY, 2);                                                                          \
    break;                                                                                         \
  case 4:                                                                                          \
    NB_MR_CASES(BODY, 4);                                                                          \
    break;                                                                                         \
  default:                                                                                         \
    NB_MR_CASES(BODY, 8);                                                                          \
    break;                                                                                         \
  }

/* Four bytes of A as one int32 (for a broadcast), without aliasing trouble. */
NB_INLINE int32_t nb_load4(const int8_t *p) {
  int32_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

/* Zero point of the packed (or default) kind for the integer routes, per block. */
NB_INLINE const uint8_t *nb_zp_codes(const onyx__nb_packed *w, int64_t t) {
  return w->zp == ONYX__PC_NB_ZP_PACKED ? w->zp_codes + t * w->kb * ONYX__NB_TILE : NULL;
}

/* ================================================================== AVX-512 */

/* The 16 scales at i of the packed weights as float32 (float16 and bfloat16 widened). */
NB_INLINE NB_AVX512 __m512 nb_scale16(const onyx__nb_packed *w, int64_t i) {
  if (w->scale_dtype == ONYX_DTYPE_FLOAT32) return _mm512_loadu_ps((const float *)w->scales + i);
  __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)w->scales + i));
  if (w->scale_dtype == ONYX_DTYPE_FLOAT16) return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* ------------------------------------------------------------------ quantize */

/* 16 elements of a float32/float16/bfloat16 row at p, lanes past n (0..16) zero. */
NB_INLINE NB_AVX512 __m512 nb_load16(uint32_t dtype, const void *p, int64_t n) {
  __mmask16 m = n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1);
  if (dtype == ONYX_DTYPE_FLOAT32) return _mm512_maskz_loadu_ps(m, p);
  __m256i h = _mm256_maskz_loadu_epi16(m, p);
  if (dtype == ONYX_DTYPE_FLOAT16) return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

NB_AVX512 static void nb_quantize_avx512(uint32_t dtype, const void *x, int64_t k, int64_t bs,
                                         const onyx__nb_qa *qa, int64_t row) {
  const int64_t kb = qa->kpad / bs;
  const size_t esize = onyx_dtype_size(dtype);
  int8_t *q = qa->q + row * qa->kpad;
  for (int64_t blk = 0; blk < kb; ++blk) {
    const int64_t k0 = blk * bs, n = k - k0 < bs ? k - k0 : bs;
    const char *src = (const char *)x + (size_t)k0 * esize;
    __m512 vmax = _mm512_setzero_ps();
    for (int64_t j = 0; j < n; j += 16)
      vmax = _mm512_max_ps(vmax, _mm512_abs_ps(nb_load16(dtype, src + (size_t)j * esize, n - j)));
    const float amax = _mm512_reduce_max_ps(vmax);
    const __m512 inv = _mm512_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
    __m512i vsum = _mm512_setzero_si512();
    for (int64_t j = 0; j < bs; j += 16) {
      __m512 v = j < n ? nb_load16(dtype, src + (size_t)j * esize, n - j) : _mm512_setzero_ps();
      __m512i qi = _mm512_cvtps_epi32(_mm512_mul_ps(v, inv)); /* rounds to nearest even */
      vsum = _mm512_add_epi32(vsum, qi);
      _mm_storeu_si128((__m128i *)(q + k0 + j), _mm512_cvtsepi32_epi8(qi));
    }
    qa->scale[row * kb + blk] = amax / 127.0f;
    qa->sum[row * kb + blk] = _mm512_reduce_add_epi32(vsum);
  }
}

/* ------------------------------------------------------------------ int8 route */

/* acc += codes · a4 for 16 columns × 4 k: vpdpbusd, or (no VNNI) vpmaddubsw and
 * vpmaddwd; 8-bit codes go through the latter as two nibbles (saturation-free). */
NB_INLINE NB_VNNI __m512i nb_dot_vnni(__m512i acc, __m512i s, int32_t a4) {
  return _mm512_dpbusd_epi32(acc, s, _mm512_set1_epi32(a4));
}

NB_INLINE NB_AVX512 __m512i nb_dot_bw(__m512i acc, __m512i s, int32_t a4, const int bits) {
  const __m512i a = _mm512_set1_epi32(a4), ones = _mm512_set1_epi16(1);
  if (bits < 8) return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(s, a), ones));
  const __m512i lo4 = _mm512_set1_epi8(0x0F);
  __m512i lo = _mm512_maddubs_epi16(_mm512_and_si512(s, lo4), a);
  __m512i hi = _mm512_maddubs_epi16(_mm512_and_si512(_mm512_srli_epi16(s, 4), lo4), a);
  acc = _mm512_add_epi32(acc, _mm512_madd_epi16(lo, ones));
  return _mm512_add_epi32(acc, _mm512_madd_epi16(hi, _mm512_set1_epi16(16)));
}

/* One tile × mr rows, int8 route; vnni picks the dot product. Rows of one or two keep
 * one accumulator per bit field, so consecutive products do not wait on each other. */
#define NB_I8_512_BODY(DOT)                                                                        \
  const int per_lane = 32 / bits, subs = 8 / bits, sets = mr <= 2 ? subs : 1;                      \
  const int64_t kb = w->kb, bs = w->bs, groups = bs / per_lane, bb = onyx__nb_block_bytes(w);      \
  const __m512i mask = _mm512_set1_epi8((char)((1 << bits) - 1));                                  \
  const uint8_t *codes = w->codes + t * kb * bb, *zpc = nb_zp_codes(w, t);                         \
  const int64_t sc = t * kb * ONYX__NB_TILE;                                                       \
  __m512 facc[mr];                                                                                 \
  for (int r = 0; r < mr; ++r) facc[r] = _mm512_setzero_ps();                                      \
  for (int64_t blk = 0; blk < kb; ++blk) {                                                         \
    __m512i acc[4][mr];                                                                            \
    for (int s_ = 0; s_ < sets; ++s_)                                                              \
      for (int r = 0; r < mr; ++r) acc[s_][r] = _mm512_setzero_si512();                            \
    const int8_t *x = qa->q + r0 * qa->kpad + blk * bs;                                            \
    const uint8_t *gp = codes + blk * bb;                                                          \
    for (int64_t g = 0; g < groups; ++g, gp += ONYX__NB_GROUP, x += per_lane) {                    \
      const __m512i v = _mm512_loadu_si512(gp);                                                    \
      for (int i = 0; i < subs; ++i) {                                                             \
        const __m512i s = bits == 8 ? v : _mm512_and_si512(_mm512_srli_epi16(v, i * bits), mask);  \
        for (int r = 0; r < mr; ++r)                                                               \
          acc[i % sets][r] = DOT(acc[i % sets][r], s, nb_load4(x + r * qa->kpad + 4 * i));         \
      }                                                                                            \
    }                                                                                              \
    for (int s_ = 1; s_ < sets; ++s_)                                                              \
      for (int r = 0; r < mr; ++r) acc[0][r] = _mm512_add_epi32(acc[0][r], acc[s_][r]);            \
    const __m512 sv = nb_scale16(w, sc + blk * ONYX__NB_TILE);                                     \
    const __m512i z =                                                                              \
        zpc ? _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(zpc + blk * ONYX__NB_TILE)))  \
            : _mm512_set1_epi32(1 << (bits - 1));                                                  \
    for (int r = 0; r < mr; ++r) {                                                                 \
      const int64_t ai = (r0 + r) * kb + blk;                                                      \
      /* The default zero point is one number: a scalar product, no vector multiply. */            \
      __m512i d =                                                                                  \
          zpc ? _mm512_sub_epi32(acc[0][r], _mm512_mullo_epi32(z, _mm512_set1_epi32(qa->sum[ai]))) \
              : _mm512_sub_epi32(acc[0][r], _mm512_set1_epi32(qa->sum[ai] * (1 << (bits - 1))));   \
      facc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d),                                             \
                                _mm512_mul_ps(sv, _mm512_set1_ps(qa->scale[ai])), facc[r]);        \
    }                                                                                              \
  }                                                                                                \
  for (int r = 0; r < mr; ++r) _mm512_storeu_ps(out + r * ONYX__NB_TILE, facc[r]);

#define NB_DOT_VNNI(acc, s, a4) nb_dot_vnni(acc, s, a4)
#define NB_DOT_BW(acc, s, a4) nb_dot_bw(acc, s, a4, bits)

NB_INLINE NB_VNNI void nb_i8_vnni_body(const onyx__nb_packed *w, const onyx__nb_qa *qa, int64_t r0,
                                       int64_t t, float *out, const int bits,
                                       const int mr){NB_I8_512_BODY(NB_DOT_VNNI)}

NB_INLINE NB_AVX512
    void nb_i8_bw_body(const onyx__nb_packed *w, const onyx__nb_qa *qa, int64_t r0, int64_t t,
                       float *out, const int bits, const int mr){NB_I8_512_BODY(NB_DOT_BW)}

#define NB_CALL_VNNI(B, MR) nb_i8_vnni_body(w, qa, r0, t, out, B, MR)
#define NB_CALL_BW(B, MR) nb_i8_bw_body(w, qa, r0, t, out, B, MR)

NB_VNNI static void nb_i8_vnni(const onyx__nb_packed *w, const onyx__nb_qa *qa, int64_t r0, int mr,
                               int64_t t, float *out){NB_CASES(NB_CALL_VNNI)}

NB_AVX512 static void nb_i8_avx512(const onyx__nb_packed *w, const onyx__nb_qa *qa, int64_t r0,
                                   int mr, int64_t t, float *out){NB_CASES(NB_CALL_BW)}

/* ------------------------------------------------------------------ fp32 route */

/* One tile × mr rows from float32 rows of A. (code − zero point) is formed in int32
 * (or in float for float zero points), widened, multiplied by the broadcast activation
 * and summed per block; the scale multiplies the block's sum once. */
NB_INLINE NB_AVX512
    void nb_f32_avx512_body(const onyx__nb_packed *w, const float *a, int64_t lda, int64_t r0,
                            int64_t t, float *out, const int bits, const int mr) {
  const int per_lane = 32 / bits, subs = 8 / bits, sets = mr == 1 ? 4 : mr == 2 ? 2 : 1;
  const int64_t kb = w->kb, bs = w->bs, groups = bs / per_lane, bb = onyx__nb_block_bytes(w);
  const __m512i mask = _mm512_set1_epi32((1 << bits) - 1);
  const uint8_t *codes = w->codes + t * kb * bb, *zpc = nb_zp_codes(w, t);
  const int64_t sc = t * kb * ONYX__NB_TILE;
  const float *zpf = w->zp == ONYX__PC_NB_ZP_FLOAT ? w->zp_float + t * kb * ONYX__NB_TILE : NULL;
  __m512 facc[mr];
  for (int r = 0; r < mr; ++r) facc[r] = _mm512_setzero_ps();
  for (int64_t blk = 0; blk < kb; ++blk) {
    __m512 acc[4][mr];
    for (int s_ = 0; s_ < sets; ++s_)
      for (int r = 0; r < mr; ++r) acc[s_][r] = _mm512_setzero_ps();
    const __m512i zi =
        zpc ? _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(zpc + blk * ONYX__NB_TILE)))
            : _mm512_set1_epi32(1 << (bits - 1));
    const __m512 zf = zpf ? _mm512_loadu_ps(zpf + blk * ONYX__NB_TILE) : _mm512_setzero_ps();
    const float *x = a + r0 * lda + blk * bs;
    const uint8_t *gp = codes + blk * bb;
    for (int64_t g = 0; g < groups; ++g, gp += ONYX__NB_GROUP, x += per_lane) {
      const __m512i v = _mm512_loadu_si512(gp);
      for (int i = 0; i < subs; ++i)
        for (int j = 0; j < 4; ++j) {
          const int shift = 8 * j + bits * i;
          __m512i c = shift == 24 && bits == 8
                          ? _mm512_srli_epi32(v, 24)
                          : _mm512_and_si512(_mm512_srli_epi32(v, shift), mask);
          const __m512 cf = zpf ? _mm512_sub_ps(_mm512_cvtepi32_ps(c), zf)
                                : _mm512_cvtepi32_ps(_mm512_sub_epi32(c, zi));
          for (int r = 0; r < mr; ++r)
            acc[j % sets][r] =
                _mm512_fmadd_ps(_mm512_set1_ps(x[r * lda + 4 * i + j]), cf, acc[j % sets][r]);
        }
    }
    for (int s_ = 1; s_ < sets; ++s_)
      for (int r = 0; r < mr; ++r) acc[0][r] = _mm512_add_ps(acc[0][r], acc[s_][r]);
    const __m512 sv = nb_scale16(w, sc + blk * ONYX__NB_TILE);
    for (int r = 0; r < mr; ++r) facc[r] = _mm512_fmadd_ps(acc[0][r], sv, facc[r]);
  }
  for (int r = 0; r < mr; ++r) _mm512_storeu_ps(out + r * ONYX__NB_TILE, facc[r]);
}

#define NB_CALL_F512(B, MR) nb_f32_avx512_body(w, a, lda, r0, t, out, B, MR)

NB_AVX512 static void nb_f32_avx512(const onyx__nb_packed *w, const float *a, int64_t lda,
                                    int64_t r0, int mr, int64_t t,
                                    float *out){NB_CASES(NB_CALL_F512)}

/* ------------------------------------------------------------------ dequant */

/* Rows [k0, k0 + kc) of tile t as float32 (code − zero point) · scale, 16 a row: the
 * B sliver of the GEMM route. Block by block, so its scale and zero point load once. */
NB_AVX512 static void nb_dequant_avx512(const onyx__nb_packed *w, int64_t t, int64_t k0, int64_t kc,
                                        float *out) {
  const int bits = w->bits, per_lane = 32 / bits;
  const __m512i mask = _mm512_set1_epi32((1 << bits) - 1);
  const uint8_t *zpc = nb_zp_codes(w, t);
  const float *zpf = w->zp == ONYX__PC_NB_ZP_FLOAT ? w->zp_float + t * w->kb * ONYX__NB_TILE : NULL;
  const int64_t bb = onyx__nb_block_bytes(w);
  for (int64_t p = 0; p < kc;) {
    const int64_t blk = (k0 + p) / w->bs, end0 = (blk + 1) * w->bs - k0;
    const int64_t end = end0 < kc ? end0 : kc;
    const __m512 sv = nb_scale16(w, (t * w->kb + blk) * ONYX__NB_TILE);
    const __m512i zi =
        zpc ? _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(zpc + blk * ONYX__NB_TILE)))
            : _mm512_set1_epi32(1 << (bits - 1));
    const __m512 zf = zpf ? _mm512_loadu_ps(zpf + blk * ONYX__NB_TILE) : _mm512_setzero_ps();
    const uint8_t *block = w->codes + (t * w->kb + blk) * bb;
    for (; p < end; ++p) {
      const int64_t j = (k0 + p) % w->bs, rem = j % per_lane;
      const int shift = (int)(8 * (rem % 4) + bits * (rem / 4));
      const __m512i v = _mm512_loadu_si512(block + (j / per_lane) * ONYX__NB_GROUP);
      const __m512i c = _mm512_and_si512(_mm512_srl_epi32(v, _mm_cvtsi32_si128(shift)), mask);
      const __m512 f = zpf ? _mm512_sub_ps(_mm512_cvtepi32_ps(c), zf)
                           : _mm512_cvtepi32_ps(_mm512_sub_epi32(c, zi));
      _mm512_storeu_ps(out + p * ONYX__NB_TILE, _mm512_mul_ps(f, sv));
    }
  }
}

/* ================================================================== AVX2 */

/* The 8 scales at i of the packed weights as float32. */
NB_INLINE NB_AVX2 __m256 nb_scale8(const onyx__nb_packed *w, int64_t i) {
  if (w->scale_dtype == ONYX_DTYPE_FLOAT32) return _mm256_loadu_ps((const float *)w->scales + i);
  __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w->scales + i));
  if (w->scale_dtype == ONYX_DTYPE_FLOAT16) return _mm256_cvtph_ps(h);
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* 8 elements of a float32/float16/bfloat16 row at p, lanes past n zero. */
NB_INLINE NB_AVX2 __m256 nb_load8(uint32_t dtype, const void *p, int64_t n) {
  if (n >= 8) {
    if (dtype == ONYX_DTYPE_FLOAT32) return _mm256_loadu_ps(p);
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    if (dtype == ONYX_DTYPE_FLOAT16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  float tmp[8] = {0};
  for (int64_t j = 0; j < n; ++j) tmp[j] = onyx__cpu_load_f32(dtype, p, j);
  return _mm256_loadu_ps(tmp);
}

NB_INLINE NB_AVX2 float nb_hmax8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

NB_INLINE NB_AVX2 int32_t nb_hsum8i(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

NB_AVX2 static void nb_quantize_avx2(uint32_t dtype, const void *x, int64_t k, int64_t bs,
                                     const onyx__nb_qa *qa, int64_t row) {
  const int64_t kb = qa->kpad / bs;
  const size_t esize = onyx_dtype_size(dtype);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  int8_t *q = qa->q + row * qa->kpad;
  for (int64_t blk = 0; blk < kb; ++blk) {
    const int64_t k0 = blk * bs, n = k - k0 < bs ? k - k0 : bs;
    const char *src = (const char *)x + (size_t)k0 * esize;
    __m256 vmax = _mm256_setzero_ps();
    for (int64_t j = 0; j < n; j += 8)
      vmax = _mm256_max_ps(vmax,
                           _mm256_andnot_ps(sign, nb_load8(dtype, src + (size_t)j * esize, n - j)));
    const float amax = nb_hmax8(vmax);
    const __m256 inv = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
    __m256i vsum = _mm256_setzero_si256();
    for (int64_t j = 0; j < bs; j += 8) {
      __m256 v = j < n ? nb_load8(dtype, src + (size_t)j * esize, n - j) : _mm256_setzero_ps();
      __m256i qi = _mm256_cvtps_epi32(_mm256_mul_ps(v, inv));
      vsum = _mm256_add_epi32(vsum, qi);
      __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(qi), _mm256_extracti128_si256(qi, 1));
      _mm_storel_epi64((__m128i *)(q + k0 + j), _mm_packs_epi16(w16, w16));
    }
    qa->scale[row * kb + blk] = amax / 127.0f;
    qa->sum[row * kb + blk] = nb_hsum8i(vsum);
  }
}

NB_INLINE NB_AVX2 __m256i nb_dot_avx2(__m256i acc, __m256i s, int32_t a4, const int bits) {
  const __m256i a = _mm256_set1_epi32(a4), ones = _mm256_set1_epi16(1);
  if (bits < 8) return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(s, a), ones));
  const __m256i lo4 = _mm256_set1_epi8(0x0F);
  __m256i lo = _mm256_maddubs_epi16(_mm256_and_si256(s, lo4), a);
  __m256i hi = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(s, 4), lo4), a);
  acc = _mm256_add_epi32(acc, _mm256_madd_epi16(lo, ones));
  return _mm256_add_epi32(acc, _mm256_madd_epi16(hi, _mm256_set1_epi16(16)));
}

/* A 16-column tile as two 8-column halves (the upper 32 bytes of each group). */
NB_INLINE NB_AVX2 void nb_i8_avx2_body(const onyx__nb_packed *w, const onyx__nb_qa *qa, int64_t r0,
                                       int64_t t, float *out, const int bits, const int mr) {
  const int per_lane = 32 / bits, subs = 8 / bits;
  const int64_t kb = w->kb, bs = w->bs, groups = bs / per_lane, bb = onyx__nb_block_bytes(w);
  const __m256i mask = _mm256_set1_epi8((char)((1 << bits) - 1));
  const uint8_t *zpc = nb_zp_codes(w, t);
  for (int h = 0; h < 2; ++h) {
    const uint8_t *codes = w->codes + t * kb * bb + 32 * h;
    const int64_t sc = t * kb * ONYX__NB_TILE + 8 * h;
    __m256 facc[mr];
    for (int r = 0; r < mr; ++r) facc[r] = _mm256_setzero_ps();
    for (int64_t blk = 0; blk < kb; ++blk) {
      __m256i acc[mr];
      for (int r = 0; r < mr; ++r) acc[r] = _mm256_setzero_si256();
      const int8_t *x = qa->q + r0 * qa->kpad + blk * bs;
      const uint8_t *gp = codes + blk * bb;
      for (int64_t g = 0; g < groups; ++g, gp += ONYX__NB_GROUP, x += per_lane) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)gp);
        for (int i = 0; i < subs; ++i) {
          const __m256i s = bits == 8 ? v : _mm256_and_si256(_mm256_srli_epi16(v, i * bits), mask);
          for (int r = 0; r < mr; ++r)
            acc[r] = nb_dot_avx2(acc[r], s, nb_load4(x + r * qa->kpad + 4 * i), bits);
        }
      }
      const __m256 sv = nb_scale8(w, sc + blk * ONYX__NB_TILE);
      const __m256i z = zpc ? _mm256_cvtepu8_epi32(_mm_loadl_epi64(
                                  (const __m128i *)(zpc + blk * ONYX__NB_TILE + 8 * h)))
                            : _mm256_set1_epi32(1 << (bits - 1));
      for (int r = 0; r < mr; ++r) {
        const int64_t ai = (r0 + r) * kb + blk;
        __m256i d =
            zpc ? _mm256_sub_epi32(acc[r], _mm256_mullo_epi32(z, _mm256_set1_epi32(qa->sum[ai])))
                : _mm256_sub_epi32(acc[r], _mm256_set1_epi32(qa->sum[ai] * (1 << (bits - 1))));
        facc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d),
                                  _mm256_mul_ps(sv, _mm256_set1_ps(qa->scale[ai])), facc[r]);
      }
    }
    for (int r = 0; r < mr; ++r) _mm256_storeu_ps(out + r * ONYX__NB_TILE + 8 * h, facc[r]);
  }
}

NB_INLINE NB_AVX2 void nb_f32_avx2_body(const onyx__nb_packed *w, const float *a, int64_t lda,
                                        int64_t r0, int64_t t, float *out, const int bits,
                                        const int mr) {
  const int per_lane = 32 / bits, subs = 8 / bits, sets = mr == 1 ? 4 : mr == 2 ? 2 : 1;
  const int64_t kb = w->kb, bs = w->bs, groups = bs / per_lane, bb = onyx__nb_block_bytes(w);
  const __m256i mask = _mm256_set1_epi32((1 << bits) - 1);
  const uint8_t *zpc = nb_zp_codes(w, t);
  const float *zpf = w->zp == ONYX__PC_NB_ZP_FLOAT ? w->zp_float + t * kb * ONYX__NB_TILE : NULL;
  for (int h = 0; h < 2; ++h) {
    const uint8_t *codes = w->codes + t * kb * bb + 32 * h;
    const int64_t sc = t * kb * ONYX__NB_TILE + 8 * h;
    __m256 facc[mr];
    for (int r = 0; r < mr; ++r) facc[r] = _mm256_setzero_ps();
    for (int64_t blk = 0; blk < kb; ++blk) {
      __m256 acc[4][mr];
      for (int s_ = 0; s_ < sets; ++s_)
        for (int r = 0; r < mr; ++r) acc[s_][r] = _mm256_setzero_ps();
      const __m256i zi = zpc ? _mm256_cvtepu8_epi32(_mm_loadl_epi64(
                                   (const __m128i *)(zpc + blk * ONYX__NB_TILE + 8 * h)))
                             : _mm256_set1_epi32(1 << (bits - 1));
      const __m256 zf =
          zpf ? _mm256_loadu_ps(zpf + blk * ONYX__NB_TILE + 8 * h) : _mm256_setzero_ps();
      const float *x = a + r0 * lda + blk * bs;
      const uint8_t *gp = codes + blk * bb;
      for (int64_t g = 0; g < groups; ++g, gp += ONYX__NB_GROUP, x += per_lane) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)gp);
        for (int i = 0; i < subs; ++i)
          for (int j = 0; j < 4; ++j) {
            const int shift = 8 * j + bits * i;
            __m256i c = _mm256_and_si256(_mm256_srli_epi32(v, shift), mask);
            const __m256 cf = zpf ? _mm256_sub_ps(_mm256_cvtepi32_ps(c), zf)
                                  : _mm256_cvtepi32_ps(_mm256_sub_epi32(c, zi));
            for (int r = 0; r < mr; ++r)
              acc[j % sets][r] =
                  _mm256_fmadd_ps(_mm256_set1_ps(x[r * lda + 4 * i + j]), cf, acc[j % sets][r]);
          }
      }
      for (int s_ = 1; s_ < sets; ++s_)
        for (int r = 0; r < mr; ++r) acc[0][r] = _mm256_add_ps(acc[0][r], acc[s_][r]);
      const __m256 sv = nb_scale8(w, sc + blk * ONYX__NB_TILE);
      for (int r = 0; r < mr; ++r) facc[r] = _mm256_fmadd_ps(acc[0][r], sv, facc[r]);
    }
    for (int r = 0; r < mr; ++r) _mm256_storeu_ps(out + r * ONYX__NB_TILE + 8 * h, facc[r]);
  }
}

#define NB_CALL_I256(B, MR) nb_i8_avx2_body(w, qa, r0, t, out, B, MR)
#define NB_CALL_F256(B, MR) nb_f32_avx2_body(w, a, lda, r0, t, out, B, MR)

NB_AVX2 static void nb_i8_avx2(const onyx__nb_packed *w, const onyx__nb_qa *qa, int64_t r0, int mr,
                               int64_t t, float *out){NB_CASES(NB_CALL_I256)}

NB_AVX2 static void nb_f32_avx2(const onyx__nb_packed *w, const float *a, int64_t lda, int64_t r0,
                                int mr, int64_t t, float *out){NB_CASES(NB_CALL_F256)}

NB_AVX2 static void nb_dequant_avx2(const onyx__nb_packed *w, int64_t t, int64_t k0, int64_t kc,
                                    float *out) {
  const int bits = w->bits, per_lane = 32 / bits;
  const __m256i mask = _mm256_set1_epi32((1 << bits) - 1);
  const uint8_t *zpc = nb_zp_codes(w, t);
  const float *zpf = w->zp == ONYX__PC_NB_ZP_FLOAT ? w->zp_float + t * w->kb * ONYX__NB_TILE : NULL;
  const int64_t bb = onyx__nb_block_bytes(w);
  for (int64_t p = 0; p < kc;) {
    const int64_t blk = (k0 + p) / w->bs, end0 = (blk + 1) * w->bs - k0;
    const int64_t end = end0 < kc ? end0 : kc;
    const int64_t sc = (t * w->kb + blk) * ONYX__NB_TILE;
    const uint8_t *block = w->codes + (t * w->kb + blk) * bb;
    for (int h = 0; h < 2; ++h) {
      const __m256 sv = nb_scale8(w, sc + 8 * h);
      const __m256i zi = zpc ? _mm256_cvtepu8_epi32(_mm_loadl_epi64(
                                   (const __m128i *)(zpc + blk * ONYX__NB_TILE + 8 * h)))
                             : _mm256_set1_epi32(1 << (bits - 1));
      const __m256 zf =
          zpf ? _mm256_loadu_ps(zpf + blk * ONYX__NB_TILE + 8 * h) : _mm256_setzero_ps();
      for (int64_t q = p; q < end; ++q) {
        const int64_t j = (k0 + q) % w->bs, rem = j % per_lane;
        const int shift = (int)(8 * (rem % 4) + bits * (rem / 4));
        const __m256i v =
            _mm256_loadu_si256((const __m256i *)(block + (j / per_lane) * ONYX__NB_GROUP + 32 * h));
        const __m256i c = _mm256_and_si256(_mm256_srl_epi32(v, _mm_cvtsi32_si128(shift)), mask);
        const __m256 f = zpf ? _mm256_sub_ps(_mm256_cvtepi32_ps(c), zf)
                             : _mm256_cvtepi32_ps(_mm256_sub_epi32(c, zi));
        _mm256_storeu_ps(out + q * ONYX__NB_TILE + 8 * h, _mm256_mul_ps(f, sv));
      }
    }
    p = end;
  }
}

/* ================================================================== choice */

static const onyx__nb_isa nb_isa_vnni = {
    "avx512vnni", 4, nb_quantize_avx512, nb_i8_vnni, nb_f32_avx512, nb_dequant_avx512};
static const onyx__nb_isa nb_isa_avx512 = {
    "avx512", 4, nb_quantize_avx512, nb_i8_avx512, nb_f32_avx512, nb_dequant_avx512};
static const onyx__nb_isa nb_isa_avx2 = {"avx2",     4,           nb_quantize_avx2,
                                         nb_i8_avx2, nb_f32_avx2, nb_dequant_avx2};

/* F16C from cpuid (leaf 1, ECX bit 29): clang before 15 cannot name it in
 * __builtin_cpu_supports. */
static bool nb_has_f16c(void) {
  unsigned a, b, c, d;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}

const onyx__nb_isa *onyx__nb_isa_x86(const char *cap) {
  __builtin_cpu_init();
  bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && nb_has_f16c();
  bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  bool vnni = avx512 && __builtin_cpu_supports("avx512vnni");
  bool cap_avx2 = cap != NULL && strcmp(cap, "avx2") == 0;
  bool cap_avx512 = cap != NULL && strcmp(cap, "avx512") == 0;
  if (vnni && !cap_avx2 && !cap_avx512) return &nb_isa_vnni;
  if (avx512 && !cap_avx2) return &nb_isa_avx512;
  if (avx2) return &nb_isa_avx2;
  return NULL;
}

#else /* not x86 with GCC or Clang: the portable kernels only */

const onyx__nb_isa *onyx__nb_isa_x86(const char *cap) {
  (void)cap;
  return NULL;
}

#endif
