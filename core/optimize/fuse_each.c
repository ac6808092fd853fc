/*
 * The loop of the passes that fuse a node into the product that reads it (norm_matmul,
 * silu_matmul): each live node is matched, the providers asked, the pair rewritten into
 * the node's slot with the product flagged dead, and the dead removed once at the end.
 * A candidate left alone is counted and its reason logged at debug level.
 */
#include <stdlib.h>

#include "error_impl.h"
#include "optimize_impl.h"

onyx_status onyx__opt_fuse_each(onyx__opt_ctx *ctx, const onyx__opt_fusion *f) {
  onyx__graph *g = ctx->graph;
  size_t nodes = g->node_count, fused = 0;
  uint32_t *readers = onyx__value_readers(g);
  int32_t *reader = onyx__value_last_reader(g);
  bool *dead = calloc(nodes + 1, sizeof *dead);
  void *m = malloc(f->match_bytes);
  onyx_status st = readers && reader && dead && m ? ONYX_STATUS_OK : ONYX_STATUS_OUT_OF_MEMORY;
  for (size_t i = 0; i < nodes && st == ONYX_STATUS_OK; ++i) {
    if (dead[i]) continue;
    bool candidate = false;
    const char *why = f->match(g, i, readers, reader, m, &candidate);
    if (why == NULL) why = f->check(ctx, m);
    if (why == NULL) {
      st = f->rewrite(g, m, dead);
      fused += st == ONYX_STATUS_OK;
      continue;
    }
    if (!candidate) continue;
    ctx->stats->nodes_skipped++;
    onyx__log(ONYX_LOG_DEBUG, "%s: %s '%s' (#%zu) stays: %s", f->pass, g->nodes[i].op_type,
              g->nodes[i].name, i, why);
  }
  if (fused > 0) ctx->stats->nodes_removed += onyx__graph_remove_nodes(g, dead);
  free(readers);
  free(reader);
  free(dead);
  free(m);
  return st;
}
