/*
 * Model-local functions (ONNX FunctionProto), internal to the core.
 *
 * The loader reads a model's functions into the graph (onyx__graph.functions) and
 * leaves every node that calls one as an ordinary node. At session creation, when the
 * providers are known, onyx__graph_inline_functions replaces each call that no
 * provider claims by the function's body, placed at the call site; a call a provider
 * claims stays a node, so that a fused kernel wins over its decomposition. What
 * became of each call is kept in onyx__graph.function_notes for --placement.
 *
 * Semantics are those of the ONNX IR (docs/IR.md, "Functions"): formal inputs and
 * outputs are bound to the call's names (missing trailing inputs are absent); the
 * body's own values get names "<call>/<function>/<value>", made unique in the graph;
 * an attribute reference takes the call's attribute, else the function's default, and
 * is omitted otherwise; the body's nodes bind to the function's opset imports; calls
 * inside a body expand recursively; functions are keyed by (domain, name, overload).
 */
#ifndef ONYX_CORE_MODEL_FUNCTIONS_H
#define ONYX_CORE_MODEL_FUNCTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "graph.h"

/* Deepest nesting of function calls that inlining follows. */
#define ONYX_FUNCTION_MAX_DEPTH 64
/* Most nodes a graph may have once its function calls are inlined. */
#define ONYX_FUNCTION_MAX_NODES (UINT32_C(1) << 22)

/* What became of one function call. */
typedef struct onyx__function_call_note {
  char *call;     /* the call node's name in the graph (a nested call's is prefixed) */
  char *function; /* "domain::name", with " overload 'x'" when it has one */
  char *provider; /* the provider that claims the op, so the node was kept; NULL: inlined */
  char *omitted;  /* function attributes the body lost: the call left them unset and the
                   * function has no default ("a, b"); NULL when none */
  size_t nodes;   /* nodes the body became, nested calls' included; 0 when kept */
  uint32_t depth; /* 0 for a node of the model's graph, n inside n function bodies */
} onyx__function_call_note;

/* A body node that lost an attribute reference, for explaining a kernel's refusal. */
typedef struct onyx__function_omission {
  char *node;  /* the inlined node's name */
  size_t call; /* index into calls of the call it came from */
} onyx__function_omission;

/* Everything inlining did, in graph order (a nested call follows its outer one). */
typedef struct onyx__function_notes {
  onyx__function_call_note *calls;
  size_t call_count;
  size_t inlined_count; /* calls replaced by their body */
  onyx__function_omission *omissions;
  size_t omission_count;
} onyx__function_notes;

/*
 * Answers whether a loaded provider claims node `n` as it stands: its (domain, op_type,
 * opset), and where the graph already knows it, the dtype of its type-constrained
 * input. Returns the name of the first provider (placement order) that does, or NULL.
 * `g`'s name index is stale while inlining runs: read values by index only.
 */
typedef const char *(*onyx__claim_fn)(void *ctx, const onyx__graph *g, const onyx__node *n);

/*
 * Inlines every call of a model-local function that `claims` (NULL: nothing is
 * claimed) does not claim, recursively, then frees the functions and stores the notes
 * in g->function_notes. A graph without functions is left as it is. On failure `err`
 * names the function, the call node and the thing (an attribute, a cycle of calls, an
 * opset), and the graph is unchanged.
 */
onyx_status onyx__graph_inline_functions(onyx__graph *g, onyx__claim_fn claims, void *claims_ctx,
                                         char *err, size_t err_cap);

/* Prints one line per function call (inlined or kept, and by whom) to `out`; prints
 * nothing when the graph called no function. */
void onyx__function_notes_print(const onyx__graph *g, FILE *out);

/*
 * When `err` (a placement or kernel message) names an inlined node that lost an
 * attribute reference, appends which call and function it came from and which
 * attributes the call did not set, so that "attribute 'to' is required" names them.
 */
void onyx__function_notes_explain(const onyx__graph *g, char *err, size_t err_cap);

/* Frees what the loader read and what inlining noted. NULL-safe. */
void onyx__functions_free(struct onyx__functions *lib);
void onyx__function_notes_free(onyx__function_notes *notes);

/* -------------------------------------------------- for the loader (model_load.c) */

struct onyx__load_ctx;
struct Onnx__ModelProto;

/*
 * Reads m->functions: identity, signature, body, opset imports, value types, checked
 * (a function defined twice, an input the body never defines, a reference to an
 * attribute the function does not declare are errors naming the function and node).
 * A function whose body holds what Onyx cannot represent (a subgraph attribute, an
 * unsupported dtype) is kept by identity and refuses only if a call must be inlined.
 * Also records the overload each graph node names. *out is NULL when the model has
 * no functions. On failure nothing is kept.
 */
onyx_status onyx__functions_load(struct onyx__load_ctx *ctx, struct Onnx__ModelProto *m,
                                 struct onyx__functions **out);

#endif /* ONYX_CORE_MODEL_FUNCTIONS_H */
