/*
 * Private to the CPU provider: block-quantized weights (com.microsoft MatMulNBits and
 * GatherBlockQuantized). docs/quantized-weights.md describes the routes.
 *
 *   cpu_matmul_nbits.c         the MatMulNBits kernel: checks, prepacking at create,
 *                              workspace per route, the thread split
 *   cpu_matmul_nbits_ref.c     the reference route, read off the op's definition
 *   cpu_matmul_nbits_pack.c    the tile layout: packing B, scales and zero points;
 *                              quantizing rows of A to int8 (the portable build)
 *   cpu_matmul_nbits_x86.c     AVX2/FMA, AVX-512 and AVX-512 VNNI tile kernels, picked
 *                              at run time
 *   cpu_matmul_nbits_gemm.c    the fp32 route for many rows: dequantized tiles through
 *                              the float32 GEMM micro-kernel
 *   cpu_gather_block_quantized.c  GatherBlockQuantized
 *
 * The tile layout. Columns (output features) go in tiles of 16; a tile stores, block by
 * block along K, the block's codes as groups of 64 bytes: 16 lanes of 4 bytes, lane c
 * for column c. A group covers G = 32/bits consecutive k; byte j of a lane holds, in its
 * bit field i (bits wide, low first), the code of k = 4i + j of the group. So a 64-byte
 * load, shifted by i·bits and masked, is 16 columns × 4 consecutive k of unsigned codes:
 * the operand of one int8 dot-product instruction per column against 4 bytes of A
 * broadcast, or 4 lanes of codes to widen to float. Scales keep the model's type (16 a
 * block, in tile order), zero points are 16 bytes a block (uint8) or 16 float32.
 * Columns past N are zero codes with zero scales; codes past K are zero and meet zero
 * activations (A is padded to whole blocks).
 */
#ifndef ONYX_CPU_NBITS_H
#define ONYX_CPU_NBITS_H

#include "cpu_impl.h"
#include "nbits_params.h"

enum {
  ONYX__NB_TILE = 16,  /* columns of a tile */
  ONYX__NB_GROUP = 64, /* bytes of one group of codes (16 lanes × 4 bytes) */
  ONYX__NB_MR_MAX = 4  /* most rows one tile kernel call takes */
};

/* B, scales and zero points in the tile layout (see above). Views into one buffer. */
typedef struct onyx__nb_packed {
  int64_t k, n;      /* K, N */
  int64_t bs, kb;    /* block size, blocks per column */
  int64_t tiles;     /* ceil(N / 16) */
  int bits;          /* 2, 4 or 8 */
  onyx__pc_nb_zp zp; /* which of zp_codes / zp_float is set */
  const uint8_t *codes;
  uint32_t scale_dtype; /* the model's: float32, float16 or bfloat16, kept as they are */
  const void *scales;
  const uint8_t *zp_codes; /* ONYX__PC_NB_ZP_PACKED: one byte per column and block */
  const float *zp_float;   /* ONYX__PC_NB_ZP_FLOAT */
} onyx__nb_packed;

/* Scale i (tile · k_blocks + block) · 16 + column of the packed weights. */
static inline float onyx__nb_scale(const onyx__nb_packed *w, int64_t i) {
  return onyx__cpu_load_f32(w->scale_dtype, w->scales, i);
}

/* Bytes of one block of one tile's codes. */
static inline int64_t onyx__nb_block_bytes(const onyx__nb_packed *w) {
  return ONYX__NB_TILE * w->bs * w->bits / 8;
}

/* Bytes the tile layout of these weights takes (64-byte aligned parts). */
uint64_t onyx__nb_packed_bytes(const onyx__pc_nb_attrs *a, onyx__pc_nb_zp zp, uint32_t scale_dtype);

/* Repacks B (uint8 [N, k_blocks, blob]), scales and zero points (NULL: the default)
 * from the op's layout into dst, onyx__nb_packed_bytes long, on the provider's threads;
 * *out describes it. The inputs have passed onyx__pc_nb_weights_check. */
void onyx__nb_pack(const onyx__cpu_provider *p, const onyx__pc_nb_attrs *a, const onyx_tensor *b,
                   const onyx_tensor *scales, const onyx_tensor *zp, void *dst,
                   onyx__nb_packed *out);

/* A, quantized for the int8 route: per row and block, q = round-to-even(a·127/amax),
 * scale = amax/127 (0 for an all-zero block) and the sum of q, as ONNX Runtime's int8
 * route quantizes it; q is zero past K. */
typedef struct onyx__nb_qa {
  int64_t kpad; /* k_blocks · block_size: the row pitch of q */
  int8_t *q;    /* rows × kpad */
  float *scale; /* rows × k_blocks */
  int32_t *sum; /* rows × k_blocks */
} onyx__nb_qa;

/* Bytes of a quantized A of `rows` rows. */
uint64_t onyx__nb_qa_bytes(const onyx__pc_nb_attrs *a, int64_t rows);

/* Lays out a quantized A of `rows` rows in mem (onyx__nb_qa_bytes long). */
void onyx__nb_qa_init(const onyx__pc_nb_attrs *a, int64_t rows, void *mem, onyx__nb_qa *out);

