/*
 * Prepare-only planning. A geometry pass walks the graph: each node's output
 * geometry comes from its kernel's `infer`, or — for shape arithmetic, where every
 * input is a small host integer tensor whose values are known — from running the
 * kernel on those values. Each kernel is then asked for its workspace for the
 * geometry it will see. Nothing is granted and no workspace is allocated.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checked_math.h"
#include "error_impl.h"
#include "memory_impl.h"
#include "onyx_governor.h"
#include "plan_impl.h"

/* Integer tensors up to this many elements carry values through the pass. */
#define PLAN_MAX_KNOWN_ELEMENTS 4096

/* Values an infer callback may hand back per output (the ABI's 64 int64). */
#define PLAN_INFER_VALUES 64

typedef struct geo {
  onyx_tensor t;
  bool set;
  bool known; /* t.data holds the values */
  void *owned;
} geo;

/* Per-node arrays of one build, sized once for the widest node. */
typedef struct plan_scratch {
  onyx_tensor *in_geo;               /* [max inputs] */
  const onyx_tensor **in_ptrs;       /* [max inputs] */
  geo *outs;                         /* [max outputs] */
  onyx_tensor *out_t;                /* [max outputs] */
  int64_t (*buf)[PLAN_INFER_VALUES]; /* [max outputs] */
  size_t max_in, max_out;
} plan_scratch;

static void scratch_free(plan_scratch *sc) {
  free(sc->in_geo);
  free(sc->in_ptrs);
  free(sc->outs);
  free(sc->out_t);
  free(sc->buf);
}

static bool scratch_make(plan_scratch *sc, const onyx__graph *g) {
  memset(sc, 0, sizeof *sc);
  sc->max_in = sc->max_out = 1;
  for (size_t i = 0; i < g->node_count; ++i) {
    if (g->nodes[i].input_count > sc->max_in) sc->max_in = g->nodes[i].input_count;
    if (g->nodes[i].output_count > sc->max_out) sc->max_out = g->nodes[i].output_count;
  }
  sc->in_geo = calloc(sc->max_in, sizeof *sc->in_geo);
  sc->in_ptrs = calloc(sc->max_in, sizeof *sc->in_ptrs);
  sc->outs = calloc(sc->max_out, sizeof *sc->outs);
  sc->out_t = calloc(sc->max_out, sizeof *sc->out_t);
  sc->buf = calloc(sc->max_out, sizeof *sc->buf);
  if (sc->in_geo && sc->in_ptrs && sc->outs && sc->out_t && sc->buf) return true;
  scratch_free(sc);
  return false;
}

typedef struct eval_ctx {
  geo *outs; /* the node's output geos */
  size_t out_count;
  const onyx_tensor *const *inputs;
  size_t input_count;
  char err[512];
} eval_ctx;

/* Values worth carrying: small integer or bool tensors (shapes, masks of shapes). */
static bool small_int(const onyx_tensor *t) {
  int64_t n = 0;
  return (t->dtype == ONYX_DTYPE_INT64 || t->dtype == ONYX_DTYPE_INT32 ||
          t->dtype == ONYX_DTYPE_BOOL) &&
         !onyx__ckd_numel(&n, t->dims, t->rank) && n <= PLAN_MAX_KNOWN_ELEMENTS;
}

bool onyx__plan_value_known(const onyx_tensor *t) {
  return t->data != NULL && t->device == ONYX_DEVICE_HOST && small_int(t);
}

