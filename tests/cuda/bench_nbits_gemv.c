/*
 * The MatMulNBits decode GEMV on the device: GB/s of weight bytes (packed codes, scales,
 * zero points) streamed per product, against the device-to-device copy bandwidth
 * measured in the same run (bytes read + bytes written, cudaMemcpyAsync of 1 GiB).
 *
 *   onyx_bench_nbits_gemv [--quick | --m1]
 *
 * Shapes are Qwen2.5-0.5B's (hidden 896, kv 128, MLP 4864, vocabulary 151936), 4-bit
 * codes in blocks of 32 with float16 scales, as ONNX Runtime GenAI's builder writes
 * them. Each shape runs over enough distinct copies of its weights (>= 256 MiB in
 * all) that nothing is served from L2, launched from a captured CUDA graph so that
 * the figure is the device's and not the launch path's. "step" is one decode token's
 * products (24 layers and the lm_head), every weight distinct. Each row also sweeps
 * split K and the launch forms (tune bits: late = the next kernel let in after the
 * loads, pf = weights asked into L2 before the wait, early = the next kernel let in
 * at the start; default = early, and pf for weights up to 16 MiB; no-pdl = the
 * default with ordinary launches, each kernel after the previous has ended: the
 * isolated figure; v1 = the default on the per-weight-scale kernel, which M > 1 and
 * float zero points always use, beside v2 = the block-sum kernel the default takes for
 * M = 1; nb8 = v2 loading 8 chunk groups at a time, not 4). Every product, split and form is
 * checked against the definition in double on sampled columns (rel = worst error over the largest
 * |y|, the worst of the row). Prints ratios; asserts nothing about speed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cuda_nbits.h"
#include "onyx_abi.h"

#define CHECK(x)                                                                                   \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));          \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng >> 16);
}

static uint16_t f2h(float f) { /* float -> float16 bits, round to nearest even */
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, e = (x >> 23) & 0xFF, m = x & 0x7FFFFFu;
  int ee = (int)e - 127 + 15;
  if (ee <= 0) return (uint16_t)sign; /* tiny values: zero is enough here */
  uint32_t h = sign | (uint32_t)ee << 10 | m >> 13, rest = m & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return (uint16_t)h;
}
static float h2f(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1F, m = h & 0x3FFu;
  uint32_t x = e == 0 ? sign : sign | (e - 15 + 127) << 23 | m << 13;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

typedef struct shape {
  const char *name;
  int64_t n, k;
} shape;

/* One weight set on the device and its host copy (for the check). */
typedef struct wset {
  uint8_t *b;
  uint16_t *s;
  uint8_t *zp;
} wset;

typedef struct prob {
  int64_t n, k, kb, m;
  int zp; /* 0 or 1 (packed) */
  size_t b_bytes, s_bytes, z_bytes;
  uint8_t *hb, *hz; /* host */
  uint16_t *hs, *ha;
  uint16_t *da, *dy; /* device */
} prob;

static void prob_init(prob *p, int64_t n, int64_t k, int64_t m, int zp) {
  memset(p, 0, sizeof *p);
  p->n = n;
  p->k = k;
  p->m = m;
  p->zp = zp;
  p->kb = (k + 31) / 32;
  p->b_bytes = (size_t)(n * p->kb * 16);
  p->s_bytes = (size_t)(n * p->kb * 2);
  p->z_bytes = zp ? (size_t)(n * ((p->kb + 1) / 2)) : 0;
  p->hb = malloc(p->b_bytes);
  p->hs = malloc(p->s_bytes);
  p->hz = zp ? malloc(p->z_bytes) : NULL;
  p->ha = malloc((size_t)(m * k) * 2);
  for (size_t i = 0; i < p->b_bytes; ++i) p->hb[i] = (uint8_t)rnd();
  for (size_t i = 0; i < p->s_bytes / 2; ++i)
    p->hs[i] = f2h(0.005f + 0.025f * (float)(rnd() & 0xFFFF) / 65536.0f);
  for (size_t i = 0; i < p->z_bytes; ++i) p->hz[i] = (uint8_t)rnd();
  for (int64_t i = 0; i < m * k; ++i) p->ha[i] = f2h((float)(rnd() & 0xFFFF) / 32768.0f - 1.0f);
  CHECK(cudaMalloc((void **)&p->da, (size_t)(m * k) * 2));
  CHECK(cudaMalloc((void **)&p->dy, (size_t)(m * n) * 2));
  CHECK(cudaMemcpy(p->da, p->ha, (size_t)(m * k) * 2, cudaMemcpyHostToDevice));
}

static void prob_free(prob *p) {
  free(p->hb);
  free(p->hs);
  free(p->hz);
  free(p->ha);
  cudaFree(p->da);
  cudaFree(p->dy);
}

static void wset_alloc(const prob *p, wset *w, const wset *from) {
  CHECK(cudaMalloc((void **)&w->b, p->b_bytes));
  CHECK(cudaMalloc((void **)&w->s, p->s_bytes));
  w->zp = NULL;
  if (p->zp) CHECK(cudaMalloc((void **)&w->zp, p->z_bytes));
  if (from == NULL) {
    CHECK(cudaMemcpy(w->b, p->hb, p->b_bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(w->s, p->hs, p->s_bytes, cudaMemcpyHostToDevice));
    if (p->zp) CHECK(cudaMemcpy(w->zp, p->hz, p->z_bytes, cudaMemcpyHostToDevice));
  } else {
    CHECK(cudaMemcpy(w->b, from->b, p->b_bytes, cudaMemcpyDeviceToDevice));
    CHECK(cudaMemcpy(w->s, from->s, p->s_bytes, cudaMemcpyDeviceToDevice));
    if (p->zp) CHECK(cudaMemcpy(w->zp, from->zp, p->z_bytes, cudaMemcpyDeviceToDevice));
  }
}

static void wset_free(wset *w) {
  cudaFree(w->b);
  cudaFree(w->s);
  cudaFree(w->zp);
}

/* The GEMV's launch forms swept per shape (tune bits; plain: no programmatic launch). */
typedef struct form {
  const char *name;
  int tune;
  bool plain;
} form;
static const form forms[] = {
    {"default", 0, false},
    {"late", ONYX__CUDA_NBITS_TUNE_SET | ONYX__CUDA_NBITS_TUNE_V2, false},
    {"pf", ONYX__CUDA_NBITS_TUNE_SET | ONYX__CUDA_NBITS_TUNE_V2 | ONYX__CUDA_NBITS_TUNE_PREFETCH,
     false},
    {"early", ONYX__CUDA_NBITS_TUNE_SET | ONYX__CUDA_NBITS_TUNE_V2 | ONYX__CUDA_NBITS_TUNE_EARLY,
     false},
    {"pf+early",
     ONYX__CUDA_NBITS_TUNE_SET | ONYX__CUDA_NBITS_TUNE_V2 | ONYX__CUDA_NBITS_TUNE_PREFETCH |
         ONYX__CUDA_NBITS_TUNE_EARLY,
     false},
    {"no-pdl", 0, true},
    {"v1", ONYX__CUDA_NBITS_TUNE_V1, false},
    {"v1 no-pdl", ONYX__CUDA_NBITS_TUNE_V1, true},
    {"nb8", ONYX__CUDA_NBITS_TUNE_NB8, false},
};
#define FORM_V1 6 /* forms[FORM_V1]: the old kernel's default, printed beside the new one */
#define FORMS (int)(sizeof forms / sizeof forms[0])
static int g_form; /* the form args_of gives */

static onyx__cuda_nbits_args args_of(const prob *p, const wset *w, int split, int sms) {
  onyx__cuda_nbits_args a;
  memset(&a, 0, sizeof a);
  a.dtype = ONYX_DTYPE_FLOAT16;
  a.bits = 4;
  a.m = p->m;
  a.n = p->n;
  a.k = p->k;
  a.block_size = 32;
  a.k_blocks = p->kb;
  a.zp_kind = p->zp;
  a.zp_row = (p->kb + 1) / 2;
  a.a = p->da;
  a.b = w->b;
  a.scales = w->s;
  a.zp = w->zp;
  a.y = p->dy;
  a.sm_count = sms;
  a.split_k = split;
  a.tune = forms[g_form].tune;
  a.plain = forms[g_form].plain;
  return a;
}

/* Worst |got − want| over sampled columns, relative to the largest |want|. */
static double check(const prob *p) {
  uint16_t *y = malloc((size_t)(p->m * p->n) * 2);
  CHECK(cudaMemcpy(y, p->dy, (size_t)(p->m * p->n) * 2, cudaMemcpyDeviceToHost));
  double worst = 0, big = 1e-30;
  const int64_t step = p->n > 512 ? p->n / 509 : 1;
  for (int64_t n = 0; n < p->n; n += step) {
    for (int64_t m = 0; m < p->m; ++m) {
      double acc = 0;
      for (int64_t k = 0; k < p->k; ++k) {
        const int64_t blk = k / 32;
        const int q = (p->hb[n * p->kb * 16 + k / 2] >> (4 * (k & 1))) & 15;
        const int zp = p->zp ? (p->hz[n * ((p->kb + 1) / 2) + blk / 2] >> (4 * (blk & 1))) & 15 : 8;
        acc += (double)(q - zp) * h2f(p->hs[n * p->kb + blk]) * h2f(p->ha[m * p->k + k]);
      }
      double d = fabs((double)h2f(y[m * p->n + n]) - acc);
      if (d > worst) worst = d;
      if (fabs(acc) > big) big = fabs(acc);
    }
  }
  free(y);
  return worst / big;
}

/* Microseconds per product: `launches` products over the weight copies, captured as
 * one graph and replayed. */
static double time_gemv(const prob *p, wset *w, int copies, int split, int sms, cudaStream_t st) {
  const int launches = copies < 64 ? 64 : copies;
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < launches; ++i) {
    onyx__cuda_nbits_args a = args_of(p, &w[i % copies], split, sms);
    CHECK(onyx__cuda_launch_nbits_gemv(&a, st));
  }
  CHECK(cudaStreamEndCapture(st, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CHECK(cudaGraphLaunch(exec, st)); /* warm up */
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  const int reps = 5;
  CHECK(cudaEventRecord(e0, st));
  for (int r = 0; r < reps; ++r) CHECK(cudaGraphLaunch(exec, st));
  CHECK(cudaEventRecord(e1, st));
  CHECK(cudaEventSynchronize(e1));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, e0, e1));
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return 1000.0 * ms / (reps * launches);
}

static double copy_bandwidth(cudaStream_t st) {
  const size_t bytes = (size_t)1 << 30;
  void *a, *b;
  CHECK(cudaMalloc(&a, bytes));
  CHECK(cudaMalloc(&b, bytes));
  CHECK(cudaMemset(a, 1, bytes));
  CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, st));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  CHECK(cudaEventRecord(e0, st));
  for (int r = 0; r < 10; ++r) CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, st));
  CHECK(cudaEventRecord(e1, st));
  CHECK(cudaEventSynchronize(e1));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, e0, e1));
  cudaFree(a);
  cudaFree(b);
  return 2.0 * (double)bytes * 10 / (ms * 1e-3) / 1e9;
}

