/*
 * The CPU provider's attention kernels: tables the provider lists in its kernel array,
 * two of them also as v3 definitions.
 *
 * Private to libonyx_cpu.so (nothing here is exported). provider.c includes this
 * header and adds the tables below to its kernel list; the sources that define them
 * are named by ONYX_CPU_ATTENTION_SOURCES in sources.cmake beside this file.
 *
 *   onyx_cpu_gqa_kernel        com.microsoft GroupQueryAttention, since 1
 *   onyx_cpu_attention_kernel  ONNX Attention, opsets 23 and 24
 *   onyx_cpu_rotary_kernel     ONNX RotaryEmbedding, opset 23
 *   onyx_cpu_ms_rotary_kernel  com.microsoft RotaryEmbedding, since 1
 *
 * Each kernel's create() takes the provider state that the CPU provider's open()
 * returned (an onyx__cpu_provider, see cpu_impl.h) and reads its thread pool from
 * it; a NULL provider state runs the kernels serially.
 */
#ifndef ONYX_CPU_ATTENTION_KERNELS_H
#define ONYX_CPU_ATTENTION_KERNELS_H

#include <stddef.h>

#include "onyx_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const onyx_kernel_table onyx_cpu_gqa_kernel;
extern const onyx_kernel_table onyx_cpu_attention_kernel;
extern const onyx_kernel_table onyx_cpu_rotary_kernel;
extern const onyx_kernel_table onyx_cpu_ms_rotary_kernel;

/* GroupQueryAttention and Attention as v3 definitions as well (abi/onyx_factory.h):
 * the same kernels, whose infer, workspace and create give their reasons through the
 * core's sink. The provider's factory registers these in place of the two tables
 * (onyx__pc_add_kernels); its v2 entry and the tests that drive a table keep the
 * tables. */
extern const onyx_kernel_def onyx_cpu_gqa_def;
extern const onyx_kernel_def onyx_cpu_attention_def;
extern const onyx_kernel_def *const onyx_cpu_attention_defs[];
extern const size_t onyx_cpu_attention_def_count;

/* The same four tables as one array, for a provider that appends lists. */
extern const onyx_kernel_table *const onyx_cpu_attention_kernels[];
extern const size_t onyx_cpu_attention_kernel_count;

#ifdef __cplusplus
}
#endif

#endif /* ONYX_CPU_ATTENTION_KERNELS_H */
