/*
 * infer of every CPU kernel, checked against compute: for each case the kernel is
 * run (kernel_harness) and its infer is asked the same question the planner asks
 * (kh_infer: geometry only, values for small integer inputs); dtype, rank and dims
 * of every output must agree, and values handed back (Shape, Size, Constant) must
 * equal what compute wrote. A last check insists that every kernel table of the
 * provider, attention's aside, has an infer and was exercised here.
 *
 * Usage: cpu_infer_test [path/to/libonyx_cpu.so]   (default: ONYX_CPU_SO)
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernel_harness.h"

#ifndef ONYX_CPU_SO
#define ONYX_CPU_SO "libonyx_cpu.so"
#endif

static const char *g_so_path = ONYX_CPU_SO;
static kh_provider g_cpu;

/* Tables exercised so far (by address). */
static const onyx_kernel_table *g_seen[256];
static size_t g_seen_count;

/* Tensor data made by the builders below, freed at the end of each test. */
static void *g_pool[512];
static size_t g_pool_count;

static void *pool_alloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  assert_non_null(p);
  assert_true(g_pool_count < sizeof g_pool / sizeof g_pool[0]);
  g_pool[g_pool_count++] = p;
  return p;
}

static void pool_free(void) {
  for (size_t i = 0; i < g_pool_count; ++i) free(g_pool[i]);
  g_pool_count = 0;
}

static uint64_t g_rng = 0x243f6a8885a308d3ull;
static uint64_t rng_next(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return g_rng;
}

/* A tensor of `dtype` with the given dims and fresh random data that every op
 * accepts (floats in [0.5, 2), integers in [1, 4], bools 0/1). */
static onyx_tensor T(uint32_t dtype, uint32_t rank, ...) {
  int64_t dims[ONYX_MAX_RANK];
  va_list ap;
  va_start(ap, rank);
  for (uint32_t i = 0; i < rank; ++i) dims[i] = va_arg(ap, int64_t);
  va_end(ap);
  onyx_tensor t = kh_tensor(dtype, rank, dims, NULL);
  int64_t n = onyx_tensor_numel(&t);
  size_t es = onyx_dtype_size(dtype);
  unsigned char *p = pool_alloc((size_t)n * es);
  for (int64_t i = 0; i < n; ++i) {
    uint64_t r = rng_next();
    switch (dtype) {
    case ONYX_DTYPE_FLOAT32: {
      float v = 0.5f + 1.5f * (float)((r >> 40) / 16777216.0);
      memcpy(p + i * 4, &v, 4);
      break;
    }
    case ONYX_DTYPE_BOOL:
      p[i] = r & 1;
      break;
    case ONYX_DTYPE_INT64: {
      int64_t v = 1 + (int64_t)(r % 4);
      memcpy(p + i * 8, &v, 8);
      break;
    }
    case ONYX_DTYPE_INT32: {
      int32_t v = 1 + (int32_t)(r % 4);
      memcpy(p + i * 4, &v, 4);
      break;
    }
    default:
      memset(p + (size_t)i * es, 0x3c, es); /* 1.0 in float16, small elsewhere */
      break;
    }
  }
  t.data = p;
  return t;
}

#define F(...) T(ONYX_DTYPE_FLOAT32, __VA_ARGS__)

/* A 1-D int64 tensor of `n` given values (n = 0: an empty one). */
static onyx_tensor I(size_t n, ...) {
  int64_t *v = pool_alloc(n * sizeof *v);
  va_list ap;
  va_start(ap, n);
  for (size_t i = 0; i < n; ++i) v[i] = va_arg(ap, int64_t);
  va_end(ap);
  int64_t d = (int64_t)n;
  return kh_tensor(ONYX_DTYPE_INT64, 1, &d, v);
}

/* An int64 / float32 scalar. */
static onyx_tensor IS(int64_t v) {
  int64_t *p = pool_alloc(sizeof *p);
  *p = v;
  return kh_tensor(ONYX_DTYPE_INT64, 0, NULL, p);
}
static onyx_tensor FS(float v) {
  float *p = pool_alloc(sizeof *p);
  *p = v;
  return kh_tensor(ONYX_DTYPE_FLOAT32, 0, NULL, p);
}

