/*
 * Onyx ABI v2 — providers and kernels.
 *
 * Published: every name in this file. This is the only header set a provider
 * includes; it depends on <stdint.h>, <stddef.h> and <stdbool.h> alone and compiles
 * as C11 and as C++.
 *
 * Rules (docs/abi.md says more):
 * - A provider exports exactly one symbol, ONYX_PROVIDER_ENTRY_SYMBOL.
 * - Structs that cross the boundary begin with struct_size and version. Fields are
 *   append-only; their offsets are pinned by static_assert in
 *   tests/core/abi_layout_test.c. A reader that gets a smaller struct_size treats
 *   missing trailing fields as NULL / 0 (ONYX_HAS_FIELD checks).
 * - v2 appended onyx_node_info.input_constants and .input_constant_copied, and
 *   onyx_host_table.set_error; every other struct is as in v1. The core speaks v1
 *   and v2.
 * - Optional function pointers may be NULL; the other side checks before calling.
 * - Nothing unwinds across the boundary; a failed call leaves its outputs untouched.
 */
#ifndef ONYX_PROVIDER_H
#define ONYX_PROVIDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onyx_status.h"
#include "onyx_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI version this header describes. The core offers its highest; the provider
 * answers with the one it will speak. */
#define ONYX_ABI_VERSION 2u

/* True when the struct `ptr` points at (which begins with struct_size) is large
 * enough to hold `field` of `type`: a reader checks this before touching a field
 * appended after v1, e.g. ONYX_HAS_FIELD(node, onyx_node_info, input_constants). */
#define ONYX_HAS_FIELD(ptr, type, field)                                                           \
  ((ptr)->struct_size >= offsetof(type, field) + sizeof(((const type *)0)->field))

/* The single exported symbol of a provider library. */
#define ONYX_PROVIDER_ENTRY_SYMBOL "onyx_provider_entry"

/* ------------------------------------------------------------------ attributes */

typedef enum onyx_attr_type {
  ONYX_ATTR_UNDEFINED = 0,
  ONYX_ATTR_FLOAT = 1,
  ONYX_ATTR_INT = 2,
  ONYX_ATTR_STRING = 3,
  ONYX_ATTR_TENSOR = 4,
  ONYX_ATTR_FLOATS = 6,
  ONYX_ATTR_INTS = 7,
  ONYX_ATTR_STRINGS = 8
} onyx_attr_type; /* values equal ONNX AttributeProto.AttributeType */

/* One node attribute. Owned by the core; valid from kernel create to destroy. */
typedef struct onyx_attr {
  const char *name;           /* attribute name, NUL-terminated */
  uint32_t type;              /* onyx_attr_type */
  float f;                    /* FLOAT */
  int64_t i;                  /* INT */
  const char *s;              /* STRING (bytes, also NUL-terminated) */
  size_t s_len;               /* STRING length in bytes */
  const float *floats;        /* FLOATS */
  const int64_t *ints;        /* INTS */
  const char *const *strings; /* STRINGS */
  size_t count;               /* element count of FLOATS / INTS / STRINGS */
  const onyx_tensor *tensor;  /* TENSOR, host memory */
} onyx_attr;

/* ------------------------------------------------------------------ nodes */

