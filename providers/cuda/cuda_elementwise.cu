/*
 * Device side of the elementwise ops: one grid-stride kernel per (op, dtype) over a
 * collapsed broadcast walk. 16-bit inputs are computed in float32; int32 and int64
 * exactly in their own type (never through float); Equal also compares bools.
 */
#include <math.h>

#include "cuda_device.cuh"

using namespace onyx_cuda;

namespace {

template <int OP> __device__ __forceinline__ float binary_op(float a, float b) {
  switch (OP) {
  case ONYX__CUDA_ADD:
    return a + b;
  case ONYX__CUDA_SUB:
    return a - b;
  case ONYX__CUDA_MUL:
    return a * b;
  case ONYX__CUDA_DIV:
    return a / b;
  default:
    return powf(a, b);
  }
}

template <class T, int OP>
__global__ void binary_kernel(const typename T::raw *a, const void *b, uint32_t b_dtype,
                              typename T::raw *y, walk w, int64_t n) {
  dependent_wait();
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
       e += (int64_t)gridDim.x * blockDim.x) {
    int64_t off[2];
    walk_offsets<2>(w, e, off);
    float x = T::load(a, off[0]);
    /* Pow's exponent may have another type; the other ops' b is a T. */
    float z = OP == ONYX__CUDA_POW ? load_any(b_dtype, b, off[1])
                                   : T::load(static_cast<const typename T::raw *>(b), off[1]);
    T::store(y, e, binary_op<OP>(x, z));
  }
}

/* Integer arithmetic, exact in the operand type. Add, Sub and Mul wrap around: they
 * run in the unsigned type of the same width, where overflow is defined, and the
 * result is converted back (modular in CUDA). Div truncates toward zero, like C++ `/`
 * in ONNX Runtime's CPU kernel. Division by zero is undefined there (the CPU traps);
 * here it gives 0, so that a bad input cannot fault the device. The one overflowing
 * quotient, MIN / -1, wraps to MIN like the other ops (computed as 0 - a). */
template <class I> struct unsigned_of;
template <> struct unsigned_of<int32_t> { typedef uint32_t type; };
template <> struct unsigned_of<int64_t> { typedef uint64_t type; };

template <class I, int OP> __device__ __forceinline__ I int_binary_op(I a, I b) {
  typedef typename unsigned_of<I>::type U;
  switch (OP) {
  case ONYX__CUDA_ADD:
    return static_cast<I>(static_cast<U>(a) + static_cast<U>(b));
  case ONYX__CUDA_SUB:
    return static_cast<I>(static_cast<U>(a) - static_cast<U>(b));
  case ONYX__CUDA_MUL:
    return static_cast<I>(static_cast<U>(a) * static_cast<U>(b));
  default: /* ONYX__CUDA_DIV */
    if (b == 0) return 0;
    if (b == -1) return static_cast<I>(U(0) - static_cast<U>(a));
    return a / b;
  }
}

template <class I, int OP>
__global__ void int_binary_kernel(const I *a, const I *b, I *y, walk w, int64_t n) {
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
       e += (int64_t)gridDim.x * blockDim.x) {
    int64_t off[2];
    walk_offsets<2>(w, e, off);
    y[e] = int_binary_op<I, OP>(a[off[0]], b[off[1]]);
  }
}

/* Equal on raw elements: integers compare exactly; a bool byte counts as true when
 * non-zero, so that any non-zero byte equals any other. */
template <class E, bool IS_BOOL>
__global__ void equal_raw_kernel(const E *a, const E *b, uint8_t *y, walk w, int64_t n) {
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
       e += (int64_t)gridDim.x * blockDim.x) {
    int64_t off[2];
    walk_offsets<2>(w, e, off);
    E x = a[off[0]], z = b[off[1]];
    y[e] = (IS_BOOL ? (x != 0) == (z != 0) : x == z) ? 1 : 0;
  }
}

template <class T>
__global__ void equal_kernel(const typename T::raw *a, const typename T::raw *b, uint8_t *y, walk w,
                             int64_t n) {
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
       e += (int64_t)gridDim.x * blockDim.x) {
    int64_t off[2];
    walk_offsets<2>(w, e, off);
    y[e] = T::load(a, off[0]) == T::load(b, off[1]) ? 1 : 0;
  }
}

template <int OP> __device__ __forceinline__ float unary_op(float x) {
  switch (OP) {
  case ONYX__CUDA_NEG:
    return -x;
  case ONYX__CUDA_SQRT:
    return sqrtf(x);
  case ONYX__CUDA_SIGMOID:
    /* Stable on both tails: exp of a non-positive number only. */
    if (x >= 0.0f)
      return 1.0f / (1.0f + expf(-x));
    else {
      float z = expf(x);
      return z / (1.0f + z);
    }
  case ONYX__CUDA_TANH:
    return tanhf(x);
  case ONYX__CUDA_RELU:
    return x > 0.0f ? x : (x == x ? 0.0f : x); /* NaN stays NaN */
  default:
    return erff(x);
  }
}

