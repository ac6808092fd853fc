/*
 * The attention engine behind GroupQueryAttention and Attention.
 *
 * Why it is shaped this way:
 * - Decode is memory-bound: a step reads every K and V row once. So a task owns one
 *   (batch, kv head) pair and handles all the query heads of that group together
 *   ("lanes"): each K/V row is loaded (and, for 16-bit types, widened) once and used
 *   by every lane. KV repeats are never materialised.
 * - Softmax is streamed (online): per lane a running max m, a running denominator l
 *   and an unnormalised accumulator acc[Hv], rescaled when the max grows. Scores of a
 *   tile of keys live on the stack, so no route needs an S×T scores buffer and decode
 *   needs no workspace at all.
 * - When there are fewer (batch, kv head, row block) tasks than threads and the rows
 *   are long, the key range is split; each split writes (m, l, acc) partials to a
 *   workspace region and a merge pass combines them.
 * - Q and Y are addressed through strides, so (B, S, N·H), (B, N, S, H) and packed QKV
 *   are read in place: no transposes, no staging.
 * - Inner loops run over the head dimension on contiguous float rows with restrict
 *   pointers and fixed-width blocks, which GCC vectorises at -O2.
 */
#include <math.h>

#include "attn_impl.h"

#define ATTN_KT 64           /* keys per tile */
#define ATTN_LANES 16        /* most (row, head) lanes per task */
#define ATTN_LANE_FLOATS 4096 /* float budget for the lanes' q rows (and again for acc) */
#define ATTN_SPLIT_MIN_KEYS 256 /* a key split covers at least this many keys */

_Static_assert(ATTN_LANE_FLOATS >= ONYX__ATTN_MAX_HEAD, "one lane must fit the largest head");

/* ------------------------------------------------------------------ vector kernels */

static inline float attn_dot(const float *restrict a, const float *restrict b, int64_t n) {
  float s[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) s[k] += a[i + k] * b[i + k];
  float t = 0.0f;
  for (; i < n; ++i) t += a[i] * b[i];
  return t + (((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7])));
}

static inline void attn_axpy(float *restrict y, float a, const float *restrict x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) y[i + k] += a * x[i + k];
  for (; i < n; ++i) y[i] += a * x[i];
}

static inline void attn_scale(float *restrict y, float a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] *= a;
}

/* ------------------------------------------------------------------ plan */

void onyx__attn_plan_make(const onyx__attn_threads *threads, int64_t batch, int64_t nq,
                          int64_t nkv, int64_t sq, int64_t hk, int64_t hv, int64_t max_keys,
                          bool allow_split, onyx__attn_plan *out) {
  int64_t group = nkv > 0 ? nq / nkv : 1;
  if (group < 1) group = 1;
  int64_t hmax = hk > hv ? hk : hv;
  if (hmax < 1) hmax = 1;
  int64_t lanes = ATTN_LANE_FLOATS / hmax;
  if (lanes > ATTN_LANES) lanes = ATTN_LANES;
  if (lanes < 1) lanes = 1;
  out->lanes_heads = group < lanes ? group : lanes;
  int64_t rows = lanes / out->lanes_heads;
  if (rows > sq) rows = sq;
  if (rows < 1) rows = 1;
  out->lanes_rows = rows;
  out->head_chunks = (group + out->lanes_heads - 1) / out->lanes_heads;
  out->row_blocks = sq > 0 ? (sq + rows - 1) / rows : 0;
  out->n_split = 1;
  if (allow_split && threads != NULL && threads->parallel_for != NULL &&
      threads->num_threads > 1) {
    int64_t tasks = batch * nkv * out->head_chunks * out->row_blocks;
    int64_t nt = (int64_t)threads->num_threads;
    if (tasks > 0 && tasks < nt && max_keys >= 2 * ATTN_SPLIT_MIN_KEYS) {
      int64_t want = (nt + tasks - 1) / tasks;
      int64_t cap = max_keys / ATTN_SPLIT_MIN_KEYS;
      out->n_split = want < cap ? want : cap;
      if (out->n_split < 1) out->n_split = 1;
    }
  }
}

