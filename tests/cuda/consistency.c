/*
 * Backend consistency: the same small models run through two plugins.ini files — a
 * reference (CPU only) and a configuration under test (e.g. CUDA first) — and their
 * outputs are compared with tolerances that fit the dtype. In the spirit of ggml's
 * test-backend-ops: every op the provider under test claims, on fresh random inputs.
 *
 *   onyx_consistency REFERENCE.ini UNDER_TEST.ini PROVIDER [SEED]
 *
 * PROVIDER names the provider under test; each case checks that the op's node was
 * really placed on it (otherwise the comparison would prove nothing). A case whose op
 * the reference cannot run is reported as "no reference" and not counted as a pass.
 * When PROVIDER declines to load (no device), the runner prints a skip line and
 * exits 0. Exit status 1 when any case failed.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model_builder.h"
#include "onyx.h"
#include "tensor_compare.h"
#include "test_util_host.h"

#define MAX_IO 6

typedef struct runner {
  onyx_runtime *ref, *test;
  const char *provider;
  uint64_t seed;       /* the generator's state */
  uint64_t first_seed; /* as printed, to repeat a run */
  int passed, failed, no_reference;
} runner;

/* One case under construction: the model, its random inputs, the op it is about. */
typedef struct ocase {
  char label[160];
  const char *op;
  mb_model *m;
  onyx_tensor inputs[MAX_IO];
  size_t input_count;
  double tol_scale; /* widens the dtype's tolerance (long reductions) */
  bool all_nodes;   /* every node, not only those of `op`, must be on the provider */
} ocase;

static runner g;

static void case_begin(ocase *c, int64_t opset, const char *op, const char *fmt, ...) {
  memset(c, 0, sizeof *c);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->label, sizeof c->label, fmt, ap);
  va_end(ap);
  c->op = op;
  c->m = mb_new(opset);
  c->tol_scale = 1.0;
}

static void case_input(ocase *c, const char *name, uint32_t dtype, uint32_t rank,
                       const int64_t *dims, float lo, float hi) {
  mb_input(c->m, name, dtype, rank, dims);
  c->inputs[c->input_count++] = tu_random_tensor(&g.seed, dtype, rank, dims, lo, hi);
}

static bool is_float_type(uint32_t dtype) {
  return dtype == ONYX_DTYPE_FLOAT32 || dtype == ONYX_DTYPE_FLOAT16 || dtype == ONYX_DTYPE_BFLOAT16;
}

/*
 * A host tensor of int32, int64 or bool with fresh random integers in [lo, hi] (bool
 * stores v != 0). `nonzero` redraws zeros, for divisors. tu_random_tensor only writes
 * floats, and an integer input must hold integers: a float's bits would be nonsense.
 * Never all zeros: a tensor that came out so gets one element set to a nonzero bound.
 */
static onyx_tensor random_int_tensor(uint32_t dtype, uint32_t rank, const int64_t *dims, int64_t lo,
                                     int64_t hi, bool nonzero) {
  onyx_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = dtype;
  t.rank = rank;
  t.device = ONYX_DEVICE_HOST;
  for (uint32_t i = 0; i < rank; ++i) t.dims[i] = dims[i];
  const int64_t n = onyx_tensor_numel(&t);
  t.data = malloc((size_t)(n ? n : 1) * onyx_dtype_size(dtype));
  const uint64_t span = (uint64_t)hi - (uint64_t)lo + 1; /* callers keep hi - lo < 2^63 */
  const int64_t fallback = hi != 0 ? hi : lo;
  bool any = false;
  for (int64_t i = 0; t.data && i < n; ++i) {
    int64_t v = 0;
    for (int tries = 0; tries < 8; ++tries) {
      uint64_t r = (uint64_t)tu_rand(&g.seed) << 32 | tu_rand(&g.seed);
      v = (int64_t)((uint64_t)lo + r % span);
      if (!nonzero || v != 0) break;
    }
    if (nonzero && v == 0) v = fallback;
    if (!any && i == n - 1 && v == 0) v = fallback;
    any |= v != 0;
    if (dtype == ONYX_DTYPE_INT64)
      ((int64_t *)t.data)[i] = v;
    else if (dtype == ONYX_DTYPE_INT32)
      ((int32_t *)t.data)[i] = (int32_t)v;
    else
      ((uint8_t *)t.data)[i] = v != 0;
  }
  return t;
}

/* A graph input of int32, int64 or bool with random integers in [lo, hi]. */
static void case_int_input(ocase *c, const char *name, uint32_t dtype, uint32_t rank,
                           const int64_t *dims, int64_t lo, int64_t hi, bool nonzero) {
  mb_input(c->m, name, dtype, rank, dims);
  c->inputs[c->input_count++] = random_int_tensor(dtype, rank, dims, lo, hi, nonzero);
}

/* A graph input of any dtype the cases use: floats in [-2, 2], integers in [-3, 3]. */
static void case_any_input(ocase *c, const char *name, uint32_t dtype, uint32_t rank,
                           const int64_t *dims) {
  if (is_float_type(dtype))
    case_input(c, name, dtype, rank, dims, -2.0f, 2.0f);
  else
    case_int_input(c, name, dtype, rank, dims, -3, 3, false);
}

/* A float initializer of random values (weights, caches). */
static void case_weight(ocase *c, const char *name, uint32_t dtype, uint32_t rank,
                        const int64_t *dims, float lo, float hi) {
  onyx_tensor t = tu_random_tensor(&g.seed, dtype, rank, dims, lo, hi);
  mb_initializer(c->m, name, dtype, rank, dims, t.data,
                 (size_t)onyx_tensor_numel(&t) * onyx_dtype_size(dtype));
  free(t.data);
}

static onyx_session *make_session(onyx_runtime *rt, const uint8_t *bytes, size_t size,
                                  onyx_error **err) {
  onyx_session *s = NULL;
  onyx_session_options so = {.struct_size = sizeof so, .print_placement = false};
  if (onyx_session_create_from_bytes(rt, bytes, size, &so, &s, err) != ONYX_STATUS_OK) return NULL;
  return s;
}

/* Runs the case through both configurations and compares every output. */
static void case_run(ocase *c) {
  size_t size = 0;
  uint8_t *bytes = mb_finish(c->m, &size);
  onyx_error *e = NULL;
  onyx_session *ref = NULL, *test = NULL;
  bool ok = bytes != NULL;
  char why[1024] = "";
  if (!ok) snprintf(why, sizeof why, "cannot build the model");
  if (ok && (test = make_session(g.test, bytes, size, &e)) == NULL) {
    snprintf(why, sizeof why, "session under test: %s", onyx_error_message(e));
    ok = false;
  }
  onyx_error_free(e);
  e = NULL;
  /* The op must really run on the provider under test (and be there at all: a node
   * the core dropped would leave nothing to compare). */
  bool found = false;
  for (size_t i = 0; ok && i < onyx_session_node_count(test); ++i) {
    const char *op = onyx_session_node_op(test, i);
    /* transpose_weights gives a MatMul of a constant 16-bit weight the provider's
     * preferred layout as com.microsoft FusedMatMul (transB = 1): the same product. */
    bool is_op =
        strcmp(op, c->op) == 0 || (strcmp(c->op, "MatMul") == 0 && strcmp(op, "FusedMatMul") == 0);
    found |= is_op;
    if (!is_op && !c->all_nodes) continue;
    if (strcmp(onyx_session_node_provider(test, i), g.provider) != 0) {
      snprintf(why, sizeof why, "%s (node %zu) was placed on '%s', not '%s'", op, i,
               onyx_session_node_provider(test, i), g.provider);
      ok = false;
    }
  }
  if (ok && !found) {
    snprintf(why, sizeof why, "the session under test has no %s node", c->op);
    ok = false;
  }
  if (ok && (ref = make_session(g.ref, bytes, size, &e)) == NULL) {
    if (onyx_error_status(e) == ONYX_STATUS_UNSUPPORTED) {
      printf("  %-58s no reference (%s)\n", c->label, onyx_error_message(e));
      g.no_reference++;
      onyx_error_free(e);
      goto done;
    }
    snprintf(why, sizeof why, "reference session: %s", onyx_error_message(e));
    ok = false;
  }
  onyx_error_free(e);
  e = NULL;
  size_t nout = ok ? onyx_session_output_count(test) : 0;
  onyx_tensor want[MAX_IO], got[MAX_IO];
  memset(want, 0, sizeof want);
  memset(got, 0, sizeof got);
  if (ok && onyx_session_run(ref, NULL, c->inputs, c->input_count, want, &e) != ONYX_STATUS_OK) {
    snprintf(why, sizeof why, "reference run: %s", onyx_error_message(e));
    ok = false;
    nout = 0;
  }
  onyx_error_free(e);
  e = NULL;
  if (ok && onyx_session_run(test, NULL, c->inputs, c->input_count, got, &e) != ONYX_STATUS_OK) {
    snprintf(why, sizeof why, "run under test: %s", onyx_error_message(e));
    ok = false;
    for (size_t i = 0; i < nout; ++i) onyx_tensor_data_free(want[i].data);
    nout = 0;
  }
  onyx_error_free(e);
  double worst = 0;
  for (size_t i = 0; i < nout; ++i) {
    double rtol, atol;
    tensor_default_tolerance(want[i].dtype, &rtol, &atol);
    tensor_diff d = tensor_compare(&got[i], &want[i], rtol * c->tol_scale, atol * c->tol_scale);
    if (d.worst_abs > worst) worst = d.worst_abs;
    if (ok && !d.ok) {
      char a[96], b[96];
      if (d.why[0])
        snprintf(why, sizeof why, "output %zu: %s", i, d.why);
      else
        snprintf(why, sizeof why,
                 "output %zu %s vs %s: %lld mismatches, first at %lld: got %.6g want %.6g "
                 "(worst abs %.3g)",
                 i, tensor_describe(&got[i], a, sizeof a), tensor_describe(&want[i], b, sizeof b),
                 (long long)d.mismatches, (long long)d.first_bad, d.first_got, d.first_want,
                 d.worst_abs);
      ok = false;
    }
    onyx_tensor_data_free(want[i].data);
    onyx_tensor_data_free(got[i].data);
  }
  if (ok) {
    printf("  %-58s ok (worst abs diff %.3g)\n", c->label, worst);
    g.passed++;
  } else {
    printf("  %-58s FAIL: %s\n", c->label, why);
    g.failed++;
  }
done:
  onyx_session_destroy(ref);
  onyx_session_destroy(test);
  free(bytes);
  mb_free(c->m);
  for (size_t i = 0; i < c->input_count; ++i) free(c->inputs[i].data);
}

