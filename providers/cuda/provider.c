/*
 * The CUDA provider: entry points, version negotiation, options, bring-up, the v2
 * provider table and the v3 factory (one device per visible GPU).
 *
 * The library exports two symbols, as the CPU provider does: onyx_provider_factory_entry
 * (ABI v3, which a v3 core uses: one instance per GPU, tiers cuda:0, cuda:1, ...) and
 * onyx_provider_entry (the v2 table, option.device's GPU only, for older cores and for
 * tests that drive the provider table directly). Both open the same per-device state
 * (onyx__cuda_provider) and register the same kernel tables.
 *
 * Opening never fails for want of a device: v2's open records why the device is
 * unusable and probe() declines with that one line; v3's device_count and open decline
 * (DEVICE_UNAVAILABLE) with it. The core then places the nodes on the CPU provider (or
 * refuses, in strict mode) with a message that says what is missing. Opening fails
 * only for a malformed option.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_impl.h"
#include "pc_factory.h"

extern const onyx_kernel_table onyx__cuda_k_silu_mul;        /* cuda_silu_mul.c */
extern const onyx_kernel_table onyx__cuda_k_rms_norm_matmul; /* cuda_norm_matmul.c */
extern const onyx_kernel_table onyx__cuda_k_silu_mul_matmul; /* cuda_silu_matmul.c */
/* cuda_nbits_fused.c */
extern const onyx_kernel_table onyx__cuda_k_rms_norm_matmul_nbits;
extern const onyx_kernel_table onyx__cuda_k_silu_mul_matmul_nbits;

/* The attention kernels (GroupQueryAttention, Attention) live in attention/, kept by
 * their own owner. When that folder provides attention_kernels.h it defines
 * ONYX_CUDA_ATTENTION_KERNELS as a comma-separated list of kernel table pointers,
 * which the list below takes in. */
#if defined(__has_include)
#if __has_include("attention/attention_kernels.h")
#include "attention/attention_kernels.h"
#endif
#endif

/* Every kernel this provider offers; the opset ranges of one op do not overlap. */
static const onyx_kernel_table *const cuda_kernels[] = {
    &onyx__cuda_k_add,
    &onyx__cuda_k_sub,
    &onyx__cuda_k_mul,
    &onyx__cuda_k_div,
    &onyx__cuda_k_pow,
    &onyx__cuda_k_equal,
    &onyx__cuda_k_where,
    &onyx__cuda_k_neg,
    &onyx__cuda_k_sqrt,
    &onyx__cuda_k_sigmoid,
    &onyx__cuda_k_tanh,
    &onyx__cuda_k_relu,
    &onyx__cuda_k_erf,
    &onyx__cuda_k_matmul,
    &onyx__cuda_k_gemm,
    &onyx__cuda_k_fused_matmul,
    &onyx__cuda_k_softmax_1,
    &onyx__cuda_k_softmax_13,
    &onyx__cuda_k_layernorm,
    &onyx__cuda_k_simplified_layernorm,
    &onyx__cuda_k_rmsnorm,
    &onyx__cuda_k_skip_simplified_layernorm,
    &onyx__cuda_k_rotary,
    &onyx__cuda_k_ms_rotary,
    &onyx__cuda_k_reduce_sum_1,
    &onyx__cuda_k_reduce_sum_13,
    &onyx__cuda_k_reshape,
    &onyx__cuda_k_squeeze_1,
    &onyx__cuda_k_squeeze_13,
    &onyx__cuda_k_unsqueeze_1,
    &onyx__cuda_k_unsqueeze_13,
    &onyx__cuda_k_identity,
    &onyx__cuda_k_transpose,
    &onyx__cuda_k_concat,
    &onyx__cuda_k_slice_1,
    &onyx__cuda_k_slice_10,
    &onyx__cuda_k_expand,
    &onyx__cuda_k_gather,
    &onyx__cuda_k_cast,
    &onyx__cuda_k_castlike,
    &onyx__cuda_k_matmul_nbits,
    &onyx__cuda_k_gather_block_quantized,
    &onyx__cuda_k_silu_mul,              /* ai.onyx, made by the gate_up_silu optimization */
    &onyx__cuda_k_rms_norm_matmul,       /* ai.onyx, made by the norm_matmul optimization */
    &onyx__cuda_k_silu_mul_matmul,       /* ai.onyx, made by the silu_matmul optimization */
    &onyx__cuda_k_rms_norm_matmul_nbits, /* ai.onyx, norm_matmul into MatMulNBits */
    &onyx__cuda_k_silu_mul_matmul_nbits, /* ai.onyx, silu_matmul into MatMulNBits */
#ifdef ONYX_CUDA_ATTENTION_KERNELS
    ONYX_CUDA_ATTENTION_KERNELS,
#endif
};

