/*
 * Device graphs (docs/graphs.md): runs that ask for capture_graph are keyed by
 * their input geometry and device buffers. The first run of a key runs plainly and
 * measures its device allocations; the second is recorded into a graph whose
 * buffers come from arenas sized by that measurement (governed, held by the graph);
 * later runs copy their host inputs into the graph's staged copies, replay it and
 * read the outputs where the recording left them — no planning, no allocation, one
 * launch instead of one per kernel.
 *
 * A graph is dropped (an invalidation) when a run shows one of the device inputs it
 * baked in at another address or shape — a KV cache that grew by copy — or on
 * onyx_session_release_graphs. Growth in place keeps the address and the shape, so
 * the graph stays valid. A key that cannot be recorded (a host node reads data the
 * device computes, a kernel syncs) is remembered as refused and runs plainly.
 *
 * A graph's memory is a cache: the session registers as a governor holder of its
 * device tier, lowest priority, so a request that would otherwise be refused first
 * takes back the memory of the least recently used graphs.
 *
 * Threads: a session runs on one thread at a time, but the governor may ask for
 * memory back from any thread (another session's request), so the cache has a mutex;
 * reclaim only tries it and gives nothing back while the session is busy. Recording
 * holds the provider's stream exclusively (stream_lock.c).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checked_math.h"
#include "error_impl.h"
#include "graphs_impl.h"
#include "memory_impl.h"
#include "profile_impl.h"
#include "run_memory_impl.h"

/* Geometries a session keeps graphs for; the least recently used goes first. */
#define GRAPH_CACHE_MAX 4

typedef enum entry_state { ENTRY_MEASURED, ENTRY_RECORDED, ENTRY_REFUSED } entry_state;

typedef struct graph_entry {
  entry_state state;
  onyx_tensor *key;             /* [inputs]: geometry; data kept for device inputs only */
  bool *writable;               /* [inputs] */
  uint64_t act_bytes, ws_bytes; /* measured */
  uint32_t ws_align;
  void *act_block, *ws_block; /* governed arenas (recorded) */
  uint64_t held;              /* their bytes */
  onyx_tensor *staged;        /* [inputs] device copies of host inputs (data NULL: none) */
  void *graph;                /* the provider's instantiated graph */
  onyx_tensor *out_views;     /* [outputs] */
  bool *out_from_input;       /* [outputs] */
  uint64_t last_used;
} graph_entry;

typedef struct onyx__graph_cache {
  pthread_mutex_t lock;      /* the session's use of the cache vs reclaim from elsewhere */
  onyx__provider *provider;  /* the device provider that records, NULL: none */
  onyx_gov_holder_id holder; /* reclaims graphs' memory (id 0: not registered yet) */
  graph_entry *entries[GRAPH_CACHE_MAX];
  uint64_t clock;
  onyx_graph_stats stats;
  char refusal[256];
} onyx__graph_cache;

/* ------------------------------------------------------------ the provider */

static bool provider_records(const onyx__provider *p) {
  const onyx_graph_table *g = onyx__dev_graphs(p); /* the instance's own (v3: an extension) */
  return g && g->begin && g->end && g->launch && g->destroy && onyx__dev_has_sync(p);
}

/* The one device instance that runs this session's device nodes, if it records. A
 * session spread over two device instances runs node by node: one capture cannot
 * hold two streams. */
static onyx__provider *graph_provider(const onyx_session *s) {
  onyx__provider *found = NULL;
  for (size_t i = 0; i < s->graph->node_count; ++i) {
    onyx__provider *p = s->nodes[i].provider;
    if (onyx__dev_is_host(p) || p == found) continue;
    if (found != NULL) return NULL; /* two device providers: one stream cannot hold both */
    found = p;
  }
  return found && provider_records(found) ? found : NULL;
}

/* ------------------------------------------------------------ entries */

static void entry_free(onyx_session *s, onyx__graph_cache *c, graph_entry *e) {
  if (e == NULL) return;
  if (e->graph) onyx__dev_graphs(c->provider)->destroy(c->provider->state, e->graph);
  /* The arenas may still be read by a replay in flight: device_free is stream-ordered
   * (abi/onyx_provider.h), so they are reused only by work queued after it. */
  onyx__memory_free(s->runtime->memory, e->act_block);
  onyx__memory_free(s->runtime->memory, e->ws_block);
  c->stats.held_bytes -= e->held;
  free(e->key);
  free(e->writable);
  free(e->staged);
  free(e->out_views);
  free(e->out_from_input);
  free(e);
}

