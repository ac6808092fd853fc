/*
 * cmocka tests of the CPU attention kernels, driven through the fake core (attn_fake.c):
 * workspace per route, WORKSPACE_TOO_SMALL, the shared KV buffer written in place,
 * BNSH == BSNH, split-K == serial, refusals, and golden values from ONNX Runtime.
 * Broader parity (ONNX node tests, ~50 generated ONNX Runtime cases) runs through
 * tools/parity/run_attention_cases.py (ctest attention.onnx_node, attention.ort_parity).
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

#include "attention_kernels.h"
#include "attn_fake.h"
#include "attn_goldens.h"
#include "attn_impl.h"

/* ------------------------------------------------------------------ helpers */

static uint32_t rng_next(uint32_t *s) {
  *s = *s * 1664525u + 1013904223u;
  return *s;
}

/* Fresh random non-zero values in (-1, 1). */
static void fill(float *p, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; ++i) {
    float v = (float)((rng_next(&seed) >> 8) & 0xffff) / 32768.0f - 1.0f;
    p[i] = fabsf(v) < 1e-3f ? 0.25f : v;
  }
}

static float *fresh(size_t n, uint32_t seed) {
  float *p = malloc(n * sizeof *p);
  assert_non_null(p);
  fill(p, n, seed);
  return p;
}

typedef struct run {
  fake_ctx f;
  onyx_workspace_requirement req;
  onyx_status create_status, status;
  char err[256];
} run;

/* create → workspace (geometry only) → compute with exact views (or one short). */
static void run_node(run *r, const onyx_kernel_table *kt, fake_node *node, const onyx_tensor **in,
                     size_t n, uint32_t threads, bool allow_alias, int short_region,
                     uint64_t shrink) {
  memset(r, 0, sizeof *r);
  for (size_t i = 0; i < n; ++i) node->input_present[i] = in[i] != NULL;
  fake_provider *prov = fake_provider_new(threads);
  void *state = NULL;
  r->create_status =
      kt->create(fake_provider_state(prov), &node->info, &state, r->err, sizeof r->err);
  if (r->create_status != ONYX_STATUS_OK) {
    fake_provider_free(prov);
    r->status = r->create_status;
    return;
  }
  r->req.struct_size = sizeof r->req;
  r->req.version = ONYX_ABI_VERSION;
  onyx_tensor geo[16];
  memset(geo, 0, sizeof geo);
  for (size_t i = 0; i < n; ++i)
    if (in[i] != NULL) {
      geo[i] = *in[i];
      geo[i].data = NULL;
    }
  if (kt->workspace != NULL)
    assert_int_equal(kt->workspace(state, geo, n, &r->req), ONYX_STATUS_OK);
  fake_ctx_init(&r->f, (const onyx_tensor *const *)in, n, allow_alias);
  fake_ctx_workspace(&r->f, &r->req, short_region, shrink);
  r->status = kt->compute(state, &r->f.ctx, (const onyx_tensor *const *)in, n);
  kt->destroy(state);
  fake_provider_free(prov);
}

static uint64_t req_bytes(const onyx_workspace_requirement *req) {
  uint64_t b = 0;
  for (uint32_t i = 0; i < req->count; ++i) b += req->regions[i].bytes;
  return b;
}

/* Workspace requirement of a kernel for a geometry (no data). */
static onyx_workspace_requirement ws_for(const onyx_kernel_table *kt, fake_node *node,
                                         const onyx_tensor *geo, size_t n, uint32_t threads) {
  fake_provider *prov = fake_provider_new(threads);
  void *state = NULL;
  char err[256];
  onyx_status st = kt->create(fake_provider_state(prov), &node->info, &state, err, sizeof err);
  if (st != ONYX_STATUS_OK) fail_msg("create failed: %s", err);
  onyx_workspace_requirement req;
  memset(&req, 0, sizeof req);
  req.struct_size = sizeof req;
  req.version = ONYX_ABI_VERSION;
  assert_int_equal(kt->workspace(state, geo, n, &req), ONYX_STATUS_OK);
  onyx_workspace_requirement again = req;
  assert_int_equal(kt->workspace(state, geo, n, &again), ONYX_STATUS_OK); /* pure */
  assert_memory_equal(&req, &again, sizeof req);
  kt->destroy(state);
  fake_provider_free(prov);
  return req;
}

static void expect_close(const float *got, const float *want, size_t n, float atol, float rtol,
                         const char *what) {
  for (size_t i = 0; i < n; ++i) {
    float d = fabsf(got[i] - want[i]);
    if (!(d <= atol + rtol * fabsf(want[i])))
      fail_msg("%s[%zu]: got %.9g, want %.9g (|diff| %.3g)", what, i, (double)got[i],
               (double)want[i], (double)d);
  }
}

static void expect_close_f16(const uint16_t *got, const uint16_t *want, size_t n, float atol,
                             float rtol, const char *what) {
  for (size_t i = 0; i < n; ++i) {
    float g = onyx__attn_f16_to_f32(got[i]), w = onyx__attn_f16_to_f32(want[i]);
    if (!(fabsf(g - w) <= atol + rtol * fabsf(w)))
      fail_msg("%s[%zu]: got %.6g, want %.6g", what, i, (double)g, (double)w);
  }
}

/* A GQA node with the usual outputs (output, present_key, present_value). */
static void gqa_node(fake_node *n, int64_t nq, int64_t nkv, size_t inputs) {
  fake_node_init(n, "com.microsoft", "GroupQueryAttention", 1, inputs, 3);
  fake_node_int(n, "num_heads", nq);
  fake_node_int(n, "kv_num_heads", nkv);
}

