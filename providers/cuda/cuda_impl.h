/*
 * Private to the CUDA provider (libonyx_cuda.so). Nothing here crosses the ABI: the
 * library publishes its entry points only (onyx_provider_factory_entry for ABI v3,
 * onyx_provider_entry for v2).
 *
 * The provider is built against abi/ plus the CUDA toolkit (cudart, cuBLASLt) and
 * nothing else; the driver API (virtual memory) is reached through
 * cudaGetDriverEntryPointByVersion so the library links cudart alone.
 *
 * Files, one concern each. Host logic (attributes, shapes, validation, infer) is C in
 * the .c files; device code sits beside it in a .cu of the same name and is reached
 * through the plain-C launchers declared at the end of this header.
 *   provider.c          entry points, negotiation, options, bring-up, the kernel
 *                       list; the v2 table and the v3 factory (one instance a GPU)
 *   cuda_memory.c       device_alloc/free (stream-ordered), copy, sync, stream,
 *                       memory_capacity, the pool set-up (onyx__cuda_pool_init)
 *   cuda_vmm.c          the onyx_vmm_table over the driver's cuMem* calls
 *   cuda_graph.c        the onyx_graph_table: stream capture into CUDA graphs, replay
 *   cuda_util.c         attributes, messages, kernel state, input checks, reading
 *                       small integer tensors handed over on the host (host_inputs)
 *   cuda_broadcast.c    numpy broadcasting and strided-copy plans (host side)
 *   cuda_elementwise.*  Add Sub Mul Div Pow Neg Sqrt Sigmoid Tanh Relu Erf Equal Where
 *   cuda_matmul.c       MatMul and Gemm through cuBLASLt (host only); decode products
 *   cuda_gemv.cu          of few 16-bit rows on a GEMV kernel of its own
 *   cuda_norm_matmul.*  ai.onyx RMSNormMatMul: an RMS norm fused into a decode GEMV;
 *                       prompts on the norm kernel, then cuda_matmul.c's cuBLASLt path
 *   cuda_silu_matmul.*  ai.onyx SiluMulMatMul: SiluMul fused into the down product's decode
 *                       GEMV (the GEMV body shared in cuda_gemv_a.cuh); prompts on the
 *                       SiluMul kernel, then the cuBLASLt path
 *   cuda_softmax.*      Softmax
 *   cuda_norm.*         LayerNormalization, SimplifiedLayerNormalization,
 *                       RMSNormalization, com.microsoft SkipSimplifiedLayerNormalization
 *   cuda_rotary.*       RotaryEmbedding (ONNX 23 and com.microsoft)
 *   cuda_reduce.*       ReduceSum (axes as attribute to opset 12, as input from 13)
 *   cuda_shape_ops.c    Reshape Squeeze Unsqueeze Identity Transpose Concat Slice Expand
 *                       Gather Cast CastLike (host side)
 *   cuda_layout.cu      strided copy, gather and cast kernels
 *   cuda_matmul_nbits.*  com.microsoft MatMulNBits (decode GEMV, dequantize + cuBLASLt)
 *   cuda_nbits_fused.c   ai.onyx RMSNormMatMulNBits, SiluMulMatMulNBits (MatMulNBits, A made in it)
 *   cuda_gather_block_quantized.*  com.microsoft GatherBlockQuantized
 *                       (launchers of both in cuda_nbits.h)
 *   attention/          GroupQueryAttention and Attention (kept by its own owner; see
 *                       provider.c for how its tables are listed)
 *
 * Which dtypes the provider claims: float32, float16 and bfloat16 data. Integer
 * tensors in a decoder are shape arithmetic (Shape -> Gather -> Concat -> Reshape),
 * which is cheapest where it already is, on the host: claiming it would bounce every
 * value to the device and back (the core keeps shape arithmetic on the host anyway).
 * The exception is the attention-mask chain whose result GroupQueryAttention reads on
 * the device as seqlens_k, Cast(ReduceSum(mask) - 1, int32): ReduceSum sums int32 and
 * int64, Add Sub Mul Div and Equal take int32/int64 (Equal bool too), and Cast and
 * CastLike convert from int32, int64 and bool. Integer *index* inputs (Gather
 * indices, position ids) are accepted on the device. Inputs whose values size the
 * output (Reshape's and Expand's shape, Slice's starts/ends/axes/steps, axes of
 * Squeeze/Unsqueeze 13, GroupQueryAttention's total_sequence_length) are listed in
 * the kernel tables' host_inputs: the core hands them over in host memory, so no
 * kernel reads a value back from the device or syncs its stream during compute.
 */
