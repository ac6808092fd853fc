/*
 * A host provider that declares the ops around the int4 decoder fusions, so that
 * nbits_fusion_test.c sees norm_matmul and silu_matmul fire into MatMulNBits products
 * without a GPU: com.microsoft::MatMulNBits, the two RMS norms, ai.onyx::SiluMul, Mul (so
 * that gate_up_silu places SiluMul here), and — unless built with NB_NO_FUSED, the
 * provider without them — ai.onyx::RMSNormMatMulNBits and ai.onyx::SiluMulMatMulNBits.
 *
 * The fused kernels' `supports` reads the attributes the CUDA kernels will read: K, N,
 * block_size, bits = 4 and (RMSNormMatMulNBits) epsilon, and declines otherwise — so a
 * pass that probed with the head node's own attributes would never fuse, and bits = 8
 * shows a provider declining the fused node it was asked about. Placement only: compute
 * refuses (the tests read the optimized graph, they do not run it).
 */
#include <stdio.h>
#include <string.h>

#include "onyx_abi.h"

#define EXPORT __attribute__((visibility("default")))
#define NB_TYPES                                                                                   \
  (ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT32) | ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT16) |                       \
   ONYX_DTYPE_BIT(ONYX_DTYPE_BFLOAT16))

static onyx_status nb_open(const onyx_host_table *host, const onyx_option *options,
                           size_t option_count, void **out_state, char *err, size_t err_cap) {
  (void)host;
  (void)options;
  (void)option_count;
  (void)err;
  (void)err_cap;
  *out_state = NULL;
  return ONYX_STATUS_OK;
}

static void nb_close(void *state) { (void)state; }

#ifndef NB_NO_FUSED
static const onyx_attr *find_attr(const onyx_node_info *node, const char *name) {
  for (size_t a = 0; a < node->attr_count; ++a)
    if (!strcmp(node->attrs[a].name, name)) return &node->attrs[a];
  return NULL;
}

static bool int_attr_is(const onyx_node_info *node, const char *name, bool any, int64_t want) {
  const onyx_attr *a = find_attr(node, name);
  return a && a->type == ONYX_ATTR_INT && (any ? a->i > 0 : a->i == want);
}

/* The fused nodes' attributes: the product's, and the norm's epsilon. */
static bool nb_fused_ok(const onyx_node_info *node, char *reason, size_t cap) {
  const char *missing = !int_attr_is(node, "K", true, 0)            ? "K"
                        : !int_attr_is(node, "N", true, 0)          ? "N"
                        : !int_attr_is(node, "block_size", true, 0) ? "block_size"
                        : !int_attr_is(node, "bits", false, 4)      ? "bits = 4"
                                                                    : NULL;
  const onyx_attr *eps = find_attr(node, "epsilon");
  if (!missing && !strcmp(node->op_type, "RMSNormMatMulNBits") &&
      (eps == NULL || eps->type != ONYX_ATTR_FLOAT))
    missing = "epsilon";
  if (missing && reason) snprintf(reason, cap, "nbits: %s expected", missing);
  return missing == NULL;
}
#endif

static onyx_status nb_compute(void *state, onyx_compute_ctx *ctx, const onyx_tensor *const *in,
                              size_t n_in) {
  (void)state;
  (void)in;
  (void)n_in;
  ctx->set_error(ctx, "nbits: a placement-only provider");
  return ONYX_STATUS_UNSUPPORTED;
}

#define NB_KERNEL(dom, op, check)                                                                  \
  {                                                                                                \
    .struct_size = sizeof(onyx_kernel_table), .version = ONYX_ABI_VERSION, .domain = dom,          \
    .op_type = op, .since_opset = 1, .type_input = 0, .type_mask = NB_TYPES, .supports = check,    \
    .compute = nb_compute                                                                          \
  }

static const onyx_kernel_table nb_matmul_nbits = NB_KERNEL("com.microsoft", "MatMulNBits", NULL);
static const onyx_kernel_table nb_skip_norm =
    NB_KERNEL("com.microsoft", "SkipSimplifiedLayerNormalization", NULL);
static const onyx_kernel_table nb_norm = NB_KERNEL("", "SimplifiedLayerNormalization", NULL);
static const onyx_kernel_table nb_silu = NB_KERNEL("ai.onyx", "SiluMul", NULL);
static const onyx_kernel_table nb_mul = NB_KERNEL("", "Mul", NULL);
#ifndef NB_NO_FUSED
static const onyx_kernel_table nb_norm_nbits =
    NB_KERNEL("ai.onyx", "RMSNormMatMulNBits", nb_fused_ok);
static const onyx_kernel_table nb_silu_nbits =
    NB_KERNEL("ai.onyx", "SiluMulMatMulNBits", nb_fused_ok);
#endif

static const onyx_kernel_table *const kernels[] = {
    &nb_matmul_nbits, &nb_skip_norm,  &nb_norm, &nb_silu, &nb_mul,
#ifndef NB_NO_FUSED
    &nb_norm_nbits,   &nb_silu_nbits,
#endif
};

static const onyx_provider_table table = {
    .struct_size = sizeof(onyx_provider_table),
    .abi_version = ONYX_ABI_VERSION,
#ifdef NB_NO_FUSED
    .name = "nbits_unfused",
#else
    .name = "nbits",
#endif
    .device = ONYX_DEVICE_HOST,
    .open = nb_open,
    .close = nb_close,
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
