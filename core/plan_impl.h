/*
 * Workspace planning: for given input geometry, every kernel's workspace
 * requirement, and the peak per lifetime class and tier — computed without running
 * kernels (shape arithmetic on small host integer tensors is evaluated) and without
 * allocating any workspace. docs/workspace.md describes the contract.
 */
#ifndef ONYX_CORE_PLAN_IMPL_H
#define ONYX_CORE_PLAN_IMPL_H

#include "session_impl.h"

/* The largest alignment a region may ask for (one 2 MiB granule). */
#define ONYX__WS_MAX_ALIGN (2u << 20)
/* A block's base is aligned to the strictest region in it, and at least this. */
#define ONYX__WS_MIN_BLOCK_ALIGN 64u

/* Where a requirement's regions lie: per lifetime class (index onyx_lifetime) one
 * block, regions in requirement order, each at an offset that is a multiple of its
 * alignment. Regions of 0 bytes take no room and get a NULL view. */
typedef struct onyx__ws_layout {
  uint64_t offset[ONYX_MAX_WORKSPACE_REGIONS]; /* region i within its class's block */
  uint64_t bytes[2];                           /* each class's block size */
  uint32_t align[2];                           /* each class's base alignment */
} onyx__ws_layout;

typedef struct onyx__node_plan {
  onyx_workspace_requirement req; /* what the kernel declared for the planned geometry */
  onyx__ws_layout layout;
  uint64_t session_block; /* the node's SESSION block after admission (>= its layout) */
  bool session_grows;     /* admission grants a new SESSION block for the node */
} onyx__node_plan;

struct onyx_plan {
  onyx_session *session;
  onyx__node_plan *nodes; /* one per graph node */
  /* Per provider (runtime order): STEP peak (max over its nodes — one block reused
   * by every node), the node that sets it (SIZE_MAX: none) and the block's base
   * alignment (max over its nodes); SESSION total (sum over its nodes — each
   * persists) and the SESSION bytes admission must newly grant. */
  uint64_t *step_peak;
  size_t *step_peak_node;
  uint32_t *step_align;
  uint64_t *session_total;
  uint64_t *session_growth;
};

/* Computes the plan for these inputs (geometry; data read for integer inputs). */
onyx_status onyx__plan_build(onyx_session *session, const onyx_tensor *inputs, size_t input_count,
                             onyx_plan **out_plan, char *err, size_t err_cap);

/* Brings the plan's SESSION numbers (per node: grows, block; per provider: total,
 * growth) up to the session's SESSION blocks as they are now. */
void onyx__plan_fit_session(onyx_plan *plan);

/* The plan for these inputs, borrowed until onyx__plan_release: the session's cached
 * plan for their geometry where it has one (plan_cache.c), else a new one (errors
 * as onyx__plan_build's). Its SESSION numbers are brought up to the session's
 * blocks as they are now. */
onyx_status onyx__plan_acquire(onyx_session *session, const onyx_tensor *inputs, size_t input_count,
                               onyx_plan **out_plan, char *err, size_t err_cap);

/* Gives back a plan from onyx__plan_acquire (NULL: nothing). */
void onyx__plan_release(onyx_session *session, onyx_plan *plan);

typedef struct onyx__plan_cache onyx__plan_cache;

/* What a session's plan cache did (for tests and tools). */
typedef struct onyx__plan_cache_stats {
  uint64_t builds;    /* plans built by onyx__plan_acquire (misses) */
  uint64_t hits;      /* runs that took a cached plan */
  uint64_t evictions; /* cached plans dropped for a newer geometry */
} onyx__plan_cache_stats;

void onyx__plan_cache_stats_get(const onyx_session *session, onyx__plan_cache_stats *out_stats);

/* Does planning carry this input's values (a small integer tensor on the host)? */
bool onyx__plan_value_known(const onyx_tensor *t);

/* Frees the session's cached plans (session destroy). */
void onyx__plan_cache_free(onyx_session *session);

/* Checks a requirement (count, lifetimes, power-of-two alignments up to
 * ONYX__WS_MAX_ALIGN, no overflow) and lays it out. On failure `err` names the
 * region and PROVIDER_ERROR is returned. */
onyx_status onyx__ws_layout_make(const onyx_workspace_requirement *req, onyx__ws_layout *out_layout,
                                 char *err, size_t err_cap);

/*
 * Allocates one workspace block of `lifetime` for node `node` from `req` laid out as
 * `layout`, `bytes` long (>= the layout's block; a STEP block is the peak of its
 * provider) and aligned to `align`, booked with the governor as one grant per region
 * ("node 3 cpu/GroupQueryAttention region q_bnsh (step peak) [name]"): each grant
 * covers the region and the padding up to the next one, the last one the block's
 * tail, so the grants sum to the block. `what` says which block it is.
 */
onyx_status onyx__ws_block_alloc(onyx_session *session, size_t node,
                                 const onyx_workspace_requirement *req,
                                 const onyx__ws_layout *layout, uint32_t lifetime, uint64_t bytes,
                                 uint32_t align, const char *what, void **out_block, char *err,
                                 size_t err_cap);

#endif /* ONYX_CORE_PLAN_IMPL_H */
