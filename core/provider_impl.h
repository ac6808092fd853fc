/* Loaded providers: dlopen, ABI negotiation, open/probe, and the runtime that holds them. */
#ifndef ONYX_CORE_PROVIDER_IMPL_H
#define ONYX_CORE_PROVIDER_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config_impl.h"
#include "onyx.h"

struct onyx__thread_pool;
struct onyx__memory;

typedef struct onyx__provider onyx__provider;

/*
 * A kernel as the core keeps it, whichever contract registered it: a v1/v2 table
 * (`v2`, the provider's static data) or a v3 definition (`v3`). Domain, op, opsets,
 * masks and type constraints are copied out once, so placement and the executor read
 * one shape; the callbacks are reached through kernel_call.c.
 */
typedef struct onyx__kernel {
  const char *domain, *op_type;
  int64_t since_opset, until_opset;
  const onyx_type_constraint *types; /* v3: the definition's list; v2: &legacy_type */
  size_t type_count;
  onyx_type_constraint legacy_type; /* a v2 table's type_input + type_mask */
  uint64_t host_inputs, geometry_inputs;
  const onyx_kernel_table *v2;
  const onyx_kernel_def *v3;
  onyx__provider *instance; /* the instance that registered it */
} onyx__kernel;

/* One opened device instance: a v1/v2 provider opens exactly one, a v3 factory one
 * per device it reports (plugins.ini `devices` picks and orders them). */
struct onyx__provider {
  char *name;                           /* the config's name for its provider */
  char *path;                           /* library path as resolved */
  void *library;                        /* dlopen handle (each instance holds a reference) */
  uint32_t abi;                         /* negotiated ABI version */
  const onyx_provider_table *table;     /* v1/v2: static table inside the library, else NULL */
  const onyx_provider_factory *factory; /* v3: the factory, else NULL */
  const onyx_instance_table *ops;       /* v3: factory->instance */
  void *state;                          /* from open: the provider state or the instance */
  uint32_t device;                      /* onyx_device_kind of its memory */
  int32_t device_id;                    /* its tensors' device_id (the device's ordinal) */
  onyx_device_info info;                /* what the factory said (v1/v2: filled in) */
  bool is_fallback;
  char tier[48];        /* governor tier of its memory: "host", "cuda:0", "fake:1" */
  uint32_t gov_tier;    /* that tier's governor handle */
  onyx_host_table host; /* what it was opened with; host_data points here */
  struct onyx_runtime *runtime;
  void *stream_lock;     /* pthread_rwlock_t of a device instance (stream_lock.c), else NULL */
  onyx__kernel *kernels; /* registered at open, in registration order */
  size_t kernel_count;
};

/* Most instances one plugins.ini section may open. */
#define ONYX__MAX_DEVICES 16

struct onyx_runtime {
  onyx__config *config;
  onyx__provider *providers; /* instances in placement order: the fallback last */
  size_t provider_count;
  struct onyx__kernel_index *index; /* kernels by (domain, op) (kernel_index.c) */
  struct onyx__thread_pool *pool;
  struct onyx__memory *memory; /* the governor and the allocations it books */
};

/*
 * Loads one provider library: dlopen(RTLD_NOW | RTLD_LOCAL), the entry symbol (the v3
 * factory's, else the v1/v2 entry), ABI negotiation, open with the section's options,
 * probe — one instance for a v1/v2 provider, one per device of a v3 factory (the
 * section's `devices`, else all it reports), into out[0 .. *out_count). On failure
 * `err` names the config file and line, the library, the device and the cause (dlerror
 * text verbatim, both ABI versions, the provider's own message); nothing stays open.
 * Returns ONYX_STATUS_DEVICE_UNAVAILABLE when every device declines.
 */
onyx_status onyx__provider_load(onyx_runtime *runtime, const onyx__config *config,
                                const onyx__provider_config *pc, onyx__provider *out,
                                size_t out_cap, size_t *out_count, char *err, size_t err_cap);
void onyx__provider_unload(onyx__provider *provider);
/* Closes the instance (its provider's close), keeping the library loaded. */
void onyx__provider_close(onyx__provider *provider);

/* The kernels an instance registers (kernel_index.c): a v1/v2 table's list, or what a
 * v3 instance adds through the registry. On failure `err` says which and why. */
onyx_status onyx__kernels_register(onyx__provider *provider, char *err, size_t err_cap);
/* Builds the runtime's (domain, op) index over every instance's kernels; the entries
 * of one op keep placement order. */
onyx_status onyx__kernel_index_build(onyx_runtime *runtime);
void onyx__kernel_index_free(struct onyx__kernel_index *index);
/* The kernels of (domain, op) in placement order: *out_count entries (0: none). */
const onyx__kernel *const *onyx__kernel_lookup(const onyx_runtime *runtime, const char *domain,
                                               const char *op_type, size_t *out_count);