uint64_t onyx__attn_partials_bytes(const onyx__attn_plan *plan, int64_t batch, int64_t nq,
                                   int64_t sq, int64_t hv) {
  if (plan->n_split <= 1) return 0;
  return (uint64_t)batch * (uint64_t)nq * (uint64_t)sq * (uint64_t)plan->n_split *
         (uint64_t)(hv + 2) * sizeof(float);
}

/* ------------------------------------------------------------------ rows */

typedef struct attn_ctx {
  const onyx__attn_problem *p;
  const onyx__attn_plan *plan;
  int64_t group;
  size_t esize;
} attn_ctx;

static int64_t attn_pos(const onyx__attn_problem *p, int64_t b,
                        const onyx__attn_batch_geom *geom, int64_t s) {
  if (p->pos_ids != NULL) return p->pos_ids[b * p->pos_bs + s * p->pos_ss] + s * p->pos_add_s;
  return geom->rope_pos0 + s;
}

/* Key (which = 0) or value (1) row j of (b, g) as float32: a pointer into the tensor
 * when it is float32 and needs no rotation, else widened (and rotated) into buf. */
static const float *attn_kv_row(const attn_ctx *c, int which, int64_t b, int64_t g,
                                const onyx__attn_batch_geom *geom, int64_t j, float *buf) {
  const onyx__attn_problem *p = c->p;
  const onyx__attn_kv_seg *sg = &p->seg[0];
  int64_t row = j;
  bool rotate = false;
  if (j >= geom->seg0_len) {
    sg = &p->seg[1];
    row = j - geom->seg0_len;
    rotate = which == 0 && p->rope != NULL;
  }
  const unsigned char *src;
  int64_t n;
  if (which == 0) {
    src = onyx__attn_at(sg->k, b * sg->k_bs + g * sg->k_gs + row * sg->k_rs, c->esize);
    n = p->hk;
  } else {
    src = onyx__attn_at(sg->v, b * sg->v_bs + g * sg->v_gs + row * sg->v_rs, c->esize);
    n = p->hv;
  }
  if (p->dtype == ONYX_DTYPE_FLOAT32 && !rotate) return (const float *)(const void *)src;
  onyx__attn_load_row(p->dtype, src, n, buf);
  if (rotate) onyx__attn_rope_row(p->rope, attn_pos(p, b, geom, row), buf);
  return buf;
}

/* The sink of head h, if the problem has one. */
static bool attn_sink(const onyx__attn_problem *p, int64_t h, float *out) {
  if (p->sink != NULL) {
    *out = onyx__attn_load(p->dtype, p->sink, h);
    return true;
  }
  if (p->smooth) {
    *out = 0.0f;
    return true;
  }
  return false;
}

/* Softmax normalisation of a finished row: p_j = exp(x_j − mm) / denom. */
typedef struct attn_norm {
  bool empty; /* no key contributed: the row is zeros */
  float mm, denom;
} attn_norm;

static attn_norm attn_norm_make(const onyx__attn_problem *p, int64_t h, float m, float l) {
  attn_norm n = {true, 0.0f, 1.0f};
  if (m == -INFINITY || !(l > 0.0f)) return n;
  float sink = 0.0f;
  bool has_sink = attn_sink(p, h, &sink);
  n.empty = false;
  n.mm = (has_sink && sink > m) ? sink : m;
  n.denom = l * expf(m - n.mm) + (has_sink ? expf(sink - n.mm) : 0.0f);
  return n;
}

/* Writes y(b, s, h) = acc · exp(m − mm) / denom; acc is clobbered. */
static void attn_finish(const attn_ctx *c, int64_t b, int64_t h, int64_t s, float m, float l,
                        float *acc) {
  const onyx__attn_problem *p = c->p;
  attn_norm n = attn_norm_make(p, h, m, l);
  if (n.empty)
    memset(acc, 0, (size_t)p->hv * sizeof(float));
  else
    attn_scale(acc, expf(m - n.mm) / n.denom, p->hv);
  unsigned char *dst = onyx__attn_at_mut(p->y, b * p->y_bs + s * p->y_ss + h * p->y_hs, c->esize);
  onyx__attn_store_row(p->dtype, dst, p->hv, acc);
}

