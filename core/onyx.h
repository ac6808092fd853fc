/*
 * Onyx public API — for applications that run models.
 *
 * Published: every onyx_* name declared here. Objects are opaque handles; each
 * destroy/free accepts NULL. Unless a function says otherwise, handles are not
 * thread-safe: use one session from one thread at a time.
 *
 * Errors: fallible calls return onyx_status and, when `out_error` is non-NULL, store
 * an onyx_error with a message naming the thing (file, node, op, input, bytes) that
 * the caller frees with onyx_error_free. On failure no out-parameter is written. Out
 * of memory, the error still comes: a static one with the status whose message says
 * the rest was lost (onyx_error_free accepts it). docs/reliability.md says what
 * hostile input and failed allocations may and may not do.
 */
#ifndef ONYX_H
#define ONYX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onyx_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define ONYX_API __attribute__((visibility("default")))
#else
#define ONYX_API
#endif

/* ------------------------------------------------------------------ errors */

typedef struct onyx_error onyx_error;

ONYX_API onyx_status onyx_error_status(const onyx_error *error);
ONYX_API const char *onyx_error_message(const onyx_error *error); /* owned by error */
ONYX_API void onyx_error_free(onyx_error *error);
/* Stores a new error with `status` and a copy of `message` (NULL: the status's text)
 * in *out_error when out_error is non-NULL, and returns `status`: for libraries built
 * over this API (genai/) whose callers read one error channel. */
ONYX_API onyx_status onyx_error_create(onyx_error **out_error, onyx_status status,
                                       const char *message);

/* ------------------------------------------------------------------ runtime */

/* A runtime: the providers a plugins.ini selects, loaded and opened, plus the memory
 * governor. Thread-safe once created; outlives every session made from it. */
typedef struct onyx_runtime onyx_runtime;

/* Loads `config_path` (plugins.ini) and every enabled provider in it. */
ONYX_API onyx_status onyx_runtime_create(const char *config_path, onyx_runtime **out_runtime,
                                         onyx_error **out_error);
ONYX_API void onyx_runtime_destroy(onyx_runtime *runtime);

/* Provider instances in placement order (the fallback last): one per opened device, so
 * a v3 provider with two devices appears twice under one name. */
ONYX_API size_t onyx_runtime_provider_count(const onyx_runtime *runtime);
ONYX_API const char *onyx_runtime_provider_name(const onyx_runtime *runtime, size_t index);
/* The instance's device, as its memory tier is named ("host", "cuda:0"). */
ONYX_API const char *onyx_runtime_provider_device(const onyx_runtime *runtime, size_t index);
/* The instance's kernel registrations (for listing tools): onyx_runtime_kernel gives a
 * registration made as a v1/v2 table, onyx_runtime_kernel_def one made as a v3
 * definition; the other is NULL. */
ONYX_API size_t onyx_runtime_kernel_count(const onyx_runtime *runtime, size_t provider);
ONYX_API const onyx_kernel_table *onyx_runtime_kernel(const onyx_runtime *runtime, size_t provider,
                                                      size_t index);
ONYX_API const onyx_kernel_def *onyx_runtime_kernel_def(const onyx_runtime *runtime,
                                                        size_t provider, size_t index);

/* Where the runtime found a provider (docs/writing-a-provider.md, "Dropping it in"). */
typedef enum onyx_provider_origin {
  ONYX_PROVIDER_ORIGIN_CONFIG = 0,  /* a [provider.NAME] section of plugins.ini */
  ONYX_PROVIDER_ORIGIN_DROP_IN = 1, /* a fragment in the providers.d/ beside plugins.ini */
  ONYX_PROVIDER_ORIGIN_PATH = 2     /* a fragment or libonyx_NAME.so in $ONYX_PROVIDER_PATH */
} onyx_provider_origin;

