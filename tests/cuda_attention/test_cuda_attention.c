/*
 * cmocka tests of the CUDA attention kernels (providers/cuda/attention), driven through
 * a fake core (cuda_attn_harness.c) and compared with a plain float64 reference written
 * here, on fresh random non-zero inputs, with outputs and workspace poisoned (0xFF,
 * NaN) before each run so unwritten elements show.
 *
 * - Workspace bytes per route (needs no device: workspace() is host arithmetic).
 * - GroupQueryAttention: first prompt (right padded), decode, chunked prefill, growing
 *   and shared KV buffer, packed QKV, rotary (halves, interleaved, position ids), local
 *   window, softcap, smooth softmax, head sink, attention bias, BNSH vs BSNH, batch > 1
 *   with different lengths, head sizes 64/80/96/128/256, float32 reference route, split-K.
 * - Attention 23/24: 3-D and 4-D, GQA, causal, bool/float masks, fully masked rows,
 *   past/present, softcap, scale, nonpad_kv_seqlen, short mask, Hk != Hv, staging.
 * - The Hopper prefill route and the decode route (on and off), their named refusals.
 * Every device test prints "skipped: no CUDA device" and passes without a device.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cuda_runtime_api.h>

#include "attn_reference.h"
#include "cuda_attention_kernels.h"
#include "cuda_attn_harness.h"
#include "cuda_attn_impl.h"

#define SKIP_WITHOUT_DEVICE()                                                                      \
  do {                                                                                             \
    if (!ch_have_device()) {                                                                       \
      printf("skipped: no CUDA device\n");                                                         \
      return;                                                                                      \
    }                                                                                              \
  } while (0)

static double tol_abs(uint32_t dt) {
  return dt == ONYX_DTYPE_BFLOAT16 ? 2e-2 : dt == ONYX_DTYPE_FLOAT16 ? 4e-3 : 2e-4;
}
static double tol_rel(uint32_t dt) {
  return dt == ONYX_DTYPE_BFLOAT16 ? 2e-2 : dt == ONYX_DTYPE_FLOAT16 ? 4e-3 : 2e-4;
}

static const char *dt_name(uint32_t dt) {
  return dt == ONYX_DTYPE_BFLOAT16 ? "bf16" : dt == ONYX_DTYPE_FLOAT16 ? "fp16" : "fp32";
}

/* ================================================================== GroupQueryAttention */

/* Most batch rows of a case (the B64 decode geometry of issue #15). */
#define GQA_MAX_B 64

typedef struct gqa_case {
  const char *name;
  uint32_t dtype;
  int B, S, nq, nkv, H;
  int L; /* past rows (0: no past) */
  int T; /* total_sequence_length */
  int seqlens[GQA_MAX_B];
  bool packed, rotary, interleaved, pos_ids;
  int rot_half; /* 0: H / 2 */
  int window;   /* 0: off */
  float softcap, scale;
  bool smooth, sink, bias;
  int layout; /* 0 BNSH, 1 BSNH */
  bool share; /* allow present to alias past */
  bool total_on_host;
  int causal; /* -1: attribute absent (1) */
  int repeat; /* computes before the checked one, on the same state and workspace */
} gqa_case;

typedef struct gqa_result {
  double *y, *pk, *pv; /* downloaded output, present (logical (b, g, r, d) order) */
  int64_t P;
  onyx_workspace_requirement req;
  bool aliased;
} gqa_result;

/* Element offset of logical (b, g, r, d) in a cache of `rows` rows. */
static int64_t cache_at(int layout, int nkv, int64_t rows, int H, int b, int g, int64_t r, int d) {
  if (layout == 1) return (((int64_t)b * rows + r) * nkv + g) * H + d;
  return (((int64_t)b * nkv + g) * rows + r) * H + d;
}

static void run_gqa_case(const gqa_case *c, uint64_t seed, gqa_result *res) {
  const uint32_t dt = c->dtype;
  const int B = c->B, S = c->S, nq = c->nq, nkv = c->nkv, H = c->H, L = c->L, T = c->T;
  const int half = c->rot_half > 0 ? c->rot_half : H / 2;
  const bool first = S == T;
  const int64_t P = T > L ? T : L;
  ch_rng rng = {seed};
  int64_t hidden = (int64_t)(c->packed ? nq + 2 * nkv : nq) * H;

  ch_tensor q, k, v, pk, pv, sl, tot, cs, sn, pid, bias, sink;
  memset(&k, 0, sizeof k);
  memset(&v, 0, sizeof v);
  memset(&pk, 0, sizeof pk);
  memset(&pv, 0, sizeof pv);
  memset(&cs, 0, sizeof cs);
  memset(&sn, 0, sizeof sn);
  memset(&pid, 0, sizeof pid);
  memset(&bias, 0, sizeof bias);
  memset(&sink, 0, sizeof sink);
  int64_t qd[3] = {B, S, hidden};
  ch_tensor_random(&q, dt, 3, qd, &rng, 1.0);
  if (!c->packed) {
    int64_t kd[3] = {B, S, (int64_t)nkv * H};
    ch_tensor_random(&k, dt, 3, kd, &rng, 1.0);
    ch_tensor_random(&v, dt, 3, kd, &rng, 1.0);
  }
  if (L > 0) {
    int64_t pd[4] = {B, nkv, L, H};
    ch_tensor_random(&pk, dt, 4, pd, &rng, 1.0);
    ch_tensor_random(&pv, dt, 4, pd, &rng, 1.0);
  }
  assert_true(B >= 1 && B <= GQA_MAX_B);
  int32_t seqlens[GQA_MAX_B];
  for (int b = 0; b < B; ++b) seqlens[b] = c->seqlens[b];
  int64_t bd[1] = {B};
  ch_tensor_bytes(&sl, ONYX_DTYPE_INT32, 1, bd, seqlens, false);
  int32_t t32 = T;
  ch_tensor_bytes(&tot, ONYX_DTYPE_INT32, 0, NULL, &t32, c->total_on_host);
  int64_t max_pos = P + 16;
  if (c->rotary) {
    int64_t rd[2] = {max_pos, half};
    double *cv = malloc((size_t)(max_pos * half) * sizeof(double));
    double *sv = malloc((size_t)(max_pos * half) * sizeof(double));
    for (int64_t p = 0; p < max_pos; ++p)
      for (int i = 0; i < half; ++i) {
        double th = (double)p * pow(10000.0, -2.0 * i / (2.0 * half)) + 0.1 * ch_uniform(&rng);
        cv[p * half + i] = cos(th);
        sv[p * half + i] = sin(th);
      }
    ch_tensor_values(&cs, dt, 2, rd, cv);
    ch_tensor_values(&sn, dt, 2, rd, sv);
    free(cv);
    free(sv);
    if (c->pos_ids) {
      int64_t *ids = malloc((size_t)(B * S) * sizeof(int64_t));
      for (int b = 0; b < B; ++b) {
        int past = first ? 0 : seqlens[b] + 1 - S;
        for (int s = 0; s < S; ++s) ids[b * S + s] = past + s + 5 + b;
      }
      int64_t idd[2] = {B, S};
      ch_tensor_bytes(&pid, ONYX_DTYPE_INT64, 2, idd, ids, false);
      free(ids);
    }
  }
  if (c->bias) {
    int64_t bsd[4] = {B, 1, S, T};
    ch_tensor_random(&bias, dt, 4, bsd, &rng, 2.0);
  }
  if (c->sink) {
    int64_t skd[1] = {nq};
    ch_tensor_random(&sink, dt, 1, skd, &rng, 2.0);
  }

  const onyx_tensor *in[12] = {&q.t,
                               c->packed ? NULL : &k.t,
                               c->packed ? NULL : &v.t,
                               L > 0 ? &pk.t : NULL,
                               L > 0 ? &pv.t : NULL,
                               &sl.t,
                               &tot.t,
                               c->rotary ? &cs.t : NULL,
                               c->rotary ? &sn.t : NULL,
                               c->pos_ids ? &pid.t : NULL,
                               c->bias ? &bias.t : NULL,
                               c->sink ? &sink.t : NULL};
  ch_node node;
  ch_node_init(&node, "com.microsoft", "GroupQueryAttention", 1, 12, 3);
  ch_node_int(&node, "num_heads", nq);
  ch_node_int(&node, "kv_num_heads", nkv);
  if (c->scale > 0.0f) ch_node_float(&node, "scale", c->scale);
  if (c->softcap > 0.0f) ch_node_float(&node, "softcap", c->softcap);
  if (c->window > 0) ch_node_int(&node, "local_window_size", c->window);
  if (c->rotary) ch_node_int(&node, "do_rotary", 1);
  if (c->interleaved) ch_node_int(&node, "rotary_interleaved", 1);
  if (c->smooth) ch_node_int(&node, "smooth_softmax", 1);
  if (c->layout) ch_node_int(&node, "kv_layout", c->layout);
  if (c->causal >= 0) ch_node_int(&node, "causal", c->causal);

  /* The layout only changes bytes: re-lay the past (generated as BNSH values). */
  if (L > 0 && c->layout == 1) {
    ch_tensor *pp[2] = {&pk, &pv};
    for (int i = 0; i < 2; ++i) {
      double *lay = malloc((size_t)(B * nkv * L * H) * sizeof(double));
      for (int b = 0; b < B; ++b)
        for (int g = 0; g < nkv; ++g)
          for (int r = 0; r < L; ++r)
            for (int d = 0; d < H; ++d)
              lay[cache_at(1, nkv, L, H, b, g, r, d)] =
                  pp[i]->val[cache_at(0, nkv, L, H, b, g, r, d)];
      double *logical = pp[i]->val;
      pp[i]->val = NULL;
      ch_tensor_free(pp[i]);
      int64_t pd[4] = {B, nkv, L, H};
      ch_tensor_values(pp[i], dt, 4, pd, lay);
      free(pp[i]->val);
      pp[i]->val = logical; /* keep the logical (BNSH-ordered) values for the reference */
      free(lay);
    }
  }

  ch_ctx ctx;
  ch_ctx_init(&ctx, in, 12, c->share);
  ctx.repeat = c->repeat;
  onyx_status st = ch_run(&onyx_cuda_gqa_kernel, &node, in, 12, &ctx, &res->req, -1, 0);
  if (st != ONYX_STATUS_OK) fprintf(stderr, "  %s: status %d: %s\n", c->name, st, ctx.err);
  assert_int_equal(st, ONYX_STATUS_OK);
  assert_true(ctx.out_set[0] && ctx.out_set[1] && ctx.out_set[2]);
  assert_int_equal(ctx.outs[1].dims[2], P);
  res->P = P;
  res->aliased = ctx.out_aliased[1];
  if (c->share && L >= T) assert_true(ctx.out_aliased[1] && ctx.out_aliased[2]);
  /* The split counters (SESSION, poisoned, zeroed by the first compute) are zero again
   * after every launch: the next step needs no memset. */
  for (size_t i = 0; i < ctx.ctx.workspace_count; ++i)
    if (strcmp(ctx.views[i].name, "gqa_split_counters") == 0) {
      size_t nc = (size_t)(ctx.views[i].bytes / 4);
      uint32_t *cnt = malloc(nc * 4 + 4);
      assert_int_equal(cudaMemcpy(cnt, ctx.views[i].data, nc * 4, cudaMemcpyDeviceToHost), 0);
      size_t nonzero = 0;
      for (size_t j = 0; j < nc; ++j) nonzero += cnt[j] != 0;
      free(cnt);
      if (nonzero) fprintf(stderr, "  %s: %zu split counters not zero\n", c->name, nonzero);
      assert_int_equal(nonzero, 0);
    }

  /* Downloads: output, presents in logical order. */
  size_t ny = (size_t)B * S * nq * H, np = (size_t)B * nkv * P * H;
  res->y = ch_download(dt, ctx.outs[0].data, ny);
  double *praw[2] = {ch_download(dt, ctx.outs[1].data, np), ch_download(dt, ctx.outs[2].data, np)};
  res->pk = malloc(np * sizeof(double));
  res->pv = malloc(np * sizeof(double));
  double *pl[2] = {res->pk, res->pv};
  for (int i = 0; i < 2; ++i)
    for (int b = 0; b < B; ++b)
      for (int g = 0; g < nkv; ++g)
        for (int64_t r = 0; r < P; ++r)
          for (int d = 0; d < H; ++d)
            pl[i][cache_at(0, nkv, P, H, b, g, r, d)] =
                praw[i][cache_at(c->layout, nkv, P, H, b, g, r, d)];
  free(praw[0]);
  free(praw[1]);

  /* ---- reference ---- */
  double *rk = calloc(np, sizeof(double)), *rv = calloc(np, sizeof(double));
  const double *newk = c->packed ? q.val : k.val, *newv = c->packed ? q.val : v.val;
  int64_t koff = c->packed ? (int64_t)nq * H : 0, voff = c->packed ? (int64_t)(nq + nkv) * H : 0;
  int64_t n_ss = c->packed ? hidden : (int64_t)nkv * H;
  for (int b = 0; b < B; ++b) {
    int total = seqlens[b] + 1, past = first ? 0 : total - S;
    for (int g = 0; g < nkv; ++g) {
      for (int64_t r = 0; r < P; ++r) {
        bool keep_past = res->aliased ? true : r < past;
        for (int d = 0; d < H; ++d) {
          int64_t at = cache_at(0, nkv, P, H, b, g, r, d);
          if (keep_past && L > 0 && r < L) {
            rk[at] = pk.val[cache_at(0, nkv, L, H, b, g, r, d)];
            rv[at] = pv.val[cache_at(0, nkv, L, H, b, g, r, d)];
          }
        }
      }
      for (int s = 0; s < S; ++s) {
        const double *kr = newk + ((int64_t)b * S + s) * n_ss + koff + (int64_t)g * H;
        const double *vr = newv + ((int64_t)b * S + s) * n_ss + voff + (int64_t)g * H;
        int64_t pos = c->pos_ids ? (first ? (past + 0 + 5 + 0) + s : past + s + 5 + b) : past + s;
        for (int d = 0; d < H; ++d) {
          double kv =
              c->rotary ? ref_rope(kr, d, cs.val, sn.val, half, pos, c->interleaved) : kr[d];
          int64_t at = cache_at(0, nkv, P, H, b, g, past + s, d);
          rk[at] = ch_round(dt, kv);
          rv[at] = vr[d];
        }
      }
    }
  }
  double *ry = calloc(ny, sizeof(double));
  const ref_gqa ref = {.q = q.val,
                       .k = rk,
                       .v = rv,
                       .cos = cs.val,
                       .sin = sn.val,
                       .bias = c->bias ? bias.val : NULL,
                       .sink = c->sink ? sink.val : NULL,
                       .seqlens = seqlens,
                       .B = B,
                       .S = S,
                       .T = T,
                       .nq = nq,
                       .nkv = nkv,
                       .H = H,
                       .half = half,
                       .window = c->window,
                       .P = P,
                       .hidden = hidden,
                       .first = first,
                       .causal = c->causal != 0,
                       .rotary = c->rotary,
                       .interleaved = c->interleaved,
                       .pos_ids = c->pos_ids,
                       .smooth = c->smooth,
                       .softcap = c->softcap,
                       .scale = c->scale > 0.0f ? c->scale : 1.0 / sqrt((double)H),
                       .y = ry};
  assert_true(ry != NULL && ref_gqa_run(&ref));
  char what[160];
  snprintf(what, sizeof what, "%s %s output", c->name, dt_name(dt));
  size_t bad = ch_compare(what, res->y, ry, ny, tol_abs(dt), tol_rel(dt));
  snprintf(what, sizeof what, "%s %s present_key", c->name, dt_name(dt));
  bad += ch_compare(what, res->pk, rk, np, tol_abs(dt), tol_rel(dt));
  snprintf(what, sizeof what, "%s %s present_value", c->name, dt_name(dt));
  bad += ch_compare(what, res->pv, rv, np, 0.0, 0.0);
  assert_int_equal(bad, 0);

  free(rk);
  free(rv);
  free(ry);
  ch_ctx_free(&ctx);
  ch_tensor *all[] = {&q, &k, &v, &pk, &pv, &sl, &tot, &cs, &sn, &pid, &bias, &sink};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) ch_tensor_free(all[i]);
}

