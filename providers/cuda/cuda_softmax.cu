/*
 * Device side of Softmax: one block per row when the axis is innermost (the common
 * case: attention scores, logits), one thread per (outer, inner) column otherwise.
 * Max, sum of exponentials and output are three passes over the row; the row is
 * read from L1/L2 after the first.
 */
#include <math.h>

#include "cuda_device.cuh"

using namespace onyx_cuda;

namespace {

template <class T>
__global__ void softmax_rows(const typename T::raw *x, typename T::raw *y, int64_t cols) {
  __shared__ float scratch[32];
  const typename T::raw *row = x + blockIdx.x * cols;
  typename T::raw *out = y + blockIdx.x * cols;
  float m = -INFINITY;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) m = fmaxf(m, T::load(row, i));
  m = block_max(m, scratch);
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) sum += expf(T::load(row, i) - m);
  sum = block_sum(sum, scratch);
  float inv = 1.0f / sum;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x)
    T::store(out, i, expf(T::load(row, i) - m) * inv);
}

template <class T>
__global__ void softmax_strided(const typename T::raw *x, typename T::raw *y, int64_t outer,
                                int64_t axis, int64_t inner) {
  int64_t columns = outer * inner;
  for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < columns;
       c += (int64_t)gridDim.x * blockDim.x) {
    int64_t o = c / inner, i = c % inner;
    int64_t base = o * axis * inner + i;
    float m = -INFINITY;
    for (int64_t a = 0; a < axis; ++a) m = fmaxf(m, T::load(x, base + a * inner));
    float sum = 0.0f;
    for (int64_t a = 0; a < axis; ++a) sum += expf(T::load(x, base + a * inner) - m);
    float inv = 1.0f / sum;
    for (int64_t a = 0; a < axis; ++a)
      T::store(y, base + a * inner, expf(T::load(x, base + a * inner) - m) * inv);
  }
}

template <class T>
cudaError_t launch_t(const void *x, void *y, int64_t outer, int64_t axis, int64_t inner,
                     cudaStream_t stream) {
  const typename T::raw *tx = static_cast<const typename T::raw *>(x);
  typename T::raw *ty = static_cast<typename T::raw *>(y);
  if (inner == 1 && outer <= 0x7fffffffLL) {
    softmax_rows<T><<<static_cast<unsigned>(outer), row_threads(axis), 0, stream>>>(tx, ty, axis);
  } else {
    softmax_strided<T>
        <<<grid_for(outer * inner, 256), 256, 0, stream>>>(tx, ty, outer, axis, inner);
  }
  return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t onyx__cuda_launch_softmax(uint32_t dtype, const void *x, void *y,
                                                 int64_t outer, int64_t axis, int64_t inner,
                                                 cudaStream_t stream) {
  if (outer == 0 || axis == 0 || inner == 0) return cudaSuccess;
  switch (dtype) {
  case ONYX_DTYPE_FLOAT16:
    return launch_t<f16>(x, y, outer, axis, inner, stream);
  case ONYX_DTYPE_BFLOAT16:
    return launch_t<bf16>(x, y, outer, axis, inner, stream);
  case ONYX_DTYPE_FLOAT32:
    return launch_t<f32>(x, y, outer, axis, inner, stream);
  default:
    return cudaErrorInvalidValue;
  }
}
