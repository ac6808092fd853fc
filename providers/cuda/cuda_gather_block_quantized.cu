/*
 * Device side of GatherBlockQuantized: one thread per output element, which finds its
 * data element, code, block scale and zero point, as the CPU provider's definition
 * does (cpu_gather_block_quantized.c). Decoders gather a handful of embedding rows a
 * step, so the op is a few thousand elements: simple indexing is enough.
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "cuda_nbits.h"
#include "onyx_abi.h"

namespace {

/* Code at logical flat index f (uint8: 8/bits codes a byte, low bits first). */
__device__ __forceinline__ int gbq_code(uint32_t dtype, int bits, const uint8_t *p, int64_t f) {
  if (dtype == ONYX_DTYPE_UINT8) {
    const int64_t bit = f * bits;
    return (p[bit >> 3] >> (bit & 7)) & ((1 << bits) - 1);
  }
  const int v = (p[f >> 1] >> (4 * (f & 1))) & 0xF;
  return dtype == ONYX_DTYPE_INT4 && v >= 8 ? v - 16 : v;
}

__device__ __forceinline__ float load_f(uint32_t dtype, const void *p, int64_t i) {
  if (dtype == ONYX_DTYPE_FLOAT16) return __half2float(static_cast<const __half *>(p)[i]);
  if (dtype == ONYX_DTYPE_BFLOAT16)
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
  return static_cast<const float *>(p)[i];
}

__device__ __forceinline__ void store_f(uint32_t dtype, void *p, int64_t i, float v) {
  if (dtype == ONYX_DTYPE_FLOAT16)
    static_cast<__half *>(p)[i] = __float2half_rn(v);
  else if (dtype == ONYX_DTYPE_BFLOAT16)
    static_cast<__nv_bfloat16 *>(p)[i] = __float2bfloat16_rn(v);
  else
    static_cast<float *>(p)[i] = v;
}

__global__ void gbq_kernel(onyx__cuda_gbq_args a, int64_t total) {
  const uint8_t *data = static_cast<const uint8_t *>(a.data);
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
       e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = e % a.inner, i = (e / a.inner) % a.count, o = e / (a.inner * a.count);
    int64_t idx = a.index_dtype == ONYX_DTYPE_INT32
                      ? (int64_t) static_cast<const int32_t *>(a.indices)[i]
                      : static_cast<const int64_t *>(a.indices)[i];
    if (idx < 0) idx += a.gather_dim;
    if (idx < 0 || idx >= a.gather_dim) { /* out of range: zeros, as the op defines */
      store_f(a.scale_dtype, a.out, e, 0.0f);
      continue;
    }
    const int64_t f = (o * a.gather_dim + idx) * a.inner + r;
    const int64_t after = f % a.q_inner, c = (f / a.q_inner) % a.q_dim;
    const int64_t before = f / (a.q_inner * a.q_dim);
    const int64_t si = (before * a.blocks + c / a.block_size) * a.q_inner + after;
    float zp;
    if (a.zp == nullptr) {
      zp = a.data_dtype == ONYX_DTYPE_UINT8 ? (float)(1 << (a.bits - 1)) : 0.0f;
    } else if (a.data_dtype != ONYX_DTYPE_UINT8) {
      zp = (float)gbq_code(a.data_dtype, 4, static_cast<const uint8_t *>(a.zp), si);
    } else { /* uint8 zero points pack the blocks of one last-axis row into zp_row bytes */
      const uint8_t *row = static_cast<const uint8_t *>(a.zp) + (si / a.blocks) * a.zp_row;
      zp = (float)gbq_code(ONYX_DTYPE_UINT8, a.bits, row, si % a.blocks);
    }
    const float q = (float)gbq_code(a.data_dtype, a.bits, data, f);
    store_f(a.scale_dtype, a.out, e, (q - zp) * load_f(a.scale_dtype, a.scales, si));
  }
}

} // namespace

extern "C" cudaError_t onyx__cuda_launch_gbq(const onyx__cuda_gbq_args *a, cudaStream_t stream) {
  const int64_t total = a->outer * a->count * a->inner;
  if (total <= 0) return cudaSuccess;
  int64_t blocks = (total + 255) / 256;
  if (blocks > 65535LL * 8) blocks = 65535LL * 8;
  gbq_kernel<<<(unsigned)blocks, 256, 0, stream>>>(*a, total);
  return cudaGetLastError();
}
