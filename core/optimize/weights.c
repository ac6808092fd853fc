/*
 * The weights ledger: every byte of initializer data the session holds is booked
 * with the governor as weights, and every byte freed is unbooked at once.
 *
 * The loader's initializers share one grant, as they are booked in one step; a
 * released one shrinks it. The governor has no shrink, so the grant is released and
 * the smaller total granted again — releasing first, so the booking never counts
 * more than is held. Initializers made at creation (folded results) get their own
 * grant, taken before their data is allocated, so the peak is on the books while it
 * happens.
 */
#include <stdio.h>
#include <stdlib.h>

#include "checked_math.h"
#include "error_impl.h"
#include "memory_impl.h"
#include "onyx_governor.h"
#include "optimize.h"
#include "session_impl.h"

/* Initializers were sized with overflow checks when loaded or folded. */
uint64_t onyx__init_bytes(const onyx__value *v) {
  uint64_t bytes = 0;
  return onyx__ckd_tensor_bytes(&bytes, &v->init) ? 0 : bytes;
}

static onyx_gov *governor(onyx_session *s) { return onyx__memory_governor(s->runtime->memory); }

static uint32_t host_tier(onyx_session *s) {
  return onyx__memory_tier_of(s->runtime->memory, NULL);
}

/* Books `bytes` as weights; *out_id receives the grant (0 for 0 bytes). */
static onyx_status grant(onyx_session *s, uint64_t bytes, const char *label, uint64_t *out_id,
                         char *err, size_t cap) {
  *out_id = 0;
  if (bytes == 0) return ONYX_STATUS_OK;
  onyx_gov_grant_id id;
  onyx_gov_refusal refusal;
  onyx_status st = onyx_gov_grant(governor(s), host_tier(s), ONYX_REQUESTER_WEIGHTS, bytes, label,
                                  &id, &refusal);
  if (st == ONYX_STATUS_TIER_EXHAUSTED)
    onyx_gov_refusal_format(&refusal, err, cap);
  else if (st != ONYX_STATUS_OK)
    onyx__errf(err, cap, "booking %llu bytes of weights (%s) failed: %s", (unsigned long long)bytes,
               label, onyx_status_str(st));
  if (st == ONYX_STATUS_OK) *out_id = id.id;
  return st;
}

static void ungrant(onyx_session *s, uint64_t id) {
  if (id) onyx_gov_release(governor(s), (onyx_gov_grant_id){id});
}

static void loader_label(const onyx_session *s, char *label, size_t cap) {
  snprintf(label, cap, "initializers of %s", s->graph->name ? s->graph->name : "model");
}

onyx_status onyx__weights_book(onyx_session *s, char *err, size_t cap) {
  const onyx__graph *g = s->graph;
  uint64_t bytes = 0;
  for (size_t v = 0; v < g->value_count; ++v)
    if (g->values[v].is_initializer) bytes += onyx__init_bytes(&g->values[v]);
  char label[160];
  loader_label(s, label, sizeof label);
  onyx_status st = grant(s, bytes, label, &s->weights_grant, err, cap);
  if (st == ONYX_STATUS_OK) s->weights_bytes = bytes;
  return st;
}

/* Makes init_grants cover every value of the graph (passes may add values). */
static bool track_values(onyx_session *s) {
  size_t need = s->graph->value_count;
  if (need <= s->init_grant_cap) return true;
  uint64_t *grown = realloc(s->init_grants, need * sizeof *grown);
  if (grown == NULL) return false;
  for (size_t v = s->init_grant_cap; v < need; ++v) grown[v] = 0;
  s->init_grants = grown;
  s->init_grant_cap = need;
  return true;
}

onyx_status onyx__weights_book_value(onyx_session *s, size_t v, uint64_t bytes, const char *label,
                                     char *err, size_t cap) {
  if (!track_values(s)) return ONYX_STATUS_OUT_OF_MEMORY;
  uint64_t id = 0;
  onyx_status st = grant(s, bytes, label, &id, err, cap);
  if (st != ONYX_STATUS_OK) return st;
  ungrant(s, s->init_grants[v]);
  s->init_grants[v] = id;
  return ONYX_STATUS_OK;
}

