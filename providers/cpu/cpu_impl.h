/*
 * Private to the CPU reference provider (libonyx_cpu.so). Nothing here crosses the
 * ABI: the only published symbol of the library is onyx_provider_entry.
 *
 * The provider is built against abi/ alone, exactly as a third-party provider is.
 * Files, one concern each:
 *   provider.c        entry point, negotiation, provider table, kernel list
 *   cpu_attr.c        attribute lookup with type checks
 *   cpu_shape.c       shape helpers: axes, element counts, messages, kernel state
 *   cpu_broadcast.c   numpy multidirectional broadcasting
 *   cpu_half.c        float16 / bfloat16 conversions
 *   cpu_infer.c       helpers for the kernels' infer callbacks, parallel ranges
 *   cpu_elementwise.c Add Sub Mul Div Pow Mod (broadcasting arithmetic)
 *   cpu_unary.c       Relu Sigmoid Sqrt Neg Exp Log Abs Reciprocal Tanh Erf Sin Cos
 *                     Gelu, com.microsoft Gelu FastGelu
 *   cpu_logic.c       Equal Greater Less GreaterOrEqual LessOrEqual And Or Xor Not
 *                     Where Max Min Sum Clip
 *   cpu_reduce.c      ReduceSum ReduceMean ReduceMax
 *   cpu_norm.c        LayerNormalization RMSNormalization SimplifiedLayerNormalization,
 *                     com.microsoft SkipLayerNormalization SkipSimplifiedLayerNormalization
 *   cpu_slice.c       Slice Split Expand Trilu
 *   cpu_gemm*.c       the blocked float32 GEMM core (cpu_gemm_impl.h lists its files) and
 *                     the simple float64/int loops
 *   cpu_matmul.c      MatMul and Gemm kernels
 *   cpu_matmul_nbits*.c, cpu_gather_block_quantized.c
 *                     com.microsoft MatMulNBits and GatherBlockQuantized (quantized
 *                     weights; cpu_nbits.h lists the files)
 *   cpu_softmax.c     Softmax
 *   cpu_cast.c        Cast, CastLike
 *   cpu_shape_ops.c   Reshape Transpose Concat Gather Unsqueeze Squeeze Shape Identity
 *                     Constant ConstantOfShape Range Size Flatten
 */
#ifndef ONYX_CPU_IMPL_H
#define ONYX_CPU_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onyx_abi.h"
#include "pc_attr.h"
#include "pc_msg.h"

#if defined(__GNUC__)
#define ONYX__CPU_PRINTF(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#else
#define ONYX__CPU_PRINTF(fmt_index, first_arg)
#endif

/* ------------------------------------------------------------------ provider */

/* One open instance of the provider (what open() returns as its state). Kernels see
 * it through their create() call and keep a pointer to it. */
typedef struct onyx__cpu_provider {
  const onyx_host_table *host; /* owned by the core, valid until close */
  /* Whether kernels may spread work over host->parallel_for. Off when the core
   * offers no parallel_for or the `threads = 1` option asks for serial kernels. */
  bool parallel;
  uint32_t num_threads; /* >= 1; tasks a kernel splits its work into at most */
} onyx__cpu_provider;

/* Runs fn(arg, i) for i in [0, n): on the core's threads when allowed, else here. */
void onyx__cpu_parallel_for(const onyx__cpu_provider *p, size_t n, void (*fn)(void *arg, size_t i),
                            void *arg);

/* Splits [0, total) into contiguous pieces of at least `grain` items, at most one per
 * thread, and runs fn(arg, begin, end) on each: in parallel when the provider may,
 * on this thread when the work is small. fn must be safe to run concurrently. */
void onyx__cpu_parallel_range(const onyx__cpu_provider *p, int64_t total, int64_t grain,
                              void (*fn)(void *arg, int64_t begin, int64_t end), void *arg);

/* y = 1/(1 + e^-x) over n floats, vectorised where the CPU allows (cpu_vmath.c);
 * x and y may be the same array. */
void onyx__cpu_sigmoid_f32(const float *x, float *y, int64_t n);

/* ai.onyx::SiluMul of `rows` rows of H (2n each) into Y (n each), float32, float16 or
 * bfloat16, on the provider's threads (cpu_silu_mul.c): the SiluMul kernel's bits, for
 * kernels that fuse it (cpu_silu_matmul.c). */
