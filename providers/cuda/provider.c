/*
 * The CUDA provider: entry point, version negotiation, options, probe and the
 * provider table.
 *
 * open() never fails for want of a device: it records why the device is unusable
 * and probe() declines with that one line, so the core can place the nodes on the
 * CPU provider (or refuse, in strict mode) with a message that says what is missing.
 * open() fails only for a malformed option.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_impl.h"

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

/*
 * Options (the [provider.cuda] section of plugins.ini, as option.KEY = VALUE):
 *   device = N        CUDA ordinal (default 0)
 *   allow_tf32 = B    float32 MatMul/Gemm on TF32 tensor cores (default false: the
 *                     results then match the CPU provider to float32 tolerance)
 *   gemv = B          16-bit MatMuls of at most 4 rows (decode) on the provider's GEMV
 *                     kernel (default true; false: cuBLASLt for every product)
 *   pdl = B           elementwise, norm and GEMV kernels launched as programmatic
 *                     dependents of the kernel before them (default true)
 * Unknown keys are logged at INFO and ignored, so one plugins.ini can serve several
 * versions of this provider.
 */
static onyx_status cuda_open(const onyx_host_table *host, const onyx_option *options,
                             size_t option_count, void **out_state, char *err, size_t err_cap) {
  long device = 0;
  bool tf32 = false, gemv = true, pdl = true;
  for (size_t i = 0; i < option_count; ++i) {
    const char *key = options[i].key ? options[i].key : "";
    const char *value = options[i].value ? options[i].value : "";
    if (!strcmp(key, "device")) {
      if (!parse_uint(value, 1023, &device))
        return onyx__cuda_fail(err, err_cap, ONYX_STATUS_INVALID_CONFIG,
                               "cuda: option device = '%s' is not a device ordinal (0, 1, ...)",
                               value);
    } else if (!strcmp(key, "allow_tf32")) {
      if (!parse_flag(value, &tf32))
        return onyx__cuda_fail(err, err_cap, ONYX_STATUS_INVALID_CONFIG,
                               "cuda: option allow_tf32 = '%s' is not true or false", value);
    } else if (!strcmp(key, "pdl")) {
      if (!parse_flag(value, &pdl))
        return onyx__cuda_fail(err, err_cap, ONYX_STATUS_INVALID_CONFIG,
                               "cuda: option pdl = '%s' is not true or false", value);
    } else if (!strcmp(key, "gemv")) {
      if (!parse_flag(value, &gemv))
        return onyx__cuda_fail(err, err_cap, ONYX_STATUS_INVALID_CONFIG,
                               "cuda: option gemv = '%s' is not true or false", value);
    } else if (host != NULL && host->log != NULL) {
      char line[256];
      snprintf(line, sizeof line, "cuda: ignoring unknown option '%s'", key);
      host->log(host->host_data, ONYX_LOG_INFO, line);
    }
  }
  onyx__cuda_provider *p = calloc(1, sizeof *p);
  if (p == NULL)
    return onyx__cuda_fail(err, err_cap, ONYX_STATUS_OUT_OF_MEMORY,
                           "cuda: cannot allocate provider state");
  p->host = host;
  p->device = (int)device;
  p->allow_tf32 = tf32;
  p->gemv = gemv;
  onyx__cuda_pdl = pdl;
  cuda_bring_up(p);
  *out_state = p;
  return ONYX_STATUS_OK;
}

static void cuda_close(void *state) {
  onyx__cuda_provider *p = state;
  if (p == NULL) return;
  if (p->ready) (void)onyx__cuda_use_device(p);
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
__attribute__((visibility("default"))) onyx_status
onyx_provider_entry(uint32_t core_max_abi, uint32_t *out_abi,
                    const onyx_provider_table **out_table);

__attribute__((visibility("default"))) onyx_status
onyx_provider_entry(uint32_t core_max_abi, uint32_t *out_abi,
                    const onyx_provider_table **out_table) {
  if (out_abi == NULL || out_table == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  *out_abi = ONYX_ABI_VERSION;
  if (core_max_abi < ONYX_ABI_VERSION) return ONYX_STATUS_ABI_MISMATCH;
  *out_table = &cuda_provider_table;
  return ONYX_STATUS_OK;
}

_Static_assert(_Generic(&onyx_provider_entry, onyx_provider_entry_fn : 1, default : 0),
               "onyx_provider_entry must have the onyx_provider_entry_fn type");
