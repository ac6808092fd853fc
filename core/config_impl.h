/* plugins.ini: which providers to load, in which order, with which options. */
#ifndef ONYX_CORE_CONFIG_IMPL_H
#define ONYX_CORE_CONFIG_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "onyx_abi.h"

/* Most devices one provider section may list. */
#define ONYX__CONFIG_MAX_DEVICES 16

typedef struct onyx__provider_config {
  char *name; /* from the section [provider.NAME] */
  char *path; /* library path, resolved against the ini file's folder */
  bool enabled;
  uint64_t memory_limit; /* `memory_limit = BYTES`: caps its tier; 0 = none */
  int line;              /* line of the section header, for messages */
  onyx_option *options;  /* `option.KEY = VALUE` entries, KEY without the prefix */
  size_t option_count;
  /* `devices = 1, 0`: which devices of a v3 provider to open, in placement order
   * (device indexes as its factory counts them); none given = all, in its order. */
  uint32_t devices[ONYX__CONFIG_MAX_DEVICES];
  size_t device_count;
} onyx__provider_config;

typedef struct onyx__tier_limit {
  char *tier; /* "host", "cuda:0", ... */
  uint64_t bytes;
} onyx__tier_limit;

typedef struct onyx__config {
  char *path;                       /* the ini file as given */
  char *dir;                        /* its folder: relative provider paths resolve here */
  bool strict;                      /* falling back to the fallback provider is an error */
  char *fallback;                   /* name of the fallback provider ("cpu") */
  uint32_t threads;                 /* host threads; 0 = one per core */
  onyx__provider_config *providers; /* in file order */
  size_t provider_count;
  onyx__tier_limit *tiers; /* [governor] limits */
  size_t tier_count;
  uint64_t requester_limits[ONYX_REQUESTER_COUNT_]; /* 0 = no limit of its own */
} onyx__config;

/* Parses `path`. Warnings (unknown keys) go to `warn` when non-NULL. On failure
 * `err` names the file and line and *out_config is untouched. */
onyx_status onyx__config_load(const char *path, void (*warn)(const char *message),
                              onyx__config **out_config, char *err, size_t err_cap);
/* The same for text already in memory (`size` bytes, no NUL needed); `path` names it
 * in messages and resolves relative provider paths. */
onyx_status onyx__config_parse(const char *path, const char *text, size_t size,
                               void (*warn)(const char *message), onyx__config **out_config,
                               char *err, size_t err_cap);
void onyx__config_free(onyx__config *config);

/* Parses "123", "4KiB", "2 MiB", "8GiB", "1GB" (powers of 1024 or 1000). */
bool onyx__parse_bytes(const char *text, uint64_t *out_bytes);

#endif /* ONYX_CORE_CONFIG_IMPL_H */
