/*
 * TensorProto → host onyx_tensor: the one place that trusts nothing about a tensor's
 * dims, element type or payload. Used for initializers, TENSOR attributes and the
 * ONNX backend tests' input_K.pb / output_K.pb files.
 *
 * The byte size is computed with overflow checks before any payload is looked at, and
 * every payload (raw_data, the typed field that belongs to the dtype, or an external
 * file range) must hold exactly that many bytes or elements.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checked_math.h"
#include "model_load_impl.h"
#include "untrusted_file.h"

/* Names of every TensorProto.DataType value ONNX defines (0..28 as of ONNX 1.20), for
 * messages. */
static const char *const k_dtype_names[] = {
    "UNDEFINED",      "FLOAT",      "UINT8",          "INT8",       "UINT16",    "INT16",
    "INT32",          "INT64",      "STRING",         "BOOL",       "FLOAT16",   "DOUBLE",
    "UINT32",         "UINT64",     "COMPLEX64",      "COMPLEX128", "BFLOAT16",  "FLOAT8E4M3FN",
    "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4",      "INT4",      "FLOAT4E2M1",
    "FLOAT8E8M0",     "UINT2",      "INT2",           "FLOAT6E2M3", "FLOAT6E3M2"};

const char *onyx__dtype_name(int64_t dtype) {
  if (dtype < 0 || dtype >= (int64_t)(sizeof k_dtype_names / sizeof k_dtype_names[0])) return NULL;
  return k_dtype_names[dtype];
}

onyx_status onyx__check_dtype(onyx__load_ctx *ctx, const char *thing, int64_t dtype) {
  const char *name = onyx__dtype_name(dtype);
  if (name == NULL || dtype == ONYX_DTYPE_UNDEFINED) {
    return onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL,
                           "%s: element type %" PRId64 " is not an ONNX data type", thing, dtype);
  }
  if (dtype == ONYX_DTYPE_STRING) {
    return onyx__load_fail(ctx, ONYX_STATUS_UNSUPPORTED,
                           "%s: is a STRING tensor; Onyx does not support string tensors", thing);
  }
  if (onyx_dtype_bits((uint32_t)dtype) == 0) {
    return onyx__load_fail(ctx, ONYX_STATUS_UNSUPPORTED,
                           "%s: element type %" PRId64 " (%s) is not supported by Onyx", thing,
                           dtype, name);
  }
  return ONYX_STATUS_OK;
}

const char *onyx__format_dims(char *buf, size_t cap, const int64_t *dims, size_t rank) {
  size_t n = 0;
  buf[0] = '\0';
  n += (size_t)snprintf(buf, cap, "[");
  for (size_t i = 0; i < rank && n < cap; ++i) {
    if (n + 24 >= cap) {
      snprintf(buf + n, cap - n, "...");
      n = cap;
      break;
    }
    n += (size_t)snprintf(buf + n, cap - n, i > 0 ? ",%" PRId64 : "%" PRId64, dims[i]);
  }
  if (n < cap) snprintf(buf + n, cap - n, "]");
  return buf;
}

/* The typed TensorProto field that carries a dtype's elements when raw_data is not
 * used: ONNX stores every integer type of 32 bits or less (and the 16-bit floats, as
 * their bit patterns) in int32_data, UINT32 and UINT64 in uint64_data. */
typedef enum typed_field {
  FIELD_FLOAT = 0,
  FIELD_INT32 = 1,
  FIELD_INT64 = 2,
  FIELD_DOUBLE = 3,
  FIELD_UINT64 = 4,
  FIELD_STRING = 5,
  FIELD_COUNT_ = 6
} typed_field;

static const char *const k_field_names[FIELD_COUNT_] = {
    "float_data", "int32_data", "int64_data", "double_data", "uint64_data", "string_data"};

