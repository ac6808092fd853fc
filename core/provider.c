/*
 * Provider libraries: loading, version negotiation and opening instances.
 *
 * The negotiation follows the Vulkan loader's: the core offers the highest ABI it
 * speaks, the provider answers with the version it will use, or declines with the
 * lowest it could use. Both numbers appear in every mismatch message. A library that
 * exports the v3 factory symbol speaks v3 (one instance per device it reports);
 * otherwise its v1/v2 entry hands out one provider table, opened once, as device 0
 * of its kind. Both end as the same onyx__provider instances.
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

void onyx__provider_close(onyx__provider *p) {
  if (p == NULL || p->state == NULL) return;
  if (p->ops && p->ops->close) p->ops->close(p->state);
  if (p->table && p->table->close) p->table->close(p->state);
  p->state = NULL;
}

void onyx__provider_unload(onyx__provider *p) {
  if (p == NULL) return;
  onyx__provider_close(p);
  onyx__stream_lock_free(p);
  /* Kernel states and tables live in the library: the runtime unloads providers
   * only after every session (and so every kernel state) is gone. */
  if (p->library) dlclose(p->library);
  free(p->kernels);
  free(p->name);
  free(p->path);
  memset(p, 0, sizeof *p);
}

/* Checks the table a v1/v2 provider handed out before anything is called through it. */
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
  if (t->device != ONYX_DEVICE_HOST &&
      (t->device_alloc == NULL || t->device_free == NULL || t->copy == NULL)) {
    onyx__errf(why, cap, "device provider lacks device_alloc/device_free/copy");
    return false;
  }
  return true;
}

/* The same for a v3 factory and its instance table. */
static bool factory_is_usable(const onyx_provider_factory *f, char *why, size_t cap) {
  const onyx_instance_table *t = f->instance;
  const char *lacks = f->struct_size < sizeof *f   ? "the v3 fields (factory struct too small)"
                      : f->name == NULL            ? "a name"
                      : f->device_count == NULL    ? "device_count()"
                      : f->device_info == NULL     ? "device_info()"
                      : f->open == NULL            ? "open()"
                      : t == NULL                  ? "an instance table"
                      : t->struct_size < sizeof *t ? "the v3 instance fields (table too small)"
                      : t->kernels == NULL         ? "kernels()"
                                                   : NULL;
  if (lacks) onyx__errf(why, cap, "provider factory lacks %s", lacks);
  return lacks == NULL;
}

/* "host", "cuda:1", or "<provider>:<ordinal>" for a kind this core does not name. */
static void tier_name(onyx__provider *p, const char *provider_name) {
  if (p->device == ONYX_DEVICE_HOST)
    snprintf(p->tier, sizeof p->tier, "host");
  else if (p->device == ONYX_DEVICE_CUDA)
    snprintf(p->tier, sizeof p->tier, "cuda:%d", (int)p->device_id);
  else
    snprintf(p->tier, sizeof p->tier, "%.30s:%d", provider_name, (int)p->device_id);
}

typedef struct load_ctx {
  onyx_runtime *rt;
  const onyx__config *config;
  const onyx__provider_config *pc;
  void *library; /* the handle of the first dlopen: each instance takes its own */
  char *err;
  size_t err_cap;
} load_ctx;

/* Copies name, path and a library reference into a fresh instance. */
static onyx_status instance_init(const load_ctx *c, onyx__provider *p) {
  memset(p, 0, sizeof *p);
  p->runtime = c->rt;
  p->name = dup_str(c->pc->name);
  p->path = dup_str(c->pc->path);
  p->library = dlopen(c->pc->path, RTLD_NOW | RTLD_LOCAL); /* one more reference */
  p->is_fallback = c->config->fallback && !strcmp(c->pc->name, c->config->fallback);
  if (p->name && p->path && p->library) return ONYX_STATUS_OK;
  onyx__provider_unload(p);
  onyx__errf(c->err, c->err_cap, "provider '%s': out of memory", c->pc->name);
  return ONYX_STATUS_OUT_OF_MEMORY;
}

