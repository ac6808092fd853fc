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
  /* Discovery (config_dropin.c): where the entry came from. */
  char *file;      /* the file that named it (plugins.ini, a fragment); for a library found
                    * bare in an ONYX_PROVIDER_PATH folder, that folder */
  uint32_t origin; /* onyx_provider_origin */
  /* What the runtime made of it when it did not load it (onyx_provider_state, and
   * why); LOADED with no reason otherwise. */
  uint32_t state;
  char *reason;
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
  /* Drop-ins that discovery left out, their name or library being listed already
   * (state SHADOWED, reason set); never loaded. */
  onyx__provider_config *shadowed;
  size_t shadowed_count;
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

/* A providers.d fragment: one [provider.NAME] section and nothing else, parsed as
 * onyx__config_parse does (`path` names it and resolves a relative library path). */
onyx_status onyx__config_parse_fragment(const char *path, const char *text, size_t size,
                                        void (*warn)(const char *message),
                                        onyx__config **out_config, char *err, size_t err_cap);
/* Adds the drop-ins to a parsed plugins.ini, after its own sections: the fragments of
 * providers.d/ beside it, then each folder of $ONYX_PROVIDER_PATH (config_dropin.c).
 * A malformed fragment is an error naming its file and line. */
onyx_status onyx__config_discover(onyx__config *config, void (*warn)(const char *message),
                                  char *err, size_t err_cap);
/* The runtime's verdict on an entry it could not load: may it carry on without it
 * (a declined device, or any failure of a drop-in, unless strict)? */
bool onyx__config_may_skip(const onyx__config *config, const onyx__provider_config *provider,
                           onyx_status status);
/* Records why the runtime did not load `provider` (status DEVICE_UNAVAILABLE: declined;
 * any other: failed). */
void onyx__config_note_skip(onyx__provider_config *provider, onyx_status status,
                            const char *reason);
void onyx__provider_config_clear(onyx__provider_config *provider);

/* Parses "123", "4KiB", "2 MiB", "8GiB", "1GB" (powers of 1024 or 1000). */
bool onyx__parse_bytes(const char *text, uint64_t *out_bytes);

#endif /* ONYX_CORE_CONFIG_IMPL_H */
