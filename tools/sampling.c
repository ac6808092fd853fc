/* Token sampling. Greedy takes the first maximum, as ONNX Runtime GenAI does, so
 * greedy runs compare token for token. */
#include <math.h>
#include <stdlib.h>

#include "sampling.h"

static uint64_t next_u64(uint64_t *state) { /* splitmix64 */
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

int sampler_init(sampler *s, int64_t vocab, float temperature, int64_t top_k, float top_p,
                 uint64_t seed) {
  *s = (sampler){
      .temperature = temperature, .top_k = top_k, .top_p = top_p, .rng = seed, .vocab = vocab};
  s->scratch = malloc((size_t)vocab * sizeof *s->scratch);
  s->order = malloc((size_t)vocab * sizeof *s->order);
  return s->scratch && s->order ? 0 : -1;
}

void sampler_free(sampler *s) {
  free(s->scratch);
  free(s->order);
  s->scratch = NULL;
  s->order = NULL;
}

static const float *sort_key;
static int by_logit_desc(const void *a, const void *b) {
  float x = sort_key[*(const int64_t *)a], y = sort_key[*(const int64_t *)b];
  return (x < y) - (x > y);
}

int64_t sampler_pick(sampler *s, const float *logits) {
  int64_t best = 0;
  for (int64_t i = 1; i < s->vocab; ++i)
    if (logits[i] > logits[best]) best = i;
  if (s->temperature <= 0) return best;
  int64_t n = s->vocab;
  for (int64_t i = 0; i < n; ++i) s->order[i] = i;
  sort_key = logits;
  qsort(s->order, (size_t)n, sizeof *s->order, by_logit_desc);
  if (s->top_k > 0 && s->top_k < n) n = s->top_k;
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    s->scratch[i] = expf((logits[s->order[i]] - logits[best]) / s->temperature);
    sum += s->scratch[i];
  }
  if (s->top_p < 1.0f) { /* keep the smallest prefix whose mass reaches top_p */
    double mass = 0;
    int64_t keep = 0;
    while (keep < n && mass < s->top_p * sum) mass += s->scratch[keep++];
    n = keep > 0 ? keep : 1;
    sum = mass > 0 ? mass : s->scratch[0];
  }
  double u = (double)(next_u64(&s->rng) >> 11) * 0x1.0p-53 * sum;
  for (int64_t i = 0; i < n; ++i) {
    u -= s->scratch[i];
    if (u <= 0) return s->order[i];
  }
  return s->order[n - 1];
}