static const char *dname(uint32_t d) { return dtype_to_string(d); }

/* ------------------------------------------------------------------ cases */

static const uint32_t float_types[] = {ONYX_DTYPE_FLOAT32, ONYX_DTYPE_FLOAT16, ONYX_DTYPE_BFLOAT16};
#define FOR_FLOATS(d) for (size_t fi_ = 0; fi_ < 3 && ((d) = float_types[fi_], 1); ++fi_)

static void binary_case(const char *op, uint32_t d, uint32_t ra, const int64_t *da, uint32_t rb,
                        const int64_t *db, float lo_b, float hi_b) {
  ocase c;
  case_begin(&c, 13, op, "%s %s rank%u x rank%u", op, dname(d), ra, rb);
  case_input(&c, "a", d, ra, da, -2.0f, 2.0f);
  case_input(&c, "b", d, rb, db, lo_b, hi_b);
  const char *in[] = {"a", "b"}, *out[] = {"y"};
  mb_add_node(c.m, op, "", in, 2, out, 1);
  mb_output(c.m, "y", op[0] == 'E' ? ONYX_DTYPE_BOOL : d);
  case_run(&c);
}

static void unary_case(const char *op, uint32_t d, float lo, float hi) {
  ocase c;
  int64_t dims[] = {2, 3, 33};
  case_begin(&c, 13, op, "%s %s", op, dname(d));
  case_input(&c, "x", d, 3, dims, lo, hi);
  const char *in[] = {"x"}, *out[] = {"y"};
  mb_add_node(c.m, op, "", in, 1, out, 1);
  mb_output(c.m, "y", d);
  case_run(&c);
}

static void elementwise_cases(void) {
  static const char *binary[] = {"Add", "Sub", "Mul", "Div"};
  int64_t a4[] = {2, 3, 4, 5}, b2[] = {4, 1}, s0[] = {1};
  uint32_t d;
  FOR_FLOATS(d) {
    for (size_t i = 0; i < 4; ++i) {
      binary_case(binary[i], d, 4, a4, 2, b2, 0.5f, 2.0f);
      binary_case(binary[i], d, 2, b2, 4, a4, 0.5f, 2.0f); /* broadcast on the left */
    }
    binary_case("Add", d, 4, a4, 4, a4, -2.0f, 2.0f);
    binary_case("Mul", d, 4, a4, 0, s0, -2.0f, 2.0f);
    unary_case("Relu", d, -2.0f, 2.0f);
    unary_case("Sigmoid", d, -6.0f, 6.0f);
    unary_case("Tanh", d, -3.0f, 3.0f);
    unary_case("Neg", d, -3.0f, 3.0f);
    unary_case("Sqrt", d, 0.01f, 4.0f);
    unary_case("Erf", d, -2.0f, 2.0f);
  }
  /* Pow with positive bases (a ^ b with a in [0.5, 2]). */
  FOR_FLOATS(d) {
    ocase c;
    int64_t da[] = {3, 4}, db[] = {4};
    case_begin(&c, 13, "Pow", "Pow %s positive base, broadcast exponent", dname(d));
    case_input(&c, "a", d, 2, da, 0.5f, 2.0f);
    case_input(&c, "b", d, 1, db, -2.0f, 2.0f);
    const char *in[] = {"a", "b"}, *out[] = {"y"};
    mb_add_node(c.m, "Pow", "", in, 2, out, 1);
    mb_output(c.m, "y", d);
    case_run(&c);
  }
  /* Where(Equal(a, b), x, y): equality of rounded values, then a select. */
  FOR_FLOATS(d) {
    ocase c;
    int64_t dims[] = {4, 6}, row[] = {6};
    case_begin(&c, 13, "Where", "Equal+Where %s", dname(d));
    case_input(&c, "a", d, 2, dims, -2.0f, 2.0f);
    case_input(&c, "x", d, 2, dims, -2.0f, 2.0f);
    case_input(&c, "y", d, 1, row, -2.0f, 2.0f);
    /* a == Relu(a) holds exactly where a >= 0: a mixed mask. */
    const char *r_in[] = {"a"}, *r_out[] = {"ra"};
    mb_add_node(c.m, "Relu", "", r_in, 1, r_out, 1);
    const char *eq_in[] = {"a", "ra"}, *eq_out[] = {"c"};
    mb_add_node(c.m, "Equal", "", eq_in, 2, eq_out, 1);
    const char *w_in[] = {"c", "x", "y"}, *w_out[] = {"z"};
    mb_add_node(c.m, "Where", "", w_in, 3, w_out, 1);
    mb_output(c.m, "z", d);
    case_run(&c);
  }
}

static void matmul_case(uint32_t d, uint32_t ra, const int64_t *da, uint32_t rb, const int64_t *db,
                        const char *what) {
  ocase c;
  case_begin(&c, 13, "MatMul", "MatMul %s %s", dname(d), what);
  case_input(&c, "a", d, ra, da, -1.0f, 1.0f);
  case_input(&c, "b", d, rb, db, -1.0f, 1.0f);
  c.tol_scale = 2.0;
  const char *in[] = {"a", "b"}, *out[] = {"y"};
  mb_add_node(c.m, "MatMul", "", in, 2, out, 1);
  mb_output(c.m, "y", d);
  case_run(&c);
}

static void matmul_cases(void) {
  uint32_t d;
  FOR_FLOATS(d) {
    int64_t a1[] = {2, 3, 8, 16}, b1[] = {16, 12};
    matmul_case(d, 4, a1, 2, b1, "batched A x 2-D B (fold)");
    int64_t a2[] = {3, 8, 16}, b2[] = {3, 16, 12};
    matmul_case(d, 3, a2, 3, b2, "equal batches (strided)");
    int64_t a3[] = {8, 16}, b3[] = {2, 3, 16, 12};
    matmul_case(d, 2, a3, 4, b3, "2-D A x batched B (stride 0)");
    int64_t a4[] = {2, 1, 4, 8}, b4[] = {1, 3, 8, 6};
    matmul_case(d, 4, a4, 4, b4, "broadcast batches (loop)");
    int64_t a5[] = {16}, b5[] = {2, 16, 5};
    matmul_case(d, 1, a5, 3, b5, "vector A");
    int64_t a6[] = {4, 16}, b6[] = {16};
    matmul_case(d, 2, a6, 1, b6, "vector B");
    int64_t a7[] = {1, 256}, b7[] = {256, 384};
    matmul_case(d, 2, a7, 2, b7, "decode row 1x256x384");
    int64_t a8[] = {96, 256}, b8[] = {256, 160};
    matmul_case(d, 2, a8, 2, b8, "96x256x160");
    /* 16-bit decode rows take the GEMV kernel: K split across blocks with a tail of
     * rows, three rows folded from a batch, and a wide N in one pass over K. */
    int64_t a9[] = {2, 100}, b9[] = {100, 264};
    matmul_case(d, 2, a9, 2, b9, "decode rows 2x100x264 (K split, tail)");
    int64_t a10[] = {3, 1, 512}, b10[] = {512, 1000};
    matmul_case(d, 3, a10, 2, b10, "decode rows 3x1x512x1000 (batch folded)");
    int64_t a11[] = {1, 64}, b11[] = {64, 67584};
    matmul_case(d, 2, a11, 2, b11, "decode row 1x64x67584 (K whole)");
  }
  FOR_FLOATS(d) {
    /* Gemm with transposes, alpha/beta and a broadcast C; weights as initializers. */
    for (int variant = 0; variant < 3; ++variant) {
      ocase c;
      case_begin(&c, 13, "Gemm", "Gemm %s %s", dname(d),
                 variant == 0   ? "transB, C (N), alpha 0.5 beta 2"
                 : variant == 1 ? "transA, C (M,1)"
                                : "no C");
      int64_t a_t[] = {24, 10}, a_n[] = {10, 24}, b_t[] = {7, 24}, b_n[] = {24, 7};
      int64_t c_n[] = {7}, c_m1[] = {10, 1};
      bool ta = variant == 1, tb = variant == 0;
      case_input(&c, "a", d, 2, ta ? a_t : a_n, -1.0f, 1.0f);
      case_weight(&c, "b", d, 2, tb ? b_t : b_n, -1.0f, 1.0f);
      if (variant == 0) case_weight(&c, "c", d, 1, c_n, -1.0f, 1.0f);
      if (variant == 1) case_weight(&c, "c", d, 2, c_m1, -1.0f, 1.0f);
      const char *in[] = {"a", "b", "c"}, *out[] = {"y"};
      mb_node *n = mb_add_node(c.m, "Gemm", "", in, variant == 2 ? 2 : 3, out, 1);
      if (ta) mb_attr_int(n, "transA", 1);
      if (tb) mb_attr_int(n, "transB", 1);
      if (variant == 0) {
        mb_attr_float(n, "alpha", 0.5f);
        mb_attr_float(n, "beta", 2.0f);
      }
      mb_output(c.m, "y", d);
      c.tol_scale = 2.0;
      case_run(&c);
    }
  }
}

static void softmax_cases(void) {
  uint32_t d;
  FOR_FLOATS(d) {
    struct {
      int64_t opset, axis;
      const char *what;
    } v[] = {{13, -1, "opset 13 axis -1"},
             {13, 1, "opset 13 axis 1 (strided)"},
             {11, 1, "opset 11 axis 1 (2-D coerced)"}};
    for (size_t i = 0; i < 3; ++i) {
      ocase c;
      int64_t dims[] = {2, 5, 37};
      case_begin(&c, v[i].opset, "Softmax", "Softmax %s %s", dname(d), v[i].what);
      case_input(&c, "x", d, 3, dims, -4.0f, 4.0f);
      const char *in[] = {"x"}, *out[] = {"y"};
      mb_node *n = mb_add_node(c.m, "Softmax", "", in, 1, out, 1);
      mb_attr_int(n, "axis", v[i].axis);
      mb_output(c.m, "y", d);
      case_run(&c);
    }
    ocase c;
    int64_t wide[] = {3, 3000};
    case_begin(&c, 13, "Softmax", "Softmax %s rows of 3000", dname(d));
    case_input(&c, "x", d, 2, wide, -8.0f, 8.0f);
    const char *in[] = {"x"}, *out[] = {"y"};
    mb_add_node(c.m, "Softmax", "", in, 1, out, 1);
    mb_output(c.m, "y", d);
    case_run(&c);
  }
}