/* After open: the tier (capped by memory_limit), probe, stream lock, kernels. */
static onyx_status instance_finish(const load_ctx *c, onyx__provider *out) {
  const char *where = c->config->path;
  int line = c->pc->line;
  /* The device tier's limit defaults to what the device says it can give. */
  uint64_t capacity = UINT64_MAX / 2;
  if (!onyx__dev_is_host(out) && onyx__dev_capacity(out, &capacity) != ONYX_STATUS_OK)
    capacity = UINT64_MAX / 2;
  /* The section's memory_limit caps the tier (for the host tier: shared by every host
   * provider, so the lowest cap wins). */
  if (onyx__memory_tier(c->rt->memory, out->tier, capacity, &out->gov_tier) != ONYX_STATUS_OK ||
      (c->pc->memory_limit && onyx__memory_cap_tier(c->rt->memory, out->gov_tier,
                                                    c->pc->memory_limit) != ONYX_STATUS_OK)) {
    onyx__errf(c->err, c->err_cap, "%s:%d: provider '%s': cannot add memory tier %s", where, line,
               out->name, out->tier);
    return ONYX_STATUS_INTERNAL;
  }
  if (out->table && out->table->probe != NULL) {
    char probe_why[256] = "";
    if (!out->table->probe(out->state, probe_why, sizeof probe_why)) {
      onyx__errf(c->err, c->err_cap, "provider '%s' (%s) declined: %s", out->name, out->path,
                 probe_why[0] ? probe_why : "probe failed");
      return ONYX_STATUS_DEVICE_UNAVAILABLE;
    }
  }
  if (!onyx__stream_lock_init(out)) {
    onyx__errf(c->err, c->err_cap, "provider '%s': out of memory for its stream lock", out->name);
    return ONYX_STATUS_OUT_OF_MEMORY;
  }
  char why[512] = "";
  onyx_status st = onyx__kernels_register(out, why, sizeof why);
  if (st != ONYX_STATUS_OK)
    onyx__errf(c->err, c->err_cap, "%s:%d: provider '%s' (%s), device %s: %s", where, line,
               out->name, out->path, out->tier, why);
  return st;
}

/* The host table an instance is opened with; host_data points at its final slot. */
static void host_table_init(onyx__provider *out) {
  out->host = (onyx_host_table){
      .struct_size = sizeof(onyx_host_table),
      .version = ONYX_ABI_LATEST,
      .host_data = out,
      .log = host_log,
      .mem_alloc = host_mem_alloc,
      .mem_free = host_mem_free,
      .parallel_for = host_parallel_for,
      .num_threads = onyx__thread_pool_size(out->runtime->pool),
      .set_error = onyx__host_set_error,
  };
}

/* ------------------------------------------------------------ v1/v2 */

