/*
 * The CPU reference provider: entry points, version negotiation, the v3 factory (one
 * host device) and the v2 provider table. This is the file a third party copies first
 * when writing a provider.
 *
 * The library exports two symbols: onyx_provider_factory_entry (ABI v3, which a v3
 * core uses) and onyx_provider_entry (the v2 table, for older cores and for tests that
 * drive the kernels directly). Its kernels keep the v2 table shape and are registered
 * as they are (onyx_kernel_registry.add_table), except the attention kernels that are
 * also v3 definitions (attention/attention_kernels.h). Everything else is hidden
 * (-fvisibility=hidden plus a version script), so two providers loaded side by side
 * with RTLD_LOCAL can never bind to each other's helpers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention/attention_kernels.h"
#include "cpu_impl.h"
#include "cpu_nbits.h"
#include "pc_factory.h"

extern const onyx_kernel_table onyx__cpu_k_silu_mul;        /* cpu_silu_mul.c */
extern const onyx_kernel_table onyx__cpu_k_rms_norm_matmul; /* cpu_norm_matmul.c */
extern const onyx_kernel_table onyx__cpu_k_silu_mul_matmul; /* cpu_silu_matmul.c */

/* Every kernel this provider offers. Placement walks the list in order, so when two
 * tables could match a node the first wins; the opset ranges here do not overlap. */
static const onyx_kernel_table *const cpu_kernels[] = {
    &onyx__cpu_k_add_1,
    &onyx__cpu_k_add_7,
    &onyx__cpu_k_sub_1,
    &onyx__cpu_k_sub_7,
    &onyx__cpu_k_mul_1,
    &onyx__cpu_k_mul_7,
    &onyx__cpu_k_div_1,
    &onyx__cpu_k_div_7,
    &onyx__cpu_k_relu,
    &onyx__cpu_k_sigmoid,
    &onyx__cpu_k_matmul,
    &onyx__cpu_k_gemm,
    &onyx__cpu_k_softmax_1,
    &onyx__cpu_k_softmax_13,
    &onyx__cpu_k_cast,
    &onyx__cpu_k_castlike,
    &onyx__cpu_k_reshape_1,
    &onyx__cpu_k_reshape_5,
    &onyx__cpu_k_transpose,
    &onyx__cpu_k_concat,
    &onyx__cpu_k_gather,
    &onyx__cpu_k_unsqueeze_1,
    &onyx__cpu_k_unsqueeze_13,
    &onyx__cpu_k_squeeze_1,
    &onyx__cpu_k_squeeze_13,
    &onyx__cpu_k_shape_1,
    &onyx__cpu_k_shape_15,
    &onyx__cpu_k_identity,
    &onyx__cpu_k_constant,
    &onyx__cpu_k_constant_of_shape,
    &onyx__cpu_k_range,
    &onyx__cpu_k_pow,
    &onyx__cpu_k_sqrt,
    &onyx__cpu_k_neg,
    &onyx__cpu_k_exp,
    &onyx__cpu_k_log,
    &onyx__cpu_k_abs,
    &onyx__cpu_k_reciprocal,
    &onyx__cpu_k_tanh,
    &onyx__cpu_k_erf,
    &onyx__cpu_k_sin,
    &onyx__cpu_k_cos,
    &onyx__cpu_k_gelu,
    &onyx__cpu_k_ms_gelu,
    &onyx__cpu_k_ms_fast_gelu,
    &onyx__cpu_k_equal,
    &onyx__cpu_k_greater,
    &onyx__cpu_k_less,
    &onyx__cpu_k_greater_equal,
    &onyx__cpu_k_less_equal,
    &onyx__cpu_k_and,
    &onyx__cpu_k_or,
    &onyx__cpu_k_xor,
    &onyx__cpu_k_not,
    &onyx__cpu_k_where,
    &onyx__cpu_k_max,
    &onyx__cpu_k_min,
    &onyx__cpu_k_sum,
    &onyx__cpu_k_size,
    &onyx__cpu_k_flatten,
    &onyx__cpu_k_mod,
    &onyx__cpu_k_clip_1,
    &onyx__cpu_k_clip_11,
    &onyx__cpu_k_reduce_sum_1,
    &onyx__cpu_k_reduce_sum_13,
    &onyx__cpu_k_reduce_mean_1,
    &onyx__cpu_k_reduce_mean_18,
    &onyx__cpu_k_reduce_max_1,
    &onyx__cpu_k_reduce_max_18,
    &onyx__cpu_k_layer_norm,
    &onyx__cpu_k_rms_norm,
    &onyx__cpu_k_simplified_layer_norm,
    &onyx__cpu_k_skip_layer_norm,
    &onyx__cpu_k_skip_simplified_layer_norm,
    &onyx__cpu_k_slice_1,
    &onyx__cpu_k_slice_10,
    &onyx__cpu_k_split_1,
    &onyx__cpu_k_split_13,
    &onyx__cpu_k_expand,
    &onyx__cpu_k_trilu,
    /* com.microsoft MatMulNBits and GatherBlockQuantized (cpu_nbits.h) */
    &onyx__cpu_k_matmul_nbits,
    &onyx__cpu_k_gather_block_quantized,
    /* attention/: ONNX Attention and RotaryEmbedding, com.microsoft
     * GroupQueryAttention and RotaryEmbedding */
    &onyx_cpu_attention_kernel,
    &onyx_cpu_rotary_kernel,
    &onyx_cpu_gqa_kernel,
    &onyx_cpu_ms_rotary_kernel,
    /* ai.onyx SiluMul (cpu_silu_mul.c), made by the gate_up_silu optimization */
    &onyx__cpu_k_silu_mul,
    /* ai.onyx RMSNormMatMul (cpu_norm_matmul.c), made by the norm_matmul optimization */
    &onyx__cpu_k_rms_norm_matmul,
    /* ai.onyx SiluMulMatMul (cpu_silu_matmul.c), made by the silu_matmul optimization */
    &onyx__cpu_k_silu_mul_matmul,
};

