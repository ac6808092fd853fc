/*
 * A shared library that lets Python (tools/parity/run_attention_cases.py, via ctypes)
 * run one CPU attention kernel on numpy buffers through the fake core, so that the
 * kernels can be compared with ONNX Runtime and the ONNX node tests before they are
 * part of libonyx_cpu.so. Test code only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention_kernels.h"
#include "attn_fake.h"

#define HARNESS_API __attribute__((visibility("default")))

HARNESS_API int attn_harness_run(const char *domain, const char *op_type, int64_t opset,
                                 size_t attr_count, const char *const *names, const int32_t *types,
                                 const int64_t *ints, const float *floats,
                                 const char *const *strings, size_t input_count,
                                 const onyx_tensor *inputs, size_t output_count,
                                 const uint8_t *output_present, uint32_t threads, int allow_alias,
                                 onyx_tensor *outputs, int32_t *out_alias_of,
                                 uint64_t *out_ws_bytes, char *err, size_t err_cap);
HARNESS_API void attn_harness_free(void *p);
HARNESS_API int attn_harness_bench(const char *domain, const char *op_type, int64_t opset,
                                   size_t attr_count, const char *const *names,
                                   const int32_t *types, const int64_t *ints, const float *floats,
                                   const char *const *strings, size_t input_count,
                                   const onyx_tensor *inputs, size_t output_count,
                                   const uint8_t *output_present, uint32_t threads, int allow_alias,
                                   int reps, double *out_best_seconds, char *err, size_t err_cap);

static int harness_exec(const char *domain, const char *op_type, int64_t opset, size_t attr_count,
                        const char *const *names, const int32_t *types, const int64_t *ints,
                        const float *floats, const char *const *strings, size_t input_count,
                        const onyx_tensor *inputs, size_t output_count,
                        const uint8_t *output_present, uint32_t threads, int allow_alias, int reps,
                        double *out_best, onyx_tensor *outputs, int32_t *out_alias_of,
                        uint64_t *out_ws_bytes, char *err, size_t err_cap);

HARNESS_API int attn_harness_bench(const char *domain, const char *op_type, int64_t opset,
                                   size_t attr_count, const char *const *names,
                                   const int32_t *types, const int64_t *ints, const float *floats,
                                   const char *const *strings, size_t input_count,
                                   const onyx_tensor *inputs, size_t output_count,
                                   const uint8_t *output_present, uint32_t threads, int allow_alias,
                                   int reps, double *out_best_seconds, char *err, size_t err_cap) {
  uint64_t ws = 0;
  return harness_exec(domain, op_type, opset, attr_count, names, types, ints, floats, strings,
                      input_count, inputs, output_count, output_present, threads, allow_alias, reps,
                      out_best_seconds, NULL, NULL, &ws, err, err_cap);
}

HARNESS_API int attn_harness_run(const char *domain, const char *op_type, int64_t opset,
                                 size_t attr_count, const char *const *names, const int32_t *types,
                                 const int64_t *ints, const float *floats,
                                 const char *const *strings, size_t input_count,
                                 const onyx_tensor *inputs, size_t output_count,
                                 const uint8_t *output_present, uint32_t threads, int allow_alias,
                                 onyx_tensor *outputs, int32_t *out_alias_of,
                                 uint64_t *out_ws_bytes, char *err, size_t err_cap) {
  return harness_exec(domain, op_type, opset, attr_count, names, types, ints, floats, strings,
                      input_count, inputs, output_count, output_present, threads, allow_alias, 1,
                      NULL, outputs, out_alias_of, out_ws_bytes, err, err_cap);
}

static double harness_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* create → workspace → compute `reps` times (best wall time in *out_best when given) →
 * outputs of the last run into outputs[] when given. */
