/*
 * The optimization passes through the public API: folded, DCE'd and Identity-free
 * graphs give the outputs the unoptimized graph gives on fresh random inputs, the
 * governor's weights books follow what is held (a folded Transpose frees its source
 * unless a Gather still reads it; the load peak stays one tensor above the weights),
 * passes switch off by name, and kernels learn which inputs are constants (ABI v2),
 * copy them, and the core releases the originals nothing else reads.
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

#include "loader_test_util.h"
#include "onyx.h"

enum { F32 = ONYX_DTYPE_FLOAT32, I64 = ONYX_DTYPE_INT64 }; /* ONNX DataType values */

/* ------------------------------------------------------------ fixtures */

static uint32_t rng_state = 0x2545F491u;

static float frand(void) {
  rng_state = rng_state * 1664525u + 1013904223u;
  return (float)((rng_state >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static char *config_with(bool probe) {
  char tmpl[] = "/tmp/onyx-opt-XXXXXX";
  int fd = mkstemp(tmpl);
  assert_true(fd >= 0);
  char text[1024];
  int n = snprintf(text, sizeof text, "%s[provider.cpu]\npath = %s\n",
                   probe ? "[provider.probe]\npath = " PROBE_PROVIDER "\n" : "", CPU_PROVIDER);
  assert_int_equal(write(fd, text, (size_t)n), n);
  close(fd);
  char *path = malloc(sizeof tmpl);
  memcpy(path, tmpl, sizeof tmpl);
  return path;
}

static onyx_runtime *runtime_new(bool probe) {
  char *ini = config_with(probe);
  onyx_runtime *rt = NULL;
  onyx_error *e = NULL;
  onyx_status st = onyx_runtime_create(ini, &rt, &e);
  if (st != ONYX_STATUS_OK) fprintf(stderr, "runtime: %s\n", onyx_error_message(e));
  onyx_error_free(e);
  unlink(ini);
  free(ini);
  assert_int_equal(st, ONYX_STATUS_OK);
  return rt;
}

/* A session of `m`; `disable` as onyx_session_options.disable_optimizations. */
static onyx_session *session_new(onyx_runtime *rt, lt_arena *a, const Onnx__ModelProto *m,
                                 const char *disable) {
  size_t size = 0;
  uint8_t *bytes = lt_pack(a, m, &size);
  onyx_session_options so = {.struct_size = sizeof so, .disable_optimizations = disable};
  onyx_session *s = NULL;
  onyx_error *e = NULL;
  onyx_status st = onyx_session_create_from_bytes(rt, bytes, size, &so, &s, &e);
  if (st != ONYX_STATUS_OK) fprintf(stderr, "session: %s\n", onyx_error_message(e));
  onyx_error_free(e);
  assert_int_equal(st, ONYX_STATUS_OK);
  return s;
}

static onyx_optimization_stats stats_of(const onyx_session *s, const char *pass) {
  for (size_t i = 0; i < onyx_optimization_count(); ++i) {
    if (strcmp(onyx_optimization_name(i), pass) != 0) continue;
    onyx_optimization_stats st = {.struct_size = sizeof st};
    assert_int_equal(onyx_session_optimization_stats(s, i, &st), ONYX_STATUS_OK);
    return st;
  }
  fail_msg("no pass named %s", pass);
  return (onyx_optimization_stats){0};
}

static uint64_t weights_used(const onyx_runtime *rt, uint64_t *out_peak) {
  uint64_t used[ONYX_REQUESTER_COUNT_], peak[ONYX_REQUESTER_COUNT_];
  onyx_runtime_memory_usage(rt, used, peak);
  if (out_peak) *out_peak = peak[ONYX_REQUESTER_WEIGHTS];
  return used[ONYX_REQUESTER_WEIGHTS];
}

/* A float initializer of random values. */
static void float_init(lt_arena *a, Onnx__GraphProto *g, const char *name, size_t rank,
                       const int64_t *dims) {
  Onnx__TensorProto *t = lt_tensor(a, name, F32, rank, dims);
  size_t n = 1;
  for (size_t d = 0; d < rank; ++d) n *= (size_t)dims[d];
  float *v = lt_alloc(a, n * sizeof *v);
  for (size_t i = 0; i < n; ++i) v[i] = frand();
  lt_floats(a, t, v, n);
  lt_initializer(a, g, t);
}

static void int64_init(lt_arena *a, Onnx__GraphProto *g, const char *name, const int64_t *v,
                       size_t n) {
  int64_t dims[1] = {(int64_t)n};
  Onnx__TensorProto *t = lt_tensor(a, name, I64, 1, dims);
  lt_int64s(a, t, v, n);
  lt_initializer(a, g, t);
}

static void transpose(lt_arena *a, Onnx__GraphProto *g, const char *in, const char *out) {
  Onnx__NodeProto *n =
      lt_node(a, g, "Transpose", out, (const char *[]){in, NULL}, (const char *[]){out, NULL});
  Onnx__AttributeProto *perm = lt_attr(a, n, "perm", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
  perm->n_ints = 2;
  perm->ints = lt_alloc(a, 2 * sizeof *perm->ints);
  perm->ints[0] = 1;
  perm->ints[1] = 0;
}

static void node2(lt_arena *a, Onnx__GraphProto *g, const char *op, const char *x, const char *y,
                  const char *out) {
  lt_node(a, g, op, out, (const char *[]){x, y, NULL}, (const char *[]){out, NULL});
}

static void node1(lt_arena *a, Onnx__GraphProto *g, const char *op, const char *x,
                  const char *out) {
  lt_node(a, g, op, out, (const char *[]){x, NULL}, (const char *[]){out, NULL});
}

/* Random host inputs for every graph input (int64 ids in [0, 16)). */
static onyx_tensor *random_inputs(const onyx_session *s) {
  size_t n = onyx_session_input_count(s);
  onyx_tensor *in = calloc(n + 1, sizeof *in);
  for (size_t i = 0; i < n; ++i) {
    onyx_value_info info = onyx_session_input_info(s, i);
    in[i] = (onyx_tensor){.dtype = info.dtype, .rank = (uint32_t)info.rank};
    for (int32_t d = 0; d < info.rank; ++d) in[i].dims[d] = info.dims[d];
    int64_t count = onyx_tensor_numel(&in[i]);
    in[i].data = malloc((size_t)count * onyx_dtype_size(info.dtype) + 1);
    for (int64_t k = 0; k < count; ++k) {
      if (info.dtype == ONYX_DTYPE_INT64)
        ((int64_t *)in[i].data)[k] = (int64_t)((frand() + 1.0f) * 7.99f);
      else
        ((float *)in[i].data)[k] = frand();
    }
  }
  return in;
}

static void inputs_free(onyx_tensor *in, size_t n) {
  for (size_t i = 0; i < n; ++i) free(in[i].data);
  free(in);
}

/* Runs s on `in`; the outputs are the caller's (outputs_free). */
static onyx_tensor *run(onyx_session *s, const onyx_tensor *in) {
  size_t n = onyx_session_output_count(s);
  onyx_tensor *out = calloc(n + 1, sizeof *out);
  onyx_error *e = NULL;
  onyx_status st = onyx_session_run(s, NULL, in, onyx_session_input_count(s), out, &e);
  if (st != ONYX_STATUS_OK) fprintf(stderr, "run: %s\n", onyx_error_message(e));
  onyx_error_free(e);
  assert_int_equal(st, ONYX_STATUS_OK);
  return out;
}

static void outputs_free(onyx_tensor *out, size_t n) {
  for (size_t i = 0; i < n; ++i) onyx_tensor_data_free(out[i].data);
  free(out);
}

/* Asserts both sessions give the same float outputs (within 1e-5 relative) on the
 * same fresh random inputs. */
static void expect_same_outputs(onyx_session *opt, onyx_session *plain) {
  assert_int_equal(onyx_session_output_count(opt), onyx_session_output_count(plain));
  for (size_t o = 0; o < onyx_session_output_count(opt); ++o)
    assert_string_equal(onyx_session_output_info(opt, o).name,
                        onyx_session_output_info(plain, o).name);
  for (int trial = 0; trial < 3; ++trial) {
    onyx_tensor *in = random_inputs(plain);
    onyx_tensor *a = run(opt, in), *b = run(plain, in);
    for (size_t o = 0; o < onyx_session_output_count(opt); ++o) {
      assert_int_equal(a[o].dtype, ONYX_DTYPE_FLOAT32);
      assert_int_equal(a[o].rank, b[o].rank);
      assert_memory_equal(a[o].dims, b[o].dims, sizeof a[o].dims);
      const float *x = a[o].data, *y = b[o].data;
      for (int64_t k = 0; k < onyx_tensor_numel(&a[o]); ++k) {
        float tol = 1e-5f * (1.0f + (y[k] < 0 ? -y[k] : y[k]));
        if (!(x[k] - y[k] <= tol && y[k] - x[k] <= tol))
          fail_msg("output %zu [%lld]: optimized %.9g, unoptimized %.9g", o, (long long)k, x[k],
                   y[k]);
      }
    }
    outputs_free(a, onyx_session_output_count(opt));
    outputs_free(b, onyx_session_output_count(plain));
    inputs_free(in, onyx_session_input_count(plain));
  }
}

/* ------------------------------------------------------------ folding */

/* y = x · Transpose(W) + Mul(Constant c, k) */
static Onnx__ModelProto *fold_model(lt_arena *a) {
  Onnx__ModelProto *m = lt_model(a, 17);
  Onnx__GraphProto *g = m->graph;
  lt_input(a, g, "x", F32, 2, (int64_t[]){2, 8});
  float_init(a, g, "W", 2, (int64_t[]){4, 8});
  float_init(a, g, "k", 1, (int64_t[]){4});
  transpose(a, g, "W", "Wt");
  Onnx__NodeProto *c =
      lt_node(a, g, "Constant", "c", (const char *[]){NULL}, (const char *[]){"c", NULL});
  Onnx__AttributeProto *v = lt_attr(a, c, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
  v->t = lt_tensor(a, "c", F32, 1, (int64_t[]){4});
  lt_floats(a, v->t, (float[]){0.5f, -1.25f, 2.0f, 3.5f}, 4);
  node2(a, g, "Mul", "c", "k", "ck");
  node2(a, g, "MatMul", "x", "Wt", "xw");
  node2(a, g, "Add", "xw", "ck", "y");
  lt_output(a, g, "y", F32, 2, (int64_t[]){2, 4});
  return m;
}

static void folding_matches_unoptimized(void **state) {
  (void)state;
  lt_arena a = {0};
  onyx_runtime *rt = runtime_new(false);
  Onnx__ModelProto *m = fold_model(&a);
  onyx_session *opt = session_new(rt, &a, m, NULL);
  onyx_session *plain = session_new(rt, &a, m, "all");
  assert_int_equal(onyx_session_node_count(plain), 5);
  assert_int_equal(onyx_session_node_count(opt), 2); /* MatMul, Add */
  onyx_optimization_stats cf = stats_of(opt, "constant_folding");
  assert_true(cf.ran);
  assert_int_equal(cf.nodes_folded, 3);
  assert_int_equal(cf.nodes_removed, 3);
  /* W^T (128 bytes) and c and c·k (16 each); W, k and c were last read by a fold. */
  assert_int_equal(cf.bytes_added, 128 + 16 + 16);
  assert_int_equal(cf.bytes_released, 128 + 16 + 16);
  assert_false(stats_of(plain, "constant_folding").ran);
  expect_same_outputs(opt, plain);
  onyx_session_destroy(opt);
  onyx_session_destroy(plain);
  onyx_runtime_destroy(rt);
  lt_arena_free(&a);
}

/* y = x + Transpose(E), and h = Gather(E, ids) when `shared` (a tied embedding).
 * The transposed table feeds an Add, not a MatMul, so that no kernel's own copy of
 * it (a prepacked B) enters the weights counted here. */
static Onnx__ModelProto *tied_model(lt_arena *a, bool shared) {
  Onnx__ModelProto *m = lt_model(a, 17);
  Onnx__GraphProto *g = m->graph;
  float_init(a, g, "E", 2, (int64_t[]){16, 8});
  lt_input(a, g, "x", F32, 2, (int64_t[]){8, 16});
  if (shared) {
    lt_input(a, g, "ids", I64, 1, (int64_t[]){3});
    node2(a, g, "Gather", "E", "ids", "h");
    lt_output(a, g, "h", F32, 2, (int64_t[]){3, 8});
  }
  transpose(a, g, "E", "Et");
  node2(a, g, "Add", "x", "Et", "y");
  lt_output(a, g, "y", F32, 2, (int64_t[]){8, 16});
  return m;
}

static void folded_transpose_keeps_a_shared_source(void **state) {
  (void)state;
  lt_arena a = {0};
  onyx_runtime *rt = runtime_new(false);
  const uint64_t E = 16 * 8 * sizeof(float);
  Onnx__ModelProto *m = tied_model(&a, true);
  onyx_session *opt = session_new(rt, &a, m, NULL);
  onyx_optimization_stats cf = stats_of(opt, "constant_folding");
  assert_int_equal(cf.nodes_folded, 1);
  assert_int_equal(cf.bytes_added, E);
  assert_int_equal(cf.bytes_released, 0); /* the Gather still reads E */
  assert_int_equal(weights_used(rt, NULL), 2 * E);
  onyx_session *plain = session_new(rt, &a, m, "all");
  assert_int_equal(weights_used(rt, NULL), 3 * E);
  expect_same_outputs(opt, plain);
  onyx_session_destroy(plain);
  onyx_session_destroy(opt);
  assert_int_equal(weights_used(rt, NULL), 0);
  onyx_runtime_destroy(rt);
  lt_arena_free(&a);
}

static void folded_transpose_frees_an_unshared_source(void **state) {
  (void)state;
  lt_arena a = {0};
  onyx_runtime *rt = runtime_new(false);
  const uint64_t E = 16 * 8 * sizeof(float);
  Onnx__ModelProto *m = tied_model(&a, false);
  onyx_session *opt = session_new(rt, &a, m, NULL);
  onyx_optimization_stats cf = stats_of(opt, "constant_folding");
  assert_int_equal(cf.nodes_folded, 1);
  assert_int_equal(cf.bytes_added, E);
  assert_int_equal(cf.bytes_released, E);
  assert_int_equal(cf.weights_peak_bytes, 2 * E);
  assert_int_equal(weights_used(rt, NULL), E); /* E^T alone */
  onyx_session *plain = session_new(rt, &a, m, "all");
  expect_same_outputs(opt, plain);
  onyx_session_destroy(plain);
  onyx_session_destroy(opt);
  assert_int_equal(weights_used(rt, NULL), 0);
  onyx_runtime_destroy(rt);
  lt_arena_free(&a);
}

/* Node by node: four weights each transposed never hold more than the weights plus
 * one transposed copy. */
static void folding_peak_is_one_tensor_above_the_weights(void **state) {
  (void)state;
  lt_arena a = {0};
  onyx_runtime *rt = runtime_new(false);
  Onnx__ModelProto *m = lt_model(&a, 17);
  Onnx__GraphProto *g = m->graph;
  lt_input(&a, g, "x0", F32, 2, (int64_t[]){32, 32});
  const uint64_t W = 32 * 32 * sizeof(float);
  for (int i = 0; i < 4; ++i) {
    char w[8], wt[8], x[8], y[8];
    snprintf(w, sizeof w, "W%d", i);
    snprintf(wt, sizeof wt, "W%dt", i);
    snprintf(x, sizeof x, "x%d", i);
    snprintf(y, sizeof y, "x%d", i + 1);
    float_init(&a, g, w, 2, (int64_t[]){32, 32});
    transpose(&a, g, w, wt);
    node2(&a, g, "Add", x, wt, y);
  }
  lt_output(&a, g, "x4", F32, 2, (int64_t[]){32, 32});
  onyx_session *opt = session_new(rt, &a, m, NULL);
  onyx_optimization_stats cf = stats_of(opt, "constant_folding");
  assert_int_equal(cf.nodes_folded, 4);
  assert_int_equal(cf.bytes_released, 4 * W);
  assert_int_equal(cf.weights_peak_bytes, 5 * W);
  uint64_t peak = 0;
  assert_int_equal(weights_used(rt, &peak), 4 * W);
  assert_int_equal(peak, 5 * W); /* the governor saw the same */
  onyx_session *plain = session_new(rt, &a, m, "all");
  expect_same_outputs(opt, plain);
  onyx_session_destroy(plain);
  onyx_session_destroy(opt);
  onyx_runtime_destroy(rt);
  lt_arena_free(&a);
}

/* A Constant that is the graph output: nothing is left to run. */
static void constant_output_becomes_an_initializer(void **state) {
  (void)state;
  lt_arena a = {0};
  onyx_runtime *rt = runtime_new(false);
  Onnx__ModelProto *m = lt_model(&a, 17);
  Onnx__GraphProto *g = m->graph;
  Onnx__NodeProto *c =
      lt_node(&a, g, "Constant", "c", (const char *[]){NULL}, (const char *[]){"y", NULL});
  Onnx__AttributeProto *v = lt_attr(&a, c, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
  v->t = lt_tensor(&a, "y", F32, 1, (int64_t[]){3});
  lt_floats(&a, v->t, (float[]){1.5f, -2.0f, 0.25f}, 3);
  lt_output(&a, g, "y", F32, 1, (int64_t[]){3});
  onyx_session *s = session_new(rt, &a, m, NULL);
  assert_int_equal(onyx_session_node_count(s), 0);
  onyx_tensor *out = run(s, NULL);
  assert_memory_equal(out[0].data, ((float[]){1.5f, -2.0f, 0.25f}), 3 * sizeof(float));
  outputs_free(out, 1);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
  lt_arena_free(&a);
}

/* ConstantOfShape would turn 16 bytes into 4 MiB: cheaper to recompute than hold. */
static void large_results_are_not_folded(void **state) {
  (void)state;
  lt_arena a = {0};
  onyx_runtime *rt = runtime_new(false);
  Onnx__ModelProto *m = lt_model(&a, 17);
  Onnx__GraphProto *g = m->graph;
  lt_input(&a, g, "x", F32, 2, (int64_t[]){1024, 1024});
  int64_init(&a, g, "shape", (int64_t[]){1024, 1024}, 2);
  node1(&a, g, "ConstantOfShape", "shape", "zeros");
  node2(&a, g, "Add", "x", "zeros", "y");
  lt_output(&a, g, "y", F32, 2, (int64_t[]){1024, 1024});
  onyx_session *s = session_new(rt, &a, m, NULL);
  onyx_optimization_stats cf = stats_of(s, "constant_folding");
  assert_int_equal(cf.nodes_folded, 0);
  assert_int_equal(cf.nodes_skipped, 1);
  assert_int_equal(cf.bytes_added, 0);
  assert_int_equal(onyx_session_node_count(s), 2);
  assert_int_equal(weights_used(rt, NULL), 16);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
  lt_arena_free(&a);
}

/* ------------------------------------------------------------ dead nodes, Identity */

static void dead_nodes_go_and_free_their_weights(void **state) {
  (void)state;
  lt_arena a = {0};
  onyx_runtime *rt = runtime_new(false);
  Onnx__ModelProto *m = lt_model(&a, 17);
  Onnx__GraphProto *g = m->graph;
  lt_input(&a, g, "x", F32, 2, (int64_t[]){4, 8});
  float_init(&a, g, "Wdead", 2, (int64_t[]){4, 8});
  node1(&a, g, "Relu", "x", "y");
  node2(&a, g, "Mul", "x", "Wdead", "z");
  node1(&a, g, "Neg", "z", "zz");
  lt_output(&a, g, "y", F32, 2, (int64_t[]){4, 8});
  onyx_session *opt = session_new(rt, &a, m, NULL);
  onyx_optimization_stats dn = stats_of(opt, "dead_node_elimination");
  assert_int_equal(dn.nodes_removed, 2);
  assert_int_equal(dn.bytes_released, 4 * 8 * sizeof(float));
  assert_int_equal(onyx_session_node_count(opt), 1);
  assert_string_equal(onyx_session_node_op(opt, 0), "Relu");
  assert_int_equal(weights_used(rt, NULL), 0);
  onyx_session *plain = session_new(rt, &a, m, "dead_node_elimination");
  assert_int_equal(onyx_session_node_count(plain), 3);
  expect_same_outputs(opt, plain);
  onyx_session_destroy(plain);
  onyx_session_destroy(opt);
  onyx_runtime_destroy(rt);
  lt_arena_free(&a);
}

static void identity_to_a_graph_output_keeps_its_name(void **state) {
  (void)state;
  lt_arena a = {0};
  onyx_runtime *rt = runtime_new(false);
  Onnx__ModelProto *m = lt_model(&a, 17);
  Onnx__GraphProto *g = m->graph;
  lt_input(&a, g, "x", F32, 2, (int64_t[]){4, 8});
  node1(&a, g, "Relu", "x", "t");
  node1(&a, g, "Identity", "t", "y"); /* a graph output: Relu now makes "y" */
  node1(&a, g, "Identity", "x", "u"); /* not an output: Neg reads x */
  node1(&a, g, "Neg", "u", "w");
  node1(&a, g, "Identity", "t", "t2"); /* t's other reader: follows it to "y" */
  node2(&a, g, "Add", "t2", "w", "v");
  node1(&a, g, "Identity", "x", "xo"); /* a graph input under a second name: stays */
  lt_output(&a, g, "y", F32, 2, (int64_t[]){4, 8});
  lt_output(&a, g, "v", F32, 2, (int64_t[]){4, 8});
  lt_output(&a, g, "xo", F32, 2, (int64_t[]){4, 8});
  onyx_session *opt = session_new(rt, &a, m, NULL);
  onyx_optimization_stats id = stats_of(opt, "identity_elimination");
  assert_int_equal(id.nodes_removed, 3);
  assert_int_equal(id.nodes_skipped, 1);
  assert_int_equal(onyx_session_node_count(opt), 4); /* Relu, Neg, Add, Identity */
  onyx_session *plain = session_new(rt, &a, m, "identity_elimination");
  assert_int_equal(onyx_session_node_count(plain), 7);
  expect_same_outputs(opt, plain);
  onyx_session_destroy(plain);
  onyx_session_destroy(opt);
  onyx_runtime_destroy(rt);
  lt_arena_free(&a);
}

static void passes_switch_off_by_name(void **state) {
  (void)state;
  lt_arena a = {0};
  onyx_runtime *rt = runtime_new(false);
  Onnx__ModelProto *m = fold_model(&a);
  onyx_session *s = session_new(rt, &a, m, " constant_folding , identity_elimination");
  assert_int_equal(onyx_session_node_count(s), 5);
  assert_true(stats_of(s, "dead_node_elimination").ran);
  assert_false(stats_of(s, "constant_folding").ran);
  assert_false(stats_of(s, "identity_elimination").ran);
  onyx_session_destroy(s);

  size_t size = 0;
  uint8_t *bytes = lt_pack(&a, m, &size);
  onyx_session_options so = {.struct_size = sizeof so, .disable_optimizations = "dead_node,all"};
  onyx_error *e = NULL;
  s = NULL;
  assert_int_equal(onyx_session_create_from_bytes(rt, bytes, size, &so, &s, &e),
                   ONYX_STATUS_INVALID_ARGUMENT);
  assert_null(s);
  assert_non_null(strstr(onyx_error_message(e), "unknown optimization 'dead_node'"));
  assert_non_null(strstr(onyx_error_message(e), "constant_folding"));
  onyx_error_free(e);
  assert_int_equal(weights_used(rt, NULL), 0); /* the refused session booked nothing */

  /* A caller built before the field existed gets every pass. */
  onyx_session_options old = {.struct_size = offsetof(onyx_session_options, disable_optimizations)};
  assert_int_equal(onyx_session_create_from_bytes(rt, bytes, size, &old, &s, NULL), ONYX_STATUS_OK);
  assert_int_equal(onyx_session_node_count(s), 2);
  onyx_session_destroy(s);

  onyx_optimization_stats st = {.struct_size = 4};
  assert_int_equal(onyx_session_optimization_stats(NULL, 0, &st), ONYX_STATUS_INVALID_ARGUMENT);
  assert_null(onyx_optimization_name(onyx_optimization_count()));
  onyx_runtime_destroy(rt);
  lt_arena_free(&a);
}

/* ------------------------------------------------------------ node info (ABI v2) */

/* Probe(x, C, relu(x)) [and Add(x, C) when shared]: flags and sums. */
static Onnx__ModelProto *probe_model(lt_arena *a, bool copy, bool shared) {
  Onnx__ModelProto *m = lt_model(a, 17);
  lt_opset(a, m, "test.onyx", 1);
  Onnx__GraphProto *g = m->graph;
  lt_input(a, g, "x", F32, 1, (int64_t[]){256});
  float_init(a, g, "C", 1, (int64_t[]){256});
  node1(a, g, "Relu", "x", "r");
  Onnx__NodeProto *p = lt_node(a, g, "Probe", "probe", (const char *[]){"x", "C", "r", NULL},
                               (const char *[]){"flags", "sums", NULL});
  p->domain = lt_str(a, "test.onyx");
  Onnx__AttributeProto *at = lt_attr(a, p, "copy", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
  at->has_i = 1;
  at->i = copy;
  lt_output(a, g, "flags", F32, 1, (int64_t[]){3});
  lt_output(a, g, "sums", F32, 1, (int64_t[]){3});
  if (shared) {
    node2(a, g, "Add", "x", "C", "xc");
    lt_output(a, g, "xc", F32, 1, (int64_t[]){256});
  }
  return m;
}

/* Runs the probe model; checks the flags and the sums against the inputs. */
static void expect_probe(onyx_session *s, const float *C) {
  onyx_tensor *in = random_inputs(s);
  onyx_tensor *out = run(s, in);
  assert_memory_equal(out[0].data, ((float[]){0, 1, 0}), 3 * sizeof(float));
  const float *x = in[0].data, *sums = out[1].data;
  double want[3] = {0, 0, 0};
  for (int i = 0; i < 256; ++i) {
    want[0] += x[i];
    want[1] += C[i];
    want[2] += x[i] > 0 ? x[i] : 0;
  }
  for (int k = 0; k < 3; ++k)
    if (sums[k] - want[k] > 1e-3 || want[k] - sums[k] > 1e-3)
      fail_msg("sum of input %d: got %.6g, want %.6g", k, sums[k], want[k]);
  outputs_free(out, onyx_session_output_count(s));
  inputs_free(in, 1);
}

static const float *initializer_values(const Onnx__ModelProto *m, const char *name) {
  for (size_t i = 0; i < m->graph->n_initializer; ++i)
    if (!strcmp(m->graph->initializer[i]->name, name)) return m->graph->initializer[i]->float_data;
  return NULL;
}

static void kernels_see_which_inputs_are_constant(void **state) {
  (void)state;
  lt_arena a = {0};
  onyx_runtime *rt = runtime_new(true);
  Onnx__ModelProto *m = probe_model(&a, false, false);
  for (int pass = 0; pass < 2; ++pass) { /* the field does not depend on the passes */
    onyx_session *s = session_new(rt, &a, m, pass ? "all" : NULL);
    assert_string_equal(onyx_session_node_provider(s, 1), "probe");
    expect_probe(s, initializer_values(m, "C"));
    assert_int_equal(weights_used(rt, NULL), 256 * sizeof(float));
    onyx_session_destroy(s);
  }
  onyx_runtime_destroy(rt);
  lt_arena_free(&a);
}

static void a_copied_constant_is_released_unless_shared(void **state) {
  (void)state;
  lt_arena a = {0};
  onyx_runtime *rt = runtime_new(true);
  const uint64_t C = 256 * sizeof(float), copy = C + 64; /* PROBE_PAD */
  for (int shared = 0; shared < 2; ++shared) {
    Onnx__ModelProto *m = probe_model(&a, true, shared);
    onyx_session *s = session_new(rt, &a, m, NULL);
    /* The kernel's copy, plus the original only while the Add still reads it. */
    uint64_t peak = 0;
    assert_int_equal(weights_used(rt, &peak), shared ? C + copy : copy);
    assert_int_equal(peak, C + copy);
    expect_probe(s, initializer_values(m, "C"));
    expect_probe(s, initializer_values(m, "C"));
    onyx_session_destroy(s);
    assert_int_equal(weights_used(rt, NULL), 0);
  }
  onyx_runtime_destroy(rt);
  lt_arena_free(&a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(folding_matches_unoptimized),
      cmocka_unit_test(folded_transpose_keeps_a_shared_source),
      cmocka_unit_test(folded_transpose_frees_an_unshared_source),
      cmocka_unit_test(folding_peak_is_one_tensor_above_the_weights),
      cmocka_unit_test(constant_output_becomes_an_initializer),
      cmocka_unit_test(large_results_are_not_folded),
      cmocka_unit_test(dead_nodes_go_and_free_their_weights),
      cmocka_unit_test(identity_to_a_graph_output_keeps_its_name),
      cmocka_unit_test(passes_switch_off_by_name),
      cmocka_unit_test(kernels_see_which_inputs_are_constant),
      cmocka_unit_test(a_copied_constant_is_released_unless_shared),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