bool onyx__cuda_pdl = true;

cudaError_t onyx__cuda_use_device(const onyx__cuda_provider *p) {
  if (p == NULL) return cudaSuccess;
  int current = -1;
  cudaError_t e = cudaGetDevice(&current);
  if (e == cudaSuccess && current == p->device) return cudaSuccess;
  return cudaSetDevice(p->device);
}

static void cuda_log(const onyx__cuda_provider *p, uint32_t level, const char *msg) {
  if (p->host != NULL && p->host->log != NULL) p->host->log(p->host->host_data, level, msg);
}

/* Parses a non-negative integer option; false on anything else. */
static bool parse_uint(const char *text, long max, long *out) {
  if (text == NULL || *text == '\0' || text[0] == '-') return false;
  char *end = NULL;
  long v = strtol(text, &end, 10);
  if (*end != '\0' || v < 0 || v > max) return false;
  *out = v;
  return true;
}

static bool parse_flag(const char *text, bool *out) {
  if (text == NULL) return false;
  if (!strcmp(text, "true") || !strcmp(text, "1") || !strcmp(text, "yes") || !strcmp(text, "on")) {
    *out = true;
    return true;
  }
  if (!strcmp(text, "false") || !strcmp(text, "0") || !strcmp(text, "no") || !strcmp(text, "off")) {
    *out = false;
    return true;
  }
  return false;
}

/* Brings the device up: stream, cuBLASLt handle, properties. On failure records why
 * in p->why and leaves p->ready false (probe reports it). */
static void cuda_bring_up(onyx__cuda_provider *p) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    snprintf(p->why, sizeof p->why, "no CUDA device (cudaGetDeviceCount: %s)",
             e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    (void)cudaGetLastError(); /* clear the sticky-free error for later callers */
    return;
  }
  if (p->device >= count) {
    snprintf(p->why, sizeof p->why,
             "option device = %d but this machine has %d CUDA device%s (ordinals 0..%d)", p->device,
             count, count == 1 ? "" : "s", count - 1);
    return;
  }
  struct cudaDeviceProp prop;
  if ((e = cudaSetDevice(p->device)) != cudaSuccess ||
      (e = cudaGetDeviceProperties(&prop, p->device)) != cudaSuccess) {
    snprintf(p->why, sizeof p->why, "CUDA device %d cannot be used (%s)", p->device,
             cudaGetErrorString(e));
    (void)cudaGetLastError();
    return;
  }
  p->sm_count = prop.multiProcessorCount;
  p->cc_major = prop.major;
  p->cc_minor = prop.minor;
  snprintf(p->device_name, sizeof p->device_name, "%s", prop.name);
  size_t free_bytes = 0, total_bytes = 0;
  if ((e = cudaMemGetInfo(&free_bytes, &total_bytes)) != cudaSuccess) {
    snprintf(p->why, sizeof p->why, "CUDA device %d: cudaMemGetInfo failed (%s)", p->device,
             cudaGetErrorString(e));
    return;
  }
  p->total_bytes = total_bytes;
  if ((e = cudaStreamCreateWithFlags(&p->stream, cudaStreamNonBlocking)) != cudaSuccess) {
    snprintf(p->why, sizeof p->why, "CUDA device %d: cannot create a stream (%s)", p->device,
             cudaGetErrorString(e));
    p->stream = NULL;
    return;
  }
  onyx__cuda_pool_init(p);
  cublasStatus_t bs = cublasLtCreate(&p->lt);
  if (bs != CUBLAS_STATUS_SUCCESS) {
    snprintf(p->why, sizeof p->why, "CUDA device %d: cublasLtCreate failed (%s)", p->device,
             cublasLtGetStatusString(bs));
    p->lt = NULL;
    return;
  }
  p->ready = true;
  double warm_ms = onyx__cuda_matmul_warm_up(p);
  char line[320];
  snprintf(line, sizeof line,
           "cuda: device %d is %s (sm_%d%d, %d SMs, %.1f GiB, %s allocation); cuBLASLt "
           "start-up %.1f ms%s",
           p->device, p->device_name, p->cc_major, p->cc_minor, p->sm_count,
           (double)total_bytes / (1024.0 * 1024.0 * 1024.0),
           p->pool ? "stream-ordered" : "synchronous", warm_ms < 0 ? 0.0 : warm_ms,
           warm_ms < 0 ? " (warm-up failed: the first product pays it)" : "");
  cuda_log(p, ONYX_LOG_INFO, line);
}

