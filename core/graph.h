/*
 * The in-memory model: values, nodes, initializers. Internal to the core.
 *
 * A graph is built by the loader (model_load.c) from an ONNX ModelProto. Session
 * creation then edits it once, in place, through graph_edit.h — the optimization
 * passes (core/optimize/) fold, rewire and remove nodes, and initializers may be
 * freed (data NULL, geometry kept) when nothing reads them any more — and it is
 * immutable from placement on, for the session's life. All strings and arrays are
 * owned by the graph and freed by onyx__graph_free.
 */
#ifndef ONYX_CORE_GRAPH_H
#define ONYX_CORE_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onyx_abi.h"

struct onyx__functions;      /* model-local functions as loaded (model_functions.h) */
struct onyx__function_notes; /* what inlining did with each call (model_functions.h) */

/* A named value: graph input, initializer, or node output. */
typedef struct onyx__value {
  char *name;
  uint32_t dtype;              /* onyx_dtype; UNDEFINED when the model does not say */
  int32_t rank;                /* -1 when unknown */
  int64_t dims[ONYX_MAX_RANK]; /* -1 for a symbolic or unknown dim */
  int32_t producer;            /* node index, or -1 for inputs, initializers and values
                                * whose node an optimization pass removed */
  bool is_input;               /* a graph input that is not an initializer */
  bool is_output;              /* a graph output */
  bool is_initializer;
  /* Initializer data, host memory owned by the graph (dims/rank/dtype filled in,
   * device HOST). data may be NULL for zero elements. */
  onyx_tensor init;
} onyx__value;

typedef struct onyx__node {
  char *name; /* "" when unnamed */
  char *op_type;
  char *domain;  /* "" for ai.onnx */
  int64_t opset; /* the model's opset for this domain */
  size_t input_count;
  int32_t *inputs; /* value index per input, -1 for an empty name */
  size_t output_count;
  int32_t *outputs; /* value index per output, -1 for an empty name */
  onyx_attr *attrs; /* names, strings and arrays owned by the graph */
  size_t attr_count;
} onyx__node;

typedef struct onyx__opset {
  char *domain; /* "" for ai.onnx ("ai.onnx" is normalised to "") */
  int64_t version;
} onyx__opset;

typedef struct onyx__graph {
  char *name;
  onyx__value *values;
  size_t value_count;
  onyx__node *nodes; /* topological order (checked by the loader) */
  size_t node_count;
  int32_t *inputs; /* value indices of graph inputs, model order, initializers excluded */
  size_t input_count;
  int32_t *outputs; /* value indices of graph outputs, model order */
  size_t output_count;
  onyx__opset *opsets;
  size_t opset_count;
  int64_t ir_version;
  /* Name index over values, built by the loader (and rebuilt by graph_edit.c, with the
   * same hash): value_index_cap slots (a power of two, open addressing), each a value
   * index or -1. NULL in a graph built by hand, where onyx__graph_find_value scans the
   * values instead. Owned by the graph. */
  int32_t *value_index;
  size_t value_index_cap;
  /* The model's local functions, NULL when it defines none; a node calling one is an
   * ordinary node until session creation inlines it (onyx__graph_inline_functions),
   * which frees these. Owned by the graph. */
  struct onyx__functions *functions;
  /* What became of each function call (inlined, or kept for a provider), NULL when
   * no node called one. Owned by the graph. */
  struct onyx__function_notes *function_notes;
} onyx__graph;

/* Limits a loader enforces on untrusted files. */
#define ONYX_MODEL_MAX_BYTES (UINT64_C(1) << 34) /* 16 GiB of protobuf */

/*
 * Loads a model from a file. External data must resolve inside the model's folder.
 * On failure returns non-OK, writes a message naming the file and the problem into
 * err, and *out_graph is untouched.
 */
onyx_status onyx__model_load_file(const char *path, onyx__graph **out_graph, char *err,
                                  size_t err_cap);

/*
 * Loads a model from bytes. `base_dir` is where external data is looked up (NULL
 * forbids external data). `what` names the source in messages ("<bytes>" if NULL).
 */
onyx_status onyx__model_load_bytes(const void *bytes, size_t size, const char *base_dir,
                                   const char *what, onyx__graph **out_graph, char *err,
                                   size_t err_cap);

void onyx__graph_free(onyx__graph *graph); /* NULL-safe */

/* Finds a value by name; -1 when absent. */
int32_t onyx__graph_find_value(const onyx__graph *graph, const char *name);

/* The opset version the model imports for `domain`, or 0 when it imports none. */
int64_t onyx__graph_opset(const onyx__graph *graph, const char *domain);

/*
 * Reads one TensorProto file (an ONNX test's input_K.pb / output_K.pb) into host
 * memory. *out receives dtype, rank, dims and malloc'ed data (caller frees
 * out->data); *out_name (may be NULL) receives the malloc'ed tensor name or NULL.
 */
onyx_status onyx__tensor_proto_load_file(const char *path, onyx_tensor *out, char **out_name,
                                         char *err, size_t err_cap);

#endif /* ONYX_CORE_GRAPH_H */
