/*
 * The recording of a device graph (run_memory_impl.h, docs/graphs.md). Memory on
 * the recorded device comes from the graph's arenas, which the run of the same
 * geometry before measured (graphs.c grants them): a replay finds every buffer where
 * the recording left it. Host memory (host nodes' values) is the plain run's.
 *
 * What a graph cannot hold is refused, not worked around: a copy between host and
 * device mid-run (it would be baked in with this run's values), more device memory
 * than was measured, a run that cannot be planned, an output the device does not
 * compute. The refusal is kept in hooks->why; graphs.c then runs the geometry node
 * by node.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "run_memory_impl.h"

/* Marks the recording as refused; the reason is the run's message too. */
static onyx_status refuse(onyx__run_memory *m, char *err, size_t err_cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static onyx_status refuse(onyx__run_memory *m, char *err, size_t err_cap, const char *fmt, ...) {
  onyx__run_hooks *h = m->hooks;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(h->why, sizeof h->why, fmt, ap);
  va_end(ap);
  h->refused = true;
  if (err && err_cap) snprintf(err, err_cap, "%s", h->why);
  return ONYX_STATUS_UNSUPPORTED;
}

static onyx_status record_alloc(onyx__run_memory *m, onyx__provider *provider, uint32_t requester,
                                uint64_t bytes, const char *label, onyx__run_block *out, char *err,
                                size_t err_cap) {
  onyx__run_hooks *h = m->hooks;
  if (provider != h->provider)
    return onyx__run_memory_plain_ops.alloc(m, provider, requester, bytes, label, out, err,
                                            err_cap);
  uint64_t need = onyx__graph_round(bytes ? bytes : 1);
  if (need > h->act_cap - h->act_used)
    return refuse(m, err, err_cap, "%s needs %llu bytes beyond the %llu measured for this geometry",
                  label, (unsigned long long)need, (unsigned long long)(h->act_cap - h->act_used));
  *out = (onyx__run_block){
      .ptr = h->act_base + h->act_used, .provider = provider, .kind = ONYX__BLOCK_ARENA};
  h->act_used += need;
  return ONYX_STATUS_OK;
}

static void record_release(onyx__run_memory *m, onyx__run_block *b) {
  if (b->kind != ONYX__BLOCK_ARENA) onyx__run_memory_plain_ops.release(m, b);
  b->ptr = NULL;
}

static void *record_hand_over(onyx__run_memory *m, onyx__run_block *b) {
  return b->kind == ONYX__BLOCK_ARENA ? NULL : onyx__run_memory_plain_ops.hand_over(m, b);
}

static onyx_status record_transfer(onyx__run_memory *m, const onyx__node *n, const char *what,
                                   char *err, size_t err_cap) {
  return refuse(m, err, err_cap,
                "node '%s' (%s): a %s would move a value between host and device mid-run", n->name,
                n->op_type, what);
}

static onyx_status record_unplanned(onyx__run_memory *m, const char *why, char *err,
                                    size_t err_cap) {
  return refuse(m, err, err_cap, "the run cannot be planned: %s", why);
}

/* The graph's workspace arena stands in for the recorded device's STEP block. */
static onyx_status record_admit_step(onyx__run_memory *m, const onyx_plan *p, size_t k,
                                     void **out_block, char *err, size_t err_cap) {
  onyx__run_hooks *h = m->hooks;
  if (&m->session->runtime->providers[k] != h->provider)
    return onyx__run_memory_plain_ops.admit_step(m, p, k, out_block, err, err_cap);
  h->ws_bytes = p->step_peak[k];
  h->ws_align = p->step_align[k];
  if (p->step_peak[k] > h->ws_cap || h->ws_base == NULL ||
      ((uintptr_t)h->ws_base & (p->step_align[k] - 1)) != 0)
    return refuse(m, err, err_cap,
                  "the step workspace (%llu bytes, alignment %u) does not fit the %llu measured "
                  "for this geometry",
                  (unsigned long long)p->step_peak[k], p->step_align[k],
                  (unsigned long long)h->ws_cap);
  *out_block = h->ws_base;
  return ONYX_STATUS_OK;
}

static void record_release_step(onyx__run_memory *m, void *block) {
  if (block != m->hooks->ws_base) onyx__run_memory_plain_ops.release_step(m, block);
}

static void record_session_grew(onyx__run_memory *m, const onyx__provider *p) {
  if (p == m->hooks->provider) m->hooks->session_grew = true;
}

/* A host input is read from its staged device copy, which a replay refills. */
static void record_bind_input(onyx__run_memory *m, size_t index, onyx_tensor *view,
                              onyx__provider **owner, bool *writable) {
  const onyx__run_hooks *h = m->hooks;
  if (h->staged[index].data == NULL) return;
  *view = h->staged[index];
  *owner = h->provider;
  *writable = false;
}

/* From here until finish, work queued on the device is recorded, not run. */
static onyx_status record_begin(onyx__run_memory *m, char *err, size_t err_cap) {
  onyx__provider *p = m->hooks->provider;
  onyx_status st = onyx__dev_graphs(p)->begin(p->state);
  m->capture_open = st == ONYX_STATUS_OK;
  if (st != ONYX_STATUS_OK)
    return refuse(m, err, err_cap, "provider '%s' could not start a capture (%s)", p->name,
                  onyx_status_str(st));
  return ONYX_STATUS_OK;
}

/* Where the graph's outputs lie after a replay: buffers of the arena, or writable
 * device inputs handed back. Anything else (a value the host computed) is not
 * produced by a replay. */
static onyx_status record_outputs(onyx__run_memory *m, const onyx__run_output *outs, size_t count) {
  onyx__run_hooks *h = m->hooks;
  const onyx__graph *g = m->session->graph;
  for (size_t o = 0; o < count; ++o) {
    h->out_from_input[o] = outs[o].callers && outs[o].view->device != ONYX_DEVICE_HOST;
    if (!h->out_from_input[o] && !(outs[o].block && outs[o].block->kind == ONYX__BLOCK_ARENA))
      return refuse(m, NULL, 0, "output '%s' is not computed on the device",
                    g->values[g->outputs[o]].name);
    h->out_views[o] = *outs[o].view;
  }
  return ONYX_STATUS_OK;
}

static onyx_status record_finish(onyx__run_memory *m, onyx_status st, const onyx__run_output *outs,
                                 size_t count, char *msg, size_t msg_cap) {
  onyx__run_hooks *h = m->hooks;
  if (st == ONYX_STATUS_OK) st = record_outputs(m, outs, count);
  if (m->capture_open) {
    onyx__provider *p = h->provider;
    onyx_status end = onyx__dev_graphs(p)->end(p->state, st == ONYX_STATUS_OK, &h->graph);
    m->capture_open = false;
    if (st == ONYX_STATUS_OK && end != ONYX_STATUS_OK)
      st = refuse(m, NULL, 0,
                  "provider '%s' could not complete the capture (%s): a kernel did something a "
                  "graph cannot record",
                  p->name, onyx_status_str(end));
    if (st != ONYX_STATUS_OK) h->graph = NULL;
  }
  if (st != ONYX_STATUS_OK && h->refused) snprintf(msg, msg_cap, "%s", h->why);
  return st;
}

static const onyx__run_memory_ops record_ops = {
    .alloc = record_alloc,
    .release = record_release,
    .hand_over = record_hand_over,
    .transfer = record_transfer,
    .unplanned = record_unplanned,
    .admit_step = record_admit_step,
    .release_step = record_release_step,
    .session_grew = record_session_grew,
    .bind_input = record_bind_input,
    .begin = record_begin,
    .finish = record_finish,
};

void onyx__run_memory_record(onyx__run_memory *m, onyx_session *s, onyx__run_hooks *hooks) {
  onyx__run_memory_plain(m, s, hooks);
  m->ops = &record_ops;
  m->timed = false; /* queued work that does not run: there is nothing to time */
}
