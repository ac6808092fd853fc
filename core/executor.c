/*
 * The executor: runs placed nodes in topological order with dynamic shapes.
 *
 * Each value lives in a slot. A slot either borrows memory (graph inputs,
 * initializers) or holds a reference to a buffer the run allocated; aliases (a
 * kernel's output that is one of its inputs, as a shared KV buffer is) share the
 * buffer and its count. A buffer is released when the last value using it has had
 * its last reader, and every buffer is released on any exit, so a failed or
 * cancelled run leaves nothing behind.
 *
 * Memory comes from the run's memory interface (run_memory_impl.h): a plain run or
 * the recording of a device graph, which the node loop never tells apart. The
 * run's bookkeeping (slots, per-node arrays, buffer records) is sized once per
 * session and reused, so a run allocates no heap memory of its own: what it
 * allocates is its values' and workspace's memory, governed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checked_math.h"
#include "error_impl.h"
#include "graphs_impl.h"
#include "memory_impl.h"
#include "optimize/optimize.h"
#include "plan_impl.h"
#include "profile_impl.h"
#include "run_memory_impl.h"
#include "session_impl.h"

typedef struct buffer {
  onyx__run_block block;
  int refs;
  bool heap; /* allocated beyond the session's records (freed, not put back) */
} buffer;

typedef struct slot {
  onyx_tensor view;
  bool set;
  buffer *buf;              /* NULL when borrowed */
  onyx__provider *provider; /* device owner of the data, NULL on the host */
  bool writable;            /* borrowed memory the caller lets kernels write */
} slot;

/* A session's run bookkeeping, kept between runs. Between runs every slot and moved
 * entry is clear and every STEP block and admission entry NULL. */
typedef struct onyx__exec_scratch {
  bool busy;                  /* a run holds it (a nested run gets its own) */
  slot *slots;                /* [value_count] */
  void **step_blocks;         /* [provider_count]: each provider's STEP block */
  void **fresh;               /* [node_count]: admission's new SESSION blocks */
  const onyx_tensor **inputs; /* [max inputs of a node] */
  onyx_tensor *geometry;      /* [max inputs of a node] */
  slot *moved;                /* [max inputs of a node]: copies made for one node */
  onyx__run_output *outputs;  /* [output_count] */
  buffer *buffers;            /* [buffer_cap] */
  buffer **free_buffers;      /* [buffer_cap]: a stack of unused records */
  size_t free_count, buffer_cap;
} onyx__exec_scratch;

typedef struct run_state {
  onyx_session *s;
  onyx__exec_scratch *sc;
  slot *slots;
  size_t node; /* node being computed */
  const onyx_tensor *const *node_inputs;
  char kernel_err[512];
  char err[ONYX_ERR_CAP];
  onyx_status alloc_status; /* first failure inside alloc_output */
  onyx_plan *plan;          /* the admitted workspace plan (the session's cache), NULL: none */
  onyx__run_memory *mem;    /* where the run's memory comes from */
} run_state;

/* ------------------------------------------------------------ bookkeeping */

static void scratch_free(onyx__exec_scratch *sc) {
  if (sc == NULL) return;
  free(sc->slots);
  free(sc->step_blocks);
  free(sc->fresh);
  free(sc->inputs);
  free(sc->geometry);
  free(sc->moved);
  free(sc->outputs);
  free(sc->buffers);
  free(sc->free_buffers);
  free(sc);
}

static onyx__exec_scratch *scratch_new(const onyx_session *s) {
  const onyx__graph *g = s->graph;
  size_t max_in = 1;
  for (size_t i = 0; i < g->node_count; ++i)
    if (g->nodes[i].input_count > max_in) max_in = g->nodes[i].input_count;
  onyx__exec_scratch *sc = calloc(1, sizeof *sc);
  if (sc == NULL) return NULL;
  /* Buffers alive at once: one per value at most, the copies of one node, and the
   * host leg of a copy between two providers' devices. */
  sc->buffer_cap = g->value_count + 2 * max_in + 4;
  sc->slots = calloc(g->value_count + 1, sizeof *sc->slots);
  sc->step_blocks = calloc(s->runtime->provider_count + 1, sizeof *sc->step_blocks);
  sc->fresh = calloc(g->node_count + 1, sizeof *sc->fresh);
  sc->inputs = calloc(max_in, sizeof *sc->inputs);
  sc->geometry = calloc(max_in, sizeof *sc->geometry);
  sc->moved = calloc(max_in, sizeof *sc->moved);
  sc->outputs = calloc(g->output_count + 1, sizeof *sc->outputs);
  sc->buffers = calloc(sc->buffer_cap, sizeof *sc->buffers);
  sc->free_buffers = calloc(sc->buffer_cap, sizeof *sc->free_buffers);
  if (!sc->slots || !sc->step_blocks || !sc->fresh || !sc->inputs || !sc->geometry || !sc->moved ||
      !sc->outputs || !sc->buffers || !sc->free_buffers) {
    scratch_free(sc);
    return NULL;
  }
  for (size_t i = 0; i < sc->buffer_cap; ++i)
    sc->free_buffers[i] = &sc->buffers[sc->buffer_cap - 1 - i];
  sc->free_count = sc->buffer_cap;
  return sc;
}

/* The session's bookkeeping for this run, made on its first run; a run nested in
 * another (a callback running the session again) gets one of its own. */
