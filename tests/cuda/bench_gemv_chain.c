/*
 * Decode GEMVs the way the decoder runs them: back to back in one CUDA graph, each a
 * programmatic dependent of the one before (option.pdl), every weight distinct so
 * that nothing is served from L2 across replays. GB/s of weight bytes against the
 * device-to-device copy bandwidth measured in the same run (bytes read + written).
 *
 *   onyx_bench_gemv_chain [LAYERS]
 *
 * Qwen2.5-0.5B's products at M = 1: a layer is qkv 1152x896 (q|k|v packed), o 896x896,
 * gate|up 9728x896 (merged) and down 896x4864, then the lm_head 151936x896 once.
 * int4: MatMulNBits' GEMV (cuda_matmul_nbits.cu), 4-bit codes in blocks of 32, float16
 * scales. fp16: the MatMul GEMV (cuda_gemv.cu), W as [K, N]. For each launch form:
 *   chain   LAYERS layers and the lm_head, one graph;
 *   <shape> LAYERS distinct copies of one shape chained (its per-kernel time in a
 *           chain); the lm_head alone in its graph (its time includes one graph launch).
 * Forms (tune bits, int4/fp16): late = the next kernel let in after the loads (the
 * int4 GEMV before) or at the end (the fp16 one before); early = at the start; pf =
 * weights asked into L2 before the wait; u8 = 8 rows in flight a thread, a64 = rows
 * asked into L2 64 ahead; default = what the launchers choose; no-pdl = the default
 * with ordinary launches (each kernel after the one before has ended: the isolated
 * figure); int4 v1 = the default and no-pdl on the per-weight-scale kernel, beside the
 * block-sum kernel (v2) that the others use (fp16: v1 forms = the default); occ2 = the
 * lm_head's v2 blocks two an SM, not three; nk = fp16 W stored
 * [N, K] (the transpose_weights layout, cuda_gemv_nk.cuh): default (the next kernel let in as
 * blocks end), early (at the start), pf (rows asked into L2 before the wait), g4 (four warps a
 * row), no-pdl. Every form's outputs
 * are checked against the definition in double on sampled columns (rel: worst error over the
 * largest |y|). Each shape's rows end with its anchor, "copy chain": the same bytes moved by
 * as many device-to-device copies chained in one graph (GB/s of bytes read + written, as the
 * copy bandwidth counts them), and "dependent read": as many nodes of dependent_read.cu's
 * kernel, which reads the bytes, waits for the node before and writes N outputs (the floor
 * under a product in the chain; int4 also: with x staged in shared memory, with a block
 * sum, over one CTA per 16 rows as the GEMV's grid); then the default form as a share of
 * each anchor's speed. Prints ratios; asserts nothing.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cuda_impl.h"
#include "cuda_nbits.h"
#include "onyx_abi.h"

cudaError_t onyx_bench_dependent_read(const void *w, size_t bytes, const void *x, int k, void *y,
                                      int n, int sms, int form, int blocks, cudaStream_t stream);

bool onyx__cuda_pdl = true; /* the provider's option.pdl, read by cuda_gemv.cu's launcher */

#define CHECK(x)                                                                                   \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));          \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng >> 16);
}

static uint16_t f2h(float f) { /* float -> float16 bits, round to nearest even (normal range) */
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u, e = (x >> 23) & 0xFF, m = x & 0x7FFFFFu;
  int ee = (int)e - 127 + 15;
  if (ee <= 0) return (uint16_t)sign;
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
static float urand(float lo, float hi) {
  return lo + (hi - lo) * (float)(rnd() & 0xFFFF) / 65536.0f;
}

static void *dev_upload(const void *host, size_t bytes) {
  void *d = NULL;
  CHECK(cudaMalloc(&d, bytes));
  CHECK(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice));
  return d;
}

/* One product of the chain: weights (int4: codes + scales; fp16: W), its input
 * (the shared activation of its K) and its own output. Host copies for the check. */
typedef struct prod {
  int64_t n, k, kb;
  int fp16;
  uint8_t *hb;
  uint16_t *hs, *hw;
  void *b, *s, *w, *wt, *y; /* wt: W^T (fp16) */
  float *partial;
  unsigned *counters;
  size_t bytes; /* weight bytes streamed */
  /* The fused int4 form: the prologue this product takes (a norm before qkv, gate|up
   * and the lm_head; silu(gate)·up before down; none before o) and its inputs. */
  int pro;
  const void *fx; /* X (norm) or GU (SiLU) */
} prod;

