/*
 * Helpers shared by the attention kernels: the thread pool as the CPU provider
 * exposes it, kernel state, messages, attributes and 16-bit rows.
 *
 * The kernel state allocated here at create() is the only heap allocation in
 * providers/cpu/attention/: scratch is stack tiles or declared workspace.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn_impl.h"
#include "cpu_impl.h"

/* ------------------------------------------------------------------ threads */

void onyx__attn_threads_from_provider(const void *provider_state, onyx__attn_threads *out) {
  out->parallel_for = NULL;
  out->host_data = NULL;
  out->num_threads = 1;
  if (provider_state == NULL) return;
  /* The CPU provider's state decides whether kernels may use the core's pool (it is
   * off with `threads = 1` or when the core offers none). */
  const onyx__cpu_provider *p = provider_state;
  if (!p->parallel || p->host == NULL || p->host->parallel_for == NULL) return;
  out->parallel_for = p->host->parallel_for;
  out->host_data = p->host->host_data;
  out->num_threads = p->num_threads > 1 ? p->num_threads : 1;
}

void onyx__attn_parallel_for(const onyx__attn_threads *t, size_t n, void (*fn)(void *arg, size_t i),
                             void *arg) {
  if (t != NULL && t->parallel_for != NULL && t->num_threads > 1 && n > 1) {
    t->parallel_for(t->host_data, n, fn, arg);
    return;
  }
  for (size_t i = 0; i < n; ++i) fn(arg, i);
}

/* ------------------------------------------------------------------ state */

void *onyx__attn_state_new(size_t size, void *provider_state, const onyx_node_info *node, char *err,
                           size_t err_cap) {
  if (node->output_count > 4) {
    onyx__pc_fail(err, err_cap, ONYX_STATUS_INVALID_MODEL,
                  "%s: the node names %zu outputs, at most 4 are defined", node->op_type,
                  node->output_count);
    return NULL;
  }
  onyx__attn_node *s = calloc(1, size);
  if (s == NULL) {
    onyx__pc_fail(err, err_cap, ONYX_STATUS_OUT_OF_MEMORY, "%s: cannot allocate kernel state",
                  node->op_type);
    return NULL;
  }
  onyx__attn_threads_from_provider(provider_state, &s->threads);
  s->opset = node->opset;
  snprintf(s->name, sizeof s->name, "%s", node->name != NULL ? node->name : "");
  s->output_count = node->output_count;
  for (size_t i = 0; i < node->output_count; ++i)
    s->output_present[i] = node->output_present == NULL || node->output_present[i];
  return s;
}

void onyx__attn_state_free(void *state) { free(state); }

/* ------------------------------------------------------------------ messages */

const char *onyx__attn_dtype_name(uint32_t dtype) { return onyx__pc_dtype_name(dtype); }

/* ------------------------------------------------------------------ attributes */

/* Lookups go through providers/common/pc_attr.c; the wording of a wrong type is ours. */

onyx_status onyx__attn_attr_int(const onyx_node_info *node, const char *name, int64_t dflt,
                                int64_t *out, char *err, size_t err_cap) {
  *out = dflt;
  if (onyx__pc_attr_int(node, name, dflt, out)) return ONYX_STATUS_OK;
  return onyx__pc_fail(err, err_cap, ONYX_STATUS_INVALID_MODEL, "%s: attribute '%s' must be an INT",
                       node->op_type, name);
}

onyx_status onyx__attn_attr_float(const onyx_node_info *node, const char *name, float dflt,
                                  float *out, char *err, size_t err_cap) {
  *out = dflt;
  if (onyx__pc_attr_float(node, name, dflt, out)) return ONYX_STATUS_OK;
  return onyx__pc_fail(err, err_cap, ONYX_STATUS_INVALID_MODEL,
                       "%s: attribute '%s' must be a FLOAT", node->op_type, name);
}

onyx_status onyx__attn_attr_string_is(const onyx_node_info *node, const char *name,
                                      const char *expect, bool *out_equal, char *err,
                                      size_t err_cap) {
  const onyx_attr *a = onyx__pc_attr_find(node, name);
  *out_equal = true;
  if (a == NULL) return ONYX_STATUS_OK;
  if (a->type != ONYX_ATTR_STRING)
    return onyx__pc_fail(err, err_cap, ONYX_STATUS_INVALID_MODEL,
                         "%s: attribute '%s' must be a STRING", node->op_type, name);
  *out_equal = a->s != NULL && strlen(expect) == a->s_len && memcmp(a->s, expect, a->s_len) == 0;
  return ONYX_STATUS_OK;
}

/* ------------------------------------------------------------------ rows */

void onyx__attn_store_row(uint32_t dtype, void *dst, int64_t n, const float *src) {
  if (dtype == ONYX_DTYPE_FLOAT16) {
    uint16_t *d = dst;
    for (int64_t i = 0; i < n; ++i) d[i] = onyx__attn_f32_to_f16(src[i]);
  } else if (dtype == ONYX_DTYPE_BFLOAT16) {
    uint16_t *d = dst;
    for (int64_t i = 0; i < n; ++i) d[i] = onyx__attn_f32_to_bf16(src[i]);
  } else {
    memcpy(dst, src, (size_t)n * sizeof(float));
  }
}

/* ------------------------------------------------------------------ inputs */

onyx_status onyx__attn_check_host(onyx_compute_ctx *ctx, const onyx_tensor *const *inputs,
                                  size_t input_count) {
  for (size_t i = 0; i < input_count; ++i) {
    const onyx_tensor *t = inputs[i];
    if (t == NULL) continue;
    if (t->device != ONYX_DEVICE_HOST)
      return onyx__pc_error(ctx, ONYX_STATUS_INVALID_ARGUMENT, "input %zu is not in host memory",
                            i);
    if (t->rank > ONYX_MAX_RANK)
      return onyx__pc_error(ctx, ONYX_STATUS_INVALID_ARGUMENT, "input %zu has rank %u", i, t->rank);
    for (uint32_t d = 0; d < t->rank; ++d)
      if (t->dims[d] < 0)
        return onyx__pc_error(ctx, ONYX_STATUS_INVALID_ARGUMENT,
                              "input %zu has a negative dimension %s", i,
                              onyx__pc_tensor_shape(t).s);
    if (t->data == NULL && onyx_tensor_numel(t) != 0)
      return onyx__pc_error(ctx, ONYX_STATUS_INVALID_ARGUMENT,
                            "input %zu has %lld elements but no data", i,
                            (long long)onyx_tensor_numel(t));
  }
  return ONYX_STATUS_OK;
}

void onyx__attn_infer_out(onyx_tensor *outputs, size_t count, size_t k, uint32_t dtype,
                          uint32_t rank, const int64_t *dims) {
  if (k >= count) return;
  onyx_tensor *t = &outputs[k];
  memset(t, 0, sizeof *t); /* data NULL: geometry only */
  t->dtype = dtype;
  t->device = ONYX_DEVICE_HOST;
  t->rank = rank;
  for (uint32_t d = 0; d < rank && d < ONYX_MAX_RANK; ++d) t->dims[d] = dims[d];
}
