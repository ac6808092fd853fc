/*
 * com.microsoft MatMulNBits: Y = A · dequant(B)ᵀ (+ bias), B block-quantized along K
 * (providers/common/nbits_params.h has the definition and the checks).
 *
 * Routes (docs/quantized-weights.md):
 * - int8 (accuracy_level 4, zero points not floats, as ONNX Runtime decides): rows of A
 *   are quantized to int8 per block into workspace, and the tile kernels take integer
 *   dot products against the packed codes (AVX-512 VNNI where the CPU has it).
 * - fp32 (every other case): the tile kernels widen (code − zero point) to float in
 *   registers and multiply-add against A in float32 (16-bit A widened into workspace).
 * - reference (ONYX_CPU_NBITS_ISA=reference): the definition, element by element, on the
 *   op's own inputs (cpu_matmul_nbits_ref.c).
 * Decode (one row) and prefill (many) run the same tile kernels, which take up to the
 * ISA's row count per call; the work is split over tiles of 16 columns, then over
 * groups of rows, on the provider's threads.
 *
 * Weights that are constants of the session are packed at create into the tile layout
 * (cpu_nbits.h), in memory booked as weights, and the originals are given back to the
 * core. Weights that are computed are packed per run into declared workspace. No
 * dequantized copy of a weight is ever made.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_nbits.h"

/* Workspace regions, always in this order; unused ones are 0 bytes. */
enum { NB_WS_WEIGHTS, NB_WS_A_INT8, NB_WS_A_F32, NB_WS_PACK_A, NB_WS_TILES, NB_WS_COUNT };
static const char *const nb_ws_names[NB_WS_COUNT] = {"nbits_weights", "nbits_a_int8", "nbits_a_f32",
                                                     "nbits_pack_a", "nbits_tiles"};

typedef struct nb_state {
  onyx__cpu_node base;
  onyx__pc_nb_attrs attrs;
  const onyx__nb_isa *isa;
  bool reference; /* the reference route (ONYX_CPU_NBITS_ISA=reference) */
  /* B, scales and zero points are constants of the session (whether packed or not). */
  bool constant_weights;
  /* Weights packed at create; wgeom says what they were, to check compute's inputs. */
  bool prepacked;
  onyx__pc_nb_weights_geom wgeom;
  onyx__nb_packed packed;
  void *mem; /* host->mem_alloc (weights); freed with the kernel */
} nb_state;

/* ------------------------------------------------------------------ create */

/* The constant of input i, when the core offers constants and input i is one. */
static const onyx_tensor *nb_constant(const onyx_node_info *node, size_t i) {
  if (!ONYX_HAS_FIELD(node, onyx_node_info, input_constants) || node->input_constants == NULL ||
      i >= node->input_count)
    return NULL;
  const onyx_tensor *t = node->input_constants[i];
  return t != NULL && t->device == ONYX_DEVICE_HOST &&
                 (t->data != NULL || onyx_tensor_numel(t) == 0)
             ? t
             : NULL;
}

static bool nb_present(const onyx_node_info *node, size_t i) {
  return i < node->input_count && (node->input_present == NULL || node->input_present[i]);
}

/* Packs B, scales and zero points when all three (zero points: when present) are
 * constants, and gives the originals back to the core. A refusal of memory only means
 * packing per run. A constant that fails the checks fails create: the model is wrong. */
