/*
 * Opset imports newer than anything here supports are refused at session creation,
 * as ONNX Runtime refuses a default-domain opset above the one it knows.
 *
 * A kernel registers an opset range, but most ranges are open-ended ("Add 14..")
 * because nothing newer existed when the kernel was written: an open end means "up
 * to what was known", not "every opset to come", and an op may change meaning in a
 * later opset. So what is supported is bounded twice: the core states, per domain it
 * knows, the newest opset it was checked against (the ONNX node tests it runs); a
 * kernel that names a newer opset itself (since_opset or until_opset at or past it)
 * claims that opset for its op. A node whose opset passes both is refused, naming
 * the node, the op and both numbers. Domains the core does not list are bounded by
 * their kernels alone; a node no kernel registers for is left to placement (or to
 * inlining, for a model-local function), which names it on its own.
 */
#include <stdio.h>
#include <string.h>

#include "error_impl.h"
#include "session_impl.h"

/* The newest opset of each domain the core was checked against: ai.onnx as in the
 * ONNX 1.23 node tests that conformance.onnx_node runs, the others as ONNX Runtime's
 * contrib ops and ONNX's ML and preview domains define them. */
static const struct {
  const char *domain;
  int64_t newest;
} core_newest[] = {
    {"", 28},
    {"ai.onnx.ml", 5},
    {"ai.onnx.preview", 1},
    {"ai.onnx.preview.training", 1},
    {"com.microsoft", 1},
};

int64_t onyx__opset_newest_known(const char *domain) {
  for (size_t i = 0; i < sizeof core_newest / sizeof core_newest[0]; ++i)
    if (!strcmp(core_newest[i].domain, domain)) return core_newest[i].newest;
  return 0;
}

/* The newest opset of (domain, op) some loaded kernel names, 0 when none registers
 * the op; *out_any tells whether any does. */
static int64_t kernel_newest(const onyx_runtime *rt, const onyx__node *n, bool *out_any) {
  int64_t newest = 0;
  *out_any = false;
  size_t count = 0;
  const onyx__kernel *const *found = onyx__kernel_lookup(rt, n->domain, n->op_type, &count);
  for (size_t i = 0; i < count; ++i) {
    *out_any = true;
    if (found[i]->since_opset > newest) newest = found[i]->since_opset;
    if (found[i]->until_opset > newest) newest = found[i]->until_opset;
  }
  return newest;
}

onyx_status onyx__check_opsets(const onyx_runtime *rt, const onyx__graph *g, char *err,
                               size_t err_cap) {
  for (size_t i = 0; i < g->node_count; ++i) {
    const onyx__node *n = &g->nodes[i];
    bool registered = false;
    int64_t core = onyx__opset_newest_known(n->domain);
    int64_t kernels = kernel_newest(rt, n, &registered);
    if (core == 0 && !registered) continue; /* placement or inlining speaks for it */
    int64_t newest = core > kernels ? core : kernels;
    if (n->opset <= newest) continue;
    const char *domain = n->domain[0] ? n->domain : "ai.onnx";
    onyx__errf(err, err_cap,
               "node %zu%s%s%s (%s%s%s): the model imports %s opset %lld, newer than this build "
               "supports (%s up to opset %lld); no kernel claims %s at opset %lld",
               i, n->name[0] ? " '" : "", n->name, n->name[0] ? "'" : "", n->domain,
               n->domain[0] ? "::" : "", n->op_type, domain, (long long)n->opset, domain,
               (long long)newest, n->op_type, (long long)n->opset);
    return ONYX_STATUS_UNSUPPORTED;
  }
  return ONYX_STATUS_OK;
}
