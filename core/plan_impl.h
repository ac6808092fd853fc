/*
 * Workspace planning: for given input geometry, every kernel's workspace
 * requirement, and the peak per lifetime class and tier — computed without running
 * kernels (shape arithmetic on small host integer tensors is evaluated) and without
 * allocating any workspace.
 */
#ifndef ONYX_CORE_PLAN_IMPL_H
#define ONYX_CORE_PLAN_IMPL_H

#include "session_impl.h"

typedef struct onyx__node_plan {
  onyx_workspace_requirement req; /* what the kernel declared for the planned geometry */
  uint64_t offset[ONYX_MAX_WORKSPACE_REGIONS]; /* within its lifetime class's block */
  uint64_t step_bytes;    /* the node's STEP regions laid out back to back */
  uint64_t session_bytes; /* the node's SESSION regions laid out back to back */
} onyx__node_plan;

struct onyx_plan {
  onyx_session *session;
  onyx__node_plan *nodes; /* one per graph node */
  /* Per provider (runtime order): STEP peak (max over its nodes — one block reused
   * by every node) and SESSION total (sum over its nodes — each persists). */
  uint64_t *step_peak;
  uint64_t *session_total;
  uint64_t *session_growth; /* SESSION bytes beyond what the session already holds */
};

/* Computes the plan for these inputs (geometry; data read for integer inputs). */
onyx_status onyx__plan_build(onyx_session *session, const onyx_tensor *inputs,
                             size_t input_count, onyx_plan **out_plan, char *err,
                             size_t err_cap);

/* Lays out a requirement's regions per lifetime class, aligned; returns totals. */
void onyx__plan_layout(const onyx_workspace_requirement *req, uint64_t *offsets,
                       uint64_t *out_step, uint64_t *out_session);

#endif /* ONYX_CORE_PLAN_IMPL_H */
