/*
 * bench_attention_cuda — times the CUDA GroupQueryAttention kernel (bfloat16) on the
 * standard shapes of GPU.md and sets it beside PyTorch's scaled_dot_product_attention
 * (tools/torch_sdpa_gqa.py, run from here in the same process tree) as a ratio.
 *
 *   onyx_bench_attention_cuda [path/to/torch_sdpa_gqa.py | -]   ("-": no anchor)
 *   ONYX_BENCH_SHAPE=B,Hq,Hkv,S,D onyx_bench_attention_cuda      (one prefill shape)
 *
 * Method (as the anchor): fresh random inputs, 10 warm-up calls, then 50 calls each
 * timed with CUDA events, median. Prefill is the whole GQA op (first prompt: present
 * written, causal attention) on the route the dispatcher picks (the Hopper kernel on an
 * sm_90 device) and on the flash kernel (onyx__cuda_attn_force_hopper = 0); TFLOP/s
 * counts 4·B·Nq·S²·D/2 (causal). Decode is one token
 * against a shared KV buffer of Skv rows (present aliases past, the new row written in
 * place), on the route the dispatcher picks (the decode kernel, which appends the row
 * itself) and on the flash kernel (onyx__cuda_attn_force_decode = 0), then the decode
 * route's kernel variants (onyx__cuda_attn_decode_variant 1..8) and a sweep of forced
 * split counts (ONYX_BENCH_SKIP_VARIANT=N leaves variant N out); GB/s counts the
 * 2·B·Nkv·Skv·D·2 bytes of K and V read. Beside each decode row: the read rate of the
 * same bytes measured in this process (tests/cuda_attention/bench_read_rate.cu, best
 * single launch between events; again after the anchor, for drift), the op launched back
 * to back (host time per call hidden), the op in the rounds' own CTAs and on 16 CTAs
 * (onyx__cuda_attn_decode_grid: the tail, the rate one CTA streams), variants 3 (the
 * default before units prepared ahead) and 8 (prepared ahead) back to back and each on
 * 16 CTAs. The op is the production route, which picks v8 or v3 by units a CTA (the
 * variant it ran printed beside it). The ceiling table gives Onyx's and cuDNN's GB/s as
 * % of the read rate (the anchor's "_b2b" lines, from ONYX_ANCHOR_B2B=1, for the
 * back-to-back side), the last one the routed op beside v3 and v8.
 * ONYX_BENCH_DECODE_ONLY=1 skips the prefill shapes. Build:
 * the tests/cuda_attention CMake project (target onyx_bench_attention_cuda).
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_attention_op.h"
#include "bench_read_rate.h"
#include "cuda_attention_kernels.h"
#include "cuda_attn_harness.h"
#include "cuda_attn_impl.h"

/* Results, keyed like the anchor's lines. */
typedef struct result {
  char kind[8]; /* prefill / decode */
  int B, hq, hkv, s, d;
  double ours;         /* TFLOP/s or GB/s: the whole op */
  uint32_t route;      /* the route the op took */
  double kernel64;     /* the op on the flash kernel */
  double flash, cudnn; /* anchor, 0 when missing */
  double var[9];       /* decode: GB/s of the decode kernel's variants 1..8 */
  /* decode: the read rate of the same bytes in this process, the op back to back, the
   * op in the rounds' own CTAs (onyx__cuda_attn_decode_grid -1), OLD_V on 16 CTAs (the
   * per-SM rate: GB/s over 16, as before the routing), the anchor back to back */
  onyx_bench_read rd;
  double ours_b2b, grid_even, per_sm16, flash_b2b, cudnn_b2b;
  /* decode: variants OLD_V and NEW_V back to back, NEW_V's GB/s a CTA on 16 CTAs */
  double old_b2b, new_b2b, new_sm16;
  /* decode: the variant the production route ran, its units and CTAs */
  int op_v, op_grid;
  int64_t op_units;
} result;

/* The decode kernel's default before units were prepared ahead, and the variant that
 * prepares them (cuda_attn_decode.cu), timed side by side. */
enum { OLD_V = 3, NEW_V = 8 };

static result results[16];

static const char *route_name(uint32_t r) {
  return r == ONYX__CUDA_ROUTE_HOPPER   ? "hopper"
         : r == ONYX__CUDA_ROUTE_DECODE ? "decode"
         : r == ONYX__CUDA_ROUTE_FLASH  ? "flash"
                                        : "ref";
}
static int n_results;

