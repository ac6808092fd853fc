/*
 * The float64 reference of the CUDA attention tests (test_cuda_attention.c): rotary, one
 * softmax row, and GroupQueryAttention's output rows spread over the host's cores (on one
 * core the reference of the large Hopper cases took most of the test's 287 s). Each output
 * row is computed by one thread in one fixed order, so the results do not depend on the
 * number of threads.
 */
#ifndef ONYX_ATTN_REFERENCE_H
#define ONYX_ATTN_REFERENCE_H

#include <stdbool.h>
#include <stdint.h>

/* Element d of row x after rotation with cos/sin row `row` (halves or pairs). */
double ref_rope(const double *x, int d, const double *cos, const double *sin, int half, int64_t row,
                bool inter);

/* Softmax-weighted sum of one row: scores[j] (−inf: masked) over n keys; v(j, d) at
 * v[j · v_rs + d]; a head sink joins the denominator when has_sink. */
void ref_softmax_row(const double *scores, int64_t n, bool has_sink, double sink, const double *v,
                     int64_t v_rs, int hv, double *out);

/* One GroupQueryAttention problem as the reference reads it. K and V: B × nkv × P × H
 * (BNSH), rotated and rounded already; Q: B × S rows of `hidden`, query head h at h · H. */
typedef struct ref_gqa {
  const double *q, *k, *v;
  const double *cos, *sin; /* rotary tables: max position × half (rotary) */
  const double *bias;      /* B × S × T added to the scores, or NULL */
  const double *sink;      /* one per query head, or NULL */
  const int32_t *seqlens;  /* B: each batch's total length − 1 */
  int B, S, T, nq, nkv, H, half, window;
  int64_t P, hidden;
  bool first, causal, rotary, interleaved, pos_ids, smooth;
  float softcap;
  double scale;
  double *y; /* B × S × nq × H */
} ref_gqa;

/* Fills r->y, one (batch, query head) at a time on each of the host's cores; false when
 * no thread had memory for its rows (y is then incomplete). */
bool ref_gqa_run(const ref_gqa *r);

#endif
