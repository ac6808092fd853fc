/*
 * Attribute and shape checks of MatMulNBits and GatherBlockQuantized, written once: the
 * CPU and CUDA providers accept the same models and report the same errors with the
 * same words. The semantics are ONNX Runtime's (docs/ContribOperators.md there); the
 * comments say where a check is ours.
 */
#include "nbits_params.h"

#include <string.h>

#include "pc_attr.h"
#include "pc_msg.h"

static bool nb_float_type(uint32_t t) {
  return t == ONYX_DTYPE_FLOAT32 || t == ONYX_DTYPE_FLOAT16 || t == ONYX_DTYPE_BFLOAT16;
}

static bool nb_pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

static int64_t nb_numel(const onyx_tensor *t) {
  int64_t n = 1;
  for (uint32_t i = 0; i < t->rank && i < ONYX_MAX_RANK; ++i) n *= t->dims[i];
  return n;
}

/* An INT attribute: required ones must be present; a non-INT is an error. */
static onyx_status nb_attr(const onyx_node_info *node, const char *name, bool required,
                           int64_t dflt, int64_t *out, char *msg, size_t cap) {
  if (required && onyx__pc_attr_find(node, name) == NULL)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT, "attribute '%s' is required",
                         name);
  if (!onyx__pc_attr_int(node, name, dflt, out))
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT, "attribute '%s' must be an INT",
                         name);
  return ONYX_STATUS_OK;
}

/* ------------------------------------------------------------------ MatMulNBits */

onyx_status onyx__pc_nb_attrs_read(const onyx_node_info *node, onyx__pc_nb_attrs *out, char *msg,
                                   size_t cap) {
  memset(out, 0, sizeof *out);
  int64_t prepacked = 0;
  onyx_status st = nb_attr(node, "K", true, 0, &out->k, msg, cap);
  if (st == ONYX_STATUS_OK) st = nb_attr(node, "N", true, 0, &out->n, msg, cap);
  if (st == ONYX_STATUS_OK) st = nb_attr(node, "block_size", true, 0, &out->block_size, msg, cap);
  if (st == ONYX_STATUS_OK) st = nb_attr(node, "bits", false, 4, &out->bits, msg, cap);
  if (st == ONYX_STATUS_OK)
    st = nb_attr(node, "accuracy_level", false, 0, &out->accuracy_level, msg, cap);
  if (st == ONYX_STATUS_OK) st = nb_attr(node, "weight_prepacked", false, 0, &prepacked, msg, cap);
  if (st != ONYX_STATUS_OK) return st;
  if (out->k < 1 || out->n < 1)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "attributes K = %lld and N = %lld must be positive", (long long)out->k,
                         (long long)out->n);
  /* The schema allows 2 to 8; ONNX Runtime implements 2, 4 and 8, and so do we. */
  if (out->bits != 2 && out->bits != 4 && out->bits != 8)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_UNSUPPORTED,
                         "attribute bits = %lld is not supported (2, 4 or 8)",
                         (long long)out->bits);
  if (!nb_pow2(out->block_size) || out->block_size < 16 || out->block_size > ONYX__PC_NB_MAX_BLOCK)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "attribute block_size = %lld must be a power of two from 16 to %d",
                         (long long)out->block_size, ONYX__PC_NB_MAX_BLOCK);
  if (out->accuracy_level < 0 || out->accuracy_level > 4)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "attribute accuracy_level = %lld must be 0 (unset), 1 (fp32), 2 (fp16), "
                         "3 (bf16) or 4 (int8)",
                         (long long)out->accuracy_level);
  if (prepacked != 0)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_UNSUPPORTED,
                         "attribute weight_prepacked = %lld names a CUDA-specific layout of B; "
                         "only the standard layout (0) is supported",
                         (long long)prepacked);
  out->k_blocks = (out->k + out->block_size - 1) / out->block_size;
  out->blob = out->block_size * out->bits / 8;
  out->zp_bytes = (out->k_blocks * out->bits + 7) / 8;
  return ONYX_STATUS_OK;
}