static void entry_drop(onyx_session *s, onyx__graph_cache *c, size_t i) {
  if (c->entries[i]->state == ENTRY_RECORDED) c->stats.invalidations++;
  entry_free(s, c, c->entries[i]);
  c->entries[i] = NULL;
}

/* The governor asks for memory back: recorded graphs go, least recently used first
 * (a dropped key is measured and recorded again when it comes back). */
static uint64_t reclaim(void *user, onyx_gov *gov, onyx_gov_tier tier, uint64_t wanted) {
  (void)gov;
  (void)tier;
  onyx_session *s = user;
  onyx__graph_cache *c = s->graphs;
  uint64_t freed = 0;
  if (pthread_mutex_trylock(&c->lock) != 0) return 0; /* busy (perhaps asking itself) */
  while (freed < wanted) {
    size_t pick = GRAPH_CACHE_MAX;
    for (size_t k = 0; k < GRAPH_CACHE_MAX; ++k) {
      const graph_entry *e = c->entries[k];
      if (e && e->state == ENTRY_RECORDED && e->held &&
          (pick == GRAPH_CACHE_MAX || e->last_used < c->entries[pick]->last_used))
        pick = k;
    }
    if (pick == GRAPH_CACHE_MAX) break;
    freed += c->entries[pick]->held;
    entry_free(s, c, c->entries[pick]);
    c->entries[pick] = NULL;
    c->stats.reclaims++;
  }
  pthread_mutex_unlock(&c->lock);
  return freed;
}

/* Offers a recorded graph's memory to the governor for reclaim. Failing that, the
 * graph simply keeps its memory until it is dropped. */
static void offer_for_reclaim(onyx_session *s, onyx__graph_cache *c, const graph_entry *e) {
  onyx__memory *mem = s->runtime->memory;
  if (c->holder.id == 0 &&
      onyx_gov_holder_register(
          onyx__memory_governor(mem), (onyx_gov_tier)onyx__memory_tier_of(mem, c->provider), 0,
          "device graphs (a cache: dropped first)", reclaim, s, &c->holder) != ONYX_STATUS_OK) {
    c->holder.id = 0;
    return;
  }
  if (e->act_block) (void)onyx__memory_adopt(mem, e->act_block, c->holder);
  if (e->ws_block) (void)onyx__memory_adopt(mem, e->ws_block, c->holder);
}

static bool same_geometry(const onyx_tensor *a, const onyx_tensor *b) {
  if (a->dtype != b->dtype || a->rank != b->rank || a->device != b->device) return false;
  for (uint32_t d = 0; d < a->rank && d < ONYX_MAX_RANK; ++d)
    if (a->dims[d] != b->dims[d]) return false;
  return true;
}

static bool entry_matches(const graph_entry *e, const onyx_tensor *in, const bool *writable,
                          size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (!same_geometry(&e->key[i], &in[i]) || e->writable[i] != (writable && writable[i]))
      return false;
    if (in[i].device != ONYX_DEVICE_HOST && e->key[i].data != in[i].data) return false;
  }
  return true;
}

/* Drops graphs whose device inputs this run shows moved or reshaped: the buffers
 * they baked in may be gone. */
static void drop_stale(onyx_session *s, onyx__graph_cache *c, const onyx_tensor *in, size_t n) {
  for (size_t k = 0; k < GRAPH_CACHE_MAX; ++k) {
    graph_entry *e = c->entries[k];
    for (size_t i = 0; e && i < n; ++i) {
      if (in[i].device == ONYX_DEVICE_HOST || e->key[i].device == ONYX_DEVICE_HOST) continue;
      if (e->key[i].data != in[i].data || !same_geometry(&e->key[i], &in[i])) {
        entry_drop(s, c, k);
        break;
      }
    }
  }
}

