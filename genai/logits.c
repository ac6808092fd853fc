/*
 * The sampler reads float: a row of float16 or bfloat16 logits (fp16 exports) is
 * widened first. Only the row the next id comes from is converted.
 */
#include <math.h>
#include <string.h>

#include "genai_impl.h"

static float from_bf16(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static float from_fp16(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13); /* inf, NaN */
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else { /* subnormal: shift the mantissa up to a normal float */
    int e = -1;
    do {
      ++e;
      man <<= 1;
    } while ((man & 0x400) == 0);
    bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ff) << 13);
  }
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

int64_t onyx__logits_row(const onyx_tensor *logits, int64_t row, float *out) {
  int64_t vocab = logits->dims[logits->rank - 1], nan = 0;
  if (logits->dtype == ONYX_DTYPE_FLOAT32) {
    memcpy(out, (const float *)logits->data + row * vocab, (size_t)vocab * sizeof *out);
  } else {
    const uint16_t *h = (const uint16_t *)logits->data + row * vocab;
    bool bf = logits->dtype == ONYX_DTYPE_BFLOAT16;
    for (int64_t i = 0; i < vocab; ++i) out[i] = bf ? from_bf16(h[i]) : from_fp16(h[i]);
  }
  for (int64_t i = 0; i < vocab; ++i) nan += isnan(out[i]) != 0;
  return nan;
}
