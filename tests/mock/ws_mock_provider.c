/*
 * A provider for the workspace tests (tests/workspace): kernels whose workspace
 * requirement is spelled out by node attributes, so that a test model can declare
 * STEP and SESSION regions of any size, alignment and route, and kernels that check
 * and record the views they are handed.
 *
 * Ops (domain onyx.ws, opset 1), y = x + 1 on float32:
 *   Scratch         with infer (plannable)
 *   ScratchNoInfer  the same without infer (the executor runs the graph unplanned)
 *
 * Attributes, parallel INTS lists, one entry per region (at most 8):
 *   regions   STRINGS  region names, from the static list `known_names` (the ABI wants
 *                      names of static storage)
 *   lifetime  INTS     0 STEP, 1 SESSION
 *   align     INTS     alignment (0: the default, 64)
 *   fixed     INTS     bytes
 *   per_elem  INTS     + bytes per element of x
 *   per_s2    INTS     + bytes times S*S, S = x.dims[1] (1 for rank < 2)
 *   min_s     INTS     the region is used only when S >= min_s (else 0 bytes: the
 *                      route does not use it, as GQA's transpose scratch at S == 1)
 *   compute_extra INT  compute needs this many bytes more in region 0 than workspace()
 *                      declares: a kernel handed a short view on purpose
 *
 * compute checks every view against what it needs and returns
 * ONYX_STATUS_WORKSPACE_TOO_SMALL, writing nothing, when one is short; it checks
 * each view's alignment, fills each view with its own byte and verifies that no
 * other view overwrote it (overlap), and records the views for the test, which
 * reaches the records through the exported ws_mock_* functions (dlopen the same
 * library: the loader's handle and the test's are one instance).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "onyx_abi.h"
#include "ws_mock.h"

#define EXPORT __attribute__((visibility("default")))

#define MAX_REGIONS ONYX_MAX_WORKSPACE_REGIONS
#define MAX_NODES WS_MOCK_MAX_NODES

static ws_mock_stats stats;
static char fail_node[64];

EXPORT const ws_mock_stats *ws_mock_get_stats(void);
EXPORT void ws_mock_reset(void);
EXPORT void ws_mock_fail_at(const char *node_name);

EXPORT const ws_mock_stats *ws_mock_get_stats(void) { return &stats; }
EXPORT void ws_mock_reset(void) {
  memset(&stats, 0, sizeof stats);
  fail_node[0] = '\0';
}
/* The named node's compute fails with PROVIDER_ERROR (NULL or "": none). */
EXPORT void ws_mock_fail_at(const char *node_name) {
  snprintf(fail_node, sizeof fail_node, "%s", node_name ? node_name : "");
}

static const char *const known_names[] = {"q_bnsh", "out_bnsh", "scores", "kv_stage",
                                          "acc",    "packed",   "tiny",   "unused"};

typedef struct region_spec {
  const char *name;
  uint32_t lifetime, align;
  int64_t fixed, per_elem, per_s2, min_s;
} region_spec;

typedef struct ws_state {
  char node[64];
  size_t count;
  region_spec regions[MAX_REGIONS];
  int64_t compute_extra;
} ws_state;

static ws_state states[MAX_NODES * 4];
static size_t state_count;

static const onyx_attr *find_attr(const onyx_node_info *n, const char *name) {
  for (size_t i = 0; i < n->attr_count; ++i)
    if (!strcmp(n->attrs[i].name, name)) return &n->attrs[i];
  return NULL;
}

/* Entry i of an INTS attribute, 0 when absent. */
static int64_t int_at(const onyx_node_info *n, const char *name, size_t i) {
  const onyx_attr *a = find_attr(n, name);
  return a && a->type == ONYX_ATTR_INTS && i < a->count ? a->ints[i] : 0;
}