static onyx_status load_table(const load_ctx *c, onyx_provider_entry_fn entry,
                              onyx__provider *out) {
  const char *where = c->config->path;
  int line = c->pc->line;
  const onyx__provider_config *pc = c->pc;
  uint32_t answered = 0;
  const onyx_provider_table *table = NULL;
  onyx_status st = entry(ONYX_ABI_VERSION, &answered, &table);
  if (st == ONYX_STATUS_ABI_MISMATCH ||
      (st == ONYX_STATUS_OK && (answered > ONYX_ABI_VERSION || answered < ONYX_ABI_MIN_VERSION))) {
    onyx__errf(c->err, c->err_cap,
               "%s:%d: provider '%s' (%s): ABI mismatch: the core speaks ABI %u..%u (ABI %u "
               "through %s), the provider %s ABI %u",
               where, line, pc->name, pc->path, ONYX_ABI_MIN_VERSION, ONYX_ABI_LATEST,
               ONYX_ABI_LATEST, ONYX_PROVIDER_FACTORY_SYMBOL,
               st == ONYX_STATUS_OK ? "answered" : "needs at least", answered);
    return ONYX_STATUS_ABI_MISMATCH;
  }
  if (st != ONYX_STATUS_OK || table == NULL) {
    onyx__errf(c->err, c->err_cap, "%s:%d: provider '%s' (%s): entry point failed: %s", where, line,
               pc->name, pc->path, st != ONYX_STATUS_OK ? onyx_status_str(st) : "no table");
    return ONYX_STATUS_PROVIDER_ERROR;
  }
  if (table->abi_version != answered) {
    onyx__errf(c->err, c->err_cap,
               "%s:%d: provider '%s' (%s): ABI mismatch: negotiated ABI %u but its table "
               "says ABI %u",
               where, line, pc->name, pc->path, answered, table->abi_version);
    return ONYX_STATUS_ABI_MISMATCH;
  }
  char why[256] = "";
  if (!table_is_usable(table, why, sizeof why)) {
    onyx__errf(c->err, c->err_cap, "%s:%d: provider '%s' (%s): %s", where, line, pc->name, pc->path,
               why);
    return ONYX_STATUS_PROVIDER_ERROR;
  }
  if ((st = instance_init(c, out)) != ONYX_STATUS_OK) return st;
  out->table = table;
  out->abi = answered;
  out->device = table->device;
  out->device_id = 0;
  out->info = (onyx_device_info){.struct_size = sizeof out->info, .kind = table->device};
  snprintf(out->info.name, sizeof out->info.name, "%s", table->name);
  tier_name(out, pc->name);
  host_table_init(out);
  char open_err[512] = "";
  void *state = NULL;
  st = table->open(&out->host, pc->options, pc->option_count, &state, open_err, sizeof open_err);
  if (st != ONYX_STATUS_OK) {
    onyx__errf(c->err, c->err_cap, "%s:%d: provider '%s' (%s): init failed: %s: %s", where, line,
               pc->name, pc->path, onyx_status_str(st), open_err[0] ? open_err : "(no message)");
    onyx__provider_unload(out);
    return ONYX_STATUS_PROVIDER_ERROR;
  }
  out->state = state;
  st = instance_finish(c, out);
  if (st != ONYX_STATUS_OK) onyx__provider_unload(out);
  return st;
}

/* ------------------------------------------------------------ v3 */

/* Opens device `index` of the factory into `out`. */
static onyx_status open_device(const load_ctx *c, const onyx_provider_factory *f, uint32_t index,
                               onyx__provider *out) {
  const onyx__provider_config *pc = c->pc;
  const char *where = c->config->path;
  char why[512] = "";
  onyx__sink sink;
  onyx_device_info info = {.struct_size = sizeof info, .version = ONYX_ABI_LATEST};
  onyx_status st = f->device_info(index, &info, onyx__sink_init(&sink, why, sizeof why));
  if (st != ONYX_STATUS_OK) {
    onyx__errf(c->err, c->err_cap,
               "%s:%d: provider '%s' (%s): device %u: device_info failed: %s: %s", where, pc->line,
               pc->name, pc->path, index, onyx_status_str(st), why[0] ? why : "(no message)");
    return ONYX_STATUS_PROVIDER_ERROR;
  }
  info.name[sizeof info.name - 1] = '\0';
  if ((st = instance_init(c, out)) != ONYX_STATUS_OK) return st;
  out->factory = f;
  out->ops = f->instance;
  out->abi = ONYX_ABI_V3;
  out->info = info;
  out->device = info.kind;
  out->device_id = info.ordinal;
  tier_name(out, pc->name);
  if (!onyx__dev_is_host(out) &&
      (out->ops->device_alloc == NULL || out->ops->device_free == NULL || out->ops->copy == NULL)) {
    onyx__errf(c->err, c->err_cap,
               "%s:%d: provider '%s' (%s): device %s lacks device_alloc/device_free/copy", where,
               pc->line, pc->name, pc->path, out->tier);
    onyx__provider_unload(out);
    return ONYX_STATUS_PROVIDER_ERROR;
  }
  host_table_init(out);
  void *state = NULL;
  st = f->open(&out->host, index, pc->options, pc->option_count, &state,
               onyx__sink_init(&sink, why, sizeof why));
  if (st != ONYX_STATUS_OK) {
    onyx__errf(c->err, c->err_cap,
               "%s:%d: provider '%s' (%s): opening device %s (%s) failed: %s: %s", where, pc->line,
               pc->name, pc->path, out->tier, info.name, onyx_status_str(st),
               why[0] ? why : "(no message)");
    onyx__provider_unload(out);
    return st == ONYX_STATUS_DEVICE_UNAVAILABLE ? st : ONYX_STATUS_PROVIDER_ERROR;
  }
  out->state = state;
  st = instance_finish(c, out);
  if (st != ONYX_STATUS_OK) onyx__provider_unload(out);
  return st;
}

