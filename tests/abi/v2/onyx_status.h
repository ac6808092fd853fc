/*
 * Onyx ABI v1 — status codes.
 *
 * Published: every name in this file. Values are fixed forever and never reused;
 * new codes are appended at the end of ONYX_STATUS_LIST.
 */
#ifndef ONYX_STATUS_H
#define ONYX_STATUS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, value, description) — the one list every status comes from. */
#define ONYX_STATUS_LIST(X)                                                                        \
  X(OK, 0, "ok")                                                                                   \
  X(INVALID_ARGUMENT, 1, "invalid argument")                                                       \
  X(INVALID_MODEL, 2, "invalid model")                                                             \
  X(INVALID_CONFIG, 3, "invalid configuration")                                                    \
  X(NOT_FOUND, 4, "not found")                                                                     \
  X(IO_ERROR, 5, "i/o error")                                                                      \
  X(ABI_MISMATCH, 6, "ABI version mismatch")                                                       \
  X(PROVIDER_ERROR, 7, "provider error")                                                           \
  X(UNSUPPORTED, 8, "unsupported")                                                                 \
  X(OUT_OF_MEMORY, 9, "out of memory")                                                             \
  X(TIER_EXHAUSTED, 10, "memory tier exhausted")                                                   \
  X(WORKSPACE_TOO_SMALL, 11, "workspace view smaller than required")                               \
  X(CANCELLED, 12, "cancelled")                                                                    \
  X(DEVICE_UNAVAILABLE, 13, "device unavailable")                                                  \
  X(INTERNAL, 14, "internal error")

/* A status returned by every fallible ABI and API call. */
typedef enum onyx_status {
#define ONYX_STATUS_ENUM_(name, value, text) ONYX_STATUS_##name = value,
  ONYX_STATUS_LIST(ONYX_STATUS_ENUM_)
#undef ONYX_STATUS_ENUM_
} onyx_status;

/* The short constant string for a status ("tier exhausted"); never NULL. Inline so
 * that providers, which link nothing of the core, can use it too. */
static inline const char *onyx_status_str(onyx_status status) {
  switch (status) {
#define ONYX_STATUS_CASE_(name, value, text)                                                       \
  case ONYX_STATUS_##name:                                                                         \
    return text;
    ONYX_STATUS_LIST(ONYX_STATUS_CASE_)
#undef ONYX_STATUS_CASE_
  }
  return "unknown status";
}

#ifdef __cplusplus
}
#endif

#endif /* ONYX_STATUS_H */
