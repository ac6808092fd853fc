/*
 * Constant folding: a node whose inputs are all constants — initializers the caller
 * cannot override, Constant outputs, earlier folded results — computes the same
 * thing on every run, so it is computed once here, on a host provider's kernel (the
 * CPU provider's), and its outputs become initializers. The Transpose of a tied
 * embedding table feeding the lm_head MatMul is the case that matters: recomputed
 * per run it dominated a decode step.
 *
 * Memory: node by node, each result is booked as weights before its memory is
 * allocated, then the node's sources whose last reader it was are freed and
 * unbooked. The peak is the weights plus one node's results, never a second copy of
 * every weight. A source another node still reads (the embedding table a Gather
 * also reads) stays.
 *
 * Left alone: ops that draw random numbers (their value differs per run); nodes no
 * host kernel takes; results much larger than their sources — ConstantOfShape,
 * Expand, Tile or Range turn a few bytes into many, cheaper to recompute per run than
 * to hold for the session's life. A kernel that fails here is not an error: the node
 * stays in the graph and runs (and reports) as usual.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checked_math.h"
#include "error_impl.h"
#include "memory_impl.h"
#include "optimize_impl.h"

/* A result may be at most twice its sources, plus this much. */
#define FOLD_SLACK_BYTES (UINT64_C(1) << 20)

static bool random_op(const onyx__node *n) {
  static const char *const ops[] = {
      "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike",
      "Multinomial",  "Bernoulli",        "Dropout",       NULL};
  if (n->domain[0] != '\0') return false;
  for (const char *const *op = ops; *op; ++op)
    if (!strcmp(n->op_type, *op)) return true;
  return false;
}

/* A constant whose data is at hand (not released after a kernel copied it). */
static bool usable_constant(const onyx__value *v) {
  return onyx__value_is_constant(v) && (v->init.data != NULL || onyx__init_bytes(v) == 0);
}

static bool foldable(const onyx__graph *g, const onyx__node *n) {
  if (random_op(n)) return false;
  bool named_output = false;
  for (size_t k = 0; k < n->output_count; ++k) named_output |= n->outputs[k] >= 0;
  if (!named_output) return false;
  for (size_t k = 0; k < n->input_count; ++k)
    if (n->inputs[k] >= 0 && !usable_constant(&g->values[n->inputs[k]])) return false;
  return true;
}

/* ------------------------------------------------------------ one node's run */

typedef struct fold_out {
  onyx_tensor t; /* the result, host memory from aligned_alloc */
  bool set;
} fold_out;

typedef struct fold_run {
  onyx__opt_ctx *ctx;
  size_t node;
  fold_out *outs;
  uint64_t limit;  /* bytes the results may take */
  uint64_t booked; /* bytes booked for them so far */
  bool too_large;
  char kernel_err[512];
} fold_run;

static onyx_status numel_bytes(uint32_t dtype, uint32_t rank, const int64_t *dims, uint64_t *out) {
  size_t esz = onyx_dtype_size(dtype);
  if (esz == 0 || (rank > 0 && dims == NULL)) return ONYX_STATUS_INVALID_ARGUMENT;
  return onyx__ckd_bytes(out, dims, rank, esz) ? ONYX_STATUS_INVALID_ARGUMENT : ONYX_STATUS_OK;
}

