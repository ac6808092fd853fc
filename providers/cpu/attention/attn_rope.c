/*
 * Rotary position embedding: the row rotation GroupQueryAttention applies on load, and
 * the two RotaryEmbedding ops (ONNX opset 23 and com.microsoft).
 *
 * out1 = cos·x1 − sin·x2, out2 = sin·x1 + cos·x2, where (x1, x2) are the two halves of
 * the first rotary_dim values of a head, or its even/odd pairs when interleaved; values
 * past rotary_dim pass through. 16-bit inputs are rotated in float32.
 */
#include "attn_impl.h"

void onyx__attn_rope_row(const onyx__attn_rope *r, int64_t row, float *x) {
  int64_t half = r->half;
  int64_t base = row * half;
  if (r->interleaved) {
    for (int64_t i = 0; i < half; ++i) {
      float c = onyx__attn_load(r->dtype, r->cos, base + i);
      float s = onyx__attn_load(r->dtype, r->sin, base + i);
      float x1 = x[2 * i], x2 = x[2 * i + 1];
      x[2 * i] = c * x1 - s * x2;
      x[2 * i + 1] = s * x1 + c * x2;
    }
  } else {
    for (int64_t i = 0; i < half; ++i) {
      float c = onyx__attn_load(r->dtype, r->cos, base + i);
      float s = onyx__attn_load(r->dtype, r->sin, base + i);
      float x1 = x[i], x2 = x[i + half];
      x[i] = c * x1 - s * x2;
      x[i + half] = s * x1 + c * x2;
    }
  }
}

/* ------------------------------------------------------------------ kernels */

typedef struct rope_state {
  onyx__attn_node head;
  bool ms; /* com.microsoft input order and rules */
  bool interleaved;
  int64_t num_heads;
  int64_t rot_dim;
} rope_state;

static onyx_status rope_create(void *provider_state, const onyx_node_info *node, bool ms,
                               void **out_state, char *err, size_t err_cap) {
  int64_t interleaved = 0, num_heads = 0, rot_dim = 0, packed = 0;
  onyx_status st;
  if ((st = onyx__attn_attr_int(node, "interleaved", 0, &interleaved, err, err_cap)) ||
      (st = onyx__attn_attr_int(node, "num_heads", 0, &num_heads, err, err_cap)) ||
      (st = onyx__attn_attr_int(node, "rotary_embedding_dim", 0, &rot_dim, err, err_cap)))
    return st;
  if (ms) {
    float scale = 1.0f;
    if ((st = onyx__attn_attr_int(node, "is_packed_batching", 0, &packed, err, err_cap)) ||
        (st = onyx__attn_attr_float(node, "scale", 1.0f, &scale, err, err_cap)))
      return st;
    if (packed != 0)
      return onyx__pc_fail(err, err_cap, ONYX_STATUS_UNSUPPORTED,
                           "RotaryEmbedding: is_packed_batching = %lld is not supported by the "
                           "CPU provider (only 0)",
                           (long long)packed);
  }
  if (interleaved != 0 && interleaved != 1)
    return onyx__pc_fail(err, err_cap, ONYX_STATUS_INVALID_MODEL,
                         "RotaryEmbedding: interleaved must be 0 or 1, got %lld",
                         (long long)interleaved);
  if (num_heads < 0 || rot_dim < 0)
    return onyx__pc_fail(err, err_cap, ONYX_STATUS_INVALID_MODEL,
                         "RotaryEmbedding: num_heads (%lld) and rotary_embedding_dim (%lld) "
                         "must not be negative",
                         (long long)num_heads, (long long)rot_dim);
  rope_state *s = onyx__attn_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  s->ms = ms;
  s->interleaved = interleaved != 0;
  s->num_heads = num_heads;
  s->rot_dim = rot_dim;
  *out_state = s;
  return ONYX_STATUS_OK;
}

static onyx_status rope_create_onnx(void *provider_state, const onyx_node_info *node,
                                    void **out_state, char *err, size_t err_cap) {
  return rope_create(provider_state, node, false, out_state, err, err_cap);
}

static onyx_status rope_create_ms(void *provider_state, const onyx_node_info *node,
                                  void **out_state, char *err, size_t err_cap) {
  return rope_create(provider_state, node, true, out_state, err, err_cap);
}

typedef struct rope_job {
  onyx__attn_rope table;
  uint32_t dtype;
  const void *x;
  void *y;
  int64_t batch, heads, seq, head_size, rot;
  bool bnsh;          /* X is (B, N, S, H); else (B, S, N·H) */
  const int64_t *pos; /* NULL: table row b·S + s (ONNX without position ids) */
  bool pos_scalar;    /* com.microsoft shape (1): position pos[0] + s */
} rope_job;

static int64_t rope_table_row(const rope_job *j, int64_t b, int64_t s) {
  if (j->pos == NULL) return b * j->seq + s;
  if (j->pos_scalar) return j->pos[0] + s;
  return j->pos[b * j->seq + s];
}

