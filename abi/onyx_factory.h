/*
 * Onyx ABI v3 — a provider as a factory of device instances.
 *
 * Published: every name in this file. A v3 provider exports ONYX_PROVIDER_FACTORY_SYMBOL
 * and hands out a factory; the core asks it which devices it can open, opens one
 * instance per device it wants, and each instance registers its own kernels — so a
 * kernel can be offered on one device and not on another (compute capability), and two
 * devices of one provider get a governor tier each ("cuda:0", "cuda:1").
 *
 * Every v3 callback has the same error channel: it returns an onyx_status and, before
 * a non-OK return, may say why through the onyx_sink it was handed. The core prefixes
 * provider, device, node and op and hands the words to the user with the status.
 *
 * The v1/v2 contract (onyx_provider_table, ONYX_PROVIDER_ENTRY_SYMBOL) stays valid: the
 * core speaks v1, v2 and v3, and a v3 instance may register kernels written to the
 * v1/v2 kernel table shape as they are (onyx_kernel_registry.add_table). Structs, the
 * tensor view, node info, workspace and compute context are shared with v2
 * (onyx_provider.h). Every field below is tagged with the version it arrived in; the
 * offsets are pinned in tests/core/abi_layout_test.c. docs/abi.md says more.
 */
#ifndef ONYX_FACTORY_H
#define ONYX_FACTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onyx_provider.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI a factory speaks. The core offers its highest through the factory entry;
 * the provider answers with the one it will speak (3 today). */
#define ONYX_ABI_V3 3u
/* The newest ABI this header set describes. */
#define ONYX_ABI_LATEST 3u

/* The single exported symbol of a v3 provider. (A provider that must also load in a
 * core older than v3 exports ONYX_PROVIDER_ENTRY_SYMBOL as well; a v3 core uses the
 * factory when both are there.) */
#define ONYX_PROVIDER_FACTORY_SYMBOL "onyx_provider_factory_entry"

/* ------------------------------------------------------------------ the error channel */

typedef struct onyx_sink onyx_sink;

/* Where a callback says why it fails. Owned by the core; valid during the call. */
struct onyx_sink {
  uint32_t struct_size; /* (v3) */
  uint32_t version;     /* (v3) */
  void *core_data;      /* (v3) opaque to the provider */
  /* (v3) Records the reason for the status the callback is about to return
   * (printf-style; the last call wins; the core keeps 511 characters). Calling it and
   * then returning OK is allowed and ignored. */
  void (*set_error)(onyx_sink *sink, const char *fmt, ...)
#if defined(__GNUC__)
      __attribute__((format(printf, 2, 3)))
#endif
      ;
};

/* ------------------------------------------------------------------ devices */

/* Capabilities a device reports (onyx_device_info.caps). */
#define ONYX_DEVICE_CAP_GRAPHS (UINT64_C(1) << 0)    /* "onyx.graphs" extension */
#define ONYX_DEVICE_CAP_VMM (UINT64_C(1) << 1)       /* "onyx.vmm" extension */
#define ONYX_DEVICE_CAP_PEER_COPY (UINT64_C(1) << 2) /* copies to and from its siblings */

#define ONYX_DEVICE_NAME_MAX 64

/* One device a factory can open. The core zero-fills it and sets struct_size to its
 * own size; the provider writes the fields that fit (ONYX_HAS_FIELD). */
typedef struct onyx_device_info {
  uint32_t struct_size;            /* (v3) */
  uint32_t version;                /* (v3) */
  char name[ONYX_DEVICE_NAME_MAX]; /* (v3) "NVIDIA H200", NUL-terminated */
  uint32_t kind;                   /* (v3) onyx_device_kind of its memory */
  int32_t ordinal;                 /* (v3) its tensors' device_id; tier "<kind>:<ordinal>" */
  uint64_t memory_bytes;           /* (v3) total memory; 0: not known or the host */
  uint32_t capability_major;       /* (v3) compute capability (CUDA), 0 where meaningless */
  uint32_t capability_minor;       /* (v3) */
  uint64_t caps;                   /* (v3) ONYX_DEVICE_CAP_* bits */
} onyx_device_info;

