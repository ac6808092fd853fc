/*
 * plugins.ini, read with inih.
 *
 *   [onyx]              strict = false, fallback = cpu, threads = 0
 *   [governor]          TIER = BYTES (host = 8GiB), requester.KIND = BYTES
 *   [provider.NAME]     path = lib.so, enabled = true, memory_limit = BYTES,
 *                       devices = 0, 1 (a v3 provider's devices to open, in order),
 *                       option.KEY = VALUE
 *
 * Sections appear in priority order. Unknown keys and sections warn rather than
 * fail so that a newer file still loads with an older core. Everything else that
 * is not exactly right is an error naming the file and line: a key given twice, a
 * [governor] tier that names no memory tier, a number outside its range, a line longer
 * than inih reads (inih would split it and read its tail as a key of its own).
 *
 * The file is untrusted: read whole through untrusted_file.h (no FIFO blocks, a
 * directory is named as one), then handed to inih line by line by read_line, which
 * is where lines are counted, measured and stripped of leading blanks (so an
 * indented line is a key, never a continuation of the previous value).
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
#include "untrusted_file.h"

/* Bounds that keep a hostile file from costing more than a real one. */
#define CONFIG_MAX_BYTES ((uint64_t)1 << 20)
#define CONFIG_MAX_PROVIDERS 64
#define CONFIG_MAX_OPTIONS 256
#define CONFIG_MAX_TIERS 16

/* A key seen so far: its section, name and line, for duplicate detection. */
typedef struct seen_key {
  char *key; /* "section\0name" */
  size_t len;
  int line;
} seen_key;

typedef struct parse_state {
  onyx__config *config;
  void (*warn)(const char *message);
  char *err;
  size_t err_cap;
  bool fragment;    /* a providers.d fragment: one [provider.NAME] section only */
  bool failed;      /* set when the handler or the reader reports an error itself */
  bool oom;         /* the error was an allocation that failed */
  const char *text; /* the whole file, NUL-terminated */
  size_t size, pos;
  int line;         /* line the reader last returned */
  int section_line; /* line of the last section header */
  int section_seq;  /* counts section headers, so a repeated name is seen */
  int provider_seq; /* section_seq of the provider section last created */
  bool fallback_given;
  int fallback_line;
  int *tier_lines; /* [tier_count]: where each [governor] tier was set */
  seen_key *keys;  /* open addressing, `key_cap` slots (a power of two) */
  size_t key_count, key_cap;
} parse_state;