void onyx__cpu_silu_mul_rows(const onyx__cpu_provider *p, uint32_t dtype, const void *h, void *y,
                             int64_t rows, int64_t n);

/* Items below which elementwise work stays on one thread (thread hand-off costs a
 * few microseconds; this many simple float ops take about as long). */
#define ONYX__CPU_PARALLEL_GRAIN 32768

/* Every type the CPU kernels can move as bytes (all fixed-size dtypes). */
#define ONYX__CPU_FIXED_TYPES                                                                      \
  (ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT32) | ONYX_DTYPE_BIT(ONYX_DTYPE_UINT8) |                         \
   ONYX_DTYPE_BIT(ONYX_DTYPE_INT8) | ONYX_DTYPE_BIT(ONYX_DTYPE_UINT16) |                           \
   ONYX_DTYPE_BIT(ONYX_DTYPE_INT16) | ONYX_DTYPE_BIT(ONYX_DTYPE_INT32) |                           \
   ONYX_DTYPE_BIT(ONYX_DTYPE_INT64) | ONYX_DTYPE_BIT(ONYX_DTYPE_BOOL) |                            \
   ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT16) | ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT64) |                       \
   ONYX_DTYPE_BIT(ONYX_DTYPE_UINT32) | ONYX_DTYPE_BIT(ONYX_DTYPE_UINT64) |                         \
   ONYX_DTYPE_BIT(ONYX_DTYPE_BFLOAT16))

/* Floating-point types; 16-bit ones are computed in float32. */
#define ONYX__CPU_FLOAT_TYPES                                                                      \
  (ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT32) | ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT64) |                       \
   ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT16) | ONYX_DTYPE_BIT(ONYX_DTYPE_BFLOAT16))

/* Integer types (bool excluded). */
#define ONYX__CPU_INT_TYPES                                                                        \
  (ONYX_DTYPE_BIT(ONYX_DTYPE_UINT8) | ONYX_DTYPE_BIT(ONYX_DTYPE_INT8) |                            \
   ONYX_DTYPE_BIT(ONYX_DTYPE_UINT16) | ONYX_DTYPE_BIT(ONYX_DTYPE_INT16) |                          \
   ONYX_DTYPE_BIT(ONYX_DTYPE_INT32) | ONYX_DTYPE_BIT(ONYX_DTYPE_INT64) |                           \
   ONYX_DTYPE_BIT(ONYX_DTYPE_UINT32) | ONYX_DTYPE_BIT(ONYX_DTYPE_UINT64))

/* Whether `dtype` is in a mask built from ONYX_DTYPE_BIT. */
static inline bool onyx__cpu_dtype_in(uint32_t dtype, uint64_t mask) {
  return dtype < 64 && (mask & ONYX_DTYPE_BIT(dtype)) != 0;
}

/* ------------------------------------------------------------------ kernel state */

/* The part of every kernel's state that is the same for all ops: what create()
 * learned about the node that compute() needs again. Op states embed it first. */
typedef struct onyx__cpu_node {
  const onyx__cpu_provider *provider;
  int64_t opset;
  char op_type[32]; /* for messages (the node's strings may not outlive create) */
  /* Output 0 is allocated only when the node names it (an unnamed output is
   * optional and nobody reads it). */
  bool want_output;
  /* Multi-output ops: how many output slots the node lists, and bit k set when
   * output k (k < 64) is named; slots past 64 count as named. */
  size_t output_count;
  uint64_t outputs_named;
} onyx__cpu_node;

/* Whether the node names output k (see onyx__cpu_node). */
static inline bool onyx__cpu_output_named(const onyx__cpu_node *n, size_t k) {
  if (k >= n->output_count) return false;
  return k >= 64 || (n->outputs_named >> k & 1u) != 0;
}

/* Allocates a zeroed state of `size` bytes (>= sizeof(onyx__cpu_node)) and fills
 * its onyx__cpu_node head from `node`. Returns NULL when memory runs out, with a
 * message in err. Kernel states are a few dozen bytes of parsed attributes; tensor
 * memory (outputs, scratch) always comes from the core. */
void *onyx__cpu_state_new(size_t size, void *provider_state, const onyx_node_info *node, char *err,
                          size_t err_cap);

