/*
 * The block-quantized weight ops of the CUDA provider (com.microsoft MatMulNBits and
 * GatherBlockQuantized): launchers of cuda_matmul_nbits.cu and
 * cuda_gather_block_quantized.cu, plain C so the host files (and the device bench,
 * tests/cuda/bench_nbits_gemv.c) can call them. Attribute and shape checks are the
 * shared ones of providers/common/nbits_params.h.
 *
 * B is read in the standard layout as the model stores it — [N, k_blocks, blob],
 * codes low bits first along K — so constant weights are used where the core put them
 * on the device and nothing is repacked.
 */
#ifndef ONYX_CUDA_NBITS_H
#define ONYX_CUDA_NBITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Rows of A the GEMV route takes; more go to dequantize + cuBLASLt. */
#define ONYX__CUDA_NBITS_GEMV_MAX_M 8
/* Dynamic shared memory the GEMV may ask for (activations of all its rows). */
#define ONYX__CUDA_NBITS_GEMV_MAX_SMEM (96u << 10)

/* How the GEMV runs (tune, for the bench's sweep; 0 picks from the shape): */
#define ONYX__CUDA_NBITS_TUNE_SET 0x100    /* the bits below are the choice */
#define ONYX__CUDA_NBITS_TUNE_PREFETCH 0x1 /* block's weights asked into L2 before the wait */
#define ONYX__CUDA_NBITS_TUNE_EARLY 0x2    /* the next kernel let in at the start */
#define ONYX__CUDA_NBITS_TUNE_NOPIPE 0x4   /* split K without register double buffering */
#define ONYX__CUDA_NBITS_TUNE_V2 0x8       /* M = 1, 4-bit, blocks >= 32: the block-sum kernel */
/* Modifiers, also without TUNE_SET (the bench's side-by-side forms): */
#define ONYX__CUDA_NBITS_TUNE_V1 0x10  /* the default choice, on the per-weight-scale kernel */
#define ONYX__CUDA_NBITS_TUNE_NB8 0x20 /* v2 loads 8 chunk groups at a time, not 4 */
/* v2 with one warp a tile (the lm_head) in blocks that fit two an SM, not three */
#define ONYX__CUDA_NBITS_TUNE_OCC2 0x40

/* What the GEMV computes its A operand from (ai.onyx RMSNormMatMulNBits and
 * SiluMulMatMulNBits, docs/ops.md): each block makes A in shared memory after the PDL
 * wait, rounded to the activations' type once, as the unfused producer stored it. */
#define ONYX__CUDA_NBITS_PRO_NONE 0 /* a is A */
#define ONYX__CUDA_NBITS_PRO_NORM 1 /* a is X: A = rmsnorm(X + skip)·gamma, S = X + skip */
#define ONYX__CUDA_NBITS_PRO_SILU 2 /* a is GU [m, 2k]: A = silu(gate)·up */

/* One MatMulNBits product, Y[m, n] = A[m, :] · dequant(B)[n, :] (+ bias[n]). */
typedef struct onyx__cuda_nbits_args {
  uint32_t dtype; /* A, scales, bias, float zero points and Y: float16 or bfloat16 */
  int bits;       /* 4 or 8 */
  int64_t m, n, k;
  int64_t block_size; /* a power of two >= 16 */
  int64_t k_blocks;   /* ceil(k / block_size) */
  int zp_kind;        /* onyx__pc_nb_zp: 0 absent, 1 packed uint8, 2 of the scales' type */
  int64_t zp_row;     /* packed zero points: bytes per column, ceil(k_blocks * bits / 8) */
  const void *a, *b, *scales, *zp, *bias; /* device; zp and bias may be NULL */
  void *y;
  int sm_count; /* the device's, to size the grid */
  int split_k;  /* GEMV warps sharing one tile's K: 1, 2, 4, 8 or 16; 0: chosen from the shape */
  int tune;     /* GEMV: 0, or ONYX__CUDA_NBITS_TUNE_SET | TUNE_* bits */
  bool plain;   /* GEMV: an ordinary launch, not a programmatic dependent (option.pdl = false) */
  /* GEMV only: the A operand's prologue (ONYX__CUDA_NBITS_PRO_*; 0 for MatMulNBits) and
   * its inputs: skip (may be NULL) and gamma [k] of the norm, S [m, k] written by the
   * norm (may be NULL), epsilon. */
  int prologue;
  const void *skip, *gamma;
  void *sum;
  float epsilon;
} onyx__cuda_nbits_args;

/* Dynamic shared memory the GEMV needs for these rows (an upper bound over its load
 * widths); the route is taken only when it is within ONYX__CUDA_NBITS_GEMV_MAX_SMEM. */
size_t onyx__cuda_nbits_gemv_smem(int bits, int64_t m, int64_t k_blocks, int64_t block_size);

/* The decode GEMV (m <= ONYX__CUDA_NBITS_GEMV_MAX_M): streams B once, dequantizes in
 * registers and multiplies on tensor cores. B's device address must be 8-byte
 * aligned (cudaErrorMisalignedAddress otherwise; 16 bytes is the fast case). */
cudaError_t onyx__cuda_launch_nbits_gemv(const onyx__cuda_nbits_args *a, cudaStream_t stream);

/* Dequantizes B into w[n, k] (dtype, k columns, padding dropped): the prefill route's
 * operand for cuBLASLt. Reads nothing of A, bias or y. */
cudaError_t onyx__cuda_launch_nbits_dequant(const onyx__cuda_nbits_args *a, void *w,
                                            cudaStream_t stream);

/* One GatherBlockQuantized: output element e = (outer o, index i, inner r) is
 * (code − zero_point) · scale of data element (o, indices[i], r). */
typedef struct onyx__cuda_gbq_args {
  uint32_t data_dtype;  /* uint8 (8/bits codes a byte), int4 or uint4 */
  uint32_t index_dtype; /* int32 or int64 */
  uint32_t scale_dtype; /* = the output's: float32, float16 or bfloat16 */
  int bits;
  int64_t block_size;
  int64_t outer, gather_dim, inner, count;  /* count: elements of indices */
  int64_t q_dim, q_inner;                   /* dims[quantize_axis], product of the dims after */
  int64_t blocks;                           /* ceil(q_dim / block_size) */
  int64_t zp_row;                           /* uint8 zero points: bytes per last-axis row */
  const void *data, *indices, *scales, *zp; /* device; zp may be NULL */
  void *out;
} onyx__cuda_gbq_args;

cudaError_t onyx__cuda_launch_gbq(const onyx__cuda_gbq_args *a, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* ONYX_CUDA_NBITS_H */