static graph_entry *entry_find(onyx__graph_cache *c, const onyx_tensor *in, const bool *writable,
                               size_t n) {
  for (size_t k = 0; k < GRAPH_CACHE_MAX; ++k)
    if (c->entries[k] && entry_matches(c->entries[k], in, writable, n)) return c->entries[k];
  return NULL;
}

static onyx_status entry_add(onyx_session *s, onyx__graph_cache *c, const onyx_tensor *in,
                             const bool *writable, size_t n, const onyx__run_hooks *measured) {
  size_t slot = 0;
  for (size_t k = 0; k < GRAPH_CACHE_MAX; ++k) {
    if (c->entries[k] == NULL) {
      slot = k;
      break;
    }
    if (c->entries[k]->last_used < c->entries[slot]->last_used) slot = k;
  }
  if (c->entries[slot]) entry_drop(s, c, slot);
  size_t nout = s->graph->output_count;
  graph_entry *e = calloc(1, sizeof *e);
  if (e == NULL || (e->key = calloc(n + 1, sizeof *e->key)) == NULL ||
      (e->writable = calloc(n + 1, sizeof *e->writable)) == NULL ||
      (e->staged = calloc(n + 1, sizeof *e->staged)) == NULL ||
      (e->out_views = calloc(nout + 1, sizeof *e->out_views)) == NULL ||
      (e->out_from_input = calloc(nout + 1, sizeof *e->out_from_input)) == NULL) {
    entry_free(s, c, e);
    return ONYX_STATUS_OUT_OF_MEMORY;
  }
  for (size_t i = 0; i < n; ++i) {
    e->key[i] = in[i];
    if (in[i].device == ONYX_DEVICE_HOST) e->key[i].data = NULL;
    e->writable[i] = writable && writable[i];
  }
  e->act_bytes = measured->act_bytes;
  e->ws_bytes = measured->ws_bytes;
  e->ws_align = measured->ws_align;
  e->last_used = ++c->clock;
  c->entries[slot] = e;
  return ONYX_STATUS_OK;
}

static void refuse(onyx__graph_cache *c, graph_entry *e, const char *why) {
  e->state = ENTRY_REFUSED;
  c->stats.refusals++;
  snprintf(c->refusal, sizeof c->refusal, "%s", why);
  onyx__log(ONYX_LOG_INFO, "device graph not recorded; this geometry runs node by node: %s", why);
}

/* ------------------------------------------------------------ replay */

static uint64_t tensor_bytes(const onyx_tensor *t) {
  uint64_t bytes = 0;
  return onyx__ckd_tensor_bytes(&bytes, t) ? 0 : bytes;
}

/* Copies the run's host inputs into the graph's staged device copies. */
static onyx_status stage_inputs(onyx__provider *p, graph_entry *e, const onyx_tensor *in, size_t n,
                                char *err, size_t cap) {
  for (size_t i = 0; i < n; ++i) {
    if (e->staged[i].data == NULL) continue;
    onyx_status st = onyx__dev_copy(p, &e->staged[i], &in[i], NULL, 0);
    if (st != ONYX_STATUS_OK) {
      onyx__errf(err, cap, "copying input %zu (%llu bytes) to the device failed: %s", i,
                 (unsigned long long)tensor_bytes(&in[i]), onyx_status_str(st));
      return st;
    }
  }
  return ONYX_STATUS_OK;
}

/* Hands back the outputs of a replay: writable device inputs as they are (when the
 * caller takes borrowed outputs), everything else copied to fresh host memory. */