static onyx_status nb_prepack(nb_state *s, const onyx_node_info *node, char *err, size_t cap) {
  const onyx_tensor *b = nb_constant(node, ONYX__PC_NB_B);
  const onyx_tensor *sc = nb_constant(node, ONYX__PC_NB_SCALES);
  const onyx_tensor *zp = nb_constant(node, ONYX__PC_NB_ZP);
  const onyx_host_table *host = s->base.provider ? s->base.provider->host : NULL;
  if (b == NULL || sc == NULL || (nb_present(node, ONYX__PC_NB_ZP) && zp == NULL))
    return ONYX_STATUS_OK;
  s->constant_weights = true;
  if (s->reference) return ONYX_STATUS_OK;
  uint32_t t1 =
      node->input_dtypes && node->input_count > 0 ? node->input_dtypes[0] : ONYX_DTYPE_UNDEFINED;
  onyx_status st = onyx__pc_nb_weights_check(&s->attrs, b, sc, zp, t1, &s->wgeom, err, cap);
  if (st != ONYX_STATUS_OK || host == NULL || host->mem_alloc == NULL || host->mem_free == NULL)
    return st;
  char label[128];
  snprintf(label, sizeof label, "MatMulNBits '%s' packed weights", node->name ? node->name : "");
  uint64_t bytes = onyx__nb_packed_bytes(&s->attrs, s->wgeom.zp, s->wgeom.scale_dtype);
  if (host->mem_alloc(host->host_data, ONYX_REQUESTER_WEIGHTS, bytes, 64, label, &s->mem) !=
      ONYX_STATUS_OK) {
    s->mem = NULL;
    return ONYX_STATUS_OK;
  }
  onyx__nb_pack(s->base.provider, &s->attrs, b, sc, zp, s->mem, &s->packed);
  s->prepacked = true;
  if (ONYX_HAS_FIELD(node, onyx_node_info, input_constant_copied) &&
      node->input_constant_copied != NULL) {
    node->input_constant_copied[ONYX__PC_NB_B] = true;
    node->input_constant_copied[ONYX__PC_NB_SCALES] = true;
    if (zp != NULL) node->input_constant_copied[ONYX__PC_NB_ZP] = true;
  }
  return ONYX_STATUS_OK;
}

static void nb_destroy(void *state) {
  nb_state *s = state;
  if (s == NULL) return;
  if (s->mem != NULL) s->base.provider->host->mem_free(s->base.provider->host->host_data, s->mem);
  free(s);
}

