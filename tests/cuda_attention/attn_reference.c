#include "attn_reference.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

double ref_rope(const double *x, int d, const double *cos, const double *sin, int half, int64_t row,
                bool inter) {
  if (d >= 2 * half) return x[d];
  int i = inter ? d / 2 : (d < half ? d : d - half);
  double c = cos[row * half + i], s = sin[row * half + i];
  double x1 = inter ? x[2 * i] : x[i], x2 = inter ? x[2 * i + 1] : x[i + half];
  bool second = inter ? (d & 1) != 0 : d >= half;
  return second ? s * x1 + c * x2 : c * x1 - s * x2;
}

void ref_softmax_row(const double *scores, int64_t n, bool has_sink, double sink, const double *v,
                     int64_t v_rs, int hv, double *out) {
  double m = -INFINITY;
  for (int64_t j = 0; j < n; ++j)
    if (scores[j] > m) m = scores[j];
  for (int d = 0; d < hv; ++d) out[d] = 0.0;
  if (m == -INFINITY) return;
  double mm = has_sink && sink > m ? sink : m;
  double denom = has_sink ? exp(sink - mm) : 0.0;
  for (int64_t j = 0; j < n; ++j)
    if (scores[j] != -INFINITY) denom += exp(scores[j] - mm);
  for (int64_t j = 0; j < n; ++j) {
    if (scores[j] == -INFINITY) continue;
    double w = exp(scores[j] - mm) / denom;
    for (int d = 0; d < hv; ++d) out[d] += w * v[j * v_rs + d];
  }
}

/* Query row s of head h in batch b: its scores against the P keys of group g into
 * `scores`, then its output row. `row` holds the (rotated) query. */
static void gqa_row(const ref_gqa *r, int b, int h, int s, double *row, double *scores) {
  const int total = r->seqlens[b] + 1, past = r->first ? 0 : total - r->S;
  const int g = h / (r->nq / r->nkv);
  const double *qr = r->q + ((int64_t)b * r->S + s) * r->hidden + (int64_t)h * r->H;
  const int64_t pos = past + s;
  const int64_t rpos = r->pos_ids ? (r->first ? 5 + s : past + s + 5 + b) : pos;
  for (int d = 0; d < r->H; ++d)
    row[d] = r->rotary ? ref_rope(qr, d, r->cos, r->sin, r->half, rpos, r->interleaved) : qr[d];
  const int64_t lo = r->window > 0 ? pos - r->window + 1 : 0;
  const int64_t hi = r->causal ? (pos + 1 < total ? pos + 1 : total) : total;
  const double *kg = r->k + ((int64_t)b * r->nkv + g) * r->P * r->H;
  const double *vg = r->v + ((int64_t)b * r->nkv + g) * r->P * r->H;
  for (int64_t j = 0; j < r->P; ++j) {
    scores[j] = -INFINITY;
    if (j < lo || j >= hi) continue;
    double acc = 0.0;
    for (int d = 0; d < r->H; ++d) acc += row[d] * kg[j * r->H + d];
    double x = acc * r->scale;
    if (r->softcap > 0.0f) x = r->softcap * tanh(x / r->softcap);
    if (r->bias != NULL) x += r->bias[((int64_t)b * r->S + s) * r->T + j];
    scores[j] = x;
  }
  const double sk = r->sink != NULL ? r->sink[h] : 0.0;
  double *out = r->y + ((int64_t)b * r->S + s) * r->nq * r->H + (int64_t)h * r->H;
  ref_softmax_row(scores, r->P, r->sink != NULL || r->smooth, sk, vg, r->H, r->H, out);
}

typedef struct gqa_work {
  const ref_gqa *r;
  atomic_int next; /* the next unit, b · nq + h: a unit taken is a unit done */
} gqa_work;

static void *gqa_worker(void *arg) {
  gqa_work *w = arg;
  const ref_gqa *r = w->r;
  double *row = malloc((size_t)r->H * sizeof(double));
  double *scores = malloc((size_t)r->P * sizeof(double));
  if (row != NULL && scores != NULL) /* else the other threads take the units */
    for (int u; (u = atomic_fetch_add(&w->next, 1)) < r->B * r->nq;)
      for (int s = 0; s < r->S; ++s) gqa_row(r, u / r->nq, u % r->nq, s, row, scores);
  free(row);
  free(scores);
  return NULL;
}

bool ref_gqa_run(const ref_gqa *r) {
  enum { MAX_THREADS = 64 };
  gqa_work w = {.r = r};
  atomic_init(&w.next, 0);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int n = cores < 1 ? 1 : cores > MAX_THREADS ? MAX_THREADS : (int)cores;
  if (n > r->B * r->nq) n = r->B * r->nq;
  pthread_t th[MAX_THREADS];
  int started = 0;
  while (started + 1 < n && pthread_create(&th[started], NULL, gqa_worker, &w) == 0) ++started;
  gqa_worker(&w); /* this thread takes units too, and all of them if none started */
  for (int i = 0; i < started; ++i) pthread_join(th[i], NULL);
  return atomic_load(&w.next) >= r->B * r->nq;
}
