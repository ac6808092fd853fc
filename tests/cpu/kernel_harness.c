/*
 * Kernel harness: see kernel_harness.h. Plays the core's side of the ABI with the
 * least machinery that still checks the contract.
 */
#include "kernel_harness.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ host table */

typedef struct kh_pool_job {
  void (*fn)(void *arg, size_t i);
  void *arg;
  size_t n, stride, first;
} kh_pool_job;

static void *kh_pool_thread(void *p) {
  const kh_pool_job *j = p;
  for (size_t i = j->first; i < j->n; i += j->stride) j->fn(j->arg, i);
  return NULL;
}

/* A real parallel_for: one fresh thread per slot, so races show under TSan. */
static void kh_parallel_for(void *host_data, size_t n, void (*fn)(void *arg, size_t i), void *arg) {
  size_t threads = (size_t)(uintptr_t)host_data;
  if (threads > n) threads = n;
  pthread_t tid[64];
  kh_pool_job jobs[64];
  if (threads > 64) threads = 64;
  for (size_t t = 0; t < threads; ++t) {
    jobs[t] = (kh_pool_job){fn, arg, n, threads, t};
    if (pthread_create(&tid[t], NULL, kh_pool_thread, &jobs[t]) != 0) {
      kh_pool_thread(&jobs[t]); /* no thread: do the slot here */
      tid[t] = pthread_self();
    }
  }
  for (size_t t = 0; t < threads; ++t)
    if (!pthread_equal(tid[t], pthread_self())) pthread_join(tid[t], NULL);
}

/* Governed memory: plain allocations, counted so that a test can see what a kernel
 * booked and whether it gave it all back. Kernels run one at a time here. */
static int kh_mem_live;
static uint64_t kh_mem_bytes;
static bool kh_mem_refuse;