/* Geometry of a GQA call: query/key/value (B, S, ·), past (B, Nkv, L, H), scalars. */
static size_t gqa_geo(onyx_tensor *geo, uint32_t dt, int64_t B, int64_t S, int64_t nq, int64_t nkv,
                      int64_t H, int64_t L, bool packed) {
  memset(geo, 0, sizeof(onyx_tensor) * 12);
  int64_t q[3] = {B, S, (packed ? nq + 2 * nkv : nq) * H}, kv[3] = {B, S, nkv * H};
  int64_t past[4] = {B, nkv, L, H}, bd[1] = {B};
  geo[0] = fake_tensor(dt, 3, q, NULL);
  if (!packed) {
    geo[1] = fake_tensor(dt, 3, kv, NULL);
    geo[2] = fake_tensor(dt, 3, kv, NULL);
  }
  geo[3] = fake_tensor(dt, 4, past, NULL);
  geo[4] = fake_tensor(dt, 4, past, NULL);
  geo[5] = fake_tensor(ONYX_DTYPE_INT32, 1, bd, NULL);
  geo[6] = fake_tensor(ONYX_DTYPE_INT32, 0, NULL, NULL);
  return 7;
}

/* ------------------------------------------------------------------ workspace routes */

static void test_gqa_workspace_routes(void **unused) {
  (void)unused;
  fake_node n;
  onyx_tensor geo[12];
  onyx_workspace_requirement req;

  /* Decode, unpacked, float32, serial: nothing at all. */
  gqa_node(&n, 32, 8, 7);
  gqa_geo(geo, ONYX_DTYPE_FLOAT32, 1, 1, 32, 8, 128, 8191, false);
  req = ws_for(&onyx_cpu_gqa_kernel, &n, geo, 7, 1);
  assert_int_equal(req.count, 0);

  /* Decode with 16 threads and 8 (batch, kv head) tasks: split-K, 2 splits. */
  req = ws_for(&onyx_cpu_gqa_kernel, &n, geo, 7, 16);
  assert_int_equal(req.count, 1);
  assert_string_equal(req.regions[0].name, "gqa_splitk_partials");
  assert_int_equal(req.regions[0].lifetime, ONYX_LIFETIME_STEP);
  assert_int_equal(req.regions[0].bytes, 1u * 32 * 1 * 2 * (128 + 2) * sizeof(float));

  /* Enough tasks (B = 2 → 16 tasks for 16 threads): no split, nothing. */
  gqa_geo(geo, ONYX_DTYPE_FLOAT32, 2, 1, 32, 8, 128, 8191, false);
  assert_int_equal(ws_for(&onyx_cpu_gqa_kernel, &n, geo, 7, 16).count, 0);

  /* Short rows never split. */
  gqa_geo(geo, ONYX_DTYPE_FLOAT32, 1, 1, 32, 8, 128, 100, false);
  assert_int_equal(ws_for(&onyx_cpu_gqa_kernel, &n, geo, 7, 16).count, 0);

  /* Prefill S = 512: no transposes (Q and Y are read and written in place). */
  gqa_geo(geo, ONYX_DTYPE_FLOAT32, 1, 512, 32, 8, 128, 0, false);
  assert_int_equal(ws_for(&onyx_cpu_gqa_kernel, &n, geo, 7, 16).count, 0);
  assert_int_equal(ws_for(&onyx_cpu_gqa_kernel, &n, geo, 7, 1).count, 0);

  /* Packed QKV (read with strides, no staging), float16 and bfloat16: nothing. */
  gqa_geo(geo, ONYX_DTYPE_FLOAT32, 1, 7, 32, 8, 64, 0, true);
  assert_int_equal(ws_for(&onyx_cpu_gqa_kernel, &n, geo, 7, 1).count, 0);
  gqa_geo(geo, ONYX_DTYPE_FLOAT16, 1, 1, 32, 8, 128, 511, false);
  assert_int_equal(ws_for(&onyx_cpu_gqa_kernel, &n, geo, 7, 1).count, 0);
  gqa_geo(geo, ONYX_DTYPE_BFLOAT16, 1, 1, 32, 8, 128, 8191, true);
  req = ws_for(&onyx_cpu_gqa_kernel, &n, geo, 7, 16);
  assert_int_equal(req_bytes(&req), 1u * 32 * 2 * (128 + 2) * sizeof(float));

  /* qk_output never splits (it needs the final max/denominator in one task). */
  fake_node_init(&n, "com.microsoft", "GroupQueryAttention", 1, 7, 4);
  fake_node_int(&n, "num_heads", 32);
  fake_node_int(&n, "kv_num_heads", 8);
  fake_node_int(&n, "qk_output", 2);
  gqa_geo(geo, ONYX_DTYPE_FLOAT32, 1, 1, 32, 8, 128, 8191, false);
  assert_int_equal(ws_for(&onyx_cpu_gqa_kernel, &n, geo, 7, 16).count, 0);

  /* Invalid geometry: no workspace (compute reports the error with a message). */
  gqa_node(&n, 32, 8, 7);
  gqa_geo(geo, ONYX_DTYPE_FLOAT32, 1, 1, 32, 8, 100, 10, false);
  geo[0].dims[2] = 33;
  assert_int_equal(ws_for(&onyx_cpu_gqa_kernel, &n, geo, 7, 16).count, 0);
}

