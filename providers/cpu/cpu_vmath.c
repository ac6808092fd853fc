/*
 * Vectorised float32 transcendental loops: Sigmoid (the SiLU gate of every decoder
 * MLP: 128 prompt rows of Qwen2.5-0.5B are 15M of them a prefill).
 *
 * libm's expf is a call per element and the sign test of a stable sigmoid a branch
 * the data decides, mispredicted half the time: about 8 ns an element. Here exp is
 * computed in registers, 16 (AVX-512) or 8 (AVX2) lanes at a time:
 *
 *   e^x = 2^n · e^r,  n = round(x·log2 e),  r = x − n·ln 2 (ln 2 in two parts, so
 *   that r is exact to a few ulps),  |r| <= ln2/2
 *
 * with e^r from its Taylor series to degree 7: the first term left out is
 * r^8/8! < 5.1e-9, below float32's half ulp (6e-8 relative) on [√½, √2]. 2^n is
 * built in the exponent field. The argument is clamped to [-87.3, 88.3] so that
 * 2^n stays a normal float; sigmoid is 1/(1 + e^-x), which rounds to exactly 0 or 1
 * beyond that range anyway. NaN passes through.
 *
 * A build runs its tail through the same vector formula (masked, or through a
 * padded buffer), so a tensor's values do not depend on where a thread's slice ends.
 * Builds without vectors compute the formula in scalars.
 */
#include <math.h>
#include <string.h>

#include "cpu_gemm_impl.h"

#define CPU_EXP_HI 88.3f
#define CPU_EXP_LO -87.3f
#define CPU_LOG2E 1.44269504088896341f
#define CPU_LN2_HI 0.693359375f             /* 8 significant bits: n·LN2_HI is exact */
#define CPU_LN2_LO -2.12194440054690583e-4f /* ln 2 − LN2_HI */
#define CPU_ROUND 12582912.0f               /* 1.5·2^23: adding it rounds to an integer */

/* 1/k! for k = 7..2, the Horner order. */
#define CPU_C7 (1.0f / 5040.0f)
#define CPU_C6 (1.0f / 720.0f)
#define CPU_C5 (1.0f / 120.0f)
#define CPU_C4 (1.0f / 24.0f)
#define CPU_C3 (1.0f / 6.0f)
#define CPU_C2 0.5f

/* The scalar formula (tails and builds without vectors). */
static float cpu_exp_poly(float x) {
  x = x > CPU_EXP_HI ? CPU_EXP_HI : x < CPU_EXP_LO ? CPU_EXP_LO : x;
  float t = x * CPU_LOG2E + CPU_ROUND;
  float n = t - CPU_ROUND;
  float r = x - n * CPU_LN2_HI;
  r = r - n * CPU_LN2_LO;
  float p = CPU_C7;
  p = p * r + CPU_C6;
  p = p * r + CPU_C5;
  p = p * r + CPU_C4;
  p = p * r + CPU_C3;
  p = p * r + CPU_C2;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  int32_t bits = ((int32_t)n + 127) * (1 << 23);
  float scale;
  memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

static void cpu_sigmoid_scalar(const float *x, float *y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i];
    y[i] = v != v ? v : 1.0f / (1.0f + cpu_exp_poly(-v));
  }
}

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>

#define CPU_AVX512 __attribute__((target("avx512f")))
#define CPU_AVX2 __attribute__((target("avx2,fma")))

CPU_AVX512 static inline __m512 cpu_exp16(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(CPU_EXP_LO)), _mm512_set1_ps(CPU_EXP_HI));
  __m512 t = _mm512_fmadd_ps(x, _mm512_set1_ps(CPU_LOG2E), _mm512_set1_ps(CPU_ROUND));
  __m512 n = _mm512_sub_ps(t, _mm512_set1_ps(CPU_ROUND));
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(CPU_LN2_HI), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(CPU_LN2_LO), r);
  __m512 p = _mm512_set1_ps(CPU_C7);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(CPU_C6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(CPU_C5));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(CPU_C4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(CPU_C3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(CPU_C2));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  __m512i e =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

CPU_AVX512 static inline __m512 cpu_sigmoid16(__m512 v) {
  __m512 one = _mm512_set1_ps(1.0f);
  __m512 s =
      _mm512_div_ps(one, _mm512_add_ps(one, cpu_exp16(_mm512_sub_ps(_mm512_setzero_ps(), v))));
  /* NaN lanes keep their input (the clamps above would have made them finite). */
  __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm512_mask_mov_ps(s, nan, v);
}

CPU_AVX512 static void cpu_sigmoid_avx512(const float *x, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, cpu_sigmoid16(_mm512_loadu_ps(x + i)));
  if (i < n) {
    __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, cpu_sigmoid16(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

CPU_AVX2 static inline __m256 cpu_exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(CPU_EXP_LO)), _mm256_set1_ps(CPU_EXP_HI));
  __m256 t = _mm256_fmadd_ps(x, _mm256_set1_ps(CPU_LOG2E), _mm256_set1_ps(CPU_ROUND));
  __m256 n = _mm256_sub_ps(t, _mm256_set1_ps(CPU_ROUND));
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(CPU_LN2_HI), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(CPU_LN2_LO), r);
  __m256 p = _mm256_set1_ps(CPU_C7);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(CPU_C6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(CPU_C5));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(CPU_C4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(CPU_C3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(CPU_C2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

CPU_AVX2 static inline __m256 cpu_sigmoid8(__m256 v) {
  const __m256 one = _mm256_set1_ps(1.0f);
  __m256 s =
      _mm256_div_ps(one, _mm256_add_ps(one, cpu_exp8(_mm256_sub_ps(_mm256_setzero_ps(), v))));
  return _mm256_blendv_ps(s, v, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
}

CPU_AVX2 static void cpu_sigmoid_avx2(const float *x, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, cpu_sigmoid8(_mm256_loadu_ps(x + i)));
  if (i < n) {
    float buf[8] = {0};
    memcpy(buf, x + i, (size_t)(n - i) * sizeof(float));
    _mm256_storeu_ps(buf, cpu_sigmoid8(_mm256_loadu_ps(buf)));
    memcpy(y + i, buf, (size_t)(n - i) * sizeof(float));
  }
}
#endif

typedef void (*cpu_vloop)(const float *x, float *y, int64_t n);

/* The widest build this CPU runs; ONYX_CPU_GEMM_ISA=avx2|generic caps it, as it
 * caps the GEMM's (tests run every build on one machine). */
static cpu_vloop cpu_sigmoid_pick(void) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  const char *isa = onyx__cpu_gemm_isa_get()->name;
  if (strcmp(isa, "avx512") == 0) return cpu_sigmoid_avx512;
  if (strcmp(isa, "avx2") == 0) return cpu_sigmoid_avx2;
#endif
  return cpu_sigmoid_scalar;
}

void onyx__cpu_sigmoid_f32(const float *x, float *y, int64_t n) { cpu_sigmoid_pick()(x, y, n); }