onyx_status onyx__pc_nb_g_idx_check(const onyx_node_info *node, const onyx__pc_nb_attrs *a,
                                    char *msg, size_t cap) {
  if (node->input_count <= ONYX__PC_NB_GIDX ||
      (node->input_present != NULL && !node->input_present[ONYX__PC_NB_GIDX]))
    return ONYX_STATUS_OK;
  const onyx_tensor *g = NULL;
  if (ONYX_HAS_FIELD(node, onyx_node_info, input_constants) && node->input_constants != NULL)
    g = node->input_constants[ONYX__PC_NB_GIDX];
  bool trivial = g != NULL && g->device == ONYX_DEVICE_HOST && g->dtype == ONYX_DTYPE_INT32 &&
                 nb_numel(g) == a->k && g->data != NULL;
  for (int64_t k = 0; trivial && k < a->k; ++k)
    trivial = ((const int32_t *)g->data)[k] == k / a->block_size;
  if (trivial) return ONYX_STATUS_OK;
  return onyx__pc_fail(msg, cap, ONYX_STATUS_UNSUPPORTED,
                       "input 4 (g_idx, deprecated) is not supported: only a constant g_idx[k] = "
                       "k / block_size (which reorders nothing) is accepted; re-export the model "
                       "without act-order");
}

/* A matrix given as [rows, cols] or flattened to [rows·cols]. */
static bool nb_matrix(const onyx_tensor *t, int64_t rows, int64_t cols) {
  if (t->rank == 2) return t->dims[0] == rows && t->dims[1] == cols;
  return t->rank == 1 && t->dims[0] == rows * cols;
}

onyx_status onyx__pc_nb_weights_check(const onyx__pc_nb_attrs *a, const onyx_tensor *b,
                                      const onyx_tensor *scales, const onyx_tensor *zp, uint32_t t1,
                                      onyx__pc_nb_weights_geom *out, char *msg, size_t cap) {
  memset(out, 0, sizeof *out);
  if (b == NULL || b->dtype != ONYX_DTYPE_UINT8 || b->rank != 3 || b->dims[0] != a->n ||
      b->dims[1] != a->k_blocks || b->dims[2] != a->blob)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "input 1 (B) is %s %s, expected uint8 [%lld, %lld, %lld] (N, "
                         "ceil(K / block_size), block_size·bits/8)",
                         b ? onyx__pc_dtype_name(b->dtype) : "missing",
                         b ? onyx__pc_tensor_shape(b).s : "", (long long)a->n,
                         (long long)a->k_blocks, (long long)a->blob);
  if (scales == NULL || !nb_float_type(scales->dtype) ||
      (t1 != ONYX_DTYPE_UNDEFINED && scales->dtype != t1) || !nb_matrix(scales, a->n, a->k_blocks))
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "input 2 (scales) is %s %s, expected %s [%lld, %lld] (N, k_blocks)",
                         scales ? onyx__pc_dtype_name(scales->dtype) : "missing",
                         scales ? onyx__pc_tensor_shape(scales).s : "",
                         t1 != ONYX_DTYPE_UNDEFINED ? onyx__pc_dtype_name(t1) : "A's float type",
                         (long long)a->n, (long long)a->k_blocks);
  out->scale_dtype = scales->dtype;
  out->zp = ONYX__PC_NB_ZP_DEFAULT;
  out->zp_dtype = ONYX_DTYPE_UNDEFINED;
  if (zp == NULL) return ONYX_STATUS_OK;
  out->zp_dtype = zp->dtype;
  if (zp->dtype == ONYX_DTYPE_UINT8) {
    if (!nb_matrix(zp, a->n, a->zp_bytes))
      return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "input 3 (zero_points) is uint8 %s, expected [%lld, %lld] (N, "
                           "ceil(k_blocks·bits/8): packed like B)",
                           onyx__pc_tensor_shape(zp).s, (long long)a->n, (long long)a->zp_bytes);
    out->zp = ONYX__PC_NB_ZP_PACKED;
    return ONYX_STATUS_OK;
  }
  if (zp->dtype != scales->dtype || !nb_matrix(zp, a->n, a->k_blocks))
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "input 3 (zero_points) is %s %s, expected uint8 [%lld, %lld] (packed) "
                         "or %s [%lld, %lld] (the scales' type, one per block)",
                         onyx__pc_dtype_name(zp->dtype), onyx__pc_tensor_shape(zp).s,
                         (long long)a->n, (long long)a->zp_bytes,
                         onyx__pc_dtype_name(scales->dtype), (long long)a->n,
                         (long long)a->k_blocks);
  out->zp = ONYX__PC_NB_ZP_FLOAT;
  return ONYX_STATUS_OK;
}

