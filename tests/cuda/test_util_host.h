/*
 * Shared by the CUDA tests (host side only, no CUDA headers): random tensors of the
 * float dtypes and temporary files.
 */
#ifndef ONYX_TESTS_CUDA_TEST_UTIL_HOST_H
#define ONYX_TESTS_CUDA_TEST_UTIL_HOST_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "onyx_abi.h"

static inline uint16_t tu_f32_to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffffu;
  if (((x >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
  if (exp >= 31) return (uint16_t)(sign | 0x7c00u);
  if (exp <= 0) {
    if (exp < -10) return (uint16_t)sign;
    mant |= 0x800000u;
    uint32_t shift = (uint32_t)(14 - exp);
    uint32_t half = mant >> shift, rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return (uint16_t)(sign | half);
  }
  uint32_t h = sign | ((uint32_t)exp << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;
  return (uint16_t)h;
}

static inline uint16_t tu_f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

/* xorshift: reproducible from the printed seed. */
static inline uint32_t tu_rand(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return (uint32_t)(*s >> 32);
}

/* Uniform in [lo, hi], kept away from zero (|v| >= 1e-2 when the range allows). */
static inline float tu_uniform(uint64_t *s, float lo, float hi) {
  for (int tries = 0; tries < 8; ++tries) {
    float u = (float)tu_rand(s) / 4294967296.0f;
    float v = lo + (hi - lo) * u;
    if (v > 1e-2f || v < -1e-2f || (lo >= 0 && hi <= 1e-2f)) return v;
  }
  return hi;
}

/* A host tensor of dtype (float32, float16, bfloat16) with fresh random values. */
static inline onyx_tensor tu_random_tensor(uint64_t *seed, uint32_t dtype, uint32_t rank,
                                           const int64_t *dims, float lo, float hi) {
  onyx_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = dtype;
  t.rank = rank;
  t.device = ONYX_DEVICE_HOST;
  for (uint32_t i = 0; i < rank; ++i) t.dims[i] = dims[i];
  int64_t n = onyx_tensor_numel(&t);
  size_t es = onyx_dtype_size(dtype);
  t.data = malloc((size_t)(n ? n : 1) * es);
  for (int64_t i = 0; t.data && i < n; ++i) {
    float v = tu_uniform(seed, lo, hi);
    if (dtype == ONYX_DTYPE_FLOAT16)
      ((uint16_t *)t.data)[i] = tu_f32_to_f16(v);
    else if (dtype == ONYX_DTYPE_BFLOAT16)
      ((uint16_t *)t.data)[i] = tu_f32_to_bf16(v);
    else
      ((float *)t.data)[i] = v;
  }
  return t;
}

/* Writes `text` to a fresh file under /tmp; returns its malloc'ed path. */
static inline char *tu_write_temp(const char *text) {
  char tmpl[] = "/tmp/onyx-cuda-test-XXXXXX";
  int fd = mkstemp(tmpl);
  if (fd < 0) return NULL;
  FILE *f = fdopen(fd, "w");
  if (f == NULL) {
    close(fd);
    return NULL;
  }
  fputs(text, f);
  fclose(f);
  char *path = malloc(strlen(tmpl) + 1);
  if (path) strcpy(path, tmpl);
  return path;
}

#endif /* ONYX_TESTS_CUDA_TEST_UTIL_HOST_H */
