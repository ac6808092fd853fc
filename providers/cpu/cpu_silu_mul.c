/*
 * ai.onyx::SiluMul (docs/ops.md): H [..., 2N] -> Y [..., N],
 * Y[..., j] = silu(H[..., j]) · H[..., N + j], silu(a) = a·sigmoid(a).
 *
 * The gate_up_silu optimization makes it from a decoder MLP's Sigmoid, Mul and Mul
 * over one merged gate/up product. float32 computes exactly what those three nodes
 * did, in the same order — sigmoid by the vectorised loop of cpu_vmath.c, then
 * (a·s)·b, each product rounded to float32 — so that fusing changes no bit of a
 * float32 model's output. 16-bit types are widened a chunk at a time, computed the
 * same way in float32 and rounded once.
 */
#include <string.h>

#include "cpu_impl.h"

extern const onyx_kernel_table onyx__cpu_k_silu_mul;

#define CPU_SILU_MUL_TYPES                                                                         \
  (ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT32) | ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT16) |                       \
   ONYX_DTYPE_BIT(ONYX_DTYPE_BFLOAT16))

enum { CPU_SILU_CHUNK = 256 };

/* The output geometry of input `h`, or a message in why. */
static onyx_status cpu_silu_mul_shape(const onyx_tensor *h, uint32_t *rank, int64_t *dims,
                                      char *why, size_t cap) {
  if (!onyx__cpu_dtype_in(h->dtype, CPU_SILU_MUL_TYPES))
    return onyx__cpu_fail(why, cap, ONYX_STATUS_UNSUPPORTED,
                          "input 0 has dtype %s; float32, float16 or bfloat16 expected",
                          onyx__cpu_dtype_name(h->dtype));
  if (h->rank < 1 || h->dims[h->rank - 1] % 2 != 0)
    return onyx__cpu_fail(why, cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "input 0 %s must have at least one dim and an even last dim "
                          "(gate and up halves)",
                          onyx__cpu_tensor_shape(h).s);
  *rank = h->rank;
  memcpy(dims, h->dims, h->rank * sizeof dims[0]);
  dims[h->rank - 1] /= 2;
  return ONYX_STATUS_OK;
}

typedef struct cpu_silu_job {
  uint32_t dtype;
  const void *h;
  void *y;
  int64_t n; /* output elements a row */
} cpu_silu_job;

/* y[0, len) = silu(a)·b in float32, through the same steps as Sigmoid, Mul, Mul. */
static void cpu_silu_mul_f32(const float *a, const float *b, float *y, int64_t len) {
  float s[CPU_SILU_CHUNK];
  for (int64_t at = 0; at < len; at += CPU_SILU_CHUNK) {
    int64_t m = len - at < CPU_SILU_CHUNK ? len - at : CPU_SILU_CHUNK;
    onyx__cpu_sigmoid_f32(a + at, s, m);
    for (int64_t i = 0; i < m; ++i) {
      float act = a[at + i] * s[i];
      y[at + i] = act * b[at + i];
    }
  }
}

/* Output elements [begin, end): run by run within rows. */
static void cpu_silu_mul_slice(void *arg, int64_t begin, int64_t end) {
  const cpu_silu_job *j = arg;
  float ab[2][CPU_SILU_CHUNK], out[CPU_SILU_CHUNK];
  for (int64_t e = begin; e < end;) {
    int64_t row = e / j->n, col = e % j->n;
    int64_t len = j->n - col < end - e ? j->n - col : end - e;
    int64_t a0 = row * 2 * j->n + col, b0 = a0 + j->n;
    if (j->dtype == ONYX_DTYPE_FLOAT32) {
      const float *h = j->h;
      cpu_silu_mul_f32(h + a0, h + b0, (float *)j->y + e, len);
      e += len;
      continue;
    }
    if (len > CPU_SILU_CHUNK) len = CPU_SILU_CHUNK;
    for (int64_t i = 0; i < len; ++i) {
      ab[0][i] = onyx__cpu_load_f32(j->dtype, j->h, a0 + i);
      ab[1][i] = onyx__cpu_load_f32(j->dtype, j->h, b0 + i);
    }
    cpu_silu_mul_f32(ab[0], ab[1], out, len);
    for (int64_t i = 0; i < len; ++i) onyx__cpu_store_f32(j->dtype, j->y, e + i, out[i]);
    e += len;
  }
}

void onyx__cpu_silu_mul_rows(const onyx__cpu_provider *p, uint32_t dtype, const void *h, void *y,
                             int64_t rows, int64_t n) {
  if (rows <= 0 || n <= 0) return;
  cpu_silu_job j = {dtype, h, y, n};
  /* A transcendental and two products an element: slices as small as Sigmoid's. */
  onyx__cpu_parallel_range(p, rows * n, ONYX__CPU_PARALLEL_GRAIN / 8, cpu_silu_mul_slice, &j);
}

static onyx_status cpu_silu_mul_compute(void *state, onyx_compute_ctx *ctx,
                                        const onyx_tensor *const *inputs, size_t input_count) {
  const onyx__cpu_node *s = state;
  onyx_status st = onyx__cpu_check_inputs(ctx, inputs, input_count, 1);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor *h = inputs[0];
  uint32_t rank = 0;
  int64_t dims[ONYX_MAX_RANK];
  char why[ONYX__CPU_REASON_CAP] = "";
  if ((st = cpu_silu_mul_shape(h, &rank, dims, why, sizeof why)) != ONYX_STATUS_OK) {
    ctx->set_error(ctx, "%s", why);
    return st;
  }
  onyx_tensor *y = NULL;
  st = onyx__cpu_alloc_output(s, ctx, h->dtype, rank, dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL) return st;
  int64_t total = onyx_tensor_numel(y);
  if (total == 0) return ONYX_STATUS_OK;
  onyx__cpu_silu_mul_rows(s->provider, h->dtype, h->data, y->data, total / dims[rank - 1],
                          dims[rank - 1]);
  return ONYX_STATUS_OK;
}

static onyx_status cpu_silu_mul_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                                      onyx_tensor *outputs, size_t output_count) {
  if (input_count < 1 || inputs[0].dtype == ONYX_DTYPE_UNDEFINED)
    return ONYX_STATUS_INVALID_ARGUMENT;
  uint32_t rank = 0;
  int64_t dims[ONYX_MAX_RANK];
  char why[ONYX__CPU_REASON_CAP] = "";
  onyx_status st = cpu_silu_mul_shape(&inputs[0], &rank, dims, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__cpu_reason(state, st, why);
  onyx__cpu_infer_out(outputs, output_count, 0, inputs[0].dtype, rank, dims);
  return ONYX_STATUS_OK;
}

const onyx_kernel_table onyx__cpu_k_silu_mul = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "ai.onyx",
    .op_type = "SiluMul",
    .since_opset = 1,
    .until_opset = 0,
    .type_input = 0,
    .type_mask = CPU_SILU_MUL_TYPES,
    .create = onyx__cpu_create_plain,
    .destroy = onyx__cpu_destroy,
    .compute = cpu_silu_mul_compute,
    .infer = cpu_silu_mul_infer,
};