static onyx_status nb_create(void *provider_state, const onyx_node_info *node, void **out_state,
                             char *err, size_t err_cap) {
  nb_state *s = onyx__cpu_state_new(sizeof *s, provider_state, node, err, err_cap);
  if (s == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  const char *cap = getenv("ONYX_CPU_NBITS_ISA");
  s->reference = cap != NULL && strcmp(cap, "reference") == 0;
  s->isa = onyx__nb_isa_get();
  onyx_status st = onyx__pc_nb_attrs_read(node, &s->attrs, err, err_cap);
  if (st == ONYX_STATUS_OK) st = onyx__pc_nb_g_idx_check(node, &s->attrs, err, err_cap);
  if (st == ONYX_STATUS_OK) st = nb_prepack(s, node, err, err_cap);
  if (st != ONYX_STATUS_OK) {
    nb_destroy(s);
    return st;
  }
  *out_state = s;
  return ONYX_STATUS_OK;
}

/* ------------------------------------------------------------------ plan */

/* What one run needs, from the geometry alone (workspace and compute agree). */
typedef struct nb_plan {
  onyx__pc_nb_geom g;
  bool int8;     /* the int8 route (also for the reference) */
  bool gemm;     /* the fp32 route through the GEMM micro-kernel (many rows) */
  bool a_direct; /* fp32 tile kernels read A in place (float32, K whole blocks) */
  uint64_t ws[NB_WS_COUNT];
} nb_plan;

/* Tasks the provider splits work into (the GEMM route sizes a tile buffer per task). */
static uint32_t nb_tasks(const nb_state *s) {
  return s->base.provider && s->base.provider->num_threads > 0 ? s->base.provider->num_threads : 1;
}

static onyx_status nb_plan_make(const nb_state *s, const onyx_tensor *const *in, size_t count,
                                nb_plan *p, char *err, size_t cap) {
  memset(p, 0, sizeof *p);
  const onyx__pc_nb_attrs *a = &s->attrs;
  onyx_status st = onyx__pc_nb_geometry(a, in, count, &p->g, err, cap);
  if (st != ONYX_STATUS_OK) return st;
  if (s->prepacked && (p->g.w.zp != s->wgeom.zp || p->g.w.scale_dtype != s->wgeom.scale_dtype))
    return onyx__cpu_fail(err, cap, ONYX_STATUS_INVALID_ARGUMENT,
                          "the weights packed at creation had %s scales and zero points of "
                          "kind %d; this run gives %s and kind %d",
                          onyx__cpu_dtype_name(s->wgeom.scale_dtype), (int)s->wgeom.zp,
                          onyx__cpu_dtype_name(p->g.w.scale_dtype), (int)p->g.w.zp);
  p->int8 = onyx__nb_uses_int8(a, s->constant_weights, p->g.w.zp);
  p->a_direct = p->g.t1 == ONYX_DTYPE_FLOAT32 && a->k % a->block_size == 0;
  const int64_t m = p->g.m, kpad = a->k_blocks * a->block_size;
  if (m == 0) return ONYX_STATUS_OK;
  if (!s->prepacked && !s->reference)
    p->ws[NB_WS_WEIGHTS] = onyx__nb_packed_bytes(a, p->g.w.zp, p->g.w.scale_dtype);
  if (p->int8) p->ws[NB_WS_A_INT8] = onyx__nb_qa_bytes(a, m);
  p->gemm = !p->int8 && !s->reference && onyx__nb_gemm_route(m);
  if (p->gemm)
    onyx__nb_gemm_scratch(a, m, nb_tasks(s), &p->ws[NB_WS_PACK_A], &p->ws[NB_WS_TILES]);
  else if (!p->int8 && !s->reference && !p->a_direct)
    p->ws[NB_WS_A_F32] = (uint64_t)(m * kpad) * sizeof(float);
  return ONYX_STATUS_OK;
}

static onyx_status nb_infer(void *state, const onyx_tensor *inputs, size_t input_count,
                            onyx_tensor *outputs, size_t output_count) {
  const onyx_tensor *in[ONYX__PC_NB_INPUTS];
  nb_plan p;
  if (!onyx__cpu_infer_inputs(inputs, input_count, in, ONYX__PC_NB_INPUTS) ||
      nb_plan_make(state, in, input_count, &p, NULL, 0) != ONYX_STATUS_OK)
    return ONYX_STATUS_INVALID_ARGUMENT;
  onyx__cpu_infer_out(outputs, output_count, 0, p.g.t1, p.g.out_rank, p.g.out_dims);
  return ONYX_STATUS_OK;
}

static onyx_status nb_workspace(void *state, const onyx_tensor *inputs, size_t input_count,
                                onyx_workspace_requirement *req) {
  const onyx_tensor *in[ONYX__PC_NB_INPUTS];
  nb_plan p;
  req->count = 0;
  if (!onyx__cpu_infer_inputs(inputs, input_count, in, ONYX__PC_NB_INPUTS) ||
      nb_plan_make(state, in, input_count, &p, NULL, 0) != ONYX_STATUS_OK)
    return ONYX_STATUS_OK; /* compute() reports the error */
  bool any = false;
  for (int i = 0; i < NB_WS_COUNT; ++i) any = any || p.ws[i] > 0;
  if (!any) return ONYX_STATUS_OK;
  for (int i = 0; i < NB_WS_COUNT; ++i)
    req->regions[i] = (onyx_workspace_region){nb_ws_names[i], p.ws[i], 64, ONYX_LIFETIME_STEP};
  req->count = NB_WS_COUNT;
  return ONYX_STATUS_OK;
}

/* ------------------------------------------------------------------ compute */

/* Checks the views against the plan before anything is written. */
static onyx_status nb_ws_views(onyx_compute_ctx *ctx, const nb_plan *p, void *out[NB_WS_COUNT]) {
  size_t have =
      ctx->struct_size >= offsetof(onyx_compute_ctx, workspace_count) + sizeof ctx->workspace_count
          ? ctx->workspace_count
          : 0;
  for (int i = 0; i < NB_WS_COUNT; ++i) {
    out[i] = NULL;
    if (p->ws[i] == 0) continue;
    const onyx_workspace_view *v = (size_t)i < have ? &ctx->workspace[i] : NULL;
    if (v == NULL || v->data == NULL || v->bytes < p->ws[i])
      return onyx__pc_error(ctx, ONYX_STATUS_WORKSPACE_TOO_SMALL,
                            "workspace region %d (%s) has %llu bytes, %llu required", i,
                            nb_ws_names[i], v ? (unsigned long long)v->bytes : 0ull,
                            (unsigned long long)p->ws[i]);
    out[i] = v->data;
  }
  return ONYX_STATUS_OK;
}

/* Inputs on the host with data, except weights the kernel packed (the core may have
 * freed them: geometry only). */
static onyx_status nb_check_inputs(const nb_state *s, onyx_compute_ctx *ctx,
                                   const onyx_tensor *const *in, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const onyx_tensor *t = in[i];
    bool packed = s->prepacked && i >= ONYX__PC_NB_B && i <= ONYX__PC_NB_ZP;
    if (t == NULL) continue;
    if (t->device != ONYX_DEVICE_HOST && !packed)
      return onyx__pc_error(ctx, ONYX_STATUS_INVALID_ARGUMENT, "input %zu is not in host memory",
                            i);
    if (!packed && t->data == NULL && onyx_tensor_numel(t) != 0)
      return onyx__pc_error(ctx, ONYX_STATUS_INVALID_ARGUMENT,
                            "input %zu has %lld elements but no data", i,
                            (long long)onyx_tensor_numel(t));
  }
  return ONYX_STATUS_OK;
}