static typed_field field_for_dtype(uint32_t dtype) {
  switch (dtype) {
  case ONYX_DTYPE_FLOAT32:
    return FIELD_FLOAT;
  case ONYX_DTYPE_INT64:
    return FIELD_INT64;
  case ONYX_DTYPE_FLOAT64:
    return FIELD_DOUBLE;
  case ONYX_DTYPE_UINT32:
  case ONYX_DTYPE_UINT64:
    return FIELD_UINT64;
  default: /* INT32, INT16, INT8, UINT16, UINT8, BOOL, FLOAT16, BFLOAT16, INT4, UINT4 */
    return FIELD_INT32;
  }
}

static size_t field_count(const Onnx__TensorProto *tp, typed_field f) {
  switch (f) {
  case FIELD_FLOAT:
    return tp->n_float_data;
  case FIELD_INT32:
    return tp->n_int32_data;
  case FIELD_INT64:
    return tp->n_int64_data;
  case FIELD_DOUBLE:
    return tp->n_double_data;
  case FIELD_UINT64:
    return tp->n_uint64_data;
  case FIELD_STRING:
  case FIELD_COUNT_:
    break;
  }
  return tp->n_string_data;
}

/* Copies `count` elements from the typed field into `dst`, narrowing where ONNX stores a
 * small type in a wider field (keeping the low bits; BOOL becomes 0 or 1). */
static void copy_typed(const Onnx__TensorProto *tp, uint32_t dtype, void *dst, size_t count) {
  switch (dtype) {
  case ONYX_DTYPE_FLOAT32:
    memcpy(dst, tp->float_data, count * sizeof(float));
    return;
  case ONYX_DTYPE_FLOAT64:
    memcpy(dst, tp->double_data, count * sizeof(double));
    return;
  case ONYX_DTYPE_INT64:
    memcpy(dst, tp->int64_data, count * sizeof(int64_t));
    return;
  case ONYX_DTYPE_UINT64:
    memcpy(dst, tp->uint64_data, count * sizeof(uint64_t));
    return;
  case ONYX_DTYPE_UINT32:
    for (size_t i = 0; i < count; ++i) ((uint32_t *)dst)[i] = (uint32_t)tp->uint64_data[i];
    return;
  case ONYX_DTYPE_INT32:
    memcpy(dst, tp->int32_data, count * sizeof(int32_t));
    return;
  case ONYX_DTYPE_INT16:
  case ONYX_DTYPE_UINT16:
  case ONYX_DTYPE_FLOAT16:
  case ONYX_DTYPE_BFLOAT16:
    for (size_t i = 0; i < count; ++i) {
      ((uint16_t *)dst)[i] = (uint16_t)((uint32_t)tp->int32_data[i] & 0xffffu);
    }
    return;
  case ONYX_DTYPE_INT8:
  case ONYX_DTYPE_UINT8:
  case ONYX_DTYPE_INT4: /* int32_data holds the packed bytes, two elements each */
  case ONYX_DTYPE_UINT4:
    for (size_t i = 0; i < count; ++i) {
      ((uint8_t *)dst)[i] = (uint8_t)((uint32_t)tp->int32_data[i] & 0xffu);
    }
    return;
  case ONYX_DTYPE_BOOL:
    for (size_t i = 0; i < count; ++i) ((uint8_t *)dst)[i] = tp->int32_data[i] != 0;
    return;
  default:
    return;
  }
}

/* Parses a non-negative decimal that fits int64 (an external-data offset or length). */
static bool parse_u63(const char *s, uint64_t *out) {
  uint64_t v = 0;
  if (s == NULL || *s == '\0') return false;
  for (; *s != '\0'; ++s) {
    if (*s < '0' || *s > '9') return false;
    if (onyx__ckd_mul_u64(&v, v, 10u) || onyx__ckd_add_u64(&v, v, (uint64_t)(*s - '0'))) {
      return false;
    }
  }
  if (v > (uint64_t)INT64_MAX) return false;
  *out = v;
  return true;
}