static void test_attention_workspace_routes(void **unused) {
  (void)unused;
  fake_node n;
  fake_node_init(&n, "", "Attention", 23, 6, 3);
  onyx_tensor geo[6];
  memset(geo, 0, sizeof geo);
  int64_t q[4] = {1, 8, 1, 64}, k[4] = {1, 2, 1, 64}, p[4] = {1, 2, 2047, 64};
  geo[0] = fake_tensor(ONYX_DTYPE_FLOAT32, 4, q, NULL);
  geo[1] = fake_tensor(ONYX_DTYPE_FLOAT32, 4, k, NULL);
  geo[2] = fake_tensor(ONYX_DTYPE_FLOAT32, 4, k, NULL);
  geo[4] = fake_tensor(ONYX_DTYPE_FLOAT32, 4, p, NULL);
  geo[5] = fake_tensor(ONYX_DTYPE_FLOAT32, 4, p, NULL);
  assert_int_equal(ws_for(&onyx_cpu_attention_kernel, &n, geo, 6, 1).count, 0);
  onyx_workspace_requirement req = ws_for(&onyx_cpu_attention_kernel, &n, geo, 6, 8);
  assert_int_equal(req.count, 1);
  assert_string_equal(req.regions[0].name, "attention_splitk_partials");
  assert_int_equal(req.regions[0].bytes, 1u * 8 * 1 * 4 * (64 + 2) * sizeof(float));
  int64_t q2[4] = {1, 8, 256, 64}, k2[4] = {1, 2, 256, 64};
  geo[0] = fake_tensor(ONYX_DTYPE_FLOAT32, 4, q2, NULL);
  geo[1] = fake_tensor(ONYX_DTYPE_FLOAT32, 4, k2, NULL);
  geo[2] = fake_tensor(ONYX_DTYPE_FLOAT32, 4, k2, NULL);
  geo[4].dtype = geo[5].dtype = ONYX_DTYPE_UNDEFINED;
  assert_int_equal(ws_for(&onyx_cpu_attention_kernel, &n, geo, 6, 8).count, 0);
}

/* ------------------------------------------------------------------ a decode fixture */

/* Float32 GQA decode: B rows with totals[b] tokens in a past buffer of L rows. */
typedef struct decode_fx {
  int64_t B, nq, nkv, H, L, T;
  float *q, *k, *v, *pk, *pv;
  int32_t seqlens[4];
  int32_t total;
  onyx_tensor t[7];
  const onyx_tensor *in[7];
} decode_fx;

static void decode_fx_init(decode_fx *fx, int64_t B, int64_t nq, int64_t nkv, int64_t H, int64_t L,
                           int64_t T, const int32_t *totals, uint32_t seed) {
  memset(fx, 0, sizeof *fx);
  fx->B = B, fx->nq = nq, fx->nkv = nkv, fx->H = H, fx->L = L, fx->T = T;
  fx->q = fresh((size_t)(B * nq * H), seed + 1);
  fx->k = fresh((size_t)(B * nkv * H), seed + 2);
  fx->v = fresh((size_t)(B * nkv * H), seed + 3);
  fx->pk = fresh((size_t)(B * nkv * L * H), seed + 4);
  fx->pv = fresh((size_t)(B * nkv * L * H), seed + 5);
  for (int64_t b = 0; b < B; ++b) fx->seqlens[b] = totals[b] - 1;
  fx->total = (int32_t)T;
  int64_t qd[3] = {B, 1, nq * H}, kd[3] = {B, 1, nkv * H}, pd[4] = {B, nkv, L, H}, bd[1] = {B};
  fx->t[0] = fake_tensor(ONYX_DTYPE_FLOAT32, 3, qd, fx->q);
  fx->t[1] = fake_tensor(ONYX_DTYPE_FLOAT32, 3, kd, fx->k);
  fx->t[2] = fake_tensor(ONYX_DTYPE_FLOAT32, 3, kd, fx->v);
  fx->t[3] = fake_tensor(ONYX_DTYPE_FLOAT32, 4, pd, fx->pk);
  fx->t[4] = fake_tensor(ONYX_DTYPE_FLOAT32, 4, pd, fx->pv);
  fx->t[5] = fake_tensor(ONYX_DTYPE_INT32, 1, bd, fx->seqlens);
  fx->t[6] = fake_tensor(ONYX_DTYPE_INT32, 0, NULL, &fx->total);
  for (int i = 0; i < 7; ++i) fx->in[i] = &fx->t[i];
}

static void decode_fx_free(decode_fx *fx) {
  free(fx->q), free(fx->k), free(fx->v), free(fx->pk), free(fx->pv);
}

static void test_gqa_workspace_too_small(void **unused) {
  (void)unused;
  decode_fx fx;
  int32_t totals[1] = {1024};
  decode_fx_init(&fx, 1, 4, 1, 16, 1023, 1024, totals, 11);
  size_t past_bytes = (size_t)(fx.nkv * fx.L * fx.H) * sizeof(float);
  float *pk_copy = malloc(past_bytes);
  memcpy(pk_copy, fx.pk, past_bytes);
  fake_node n;
  gqa_node(&n, 4, 1, 7);

  /* 4 threads, one task: 4 splits of 256 keys. A view 4 bytes short is refused and
   * nothing is written: no output allocated, nothing aliased, past untouched. */
  run r;
  run_node(&r, &onyx_cpu_gqa_kernel, &n, fx.in, 7, 4, true, 0, 4);
  assert_int_equal(r.req.count, 1);
  assert_int_equal(r.req.regions[0].bytes, 4u * 4 * (16 + 2) * sizeof(float));
  assert_int_equal(r.status, ONYX_STATUS_WORKSPACE_TOO_SMALL);
  assert_int_equal(r.f.alloc_calls, 0);
  assert_int_equal(r.f.alias_calls, 0);
  assert_non_null(strstr(r.f.err, "gqa_splitk_partials"));
  assert_memory_equal(fx.pk, pk_copy, past_bytes);
  fake_ctx_free(&r.f);

  /* No views at all: the same refusal. */
  run_node(&r, &onyx_cpu_gqa_kernel, &n, fx.in, 7, 4, false, 0, UINT64_MAX);
  assert_int_equal(r.status, ONYX_STATUS_WORKSPACE_TOO_SMALL);
  assert_int_equal(r.f.alloc_calls, 0);
  fake_ctx_free(&r.f);

  /* Exact views: the split result matches the serial one. */
  run serial, split;
  run_node(&serial, &onyx_cpu_gqa_kernel, &n, fx.in, 7, 1, false, -1, 0);
  run_node(&split, &onyx_cpu_gqa_kernel, &n, fx.in, 7, 4, false, -1, 0);
  assert_int_equal(serial.status, ONYX_STATUS_OK);
  assert_int_equal(split.status, ONYX_STATUS_OK);
  assert_int_equal(serial.req.count, 0);
  expect_close(split.f.outputs[0].data, serial.f.outputs[0].data, (size_t)(fx.nq * fx.H), 1e-6f,
               1e-5f, "split-K output");
  assert_memory_equal(split.f.outputs[1].data, serial.f.outputs[1].data,
                      (size_t)(fx.nkv * fx.T * fx.H) * sizeof(float));
  fake_ctx_free(&serial.f);
  fake_ctx_free(&split.f);
  free(pk_copy);
  decode_fx_free(&fx);
}

