/*
 * Replays a fuzz target's inputs without libFuzzer, so that every build — gcc
 * included — runs the committed corpus through the target in ctest:
 *
 *   onyx_fuzz_NAME_replay DIR|FILE...
 *
 * Each file is one input (directories are read one level deep, in name order). A
 * crash, a sanitizer report or a leak fails the run as it would fail libFuzzer. It
 * prints how many inputs it replayed; no input at all is an error (a corpus that
 * went missing must not pass).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_target.h"

/* libFuzzer's optional hook; targets that need no set-up leave it out. */
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

#define REPLAY_MAX_BYTES ((size_t)16 << 20)

static int replay_file(const char *path) {
  FILE *f = fopen(path, "rb");
  struct stat st;
  if (f == NULL || fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) ||
      (uint64_t)st.st_size > REPLAY_MAX_BYTES) {
    fprintf(stderr, "replay: cannot read %s (a regular file of at most %zu bytes)\n", path,
            REPLAY_MAX_BYTES);
    if (f) fclose(f);
    return -1;
  }
  /* An exact-size buffer, so that ASan sees a read past the input. */
  size_t n = (size_t)st.st_size;
  uint8_t *input = malloc(n ? n : 1);
  size_t got = input ? fread(input, 1, n, f) : 0;
  fclose(f);
  if (input == NULL || got != n) {
    fprintf(stderr, "replay: cannot read %s\n", path);
    free(input);
    return -1;
  }
  LLVMFuzzerTestOneInput(input, n);
  free(input);
  return 0;
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Replays every regular file in `dir`; returns how many, or -1. */
static long replay_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL) return -1;
  char **names = NULL;
  size_t count = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    if (count == cap) {
      cap = cap ? cap * 2 : 64;
      char **grown = realloc(names, cap * sizeof *names);
      if (grown == NULL) break;
      names = grown;
    }
    size_t len = strlen(dir) + 1 + strlen(e->d_name) + 1;
    if ((names[count] = malloc(len)) == NULL) break;
    snprintf(names[count], len, "%s/%s", dir, e->d_name);
    count++;
  }
  closedir(d);
  if (count) qsort(names, count, sizeof *names, cmp_names);
  long done = 0;
  for (size_t i = 0; i < count; ++i) {
    struct stat st;
    if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode) && replay_file(names[i]) == 0) ++done;
    free(names[i]);
  }
  free(names);
  return done;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s DIR|FILE...\n", argv[0]);
    return 2;
  }
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  long total = 0;
  for (int i = 1; i < argc; ++i) {
    struct stat st;
    long n = -1;
    if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode))
      n = replay_dir(argv[i]);
    else if (replay_file(argv[i]) == 0)
      n = 1;
    if (n < 0) {
      fprintf(stderr, "replay: cannot read %s\n", argv[i]);
      return 1;
    }
    printf("replayed %ld inputs from %s\n", n, argv[i]);
    total += n;
  }
  return total > 0 ? 0 : 1;
}