/* create() for ops whose only state is the common head. */
onyx_status onyx__cpu_create_plain(void *provider_state, const onyx_node_info *node,
                                   void **out_state, char *err, size_t err_cap);

/* destroy() for every CPU kernel state; NULL-safe. */
void onyx__cpu_destroy(void *state);

/* Allocates output 0 when the node wants it; otherwise sets *out_view = NULL and
 * succeeds, so the kernel validates and skips writing. Reports a failure through
 * ctx->set_error. */
onyx_status onyx__cpu_alloc_output(const onyx__cpu_node *node, onyx_compute_ctx *ctx,
                                   uint32_t dtype, uint32_t rank, const int64_t *dims,
                                   onyx_tensor **out_view);

/* The same for output `index` of a multi-output op: allocated only when named. */
onyx_status onyx__cpu_alloc_output_at(const onyx__cpu_node *node, onyx_compute_ctx *ctx,
                                      size_t index, uint32_t dtype, uint32_t rank,
                                      const int64_t *dims, onyx_tensor **out_view);

/* ------------------------------------------------------------------ infer */

/*
 * Helpers for the kernels' infer callbacks (see onyx_kernel_table.infer). Every
 * CPU kernel computes its output geometry in one function that both compute and
 * infer call, so the planner's shapes and the executed shapes cannot disagree.
 */

/* Most inputs a CPU kernel's infer looks at (variadic ops past this decline). */
#define ONYX__CPU_INFER_MAX_INPUTS 64

/* Bytes of the values buffer the core offers in each infer output (the ABI's
 * 64 int64 values). */
#define ONYX__CPU_INFER_VALUE_BYTES 512

/* infer's input array as compute sees its inputs: pointers, NULL where the input
 * is absent (dtype UNDEFINED). Returns false when there are more than `cap`. */
bool onyx__cpu_infer_inputs(const onyx_tensor *inputs, size_t count, const onyx_tensor **out,
                            size_t cap);

/* Fills output k's geometry (when k < count) and withdraws the values buffer the
 * core may have offered (data = NULL). Returns that buffer when the geometry is an
 * int64 or int32 tensor that fits it, so a kernel that knows the values can write
 * them and hand the buffer back by pointing data at it again; else NULL. */
void *onyx__cpu_infer_out(onyx_tensor *outputs, size_t count, size_t k, uint32_t dtype,
                          uint32_t rank, const int64_t *dims);

/* Whether a tensor seen by infer carries its values (the planner knows them). */
static inline bool onyx__cpu_has_values(const onyx_tensor *t) {
  return t != NULL && (t->data != NULL || onyx_tensor_numel(t) == 0);
}

/* Room for the reason an infer callback refuses a geometry with. */
#define ONYX__CPU_REASON_CAP 384

/* Hands `why` (when not empty) to the core as the reason infer or workspace returns
 * `status` (the host table's set_error, ABI v2), through the provider the state's
 * onyx__cpu_node head names, and returns status. `state` may be NULL. */
onyx_status onyx__cpu_reason(const void *state, onyx_status status, const char *why);

/* The infer callback of every op whose one output has input 0's dtype and shape. */
onyx_status onyx__cpu_infer_same(void *state, const onyx_tensor *inputs, size_t input_count,
                                 onyx_tensor *outputs, size_t output_count);

/* Reads a 1-D (or scalar) int64/int32 tensor for shape logic; like
 * onyx__cpu_read_int_list but with the message in err (no ctx). */
onyx_status onyx__cpu_int_list(const onyx_tensor *t, size_t input_index, const char *what,
                               int64_t *out, size_t cap, size_t *out_count, char *err,
                               size_t err_cap);

/* Element i of an int32/int64 tensor as int64. */
static inline int64_t onyx__cpu_int_at(const onyx_tensor *t, int64_t i) {
  return t->dtype == ONYX_DTYPE_INT64 ? ((const int64_t *)t->data)[i]
                                      : ((const int32_t *)t->data)[i];
}

/* ------------------------------------------------------------------ messages */

/* Messages and shape text come from providers/common (pc_msg.h), shared as source with
 * the CUDA provider; these names keep the provider's call sites as they were. */
