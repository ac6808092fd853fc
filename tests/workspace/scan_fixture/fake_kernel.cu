// Fixture for the hidden-pool scanner: never compiled.
#include <cuda_runtime.h>

struct Buffer;
void *operator new(unsigned long n);

void fake_launch(int n, cudaStream_t stream) {
  int *renew = nullptr;
  float *host = new float[n];
  float *dev = nullptr; cudaMallocAsync(&dev, n * sizeof(float), stream);
  (void)renew;
  delete[] host;
}
