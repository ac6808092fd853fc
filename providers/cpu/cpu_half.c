/*
 * float16 (IEEE binary16) and bfloat16 conversions.
 *
 * Narrowing rounds to nearest, ties to even, as ONNX Runtime, numpy and the ONNX
 * reference do; overflow becomes infinity; NaN stays NaN (quiet, sign kept).
 * Conversions are done on bit patterns so they do not depend on the compiler
 * supporting _Float16 or on the FPU's rounding mode.
 *
 * From float64 the value must be rounded once: going through float32 first would
 * round twice and can land one ulp off on halfway cases. We narrow to float32 with
 * round-to-odd (truncate, then set the last bit if anything was dropped), which is
 * exact enough for a second rounding to any format at least two bits narrower.
 */
#include <math.h>
#include <string.h>

#include "cpu_impl.h"

static uint32_t cpu_f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float cpu_bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

float onyx__cpu_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return cpu_bits_f32(sign | 0x7f800000u | (mant << 13)); /* inf, NaN */
  if (exp != 0) return cpu_bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
  /* Zero or subnormal: mant · 2^-24, exact in float32. */
  float v = (float)mant * 5.9604644775390625e-8f;
  return sign ? -v : v;
}

uint16_t onyx__cpu_f32_to_f16(float f) {
  uint32_t x = cpu_f32_bits(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  uint32_t ax = x & 0x7fffffffu;

  if (ax > 0x7f800000u) /* NaN: quiet it, keep the top payload bits */
    return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  if (ax >= 0x477ff000u) /* >= 65520, halfway past the largest half: infinity */
    return (uint16_t)(sign | 0x7c00u);
  if (ax >= 0x38800000u) { /* normal half (>= 2^-14) */
    /* Add just under half an ulp, plus one when the kept part is odd (ties to
     * even); a carry out of the mantissa correctly bumps the exponent. */
    uint32_t rounded = ax + 0x0fffu + ((ax >> 13) & 1u);
    return (uint16_t)(sign | ((rounded - 0x38000000u) >> 13));
  }
  /* Subnormal half: the result is round(|f| / 2^-24) in the low ten bits. */
  uint32_t e = ax >> 23;
  if (e < 102) return sign; /* below 2^-25 (half the smallest subnormal): zero */
  uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
  uint32_t shift = 126u - e; /* 14..24 */
  uint32_t m = mant >> shift;
  uint32_t rem = mant & ((1u << shift) - 1u);
  uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (m & 1u))) ++m;
  return (uint16_t)(sign | m); /* m == 0x400 is the smallest normal, as it should be */
}

float onyx__cpu_bf16_to_f32(uint16_t h) { return cpu_bits_f32((uint32_t)h << 16); }

uint16_t onyx__cpu_f32_to_bf16(float f) {
  uint32_t x = cpu_f32_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x0040u); /* NaN */
  x += 0x7fffu + ((x >> 16) & 1u); /* ties to even; overflow rounds to infinity */
  return (uint16_t)(x >> 16);
}

/* float64 → float32 rounding to odd (see the top of the file). */
static float cpu_f64_to_f32_odd(double d) {
  float f = (float)d;
  if (isnan(d) || (double)f == d) return f;
  if (fabs((double)f) > fabs(d)) f = nextafterf(f, 0.0f); /* truncate toward zero */
  return cpu_bits_f32(cpu_f32_bits(f) | 1u);              /* sticky bit */
}

uint16_t onyx__cpu_f64_to_f16(double d) { return onyx__cpu_f32_to_f16(cpu_f64_to_f32_odd(d)); }

uint16_t onyx__cpu_f64_to_bf16(double d) { return onyx__cpu_f32_to_bf16(cpu_f64_to_f32_odd(d)); }