/* An absent optional input. */
static const onyx_tensor ABSENT = {0};

static void mark_seen(const onyx_kernel_table *k) {
  for (size_t i = 0; i < g_seen_count; ++i)
    if (g_seen[i] == k) return;
  if (g_seen_count < sizeof g_seen / sizeof g_seen[0]) g_seen[g_seen_count++] = k;
}

/* Runs compute and infer on one case and compares them. */
static void check(const kh_node *n, const onyx_tensor *ins, size_t count) {
  const onyx_tensor *in[16];
  for (size_t i = 0; i < count; ++i) in[i] = ins[i].dtype == ONYX_DTYPE_UNDEFINED ? NULL : &ins[i];
  const onyx_kernel_table *k = kh_kernel_for(&g_cpu, n, in, count);
  if (k == NULL) fail_msg("%s opset %lld: no kernel", n->op, (long long)n->opset);
  mark_seen(k);
  if (k->infer == NULL) fail_msg("%s opset %lld: no infer", n->op, (long long)n->opset);

  kh_result r;
  kh_run(&g_cpu, n, in, count, &r);
  if (r.status != ONYX_STATUS_OK)
    fail_msg("%s opset %lld: compute failed at %s: %s", n->op, (long long)n->opset, r.stage,
             r.error);
  kh_infer_result ir;
  kh_infer(&g_cpu, n, in, count, false, &ir);
  if (ir.status != ONYX_STATUS_OK)
    fail_msg("%s opset %lld: infer says %s: %s", n->op, (long long)n->opset,
             onyx_status_str(ir.status), ir.error);
  size_t outs = n->output_count ? n->output_count : 1;
  for (size_t o = 0; o < outs; ++o) {
    if (!r.allocated[o]) continue;
    const onyx_tensor *c = &r.out[o], *g = &ir.out[o];
    if (g->dtype != c->dtype || g->rank != c->rank ||
        memcmp(g->dims, c->dims, c->rank * sizeof c->dims[0]) != 0) {
      char a[128] = "", b[128] = "";
      for (uint32_t d = 0; d < c->rank && d < ONYX_MAX_RANK; ++d)
        snprintf(a + strlen(a), sizeof a - strlen(a), " %lld", (long long)c->dims[d]);
      for (uint32_t d = 0; d < g->rank && d < ONYX_MAX_RANK; ++d)
        snprintf(b + strlen(b), sizeof b - strlen(b), " %lld", (long long)g->dims[d]);
      fail_msg("%s opset %lld output %zu: compute gives dtype %u [%s ], infer dtype %u rank %u "
               "[%s ]",
               n->op, (long long)n->opset, o, c->dtype, a, g->dtype, g->rank, b);
    }
    if (g->data != NULL) {
      if (g->data != ir.values[o]) fail_msg("%s: infer left a foreign data pointer", n->op);
      size_t bytes = (size_t)onyx_tensor_numel(c) * onyx_dtype_size(c->dtype);
      if (bytes > 0 && memcmp(g->data, c->data, bytes) != 0)
        fail_msg("%s opset %lld output %zu: infer's values differ from compute's", n->op,
                 (long long)n->opset, o);
    }
  }
  kh_result_free(&r);
}

#define CHECK(node, ...)                                                                           \
  do {                                                                                             \
    const onyx_tensor ins_[] = {__VA_ARGS__};                                                      \
    check(&(node), ins_, sizeof ins_ / sizeof ins_[0]);                                            \
  } while (0)

/* A node: op, opset, attributes (may be NULL), outputs. */
#define NODE(name, OP, OPSET, ATTRS, NA, NOUT)                                                     \
  kh_node name = {.op = OP, .opset = OPSET, .attrs = ATTRS, .attr_count = NA, .output_count = NOUT}

/* ------------------------------------------------------------------ cases */

static onyx_attr g_axis1[1];
static const onyx_attr *ax1_attr(void) {
  g_axis1[0] = kh_attr_int("axis", 1);
  return g_axis1;
}