/* ------------------------------------------------------------------ kernels */

typedef enum onyx_type_side { ONYX_TYPE_INPUT = 0, ONYX_TYPE_OUTPUT = 1 } onyx_type_side;

/* One type constraint: input or output `index` must have one of `types`. A node
 * whose dtype there is known and not allowed is not placed on the kernel; the core
 * checks inputs again at run time and outputs at alloc_output. An absent input or
 * output, or one beyond the node's count, passes. */
typedef struct onyx_type_constraint {
  uint32_t side;  /* (v3) onyx_type_side */
  uint32_t index; /* (v3) input or output index */
  uint64_t types; /* (v3) ONYX_DTYPE_BIT set; 0 accepts any */
} onyx_type_constraint;

/*
 * A v3 kernel registration. Owned by the provider: static data, or alive until its
 * instance's close. The core indexes registrations by (domain, op_type); among an
 * instance's registrations for one op the first that takes a node wins.
 */
typedef struct onyx_kernel_def {
  uint32_t struct_size;              /* (v3) */
  uint32_t version;                  /* (v3) */
  const char *domain;                /* (v3) "" for ONNX */
  const char *op_type;               /* (v3) */
  int64_t since_opset;               /* (v3) first opset implemented */
  int64_t until_opset;               /* (v3) last, inclusive; 0: no bound */
  const onyx_type_constraint *types; /* (v3) [type_count]; all must hold */
  size_t type_count;                 /* (v3) */
  uint64_t host_inputs;              /* (v3) as onyx_kernel_table.host_inputs */
  uint64_t geometry_inputs;          /* (v3) as onyx_kernel_table.geometry_inputs */
  /* (v3) Optional finer check at placement, given the instance (its device): OK takes
   * the node; UNSUPPORTED declines it, the reason through `err`. NULL takes it. */
  onyx_status (*supports)(void *instance, const onyx_node_info *node, onyx_sink *err);
  /* (v3) Optional: per-node state. NULL: the kernel's state is the instance itself. */
  onyx_status (*create)(void *instance, const onyx_node_info *node, void **out_state,
                        onyx_sink *err);
  void (*destroy)(void *state); /* (v3) NULL-safe; NULL when create is NULL */
  /* (v3) Optional: output geometry from input geometry (as onyx_kernel_table.infer). */
  onyx_status (*infer)(void *state, const onyx_tensor *inputs, size_t input_count,
                       onyx_tensor *outputs, size_t output_count, onyx_sink *err);
  /* (v3) Optional: the workspace for these inputs (as onyx_kernel_table.workspace). */
  onyx_status (*workspace)(void *state, const onyx_tensor *inputs, size_t input_count,
                           onyx_workspace_requirement *out_req, onyx_sink *err);
  /* (v3) Runs the node; ctx as in v2 (ctx->set_error and `err` reach the same place). */
  onyx_status (*compute)(void *state, onyx_compute_ctx *ctx, const onyx_tensor *const *inputs,
                         size_t input_count, onyx_sink *err);
} onyx_kernel_def;

/* Handed to an instance's `kernels` callback: the instance adds what it offers on
 * its device. Owned by the core; valid during the call. */
typedef struct onyx_kernel_registry onyx_kernel_registry;
struct onyx_kernel_registry {
  uint32_t struct_size; /* (v3) */
  uint32_t version;     /* (v3) */
  void *core_data;      /* (v3) opaque */
  /* (v3) Registers a v3 kernel. INVALID_ARGUMENT (and a message) for an incomplete one. */
  onyx_status (*add)(onyx_kernel_registry *reg, const onyx_kernel_def *def);
  /* (v3) Registers a kernel written to the v1/v2 table shape, callbacks and message
   * channels as onyx_provider.h has them (its create gets the instance as
   * provider_state): a provider moves to v3 without rewriting its kernels. Its
   * type_input/type_mask count as one input constraint. */
  onyx_status (*add_table)(onyx_kernel_registry *reg, const onyx_kernel_table *table);
};

