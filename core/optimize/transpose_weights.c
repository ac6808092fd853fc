/*
 * Weights as [N, K]: a product's constant 16-bit weight is stored transposed where the
 * provider that runs the node prefers that layout,
 *
 *   MatMul(A, W)                       -> com.microsoft::FusedMatMul(A, Wt), transB = 1
 *   ai.onyx::RMSNormMatMul(x, s, g, W) -> the same node, transB = 1, W as Wt
 *   ai.onyx::SiluMulMatMul(gu, W)      -> the same node, transB = 1, W as Wt
 *
 * Why: a batch-1 decode GEMV over W [N, K] gives each output row one warp reading
 * contiguous K, with no split-K reduction across blocks, so each kernel's fixed cost is
 * far lower than over [K, N] (the CUDA provider's decode route).
 *
 * The contract with the providers (docs/optimizations.md): a kernel whose `supports`
 * accepts transB = 1 prefers it. The pass asks the kernel index for the node as it is
 * and as it would be (attributes included), and rewrites only where both land on the
 * same provider; a provider that does not take transB = 1 declines, and the node stays.
 * The CPU provider declines (it packs W its own way at create), so on a CPU-only
 * runtime this pass never fires.
 *
 * It fires only where nothing else can tell: W is a constant, rank 2, float16 or
 * bfloat16, K and N multiples of 8 (16-byte rows either way), read by this node alone
 * and no graph output. Runs last: the fusions before it make the nodes it rewrites.
 *
 * Memory: the transpose goes into a new value, booked as weights before its memory is
 * allocated (its own grant, as a folded result); the original is then freed and
 * unbooked (onyx__weights_release shrinks the loader's grant where it was part of it).
 * The peak is the weights plus one weight. The transposed value takes the original's
 * name; the original, released, keeps its [K, N] geometry as "<name>/KN". A booking or
 * an allocation that fails leaves that node as it was (counted as left); the value
 * made for it is kept for the next node, so at most one unread value stays behind.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error_impl.h"
#include "model_load_impl.h" /* onyx__strdup, onyx__free_const */
#include "optimize_impl.h"

/* Edge of the square tiles the transpose walks (see transpose16). */
enum { TW_TILE = 32 };

typedef enum tw_kind { TW_MATMUL, TW_NORM_MATMUL, TW_SILU_MATMUL } tw_kind;

/* A product whose weight may be transposed. */
typedef struct tw_site {
  size_t node;
  size_t slot; /* W's input index */
  int32_t w;
  tw_kind kind;
} tw_site;

/* Everything a rewrite needs, made before the graph changes, so that a failure
 * leaves it as it was. */
typedef struct tw_edit {
  onyx_attr *attrs; /* the node's attributes after the rewrite */
  size_t attr_count;
  size_t own_from;   /* attrs[own_from..] have names made here; the rest are the node's */
  char *op, *domain; /* FusedMatMul's, for a MatMul only */
  char *old_name;    /* the name the original takes, "<name>/KN" */
  int32_t u;         /* the value Wt goes into, -1 until chosen */
  onyx_tensor t;     /* Wt, booked on u */
  bool booked;
} tw_edit;

static bool is_op(const onyx__node *n, const char *domain, const char *op) {
  return !strcmp(n->domain, domain) && !strcmp(n->op_type, op);
}

static const onyx_attr *find_attr(const onyx__node *n, const char *name, size_t *out_index) {
  for (size_t a = 0; a < n->attr_count; ++a)
    if (!strcmp(n->attrs[a].name, name)) {
      if (out_index) *out_index = a;
      return &n->attrs[a];
    }
  return NULL;
}

/* ------------------------------------------------------------ matching */

/* W's own conditions. */
static const char *check_weight(const onyx__graph *g, const uint32_t *readers, int32_t w) {
  const onyx__value *wv = &g->values[w];
  if (wv->is_output) return "W is a graph output";
  if (readers[w] != 1) return "W has another reader";
  if (wv->init.rank != 2) return "W is not a matrix";
  if (wv->init.dtype != ONYX_DTYPE_FLOAT16 && wv->init.dtype != ONYX_DTYPE_BFLOAT16)
    return "W is not float16 or bfloat16";
  if (wv->init.dims[0] <= 0 || wv->init.dims[1] <= 0) return "W is empty";
  if (wv->init.dims[0] % 8 != 0 || wv->init.dims[1] % 8 != 0)
    return "K or N is not a multiple of 8 (16-byte rows)";
  return NULL;
}