static onyx__exec_scratch *scratch_take(onyx_session *s) {
  if (s->exec_scratch == NULL) s->exec_scratch = scratch_new(s);
  onyx__exec_scratch *sc = s->exec_scratch;
  if (sc == NULL || sc->busy) sc = scratch_new(s);
  if (sc) sc->busy = true;
  return sc;
}

static void scratch_give(onyx_session *s, onyx__exec_scratch *sc) {
  sc->busy = false;
  if (sc != s->exec_scratch) scratch_free(sc);
}

void onyx__exec_scratch_free(onyx_session *s) {
  scratch_free(s->exec_scratch);
  s->exec_scratch = NULL;
}

static buffer *buffer_take(run_state *r) {
  onyx__exec_scratch *sc = r->sc;
  if (sc->free_count == 0) {
    buffer *b = calloc(1, sizeof *b);
    if (b) b->heap = true;
    return b;
  }
  buffer *b = sc->free_buffers[--sc->free_count];
  memset(b, 0, sizeof *b);
  return b;
}

/* Puts a buffer's record back (its memory already given back, or never had). */
static void buffer_put(run_state *r, buffer *b) {
  if (b->heap)
    free(b);
  else
    r->sc->free_buffers[r->sc->free_count++] = b;
}

static void buffer_release(run_state *r, buffer *b) {
  if (b == NULL || --b->refs > 0) return;
  r->mem->ops->release(r->mem, &b->block);
  buffer_put(r, b);
}

static void slot_clear(run_state *r, slot *sl) {
  buffer_release(r, sl->buf);
  memset(sl, 0, sizeof *sl);
}

static onyx_status checked_bytes(uint32_t dtype, uint32_t rank, const int64_t *dims,
                                 uint64_t *out_bytes) {
  size_t esz = onyx_dtype_size(dtype);
  if (esz == 0) return ONYX_STATUS_UNSUPPORTED;
  if (rank > 0 && dims == NULL) return ONYX_STATUS_INVALID_ARGUMENT;
  return onyx__ckd_bytes(out_bytes, dims, rank, esz) ? ONYX_STATUS_INVALID_ARGUMENT
                                                     : ONYX_STATUS_OK;
}