static void bench_gqa(const char *kind, int B, int hq, int hkv, int S_kv, int D) {
  const bool prefill = strcmp(kind, "prefill") == 0;
  const int S = prefill ? S_kv : 1;
  bench_op op;
  bench_op_open(&op, prefill, B, hq, hkv, S_kv, D);
  uint64_t ws = 0;
  float ms = bench_op_time(&op, &ws, false);
  result *r = &results[n_results++];
  memset(r, 0, sizeof *r);
  snprintf(r->kind, sizeof r->kind, "%s", kind);
  r->B = B, r->hq = hq, r->hkv = hkv, r->s = S_kv, r->d = D;
  if (prefill) {
    const double flops = bench_op_work(&op);
    r->ours = flops / ms / 1e9;
    r->route = onyx__cuda_attn_last_route();
    /* The flash kernel on the same problem (the Hopper route turned off). */
    uint64_t ws2;
    onyx__cuda_attn_force_hopper = 0;
    float kf = bench_op_time(&op, &ws2, false);
    onyx__cuda_attn_force_hopper = -1;
    r->kernel64 = flops / kf / 1e9;
    /* The Hopper kernel's variant without the consumers' ping-pong. */
    onyx__cuda_attn_hopper_variant = 1;
    float kv1 = bench_op_time(&op, &ws2, false);
    onyx__cuda_attn_hopper_variant = 2; /* and the one without the persistent grid */
    float kv2 = bench_op_time(&op, &ws2, false);
    onyx__cuda_attn_hopper_variant = 3; /* and items unchained */
    float kv3 = bench_op_time(&op, &ws2, false);
    onyx__cuda_attn_hopper_variant = 0;
    /* The presents filled by a launch before the kernel; then the op again (the drift). */
    const int fused = onyx__cuda_attn_last_fill_present();
    onyx__cuda_attn_fused_present = 0;
    float kfill = bench_op_time(&op, &ws2, false);
    onyx__cuda_attn_fused_present = -1;
    float kfused = bench_op_time(&op, &ws2, false); /* the op's own configuration again */
    printf("onyx prefill B=%d Hq=%d Hkv=%d S=%d D=%d causal: op (%s route, presents %s) %.4f ms "
           "%.1f TFLOP/s | presents filled first %.4f ms %.1f | op again %.4f ms "
           "%.1f | no ping-pong %.4f ms %.1f | CTA per item %.4f ms %.1f | unchained %.4f ms "
           "%.1f | flash kernel %.4f ms %.1f | workspace %llu B\n",
           B, hq, hkv, S, D, route_name(r->route), fused ? "by the kernel" : "filled first", ms,
           r->ours, kfill, flops / kfill / 1e9, kfused, flops / kfused / 1e9, kv1,
           flops / kv1 / 1e9, kv2, flops / kv2 / 1e9, kv3, flops / kv3 / 1e9, kf, r->kernel64,
           (unsigned long long)ws);
  } else {
    const double bytes = bench_op_work(&op);
    r->ours = bytes / ms / 1e6;
    r->route = onyx__cuda_attn_last_route();
    onyx__cuda_attn_decode_last(&r->op_v, &r->op_units, &r->op_grid);
    /* The ceiling: a kernel that only reads, the same bytes, right after the op. */
    int re = onyx_bench_read_rate((size_t)bytes, ITERS, &r->rd);
    if (re != 0) {
      fprintf(stderr, "read rate: CUDA error %d\n", re);
      exit(1);
    }
    printf("read rate B=%d Skv=%d (%.1f MB): best %.0f GB/s (%s), median %.0f, back to back "
           "%.0f | forms:",
           B, S_kv, bytes / 1e6, r->rd.best, onyx_bench_read_form(r->rd.form), r->rd.median,
           r->rd.b2b);
    for (int f = 0; f < 4; ++f) printf(" %.0f", r->rd.form_gbps[f]);
    printf("\n");
    uint64_t wsb;
    r->ours_b2b = bytes / bench_op_time(&op, &wsb, true) / 1e6;
    onyx__cuda_attn_decode_grid = -1;
    r->grid_even = bytes / bench_op_time(&op, &wsb, false) / 1e6;
    onyx__cuda_attn_decode_grid = 16;
    onyx__cuda_attn_decode_variant = OLD_V; /* the route would take v8 on 16 CTAs */
    r->per_sm16 = bytes / bench_op_time(&op, &wsb, false) / 1e6 / 16.0;
    onyx__cuda_attn_decode_grid = 0;
    r->old_b2b = bytes / bench_op_time(&op, &wsb, true) / 1e6;
    onyx__cuda_attn_decode_variant = NEW_V;
    r->new_b2b = bytes / bench_op_time(&op, &wsb, true) / 1e6;
    onyx__cuda_attn_decode_grid = 16;
    r->new_sm16 = bytes / bench_op_time(&op, &wsb, false) / 1e6 / 16.0;
    onyx__cuda_attn_decode_grid = 0;
    onyx__cuda_attn_decode_variant = 0;
    printf("  decode B=%d Skv=%d: op back to back %.0f GB/s | rounds' own CTAs %.0f | "
           "v%d 16 CTAs %.1f GB/s a CTA | back to back v%d %.0f, v%d %.0f | v%d 16 CTAs %.1f a "
           "CTA\n",
           B, S_kv, r->ours_b2b, r->grid_even, OLD_V, r->per_sm16, OLD_V, r->old_b2b, NEW_V,
           r->new_b2b, NEW_V, r->new_sm16);
    /* The flash kernel on the same problem (the decode route turned off: the fill
     * writes the new row). */
    uint64_t ws2;
    onyx__cuda_attn_force_decode = 0;
    float kf = bench_op_time(&op, &ws2, false);
    onyx__cuda_attn_force_decode = -1;
    r->kernel64 = bytes / kf / 1e6;
    printf("onyx decode B=%d Hq=%d Hkv=%d Skv=%d D=%d: op (%s route, v%d: %lld units on %d "
           "CTAs) %.4f ms %.0f GB/s | flash route %.4f ms %.0f | workspace %llu B\n",
           B, hq, hkv, S_kv, D, route_name(r->route), r->op_v, (long long)r->op_units, r->op_grid,
           ms, r->ours, kf, r->kernel64, (unsigned long long)ws);
    /* Every variant of the decode kernel (onyx__cuda_attn_decode_variant). */
    const char *skip = getenv("ONYX_BENCH_SKIP_VARIANT"); /* one digit: a variant left out */
    for (int vi = 1; vi <= 8; ++vi) {
      if (skip != NULL && skip[0] == '0' + vi) continue;
      onyx__cuda_attn_decode_variant = vi;
      float t = bench_op_time(&op, &ws2, false);
      r->var[vi] = bytes / t / 1e6;
      printf("  variant %d decode B=%d Skv=%d D=%d route %s: %.4f ms %.0f GB/s\n", vi, B, S_kv, D,
             route_name(onyx__cuda_attn_last_route()), t, r->var[vi]);
    }
    onyx__cuda_attn_decode_variant = 0;
    /* Split counts of the decode route, for the plan's next revision. */
    static const int splits[] = {1, 2, 4, 8, 12, 16, 24, 32};
    for (size_t si = 0; si < sizeof splits / sizeof splits[0]; ++si) {
      if (splits[si] > S_kv / ONYX__CUDA_ATTN_SPLIT_MIN_KEYS && splits[si] > 1) continue;
      onyx__cuda_attn_force_split = splits[si];
      float t = bench_op_time(&op, &ws2, false);
      printf("  sweep decode B=%d Skv=%d D=%d route %s split %d: %.4f ms %.0f GB/s\n", B, S_kv, D,
             route_name(onyx__cuda_attn_last_route()), splits[si], t, bytes / t / 1e6);
    }
    onyx__cuda_attn_force_split = -1;
  }
  fflush(stdout);
  bench_op_close(&op);
}

