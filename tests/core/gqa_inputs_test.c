/*
 * providers/common's GroupQueryAttention input checks (attn_gqa_inputs.c), which every
 * provider calls after the geometry of inputs 0..4: each refusal names the input and
 * what was expected, and a consistent set passes with the lengths it implies. The
 * shapes-only form (the CUDA provider's, whose seqlens_k and position_ids stay on the
 * device) reads no value but total_sequence_length's. The attribute checks
 * (attn_params.c) name the attribute.
 */
#include <math.h>
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

/* Device-side seqlens_k and position_ids: their pointers are never followed (a read of
 * this address would crash), bad values pass, shapes and types are still checked. */
static void shapes_only_reads_no_device_values(void **state) {
  (void)state;
  gqa_case c;
  make(&c);
  void *device = (void *)(uintptr_t)64;
  c.t[ONYX__PC_GQA_SEQLENS].device = ONYX_DEVICE_CUDA;
  c.t[ONYX__PC_GQA_SEQLENS].data = device;
  c.t[ONYX__PC_GQA_POS].device = ONYX_DEVICE_CUDA;
  c.t[ONYX__PC_GQA_POS].data = device;
  onyx__pc_gqa_run run;
  assert_int_equal(onyx__pc_gqa_input_shapes(NQ, true, c.in, &c.g, &run, c.msg, sizeof c.msg),
                   ONYX_STATUS_OK);
  assert_int_equal(run.total, L + S);
  assert_false(run.first);
  /* The first prompt: S == T. */
  c.g.past_len = 0;
  c.in[ONYX__PC_GQA_PAST_KEY] = NULL;
  c.total = S;
  assert_int_equal(onyx__pc_gqa_input_shapes(NQ, true, c.in, &c.g, &run, c.msg, sizeof c.msg),
                   ONYX_STATUS_OK);
  assert_int_equal(run.total, S);
  assert_true(run.first);
  c.t[ONYX__PC_GQA_POS].dtype = ONYX_DTYPE_INT32;
  assert_int_equal(onyx__pc_gqa_input_shapes(NQ, true, c.in, &c.g, &run, c.msg, sizeof c.msg),
                   ONYX_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(c.msg, "position_ids must be int64 (2, 3), got int32 [2,3]"));
  make(&c);
  c.t[ONYX__PC_GQA_SEQLENS].device = ONYX_DEVICE_CUDA;
  c.t[ONYX__PC_GQA_SEQLENS].data = device;
  c.t[ONYX__PC_GQA_SEQLENS].rank = 2;
  assert_int_equal(onyx__pc_gqa_input_shapes(NQ, true, c.in, &c.g, &run, c.msg, sizeof c.msg),
                   ONYX_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(c.msg, "seqlens_k must be int32 (2)"));
}

/* No position can be checked against a cache of no rows, so the shapes-only form
 * refuses it by its shape; the full form by the first position outside it. */
static void an_empty_rotary_cache(void **state) {
  (void)state;
  gqa_case c;
  make(&c);
  c.t[ONYX__PC_GQA_COS].dims[0] = 0;
  c.t[ONYX__PC_GQA_SIN].dims[0] = 0;
  onyx__pc_gqa_run run;
  assert_int_equal(onyx__pc_gqa_input_shapes(NQ, true, c.in, &c.g, &run, c.msg, sizeof c.msg),
                   ONYX_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(c.msg, "cos_cache [0,4] and sin_cache [0,4] must both be (max_position"));
  refused(&c, true, "is outside the cos/sin cache of 0 rows");
  /* Without rotary the caches are not looked at. */
  assert_int_equal(onyx__pc_gqa_input_shapes(NQ, false, c.in, &c.g, &run, c.msg, sizeof c.msg),
                   ONYX_STATUS_OK);
}

/* total_sequence_length is read by both forms, so it must be a host tensor. */
static void total_must_be_on_the_host(void **state) {
  (void)state;
  gqa_case c;
  make(&c);
  c.t[ONYX__PC_GQA_TOTAL].device = ONYX_DEVICE_CUDA;
  refused(&c, true, "total_sequence_length (input 6) must be in host memory");
  onyx__pc_gqa_run run;
  assert_int_equal(onyx__pc_gqa_input_shapes(NQ, true, c.in, &c.g, &run, c.msg, sizeof c.msg),
                   ONYX_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(c.msg, "must be in host memory"));
}