/* Writes a printf-style message into err (when err_cap > 0) and returns status. */
#define onyx__cpu_fail onyx__pc_fail
/* A shape rendered as "[2,3,4]" for messages (by value, so it can be used inline). */
typedef onyx__pc_shape_text onyx__cpu_shape_text;
#define onyx__cpu_shape_str onyx__pc_shape_str
/* The same for a tensor view. */
#define onyx__cpu_tensor_shape onyx__pc_tensor_shape

/* "float32", "int64", ... for messages; "dtype N" for unknown values. */
const char *onyx__cpu_dtype_name(uint32_t dtype);

/* ------------------------------------------------------------------ shapes */

/* Maps axis in [-rank, rank) to [0, rank). False when out of range. */
bool onyx__cpu_normalize_axis(int64_t axis, int64_t rank, int64_t *out_axis);

/* Product of dims[begin, end) (1 when empty). The caller knows it fits: the dims
 * come from tensors that exist. */
int64_t onyx__cpu_dims_product(const int64_t *dims, uint32_t begin, uint32_t end);

/* Product of dims with overflow and negativity checks, for shapes a kernel computes
 * from data (Reshape's target). False when a dim is negative or the product
 * overflows int64. */
bool onyx__cpu_checked_numel(uint32_t rank, const int64_t *dims, int64_t *out_numel);

/* Reads a 1-D (or scalar) int64/int32 host tensor into out[count]. Used for
 * constant-input shapes and axes. Fails (with a message through ctx naming
 * `what` and input index) on another dtype, rank > 1 or more than `cap` values. */
onyx_status onyx__cpu_read_int_list(onyx_compute_ctx *ctx, const onyx_tensor *t, size_t input_index,
                                    const char *what, int64_t *out, size_t cap, size_t *out_count);

/* Checks the inputs a kernel is about to read: every index below `required` must be
 * present, and every present one must be a host view with data. Reports through
 * ctx. (Compute messages carry no op name: the core prefixes node and op.) */
onyx_status onyx__cpu_check_inputs(onyx_compute_ctx *ctx, const onyx_tensor *const *inputs,
                                   size_t input_count, size_t required);

/* ------------------------------------------------------------------ attributes */

/* The attribute called `name`, or NULL (providers/common/pc_attr.c). */
#define onyx__cpu_attr_find onyx__pc_attr_find

/* Typed lookups: absent → default (and *out_present = false where asked); present
 * with another type → INVALID_ARGUMENT with a message in err. */
onyx_status onyx__cpu_attr_int(const onyx_node_info *node, const char *name, int64_t dflt,
                               int64_t *out, char *err, size_t err_cap);
onyx_status onyx__cpu_attr_float(const onyx_node_info *node, const char *name, float dflt,
                                 float *out, char *err, size_t err_cap);
/* INTS: *out points into the attribute (valid until destroy); NULL/0 when absent. */
onyx_status onyx__cpu_attr_ints(const onyx_node_info *node, const char *name, const int64_t **out,
                                size_t *out_count, bool *out_present, char *err, size_t err_cap);

/* ------------------------------------------------------------------ broadcasting */

#define ONYX__CPU_BCAST_MAX_INPUTS 4

/*
 * A broadcast of up to four inputs to one output shape, reduced to a loop nest:
 * size-1 output dims are dropped and adjacent dims that every input walks
 * contiguously (or not at all) are merged, so the innermost loop is as long as
 * possible. inner_stride[k] is 0 (input k is broadcast along the run) or 1.
 */
typedef struct onyx__cpu_bcast {
  uint32_t out_rank; /* the broadcast output shape */
  int64_t out_dims[ONYX_MAX_RANK];
  int64_t out_numel;
  size_t count;       /* inputs */
  uint32_t loop_rank; /* >= 1 */
  int64_t loop_dims[ONYX_MAX_RANK];
  int64_t strides[ONYX__CPU_BCAST_MAX_INPUTS][ONYX_MAX_RANK]; /* elements */
} onyx__cpu_bcast;

/* Builds the broadcast of shapes[0..count). On mismatch writes a message naming
 * the input, axis, expected and got into err and returns INVALID_ARGUMENT. */
onyx_status onyx__cpu_bcast_init(onyx__cpu_bcast *b, size_t count, const uint32_t *ranks,
                                 const int64_t *const *dims, char *err, size_t err_cap);

/* Walks the loop nest: for each inner run, fn receives the element offset of every
 * input, the output offset, the run length and each input's stride in the run. */