static void test_infer_elementwise(void **st) {
  (void)st;
  static const char *const arith[] = {"Add", "Sub", "Mul", "Div"};
  onyx_attr bc[] = {kh_attr_int("broadcast", 1)};
  for (size_t i = 0; i < 4; ++i) {
    NODE(legacy, arith[i], 6, bc, 1, 1);
    CHECK(legacy, F(3, (int64_t)2, (int64_t)3, (int64_t)4), F(1, (int64_t)4));
    NODE(n, arith[i], 14, NULL, 0, 1);
    CHECK(n, F(3, (int64_t)2, (int64_t)1, (int64_t)4), F(2, (int64_t)3, (int64_t)1));
  }
  NODE(pow, "Pow", 15, NULL, 0, 1);
  CHECK(pow, F(2, (int64_t)2, (int64_t)3), T(ONYX_DTYPE_INT64, 1, (int64_t)3));
  onyx_attr fm[] = {kh_attr_int("fmod", 1)};
  NODE(mod, "Mod", 13, fm, 1, 1);
  CHECK(mod, F(2, (int64_t)2, (int64_t)3), F(0));

  static const char *const unary[] = {"Relu", "Sigmoid", "Sqrt", "Neg", "Exp", "Log",
                                      "Abs",  "Tanh",    "Erf",  "Sin", "Cos", "Reciprocal"};
  for (size_t i = 0; i < sizeof unary / sizeof unary[0]; ++i) {
    NODE(n, unary[i], 13, NULL, 0, 1);
    CHECK(n, F(3, (int64_t)2, (int64_t)3, (int64_t)5));
  }
  onyx_attr approx[] = {kh_attr_string("approximate", "tanh")};
  NODE(gelu, "Gelu", 20, approx, 1, 1);
  CHECK(gelu, F(2, (int64_t)4, (int64_t)5));
  kh_node msgelu = {.op = "Gelu", .domain = "com.microsoft", .opset = 1};
  CHECK(msgelu, F(2, (int64_t)4, (int64_t)5));
  kh_node fast = {.op = "FastGelu", .domain = "com.microsoft", .opset = 1};
  CHECK(fast, F(3, (int64_t)2, (int64_t)3, (int64_t)5), F(1, (int64_t)5));
  kh_node silu_mul = {.op = "SiluMul", .domain = "ai.onyx", .opset = 1};
  CHECK(silu_mul, F(3, (int64_t)2, (int64_t)3, (int64_t)10));
  kh_node nmm = {.op = "RMSNormMatMul", .domain = "ai.onyx", .opset = 1, .output_count = 2};
  CHECK(nmm, F(3, (int64_t)1, (int64_t)2, (int64_t)8), F(3, (int64_t)1, (int64_t)2, (int64_t)8),
        F(1, (int64_t)8), F(2, (int64_t)8, (int64_t)6));
  kh_node nmm_plain = {.op = "RMSNormMatMul", .domain = "ai.onyx", .opset = 1};
  CHECK(nmm_plain, F(2, (int64_t)3, (int64_t)8), ABSENT, F(1, (int64_t)8),
        F(2, (int64_t)8, (int64_t)5));
  kh_node smm = {.op = "SiluMulMatMul", .domain = "ai.onyx", .opset = 1};
  CHECK(smm, F(3, (int64_t)1, (int64_t)2, (int64_t)16), F(2, (int64_t)8, (int64_t)6));

  static const char *const cmp[] = {"Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual"};
  for (size_t i = 0; i < 5; ++i) {
    NODE(n, cmp[i], 13, NULL, 0, 1);
    CHECK(n, T(ONYX_DTYPE_INT64, 2, (int64_t)3, (int64_t)1), T(ONYX_DTYPE_INT64, 1, (int64_t)4));
  }
  static const char *const logic[] = {"And", "Or", "Xor"};
  for (size_t i = 0; i < 3; ++i) {
    NODE(n, logic[i], 7, NULL, 0, 1);
    CHECK(n, T(ONYX_DTYPE_BOOL, 2, (int64_t)2, (int64_t)3), T(ONYX_DTYPE_BOOL, 0));
  }
  NODE(not, "Not", 1, NULL, 0, 1);
  CHECK(not, T(ONYX_DTYPE_BOOL, 2, (int64_t)2, (int64_t)3));
  NODE(where, "Where", 16, NULL, 0, 1);
  CHECK(where, T(ONYX_DTYPE_BOOL, 2, (int64_t)2, (int64_t)1), F(1, (int64_t)3), F(0));
  static const char *const fold[] = {"Max", "Min", "Sum"};
  for (size_t i = 0; i < 3; ++i) {
    NODE(n, fold[i], 13, NULL, 0, 1);
    CHECK(n, F(1, (int64_t)3), F(2, (int64_t)2, (int64_t)1), F(0));
  }
  onyx_attr clip_attrs[] = {kh_attr_float("min", 0.7f), kh_attr_float("max", 1.2f)};
  NODE(clip6, "Clip", 6, clip_attrs, 2, 1);
  CHECK(clip6, F(2, (int64_t)2, (int64_t)3));
  NODE(clip13, "Clip", 13, NULL, 0, 1);
  CHECK(clip13, F(2, (int64_t)2, (int64_t)3), ABSENT, FS(1.0f));
  pool_free();
}

