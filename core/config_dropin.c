/*
 * Drop-in providers: what a plugins.ini gains from folders, after its own sections.
 *
 *   <plugins.ini's folder>/providers.d/NAME.ini   a fragment: one [provider.NAME]
 *                                                 section, the keys plugins.ini takes
 *   $ONYX_PROVIDER_PATH = DIR[:DIR...]            in each folder, its fragments (*.ini),
 *                                                 then its libonyx_NAME.so libraries,
 *                                                 each loaded as provider NAME
 *
 * Like the Vulkan loader's manifest folders: a package installs a provider by adding
 * a file, never by editing a file the user owns. Files are taken in name order (so
 * 10-fast.ini comes before 50-slow.ini), hidden files are ignored, and only
 * libonyx_*.so libraries are taken from a folder so that a folder of other libraries
 * is never dlopened. A fragment is as untrusted as plugins.ini: anything not exactly
 * right is an error naming the fragment and line. A drop-in whose name or library is
 * listed already is shadowed (kept aside with the reason, for onyx-list), never an
 * error: the same folder may be reached twice.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config_impl.h"
#include "error_impl.h"
#include "onyx.h"
#include "untrusted_file.h"

/* The same bounds as plugins.ini's own: a hostile folder costs no more than a file. */
#define DROPIN_MAX_PROVIDERS 64
#define DROPIN_MAX_FILES 1024
#define FRAGMENT_MAX_BYTES ((uint64_t)1 << 16)
#define PATH_ENV "ONYX_PROVIDER_PATH"

static char *dup_str(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

static char *join(const char *dir, const char *name) {
  size_t n = strlen(dir) + 1 + strlen(name) + 1;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/%s", dir, name);
  return p;
}

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n > k && !strcmp(s + n - k, suffix);
}

/* Does an earlier entry load the same library file? Compared by realpath, so two
 * spellings of one file are one; a path that does not resolve compares as written. */
static bool same_library(const char *a, const char *b) {
  char *ra = realpath(a, NULL), *rb = realpath(b, NULL);
  bool same = !strcmp(ra ? ra : a, rb ? rb : b);
  free(ra);
  free(rb);
  return same;
}

/* Why `p` cannot join the list (a name or a library listed already), or "" when it
 * can. */
static void shadow_reason(const onyx__config *c, const onyx__provider_config *p, char *why,
                          size_t cap) {
  why[0] = '\0';
  for (size_t i = 0; i < c->provider_count && !why[0]; ++i) {
    const onyx__provider_config *q = &c->providers[i];
    if (!strcmp(q->name, p->name))
      snprintf(why, cap, "the name '%s' is taken by %s:%d", p->name, q->file, q->line);
    else if (same_library(q->path, p->path))
      snprintf(why, cap, "its library %s is listed already as '%s' by %s:%d", p->path, q->name,
               q->file, q->line);
  }
}

/* Moves *p (cleared on return, whatever happens) into the list or aside. */
static onyx_status add_entry(onyx__config *c, onyx__provider_config *p, char *err, size_t err_cap) {
  char why[1024];
  shadow_reason(c, p, why, sizeof why);
  bool shadow = why[0] != '\0';
  size_t *count = shadow ? &c->shadowed_count : &c->provider_count;
  onyx__provider_config **list = shadow ? &c->shadowed : &c->providers;
  if (*count >= DROPIN_MAX_PROVIDERS) {
    onyx__errf(err, err_cap, "%s:%d: provider '%s': more than %d providers were found", p->file,
               p->line, p->name, DROPIN_MAX_PROVIDERS);
    onyx__provider_config_clear(p);
    return ONYX_STATUS_INVALID_CONFIG;
  }
  onyx__provider_config *grown = realloc(*list, (*count + 1) * sizeof **list);
  if (grown == NULL || (shadow && (p->reason = dup_str(why)) == NULL)) {
    if (grown) *list = grown;
    onyx__provider_config_clear(p);
    return ONYX_STATUS_OUT_OF_MEMORY;
  }
  *list = grown;
  if (shadow) p->state = ONYX_PROVIDER_STATE_SHADOWED;
  grown[(*count)++] = *p;
  memset(p, 0, sizeof *p);
  return ONYX_STATUS_OK;
}