#ifndef ONYX_CUDA_IMPL_H
#define ONYX_CUDA_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "onyx_abi.h"
#include "pc_attr.h"
#include "pc_msg.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define ONYX__CUDA_PRINTF(fmt_index, first_arg)                                                    \
  __attribute__((format(printf, fmt_index, first_arg)))
#else
#define ONYX__CUDA_PRINTF(fmt_index, first_arg)
#endif

/* ------------------------------------------------------------------ provider */

/* One open instance of the provider, on one GPU (what open() returns as its state; under
 * ABI v3 one per device the core opens, each with its own stream, handle and pool). */
typedef struct onyx__cuda_provider {
  const onyx_host_table *host; /* owned by the core, valid until close */
  int device;                  /* its CUDA ordinal (v3: the device's; v2: option.device) */
  bool ready;                  /* the device is usable; otherwise `why` says why */
  char why[256];
  cudaStream_t stream; /* created non-blocking at open, destroyed at close */
  /* Stream-ordered allocation (cudaMallocAsync / cudaFreeAsync on `stream`) from the
   * device's default pool, which keeps no freed memory past a synchronisation (see
   * cuda_memory.c). NULL when the device has no memory pools: device_alloc/free then
   * use cudaMalloc and a stream sync + cudaFree. */
  cudaMemPool_t pool;
  cublasLtHandle_t lt;  /* cuBLASLt handle; it allocates no device memory */
  bool allow_tf32;      /* option.allow_tf32: float32 GEMMs on TF32 tensor cores */
  bool gemv;            /* option.gemv: 16-bit products of few rows on cuda_gemv.cu */
  uint64_t total_bytes; /* cudaMemGetInfo's total at open */
  int sm_count;
  int cc_major, cc_minor;
  char device_name[128];
  const struct onyx__cuda_vmm_fns *vmm; /* driver entry points, NULL until first use */
} onyx__cuda_provider;

/* Makes the provider's device current on the calling thread (cheap when it already
 * is); the core may call from any thread. */
cudaError_t onyx__cuda_use_device(const onyx__cuda_provider *p);

/* Logs "cuda: WHAT failed: <CUDA error text>" at ONYX_LOG_ERROR through the host's
 * log (nothing when the host has none). Leaves the thread's last CUDA error as it is. */
void onyx__cuda_log_error(const onyx__cuda_provider *p, const char *what, cudaError_t e);

/* Memory and stream callbacks of the provider table (cuda_memory.c). */
/* Sets p->pool up when the device supports stream-ordered allocation (called once the
 * stream exists); leaves it NULL otherwise. Never fails the bring-up. */
void onyx__cuda_pool_init(onyx__cuda_provider *p);
onyx_status onyx__cuda_device_alloc(void *state, uint64_t bytes, void **out_ptr);
void onyx__cuda_device_free(void *state, void *ptr);
onyx_status onyx__cuda_copy(void *state, onyx_tensor *dst, const onyx_tensor *src);
onyx_status onyx__cuda_sync(void *state);
onyx_status onyx__cuda_memory_capacity(void *state, uint64_t *out_bytes);
void *onyx__cuda_stream(void *state);

/* The VMM table (cuda_vmm.c); its functions fail cleanly when the driver lacks the
 * entry points. Entry points are resolved on first use and kept for the process. */
extern const onyx_vmm_table onyx__cuda_vmm_table;

/* Stream capture and replay through CUDA graphs (cuda_graph.c). The graphs it hands
 * out are cudaGraphExec_t; begin and end must run on the same thread. */
extern const onyx_graph_table onyx__cuda_graph_table;

/* option.pdl (default true): the elementwise, norm and GEMV kernels are launched as
 * programmatic dependents of the kernel before them (cuda_device.cuh). One setting for
 * the process: the last provider opened sets it. */
extern bool onyx__cuda_pdl;

