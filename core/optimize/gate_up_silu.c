/*
 * Gate/up merge and SiLU·mul fusion: a decoder MLP as the exporters write it,
 *
 *   g = X·Wg    u = X·Wu    s = Sigmoid(g)    a = Mul(g, s)    y = Mul(a, u)
 *
 * (MatMul, or com.microsoft MatMulNBits for quantized weights; either operand order
 * of each Mul) becomes one product over the weights concatenated along N and one
 * ai.onyx::SiluMul (docs/ops.md):
 *
 *   h = X·[Wg | Wu]    y = SiluMul(h)
 *
 * five kernels become two, and X is read once. On a GPU a decode step is bound by
 * kernel count, so this matters there most.
 *
 * It fires only when nothing else can see the difference: every intermediate (g, s,
 * a, u) has no other reader and is no graph output; both weights are constants of
 * the same geometry and type (and for MatMulNBits the same K, N, bits, block_size and
 * accuracy_level, the same kinds of scales, zero points and bias, no g_idx); and the
 * provider that would run the final Mul has a SiluMul kernel for the type, while the
 * one that would run the product takes the merged one too (the kernel index is read
 * as placement will read it, so a runtime without SiluMul never sees the op).
 *
 * The merged weights are new initializers, booked as weights before their memory is
 * allocated (as folded results are); the originals are freed and unbooked as soon as
 * nothing reads them, pattern by pattern, so the peak is the weights plus one
 * layer's gate and up. A booking the governor refuses leaves that MLP as it was.
 *
 * float32 on the CPU gives the same bits: each column of the merged product sums the
 * same products in the same order, and SiluMul computes sigmoid, then a·s, then ·u,
 * as the three nodes did.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error_impl.h"
#include "model_load_impl.h" /* onyx__strdup */
#include "optimize_impl.h"

/* MatMulNBits inputs: A, B, scales, zero_points, g_idx, bias. */
enum { NB_A, NB_B, NB_SCALES, NB_ZP, NB_GIDX, NB_BIAS, NB_SLOTS };

/* The weight inputs a merge concatenates, per product kind. */
static const size_t matmul_slots[] = {1};
static const size_t nbits_slots[] = {NB_B, NB_SCALES, NB_ZP, NB_BIAS};

typedef struct gus_match {
  size_t gate, up, sig, act, fin; /* node indices */
  int32_t g, u;                   /* the two products' outputs */
  bool nbits;
  uint32_t dtype; /* the activations' type */
  int64_t n;      /* N of each product */
} gus_match;

static bool is_op(const onyx__node *n, const char *domain, const char *op) {
  return !strcmp(n->domain, domain) && !strcmp(n->op_type, op);
}

static int32_t input_at(const onyx__node *n, size_t k) {
  return k < n->input_count ? n->inputs[k] : -1;
}

static bool float_type(uint32_t d) {
  return d == ONYX_DTYPE_FLOAT32 || d == ONYX_DTYPE_FLOAT16 || d == ONYX_DTYPE_BFLOAT16;
}

/* A constant whose data is at hand. */
static bool usable_constant(const onyx__value *v) {
  return onyx__value_is_constant(v) && (v->init.data != NULL || onyx__init_bytes(v) == 0);
}

/* Is n a plain two-input Mul (no legacy broadcast attributes) of x and y, in either
 * order? */
static bool mul_of(const onyx__node *n, int32_t x, int32_t y) {
  if (!is_op(n, "", "Mul") || n->input_count != 2 || n->output_count != 1 || n->attr_count != 0 ||
      n->outputs[0] < 0)
    return false;
  return (n->inputs[0] == x && n->inputs[1] == y) || (n->inputs[0] == y && n->inputs[1] == x);
}

/* An intermediate that only the pattern reads. */
static bool private_value(const onyx__graph *g, const uint32_t *readers, int32_t v,
                          uint32_t count) {
  return v >= 0 && readers[v] == count && !g->values[v].is_output;
}

