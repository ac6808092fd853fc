/* onyx_session: creation from a file or bytes, geometry queries, destruction. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error_impl.h"
#include "graphs_impl.h"
#include "memory_impl.h"
#include "model_functions.h"
#include "optimize/optimize.h"
#include "plan_impl.h"
#include "profile_impl.h"
#include "session_impl.h"

void onyx_session_destroy(onyx_session *s) {
  if (s == NULL) return;
  onyx__graphs_free(s);
  onyx__exec_scratch_free(s);
  onyx__plan_cache_free(s);
  onyx__profile_free(s->profile);
  if (s->nodes) {
    for (size_t i = 0; i < s->graph->node_count; ++i)
      onyx__memory_free(s->runtime->memory, s->nodes[i].session_ws);
  }
  if (s->device_inits) {
    size_t n = s->graph->value_count * s->runtime->provider_count;
    for (size_t i = 0; i < n; ++i) onyx__memory_free(s->runtime->memory, s->device_inits[i]);
  }
  /* Device memory may be freed in stream order (see the copy and device_free contract
   * in abi/onyx_provider.h): a sync lets the frees complete and the memory go back to
   * the device before the caller looks at it. */
  for (size_t p = 0; s->runtime && p < s->runtime->provider_count; ++p)
    (void)onyx__stream_sync(&s->runtime->providers[p]);
  onyx__unplace_nodes(s);
  onyx__weights_unbook_all(s);
  free(s->opt_stats);
  free(s->device_inits);
  free(s->dtypes);
  free(s->last_use);
  onyx__graph_free(s->graph);
  free(s);
}

/* For each value, the last node that reads it; graph outputs live to the end. */
static void compute_last_use(onyx_session *s) {
  const onyx__graph *g = s->graph;
  for (size_t v = 0; v < g->value_count; ++v) s->last_use[v] = -1;
  for (size_t i = 0; i < g->node_count; ++i)
    for (size_t k = 0; k < g->nodes[i].input_count; ++k)
      if (g->nodes[i].inputs[k] >= 0) s->last_use[g->nodes[i].inputs[k]] = (int32_t)i;
  for (size_t o = 0; o < g->output_count; ++o) s->last_use[g->outputs[o]] = INT32_MAX;
}

static void print_placement(const onyx_session *s) {
  const onyx__graph *g = s->graph;
  fprintf(stderr, "placement of %zu nodes:\n", g->node_count);
  for (size_t i = 0; i < g->node_count; ++i) {
    const onyx__node *n = &g->nodes[i];
    fprintf(stderr, "  #%-4zu %-28s %-20s -> %s (%s)\n", i, n->name[0] ? n->name : "(unnamed)",
            n->op_type, s->nodes[i].provider->name, s->nodes[i].provider->tier);
  }
  for (size_t p = 0; p < s->runtime->provider_count; ++p) {
    size_t count = 0;
    for (size_t i = 0; i < g->node_count; ++i)
      count += s->nodes[i].provider == &s->runtime->providers[p];
    fprintf(stderr, "  %s (%s): %zu nodes\n", s->runtime->providers[p].name,
            s->runtime->providers[p].tier, count);
  }
  onyx__function_notes_print(g, stderr);
}

/* Which provider would take node `n` (placement.c): whether a call of a model-local
 * function stays a node or is inlined. */
static const char *claiming_provider(void *ctx, const onyx__graph *g, const onyx__node *n) {
  return onyx__claiming_provider(ctx, g, n);
}

static onyx_status finish_create(onyx_runtime *rt, onyx__graph *g,
                                 const onyx_session_options *options, onyx_session **out,
                                 onyx_error **out_error) {
  char err[ONYX_ERR_CAP] = "";
  onyx_session *s = calloc(1, sizeof *s);
  if (s == NULL) {
    onyx__graph_free(g);
    return onyx__error_set(out_error, ONYX_STATUS_OUT_OF_MEMORY, NULL);
  }
  s->runtime = rt;
  s->graph = g;
  /* Calls of model-local functions that no provider claims become their bodies; then
   * the loader's initializers are booked as weights and the graph is optimized
   * (docs/optimizations.md), all before anything is sized for it. */
  onyx_status gst = onyx__graph_inline_functions(g, claiming_provider, rt, err, sizeof err);
  if (gst == ONYX_STATUS_OK) gst = onyx__check_opsets(rt, g, err, sizeof err);
  if (gst == ONYX_STATUS_OK) gst = onyx__weights_book(s, err, sizeof err);
  if (gst == ONYX_STATUS_OK) gst = onyx__optimize(s, options, err, sizeof err);
  if (gst != ONYX_STATUS_OK) {
    onyx_session_destroy(s);
    return onyx__error_set(out_error, gst, err);
  }
  size_t nv = g->value_count ? g->value_count : 1;
  s->dtypes = calloc(nv, sizeof *s->dtypes);
  s->last_use = calloc(nv, sizeof *s->last_use);
  s->device_inits = calloc(nv * rt->provider_count, sizeof *s->device_inits);
  if (!s->dtypes || !s->last_use || !s->device_inits) {
    onyx_session_destroy(s);
    return onyx__error_set(out_error, ONYX_STATUS_OUT_OF_MEMORY, NULL);
  }
  onyx__infer_dtypes(g, s->dtypes);
  compute_last_use(s);
  onyx_status st = onyx__place_nodes(s, err, sizeof err);
  if (st == ONYX_STATUS_OK) st = onyx__upload_device_weights(s, err, sizeof err);
  if (st != ONYX_STATUS_OK) {
    onyx__function_notes_explain(g, err, sizeof err);
    onyx_session_destroy(s);
    return onyx__error_set(out_error, st, err);
  }
  if (options && options->print_placement) print_placement(s);
  if (options &&
      options->struct_size >= offsetof(onyx_session_options, profile) + sizeof options->profile &&
      options->profile && (s->profile = onyx__profile_new(g->node_count)) == NULL) {
    onyx_session_destroy(s);
    return onyx__error_set(out_error, ONYX_STATUS_OUT_OF_MEMORY, NULL);
  }
  *out = s;
  return ONYX_STATUS_OK;
}