/* One (b, s): every head of that token. */
static void rope_task(void *arg, size_t index) {
  const rope_job *j = arg;
  int64_t b = (int64_t)index / j->seq, s = (int64_t)index % j->seq;
  int64_t row = rope_table_row(j, b, s);
  size_t es = onyx_dtype_size(j->dtype);
  float buf[ONYX__ATTN_MAX_HEAD];
  for (int64_t n = 0; n < j->heads; ++n) {
    int64_t off = j->bnsh ? ((b * j->heads + n) * j->seq + s) * j->head_size
                          : ((b * j->seq + s) * j->heads + n) * j->head_size;
    onyx__attn_load_row(j->dtype, onyx__attn_at(j->x, off, es), j->head_size, buf);
    onyx__attn_rope_row(&j->table, row, buf);
    onyx__attn_store_row(j->dtype, onyx__attn_at_mut(j->y, off, es), j->head_size, buf);
  }
}

static onyx_status rope_compute(void *state, onyx_compute_ctx *ctx,
                                const onyx_tensor *const *inputs, size_t input_count) {
  const rope_state *st = state;
  onyx_status status = onyx__attn_check_host(ctx, inputs, input_count);
  if (status != ONYX_STATUS_OK) return status;
  const onyx_tensor *x = onyx__attn_input(inputs, input_count, 0);
  const onyx_tensor *pos = onyx__attn_input(inputs, input_count, st->ms ? 1 : 3);
  const onyx_tensor *cos = onyx__attn_input(inputs, input_count, st->ms ? 2 : 1);
  const onyx_tensor *sin = onyx__attn_input(inputs, input_count, st->ms ? 3 : 2);
  if (x == NULL || cos == NULL || sin == NULL || (st->ms && pos == NULL))
    return onyx__pc_error(ctx, ONYX_STATUS_INVALID_ARGUMENT,
                          st->ms ? "input, position_ids, cos_cache and sin_cache are required"
                                 : "input, cos_cache and sin_cache are required");
  if (!onyx__attn_is_float(x->dtype))
    return onyx__pc_error(ctx, ONYX_STATUS_UNSUPPORTED,
                          "input has type %s; float32, float16 or bfloat16 expected",
                          onyx__attn_dtype_name(x->dtype));
  if (cos->dtype != x->dtype || sin->dtype != x->dtype)
    return onyx__pc_error(ctx, ONYX_STATUS_INVALID_ARGUMENT,
                          "cos_cache (%s) and sin_cache (%s) must have the input's type %s",
                          onyx__attn_dtype_name(cos->dtype), onyx__attn_dtype_name(sin->dtype),
                          onyx__attn_dtype_name(x->dtype));
  if (pos != NULL && pos->dtype != ONYX_DTYPE_INT64)
    return onyx__pc_error(ctx, ONYX_STATUS_INVALID_ARGUMENT,
                          "position_ids has type %s; int64 expected",
                          onyx__attn_dtype_name(pos->dtype));

  rope_job j;
  memset(&j, 0, sizeof j);
  j.dtype = x->dtype;
  if (x->rank == 4) {
    j.bnsh = true;
    j.batch = x->dims[0];
    j.heads = x->dims[1];
    j.seq = x->dims[2];
    j.head_size = x->dims[3];
  } else if (x->rank == 3) {
    j.batch = x->dims[0];
    j.seq = x->dims[1];
    int64_t hidden = x->dims[2];
    if (st->num_heads > 0) {
      j.heads = st->num_heads;
    } else if (st->ms && st->rot_dim == 0 && cos->rank == 2 && cos->dims[1] > 0) {
      /* com.microsoft without num_heads: the head size is twice the table width. */
      j.heads = hidden / (2 * cos->dims[1]);
      if (j.heads == 0) j.heads = -1;
    } else {
      return onyx__pc_error(
          ctx, ONYX_STATUS_INVALID_ARGUMENT, "a 3-D input %s needs the num_heads attribute%s",
          onyx__pc_tensor_shape(x).s, st->ms ? " when rotary_embedding_dim is set" : "");
    }
    if (j.heads <= 0 || hidden % j.heads != 0)
      return onyx__pc_error(ctx, ONYX_STATUS_INVALID_ARGUMENT,
                            "hidden size %lld of input %s is not a multiple of the head count",
                            (long long)hidden, onyx__pc_tensor_shape(x).s);
    j.head_size = hidden / j.heads;
  } else {
    return onyx__pc_error(ctx, ONYX_STATUS_INVALID_ARGUMENT,
                          "input must be 3-D (B, S, N*H) or 4-D (B, N, S, H), got %s",
                          onyx__pc_tensor_shape(x).s);
  }
  if (j.head_size > ONYX__ATTN_MAX_HEAD)
    return onyx__pc_error(ctx, ONYX_STATUS_UNSUPPORTED,
                          "head size %lld exceeds the CPU kernel's limit of %d",
                          (long long)j.head_size, ONYX__ATTN_MAX_HEAD);
  j.rot = st->rot_dim > 0 ? st->rot_dim : j.head_size;
  if (j.rot > j.head_size || j.rot % 2 != 0)
    return onyx__pc_error(ctx, ONYX_STATUS_INVALID_ARGUMENT,
                          "rotary_embedding_dim %lld must be even and at most the head size "
                          "%lld",
                          (long long)j.rot, (long long)j.head_size);
  int64_t half = j.rot / 2;

  /* Tables: (max_position, half) with position ids, or (B, S, half) without (ONNX). */
  bool per_token = pos == NULL;
  if (per_token) {
    if (cos->rank != 3 || cos->dims[0] != j.batch || cos->dims[1] != j.seq || cos->dims[2] != half)
      return onyx__pc_error(ctx, ONYX_STATUS_INVALID_ARGUMENT,
                            "without position_ids cos_cache must be (%lld, %lld, %lld), got %s",
                            (long long)j.batch, (long long)j.seq, (long long)half,
                            onyx__pc_tensor_shape(cos).s);
  } else if (cos->rank != 2 || cos->dims[1] != half) {
    return onyx__pc_error(ctx, ONYX_STATUS_INVALID_ARGUMENT,
                          "cos_cache must be (max_position, %lld) for rotary dim %lld, got %s",
                          (long long)half, (long long)j.rot, onyx__pc_tensor_shape(cos).s);
  }
  if (sin->rank != cos->rank || memcmp(sin->dims, cos->dims, sizeof(int64_t) * cos->rank) != 0)
    return onyx__pc_error(ctx, ONYX_STATUS_INVALID_ARGUMENT,
                          "sin_cache %s and cos_cache %s differ in shape",
                          onyx__pc_tensor_shape(sin).s, onyx__pc_tensor_shape(cos).s);
  j.table.cos = cos->data;
  j.table.sin = sin->data;
  j.table.dtype = cos->dtype;
  j.table.half = half;
  j.table.interleaved = st->interleaved;
  j.table.rows = per_token ? j.batch * j.seq : cos->dims[0];
  if (pos != NULL) {
    j.pos = pos->data;
    if (st->ms && pos->rank == 1 && pos->dims[0] == 1) {
      j.pos_scalar = true;
    } else if (pos->rank != 2 || pos->dims[0] != j.batch || pos->dims[1] != j.seq) {
      return onyx__pc_error(ctx, ONYX_STATUS_INVALID_ARGUMENT,
                            "position_ids must be (%lld, %lld)%s, got %s", (long long)j.batch,
                            (long long)j.seq, st->ms ? " or (1)" : "",
                            onyx__pc_tensor_shape(pos).s);
    }
    for (int64_t b = 0; b < j.batch; ++b)
      for (int64_t s = 0; s < j.seq; ++s) {
        int64_t r = rope_table_row(&j, b, s);
        if (r < 0 || r >= j.table.rows)
          return onyx__pc_error(ctx, ONYX_STATUS_INVALID_ARGUMENT,
                                "position %lld (batch %lld, token %lld) is outside the "
                                "cos/sin table of %lld rows",
                                (long long)r, (long long)b, (long long)s, (long long)j.table.rows);
        if (j.pos_scalar) break;
      }
  }

  if (!st->head.output_present[0]) return ONYX_STATUS_OK;
  onyx_tensor *y = NULL;
  status = ctx->alloc_output(ctx, 0, x->dtype, x->rank, x->dims, &y);
  if (status != ONYX_STATUS_OK) return status;
  j.x = x->data;
  j.y = y->data;
  onyx__attn_parallel_for(&st->head.threads, (size_t)(j.batch * j.seq), rope_task, &j);
  return ONYX_STATUS_OK;
}

