/*
 * Private to the optimization passes (the files of core/optimize): the pass list, the
 * context a pass runs in, and what each pass reports.
 */
#ifndef ONYX_CORE_OPTIMIZE_IMPL_H
#define ONYX_CORE_OPTIMIZE_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph_edit.h"
#include "optimize.h"
#include "session_impl.h"

/* What one pass did; onyx_optimization_stats is its public copy. */
typedef struct onyx__opt_stats {
  bool ran;                    /* false: disabled */
  uint64_t nodes_removed;      /* nodes taken out of the graph */
  uint64_t nodes_folded;       /* of those, nodes computed into initializers */
  uint64_t nodes_skipped;      /* candidates the pass left alone (see its file) */
  uint64_t bytes_added;        /* initializer bytes the pass made, booked as weights */
  uint64_t bytes_released;     /* initializer bytes the pass freed and unbooked */
  uint64_t weights_peak_bytes; /* session weights held at the pass's busiest moment */
  double milliseconds;
} onyx__opt_stats;

/* A pass at work on one session. */
typedef struct onyx__opt_ctx {
  onyx_session *session;
  onyx__graph *graph;
  onyx__opt_stats *stats; /* this pass's, zeroed before it runs */
  char *err;
  size_t err_cap;
} onyx__opt_ctx;

typedef onyx_status (*onyx__opt_fn)(onyx__opt_ctx *ctx);

typedef struct onyx__opt_pass {
  const char *name;        /* what disable_optimizations and --no-optimize name */
  const char *description; /* one line for onyx-run --optimizations */
  onyx__opt_fn run;
} onyx__opt_pass;

/* One file per pass. */
onyx_status onyx__opt_dead_nodes(onyx__opt_ctx *ctx);        /* dead_nodes.c */
onyx_status onyx__opt_identity(onyx__opt_ctx *ctx);          /* identity.c */
onyx_status onyx__opt_constant_folding(onyx__opt_ctx *ctx);  /* constant_folding.c */
onyx_status onyx__opt_gate_up_silu(onyx__opt_ctx *ctx);      /* gate_up_silu.c */
onyx_status onyx__opt_norm_matmul(onyx__opt_ctx *ctx);       /* norm_matmul.c */
onyx_status onyx__opt_silu_matmul(onyx__opt_ctx *ctx);       /* silu_matmul.c */
onyx_status onyx__opt_transpose_weights(onyx__opt_ctx *ctx); /* transpose_weights.c */

/* The provider placement would pick for a node of (domain, op, opset) with `inputs`
 * (constants with their types, the rest of type d) and `like`'s name and attributes,
 * or NULL (provider_probe.c). */
onyx__provider *onyx__opt_provider_for(onyx_runtime *rt, const onyx__graph *g,
                                       const onyx__node *like, const char *domain, const char *op,
                                       int64_t opset, const int32_t *inputs, size_t input_count,
                                       uint32_t d);

/* The same with the attributes `attrs` in place of `like`'s: a fused node's before it
 * exists. */
onyx__provider *onyx__opt_provider_for_attrs(onyx_runtime *rt, const onyx__graph *g,
                                             const onyx__node *like, const onyx_attr *attrs,
                                             size_t attr_count, const char *domain, const char *op,
                                             int64_t opset, const int32_t *inputs,
                                             size_t input_count, uint32_t d);

/* What a MatMulNBits product brings to a fused node (nbits_fusion.c). */
enum { ONYX__NBITS_WEIGHTS = 5 }; /* inputs 1..5: B, scales, zero_points, g_idx, bias */
typedef struct onyx__nbits_product {
  int32_t w[ONYX__NBITS_WEIGHTS]; /* its inputs 1..5, -1 where absent */
  int64_t k, n;                   /* its K and N attributes */
  uint32_t dtype;                 /* the scales' type: A's */
} onyx__nbits_product;

/* Whether p, a com.microsoft::MatMulNBits, reads `a` as A with constant B and scales (and
 * zero_points, g_idx, bias where present), positive K and N and float scales: *out
 * filled; NULL, or why not. */
const char *onyx__opt_nbits_product(const onyx__graph *g, const onyx__node *p, int32_t a,
                                    onyx__nbits_product *out);

/* The fused node's attributes: *lead (when not NULL) then p's, as borrowed copies (names
 * and arrays still lead's and p's). malloc'ed, *out_count long; NULL when out of memory
 * (or *out_count is 0). */
onyx_attr *onyx__opt_nbits_attrs(const onyx_attr *lead, const onyx__node *p, size_t *out_count);

/* Moves `attrs` (made by onyx__opt_nbits_attrs from lead, one of head's attributes or
 * NULL, and p's) onto head: head's other attributes are freed, p keeps none. Cannot
 * fail. */
void onyx__opt_nbits_take_attrs(onyx__node *head, onyx__node *p, const onyx_attr *lead,
                                onyx_attr *attrs, size_t count);

/* The probe of a MatMulNBits fusion: the provider that would run head and the product p
 * must be one (else `apart`) and have `fused_op` for the fused node's inputs and
 * attributes, head's `lead` (may be NULL) before p's (else `missing`). NULL when it
 * does; "out of memory" when the merged attributes could not be made. */
const char *onyx__opt_nbits_check_providers(onyx__opt_ctx *ctx, const onyx__node *head,
                                            const onyx__node *p, const onyx_attr *lead,
                                            const char *fused_op, const int32_t *inputs,
                                            size_t input_count, uint32_t dtype, const char *apart,
                                            const char *missing);

/* A pass that fuses a node into the product reading it (fuse_each.c runs its loop). */
typedef struct onyx__opt_fusion {
  const char *pass;   /* its name, for the log */
  size_t match_bytes; /* the size of its match */
  /* The match at node i into *m, or why not; *candidate: node i is the pass's head op
   * (a refusal then counts as left). readers and reader: onyx__value_readers and
   * onyx__value_last_reader of the graph as the pass found it. */
  const char *(*match)(const onyx__graph *g, size_t i, const uint32_t *readers,
                       const int32_t *reader, void *m, bool *candidate);
  const char *(*check)(onyx__opt_ctx *ctx, const void *m); /* the providers, or why not */
  onyx_status (*rewrite)(onyx__graph *g, const void *m, bool *dead);
} onyx__opt_fusion;

onyx_status onyx__opt_fuse_each(onyx__opt_ctx *ctx, const onyx__opt_fusion *f);

/* Releases every constant initializer no node reads and no graph output names,
 * counting its bytes in ctx->stats->bytes_released. */
onyx_status onyx__opt_release_unread(onyx__opt_ctx *ctx);

/* Bytes of initializer data the session holds now (what the ledger books). */
uint64_t onyx__opt_weights_held(const onyx_session *session);

/* Records the weights held now, plus `pending` bytes booked for initializers not yet
 * in the graph, in the pass's peak. */
void onyx__opt_note_peak(onyx__opt_ctx *ctx, uint64_t pending);

#endif /* ONYX_CORE_OPTIMIZE_IMPL_H */