static void prod_init(prod *p, int64_t n, int64_t k, int fp16) {
  memset(p, 0, sizeof *p);
  p->n = n;
  p->k = k;
  p->fp16 = fp16;
  p->kb = (k + 31) / 32;
  if (fp16) {
    const size_t cnt = (size_t)(n * k);
    p->hw = malloc(cnt * 2);
    for (size_t i = 0; i < cnt; ++i) p->hw[i] = f2h(urand(-0.05f, 0.05f));
    p->w = dev_upload(p->hw, cnt * 2);
    uint16_t *t = malloc(cnt * 2); /* W^T for the [N, K] forms */
    for (int64_t kk = 0; kk < k; ++kk)
      for (int64_t nn = 0; nn < n; ++nn) t[nn * k + kk] = p->hw[kk * n + nn];
    p->wt = dev_upload(t, cnt * 2);
    free(t);
    p->bytes = cnt * 2;
    const int64_t split = onyx__cuda_gemv_split(k, n);
    if (split > 1) {
      CHECK(cudaMalloc((void **)&p->partial, (size_t)(split * n) * 4));
      CHECK(cudaMalloc((void **)&p->counters, (size_t)((n + 255) / 256) * 4));
      CHECK(cudaMemset(p->counters, 0, (size_t)((n + 255) / 256) * 4));
    }
  } else {
    const size_t bb = (size_t)(n * p->kb * 16), sc = (size_t)(n * p->kb);
    p->hb = malloc(bb);
    p->hs = malloc(sc * 2);
    for (size_t i = 0; i < bb; ++i) p->hb[i] = (uint8_t)rnd();
    for (size_t i = 0; i < sc; ++i) p->hs[i] = f2h(urand(0.005f, 0.03f));
    p->b = dev_upload(p->hb, bb);
    p->s = dev_upload(p->hs, sc * 2);
    p->bytes = bb + sc * 2;
  }
  CHECK(cudaMalloc(&p->y, (size_t)n * 2));
}

static void prod_free(prod *p) {
  free(p->hb);
  free(p->hs);
  free(p->hw);
  cudaFree(p->b);
  cudaFree(p->s);
  cudaFree(p->w);
  cudaFree(p->wt);
  cudaFree(p->y);
  cudaFree(p->partial);
  cudaFree(p->counters);
}

/* The launch forms: tune bits of each route, and whether launches are programmatic. */
typedef struct form {
  const char *name;
  int nb_tune, mm_tune;
  bool plain;
  bool nk; /* fp16 only: W as [N, K] */
  bool
      fused; /* int4 only: A made by the GEMV's prologue (RMSNormMatMulNBits, SiluMulMatMulNBits) */
} form;

/* The fused form's shared inputs: X, skip and gamma of every norm, its S, and GU. */
static struct { void *x, *skip, *gamma, *sum, *gu; } fin;

static cudaError_t prod_launch(const prod *p, const void *x, const form *f, int sms,
                               cudaStream_t st) {
  if (p->fp16) {
    onyx__cuda_gemv_args a = {.dtype = ONYX_DTYPE_FLOAT16,
                              .m = 1,
                              .n = p->n,
                              .k = p->k,
                              .x = x,
                              .w = p->w,
                              .y = p->y,
                              .partial = p->partial,
                              .counters = p->counters,
                              .tune = f->mm_tune,
                              .w_nk = f->nk,
                              .alpha = 1.0f};
    if (f->nk) a.w = p->wt;
    onyx__cuda_pdl = !f->plain;
    return onyx__cuda_launch_gemv(&a, st);
  }
  onyx__cuda_nbits_args a;
  memset(&a, 0, sizeof a);
  a.dtype = ONYX_DTYPE_FLOAT16;
  a.bits = 4;
  a.m = 1;
  a.n = p->n;
  a.k = p->k;
  a.block_size = 32;
  a.k_blocks = p->kb;
  a.a = x;
  a.b = p->b;
  a.scales = p->s;
  a.y = p->y;
  a.sm_count = sms;
  a.tune = f->nb_tune;
  a.plain = f->plain;
  if (f->fused && p->pro != ONYX__CUDA_NBITS_PRO_NONE) {
    a.prologue = p->pro;
    a.a = p->fx;
    a.skip = fin.skip;
    a.gamma = fin.gamma;
    a.sum = fin.sum;
    a.epsilon = 1e-6f;
  }
  return onyx__cuda_launch_nbits_gemv(&a, st);
}