static int64_t attr_int(const onyx__node *n, const char *name, int64_t dflt, bool *present) {
  for (size_t a = 0; a < n->attr_count; ++a)
    if (n->attrs[a].type == ONYX_ATTR_INT && !strcmp(n->attrs[a].name, name)) {
      if (present) *present = true;
      return n->attrs[a].i;
    }
  if (present) *present = false;
  return dflt;
}

/* ------------------------------------------------------------ matching */

/* Two MatMul weights [K, N] of one float type. */
static const char *check_matmul(const onyx__graph *g, const onyx__node *a, const onyx__node *b,
                                gus_match *m) {
  if (a->input_count != 2 || b->input_count != 2) return "a product has extra inputs";
  const onyx__value *wa = &g->values[a->inputs[1]], *wb = &g->values[b->inputs[1]];
  if (!usable_constant(wa) || !usable_constant(wb)) return "a weight is not a constant";
  if (wa->init.rank != 2 || wb->init.rank != 2) return "a weight is not a matrix";
  if (wa->init.dims[0] <= 0 || wa->init.dims[1] <= 0) return "a weight is empty";
  if (wa->init.dims[0] != wb->init.dims[0]) return "the weights' K differ";
  if (wa->init.dims[1] != wb->init.dims[1]) return "the weights' N differ";
  if (wa->init.dtype != wb->init.dtype) return "the weights' types differ";
  if (!float_type(wa->init.dtype)) return "the weights are not float32, float16 or bfloat16";
  m->dtype = wa->init.dtype;
  m->n = wa->init.dims[1];
  return NULL;
}

/* Input slot k of two MatMulNBits: both absent, or constants of one type and
 * geometry with N leading (dims[0] = N, or a flat N·rest). */
static const char *check_nbits_slot(const onyx__graph *g, const onyx__node *a, const onyx__node *b,
                                    size_t k, int64_t n) {
  int32_t va = input_at(a, k), vb = input_at(b, k);
  if ((va < 0) != (vb < 0)) return "one product has an input the other lacks";
  if (va < 0) return NULL;
  const onyx_tensor *ta = &g->values[va].init, *tb = &g->values[vb].init;
  if (!usable_constant(&g->values[va]) || !usable_constant(&g->values[vb]))
    return "a weight, scale, zero point or bias is not a constant";
  if (ta->dtype != tb->dtype) return "the types of a weight input differ";
  if (ta->rank != tb->rank || memcmp(ta->dims, tb->dims, ta->rank * sizeof ta->dims[0]) != 0)
    return "the shapes of a weight input differ";
  int64_t numel = onyx_tensor_numel(ta);
  if (ta->rank < 1 || n <= 0 || numel % n != 0 || (ta->rank > 1 && ta->dims[0] != n))
    return "a weight input is not laid out by N";
  return NULL;
}

/* Two MatMulNBits of the same K, N, bits, block_size, accuracy_level and input kinds,
 * without g_idx. */
static const char *check_nbits(const onyx__graph *g, const onyx__node *a, const onyx__node *b,
                               gus_match *m) {
  static const char *const same[] = {"K", "N", "bits", "block_size", "accuracy_level"};
  static const int64_t dflt[] = {-1, -1, 4, -1, 0};
  for (size_t i = 0; i < 5; ++i)
    if (attr_int(a, same[i], dflt[i], NULL) != attr_int(b, same[i], dflt[i], NULL))
      return i == 0 ? "the weights' K differ" : i == 2 ? "the bits differ" : "attributes differ";
  bool has_n = false;
  int64_t n = attr_int(a, "N", -1, &has_n);
  if (!has_n || n <= 0) return "no N attribute";
  if (input_at(a, NB_GIDX) >= 0 || input_at(b, NB_GIDX) >= 0) return "g_idx is present";
  if (a->input_count > NB_SLOTS || b->input_count > NB_SLOTS) return "unknown extra inputs";
  if (input_at(a, NB_SCALES) < 0) return "no scales";
  for (size_t s = 0; s < sizeof nbits_slots / sizeof nbits_slots[0]; ++s) {
    const char *why = check_nbits_slot(g, a, b, nbits_slots[s], n);
    if (why) return why;
  }
  uint32_t d = g->values[input_at(a, NB_SCALES)].init.dtype;
  if (!float_type(d)) return "the scales are not float32, float16 or bfloat16";
  int32_t zp = input_at(a, NB_ZP), bias = input_at(a, NB_BIAS);
  if (zp >= 0 && g->values[zp].init.dtype != ONYX_DTYPE_UINT8 && g->values[zp].init.dtype != d)
    return "zero points of an unknown type";
  if (bias >= 0 && g->values[bias].init.dtype != d) return "the bias type differs from the scales";
  m->dtype = d;
  m->n = n;
  return NULL;
}