/* One fragment file, parsed and moved in. */
static onyx_status add_fragment(onyx__config *c, const char *path, uint32_t origin,
                                void (*warn)(const char *message), char *err, size_t err_cap) {
  char why[ONYX__FILE_WHY_CAP];
  char *text = NULL;
  size_t size = 0;
  onyx_status st = onyx__file_read_all(path, "", FRAGMENT_MAX_BYTES, ONYX_STATUS_INVALID_CONFIG,
                                       &text, &size, why, sizeof why);
  if (st != ONYX_STATUS_OK) {
    onyx__errf(err, err_cap, "%s: %s", path, why);
    return st == ONYX_STATUS_OUT_OF_MEMORY ? st : ONYX_STATUS_INVALID_CONFIG;
  }
  onyx__config *fc = NULL;
  st = onyx__config_parse_fragment(path, text, size, warn, &fc, err, err_cap);
  free(text);
  if (st != ONYX_STATUS_OK) return st;
  fc->providers[0].origin = origin;
  st = add_entry(c, &fc->providers[0], err, err_cap);
  fc->provider_count = 0; /* its one entry moved (or was cleared) */
  onyx__config_free(fc);
  return st;
}

/* A bare libonyx_NAME.so found in an ONYX_PROVIDER_PATH folder: provider NAME,
 * enabled, no options. */
static onyx_status add_library(onyx__config *c, const char *dir, const char *file, char *err,
                               size_t err_cap) {
  size_t n = strlen(file) - strlen("libonyx_") - strlen(".so");
  onyx__provider_config p = {.enabled = true, .origin = ONYX_PROVIDER_ORIGIN_PATH};
  p.name = malloc(n + 1);
  p.path = join(dir, file);
  p.file = dup_str(dir);
  if (p.name == NULL || p.path == NULL || p.file == NULL) {
    onyx__provider_config_clear(&p);
    return ONYX_STATUS_OUT_OF_MEMORY;
  }
  memcpy(p.name, file + strlen("libonyx_"), n);
  p.name[n] = '\0';
  return add_entry(c, &p, err, err_cap);
}

static int compare_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_fragment(const char *name) { return name[0] != '.' && ends_with(name, ".ini"); }
static bool is_library(const char *name) {
  return !strncmp(name, "libonyx_", 8) && ends_with(name + 8, ".so") && strlen(name) > 11;
}

/* The names in `dir` that `keep` accepts, sorted; *out_names NULL when none. */
static onyx_status list_dir(const char *dir, bool (*keep)(const char *), char ***out_names,
                            size_t *out_count, char *err, size_t err_cap) {
  *out_names = NULL;
  *out_count = 0;
  DIR *d = opendir(dir);
  if (d == NULL) return ONYX_STATUS_NOT_FOUND;
  char **names = NULL;
  size_t count = 0;
  onyx_status st = ONYX_STATUS_OK;
  for (struct dirent *e; st == ONYX_STATUS_OK && (e = readdir(d)) != NULL;) {
    if (!keep(e->d_name)) continue;
    if (count == DROPIN_MAX_FILES) {
      onyx__errf(err, err_cap, "%s: more than %d provider files", dir, DROPIN_MAX_FILES);
      st = ONYX_STATUS_INVALID_CONFIG;
      break;
    }
    char **grown = realloc(names, (count + 1) * sizeof *names);
    if (grown == NULL || (grown[count] = dup_str(e->d_name)) == NULL) {
      if (grown) names = grown;
      st = ONYX_STATUS_OUT_OF_MEMORY;
      break;
    }
    names = grown;
    count++;
  }
  closedir(d);
  if (st != ONYX_STATUS_OK) {
    for (size_t i = 0; i < count; ++i) free(names[i]);
    free(names);
    return st;
  }
  if (count > 1) qsort(names, count, sizeof *names, compare_names);
  *out_names = names;
  *out_count = count;
  return ONYX_STATUS_OK;
}

/* The fragments (and, for `libraries`, the libonyx_*.so files) of one folder. A folder
 * that does not exist adds nothing. */
