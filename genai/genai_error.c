/* Errors of the generation library travel in the core's one channel (onyx_error). */
#include <stdio.h>

#include "genai_impl.h"

onyx_status onyx__genai_fail(onyx_error **out_error, onyx_status status, const char *fmt, ...) {
  if (out_error == NULL) return status;
  char msg[ONYX__GENAI_ERR_CAP];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return onyx_error_create(out_error, status, msg);
}

onyx_status onyx__genai_wrap(onyx_error **out_error, const char *prefix, onyx_error *inner) {
  onyx_status status = onyx_error_status(inner);
  if (status == ONYX_STATUS_OK) status = ONYX_STATUS_INTERNAL; /* lost to out of memory */
  onyx__genai_fail(out_error, status, "%s: %s", prefix, inner ? onyx_error_message(inner) : "");
  onyx_error_free(inner);
  return status;
}

const char *onyx__genai_dtype_name(uint32_t dtype) {
  switch (dtype) {
  case ONYX_DTYPE_FLOAT32:
    return "float32";
  case ONYX_DTYPE_FLOAT16:
    return "float16";
  case ONYX_DTYPE_BFLOAT16:
    return "bfloat16";
  case ONYX_DTYPE_FLOAT64:
    return "float64";
  case ONYX_DTYPE_INT64:
    return "int64";
  case ONYX_DTYPE_INT32:
    return "int32";
  case ONYX_DTYPE_INT16:
    return "int16";
  case ONYX_DTYPE_INT8:
    return "int8";
  case ONYX_DTYPE_UINT8:
    return "uint8";
  case ONYX_DTYPE_BOOL:
    return "bool";
  case ONYX_DTYPE_UNDEFINED:
    return "undefined";
  default:
    return "another type";
  }
}
