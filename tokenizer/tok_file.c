/* tokenizer.json and tokenizer_config.json are untrusted: opened without blocking (a
 * FIFO in their place must not hang the open), checked with fstat on the open
 * descriptor (the file checked is the file read), regular files only, their size
 * bounded before anything is allocated, and read until exactly that many bytes came. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tokenizer_impl.h"

static const char *kind_of(mode_t m) {
  return S_ISDIR(m)    ? "a directory"
         : S_ISFIFO(m) ? "a FIFO"
         : S_ISCHR(m)  ? "a character device"
         : S_ISBLK(m)  ? "a block device"
         : S_ISSOCK(m) ? "a socket"
                       : "not a regular file";
}

onyx_status onyx__tok_read_file(const char *path, size_t max_bytes, char **out_data,
                                size_t *out_size, onyx_error **out_error) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return onyx__tok_fail(out_error, errno == ENOENT ? ONYX_STATUS_NOT_FOUND : ONYX_STATUS_IO_ERROR,
                          "cannot open '%s': %s", path, strerror(errno));
  struct stat st;
  onyx_status status = ONYX_STATUS_OK;
  if (fstat(fd, &st) != 0)
    status = onyx__tok_fail(out_error, ONYX_STATUS_IO_ERROR, "cannot stat '%s': %s", path,
                            strerror(errno));
  else if (!S_ISREG(st.st_mode))
    status = onyx__tok_fail(out_error, ONYX_STATUS_INVALID_MODEL, "'%s' is %s, not a regular file",
                            path, kind_of(st.st_mode));
  else if ((uint64_t)st.st_size > max_bytes)
    status = onyx__tok_fail(out_error, ONYX_STATUS_INVALID_MODEL,
                            "'%s' is %lld bytes, over the limit of %zu", path,
                            (long long)st.st_size, max_bytes);
  if (status != ONYX_STATUS_OK) {
    close(fd);
    return status;
  }
  size_t size = (size_t)st.st_size, got = 0;
  char *data = malloc(size + 1);
  if (data == NULL) {
    close(fd);
    return onyx__tok_fail(out_error, ONYX_STATUS_OUT_OF_MEMORY, "out of memory reading '%s'", path);
  }
  /* One byte more than promised: a file that grew since fstat is an error too. */
  while (got <= size) {
    ssize_t r = read(fd, data + got, size + 1 - got);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r <= 0) {
      if (r < 0)
        status = onyx__tok_fail(out_error, ONYX_STATUS_IO_ERROR, "reading '%s': %s", path,
                                strerror(errno));
      break;
    }
    got += (size_t)r;
  }
  close(fd);
  if (status == ONYX_STATUS_OK && got != size)
    status = onyx__tok_fail(out_error, ONYX_STATUS_IO_ERROR,
                            "'%s' changed while read (%zu bytes, fstat said %zu)", path, got, size);
  if (status != ONYX_STATUS_OK) {
    free(data);
    return status;
  }
  data[size] = '\0';
  *out_data = data;
  *out_size = size;
  return ONYX_STATUS_OK;
}