/* ------------------------------------------------------------ kernel calls */
/* One error channel for the core (kernel_call.c): every call writes the kernel's own
 * reason into `err` on failure — from a v3 sink, a v2 err buffer, ctx->set_error or the
 * host table's set_error alike. */
bool onyx__k_supports(const onyx__kernel *k, const onyx_node_info *node, char *reason, size_t cap);
onyx_status onyx__k_create(const onyx__kernel *k, const onyx_node_info *node, void **out_state,
                           char *err, size_t cap);
void onyx__k_destroy(const onyx__kernel *k, void *state);
bool onyx__k_has_infer(const onyx__kernel *k);
onyx_status onyx__k_infer(const onyx__kernel *k, void *state, const onyx_tensor *inputs,
                          size_t input_count, onyx_tensor *outputs, size_t output_count, char *err,
                          size_t cap);
bool onyx__k_has_workspace(const onyx__kernel *k);
onyx_status onyx__k_workspace(const onyx__kernel *k, void *state, const onyx_tensor *inputs,
                              size_t input_count, onyx_workspace_requirement *req, char *err,
                              size_t cap);
/* Compute: the reason goes where ctx->set_error writes (the caller's ctx). */
onyx_status onyx__k_compute(const onyx__kernel *k, void *state, onyx_compute_ctx *ctx,
                            const onyx_tensor *const *inputs, size_t input_count);
/* Does dtype `dtype` at input (side ONYX_TYPE_INPUT) or output `index` pass the
 * kernel's constraints? */
bool onyx__k_type_ok(const onyx__kernel *k, uint32_t side, size_t index, uint32_t dtype);

/* ------------------------------------------------------------ device calls */
/* The instance's device operations, whichever contract (device_ops.c). `err` may be
 * NULL; it receives the provider's reason where it gave one. */
static inline bool onyx__dev_is_host(const onyx__provider *p) {
  return p == NULL || p->device == ONYX_DEVICE_HOST;
}
onyx_status onyx__dev_alloc(onyx__provider *p, uint64_t bytes, void **out_ptr);
void onyx__dev_free(onyx__provider *p, void *ptr);
onyx_status onyx__dev_copy(onyx__provider *p, onyx_tensor *dst, const onyx_tensor *src, char *err,
                           size_t cap);
bool onyx__dev_has_sync(const onyx__provider *p);
onyx_status onyx__dev_sync_raw(const onyx__provider *p);
onyx_status onyx__dev_capacity(onyx__provider *p, uint64_t *out_bytes);
const onyx_vmm_table *onyx__dev_vmm(const onyx__provider *p);
const onyx_graph_table *onyx__dev_graphs(const onyx__provider *p);
/* Do two instances come from one provider library (one v3 factory) and both report
 * ONYX_DEVICE_CAP_PEER_COPY? Such siblings copy between their devices directly; others
 * through the host. */
bool onyx__dev_siblings(const onyx__provider *a, const onyx__provider *b);

/* The device stream lock (stream_lock.c): work queued on a device provider's stream
 * holds it shared — an executor run, a replay, a device allocation or free, a copy, a
 * sync — and recording a graph holds it exclusive, so that nothing of another thread
 * lands in the capture. The recording thread passes its own shared entries. No-ops for
 * host providers. */
bool onyx__stream_lock_init(onyx__provider *provider);
void onyx__stream_lock_free(onyx__provider *provider);
void onyx__stream_enter(const onyx__provider *provider);
void onyx__stream_leave(const onyx__provider *provider);
void onyx__stream_enter_all(const onyx_runtime *runtime);
void onyx__stream_leave_all(const onyx_runtime *runtime);
/* Waits for a device provider's stream (the lock held shared); OK for host providers
 * and providers without sync. */
onyx_status onyx__stream_sync(const onyx__provider *provider);
void onyx__record_enter(const onyx__provider *provider);
void onyx__record_leave(const onyx__provider *provider);

/* True when a provider table is large enough to hold `field` (appended later). */
#define onyx__provider_has(table, field)                                                           \
  ((table)->struct_size >= offsetof(onyx_provider_table, field) + sizeof((table)->field))

/* The same for a kernel table: fields appended after a provider was built read as
 * NULL / 0 when its table's struct_size does not reach them. */
#define onyx__kernel_has(table, field)                                                             \
  ((table)->struct_size >= offsetof(onyx_kernel_table, field) + sizeof((table)->field))

/* The instance that owns device memory of kind `device` and ordinal `device_id`
 * (the first loaded), or NULL; never a host provider. */
onyx__provider *onyx__device_provider(onyx_runtime *runtime, uint32_t device, int32_t device_id);

/* The provider's stream for ctx->stream, or NULL. */
void *onyx__provider_stream(const onyx__provider *provider);

/* Logs through the runtime's sink (stderr). */
void onyx__log(uint32_t level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif /* ONYX_CORE_PROVIDER_IMPL_H */
