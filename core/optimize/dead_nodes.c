/*
 * Dead-node elimination: a node none of whose outputs reaches a graph output does
 * nothing a caller can see, so it is removed. ONNX ops have no side effects beyond
 * their outputs, so liveness is reachability alone. One backward sweep suffices:
 * nodes are in topological order, so every reader of a value is seen before its
 * producer. Initializers that only dead nodes read are freed afterwards.
 */
#include <stdlib.h>

#include "optimize_impl.h"

onyx_status onyx__opt_dead_nodes(onyx__opt_ctx *ctx) {
  onyx__graph *g = ctx->graph;
  bool *needed = calloc(g->value_count + 1, sizeof *needed);
  bool *dead = calloc(g->node_count + 1, sizeof *dead);
  if (needed == NULL || dead == NULL) {
    free(needed);
    free(dead);
    return ONYX_STATUS_OUT_OF_MEMORY;
  }
  for (size_t o = 0; o < g->output_count; ++o) needed[g->outputs[o]] = true;
  for (size_t i = g->node_count; i-- > 0;) {
    const onyx__node *n = &g->nodes[i];
    bool live = false;
    for (size_t k = 0; k < n->output_count && !live; ++k)
      live = n->outputs[k] >= 0 && needed[n->outputs[k]];
    dead[i] = !live;
    for (size_t k = 0; live && k < n->input_count; ++k)
      if (n->inputs[k] >= 0) needed[n->inputs[k]] = true;
  }
  ctx->stats->nodes_removed += onyx__graph_remove_nodes(g, dead);
  free(needed);
  free(dead);
  return onyx__opt_release_unread(ctx);
}
