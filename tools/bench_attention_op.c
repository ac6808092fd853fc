/* One GroupQueryAttention problem set up and timed for the attention benchmarks
 * (bench_attention_op.h). */
#include "bench_attention_op.h"

#include <string.h>

#include "cuda_attention_kernels.h"

static onyx_status b_alloc(onyx_compute_ctx *ctx, size_t index, uint32_t dtype, uint32_t rank,
                           const int64_t *dims, onyx_tensor **out) {
  bench_ctx *c = (bench_ctx *)ctx;
  onyx_tensor *t = &c->outs[index];
  memset(t, 0, sizeof *t);
  t->dtype = dtype;
  t->device = ONYX_DEVICE_CUDA;
  t->rank = rank;
  for (uint32_t i = 0; i < rank; ++i) t->dims[i] = dims[i];
  size_t bytes = (size_t)onyx_tensor_numel(t) * onyx_dtype_size(dtype);
  if (bytes > c->cap[index]) {
    if (c->mem[index] != NULL) CHECK(cudaFree(c->mem[index]));
    CHECK(cudaMalloc(&c->mem[index], bytes));
    c->cap[index] = bytes;
  }
  t->data = c->mem[index];
  *out = t;
  return ONYX_STATUS_OK;
}

static onyx_status b_alias(onyx_compute_ctx *ctx, size_t index, size_t input_index) {
  bench_ctx *c = (bench_ctx *)ctx;
  c->outs[index] = *c->inputs[input_index];
  return ONYX_STATUS_OK;
}

static void b_err(onyx_compute_ctx *ctx, const char *fmt, ...) {
  bench_ctx *c = (bench_ctx *)ctx;
  snprintf(c->err, sizeof c->err, "%s", fmt);
}

void bench_op_open(bench_op *op, bool prefill, int B, int hq, int hkv, int s, int d) {
  memset(op, 0, sizeof *op);
  const uint32_t dt = ONYX_DTYPE_BFLOAT16;
  op->prefill = prefill;
  op->B = B, op->hq = hq, op->hkv = hkv, op->s = s, op->d = d;
  const int S = prefill ? s : 1;
  const int L = prefill ? 0 : s; /* decode: shared buffer of s rows */
  ch_rng rng = {(uint64_t)(B * 131 + s * 7 + d)};
  int64_t qd[3] = {B, S, (int64_t)hq * d}, kd[3] = {B, S, (int64_t)hkv * d};
  ch_tensor_random(&op->q, dt, 3, qd, &rng, 1.0);
  ch_tensor_random(&op->k, dt, 3, kd, &rng, 1.0);
  ch_tensor_random(&op->v, dt, 3, kd, &rng, 1.0);
  if (L > 0) {
    int64_t pd[4] = {B, hkv, L, d};
    ch_tensor_random(&op->pk, dt, 4, pd, &rng, 1.0);
    ch_tensor_random(&op->pv, dt, 4, pd, &rng, 1.0);
  }
  int32_t *seqlens = malloc((size_t)B * sizeof(int32_t));
  for (int b = 0; b < B; ++b) seqlens[b] = s - 1;
  int64_t bd[1] = {B};
  ch_tensor_bytes(&op->sl, ONYX_DTYPE_INT32, 1, bd, seqlens, false);
  free(seqlens);
  int32_t t32 = s;
  ch_tensor_bytes(&op->tot, ONYX_DTYPE_INT32, 0, NULL, &t32, true); /* host, as ONNX Runtime */
  const onyx_tensor *in[7] = {
      &op->q.t,  &op->k.t,  &op->v.t, L > 0 ? &op->pk.t : NULL, L > 0 ? &op->pv.t : NULL,
      &op->sl.t, &op->tot.t};
  memcpy(op->in, in, sizeof in);
  ch_node_init(&op->node, "com.microsoft", "GroupQueryAttention", 1, 7, 3);
  ch_node_int(&op->node, "num_heads", hq);
  ch_node_int(&op->node, "kv_num_heads", hkv);
  for (int i = 0; i < 7; ++i) op->node.in_present[i] = op->in[i] != NULL;
  char err[256];
  if (onyx_cuda_gqa_kernel.create(NULL, &op->node.info, &op->state, err, sizeof err) !=
      ONYX_STATUS_OK) {
    fprintf(stderr, "create: %s\n", err);
    exit(1);
  }
  op->c.ctx.struct_size = sizeof op->c.ctx;
  op->c.ctx.version = ONYX_ABI_VERSION;
  op->c.ctx.alloc_output = b_alloc;
  op->c.ctx.alias_output = b_alias;
  op->c.ctx.set_error = b_err;
  op->c.inputs = op->in;
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

static void compute_or_exit(bench_op *op) {
  onyx_status st = onyx_cuda_gqa_kernel.compute(op->state, &op->c.ctx, op->in, 7);
  if (st != ONYX_STATUS_OK) {
    fprintf(stderr, "compute failed: %d %s\n", st, op->c.err);
    exit(1);
  }
}

/* Median milliseconds of ITERS event-timed calls after WARM warm-ups. */
static float time_calls(bench_op *op) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  float ts[ITERS];
  for (int i = 0; i < WARM + ITERS; ++i) {
    CHECK(cudaEventRecord(a, 0));
    compute_or_exit(op);
    CHECK(cudaEventRecord(b, 0));
    CHECK(cudaEventSynchronize(b));
    if (i >= WARM) CHECK(cudaEventElapsedTime(&ts[i - WARM], a, b));
  }
  CHECK(cudaGetLastError());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  qsort(ts, ITERS, sizeof ts[0], cmp_float);
  return ts[ITERS / 2];
}