onyx_status onyx_session_create(onyx_runtime *rt, const char *path,
                                const onyx_session_options *options, onyx_session **out,
                                onyx_error **out_error) {
  if (rt == NULL || path == NULL || out == NULL)
    return onyx__error_set(out_error, ONYX_STATUS_INVALID_ARGUMENT,
                           "onyx_session_create: runtime, path and out_session are required");
  char err[ONYX_ERR_CAP] = "";
  onyx__graph *g = NULL;
  onyx_status st = onyx__model_load_file(path, &g, err, sizeof err);
  if (st != ONYX_STATUS_OK) return onyx__error_set(out_error, st, err);
  return finish_create(rt, g, options, out, out_error);
}

onyx_status onyx_session_create_from_bytes(onyx_runtime *rt, const void *bytes, size_t size,
                                           const onyx_session_options *options, onyx_session **out,
                                           onyx_error **out_error) {
  if (rt == NULL || bytes == NULL || out == NULL)
    return onyx__error_set(out_error, ONYX_STATUS_INVALID_ARGUMENT,
                           "onyx_session_create_from_bytes: runtime, bytes and out_session "
                           "are required");
  char err[ONYX_ERR_CAP] = "";
  onyx__graph *g = NULL;
  onyx_status st = onyx__model_load_bytes(bytes, size, NULL, "<bytes>", &g, err, sizeof err);
  if (st != ONYX_STATUS_OK) return onyx__error_set(out_error, st, err);
  return finish_create(rt, g, options, out, out_error);
}

size_t onyx_session_input_count(const onyx_session *s) { return s ? s->graph->input_count : 0; }
size_t onyx_session_output_count(const onyx_session *s) { return s ? s->graph->output_count : 0; }

static onyx_value_info value_info(const onyx_session *s, int32_t v) {
  const onyx__value *val = &s->graph->values[v];
  onyx_value_info info = {.name = val->name, .dtype = s->dtypes[v], .rank = val->rank};
  memcpy(info.dims, val->dims, sizeof info.dims);
  return info;
}

onyx_value_info onyx_session_input_info(const onyx_session *s, size_t i) {
  onyx_value_info none = {.name = NULL, .rank = -1};
  return s && i < s->graph->input_count ? value_info(s, s->graph->inputs[i]) : none;
}

onyx_value_info onyx_session_output_info(const onyx_session *s, size_t i) {
  onyx_value_info none = {.name = NULL, .rank = -1};
  return s && i < s->graph->output_count ? value_info(s, s->graph->outputs[i]) : none;
}

size_t onyx_session_node_count(const onyx_session *s) { return s ? s->graph->node_count : 0; }

const char *onyx_session_node_provider(const onyx_session *s, size_t i) {
  return s && i < s->graph->node_count ? s->nodes[i].provider->name : NULL;
}

const char *onyx_session_node_device(const onyx_session *s, size_t i) {
  return s && i < s->graph->node_count ? s->nodes[i].provider->tier : NULL;
}

const char *onyx_session_node_op(const onyx_session *s, size_t i) {
  return s && i < s->graph->node_count ? s->graph->nodes[i].op_type : NULL;
}

const char *onyx_session_node_name(const onyx_session *s, size_t i) {
  return s && i < s->graph->node_count ? s->graph->nodes[i].name : NULL;
}

int64_t onyx_session_node_attr_int(const onyx_session *s, size_t i, const char *name,
                                   int64_t fallback) {
  if (s == NULL || name == NULL || i >= s->graph->node_count) return fallback;
  const onyx__node *n = &s->graph->nodes[i];
  for (size_t a = 0; a < n->attr_count; ++a)
    if (n->attrs[a].type == ONYX_ATTR_INT && !strcmp(n->attrs[a].name, name)) return n->attrs[a].i;
  return fallback;
}