template <class T, int OP>
__global__ void unary_kernel(const typename T::raw *x, typename T::raw *y, int64_t n) {
  dependent_wait();
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
       e += (int64_t)gridDim.x * blockDim.x)
    T::store(y, e, unary_op<OP>(T::load(x, e)));
}

template <size_t S>
__global__ void where_kernel(const uint8_t *cond, const void *x, const void *y, void *out, walk w,
                             int64_t n) {
  typedef typename bytes_t<S>::type E;
  const E *xs = static_cast<const E *>(x);
  const E *ys = static_cast<const E *>(y);
  E *o = static_cast<E *>(out);
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
       e += (int64_t)gridDim.x * blockDim.x) {
    int64_t off[3];
    walk_offsets<3>(w, e, off);
    o[e] = cond[off[0]] ? xs[off[1]] : ys[off[2]];
  }
}

template <class T>
cudaError_t launch_binary_t(onyx__cuda_binary_op op, uint32_t b_dtype, const void *a, const void *b,
                            void *y, const walk &w, int64_t n, cudaStream_t stream) {
  const int threads = 256;
  unsigned grid = grid_for(n, threads);
  const typename T::raw *ta = static_cast<const typename T::raw *>(a);
  typename T::raw *ty = static_cast<typename T::raw *>(y);
  switch (op) {
  case ONYX__CUDA_ADD:
    return launch_dependent(binary_kernel<T, ONYX__CUDA_ADD>, grid, threads, stream, ta, b, b_dtype,
                            ty, w, n);
  case ONYX__CUDA_SUB:
    return launch_dependent(binary_kernel<T, ONYX__CUDA_SUB>, grid, threads, stream, ta, b, b_dtype,
                            ty, w, n);
  case ONYX__CUDA_MUL:
    return launch_dependent(binary_kernel<T, ONYX__CUDA_MUL>, grid, threads, stream, ta, b, b_dtype,
                            ty, w, n);
  case ONYX__CUDA_DIV:
    return launch_dependent(binary_kernel<T, ONYX__CUDA_DIV>, grid, threads, stream, ta, b, b_dtype,
                            ty, w, n);
  case ONYX__CUDA_POW:
    return launch_dependent(binary_kernel<T, ONYX__CUDA_POW>, grid, threads, stream, ta, b, b_dtype,
                            ty, w, n);
  case ONYX__CUDA_EQUAL:
    equal_kernel<T><<<grid, threads, 0, stream>>>(ta, static_cast<const typename T::raw *>(b),
                                                  static_cast<uint8_t *>(y), w, n);
    break;
  }
  return cudaGetLastError();
}