/* What a kernel learns about its node at create time. Owned by the core. */
typedef struct onyx_node_info {
  uint32_t struct_size;
  uint32_t version;
  const char *name;   /* node name (may be ""), for messages */
  const char *domain; /* "" for the ONNX domain */
  const char *op_type;
  int64_t opset;      /* opset version of the node's domain in the model */
  size_t input_count; /* inputs named by the node, trailing empty names included */
  size_t output_count;
  const bool *input_present;    /* [input_count]: false where the name is empty */
  const bool *output_present;   /* [output_count] */
  const uint32_t *input_dtypes; /* [input_count]: onyx_dtype, UNDEFINED if unknown */
  const onyx_attr *attrs;
  size_t attr_count;
  /* fields above: v1 */
  /* (since v2) [input_count]: the host tensor of input i when it is a constant of
   * the session — an initializer that is not a graph input (after the core's constant
   * folding, Constant outputs are initializers too) — and NULL where input i is
   * computed, a graph input or absent. Owned by the core; read it during create (to
   * prepack it, say). Compute still receives the input as usual. The array itself may
   * be NULL (a node created for constant folding, or a v1 core: check struct_size). */
  const onyx_tensor *const *input_constants;
  /* (since v2) [input_count], written by the kernel during create only (may be NULL:
   * then the core offers no release). A kernel that has made its own copy of constant
   * input i (a prepacked B, in memory from host->mem_alloc booked as
   * ONYX_REQUESTER_WEIGHTS) and will never read the original's data again sets entry i
   * to true before create returns OK. When no other reader needs the initializer the
   * core frees it and unbooks its bytes, and does not copy it to the kernel's device;
   * compute then receives input i with its geometry, device HOST and data NULL.
   * Ignored when create fails. */
  bool *input_constant_copied;
  /* fields above: v2 */
} onyx_node_info;

/* ------------------------------------------------------------------ workspace */

typedef enum onyx_lifetime {
  ONYX_LIFETIME_STEP = 0,   /* lives for one run of the graph */
  ONYX_LIFETIME_SESSION = 1 /* persists across runs, grows, freed with the session */
} onyx_lifetime;

/* Most regions a v1 requirement may name. */
#define ONYX_MAX_WORKSPACE_REGIONS 8

/* One named scratch region. `name` must be a string literal (static storage). */
typedef struct onyx_workspace_region {
  const char *name;
  uint64_t bytes;     /* 0 means the region is not used on this route */
  uint32_t alignment; /* power of two; 0 means 64 */
  uint32_t lifetime;  /* onyx_lifetime */
} onyx_workspace_region;

/* A kernel's composite workspace requirement for one input geometry. The core
 * zero-fills it (count = 0) before calling the kernel. */
typedef struct onyx_workspace_requirement {
  uint32_t struct_size;
  uint32_t version;
  uint32_t count;
  onyx_workspace_region regions[ONYX_MAX_WORKSPACE_REGIONS];
  /* fields above: v1 */
} onyx_workspace_requirement;

/* A view of one region, carved by the core from a governor grant, in the order the
 * requirement listed them. A kernel must check `bytes` against what it needs and
 * return ONYX_STATUS_WORKSPACE_TOO_SMALL, writing nothing, when it is short. */
typedef struct onyx_workspace_view {
  const char *name;
  void *data;
  uint64_t bytes;
} onyx_workspace_view;

/* ------------------------------------------------------------------ compute */

typedef struct onyx_compute_ctx onyx_compute_ctx;

/* Per-call context handed to compute. Owned by the core; valid during the call. */
struct onyx_compute_ctx {
  uint32_t struct_size;
  uint32_t version;
  void *core_data; /* opaque to the kernel */
  void *stream;    /* the provider's stream (cudaStream_t on CUDA), NULL on the host */
  /* Allocates output `index` with the given geometry on the kernel's device and
   * returns a view of it; the core owns the memory. Each output at most once. */
  onyx_status (*alloc_output)(onyx_compute_ctx *ctx, size_t index, uint32_t dtype, uint32_t rank,
                              const int64_t *dims, onyx_tensor **out_view);
  /* Declares that output `index` is input `input_index` itself (same memory and
   * geometry), as a shared KV buffer is. */
  onyx_status (*alias_output)(onyx_compute_ctx *ctx, size_t index, size_t input_index);
  /* Records a message for the status the kernel is about to return (printf-style);
   * the core prefixes node and op. */
  void (*set_error)(onyx_compute_ctx *ctx, const char *fmt, ...)
#if defined(__GNUC__)
      __attribute__((format(printf, 2, 3)))
#endif
      ;
  const onyx_workspace_view *workspace; /* one view per requirement region */
  size_t workspace_count;
  /* fields above: v1 */
};

/* ------------------------------------------------------------------ kernels */

/*
 * A kernel registration: (domain, op_type, opset range, type constraint) → callbacks.
 * Tables are static data of the provider and outlive every kernel state.
 */