/* ------------------------------------------------------------------ shared KV buffer */

static void test_gqa_shared_buffer_in_place(void **unused) {
  (void)unused;
  decode_fx fx;
  int32_t totals[2] = {10, 7};
  decode_fx_init(&fx, 2, 4, 2, 16, 16, 10, totals, 21); /* capacity 16 > total 10 */
  size_t past_n = (size_t)(fx.B * fx.nkv * fx.L * fx.H);
  float *pk0 = malloc(past_n * sizeof(float));
  memcpy(pk0, fx.pk, past_n * sizeof(float));
  fake_node n;
  gqa_node(&n, 4, 2, 7);

  /* Aliasing refused (the past came from the caller): present allocated and copied. */
  run copy;
  run_node(&copy, &onyx_cpu_gqa_kernel, &n, fx.in, 7, 1, false, -1, 0);
  assert_int_equal(copy.status, ONYX_STATUS_OK);
  assert_int_equal(copy.f.alias_of[1], -1);
  assert_int_equal(copy.f.outputs[1].dims[2], 16); /* P = max(T, L) */
  assert_memory_equal(fx.pk, pk0, past_n * sizeof(float));

  /* Aliasing allowed: present IS past, the new row written in place. */
  run shared;
  run_node(&shared, &onyx_cpu_gqa_kernel, &n, fx.in, 7, 1, true, -1, 0);
  assert_int_equal(shared.status, ONYX_STATUS_OK);
  assert_int_equal(shared.f.alias_of[1], 3);
  assert_int_equal(shared.f.alias_of[2], 4);
  assert_ptr_equal(shared.f.outputs[1].data, fx.pk);
  assert_int_equal(shared.f.alloc_calls, 1); /* only the output */
  for (int64_t b = 0; b < fx.B; ++b)
    for (int64_t g = 0; g < fx.nkv; ++g)
      for (int64_t r = 0; r < fx.L; ++r) {
        const float *row = fx.pk + ((b * fx.nkv + g) * fx.L + r) * fx.H;
        const float *old = pk0 + ((b * fx.nkv + g) * fx.L + r) * fx.H;
        const float *copied =
            (const float *)copy.f.outputs[1].data + ((b * fx.nkv + g) * 16 + r) * fx.H;
        if (r == totals[b] - 1) {
          assert_memory_equal(row, fx.k + (b * fx.nkv + g) * fx.H, (size_t)fx.H * sizeof(float));
        } else {
          assert_memory_equal(row, old, (size_t)fx.H * sizeof(float)); /* untouched */
        }
        if (r < totals[b]) {
          assert_memory_equal(row, copied, (size_t)fx.H * sizeof(float));
        } else {
          for (int64_t d = 0; d < fx.H; ++d) assert_true(copied[d] == 0.0f); /* zero tail */
        }
      }
  assert_memory_equal(shared.f.outputs[0].data, copy.f.outputs[0].data,
                      (size_t)(fx.B * fx.nq * fx.H) * sizeof(float));
  fake_ctx_free(&copy.f);
  fake_ctx_free(&shared.f);
  free(pk0);
  decode_fx_free(&fx);
}

/* ------------------------------------------------------------------ BNSH == BSNH */

/* (B, N, L, H) → (B, L, N, H) bytes. */
static void to_bsnh(const float *src, float *dst, int64_t B, int64_t N, int64_t L, int64_t H) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t l = 0; l < L; ++l)
        memcpy(dst + ((b * L + l) * N + n) * H, src + ((b * N + n) * L + l) * H,
               (size_t)H * sizeof(float));
}