/* Parses a thread count; false on anything but a plain non-negative integer. */
static bool cpu_parse_threads(const char *text, uint32_t *out) {
  if (text == NULL || *text == '\0') return false;
  char *end = NULL;
  unsigned long v = strtoul(text, &end, 10);
  if (*end != '\0' || text[0] == '-' || v > 4096) return false;
  *out = (uint32_t)v;
  return true;
}

/*
 * Options (the [cpu] section of plugins.ini):
 *   threads = N   1 runs every kernel on the calling thread; 0 (default) or more
 *                 uses the core's pool through host->parallel_for, split into at
 *                 most N tasks (0: as many as the pool has threads).
 * Unknown keys are ignored so that one plugins.ini can serve several versions of
 * this provider; they are logged at INFO so typos can still be found.
 */
static onyx_status cpu_open(const onyx_host_table *host, const onyx_option *options,
                            size_t option_count, void **out_state, char *err, size_t err_cap) {
  uint32_t threads = 0;
  for (size_t i = 0; i < option_count; ++i) {
    const char *key = options[i].key ? options[i].key : "";
    if (strcmp(key, "threads") == 0) {
      if (!cpu_parse_threads(options[i].value, &threads))
        return onyx__cpu_fail(err, err_cap, ONYX_STATUS_INVALID_CONFIG,
                              "cpu: option threads = '%s' is not a thread count (0-4096)",
                              options[i].value ? options[i].value : "");
    } else if (host != NULL && host->log != NULL) {
      char line[256];
      snprintf(line, sizeof line, "cpu: ignoring unknown option '%s'", key);
      host->log(host->host_data, ONYX_LOG_INFO, line);
    }
  }

  onyx__cpu_provider *p = calloc(1, sizeof *p);
  if (p == NULL)
    return onyx__cpu_fail(err, err_cap, ONYX_STATUS_OUT_OF_MEMORY,
                          "cpu: cannot allocate provider state");
  p->host = host;
  /* A host table from an older core may be shorter than ours: read parallel_for
   * only when the struct is large enough to hold it. */
  bool has_pool =
      host != NULL &&
      host->struct_size >= offsetof(onyx_host_table, num_threads) + sizeof host->num_threads &&
      host->parallel_for != NULL && host->num_threads > 1;
  p->parallel = has_pool && threads != 1;
  p->num_threads = p->parallel ? host->num_threads : 1;
  if (p->parallel && threads > 1 && threads < p->num_threads) p->num_threads = threads;
  *out_state = p;
  return ONYX_STATUS_OK;
}

static void cpu_close(void *state) { free(state); }