static void layout_cases(void) {
  uint32_t d;
  FOR_FLOATS(d) {
    ocase c;
    int64_t x3[] = {2, 3, 4}, x4[] = {2, 3, 4, 5};
    { /* Reshape with 0 and -1 */
      case_begin(&c, 14, "Reshape", "Reshape %s [2,3,4] -> [0,-1]", dname(d));
      case_input(&c, "x", d, 3, x3, -1.0f, 1.0f);
      int64_t shape[] = {0, -1};
      mb_init_ints(c.m, "shape", shape, 2);
      const char *in[] = {"x", "shape"}, *out[] = {"y"};
      mb_add_node(c.m, "Reshape", "", in, 2, out, 1);
      mb_output(c.m, "y", d);
      case_run(&c);
    }
    { /* Transpose */
      case_begin(&c, 13, "Transpose", "Transpose %s perm 0,2,1,3", dname(d));
      case_input(&c, "x", d, 4, x4, -1.0f, 1.0f);
      const char *in[] = {"x"}, *out[] = {"y"};
      int64_t perm[] = {0, 2, 1, 3};
      mb_attr_ints(mb_add_node(c.m, "Transpose", "", in, 1, out, 1), "perm", perm, 4);
      mb_output(c.m, "y", d);
      case_run(&c);
      case_begin(&c, 13, "Transpose", "Transpose %s default (reverse)", dname(d));
      case_input(&c, "x", d, 3, x3, -1.0f, 1.0f);
      mb_add_node(c.m, "Transpose", "", in, 1, out, 1);
      mb_output(c.m, "y", d);
      case_run(&c);
    }
    { /* Concat */
      int64_t a[] = {2, 3, 4}, b[] = {2, 5, 4};
      case_begin(&c, 13, "Concat", "Concat %s axis 1", dname(d));
      case_input(&c, "a", d, 3, a, -1.0f, 1.0f);
      case_input(&c, "b", d, 3, b, -1.0f, 1.0f);
      const char *in[] = {"a", "b", "a"}, *out[] = {"y"};
      mb_attr_int(mb_add_node(c.m, "Concat", "", in, 3, out, 1), "axis", 1);
      mb_output(c.m, "y", d);
      case_run(&c);
    }
    { /* Gather: an embedding lookup (int64) and a gather along axis 1 */
      int64_t table[] = {10, 6}, idx_dims[] = {2, 3};
      int64_t idx[] = {1, 9, 0, -1, 4, 4};
      case_begin(&c, 13, "Gather", "Gather %s axis 0 int64 indices", dname(d));
      case_input(&c, "x", d, 2, table, -1.0f, 1.0f);
      mb_initializer(c.m, "i", ONYX_DTYPE_INT64, 2, idx_dims, idx, sizeof idx);
      const char *in[] = {"x", "i"}, *out[] = {"y"};
      mb_add_node(c.m, "Gather", "", in, 2, out, 1);
      mb_output(c.m, "y", d);
      case_run(&c);
      int32_t idx32[] = {5, 0, 2};
      int64_t idx32_dims[] = {3};
      case_begin(&c, 13, "Gather", "Gather %s axis 1 int32 indices", dname(d));
      case_input(&c, "x", d, 2, table, -1.0f, 1.0f);
      mb_initializer(c.m, "i", ONYX_DTYPE_INT32, 1, idx32_dims, idx32, sizeof idx32);
      mb_attr_int(mb_add_node(c.m, "Gather", "", in, 2, out, 1), "axis", 1);
      mb_output(c.m, "y", d);
      case_run(&c);
    }
    { /* Unsqueeze / Squeeze (13: axes as inputs) and Identity */
      int64_t axes_u[] = {0, 3}, axes_s[] = {1};
      int64_t xs[] = {2, 1, 4};
      case_begin(&c, 13, "Unsqueeze", "Unsqueeze %s axes 0,3", dname(d));
      case_input(&c, "x", d, 3, x3, -1.0f, 1.0f);
      mb_init_ints(c.m, "axes", axes_u, 2);
      const char *in[] = {"x", "axes"}, *out[] = {"y"};
      mb_add_node(c.m, "Unsqueeze", "", in, 2, out, 1);
      mb_output(c.m, "y", d);
      case_run(&c);
      case_begin(&c, 13, "Squeeze", "Squeeze %s axis 1", dname(d));
      case_input(&c, "x", d, 3, xs, -1.0f, 1.0f);
      mb_init_ints(c.m, "axes", axes_s, 1);
      mb_add_node(c.m, "Squeeze", "", in, 2, out, 1);
      mb_output(c.m, "y", d);
      case_run(&c);
      case_begin(&c, 13, "Identity", "Identity %s", dname(d));
      case_input(&c, "x", d, 3, x3, -1.0f, 1.0f);
      mb_add_node(c.m, "Identity", "", in, 1, out, 1);
      mb_output(c.m, "y", d);
      case_run(&c);
    }
    { /* Slice with negative steps, Expand */
      int64_t x2[] = {5, 6};
      int64_t starts[] = {1, -1}, ends[] = {4, -10}, axes[] = {0, 1}, steps[] = {1, -2};
      case_begin(&c, 13, "Slice", "Slice %s steps 1,-2", dname(d));
      case_input(&c, "x", d, 2, x2, -1.0f, 1.0f);
      mb_init_ints(c.m, "starts", starts, 2);
      mb_init_ints(c.m, "ends", ends, 2);
      mb_init_ints(c.m, "axes", axes, 2);
      mb_init_ints(c.m, "steps", steps, 2);
      const char *in[] = {"x", "starts", "ends", "axes", "steps"}, *out[] = {"y"};
      mb_add_node(c.m, "Slice", "", in, 5, out, 1);
      mb_output(c.m, "y", d);
      case_run(&c);
      int64_t xe[] = {3, 1}, shape[] = {2, 3, 4};
      case_begin(&c, 13, "Expand", "Expand %s [3,1] -> [2,3,4]", dname(d));
      case_input(&c, "x", d, 2, xe, -1.0f, 1.0f);
      mb_init_ints(c.m, "shape", shape, 3);
      const char *ein[] = {"x", "shape"};
      mb_add_node(c.m, "Expand", "", ein, 2, out, 1);
      mb_output(c.m, "y", d);
      case_run(&c);
    }
    /* Cast to and from every float type, and to int64 */
    for (size_t t = 0; t < 4; ++t) {
      uint32_t to = t < 3 ? float_types[t] : ONYX_DTYPE_INT64;
      if (to == d) continue;
      ocase cc;
      case_begin(&cc, 13, "Cast", "Cast %s -> %s", dname(d), dname(to));
      case_input(&cc, "x", d, 3, x3, -50.0f, 50.0f);
      const char *in[] = {"x"}, *out[] = {"y"};
      mb_attr_int(mb_add_node(cc.m, "Cast", "", in, 1, out, 1), "to", to);
      mb_output(cc.m, "y", to);
      case_run(&cc);
    }
  }
}

/* "[2,3,4]" ("[]" for a scalar) into buf, for case labels. */
static const char *shape_str(char *buf, size_t cap, uint32_t rank, const int64_t *dims) {
  size_t n = (size_t)snprintf(buf, cap, "[");
  for (uint32_t i = 0; i < rank && n < cap; ++i)
    n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? "," : "", (long long)dims[i]);
  if (n < cap) snprintf(buf + n, cap - n, "]");
  return buf;
}

/* A binary op on int32/int64/bool operands drawn from [-ra, ra] and [-rb, rb] (bool:
 * [0, 1]); Div's divisor is never zero. Outputs compare exactly. */
static void int_binary_case(const char *op, uint32_t d, uint32_t rank_a, const int64_t *da,
                            uint32_t rank_b, const int64_t *db, int64_t ra, int64_t rb) {
  ocase c;
  char sa[48], sb[48];
  case_begin(&c, 13, op, "%s %s %s x %s", op, dname(d), shape_str(sa, sizeof sa, rank_a, da),
             shape_str(sb, sizeof sb, rank_b, db));
  bool is_bool = d == ONYX_DTYPE_BOOL;
  case_int_input(&c, "a", d, rank_a, da, is_bool ? 0 : -ra, is_bool ? 1 : ra, false);
  case_int_input(&c, "b", d, rank_b, db, is_bool ? 0 : -rb, is_bool ? 1 : rb,
                 strcmp(op, "Div") == 0);
  const char *in[] = {"a", "b"}, *out[] = {"y"};
  mb_add_node(c.m, op, "", in, 2, out, 1);
  mb_output(c.m, "y", strcmp(op, "Equal") == 0 ? ONYX_DTYPE_BOOL : d);
  case_run(&c);
}

/* Integer Add/Sub/Mul/Div (exact; Div truncates toward zero) and Equal on ints and
 * bool, over shapes that broadcast either way, both ways, not at all, and a scalar. */
static void int_elementwise_cases(void) {
  static const int64_t a4[] = {2, 3, 4, 5}, b2[] = {4, 1}, m3[] = {3, 1, 5}, s0[] = {1};
  static const struct {
    uint32_t ra, rb;
    const int64_t *da, *db;
  } shapes[] = {{4, 2, a4, b2}, {2, 4, b2, a4}, {3, 2, m3, b2}, {4, 4, a4, a4}, {4, 0, a4, s0}};
  /* Operand ranges keep every result inside the type: no overflow to compare. Div's
   * int32 range is small so that many quotients truncate (and some are 0, -3 / 7). */
  static const struct {
    const char *op;
    int64_t a32, b32, a64, b64;
  } ops[] = {
      {"Add", INT64_C(1) << 29, INT64_C(1) << 29, INT64_C(1) << 40, INT64_C(1) << 40},
      {"Sub", INT64_C(1) << 29, INT64_C(1) << 29, INT64_C(1) << 40, INT64_C(1) << 40},
      {"Mul", 30000, 30000, INT64_C(1) << 30, INT64_C(1) << 30},
      {"Div", 1000, 50, INT64_C(1) << 40, 50},
  };
  for (size_t o = 0; o < sizeof ops / sizeof ops[0]; ++o)
    for (int w = 0; w < 2; ++w)
      for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; ++i)
        int_binary_case(ops[o].op, w ? ONYX_DTYPE_INT64 : ONYX_DTYPE_INT32, shapes[i].ra,
                        shapes[i].da, shapes[i].rb, shapes[i].db, w ? ops[o].a64 : ops[o].a32,
                        w ? ops[o].b64 : ops[o].b32);
  /* Equal on [-3, 3] (and bools), so that both answers are common. */
  static const uint32_t eq_types[] = {ONYX_DTYPE_INT32, ONYX_DTYPE_INT64, ONYX_DTYPE_BOOL};
  for (size_t t = 0; t < 3; ++t)
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; ++i)
      int_binary_case("Equal", eq_types[t], shapes[i].ra, shapes[i].da, shapes[i].rb, shapes[i].db,
                      3, 3);
}

