/*
 * The silu_matmul pass (core/optimize/silu_matmul.c) on a synthetic decoder MLP,
 *
 *   g = MatMul(x, Wg)   u = MatMul(x, Wu)   m = Mul(Mul(g, Sigmoid(g)), u)   y = MatMul(m, Wd)
 *
 * which gate_up_silu turns into h = MatMul(x, [Wg | Wu]), m = ai.onyx::SiluMul(h): it
 * fires (SiluMul and the down MatMul become one ai.onyx::SiluMulMatMul, on the CPU) and
 * y is the graph without it bit for bit on fresh random float32 inputs. It leaves the
 * pair alone when m has another reader or is a graph output, when Wd is not a constant,
 * when N is not a multiple of 8; disable_optimizations = "silu_matmul" turns it off.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "loader_test_util.h"
#include "onyx.h"

enum { F32 = ONYX_DTYPE_FLOAT32 };
enum { K = 48, I = 40, N = 40, ROWS = 3 };

static uint64_t g_rng;

static float frand(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return (float)((g_rng >> 40) * (2.0 / 16777216.0)) - 1.0f;
}

static onyx_runtime *runtime_new(void) {
  char tmpl[] = "/tmp/onyx-smm-XXXXXX";
  int fd = mkstemp(tmpl);
  assert_true(fd >= 0);
  char text[1024];
  int n = snprintf(text, sizeof text, "[provider.cpu]\npath = %s\n", CPU_PROVIDER);
  assert_int_equal(write(fd, text, (size_t)n), n);
  close(fd);
  onyx_runtime *rt = NULL;
  onyx_error *e = NULL;
  onyx_status st = onyx_runtime_create(tmpl, &rt, &e);
  if (st != ONYX_STATUS_OK) fprintf(stderr, "runtime: %s\n", onyx_error_message(e));
  onyx_error_free(e);
  unlink(tmpl);
  assert_int_equal(st, ONYX_STATUS_OK);
  return rt;
}

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

static onyx_optimization_stats stats_of(const onyx_session *s) {
  for (size_t i = 0; i < onyx_optimization_count(); ++i) {
    if (strcmp(onyx_optimization_name(i), "silu_matmul") != 0) continue;
    onyx_optimization_stats st = {.struct_size = sizeof st};
    assert_int_equal(onyx_session_optimization_stats(s, i, &st), ONYX_STATUS_OK);
    return st;
  }
  fail_msg("%s", "no pass named silu_matmul");
  return (onyx_optimization_stats){0};
}

static void float_init(lt_arena *a, Onnx__GraphProto *g, const char *name, size_t rank,
                       const int64_t *dims, float scale, float offset) {
  Onnx__TensorProto *t = lt_tensor(a, name, F32, rank, dims);
  size_t n = 1;
  for (size_t d = 0; d < rank; ++d) n *= (size_t)dims[d];
  float *v = lt_alloc(a, n * sizeof *v);
  for (size_t i = 0; i < n; ++i) v[i] = offset + scale * frand();
  lt_floats(a, t, v, n);
  lt_initializer(a, g, t);
}

typedef enum extra_reader {
  EXTRA_NONE,
  EXTRA_M_OUTPUT, /* m is also a graph output */
  EXTRA_M_READER, /* m is read by another node */
} extra_reader;

typedef struct smm_opts {
  extra_reader extra;
  bool w_input; /* Wd is a graph input */
  int64_t n;    /* the down product's N; 0: N */
} smm_opts;