static int fail(parse_state *st, int line, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* inih's reader hook: hands over one line of the file at a time. inih reads into a
 * buffer of `size` bytes (its compiled INI_MAX_LINE) and splits a longer line into
 * pieces it parses as lines of their own; so a line that does not fit, with room
 * for "\r\n" and the NUL, is an error here. A NUL byte would end the line early for
 * inih, silently; it is an error too. Also counts lines and notes section headers,
 * which the packaged library does not report to the handler. */
static char *read_line(char *buf, int size, void *stream) {
  parse_state *st = stream;
  if (st->failed || st->pos >= st->size || size < 4) return NULL;
  const char *start = st->text + st->pos;
  const char *nl = memchr(start, '\n', st->size - st->pos);
  size_t len = nl ? (size_t)(nl - start) : st->size - st->pos;
  st->pos += len + (nl != NULL);
  st->line++;
  if (memchr(start, '\0', len) != NULL) {
    fail(st, st->line, "line holds a NUL byte");
    return NULL;
  }
  size_t lead = 0;
  while (lead < len && (start[lead] == ' ' || start[lead] == '\t')) ++lead;
  if (len + 3 > (size_t)size) {
    fail(st, st->line,
         "line is %zu characters; the longest line plugins.ini may have is %d (a relative "
         "path resolves against this file's folder)",
         len, size - 3);
    return NULL;
  }
  memcpy(buf, start + lead, len - lead);
  buf[len - lead] = '\n';
  buf[len - lead + 1] = '\0';
  if (buf[0] == '[') {
    st->section_seq++;
    st->section_line = st->line;
  }
  return buf;
}

/* FNV-1a over n bytes, continuing from h (start from FNV_SEED). */
#define FNV_SEED 1469598103934665603ull
static uint64_t hash_bytes(uint64_t h, const char *p, size_t n) {
  for (size_t i = 0; i < n; ++i) h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
  return h;
}

static bool keys_grow(parse_state *st) {
  size_t cap = st->key_cap ? st->key_cap * 2 : 64;
  seen_key *keys = calloc(cap, sizeof *keys);
  if (keys == NULL) return false;
  for (size_t i = 0; i < st->key_cap; ++i) {
    if (st->keys[i].key == NULL) continue;
    size_t h = (size_t)hash_bytes(FNV_SEED, st->keys[i].key, st->keys[i].len) & (cap - 1);
    while (keys[h].key) h = (h + 1) & (cap - 1);
    keys[h] = st->keys[i];
  }
  free(st->keys);
  st->keys = keys;
  st->key_cap = cap;
  return true;
}

static void keys_free(parse_state *st) {
  for (size_t i = 0; i < st->key_cap; ++i) free(st->keys[i].key);
  free(st->keys);
  st->keys = NULL;
  st->key_cap = st->key_count = 0;
}

/* Remembers (section, name) at `line`. Returns 1 when new, 0 when it was already
 * set (the error is recorded), -1 when out of memory. */
static int note_key(parse_state *st, const char *section, const char *name, int line) {
  size_t ls = strlen(section), ln = strlen(name), len = ls + 1 + ln;
  if ((st->key_count + 1) * 2 > st->key_cap && !keys_grow(st)) return -1;
  size_t mask = st->key_cap - 1;
  /* The hash of "section\0name", as keys_grow computes it from the stored key. */
  size_t h = (size_t)hash_bytes(hash_bytes(FNV_SEED, section, ls + 1), name, ln);
  for (h &= mask; st->keys[h].key; h = (h + 1) & mask) {
    const seen_key *k = &st->keys[h];
    if (k->len == len && !memcmp(k->key, section, ls) && !strcmp(k->key + ls + 1, name)) {
      fail(st, line, "duplicate key '%s' in [%s] (first set at line %d)", name, section, k->line);
      return 0;
    }
  }
  char *key = malloc(len + 1);
  if (key == NULL) return -1;
  memcpy(key, section, ls + 1);
  memcpy(key + ls + 1, name, ln + 1);
  st->keys[h] = (seen_key){.key = key, .len = len, .line = line};
  st->key_count++;
  return 1;
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

/* What messages say a byte size and a boolean may be. */
#define BYTES_RANGE "from 1 byte to 16 EiB (2^64-1 bytes), like 8GiB, 512MiB or 1GB"
#define BOOL_ALSO "yes/no, on/off and 1/0 are read too"

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

/* Records "FILE:LINE: message" and stops the parse: the reader hands inih no more
 * lines once it is set. */
static int fail(parse_state *st, int line, const char *fmt, ...) {
  if (st->failed) return 0; /* the first error is the one reported */
  char detail[384];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  onyx__errf(st->err, st->err_cap, "%s:%d: %s", st->config->path, line, detail);
  st->failed = true;
  return 0;
}

/* Records an allocation failure: the parse stops and the load says OUT_OF_MEMORY. */
static int out_of_memory(parse_state *st, int line) {
  fail(st, line, "out of memory");
  st->oom = true;
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
  if (st->fragment && c->provider_count == 1) {
    fail(st, st->section_line,
         "a providers.d fragment names one provider; [provider.%s] is a second (the first, "
         "[provider.%s], is at line %d)",
         name, c->providers[0].name, c->providers[0].line);
    return NULL;
  }
  if (c->provider_count == CONFIG_MAX_PROVIDERS) {
    fail(st, st->section_line, "[provider.%s]: at most %d provider sections are allowed", name,
         CONFIG_MAX_PROVIDERS);
    return NULL;
  }
  onyx__provider_config *grown =
      realloc(c->providers, (c->provider_count + 1) * sizeof *c->providers);
  if (grown == NULL) return NULL;
  c->providers = grown;
  onyx__provider_config *p = &c->providers[c->provider_count];
  memset(p, 0, sizeof *p);
  p->name = dup_str(name);
  p->file = dup_str(c->path);
  if (p->name == NULL || p->file == NULL) {
    onyx__provider_config_clear(p);
    return NULL;
  }
  p->enabled = true;
  p->line = st->section_line;
  st->provider_seq = st->section_seq;
  c->provider_count++;
  return p;
}

/* `devices = 0, 1`: distinct device indexes, comma-separated. */
static int parse_devices(parse_state *st, onyx__provider_config *p, const char *value, int line) {
  p->device_count = 0;
  const char *at = value;
  while (*at != '\0') {
    char *end = NULL;
    errno = 0;
    unsigned long v = isdigit((unsigned char)*at) ? strtoul(at, &end, 10) : 0;
    if (end == NULL || end == at || errno != 0 || v >= 4096)
      return fail(st, line, "devices: '%s' is not a list of device indexes like 0, 1", value);
    for (size_t i = 0; i < p->device_count; ++i)
      if (p->devices[i] == v) return fail(st, line, "devices: device %lu is listed twice", v);
    if (p->device_count == ONYX__CONFIG_MAX_DEVICES)
      return fail(st, line, "devices: at most %d devices may be listed", ONYX__CONFIG_MAX_DEVICES);
    p->devices[p->device_count++] = (uint32_t)v;
    while (*end == ' ' || *end == '\t') ++end;
    if (*end == ',') {
      ++end;
    } else if (*end != '\0') {
      return fail(st, line, "devices: '%s' is not a list of device indexes like 0, 1", value);
    }
    while (*end == ' ' || *end == '\t') ++end;
    at = end;
  }
  if (p->device_count == 0) return fail(st, line, "devices: empty list");
  return 1;
}

static int handle_provider(parse_state *st, const char *section, const char *name,
                           const char *value, int line) {
  const char *pname = section + strlen("provider.");
  if (*pname == '\0') return fail(st, line, "provider section needs a name: [%s]", section);
  onyx__provider_config *p = provider_for(st, pname);
  if (p == NULL) {
    if (!st->failed) out_of_memory(st, line);
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
    return p->path ? 1 : out_of_memory(st, line);
  }
  if (!strcmp(name, "memory_limit")) {
    if (!onyx__parse_bytes(value, &p->memory_limit) || p->memory_limit == 0)
      return fail(st, line, "memory_limit: '%s' is not a byte size " BYTES_RANGE, value);
    return 1;
  }
  if (!strcmp(name, "devices")) return parse_devices(st, p, value, line);
  if (!strcmp(name, "enabled")) {
    if (!parse_bool(value, &p->enabled))
      return fail(st, line, "enabled must be true or false, got '%s' (" BOOL_ALSO ")", value);
    return 1;
  }
  if (!strncmp(name, "option.", 7) && name[7] != '\0') {
    if (p->option_count == CONFIG_MAX_OPTIONS)
      return fail(st, line, "[%s]: at most %d option.* keys are allowed", section,
                  CONFIG_MAX_OPTIONS);
    onyx_option *grown = realloc(p->options, (p->option_count + 1) * sizeof *p->options);
    if (grown == NULL) return out_of_memory(st, line);
    p->options = grown;
    char *k = dup_str(name + 7), *v = dup_str(value);
    if (k == NULL || v == NULL) {
      free(k);
      free(v);
      return out_of_memory(st, line);
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
  if (strchr(value, '=') != NULL)
    return fail(st, line,
                "'%s:%s' cannot be a [governor] key: inih reads ':' as '='; cap a device's tier "
                "with memory_limit in its [provider.NAME] section",
                name, value);
  if (!onyx__parse_bytes(value, &bytes) || bytes == 0)
    return fail(st, line, "%s: '%s' is not a byte size " BYTES_RANGE, name, value);
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
  if (c->tier_count == CONFIG_MAX_TIERS)
    return fail(st, line, "[governor]: at most %d tiers are allowed", CONFIG_MAX_TIERS);
  onyx__tier_limit *grown = realloc(c->tiers, (c->tier_count + 1) * sizeof *c->tiers);
  if (grown == NULL) return out_of_memory(st, line);
  c->tiers = grown;
  int *lines = realloc(st->tier_lines, (c->tier_count + 1) * sizeof *lines);
  if (lines == NULL) return out_of_memory(st, line);
  st->tier_lines = lines;
  lines[c->tier_count] = line;
  c->tiers[c->tier_count].tier = dup_str(name);
  if (c->tiers[c->tier_count].tier == NULL) return out_of_memory(st, line);
  c->tiers[c->tier_count].bytes = bytes;
  c->tier_count++;
  return 1;
}

static int handle_onyx(parse_state *st, const char *name, const char *value, int line) {
  onyx__config *c = st->config;
  if (!strcmp(name, "strict")) {
    if (!parse_bool(value, &c->strict))
      return fail(st, line, "strict must be true or false, got '%s' (" BOOL_ALSO ")", value);
    return 1;
  }
  if (!strcmp(name, "fallback")) {
    if (*value == '\0') return fail(st, line, "fallback must name a [provider.NAME] section");
    st->fallback_given = true;
    st->fallback_line = line;
    free(c->fallback);
    c->fallback = dup_str(value);
    return c->fallback ? 1 : out_of_memory(st, line);
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
  int ok;
  if (st->fragment && (!strcmp(section, "onyx") || !strcmp(section, "governor")))
    return fail(st, st->section_line,
                "[%s] belongs in plugins.ini: a providers.d fragment holds one "
                "[provider.NAME] section",
                section);
  if (!strncmp(section, "provider.", 9))
    ok = handle_provider(st, section, name, value, line);
  else if (!strcmp(section, "onyx"))
    ok = handle_onyx(st, name, value, line);
  else if (!strcmp(section, "governor"))
    ok = handle_governor(st, name, value, line);
  else {
    warnf(st, line, "unknown section key", section, name);
    ok = 1;
  }
  /* Noted after the section's own checks, so that a repeated [provider.NAME] is
   * named as such rather than by its first key. */
  int fresh = ok ? note_key(st, section, name, line) : 0;
  return fresh < 0 ? out_of_memory(st, line) : fresh;
}

void onyx__provider_config_clear(onyx__provider_config *p) {
  free(p->name);
  free(p->path);
  for (size_t k = 0; k < p->option_count; ++k) {
    free((void *)(uintptr_t)p->options[k].key);
    free((void *)(uintptr_t)p->options[k].value);
  }
  free(p->options);
  free(p->file);
  free(p->reason);
  memset(p, 0, sizeof *p);
}

void onyx__config_free(onyx__config *c) {
  if (c == NULL) return;
  for (size_t i = 0; i < c->provider_count; ++i) onyx__provider_config_clear(&c->providers[i]);
  free(c->providers);
  for (size_t i = 0; i < c->shadowed_count; ++i) onyx__provider_config_clear(&c->shadowed[i]);
  free(c->shadowed);
  for (size_t i = 0; i < c->tier_count; ++i) free(c->tiers[i].tier);
  free(c->tiers);
  free(c->path);
  free(c->dir);
  free(c->fallback);
  free(c);
}

/* The tiers [governor] can limit by name. The runtime books memory under "host" and
 * "cuda:0" (provider.c), but inih reads ':' as '=', so "cuda:0 = 8GiB" is the key
 * "cuda" with the value "0 = 8GiB": a device's tier is capped by memory_limit in its
 * [provider.NAME] section instead. Any other name would limit nothing, so a misspelt
 * tier ("hots") would leave the real one unlimited without a word. */
static const char *const known_tiers[] = {"host"};

static bool tier_is_known(const char *tier) {
  for (size_t i = 0; i < sizeof known_tiers / sizeof known_tiers[0]; ++i)
    if (!strcmp(tier, known_tiers[i])) return true;
  return false;
}

/* What only the whole file can tell: every provider has a path, every tier names a
 * device, the fallback names a provider. */
static onyx_status check_config(parse_state *st) {
  onyx__config *c = st->config;
  const char *path = c->path;
  for (size_t i = 0; i < c->provider_count; ++i) {
    if (c->providers[i].path == NULL) {
      onyx__errf(st->err, st->err_cap, "%s:%d: [provider.%s] has no path", path,
                 c->providers[i].line, c->providers[i].name);
      return ONYX_STATUS_INVALID_CONFIG;
    }
  }
  for (size_t t = 0; t < c->tier_count; ++t) {
    if (tier_is_known(c->tiers[t].tier)) continue;
    onyx__errf(st->err, st->err_cap,
               "%s:%d: [governor] '%s' names no memory tier: [governor] limits the host tier "
               "(host = BYTES) and requesters (requester.KIND = BYTES); a device's tier is "
               "capped by memory_limit in its [provider.NAME] section",
               path, st->tier_lines[t], c->tiers[t].tier);
    return ONYX_STATUS_INVALID_CONFIG;
  }
  bool found = !st->fallback_given;
  for (size_t i = 0; !found && i < c->provider_count; ++i)
    found = !strcmp(c->providers[i].name, c->fallback);
  if (!found) {
    onyx__errf(st->err, st->err_cap, "%s:%d: fallback '%s' names no [provider.%s] section", path,
               st->fallback_line, c->fallback, c->fallback);
    return ONYX_STATUS_INVALID_CONFIG;
  }
  return ONYX_STATUS_OK;
}

/* Runs inih over the text and checks the result. */
static onyx_status parse_text(onyx__config *c, const char *text, size_t size, bool fragment,
                              void (*warn)(const char *message), char *err, size_t err_cap) {
  parse_state ps = {.config = c,
                    .warn = warn,
                    .err = err,
                    .err_cap = err_cap,
                    .text = text,
                    .size = size,
                    .fragment = fragment};
  int rc = ini_parse_stream(read_line, &ps, handler, &ps);
  onyx_status st = ONYX_STATUS_OK;
  if (ps.failed) {
    st = ps.oom ? ONYX_STATUS_OUT_OF_MEMORY : ONYX_STATUS_INVALID_CONFIG;
  } else if (rc != 0) {
    onyx__errf(err, err_cap,
               "%s:%d: syntax error (a line is [section], key = value or a ; comment)", c->path,
               rc);
    st = ONYX_STATUS_INVALID_CONFIG;
  } else if (fragment && c->provider_count == 0) {
    onyx__errf(err, err_cap,
               "%s: a providers.d fragment names one provider in a [provider.NAME] section; "
               "this one has none",
               c->path);
    st = ONYX_STATUS_INVALID_CONFIG;
  } else {
    st = check_config(&ps);
  }
  keys_free(&ps);
  free(ps.tier_lines);
  return st;
}

/* An empty config for `path`: its folder resolves relative provider paths. */
static onyx__config *config_new(const char *path) {
  onyx__config *c = calloc(1, sizeof *c);
  if (c == NULL) return NULL;
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
    return NULL;
  }
  return c;
}

static onyx_status parse_file_text(const char *path, const char *text, size_t size, bool fragment,
                                   void (*warn)(const char *message), onyx__config **out_config,
                                   char *err, size_t err_cap) {
  if (path == NULL || (text == NULL && size > 0) || out_config == NULL)
    return ONYX_STATUS_INVALID_ARGUMENT;
  onyx__config *c = config_new(path);
  if (c == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  onyx_status st = parse_text(c, text ? text : "", size, fragment, warn, err, err_cap);
  if (st != ONYX_STATUS_OK) {
    onyx__config_free(c);
    return st;
  }
  *out_config = c;
  return ONYX_STATUS_OK;
}

onyx_status onyx__config_parse(const char *path, const char *text, size_t size,
                               void (*warn)(const char *message), onyx__config **out_config,
                               char *err, size_t err_cap) {
  return parse_file_text(path, text, size, false, warn, out_config, err, err_cap);
}

onyx_status onyx__config_parse_fragment(const char *path, const char *text, size_t size,
                                        void (*warn)(const char *message),
                                        onyx__config **out_config, char *err, size_t err_cap) {
  return parse_file_text(path, text, size, true, warn, out_config, err, err_cap);
}

onyx_status onyx__config_load(const char *path, void (*warn)(const char *message),
                              onyx__config **out_config, char *err, size_t err_cap) {
  char why[ONYX__FILE_WHY_CAP];
  char *text = NULL;
  size_t size = 0;
  onyx_status st = onyx__file_read_all(path, "", CONFIG_MAX_BYTES, ONYX_STATUS_INVALID_CONFIG,
                                       &text, &size, why, sizeof why);
  if (st != ONYX_STATUS_OK) {
    onyx__errf(err, err_cap, "%s: %s", path, why);
    return st == ONYX_STATUS_OUT_OF_MEMORY    ? st
           : st == ONYX_STATUS_INVALID_CONFIG ? st
                                              : ONYX_STATUS_NOT_FOUND;
  }
  onyx__config *c = NULL;
  st = onyx__config_parse(path, text, size, warn, &c, err, err_cap);
  free(text);
  if (st == ONYX_STATUS_OK) st = onyx__config_discover(c, warn, err, err_cap);
  if (st != ONYX_STATUS_OK) {
    onyx__config_free(c);
    return st;
  }
  *out_config = c;
  return st;
}
