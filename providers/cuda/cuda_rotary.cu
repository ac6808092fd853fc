/*
 * Device side of RotaryEmbedding: one thread per output element. Element j of a
 * head reads its partner (the other half, or the other member of its even/odd pair
 * when interleaved) and the (cos, sin) of its pair; elements past rotary_dim copy.
 */
#include "cuda_device.cuh"

using namespace onyx_cuda;

namespace {

struct rotary_params {
  const void *x;
  void *y;
  const void *cos, *sin;
  const int64_t *pos;
  bool pos_scalar, bnsh, interleaved;
  int64_t rows, batch, heads, seq, head_size, rot;
};

template <class T> __global__ void rotary_kernel(rotary_params p, int64_t n) {
  const typename T::raw *x = static_cast<const typename T::raw *>(p.x);
  typename T::raw *y = static_cast<typename T::raw *>(p.y);
  const typename T::raw *ct = static_cast<const typename T::raw *>(p.cos);
  const typename T::raw *st = static_cast<const typename T::raw *>(p.sin);
  int64_t half = p.rot / 2;
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n;
       e += (int64_t)gridDim.x * blockDim.x) {
    int64_t j = e % p.head_size;
    int64_t t = e / p.head_size; /* the head row: (b, n, s) or (b, s, n) */
    if (j >= p.rot) {
      y[e] = x[e];
      continue;
    }
    int64_t b, s;
    if (p.bnsh) {
      s = t % p.seq;
      b = t / (p.seq * p.heads);
    } else {
      s = (t / p.heads) % p.seq;
      b = t / (p.heads * p.seq);
    }
    int64_t row;
    if (p.pos == nullptr)
      row = b * p.seq + s;
    else if (p.pos_scalar)
      row = p.pos[0] + s;
    else
      row = p.pos[b * p.seq + s];
    row = row < 0 ? 0 : (row >= p.rows ? p.rows - 1 : row);
    int64_t head = e - j;
    int64_t i;    /* the pair */
    float x1, x2; /* the pair's first and second member */
    bool first;
    if (p.interleaved) {
      i = j / 2;
      first = (j & 1) == 0;
      x1 = T::load(x, head + 2 * i);
      x2 = T::load(x, head + 2 * i + 1);
    } else {
      first = j < half;
      i = first ? j : j - half;
      x1 = T::load(x, head + i);
      x2 = T::load(x, head + i + half);
    }
    float c = T::load(ct, row * half + i), sn = T::load(st, row * half + i);
    T::store(y, e, first ? c * x1 - sn * x2 : sn * x1 + c * x2);
  }
}

} // namespace

extern "C" cudaError_t onyx__cuda_launch_rotary(const onyx__cuda_rotary_args *a,
                                                cudaStream_t stream) {
  int64_t n = a->batch * a->heads * a->seq * a->head_size;
  if (n == 0) return cudaSuccess;
  rotary_params p;
  p.x = a->x;
  p.y = a->y;
  p.cos = a->cos;
  p.sin = a->sin;
  p.pos = a->pos;
  p.pos_scalar = a->pos_scalar;
  p.bnsh = a->bnsh;
  p.interleaved = a->interleaved;
  p.rows = a->rows;
  p.batch = a->batch;
  p.heads = a->heads;
  p.seq = a->seq;
  p.head_size = a->head_size;
  p.rot = a->rot;
  unsigned grid = grid_for(n, 256);
  switch (a->dtype) {
  case ONYX_DTYPE_FLOAT16:
    rotary_kernel<f16><<<grid, 256, 0, stream>>>(p, n);
    break;
  case ONYX_DTYPE_BFLOAT16:
    rotary_kernel<bf16><<<grid, 256, 0, stream>>>(p, n);
    break;
  case ONYX_DTYPE_FLOAT32:
    rotary_kernel<f32><<<grid, 256, 0, stream>>>(p, n);
    break;
  default:
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}