static onyx_status add_folder(onyx__config *c, const char *dir, uint32_t origin, bool libraries,
                              void (*warn)(const char *message), char *err, size_t err_cap) {
  for (int pass = 0; pass < (libraries ? 2 : 1); ++pass) {
    char **names = NULL;
    size_t count = 0;
    onyx_status st =
        list_dir(dir, pass == 0 ? is_fragment : is_library, &names, &count, err, err_cap);
    if (st == ONYX_STATUS_NOT_FOUND) return ONYX_STATUS_OK;
    for (size_t i = 0; i < count; ++i) {
      if (st == ONYX_STATUS_OK) {
        char *path = join(dir, names[i]);
        st = path == NULL ? ONYX_STATUS_OUT_OF_MEMORY
             : pass == 0  ? add_fragment(c, path, origin, warn, err, err_cap)
                          : add_library(c, dir, names[i], err, err_cap);
        free(path);
      }
      free(names[i]);
    }
    free(names);
    if (st != ONYX_STATUS_OK) return st;
  }
  return ONYX_STATUS_OK;
}

/* One $ONYX_PROVIDER_PATH entry: a folder, a fragment or a library. Entries that do
 * not exist are skipped with a warning, as a missing folder of $PATH is. */
static onyx_status add_path_entry(onyx__config *c, const char *entry,
                                  void (*warn)(const char *message), char *err, size_t err_cap) {
  struct stat sb;
  const char *missing = stat(entry, &sb) != 0                           ? strerror(errno)
                        : !(S_ISDIR(sb.st_mode) || S_ISREG(sb.st_mode)) ? "not a folder or a file"
                                                                        : NULL;
  if (missing) {
    if (warn) {
      char msg[ONYX_ERR_CAP];
      snprintf(msg, sizeof msg, PATH_ENV ": %s: %s; skipped", entry, missing);
      warn(msg);
    }
    return ONYX_STATUS_OK;
  }
  if (S_ISDIR(sb.st_mode))
    return add_folder(c, entry, ONYX_PROVIDER_ORIGIN_PATH, true, warn, err, err_cap);
  const char *base = strrchr(entry, '/');
  base = base ? base + 1 : entry;
  if (ends_with(entry, ".ini"))
    return add_fragment(c, entry, ONYX_PROVIDER_ORIGIN_PATH, warn, err, err_cap);
  if (!is_library(base)) {
    onyx__errf(err, err_cap,
               PATH_ENV ": %s: a file there is a fragment (NAME.ini) or a provider library "
                        "(libonyx_NAME.so)",
               entry);
    return ONYX_STATUS_INVALID_CONFIG;
  }
  /* Its folder: "." for a bare name, "/" for a file at the root. */
  size_t dir_len = base == entry ? 0 : (size_t)(base - entry - 1);
  char *dir = base == entry ? dup_str(".") : dup_str(entry);
  if (dir == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  if (base != entry) dir[dir_len ? dir_len : 1] = '\0';
  onyx_status st = add_library(c, dir, base, err, err_cap);
  free(dir);
  return st;
}

onyx_status onyx__config_discover(onyx__config *c, void (*warn)(const char *message), char *err,
                                  size_t err_cap) {
  char *dropin = join(c->dir, "providers.d");
  if (dropin == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  onyx_status st = add_folder(c, dropin, ONYX_PROVIDER_ORIGIN_DROP_IN, false, warn, err, err_cap);
  free(dropin);
  const char *env = getenv(PATH_ENV);
  if (st != ONYX_STATUS_OK || env == NULL || *env == '\0') return st;
  char *list = dup_str(env);
  if (list == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  for (char *entry = list; st == ONYX_STATUS_OK && entry != NULL;) {
    char *colon = strchr(entry, ':');
    if (colon) *colon = '\0';
    if (*entry) st = add_path_entry(c, entry, warn, err, err_cap);
    entry = colon ? colon + 1 : NULL;
  }
  free(list);
  return st;
}

bool onyx__config_may_skip(const onyx__config *c, const onyx__provider_config *p,
                           onyx_status status) {
  if (c->strict || status == ONYX_STATUS_OK || status == ONYX_STATUS_OUT_OF_MEMORY) return false;
  return status == ONYX_STATUS_DEVICE_UNAVAILABLE || p->origin != ONYX_PROVIDER_ORIGIN_CONFIG;
}

void onyx__config_note_skip(onyx__provider_config *p, onyx_status status, const char *reason) {
  p->state = status == ONYX_STATUS_DEVICE_UNAVAILABLE ? ONYX_PROVIDER_STATE_DECLINED
                                                      : ONYX_PROVIDER_STATE_FAILED;
  free(p->reason);
  p->reason = dup_str(reason ? reason : onyx_status_str(status));
}