/* Reads the anchor's lines and files its numbers under the matching results. */
static void run_anchor(const char *script) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "python3 %s 2>&1", script);
  FILE *f = popen(cmd, "r");
  if (f == NULL) {
    printf("anchor: cannot run %s\n", script);
    return;
  }
  char line[512];
  while (fgets(line, sizeof line, f) != NULL) {
    fputs(line, stdout);
    char kind[16], back[16];
    int B, hq, hkv, s, d;
    double ms, val;
    bool got = false;
    if (sscanf(line, "prefill %15s B=%d Hq=%d Hkv=%d S=%d D=%d causal ms=%lf TFLOPs=%lf", back, &B,
               &hq, &hkv, &s, &d, &ms, &val) == 8) {
      snprintf(kind, sizeof kind, "prefill");
      got = true;
    } else if (sscanf(line, "decode %15s B=%d Hq=%d Hkv=%d Skv=%d D=%d ms=%lf KV_GBps=%lf", back,
                      &B, &hq, &hkv, &s, &d, &ms, &val) == 8) {
      snprintf(kind, sizeof kind, "decode");
      got = true;
    }
    if (!got) continue;
    for (int i = 0; i < n_results; ++i) {
      result *r = &results[i];
      if (strcmp(r->kind, kind) || r->B != B || r->hq != hq || r->hkv != hkv || r->s != s ||
          r->d != d)
        continue;
      if (strcmp(back, "flash") == 0) r->flash = val;
      if (strcmp(back, "cudnn") == 0) r->cudnn = val;
      if (strcmp(back, "flash_b2b") == 0) r->flash_b2b = val;
      if (strcmp(back, "cudnn_b2b") == 0) r->cudnn_b2b = val;
    }
  }
  pclose(f);
}

