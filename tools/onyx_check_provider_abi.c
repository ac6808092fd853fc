/*
 * onyx-check-provider, the ABI half: everything that names an ABI struct, v1/v2 (the
 * provider table) and v3 (the factory, its instances, registrations and sinks). The
 * provider is loaded as the core loads it (dlopen RTLD_NOW | RTLD_LOCAL, the entry
 * symbols), then driven directly, kernel by kernel (v2 tables and v3 definitions
 * behind one ckernel), with a host table and compute context of this file's own, so
 * that the checks can do what the core never does on purpose: hand a view one byte
 * short, poison outputs, run one case from several threads at once, count heap
 * allocations during compute.
 *
 * A device provider's kernels run on its device 0, their inputs, outputs and workspace
 * staged through its own device_alloc and copy (device memory below).
 *
 * Cases are generated, not read: for each kernel, inputs of the type its constraint
 * allows, in a few arities and shapes ([4,4] and [2,3,4], trailing inputs of the same
 * shape or [4], host inputs as int64 [1] holding 1), no attributes; the first that the
 * kernel accepts is its case, with fresh random data. A kernel that accepts none
 * (attributes required, exotic inputs) is reported as skipped.
 */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onyx_check_provider.h"

#define MAX_IN 4
#define MAX_OUT 4
#define POISON 0xA5
#define ABI_LOWEST 1u /* the lowest ABI a provider may speak */

/* ------------------------------------------------------------ host table */

static _Thread_local char host_error[512];
static bool serial_only; /* parallel_for runs inline (while allocations are counted) */
static int pool_threads = 4;

static void host_log(void *data, uint32_t level, const char *message) {
  (void)data;
  if (level <= ONYX_LOG_WARN) printf("        provider log: %s\n", message);
}

static onyx_status host_mem_alloc(void *data, uint32_t requester, uint64_t bytes,
                                  uint32_t alignment, const char *label, void **out_ptr) {
  (void)data;
  (void)requester;
  (void)label;
  size_t align = alignment < sizeof(void *) ? sizeof(void *) : alignment;
  if (bytes > SIZE_MAX / 2 || (align & (align - 1)) != 0) return ONYX_STATUS_INVALID_ARGUMENT;
  void *p =
      chk_alloc_untracked(align, bytes ? (size_t)bytes : 1); /* the host's, not the kernel's */
  if (p == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  *out_ptr = p;
  return ONYX_STATUS_OK;
}

static void host_mem_free(void *data, void *ptr) {
  (void)data;
  free(ptr);
}

typedef struct pf_job {
  size_t n, stride, start;
  void (*fn)(void *, size_t);
  void *arg;
} pf_job;

static void *pf_worker(void *p) {
  pf_job *j = p;
  for (size_t i = j->start; i < j->n; i += j->stride) j->fn(j->arg, i);
  return NULL;
}

/* Items spread over real threads, so that a kernel's own races show. */
static void host_parallel_for(void *data, size_t n, void (*fn)(void *, size_t), void *arg) {
  (void)data;
  int t = serial_only || n < 2 ? 1 : pool_threads;
  pthread_t ids[64];
  pf_job jobs[64];
  int started = 0;
  for (int i = 1; i < t; ++i) {
    jobs[i] = (pf_job){n, (size_t)t, (size_t)i, fn, arg};
    if (pthread_create(&ids[started], NULL, pf_worker, &jobs[i]) != 0) break;
    started++;
  }
  /* Items of threads that could not start run here. */
  for (size_t i = 0; i < n; ++i)
    if (i % (size_t)t == 0 || i % (size_t)t > (size_t)started) fn(arg, i);
  for (int i = 0; i < started; ++i) pthread_join(ids[i], NULL);
}

static void host_set_error(void *data, const char *fmt, ...) {
  (void)data;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(host_error, sizeof host_error, fmt, ap);
  va_end(ap);
}

static onyx_host_table host = {
    .struct_size = sizeof(onyx_host_table),
    .version = ONYX_ABI_VERSION,
    .log = host_log,
    .mem_alloc = host_mem_alloc,
    .mem_free = host_mem_free,
    .parallel_for = host_parallel_for,
    .num_threads = 4,
    .set_error = host_set_error,
};

/* ------------------------------------------------------------ kernels of either contract */

#define MAX_KERNELS 1024

/* The error channel of v3 callbacks. */
typedef struct check_sink {
  onyx_sink base; /* first: the callback's pointer is this struct's */
  char message[512];
} check_sink;

static void sink_set_error(onyx_sink *sink, const char *fmt, ...) {
  check_sink *s = (check_sink *)sink;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->message, sizeof s->message, fmt, ap);
  va_end(ap);
}

static check_sink sink_new(void) {
  return (check_sink){.base = {.struct_size = sizeof(onyx_sink),
                               .version = ONYX_ABI_LATEST,
                               .set_error = sink_set_error}};
}

/* One registration as the checks call it: a v1/v2 table (from a provider table, or
 * added to a v3 registry with add_table) or a v3 definition. */
struct library;

typedef struct ckernel {
  const onyx_kernel_table *v2;
  const onyx_kernel_def *v3;
  void *owner;               /* v1/v2: the provider state; v3: the instance */
  const struct library *lib; /* its library: device memory for a device provider */
  const char *domain, *op_type;
  int64_t since, until;
  uint32_t type_input; /* the first input constraint, for generated cases */
  uint64_t type_mask, host_inputs;
} ckernel;

static ckernel ckernel_v2(const onyx_kernel_table *k, void *owner) {
  bool has_host =
      k->struct_size >= offsetof(onyx_kernel_table, host_inputs) + sizeof k->host_inputs;
  return (ckernel){.v2 = k,
                   .owner = owner,
                   .domain = k->domain,
                   .op_type = k->op_type,
                   .since = k->since_opset,
                   .until = k->until_opset,
                   .type_input = k->type_input,
                   .type_mask = k->type_mask,
                   .host_inputs = has_host ? k->host_inputs : 0};
}

static ckernel ckernel_v3(const onyx_kernel_def *d, void *owner) {
  ckernel k = {.v3 = d,
               .owner = owner,
               .domain = d->domain,
               .op_type = d->op_type,
               .since = d->since_opset,
               .until = d->until_opset,
               .host_inputs = d->host_inputs};
  for (size_t i = 0; d->types && i < d->type_count; ++i)
    if (d->types[i].side == ONYX_TYPE_INPUT) {
      k.type_input = d->types[i].index;
      k.type_mask = d->types[i].types;
      break;
    }
  return k;
}

static bool k_has_create(const ckernel *k) {
  return k->v2 ? k->v2->create != NULL : k->v3->create != NULL;
}
static bool k_has_infer(const ckernel *k) {
  return k->v2 ? k->v2->infer != NULL : k->v3->infer != NULL;
}
static bool k_has_workspace(const ckernel *k) {
  return k->v2 ? k->v2->workspace != NULL : k->v3->workspace != NULL;
}
static void (*k_destroy_fn(const ckernel *k))(void *) {
  return k->v2 ? k->v2->destroy : k->v3->destroy;
}

static onyx_status k_create(const ckernel *k, const onyx_node_info *node, void **out_state,
                            char *err, size_t cap) {
  if (k->v2) /* NULL create: stateless */
    return k->v2->create ? k->v2->create(k->owner, node, out_state, err, cap) : ONYX_STATUS_OK;
  if (k->v3->create == NULL) {
    *out_state = k->owner; /* a v3 kernel without create runs on the instance */
    return ONYX_STATUS_OK;
  }
  check_sink sink = sink_new();
  onyx_status st = k->v3->create(k->owner, node, out_state, &sink.base);
  snprintf(err, cap, "%s", sink.message);
  return st;
}

static void k_destroy(const ckernel *k, void *state) {
  if (k_has_create(k) && k_destroy_fn(k)) k_destroy_fn(k)(state);
}

