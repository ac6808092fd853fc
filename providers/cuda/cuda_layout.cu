/*
 * Data movement kernels: the strided copy behind Transpose, Slice, Expand and Gemm's
 * C; the 2-D copy behind Concat; Gather; Cast. They move elements as raw bits of
 * 1, 2, 4 or 8 bytes, so one instance serves every dtype of that size.
 */
#include "cuda_device.cuh"

using namespace onyx_cuda;

namespace {

template <size_t S>
__global__ void strided_copy_kernel(const void *src, void *dst, walk w, int64_t n) {
  typedef typename bytes_t<S>::type E;
  const E *s = static_cast<const E *>(src);
  E *d = static_cast<E *>(dst);
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
       e += (int64_t)gridDim.x * blockDim.x) {
    int64_t off[1];
    walk_offsets<1>(w, e, off);
    d[e] = s[off[0]];
  }
}

template <size_t S>
__global__ void copy2d_kernel(const void *src, void *dst, int64_t rows, int64_t cols,
                              int64_t src_pitch, int64_t dst_pitch) {
  typedef typename bytes_t<S>::type E;
  const E *s = static_cast<const E *>(src);
  E *d = static_cast<E *>(dst);
  int64_t n = rows * cols;
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
       e += (int64_t)gridDim.x * blockDim.x) {
    int64_t r = e / cols, c = e % cols;
    d[r * dst_pitch + c] = s[r * src_pitch + c];
  }
}

template <size_t S, class I>
__global__ void gather_kernel(const void *data, const I *indices, void *out, int64_t axis_dim,
                              int64_t count, int64_t inner, int64_t n) {
  typedef typename bytes_t<S>::type E;
  const E *s = static_cast<const E *>(data);
  E *d = static_cast<E *>(out);
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
       e += (int64_t)gridDim.x * blockDim.x) {
    int64_t i = e % inner;
    int64_t t = e / inner;
    int64_t j = t % count;
    int64_t o = t / count;
    int64_t idx = static_cast<int64_t>(indices[j]);
    if (idx < 0) idx += axis_dim;
    d[e] = idx >= 0 && idx < axis_dim ? s[(o * axis_dim + idx) * inner + i] : E(0);
  }
}

/* Cast: every value goes through the widest form of its family, so each conversion
 * rounds once (float64 -> float16 directly, not via float32). */
__device__ __forceinline__ bool is_float(uint32_t t) {
  return t == ONYX_DTYPE_FLOAT32 || t == ONYX_DTYPE_FLOAT16 || t == ONYX_DTYPE_BFLOAT16 ||
         t == ONYX_DTYPE_FLOAT64;
}

__device__ __forceinline__ double load_f(uint32_t t, const void *p, int64_t i) {
  switch (t) {
  case ONYX_DTYPE_FLOAT16:
    return __half2float(static_cast<const __half *>(p)[i]);
  case ONYX_DTYPE_BFLOAT16:
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
  case ONYX_DTYPE_FLOAT64:
    return static_cast<const double *>(p)[i];
  default:
    return static_cast<const float *>(p)[i];
  }
}

__device__ __forceinline__ int64_t load_i(uint32_t t, const void *p, int64_t i) {
  switch (t) {
  case ONYX_DTYPE_INT8:
    return static_cast<const int8_t *>(p)[i];
  case ONYX_DTYPE_UINT8:
    return static_cast<const uint8_t *>(p)[i];
  case ONYX_DTYPE_BOOL:
    return static_cast<const uint8_t *>(p)[i] != 0;
  case ONYX_DTYPE_INT16:
    return static_cast<const int16_t *>(p)[i];
  case ONYX_DTYPE_UINT16:
    return static_cast<const uint16_t *>(p)[i];
  case ONYX_DTYPE_INT32:
    return static_cast<const int32_t *>(p)[i];
  case ONYX_DTYPE_UINT32:
    return static_cast<const uint32_t *>(p)[i];
  case ONYX_DTYPE_UINT64:
    return static_cast<int64_t>(static_cast<const uint64_t *>(p)[i]);
  default:
    return static_cast<const int64_t *>(p)[i];
  }
}

template <class T> __device__ __forceinline__ T to_int(double v) {
  /* Truncation toward zero; NaN and out-of-range values are undefined in ONNX and
   * give 0 here rather than the hardware's saturated value. */
  return v == v ? static_cast<T>(static_cast<int64_t>(v)) : T(0);
}

