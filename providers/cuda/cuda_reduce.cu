/*
 * Device side of ReduceSum over the host's collapsed plan (onyx__cuda_reduce_args).
 *
 * One thread block per output element: its threads stride over the element's reduced
 * elements, each keeping a partial sum, and the block combines the partials with warp
 * shuffles and one shared-memory step. When each output sums only a few elements (a
 * short reduced axis and many outputs) a block would leave most of its threads idle,
 * so one thread per output element does the whole sum instead.
 *
 * Offsets are computed by decomposing an index over at most ONYX_MAX_RANK axes; the
 * loops are unrolled to that bound so the plan's arrays stay in the kernel's parameter
 * space (no local-memory copy), and a single reduced axis — what collapsing leaves for
 * any contiguous axes set — takes a plain strided loop.
 */
#include "cuda_device.cuh"

using namespace onyx_cuda;

namespace {

/* Integer element types: 64-bit accumulation in unsigned arithmetic, so an overflow
 * wraps (as the CPU provider's does) instead of being undefined; the result is stored
 * as its low bits. */
struct i32 {
  typedef int32_t raw;
  static __device__ __forceinline__ unsigned long long load(const raw *p, int64_t i) {
    return static_cast<unsigned long long>(static_cast<long long>(p[i]));
  }
  static __device__ __forceinline__ void store(raw *p, int64_t i, unsigned long long v) {
    p[i] = static_cast<int32_t>(static_cast<uint32_t>(v));
  }
};
struct i64 {
  typedef int64_t raw;
  static __device__ __forceinline__ unsigned long long load(const raw *p, int64_t i) {
    return static_cast<unsigned long long>(p[i]);
  }
  static __device__ __forceinline__ void store(raw *p, int64_t i, unsigned long long v) {
    p[i] = static_cast<int64_t>(v);
  }
};

/* The accumulator of an element type: float for the float types (f32, f16, bf16 load
 * as float), 64 bits for the integers. */
template <class T> struct acc_of { typedef float type; };
template <> struct acc_of<i32> { typedef unsigned long long type; };
template <> struct acc_of<i64> { typedef unsigned long long type; };

/* Threads per block of each kernel; __launch_bounds__ holds the compiler to them, so a
 * launch never fails for want of registers. */
constexpr int kBlockThreadsMax = 512;
constexpr int kThreadsPerBlock = 256;
/* Largest sum one thread does alone. */
constexpr int64_t kThreadCountMax = 32;

/* The element offset of index e decomposed row-major over dims[0..rank). */
static __device__ __forceinline__ int64_t offset_of(int64_t e, uint32_t rank, const int64_t *dims,
                                                    const int64_t *strides) {
  int64_t off = 0;
#pragma unroll
  for (int d = ONYX_MAX_RANK - 1; d >= 0; --d) {
    if (static_cast<uint32_t>(d) < rank) {
      int64_t i = e % dims[d];
      e /= dims[d];
      off += i * strides[d];
    }
  }
  return off;
}

/* Block-wide sum of one value per thread (blockDim.x a multiple of 32). */
template <class A> static __device__ __forceinline__ A block_sum_t(A v, A *shared32) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads(); /* shared32 may still be read by the previous output's reduction */
  if (lane == 0) shared32[warp] = v;
  __syncthreads();
  int warps = (blockDim.x + 31) >> 5;
  v = lane < warps ? shared32[lane] : A(0);
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <class T>
__global__ void __launch_bounds__(kBlockThreadsMax) reduce_blocks(const onyx__cuda_reduce_args a) {
  typedef typename acc_of<T>::type A;
  __shared__ A scratch[32];
  const typename T::raw *x = static_cast<const typename T::raw *>(a.x);
  typename T::raw *y = static_cast<typename T::raw *>(a.y);
  /* The loop bounds are the same for every thread of the block, so all of them reach
   * the barriers in block_sum_t together. */
  for (int64_t o = blockIdx.x; o < a.out_numel; o += gridDim.x) {
    const int64_t base = offset_of(o, a.kept_rank, a.kept_dims, a.kept_strides);
    A sum = A(0);
    if (a.red_rank == 1) {
      const int64_t stride = a.red_strides[0];
      for (int64_t r = threadIdx.x; r < a.count; r += blockDim.x)
        sum += T::load(x, base + r * stride);
    } else {
      for (int64_t r = threadIdx.x; r < a.count; r += blockDim.x)
        sum += T::load(x, base + offset_of(r, a.red_rank, a.red_dims, a.red_strides));
    }
    sum = block_sum_t<A>(sum, scratch);
    if (threadIdx.x == 0) T::store(y, o, sum);
  }
}

template <class T>
__global__ void __launch_bounds__(kThreadsPerBlock) reduce_threads(const onyx__cuda_reduce_args a) {
  typedef typename acc_of<T>::type A;
  const typename T::raw *x = static_cast<const typename T::raw *>(a.x);
  typename T::raw *y = static_cast<typename T::raw *>(a.y);
  for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < a.out_numel;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t base = offset_of(o, a.kept_rank, a.kept_dims, a.kept_strides);
    A sum = A(0);
    for (int64_t r = 0; r < a.count; ++r)
      sum += T::load(x, base + offset_of(r, a.red_rank, a.red_dims, a.red_strides));
    T::store(y, o, sum);
  }
}

template <class T> cudaError_t launch_t(const onyx__cuda_reduce_args *a, cudaStream_t stream) {
  if (a->count <= kThreadCountMax) {
    reduce_threads<T>
        <<<grid_for(a->out_numel, kThreadsPerBlock), kThreadsPerBlock, 0, stream>>>(*a);
  } else {
    int threads = row_threads(a->count);
    if (threads > kBlockThreadsMax) threads = kBlockThreadsMax;
    /* One block per output, up to a cap past which blocks loop over outputs. */
    const int64_t max_blocks = 65535LL * 16;
    unsigned blocks = static_cast<unsigned>(a->out_numel < max_blocks ? a->out_numel : max_blocks);
    reduce_blocks<T><<<blocks, threads, 0, stream>>>(*a);
  }
  return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t onyx__cuda_launch_reduce_sum(const onyx__cuda_reduce_args *a,
                                                    cudaStream_t stream) {
  if (a == NULL || a->out_numel < 0 || a->count < 0 || a->kept_rank > ONYX_MAX_RANK ||
      a->red_rank > ONYX_MAX_RANK)
    return cudaErrorInvalidValue;
  if (a->out_numel == 0) return cudaSuccess;
  switch (a->dtype) {
  case ONYX_DTYPE_FLOAT32:
    return launch_t<f32>(a, stream);
  case ONYX_DTYPE_FLOAT16:
    return launch_t<f16>(a, stream);
  case ONYX_DTYPE_BFLOAT16:
    return launch_t<bf16>(a, stream);
  case ONYX_DTYPE_INT32:
    return launch_t<i32>(a, stream);
  case ONYX_DTYPE_INT64:
    return launch_t<i64>(a, stream);
  default:
    return cudaErrorInvalidValue;
  }
}