/* ------------------------------------------------------------------ lanes */

typedef struct attn_lane {
  int64_t h, s;   /* query head and row */
  int64_t lo, hi; /* keys [lo, hi) the row may attend to */
  int64_t mask_off; /* element offset of mask row (b, h, s) */
  float m, l;
  bool active; /* has probabilities in the current tile */
} attn_lane;

/* x plus the mask of key j of a lane (−inf where a boolean mask is false). */
static inline float attn_mask_add(const onyx__attn_problem *p, const attn_lane *ln, int64_t j,
                                  float x) {
  if (p->mask == NULL) return x;
  int64_t at = ln->mask_off + j * p->m_js;
  if (p->mask_dtype == ONYX_DTYPE_BOOL) return ((const uint8_t *)p->mask)[at] == 0 ? -INFINITY : x;
  return x + onyx__attn_load(p->mask_dtype, p->mask, at);
}

static inline float attn_softcap(const onyx__attn_problem *p, float x) {
  return p->softcap > 0.0f ? p->softcap * tanhf(x / p->softcap) : x;
}

/* Score after softcap and mask, from the scaled score of key j. */
static inline float attn_post(const onyx__attn_problem *p, const attn_lane *ln, int64_t j,
                              float x) {
  return attn_mask_add(p, ln, j, attn_softcap(p, x));
}

/* Writes the qk output row of a finished lane (see onyx__attn_qk_mode). */
static void attn_qk_row(const attn_ctx *c, int64_t b, int64_t g,
                        const onyx__attn_batch_geom *geom, const attn_lane *ln,
                        const float *q, float *kbuf) {
  const onyx__attn_problem *p = c->p;
  int64_t cols = p->qk_cols;
  unsigned char *row =
      onyx__attn_at_mut(p->qk, ((b * p->nq + ln->h) * p->sq + ln->s) * cols, c->esize);
  attn_norm n = attn_norm_make(p, ln->h, ln->m, ln->l);
  bool gqa = p->qk_mode == ONYX__ATTN_QK_GQA_SCORES || p->qk_mode == ONYX__ATTN_QK_GQA_PROBS;
  for (int64_t j = 0; j < cols; ++j) {
    bool inside = j >= ln->lo && j < ln->hi;
    float out = 0.0f;
    if (gqa) {
      if (inside) {
        float x = attn_post(p, ln, j, attn_dot(q, attn_kv_row(c, 0, b, g, geom, j, kbuf), p->hk) *
                                          p->scale);
        if (p->qk_mode == ONYX__ATTN_QK_GQA_SCORES)
          out = x;
        else
          out = (n.empty || x == -INFINITY) ? 0.0f : expf(x - n.mm) / n.denom;
      }
    } else if (j < geom->kv_len) {
      float raw = attn_dot(q, attn_kv_row(c, 0, b, g, geom, j, kbuf), p->hk) * p->scale;
      float capped = attn_softcap(p, raw);
      float masked = inside ? attn_mask_add(p, ln, j, capped) : -INFINITY;
      switch (p->qk_mode) {
      case ONYX__ATTN_QK_RAW:
        out = raw;
        break;
      case ONYX__ATTN_QK_SOFTCAP:
        out = capped;
        break;
      case ONYX__ATTN_QK_MASKED:
        out = masked;
        break;
      default:
        out = (n.empty || masked == -INFINITY) ? 0.0f : expf(masked - n.mm) / n.denom;
        break;
      }
    } else if (p->qk_mode == ONYX__ATTN_QK_MASKED) {
      out = -INFINITY;
    }
    onyx__attn_store(p->dtype, row, j, out);
  }
}