typedef void (*onyx__cpu_bcast_run_fn)(void *arg, const int64_t *in_offsets, int64_t out_offset,
                                       int64_t n, const int64_t *in_strides);
void onyx__cpu_bcast_walk(const onyx__cpu_bcast *b, onyx__cpu_bcast_run_fn fn, void *arg);

/* The same for output elements [begin, end) only (runs are cut at both ends), so
 * that parallel tasks can each walk a slice of the output. */
void onyx__cpu_bcast_walk_range(const onyx__cpu_bcast *b, int64_t begin, int64_t end,
                                onyx__cpu_bcast_run_fn fn, void *arg);

/* The broadcast output shape of `count` shapes (any count), or INVALID_ARGUMENT with
 * a message. */
onyx_status onyx__cpu_bcast_shape(size_t count, const onyx_tensor *const *inputs,
                                  uint32_t *out_rank, int64_t *out_dims, char *err, size_t err_cap);

/* ------------------------------------------------------------------ half floats */

float onyx__cpu_f16_to_f32(uint16_t h);
uint16_t onyx__cpu_f32_to_f16(float f);  /* round to nearest even */
uint16_t onyx__cpu_f64_to_f16(double d); /* rounded once, not via float32 */
float onyx__cpu_bf16_to_f32(uint16_t h);
uint16_t onyx__cpu_f32_to_bf16(float f);  /* round to nearest even */
uint16_t onyx__cpu_f64_to_bf16(double d); /* rounded once, not via float32 */

/* Loads element i of a float32/float16/bfloat16 array as float32. */
static inline float onyx__cpu_load_f32(uint32_t dtype, const void *p, int64_t i) {
  switch (dtype) {
  case ONYX_DTYPE_FLOAT16:
    return onyx__cpu_f16_to_f32(((const uint16_t *)p)[i]);
  case ONYX_DTYPE_BFLOAT16:
    return onyx__cpu_bf16_to_f32(((const uint16_t *)p)[i]);
  default:
    return ((const float *)p)[i];
  }
}

/* Stores v as element i of a float32/float16/bfloat16 array. */
static inline void onyx__cpu_store_f32(uint32_t dtype, void *p, int64_t i, float v) {
  switch (dtype) {
  case ONYX_DTYPE_FLOAT16:
    ((uint16_t *)p)[i] = onyx__cpu_f32_to_f16(v);
    break;
  case ONYX_DTYPE_BFLOAT16:
    ((uint16_t *)p)[i] = onyx__cpu_f32_to_bf16(v);
    break;
  default:
    ((float *)p)[i] = v;
    break;
  }
}

/* Element i of any numeric or bool array as a double (int64 beyond 2^53 rounds). */
static inline double onyx__cpu_load_f64(uint32_t dtype, const void *p, int64_t i) {
  switch (dtype) {
  case ONYX_DTYPE_FLOAT64:
    return ((const double *)p)[i];
  case ONYX_DTYPE_FLOAT32:
  case ONYX_DTYPE_FLOAT16:
  case ONYX_DTYPE_BFLOAT16:
    return onyx__cpu_load_f32(dtype, p, i);
  case ONYX_DTYPE_INT8:
    return ((const int8_t *)p)[i];
  case ONYX_DTYPE_INT16:
    return ((const int16_t *)p)[i];
  case ONYX_DTYPE_INT32:
    return ((const int32_t *)p)[i];
  case ONYX_DTYPE_INT64:
    return (double)((const int64_t *)p)[i];
  case ONYX_DTYPE_UINT8:
  case ONYX_DTYPE_BOOL:
    return ((const uint8_t *)p)[i];
  case ONYX_DTYPE_UINT16:
    return ((const uint16_t *)p)[i];
  case ONYX_DTYPE_UINT32:
    return ((const uint32_t *)p)[i];
  case ONYX_DTYPE_UINT64:
    return (double)((const uint64_t *)p)[i];
  default:
    return 0.0;
  }
}

/* Double → integer of [lo, hi]: truncated toward zero, NaN → 0, saturated. */
static inline int64_t onyx__cpu_f64_to_int(double v, double lo, double hi) {
  if (v != v) return 0;
  if (v <= lo) return (int64_t)lo;
  if (v >= hi) return hi >= 9.2e18 ? INT64_MAX : (int64_t)hi;
  return (int64_t)v;
}

