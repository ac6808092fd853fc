/*
 * Message helpers every provider kernel needs. Kept in providers/common so the CPU and
 * CUDA providers word their messages through one implementation.
 */
#include "pc_msg.h"

#include <stdarg.h>
#include <stdio.h>

onyx_status onyx__pc_fail(char *err, size_t err_cap, onyx_status status, const char *fmt, ...) {
  if (err != NULL && err_cap > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_cap, fmt, ap);
    va_end(ap);
  }
  return status;
}

onyx_status onyx__pc_error(onyx_compute_ctx *ctx, onyx_status status, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (ctx != NULL && ctx->set_error != NULL) ctx->set_error(ctx, "%s", msg);
  return status;
}

onyx_status onyx__pc_reason(const onyx_host_table *host, onyx_status status, const char *fmt, ...) {
  if (host == NULL || !ONYX_HAS_FIELD(host, onyx_host_table, set_error) || host->set_error == NULL)
    return status; /* a v1 core: no channel, the status alone goes back */
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (msg[0]) host->set_error(host->host_data, "%s", msg);
  return status;
}

onyx_status onyx__pc_sink_fail(onyx_sink *sink, onyx_status status, const char *fmt, ...) {
  if (sink == NULL || sink->set_error == NULL) return status;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (msg[0]) sink->set_error(sink, "%s", msg);
  return status;
}

onyx__pc_shape_text onyx__pc_shape_str(uint32_t rank, const int64_t *dims) {
  onyx__pc_shape_text t;
  size_t used = 0;
  t.s[used++] = '[';
  for (uint32_t i = 0; i < rank && i < ONYX_MAX_RANK; ++i) {
    int n = snprintf(t.s + used, sizeof t.s - used, i ? ",%lld" : "%lld", (long long)dims[i]);
    if (n < 0 || (size_t)n >= sizeof t.s - used - 1) break;
    used += (size_t)n;
  }
  t.s[used++] = ']';
  t.s[used] = '\0';
  return t;
}

onyx__pc_shape_text onyx__pc_tensor_shape(const onyx_tensor *t) {
  if (t == NULL) return onyx__pc_shape_str(0, NULL);
  return onyx__pc_shape_str(t->rank, t->dims);
}

const char *onyx__pc_dtype_name(uint32_t dtype) {
  switch (dtype) {
  case ONYX_DTYPE_FLOAT32:
    return "float32";
  case ONYX_DTYPE_FLOAT16:
    return "float16";
  case ONYX_DTYPE_BFLOAT16:
    return "bfloat16";
  case ONYX_DTYPE_FLOAT64:
    return "float64";
  case ONYX_DTYPE_INT32:
    return "int32";
  case ONYX_DTYPE_INT64:
    return "int64";
  case ONYX_DTYPE_BOOL:
    return "bool";
  case ONYX_DTYPE_UINT8:
    return "uint8";
  case ONYX_DTYPE_INT8:
    return "int8";
  case ONYX_DTYPE_INT4:
    return "int4";
  case ONYX_DTYPE_UINT4:
    return "uint4";
  case ONYX_DTYPE_UNDEFINED:
    return "undefined";
  default:
    return "another type";
  }
}