typedef struct onyx_kernel_table {
  uint32_t struct_size;
  uint32_t version;
  const char *domain; /* "" for ONNX, "com.microsoft", ... */
  const char *op_type;
  int64_t since_opset; /* first opset this kernel implements */
  int64_t until_opset; /* last one, inclusive; 0 means no upper bound */
  uint32_t type_input; /* input whose dtype the mask constrains */
  uint64_t type_mask;  /* ONYX_DTYPE_BIT set; 0 accepts any dtype */
  /* Optional finer check at placement (attributes, optional inputs); NULL accepts.
   * On false, `reason` (may be NULL) receives a short explanation. */
  bool (*supports)(const onyx_node_info *node, char *reason, size_t reason_cap);
  /* Builds per-node state from attributes. On failure writes a message into `err`
   * and returns non-OK; *out_state is untouched. NULL means stateless. */
  onyx_status (*create)(void *provider_state, const onyx_node_info *node, void **out_state,
                        char *err, size_t err_cap);
  void (*destroy)(void *state); /* NULL-safe; may be NULL when create is NULL */
  /* Optional: the workspace this node needs for these inputs (geometry only: data
   * may be NULL). Pure: the same geometry gives the same requirement. NULL = none. */
  onyx_status (*workspace)(void *state, const onyx_tensor *inputs, size_t input_count,
                           onyx_workspace_requirement *out_req);
  /* Runs the node. Absent optional inputs are NULL entries in `inputs`. */
  onyx_status (*compute)(void *state, onyx_compute_ctx *ctx, const onyx_tensor *const *inputs,
                         size_t input_count);
  /* Optional: output geometry from input geometry, so the core can plan memory
   * without running. `inputs[i].data` is non-NULL only for host integer tensors
   * whose values the planner knows (shape arithmetic); absent inputs have rank 0 and
   * dtype UNDEFINED. Fill dtype, rank and dims of each named output; return
   * UNSUPPORTED when a shape depends on values the planner lacks.
   * Output values: on entry `outputs[k].data` may point at a host buffer of 512
   * bytes (64 int64) owned by the core, valid during the call. A kernel that knows
   * the values of an int64 or int32 output that fits there (Shape knows its output
   * from geometry alone) may write them, densely in the output's dtype, and leave
   * data pointing at that buffer; the core then treats them as known values. In
   * every other case the kernel sets data to NULL (assigning a whole zeroed struct
   * does), which the core reads as "geometry only". */
  onyx_status (*infer)(void *state, const onyx_tensor *inputs, size_t input_count,
                       onyx_tensor *outputs, size_t output_count);
  /* Inputs the kernel reads on the host although its provider's device is not the
   * host: small integer tensors whose values size the work (a shape, axes, starts and
   * ends, a total sequence length). Bit i set: compute receives input i in host
   * memory (device ONYX_DEVICE_HOST) — the core keeps it there, or moves it there,
   * and never copies it to the device — so the kernel reads the values without a
   * synchronising copy. Other inputs are unaffected; infer and workspace see the same
   * geometry either way. Inputs 64 and above cannot be marked. 0 for host providers,
   * and read as 0 from a table whose struct_size ends before this field. */
  uint64_t host_inputs; /* bit i set: input i is wanted in host memory (shape values,
                         * axes, lengths); the core keeps or moves it there */
  /* Inputs whose geometry alone the kernel reads (Shape, Size): bit i set, input i
   * is handed over wherever it lies — device memory included — and never copied for
   * the kernel; compute must not touch its data. Read as 0 from an older table. */
  uint64_t geometry_inputs;
  /* fields above: v1 */
} onyx_kernel_table;

/* ------------------------------------------------------------------ host table */

typedef enum onyx_log_level {
  ONYX_LOG_ERROR = 0,
  ONYX_LOG_WARN = 1,
  ONYX_LOG_INFO = 2,
  ONYX_LOG_DEBUG = 3
} onyx_log_level;