/* Every dtype the provider computes on. */
#define ONYX__CUDA_FLOAT_TYPES                                                                     \
  (ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT32) | ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT16) |                       \
   ONYX_DTYPE_BIT(ONYX_DTYPE_BFLOAT16))

/* Integer types accepted as index / shape inputs. */
#define ONYX__CUDA_INDEX_TYPES (ONYX_DTYPE_BIT(ONYX_DTYPE_INT32) | ONYX_DTYPE_BIT(ONYX_DTYPE_INT64))

/* Whether `dtype` is in a mask built from ONYX_DTYPE_BIT. */
static inline bool onyx__cuda_dtype_in(uint32_t dtype, uint64_t mask) {
  return dtype < 64 && (mask & ONYX_DTYPE_BIT(dtype)) != 0;
}

/* ------------------------------------------------------------------ kernel state */

#define ONYX__CUDA_MAX_OUTPUTS 4

/* What every kernel's state starts with. Op states embed it first. */
typedef struct onyx__cuda_node {
  onyx__cuda_provider *provider;
  int64_t opset;
  char op_type[40]; /* for messages (the node's strings may not outlive create) */
  size_t input_count;
  size_t output_count;
  bool output_present[ONYX__CUDA_MAX_OUTPUTS]; /* unnamed outputs are not produced */
} onyx__cuda_node;

/* Hands `why` (when not empty) to the core as the reason infer or workspace returns
 * `status` (the host table's set_error, ABI v2), and returns status. */
#define ONYX__CUDA_REASON_CAP 384
onyx_status onyx__cuda_reason(const void *state, onyx_status status, const char *why);

/* Allocates a zeroed state of `size` bytes (>= sizeof(onyx__cuda_node)) with its
 * head filled from `node`. NULL with a message in err when memory runs out. */
void *onyx__cuda_state_new(size_t size, void *provider_state, const onyx_node_info *node, char *err,
                           size_t err_cap);
/* create() for ops whose only state is the head. */
onyx_status onyx__cuda_create_plain(void *provider_state, const onyx_node_info *node,
                                    void **out_state, char *err, size_t err_cap);
void onyx__cuda_destroy(void *state); /* NULL-safe */

/* Allocates output `index` when the node names it; otherwise *out_view = NULL and
 * OK, so the kernel skips writing it. */
onyx_status onyx__cuda_alloc_output(const onyx__cuda_node *node, onyx_compute_ctx *ctx,
                                    size_t index, uint32_t dtype, uint32_t rank,
                                    const int64_t *dims, onyx_tensor **out_view);

/* ------------------------------------------------------------------ messages */

/* Messages and shape text come from providers/common (pc_msg.h), shared as source with
 * the CPU provider; these names keep the provider's call sites as they were. */
#define onyx__cuda_fail onyx__pc_fail
/* ctx->set_error, then returns status (compute-time errors). */
#define onyx__cuda_error onyx__pc_error
/* OK, or PROVIDER_ERROR naming `what` and the CUDA error text. */
onyx_status onyx__cuda_check(onyx_compute_ctx *ctx, cudaError_t e, const char *what);
/* The same after a kernel launch (cudaGetLastError). */
onyx_status onyx__cuda_check_launch(onyx_compute_ctx *ctx, const char *what);

typedef onyx__pc_shape_text onyx__cuda_shape_text;
#define onyx__cuda_shape_str onyx__pc_shape_str
#define onyx__cuda_tensor_shape onyx__pc_tensor_shape
const char *onyx__cuda_dtype_name(uint32_t dtype);

/* ------------------------------------------------------------------ shapes */

bool onyx__cuda_normalize_axis(int64_t axis, int64_t rank, int64_t *out_axis);
int64_t onyx__cuda_dims_product(const int64_t *dims, uint32_t begin, uint32_t end);

/* Checks compute inputs: each index below `required` present, every present one a
 * device view (data may be NULL only when it has no elements). */
onyx_status onyx__cuda_check_inputs(onyx_compute_ctx *ctx, const onyx_tensor *const *inputs,
                                    size_t input_count, size_t required);
