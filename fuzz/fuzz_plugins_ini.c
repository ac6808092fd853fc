/*
 * Fuzz target: plugins.ini text through the core's parser and checks (core/config.c
 * over inih: lines, sections, keys, duplicates, byte sizes, tiers, bounds). Parsing
 * only: nothing is loaded, so a fuzzed path never reaches dlopen. Every input must
 * parse or be refused with a message naming the file.
 */
#include <stdlib.h>
#include <string.h>

#include "config_impl.h"
#include "fuzz_target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  onyx__config *c = NULL;
  char err[1024] = "";
  onyx_status st =
      onyx__config_parse("fuzz/plugins.ini", (const char *)data, size, NULL, &c, err, sizeof err);
  if (st == ONYX_STATUS_OK) {
    /* What the runtime reads afterwards must be there. */
    for (size_t i = 0; i < c->provider_count; ++i)
      if (c->providers[i].name == NULL || c->providers[i].path == NULL) abort();
    onyx__config_free(c);
  } else if (c != NULL ||
             (st != ONYX_STATUS_OUT_OF_MEMORY && strncmp(err, "fuzz/plugins.ini", 16))) {
    abort();
  }
  return 0;
}
