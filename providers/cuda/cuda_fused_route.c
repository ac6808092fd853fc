/* The fused decode products' routes and workspace (cuda_fused_route.h). */
#include "cuda_fused_route.h"

onyx__cuda_fused_geo onyx__cuda_fused_geometry(const onyx_tensor *w, bool nk, int64_t a_numel,
                                               int64_t a_row, uint32_t dtype) {
  onyx__cuda_fused_geo g = {.nk = nk, .dtype = dtype};
  g.k = w->dims[nk ? 1 : 0];
  g.n = w->dims[nk ? 0 : 1];
  g.rows = g.k > 0 ? a_numel / (a_row * g.k) : 0;
  return g;
}

bool onyx__cuda_fused_prompt(const onyx__cuda_fused_geo *g) {
  return g->rows > ONYX__CUDA_FUSED_ROWS ||
         (g->nk && !onyx__cuda_gemv_nk_fits(g->rows, g->k, g->n, onyx_dtype_size(g->dtype)));
}

uint64_t onyx__cuda_fused_partial_bytes(const onyx__cuda_fused_geo *g, int64_t split) {
  if (g->nk || split <= 1 || g->rows <= 0) return 0;
  int64_t m = g->rows < ONYX__CUDA_FUSED_ROWS ? g->rows : ONYX__CUDA_FUSED_ROWS;
  return (uint64_t)(split * m * g->n) * 4u;
}

uint64_t onyx__cuda_fused_session_bytes(const onyx__cuda_fused_geo *g, int64_t split) {
  if (onyx__cuda_fused_prompt(g)) return 0;
  uint64_t p = onyx__cuda_fused_partial_bytes(g, split);
  return p ? p + ((uint64_t)g->n + 255u) / 256u * 4u : 0;
}

uint64_t onyx__cuda_fused_a_bytes(const onyx__cuda_fused_geo *g) {
  return onyx__cuda_fused_prompt(g) ? (uint64_t)(g->rows * g->k) * onyx_dtype_size(g->dtype) : 0;
}

uint64_t onyx__cuda_fused_lt_bytes(const onyx__cuda_fused_geo *g) {
  return onyx__cuda_fused_prompt(g) ? onyx__cuda_lt_workspace_bytes(g->rows, g->n, g->k) : 0;
}

const onyx_workspace_view *onyx__cuda_fused_view(const onyx_compute_ctx *ctx, size_t i,
                                                 uint64_t need) {
  const onyx_workspace_view *v = ctx->workspace_count > i ? &ctx->workspace[i] : NULL;
  return v != NULL && v->data != NULL && v->bytes >= need ? v : NULL;
}

onyx_status onyx__cuda_fused_too_small(onyx_compute_ctx *ctx, const char *op, size_t i,
                                       const char *what, uint64_t need) {
  uint64_t got = ctx->workspace_count > i ? ctx->workspace[i].bytes : 0;
  return onyx__cuda_error(ctx, ONYX_STATUS_WORKSPACE_TOO_SMALL,
                          "%s %s view has %llu bytes, %llu required", op, what,
                          (unsigned long long)got, (unsigned long long)need);
}
