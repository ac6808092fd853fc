/*
 * plugins.ini, read with inih.
 *
 *   [onyx]              strict = false, fallback = cpu, threads = 0
 *   [governor]          TIER = BYTES (host = 8GiB), requester.KIND = BYTES
 *   [provider.NAME]     path = lib.so, enabled = true, memory_limit = BYTES,
 *                       option.KEY = VALUE
 *
 * Sections appear in priority order. Unknown keys and sections warn rather than
 * fail so that a newer file still loads with an older core.
 */
#include <ctype.h>
#include <stdarg.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ini.h>

#include "config_impl.h"
#include "error_impl.h"

typedef struct parse_state {
  onyx__config *config;
  void (*warn)(const char *message);
  char *err;
  size_t err_cap;
  bool failed; /* set when the handler reports an error itself */
  FILE *file;
  int line;         /* line the reader last returned */
  int section_line; /* line of the last section header */
  int section_seq;  /* counts section headers, so a repeated name is seen */
  int provider_seq; /* section_seq of the provider section last created */
} parse_state;

/* inih's reader hook: counts lines and notes section headers, which the packaged
 * library does not report to the handler. */
static char *read_line(char *buf, int size, void *stream) {
  parse_state *st = stream;
  char *r = fgets(buf, size, st->file);
  if (r == NULL) return NULL;
  st->line++;
  const char *s = buf;
  while (*s == ' ' || *s == '\t') ++s;
  if (*s == '[') {
    st->section_seq++;
    st->section_line = st->line;
  }
  return r;
}

static char *dup_str(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

static const char *requester_names[ONYX_REQUESTER_COUNT_] = {
    "weights", "kv_cache", "workspace_session", "workspace_step", "activations"};

bool onyx__parse_bytes(const char *text, uint64_t *out_bytes) {
  errno = 0;
  char *end = NULL;
  if (text == NULL || *text == '-' || !isdigit((unsigned char)*text)) return false;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno != 0) return false;
  while (*end == ' ') ++end;
  static const struct {
    const char *suffix;
    uint64_t mult;
  } units[] = {{"", 1},
               {"B", 1},
               {"KiB", 1ull << 10},
               {"MiB", 1ull << 20},
               {"GiB", 1ull << 30},
               {"TiB", 1ull << 40},
               {"KB", 1000ull},
               {"MB", 1000000ull},
               {"GB", 1000000000ull},
               {"TB", 1000000000000ull}};
  for (size_t i = 0; i < sizeof units / sizeof units[0]; ++i) {
    if (strcmp(end, units[i].suffix) == 0) {
      if (v > UINT64_MAX / units[i].mult) return false;
      *out_bytes = (uint64_t)v * units[i].mult;
      return true;
    }
  }
  return false;
}

static bool parse_bool(const char *text, bool *out) {
  if (!strcmp(text, "true") || !strcmp(text, "1") || !strcmp(text, "yes") || !strcmp(text, "on")) {
    *out = true;
    return true;
  }
  if (!strcmp(text, "false") || !strcmp(text, "0") || !strcmp(text, "no") || !strcmp(text, "off")) {
    *out = false;
    return true;
  }
  return false;
}

static void warnf(parse_state *st, int line, const char *what, const char *section,
                  const char *name) {
  if (st->warn == NULL) return;
  char msg[512];
  snprintf(msg, sizeof msg, "%s:%d: %s '%s' in [%s] ignored", st->config->path, line, what, name,
           section);
  st->warn(msg);
}

