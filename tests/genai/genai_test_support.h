/* Helpers shared by the generation library's tests: temporary folders and files, a
 * runtime on this build's CPU provider, copies of model folders. */
#ifndef ONYX_TESTS_GENAI_SUPPORT_H
#define ONYX_TESTS_GENAI_SUPPORT_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "onyx_genai.h"

/* A fresh folder under /tmp; its path in buf. */
static inline void make_temp_dir(char *buf, size_t cap) {
  snprintf(buf, cap, "/tmp/onyx-genai-test-XXXXXX");
  if (mkdtemp(buf) == NULL) buf[0] = '\0';
}

static inline void write_file(const char *dir, const char *name, const char *text, size_t size) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (f == NULL) return;
  fwrite(text, 1, size, f);
  fclose(f);
}

static inline void write_text(const char *dir, const char *name, const char *text) {
  write_file(dir, name, text, strlen(text));
}

static inline void copy_file(const char *from_dir, const char *to_dir, const char *name) {
  char src[4096], dst[4096];
  snprintf(src, sizeof src, "%s/%s", from_dir, name);
  snprintf(dst, sizeof dst, "%s/%s", to_dir, name);
  FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
  char buf[1 << 16];
  size_t n;
  while (in && out && (n = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, n, out);
  if (in) fclose(in);
  if (out) fclose(out);
}

/* Removes a folder and the files in it (one level: the tests make no deeper ones). */
static inline void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
      rmdir(path);
    else
      unlink(path);
  }
  if (d) closedir(d);
  rmdir(dir);
}

/* A runtime with this build's CPU provider alone. */
static inline onyx_runtime *cpu_runtime(void) {
  char dir[256];
  make_temp_dir(dir, sizeof dir);
  char ini[1024];
  snprintf(ini, sizeof ini, "[provider.cpu]\npath = %s\n", CPU_PROVIDER);
  write_text(dir, "plugins.ini", ini);
  char path[512];
  snprintf(path, sizeof path, "%s/plugins.ini", dir);
  onyx_runtime *rt = NULL;
  onyx_error *e = NULL;
  if (onyx_runtime_create(path, &rt, &e) != ONYX_STATUS_OK) {
    fprintf(stderr, "runtime: %s\n", onyx_error_message(e));
    onyx_error_free(e);
  }
  remove_dir(dir);
  return rt;
}

#endif /* ONYX_TESTS_GENAI_SUPPORT_H */