static onyx_status fold_alloc(onyx_compute_ctx *c, size_t index, uint32_t dtype, uint32_t rank,
                              const int64_t *dims, onyx_tensor **out_view) {
  fold_run *r = c->core_data;
  onyx_session *s = r->ctx->session;
  const onyx__node *n = &r->ctx->graph->nodes[r->node];
  uint64_t bytes = 0;
  if (index >= n->output_count || n->outputs[index] < 0 || r->outs[index].set ||
      numel_bytes(dtype, rank, dims, &bytes) != ONYX_STATUS_OK) {
    snprintf(r->kernel_err, sizeof r->kernel_err, "alloc_output: output %zu is invalid", index);
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  if (bytes > r->limit - r->booked) {
    r->too_large = true;
    snprintf(r->kernel_err, sizeof r->kernel_err, "its result exceeds %llu bytes",
             (unsigned long long)r->limit);
    return ONYX_STATUS_UNSUPPORTED;
  }
  int32_t v = n->outputs[index];
  char label[160];
  snprintf(label, sizeof label, "folded '%s' (%s '%s')", r->ctx->graph->values[v].name, n->op_type,
           n->name);
  char why[ONYX_ERR_CAP] = "";
  onyx_status st = onyx__weights_book_value(s, (size_t)v, bytes, label, why, sizeof why);
  void *data = NULL;
  if (st == ONYX_STATUS_OK && bytes > 0) {
    data = aligned_alloc(64, (size_t)((bytes + 63) / 64 * 64));
    if (data == NULL) {
      onyx__weights_unbook_value(s, (size_t)v);
      st = ONYX_STATUS_OUT_OF_MEMORY;
    }
  }
  if (st != ONYX_STATUS_OK) {
    snprintf(r->kernel_err, sizeof r->kernel_err, "output %zu: %s", index,
             why[0] ? why : onyx_status_str(st));
    return st;
  }
  r->booked += bytes;
  fold_out *o = &r->outs[index];
  o->t = (onyx_tensor){.dtype = dtype, .device = ONYX_DEVICE_HOST, .rank = rank, .data = data};
  for (uint32_t i = 0; i < rank; ++i) o->t.dims[i] = dims[i];
  o->set = true;
  *out_view = &o->t;
  return ONYX_STATUS_OK;
}

/* Constant inputs live in the graph, not in a buffer of this run: refused, as the
 * executor refuses borrowed memory; the kernel copies instead. */
static onyx_status fold_alias(onyx_compute_ctx *c, size_t index, size_t input_index) {
  fold_run *r = c->core_data;
  snprintf(r->kernel_err, sizeof r->kernel_err,
           "alias_output: output %zu cannot alias input %zu (a constant)", index, input_index);
  return ONYX_STATUS_INVALID_ARGUMENT;
}

static void fold_set_error(onyx_compute_ctx *c, const char *fmt, ...) {
  fold_run *r = c->core_data;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->kernel_err, sizeof r->kernel_err, fmt, ap);
  va_end(ap);
}

/* The node's STEP and SESSION workspace, one block per region, freed after. */
static onyx_status fold_workspace(onyx_session *s, const onyx__kernel *k, void *state,
                                  const onyx_tensor *inputs, size_t n, onyx_workspace_view *views,
                                  size_t *out_count) {
  *out_count = 0;
  if (!onyx__k_has_workspace(k)) return ONYX_STATUS_OK;
  onyx_workspace_requirement req;
  memset(&req, 0, sizeof req);
  req.struct_size = sizeof req;
  req.version = ONYX_ABI_VERSION;
  onyx_status st = onyx__k_workspace(k, state, inputs, n, &req, NULL, 0);
  if (st == ONYX_STATUS_OK && req.count > ONYX_MAX_WORKSPACE_REGIONS)
    st = ONYX_STATUS_PROVIDER_ERROR;
  for (uint32_t i = 0; st == ONYX_STATUS_OK && i < req.count; ++i) {
    const onyx_workspace_region *rg = &req.regions[i];
    views[i] = (onyx_workspace_view){.name = rg->name, .bytes = rg->bytes};
    *out_count = i + 1;
    if (rg->bytes == 0) continue;
    st = onyx__memory_alloc(s->runtime->memory, NULL, ONYX_REQUESTER_WORKSPACE_STEP, rg->bytes,
                            rg->alignment, "constant folding workspace", &views[i].data, NULL, 0);
  }
  return st;
}

/* Node info for a kernel made to fold: no constant inputs offered (nothing to
 * prepack for a single run). Arrays sized input_count + 1 so that none is empty. */
typedef struct fold_info {
  onyx_node_info info;
  bool *in_present, *out_present;
  uint32_t *in_dtypes;
} fold_info;

static bool info_make(const onyx__graph *g, const onyx__node *n, fold_info *fi) {
  fi->in_present = calloc(n->input_count + 1, sizeof(bool));
  fi->out_present = calloc(n->output_count + 1, sizeof(bool));
  fi->in_dtypes = calloc(n->input_count + 1, sizeof(uint32_t));
  if (!fi->in_present || !fi->out_present || !fi->in_dtypes) return false;
  for (size_t k = 0; k < n->input_count; ++k) {
    fi->in_present[k] = n->inputs[k] >= 0;
    fi->in_dtypes[k] =
        n->inputs[k] >= 0 ? g->values[n->inputs[k]].init.dtype : ONYX_DTYPE_UNDEFINED;
  }
  for (size_t k = 0; k < n->output_count; ++k) fi->out_present[k] = n->outputs[k] >= 0;
  fi->info = (onyx_node_info){.struct_size = sizeof(onyx_node_info),
                              .version = ONYX_ABI_VERSION,
                              .name = n->name,
                              .domain = n->domain,
                              .op_type = n->op_type,
                              .opset = n->opset,
                              .input_count = n->input_count,
                              .output_count = n->output_count,
                              .input_present = fi->in_present,
                              .output_present = fi->out_present,
                              .input_dtypes = fi->in_dtypes,
                              .attrs = n->attrs,
                              .attr_count = n->attr_count};
  return true;
}

