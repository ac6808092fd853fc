/*
 * Device-side helpers shared by the provider's .cu files: loading and storing the
 * float dtypes as float32, walking a collapsed strided plan, and grid sizing.
 *
 * 16-bit floats travel as raw uint16 bits (the ABI has no half type) and are widened
 * to float32 for arithmetic, rounded to nearest even on the way back.
 */
#ifndef ONYX_CUDA_DEVICE_CUH
#define ONYX_CUDA_DEVICE_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "cuda_impl.h"

namespace onyx_cuda {

/* Element types by ONNX dtype. */
struct f32 {
  typedef float raw;
  static __device__ __forceinline__ float load(const raw *p, int64_t i) { return p[i]; }
  static __device__ __forceinline__ void store(raw *p, int64_t i, float v) { p[i] = v; }
};
struct f16 {
  typedef __half raw;
  static __device__ __forceinline__ float load(const raw *p, int64_t i) {
    return __half2float(p[i]);
  }
  static __device__ __forceinline__ void store(raw *p, int64_t i, float v) {
    p[i] = __float2half_rn(v);
  }
};
struct bf16 {
  typedef __nv_bfloat16 raw;
  static __device__ __forceinline__ float load(const raw *p, int64_t i) {
    return __bfloat162float(p[i]);
  }
  static __device__ __forceinline__ void store(raw *p, int64_t i, float v) {
    p[i] = __float2bfloat16_rn(v);
  }
};

/* A float dtype chosen at run time (warp-uniform, so the branch costs little). Used
 * where one kernel mixes dtypes (a norm's scale may differ from its input). */
static __device__ __forceinline__ float load_any(uint32_t dtype, const void *p, int64_t i) {
  switch (dtype) {
  case ONYX_DTYPE_FLOAT16:
    return __half2float(static_cast<const __half *>(p)[i]);
  case ONYX_DTYPE_BFLOAT16:
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(p)[i]);
  case ONYX_DTYPE_INT32:
    return static_cast<float>(static_cast<const int32_t *>(p)[i]);
  case ONYX_DTYPE_INT64:
    return static_cast<float>(static_cast<const int64_t *>(p)[i]);
  case ONYX_DTYPE_FLOAT64:
    return static_cast<float>(static_cast<const double *>(p)[i]);
  default:
    return static_cast<const float *>(p)[i];
  }
}

static __device__ __forceinline__ void store_any(uint32_t dtype, void *p, int64_t i, float v) {
  switch (dtype) {
  case ONYX_DTYPE_FLOAT16:
    static_cast<__half *>(p)[i] = __float2half_rn(v);
    break;
  case ONYX_DTYPE_BFLOAT16:
    static_cast<__nv_bfloat16 *>(p)[i] = __float2bfloat16_rn(v);
    break;
  default:
    static_cast<float *>(p)[i] = v;
    break;
  }
}

/* The walk's dims and strides, by value in the kernel's parameter space. */
struct walk {
  int32_t rank;
  int64_t dims[ONYX_MAX_RANK];
  int64_t offset[ONYX__CUDA_BCAST_MAX_INPUTS];
  int64_t strides[ONYX__CUDA_BCAST_MAX_INPUTS][ONYX_MAX_RANK];
};

static inline walk to_device_walk(const onyx__cuda_walk *w) {
  walk d;
  d.rank = static_cast<int32_t>(w->rank);
  for (int i = 0; i < ONYX_MAX_RANK; ++i) {
    d.dims[i] = w->dims[i];
    for (int k = 0; k < ONYX__CUDA_BCAST_MAX_INPUTS; ++k) d.strides[k][i] = w->strides[k][i];
  }
  for (int k = 0; k < ONYX__CUDA_BCAST_MAX_INPUTS; ++k) d.offset[k] = w->offset[k];
  return d;
}

/* Offsets of N inputs for output element e. */
template <int N>
static __device__ __forceinline__ void walk_offsets(const walk &w, int64_t e, int64_t *off) {
  for (int k = 0; k < N; ++k) off[k] = w.offset[k];
  if (w.rank == 1) {
    for (int k = 0; k < N; ++k) off[k] += e * w.strides[k][0];
    return;
  }
  for (int d = w.rank - 1; d >= 0; --d) {
    int64_t i = e % w.dims[d];
    e /= w.dims[d];
    for (int k = 0; k < N; ++k) off[k] += i * w.strides[k][d];
  }
}

/*
 * Programmatic dependent launch (Hopper): a kernel launched through launch_dependent
 * may be scheduled while the kernel before it in the stream (or the device graph) is
 * still finishing, which hides most of the launch gap between the many small kernels
 * of a decode step. Such a kernel must call dependent_wait() before it touches global
 * memory: it returns once the previous grid has completed and its writes are visible.
 * Off (plain launches) when onyx__cuda_pdl is false (option pdl = false).
 */
static __device__ __forceinline__ void dependent_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* Lets the next kernel (a programmatic dependent) be scheduled now, before this one
 * ends: for kernels whose dependents only read constants before their own wait. */
static __device__ __forceinline__ void launch_dependents_now() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* launch_dependent with `smem` bytes of dynamic shared memory. */
template <class... P, class... A>
static inline cudaError_t launch_dependent_smem(void (*kernel)(P...), dim3 grid, unsigned threads,
                                                size_t smem, cudaStream_t stream, A... args) {
  if (!onyx__cuda_pdl) {
    kernel<<<grid, threads, smem, stream>>>(args...);
    return cudaGetLastError();
  }
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, kernel, args...);
}

template <class... P, class... A>
static inline cudaError_t launch_dependent(void (*kernel)(P...), dim3 grid, unsigned threads,
                                           cudaStream_t stream, A... args) {
  return launch_dependent_smem(kernel, grid, threads, 0, stream, args...);
}

/* A grid-stride launch: enough blocks to fill the device several times over, capped
 * so that each thread handles a few elements of a large tensor. */
static inline unsigned grid_for(int64_t n, int threads) {
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks > 65535LL * 8) blocks = 65535LL * 8;
  if (blocks < 1) blocks = 1;
  return static_cast<unsigned>(blocks);
}

/* Same-size raw element types for moving bytes. */
template <size_t S> struct bytes_t;
template <> struct bytes_t<1> { typedef uint8_t type; };
template <> struct bytes_t<2> { typedef uint16_t type; };
template <> struct bytes_t<4> { typedef uint32_t type; };
template <> struct bytes_t<8> { typedef uint64_t type; };

/* Block-wide sum of one float per thread (blockDim.x a multiple of 32, <= 1024). */
static __device__ __forceinline__ float block_sum(float v, float *shared32) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads(); /* shared32 may still be read from a previous reduction */
  if (lane == 0) shared32[warp] = v;
  __syncthreads();
  int warps = (blockDim.x + 31) >> 5;
  v = lane < warps ? shared32[lane] : 0.0f;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

static __device__ __forceinline__ float block_max(float v, float *shared32) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) shared32[warp] = v;
  __syncthreads();
  int warps = (blockDim.x + 31) >> 5;
  v = lane < warps ? shared32[lane] : -INFINITY;
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

/* Threads per block for a row of n elements: a multiple of 32 up to 1024. */
static inline int row_threads(int64_t n) {
  int t = 32;
  while (t < 1024 && t < n) t <<= 1;
  return t;
}

} // namespace onyx_cuda

#endif /* ONYX_CUDA_DEVICE_CUH */