/* How one ReduceSum case names its axes and options. */
typedef struct reduce_variant {
  int64_t opset;       /* < 13: axes attribute; 13+: axes initializer (input 1) */
  uint32_t rank;       /* of the data */
  int64_t dims[4];     /* of the data */
  const int64_t *axes; /* NULL: no axes at all (reduce every axis) */
  size_t axes_count;   /* 0 with axes != NULL: an empty list (13+) */
  int keepdims;        /* -1: left at its default (1) */
  int noop;            /* noop_with_empty_axes (13+), -1: default (0) */
  bool positive;       /* float data in [0, 1], so a long sum does not cancel */
  const char *what;
} reduce_variant;

static void reduce_case(uint32_t d, const reduce_variant *v) {
  ocase c;
  char sx[48];
  case_begin(&c, v->opset, "ReduceSum", "ReduceSum-%lld %s %s %s", (long long)v->opset, dname(d),
             shape_str(sx, sizeof sx, v->rank, v->dims), v->what);
  if (is_float_type(d))
    case_input(&c, "x", d, v->rank, v->dims, v->positive ? 0.0f : -1.0f, 1.0f);
  else
    case_int_input(&c, "x", d, v->rank, v->dims,
                   d == ONYX_DTYPE_INT64 ? -(INT64_C(1) << 40) : -1000,
                   d == ONYX_DTYPE_INT64 ? INT64_C(1) << 40 : 1000, false);
  bool axes_input = v->opset >= 13 && v->axes != NULL;
  if (axes_input) mb_init_ints(c.m, "axes", v->axes, v->axes_count);
  const char *in[] = {"x", "axes"}, *out[] = {"y"};
  mb_node *n = mb_add_node(c.m, "ReduceSum", "", in, axes_input ? 2 : 1, out, 1);
  if (v->opset < 13 && v->axes != NULL) mb_attr_ints(n, "axes", v->axes, v->axes_count);
  if (v->keepdims >= 0) mb_attr_int(n, "keepdims", v->keepdims);
  if (v->noop >= 0) mb_attr_int(n, "noop_with_empty_axes", v->noop);
  mb_output(c.m, "y", d);
  /* Sums of many terms differ in their last bits with the order of accumulation. */
  int64_t count = 1;
  for (uint32_t i = 0; i < v->rank; ++i) count *= v->dims[i];
  c.tol_scale = count >= 1000 ? 4.0 : count > 64 ? 2.0 : 1.0;
  case_run(&c);
}

static void reduce_cases(void) {
  static const int64_t ax1[] = {1}, axm1[] = {-1}, ax02[] = {0, 2}, axm3m1[] = {-3, -1},
                       ax0[] = {0}, none[] = {0};
  static const reduce_variant v[] = {
      {11, 3, {3, 5, 7}, ax1, 1, -1, -1, false, "axes=[1] (attr), keepdims default"},
      {11, 3, {3, 5, 7}, axm1, 1, 0, -1, false, "axes=[-1] (attr), keepdims 0"},
      {11, 4, {2, 3, 4, 5}, ax02, 2, 1, -1, false, "axes=[0,2] (attr), keepdims 1"},
      {11, 4, {2, 3, 4, 5}, NULL, 0, 0, -1, false, "no axes (all), keepdims 0"},
      {13, 3, {3, 5, 7}, ax1, 1, 0, -1, false, "axes=[1], keepdims 0"},
      {13, 3, {3, 5, 7}, axm1, 1, 1, -1, false, "axes=[-1], keepdims 1"},
      {13, 4, {2, 3, 4, 5}, ax02, 2, 0, -1, false, "axes=[0,2], keepdims 0"},
      {13, 4, {2, 3, 4, 5}, axm3m1, 2, 1, -1, false, "axes=[-3,-1], keepdims 1"},
      {13, 4, {2, 3, 4, 5}, NULL, 0, -1, -1, false, "no axes input (all), keepdims default"},
      {13, 4, {2, 3, 4, 5}, none, 0, 0, 0, false, "axes=[] (all), keepdims 0"},
      {13, 3, {3, 5, 7}, none, 0, 1, 1, false, "axes=[], noop_with_empty_axes 1"},
      {13, 2, {4, 3000}, ax1, 1, 0, -1, true, "axes=[1], rows of 3000"},
      {13, 2, {512, 6}, ax0, 1, 1, -1, true, "axes=[0], strided columns of 512"},
  };
  static const uint32_t types[] = {ONYX_DTYPE_FLOAT32, ONYX_DTYPE_FLOAT16, ONYX_DTYPE_BFLOAT16,
                                   ONYX_DTYPE_INT32, ONYX_DTYPE_INT64};
  for (size_t t = 0; t < sizeof types / sizeof types[0]; ++t)
    for (size_t i = 0; i < sizeof v / sizeof v[0]; ++i) reduce_case(types[t], &v[i]);
}

/* A decoder's attention-mask arithmetic: seqlens_k = Cast<int32>(ReduceSum(mask, 1) - 1)
 * on an int64 (1, T) mask of 0s and 1s. All three nodes must be on the provider under
 * test, so that the chain needs no transfer between them. */
static void decoder_mask_cases(void) {
  static const struct {
    int64_t t;
    int keepdims;
  } v[] = {{1, 0}, {37, 0}, {300, 1}};
  for (size_t i = 0; i < sizeof v / sizeof v[0]; ++i) {
    ocase c;
    int64_t dims[] = {1, v[i].t}, ax1[] = {1}, one = 1;
    case_begin(&c, 14, "ReduceSum",
               "mask int64 [1,%lld]: ReduceSum(axis 1, keepdims %d) - 1 -> int32",
               (long long)v[i].t, v[i].keepdims);
    c.all_nodes = true;
    case_int_input(&c, "mask", ONYX_DTYPE_INT64, 2, dims, 0, 1, false);
    mb_init_ints(c.m, "axes", ax1, 1);
    mb_initializer(c.m, "one", ONYX_DTYPE_INT64, 0, NULL, &one, sizeof one);
    const char *r_in[] = {"mask", "axes"}, *r_out[] = {"len"};
    mb_attr_int(mb_add_node(c.m, "ReduceSum", "", r_in, 2, r_out, 1), "keepdims", v[i].keepdims);
    const char *s_in[] = {"len", "one"}, *s_out[] = {"last"};
    mb_add_node(c.m, "Sub", "", s_in, 2, s_out, 1);
    const char *c_in[] = {"last"}, *c_out[] = {"seqlens_k"};
    mb_attr_int(mb_add_node(c.m, "Cast", "", c_in, 1, c_out, 1), "to", ONYX_DTYPE_INT32);
    mb_output(c.m, "seqlens_k", ONYX_DTYPE_INT32);
    case_run(&c);
  }
}

/* Cast and CastLike from int32, int64 and bool to the float types, the int types and
 * bool. Values in [-3000, 3000] (past float16's exact integers, so rounding is seen),
 * or [-2, 2] when the target is bool (zeros common). */
static void int_cast_cases(void) {
  static const uint32_t from[] = {ONYX_DTYPE_INT32, ONYX_DTYPE_INT64, ONYX_DTYPE_BOOL};
  static const uint32_t to[] = {ONYX_DTYPE_FLOAT32, ONYX_DTYPE_FLOAT16, ONYX_DTYPE_BFLOAT16,
                                ONYX_DTYPE_INT32,   ONYX_DTYPE_INT64,   ONYX_DTYPE_BOOL};
  int64_t dims[] = {2, 3, 17}, like[] = {2};
  for (int castlike = 0; castlike < 2; ++castlike) {
    const char *op = castlike ? "CastLike" : "Cast";
    for (size_t f = 0; f < sizeof from / sizeof from[0]; ++f) {
      for (size_t t = 0; t < sizeof to / sizeof to[0]; ++t) {
        ocase c;
        case_begin(&c, castlike ? 15 : 13, op, "%s %s -> %s", op, dname(from[f]), dname(to[t]));
        int64_t r = to[t] == ONYX_DTYPE_BOOL ? 2 : 3000;
        bool is_bool = from[f] == ONYX_DTYPE_BOOL;
        case_int_input(&c, "x", from[f], 3, dims, is_bool ? 0 : -r, is_bool ? 1 : r, false);
        const char *in[] = {"x", "like"}, *out[] = {"y"};
        if (castlike) {
          case_any_input(&c, "like", to[t], 1, like);
          mb_add_node(c.m, "CastLike", "", in, 2, out, 1);
        } else {
          mb_attr_int(mb_add_node(c.m, "Cast", "", in, 1, out, 1), "to", to[t]);
        }
        mb_output(c.m, "y", to[t]);
        case_run(&c);
      }
    }
  }
  /* int64 past int32's range: narrowing keeps the low bits; float32 rounds. */
  static const uint32_t wide_to[] = {ONYX_DTYPE_INT32, ONYX_DTYPE_FLOAT32};
  for (size_t t = 0; t < 2; ++t) {
    ocase c;
    case_begin(&c, 13, "Cast", "Cast int64 -> %s, values to 2^40", dname(wide_to[t]));
    case_int_input(&c, "x", ONYX_DTYPE_INT64, 3, dims, -(INT64_C(1) << 40), INT64_C(1) << 40,
                   false);
    const char *in[] = {"x"}, *out[] = {"y"};
    mb_attr_int(mb_add_node(c.m, "Cast", "", in, 1, out, 1), "to", wide_to[t]);
    mb_output(c.m, "y", wide_to[t]);
    case_run(&c);
  }
}

