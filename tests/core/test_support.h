/* Helpers shared by the core tests: temporary plugins.ini files. */
#ifndef ONYX_TESTS_CORE_SUPPORT_H
#define ONYX_TESTS_CORE_SUPPORT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Writes `text` to a fresh file under /tmp and returns its malloc'ed path. */
static inline char *write_temp_file(const char *suffix, const char *text) {
  char tmpl[] = "/tmp/onyx-test-XXXXXX";
  int fd = mkstemp(tmpl);
  if (fd < 0) return NULL;
  close(fd);
  size_t n = strlen(tmpl) + strlen(suffix) + 1;
  char *path = malloc(n);
  if (path == NULL) return NULL;
  snprintf(path, n, "%s%s", tmpl, suffix);
  if (rename(tmpl, path) != 0) {
    free(path);
    return NULL;
  }
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    free(path);
    return NULL;
  }
  fputs(text, f);
  fclose(f);
  return path;
}

static inline void remove_temp_file(char *path) {
  if (path) unlink(path);
  free(path);
}

#endif /* ONYX_TESTS_CORE_SUPPORT_H */
