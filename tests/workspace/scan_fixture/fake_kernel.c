/* Fixture for the hidden-pool scanner (tests/workspace/alloc_scan_self_test.cmake):
 * never compiled. Line numbers matter to the test.
 * A comment that mentions malloc(64) is not a call. */
#include <stdlib.h>

#define ALLOC_SCRATCH(n) malloc(n)

typedef struct fake_state {
  int n;
} fake_state;

static const char *doc = "calls malloc(n) per call";
static const char quote = '(';

static int fake_create(void **out) {
  /* Kernel state made once at create: allowed by the fixture's list. */
  (void)doc;
  (void)quote;
  fake_state *s =
      calloc(1, sizeof *s);
  *out = s;
  return s != NULL;
}

static int fake_compute(void *state) {
  fake_state *s = state;
  // malloc(s->n) in a line comment is not a call either
  float *scratch =
      malloc(sizeof(float) * (size_t)s->n);
  float *more = ALLOC_SCRATCH(16);
  free(scratch);
  free(more);
  return 0;
}