/* Who a governed allocation is for (the governor's requesters). */
typedef enum onyx_requester {
  ONYX_REQUESTER_WEIGHTS = 0,
  ONYX_REQUESTER_KV_CACHE = 1,
  ONYX_REQUESTER_WORKSPACE_SESSION = 2,
  ONYX_REQUESTER_WORKSPACE_STEP = 3,
  ONYX_REQUESTER_ACTIVATIONS = 4,
  ONYX_REQUESTER_COUNT_ = 5
} onyx_requester;

/* What the core offers a provider. Owned by the core; valid until close. */
typedef struct onyx_host_table {
  uint32_t struct_size;
  uint32_t version;
  void *host_data; /* pass back as the first argument */
  void (*log)(void *host_data, uint32_t level, const char *message);
  /* Governed memory on the provider's device: every byte a provider keeps beyond a
   * call goes through these, so the governor sees it. `label` names the owner. */
  onyx_status (*mem_alloc)(void *host_data, uint32_t requester, uint64_t bytes, uint32_t alignment,
                           const char *label, void **out_ptr);
  void (*mem_free)(void *host_data, void *ptr); /* NULL-safe */
  /* Runs fn(arg, i) for i in [0, n) on the core's threads; returns when all are done.
   * May be NULL, in which case the provider loops itself. */
  void (*parallel_for)(void *host_data, size_t n, void (*fn)(void *arg, size_t i), void *arg);
  uint32_t num_threads; /* threads parallel_for uses (>= 1) */
  /* fields above: v1 */
  /* (since v2) The message channel of the kernel callbacks that have none of their
   * own — infer and workspace (compute has ctx->set_error; create and supports write
   * into their err buffers). Called during such a callback, before it returns a
   * non-OK status, with the reason (printf-style; 511 characters are kept); the core
   * prefixes node and op and hands it to the user with the status, where planning
   * or a run fails. The reason belongs to the callback running on the calling
   * thread. Absent from a v1 core's table: check ONYX_HAS_FIELD(host,
   * onyx_host_table, set_error) and NULL. */
  void (*set_error)(void *host_data, const char *fmt, ...)
#if defined(__GNUC__)
      __attribute__((format(printf, 2, 3)))
#endif
      ;
  /* fields above: v2 */
} onyx_host_table;

/* ------------------------------------------------------------------ providers */

/* One `key = value` option from the provider's plugins.ini section. */
typedef struct onyx_option {
  const char *key;
  const char *value;
} onyx_option;

/* Virtual memory operations of a device (CUDA VMM), from which the core builds a
 * governor backend for mapped zones that grow in place. All optional as a whole:
 * a provider without them gets zones through plain allocation and copy. */
typedef struct onyx_vmm_table {
  uint32_t struct_size;
  uint32_t version;
  /* Physical allocation granularity in bytes (a power of two). */
  onyx_status (*granularity)(void *state, uint64_t *out_bytes);
  /* Reserves `bytes` of device address space with nothing behind it. */
  onyx_status (*reserve)(void *state, uint64_t bytes, void **out_base);
  void (*unreserve)(void *state, void *base, uint64_t bytes);
  /* Creates one physical block of `bytes`; *out_handle is opaque and non-NULL. */
  onyx_status (*create)(void *state, uint64_t bytes, void **out_handle);
  void (*release)(void *state, void *handle, uint64_t bytes);
  /* Maps a block at base + offset, then grants the device read/write access. */
  onyx_status (*map)(void *state, void *base, uint64_t offset, uint64_t bytes, void *handle);
  onyx_status (*set_access)(void *state, void *base, uint64_t offset, uint64_t bytes);
  void (*unmap)(void *state, void *base, uint64_t offset, uint64_t bytes);
  /* fields above: v1 */
} onyx_vmm_table;

/* Capture and replay of the work a run queues on the provider's stream (CUDA
 * graphs). The core captures a steady-state run (a decode step) once and replays it;
 * docs/graphs.md describes when. All optional as a whole. While a capture is open
 * nothing queued on the stream executes: it is recorded. Kernels must not sync,
 * allocate or copy from pageable host memory then (the core keeps its own copies,
 * allocations and syncs out of a capture); host values a kernel reads at compute time
 * (its host_inputs) are recorded as they were. */