static void test_infer_linear_and_norms(void **st) {
  (void)st;
  NODE(mm, "MatMul", 13, NULL, 0, 1);
  CHECK(mm, F(3, (int64_t)2, (int64_t)3, (int64_t)4), F(2, (int64_t)4, (int64_t)5));
  CHECK(mm, F(1, (int64_t)4), F(3, (int64_t)2, (int64_t)4, (int64_t)5));
  onyx_attr tb[] = {kh_attr_int("transB", 1)};
  NODE(gemm, "Gemm", 13, tb, 1, 1);
  CHECK(gemm, F(2, (int64_t)3, (int64_t)4), F(2, (int64_t)5, (int64_t)4), F(1, (int64_t)5));
  NODE(sm1, "Softmax", 11, NULL, 0, 1);
  CHECK(sm1, F(3, (int64_t)2, (int64_t)3, (int64_t)4));
  NODE(sm13, "Softmax", 13, NULL, 0, 1);
  CHECK(sm13, F(3, (int64_t)2, (int64_t)3, (int64_t)4));

  onyx_attr ax1[] = {kh_attr_int("axis", 1)};
  NODE(ln, "LayerNormalization", 17, ax1, 1, 3);
  CHECK(ln, F(3, (int64_t)2, (int64_t)3, (int64_t)4), F(2, (int64_t)3, (int64_t)4),
        F(1, (int64_t)4));
  NODE(rms, "RMSNormalization", 23, NULL, 0, 1);
  CHECK(rms, F(3, (int64_t)2, (int64_t)3, (int64_t)4), F(1, (int64_t)4));
  NODE(sln, "SimplifiedLayerNormalization", 17, NULL, 0, 2);
  CHECK(sln, F(3, (int64_t)2, (int64_t)3, (int64_t)4), F(1, (int64_t)4));
  kh_node skip = {
      .op = "SkipLayerNormalization", .domain = "com.microsoft", .opset = 1, .output_count = 4};
  CHECK(skip, F(3, (int64_t)2, (int64_t)3, (int64_t)4), F(2, (int64_t)3, (int64_t)4),
        F(1, (int64_t)4), F(1, (int64_t)4), F(1, (int64_t)4));
  kh_node sskip = {.op = "SkipSimplifiedLayerNormalization",
                   .domain = "com.microsoft",
                   .opset = 1,
                   .output_count = 4};
  CHECK(sskip, F(3, (int64_t)2, (int64_t)3, (int64_t)4), F(3, (int64_t)2, (int64_t)3, (int64_t)4),
        F(1, (int64_t)4));

  /* Quantized weights: 4-bit B [N, k_blocks, blob], per-block scales; a packed table. */
  onyx_attr nbattrs[] = {kh_attr_int("K", 32), kh_attr_int("N", 8), kh_attr_int("block_size", 16),
                         kh_attr_int("accuracy_level", 4)};
  kh_node nbits = {.op = "MatMulNBits",
                   .domain = "com.microsoft",
                   .opset = 1,
                   .attrs = nbattrs,
                   .attr_count = 4};
  CHECK(nbits, F(3, (int64_t)2, (int64_t)3, (int64_t)32),
        T(ONYX_DTYPE_UINT8, 3, (int64_t)8, (int64_t)2, (int64_t)8), F(2, (int64_t)8, (int64_t)2));
  onyx_attr gbqattrs[] = {kh_attr_int("block_size", 16)};
  kh_node gbq = {.op = "GatherBlockQuantized",
                 .domain = "com.microsoft",
                 .opset = 1,
                 .attrs = gbqattrs,
                 .attr_count = 1};
  CHECK(gbq, T(ONYX_DTYPE_UINT8, 2, (int64_t)5, (int64_t)16),
        I(3, (int64_t)1, (int64_t)4, (int64_t)0), F(2, (int64_t)5, (int64_t)2));

  int64_t axes01[] = {0, -1};
  onyx_attr rattrs[] = {kh_attr_ints("axes", axes01, 2), kh_attr_int("keepdims", 0)};
  static const char *const red[] = {"ReduceSum", "ReduceMean", "ReduceMax"};
  for (size_t i = 0; i < 3; ++i) {
    NODE(old, red[i], 11, rattrs, 2, 1);
    CHECK(old, F(3, (int64_t)2, (int64_t)3, (int64_t)4));
    NODE(neu, red[i], 18, NULL, 0, 1);
    CHECK(neu, F(3, (int64_t)2, (int64_t)3, (int64_t)4), I(1, (int64_t)1));
    CHECK(neu, F(3, (int64_t)2, (int64_t)3, (int64_t)4)); /* all axes */
  }
  pool_free();
}