/* Records "FILE:LINE: message" and stops the parse (inih stops on a 0 return). */
static int fail(parse_state *st, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static int fail(parse_state *st, int line, const char *fmt, ...) {
  char detail[384];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  onyx__errf(st->err, st->err_cap, "%s:%d: %s", st->config->path, line, detail);
  st->failed = true;
  return 0;
}

/* The provider section currently being read, created on first sight. */
static onyx__provider_config *provider_for(parse_state *st, const char *name) {
  onyx__config *c = st->config;
  if (c->provider_count > 0 && st->provider_seq == st->section_seq)
    return &c->providers[c->provider_count - 1];
  for (size_t i = 0; i < c->provider_count; ++i) {
    if (!strcmp(c->providers[i].name, name)) {
      onyx__errf(st->err, st->err_cap,
                 "%s:%d: duplicate provider name '%s' (first defined at line %d)", c->path,
                 st->section_line, name, c->providers[i].line);
      st->failed = true;
      return NULL;
    }
  }
  onyx__provider_config *grown =
      realloc(c->providers, (c->provider_count + 1) * sizeof *c->providers);
  if (grown == NULL) return NULL;
  c->providers = grown;
  onyx__provider_config *p = &c->providers[c->provider_count];
  memset(p, 0, sizeof *p);
  p->name = dup_str(name);
  if (p->name == NULL) return NULL;
  p->enabled = true;
  p->line = st->section_line;
  st->provider_seq = st->section_seq;
  c->provider_count++;
  return p;
}

static int handle_provider(parse_state *st, const char *section, const char *name,
                           const char *value, int line) {
  const char *pname = section + strlen("provider.");
  if (*pname == '\0') return fail(st, line, "provider section needs a name: [%s]", section);
  onyx__provider_config *p = provider_for(st, pname);
  if (p == NULL) {
    if (!st->failed) fail(st, line, "out of memory reading [%s]", section);
    return 0;
  }
  if (!strcmp(name, "path")) {
    if (*value == '\0') return fail(st, line, "empty path in [%s]", section);
    free(p->path);
    if (value[0] == '/') {
      p->path = dup_str(value);
    } else {
      size_t n = strlen(st->config->dir) + 1 + strlen(value) + 1;
      p->path = malloc(n);
      if (p->path) snprintf(p->path, n, "%s/%s", st->config->dir, value);
    }
    return p->path ? 1 : fail(st, line, "out of memory");
  }
  if (!strcmp(name, "memory_limit")) {
    if (!onyx__parse_bytes(value, &p->memory_limit) || p->memory_limit == 0)
      return fail(st, line, "memory_limit must be a byte size like 8GiB, got '%s'", value);
    return 1;
  }
  if (!strcmp(name, "enabled")) {
    if (!parse_bool(value, &p->enabled))
      return fail(st, line, "enabled must be true or false, got '%s'", value);
    return 1;
  }
  if (!strncmp(name, "option.", 7) && name[7] != '\0') {
    onyx_option *grown = realloc(p->options, (p->option_count + 1) * sizeof *p->options);
    if (grown == NULL) return fail(st, line, "out of memory");
    p->options = grown;
    char *k = dup_str(name + 7), *v = dup_str(value);
    if (k == NULL || v == NULL) {
      free(k);
      free(v);
      return fail(st, line, "out of memory");
    }
    p->options[p->option_count].key = k;
    p->options[p->option_count].value = v;
    p->option_count++;
    return 1;
  }
  warnf(st, line, "unknown key", section, name);
  return 1;
}

static int handle_governor(parse_state *st, const char *name, const char *value, int line) {
  uint64_t bytes = 0;
  if (!onyx__parse_bytes(value, &bytes))
    return fail(st, line, "'%s' is not a byte size (for %s; try 8GiB)", value, name);
  if (!strncmp(name, "requester.", 10)) {
    for (int r = 0; r < ONYX_REQUESTER_COUNT_; ++r) {
      if (!strcmp(name + 10, requester_names[r])) {
        st->config->requester_limits[r] = bytes;
        return 1;
      }
    }
    return fail(st, line,
                "unknown requester '%s' (known: weights, kv_cache, "
                "workspace_session, workspace_step, activations)",
                name + 10);
  }
  onyx__config *c = st->config;
  onyx__tier_limit *grown = realloc(c->tiers, (c->tier_count + 1) * sizeof *c->tiers);
  if (grown == NULL) return fail(st, line, "out of memory");
  c->tiers = grown;
  c->tiers[c->tier_count].tier = dup_str(name);
  if (c->tiers[c->tier_count].tier == NULL) return fail(st, line, "out of memory");
  c->tiers[c->tier_count].bytes = bytes;
  c->tier_count++;
  return 1;
}

static int handle_onyx(parse_state *st, const char *name, const char *value, int line) {
  onyx__config *c = st->config;
  if (!strcmp(name, "strict")) {
    if (!parse_bool(value, &c->strict))
      return fail(st, line, "strict must be true or false, got '%s'", value);
    return 1;
  }
  if (!strcmp(name, "fallback")) {
    free(c->fallback);
    c->fallback = dup_str(value);
    return c->fallback ? 1 : fail(st, line, "out of memory");
  }
  if (!strcmp(name, "threads")) {
    char *end = NULL;
    long t = strtol(value, &end, 10);
    if (*value == '\0' || *end != '\0' || t < 0 || t > 1024)
      return fail(st, line, "threads must be 0..1024, got '%s'", value);
    c->threads = (uint32_t)t;
    return 1;
  }
  warnf(st, line, "unknown key", "onyx", name);
  return 1;
}

static int handler(void *user, const char *section, const char *name, const char *value) {
  parse_state *st = user;
  int line = st->line;
  if (!strncmp(section, "provider.", 9)) return handle_provider(st, section, name, value, line);
  if (!strcmp(section, "onyx")) return handle_onyx(st, name, value, line);
  if (!strcmp(section, "governor")) return handle_governor(st, name, value, line);
  warnf(st, line, "unknown section key", section, name);
  return 1;
}

void onyx__config_free(onyx__config *c) {
  if (c == NULL) return;
  for (size_t i = 0; i < c->provider_count; ++i) {
    onyx__provider_config *p = &c->providers[i];
    free(p->name);
    free(p->path);
    for (size_t k = 0; k < p->option_count; ++k) {
      free((void *)(uintptr_t)p->options[k].key);
      free((void *)(uintptr_t)p->options[k].value);
    }
    free(p->options);
  }
  free(c->providers);
  for (size_t i = 0; i < c->tier_count; ++i) free(c->tiers[i].tier);
  free(c->tiers);
  free(c->path);
  free(c->dir);
  free(c->fallback);
  free(c);
}

onyx_status onyx__config_load(const char *path, void (*warn)(const char *message),
                              onyx__config **out_config, char *err, size_t err_cap) {
  onyx__config *c = calloc(1, sizeof *c);
  if (c == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  c->path = dup_str(path);
  const char *slash = strrchr(path, '/');
  if (slash == NULL) {
    c->dir = dup_str(".");
  } else {
    size_t n = (size_t)(slash - path);
    c->dir = malloc(n + 2);
    if (c->dir) {
      memcpy(c->dir, path, n);
      c->dir[n] = '\0';
      if (n == 0) strcpy(c->dir, "/");
    }
  }
  c->fallback = dup_str("cpu");
  if (c->path == NULL || c->dir == NULL || c->fallback == NULL) {
    onyx__config_free(c);
    return ONYX_STATUS_OUT_OF_MEMORY;
  }
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    onyx__errf(err, err_cap, "%s: cannot open plugins config: %s", path, strerror(errno));
    onyx__config_free(c);
    return ONYX_STATUS_NOT_FOUND;
  }
  parse_state st = {.config = c, .warn = warn, .err = err, .err_cap = err_cap, .file = f};
  int rc = ini_parse_stream(read_line, &st, handler, &st);
  fclose(f);
  if (rc != 0 || st.failed) {
    if (!st.failed) onyx__errf(err, err_cap, "%s:%d: syntax error", path, rc);
    onyx__config_free(c);
    return ONYX_STATUS_INVALID_CONFIG;
  }
  for (size_t i = 0; i < c->provider_count; ++i) {
    if (c->providers[i].path == NULL) {
      onyx__errf(err, err_cap, "%s:%d: [provider.%s] has no path", path, c->providers[i].line,
                 c->providers[i].name);
      onyx__config_free(c);
      return ONYX_STATUS_INVALID_CONFIG;
    }
  }
  *out_config = c;
  return ONYX_STATUS_OK;
}
