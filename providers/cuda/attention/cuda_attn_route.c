/*
 * Which kernel runs an attention problem.
 *
 * The plan (cuda_attn_plan.c) fixes the route family and the workspace from geometry
 * alone. Here, at dispatch, a flash-route problem moves to a specialised kernel when
 * that kernel computes the same function; every feature it lacks is named below and
 * keeps the problem on the flash kernel:
 * - the decode kernel (cuda_attn_decode.cu) for the decode tile (at most 16 rows per kv
 *   head): it splits keys as the plan does and uses the same partials region (whose
 *   counters the flash kernel ignores), so the declared requirement holds for both;
 * - the Hopper kernel (cuda_attn_hopper.cu) for prefill without a key split: it uses no
 *   workspace.
 */
#include <stdatomic.h>
#include <stdint.h>

#include "cuda_attn_impl.h"
#include "onyx_tensor.h"

int onyx__cuda_attn_force_hopper = -1;
int onyx__cuda_attn_hopper_variant = 0;
int onyx__cuda_attn_hopper_schedule = 0;
int onyx__cuda_attn_hopper_l2_hints = -1;
int onyx__cuda_attn_hopper_tune = -1;
int onyx__cuda_attn_force_decode = -1;
int onyx__cuda_attn_decode_variant = 0;
int onyx__cuda_attn_decode_split_keys = ONYX__CUDA_ATTN_DECODE_SPLIT_KEYS;
int onyx__cuda_attn_decode_split0_alone = 1;
int onyx__cuda_attn_pdl = 1;
int onyx__cuda_attn_fused_present = -1;
int onyx__cuda_attn_decode_grid = 0;

static _Atomic uint32_t last_route = ONYX__CUDA_ROUTE_FLASH;
static _Atomic int last_fill_present = 0;

int onyx__cuda_attn_last_fill_present(void) {
  return atomic_load_explicit(&last_fill_present, memory_order_relaxed);
}

uint32_t onyx__cuda_attn_last_route(void) {
  return atomic_load_explicit(&last_route, memory_order_relaxed);
}

/* TMA reads 16-byte aligned bases with strides that are multiples of 16 bytes (8
 * elements of 16 bits), each below 2^40 bytes. */
static bool tma_strides_ok(const void *base, int64_t s0, int64_t s1, int64_t s2) {
  const int64_t lim = (int64_t)1 << 39; /* elements of 2 bytes */
  if (base == NULL || ((uintptr_t)base & 15u) != 0) return false;
  const int64_t s[3] = {s0, s1, s2};
  for (int i = 0; i < 3; ++i)
    if (s[i] <= 0 || s[i] % 8 != 0 || s[i] >= lim) return false;
  return true;
}

/* 16-byte loads: a base aligned to 16 bytes and strides of whole 16-byte pieces. */
static bool rows16_ok(const void *base, int64_t s0, int64_t s1, int64_t s2) {
  return base != NULL && ((uintptr_t)base & 15u) == 0 && s0 % 8 == 0 && s1 % 8 == 0 && s2 % 8 == 0;
}

const char *onyx__cuda_attn_decode_refusal(const onyx__cuda_attn_params *p,
                                           const onyx__cuda_attn_plan *plan) {
  if (onyx__cuda_attn_force_decode == 0) return "turned off (tests)";
  if (onyx__cuda_attn_force_tile >= 0) return "a flash tile is forced (tests)";
  if (plan->route != ONYX__CUDA_ROUTE_FLASH) return "not a flash-route problem";
  if (p->dtype != ONYX_DTYPE_FLOAT16 && p->dtype != ONYX_DTYPE_BFLOAT16)
    return "float16 or bfloat16 only";
  if (p->hk != p->hv || (p->hk != 64 && p->hk != 128)) return "head sizes 64 and 128 only";
  if (p->group <= 0 || p->nq != p->nkv * p->group) return "query heads not a multiple of kv heads";
  if ((int64_t)p->sq * p->group > ONYX__CUDA_ATTN_DECODE_MAX_ROWS)
    return "more than 16 rows (query rows times group) per kv head";
  if (p->softcap != 0.0f) return "softcap";
  if (p->mask != NULL) return "attention mask or bias";
  if (p->n_split != plan->n_split || (p->n_split > 1 && p->partials == NULL))
    return "split not the plan's";
  if ((int64_t)p->batch * p->nkv * p->n_split > INT32_MAX) return "too many work units";
  if (!rows16_ok(p->k, p->k_rs, p->k_gs, p->k_bs) || !rows16_ok(p->v, p->v_rs, p->v_gs, p->v_bs))
    return "key or value rows not 16-byte aligned";
  if (!rows16_ok(p->q, p->q_ss, p->q_hs, p->q_bs)) return "query rows not 16-byte aligned";
  if (((uintptr_t)p->y & 7u) != 0 || p->y_ss % 4 != 0 || p->y_hs % 4 != 0 || p->y_bs % 4 != 0)
    return "output not aligned for 8-byte stores";
  if (!onyx__cuda_attn_decode_available()) return "no device the decode kernel runs on";
  return NULL;
}

/* Whether every element offset b·bs + g·gs + r·rs + d of a (batch, nkv, rows, head)
 * tensor fits 31 bits. */
