/*
 * providers/common's helpers that the CPU and CUDA providers now both rely on: the
 * attribute reads that word a wrong type (pc_attr.c), ONNX Attention's attribute and
 * input checks beside the geometry (attn_params.c, attn_onnx_inputs.c), and the
 * entries' negotiation and kernel registration (pc_factory.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "attn_params.h"
#include "pc_attr.h"
#include "pc_factory.h"

/* ------------------------------------------------------------------ attributes */

static void attribute_reads_word_a_wrong_type(void **state) {
  (void)state;
  onyx_attr attrs[] = {
      {.name = "num_heads", .type = ONYX_ATTR_INT, .i = 8},
      {.name = "scale", .type = ONYX_ATTR_FLOAT, .f = 0.5f},
      {.name = "causal", .type = ONYX_ATTR_FLOAT, .f = 1.0f},
      {.name = "k_quant_type", .type = ONYX_ATTR_STRING, .s = "NONE", .s_len = 4},
      {.name = "v_quant_type", .type = ONYX_ATTR_STRING, .s = "NONEX", .s_len = 5},
      {.name = "window", .type = ONYX_ATTR_INTS},
  };
  onyx_node_info node = {.op_type = "GroupQueryAttention",
                         .attrs = attrs,
                         .attr_count = sizeof attrs / sizeof attrs[0]};
  char msg[128] = "";
  int64_t i = -7;
  float f = -7.0f;
  assert_int_equal(onyx__pc_attr_read_int(&node, "num_heads", 0, &i, msg, sizeof msg),
                   ONYX_STATUS_OK);
  assert_int_equal(i, 8);
  assert_int_equal(onyx__pc_attr_read_int(&node, "absent", 3, &i, msg, sizeof msg), ONYX_STATUS_OK);
  assert_int_equal(i, 3);
  assert_int_equal(onyx__pc_attr_read_float(&node, "scale", 0.0f, &f, msg, sizeof msg),
                   ONYX_STATUS_OK);
  assert_true(f == 0.5f);
  assert_int_equal(onyx__pc_attr_read_int(&node, "causal", 1, &i, msg, sizeof msg),
                   ONYX_STATUS_INVALID_ARGUMENT);
  assert_int_equal(i, 3); /* untouched */
  assert_string_equal(msg, "GroupQueryAttention: attribute 'causal' must be INT, got FLOAT");
  assert_int_equal(onyx__pc_attr_read_float(&node, "window", 0.0f, &f, msg, sizeof msg),
                   ONYX_STATUS_INVALID_ARGUMENT);
  assert_string_equal(msg, "GroupQueryAttention: attribute 'window' must be FLOAT, got INTS");
  /* No message buffer: the status alone. */
  assert_int_equal(onyx__pc_attr_read_int(&node, "causal", 1, &i, NULL, 0),
                   ONYX_STATUS_INVALID_ARGUMENT);
  assert_true(onyx__pc_attr_string_is(&node, "k_quant_type", "NONE"));
  assert_false(onyx__pc_attr_string_is(&node, "v_quant_type", "NONE")); /* by length */
  assert_true(onyx__pc_attr_string_is(&node, "absent", "NONE"));
  assert_false(onyx__pc_attr_string_is(&node, "num_heads", "NONE")); /* another type */
}

/* ------------------------------------------------------------------ Attention inputs */

enum { B = 2, NQ = 4, NKV = 2, SQ = 3, SKV = 5, HD = 8 };

typedef struct at_case {
  onyx_tensor t[ONYX__PC_AT_INPUTS];
  const onyx_tensor *in[ONYX__PC_AT_INPUTS];
  onyx__pc_attn_geom g;
  int64_t nonpad[B];
  char msg[256];
} at_case;

static onyx_tensor f32(uint32_t rank, int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
  return (onyx_tensor){.dtype = ONYX_DTYPE_FLOAT32, .rank = rank, .dims = {d0, d1, d2, d3}};
}

/* 4-D Q, K, V, no past: T = SKV keys. */
static void at_make(at_case *c) {
  memset(c, 0, sizeof *c);
  c->t[ONYX__PC_AT_Q] = f32(4, B, NQ, SQ, HD);
  c->t[ONYX__PC_AT_K] = f32(4, B, NKV, SKV, HD);
  c->t[ONYX__PC_AT_V] = f32(4, B, NKV, SKV, HD);
  for (int i = 0; i < 3; ++i) c->in[i] = &c->t[i];
  c->g = (onyx__pc_attn_geom){.four_d = true,
                              .batch = B,
                              .nq = NQ,
                              .nkv = NKV,
                              .sq = SQ,
                              .skv = SKV,
                              .hk = HD,
                              .hv = HD,
                              .past = 0,
                              .total = SKV};
  c->nonpad[0] = SKV;
  c->nonpad[1] = 2;
}

