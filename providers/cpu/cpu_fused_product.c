/*
 * The product half of the fused ops (ai.onyx::RMSNormMatMul, ai.onyx::SiluMulMatMul):
 * the op writes its A operand into the start of its scratch, and Y = A · W runs through
 * the MatMul kernel's float32 GEMM, a float32 constant W packed at create as that
 * kernel packs it. So a fused node gives the unfused pair's bits wherever the MatMul
 * takes the same route.
 */
#include <stdio.h>

#include "cpu_impl.h"

/* The product the MatMul kernel would run for A (rows x k of T) · W, data unset. */
static onyx__cpu_gemm fused_gemm(const onyx__cpu_fused_w *fw, uint32_t t, int64_t rows, int64_t k,
                                 int64_t n) {
  return (onyx__cpu_gemm){.m = rows,
                          .n = n,
                          .k = k,
                          .alpha = 1.0f,
                          .ab_dtype = t,
                          .lda = k,
                          .ldb = n,
                          .ldy = n,
                          .packed_b = fw->packed.data ? &fw->packed : NULL,
                          .overwrite_y = true};
}

static uint64_t up64(uint64_t b) { return (b + 63) / 64 * 64; }

onyx__cpu_fused_scratch onyx__cpu_fused_scratch_of(const onyx__cpu_fused_w *fw,
                                                   const onyx__cpu_provider *p, uint32_t t,
                                                   int64_t rows, int64_t k, int64_t n) {
  onyx__cpu_fused_scratch sc = {0};
  if (rows <= 0 || n <= 0 || k <= 0) return sc;
  onyx__cpu_gemm g = fused_gemm(fw, t, rows, k, n);
  uint64_t pa = 0, pb = 0;
  onyx__cpu_sgemm_scratch(&g, p ? p->num_threads : 1, &pa, &pb);
  sc.pack_a = up64((uint64_t)(rows * k) * onyx_dtype_size(t));
  sc.pack_b = sc.pack_a + up64(pa * sizeof(float));
  sc.acc = sc.pack_b + up64(pb * sizeof(float));
  sc.total = sc.acc + (t == ONYX_DTYPE_FLOAT32 ? 0 : (uint64_t)(rows * n) * sizeof(float));
  return sc;
}

void onyx__cpu_fused_product(const onyx__cpu_fused_w *fw, const onyx__cpu_provider *p, uint32_t t,
                             const onyx__cpu_fused_scratch *sc, unsigned char *ws,
                             const onyx_tensor *w, int64_t rows, void *y) {
  onyx__cpu_gemm g = fused_gemm(fw, t, rows, w->dims[0], w->dims[1]);
  g.a = ws;
  g.b = w->data;
  g.y = t == ONYX_DTYPE_FLOAT32 ? y : (float *)(ws + sc->acc);
  onyx__cpu_sgemm(p, &g, sc->pack_b > sc->pack_a ? (float *)(ws + sc->pack_a) : NULL,
                  sc->acc > sc->pack_b ? (float *)(ws + sc->pack_b) : NULL);
  if (t != ONYX_DTYPE_FLOAT32)
    for (int64_t i = 0; i < rows * w->dims[1]; ++i) onyx__cpu_store_f32(t, y, i, g.y[i]);
}

onyx_status onyx__cpu_fused_check_packed(const onyx__cpu_fused_w *fw, onyx_compute_ctx *ctx,
                                         uint32_t a_dtype, const onyx_tensor *w) {
  if (fw->packed.data == NULL ||
      (a_dtype == ONYX_DTYPE_FLOAT32 && w->dims[0] == fw->packed.k && w->dims[1] == fw->packed.n))
    return ONYX_STATUS_OK;
  ctx->set_error(ctx,
                 "W has dtype %s and shape %s, but the kernel packed a float32 constant of "
                 "%lldx%lld (KxN) at creation",
                 onyx__cpu_dtype_name(w->dtype), onyx__cpu_tensor_shape(w).s,
                 (long long)fw->packed.k, (long long)fw->packed.n);
  return ONYX_STATUS_INVALID_ARGUMENT;
}

void onyx__cpu_fused_w_pack(onyx__cpu_fused_w *fw, const onyx__cpu_provider *p,
                            const onyx_node_info *node, size_t a_input, size_t w_input,
                            size_t input_count, const char *op) {
  if (!ONYX_HAS_FIELD(node, onyx_node_info, input_constants) || node->input_constants == NULL ||
      node->input_count != input_count || node->input_dtypes == NULL ||
      node->input_dtypes[a_input] != ONYX_DTYPE_FLOAT32)
    return;
  const onyx_tensor *w = node->input_constants[w_input];
  const onyx_host_table *host = p ? p->host : NULL;
  if (w == NULL || w->dtype != ONYX_DTYPE_FLOAT32 || w->rank != 2 || w->data == NULL ||
      w->device != ONYX_DEVICE_HOST || host == NULL || host->mem_alloc == NULL ||
      host->mem_free == NULL || w->dims[0] <= 0 || w->dims[1] <= 0)
    return;
  onyx__cpu_gemm g = {.k = w->dims[0],
                      .n = w->dims[1],
                      .ab_dtype = ONYX_DTYPE_FLOAT32,
                      .b = w->data,
                      .ldb = w->dims[1]};
  char label[96];
  snprintf(label, sizeof label, "%s '%s' packed W", op, node->name ? node->name : "");
  uint64_t bytes = onyx__cpu_packed_b_floats(g.k, g.n) * sizeof(float);
  if (host->mem_alloc(host->host_data, ONYX_REQUESTER_WEIGHTS, bytes, 64, label, &fw->mem) !=
      ONYX_STATUS_OK) {
    fw->mem = NULL;
    return;
  }
  onyx__cpu_pack_b(p, &g, fw->mem, &fw->packed);
  if (ONYX_HAS_FIELD(node, onyx_node_info, input_constant_copied) &&
      node->input_constant_copied != NULL)
    node->input_constant_copied[w_input] = true;
}

void onyx__cpu_fused_w_free(onyx__cpu_fused_w *fw, const onyx__cpu_provider *p) {
  if (fw->mem != NULL) p->host->mem_free(p->host->host_data, fw->mem);
  fw->mem = NULL;
}

onyx_status onyx__cpu_fused_w_kn_only(const onyx_node_info *node, char *err, size_t err_cap) {
  int64_t trans_b = 0;
  onyx_status st = onyx__cpu_attr_int(node, "transB", 0, &trans_b, err, err_cap);
  if (st != ONYX_STATUS_OK || trans_b == 0) return st;
  return onyx__cpu_fail(err, err_cap, ONYX_STATUS_UNSUPPORTED,
                        "transB = %lld (W as [N, K]) is the CUDA decode layout; the CPU kernel "
                        "reads W as [K, N]",
                        (long long)trans_b);
}