__device__ __forceinline__ void store_from_float(uint32_t t, void *p, int64_t i, double v) {
  switch (t) {
  case ONYX_DTYPE_FLOAT32:
    static_cast<float *>(p)[i] = static_cast<float>(v);
    break;
  case ONYX_DTYPE_FLOAT16:
    static_cast<__half *>(p)[i] = __double2half(v);
    break;
  case ONYX_DTYPE_BFLOAT16:
    static_cast<__nv_bfloat16 *>(p)[i] = __double2bfloat16(v);
    break;
  case ONYX_DTYPE_FLOAT64:
    static_cast<double *>(p)[i] = v;
    break;
  case ONYX_DTYPE_BOOL:
    static_cast<uint8_t *>(p)[i] = v != 0.0 ? 1 : 0;
    break;
  case ONYX_DTYPE_INT8:
    static_cast<int8_t *>(p)[i] = to_int<int8_t>(v);
    break;
  case ONYX_DTYPE_UINT8:
    static_cast<uint8_t *>(p)[i] = to_int<uint8_t>(v);
    break;
  case ONYX_DTYPE_INT16:
    static_cast<int16_t *>(p)[i] = to_int<int16_t>(v);
    break;
  case ONYX_DTYPE_UINT16:
    static_cast<uint16_t *>(p)[i] = to_int<uint16_t>(v);
    break;
  case ONYX_DTYPE_INT32:
    static_cast<int32_t *>(p)[i] = to_int<int32_t>(v);
    break;
  case ONYX_DTYPE_UINT32:
    static_cast<uint32_t *>(p)[i] = to_int<uint32_t>(v);
    break;
  case ONYX_DTYPE_UINT64:
    static_cast<uint64_t *>(p)[i] = v == v && v >= 0.0 ? static_cast<uint64_t>(v) : 0;
    break;
  default:
    static_cast<int64_t *>(p)[i] = to_int<int64_t>(v);
    break;
  }
}

__device__ __forceinline__ void store_from_int(uint32_t t, void *p, int64_t i, int64_t v) {
  switch (t) {
  case ONYX_DTYPE_FLOAT32:
    static_cast<float *>(p)[i] = static_cast<float>(v);
    break;
  case ONYX_DTYPE_FLOAT16:
    static_cast<__half *>(p)[i] = __double2half(static_cast<double>(v));
    break;
  case ONYX_DTYPE_BFLOAT16:
    static_cast<__nv_bfloat16 *>(p)[i] = __double2bfloat16(static_cast<double>(v));
    break;
  case ONYX_DTYPE_FLOAT64:
    static_cast<double *>(p)[i] = static_cast<double>(v);
    break;
  case ONYX_DTYPE_BOOL:
    static_cast<uint8_t *>(p)[i] = v != 0 ? 1 : 0;
    break;
  case ONYX_DTYPE_INT8:
    static_cast<int8_t *>(p)[i] = static_cast<int8_t>(v);
    break;
  case ONYX_DTYPE_UINT8:
    static_cast<uint8_t *>(p)[i] = static_cast<uint8_t>(v);
    break;
  case ONYX_DTYPE_INT16:
    static_cast<int16_t *>(p)[i] = static_cast<int16_t>(v);
    break;
  case ONYX_DTYPE_UINT16:
    static_cast<uint16_t *>(p)[i] = static_cast<uint16_t>(v);
    break;
  case ONYX_DTYPE_INT32:
    static_cast<int32_t *>(p)[i] = static_cast<int32_t>(v);
    break;
  case ONYX_DTYPE_UINT32:
    static_cast<uint32_t *>(p)[i] = static_cast<uint32_t>(v);
    break;
  case ONYX_DTYPE_UINT64:
    static_cast<uint64_t *>(p)[i] = static_cast<uint64_t>(v);
    break;
  default:
    static_cast<int64_t *>(p)[i] = v;
    break;
  }
}

__global__ void cast_kernel(uint32_t from, uint32_t to, const void *src, void *dst, int64_t n) {
  bool ff = is_float(from);
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
       e += (int64_t)gridDim.x * blockDim.x) {
    if (ff)
      store_from_float(to, dst, e, load_f(from, src, e));
    else
      store_from_int(to, dst, e, load_i(from, src, e));
  }
}

} // namespace

