/*
 * A stand-in for the core when testing the CPU attention kernels alone: a compute
 * context that allocates outputs with malloc, can allow or refuse aliasing, records
 * error messages and carries workspace views; and a provider state whose host table
 * runs parallel_for on a few pthreads. Test code only.
 */
#ifndef ONYX_ATTN_FAKE_H
#define ONYX_ATTN_FAKE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu_impl.h"
#include "onyx_abi.h"

#define FAKE_MAX_OUTPUTS 4

typedef struct fake_ctx {
  onyx_compute_ctx ctx; /* first: the kernel sees &fake.ctx */
  const onyx_tensor *const *inputs;
  size_t input_count;
  bool allow_alias;
  onyx_tensor outputs[FAKE_MAX_OUTPUTS];
  bool produced[FAKE_MAX_OUTPUTS];
  int alias_of[FAKE_MAX_OUTPUTS]; /* input index, or -1 */
  void *owned[FAKE_MAX_OUTPUTS];
  uint8_t poison; /* byte written into fresh outputs */
  int alloc_calls, alias_calls;
  char err[512];
  onyx_workspace_view views[ONYX_MAX_WORKSPACE_REGIONS];
  void *view_mem[ONYX_MAX_WORKSPACE_REGIONS];
} fake_ctx;

void fake_ctx_init(fake_ctx *f, const onyx_tensor *const *inputs, size_t input_count,
                   bool allow_alias);
/* Allocates views for a requirement (exact sizes, or `shrink` bytes fewer for region
 * `short_region` when >= 0). */
void fake_ctx_workspace(fake_ctx *f, const onyx_workspace_requirement *req, int short_region,
                        uint64_t shrink);
void fake_ctx_free(fake_ctx *f);

/* A CPU provider state with a pthread pool of `threads` (1: serial, no pool). */
typedef struct fake_provider fake_provider;
fake_provider *fake_provider_new(uint32_t threads);
void *fake_provider_state(fake_provider *p); /* what create() receives */
void fake_provider_free(fake_provider *p);

/* A node description for create(). */
typedef struct fake_node {
  onyx_node_info info;
  onyx_attr attrs[24];
  bool input_present[16];
  bool output_present[FAKE_MAX_OUTPUTS];
  uint32_t input_dtypes[16];
} fake_node;

void fake_node_init(fake_node *n, const char *domain, const char *op, int64_t opset, size_t inputs,
                    size_t outputs);
void fake_node_int(fake_node *n, const char *name, int64_t v);
void fake_node_float(fake_node *n, const char *name, float v);
void fake_node_string(fake_node *n, const char *name, const char *v);

/* A host tensor view over caller memory. */
onyx_tensor fake_tensor(uint32_t dtype, uint32_t rank, const int64_t *dims, void *data);

#endif /* ONYX_ATTN_FAKE_H */
