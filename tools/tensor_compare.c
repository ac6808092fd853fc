/* Tensor comparison with dtype-fitting tolerances. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tensor_compare.h"

static float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 31, man = h & 1023, bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else { /* subnormal: renormalise */
      exp = 113;
      while (!(man & 1024)) {
        man <<= 1;
        exp--;
      }
      bits = sign | (exp << 23) | ((man & 1023) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  }
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static float bf16_to_float(uint16_t b) {
  uint32_t bits = (uint32_t)b << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

double tensor_get(const onyx_tensor *t, int64_t i) {
  const void *d = t->data;
  switch (t->dtype) {
  case ONYX_DTYPE_FLOAT32:
    return ((const float *)d)[i];
  case ONYX_DTYPE_FLOAT64:
    return ((const double *)d)[i];
  case ONYX_DTYPE_FLOAT16:
    return half_to_float(((const uint16_t *)d)[i]);
  case ONYX_DTYPE_BFLOAT16:
    return bf16_to_float(((const uint16_t *)d)[i]);
  case ONYX_DTYPE_INT8:
    return ((const int8_t *)d)[i];
  case ONYX_DTYPE_UINT8:
    return ((const uint8_t *)d)[i];
  case ONYX_DTYPE_BOOL:
    return ((const uint8_t *)d)[i] != 0;
  case ONYX_DTYPE_INT16:
    return ((const int16_t *)d)[i];
  case ONYX_DTYPE_UINT16:
    return ((const uint16_t *)d)[i];
  case ONYX_DTYPE_INT32:
    return ((const int32_t *)d)[i];
  case ONYX_DTYPE_UINT32:
    return ((const uint32_t *)d)[i];
  case ONYX_DTYPE_INT64:
    return (double)((const int64_t *)d)[i];
  case ONYX_DTYPE_UINT64:
    return (double)((const uint64_t *)d)[i];
  default:
    return NAN;
  }
}

static bool is_float(uint32_t dtype) {
  return dtype == ONYX_DTYPE_FLOAT32 || dtype == ONYX_DTYPE_FLOAT64 ||
         dtype == ONYX_DTYPE_FLOAT16 || dtype == ONYX_DTYPE_BFLOAT16;
}

void tensor_default_tolerance(uint32_t dtype, double *rtol, double *atol) {
  switch (dtype) {
  case ONYX_DTYPE_FLOAT16:
    *rtol = 1e-2;
    *atol = 1e-3;
    break;
  case ONYX_DTYPE_BFLOAT16:
    *rtol = 2e-2;
    *atol = 1e-2;
    break;
  case ONYX_DTYPE_FLOAT64:
    *rtol = 1e-7;
    *atol = 1e-9;
    break;
  default:
    *rtol = 1e-3;
    *atol = 1e-5;
    break;
  }
}

const char *dtype_to_string(uint32_t d) {
  switch (d) {
  case ONYX_DTYPE_FLOAT32:
    return "float32";
  case ONYX_DTYPE_UINT8:
    return "uint8";
  case ONYX_DTYPE_INT8:
    return "int8";
  case ONYX_DTYPE_UINT16:
    return "uint16";
  case ONYX_DTYPE_INT16:
    return "int16";
  case ONYX_DTYPE_INT32:
    return "int32";
  case ONYX_DTYPE_INT64:
    return "int64";
  case ONYX_DTYPE_BOOL:
    return "bool";
  case ONYX_DTYPE_FLOAT16:
    return "float16";
  case ONYX_DTYPE_FLOAT64:
    return "float64";
  case ONYX_DTYPE_UINT32:
    return "uint32";
  case ONYX_DTYPE_UINT64:
    return "uint64";
  case ONYX_DTYPE_BFLOAT16:
    return "bfloat16";
  default:
    return "unknown";
  }
}

const char *tensor_describe(const onyx_tensor *t, char *buf, size_t cap) {
  size_t n = (size_t)snprintf(buf, cap, "%s[", dtype_to_string(t->dtype));
  for (uint32_t i = 0; i < t->rank && n < cap; ++i)
    n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? "," : "", (long long)t->dims[i]);
  if (n < cap) snprintf(buf + n, cap - n, "]");
  return buf;
}

tensor_diff tensor_compare(const onyx_tensor *got, const onyx_tensor *want, double rtol,
                           double atol) {
  tensor_diff r = {.ok = true, .first_bad = -1};
  char a[128], b[128];
  if (got->dtype != want->dtype || got->rank != want->rank ||
      memcmp(got->dims, want->dims, want->rank * sizeof(int64_t)) != 0) {
    r.ok = false;
    snprintf(r.why, sizeof r.why, "got %s, expected %s", tensor_describe(got, a, sizeof a),
             tensor_describe(want, b, sizeof b));
    return r;
  }
  int64_t n = onyx_tensor_numel(want);
  bool fl = is_float(want->dtype);
  for (int64_t i = 0; i < n; ++i) {
    double g = tensor_get(got, i), w = tensor_get(want, i);
    bool bad;
    if (fl) {
      if (isnan(w) || isnan(g))
        bad = isnan(w) != isnan(g);
      else if (isinf(w) || isinf(g))
        bad = g != w;
      else {
        double err = fabs(g - w);
        if (err > r.worst_abs) r.worst_abs = err;
        if (w != 0 && err / fabs(w) > r.worst_rel) r.worst_rel = err / fabs(w);
        bad = err > atol + rtol * fabs(w);
      }
    } else if (want->dtype == ONYX_DTYPE_INT64 || want->dtype == ONYX_DTYPE_UINT64) {
      bad = ((const int64_t *)got->data)[i] != ((const int64_t *)want->data)[i];
      if (bad && fabs(g - w) > r.worst_abs) r.worst_abs = fabs(g - w);
    } else {
      bad = g != w;
      if (bad && fabs(g - w) > r.worst_abs) r.worst_abs = fabs(g - w);
    }
    if (bad) {
      if (r.first_bad < 0) {
        r.first_bad = i;
        r.first_got = g;
        r.first_want = w;
      }
      r.mismatches++;
      r.ok = false;
    }
  }
  return r;
}