/* Negotiates v3 through the factory entry and checks the factory it hands out. */
static onyx_status negotiate_factory(const load_ctx *c, onyx_provider_factory_fn entry,
                                     const onyx_provider_factory **out) {
  const onyx__provider_config *pc = c->pc;
  const char *where = c->config->path;
  uint32_t answered = 0;
  const onyx_provider_factory *f = NULL;
  onyx_status st = entry(ONYX_ABI_LATEST, &answered, &f);
  if (st == ONYX_STATUS_ABI_MISMATCH || (st == ONYX_STATUS_OK && answered != ONYX_ABI_V3)) {
    onyx__errf(c->err, c->err_cap,
               "%s:%d: provider '%s' (%s): ABI mismatch: the core speaks ABI %u..%u, the "
               "provider's factory %s ABI %u",
               where, pc->line, pc->name, pc->path, ONYX_ABI_MIN_VERSION, ONYX_ABI_LATEST,
               st == ONYX_STATUS_OK ? "answered" : "needs at least", answered);
    return ONYX_STATUS_ABI_MISMATCH;
  }
  char why[512] = "";
  if (st != ONYX_STATUS_OK || f == NULL || f->abi_version != answered ||
      !factory_is_usable(f, why, sizeof why)) {
    onyx__errf(c->err, c->err_cap, "%s:%d: provider '%s' (%s): factory entry failed: %s", where,
               pc->line, pc->name, pc->path,
               st != ONYX_STATUS_OK ? onyx_status_str(st)
               : f == NULL          ? "no factory"
               : why[0]             ? why
                                    : "its abi_version differs from the negotiated one");
    return ONYX_STATUS_PROVIDER_ERROR;
  }
  *out = f;
  return ONYX_STATUS_OK;
}

/* Opens the devices the section wants (`devices`, else all `count`, in order) into
 * out[*out_count ..]. A device that declines is left out; any other failure closes
 * every instance opened here. */
static onyx_status open_devices(const load_ctx *c, const onyx_provider_factory *f, uint32_t count,
                                onyx__provider *out, size_t out_cap, size_t *out_count) {
  const onyx__provider_config *pc = c->pc;
  const char *where = c->config->path;
  size_t wanted = pc->device_count ? pc->device_count : count;
  onyx_status st = ONYX_STATUS_DEVICE_UNAVAILABLE;
  onyx__errf(c->err, c->err_cap, "provider '%s' (%s) reports no device", pc->name, pc->path);
  for (size_t i = 0; i < wanted; ++i) {
    uint32_t index = pc->device_count ? pc->devices[i] : (uint32_t)i;
    if (index >= count || *out_count == out_cap) {
      if (index >= count)
        onyx__errf(c->err, c->err_cap,
                   "%s:%d: provider '%s' (%s): devices names device %u, but it reports %u", where,
                   pc->line, pc->name, pc->path, index, count);
      else
        onyx__errf(c->err, c->err_cap, "%s:%d: provider '%s': more than %d devices", where,
                   pc->line, pc->name, ONYX__MAX_DEVICES);
      st = ONYX_STATUS_INVALID_CONFIG;
      break;
    }
    onyx_status dst = open_device(c, f, index, &out[*out_count]);
    if (dst == ONYX_STATUS_DEVICE_UNAVAILABLE) {
      /* The last decline, with nothing opened, is the runtime's to report. */
      if (i + 1 < wanted || *out_count > 0)
        onyx__log(ONYX_LOG_INFO, "%s; placing its nodes elsewhere", c->err);
      continue;
    }
    if (dst != ONYX_STATUS_OK) {
      st = dst;
      break;
    }
    ++*out_count;
    st = ONYX_STATUS_OK;
  }
  if (st != ONYX_STATUS_OK && st != ONYX_STATUS_DEVICE_UNAVAILABLE) {
    while (*out_count > 0) onyx__provider_unload(&out[--*out_count]);
  }
  return *out_count > 0 ? ONYX_STATUS_OK : st;
}