/* One task: (batch b, kv head g, head chunk, row block, key split). */
static void attn_task(void *arg, size_t index) {
  const attn_ctx *c = arg;
  const onyx__attn_problem *p = c->p;
  const onyx__attn_plan *plan = c->plan;
  int64_t idx = (int64_t)index;
  int64_t split = idx % plan->n_split;
  idx /= plan->n_split;
  int64_t rb = idx % plan->row_blocks;
  idx /= plan->row_blocks;
  int64_t hc = idx % plan->head_chunks;
  idx /= plan->head_chunks;
  int64_t g = idx % p->nkv;
  int64_t b = idx / p->nkv;

  onyx__attn_batch_geom geom;
  p->geom(p->geom_arg, b, &geom);

  int64_t h0 = g * c->group + hc * plan->lanes_heads;
  int64_t nh = c->group - hc * plan->lanes_heads;
  if (nh > plan->lanes_heads) nh = plan->lanes_heads;
  int64_t s0 = rb * plan->lanes_rows;
  int64_t nr = p->sq - s0;
  if (nr > plan->lanes_rows) nr = plan->lanes_rows;
  int64_t nl = nh * nr;
  int64_t hk = p->hk, hv = p->hv;

  float qbuf[ATTN_LANE_FLOATS];
  float acc[ATTN_LANE_FLOATS];
  float kbuf[ONYX__ATTN_MAX_HEAD];
  float vbuf[ONYX__ATTN_MAX_HEAD];
  float sc[ATTN_LANES][ATTN_KT];
  attn_lane lanes[ATTN_LANES];

  int64_t ulo = INT64_MAX, uhi = 0;
  for (int64_t r = 0; r < nr; ++r) {
    for (int64_t hh = 0; hh < nh; ++hh) {
      int64_t li = r * nh + hh;
      attn_lane *ln = &lanes[li];
      ln->h = h0 + hh;
      ln->s = s0 + r;
      float *q = qbuf + li * hk;
      const unsigned char *src =
          onyx__attn_at(p->q, b * p->q_bs + ln->s * p->q_ss + ln->h * p->q_hs, c->esize);
      onyx__attn_load_row(p->dtype, src, hk, q);
      if (p->rope != NULL) onyx__attn_rope_row(p->rope, attn_pos(p, b, &geom, ln->s), q);
      int64_t pos = geom.q_pos0 + ln->s;
      int64_t hi = geom.key_limit < p->mask_len ? geom.key_limit : p->mask_len;
      if (p->causal && hi > pos + 1) hi = pos + 1;
      int64_t lo = 0;
      if (p->window > 0 && pos - p->window + 1 > lo) lo = pos - p->window + 1;
      if (hi < lo) hi = lo;
      ln->lo = lo;
      ln->hi = hi;
      ln->mask_off = b * p->m_bs + ln->h * p->m_hs + ln->s * p->m_ss;
      ln->m = -INFINITY;
      ln->l = 0.0f;
      memset(acc + li * hv, 0, (size_t)hv * sizeof(float));
      if (lo < hi) {
        if (lo < ulo) ulo = lo;
        if (hi > uhi) uhi = hi;
      }
    }
  }

  int64_t klo = 0, khi = 0;
  if (ulo < uhi) {
    int64_t piece = (uhi - ulo + plan->n_split - 1) / plan->n_split;
    klo = ulo + split * piece;
    khi = klo + piece < uhi ? klo + piece : uhi;
  }

  for (int64_t j0 = klo; j0 < khi; j0 += ATTN_KT) {
    int64_t jn = khi - j0 < ATTN_KT ? khi - j0 : ATTN_KT;
    /* Scores: each key row is loaded once and dotted with every lane. */
    for (int64_t jj = 0; jj < jn; ++jj) {
      int64_t j = j0 + jj;
      const float *kr = NULL;
      for (int64_t li = 0; li < nl; ++li) {
        if (j >= lanes[li].lo && j < lanes[li].hi) {
          if (kr == NULL) kr = attn_kv_row(c, 0, b, g, &geom, j, kbuf);
          sc[li][jj] = attn_dot(qbuf + li * hk, kr, hk) * p->scale;
        } else {
          sc[li][jj] = -INFINITY;
        }
      }
    }
    /* Softcap, mask, and the online softmax update per lane. */
    for (int64_t li = 0; li < nl; ++li) {
      attn_lane *ln = &lanes[li];
      float *row = sc[li];
      float tmax = -INFINITY;
      for (int64_t jj = 0; jj < jn; ++jj) {
        if (row[jj] == -INFINITY) continue;
        row[jj] = attn_post(p, ln, j0 + jj, row[jj]);
        if (row[jj] > tmax) tmax = row[jj];
      }
      ln->active = tmax != -INFINITY;
      if (!ln->active) continue;
      float mnew = ln->m > tmax ? ln->m : tmax;
      if (mnew != ln->m) {
        float alpha = expf(ln->m - mnew); /* 0 when m was −inf */
        ln->l *= alpha;
        attn_scale(acc + li * hv, alpha, hv);
        ln->m = mnew;
      }
      float sum = 0.0f;
      for (int64_t jj = 0; jj < jn; ++jj) {
        float e = row[jj] == -INFINITY ? 0.0f : expf(row[jj] - mnew);
        row[jj] = e;
        sum += e;
      }
      ln->l += sum;
    }
    /* P·V: each value row is loaded once and added into every lane. */
    for (int64_t jj = 0; jj < jn; ++jj) {
      const float *vr = NULL;
      for (int64_t li = 0; li < nl; ++li) {
        if (!lanes[li].active) continue;
        float w = sc[li][jj];
        if (w == 0.0f) continue;
        if (vr == NULL) vr = attn_kv_row(c, 1, b, g, &geom, j0 + jj, vbuf);
        attn_axpy(acc + li * hv, w, vr, hv);
      }
    }
  }

  if (plan->n_split > 1) {
    for (int64_t li = 0; li < nl; ++li) {
      const attn_lane *ln = &lanes[li];
      float *dst = p->partials +
                   (((b * p->nq + ln->h) * p->sq + ln->s) * plan->n_split + split) * (hv + 2);
      dst[0] = ln->m;
      dst[1] = ln->l;
      memcpy(dst + 2, acc + li * hv, (size_t)hv * sizeof(float));
    }
    return;
  }
  for (int64_t li = 0; li < nl; ++li) {
    const attn_lane *ln = &lanes[li];
    if (p->qk_mode != ONYX__ATTN_QK_NONE) attn_qk_row(c, b, g, &geom, ln, qbuf + li * hk, kbuf);
    attn_finish(c, b, ln->h, ln->s, ln->m, ln->l, acc + li * hv);
  }
}