static void gqa_result_free(gqa_result *r) {
  free(r->y);
  free(r->pk);
  free(r->pv);
  memset(r, 0, sizeof *r);
}

static void check_gqa(const gqa_case *c, uint64_t seed) {
  gqa_result r;
  memset(&r, 0, sizeof r);
  run_gqa_case(c, seed, &r);
  gqa_result_free(&r);
}

static const uint32_t k_half_types[2] = {ONYX_DTYPE_FLOAT16, ONYX_DTYPE_BFLOAT16};

static void test_gqa_first_prompt(void **state) {
  (void)state;
  SKIP_WITHOUT_DEVICE();
  for (int t = 0; t < 2; ++t) {
    gqa_case c = {.name = "first prompt padded B2 S77 8/2 H128",
                  .dtype = k_half_types[t],
                  .B = 2,
                  .S = 77,
                  .nq = 8,
                  .nkv = 2,
                  .H = 128,
                  .L = 0,
                  .T = 77,
                  .seqlens = {76, 50},
                  .causal = -1};
    check_gqa(&c, 11 + (uint64_t)t);
  }
}

static void test_gqa_decode_growing(void **state) {
  (void)state;
  SKIP_WITHOUT_DEVICE();
  for (int t = 0; t < 2; ++t) {
    gqa_case c = {.name = "decode growing B3 L300 32/8 H128 (split-K)",
                  .dtype = k_half_types[t],
                  .B = 3,
                  .S = 1,
                  .nq = 32,
                  .nkv = 8,
                  .H = 128,
                  .L = 300,
                  .T = 301,
                  .seqlens = {300, 200, 17},
                  .causal = -1};
    check_gqa(&c, 21 + (uint64_t)t);
  }
}

static void test_gqa_decode_shared(void **state) {
  (void)state;
  SKIP_WITHOUT_DEVICE();
  for (int t = 0; t < 2; ++t) {
    gqa_case c = {.name = "decode shared buffer B2 cap 1024 14/2 H64",
                  .dtype = k_half_types[t],
                  .B = 2,
                  .S = 1,
                  .nq = 14,
                  .nkv = 2,
                  .H = 64,
                  .L = 1024,
                  .T = 701,
                  .seqlens = {700, 333},
                  .share = true,
                  .total_on_host = true,
                  .causal = -1};
    check_gqa(&c, 31 + (uint64_t)t);
  }
}

static void test_gqa_chunked_prefill(void **state) {
  (void)state;
  SKIP_WITHOUT_DEVICE();
  for (int t = 0; t < 2; ++t) {
    gqa_case c = {.name = "chunked prefill S40 past 200 B2 8/2 H96",
                  .dtype = k_half_types[t],
                  .B = 2,
                  .S = 40,
                  .nq = 8,
                  .nkv = 2,
                  .H = 96,
                  .L = 200,
                  .T = 240,
                  .seqlens = {239, 120},
                  .causal = -1};
    check_gqa(&c, 41 + (uint64_t)t);
    gqa_case s = {.name = "chunked prefill shared S33 cap 512 B2 4/4 H80",
                  .dtype = k_half_types[t],
                  .B = 2,
                  .S = 33,
                  .nq = 4,
                  .nkv = 4,
                  .H = 80,
                  .L = 512,
                  .T = 300,
                  .seqlens = {299, 90},
                  .share = true,
                  .causal = -1};
    check_gqa(&s, 43 + (uint64_t)t);
  }
}

static void test_gqa_packed_rotary(void **state) {
  (void)state;
  SKIP_WITHOUT_DEVICE();
  for (int t = 0; t < 2; ++t) {
    gqa_case c = {.name = "packed QKV + rotary first prompt B2 S50 8/2 H128",
                  .dtype = k_half_types[t],
                  .B = 2,
                  .S = 50,
                  .nq = 8,
                  .nkv = 2,
                  .H = 128,
                  .L = 0,
                  .T = 50,
                  .seqlens = {49, 31},
                  .packed = true,
                  .rotary = true,
                  .causal = -1};
    check_gqa(&c, 51 + (uint64_t)t);
    gqa_case d = {.name = "packed + interleaved rotary + pos ids decode",
                  .dtype = k_half_types[t],
                  .B = 2,
                  .S = 1,
                  .nq = 8,
                  .nkv = 2,
                  .H = 64,
                  .L = 128,
                  .T = 100,
                  .seqlens = {99, 60},
                  .packed = true,
                  .rotary = true,
                  .interleaved = true,
                  .pos_ids = true,
                  .share = true,
                  .causal = -1};
    check_gqa(&d, 53 + (uint64_t)t);
    gqa_case e = {.name = "partial rotary (dim 32) chunked BSNH",
                  .dtype = k_half_types[t],
                  .B = 2,
                  .S = 24,
                  .nq = 8,
                  .nkv = 2,
                  .H = 128,
                  .L = 64,
                  .T = 88,
                  .seqlens = {87, 30},
                  .rotary = true,
                  .rot_half = 16,
                  .layout = 1,
                  .causal = -1};
    check_gqa(&e, 55 + (uint64_t)t);
  }
}

static void test_gqa_window_softcap(void **state) {
  (void)state;
  SKIP_WITHOUT_DEVICE();
  for (int t = 0; t < 2; ++t) {
    gqa_case c = {.name = "window 37 + softcap 30 prefill B2 S130 8/2",
                  .dtype = k_half_types[t],
                  .B = 2,
                  .S = 130,
                  .nq = 8,
                  .nkv = 2,
                  .H = 64,
                  .L = 0,
                  .T = 130,
                  .seqlens = {129, 100},
                  .window = 37,
                  .softcap = 30.0f,
                  .scale = 0.3f,
                  .causal = -1};
    check_gqa(&c, 61 + (uint64_t)t);
    gqa_case d = {.name = "window 100 decode split-K B1 L2000 16/2",
                  .dtype = k_half_types[t],
                  .B = 1,
                  .S = 1,
                  .nq = 16,
                  .nkv = 2,
                  .H = 128,
                  .L = 2000,
                  .T = 2001,
                  .seqlens = {2000},
                  .window = 100,
                  .softcap = 5.0f,
                  .causal = -1};
    check_gqa(&d, 63 + (uint64_t)t);
  }
}

static void test_gqa_sinks_bias(void **state) {
  (void)state;
  SKIP_WITHOUT_DEVICE();
  for (int t = 0; t < 2; ++t) {
    gqa_case a = {.name = "smooth softmax chunked B2 S20 8/2",
                  .dtype = k_half_types[t],
                  .B = 2,
                  .S = 20,
                  .nq = 8,
                  .nkv = 2,
                  .H = 128,
                  .L = 100,
                  .T = 120,
                  .seqlens = {119, 40},
                  .smooth = true,
                  .causal = -1};
    check_gqa(&a, 71 + (uint64_t)t);
    gqa_case b = {.name = "head sink decode split-K B1 L1500 8/1",
                  .dtype = k_half_types[t],
                  .B = 1,
                  .S = 1,
                  .nq = 8,
                  .nkv = 1,
                  .H = 64,
                  .L = 1500,
                  .T = 1501,
                  .seqlens = {1500},
                  .sink = true,
                  .causal = -1};
    check_gqa(&b, 73 + (uint64_t)t);
    gqa_case c = {.name = "attention bias + sink prefill B2 S48",
                  .dtype = k_half_types[t],
                  .B = 2,
                  .S = 48,
                  .nq = 4,
                  .nkv = 2,
                  .H = 64,
                  .L = 0,
                  .T = 48,
                  .seqlens = {47, 20},
                  .bias = true,
                  .sink = true,
                  .causal = -1};
    check_gqa(&c, 75 + (uint64_t)t);
  }
}

/* BNSH and BSNH give identical outputs and identical logical presents. */
static void test_gqa_layouts_identical(void **state) {
  (void)state;
  SKIP_WITHOUT_DEVICE();
  for (int t = 0; t < 2; ++t) {
    gqa_case c = {.name = "layout chunked B2 S9 past 70 8/2 H128",
                  .dtype = k_half_types[t],
                  .B = 2,
                  .S = 9,
                  .nq = 8,
                  .nkv = 2,
                  .H = 128,
                  .L = 70,
                  .T = 79,
                  .seqlens = {78, 20},
                  .rotary = true,
                  .causal = -1};
    gqa_result r0, r1;
    memset(&r0, 0, sizeof r0);
    memset(&r1, 0, sizeof r1);
    run_gqa_case(&c, 81, &r0);
    c.layout = 1;
    c.name = "layout chunked (BSNH)";
    run_gqa_case(&c, 81, &r1);
    size_t ny = (size_t)c.B * c.S * c.nq * c.H, np = (size_t)c.B * c.nkv * r0.P * c.H;
    assert_int_equal(ch_compare("BNSH vs BSNH output", r0.y, r1.y, ny, 0.0, 0.0), 0);
    assert_int_equal(ch_compare("BNSH vs BSNH present_key", r0.pk, r1.pk, np, 0.0, 0.0), 0);
    gqa_result_free(&r0);
    gqa_result_free(&r1);
    gqa_case d = {.name = "layout BSNH decode shared",
                  .dtype = k_half_types[t],
                  .B = 3,
                  .S = 1,
                  .nq = 8,
                  .nkv = 2,
                  .H = 64,
                  .L = 300,
                  .T = 260,
                  .seqlens = {259, 100, 7},
                  .layout = 1,
                  .share = true,
                  .causal = -1};
    check_gqa(&d, 83 + (uint64_t)t);
  }
}