static onyx_status collect(onyx_session *s, onyx__provider *p, const graph_entry *e,
                           const onyx_run_options *o, onyx_tensor *outs, char *err, size_t cap) {
  size_t nout = s->graph->output_count;
  bool *borrowed = onyx__run_borrowed(o);
  onyx_status st = ONYX_STATUS_OK;
  size_t done = 0;
  for (; done < nout && st == ONYX_STATUS_OK; ++done) {
    const onyx_tensor *v = &e->out_views[done];
    if (borrowed) borrowed[done] = false;
    if (borrowed && e->out_from_input[done]) {
      outs[done] = *v;
      borrowed[done] = true;
      continue;
    }
    uint64_t bytes = tensor_bytes(v);
    onyx_tensor host = *v;
    host.device = ONYX_DEVICE_HOST;
    host.device_id = 0;
    host.data = malloc(bytes ? (size_t)bytes : 1);
    if (host.data == NULL) {
      st = ONYX_STATUS_OUT_OF_MEMORY;
      break;
    }
    if (bytes) st = onyx__dev_copy(p, &host, v, NULL, 0);
    if (st != ONYX_STATUS_OK) {
      free(host.data);
      onyx__errf(err, cap, "copying output %zu to the host failed: %s", done, onyx_status_str(st));
      break;
    }
    outs[done] = host;
  }
  if (st == ONYX_STATUS_OK) {
    st = onyx__dev_sync_raw(p);
    if (st != ONYX_STATUS_OK)
      onyx__errf(err, cap, "waiting for the replay failed: %s", onyx_status_str(st));
  }
  if (st != ONYX_STATUS_OK) {
    for (size_t i = 0; i < done && i < nout; ++i)
      if (!(borrowed && borrowed[i])) free(outs[i].data);
  }
  return st;
}

static onyx_status replay(onyx_session *s, onyx__graph_cache *c, graph_entry *e,
                          const onyx_run_options *o, const onyx_tensor *in, size_t n,
                          onyx_tensor *outs, onyx_error **out_error) {
  onyx__provider *p = c->provider;
  char err[ONYX_ERR_CAP] = "";
  if (onyx__run_cancelled(o, 0))
    return onyx__error_set(out_error, ONYX_STATUS_CANCELLED, "run cancelled before node #0");
  double t0 = s->profile ? onyx__now_ms() : 0;
  onyx__stream_enter(p);
  onyx_status st = stage_inputs(p, e, in, n, err, sizeof err);
  if (st == ONYX_STATUS_OK) {
    st = onyx__dev_graphs(p)->launch(p->state, e->graph);
    if (st != ONYX_STATUS_OK)
      onyx__errf(err, sizeof err, "provider '%s' failed to launch the device graph: %s", p->name,
                 onyx_status_str(st));
  }
  if (st == ONYX_STATUS_OK) st = collect(s, p, e, o, outs, err, sizeof err);
  onyx__stream_leave(p);
  if (st != ONYX_STATUS_OK) return onyx__error_set(out_error, st, err);
  e->last_used = ++c->clock;
  c->stats.replays++;
  if (s->profile) onyx__profile_replay(s->profile, onyx__now_ms() - t0);
  return ONYX_STATUS_OK;
}

/* ------------------------------------------------------------ recording */

/* Grants the graph's arenas and lays the staged inputs at the front of the
 * activations arena. */
static onyx_status arenas(onyx_session *s, onyx__provider *p, graph_entry *e, const onyx_tensor *in,
                          size_t n, uint64_t *out_staged, char *err, size_t cap) {
  uint64_t staged = 0;
  for (size_t i = 0; i < n; ++i)
    if (in[i].device == ONYX_DEVICE_HOST) staged += onyx__graph_round(tensor_bytes(&in[i]));
  uint64_t act = staged + e->act_bytes;
  uint32_t ws_align = e->ws_align > ONYX__GRAPH_ALIGN ? e->ws_align : ONYX__GRAPH_ALIGN;
  onyx_status st = ONYX_STATUS_OK;
  if (act > 0)
    st = onyx__memory_alloc(s->runtime->memory, p, ONYX_REQUESTER_ACTIVATIONS, act,
                            ONYX__GRAPH_ALIGN, "device graph: activations and staged inputs",
                            &e->act_block, err, cap);
  if (st == ONYX_STATUS_OK && e->ws_bytes > 0)
    st = onyx__memory_alloc(s->runtime->memory, p, ONYX_REQUESTER_WORKSPACE_SESSION, e->ws_bytes,
                            ws_align, "device graph: step workspace", &e->ws_block, err, cap);
  if (st != ONYX_STATUS_OK) return st;
  uint64_t at = 0;
  for (size_t i = 0; i < n; ++i) {
    uint64_t b = tensor_bytes(&in[i]);
    if (in[i].device != ONYX_DEVICE_HOST || b == 0) continue;
    e->staged[i] = in[i];
    e->staged[i].device = p->device;
    e->staged[i].device_id = p->device_id;
    e->staged[i].data = (char *)e->act_block + at;
    at += onyx__graph_round(b);
  }
  /* What the governor booked: the workspace block is rounded up to its alignment. */
  e->held = act + (e->ws_bytes + ws_align - 1) / ws_align * ws_align;
  s->graphs->stats.held_bytes += e->held;
  *out_staged = staged;
  return ONYX_STATUS_OK;
}