/* Milliseconds a call of ITERS calls launched back to back between one pair of events. */
static float time_back_to_back(bench_op *op) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int i = 0; i < WARM + ITERS; ++i) {
    if (i == WARM) CHECK(cudaEventRecord(a, 0));
    compute_or_exit(op);
  }
  CHECK(cudaEventRecord(b, 0));
  CHECK(cudaEventSynchronize(b));
  float ms = 0.0f;
  CHECK(cudaEventElapsedTime(&ms, a, b));
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms / ITERS;
}

float bench_op_time(bench_op *op, uint64_t *ws, bool b2b) {
  onyx_tensor geo[7];
  memset(geo, 0, sizeof geo);
  for (size_t i = 0; i < 7; ++i)
    if (op->in[i] != NULL) {
      geo[i] = *op->in[i];
      geo[i].data = NULL;
    }
  onyx_workspace_requirement req;
  memset(&req, 0, sizeof req);
  onyx_cuda_gqa_kernel.workspace(op->state, geo, 7, &req);
  onyx_workspace_view views[ONYX_MAX_WORKSPACE_REGIONS];
  *ws = 0;
  for (uint32_t i = 0; i < req.count; ++i) {
    views[i].name = req.regions[i].name;
    views[i].bytes = req.regions[i].bytes;
    CHECK(cudaMalloc(&views[i].data, req.regions[i].bytes));
    *ws += req.regions[i].bytes;
  }
  op->c.ctx.workspace = views;
  op->c.ctx.workspace_count = req.count;
  float ms = b2b ? time_back_to_back(op) : time_calls(op);
  for (uint32_t i = 0; i < req.count; ++i) cudaFree(views[i].data);
  op->c.ctx.workspace = NULL;
  op->c.ctx.workspace_count = 0;
  return ms;
}

double bench_op_work(const bench_op *op) {
  if (op->prefill) return 4.0 * op->B * op->hq * (double)op->s * op->s * op->d / 2.0;
  return 2.0 * op->B * op->hkv * (double)op->s * op->d * 2.0;
}

void bench_op_close(bench_op *op) {
  for (int i = 0; i < 3; ++i)
    if (op->c.mem[i] != NULL) cudaFree(op->c.mem[i]);
  onyx_cuda_gqa_kernel.destroy(op->state);
  ch_tensor *all[] = {&op->q, &op->k, &op->v, &op->pk, &op->pv, &op->sl, &op->tot};
  for (int i = 0; i < 7; ++i) ch_tensor_free(all[i]);
  memset(op, 0, sizeof *op);
}