/* Merges the split-K partials of every row of (b, h). */
static void attn_merge(void *arg, size_t index) {
  const attn_ctx *c = arg;
  const onyx__attn_problem *p = c->p;
  int64_t ns = c->plan->n_split, hv = p->hv;
  int64_t b = (int64_t)index / p->nq, h = (int64_t)index % p->nq;
  float acc[ONYX__ATTN_MAX_HEAD];
  for (int64_t s = 0; s < p->sq; ++s) {
    const float *part = p->partials + ((b * p->nq + h) * p->sq + s) * ns * (hv + 2);
    float m = -INFINITY;
    for (int64_t i = 0; i < ns; ++i)
      if (part[i * (hv + 2)] > m) m = part[i * (hv + 2)];
    float l = 0.0f;
    memset(acc, 0, (size_t)hv * sizeof(float));
    if (m != -INFINITY) {
      for (int64_t i = 0; i < ns; ++i) {
        const float *pi = part + i * (hv + 2);
        if (pi[0] == -INFINITY) continue;
        float w = expf(pi[0] - m);
        l += pi[1] * w;
        attn_axpy(acc, w, pi + 2, hv);
      }
    }
    attn_finish(c, b, h, s, m, l, acc);
  }
}

void onyx__attn_run(const onyx__attn_threads *threads, const onyx__attn_problem *p,
                    const onyx__attn_plan *plan) {
  attn_ctx c;
  c.p = p;
  c.plan = plan;
  c.group = p->nq / p->nkv;
  c.esize = onyx_dtype_size(p->dtype);
  size_t tasks = (size_t)(p->batch * p->nkv * plan->head_chunks * plan->row_blocks * plan->n_split);
  onyx__attn_parallel_for(threads, tasks, attn_task, &c);
  if (plan->n_split > 1) onyx__attn_parallel_for(threads, (size_t)(p->batch * p->nq), attn_merge, &c);
}
