/*
 * A host provider that takes W as [N, K]: its MatMul, com.microsoft::FusedMatMul,
 * ai.onyx::RMSNormMatMul and ai.onyx::SiluMulMatMul kernels accept transB = 0 and 1
 * (FusedMatMul with alpha 1 and no other transpose), as the CUDA provider's decode
 * kernels do, so that transpose_weights_test.c sees the pass fire without a GPU.
 *
 * Placement takes float32, float16 and bfloat16 (so that the pass's own type check is
 * what keeps a float32 weight as it is); compute takes the 16-bit types only and works
 * on their bit patterns as integers modulo 2^16 — exact, so an output tells whether W
 * was read in the layout the attribute names:
 *
 *   MatMul, FusedMatMul  Y[r, n] = sum_k A[r, k] · W(k, n)
 *   RMSNormMatMul        A = (X + skip) · gamma (per k), S = X + skip; then as above
 *   SiluMulMatMul        A[r, k] = GU[r, k] · GU[r, K + k]; then as above
 *
 * (products and sums taken modulo 2^16) where W(k, n) is W[k, n] with transB = 0 and
 * W[n, k] with transB = 1. The test computes the same from the original W.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onyx_abi.h"

#define EXPORT __attribute__((visibility("default")))
#define TB_TYPES                                                                                   \
  (ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT32) | ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT16) |                       \
   ONYX_DTYPE_BIT(ONYX_DTYPE_BFLOAT16))

typedef enum tb_op { TB_MATMUL, TB_NORM, TB_SILU } tb_op;

typedef struct tb_state {
  tb_op op;
  bool trans_b;
} tb_state;

static onyx_status tb_open(const onyx_host_table *host, const onyx_option *options,
                           size_t option_count, void **out_state, char *err, size_t err_cap) {
  (void)host;
  (void)options;
  (void)option_count;
  (void)err;
  (void)err_cap;
  *out_state = NULL;
  return ONYX_STATUS_OK;
}

static void tb_close(void *state) { (void)state; }

static const onyx_attr *find_attr(const onyx_node_info *node, const char *name) {
  for (size_t a = 0; a < node->attr_count; ++a)
    if (!strcmp(node->attrs[a].name, name)) return &node->attrs[a];
  return NULL;
}

/* transB 0 or 1; for FusedMatMul also alpha 1 and transA, transBatchA/B 0. */
static bool tb_attrs_ok(const onyx_node_info *node, char *reason, size_t cap) {
  static const char *const zero[] = {"transA", "transBatchA", "transBatchB"};
  const onyx_attr *tb = find_attr(node, "transB");
  if (tb && (tb->type != ONYX_ATTR_INT || (tb->i != 0 && tb->i != 1))) {
    if (reason) snprintf(reason, cap, "transB must be an int, 0 or 1");
    return false;
  }
  if (strcmp(node->op_type, "FusedMatMul") != 0) return true;
  for (size_t i = 0; i < 3; ++i) {
    const onyx_attr *a = find_attr(node, zero[i]);
    if (a && (a->type != ONYX_ATTR_INT || a->i != 0)) {
      if (reason) snprintf(reason, cap, "%s must be 0", zero[i]);
      return false;
    }
  }
  const onyx_attr *alpha = find_attr(node, "alpha");
  if (alpha && (alpha->type != ONYX_ATTR_FLOAT || alpha->f != 1.0f)) {
    if (reason) snprintf(reason, cap, "alpha must be 1");
    return false;
  }
  return true;
}

static onyx_status tb_create(void *provider_state, const onyx_node_info *node, void **out_state,
                             char *err, size_t err_cap) {
  (void)provider_state;
  if (!tb_attrs_ok(node, err, err_cap)) return ONYX_STATUS_UNSUPPORTED;
  tb_state *s = calloc(1, sizeof *s);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  const onyx_attr *tb = find_attr(node, "transB");
  s->trans_b = tb && tb->i == 1;
  s->op = !strcmp(node->op_type, "RMSNormMatMul")   ? TB_NORM
          : !strcmp(node->op_type, "SiluMulMatMul") ? TB_SILU
                                                    : TB_MATMUL;
  *out_state = s;
  return ONYX_STATUS_OK;
}

static void tb_destroy(void *state) { free(state); }

static bool half(const onyx_tensor *t) {
  return t && t->device == ONYX_DEVICE_HOST &&
         (t->dtype == ONYX_DTYPE_FLOAT16 || t->dtype == ONYX_DTYPE_BFLOAT16);
}

/* Row r of A (k elements) as the op defines it, into a. */
static void a_row(const tb_state *s, const onyx_tensor *const *in, int64_t r, int64_t k,
                  uint16_t *a) {
  const uint16_t *x = in[0]->data;
  for (int64_t c = 0; c < k; ++c) {
    if (s->op == TB_SILU) {
      a[c] = (uint16_t)((uint32_t)x[r * 2 * k + c] * x[r * 2 * k + k + c]);
    } else if (s->op == TB_NORM) {
      const uint16_t *skip = in[1] ? in[1]->data : NULL, *gamma = in[2]->data;
      a[c] =
          (uint16_t)((uint32_t)(uint16_t)(x[r * k + c] + (skip ? skip[r * k + c] : 0)) * gamma[c]);
    } else {
      a[c] = x[r * k + c];
    }
  }
}