/* What the options of a [provider.cuda] section say (cuda_options_parse). */
typedef struct cuda_options {
  long device; /* option.device; -1 when not given */
  bool tf32, gemv, pdl;
} cuda_options;

/*
 * Options (the [provider.cuda] section of plugins.ini, as option.KEY = VALUE):
 *   device = N        open CUDA device N only (default: every visible GPU under ABI v3,
 *                     device 0 under v2); the core's `devices = 1, 0` picks among them
 *   allow_tf32 = B    float32 MatMul/Gemm on TF32 tensor cores (default false: the
 *                     results then match the CPU provider to float32 tolerance)
 *   gemv = B          16-bit MatMuls of at most 4 rows (decode) on the provider's GEMV
 *                     kernel (default true; false: cuBLASLt for every product)
 *   pdl = B           elementwise, norm and GEMV kernels launched as programmatic
 *                     dependents of the kernel before them (default true)
 * Unknown keys are logged at INFO (when `host` is given) and ignored, so one
 * plugins.ini can serve several versions of this provider.
 */
static onyx_status cuda_options_parse(const onyx_host_table *host, const onyx_option *options,
                                      size_t option_count, cuda_options *o, char *err,
                                      size_t err_cap) {
  *o = (cuda_options){.device = -1, .tf32 = false, .gemv = true, .pdl = true};
  for (size_t i = 0; i < option_count; ++i) {
    const char *key = options[i].key ? options[i].key : "";
    const char *value = options[i].value ? options[i].value : "";
    if (!strcmp(key, "device")) {
      if (!parse_uint(value, 1023, &o->device))
        return onyx__cuda_fail(err, err_cap, ONYX_STATUS_INVALID_CONFIG,
                               "cuda: option device = '%s' is not a device ordinal (0, 1, ...)",
                               value);
    } else if (!strcmp(key, "allow_tf32")) {
      if (!parse_flag(value, &o->tf32))
        return onyx__cuda_fail(err, err_cap, ONYX_STATUS_INVALID_CONFIG,
                               "cuda: option allow_tf32 = '%s' is not true or false", value);
    } else if (!strcmp(key, "pdl")) {
      if (!parse_flag(value, &o->pdl))
        return onyx__cuda_fail(err, err_cap, ONYX_STATUS_INVALID_CONFIG,
                               "cuda: option pdl = '%s' is not true or false", value);
    } else if (!strcmp(key, "gemv")) {
      if (!parse_flag(value, &o->gemv))
        return onyx__cuda_fail(err, err_cap, ONYX_STATUS_INVALID_CONFIG,
                               "cuda: option gemv = '%s' is not true or false", value);
    } else if (host != NULL && host->log != NULL) {
      char line[256];
      snprintf(line, sizeof line, "cuda: ignoring unknown option '%s'", key);
      host->log(host->host_data, ONYX_LOG_INFO, line);
    }
  }
  return ONYX_STATUS_OK;
}

/* A new instance on CUDA device `ordinal`, brought up (or with `why` saying why not).
 * Fails only when memory runs out. */
static onyx_status cuda_instance_new(const onyx_host_table *host, int ordinal,
                                     const cuda_options *o, onyx__cuda_provider **out, char *err,
                                     size_t err_cap) {
  onyx__cuda_provider *p = calloc(1, sizeof *p);
  if (p == NULL)
    return onyx__cuda_fail(err, err_cap, ONYX_STATUS_OUT_OF_MEMORY,
                           "cuda: cannot allocate provider state");
  p->host = host;
  p->device = ordinal;
  p->allow_tf32 = o->tf32;
  p->gemv = o->gemv;
  onyx__cuda_pdl = o->pdl;
  cuda_bring_up(p);
  *out = p;
  return ONYX_STATUS_OK;
}

/* ABI v2 open: one instance, on option.device (default 0). */
static onyx_status cuda_open(const onyx_host_table *host, const onyx_option *options,
                             size_t option_count, void **out_state, char *err, size_t err_cap) {
  cuda_options o;
  onyx_status st = cuda_options_parse(host, options, option_count, &o, err, err_cap);
  if (st != ONYX_STATUS_OK) return st;
  onyx__cuda_provider *p = NULL;
  st = cuda_instance_new(host, o.device < 0 ? 0 : (int)o.device, &o, &p, err, err_cap);
  if (st == ONYX_STATUS_OK) *out_state = p;
  return st;
}