static void at_set(at_case *c, int slot, onyx_tensor t) {
  c->t[slot] = t;
  c->in[slot] = &c->t[slot];
}

static onyx_status at_check(at_case *c, int64_t opset, bool values, onyx__pc_attn_mask *m) {
  return onyx__pc_attn_inputs(opset, c->in, &c->g, values, m, c->msg, sizeof c->msg);
}

static void attention_mask_broadcasts(void **state) {
  (void)state;
  at_case c;
  onyx__pc_attn_mask m;
  at_make(&c);
  assert_int_equal(at_check(&c, 23, true, &m), ONYX_STATUS_OK);
  assert_int_equal(m.js, 1);
  assert_true(m.len == INT64_MAX);
  /* (Sq, T): shared by every batch row and head. */
  at_set(&c, ONYX__PC_AT_MASK, f32(2, SQ, SKV, 0, 0));
  assert_int_equal(at_check(&c, 23, true, &m), ONYX_STATUS_OK);
  assert_true(m.bs == 0 && m.hs == 0 && m.ss == SKV && m.js == 1 && m.len == INT64_MAX);
  /* (B, Nq, Sq, T) bool. */
  at_set(&c, ONYX__PC_AT_MASK, f32(4, B, NQ, SQ, SKV));
  c.t[ONYX__PC_AT_MASK].dtype = ONYX_DTYPE_BOOL;
  assert_int_equal(at_check(&c, 23, true, &m), ONYX_STATUS_OK);
  assert_true(m.bs == NQ * SQ * SKV && m.hs == SQ * SKV && m.ss == SKV && m.js == 1);
  /* (B, 1, 1, 1): broadcast along the keys. */
  at_set(&c, ONYX__PC_AT_MASK, f32(4, B, 1, 1, 1));
  assert_int_equal(at_check(&c, 23, true, &m), ONYX_STATUS_OK);
  assert_true(m.bs == 1 && m.hs == 0 && m.ss == 0 && m.js == 0);
  /* Opset 24: a shorter last axis pads the keys past it. */
  at_set(&c, ONYX__PC_AT_MASK, f32(2, SQ, SKV - 2, 0, 0));
  assert_int_equal(at_check(&c, 24, true, &m), ONYX_STATUS_OK);
  assert_int_equal(m.len, SKV - 2);
  assert_int_equal(at_check(&c, 23, true, &m), ONYX_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(c.msg, "attn_mask [3,3]: its last axis must be the 5 keys"));
}

static void attention_input_refusals(void **state) {
  (void)state;
  at_case c;
  onyx__pc_attn_mask m;
  at_make(&c);
  at_set(&c, ONYX__PC_AT_MASK, f32(2, SQ, SKV, 0, 0));
  c.t[ONYX__PC_AT_MASK].dtype = ONYX_DTYPE_INT32;
  assert_int_equal(at_check(&c, 23, true, &m), ONYX_STATUS_UNSUPPORTED);
  assert_non_null(strstr(c.msg, "attn_mask has type int32; bool, float32, float16 or bfloat16"));
  at_make(&c);
  at_set(&c, ONYX__PC_AT_MASK, (onyx_tensor){.dtype = ONYX_DTYPE_FLOAT32, .rank = 0});
  assert_int_equal(at_check(&c, 23, true, &m), ONYX_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(c.msg, "attn_mask must have rank 1 to 4, got []"));
  at_make(&c);
  at_set(&c, ONYX__PC_AT_MASK, f32(3, NQ + 1, SQ, SKV, 0));
  assert_int_equal(at_check(&c, 23, true, &m), ONYX_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(c.msg, "attn_mask [5,3,5] does not broadcast to (2, 4, 3, 5)"));
  /* nonpad_kv_seqlen. */
  at_make(&c);
  at_set(&c, ONYX__PC_AT_NONPAD,
         (onyx_tensor){.dtype = ONYX_DTYPE_INT64, .rank = 1, .dims = {B}, .data = c.nonpad});
  assert_int_equal(at_check(&c, 24, true, &m), ONYX_STATUS_OK);
  assert_int_equal(at_check(&c, 23, true, &m), ONYX_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(c.msg, "nonpad_kv_seqlen (input 6) needs opset 24, the model uses 23"));
  c.nonpad[1] = SKV + 1;
  assert_int_equal(at_check(&c, 24, true, &m), ONYX_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(c.msg, "nonpad_kv_seqlen[1] = 6 is outside [0, 5]"));
  /* On a device: values not read (this address would crash), shapes still checked. */
  c.t[ONYX__PC_AT_NONPAD].device = ONYX_DEVICE_CUDA;
  c.t[ONYX__PC_AT_NONPAD].data = (void *)(uintptr_t)64;
  assert_int_equal(at_check(&c, 24, false, &m), ONYX_STATUS_OK);
  c.t[ONYX__PC_AT_NONPAD].dtype = ONYX_DTYPE_INT32;
  assert_int_equal(at_check(&c, 24, false, &m), ONYX_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(c.msg, "nonpad_kv_seqlen must be int64 (2), got int32 [2]"));
  c.t[ONYX__PC_AT_NONPAD].dtype = ONYX_DTYPE_INT64;
  c.g.past = 2;
  assert_int_equal(at_check(&c, 24, false, &m), ONYX_STATUS_INVALID_ARGUMENT);
  assert_non_null(strstr(c.msg, "nonpad_kv_seqlen cannot be combined with past_key/past_value"));
}

