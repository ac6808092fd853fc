/* The fake core of attn_fake.h. */
#include "attn_fake.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ compute ctx */

static onyx_status fake_alloc(onyx_compute_ctx *ctx, size_t index, uint32_t dtype, uint32_t rank,
                              const int64_t *dims, onyx_tensor **out_view) {
  fake_ctx *f = (fake_ctx *)ctx;
  f->alloc_calls++;
  if (index >= FAKE_MAX_OUTPUTS || f->produced[index]) return ONYX_STATUS_INVALID_ARGUMENT;
  onyx_tensor *t = &f->outputs[index];
  memset(t, 0, sizeof *t);
  t->dtype = dtype;
  t->rank = rank;
  for (uint32_t i = 0; i < rank; ++i) t->dims[i] = dims[i];
  size_t bytes = (size_t)onyx_tensor_numel(t) * onyx_dtype_size(dtype);
  f->owned[index] = malloc(bytes ? bytes : 1);
  if (f->owned[index] == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  memset(f->owned[index], f->poison, bytes);
  t->data = f->owned[index];
  f->produced[index] = true;
  *out_view = t;
  return ONYX_STATUS_OK;
}

static onyx_status fake_alias(onyx_compute_ctx *ctx, size_t index, size_t input_index) {
  fake_ctx *f = (fake_ctx *)ctx;
  f->alias_calls++;
  if (!f->allow_alias) {
    snprintf(f->err, sizeof f->err, "alias refused (test)");
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  if (index >= FAKE_MAX_OUTPUTS || f->produced[index] || input_index >= f->input_count ||
      f->inputs[input_index] == NULL)
    return ONYX_STATUS_INVALID_ARGUMENT;
  f->outputs[index] = *f->inputs[input_index];
  f->alias_of[index] = (int)input_index;
  f->produced[index] = true;
  return ONYX_STATUS_OK;
}

static void fake_set_error(onyx_compute_ctx *ctx, const char *fmt, ...) {
  fake_ctx *f = (fake_ctx *)ctx;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(f->err, sizeof f->err, fmt, ap);
  va_end(ap);
}

void fake_ctx_init(fake_ctx *f, const onyx_tensor *const *inputs, size_t input_count,
                   bool allow_alias) {
  memset(f, 0, sizeof *f);
  f->ctx.struct_size = sizeof f->ctx;
  f->ctx.version = ONYX_ABI_VERSION;
  f->ctx.core_data = f;
  f->ctx.alloc_output = fake_alloc;
  f->ctx.alias_output = fake_alias;
  f->ctx.set_error = fake_set_error;
  f->inputs = inputs;
  f->input_count = input_count;
  f->allow_alias = allow_alias;
  f->poison = 0xA5;
  for (int i = 0; i < FAKE_MAX_OUTPUTS; ++i) f->alias_of[i] = -1;
}

void fake_ctx_workspace(fake_ctx *f, const onyx_workspace_requirement *req, int short_region,
                        uint64_t shrink) {
  for (uint32_t i = 0; i < req->count && i < ONYX_MAX_WORKSPACE_REGIONS; ++i) {
    uint64_t bytes = req->regions[i].bytes;
    if ((int)i == short_region) bytes = bytes > shrink ? bytes - shrink : 0;
    f->view_mem[i] = bytes ? malloc(bytes) : NULL;
    if (f->view_mem[i] != NULL) memset(f->view_mem[i], 0x5A, bytes);
    f->views[i].name = req->regions[i].name;
    f->views[i].data = f->view_mem[i];
    f->views[i].bytes = bytes;
  }
  f->ctx.workspace = f->views;
  f->ctx.workspace_count = req->count;
}

void fake_ctx_free(fake_ctx *f) {
  for (int i = 0; i < FAKE_MAX_OUTPUTS; ++i) free(f->owned[i]);
  for (int i = 0; i < ONYX_MAX_WORKSPACE_REGIONS; ++i) free(f->view_mem[i]);
  memset(f->owned, 0, sizeof f->owned);
  memset(f->view_mem, 0, sizeof f->view_mem);
}

/* ------------------------------------------------------------------ thread pool */

/* A small persistent pool: `threads - 1` workers wait for a job generation, take
 * indices from a shared counter and report when the last index is done; the caller
 * works too. Good enough to exercise (and time) the kernels' parallel paths. */
#define FAKE_MAX_THREADS 64

struct fake_provider {
  onyx_host_table host;
  onyx__cpu_provider cpu;
  uint32_t threads;
  pthread_t tids[FAKE_MAX_THREADS];
  uint32_t started;
  pthread_mutex_t lock;
  pthread_cond_t wake, done;
  uint64_t generation;
  bool stop;
  size_t next, n, finished;
  void (*fn)(void *arg, size_t i);
  void *arg;
};

/* Takes and runs indices of the current job; called with the lock held. */
static void fake_drain(fake_provider *p) {
  while (p->next < p->n) {
    size_t i = p->next++;
    pthread_mutex_unlock(&p->lock);
    p->fn(p->arg, i);
    pthread_mutex_lock(&p->lock);
    if (++p->finished == p->n) pthread_cond_broadcast(&p->done);
  }
}

static void *fake_worker(void *arg) {
  fake_provider *p = arg;
  uint64_t seen = 0;
  pthread_mutex_lock(&p->lock);
  for (;;) {
    while (!p->stop && p->generation == seen) pthread_cond_wait(&p->wake, &p->lock);
    if (p->stop) break;
    seen = p->generation;
    fake_drain(p);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

static void fake_parallel_for(void *host_data, size_t n, void (*fn)(void *arg, size_t i),
                              void *arg) {
  fake_provider *p = host_data;
  if (n == 0) return;
  pthread_mutex_lock(&p->lock);
  p->fn = fn;
  p->arg = arg;
  p->n = n;
  p->next = 0;
  p->finished = 0;
  p->generation++;
  pthread_cond_broadcast(&p->wake);
  fake_drain(p);
  while (p->finished < p->n) pthread_cond_wait(&p->done, &p->lock);
  p->n = 0;
  pthread_mutex_unlock(&p->lock);
}

fake_provider *fake_provider_new(uint32_t threads) {
  fake_provider *p = calloc(1, sizeof *p);
  if (p == NULL) return NULL;
  p->threads = threads < 1 ? 1 : threads > FAKE_MAX_THREADS ? FAKE_MAX_THREADS : threads;
  pthread_mutex_init(&p->lock, NULL);
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->done, NULL);
  for (uint32_t t = 1; t < p->threads; ++t)
    if (pthread_create(&p->tids[p->started], NULL, fake_worker, p) == 0) p->started++;
  p->host.struct_size = sizeof p->host;
  p->host.version = ONYX_ABI_VERSION;
  p->host.host_data = p;
  p->host.parallel_for = fake_parallel_for;
  p->host.num_threads = p->threads;
  p->cpu.host = &p->host;
  p->cpu.parallel = p->threads > 1;
  p->cpu.num_threads = p->threads;
  return p;
}

void *fake_provider_state(fake_provider *p) { return &p->cpu; }

void fake_provider_free(fake_provider *p) {
  if (p == NULL) return;
  pthread_mutex_lock(&p->lock);
  p->stop = true;
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->lock);
  for (uint32_t t = 0; t < p->started; ++t) pthread_join(p->tids[t], NULL);
  pthread_mutex_destroy(&p->lock);
  pthread_cond_destroy(&p->wake);
  pthread_cond_destroy(&p->done);
  free(p);
}

/* ------------------------------------------------------------------ nodes, tensors */

void fake_node_init(fake_node *n, const char *domain, const char *op, int64_t opset, size_t inputs,
                    size_t outputs) {
  memset(n, 0, sizeof *n);
  n->info.struct_size = sizeof n->info;
  n->info.version = ONYX_ABI_VERSION;
  n->info.name = "test_node";
  n->info.domain = domain;
  n->info.op_type = op;
  n->info.opset = opset;
  n->info.input_count = inputs;
  n->info.output_count = outputs;
  for (size_t i = 0; i < inputs && i < 16; ++i) n->input_present[i] = true;
  for (size_t i = 0; i < outputs && i < FAKE_MAX_OUTPUTS; ++i) n->output_present[i] = true;
  n->info.input_present = n->input_present;
  n->info.output_present = n->output_present;
  n->info.input_dtypes = n->input_dtypes;
  n->info.attrs = n->attrs;
}

static onyx_attr *fake_node_attr(fake_node *n, const char *name, uint32_t type) {
  onyx_attr *a = &n->attrs[n->info.attr_count++];
  memset(a, 0, sizeof *a);
  a->name = name;
  a->type = type;
  return a;
}

void fake_node_int(fake_node *n, const char *name, int64_t v) {
  fake_node_attr(n, name, ONYX_ATTR_INT)->i = v;
}

void fake_node_float(fake_node *n, const char *name, float v) {
  fake_node_attr(n, name, ONYX_ATTR_FLOAT)->f = v;
}

void fake_node_string(fake_node *n, const char *name, const char *v) {
  onyx_attr *a = fake_node_attr(n, name, ONYX_ATTR_STRING);
  a->s = v;
  a->s_len = strlen(v);
}

onyx_tensor fake_tensor(uint32_t dtype, uint32_t rank, const int64_t *dims, void *data) {
  onyx_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = dtype;
  t.device = ONYX_DEVICE_HOST;
  t.rank = rank;
  for (uint32_t i = 0; i < rank; ++i) t.dims[i] = dims[i];
  t.data = data;
  return t;
}
