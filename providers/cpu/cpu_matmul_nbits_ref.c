/*
 * The reference route of MatMulNBits: the op's definition, element by element, on the
 * op's own inputs (no packing), summed in double:
 *
 *   Y[m, n] = Σ_k A[m, k] · (q(n, k) − zp(n, k / block_size)) · scale(n, k / block_size)
 *             + bias[n]
 *
 * With the int8 route (accuracy_level 4) A is first quantized per row and block as the
 * fast route does (q_a, scale_a: cpu_matmul_nbits_pack.c), and the sum becomes
 *
 *   Y[m, n] = Σ_blocks scale_a · scale · Σ_k q_a · (q(n, k) − zp) + bias[n].
 *
 * It is slow on purpose: ONYX_CPU_NBITS_ISA=reference selects it, so that the fast
 * routes have something plain to be compared with on any machine.
 */
#include "cpu_nbits.h"

/* Code k (in [0, K)) of column n of B, and its block's zero point, as the op stores them. */
static unsigned ref_code(const onyx__pc_nb_attrs *a, const uint8_t *b, int64_t n, int64_t k) {
  int64_t blk = k / a->block_size, bit = (k % a->block_size) * a->bits;
  const uint8_t *block = b + (n * a->k_blocks + blk) * a->blob;
  return (unsigned)(block[bit / 8] >> (bit % 8)) & ((1u << a->bits) - 1);
}

static double ref_zero_point(const onyx__pc_nb_attrs *a, const onyx_tensor *zp, int64_t n,
                             int64_t blk) {
  if (zp == NULL) return (double)(1 << (a->bits - 1));
  if (zp->dtype != ONYX_DTYPE_UINT8)
    return onyx__cpu_load_f32(zp->dtype, zp->data, n * a->k_blocks + blk);
  const uint8_t *row = (const uint8_t *)zp->data + n * a->zp_bytes;
  int64_t bit = blk * a->bits;
  return (double)((row[bit / 8] >> (bit % 8)) & ((1u << a->bits) - 1));
}

static double ref_scale(const onyx__pc_nb_attrs *a, const onyx_tensor *s, int64_t n, int64_t blk) {
  return onyx__cpu_load_f32(s->dtype, s->data, n * a->k_blocks + blk);
}

/* One output element. */
static double ref_dot(const onyx__nb_ref *r, int64_t m, int64_t n) {
  const onyx__pc_nb_attrs *a = r->attrs;
  const uint8_t *b = r->b->data;
  double y = 0.0;
  for (int64_t blk = 0; blk < a->k_blocks; ++blk) {
    const double zp = ref_zero_point(a, r->zp, n, blk), scale = ref_scale(a, r->scales, n, blk);
    const int64_t k0 = blk * a->block_size;
    const int64_t k1 = k0 + a->block_size < a->k ? k0 + a->block_size : a->k;
    double block = 0.0;
    for (int64_t k = k0; k < k1; ++k) {
      double w = (double)ref_code(a, b, n, k) - zp;
      double x = r->qa ? (double)r->qa->q[m * r->qa->kpad + k]
                       : onyx__cpu_load_f32(r->a->dtype, r->a->data, m * a->k + k);
      block += x * w;
    }
    y += block * scale * (r->qa ? (double)r->qa->scale[m * a->k_blocks + blk] : 1.0);
  }
  if (r->bias != NULL) y += onyx__cpu_load_f32(r->bias->dtype, r->bias->data, n);
  return y;
}

void onyx__nb_reference_rows(void *arg, int64_t r0, int64_t r1) {
  const onyx__nb_ref *r = arg;
  for (int64_t m = r0; m < r1; ++m)
    for (int64_t n = 0; n < r->attrs->n; ++n)
      onyx__cpu_store_f32(r->y->dtype, r->y->data, m * r->attrs->n + n, (float)ref_dot(r, m, n));
}
