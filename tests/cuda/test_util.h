/* The visible skip of the CUDA tests: whether a device can be used. */
#ifndef ONYX_TESTS_CUDA_TEST_UTIL_H
#define ONYX_TESTS_CUDA_TEST_UTIL_H

#include <stdbool.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

#include "test_util_host.h"

/* True when a CUDA device can be used; otherwise prints the visible skip line
 * ("skipped: no CUDA device (...)"). */
static inline bool cuda_device_present(const char *what) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e == cudaSuccess && n > 0) return true;
  printf("skipped: no CUDA device (%s: cudaGetDeviceCount: %s)\n", what,
         e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
  fflush(stdout);
  (void)cudaGetLastError();
  return false;
}

#endif /* ONYX_TESTS_CUDA_TEST_UTIL_H */
