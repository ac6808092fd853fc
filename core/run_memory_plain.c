/*
 * The plain run's memory (run_memory_impl.h): every block governed, host
 * activations reused within the run through its pool. With hooks, a first run of a
 * device graph's geometry also measures the device bytes it allocates and its STEP
 * workspace, which size the arenas of the recording that follows (graphs.c).
 */
#include <string.h>

#include "error_impl.h"
#include "memory_impl.h"
#include "run_memory_impl.h"

static onyx_status plain_alloc(onyx__run_memory *m, onyx__provider *provider, uint32_t requester,
                               uint64_t bytes, const char *label, onyx__run_block *out, char *err,
                               size_t err_cap) {
  onyx__run_hooks *h = m->hooks;
  if (h && provider == h->provider) h->act_bytes += onyx__graph_round(bytes ? bytes : 1);
  bool host = onyx__dev_is_host(provider);
  bool pooled = host && requester == ONYX_REQUESTER_ACTIVATIONS;
  void *ptr = NULL;
  onyx_status st = pooled ? onyx__act_pool_alloc(&m->pool, bytes, label, &ptr, err, err_cap)
                          : onyx__memory_alloc(m->session->runtime->memory, provider, requester,
                                               bytes, 64, label, &ptr, err, err_cap);
  if (st != ONYX_STATUS_OK) return st;
  *out = (onyx__run_block){.ptr = ptr,
                           .bytes = bytes,
                           .provider = host ? NULL : provider,
                           .kind = pooled ? ONYX__BLOCK_POOLED : ONYX__BLOCK_BOOKED};
  return ONYX_STATUS_OK;
}

static void plain_release(onyx__run_memory *m, onyx__run_block *b) {
  if (b->kind == ONYX__BLOCK_POOLED)
    onyx__act_pool_put(&m->pool, b->ptr, b->bytes);
  else if (b->kind == ONYX__BLOCK_BOOKED)
    onyx__memory_free(m->session->runtime->memory, b->ptr);
  b->ptr = NULL;
}

static void *plain_hand_over(onyx__run_memory *m, onyx__run_block *b) {
  if (b->kind == ONYX__BLOCK_ARENA || b->provider != NULL || b->ptr == NULL) return NULL;
  void *data = onyx__memory_detach(m->session->runtime->memory, b->ptr);
  if (data == NULL) return NULL;
  if (b->kind == ONYX__BLOCK_POOLED) onyx__act_pool_forget(&m->pool, b->bytes);
  b->kind = ONYX__BLOCK_BOOKED;
  b->ptr = NULL; /* the value's view still shows it; releasing the block frees nothing */
  return data;
}

static onyx_status plain_transfer(onyx__run_memory *m, const onyx__node *node, const char *what,
                                  char *err, size_t err_cap) {
  (void)m, (void)node, (void)what, (void)err, (void)err_cap;
  return ONYX_STATUS_OK;
}

static onyx_status plain_unplanned(onyx__run_memory *m, const char *why, char *err,
                                   size_t err_cap) {
  (void)m, (void)err, (void)err_cap;
  onyx__log(ONYX_LOG_DEBUG, "running unplanned: %s", why);
  return ONYX_STATUS_OK;
}

static onyx_status plain_admit_step(onyx__run_memory *m, const onyx_plan *p, size_t k,
                                    void **out_block, char *err, size_t err_cap) {
  onyx_session *s = m->session;
  onyx__run_hooks *h = m->hooks;
  if (h && &s->runtime->providers[k] == h->provider) {
    h->ws_bytes = p->step_peak[k];
    h->ws_align = p->step_align[k];
  }
  const onyx__node_plan *peak = &p->nodes[p->step_peak_node[k]];
  return onyx__ws_block_alloc(s, p->step_peak_node[k], &peak->req, &peak->layout,
                              ONYX_LIFETIME_STEP, p->step_peak[k], p->step_align[k], "step peak",
                              out_block, err, err_cap);
}

static void plain_release_step(onyx__run_memory *m, void *block) {
  onyx__memory_free(m->session->runtime->memory, block);
}

static void plain_session_grew(onyx__run_memory *m, const onyx__provider *p) {
  if (m->hooks && p == m->hooks->provider) m->hooks->session_grew = true;
}

static void plain_bind_input(onyx__run_memory *m, size_t index, onyx_tensor *view,
                             onyx__provider **owner, bool *writable) {
  (void)m, (void)index, (void)view, (void)owner, (void)writable;
}

static onyx_status plain_begin(onyx__run_memory *m, char *err, size_t err_cap) {
  (void)m, (void)err, (void)err_cap;
  return ONYX_STATUS_OK;
}

static onyx_status plain_finish(onyx__run_memory *m, onyx_status st,
                                const onyx__run_output *outputs, size_t count, char *msg,
                                size_t msg_cap) {
  (void)m, (void)outputs, (void)count, (void)msg, (void)msg_cap;
  return st;
}

const onyx__run_memory_ops onyx__run_memory_plain_ops = {
    .alloc = plain_alloc,
    .release = plain_release,
    .hand_over = plain_hand_over,
    .transfer = plain_transfer,
    .unplanned = plain_unplanned,
    .admit_step = plain_admit_step,
    .release_step = plain_release_step,
    .session_grew = plain_session_grew,
    .bind_input = plain_bind_input,
    .begin = plain_begin,
    .finish = plain_finish,
};

void onyx__run_memory_plain(onyx__run_memory *m, onyx_session *s, onyx__run_hooks *hooks) {
  memset(m, 0, sizeof *m);
  m->ops = &onyx__run_memory_plain_ops;
  m->session = s;
  m->hooks = hooks;
  m->timed = true;
  onyx__act_pool_init(&m->pool, s->runtime->memory);
}

void onyx__run_memory_done(onyx__run_memory *m) { onyx__act_pool_drain(&m->pool); }
