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

#endif /* ONYX_CORE_ERROR_IMPL_H */
