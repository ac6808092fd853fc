/*
 * Bridge for providers/cuda/provider.c, which lists ONYX_CUDA_ATTENTION_KERNELS in its
 * kernel array (and ONYX_CUDA_ATTENTION_DEFS among its v3 definitions) when this header
 * exists. The tables themselves are declared in
 * cuda_attention_kernels.h.
 */
#ifndef ONYX_CUDA_ATTENTION_BRIDGE_H
#define ONYX_CUDA_ATTENTION_BRIDGE_H

#include "cuda_attention_kernels.h"

#define ONYX_CUDA_ATTENTION_KERNELS &onyx_cuda_gqa_kernel, &onyx_cuda_attention_kernel
/* Their v3 definitions, which the factory registers in place of those tables. */
#define ONYX_CUDA_ATTENTION_DEFS &onyx_cuda_gqa_def, &onyx_cuda_attention_def

#endif /* ONYX_CUDA_ATTENTION_BRIDGE_H */
