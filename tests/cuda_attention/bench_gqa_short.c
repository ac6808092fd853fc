/*
 * GroupQueryAttention decode steps at short context inside a large buffer, timed as a
 * decode step runs them: captured once in a CUDA graph and replayed.
 *
 *   onyx_bench_gqa_short
 *
 * Each problem is one decode row (S = 1) of packed QKV with rotary (cos/sin caches) into
 * a shared past/present buffer of P rows per (b, kv head) holding `len` tokens
 * (seqlens_k = len - 1 on the device, total_sequence_length = P on the host): the
 * geometry an exporter's decode step has, where P is max_length. The op runs through
 * its kernel table (create, workspace, compute) as the core calls it; 20 calls are
 * captured into one graph (as consecutive layers would be), the graph is replayed 5
 * times to warm up and 50 times between events, and the time per call is printed.
 * No correctness check here (tests/cuda_attention does that); no thresholds.
 *
 * Where the library has them (weak references: a build from before they existed links
 * too), the decode route's knobs are swept: keys per effective split
 * (onyx__cuda_attn_decode_split_keys; 0 = every planned split), split 0 alone with the
 * new rows or not, PDL on/off.
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_attention_kernels.h"
#include "cuda_attn_harness.h"

extern int onyx__cuda_attn_decode_split_keys __attribute__((weak));
extern int onyx__cuda_attn_decode_split0_alone __attribute__((weak));
extern int onyx__cuda_attn_pdl __attribute__((weak));

#define CHECK(call)                                                                                \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));       \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

enum { CALLS = 20, WARM = 5, REPS = 50 };

/* A compute context whose output 0 is a buffer made before capture. */
typedef struct bctx {
  onyx_compute_ctx ctx;
  onyx_tensor y;
  const onyx_tensor *const *inputs;
  onyx_tensor present[2];
} bctx;

static onyx_status b_alloc(onyx_compute_ctx *ctx, size_t index, uint32_t dtype, uint32_t rank,
                           const int64_t *dims, onyx_tensor **out) {
  bctx *c = (bctx *)ctx;
  (void)dtype;
  (void)rank;
  (void)dims;
  if (index != 0) return ONYX_STATUS_UNSUPPORTED; /* presents alias the past */
  *out = &c->y;
  return ONYX_STATUS_OK;
}

static onyx_status b_alias(onyx_compute_ctx *ctx, size_t index, size_t input_index) {
  bctx *c = (bctx *)ctx;
  if (index < 1 || index > 2) return ONYX_STATUS_UNSUPPORTED;
  c->present[index - 1] = *c->inputs[input_index];
  return ONYX_STATUS_OK;
}