/* The output has the input's geometry. */
static onyx_status rope_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                              onyx_tensor *outputs, size_t output_count) {
  const rope_state *st = state;
  if (input_count < 1 || inputs[0].dtype == ONYX_DTYPE_UNDEFINED)
    return ONYX_STATUS_INVALID_ARGUMENT;
  if (st->head.output_present[0])
    onyx__attn_infer_out(outputs, output_count, 0, inputs[0].dtype, inputs[0].rank, inputs[0].dims);
  return ONYX_STATUS_OK;
}

const onyx_kernel_table onyx_cpu_rotary_kernel = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "",
    .op_type = "RotaryEmbedding",
    .since_opset = 23,
    .until_opset = 0,
    .type_input = 0,
    .type_mask = ONYX__ATTN_FLOAT_TYPES,
    .supports = NULL,
    .create = rope_create_onnx,
    .destroy = onyx__attn_state_free,
    .workspace = NULL,
    .compute = rope_compute,
    .infer = rope_infer,
};

const onyx_kernel_table onyx_cpu_ms_rotary_kernel = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "com.microsoft",
    .op_type = "RotaryEmbedding",
    .since_opset = 1,
    .until_opset = 0,
    .type_input = 0,
    .type_mask = ONYX__ATTN_FLOAT_TYPES,
    .supports = NULL,
    .create = rope_create_ms,
    .destroy = onyx__attn_state_free,
    .workspace = NULL,
    .compute = rope_compute,
    .infer = rope_infer,
};