/* Stores v as element i of any numeric or bool array (integers truncate and
 * saturate; 16-bit floats round once from float32). */
static inline void onyx__cpu_store_f64(uint32_t dtype, void *p, int64_t i, double v) {
  switch (dtype) {
  case ONYX_DTYPE_FLOAT64:
    ((double *)p)[i] = v;
    break;
  case ONYX_DTYPE_FLOAT32:
  case ONYX_DTYPE_FLOAT16:
  case ONYX_DTYPE_BFLOAT16:
    onyx__cpu_store_f32(dtype, p, i, (float)v);
    break;
  case ONYX_DTYPE_INT8:
    ((int8_t *)p)[i] = (int8_t)onyx__cpu_f64_to_int(v, INT8_MIN, INT8_MAX);
    break;
  case ONYX_DTYPE_INT16:
    ((int16_t *)p)[i] = (int16_t)onyx__cpu_f64_to_int(v, INT16_MIN, INT16_MAX);
    break;
  case ONYX_DTYPE_INT32:
    ((int32_t *)p)[i] = (int32_t)onyx__cpu_f64_to_int(v, INT32_MIN, INT32_MAX);
    break;
  case ONYX_DTYPE_INT64:
    ((int64_t *)p)[i] = onyx__cpu_f64_to_int(v, -9223372036854775808.0, 9223372036854775807.0);
    break;
  case ONYX_DTYPE_UINT8:
    ((uint8_t *)p)[i] = (uint8_t)onyx__cpu_f64_to_int(v, 0, UINT8_MAX);
    break;
  case ONYX_DTYPE_BOOL:
    ((uint8_t *)p)[i] = v != 0.0;
    break;
  case ONYX_DTYPE_UINT16:
    ((uint16_t *)p)[i] = (uint16_t)onyx__cpu_f64_to_int(v, 0, UINT16_MAX);
    break;
  case ONYX_DTYPE_UINT32:
    ((uint32_t *)p)[i] = (uint32_t)onyx__cpu_f64_to_int(v, 0, UINT32_MAX);
    break;
  case ONYX_DTYPE_UINT64:
    ((uint64_t *)p)[i] = v <= 0 || v != v             ? 0
                         : v >= 1.8446744073709552e19 ? UINT64_MAX
                                                      : (uint64_t)v;
    break;
  default:
    break;
  }
}

/* ------------------------------------------------------------------ GEMM core */

/*
 * A constant B packed once, at kernel creation, into the layout the float32
 * micro-kernels read, so that products use it as is: K in slices of kc rows (the last
 * may be shorter); each slice n_pad columns (N rounded up to 16) of 16-wide slivers,
 * a sliver kc rows of 16 floats, zero past N. cpu_gemm_impl.h has the addressing.
 */
typedef struct onyx__cpu_packed_b {
  int64_t k, n;  /* op(B) is k × n */
  int64_t kc;    /* depth of a K slice (onyx__cpu_gemm_kc(k)) */
  int64_t n_pad; /* n rounded up to a whole sliver */
  const float *data;
} onyx__cpu_packed_b;

/*
 * Y[M×N] = alpha · op(A) · op(B) + Y, row-major, where op() transposes when asked.
 * A and B are float32, float16 or bfloat16 (ab_dtype, both the same) and are
 * widened to float32 while packing; Y is float32 and must be initialised by the
 * caller (beta·C) unless overwrite_y, which ignores its contents (beta = 0: the
 * product is stored, saving a pass that zeroes Y and one that reads the zeros back).
 * lda/ldb/ldy are row pitches in elements. With packed_b set, B is read from it (its
 * k and n match) and b, ldb and trans_b are unused.
 */
typedef struct onyx__cpu_gemm {
  bool trans_a, trans_b;
  int64_t m, n, k;
  float alpha;
  uint32_t ab_dtype;
  const void *a;
  int64_t lda;
  const void *b;
  int64_t ldb;
  float *y;
  int64_t ldy;
  const onyx__cpu_packed_b *packed_b; /* NULL: B is packed per call from b */
  bool overwrite_y;                   /* Y = alpha·op(A)·op(B): Y's contents unread */
} onyx__cpu_gemm;

/* Floats a prepacked k × n B takes. */
uint64_t onyx__cpu_packed_b_floats(int64_t k, int64_t n);