static void test_gqa_head_sizes(void **state) {
  (void)state;
  SKIP_WITHOUT_DEVICE();
  static const int heads[5] = {64, 80, 96, 128, 256};
  for (int t = 0; t < 2; ++t)
    for (int i = 0; i < 5; ++i) {
      char name[64];
      snprintf(name, sizeof name, "H%d prefill B2 S70 12/4", heads[i]);
      gqa_case c = {.name = name,
                    .dtype = k_half_types[t],
                    .B = 2,
                    .S = 70,
                    .nq = 12,
                    .nkv = 4,
                    .H = heads[i],
                    .L = 0,
                    .T = 70,
                    .seqlens = {69, 44},
                    .causal = -1};
      check_gqa(&c, 91 + (uint64_t)(i * 2 + t));
      snprintf(name, sizeof name, "H%d decode B2 L600 12/4", heads[i]);
      gqa_case d = {.name = name,
                    .dtype = k_half_types[t],
                    .B = 2,
                    .S = 1,
                    .nq = 12,
                    .nkv = 4,
                    .H = heads[i],
                    .L = 600,
                    .T = 601,
                    .seqlens = {600, 255},
                    .causal = -1};
      check_gqa(&d, 101 + (uint64_t)(i * 2 + t));
    }
}

static void test_gqa_reference_route(void **state) {
  (void)state;
  SKIP_WITHOUT_DEVICE();
  gqa_case a = {.name = "fp32 reference chunked + rotary + window",
                .dtype = ONYX_DTYPE_FLOAT32,
                .B = 2,
                .S = 12,
                .nq = 6,
                .nkv = 2,
                .H = 64,
                .L = 40,
                .T = 52,
                .seqlens = {51, 30},
                .rotary = true,
                .window = 20,
                .softcap = 20.0f,
                .sink = true,
                .causal = -1};
  check_gqa(&a, 111);
  gqa_case b = {.name = "fp32 reference decode shared BSNH",
                .dtype = ONYX_DTYPE_FLOAT32,
                .B = 2,
                .S = 1,
                .nq = 4,
                .nkv = 1,
                .H = 32,
                .L = 64,
                .T = 50,
                .seqlens = {49, 10},
                .layout = 1,
                .share = true,
                .smooth = true,
                .causal = -1};
  check_gqa(&b, 112);
  gqa_case c = {.name = "fp16 head 40 (reference route) packed",
                .dtype = ONYX_DTYPE_FLOAT16,
                .B = 2,
                .S = 16,
                .nq = 4,
                .nkv = 2,
                .H = 40,
                .L = 0,
                .T = 16,
                .seqlens = {15, 9},
                .packed = true,
                .rotary = true,
                .causal = -1};
  check_gqa(&c, 113);
  gqa_case d = {.name = "bf16 non-causal prefill",
                .dtype = ONYX_DTYPE_BFLOAT16,
                .B = 1,
                .S = 64,
                .nq = 4,
                .nkv = 2,
                .H = 64,
                .L = 0,
                .T = 64,
                .seqlens = {63},
                .causal = 0};
  check_gqa(&d, 114);
}

static void test_gqa_large_group_prefill(void **state) {
  (void)state;
  SKIP_WITHOUT_DEVICE();
  gqa_case c = {.name = "prefill 32/8 S300 B1 (many row tiles)",
                .dtype = ONYX_DTYPE_BFLOAT16,
                .B = 1,
                .S = 300,
                .nq = 32,
                .nkv = 8,
                .H = 128,
                .L = 0,
                .T = 300,
                .seqlens = {299},
                .rotary = true,
                .causal = -1};
  check_gqa(&c, 121);
}

/* Every tile shape of the flash route on the same cases (the plan is overridden). */
static void test_tile_variants(void **state) {
  (void)state;
  SKIP_WITHOUT_DEVICE();
  static const int tiles[5] = {ONYX__CUDA_TILE_PREFILL, ONYX__CUDA_TILE_PREFILL128,
                               ONYX__CUDA_TILE_PREFILL_M2, ONYX__CUDA_TILE_DECODE,
                               ONYX__CUDA_TILE_DECODE3};
  for (int i = 0; i < 5; ++i) {
    onyx__cuda_attn_force_tile = tiles[i];
    printf(" tile %d\n", tiles[i]);
    for (int t = 0; t < 2; ++t) {
      gqa_case a = {.name = "tile: packed rotary first prompt H128",
                    .dtype = k_half_types[t],
                    .B = 2,
                    .S = 70,
                    .nq = 8,
                    .nkv = 2,
                    .H = 128,
                    .L = 0,
                    .T = 70,
                    .seqlens = {69, 40},
                    .packed = true,
                    .rotary = true,
                    .causal = -1};
      check_gqa(&a, 131 + (uint64_t)(i * 8 + t));
      gqa_case b = {.name = "tile: window softcap bias sink chunked H64",
                    .dtype = k_half_types[t],
                    .B = 2,
                    .S = 33,
                    .nq = 8,
                    .nkv = 2,
                    .H = 64,
                    .L = 90,
                    .T = 123,
                    .seqlens = {122, 50},
                    .window = 40,
                    .softcap = 8.0f,
                    .bias = true,
                    .sink = true,
                    .causal = -1};
      check_gqa(&b, 133 + (uint64_t)(i * 8 + t));
      gqa_case c = {.name = "tile: shared BSNH chunked H96",
                    .dtype = k_half_types[t],
                    .B = 2,
                    .S = 21,
                    .nq = 12,
                    .nkv = 4,
                    .H = 96,
                    .L = 200,
                    .T = 150,
                    .seqlens = {149, 60},
                    .layout = 1,
                    .share = true,
                    .smooth = true,
                    .causal = -1};
      check_gqa(&c, 135 + (uint64_t)(i * 8 + t));
      gqa_case d = {.name = "tile: H80 decode-like S3 split",
                    .dtype = k_half_types[t],
                    .B = 1,
                    .S = 3,
                    .nq = 8,
                    .nkv = 2,
                    .H = 80,
                    .L = 900,
                    .T = 903,
                    .seqlens = {902},
                    .rotary = true,
                    .interleaved = true,
                    .causal = -1};
      check_gqa(&d, 137 + (uint64_t)(i * 8 + t));
      gqa_case e = {.name = "tile: H256 prefill",
                    .dtype = k_half_types[t],
                    .B = 1,
                    .S = 40,
                    .nq = 4,
                    .nkv = 1,
                    .H = 256,
                    .L = 0,
                    .T = 40,
                    .seqlens = {39},
                    .causal = -1};
      check_gqa(&e, 139 + (uint64_t)(i * 8 + t));
    }
  }
  /* Decode with a forced split count larger than the tiles of some splits. */
  onyx__cuda_attn_force_tile = ONYX__CUDA_TILE_DECODE3;
  onyx__cuda_attn_force_split = 7;
  gqa_case f = {.name = "DECODE3 7 splits decode B2 L700 16/2",
                .dtype = ONYX_DTYPE_BFLOAT16,
                .B = 2,
                .S = 1,
                .nq = 16,
                .nkv = 2,
                .H = 128,
                .L = 700,
                .T = 701,
                .seqlens = {700, 100},
                .sink = true,
                .causal = -1};
  check_gqa(&f, 151);
  onyx__cuda_attn_force_split = -1;
  onyx__cuda_attn_force_tile = -1;
}

/* A short workspace view is refused with WORKSPACE_TOO_SMALL before any output. */
static void test_gqa_workspace_too_small(void **state) {
  (void)state;
  SKIP_WITHOUT_DEVICE();
  ch_rng rng = {7};
  ch_tensor q, k, v, pk, pv, sl, tot;
  int64_t qd[3] = {1, 1, 8 * 64}, kd[3] = {1, 1, 64}, pd[4] = {1, 1, 4000, 64}, bd[1] = {1};
  ch_tensor_random(&q, ONYX_DTYPE_FLOAT16, 3, qd, &rng, 1.0);
  ch_tensor_random(&k, ONYX_DTYPE_FLOAT16, 3, kd, &rng, 1.0);
  ch_tensor_random(&v, ONYX_DTYPE_FLOAT16, 3, kd, &rng, 1.0);
  ch_tensor_random(&pk, ONYX_DTYPE_FLOAT16, 4, pd, &rng, 1.0);
  ch_tensor_random(&pv, ONYX_DTYPE_FLOAT16, 4, pd, &rng, 1.0);
  int32_t s32 = 4000, t32 = 4001;
  ch_tensor_bytes(&sl, ONYX_DTYPE_INT32, 1, bd, &s32, false);
  ch_tensor_bytes(&tot, ONYX_DTYPE_INT32, 0, NULL, &t32, false);
  const onyx_tensor *in[7] = {&q.t, &k.t, &v.t, &pk.t, &pv.t, &sl.t, &tot.t};
  ch_node node;
  ch_node_init(&node, "com.microsoft", "GroupQueryAttention", 1, 7, 3);
  ch_node_int(&node, "num_heads", 8);
  ch_node_int(&node, "kv_num_heads", 1);
  ch_ctx ctx;
  ch_ctx_init(&ctx, in, 7, false);
  onyx_workspace_requirement req;
  onyx_status st = ch_run(&onyx_cuda_gqa_kernel, &node, in, 7, &ctx, &req, 0, 4);
  assert_int_equal(req.count, 2);
  assert_int_equal(st, ONYX_STATUS_WORKSPACE_TOO_SMALL);
  assert_false(ctx.out_set[0]);
  printf("  refused: %s\n", ctx.err);
  ch_ctx_free(&ctx);
  /* The SESSION counters' view short by 4 bytes: refused too. */
  ch_ctx_init(&ctx, in, 7, false);
  st = ch_run(&onyx_cuda_gqa_kernel, &node, in, 7, &ctx, &req, 1, 4);
  assert_int_equal(st, ONYX_STATUS_WORKSPACE_TOO_SMALL);
  assert_false(ctx.out_set[0]);
  printf("  refused: %s\n", ctx.err);
  ch_ctx_free(&ctx);
  ch_tensor *all[] = {&q, &k, &v, &pk, &pv, &sl, &tot};
  for (size_t i = 0; i < 7; ++i) ch_tensor_free(all[i]);
}

/* ================================================================== workspace per route */

/* Requirement of a GQA node for a geometry (no data, no device). */
static onyx_workspace_requirement gqa_req(uint32_t dt, int B, int S, int nq, int nkv, int H, int L,
                                          bool packed, bool *ok) {
  onyx_tensor t[7];
  memset(t, 0, sizeof t);
  t[0].dtype = dt;
  t[0].rank = 3;
  t[0].dims[0] = B;
  t[0].dims[1] = S;
  t[0].dims[2] = (int64_t)(packed ? nq + 2 * nkv : nq) * H;
  if (!packed)
    for (int i = 1; i < 3; ++i) {
      t[i].dtype = dt;
      t[i].rank = 3;
      t[i].dims[0] = B;
      t[i].dims[1] = S;
      t[i].dims[2] = (int64_t)nkv * H;
    }
  if (L > 0)
    for (int i = 3; i < 5; ++i) {
      t[i].dtype = dt;
      t[i].rank = 4;
      t[i].dims[0] = B;
      t[i].dims[1] = nkv;
      t[i].dims[2] = L;
      t[i].dims[3] = H;
    }
  t[5].dtype = ONYX_DTYPE_INT32;
  t[5].rank = 1;
  t[5].dims[0] = B;
  t[6].dtype = ONYX_DTYPE_INT32;
  ch_node node;
  ch_node_init(&node, "com.microsoft", "GroupQueryAttention", 1, 7, 3);
  ch_node_int(&node, "num_heads", nq);
  ch_node_int(&node, "kv_num_heads", nkv);
  void *state = NULL;
  char err[128];
  onyx_workspace_requirement req;
  memset(&req, 0, sizeof req);
  *ok = onyx_cuda_gqa_kernel.create(NULL, &node.info, &state, err, sizeof err) == ONYX_STATUS_OK &&
        onyx_cuda_gqa_kernel.workspace(state, t, 7, &req) == ONYX_STATUS_OK;
  onyx_cuda_gqa_kernel.destroy(state);
  return req;
}

