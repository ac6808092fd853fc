/*
 * onyx-check-provider, the ABI half: everything that names an ABI v1/v2 struct. The
 * provider is loaded as the core loads it (dlopen RTLD_NOW | RTLD_LOCAL, the entry
 * symbol), then driven directly, kernel by kernel, with a host table and compute
 * context of this file's own, so that the checks can do what the core never does on
 * purpose: hand a view one byte short, poison outputs, run one case from several
 * threads at once, count heap allocations during compute.
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

/* ------------------------------------------------------------ libraries */

typedef struct library {
  const char *path;
  void *dl;
  const onyx_provider_table *table;
  uint32_t abi;
  void *state; /* from open */
} library;

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
  if (entry == NULL || entry(ONYX_ABI_VERSION, &lib->abi, &lib->table) != ONYX_STATUS_OK ||
      lib->table == NULL || lib->table->open == NULL ||
      lib->table->open(&host, NULL, 0, &lib->state, err, sizeof err) != ONYX_STATUS_OK) {
    snprintf(why, cap, "no usable provider%s%s", err[0] ? ": " : "", err);
    return false;
  }
  return true;
}

static void library_close(library *lib) {
  if (lib->table && lib->table->close && lib->state) lib->table->close(lib->state);
  lib->state = NULL;
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
static void check_overlaps(const onyx_provider_table *t) {
  for (size_t i = 0; i < t->kernel_count; ++i)
    for (size_t j = i + 1; j < t->kernel_count; ++j) {
      const onyx_kernel_table *a = t->kernels[i], *b = t->kernels[j];
      if (!a || !b || !a->op_type || !b->op_type || !a->domain || !b->domain) continue;
      if (strcmp(a->op_type, b->op_type) || strcmp(a->domain, b->domain)) continue;
      int64_t a_end = a->until_opset ? a->until_opset : INT64_MAX,
              b_end = b->until_opset ? b->until_opset : INT64_MAX;
      bool opsets = a->since_opset <= b_end && b->since_opset <= a_end;
      bool types = a->type_input == b->type_input &&
                   (!a->type_mask || !b->type_mask || (a->type_mask & b->type_mask));
      if (opsets && types)
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
  check_overlaps(t);
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

static uint32_t first_type(uint64_t mask) {
  if (mask == 0 || (mask & ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT32))) return ONYX_DTYPE_FLOAT32;
  for (uint32_t d = 1; d < 64; ++d)
    if ((mask & ONYX_DTYPE_BIT(d)) && onyx_dtype_size(d)) return d;
  return ONYX_DTYPE_UNDEFINED;
}

static void case_free(kcase *c) {
  for (size_t i = 0; i < c->n_in; ++i) free(c->in[i].data);
  memset(c, 0, sizeof *c);
}

/* Case `variant` of `arity` inputs for kernel k: see the file's comment. */
static bool case_make(const onyx_kernel_table *k, size_t arity, int variant, kcase *c) {
  memset(c, 0, sizeof *c);
  uint32_t t = first_type(k->type_mask);
  if (t == ONYX_DTYPE_UNDEFINED || k->type_input >= arity) return false;
  static const int64_t r2[] = {4, 4}, r3[] = {2, 3, 4}, r1[] = {4};
  bool rank3 = variant & 1, trail_vec = variant & 2, trail_int = variant & 4;
  uint64_t host_inputs = HAS(k, onyx_kernel_table, host_inputs) ? k->host_inputs : 0;
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
      .opset = k->since_opset,
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
  if (host_mem_alloc(NULL, ONYX_REQUESTER_ACTIVATIONS, o->bytes, 64, "output", &p) !=
      ONYX_STATUS_OK)
    return ONYX_STATUS_OUT_OF_MEMORY;
  memset(p, POISON, o->bytes);
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
  const library *lib;
  const onyx_kernel_table *k;
  const kcase *c;
  int short_region; /* the region handed one byte short, -1 for none */
  bool count_allocs;
} run_spec;

/* create → infer → workspace → compute → destroy, with the views the requirement
 * asks for (one of them short when asked). */
static onyx_status run_kernel(const run_spec *s, run_result *r) {
  memset(r, 0, sizeof *r);
  const onyx_kernel_table *k = s->k;
  void *state = NULL;
  char err[512] = "";
  if (k->create) {
    onyx_status st = k->create(s->lib->state, &s->c->node, &state, err, sizeof err);
    if (st != ONYX_STATUS_OK) {
      snprintf(r->error, sizeof r->error, "create: %s: %s", onyx_status_str(st), err);
      return r->status = st;
    }
  }
  onyx_tensor geometry[MAX_IN];
  for (size_t i = 0; i < s->c->n_in; ++i) geometry[i] = s->c->in[i];
  if (k->infer) {
    host_error[0] = '\0';
    onyx_status st = k->infer(state, geometry, s->c->n_in, r->inferred, 1);
    r->infer_ok = st == ONYX_STATUS_OK;
    if (st != ONYX_STATUS_OK && st != ONYX_STATUS_UNSUPPORTED) {
      snprintf(r->error, sizeof r->error, "infer: %s: %s", onyx_status_str(st), host_error);
      if (k->destroy) k->destroy(state);
      return r->status = st;
    }
  }
  r->req = (onyx_workspace_requirement){.struct_size = sizeof r->req, .version = ONYX_ABI_VERSION};
  if (k->workspace) {
    host_error[0] = '\0';
    onyx_status st = k->workspace(state, geometry, s->c->n_in, &r->req);
    if (st != ONYX_STATUS_OK || r->req.count > ONYX_MAX_WORKSPACE_REGIONS) {
      snprintf(r->error, sizeof r->error, "workspace: %s, %u regions: %s", onyx_status_str(st),
               r->req.count, host_error);
      if (k->destroy) k->destroy(state);
      return r->status = st != ONYX_STATUS_OK ? st : ONYX_STATUS_INVALID_ARGUMENT;
    }
  }
  onyx_workspace_view views[ONYX_MAX_WORKSPACE_REGIONS];
  check_ctx ctx = {.base = {.struct_size = sizeof(onyx_compute_ctx),
                            .version = ONYX_ABI_VERSION,
                            .alloc_output = ctx_alloc_output,
                            .alias_output = ctx_alias_output,
                            .set_error = ctx_set_error,
                            .workspace = views,
                            .workspace_count = r->req.count}};
  ctx.base.core_data = &ctx;
  onyx_status st = ONYX_STATUS_OK;
  for (uint32_t i = 0; i < r->req.count; ++i) {
    const onyx_workspace_region *g = &r->req.regions[i];
    uint64_t bytes = g->bytes - ((int)i == s->short_region && g->bytes > 0);
    size_t align = g->alignment ? g->alignment : 64;
    views[i] = (onyx_workspace_view){.name = g->name, .bytes = bytes};
    if (g->bytes > (1u << 30) || host_mem_alloc(NULL, 0, bytes, (uint32_t)align, "workspace",
                                                &views[i].data) != ONYX_STATUS_OK) {
      for (uint32_t j = 0; j < i; ++j) free(views[j].data);
      snprintf(r->error, sizeof r->error, "workspace region %u: %llu bytes not available", i,
               (unsigned long long)g->bytes);
      if (k->destroy) k->destroy(state);
      return r->status = ONYX_STATUS_OUT_OF_MEMORY;
    }
    memset(views[i].data, POISON, (size_t)bytes);
  }
  if (s->count_allocs) {
    serial_only = true;
    chk_alloc_count_begin();
  }
  st = k->compute(state, &ctx.base, s->c->in_ptr, s->c->n_in);
  if (s->count_allocs) {
    r->heap_allocs = chk_alloc_count_end();
    serial_only = false;
  }
  for (uint32_t i = 0; i < r->req.count; ++i) free(views[i].data);
  if (k->destroy) k->destroy(state);
  memcpy(r->outs, ctx.outs, sizeof r->outs);
  snprintf(r->error, sizeof r->error, "%s", ctx.error);
  return r->status = st;
}

/* ------------------------------------------------------------ per-kernel checks */

typedef struct kernel_job {
  const library *lib, *ref;
  size_t index;
  int threads;
} kernel_job;

static bool find_case(const library *lib, const onyx_kernel_table *k, kcase *c, run_result *r) {
  for (size_t arity = 1; arity <= MAX_IN; ++arity)
    for (int variant = 0; variant < 8; ++variant) {
      if (!case_make(k, arity, variant, c)) {
        case_free(c);
        continue;
      }
      run_spec s = {lib, k, c, -1, false};
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

static void check_workspace(const library *lib, const onyx_kernel_table *k, const kcase *c,
                            const run_result *first) {
  if (k->workspace == NULL) return;
  run_result again;
  run_spec s = {lib, k, c, -1, false};
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
  chk_ok("workspace",
         "pure; %d region%s (%llu bytes), each refused one byte short with nothing "
         "written",
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

static void check_threads(const library *lib, const onyx_kernel_table *k, const kcase *c,
                          const run_result *first, int threads) {
  thread_run runs[64];
  pthread_t ids[64];
  int started = 0;
  for (int i = 0; i < threads; ++i) {
    runs[i] = (thread_run){.spec = {lib, k, c, -1, false}};
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

static void check_allocs(const library *lib, const onyx_kernel_table *k, const kcase *c) {
  if (!chk_alloc_counting()) {
    chk_skip("heap", "not counted in a sanitizer build");
    return;
  }
  run_result r;
  run_spec s = {lib, k, c, -1, true};
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

static const onyx_kernel_table *reference_kernel(const library *ref, const onyx_kernel_table *k,
                                                 uint32_t dtype) {
  for (size_t i = 0; ref && i < ref->table->kernel_count; ++i) {
    const onyx_kernel_table *r = ref->table->kernels[i];
    if (strcmp(r->domain, k->domain) || strcmp(r->op_type, k->op_type)) continue;
    if (k->since_opset < r->since_opset || (r->until_opset && k->since_opset > r->until_opset))
      continue;
    if (r->type_mask && !(r->type_mask & ONYX_DTYPE_BIT(dtype))) continue;
    return r;
  }
  return NULL;
}

static void check_reference(const kernel_job *job, const onyx_kernel_table *k, const kcase *c,
                            const run_result *first) {
  if (job->ref == NULL) {
    chk_skip("conformance", "no reference provider");
    return;
  }
  const onyx_kernel_table *rk = reference_kernel(job->ref, k, c->in[k->type_input].dtype);
  if (rk == NULL) {
    chk_skip("conformance", "the reference has no %s%s%s for this type", k->domain,
             k->domain[0] ? "::" : "", k->op_type);
    return;
  }
  if (rk == k) {
    chk_skip("conformance", "the provider is the reference");
    return;
  }
  run_result want;
  run_spec s = {job->ref, rk, c, -1, false};
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

static void check_kernel(void *arg) {
  const kernel_job *job = arg;
  const onyx_kernel_table *k = job->lib->table->kernels[job->index];
  kcase c;
  run_result first;
  if (!find_case(job->lib, k, &c, &first)) {
    chk_skip("case", "no generated case accepted (attributes or inputs it needs are not "
                     "generated)");
    return;
  }
  chk_ok("case", "%zu input%s %s, fresh random values", c.n_in, c.n_in == 1 ? "" : "s", c.shape);
  const out_buf *o = &first.outs[0];
  if (first.infer_ok && (first.inferred[0].rank != o->view.rank ||
                         memcmp(first.inferred[0].dims, o->view.dims, sizeof o->view.dims)))
    chk_fail("infer", "infer's output geometry differs from what compute allocated");
  check_workspace(job->lib, k, &c, &first);
  check_threads(job->lib, k, &c, &first, job->threads);
  check_allocs(job->lib, k, &c);
  check_reference(job, k, &c, &first);
  result_free(&first);
  case_free(&c);
}

/* ------------------------------------------------------------ the whole provider */

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
  if (entry == NULL) {
    chk_fail("entry", "%s is not exported", ONYX_PROVIDER_ENTRY_SYMBOL);
    return;
  }
  if (!check_negotiation(entry, &lib) || !check_tables(&lib) || !check_open(&lib)) {
    library_close(&lib);
    return;
  }
  library ref = {0}, *refp = NULL;
  char why[512];
  if (opt->reference) {
    if (library_open(&ref, opt->reference, why, sizeof why))
      refp = &ref;
    else
      chk_skip("reference", "%s: %s", opt->reference, why);
  }
  for (size_t i = 0; i < lib.table->kernel_count; ++i) {
    const onyx_kernel_table *k = lib.table->kernels[i];
    char until[24] = "";
    if (k->until_opset) snprintf(until, sizeof until, "..%lld", (long long)k->until_opset);
    chk_section("%s%s%s opset %lld%s%s (dtype %u at input %u)", k->domain, k->domain[0] ? "::" : "",
                k->op_type, (long long)k->since_opset, until, k->until_opset ? "" : "+",
                first_type(k->type_mask), k->type_input);
    kernel_job job = {&lib, refp, i, opt->threads};
    chk_isolated("kernel", check_kernel, &job);
  }
  if (refp) library_close(refp);
  library_close(&lib);
}