static bool offsets31(int64_t bs, int64_t gs, int64_t rs, const onyx__cuda_attn_params *p) {
  const int64_t lim = INT32_MAX, ext[3] = {p->batch - 1, p->nkv - 1, p->sq - 1};
  const int64_t st[3] = {bs, gs, rs};
  int64_t top = p->hk;
  for (int i = 0; i < 3; ++i) {
    if (st[i] < 0 || (st[i] > 0 && ext[i] > (lim - top) / st[i])) return false;
    top += ext[i] * st[i];
  }
  return top <= lim;
}

/* The Hopper kernel's present copy: the first prompt's new rows (GroupQueryAttention's
 * every past_b 0, Attention's no past), as many as the queries, in 16-byte pieces,
 * indexed and addressed in 32 bits. */
static bool fill_present_ok(const onyx__cuda_attn_params *p) {
  const bool first = p->mode == ONYX__CUDA_ATTN_GQA ? p->first != 0 : p->past == 0;
  return first && p->kv_rows == p->sq && offsets31(p->k_bs, p->k_gs, p->k_rs, p) &&
         offsets31(p->v_bs, p->v_gs, p->v_rs, p) && offsets31(p->pr_bs, p->pr_gs, p->pr_rs, p) &&
         (int64_t)p->batch * p->nkv * p->sq * (p->hk / 8) <= INT32_MAX &&
         rows16_ok(p->present_k, p->pr_rs, p->pr_gs, p->pr_bs) &&
         rows16_ok(p->present_v, p->pr_rs, p->pr_gs, p->pr_bs);
}

const char *onyx__cuda_attn_hopper_refusal(const onyx__cuda_attn_params *p,
                                           const onyx__cuda_attn_plan *plan) {
  if (onyx__cuda_attn_force_hopper == 0) return "turned off (tests)";
  if (plan->route != ONYX__CUDA_ROUTE_FLASH || plan->n_split != 1)
    return "not a flash-route problem without a key split";
  if (p->dtype != ONYX_DTYPE_FLOAT16 && p->dtype != ONYX_DTYPE_BFLOAT16)
    return "float16 or bfloat16 only";
  if (p->hk != p->hv || (p->hk != 64 && p->hk != 128)) return "head sizes 64 and 128 only";
  if (p->cos != NULL) return "rotary queries";
  if (p->softcap != 0.0f) return "softcap";
  if (p->window > 0) return "local window";
  if (p->mask != NULL) return "attention mask or bias";
  if (p->sink != NULL) return "head sink";
  if (p->smooth) return "smooth softmax";
  if (p->shared_kv) return "shared KV buffer";
  if (p->sq < ONYX__CUDA_ATTN_HOPPER_MIN_ROWS) return "fewer query rows than one tile";
  if (p->group <= 0 || p->nq != p->nkv * p->group) return "query heads not a multiple of kv heads";
  if ((int64_t)p->batch * p->nq * ((p->sq + 127) / 128) > INT32_MAX) return "grid too large";
  if (!tma_strides_ok(p->q, p->q_ss, p->q_hs, p->q_bs) ||
      !tma_strides_ok(p->k, p->k_rs, p->k_gs, p->k_bs) ||
      !tma_strides_ok(p->v, p->v_rs, p->v_gs, p->v_bs))
    return "query, key or value layout TMA cannot read";
  if (((uintptr_t)p->y & 3u) != 0 || p->y_ss % 2 != 0 || p->y_hs % 2 != 0 || p->y_bs % 2 != 0)
    return "output not aligned for paired stores";
  if (p->fill_present && !fill_present_ok(p)) return "present layout the fused write cannot take";
  if (!onyx__cuda_attn_hopper_available()) return "no sm_90 device or no sm_90a build";
  return NULL;
}

int onyx__cuda_attn_run(const onyx__cuda_attn_params *p, const onyx__cuda_attn_plan *plan,
                        float *scores, int64_t key_cols, void *stream) {
  uint32_t route = plan->route;
  atomic_store_explicit(&last_fill_present, 0, memory_order_relaxed);
  /* append: the caller left the new rows to the decode kernel, which it chose. */
  if (p->append || (route == ONYX__CUDA_ROUTE_FLASH && !p->fill_present &&
                    onyx__cuda_attn_decode_refusal(p, plan) == NULL)) {
    if (p->append && onyx__cuda_attn_decode_refusal(p, plan) != NULL)
      return 1; /* cudaErrorInvalidValue: the new rows would be lost */
    atomic_store_explicit(&last_route, ONYX__CUDA_ROUTE_DECODE, memory_order_relaxed);
    return onyx__cuda_attn_decode(p, stream);
  }
  if (route == ONYX__CUDA_ROUTE_FLASH && onyx__cuda_attn_hopper_refusal(p, plan) == NULL) {
    int e = onyx__cuda_attn_hopper(p, stream);
    if (e != -1) { /* -1: a tensor map was refused, nothing ran */
      atomic_store_explicit(&last_route, ONYX__CUDA_ROUTE_HOPPER, memory_order_relaxed);
      atomic_store_explicit(&last_fill_present, p->fill_present != 0, memory_order_relaxed);
      return e;
    }
  }
  /* Only the Hopper kernel writes the presents itself: the caller fills them and asks
   * again without fill_present. */
  if (p->fill_present) return ONYX__CUDA_ATTN_NOT_TAKEN;
  atomic_store_explicit(&last_route, route, memory_order_relaxed);
  switch (route) {
  case ONYX__CUDA_ROUTE_FLASH:
    return onyx__cuda_attn_flash(p, plan->tile, plan->row_tiles, stream);
  default:
    return onyx__cuda_attn_reference(p, scores, key_cols, stream);
  }
}
