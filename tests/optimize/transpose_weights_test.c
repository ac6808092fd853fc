/*
 * The transpose_weights pass (core/optimize/transpose_weights.c) on one product at a
 * time — MatMul, ai.onyx::RMSNormMatMul, ai.onyx::SiluMulMatMul — with a constant
 * 16-bit W of random bits. With a provider that takes transB = 1 (transb_provider.c,
 * placed before the CPU provider) it fires: MatMul becomes com.microsoft::FusedMatMul
 * (alpha 1, transB 1), the fused ops gain transB = 1, W's name holds exactly W^T as
 * [N, K], the original is released as "W/KN", the ledger adds and releases W's bytes
 * (net zero, booked: the peak holds both copies) and runs give the reference outputs.
 * It stays off on a CPU-only runtime (the CPU kernels decline transB = 1), when W has
 * two readers, is a graph output, is float32, is not a matrix, or K or N is not a
 * multiple of 8; a governor that refuses the copy leaves that node as it was and the
 * next one still fires; disable_optimizations = "transpose_weights" turns it off.
 *
 * Reads the session's graph (session_impl.h), so it links the core statically.
 * TRANSPOSE_WEIGHTS_SEED repeats a run's random bits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pass_fixture.h"
#include "session_impl.h"

enum { F16 = ONYX_DTYPE_FLOAT16, BF16 = ONYX_DTYPE_BFLOAT16, F32 = ONYX_DTYPE_FLOAT32 };
enum { K = 24, N = 40, ROWS = 3 };

typedef enum product { P_MATMUL, P_NORM, P_SILU } product;

typedef struct tw_opts {
  product p;
  uint32_t dtype; /* 0: float16 */
  int64_t k, n;   /* 0: K, N */
  bool w_rank3;   /* W is [1, K, N] */
  bool w_output;  /* W is also a graph output */
  bool w_shared;  /* a MatMul reads W too */
} tw_opts;

/* A model built from tw_opts and what the checks need to know about it. */
typedef struct tw_model {
  Onnx__ModelProto *m;
  product p;
  uint32_t dtype;
  int64_t k, n;
  uint16_t *w;         /* W's bits, [K, N] (16-bit types; arena-owned) */
  uint64_t w_bytes;    /* W's size */
  uint64_t init_bytes; /* every initializer's */
} tw_model;

static uint16_t bits16(void) { return (uint16_t)(fx_next() >> 24); }

static size_t numel(size_t rank, const int64_t *dims) {
  size_t count = 1;
  for (size_t d = 0; d < rank; ++d) count *= (size_t)dims[d];
  return count;
}

/* An initializer of random bits (16-bit types) or random floats; returns its 16-bit
 * data (NULL for float32) and adds its bytes to *bytes. */
static uint16_t *init_random(lt_arena *a, Onnx__GraphProto *g, const char *name, uint32_t dtype,
                             size_t rank, const int64_t *dims, uint64_t *bytes) {
  size_t count = numel(rank, dims);
  *bytes += count * onyx_dtype_size(dtype);
  if (dtype == F32) {
    fx_float_init(a, g, name, rank, dims, 0.5f, 0.0f);
    return NULL;
  }
  uint16_t *v = lt_alloc(a, count * sizeof *v);
  for (size_t i = 0; i < count; ++i) v[i] = bits16();
  Onnx__TensorProto *t = lt_tensor(a, name, (int32_t)dtype, rank, dims);
  lt_raw(a, t, v, count * sizeof *v);
  lt_initializer(a, g, t);
  return v;
}

