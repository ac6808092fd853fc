/*
 * Identity elimination: an Identity copies its input, so its readers may read the
 * input itself. When the Identity's output is a graph output, that name must stay
 * the name the caller sees: the node that produces the input then produces the
 * output value instead, and the input's other readers follow it. That needs a
 * producing node; an Identity that exposes a graph input, an initializer or another
 * graph output under a second name stays (and constant folding copies a constant).
 */
#include <stdlib.h>
#include <string.h>

#include "optimize_impl.h"

static bool is_identity(const onyx__node *n) {
  return n->domain[0] == '\0' && !strcmp(n->op_type, "Identity") && n->input_count == 1 &&
         n->output_count == 1 && n->inputs[0] >= 0 && n->outputs[0] >= 0;
}

/* Removes Identity node i if it can; true when it did. */
static bool eliminate(onyx__graph *g, size_t i) {
  const onyx__node *n = &g->nodes[i];
  int32_t x = n->inputs[0], y = n->outputs[0];
  const onyx__value *in = &g->values[x], *out = &g->values[y];
  if (!out->is_output) {
    onyx__graph_replace_uses(g, y, x);
    return true;
  }
  if (in->is_output || in->is_input || in->is_initializer || in->producer < 0) return false;
  /* The producer of x now makes y; x's readers (this Identity among them, removed
   * by the caller) read y, which exists from that producer on. */
  const onyx__node *p = &g->nodes[in->producer];
  for (size_t k = 0; k < p->output_count; ++k)
    if (p->outputs[k] == x) onyx__graph_set_node_output(g, (size_t)in->producer, k, y);
  onyx__graph_replace_uses(g, x, y);
  return true;
}

onyx_status onyx__opt_identity(onyx__opt_ctx *ctx) {
  onyx__graph *g = ctx->graph;
  bool *dead = calloc(g->node_count + 1, sizeof *dead);
  if (dead == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  size_t found = 0;
  for (size_t i = 0; i < g->node_count; ++i) {
    if (!is_identity(&g->nodes[i])) continue;
    dead[i] = eliminate(g, i);
    found += dead[i];
    ctx->stats->nodes_skipped += !dead[i];
  }
  if (found > 0) ctx->stats->nodes_removed += onyx__graph_remove_nodes(g, dead);
  free(dead);
  return ONYX_STATUS_OK;
}