static onyx_status ws_create(void *provider_state, const onyx_node_info *node, void **out_state,
                             char *err, size_t err_cap) {
  (void)provider_state;
  if (state_count == sizeof states / sizeof states[0]) {
    snprintf(err, err_cap, "too many mock nodes");
    return ONYX_STATUS_OUT_OF_MEMORY;
  }
  ws_state *s = &states[state_count];
  memset(s, 0, sizeof *s);
  snprintf(s->node, sizeof s->node, "%s", node->name);
  const onyx_attr *names = find_attr(node, "regions");
  s->count = names && names->type == ONYX_ATTR_STRINGS ? names->count : 0;
  if (s->count > MAX_REGIONS) {
    snprintf(err, err_cap, "at most %d regions", MAX_REGIONS);
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  for (size_t i = 0; i < s->count; ++i) {
    region_spec *r = &s->regions[i];
    for (size_t k = 0; k < sizeof known_names / sizeof known_names[0]; ++k)
      if (!strcmp(names->strings[i], known_names[k])) r->name = known_names[k];
    if (r->name == NULL) {
      snprintf(err, err_cap, "unknown region name '%s'", names->strings[i]);
      return ONYX_STATUS_INVALID_ARGUMENT;
    }
    r->lifetime = (uint32_t)int_at(node, "lifetime", i);
    r->align = (uint32_t)int_at(node, "align", i);
    r->fixed = int_at(node, "fixed", i);
    r->per_elem = int_at(node, "per_elem", i);
    r->per_s2 = int_at(node, "per_s2", i);
    r->min_s = int_at(node, "min_s", i);
  }
  const onyx_attr *extra = find_attr(node, "compute_extra");
  s->compute_extra = extra && extra->type == ONYX_ATTR_INT ? extra->i : 0;
  state_count++;
  *out_state = s;
  return ONYX_STATUS_OK;
}

/* The requirement for this geometry: a pure function of attributes and x's dims. */
static void requirement(const ws_state *s, const onyx_tensor *x, onyx_workspace_requirement *req) {
  int64_t numel = onyx_tensor_numel(x);
  int64_t seq = x->rank >= 2 ? x->dims[1] : 1;
  req->count = (uint32_t)s->count;
  for (size_t i = 0; i < s->count; ++i) {
    const region_spec *r = &s->regions[i];
    int64_t bytes = r->fixed + r->per_elem * numel + r->per_s2 * seq * seq;
    if (seq < r->min_s) bytes = 0;
    req->regions[i] = (onyx_workspace_region){r->name, (uint64_t)bytes, r->align, r->lifetime};
  }
}

static onyx_status ws_workspace(void *state, const onyx_tensor *inputs, size_t count,
                                onyx_workspace_requirement *req) {
  stats.workspace_calls++;
  if (count < 1) return ONYX_STATUS_INVALID_ARGUMENT;
  requirement(state, &inputs[0], req);
  return ONYX_STATUS_OK;
}

static onyx_status ws_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                            onyx_tensor *outputs, size_t output_count) {
  (void)state;
  if (input_count < 1 || output_count < 1) return ONYX_STATUS_INVALID_ARGUMENT;
  outputs[0] = inputs[0];
  outputs[0].data = NULL;
  return ONYX_STATUS_OK;
}

static ws_mock_record *record_for(const char *node) {
  for (size_t i = 0; i < stats.record_count; ++i)
    if (!strcmp(stats.records[i].node, node)) return &stats.records[i];
  if (stats.record_count == MAX_NODES) return NULL;
  ws_mock_record *r = &stats.records[stats.record_count++];
  snprintf(r->node, sizeof r->node, "%s", node);
  return r;
}

