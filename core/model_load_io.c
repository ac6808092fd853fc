/*
 * The loader's contact with the file system and its error sink: whole-file reads,
 * the containment check for external data, and the diagnosis of a protobuf that
 * does not parse. Model files are untrusted, so every size is checked before it is
 * used and every path an external-data entry names is confined to the model folder.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "model_load_impl.h"
#include "untrusted_file.h"

void onyx__load_ctx_release(onyx__load_ctx *ctx) {
  if (ctx == NULL) return;
  free(ctx->base_real);
  ctx->base_real = NULL;
}

onyx_status onyx__load_fail(onyx__load_ctx *ctx, onyx_status status, const char *fmt, ...) {
  if (ctx->err == NULL || ctx->err_cap == 0) return status;
  int n = snprintf(ctx->err, ctx->err_cap, "%s: ", ctx->what != NULL ? ctx->what : "<bytes>");
  if (n < 0) n = 0;
  if ((size_t)n < ctx->err_cap) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->err + n, ctx->err_cap - (size_t)n, fmt, ap);
    va_end(ap);
  }
  return status;
}

const char *onyx__qn(onyx__qname *buf, const char *name) {
  const size_t limit = 80;
  size_t i = 0;
  if (name == NULL) name = "";
  for (; name[i] != '\0' && i < limit; ++i) {
    unsigned char c = (unsigned char)name[i];
    buf->s[i] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
  }
  if (name[i] != '\0') {
    memcpy(buf->s + i, "...", 3);
    i += 3;
  }
  buf->s[i] = '\0';
  return buf->s;
}

char *onyx__strdup(const char *s) {
  if (s == NULL) s = "";
  size_t n = strlen(s) + 1;
  char *copy = malloc(n);
  if (copy != NULL) memcpy(copy, s, n);
  return copy;
}

char *onyx__dirname(const char *path) {
  const char *slash = strrchr(path, '/');
  if (slash == NULL) return onyx__strdup(".");
  size_t n = (slash == path) ? 1 : (size_t)(slash - path);
  char *dir = malloc(n + 1);
  if (dir == NULL) return NULL;
  memcpy(dir, path, n);
  dir[n] = '\0';
  return dir;
}

onyx_status onyx__read_file(onyx__load_ctx *ctx, const char *path, uint64_t max_bytes,
                            void **out_data, size_t *out_size) {
  /* Opened without blocking and checked on the descriptor (untrusted_file.h): a FIFO
   * named as a model is refused, not waited on. */
  char why[ONYX__FILE_WHY_CAP];
  char *data = NULL;
  size_t size = 0;
  onyx_status st =
      onyx__file_read_all(path, "", max_bytes, ONYX_STATUS_IO_ERROR, &data, &size, why, sizeof why);
  if (st != ONYX_STATUS_OK) return onyx__load_fail(ctx, st, "%s", why);
  *out_data = data;
  *out_size = size;
  return ONYX_STATUS_OK;
}

/* True when some '/'-separated component of `path` is exactly "..". */
static bool has_dotdot_component(const char *path) {
  const char *p = path;
  while (*p != '\0') {
    const char *end = strchr(p, '/');
    size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
    if (len == 2 && p[0] == '.' && p[1] == '.') return true;
    if (end == NULL) break;
    p = end + 1;
  }
  return false;
}