onyx_status onyx__pc_nb_geometry(const onyx__pc_nb_attrs *a, const onyx_tensor *const *in,
                                 size_t count, onyx__pc_nb_geom *g, char *msg, size_t cap) {
  memset(g, 0, sizeof *g);
#define NB_IN(i) ((size_t)(i) < count ? in[i] : NULL)
  const onyx_tensor *x = NB_IN(ONYX__PC_NB_A), *gidx = NB_IN(ONYX__PC_NB_GIDX);
  const onyx_tensor *bias = NB_IN(ONYX__PC_NB_BIAS);
  if (count > ONYX__PC_NB_INPUTS)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "%zu inputs given, at most %d (A, B, scales, zero_points, g_idx, bias)",
                         count, ONYX__PC_NB_INPUTS);
  if (x == NULL || !nb_float_type(x->dtype) || x->rank < 1 || x->rank > ONYX_MAX_RANK ||
      x->dims[x->rank - 1] != a->k)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "input 0 (A) is %s %s, expected float32, float16 or bfloat16 [..., %lld] "
                         "(last dim K)",
                         x ? onyx__pc_dtype_name(x->dtype) : "missing",
                         x ? onyx__pc_tensor_shape(x).s : "", (long long)a->k);
  g->t1 = x->dtype;
  onyx_status st = onyx__pc_nb_weights_check(a, NB_IN(ONYX__PC_NB_B), NB_IN(ONYX__PC_NB_SCALES),
                                             NB_IN(ONYX__PC_NB_ZP), x->dtype, &g->w, msg, cap);
  if (st != ONYX_STATUS_OK) return st;
  if (gidx != NULL) {
    if (gidx->dtype != ONYX_DTYPE_INT32 || gidx->rank != 1 || gidx->dims[0] != a->k)
      return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "input 4 (g_idx) is %s %s, expected int32 [%lld] (K)",
                           onyx__pc_dtype_name(gidx->dtype), onyx__pc_tensor_shape(gidx).s,
                           (long long)a->k);
    g->g_idx = true;
  }
  if (bias != NULL) {
    if (bias->dtype != x->dtype || nb_numel(bias) != a->n || bias->rank > 1)
      return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "input 5 (bias) is %s %s, expected %s [%lld] (N)",
                           onyx__pc_dtype_name(bias->dtype), onyx__pc_tensor_shape(bias).s,
                           onyx__pc_dtype_name(x->dtype), (long long)a->n);
    g->bias = true;
  }
#undef NB_IN
  g->m = 1;
  for (uint32_t d = 0; d + 1 < x->rank; ++d) g->m *= x->dims[d];
  g->out_rank = x->rank;
  memcpy(g->out_dims, x->dims, x->rank * sizeof g->out_dims[0]);
  g->out_dims[x->rank - 1] = a->n;
  return ONYX_STATUS_OK;
}

/* ------------------------------------------------------------------ GatherBlockQuantized */

