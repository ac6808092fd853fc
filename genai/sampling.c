/*
 * Choosing the next id from one row of logits.
 *
 * Greedy takes the first maximum, as ONNX Runtime GenAI does, so greedy runs compare
 * id for id (top_k 1 while sampling is the same choice). Sampling keeps the top_k
 * highest logits, divides by the temperature, and keeps the smallest prefix whose
 * probability reaches top_p. The repetition penalty (Keskar et al., as Hugging Face
 * and GenAI apply it) divides a positive logit of an id already in the sequence by
 * the penalty and multiplies a negative one, before anything else. A temperature of
 * 0 is greedy too.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "checked_math.h"
#include "genai_impl.h"

struct onyx__scored {
  float logit;
  int64_t id;
};

static uint64_t next_u64(uint64_t *state) { /* splitmix64 */
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

onyx_status onyx__sampler_init(onyx__sampler *s, int64_t vocab, const onyx_genai_search *search,
                               uint64_t seed) {
  *s = (onyx__sampler){.greedy =
                           !search->do_sample || search->top_k == 1 || !(search->temperature > 0),
                       .temperature = search->temperature,
                       .top_p = search->top_p,
                       .penalty = search->repetition_penalty,
                       .top_k = search->top_k,
                       .vocab = vocab,
                       .rng = seed};
  size_t scored_bytes = 0;
  s->seen = calloc((size_t)vocab, 1);
  if (!s->greedy && !onyx__ckd_array(&scored_bytes, (size_t)vocab, sizeof *s->scored))
    s->scored = malloc(scored_bytes);
  if (s->seen == NULL || (!s->greedy && s->scored == NULL)) {
    onyx__sampler_free(s);
    return ONYX_STATUS_OUT_OF_MEMORY;
  }
  return ONYX_STATUS_OK;
}

void onyx__sampler_free(onyx__sampler *s) {
  free(s->scored);
  free(s->seen);
  s->scored = NULL;
  s->seen = NULL;
}

void onyx__sampler_note(onyx__sampler *s, int64_t id) {
  if (id >= 0 && id < s->vocab) s->seen[id] = 1;
}

/* Higher logits first; equal logits by id, so the order never depends on qsort. */
static int by_logit_desc(const void *a, const void *b) {
  const struct onyx__scored *x = a, *y = b;
  if (x->logit != y->logit) return x->logit < y->logit ? 1 : -1;
  return (x->id > y->id) - (x->id < y->id);
}

static int64_t sample(onyx__sampler *s, const float *logits, int64_t best) {
  int64_t n = s->vocab;
  for (int64_t i = 0; i < n; ++i) s->scored[i] = (struct onyx__scored){logits[i], i};
  qsort(s->scored, (size_t)n, sizeof *s->scored, by_logit_desc);
  if (s->top_k > 0 && s->top_k < n) n = s->top_k;
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    /* The weights overwrite the logits: only the ids are still needed. */
    float w = expf((s->scored[i].logit - logits[best]) / s->temperature);
    s->scored[i].logit = w;
    sum += w;
  }
  if (s->top_p < 1.0f) {
    double mass = 0;
    int64_t keep = 0;
    while (keep < n && mass < (double)s->top_p * sum) mass += s->scored[keep++].logit;
    n = keep > 0 ? keep : 1;
    sum = mass > 0 ? mass : s->scored[0].logit;
  }
  double u = (double)(next_u64(&s->rng) >> 11) * 0x1.0p-53 * sum;
  for (int64_t i = 0; i < n; ++i) {
    u -= s->scored[i].logit;
    if (u <= 0) return s->scored[i].id;
  }
  return s->scored[n - 1].id;
}

int64_t onyx__sampler_pick(onyx__sampler *s, float *logits) {
  if (s->penalty != 1.0f) {
    for (int64_t i = 0; i < s->vocab; ++i) {
      if (!s->seen[i]) continue;
      logits[i] = logits[i] > 0 ? logits[i] / s->penalty : logits[i] * s->penalty;
    }
  }
  int64_t best = onyx__row_first_max(logits, s->vocab);
  return s->greedy ? best : sample(s, logits, best);
}