/* Worst |y − definition| over sampled columns, relative to the largest |definition|. */
static double prod_check(const prod *p, const uint16_t *hx) {
  uint16_t *y = malloc((size_t)p->n * 2);
  CHECK(cudaMemcpy(y, p->y, (size_t)p->n * 2, cudaMemcpyDeviceToHost));
  double worst = 0, big = 1e-30;
  const int64_t step = p->n > 256 ? p->n / 251 : 1;
  for (int64_t n = 0; n < p->n; n += step) {
    double acc = 0;
    for (int64_t k = 0; k < p->k; ++k) {
      double w;
      if (p->fp16) {
        w = h2f(p->hw[k * p->n + n]);
      } else {
        const int q = (p->hb[n * p->kb * 16 + k / 2] >> (4 * (k & 1))) & 15;
        w = (double)(q - 8) * h2f(p->hs[n * p->kb + k / 32]);
      }
      acc += w * h2f(hx[k]);
    }
    const double d = fabs((double)h2f(y[n]) - acc);
    worst = d > worst || d != d ? d : worst;
    if (fabs(acc) > big) big = fabs(acc);
  }
  free(y);
  return worst / big;
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
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFree(a);
  cudaFree(b);
  return 2.0 * (double)bytes * 10 / (ms * 1e-3) / 1e9;
}

/* The median of n timings in milliseconds, in microseconds (sorts t). */
static double median_us(float *t, int n) {
  for (int i = 1; i < n; ++i)
    for (int j = i; j > 0 && t[j] < t[j - 1]; --j) {
      float tmp = t[j];
      t[j] = t[j - 1];
      t[j - 1] = tmp;
    }
  return 1000.0 * t[n / 2];
}

