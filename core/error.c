/* onyx_error: a status with a heap message, handed to API callers. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error_impl.h"

struct onyx_error {
  onyx_status status;
  bool fallback;       /* one of `fallbacks`: static, never freed */
  const char *message; /* the text after the struct, or a fallback's literal */
};

/* Handed out when even the error cannot be allocated, one per status, so that a
 * caller out of memory still gets a status and a message rather than NULL. */
static onyx_error fallbacks[] = {
#define ONYX_FALLBACK_(name, value, text)                                                            {ONYX_STATUS_##name, true, text " (no memory was left for the rest of the message)"},
    ONYX_STATUS_LIST(ONYX_FALLBACK_)
#undef ONYX_FALLBACK_
};

onyx_status onyx__error_set(onyx_error **out_error, onyx_status status, const char *message) {
  if (out_error == NULL) return status;
  /* A failure that reached here without words still says what kind it was. */
  if (message == NULL || message[0] == '\0') message = onyx_status_str(status);
  size_t len = strlen(message);
  onyx_error *e = malloc(sizeof *e + len + 1);
  if (e == NULL) {
    bool listed = (size_t)status < sizeof fallbacks / sizeof fallbacks[0] &&
                  fallbacks[status].status == status;
    *out_error = listed ? &fallbacks[status] : &fallbacks[ONYX_STATUS_OUT_OF_MEMORY];
    return status;
  }
  char *text = (char *)(e + 1);
  memcpy(text, message, len + 1);
  e->status = status;
  e->fallback = false;
  e->message = text;
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

void onyx_error_free(onyx_error *error) {
  if (error != NULL && !error->fallback) free(error);
}

onyx_status onyx_error_create(onyx_error **out_error, onyx_status status, const char *message) {
  return onyx__error_set(out_error, status, message);
}