/* A buffer of `bytes` on `provider`'s device for `requester`, from the run's memory. */
static onyx_status new_buffer(run_state *r, onyx__provider *provider, uint32_t requester,
                              uint64_t bytes, const char *label, buffer **out) {
  buffer *b = buffer_take(r);
  if (b == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  onyx_status st = r->mem->ops->alloc(r->mem, provider, requester, bytes, label, &b->block, r->err,
                                      sizeof r->err);
  if (st != ONYX_STATUS_OK) {
    buffer_put(r, b);
    return st;
  }
  b->refs = 1;
  *out = b;
  return ONYX_STATUS_OK;
}

/* ------------------------------------------------------------ compute context */

static onyx_status ctx_alloc_output(onyx_compute_ctx *ctx, size_t index, uint32_t dtype,
                                    uint32_t rank, const int64_t *dims, onyx_tensor **out_view) {
  run_state *r = ctx->core_data;
  const onyx__node *n = &r->s->graph->nodes[r->node];
  onyx__placed_node *pn = &r->s->nodes[r->node];
  if (index >= n->output_count || n->outputs[index] < 0) {
    snprintf(r->kernel_err, sizeof r->kernel_err,
             "alloc_output: output %zu is not named by the node", index);
    return r->alloc_status = ONYX_STATUS_INVALID_ARGUMENT;
  }
  slot *sl = &r->slots[n->outputs[index]];
  uint64_t bytes = 0;
  if (!onyx__k_type_ok(pn->kernel, ONYX_TYPE_OUTPUT, index, dtype)) {
    snprintf(r->kernel_err, sizeof r->kernel_err,
             "alloc_output: output %zu as %s breaks the kernel's own type constraint", index,
             onyx__dtype_str(dtype));
    return r->alloc_status = ONYX_STATUS_INVALID_ARGUMENT;
  }
  if (sl->set || (rank > 0 && dims == NULL) ||
      checked_bytes(dtype, rank, dims, &bytes) != ONYX_STATUS_OK) {
    snprintf(r->kernel_err, sizeof r->kernel_err, "alloc_output: output %zu %s", index,
             sl->set ? "allocated twice" : "has an invalid dtype or geometry");
    return r->alloc_status = ONYX_STATUS_INVALID_ARGUMENT;
  }
  buffer *b = NULL;
  char label[160];
  snprintf(label, sizeof label, "node %zu %s output %zu", r->node, n->op_type, index);
  onyx_status st = new_buffer(r, pn->provider, ONYX_REQUESTER_ACTIVATIONS, bytes, label, &b);
  if (st != ONYX_STATUS_OK) {
    snprintf(r->kernel_err, sizeof r->kernel_err, "output %zu: %s", index, r->err);
    return r->alloc_status = st;
  }
  sl->buf = b;
  sl->set = true;
  sl->provider = b->block.provider;
  sl->view = (onyx_tensor){.dtype = dtype,
                           .device = pn->provider->device,
                           .device_id = pn->provider->device_id,
                           .rank = rank,
                           .data = b->block.ptr};
  for (uint32_t i = 0; i < rank; ++i) sl->view.dims[i] = dims[i];
  *out_view = &sl->view;
  return ONYX_STATUS_OK;
}

static onyx_status ctx_alias_output(onyx_compute_ctx *ctx, size_t index, size_t input_index) {
  run_state *r = ctx->core_data;
  const onyx__node *n = &r->s->graph->nodes[r->node];
  if (index >= n->output_count || n->outputs[index] < 0 || input_index >= n->input_count ||
      n->inputs[input_index] < 0 || r->node_inputs[input_index] == NULL) {
    snprintf(r->kernel_err, sizeof r->kernel_err, "alias_output: output %zu / input %zu invalid",
             index, input_index);
    return r->alloc_status = ONYX_STATUS_INVALID_ARGUMENT;
  }
  slot *out = &r->slots[n->outputs[index]];
  const slot *in = &r->slots[n->inputs[input_index]];
  if (r->node_inputs[input_index] != &in->view) {
    /* The kernel saw a copy made for this call (another device's value, a host view
     * of it), freed when the node returns: not a buffer an output can keep. */
    snprintf(r->kernel_err, sizeof r->kernel_err,
             "alias_output: output %zu cannot alias input %zu (a copy made for this call)", index,
             input_index);
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  if (out->set || (in->buf == NULL && !in->writable)) {
    /* Borrowed memory is read-only to the run unless the caller said otherwise. */
    /* A refusal, not an error: the kernel may allocate the output and copy. */
    snprintf(r->kernel_err, sizeof r->kernel_err,
             "alias_output: output %zu cannot alias input %zu (%s)", index, input_index,
             out->set ? "output already set" : "input memory is borrowed, not owned by the run");
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  *out = *in;
  out->view = *r->node_inputs[input_index];
  if (out->buf) out->buf->refs++;
  return ONYX_STATUS_OK;
}

static void ctx_set_error(onyx_compute_ctx *ctx, const char *fmt, ...) {
  run_state *r = ctx->core_data;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->kernel_err, sizeof r->kernel_err, fmt, ap);
  va_end(ap);
}

/* ------------------------------------------------------------ transfers */

/* Makes the value in `src` available on `target`'s device (NULL: the host), into
 * `tmp` (a slot the caller clears). Host<->device copies go through the device
 * instance's copy; between two devices of one provider (sibling instances) the
 * destination copies after the source's stream is synced; between two providers'
 * devices the value goes through the host.
 *
 * Only a copy to the host is followed by the provider's sync: the host reads the
 * bytes right after. A copy to the device is left queued on the provider's stream,
 * ahead of the kernels that read it. The copy contract (abi/onyx_provider.h) makes
 * that safe for the source too: copy returns once the source may be reused, so a
 * host buffer freed when this node returns, or a caller's input, is not read later.
 * The device-side buffers freed afterwards go back through device_free, which a
 * stream-ordered provider queues behind the copy and its readers. */
static onyx_status transfer(run_state *r, const slot *src, onyx__provider *target,
                            uint32_t requester, const char *label, slot *tmp) {
  bool to_device = !onyx__dev_is_host(target);
  onyx__provider *from = src->provider;
  onyx_status st =
      r->mem->ops->transfer(r->mem, &r->s->graph->nodes[r->node], label, r->err, sizeof r->err);
  if (st != ONYX_STATUS_OK) return st;
  if (to_device && from && from != target && !onyx__dev_siblings(from, target)) {
    slot host = {0};
    st = transfer(r, src, NULL, requester, label, &host);
    if (st == ONYX_STATUS_OK) st = transfer(r, &host, target, requester, label, tmp);
    slot_clear(r, &host);
    return st;
  }
  onyx__provider *copier = to_device ? target : from;
  uint64_t bytes = 0;
  st = checked_bytes(src->view.dtype, src->view.rank, src->view.dims, &bytes);
  if (st != ONYX_STATUS_OK) return st;
  buffer *b = NULL;
  st = new_buffer(r, to_device ? target : NULL, requester, bytes, label, &b);
  if (st != ONYX_STATUS_OK) return st;
  tmp->buf = b;
  tmp->set = true;
  tmp->provider = b->block.provider;
  tmp->view = src->view;
  tmp->view.data = b->block.ptr;
  tmp->view.device = to_device ? target->device : ONYX_DEVICE_HOST;
  tmp->view.device_id = to_device ? target->device_id : 0;
  char why[ONYX__KERNEL_REASON_CAP] = "";
  /* A sibling's value is read once its own stream has produced it. */
  if (to_device && from && from != target) st = onyx__dev_sync_raw(from);
  if (st == ONYX_STATUS_OK) st = onyx__dev_copy(copier, &tmp->view, &src->view, why, sizeof why);
  if (st == ONYX_STATUS_OK && !to_device) st = onyx__dev_sync_raw(copier);
  if (st != ONYX_STATUS_OK)
    snprintf(r->err, sizeof r->err,
             "copy of %llu bytes from %s to %s through provider '%s' failed: %s%s%s",
             (unsigned long long)bytes, from ? from->tier : "host",
             to_device ? target->tier : "host", copier->name, onyx_status_str(st),
             why[0] ? ": " : "", why);
  return st;
}

/* Is the slot's value where `p`'s kernels read it: on the host for a host instance,
 * on that very device instance otherwise? */
static bool slot_on(const slot *sl, const onyx__provider *p) {
  if (onyx__dev_is_host(p)) return sl->view.device == ONYX_DEVICE_HOST;
  if (sl->provider) return sl->provider == p;
  return sl->view.device == p->device && sl->view.device_id == p->device_id;
}

/* ------------------------------------------------------------ one node */

/* Replaces node `node`'s SESSION block with one of `bytes` laid out for `req`,
 * booked per region (contents are not kept: a kernel may rely on SESSION contents
 * only while the geometry stays). Unplanned runs only; admission does the same for
 * every node at once. */
static onyx_status grow_session_block(run_state *r, size_t node,
                                      const onyx_workspace_requirement *req,
                                      const onyx__ws_layout *lay) {
  onyx__placed_node *pn = &r->s->nodes[node];
  uint64_t need = lay->bytes[ONYX_LIFETIME_SESSION];
  bool misaligned =
      pn->session_ws && ((uintptr_t)pn->session_ws & (lay->align[ONYX_LIFETIME_SESSION] - 1)) != 0;
  if (need == 0 || (need <= pn->session_ws_bytes && !misaligned)) return ONYX_STATUS_OK;
  uint64_t bytes = need > pn->session_ws_bytes ? need : pn->session_ws_bytes;
  void *grown = NULL;
  onyx_status st = onyx__ws_block_alloc(r->s, node, req, lay, ONYX_LIFETIME_SESSION, bytes,
                                        lay->align[ONYX_LIFETIME_SESSION], "session", &grown,
                                        r->err, sizeof r->err);
  if (st != ONYX_STATUS_OK) return st;
  onyx__memory_free(r->s->runtime->memory, pn->session_ws);
  pn->session_ws = grown;
  pn->session_ws_bytes = bytes;
  return ONYX_STATUS_OK;
}

/*
 * Admission: reserves the whole plan before the first kernel runs — one STEP block
 * per provider (the peak over its nodes, booked per region of the node that sets
 * the peak) and every SESSION block that must grow (booked per region of its node).
 * All or nothing: on a refusal everything taken here is given back and the session
 * keeps the blocks it had.
 */
static onyx_status admit_plan(run_state *r) {
  onyx_session *s = r->s;
  const onyx_plan *p = r->plan;
  onyx__run_memory *m = r->mem;
  size_t np = s->runtime->provider_count;
  void **step = r->sc->step_blocks;
  onyx_status st = ONYX_STATUS_OK;
  for (size_t k = 0; k < np && st == ONYX_STATUS_OK; ++k)
    if (p->step_peak[k] != 0) st = m->ops->admit_step(m, p, k, &step[k], r->err, sizeof r->err);
  /* SESSION growth: new blocks first, swapped in only when all were granted. */
  size_t nn = s->graph->node_count;
  void **fresh = r->sc->fresh;
  for (size_t i = 0; i < nn && st == ONYX_STATUS_OK; ++i) {
    const onyx__node_plan *np_ = &p->nodes[i];
    if (!np_->session_grows) continue;
    st = onyx__ws_block_alloc(s, i, &np_->req, &np_->layout, ONYX_LIFETIME_SESSION,
                              np_->session_block, np_->layout.align[ONYX_LIFETIME_SESSION],
                              "session", &fresh[i], r->err, sizeof r->err);
  }
  for (size_t i = 0; i < nn; ++i) {
    if (fresh[i] == NULL) continue;
    if (st == ONYX_STATUS_OK) {
      m->ops->session_grew(m, s->nodes[i].provider);
      onyx__memory_free(s->runtime->memory, s->nodes[i].session_ws);
      s->nodes[i].session_ws = fresh[i];
      s->nodes[i].session_ws_bytes = p->nodes[i].session_block;
    } else {
      onyx__memory_free(s->runtime->memory, fresh[i]);
    }
    fresh[i] = NULL;
  }
  if (st != ONYX_STATUS_OK) {
    for (size_t k = 0; k < np; ++k) {
      m->ops->release_step(m, step[k]);
      step[k] = NULL;
    }
  }
  return st;
}

/* The node's workspace views, carved from its provider's STEP block and its own
 * SESSION block in the layout of the requirement. The kernel is asked again for
 * the geometry it really sees; more than was planned (bytes or alignment) is a
 * defect in some kernel's infer or workspace, reported rather than overrun. Without
 * a plan (a kernel that cannot infer shapes), workspace is granted node by node
 * instead: the node's own STEP block (*out_own_step, freed after the node) and its
 * SESSION block grown in place of admission. */
static onyx_status node_workspace(run_state *r, size_t node, onyx__placed_node *pn,
                                  const onyx_tensor *inputs, size_t count,
                                  onyx_workspace_view *views, size_t *out_views,
                                  void **out_own_step) {
  *out_views = 0;
  *out_own_step = NULL;
  if (!onyx__k_has_workspace(pn->kernel)) return ONYX_STATUS_OK;
  onyx_workspace_requirement req;
  memset(&req, 0, sizeof req);
  req.struct_size = sizeof req;
  req.version = ONYX_ABI_VERSION;
  char why[ONYX__KERNEL_REASON_CAP];
  onyx_status st = onyx__k_workspace(pn->kernel, pn->state, inputs, count, &req, why, sizeof why);
  if (st != ONYX_STATUS_OK) {
    onyx__explain(r->err, sizeof r->err, "workspace callback failed", why, st);
    return st;
  }
  onyx__ws_layout lay;
  st = onyx__ws_layout_make(&req, &lay, r->err, sizeof r->err);
  if (st != ONYX_STATUS_OK) return st;
  uint64_t step = lay.bytes[ONYX_LIFETIME_STEP], session = lay.bytes[ONYX_LIFETIME_SESSION];
  size_t prov = (size_t)(pn->provider - r->s->runtime->providers);
  char *step_base = NULL;
  if (r->plan) {
    const onyx__node_plan *planned = &r->plan->nodes[node];
    if (step > r->plan->step_peak[prov] || session > pn->session_ws_bytes) {
      snprintf(r->err, sizeof r->err,
               "kernel asks for %llu STEP + %llu SESSION workspace bytes but %llu + %llu were "
               "planned for this geometry (its infer and compute disagree)",
               (unsigned long long)step, (unsigned long long)session,
               (unsigned long long)planned->layout.bytes[ONYX_LIFETIME_STEP],
               (unsigned long long)planned->layout.bytes[ONYX_LIFETIME_SESSION]);
      return ONYX_STATUS_INTERNAL;
    }
    step_base = r->sc->step_blocks[prov];
  } else {
    st = grow_session_block(r, node, &req, &lay);
    if (st == ONYX_STATUS_OK && step > 0)
      st = onyx__ws_block_alloc(r->s, node, &req, &lay, ONYX_LIFETIME_STEP, step,
                                lay.align[ONYX_LIFETIME_STEP], "step unplanned", out_own_step,
                                r->err, sizeof r->err);
    if (st != ONYX_STATUS_OK) return st;
    step_base = *out_own_step;
  }
  for (uint32_t i = 0; i < req.count; ++i) {
    const onyx_workspace_region *rg = &req.regions[i];
    char *base = rg->lifetime == ONYX_LIFETIME_SESSION ? pn->session_ws : step_base;
    char *at = rg->bytes && base ? base + lay.offset[i] : NULL;
    uintptr_t align = rg->alignment ? rg->alignment : 64;
    if (rg->bytes && (at == NULL || ((uintptr_t)at & (align - 1)) != 0)) {
      snprintf(r->err, sizeof r->err,
               "workspace region %u '%s' cannot be carved at alignment %u from the planned "
               "block (its infer and workspace disagree)",
               i, rg->name ? rg->name : "?", (unsigned)align);
      return ONYX_STATUS_INTERNAL;
    }
    views[i] = (onyx_workspace_view){.name = rg->name, .data = at, .bytes = rg->bytes};
  }
  *out_views = req.count;
  return ONYX_STATUS_OK;
}

static onyx_status run_node(run_state *r, size_t i) {
  onyx_session *s = r->s;
  const onyx__node *n = &s->graph->nodes[i];
  onyx__placed_node *pn = &s->nodes[i];
  r->node = i;
  r->kernel_err[0] = '\0';
  r->alloc_status = ONYX_STATUS_OK;

  /* The session's arrays: moved is clear between nodes, the others are reset here
   * (an absent input is NULL and has rank 0, dtype UNDEFINED). */
  const onyx_tensor **inputs = r->sc->inputs;
  onyx_tensor *geometry = r->sc->geometry;
  slot *moved = r->sc->moved;
  memset(inputs, 0, n->input_count * sizeof *inputs);
  memset(geometry, 0, n->input_count * sizeof *geometry);
  onyx_status st = ONYX_STATUS_OK;
  const uint64_t host_inputs = pn->kernel->host_inputs;
  const uint64_t geometry_inputs = pn->kernel->geometry_inputs;
  for (size_t k = 0; st == ONYX_STATUS_OK && k < n->input_count; ++k) {
    int32_t v = n->inputs[k];
    if (v < 0) continue;
    slot *sl = &r->slots[v];
    if (!sl->set) {
      snprintf(r->err, sizeof r->err, "input %zu ('%s') has no value", k, s->graph->values[v].name);
      st = ONYX_STATUS_INTERNAL;
      break;
    }
    if ((k < 64 && (geometry_inputs >> k & 1u)) || onyx__input_copied(s, i, k)) {
      /* Read for its geometry alone (Shape of a device tensor), or a constant the
       * kernel copied at create (its data may be gone): never moved. */
    } else if (k < 64 && (host_inputs >> k & 1u)) {
      /* The kernel reads these values on the host (a shape, axes, a length): the
       * host copy as it is — the usual case, as their producers run on the CPU
       * provider — or a device value brought back; never a copy to the device. */
      if (sl->view.device != ONYX_DEVICE_HOST) {
        st = transfer(r, sl, NULL, ONYX_REQUESTER_ACTIVATIONS, "host copy of an input", &moved[k]);
        sl = &moved[k];
      }
    } else if (!slot_on(sl, pn->provider)) {
      void *on_device = onyx__device_init(s, (size_t)v, pn->provider);
      if (on_device != NULL) {
        /* Weights went to the device when the session was created (device_weights.c). */
        moved[k] = *sl;
        moved[k].buf = NULL;
        moved[k].view.data = on_device;
        moved[k].view.device = pn->provider->device;
        moved[k].view.device_id = pn->provider->device_id;
        moved[k].provider = pn->provider;
      } else {
        st = transfer(r, sl, pn->provider, ONYX_REQUESTER_ACTIVATIONS, "device copy of an input",
                      &moved[k]);
      }
      sl = &moved[k];
    }
    inputs[k] = &sl->view;
    geometry[k] = sl->view;
  }
  /* Kernels may not know every dtype at placement: enforce the constraints here too. */
  const onyx__kernel *kt = pn->kernel;
  for (size_t k = 0; st == ONYX_STATUS_OK && k < n->input_count; ++k) {
    if (inputs[k] == NULL || onyx__k_type_ok(kt, ONYX_TYPE_INPUT, k, inputs[k]->dtype)) continue;
    snprintf(r->err, sizeof r->err, "provider '%s' (%s) has no %s kernel for %s (input %zu)",
             pn->provider->name, pn->provider->tier, onyx__dtype_str(inputs[k]->dtype), n->op_type,
             k);
    st = ONYX_STATUS_UNSUPPORTED;
  }
  onyx_workspace_view views[ONYX_MAX_WORKSPACE_REGIONS];
  size_t view_count = 0;
  void *own_step = NULL;
  if (st == ONYX_STATUS_OK)
    st = node_workspace(r, i, pn, geometry, n->input_count, views, &view_count, &own_step);
  if (st == ONYX_STATUS_OK) {
    onyx_compute_ctx ctx = {
        .struct_size = sizeof ctx,
        .version = ONYX_ABI_VERSION,
        .core_data = r,
        .stream = onyx__provider_stream(pn->provider),
        .alloc_output = ctx_alloc_output,
        .alias_output = ctx_alias_output,
        .set_error = ctx_set_error,
        .workspace = views,
        .workspace_count = view_count,
    };
    r->node_inputs = inputs;
    st = onyx__k_compute(kt, pn->state, &ctx, (const onyx_tensor *const *)inputs, n->input_count);
    if (st == ONYX_STATUS_OK && r->alloc_status != ONYX_STATUS_OK) st = r->alloc_status;
    if (st != ONYX_STATUS_OK) {
      snprintf(r->err, sizeof r->err, "%s", r->kernel_err[0] ? r->kernel_err : onyx_status_str(st));
    }
    for (size_t o = 0; st == ONYX_STATUS_OK && o < n->output_count; ++o) {
      if (n->outputs[o] >= 0 && !r->slots[n->outputs[o]].set) {
        snprintf(r->err, sizeof r->err, "kernel returned without producing output %zu ('%s')", o,
                 s->graph->values[n->outputs[o]].name);
        st = ONYX_STATUS_PROVIDER_ERROR;
      }
    }
  }
  onyx__memory_free(s->runtime->memory, own_step);
  for (size_t k = 0; k < n->input_count; ++k) slot_clear(r, &moved[k]);
  if (st != ONYX_STATUS_OK) {
    /* A failed node's outputs are not kept: they may be half written. */
    for (size_t o = 0; o < n->output_count; ++o)
      if (n->outputs[o] >= 0) slot_clear(r, &r->slots[n->outputs[o]]);
    return st;
  }
  /* Values read for the last time here are dropped now, keeping the peak low. */
  for (size_t k = 0; k < n->input_count; ++k) {
    int32_t v = n->inputs[k];
    if (v >= 0 && s->last_use[v] == (int32_t)i) slot_clear(r, &r->slots[v]);
  }
  for (size_t o = 0; o < n->output_count; ++o) {
    int32_t v = n->outputs[o];
    if (v >= 0 && s->last_use[v] < 0) slot_clear(r, &r->slots[v]); /* nobody reads it */
  }
  return ONYX_STATUS_OK;
}

/* ------------------------------------------------------------ the run */

onyx_status onyx__check_inputs(const onyx_session *s, const onyx_tensor *inputs, size_t count,
                               char *err, size_t err_cap) {
  const onyx__graph *g = s->graph;
  if (count != g->input_count) {
    onyx__errf(err, err_cap, "expected %zu inputs, got %zu", g->input_count, count);
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  for (size_t i = 0; i < count; ++i) {
    const onyx__value *val = &g->values[g->inputs[i]];
    const onyx_tensor *t = &inputs[i];
    if (t->device != ONYX_DEVICE_HOST &&
        onyx__device_provider(s->runtime, t->device, t->device_id) == NULL) {
      onyx__errf(err, err_cap,
                 "input '%s' is in device memory (kind %u, device %d) that no loaded "
                 "provider owns",
                 val->name, t->device, (int)t->device_id);
      return ONYX_STATUS_INVALID_ARGUMENT;
    }
    if (val->dtype != ONYX_DTYPE_UNDEFINED && t->dtype != val->dtype) {
      onyx__errf(err, err_cap, "input '%s': expected dtype %s, got %s", val->name,
                 onyx__dtype_str(val->dtype), onyx__dtype_str(t->dtype));
      return ONYX_STATUS_INVALID_ARGUMENT;
    }
    uint64_t bytes = 0;
    if (checked_bytes(t->dtype, t->rank, t->dims, &bytes) != ONYX_STATUS_OK) {
      onyx__errf(err, err_cap, "input '%s': invalid dtype or dims", val->name);
      return ONYX_STATUS_INVALID_ARGUMENT;
    }
    if (val->rank >= 0 && (int32_t)t->rank != val->rank) {
      onyx__errf(err, err_cap, "input '%s': expected rank %d, got %u", val->name, val->rank,
                 t->rank);
      return ONYX_STATUS_INVALID_ARGUMENT;
    }
    for (int32_t d = 0; val->rank >= 0 && d < val->rank; ++d) {
      if (val->dims[d] >= 0 && val->dims[d] != t->dims[d]) {
        onyx__errf(err, err_cap, "input '%s': dim %d expected %lld, got %lld", val->name, d,
                   (long long)val->dims[d], (long long)t->dims[d]);
        return ONYX_STATUS_INVALID_ARGUMENT;
      }
    }
    if (bytes > 0 && t->data == NULL) {
      onyx__errf(err, err_cap, "input '%s': data is NULL", val->name);
      return ONYX_STATUS_INVALID_ARGUMENT;
    }
  }
  return ONYX_STATUS_OK;
}

static onyx_status bind_inputs(run_state *r, const onyx_tensor *inputs, size_t count,
                               const bool *writable) {
  const onyx__graph *g = r->s->graph;
  onyx_status st = onyx__check_inputs(r->s, inputs, count, r->err, sizeof r->err);
  if (st != ONYX_STATUS_OK) return st;
  for (size_t i = 0; i < count; ++i) {
    slot *sl = &r->slots[g->inputs[i]];
    sl->view = inputs[i];
    sl->set = true;
    sl->writable = writable != NULL && writable[i];
    /* Device inputs (a KV cache on the GPU) are copied, where needed, by their owner. */
    if (inputs[i].device != ONYX_DEVICE_HOST)
      sl->provider = onyx__device_provider(r->s->runtime, inputs[i].device, inputs[i].device_id);
    r->mem->ops->bind_input(r->mem, i, &sl->view, &sl->provider, &sl->writable);
  }
  for (size_t v = 0; v < g->value_count; ++v) {
    if (!g->values[v].is_initializer) continue;
    r->slots[v].view = g->values[v].init;
    r->slots[v].set = true;
  }
  return ONYX_STATUS_OK;
}

/* The memory of a host buffer only this output holds, taken out of the run and the
 * books for the caller to free (onyx_tensor_data_free); NULL when it is shared, a
 * graph's, or on a device. */
static void *hand_over(run_state *r, const slot *sl) {
  buffer *b = sl->buf;
  if (b == NULL || b->refs != 1 || sl->view.data != b->block.ptr) return NULL;
  return r->mem->ops->hand_over(r->mem, &b->block);
}

/* Graph outputs as host memory the caller owns: the run's own buffer where nothing
 * else holds it, else a fresh copy. */
static onyx_status collect_outputs(run_state *r, onyx_tensor *outs, bool *out_borrowed) {
  onyx_session *s = r->s;
  const onyx__graph *g = s->graph;
  onyx_status st = ONYX_STATUS_OK;
  size_t done = 0;
  for (; done < g->output_count && st == ONYX_STATUS_OK; ++done) {
    slot *sl = &r->slots[g->outputs[done]];
    if (out_borrowed) out_borrowed[done] = false;
    if (out_borrowed && sl->writable && sl->buf == NULL) {
      /* The caller's own writable buffer, written in place: hand it back as is (on
       * whatever device it lives). */
      outs[done] = sl->view;
      out_borrowed[done] = true;
      continue;
    }
    slot host = {0};
    const slot *src = sl;
    if (sl->view.device != ONYX_DEVICE_HOST) {
      st = transfer(r, sl, NULL, ONYX_REQUESTER_ACTIVATIONS, "output copied to the host", &host);
      src = &host;
    }
    uint64_t bytes = 0;
    if (st == ONYX_STATUS_OK)
      st = checked_bytes(src->view.dtype, src->view.rank, src->view.dims, &bytes);
    void *data = NULL;
    if (st == ONYX_STATUS_OK && bytes > 0 && src == sl && (data = hand_over(r, sl)) != NULL) {
      /* The run's own host buffer becomes the caller's: no copy of the logits. */
    } else if (st == ONYX_STATUS_OK && bytes > 0) {
      data = malloc((size_t)bytes);
      if (data == NULL)
        st = ONYX_STATUS_OUT_OF_MEMORY;
      else
        memcpy(data, src->view.data, (size_t)bytes);
    }
    if (st == ONYX_STATUS_OK) {
      outs[done] = src->view;
      outs[done].device = ONYX_DEVICE_HOST;
      outs[done].device_id = 0;
      outs[done].data = data;
    }
    slot_clear(r, &host);
  }
  if (st != ONYX_STATUS_OK) {
    for (size_t i = 0; i + 1 < done; ++i)
      if (!(out_borrowed && out_borrowed[i])) free(outs[i].data);
  }
  return st;
}

/* Where the graph's outputs lie, for the run memory's finish. */
static const onyx__run_output *run_outputs(run_state *r) {
  const onyx__graph *g = r->s->graph;
  onyx__run_output *o = r->sc->outputs;
  for (size_t k = 0; k < g->output_count; ++k) {
    const slot *sl = &r->slots[g->outputs[k]];
    o[k] = (onyx__run_output){.view = &sl->view,
                              .callers = sl->writable && sl->buf == NULL,
                              .block = sl->buf ? &sl->buf->block : NULL};
  }
  return o;
}

/* Plans the run (the session's cached plan for this geometry where it has one) and
 * admits it before the first kernel. A graph whose kernels cannot say their output
 * shapes runs unplanned, granting workspace node by node. */
static onyx_status plan_and_admit(run_state *r, const onyx_tensor *inputs, size_t count, char *msg,
                                  size_t msg_cap) {
  onyx_status st = onyx__plan_acquire(r->s, inputs, count, &r->plan, r->err, sizeof r->err);
  if (st == ONYX_STATUS_UNSUPPORTED) {
    char why[ONYX_ERR_CAP];
    snprintf(why, sizeof why, "%s", r->err);
    st = r->mem->ops->unplanned(r->mem, why, r->err, sizeof r->err);
    if (st != ONYX_STATUS_OK) snprintf(msg, msg_cap, "%s", r->err);
  } else if (st == ONYX_STATUS_OK) {
    st = admit_plan(r);
    if (st != ONYX_STATUS_OK)
      snprintf(msg, msg_cap, "admission refused before any kernel ran: %s", r->err);
  } else {
    snprintf(msg, msg_cap, "%s", r->err);
  }
  return st;
}

/* Runs every node in order; on failure `msg` names the node. */
static onyx_status run_nodes(run_state *r, const onyx_run_options *options, onyx__profile *prof,
                             char *msg, size_t msg_cap) {
  onyx_session *s = r->s;
  const onyx__graph *g = s->graph;
  onyx_status st = ONYX_STATUS_OK;
  for (size_t i = 0; st == ONYX_STATUS_OK && i < g->node_count; ++i) {
    if (onyx__run_cancelled(options, i)) {
      snprintf(msg, msg_cap, "run cancelled before node #%zu", i);
      return ONYX_STATUS_CANCELLED;
    }
    double t_node = prof ? onyx__now_ms() : 0;
    st = run_node(r, i);
    if (prof && st == ONYX_STATUS_OK) {
      /* Wait for a device node so that its time is its own. */
      st = onyx__stream_sync(s->nodes[i].provider);
      onyx__profile_node(prof, i, onyx__now_ms() - t_node);
      if (st != ONYX_STATUS_OK)
        snprintf(r->err, sizeof r->err, "the device failed: %s", onyx_status_str(st));
    }
    if (st != ONYX_STATUS_OK) {
      const onyx__node *n = &g->nodes[i];
      const onyx__provider *p = s->nodes[i].provider;
      snprintf(msg, msg_cap, "node '%s' (#%zu, %s%s%s on %s%s%s): %s", n->name, i,
               n->domain[0] ? n->domain : "", n->domain[0] ? "::" : "", n->op_type, p->name,
               onyx__dev_is_host(p) ? "" : ", device ", onyx__dev_is_host(p) ? "" : p->tier,
               r->err);
    }
  }
  return st;
}

onyx_status onyx__execute(onyx_session *s, const onyx_run_options *options,
                          const onyx_tensor *inputs, size_t input_count, onyx_tensor *out_outputs,
                          onyx__run_memory *memory, onyx_error **out_error) {
  const onyx__graph *g = s->graph;
  onyx__run_memory plain;
  if (memory == NULL) {
    onyx__run_memory_plain(&plain, s, NULL);
    memory = &plain;
  }
  run_state r;
  memset(&r, 0, sizeof r);
  r.s = s;
  r.mem = memory;
  r.sc = scratch_take(s);
  if (r.sc == NULL) return onyx__error_set(out_error, ONYX_STATUS_OUT_OF_MEMORY, NULL);
  r.slots = r.sc->slots;
  onyx__run_memory *m = memory;
  /* Nothing of this run may land in another thread's capture (stream_lock.c). */
  onyx__stream_enter_all(s->runtime);

  onyx_status st = bind_inputs(&r, inputs, input_count, onyx__run_writable(options));
  char msg[ONYX_ERR_CAP + 256] = "";
  if (st != ONYX_STATUS_OK) snprintf(msg, sizeof msg, "%s", r.err);
  onyx__profile *prof = m->timed ? s->profile : NULL;
  double t_plan = prof ? onyx__now_ms() : 0;
  if (st == ONYX_STATUS_OK) st = plan_and_admit(&r, inputs, input_count, msg, sizeof msg);
  if (prof && st == ONYX_STATUS_OK) onyx__profile_plan(prof, onyx__now_ms() - t_plan);
  if (st == ONYX_STATUS_OK) {
    st = m->ops->begin(m, r.err, sizeof r.err);
    if (st != ONYX_STATUS_OK) snprintf(msg, sizeof msg, "%s", r.err);
  }
  if (st == ONYX_STATUS_OK) st = run_nodes(&r, options, prof, msg, sizeof msg);
  st = m->ops->finish(m, st, run_outputs(&r), g->output_count, msg, sizeof msg);
  if (st == ONYX_STATUS_OK && out_outputs != NULL) {
    st = collect_outputs(&r, out_outputs, onyx__run_borrowed(options));
    if (st != ONYX_STATUS_OK) snprintf(msg, sizeof msg, "collecting outputs: %s", r.err);
  }
  for (size_t v = 0; v < g->value_count; ++v) slot_clear(&r, &r.slots[v]);
  onyx__run_memory_done(m);
  /* STEP workspace ends with the run, whatever its outcome (a graph keeps its own). */
  for (size_t k = 0; k < s->runtime->provider_count; ++k) {
    m->ops->release_step(m, r.sc->step_blocks[k]);
    r.sc->step_blocks[k] = NULL;
  }
  onyx__plan_release(s, r.plan);
  scratch_give(s, r.sc);
  onyx__stream_leave_all(s->runtime);
  if (st != ONYX_STATUS_OK) return onyx__error_set(out_error, st, msg);
  return ONYX_STATUS_OK;
}

onyx_status onyx_session_run(onyx_session *s, const onyx_run_options *options,
                             const onyx_tensor *inputs, size_t input_count,
                             onyx_tensor *out_outputs, onyx_error **out_error) {
  if (s == NULL || (input_count > 0 && inputs == NULL) || out_outputs == NULL)
    return onyx__error_set(out_error, ONYX_STATUS_INVALID_ARGUMENT,
                           "onyx_session_run: session, inputs and out_outputs are required");
  if (onyx__run_options_has(options, capture_graph) && options->capture_graph)
    return onyx__graphs_run(s, options, inputs, input_count, out_outputs, out_error);
  return onyx__execute(s, options, inputs, input_count, out_outputs, NULL, out_error);
}

void onyx_tensor_data_free(void *data) { free(data); }
