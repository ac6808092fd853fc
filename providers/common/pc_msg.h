/*
 * Provider-side message helpers shared by the CPU and CUDA providers (and open to a
 * third-party provider): source compiled into each provider, never linked from the
 * core, never exported (hidden visibility). Nothing here crosses the ABI.
 */
#ifndef ONYX_PC_MSG_H
#define ONYX_PC_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "onyx_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define ONYX__PC_PRINTF(fmt_index, first_arg) __attribute__((format(printf, fmt_index, first_arg)))
#else
#define ONYX__PC_PRINTF(fmt_index, first_arg)
#endif

/* The ONNX name of an Onyx dtype for messages ("float16"; "another type" past the
 * common ones). */
const char *onyx__pc_dtype_name(uint32_t dtype);

/* Writes a printf-style message into err (when err is not NULL and err_cap > 0) and
 * returns status. For create()/supports(), which report through a caller's buffer. */
onyx_status onyx__pc_fail(char *err, size_t err_cap, onyx_status status, const char *fmt, ...)
    ONYX__PC_PRINTF(4, 5);

/* Formats the message (at most 511 characters), hands it to ctx->set_error (when ctx
 * and set_error are not NULL) and returns status. For compute(). */
onyx_status onyx__pc_error(onyx_compute_ctx *ctx, onyx_status status, const char *fmt, ...)
    ONYX__PC_PRINTF(3, 4);

/* Formats the message (at most 511 characters), hands it to the host table's
 * set_error (ABI v2; nothing with a v1 core, whose table lacks it) and returns status.
 * For infer() and workspace(), which have no message channel of their own; an empty
 * message is not handed over. */
onyx_status onyx__pc_reason(const onyx_host_table *host, onyx_status status, const char *fmt, ...)
    ONYX__PC_PRINTF(3, 4);

/* Formats the message (at most 511 characters), hands it to the sink (when sink and
 * its set_error are not NULL; an empty message is not handed over) and returns status.
 * For the v3 callbacks (abi/onyx_factory.h); a v2 wrapper of one passes NULL. */
onyx_status onyx__pc_sink_fail(onyx_sink *sink, onyx_status status, const char *fmt, ...)
    ONYX__PC_PRINTF(3, 4);

/* A shape rendered as "[2,3,4]" for messages (by value, so it can be used inline).
 * Large enough for ONYX_MAX_RANK dims of any int64 value: it never truncates. */
typedef struct onyx__pc_shape_text {
  char s[ONYX_MAX_RANK * 22 + 4];
} onyx__pc_shape_text;

/* The first min(rank, ONYX_MAX_RANK) dims. */
onyx__pc_shape_text onyx__pc_shape_str(uint32_t rank, const int64_t *dims);
/* The same for a tensor view; NULL renders as "[]". */
onyx__pc_shape_text onyx__pc_tensor_shape(const onyx_tensor *t);

#ifdef __cplusplus
}
#endif

#endif /* ONYX_PC_MSG_H */