/* Reads `bytes` bytes of the tensor's external file into *out_data (NULL for 0). */
static onyx_status load_external(onyx__load_ctx *ctx, const char *thing,
                                 const Onnx__TensorProto *tp, uint64_t bytes, void **out_data) {
  const char *location = NULL;
  const char *offset_s = NULL;
  const char *length_s = NULL;
  onyx__qname qk;
  for (size_t i = 0; i < tp->n_external_data; ++i) {
    const Onnx__StringStringEntryProto *e = tp->external_data[i];
    const char *key = e->key != NULL ? e->key : "";
    const char *value = e->value != NULL ? e->value : "";
    const char **slot = strcmp(key, "location") == 0 ? &location
                        : strcmp(key, "offset") == 0 ? &offset_s
                        : strcmp(key, "length") == 0 ? &length_s
                                                     : NULL;
    if (slot == NULL) continue; /* "checksum" and keys from later ONNX versions */
    if (*slot != NULL) {
      return onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL,
                             "%s: external_data key '%s' appears twice", thing, onyx__qn(&qk, key));
    }
    *slot = value;
  }
  if (location == NULL || location[0] == '\0') {
    return onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL,
                           "%s: data_location is EXTERNAL but external_data has no 'location'",
                           thing);
  }
  uint64_t offset = 0;
  uint64_t length = 0;
  if (offset_s != NULL && !parse_u63(offset_s, &offset)) {
    return onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL,
                           "%s: external data offset '%s' is not a non-negative decimal integer",
                           thing, onyx__qn(&qk, offset_s));
  }
  if (length_s != NULL && !parse_u63(length_s, &length)) {
    return onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL,
                           "%s: external data length '%s' is not a non-negative decimal integer",
                           thing, onyx__qn(&qk, length_s));
  }
  if (length_s != NULL && length != bytes) {
    return onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL,
                           "%s: external data length is %" PRIu64 " bytes but dims and dtype "
                           "need %" PRIu64,
                           thing, length, bytes);
  }

  char *path = NULL;
  onyx_status st = onyx__resolve_external(ctx, thing, location, &path);
  if (st != ONYX_STATUS_OK) return st;

  /* Opened without blocking and checked on the descriptor: a FIFO in the model folder
   * is refused, not waited on. */
  onyx__qname ql;
  onyx__qn(&ql, location);
  char why[ONYX__FILE_WHY_CAP];
  onyx__file f;
  st = onyx__file_open(path, ql.s, UINT64_MAX, ONYX_STATUS_INVALID_MODEL, &f, why, sizeof why);
  free(path);
  if (st != ONYX_STATUS_OK) return onyx__load_fail(ctx, st, "%s: external data %s", thing, why);
  uint64_t end;
  if (onyx__ckd_add_u64(&end, offset, bytes) || end > f.size) {
    onyx__file_close(&f);
    return onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL,
                           "%s: external data '%s' range offset %" PRIu64 " + length %" PRIu64
                           " runs past the end of the file (%" PRIu64 " bytes)",
                           thing, ql.s, offset, bytes, f.size);
  }
  void *data = NULL;
  if (bytes > 0) {
    data = malloc((size_t)bytes);
    if (data == NULL) {
      onyx__file_close(&f);
      return onyx__load_fail(ctx, ONYX_STATUS_OUT_OF_MEMORY,
                             "%s: out of memory for %" PRIu64 " bytes of external data", thing,
                             bytes);
    }
    st = onyx__file_read_at(&f, ql.s, offset, data, bytes, why, sizeof why);
    if (st != ONYX_STATUS_OK) {
      free(data);
      onyx__file_close(&f);
      return onyx__load_fail(ctx, st, "%s: external data %s", thing, why);
    }
  }
  onyx__file_close(&f);
  *out_data = data;
  return ONYX_STATUS_OK;
}