/* One run of the tile kernels. */
typedef struct nb_run {
  const nb_state *s;
  const onyx__nb_packed *w;
  const onyx__nb_qa *qa; /* int8 route */
  const float *a;        /* fp32 route: rows of kpad (or K) floats */
  float *a_buf;          /* the same rows when widened into workspace */
  int64_t lda;
  const void *a_in; /* A as given, for quantizing */
  uint32_t a_dtype;
  int64_t m, row_groups;
  const onyx_tensor *bias;
  onyx_tensor *y;
} nb_run;

/* Tile results → Y: bias added, rounded to Y's dtype, columns past N dropped. */
static void nb_store(const nb_run *r, int64_t row0, int rows, int64_t t, const float *out) {
  const int64_t n = r->s->attrs.n, col0 = t * ONYX__NB_TILE;
  const int nc = n - col0 < ONYX__NB_TILE ? (int)(n - col0) : ONYX__NB_TILE;
  float bias[ONYX__NB_TILE] = {0};
  if (r->bias != NULL)
    for (int c = 0; c < nc; ++c)
      bias[c] = onyx__cpu_load_f32(r->bias->dtype, r->bias->data, col0 + c);
  for (int i = 0; i < rows; ++i) {
    const int64_t base = (row0 + i) * n + col0;
    if (r->y->dtype == ONYX_DTYPE_FLOAT32) {
      float *y = (float *)r->y->data + base;
      for (int c = 0; c < nc; ++c) y[c] = out[i * ONYX__NB_TILE + c] + bias[c];
    } else {
      for (int c = 0; c < nc; ++c)
        onyx__cpu_store_f32(r->y->dtype, r->y->data, base + c,
                            out[i * ONYX__NB_TILE + c] + bias[c]);
    }
  }
}

static void nb_store_cb(void *arg, int64_t row0, int64_t rows, int64_t t, const float *tile) {
  nb_store(arg, row0, (int)rows, t, tile);
}

/* Items [i0, i1): item = tile · row_groups + row group, so one task's items share tiles. */
static void nb_tiles(void *arg, int64_t i0, int64_t i1) {
  const nb_run *r = arg;
  const onyx__nb_isa *isa = r->s->isa;
  float out[ONYX__NB_MR_MAX * ONYX__NB_TILE];
  for (int64_t item = i0; item < i1; ++item) {
    const int64_t t = item / r->row_groups, row0 = (item % r->row_groups) * isa->mr;
    const int mr = r->m - row0 < isa->mr ? (int)(r->m - row0) : isa->mr;
    if (r->qa != NULL)
      isa->i8(r->w, r->qa, row0, mr, t, out);
    else
      isa->f32(r->w, r->a, r->lda, row0, mr, t, out);
    nb_store(r, row0, mr, t, out);
  }
}

