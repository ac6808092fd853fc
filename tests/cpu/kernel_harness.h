/*
 * A minimal stand-in for the core, for testing provider kernels in isolation.
 *
 * It loads a provider .so with dlopen exactly as the core does, negotiates the ABI,
 * finds a kernel by (domain, op, opset, dtype), builds the node description, runs
 * create → workspace → compute → destroy, and records what the kernel did:
 * outputs (allocated with malloc and poisoned with 0xFF bytes, which read as NaN
 * for floats and -1 for integers, so an element the kernel forgot to write shows
 * up), the status, the set_error message, and whether a failing call allocated
 * outputs anyway (it must not).
 */
#ifndef ONYX_TESTS_KERNEL_HARNESS_H
#define ONYX_TESTS_KERNEL_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onyx_abi.h"

#define KH_MAX_OUTPUTS 4

/* A loaded, opened provider. */
typedef struct kh_provider {
  void *dl;
  const onyx_provider_table *table;
  void *state;
  onyx_host_table host;
  uint32_t negotiated_abi;
} kh_provider;

/* Loads `path`, negotiates with core_max_abi = 1 and opens the provider with
 * `options`. `threads` > 1 gives the provider a parallel_for that really runs on
 * that many threads; 0 or 1 offers none. Returns ONYX_STATUS_OK or the failing
 * status, with a message in err. */
onyx_status kh_load(kh_provider *p, const char *path, const onyx_option *options,
                    size_t option_count, uint32_t threads, char *err, size_t err_cap);
void kh_unload(kh_provider *p);

/* The first kernel that matches, as the core's placement would pick it, or NULL. */
const onyx_kernel_table *kh_find(const kh_provider *p, const char *domain, const char *op,
                                 int64_t opset, uint32_t dtype);

/* What one run produced. Free with kh_result_free. */
typedef struct kh_result {
  onyx_status status;
  const char *stage; /* "find", "create", "workspace", "compute" or "ok" */
  char error[1024];  /* create's err or compute's set_error text */
  onyx_tensor out[KH_MAX_OUTPUTS];
  bool allocated[KH_MAX_OUTPUTS];
  int alloc_calls;
  bool allocated_on_error;  /* a failed compute allocated outputs: an ABI violation */
  uint64_t workspace_bytes; /* total the kernel asked for */
  /* Constant inputs (kh_node.constant_inputs): bit i set when create said it copied
   * input i, which compute then received as geometry only (data NULL); the bytes
   * the kernel booked through host->mem_alloc; and how many of those allocations
   * were still live after destroy (a leak when > 0). */
  uint32_t constants_copied;
  uint64_t governed_bytes;
  int governed_live_after;
} kh_result;

/* A node to run. Zero-initialise, then fill what the test needs. */
typedef struct kh_node {
  const char *op;
  const char *domain; /* NULL means "" (ONNX) */
  int64_t opset;
  const onyx_attr *attrs;
  size_t attr_count;
  size_t output_count;        /* 0 means 1 */
  const bool *output_present; /* NULL means all present */
  /* Test hook: hand the kernel workspace views this many bytes short (0: exact). */
  uint64_t workspace_shortfall;
  /* [input_count] or NULL: inputs offered to create as constant initializers (ABI v2
   * input_constants), which it may copy and give back (input_constant_copied). */
  const bool *constant_inputs;
  /* Test hook: host->mem_alloc refuses every request. */
  bool refuse_mem_alloc;
} kh_node;

/* Runs `node` on `inputs` (NULL entries are absent optional inputs). */
void kh_run(kh_provider *p, const kh_node *node, const onyx_tensor *const *inputs,
            size_t input_count, kh_result *out);
void kh_result_free(kh_result *r);

/* Values the harness offers per output of an infer call (the ABI's 64 int64). */
#define KH_INFER_VALUES 64

/* What one infer call produced. */
typedef struct kh_infer_result {
  onyx_status status;
  char error[256];
  onyx_tensor out[KH_MAX_OUTPUTS]; /* data points into values[k] when handed back */
  int64_t values[KH_MAX_OUTPUTS][KH_INFER_VALUES];
} kh_infer_result;

/* Runs create → infer → destroy as the core's planner does: input data is kept
 * only for int32/int64 tensors of at most 4096 elements (and for none when
 * `hide_values`), absent inputs are rank 0 / UNDEFINED, and every output is
 * offered a values buffer. A kernel without infer gives NOT_FOUND. */
void kh_infer(kh_provider *p, const kh_node *node, const onyx_tensor *const *inputs,
              size_t input_count, bool hide_values, kh_infer_result *out);

/* The kernel table that kh_run would use for `node` and these inputs. */
const onyx_kernel_table *kh_kernel_for(const kh_provider *p, const kh_node *node,
                                       const onyx_tensor *const *inputs, size_t input_count);

/* A host tensor view over `data` (not copied). */
onyx_tensor kh_tensor(uint32_t dtype, uint32_t rank, const int64_t *dims, const void *data);

/* Attribute builders. Strings and arrays are referenced, not copied. */
onyx_attr kh_attr_int(const char *name, int64_t v);
onyx_attr kh_attr_float(const char *name, float v);
onyx_attr kh_attr_ints(const char *name, const int64_t *v, size_t count);
onyx_attr kh_attr_floats(const char *name, const float *v, size_t count);
onyx_attr kh_attr_string(const char *name, const char *s);
onyx_attr kh_attr_tensor(const char *name, const onyx_tensor *t);

#endif /* ONYX_TESTS_KERNEL_HARNESS_H */
