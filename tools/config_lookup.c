/*
 * plugins.ini lookup shared by every tool, so that a tool works from any working
 * folder: an explicit choice (--config, ONYX_CONFIG) is used as given or refused;
 * otherwise the working folder, then the places beside the binary, which the build
 * tree and an install prefix fill. The binary's folder comes from /proc/self/exe,
 * which names the file itself even when the tool was started through a link.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config_lookup.h"

/* NULL when `path` is a regular file, else why not. */
static const char *not_regular(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) return strerror(errno);
  return S_ISREG(st.st_mode) ? NULL : "not a regular file";
}

static void append(char *err, size_t cap, const char *text) {
  size_t n = strlen(err);
  if (n < cap) snprintf(err + n, cap - n, "%s", text);
}

/* Folder of the running binary, or "" when the system does not say. */
static void exe_dir(char *buf, size_t cap) {
  char path[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  buf[0] = '\0';
  if (n <= 0) return;
  path[n] = '\0';
  char *slash = strrchr(path, '/');
  if (slash == NULL) return;
  *slash = '\0';
  snprintf(buf, cap, "%s", path[0] ? path : "/");
}

int onyx_tool_find_config(const char *given, char *out, size_t cap, char *err, size_t err_cap) {
  if (err_cap > 0) err[0] = '\0';
  const char *env = getenv("ONYX_CONFIG");
  const char *chosen = given ? given : env && *env ? env : NULL;
  if (chosen) {
    const char *why = not_regular(chosen);
    if (why == NULL) {
      snprintf(out, cap, "%s", chosen);
      return 0;
    }
    snprintf(err, err_cap, "%s %s: %s", given ? "--config" : "ONYX_CONFIG", chosen, why);
    return -1;
  }
  char dir[PATH_MAX], parent[PATH_MAX], cwd[PATH_MAX];
  exe_dir(dir, sizeof dir);
  snprintf(parent, sizeof parent, "%s", dir);
  char *slash = strrchr(parent, '/');
  if (slash) *slash = '\0';
  if (getcwd(cwd, sizeof cwd) == NULL) snprintf(cwd, sizeof cwd, ".");
  char candidates[4][PATH_MAX + 32];
  int count = 0;
  snprintf(candidates[count++], sizeof candidates[0], "plugins.ini");
  if (dir[0]) {
    snprintf(candidates[count++], sizeof candidates[0], "%s/plugins.ini", dir);
    snprintf(candidates[count++], sizeof candidates[0], "%s/plugins.ini", parent);
    snprintf(candidates[count++], sizeof candidates[0], "%s/etc/onyx/plugins.ini", parent);
  }
  for (int i = 0; i < count; ++i) {
    if (not_regular(candidates[i])) continue;
    snprintf(out, cap, "%s", candidates[i]);
    return 0;
  }
  snprintf(err, err_cap, "no plugins.ini found; looked for %s/plugins.ini (the working folder)",
           cwd);
  for (int i = 1; i < count; ++i) {
    append(err, err_cap, ", ");
    append(err, err_cap, candidates[i]);
  }
  append(err, err_cap, "; name one with --config FILE or ONYX_CONFIG");
  return -1;
}