/* The products g and u come from: same op, same X, weights that concatenate. */
static const char *check_products(const onyx__graph *g, gus_match *m) {
  int32_t pg = g->values[m->g].producer, pu = g->values[m->u].producer;
  if (pg < 0 || pu < 0 || pg == pu) return "gate or up is not a product";
  const onyx__node *a = &g->nodes[pg], *b = &g->nodes[pu];
  m->gate = (size_t)pg;
  m->up = (size_t)pu;
  bool mm = is_op(a, "", "MatMul") && is_op(b, "", "MatMul");
  m->nbits = is_op(a, "com.microsoft", "MatMulNBits") && is_op(b, "com.microsoft", "MatMulNBits");
  if (!mm && !m->nbits) return "gate and up are not both MatMul or both MatMulNBits";
  if (a->output_count != 1 || b->output_count != 1) return "a product has extra outputs";
  if (a->input_count < 2 || b->input_count < 2 || a->inputs[0] < 0 ||
      a->inputs[0] != b->inputs[0] || a->inputs[1] < 0 || b->inputs[1] < 0)
    return "gate and up read different inputs";
  const char *why = m->nbits ? check_nbits(g, a, b, m) : check_matmul(g, a, b, m);
  if (why) return why;
  uint32_t xd = g->values[a->inputs[0]].dtype;
  if (xd != ONYX_DTYPE_UNDEFINED && xd != m->dtype) return "X's type differs from the weights'";
  return NULL;
}

/*
 * The pattern around Sigmoid node i, or why not (NULL when it matched). `reader[v]`
 * is a node reading v (the only one when readers[v] is 1). *candidate says whether
 * the Sigmoid reads a product's output at all (a refusal then counts as skipped).
 */
static const char *match_at(const onyx__graph *g, size_t i, const uint32_t *readers,
                            const int32_t *reader, gus_match *m, bool *candidate) {
  const onyx__node *sig = &g->nodes[i];
  *candidate = false;
  if (!is_op(sig, "", "Sigmoid") || sig->input_count != 1 || sig->output_count != 1 ||
      sig->inputs[0] < 0 || sig->outputs[0] < 0)
    return "not a Sigmoid";
  memset(m, 0, sizeof *m);
  m->sig = i;
  m->g = sig->inputs[0];
  int32_t s = sig->outputs[0], pg = g->values[m->g].producer;
  *candidate = pg >= 0 && (is_op(&g->nodes[pg], "", "MatMul") ||
                           is_op(&g->nodes[pg], "com.microsoft", "MatMulNBits"));
  if (!*candidate) return "its input is no product";
  if (!private_value(g, readers, s, 1) || !private_value(g, readers, m->g, 2))
    return "the gate or its sigmoid has another reader or is a graph output";
  m->act = (size_t)reader[s];
  const onyx__node *act = &g->nodes[m->act];
  if (!mul_of(act, m->g, s)) return "the sigmoid does not feed Mul(gate, sigmoid)";
  int32_t a = act->outputs[0];
  if (!private_value(g, readers, a, 1)) return "the activation has another reader or is an output";
  m->fin = (size_t)reader[a];
  const onyx__node *fin = &g->nodes[m->fin];
  if (!is_op(fin, "", "Mul") || fin->input_count != 2) return "the activation feeds no Mul";
  m->u = fin->inputs[0] == a ? fin->inputs[1] : fin->inputs[0];
  if (!mul_of(fin, a, m->u) || m->u == a) return "the activation feeds no Mul";
  if (!private_value(g, readers, m->u, 1)) return "up has another reader or is a graph output";
  return check_products(g, m);
}