/* What the runtime did with a provider it found. */
typedef enum onyx_provider_state {
  ONYX_PROVIDER_STATE_LOADED = 0,   /* opened: a provider of onyx_runtime_provider_name */
  ONYX_PROVIDER_STATE_DISABLED = 1, /* enabled = false */
  ONYX_PROVIDER_STATE_DECLINED = 2, /* its probe found no usable device */
  ONYX_PROVIDER_STATE_FAILED = 3,   /* a drop-in that did not load (not strict: skipped) */
  ONYX_PROVIDER_STATE_SHADOWED = 4  /* a drop-in whose name or library was listed already */
} onyx_provider_state;

/* One provider the runtime found. Strings are owned by the runtime. */
typedef struct onyx_provider_found {
  uint32_t struct_size; /* the caller sets sizeof(onyx_provider_found) */
  const char *name;     /* its [provider.NAME], or NAME of a bare libonyx_NAME.so */
  const char *library;  /* the library path, resolved */
  const char *file;     /* the file that named it; for a bare library, its folder */
  int32_t line;         /* its section's line in `file`; 0 for a bare library */
  uint32_t origin;      /* onyx_provider_origin */
  uint32_t state;       /* onyx_provider_state */
  const char *reason;   /* why it is not loaded; "" when loaded */
} onyx_provider_found;

/* Everything discovery found, loaded or not: plugins.ini's sections in file order,
 * then providers.d/ fragments, then $ONYX_PROVIDER_PATH, then the shadowed drop-ins. */
ONYX_API size_t onyx_runtime_found_count(const onyx_runtime *runtime);
/* Fills *out for entry `index`; INVALID_ARGUMENT for a bad index or struct_size. */
ONYX_API onyx_status onyx_runtime_found(const onyx_runtime *runtime, size_t index,
                                        onyx_provider_found *out);

/* Bytes in use and the peak since creation per requester (indexed by
 * onyx_requester: weights, kv_cache, workspace_session, workspace_step,
 * activations), summed over tiers. Either array may be NULL. */
ONYX_API void onyx_runtime_memory_usage(const onyx_runtime *runtime,
                                        uint64_t used[ONYX_REQUESTER_COUNT_],
                                        uint64_t peak[ONYX_REQUESTER_COUNT_]);
/* The requester's name ("kv_cache"), static storage. */
ONYX_API const char *onyx_requester_name(uint32_t requester);

/* Writes the governor's snapshot as JSON to `stream` (a FILE *). */
ONYX_API void onyx_runtime_write_memory_json(const onyx_runtime *runtime, void *stream);

/* ------------------------------------------------------------------ sessions */

typedef struct onyx_session onyx_session;

typedef struct onyx_session_options {
  uint32_t struct_size; /* sizeof(onyx_session_options) */
  bool print_placement; /* print which provider runs each node to stderr at creation */
  /* Time every node of every run, and planning and graph replays; a device node is
   * waited for so that its time is its own (this serialises the device: profile to
   * find where time goes, not to measure speed). onyx_session_write_profile prints it. */
  bool profile;
  /* Graph optimizations to skip at creation (docs/optimizations.md): NULL or "" runs
   * every pass, "all" none, otherwise a comma-separated list of pass names
   * (onyx_optimization_name), e.g. "constant_folding,identity_elimination". An unknown
   * name fails creation with INVALID_ARGUMENT naming it. Read only during creation. */
  const char *disable_optimizations;
} onyx_session_options;

/* Creates a session for the model at `path`; external data resolves in its folder.
 * `options` may be NULL for defaults. */
ONYX_API onyx_status onyx_session_create(onyx_runtime *runtime, const char *path,
                                         const onyx_session_options *options,
                                         onyx_session **out_session, onyx_error **out_error);
/* The same from model bytes (copied; external data is refused). */
ONYX_API onyx_status onyx_session_create_from_bytes(onyx_runtime *runtime, const void *bytes,
                                                    size_t size,
                                                    const onyx_session_options *options,
                                                    onyx_session **out_session,
                                                    onyx_error **out_error);
