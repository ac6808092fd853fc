/*
 * The fake core of the CUDA attention tests (see cuda_attn_harness.h). Failures of the
 * CUDA runtime abort the program with a message: a test cannot go on without memory.
 */
#include "cuda_attn_harness.h"

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CH_CHECK(call)                                                                             \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call,                         \
              cudaGetErrorString(e_));                                                             \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

bool ch_have_device(void) {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

double ch_uniform(ch_rng *r) {
  r->s = r->s * 6364136223846793005ull + 1442695040888963407ull;
  double v = (double)(r->s >> 11) / 9007199254740992.0 * 2.0 - 1.0;
  if (fabs(v) < 1e-3) v = 0.375;
  return v;
}

uint16_t ch_f32_to_f16(float value) {
  uint32_t x;
  memcpy(&x, &value, sizeof x);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
  if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
  if (ax < 0x38800000u) {
    float a, t;
    memcpy(&a, &ax, sizeof a);
    t = a + 0.5f;
    uint32_t r;
    memcpy(&r, &t, sizeof r);
    return (uint16_t)(sign | (r - 0x3f000000u));
  }
  ax += 0xc8000fffu + ((ax >> 13) & 1u);
  return (uint16_t)(sign | (ax >> 13));
}

float ch_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t em = h & 0x7fffu;
  uint32_t bits;
  float f;
  if (em >= 0x7c00u) {
    bits = sign | 0x7f800000u | ((em & 0x3ffu) << 13);
  } else if (em >= 0x0400u) {
    bits = sign | ((em + 0x1c000u) << 13);
  } else {
    f = (float)em * 5.9604644775390625e-8f;
    memcpy(&bits, &f, sizeof bits);
    bits |= sign;
  }
  memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t ch_f32_to_bf16(float value) {
  uint32_t x;
  memcpy(&x, &value, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return (uint16_t)(x >> 16);
}

float ch_bf16_to_f32(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

double ch_round(uint32_t dtype, double v) {
  switch (dtype) {
  case ONYX_DTYPE_FLOAT16:
    return ch_f16_to_f32(ch_f32_to_f16((float)v));
  case ONYX_DTYPE_BFLOAT16:
    return ch_bf16_to_f32(ch_f32_to_bf16((float)v));
  default:
    return (float)v;
  }
}

static void store(uint32_t dtype, void *raw, size_t i, double v) {
  switch (dtype) {
  case ONYX_DTYPE_FLOAT16:
    ((uint16_t *)raw)[i] = ch_f32_to_f16((float)v);
    break;
  case ONYX_DTYPE_BFLOAT16:
    ((uint16_t *)raw)[i] = ch_f32_to_bf16((float)v);
    break;
  default:
    ((float *)raw)[i] = (float)v;
    break;
  }
}

static double load(uint32_t dtype, const void *raw, size_t i) {
  switch (dtype) {
  case ONYX_DTYPE_FLOAT16:
    return ch_f16_to_f32(((const uint16_t *)raw)[i]);
  case ONYX_DTYPE_BFLOAT16:
    return ch_bf16_to_f32(((const uint16_t *)raw)[i]);
  default:
    return ((const float *)raw)[i];
  }
}

static void tensor_geom(ch_tensor *out, uint32_t dtype, uint32_t rank, const int64_t *dims) {
  memset(out, 0, sizeof *out);
  out->t.dtype = dtype;
  out->t.device = ONYX_DEVICE_CUDA;
  out->t.rank = rank;
  for (uint32_t i = 0; i < rank; ++i) out->t.dims[i] = dims[i];
  out->bytes = (size_t)onyx_tensor_numel(&out->t) * onyx_dtype_size(dtype);
}

static void upload(ch_tensor *out) {
  if (out->bytes == 0) return;
  CH_CHECK(cudaMalloc(&out->t.data, out->bytes));
  CH_CHECK(cudaMemcpy(out->t.data, out->raw, out->bytes, cudaMemcpyHostToDevice));
}

void ch_tensor_values(ch_tensor *out, uint32_t dtype, uint32_t rank, const int64_t *dims,
                      const double *values) {
  tensor_geom(out, dtype, rank, dims);
  size_t n = (size_t)onyx_tensor_numel(&out->t);
  out->raw = malloc(out->bytes > 0 ? out->bytes : 1);
  out->val = malloc((n > 0 ? n : 1) * sizeof(double));
  for (size_t i = 0; i < n; ++i) {
    store(dtype, out->raw, i, values[i]);
    out->val[i] = load(dtype, out->raw, i);
  }
  upload(out);
}

void ch_tensor_random(ch_tensor *out, uint32_t dtype, uint32_t rank, const int64_t *dims,
                      ch_rng *rng, double scale) {
  onyx_tensor g;
  memset(&g, 0, sizeof g);
  g.rank = rank;
  for (uint32_t i = 0; i < rank; ++i) g.dims[i] = dims[i];
  size_t n = (size_t)onyx_tensor_numel(&g);
  double *v = malloc((n > 0 ? n : 1) * sizeof(double));
  for (size_t i = 0; i < n; ++i) v[i] = ch_uniform(rng) * scale;
  ch_tensor_values(out, dtype, rank, dims, v);
  free(v);
}

void ch_tensor_bytes(ch_tensor *out, uint32_t dtype, uint32_t rank, const int64_t *dims,
                     const void *bytes, bool on_host) {
  tensor_geom(out, dtype, rank, dims);
  out->raw = malloc(out->bytes > 0 ? out->bytes : 1);
  memcpy(out->raw, bytes, out->bytes);
  if (on_host) {
    out->t.device = ONYX_DEVICE_HOST;
    out->t.data = out->raw;
  } else {
    upload(out);
  }
}

void ch_tensor_free(ch_tensor *t) {
  if (t->t.device == ONYX_DEVICE_CUDA && t->t.data != NULL) cudaFree(t->t.data);
  free(t->raw);
  free(t->val);
  memset(t, 0, sizeof *t);
}

double *ch_download(uint32_t dtype, const void *dev, size_t n) {
  size_t es = onyx_dtype_size(dtype);
  void *raw = malloc(n * es + 1);
  double *out = malloc(n * sizeof(double) + 1);
  CH_CHECK(cudaMemcpy(raw, dev, n * es, cudaMemcpyDeviceToHost));
  for (size_t i = 0; i < n; ++i) out[i] = load(dtype, raw, i);
  free(raw);
  return out;
}

/* ------------------------------------------------------------------ context */

static onyx_status ctx_alloc(onyx_compute_ctx *ctx, size_t index, uint32_t dtype, uint32_t rank,
                             const int64_t *dims, onyx_tensor **out_view) {
  ch_ctx *c = (ch_ctx *)ctx;
  if (index >= 4 || c->out_set[index]) return ONYX_STATUS_INVALID_ARGUMENT;
  onyx_tensor *t = &c->outs[index];
  memset(t, 0, sizeof *t);
  t->dtype = dtype;
  t->device = ONYX_DEVICE_CUDA;
  t->rank = rank;
  for (uint32_t i = 0; i < rank; ++i) t->dims[i] = dims[i];
  size_t bytes = (size_t)onyx_tensor_numel(t) * onyx_dtype_size(dtype);
  CH_CHECK(cudaMalloc(&c->out_mem[index], bytes > 0 ? bytes : 1));
  CH_CHECK(cudaMemset(c->out_mem[index], 0xFF, bytes)); /* poison: NaN in every float type */
  t->data = c->out_mem[index];
  c->out_set[index] = true;
  *out_view = t;
  return ONYX_STATUS_OK;
}

static onyx_status ctx_alias(onyx_compute_ctx *ctx, size_t index, size_t input_index) {
  ch_ctx *c = (ch_ctx *)ctx;
  if (!c->allow_alias || index >= 4 || c->out_set[index] || input_index >= c->input_count ||
      c->inputs[input_index] == NULL)
    return ONYX_STATUS_UNSUPPORTED;
  c->outs[index] = *c->inputs[input_index];
  c->out_set[index] = true;
  c->out_aliased[index] = true;
  return ONYX_STATUS_OK;
}

static void ctx_set_error(onyx_compute_ctx *ctx, const char *fmt, ...) {
  ch_ctx *c = (ch_ctx *)ctx;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->err, sizeof c->err, fmt, ap);
  va_end(ap);
}

void ch_ctx_init(ch_ctx *c, const onyx_tensor *const *inputs, size_t n, bool allow_alias) {
  memset(c, 0, sizeof *c);
  c->ctx.struct_size = sizeof c->ctx;
  c->ctx.version = ONYX_ABI_VERSION;
  c->ctx.core_data = c;
  c->ctx.stream = NULL;
  c->ctx.alloc_output = ctx_alloc;
  c->ctx.alias_output = ctx_alias;
  c->ctx.set_error = ctx_set_error;
  c->inputs = inputs;
  c->input_count = n;
  c->allow_alias = allow_alias;
}

void ch_ctx_workspace(ch_ctx *c, const onyx_workspace_requirement *req, int shrink_region,
                      uint64_t shrink) {
  for (uint32_t i = 0; i < req->count; ++i) {
    uint64_t bytes = req->regions[i].bytes;
    if ((int)i == shrink_region) bytes = bytes > shrink ? bytes - shrink : 0;
    CH_CHECK(cudaMalloc(&c->ws_mem[i], bytes > 0 ? bytes : 1));
    CH_CHECK(cudaMemset(c->ws_mem[i], 0xFF, bytes));
    c->views[i].name = req->regions[i].name;
    c->views[i].data = c->ws_mem[i];
    c->views[i].bytes = bytes;
  }
  c->ctx.workspace = c->views;
  c->ctx.workspace_count = req->count;
}

void ch_ctx_free(ch_ctx *c) {
  for (int i = 0; i < 4; ++i)
    if (c->out_mem[i] != NULL) cudaFree(c->out_mem[i]);
  for (int i = 0; i < ONYX_MAX_WORKSPACE_REGIONS; ++i)
    if (c->ws_mem[i] != NULL) cudaFree(c->ws_mem[i]);
  memset(c, 0, sizeof *c);
}

/* ------------------------------------------------------------------ nodes */

void ch_node_init(ch_node *n, const char *domain, const char *op, int64_t opset, size_t inputs,
                  size_t outputs) {
  memset(n, 0, sizeof *n);
  n->info.struct_size = sizeof n->info;
  n->info.version = ONYX_ABI_VERSION;
  n->info.name = "under_test";
  n->info.domain = domain;
  n->info.op_type = op;
  n->info.opset = opset;
  n->info.input_count = inputs;
  n->info.output_count = outputs;
  n->info.input_present = n->in_present;
  n->info.output_present = n->out_present;
  n->info.input_dtypes = n->in_dtypes;
  n->info.attrs = n->attrs;
  for (size_t i = 0; i < outputs && i < 4; ++i) n->out_present[i] = true;
}

void ch_node_int(ch_node *n, const char *name, int64_t v) {
  onyx_attr *a = &n->attrs[n->info.attr_count++];
  memset(a, 0, sizeof *a);
  a->name = name;
  a->type = ONYX_ATTR_INT;
  a->i = v;
}

void ch_node_float(ch_node *n, const char *name, float v) {
  onyx_attr *a = &n->attrs[n->info.attr_count++];
  memset(a, 0, sizeof *a);
  a->name = name;
  a->type = ONYX_ATTR_FLOAT;
  a->f = v;
}

onyx_status ch_run(const onyx_kernel_table *kt, ch_node *node, const onyx_tensor *const *in,
                   size_t n, ch_ctx *ctx, onyx_workspace_requirement *out_req, int shrink_region,
                   uint64_t shrink) {
  for (size_t i = 0; i < n && i < 16; ++i) {
    node->in_present[i] = in[i] != NULL;
    node->in_dtypes[i] = in[i] != NULL ? in[i]->dtype : ONYX_DTYPE_UNDEFINED;
  }
  void *state = NULL;
  char err[256] = "";
  onyx_status st = kt->create(NULL, &node->info, &state, err, sizeof err);
  if (st != ONYX_STATUS_OK) {
    snprintf(ctx->err, sizeof ctx->err, "%s", err);
    return st;
  }
  memset(out_req, 0, sizeof *out_req);
  out_req->struct_size = sizeof *out_req;
  out_req->version = ONYX_ABI_VERSION;
  onyx_tensor geo[16];
  memset(geo, 0, sizeof geo);
  for (size_t i = 0; i < n && i < 16; ++i)
    if (in[i] != NULL) {
      geo[i] = *in[i];
      geo[i].data = NULL;
    }
  if (kt->workspace != NULL) {
    st = kt->workspace(state, geo, n, out_req);
    if (st != ONYX_STATUS_OK) {
      kt->destroy(state);
      return st;
    }
  }
  ch_ctx_workspace(ctx, out_req, shrink_region, shrink);
  /* As the core does: inputs the table lists in host_inputs reach compute in host
   * memory (a device tensor of the test is copied back first). */
  const onyx_tensor *view[16];
  onyx_tensor host_view[16];
  void *host_mem[16] = {NULL};
  for (size_t i = 0; i < n && i < 16; ++i) {
    view[i] = in[i];
    if (in[i] == NULL || in[i]->device == ONYX_DEVICE_HOST || !(kt->host_inputs >> i & 1u))
      continue;
    size_t bytes = (size_t)onyx_tensor_numel(in[i]) * onyx_dtype_size(in[i]->dtype);
    host_mem[i] = malloc(bytes > 0 ? bytes : 1);
    CH_CHECK(cudaMemcpy(host_mem[i], in[i]->data, bytes, cudaMemcpyDeviceToHost));
    host_view[i] = *in[i];
    host_view[i].device = ONYX_DEVICE_HOST;
    host_view[i].data = host_mem[i];
    view[i] = &host_view[i];
  }
  for (int r = 0; r <= ctx->repeat; ++r) {
    if (r > 0) /* the next step: fresh outputs, the same state and workspace */
      for (int i = 0; i < 4; ++i) {
        if (ctx->out_mem[i] != NULL) CH_CHECK(cudaFree(ctx->out_mem[i]));
        ctx->out_mem[i] = NULL;
        ctx->out_set[i] = ctx->out_aliased[i] = false;
      }
    st = kt->compute(state, &ctx->ctx, n <= 16 ? view : in, n);
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
      fprintf(stderr, "device error after compute: %s\n", cudaGetErrorString(e));
      abort();
    }
    if (st != ONYX_STATUS_OK) break;
  }
  for (size_t i = 0; i < n && i < 16; ++i) free(host_mem[i]);
  kt->destroy(state);
  return st;
}

uint64_t ch_region_bytes(const onyx_workspace_requirement *req, const char *name) {
  for (uint32_t i = 0; i < req->count; ++i)
    if (strcmp(req->regions[i].name, name) == 0) return req->regions[i].bytes;
  return 0;
}

size_t ch_compare(const char *what, const double *got, const double *ref, size_t n, double atol,
                  double rtol) {
  size_t bad = 0;
  double max_err = 0.0, ref_norm = 0.0, err_norm = 0.0;
  for (size_t i = 0; i < n; ++i) {
    double e = fabs(got[i] - ref[i]);
    bool ok = e <= atol + rtol * fabs(ref[i]);
    if (!ok || isnan(got[i])) {
      if (bad < 5) fprintf(stderr, "  %s[%zu]: got %.6g, expected %.6g\n", what, i, got[i], ref[i]);
      ++bad;
    }
    if (e > max_err || isnan(e)) max_err = e;
    ref_norm += ref[i] * ref[i];
    err_norm += e * e;
  }
  printf("  %-44s n=%-8zu max_abs_err=%.3g rel_l2=%.3g bad=%zu\n", what, n, max_err,
         ref_norm > 0 ? sqrt(err_norm / ref_norm) : sqrt(err_norm), bad);
  return bad;
}