extern "C" cudaError_t onyx__cuda_launch_strided_copy(size_t elem_size, const void *src, void *dst,
                                                      const onyx__cuda_walk *w,
                                                      cudaStream_t stream) {
  if (w->numel == 0) return cudaSuccess;
  walk dw = to_device_walk(w);
  unsigned grid = grid_for(w->numel, 256);
  switch (elem_size) {
  case 1:
    strided_copy_kernel<1><<<grid, 256, 0, stream>>>(src, dst, dw, w->numel);
    break;
  case 2:
    strided_copy_kernel<2><<<grid, 256, 0, stream>>>(src, dst, dw, w->numel);
    break;
  case 4:
    strided_copy_kernel<4><<<grid, 256, 0, stream>>>(src, dst, dw, w->numel);
    break;
  case 8:
    strided_copy_kernel<8><<<grid, 256, 0, stream>>>(src, dst, dw, w->numel);
    break;
  default:
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

extern "C" cudaError_t onyx__cuda_launch_copy2d(size_t elem_size, const void *src, void *dst,
                                                int64_t rows, int64_t cols, int64_t src_pitch,
                                                int64_t dst_pitch, cudaStream_t stream) {
  int64_t n = rows * cols;
  if (n == 0) return cudaSuccess;
  if (rows == 1 || (src_pitch == cols && dst_pitch == cols))
    return cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * elem_size, cudaMemcpyDeviceToDevice,
                           stream);
  unsigned grid = grid_for(n, 256);
  switch (elem_size) {
  case 1:
    copy2d_kernel<1><<<grid, 256, 0, stream>>>(src, dst, rows, cols, src_pitch, dst_pitch);
    break;
  case 2:
    copy2d_kernel<2><<<grid, 256, 0, stream>>>(src, dst, rows, cols, src_pitch, dst_pitch);
    break;
  case 4:
    copy2d_kernel<4><<<grid, 256, 0, stream>>>(src, dst, rows, cols, src_pitch, dst_pitch);
    break;
  case 8:
    copy2d_kernel<8><<<grid, 256, 0, stream>>>(src, dst, rows, cols, src_pitch, dst_pitch);
    break;
  default:
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

template <size_t S>
static cudaError_t gather_t(const void *data, const void *indices, uint32_t index_dtype, void *out,
                            int64_t axis_dim, int64_t count, int64_t inner, int64_t n,
                            cudaStream_t stream) {
  unsigned grid = grid_for(n, 256);
  if (index_dtype == ONYX_DTYPE_INT32)
    gather_kernel<S, int32_t><<<grid, 256, 0, stream>>>(data, static_cast<const int32_t *>(indices),
                                                        out, axis_dim, count, inner, n);
  else
    gather_kernel<S, int64_t><<<grid, 256, 0, stream>>>(data, static_cast<const int64_t *>(indices),
                                                        out, axis_dim, count, inner, n);
  return cudaGetLastError();
}

extern "C" cudaError_t onyx__cuda_launch_gather(size_t elem_size, const void *data,
                                                const void *indices, uint32_t index_dtype,
                                                void *out, int64_t outer, int64_t axis_dim,
                                                int64_t index_count, int64_t inner,
                                                cudaStream_t stream) {
  int64_t n = outer * index_count * inner;
  if (n == 0) return cudaSuccess;
  switch (elem_size) {
  case 1:
    return gather_t<1>(data, indices, index_dtype, out, axis_dim, index_count, inner, n, stream);
  case 2:
    return gather_t<2>(data, indices, index_dtype, out, axis_dim, index_count, inner, n, stream);
  case 4:
    return gather_t<4>(data, indices, index_dtype, out, axis_dim, index_count, inner, n, stream);
  case 8:
    return gather_t<8>(data, indices, index_dtype, out, axis_dim, index_count, inner, n, stream);
  default:
    return cudaErrorInvalidValue;
  }
}

extern "C" cudaError_t onyx__cuda_launch_cast(uint32_t from, uint32_t to, const void *src,
                                              void *dst, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (from == to)
    return cudaMemcpyAsync(dst, src, static_cast<size_t>(n) * onyx_dtype_size(from),
                           cudaMemcpyDeviceToDevice, stream);
  cast_kernel<<<grid_for(n, 256), 256, 0, stream>>>(from, to, src, dst, n);
  return cudaGetLastError();
}