/* The same for a kernel whose table sets host_inputs: those inputs must be host views. */
onyx_status onyx__cuda_check_inputs_host(onyx_compute_ctx *ctx, const onyx_tensor *const *inputs,
                                         size_t input_count, size_t required, uint64_t host_inputs);

/* The input at `i`, or NULL when absent or past the end. */
static inline const onyx_tensor *onyx__cuda_input(const onyx_tensor *const *inputs, size_t count,
                                                  size_t i) {
  return i < count ? inputs[i] : NULL;
}

/*
 * Reads a scalar or 1-D int32/int64 tensor's values into out[cap]. The tensor must be
 * an input the kernel table lists in host_inputs, which the core hands over in host
 * memory: the values are read in place, with no copy back from the device and no
 * stream sync (a device tensor is refused as a table defect).
 */
onyx_status onyx__cuda_read_ints(onyx_compute_ctx *ctx, const onyx_tensor *t, size_t input_index,
                                 const char *what, int64_t *out, size_t cap, size_t *out_count);
/* The same for infer(): only host values (the planner's) can be read; a tensor
 * without data answers UNSUPPORTED. */
onyx_status onyx__cuda_known_ints(const onyx_tensor *t, int64_t *out, size_t cap,
                                  size_t *out_count);

/* Every infer() starts here. The core may offer a host buffer per output for known
 * integer values (Shape on the host does); a device kernel's outputs live on the
 * device, so it reports geometry only: data is set to NULL. */
static inline void onyx__cuda_infer_begin(onyx_tensor *outputs, size_t count) {
  for (size_t i = 0; i < count; ++i) outputs[i].data = NULL;
}

/* ------------------------------------------------------------------ attributes */

#define onyx__cuda_attr_find onyx__pc_attr_find /* providers/common/pc_attr.c */
onyx_status onyx__cuda_attr_int(const onyx_node_info *node, const char *name, int64_t dflt,
                                int64_t *out, char *err, size_t err_cap);
onyx_status onyx__cuda_attr_float(const onyx_node_info *node, const char *name, float dflt,
                                  float *out, char *err, size_t err_cap);
/* INTS copied into out[cap]; *out_present false (count 0) when absent. */
onyx_status onyx__cuda_attr_ints(const onyx_node_info *node, const char *name, int64_t *out,
                                 size_t cap, size_t *out_count, bool *out_present, char *err,
                                 size_t err_cap);

/* ------------------------------------------------------------------ launch plans */

#define ONYX__CUDA_BCAST_MAX_INPUTS 3

/*
 * A strided walk of a dense row-major output: output element e, decomposed over
 * dims[0..rank), reads input k at offset[k] + sum(i_d * strides[k][d]) (elements).
 * Strides may be 0 (broadcast) or negative (Slice with negative steps). Plans are
 * collapsed on the host so the walk has as few axes as possible.
 */
typedef struct onyx__cuda_walk {
  uint32_t rank;  /* >= 1 */
  uint32_t count; /* inputs walked */
  int64_t numel;  /* output elements */
  int64_t dims[ONYX_MAX_RANK];
  int64_t offset[ONYX__CUDA_BCAST_MAX_INPUTS];
  int64_t strides[ONYX__CUDA_BCAST_MAX_INPUTS][ONYX_MAX_RANK];
} onyx__cuda_walk;

/* The numpy broadcast of shapes[0..count) as a collapsed walk; the output shape in
 * out_dims/out_rank. On mismatch writes a message into err and returns
 * INVALID_ARGUMENT. */
onyx_status onyx__cuda_broadcast(onyx__cuda_walk *w, uint32_t *out_rank, int64_t *out_dims,
                                 size_t count, const onyx_tensor *const *shapes, char *err,
                                 size_t err_cap);
/* Only the broadcast output shape (infer). */
onyx_status onyx__cuda_broadcast_shape(size_t count, const onyx_tensor *const *shapes,
                                       uint32_t *out_rank, int64_t *out_dims, char *err,
                                       size_t err_cap);
/* Merges neighbouring axes that every input walks as one, and drops size-1 axes. */
void onyx__cuda_walk_collapse(onyx__cuda_walk *w);

/* ------------------------------------------------------------------ launchers (.cu) */