void onyx__cpu_parallel_for(const onyx__cpu_provider *p, size_t n, void (*fn)(void *arg, size_t i),
                            void *arg) {
  if (p != NULL && p->parallel && n > 1) {
    p->host->parallel_for(p->host->host_data, n, fn, arg);
    return;
  }
  for (size_t i = 0; i < n; ++i) fn(arg, i);
}

static const onyx_provider_table cpu_provider_table = {
    .struct_size = sizeof(onyx_provider_table),
    .abi_version = ONYX_ABI_VERSION,
    .name = "cpu",
    .device = ONYX_DEVICE_HOST,
    .open = cpu_open,
    .close = cpu_close,
    .probe = NULL, /* the host is always there */
    .kernels = cpu_kernels,
    .kernel_count = sizeof cpu_kernels / sizeof cpu_kernels[0],
    /* Host memory is the core's to provide, so no device_alloc/free/copy. */
    .device_alloc = NULL,
    .device_free = NULL,
    .copy = NULL,
    .sync = NULL, /* kernels finish before compute returns */
};

/*
 * Negotiation: this provider speaks the ABI of the header it is built with
 * (ONYX_ABI_VERSION, v2: its kernels may read onyx_node_info.input_constants). An
 * older core cannot load it; we say which version we would need in *out_abi and
 * decline. A newer core offers its highest version and we answer ours, which it must
 * still speak. Both entries answer through providers/common/pc_factory.c, whose header
 * declares them exported.
 */
onyx_status onyx_provider_entry(uint32_t core_max_abi, uint32_t *out_abi,
                                const onyx_provider_table **out_table) {
  return onyx__pc_table_negotiate(&cpu_provider_table, core_max_abi, out_abi, out_table);
}

/* ------------------------------------------------------------------ ABI v3 */

static onyx_status cpu_device_count(const onyx_option *options, size_t option_count,
                                    uint32_t *out_count, onyx_sink *err) {
  (void)options;
  (void)option_count;
  (void)err;
  *out_count = 1; /* the host */
  return ONYX_STATUS_OK;
}

static onyx_status cpu_device_info(uint32_t index, onyx_device_info *info, onyx_sink *err) {
  if (index != 0) {
    err->set_error(err, "cpu: there is one host device, not %u", index);
    return ONYX_STATUS_NOT_FOUND;
  }
  snprintf(info->name, sizeof info->name, "host CPU");
  info->kind = ONYX_DEVICE_HOST;
  info->ordinal = 0;
  return ONYX_STATUS_OK;
}

static onyx_status cpu_open3(const onyx_host_table *host, uint32_t index,
                             const onyx_option *options, size_t option_count, void **out_instance,
                             onyx_sink *err) {
  (void)index;
  char msg[512] = "";
  onyx_status st = cpu_open(host, options, option_count, out_instance, msg, sizeof msg);
  if (st != ONYX_STATUS_OK) err->set_error(err, "%s", msg[0] ? msg : "cpu: open failed");
  return st;
}

/* Every kernel, as its v2 table, except GroupQueryAttention and Attention, which are
 * registered as their v3 definitions (their planning reasons reach the user); the CPU
 * kernels are the same on every host. */
static onyx_status cpu_kernels3(void *instance, onyx_kernel_registry *reg, onyx_sink *err) {
  (void)instance;
  return onyx__pc_add_kernels(reg, cpu_kernels, sizeof cpu_kernels / sizeof cpu_kernels[0],
                              onyx_cpu_attention_defs, onyx_cpu_attention_def_count, "cpu", err);
}

static const onyx_instance_table cpu_instance_table = {
    .struct_size = sizeof(onyx_instance_table),
    .version = ONYX_ABI_V3,
    .close = cpu_close,
    .kernels = cpu_kernels3,
    /* Host memory is the core's; kernels finish before compute returns. */
};

static const onyx_provider_factory cpu_factory = {
    .struct_size = sizeof(onyx_provider_factory),
    .abi_version = ONYX_ABI_V3,
    .name = "cpu",
    .device_count = cpu_device_count,
    .device_info = cpu_device_info,
    .open = cpu_open3,
    .instance = &cpu_instance_table,
};

/* Exported (declared in pc_factory.h, which also pins its type). */
onyx_status onyx_provider_factory_entry(uint32_t core_max_abi, uint32_t *out_abi,
                                        const onyx_provider_factory **out_factory) {
  return onyx__pc_factory_negotiate(&cpu_factory, core_max_abi, out_abi, out_factory);
}