static int harness_exec(const char *domain, const char *op_type, int64_t opset, size_t attr_count,
                        const char *const *names, const int32_t *types, const int64_t *ints,
                        const float *floats, const char *const *strings, size_t input_count,
                        const onyx_tensor *inputs, size_t output_count,
                        const uint8_t *output_present, uint32_t threads, int allow_alias, int reps,
                        double *out_best, onyx_tensor *outputs, int32_t *out_alias_of,
                        uint64_t *out_ws_bytes, char *err, size_t err_cap) {
  const onyx_kernel_table *kt = NULL;
  for (size_t i = 0; i < onyx_cpu_attention_kernel_count; ++i) {
    const onyx_kernel_table *k = onyx_cpu_attention_kernels[i];
    if (strcmp(k->domain, domain) == 0 && strcmp(k->op_type, op_type) == 0 &&
        opset >= k->since_opset && (k->until_opset == 0 || opset <= k->until_opset))
      kt = k;
  }
  if (kt == NULL) {
    snprintf(err, err_cap, "no kernel for %s::%s opset %lld", domain, op_type, (long long)opset);
    return ONYX_STATUS_NOT_FOUND;
  }
  if (input_count > 16 || output_count > FAKE_MAX_OUTPUTS || attr_count > 24) {
    snprintf(err, err_cap, "too many inputs/outputs/attributes for the harness");
    return ONYX_STATUS_INVALID_ARGUMENT;
  }
  fake_node node;
  fake_node_init(&node, domain, op_type, opset, input_count, output_count);
  const onyx_tensor *in[16];
  for (size_t i = 0; i < input_count; ++i) {
    node.input_present[i] = inputs[i].dtype != ONYX_DTYPE_UNDEFINED;
    node.input_dtypes[i] = inputs[i].dtype;
    in[i] = node.input_present[i] ? &inputs[i] : NULL;
  }
  for (size_t i = 0; i < output_count; ++i) node.output_present[i] = output_present[i] != 0;
  for (size_t i = 0; i < attr_count; ++i) {
    if (types[i] == ONYX_ATTR_INT)
      fake_node_int(&node, names[i], ints[i]);
    else if (types[i] == ONYX_ATTR_FLOAT)
      fake_node_float(&node, names[i], floats[i]);
    else
      fake_node_string(&node, names[i], strings[i]);
  }
  fake_provider *prov = fake_provider_new(threads);
  void *state = NULL;
  onyx_status st = kt->create(fake_provider_state(prov), &node.info, &state, err, err_cap);
  if (st != ONYX_STATUS_OK) {
    fake_provider_free(prov);
    return st;
  }
  onyx_workspace_requirement req;
  memset(&req, 0, sizeof req);
  req.struct_size = sizeof req;
  req.version = ONYX_ABI_VERSION;
  if (kt->workspace != NULL) {
    onyx_tensor geo[16];
    for (size_t i = 0; i < input_count; ++i) {
      geo[i] = inputs[i];
      geo[i].data = NULL;
    }
    st = kt->workspace(state, geo, input_count, &req);
  }
  *out_ws_bytes = 0;
  for (uint32_t i = 0; i < req.count; ++i) *out_ws_bytes += req.regions[i].bytes;
  fake_ctx f;
  fake_ctx_init(&f, in, input_count, allow_alias != 0);
  fake_ctx_workspace(&f, &req, -1, 0);
  double best = 1e300;
  for (int rep = 0; rep < (reps < 1 ? 1 : reps) && st == ONYX_STATUS_OK; ++rep) {
    if (rep > 0) { /* fresh outputs each time, as a run of the graph would have */
      fake_ctx_free(&f);
      fake_ctx_init(&f, in, input_count, allow_alias != 0);
      fake_ctx_workspace(&f, &req, -1, 0);
    }
    double t0 = harness_now();
    st = kt->compute(state, &f.ctx, in, input_count);
    double t1 = harness_now();
    if (t1 - t0 < best) best = t1 - t0;
  }
  if (out_best != NULL) *out_best = best;
  if (st != ONYX_STATUS_OK) {
    snprintf(err, err_cap, "%s", f.err[0] ? f.err : onyx_status_str(st));
  } else if (outputs != NULL) {
    for (size_t i = 0; i < output_count; ++i) {
      out_alias_of[i] = f.alias_of[i];
      if (!f.produced[i]) {
        memset(&outputs[i], 0, sizeof outputs[i]);
        continue;
      }
      outputs[i] = f.outputs[i];
      f.owned[i] = NULL; /* Python frees it with attn_harness_free */
    }
  }
  fake_ctx_free(&f);
  kt->destroy(state);
  fake_provider_free(prov);
  return st;
}

HARNESS_API void attn_harness_free(void *p) { free(p); }