ONYX_API void onyx_session_destroy(onyx_session *session);
/* Writes the profile of a session created with `profile` to `stream` (a FILE *; NULL
 * for stdout): per node its calls, total, first and mean milliseconds, slowest first. */
ONYX_API void onyx_session_write_profile(const onyx_session *session, void *stream);

/* The graph optimization passes, in the order they run (static strings; NULL past
 * the end): the name disable_optimizations takes and a one-line description. */
ONYX_API size_t onyx_optimization_count(void);
ONYX_API const char *onyx_optimization_name(size_t index);
ONYX_API const char *onyx_optimization_description(size_t index);

/* What one pass did when the session was created. */
typedef struct onyx_optimization_stats {
  uint32_t struct_size;        /* the caller sets sizeof(onyx_optimization_stats) */
  bool ran;                    /* false: disabled */
  uint64_t nodes_removed;      /* nodes the pass took out of the graph */
  uint64_t nodes_folded;       /* of those, computed into initializers (constant folding) */
  uint64_t nodes_skipped;      /* candidates left alone (no host kernel, a result too large) */
  uint64_t bytes_added;        /* initializer bytes made, booked as weights */
  uint64_t bytes_released;     /* initializer bytes freed and unbooked */
  uint64_t weights_peak_bytes; /* initializer bytes the session held at the pass's peak */
  double milliseconds;
} onyx_optimization_stats;

/* Fills *out for pass `index`; INVALID_ARGUMENT for a bad index or struct_size. */
ONYX_API onyx_status onyx_session_optimization_stats(const onyx_session *session, size_t index,
                                                     onyx_optimization_stats *out);

/* Geometry of a graph input or output; dims are -1 where symbolic. */
typedef struct onyx_value_info {
  const char *name; /* owned by the session */
  uint32_t dtype;   /* onyx_dtype */
  int32_t rank;     /* -1 when unknown */
  int64_t dims[ONYX_MAX_RANK];
} onyx_value_info;

ONYX_API size_t onyx_session_input_count(const onyx_session *session);
ONYX_API size_t onyx_session_output_count(const onyx_session *session);
ONYX_API onyx_value_info onyx_session_input_info(const onyx_session *session, size_t index);
ONYX_API onyx_value_info onyx_session_output_info(const onyx_session *session, size_t index);

/* Which provider runs node `index` ("cpu", ...), and the node's op and name. */
ONYX_API size_t onyx_session_node_count(const onyx_session *session);
ONYX_API const char *onyx_session_node_provider(const onyx_session *session, size_t index);
/* The device instance that runs node `index`: its memory tier ("host", "cuda:1"). */
ONYX_API const char *onyx_session_node_device(const onyx_session *session, size_t index);
ONYX_API const char *onyx_session_node_op(const onyx_session *session, size_t index);
ONYX_API const char *onyx_session_node_name(const onyx_session *session, size_t index);

/* Integer attribute `name` of node `index`, or `fallback` when it has none. */
ONYX_API int64_t onyx_session_node_attr_int(const onyx_session *session, size_t index,
                                            const char *name, int64_t fallback);

/* Options for one run. */
typedef struct onyx_run_options {
  uint32_t struct_size; /* sizeof(onyx_run_options) */
  /* Polled between nodes; a true answer cancels the run with ONYX_STATUS_CANCELLED. */
  bool (*should_cancel)(void *user, size_t next_node);
  void *user;
  /* [input_count] or NULL: inputs whose memory kernels may write in place and
   * return as an output (a shared past/present KV buffer). */
  const bool *writable_inputs;
  /* [output_count] or NULL: receives true for each output that is a writable input
   * returned as is — its data is the caller's buffer, not a copy, and must not be
   * freed. When NULL, such outputs are copied like any other. */
  bool *out_borrowed;
  /* Record this run's device work as a graph (a CUDA graph) and replay it on later
   * runs with the same geometry and the same device inputs (a decode step), instead
   * of planning and launching node by node. Where a run cannot be recorded it runs
   * as usual; onyx_session_graph_stats says what happened and why. docs/graphs.md. */
  bool capture_graph;
} onyx_run_options;