static void b_error(onyx_compute_ctx *ctx, const char *fmt, ...) {
  (void)ctx;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

typedef struct problem {
  int B, nq, nkv, H, P, len;
} problem;

/* Microseconds per call of one problem (the knobs as set), or -1 on a failure. */
static double time_problem(const problem *pb, cudaStream_t stream) {
  const uint32_t dt = ONYX_DTYPE_FLOAT16;
  const int B = pb->B, nq = pb->nq, nkv = pb->nkv, H = pb->H, P = pb->P;
  ch_rng rng = {0x5eed + (uint64_t)pb->len};
  ch_tensor q, pk, pv, sl, tot, cs, sn;
  int64_t qd[3] = {B, 1, (int64_t)(nq + 2 * nkv) * H};
  int64_t kd[4] = {B, nkv, P, H};
  int64_t cd[2] = {P, H / 2};
  ch_tensor_random(&q, dt, 3, qd, &rng, 1.0);
  ch_tensor_random(&pk, dt, 4, kd, &rng, 1.0);
  ch_tensor_random(&pv, dt, 4, kd, &rng, 1.0);
  ch_tensor_random(&cs, dt, 2, cd, &rng, 1.0);
  ch_tensor_random(&sn, dt, 2, cd, &rng, 1.0);
  int32_t seqlens[64];
  for (int b = 0; b < B && b < 64; ++b) seqlens[b] = pb->len - 1;
  int64_t bd[1] = {B};
  int32_t t32 = P;
  ch_tensor_bytes(&sl, ONYX_DTYPE_INT32, 1, bd, seqlens, false);
  ch_tensor_bytes(&tot, ONYX_DTYPE_INT32, 0, NULL, &t32, true);
  const onyx_tensor *in[9] = {&q.t, NULL, NULL, &pk.t, &pv.t, &sl.t, &tot.t, &cs.t, &sn.t};

  ch_node node;
  ch_node_init(&node, "com.microsoft", "GroupQueryAttention", 1, 9, 3);
  ch_node_int(&node, "num_heads", nq);
  ch_node_int(&node, "kv_num_heads", nkv);
  ch_node_int(&node, "do_rotary", 1);
  for (int i = 0; i < 9; ++i) {
    node.in_present[i] = in[i] != NULL;
    node.in_dtypes[i] = in[i] != NULL ? in[i]->dtype : ONYX_DTYPE_UNDEFINED;
  }
  const onyx_kernel_table *kt = &onyx_cuda_gqa_kernel;
  void *state = NULL;
  char err[256] = "";
  double us = -1.0;
  if (kt->create(NULL, &node.info, &state, err, sizeof err) != ONYX_STATUS_OK) {
    fprintf(stderr, "create: %s\n", err);
    return -1.0;
  }
  onyx_workspace_requirement req;
  memset(&req, 0, sizeof req);
  req.struct_size = sizeof req;
  req.version = ONYX_ABI_VERSION;
  onyx_tensor geo[9];
  for (int i = 0; i < 9; ++i) {
    memset(&geo[i], 0, sizeof geo[i]);
    if (in[i] != NULL) {
      geo[i] = *in[i];
      if (i != 6) geo[i].data = NULL;
    }
  }
  onyx_workspace_view views[ONYX_MAX_WORKSPACE_REGIONS];
  void *mem[ONYX_MAX_WORKSPACE_REGIONS] = {NULL};
  bctx c;
  memset(&c, 0, sizeof c);
  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec = NULL;
  if (kt->workspace(state, geo, 9, &req) != ONYX_STATUS_OK) goto done;
  for (uint32_t i = 0; i < req.count; ++i) {
    CHECK(cudaMalloc(&mem[i], req.regions[i].bytes));
    views[i].name = req.regions[i].name;
    views[i].data = mem[i];
    views[i].bytes = req.regions[i].bytes;
  }
  c.ctx.struct_size = sizeof c.ctx;
  c.ctx.version = ONYX_ABI_VERSION;
  c.ctx.core_data = &c;
  c.ctx.stream = stream;
  c.ctx.alloc_output = b_alloc;
  c.ctx.alias_output = b_alias;
  c.ctx.set_error = b_error;
  c.ctx.workspace = views;
  c.ctx.workspace_count = req.count;
  c.inputs = in;
  c.y.dtype = dt;
  c.y.device = ONYX_DEVICE_CUDA;
  c.y.rank = 3;
  c.y.dims[0] = B;
  c.y.dims[1] = 1;
  c.y.dims[2] = (int64_t)nq * H;
  CHECK(cudaMalloc(&c.y.data, (size_t)B * nq * H * 2));
  /* A plain call first, as the core runs a geometry once before it records it. */
  if (kt->compute(state, &c.ctx, in, 9) != ONYX_STATUS_OK) goto done;
  CHECK(cudaStreamSynchronize(stream));
  CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
  for (int i = 0; i < CALLS; ++i)
    if (kt->compute(state, &c.ctx, in, 9) != ONYX_STATUS_OK) {
      (void)cudaStreamEndCapture(stream, &graph);
      goto done;
    }
  CHECK(cudaStreamEndCapture(stream, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < WARM; ++i) CHECK(cudaGraphLaunch(exec, stream));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  CHECK(cudaEventRecord(e0, stream));
  for (int i = 0; i < REPS; ++i) CHECK(cudaGraphLaunch(exec, stream));
  CHECK(cudaEventRecord(e1, stream));
  CHECK(cudaEventSynchronize(e1));
  float ms = 0.0f;
  CHECK(cudaEventElapsedTime(&ms, e0, e1));
  us = ms * 1e3 / (REPS * CALLS);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
done:
  if (exec != NULL) cudaGraphExecDestroy(exec);
  if (graph != NULL) cudaGraphDestroy(graph);
  CHECK(cudaStreamSynchronize(stream));
  for (uint32_t i = 0; i < req.count; ++i) cudaFree(mem[i]);
  if (c.y.data != NULL) cudaFree(c.y.data);
  kt->destroy(state);
  ch_tensor *all[] = {&q, &pk, &pv, &sl, &tot, &cs, &sn};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) ch_tensor_free(all[i]);
  return us;
}

int main(void) {
  if (!ch_have_device()) {
    printf("no CUDA device\n");
    return 0;
  }
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const problem pbs[] = {
      {1, 14, 2, 64, 160, 100},    {1, 14, 2, 64, 16384, 100}, {1, 14, 2, 64, 4096, 64},
      {1, 14, 2, 64, 4096, 256},   {1, 14, 2, 64, 4096, 512},  {1, 14, 2, 64, 4096, 1024},
      {1, 14, 2, 64, 4096, 2048},  {1, 14, 2, 64, 4096, 4096}, {1, 14, 2, 64, 32768, 256},
      {1, 32, 8, 128, 4096, 64},   {1, 32, 8, 128, 4096, 256}, {1, 32, 8, 128, 4096, 1024},
      {1, 32, 8, 128, 4096, 4096}, {4, 14, 2, 64, 4096, 256},
  };
  const bool knobs = &onyx__cuda_attn_decode_split_keys != NULL && &onyx__cuda_attn_pdl != NULL;
  const bool alone = &onyx__cuda_attn_decode_split0_alone != NULL;
  /* Columns: keys a split (split 0 alone), 128 with split 0 taking tiles, no PDL. */
  const int sk[] = {128, 256, 0};
  const int nsk = knobs ? (int)(sizeof sk / sizeof sk[0]) : 1;
  printf("GQA decode row, fp16, packed QKV + rotary, shared buffer of P rows; graph replay, "
         "us per call (%d calls a graph)\n",
         CALLS);
  printf("%-28s", "problem");
  if (knobs) {
    for (int i = 0; i < nsk; ++i) printf(" %9s%-4d", "split_k=", sk[i]);
    if (alone) printf(" %13s", "128 not alone");
    printf(" %13s", "128 no PDL");
  } else {
    printf(" %13s", "op");
  }
  printf("\n");
  for (size_t i = 0; i < sizeof pbs / sizeof pbs[0]; ++i) {
    const problem *pb = &pbs[i];
    char name[64];
    snprintf(name, sizeof name, "B%d Hq%d Hkv%d D%d P%d len%d", pb->B, pb->nq, pb->nkv, pb->H,
             pb->P, pb->len);
    printf("%-28s", name);
    for (int k = 0; k < nsk; ++k) {
      if (knobs) {
        onyx__cuda_attn_decode_split_keys = sk[k];
        onyx__cuda_attn_pdl = 1;
      }
      printf(" %13.2f", time_problem(pb, stream));
      fflush(stdout);
    }
    if (knobs) {
      onyx__cuda_attn_decode_split_keys = 128;
      if (alone) {
        onyx__cuda_attn_decode_split0_alone = 0;
        printf(" %13.2f", time_problem(pb, stream));
        onyx__cuda_attn_decode_split0_alone = 1;
      }
      onyx__cuda_attn_pdl = 0;
      printf(" %13.2f", time_problem(pb, stream));
      onyx__cuda_attn_pdl = 1;
    }
    printf("\n");
  }
  cudaStreamDestroy(stream);
  return 0;
}