onyx_status onyx__pc_gbq_attrs_read(const onyx_node_info *node, onyx__pc_gbq_attrs *out, char *msg,
                                    size_t cap) {
  memset(out, 0, sizeof *out);
  onyx_status st = nb_attr(node, "bits", false, 4, &out->bits, msg, cap);
  if (st == ONYX_STATUS_OK)
    st = nb_attr(node, "block_size", false, 128, &out->block_size, msg, cap);
  if (st == ONYX_STATUS_OK)
    st = nb_attr(node, "gather_axis", false, 0, &out->gather_axis, msg, cap);
  if (st == ONYX_STATUS_OK)
    st = nb_attr(node, "quantize_axis", false, 1, &out->quantize_axis, msg, cap);
  if (st != ONYX_STATUS_OK) return st;
  if (out->bits != 2 && out->bits != 4 && out->bits != 8)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_UNSUPPORTED,
                         "attribute bits = %lld is not supported (2, 4 or 8)",
                         (long long)out->bits);
  /* block_size 0 (one block per row) is for FP8/FP4 data, which is not supported. */
  if (!nb_pow2(out->block_size) || out->block_size < 16)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "attribute block_size = %lld must be a power of two, at least 16",
                         (long long)out->block_size);
  return ONYX_STATUS_OK;
}

static bool gbq_axis(int64_t axis, uint32_t rank, uint32_t *out) {
  if (axis < -(int64_t)rank || axis >= (int64_t)rank) return false;
  *out = (uint32_t)(axis < 0 ? axis + rank : axis);
  return true;
}

/* Data, zero points: the code types. INT4/UINT4 hold logical elements; uint8 packs
 * 8/bits codes a byte along the last axis. */
static onyx_status gbq_data(const onyx__pc_gbq_attrs *a, const onyx_tensor *data,
                            onyx__pc_gbq_geom *g, char *msg, size_t cap) {
  bool nibbles =
      data != NULL && (data->dtype == ONYX_DTYPE_INT4 || data->dtype == ONYX_DTYPE_UINT4);
  if (data == NULL || (data->dtype != ONYX_DTYPE_UINT8 && !nibbles) || data->rank < 1 ||
      data->rank > ONYX_MAX_RANK)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "input 0 (data) is %s %s, expected uint8, int4 or uint4 of rank >= 1 "
                         "(FP8/FP4 data is not supported)",
                         data ? onyx__pc_dtype_name(data->dtype) : "missing",
                         data ? onyx__pc_tensor_shape(data).s : "");
  if (nibbles && a->bits != 4)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "attribute bits = %lld does not match %s data (4 bits)",
                         (long long)a->bits, onyx__pc_dtype_name(data->dtype));
  g->data_dtype = data->dtype;
  g->rank = data->rank;
  memcpy(g->dims, data->dims, data->rank * sizeof g->dims[0]);
  if (!gbq_axis(a->gather_axis, g->rank, &g->gather_axis) ||
      !gbq_axis(a->quantize_axis, g->rank, &g->quantize_axis))
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "gather_axis %lld or quantize_axis %lld is out of range for data %s",
                         (long long)a->gather_axis, (long long)a->quantize_axis,
                         onyx__pc_tensor_shape(data).s);
  if (data->dtype == ONYX_DTYPE_UINT8) {
    if (g->gather_axis != 0 || g->quantize_axis != g->rank - 1 || g->rank < 2)
      return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "uint8 data %s needs gather_axis 0 and quantize_axis the last axis "
                           "(rank >= 2), got %lld and %lld",
                           onyx__pc_tensor_shape(data).s, (long long)a->gather_axis,
                           (long long)a->quantize_axis);
    g->dims[g->rank - 1] *= 8 / a->bits;
  }
  g->blocks = (g->dims[g->quantize_axis] + a->block_size - 1) / a->block_size;
  return ONYX_STATUS_OK;
}

