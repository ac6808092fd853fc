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

typedef struct onyx__provider {
  char *name;                       /* the config's name for it */
  char *path;                       /* library path as resolved */
  void *library;                    /* dlopen handle */
  const onyx_provider_table *table; /* static table inside the library */
  void *state;                      /* from table->open */
  uint32_t abi;                     /* negotiated ABI version */
  bool is_fallback;
  char tier[32];        /* governor tier of its memory: "host", "cuda:0" */
  uint32_t gov_tier;    /* that tier's governor handle */
  onyx_host_table host; /* what it was opened with; host_data points here */
  struct onyx_runtime *runtime;
  void *stream_lock; /* pthread_rwlock_t of a device provider (stream_lock.c), else NULL */
} onyx__provider;

struct onyx_runtime {
  onyx__config *config;
  onyx__provider *providers; /* placement order: the fallback last */
  size_t provider_count;
  struct onyx__thread_pool *pool;
  struct onyx__memory *memory; /* the governor and the allocations it books */
};

/*
 * Loads one provider library: dlopen(RTLD_NOW | RTLD_LOCAL), the entry symbol, ABI
 * negotiation, open with the section's options, probe. On failure `err` names the
 * config file and line, the library and the cause (dlerror text verbatim, both ABI
 * versions, the provider's own message) and *out is left zeroed.
 * Returns ONYX_STATUS_DEVICE_UNAVAILABLE when the provider's probe declines.
 */
onyx_status onyx__provider_load(onyx_runtime *runtime, const onyx__config *config,
                                const onyx__provider_config *pc, onyx__provider *out, char *err,
                                size_t err_cap);
void onyx__provider_unload(onyx__provider *provider);

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

/* The kernel's host_inputs mask (0 from a table that predates the field). */
static inline uint64_t onyx__kernel_geometry_inputs(const onyx_kernel_table *k) {
  return onyx__kernel_has(k, geometry_inputs) ? k->geometry_inputs : 0;
}

static inline uint64_t onyx__kernel_host_inputs(const onyx_kernel_table *k) {
  return onyx__kernel_has(k, host_inputs) ? k->host_inputs : 0;
}

/* The first loaded provider whose memory is `device` (not the host), or NULL. */
onyx__provider *onyx__device_provider(onyx_runtime *runtime, uint32_t device);

/* The provider's stream for ctx->stream, or NULL. */
void *onyx__provider_stream(const onyx__provider *provider);

/* Logs through the runtime's sink (stderr). */
void onyx__log(uint32_t level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif /* ONYX_CORE_PROVIDER_IMPL_H */