static void norm_cases(void) {
  uint32_t d;
  FOR_FLOATS(d) {
    int64_t x[] = {2, 5, 64}, w[] = {64};
    ocase c;
    case_begin(&c, 17, "LayerNormalization", "LayerNormalization %s (Y, Mean, InvStdDev)",
               dname(d));
    case_input(&c, "x", d, 3, x, -3.0f, 3.0f);
    case_weight(&c, "scale", d, 1, w, 0.5f, 1.5f);
    case_weight(&c, "bias", d, 1, w, -0.5f, 0.5f);
    const char *in[] = {"x", "scale", "bias"}, *out[] = {"y", "mean", "inv"};
    mb_add_node(c.m, "LayerNormalization", "", in, 3, out, 3);
    mb_output(c.m, "y", d);
    mb_output(c.m, "mean", ONYX_DTYPE_FLOAT32);
    mb_output(c.m, "inv", ONYX_DTYPE_FLOAT32);
    case_run(&c);

    case_begin(&c, 23, "RMSNormalization", "RMSNormalization %s", dname(d));
    case_input(&c, "x", d, 3, x, -3.0f, 3.0f);
    case_weight(&c, "scale", d, 1, w, 0.5f, 1.5f);
    mb_add_node(c.m, "RMSNormalization", "", in, 2, out, 1);
    mb_output(c.m, "y", d);
    case_run(&c);

    case_begin(&c, 17, "SimplifiedLayerNormalization", "SimplifiedLayerNormalization %s", dname(d));
    case_input(&c, "x", d, 3, x, -3.0f, 3.0f);
    case_weight(&c, "scale", d, 1, w, 0.5f, 1.5f);
    const char *sout[] = {"y", "inv"};
    mb_attr_float(mb_add_node(c.m, "SimplifiedLayerNormalization", "", in, 2, sout, 2), "epsilon",
                  1e-6f);
    mb_output(c.m, "y", d);
    mb_output(c.m, "inv", ONYX_DTYPE_FLOAT32);
    case_run(&c);

    case_begin(&c, 17, "SkipSimplifiedLayerNormalization",
               "SkipSimplifiedLayerNormalization %s (4 outputs)", dname(d));
    case_input(&c, "x", d, 3, x, -3.0f, 3.0f);
    case_input(&c, "skip", d, 3, x, -3.0f, 3.0f);
    case_weight(&c, "gamma", d, 1, w, 0.5f, 1.5f);
    const char *kin[] = {"x", "skip", "gamma"}, *kout[] = {"y", "mean", "inv", "sum"};
    mb_attr_float(
        mb_add_node(c.m, "SkipSimplifiedLayerNormalization", "com.microsoft", kin, 3, kout, 4),
        "epsilon", 1e-6f);
    mb_output(c.m, "y", d);
    mb_output(c.m, "mean", ONYX_DTYPE_FLOAT32);
    mb_output(c.m, "inv", ONYX_DTYPE_FLOAT32);
    mb_output(c.m, "sum", d);
    case_run(&c);
  }
}

static void rotary_cases(void) {
  uint32_t d;
  FOR_FLOATS(d) {
    for (int interleaved = 0; interleaved < 2; ++interleaved) {
      ocase c;
      int64_t x[] = {2, 3, 5, 16}, table[] = {32, 8}, pos_dims[] = {2, 5};
      int64_t pos[] = {0, 1, 2, 3, 4, 7, 8, 9, 10, 31};
      case_begin(&c, 23, "RotaryEmbedding", "RotaryEmbedding %s BNSH interleaved=%d", dname(d),
                 interleaved);
      case_input(&c, "x", d, 4, x, -2.0f, 2.0f);
      case_weight(&c, "cos", d, 2, table, -1.0f, 1.0f);
      case_weight(&c, "sin", d, 2, table, -1.0f, 1.0f);
      mb_initializer(c.m, "pos", ONYX_DTYPE_INT64, 2, pos_dims, pos, sizeof pos);
      const char *in[] = {"x", "cos", "sin", "pos"}, *out[] = {"y"};
      mb_attr_int(mb_add_node(c.m, "RotaryEmbedding", "", in, 4, out, 1), "interleaved",
                  interleaved);
      mb_output(c.m, "y", d);
      case_run(&c);
    }
    ocase c;
    int64_t x[] = {2, 5, 48}, table[] = {16, 4}, pos_dims[] = {2, 5};
    int64_t pos[] = {3, 4, 5, 6, 7, 0, 1, 2, 3, 15};
    case_begin(&c, 23, "RotaryEmbedding",
               "com.microsoft RotaryEmbedding %s 3-D, partial rotary 8 of 16", dname(d));
    case_input(&c, "x", d, 3, x, -2.0f, 2.0f);
    mb_initializer(c.m, "pos", ONYX_DTYPE_INT64, 2, pos_dims, pos, sizeof pos);
    case_weight(&c, "cos", d, 2, table, -1.0f, 1.0f);
    case_weight(&c, "sin", d, 2, table, -1.0f, 1.0f);
    const char *in[] = {"x", "pos", "cos", "sin"}, *out[] = {"y"};
    mb_node *n = mb_add_node(c.m, "RotaryEmbedding", "com.microsoft", in, 4, out, 1);
    mb_attr_int(n, "num_heads", 3);
    mb_attr_int(n, "rotary_embedding_dim", 8);
    mb_output(c.m, "y", d);
    case_run(&c);
  }
}

/* A small decoder-shaped chain: the ops placed together, with transfers only at the
 * ends (norm -> matmul -> rotary-free attention-ish softmax -> matmul -> residual). */
static void chain_cases(void) {
  uint32_t d;
  FOR_FLOATS(d) {
    ocase c;
    int64_t x[] = {1, 7, 64}, w[] = {64, 64}, gd[] = {64};
    case_begin(&c, 17, "MatMul", "chain %s: SkipSimplifiedLN -> MatMul -> Softmax -> MatMul",
               dname(d));
    case_input(&c, "x", d, 3, x, -1.0f, 1.0f);
    case_input(&c, "r", d, 3, x, -1.0f, 1.0f);
    case_weight(&c, "g", d, 1, gd, 0.5f, 1.5f);
    case_weight(&c, "w1", d, 2, w, -0.2f, 0.2f);
    case_weight(&c, "w2", d, 2, w, -0.2f, 0.2f);
    const char *n1_in[] = {"x", "r", "g"}, *n1_out[] = {"h", "", "", "res"};
    mb_add_node(c.m, "SkipSimplifiedLayerNormalization", "com.microsoft", n1_in, 3, n1_out, 4);
    const char *n2_in[] = {"h", "w1"}, *n2_out[] = {"p"};
    mb_add_node(c.m, "MatMul", "", n2_in, 2, n2_out, 1);
    const char *n3_in[] = {"p"}, *n3_out[] = {"s"};
    mb_add_node(c.m, "Softmax", "", n3_in, 1, n3_out, 1);
    const char *n4_in[] = {"s", "w2"}, *n4_out[] = {"o"};
    mb_add_node(c.m, "MatMul", "", n4_in, 2, n4_out, 1);
    const char *n5_in[] = {"o", "res"}, *n5_out[] = {"y"};
    mb_add_node(c.m, "Add", "", n5_in, 2, n5_out, 1);
    mb_output(c.m, "y", d);
    c.tol_scale = 2.0;
    case_run(&c);
  }
}

/* ------------------------------------------------------------------ quantized weights */

/* A uint8 (or int4/uint4: packed nibbles) initializer of `bytes` random bytes. */
static void case_random_bytes(ocase *c, const char *name, uint32_t dtype, uint32_t rank,
                              const int64_t *dims, size_t bytes) {
  uint8_t *data = malloc(bytes ? bytes : 1);
  for (size_t i = 0; data && i < bytes; ++i) data[i] = (uint8_t)(tu_rand(&g.seed) >> 24);
  mb_initializer(c->m, name, dtype, rank, dims, data, bytes);
  free(data);
}

typedef struct nbits_variant {
  int bits, block;
  int zp; /* 0 absent, 1 packed uint8, 2 of the scales' type */
  int64_t k, n;
  uint32_t a_rank;
  int64_t a_lead[2]; /* A's leading dims (rows = their product) */
  bool bias;
  const char *what;
} nbits_variant;

/* MatMulNBits with weights, scales and zero points as initializers (as exports have
 * them): codes and zero points random bytes, scales in [0.005, 0.03] for 4-bit codes
 * and 16 times smaller for 8-bit ones, so that weights are of one magnitude (a
 * quantizer's scale is max|w| / 2^(bits−1)) and outputs near 1. */
static void nbits_case(uint32_t d, const nbits_variant *v) {
  ocase c;
  const int64_t kb = (v->k + v->block - 1) / v->block, blob = v->block * v->bits / 8;
  const int64_t zp_bytes = (kb * v->bits + 7) / 8;
  int64_t rows = 1;
  for (uint32_t i = 0; i + 1 < v->a_rank; ++i) rows *= v->a_lead[i];
  case_begin(&c, 17, "MatMulNBits", "MatMulNBits %s %d-bit block %d zp %s K %lld N %lld M %lld%s",
             dname(d), v->bits, v->block,
             v->zp == 0   ? "none"
             : v->zp == 1 ? "uint8"
                          : "float",
             (long long)v->k, (long long)v->n, (long long)rows, v->bias ? " bias" : "");
  int64_t a_dims[3] = {v->a_lead[0], v->a_lead[1], v->k};
  a_dims[v->a_rank - 1] = v->k;
  case_input(&c, "a", d, v->a_rank, a_dims, -1.0f, 1.0f);
  int64_t b_dims[] = {v->n, kb, blob}, s_dims[] = {v->n, kb}, z_dims[] = {v->n, zp_bytes};
  case_random_bytes(&c, "b", ONYX_DTYPE_UINT8, 3, b_dims, (size_t)(v->n * kb * blob));
  const float s_div = v->bits == 8 ? 16.0f : 1.0f;
  case_weight(&c, "scales", d, 2, s_dims, 0.005f / s_div, 0.03f / s_div);
  if (v->zp == 1)
    case_random_bytes(&c, "zp", ONYX_DTYPE_UINT8, 2, z_dims, (size_t)(v->n * zp_bytes));
  if (v->zp == 2) case_weight(&c, "zp", d, 2, s_dims, 0.0f, (float)((1 << v->bits) - 1));
  int64_t bias_dims[] = {v->n};
  if (v->bias) case_weight(&c, "bias", d, 1, bias_dims, -0.5f, 0.5f);
  const char *in[] = {"a", "b", "scales", v->zp ? "zp" : "", "", "bias"}, *out[] = {"y"};
  mb_node *node =
      mb_add_node(c.m, "MatMulNBits", "com.microsoft", in, v->bias ? 6 : 3 + !!v->zp, out, 1);
  mb_attr_int(node, "K", v->k);
  mb_attr_int(node, "N", v->n);
  mb_attr_int(node, "bits", v->bits);
  mb_attr_int(node, "block_size", v->block);
  mb_output(c.m, "y", d);
  /* The weights are rounded to the activations' type once, and each output is a sum of K
   * terms near 0.1: its rounding error grows with K, not with the output (an output near
   * zero of a K = 4864 bfloat16 product missed by 0.033 at twice the tolerance). */
  c.tol_scale = v->k >= 2000 ? 4.0 : 2.0;
  case_run(&c);
}