/* Packs op(B) of g (b, ldb, trans_b, ab_dtype, k, n) into dst, which holds
 * onyx__cpu_packed_b_floats(k, n) floats, on the provider's threads; *out describes
 * it (out->data = dst). */
void onyx__cpu_pack_b(const onyx__cpu_provider *p, const onyx__cpu_gemm *g, float *dst,
                      onyx__cpu_packed_b *out);

/* Scratch the float32 GEMM needs, in floats, for the product g describes (its
 * geometry, transposes, alpha, ab_dtype and whether packed_b is set; the data
 * pointers are not read) on `tasks` parallel tasks: packing buffers for A and B, or
 * the partial sums of the route for few rows. 0 where a region is unused. */
void onyx__cpu_sgemm_scratch(const onyx__cpu_gemm *g, uint32_t tasks, uint64_t *out_pack_a,
                             uint64_t *out_pack_b);

/* Runs the GEMM; pack_a/pack_b hold at least what sgemm_scratch said. */
void onyx__cpu_sgemm(const onyx__cpu_provider *p, const onyx__cpu_gemm *g, float *pack_a,
                     float *pack_b);

/* The product half of the fused ops (cpu_fused_product.c): Y = A · W through the
 * GEMM above, A written by the op at the start of its scratch, a float32 constant W
 * packed at create. */
typedef struct onyx__cpu_fused_w {
  onyx__cpu_packed_b packed; /* W packed at create (data NULL: packed per call) */
  void *mem;                 /* from host->mem_alloc (weights), freed with the kernel */
} onyx__cpu_fused_w;

/* Byte offsets in the op's scratch (A at 0, in T): the GEMM's packing buffers, the
 * float32 accumulator of 16-bit T; then the size. Each part 64-byte aligned. */
typedef struct onyx__cpu_fused_scratch {
  uint64_t pack_a, pack_b, acc, total;
} onyx__cpu_fused_scratch;

/* Packs W (input w_input) when it is a float32 matrix constant, A (input a_input) is
 * float32 and the core offers governed memory, and tells the core it may free the
 * original; anything else leaves W packed per call. `op` labels the memory. */
void onyx__cpu_fused_w_pack(onyx__cpu_fused_w *fw, const onyx__cpu_provider *p,
                            const onyx_node_info *node, size_t a_input, size_t w_input,
                            size_t input_count, const char *op);
void onyx__cpu_fused_w_free(onyx__cpu_fused_w *fw, const onyx__cpu_provider *p);
/* W's dtype and shape against what was packed: an error naming both, or OK. */
onyx_status onyx__cpu_fused_check_packed(const onyx__cpu_fused_w *fw, onyx_compute_ctx *ctx,
                                         uint32_t a_dtype, const onyx_tensor *w);
/* The scratch of rows x k of A in T times W [k, n]; all zero when nothing is to run. */
onyx__cpu_fused_scratch onyx__cpu_fused_scratch_of(const onyx__cpu_fused_w *fw,
                                                   const onyx__cpu_provider *p, uint32_t t,
                                                   int64_t rows, int64_t k, int64_t n);
void onyx__cpu_fused_product(const onyx__cpu_fused_w *fw, const onyx__cpu_provider *p, uint32_t t,
                             const onyx__cpu_fused_scratch *sc, unsigned char *ws,
                             const onyx_tensor *w, int64_t rows, void *y);
/* The fused ops read W as [K, N]: UNSUPPORTED with the reason in err where the node's
 * transB attribute says [N, K] (the transpose_weights optimization asks through
 * supports, so it never makes one here); a malformed transB is INVALID_ARGUMENT. */
onyx_status onyx__cpu_fused_w_kn_only(const onyx_node_info *node, char *err, size_t err_cap);

/* The float64 product Y = alpha·op(A)·op(B) + Y with loop orders that keep the
 * innermost loop contiguous. No scratch. */
void onyx__cpu_dgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                     const double *a, int64_t lda, const double *b, int64_t ldb, double *y,
                     int64_t ldy);

/* Integer Y = A·B (no transposes; wraps on overflow like the hardware). */
void onyx__cpu_igemm(uint32_t dtype, int64_t m, int64_t n, int64_t k, const void *a, const void *b,
                     void *y);

/* ------------------------------------------------------------------ kernel tables */

