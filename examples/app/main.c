/*
 * onyx-example-app — an application of the installed Onyx library: loads a model,
 * runs it once on random float32 inputs, prints each output's shape, first values
 * and sum.
 *
 *   onyx-example-app MODEL [PLUGINS_INI]
 *
 * The plugins.ini is the argument, else $ONYX_CONFIG, else the one of the prefix the
 * app was built against (ONYX_EXAMPLE_PLUGINS_INI, from the build).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <onyx.h>

#ifndef ONYX_EXAMPLE_PLUGINS_INI
#define ONYX_EXAMPLE_PLUGINS_INI "plugins.ini"
#endif

/* Fresh values in [-1, 1) from a fixed seed, so two runs print the same. */
static float next_uniform(uint64_t *state) {
  *state = *state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((*state >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

/* Reports a failed call and frees its error; returns the exit status 1. */
static int fail(const char *what, onyx_error *error) {
  fprintf(stderr, "onyx-example-app: %s: %s\n", what, onyx_error_message(error));
  onyx_error_free(error);
  return 1;
}

/* Input i as a host tensor of its declared shape (symbolic dims as 1), or NULL. */
static float *make_input(const onyx_session *session, size_t i, onyx_tensor *out, uint64_t *seed) {
  onyx_value_info info = onyx_session_input_info(session, i);
  if (info.dtype != ONYX_DTYPE_FLOAT32 || info.rank < 0) {
    fprintf(stderr, "onyx-example-app: input '%s' is not float32 of known rank\n", info.name);
    return NULL;
  }
  *out = (onyx_tensor){.dtype = ONYX_DTYPE_FLOAT32, .rank = (uint32_t)info.rank};
  for (int32_t d = 0; d < info.rank; ++d) out->dims[d] = info.dims[d] < 0 ? 1 : info.dims[d];
  int64_t n = onyx_tensor_numel(out);
  float *data = malloc((size_t)(n > 0 ? n : 1) * sizeof *data);
  if (data == NULL) return NULL;
  for (int64_t k = 0; k < n; ++k) data[k] = next_uniform(seed);
  out->data = data;
  return data;
}

static void print_output(const char *name, const onyx_tensor *t) {
  printf("output '%s' [", name);
  for (uint32_t d = 0; d < t->rank; ++d) printf("%s%lld", d ? "," : "", (long long)t->dims[d]);
  printf("]");
  if (t->dtype != ONYX_DTYPE_FLOAT32) {
    printf(" dtype %u\n", t->dtype);
    return;
  }
  const float *v = t->data;
  double sum = 0;
  for (int64_t k = 0; k < onyx_tensor_numel(t); ++k) {
    if (k < 6) printf(" %.6g", v[k]);
    sum += v[k];
  }
  printf("%s sum %.6g\n", onyx_tensor_numel(t) > 6 ? " ..." : "", sum);
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: onyx-example-app MODEL [PLUGINS_INI]\n");
    return 2;
  }
  const char *env = getenv("ONYX_CONFIG");
  const char *config = argc == 3 ? argv[2] : env && *env ? env : ONYX_EXAMPLE_PLUGINS_INI;
  onyx_runtime *rt = NULL;
  onyx_session *session = NULL;
  onyx_error *error = NULL;
  if (onyx_runtime_create(config, &rt, &error) != ONYX_STATUS_OK) return fail(config, error);
  int rc = 1;
  if (onyx_session_create(rt, argv[1], NULL, &session, &error) != ONYX_STATUS_OK) {
    rc = fail(argv[1], error);
    onyx_runtime_destroy(rt);
    return rc;
  }
  size_t in_count = onyx_session_input_count(session);
  size_t out_count = onyx_session_output_count(session);
  onyx_tensor *inputs = calloc(in_count + 1, sizeof *inputs);
  onyx_tensor *outputs = calloc(out_count + 1, sizeof *outputs);
  uint64_t seed = 42;
  size_t made = 0;
  while (inputs && made < in_count && make_input(session, made, &inputs[made], &seed)) ++made;
  if (outputs && made == in_count) {
    if (onyx_session_run(session, NULL, inputs, in_count, outputs, &error) == ONYX_STATUS_OK) {
      for (size_t o = 0; o < out_count; ++o) {
        print_output(onyx_session_output_info(session, o).name, &outputs[o]);
        onyx_tensor_data_free(outputs[o].data);
      }
      rc = 0;
    } else {
      rc = fail("run", error);
    }
  }
  for (size_t i = 0; i < made; ++i) free(inputs[i].data);
  free(inputs);
  free(outputs);
  onyx_session_destroy(session);
  onyx_runtime_destroy(rt);
  return rc;
}