/* What the session's device graphs did. */
typedef struct onyx_graph_stats {
  uint32_t struct_size;     /* sizeof(onyx_graph_stats) */
  bool available;           /* one device provider runs this session's device nodes and can
                             * capture: graphs are possible */
  uint64_t captures;        /* graphs recorded */
  uint64_t replays;         /* runs answered by replaying a graph */
  uint64_t invalidations;   /* graphs dropped because a device input they baked in moved
                             * or changed shape (a KV cache grown by copy), or released */
  uint64_t refusals;        /* geometries that could not be recorded (they run as usual) */
  uint64_t reclaims;        /* graphs dropped to give their memory back to the governor (their
                             * memory is a cache, reclaimed before any other) */
  uint64_t held_bytes;      /* device memory the live graphs hold: their activations,
                             * step workspace and staged inputs */
  const char *last_refusal; /* why the last refusal happened, "" when none; owned by
                             * the session, valid until its next run */
} onyx_graph_stats;

ONYX_API void onyx_session_graph_stats(const onyx_session *session, onyx_graph_stats *out);
/* Drops every graph and gives its memory back (counted as invalidations). Call it
 * before freeing or moving a device buffer a graph was recorded with, when the next
 * run will not show the change. */
ONYX_API void onyx_session_release_graphs(onyx_session *session);

/*
 * Runs the graph. `inputs` holds one host tensor per graph input, in
 * onyx_session_input_info order (the caller keeps them alive during the call).
 * On success `out_outputs` (caller-provided array of onyx_session_output_count
 * entries) receives host tensors whose data the caller frees with
 * onyx_tensor_data_free. `options` may be NULL.
 */
ONYX_API onyx_status onyx_session_run(onyx_session *session, const onyx_run_options *options,
                                      const onyx_tensor *inputs, size_t input_count,
                                      onyx_tensor *out_outputs, onyx_error **out_error);

/* ------------------------------------------------------------------ plans */

/* A workspace plan: what every kernel declares for one input geometry, and the
 * peaks the run will reserve. Made without running kernels or allocating. */
typedef struct onyx_plan onyx_plan;

/* One region of one node's requirement. Strings are owned by the session. */
typedef struct onyx_plan_region {
  size_t node; /* node index */
  const char *node_name;
  const char *op_type;
  const char *provider; /* provider running the node */
  const char *region;   /* the kernel's name for the region */
  uint64_t bytes;
  uint32_t alignment;
  uint32_t lifetime; /* onyx_lifetime */
  uint64_t offset;   /* within the node's block of that lifetime */
} onyx_plan_region;

/*
 * Plans a run with these inputs (host tensors as for onyx_session_run; only the
 * geometry is used, plus the values of integer inputs for shape arithmetic).
 * Fails with UNSUPPORTED naming the node when a kernel cannot say its output shapes.
 */
ONYX_API onyx_status onyx_session_plan(onyx_session *session, const onyx_tensor *inputs,
                                       size_t input_count, onyx_plan **out_plan,
                                       onyx_error **out_error);
ONYX_API void onyx_plan_destroy(onyx_plan *plan);
ONYX_API size_t onyx_plan_region_count(const onyx_plan *plan);
ONYX_API onyx_plan_region onyx_plan_region_at(const onyx_plan *plan, size_t index);
/* STEP: the peak block per provider, reused by every node of a run. SESSION: the
 * sum of the per-node persistent blocks. Summed over providers whose memory is in
 * `tier` ("host", "cuda:0"); NULL sums all tiers. */
ONYX_API uint64_t onyx_plan_bytes(const onyx_plan *plan, uint32_t lifetime, const char *tier);
/* Asks the governor whether the plan fits now, reserving nothing. OK, or
 * TIER_EXHAUSTED with the numbers in *out_error. */
