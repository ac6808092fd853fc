/*
 * The message channel of the kernel callbacks that have none of their own (infer and
 * workspace): a kernel calls the host table's set_error (ABI v2) before it returns a
 * non-OK status, and the core reads the reason right after the call, so that a
 * planning, workspace or infer failure carries the kernel's own words. The reason is
 * kept per thread: a callback runs on the thread that called it, and sessions on
 * other threads plan at the same time without seeing each other's reasons.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "error_impl.h"

static _Thread_local char reason[ONYX__KERNEL_REASON_CAP];

void onyx__kernel_reason_clear(void) { reason[0] = '\0'; }

const char *onyx__kernel_reason(void) { return reason; }

void onyx__host_set_error(void *host_data, const char *fmt, ...) {
  (void)host_data; /* the reason belongs to the callback, whoever's provider it is */
  if (fmt == NULL) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(reason, sizeof reason, fmt, ap);
  va_end(ap);
}

void onyx__kernel_reason_explain(char *err, size_t cap, const char *what, onyx_status status) {
  if (reason[0])
    onyx__errf(err, cap, "%s: %s (%s)", what, reason, onyx_status_str(status));
  else
    onyx__errf(err, cap, "%s (%s; the kernel gave no reason)", what, onyx_status_str(status));
  reason[0] = '\0';
}