static void cuda_close(void *state) {
  onyx__cuda_provider *p = state;
  if (p == NULL) return;
  /* Its device current: another instance's may be (a half brought-up one has a stream). */
  if (p->ready || p->stream != NULL) (void)onyx__cuda_use_device(p);
  if (p->stream != NULL) {
    /* Stream-ordered frees complete here, and the pool (release threshold 0) hands
     * their memory back to the device at this synchronisation. */
    (void)cudaStreamSynchronize(p->stream);
    if (p->pool != NULL) (void)cudaMemPoolTrimTo(p->pool, 0);
    (void)cudaStreamDestroy(p->stream);
  }
  if (p->lt != NULL) (void)cublasLtDestroy(p->lt);
  free(p);
}

static bool cuda_probe(void *state, char *why, size_t why_cap) {
  const onyx__cuda_provider *p = state;
  if (p != NULL && p->ready) return true;
  if (why != NULL && why_cap > 0)
    snprintf(why, why_cap, "%s", p != NULL ? p->why : "cuda: provider not opened");
  return false;
}

static const onyx_provider_table cuda_provider_table = {
    .struct_size = sizeof(onyx_provider_table),
    .abi_version = ONYX_ABI_VERSION,
    .name = "cuda",
    .device = ONYX_DEVICE_CUDA,
    .open = cuda_open,
    .close = cuda_close,
    .probe = cuda_probe,
    .kernels = cuda_kernels,
    .kernel_count = sizeof cuda_kernels / sizeof cuda_kernels[0],
    .device_alloc = onyx__cuda_device_alloc,
    .device_free = onyx__cuda_device_free,
    .copy = onyx__cuda_copy,
    .sync = onyx__cuda_sync,
    .vmm = &onyx__cuda_vmm_table,
    .memory_capacity = onyx__cuda_memory_capacity,
    .stream = onyx__cuda_stream,
    .graphs = &onyx__cuda_graph_table,
};

/* Negotiation: this provider speaks the ABI of its header (see providers/cpu/provider.c). */
onyx_status onyx_provider_entry(uint32_t core_max_abi, uint32_t *out_abi,
                                const onyx_provider_table **out_table) {
  return onyx__pc_table_negotiate(&cuda_provider_table, core_max_abi, out_abi, out_table);
}

/* ------------------------------------------------------------------ ABI v3 */

/* option.device as device_count last saw it (-1: every visible GPU), so device_info,
 * which gets no options, maps index 0 to that ordinal. open recomputes it from its
 * own options. */
static _Atomic int cuda_only_device = -1;

/* Visible GPUs; 0 (the last error cleared) when there are none or the runtime fails. */
static int cuda_visible_count(cudaError_t *out_e) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    count = 0;
  }
  if (out_e != NULL) *out_e = e;
  return count;
}

/* Every visible GPU, or the one option.device names. No GPU (or option.device beyond
 * them) declines with the reason, as the v2 probe did, so the core places elsewhere. */
