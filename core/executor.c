/*
 * The executor: runs placed nodes in topological order with dynamic shapes.
 *
 * Each value lives in a slot. A slot either borrows memory (graph inputs,
 * initializers) or holds a reference to a buffer the run allocated; aliases (a
 * kernel's output that is one of its inputs, as a shared KV buffer is) share the
 * buffer and its count. A buffer is released when the last value using it has had
 * its last reader, and every buffer is released on any exit, so a failed or
 * cancelled run leaves nothing behind.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "act_pool_impl.h"
#include "checked_math.h"
#include "error_impl.h"
#include "graphs_impl.h"
#include "memory_impl.h"
#include "optimize/optimize.h"
#include "plan_impl.h"
#include "profile_impl.h"
#include "session_impl.h"

typedef struct buffer {
  void *ptr;
  onyx__provider *provider; /* where it lives (NULL: host) */
  int refs;
  bool in_arena;        /* carved from a graph's arena: the graph owns the memory */
  onyx__act_pool *pool; /* a host block of the run's pool (goes back there), else NULL */
  uint64_t bytes;       /* what was asked for (the pool's key) */
} buffer;

typedef struct slot {
  onyx_tensor view;
  bool set;
  buffer *buf;              /* NULL when borrowed */
  onyx__provider *provider; /* device owner of the data, NULL on the host */
  bool writable;            /* borrowed memory the caller lets kernels write */
} slot;

typedef struct run_state {
  onyx_session *s;
  slot *slots;
  size_t node; /* node being computed */
  const onyx_tensor *const *node_inputs;
  char kernel_err[512];
  char err[ONYX_ERR_CAP];
  onyx_status alloc_status; /* first failure inside alloc_output */
  onyx_plan *plan;          /* the admitted workspace plan, NULL when unplannable */
  void **step_blocks;       /* per provider: its STEP block, reused by every node */
  onyx__run_hooks *hooks;   /* measuring or recording a device graph, NULL: neither */
  onyx__act_pool pool;      /* host activations freed by this run, for its next nodes */
} run_state;

static void buffer_release(onyx_session *s, buffer *b) {
  if (b == NULL || --b->refs > 0) return;
  if (b->pool)
    onyx__act_pool_put(b->pool, b->ptr, b->bytes);
  else if (!b->in_arena)
    onyx__memory_free(s->runtime->memory, b->ptr);
  free(b);
}

/* True while this run is recorded into a graph. */
static bool recording(const run_state *r) { return r->hooks && r->hooks->record; }

/* Marks the recording as refused (the run fails and is run again plainly). */
static onyx_status refuse_recording(run_state *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static onyx_status refuse_recording(run_state *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->hooks->why, sizeof r->hooks->why, fmt, ap);
  va_end(ap);
  r->hooks->refused = true;
  snprintf(r->err, sizeof r->err, "%s", r->hooks->why);
  return ONYX_STATUS_UNSUPPORTED;
}

