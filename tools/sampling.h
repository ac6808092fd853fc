/* Choosing the next token from logits: greedy, or temperature / top-k / top-p. */
#ifndef ONYX_TOOLS_SAMPLING_H
#define ONYX_TOOLS_SAMPLING_H

#include <stddef.h>
#include <stdint.h>

typedef struct sampler {
  float temperature; /* <= 0: greedy */
  int64_t top_k;     /* 0: off */
  float top_p;       /* >= 1: off */
  uint64_t rng;      /* state, seeded by sampler_seed */
  float *scratch;    /* vocab-sized work arrays, owned */
  int64_t *order;
  int64_t vocab;
} sampler;

/* Prepares a sampler for `vocab` logits; returns 0 on success. */
int sampler_init(sampler *s, int64_t vocab, float temperature, int64_t top_k, float top_p,
                 uint64_t seed);
void sampler_free(sampler *s);

/* The next token id for one row of float32 logits. */
int64_t sampler_pick(sampler *s, const float *logits);

#endif /* ONYX_TOOLS_SAMPLING_H */
