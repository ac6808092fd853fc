/*
 * What the fused-pass tests (norm_matmul_test.c, silu_matmul_test.c) share: a seeded
 * random stream, a runtime with the CPU provider, sessions from an ONNX model built in
 * an arena, a pass's statistics, random float32 initializers and inputs, and the check
 * that an optimized and an unoptimized session give the same bits.
 */
#ifndef ONYX_PASS_FIXTURE_H
#define ONYX_PASS_FIXTURE_H

#include <stdint.h>

#include "loader_test_util.h"
#include "onyx.h"

/* The xorshift64 state; a test seeds it (never 0) before its first draw. */
extern uint64_t fx_rng;
/* The next state of fx_rng (one xorshift64 step). */
uint64_t fx_next(void);
/* Uniform in [-1, 1). */
float fx_frand(void);
/* Seeds fx_rng from $`env` or the clock, and prints the seed under `test`'s name. */
void fx_seed(const char *test, const char *env);

/* A runtime from `ini`, a plugins.ini text. */
onyx_runtime *fx_runtime_from(const char *ini);
onyx_runtime *fx_runtime_cpu(void);
/* A session of `m` with `disable` (may be NULL) as disable_optimizations. */
onyx_session *fx_session(onyx_runtime *rt, lt_arena *a, const Onnx__ModelProto *m,
                         const char *disable);
onyx_optimization_stats fx_pass_stats(const onyx_session *s, const char *pass);
/* A float32 initializer of offset + scale · fx_frand() per element. */
void fx_float_init(lt_arena *a, Onnx__GraphProto *g, const char *name, size_t rank,
                   const int64_t *dims, float scale, float offset);
/* Runs both sessions three times on the same fresh float32 inputs: every output the same
 * to the bit. */
void fx_expect_same_outputs(onyx_session *opt, onyx_session *plain);
/* The same, every element within rel · (1 + |unfused|) (0: equal values). */
void fx_expect_close_outputs(onyx_session *opt, onyx_session *plain, float rel);
/* `pass` fused one pair in `opt` (a node removed, none left, no weight bytes added) and
 * is off in `plain`, whose outputs `opt` gives to the bit. */
void fx_expect_one_fusion(onyx_session *opt, onyx_session *plain, const char *pass);

#endif /* ONYX_PASS_FIXTURE_H */
