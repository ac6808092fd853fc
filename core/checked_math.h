/*
 * Checked arithmetic for sizes and counts that come from input: byte counts, element
 * counts, capacities and token counts computed from a model's dims, a config's
 * numbers, a caller's options or a kernel's answer. Unchecked, such a product wraps
 * to a small number, a small buffer is allocated, and the loop that trusts the
 * large number writes past it.
 *
 * The functions follow C23's ckd_add / ckd_mul: the result goes to *out and the
 * return value is true when it did not fit (then *out holds the wrapped value and
 * must not be used). So a call site reads
 *
 *     if (onyx__ckd_mul_u64(&bytes, count, elem)) return refuse("... overflows");
 *
 * Header-only, so that the core, genai/ and the tools share one definition without
 * linking anything. Not published: nothing here crosses the ABI.
 */
#ifndef ONYX_CORE_CHECKED_MATH_H
#define ONYX_CORE_CHECKED_MATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onyx_tensor.h"

#if defined(__GNUC__) || defined(__clang__)
#define ONYX__CKD_BUILTINS 1
#else
#define ONYX__CKD_BUILTINS 0
#endif

static inline bool onyx__ckd_add_u64(uint64_t *out, uint64_t a, uint64_t b) {
#if ONYX__CKD_BUILTINS
  return __builtin_add_overflow(a, b, out);
#else
  *out = a + b;
  return *out < a;
#endif
}

static inline bool onyx__ckd_mul_u64(uint64_t *out, uint64_t a, uint64_t b) {
#if ONYX__CKD_BUILTINS
  return __builtin_mul_overflow(a, b, out);
#else
  *out = a * b;
  return a != 0 && *out / a != b;
#endif
}

static inline bool onyx__ckd_add_size(size_t *out, size_t a, size_t b) {
#if ONYX__CKD_BUILTINS
  return __builtin_add_overflow(a, b, out);
#else
  *out = a + b;
  return *out < a;
#endif
}

static inline bool onyx__ckd_mul_size(size_t *out, size_t a, size_t b) {
#if ONYX__CKD_BUILTINS
  return __builtin_mul_overflow(a, b, out);
#else
  *out = a * b;
  return a != 0 && *out / a != b;
#endif
}

/* Signed counts (dims, token counts) that must stay non-negative: true when either
 * operand is negative or the result passes INT64_MAX. */
static inline bool onyx__ckd_add_count(int64_t *out, int64_t a, int64_t b) {
  uint64_t r = 0;
  bool over =
      a < 0 || b < 0 || onyx__ckd_add_u64(&r, (uint64_t)a, (uint64_t)b) || r > (uint64_t)INT64_MAX;
  *out = (int64_t)(r & (uint64_t)INT64_MAX);
  return over;
}

static inline bool onyx__ckd_mul_count(int64_t *out, int64_t a, int64_t b) {
  uint64_t r = 0;
  bool over =
      a < 0 || b < 0 || onyx__ckd_mul_u64(&r, (uint64_t)a, (uint64_t)b) || r > (uint64_t)INT64_MAX;
  *out = (int64_t)(r & (uint64_t)INT64_MAX);
  return over;
}

/* x rounded up to a multiple of `to` (> 0). */
static inline bool onyx__ckd_round_up_u64(uint64_t *out, uint64_t x, uint64_t to) {
  uint64_t r = 0;
  if (to == 0 || onyx__ckd_add_u64(&r, x, to - 1)) {
    *out = 0;
    return true;
  }
  *out = r / to * to;
  return false;
}

/* The element count of `rank` dims: true when a dim is negative, the rank is over
 * ONYX_MAX_RANK, or the product passes INT64_MAX. A scalar (rank 0) has 1. */
static inline bool onyx__ckd_numel(int64_t *out, const int64_t *dims, uint32_t rank) {
  int64_t n = 1;
  bool over = rank > ONYX_MAX_RANK;
  for (uint32_t i = 0; !over && i < rank; ++i) over = onyx__ckd_mul_count(&n, n, dims[i]);
  *out = over ? 0 : n;
  return over;
}

/* The byte size of `rank` dims of `elem_size`-byte elements, which must also fit
 * size_t and INT64_MAX (a host allocation, a file offset): true when it does not. */
static inline bool onyx__ckd_bytes(uint64_t *out, const int64_t *dims, uint32_t rank,
                                   size_t elem_size) {
  int64_t n = 0;
  uint64_t b = 0;
  bool over = onyx__ckd_numel(&n, dims, rank) || onyx__ckd_mul_u64(&b, (uint64_t)n, elem_size) ||
              b > (uint64_t)INT64_MAX || b > (uint64_t)SIZE_MAX;
  *out = over ? 0 : b;
  return over;
}

/* The byte size of `rank` dims of `dtype` elements: onyx__ckd_bytes, and for the
 * sub-byte types (INT4, UINT4: two a byte) the element count halved, rounded up. 0 for a
 * dtype without a size, which callers refuse on their own. */
static inline bool onyx__ckd_dtype_bytes(uint64_t *out, const int64_t *dims, uint32_t rank,
                                         uint32_t dtype) {
  size_t bits = onyx_dtype_bits(dtype);
  if (bits == 0 || bits % 8 == 0) return onyx__ckd_bytes(out, dims, rank, bits / 8);
  int64_t n = 0;
  bool over = onyx__ckd_numel(&n, dims, rank);
  *out = over ? 0 : ((uint64_t)n * bits + 7) / 8; /* n < 2^63: no overflow at 4 bits */
  return over;
}

/* The byte size of a tensor view (0 for a dtype without a size, which callers refuse
 * on their own). */
static inline bool onyx__ckd_tensor_bytes(uint64_t *out, const onyx_tensor *t) {
  return onyx__ckd_dtype_bytes(out, t->dims, t->rank, t->dtype);
}

/* `count` elements of `elem_size` bytes for malloc: true when the product does not
 * fit size_t. */
static inline bool onyx__ckd_array(size_t *out, size_t count, size_t elem_size) {
  return onyx__ckd_mul_size(out, count, elem_size);
}

#endif /* ONYX_CORE_CHECKED_MATH_H */