/* The reference quantizes with the portable code, every other route with its ISA's
 * (the codes are the same: see onyx__nb_qa). */
static void nb_quantize_rows(void *arg, int64_t r0, int64_t r1) {
  const nb_run *r = arg;
  const onyx__pc_nb_attrs *a = &r->s->attrs;
  const size_t esize = onyx_dtype_size(r->a_dtype);
  const onyx__nb_isa *isa = r->s->reference ? &onyx__nb_isa_generic : r->s->isa;
  for (int64_t m = r0; m < r1; ++m)
    isa->quantize(r->a_dtype, (const char *)r->a_in + (size_t)(m * a->k) * esize, a->k,
                  a->block_size, r->qa, m);
}

/* A widened to float32 rows of kpad, zero past K (fp32 route, when not read in place). */
static void nb_widen_rows(void *arg, int64_t r0, int64_t r1) {
  const nb_run *r = arg;
  const int64_t k = r->s->attrs.k;
  for (int64_t m = r0; m < r1; ++m) {
    float *dst = r->a_buf + m * r->lda;
    for (int64_t j = 0; j < k; ++j) dst[j] = onyx__cpu_load_f32(r->a_dtype, r->a_in, m * k + j);
    memset(dst + k, 0, (size_t)(r->lda - k) * sizeof(float));
  }
}

/* Splits [0, total) into contiguous chunks of at least `grain` items, up to four a
 * thread, taken by the threads as they come free (the pool hands out indices through a
 * counter): a thread held up elsewhere — another process on the core — leaves its share
 * to the others instead of holding up the whole product. */
typedef struct nb_chunks {
  void (*fn)(void *arg, int64_t begin, int64_t end);
  void *arg;
  int64_t total, count;
} nb_chunks;

static void nb_chunk(void *arg, size_t i) {
  const nb_chunks *c = arg;
  const int64_t b = c->total * (int64_t)i / c->count, e = c->total * ((int64_t)i + 1) / c->count;
  if (e > b) c->fn(c->arg, b, e);
}

static void nb_parallel_chunks(const onyx__cpu_provider *p, int64_t total, int64_t grain,
                               void (*fn)(void *arg, int64_t begin, int64_t end), void *arg) {
  int64_t count = p != NULL && p->parallel ? 4 * (int64_t)p->num_threads : 1;
  if (count > total / grain) count = total / grain;
  if (count <= 1) {
    if (total > 0) fn(arg, 0, total);
    return;
  }
  nb_chunks c = {fn, arg, total, count};
  onyx__cpu_parallel_for(p, (size_t)count, nb_chunk, &c);
}

/* Rows of A per task when a pass over A is split: each row is cheap. */
static int64_t nb_row_grain(const onyx__pc_nb_attrs *a) {
  int64_t g = ONYX__CPU_PARALLEL_GRAIN / (a->k > 0 ? a->k : 1);
  return g > 0 ? g : 1;
}