static onyx_status k_infer(const ckernel *k, void *state, const onyx_tensor *in, size_t n,
                           onyx_tensor *out, size_t n_out, char *err, size_t cap) {
  host_error[0] = '\0';
  if (k->v2) {
    onyx_status st = k->v2->infer(state, in, n, out, n_out);
    snprintf(err, cap, "%s", host_error);
    return st;
  }
  check_sink sink = sink_new();
  onyx_status st = k->v3->infer(state, in, n, out, n_out, &sink.base);
  snprintf(err, cap, "%s", sink.message);
  return st;
}

static onyx_status k_workspace(const ckernel *k, void *state, const onyx_tensor *in, size_t n,
                               onyx_workspace_requirement *req, char *err, size_t cap) {
  host_error[0] = '\0';
  if (k->v2) {
    onyx_status st = k->v2->workspace(state, in, n, req);
    snprintf(err, cap, "%s", host_error);
    return st;
  }
  check_sink sink = sink_new();
  onyx_status st = k->v3->workspace(state, in, n, req, &sink.base);
  snprintf(err, cap, "%s", sink.message);
  return st;
}

static onyx_status k_compute(const ckernel *k, void *state, onyx_compute_ctx *ctx,
                             const onyx_tensor *const *in, size_t n, char *err, size_t cap) {
  if (k->v2) return k->v2->compute(state, ctx, in, n);
  check_sink sink = sink_new();
  onyx_status st = k->v3->compute(state, ctx, in, n, &sink.base);
  snprintf(err, cap, "%s", sink.message);
  return st;
}

/* ------------------------------------------------------------ libraries */

typedef struct library {
  const char *path;
  void *dl;
  const onyx_provider_table *table;     /* v1/v2, when that is what is checked */
  const onyx_provider_factory *factory; /* v3 */
  uint32_t abi;
  void *state;     /* from open: the provider state or the instance */
  uint32_t device; /* onyx_device_kind of the memory its kernels use */
  int32_t ordinal; /* device 0's ordinal: its tensors' device_id */
  ckernel *kernels;
  size_t kernel_count;
} library;

static bool add_kernel(library *lib, ckernel k) {
  if (lib->kernel_count == MAX_KERNELS) return false;
  if (lib->kernels == NULL && (lib->kernels = calloc(MAX_KERNELS, sizeof *lib->kernels)) == NULL)
    return false;
  k.lib = lib;
  lib->kernels[lib->kernel_count++] = k;
  return true;
}

/* ------------------------------------------------------------ device memory */

/* A device provider's kernels read and write its device memory: inputs, outputs and
 * workspace views are staged there through its own device_alloc and copy (the v1/v2
 * table's or the v3 instance's), outputs copied back to the host after a sync. */
static bool on_device(const library *lib) { return lib && lib->device != ONYX_DEVICE_HOST; }

static onyx_status dev_alloc(const library *lib, uint64_t bytes, void **out) {
  if (lib->table) return lib->table->device_alloc(lib->state, bytes ? bytes : 1, out);
  check_sink sink = sink_new();
  return lib->factory->instance->device_alloc(lib->state, bytes ? bytes : 1, out, &sink.base);
}

static void dev_free(const library *lib, void *p) {
  if (p == NULL) return;
  if (lib->table)
    lib->table->device_free(lib->state, p);
  else
    lib->factory->instance->device_free(lib->state, p);
}

static onyx_status dev_copy(const library *lib, onyx_tensor *dst, const onyx_tensor *src) {
  if (lib->table) return lib->table->copy(lib->state, dst, src);
  check_sink sink = sink_new();
  return lib->factory->instance->copy(lib->state, dst, src, &sink.base);
}

static onyx_status dev_sync(const library *lib) {
  if (lib->table) return lib->table->sync ? lib->table->sync(lib->state) : ONYX_STATUS_OK;
  check_sink sink = sink_new();
  const onyx_instance_table *it = lib->factory->instance;
  return it->sync ? it->sync(lib->state, &sink.base) : ONYX_STATUS_OK;
}

static void *dev_stream(const library *lib) {
  if (!on_device(lib)) return NULL;
  if (lib->table) return lib->table->stream ? lib->table->stream(lib->state) : NULL;
  return lib->factory->instance->stream ? lib->factory->instance->stream(lib->state) : NULL;
}

/* A device copy of host tensor `host` (same geometry) in *out; NULL data on failure. */
static onyx_status dev_stage(const library *lib, const onyx_tensor *src, onyx_tensor *out) {
  *out = *src;
  out->device = lib->device;
  out->device_id = lib->ordinal;
  out->data = NULL;
  size_t bytes = (size_t)onyx_tensor_numel(src) * onyx_dtype_size(src->dtype);
  onyx_status st = dev_alloc(lib, bytes, &out->data);
  if (st == ONYX_STATUS_OK && bytes) st = dev_copy(lib, out, src);
  if (st != ONYX_STATUS_OK) {
    dev_free(lib, out->data);
    out->data = NULL;
  }
  return st;
}