/* Quantizes one row of k elements of `dtype` (float32/float16/bfloat16) into row `row`
 * of qa; the blocks are bs long. */
typedef void (*onyx__nb_quantize_fn)(uint32_t dtype, const void *a, int64_t k, int64_t bs,
                                     const onyx__nb_qa *qa, int64_t row);

/* Tile kernels: the float32 results out[r·16 + c] of rows [r0, r0 + mr) and the 16
 * columns of tile t, mr <= the ISA's mr. int8 route: from the quantized rows. fp32
 * route: from float32 rows at a + r·lda, each padded with zeros to whole blocks. */
typedef void (*onyx__nb_i8_fn)(const onyx__nb_packed *w, const onyx__nb_qa *qa, int64_t r0, int mr,
                               int64_t t, float *out);
typedef void (*onyx__nb_f32_fn)(const onyx__nb_packed *w, const float *a, int64_t lda, int64_t r0,
                                int mr, int64_t t, float *out);

/* Dequantizes rows [k0, k0 + kc) of tile t (k0 + kc <= K) into out[p·16 + c], a
 * sliver of the float32 GEMM's packed B (the fp32 route for many rows). */
typedef void (*onyx__nb_dequant_fn)(const onyx__nb_packed *w, int64_t t, int64_t k0, int64_t kc,
                                    float *out);

/* The kernels of one instruction set. */
typedef struct onyx__nb_isa {
  const char *name; /* "avx512vnni", "avx512", "avx2" or "generic" */
  int mr;           /* rows a kernel call takes at most */
  onyx__nb_quantize_fn quantize;
  onyx__nb_i8_fn i8;
  onyx__nb_f32_fn f32;
  onyx__nb_dequant_fn dequant;
} onyx__nb_isa;

/* The portable kernels (any C11 compiler). */
extern const onyx__nb_isa onyx__nb_isa_generic;

/* The best kernels this CPU runs. ONYX_CPU_NBITS_ISA = avx512 | avx2 | generic caps the
 * choice (tests run every build on one machine); reference is read by the kernel, which
 * then takes the reference route. Same answer for the life of the process. */
const onyx__nb_isa *onyx__nb_isa_get(void);

/* x86 builds (cpu_matmul_nbits_x86.c): NULL where the CPU or the compiler lacks them. */
const onyx__nb_isa *onyx__nb_isa_x86(const char *cap);

/* ------------------------------------------------------------------ fp32 prefill */

/* Rows from which the fp32 route goes through the GEMM micro-kernel with dequantized
 * tiles (cpu_matmul_nbits_gemm.c) rather than the tile kernels: there the cost of
 * dequantizing a tile is shared by enough rows. */
enum { ONYX__NB_GEMM_MIN_M = 16 };

/* Writes rows [row0, row0 + rows) of tile t's results (tile: rows × 16 floats) into Y. */
typedef void (*onyx__nb_store_fn)(void *arg, int64_t row0, int64_t rows, int64_t t,
                                  const float *tile);

typedef struct onyx__nb_gemm_args {
  const onyx__nb_packed *w;
  const onyx__nb_isa *isa; /* its dequant */
  const void *a;           /* A: m × K of a_dtype */
  uint32_t a_dtype;
  int64_t m;
  float *pack_a, *tiles; /* workspace, as onyx__nb_gemm_scratch sized them */
  uint64_t tasks;        /* the task count the scratch was sized for */
  onyx__nb_store_fn store;
  void *store_arg;
} onyx__nb_gemm_args;

bool onyx__nb_gemm_route(int64_t m);

/* Bytes of A packed into slivers, and of the per-task B sliver and tile of Y. */
void onyx__nb_gemm_scratch(const onyx__pc_nb_attrs *a, int64_t m, uint32_t tasks,
                           uint64_t *out_pack_a, uint64_t *out_tiles);

void onyx__nb_gemm_run(const onyx__cpu_provider *p, const onyx__nb_gemm_args *g);

/* The reference route (cpu_matmul_nbits_ref.c): Y straight from the op's own inputs,
 * element by element, as the op is defined. */
typedef struct onyx__nb_ref {
  const onyx__pc_nb_attrs *attrs;
  const onyx_tensor *a, *b, *scales, *zp, *bias; /* zp and bias may be NULL */
  onyx_tensor *y;
  const onyx__nb_qa *qa; /* the int8 route: A's rows quantized; NULL: A as it is */
} onyx__nb_ref;

/* Rows [r0, r1) of Y (a parallel_range function). */
void onyx__nb_reference_rows(void *ref, int64_t r0, int64_t r1);

/* Whether the int8 route applies, as ONNX Runtime decides on x86: accuracy_level 4,
 * weights that are constants (computed ones are multiplied in float32), zero points not
 * floats, and for 2-bit weights block sizes 32 to 128 only. */
bool onyx__nb_uses_int8(const onyx__pc_nb_attrs *a, bool constant_weights, onyx__pc_nb_zp zp);

/* The kernel tables (provider.c lists them). */
extern const onyx_kernel_table onyx__cpu_k_matmul_nbits;
extern const onyx_kernel_table onyx__cpu_k_gather_block_quantized;

#endif /* ONYX_CPU_NBITS_H */
