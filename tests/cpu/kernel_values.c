/* Random values and 16-bit conversions for the kernel tests (kernel_values.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernel_values.h"
#include "onyx_tensor.h"

uint64_t kv_rng = 1;

float kv_rng_float(float lo, float hi) {
  kv_rng ^= kv_rng << 13;
  kv_rng ^= kv_rng >> 7;
  kv_rng ^= kv_rng << 17;
  return lo + (hi - lo) * (float)((kv_rng >> 40) * (1.0 / 16777216.0));
}

/* Round to nearest even, normal range only: the tests draw values far from the
 * subnormals. */
uint16_t kv_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffffu;
  if (exp <= 0) return (uint16_t)sign; /* tiny: flush (never drawn here) */
  uint32_t h = sign | ((uint32_t)exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return (uint16_t)h;
}
double kv_from_f16(uint16_t h) {
  int exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v = exp == 0 ? ldexp(mant, -24) : ldexp(1024 + mant, exp - 25);
  return (h & 0x8000) ? -v : v;
}
uint16_t kv_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t r = x + 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(r >> 16);
}
double kv_from_bf16(uint16_t b) {
  uint32_t x = (uint32_t)b << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

/* A random tensor of `dtype` in [lo, hi) and the float64 values it holds. */
void *kv_random(uint32_t dtype, int64_t n, float lo, float hi, double *values) {
  void *p = malloc((size_t)(n > 0 ? n : 1) * onyx_dtype_size(dtype));
  for (int64_t i = 0; i < n; ++i) {
    float v = kv_rng_float(lo, hi);
    if (dtype == ONYX_DTYPE_FLOAT32) {
      ((float *)p)[i] = v;
      values[i] = v;
    } else if (dtype == ONYX_DTYPE_FLOAT16) {
      ((uint16_t *)p)[i] = kv_to_f16(v);
      values[i] = kv_from_f16(((uint16_t *)p)[i]);
    } else {
      ((uint16_t *)p)[i] = kv_to_bf16(v);
      values[i] = kv_from_bf16(((uint16_t *)p)[i]);
    }
  }
  return p;
}

double kv_value(uint32_t dtype, const void *p, int64_t i) {
  if (dtype == ONYX_DTYPE_FLOAT32) return ((const float *)p)[i];
  if (dtype == ONYX_DTYPE_FLOAT16) return kv_from_f16(((const uint16_t *)p)[i]);
  return kv_from_bf16(((const uint16_t *)p)[i]);
}

const char *kv_dtype_name(uint32_t d) {
  return d == ONYX_DTYPE_FLOAT32 ? "float32" : d == ONYX_DTYPE_FLOAT16 ? "float16" : "bfloat16";
}

void kv_seed(const char *test, const char *env) {
  const char *seed = getenv(env);
  kv_rng = seed ? strtoull(seed, NULL, 0) : (uint64_t)time(NULL) * 2654435761u;
  if (kv_rng == 0) kv_rng = 1;
  printf("%s: seed %llu (%s repeats it)\n", test, (unsigned long long)kv_rng, env);
}
