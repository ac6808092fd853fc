/*
 * The floor under a decode GEMV in a chain (onyx_bench_gemv_chain's "dependent read"
 * anchor): a kernel that does only what any kernel in the GEMV's place must do — read
 * its weight bytes, wait for the kernel before it (griddepcontrol.wait), read that
 * kernel's output (the activations) and write its own N outputs — and no arithmetic.
 * It lets the next kernel in at its start and issues its first loads before the wait,
 * as the GEMV does (ld.global.cs, as the GEMV's: ptxas hoists the wait above .nc loads),
 * so a chain of them costs what the graph, the PDL dependency and the bytes cost
 * together. A device-to-device copy has no dependency and so is not that
 * floor: at 0.5 MB the dependency, not the bytes, is most of a node's time.
 */
#include <stdint.h>

#include <cuda_runtime.h>

namespace {

constexpr int kThreads = 256, kInFlight = 8, kMaxK = 8192;

/* STAGE: x into shared memory and a barrier before use, as the GEMV stages A; SUM: the
 * block's folds summed through shared memory behind a second barrier, as its split-K
 * sum. Both off: the floor itself. */
template <bool STAGE, bool SUM>
__global__ void __launch_bounds__(kThreads)
    dependent_read(const uint4 *w, size_t words, const uint16_t *x, int k, uint16_t *y, int n) {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  const size_t stride = (size_t)gridDim.x * kThreads;
  const size_t me = (size_t)blockIdx.x * kThreads + threadIdx.x;
  uint4 v[kInFlight];
  size_t i = me;
#pragma unroll
  for (int u = 0; u < kInFlight; ++u) {
    const size_t j = i + u * stride;
    v[u] = j < words ? __ldcs(w + j) : make_uint4(0, 0, 0, 0);
  }
  asm volatile("griddepcontrol.wait;" ::: "memory");
  uint32_t fold;
  if constexpr (STAGE) {
    __shared__ uint16_t sx[kMaxK];
    for (int e = threadIdx.x; e < k; e += kThreads) sx[e] = x[e];
    __syncthreads();
    fold = sx[(threadIdx.x * 7u) % (unsigned)k];
  } else {
    fold = x[threadIdx.x % k];
  }
  for (;;) {
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) fold ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    i += kInFlight * stride;
    if (i >= words) break;
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const size_t j = i + u * stride;
      v[u] = j < words ? __ldcs(w + j) : make_uint4(0, 0, 0, 0);
    }
  }
  if constexpr (SUM) {
    __shared__ uint32_t red[kThreads];
    red[threadIdx.x] = fold;
    __syncthreads();
    if (threadIdx.x < 32)
      for (int q = 1; q < kThreads / 32; ++q) fold += red[threadIdx.x + 32 * q];
  }
  /* Every thread's fold reaches memory or could: no load is dead code. */
  if (me < (size_t)n)
    y[me] = (uint16_t)(fold ^ fold >> 16);
  else if (fold == 0x9E3779B9u)
    y[0] = 1;
}

} // namespace

/* One dependent read of `bytes` (a multiple of 16) at w, x of k halves, y of n halves,
 * over `blocks` CTAs (0: two an SM); form bit 0 STAGE (k <= 8192), bit 1 SUM. A
 * programmatic dependent of the kernel before on `stream` (capturable). */
extern "C" cudaError_t onyx_bench_dependent_read(const void *w, size_t bytes, const void *x, int k,
                                                 void *y, int n, int sms, int form, int blocks,
                                                 cudaStream_t stream) {
  if (k > kMaxK && (form & 1)) return cudaErrorInvalidValue;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)(blocks > 0 ? blocks : 2 * (sms > 0 ? sms : 132)));
  cfg.blockDim = dim3(kThreads);
  cfg.stream = stream;
  cudaLaunchAttribute attr[1] = {};
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  void (*const kern[4])(const uint4 *, size_t, const uint16_t *, int, uint16_t *,
                        int) = {dependent_read<false, false>, dependent_read<true, false>,
                                dependent_read<false, true>, dependent_read<true, true>};
  return cudaLaunchKernelEx(&cfg, kern[form & 3], static_cast<const uint4 *>(w), bytes / 16,
                            static_cast<const uint16_t *>(x), k, static_cast<uint16_t *>(y), n);
}