/* Each op file defines its tables; provider.c lists them. */
extern const onyx_kernel_table onyx__cpu_k_add_1, onyx__cpu_k_add_7;
extern const onyx_kernel_table onyx__cpu_k_sub_1, onyx__cpu_k_sub_7;
extern const onyx_kernel_table onyx__cpu_k_mul_1, onyx__cpu_k_mul_7;
extern const onyx_kernel_table onyx__cpu_k_div_1, onyx__cpu_k_div_7;
extern const onyx_kernel_table onyx__cpu_k_relu, onyx__cpu_k_sigmoid;
extern const onyx_kernel_table onyx__cpu_k_matmul, onyx__cpu_k_gemm;
extern const onyx_kernel_table onyx__cpu_k_softmax_1, onyx__cpu_k_softmax_13;
extern const onyx_kernel_table onyx__cpu_k_cast, onyx__cpu_k_castlike;
extern const onyx_kernel_table onyx__cpu_k_reshape_1, onyx__cpu_k_reshape_5;
extern const onyx_kernel_table onyx__cpu_k_transpose, onyx__cpu_k_concat;
extern const onyx_kernel_table onyx__cpu_k_gather;
extern const onyx_kernel_table onyx__cpu_k_unsqueeze_1, onyx__cpu_k_unsqueeze_13;
extern const onyx_kernel_table onyx__cpu_k_squeeze_1, onyx__cpu_k_squeeze_13;
extern const onyx_kernel_table onyx__cpu_k_shape_1, onyx__cpu_k_shape_15;
extern const onyx_kernel_table onyx__cpu_k_identity, onyx__cpu_k_constant;
extern const onyx_kernel_table onyx__cpu_k_constant_of_shape, onyx__cpu_k_range;
extern const onyx_kernel_table onyx__cpu_k_pow;
extern const onyx_kernel_table onyx__cpu_k_sqrt, onyx__cpu_k_neg, onyx__cpu_k_exp, onyx__cpu_k_log;
extern const onyx_kernel_table onyx__cpu_k_abs, onyx__cpu_k_reciprocal, onyx__cpu_k_tanh;
extern const onyx_kernel_table onyx__cpu_k_erf, onyx__cpu_k_sin, onyx__cpu_k_cos;
extern const onyx_kernel_table onyx__cpu_k_gelu, onyx__cpu_k_ms_gelu, onyx__cpu_k_ms_fast_gelu;
extern const onyx_kernel_table onyx__cpu_k_equal, onyx__cpu_k_greater, onyx__cpu_k_less;
extern const onyx_kernel_table onyx__cpu_k_greater_equal, onyx__cpu_k_less_equal;
extern const onyx_kernel_table onyx__cpu_k_and, onyx__cpu_k_or, onyx__cpu_k_xor, onyx__cpu_k_not;
extern const onyx_kernel_table onyx__cpu_k_where, onyx__cpu_k_max, onyx__cpu_k_min, onyx__cpu_k_sum;
extern const onyx_kernel_table onyx__cpu_k_size, onyx__cpu_k_flatten, onyx__cpu_k_mod;
extern const onyx_kernel_table onyx__cpu_k_clip_1, onyx__cpu_k_clip_11;
extern const onyx_kernel_table onyx__cpu_k_reduce_sum_1, onyx__cpu_k_reduce_sum_13;
extern const onyx_kernel_table onyx__cpu_k_reduce_mean_1, onyx__cpu_k_reduce_mean_18;
extern const onyx_kernel_table onyx__cpu_k_reduce_max_1, onyx__cpu_k_reduce_max_18;
extern const onyx_kernel_table onyx__cpu_k_layer_norm, onyx__cpu_k_rms_norm;
extern const onyx_kernel_table onyx__cpu_k_simplified_layer_norm;
extern const onyx_kernel_table onyx__cpu_k_skip_layer_norm, onyx__cpu_k_skip_simplified_layer_norm;
extern const onyx_kernel_table onyx__cpu_k_slice_1, onyx__cpu_k_slice_10;
extern const onyx_kernel_table onyx__cpu_k_split_1, onyx__cpu_k_split_13;
extern const onyx_kernel_table onyx__cpu_k_expand, onyx__cpu_k_trilu;

#endif /* ONYX_CPU_IMPL_H */