static void info_free(fold_info *fi) {
  free(fi->in_present);
  free(fi->out_present);
  free(fi->in_dtypes);
}

/* The bytes a node's results may take: twice its sources plus the slack. */
static uint64_t result_limit(const onyx__graph *g, const onyx__node *n) {
  uint64_t in = 0;
  for (size_t k = 0; k < n->input_count; ++k)
    if (n->inputs[k] >= 0) in += onyx__init_bytes(&g->values[n->inputs[k]]);
  return 2 * in + FOLD_SLACK_BYTES;
}

/* What infer says the results take; UINT64_MAX when it cannot say. */
static uint64_t inferred_bytes(const onyx__kernel *k, void *state, const onyx_tensor *inputs,
                               size_t n_in, size_t n_out) {
  if (!onyx__k_has_infer(k)) return UINT64_MAX;
  onyx_tensor *outs = calloc(n_out + 1, sizeof *outs);
  if (outs == NULL) return UINT64_MAX;
  uint64_t total = 0;
  onyx_status st = onyx__k_infer(k, state, inputs, n_in, outs, n_out, NULL, 0);
  for (size_t o = 0; st == ONYX_STATUS_OK && o < n_out; ++o) {
    uint64_t b = 0;
    if (outs[o].dtype == ONYX_DTYPE_UNDEFINED) continue; /* an absent output */
    st = numel_bytes(outs[o].dtype, outs[o].rank, outs[o].dims, &b);
    if (st == ONYX_STATUS_OK && onyx__ckd_add_u64(&total, total, b)) st = ONYX_STATUS_INTERNAL;
  }
  free(outs);
  return st == ONYX_STATUS_OK ? total : UINT64_MAX;
}

/* Runs node `node` on kernel `k` of `prov`; the results land in r->outs. */
static onyx_status fold_compute(fold_run *r, const onyx__kernel *k, const fold_info *fi) {
  const onyx__graph *g = r->ctx->graph;
  const onyx__node *n = &g->nodes[r->node];
  onyx_session *s = r->ctx->session;
  onyx_tensor *inputs = calloc(n->input_count + 1, sizeof *inputs);
  const onyx_tensor **ptrs = calloc(n->input_count + 1, sizeof *ptrs);
  void *state = NULL;
  onyx_status st = inputs && ptrs ? ONYX_STATUS_OK : ONYX_STATUS_OUT_OF_MEMORY;
  for (size_t i = 0; st == ONYX_STATUS_OK && i < n->input_count; ++i) {
    if (n->inputs[i] < 0) continue;
    inputs[i] = g->values[n->inputs[i]].init;
    ptrs[i] = &inputs[i];
  }
  if (st == ONYX_STATUS_OK)
    st = onyx__k_create(k, &fi->info, &state, r->kernel_err, sizeof r->kernel_err);
  /* Ask first where the kernel can say: a result too large is then never computed. */
  uint64_t expected = st == ONYX_STATUS_OK
                          ? inferred_bytes(k, state, inputs, n->input_count, n->output_count)
                          : UINT64_MAX;
  if (expected != UINT64_MAX && expected > r->limit) {
    r->too_large = true;
    snprintf(r->kernel_err, sizeof r->kernel_err, "its result (%llu bytes) exceeds %llu bytes",
             (unsigned long long)expected, (unsigned long long)r->limit);
    st = ONYX_STATUS_UNSUPPORTED;
  }
  onyx_workspace_view views[ONYX_MAX_WORKSPACE_REGIONS];
  size_t view_count = 0;
  if (st == ONYX_STATUS_OK)
    st = fold_workspace(s, k, state, inputs, n->input_count, views, &view_count);
  if (st == ONYX_STATUS_OK) {
    onyx_compute_ctx c = {.struct_size = sizeof c,
                          .version = ONYX_ABI_VERSION,
                          .core_data = r,
                          .alloc_output = fold_alloc,
                          .alias_output = fold_alias,
                          .set_error = fold_set_error,
                          .workspace = views,
                          .workspace_count = view_count};
    st = onyx__k_compute(k, state, &c, (const onyx_tensor *const *)ptrs, n->input_count);
  }
  for (size_t o = 0; st == ONYX_STATUS_OK && o < n->output_count; ++o)
    if (n->outputs[o] >= 0 && !r->outs[o].set) st = ONYX_STATUS_PROVIDER_ERROR;
  for (size_t i = 0; i < view_count; ++i) onyx__memory_free(s->runtime->memory, views[i].data);
  onyx__k_destroy(k, state);
  free(ptrs);
  free(inputs);
  return st;
}