static void test_workspace_routes(void **state) {
  (void)state;
  bool ok;
  /* Decode with at least one CTA per SM (B64 Hkv8 = 512 CTAs): no split, the whole
   * requirement is NONE. */
  onyx_workspace_requirement r = gqa_req(ONYX_DTYPE_BFLOAT16, 64, 1, 32, 8, 128, 2047, false, &ok);
  assert_true(ok);
  assert_int_equal(r.count, 0);
  /* Decode B1 Hkv8 Skv 4096: 8 CTAs → 16 splits (132 / 8 rounded down, and the cap
   * 4096 / 256): partials (m, l, O per row and split, and the counters' room a caller
   * without its own would use) as STEP, the decode route's arrival counters (one per
   * (b, kv head), left zero by each launch) as SESSION, nothing else. */
  r = gqa_req(ONYX_DTYPE_BFLOAT16, 1, 1, 32, 8, 128, 4095, false, &ok);
  assert_int_equal(r.count, 2);
  assert_string_equal(r.regions[0].name, "gqa_splitk_partials");
  assert_int_equal(r.regions[0].bytes, 1ull * 32 * 1 * 16 * (128 + 2) * 4 + 1ull * 8 * 4);
  assert_int_equal(r.regions[0].lifetime, ONYX_LIFETIME_STEP);
  assert_string_equal(r.regions[1].name, "gqa_split_counters");
  assert_int_equal(r.regions[1].bytes, 1ull * 8 * 4);
  assert_int_equal(r.regions[1].lifetime, ONYX_LIFETIME_SESSION);
  /* Decode B1 Hkv8 Skv 32768: 16 splits (at most one work unit per SM: 132 / 8 down). */
  r = gqa_req(ONYX_DTYPE_FLOAT16, 1, 1, 32, 8, 128, 32767, false, &ok);
  assert_int_equal(ch_region_bytes(&r, "gqa_splitk_partials"),
                   1ull * 32 * 16 * 130 * 4 + 1ull * 8 * 4);
  assert_int_equal(ch_region_bytes(&r, "gqa_split_counters"), 1ull * 8 * 4);
  assert_int_equal(r.count, 2);
  /* Decode B2 Hkv2 D64 with 7 query heads a group: 33 splits (132 / 4), capped at
   * 1000 / 256 = 3. */
  r = gqa_req(ONYX_DTYPE_BFLOAT16, 2, 1, 14, 2, 64, 999, false, &ok);
  assert_int_equal(ch_region_bytes(&r, "gqa_splitk_partials"),
                   2ull * 14 * 3 * 66 * 4 + 2ull * 2 * 4);
  assert_int_equal(ch_region_bytes(&r, "gqa_split_counters"), 2ull * 2 * 4);
  assert_int_equal(r.count, 2);
  /* A short chunk of 4 rows × group 4 (16 rows, the decode tile) splits too. */
  r = gqa_req(ONYX_DTYPE_BFLOAT16, 1, 4, 8, 2, 128, 4000, false, &ok);
  assert_int_equal(ch_region_bytes(&r, "gqa_splitk_partials"),
                   1ull * 8 * 4 * 15 * 130 * 4 + 1ull * 2 * 4);
  assert_int_equal(ch_region_bytes(&r, "gqa_split_counters"), 1ull * 2 * 4);
  /* Prefill B1 S4096 (2048 CTAs, and prefill is never split): no transposes, no
   * staging, nothing. Packed too. Chunked prefill with 256 rows per kv head: none. */
  r = gqa_req(ONYX_DTYPE_BFLOAT16, 1, 4096, 32, 8, 128, 0, false, &ok);
  assert_int_equal(r.count, 0);
  r = gqa_req(ONYX_DTYPE_BFLOAT16, 1, 4096, 32, 8, 128, 0, true, &ok);
  assert_int_equal(r.count, 0);
  r = gqa_req(ONYX_DTYPE_BFLOAT16, 1, 64, 32, 8, 128, 8000, false, &ok);
  assert_int_equal(r.count, 0);
  /* Prefill the Hopper route takes (it is chosen at dispatch from the same plan) needs
   * none either: B1 S2048 14/2 D64, B4 S4096 32/8 D128 float16. */
  r = gqa_req(ONYX_DTYPE_BFLOAT16, 1, 2048, 14, 2, 64, 0, false, &ok);
  assert_int_equal(r.count, 0);
  r = gqa_req(ONYX_DTYPE_FLOAT16, 4, 4096, 32, 8, 128, 0, false, &ok);
  assert_int_equal(r.count, 0);
  /* Packed decode B16 (128 CTAs, about one per SM): no split and no staging: NONE. */
  r = gqa_req(ONYX_DTYPE_FLOAT16, 16, 1, 32, 8, 128, 4095, true, &ok);
  assert_int_equal(r.count, 0);
  /* Packed decode B4 (32 CTAs): 4 splits. */
  r = gqa_req(ONYX_DTYPE_FLOAT16, 4, 1, 32, 8, 128, 4095, true, &ok);
  assert_int_equal(r.count, 2);
  assert_int_equal(ch_region_bytes(&r, "gqa_splitk_partials"),
                   4ull * 32 * 4 * 130 * 4 + 4ull * 8 * 4);
  assert_int_equal(ch_region_bytes(&r, "gqa_split_counters"), 4ull * 8 * 4);
  /* float32: the reference route, scores (B·Nq·S·(L + S) floats) and nothing else. */
  r = gqa_req(ONYX_DTYPE_FLOAT32, 2, 128, 8, 2, 64, 0, false, &ok);
  assert_int_equal(r.count, 1);
  assert_string_equal(r.regions[0].name, "gqa_scores");
  assert_int_equal(r.regions[0].bytes, 2ull * 8 * 128 * 128 * 4);
  r = gqa_req(ONYX_DTYPE_FLOAT32, 2, 1, 8, 2, 64, 999, false, &ok);
  assert_int_equal(r.count, 1);
  assert_int_equal(ch_region_bytes(&r, "gqa_scores"), 2ull * 8 * 1 * 1000 * 4);
  /* float16 with a head size the tensor cores do not take: reference route. */
  r = gqa_req(ONYX_DTYPE_FLOAT16, 1, 16, 4, 2, 40, 0, false, &ok);
  assert_int_equal(r.count, 1);
  assert_int_equal(ch_region_bytes(&r, "gqa_scores"), 1ull * 4 * 16 * 16 * 4);
  printf("  workspace routes: decode NONE / partials + SESSION counters, prefill NONE, fp32 "
         "scores only\n");
}

static void test_attention_workspace_routes(void **state) {
  (void)state;
  onyx_tensor t[6];
  memset(t, 0, sizeof t);
  int64_t qd[4] = {2, 8, 1, 64}, kd[4] = {2, 2, 1, 64}, pd[4] = {2, 2, 3000, 64};
  for (int i = 0; i < 3; ++i) {
    t[i].dtype = ONYX_DTYPE_FLOAT16;
    t[i].rank = 4;
    memcpy(t[i].dims, i == 0 ? qd : kd, sizeof qd);
  }
  for (int i = 4; i < 6; ++i) {
    t[i].dtype = ONYX_DTYPE_FLOAT16;
    t[i].rank = 4;
    memcpy(t[i].dims, pd, sizeof pd);
  }
  ch_node node;
  ch_node_init(&node, "", "Attention", 23, 6, 3);
  void *st = NULL;
  char err[128];
  assert_int_equal(onyx_cuda_attention_kernel.create(NULL, &node.info, &st, err, sizeof err),
                   ONYX_STATUS_OK);
  onyx_workspace_requirement r;
  memset(&r, 0, sizeof r);
  assert_int_equal(onyx_cuda_attention_kernel.workspace(st, t, 6, &r), ONYX_STATUS_OK);
  /* 4 CTAs (B2 × Hkv2) over 3001 keys → 11 splits (the cap); presents produced: no
   * staging. */
  assert_int_equal(r.count, 1);
  assert_int_equal(ch_region_bytes(&r, "attention_splitk_partials"),
                   2ull * 8 * 1 * 11 * 66 * 4 + 2ull * 2 * 4);
  onyx_cuda_attention_kernel.destroy(st);
  /* Without presents, the past is staged (B·Nkv·T·(Hk + Hv) elements). */
  ch_node_init(&node, "", "Attention", 23, 6, 1);
  assert_int_equal(onyx_cuda_attention_kernel.create(NULL, &node.info, &st, err, sizeof err),
                   ONYX_STATUS_OK);
  memset(&r, 0, sizeof r);
  assert_int_equal(onyx_cuda_attention_kernel.workspace(st, t, 6, &r), ONYX_STATUS_OK);
  assert_int_equal(ch_region_bytes(&r, "attention_kv_staging"), 2ull * 2 * 3001 * 128 * 2);
  assert_int_equal(r.count, 2);
  onyx_cuda_attention_kernel.destroy(st);
}

/* ================================================================== ONNX Attention */

typedef struct at_case {
  const char *name;
  uint32_t dtype;
  int opset;
  bool four_d;
  int B, nq, nkv, sq, skv, hk, hv, past;
  bool causal;
  float scale, softcap;
  int mask; /* 0 none, 1 float (B,1,Sq,T), 2 bool (1,Nq,Sq,T) with a fully masked row,
               3 float (Sq, T), 4 bool short (opset 24: last axis T − 5) */
  bool nonpad;
  bool presents;
  bool nan_pad;   /* keys and values past nonpad_kv_seqlen hold NaN (no past, no presents) */
  int nonpad_cut; /* nonpad_kv_seqlen is this much shorter still */
} at_case;

/* Sets every key row j >= limit[b] of an input K or V (4-D BNSH or 3-D BSNH) to NaN:
 * masked keys must not reach the output whatever they hold. */
static void poison_past_limit(ch_tensor *t, const at_case *c, const int64_t *limit, int head) {
  const int B = c->B, nkv = c->nkv, skv = c->skv;
  size_t n = (size_t)onyx_tensor_numel(&t->t);
  double *vals = malloc(n * sizeof(double));
  memcpy(vals, t->val, n * sizeof(double));
  for (int b = 0; b < B; ++b)
    for (int g = 0; g < nkv; ++g)
      for (int64_t j = limit[b]; j < skv; ++j)
        for (int d = 0; d < head; ++d) {
          int64_t at = c->four_d ? (((int64_t)b * nkv + g) * skv + j) * head + d
                                 : (((int64_t)b * skv + j) * nkv + g) * head + d;
          vals[at] = NAN;
        }
  int64_t dims[4];
  uint32_t rank = t->t.rank;
  for (uint32_t i = 0; i < rank; ++i) dims[i] = t->t.dims[i];
  uint32_t dt = t->t.dtype;
  ch_tensor_free(t);
  ch_tensor_values(t, dt, rank, dims, vals);
  free(vals);
}