/* x as a percentage of y (0 when either is missing). */
static double pct(double x, double y) { return x > 0.0 && y > 0.0 ? 100.0 * x / y : 0.0; }

/* The decode rows against the read rate of the same bytes (the best single launch):
 * per call between events (the figures), then back to back (the device's own
 * time; host time per call hidden). */
static void print_ceiling(void) {
  printf("\n%-24s %7s %7s %6s %7s %6s %7s | %7s %7s %6s %7s %6s | %7s %8s\n", "decode (bf16) GB/s",
         "read", "onyx", "%read", "cudnn", "%read", "xcudnn", "b2b rd", "onyx", "%read", "cudnn",
         "%read", "even", "CTA@16");
  for (int i = 0; i < n_results; ++i) {
    const result *r = &results[i];
    if (r->kind[0] != 'd') continue;
    printf("B%-2d Hq%d Hkv%d Skv%-5d D%-3d %6.0f %7.0f %6.1f %7.0f %6.1f %7.2f | %7.0f %7.0f %6.1f "
           "%7.0f %6.1f | %7.0f %8.1f\n",
           r->B, r->hq, r->hkv, r->s, r->d, r->rd.best, r->ours, pct(r->ours, r->rd.best), r->cudnn,
           pct(r->cudnn, r->rd.best), r->cudnn > 0 ? r->ours / r->cudnn : 0.0, r->rd.b2b,
           r->ours_b2b, pct(r->ours_b2b, r->rd.b2b), r->cudnn_b2b, pct(r->cudnn_b2b, r->rd.b2b),
           r->grid_even, r->per_sm16);
  }
}

/* The routed op (the variant it ran) beside OLD_V and NEW_V on each decode row: per
 * call (x cuDNN per call), back to back (% of the read rate back to back, and cuDNN's),
 * and one CTA's rate on 16 CTAs. */
static void print_old_new(void) {
  printf("\n%-24s %7s %3s %6s | %7s %7s %6s %6s | %7s %7s %6s %6s %6s %6s | %7s %7s\n",
         "decode (bf16) GB/s", "op", "ran", "opxcd", "v3", "v8", "v3xcd", "v8xcd", "b2b v3",
         "b2b v8", "%read", "%read", "cudnn%", "v8/v3", "v3@16", "v8@16");
  for (int i = 0; i < n_results; ++i) {
    const result *r = &results[i];
    if (r->kind[0] != 'd') continue;
    const double cd = r->cudnn > 0 ? r->cudnn : 1e300;
    printf("B%-2d Hq%d Hkv%d Skv%-5d D%-3d %6.0f  v%d %6.2f | %7.0f %7.0f %6.2f %6.2f | %7.0f "
           "%7.0f %6.1f %6.1f %6.1f %6.3f | %7.1f %7.1f\n",
           r->B, r->hq, r->hkv, r->s, r->d, r->ours, r->op_v, r->ours / cd, r->var[OLD_V],
           r->var[NEW_V], r->var[OLD_V] / cd, r->var[NEW_V] / cd, r->old_b2b, r->new_b2b,
           pct(r->old_b2b, r->rd.b2b), pct(r->new_b2b, r->rd.b2b), pct(r->cudnn_b2b, r->rd.b2b),
           r->old_b2b > 0 ? r->new_b2b / r->old_b2b : 0.0, r->per_sm16, r->new_sm16);
  }
}

