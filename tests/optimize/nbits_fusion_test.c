/*
 * norm_matmul and silu_matmul (core/optimize/) on MatMulNBits products, the int4
 * exports' form:
 *
 *   h, _, _, s = SkipSimplifiedLayerNormalization(x, skip, gamma)   y = MatMulNBits(h, B, ...)
 *   h = SimplifiedLayerNormalization(x, gamma)                       y = MatMulNBits(h, B, ...)
 *   a = ai.onyx::SiluMul(gu)                                         y = MatMulNBits(a, B, ...)
 *
 * With a provider that has ai.onyx::RMSNormMatMulNBits and SiluMulMatMulNBits
 * (nbits_provider.c, placed before the CPU provider) each pair becomes one node as
 * docs/ops.md writes it: inputs in the contract's order with the absent optional ones
 * empty, outputs y (and s), the norm's epsilon and every MatMulNBits attribute with its
 * value, the product gone. A whole layer's norm and MLP (gate_up_silu first) becomes
 * RMSNormMatMulNBits (N doubled) and SiluMulMatMulNBits. The pair stays when the head's
 * output has another reader or is a graph output, when B or the scales are not
 * constants, when gamma's length is not K or gu's last dim not 2K, when the provider has
 * no fused op or declines its attributes (bits = 8), and on a CPU-only runtime (which
 * also runs the unfused graph). A failed allocation at any point of either pass leaves
 * the graph as it was and nothing allocated (malloc is wrapped: see CMakeLists.txt).
 *
 * The provider places nodes only, so the tests read the optimized graph (session_impl.h:
 * the core is linked statically). NBITS_FUSION_SEED repeats a run's random bits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "graph_edit.h"
#include "optimize/optimize_impl.h"
#include "pass_fixture.h"
#include "session_impl.h"

enum { F32 = ONYX_DTYPE_FLOAT32, F16 = ONYX_DTYPE_FLOAT16, BF16 = ONYX_DTYPE_BFLOAT16 };
enum { U8 = ONYX_DTYPE_UINT8, I32 = ONYX_DTYPE_INT32 };
enum { K = 32, N = 16, BLOCK = 16, ACCURACY = 4, ROWS = 3 };

/* ------------------------------------------------------------ wrapped allocation */

void *__real_malloc(size_t size);
void *__real_calloc(size_t count, size_t size);
void *__real_realloc(void *ptr, size_t size);
void __real_free(void *ptr);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t count, size_t size);
void *__wrap_realloc(void *ptr, size_t size);
void __wrap_free(void *ptr);

/* While armed: the allocation numbered fail_at fails; live counts allocations made
 * minus pointers freed. */
static bool armed;
static long calls, fail_at = -1, live;

static bool fail_now(void) { return armed && calls++ == fail_at; }

void *__wrap_malloc(size_t size) {
  if (fail_now()) return NULL;
  void *p = __real_malloc(size);
  live += armed && p;
  return p;
}

void *__wrap_calloc(size_t count, size_t size) {
  if (fail_now()) return NULL;
  void *p = __real_calloc(count, size);
  live += armed && p;
  return p;
}

void *__wrap_realloc(void *ptr, size_t size) {
  if (fail_now()) return NULL;
  void *p = __real_realloc(ptr, size);
  live += armed && p && ptr == NULL;
  return p;
}

void __wrap_free(void *ptr) {
  live -= armed && ptr;
  __real_free(ptr);
}

/* ------------------------------------------------------------ models */

typedef enum head { H_SKIP, H_PLAIN, H_SILU, H_LAYER } head;

typedef struct nb_opts {
  head h;
  uint32_t dtype;    /* 0: float16 */
  bool all_inputs;   /* zero_points, g_idx and bias present */
  bool prepacked;    /* a weight_prepacked = 0 attribute */
  int64_t bits;      /* 0: 4 */
  bool out_read;     /* the head's output (h or a) has another reader */
  bool out_output;   /* ... or is a graph output */
  bool b_input;      /* B is a graph input */
  bool scales_input; /* the scales are a graph input */
  bool sum_read;     /* s is read by a node, not only a graph output */
  int64_t k_attr;    /* the product's K; 0: K (the head's width stays K) */
} nb_opts;