static onyx_status ws_compute(void *state, onyx_compute_ctx *ctx, const onyx_tensor *const *inputs,
                              size_t input_count) {
  const ws_state *s = state;
  stats.compute_calls++;
  if (input_count < 1 || inputs[0] == NULL || inputs[0]->dtype != ONYX_DTYPE_FLOAT32) {
    ctx->set_error(ctx, "Scratch takes one float32 input");
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  if (fail_node[0] && !strcmp(fail_node, s->node)) {
    ctx->set_error(ctx, "mock failure injected at node '%s'", s->node);
    return ONYX_STATUS_PROVIDER_ERROR;
  }
  onyx_workspace_requirement req;
  memset(&req, 0, sizeof req);
  requirement(s, inputs[0], &req);
  ws_mock_record *rec = record_for(s->node);
  if (rec) {
    rec->calls++;
    rec->count = ctx->workspace_count < MAX_REGIONS ? ctx->workspace_count : MAX_REGIONS;
    for (size_t i = 0; i < rec->count; ++i) {
      const onyx_workspace_region *rg = &req.regions[i < req.count ? i : 0];
      rec->views[i] =
          (ws_mock_view){ctx->workspace[i].name, ctx->workspace[i].data, ctx->workspace[i].bytes,
                         rg->alignment ? rg->alignment : 64, rg->lifetime};
    }
  }
  /* Check everything before writing anything. */
  if (ctx->workspace_count != req.count) {
    ctx->set_error(ctx, "expected %u workspace views, got %zu", req.count, ctx->workspace_count);
    stats.too_small++;
    return ONYX_STATUS_WORKSPACE_TOO_SMALL;
  }
  for (uint32_t i = 0; i < req.count; ++i) {
    const onyx_workspace_view *v = &ctx->workspace[i];
    uint64_t need = req.regions[i].bytes + (i == 0 ? (uint64_t)s->compute_extra : 0);
    if (v->bytes < need || (need > 0 && v->data == NULL)) {
      ctx->set_error(ctx, "workspace region '%s' has %llu bytes, needs %llu", req.regions[i].name,
                     (unsigned long long)v->bytes, (unsigned long long)need);
      stats.too_small++;
      return ONYX_STATUS_WORKSPACE_TOO_SMALL;
    }
    uintptr_t align = req.regions[i].alignment ? req.regions[i].alignment : 64;
    if (need > 0 && ((uintptr_t)v->data & (align - 1)) != 0) {
      ctx->set_error(ctx, "workspace region '%s' at %p is not aligned to %u", req.regions[i].name,
                     v->data, (unsigned)align);
      return ONYX_STATUS_INTERNAL;
    }
  }
  /* Fill every view with its own byte, then check that none was overwritten by
   * another: views of one node never overlap, whatever their lifetime. */
  for (uint32_t i = 0; i < req.count; ++i)
    if (req.regions[i].bytes) memset(ctx->workspace[i].data, 0x10 + (int)i, req.regions[i].bytes);
  for (uint32_t i = 0; i < req.count; ++i) {
    const unsigned char *p = ctx->workspace[i].data;
    for (uint64_t b = 0; b < req.regions[i].bytes; ++b) {
      if (p[b] != 0x10 + i) {
        ctx->set_error(ctx, "workspace region '%s' overlaps another at byte %llu",
                       req.regions[i].name, (unsigned long long)b);
        return ONYX_STATUS_INTERNAL;
      }
    }
  }
  onyx_tensor *out = NULL;
  onyx_status st =
      ctx->alloc_output(ctx, 0, ONYX_DTYPE_FLOAT32, inputs[0]->rank, inputs[0]->dims, &out);
  if (st != ONYX_STATUS_OK) return st;
  const float *x = inputs[0]->data;
  float *y = out->data;
  for (int64_t i = 0; i < onyx_tensor_numel(inputs[0]); ++i) y[i] = x[i] + 1.0f;
  return ONYX_STATUS_OK;
}

static void ws_destroy(void *state) { (void)state; }

static const onyx_kernel_table scratch_kernel = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "onyx.ws",
    .op_type = "Scratch",
    .since_opset = 1,
    .type_mask = ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT32),
    .create = ws_create,
    .destroy = ws_destroy,
    .workspace = ws_workspace,
    .compute = ws_compute,
    .infer = ws_infer,
};

static const onyx_kernel_table scratch_noinfer_kernel = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "onyx.ws",
    .op_type = "ScratchNoInfer",
    .since_opset = 1,
    .type_mask = ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT32),
    .create = ws_create,
    .destroy = ws_destroy,
    .workspace = ws_workspace,
    .compute = ws_compute,
};

static const onyx_kernel_table *const kernels[] = {&scratch_kernel, &scratch_noinfer_kernel};

static int provider_state;

static onyx_status ws_open(const onyx_host_table *host, const onyx_option *options,
                           size_t option_count, void **out_state, char *err, size_t err_cap) {
  (void)host;
  (void)options;
  (void)option_count;
  (void)err;
  (void)err_cap;
  state_count = 0;
  *out_state = &provider_state;
  return ONYX_STATUS_OK;
}

static void ws_close(void *state) { (void)state; }

static const onyx_provider_table table = {
    .struct_size = sizeof(onyx_provider_table),
    .abi_version = 1, /* a v1 provider: the core still loads it */
    .name = "wsmock",
    .device = ONYX_DEVICE_HOST,
    .open = ws_open,
    .close = ws_close,
    .kernels = kernels,
    .kernel_count = sizeof kernels / sizeof kernels[0],
};

EXPORT onyx_status onyx_provider_entry(uint32_t core_max_abi, uint32_t *out_abi,
                                       const onyx_provider_table **out_table);
EXPORT onyx_status onyx_provider_entry(uint32_t core_max_abi, uint32_t *out_abi,
                                       const onyx_provider_table **out_table) {
  *out_abi = 1;
  if (core_max_abi < 1) return ONYX_STATUS_ABI_MISMATCH;
  *out_table = &table;
  return ONYX_STATUS_OK;
}
