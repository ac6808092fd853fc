/*
 * Private to model_functions.c (reading FunctionProtos) and function_inline.c
 * (inlining calls): the loaded form of a function, and a string-keyed hash map.
 */
#ifndef ONYX_CORE_MODEL_FUNCTIONS_IMPL_H
#define ONYX_CORE_MODEL_FUNCTIONS_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model_functions.h"

/* A body node's attribute whose value is one of the function's attributes. */
typedef struct onyx__fn_ref {
  char *name;    /* the attribute's name on the body node */
  char *ref;     /* the function attribute it takes its value from */
  uint32_t type; /* the onyx_attr_type it declares; UNDEFINED when the file says none */
} onyx__fn_ref;

/* One node of a function body, names as the file writes them. */
typedef struct onyx__fn_node {
  char *name; /* "" when unnamed */
  char *op_type;
  char *domain;   /* "" for ai.onnx */
  char *overload; /* "" when none */
  char **inputs;  /* "" marks an absent input */
  size_t input_count;
  char **outputs; /* "" marks an unused output */
  size_t output_count;
  onyx_attr *attrs; /* attributes with a value */
  size_t attr_count;
  onyx__fn_ref *refs; /* attribute references */
  size_t ref_count;
} onyx__fn_node;

/* A value type from the function's value_info. */
typedef struct onyx__fn_type {
  char *name;     /* owned */
  uint32_t dtype; /* UNDEFINED when not given */
  int32_t rank;   /* -1 when not given */
  int64_t dims[ONYX_MAX_RANK];
} onyx__fn_type;

typedef struct onyx__function {
  char *name;
  char *domain; /* "" for ai.onnx */
  char *overload;
  char *label; /* "domain::name" (+ " overload 'x'") for messages and notes */
  char **inputs;
  size_t input_count;
  char **outputs;
  size_t output_count;
  char **params; /* attribute parameters without a default */
  size_t param_count;
  onyx_attr *defaults; /* attribute parameters with their default */
  size_t default_count;
  onyx__fn_node *nodes;
  size_t node_count;
  onyx__opset *opsets;
  size_t opset_count;
  onyx__fn_type *types; /* sorted by name, one entry per name */
  size_t type_count;
  /* Why the body cannot be inlined (it holds what Onyx cannot represent), or NULL.
   * Such a function has no body; a call to it must be claimed by a provider. */
  char *unusable;
} onyx__function;

struct onyx__functions {
  onyx__function *fns;
  size_t count;
  size_t *order; /* indices of fns sorted by (domain, name, overload) */
  /* Per node of the model's graph, the overload it names, NULL for none. */
  char **node_overloads;
  size_t node_count;
};

/* The function (domain, name, overload) names, or NULL. */
const onyx__function *onyx__functions_find(const struct onyx__functions *lib, const char *domain,
                                           const char *name, const char *overload);

/* The type value_info gives `name` in `fn`, or NULL. */
const onyx__fn_type *onyx__function_type(const onyx__function *fn, const char *name);

/* Copies `src` into the zeroed `dst` under `name`, deeply. On failure `dst` holds
 * only what onyx__attrs_free releases. Returns false when out of memory. */
bool onyx__attr_copy(const onyx_attr *src, const char *name, onyx_attr *dst);

/* ------------------------------------------------------------- name map */

/* String → int32 map with open addressing. Keys are borrowed: they must outlive it. */
typedef struct onyx__name_map {
  const char **keys;
  int32_t *vals;
  size_t cap; /* a power of two, or 0 */
  size_t count;
} onyx__name_map;

/* Sized for `expected` entries; false when out of memory. */
bool onyx__name_map_init(onyx__name_map *m, size_t expected);
/* Sets key → val (replacing an existing entry); grows as needed; false when out of memory. */
bool onyx__name_map_put(onyx__name_map *m, const char *key, int32_t val);
/* Finds key; false when absent. */
bool onyx__name_map_get(const onyx__name_map *m, const char *key, int32_t *out_val);
void onyx__name_map_free(onyx__name_map *m);

#endif /* ONYX_CORE_MODEL_FUNCTIONS_IMPL_H */
