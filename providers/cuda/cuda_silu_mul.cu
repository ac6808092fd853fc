/*
 * Device side of ai.onyx::SiluMul: Y[r, j] = silu(H[r, j]) · H[r, n + j].
 *
 * Memory-bound (two loads and a store an element), so each thread moves 16 bytes at a
 * time — 8 float16/bfloat16 or 4 float32 elements of each half — when a row's halves
 * start on 16-byte boundaries (n a multiple of the vector and both buffers aligned);
 * otherwise one element a thread. Arithmetic is float32 in the order of the Sigmoid,
 * Mul, Mul kernels it replaces: s = sigmoid(a) (the stable form of the Sigmoid kernel),
 * then (a·s)·b. Launched as a programmatic dependent (cuda_device.cuh).
 */
#include <math.h>

#include "cuda_device.cuh"
#include "cuda_silu.cuh"
#include "cuda_silu_mul.h"

using namespace onyx_cuda;

namespace {

template <class T>
__global__ void silu_mul_scalar(const typename T::raw *h, typename T::raw *y, int64_t n,
                                int64_t total) {
  dependent_wait();
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total;
       e += (int64_t)gridDim.x * blockDim.x) {
    int64_t row = e / n, j = e - row * n;
    const typename T::raw *r = h + row * 2 * n;
    T::store(y, e, silu_mul(T::load(r, j), T::load(r, n + j)));
  }
}

/* VEC elements a thread, loaded and stored as one uint4 each. */
template <class T, int VEC>
__global__ void silu_mul_vec(const typename T::raw *h, typename T::raw *y, int64_t n,
                             int64_t vectors) {
  typedef typename T::raw raw;
  static_assert(sizeof(raw) * VEC == sizeof(uint4), "one 16-byte vector");
  dependent_wait();
  const int64_t per_row = n / VEC;
  for (int64_t v = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; v < vectors;
       v += (int64_t)gridDim.x * blockDim.x) {
    int64_t row = v / per_row, col = (v - row * per_row) * VEC;
    const raw *r = h + row * 2 * n + col;
    uint4 va = __ldg(reinterpret_cast<const uint4 *>(r));
    uint4 vb = __ldg(reinterpret_cast<const uint4 *>(r + n));
    uint4 vy;
    const raw *a = reinterpret_cast<const raw *>(&va);
    const raw *b = reinterpret_cast<const raw *>(&vb);
    raw *out = reinterpret_cast<raw *>(&vy);
#pragma unroll
    for (int i = 0; i < VEC; ++i) T::store(out, i, silu_mul(T::load(a, i), T::load(b, i)));
    *reinterpret_cast<uint4 *>(y + row * n + col) = vy;
  }
}

template <class T>
cudaError_t launch(const void *hp, void *yp, int64_t rows, int64_t n, cudaStream_t stream) {
  typedef typename T::raw raw;
  constexpr int VEC = static_cast<int>(sizeof(uint4) / sizeof(raw));
  const raw *h = static_cast<const raw *>(hp);
  raw *y = static_cast<raw *>(yp);
  bool aligned = n % VEC == 0 && reinterpret_cast<uintptr_t>(h) % sizeof(uint4) == 0 &&
                 reinterpret_cast<uintptr_t>(y) % sizeof(uint4) == 0;
  if (aligned) {
    int64_t vectors = rows * (n / VEC);
    return launch_dependent(silu_mul_vec<T, VEC>, dim3(grid_for(vectors, 256)), 256, stream, h, y,
                            n, vectors);
  }
  int64_t total = rows * n;
  return launch_dependent(silu_mul_scalar<T>, dim3(grid_for(total, 256)), 256, stream, h, y, n,
                          total);
}

} // namespace

extern "C" cudaError_t onyx__cuda_launch_silu_mul(uint32_t dtype, const void *h, void *y,
                                                  int64_t rows, int64_t n, cudaStream_t stream) {
  if (rows == 0 || n == 0) return cudaSuccess;
  switch (dtype) {
  case ONYX_DTYPE_FLOAT32:
    return launch<f32>(h, y, rows, n, stream);
  case ONYX_DTYPE_FLOAT16:
    return launch<f16>(h, y, rows, n, stream);
  case ONYX_DTYPE_BFLOAT16:
    return launch<bf16>(h, y, rows, n, stream);
  default:
    return cudaErrorInvalidValue;
  }
}
