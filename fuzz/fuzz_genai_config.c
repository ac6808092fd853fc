/*
 * Fuzz target: genai_config.json text through the generation library's reader
 * (genai/genai_config.c over jansson: types, ranges, patterns, the decoder file name).
 * Every input must parse or be refused with a message; a parsed config must answer
 * its getters.
 */
#include <stdlib.h>

#include "fuzz_target.h"
#include "onyx_genai.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  onyx_genai_config *c = NULL;
  onyx_error *e = NULL;
  onyx_status st =
      onyx_genai_config_parse((const char *)data, size, "fuzz/genai_config.json", &c, &e);
  if (st == ONYX_STATUS_OK) {
    onyx_genai_search search = {.struct_size = sizeof search};
    onyx_genai_model_desc model = {.struct_size = sizeof model};
    onyx_genai_config_search(c, &search);
    onyx_genai_config_model(c, &model);
    if (search.max_length < 1 || search.max_length > model.context_length) abort();
    onyx_genai_config_destroy(c);
  } else if (c != NULL || onyx_error_message(e)[0] == '\0') {
    abort();
  }
  onyx_error_free(e);
  return 0;
}