static void attention_types_name_the_kernel(void **state) {
  (void)state;
  at_case c;
  at_make(&c);
  assert_int_equal(onyx__pc_attn_same_types(c.in, "CUDA kernel", c.msg, sizeof c.msg),
                   ONYX_STATUS_OK);
  at_set(&c, ONYX__PC_AT_PAST_V, f32(4, B, NKV, 2, HD));
  c.t[ONYX__PC_AT_PAST_V].dtype = ONYX_DTYPE_FLOAT16;
  assert_int_equal(onyx__pc_attn_same_types(c.in, "CUDA kernel", c.msg, sizeof c.msg),
                   ONYX_STATUS_UNSUPPORTED);
  assert_string_equal(c.msg, "past_value has type float16; the CUDA kernel needs Q, K, V and the "
                             "past in one type (float32)");
}

static void attention_attribute_refusals(void **state) {
  (void)state;
  char msg[256];
  onyx__pc_attn_attrs a = {.causal = 1, .q_heads = 8, .kv_heads = 2, .scale = 0.5f};
  assert_int_equal(onyx__pc_attn_attrs_check(&a, msg, sizeof msg), ONYX_STATUS_OK);
  a = (onyx__pc_attn_attrs){0}; /* 4-D inputs: no head counts */
  assert_int_equal(onyx__pc_attn_attrs_check(&a, msg, sizeof msg), ONYX_STATUS_OK);
  a.causal = 2;
  assert_int_equal(onyx__pc_attn_attrs_check(&a, msg, sizeof msg), ONYX_STATUS_INVALID_MODEL);
  assert_string_equal(msg, "Attention: is_causal must be 0 or 1, got 2");
  a = (onyx__pc_attn_attrs){.q_heads = 6, .kv_heads = 4};
  assert_int_equal(onyx__pc_attn_attrs_check(&a, msg, sizeof msg), ONYX_STATUS_INVALID_MODEL);
  assert_string_equal(msg, "Attention: q_num_heads (6) must be a multiple of kv_num_heads (4)");
  a = (onyx__pc_attn_attrs){.kv_heads = -1};
  assert_int_equal(onyx__pc_attn_attrs_check(&a, msg, sizeof msg), ONYX_STATUS_INVALID_MODEL);
  a = (onyx__pc_attn_attrs){.softcap = -2.0f};
  assert_int_equal(onyx__pc_attn_attrs_check(&a, msg, sizeof msg), ONYX_STATUS_INVALID_MODEL);
  assert_string_equal(msg, "Attention: scale (0) and softcap (-2) must be finite and not negative");
}

/* ------------------------------------------------------------------ factory */

static const onyx_provider_factory test_factory = {
    .struct_size = sizeof(onyx_provider_factory), .abi_version = ONYX_ABI_V3, .name = "test"};
static const onyx_provider_table test_table = {
    .struct_size = sizeof(onyx_provider_table), .abi_version = ONYX_ABI_VERSION, .name = "test"};