template <class I>
cudaError_t launch_binary_int(onyx__cuda_binary_op op, const void *a, const void *b, void *y,
                              const walk &w, int64_t n, cudaStream_t stream) {
  const int threads = 256;
  unsigned grid = grid_for(n, threads);
  const I *ta = static_cast<const I *>(a);
  const I *tb = static_cast<const I *>(b);
  I *ty = static_cast<I *>(y);
  switch (op) {
  case ONYX__CUDA_ADD:
    int_binary_kernel<I, ONYX__CUDA_ADD><<<grid, threads, 0, stream>>>(ta, tb, ty, w, n);
    break;
  case ONYX__CUDA_SUB:
    int_binary_kernel<I, ONYX__CUDA_SUB><<<grid, threads, 0, stream>>>(ta, tb, ty, w, n);
    break;
  case ONYX__CUDA_MUL:
    int_binary_kernel<I, ONYX__CUDA_MUL><<<grid, threads, 0, stream>>>(ta, tb, ty, w, n);
    break;
  case ONYX__CUDA_DIV:
    int_binary_kernel<I, ONYX__CUDA_DIV><<<grid, threads, 0, stream>>>(ta, tb, ty, w, n);
    break;
  case ONYX__CUDA_EQUAL:
    equal_raw_kernel<I, false>
        <<<grid, threads, 0, stream>>>(ta, tb, static_cast<uint8_t *>(y), w, n);
    break;
  default: /* Pow takes a float base only */
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

template <class T>
cudaError_t launch_unary_t(onyx__cuda_unary_op op, const void *x, void *y, int64_t n,
                           cudaStream_t stream) {
  const int threads = 256;
  unsigned grid = grid_for(n, threads);
  const typename T::raw *tx = static_cast<const typename T::raw *>(x);
  typename T::raw *ty = static_cast<typename T::raw *>(y);
  switch (op) {
  case ONYX__CUDA_NEG:
    return launch_dependent(unary_kernel<T, ONYX__CUDA_NEG>, grid, threads, stream, tx, ty, n);
  case ONYX__CUDA_SQRT:
    return launch_dependent(unary_kernel<T, ONYX__CUDA_SQRT>, grid, threads, stream, tx, ty, n);
  case ONYX__CUDA_SIGMOID:
    return launch_dependent(unary_kernel<T, ONYX__CUDA_SIGMOID>, grid, threads, stream, tx, ty, n);
  case ONYX__CUDA_TANH:
    return launch_dependent(unary_kernel<T, ONYX__CUDA_TANH>, grid, threads, stream, tx, ty, n);
  case ONYX__CUDA_RELU:
    return launch_dependent(unary_kernel<T, ONYX__CUDA_RELU>, grid, threads, stream, tx, ty, n);
  case ONYX__CUDA_ERF:
    return launch_dependent(unary_kernel<T, ONYX__CUDA_ERF>, grid, threads, stream, tx, ty, n);
  }
  return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t onyx__cuda_launch_binary(onyx__cuda_binary_op op, uint32_t dtype,
                                                uint32_t b_dtype, const void *a, const void *b,
                                                void *y, const onyx__cuda_walk *w,
                                                cudaStream_t stream) {
  if (w->numel == 0) return cudaSuccess;
  walk dw = to_device_walk(w);
  switch (dtype) {
  case ONYX_DTYPE_FLOAT16:
    return launch_binary_t<f16>(op, b_dtype, a, b, y, dw, w->numel, stream);
  case ONYX_DTYPE_BFLOAT16:
    return launch_binary_t<bf16>(op, b_dtype, a, b, y, dw, w->numel, stream);
  case ONYX_DTYPE_FLOAT32:
    return launch_binary_t<f32>(op, b_dtype, a, b, y, dw, w->numel, stream);
  case ONYX_DTYPE_INT32:
    if (b_dtype != dtype) return cudaErrorInvalidValue;
    return launch_binary_int<int32_t>(op, a, b, y, dw, w->numel, stream);
  case ONYX_DTYPE_INT64:
    if (b_dtype != dtype) return cudaErrorInvalidValue;
    return launch_binary_int<int64_t>(op, a, b, y, dw, w->numel, stream);
  case ONYX_DTYPE_BOOL:
    if (b_dtype != dtype || op != ONYX__CUDA_EQUAL) return cudaErrorInvalidValue;
    equal_raw_kernel<uint8_t, true><<<grid_for(w->numel, 256), 256, 0, stream>>>(
        static_cast<const uint8_t *>(a), static_cast<const uint8_t *>(b), static_cast<uint8_t *>(y),
        dw, w->numel);
    return cudaGetLastError();
  default:
    return cudaErrorInvalidValue;
  }
}

extern "C" cudaError_t onyx__cuda_launch_unary(onyx__cuda_unary_op op, uint32_t dtype,
                                               const void *x, void *y, int64_t n,
                                               cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (dtype) {
  case ONYX_DTYPE_FLOAT16:
    return launch_unary_t<f16>(op, x, y, n, stream);
  case ONYX_DTYPE_BFLOAT16:
    return launch_unary_t<bf16>(op, x, y, n, stream);
  case ONYX_DTYPE_FLOAT32:
    return launch_unary_t<f32>(op, x, y, n, stream);
  default:
    return cudaErrorInvalidValue;
  }
}

extern "C" cudaError_t onyx__cuda_launch_where(size_t elem_size, const void *cond, const void *x,
                                               const void *y, void *out, const onyx__cuda_walk *w,
                                               cudaStream_t stream) {
  if (w->numel == 0) return cudaSuccess;
  walk dw = to_device_walk(w);
  const int threads = 256;
  unsigned grid = grid_for(w->numel, threads);
  const uint8_t *c = static_cast<const uint8_t *>(cond);
  switch (elem_size) {
  case 1:
    where_kernel<1><<<grid, threads, 0, stream>>>(c, x, y, out, dw, w->numel);
    break;
  case 2:
    where_kernel<2><<<grid, threads, 0, stream>>>(c, x, y, out, dw, w->numel);
    break;
  case 4:
    where_kernel<4><<<grid, threads, 0, stream>>>(c, x, y, out, dw, w->numel);
    break;
  case 8:
    where_kernel<8><<<grid, threads, 0, stream>>>(c, x, y, out, dw, w->numel);
    break;
  default:
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}