typedef struct onyx_graph_table {
  uint32_t struct_size;
  uint32_t version;
  /* Starts recording the provider's stream. */
  onyx_status (*begin)(void *state);
  /* Stops recording. keep: instantiate what was recorded into *out_graph (opaque,
   * non-NULL); !keep: discard it. A capture that the device invalidated (a kernel
   * did something not capturable) returns non-OK and keeps nothing. */
  onyx_status (*end)(void *state, bool keep, void **out_graph);
  /* Queues one replay of the graph on the provider's stream. */
  onyx_status (*launch)(void *state, void *graph);
  void (*destroy)(void *state, void *graph); /* NULL-safe */
  /* fields above: v1 */
} onyx_graph_table;

typedef struct onyx_provider_table {
  uint32_t struct_size;
  uint32_t abi_version; /* the version this table follows */
  const char *name;     /* short default name, e.g. "cpu" */
  uint32_t device;      /* onyx_device_kind of the memory its kernels use */
  /* Opens a provider instance. On failure writes a message into `err`. */
  onyx_status (*open)(const onyx_host_table *host, const onyx_option *options, size_t option_count,
                      void **out_state, char *err, size_t err_cap);
  void (*close)(void *state); /* NULL-safe */
  /* Optional: is the device usable? On false, `why` says why in one line. */
  bool (*probe)(void *state, char *why, size_t why_cap);
  const onyx_kernel_table *const *kernels;
  size_t kernel_count;
  /* Device memory (NULL for host providers, whose memory the core provides).
   * device_free may be called while work queued on the stream still reads the block:
   * the provider either waits for it or frees in stream order (the memory reused only
   * by work queued after the free). Freed memory goes back to the device by the next
   * sync at the latest: no pool or cache keeps it (the governor released its booking). */
  onyx_status (*device_alloc)(void *state, uint64_t bytes, void **out_ptr);
  void (*device_free)(void *state, void *ptr);
  /* Copies between host and this provider's device, or within the device.
   * Geometry and dtype of dst and src match. NULL for host providers.
   * Ordering: the copy is queued on the provider's stream. It returns once the source
   * may be reused or freed (a host source has been read or staged; a device source is
   * read in stream order, before anything queued after the copy — a later device_free
   * included). The destination is ready for work queued after it on the stream; a
   * host destination is ready for the host only after sync. The core syncs after a
   * copy to the host and never after a copy to the device. */
  onyx_status (*copy)(void *state, onyx_tensor *dst, const onyx_tensor *src);
  /* Waits for work queued on the provider's stream. May be NULL. */
  onyx_status (*sync)(void *state);
  /* Device virtual memory for mapped zones; NULL when the device has none. The
   * core calls sync before every unmap. */
  const onyx_vmm_table *vmm;
  /* Bytes of device memory the provider may use (the governor tier's default
   * limit when plugins.ini sets none); NULL for host providers. */
  onyx_status (*memory_capacity)(void *state, uint64_t *out_bytes);
  /* The stream kernels run on (cudaStream_t), handed to compute as ctx->stream.
   * NULL for host providers. */
  void *(*stream)(void *state);
  /* Stream capture and replay; NULL when the device has none. */
  const onyx_graph_table *graphs;
  /* fields above: v1 */
} onyx_provider_table;

/*
 * The entry point, exported as ONYX_PROVIDER_ENTRY_SYMBOL.
 * core_max_abi: the highest ABI version the core speaks.
 * out_abi: receives the version the provider will speak — or, when it declines with
 *   ONYX_STATUS_ABI_MISMATCH, the lowest version it could speak.
 * out_table: static table, valid until the library is unloaded.
 */
typedef onyx_status (*onyx_provider_entry_fn)(uint32_t core_max_abi, uint32_t *out_abi,
                                              const onyx_provider_table **out_table);

#ifdef __cplusplus
}
#endif

#endif /* ONYX_PROVIDER_H */