typedef enum onyx__cuda_binary_op {
  ONYX__CUDA_ADD,
  ONYX__CUDA_SUB,
  ONYX__CUDA_MUL,
  ONYX__CUDA_DIV,
  ONYX__CUDA_POW,
  ONYX__CUDA_EQUAL
} onyx__cuda_binary_op;

typedef enum onyx__cuda_unary_op {
  ONYX__CUDA_NEG,
  ONYX__CUDA_SQRT,
  ONYX__CUDA_SIGMOID,
  ONYX__CUDA_TANH,
  ONYX__CUDA_RELU,
  ONYX__CUDA_ERF
} onyx__cuda_unary_op;

/* y = a OP b over a two-input walk. a and y share `dtype` (y is bool for EQUAL): a
 * float type, or int32/int64 for ADD SUB MUL DIV EQUAL (exact: wrapping add/sub/mul,
 * division truncating toward zero, x / 0 = 0), or bool for EQUAL. b has `b_dtype`,
 * which must equal `dtype` except for Pow's exponent (a float or integer type). */
cudaError_t onyx__cuda_launch_binary(onyx__cuda_binary_op op, uint32_t dtype, uint32_t b_dtype,
                                     const void *a, const void *b, void *y,
                                     const onyx__cuda_walk *w, cudaStream_t stream);
/* y = OP x over n contiguous elements of a float dtype. */
cudaError_t onyx__cuda_launch_unary(onyx__cuda_unary_op op, uint32_t dtype, const void *x, void *y,
                                    int64_t n, cudaStream_t stream);
/* out = cond ? x : y over a three-input walk (cond bool, x/y elements of elem_size). */
cudaError_t onyx__cuda_launch_where(size_t elem_size, const void *cond, const void *x,
                                    const void *y, void *out, const onyx__cuda_walk *w,
                                    cudaStream_t stream);
/* dst[e] = src[walk offset of input 0] for every output element (Transpose, Slice,
 * Expand, Gemm's C). */
cudaError_t onyx__cuda_launch_strided_copy(size_t elem_size, const void *src, void *dst,
                                           const onyx__cuda_walk *w, cudaStream_t stream);
/* dst[r * dst_pitch + c] = src[r * src_pitch + c] for r < rows, c < cols (elements):
 * one Concat input into its slice of the output. */
cudaError_t onyx__cuda_launch_copy2d(size_t elem_size, const void *src, void *dst, int64_t rows,
                                     int64_t cols, int64_t src_pitch, int64_t dst_pitch,
                                     cudaStream_t stream);
/* Gather along one axis: out[o, j, i] = data[o, indices[j], i]; indices int32/int64,
 * negative ones count from the end, out-of-range ones give zeros. */
cudaError_t onyx__cuda_launch_gather(size_t elem_size, const void *data, const void *indices,
                                     uint32_t index_dtype, void *out, int64_t outer,
                                     int64_t axis_dim, int64_t index_count, int64_t inner,
                                     cudaStream_t stream);
/* Converts n elements between fixed-size dtypes (ONNX Cast semantics). */
cudaError_t onyx__cuda_launch_cast(uint32_t from, uint32_t to, const void *src, void *dst,
                                   int64_t n, cudaStream_t stream);
/* Softmax (or LogSoftmax) over the middle axis of an (outer, axis, inner) view. */
cudaError_t onyx__cuda_launch_softmax(uint32_t dtype, const void *x, void *y, int64_t outer,
                                      int64_t axis, int64_t inner, cudaStream_t stream);

/* One normalisation over rows of `cols` elements. */
typedef struct onyx__cuda_norm_args {
  bool simplified; /* RMS: no mean subtraction */
  uint32_t x_dtype, scale_dtype, y_dtype, sum_dtype;
  const void *x;
  const void *skip; /* NULL, or added to x; its index is e % skip_numel */
  int64_t skip_numel;
  const void *bias;  /* NULL, or (cols) added after skip */
  const void *scale; /* (cols), or one element when scale_numel == 1 */
  int64_t scale_numel;
  const void *shift; /* LayerNormalization's B: NULL, or like scale */
  int64_t shift_numel;
  void *y;
  float *mean;    /* NULL, or (rows) float32 */
  float *inv_std; /* NULL, or (rows) float32 */
  void *sum;      /* NULL, or x + skip + bias written back (sum_dtype) */
  int64_t rows, cols;
  float epsilon;
} onyx__cuda_norm_args;
cudaError_t onyx__cuda_launch_norm(const onyx__cuda_norm_args *a, cudaStream_t stream);