static onyx_status tb_compute(void *state, onyx_compute_ctx *ctx, const onyx_tensor *const *in,
                              size_t n_in) {
  const tb_state *s = state;
  const size_t w_at = s->op == TB_NORM ? 3 : 1;
  const onyx_tensor *x = n_in > w_at ? in[0] : NULL, *w = n_in > w_at ? in[w_at] : NULL;
  if (!half(x) || !half(w) || w->rank != 2 || x->rank < 1 ||
      (s->op == TB_NORM && (!half(in[2]) || (in[1] && !half(in[1]))))) {
    ctx->set_error(ctx, "transb: 16-bit host inputs and a matrix W expected");
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  const int64_t k = w->dims[s->trans_b ? 1 : 0], n = w->dims[s->trans_b ? 0 : 1];
  const int64_t xk = x->dims[x->rank - 1] / (s->op == TB_SILU ? 2 : 1);
  if (xk != k || k < 1) {
    ctx->set_error(ctx, "transb: input 0's last dim does not match W's K = %lld", (long long)k);
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  int64_t dims[ONYX_MAX_RANK];
  memcpy(dims, x->dims, x->rank * sizeof dims[0]);
  dims[x->rank - 1] = n;
  onyx_tensor *y = NULL, *sum = NULL;
  onyx_status st = ctx->alloc_output(ctx, 0, x->dtype, x->rank, dims, &y);
  if (st == ONYX_STATUS_OK && s->op == TB_NORM && in[1])
    st = ctx->alloc_output(ctx, 1, x->dtype, x->rank, x->dims, &sum);
  uint16_t *a = malloc((size_t)k * sizeof *a);
  if (st == ONYX_STATUS_OK && a == NULL) st = ONYX_STATUS_OUT_OF_MEMORY;
  const int64_t rows = onyx_tensor_numel(x) / (xk * (s->op == TB_SILU ? 2 : 1));
  const uint16_t *wd = w->data;
  for (int64_t r = 0; st == ONYX_STATUS_OK && r < rows; ++r) {
    a_row(s, in, r, k, a);
    for (int64_t c = 0; c < n; ++c) {
      uint16_t acc = 0;
      for (int64_t j = 0; j < k; ++j)
        acc = (uint16_t)(acc + (uint32_t)a[j] * (s->trans_b ? wd[c * k + j] : wd[j * n + c]));
      ((uint16_t *)y->data)[r * n + c] = acc;
    }
    for (int64_t c = 0; sum && c < k; ++c)
      ((uint16_t *)sum->data)[r * k + c] = (uint16_t)(((const uint16_t *)x->data)[r * k + c] +
                                                      ((const uint16_t *)in[1]->data)[r * k + c]);
  }
  free(a);
  return st;
}

/* Output geometry, so that the planner plans the node as it plans a real one. */
static onyx_status tb_infer(void *state, const onyx_tensor *in, size_t n_in, onyx_tensor *out,
                            size_t n_out) {
  const tb_state *s = state;
  const size_t w_at = s->op == TB_NORM ? 3 : 1;
  if (n_in <= w_at || n_out < 1 || in[0].rank < 1 || in[w_at].rank != 2)
    return ONYX_STATUS_UNSUPPORTED;
  out[0] = (onyx_tensor){.dtype = in[0].dtype, .rank = in[0].rank};
  memcpy(out[0].dims, in[0].dims, in[0].rank * sizeof in[0].dims[0]);
  out[0].dims[in[0].rank - 1] = in[w_at].dims[s->trans_b ? 0 : 1];
  if (s->op == TB_NORM && n_out > 1)
    out[1] = in[1].dtype == ONYX_DTYPE_UNDEFINED ? (onyx_tensor){0} : in[0];
  for (size_t o = 0; o < n_out; ++o) out[o].data = NULL;
  return ONYX_STATUS_OK;
}

#define TB_KERNEL(dom, op)                                                                         \
  {                                                                                                \
    .struct_size = sizeof(onyx_kernel_table), .version = ONYX_ABI_VERSION, .domain = dom,          \
    .op_type = op, .since_opset = 1, .type_input = 0, .type_mask = TB_TYPES,                       \
    .supports = tb_attrs_ok, .create = tb_create, .destroy = tb_destroy, .compute = tb_compute,    \
    .infer = tb_infer                                                                              \
  }

static const onyx_kernel_table tb_matmul = TB_KERNEL("", "MatMul");
static const onyx_kernel_table tb_fused = TB_KERNEL("com.microsoft", "FusedMatMul");
static const onyx_kernel_table tb_norm = TB_KERNEL("ai.onyx", "RMSNormMatMul");
static const onyx_kernel_table tb_silu = TB_KERNEL("ai.onyx", "SiluMulMatMul");

static const onyx_kernel_table *const kernels[] = {&tb_matmul, &tb_fused, &tb_norm, &tb_silu};

static const onyx_provider_table table = {
    .struct_size = sizeof(onyx_provider_table),
    .abi_version = ONYX_ABI_VERSION,
    .name = "transb",
    .device = ONYX_DEVICE_HOST,
    .open = tb_open,
    .close = tb_close,
    .kernels = kernels,
    .kernel_count = sizeof kernels / sizeof kernels[0],
};

EXPORT onyx_status onyx_provider_entry(uint32_t core_max_abi, uint32_t *out_abi,
                                       const onyx_provider_table **out_table);
EXPORT onyx_status onyx_provider_entry(uint32_t core_max_abi, uint32_t *out_abi,
                                       const onyx_provider_table **out_table) {
  *out_abi = ONYX_ABI_VERSION;
  if (core_max_abi < ONYX_ABI_VERSION) return ONYX_STATUS_ABI_MISMATCH;
  *out_table = &table;
  return ONYX_STATUS_OK;
}