static void entries_negotiate(void **state) {
  (void)state;
  uint32_t abi = 0;
  const onyx_provider_factory *f = NULL;
  assert_int_equal(onyx__pc_factory_negotiate(&test_factory, 3, &abi, &f), ONYX_STATUS_OK);
  assert_int_equal(abi, 3);
  assert_ptr_equal(f, &test_factory);
  f = NULL;
  assert_int_equal(onyx__pc_factory_negotiate(&test_factory, 7, &abi, &f), ONYX_STATUS_OK);
  assert_ptr_equal(f, &test_factory);
  f = NULL;
  abi = 0;
  assert_int_equal(onyx__pc_factory_negotiate(&test_factory, 2, &abi, &f),
                   ONYX_STATUS_ABI_MISMATCH);
  assert_int_equal(abi, 3); /* what it would need */
  assert_null(f);
  assert_int_equal(onyx__pc_factory_negotiate(&test_factory, 3, NULL, &f),
                   ONYX_STATUS_INVALID_ARGUMENT);
  assert_int_equal(onyx__pc_factory_negotiate(&test_factory, 3, &abi, NULL),
                   ONYX_STATUS_INVALID_ARGUMENT);
  const onyx_provider_table *t = NULL;
  assert_int_equal(onyx__pc_table_negotiate(&test_table, ONYX_ABI_VERSION, &abi, &t),
                   ONYX_STATUS_OK);
  assert_int_equal(abi, ONYX_ABI_VERSION);
  assert_ptr_equal(t, &test_table);
  t = NULL;
  assert_int_equal(onyx__pc_table_negotiate(&test_table, ONYX_ABI_VERSION - 1, &abi, &t),
                   ONYX_STATUS_ABI_MISMATCH);
  assert_null(t);
  assert_int_equal(onyx__pc_table_negotiate(&test_table, 2, NULL, &t),
                   ONYX_STATUS_INVALID_ARGUMENT);
}

/* A registry that refuses the table at index `refuse` (-1: none), and a sink. */
typedef struct test_reg {
  onyx_kernel_registry reg;
  int added, refuse;
  const onyx_kernel_table *seen[4];
} test_reg;

static onyx_status test_add_table(onyx_kernel_registry *reg, const onyx_kernel_table *table) {
  test_reg *r = (test_reg *)reg;
  if (r->added == r->refuse) return ONYX_STATUS_INVALID_ARGUMENT;
  r->seen[r->added++] = table;
  return ONYX_STATUS_OK;
}

typedef struct test_sink {
  onyx_sink sink;
  char msg[256];
} test_sink;

static void test_set_error(onyx_sink *sink, const char *fmt, ...) {
  test_sink *s = (test_sink *)sink;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->msg, sizeof s->msg, fmt, ap);
  va_end(ap);
}

static void tables_are_added_in_order(void **state) {
  (void)state;
  static const onyx_kernel_table k0 = {.op_type = "Add"}, k1 = {.op_type = "Mul"},
                                 k2 = {.op_type = "Gemm"};
  static const onyx_kernel_table *const tables[] = {&k0, &k1, &k2};
  test_reg r = {.reg = {.add_table = test_add_table}, .refuse = -1};
  test_sink s = {.sink = {.set_error = test_set_error}};
  assert_int_equal(onyx__pc_add_tables(&r.reg, tables, 3, "cpu", &s.sink), ONYX_STATUS_OK);
  assert_int_equal(r.added, 3);
  assert_ptr_equal(r.seen[2], &k2);
  assert_string_equal(s.msg, "");
  r = (test_reg){.reg = {.add_table = test_add_table}, .refuse = 1};
  assert_int_equal(onyx__pc_add_tables(&r.reg, tables, 3, "cuda: device 1", &s.sink),
                   ONYX_STATUS_INVALID_ARGUMENT);
  assert_int_equal(r.added, 1); /* nothing after the refused one */
  assert_string_equal(s.msg, "cuda: device 1: kernel Mul was refused");
}

/* A registry that records tables and definitions in one sequence. */
typedef struct mixed_reg {
  onyx_kernel_registry reg;
  int added;
  const void *seen[8];
} mixed_reg;

static onyx_status mixed_add_table(onyx_kernel_registry *reg, const onyx_kernel_table *table) {
  mixed_reg *r = (mixed_reg *)reg;
  r->seen[r->added++] = table;
  return ONYX_STATUS_OK;
}

static onyx_status mixed_add(onyx_kernel_registry *reg, const onyx_kernel_def *def) {
  mixed_reg *r = (mixed_reg *)reg;
  if (!strcmp(def->op_type, "Refused")) return ONYX_STATUS_INVALID_ARGUMENT;
  r->seen[r->added++] = def;
  return ONYX_STATUS_OK;
}

