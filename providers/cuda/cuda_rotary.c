/*
 * RotaryEmbedding: ONNX opset 23 (X, cos_cache, sin_cache[, position_ids]) and
 * com.microsoft (input, position_ids, cos_cache, sin_cache).
 *
 * X is (B, N, S, H), or (B, S, N*H) with num_heads. The tables are (max_pos, rot/2)
 * indexed by position_ids (B, S) — or, for com.microsoft, by one start offset of
 * shape (1) plus the token index — or, for ONNX without position_ids, (B, S, rot/2)
 * per token. out1 = cos*x1 - sin*x2, out2 = sin*x1 + cos*x2 over the halves of the
 * first rot dims (even/odd pairs when interleaved); the rest of a head passes through.
 *
 * Positions are read on the device; one outside the table is clamped to it (the
 * host cannot check device values without a synchronisation).
 */
#include <string.h>

#include "cuda_impl.h"

typedef struct rotary_state {
  onyx__cuda_node head;
  bool ms; /* com.microsoft input order */
  bool interleaved;
  int64_t num_heads, rot_dim;
} rotary_state;

static onyx_status rotary_create(void *provider_state, const onyx_node_info *node, bool ms,
                                 void **out_state, char *err, size_t err_cap) {
  int64_t interleaved = 0, num_heads = 0, rot = 0, packed = 0;
  onyx_status st;
  if ((st = onyx__cuda_attr_int(node, "interleaved", 0, &interleaved, err, err_cap)) ||
      (st = onyx__cuda_attr_int(node, "num_heads", 0, &num_heads, err, err_cap)) ||
      (st = onyx__cuda_attr_int(node, "rotary_embedding_dim", 0, &rot, err, err_cap)) ||
      (st = onyx__cuda_attr_int(node, "is_packed_batching", 0, &packed, err, err_cap)))
    return st;
  if (packed != 0)
    return onyx__cuda_fail(err, err_cap, ONYX_STATUS_UNSUPPORTED,
                           "RotaryEmbedding: is_packed_batching = 1 is not supported");
  if ((interleaved != 0 && interleaved != 1) || num_heads < 0 || rot < 0)
    return onyx__cuda_fail(err, err_cap, ONYX_STATUS_INVALID_MODEL,
                           "RotaryEmbedding: interleaved (%lld) must be 0 or 1, num_heads (%lld) "
                           "and rotary_embedding_dim (%lld) not negative",
                           (long long)interleaved, (long long)num_heads, (long long)rot);
  rotary_state *s = onyx__cuda_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  s->ms = ms;
  s->interleaved = interleaved != 0;
  s->num_heads = num_heads;
  s->rot_dim = rot;
  *out_state = s;
  return ONYX_STATUS_OK;
}

static onyx_status rotary_create_onnx(void *provider_state, const onyx_node_info *node,
                                      void **out_state, char *err, size_t err_cap) {
  return rotary_create(provider_state, node, false, out_state, err, err_cap);
}

static onyx_status rotary_create_ms(void *provider_state, const onyx_node_info *node,
                                    void **out_state, char *err, size_t err_cap) {
  return rotary_create(provider_state, node, true, out_state, err, err_cap);
}