/* One rotary embedding application. */
typedef struct onyx__cuda_rotary_args {
  uint32_t dtype;
  const void *x;
  void *y;
  const void *cos, *sin; /* (rows, half) of dtype */
  const int64_t *pos;    /* NULL: row b*S + s; else (B, S), or one offset when pos_scalar */
  bool pos_scalar;
  int64_t rows; /* table rows; positions are clamped into [0, rows) */
  int64_t batch, heads, seq, head_size, rot;
  bool bnsh; /* x is (B, N, S, H); else (B, S, N*H) */
  bool interleaved;
} onyx__cuda_rotary_args;
cudaError_t onyx__cuda_launch_rotary(const onyx__cuda_rotary_args *a, cudaStream_t stream);

/*
 * One ReduceSum over a dense row-major input, collapsed on the host: output element o,
 * decomposed row-major over kept_dims, starts at input offset sum(i_d * kept_strides[d]);
 * its `count` reduced elements, r decomposed over red_dims, sit at that offset plus
 * sum(j_d * red_strides[d]) (elements). Floats accumulate in float32, integers in 64
 * bits (wrapping); count 0 gives zeros.
 */
typedef struct onyx__cuda_reduce_args {
  uint32_t dtype; /* float32, float16, bfloat16, int32 or int64; y has the same */
  const void *x;
  void *y;
  int64_t out_numel; /* output elements */
  int64_t count;     /* reduced elements per output element */
  uint32_t kept_rank, red_rank;
  int64_t kept_dims[ONYX_MAX_RANK], kept_strides[ONYX_MAX_RANK];
  int64_t red_dims[ONYX_MAX_RANK], red_strides[ONYX_MAX_RANK];
} onyx__cuda_reduce_args;
cudaError_t onyx__cuda_launch_reduce_sum(const onyx__cuda_reduce_args *a, cudaStream_t stream);

/* A decode product (cuda_gemv.cu): y[m x n] = x[m x k] · w[k x n], 16-bit, w row-major,
 * m <= ONYX__CUDA_GEMV_MAX_ROWS, n a multiple of 8 and w 16-byte aligned. With
 * S = onyx__cuda_gemv_split(k, n) > 1 the K range is split across S blocks: `partial`
 * holds S x m x n float32 sums and `counters` one unsigned per 256 columns, which must
 * be zero at the first call; each call leaves them zero again.
 * w_nk: w is [n x k] instead (cuda_gemv_nk.cuh; onyx__cuda_gemv_nk_fits(m, k, n, esize)
 * says which shapes; x, w 16-byte aligned; no partials), y = alpha·x·w^T. */
#define ONYX__CUDA_GEMV_MAX_ROWS 4
typedef struct onyx__cuda_gemv_args {
  uint32_t dtype; /* float16 or bfloat16 */
  int64_t m, n, k;
  const void *x, *w;
  void *y;
  float *partial;
  unsigned *counters;
  int tune; /* 0: the default; else ONYX__CUDA_GEMV_TUNE_SET | bits (the device bench) */
  bool w_nk;
  float alpha; /* w_nk only */
} onyx__cuda_gemv_args;
#define ONYX__CUDA_GEMV_TUNE_SET 0x100
#define ONYX__CUDA_GEMV_TUNE_UNROLL8 0x1   /* 8 rows of W in flight a thread, not 4 */
#define ONYX__CUDA_GEMV_TUNE_EARLY 0x2     /* the next kernel let in at the start */
#define ONYX__CUDA_GEMV_TUNE_NK_SPLIT4 0x4 /* [N, K]: four warps a row (else one) */
/* bits 4-7: rows of W a warp asks into L2 ahead of its loads, in 32s (0: none) */
int64_t onyx__cuda_gemv_split(int64_t k, int64_t n);
bool onyx__cuda_gemv_nk_fits(int64_t m, int64_t k, int64_t n, size_t esize);
cudaError_t onyx__cuda_launch_gemv(const onyx__cuda_gemv_args *a, cudaStream_t stream);