static void definitions_replace_their_tables(void **state) {
  (void)state;
  static const onyx_kernel_table add = {.domain = "", .op_type = "Add", .since_opset = 7},
                                 gqa = {.domain = "com.microsoft",
                                        .op_type = "GroupQueryAttention",
                                        .since_opset = 1},
                                 at1 = {.domain = "", .op_type = "Attention", .since_opset = 1};
  static const onyx_kernel_table *const tables[] = {&add, &gqa, &at1};
  /* Replaces gqa; at23 has another opset than at1, so both are offered. */
  static const onyx_kernel_def gqa3 = {.domain = "com.microsoft",
                                       .op_type = "GroupQueryAttention",
                                       .since_opset = 1},
                               at23 = {.domain = "", .op_type = "Attention", .since_opset = 23},
                               refused = {.domain = "x", .op_type = "Refused"};
  const onyx_kernel_def *defs[] = {&at23, &gqa3};
  mixed_reg r = {.reg = {.add = mixed_add, .add_table = mixed_add_table}};
  test_sink s = {.sink = {.set_error = test_set_error}};
  assert_int_equal(onyx__pc_add_kernels(&r.reg, tables, 3, defs, 2, "cpu", &s.sink),
                   ONYX_STATUS_OK);
  assert_int_equal(r.added, 4);
  assert_ptr_equal(r.seen[0], &add);
  assert_ptr_equal(r.seen[1], &gqa3); /* in the table's place */
  assert_ptr_equal(r.seen[2], &at1);
  assert_ptr_equal(r.seen[3], &at23); /* named by no table: after them */
  assert_string_equal(s.msg, "");
  defs[0] = &refused;
  r = (mixed_reg){.reg = {.add = mixed_add, .add_table = mixed_add_table}};
  assert_int_equal(onyx__pc_add_kernels(&r.reg, tables, 3, defs, 2, "cuda: device 0", &s.sink),
                   ONYX_STATUS_INVALID_ARGUMENT);
  assert_int_equal(r.added, 3);
  assert_string_equal(s.msg, "cuda: device 0: kernel Refused was refused");
}

static bool declines_rank(const onyx_node_info *node, char *reason, size_t cap) {
  (void)node;
  snprintf(reason, cap, "Picky: rank 3 is not taken");
  return false;
}

static onyx_status create_fails(void *provider_state, const onyx_node_info *node, void **out,
                                char *err, size_t cap) {
  (void)node;
  *out = provider_state;
  snprintf(err, cap, "Picky: attribute k must be positive, got -1");
  return ONYX_STATUS_INVALID_MODEL;
}

static bool takes_it(const onyx_node_info *node, char *reason, size_t cap) {
  (void)node;
  (void)reason;
  (void)cap;
  return true;
}

/* A definition's create and supports over the v2 ones: status kept, reason to the sink. */
static void v2_callbacks_speak_through_the_sink(void **state) {
  (void)state;
  test_sink s = {.sink = {.set_error = test_set_error}};
  onyx_node_info node = {0};
  assert_int_equal(onyx__pc_supports_via_v2(takes_it, &node, &s.sink), ONYX_STATUS_OK);
  assert_string_equal(s.msg, "");
  assert_int_equal(onyx__pc_supports_via_v2(declines_rank, &node, &s.sink),
                   ONYX_STATUS_UNSUPPORTED);
  assert_string_equal(s.msg, "Picky: rank 3 is not taken");
  void *out = NULL;
  int instance = 0;
  assert_int_equal(onyx__pc_create_via_v2(create_fails, &instance, &node, &out, &s.sink),
                   ONYX_STATUS_INVALID_MODEL);
  assert_ptr_equal(out, &instance); /* the instance reached the v2 create */
  assert_string_equal(s.msg, "Picky: attribute k must be positive, got -1");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(attribute_reads_word_a_wrong_type),
      cmocka_unit_test(attention_mask_broadcasts),
      cmocka_unit_test(attention_input_refusals),
      cmocka_unit_test(attention_types_name_the_kernel),
      cmocka_unit_test(attention_attribute_refusals),
      cmocka_unit_test(entries_negotiate),
      cmocka_unit_test(tables_are_added_in_order),
      cmocka_unit_test(definitions_replace_their_tables),
      cmocka_unit_test(v2_callbacks_speak_through_the_sink),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
