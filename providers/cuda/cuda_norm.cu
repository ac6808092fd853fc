/*
 * Device side of the normalisations: one block per row. Each pass recomputes the
 * row's values (x [+ skip] [+ bias]) in float32 rather than keeping them: rows are a
 * few thousand elements and stay in L1/L2 between passes.
 *
 * LayerNormalization takes the mean first and then the variance around it (two
 * passes, no cancellation); the RMS forms need one pass for the mean square.
 */
#include <math.h>

#include "cuda_device.cuh"

using namespace onyx_cuda;

namespace {

struct norm_params {
  bool simplified;
  uint32_t x_dtype, scale_dtype, y_dtype, sum_dtype;
  const void *x, *skip, *bias, *scale, *shift;
  int64_t skip_numel, scale_numel, shift_numel;
  void *y, *sum;
  float *mean, *inv_std;
  int64_t rows, cols;
  float epsilon;
};

__device__ __forceinline__ float row_value(const norm_params &p, int64_t e, int64_t i) {
  float v = load_any(p.x_dtype, p.x, e);
  if (p.skip != nullptr) v += load_any(p.x_dtype, p.skip, e % p.skip_numel);
  if (p.bias != nullptr) v += load_any(p.x_dtype, p.bias, i);
  return v;
}

__global__ void norm_kernel(norm_params p) {
  __shared__ float scratch[32];
  dependent_wait();
  for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    int64_t base = r * p.cols;
    float s1 = 0.0f, s2 = 0.0f;
    for (int64_t i = threadIdx.x; i < p.cols; i += blockDim.x) {
      float v = row_value(p, base + i, i);
      if (p.sum != nullptr) store_any(p.sum_dtype, p.sum, base + i, v);
      s1 += v;
      s2 += v * v;
    }
    /* The RMS forms need no mean: one block reduction instead of two. */
    float mean = p.simplified ? 0.0f : block_sum(s1, scratch) / static_cast<float>(p.cols);
    float var;
    if (p.simplified) {
      var = block_sum(s2, scratch) / static_cast<float>(p.cols);
    } else {
      float d2 = 0.0f;
      for (int64_t i = threadIdx.x; i < p.cols; i += blockDim.x) {
        float d = row_value(p, base + i, i) - mean;
        d2 += d * d;
      }
      var = block_sum(d2, scratch) / static_cast<float>(p.cols);
    }
    float inv = rsqrtf(var + p.epsilon);
    if (threadIdx.x == 0) {
      if (p.mean != nullptr) p.mean[r] = p.simplified ? 0.0f : mean; /* as ONNX Runtime */
      if (p.inv_std != nullptr) p.inv_std[r] = inv;
    }
    float center = p.simplified ? 0.0f : mean;
    for (int64_t i = p.y == nullptr ? p.cols : threadIdx.x; i < p.cols; i += blockDim.x) {
      float v = (row_value(p, base + i, i) - center) * inv;
      v *= load_any(p.scale_dtype, p.scale, p.scale_numel == 1 ? 0 : i);
      if (p.shift != nullptr) v += load_any(p.scale_dtype, p.shift, p.shift_numel == 1 ? 0 : i);
      store_any(p.y_dtype, p.y, base + i, v);
    }
  }
}

} // namespace

extern "C" cudaError_t onyx__cuda_launch_norm(const onyx__cuda_norm_args *a, cudaStream_t stream) {
  if (a->rows == 0 || a->cols == 0) return cudaSuccess;
  norm_params p;
  p.simplified = a->simplified;
  p.x_dtype = a->x_dtype;
  p.scale_dtype = a->scale_dtype;
  p.y_dtype = a->y_dtype;
  p.sum_dtype = a->sum_dtype;
  p.x = a->x;
  p.skip = a->skip;
  p.skip_numel = a->skip_numel > 0 ? a->skip_numel : 1;
  p.bias = a->bias;
  p.scale = a->scale;
  p.scale_numel = a->scale_numel;
  p.shift = a->shift;
  p.shift_numel = a->shift_numel;
  p.y = a->y;
  p.sum = a->sum;
  p.mean = a->mean;
  p.inv_std = a->inv_std;
  p.rows = a->rows;
  p.cols = a->cols;
  p.epsilon = a->epsilon;
  int64_t grid = a->rows < (1LL << 20) ? a->rows : (1LL << 20);
  return launch_dependent(norm_kernel, dim3(static_cast<unsigned>(grid)), row_threads(a->cols),
                          stream, p);
}
