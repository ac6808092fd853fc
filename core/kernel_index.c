/*
 * Kernel registrations and the (domain, op) index. Each instance registers its
 * kernels once, right after it is opened: a v1/v2 provider by its table's static list,
 * a v3 instance through the registry (so it may offer a kernel on one device and not
 * another). The runtime then sorts one index of every registration by (domain, op),
 * keeping placement order within an op, and placement looks a node's op up by binary
 * search instead of scanning every table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error_impl.h"
#include "provider_impl.h"

typedef struct index_entry {
  const onyx__kernel *kernel;
  size_t order; /* position in placement order: instance, then registration */
} index_entry;

struct onyx__kernel_index {
  index_entry *entries;
  const onyx__kernel **sorted; /* the kernels of `entries`, in the same order */
  size_t count;
};

/* ------------------------------------------------------------ registration */

typedef struct reg_state {
  onyx__provider *p;
  size_t cap;
  char *err;
  size_t err_cap;
  onyx_status failed;
  bool refused; /* a registration was incomplete: the provider's defect */
} reg_state;

static onyx_status push(reg_state *r, onyx__kernel k) {
  onyx__provider *p = r->p;
  if (p->kernel_count == r->cap) {
    size_t cap = r->cap ? 2 * r->cap : 64;
    onyx__kernel *grown = realloc(p->kernels, cap * sizeof *grown);
    if (grown == NULL) return r->failed = ONYX_STATUS_OUT_OF_MEMORY;
    p->kernels = grown;
    r->cap = cap;
  }
  k.instance = p;
  p->kernels[p->kernel_count++] = k;
  return ONYX_STATUS_OK;
}

static onyx_status refuse(reg_state *r, const char *domain, const char *op, const char *what) {
  onyx__errf(r->err, r->err_cap, "kernel registration %zu (%s%s%s) is incomplete: %s",
             r->p->kernel_count, domain ? domain : "?", domain && domain[0] ? "::" : "",
             op ? op : "?", what);
  r->refused = true;
  return r->failed = ONYX_STATUS_INVALID_ARGUMENT;
}

static onyx_status add_table(reg_state *r, const onyx_kernel_table *t) {
  if (t == NULL || t->op_type == NULL || t->domain == NULL || t->compute == NULL ||
      t->struct_size < offsetof(onyx_kernel_table, compute) + sizeof t->compute)
    return refuse(r, t ? t->domain : NULL, t ? t->op_type : NULL,
                  "a v2 table with a NULL op, domain or compute");
  onyx__kernel k = {
      .domain = t->domain,
      .op_type = t->op_type,
      .since_opset = t->since_opset,
      .until_opset = t->until_opset,
      .legacy_type = {ONYX_TYPE_INPUT, t->type_input, t->type_mask},
      .type_count = t->type_mask ? 1 : 0,
      .host_inputs = onyx__kernel_has(t, host_inputs) ? t->host_inputs : 0,
      .geometry_inputs = onyx__kernel_has(t, geometry_inputs) ? t->geometry_inputs : 0,
      .v2 = t,
  };
  return push(r, k);
}

static onyx_status add_def(reg_state *r, const onyx_kernel_def *d) {
  if (d == NULL || d->struct_size < sizeof(onyx_kernel_def) || d->op_type == NULL ||
      d->domain == NULL || d->compute == NULL || (d->type_count && d->types == NULL))
    return refuse(r, d ? d->domain : NULL, d ? d->op_type : NULL,
                  "a v3 definition smaller than v3's or with a NULL op, domain, compute or "
                  "type list");
  onyx__kernel k = {
      .domain = d->domain,
      .op_type = d->op_type,
      .since_opset = d->since_opset,
      .until_opset = d->until_opset,
      .types = d->types,
      .type_count = d->type_count,
      .host_inputs = d->host_inputs,
      .geometry_inputs = d->geometry_inputs,
      .v3 = d,
  };
  return push(r, k);
}

static onyx_status reg_add(onyx_kernel_registry *reg, const onyx_kernel_def *def) {
  reg_state *r = reg->core_data;
  return r->failed != ONYX_STATUS_OK ? r->failed : add_def(r, def);
}

static onyx_status reg_add_table(onyx_kernel_registry *reg, const onyx_kernel_table *table) {
  reg_state *r = reg->core_data;
  return r->failed != ONYX_STATUS_OK ? r->failed : add_table(r, table);
}