static onyx_status nb_compute(void *state, onyx_compute_ctx *ctx, const onyx_tensor *const *inputs,
                              size_t input_count) {
  const nb_state *s = state;
  const onyx__pc_nb_attrs *a = &s->attrs;
  onyx_status st = nb_check_inputs(s, ctx, inputs, input_count);
  if (st != ONYX_STATUS_OK) return st;
  nb_plan p;
  char why[512];
  st = nb_plan_make(s, inputs, input_count, &p, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__pc_error(ctx, st, "%s", why);
  void *ws[NB_WS_COUNT];
  st = nb_ws_views(ctx, &p, ws);
  if (st != ONYX_STATUS_OK) return st;
  onyx_tensor *y = NULL;
  st = onyx__cpu_alloc_output(&s->base, ctx, p.g.t1, p.g.out_rank, p.g.out_dims, &y);
  if (st != ONYX_STATUS_OK || y == NULL || p.g.m == 0) return st;

  const onyx__cpu_provider *prov = s->base.provider;
  const onyx_tensor *bias = input_count > ONYX__PC_NB_BIAS ? inputs[ONYX__PC_NB_BIAS] : NULL;
  const onyx_tensor *zp = input_count > ONYX__PC_NB_ZP ? inputs[ONYX__PC_NB_ZP] : NULL;
  onyx__nb_qa qa;
  if (p.int8) onyx__nb_qa_init(a, p.g.m, ws[NB_WS_A_INT8], &qa);
  nb_run r = {.s = s,
              .qa = p.int8 ? &qa : NULL,
              .a_in = inputs[0]->data,
              .a_dtype = p.g.t1,
              .m = p.g.m,
              .bias = bias,
              .y = y};
  if (p.int8) onyx__cpu_parallel_range(prov, p.g.m, nb_row_grain(a), nb_quantize_rows, &r);

  if (s->reference) {
    onyx__nb_ref ref = {a, inputs[0], inputs[1], inputs[2], zp, bias, y, p.int8 ? &qa : NULL};
    onyx__cpu_parallel_range(prov, p.g.m, 1, onyx__nb_reference_rows, &ref);
    return ONYX_STATUS_OK;
  }

  onyx__nb_packed run_w;
  if (!s->prepacked)
    onyx__nb_pack(prov, a, inputs[ONYX__PC_NB_B], inputs[ONYX__PC_NB_SCALES], zp, ws[NB_WS_WEIGHTS],
                  &run_w);
  r.w = s->prepacked ? &s->packed : &run_w;
  if (p.gemm) {
    onyx__nb_gemm_args g = {.w = r.w,
                            .isa = s->isa,
                            .a = inputs[0]->data,
                            .a_dtype = p.g.t1,
                            .m = p.g.m,
                            .pack_a = ws[NB_WS_PACK_A],
                            .tiles = ws[NB_WS_TILES],
                            .tasks = nb_tasks(s),
                            .store = nb_store_cb,
                            .store_arg = &r};
    onyx__nb_gemm_run(prov, &g);
    return ONYX_STATUS_OK;
  }
  if (!p.int8) {
    r.lda = p.a_direct ? a->k : a->k_blocks * a->block_size;
    r.a_buf = ws[NB_WS_A_F32];
    r.a = p.a_direct ? (const float *)inputs[0]->data : r.a_buf;
    if (!p.a_direct) onyx__cpu_parallel_range(prov, p.g.m, nb_row_grain(a), nb_widen_rows, &r);
  }
  r.row_groups = (p.g.m + s->isa->mr - 1) / s->isa->mr;
  /* About 32 KiB of codes a task at least: a split below that costs more than it gains. */
  int64_t rows = p.g.m < s->isa->mr ? p.g.m : s->isa->mr;
  int64_t item_bytes = r.w->kb * onyx__nb_block_bytes(r.w) * rows;
  int64_t grain = item_bytes > 0 ? 32768 / item_bytes : 1;
  nb_parallel_chunks(prov, r.w->tiles * r.row_groups, grain > 0 ? grain : 1, nb_tiles, &r);
  return ONYX_STATUS_OK;
}

const onyx_kernel_table onyx__cpu_k_matmul_nbits = {
    .struct_size = sizeof(onyx_kernel_table),
    .version = ONYX_ABI_VERSION,
    .domain = "com.microsoft",
    .op_type = "MatMulNBits",
    .since_opset = 1,
    .until_opset = 0,
    .type_input = 0,
    .type_mask = ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT32) | ONYX_DTYPE_BIT(ONYX_DTYPE_FLOAT16) |
                 ONYX_DTYPE_BIT(ONYX_DTYPE_BFLOAT16),
    .create = nb_create,
    .destroy = nb_destroy,
    .workspace = nb_workspace,
    .compute = nb_compute,
    .infer = nb_infer,
};