/* Fills the geometry part of `a` from X and the tables; messages into err. */
static onyx_status rotary_geometry(const rotary_state *s, const onyx_tensor *x,
                                   const onyx_tensor *cos, const onyx_tensor *sin,
                                   const onyx_tensor *pos, onyx__cuda_rotary_args *a, char *err,
                                   size_t cap) {
  memset(a, 0, sizeof *a);
  if (x->rank == 4) {
    a->bnsh = true;
    a->batch = x->dims[0];
    a->heads = x->dims[1];
    a->seq = x->dims[2];
    a->head_size = x->dims[3];
  } else if (x->rank == 3) {
    a->batch = x->dims[0];
    a->seq = x->dims[1];
    int64_t hidden = x->dims[2];
    if (s->num_heads > 0) {
      a->heads = s->num_heads;
    } else if (s->ms && s->rot_dim == 0 && cos->rank == 2 && cos->dims[1] > 0) {
      /* com.microsoft without num_heads: the head is twice the table's width. */
      a->heads = hidden / (2 * cos->dims[1]);
    } else {
      return onyx__cuda_fail(err, cap, ONYX_STATUS_INVALID_ARGUMENT,
                             "a 3-D input %s needs the num_heads attribute",
                             onyx__cuda_tensor_shape(x).s);
    }
    if (a->heads <= 0 || hidden % a->heads != 0)
      return onyx__cuda_fail(err, cap, ONYX_STATUS_INVALID_ARGUMENT,
                             "hidden size %lld of %s is not a multiple of the head count",
                             (long long)hidden, onyx__cuda_tensor_shape(x).s);
    a->head_size = hidden / a->heads;
  } else {
    return onyx__cuda_fail(err, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "input must be (B, N, S, H) or (B, S, N*H), got %s",
                           onyx__cuda_tensor_shape(x).s);
  }
  a->rot = s->rot_dim > 0 ? s->rot_dim : a->head_size;
  if (a->rot > a->head_size || a->rot % 2 != 0)
    return onyx__cuda_fail(err, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "rotary_embedding_dim %lld must be even and at most the head size %lld",
                           (long long)a->rot, (long long)a->head_size);
  int64_t half = a->rot / 2;
  if (pos == NULL) {
    if (cos->rank != 3 || cos->dims[0] != a->batch || cos->dims[1] != a->seq ||
        cos->dims[2] != half)
      return onyx__cuda_fail(err, cap, ONYX_STATUS_INVALID_ARGUMENT,
                             "without position_ids cos_cache must be (%lld, %lld, %lld), got %s",
                             (long long)a->batch, (long long)a->seq, (long long)half,
                             onyx__cuda_tensor_shape(cos).s);
    a->rows = a->batch * a->seq;
  } else {
    if (cos->rank != 2 || cos->dims[1] != half)
      return onyx__cuda_fail(err, cap, ONYX_STATUS_INVALID_ARGUMENT,
                             "cos_cache must be (max_position, %lld), got %s", (long long)half,
                             onyx__cuda_tensor_shape(cos).s);
    a->rows = cos->dims[0];
    if (pos->dtype != ONYX_DTYPE_INT64)
      return onyx__cuda_fail(err, cap, ONYX_STATUS_INVALID_ARGUMENT,
                             "position_ids has type %s; int64 expected",
                             onyx__cuda_dtype_name(pos->dtype));
    if (s->ms && pos->rank == 1 && pos->dims[0] == 1) {
      a->pos_scalar = true;
    } else if (pos->rank != 2 || pos->dims[0] != a->batch || pos->dims[1] != a->seq) {
      return onyx__cuda_fail(err, cap, ONYX_STATUS_INVALID_ARGUMENT,
                             "position_ids must be (%lld, %lld)%s, got %s", (long long)a->batch,
                             (long long)a->seq, s->ms ? " or (1)" : "",
                             onyx__cuda_tensor_shape(pos).s);
    }
  }
  if (sin->rank != cos->rank || memcmp(sin->dims, cos->dims, sizeof(int64_t) * cos->rank) != 0)
    return onyx__cuda_fail(err, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "sin_cache %s and cos_cache %s differ in shape",
                           onyx__cuda_tensor_shape(sin).s, onyx__cuda_tensor_shape(cos).s);
  if (cos->dtype != x->dtype || sin->dtype != x->dtype)
    return onyx__cuda_fail(err, cap, ONYX_STATUS_INVALID_ARGUMENT,
                           "cos_cache (%s) and sin_cache (%s) must have the input's type %s",
                           onyx__cuda_dtype_name(cos->dtype), onyx__cuda_dtype_name(sin->dtype),
                           onyx__cuda_dtype_name(x->dtype));
  a->dtype = x->dtype;
  a->interleaved = s->interleaved;
  return ONYX_STATUS_OK;
}

static onyx_status rotary_compute(void *state, onyx_compute_ctx *ctx,
                                  const onyx_tensor *const *inputs, size_t input_count) {
  const rotary_state *s = state;
  onyx_status st = onyx__cuda_check_inputs(ctx, inputs, input_count, s->ms ? 4 : 3);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *x = inputs[0];
  const onyx_tensor *pos = onyx__cuda_input(inputs, input_count, s->ms ? 1 : 3);
  const onyx_tensor *cos = inputs[s->ms ? 2 : 1], *sin = inputs[s->ms ? 3 : 2];
  if (!onyx__cuda_dtype_in(x->dtype, ONYX__CUDA_FLOAT_TYPES))
    return onyx__cuda_error(ctx, ONYX_STATUS_UNSUPPORTED,
                            "input has type %s; float32, float16 or bfloat16 expected",
                            onyx__cuda_dtype_name(x->dtype));
  char err[384];
  onyx__cuda_rotary_args a;
  if ((st = rotary_geometry(s, x, cos, sin, pos, &a, err, sizeof err)) != ONYX_STATUS_OK)
    return onyx__cuda_error(ctx, st, "%s", err);
  onyx_tensor *y = NULL;
  st = onyx__cuda_alloc_output(&s->head, ctx, 0, x->dtype, x->rank, x->dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  a.x = x->data;
  a.y = y->data;
  a.cos = cos->data;
  a.sin = sin->data;
  a.pos = pos ? pos->data : NULL;
  cudaError_t e = onyx__cuda_launch_rotary(&a, (cudaStream_t)ctx->stream);
  return onyx__cuda_check(ctx, e, "RotaryEmbedding");
}

static onyx_status rotary_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                onyx_tensor *outputs, size_t output_count) {
  onyx__cuda_infer_begin(outputs, output_count);
  (void)state;
  if (input_count < 1 || output_count < 1) return ONYX_STATUS_INVALID_ARGUMENT;
  outputs[0] = inputs[0];
  outputs[0].data = NULL;
  return ONYX_STATUS_OK;
}

const onyx_kernel_table onyx__cuda_k_rotary = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "",
    .op_type = "RotaryEmbedding",
    .since_opset = 23,
    .until_opset = 0,
    .type_input = 0,
    .type_mask = ONYX__CUDA_FLOAT_TYPES,
    .supports = NULL,
    .create = rotary_create_onnx,
    .destroy = onyx__cuda_destroy,
    .workspace = NULL,
    .compute = rotary_compute,
    .infer = rotary_infer,
};

const onyx_kernel_table onyx__cuda_k_ms_rotary = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "com.microsoft",
    .op_type = "RotaryEmbedding",
    .since_opset = 1,
    .until_opset = 0,
    .type_input = 0,
    .type_mask = ONYX__CUDA_FLOAT_TYPES,
    .supports = NULL,
    .create = rotary_create_ms,
    .destroy = onyx__cuda_destroy,
    .workspace = NULL,
    .compute = rotary_compute,
    .infer = rotary_infer,
};