static void test_infer_shape_ops(void **st) {
  (void)st;
  onyx_attr to[] = {kh_attr_int("to", ONYX_DTYPE_INT64)};
  NODE(cast, "Cast", 19, to, 1, 1);
  CHECK(cast, F(2, (int64_t)2, (int64_t)3));
  NODE(castlike, "CastLike", 19, NULL, 0, 1);
  CHECK(castlike, F(2, (int64_t)2, (int64_t)3), T(ONYX_DTYPE_INT32, 0));
  int64_t shp[] = {3, -1};
  onyx_attr rs[] = {kh_attr_ints("shape", shp, 2)};
  NODE(r1, "Reshape", 4, rs, 1, 1);
  CHECK(r1, F(3, (int64_t)2, (int64_t)3, (int64_t)2));
  NODE(r5, "Reshape", 14, NULL, 0, 1);
  CHECK(r5, F(3, (int64_t)2, (int64_t)3, (int64_t)2), I(3, (int64_t)0, (int64_t)-1, (int64_t)1));
  onyx_attr az[] = {kh_attr_int("allowzero", 1)};
  NODE(r5z, "Reshape", 14, az, 1, 1);
  CHECK(r5z, F(2, (int64_t)0, (int64_t)3), I(2, (int64_t)3, (int64_t)0));
  int64_t perm[] = {2, 0, 1};
  onyx_attr pa[] = {kh_attr_ints("perm", perm, 3)};
  NODE(tr, "Transpose", 13, pa, 1, 1);
  CHECK(tr, F(3, (int64_t)2, (int64_t)3, (int64_t)4));
  NODE(trr, "Transpose", 13, NULL, 0, 1);
  CHECK(trr, F(3, (int64_t)2, (int64_t)3, (int64_t)4));
  NODE(cc, "Concat", 13, ax1_attr(), 1, 1);
  CHECK(cc, F(2, (int64_t)2, (int64_t)3), F(2, (int64_t)2, (int64_t)1));
  NODE(ga, "Gather", 13, ax1_attr(), 1, 1);
  CHECK(ga, F(3, (int64_t)2, (int64_t)3, (int64_t)4), I(2, (int64_t)2, (int64_t)-1));
  int64_t ax0[] = {0, 3};
  onyx_attr uq[] = {kh_attr_ints("axes", ax0, 2)};
  NODE(u1, "Unsqueeze", 11, uq, 1, 1);
  CHECK(u1, F(2, (int64_t)2, (int64_t)3));
  NODE(u13, "Unsqueeze", 13, NULL, 0, 1);
  CHECK(u13, F(2, (int64_t)2, (int64_t)3), I(2, (int64_t)-1, (int64_t)0));
  int64_t sq[] = {1};
  onyx_attr sqa[] = {kh_attr_ints("axes", sq, 1)};
  NODE(s1, "Squeeze", 11, sqa, 1, 1);
  CHECK(s1, F(3, (int64_t)2, (int64_t)1, (int64_t)3));
  NODE(s13, "Squeeze", 13, NULL, 0, 1);
  CHECK(s13, F(3, (int64_t)1, (int64_t)1, (int64_t)3));
  CHECK(s13, F(3, (int64_t)2, (int64_t)1, (int64_t)3), I(1, (int64_t)-2));
  NODE(sh1, "Shape", 13, NULL, 0, 1);
  CHECK(sh1, F(3, (int64_t)2, (int64_t)7, (int64_t)3));
  onyx_attr se[] = {kh_attr_int("start", 1), kh_attr_int("end", -1)};
  NODE(sh15, "Shape", 15, se, 2, 1);
  CHECK(sh15, F(4, (int64_t)2, (int64_t)7, (int64_t)3, (int64_t)5));
  NODE(size, "Size", 13, NULL, 0, 1);
  CHECK(size, F(3, (int64_t)2, (int64_t)7, (int64_t)3));
  NODE(id, "Identity", 13, NULL, 0, 1);
  CHECK(id, F(2, (int64_t)2, (int64_t)3));
  NODE(fl, "Flatten", 13, ax1_attr(), 1, 1);
  CHECK(fl, F(3, (int64_t)2, (int64_t)3, (int64_t)4));
  int64_t cv[] = {4, 5, 6};
  onyx_attr ca[] = {kh_attr_ints("value_ints", cv, 3)};
  NODE(cst, "Constant", 13, ca, 1, 1);
  check(&cst, NULL, 0);
  int32_t one = 7;
  int64_t sd = 1;
  onyx_tensor vt = kh_tensor(ONYX_DTYPE_INT32, 1, &sd, &one);
  onyx_attr cosv[] = {kh_attr_tensor("value", &vt)};
  NODE(cos_, "ConstantOfShape", 20, cosv, 1, 1);
  CHECK(cos_, I(2, (int64_t)2, (int64_t)3));
  NODE(range, "Range", 11, NULL, 0, 1);
  CHECK(range, IS(10), IS(-3), IS(-4));
  pool_free();
}