/* Gives back what a failed fold allocated and booked. */
static void fold_discard(fold_run *r) {
  const onyx__node *n = &r->ctx->graph->nodes[r->node];
  for (size_t o = 0; o < n->output_count; ++o) {
    if (!r->outs[o].set) continue;
    free(r->outs[o].t.data);
    onyx__weights_unbook_value(r->ctx->session, (size_t)n->outputs[o]);
  }
}

/* The results become initializers; sources whose last reader this was are freed. */
static onyx_status fold_commit(fold_run *r, uint32_t *readers) {
  onyx__graph *g = r->ctx->graph;
  const onyx__node *n = &g->nodes[r->node];
  onyx__opt_note_peak(r->ctx, r->booked);
  for (size_t o = 0; o < n->output_count; ++o)
    if (n->outputs[o] >= 0) onyx__graph_set_initializer(g, n->outputs[o], r->outs[o].t);
  r->ctx->stats->bytes_added += r->booked;
  r->ctx->stats->nodes_folded++;
  for (size_t k = 0; k < n->input_count; ++k) {
    int32_t v = n->inputs[k];
    if (v < 0 || --readers[v] > 0 || g->values[v].is_output) continue;
    onyx_status st = onyx__weights_release(
        r->ctx->session, (size_t)v, &r->ctx->stats->bytes_released, r->ctx->err, r->ctx->err_cap);
    if (st != ONYX_STATUS_OK) return st;
  }
  return ONYX_STATUS_OK;
}

/* Folds node i when a host kernel can compute it; *out_folded says whether it did. */
static onyx_status fold_node(onyx__opt_ctx *ctx, size_t i, uint32_t *readers, bool *out_folded) {
  onyx__graph *g = ctx->graph;
  const onyx__node *n = &g->nodes[i];
  *out_folded = false;
  fold_info fi = {0};
  fold_run r = {.ctx = ctx, .node = i, .limit = result_limit(g, n)};
  r.outs = calloc(n->output_count + 1, sizeof *r.outs);
  if (r.outs == NULL || !info_make(g, n, &fi)) {
    free(r.outs);
    info_free(&fi);
    return ONYX_STATUS_OUT_OF_MEMORY;
  }
  onyx__provider *prov = NULL;
  const onyx__kernel *k = NULL;
  onyx_status st = ONYX_STATUS_UNSUPPORTED;
  if (onyx__kernel_search(ctx->session->runtime, &fi.info, NULL, true, &prov, &k, NULL, 0))
    st = fold_compute(&r, k, &fi);
  if (st == ONYX_STATUS_OK) {
    st = fold_commit(&r, readers);
    *out_folded = true;
  } else {
    fold_discard(&r);
    onyx__log(ONYX_LOG_DEBUG, "constant folding: node '%s' (#%zu, %s) stays: %s", n->name, i,
              n->op_type,
              k == NULL         ? "no host kernel"
              : r.kernel_err[0] ? r.kernel_err
                                : onyx_status_str(st));
    st = ONYX_STATUS_OK;
  }
  free(r.outs);
  info_free(&fi);
  return st;
}

onyx_status onyx__opt_constant_folding(onyx__opt_ctx *ctx) {
  onyx__graph *g = ctx->graph;
  uint32_t *readers = onyx__value_readers(g);
  bool *dead = calloc(g->node_count + 1, sizeof *dead);
  onyx_status st = readers && dead ? ONYX_STATUS_OK : ONYX_STATUS_OUT_OF_MEMORY;
  for (size_t i = 0; st == ONYX_STATUS_OK && i < g->node_count; ++i) {
    if (!foldable(g, &g->nodes[i])) continue;
    st = fold_node(ctx, i, readers, &dead[i]);
    ctx->stats->nodes_skipped += st == ONYX_STATUS_OK && !dead[i];
  }
  if (dead) ctx->stats->nodes_removed += onyx__graph_remove_nodes(g, dead);
  free(readers);
  free(dead);
  return st;
}