/* The site at node i, or why not. *candidate: node i is one of the three products with
 * a constant W not yet transposed (a refusal then counts as left). */
static const char *match_at(const onyx__graph *g, size_t i, const uint32_t *readers, tw_site *s,
                            bool *candidate) {
  const onyx__node *n = &g->nodes[i];
  *candidate = false;
  memset(s, 0, sizeof *s);
  s->node = i;
  if (is_op(n, "", "MatMul") && n->input_count == 2 && n->output_count == 1)
    s->kind = TW_MATMUL, s->slot = 1;
  else if (is_op(n, "ai.onyx", "RMSNormMatMul") && n->input_count == 4)
    s->kind = TW_NORM_MATMUL, s->slot = 3;
  else if (is_op(n, "ai.onyx", "SiluMulMatMul") && n->input_count == 2)
    s->kind = TW_SILU_MATMUL, s->slot = 1;
  else
    return "not a product";
  s->w = n->inputs[s->slot];
  if (s->w < 0 || !onyx__value_is_constant(&g->values[s->w]) || g->values[s->w].init.data == NULL)
    return "W is not a constant";
  const onyx_attr *tb = find_attr(n, "transB", NULL);
  if (s->kind != TW_MATMUL && tb && tb->type == ONYX_ATTR_INT && tb->i != 0)
    return "W is [N, K] already";
  *candidate = true;
  if (s->kind == TW_MATMUL && n->attr_count != 0) return "MatMul has attributes";
  if (tb && tb->type != ONYX_ATTR_INT) return "transB is not an int";
  return check_weight(g, readers, s->w);
}

/* ------------------------------------------------------------ the edit */

static void discard(onyx__opt_ctx *ctx, tw_edit *e) {
  for (size_t a = e->own_from; e->attrs && a < e->attr_count; ++a)
    onyx__free_const(e->attrs[a].name);
  free(e->attrs);
  free(e->op);
  free(e->domain);
  free(e->old_name);
  free(e->t.data);
  if (e->booked) onyx__weights_unbook_value(ctx->session, (size_t)e->u);
  memset(e, 0, sizeof *e);
  e->u = -1;
}

/* Appends an attribute named `name` (copied) to e->attrs, which has room. */
static bool push_attr(tw_edit *e, const char *name, uint32_t type, float f, int64_t i) {
  char *copy = onyx__strdup(name);
  if (copy == NULL) return false;
  e->attrs[e->attr_count++] = (onyx_attr){.name = copy, .type = type, .f = f, .i = i};
  return true;
}

/* The node's attributes after the rewrite: FusedMatMul's for a MatMul (alpha = 1, no
 * transposes but B's), the node's own with transB = 1 for the fused products. */
