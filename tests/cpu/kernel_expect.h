/*
 * Assertions the kernel tests share, on results of the kernel harness
 * (kernel_harness.h). Include after <cmocka.h> and <math.h>.
 */
#ifndef ONYX_TESTS_CPU_KERNEL_EXPECT_H
#define ONYX_TESTS_CPU_KERNEL_EXPECT_H

#include <string.h>

#include "kernel_harness.h"

static inline void expect_ok(const kh_result *r) {
  if (r->status != ONYX_STATUS_OK)
    fail_msg("expected OK, got %s at %s: %s", onyx_status_str(r->status), r->stage, r->error);
}

/* A failure with the given status and message fragment, and no output left behind. */
static inline void expect_fail(const kh_result *r, onyx_status st, const char *fragment) {
  if (r->status != st)
    fail_msg("expected %s, got %s at %s: %s", onyx_status_str(st), onyx_status_str(r->status),
             r->stage, r->error);
  if (fragment != NULL && strstr(r->error, fragment) == NULL)
    fail_msg("message '%s' lacks '%s'", r->error, fragment);
  assert_false(r->allocated_on_error);
}

/* A fused product (RMSNormMatMul, SiluMulMatMul) given transB = 1 — W as [N, K], the
 * layout transpose_weights writes where a provider takes it — on otherwise valid `in`:
 * declined at placement (supports) and refused at create, both naming the layout. */
static inline void expect_w_kn_refused(kh_provider *p, const kh_node *node,
                                       const onyx_tensor *const *in, size_t n) {
  static const char why[] =
      "transB = 1 (W as [N, K]) is the CUDA decode layout; the CPU kernel reads W as [K, N]";
  onyx_attr tb = kh_attr_int("transB", 1);
  kh_node nk = *node;
  nk.attrs = &tb;
  nk.attr_count = 1;
  kh_result r;
  kh_run(p, &nk, in, n, &r); /* placement's supports first */
  expect_fail(&r, ONYX_STATUS_UNSUPPORTED, why);
  kh_result_free(&r);
  kh_infer_result ir;
  kh_infer(p, &nk, in, n, false, &ir); /* create without supports */
  assert_int_equal(ir.status, ONYX_STATUS_UNSUPPORTED);
  if (strstr(ir.error, why) == NULL) fail_msg("create's message '%s' lacks '%s'", ir.error, why);
}

static inline void expect_shape(const onyx_tensor *t, uint32_t dtype, uint32_t rank,
                                const int64_t *dims) {
  assert_int_equal(t->dtype, dtype);
  assert_int_equal(t->rank, rank);
  for (uint32_t i = 0; i < rank; ++i)
    if (t->dims[i] != dims[i])
      fail_msg("dim %u: got %lld, want %lld", i, (long long)t->dims[i], (long long)dims[i]);
}

/* |got − want| <= atol + rtol·|want| per element; NaN matches NaN, ±inf itself. */
static inline void expect_close(const float *got, const double *want, int64_t n, double rtol,
                                double atol) {
  for (int64_t i = 0; i < n; ++i) {
    double g = got[i], w = want[i];
    if (isnan(w) && isnan(g)) continue;
    if (isinf(w) && g == w) continue;
    if (!(fabs(g - w) <= atol + rtol * fabs(w)))
      fail_msg("element %lld: got %.9g, want %.9g", (long long)i, g, w);
  }
}

static inline void expect_i64(const int64_t *got, const int64_t *want, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (got[i] != want[i])
      fail_msg("element %lld: got %lld, want %lld", (long long)i, (long long)got[i],
               (long long)want[i]);
}

#endif /* ONYX_TESTS_CPU_KERNEL_EXPECT_H */
