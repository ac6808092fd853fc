/*
 * Untrusted files — models, external data, plugins.ini, genai_config.json — opened
 * so that nothing in their place can hang or fool the reader: opened without
 * blocking (a FIFO or a device named as a model must not stall the open), checked
 * with fstat on the open descriptor (the file checked is the file read), regular
 * files only, their size bounded before anything is allocated, and read until
 * exactly that many bytes arrived (a file that shrinks or grows meanwhile is an
 * error, not a short or a truncated read).
 *
 * Shared as a static library by the core, the loader and genai/. Not published.
 */
#ifndef ONYX_CORE_UNTRUSTED_FILE_H
#define ONYX_CORE_UNTRUSTED_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "onyx_abi.h"

/* Room for a reason with a long path in it. */
#define ONYX__FILE_WHY_CAP 4352

/* An open regular file and the size fstat gave when it was opened. */
typedef struct onyx__file {
  int fd; /* -1 when closed */
  uint64_t size;
} onyx__file;

/*
 * Opens `path` read-only and checks it. Returns OK with *out open, or NOT_FOUND (no
 * such file), IO_ERROR (another error from open or fstat), or `refuse` for something
 * that is not a regular file (a FIFO, a directory, a device, a socket) or is larger
 * than `max_bytes`. `why` (may be NULL) receives the reason, naming the file as
 * `name` (NULL: the path): "'x.bin' is not a regular file (it is a FIFO)", "'x.bin'
 * is 5000 bytes, over the limit of 4096", "cannot open 'x.bin': Permission denied";
 * with a name of "" it is left out ("is not a regular file (it is a FIFO)") for a
 * caller that puts the file first itself. On failure nothing stays open.
 */
onyx_status onyx__file_open(const char *path, const char *name, uint64_t max_bytes,
                            onyx_status refuse, onyx__file *out, char *why, size_t why_cap);

/* Closes an opened file (NULL-safe; a closed one is left alone). */
void onyx__file_close(onyx__file *file);

/* Reads exactly `bytes` at `offset` into dst; IO_ERROR with the reason in `why`
 * (naming the file `name`) when the range lies past what the file holds now or a
 * read fails. */
onyx_status onyx__file_read_at(const onyx__file *file, const char *name, uint64_t offset, void *dst,
                               uint64_t bytes, char *why, size_t why_cap);

/*
 * The whole file: opened and checked as onyx__file_open does, read into a malloc'ed
 * buffer of size + 1 bytes whose last byte is NUL (so text can be parsed in place and
 * an empty file still gets a buffer), and checked to hold the bytes fstat promised,
 * no fewer and no more. OUT_OF_MEMORY when the buffer cannot be had. `name` as for
 * onyx__file_open.
 */
onyx_status onyx__file_read_all(const char *path, const char *name, uint64_t max_bytes,
                                onyx_status refuse, char **out_data, size_t *out_size, char *why,
                                size_t why_cap);

#endif /* ONYX_CORE_UNTRUSTED_FILE_H */
