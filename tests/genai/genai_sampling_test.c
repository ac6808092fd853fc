/*
 * Sampling and logits, inside the library: greedy takes the first maximum, the
 * repetition penalty divides positive and multiplies negative logits of seen ids,
 * top_k 1 and temperature 0 are greedy, sampling stays inside top_k and top_p and
 * repeats from its seed; float16 and bfloat16 rows widen exactly, NaNs are counted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "genai_impl.h"

static onyx_genai_search search(bool sample, float temperature, int64_t top_k, float top_p,
                                float penalty) {
  return (onyx_genai_search){.struct_size = sizeof(onyx_genai_search),
                             .do_sample = sample,
                             .temperature = temperature,
                             .top_k = top_k,
                             .top_p = top_p,
                             .repetition_penalty = penalty};
}

static void test_greedy_first_maximum(void **state) {
  (void)state;
  onyx__sampler s;
  onyx_genai_search g = search(false, 1, 0, 1, 1);
  assert_int_equal(onyx__sampler_init(&s, 5, &g, 1), ONYX_STATUS_OK);
  float row[5] = {0.5f, 3.0f, -1.0f, 3.0f, 2.0f};
  assert_int_equal(onyx__sampler_pick(&s, row), 1);
  onyx__sampler_free(&s);
  /* Sampling with top_k 1 or a temperature of 0 is the same choice. */
  g = search(true, 1, 1, 1, 1);
  assert_int_equal(onyx__sampler_init(&s, 5, &g, 1), ONYX_STATUS_OK);
  assert_int_equal(onyx__sampler_pick(&s, row), 1);
  onyx__sampler_free(&s);
  g = search(true, 0, 0, 1, 1);
  assert_int_equal(onyx__sampler_init(&s, 5, &g, 1), ONYX_STATUS_OK);
  assert_int_equal(onyx__sampler_pick(&s, row), 1);
  onyx__sampler_free(&s);
}

static void test_repetition_penalty(void **state) {
  (void)state;
  onyx__sampler s;
  onyx_genai_search g = search(false, 1, 0, 1, 4);
  assert_int_equal(onyx__sampler_init(&s, 4, &g, 1), ONYX_STATUS_OK);
  onyx__sampler_note(&s, 0);
  onyx__sampler_note(&s, 2);
  onyx__sampler_note(&s, 77); /* outside the vocabulary: ignored */
  float row[4] = {2.0f, 1.0f, -1.0f, 0.25f};
  assert_int_equal(onyx__sampler_pick(&s, row), 1); /* 2.0 / 4 = 0.5 < 1.0 */
  assert_true(row[0] == 0.5f && row[1] == 1.0f && row[2] == -4.0f && row[3] == 0.25f);
  onyx__sampler_free(&s);
}

static void test_sampling_bounds_and_seed(void **state) {
  (void)state;
  enum { V = 64, DRAWS = 2000 };
  float base[V];
  for (int i = 0; i < V; ++i) base[i] = (float)((i * 37) % V) / 8.0f; /* a fixed shuffle */
  int rank_of[V];
  for (int i = 0; i < V; ++i) {
    rank_of[i] = 0;
    for (int j = 0; j < V; ++j) rank_of[i] += base[j] > base[i] || (base[j] == base[i] && j < i);
  }
  onyx__sampler a, b;
  onyx_genai_search g = search(true, 0.7f, 5, 1, 1);
  assert_int_equal(onyx__sampler_init(&a, V, &g, 99), ONYX_STATUS_OK);
  assert_int_equal(onyx__sampler_init(&b, V, &g, 99), ONYX_STATUS_OK);
  int seen[V] = {0};
  for (int d = 0; d < DRAWS; ++d) {
    float r1[V], r2[V];
    memcpy(r1, base, sizeof r1);
    memcpy(r2, base, sizeof r2);
    int64_t x = onyx__sampler_pick(&a, r1), y = onyx__sampler_pick(&b, r2);
    assert_int_equal(x, y); /* one seed, one sequence */
    assert_true(x >= 0 && x < V);
    assert_true(rank_of[x] < 5);
    seen[x]++;
  }
  int kinds = 0;
  for (int i = 0; i < V; ++i) kinds += seen[i] > 0;
  assert_true(kinds > 1); /* it samples */
  onyx__sampler_free(&a);
  onyx__sampler_free(&b);
  /* top_p: the top logit alone holds over 99% of the mass here. */
  float peaked[V];
  for (int i = 0; i < V; ++i) peaked[i] = i == 17 ? 20.0f : 0.0f;
  g = search(true, 1, 0, 0.9f, 1);
  assert_int_equal(onyx__sampler_init(&a, V, &g, 7), ONYX_STATUS_OK);
  for (int d = 0; d < 200; ++d) {
    float r[V];
    memcpy(r, peaked, sizeof r);
    assert_int_equal(onyx__sampler_pick(&a, r), 17);
  }
  onyx__sampler_free(&a);
}

