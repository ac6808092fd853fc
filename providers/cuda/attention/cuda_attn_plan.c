/*
 * Routes and workspace bytes of the CUDA attention kernels.
 *
 * A pure function of geometry (dtype, batch, heads, query rows, head sizes, a bound on
 * the keys): workspace() calls it to declare the requirement before admission and
 * compute() calls it again to find the same regions, so the two cannot disagree.
 *
 * Regions, each only on the route that uses it:
 * - split-K partials: flash and decode routes when the key range is split (few CTAs,
 *   long rows), batch·nq·sq·n_split·(hv + 2) floats and batch·nkv 32-bit counters;
 * - scores: reference route only (float32, or a head size the tensor-core kernel does
 *   not take), batch·nq·sq·max_keys floats.
 * Q/output transposes and packed-QKV staging are never needed: the kernels read BSH,
 * BNSH and packed rows in place through strides.
 */
#include "cuda_attn_impl.h"
#include "onyx_tensor.h"

int onyx__cuda_attn_force_tile = -1;
int onyx__cuda_attn_force_split = -1;

int32_t onyx__cuda_attn_tile_rows(uint32_t tile) {
  switch (tile) {
  case ONYX__CUDA_TILE_DECODE:
  case ONYX__CUDA_TILE_DECODE3:
    return 16;
  case ONYX__CUDA_TILE_PREFILL128:
  case ONYX__CUDA_TILE_PREFILL_M2:
    return 128;
  default:
    return 64;
  }
}

bool onyx__cuda_attn_flash_ok(uint32_t dtype, int64_t hk, int64_t hv) {
  if (dtype != ONYX_DTYPE_FLOAT16 && dtype != ONYX_DTYPE_BFLOAT16) return false;
  if (hk != hv) return false;
  return hk == 64 || hk == 80 || hk == 96 || hk == 128 || hk == 256;
}

uint64_t onyx__cuda_attn_partials_floats(int64_t batch, int64_t nq, int64_t sq, int64_t hv,
                                         int64_t n_split) {
  return (uint64_t)batch * (uint64_t)nq * (uint64_t)sq * (uint64_t)n_split * (uint64_t)(hv + 2);
}

uint64_t onyx__cuda_attn_partials_bytes(int64_t batch, int64_t nq, int64_t nkv, int64_t sq,
                                        int64_t hv, int64_t n_split) {
  return onyx__cuda_attn_partials_floats(batch, nq, sq, hv, n_split) * sizeof(float) +
         (uint64_t)batch * (uint64_t)nkv * sizeof(uint32_t);
}

void onyx__cuda_attn_plan_make(uint32_t dtype, int64_t batch, int64_t nq, int64_t nkv, int64_t sq,
                               int64_t hk, int64_t hv, int64_t max_keys,
                               onyx__cuda_attn_plan *out) {
  out->route = ONYX__CUDA_ROUTE_REF;
  out->tile = ONYX__CUDA_TILE_PREFILL;
  out->row_tiles = 0;
  out->n_split = 1;
  out->partials_bytes = 0;
  out->scores_bytes = 0;
  out->counters_bytes = 0;
  out->key_cols = max_keys > 0 ? max_keys : 0;
  if (batch <= 0 || nq <= 0 || nkv <= 0 || sq <= 0) return;
  int64_t group = nq / nkv;
  if (!onyx__cuda_attn_flash_ok(dtype, hk, hv)) {
    out->scores_bytes =
        (uint64_t)batch * (uint64_t)nq * (uint64_t)sq * (uint64_t)out->key_cols * sizeof(float);
    return;
  }
  out->route = ONYX__CUDA_ROUTE_FLASH;
  int64_t rows = sq * group;
  out->tile = rows <= 16 ? ONYX__CUDA_TILE_DECODE3 : ONYX__CUDA_TILE_PREFILL;
  int force = onyx__cuda_attn_force_tile;
  if (force == ONYX__CUDA_TILE_PREFILL || force == ONYX__CUDA_TILE_DECODE ||
      force == ONYX__CUDA_TILE_DECODE3 ||
      ((force == ONYX__CUDA_TILE_PREFILL128 || force == ONYX__CUDA_TILE_PREFILL_M2) && hk <= 128))
    out->tile = (uint32_t)force;
  int64_t br = onyx__cuda_attn_tile_rows(out->tile);
  out->row_tiles = (int32_t)((rows + br - 1) / br);
  /* Split keys when there are fewer CTAs than SMs: about one CTA per SM, each split
   * at least ONYX__CUDA_ATTN_SPLIT_MIN_KEYS keys. Problems of the decode tile (the decode
   * route's too) round down: that route runs one work unit per SM at a time, and a few
   * units past the SM count would take a second round as long as the first. */
  int64_t ctas = batch * nkv * out->row_tiles;
  if (rows <= ONYX__CUDA_ATTN_SPLIT_MAX_ROWS && ctas < ONYX__CUDA_ATTN_SMS &&
      max_keys >= 2 * ONYX__CUDA_ATTN_SPLIT_MIN_KEYS) {
    int64_t cap = max_keys / ONYX__CUDA_ATTN_SPLIT_MIN_KEYS;
    if (cap > ONYX__CUDA_ATTN_MAX_SPLITS) cap = ONYX__CUDA_ATTN_MAX_SPLITS;
    int64_t n = rows <= ONYX__CUDA_ATTN_DECODE_MAX_ROWS ? ONYX__CUDA_ATTN_SMS / ctas
                                                        : (ONYX__CUDA_ATTN_SMS + ctas / 2) / ctas;
    if (n > cap) n = cap;
    if (n > 1) out->n_split = (int32_t)n;
  }
  if (onyx__cuda_attn_force_split > 0) {
    int64_t n = onyx__cuda_attn_force_split;
    if (n > ONYX__CUDA_ATTN_MAX_SPLITS) n = ONYX__CUDA_ATTN_MAX_SPLITS;
    out->n_split = (int32_t)n;
  }
  if (out->n_split > 1) {
    out->partials_bytes = onyx__cuda_attn_partials_bytes(batch, nq, nkv, sq, hv, out->n_split);
    out->counters_bytes = (uint64_t)batch * (uint64_t)nkv * sizeof(uint32_t);
  }
}