onyx_status onyx__kernels_register(onyx__provider *p, char *err, size_t err_cap) {
  reg_state r = {.p = p, .err = err, .err_cap = err_cap};
  if (p->table) {
    for (size_t i = 0; i < p->table->kernel_count && r.failed == ONYX_STATUS_OK; ++i)
      add_table(&r, p->table->kernels[i]);
  } else {
    onyx_kernel_registry reg = {.struct_size = sizeof reg,
                                .version = ONYX_ABI_LATEST,
                                .core_data = &r,
                                .add = reg_add,
                                .add_table = reg_add_table};
    char why[512] = "";
    onyx__sink sink;
    onyx_status st = p->ops->kernels(p->state, &reg, onyx__sink_init(&sink, why, sizeof why));
    if (st != ONYX_STATUS_OK && r.failed == ONYX_STATUS_OK) {
      onyx__errf(err, err_cap, "registering its kernels failed: %s: %s", onyx_status_str(st),
                 why[0] ? why : "(no message)");
      r.failed = st;
    }
  }
  /* A v2 table's one constraint lives in its record: pointed at once the array
   * stops moving. */
  for (size_t i = 0; i < p->kernel_count; ++i)
    if (p->kernels[i].v2) p->kernels[i].types = &p->kernels[i].legacy_type;
  if (r.failed != ONYX_STATUS_OK) {
    free(p->kernels);
    p->kernels = NULL;
    p->kernel_count = 0;
  }
  return r.refused ? ONYX_STATUS_PROVIDER_ERROR : r.failed;
}

/* ------------------------------------------------------------ the index */

static int by_op(const void *a, const void *b) {
  const index_entry *x = a, *y = b;
  int c = strcmp(x->kernel->domain, y->kernel->domain);
  if (c == 0) c = strcmp(x->kernel->op_type, y->kernel->op_type);
  if (c == 0) c = x->order < y->order ? -1 : x->order > y->order;
  return c;
}

void onyx__kernel_index_free(struct onyx__kernel_index *ix) {
  if (ix == NULL) return;
  free(ix->entries);
  free(ix->sorted);
  free(ix);
}

onyx_status onyx__kernel_index_build(onyx_runtime *rt) {
  size_t n = 0;
  for (size_t p = 0; p < rt->provider_count; ++p) n += rt->providers[p].kernel_count;
  struct onyx__kernel_index *ix = calloc(1, sizeof *ix);
  if (ix == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  ix->entries = calloc(n + 1, sizeof *ix->entries);
  ix->sorted = calloc(n + 1, sizeof *ix->sorted);
  if (ix->entries == NULL || ix->sorted == NULL) {
    onyx__kernel_index_free(ix);
    return ONYX_STATUS_OUT_OF_MEMORY;
  }
  for (size_t p = 0; p < rt->provider_count; ++p)
    for (size_t k = 0; k < rt->providers[p].kernel_count; ++k, ++ix->count)
      ix->entries[ix->count] = (index_entry){&rt->providers[p].kernels[k], ix->count};
  qsort(ix->entries, ix->count, sizeof *ix->entries, by_op);
  for (size_t i = 0; i < ix->count; ++i) ix->sorted[i] = ix->entries[i].kernel;
  onyx__kernel_index_free(rt->index);
  rt->index = ix;
  return ONYX_STATUS_OK;
}

static int cmp_key(const onyx__kernel *k, const char *domain, const char *op) {
  int c = strcmp(k->domain, domain);
  return c ? c : strcmp(k->op_type, op);
}

const onyx__kernel *const *onyx__kernel_lookup(const onyx_runtime *rt, const char *domain,
                                               const char *op_type, size_t *out_count) {
  *out_count = 0;
  const struct onyx__kernel_index *ix = rt ? rt->index : NULL;
  if (ix == NULL || ix->count == 0) return NULL;
  size_t lo = 0, hi = ix->count; /* first entry not below the key */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (cmp_key(ix->sorted[mid], domain, op_type) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  size_t end = lo;
  while (end < ix->count && cmp_key(ix->sorted[end], domain, op_type) == 0) ++end;
  *out_count = end - lo;
  return end > lo ? &ix->sorted[lo] : NULL;
}