static void check_layouts(int64_t B, int64_t S, int64_t L, int64_t T, const int32_t *totals,
                          bool rotary, bool allow_alias) {
  int64_t nq = 6, nkv = 2, H = 32;
  float *q = fresh((size_t)(B * S * nq * H), 31), *k = fresh((size_t)(B * S * nkv * H), 32);
  float *v = fresh((size_t)(B * S * nkv * H), 33);
  size_t pn = (size_t)(B * nkv * L * H);
  float *pk = fresh(pn, 34), *pv = fresh(pn, 35);
  float *pk_s = malloc(pn * sizeof(float)), *pv_s = malloc(pn * sizeof(float));
  to_bsnh(pk, pk_s, B, nkv, L, H);
  to_bsnh(pv, pv_s, B, nkv, L, H);
  float *cos = fresh(64 * 16, 36), *sin = fresh(64 * 16, 37);
  int32_t seqlens[4], total = (int32_t)T;
  for (int64_t b = 0; b < B; ++b) seqlens[b] = totals[b] - 1;
  int64_t qd[3] = {B, S, nq * H}, kd[3] = {B, S, nkv * H}, pd[4] = {B, nkv, L, H}, bd[1] = {B};
  int64_t cd[2] = {64, 16};
  onyx_tensor t[9] = {
      fake_tensor(ONYX_DTYPE_FLOAT32, 3, qd, q),      fake_tensor(ONYX_DTYPE_FLOAT32, 3, kd, k),
      fake_tensor(ONYX_DTYPE_FLOAT32, 3, kd, v),      fake_tensor(ONYX_DTYPE_FLOAT32, 4, pd, pk),
      fake_tensor(ONYX_DTYPE_FLOAT32, 4, pd, pv),     fake_tensor(ONYX_DTYPE_INT32, 1, bd, seqlens),
      fake_tensor(ONYX_DTYPE_INT32, 0, NULL, &total), fake_tensor(ONYX_DTYPE_FLOAT32, 2, cd, cos),
      fake_tensor(ONYX_DTYPE_FLOAT32, 2, cd, sin)};
  const onyx_tensor *in[9];
  for (int i = 0; i < 9; ++i) in[i] = &t[i];
  size_t n_in = rotary ? 9 : 7;
  run r[2];
  for (int layout = 0; layout < 2; ++layout) {
    fake_node n;
    gqa_node(&n, nq, nkv, n_in);
    fake_node_int(&n, "kv_layout", layout);
    if (rotary) fake_node_int(&n, "do_rotary", 1);
    t[3].data = layout ? pk_s : pk;
    t[4].data = layout ? pv_s : pv;
    run_node(&r[layout], &onyx_cpu_gqa_kernel, &n, in, n_in, 1, allow_alias, -1, 0);
    if (r[layout].status != ONYX_STATUS_OK) fail_msg("layout %d: %s", layout, r[layout].f.err);
  }
  /* Identical arithmetic in the same order: bitwise equal outputs. */
  assert_memory_equal(r[0].f.outputs[0].data, r[1].f.outputs[0].data,
                      (size_t)(B * S * nq * H) * sizeof(float));
  int64_t P = r[0].f.outputs[1].dims[2];
  assert_int_equal(P, r[1].f.outputs[1].dims[2]);
  float *conv = malloc((size_t)(B * nkv * P * H) * sizeof(float));
  for (int i = 1; i < 3; ++i) {
    to_bsnh(r[0].f.outputs[i].data, conv, B, nkv, P, H);
    assert_memory_equal(conv, r[1].f.outputs[i].data, (size_t)(B * nkv * P * H) * sizeof(float));
  }
  free(conv);
  fake_ctx_free(&r[0].f);
  fake_ctx_free(&r[1].f);
  free(q), free(k), free(v), free(pk), free(pv), free(pk_s), free(pv_s), free(cos), free(sin);
}

static void test_gqa_bsnh_equals_bnsh(void **unused) {
  (void)unused;
  int32_t chunk[1] = {11};
  check_layouts(1, 3, 8, 11, chunk, true, false); /* chunked prefill, growing cache */
  int32_t dec[3] = {9, 12, 5};
  check_layouts(3, 1, 12, 12, dec, true, false); /* decode, spare capacity, copied */
  check_layouts(3, 1, 12, 12, dec, false, true); /* decode, in place */
  int32_t prompt[2] = {5, 3};
  check_layouts(2, 5, 0, 5, prompt, true, false); /* right-padded first prompt */
}

/* ------------------------------------------------------------------ goldens (ONNX Runtime) */

