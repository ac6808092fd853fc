/*
 * The reference attention route: float32 (and any head size or hk != hv in any type).
 *
 * Deliberately plain: one pass writes every row's scores (after scale, softcap, mask;
 * −inf where masked) into the scores region, a second turns each row into
 * probabilities in place and multiplies with V. It is the route whose workspace holds
 * a scores region; the tensor-core route (cuda_attn_flash.cu) needs none.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda_attn_device.cuh"
#include "cuda_attn_impl.h"

namespace onyx_cuda_attn {

/* Rows are (b, h, s) in that order: row = (b·nq + h)·sq + s. */
struct RowId {
  int b, h;
  int64_t s;
};
__device__ __forceinline__ RowId row_id(const onyx__cuda_attn_params &p, int64_t row) {
  RowId r;
  r.s = row % p.sq;
  r.h = (int)((row / p.sq) % p.nq);
  r.b = (int)(row / ((int64_t)p.sq * p.nq));
  return r;
}

/* Keys [lo, hi) the row may see. */
__device__ __forceinline__ void row_range(const onyx__cuda_attn_params &p, const BatchGeom &geo,
                                          int64_t s, int64_t *lo, int64_t *hi) {
  int64_t pos = geo.qpos0 + s;
  int64_t h = geo.limit;
  if (p.causal && pos + 1 < h) h = pos + 1;
  int64_t l = 0;
  if (p.window > 0 && pos - p.window + 1 > l) l = pos - p.window + 1;
  *lo = l;
  *hi = h;
}

template <typename T>
__global__ void scores_kernel(const onyx__cuda_attn_params p, float *scores, int64_t cols) {
  extern __shared__ float qrow[];
  const int64_t row = blockIdx.x;
  const RowId id = row_id(p, row);
  const BatchGeom geo = batch_geom(p, id.b);
  const T *q = (const T *)p.q + (int64_t)id.b * p.q_bs + id.s * p.q_ss + (int64_t)id.h * p.q_hs;
  int64_t rrow = 0;
  if (p.cos != nullptr)
    rrow = rope_row(p.pos_ids, p.pos_bs, p.pos_ss, p.pos_add_s, geo.rpos0, p.rot_rows, id.b, id.s);
  for (int d = threadIdx.x; d < p.hk; d += blockDim.x)
    qrow[d] = p.cos != nullptr ? rope_elem(q, d, (const T *)p.cos, (const T *)p.sin, p.rot_half,
                                           rrow, p.interleaved != 0)
                               : ld(q, d);
  __syncthreads();
  int64_t lo, hi;
  row_range(p, geo, id.s, &lo, &hi);
  const int g = id.h / p.group;
  const T *kb = (const T *)p.k + (int64_t)id.b * p.k_bs + (int64_t)g * p.k_gs;
  const int64_t moff = (int64_t)id.b * p.m_bs + (int64_t)id.h * p.m_hs + id.s * p.m_ss;
  /* Only keys the row may see are scored: with a shared KV buffer, `cols` is the
   * buffer's capacity, far beyond the live length. softmax_pv_kernel reads the same
   * range, so nothing outside it needs writing. */
  if (hi > cols) hi = cols;
  for (int64_t j = lo + (int64_t)blockIdx.y * blockDim.x + threadIdx.x; j < hi;
       j += (int64_t)gridDim.y * blockDim.x) {
    const T *kr = kb + j * p.k_rs;
    float acc = 0.0f;
    for (int d = 0; d < p.hk; ++d) acc += qrow[d] * ld(kr, d);
    float x = acc * p.scale;
    if (p.softcap != 0.0f) x = p.softcap * tanhf(x / p.softcap);
    if (p.mask != nullptr) x = mask_add(p.mask, p.mask_dtype, moff + j * p.m_js, x);
    scores[row * cols + j] = x;
  }
}