static tw_model build(lt_arena *a, const tw_opts *o) {
  tw_model t = {.p = o->p, .dtype = o->dtype ? o->dtype : F16};
  t.k = o->k ? o->k : K;
  t.n = o->n ? o->n : N;
  const int32_t d = (int32_t)t.dtype;
  t.m = lt_model(a, 17);
  lt_opset(a, t.m, "ai.onyx", 1);
  Onnx__GraphProto *g = t.m->graph;
  const int64_t wd3[3] = {1, t.k, t.n};
  t.w = init_random(a, g, "W", t.dtype, o->w_rank3 ? 3 : 2, o->w_rank3 ? wd3 : wd3 + 1, &t.w_bytes);
  t.init_bytes = t.w_bytes;
  Onnx__NodeProto *node = NULL;
  if (o->p == P_MATMUL) {
    lt_input(a, g, "x", d, 2, (int64_t[]){ROWS, t.k});
    node = lt_node(a, g, "MatMul", "prod", (const char *[]){"x", "W", NULL},
                   (const char *[]){"y", NULL});
  } else if (o->p == P_NORM) {
    lt_input(a, g, "x", d, 2, (int64_t[]){ROWS, t.k});
    lt_input(a, g, "skip", d, 2, (int64_t[]){ROWS, t.k});
    init_random(a, g, "gamma", t.dtype, 1, (int64_t[]){t.k}, &t.init_bytes);
    node = lt_node(a, g, "RMSNormMatMul", "prod", (const char *[]){"x", "skip", "gamma", "W", NULL},
                   (const char *[]){"y", "s", NULL});
    Onnx__AttributeProto *eps =
        lt_attr(a, node, "epsilon", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    eps->has_f = 1;
    eps->f = 1e-6f;
  } else {
    lt_input(a, g, "gu", d, 2, (int64_t[]){ROWS, 2 * t.k});
    node = lt_node(a, g, "SiluMulMatMul", "prod", (const char *[]){"gu", "W", NULL},
                   (const char *[]){"y", NULL});
  }
  if (o->p != P_MATMUL) node->domain = lt_str(a, "ai.onyx");
  lt_output(a, g, "y", d, -1, NULL);
  if (o->p == P_NORM) lt_output(a, g, "s", d, 2, (int64_t[]){ROWS, t.k});
  if (o->w_shared) {
    lt_input(a, g, "x2", d, 2, (int64_t[]){ROWS, t.k});
    lt_node(a, g, "MatMul", "other", (const char *[]){"x2", "W", NULL},
            (const char *[]){"y2", NULL});
    lt_output(a, g, "y2", d, -1, NULL);
  }
  if (o->w_output) lt_output(a, g, "W", d, 2, wd3 + 1);
  return t;
}

/* ------------------------------------------------------------ runtimes */

/* The transb provider first, the CPU provider as fallback; weights capped at
 * `weights_cap` bytes when not 0. */
static onyx_runtime *runtime_transb(uint64_t weights_cap) {
  char ini[2048], cap[128] = "";
  if (weights_cap)
    snprintf(cap, sizeof cap, "[governor]\nrequester.weights = %llu\n",
             (unsigned long long)weights_cap);
  snprintf(ini, sizeof ini, "%s[provider.transb]\npath = %s\n[provider.cpu]\npath = %s\n", cap,
           TRANSB_PROVIDER, CPU_PROVIDER);
  return fx_runtime_from(ini);
}

static uint64_t weights_used(const onyx_runtime *rt, uint64_t *peak) {
  uint64_t used[ONYX_REQUESTER_COUNT_], top[ONYX_REQUESTER_COUNT_];
  onyx_runtime_memory_usage(rt, used, top);
  if (peak) *peak = top[ONYX_REQUESTER_WEIGHTS];
  return used[ONYX_REQUESTER_WEIGHTS];
}

/* ------------------------------------------------------------ the graph after */

static const onyx_attr *attr_of(const onyx__node *n, const char *name) {
  for (size_t a = 0; a < n->attr_count; ++a)
    if (!strcmp(n->attrs[a].name, name)) return &n->attrs[a];
  return NULL;
}

static void expect_int_attr(const onyx__node *n, const char *name, int64_t want) {
  const onyx_attr *at = attr_of(n, name);
  if (at == NULL) fail_msg("node '%s' has no attribute %s", n->name, name);
  assert_int_equal(at->type, ONYX_ATTR_INT);
  assert_int_equal(at->i, want);
}

static const onyx__node *product_node(const onyx_session *s) {
  const onyx__graph *g = s->graph;
  for (size_t i = 0; i < g->node_count; ++i)
    if (!strcmp(g->nodes[i].name, "prod")) return &g->nodes[i];
  fail_msg("%s", "no node named prod");
  return NULL;
}

static size_t w_slot(product p) { return p == P_NORM ? 3 : 1; }

/* The rewritten node: its op, attributes, and W's name holding W^T as [N, K]. */
static void expect_rewritten(const onyx_session *s, const tw_model *t) {
  const onyx__graph *g = s->graph;
  const onyx__node *n = product_node(s);
  static const char *const ops[] = {"FusedMatMul", "RMSNormMatMul", "SiluMulMatMul"};
  assert_string_equal(n->op_type, ops[t->p]);
  assert_string_equal(n->domain, t->p == P_MATMUL ? "com.microsoft" : "ai.onyx");
  assert_int_equal(n->opset, 1);
  expect_int_attr(n, "transB", 1);
  if (t->p == P_MATMUL) {
    const onyx_attr *alpha = attr_of(n, "alpha");
    assert_non_null(alpha);
    assert_int_equal(alpha->type, ONYX_ATTR_FLOAT);
    assert_true(alpha->f == 1.0f);
    expect_int_attr(n, "transA", 0);
    expect_int_attr(n, "transBatchA", 0);
    expect_int_attr(n, "transBatchB", 0);
    assert_int_equal(n->attr_count, 5);
  } else {
    assert_int_equal(n->attr_count, t->p == P_NORM ? 2 : 1); /* epsilon kept */
  }
  const onyx__value *wt = &g->values[n->inputs[w_slot(t->p)]];
  assert_string_equal(wt->name, "W");
  assert_true(wt->is_initializer);
  assert_int_equal(wt->init.dtype, t->dtype);
  assert_int_equal(wt->init.rank, 2);
  assert_int_equal(wt->init.dims[0], t->n);
  assert_int_equal(wt->init.dims[1], t->k);
  assert_int_equal(wt->rank, 2);
  assert_int_equal(wt->dims[0], t->n);
  assert_int_equal(wt->dims[1], t->k);
  const uint16_t *got = wt->init.data;
  assert_non_null(got);
  for (int64_t r = 0; r < t->n; ++r)
    for (int64_t c = 0; c < t->k; ++c)
      if (got[r * t->k + c] != t->w[c * t->n + r])
        fail_msg("W^T[%lld, %lld] = 0x%04x, W[%lld, %lld] = 0x%04x", (long long)r, (long long)c,
                 got[r * t->k + c], (long long)c, (long long)r, t->w[c * t->n + r]);
  int32_t orig = onyx__graph_find_value(g, "W/KN");
  assert_true(orig >= 0);
  assert_true(g->values[orig].is_initializer);
  assert_null(g->values[orig].init.data); /* freed and unbooked */
  assert_int_equal(g->values[orig].init.dims[0], t->k);
  assert_int_equal(g->values[orig].init.dims[1], t->n);
  assert_true(onyx__graph_find_value(g, "transpose_weights/scratch") < 0);
}

/* The node as the model wrote it, W as it was. */
static void expect_unchanged(const onyx_session *s, const tw_model *t, bool data_kept) {
  const onyx__graph *g = s->graph;
  const onyx__node *n = product_node(s);
  static const char *const ops[] = {"MatMul", "RMSNormMatMul", "SiluMulMatMul"};
  assert_string_equal(n->op_type, ops[t->p]);
  assert_null(attr_of(n, "transB"));
  const onyx__value *w = &g->values[n->inputs[w_slot(t->p)]];
  assert_string_equal(w->name, "W");
  assert_int_equal(w->init.dims[w->init.rank - 2], t->k);
  assert_int_equal(w->init.dims[w->init.rank - 1], t->n);
  if (data_kept && t->w) assert_memory_equal(w->init.data, t->w, (size_t)t->w_bytes);
  assert_true(onyx__graph_find_value(g, "W/KN") < 0);
}

/* ------------------------------------------------------------ runs */

static onyx_tensor half_input(uint32_t dtype, int64_t rows, int64_t cols) {
  onyx_tensor x = {.dtype = dtype, .rank = 2, .dims = {rows, cols}};
  uint16_t *v = malloc((size_t)(rows * cols) * sizeof *v);
  for (int64_t i = 0; i < rows * cols; ++i) v[i] = bits16();
  x.data = v;
  return x;
}

/* Row r of the op's A operand, as transb_provider.c defines it. */
static uint16_t a_at(const tw_model *t, const onyx_tensor *in, const uint16_t *gamma, int64_t r,
                     int64_t c) {
  const uint16_t *x = in[0].data;
  if (t->p == P_SILU) return (uint16_t)((uint32_t)x[r * 2 * t->k + c] * x[r * 2 * t->k + t->k + c]);
  if (t->p == P_MATMUL) return x[r * t->k + c];
  uint16_t sum = (uint16_t)(x[r * t->k + c] + ((const uint16_t *)in[1].data)[r * t->k + c]);
  return (uint16_t)((uint32_t)sum * gamma[c]);
}

/* Runs `s` on fresh random inputs; Y against the product with the original W. */
static void expect_reference_run(onyx_session *s, const tw_model *t) {
  const onyx__graph *g = s->graph;
  int32_t gv = onyx__graph_find_value(g, "gamma");
  const uint16_t *gamma = gv >= 0 ? g->values[gv].init.data : NULL;
  size_t nin = onyx_session_input_count(s), nout = onyx_session_output_count(s);
  onyx_tensor in[2];
  in[0] = half_input(t->dtype, ROWS, t->p == P_SILU ? 2 * t->k : t->k);
  if (nin > 1) in[1] = half_input(t->dtype, ROWS, t->k);
  onyx_tensor out[2];
  memset(out, 0, sizeof out);
  onyx_error *e = NULL;
  onyx_status st = onyx_session_run(s, NULL, in, nin, out, &e);
  if (st != ONYX_STATUS_OK) fprintf(stderr, "run: %s\n", onyx_error_message(e));
  onyx_error_free(e);
  assert_int_equal(st, ONYX_STATUS_OK);
  const uint16_t *y = out[0].data;
  assert_int_equal(out[0].dims[1], t->n);
  for (int64_t r = 0; r < ROWS; ++r)
    for (int64_t c = 0; c < t->n; ++c) {
      uint16_t want = 0;
      for (int64_t j = 0; j < t->k; ++j)
        want = (uint16_t)(want + (uint32_t)a_at(t, in, gamma, r, j) * t->w[j * t->n + c]);
      if (y[r * t->n + c] != want)
        fail_msg("y[%lld, %lld] = 0x%04x, 0x%04x expected", (long long)r, (long long)c,
                 y[r * t->n + c], want);
    }
  for (size_t o = 0; o < nout; ++o) onyx_tensor_data_free(out[o].data);
  for (size_t i = 0; i < nin; ++i) free(in[i].data);
}

/* ------------------------------------------------------------ cases */

static void expect_fired(const tw_opts *o) {
  lt_arena a = {0};
  tw_model t = build(&a, o);
  onyx_runtime *rt = runtime_transb(0);
  onyx_session *s = fx_session(rt, &a, t.m, NULL);
  assert_string_equal(onyx_session_node_provider(s, 0), "transb");
  expect_rewritten(s, &t);
  onyx_optimization_stats st = fx_pass_stats(s, "transpose_weights");
  assert_true(st.ran);
  assert_int_equal(st.nodes_removed, 0);
  assert_int_equal(st.nodes_skipped, 0);
  assert_int_equal(st.bytes_added, t.w_bytes);
  assert_int_equal(st.bytes_released, t.w_bytes);
  assert_int_equal(st.weights_peak_bytes, t.init_bytes + t.w_bytes); /* both copies */
  uint64_t peak = 0;
  assert_int_equal(weights_used(rt, &peak), t.init_bytes); /* net zero */
  assert_int_equal(peak, t.init_bytes + t.w_bytes);        /* booked before allocated */
  onyx_session *plain = fx_session(rt, &a, t.m, "transpose_weights");
  assert_false(fx_pass_stats(plain, "transpose_weights").ran);
  expect_unchanged(plain, &t, true);
  for (int trial = 0; trial < 2; ++trial) {
    expect_reference_run(s, &t);
    expect_reference_run(plain, &t);
  }
  onyx_session_destroy(plain);
  onyx_session_destroy(s);
  assert_int_equal(weights_used(rt, NULL), 0);
  onyx_runtime_destroy(rt);
  lt_arena_free(&a);
}

/* Left alone on `rt`: the node as written, nothing booked, `skipped` counted. */
static void expect_left_on(onyx_runtime *rt, const tw_opts *o, uint64_t skipped, bool data_kept) {
  lt_arena a = {0};
  tw_model t = build(&a, o);
  onyx_session *s = fx_session(rt, &a, t.m, NULL);
  expect_unchanged(s, &t, data_kept);
  onyx_optimization_stats st = fx_pass_stats(s, "transpose_weights");
  assert_true(st.ran);
  assert_int_equal(st.nodes_skipped, skipped);
  assert_int_equal(st.bytes_added, 0);
  assert_int_equal(st.bytes_released, 0);
  onyx_session_destroy(s);
  lt_arena_free(&a);
}

static void fires_on_each_product(void **state) {
  (void)state;
  for (product p = P_MATMUL; p <= P_SILU; ++p) {
    expect_fired(&(tw_opts){.p = p});
    expect_fired(&(tw_opts){.p = p, .dtype = BF16, .k = 16, .n = 8});
  }
}

/* The CPU kernels decline transB = 1 and it has no FusedMatMul: nothing changes. */
static void stays_off_on_the_cpu(void **state) {
  (void)state;
  onyx_runtime *rt = fx_runtime_cpu();
  for (product p = P_MATMUL; p <= P_SILU; ++p) {
    expect_left_on(rt, &(tw_opts){.p = p}, 1, false); /* the CPU may pack W and free it */
    expect_left_on(rt, &(tw_opts){.p = p, .dtype = BF16}, 1, false);
  }
  onyx_runtime_destroy(rt);
}

static void left_when_the_weight_does_not_fit(void **state) {
  (void)state;
  onyx_runtime *rt = runtime_transb(0);
  for (product p = P_MATMUL; p <= P_SILU; ++p) {
    expect_left_on(rt, &(tw_opts){.p = p, .w_shared = true}, 2, true);
    expect_left_on(rt, &(tw_opts){.p = p, .w_output = true}, 1, true);
    expect_left_on(rt, &(tw_opts){.p = p, .dtype = F32}, 1, true);
    expect_left_on(rt, &(tw_opts){.p = p, .k = 20}, 1, true);
    expect_left_on(rt, &(tw_opts){.p = p, .n = 36}, 1, true);
  }
  /* A batched weight is no matrix (placement only: MatMul broadcasts it). */
  lt_arena a = {0};
  tw_model t = build(&a, &(tw_opts){.w_rank3 = true});
  onyx_session *s = fx_session(rt, &a, t.m, NULL);
  assert_string_equal(product_node(s)->op_type, "MatMul");
  assert_int_equal(fx_pass_stats(s, "transpose_weights").nodes_skipped, 1);
  assert_int_equal(fx_pass_stats(s, "transpose_weights").bytes_added, 0);
  onyx_session_destroy(s);
  lt_arena_free(&a);
  onyx_runtime_destroy(rt);
}

/* Two products; the governor has room for the second one's copy only. The first stays
 * (its value kept as the spare), the second fires with it, and nothing leaks. */
static void a_refused_copy_leaves_that_node(void **state) {
  (void)state;
  lt_arena a = {0};
  Onnx__ModelProto *m = lt_model(&a, 17);
  lt_opset(&a, m, "ai.onyx", 1);
  Onnx__GraphProto *g = m->graph;
  uint64_t bytes = 0, w1 = 0, w2 = 0;
  init_random(&a, g, "W1", F16, 2, (int64_t[]){K, N}, &w1);
  uint16_t *bits2 = init_random(&a, g, "W2", F16, 2, (int64_t[]){16, 8}, &w2);
  bytes = w1 + w2;
  lt_input(&a, g, "x", F16, 2, (int64_t[]){ROWS, K});
  lt_input(&a, g, "gu", F16, 2, (int64_t[]){ROWS, 32});
  lt_node(&a, g, "MatMul", "first", (const char *[]){"x", "W1", NULL}, (const char *[]){"y", NULL});
  Onnx__NodeProto *n = lt_node(&a, g, "SiluMulMatMul", "prod", (const char *[]){"gu", "W2", NULL},
                               (const char *[]){"z", NULL});
  n->domain = lt_str(&a, "ai.onyx");
  lt_output(&a, g, "y", F16, -1, NULL);
  lt_output(&a, g, "z", F16, -1, NULL);
  onyx_runtime *rt = runtime_transb(bytes + w2);
  onyx_session *s = fx_session(rt, &a, m, NULL);
  const onyx__graph *sg = s->graph;
  assert_string_equal(sg->nodes[0].op_type, "MatMul");
  assert_string_equal(sg->values[sg->nodes[0].inputs[1]].name, "W1");
  onyx_optimization_stats st = fx_pass_stats(s, "transpose_weights");
  assert_int_equal(st.nodes_skipped, 1);
  assert_int_equal(st.bytes_added, w2);
  assert_int_equal(st.bytes_released, w2);
  assert_int_equal(weights_used(rt, NULL), bytes);
  tw_model t = {.p = P_SILU, .dtype = F16, .k = 16, .n = 8, .w = bits2, .w_bytes = w2};
  const onyx__node *prod = product_node(s);
  const onyx__value *wt = &sg->values[prod->inputs[1]];
  assert_string_equal(wt->name, "W2");
  assert_int_equal(wt->init.dims[0], 8);
  expect_int_attr(prod, "transB", 1);
  for (int64_t r = 0; r < 8; ++r)
    for (int64_t c = 0; c < 16; ++c)
      assert_int_equal(((const uint16_t *)wt->init.data)[r * 16 + c], t.w[c * 8 + r]);
  assert_true(onyx__graph_find_value(sg, "transpose_weights/scratch") < 0); /* spare used */
  onyx_session_destroy(s);
  assert_int_equal(weights_used(rt, NULL), 0);

  /* Room for neither: both stay, one unread value stays behind, nothing booked. */
  onyx_runtime_destroy(rt);
  rt = runtime_transb(bytes + 8);
  s = fx_session(rt, &a, m, NULL);
  st = fx_pass_stats(s, "transpose_weights");
  assert_int_equal(st.nodes_skipped, 2);
  assert_int_equal(st.bytes_added, 0);
  assert_int_equal(weights_used(rt, NULL), bytes);
  int32_t spare = onyx__graph_find_value(s->graph, "transpose_weights/scratch");
  assert_true(spare >= 0);
  assert_false(s->graph->values[spare].is_initializer);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
  lt_arena_free(&a);
}

static void switches_off_by_name(void **state) {
  (void)state;
  lt_arena a = {0};
  onyx_runtime *rt = runtime_transb(0);
  for (product p = P_MATMUL; p <= P_SILU; ++p) {
    tw_model t = build(&a, &(tw_opts){.p = p});
    onyx_session *s = fx_session(rt, &a, t.m, "silu_matmul, transpose_weights");
    expect_unchanged(s, &t, true);
    assert_false(fx_pass_stats(s, "transpose_weights").ran);
    onyx_session_destroy(s);
  }
  bool listed = false;
  for (size_t i = 0; i < onyx_optimization_count(); ++i)
    listed |= !strcmp(onyx_optimization_name(i), "transpose_weights") &&
              i + 1 == onyx_optimization_count(); /* it runs last */
  assert_true(listed);
  onyx_runtime_destroy(rt);
  lt_arena_free(&a);
}

int main(void) {
  fx_seed("transpose_weights_test", "TRANSPOSE_WEIGHTS_SEED");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(fires_on_each_product),
      cmocka_unit_test(stays_off_on_the_cpu),
      cmocka_unit_test(left_when_the_weight_does_not_fit),
      cmocka_unit_test(a_refused_copy_leaves_that_node),
      cmocka_unit_test(switches_off_by_name),
  };
  return cmocka_run_group_tests_name("transpose_weights", tests, NULL, NULL);
}
