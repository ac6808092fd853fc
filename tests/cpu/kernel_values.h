/*
 * Random values for the kernel tests that check 16-bit routes against float64
 * (cpu_silu_mul_test.c, cpu_norm_matmul_test.c, cpu_silu_matmul_test.c): a seeded
 * xorshift stream, float16 and bfloat16 conversions, random tensors with the float64
 * values they hold, and output elements read back as float64.
 */
#ifndef ONYX_KERNEL_VALUES_H
#define ONYX_KERNEL_VALUES_H

#include <stdint.h>

/* The stream's state (never 0 once seeded). */
extern uint64_t kv_rng;
/* Seeds kv_rng from $`env` or the clock and prints the seed under `test`'s name. */
void kv_seed(const char *test, const char *env);
/* Uniform in [lo, hi). */
float kv_rng_float(float lo, float hi);
/* float32 → float16 / bfloat16 bits, round to nearest even (normal range only: tiny
 * values flush); and back to float64. */
uint16_t kv_to_f16(float f);
double kv_from_f16(uint16_t h);
uint16_t kv_to_bf16(float f);
double kv_from_bf16(uint16_t b);
/* A malloc'ed tensor of `n` elements of `dtype` (float32, float16 or bfloat16) in
 * [lo, hi), and the float64 values it holds in `values`. */
void *kv_random(uint32_t dtype, int64_t n, float lo, float hi, double *values);
/* Element i of a float32, float16 or bfloat16 buffer as float64. */
double kv_value(uint32_t dtype, const void *p, int64_t i);
const char *kv_dtype_name(uint32_t dtype);

#endif /* ONYX_KERNEL_VALUES_H */
