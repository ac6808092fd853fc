/*
 * Device virtual memory (the onyx_vmm_table) over the driver's cuMem* calls.
 *
 * The core builds mapped zones on these: a range of address space is reserved once
 * and physical granules are created and mapped into it as the zone grows, so a KV
 * buffer grows in place and nothing is copied. One handle per granule (the governor
 * asks for granule-sized blocks), so any granule can be returned on its own.
 *
 * The driver functions are fetched with cudaGetDriverEntryPointByVersion, so the
 * library links cudart alone (no -lcuda). They are resolved once per process.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cudaTypedefs.h>

#include "cuda_impl.h"

/* The driver ABI version whose signatures the PFN_..._v10020 typedefs describe. */
#define CUDA_VMM_DRIVER_ABI 12000

typedef struct onyx__cuda_vmm_fns {
  bool ok;
  char why[160];
  PFN_cuMemGetAllocationGranularity_v10020 granularity;
  PFN_cuMemAddressReserve_v10020 reserve;
  PFN_cuMemAddressFree_v10020 address_free;
  PFN_cuMemCreate_v10020 create;
  PFN_cuMemRelease_v10020 release;
  PFN_cuMemMap_v10020 map;
  PFN_cuMemSetAccess_v10020 set_access;
  PFN_cuMemUnmap_v10020 unmap;
  PFN_cuGetErrorString_v6000 error_string;
} onyx__cuda_vmm_fns;

static onyx__cuda_vmm_fns vmm_fns;
static pthread_once_t vmm_once = PTHREAD_ONCE_INIT;

static bool vmm_get(const char *symbol, void **out) {
  enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  cudaError_t e =
      cudaGetDriverEntryPointByVersion(symbol, out, CUDA_VMM_DRIVER_ABI, cudaEnableDefault, &q);
  if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || *out == NULL) {
    snprintf(vmm_fns.why, sizeof vmm_fns.why, "driver entry point %s unavailable (%s)", symbol,
             e != cudaSuccess ? cudaGetErrorString(e) : "symbol not found for CUDA 12.0");
    (void)cudaGetLastError();
    return false;
  }
  return true;
}

/* Function pointers and void * differ in C; copy the bits through a void * slot. */
#define VMM_LOAD(field, symbol)                                                                    \
  do {                                                                                             \
    void *fn_ = NULL;                                                                              \
    if (!vmm_get(symbol, &fn_)) return;                                                            \
    _Static_assert(sizeof vmm_fns.field == sizeof fn_, "function pointer size");                   \
    memcpy(&vmm_fns.field, &fn_, sizeof fn_);                                                      \
  } while (0)

static void vmm_resolve(void) {
  VMM_LOAD(granularity, "cuMemGetAllocationGranularity");
  VMM_LOAD(reserve, "cuMemAddressReserve");
  VMM_LOAD(address_free, "cuMemAddressFree");
  VMM_LOAD(create, "cuMemCreate");
  VMM_LOAD(release, "cuMemRelease");
  VMM_LOAD(map, "cuMemMap");
  VMM_LOAD(set_access, "cuMemSetAccess");
  VMM_LOAD(unmap, "cuMemUnmap");
  VMM_LOAD(error_string, "cuGetErrorString");
  vmm_fns.ok = true;
}

/* The provider, with its device current and the entry points resolved; NULL (and a
 * log line) otherwise. */
static onyx__cuda_provider *vmm_ready(void *state, const char *op) {
  onyx__cuda_provider *p = state;
  if (p == NULL || !p->ready) return NULL;
  pthread_once(&vmm_once, vmm_resolve);
  if (!vmm_fns.ok) {
    if (p->host && p->host->log) {
      char line[256];
      snprintf(line, sizeof line, "cuda vmm: %s: %s", op, vmm_fns.why);
      p->host->log(p->host->host_data, ONYX_LOG_ERROR, line);
    }
    return NULL;
  }
  p->vmm = &vmm_fns;
  if (onyx__cuda_use_device(p) != cudaSuccess) return NULL;
  return p;
}

/* Logs a failed driver call; returns the status to report. */
static onyx_status vmm_fail(const onyx__cuda_provider *p, const char *op, CUresult r,
                            uint64_t bytes) {
  const char *text = NULL;
  if (vmm_fns.error_string == NULL || vmm_fns.error_string(r, &text) != CUDA_SUCCESS ||
      text == NULL)
    text = "unknown driver error";
  if (p->host && p->host->log) {
    char line[256];
    snprintf(line, sizeof line, "cuda vmm: %s of %llu bytes failed: %s (CUresult %d)", op,
             (unsigned long long)bytes, text, (int)r);
    p->host->log(p->host->host_data, ONYX_LOG_ERROR, line);
  }
  return r == CUDA_ERROR_OUT_OF_MEMORY ? ONYX_STATUS_OUT_OF_MEMORY : ONYX_STATUS_PROVIDER_ERROR;
}

static CUmemAllocationProp vmm_prop(const onyx__cuda_provider *p) {
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = p->device;
  return prop;
}

static onyx_status vmm_granularity(void *state, uint64_t *out_bytes) {
  onyx__cuda_provider *p = vmm_ready(state, "granularity");
  if (p == NULL || out_bytes == NULL) return ONYX_STATUS_DEVICE_UNAVAILABLE;
  CUmemAllocationProp prop = vmm_prop(p);
  size_t g = 0;
  CUresult r = vmm_fns.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (r != CUDA_SUCCESS) return vmm_fail(p, "cuMemGetAllocationGranularity", r, 0);
  *out_bytes = g;
  return ONYX_STATUS_OK;
}

