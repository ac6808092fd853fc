/* Sessions: a loaded graph with each node placed on a provider kernel. */
#ifndef ONYX_CORE_SESSION_IMPL_H
#define ONYX_CORE_SESSION_IMPL_H

#include "graph.h"
#include "provider_impl.h"

typedef struct onyx__placed_node {
  onyx__provider *provider; /* the device instance it runs on */
  const onyx__kernel *kernel;
  void *state;         /* the kernel's per-node state */
  onyx_node_info info; /* what the kernel saw at create; arrays below */
  bool *input_present;
  bool *output_present;
  uint32_t *input_dtypes;
  const onyx_tensor **input_constants; /* [input_count]: constant initializers, else NULL */
  bool *input_constant_copied;         /* [input_count]: set by the kernel at create */
  uint32_t *output_dtypes;             /* [output_count]: declared or inferred, for placement */
  /* SESSION-lifetime workspace: one block per node, grown on demand. */
  void *session_ws;
  uint64_t session_ws_bytes;
} onyx__placed_node;

struct onyx_session {
  onyx_runtime *runtime;
  onyx__graph *graph;
  onyx__placed_node *nodes; /* graph->node_count entries */
  uint32_t *dtypes;         /* per value: declared or inferred dtype */
  int32_t *last_use;        /* per value: last node reading it, INT32_MAX for outputs */
  /* Per value and device instance (v * provider_count + instance): the device copy of
   * an initializer, or NULL (onyx__device_init). */
  void **device_inits;
  uint64_t weights_grant;           /* governor grant booking the host initializers (0: none) */
  struct onyx__graph_cache *graphs; /* recorded device graphs (graphs.c), NULL: none yet */
  struct onyx__profile *profile;    /* per-node timing (profile.c), NULL: not profiled */
  struct onyx__exec_scratch *exec_scratch; /* run bookkeeping (executor.c), NULL: no run yet */
  struct onyx__plan_cache *plan_cache;     /* plans by input geometry (plan_cache.c) */

  /* The weights ledger (optimize/weights.c) and what the passes did. */
  uint64_t weights_bytes; /* bytes weights_grant books */
  uint64_t *init_grants;  /* per value (init_grant_cap): the own grant of an initializer
                           * made at creation (a folded result), 0: in weights_grant */
  size_t init_grant_cap;
  struct onyx__opt_stats *opt_stats; /* per pass (optimize/passes.c), NULL: none ran */
  uint64_t copied_released_bytes;    /* initializers freed after kernels copied them */
  size_t copied_released_count;
};

/* Infers the dtype of every value the model leaves untyped (for placement). */
void onyx__infer_dtypes(const onyx__graph *graph, uint32_t *dtypes);

/* The first instance (placement order, the fallback last; host instances only when
 * `host_only`) with a kernel that takes `info` — domain and op through the index, then
 * opset, type constraints (outputs against `output_dtypes` where non-NULL) and its
 * `supports` — into *out_provider and *out_kernel. False when none does, both left
 * untouched; `why_not` (may be NULL) collects the instances' reasons. */
bool onyx__kernel_search(onyx_runtime *runtime, const onyx_node_info *info,
                         const uint32_t *output_dtypes, bool host_only,
                         onyx__provider **out_provider, const onyx__kernel **out_kernel,
                         char *why_not, size_t why_cap);

/* The provider that would take node `n` by (domain, op, opset) and the dtypes the
 * model declares for its constrained inputs and outputs, NULL when none would. Under
 * strict mode the fallback does not count where a preferred provider is loaded, since
 * placement would refuse it there. */
const char *onyx__claiming_provider(const onyx_runtime *runtime, const onyx__graph *graph,
                                    const onyx__node *node);

/* Refuses (UNSUPPORTED) the first node whose opset is newer than both the core's
 * newest for its domain and every loaded kernel of its op (opset_check.c). */
onyx_status onyx__check_opsets(const onyx_runtime *runtime, const onyx__graph *graph, char *err,
                               size_t err_cap);
/* The newest opset of `domain` ("" for ai.onnx) the core knows; 0 for a domain it
 * does not list. */
int64_t onyx__opset_newest_known(const char *domain);

/* Places every node and creates kernel states. On failure `err` names the node,
 * op and dtype and the providers tried; kernel states created so far are freed. */
onyx_status onyx__place_nodes(onyx_session *session, char *err, size_t err_cap);

/* "float32", "bfloat16", ... for messages. */
const char *onyx__dtype_str(uint32_t dtype);

/* Checks run inputs against the model's declared dtypes and dims. */
onyx_status onyx__check_inputs(const onyx_session *session, const onyx_tensor *inputs, size_t count,
                               char *err, size_t err_cap);

/* The copy of initializer `v` on instance `p`'s device, or NULL. */
static inline void *onyx__device_init(const onyx_session *s, size_t v, const onyx__provider *p) {
  size_t np = s->runtime->provider_count;
  return s->device_inits[v * np + (size_t)(p - s->runtime->providers)];
}

/* Copies every initializer a device kernel reads as data to that device, once, booked
 * as weights there (device_inits). On failure `err` names the node and initializer. */
onyx_status onyx__upload_device_weights(onyx_session *session, char *err, size_t err_cap);

/* Frees what placement created (NULL-safe arrays). */
void onyx__unplace_nodes(onyx_session *session);

#endif /* ONYX_CORE_SESSION_IMPL_H */