__device__ __forceinline__ float block_reduce(float v, bool is_max, float *buf) {
  for (int o = 16; o > 0; o >>= 1) {
    float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, w) : v + w;
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = (blockDim.x + 31) >> 5;
  __syncthreads();
  if (lane == 0) buf[warp] = v;
  __syncthreads();
  v = lane < nw ? buf[lane] : (is_max ? -INFINITY : 0.0f);
  for (int o = 16; o > 0; o >>= 1) {
    float w = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, w) : v + w;
  }
  return v;
}

template <typename T>
__global__ void __launch_bounds__(256)
    softmax_pv_kernel(const onyx__cuda_attn_params p, float *scores, int64_t cols) {
  __shared__ float buf[32];
  const int64_t row = blockIdx.x;
  const RowId id = row_id(p, row);
  const BatchGeom geo = batch_geom(p, id.b);
  int64_t lo, hi;
  row_range(p, geo, id.s, &lo, &hi);
  if (hi > cols) hi = cols;
  float *sc = scores + row * cols;
  float m = -INFINITY;
  for (int64_t j = lo + threadIdx.x; j < hi; j += blockDim.x) m = fmaxf(m, sc[j]);
  m = block_reduce(m, true, buf);
  float l = 0.0f;
  for (int64_t j = lo + threadIdx.x; j < hi; j += blockDim.x) {
    float e = (m == -INFINITY || sc[j] == -INFINITY) ? 0.0f : __expf(sc[j] - m);
    sc[j] = e;
    l += e;
  }
  l = block_reduce(l, false, buf);
  __syncthreads();
  /* finish_factor works in the log2 domain: convert m and the sink. */
  float sink2 = 0.0f;
  bool has_sink = sink_log2<T>(p, id.h, &sink2);
  float f = finish_factor(m == -INFINITY ? m : m * kLog2e, l, has_sink, sink2);
  const int g = id.h / p.group;
  const T *vb = (const T *)p.v + (int64_t)id.b * p.v_bs + (int64_t)g * p.v_gs;
  T *dst = (T *)p.y + (int64_t)id.b * p.y_bs + id.s * p.y_ss + (int64_t)id.h * p.y_hs;
  for (int d = threadIdx.x; d < p.hv; d += blockDim.x) {
    float acc = 0.0f;
    if (f != 0.0f)
      for (int64_t j = lo; j < hi; ++j) {
        float w = sc[j];
        if (w != 0.0f) acc += w * ld(vb + j * p.v_rs, d);
      }
    dst[d] = Elem<T>::store(acc * f);
  }
}

template <typename T>
static cudaError_t run(const onyx__cuda_attn_params &p, float *scores, int64_t cols,
                       cudaStream_t s) {
  int64_t rows = (int64_t)p.batch * p.nq * p.sq;
  if (rows <= 0) return cudaSuccess;
  if (rows > 0x7fffffffLL) return cudaErrorInvalidValue;
  int64_t ky = (cols + 255) / 256;
  if (ky > 65535) ky = 65535;
  if (ky < 1) ky = 1;
  if (cols > 0) {
    scores_kernel<T><<<dim3((unsigned)rows, (unsigned)ky), 256, (size_t)p.hk * sizeof(float), s>>>(
        p, scores, cols);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  softmax_pv_kernel<T><<<(unsigned)rows, 256, 0, s>>>(p, scores, cols);
  return cudaGetLastError();
}

} // namespace onyx_cuda_attn

extern "C" int onyx__cuda_attn_reference(const onyx__cuda_attn_params *p, float *scores,
                                         int64_t key_cols, void *stream) {
  using namespace onyx_cuda_attn;
  cudaStream_t s = (cudaStream_t)stream;
  switch (p->dtype) {
  case ONYX_DTYPE_FLOAT32:
    return (int)run<float>(*p, scores, key_cols, s);
  case ONYX_DTYPE_FLOAT16:
    return (int)run<__half>(*p, scores, key_cols, s);
  case ONYX_DTYPE_BFLOAT16:
    return (int)run<__nv_bfloat16>(*p, scores, key_cols, s);
  default:
    return (int)cudaErrorInvalidValue;
  }
}