int main(int argc, char **argv) {
  const int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
  const int m1 = argc > 1 && strcmp(argv[1], "--m1") == 0; /* M = 1, with and without zp */
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    printf("skipped: no CUDA device\n");
    return 0;
  }
  struct cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t st;
  CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  const double copy = copy_bandwidth(st);
  printf("device %s, %d SMs; device-to-device copy %.0f GB/s (read + write)\n", prop.name,
         prop.multiProcessorCount, copy);
  static const shape shapes[] = {
      {"q/o 896x896", 896, 896},          {"kv 128x896", 128, 896},
      {"qkv 1152x896", 1152, 896},        {"gate/up 4864x896", 4864, 896},
      {"gate|up 9728x896", 9728, 896},    {"down 896x4864", 896, 4864},
      {"lm_head 151936x896", 151936, 896}};
  static const int splits[] = {0, 1, 2, 4, 8, 16};
  printf("%-20s %2s %3s %10s %8s %8s %8s %7s %7s  %s\n", "shape", "M", "zp", "bytes", "v1 us", "us",
         "GB/s", "v1 copy", "of copy", "rel err / split-k sweep (us)");
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; ++si) {
    for (int variant = 0; variant < (quick ? 1 : m1 ? 2 : 4); ++variant) {
      const int64_t m = variant == 2 ? 4 : variant == 3 ? 8 : 1;
      const int zp = variant == 1;
      prob p;
      prob_init(&p, shapes[si].n, shapes[si].k, m, zp);
      const size_t wbytes = p.b_bytes + p.s_bytes + p.z_bytes;
      int copies = (int)(((size_t)256 << 20) / wbytes) + 1;
      if (copies < 2) copies = 2;
      wset *w = calloc((size_t)copies, sizeof *w);
      for (int i = 0; i < copies; ++i) wset_alloc(&p, &w[i], i ? &w[0] : NULL);
      double rel = 0, us[6], fus[FORMS];
      char sweep[600] = "";
      size_t len = 0;
      for (int f = FORMS - 1; f >= 0; --f) { /* every form checked on its own output */
        g_form = f;
        onyx__cuda_nbits_args a = args_of(&p, &w[0], 0, prop.multiProcessorCount);
        CHECK(cudaMemsetAsync(p.dy, 0xFF, (size_t)(m * p.n) * 2, st)); /* poison */
        CHECK(onyx__cuda_launch_nbits_gemv(&a, st));
        CHECK(cudaStreamSynchronize(st));
        const double r = check(&p);
        rel = r > rel || r != r ? r : rel;
        fus[f] = time_gemv(&p, w, copies, 0, prop.multiProcessorCount, st);
      }
      for (int s = 0; s < 6; ++s) {
        if (s > 0) { /* each split checked too */
          onyx__cuda_nbits_args a = args_of(&p, &w[0], splits[s], prop.multiProcessorCount);
          CHECK(cudaMemsetAsync(p.dy, 0xFF, (size_t)(m * p.n) * 2, st));
          CHECK(onyx__cuda_launch_nbits_gemv(&a, st));
          CHECK(cudaStreamSynchronize(st));
          const double r = check(&p);
          rel = r > rel || r != r ? r : rel;
        }
        us[s] = s == 0 ? fus[0] : time_gemv(&p, w, copies, splits[s], prop.multiProcessorCount, st);
        if (s > 0 && !quick)
          len += (size_t)snprintf(sweep + len, sizeof sweep - len, " %d:%.2f", splits[s], us[s]);
      }
      for (int f = 1; f < FORMS; ++f)
        len += (size_t)snprintf(sweep + len, sizeof sweep - len, " %s:%.2f", forms[f].name, fus[f]);
      const double gbs = (double)wbytes / (us[0] * 1e-6) / 1e9;
      const double gbs1 = (double)wbytes / (fus[FORM_V1] * 1e-6) / 1e9;
      printf("%-20s %2lld %3s %10zu %8.2f %8.2f %8.0f %6.1f%% %6.1f%%  %.1e /%s\n", shapes[si].name,
             (long long)m, zp ? "u8" : "-", wbytes, fus[FORM_V1], us[0], gbs, 100.0 * gbs1 / copy,
             100.0 * gbs / copy, rel, sweep);
      for (int i = 0; i < copies; ++i) wset_free(&w[i]);
      free(w);
      prob_free(&p);
    }
  }

  /* One decode step: 24 layers of q, k, v, o, gate, up, down and the lm_head, M = 1. */
  static const int64_t layer[7][2] = {{896, 896},  {128, 896},  {128, 896}, {896, 896},
                                      {4864, 896}, {4864, 896}, {896, 4864}};
  const int nprod = 24 * 7 + 1;
  prob *ps = calloc((size_t)nprod, sizeof *ps);
  wset *ws = calloc((size_t)nprod, sizeof *ws);
  size_t total = 0;
  for (int i = 0; i < nprod; ++i) {
    const int64_t n = i < 24 * 7 ? layer[i % 7][0] : 151936, k = i < 24 * 7 ? layer[i % 7][1] : 896;
    prob_init(&ps[i], n, k, 1, 0);
    wset_alloc(&ps[i], &ws[i], NULL);
    total += ps[i].b_bytes + ps[i].s_bytes;
  }
  for (int f = FORM_V1; f >= 0; f -= FORM_V1) { /* v1, then the default */
    g_form = f;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < nprod; ++i) {
      onyx__cuda_nbits_args a = args_of(&ps[i], &ws[i], 0, prop.multiProcessorCount);
      CHECK(onyx__cuda_launch_nbits_gemv(&a, st));
    }
    CHECK(cudaStreamEndCapture(st, &graph));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphLaunch(exec, st));
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    CHECK(cudaEventRecord(e0, st));
    for (int r = 0; r < 10; ++r) CHECK(cudaGraphLaunch(exec, st));
    CHECK(cudaEventRecord(e1, st));
    CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    const double step_us = 1000.0 * ms / 10, step_gbs = (double)total / (step_us * 1e-6) / 1e9;
    printf("%-20s %2d %3s %10zu %8s %8.2f %8.0f %7s %6.1f%%  (%s: %d products, %.1f us each)\n",
           "step (24 layers+lm)", 1, "-", total, "", step_us, step_gbs, "", 100.0 * step_gbs / copy,
           forms[f].name, nprod, step_us / nprod);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
  for (int i = 0; i < nprod; ++i) {
    wset_free(&ws[i]);
    prob_free(&ps[i]);
  }
  free(ps);
  free(ws);
  cudaStreamDestroy(st);
  return 0;
}