static onyx_status vmm_reserve(void *state, uint64_t bytes, void **out_base) {
  onyx__cuda_provider *p = vmm_ready(state, "reserve");
  if (p == NULL) return ONYX_STATUS_DEVICE_UNAVAILABLE;
  if (out_base == NULL || bytes == 0) return ONYX_STATUS_INVALID_ARGUMENT;
  CUdeviceptr base = 0;
  CUresult r = vmm_fns.reserve(&base, (size_t)bytes, 0, 0, 0);
  if (r != CUDA_SUCCESS) return vmm_fail(p, "cuMemAddressReserve", r, bytes);
  *out_base = (void *)(uintptr_t)base;
  return ONYX_STATUS_OK;
}

static void vmm_unreserve(void *state, void *base, uint64_t bytes) {
  onyx__cuda_provider *p = vmm_ready(state, "unreserve");
  if (p == NULL || base == NULL) return;
  CUresult r = vmm_fns.address_free((CUdeviceptr)(uintptr_t)base, (size_t)bytes);
  if (r != CUDA_SUCCESS) (void)vmm_fail(p, "cuMemAddressFree", r, bytes);
}

/* A physical block's handle, boxed: the driver's handle is an integer that the ABI
 * carries as an opaque non-NULL pointer. */
typedef struct vmm_block {
  CUmemGenericAllocationHandle handle;
} vmm_block;

static onyx_status vmm_create(void *state, uint64_t bytes, void **out_handle) {
  onyx__cuda_provider *p = vmm_ready(state, "create");
  if (p == NULL) return ONYX_STATUS_DEVICE_UNAVAILABLE;
  if (out_handle == NULL || bytes == 0) return ONYX_STATUS_INVALID_ARGUMENT;
  vmm_block *b = malloc(sizeof *b);
  if (b == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  CUmemAllocationProp prop = vmm_prop(p);
  CUresult r = vmm_fns.create(&b->handle, (size_t)bytes, &prop, 0);
  if (r != CUDA_SUCCESS) {
    free(b);
    return vmm_fail(p, "cuMemCreate", r, bytes);
  }
  *out_handle = b;
  return ONYX_STATUS_OK;
}

static void vmm_release(void *state, void *handle, uint64_t bytes) {
  onyx__cuda_provider *p = vmm_ready(state, "release");
  vmm_block *b = handle;
  if (b == NULL) return;
  if (p != NULL) {
    CUresult r = vmm_fns.release(b->handle);
    if (r != CUDA_SUCCESS) (void)vmm_fail(p, "cuMemRelease", r, bytes);
  }
  free(b);
}

static onyx_status vmm_set_access(void *state, void *base, uint64_t offset, uint64_t bytes) {
  onyx__cuda_provider *p = vmm_ready(state, "set_access");
  if (p == NULL) return ONYX_STATUS_DEVICE_UNAVAILABLE;
  if (base == NULL || bytes == 0) return ONYX_STATUS_INVALID_ARGUMENT;
  CUmemAccessDesc access;
  memset(&access, 0, sizeof access);
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = p->device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CUresult r = vmm_fns.set_access((CUdeviceptr)(uintptr_t)base + offset, (size_t)bytes, &access, 1);
  if (r != CUDA_SUCCESS) return vmm_fail(p, "cuMemSetAccess", r, bytes);
  return ONYX_STATUS_OK;
}

/* Maps and then grants access, as the ABI's map promises; on a failed grant the
 * mapping is undone so nothing half-done is left behind. */
static onyx_status vmm_map(void *state, void *base, uint64_t offset, uint64_t bytes, void *handle) {
  onyx__cuda_provider *p = vmm_ready(state, "map");
  if (p == NULL) return ONYX_STATUS_DEVICE_UNAVAILABLE;
  const vmm_block *b = handle;
  if (base == NULL || b == NULL || bytes == 0) return ONYX_STATUS_INVALID_ARGUMENT;
  CUdeviceptr at = (CUdeviceptr)(uintptr_t)base + offset;
  CUresult r = vmm_fns.map(at, (size_t)bytes, 0, b->handle, 0);
  if (r != CUDA_SUCCESS) return vmm_fail(p, "cuMemMap", r, bytes);
  onyx_status st = vmm_set_access(state, base, offset, bytes);
  if (st != ONYX_STATUS_OK) (void)vmm_fns.unmap(at, (size_t)bytes);
  return st;
}

static void vmm_unmap(void *state, void *base, uint64_t offset, uint64_t bytes) {
  onyx__cuda_provider *p = vmm_ready(state, "unmap");
  if (p == NULL || base == NULL) return;
  CUresult r = vmm_fns.unmap((CUdeviceptr)(uintptr_t)base + offset, (size_t)bytes);
  if (r != CUDA_SUCCESS) (void)vmm_fail(p, "cuMemUnmap", r, bytes);
}

const onyx_vmm_table onyx__cuda_vmm_table = {
    .struct_size = sizeof(onyx_vmm_table),
    .version = ONYX_ABI_VERSION,
    .granularity = vmm_granularity,
    .reserve = vmm_reserve,
    .unreserve = vmm_unreserve,
    .create = vmm_create,
    .release = vmm_release,
    .map = vmm_map,
    .set_access = vmm_set_access,
    .unmap = vmm_unmap,
};