/* Scales: data's logical dims with the quantize axis counted in blocks. */
static onyx_status gbq_scales(const onyx_tensor *scales, onyx__pc_gbq_geom *g, char *msg,
                              size_t cap) {
  bool ok = scales != NULL && nb_float_type(scales->dtype) && scales->rank == g->rank;
  for (uint32_t d = 0; ok && d < g->rank; ++d)
    ok = scales->dims[d] == (d == g->quantize_axis ? g->blocks : g->dims[d]);
  if (!ok) {
    int64_t want[ONYX_MAX_RANK];
    memcpy(want, g->dims, g->rank * sizeof want[0]);
    want[g->quantize_axis] = g->blocks;
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "input 2 (scales) is %s %s, expected a float type of shape %s",
                         scales ? onyx__pc_dtype_name(scales->dtype) : "missing",
                         scales ? onyx__pc_tensor_shape(scales).s : "",
                         onyx__pc_shape_str(g->rank, want).s);
  }
  g->out_dtype = scales->dtype;
  return ONYX_STATUS_OK;
}

/* Zero points: data's type, the scales' shape (uint8: packed along the last axis). */
static onyx_status gbq_zero_points(const onyx__pc_gbq_attrs *a, const onyx_tensor *zp,
                                   const onyx_tensor *scales, onyx__pc_gbq_geom *g, char *msg,
                                   size_t cap) {
  int64_t want[ONYX_MAX_RANK];
  memcpy(want, scales->dims, g->rank * sizeof want[0]);
  if (g->data_dtype == ONYX_DTYPE_UINT8) want[g->rank - 1] = (want[g->rank - 1] * a->bits + 7) / 8;
  bool ok = zp->dtype == g->data_dtype && zp->rank == g->rank;
  for (uint32_t d = 0; ok && d < g->rank; ++d) ok = zp->dims[d] == want[d];
  if (!ok)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "input 3 (zero_points) is %s %s, expected %s %s",
                         onyx__pc_dtype_name(zp->dtype), onyx__pc_tensor_shape(zp).s,
                         onyx__pc_dtype_name(g->data_dtype), onyx__pc_shape_str(g->rank, want).s);
  g->zp = true;
  return ONYX_STATUS_OK;
}

onyx_status onyx__pc_gbq_geometry(const onyx__pc_gbq_attrs *a, const onyx_tensor *const *in,
                                  size_t count, onyx__pc_gbq_geom *g, char *msg, size_t cap) {
  memset(g, 0, sizeof *g);
  const onyx_tensor *idx = count > 1 ? in[1] : NULL;
  onyx_status st = gbq_data(a, count > 0 ? in[0] : NULL, g, msg, cap);
  if (st == ONYX_STATUS_OK) st = gbq_scales(count > 2 ? in[2] : NULL, g, msg, cap);
  if (st == ONYX_STATUS_OK && count > 3 && in[3] != NULL)
    st = gbq_zero_points(a, in[3], in[2], g, msg, cap);
  if (st != ONYX_STATUS_OK) return st;
  if (idx == NULL || (idx->dtype != ONYX_DTYPE_INT32 && idx->dtype != ONYX_DTYPE_INT64) ||
      idx->rank + g->rank - 1 > ONYX_MAX_RANK)
    return onyx__pc_fail(msg, cap, ONYX_STATUS_INVALID_ARGUMENT,
                         "input 1 (indices) is %s %s, expected int32 or int64 with rank at most "
                         "%u",
                         idx ? onyx__pc_dtype_name(idx->dtype) : "missing",
                         idx ? onyx__pc_tensor_shape(idx).s : "", ONYX_MAX_RANK + 1 - g->rank);
  /* Output: data's dims before the gather axis, the indices' dims, the dims after. */
  uint32_t r = 0;
  for (uint32_t d = 0; d < g->gather_axis; ++d) g->out_dims[r++] = g->dims[d];
  for (uint32_t d = 0; d < idx->rank; ++d) g->out_dims[r++] = idx->dims[d];
  for (uint32_t d = g->gather_axis + 1; d < g->rank; ++d) g->out_dims[r++] = g->dims[d];
  g->out_rank = r;
  return ONYX_STATUS_OK;
}
