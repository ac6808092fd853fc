/*
 * The sampler reads float: a row of float16 or bfloat16 logits (fp16 exports) is
 * widened first. Only the row the next id comes from is converted.
 */
#include <string.h>

#include "genai_impl.h"

int64_t onyx__logits_row(const onyx_tensor *logits, int64_t row, float *out) {
  int64_t vocab = logits->dims[logits->rank - 1];
  if (logits->dtype == ONYX_DTYPE_FLOAT32) {
    memcpy(out, (const float *)logits->data + row * vocab, (size_t)vocab * sizeof *out);
    return onyx__row_count_nan(out, vocab);
  }
  const uint16_t *h = (const uint16_t *)logits->data + row * vocab;
  return onyx__row_widen(h, logits->dtype == ONYX_DTYPE_BFLOAT16, vocab, out);
}