static onyx_status kh_mem_alloc(void *host_data, uint32_t requester, uint64_t bytes,
                                uint32_t alignment, const char *label, void **out_ptr) {
  (void)host_data, (void)requester, (void)label;
  *out_ptr = NULL;
  if (kh_mem_refuse) return ONYX_STATUS_TIER_EXHAUSTED;
  size_t align = alignment < sizeof(void *) ? sizeof(void *) : alignment;
  size_t rounded = (size_t)((bytes + align - 1) / align * align);
  *out_ptr = aligned_alloc(align, rounded ? rounded : align);
  if (*out_ptr == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  memset(*out_ptr, 0xFF, rounded); /* poison, like outputs */
  kh_mem_live++;
  kh_mem_bytes += bytes;
  return ONYX_STATUS_OK;
}

static void kh_mem_free(void *host_data, void *ptr) {
  (void)host_data;
  if (ptr == NULL) return;
  free(ptr);
  kh_mem_live--;
}

static void kh_log(void *host_data, uint32_t level, const char *message) {
  (void)host_data;
  (void)level;
  (void)message; /* quiet: tests check behaviour, not log lines */
}

onyx_status kh_load(kh_provider *p, const char *path, const onyx_option *options,
                    size_t option_count, uint32_t threads, char *err, size_t err_cap) {
  memset(p, 0, sizeof *p);
  p->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (p->dl == NULL) {
    snprintf(err, err_cap, "%s", dlerror());
    return ONYX_STATUS_NOT_FOUND;
  }
  onyx_provider_entry_fn entry;
  void *sym = dlsym(p->dl, ONYX_PROVIDER_ENTRY_SYMBOL);
  memcpy(&entry, &sym, sizeof entry); /* object → function pointer, POSIX-sanctioned */
  if (entry == NULL) {
    snprintf(err, err_cap, "%s: no %s", path, ONYX_PROVIDER_ENTRY_SYMBOL);
    kh_unload(p);
    return ONYX_STATUS_NOT_FOUND;
  }
  onyx_status st = entry(ONYX_ABI_VERSION, &p->negotiated_abi, &p->table);
  if (st != ONYX_STATUS_OK) {
    snprintf(err, err_cap, "entry: %s", onyx_status_str(st));
    kh_unload(p);
    return st;
  }
  p->host = (onyx_host_table){.struct_size = sizeof(onyx_host_table),
                              .version = ONYX_ABI_VERSION,
                              .host_data = (void *)(uintptr_t)(threads > 1 ? threads : 1),
                              .log = kh_log,
                              .mem_alloc = kh_mem_alloc,
                              .mem_free = kh_mem_free,
                              .parallel_for = threads > 1 ? kh_parallel_for : NULL,
                              .num_threads = threads > 1 ? threads : 1};
  st = p->table->open(&p->host, options, option_count, &p->state, err, err_cap);
  if (st != ONYX_STATUS_OK) {
    p->state = NULL;
    kh_unload(p);
    return st;
  }
  return ONYX_STATUS_OK;
}

void kh_unload(kh_provider *p) {
  if (p->table != NULL && p->state != NULL) p->table->close(p->state);
  if (p->dl != NULL) dlclose(p->dl);
  memset(p, 0, sizeof *p);
}

const onyx_kernel_table *kh_find(const kh_provider *p, const char *domain, const char *op,
                                 int64_t opset, uint32_t dtype) {
  for (size_t i = 0; i < p->table->kernel_count; ++i) {
    const onyx_kernel_table *k = p->table->kernels[i];
    if (strcmp(k->domain, domain) != 0 || strcmp(k->op_type, op) != 0) continue;
    if (opset < k->since_opset || (k->until_opset != 0 && opset > k->until_opset)) continue;
    if (k->type_mask != 0 && dtype != ONYX_DTYPE_UNDEFINED &&
        (dtype >= 64 || !(k->type_mask & ONYX_DTYPE_BIT(dtype))))
      continue;
    return k;
  }
  return NULL;
}

/* ------------------------------------------------------------------ compute ctx */

typedef struct kh_ctx {
  onyx_compute_ctx ctx; /* first, so the kernel's pointer is ours */
  kh_result *res;
  size_t output_count;
} kh_ctx;

static onyx_status kh_alloc_output(onyx_compute_ctx *ctx, size_t index, uint32_t dtype,
                                   uint32_t rank, const int64_t *dims, onyx_tensor **out_view) {
  kh_ctx *c = (kh_ctx *)ctx;
  kh_result *r = c->res;
  r->alloc_calls++;
  if (index >= c->output_count || index >= KH_MAX_OUTPUTS || r->allocated[index] ||
      rank > ONYX_MAX_RANK || onyx_dtype_size(dtype) == 0)
    return ONYX_STATUS_INVALID_ARGUMENT;
  onyx_tensor *t = &r->out[index];
  memset(t, 0, sizeof *t);
  t->dtype = dtype;
  t->device = ONYX_DEVICE_HOST;
  t->rank = rank;
  for (uint32_t i = 0; i < rank; ++i) {
    if (dims[i] < 0) return ONYX_STATUS_INVALID_ARGUMENT;
    t->dims[i] = dims[i];
  }
  size_t bytes = (size_t)onyx_tensor_numel(t) * onyx_dtype_size(dtype);
  if (bytes > 0) {
    t->data = malloc(bytes);
    if (t->data == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
    memset(t->data, 0xFF, bytes); /* poison: unwritten elements read as NaN / -1 */
  }
  r->allocated[index] = true;
  *out_view = t;
  return ONYX_STATUS_OK;
}

static onyx_status kh_alias_output(onyx_compute_ctx *ctx, size_t index, size_t input_index) {
  (void)ctx;
  (void)index;
  (void)input_index;
  return ONYX_STATUS_UNSUPPORTED; /* no CPU kernel should alias */
}

static void kh_set_error(onyx_compute_ctx *ctx, const char *fmt, ...) {
  kh_ctx *c = (kh_ctx *)ctx;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->res->error, sizeof c->res->error, fmt, ap);
  va_end(ap);
}

/* ------------------------------------------------------------------ run */

/* The dtype of the input a kernel constrains: placement looks at type_input. */
const onyx_kernel_table *kh_kernel_for(const kh_provider *p, const kh_node *node,
                                       const onyx_tensor *const *inputs, size_t input_count) {
  const char *domain = node->domain ? node->domain : "";
  for (size_t i = 0; i < p->table->kernel_count; ++i) {
    const onyx_kernel_table *k = p->table->kernels[i];
    if (strcmp(k->domain, domain) != 0 || strcmp(k->op_type, node->op) != 0) continue;
    if (node->opset < k->since_opset || (k->until_opset != 0 && node->opset > k->until_opset))
      continue;
    uint32_t dt = k->type_input < input_count && inputs[k->type_input]
                      ? inputs[k->type_input]->dtype
                      : ONYX_DTYPE_UNDEFINED;
    if (k->type_mask != 0 && dt != ONYX_DTYPE_UNDEFINED &&
        (dt >= 64 || !(k->type_mask & ONYX_DTYPE_BIT(dt))))
      continue;
    return k;
  }
  return NULL;
}

/* The node description a kernel's create() sees. */
typedef struct kh_info {
  onyx_node_info info;
  bool in_present[16], out_present[KH_MAX_OUTPUTS];
  uint32_t in_dtypes[16];
  const onyx_tensor *constants[16];
  bool copied[16];
} kh_info;

static void kh_info_make(const kh_node *node, const onyx_tensor *const *inputs, size_t input_count,
                         kh_info *out) {
  memset(out, 0, sizeof *out);
  size_t output_count = node->output_count ? node->output_count : 1;
  for (size_t i = 0; i < input_count && i < 16; ++i) {
    out->in_present[i] = inputs[i] != NULL;
    out->in_dtypes[i] = inputs[i] ? inputs[i]->dtype : ONYX_DTYPE_UNDEFINED;
  }
  for (size_t i = 0; i < output_count && i < KH_MAX_OUTPUTS; ++i)
    out->out_present[i] = node->output_present ? node->output_present[i] : true;
  out->info = (onyx_node_info){.struct_size = sizeof out->info,
                               .version = ONYX_ABI_VERSION,
                               .name = "test_node",
                               .domain = node->domain ? node->domain : "",
                               .op_type = node->op,
                               .opset = node->opset,
                               .input_count = input_count,
                               .output_count = output_count,
                               .input_present = out->in_present,
                               .output_present = out->out_present,
                               .input_dtypes = out->in_dtypes,
                               .attrs = node->attrs,
                               .attr_count = node->attr_count};
  if (node->constant_inputs != NULL) {
    for (size_t i = 0; i < input_count && i < 16; ++i)
      out->constants[i] = node->constant_inputs[i] ? inputs[i] : NULL;
    out->info.input_constants = out->constants;
    out->info.input_constant_copied = out->copied;
  }
}

void kh_infer(kh_provider *p, const kh_node *node, const onyx_tensor *const *inputs,
              size_t input_count, bool hide_values, kh_infer_result *r) {
  memset(r, 0, sizeof *r);
  const onyx_kernel_table *k = kh_kernel_for(p, node, inputs, input_count);
  if (k == NULL || k->infer == NULL) {
    r->status = ONYX_STATUS_NOT_FOUND;
    snprintf(r->error, sizeof r->error, "no kernel with infer for %s", node->op);
    return;
  }
  kh_info ki;
  kh_info_make(node, inputs, input_count, &ki);
  void *state = NULL;
  if (k->create != NULL) {
    r->status = k->create(p->state, &ki.info, &state, r->error, sizeof r->error);
    if (r->status != ONYX_STATUS_OK) return;
  }
  onyx_tensor geom[16];
  memset(geom, 0, sizeof geom);
  for (size_t i = 0; i < input_count && i < 16; ++i) {
    if (inputs[i] == NULL) continue;
    geom[i] = *inputs[i];
    bool small_int = (geom[i].dtype == ONYX_DTYPE_INT64 || geom[i].dtype == ONYX_DTYPE_INT32) &&
                     onyx_tensor_numel(&geom[i]) <= 4096;
    if (hide_values || !small_int) geom[i].data = NULL;
  }
  size_t output_count = node->output_count ? node->output_count : 1;
  if (output_count > KH_MAX_OUTPUTS) output_count = KH_MAX_OUTPUTS;
  for (size_t o = 0; o < output_count; ++o) {
    r->out[o].data = r->values[o];
    r->out[o].rank = 99; /* garbage the kernel must overwrite */
  }
  r->status = k->infer(state, geom, input_count, r->out, output_count);
  if (k->destroy) k->destroy(state);
}

void kh_run(kh_provider *p, const kh_node *node, const onyx_tensor *const *inputs,
            size_t input_count, kh_result *r) {
  memset(r, 0, sizeof *r);
  size_t output_count = node->output_count ? node->output_count : 1;
  const onyx_kernel_table *k = kh_kernel_for(p, node, inputs, input_count);
  if (k == NULL) {
    r->status = ONYX_STATUS_NOT_FOUND;
    r->stage = "find";
    snprintf(r->error, sizeof r->error, "no kernel for %s opset %lld", node->op,
             (long long)node->opset);
    return;
  }

  kh_info ki;
  kh_info_make(node, inputs, input_count, &ki);
  onyx_node_info info = ki.info;

  if (k->supports != NULL) {
    char reason[256] = "";
    if (!k->supports(&info, reason, sizeof reason)) {
      r->status = ONYX_STATUS_UNSUPPORTED;
      r->stage = "create";
      snprintf(r->error, sizeof r->error, "%s", reason);
      return;
    }
  }
  void *state = NULL;
  int live_before = kh_mem_live;
  uint64_t bytes_before = kh_mem_bytes;
  kh_mem_refuse = node->refuse_mem_alloc;
  if (k->create != NULL) {
    r->status = k->create(p->state, &info, &state, r->error, sizeof r->error);
    kh_mem_refuse = false;
    if (r->status != ONYX_STATUS_OK) {
      r->stage = "create";
      r->governed_live_after = kh_mem_live - live_before;
      return;
    }
  }
  kh_mem_refuse = false;
  r->governed_bytes = kh_mem_bytes - bytes_before;
  /* What the core does for a copied constant: the kernel keeps the geometry only. */
  onyx_tensor given[16];
  const onyx_tensor *ins[16];
  for (size_t i = 0; i < input_count && i < 16; ++i) {
    ins[i] = inputs[i];
    if (!ki.copied[i] || inputs[i] == NULL) continue;
    r->constants_copied |= 1u << i;
    given[i] = *inputs[i];
    given[i].data = NULL;
    ins[i] = &given[i];
  }
  if (input_count <= 16) inputs = ins;

  /* Workspace: geometry-only views, as the planner would pass them. */
  onyx_workspace_requirement req;
  memset(&req, 0, sizeof req);
  req.struct_size = sizeof req;
  req.version = ONYX_ABI_VERSION;
  onyx_workspace_view views[ONYX_MAX_WORKSPACE_REGIONS];
  void *blocks[ONYX_MAX_WORKSPACE_REGIONS] = {NULL};
  memset(views, 0, sizeof views);
  if (k->workspace != NULL) {
    onyx_tensor geom[16];
    memset(geom, 0, sizeof geom);
    for (size_t i = 0; i < input_count && i < 16; ++i)
      if (inputs[i]) {
        geom[i] = *inputs[i];
        geom[i].data = NULL;
      }
    r->status = k->workspace(state, geom, input_count, &req);
    if (r->status != ONYX_STATUS_OK) {
      r->stage = "workspace";
      if (k->destroy) k->destroy(state);
      r->governed_live_after = kh_mem_live - live_before;
      return;
    }
    for (uint32_t i = 0; i < req.count; ++i) {
      uint64_t bytes = req.regions[i].bytes;
      r->workspace_bytes += bytes;
      if (bytes > node->workspace_shortfall)
        bytes -= node->workspace_shortfall;
      else if (bytes > 0)
        bytes = 0;
      views[i].name = req.regions[i].name;
      views[i].bytes = bytes;
      if (bytes > 0) {
        size_t rounded = (size_t)((bytes + 63) / 64 * 64);
        blocks[i] = aligned_alloc(64, rounded);
        memset(blocks[i], 0xFF, rounded);
        views[i].data = blocks[i];
      }
    }
  }

  kh_ctx c = {.ctx = {.struct_size = sizeof(onyx_compute_ctx),
                      .version = ONYX_ABI_VERSION,
                      .alloc_output = kh_alloc_output,
                      .alias_output = kh_alias_output,
                      .set_error = kh_set_error,
                      .workspace = views,
                      .workspace_count = req.count},
              .res = r,
              .output_count = output_count};
  r->status = k->compute(state, &c.ctx, inputs, input_count);
  r->stage = r->status == ONYX_STATUS_OK ? "ok" : "compute";
  if (r->status != ONYX_STATUS_OK && r->alloc_calls > 0) r->allocated_on_error = true;
  for (uint32_t i = 0; i < req.count; ++i) free(blocks[i]);
  if (k->destroy) k->destroy(state);
  r->governed_live_after = kh_mem_live - live_before;
}

void kh_result_free(kh_result *r) {
  for (size_t i = 0; i < KH_MAX_OUTPUTS; ++i) free(r->out[i].data);
  memset(r, 0, sizeof *r);
}

/* ------------------------------------------------------------------ builders */

onyx_tensor kh_tensor(uint32_t dtype, uint32_t rank, const int64_t *dims, const void *data) {
  onyx_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = dtype;
  t.device = ONYX_DEVICE_HOST;
  t.rank = rank;
  for (uint32_t i = 0; i < rank; ++i) t.dims[i] = dims[i];
  t.data = (void *)(uintptr_t)data; /* views are read-only inputs here */
  return t;
}

static onyx_attr kh_attr(const char *name, uint32_t type) {
  onyx_attr a;
  memset(&a, 0, sizeof a);
  a.name = name;
  a.type = type;
  return a;
}

onyx_attr kh_attr_int(const char *name, int64_t v) {
  onyx_attr a = kh_attr(name, ONYX_ATTR_INT);
  a.i = v;
  return a;
}

onyx_attr kh_attr_float(const char *name, float v) {
  onyx_attr a = kh_attr(name, ONYX_ATTR_FLOAT);
  a.f = v;
  return a;
}

onyx_attr kh_attr_ints(const char *name, const int64_t *v, size_t count) {
  onyx_attr a = kh_attr(name, ONYX_ATTR_INTS);
  a.ints = v;
  a.count = count;
  return a;
}

onyx_attr kh_attr_floats(const char *name, const float *v, size_t count) {
  onyx_attr a = kh_attr(name, ONYX_ATTR_FLOATS);
  a.floats = v;
  a.count = count;
  return a;
}

onyx_attr kh_attr_string(const char *name, const char *s) {
  onyx_attr a = kh_attr(name, ONYX_ATTR_STRING);
  a.s = s;
  a.s_len = strlen(s);
  return a;
}

onyx_attr kh_attr_tensor(const char *name, const onyx_tensor *t) {
  onyx_attr a = kh_attr(name, ONYX_ATTR_TENSOR);
  a.tensor = t;
  return a;
}