static void check_attention(const at_case *c, uint64_t seed) {
  const uint32_t dt = c->dtype;
  const int B = c->B, nq = c->nq, nkv = c->nkv, sq = c->sq, skv = c->skv, hk = c->hk, hv = c->hv;
  const int past = c->past, T = past + skv, G = nq / nkv;
  ch_rng rng = {seed};
  ch_tensor q, k, v, mask, pk, pv, np;
  memset(&mask, 0, sizeof mask);
  memset(&pk, 0, sizeof pk);
  memset(&pv, 0, sizeof pv);
  memset(&np, 0, sizeof np);
  if (c->four_d) {
    int64_t qd[4] = {B, nq, sq, hk}, kd[4] = {B, nkv, skv, hk}, vd[4] = {B, nkv, skv, hv};
    ch_tensor_random(&q, dt, 4, qd, &rng, 1.0);
    ch_tensor_random(&k, dt, 4, kd, &rng, 1.0);
    ch_tensor_random(&v, dt, 4, vd, &rng, 1.0);
  } else {
    int64_t qd[3] = {B, sq, (int64_t)nq * hk}, kd[3] = {B, skv, (int64_t)nkv * hk},
            vd[3] = {B, skv, (int64_t)nkv * hv};
    ch_tensor_random(&q, dt, 3, qd, &rng, 1.0);
    ch_tensor_random(&k, dt, 3, kd, &rng, 1.0);
    ch_tensor_random(&v, dt, 3, vd, &rng, 1.0);
  }
  if (past > 0) {
    int64_t pkd[4] = {B, nkv, past, hk}, pvd[4] = {B, nkv, past, hv};
    ch_tensor_random(&pk, dt, 4, pkd, &rng, 1.0);
    ch_tensor_random(&pv, dt, 4, pvd, &rng, 1.0);
  }
  /* Mask as (mb, mh, Sq, mcols) with broadcast flags. */
  int mcols = T;
  uint8_t *bmask = NULL;
  if (c->mask == 1) {
    int64_t md[4] = {B, 1, sq, T};
    ch_tensor_random(&mask, dt, 4, md, &rng, 2.0);
  } else if (c->mask == 2 || c->mask == 4) {
    if (c->mask == 4) mcols = T - 5;
    size_t n = (size_t)nq * sq * mcols;
    bmask = malloc(n);
    for (size_t i = 0; i < n; ++i) bmask[i] = ch_uniform(&rng) > -0.4;
    /* Head 1, row 0: every key masked → zeros. */
    for (int j = 0; j < mcols; ++j) bmask[((size_t)1 * sq + 0) * mcols + j] = 0;
    int64_t md[4] = {1, nq, sq, mcols};
    ch_tensor_bytes(&mask, ONYX_DTYPE_BOOL, 4, md, bmask, false);
  } else if (c->mask == 3) {
    int64_t md[2] = {sq, T};
    ch_tensor_random(&mask, ONYX_DTYPE_FLOAT32, 2, md, &rng, 1.5);
  }
  int64_t nonpad[8];
  if (c->nonpad) {
    for (int b = 0; b < B; ++b) nonpad[b] = T - 3 * b - (b == B - 1 ? 1 : 0) - c->nonpad_cut;
    int64_t nd[1] = {B};
    ch_tensor_bytes(&np, ONYX_DTYPE_INT64, 1, nd, nonpad, false);
    if (c->nan_pad) {
      poison_past_limit(&k, c, nonpad, hk);
      poison_past_limit(&v, c, nonpad, hv);
    }
  }
  const onyx_tensor *in[7] = {&q.t,
                              &k.t,
                              &v.t,
                              c->mask ? &mask.t : NULL,
                              past > 0 ? &pk.t : NULL,
                              past > 0 ? &pv.t : NULL,
                              c->nonpad ? &np.t : NULL};
  size_t nin = c->nonpad ? 7 : 6;
  ch_node node;
  ch_node_init(&node, "", "Attention", c->opset, nin, c->presents ? 3 : 1);
  if (c->causal) ch_node_int(&node, "is_causal", 1);
  if (!c->four_d) {
    ch_node_int(&node, "q_num_heads", nq);
    ch_node_int(&node, "kv_num_heads", nkv);
  }
  if (c->scale > 0.0f) ch_node_float(&node, "scale", c->scale);
  if (c->softcap > 0.0f) ch_node_float(&node, "softcap", c->softcap);
  ch_ctx ctx;
  ch_ctx_init(&ctx, in, nin, false);
  onyx_workspace_requirement req;
  onyx_status st = ch_run(&onyx_cuda_attention_kernel, &node, in, nin, &ctx, &req, -1, 0);
  if (st != ONYX_STATUS_OK) fprintf(stderr, "  %s: status %d: %s\n", c->name, st, ctx.err);
  assert_int_equal(st, ONYX_STATUS_OK);

  /* Reference: logical K/V (b, g, j, d) over past + new. */
  double *rk = malloc((size_t)B * nkv * T * hk * sizeof(double));
  double *rv = malloc((size_t)B * nkv * T * hv * sizeof(double));
  for (int b = 0; b < B; ++b)
    for (int g = 0; g < nkv; ++g)
      for (int j = 0; j < T; ++j) {
        for (int d = 0; d < hk; ++d) {
          double x;
          if (j < past) {
            x = pk.val[(((int64_t)b * nkv + g) * past + j) * hk + d];
          } else {
            int jj = j - past;
            x = c->four_d ? k.val[(((int64_t)b * nkv + g) * skv + jj) * hk + d]
                          : k.val[(((int64_t)b * skv + jj) * nkv + g) * hk + d];
          }
          rk[(((int64_t)b * nkv + g) * T + j) * hk + d] = x;
        }
        for (int d = 0; d < hv; ++d) {
          double x;
          if (j < past) {
            x = pv.val[(((int64_t)b * nkv + g) * past + j) * hv + d];
          } else {
            int jj = j - past;
            x = c->four_d ? v.val[(((int64_t)b * nkv + g) * skv + jj) * hv + d]
                          : v.val[(((int64_t)b * skv + jj) * nkv + g) * hv + d];
          }
          rv[(((int64_t)b * nkv + g) * T + j) * hv + d] = x;
        }
      }
  size_t ny = (size_t)B * nq * sq * hv;
  double *ry = calloc(ny, sizeof(double));
  double *scores = malloc((size_t)T * sizeof(double));
  double scale = c->scale > 0.0f ? c->scale : 1.0 / sqrt((double)hk);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < nq; ++h)
      for (int s = 0; s < sq; ++s) {
        int g = h / G;
        int64_t limit = c->nonpad ? nonpad[b] : T;
        if (c->mask == 4 && mcols < limit) limit = mcols;
        int64_t pos = c->nonpad ? nonpad[b] - sq + s : past + s;
        const double *qr = c->four_d ? q.val + (((int64_t)b * nq + h) * sq + s) * hk
                                     : q.val + (((int64_t)b * sq + s) * nq + h) * hk;
        for (int j = 0; j < T; ++j) {
          scores[j] = -INFINITY;
          if (j >= limit || (c->causal && j > pos)) continue;
          double acc = 0.0;
          for (int d = 0; d < hk; ++d) acc += qr[d] * rk[(((int64_t)b * nkv + g) * T + j) * hk + d];
          double x = acc * scale;
          if (c->softcap > 0.0f) x = c->softcap * tanh(x / c->softcap);
          if (c->mask == 1) x += mask.val[(((int64_t)b * sq) + s) * T + j];
          if (c->mask == 3) x += mask.val[(int64_t)s * T + j];
          if ((c->mask == 2 || c->mask == 4) && !bmask[((int64_t)h * sq + s) * mcols + j])
            x = -INFINITY;
          scores[j] = x;
        }
        double *out = c->four_d ? ry + (((int64_t)b * nq + h) * sq + s) * hv
                                : ry + (((int64_t)b * sq + s) * nq + h) * hv;
        ref_softmax_row(scores, T, false, 0.0, rv + ((int64_t)b * nkv + g) * T * hv, hv, hv, out);
      }
  double *gy = ch_download(dt, ctx.outs[0].data, ny);
  char what[160];
  snprintf(what, sizeof what, "%s %s Y", c->name, dt_name(dt));
  size_t bad = ch_compare(what, gy, ry, ny, tol_abs(dt), tol_rel(dt));
  if (c->presents) {
    size_t npk = (size_t)B * nkv * T * hk, npv = (size_t)B * nkv * T * hv;
    double *gk = ch_download(dt, ctx.outs[1].data, npk),
           *gv = ch_download(dt, ctx.outs[2].data, npv);
    snprintf(what, sizeof what, "%s %s present_key", c->name, dt_name(dt));
    bad += ch_compare(what, gk, rk, npk, 0.0, 0.0);
    snprintf(what, sizeof what, "%s %s present_value", c->name, dt_name(dt));
    bad += ch_compare(what, gv, rv, npv, 0.0, 0.0);
    free(gk);
    free(gv);
  }
  assert_int_equal(bad, 0);
  free(gy);
  free(ry);
  free(rk);
  free(rv);
  free(scores);
  free(bmask);
  ch_ctx_free(&ctx);
  ch_tensor *all[] = {&q, &k, &v, &mask, &pk, &pv, &np};
  for (size_t i = 0; i < 7; ++i) ch_tensor_free(all[i]);
}

