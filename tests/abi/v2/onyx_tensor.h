/*
 * Onyx ABI v1 — element types, devices and tensor views.
 *
 * Published: every name in this file. onyx_tensor is frozen for ABI v1 (it travels in
 * arrays, so it cannot grow); a later ABI version would add a new view type instead.
 */
#ifndef ONYX_TENSOR_H
#define ONYX_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types. Values equal ONNX TensorProto.DataType so that no table is needed
 * between the model file and the ABI. */
typedef enum onyx_dtype {
  ONYX_DTYPE_UNDEFINED = 0,
  ONYX_DTYPE_FLOAT32 = 1,
  ONYX_DTYPE_UINT8 = 2,
  ONYX_DTYPE_INT8 = 3,
  ONYX_DTYPE_UINT16 = 4,
  ONYX_DTYPE_INT16 = 5,
  ONYX_DTYPE_INT32 = 6,
  ONYX_DTYPE_INT64 = 7,
  ONYX_DTYPE_STRING = 8, /* not supported by v1 kernels; listed for completeness */
  ONYX_DTYPE_BOOL = 9,
  ONYX_DTYPE_FLOAT16 = 10,
  ONYX_DTYPE_FLOAT64 = 11,
  ONYX_DTYPE_UINT32 = 12,
  ONYX_DTYPE_UINT64 = 13,
  ONYX_DTYPE_BFLOAT16 = 16,
  /* Sub-byte integers (since v2): two elements a byte, the first in the low nibble, as
   * ONNX stores them; a tensor of n elements takes (n + 1) / 2 bytes (onyx_dtype_bits).
   * Only kernels that say so accept them (quantized weights). */
  ONYX_DTYPE_UINT4 = 21,
  ONYX_DTYPE_INT4 = 22
} onyx_dtype;

/* A bit for a dtype in a kernel's type mask. */
#define ONYX_DTYPE_BIT(dtype) (UINT64_C(1) << (unsigned)(dtype))

/* Bytes per element; 0 for UNDEFINED, STRING, the sub-byte types and unknown values. */
static inline size_t onyx_dtype_size(uint32_t dtype) {
  switch (dtype) {
  case ONYX_DTYPE_BOOL:
  case ONYX_DTYPE_UINT8:
  case ONYX_DTYPE_INT8:
    return 1;
  case ONYX_DTYPE_UINT16:
  case ONYX_DTYPE_INT16:
  case ONYX_DTYPE_FLOAT16:
  case ONYX_DTYPE_BFLOAT16:
    return 2;
  case ONYX_DTYPE_FLOAT32:
  case ONYX_DTYPE_INT32:
  case ONYX_DTYPE_UINT32:
    return 4;
  case ONYX_DTYPE_FLOAT64:
  case ONYX_DTYPE_INT64:
  case ONYX_DTYPE_UINT64:
    return 8;
  default:
    return 0;
  }
}

/* Bits per element: 8 × onyx_dtype_size, and 4 for INT4 and UINT4; 0 where the size is
 * 0. (since v2) */
static inline size_t onyx_dtype_bits(uint32_t dtype) {
  if (dtype == ONYX_DTYPE_INT4 || dtype == ONYX_DTYPE_UINT4) return 4;
  return 8 * onyx_dtype_size(dtype);
}

/* Where memory lives. */
typedef enum onyx_device_kind { ONYX_DEVICE_HOST = 0, ONYX_DEVICE_CUDA = 1 } onyx_device_kind;

/* Highest tensor rank a v1 view carries. */
#define ONYX_MAX_RANK 8

/*
 * A tensor view (in the spirit of DLPack's DLTensor). A view never owns its data:
 * the caller that hands it out keeps the memory alive for the duration of the call.
 * Data is dense and row-major in v1; `data` may be NULL when only the geometry is
 * meaningful (workspace planning) or when the tensor has zero elements.
 */
typedef struct onyx_tensor {
  uint32_t dtype;              /* onyx_dtype */
  uint32_t device;             /* onyx_device_kind */
  int32_t device_id;           /* ordinal of the device, 0 for the host */
  uint32_t rank;               /* number of dims, 0 for a scalar */
  int64_t dims[ONYX_MAX_RANK]; /* extent per axis; entries past rank are 0 */
  void *data;                  /* first element, or NULL (see above) */
} onyx_tensor;

/* Number of elements of a view (1 for a scalar). */
static inline int64_t onyx_tensor_numel(const onyx_tensor *t) {
  int64_t n = 1;
  for (uint32_t i = 0; i < t->rank; ++i) n *= t->dims[i];
  return n;
}

#ifdef __cplusplus
}
#endif

#endif /* ONYX_TENSOR_H */
