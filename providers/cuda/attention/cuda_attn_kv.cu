/*
 * Present / staging fill: the one place K/V rows are written.
 *
 * For each (b, kv head g) of the destination: rows [0, past_b) come from past (skipped
 * on a shared buffer, where they already are), rows [past_b, past_b + seq) are the new
 * rows (keys rotated here, once, so the attention kernels read rotated keys), and rows
 * after them are zeroed (again only when not shared). Rows move in 16-byte pieces when
 * the geometry allows, else element by element.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda_attn_device.cuh"
#include "cuda_attn_impl.h"

namespace onyx_cuda_attn {

__device__ __forceinline__ int64_t fill_past(const onyx__cuda_kv_fill &f, int b) {
  if (f.mode == ONYX__CUDA_ATTN_GQA) {
    int64_t total = (int64_t)f.seqlens[b] + 1;
    return f.first ? 0 : total - f.seq;
  }
  return f.past_rows;
}

/* Piece type of VEC elements of T. */
template <typename T, int VEC> struct alignas(sizeof(T) * VEC) Piece { T v[VEC]; };

/* Items: (b, g, row, piece); row over `rows` (full fill) or over seq (new rows only). */
template <typename T, int VEC>
__global__ void fill_kernel(const onyx__cuda_kv_fill f, int64_t items, int64_t row_span) {
  const int pieces = f.head / VEC;
  for (int64_t it = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; it < items;
       it += (int64_t)gridDim.x * blockDim.x) {
    int c = (int)(it % pieces);
    int64_t rest = it / pieces;
    int64_t rr = rest % row_span;
    rest /= row_span;
    int g = (int)(rest % f.nkv);
    int b = (int)(rest / f.nkv);
    int64_t past = fill_past(f, b);
    int64_t r = f.copy_past ? rr : past + rr;
    if (r < 0 || r >= f.rows) continue;
    T *dst = (T *)f.dst + (int64_t)b * f.d_bs + (int64_t)g * f.d_gs + r * f.d_rs + c * VEC;
    Piece<T, VEC> out;
    if (r < past) {
      if (f.past == nullptr || r >= f.past_cap) continue;
      out = *(const Piece<T, VEC> *)((const T *)f.past + (int64_t)b * f.p_bs + (int64_t)g * f.p_gs +
                                     r * f.p_rs + c * VEC);
    } else if (r < past + f.seq) {
      int64_t s = r - past;
      const T *src = (const T *)f.src + (int64_t)b * f.s_bs + (int64_t)g * f.s_gs + s * f.s_rs;
      if (f.cos != nullptr && c * VEC < 2 * f.rot_half) {
        int64_t row = rope_row(f.pos_ids, f.pos_bs, f.pos_ss, f.pos_add_s, past, f.rot_rows, b, s);
#pragma unroll
        for (int e = 0; e < VEC; ++e)
          out.v[e] = Elem<T>::store(rope_elem(src, c * VEC + e, (const T *)f.cos, (const T *)f.sin,
                                              f.rot_half, row, f.interleaved != 0));
      } else {
        out = *(const Piece<T, VEC> *)(src + c * VEC);
      }
    } else {
#pragma unroll
      for (int e = 0; e < VEC; ++e) out.v[e] = Elem<T>::store(0.0f);
    }
    *(Piece<T, VEC> *)dst = out;
  }
}

static bool aligned(const void *ptr, int64_t bytes) {
  return ((uintptr_t)ptr % (uintptr_t)bytes) == 0;
}

template <typename T> static cudaError_t run(const onyx__cuda_kv_fill &f, cudaStream_t s) {
  constexpr int V16 = (int)(16 / sizeof(T));
  bool vec = f.head % V16 == 0 && aligned(f.dst, 16) && aligned(f.src, 16) &&
             (f.past == nullptr || aligned(f.past, 16));
  const int64_t strides[9] = {f.d_bs, f.d_gs, f.d_rs, f.p_bs, f.p_gs,
                              f.p_rs, f.s_bs, f.s_gs, f.s_rs};
  for (int i = 0; i < 9; ++i) vec = vec && strides[i] % V16 == 0;
  int64_t span = f.copy_past ? f.rows : f.seq;
  int64_t items = (int64_t)f.batch * f.nkv * span * (f.head / (vec ? V16 : 1));
  if (items <= 0) return cudaSuccess;
  int64_t blocks = (items + 255) / 256;
  if (blocks > 65536) blocks = 65536;
  if (vec)
    fill_kernel<T, V16><<<(unsigned)blocks, 256, 0, s>>>(f, items, span);
  else
    fill_kernel<T, 1><<<(unsigned)blocks, 256, 0, s>>>(f, items, span);
  return cudaGetLastError();
}

} // namespace onyx_cuda_attn

extern "C" int onyx__cuda_attn_kv_fill(const onyx__cuda_kv_fill *f, void *stream) {
  using namespace onyx_cuda_attn;
  cudaStream_t s = (cudaStream_t)stream;
  switch (f->dtype) {
  case ONYX_DTYPE_FLOAT32:
    return (int)run<float>(*f, s);
  case ONYX_DTYPE_FLOAT16:
    return (int)run<__half>(*f, s);
  case ONYX_DTYPE_BFLOAT16:
    return (int)run<__nv_bfloat16>(*f, s);
  default:
    return (int)cudaErrorInvalidValue;
  }
}