ONYX_API onyx_status onyx_plan_check(const onyx_plan *plan, onyx_error **out_error);
/* Prints the plan per node and region, then the peaks. `stream` is a FILE *. */
ONYX_API void onyx_plan_print(const onyx_plan *plan, void *stream);

/* ------------------------------------------------------------------ KV cache */

/*
 * A governed KV cache for decoder loops: per layer a key and a value buffer in the
 * GroupQueryAttention past/present layout, shared between past and present (the
 * kernel writes new tokens in place). Its memory is booked as kv_cache. Growth is
 * in place through mapped zones (the base address never moves, 0 bytes copied), or
 * by allocate-and-copy into a larger capacity bucket; both count growth events
 * and bytes moved.
 */
typedef struct onyx_kv_cache onyx_kv_cache;

typedef enum onyx_kv_growth {
  ONYX_KV_GROWTH_IN_PLACE = 0, /* mapped zones; falls back to REALLOC where impossible */
  ONYX_KV_GROWTH_REALLOC = 1   /* allocate a larger bucket and copy */
} onyx_kv_growth;

typedef struct onyx_kv_cache_options {
  uint32_t struct_size; /* sizeof(onyx_kv_cache_options) */
  uint32_t layers;      /* decoder layers (a key and a value buffer each) */
  int64_t batch;
  int64_t kv_heads;
  int64_t head_size;
  uint32_t dtype;       /* onyx_dtype of the cache */
  uint32_t layout;      /* 0: BNSH (head-major), 1: BSNH (seq-major) */
  int64_t max_length;   /* tokens it may ever hold */
  uint32_t growth;      /* onyx_kv_growth */
  const char *provider; /* provider whose device holds it (its first instance), or one
                         * device by its tier name ("cuda:1"); NULL: host memory */
} onyx_kv_cache_options;

ONYX_API onyx_status onyx_kv_cache_create(onyx_runtime *runtime,
                                          const onyx_kv_cache_options *options,
                                          onyx_kv_cache **out_cache, onyx_error **out_error);
ONYX_API void onyx_kv_cache_destroy(onyx_kv_cache *cache);
/* Makes room for `length` tokens. All or nothing: a refusal (TIER_EXHAUSTED with
 * the governor's numbers) leaves the cache as it was. Views stay valid across an
 * in-place growth; after a realloc growth take them again. */
ONYX_API onyx_status onyx_kv_cache_reserve(onyx_kv_cache *cache, int64_t length,
                                           onyx_error **out_error);
/* Prepare-only: would `length` tokens fit now? Reserves nothing. */
ONYX_API onyx_status onyx_kv_cache_check(onyx_kv_cache *cache, int64_t length,
                                         onyx_error **out_error);
/* Views of layer `layer`'s key and value buffers: dims (B, Nkv, L, H) where L is the
 * buffer's capacity in tokens (its stride); bytes per the layout. */
ONYX_API onyx_status onyx_kv_cache_views(const onyx_kv_cache *cache, uint32_t layer,
                                         onyx_tensor *out_key, onyx_tensor *out_value);

typedef struct onyx_kv_cache_stats {
  bool in_place;            /* growing through mapped zones */
  int64_t capacity;         /* tokens that fit now */
  int64_t view_length;      /* L of the views */
  uint64_t committed_bytes; /* memory behind the cache now */
  uint64_t growth_events;   /* reserves that grew the cache */
  uint64_t bytes_moved;     /* KV bytes copied by growth (0 in place) */
} onyx_kv_cache_stats;

ONYX_API void onyx_kv_cache_get_stats(const onyx_kv_cache *cache, onyx_kv_cache_stats *out);

/* Frees data returned by onyx_session_run. NULL-safe. */
ONYX_API void onyx_tensor_data_free(void *data);

#ifdef __cplusplus
}
#endif

#endif /* ONYX_H */
