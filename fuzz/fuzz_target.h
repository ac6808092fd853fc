/* What every fuzz target defines: libFuzzer's entry point, also called by the replay
 * driver (replay_main.c) in builds without libFuzzer. */
#ifndef ONYX_FUZZ_TARGET_H
#define ONYX_FUZZ_TARGET_H

#include <stddef.h>
#include <stdint.h>

/* One input; returns 0 (libFuzzer reserves other values). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif /* ONYX_FUZZ_TARGET_H */
