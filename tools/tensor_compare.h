/* Comparing tensors against expected values, for onyx-run and the test runners. */
#ifndef ONYX_TOOLS_TENSOR_COMPARE_H
#define ONYX_TOOLS_TENSOR_COMPARE_H

#include <stdbool.h>
#include <stddef.h>

#include "onyx_abi.h"

typedef struct tensor_diff {
  bool ok;
  double worst_abs; /* largest |got - want| */
  double worst_rel; /* largest |got - want| / |want| where want != 0 */
  int64_t mismatches;
  int64_t first_bad; /* flat index of the first mismatch, -1 if none */
  double first_got, first_want;
  char why[256]; /* shape/dtype mismatch, or empty */
} tensor_diff;

/* Element i of a numeric tensor as a double (16-bit floats widened). */
double tensor_get(const onyx_tensor *t, int64_t i);

/* Default tolerances per dtype (rtol, atol): float32 1e-3/1e-5, looser for 16-bit. */
void tensor_default_tolerance(uint32_t dtype, double *rtol, double *atol);

/* Compares got against want: same dtype and shape, then |got-want| <= atol+rtol*|want|
 * for floats (NaN matches NaN, infinities must be equal), exact for the rest. */
tensor_diff tensor_compare(const onyx_tensor *got, const onyx_tensor *want, double rtol,
                           double atol);

/* "float32[2,3,4]" into buf. */
const char *tensor_describe(const onyx_tensor *t, char *buf, size_t cap);

const char *dtype_to_string(uint32_t dtype);

#endif /* ONYX_TOOLS_TENSOR_COMPARE_H */