static void test_logits_rows(void **state) {
  (void)state;
  /* float16: 1, -2.5, the smallest subnormal, 65504, +inf, 0, -0 */
  uint16_t h[2][7] = {{0x0000, 0, 0, 0, 0, 0, 0},
                      {0x3c00, 0xc100, 0x0001, 0x7bff, 0x7c00, 0x0000, 0x8000}};
  onyx_tensor t = {.dtype = ONYX_DTYPE_FLOAT16, .rank = 2, .dims = {2, 7}, .data = h};
  float out[7];
  assert_int_equal(onyx__logits_row(&t, 1, out), 0);
  assert_true(out[0] == 1.0f && out[1] == -2.5f && out[3] == 65504.0f);
  assert_true(out[2] == ldexpf(1.0f, -24));
  assert_true(isinf(out[4]) && out[4] > 0 && out[5] == 0.0f && signbit(out[6]));
  h[1][3] = 0x7e00; /* NaN */
  h[1][6] = 0xfc01;
  assert_int_equal(onyx__logits_row(&t, 1, out), 2);
  /* bfloat16: the high half of a float */
  uint16_t bf[3] = {0x3f80, 0xc020, 0x4049};
  t = (onyx_tensor){.dtype = ONYX_DTYPE_BFLOAT16, .rank = 3, .dims = {1, 1, 3}, .data = bf};
  assert_int_equal(onyx__logits_row(&t, 0, out), 0);
  assert_true(out[0] == 1.0f && out[1] == -2.5f && out[2] == 3.140625f);
  float f[4] = {1.5f, -7.0f, 0.25f, 9.0f};
  t = (onyx_tensor){.dtype = ONYX_DTYPE_FLOAT32, .rank = 2, .dims = {2, 2}, .data = f};
  assert_int_equal(onyx__logits_row(&t, 1, out), 0);
  assert_true(out[0] == 0.25f && out[1] == 9.0f);
}

/* Reference float16 → float, branch by branch as IEEE 754 reads the fields. */
static float ref_fp16(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  float mag = e == 0    ? ldexpf((float)m, -24)
              : e == 31 ? (m ? NAN : INFINITY)
                        : ldexpf((float)(m | 0x400), e - 25);
  return (h & 0x8000) ? -mag : mag;
}

static void test_row_widen_every_float16(void **state) {
  (void)state;
  enum { N = 65536 + 5 }; /* every code, then a tail the 8-lane loop leaves */
  static uint16_t h[N];
  static float out[N];
  int64_t nan = 0;
  for (int i = 0; i < N; ++i) {
    h[i] = (uint16_t)(i % 65536);
    nan += isnan(ref_fp16(h[i]));
    out[i] = 1234.5f; /* poison */
  }
  assert_int_equal(onyx__row_widen(h, false, N, out), nan);
  for (int i = 0; i < N; ++i) {
    float want = ref_fp16(h[i]);
    if (isnan(want)) {
      assert_true(isnan(out[i]));
    } else {
      assert_true(out[i] == want && signbit(out[i]) == signbit(want));
    }
  }
  for (int i = 0; i < N; ++i) out[i] = 1234.5f;
  assert_int_equal(onyx__row_widen(h, true, N, out), 2 * 127); /* exponent 255, mantissa not 0 */
  for (int i = 0; i < N; ++i) {
    uint32_t bits = (uint32_t)h[i] << 16, got;
    memcpy(&got, &out[i], sizeof got);
    if (!isnan(out[i])) assert_int_equal(got, bits);
  }
}

static uint64_t next_rand(uint64_t *s) { /* xorshift64 */
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static int64_t ref_first_max(const float *x, int64_t n) {
  int64_t best = -1;
  for (int64_t i = 0; i < n; ++i)
    if (!isnan(x[i]) && (best < 0 || x[i] > x[best])) best = i;
  return best < 0 ? 0 : best;
}

static void test_row_first_max(void **state) {
  (void)state;
  enum { N = 1003 };
  static float x[N];
  uint64_t rng = 7;
  for (int trial = 0; trial < 400; ++trial) {
    int64_t n = 1 + (int64_t)(next_rand(&rng) % N);
    for (int64_t i = 0; i < n; ++i) /* few distinct values: ties everywhere */
      x[i] = (float)(next_rand(&rng) % 9) - 4.0f;
    if (trial % 3 == 0) x[next_rand(&rng) % (uint64_t)n] = NAN;
    if (trial % 5 == 0) x[n - 1] = 100.0f; /* the maximum in the tail */
    int64_t nan = 0;
    for (int64_t i = 0; i < n; ++i) nan += isnan(x[i]) != 0;
    assert_int_equal(onyx__row_first_max(x, n), ref_first_max(x, n));
    assert_int_equal(onyx__row_count_nan(x, n), nan);
  }
  for (int i = 0; i < 19; ++i) x[i] = NAN;
  assert_int_equal(onyx__row_first_max(x, 19), 0);
  for (int i = 0; i < 19; ++i) x[i] = -INFINITY;
  x[11] = NAN;
  assert_int_equal(onyx__row_first_max(x, 19), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_greedy_first_maximum),     cmocka_unit_test(test_repetition_penalty),
      cmocka_unit_test(test_sampling_bounds_and_seed), cmocka_unit_test(test_logits_rows),
      cmocka_unit_test(test_row_widen_every_float16),  cmocka_unit_test(test_row_first_max),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
