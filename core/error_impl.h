/* Error objects of the public API and the message buffers used inside the core. */
#ifndef ONYX_CORE_ERROR_IMPL_H
#define ONYX_CORE_ERROR_IMPL_H

#include <stddef.h>

#include "onyx.h"

/* Size of the message buffers the core passes around internally. */
#define ONYX_ERR_CAP 1024

/* Stores a new onyx_error with `message` in *out_error (when out_error is non-NULL)
 * and returns `status`, so a caller can `return onyx__error_set(...)`. */
onyx_status onyx__error_set(onyx_error **out_error, onyx_status status, const char *message);

/* snprintf into a fixed buffer that is never NULL-dereferenced or overrun. */
void onyx__errf(char *err, size_t cap, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* The reason a kernel gave through the host table's set_error (ABI v2) during the
 * infer or workspace callback running on this thread (kernel_reason.c). Cleared
 * before each such call; "" when the kernel gave none. */
#define ONYX__KERNEL_REASON_CAP 512
void onyx__kernel_reason_clear(void);
const char *onyx__kernel_reason(void);
/* The host table's set_error: records the calling thread's reason. */
void onyx__host_set_error(void *host_data, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Writes "WHAT: <reason> (<status>)" into err, or says the kernel gave none, and
 * clears the reason. */
void onyx__kernel_reason_explain(char *err, size_t cap, const char *what, onyx_status status);

/* The core's side of an onyx_sink (ABI v3, sink.c): what a callback says lands in
 * `buf` (NULL: dropped). One per call, on the caller's stack. */
typedef struct onyx__sink {
  onyx_sink pub;
  char *buf;
  size_t cap;
} onyx__sink;
/* Initialises `s` (buf cleared) and returns the sink to hand to the callback. */
onyx_sink *onyx__sink_init(onyx__sink *s, char *buf, size_t cap);
/* A sink that drops what it is told (calls whose reason nothing reports). */
onyx_sink *onyx__sink_quiet(void);
/* Writes "WHAT: <reason> (<status>)" into err, or says the kernel gave no reason when
 * `reason` is empty. */
void onyx__explain(char *err, size_t cap, const char *what, const char *reason, onyx_status status);

#endif /* ONYX_CORE_ERROR_IMPL_H */