static onyx_status eval_alloc_output(onyx_compute_ctx *ctx, size_t index, uint32_t dtype,
                                     uint32_t rank, const int64_t *dims, onyx_tensor **out) {
  eval_ctx *e = ctx->core_data;
  if (index >= e->out_count || rank > ONYX_MAX_RANK) return ONYX_STATUS_INVALID_ARGUMENT;
  geo *g = &e->outs[index];
  if (g->set) return ONYX_STATUS_INVALID_ARGUMENT;
  onyx_tensor t = {.dtype = dtype, .rank = rank};
  uint64_t bytes = 0;
  /* Shape arithmetic on known values: the result is small, or not evaluated here. */
  if ((rank > 0 && dims == NULL) || onyx__ckd_bytes(&bytes, dims, rank, onyx_dtype_size(dtype)) ||
      bytes > PLAN_MAX_KNOWN_ELEMENTS * sizeof(int64_t) * 64)
    return ONYX_STATUS_INVALID_ARGUMENT;
  for (uint32_t i = 0; i < rank; ++i) t.dims[i] = dims[i];
  g->owned = malloc(bytes ? (size_t)bytes : 1);
  if (g->owned == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  t.data = g->owned;
  g->t = t;
  g->set = true;
  *out = &g->t;
  return ONYX_STATUS_OK;
}

static onyx_status eval_alias_output(onyx_compute_ctx *ctx, size_t index, size_t input) {
  eval_ctx *e = ctx->core_data;
  if (index >= e->out_count || input >= e->input_count || e->inputs[input] == NULL)
    return ONYX_STATUS_INVALID_ARGUMENT;
  e->outs[index].t = *e->inputs[input];
  e->outs[index].set = true;
  return ONYX_STATUS_OK;
}

static void eval_set_error(onyx_compute_ctx *ctx, const char *fmt, ...) {
  eval_ctx *e = ctx->core_data;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(e->err, sizeof e->err, fmt, ap);
  va_end(ap);
}

onyx_status onyx__ws_layout_make(const onyx_workspace_requirement *req, onyx__ws_layout *out,
                                 char *err, size_t err_cap) {
  onyx__ws_layout l;
  memset(&l, 0, sizeof l);
  l.align[0] = l.align[1] = ONYX__WS_MIN_BLOCK_ALIGN;
  if (req->count > ONYX_MAX_WORKSPACE_REGIONS) {
    onyx__errf(err, err_cap, "workspace requirement lists %u regions (at most %d)", req->count,
               ONYX_MAX_WORKSPACE_REGIONS);
    return ONYX_STATUS_PROVIDER_ERROR;
  }
  for (uint32_t i = 0; i < req->count; ++i) {
    const onyx_workspace_region *rg = &req->regions[i];
    const char *name = rg->name ? rg->name : "?";
    uint64_t align = rg->alignment ? rg->alignment : 64;
    if (rg->lifetime > ONYX_LIFETIME_SESSION || (align & (align - 1)) != 0 ||
        align > ONYX__WS_MAX_ALIGN) {
      onyx__errf(err, err_cap,
                 "workspace region %u '%s': lifetime %u, alignment %u (lifetime "
                 "must be STEP or SESSION, alignment a power of two up to %u)",
                 i, name, rg->lifetime, rg->alignment, ONYX__WS_MAX_ALIGN);
      return ONYX_STATUS_PROVIDER_ERROR;
    }
    uint32_t life = rg->lifetime;
    if (rg->bytes == 0) { /* unused on this route: no room, no alignment */
      l.offset[i] = l.bytes[life];
      continue;
    }
    uint64_t at = (l.bytes[life] + align - 1) / align * align;
    if (at < l.bytes[life] || __builtin_add_overflow(at, rg->bytes, &l.bytes[life])) {
      onyx__errf(err, err_cap, "workspace region %u '%s' of %llu bytes overflows its block", i,
                 name, (unsigned long long)rg->bytes);
      return ONYX_STATUS_PROVIDER_ERROR;
    }
    l.offset[i] = at;
    if (align > l.align[life]) l.align[life] = (uint32_t)align;
  }
  *out = l;
  return ONYX_STATUS_OK;
}

/* Labels a grant of a node's workspace; essentials first, the node name last so
 * that the governor's truncation (ONYX_GOV_LABEL_MAX) only shortens the name. */
static void ws_label(char *buf, size_t cap, const onyx_session *s, size_t node, const char *region,
                     const char *what) {
  const onyx__node *n = &s->graph->nodes[node];
  snprintf(buf, cap, "node %zu %s/%s region %s (%s)%s%s%s", node, s->nodes[node].provider->name,
           n->op_type, region ? region : "?", what, n->name[0] ? " [" : "", n->name,
           n->name[0] ? "]" : "");
}

onyx_status onyx__ws_block_alloc(onyx_session *s, size_t node,
                                 const onyx_workspace_requirement *req,
                                 const onyx__ws_layout *layout, uint32_t lifetime, uint64_t bytes,
                                 uint32_t align, const char *what, void **out_block, char *err,
                                 size_t err_cap) {
  char labels[ONYX_MAX_WORKSPACE_REGIONS][ONYX_GOV_LABEL_MAX];
  onyx__memory_part parts[ONYX_MAX_WORKSPACE_REGIONS];
  uint32_t idx[ONYX_MAX_WORKSPACE_REGIONS];
  size_t n = 0;
  for (uint32_t i = 0; i < req->count && i < ONYX_MAX_WORKSPACE_REGIONS; ++i) {
    const onyx_workspace_region *rg = &req->regions[i];
    if (rg->lifetime != lifetime || rg->bytes == 0) continue;
    ws_label(labels[n], sizeof labels[n], s, node, rg->name, what);
    idx[n++] = i;
  }
  if (n == 0 || lifetime > ONYX_LIFETIME_SESSION || bytes < layout->bytes[lifetime]) {
    onyx__errf(err, err_cap, "node %zu: no %s block of %llu bytes to book", node, what,
               (unsigned long long)bytes);
    return ONYX_STATUS_INTERNAL;
  }
  /* Each part runs from its region's offset to the next region's (offsets never
   * decrease), so alignment padding is charged to the region before it and the last
   * part runs to the end of the block: the parts sum to the block, nothing twice. */
  for (size_t k = 0; k < n; ++k) {
    uint64_t end = k + 1 < n ? layout->offset[idx[k + 1]] : bytes;
    parts[k] = (onyx__memory_part){.bytes = end - layout->offset[idx[k]], .label = labels[k]};
  }
  return onyx__memory_alloc_parts(s->runtime->memory, s->nodes[node].provider,
                                  lifetime == ONYX_LIFETIME_SESSION
                                      ? ONYX_REQUESTER_WORKSPACE_SESSION
                                      : ONYX_REQUESTER_WORKSPACE_STEP,
                                  align, parts, n, out_block, err, err_cap);
}

/* Runs a shape-arithmetic node on known values. Workspace, if the kernel asks for
 * any, is a private scratch block: these are tiny integer tensors. */
static onyx_status evaluate(const onyx__placed_node *pn, const onyx_tensor *const *inputs,
                            const onyx_tensor *geometry, size_t input_count, geo *outs,
                            size_t out_count, char *err, size_t err_cap) {
  eval_ctx e = {.outs = outs, .out_count = out_count, .inputs = inputs, .input_count = input_count};
  onyx_workspace_view views[ONYX_MAX_WORKSPACE_REGIONS];
  onyx_workspace_requirement req = {.struct_size = sizeof req, .version = ONYX_ABI_VERSION};
  void *scratch[2] = {NULL, NULL};
  onyx_status st = ONYX_STATUS_OK;
  char why[ONYX__KERNEL_REASON_CAP] = "";
  if (onyx__k_has_workspace(pn->kernel))
    st = onyx__k_workspace(pn->kernel, pn->state, geometry, input_count, &req, why, sizeof why);
  if (st != ONYX_STATUS_OK)
    onyx__explain(e.err, sizeof e.err, "its workspace callback failed", why, st);
  onyx__ws_layout lay;
  if (st == ONYX_STATUS_OK) st = onyx__ws_layout_make(&req, &lay, e.err, sizeof e.err);
  for (int l = 0; l < 2 && st == ONYX_STATUS_OK; ++l) {
    uint64_t a = lay.align[l];
    if (lay.bytes[l] && (scratch[l] = aligned_alloc(a, (lay.bytes[l] + a - 1) / a * a)) == NULL)
      st = ONYX_STATUS_OUT_OF_MEMORY;
  }
  for (uint32_t i = 0; st == ONYX_STATUS_OK && i < req.count; ++i) {
    char *base = scratch[req.regions[i].lifetime == ONYX_LIFETIME_SESSION];
    views[i] = (onyx_workspace_view){req.regions[i].name,
                                     req.regions[i].bytes ? base + lay.offset[i] : NULL,
                                     req.regions[i].bytes};
  }
  if (st == ONYX_STATUS_OK) {
    onyx_compute_ctx ctx = {.struct_size = sizeof ctx,
                            .version = ONYX_ABI_VERSION,
                            .core_data = &e,
                            .alloc_output = eval_alloc_output,
                            .alias_output = eval_alias_output,
                            .set_error = eval_set_error,
                            .workspace = views,
                            .workspace_count = req.count};
    st = onyx__k_compute(pn->kernel, pn->state, &ctx, inputs, input_count);
  }
  free(scratch[0]);
  free(scratch[1]);
  if (st != ONYX_STATUS_OK)
    onyx__errf(err, err_cap, "evaluating shape arithmetic failed: %s",
               e.err[0] ? e.err : onyx_status_str(st));
  return st;
}

/* Output geometry (and any values the kernel knows) from the kernel's infer. */
static onyx_status infer_outputs(const onyx__placed_node *pn, const onyx__node *n,
                                 const onyx_tensor *in_geo, geo *outs, plan_scratch *sc, char *why,
                                 size_t why_cap) {
  /* Each output offers a values buffer; a kernel that knows the values (Shape of
   * a tensor whose values are not known) writes them and leaves data there. */
  onyx_tensor *out_t = sc->out_t;
  int64_t(*buf)[PLAN_INFER_VALUES] = sc->buf;
  memset(out_t, 0, n->output_count * sizeof *out_t);
  for (size_t o = 0; o < n->output_count; ++o) out_t[o].data = buf[o];
  onyx_status st = onyx__k_infer(pn->kernel, pn->state, in_geo, n->input_count, out_t,
                                 n->output_count, why, why_cap);
  for (size_t o = 0; st == ONYX_STATUS_OK && o < n->output_count; ++o) {
    outs[o].t = out_t[o];
    outs[o].t.data = NULL;
    outs[o].set = true;
    uint64_t bytes = 0;
    if (out_t[o].data != buf[o] || out_t[o].rank > ONYX_MAX_RANK || !small_int(&out_t[o]) ||
        onyx__ckd_tensor_bytes(&bytes, &out_t[o]) || bytes > sizeof buf[o])
      continue;
    if ((outs[o].owned = malloc(bytes ? (size_t)bytes : 1)) == NULL) {
      st = ONYX_STATUS_OUT_OF_MEMORY;
      break;
    }
    memcpy(outs[o].owned, buf[o], bytes);
    outs[o].t.data = outs[o].owned;
  }
  return st;
}

static void reset_outputs(geo *outs, size_t count) {
  for (size_t o = 0; o < count; ++o) free(outs[o].owned);
  memset(outs, 0, count * sizeof *outs);
}

/* Appends to err why a value the kernel reads on the host (its host_inputs: a total
 * sequence length, a target shape) is not known here: the planner knows the values
 * of small integer tensors given on the host and of shape arithmetic run on the host,
 * nothing a device computes. */
static void unknown_host_inputs(const onyx_session *s, size_t i, const geo *g, char *err,
                                size_t err_cap) {
  const onyx__node *n = &s->graph->nodes[i];
  uint64_t host_inputs = s->nodes[i].kernel->host_inputs;
  for (size_t k = 0; k < n->input_count && k < 64; ++k) {
    int32_t v = n->inputs[k];
    if (v < 0 || !(host_inputs >> k & 1u) || g[v].known) continue;
    const onyx__value *val = &s->graph->values[v];
    size_t len = strlen(err);
    if (len + 1 >= err_cap) return;
    if (val->producer >= 0) {
      const onyx__node *p = &s->graph->nodes[val->producer];
      const onyx__provider *pp = s->nodes[val->producer].provider;
      snprintf(err + len, err_cap - len,
               "; input %zu ('%s') is read on the host, and its value is not known when "
               "planning: node '%s' (#%d, %s) computes it on provider '%s'%s",
               k, val->name, p->name, (int)val->producer, p->op_type, pp->name,
               onyx__dev_is_host(pp) ? " from values not known either"
                                     : " (shape arithmetic stays on the host only where a "
                                       "host provider has a kernel for it)");
    } else {
      snprintf(err + len, err_cap - len,
               "; input %zu ('%s') is read on the host, and its value is not known when "
               "planning (a graph input given without host data, or over %d elements)",
               k, val->name, PLAN_MAX_KNOWN_ELEMENTS);
    }
  }
}

/* Output geometry of node i: evaluated or inferred. Nodes whose inputs are all
 * known values are run on those values — unless infer says an output is large
 * (ConstantOfShape of a big mask), where running would cost real memory. */
static onyx_status node_outputs(onyx_session *s, size_t i, geo *g, const onyx_tensor *in_geo,
                                plan_scratch *sc, char *err, size_t err_cap) {
  const onyx__node *n = &s->graph->nodes[i];
  const onyx__placed_node *pn = &s->nodes[i];
  bool all_known = true;
  const onyx_tensor **in_ptrs = sc->in_ptrs;
  geo *outs = sc->outs;
  memset(in_ptrs, 0, n->input_count * sizeof *in_ptrs);
  memset(outs, 0, n->output_count * sizeof *outs);
  onyx_status st = ONYX_STATUS_OK;
  for (size_t k = 0; k < n->input_count; ++k) {
    if (n->inputs[k] < 0) continue;
    all_known &= g[n->inputs[k]].known;
    in_ptrs[k] = &g[n->inputs[k]].t;
  }
  bool host = onyx__dev_is_host(pn->provider);
  bool inferred = false;
  char why[ONYX__KERNEL_REASON_CAP] = "";
  if (st == ONYX_STATUS_OK && onyx__k_has_infer(pn->kernel)) {
    onyx_status ist = infer_outputs(pn, n, in_geo, outs, sc, why, sizeof why);
    inferred = ist == ONYX_STATUS_OK;
    if (!inferred) reset_outputs(outs, n->output_count);
    if (ist == ONYX_STATUS_OUT_OF_MEMORY)
      st = ist;
    else if (!inferred && !(all_known && host)) {
      onyx__explain(err, err_cap, "its kernel cannot infer output shapes for this geometry", why,
                    ist);
      unknown_host_inputs(s, i, g, err, err_cap);
      st = ist;
    }
  }
  bool evaluate_it = st == ONYX_STATUS_OK && all_known && host;
  for (size_t o = 0; evaluate_it && inferred && o < n->output_count; ++o) {
    int64_t numel = 0;
    if (onyx__ckd_numel(&numel, outs[o].t.dims, outs[o].t.rank) || numel > PLAN_MAX_KNOWN_ELEMENTS)
      evaluate_it = false;
  }
  if (evaluate_it) {
    reset_outputs(outs, n->output_count);
    st = evaluate(pn, in_ptrs, in_geo, n->input_count, outs, n->output_count, err, err_cap);
  } else if (st == ONYX_STATUS_OK && !inferred) {
    onyx__errf(err, err_cap,
               "its kernel has no infer callback and its inputs are not known "
               "values, so its output shapes cannot be planned");
    st = ONYX_STATUS_UNSUPPORTED;
  }
  for (size_t o = 0; st == ONYX_STATUS_OK && o < n->output_count; ++o) {
    int32_t v = n->outputs[o];
    if (v < 0) {
      free(outs[o].owned);
      continue;
    }
    g[v] = outs[o];
    g[v].t.device = pn->provider->device;
    g[v].t.device_id = pn->provider->device_id;
    g[v].known = g[v].t.data != NULL && host && small_int(&g[v].t);
    if (!g[v].known) {
      free(g[v].owned);
      g[v].owned = NULL;
      g[v].t.data = NULL;
    }
    outs[o].owned = NULL;
  }
  if (st != ONYX_STATUS_OK)
    for (size_t o = 0; o < n->output_count; ++o) free(outs[o].owned);
  return st;
}

void onyx__plan_fit_session(onyx_plan *p) {
  const onyx_session *s = p->session;
  size_t np = s->runtime->provider_count;
  memset(p->session_total, 0, np * sizeof *p->session_total);
  memset(p->session_growth, 0, np * sizeof *p->session_growth);
  for (size_t i = 0; i < s->graph->node_count; ++i) {
    const onyx__placed_node *pn = &s->nodes[i];
    onyx__node_plan *np_ = &p->nodes[i];
    const onyx__ws_layout *lay = &np_->layout;
    size_t prov = (size_t)(pn->provider - s->runtime->providers);
    /* A SESSION block is replaced when the geometry needs more bytes, or a stricter
     * alignment than its address happens to have; it never shrinks. */
    uint64_t need = lay->bytes[ONYX_LIFETIME_SESSION];
    bool misaligned = need && pn->session_ws &&
                      ((uintptr_t)pn->session_ws & (lay->align[ONYX_LIFETIME_SESSION] - 1)) != 0;
    np_->session_grows = need > pn->session_ws_bytes || misaligned;
    np_->session_block = need > pn->session_ws_bytes ? need : pn->session_ws_bytes;
    p->session_total[prov] += np_->session_block;
    /* The new block is granted while the old one is still held (admission is all or
     * nothing), so admission needs all of it, not the difference. */
    if (np_->session_grows) p->session_growth[prov] += np_->session_block;
  }
}

void onyx_plan_destroy(onyx_plan *p) {
  if (p == NULL) return;
  free(p->nodes);
  free(p->step_peak);
  free(p->step_peak_node);
  free(p->step_align);
  free(p->session_total);
  free(p->session_growth);
  free(p);
}

onyx_status onyx__plan_build(onyx_session *s, const onyx_tensor *inputs, size_t input_count,
                             onyx_plan **out_plan, char *err, size_t err_cap) {
  const onyx__graph *g = s->graph;
  onyx_status st = onyx__check_inputs(s, inputs, input_count, err, err_cap);
  if (st != ONYX_STATUS_OK) return st;
  size_t np = s->runtime->provider_count;
  onyx_plan *p = calloc(1, sizeof *p);
  geo *vals = calloc(g->value_count + 1, sizeof *vals);
  plan_scratch sc;
  bool have_scratch = scratch_make(&sc, g);
  if (p) {
    p->session = s;
    p->nodes = calloc(g->node_count + 1, sizeof *p->nodes);
    p->step_peak = calloc(np + 1, sizeof *p->step_peak);
    p->step_peak_node = calloc(np + 1, sizeof *p->step_peak_node);
    p->step_align = calloc(np + 1, sizeof *p->step_align);
    p->session_total = calloc(np + 1, sizeof *p->session_total);
    p->session_growth = calloc(np + 1, sizeof *p->session_growth);
  }
  if (!p || !vals || !have_scratch || !p->nodes || !p->step_peak || !p->step_peak_node ||
      !p->step_align || !p->session_total || !p->session_growth) {
    onyx_plan_destroy(p);
    free(vals);
    if (have_scratch) scratch_free(&sc);
    return ONYX_STATUS_OUT_OF_MEMORY;
  }
  for (size_t i = 0; i < g->input_count; ++i) {
    geo *v = &vals[g->inputs[i]];
    v->t = inputs[i];
    v->set = true;
    v->known = onyx__plan_value_known(&inputs[i]); /* the plan cache keys on the same */
    if (!v->known) v->t.data = NULL;
  }
  for (size_t k = 0; k < np; ++k) {
    p->step_peak_node[k] = SIZE_MAX;
    p->step_align[k] = ONYX__WS_MIN_BLOCK_ALIGN;
  }
  for (size_t v = 0; v < g->value_count; ++v) {
    if (!g->values[v].is_initializer) continue;
    vals[v].t = g->values[v].init;
    vals[v].set = true;
    vals[v].known = small_int(&vals[v].t) && vals[v].t.data != NULL;
    if (!vals[v].known) vals[v].t.data = NULL;
  }
  for (size_t i = 0; st == ONYX_STATUS_OK && i < g->node_count; ++i) {
    const onyx__node *n = &g->nodes[i];
    onyx__placed_node *pn = &s->nodes[i];
    onyx_tensor *in_geo = sc.in_geo;
    memset(in_geo, 0, n->input_count * sizeof *in_geo); /* absent: rank 0, UNDEFINED */
    for (size_t k = 0; k < n->input_count; ++k)
      if (n->inputs[k] >= 0) in_geo[k] = vals[n->inputs[k]].t;
    char why[512] = "";
    st = node_outputs(s, i, vals, in_geo, &sc, why, sizeof why);
    onyx__node_plan *np_ = &p->nodes[i];
    np_->req =
        (onyx_workspace_requirement){.struct_size = sizeof np_->req, .version = ONYX_ABI_VERSION};
    if (st == ONYX_STATUS_OK && onyx__k_has_workspace(pn->kernel)) {
      for (size_t k = 0; k < n->input_count; ++k) in_geo[k].data = NULL; /* geometry only */
      char reason[ONYX__KERNEL_REASON_CAP] = "";
      st = onyx__k_workspace(pn->kernel, pn->state, in_geo, n->input_count, &np_->req, reason,
                             sizeof reason);
      if (st != ONYX_STATUS_OK)
        onyx__explain(why, sizeof why, "its workspace callback failed", reason, st);
    }
    if (st == ONYX_STATUS_OK) st = onyx__ws_layout_make(&np_->req, &np_->layout, why, sizeof why);
    if (st != ONYX_STATUS_OK) {
      const onyx__provider *pv = pn->provider;
      onyx__errf(err, err_cap, "planning node '%s' (#%zu, %s on %s%s%s): %s", n->name, i,
                 n->op_type, pv->name, onyx__dev_is_host(pv) ? "" : ", device ",
                 onyx__dev_is_host(pv) ? "" : pv->tier, why);
      break;
    }
    const onyx__ws_layout *lay = &np_->layout;
    size_t prov = (size_t)(pn->provider - s->runtime->providers);
    if (lay->bytes[ONYX_LIFETIME_STEP] > p->step_peak[prov]) {
      p->step_peak[prov] = lay->bytes[ONYX_LIFETIME_STEP];
      p->step_peak_node[prov] = i;
    }
    if (lay->bytes[ONYX_LIFETIME_STEP] && lay->align[ONYX_LIFETIME_STEP] > p->step_align[prov])
      p->step_align[prov] = lay->align[ONYX_LIFETIME_STEP];
  }
  scratch_free(&sc);
  for (size_t v = 0; v < g->value_count; ++v) free(vals[v].owned);
  free(vals);
  if (st != ONYX_STATUS_OK) {
    onyx_plan_destroy(p);
    return st;
  }
  onyx__plan_fit_session(p);
  *out_plan = p;
  return ONYX_STATUS_OK;
}

onyx_status onyx_session_plan(onyx_session *s, const onyx_tensor *inputs, size_t input_count,
                              onyx_plan **out_plan, onyx_error **out_error) {
  if (s == NULL || out_plan == NULL || (input_count && inputs == NULL))
    return onyx__error_set(out_error, ONYX_STATUS_INVALID_ARGUMENT,
                           "onyx_session_plan: session, inputs and out_plan are required");
  char err[ONYX_ERR_CAP] = "";
  onyx_status st = onyx__plan_build(s, inputs, input_count, out_plan, err, sizeof err);
  return st == ONYX_STATUS_OK ? st : onyx__error_set(out_error, st, err);
}

size_t onyx_plan_region_count(const onyx_plan *p) {
  size_t n = 0;
  for (size_t i = 0; p && i < p->session->graph->node_count; ++i) n += p->nodes[i].req.count;
  return n;
}

onyx_plan_region onyx_plan_region_at(const onyx_plan *p, size_t index) {
  onyx_plan_region r;
  memset(&r, 0, sizeof r);
  for (size_t i = 0; p && i < p->session->graph->node_count; ++i) {
    const onyx__node_plan *np_ = &p->nodes[i];
    if (index >= np_->req.count) {
      index -= np_->req.count;
      continue;
    }
    const onyx_workspace_region *rg = &np_->req.regions[index];
    r.node = i;
    r.node_name = p->session->graph->nodes[i].name;
    r.op_type = p->session->graph->nodes[i].op_type;
    r.provider = p->session->nodes[i].provider->name;
    r.region = rg->name ? rg->name : "?";
    r.bytes = rg->bytes;
    r.alignment = rg->alignment ? rg->alignment : 64;
    r.lifetime = rg->lifetime;
    r.offset = np_->layout.offset[index];
    break;
  }
  return r;
}

uint64_t onyx_plan_bytes(const onyx_plan *p, uint32_t lifetime, const char *tier) {
  uint64_t sum = 0;
  for (size_t k = 0; p && k < p->session->runtime->provider_count; ++k) {
    if (tier && strcmp(p->session->runtime->providers[k].tier, tier) != 0) continue;
    sum += lifetime == ONYX_LIFETIME_SESSION ? p->session_total[k] : p->step_peak[k];
  }
  return sum;
}

void onyx_plan_print(const onyx_plan *p, void *stream) {
  FILE *f = stream;
  if (p == NULL || f == NULL) return;
  const onyx_session *s = p->session;
  size_t with = 0;
  for (size_t i = 0; i < s->graph->node_count; ++i) with += p->nodes[i].req.count > 0;
  fprintf(f, "workspace plan (%zu regions; %zu of %zu nodes declare workspace):\n",
          onyx_plan_region_count(p), with, s->graph->node_count);
  for (size_t i = 0; i < s->graph->node_count; ++i) {
    const onyx__node_plan *np_ = &p->nodes[i];
    if (np_->req.count == 0) continue;
    const onyx__node *n = &s->graph->nodes[i];
    fprintf(f, "  #%zu %s (%s on %s): STEP %llu bytes, SESSION %llu bytes\n", i,
            n->name[0] ? n->name : "(unnamed)", n->op_type, s->nodes[i].provider->name,
            (unsigned long long)np_->layout.bytes[ONYX_LIFETIME_STEP],
            (unsigned long long)np_->layout.bytes[ONYX_LIFETIME_SESSION]);
    for (uint32_t k = 0; k < np_->req.count; ++k) {
      const onyx_workspace_region *rg = &np_->req.regions[k];
      fprintf(f, "      %-24s %-7s %12llu bytes @%-10llu align %u%s\n", rg->name ? rg->name : "?",
              rg->lifetime == ONYX_LIFETIME_SESSION ? "SESSION" : "STEP",
              (unsigned long long)rg->bytes, (unsigned long long)np_->layout.offset[k],
              rg->alignment ? rg->alignment : 64, rg->bytes ? "" : " (unused on this route)");
    }
  }
  const onyx_runtime *rt = s->runtime;
  for (size_t k = 0; k < rt->provider_count; ++k) {
    fprintf(f, "  %s (%s): STEP peak %llu bytes", rt->providers[k].name, rt->providers[k].tier,
            (unsigned long long)p->step_peak[k]);
    if (p->step_peak_node[k] != SIZE_MAX) {
      const onyx__node *n = &s->graph->nodes[p->step_peak_node[k]];
      fprintf(f, " (set by #%zu %s, block align %u)", p->step_peak_node[k],
              n->name[0] ? n->name : n->op_type, p->step_align[k]);
    }
    fprintf(f, ", SESSION %llu bytes (%llu to grant)\n", (unsigned long long)p->session_total[k],
            (unsigned long long)p->session_growth[k]);
  }
}

/* What the plan asks of one tier, per requester. */
typedef struct tier_need {
  uint64_t bytes[2]; /* STEP, SESSION (growth) */
  const char *name;
} tier_need;

onyx_status onyx_plan_check(const onyx_plan *p, onyx_error **out_error) {
  if (p == NULL)
    return onyx__error_set(out_error, ONYX_STATUS_INVALID_ARGUMENT, "onyx_plan_check: no plan");
  const onyx_runtime *rt = p->session->runtime;
  tier_need need[ONYX_GOV_MAX_TIERS];
  memset(need, 0, sizeof need);
  /* Providers on one device share its tier: sum what they ask before asking. */
  for (size_t k = 0; k < rt->provider_count; ++k) {
    uint32_t tier = onyx__memory_tier_of(rt->memory, &rt->providers[k]);
    if (tier >= ONYX_GOV_MAX_TIERS) continue;
    need[tier].bytes[0] += p->step_peak[k];
    need[tier].bytes[1] += p->session_growth[k];
    need[tier].name = rt->providers[k].tier;
  }
  static const uint32_t requester[2] = {ONYX_REQUESTER_WORKSPACE_STEP,
                                        ONYX_REQUESTER_WORKSPACE_SESSION};
  onyx_gov *gov = onyx__memory_governor(rt->memory);
  char err[ONYX_ERR_CAP] = "";
  for (uint32_t t = 0; t < ONYX_GOV_MAX_TIERS; ++t) {
    uint64_t total = need[t].bytes[0] + need[t].bytes[1];
    if (total == 0) continue;
    onyx_status st = ONYX_STATUS_OK;
    /* Each requester alone (its cap, and the tier), then both together (the tier):
     * the governor's check is per requester, admission takes both. */
    for (int l = 0; l < 2 && st == ONYX_STATUS_OK; ++l)
      if (need[t].bytes[l])
        st = onyx__memory_check(rt->memory, t, requester[l], need[t].bytes[l], err, sizeof err);
    onyx_gov_tier_usage u;
    if (st == ONYX_STATUS_OK && need[t].bytes[0] && need[t].bytes[1] &&
        onyx_gov_tier_usage_get(gov, t, &u) == ONYX_STATUS_OK &&
        total > u.unassigned + u.reclaimable) {
      snprintf(err, sizeof err,
               "tier %s: requested %llu bytes (workspace_step %llu + "
               "workspace_session %llu), limit %llu, used %llu, reserved %llu, reclaimable %llu",
               need[t].name, (unsigned long long)total, (unsigned long long)need[t].bytes[0],
               (unsigned long long)need[t].bytes[1], (unsigned long long)u.limit,
               (unsigned long long)u.used, (unsigned long long)(u.reserved + u.pending),
               (unsigned long long)u.reclaimable);
      st = ONYX_STATUS_TIER_EXHAUSTED;
    }
    if (st != ONYX_STATUS_OK) {
      char msg[ONYX_ERR_CAP + 128];
      snprintf(msg, sizeof msg, "workspace plan does not fit: %s", err);
      return onyx__error_set(out_error, st, msg);
    }
  }
  return ONYX_STATUS_OK;
}