static void test_attention_cases(void **state) {
  (void)state;
  SKIP_WITHOUT_DEVICE();
  const uint32_t types[3] = {ONYX_DTYPE_FLOAT16, ONYX_DTYPE_BFLOAT16, ONYX_DTYPE_FLOAT32};
  for (int t = 0; t < 3; ++t) {
    uint32_t dt = types[t];
    at_case cases[] = {
        {"4D GQA float mask + past/present",
         dt,
         23,
         true,
         2,
         8,
         2,
         33,
         33,
         64,
         64,
         50,
         false,
         0.0f,
         0.0f,
         1,
         false,
         true,
         false,
         0},
        {"3D causal no past Sq=Skv",
         dt,
         23,
         false,
         2,
         6,
         3,
         70,
         70,
         128,
         128,
         0,
         true,
         0.0f,
         0.0f,
         0,
         false,
         false,
         false,
         0},
        {"4D causal Sq<Skv no past",
         dt,
         23,
         true,
         1,
         4,
         4,
         20,
         90,
         80,
         80,
         0,
         true,
         0.0f,
         0.0f,
         0,
         false,
         false,
         false,
         0},
        {"bool mask with a fully masked row",
         dt,
         23,
         true,
         2,
         4,
         2,
         17,
         40,
         96,
         96,
         0,
         false,
         0.0f,
         0.0f,
         2,
         false,
         false,
         false,
         0},
        {"softcap + scale + 2-D float mask",
         dt,
         23,
         false,
         2,
         8,
         8,
         24,
         24,
         64,
         64,
         30,
         true,
         0.2f,
         10.0f,
         3,
         false,
         true,
         false,
         0},
        {"decode past 1200 (split-K) 4D GQA",
         dt,
         23,
         true,
         2,
         16,
         2,
         1,
         1,
         128,
         128,
         1200,
         true,
         0.0f,
         0.0f,
         0,
         false,
         true,
         false,
         0},
        {"nonpad_kv_seqlen causal (opset 24)",
         dt,
         24,
         true,
         3,
         4,
         2,
         10,
         60,
         64,
         64,
         0,
         true,
         0.0f,
         0.0f,
         0,
         true,
         false,
         false,
         0},
        {"short bool mask (opset 24)",
         dt,
         24,
         true,
         2,
         4,
         2,
         12,
         48,
         64,
         64,
         0,
         false,
         0.0f,
         0.0f,
         4,
         false,
         false,
         false,
         0},
        {"Hk 64 != Hv 32 (reference route)",
         dt,
         23,
         true,
         1,
         4,
         2,
         9,
         9,
         64,
         32,
         5,
         true,
         0.0f,
         0.0f,
         0,
         false,
         true,
         false,
         0},
        {"past without presents (staging)",
         dt,
         23,
         true,
         2,
         4,
         2,
         5,
         5,
         64,
         64,
         100,
         true,
         0.0f,
         0.0f,
         1,
         false,
         false,
         false,
         0},
        {"head 256 4D causal",
         dt,
         23,
         true,
         1,
         2,
         1,
         40,
         40,
         256,
         256,
         0,
         true,
         0.0f,
         0.0f,
         0,
         false,
         false,
         false,
         0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
      check_attention(&cases[i], 1000 + (uint64_t)(t * 100 + i));
  }
}

/* ================================================================== the Hopper route */

static const char *route_name(uint32_t r) {
  return r == ONYX__CUDA_ROUTE_HOPPER   ? "hopper"
         : r == ONYX__CUDA_ROUTE_DECODE ? "decode"
         : r == ONYX__CUDA_ROUTE_FLASH  ? "flash"
                                        : "reference";
}

/* The route the last call took must be `want` when the Hopper route is built and the
 * device is sm_90 (else the flash route). */
static void expect_route(const char *what, uint32_t want) {
  uint32_t got = onyx__cuda_attn_last_route();
  if (want == ONYX__CUDA_ROUTE_HOPPER && !onyx__cuda_attn_hopper_available())
    want = ONYX__CUDA_ROUTE_FLASH;
  printf("  %s: %s route\n", what, route_name(got));
  assert_int_equal(got, want);
}

/* The case has just run: the Hopper kernel wrote the presents where it may (a first
 * prompt into presents of S rows). Again with the fill launch before it, against the
 * float64 reference, presents included. */
static void check_fused_present(const gqa_case *c, uint64_t seed) {
  const bool first = c->L == 0 && c->T == c->S;
  assert_int_equal(onyx__cuda_attn_last_fill_present(), first ? 1 : 0);
  onyx__cuda_attn_fused_present = 0;
  check_gqa(c, seed);
  expect_route("  same, the presents filled first", ONYX__CUDA_ROUTE_HOPPER);
  assert_int_equal(onyx__cuda_attn_last_fill_present(), 0);
  onyx__cuda_attn_fused_present = -1;
}

/* Prefill shapes the Hopper route takes: both types, head sizes 64 and 128, BNSH and
 * BSNH presents, causal and not, GQA groups 1 to 4, right-padded batches (keys past a
 * batch's length inside the tile), packed QKV, a growing cache with a past, several row
 * blocks. Each also runs without the ping-pong and on the flash kernel; all must match
 * the float64 reference. */
static void test_hopper_gqa(void **state) {
  (void)state;
  SKIP_WITHOUT_DEVICE();
  static const int heads[2] = {64, 128};
  for (int t = 0; t < 2; ++t)
    for (int hi = 0; hi < 2; ++hi) {
      const int H = heads[hi];
      const uint64_t seed = 200 + (uint64_t)(t * 16 + hi * 4);
      gqa_case cs[4] = {
          {.name = "hopper: first prompt padded B2 S300 8/2",
           .dtype = k_half_types[t],
           .B = 2,
           .S = 300,
           .nq = 8,
           .nkv = 2,
           .H = H,
           .T = 300,
           .seqlens = {299, 181},
           .causal = -1},
          {.name = "hopper: non-causal packed BSNH B2 S200 4/1",
           .dtype = k_half_types[t],
           .B = 2,
           .S = 200,
           .nq = 4,
           .nkv = 1,
           .H = H,
           .T = 200,
           .seqlens = {199, 140},
           .packed = true,
           .layout = 1,
           .causal = 0},
          {.name = "hopper: chunked prefill past 100 B2 S160 4/4 BSNH",
           .dtype = k_half_types[t],
           .B = 2,
           .S = 160,
           .nq = 4,
           .nkv = 4,
           .H = H,
           .L = 100,
           .T = 260,
           .seqlens = {259, 230},
           .layout = t,
           .causal = -1},
          {.name = "hopper: B1 S1000 4/1 (8 row blocks)",
           .dtype = k_half_types[t],
           .B = 1,
           .S = 1000,
           .nq = 4,
           .nkv = 1,
           .H = H,
           .T = 1000,
           .seqlens = {999},
           .causal = -1},
      };
      /* More items (240) than SMs: two rounds of the persistent grid. */
      gqa_case many = {.name = "hopper: B2 S600 24/6 (240 items)",
                       .dtype = k_half_types[t],
                       .B = 2,
                       .S = 600,
                       .nq = 24,
                       .nkv = 6,
                       .H = H,
                       .T = 600,
                       .seqlens = {599, 422},
                       .causal = -1};
      check_gqa(&many, seed + 9);
      expect_route(many.name, ONYX__CUDA_ROUTE_HOPPER);
      check_fused_present(&many, seed + 9);
      onyx__cuda_attn_hopper_variant = 2; /* a CTA per item */
      check_gqa(&many, seed + 9);
      expect_route("  same with a CTA per item", ONYX__CUDA_ROUTE_HOPPER);
      onyx__cuda_attn_hopper_variant = 0;
      /* About 8 items a CTA, of 1 to 8 key tiles; the first Q·Kᵀ of each item goes out
       * with the last P·V of the one before (variant 3: not). */
      gqa_case deep = {.name = "hopper: B4 S1024 32/8 (1024 items)",
                       .dtype = k_half_types[t],
                       .B = 4,
                       .S = 1024,
                       .nq = 32,
                       .nkv = 8,
                       .H = H,
                       .T = 1024,
                       .seqlens = {1023, 700, 1023, 333},
                       .causal = -1};
      check_gqa(&deep, seed + 11);
      expect_route(deep.name, ONYX__CUDA_ROUTE_HOPPER);
      onyx__cuda_attn_hopper_variant = 3; /* items unchained */
      check_gqa(&deep, seed + 11);
      expect_route("  same, items unchained", ONYX__CUDA_ROUTE_HOPPER);
      check_gqa(&many, seed + 9);
      expect_route("  240 items, unchained", ONYX__CUDA_ROUTE_HOPPER);
      onyx__cuda_attn_hopper_variant = 0;
      /* The paired schedule (cuda_attn_hopper_sched.cuh, on request): here one paired
       * round of 132 units, then the tail heavy first; chained (the consumers' cursor
       * looks an item ahead) and not; an odd count of row blocks (a unit of the middle
       * block alone) with padded batches. */
      gqa_case odd = deep;
      odd.name = "hopper: B4 S840 32/8 (7 row blocks a head), paired";
      odd.S = odd.T = 840;
      odd.seqlens[0] = 839, odd.seqlens[1] = 600, odd.seqlens[2] = 839, odd.seqlens[3] = 200;
      onyx__cuda_attn_hopper_schedule = 1;
      check_gqa(&deep, seed + 11);
      expect_route("  1024 items, paired and chained", ONYX__CUDA_ROUTE_HOPPER);
      onyx__cuda_attn_hopper_variant = 3;
      check_gqa(&deep, seed + 11);
      expect_route("  1024 items, paired and unchained", ONYX__CUDA_ROUTE_HOPPER);
      onyx__cuda_attn_hopper_variant = 0;
      if (t == 0) {
        check_gqa(&odd, seed + 12);
        expect_route(odd.name, ONYX__CUDA_ROUTE_HOPPER);
      }
      onyx__cuda_attn_hopper_schedule = 0;
      onyx__cuda_attn_hopper_l2_hints = 0; /* plain loads, no L2 eviction policy */
      check_gqa(&many, seed + 9);
      expect_route("  240 items, plain loads", ONYX__CUDA_ROUTE_HOPPER);
      onyx__cuda_attn_hopper_l2_hints = -1;
      /* The tunings: K of the next key tile before V of this one, three V buffers (ring
       * phases then cycle by 3 against K's 2), both, lazy rescaling, lazy with three V
       * buffers, the wait for P·V kept after the softmax, lazy with that wait: 240 items
       * for each, 1024 items for the odd ones (K ahead; K ahead and three V buffers; lazy
       * with three V buffers; lazy with the ordered wait), the small cases in turn. */
      static const char *const tune_names[7] = {
          "K ahead of V",          "three V buffers",       "K ahead and three V buffers",
          "lazy rescaling",        "lazy, three V buffers", "the wait for P·V ordered",
          "lazy, the wait ordered"};
      for (int r = 1; r <= 7; ++r) {
        char what[96];
        onyx__cuda_attn_hopper_tune = r;
        if (t == 0 && r % 2 == 1) { /* the float64 reference of this one takes seconds */
          check_gqa(&deep, seed + 11);
          snprintf(what, sizeof what, "  %s, %s", "1024 items", tune_names[r - 1]);
          expect_route(what, ONYX__CUDA_ROUTE_HOPPER);
        }
        check_gqa(&many, seed + 9);
        snprintf(what, sizeof what, "  %s, %s", "240 items", tune_names[r - 1]);
        expect_route(what, ONYX__CUDA_ROUTE_HOPPER);
        check_gqa(&cs[r % 4], seed + (uint64_t)r);
        snprintf(what, sizeof what, "  %s, %s", cs[r % 4].name, tune_names[r - 1]);
        expect_route(what, ONYX__CUDA_ROUTE_HOPPER);
      }
      /* The production kernel's TMA stores (the presents from the rings, for plain
       * batches; the output through shared memory) one at a time: only the presents (9),
       * neither (10: copy warps and plain stores), only the output (11); and both with
       * lazy rescaling (12). Plain and padded batches, non-causal, partial last tiles, a
       * past (no present stores), 240 items. */
      static const int store_tunes[4] = {9, 10, 11, 12};
      for (int k = 0; k < 4; ++k) {
        char what[128];
        onyx__cuda_attn_hopper_tune = store_tunes[k];
        check_gqa(&many, seed + 9);
        snprintf(what, sizeof what, "  240 items, TMA stores (tuning %d)", store_tunes[k]);
        expect_route(what, ONYX__CUDA_ROUTE_HOPPER);
        for (int i = 0; i < 4; ++i) {
          check_gqa(&cs[i], seed + (uint64_t)i);
          snprintf(what, sizeof what, "  %s, TMA stores (tuning %d)", cs[i].name, store_tunes[k]);
          expect_route(what, ONYX__CUDA_ROUTE_HOPPER);
        }
      }
      onyx__cuda_attn_hopper_tune = -1;
      for (int i = 0; i < 4; ++i) {
        onyx__cuda_attn_force_hopper = -1;
        check_gqa(&cs[i], seed + (uint64_t)i);
        expect_route(cs[i].name, ONYX__CUDA_ROUTE_HOPPER);
        check_fused_present(&cs[i], seed + (uint64_t)i);
        onyx__cuda_attn_hopper_variant = 1; /* without the consumers' ping-pong */
        check_gqa(&cs[i], seed + (uint64_t)i);
        expect_route("  same without ping-pong", ONYX__CUDA_ROUTE_HOPPER);
        onyx__cuda_attn_hopper_variant = 0;
        onyx__cuda_attn_force_hopper = 0;
        check_gqa(&cs[i], seed + (uint64_t)i);
        expect_route("  same on the flash kernel", ONYX__CUDA_ROUTE_FLASH);
      }
      onyx__cuda_attn_force_hopper = -1;
    }
}

/* Features the Hopper kernel lacks keep a problem on the flash kernel (and stay correct). */
static void test_hopper_refusals(void **state) {
  (void)state;
  SKIP_WITHOUT_DEVICE();
  const uint32_t dt = ONYX_DTYPE_BFLOAT16;
  gqa_case base = {.name = "",
                   .dtype = dt,
                   .B = 1,
                   .S = 130,
                   .nq = 4,
                   .nkv = 2,
                   .H = 64,
                   .T = 130,
                   .seqlens = {129},
                   .causal = -1};
  gqa_case cs[9];
  for (int i = 0; i < 9; ++i) cs[i] = base;
  cs[0].name = "refused: rotary", cs[0].rotary = true;
  cs[1].name = "refused: softcap", cs[1].softcap = 20.0f;
  cs[2].name = "refused: local window", cs[2].window = 50;
  cs[3].name = "refused: attention bias", cs[3].bias = true;
  cs[4].name = "refused: head sink", cs[4].sink = true;
  cs[5].name = "refused: smooth softmax", cs[5].smooth = true;
  cs[6].name = "refused: head size 96", cs[6].H = 96;
  cs[7].name = "refused: 100 query rows", cs[7].S = 100, cs[7].T = 100, cs[7].seqlens[0] = 99;
  cs[8].name = "refused: shared buffer chunk S128 cap 512", cs[8].S = 128, cs[8].L = 512,
  cs[8].T = 300, cs[8].seqlens[0] = 299, cs[8].share = true;
  for (int i = 0; i < 9; ++i) {
    check_gqa(&cs[i], 300 + (uint64_t)i);
    expect_route(cs[i].name, ONYX__CUDA_ROUTE_FLASH);
  }
  /* The same base shape without a feature does take the Hopper route. */
  check_gqa(&base, 310);
  expect_route("base shape", ONYX__CUDA_ROUTE_HOPPER);
}

/* ONNX Attention on the Hopper route: 4-D BNSH queries with a past (causal offset),
 * 3-D non-causal GQA, and nonpad_kv_seqlen with NaN in the padded keys and values. */
/* As check_fused_present, for ONNX Attention: the kernel wrote the presents where there
 * is no past and both are produced (and as many keys as queries); again with the fill
 * launch before it. */
static void check_attention_fused_present(const at_case *c, uint64_t seed) {
  const bool first = c->past == 0 && c->presents && c->sq == c->skv;
  assert_int_equal(onyx__cuda_attn_last_fill_present(), first ? 1 : 0);
  if (!first) return;
  onyx__cuda_attn_fused_present = 0;
  check_attention(c, seed);
  expect_route("  same, the presents filled first", ONYX__CUDA_ROUTE_HOPPER);
  assert_int_equal(onyx__cuda_attn_last_fill_present(), 0);
  onyx__cuda_attn_fused_present = -1;
}

static void test_hopper_attention(void **state) {
  (void)state;
  SKIP_WITHOUT_DEVICE();
  for (int t = 0; t < 2; ++t) {
    uint32_t dt = k_half_types[t];
    at_case cases[] = {
        {"hopper: 4D causal past 56 GQA",
         dt,
         23,
         true,
         2,
         8,
         2,
         200,
         200,
         64,
         64,
         56,
         true,
         0.0f,
         0.0f,
         0,
         false,
         true,
         false,
         0},
        {"hopper: 3D non-causal GQA",
         dt,
         23,
         false,
         1,
         6,
         2,
         150,
         330,
         128,
         128,
         0,
         false,
         0.0f,
         0.0f,
         0,
         false,
         false,
         false,
         0},
        {"hopper: nonpad with NaN padding",
         dt,
         24,
         true,
         3,
         4,
         2,
         140,
         300,
         128,
         128,
         0,
         false,
         0.0f,
         0.0f,
         0,
         true,
         false,
         true,
         0},
        {"hopper: nonpad causal NaN padding 3D",
         dt,
         24,
         false,
         3,
         4,
         1,
         300,
         300,
         64,
         64,
         0,
         true,
         0.5f,
         0.0f,
         0,
         true,
         false,
         true,
         0},
        /* 144 items (two rounds of the persistent grid), the first row block of each
         * batch sees no key (empty items). */
        {"hopper: nonpad 100 causal, empty row blocks",
         dt,
         24,
         false,
         3,
         16,
         2,
         300,
         300,
         128,
         128,
         0,
         true,
         0.0f,
         0.0f,
         0,
         true,
         false,
         true,
         200},
        /* First prompts with presents: the kernel writes them (no fill launch). */
        {"hopper: 4D causal first prompt, presents",
         dt,
         23,
         true,
         2,
         8,
         2,
         256,
         256,
         128,
         128,
         0,
         true,
         0.0f,
         0.0f,
         0,
         false,
         true,
         false,
         0},
        {"hopper: 3D first prompt, presents",
         dt,
         23,
         false,
         1,
         6,
         2,
         300,
         300,
         64,
         64,
         0,
         false,
         0.0f,
         0.0f,
         0,
         false,
         true,
         false,
         0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
      check_attention(&cases[i], 2000 + (uint64_t)(t * 100 + i));
      expect_route(cases[i].name, ONYX__CUDA_ROUTE_HOPPER);
      check_attention_fused_present(&cases[i], 2050 + (uint64_t)(t * 100 + i));
      for (int tune = 9; tune <= 12; ++tune) { /* the stores one at a time (test_hopper_gqa) */
        onyx__cuda_attn_hopper_tune = tune;
        check_attention(&cases[i], 2000 + (uint64_t)(t * 100 + i));
        expect_route("  same, stores by tuning", ONYX__CUDA_ROUTE_HOPPER);
      }
      onyx__cuda_attn_hopper_tune = -1;
    }
  }
}

/* The refusal reasons are host arithmetic: each feature is named (needs no device). */
static void test_hopper_refusal_reasons(void **state) {
  (void)state;
  static _Alignas(16) uint16_t buf[64];
  onyx__cuda_attn_params p;
  memset(&p, 0, sizeof p);
  p.dtype = ONYX_DTYPE_BFLOAT16;
  p.batch = 1, p.nq = 8, p.nkv = 2, p.group = 4, p.sq = 4096, p.hk = p.hv = 128;
  p.q = p.k = p.v = p.y = buf;
  p.q_ss = 8 * 128, p.q_hs = 128, p.q_bs = 4096 * 8 * 128;
  p.k_rs = p.v_rs = 128, p.k_gs = p.v_gs = 4096 * 128, p.k_bs = p.v_bs = 2 * 4096 * 128;
  p.y_ss = 8 * 128, p.y_hs = 128, p.y_bs = 4096 * 8 * 128;
  onyx__cuda_attn_plan plan;
  onyx__cuda_attn_plan_make(p.dtype, 1, 8, 2, 4096, 128, 128, 4096, &plan);
  assert_int_equal(plan.route, ONYX__CUDA_ROUTE_FLASH);
  assert_int_equal(plan.n_split, 1);
  /* Eligible apart from the device (NULL, or the device reason without sm_90a). */
  const char *why = onyx__cuda_attn_hopper_refusal(&p, &plan);
  printf("  eligible geometry: %s\n", why == NULL ? "hopper" : why);
  if (why != NULL) assert_string_equal(why, "no sm_90 device or no sm_90a build");
  struct {
    onyx__cuda_attn_params p;
    const char *why;
  } cases[12];
  for (int i = 0; i < 12; ++i) cases[i].p = p;
  cases[0].p.cos = buf, cases[0].why = "rotary queries";
  cases[1].p.softcap = 5.0f, cases[1].why = "softcap";
  cases[2].p.window = 64, cases[2].why = "local window";
  cases[3].p.mask = buf, cases[3].why = "attention mask or bias";
  cases[4].p.sink = buf, cases[4].why = "head sink";
  cases[5].p.smooth = 1, cases[5].why = "smooth softmax";
  cases[6].p.shared_kv = 1, cases[6].why = "shared KV buffer";
  cases[7].p.hk = cases[7].p.hv = 96, cases[7].why = "head sizes 64 and 128 only";
  cases[8].p.sq = 100, cases[8].why = "fewer query rows than one tile";
  cases[9].p.dtype = ONYX_DTYPE_FLOAT32, cases[9].why = "float16 or bfloat16 only";
  cases[10].p.q = buf + 1, cases[10].why = "query, key or value layout TMA cannot read";
  cases[11].p.k_rs = 132, cases[11].why = "query, key or value layout TMA cannot read";
  for (int i = 0; i < 12; ++i) {
    const char *got = onyx__cuda_attn_hopper_refusal(&cases[i].p, &plan);
    assert_non_null(got);
    assert_string_equal(got, cases[i].why);
  }
  /* A split plan (decode) is never the Hopper route's. */
  onyx__cuda_attn_plan split = plan;
  split.n_split = 4;
  assert_string_equal(onyx__cuda_attn_hopper_refusal(&p, &split),
                      "not a flash-route problem without a key split");
  onyx__cuda_attn_force_hopper = 0;
  assert_string_equal(onyx__cuda_attn_hopper_refusal(&p, &plan), "turned off (tests)");
  onyx__cuda_attn_force_hopper = -1;
}

/* ================================================================== the decode route */

/* The decode route where the kernel runs on this device (else the flash route). */
static void expect_decode(const char *what) {
  uint32_t want =
      onyx__cuda_attn_decode_available() ? ONYX__CUDA_ROUTE_DECODE : ONYX__CUDA_ROUTE_FLASH;
  uint32_t got = onyx__cuda_attn_last_route();
  printf("  %s: %s route\n", what, route_name(got));
  assert_int_equal(got, want);
}

/* A case on the decode route, then on the flash route (the decode route turned off):
 * both against the float64 reference, the appended present rows included. */
static void check_both_routes(const gqa_case *c, uint64_t seed) {
  onyx__cuda_attn_force_decode = -1;
  check_gqa(c, seed);
  expect_decode(c->name);
  onyx__cuda_attn_force_decode = 0;
  check_gqa(c, seed);
  expect_route("  same on the flash route", ONYX__CUDA_ROUTE_FLASH);
  onyx__cuda_attn_force_decode = -1;
}

/* The decode cases run on both routes (the production variant), or on the decode route
 * alone (a forced variant of the kernel); a variant runs every case and launch knob
 * (g_decode_knobs) or only the tile paths. */
static bool g_decode_both = true;
static bool g_decode_knobs = true;

static void check_decode_case(const gqa_case *c, uint64_t seed) {
  if (g_decode_both) {
    check_both_routes(c, seed);
    return;
  }
  onyx__cuda_attn_force_decode = -1;
  check_gqa(c, seed);
  expect_decode(c->name);
}

/* Decode and short chunks on the decode route: GQA groups 1, 4, 5 and 7; key counts off
 * the 64- and 128-key tiles; few (b, kv heads) with many splits and many (more work
 * units than SMs); shared buffers with capacity past the total (the new rows appended
 * by the kernel, rotated: halves, interleaved, position ids), growing caches (the fill
 * writes them), BSNH, windows, sinks, smooth softmax, causal chunks and a non-causal
 * one, a first prompt into a shared buffer, batches with a single key. */
static void short_in_large_cases(void);

static void decode_route_cases(void) {
  for (int t = 0; t < 2; ++t) {
    const uint32_t dt = k_half_types[t];
    const uint64_t seed = 400 + (uint64_t)t * 32;
    gqa_case a = {.name = "decode: shared cap 5000 B1 32/8 H128 rotary (16 splits)",
                  .dtype = dt,
                  .B = 1,
                  .S = 1,
                  .nq = 32,
                  .nkv = 8,
                  .H = 128,
                  .L = 5000,
                  .T = 4322,
                  .seqlens = {4321},
                  .rotary = true,
                  .share = true,
                  .total_on_host = true,
                  .causal = -1};
    check_decode_case(&a, seed + 0);
    gqa_case b = {.name = "decode: growing B2 14/2 H64 L777 (group 7, 3 splits)",
                  .dtype = dt,
                  .B = 2,
                  .S = 1,
                  .nq = 14,
                  .nkv = 2,
                  .H = 64,
                  .L = 777,
                  .T = 778,
                  .seqlens = {777, 400},
                  .causal = -1};
    check_decode_case(&b, seed + 1);
  }
  const uint32_t bf = ONYX_DTYPE_BFLOAT16;
  gqa_case cs[6] = {
      {.name = "decode: shared BSNH cap 1000 B8 24/24 H128 (192 units, group 1)",
       .dtype = bf,
       .B = 8,
       .S = 1,
       .nq = 24,
       .nkv = 24,
       .H = 128,
       .L = 1000,
       .T = 1000,
       .seqlens = {300, 0, 63, 64, 128, 700, 999, 5},
       .layout = 1,
       .share = true,
       .causal = -1},
      {.name = "chunk: shared S4 group 4 cap 600 B2 8/2 H128 interleaved pos ids (2 splits)",
       .dtype = ONYX_DTYPE_FLOAT16,
       .B = 2,
       .S = 4,
       .nq = 8,
       .nkv = 2,
       .H = 128,
       .L = 600,
       .T = 420,
       .seqlens = {419, 200},
       .rotary = true,
       .interleaved = true,
       .pos_ids = true,
       .share = true,
       .causal = -1},
      {.name = "chunk: growing S2 group 7 B2 14/2 H64 window 50 sink",
       .dtype = bf,
       .B = 2,
       .S = 2,
       .nq = 14,
       .nkv = 2,
       .H = 64,
       .L = 300,
       .T = 302,
       .seqlens = {301, 120},
       .window = 50,
       .sink = true,
       .causal = -1},
      {.name = "first prompt into a shared buffer S16 group 1 cap 64 B2 2/2 H64 smooth",
       .dtype = bf,
       .B = 2,
       .S = 16,
       .nq = 2,
       .nkv = 2,
       .H = 64,
       .L = 64,
       .T = 16,
       .seqlens = {15, 9},
       .share = true,
       .smooth = true,
       .causal = -1},
      {.name = "chunk: non-causal S3 group 5 B1 10/2 H128 L500 packed",
       .dtype = bf,
       .B = 1,
       .S = 3,
       .nq = 10,
       .nkv = 2,
       .H = 128,
       .L = 500,
       .T = 503,
       .seqlens = {502},
       .packed = true,
       .causal = 0},
      {.name = "decode: shared window 70 sink B3 8/2 H64 cap 900 rotary pos ids",
       .dtype = ONYX_DTYPE_FLOAT16,
       .B = 3,
       .S = 1,
       .nq = 8,
       .nkv = 2,
       .H = 64,
       .L = 900,
       .T = 800,
       .seqlens = {799, 64, 1},
       .rotary = true,
       .pos_ids = true,
       .window = 70,
       .sink = true,
       .share = true,
       .causal = -1},
  };
  for (int i = 0; i < 6; ++i) check_decode_case(&cs[i], 480 + (uint64_t)i);
  /* 192 units in the rounds' own CTAs (two rounds of 96), on every variant. */
  onyx__cuda_attn_decode_grid = -1;
  check_decode_case(&cs[0], 486);
  onyx__cuda_attn_decode_grid = 0;
  short_in_large_cases();
  /* Forced splits: more units than SMs with splits (CTAs merge for units they did not
   * all run), splits with no key tile at all (a batch with 11 keys), and the appended
   * rows on a split run. */
  onyx__cuda_attn_force_split = 9;
  gqa_case f = {.name = "decode: 9 forced splits growing B4 32/8 H128 L900 (288 units)",
                .dtype = bf,
                .B = 4,
                .S = 1,
                .nq = 32,
                .nkv = 8,
                .H = 128,
                .L = 900,
                .T = 901,
                .seqlens = {900, 10, 555, 256},
                .causal = -1};
  check_decode_case(&f, 490);
  onyx__cuda_attn_force_split = 5;
  gqa_case h = {.name = "decode: 5 forced splits shared B2 8/2 H128 cap 700 rotary",
                .dtype = bf,
                .B = 2,
                .S = 1,
                .nq = 8,
                .nkv = 2,
                .H = 128,
                .L = 700,
                .T = 650,
                .seqlens = {649, 64},
                .rotary = true,
                .share = true,
                .causal = -1};
  check_decode_case(&h, 491);
  onyx__cuda_attn_force_split = -1;
}

/* Short lengths in a large shared buffer (an exporter's decode: the capacity is
 * max_length, the plan splits for it): the kernel cuts each (b, kv head) by its actual
 * length (units past it do nothing, a single split writes the output directly, split 0
 * alone with the new rows where a split is spare), the seqlens differing per batch so
 * heads of one launch use different split counts (1, 11 of 16 with split 0 alone, all
 * 16), and several steps on one state so the counters left by one launch serve the
 * next. */
static void short_in_large_cases(void) {
  for (int t = g_decode_knobs ? 0 : 1; t < 2; ++t) {
    const uint32_t dt = k_half_types[t];
    gqa_case a = {.name = "short in large: shared cap 4096 B4 14/2 H64 rotary (1, 1, 11, 16 used)",
                  .dtype = dt,
                  .B = 4,
                  .S = 1,
                  .nq = 14,
                  .nkv = 2,
                  .H = 64,
                  .L = 4096,
                  .T = 4096,
                  .seqlens = {63, 255, 1400, 4095},
                  .packed = true,
                  .rotary = true,
                  .share = true,
                  .total_on_host = true,
                  .causal = -1,
                  .repeat = 2};
    check_decode_case(&a, 700 + (uint64_t)t);
  }
  const uint32_t bf = ONYX_DTYPE_BFLOAT16;
  gqa_case cs[4] = {
      {.name = "short in large: shared cap 8192 B1 32/8 H128 rotary len 700 (6 of 16)",
       .dtype = bf,
       .B = 1,
       .S = 1,
       .nq = 32,
       .nkv = 8,
       .H = 128,
       .L = 8192,
       .T = 8192,
       .seqlens = {699},
       .packed = true,
       .rotary = true,
       .share = true,
       .total_on_host = true,
       .causal = -1,
       .repeat = 2},
      {.name = "short in large: shared cap 6000 B3 14/2 H64 window 300 sink interleaved",
       .dtype = ONYX_DTYPE_FLOAT16,
       .B = 3,
       .S = 1,
       .nq = 14,
       .nkv = 2,
       .H = 64,
       .L = 6000,
       .T = 6000,
       .seqlens = {5000, 31, 700},
       .rotary = true,
       .interleaved = true,
       .window = 300,
       .sink = true,
       .share = true,
       .causal = -1,
       .repeat = 1},
      {.name = "short in large: shared cap 3000 B2 8/2 H64 smooth pos ids, one key",
       .dtype = bf,
       .B = 2,
       .S = 1,
       .nq = 8,
       .nkv = 2,
       .H = 64,
       .L = 3000,
       .T = 3000,
       .seqlens = {0, 2600},
       .rotary = true,
       .pos_ids = true,
       .smooth = true,
       .share = true,
       .causal = -1,
       .repeat = 1},
      {.name = "short in large: chunk S2 group 7 shared cap 5000 B2 14/2 H64 (lens 2, 900)",
       .dtype = bf,
       .B = 2,
       .S = 2,
       .nq = 14,
       .nkv = 2,
       .H = 64,
       .L = 5000,
       .T = 5000,
       .seqlens = {1, 899},
       .packed = true,
       .rotary = true,
       .share = true,
       .causal = -1,
       .repeat = 1},
  };
  if (!g_decode_knobs) { /* a kernel variant: the tile paths, not every knob again */
    check_decode_case(&cs[0], 710);
    check_decode_case(&cs[3], 713);
    return;
  }
  for (int i = 0; i < 4; ++i) check_decode_case(&cs[i], 710 + (uint64_t)i);
  /* Every planned split (the route before it cut by length), 256 keys a split, and
   * split 0 taking its share of tiles, on the same cases. */
  onyx__cuda_attn_decode_split_keys = 0;
  check_decode_case(&cs[0], 720);
  check_decode_case(&cs[1], 721);
  onyx__cuda_attn_decode_split_keys = 256;
  check_decode_case(&cs[0], 723);
  check_decode_case(&cs[3], 724);
  onyx__cuda_attn_decode_split_keys = ONYX__CUDA_ATTN_DECODE_SPLIT_KEYS;
  onyx__cuda_attn_decode_split0_alone = 0;
  check_decode_case(&cs[0], 725);
  check_decode_case(&cs[3], 726);
  onyx__cuda_attn_decode_split0_alone = 1;
  /* Plain launches (no programmatic dependence). */
  onyx__cuda_attn_pdl = 0;
  check_decode_case(&cs[0], 722);
  onyx__cuda_attn_pdl = 1;
  /* Fewer CTAs than SMs: the rounds' own count (each CTA the same units), and 3 CTAs
   * taking many units each, splits of one (b, kv head) in one CTA included. */
  onyx__cuda_attn_decode_grid = -1;
  check_decode_case(&cs[0], 727);
  onyx__cuda_attn_decode_grid = 3;
  check_decode_case(&cs[0], 728);
  check_decode_case(&cs[3], 729);
  /* Several units a CTA with position ids, interleaved rotary, a window and a sink: the
   * later units' Q and appended rows (a variant may prepare them ahead). */
  check_decode_case(&cs[1], 730);
  check_decode_case(&cs[2], 731);
  onyx__cuda_attn_decode_grid = 0;
}

/* The production routing by units a CTA (onyx__cuda_attn_decode_variant 0): the last
 * decode launch ran v8 where its grid dealt some CTA more than one unit, else v3; want
 * 1 (several units a CTA), 0 (one) or -1 (the rule alone: the device's SM count
 * decides). */
static void expect_routed(const char *what, int want) {
  if (!onyx__cuda_attn_decode_available()) return;
  int v = 0, grid = 0;
  int64_t units = 0;
  onyx__cuda_attn_decode_last(&v, &units, &grid);
  printf("  %s: variant %d, %lld units on %d CTAs\n", what, v, (long long)units, grid);
  const bool several = units > grid;
  if (want >= 0) assert_int_equal(several, want == 1);
  assert_int_equal(v, several ? 8 : 3);
}

/* The routed production path on both sides of the rule, against the float64
 * reference: B64 32/8 H128 (issue #15's decode geometry at a short cap: 512 units on
 * one CTA an SM, several a CTA), B16 32/8 (128 units: one a CTA on 128 SMs or more),
 * and a grid of 3 CTAs (the knob makes several a CTA on any geometry). */
static void routing_cases(void) {
  gqa_case a = {.name = "routing: shared cap 320 B64 32/8 H128 rotary (512 units)",
                .dtype = ONYX_DTYPE_BFLOAT16,
                .B = 64,
                .S = 1,
                .nq = 32,
                .nkv = 8,
                .H = 128,
                .L = 320,
                .T = 320,
                .rotary = true,
                .share = true,
                .causal = -1};
  for (int b = 0; b < a.B; ++b) a.seqlens[b] = 319 - (b * 37) % 240; /* 80 .. 319 */
  check_gqa(&a, 760);
  expect_decode(a.name);
  expect_routed(a.name, 1);
  gqa_case b = {.name = "routing: shared cap 600 B16 32/8 H128 (128 units)",
                .dtype = ONYX_DTYPE_FLOAT16,
                .B = 16,
                .S = 1,
                .nq = 32,
                .nkv = 8,
                .H = 128,
                .L = 600,
                .T = 600,
                .share = true,
                .causal = -1};
  for (int i = 0; i < b.B; ++i) b.seqlens[i] = 599 - (i * 53) % 500; /* 99 .. 599 */
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess) sms = 0;
  check_gqa(&b, 761);
  expect_decode(b.name);
  expect_routed(b.name, sms >= 128 ? 0 : -1);
  onyx__cuda_attn_decode_grid = 3;
  check_gqa(&b, 762);
  expect_decode(b.name);
  expect_routed("  same on 3 CTAs", 1);
  onyx__cuda_attn_decode_grid = 0;
}

static void test_decode_route(void **state) {
  (void)state;
  SKIP_WITHOUT_DEVICE();
  g_decode_both = true;
  onyx__cuda_attn_force_decode = -1;
  routing_cases();
  decode_route_cases();
}

/* ONNX Attention decode on the decode route: 4-D with a past (presents filled by the
 * op), 3-D with nonpad_kv_seqlen and NaN in the padded keys and values. */
static void decode_attention_cases(void) {
  for (int t = 0; t < 2; ++t) {
    uint32_t dt = k_half_types[t];
    at_case cases[] = {
        {"decode: 4D past 333 GQA 4",
         dt,
         23,
         true,
         2,
         8,
         2,
         1,
         1,
         128,
         128,
         333,
         true,
         0.0f,
         0.0f,
         0,
         false,
         true,
         false,
         0},
        {"chunk: 3D nonpad NaN padding S2 GQA 4",
         dt,
         24,
         false,
         3,
         8,
         2,
         2,
         400,
         64,
         64,
         0,
         true,
         0.0f,
         0.0f,
         0,
         true,
         false,
         true,
         0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
      onyx__cuda_attn_force_decode = -1;
      check_attention(&cases[i], 3000 + (uint64_t)(t * 100 + i));
      expect_decode(cases[i].name);
      if (g_decode_knobs) { /* 2 CTAs: several units each (nonpad lengths, a past) */
        onyx__cuda_attn_decode_grid = 2;
        check_attention(&cases[i], 3050 + (uint64_t)(t * 100 + i));
        expect_decode(cases[i].name);
        onyx__cuda_attn_decode_grid = 0;
      }
      if (!g_decode_both) continue;
      onyx__cuda_attn_force_decode = 0;
      check_attention(&cases[i], 3000 + (uint64_t)(t * 100 + i));
      expect_route("  same on the flash route", ONYX__CUDA_ROUTE_FLASH);
      onyx__cuda_attn_force_decode = -1;
    }
  }
}

static void test_decode_attention(void **state) {
  (void)state;
  SKIP_WITHOUT_DEVICE();
  g_decode_both = true;
  decode_attention_cases();
}

/* Every variant of the decode kernel (tile keys, consumer warps, stages, TMA or
 * cp.async, the L2 hint, units prepared ahead) on the same cases, decode route only.
 * The newest first and with every launch knob (grids of 3 CTAs and the rounds' own,
 * every split, split 0 alone or not, plain launches): its barriers are the ones not yet
 * run on a device, and a hang shows before the time limit stops the older ones. */
static void test_decode_variants(void **state) {
  (void)state;
  SKIP_WITHOUT_DEVICE();
  static const int order[] = {8, 1, 2, 3, 4, 5, 6, 7};
  g_decode_both = false;
  for (size_t i = 0; i < sizeof order / sizeof order[0]; ++i) {
    const int v = order[i];
    printf("  decode variant %d\n", v);
    onyx__cuda_attn_decode_variant = v;
    g_decode_knobs = i == 0;
    decode_route_cases();
    decode_attention_cases();
  }
  onyx__cuda_attn_decode_variant = 0;
  g_decode_both = true;
  g_decode_knobs = true;
}

/* The decode route's refusals are host arithmetic: each is named (needs no device). */
static void test_decode_refusal_reasons(void **state) {
  (void)state;
  static _Alignas(16) uint16_t buf[64];
  onyx__cuda_attn_params p;
  memset(&p, 0, sizeof p);
  p.dtype = ONYX_DTYPE_BFLOAT16;
  p.batch = 1, p.nq = 32, p.nkv = 8, p.group = 4, p.sq = 1, p.hk = p.hv = 128;
  p.q = p.k = p.v = p.y = buf;
  p.q_ss = 32 * 128, p.q_hs = 128, p.q_bs = 32 * 128;
  p.k_rs = p.v_rs = 128, p.k_gs = p.v_gs = 4096 * 128, p.k_bs = p.v_bs = 8 * 4096 * 128;
  p.y_ss = 32 * 128, p.y_hs = 128, p.y_bs = 32 * 128;
  onyx__cuda_attn_plan plan;
  onyx__cuda_attn_plan_make(p.dtype, 1, 32, 8, 1, 128, 128, 4096, &plan);
  assert_int_equal(plan.route, ONYX__CUDA_ROUTE_FLASH);
  assert_int_equal(plan.tile, ONYX__CUDA_TILE_DECODE3);
  assert_int_equal(plan.n_split, 16);
  p.n_split = plan.n_split;
  p.partials = (float *)(void *)buf;
  const char *why = onyx__cuda_attn_decode_refusal(&p, &plan);
  printf("  eligible geometry: %s\n", why == NULL ? "decode" : why);
  if (why != NULL) assert_string_equal(why, "no device the decode kernel runs on");
  struct {
    onyx__cuda_attn_params p;
    const char *why;
  } cases[12];
  for (int i = 0; i < 12; ++i) cases[i].p = p;
  cases[0].p.softcap = 5.0f, cases[0].why = "softcap";
  cases[1].p.mask = buf, cases[1].why = "attention mask or bias";
  cases[2].p.hk = cases[2].p.hv = 96, cases[2].why = "head sizes 64 and 128 only";
  cases[3].p.hv = 64, cases[3].why = "head sizes 64 and 128 only";
  cases[4].p.sq = 5, cases[4].why = "more than 16 rows (query rows times group) per kv head";
  cases[5].p.dtype = ONYX_DTYPE_FLOAT32, cases[5].why = "float16 or bfloat16 only";
  cases[6].p.k = buf + 1, cases[6].why = "key or value rows not 16-byte aligned";
  cases[7].p.v_rs = 132, cases[7].why = "key or value rows not 16-byte aligned";
  cases[8].p.q_hs = 100, cases[8].why = "query rows not 16-byte aligned";
  cases[9].p.y = buf + 1, cases[9].why = "output not aligned for 8-byte stores";
  cases[10].p.n_split = 4, cases[10].why = "split not the plan's";
  cases[11].p.nkv = 5, cases[11].why = "query heads not a multiple of kv heads";
  for (int i = 0; i < 12; ++i) {
    const char *got = onyx__cuda_attn_decode_refusal(&cases[i].p, &plan);
    assert_non_null(got);
    assert_string_equal(got, cases[i].why);
  }
  onyx__cuda_attn_plan ref = plan;
  ref.route = ONYX__CUDA_ROUTE_REF;
  assert_string_equal(onyx__cuda_attn_decode_refusal(&p, &ref), "not a flash-route problem");
  onyx__cuda_attn_force_tile = ONYX__CUDA_TILE_DECODE;
  assert_string_equal(onyx__cuda_attn_decode_refusal(&p, &plan), "a flash tile is forced (tests)");
  onyx__cuda_attn_force_tile = -1;
  onyx__cuda_attn_force_decode = 0;
  assert_string_equal(onyx__cuda_attn_decode_refusal(&p, &plan), "turned off (tests)");
  onyx__cuda_attn_force_decode = -1;
  /* A chunk of 16 rows is the decode tile; 17 rows are not. */
  onyx__cuda_attn_plan_make(p.dtype, 1, 32, 8, 4, 128, 128, 4096, &plan);
  assert_int_equal(plan.tile, ONYX__CUDA_TILE_DECODE3);
  onyx__cuda_attn_plan_make(p.dtype, 1, 34, 2, 1, 128, 128, 4096, &plan);
  assert_int_equal(plan.tile, ONYX__CUDA_TILE_PREFILL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_workspace_routes),
      cmocka_unit_test(test_attention_workspace_routes),
      cmocka_unit_test(test_gqa_first_prompt),
      cmocka_unit_test(test_gqa_decode_growing),
      cmocka_unit_test(test_gqa_decode_shared),
      cmocka_unit_test(test_gqa_chunked_prefill),
      cmocka_unit_test(test_gqa_packed_rotary),
      cmocka_unit_test(test_gqa_window_softcap),
      cmocka_unit_test(test_gqa_sinks_bias),
      cmocka_unit_test(test_gqa_layouts_identical),
      cmocka_unit_test(test_gqa_head_sizes),
      cmocka_unit_test(test_gqa_reference_route),
      cmocka_unit_test(test_gqa_large_group_prefill),
      cmocka_unit_test(test_tile_variants),
      cmocka_unit_test(test_gqa_workspace_too_small),
      cmocka_unit_test(test_attention_cases),
      cmocka_unit_test(test_hopper_refusal_reasons),
      cmocka_unit_test(test_hopper_gqa),
      cmocka_unit_test(test_hopper_refusals),
      cmocka_unit_test(test_hopper_attention),
      cmocka_unit_test(test_decode_refusal_reasons),
      cmocka_unit_test(test_decode_route),
      cmocka_unit_test(test_decode_variants),
      cmocka_unit_test(test_decode_attention),
  };
  /* ONYX_TEST_FILTER (a cmocka pattern such as "test_hopper*") runs a subset. */
  const char *filter = getenv("ONYX_TEST_FILTER");
  if (filter != NULL && filter[0] != '\0') cmocka_set_test_filter(filter);
  return cmocka_run_group_tests(tests, NULL, NULL);
}