static uint32_t dtype_of(const nb_opts *o) { return o->dtype ? o->dtype : F16; }
static int64_t bits_of(const nb_opts *o) { return o->bits ? o->bits : 4; }

/* Random bits that are finite numbers of the type: the top exponent bit cleared. */
static void random_init(lt_arena *a, Onnx__GraphProto *g, const char *name, uint32_t dtype,
                        size_t rank, const int64_t *dims) {
  size_t count = 1;
  for (size_t d = 0; d < rank; ++d) count *= (size_t)dims[d];
  if (dtype == F32) {
    fx_float_init(a, g, name, rank, dims, 0.5f, 0.0f);
    return;
  }
  size_t width = dtype == U8 ? 1 : 2;
  uint8_t *v = lt_alloc(a, count * width);
  for (size_t i = 0; i < count; ++i) {
    uint16_t bits = (uint16_t)(fx_next() >> 24);
    if (width == 1)
      v[i] = (uint8_t)bits;
    else {
      bits &= 0xbfff;
      memcpy(v + 2 * i, &bits, 2);
    }
  }
  Onnx__TensorProto *t = lt_tensor(a, name, (int32_t)dtype, rank, dims);
  lt_raw(a, t, v, count * width);
  lt_initializer(a, g, t);
}

static void int_attr(lt_arena *a, Onnx__NodeProto *n, const char *name, int64_t v) {
  Onnx__AttributeProto *at = lt_attr(a, n, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
  at->has_i = 1;
  at->i = v;
}

static const char *named(lt_arena *a, const char *base, const char *what) {
  char s[128];
  snprintf(s, sizeof s, "%s/%s", base, what);
  return lt_str(a, s);
}

/* y = MatMulNBits(in, <name>/B, <name>/scales[, zp, g_idx, bias]), K = k, N = n. */
static void nbits(lt_arena *a, Onnx__GraphProto *g, const nb_opts *o, const char *name,
                  const char *in, const char *y, int64_t k, int64_t n) {
  const int32_t d = (int32_t)dtype_of(o);
  const int64_t bits = bits_of(o), kb = (k + BLOCK - 1) / BLOCK, blob = BLOCK * bits / 8;
  const char *b = named(a, name, "B"), *sc = named(a, name, "scales");
  if (o->b_input)
    lt_input(a, g, b, U8, 3, (int64_t[]){n, kb, blob});
  else
    random_init(a, g, b, U8, 3, (int64_t[]){n, kb, blob});
  if (o->scales_input)
    lt_input(a, g, sc, d, 1, (int64_t[]){n * kb});
  else
    random_init(a, g, sc, (uint32_t)d, 1, (int64_t[]){n * kb});
  const char *inputs[7] = {in, b, sc, NULL};
  if (o->all_inputs) {
    inputs[3] = named(a, name, "zp");
    inputs[4] = named(a, name, "g_idx");
    inputs[5] = named(a, name, "bias");
    random_init(a, g, inputs[3], U8, 1, (int64_t[]){n * ((kb * bits + 7) / 8)});
    int32_t *gi = lt_alloc(a, (size_t)k * sizeof *gi);
    for (int64_t i = 0; i < k; ++i) gi[i] = (int32_t)(i / BLOCK);
    Onnx__TensorProto *t = lt_tensor(a, inputs[4], I32, 1, (int64_t[]){k});
    lt_int32s(a, t, gi, (size_t)k);
    lt_initializer(a, g, t);
    random_init(a, g, inputs[5], (uint32_t)d, 1, (int64_t[]){n});
  }
  Onnx__NodeProto *node = lt_node(a, g, "MatMulNBits", name, inputs, (const char *[]){y, NULL});
  node->domain = lt_str(a, "com.microsoft");
  int_attr(a, node, "K", k);
  int_attr(a, node, "N", n);
  int_attr(a, node, "bits", bits);
  int_attr(a, node, "block_size", BLOCK);
  int_attr(a, node, "accuracy_level", ACCURACY);
  if (o->prepacked) int_attr(a, node, "weight_prepacked", 0);
}

/* The norm "norm" of x (and skip) into h; s a graph output, or read by Neg. */
static void norm(lt_arena *a, Onnx__GraphProto *g, const nb_opts *o, bool plain) {
  const int32_t d = (int32_t)dtype_of(o);
  lt_input(a, g, "x", d, 2, (int64_t[]){ROWS, K});
  random_init(a, g, "gamma", (uint32_t)d, 1, (int64_t[]){K});
  Onnx__NodeProto *n;
  if (plain) {
    n = lt_node(a, g, "SimplifiedLayerNormalization", "norm", (const char *[]){"x", "gamma", NULL},
                (const char *[]){"h", NULL});
  } else {
    lt_input(a, g, "skip", d, 2, (int64_t[]){ROWS, K});
    n = lt_node(a, g, "SkipSimplifiedLayerNormalization", "norm",
                (const char *[]){"x", "skip", "gamma", NULL},
                (const char *[]){"h", "", "", "s", NULL});
    n->domain = lt_str(a, "com.microsoft");
    if (o->sum_read) {
      lt_node(a, g, "Neg", "res", (const char *[]){"s", NULL}, (const char *[]){"z", NULL});
      lt_output(a, g, "z", d, 2, (int64_t[]){ROWS, K});
    } else {
      lt_output(a, g, "s", d, 2, (int64_t[]){ROWS, K});
    }
  }
  Onnx__AttributeProto *eps =
      lt_attr(a, n, "epsilon", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
  eps->has_f = 1;
  eps->f = 1e-6f;
}

/* The gate|up products of h, Sigmoid, Mul, Mul into "fin" -> a (gate_up_silu's input). */
static void mlp(lt_arena *a, Onnx__GraphProto *g, const nb_opts *o) {
  nbits(a, g, o, "gate", "h", "g", K, K);
  nbits(a, g, o, "up", "h", "u", K, K);
  lt_node(a, g, "Sigmoid", "sig", (const char *[]){"g", NULL}, (const char *[]){"sg", NULL});
  lt_node(a, g, "Mul", "act1", (const char *[]){"g", "sg", NULL}, (const char *[]){"c", NULL});
  lt_node(a, g, "Mul", "fin", (const char *[]){"c", "u", NULL}, (const char *[]){"a", NULL});
}

static Onnx__ModelProto *model(lt_arena *a, const nb_opts *o) {
  const int32_t d = (int32_t)dtype_of(o);
  Onnx__ModelProto *m = lt_model(a, 17);
  lt_opset(a, m, "com.microsoft", 1);
  lt_opset(a, m, "ai.onyx", 1);
  Onnx__GraphProto *g = m->graph;
  const char *head_out = o->h == H_SILU || o->h == H_LAYER ? "a" : "h";
  if (o->h == H_SILU) {
    lt_input(a, g, "gu", d, 2, (int64_t[]){ROWS, 2 * K});
    Onnx__NodeProto *n =
        lt_node(a, g, "SiluMul", "act", (const char *[]){"gu", NULL}, (const char *[]){"a", NULL});
    n->domain = lt_str(a, "ai.onyx");
  } else {
    norm(a, g, o, o->h == H_PLAIN);
    if (o->h == H_LAYER) mlp(a, g, o);
  }
  nbits(a, g, o, "prod", head_out, "y", o->k_attr ? o->k_attr : K, N);
  lt_output(a, g, "y", d, 2, (int64_t[]){ROWS, N});
  if (o->out_output) lt_output(a, g, head_out, d, 2, (int64_t[]){ROWS, K});
  if (o->out_read) {
    lt_node(a, g, "Neg", "other", (const char *[]){head_out, NULL}, (const char *[]){"q", NULL});
    lt_output(a, g, "q", d, 2, (int64_t[]){ROWS, K});
  }
  return m;
}

/* ------------------------------------------------------------ runtimes */

/* `which` ("nbits" or "nbits_unfused") first, the CPU provider as fallback. */
static onyx_runtime *runtime_with(const char *which) {
  char ini[2048];
  snprintf(ini, sizeof ini, "[provider.%s]\npath = %s\n[provider.cpu]\npath = %s\n", which,
           strcmp(which, "nbits") ? NBITS_UNFUSED_PROVIDER : NBITS_PROVIDER, CPU_PROVIDER);
  return fx_runtime_from(ini);
}

/* ------------------------------------------------------------ the graph after */

static const onyx__node *node_named(const onyx__graph *g, const char *name) {
  for (size_t i = 0; i < g->node_count; ++i)
    if (!strcmp(g->nodes[i].name, name)) return &g->nodes[i];
  return NULL;
}

static bool has_op(const onyx__graph *g, const char *op) {
  for (size_t i = 0; i < g->node_count; ++i)
    if (!strcmp(g->nodes[i].op_type, op)) return true;
  return false;
}

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

/* Slot k of n names `want` (NULL: empty). */
static void expect_slot(const onyx__graph *g, const int32_t *slots, size_t k, const char *want) {
  if (want == NULL) {
    if (slots[k] >= 0) fail_msg("slot %zu is '%s', empty expected", k, g->values[slots[k]].name);
    return;
  }
  if (slots[k] < 0) fail_msg("slot %zu is empty, '%s' expected", k, want);
  assert_string_equal(g->values[slots[k]].name, want);
}

/* The MatMulNBits "prod"'s inputs 1..5 and attributes (N = n, K = k) on node f, whose
 * inputs start with `lead` of its own. */
static void expect_product_part(const onyx__graph *g, const onyx__node *f, size_t lead,
                                const nb_opts *o, const char *prod, int64_t k, int64_t n) {
  char b[64], sc[64], zp[64], gi[64], bias[64];
  snprintf(b, sizeof b, "%s/B", prod);
  snprintf(sc, sizeof sc, "%s/scales", prod);
  snprintf(zp, sizeof zp, "%s/zp", prod);
  snprintf(gi, sizeof gi, "%s/g_idx", prod);
  snprintf(bias, sizeof bias, "%s/bias", prod);
  if (!strcmp(prod, "gate")) /* gate_up_silu's merged weights */
    snprintf(b, sizeof b, "gate/B/gate_up"), snprintf(sc, sizeof sc, "gate/scales/gate_up");
  assert_int_equal(f->input_count, lead + 5);
  expect_slot(g, f->inputs, lead + 0, b);
  expect_slot(g, f->inputs, lead + 1, sc);
  expect_slot(g, f->inputs, lead + 2, o->all_inputs ? zp : NULL);
  expect_slot(g, f->inputs, lead + 3, o->all_inputs ? gi : NULL);
  expect_slot(g, f->inputs, lead + 4, o->all_inputs ? bias : NULL);
  expect_int_attr(f, "K", k);
  expect_int_attr(f, "N", n);
  expect_int_attr(f, "bits", bits_of(o));
  expect_int_attr(f, "block_size", BLOCK);
  expect_int_attr(f, "accuracy_level", ACCURACY);
  if (o->prepacked) expect_int_attr(f, "weight_prepacked", 0);
}

static void expect_norm_node(const onyx__graph *g, const nb_opts *o, const char *prod, int64_t n) {
  const onyx__node *f = node_named(g, "norm");
  assert_non_null(f);
  assert_string_equal(f->op_type, "RMSNormMatMulNBits");
  assert_string_equal(f->domain, "ai.onyx");
  assert_int_equal(f->opset, 1);
  bool plain = o->h == H_PLAIN;
  expect_slot(g, f->inputs, 0, "x");
  expect_slot(g, f->inputs, 1, plain ? NULL : "skip");
  expect_slot(g, f->inputs, 2, "gamma");
  expect_product_part(g, f, 3, o, prod, K, n);
  assert_int_equal(f->output_count, 2);
  expect_slot(g, f->outputs, 0, o->h == H_LAYER ? "g/gate_up" : "y"); /* the merged product's */
  expect_slot(g, f->outputs, 1, plain ? NULL : "s");
  const onyx_attr *eps = attr_of(f, "epsilon");
  assert_non_null(eps);
  assert_int_equal(eps->type, ONYX_ATTR_FLOAT);
  assert_true(eps->f == 1e-6f);
  assert_int_equal(f->attr_count, 6 + o->prepacked); /* epsilon, then the product's */
  assert_int_equal(g->values[f->outputs[0]].producer, (int32_t)(f - g->nodes));
}

static void expect_silu_node(const onyx__graph *g, const nb_opts *o, const char *name) {
  const onyx__node *f = node_named(g, name);
  assert_non_null(f);
  assert_string_equal(f->op_type, "SiluMulMatMulNBits");
  assert_string_equal(f->domain, "ai.onyx");
  assert_int_equal(f->opset, 1);
  expect_slot(g, f->inputs, 0, o->h == H_LAYER ? "g/gate_up" : "gu");
  expect_product_part(g, f, 1, o, "prod", K, N);
  assert_int_equal(f->output_count, 1);
  expect_slot(g, f->outputs, 0, "y");
  assert_int_equal(f->attr_count, 5 + o->prepacked); /* the product's alone */
  assert_int_equal(g->values[f->outputs[0]].producer, (int32_t)(f - g->nodes));
}

static void expect_consistent(const onyx__graph *g) {
  char err[256] = "";
  onyx_status st = onyx__graph_check(g, err, sizeof err);
  if (st != ONYX_STATUS_OK) fail_msg("graph check: %s", err);
}

/* ------------------------------------------------------------ cases */

static void expect_fused(const nb_opts *o) {
  lt_arena a = {0};
  onyx_runtime *rt = runtime_with("nbits");
  onyx_session *s = fx_session(rt, &a, model(&a, o), NULL);
  const onyx__graph *g = s->graph;
  expect_consistent(g);
  bool silu = o->h == H_SILU, layer = o->h == H_LAYER;
  const char *pass = silu ? "silu_matmul" : "norm_matmul";
  if (silu) expect_silu_node(g, o, "act");
  if (!silu) expect_norm_node(g, o, layer ? "gate" : "prod", layer ? 2 * K : N);
  if (layer) expect_silu_node(g, o, "fin");
  assert_false(has_op(g, "MatMulNBits"));
  assert_false(has_op(g, "SiluMul"));
  assert_int_equal(g->node_count, (layer ? 2 : 1) + (o->sum_read && !silu));
  assert_string_equal(onyx_session_node_provider(s, 0), "nbits");
  onyx_optimization_stats st = fx_pass_stats(s, pass);
  assert_int_equal(st.nodes_removed, 1);
  assert_int_equal(st.nodes_skipped, 0);
  assert_int_equal(st.bytes_added, 0);
  if (layer) assert_int_equal(fx_pass_stats(s, "silu_matmul").nodes_removed, 1);
  assert_int_equal(fx_pass_stats(s, "transpose_weights").nodes_skipped, 0); /* not its ops */
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
  lt_arena_free(&a);
}

/* Left alone on `rt`: the head and the product as written, one candidate counted. */
static void expect_left_on(onyx_runtime *rt, const nb_opts *o) {
  lt_arena a = {0};
  onyx_session *s = fx_session(rt, &a, model(&a, o), NULL);
  const onyx__graph *g = s->graph;
  bool silu = o->h == H_SILU;
  const onyx__node *hd = node_named(g, silu ? "act" : "norm"), *p = node_named(g, "prod");
  assert_non_null(hd);
  assert_non_null(p);
  assert_string_equal(p->op_type, "MatMulNBits");
  assert_int_equal(p->attr_count, 5 + o->prepacked);
  assert_string_equal(hd->op_type, silu              ? "SiluMul"
                                   : o->h == H_PLAIN ? "SimplifiedLayerNormalization"
                                                     : "SkipSimplifiedLayerNormalization");
  assert_int_equal(hd->attr_count, silu ? 0 : 1);
  assert_false(has_op(g, "RMSNormMatMulNBits"));
  assert_false(has_op(g, "SiluMulMatMulNBits"));
  onyx_optimization_stats st = fx_pass_stats(s, silu ? "silu_matmul" : "norm_matmul");
  assert_true(st.ran);
  assert_int_equal(st.nodes_removed, 0);
  assert_int_equal(st.nodes_skipped, 1);
  onyx_session_destroy(s);
  lt_arena_free(&a);
}

static void fires_on_each_head(void **state) {
  (void)state;
  const uint32_t types[] = {F16, BF16, F32};
  for (head h = H_SKIP; h <= H_SILU; ++h)
    for (size_t t = 0; t < 3; ++t) {
      expect_fused(&(nb_opts){.h = h, .dtype = types[t]});
      expect_fused(&(nb_opts){.h = h, .dtype = types[t], .all_inputs = true, .prepacked = true});
    }
  expect_fused(&(nb_opts){.h = H_SKIP, .sum_read = true});
}

/* norm, gate|up, SiLU·mul, down: gate_up_silu merges, then both passes fuse. */
static void fires_on_a_whole_layer(void **state) {
  (void)state;
  expect_fused(&(nb_opts){.h = H_LAYER});
  expect_fused(&(nb_opts){.h = H_LAYER, .dtype = BF16, .prepacked = true});
}

static void left_when_the_output_is_seen(void **state) {
  (void)state;
  onyx_runtime *rt = runtime_with("nbits");
  for (head h = H_SKIP; h <= H_SILU; ++h) {
    expect_left_on(rt, &(nb_opts){.h = h, .out_read = true});
    expect_left_on(rt, &(nb_opts){.h = h, .out_output = true});
  }
  onyx_runtime_destroy(rt);
}

static void left_when_the_product_does_not_fit(void **state) {
  (void)state;
  onyx_runtime *rt = runtime_with("nbits");
  for (head h = H_SKIP; h <= H_SILU; ++h) {
    expect_left_on(rt, &(nb_opts){.h = h, .b_input = true});
    expect_left_on(rt, &(nb_opts){.h = h, .scales_input = true});
    expect_left_on(rt, &(nb_opts){.h = h, .k_attr = 2 * K}); /* gamma or gu too short */
  }
  onyx_runtime_destroy(rt);
}

/* A provider without the fused ops, one that declines the fused node's attributes
 * (bits = 8), and the CPU alone. */
static void left_where_the_provider_has_no_fused_op(void **state) {
  (void)state;
  onyx_runtime *unfused = runtime_with("nbits_unfused"), *rt = runtime_with("nbits");
  onyx_runtime *cpu = fx_runtime_cpu();
  for (head h = H_SKIP; h <= H_SILU; ++h) {
    expect_left_on(unfused, &(nb_opts){.h = h});
    expect_left_on(rt, &(nb_opts){.h = h, .bits = 8});
    expect_left_on(cpu, &(nb_opts){.h = h});
    expect_left_on(cpu, &(nb_opts){.h = h, .all_inputs = true, .dtype = F32});
  }
  onyx_runtime_destroy(cpu);
  onyx_runtime_destroy(rt);
  onyx_runtime_destroy(unfused);
}

/* On the CPU the unfused graph runs, and gives what it gives with both passes off. */
static void the_cpu_runs_the_pair(void **state) {
  (void)state;
  onyx_runtime *cpu = fx_runtime_cpu();
  for (head h = H_SKIP; h <= H_SILU; ++h) {
    lt_arena a = {0};
    Onnx__ModelProto *m = model(&a, &(nb_opts){.h = h, .dtype = F32, .all_inputs = true});
    onyx_session *opt = fx_session(cpu, &a, m, NULL);
    onyx_session *plain = fx_session(cpu, &a, m, "norm_matmul, silu_matmul");
    fx_expect_same_outputs(opt, plain);
    onyx_session_destroy(opt);
    onyx_session_destroy(plain);
    lt_arena_free(&a);
  }
  onyx_runtime_destroy(cpu);
}

/* ------------------------------------------------------------ allocation failures */

/* Node ops, input and attribute counts as loaded. */
static void expect_as_loaded(const onyx__graph *g, const onyx__graph *ref) {
  assert_int_equal(g->node_count, ref->node_count);
  for (size_t i = 0; i < g->node_count; ++i) {
    assert_string_equal(g->nodes[i].op_type, ref->nodes[i].op_type);
    assert_int_equal(g->nodes[i].input_count, ref->nodes[i].input_count);
    assert_memory_equal(g->nodes[i].inputs, ref->nodes[i].inputs,
                        ref->nodes[i].input_count * sizeof ref->nodes[i].inputs[0]);
    assert_int_equal(g->nodes[i].attr_count, ref->nodes[i].attr_count);
  }
}

static onyx__graph *load(const uint8_t *bytes, size_t size) {
  onyx__graph *g = NULL;
  char err[256] = "";
  onyx_status st = onyx__model_load_bytes(bytes, size, NULL, NULL, &g, err, sizeof err);
  if (st != ONYX_STATUS_OK) fail_msg("load: %s", err);
  return g;
}

/* Fails each allocation the pass makes in turn: the pass reports OUT_OF_MEMORY (or, for
 * the probe's attribute list, leaves the pair), the graph stays as loaded and nothing
 * stays allocated; past the last allocation it fuses. */
static void expect_clean_failures(head h) {
  lt_arena a = {0};
  const nb_opts o = {.h = h, .all_inputs = true, .prepacked = true};
  size_t size = 0;
  uint8_t *bytes = lt_pack(&a, model(&a, &o), &size);
  onyx_runtime *rt = runtime_with("nbits");
  onyx_session *s = fx_session(rt, &a, model(&a, &o), "norm_matmul, silu_matmul");
  onyx__graph *ref = load(bytes, size);
  long failed = 0;
  for (fail_at = 0;; ++fail_at) {
    onyx__graph *g = load(bytes, size);
    onyx__opt_stats stats = {0};
    char err[256] = "";
    onyx__opt_ctx ctx = {.session = s, .graph = g, .stats = &stats, .err = err, .err_cap = 256};
    calls = live = 0;
    armed = true;
    onyx_status st = h == H_SILU ? onyx__opt_silu_matmul(&ctx) : onyx__opt_norm_matmul(&ctx);
    armed = false;
    bool fused = g->node_count < ref->node_count;
    if (st == ONYX_STATUS_OK && fused) {
      assert_true(calls <= fail_at); /* no allocation failed */
      expect_consistent(g);
      onyx__graph_free(g);
      break;
    }
    if (st != ONYX_STATUS_OK) assert_int_equal(st, ONYX_STATUS_OUT_OF_MEMORY);
    assert_int_equal(live, 0);
    expect_as_loaded(g, ref);
    onyx__graph_free(g);
    ++failed;
  }
  assert_true(failed >= 4); /* readers, reader, dead, the match, the rewrite's */
  onyx__graph_free(ref);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
  lt_arena_free(&a);
}

static void a_failed_allocation_leaves_the_graph(void **state) {
  (void)state;
  expect_clean_failures(H_SKIP);
  expect_clean_failures(H_PLAIN);
  expect_clean_failures(H_SILU);
}

int main(void) {
  fx_seed("nbits_fusion_test", "NBITS_FUSION_SEED");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(fires_on_each_head),
      cmocka_unit_test(fires_on_a_whole_layer),
      cmocka_unit_test(left_when_the_output_is_seen),
      cmocka_unit_test(left_when_the_product_does_not_fit),
      cmocka_unit_test(left_where_the_provider_has_no_fused_op),
      cmocka_unit_test(the_cpu_runs_the_pair),
      cmocka_unit_test(a_failed_allocation_leaves_the_graph),
  };
  return cmocka_run_group_tests_name("nbits_fusion", tests, NULL, NULL);
}
