/*
 * plugins.ini under random damage: every mutation of a valid file must load or fail
 * with a message — never crash or leak (the sanitizer builds check the latter).
 * ONYX_TEST_SEED replays a run; the seed is printed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "onyx.h"
#include "test_support.h"

static uint64_t rng_state;
static uint32_t next_rand(void) { /* xorshift64* */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 32);
}

static void mutations_never_crash(void **state) {
  (void)state;
  const char *seed_env = getenv("ONYX_TEST_SEED");
  uint64_t seed = seed_env ? strtoull(seed_env, NULL, 10) : (uint64_t)time(NULL);
  print_message("seed %llu (set ONYX_TEST_SEED to replay)\n", (unsigned long long)seed);
  rng_state = seed | 1;
  char base[1024];
  snprintf(base, sizeof base,
           "[onyx]\nstrict = false\nfallback = cpu\nthreads = 1\n[governor]\nhost = 1GiB\n"
           "requester.kv_cache = 64MiB\n[provider.mock]\npath = %s\nenabled = true\n"
           "option.speed = fast\n[provider.cpu]\npath = %s\n",
           MOCK_GOOD, CPU_PROVIDER);
  static const char alphabet[] = "[]=;#\n .\tabcpqrz019-_/\\\"'";
  int loaded = 0, refused = 0;
  for (int round = 0; round < 400; ++round) {
    char text[1100];
    size_t len = strlen(base);
    memcpy(text, base, len + 1);
    int edits = 1 + (int)(next_rand() % 6);
    for (int k = 0; k < edits; ++k) {
      size_t at = next_rand() % (len ? len : 1);
      switch (next_rand() % 3) {
      case 0:
        text[at] = alphabet[next_rand() % (sizeof alphabet - 1)];
        break; /* replace */
      case 1:  /* delete */
        memmove(text + at, text + at + 1, len - at);
        len--;
        break;
      default: /* duplicate a slice */
        if (len + 16 < sizeof text) {
          size_t n = next_rand() % 16;
          if (at + n > len) n = len - at;
          memmove(text + at + n, text + at, len - at + 1);
          len += n;
        }
      }
    }
    char *path = write_temp_file(".ini", text);
    assert_non_null(path);
    onyx_runtime *rt = NULL;
    onyx_error *e = NULL;
    onyx_status st = onyx_runtime_create(path, &rt, &e);
    if (st == ONYX_STATUS_OK) {
      assert_non_null(rt);
      assert_null(e);
      loaded++;
    } else {
      assert_null(rt);
      assert_true(strlen(onyx_error_message(e)) > 0);
      refused++;
    }
    onyx_error_free(e);
    onyx_runtime_destroy(rt);
    remove_temp_file(path);
  }
  print_message("%d loaded, %d refused with a message\n", loaded, refused);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(mutations_never_crash)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