int main(int argc, char **argv) {
  const char *script = argc > 1 ? argv[1] : "tools/torch_sdpa_gqa.py";
  if (!ch_have_device()) {
    printf("skipped: no CUDA device\n");
    return 0;
  }
  struct cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  printf("device %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount,
         prop.l2CacheSize >> 20);
  /* ONYX_BENCH_SHAPE=B,Hq,Hkv,S,D: that prefill shape alone, no anchor (for a profiler). */
  const char *one = getenv("ONYX_BENCH_SHAPE");
  int sh[5];
  if (one != NULL && sscanf(one, "%d,%d,%d,%d,%d", &sh[0], &sh[1], &sh[2], &sh[3], &sh[4]) == 5) {
    bench_gqa("prefill", sh[0], sh[1], sh[2], sh[3], sh[4]);
    return 0;
  }
  static const int pre[4][5] = {
      {1, 32, 8, 1024, 128}, {1, 32, 8, 4096, 128}, {4, 32, 8, 4096, 128}, {1, 14, 2, 2048, 64}};
  static const int dec[5][5] = {{1, 32, 8, 4096, 128},
                                {1, 32, 8, 32768, 128},
                                {16, 32, 8, 4096, 128},
                                {64, 32, 8, 2048, 128},
                                {1, 14, 2, 4096, 64}};
  const char *only = getenv("ONYX_BENCH_DECODE_ONLY");
  for (int i = 0; i < 4 && (only == NULL || strcmp(only, "1") != 0); ++i)
    bench_gqa("prefill", pre[i][0], pre[i][1], pre[i][2], pre[i][3], pre[i][4]);
  for (int i = 0; i < 5; ++i)
    bench_gqa("decode", dec[i][0], dec[i][1], dec[i][2], dec[i][3], dec[i][4]);
  if (strcmp(script, "-") != 0) run_anchor(script);
  /* The read rate once more after the anchor, on the largest decode row's bytes: how far
   * the device drifted while the anchor ran. */
  onyx_bench_read after;
  memset(&after, 0, sizeof after);
  double most = 0.0;
  for (int i = 0; i < n_results; ++i)
    if (results[i].kind[0] == 'd') {
      const result *r = &results[i];
      const double b = 2.0 * r->B * r->hkv * (double)r->s * r->d * 2.0;
      if (b > most) most = b;
    }
  if (most > 0.0 && onyx_bench_read_rate((size_t)most, ITERS, &after) == 0)
    printf("read rate after the anchor (%.1f MB): best %.0f GB/s, median %.0f, back to back "
           "%.0f\n",
           most / 1e6, after.best, after.median, after.b2b);
  printf("\n%-8s %-26s %-7s %10s %10s %10s %10s %8s %8s\n", "kind", "shape (bf16)", "route",
         "onyx op", "onyx flash", "torch fl", "torch cudnn", "x flash", "x cudnn");
  for (int i = 0; i < n_results; ++i) {
    result *r = &results[i];
    char shape[64];
    snprintf(shape, sizeof shape, "B%d Hq%d Hkv%d %s%d D%d", r->B, r->hq, r->hkv,
             r->kind[0] == 'p' ? "S" : "Skv", r->s, r->d);
    printf("%-8s %-26s %-7s %10.1f %10.1f %10.1f %10.1f %8.2f %8.2f %s\n", r->kind, shape,
           route_name(r->route), r->ours, r->kernel64, r->flash, r->cudnn,
           r->flash > 0 ? r->ours / r->flash : 0.0, r->cudnn > 0 ? r->ours / r->cudnn : 0.0,
           r->kind[0] == 'p' ? "TFLOP/s" : "GB/s");
  }
  /* The decode kernel's variants beside the anchor (GB/s), each as a ratio to cuDNN. */
  printf("\n%-24s %7s", "decode (bf16) GB/s", "op");
  for (int v = 1; v <= 8; ++v) printf("    v%d", v);
  printf(" %7s %7s | op x cudnn, v1..v8 x cudnn\n", "flash", "cudnn");
  for (int i = 0; i < n_results; ++i) {
    result *r = &results[i];
    if (r->kind[0] != 'd') continue;
    printf("B%-2d Hq%d Hkv%d Skv%-5d D%-3d %6.0f", r->B, r->hq, r->hkv, r->s, r->d, r->ours);
    for (int v = 1; v <= 8; ++v) printf(" %5.0f", r->var[v]);
    printf(" %7.0f %7.0f |", r->flash, r->cudnn);
    double c = r->cudnn > 0 ? r->cudnn : 1e300;
    printf(" %4.2f,", r->ours / c);
    for (int v = 1; v <= 8; ++v) printf(" %4.2f", r->var[v] / c);
    printf("\n");
  }
  print_ceiling();
  print_old_new();
  return 0;
}