/* ------------------------------------------------------------ providers */

/* Whether the providers that would run the fused nodes have kernels for them: SiluMul
 * where the final Mul would run, the merged product where the product would. */
static const char *check_providers(onyx__opt_ctx *ctx, const gus_match *m) {
  onyx_runtime *rt = ctx->session->runtime;
  const onyx__graph *g = ctx->graph;
  const onyx__node *fin = &g->nodes[m->fin], *prod = &g->nodes[m->gate];
  onyx__node bare = *fin; /* the final Mul's name and inputs, no attributes */
  bare.attrs = NULL;
  bare.attr_count = 0;
  onyx__provider *mul =
      onyx__opt_provider_for(rt, g, &bare, "", "Mul", fin->opset, fin->inputs, 2, m->dtype);
  onyx__provider *silu =
      onyx__opt_provider_for(rt, g, &bare, "ai.onyx", "SiluMul", 1, fin->inputs, 1, m->dtype);
  if (mul == NULL || silu != mul) return "the provider of the final Mul has no SiluMul kernel";
  onyx__provider *before =
      onyx__opt_provider_for(rt, g, prod, prod->domain, prod->op_type, prod->opset, prod->inputs,
                             prod->input_count, m->dtype);
  onyx_attr *attrs = NULL;
  if (prod->attr_count > 0) {
    attrs = malloc(prod->attr_count * sizeof *attrs);
    if (attrs == NULL) return "out of memory";
    memcpy(attrs, prod->attrs, prod->attr_count * sizeof *attrs);
    for (size_t a = 0; a < prod->attr_count; ++a)
      if (attrs[a].type == ONYX_ATTR_INT && !strcmp(attrs[a].name, "N")) attrs[a].i *= 2;
  }
  onyx__node merged = *prod; /* as the merged product will be: N doubled */
  merged.attrs = attrs;
  onyx__provider *after =
      onyx__opt_provider_for(rt, g, &merged, prod->domain, prod->op_type, prod->opset, prod->inputs,
                             prod->input_count, m->dtype);
  free(attrs);
  if (before == NULL || after != before) return "the product's provider would not take it merged";
  return NULL;
}

/* ------------------------------------------------------------ the merge */

/* A merged weight being made: its value and booked data. */
typedef struct gus_merged {
  int32_t v;
  onyx_tensor t;
  bool booked;
} gus_merged;

/* A fresh value name "<base>/gate_up" (a numeric suffix when taken). */
static onyx_status add_named_value(onyx__graph *g, const char *base, int32_t *out) {
  char name[512];
  for (int i = 0; i < 1000; ++i) {
    if (i == 0)
      snprintf(name, sizeof name, "%s/gate_up", base);
    else
      snprintf(name, sizeof name, "%s/gate_up_%d", base, i);
    if (onyx__graph_find_value(g, name) < 0) return onyx__graph_add_value(g, name, out);
  }
  return ONYX_STATUS_INVALID_ARGUMENT;
}

/* Concatenates weights wg and wu along N into out (booked, allocated, filled): along
 * the columns of a [K, N] matrix, or along the leading N of MatMulNBits' inputs. */