static onyx_status make_attrs(const onyx__node *n, tw_kind kind, tw_edit *e) {
  static const char *const fused_ints[] = {"transA", "transB", "transBatchA", "transBatchB"};
  size_t tb = 0;
  bool has_tb = kind != TW_MATMUL && find_attr(n, "transB", &tb) != NULL;
  size_t room = kind == TW_MATMUL ? 5 : n->attr_count + !has_tb;
  e->attrs = calloc(room, sizeof *e->attrs);
  if (e->attrs == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  if (kind == TW_MATMUL) { /* the node has none (match_at) */
    bool ok = push_attr(e, "alpha", ONYX_ATTR_FLOAT, 1.0f, 0);
    for (size_t a = 0; ok && a < 4; ++a)
      ok = push_attr(e, fused_ints[a], ONYX_ATTR_INT, 0.0f, a == 1);
    return ok ? ONYX_STATUS_OK : ONYX_STATUS_OUT_OF_MEMORY;
  }
  /* The node's own attributes move over as they are (their strings stay the graph's). */
  if (n->attr_count) memcpy(e->attrs, n->attrs, n->attr_count * sizeof *e->attrs);
  e->attr_count = e->own_from = n->attr_count;
  if (has_tb) {
    e->attrs[tb].i = 1;
    return ONYX_STATUS_OK;
  }
  return push_attr(e, "transB", ONYX_ATTR_INT, 0.0f, 1) ? ONYX_STATUS_OK
                                                        : ONYX_STATUS_OUT_OF_MEMORY;
}

/* Does the provider that runs the node now take it rewritten? */
static const char *check_provider(onyx__opt_ctx *ctx, const tw_site *s, const tw_edit *e) {
  onyx_runtime *rt = ctx->session->runtime;
  const onyx__graph *g = ctx->graph;
  const onyx__node *n = &g->nodes[s->node];
  uint32_t d = g->values[s->w].init.dtype;
  onyx__provider *now = onyx__opt_provider_for(rt, g, n, n->domain, n->op_type, n->opset, n->inputs,
                                               n->input_count, d);
  onyx__node like = *n;
  like.attrs = e->attrs;
  like.attr_count = e->attr_count;
  bool mm = s->kind == TW_MATMUL;
  onyx__provider *after = onyx__opt_provider_for(rt, g, &like, mm ? "com.microsoft" : n->domain,
                                                 mm ? "FusedMatMul" : n->op_type, mm ? 1 : n->opset,
                                                 n->inputs, n->input_count, d);
  if (now == NULL) return "no provider takes it as it is";
  if (after == NULL)
    return mm ? "no provider has a FusedMatMul kernel that takes transB = 1"
              : "no provider takes transB = 1 (W as [N, K])";
  if (after != now) return "another provider would take it transposed";
  return NULL;
}

/* A fresh value name "<base><suffix>" (a number after it when taken), malloc'ed. */
static char *fresh_name(const onyx__graph *g, const char *base, const char *suffix) {
  char name[512];
  for (int i = 0; i < 1000; ++i) {
    if (i == 0)
      snprintf(name, sizeof name, "%s%s", base, suffix);
    else
      snprintf(name, sizeof name, "%s%s_%d", base, suffix, i);
    if (onyx__graph_find_value(g, name) < 0) return onyx__strdup(name);
  }
  return NULL;
}

/* The names the rewrite needs: FusedMatMul's op and domain, the original's new name. */
static onyx_status make_names(const onyx__graph *g, const tw_site *s, tw_edit *e) {
  if (s->kind == TW_MATMUL) {
    e->op = onyx__strdup("FusedMatMul");
    e->domain = onyx__strdup("com.microsoft");
    if (e->op == NULL || e->domain == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  }
  e->old_name = fresh_name(g, g->values[s->w].name, "/KN");
  return e->old_name ? ONYX_STATUS_OK : ONYX_STATUS_OUT_OF_MEMORY;
}

/* dst [n, k] = src [k, n] of 16-bit elements, in 32 x 32 tiles, a stripe of 32 rows of
 * dst at a time: the stripe's writes run along its rows, and the lines of src a tile
 * reads (64 bytes of each of 32 rows) are still in cache for the tile's other columns.
 * Walking the stripes of dst outermost was twice as fast as walking src's rows for the
 * lm_head (K 896, N 151936: about 0.13 s for 272 MB on one core). */
static void transpose16(const uint16_t *src, uint16_t *dst, size_t k, size_t n) {
  for (size_t n0 = 0; n0 < n; n0 += TW_TILE) {
    size_t n1 = n0 + TW_TILE < n ? n0 + TW_TILE : n;
    for (size_t k0 = 0; k0 < k; k0 += TW_TILE) {
      size_t k1 = k0 + TW_TILE < k ? k0 + TW_TILE : k;
      for (size_t c = n0; c < n1; ++c)
        for (size_t r = k0; r < k1; ++r) dst[c * k + r] = src[r * n + c];
    }
  }
}

/* The value for Wt (the spare one a failed node left, else a new one), booked, then
 * allocated and filled. */
static onyx_status make_transposed(onyx__opt_ctx *ctx, const tw_site *s, tw_edit *e,
                                   int32_t *spare) {
  onyx__graph *g = ctx->graph;
  if (*spare < 0) {
    char *name = fresh_name(g, "transpose_weights", "/scratch");
    onyx_status st = name ? onyx__graph_add_value(g, name, spare) : ONYX_STATUS_OUT_OF_MEMORY;
    free(name);
    if (st != ONYX_STATUS_OK) return st;
  }
  e->u = *spare;
  const onyx__value *wv = &g->values[s->w]; /* after add_value moved the values */
  const onyx__node *n = &g->nodes[s->node];
  uint64_t bytes = onyx__init_bytes(wv);
  char label[200], why[ONYX_ERR_CAP] = "";
  snprintf(label, sizeof label, "'%s' as [N, K] (for %s '%s')", wv->name, n->op_type, n->name);
  onyx_status st =
      onyx__weights_book_value(ctx->session, (size_t)e->u, bytes, label, why, sizeof why);
  if (st != ONYX_STATUS_OK) {
    onyx__log(ONYX_LOG_DEBUG, "transpose_weights: %s", why[0] ? why : onyx_status_str(st));
    return st;
  }
  e->booked = true;
  e->t = wv->init;
  e->t.data = aligned_alloc(64, (size_t)((bytes + 63) / 64 * 64));
  if (e->t.data == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  size_t k = (size_t)wv->init.dims[0], nn = (size_t)wv->init.dims[1];
  transpose16(wv->init.data, e->t.data, k, nn);
  e->t.dims[0] = (int64_t)nn;
  e->t.dims[1] = (int64_t)k;
  return ONYX_STATUS_OK;
}

/* The node reads Wt, which takes W's name; the original is freed and unbooked. */
static onyx_status commit(onyx__opt_ctx *ctx, const tw_site *s, tw_edit *e) {
  onyx__graph *g = ctx->graph;
  onyx__node *n = &g->nodes[s->node];
  uint64_t bytes = onyx__init_bytes(&g->values[s->w]);
  onyx__graph_set_initializer(g, e->u, e->t);
  onyx__opt_note_peak(ctx, 0); /* both copies held */
  ctx->stats->bytes_added += bytes;
  n->inputs[s->slot] = e->u;
  onyx__value *u = &g->values[e->u], *w = &g->values[s->w];
  free(u->name);
  u->name = w->name;
  w->name = e->old_name;
  /* On OUT_OF_MEMORY the index is dropped and lookups scan: slower, still right. */
  (void)onyx__graph_index_rebuild(g);
  free(n->attrs); /* its entries moved into e->attrs */
  n->attrs = e->attrs;
  n->attr_count = e->attr_count;
  if (s->kind == TW_MATMUL) {
    free(n->op_type);
    free(n->domain);
    n->op_type = e->op;
    n->domain = e->domain;
    n->opset = 1;
  }
  memset(e, 0, sizeof *e); /* everything is the graph's now */
  return onyx__weights_release(ctx->session, (size_t)s->w, &ctx->stats->bytes_released, ctx->err,
                               ctx->err_cap);
}

/* Rewrites one site, or leaves it as it was and says why in *why. A failure after the
 * graph changed (unbooking the original) is the only error returned. */
static onyx_status rewrite(onyx__opt_ctx *ctx, const tw_site *s, int32_t *spare, const char **why) {
  tw_edit e = {.u = -1};
  onyx_status st = make_attrs(&ctx->graph->nodes[s->node], s->kind, &e);
  if (st == ONYX_STATUS_OK && (*why = check_provider(ctx, s, &e)) != NULL) {
    discard(ctx, &e);
    return ONYX_STATUS_OK;
  }
  if (st == ONYX_STATUS_OK) st = make_names(ctx->graph, s, &e);
  if (st == ONYX_STATUS_OK) st = make_transposed(ctx, s, &e, spare);
  if (st != ONYX_STATUS_OK) {
    *why = st == ONYX_STATUS_TIER_EXHAUSTED ? "the governor refused the transposed copy"
                                            : onyx_status_str(st);
    discard(ctx, &e);
    return ONYX_STATUS_OK;
  }
  *spare = -1;
  return commit(ctx, s, &e);
}

onyx_status onyx__opt_transpose_weights(onyx__opt_ctx *ctx) {
  onyx__graph *g = ctx->graph;
  uint32_t *readers = onyx__value_readers(g);
  if (readers == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  onyx_status st = ONYX_STATUS_OK;
  int32_t spare = -1;
  for (size_t i = 0; i < g->node_count && st == ONYX_STATUS_OK; ++i) {
    tw_site s;
    bool candidate = false;
    const char *why = match_at(g, i, readers, &s, &candidate);
    if (!candidate) continue;
    if (why == NULL) st = rewrite(ctx, &s, &spare, &why);
    if (why == NULL) continue;
    ctx->stats->nodes_skipped++;
    onyx__log(ONYX_LOG_DEBUG, "transpose_weights: %s '%s' (#%zu) stays: %s", g->nodes[i].op_type,
              g->nodes[i].name, i, why);
  }
  free(readers);
  return st;
}
