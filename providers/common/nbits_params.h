/*
 * Attributes and input geometry of the block-quantized weight ops of ONNX Runtime's
 * com.microsoft domain, MatMulNBits and GatherBlockQuantized, checked once for every
 * provider that runs them: the CPU and CUDA providers compile this source in (hidden),
 * and so may a third-party provider. Shapes and dtypes only: no data is read (but for
 * the constant g_idx), so create() (on constant weights), infer(), workspace() and
 * compute() can all call these.
 *
 * Inputs are passed in the operator's own order, absent ones as NULL. On failure a
 * message goes into msg (err-style: NULL or cap 0 for none).
 *
 * MatMulNBits: Y[..., N] = A[..., K] · dequant(B)ᵀ (+ bias), where column n of the
 * weight, element k, is (q(n, k) − zp(n, k / block_size)) · scale(n, k / block_size).
 * B is uint8 [N, k_blocks, block_size·bits/8], codes packed low bits first along K;
 * scales [N, k_blocks] (or [N·k_blocks]) of A's dtype; zero points absent (2^(bits−1)),
 * uint8 packed the same way [N, ceil(k_blocks·bits/8)], or of the scales' dtype
 * [N, k_blocks]; bias [N].
 */
#ifndef ONYX_PC_NBITS_PARAMS_H
#define ONYX_PC_NBITS_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onyx_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ MatMulNBits */

/* Input slots of MatMulNBits. */
enum {
  ONYX__PC_NB_A = 0,
  ONYX__PC_NB_B = 1,
  ONYX__PC_NB_SCALES = 2,
  ONYX__PC_NB_ZP = 3,
  ONYX__PC_NB_GIDX = 4,
  ONYX__PC_NB_BIAS = 5,
  ONYX__PC_NB_INPUTS = 6
};

/* How the zero points come. */
typedef enum onyx__pc_nb_zp {
  ONYX__PC_NB_ZP_DEFAULT = 0, /* absent: 2^(bits-1) for every block */
  ONYX__PC_NB_ZP_PACKED = 1,  /* uint8, bits-wide codes packed like B */
  ONYX__PC_NB_ZP_FLOAT = 2    /* the scales' dtype, one value per block */
} onyx__pc_nb_zp;

/* The attributes, checked, and what follows from them. */
typedef struct onyx__pc_nb_attrs {
  int64_t k, n;           /* K and N */
  int64_t bits;           /* 2, 4 or 8 */
  int64_t block_size;     /* a power of two, 16 to ONYX__PC_NB_MAX_BLOCK */
  int64_t accuracy_level; /* 0 to 4 */
  int64_t k_blocks;       /* ceil(K / block_size) */
  int64_t blob;           /* bytes of one block of one column: block_size·bits/8 */
  int64_t zp_bytes;       /* bytes of packed zero points per column: ceil(k_blocks·bits/8) */
} onyx__pc_nb_attrs;

/* Largest block_size accepted: int8 dot products of a block stay far from int32 limits. */
#define ONYX__PC_NB_MAX_BLOCK 4096

/* Reads and checks K, N, bits, block_size, accuracy_level and weight_prepacked (only 0,
 * the standard layout, is accepted). INVALID_ARGUMENT or UNSUPPORTED with a message. */
onyx_status onyx__pc_nb_attrs_read(const onyx_node_info *node, onyx__pc_nb_attrs *out, char *msg,
                                   size_t cap);

/* What the weight inputs are. */
typedef struct onyx__pc_nb_weights_geom {
  uint32_t scale_dtype; /* float32, float16 or bfloat16 */
  onyx__pc_nb_zp zp;
  uint32_t zp_dtype; /* uint8 or scale_dtype; UNDEFINED when absent */
} onyx__pc_nb_weights_geom;

/* Checks B (in[1]), scales (in[2]) and zero points (in[3], may be NULL) against the
 * attributes, and that the scales have dtype t1 (A's; UNDEFINED: any float type). */
onyx_status onyx__pc_nb_weights_check(const onyx__pc_nb_attrs *a, const onyx_tensor *b,
                                      const onyx_tensor *scales, const onyx_tensor *zp, uint32_t t1,
                                      onyx__pc_nb_weights_geom *out, char *msg, size_t cap);

/* The whole node's geometry. */
typedef struct onyx__pc_nb_geom {
  uint32_t t1; /* A's dtype: float32, float16 or bfloat16 */
  int64_t m;   /* rows: the product of A's leading dims (1 for a 1-D A) */
  bool bias;   /* input 5 present */
  bool g_idx;  /* input 4 present (the provider decides whether it accepts it) */
  onyx__pc_nb_weights_geom w;
  uint32_t out_rank;
  int64_t out_dims[ONYX_MAX_RANK]; /* A's dims with the last one N */
} onyx__pc_nb_geom;

/* Checks every input (in[0..count), absent ones NULL) and fills *g (zeroed first).
 * A g_idx input is checked for shape ([K], int32) and reported in g->g_idx. */
onyx_status onyx__pc_nb_geometry(const onyx__pc_nb_attrs *a, const onyx_tensor *const *in,
                                 size_t count, onyx__pc_nb_geom *g, char *msg, size_t cap);

/* Input 4 (g_idx, deprecated) maps each k to its group. Only the map every model without
 * act-order has, g_idx[k] = k / block_size, reorders nothing, and that one is accepted
 * (ONNX Runtime treats it the same way), given as a constant of the session
 * (node->input_constants: host int32 [K], whose values are read); any other needs a
 * gather of K that no route does. OK when the node names no g_idx, else UNSUPPORTED
 * with a message. For create() and supports(): a is onyx__pc_nb_attrs_read's. */
onyx_status onyx__pc_nb_g_idx_check(const onyx_node_info *node, const onyx__pc_nb_attrs *a,
                                    char *msg, size_t cap);

/* ------------------------------------------------------------------ GatherBlockQuantized */

/* The attributes (defaults: bits 4, block_size 128, gather_axis 0, quantize_axis 1),
 * axes not yet normalised: that needs data's rank. */
typedef struct onyx__pc_gbq_attrs {
  int64_t bits, block_size, gather_axis, quantize_axis;
} onyx__pc_gbq_attrs;

onyx_status onyx__pc_gbq_attrs_read(const onyx_node_info *node, onyx__pc_gbq_attrs *out, char *msg,
                                    size_t cap);

/* The geometry of data (in[0]), indices (in[1]), scales (in[2]) and zero points (in[3]).
 * "Logical" dims count codes: for uint8 data with bits < 8 the last dim holds 8/bits
 * codes per byte. */
typedef struct onyx__pc_gbq_geom {
  uint32_t data_dtype;         /* uint8, or int4 / uint4 where the ABI has them */
  uint32_t rank;               /* data's rank */
  int64_t dims[ONYX_MAX_RANK]; /* logical dims of data */
  uint32_t gather_axis, quantize_axis;
  int64_t blocks;     /* ceil(dims[quantize_axis] / block_size) */
  bool zp;            /* zero points present */
  uint32_t out_dtype; /* the scales' dtype */
  uint32_t out_rank;
  int64_t out_dims[ONYX_MAX_RANK];
} onyx__pc_gbq_geom;

onyx_status onyx__pc_gbq_geometry(const onyx__pc_gbq_attrs *a, const onyx_tensor *const *in,
                                  size_t count, onyx__pc_gbq_geom *g, char *msg, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* ONYX_PC_NBITS_PARAMS_H */
