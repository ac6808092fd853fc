/*
 * Graph optimization at session creation, and the weights ledger it shares with
 * placement: internal to the core (session.c, placement.c, device_weights.c,
 * executor.c). docs/optimizations.md describes the passes.
 *
 * The ledger: the loader's initializers are booked as weights in one grant; an
 * initializer made at creation (a folded result) gets a grant of its own. Releasing
 * an initializer frees its host data and unbooks its bytes, keeping its geometry,
 * so that readers that no longer need the data (a kernel that prepacked it) still
 * see the shape.
 */
#ifndef ONYX_CORE_OPTIMIZE_H
#define ONYX_CORE_OPTIMIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph.h"
#include "onyx.h"

struct onyx_session;

/* Is value `v` a constant of the session: an initializer the caller cannot
 * override (a graph input with an initializer default is not one)? */
static inline bool onyx__value_is_constant(const onyx__value *v) {
  return v->is_initializer && !v->is_input;
}

/* Bytes of an initializer's data. */
uint64_t onyx__init_bytes(const onyx__value *v);

/* Books every initializer of the session's graph as weights on the host tier (one
 * grant). A refusal is TIER_EXHAUSTED with the governor's numbers in `err`. */
onyx_status onyx__weights_book(struct onyx_session *session, char *err, size_t err_cap);

/* Books `bytes` as weights for initializer `v` made at creation (its own grant,
 * labelled `label`), before its data is written. */
onyx_status onyx__weights_book_value(struct onyx_session *session, size_t v, uint64_t bytes,
                                     const char *label, char *err, size_t err_cap);

/* Gives back the booking of `v` taken by onyx__weights_book_value when its data never
 * came to be (a fold that failed). */
void onyx__weights_unbook_value(struct onyx_session *session, size_t v);

/* Frees initializer v's data and unbooks its bytes; its geometry stays (data NULL).
 * `released` (may be NULL) is increased by the bytes freed. */
onyx_status onyx__weights_release(struct onyx_session *session, size_t v, uint64_t *released,
                                  char *err, size_t err_cap);

/* Releases every booking the ledger holds (session destruction). */
void onyx__weights_unbook_all(struct onyx_session *session);

/* Per value, how many node inputs read it (a node reading it twice counts twice);
 * calloc'ed, value_count + 1 entries, NULL when out of memory. */
uint32_t *onyx__value_readers(const onyx__graph *graph);
/* Per value, the last node in node order that reads it, -1 for none; value_count + 1
 * entries, NULL when out of memory (with the counts: "the only reader"). */
int32_t *onyx__value_last_reader(const onyx__graph *graph);

/*
 * After node `node`'s kernel was created: for each constant input whose
 * input_constant_copied entry the kernel set, one reader of the initializer is gone;
 * when none is left and it is no graph output, it is released. `readers` is the
 * count from onyx__value_readers, kept up to date here.
 */
onyx_status onyx__release_copied_constants(struct onyx_session *session, size_t node,
                                           uint32_t *readers, char *err, size_t err_cap);

/* Did node `node`'s kernel take its own copy of input k (input_constant_copied)? */
bool onyx__input_copied(const struct onyx_session *session, size_t node, size_t k);

/*
 * Runs the optimization passes on the session's graph, in list order, except those
 * `options` disables (onyx_session_options.disable_optimizations). Needs the weights
 * booked; leaves the graph in topological order with its name index rebuilt. On
 * failure `err` names the pass and the node.
 */
onyx_status onyx__optimize(struct onyx_session *session, const onyx_session_options *options,
                           char *err, size_t err_cap);

#endif /* ONYX_CORE_OPTIMIZE_H */
