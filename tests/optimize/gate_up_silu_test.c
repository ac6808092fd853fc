/*
 * The gate_up_silu pass (core/optimize/gate_up_silu.c) on synthetic MLPs:
 *
 *   g = x·Wg   u = x·Wu   s = Sigmoid(g)   a = Mul(g, s)   y = Mul(a, u)
 *
 * with MatMul or com.microsoft MatMulNBits. It fires (two nodes left: the merged
 * product and ai.onyx::SiluMul) in every node and operand order, and the outputs are
 * those of the unoptimized graph on fresh random inputs — bit for bit for float32
 * MatMul on the CPU. It leaves the MLP alone when an intermediate has another reader
 * or is a graph output, when K, the weights' types or the bits differ, when g_idx is
 * present, when a weight is not a constant, when the provider that runs the final Mul
 * has no SiluMul, and when the governor refuses the merged weights;
 * disable_optimizations = "gate_up_silu" turns it off.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "loader_test_util.h"
#include "onyx.h"
#include "pass_fixture.h"

enum { F32 = ONYX_DTYPE_FLOAT32, F16 = ONYX_DTYPE_FLOAT16, U8 = ONYX_DTYPE_UINT8, I32 = 6 };

/* ------------------------------------------------------------ fixtures */

/* A runtime with the CPU provider, after the Mul-only provider when `mulonly`; a host
 * budget of `host_bytes` when not 0. */
static onyx_runtime *runtime_budget(bool mulonly, uint64_t host_bytes) {
  char budget[64] = "";
  if (host_bytes)
    snprintf(budget, sizeof budget, "[governor]\nhost = %llu\n", (unsigned long long)host_bytes);
  char text[1024];
  snprintf(text, sizeof text, "%s%s[provider.cpu]\npath = %s\n", budget,
           mulonly ? "[provider.mulonly]\npath = " MUL_PROVIDER "\n" : "", CPU_PROVIDER);
  return fx_runtime_from(text);
}

static onyx_runtime *runtime_new(bool mulonly) { return runtime_budget(mulonly, 0); }

/* Random bytes (codes, packed zero points), or float16 ones in [-1, 1). */
static void raw_init(lt_arena *a, Onnx__GraphProto *g, const char *name, int32_t dtype, size_t rank,
                     const int64_t *dims) {
  Onnx__TensorProto *t = lt_tensor(a, name, dtype, rank, dims);
  size_t n = 1;
  for (size_t d = 0; d < rank; ++d) n *= (size_t)dims[d];
  size_t es = dtype == F16 ? 2 : 1;
  uint8_t *v = lt_alloc(a, n * es);
  for (size_t i = 0; i < n; ++i) {
    if (dtype == F16) {
      uint16_t h = (uint16_t)(0x3800u + (uint16_t)((fx_rng >> 33) & 0x3ffu)); /* [0.5, 1) */
      fx_frand();
      memcpy(v + 2 * i, &h, 2);
    } else {
      fx_frand();
      v[i] = (uint8_t)(fx_rng >> 40);
    }
  }
  lt_raw(a, t, v, n * es);
  lt_initializer(a, g, t);
}

