/* onyx_error: a status with a heap message, handed to API callers. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error_impl.h"

struct onyx_error {
  onyx_status status;
  char message[];
};

onyx_status onyx__error_set(onyx_error **out_error, onyx_status status, const char *message) {
  if (out_error == NULL) return status;
  if (message == NULL) message = onyx_status_str(status);
  size_t len = strlen(message);
  onyx_error *e = malloc(sizeof *e + len + 1);
  if (e == NULL) {
    *out_error = NULL; /* nothing better to do when even the message cannot be stored */
    return status;
  }
  e->status = status;
  memcpy(e->message, message, len + 1);
  *out_error = e;
  return status;
}

void onyx__errf(char *err, size_t cap, const char *fmt, ...) {
  if (err == NULL || cap == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, cap, fmt, ap);
  va_end(ap);
}

onyx_status onyx_error_status(const onyx_error *error) {
  return error ? error->status : ONYX_STATUS_OK;
}

const char *onyx_error_message(const onyx_error *error) { return error ? error->message : ""; }

void onyx_error_free(onyx_error *error) { free(error); }

onyx_status onyx_error_create(onyx_error **out_error, onyx_status status, const char *message) {
  return onyx__error_set(out_error, status, message);
}