/* ------------------------------------------------------------------ instances */

/* Extension names for get_extension, and what they return. */
#define ONYX_EXT_VMM "onyx.vmm"       /* const onyx_vmm_table * (state: the instance) */
#define ONYX_EXT_GRAPHS "onyx.graphs" /* const onyx_graph_table * (state: the instance) */

/* What the core calls on an opened instance (one device). Static data. The memory,
 * copy, stream and ordering rules are those of onyx_provider_table (onyx_provider.h). */
typedef struct onyx_instance_table {
  uint32_t struct_size;          /* (v3) */
  uint32_t version;              /* (v3) */
  void (*close)(void *instance); /* (v3) NULL-safe */
  /* (v3) Registers the kernels this instance offers, once, right after open. */
  onyx_status (*kernels)(void *instance, onyx_kernel_registry *reg, onyx_sink *err);
  /* (v3) Device memory; NULL for host devices (the core provides host memory). */
  onyx_status (*device_alloc)(void *instance, uint64_t bytes, void **out_ptr, onyx_sink *err);
  void (*device_free)(void *instance, void *ptr); /* (v3) */
  /* (v3) Copies host <-> this device, within it, and — where the device has
   * ONYX_DEVICE_CAP_PEER_COPY — between it and another instance of the same provider
   * (the other side's device_id names it). The core calls the destination's instance
   * for a device-to-device copy, after syncing the source's. NULL for host devices. */
  onyx_status (*copy)(void *instance, onyx_tensor *dst, const onyx_tensor *src, onyx_sink *err);
  onyx_status (*sync)(void *instance, onyx_sink *err); /* (v3) may be NULL */
  void *(*stream)(void *instance);                     /* (v3) ctx->stream; may be NULL */
  /* (v3) Bytes the device may use (its tier's default limit); may be NULL. */
  onyx_status (*memory_capacity)(void *instance, uint64_t *out_bytes, onyx_sink *err);
  /* (v3) An optional table by name (ONYX_EXT_*), NULL when the instance has none;
   * new optional features arrive as extensions, not as fields here. May be NULL. */
  const void *(*get_extension)(void *instance, const char *name);
} onyx_instance_table;

/* ------------------------------------------------------------------ the factory */

typedef struct onyx_provider_factory {
  uint32_t struct_size; /* (v3) */
  uint32_t abi_version; /* (v3) the version this factory follows (3) */
  const char *name;     /* (v3) short default name, e.g. "cuda" */
  /* (v3) How many devices it can open with these options (plugins.ini section). 0 is
   * allowed: the provider then loads nothing. */
  onyx_status (*device_count)(const onyx_option *options, size_t option_count, uint32_t *out_count,
                              onyx_sink *err);
  /* (v3) What device `index` (0 .. count-1) is. */
  onyx_status (*device_info)(uint32_t index, onyx_device_info *out_info, onyx_sink *err);
  /* (v3) Opens device `index`. `host` stays valid until close; its mem_alloc books on
   * this instance's tier. DEVICE_UNAVAILABLE declines (the core places elsewhere). */
  onyx_status (*open)(const onyx_host_table *host, uint32_t index, const onyx_option *options,
                      size_t option_count, void **out_instance, onyx_sink *err);
  const onyx_instance_table *instance; /* (v3) the calls on an opened instance */
} onyx_provider_factory;

/*
 * The v3 entry point, exported as ONYX_PROVIDER_FACTORY_SYMBOL; negotiation as for
 * onyx_provider_entry_fn. out_factory: static, valid until the library is unloaded.
 */
typedef onyx_status (*onyx_provider_factory_fn)(uint32_t core_max_abi, uint32_t *out_abi,
                                                const onyx_provider_factory **out_factory);

#ifdef __cplusplus
}
#endif

#endif /* ONYX_FACTORY_H */