static void int_attr(lt_arena *a, Onnx__NodeProto *n, const char *name, int64_t v) {
  Onnx__AttributeProto *at = lt_attr(a, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
  at->has_i = 1;
  at->i = v;
}

/* ------------------------------------------------------------ the MLP */

enum { K = 40, N = 24, ROWS = 3, BLOCK = 16 };

typedef enum extra_reader {
  EXTRA_NONE,
  EXTRA_GATE_OUTPUT, /* g is also a graph output */
  EXTRA_SIGMOID,     /* s is read by another node */
  EXTRA_UP,          /* u is read by another node */
  EXTRA_ACT_OUTPUT,  /* a is a graph output */
} extra_reader;

typedef struct mlp_opts {
  bool nbits;
  bool up_first;      /* up's product comes first in node order (mobius writes it later) */
  bool swap;          /* Mul(s, g) and Mul(u, a) */
  extra_reader extra; /* an intermediate someone else sees */
  int64_t k_up;       /* K of Wu (0: K) */
  bool up_f16;        /* Wu is float16 (MatMul) */
  bool up_input;      /* Wu is a graph input, not a constant */
  int bits_up;        /* MatMulNBits: up's bits (0: 4) */
  bool g_idx, zp, bias;
} mlp_opts;

/* One product x·W named `name` with output `out`; W's initializers are <name>.*. */
static void product(lt_arena *a, Onnx__ModelProto *m, const mlp_opts *o, bool up, const char *name,
                    const char *out) {
  Onnx__GraphProto *g = m->graph;
  char w[64], s[64], z[64], gi[64], b[64];
  snprintf(w, sizeof w, "%s.W", name);
  snprintf(s, sizeof s, "%s.scales", name);
  snprintf(z, sizeof z, "%s.zp", name);
  snprintf(gi, sizeof gi, "%s.g_idx", name);
  snprintf(b, sizeof b, "%s.bias", name);
  int64_t k = up && o->k_up ? o->k_up : K;
  if (!o->nbits) {
    if (up && o->up_input)
      lt_input(a, g, w, F32, 2, (int64_t[]){k, N});
    else if (up && o->up_f16)
      raw_init(a, g, w, F16, 2, (int64_t[]){k, N});
    else
      fx_float_init(a, g, w, 2, (int64_t[]){k, N}, 0.3f, 0.0f);
    lt_node(a, g, "MatMul", name, (const char *[]){"x", w, NULL}, (const char *[]){out, NULL});
    return;
  }
  int bits = up && o->bits_up ? o->bits_up : 4;
  int64_t blocks = (k + BLOCK - 1) / BLOCK, blob = BLOCK * bits / 8;
  raw_init(a, g, w, U8, 3, (int64_t[]){N, blocks, blob});
  fx_float_init(a, g, s, 2, (int64_t[]){N, blocks}, 0.02f, 0.0f);
  if (o->zp) raw_init(a, g, z, U8, 2, (int64_t[]){N, (blocks * bits + 7) / 8});
  if (o->g_idx) {
    Onnx__TensorProto *t = lt_tensor(a, gi, I32, 1, (int64_t[]){k});
    int32_t *v = lt_alloc(a, (size_t)k * sizeof *v);
    for (int64_t i = 0; i < k; ++i) v[i] = (int32_t)(i / BLOCK);
    lt_int32s(a, t, v, (size_t)k);
    lt_initializer(a, g, t);
  }
  if (o->bias) fx_float_init(a, g, b, 1, (int64_t[]){N}, 0.5f, 0.0f);
  const char *in[] = {"x", w, s, o->zp ? z : "", o->g_idx ? gi : "", o->bias ? b : "", NULL};
  if (!o->bias) in[o->g_idx ? 5 : o->zp ? 4 : 3] = NULL;
  Onnx__NodeProto *n = lt_node(a, g, "MatMulNBits", name, in, (const char *[]){out, NULL});
  n->domain = lt_str(a, "com.microsoft");
  int_attr(a, n, "K", k);
  int_attr(a, n, "N", N);
  int_attr(a, n, "bits", bits);
  int_attr(a, n, "block_size", BLOCK);
}

static Onnx__ModelProto *mlp_model(lt_arena *a, const mlp_opts *o) {
  Onnx__ModelProto *m = lt_model(a, 17);
  if (o->nbits) lt_opset(a, m, "com.microsoft", 1);
  Onnx__GraphProto *g = m->graph;
  lt_input(a, g, "x", F32, 2, (int64_t[]){ROWS, K});
  if (o->up_first) product(a, m, o, true, "up", "u");
  product(a, m, o, false, "gate", "g");
  lt_node(a, g, "Sigmoid", "sig", (const char *[]){"g", NULL}, (const char *[]){"s", NULL});
  const char *act_in[] = {o->swap ? "s" : "g", o->swap ? "g" : "s", NULL};
  lt_node(a, g, "Mul", "act", act_in, (const char *[]){"a", NULL});
  if (!o->up_first) product(a, m, o, true, "up", "u");
  const char *fin_in[] = {o->swap ? "u" : "a", o->swap ? "a" : "u", NULL};
  lt_node(a, g, "Mul", "fin", fin_in, (const char *[]){"y", NULL});
  lt_output(a, g, "y", F32, 2, (int64_t[]){ROWS, N});
  if (o->extra == EXTRA_GATE_OUTPUT) lt_output(a, g, "g", F32, 2, (int64_t[]){ROWS, N});
  if (o->extra == EXTRA_ACT_OUTPUT) lt_output(a, g, "a", F32, 2, (int64_t[]){ROWS, N});
  const char *other = o->extra == EXTRA_SIGMOID ? "s" : o->extra == EXTRA_UP ? "u" : NULL;
  if (other) {
    lt_node(a, g, "Neg", "other", (const char *[]){other, NULL}, (const char *[]){"z", NULL});
    lt_output(a, g, "z", F32, 2, (int64_t[]){ROWS, N});
  }
  return m;
}

/* The pass fired: the merged product and SiluMul, both on the CPU, the outputs as
 * before, the original weights freed. */
static void expect_fused(const mlp_opts *o, uint64_t weight_bytes) {
  lt_arena a = {0};
  onyx_runtime *rt = runtime_new(false);
  Onnx__ModelProto *m = mlp_model(&a, o);
  onyx_session *opt = fx_session(rt, &a, m, NULL);
  onyx_session *plain = fx_session(rt, &a, m, "gate_up_silu");
  assert_int_equal(onyx_session_node_count(plain), 5);
  assert_int_equal(onyx_session_node_count(opt), 2);
  assert_string_equal(onyx_session_node_op(opt, 0), o->nbits ? "MatMulNBits" : "MatMul");
  assert_string_equal(onyx_session_node_op(opt, 1), "SiluMul");
  assert_string_equal(onyx_session_node_provider(opt, 1), "cpu");
  if (o->nbits) assert_int_equal(onyx_session_node_attr_int(opt, 0, "N", 0), 2 * N);
  onyx_optimization_stats st = fx_pass_stats(opt, "gate_up_silu");
  assert_true(st.ran);
  assert_int_equal(st.nodes_removed, 3);
  assert_int_equal(st.nodes_skipped, 0);
  assert_int_equal(st.bytes_added, weight_bytes);
  assert_int_equal(st.bytes_released, weight_bytes);
  assert_false(fx_pass_stats(plain, "gate_up_silu").ran);
  fx_expect_close_outputs(opt, plain, o->nbits ? 1e-5f : 0.0f);
  onyx_session_destroy(opt);
  onyx_session_destroy(plain);
  onyx_runtime_destroy(rt);
  lt_arena_free(&a);
}

/* The pass left the MLP alone (and said so when `counted`). */
static void expect_left(const mlp_opts *o, bool mulonly, bool counted) {
  lt_arena a = {0};
  onyx_runtime *rt = runtime_new(mulonly);
  Onnx__ModelProto *m = mlp_model(&a, o);
  onyx_session *s = fx_session(rt, &a, m, NULL);
  size_t nodes = 5 + (o->extra == EXTRA_SIGMOID || o->extra == EXTRA_UP);
  assert_int_equal(onyx_session_node_count(s), nodes);
  for (size_t i = 0; i < nodes; ++i) assert_string_not_equal(onyx_session_node_op(s, i), "SiluMul");
  onyx_optimization_stats st = fx_pass_stats(s, "gate_up_silu");
  assert_true(st.ran);
  assert_int_equal(st.nodes_removed, 0);
  assert_int_equal(st.bytes_added, 0);
  assert_int_equal(st.bytes_released, 0);
  assert_int_equal(st.nodes_skipped, counted ? 1 : 0);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
  lt_arena_free(&a);
}

/* ------------------------------------------------------------ cases */

static void fires_on_matmul_in_every_order(void **state) {
  (void)state;
  const uint64_t w = 2 * K * N * sizeof(float);
  for (int up_first = 0; up_first < 2; ++up_first)
    for (int swap = 0; swap < 2; ++swap)
      expect_fused(&(mlp_opts){.up_first = up_first, .swap = swap}, w);
}

static void fires_on_matmul_nbits(void **state) {
  (void)state;
  const uint64_t blocks = (K + BLOCK - 1) / BLOCK;
  const uint64_t b = N * blocks * BLOCK / 2, s = N * blocks * sizeof(float),
                 z = N * ((blocks * 4 + 7) / 8), bias = N * sizeof(float);
  expect_fused(&(mlp_opts){.nbits = true}, 2 * (b + s));
  expect_fused(&(mlp_opts){.nbits = true, .zp = true, .up_first = true}, 2 * (b + s + z));
  expect_fused(&(mlp_opts){.nbits = true, .zp = true, .bias = true, .swap = true},
               2 * (b + s + z + bias));
}

static void left_when_an_intermediate_is_seen(void **state) {
  (void)state;
  for (int nbits = 0; nbits < 2; ++nbits) {
    expect_left(&(mlp_opts){.nbits = nbits, .extra = EXTRA_GATE_OUTPUT}, false, true);
    expect_left(&(mlp_opts){.nbits = nbits, .extra = EXTRA_SIGMOID}, false, true);
    expect_left(&(mlp_opts){.nbits = nbits, .extra = EXTRA_UP}, false, true);
    expect_left(&(mlp_opts){.nbits = nbits, .extra = EXTRA_ACT_OUTPUT}, false, true);
  }
}

static void left_when_the_weights_do_not_concatenate(void **state) {
  (void)state;
  expect_left(&(mlp_opts){.k_up = K + 8}, false, true);               /* K differs */
  expect_left(&(mlp_opts){.up_f16 = true}, false, true);              /* types differ */
  expect_left(&(mlp_opts){.up_input = true}, false, true);            /* not a constant */
  expect_left(&(mlp_opts){.nbits = true, .bits_up = 8}, false, true); /* bits differ */
  expect_left(&(mlp_opts){.nbits = true, .k_up = K + 16}, false, true);
  expect_left(&(mlp_opts){.nbits = true, .g_idx = true}, false, true);
}

static void left_where_the_mul_runs_without_silu_mul(void **state) {
  (void)state;
  expect_left(&(mlp_opts){0}, true, true);
}

/* The merged weights are booked before they exist: a budget that holds the model but
 * not a second copy of gate and up leaves the MLP as it was, and the session works. */
static void left_when_the_governor_refuses_the_merge(void **state) {
  (void)state;
  lt_arena a = {0};
  const uint64_t w = 2 * K * N * sizeof(float);
  onyx_runtime *rt = runtime_budget(false, w + w / 2);
  Onnx__ModelProto *m = mlp_model(&a, &(mlp_opts){0});
  onyx_session *s = fx_session(rt, &a, m, NULL);
  assert_int_equal(onyx_session_node_count(s), 5);
  onyx_optimization_stats st = fx_pass_stats(s, "gate_up_silu");
  assert_int_equal(st.nodes_removed, 0);
  assert_int_equal(st.nodes_skipped, 1);
  assert_int_equal(st.bytes_added, 0);
  onyx_session_destroy(s);
  uint64_t used[ONYX_REQUESTER_COUNT_];
  onyx_runtime_memory_usage(rt, used, NULL);
  assert_int_equal(used[ONYX_REQUESTER_WEIGHTS], 0);
  onyx_runtime_destroy(rt);
  lt_arena_free(&a);
}

static void switches_off_by_name(void **state) {
  (void)state;
  lt_arena a = {0};
  onyx_runtime *rt = runtime_new(false);
  Onnx__ModelProto *m = mlp_model(&a, &(mlp_opts){0});
  onyx_session *s = fx_session(rt, &a, m, "constant_folding, gate_up_silu");
  assert_int_equal(onyx_session_node_count(s), 5);
  assert_false(fx_pass_stats(s, "gate_up_silu").ran);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
  lt_arena_free(&a);
}

int main(void) {
  fx_seed("gate_up_silu_test", "GATE_UP_SILU_SEED");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(fires_on_matmul_in_every_order),
      cmocka_unit_test(fires_on_matmul_nbits),
      cmocka_unit_test(left_when_an_intermediate_is_seen),
      cmocka_unit_test(left_when_the_weights_do_not_concatenate),
      cmocka_unit_test(left_where_the_mul_runs_without_silu_mul),
      cmocka_unit_test(left_when_the_governor_refuses_the_merge),
      cmocka_unit_test(switches_off_by_name),
  };
  return cmocka_run_group_tests_name("gate_up_silu", tests, NULL, NULL);
}