/* ------------------------------------------------------------------ kernel tables */

extern const onyx_kernel_table onyx__cuda_k_add, onyx__cuda_k_sub, onyx__cuda_k_mul,
    onyx__cuda_k_div, onyx__cuda_k_pow, onyx__cuda_k_equal, onyx__cuda_k_where;
extern const onyx_kernel_table onyx__cuda_k_neg, onyx__cuda_k_sqrt, onyx__cuda_k_sigmoid,
    onyx__cuda_k_tanh, onyx__cuda_k_relu, onyx__cuda_k_erf;
extern const onyx_kernel_table onyx__cuda_k_matmul, onyx__cuda_k_gemm, onyx__cuda_k_fused_matmul;
/* One tiny cuBLASLt product of each type on the provider's stream, synchronised
 * (cuda_matmul.c): cuBLASLt's start-up happens here. Milliseconds it took, or -1 when
 * a step failed (the provider still works: the first real product pays instead). */
double onyx__cuda_matmul_warm_up(const onyx__cuda_provider *p);
/* A node's last cuBLASLt heuristic answer, reused while its problem stays the same
 * (steps repeat their shapes); zero-initialised it holds none. Owned by the node. */
typedef struct onyx__cuda_lt_cache {
  bool valid;
  uint32_t dtype;
  int64_t m, n, k, batch, stride_a, stride_b;
  bool beta_nonzero;
  uint64_t ws_bytes;
  uint32_t align[3];
  cublasLtMatmulAlgo_t algo;
} onyx__cuda_lt_cache;
/* The STEP scratch bytes the MatMul kernel declares for an m x n x k product (0 when
 * it is empty); onyx__cuda_lt_product is given a view of at least this many. */
uint64_t onyx__cuda_lt_workspace_bytes(int64_t m, int64_t n, int64_t k);
/* Y[m x n] = A[m x k] · B[k x n] (B stored [n x k] when trans_b), dense row-major, on
 * the MatMul kernel's cuBLASLt path (cuda_matmul.c: float32 accumulation, the heuristic
 * told ws's bytes), on ctx's stream. Errors go to ctx, naming cuBLASLt's step. */
onyx_status onyx__cuda_lt_product(const onyx__cuda_provider *p, onyx__cuda_lt_cache *cache,
                                  onyx_compute_ctx *ctx, uint32_t dtype, const void *a,
                                  const void *b, bool trans_b, void *y, int64_t m, int64_t n,
                                  int64_t k, const onyx_workspace_view *ws);
/* The fused products' transB attribute (0 or 1; 1: W stored [N, K], what the
 * transpose_weights pass writes), refused with a message otherwise. */
onyx_status onyx__cuda_attr_trans_b(const onyx_node_info *node, bool *out, char *err,
                                    size_t err_cap);
extern const onyx_kernel_table onyx__cuda_k_softmax_1, onyx__cuda_k_softmax_13;
extern const onyx_kernel_table onyx__cuda_k_layernorm, onyx__cuda_k_simplified_layernorm,
    onyx__cuda_k_rmsnorm, onyx__cuda_k_skip_simplified_layernorm;
extern const onyx_kernel_table onyx__cuda_k_rotary, onyx__cuda_k_ms_rotary;
extern const onyx_kernel_table onyx__cuda_k_reduce_sum_1, onyx__cuda_k_reduce_sum_13;
extern const onyx_kernel_table onyx__cuda_k_reshape, onyx__cuda_k_squeeze_1,
    onyx__cuda_k_squeeze_13, onyx__cuda_k_unsqueeze_1, onyx__cuda_k_unsqueeze_13,
    onyx__cuda_k_identity, onyx__cuda_k_transpose, onyx__cuda_k_concat, onyx__cuda_k_slice_1,
    onyx__cuda_k_slice_10, onyx__cuda_k_expand, onyx__cuda_k_gather, onyx__cuda_k_cast,
    onyx__cuda_k_castlike;
extern const onyx_kernel_table onyx__cuda_k_matmul_nbits, onyx__cuda_k_gather_block_quantized;

#ifdef __cplusplus
}
#endif

#endif /* ONYX_CUDA_IMPL_H */
