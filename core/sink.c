/*
 * The v3 error channel on the core's side: an onyx_sink whose set_error formats into
 * the caller's buffer. Every v3 callback gets one, so that what a kernel or device says
 * reaches the user with the status, prefixed by whoever called it.
 */
#include <stdarg.h>
#include <stdio.h>

#include "error_impl.h"

static void sink_set_error(onyx_sink *pub, const char *fmt, ...) {
  onyx__sink *s = (onyx__sink *)pub; /* pub is the first member */
  if (s == NULL || s->buf == NULL || s->cap == 0 || fmt == NULL) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->buf, s->cap, fmt, ap);
  va_end(ap);
}

onyx_sink *onyx__sink_init(onyx__sink *s, char *buf, size_t cap) {
  *s = (onyx__sink){.pub = {.struct_size = sizeof(onyx_sink),
                            .version = ONYX_ABI_LATEST,
                            .core_data = NULL,
                            .set_error = sink_set_error},
                    .buf = buf,
                    .cap = buf ? cap : 0};
  if (buf && cap) buf[0] = '\0';
  return &s->pub;
}

/* Read-only after initialisation: a callback told to drop its words writes nothing. */
static onyx__sink quiet = {.pub = {.struct_size = sizeof(onyx_sink),
                                   .version = ONYX_ABI_LATEST,
                                   .set_error = sink_set_error}};

onyx_sink *onyx__sink_quiet(void) { return &quiet.pub; }

void onyx__explain(char *err, size_t cap, const char *what, const char *reason,
                   onyx_status status) {
  if (reason && reason[0])
    onyx__errf(err, cap, "%s: %s (%s)", what, reason, onyx_status_str(status));
  else
    onyx__errf(err, cap, "%s (%s; the kernel gave no reason)", what, onyx_status_str(status));
}
