/*
 * providers/common's GroupQueryAttention input checks (attn_gqa_inputs.c), which every
 * provider calls after the geometry of inputs 0..4: each refusal names the input and
 * what was expected, and a consistent set passes with the lengths it implies.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "attn_params.h"

enum { B = 2, S = 3, NQ = 4, H = 8, L = 5 };

typedef struct gqa_case {
  onyx_tensor t[ONYX__PC_GQA_INPUTS];
  const onyx_tensor *in[ONYX__PC_GQA_INPUTS];
  onyx__pc_gqa_geom g;
  int32_t seqlens[B], total;
  int64_t pos[B * S];
  char msg[512];
} gqa_case;

static onyx_tensor f16(uint32_t rank, int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
  return (onyx_tensor){.dtype = ONYX_DTYPE_FLOAT16, .rank = rank, .dims = {d0, d1, d2, d3}};
}

/* A decode-like step: past length 5, sequence 3, total 8, with rotary caches. */
static void make(gqa_case *c) {
  memset(c, 0, sizeof *c);
  c->g = (onyx__pc_gqa_geom){.batch = B, .seq = S, .head = H, .hidden = NQ * H, .past_len = L};
  c->t[ONYX__PC_GQA_QUERY] = f16(3, B, S, NQ * H, 0);
  c->t[ONYX__PC_GQA_PAST_KEY] = f16(4, B, 1, L, H);
  c->total = L + S;
  c->seqlens[0] = c->total - 1;
  c->seqlens[1] = c->total - 2;
  c->t[ONYX__PC_GQA_SEQLENS] =
      (onyx_tensor){.dtype = ONYX_DTYPE_INT32, .rank = 1, .dims = {B}, .data = c->seqlens};
  c->t[ONYX__PC_GQA_TOTAL] = (onyx_tensor){.dtype = ONYX_DTYPE_INT32, .data = &c->total};
  c->t[ONYX__PC_GQA_COS] = f16(2, 16, H / 2, 0, 0);
  c->t[ONYX__PC_GQA_SIN] = f16(2, 16, H / 2, 0, 0);
  for (int i = 0; i < B * S; ++i) c->pos[i] = L + i % S;
  c->t[ONYX__PC_GQA_POS] =
      (onyx_tensor){.dtype = ONYX_DTYPE_INT64, .rank = 2, .dims = {B, S}, .data = c->pos};
  int present[] = {ONYX__PC_GQA_QUERY, ONYX__PC_GQA_PAST_KEY, ONYX__PC_GQA_SEQLENS,
                   ONYX__PC_GQA_TOTAL, ONYX__PC_GQA_COS,      ONYX__PC_GQA_SIN,
                   ONYX__PC_GQA_POS};
  for (size_t i = 0; i < sizeof present / sizeof present[0]; ++i)
    c->in[present[i]] = &c->t[present[i]];
}

static onyx_status check(gqa_case *c, bool rotary, onyx__pc_gqa_run *run) {
  return onyx__pc_gqa_inputs(NQ, rotary, c->in, &c->g, run, c->msg, sizeof c->msg);
}

static void refused(gqa_case *c, bool rotary, const char *needle) {
  onyx__pc_gqa_run run;
  assert_int_equal(check(c, rotary, &run), ONYX_STATUS_INVALID_ARGUMENT);
  if (strstr(c->msg, needle) == NULL) print_message("message: %s\n", c->msg);
  assert_non_null(strstr(c->msg, needle));
}

static void consistent_inputs_pass(void **state) {
  (void)state;
  gqa_case c;
  make(&c);
  onyx__pc_gqa_run run;
  assert_int_equal(check(&c, true, &run), ONYX_STATUS_OK);
  assert_int_equal(run.total, L + S);
  assert_false(run.first);
}

static void each_refusal_names_the_input(void **state) {
  (void)state;
  gqa_case c;
  make(&c);
  c.t[ONYX__PC_GQA_PAST_KEY].dtype = ONYX_DTYPE_FLOAT32;
  refused(&c, true, "past_key (input 3) has type float32; the query's type float16 expected");
  make(&c);
  c.in[ONYX__PC_GQA_TOTAL] = NULL;
  refused(&c, true, "seqlens_k (input 5) and total_sequence_length (input 6) are required");
  make(&c);
  c.t[ONYX__PC_GQA_SEQLENS].dims[0] = 1;
  refused(&c, true, "seqlens_k must be int32 (2), got int32 [1]");
  make(&c);
  c.total = L + S + 1;
  refused(&c, true, "total_sequence_length 9 must equal past length 5 + sequence length 3");
  make(&c);
  c.seqlens[1] = 0;
  refused(&c, true, "seqlens_k[1] = 0 gives 1 tokens, outside [3, 8]");
  make(&c);
  c.in[ONYX__PC_GQA_SIN] = NULL;
  refused(&c, true, "do_rotary = 1 needs cos_cache (input 7) and sin_cache (input 8)");
  make(&c);
  c.t[ONYX__PC_GQA_COS].dims[1] = H;
  refused(&c, true, "must both be (max_position, D) with 1 <= 2*D <= head size 8");
  make(&c);
  c.pos[4] = 16;
  refused(&c, true, "rotary position 16 (batch 1, token 1) is outside the cos/sin cache of 16");
  make(&c);
  c.t[ONYX__PC_GQA_BIAS] = f16(4, B, NQ, S, L);
  c.in[ONYX__PC_GQA_BIAS] = &c.t[ONYX__PC_GQA_BIAS];
  refused(&c, true, "attention_bias must be (2 or 1, 4 or 1, 3, 8), got [2,4,3,5]");
  make(&c);
  c.t[ONYX__PC_GQA_SINK] = f16(1, NQ + 1, 0, 0, 0);
  c.in[ONYX__PC_GQA_SINK] = &c.t[ONYX__PC_GQA_SINK];
  refused(&c, true, "head_sink must be (4), got [5]");
}

/* Without rotary the caches and positions are not read. */
static void rotary_inputs_only_with_rotary(void **state) {
  (void)state;
  gqa_case c;
  make(&c);
  c.pos[4] = 1000;
  onyx__pc_gqa_run run;
  assert_int_equal(check(&c, false, &run), ONYX_STATUS_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(consistent_inputs_pass),
      cmocka_unit_test(each_refusal_names_the_input),
      cmocka_unit_test(rotary_inputs_only_with_rotary),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
