/*
 * The CUDA provider's attention kernels: tables the provider lists in its kernel array.
 *
 * Private to libonyx_cuda.so (nothing here is exported). provider.c includes this
 * header and adds the tables below to its kernel list; the sources that define them
 * are named by ONYX_CUDA_ATTENTION_SOURCES in sources.cmake beside this file.
 *
 *   onyx_cuda_gqa_kernel        com.microsoft GroupQueryAttention, since 1
 *   onyx_cuda_attention_kernel  ONNX Attention, opsets 23 and 24
 *
 * Both take float16 and bfloat16 on the tensor-core route (head sizes 64, 80, 96, 128,
 * 256; on an sm_90 device, prefill with head size 64 or 128 and no extra features runs
 * the Hopper kernel) and float32 (and other head sizes) on a reference route whose
 * workspace holds a scores region. Kernels run on ctx->stream (a cudaStream_t); inputs must be CUDA
 * tensors, except GroupQueryAttention's total_sequence_length, which may be on the
 * host. create() ignores the provider state. Both are stateless across calls apart
 * from their attributes, so one state may serve calls on one stream at a time.
 */
#ifndef ONYX_CUDA_ATTENTION_KERNELS_H
#define ONYX_CUDA_ATTENTION_KERNELS_H

#include "onyx_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const onyx_kernel_table onyx_cuda_gqa_kernel;
extern const onyx_kernel_table onyx_cuda_attention_kernel;

/* The same two kernels as v3 definitions (abi/onyx_factory.h), whose infer, workspace,
 * create and supports give their reasons through the core's sink. The provider's
 * factory registers these in place of the tables (onyx__pc_add_kernels); its v2 entry
 * and the tests that drive a table keep the tables. */
extern const onyx_kernel_def onyx_cuda_gqa_def;
extern const onyx_kernel_def onyx_cuda_attention_def;

#ifdef __cplusplus
}
#endif

#endif /* ONYX_CUDA_ATTENTION_KERNELS_H */