onyx_status onyx__resolve_external(onyx__load_ctx *ctx, const char *thing, const char *location,
                                   char **out_path) {
  onyx__qname ql;
  if (ctx->base_dir == NULL) {
    return onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL,
                           "%s: external data ('%s') is not allowed when the model is given as "
                           "bytes without a folder",
                           thing, onyx__qn(&ql, location));
  }
  if (location[0] == '/') {
    return onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL,
                           "%s: external data location '%s' is an absolute path; it must be "
                           "relative to the model folder",
                           thing, onyx__qn(&ql, location));
  }
  if (has_dotdot_component(location)) {
    return onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL,
                           "%s: external data location '%s' contains a '..' component; it must "
                           "stay inside the model folder",
                           thing, onyx__qn(&ql, location));
  }
  if (ctx->base_real == NULL) {
    ctx->base_real = realpath(ctx->base_dir, NULL);
    if (ctx->base_real == NULL) {
      int e = errno;
      return onyx__load_fail(ctx, ONYX_STATUS_IO_ERROR, "cannot resolve the model folder '%s': %s",
                             ctx->base_dir, strerror(e));
    }
  }
  size_t base_len = strlen(ctx->base_real);
  size_t loc_len = strlen(location);
  char *joined = malloc(base_len + 1 + loc_len + 1);
  if (joined == NULL) {
    return onyx__load_fail(ctx, ONYX_STATUS_OUT_OF_MEMORY, "%s: out of memory", thing);
  }
  memcpy(joined, ctx->base_real, base_len);
  joined[base_len] = '/';
  memcpy(joined + base_len + 1, location, loc_len + 1);
  char *resolved = realpath(joined, NULL);
  int e = errno;
  free(joined);
  if (resolved == NULL) {
    return onyx__load_fail(ctx, e == ENOENT ? ONYX_STATUS_NOT_FOUND : ONYX_STATUS_IO_ERROR,
                           "%s: external data file '%s' in '%s': %s", thing,
                           onyx__qn(&ql, location), ctx->base_real, strerror(e));
  }
  /* A symlink inside the folder may point anywhere; only the resolved path counts. The
   * folder "/" contains everything. */
  bool inside = strncmp(resolved, ctx->base_real, base_len) == 0 &&
                (base_len == 1 || resolved[base_len] == '/');
  if (!inside) {
    onyx__qname qr;
    onyx_status st =
        onyx__load_fail(ctx, ONYX_STATUS_INVALID_MODEL,
                        "%s: external data location '%s' resolves to '%s', outside "
                        "the model folder '%s'",
                        thing, onyx__qn(&ql, location), onyx__qn(&qr, resolved), ctx->base_real);
    free(resolved);
    return st;
  }
  *out_path = resolved;
  return ONYX_STATUS_OK;
}

/* Reads a base-128 varint; false when it runs past `size` or over 10 bytes. */
static bool read_varint(const uint8_t *bytes, size_t size, size_t *pos, uint64_t *out) {
  uint64_t v = 0;
  for (unsigned shift = 0; shift < 70; shift += 7) {
    if (*pos >= size) return false;
    uint8_t b = bytes[(*pos)++];
    v |= (uint64_t)(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      *out = v;
      return true;
    }
  }
  return false;
}

void onyx__protobuf_diagnose(const uint8_t *bytes, size_t size,
                             const char *(*field_name)(uint32_t field), char *buf, size_t cap) {
  size_t pos = 0;
  while (pos < size) {
    size_t start = pos;
    uint64_t tag;
    if (!read_varint(bytes, size, &pos, &tag)) {
      snprintf(buf, cap, "a field tag at byte %zu is cut off or overlong (truncated file?)", start);
      return;
    }
    uint64_t field = tag >> 3;
    unsigned wire = (unsigned)(tag & 7);
    const char *fname =
        field <= UINT32_MAX && field_name != NULL ? field_name((uint32_t)field) : NULL;
    char label[96];
    snprintf(label, sizeof label, "field %llu%s%s%s at byte %zu", (unsigned long long)field,
             fname != NULL ? " (" : "", fname != NULL ? fname : "", fname != NULL ? ")" : "",
             start);
    if (field == 0 || field > 536870911u) {
      snprintf(buf, cap, "invalid field number %llu at byte %zu (not a protobuf, or corrupt)",
               (unsigned long long)field, start);
      return;
    }
    uint64_t len = 0;
    switch (wire) {
    case 0:
      if (!read_varint(bytes, size, &pos, &len)) {
        snprintf(buf, cap, "%s: its value is cut off (truncated file?)", label);
        return;
      }
      break;
    case 1:
    case 5: {
      size_t width = wire == 1 ? 8 : 4;
      if (size - pos < width) {
        snprintf(buf, cap, "%s: needs %zu bytes but %zu remain (truncated file?)", label, width,
                 size - pos);
        return;
      }
      pos += width;
      break;
    }
    case 2:
      if (!read_varint(bytes, size, &pos, &len)) {
        snprintf(buf, cap, "%s: its length is cut off (truncated file?)", label);
        return;
      }
      if (len > size - pos) {
        snprintf(buf, cap, "%s declares %llu bytes but %zu remain (truncated file?)", label,
                 (unsigned long long)len, size - pos);
        return;
      }
      pos += (size_t)len;
      break;
    default:
      snprintf(buf, cap, "%s has wire type %u, which ONNX never uses (not a protobuf, or corrupt)",
               label, wire);
      return;
    }
  }
  snprintf(buf, cap,
           "the top-level fields are intact, so a nested message is malformed or a field has "
           "the wrong wire type");
}
