/*
 * Private to the model loader (model_load*.c, tensor_proto.c): the load context that
 * carries the error sink and the external-data folder, file helpers, and the
 * TensorProto and AttributeProto converters. Not for use outside the loader.
 */
#ifndef ONYX_CORE_MODEL_LOAD_IMPL_H
#define ONYX_CORE_MODEL_LOAD_IMPL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "graph.h"
#include "onnx.pb-c.h"

/* Raw payloads are copied byte for byte into host tensors, which are little-endian
 * exactly when the host is. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the ONNX loader assumes a little-endian host"
#endif

/* State of one load: what messages name and where external data may come from. */
typedef struct onyx__load_ctx {
  const char *what;     /* the source named first in every message (a path, "<bytes>") */
  const char *base_dir; /* folder external data must stay inside; NULL forbids it */
  char *base_real;      /* realpath of base_dir, resolved on first use; owned */
  char *err;            /* caller's message buffer, may be NULL */
  size_t err_cap;
} onyx__load_ctx;

/* Releases what the context owns (not err). NULL-safe. */
void onyx__load_ctx_release(onyx__load_ctx *ctx);

/* Writes "<what>: <message>" into the context's buffer and returns `status`, so that
 * error paths read `return onyx__load_fail(ctx, STATUS, "...", ...)`. */
onyx_status onyx__load_fail(onyx__load_ctx *ctx, onyx_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* A name made safe to print: at most 80 bytes, control bytes shown as '?'. */
typedef struct onyx__qname {
  char s[96];
} onyx__qname;
const char *onyx__qn(onyx__qname *buf, const char *name); /* NULL prints as "" */

/* malloc'ed copy of `s` (NULL copies as ""), or NULL when out of memory. */
char *onyx__strdup(const char *s);

/* Reads a whole regular file of at most `max_bytes` into a malloc'ed buffer (at least
 * one byte is allocated, so *out_data is non-NULL on success). Messages name `path`. */
onyx_status onyx__read_file(onyx__load_ctx *ctx, const char *path, uint64_t max_bytes,
                            void **out_data, size_t *out_size);

/* The folder of `path` ("." when it has none), malloc'ed; NULL when out of memory. */
char *onyx__dirname(const char *path);

/*
 * Resolves `location` of an external-data entry inside ctx->base_dir: relative, no
 * ".." component, and its realpath (symlinks followed) inside the folder's realpath.
 * `thing` names the tensor in messages. *out_path receives the malloc'ed real path.
 */
onyx_status onyx__resolve_external(onyx__load_ctx *ctx, const char *thing, const char *location,
                                   char **out_path);

/* Why a protobuf failed to parse, as far as a scan of its top-level fields can tell
 * ("field 7 (graph) at byte 12 declares 900 bytes but 40 remain"). `field_name` maps a
 * field number to a name or NULL. Writes into buf; always NUL-terminates. */
void onyx__protobuf_diagnose(const uint8_t *bytes, size_t size,
                             const char *(*field_name)(uint32_t field), char *buf, size_t cap);

/* ------------------------------------------------------------------ tensors */

/* The ONNX name of a TensorProto.DataType value ("FLOAT", "FLOAT8E4M3FN"), or NULL for
 * a value ONNX does not define. */
const char *onyx__dtype_name(int64_t dtype);

/*
 * Checks that `dtype` is an element type Onyx holds: UNSUPPORTED for STRING and for
 * ONNX types Onyx lacks (complex, float8, int4, ...), INVALID_MODEL for values ONNX
 * does not define. `thing` names the owner in messages.
 */
onyx_status onyx__check_dtype(onyx__load_ctx *ctx, const char *thing, int64_t dtype);

/* Formats dims as "[2,3,4]" into buf (truncated with "..." when long). */
const char *onyx__format_dims(char *buf, size_t cap, const int64_t *dims, size_t rank);

/*
 * Converts a TensorProto into a host tensor with malloc'ed data (NULL for zero
 * elements): validates dtype, rank, dims, the byte size, and the payload (raw_data or
 * the typed field for the dtype, or external data). May take ownership of
 * tp->raw_data's buffer (the field is cleared then). `thing` names the tensor in
 * messages. On failure *out is untouched.
 */
onyx_status onyx__tensor_from_proto(onyx__load_ctx *ctx, const char *thing, Onnx__TensorProto *tp,
                                    onyx_tensor *out);

/* ------------------------------------------------------------------ attributes */

/*
 * Converts a node's attributes. `node_desc` names the node in messages. Tensors are
 * converted with onyx__tensor_from_proto. On success *out_attrs holds `count` attrs
 * (NULL when count is 0); free with onyx__attrs_free. On failure nothing is kept.
 */
onyx_status onyx__attrs_from_proto(onyx__load_ctx *ctx, const char *node_desc,
                                   Onnx__AttributeProto **protos, size_t count,
                                   onyx_attr **out_attrs);

/* Frees attrs made by onyx__attrs_from_proto, `count` of them. NULL-safe. */
void onyx__attrs_free(onyx_attr *attrs, size_t count);

/* Frees a pointer the ABI declares const but the loader allocated. */
static inline void onyx__free_const(const void *p) { free((void *)(uintptr_t)p); }

#endif /* ONYX_CORE_MODEL_LOAD_IMPL_H */