static onyx_status cuda_device_count(const onyx_option *options, size_t option_count,
                                     uint32_t *out_count, onyx_sink *err) {
  char msg[512] = "";
  cuda_options o;
  onyx_status st = cuda_options_parse(NULL, options, option_count, &o, msg, sizeof msg);
  if (st != ONYX_STATUS_OK) {
    err->set_error(err, "%s", msg);
    return st;
  }
  cudaError_t e = cudaSuccess;
  int count = cuda_visible_count(&e);
  if (count == 0) {
    err->set_error(err, "no CUDA device (cudaGetDeviceCount: %s)",
                   e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return ONYX_STATUS_DEVICE_UNAVAILABLE;
  }
  if (o.device >= count) {
    err->set_error(err,
                   "option device = %ld but this machine has %d CUDA device%s (ordinals 0..%d)",
                   o.device, count, count == 1 ? "" : "s", count - 1);
    return ONYX_STATUS_DEVICE_UNAVAILABLE;
  }
  cuda_only_device = (int)o.device;
  *out_count = o.device >= 0 ? 1u : (uint32_t)count;
  return ONYX_STATUS_OK;
}

/* Whether `ordinal` can copy to and from another visible GPU directly. */
static bool cuda_has_peer(int ordinal, int count) {
  for (int j = 0; j < count; ++j) {
    int can = 0;
    if (j == ordinal) continue;
    if (cudaDeviceCanAccessPeer(&can, ordinal, j) != cudaSuccess) {
      (void)cudaGetLastError();
      continue;
    }
    if (can) return true;
  }
  return false;
}

static onyx_status cuda_device_info(uint32_t index, onyx_device_info *info, onyx_sink *err) {
  int count = cuda_visible_count(NULL);
  int only = cuda_only_device;
  int ordinal = only >= 0 ? (index == 0 ? only : -1) : (int)index;
  if (ordinal < 0 || ordinal >= count || index > INT32_MAX) {
    err->set_error(err, "cuda: no device %u (%d CUDA device%s visible%s)", index, count,
                   count == 1 ? "" : "s", only >= 0 ? ", option device opens one" : "");
    return ONYX_STATUS_NOT_FOUND;
  }
  info->kind = ONYX_DEVICE_CUDA;
  info->ordinal = ordinal;
  struct cudaDeviceProp prop;
  cudaError_t e = cudaGetDeviceProperties(&prop, ordinal);
  if (e != cudaSuccess) {
    /* Described as far as it can be; open then declines with the reason. */
    (void)cudaGetLastError();
    snprintf(info->name, sizeof info->name, "CUDA device %d (%s)", ordinal, cudaGetErrorString(e));
    return ONYX_STATUS_OK;
  }
  snprintf(info->name, sizeof info->name, "%s", prop.name);
  if (ONYX_HAS_FIELD(info, onyx_device_info, memory_bytes))
    info->memory_bytes = (uint64_t)prop.totalGlobalMem;
  if (ONYX_HAS_FIELD(info, onyx_device_info, capability_minor)) {
    info->capability_major = (uint32_t)prop.major;
    info->capability_minor = (uint32_t)prop.minor;
  }
  /* VMM: the table fails cleanly (and says why) where the driver lacks cuMem*. */
  if (ONYX_HAS_FIELD(info, onyx_device_info, caps))
    info->caps = ONYX_DEVICE_CAP_GRAPHS | ONYX_DEVICE_CAP_VMM |
                 (cuda_has_peer(ordinal, count) ? ONYX_DEVICE_CAP_PEER_COPY : 0);
  return ONYX_STATUS_OK;
}

/* One instance on device `index`: option.device's GPU, else the index-th visible one.
 * A device that cannot be brought up declines (DEVICE_UNAVAILABLE) with the reason. */
static onyx_status cuda_open3(const onyx_host_table *host, uint32_t index,
                              const onyx_option *options, size_t option_count, void **out_instance,
                              onyx_sink *err) {
  char msg[512] = "";
  cuda_options o;
  onyx_status st = cuda_options_parse(host, options, option_count, &o, msg, sizeof msg);
  if (st == ONYX_STATUS_OK && ((o.device >= 0 && index != 0) || index > INT32_MAX))
    st = onyx__cuda_fail(msg, sizeof msg, ONYX_STATUS_NOT_FOUND, "cuda: no device %u%s", index,
                         o.device >= 0 ? " (option device opens one)" : "");
  onyx__cuda_provider *p = NULL;
  if (st == ONYX_STATUS_OK)
    st = cuda_instance_new(host, o.device >= 0 ? (int)o.device : (int)index, &o, &p, msg,
                           sizeof msg);
  if (st != ONYX_STATUS_OK) {
    err->set_error(err, "%s", msg[0] ? msg : "cuda: open failed");
    return st;
  }
  if (!p->ready) {
    err->set_error(err, "%s", p->why);
    cuda_close(p);
    return ONYX_STATUS_DEVICE_UNAVAILABLE;
  }
  *out_instance = p;
  return ONYX_STATUS_OK;
}

/* The kernels that are v3 definitions too (their planning reasons reach the user):
 * registered in place of their tables. */
#ifdef ONYX_CUDA_ATTENTION_DEFS
static const onyx_kernel_def *const cuda_defs[] = {ONYX_CUDA_ATTENTION_DEFS};
#define CUDA_DEF_COUNT (sizeof cuda_defs / sizeof cuda_defs[0])
#else
static const onyx_kernel_def *const *const cuda_defs = NULL;
#define CUDA_DEF_COUNT ((size_t)0)
#endif

/* Every kernel on every GPU, as its v2 table or its v3 definition. The Hopper attention
 * route needs no registration of its own: the attention kernels pick it per launch by
 * the current device (onyx__cuda_attn_hopper_available) and fall back on other GPUs. */
static onyx_status cuda_kernels3(void *instance, onyx_kernel_registry *reg, onyx_sink *err) {
  const onyx__cuda_provider *p = instance;
  char who[32];
  snprintf(who, sizeof who, "cuda: device %d", p->device);
  return onyx__pc_add_kernels(reg, cuda_kernels, sizeof cuda_kernels / sizeof cuda_kernels[0],
                              cuda_defs, CUDA_DEF_COUNT, who, err);
}

/* The device calls take a sink; the v2 callbacks log the CUDA error text, so the
 * sink names the call and the device. */
static onyx_status cuda_alloc3(void *instance, uint64_t bytes, void **out_ptr, onyx_sink *err) {
  onyx_status st = onyx__cuda_device_alloc(instance, bytes, out_ptr);
  if (st != ONYX_STATUS_OK && instance != NULL)
    err->set_error(err, "cuda: device %d: allocation of %llu bytes failed",
                   ((const onyx__cuda_provider *)instance)->device, (unsigned long long)bytes);
  return st;
}

static onyx_status cuda_copy3(void *instance, onyx_tensor *dst, const onyx_tensor *src,
                              onyx_sink *err) {
  onyx_status st = onyx__cuda_copy(instance, dst, src);
  if (st != ONYX_STATUS_OK && instance != NULL && dst != NULL && src != NULL)
    err->set_error(err, "cuda: device %d: copy from %s %d to %s %d failed",
                   ((const onyx__cuda_provider *)instance)->device,
                   src->device == ONYX_DEVICE_CUDA ? "cuda" : "host", (int)src->device_id,
                   dst->device == ONYX_DEVICE_CUDA ? "cuda" : "host", (int)dst->device_id);
  return st;
}

static onyx_status cuda_sync3(void *instance, onyx_sink *err) {
  onyx_status st = onyx__cuda_sync(instance);
  if (st != ONYX_STATUS_OK && instance != NULL)
    err->set_error(err, "cuda: device %d: stream synchronisation failed",
                   ((const onyx__cuda_provider *)instance)->device);
  return st;
}

static onyx_status cuda_capacity3(void *instance, uint64_t *out_bytes, onyx_sink *err) {
  (void)err;
  return onyx__cuda_memory_capacity(instance, out_bytes);
}

/* ctx->stream. The core asks for it on the thread that runs the node, right before
 * compute: the instance's GPU is made current here too, so a kernel that launches before
 * allocating an output (or allocates through ctx->alloc_output directly, as the attention
 * kernels do) launches on its own device when a session spans two GPUs. */
static void *cuda_stream3(void *instance) {
  const onyx__cuda_provider *p = instance;
  if (p != NULL && p->ready) (void)onyx__cuda_use_device(p);
  return onyx__cuda_stream(instance);
}

/* The VMM and graph tables take the instance as their state, as in v2. */
static const void *cuda_get_extension(void *instance, const char *name) {
  (void)instance;
  if (name == NULL) return NULL;
  if (!strcmp(name, ONYX_EXT_VMM)) return &onyx__cuda_vmm_table;
  if (!strcmp(name, ONYX_EXT_GRAPHS)) return &onyx__cuda_graph_table;
  return NULL;
}

static const onyx_instance_table cuda_instance_table = {
    .struct_size = sizeof(onyx_instance_table),
    .version = ONYX_ABI_V3,
    .close = cuda_close,
    .kernels = cuda_kernels3,
    .device_alloc = cuda_alloc3,
    .device_free = onyx__cuda_device_free,
    .copy = cuda_copy3,
    .sync = cuda_sync3,
    .stream = cuda_stream3,
    .memory_capacity = cuda_capacity3,
    .get_extension = cuda_get_extension,
};

static const onyx_provider_factory cuda_factory = {
    .struct_size = sizeof(onyx_provider_factory),
    .abi_version = ONYX_ABI_V3,
    .name = "cuda",
    .device_count = cuda_device_count,
    .device_info = cuda_device_info,
    .open = cuda_open3,
    .instance = &cuda_instance_table,
};

/* Exported (declared in pc_factory.h, which also pins its type). */
onyx_status onyx_provider_factory_entry(uint32_t core_max_abi, uint32_t *out_abi,
                                        const onyx_provider_factory **out_factory) {
  return onyx__pc_factory_negotiate(&cuda_factory, core_max_abi, out_abi, out_factory);
}