static Onnx__ModelProto *model(lt_arena *a, const smm_opts *o) {
  const int64_t n = o->n ? o->n : N;
  Onnx__ModelProto *m = lt_model(a, 17);
  Onnx__GraphProto *g = m->graph;
  lt_input(a, g, "x", F32, 2, (int64_t[]){ROWS, K});
  float_init(a, g, "Wg", 2, (int64_t[]){K, I}, 0.3f, 0.0f);
  float_init(a, g, "Wu", 2, (int64_t[]){K, I}, 0.3f, 0.0f);
  if (o->w_input)
    lt_input(a, g, "Wd", F32, 2, (int64_t[]){I, n});
  else
    float_init(a, g, "Wd", 2, (int64_t[]){I, n}, 0.3f, 0.0f);
  lt_node(a, g, "MatMul", "gate", (const char *[]){"x", "Wg", NULL}, (const char *[]){"g", NULL});
  lt_node(a, g, "MatMul", "up", (const char *[]){"x", "Wu", NULL}, (const char *[]){"u", NULL});
  lt_node(a, g, "Sigmoid", "sig", (const char *[]){"g", NULL}, (const char *[]){"s", NULL});
  lt_node(a, g, "Mul", "act", (const char *[]){"g", "s", NULL}, (const char *[]){"c", NULL});
  lt_node(a, g, "Mul", "fin", (const char *[]){"c", "u", NULL}, (const char *[]){"m", NULL});
  lt_node(a, g, "MatMul", "down", (const char *[]){"m", "Wd", NULL}, (const char *[]){"y", NULL});
  lt_output(a, g, "y", F32, 2, (int64_t[]){ROWS, n});
  if (o->extra == EXTRA_M_OUTPUT) lt_output(a, g, "m", F32, 2, (int64_t[]){ROWS, I});
  if (o->extra == EXTRA_M_READER) {
    lt_node(a, g, "Neg", "other", (const char *[]){"m", NULL}, (const char *[]){"q", NULL});
    lt_output(a, g, "q", F32, 2, (int64_t[]){ROWS, I});
  }
  return m;
}

static onyx_tensor *random_inputs(const onyx_session *s) {
  size_t n = onyx_session_input_count(s);
  onyx_tensor *in = calloc(n + 1, sizeof *in);
  for (size_t i = 0; i < n; ++i) {
    onyx_value_info info = onyx_session_input_info(s, i);
    in[i] = (onyx_tensor){.dtype = info.dtype, .rank = (uint32_t)info.rank};
    for (int32_t d = 0; d < info.rank; ++d) in[i].dims[d] = info.dims[d];
    int64_t count = onyx_tensor_numel(&in[i]);
    in[i].data = malloc((size_t)count * sizeof(float) + 1);
    for (int64_t k = 0; k < count; ++k) ((float *)in[i].data)[k] = 3.0f * frand();
  }
  return in;
}

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

/* Both sessions on the same fresh inputs give the same bits. */
static void expect_same_outputs(onyx_session *opt, onyx_session *plain) {
  size_t nout = onyx_session_output_count(plain), nin = onyx_session_input_count(plain);
  for (int trial = 0; trial < 3; ++trial) {
    onyx_tensor *in = random_inputs(plain);
    onyx_tensor *x = run(opt, in), *y = run(plain, in);
    for (size_t o = 0; o < nout; ++o) {
      assert_int_equal(x[o].rank, y[o].rank);
      assert_memory_equal(x[o].dims, y[o].dims, sizeof x[o].dims);
      const float *p = x[o].data, *q = y[o].data;
      for (int64_t k = 0; k < onyx_tensor_numel(&x[o]); ++k)
        if (memcmp(&p[k], &q[k], sizeof p[k]) != 0)
          fail_msg("output %zu [%lld]: fused %.9g, unfused %.9g", o, (long long)k, p[k], q[k]);
      onyx_tensor_data_free(x[o].data);
      onyx_tensor_data_free(y[o].data);
    }
    free(x);
    free(y);
    for (size_t i = 0; i < nin; ++i) free(in[i].data);
    free(in);
  }
}

