/*
 * Provider libraries: loading, version negotiation and opening.
 *
 * The negotiation follows the Vulkan loader's: the core offers the highest ABI it
 * speaks, the provider answers with the version it will use, or declines with the
 * lowest it could use. Both numbers appear in every mismatch message.
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error_impl.h"
#include "memory_impl.h"
#include "provider_impl.h"
#include "thread_pool_impl.h"

/* Oldest ABI this core still accepts. */
#define ONYX_ABI_MIN_VERSION 1u

static const char *level_names[] = {"error", "warn", "info", "debug"};

void onyx__log(uint32_t level, const char *fmt, ...) {
  if (level > ONYX_LOG_INFO && getenv("ONYX_DEBUG") == NULL) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fprintf(stderr, "onyx %s: %s\n", level <= ONYX_LOG_DEBUG ? level_names[level] : "log", msg);
}

static void host_log(void *host_data, uint32_t level, const char *message) {
  const onyx__provider *p = host_data;
  onyx__log(level, "[%s] %s", p->name, message);
}

static onyx_status host_mem_alloc(void *host_data, uint32_t requester, uint64_t bytes,
                                  uint32_t alignment, const char *label, void **out_ptr) {
  onyx__provider *p = host_data;
  return onyx__memory_alloc(p->runtime->memory, p, requester, bytes, alignment, label, out_ptr,
                            NULL, 0);
}

static void host_mem_free(void *host_data, void *ptr) {
  onyx__provider *p = host_data;
  onyx__memory_free(p->runtime->memory, ptr);
}

static void host_parallel_for(void *host_data, size_t n, void (*fn)(void *arg, size_t i),
                              void *arg) {
  onyx__provider *p = host_data;
  onyx__thread_pool_run(p->runtime->pool, n, fn, arg);
}