static onyx_status load_factory(const load_ctx *c, onyx_provider_factory_fn entry,
                                onyx__provider *out, size_t out_cap, size_t *out_count) {
  const onyx__provider_config *pc = c->pc;
  const onyx_provider_factory *f = NULL;
  onyx_status st = negotiate_factory(c, entry, &f);
  if (st != ONYX_STATUS_OK) return st;
  uint32_t count = 0;
  char why[512] = "";
  onyx__sink sink;
  st = f->device_count(pc->options, pc->option_count, &count,
                       onyx__sink_init(&sink, why, sizeof why));
  if (st == ONYX_STATUS_DEVICE_UNAVAILABLE) {
    /* No usable device at all: worded as a v1/v2 probe's decline. */
    onyx__errf(c->err, c->err_cap, "provider '%s' (%s) declined: %s", pc->name, pc->path,
               why[0] ? why : "no usable device");
    return st;
  }
  if (st != ONYX_STATUS_OK) {
    onyx__errf(c->err, c->err_cap, "%s:%d: provider '%s' (%s): device_count failed: %s: %s",
               c->config->path, pc->line, pc->name, pc->path, onyx_status_str(st),
               why[0] ? why : "(no message)");
    return ONYX_STATUS_PROVIDER_ERROR;
  }
  return open_devices(c, f, count, out, out_cap, out_count);
}

onyx_status onyx__provider_load(onyx_runtime *runtime, const onyx__config *config,
                                const onyx__provider_config *pc, onyx__provider *out,
                                size_t out_cap, size_t *out_count, char *err, size_t err_cap) {
  *out_count = 0;
  const char *where = config->path;
  int line = pc->line;
  dlerror();
  void *library = dlopen(pc->path, RTLD_NOW | RTLD_LOCAL);
  if (library == NULL) {
    const char *why = dlerror();
    onyx__errf(err, err_cap, "%s:%d: provider '%s': cannot load %s: %s", where, line, pc->name,
               pc->path, why ? why : "unknown dlopen failure");
    return ONYX_STATUS_NOT_FOUND;
  }
  load_ctx c = {runtime, config, pc, library, err, err_cap};
  dlerror();
  void *factory_sym = dlsym(library, ONYX_PROVIDER_FACTORY_SYMBOL);
  dlerror();
  void *entry_sym = factory_sym ? NULL : dlsym(library, ONYX_PROVIDER_ENTRY_SYMBOL);
  const char *sym_err = factory_sym ? NULL : dlerror();
  onyx_status st;
  if (factory_sym) {
    onyx_provider_factory_fn fentry;
    memcpy(&fentry, &factory_sym, sizeof fentry); /* object to function pointer, POSIX-style */
    st = load_factory(&c, fentry, out, out_cap, out_count);
  } else if (entry_sym == NULL || sym_err != NULL) {
    onyx__errf(err, err_cap, "%s:%d: provider '%s': %s does not export %s or %s: %s", where, line,
               pc->name, pc->path, ONYX_PROVIDER_FACTORY_SYMBOL, ONYX_PROVIDER_ENTRY_SYMBOL,
               sym_err ? sym_err : "symbol is NULL");
    st = ONYX_STATUS_PROVIDER_ERROR;
  } else if (out_cap == 0) {
    st = ONYX_STATUS_INVALID_CONFIG;
  } else {
    onyx_provider_entry_fn entry;
    memcpy(&entry, &entry_sym, sizeof entry);
    st = load_table(&c, entry, out);
    *out_count = st == ONYX_STATUS_OK;
  }
  dlclose(library); /* each instance holds its own reference */
  return st;
}
