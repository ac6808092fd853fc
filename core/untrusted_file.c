/*
 * Untrusted files: see untrusted_file.h for the promise. O_NONBLOCK makes the open
 * of a FIFO return at once (and a regular file ignores the flag); O_NOCTTY keeps a
 * terminal named as a model from becoming ours; pread keeps reads independent of
 * a file position.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "untrusted_file.h"

/* How messages name the file: "'x.bin' " (or "'x.bin': "), or nothing when the caller
 * names it itself (name ""). */
typedef struct subject {
  char s[4200];
} subject;

static const char *named(subject *b, const char *name, const char *tail) {
  if (name[0] == '\0') return "";
  snprintf(b->s, sizeof b->s, "'%s'%s", name, tail);
  return b->s;
}

static const char *kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "of an unknown kind";
}

onyx_status onyx__file_open(const char *path, const char *name, uint64_t max_bytes,
                            onyx_status refuse, onyx__file *out, char *why, size_t why_cap) {
  out->fd = -1;
  out->size = 0;
  if (name == NULL) name = path;
  if (why == NULL) why_cap = 0;
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    subject b;
    if (why_cap)
      snprintf(why, why_cap, "cannot open%s%s: %s", name[0] ? " " : "", named(&b, name, ""),
               strerror(e));
    return e == ENOENT || e == ENOTDIR ? ONYX_STATUS_NOT_FOUND : ONYX_STATUS_IO_ERROR;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    subject b;
    if (why_cap)
      snprintf(why, why_cap, "cannot stat%s%s: %s", name[0] ? " " : "", named(&b, name, ""),
               strerror(errno));
    close(fd);
    return ONYX_STATUS_IO_ERROR;
  }
  if (!S_ISREG(st.st_mode)) {
    subject b;
    if (why_cap)
      snprintf(why, why_cap, "%sis not a regular file (it is %s)", named(&b, name, " "),
               kind_of(st.st_mode));
    close(fd);
    return refuse;
  }
  if (st.st_size < 0 || (uint64_t)st.st_size > max_bytes || (uint64_t)st.st_size >= SIZE_MAX) {
    subject b;
    if (why_cap)
      snprintf(why, why_cap, "%sis %lld bytes, over the limit of %llu", named(&b, name, " "),
               (long long)st.st_size, (unsigned long long)max_bytes);
    close(fd);
    return refuse;
  }
  out->fd = fd;
  out->size = (uint64_t)st.st_size;
  return ONYX_STATUS_OK;
}

void onyx__file_close(onyx__file *file) {
  if (file == NULL || file->fd < 0) return;
  close(file->fd);
  file->fd = -1;
}

onyx_status onyx__file_read_at(const onyx__file *file, const char *name, uint64_t offset, void *dst,
                               uint64_t bytes, char *why, size_t why_cap) {
  uint64_t done = 0;
  subject b;
  if (why == NULL) why_cap = 0;
  while (done < bytes) {
    size_t want = bytes - done > (1u << 30) ? (size_t)1 << 30 : (size_t)(bytes - done);
    ssize_t n = pread(file->fd, (char *)dst + done, want, (off_t)(offset + done));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) {
      if (why_cap)
        snprintf(why, why_cap, "%sread failed after %llu of %llu bytes: %s", named(&b, name, ": "),
                 (unsigned long long)done, (unsigned long long)bytes, strerror(errno));
      return ONYX_STATUS_IO_ERROR;
    }
    if (n == 0) {
      if (why_cap)
        snprintf(why, why_cap,
                 "%sread %llu of %llu bytes at offset %llu (the file shrank "
                 "while reading)",
                 named(&b, name, ": "), (unsigned long long)done, (unsigned long long)bytes,
                 (unsigned long long)offset);
      return ONYX_STATUS_IO_ERROR;
    }
    done += (uint64_t)n;
  }
  return ONYX_STATUS_OK;
}

onyx_status onyx__file_read_all(const char *path, const char *name, uint64_t max_bytes,
                                onyx_status refuse, char **out_data, size_t *out_size, char *why,
                                size_t why_cap) {
  onyx__file f;
  subject b;
  if (name == NULL) name = path;
  onyx_status st = onyx__file_open(path, name, max_bytes, refuse, &f, why, why_cap);
  if (st != ONYX_STATUS_OK) return st;
  if (why == NULL) why_cap = 0;
  char *data = malloc((size_t)f.size + 1);
  if (data == NULL) {
    if (why_cap)
      snprintf(why, why_cap, "%sout of memory for %llu bytes", named(&b, name, ": "),
               (unsigned long long)f.size);
    onyx__file_close(&f);
    return ONYX_STATUS_OUT_OF_MEMORY;
  }
  st = onyx__file_read_at(&f, name, 0, data, f.size, why, why_cap);
  /* One byte more than fstat promised means the file grew: what was read is a
   * prefix of something else, not the file. */
  char extra;
  ssize_t more = st == ONYX_STATUS_OK ? pread(f.fd, &extra, 1, (off_t)f.size) : 0;
  if (st == ONYX_STATUS_OK && more > 0) {
    if (why_cap)
      snprintf(why, why_cap, "%sgrew past %llu bytes while it was read", named(&b, name, " "),
               (unsigned long long)f.size);
    st = ONYX_STATUS_IO_ERROR;
  }
  onyx__file_close(&f);
  if (st != ONYX_STATUS_OK) {
    free(data);
    return st;
  }
  data[f.size] = '\0';
  *out_data = data;
  *out_size = (size_t)f.size;
  return ONYX_STATUS_OK;
}