static char *dup_str(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

void onyx__provider_unload(onyx__provider *p) {
  if (p == NULL) return;
  if (p->table && p->table->close && p->state) p->table->close(p->state);
  onyx__stream_lock_free(p);
  /* Kernel states and tables live in the library: the runtime unloads providers
   * only after every session (and so every kernel state) is gone. */
  if (p->library) dlclose(p->library);
  free(p->name);
  free(p->path);
  memset(p, 0, sizeof *p);
}

/* Checks the table a provider handed out before anything is called through it. */
static bool table_is_usable(const onyx_provider_table *t, char *why, size_t cap) {
  if (t->struct_size < offsetof(onyx_provider_table, sync) + sizeof t->sync) {
    onyx__errf(why, cap, "provider table too small (%u bytes)", (unsigned)t->struct_size);
    return false;
  }
  if (t->name == NULL || t->open == NULL) {
    onyx__errf(why, cap, "provider table lacks %s", t->name == NULL ? "a name" : "open()");
    return false;
  }
  if (t->kernel_count > 0 && t->kernels == NULL) {
    onyx__errf(why, cap, "provider table lists %zu kernels but no array", t->kernel_count);
    return false;
  }
  for (size_t i = 0; i < t->kernel_count; ++i) {
    const onyx_kernel_table *k = t->kernels[i];
    if (k == NULL || k->op_type == NULL || k->domain == NULL || k->compute == NULL ||
        k->struct_size < offsetof(onyx_kernel_table, compute) + sizeof k->compute) {
      onyx__errf(why, cap, "kernel table %zu is incomplete (NULL op, domain or compute)", i);
      return false;
    }
  }
  if (t->device != ONYX_DEVICE_HOST &&
      (t->device_alloc == NULL || t->device_free == NULL || t->copy == NULL)) {
    onyx__errf(why, cap, "device provider lacks device_alloc/device_free/copy");
    return false;
  }
  return true;
}

onyx_status onyx__provider_load(onyx_runtime *runtime, const onyx__config *config,
                                const onyx__provider_config *pc, onyx__provider *out, char *err,
                                size_t err_cap) {
  onyx__provider p;
  memset(&p, 0, sizeof p);
  p.runtime = runtime;
  const char *where = config->path;
  int line = pc->line;

  dlerror();
  p.library = dlopen(pc->path, RTLD_NOW | RTLD_LOCAL);
  if (p.library == NULL) {
    const char *why = dlerror();
    onyx__errf(err, err_cap, "%s:%d: provider '%s': cannot load %s: %s", where, line, pc->name,
               pc->path, why ? why : "unknown dlopen failure");
    return ONYX_STATUS_NOT_FOUND;
  }
  dlerror();
  void *sym = dlsym(p.library, ONYX_PROVIDER_ENTRY_SYMBOL);
  const char *sym_err = dlerror();
  if (sym == NULL || sym_err != NULL) {
    onyx__errf(err, err_cap, "%s:%d: provider '%s': %s does not export %s: %s", where, line,
               pc->name, pc->path, ONYX_PROVIDER_ENTRY_SYMBOL,
               sym_err ? sym_err : "symbol is NULL");
    dlclose(p.library);
    return ONYX_STATUS_PROVIDER_ERROR;
  }
  onyx_provider_entry_fn entry;
  memcpy(&entry, &sym, sizeof entry); /* object pointer to function pointer, POSIX-style */

  uint32_t answered = 0;
  const onyx_provider_table *table = NULL;
  onyx_status st = entry(ONYX_ABI_VERSION, &answered, &table);
  if (st == ONYX_STATUS_ABI_MISMATCH ||
      (st == ONYX_STATUS_OK && (answered > ONYX_ABI_VERSION || answered < ONYX_ABI_MIN_VERSION))) {
    onyx__errf(err, err_cap,
               "%s:%d: provider '%s' (%s): ABI mismatch: the core speaks ABI %u..%u, the "
               "provider %s ABI %u",
               where, line, pc->name, pc->path, ONYX_ABI_MIN_VERSION, ONYX_ABI_VERSION,
               st == ONYX_STATUS_OK ? "answered" : "needs at least", answered);
    dlclose(p.library);
    return ONYX_STATUS_ABI_MISMATCH;
  }
  if (st != ONYX_STATUS_OK || table == NULL) {
    onyx__errf(err, err_cap, "%s:%d: provider '%s' (%s): entry point failed: %s", where, line,
               pc->name, pc->path, st != ONYX_STATUS_OK ? onyx_status_str(st) : "no table");
    dlclose(p.library);
    return ONYX_STATUS_PROVIDER_ERROR;
  }
  if (table->abi_version != answered) {
    onyx__errf(err, err_cap,
               "%s:%d: provider '%s' (%s): ABI mismatch: negotiated ABI %u but its table "
               "says ABI %u",
               where, line, pc->name, pc->path, answered, table->abi_version);
    dlclose(p.library);
    return ONYX_STATUS_ABI_MISMATCH;
  }
  char why[256] = "";
  if (!table_is_usable(table, why, sizeof why)) {
    onyx__errf(err, err_cap, "%s:%d: provider '%s' (%s): %s", where, line, pc->name, pc->path, why);
    dlclose(p.library);
    return ONYX_STATUS_PROVIDER_ERROR;
  }

  p.table = table;
  p.abi = answered;
  p.name = dup_str(pc->name);
  p.path = dup_str(pc->path);
  p.is_fallback = config->fallback && !strcmp(pc->name, config->fallback);
  snprintf(p.tier, sizeof p.tier, "%s", table->device == ONYX_DEVICE_HOST ? "host" : "cuda:0");
  if (p.name == NULL || p.path == NULL) {
    free(p.name);
    free(p.path);
    dlclose(p.library);
    return ONYX_STATUS_OUT_OF_MEMORY;
  }
  /* The host table's host_data points at the provider's final slot (`out`), which
   * stays put for the runtime's life. */
  *out = p;
  out->host = (onyx_host_table){
      .struct_size = sizeof(onyx_host_table),
      .version = ONYX_ABI_VERSION,
      .host_data = out,
      .log = host_log,
      .mem_alloc = host_mem_alloc,
      .mem_free = host_mem_free,
      .parallel_for = host_parallel_for,
      .num_threads = onyx__thread_pool_size(runtime->pool),
      .set_error = onyx__host_set_error,
  };

  char open_err[512] = "";
  void *state = NULL;
  st = table->open(&out->host, pc->options, pc->option_count, &state, open_err, sizeof open_err);
  if (st != ONYX_STATUS_OK) {
    onyx__errf(err, err_cap, "%s:%d: provider '%s' (%s): init failed: %s: %s", where, line,
               pc->name, pc->path, onyx_status_str(st), open_err[0] ? open_err : "(no message)");
    onyx__provider_unload(out);
    return ONYX_STATUS_PROVIDER_ERROR;
  }
  out->state = state;
  /* The device tier's limit defaults to what the device says it can give. */
  uint64_t capacity = UINT64_MAX / 2;
  if (onyx__provider_has(table, memory_capacity) && table->memory_capacity &&
      table->memory_capacity(state, &capacity) != ONYX_STATUS_OK)
    capacity = UINT64_MAX / 2;
  /* The section's memory_limit caps the tier (for the host tier: shared by every host
   * provider, so the lowest cap wins). */
  if (onyx__memory_tier(runtime->memory, out->tier, capacity, &out->gov_tier) != ONYX_STATUS_OK ||
      (pc->memory_limit &&
       onyx__memory_cap_tier(runtime->memory, out->gov_tier, pc->memory_limit) != ONYX_STATUS_OK)) {
    onyx__errf(err, err_cap, "%s:%d: provider '%s': cannot add memory tier %s", where, line,
               pc->name, out->tier);
    onyx__provider_unload(out);
    return ONYX_STATUS_INTERNAL;
  }
  if (table->probe != NULL) {
    char probe_why[256] = "";
    if (!table->probe(state, probe_why, sizeof probe_why)) {
      onyx__errf(err, err_cap, "provider '%s' (%s) declined: %s", pc->name, pc->path,
                 probe_why[0] ? probe_why : "probe failed");
      onyx__provider_unload(out);
      return ONYX_STATUS_DEVICE_UNAVAILABLE;
    }
  }
  if (!onyx__stream_lock_init(out)) {
    onyx__errf(err, err_cap, "provider '%s': out of memory for its stream lock", out->name);
    onyx__provider_unload(out);
    return ONYX_STATUS_OUT_OF_MEMORY;
  }
  return ONYX_STATUS_OK;
}

void *onyx__provider_stream(const onyx__provider *p) {
  if (p == NULL || !onyx__provider_has(p->table, stream) || p->table->stream == NULL) return NULL;
  return p->table->stream(p->state);
}

onyx__provider *onyx__device_provider(onyx_runtime *rt, uint32_t device) {
  for (size_t i = 0; rt && i < rt->provider_count; ++i)
    if (rt->providers[i].table->device == device && device != ONYX_DEVICE_HOST)
      return &rt->providers[i];
  return NULL;
}
