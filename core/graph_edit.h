/*
 * Editing a loaded graph (the optimization passes, core/optimize/): internal to the
 * core. Every edit keeps the graph's invariants — nodes in topological order, each
 * value produced at most once with `producer` pointing at its node, the name index
 * in step with the values — so later stages (type inference, placement, planning)
 * see a graph as the loader would have built it.
 */
#ifndef ONYX_CORE_GRAPH_EDIT_H
#define ONYX_CORE_GRAPH_EDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph.h"

/* FNV-1a over a NUL-terminated name: the hash of the graph's name index. */
static inline uint64_t onyx__graph_name_hash(const char *s) {
  uint64_t h = UINT64_C(0xcbf29ce484222325);
  for (; *s != '\0'; ++s) {
    h ^= (unsigned char)*s;
    h *= UINT64_C(0x100000001b3);
  }
  return h;
}

/* Rebuilds the name index over every value (sized to at most half full). On
 * OUT_OF_MEMORY the index is dropped (lookups then scan), never left stale. */
onyx_status onyx__graph_index_rebuild(onyx__graph *graph);

/* Appends a value named `name` (copied): no producer, not an input, output or
 * initializer, dtype and rank unknown. INVALID_ARGUMENT when the name is taken.
 * Moves the values array: pointers into it are stale afterwards. */
onyx_status onyx__graph_add_value(onyx__graph *graph, const char *name, int32_t *out_value);

/* Makes value `v` an initializer holding `t` (host memory; the graph owns t.data from
 * here on) with t's dtype and geometry. A value a node produced loses its producer:
 * the caller removes that node (or re-points its output) before the graph is used. */
void onyx__graph_set_initializer(onyx__graph *graph, int32_t v, onyx_tensor t);

/* Every node input that reads `from` reads `to` instead. Graph outputs are not
 * touched. Returns the inputs changed. `to` must be defined before every reader of
 * `from` (an initializer, a graph input, or produced earlier) to keep the order. */
size_t onyx__graph_replace_uses(onyx__graph *graph, int32_t from, int32_t to);

/* Output `k` of node `node` produces value `v` instead of the one it produced; that
 * one is left without a producer. `v` must have none (its producer was removed or
 * is about to be). */
void onyx__graph_set_node_output(onyx__graph *graph, size_t node, size_t k, int32_t v);

/* Removes the nodes flagged in `dead` (node_count entries), keeping the order of the
 * rest and renumbering producers. Values the removed nodes produced stay, without a
 * producer. Returns the nodes removed. */
size_t onyx__graph_remove_nodes(onyx__graph *graph, const bool *dead);

/* Checks the invariants above: every node input defined by a graph input, an
 * initializer or an earlier node; producers consistent. INTERNAL with `err` naming
 * the node and input otherwise. */
onyx_status onyx__graph_check(const onyx__graph *graph, char *err, size_t err_cap);

#endif /* ONYX_CORE_GRAPH_EDIT_H */