static onyx_tensor golden_tensor(uint32_t dt, const int64_t *dims, size_t rank, const void *data) {
  return fake_tensor(dt, (uint32_t)rank, dims, (void *)(uintptr_t)data);
}
#define GT(dt, name)                                                                               \
  golden_tensor(dt, name##_dims, sizeof name##_dims / sizeof name##_dims[0], name)
#define NUMEL(a) (sizeof(a) / sizeof((a)[0]))

static void test_golden_gqa_decode(void **unused) {
  (void)unused;
  float pk[NUMEL(g_gqa_decode_past_key)], pv[NUMEL(g_gqa_decode_past_value)];
  memcpy(pk, g_gqa_decode_past_key, sizeof pk);
  memcpy(pv, g_gqa_decode_past_value, sizeof pv);
  onyx_tensor t[9] = {
      GT(ONYX_DTYPE_FLOAT32, g_gqa_decode_query),
      GT(ONYX_DTYPE_FLOAT32, g_gqa_decode_key),
      GT(ONYX_DTYPE_FLOAT32, g_gqa_decode_value),
      fake_tensor(ONYX_DTYPE_FLOAT32, 4, g_gqa_decode_past_key_dims, pk),
      fake_tensor(ONYX_DTYPE_FLOAT32, 4, g_gqa_decode_past_value_dims, pv),
      GT(ONYX_DTYPE_INT32, g_gqa_decode_seqlens_k),
      fake_tensor(ONYX_DTYPE_INT32, 0, NULL, (void *)(uintptr_t)g_gqa_decode_total_sequence_length),
      GT(ONYX_DTYPE_FLOAT32, g_gqa_decode_cos_cache),
      GT(ONYX_DTYPE_FLOAT32, g_gqa_decode_sin_cache)};
  const onyx_tensor *in[9];
  for (int i = 0; i < 9; ++i) in[i] = &t[i];
  fake_node n;
  gqa_node(&n, 4, 2, 9);
  fake_node_int(&n, "do_rotary", 1);
  fake_node_int(&n, "local_window_size", 4);
  fake_node_float(&n, "softcap", 1.0f);
  for (uint32_t threads = 1; threads <= 3; threads += 2) {
    run r;
    run_node(&r, &onyx_cpu_gqa_kernel, &n, in, 9, threads, false, -1, 0);
    if (r.status != ONYX_STATUS_OK) fail_msg("%s", r.f.err);
    expect_close(r.f.outputs[0].data, g_gqa_decode_want_output, NUMEL(g_gqa_decode_want_output),
                 1e-5f, 1e-4f, "output");
    expect_close(r.f.outputs[1].data, g_gqa_decode_want_present_key,
                 NUMEL(g_gqa_decode_want_present_key), 1e-5f, 1e-4f, "present_key");
    expect_close(r.f.outputs[2].data, g_gqa_decode_want_present_value,
                 NUMEL(g_gqa_decode_want_present_value), 1e-6f, 0.0f, "present_value");
    fake_ctx_free(&r.f);
  }
}

static void test_golden_gqa_prompt_f16(void **unused) {
  (void)unused;
  onyx_tensor t[7] = {GT(ONYX_DTYPE_FLOAT16, g_gqa_prompt_f16_query),
                      GT(ONYX_DTYPE_FLOAT16, g_gqa_prompt_f16_key),
                      GT(ONYX_DTYPE_FLOAT16, g_gqa_prompt_f16_value),
                      GT(ONYX_DTYPE_FLOAT16, g_gqa_prompt_f16_past_key),
                      GT(ONYX_DTYPE_FLOAT16, g_gqa_prompt_f16_past_value),
                      GT(ONYX_DTYPE_INT32, g_gqa_prompt_f16_seqlens_k),
                      fake_tensor(ONYX_DTYPE_INT32, 0, NULL,
                                  (void *)(uintptr_t)g_gqa_prompt_f16_total_sequence_length)};
  const onyx_tensor *in[7];
  for (int i = 0; i < 7; ++i) in[i] = &t[i];
  fake_node n;
  gqa_node(&n, 2, 1, 7);
  run r;
  run_node(&r, &onyx_cpu_gqa_kernel, &n, in, 7, 1, false, -1, 0);
  if (r.status != ONYX_STATUS_OK) fail_msg("%s", r.f.err);
  assert_int_equal(r.req.count, 0);
  expect_close_f16(r.f.outputs[0].data, g_gqa_prompt_f16_want_output,
                   NUMEL(g_gqa_prompt_f16_want_output), 2e-3f, 1e-2f, "output");
  assert_memory_equal(r.f.outputs[1].data, g_gqa_prompt_f16_want_present_key,
                      sizeof g_gqa_prompt_f16_want_present_key);
  fake_ctx_free(&r.f);
}

static void test_golden_attention(void **unused) {
  (void)unused;
  onyx_tensor t[6] = {GT(ONYX_DTYPE_FLOAT32, g_att_causal_mask_Q),
                      GT(ONYX_DTYPE_FLOAT32, g_att_causal_mask_K),
                      GT(ONYX_DTYPE_FLOAT32, g_att_causal_mask_V),
                      GT(ONYX_DTYPE_BOOL, g_att_causal_mask_attn_mask),
                      GT(ONYX_DTYPE_FLOAT32, g_att_causal_mask_past_key),
                      GT(ONYX_DTYPE_FLOAT32, g_att_causal_mask_past_value)};
  const onyx_tensor *in[6];
  for (int i = 0; i < 6; ++i) in[i] = &t[i];
  fake_node n;
  fake_node_init(&n, "", "Attention", 23, 6, 3);
  fake_node_int(&n, "is_causal", 1);
  run r;
  run_node(&r, &onyx_cpu_attention_kernel, &n, in, 6, 1, false, -1, 0);
  if (r.status != ONYX_STATUS_OK) fail_msg("%s", r.f.err);
  expect_close(r.f.outputs[0].data, g_att_causal_mask_want_Y, NUMEL(g_att_causal_mask_want_Y),
               1e-5f, 1e-4f, "Y");
  expect_close(r.f.outputs[1].data, g_att_causal_mask_want_present_key,
               NUMEL(g_att_causal_mask_want_present_key), 0.0f, 0.0f, "present_key");
  fake_ctx_free(&r.f);
}

static void test_golden_ms_rotary(void **unused) {
  (void)unused;
  onyx_tensor t[4] = {
      GT(ONYX_DTYPE_FLOAT32, g_msrope_input), GT(ONYX_DTYPE_INT64, g_msrope_position_ids),
      GT(ONYX_DTYPE_FLOAT32, g_msrope_cos_cache), GT(ONYX_DTYPE_FLOAT32, g_msrope_sin_cache)};
  const onyx_tensor *in[4] = {&t[0], &t[1], &t[2], &t[3]};
  fake_node n;
  fake_node_init(&n, "com.microsoft", "RotaryEmbedding", 1, 4, 1);
  fake_node_int(&n, "interleaved", 1);
  fake_node_int(&n, "num_heads", 2);
  run r;
  run_node(&r, &onyx_cpu_ms_rotary_kernel, &n, in, 4, 1, false, -1, 0);
  if (r.status != ONYX_STATUS_OK) fail_msg("%s", r.f.err);
  expect_close(r.f.outputs[0].data, g_msrope_want_output, NUMEL(g_msrope_want_output), 1e-6f, 1e-5f,
               "output");
  fake_ctx_free(&r.f);
}

/* ------------------------------------------------------------------ refusals */

static void expect_create_fails(fake_node *n, const onyx_kernel_table *kt, onyx_status want,
                                const char *needle) {
  char err[256] = "";
  void *state = NULL;
  onyx_status st = kt->create(NULL, &n->info, &state, err, sizeof err);
  assert_int_equal(st, want);
  assert_null(state);
  if (strstr(err, needle) == NULL) fail_msg("message '%s' lacks '%s'", err, needle);
}

static void test_refusals(void **unused) {
  (void)unused;
  fake_node n;
  gqa_node(&n, 4, 2, 13);
  for (int i = 7; i < 12; ++i) n.input_present[i] = false;
  expect_create_fails(&n, &onyx_cpu_gqa_kernel, ONYX_STATUS_UNSUPPORTED, "k_scale");
  gqa_node(&n, 4, 2, 7);
  fake_node_int(&n, "sliding_window_cache", 1);
  expect_create_fails(&n, &onyx_cpu_gqa_kernel, ONYX_STATUS_UNSUPPORTED, "sliding_window_cache");
  gqa_node(&n, 4, 2, 7);
  fake_node_string(&n, "k_quant_type", "PER_TENSOR");
  expect_create_fails(&n, &onyx_cpu_gqa_kernel, ONYX_STATUS_UNSUPPORTED, "quantized");
  gqa_node(&n, 6, 4, 7);
  expect_create_fails(&n, &onyx_cpu_gqa_kernel, ONYX_STATUS_INVALID_MODEL, "multiple");
  gqa_node(&n, 4, 2, 7);
  fake_node_int(&n, "kv_layout", 2);
  expect_create_fails(&n, &onyx_cpu_gqa_kernel, ONYX_STATUS_INVALID_MODEL, "kv_layout");
  fake_node_init(&n, "com.microsoft", "RotaryEmbedding", 1, 4, 1);
  fake_node_int(&n, "is_packed_batching", 1);
  expect_create_fails(&n, &onyx_cpu_ms_rotary_kernel, ONYX_STATUS_UNSUPPORTED,
                      "is_packed_batching");
  fake_node_init(&n, "", "Attention", 23, 3, 1);
  fake_node_int(&n, "qk_matmul_output_mode", 4);
  expect_create_fails(&n, &onyx_cpu_attention_kernel, ONYX_STATUS_INVALID_MODEL,
                      "qk_matmul_output_mode");

  /* Compute-time errors leave every output unallocated and the past untouched. */
  decode_fx fx;
  int32_t totals[2] = {6, 9};
  decode_fx_init(&fx, 2, 4, 2, 16, 8, 9, totals, 41);
  gqa_node(&n, 4, 2, 7);
  struct {
    int32_t seq0, total;
    const char *needle;
  } bad[] = {{9, 9, "seqlens_k[0]"}, {5, 10, "total_sequence_length"}, {-2, 9, "seqlens_k[0]"}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    fx.seqlens[0] = bad[i].seq0;
    fx.total = bad[i].total;
    run r;
    run_node(&r, &onyx_cpu_gqa_kernel, &n, fx.in, 7, 1, true, -1, 0);
    assert_int_equal(r.status, ONYX_STATUS_INVALID_ARGUMENT);
    assert_int_equal(r.f.alloc_calls + r.f.alias_calls, 0);
    if (strstr(r.f.err, bad[i].needle) == NULL) fail_msg("'%s' lacks '%s'", r.f.err, bad[i].needle);
    fake_ctx_free(&r.f);
  }
  decode_fx_free(&fx);
}

/* ------------------------------------------------------------------ float16 == float32 */

/* bfloat16 and float16 inputs agree with float32 on the same (rounded) values. */
static void test_gqa_half_types_match_f32(void **unused) {
  (void)unused;
  int64_t B = 1, S = 5, nq = 4, nkv = 2, H = 24;
  size_t nqe = (size_t)(B * S * nq * H), nke = (size_t)(B * S * nkv * H);
  float *q = fresh(nqe, 51), *k = fresh(nke, 52), *v = fresh(nke, 53);
  for (int type = 0; type < 2; ++type) {
    uint32_t dt = type ? ONYX_DTYPE_BFLOAT16 : ONYX_DTYPE_FLOAT16;
    uint16_t *qh = malloc(nqe * 2), *kh = malloc(nke * 2), *vh = malloc(nke * 2);
    float *qr = malloc(nqe * 4), *kr = malloc(nke * 4), *vr = malloc(nke * 4);
    struct {
      const float *src;
      uint16_t *h;
      float *r;
      size_t n;
    } conv[3] = {{q, qh, qr, nqe}, {k, kh, kr, nke}, {v, vh, vr, nke}};
    for (int c = 0; c < 3; ++c)
      for (size_t i = 0; i < conv[c].n; ++i) {
        conv[c].h[i] =
            type ? onyx__attn_f32_to_bf16(conv[c].src[i]) : onyx__attn_f32_to_f16(conv[c].src[i]);
        conv[c].r[i] =
            type ? onyx__attn_bf16_to_f32(conv[c].h[i]) : onyx__attn_f16_to_f32(conv[c].h[i]);
      }
    int32_t seqlens[1] = {(int32_t)S - 1}, total = (int32_t)S;
    int64_t qd[3] = {B, S, nq * H}, kd[3] = {B, S, nkv * H}, bd[1] = {B};
    onyx_tensor th[7] = {fake_tensor(dt, 3, qd, qh),
                         fake_tensor(dt, 3, kd, kh),
                         fake_tensor(dt, 3, kd, vh),
                         {0},
                         {0},
                         fake_tensor(ONYX_DTYPE_INT32, 1, bd, seqlens),
                         fake_tensor(ONYX_DTYPE_INT32, 0, NULL, &total)};
    onyx_tensor tf[7] = {fake_tensor(ONYX_DTYPE_FLOAT32, 3, qd, qr),
                         fake_tensor(ONYX_DTYPE_FLOAT32, 3, kd, kr),
                         fake_tensor(ONYX_DTYPE_FLOAT32, 3, kd, vr),
                         {0},
                         {0},
                         th[5],
                         th[6]};
    const onyx_tensor *inh[7] = {&th[0], &th[1], &th[2], NULL, NULL, &th[5], &th[6]};
    const onyx_tensor *inf[7] = {&tf[0], &tf[1], &tf[2], NULL, NULL, &tf[5], &tf[6]};
    fake_node n;
    gqa_node(&n, nq, nkv, 7);
    run rh, rf;
    run_node(&rh, &onyx_cpu_gqa_kernel, &n, inh, 7, 1, false, -1, 0);
    run_node(&rf, &onyx_cpu_gqa_kernel, &n, inf, 7, 1, false, -1, 0);
    assert_int_equal(rh.status, ONYX_STATUS_OK);
    assert_int_equal(rf.status, ONYX_STATUS_OK);
    const uint16_t *yh = rh.f.outputs[0].data;
    const float *yf = rf.f.outputs[0].data;
    for (size_t i = 0; i < nqe; ++i) {
      float g = type ? onyx__attn_bf16_to_f32(yh[i]) : onyx__attn_f16_to_f32(yh[i]);
      float tol = type ? 1e-2f : 1e-3f;
      if (fabsf(g - yf[i]) > tol * (1.0f + fabsf(yf[i])))
        fail_msg("%s output[%zu] %g vs float32 %g", type ? "bfloat16" : "float16", i, (double)g,
                 (double)yf[i]);
    }
    fake_ctx_free(&rh.f);
    fake_ctx_free(&rf.f);
    free(qh), free(kh), free(vh), free(qr), free(kr), free(vr);
  }
  free(q), free(k), free(v);
}

static void test_half_conversions(void **unused) {
  (void)unused;
  assert_int_equal(onyx__attn_f32_to_f16(1.0f), 0x3c00);
  assert_int_equal(onyx__attn_f32_to_f16(-2.0f), 0xc000);
  assert_int_equal(onyx__attn_f32_to_f16(65504.0f), 0x7bff);
  assert_int_equal(onyx__attn_f32_to_f16(65520.0f), 0x7c00);
  assert_int_equal(onyx__attn_f32_to_f16(5.9604645e-8f), 0x0001);
  assert_int_equal(onyx__attn_f32_to_f16(-INFINITY), 0xfc00);
  assert_true((onyx__attn_f32_to_f16(NAN) & 0x7fff) > 0x7c00);
  for (uint32_t h = 0; h < 0x7c00; ++h) /* every finite half round-trips */
    assert_int_equal(onyx__attn_f32_to_f16(onyx__attn_f16_to_f32((uint16_t)h)), h);
  assert_int_equal(onyx__attn_f32_to_bf16(1.0f), 0x3f80);
  assert_int_equal(onyx__attn_f32_to_bf16(1.00390625f), 0x3f80); /* tie to even */
  assert_true(onyx__attn_bf16_to_f32(0x4049) == 3.140625f);
}

/* ------------------------------------------------------------------ infer */

static void test_infer(void **unused) {
  (void)unused;
  fake_node n;
  gqa_node(&n, 8, 2, 7);
  void *state = NULL;
  char err[128];
  assert_int_equal(onyx_cpu_gqa_kernel.create(NULL, &n.info, &state, err, sizeof err),
                   ONYX_STATUS_OK);
  onyx_tensor geo[12], out[4];
  gqa_geo(geo, ONYX_DTYPE_FLOAT16, 2, 1, 8, 2, 64, 40, false);
  memset(out, 0, sizeof out);
  /* total_sequence_length unknown: present's length is unknown too. */
  assert_int_equal(onyx_cpu_gqa_kernel.infer(state, geo, 7, out, 3), ONYX_STATUS_UNSUPPORTED);
  int32_t total = 30; /* a shared buffer of 40 rows: present keeps 40 */
  geo[6].data = &total;
  assert_int_equal(onyx_cpu_gqa_kernel.infer(state, geo, 7, out, 3), ONYX_STATUS_OK);
  assert_int_equal(out[0].dtype, ONYX_DTYPE_FLOAT16);
  assert_int_equal(out[0].rank, 3);
  assert_int_equal(out[0].dims[2], 8 * 64);
  assert_int_equal(out[1].dims[2], 40);
  assert_null(out[1].data);
  total = 41; /* a growing cache: 40 + 1 */
  assert_int_equal(onyx_cpu_gqa_kernel.infer(state, geo, 7, out, 3), ONYX_STATUS_OK);
  assert_int_equal(out[2].dims[2], 41);
  onyx_cpu_gqa_kernel.destroy(state);

  fake_node_init(&n, "", "Attention", 23, 6, 4);
  fake_node_int(&n, "q_num_heads", 6);
  fake_node_int(&n, "kv_num_heads", 2);
  assert_int_equal(onyx_cpu_attention_kernel.create(NULL, &n.info, &state, err, sizeof err),
                   ONYX_STATUS_OK);
  memset(geo, 0, sizeof geo);
  int64_t q[3] = {2, 3, 6 * 16}, k[3] = {2, 5, 2 * 16}, v[3] = {2, 5, 2 * 24};
  int64_t pk[4] = {2, 2, 7, 16}, pv[4] = {2, 2, 7, 24};
  geo[0] = fake_tensor(ONYX_DTYPE_FLOAT32, 3, q, NULL);
  geo[1] = fake_tensor(ONYX_DTYPE_FLOAT32, 3, k, NULL);
  geo[2] = fake_tensor(ONYX_DTYPE_FLOAT32, 3, v, NULL);
  geo[4] = fake_tensor(ONYX_DTYPE_FLOAT32, 4, pk, NULL);
  geo[5] = fake_tensor(ONYX_DTYPE_FLOAT32, 4, pv, NULL);
  assert_int_equal(onyx_cpu_attention_kernel.infer(state, geo, 6, out, 4), ONYX_STATUS_OK);
  assert_int_equal(out[0].rank, 3);
  assert_int_equal(out[0].dims[2], 6 * 24);
  assert_int_equal(out[1].dims[2], 12);
  assert_int_equal(out[2].dims[3], 24);
  assert_int_equal(out[3].dims[1], 6);
  assert_int_equal(out[3].dims[3], 12);
  onyx_cpu_attention_kernel.destroy(state);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_half_conversions),
      cmocka_unit_test(test_gqa_workspace_routes),
      cmocka_unit_test(test_attention_workspace_routes),
      cmocka_unit_test(test_gqa_workspace_too_small),
      cmocka_unit_test(test_gqa_shared_buffer_in_place),
      cmocka_unit_test(test_gqa_bsnh_equals_bnsh),
      cmocka_unit_test(test_gqa_half_types_match_f32),
      cmocka_unit_test(test_golden_gqa_decode),
      cmocka_unit_test(test_golden_gqa_prompt_f16),
      cmocka_unit_test(test_golden_attention),
      cmocka_unit_test(test_golden_ms_rotary),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_infer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