static void nbits_cases(void) {
  static const nbits_variant v[] = {
      {4, 32, 0, 64, 48, 3, {1, 1}, false, "decode"},
      {4, 16, 1, 72, 37, 2, {3, 0}, false, "odd k_blocks: 8-byte loads"},
      {4, 128, 2, 300, 70, 2, {1, 0}, true, "K not whole blocks"},
      {4, 32, 1, 1000, 200, 2, {1, 0}, true, "several chunks a row"},
      {4, 256, 1, 520, 130, 2, {5, 0}, false, "block 256"},
      {4, 64, 0, 896, 96, 2, {8, 0}, true, "8 rows"},
      {8, 64, 1, 200, 33, 2, {8, 0}, true, "8-bit"},
      {8, 16, 0, 48, 20, 2, {2, 0}, false, "8-bit block 16"},
      {8, 128, 2, 333, 41, 2, {1, 0}, false, "8-bit float zp"},
      {4, 32, 1, 4864, 48, 2, {1, 0}, true, "K split over 16 warps"},
      {8, 128, 0, 2000, 40, 2, {2, 0}, false, "8-bit, K split over 16 warps"},
      {4, 32, 0, 896, 1152, 2, {4, 0}, true, "q|k|v-shaped, 4 rows"},
      {8, 32, 1, 130, 24, 2, {7, 0}, false, "8-bit, 7 rows, K not whole blocks"},
      {4, 64, 2, 4864, 64, 2, {1, 0}, false, "long K, float zp"},
      {4, 32, 0, 96, 64, 2, {17, 0}, true, "prefill"},
      {4, 64, 1, 130, 300, 3, {2, 20}, false, "prefill batched"},
      {8, 32, 2, 100, 50, 2, {40, 0}, true, "prefill 8-bit"},
      {4, 32, 0, 96, 50, 2, {1, 0}, false, "M = 1 block sums, odd k_blocks"},
      {4, 64, 1, 640, 77, 2, {1, 0}, true, "M = 1 block sums, block 64"},
      {4, 128, 0, 896, 40, 3, {1, 1}, false, "M = 1 block sums, block 128"},
      {4, 32, 0, 256, 20000, 2, {1, 0}, true, "M = 1, one warp a tile (three blocks an SM)"},
      /* More tiles than three waves of blocks: the lm_head's shape class. */
      {4, 32, 0, 896, 36864, 2, {1, 0}, true, "M = 1, a warp a tile, lm_head K"},
      {4, 64, 0, 640, 34048, 3, {1, 1}, false, "M = 1, a warp a tile, block 64"},
      {4, 128, 0, 300, 34816, 2, {1, 0}, true, "M = 1, a warp a tile, K not whole blocks"},
      {4, 32, 0, 896, 33800, 2, {1, 0}, false, "M = 1, a warp a tile, N not whole tiles"},
  };
  static const uint32_t types[] = {ONYX_DTYPE_FLOAT16, ONYX_DTYPE_BFLOAT16};
  for (size_t t = 0; t < 2; ++t)
    for (size_t i = 0; i < sizeof v / sizeof v[0]; ++i) nbits_case(types[t], &v[i]);
}

/* GatherBlockQuantized: the embedding form (uint8 codes along the last axis) and int4
 * data on other axes; indices are a graph input (constant ones would be folded) drawn
 * from one past each end, so some count from the end and some are out of range. */
static void gbq_cases(void) {
  static const uint32_t types[] = {ONYX_DTYPE_FLOAT32, ONYX_DTYPE_FLOAT16, ONYX_DTYPE_BFLOAT16};
  for (size_t t = 0; t < 3; ++t) {
    const uint32_t d = types[t];
    for (int bits = 4; bits <= 8; bits += 4) {
      ocase c;
      const int64_t vocab = 50, cols = 96, block = bits == 4 ? 32 : 16, kb = cols / block;
      case_begin(&c, 17, "GatherBlockQuantized", "GatherBlockQuantized %s uint8 %d-bit%s", dname(d),
                 bits, bits == 8 ? " zp" : "");
      int64_t data_dims[] = {vocab, cols * bits / 8}, s_dims[] = {vocab, kb};
      int64_t z_dims[] = {vocab, (kb * bits + 7) / 8}, idx_dims[] = {4, 8};
      case_int_input(&c, "idx", ONYX_DTYPE_INT64, 2, idx_dims, -vocab - 1, vocab, false);
      case_random_bytes(&c, "data", ONYX_DTYPE_UINT8, 2, data_dims,
                        (size_t)(vocab * cols * bits / 8));
      case_weight(&c, "scales", d, 2, s_dims, 0.01f, 0.1f);
      if (bits == 8) case_random_bytes(&c, "zp", ONYX_DTYPE_UINT8, 2, z_dims, (size_t)(vocab * kb));
      const char *in[] = {"data", "idx", "scales", "zp"}, *out[] = {"y"};
      mb_node *n =
          mb_add_node(c.m, "GatherBlockQuantized", "com.microsoft", in, bits == 8 ? 4 : 3, out, 1);
      mb_attr_int(n, "bits", bits);
      mb_attr_int(n, "block_size", block);
      mb_output(c.m, "y", d);
      case_run(&c);
    }
    ocase c;
    case_begin(&c, 17, "GatherBlockQuantized",
               "GatherBlockQuantized %s int4 gather_axis 1 quantize_axis 0 zp", dname(d));
    int64_t data_dims[] = {40, 10}, s_dims[] = {3, 10}, idx_dims[] = {4};
    case_int_input(&c, "idx", ONYX_DTYPE_INT32, 1, idx_dims, -11, 10, false);
    case_random_bytes(&c, "data", ONYX_DTYPE_INT4, 2, data_dims, 200);
    case_weight(&c, "scales", d, 2, s_dims, 0.01f, 0.1f);
    case_random_bytes(&c, "zp", ONYX_DTYPE_INT4, 2, s_dims, 15);
    const char *in[] = {"data", "idx", "scales", "zp"}, *out[] = {"y"};
    mb_node *n = mb_add_node(c.m, "GatherBlockQuantized", "com.microsoft", in, 4, out, 1);
    mb_attr_int(n, "block_size", 16);
    mb_attr_int(n, "gather_axis", 1);
    mb_attr_int(n, "quantize_axis", 0);
    mb_output(c.m, "y", d);
    case_run(&c);
  }
}

/* ai.onyx::SiluMul, as the gate_up_silu optimization makes it from a decoder MLP:
 * gate and up products of one input with constant weights, Sigmoid, Mul, Mul. Both
 * sessions fuse (the CPU reference has SiluMul too); under test the merged product and
 * SiluMul must both run on the provider. N a multiple of 8 takes the 16-byte vector
 * path, an odd N the one-element path; MatMulNBits (float16, bfloat16) merges its
 * codes, scales and zero points. */
static void silu_mul_case(uint32_t d, bool nbits, int64_t rows, int64_t k, int64_t n, bool swap) {
  ocase c;
  case_begin(&c, 17, "SiluMul", "SiluMul %s %s M %lld K %lld N %lld%s", dname(d),
             nbits ? "MatMulNBits" : "MatMul", (long long)rows, (long long)k, (long long)n,
             swap ? " (operands swapped)" : "");
  int64_t x_dims[] = {1, rows, k};
  case_input(&c, "x", d, 3, x_dims, -1.0f, 1.0f);
  const char *names[2] = {"gate", "up"};
  for (int p = 0; p < 2; ++p) {
    char w[32], sc[32], zp[32], out[32];
    snprintf(w, sizeof w, "%s_w", names[p]);
    snprintf(sc, sizeof sc, "%s_scales", names[p]);
    snprintf(zp, sizeof zp, "%s_zp", names[p]);
    snprintf(out, sizeof out, "%s_y", names[p]);
    if (!nbits) {
      int64_t w_dims[] = {k, n};
      case_weight(&c, w, d, 2, w_dims, -0.3f, 0.3f);
      const char *in[] = {"x", w}, *o[] = {out};
      mb_add_node(c.m, "MatMul", "", in, 2, o, 1);
      continue;
    }
    const int64_t block = 32, kb = (k + block - 1) / block, blob = block / 2;
    int64_t b_dims[] = {n, kb, blob}, s_dims[] = {n, kb}, z_dims[] = {n, (kb + 1) / 2};
    case_random_bytes(&c, w, ONYX_DTYPE_UINT8, 3, b_dims, (size_t)(n * kb * blob));
    case_weight(&c, sc, d, 2, s_dims, 0.005f, 0.03f);
    case_random_bytes(&c, zp, ONYX_DTYPE_UINT8, 2, z_dims, (size_t)(n * ((kb + 1) / 2)));
    const char *in[] = {"x", w, sc, zp}, *o[] = {out};
    mb_node *node = mb_add_node(c.m, "MatMulNBits", "com.microsoft", in, 4, o, 1);
    mb_attr_int(node, "K", k);
    mb_attr_int(node, "N", n);
    mb_attr_int(node, "bits", 4);
    mb_attr_int(node, "block_size", block);
  }
  const char *sig_in[] = {"gate_y"}, *sig_out[] = {"s"};
  mb_add_node(c.m, "Sigmoid", "", sig_in, 1, sig_out, 1);
  const char *act_in[] = {swap ? "s" : "gate_y", swap ? "gate_y" : "s"}, *act_out[] = {"a"};
  mb_add_node(c.m, "Mul", "", act_in, 2, act_out, 1);
  const char *fin_in[] = {swap ? "up_y" : "a", swap ? "a" : "up_y"}, *fin_out[] = {"y"};
  mb_add_node(c.m, "Mul", "", fin_in, 2, fin_out, 1);
  mb_output(c.m, "y", d);
  c.tol_scale = 2.0; /* two products and a product of them */
  c.all_nodes = true;
  case_run(&c);
}