static void test_infer_slicing(void **st) {
  (void)st;
  int64_t starts[] = {1, -1}, ends[] = {3, 0}, axes[] = {0, 2};
  onyx_attr sa[] = {kh_attr_ints("starts", starts, 2), kh_attr_ints("ends", ends, 2),
                    kh_attr_ints("axes", axes, 2)};
  NODE(s1, "Slice", 9, sa, 3, 1);
  CHECK(s1, F(3, (int64_t)4, (int64_t)3, (int64_t)5));
  NODE(s10, "Slice", 13, NULL, 0, 1);
  CHECK(s10, F(3, (int64_t)4, (int64_t)3, (int64_t)5), I(2, (int64_t)-1, (int64_t)100),
        I(2, (int64_t)-100, (int64_t)1), I(2, (int64_t)0, (int64_t)2),
        I(2, (int64_t)-2, (int64_t)3));
  int64_t sp[] = {1, 3};
  onyx_attr spa[] = {kh_attr_ints("split", sp, 2), kh_attr_int("axis", -1)};
  NODE(sp1, "Split", 11, spa, 2, 2);
  CHECK(sp1, F(2, (int64_t)2, (int64_t)4));
  NODE(sp13, "Split", 13, NULL, 0, 3);
  CHECK(sp13, F(2, (int64_t)6, (int64_t)2), I(3, (int64_t)1, (int64_t)0, (int64_t)5));
  onyx_attr no[] = {kh_attr_int("num_outputs", 3)};
  NODE(sp18, "Split", 18, no, 1, 3);
  CHECK(sp18, F(1, (int64_t)7));
  NODE(ex, "Expand", 13, NULL, 0, 1);
  CHECK(ex, F(2, (int64_t)3, (int64_t)1), I(3, (int64_t)2, (int64_t)1, (int64_t)4));
  NODE(tri, "Trilu", 14, NULL, 0, 1);
  CHECK(tri, F(3, (int64_t)2, (int64_t)3, (int64_t)4), IS(-1));
  pool_free();
}