onyx_status onyx__tensor_from_proto(onyx__load_ctx *ctx, const char *thing, Onnx__TensorProto *tp,
                                    onyx_tensor *out) {
  if (!tp->has_data_type || tp->data_type == ONYX_DTYPE_UNDEFINED) {
    return onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL, "%s: has no data_type", thing);
  }
  onyx_status st = onyx__check_dtype(ctx, thing, tp->data_type);
  if (st != ONYX_STATUS_OK) return st;
  uint32_t dtype = (uint32_t)tp->data_type;
  const char *dtype_name = onyx__dtype_name(dtype);

  if (tp->segment != NULL) {
    return onyx__load_fail(ctx, ONYX_STATUS_UNSUPPORTED,
                           "%s: is a segment of a larger tensor; segmented tensors are not "
                           "supported",
                           thing);
  }
  char dims_text[160];
  if (tp->n_dims > ONYX_MAX_RANK) {
    return onyx__load_fail(ctx, ONYX_STATUS_UNSUPPORTED,
                           "%s: rank %zu exceeds the maximum rank %d (dims %s)", thing, tp->n_dims,
                           ONYX_MAX_RANK,
                           onyx__format_dims(dims_text, sizeof dims_text, tp->dims, tp->n_dims));
  }
  onyx__format_dims(dims_text, sizeof dims_text, tp->dims, tp->n_dims);
  int64_t numel = 1;
  for (size_t i = 0; i < tp->n_dims; ++i) {
    if (tp->dims[i] < 0) {
      return onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL,
                             "%s: dim %zu is negative (%" PRId64 ") in dims %s", thing, i,
                             tp->dims[i], dims_text);
    }
    if (onyx__ckd_mul_count(&numel, numel, tp->dims[i])) {
      return onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL,
                             "%s: the element count of dims %s overflows 64 bits", thing,
                             dims_text);
    }
  }
  uint64_t bytes;
  size_t elem = onyx_dtype_size(dtype);
  if (onyx__ckd_dtype_bytes(&bytes, tp->dims, (uint32_t)tp->n_dims, dtype)) {
    return onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL,
                           "%s: the byte size of dims %s x %s (%zu bits each) overflows", thing,
                           dims_text, dtype_name, onyx_dtype_bits(dtype));
  }
  /* The typed field carries one entry an element, or one a byte for the sub-byte types. */
  const uint64_t typed_want = elem == 0 ? bytes : (uint64_t)numel;

  /* Exactly one payload, and only the field that belongs to the dtype. */
  typed_field want = field_for_dtype(dtype);
  for (int f = 0; f < FIELD_COUNT_; ++f) {
    if ((typed_field)f != want && field_count(tp, (typed_field)f) > 0) {
      return onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL,
                             "%s: a %s tensor carries %s (%zu values); its elements belong in "
                             "raw_data or %s",
                             thing, dtype_name, k_field_names[f], field_count(tp, (typed_field)f),
                             k_field_names[want]);
    }
  }
  size_t typed_count = field_count(tp, want);
  if (tp->has_raw_data && typed_count > 0) {
    return onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL,
                           "%s: carries both raw_data (%zu bytes) and %s (%zu values)", thing,
                           tp->raw_data.len, k_field_names[want], typed_count);
  }

  void *data = NULL;
  if (tp->has_data_location && tp->data_location != ONNX__TENSOR_PROTO__DATA_LOCATION__DEFAULT &&
      tp->data_location != ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
    return onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL, "%s: data_location %d is not defined",
                           thing, (int)tp->data_location);
  }
  if (tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) {
    if (tp->has_raw_data || typed_count > 0) {
      return onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL,
                             "%s: data_location is EXTERNAL but the tensor also carries inline "
                             "data",
                             thing);
    }
    st = load_external(ctx, thing, tp, bytes, &data);
    if (st != ONYX_STATUS_OK) return st;
  } else if (tp->has_raw_data) {
    if (tp->raw_data.len != bytes) {
      return onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL,
                             "%s: raw_data has %zu bytes but dims %s x %s need %" PRIu64, thing,
                             tp->raw_data.len, dims_text, dtype_name, bytes);
    }
    if (bytes > 0) {
      /* Take protobuf-c's buffer instead of copying it: free_unpacked skips a NULL
       * pointer, and the buffer came from malloc through the default allocator. */
      data = tp->raw_data.data;
      tp->raw_data.data = NULL;
      tp->raw_data.len = 0;
      tp->has_raw_data = 0;
    }
  } else {
    if ((uint64_t)typed_count != typed_want) {
      return onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL,
                             "%s: %s has %zu values but dims %s need %" PRIu64 "%s", thing,
                             k_field_names[want], typed_count, dims_text, typed_want,
                             typed_count == 0 ? " (the tensor carries no data)" : "");
    }
    if (bytes > 0) {
      data = malloc((size_t)bytes);
      if (data == NULL) {
        return onyx__load_fail(ctx, ONYX_STATUS_OUT_OF_MEMORY,
                               "%s: out of memory for %" PRIu64 " bytes", thing, bytes);
      }
      copy_typed(tp, dtype, data, typed_count);
    }
  }

  memset(out, 0, sizeof *out);
  out->dtype = dtype;
  out->device = ONYX_DEVICE_HOST;
  out->device_id = 0;
  out->rank = (uint32_t)tp->n_dims;
  for (size_t i = 0; i < tp->n_dims; ++i) out->dims[i] = tp->dims[i];
  out->data = data;
  return ONYX_STATUS_OK;
}