static void silu_mul_cases(void) {
  uint32_t d;
  FOR_FLOATS(d) {
    silu_mul_case(d, false, 1, 64, 128, false);  /* decode: vector path */
    silu_mul_case(d, false, 5, 48, 37, true);    /* odd N: element path */
    silu_mul_case(d, false, 17, 96, 264, false); /* prefill rows */
  }
  static const uint32_t half_types[] = {ONYX_DTYPE_FLOAT16, ONYX_DTYPE_BFLOAT16};
  for (size_t t = 0; t < 2; ++t) {
    silu_mul_case(half_types[t], true, 1, 128, 96, false);
    silu_mul_case(half_types[t], true, 9, 72, 40, true);
  }
}

/* ai.onyx::RMSNormMatMul, as the norm_matmul optimization makes it from a decoder's
 * SkipSimplifiedLayerNormalization (or SimplifiedLayerNormalization) and the MatMul
 * that alone reads its normed output: both sessions fuse (the CPU reference has the op
 * too); under test the fused node must run on the provider. Outputs: the product and,
 * with skip, the residual sum. Shapes: the Qwen2.5-0.5B qkv and gate|up products (K
 * split across blocks), K past the 512 a block takes; at most 4 rows the decode
 * kernel, more the prompt route (the norm kernel, then cuBLASLt). */
static void norm_matmul_case(uint32_t d, bool skip, int64_t rows, int64_t k, int64_t n) {
  ocase c;
  case_begin(&c, 17, "RMSNormMatMul", "RMSNormMatMul %s %s M %lld K %lld N %lld", dname(d),
             skip ? "skip" : "plain", (long long)rows, (long long)k, (long long)n);
  int64_t x_dims[] = {1, rows, k}, g_dims[] = {k}, w_dims[] = {k, n};
  case_input(&c, "x", d, 3, x_dims, -3.0f, 3.0f);
  if (skip) case_input(&c, "skip", d, 3, x_dims, -3.0f, 3.0f);
  case_weight(&c, "gamma", d, 1, g_dims, 0.5f, 1.5f);
  case_weight(&c, "w", d, 2, w_dims, -0.3f, 0.3f);
  if (skip) {
    const char *in[] = {"x", "skip", "gamma"}, *out[] = {"h", "", "", "sum"};
    mb_attr_float(
        mb_add_node(c.m, "SkipSimplifiedLayerNormalization", "com.microsoft", in, 3, out, 4),
        "epsilon", 1e-6f);
  } else {
    const char *in[] = {"x", "gamma"}, *out[] = {"h"};
    mb_attr_float(mb_add_node(c.m, "SimplifiedLayerNormalization", "", in, 2, out, 1), "epsilon",
                  1e-6f);
  }
  const char *mm_in[] = {"h", "w"}, *mm_out[] = {"y"};
  mb_add_node(c.m, "MatMul", "", mm_in, 2, mm_out, 1);
  mb_output(c.m, "y", d);
  if (skip) mb_output(c.m, "sum", d);
  c.tol_scale = 2.0; /* a norm, then a product of its rounded output */
  c.all_nodes = true;
  case_run(&c);
}

static void norm_matmul_cases(void) {
  static const uint32_t half_types[] = {ONYX_DTYPE_FLOAT16, ONYX_DTYPE_BFLOAT16};
  for (size_t t = 0; t < 2; ++t) {
    uint32_t d = half_types[t];
    norm_matmul_case(d, true, 1, 896, 1152);  /* qkv: K split across blocks */
    norm_matmul_case(d, true, 1, 896, 9728);  /* gate|up: many column blocks */
    norm_matmul_case(d, true, 4, 64, 40);     /* four rows, one launch */
    norm_matmul_case(d, true, 9, 128, 64);    /* prompt route, small */
    norm_matmul_case(d, true, 2, 3584, 512);  /* K past a block's 512 */
    norm_matmul_case(d, false, 1, 896, 2048); /* the final norm into the lm_head */
    norm_matmul_case(d, false, 3, 1000, 264); /* plain, odd K */
  }
  /* The prompt route at the 0.5B qkv and gate|up shapes: one row past the decode
   * kernel's 4, a short prompt, and rows that fill no tile evenly. */
  static const int64_t prompt_rows[] = {5, 32, 130}, prompt_n[] = {1152, 9728};
  for (size_t t = 0; t < 2; ++t)
    for (size_t r = 0; r < 3; ++r)
      for (size_t j = 0; j < 2; ++j)
        for (int skip = 1; skip >= 0; --skip)
          norm_matmul_case(half_types[t], skip != 0, prompt_rows[r], 896, prompt_n[j]);
}

/* ai.onyx::SiluMulMatMul, as the silu_matmul optimization makes it from gate_up_silu's
 * SiluMul and the down MatMul that alone reads it: a whole MLP, x · [Wg | Wu] (one
 * MatMul after gate_up_silu), silu(gate)·up, · Wd, at the Qwen2.5-0.5B shape (hidden
 * 896, GU 9728, intermediate 4864). Both sessions fuse; under test every node must run
 * on the provider. At most 4 rows the decode kernel (K split across blocks, A computed
 * per block), more the prompt route (the SiluMul kernel, then cuBLASLt). Weights small
 * enough that the gate stays in silu's curved range and Y near 1. */
static void silu_matmul_case(uint32_t d, int64_t rows, int64_t hidden, int64_t inter) {
  ocase c;
  case_begin(&c, 17, "SiluMulMatMul", "SiluMulMatMul %s M %lld hidden %lld I %lld", dname(d),
             (long long)rows, (long long)hidden, (long long)inter);
  int64_t x_dims[] = {1, rows, hidden}, gu_dims[] = {hidden, inter}, d_dims[] = {inter, hidden};
  case_input(&c, "x", d, 3, x_dims, -1.0f, 1.0f);
  case_weight(&c, "gate_w", d, 2, gu_dims, -0.1f, 0.1f);
  case_weight(&c, "up_w", d, 2, gu_dims, -0.1f, 0.1f);
  case_weight(&c, "down_w", d, 2, d_dims, -0.05f, 0.05f);
  const char *g_in[] = {"x", "gate_w"}, *g_out[] = {"gate_y"};
  const char *u_in[] = {"x", "up_w"}, *u_out[] = {"up_y"};
  mb_add_node(c.m, "MatMul", "", g_in, 2, g_out, 1);
  mb_add_node(c.m, "MatMul", "", u_in, 2, u_out, 1);
  const char *sig_in[] = {"gate_y"}, *sig_out[] = {"s"};
  mb_add_node(c.m, "Sigmoid", "", sig_in, 1, sig_out, 1);
  const char *act_in[] = {"gate_y", "s"}, *act_out[] = {"a"};
  mb_add_node(c.m, "Mul", "", act_in, 2, act_out, 1);
  const char *fin_in[] = {"a", "up_y"}, *fin_out[] = {"m"};
  mb_add_node(c.m, "Mul", "", fin_in, 2, fin_out, 1);
  const char *dn_in[] = {"m", "down_w"}, *dn_out[] = {"y"};
  mb_add_node(c.m, "MatMul", "", dn_in, 2, dn_out, 1);
  mb_output(c.m, "y", d);
  c.tol_scale = 2.0; /* two products, the second of the rounded activation */
  c.all_nodes = true;
  case_run(&c);
}

static void silu_matmul_cases(void) {
  static const uint32_t half_types[] = {ONYX_DTYPE_FLOAT16, ONYX_DTYPE_BFLOAT16};
  /* 1 and 3 rows: the decode kernel; 5 (one past its 4) and 32: the prompt route. */
  static const int64_t rows[] = {1, 3, 5, 32};
  for (size_t t = 0; t < 2; ++t)
    for (size_t r = 0; r < 4; ++r) silu_matmul_case(half_types[t], rows[r], 896, 4864);
  silu_matmul_case(ONYX_DTYPE_FLOAT16, 2, 64, 40); /* K in one block, N of one column block */
}

/* A MatMulNBits node a -> y of random int4/int8 weights named after `tag` (codes and
 * zero points random bytes, scales as nbits_case draws them, times `scale`). */
static void case_nbits_node(ocase *c, const char *a, const char *y, const char *tag, uint32_t d,
                            int bits, int block, int zp, int64_t k, int64_t n, bool bias,
                            float scale) {
  const int64_t kb = (k + block - 1) / block, blob = block * bits / 8,
                zp_bytes = (kb * bits + 7) / 8;
  char w[48], sc[48], z[48], bi[48];
  snprintf(w, sizeof w, "%s_b", tag);
  snprintf(sc, sizeof sc, "%s_scales", tag);
  snprintf(z, sizeof z, "%s_zp", tag);
  snprintf(bi, sizeof bi, "%s_bias", tag);
  int64_t b_dims[] = {n, kb, blob}, s_dims[] = {n, kb}, z_dims[] = {n, zp_bytes}, bias_dims[] = {n};
  case_random_bytes(c, w, ONYX_DTYPE_UINT8, 3, b_dims, (size_t)(n * kb * blob));
  const float s_div = (bits == 8 ? 16.0f : 1.0f) / scale;
  case_weight(c, sc, d, 2, s_dims, 0.005f / s_div, 0.03f / s_div);
  if (zp == 1) case_random_bytes(c, z, ONYX_DTYPE_UINT8, 2, z_dims, (size_t)(n * zp_bytes));
  if (zp == 2) case_weight(c, z, d, 2, s_dims, 0.0f, (float)((1 << bits) - 1));
  if (bias) case_weight(c, bi, d, 1, bias_dims, -0.5f, 0.5f);
  const char *in[] = {a, w, sc, zp ? z : "", "", bi}, *out[] = {y};
  mb_node *node =
      mb_add_node(c->m, "MatMulNBits", "com.microsoft", in, bias ? 6 : 3 + !!zp, out, 1);
  mb_attr_int(node, "K", k);
  mb_attr_int(node, "N", n);
  mb_attr_int(node, "bits", bits);
  mb_attr_int(node, "block_size", block);
}