static onyx_status concat_weight(onyx__opt_ctx *ctx, int32_t wg, int32_t wu, bool columns,
                                 const char *node_name, gus_merged *out) {
  onyx__graph *g = ctx->graph;
  onyx_status st = add_named_value(g, g->values[wg].name, &out->v);
  if (st != ONYX_STATUS_OK) return st;
  const onyx_tensor a = g->values[wg].init, b = g->values[wu].init;
  uint64_t half = onyx__init_bytes(&g->values[wg]), bytes = 2 * half;
  char label[200];
  snprintf(label, sizeof label, "merged gate/up '%s' (for '%s')", g->values[out->v].name,
           node_name);
  char why[ONYX_ERR_CAP] = "";
  st = onyx__weights_book_value(ctx->session, (size_t)out->v, bytes, label, why, sizeof why);
  if (st != ONYX_STATUS_OK) {
    onyx__log(ONYX_LOG_DEBUG, "gate_up_silu: %s", why[0] ? why : onyx_status_str(st));
    return st;
  }
  out->booked = true;
  out->t = a;
  out->t.data = bytes ? aligned_alloc(64, (size_t)((bytes + 63) / 64 * 64)) : NULL;
  if (bytes && out->t.data == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  unsigned char *dst = out->t.data;
  if (bytes == 0) {
    out->t.dims[columns ? 1 : 0] *= 2;
  } else if (columns) {
    size_t row = (size_t)a.dims[1] * onyx_dtype_size(a.dtype);
    for (int64_t k = 0; k < a.dims[0]; ++k) {
      memcpy(dst + (size_t)k * 2 * row, (const unsigned char *)a.data + (size_t)k * row, row);
      memcpy(dst + ((size_t)k * 2 + 1) * row, (const unsigned char *)b.data + (size_t)k * row, row);
    }
    out->t.dims[1] *= 2;
  } else {
    memcpy(dst, a.data, (size_t)half);
    memcpy(dst + half, b.data, (size_t)half);
    out->t.dims[0] *= 2;
  }
  return ONYX_STATUS_OK;
}

static void discard_merged(onyx__opt_ctx *ctx, gus_merged *mg, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    if (!mg[i].booked) continue;
    free(mg[i].t.data);
    onyx__weights_unbook_value(ctx->session, (size_t)mg[i].v);
  }
}

/* One reader of v is gone; frees it when it was the last and v is a constant. */
static onyx_status drop_reader(onyx__opt_ctx *ctx, uint32_t *readers, int32_t v) {
  if (v < 0 || readers[v] == 0 || --readers[v] > 0) return ONYX_STATUS_OK;
  const onyx__value *val = &ctx->graph->values[v];
  if (!onyx__value_is_constant(val) || val->is_output) return ONYX_STATUS_OK;
  return onyx__weights_release(ctx->session, (size_t)v, &ctx->stats->bytes_released, ctx->err,
                               ctx->err_cap);
}

/* Rewrites the matched nodes: the earlier product reads the merged weights and makes
 * h, the final Mul becomes SiluMul(h), the rest is flagged dead. *merged is false
 * (and nothing changed) when the weights could not be booked or allocated. */