static void expect_fused(const smm_opts *o) {
  lt_arena a = {0};
  onyx_runtime *rt = runtime_new();
  Onnx__ModelProto *m = model(&a, o);
  onyx_session *opt = session_new(rt, &a, m, NULL);
  onyx_session *plain = session_new(rt, &a, m, "silu_matmul");
  assert_int_equal(onyx_session_node_count(plain), 3); /* MatMul, SiluMul, MatMul */
  assert_int_equal(onyx_session_node_count(opt), 2);
  assert_string_equal(onyx_session_node_op(plain, 1), "SiluMul");
  assert_string_equal(onyx_session_node_op(opt, 0), "MatMul");
  assert_string_equal(onyx_session_node_op(opt, 1), "SiluMulMatMul");
  assert_string_equal(onyx_session_node_provider(opt, 1), "cpu");
  onyx_optimization_stats st = stats_of(opt);
  assert_true(st.ran);
  assert_int_equal(st.nodes_removed, 1);
  assert_int_equal(st.nodes_skipped, 0);
  assert_int_equal(st.bytes_added, 0);
  assert_false(stats_of(plain).ran);
  expect_same_outputs(opt, plain);
  onyx_session_destroy(opt);
  onyx_session_destroy(plain);
  onyx_runtime_destroy(rt);
  lt_arena_free(&a);
}

static void expect_left(const smm_opts *o) {
  lt_arena a = {0};
  onyx_runtime *rt = runtime_new();
  Onnx__ModelProto *m = model(&a, o);
  onyx_session *s = session_new(rt, &a, m, NULL);
  size_t nodes = onyx_session_node_count(s);
  bool silu = false;
  for (size_t i = 0; i < nodes; ++i) {
    assert_string_not_equal(onyx_session_node_op(s, i), "SiluMulMatMul");
    silu |= strcmp(onyx_session_node_op(s, i), "SiluMul") == 0;
  }
  assert_true(silu); /* gate_up_silu fired: the pair was there to fuse */
  onyx_optimization_stats st = stats_of(s);
  assert_true(st.ran);
  assert_int_equal(st.nodes_removed, 0);
  assert_int_equal(st.nodes_skipped, 1);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
  lt_arena_free(&a);
}

static void fires_on_the_down_product(void **state) {
  (void)state;
  expect_fused(&(smm_opts){0});
  expect_fused(&(smm_opts){.n = 24});
}

static void left_when_m_is_seen(void **state) {
  (void)state;
  expect_left(&(smm_opts){.extra = EXTRA_M_OUTPUT});
  expect_left(&(smm_opts){.extra = EXTRA_M_READER});
}

static void left_when_the_weight_does_not_fit(void **state) {
  (void)state;
  expect_left(&(smm_opts){.w_input = true});
  expect_left(&(smm_opts){.n = 36});
}

static void switches_off_by_name(void **state) {
  (void)state;
  lt_arena a = {0};
  onyx_runtime *rt = runtime_new();
  Onnx__ModelProto *m = model(&a, &(smm_opts){0});
  onyx_session *s = session_new(rt, &a, m, "norm_matmul, silu_matmul");
  assert_int_equal(onyx_session_node_count(s), 3);
  assert_false(stats_of(s).ran);
  onyx_session_destroy(s);
  onyx_runtime_destroy(rt);
  lt_arena_free(&a);
}

int main(void) {
  const char *seed = getenv("SILU_MATMUL_SEED");
  g_rng = seed ? strtoull(seed, NULL, 0) : (uint64_t)time(NULL) * 2654435761u;
  if (g_rng == 0) g_rng = 1;
  printf("silu_matmul_test: seed %llu (SILU_MATMUL_SEED repeats it)\n", (unsigned long long)g_rng);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(fires_on_the_down_product),
      cmocka_unit_test(left_when_m_is_seen),
      cmocka_unit_test(left_when_the_weight_does_not_fit),
      cmocka_unit_test(switches_off_by_name),
  };
  return cmocka_run_group_tests_name("silu_matmul", tests, NULL, NULL);
}