/* Shapes that need values the planner lacks are declined, never guessed. */
static void test_infer_declines_unknown_values(void **st) {
  (void)st;
  struct {
    kh_node n;
    onyx_tensor in[3];
    size_t count;
  } cases[] = {
      {{.op = "Reshape", .opset = 14}, {F(2, (int64_t)2, (int64_t)3), I(1, (int64_t)-1)}, 2},
      {{.op = "Expand", .opset = 13}, {F(1, (int64_t)3), I(2, (int64_t)2, (int64_t)3)}, 2},
      {{.op = "Unsqueeze", .opset = 13}, {F(1, (int64_t)3), I(1, (int64_t)0)}, 2},
      {{.op = "ConstantOfShape", .opset = 9}, {I(1, (int64_t)3)}, 1},
      {{.op = "Slice", .opset = 13}, {F(1, (int64_t)3), I(1, (int64_t)0), I(1, (int64_t)2)}, 3},
      {{.op = "ReduceSum", .opset = 13}, {F(1, (int64_t)3), I(1, (int64_t)0)}, 2},
      {{.op = "Range", .opset = 11}, {FS(0), FS(3), FS(1)}, 3},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    const onyx_tensor *in[3] = {&cases[i].in[0], &cases[i].in[1], &cases[i].in[2]};
    kh_infer_result ir;
    kh_infer(&g_cpu, &cases[i].n, in, cases[i].count, true, &ir);
    if (ir.status != ONYX_STATUS_UNSUPPORTED)
      fail_msg("%s: infer without values gave %s, want UNSUPPORTED", cases[i].n.op,
               onyx_status_str(ir.status));
  }
  /* A geometry compute would reject is an error, not a guess. */
  kh_node add = {.op = "Add", .opset = 14};
  onyx_tensor a = F(1, (int64_t)3), b = F(1, (int64_t)4);
  const onyx_tensor *in[] = {&a, &b};
  kh_infer_result ir;
  kh_infer(&g_cpu, &add, in, 2, false, &ir);
  assert_int_equal(ir.status, ONYX_STATUS_INVALID_ARGUMENT);
  /* Without the values buffer (NULL data) Shape still gives its geometry. */
  pool_free();
}

/* Every kernel table outside attention/ has an infer and was exercised above. */
static void test_infer_covers_every_kernel(void **st) {
  (void)st;
  const onyx_provider_table *t = g_cpu.table;
  for (size_t i = 0; i < t->kernel_count; ++i) {
    const onyx_kernel_table *k = t->kernels[i];
    const char *op = k->op_type;
    if (strstr(op, "Attention") != NULL || strcmp(op, "RotaryEmbedding") == 0) continue;
    if (k->infer == NULL) fail_msg("%s (since %lld) has no infer", op, (long long)k->since_opset);
    bool seen = false;
    for (size_t j = 0; j < g_seen_count; ++j) seen = seen || g_seen[j] == k;
    if (!seen)
      fail_msg("%s::%s (opsets %lld-%lld) has no infer case", k->domain, op,
               (long long)k->since_opset, (long long)k->until_opset);
  }
}

static int group_setup(void **st) {
  (void)st;
  char err[512];
  if (kh_load(&g_cpu, g_so_path, NULL, 0, 1, err, sizeof err) != ONYX_STATUS_OK) {
    fprintf(stderr, "cannot load %s: %s\n", g_so_path, err);
    return -1;
  }
  return 0;
}

static int group_teardown(void **st) {
  (void)st;
  pool_free();
  kh_unload(&g_cpu);
  return 0;
}

int main(int argc, char **argv) {
  if (argc > 1) g_so_path = argv[1];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_infer_elementwise),
      cmocka_unit_test(test_infer_linear_and_norms),
      cmocka_unit_test(test_infer_shape_ops),
      cmocka_unit_test(test_infer_slicing),
      cmocka_unit_test(test_infer_declines_unknown_values),
      cmocka_unit_test(test_infer_covers_every_kernel), /* last: needs the others' marks */
  };
  return cmocka_run_group_tests_name("cpu_infer", tests, group_setup, group_teardown);
}