/* Median microseconds of one replay of the products ps[0..count) captured in order. */
static double time_chain(prod *const *ps, int count, void *const *xs, const form *f, int sms,
                         cudaStream_t st) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < count; ++i) CHECK(prod_launch(ps[i], xs[i], f, sms, st));
  CHECK(cudaStreamEndCapture(st, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CHECK(cudaGraphLaunch(exec, st));
  CHECK(cudaGraphLaunch(exec, st));
  enum { REPS = 9 };
  cudaEvent_t ev[REPS + 1];
  for (int r = 0; r <= REPS; ++r) CHECK(cudaEventCreate(&ev[r]));
  CHECK(cudaEventRecord(ev[0], st));
  for (int r = 0; r < REPS; ++r) {
    CHECK(cudaGraphLaunch(exec, st));
    CHECK(cudaEventRecord(ev[r + 1], st));
  }
  CHECK(cudaEventSynchronize(ev[REPS]));
  float t[REPS];
  for (int r = 0; r < REPS; ++r) CHECK(cudaEventElapsedTime(&t[r], ev[r], ev[r + 1]));
  for (int r = 0; r <= REPS; ++r) cudaEventDestroy(ev[r]);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return median_us(t, REPS);
}

/* Median microseconds of one replay of exec (instantiated, not yet launched). */
static double replay_us(cudaGraphExec_t exec, cudaStream_t st) {
  enum { REPS = 9 };
  float t[REPS];
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  CHECK(cudaGraphLaunch(exec, st));
  for (int r = 0; r < REPS; ++r) {
    CHECK(cudaEventRecord(e0, st));
    CHECK(cudaGraphLaunch(exec, st));
    CHECK(cudaEventRecord(e1, st));
    CHECK(cudaEventSynchronize(e1));
    CHECK(cudaEventElapsedTime(&t[r], e0, e1));
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return median_us(t, REPS);
}

/* The anchors for one shape's row, each `count` nodes over distinct sources of `bytes`
 * chained in one graph as the products are (us per replay, median):
 *   kind < 0:  device-to-device copies (what moving the bytes costs at that size);
 *   kind >= 0: dependent_read.cu's kernel in that form over `blocks` CTAs (0: two an
 *              SM), x of k halves in and n halves out (what a node that reads the bytes
 *              and waits for the one before costs; with the forms, what staging x and
 *              a block sum add). */
enum { MAX_ANCHOR_NODES = 64 };
static double time_anchor_chain(int kind, int blocks, size_t bytes, int count, const void *x, int k,
                                int n, int sms, cudaStream_t st) {
  void *dst, *src[MAX_ANCHOR_NODES];
  if (count > MAX_ANCHOR_NODES) {
    fprintf(stderr, "anchor chain: %d nodes asked, at most %d\n", count, MAX_ANCHOR_NODES);
    exit(1);
  }
  bytes &= ~(size_t)15;
  CHECK(cudaMalloc(&dst, bytes > (size_t)n * 2 ? bytes : (size_t)n * 2));
  for (int i = 0; i < count; ++i) {
    CHECK(cudaMalloc(&src[i], bytes));
    CHECK(cudaMemsetAsync(src[i], i + 1, bytes, st));
  }
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < count; ++i)
    CHECK(kind >= 0 ? onyx_bench_dependent_read(src[i], bytes, x, k, dst, n, sms, kind, blocks, st)
                    : cudaMemcpyAsync(dst, src[i], bytes, cudaMemcpyDeviceToDevice, st));
  CHECK(cudaStreamEndCapture(st, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  const double us = replay_us(exec, st);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  for (int i = 0; i < count; ++i) cudaFree(src[i]);
  cudaFree(dst);
  return us;
}

typedef struct shape {
  const char *name;
  int64_t n, k;
} shape;

static const shape layer[4] = {{"qkv 1152x896", 1152, 896},
                               {"o 896x896", 896, 896},
                               {"gate|up 9728x896", 9728, 896},
                               {"down 896x4864", 896, 4864}};
static const shape lm_head = {"lm_head 151936x896", 151936, 896};

static const form forms[] = {
    {"no-pdl", 0, 0, true, false, false},
    {"late", ONYX__CUDA_NBITS_TUNE_SET | ONYX__CUDA_NBITS_TUNE_V2, ONYX__CUDA_GEMV_TUNE_SET, false,
     false, false},
    {"early/u8", ONYX__CUDA_NBITS_TUNE_SET | ONYX__CUDA_NBITS_TUNE_V2 | ONYX__CUDA_NBITS_TUNE_EARLY,
     ONYX__CUDA_GEMV_TUNE_SET | ONYX__CUDA_GEMV_TUNE_EARLY | ONYX__CUDA_GEMV_TUNE_UNROLL8, false,
     false, false},
    {"pf+early/a64",
     ONYX__CUDA_NBITS_TUNE_SET | ONYX__CUDA_NBITS_TUNE_V2 | ONYX__CUDA_NBITS_TUNE_PREFETCH |
         ONYX__CUDA_NBITS_TUNE_EARLY,
     ONYX__CUDA_GEMV_TUNE_SET | ONYX__CUDA_GEMV_TUNE_EARLY | 2 << 4, false, false, false},
    {"pf+early/u8a64",
     ONYX__CUDA_NBITS_TUNE_SET | ONYX__CUDA_NBITS_TUNE_V2 | ONYX__CUDA_NBITS_TUNE_PREFETCH |
         ONYX__CUDA_NBITS_TUNE_EARLY,
     ONYX__CUDA_GEMV_TUNE_SET | ONYX__CUDA_GEMV_TUNE_EARLY | ONYX__CUDA_GEMV_TUNE_UNROLL8 | 2 << 4,
     false, false, false},
    {"default", 0, 0, false, false, false},
    {"v1 default", ONYX__CUDA_NBITS_TUNE_V1, 0, false, false, false},
    {"v1 no-pdl", ONYX__CUDA_NBITS_TUNE_V1, 0, true, false, false},
    {"occ2", ONYX__CUDA_NBITS_TUNE_OCC2, 0, false, false, false},
    {"fused default", 0, 0, false, false, true},
    {"fused no-pdl", 0, 0, true, false, true},
    {"nk default", 0, 0, false, true, false},
    {"nk early", 0, ONYX__CUDA_GEMV_TUNE_SET | ONYX__CUDA_GEMV_TUNE_EARLY, false, true, false},
    {"nk pf", 0, ONYX__CUDA_GEMV_TUNE_SET | 1 << 4, false, true, false},
    {"nk g4", 0, ONYX__CUDA_GEMV_TUNE_SET | ONYX__CUDA_GEMV_TUNE_NK_SPLIT4, false, true, false},
    {"nk no-pdl", 0, 0, true, true, false},
};
#define FORMS (int)(sizeof forms / sizeof forms[0])

static void print_row(const char *what, const char *fname, double us, int kernels, size_t bytes,
                      double copy, double rel) {
  const double gbs = (double)bytes / (us * 1e-6) / 1e9;
  printf("%-22s %-19s %9.2f %7.2f %7.0f %6.1f%%  %.1e\n", what, fname, us, us / kernels, gbs,
         100.0 * gbs / copy, rel);
}

/* Host copies of what the fused form's prologues make: the normed rows of X + skip and
 * silu(gate)·up, each rounded to float16 as the kernels round them. */
static uint16_t fin_hnorm[896], fin_hsilu[4864];

static float silu_mul_f(float a, float b) {
  const float s = a >= 0.0f ? 1.0f / (1.0f + expf(-a)) : expf(a) / (1.0f + expf(a));
  return a * s * b;
}

static void fused_inputs_init(void) {
  uint16_t hx[896], hs[896], hg[896], hgu[9728];
  double ss = 0;
  for (int i = 0; i < 896; ++i) {
    hx[i] = f2h(urand(-3.0f, 3.0f));
    hs[i] = f2h(urand(-3.0f, 3.0f));
    hg[i] = f2h(urand(0.5f, 1.5f));
    const float v = h2f(hx[i]) + h2f(hs[i]);
    ss += (double)v * v;
  }
  const float inv = 1.0f / sqrtf((float)(ss / 896) + 1e-6f);
  for (int i = 0; i < 896; ++i) fin_hnorm[i] = f2h((h2f(hx[i]) + h2f(hs[i])) * inv * h2f(hg[i]));
  for (int i = 0; i < 9728; ++i) hgu[i] = f2h(urand(-2.0f, 2.0f));
  for (int i = 0; i < 4864; ++i) fin_hsilu[i] = f2h(silu_mul_f(h2f(hgu[i]), h2f(hgu[4864 + i])));
  fin.x = dev_upload(hx, sizeof hx);
  fin.skip = dev_upload(hs, sizeof hs);
  fin.gamma = dev_upload(hg, sizeof hg);
  fin.gu = dev_upload(hgu, sizeof hgu);
  CHECK(cudaMalloc(&fin.sum, 896 * 2));
}

static void fused_inputs_free(void) {
  cudaFree(fin.x);
  cudaFree(fin.skip);
  cudaFree(fin.gamma);
  cudaFree(fin.gu);
  cudaFree(fin.sum);
  memset(&fin, 0, sizeof fin);
}

/* The A a product of form f multiplies (host copy, for the check). */
static const uint16_t *prod_input(const prod *p, const form *f, const uint16_t *hx896,
                                  const uint16_t *hx4864) {
  if (f->fused && p->pro == ONYX__CUDA_NBITS_PRO_NORM) return fin_hnorm;
  if (f->fused && p->pro == ONYX__CUDA_NBITS_PRO_SILU) return fin_hsilu;
  return p->k == 896 ? hx896 : hx4864;
}

/* The chain and each shape's own chain for one precision, over every form. */
static void run_precision(int fp16, int layers, double copy, int sms, cudaStream_t st) {
  const int count = 4 * layers + 1;
  prod *all = calloc((size_t)count, sizeof *all);
  prod **ps = calloc((size_t)count, sizeof *ps);
  void **xs = calloc((size_t)count, sizeof *xs);
  /* Inputs: one random activation per K, read by every product of that K. */
  uint16_t *hx896 = malloc(896 * 2), *hx4864 = malloc(4864 * 2);
  for (int i = 0; i < 896; ++i) hx896[i] = f2h(urand(-1.0f, 1.0f));
  for (int i = 0; i < 4864; ++i) hx4864[i] = f2h(urand(-1.0f, 1.0f));
  void *x896 = dev_upload(hx896, 896 * 2), *x4864 = dev_upload(hx4864, 4864 * 2);
  if (!fp16) fused_inputs_init();
  size_t total = 0, shape_bytes[4] = {0, 0, 0, 0};
  for (int i = 0; i < count; ++i) {
    const shape *sh = i < 4 * layers ? &layer[i % 4] : &lm_head;
    prod_init(&all[i], sh->n, sh->k, fp16);
    const int role = i < 4 * layers ? i % 4 : 0; /* the lm_head reads the final norm */
    all[i].pro = role == 1   ? ONYX__CUDA_NBITS_PRO_NONE
                 : role == 3 ? ONYX__CUDA_NBITS_PRO_SILU
                             : ONYX__CUDA_NBITS_PRO_NORM;
    all[i].fx = role == 3 ? fin.gu : fin.x;
    ps[i] = &all[i];
    xs[i] = sh->k == 896 ? x896 : x4864;
    total += all[i].bytes;
    if (i < 4 * layers) shape_bytes[i % 4] += all[i].bytes;
  }
  printf("-- %s: %d layers + lm_head, %.1f MB of weights a step\n",
         fp16 ? "fp16 MatMul GEMV" : "int4 MatMulNBits GEMV", layers, (double)total / 1e6);
  printf("%-22s %-19s %9s %7s %7s %7s  %s\n", "what", "form", "us", "us/kern", "GB/s", "of copy",
         "rel err");
  for (int f = 0; f < FORMS; ++f) {
    if ((forms[f].nk && !fp16) || (forms[f].fused && fp16)) continue;
    for (int i = 0; i < count; ++i)
      CHECK(cudaMemsetAsync(all[i].y, 0xFF, (size_t)all[i].n * 2, st));
    const double us = time_chain(ps, count, xs, &forms[f], sms, st);
    CHECK(cudaStreamSynchronize(st));
    double rel = 0;
    for (int i = 0; i < 5; ++i) { /* the first layer and the lm_head */
      const int j = i < 4 ? i : count - 1;
      const double r = prod_check(&all[j], prod_input(&all[j], &forms[f], hx896, hx4864));
      rel = r > rel || r != r ? r : rel;
    }
    print_row("chain", forms[f].name, us, count, total, copy, rel);
  }
  /* Each shape alone in a chain of its `layers` distinct copies; the lm_head over its
   * one copy (76 or 272 MB: past L2 already). */
  for (int s = 0; s < 5; ++s) {
    prod *sel[64];
    void *sx[64];
    int c = 0;
    for (int i = 0; i < count && c < 64; ++i) {
      const bool mine = s < 4 ? i < 4 * layers && i % 4 == s : i == count - 1;
      if (!mine) continue;
      sel[c] = &all[i];
      sx[c++] = xs[i];
    }
    const size_t bytes = s < 4 ? shape_bytes[s] : all[count - 1].bytes;
    const char *name = s < 4 ? layer[s].name : lm_head.name;
    double default_us = 0;
    for (int f = 0; f < FORMS; ++f) {
      if ((forms[f].nk && !fp16) || (forms[f].fused && fp16)) continue;
      CHECK(cudaMemsetAsync(sel[c - 1]->y, 0xFF, (size_t)sel[c - 1]->n * 2, st));
      const double us = time_chain(sel, c, sx, &forms[f], sms, st);
      CHECK(cudaStreamSynchronize(st));
      const double rel = prod_check(sel[c - 1], prod_input(sel[c - 1], &forms[f], hx896, hx4864));
      print_row(name, forms[f].name, us, c, bytes, copy, rel);
      if (strcmp(forms[f].name, "default") == 0) default_us = us;
    }
    /* Its anchors: the same bytes copied (read + write), and read by dependent nodes. */
    const size_t each = bytes / (size_t)c;
    const int k = (int)sel[0]->k, n = (int)sel[0]->n;
    const double cus = time_anchor_chain(-1, 0, each, c, NULL, 0, 0, sms, st);
    print_row(name, "copy chain (r+w)", cus, c, 2 * bytes, copy, 0.0);
    const double dus = time_anchor_chain(0, 0, each, c, sx[0], k, n, sms, st);
    print_row(name, "dependent read", dus, c, bytes, copy, 0.0);
    if (!fp16 && s < 4) { /* what the GEMV's shape of work adds to the floor */
      static const struct {
        const char *name;
        int form;
        bool gemv_grid;
      } dep[] = {{"dep + x staged", 1, false},
                 {"dep + x + sum", 3, false},
                 {"dep, 16-row grid", 0, true},
                 {"dep + x + sum, 16r", 3, true}};
      for (size_t d = 0; d < sizeof dep / sizeof dep[0]; ++d) {
        const int blocks = dep[d].gemv_grid ? (n + 15) / 16 : 0;
        print_row(name, dep[d].name,
                  time_anchor_chain(dep[d].form, blocks, each, c, sx[0], k, n, sms, st), c, bytes,
                  copy, 0.0);
      }
    }
    printf("%-22s default at %.0f%% of a copy's speed, %.0f%% of a dependent read's\n", name,
           100.0 * cus / default_us, 100.0 * dus / default_us);
  }
  if (!fp16) { /* the lm_head in steady state: three distinct copies chained */
    prod extra[2], *lm3[3] = {&all[count - 1], &extra[0], &extra[1]};
    void *lx3[3] = {xs[count - 1], xs[count - 1], xs[count - 1]};
    for (int i = 0; i < 2; ++i) {
      prod_init(&extra[i], lm_head.n, lm_head.k, fp16);
      extra[i].pro = ONYX__CUDA_NBITS_PRO_NORM;
      extra[i].fx = fin.x;
    }
    for (int f = 0; f < FORMS; ++f) {
      if (forms[f].nk || forms[f].fused || forms[f].plain) continue;
      CHECK(cudaMemsetAsync(lm3[2]->y, 0xFF, (size_t)lm3[2]->n * 2, st));
      const double us = time_chain(lm3, 3, lx3, &forms[f], sms, st);
      CHECK(cudaStreamSynchronize(st));
      const double rel = prod_check(lm3[2], prod_input(lm3[2], &forms[f], hx896, hx4864));
      print_row("lm_head x3", forms[f].name, us, 3, 3 * all[count - 1].bytes, copy, rel);
    }
    for (int i = 0; i < 2; ++i) prod_free(&extra[i]);
  }
  if (fp16) { /* the lm_head over the GEMV's unroll and L2 look-ahead (rows) */
    prod *lm = &all[count - 1];
    void *lx = xs[count - 1];
    char line[400];
    size_t len = 0;
    for (int u = 0; u < 2; ++u)
      for (int ahead = 0; ahead <= 4; ahead = ahead ? ahead * 2 : 1) {
        const form f = {"",
                        0,
                        ONYX__CUDA_GEMV_TUNE_SET | ONYX__CUDA_GEMV_TUNE_EARLY |
                            (u ? ONYX__CUDA_GEMV_TUNE_UNROLL8 : 0) | ahead << 4,
                        false,
                        false,
                        false};
        CHECK(cudaMemsetAsync(lm->y, 0xFF, (size_t)lm->n * 2, st));
        const double us = time_chain(&lm, 1, &lx, &f, sms, st);
        const double rel = prod_check(lm, hx896);
        len += (size_t)snprintf(line + len, sizeof line - len, " u%d/a%d:%.1f(%.0e)", u ? 8 : 4,
                                ahead * 32, us, rel);
      }
    printf("lm_head sweep, us (rel):%s\n", line);
  }
  for (int i = 0; i < count; ++i) prod_free(&all[i]);
  if (!fp16) fused_inputs_free();
  cudaFree(x896);
  cudaFree(x4864);
  free(hx896);
  free(hx4864);
  free(all);
  free(ps);
  free(xs);
}

int main(int argc, char **argv) {
  const int layers = argc > 1 ? atoi(argv[1]) : 24;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    printf("skipped: no CUDA device\n");
    return 0;
  }
  if (layers < 1 || layers > 64) {
    fprintf(stderr, "usage: %s [LAYERS 1..64]\n", argv[0]);
    return 2;
  }
  struct cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t st;
  CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  const double copy = copy_bandwidth(st);
  printf("device %s, %d SMs; device-to-device copy %.0f GB/s (read + write)\n", prop.name,
         prop.multiProcessorCount, copy);
  run_precision(0, layers, copy, prop.multiProcessorCount, st);
  run_precision(1, layers, copy, prop.multiProcessorCount, st);
  cudaStreamDestroy(st);
  return 0;
}