static void arenas_free(onyx_session *s, graph_entry *e) {
  onyx__memory_free(s->runtime->memory, e->act_block);
  onyx__memory_free(s->runtime->memory, e->ws_block);
  e->act_block = e->ws_block = NULL;
  s->graphs->stats.held_bytes -= e->held;
  e->held = 0;
  memset(e->staged, 0, s->graph->input_count * sizeof *e->staged);
}

/* Records the run into a graph. OK: recorded (not yet replayed). Otherwise the
 * entry is refused with the reason, nothing was executed on the device and the
 * caller runs plainly — unless the run was cancelled (CANCELLED comes back). */
static onyx_status record(onyx_session *s, onyx__graph_cache *c, graph_entry *e,
                          const onyx_run_options *o, const onyx_tensor *in, size_t n) {
  onyx__provider *p = c->provider;
  char err[ONYX_ERR_CAP] = "";
  const bool *writable = onyx__run_writable(o);
  for (size_t i = 0; i < n; ++i) {
    if (writable && writable[i] && in[i].device == ONYX_DEVICE_HOST) {
      snprintf(err, sizeof err,
               "input %zu is writable but lies in host memory (a replay writes its staged copy)",
               i);
      refuse(c, e, err);
      return ONYX_STATUS_UNSUPPORTED;
    }
  }
  uint64_t staged = 0;
  onyx__record_enter(p); /* the stream is this recording's alone until the end */
  onyx_status st = arenas(s, p, e, in, n, &staged, err, sizeof err);
  if (st == ONYX_STATUS_OK) st = stage_inputs(p, e, in, n, err, sizeof err);
  if (st != ONYX_STATUS_OK) {
    char why[ONYX_ERR_CAP + 64];
    snprintf(why, sizeof why, "its memory was not granted: %s", err);
    arenas_free(s, e);
    onyx__record_leave(p);
    refuse(c, e, why);
    return st;
  }
  onyx__run_hooks h = {.provider = p,
                       .record = true,
                       .act_base = (char *)e->act_block + staged,
                       .act_cap = e->act_bytes,
                       .ws_base = e->ws_block,
                       .ws_cap = e->ws_bytes,
                       .staged = e->staged,
                       .out_views = e->out_views,
                       .out_from_input = e->out_from_input};
  onyx_error *run_err = NULL;
  onyx__run_memory mem;
  onyx__run_memory_record(&mem, s, &h);
  st = onyx__execute(s, o, in, n, NULL, &mem, &run_err);
  onyx__record_leave(p);
  if (st == ONYX_STATUS_OK) {
    e->graph = h.graph;
    e->state = ENTRY_RECORDED;
    c->stats.captures++;
    offer_for_reclaim(s, c, e);
    /* A SESSION block that moved leaves the other graphs pointing at freed memory. */
    for (size_t k = 0; h.session_grew && k < GRAPH_CACHE_MAX; ++k)
      if (c->entries[k] && c->entries[k] != e && c->entries[k]->state == ENTRY_RECORDED)
        entry_drop(s, c, k);
  } else if (st != ONYX_STATUS_CANCELLED) {
    arenas_free(s, e);
    refuse(c, e, h.refused ? h.why : onyx_error_message(run_err));
  } else {
    arenas_free(s, e);
  }
  onyx_error_free(run_err);
  return st;
}

/* ------------------------------------------------------------ runs */

static onyx_status graphs_run_locked(onyx_session *s, onyx__graph_cache *c,
                                     const onyx_run_options *o, const onyx_tensor *in, size_t n,
                                     onyx_tensor *outs, onyx_error **out_error);