static onyx_status rewrite(onyx__opt_ctx *ctx, const gus_match *m, uint32_t *readers, bool *dead,
                           bool *merged) {
  onyx__graph *g = ctx->graph;
  const size_t *slots = m->nbits ? nbits_slots : matmul_slots;
  const size_t nslots = m->nbits ? 4 : 1;
  size_t prod = m->gate < m->up ? m->gate : m->up, other = m->gate < m->up ? m->up : m->gate;
  gus_merged mg[4];
  memset(mg, 0, sizeof mg);
  int32_t h = -1;
  onyx_status st = ONYX_STATUS_OK;
  uint64_t booked = 0;
  *merged = false;
  for (size_t s = 0; s < nslots && st == ONYX_STATUS_OK; ++s) {
    int32_t wg = input_at(&g->nodes[m->gate], slots[s]), wu = input_at(&g->nodes[m->up], slots[s]);
    mg[s].v = -1;
    if (wg < 0) continue;
    st = concat_weight(ctx, wg, wu, !m->nbits, g->nodes[prod].name, &mg[s]);
    booked += mg[s].booked ? 2 * onyx__init_bytes(&g->values[wg]) : 0;
  }
  if (st == ONYX_STATUS_OK) st = add_named_value(g, g->values[m->g].name, &h);
  if (st != ONYX_STATUS_OK) {
    discard_merged(ctx, mg, nslots);
    onyx__log(ONYX_LOG_DEBUG, "gate_up_silu: '%s' stays: the merged weights: %s",
              g->nodes[m->fin].name, onyx_status_str(st));
    return ONYX_STATUS_OK;
  }
  onyx__opt_note_peak(ctx, booked);
  ctx->stats->bytes_added += booked;
  onyx__node *p = &g->nodes[prod];
  for (size_t s = 0; s < nslots; ++s) {
    if (mg[s].v < 0) continue;
    onyx__graph_set_initializer(g, mg[s].v, mg[s].t);
    int32_t old_p = p->inputs[slots[s]], old_o = input_at(&g->nodes[other], slots[s]);
    p->inputs[slots[s]] = mg[s].v;
    /* The originals lose both readers; freed here when those were the last. */
    if ((st = drop_reader(ctx, readers, old_p)) != ONYX_STATUS_OK ||
        (st = drop_reader(ctx, readers, old_o)) != ONYX_STATUS_OK)
      return st;
  }
  for (size_t a = 0; m->nbits && a < p->attr_count; ++a)
    if (p->attrs[a].type == ONYX_ATTR_INT && !strcmp(p->attrs[a].name, "N")) p->attrs[a].i *= 2;
  g->values[h].dtype = m->dtype;
  onyx__graph_set_node_output(g, prod, 0, h);
  /* The final Mul becomes SiluMul(h): same output, same place in the order. */
  onyx__node *fin = &g->nodes[m->fin];
  char *op = onyx__strdup("SiluMul"), *domain = onyx__strdup("ai.onyx");
  if (op == NULL || domain == NULL) {
    free(op);
    free(domain);
    return ONYX_STATUS_OUT_OF_MEMORY;
  }
  free(fin->op_type);
  free(fin->domain);
  fin->op_type = op;
  fin->domain = domain;
  fin->opset = 1;
  fin->inputs[0] = h;
  fin->input_count = 1;
  dead[m->sig] = dead[m->act] = dead[other] = true;
  *merged = true;
  return ONYX_STATUS_OK;
}

/* ------------------------------------------------------------ the pass */

onyx_status onyx__opt_gate_up_silu(onyx__opt_ctx *ctx) {
  onyx__graph *g = ctx->graph;
  size_t nodes = g->node_count;
  uint32_t *readers = onyx__value_readers(g);
  int32_t *reader = onyx__value_last_reader(g);
  bool *dead = calloc(nodes + 1, sizeof *dead);
  onyx_status st = readers && reader && dead ? ONYX_STATUS_OK : ONYX_STATUS_OUT_OF_MEMORY;
  size_t fused = 0;
  for (size_t i = 0; i < nodes && st == ONYX_STATUS_OK; ++i) {
    if (dead[i]) continue;
    gus_match m;
    bool candidate = false, merged = false;
    const char *why = match_at(g, i, readers, reader, &m, &candidate);
    if (why == NULL) why = check_providers(ctx, &m);
    if (why == NULL) {
      /* Values the merge adds lie past what readers and reader cover; matching and
       * dropping only ever look at values the loader made. */
      st = rewrite(ctx, &m, readers, dead, &merged);
      fused += merged;
      ctx->stats->nodes_skipped += st == ONYX_STATUS_OK && !merged;
      continue;
    }
    if (!candidate) continue;
    ctx->stats->nodes_skipped++;
    onyx__log(ONYX_LOG_DEBUG, "gate_up_silu: Sigmoid '%s' (#%zu) stays: %s", g->nodes[i].name, i,
              why);
  }
  if (fused > 0) ctx->stats->nodes_removed += onyx__graph_remove_nodes(g, dead);
  free(readers);
  free(reader);
  free(dead);
  return st;
}