/* The shapes-only form refuses what the full form refuses by shape, with its words. */
static void shapes_only_words_as_the_full_form(void **state) {
  (void)state;
  gqa_case c;
  gqa_case d;
  onyx__pc_gqa_run run;
  for (int k = 0; k < 5; ++k) {
    make(&c);
    switch (k) {
    case 0:
      c.t[ONYX__PC_GQA_SIN].dtype = ONYX_DTYPE_FLOAT32;
      break;
    case 1:
      c.total = L + S + 1;
      break;
    case 2:
      c.t[ONYX__PC_GQA_COS].dims[1] = H;
      break;
    case 3:
      c.t[ONYX__PC_GQA_SINK] = f16(1, NQ + 1, 0, 0, 0);
      c.in[ONYX__PC_GQA_SINK] = &c.t[ONYX__PC_GQA_SINK];
      break;
    default:
      c.in[ONYX__PC_GQA_SEQLENS] = NULL;
      break;
    }
    d = c;
    for (int i = 0; i < ONYX__PC_GQA_INPUTS; ++i) d.in[i] = c.in[i] != NULL ? &d.t[i] : NULL;
    d.t[ONYX__PC_GQA_SEQLENS].data = d.seqlens;
    d.t[ONYX__PC_GQA_TOTAL].data = &d.total;
    d.t[ONYX__PC_GQA_POS].data = d.pos;
    assert_int_equal(check(&c, true, &run), ONYX_STATUS_INVALID_ARGUMENT);
    assert_int_equal(onyx__pc_gqa_input_shapes(NQ, true, d.in, &d.g, &run, d.msg, sizeof d.msg),
                     ONYX_STATUS_INVALID_ARGUMENT);
    assert_string_equal(c.msg, d.msg);
  }
}

static onyx__pc_gqa_attrs good_attrs(void) {
  return (onyx__pc_gqa_attrs){.nq = 8, .nkv = 2, .window = -1, .causal = 1};
}

static void attribute_refusals_name_the_attribute(void **state) {
  (void)state;
  char msg[256];
  onyx__pc_gqa_attrs a = good_attrs();
  assert_int_equal(onyx__pc_gqa_attrs_check(&a, msg, sizeof msg), ONYX_STATUS_OK);
  a.scale = 0.125f;
  a.softcap = 30.0f;
  a.window = 16;
  a.kv_layout = 1;
  assert_int_equal(onyx__pc_gqa_attrs_check(&a, msg, sizeof msg), ONYX_STATUS_OK);
  struct {
    int field;
    double value;
    const char *needle;
  } bad[] = {
      {0, 6, "num_heads (6) must be a positive multiple of kv_num_heads (4)"},
      {1, 0, "num_heads (8) must be a positive multiple of kv_num_heads (0)"},
      {2, 0, "local_window_size must be -1 or positive, got 0"},
      {2, -3, "local_window_size must be -1 or positive, got -3"},
      {3, 2, "causal must be 0 or 1, got 2"},
      {4, 0, "local_window_size must be -1 when causal is 0"},
      {5, 2, "kv_layout must be 0 (BNSH) or 1 (BSNH, seq-major), got 2"},
      {6, -1, "scale (-1) and softcap (0) must be finite and not negative"},
      {7, INFINITY, "must be finite and not negative"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    a = good_attrs();
    switch (bad[i].field) {
    case 0:
      a.nq = (int64_t)bad[i].value, a.nkv = 4;
      break;
    case 1:
      a.nkv = (int64_t)bad[i].value;
      break;
    case 2:
      a.window = (int64_t)bad[i].value;
      break;
    case 3:
      a.causal = (int64_t)bad[i].value;
      break;
    case 4:
      a.causal = 0, a.window = 8;
      break;
    case 5:
      a.kv_layout = (int64_t)bad[i].value;
      break;
    case 6:
      a.scale = (float)bad[i].value;
      break;
    default:
      a.softcap = (float)bad[i].value;
      break;
    }
    msg[0] = '\0';
    assert_int_equal(onyx__pc_gqa_attrs_check(&a, msg, sizeof msg), ONYX_STATUS_INVALID_MODEL);
    if (strstr(msg, bad[i].needle) == NULL) print_message("message: %s\n", msg);
    assert_non_null(strstr(msg, "GroupQueryAttention: "));
    assert_non_null(strstr(msg, bad[i].needle));
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(consistent_inputs_pass),
      cmocka_unit_test(each_refusal_names_the_input),
      cmocka_unit_test(rotary_inputs_only_with_rotary),
      cmocka_unit_test(shapes_only_reads_no_device_values),
      cmocka_unit_test(an_empty_rotary_cache),
      cmocka_unit_test(total_must_be_on_the_host),
      cmocka_unit_test(shapes_only_words_as_the_full_form),
      cmocka_unit_test(attribute_refusals_name_the_attribute),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