void onyx__weights_unbook_value(onyx_session *s, size_t v) {
  if (v >= s->init_grant_cap) return;
  ungrant(s, s->init_grants[v]);
  s->init_grants[v] = 0;
}

onyx_status onyx__weights_release(onyx_session *s, size_t v, uint64_t *released, char *err,
                                  size_t cap) {
  onyx__value *val = &s->graph->values[v];
  if (!val->is_initializer || val->init.data == NULL) return ONYX_STATUS_OK;
  uint64_t bytes = onyx__init_bytes(val);
  onyx_status st = ONYX_STATUS_OK;
  if (v < s->init_grant_cap && s->init_grants[v] != 0) {
    onyx__weights_unbook_value(s, v);
  } else if (bytes > 0) {
    /* Part of the loader's grant: book the smaller total in its place. */
    uint64_t rest = s->weights_bytes > bytes ? s->weights_bytes - bytes : 0;
    ungrant(s, s->weights_grant);
    s->weights_grant = 0;
    s->weights_bytes = 0;
    char label[160];
    loader_label(s, label, sizeof label);
    st = grant(s, rest, label, &s->weights_grant, err, cap);
    if (st == ONYX_STATUS_OK) s->weights_bytes = rest;
  }
  free(val->init.data);
  val->init.data = NULL;
  if (released) *released += bytes;
  return st;
}

void onyx__weights_unbook_all(onyx_session *s) {
  for (size_t v = 0; v < s->init_grant_cap; ++v) ungrant(s, s->init_grants[v]);
  free(s->init_grants);
  s->init_grants = NULL;
  s->init_grant_cap = 0;
  ungrant(s, s->weights_grant);
  s->weights_grant = 0;
  s->weights_bytes = 0;
}

uint32_t *onyx__value_readers(const onyx__graph *g) {
  uint32_t *readers = calloc(g->value_count + 1, sizeof *readers);
  if (readers == NULL) return NULL;
  for (size_t i = 0; i < g->node_count; ++i)
    for (size_t k = 0; k < g->nodes[i].input_count; ++k)
      if (g->nodes[i].inputs[k] >= 0) readers[g->nodes[i].inputs[k]]++;
  return readers;
}

int32_t *onyx__value_last_reader(const onyx__graph *g) {
  int32_t *reader = malloc((g->value_count + 1) * sizeof *reader);
  if (reader == NULL) return NULL;
  for (size_t v = 0; v <= g->value_count; ++v) reader[v] = -1;
  for (size_t i = 0; i < g->node_count; ++i)
    for (size_t k = 0; k < g->nodes[i].input_count; ++k)
      if (g->nodes[i].inputs[k] >= 0) reader[g->nodes[i].inputs[k]] = (int32_t)i;
  return reader;
}

bool onyx__input_copied(const onyx_session *s, size_t node, size_t k) {
  const onyx__placed_node *pn = &s->nodes[node];
  return pn->input_constant_copied != NULL && k < pn->info.input_count &&
         pn->input_constant_copied[k];
}

onyx_status onyx__release_copied_constants(onyx_session *s, size_t node, uint32_t *readers,
                                           char *err, size_t cap) {
  const onyx__node *n = &s->graph->nodes[node];
  for (size_t k = 0; k < n->input_count; ++k) {
    int32_t v = n->inputs[k];
    if (v < 0 || !onyx__input_copied(s, node, k)) continue;
    if (s->nodes[node].input_constants[k] == NULL) {
      /* Only constants can be given up; a flag on anything else is ignored. */
      s->nodes[node].input_constant_copied[k] = false;
      continue;
    }
    const onyx__value *val = &s->graph->values[v];
    if (readers[v] > 0) readers[v]--;
    if (readers[v] > 0 || val->is_output || val->init.data == NULL) continue;
    uint64_t before = s->copied_released_bytes;
    onyx_status st = onyx__weights_release(s, (size_t)v, &s->copied_released_bytes, err, cap);
    if (st != ONYX_STATUS_OK) return st;
    s->copied_released_count += s->copied_released_bytes > before;
  }
  return ONYX_STATUS_OK;
}