onyx_status onyx__graphs_run(onyx_session *s, const onyx_run_options *o, const onyx_tensor *in,
                             size_t n, onyx_tensor *outs, onyx_error **out_error) {
  if (s->graphs == NULL) {
    onyx__graph_cache *c = calloc(1, sizeof *c);
    if (c == NULL || pthread_mutex_init(&c->lock, NULL) != 0) {
      free(c);
      return onyx__error_set(out_error, ONYX_STATUS_OUT_OF_MEMORY, NULL);
    }
    c->provider = graph_provider(s);
    c->stats.available = c->provider != NULL;
    s->graphs = c;
  }
  onyx__graph_cache *c = s->graphs;
  pthread_mutex_lock(&c->lock);
  onyx_status st = graphs_run_locked(s, c, o, in, n, outs, out_error);
  pthread_mutex_unlock(&c->lock);
  return st;
}

static onyx_status graphs_run_locked(onyx_session *s, onyx__graph_cache *c,
                                     const onyx_run_options *o, const onyx_tensor *in, size_t n,
                                     onyx_tensor *outs, onyx_error **out_error) {
  if (c->provider == NULL || n != s->graph->input_count)
    return onyx__execute(s, o, in, n, outs, NULL, out_error);
  char err[ONYX_ERR_CAP];
  if (onyx__check_inputs(s, in, n, err, sizeof err) != ONYX_STATUS_OK)
    return onyx__error_set(out_error, ONYX_STATUS_INVALID_ARGUMENT, err);
  const bool *writable = onyx__run_writable(o);
  drop_stale(s, c, in, n);
  graph_entry *e = entry_find(c, in, writable, n);
  if (e && e->state == ENTRY_RECORDED) return replay(s, c, e, o, in, n, outs, out_error);
  if (e && e->state == ENTRY_MEASURED) {
    onyx_status st = record(s, c, e, o, in, n);
    if (st == ONYX_STATUS_OK) return replay(s, c, e, o, in, n, outs, out_error);
    if (st == ONYX_STATUS_CANCELLED)
      return onyx__error_set(out_error, st, "run cancelled while recording");
  }
  if (e) return onyx__execute(s, o, in, n, outs, NULL, out_error); /* refused */
  /* First sight of this key: a plain run that measures what a recording needs. */
  onyx__run_hooks h = {.provider = c->provider};
  onyx__run_memory mem;
  onyx__run_memory_plain(&mem, s, &h);
  onyx_status st = onyx__execute(s, o, in, n, outs, &mem, out_error);
  if (st == ONYX_STATUS_OK && entry_add(s, c, in, writable, n, &h) != ONYX_STATUS_OK)
    onyx__log(ONYX_LOG_WARN, "device graph: out of memory remembering a geometry");
  return st;
}

void onyx__graphs_free(onyx_session *s) {
  onyx__graph_cache *c = s->graphs;
  if (c == NULL) return;
  /* Unregistering waits for a reclaim running on another thread; none starts after. */
  if (c->holder.id)
    (void)onyx_gov_holder_unregister(onyx__memory_governor(s->runtime->memory), c->holder);
  for (size_t k = 0; k < GRAPH_CACHE_MAX; ++k) entry_free(s, c, c->entries[k]);
  pthread_mutex_destroy(&c->lock);
  free(c);
  s->graphs = NULL;
}

void onyx_session_release_graphs(onyx_session *s) {
  if (s == NULL || s->graphs == NULL) return;
  pthread_mutex_lock(&s->graphs->lock);
  for (size_t k = 0; k < GRAPH_CACHE_MAX; ++k)
    if (s->graphs->entries[k]) entry_drop(s, s->graphs, k);
  pthread_mutex_unlock(&s->graphs->lock);
}

void onyx_session_graph_stats(const onyx_session *s, onyx_graph_stats *out) {
  if (out == NULL) return;
  uint32_t size = out->struct_size ? out->struct_size : sizeof *out;
  onyx_graph_stats st;
  memset(&st, 0, sizeof st);
  if (s && s->graphs) {
    pthread_mutex_lock(&s->graphs->lock);
    st = s->graphs->stats;
    pthread_mutex_unlock(&s->graphs->lock);
  }
  if (s && s->graphs == NULL) st.available = graph_provider(s) != NULL;
  st.struct_size = size < sizeof st ? size : (uint32_t)sizeof st;
  st.last_refusal = s && s->graphs ? s->graphs->refusal : "";
  memcpy(out, &st, st.struct_size);
}