static const char *tensor_field_name(uint32_t field) {
  switch (field) {
  case 1:
    return "dims";
  case 2:
    return "data_type";
  case 4:
    return "float_data";
  case 5:
    return "int32_data";
  case 7:
    return "int64_data";
  case 8:
    return "name";
  case 9:
    return "raw_data";
  case 10:
    return "double_data";
  case 11:
    return "uint64_data";
  case 13:
    return "external_data";
  default:
    return NULL;
  }
}

onyx_status onyx__tensor_proto_load_file(const char *path, onyx_tensor *out, char **out_name,
                                         char *err, size_t err_cap) {
  onyx__load_ctx ctx = {.what = path != NULL ? path : "<null>", .err = err, .err_cap = err_cap};
  if (err != NULL && err_cap > 0) err[0] = '\0';
  if (path == NULL || out == NULL) {
    return onyx__load_fail(&ctx, ONYX_STATUS_INVALID_ARGUMENT, "path and out must not be NULL");
  }
  void *bytes = NULL;
  size_t size = 0;
  onyx_status st = onyx__read_file(&ctx, path, ONYX_MODEL_MAX_BYTES, &bytes, &size);
  if (st != ONYX_STATUS_OK) return st;
  Onnx__TensorProto *tp = onnx__tensor_proto__unpack(NULL, size, bytes);
  if (tp == NULL) {
    char why[192];
    onyx__protobuf_diagnose(bytes, size, tensor_field_name, why, sizeof why);
    free(bytes);
    return onyx__load_fail(&ctx, ONYX_STATUS_INVALID_MODEL,
                           "not a valid TensorProto (%zu bytes): %s", size, why);
  }
  free(bytes);

  char *base_dir = onyx__dirname(path);
  char *name = NULL;
  if (base_dir == NULL ||
      (out_name != NULL && tp->name != NULL && (name = onyx__strdup(tp->name)) == NULL)) {
    st = onyx__load_fail(&ctx, ONYX_STATUS_OUT_OF_MEMORY, "out of memory");
  } else {
    ctx.base_dir = base_dir;
    onyx__qname qn;
    char thing[128];
    if (tp->name != NULL && tp->name[0] != '\0') {
      snprintf(thing, sizeof thing, "tensor '%s'", onyx__qn(&qn, tp->name));
    } else {
      snprintf(thing, sizeof thing, "unnamed tensor");
    }
    onyx_tensor t;
    st = onyx__tensor_from_proto(&ctx, thing, tp, &t);
    if (st == ONYX_STATUS_OK) {
      *out = t;
      if (out_name != NULL) *out_name = name;
      name = NULL;
    }
  }
  free(name);
  free(base_dir);
  onyx__load_ctx_release(&ctx);
  onnx__tensor_proto__free_unpacked(tp, NULL);
  return st;
}