/* `bytes` of device memory filled with POISON (a uint8 view copied from the host). */
static onyx_status dev_poisoned(const library *lib, uint64_t bytes, void **out) {
  onyx_tensor host_view = {.dtype = ONYX_DTYPE_UINT8, .rank = 1, .dims = {(int64_t)bytes}};
  host_view.data = chk_alloc_untracked(64, bytes ? (size_t)bytes : 1);
  if (host_view.data == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  memset(host_view.data, POISON, (size_t)bytes);
  onyx_tensor dev_view;
  onyx_status st = dev_stage(lib, &host_view, &dev_view);
  free(host_view.data);
  *out = dev_view.data;
  return st;
}

/* Replaces a device tensor's data by a host copy (the device block freed). */
static onyx_status dev_fetch(const library *lib, onyx_tensor *t, size_t bytes) {
  onyx_tensor host_view = *t;
  host_view.device = ONYX_DEVICE_HOST;
  host_view.device_id = 0;
  host_view.data = chk_alloc_untracked(64, bytes ? bytes : 1);
  if (host_view.data == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  onyx_status st = bytes ? dev_copy(lib, &host_view, t) : ONYX_STATUS_OK;
  if (st == ONYX_STATUS_OK) st = dev_sync(lib);
  dev_free(lib, t->data);
  *t = host_view;
  return st;
}

/* A v3 registry that records what an instance adds. */
typedef struct check_registry {
  onyx_kernel_registry base; /* first */
  library *lib;
  bool failed;
} check_registry;

static onyx_status reg_add(onyx_kernel_registry *reg, const onyx_kernel_def *def) {
  check_registry *r = (check_registry *)reg;
  if (def == NULL || def->struct_size < offsetof(onyx_kernel_def, compute) + sizeof def->compute ||
      def->domain == NULL || def->op_type == NULL || def->compute == NULL ||
      (def->type_count && def->types == NULL)) {
    r->failed = true;
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  return add_kernel(r->lib, ckernel_v3(def, r->lib->state)) ? ONYX_STATUS_OK
                                                            : ONYX_STATUS_OUT_OF_MEMORY;
}

static onyx_status reg_add_table(onyx_kernel_registry *reg, const onyx_kernel_table *table) {
  check_registry *r = (check_registry *)reg;
  if (table == NULL || table->op_type == NULL || table->domain == NULL || table->compute == NULL) {
    r->failed = true;
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  return add_kernel(r->lib, ckernel_v2(table, r->lib->state)) ? ONYX_STATUS_OK
                                                              : ONYX_STATUS_OUT_OF_MEMORY;
}

/* The instance's registrations, into lib->kernels. */
static onyx_status register_kernels(library *lib, char *err, size_t cap) {
  check_registry reg = {.base = {.struct_size = sizeof(onyx_kernel_registry),
                                 .version = ONYX_ABI_LATEST,
                                 .add = reg_add,
                                 .add_table = reg_add_table},
                        .lib = lib};
  reg.base.core_data = &reg;
  check_sink sink = sink_new();
  lib->kernel_count = 0;
  onyx_status st = lib->factory->instance->kernels(lib->state, &reg.base, &sink.base);
  snprintf(err, cap, "%s",
           sink.message[0] ? sink.message
           : reg.failed    ? "an incomplete registration"
                           : "");
  return st != ONYX_STATUS_OK ? st : reg.failed ? ONYX_STATUS_INVALID_ARGUMENT : ONYX_STATUS_OK;
}

/* dlopen and the entry at this core's version; no findings (the reference). */
static bool library_open(library *lib, const char *path, char *why, size_t cap) {
  memset(lib, 0, sizeof *lib);
  lib->path = path;
  lib->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib->dl == NULL) {
    snprintf(why, cap, "cannot load: %s", dlerror());
    return false;
  }
  void *sym = dlsym(lib->dl, ONYX_PROVIDER_ENTRY_SYMBOL);
  onyx_provider_entry_fn entry = NULL;
  if (sym) memcpy(&entry, &sym, sizeof entry);
  char err[512] = "";
  if (entry && entry(ONYX_ABI_VERSION, &lib->abi, &lib->table) == ONYX_STATUS_OK && lib->table &&
      lib->table->open &&
      lib->table->open(&host, NULL, 0, &lib->state, err, sizeof err) == ONYX_STATUS_OK) {
    for (size_t i = 0; i < lib->table->kernel_count; ++i)
      if (!add_kernel(lib, ckernel_v2(lib->table->kernels[i], lib->state))) break;
    return true;
  }
  lib->table = NULL;
  sym = dlsym(lib->dl, ONYX_PROVIDER_FACTORY_SYMBOL);
  onyx_provider_factory_fn fentry = NULL;
  if (sym) memcpy(&fentry, &sym, sizeof fentry);
  check_sink sink = sink_new();
  if (fentry && fentry(ONYX_ABI_LATEST, &lib->abi, &lib->factory) == ONYX_STATUS_OK &&
      lib->factory && lib->factory->open && lib->factory->instance &&
      lib->factory->open(&host, 0, NULL, 0, &lib->state, &sink.base) == ONYX_STATUS_OK &&
      register_kernels(lib, err, sizeof err) == ONYX_STATUS_OK)
    return true;
  snprintf(why, cap, "no usable provider%s%s", err[0] || sink.message[0] ? ": " : "",
           err[0] ? err : sink.message);
  return false;
}

static void library_close(library *lib) {
  if (lib->table && lib->table->close && lib->state) lib->table->close(lib->state);
  if (lib->factory && lib->factory->instance && lib->factory->instance->close && lib->state)
    lib->factory->instance->close(lib->state);
  lib->state = NULL;
  free(lib->kernels);
  lib->kernels = NULL;
  lib->kernel_count = 0;
  /* Left loaded: a provider's threads or atexit handlers may still point into it. */
}

/* ------------------------------------------------------------ negotiation and tables */

static onyx_provider_entry_fn find_entry(void *dl) {
  void *sym = dlsym(dl, ONYX_PROVIDER_ENTRY_SYMBOL);
  onyx_provider_entry_fn entry = NULL;
  if (sym) memcpy(&entry, &sym, sizeof entry);
  return entry;
}

/* The entry at the core's version, at one below the lowest ABI and at a newer core. */
static bool check_negotiation(onyx_provider_entry_fn entry, library *lib) {
  const onyx_provider_table *sentinel = (const onyx_provider_table *)&host, *table = sentinel;
  uint32_t abi = 0;
  onyx_status st = entry(ONYX_ABI_VERSION, &abi, &table);
  if (st != ONYX_STATUS_OK || table == sentinel || table == NULL || abi < ABI_LOWEST ||
      abi > ONYX_ABI_VERSION) {
    chk_fail("negotiation", "at core ABI %u: %s, answered ABI %u, %s (the core speaks %u..%u)",
             ONYX_ABI_VERSION, onyx_status_str(st), abi,
             table && table != sentinel ? "a table" : "no table", ABI_LOWEST, ONYX_ABI_VERSION);
    return false;
  }
  lib->table = table;
  lib->abi = abi;
  uint32_t low_abi = 0;
  const onyx_provider_table *low = sentinel;
  st = entry(0, &low_abi, &low);
  bool refused = st != ONYX_STATUS_OK;
  if (st == ONYX_STATUS_OK)
    chk_fail("negotiation",
             "accepts a core of ABI 0 (answered %u); it must refuse with ABI_MISMATCH", low_abi);
  else if (low != sentinel)
    chk_fail("negotiation", "refusing ABI 0 it still wrote *out_table");
  else if (st != ONYX_STATUS_ABI_MISMATCH || low_abi < ABI_LOWEST)
    chk_fail("negotiation",
             "refusing ABI 0: %s with ABI %u; expected ABI_MISMATCH naming the "
             "lowest ABI it speaks",
             onyx_status_str(st), low_abi);
  uint32_t high_abi = 0;
  const onyx_provider_table *high = sentinel;
  st = entry(ONYX_ABI_VERSION + 5, &high_abi, &high);
  if (st != ONYX_STATUS_OK || high_abi > ONYX_ABI_VERSION + 5 || high == sentinel)
    chk_fail("negotiation",
             "at a newer core (ABI %u): %s, ABI %u; it must answer the version it "
             "speaks",
             ONYX_ABI_VERSION + 5, onyx_status_str(st), high_abi);
  bool low_ok = refused && low == sentinel && low_abi >= ABI_LOWEST;
  if (st == ONYX_STATUS_OK && high != sentinel && low_ok)
    chk_ok("negotiation", "ABI %u at core %u; refuses ABI 0 (lowest %u); ABI %u at core %u", abi,
           ONYX_ABI_VERSION, low_abi, high_abi, ONYX_ABI_VERSION + 5);
  return true;
}

#define HAS(t, type, field) ((t)->struct_size >= offsetof(type, field) + sizeof((t)->field))

static bool check_kernel_table(size_t i, const onyx_kernel_table *k) {
  char what[64];
  snprintf(what, sizeof what, "kernel %zu", i);
  if (k == NULL) {
    chk_fail("tables", "%s is NULL", what);
    return false;
  }
  if (!HAS(k, onyx_kernel_table, compute) || k->struct_size > sizeof *k) {
    chk_fail("tables", "%s: struct_size %u, expected %zu..%zu", what, k->struct_size,
             offsetof(onyx_kernel_table, compute) + sizeof k->compute, sizeof *k);
    return false;
  }
  const char *bad =
      k->domain == NULL                                 ? "domain NULL"
      : k->op_type == NULL || !k->op_type[0]            ? "op_type empty"
      : k->compute == NULL                              ? "compute NULL"
      : k->version < 1 || k->version > ONYX_ABI_VERSION ? "version outside 1..the header's ABI"
      : k->since_opset < 1                              ? "since_opset < 1"
      : k->until_opset != 0 && k->until_opset < k->since_opset ? "until_opset < since_opset"
      : k->type_input >= MAX_IN * 16                           ? "type_input out of range"
      : k->create != NULL && k->destroy == NULL ? "create without destroy (states leak)"
                                                : NULL;
  if (bad) {
    chk_fail("tables", "%s (%s::%s): %s", what, k->domain ? k->domain : "?",
             k->op_type ? k->op_type : "?", bad);
    return false;
  }
  return true;
}

/* Two registrations of one op whose opsets and types overlap: the second never runs. */
static void check_overlaps(const library *lib) {
  for (size_t i = 0; i < lib->kernel_count; ++i)
    for (size_t j = i + 1; j < lib->kernel_count; ++j) {
      const ckernel *a = &lib->kernels[i], *b = &lib->kernels[j];
      if (!a->op_type || !b->op_type || !a->domain || !b->domain) continue;
      if (strcmp(a->op_type, b->op_type) || strcmp(a->domain, b->domain)) continue;
      int64_t a_end = a->until ? a->until : INT64_MAX, b_end = b->until ? b->until : INT64_MAX;
      bool opsets = a->since <= b_end && b->since <= a_end;
      bool types = a->type_input == b->type_input &&
                   (!a->type_mask || !b->type_mask || (a->type_mask & b->type_mask));
      /* A registration with supports() may decline and leave the node to the next. */
      bool final = (a->v2 && a->v2->supports == NULL) || (a->v3 && a->v3->supports == NULL);
      if (opsets && types && final)
        chk_fail("tables",
                 "kernels %zu and %zu both claim %s::%s (opsets and types overlap): the "
                 "second never runs",
                 i, j, a->domain, a->op_type);
    }
}

static bool check_tables(const library *lib) {
  const onyx_provider_table *t = lib->table;
  bool ok = true;
  if (!HAS(t, onyx_provider_table, kernel_count) || t->struct_size > sizeof *t) {
    chk_fail("tables", "provider table struct_size %u, expected %zu..%zu", t->struct_size,
             offsetof(onyx_provider_table, kernel_count) + sizeof t->kernel_count, sizeof *t);
    return false;
  }
  if (t->abi_version != lib->abi) {
    chk_fail("tables", "table says ABI %u, the entry answered %u", t->abi_version, lib->abi);
    ok = false;
  }
  if (t->name == NULL || !t->name[0] || strlen(t->name) > 31) {
    chk_fail("tables", "name must be 1..31 characters");
    ok = false;
  }
  if (t->open == NULL || t->close == NULL) {
    chk_fail("tables", "open and close are required");
    return false;
  }
  if (t->kernel_count > 0 && t->kernels == NULL) {
    chk_fail("tables", "%zu kernels but no list", t->kernel_count);
    return false;
  }
  if (t->device != ONYX_DEVICE_HOST &&
      (t->device_alloc == NULL || t->device_free == NULL || t->copy == NULL)) {
    chk_fail("tables", "a device provider needs device_alloc, device_free and copy");
    ok = false;
  }
  for (size_t i = 0; i < t->kernel_count; ++i) ok = check_kernel_table(i, t->kernels[i]) && ok;
  if (ok)
    chk_ok("tables", "provider '%s': struct_size %u, ABI %u, device %u, %zu kernels", t->name,
           t->struct_size, t->abi_version, t->device, t->kernel_count);
  return ok;
}

static void close_null(void *arg) {
  const onyx_provider_table *t = arg;
  t->close(NULL);
  for (size_t i = 0; i < t->kernel_count; ++i)
    if (t->kernels[i]->destroy) t->kernels[i]->destroy(NULL);
}

static bool check_open(library *lib) {
  const onyx_provider_table *t = lib->table;
  if (chk_isolated("NULL-safety", close_null, (void *)(uintptr_t)t))
    chk_ok("NULL-safety", "close(NULL) and every kernel's destroy(NULL) return");
  char err[512] = "";
  void *state = NULL;
  onyx_status st = t->open(&host, NULL, 0, &state, err, sizeof err);
  if (st != ONYX_STATUS_OK) {
    chk_fail("open", "%s: %s", onyx_status_str(st), err[0] ? err : "(no message)");
    return false;
  }
  t->close(state);
  state = NULL;
  st = t->open(&host, NULL, 0, &state, err, sizeof err);
  if (st != ONYX_STATUS_OK) {
    chk_fail("open", "a second open after close: %s: %s", onyx_status_str(st), err);
    return false;
  }
  chk_ok("open", "open, close, open again");
  lib->state = state;
  if (t->probe == NULL) {
    chk_ok("probe", "none (always usable)");
    return true;
  }
  char why[256] = "";
  if (t->probe(state, why, sizeof why)) {
    chk_ok("probe", "usable");
    return true;
  }
  if (!why[0])
    chk_fail("probe", "declined without saying why (write one line into `why`)");
  else
    chk_fail("probe", "declined: %s (the kernel checks need its device)", why);
  return false;
}

/* ------------------------------------------------------------ v3: the factory */

static onyx_provider_factory_fn find_factory(void *dl) {
  void *sym = dlsym(dl, ONYX_PROVIDER_FACTORY_SYMBOL);
  onyx_provider_factory_fn entry = NULL;
  if (sym) memcpy(&entry, &sym, sizeof entry);
  return entry;
}

/* The factory entry at this core's ABI, at the ABI below v3 and at a newer core. */
static bool check_factory_negotiation(onyx_provider_factory_fn entry, library *lib) {
  const onyx_provider_factory *sentinel = (const onyx_provider_factory *)&host, *f = sentinel;
  uint32_t abi = 0;
  onyx_status st = entry(ONYX_ABI_LATEST, &abi, &f);
  if (st != ONYX_STATUS_OK || f == sentinel || f == NULL || abi < ONYX_ABI_V3 ||
      abi > ONYX_ABI_LATEST) {
    chk_fail("negotiation", "factory at core ABI %u: %s, answered ABI %u, %s (v3 is %u..%u)",
             ONYX_ABI_LATEST, onyx_status_str(st), abi,
             f && f != sentinel ? "a factory" : "no factory", ONYX_ABI_V3, ONYX_ABI_LATEST);
    return false;
  }
  lib->factory = f;
  lib->abi = abi;
  uint32_t low_abi = 0, high_abi = 0;
  const onyx_provider_factory *low = sentinel, *high = sentinel;
  onyx_status low_st = entry(ONYX_ABI_V3 - 1, &low_abi, &low);
  onyx_status high_st = entry(ONYX_ABI_LATEST + 5, &high_abi, &high);
  bool ok = true;
  if (low_st == ONYX_STATUS_OK || low != sentinel || low_abi < ONYX_ABI_V3) {
    chk_fail("negotiation",
             "factory at a core of ABI %u: %s, ABI %u%s; it must refuse with ABI_MISMATCH "
             "naming ABI %u and leave *out_factory alone",
             ONYX_ABI_V3 - 1, onyx_status_str(low_st), low_abi,
             low != sentinel ? ", *out_factory written" : "", ONYX_ABI_V3);
    ok = false;
  }
  if (high_st != ONYX_STATUS_OK || high == sentinel || high_abi > ONYX_ABI_LATEST + 5) {
    chk_fail("negotiation",
             "factory at a newer core (ABI %u): %s, ABI %u; it must answer the version it speaks",
             ONYX_ABI_LATEST + 5, onyx_status_str(high_st), high_abi);
    ok = false;
  }
  if (ok)
    chk_ok("negotiation", "factory: ABI %u at core %u; refuses ABI %u; ABI %u at core %u", abi,
           ONYX_ABI_LATEST, ONYX_ABI_V3 - 1, high_abi, ONYX_ABI_LATEST + 5);
  return true;
}

static bool check_factory(const library *lib) {
  const onyx_provider_factory *f = lib->factory;
  if (f->struct_size < offsetof(onyx_provider_factory, instance) + sizeof f->instance ||
      f->struct_size > sizeof *f) {
    chk_fail("tables", "factory struct_size %u, expected %zu..%zu", f->struct_size,
             offsetof(onyx_provider_factory, instance) + sizeof f->instance, sizeof *f);
    return false;
  }
  const onyx_instance_table *it = f->instance;
  const char *bad = f->abi_version != lib->abi ? "abi_version differs from what the entry answered"
                    : f->name == NULL || !f->name[0] || strlen(f->name) > 31
                        ? "name must be 1..31 characters"
                    : !f->device_count || !f->device_info || !f->open
                        ? "device_count, device_info and open are required"
                    : it == NULL ? "no instance table"
                    : it->struct_size < offsetof(onyx_instance_table, kernels) + sizeof it->kernels
                        ? "instance table too small"
                    : !it->close || !it->kernels ? "instance close and kernels are required"
                                                 : NULL;
  if (bad) {
    chk_fail("tables", "factory '%s': %s", f->name ? f->name : "?", bad);
    return false;
  }
  chk_ok("tables", "factory '%s': struct_size %u, ABI %u; instance table struct_size %u", f->name,
         f->struct_size, f->abi_version, it->struct_size);
  return true;
}

static bool check_kernel_def(size_t i, const onyx_kernel_def *d) {
  const char *bad =
      d->since_opset < 1                                         ? "since_opset < 1"
      : d->until_opset != 0 && d->until_opset < d->since_opset   ? "until_opset < since_opset"
      : d->version < ONYX_ABI_V3 || d->version > ONYX_ABI_LATEST ? "version is not 3"
      : d->create != NULL && d->destroy == NULL ? "create without destroy (states leak)"
                                                : NULL;
  for (size_t t = 0; !bad && t < d->type_count; ++t)
    if (d->types[t].side > ONYX_TYPE_OUTPUT) bad = "a type constraint with a bad side";
  if (bad) chk_fail("tables", "kernel %zu (%s::%s): %s", i, d->domain, d->op_type, bad);
  return bad == NULL;
}

static void instance_close_null(void *arg) {
  const library *lib = arg;
  lib->factory->instance->close(NULL);
  for (size_t i = 0; i < lib->kernel_count; ++i) {
    void (*destroy)(void *) = k_destroy_fn(&lib->kernels[i]);
    if (destroy) destroy(NULL);
  }
}

/* Devices, open / close / open, the instance's registrations. */
static bool check_instance(library *lib) {
  const onyx_provider_factory *f = lib->factory;
  check_sink sink = sink_new();
  uint32_t count = 0;
  onyx_status st = f->device_count(NULL, 0, &count, &sink.base);
  if (st != ONYX_STATUS_OK || count == 0) {
    chk_fail("devices", "%s, %u devices%s%s (the kernel checks need a device)", onyx_status_str(st),
             count, sink.message[0] ? ": " : "", sink.message);
    return false;
  }
  char names[512] = "";
  for (uint32_t i = 0; i < count && i < 16; ++i) {
    onyx_device_info info = {.struct_size = sizeof info, .version = ONYX_ABI_LATEST};
    sink = sink_new();
    st = f->device_info(i, &info, &sink.base);
    if (st != ONYX_STATUS_OK || memchr(info.name, '\0', sizeof info.name) == NULL ||
        info.kind > ONYX_DEVICE_OTHER) {
      chk_fail("devices", "device %u: %s, name %s, kind %u", i, onyx_status_str(st),
               memchr(info.name, '\0', sizeof info.name) ? "ok" : "not NUL-terminated", info.kind);
      return false;
    }
    size_t used = strlen(names);
    snprintf(names + used, sizeof names - used, "%s'%s' (kind %u, ordinal %d)", i ? ", " : "",
             info.name, info.kind, info.ordinal);
    if (i == 0) {
      lib->device = info.kind;
      lib->ordinal = info.ordinal;
    }
  }
  chk_ok("devices", "%u: %s", count, names);
  void *inst = NULL;
  for (int round = 0; round < 2; ++round) {
    sink = sink_new();
    inst = NULL;
    st = f->open(&host, 0, NULL, 0, &inst, &sink.base);
    if (st == ONYX_STATUS_DEVICE_UNAVAILABLE) {
      if (sink.message[0])
        chk_fail("open", "device 0 declined: %s (the kernel checks need it)", sink.message);
      else
        chk_fail("open", "device 0 declined without saying why (set_error on the sink)");
      return false;
    }
    if (st != ONYX_STATUS_OK || inst == NULL) {
      chk_fail("open", "%sdevice 0: %s: %s", round ? "a second open after close, " : "",
               onyx_status_str(st), sink.message[0] ? sink.message : "(no message)");
      return false;
    }
    if (round == 0) f->instance->close(inst);
  }
  chk_ok("open", "device 0: open, close, open again");
  lib->state = inst;
  char err[512];
  st = register_kernels(lib, err, sizeof err);
  if (st != ONYX_STATUS_OK) {
    chk_fail("tables", "kernels(): %s: %s", onyx_status_str(st), err);
    return false;
  }
  bool ok = true;
  for (size_t i = 0; i < lib->kernel_count; ++i) {
    const ckernel *k = &lib->kernels[i];
    ok = (k->v2 ? check_kernel_table(i, k->v2) : check_kernel_def(i, k->v3)) && ok;
  }
  if (ok) chk_ok("tables", "the instance registered %zu kernels", lib->kernel_count);
  if (chk_isolated("NULL-safety", instance_close_null, lib))
    chk_ok("NULL-safety", "instance close(NULL) and every kernel's destroy(NULL) return");
  return ok;
}

/* ------------------------------------------------------------ cases */

typedef struct kcase {
  size_t n_in;
  onyx_tensor in[MAX_IN];
  const onyx_tensor *in_ptr[MAX_IN];
  bool present[MAX_IN], out_present[MAX_OUT];
  uint32_t dtypes[MAX_IN];
  onyx_node_info node;
  char shape[96]; /* for messages: "float32 [4,4] + [4]" */
} kcase;

static void case_free(kcase *c) {
  for (size_t i = 0; i < c->n_in; ++i) free(c->in[i].data);
  memset(c, 0, sizeof *c);
}

/* Case `variant` of `arity` inputs for kernel k: see the file's comment. */
static bool case_make(const ckernel *k, uint32_t t, size_t arity, int variant, kcase *c) {
  memset(c, 0, sizeof *c);
  if (t == ONYX_DTYPE_UNDEFINED || k->type_input >= arity) return false;
  static const int64_t r2[] = {4, 4}, r3[] = {2, 3, 4}, r1[] = {4};
  bool rank3 = variant & 1, trail_vec = variant & 2, trail_int = variant & 4;
  uint64_t host_inputs = k->host_inputs;
  c->n_in = arity;
  snprintf(c->shape, sizeof c->shape, "%s", "");
  for (size_t i = 0; i < arity; ++i) {
    onyx_tensor *x = &c->in[i];
    bool host_int = (host_inputs >> i) & 1;
    bool trailing = i > 0 && i != k->type_input;
    x->dtype = host_int || (trailing && trail_int) ? ONYX_DTYPE_INT64 : t;
    const int64_t *dims = host_int ? r1 : trailing && trail_vec ? r1 : rank3 ? r3 : r2;
    x->rank = host_int ? 1 : trailing && trail_vec ? 1 : rank3 ? 3 : 2;
    if (host_int)
      x->dims[0] = 1;
    else
      memcpy(x->dims, dims, x->rank * sizeof *dims);
    size_t n = (size_t)onyx_tensor_numel(x);
    x->data = malloc(n * onyx_dtype_size(x->dtype));
    if (x->data == NULL) return false;
    if (host_int)
      *(int64_t *)x->data = 1;
    else
      chk_fill_random(x->dtype, x->data, n);
    c->present[i] = true;
    c->dtypes[i] = x->dtype;
    c->in_ptr[i] = x;
    size_t used = strlen(c->shape);
    snprintf(c->shape + used, sizeof c->shape - used, "%s%s[", i ? " + " : "",
             x->dtype == ONYX_DTYPE_INT64 && t != ONYX_DTYPE_INT64 ? "int64 " : "");
    for (uint32_t d = 0; d < x->rank; ++d) {
      used = strlen(c->shape);
      snprintf(c->shape + used, sizeof c->shape - used, "%s%lld", d ? "," : "",
               (long long)x->dims[d]);
    }
    used = strlen(c->shape);
    snprintf(c->shape + used, sizeof c->shape - used, "]");
  }
  c->out_present[0] = true;
  c->node = (onyx_node_info){
      .struct_size = sizeof(onyx_node_info),
      .version = ONYX_ABI_VERSION,
      .name = "onyx-check-provider",
      .domain = k->domain,
      .op_type = k->op_type,
      .opset = k->since,
      .input_count = arity,
      .output_count = 1,
      .input_present = c->present,
      .output_present = c->out_present,
      .input_dtypes = c->dtypes,
  };
  return true;
}

/* ------------------------------------------------------------ running a kernel */

typedef struct out_buf {
  onyx_tensor view;
  size_t bytes;
  bool allocated;
} out_buf;

typedef struct check_ctx {
  onyx_compute_ctx base; /* first: the kernel's ctx pointer is this struct's */
  const library *lib;    /* outputs go to its device memory when it has one */
  out_buf outs[MAX_OUT];
  char error[512];
} check_ctx;

static onyx_status ctx_alloc_output(onyx_compute_ctx *ctx, size_t index, uint32_t dtype,
                                    uint32_t rank, const int64_t *dims, onyx_tensor **out_view) {
  check_ctx *c = (check_ctx *)ctx;
  if (index >= MAX_OUT || c->outs[index].allocated || rank > ONYX_MAX_RANK ||
      onyx_dtype_size(dtype) == 0)
    return ONYX_STATUS_INVALID_ARGUMENT;
  out_buf *o = &c->outs[index];
  o->view = (onyx_tensor){.dtype = dtype, .rank = rank};
  for (uint32_t d = 0; d < rank; ++d) {
    if (dims[d] < 0 || dims[d] > (1 << 24)) return ONYX_STATUS_INVALID_ARGUMENT;
    o->view.dims[d] = dims[d];
  }
  o->bytes = (size_t)onyx_tensor_numel(&o->view) * onyx_dtype_size(dtype);
  void *p = NULL;
  if (on_device(c->lib)) {
    /* The core's allocation, not the kernel's: not counted as the kernel's heap use. */
    bool was = chk_alloc_count_suspend();
    onyx_status st = dev_poisoned(c->lib, o->bytes, &p);
    chk_alloc_count_restore(was);
    if (st != ONYX_STATUS_OK) return ONYX_STATUS_OUT_OF_MEMORY;
    o->view.device = c->lib->device;
    o->view.device_id = c->lib->ordinal;
  } else {
    if (host_mem_alloc(NULL, ONYX_REQUESTER_ACTIVATIONS, o->bytes, 64, "output", &p) !=
        ONYX_STATUS_OK)
      return ONYX_STATUS_OUT_OF_MEMORY;
    memset(p, POISON, o->bytes);
  }
  o->view.data = p;
  o->allocated = true;
  *out_view = &o->view;
  return ONYX_STATUS_OK;
}

static onyx_status ctx_alias_output(onyx_compute_ctx *ctx, size_t index, size_t input_index) {
  (void)ctx;
  (void)index;
  (void)input_index;
  return ONYX_STATUS_UNSUPPORTED; /* the checks own every output */
}

static void ctx_set_error(onyx_compute_ctx *ctx, const char *fmt, ...) {
  check_ctx *c = (check_ctx *)ctx;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->error, sizeof c->error, fmt, ap);
  va_end(ap);
}

/* One run's outcome: the compute status, the kernel's message, the outputs (owned). */
typedef struct run_result {
  onyx_status status;
  char error[512];
  out_buf outs[MAX_OUT];
  bool infer_ok;
  onyx_tensor inferred[MAX_OUT];
  onyx_workspace_requirement req;
  uint64_t heap_allocs; /* during compute, when counting */
} run_result;

static void result_free(run_result *r) {
  for (size_t i = 0; i < MAX_OUT; ++i) free(r->outs[i].view.data);
  memset(r, 0, sizeof *r);
}

typedef struct run_spec {
  const ckernel *k;
  const kcase *c;
  int short_region; /* the region handed one byte short, -1 for none */
  bool count_allocs;
} run_spec;

/* create → infer → workspace → compute → destroy, with the views the requirement
 * asks for (one of them short when asked). */
static onyx_status run_kernel(const run_spec *s, run_result *r) {
  memset(r, 0, sizeof *r);
  const ckernel *k = s->k;
  void *state = NULL;
  char err[512] = "";
  {
    onyx_status st = k_create(k, &s->c->node, &state, err, sizeof err);
    if (st != ONYX_STATUS_OK) {
      snprintf(r->error, sizeof r->error, "create: %s: %s", onyx_status_str(st), err);
      return r->status = st;
    }
  }
  onyx_tensor geometry[MAX_IN];
  for (size_t i = 0; i < s->c->n_in; ++i) geometry[i] = s->c->in[i];
  if (k_has_infer(k)) {
    onyx_status st = k_infer(k, state, geometry, s->c->n_in, r->inferred, 1, err, sizeof err);
    r->infer_ok = st == ONYX_STATUS_OK;
    if (st != ONYX_STATUS_OK && st != ONYX_STATUS_UNSUPPORTED) {
      snprintf(r->error, sizeof r->error, "infer: %s: %s", onyx_status_str(st), err);
      k_destroy(k, state);
      return r->status = st;
    }
  }
  r->req = (onyx_workspace_requirement){.struct_size = sizeof r->req, .version = ONYX_ABI_VERSION};
  if (k_has_workspace(k)) {
    onyx_status st = k_workspace(k, state, geometry, s->c->n_in, &r->req, err, sizeof err);
    if (st != ONYX_STATUS_OK || r->req.count > ONYX_MAX_WORKSPACE_REGIONS) {
      snprintf(r->error, sizeof r->error, "workspace: %s, %u regions: %s", onyx_status_str(st),
               r->req.count, err);
      k_destroy(k, state);
      return r->status = st != ONYX_STATUS_OK ? st : ONYX_STATUS_INVALID_ARGUMENT;
    }
  }
  const library *lib = on_device(k->lib) ? k->lib : NULL;
  onyx_workspace_view views[ONYX_MAX_WORKSPACE_REGIONS] = {{0}};
  check_ctx ctx = {.base = {.struct_size = sizeof(onyx_compute_ctx),
                            .version = ONYX_ABI_VERSION,
                            .stream = dev_stream(lib),
                            .alloc_output = ctx_alloc_output,
                            .alias_output = ctx_alias_output,
                            .set_error = ctx_set_error,
                            .workspace = views,
                            .workspace_count = r->req.count},
                   .lib = lib};
  ctx.base.core_data = &ctx;
  /* Inputs on the device, but for host inputs (read on the host) and geometry-only
   * ones (never touched). */
  onyx_tensor staged[MAX_IN];
  const onyx_tensor *inputs[MAX_IN];
  uint64_t geometry_only =
      k->v2 ? (k->v2->struct_size >=
                       offsetof(onyx_kernel_table, geometry_inputs) + sizeof k->v2->geometry_inputs
                   ? k->v2->geometry_inputs
                   : 0)
            : k->v3->geometry_inputs;
  onyx_status st = ONYX_STATUS_OK;
  for (size_t i = 0; i < s->c->n_in; ++i) {
    inputs[i] = s->c->in_ptr[i];
    staged[i].data = NULL;
    bool stays = ((k->host_inputs | geometry_only) >> i) & 1;
    if (lib && !stays && st == ONYX_STATUS_OK) {
      st = dev_stage(lib, s->c->in_ptr[i], &staged[i]);
      inputs[i] = &staged[i];
    }
  }
  for (uint32_t i = 0; st == ONYX_STATUS_OK && i < r->req.count; ++i) {
    const onyx_workspace_region *g = &r->req.regions[i];
    uint64_t bytes = g->bytes - ((int)i == s->short_region && g->bytes > 0);
    size_t align = g->alignment ? g->alignment : 64;
    views[i] = (onyx_workspace_view){.name = g->name, .bytes = bytes};
    if (g->bytes > (1u << 30))
      st = ONYX_STATUS_OUT_OF_MEMORY;
    else if (lib)
      st = dev_poisoned(lib, bytes, &views[i].data);
    else if ((st = host_mem_alloc(NULL, 0, bytes, (uint32_t)align, "workspace", &views[i].data)) ==
             ONYX_STATUS_OK)
      memset(views[i].data, POISON, (size_t)bytes);
    if (st != ONYX_STATUS_OK)
      snprintf(r->error, sizeof r->error, "workspace region %u: %llu bytes not available", i,
               (unsigned long long)g->bytes);
  }
  if (st == ONYX_STATUS_OK) {
    if (s->count_allocs) {
      serial_only = true;
      chk_alloc_count_begin();
    }
    err[0] = '\0';
    st = k_compute(k, state, &ctx.base, inputs, s->c->n_in, err, sizeof err);
    if (s->count_allocs) {
      r->heap_allocs = chk_alloc_count_end();
      serial_only = false;
    }
    if (lib && dev_sync(lib) != ONYX_STATUS_OK && st == ONYX_STATUS_OK)
      st = ONYX_STATUS_PROVIDER_ERROR;
    snprintf(r->error, sizeof r->error, "%s", ctx.error[0] ? ctx.error : err);
  }
  /* Outputs back on the host, where the checks compare them. */
  for (size_t o = 0; lib && o < MAX_OUT; ++o)
    if (ctx.outs[o].allocated &&
        dev_fetch(lib, &ctx.outs[o].view, ctx.outs[o].bytes) != ONYX_STATUS_OK)
      st = st == ONYX_STATUS_OK ? ONYX_STATUS_PROVIDER_ERROR : st;
  for (uint32_t i = 0; i < r->req.count; ++i) {
    if (lib)
      dev_free(lib, views[i].data);
    else
      free(views[i].data);
  }
  for (size_t i = 0; lib && i < s->c->n_in; ++i) dev_free(lib, staged[i].data);
  k_destroy(k, state);
  memcpy(r->outs, ctx.outs, sizeof r->outs);
  return r->status = st;
}

/* ------------------------------------------------------------ per-kernel checks */

typedef struct kernel_job {
  const ckernel *k;
  const library *ref;
  int threads;
} kernel_job;

static bool find_case(const ckernel *k, uint32_t dtype, kcase *c, run_result *r) {
  for (size_t arity = 1; arity <= MAX_IN; ++arity)
    for (int variant = 0; variant < 8; ++variant) {
      if (!case_make(k, dtype, arity, variant, c)) {
        case_free(c);
        continue;
      }
      run_spec s = {k, c, -1, false};
      if (run_kernel(&s, r) == ONYX_STATUS_OK && r->outs[0].allocated) return true;
      result_free(r);
      case_free(c);
    }
  return false;
}

static bool same_requirement(const onyx_workspace_requirement *a,
                             const onyx_workspace_requirement *b) {
  if (a->count != b->count) return false;
  for (uint32_t i = 0; i < a->count; ++i) {
    const onyx_workspace_region *x = &a->regions[i], *y = &b->regions[i];
    if (x->bytes != y->bytes || x->alignment != y->alignment || x->lifetime != y->lifetime ||
        (x->name != y->name && (!x->name || !y->name || strcmp(x->name, y->name))))
      return false;
  }
  return true;
}

static bool poisoned(const out_buf *o) {
  const unsigned char *p = o->view.data;
  for (size_t i = 0; i < o->bytes; ++i)
    if (p[i] != POISON) return false;
  return true;
}

static void check_workspace(const ckernel *k, const kcase *c, const run_result *first) {
  if (!k_has_workspace(k)) return;
  run_result again;
  run_spec s = {k, c, -1, false};
  run_kernel(&s, &again);
  bool pure = same_requirement(&first->req, &again.req);
  result_free(&again);
  if (!pure) {
    chk_fail("workspace", "the same geometry gave two different requirements");
    return;
  }
  uint64_t total = 0;
  int regions = 0;
  for (uint32_t i = 0; i < first->req.count; ++i) {
    const onyx_workspace_region *g = &first->req.regions[i];
    if (g->name == NULL || (g->alignment & (g->alignment - 1)) != 0 || g->lifetime > 1) {
      chk_fail("workspace", "region %u: name %s, alignment %u, lifetime %u", i,
               g->name ? g->name : "NULL", g->alignment, g->lifetime);
      return;
    }
    if (g->bytes == 0) continue;
    regions++;
    total += g->bytes;
    run_result r;
    s.short_region = (int)i;
    onyx_status st = run_kernel(&s, &r);
    bool clean = true;
    for (size_t o = 0; o < MAX_OUT; ++o)
      clean = clean && (!r.outs[o].allocated || poisoned(&r.outs[o]));
    if (st != ONYX_STATUS_WORKSPACE_TOO_SMALL)
      chk_fail("workspace",
               "region '%s' one byte short (%llu of %llu): %s, expected "
               "WORKSPACE_TOO_SMALL",
               g->name, (unsigned long long)(g->bytes - 1), (unsigned long long)g->bytes,
               onyx_status_str(st));
    else if (!clean)
      chk_fail("workspace",
               "region '%s' one byte short: refused, but the output was written "
               "(validate before writing)",
               g->name);
    result_free(&r);
    if (st != ONYX_STATUS_WORKSPACE_TOO_SMALL || !clean) return;
  }
  if (regions == 0)
    chk_ok("workspace", "pure; no region used on this case's route");
  else
    chk_ok("workspace",
           "pure; %d region%s (%llu bytes), each refused one byte short with nothing written",
           regions, regions == 1 ? "" : "s", (unsigned long long)total);
}

typedef struct thread_run {
  run_spec spec;
  run_result result;
} thread_run;

static void *thread_main(void *p) {
  thread_run *t = p;
  run_kernel(&t->spec, &t->result);
  return NULL;
}

static bool same_outputs(const run_result *a, const run_result *b) {
  for (size_t o = 0; o < MAX_OUT; ++o) {
    if (a->outs[o].allocated != b->outs[o].allocated || a->outs[o].bytes != b->outs[o].bytes)
      return false;
    if (a->outs[o].allocated &&
        memcmp(a->outs[o].view.data, b->outs[o].view.data, a->outs[o].bytes))
      return false;
  }
  return true;
}

static void check_threads(const ckernel *k, const kcase *c, const run_result *first, int threads) {
  thread_run runs[64];
  pthread_t ids[64];
  int started = 0;
  for (int i = 0; i < threads; ++i) {
    runs[i] = (thread_run){.spec = {k, c, -1, false}};
    if (pthread_create(&ids[i], NULL, thread_main, &runs[i]) != 0) break;
    started++;
  }
  int differ = 0;
  for (int i = 0; i < started; ++i) {
    pthread_join(ids[i], NULL);
    if (runs[i].result.status != ONYX_STATUS_OK || !same_outputs(first, &runs[i].result)) differ++;
    result_free(&runs[i].result);
  }
  if (differ)
    chk_fail("threads", "%d of %d concurrent runs differ from the first run (bitwise)", differ,
             started);
  else
    chk_ok("threads", "%d concurrent runs, %d pool threads: identical to the first", started,
           pool_threads);
}

static void check_allocs(const ckernel *k, const kcase *c) {
  if (!chk_alloc_counting()) {
    chk_skip("heap", "not counted in a sanitizer build");
    return;
  }
  run_result r;
  run_spec s = {k, c, -1, true};
  run_kernel(&s, &r);
  if (r.heap_allocs)
    chk_fail("heap",
             "compute made %llu heap allocations; scratch comes from workspace(), kept "
             "memory from host->mem_alloc",
             (unsigned long long)r.heap_allocs);
  else
    chk_ok("heap", "no heap allocation during compute");
  result_free(&r);
}

static const ckernel *reference_kernel(const library *ref, const ckernel *k, uint32_t dtype) {
  for (size_t i = 0; ref && i < ref->kernel_count; ++i) {
    const ckernel *r = &ref->kernels[i];
    if (strcmp(r->domain, k->domain) || strcmp(r->op_type, k->op_type)) continue;
    if (k->since < r->since || (r->until && k->since > r->until)) continue;
    if (r->type_mask && !(r->type_mask & ONYX_DTYPE_BIT(dtype))) continue;
    return r;
  }
  return NULL;
}

static void check_reference(const kernel_job *job, const ckernel *k, const kcase *c,
                            const run_result *first) {
  if (job->ref == NULL) {
    chk_skip("conformance", "no reference provider");
    return;
  }
  const ckernel *rk = reference_kernel(job->ref, k, c->in[k->type_input].dtype);
  if (rk == NULL) {
    chk_skip("conformance", "the reference has no %s%s%s for this type", k->domain,
             k->domain[0] ? "::" : "", k->op_type);
    return;
  }
  if ((rk->v2 && rk->v2 == k->v2) || (rk->v3 && rk->v3 == k->v3)) {
    chk_skip("conformance", "the provider is the reference");
    return;
  }
  run_result want;
  run_spec s = {rk, c, -1, false};
  if (run_kernel(&s, &want) != ONYX_STATUS_OK) {
    chk_skip("conformance", "the reference refused the case: %s", want.error);
    result_free(&want);
    return;
  }
  for (size_t o = 0; o < MAX_OUT; ++o) {
    const out_buf *g = &first->outs[o], *w = &want.outs[o];
    if (!w->allocated) continue;
    char why[256] = "";
    if (!g->allocated || g->view.dtype != w->view.dtype || g->view.rank != w->view.rank ||
        memcmp(g->view.dims, w->view.dims, sizeof g->view.dims))
      snprintf(why, sizeof why, "output %zu: dtype or shape differs from the reference", o);
    else
      chk_close(g->view.dtype, g->view.data, w->view.data, (size_t)onyx_tensor_numel(&g->view), why,
                sizeof why);
    if (why[0]) {
      chk_fail("conformance", "%s", why);
      result_free(&want);
      return;
    }
  }
  chk_ok("conformance", "matches the reference's %s on fresh random inputs", rk->op_type);
  result_free(&want);
}

static const char *dtype_name(uint32_t t) {
  switch (t) {
  case ONYX_DTYPE_FLOAT32:
    return "float32";
  case ONYX_DTYPE_FLOAT16:
    return "float16";
  case ONYX_DTYPE_BFLOAT16:
    return "bfloat16";
  case ONYX_DTYPE_FLOAT64:
    return "float64";
  case ONYX_DTYPE_INT64:
    return "int64";
  case ONYX_DTYPE_INT32:
    return "int32";
  case ONYX_DTYPE_INT16:
    return "int16";
  case ONYX_DTYPE_INT8:
    return "int8";
  case ONYX_DTYPE_UINT8:
    return "uint8";
  case ONYX_DTYPE_BOOL:
    return "bool";
  case ONYX_DTYPE_UINT16:
    return "uint16";
  case ONYX_DTYPE_UINT32:
    return "uint32";
  case ONYX_DTYPE_UINT64:
    return "uint64";
  default:
    return "other";
  }
}

/* The dtypes a kernel's constraint allows that cases are made of: float32 first, then
 * the others of the mask (whole-byte types), at most 6; float32 alone for "any". */
static size_t case_types(uint64_t mask, uint32_t *out) {
  size_t n = 0;
  if (mask == 0 || (mask & ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT32))) out[n++] = ONYX_DTYPE_FLOAT32;
  for (uint32_t d = 1; d < 64 && n < 6; ++d)
    if (d != ONYX_DTYPE_FLOAT32 && (mask & ONYX_DTYPE_BIT(d)) && onyx_dtype_size(d) &&
        d != ONYX_DTYPE_STRING)
      out[n++] = d;
  return n;
}

/* Every check of one kernel, once per dtype its constraint allows. */
static void check_kernel(void *arg) {
  const kernel_job *job = arg;
  const ckernel *k = job->k;
  uint32_t types[6];
  size_t type_count = case_types(k->type_mask, types);
  for (size_t t = 0; t < type_count; ++t) {
    kcase c;
    run_result first;
    if (!find_case(k, types[t], &c, &first)) {
      chk_skip("case",
               "%s: no generated case accepted (attributes or inputs it needs are not "
               "generated)",
               dtype_name(types[t]));
      continue;
    }
    chk_ok("case", "%s: %zu input%s %s, fresh random values", dtype_name(types[t]), c.n_in,
           c.n_in == 1 ? "" : "s", c.shape);
    const out_buf *o = &first.outs[0];
    if (first.infer_ok && (first.inferred[0].rank != o->view.rank ||
                           memcmp(first.inferred[0].dims, o->view.dims, sizeof o->view.dims)))
      chk_fail("infer", "infer's output geometry differs from what compute allocated");
    check_workspace(k, &c, &first);
    check_threads(k, &c, &first, job->threads);
    check_allocs(k, &c);
    check_reference(job, k, &c, &first);
    result_free(&first);
    case_free(&c);
  }
}

/* ------------------------------------------------------------ the whole provider */

/* The v1/v2 contract: negotiation and tables; with `use`, also open, probe and the
 * kernel list (a provider without a v3 factory). */
static bool check_v2(library *lib, onyx_provider_entry_fn entry, bool use) {
  if (!check_negotiation(entry, lib) || !check_tables(lib)) return false;
  if (!use) {
    lib->table = NULL;
    return true;
  }
  if (!check_open(lib)) return false;
  lib->device = lib->table->device;
  for (size_t i = 0; i < lib->table->kernel_count; ++i)
    if (!add_kernel(lib, ckernel_v2(lib->table->kernels[i], lib->state))) return false;
  return true;
}

void chk_provider(const chk_options *opt) {
  pool_threads = opt->threads;
  host.num_threads = (uint32_t)opt->threads;
  library lib = {.path = opt->path};
  lib.dl = dlopen(opt->path, RTLD_NOW | RTLD_LOCAL);
  if (lib.dl == NULL) {
    chk_fail("load", "%s", dlerror());
    return;
  }
  onyx_provider_entry_fn entry = find_entry(lib.dl);
  onyx_provider_factory_fn factory = find_factory(lib.dl);
  if (entry == NULL && factory == NULL) {
    chk_fail("entry", "neither %s nor %s is exported", ONYX_PROVIDER_ENTRY_SYMBOL,
             ONYX_PROVIDER_FACTORY_SYMBOL);
    return;
  }
  /* A v3 core loads the factory when both are there: its kernels are the ones checked;
   * the v2 entry is still checked for older cores. */
  if (entry) chk_section("v1/v2 entry (%s)", ONYX_PROVIDER_ENTRY_SYMBOL);
  bool ok = entry == NULL || check_v2(&lib, entry, factory == NULL);
  if (factory) {
    chk_section("v3 factory (%s)", ONYX_PROVIDER_FACTORY_SYMBOL);
    ok = check_factory_negotiation(factory, &lib) && check_factory(&lib) && check_instance(&lib) &&
         ok;
  }
  if (!ok) {
    library_close(&lib);
    return;
  }
  check_overlaps(&lib);
  library ref = {0}, *refp = NULL;
  char why[512];
  if (opt->reference) {
    if (library_open(&ref, opt->reference, why, sizeof why))
      refp = &ref;
    else
      chk_skip("reference", "%s: %s", opt->reference, why);
  }
  for (size_t i = 0; i < lib.kernel_count; ++i) {
    const ckernel *k = &lib.kernels[i];
    char until[24] = "";
    if (k->until) snprintf(until, sizeof until, "..%lld", (long long)k->until);
    chk_section("%s%s%s opset %lld%s%s (types at input %u, %s)", k->domain,
                k->domain[0] ? "::" : "", k->op_type, (long long)k->since, until,
                k->until ? "" : "+", k->type_input, k->v2 ? "a v1/v2 table" : "a v3 definition");
    kernel_job job = {k, refp, opt->threads};
    chk_isolated("kernel", check_kernel, &job);
  }
  if (refp) library_close(refp);
  library_close(&lib);
}