/* ai.onyx::RMSNormMatMulNBits, as norm_matmul makes it from an int4 export's norm and
 * the MatMulNBits that alone reads it. The CPU reference has no such op: it runs the
 * pair, the session under test must fuse it onto the provider. Up to 8 rows the
 * decode GEMV with the norm as its prologue, more the norm kernel then the prefill
 * route. Outputs: the product and, with skip, the residual sum. */
static void norm_matmul_nbits_case(uint32_t d, bool skip, int64_t rows, int64_t k, int64_t n,
                                   int bits, int zp, bool bias) {
  ocase c;
  case_begin(&c, 17, "RMSNormMatMulNBits",
             "RMSNormMatMulNBits %s %s M %lld K %lld N %lld %d-bit zp %d%s", dname(d),
             skip ? "skip" : "plain", (long long)rows, (long long)k, (long long)n, bits, zp,
             bias ? " bias" : "");
  int64_t x_dims[] = {1, rows, k}, g_dims[] = {k};
  case_input(&c, "x", d, 3, x_dims, -3.0f, 3.0f);
  if (skip) case_input(&c, "skip", d, 3, x_dims, -3.0f, 3.0f);
  case_weight(&c, "gamma", d, 1, g_dims, 0.5f, 1.5f);
  if (skip) {
    const char *in[] = {"x", "skip", "gamma"}, *out[] = {"h", "", "", "sum"};
    mb_attr_float(
        mb_add_node(c.m, "SkipSimplifiedLayerNormalization", "com.microsoft", in, 3, out, 4),
        "epsilon", 1e-6f);
  } else {
    const char *in[] = {"x", "gamma"}, *out[] = {"h"};
    mb_attr_float(mb_add_node(c.m, "SimplifiedLayerNormalization", "", in, 2, out, 1), "epsilon",
                  1e-6f);
  }
  case_nbits_node(&c, "h", "y", "w", d, bits, 32, zp, k, n, bias, 1.0f);
  mb_output(c.m, "y", d);
  if (skip) mb_output(c.m, "sum", d);
  /* A norm, then a product of its rounded output: the normed rows reach |2.5| (the
   * MatMulNBits cases' A stays in [-1, 1]), and the per-weight-scale GEMV (M > 1) rounds
   * each weight, so the sums' rounding is about twice theirs. */
  c.tol_scale = 4.0;
  c.all_nodes = true;
  case_run(&c);
}

static void norm_matmul_nbits_cases(void) {
  static const uint32_t half_types[] = {ONYX_DTYPE_FLOAT16, ONYX_DTYPE_BFLOAT16};
  for (size_t t = 0; t < 2; ++t) {
    uint32_t d = half_types[t];
    norm_matmul_nbits_case(d, true, 1, 896, 1152, 4, 0, true);    /* qkv, with Qwen's bias */
    norm_matmul_nbits_case(d, true, 1, 896, 9728, 4, 0, false);   /* gate|up */
    norm_matmul_nbits_case(d, false, 1, 896, 2048, 4, 1, false);  /* final norm, lm_head-like */
    norm_matmul_nbits_case(d, true, 4, 896, 1152, 4, 1, false);   /* 4 rows, packed zp */
    norm_matmul_nbits_case(d, true, 8, 200, 72, 8, 2, true);      /* 8 rows, 8-bit, float zp */
    norm_matmul_nbits_case(d, true, 1, 4864, 64, 4, 0, false);    /* long K split over warps */
    norm_matmul_nbits_case(d, false, 3, 100, 40, 4, 0, false);    /* K not whole blocks */
    norm_matmul_nbits_case(d, true, 9, 896, 1152, 4, 0, true);    /* prefill: the norm kernel */
    norm_matmul_nbits_case(d, false, 33, 128, 96, 8, 1, false);   /* prefill, plain, 8-bit */
    norm_matmul_nbits_case(d, false, 1, 256, 20000, 4, 0, false); /* lm_head-like: a warp a tile */
    norm_matmul_nbits_case(d, true, 1, 896, 36864, 4, 0, true);   /* a wide lm_head, skip, bias */
  }
}

/* ai.onyx::SiluMulMatMulNBits, as silu_matmul makes it from gate_up_silu's SiluMul and
 * the down MatMulNBits of an int4 MLP: gate and up MatMulNBits of x, Sigmoid, Mul, Mul,
 * the down MatMulNBits. The CPU runs the pair; under test every node must run on the
 * provider (the merged gate|up MatMulNBits and the fused down product). */
static void silu_matmul_nbits_case(uint32_t d, int64_t rows, int64_t hidden, int64_t inter,
                                   int zp) {
  ocase c;
  case_begin(&c, 17, "SiluMulMatMulNBits", "SiluMulMatMulNBits %s M %lld hidden %lld I %lld zp %d",
             dname(d), (long long)rows, (long long)hidden, (long long)inter, zp);
  int64_t x_dims[] = {1, rows, hidden};
  case_input(&c, "x", d, 3, x_dims, -1.0f, 1.0f);
  case_nbits_node(&c, "x", "gate_y", "gate", d, 4, 32, zp, hidden, inter, false, 1.0f);
  case_nbits_node(&c, "x", "up_y", "up", d, 4, 32, zp, hidden, inter, false, 1.0f);
  const char *sig_in[] = {"gate_y"}, *sig_out[] = {"s"};
  mb_add_node(c.m, "Sigmoid", "", sig_in, 1, sig_out, 1);
  const char *act_in[] = {"gate_y", "s"}, *act_out[] = {"a"};
  mb_add_node(c.m, "Mul", "", act_in, 2, act_out, 1);
  const char *fin_in[] = {"a", "up_y"}, *fin_out[] = {"m"};
  mb_add_node(c.m, "Mul", "", fin_in, 2, fin_out, 1);
  case_nbits_node(&c, "m", "y", "down", d, 4, 32, zp, inter, hidden, false, 0.2f);
  mb_output(c.m, "y", d);
  /* Three products in a chain, the down one over K = 4864 (its scales a fifth of the
   * others', so Y is of order 1): with more than one row the GEMV and the prefill route
   * round each weight to T, and gate|up's outputs are rounded too, so an error of about
   * 0.1% of Y's scale reaches outputs near zero, where only atol applies: 8 times it. */
  c.tol_scale = 8.0;
  c.all_nodes = true;
  case_run(&c);
}

static void silu_matmul_nbits_cases(void) {
  static const uint32_t half_types[] = {ONYX_DTYPE_FLOAT16, ONYX_DTYPE_BFLOAT16};
  static const int64_t rows[] = {1, 3, 8, 12}; /* the GEMV to 8 rows, then prefill */
  for (size_t t = 0; t < 2; ++t)
    for (size_t r = 0; r < 4; ++r) silu_matmul_nbits_case(half_types[t], rows[r], 896, 4864, 0);
  silu_matmul_nbits_case(ONYX_DTYPE_FLOAT16, 2, 64, 96, 1); /* small, packed zp */
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s REFERENCE.ini UNDER_TEST.ini PROVIDER [SEED]\n", argv[0]);
    return 2;
  }
  g.provider = argv[3];
  g.seed = argc > 4 ? strtoull(argv[4], NULL, 0) : (uint64_t)time(NULL) * 2654435761u;
  if (g.seed == 0) g.seed = 1;
  g.first_seed = g.seed;
  printf("consistency: seed %llu (pass it as the 4th argument to repeat)\n",
         (unsigned long long)g.seed);
  onyx_error *e = NULL;
  if (onyx_runtime_create(argv[2], &g.test, &e) != ONYX_STATUS_OK) {
    printf("cannot load %s: %s\n", argv[2], onyx_error_message(e));
    bool declined = onyx_error_status(e) == ONYX_STATUS_DEVICE_UNAVAILABLE;
    onyx_error_free(e);
    if (declined) {
      printf("skipped: no CUDA device (provider '%s' declined)\n", g.provider);
      return 0;
    }
    return 1;
  }
  bool found = false;
  for (size_t i = 0; i < onyx_runtime_provider_count(g.test); ++i)
    found |= strcmp(onyx_runtime_provider_name(g.test, i), g.provider) == 0;
  if (!found) {
    printf("skipped: no CUDA device (provider '%s' declined; the log line above says why)\n",
           g.provider);
    onyx_runtime_destroy(g.test);
    return 0;
  }
  if (onyx_runtime_create(argv[1], &g.ref, &e) != ONYX_STATUS_OK) {
    printf("cannot load %s: %s\n", argv[1], onyx_error_message(e));
    onyx_error_free(e);
    onyx_runtime_destroy(g.test);
    return 1;
  }
  elementwise_cases();
  matmul_cases();
  softmax_cases();
  layout_cases();
  norm_cases();
  rotary_cases();
  chain_cases();
  int_elementwise_cases();
  reduce_cases();
  decoder_mask_cases();
  int_cast_cases();
  nbits_cases();
  gbq_cases();
  silu_mul_cases();
  norm_matmul_cases();
  silu_matmul_cases();
  norm_matmul_nbits_cases();
  silu_matmul_nbits_cases();
  printf("consistency: %d passed, %d failed, %d without a reference (seed %llu)\n", g.passed,
         g.failed, g.no_reference, (unsigned long long)g.first_seed);
  /* Everything the runs allocated must be back with the governor. */
  uint64_t used[ONYX_REQUESTER_COUNT_];
  onyx_runtime_memory_usage(g.test, used, NULL);
  int leaked = 0;
  for (int r = 0; r < ONYX_REQUESTER_COUNT_; ++r) {
    if (used[r] != 0) {
      printf("consistency: %llu bytes of %s still booked after every session ended\n",
             (unsigned long long)used[r], onyx_requester_name((uint32_t)r));
      leaked = 1;
    }
  }
  onyx_runtime_destroy(g.ref);
  onyx_runtime_destroy(g.test);
  return g.failed > 0 || leaked ? 1 : 0;
}