static void slot_clear(onyx_session *s, slot *sl) {
  buffer_release(s, sl->buf);
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

/* Allocates a fresh buffer of `bytes` on `provider`'s device for `requester`. */
static onyx_status new_buffer(run_state *r, onyx__provider *provider, uint32_t requester,
                              uint64_t bytes, const char *label, buffer **out) {
  buffer *b = calloc(1, sizeof *b);
  if (b == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  onyx__run_hooks *h = r->hooks;
  if (h && provider == h->provider) {
    uint64_t need = onyx__graph_round(bytes ? bytes : 1);
    if (h->record) {
      /* The graph's activations arena, sized by the run that measured this geometry. */
      if (need > h->act_cap - h->act_used) {
        free(b);
        return refuse_recording(r, "%s needs %llu bytes beyond the %llu measured for this geometry",
                                label, (unsigned long long)need,
                                (unsigned long long)(h->act_cap - h->act_used));
      }
      b->ptr = h->act_base + h->act_used;
      h->act_used += need;
      b->in_arena = true;
      b->provider = provider;
      b->refs = 1;
      *out = b;
      return ONYX_STATUS_OK;
    }
    h->act_bytes += need;
  }
  bool pooled = onyx__dev_is_host(provider) && requester == ONYX_REQUESTER_ACTIVATIONS;
  onyx_status st =
      pooled ? onyx__act_pool_alloc(&r->pool, bytes, label, &b->ptr, r->err, sizeof r->err)
             : onyx__memory_alloc(r->s->runtime->memory, provider, requester, bytes, 64, label,
                                  &b->ptr, r->err, sizeof r->err);
  if (st != ONYX_STATUS_OK) {
    free(b);
    return st;
  }
  b->provider = !onyx__dev_is_host(provider) ? provider : NULL;
  b->pool = pooled ? &r->pool : NULL;
  b->bytes = bytes;
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
  sl->provider = b->provider;
  sl->view = (onyx_tensor){.dtype = dtype,
                           .device = pn->provider->device,
                           .device_id = pn->provider->device_id,
                           .rank = rank,
                           .data = b->ptr};
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
  if (recording(r))
    return refuse_recording(r,
                            "node '%s' (%s): a %s would move a value between host and device "
                            "mid-run",
                            r->s->graph->nodes[r->node].name, r->s->graph->nodes[r->node].op_type,
                            label);
  if (to_device && from && from != target && !onyx__dev_siblings(from, target)) {
    slot host = {0};
    onyx_status st = transfer(r, src, NULL, requester, label, &host);
    if (st == ONYX_STATUS_OK) st = transfer(r, &host, target, requester, label, tmp);
    slot_clear(r->s, &host);
    return st;
  }
  onyx__provider *copier = to_device ? target : from;
  uint64_t bytes = 0;
  onyx_status st = checked_bytes(src->view.dtype, src->view.rank, src->view.dims, &bytes);
  if (st != ONYX_STATUS_OK) return st;
  buffer *b = NULL;
  st = new_buffer(r, to_device ? target : NULL, requester, bytes, label, &b);
  if (st != ONYX_STATUS_OK) return st;
  tmp->buf = b;
  tmp->set = true;
  tmp->provider = b->provider;
  tmp->view = src->view;
  tmp->view.data = b->ptr;
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
  size_t np = s->runtime->provider_count;
  onyx_status st = ONYX_STATUS_OK;
  onyx__run_hooks *h = r->hooks;
  for (size_t k = 0; k < np && st == ONYX_STATUS_OK; ++k) {
    if (p->step_peak[k] == 0) continue;
    if (h && &s->runtime->providers[k] == h->provider) {
      h->ws_bytes = p->step_peak[k];
      h->ws_align = p->step_align[k];
      if (h->record) { /* the graph's workspace arena stands in for the STEP block */
        if (p->step_peak[k] > h->ws_cap || h->ws_base == NULL ||
            ((uintptr_t)h->ws_base & (p->step_align[k] - 1)) != 0)
          st = refuse_recording(r,
                                "the step workspace (%llu bytes, alignment %u) does not fit "
                                "the %llu measured for this geometry",
                                (unsigned long long)p->step_peak[k], p->step_align[k],
                                (unsigned long long)h->ws_cap);
        else
          r->step_blocks[k] = h->ws_base;
        continue;
      }
    }
    const onyx__node_plan *peak = &p->nodes[p->step_peak_node[k]];
    st = onyx__ws_block_alloc(s, p->step_peak_node[k], &peak->req, &peak->layout,
                              ONYX_LIFETIME_STEP, p->step_peak[k], p->step_align[k], "step peak",
                              &r->step_blocks[k], r->err, sizeof r->err);
  }
  /* SESSION growth: new blocks first, swapped in only when all were granted. */
  size_t nn = s->graph->node_count;
  void **fresh = calloc(nn + 1, sizeof *fresh);
  if (fresh == NULL) st = ONYX_STATUS_OUT_OF_MEMORY;
  for (size_t i = 0; i < nn && st == ONYX_STATUS_OK; ++i) {
    const onyx__node_plan *np_ = &p->nodes[i];
    if (!np_->session_grows) continue;
    st = onyx__ws_block_alloc(s, i, &np_->req, &np_->layout, ONYX_LIFETIME_SESSION,
                              np_->session_block, np_->layout.align[ONYX_LIFETIME_SESSION],
                              "session", &fresh[i], r->err, sizeof r->err);
  }
  for (size_t i = 0; fresh && i < nn; ++i) {
    if (fresh[i] == NULL) continue;
    if (st == ONYX_STATUS_OK && h && s->nodes[i].provider == h->provider) h->session_grew = true;
    if (st == ONYX_STATUS_OK) {
      onyx__memory_free(s->runtime->memory, s->nodes[i].session_ws);
      s->nodes[i].session_ws = fresh[i];
      s->nodes[i].session_ws_bytes = p->nodes[i].session_block;
    } else {
      onyx__memory_free(s->runtime->memory, fresh[i]);
    }
  }
  free(fresh);
  if (st != ONYX_STATUS_OK) {
    for (size_t k = 0; k < np; ++k) {
      if (!(h && h->record && r->step_blocks[k] == h->ws_base))
        onyx__memory_free(s->runtime->memory, r->step_blocks[k]);
      r->step_blocks[k] = NULL;
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
    step_base = r->step_blocks[prov];
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

  const onyx_tensor **inputs = calloc(n->input_count + 1, sizeof *inputs);
  onyx_tensor *geometry = calloc(n->input_count + 1, sizeof *geometry);
  slot *moved = calloc(n->input_count + 1, sizeof *moved);
  onyx_status st = (inputs && geometry && moved) ? ONYX_STATUS_OK : ONYX_STATUS_OUT_OF_MEMORY;
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
  for (size_t k = 0; moved && k < n->input_count; ++k) slot_clear(s, &moved[k]);
  free(moved);
  free(geometry);
  free(inputs);
  if (st != ONYX_STATUS_OK) {
    /* A failed node's outputs are not kept: they may be half written. */
    for (size_t o = 0; o < n->output_count; ++o)
      if (n->outputs[o] >= 0) slot_clear(s, &r->slots[n->outputs[o]]);
    return st;
  }
  /* Values read for the last time here are dropped now, keeping the peak low. */
  for (size_t k = 0; k < n->input_count; ++k) {
    int32_t v = n->inputs[k];
    if (v >= 0 && s->last_use[v] == (int32_t)i) slot_clear(s, &r->slots[v]);
  }
  for (size_t o = 0; o < n->output_count; ++o) {
    int32_t v = n->outputs[o];
    if (v >= 0 && s->last_use[v] < 0) slot_clear(s, &r->slots[v]); /* nobody reads it */
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
  if (b == NULL || b->refs != 1 || b->in_arena || b->provider != NULL || b->ptr == NULL ||
      sl->view.data != b->ptr)
    return NULL;
  void *data = onyx__memory_detach(r->s->runtime->memory, b->ptr);
  if (data == NULL) return NULL;
  if (b->pool) onyx__act_pool_forget(b->pool, b->bytes);
  b->pool = NULL;
  b->ptr = NULL; /* the slot's view still shows it; releasing the buffer frees nothing */
  return data;
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
    slot_clear(s, &host);
  }
  if (st != ONYX_STATUS_OK) {
    for (size_t i = 0; i + 1 < done; ++i)
      if (!(out_borrowed && out_borrowed[i])) free(outs[i].data);
  }
  return st;
}

/* Where the graph's outputs lie after a replay: buffers of the arena, or writable
 * device inputs handed back. Anything else (a value the host computed) is not
 * produced by a replay. */
static onyx_status record_outputs(run_state *r) {
  const onyx__graph *g = r->s->graph;
  onyx__run_hooks *h = r->hooks;
  for (size_t o = 0; o < g->output_count; ++o) {
    const slot *sl = &r->slots[g->outputs[o]];
    h->out_from_input[o] = sl->writable && sl->buf == NULL && sl->view.device != ONYX_DEVICE_HOST;
    if (!h->out_from_input[o] && !(sl->buf && sl->buf->in_arena))
      return refuse_recording(r, "output '%s' is not computed on the device",
                              g->values[g->outputs[o]].name);
    h->out_views[o] = sl->view;
  }
  return ONYX_STATUS_OK;
}

/* Binds staged device copies in place of host inputs (recording). */
static void bind_staged(run_state *r, size_t input_count) {
  const onyx__graph *g = r->s->graph;
  for (size_t i = 0; i < input_count; ++i) {
    if (r->hooks->staged[i].data == NULL) continue;
    slot *sl = &r->slots[g->inputs[i]];
    sl->view = r->hooks->staged[i];
    sl->provider = r->hooks->provider;
    sl->writable = false;
  }
}

onyx_status onyx__execute(onyx_session *s, const onyx_run_options *options,
                          const onyx_tensor *inputs, size_t input_count, onyx_tensor *out_outputs,
                          onyx__run_hooks *hooks, onyx_error **out_error) {
  const onyx__graph *g = s->graph;
  run_state r;
  memset(&r, 0, sizeof r);
  r.s = s;
  r.hooks = hooks;
  onyx__act_pool_init(&r.pool, s->runtime->memory);
  r.slots = calloc(g->value_count ? g->value_count : 1, sizeof *r.slots);
  r.step_blocks = calloc(s->runtime->provider_count, sizeof *r.step_blocks);
  if (r.slots == NULL || r.step_blocks == NULL) {
    free(r.slots);
    free(r.step_blocks);
    return onyx__error_set(out_error, ONYX_STATUS_OUT_OF_MEMORY, NULL);
  }
  const bool record = hooks && hooks->record;
  const onyx_graph_table *gt = record ? onyx__dev_graphs(hooks->provider) : NULL;
  bool capture_open = false;
  /* Nothing of this run may land in another thread's capture (stream_lock.c). */
  onyx__stream_enter_all(s->runtime);

  onyx_status st = bind_inputs(&r, inputs, input_count, onyx__run_writable(options));
  char msg[ONYX_ERR_CAP + 256] = "";
  if (st != ONYX_STATUS_OK) snprintf(msg, sizeof msg, "%s", r.err);
  if (st == ONYX_STATUS_OK && record) bind_staged(&r, input_count);
  /* A recording queues work that does not run: there is nothing to time. */
  onyx__profile *prof = record ? NULL : s->profile;
  double t_plan = prof ? onyx__now_ms() : 0;
  if (st == ONYX_STATUS_OK) {
    /* Plan and admit before the first kernel. A graph whose kernels cannot say
     * their output shapes runs unplanned, granting workspace node by node. */
    st = onyx__plan_build(s, inputs, input_count, &r.plan, r.err, sizeof r.err);
    if (st == ONYX_STATUS_UNSUPPORTED && record) {
      st = refuse_recording(&r, "the run cannot be planned: %s", r.err);
      snprintf(msg, sizeof msg, "%s", r.err);
    } else if (st == ONYX_STATUS_UNSUPPORTED) {
      onyx__log(ONYX_LOG_DEBUG, "running unplanned: %s", r.err);
      st = ONYX_STATUS_OK;
    } else if (st == ONYX_STATUS_OK) {
      st = admit_plan(&r);
      if (st != ONYX_STATUS_OK)
        snprintf(msg, sizeof msg, "admission refused before any kernel ran: %s", r.err);
    } else {
      snprintf(msg, sizeof msg, "%s", r.err);
    }
  }
  if (prof && st == ONYX_STATUS_OK) onyx__profile_plan(prof, onyx__now_ms() - t_plan);
  if (st == ONYX_STATUS_OK && record) {
    /* From here until the end, work queued on the device is recorded, not run. */
    st = gt->begin(hooks->provider->state);
    capture_open = st == ONYX_STATUS_OK;
    if (st != ONYX_STATUS_OK) {
      st = refuse_recording(&r, "provider '%s' could not start a capture (%s)",
                            hooks->provider->name, onyx_status_str(st));
      snprintf(msg, sizeof msg, "%s", r.err);
    }
  }
  for (size_t i = 0; st == ONYX_STATUS_OK && i < g->node_count; ++i) {
    if (onyx__run_cancelled(options, i)) {
      snprintf(msg, sizeof msg, "run cancelled before node #%zu", i);
      st = ONYX_STATUS_CANCELLED;
      break;
    }
    double t_node = prof ? onyx__now_ms() : 0;
    st = run_node(&r, i);
    if (prof && st == ONYX_STATUS_OK) {
      /* Wait for a device node so that its time is its own. */
      st = onyx__stream_sync(s->nodes[i].provider);
      onyx__profile_node(prof, i, onyx__now_ms() - t_node);
      if (st != ONYX_STATUS_OK)
        snprintf(r.err, sizeof r.err, "the device failed: %s", onyx_status_str(st));
    }
    if (st != ONYX_STATUS_OK) {
      const onyx__node *n = &g->nodes[i];
      const onyx__provider *p = s->nodes[i].provider;
      snprintf(msg, sizeof msg, "node '%s' (#%zu, %s%s%s on %s%s%s): %s", n->name, i,
               n->domain[0] ? n->domain : "", n->domain[0] ? "::" : "", n->op_type, p->name,
               onyx__dev_is_host(p) ? "" : ", device ", onyx__dev_is_host(p) ? "" : p->tier, r.err);
    }
  }
  if (st == ONYX_STATUS_OK && record) st = record_outputs(&r);
  if (capture_open) {
    onyx_status end = gt->end(hooks->provider->state, st == ONYX_STATUS_OK, &hooks->graph);
    if (st == ONYX_STATUS_OK && end != ONYX_STATUS_OK)
      st = refuse_recording(&r,
                            "provider '%s' could not complete the capture (%s): a kernel "
                            "did something a graph cannot record",
                            hooks->provider->name, onyx_status_str(end));
    if (st != ONYX_STATUS_OK) hooks->graph = NULL;
  }
  if (st != ONYX_STATUS_OK && hooks && hooks->refused) snprintf(msg, sizeof msg, "%s", hooks->why);
  if (st == ONYX_STATUS_OK && !record) {
    st = collect_outputs(&r, out_outputs, onyx__run_borrowed(options));
    if (st != ONYX_STATUS_OK) snprintf(msg, sizeof msg, "collecting outputs: %s", r.err);
  }
  for (size_t v = 0; v < g->value_count; ++v) slot_clear(s, &r.slots[v]);
  onyx__act_pool_drain(&r.pool);
  free(r.slots);
  /* STEP workspace ends with the run, whatever its outcome (a graph keeps its own). */
  for (size_t k = 0; k < s->runtime->provider_count; ++k)
    if (!(record && r.step_blocks[k] == hooks->ws_base))
      onyx__memory_free(s->runtime->memory, r.step_blocks[k]);
  free(r.step_blocks);
  onyx_plan_destroy(r.plan);
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
