/*
 * The pass list and its driver. Passes run once, at session creation, after the
 * weights are booked and before types are inferred and nodes placed, so that
 * placement, planning and device uploads see the optimized graph.
 *
 * Order: dead nodes go first so that nothing is folded for nobody; Identity next, so
 * that folding sees through it; folding next. Neither of the later passes makes a
 * node dead (a folded node's outputs become initializers its readers keep reading).
 * gate_up_silu after: it merges weights that folding may have made (a transposed
 * weight), and only rewires live nodes. norm_matmul next: the product it fuses may be
 * gate_up_silu's merged one. silu_matmul next: it fuses gate_up_silu's SiluMul into
 * the down product. transpose_weights last: it rewrites the products the fusions made
 * (RMSNormMatMul, SiluMulMatMul; not their MatMulNBits forms) and the MatMuls they
 * left, storing their weights as [N, K] where the provider prefers it; no pass after it
 * looks for a MatMul.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error_impl.h"
#include "optimize_impl.h"

static const onyx__opt_pass passes[] = {
    {"dead_node_elimination",
     "removes nodes none of whose outputs reach a graph output; frees initializers nothing reads",
     onyx__opt_dead_nodes},
    {"identity_elimination",
     "rewires the readers of an Identity to its input (a graph output keeps its name)",
     onyx__opt_identity},
    {"constant_folding",
     "computes nodes whose inputs are all constants once, on a host kernel, into initializers "
     "booked as weights; frees the sources nothing else reads",
     onyx__opt_constant_folding},
    {"gate_up_silu",
     "merges an MLP's gate and up products (MatMul or MatMulNBits of one input, constant "
     "weights) into one and fuses Sigmoid, Mul, Mul into ai.onyx::SiluMul, where the providers "
     "have SiluMul; frees the original weights",
     onyx__opt_gate_up_silu},
    {"norm_matmul",
     "fuses an RMS norm (SkipSimplifiedLayerNormalization or SimplifiedLayerNormalization) "
     "whose normed output only a MatMul with a constant weight reads into "
     "ai.onyx::RMSNormMatMul (only a MatMulNBits with constant weights: "
     "ai.onyx::RMSNormMatMulNBits), where the provider has it",
     onyx__opt_norm_matmul},
    {"silu_matmul",
     "fuses an ai.onyx::SiluMul whose output only a MatMul with a constant weight reads (the "
     "MLP's down product) into ai.onyx::SiluMulMatMul (only a MatMulNBits with constant "
     "weights: ai.onyx::SiluMulMatMulNBits), where the provider has it",
     onyx__opt_silu_matmul},
    {"transpose_weights",
     "stores a float16 or bfloat16 constant weight read by one MatMul (which becomes "
     "com.microsoft::FusedMatMul), RMSNormMatMul or SiluMulMatMul as [N, K] (transB = 1), "
     "where the node's provider takes that layout (the CUDA decode GEMV's); the copy is booked "
     "as weights, the original freed",
     onyx__opt_transpose_weights},
};

#define PASS_COUNT (sizeof passes / sizeof passes[0])

size_t onyx_optimization_count(void) { return PASS_COUNT; }

const char *onyx_optimization_name(size_t i) { return i < PASS_COUNT ? passes[i].name : NULL; }

const char *onyx_optimization_description(size_t i) {
  return i < PASS_COUNT ? passes[i].description : NULL;
}

onyx_status onyx_session_optimization_stats(const onyx_session *s, size_t i,
                                            onyx_optimization_stats *out) {
  if (s == NULL || out == NULL || i >= PASS_COUNT ||
      out->struct_size < offsetof(onyx_optimization_stats, milliseconds) + sizeof out->milliseconds)
    return ONYX_STATUS_INVALID_ARGUMENT;
  const onyx__opt_stats *st = s->opt_stats ? &s->opt_stats[i] : NULL;
  onyx_optimization_stats o = {.struct_size = out->struct_size};
  if (st) {
    o.ran = st->ran;
    o.nodes_removed = st->nodes_removed;
    o.nodes_folded = st->nodes_folded;
    o.nodes_skipped = st->nodes_skipped;
    o.bytes_added = st->bytes_added;
    o.bytes_released = st->bytes_released;
    o.weights_peak_bytes = st->weights_peak_bytes;
    o.milliseconds = st->milliseconds;
  }
  *out = o;
  return ONYX_STATUS_OK;
}

/* ------------------------------------------------------------ shared helpers */

uint64_t onyx__opt_weights_held(const onyx_session *s) {
  const onyx__graph *g = s->graph;
  uint64_t held = 0;
  for (size_t v = 0; v < g->value_count; ++v)
    if (g->values[v].is_initializer && g->values[v].init.data != NULL)
      held += onyx__init_bytes(&g->values[v]);
  return held;
}

void onyx__opt_note_peak(onyx__opt_ctx *ctx, uint64_t pending) {
  uint64_t now = onyx__opt_weights_held(ctx->session) + pending;
  if (now > ctx->stats->weights_peak_bytes) ctx->stats->weights_peak_bytes = now;
}

onyx_status onyx__opt_release_unread(onyx__opt_ctx *ctx) {
  onyx__graph *g = ctx->graph;
  uint32_t *readers = onyx__value_readers(g);
  if (readers == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  onyx_status st = ONYX_STATUS_OK;
  for (size_t v = 0; v < g->value_count && st == ONYX_STATUS_OK; ++v) {
    const onyx__value *val = &g->values[v];
    if (readers[v] == 0 && onyx__value_is_constant(val) && !val->is_output)
      st = onyx__weights_release(ctx->session, v, &ctx->stats->bytes_released, ctx->err,
                                 ctx->err_cap);
  }
  free(readers);
  return st;
}

/* ------------------------------------------------------------ the driver */

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Marks in `disabled` the passes `list` names: NULL or "" none, "all" every one,
 * else a comma-separated list of names (spaces around names ignored). */
static onyx_status parse_disabled(const char *list, bool *disabled, char *err, size_t cap) {
  if (list == NULL) return ONYX_STATUS_OK;
  const char *p = list;
  while (*p) {
    while (*p == ' ' || *p == ',') ++p;
    const char *end = p;
    while (*end && *end != ',') ++end;
    size_t len = (size_t)(end - p);
    while (len > 0 && p[len - 1] == ' ') --len;
    if (len == 0) {
      p = end;
      continue;
    }
    bool found = false;
    if (len == 3 && !strncmp(p, "all", 3)) {
      for (size_t i = 0; i < PASS_COUNT; ++i) disabled[i] = true;
      found = true;
    }
    for (size_t i = 0; i < PASS_COUNT && !found; ++i)
      if (strlen(passes[i].name) == len && !strncmp(p, passes[i].name, len))
        found = disabled[i] = true;
    if (!found) {
      char known[256] = "";
      for (size_t i = 0; i < PASS_COUNT; ++i) {
        size_t k = strlen(known);
        snprintf(known + k, sizeof known - k, "%s, ", passes[i].name);
      }
      onyx__errf(err, cap,
                 "session option disable_optimizations: unknown optimization '%.*s' (known: "
                 "%sall)",
                 (int)(len > 64 ? 64 : len), p, known);
      return ONYX_STATUS_INVALID_ARGUMENT;
    }
    p = end;
  }
  return ONYX_STATUS_OK;
}

static const char *disabled_list(const onyx_session_options *o) {
  if (o == NULL || o->struct_size < offsetof(onyx_session_options, disable_optimizations) +
                                        sizeof o->disable_optimizations)
    return NULL;
  return o->disable_optimizations;
}

onyx_status onyx__optimize(onyx_session *s, const onyx_session_options *options, char *err,
                           size_t cap) {
  bool disabled[PASS_COUNT] = {false};
  onyx_status st = parse_disabled(disabled_list(options), disabled, err, cap);
  if (st != ONYX_STATUS_OK) return st;
  s->opt_stats = calloc(PASS_COUNT, sizeof *s->opt_stats);
  if (s->opt_stats == NULL) return ONYX_STATUS_OUT_OF_MEMORY;
  bool changed = false;
  for (size_t i = 0; i < PASS_COUNT && st == ONYX_STATUS_OK; ++i) {
    if (disabled[i]) continue;
    onyx__opt_stats *stats = &s->opt_stats[i];
    char why[ONYX_ERR_CAP] = "";
    onyx__opt_ctx ctx = {
        .session = s, .graph = s->graph, .stats = stats, .err = why, .err_cap = sizeof why};
    double t0 = now_ms();
    stats->ran = true;
    onyx__opt_note_peak(&ctx, 0);
    st = passes[i].run(&ctx);
    stats->milliseconds = now_ms() - t0;
    if (st != ONYX_STATUS_OK)
      onyx__errf(err, cap, "optimization %s: %s", passes[i].name, why[0] ? why : "failed");
    changed |= stats->nodes_removed > 0;
  }
  /* A broken invariant here is a defect in a pass: refuse rather than run it. */
  char why[ONYX_ERR_CAP] = "";
  if (st == ONYX_STATUS_OK && changed &&
      onyx__graph_check(s->graph, why, sizeof why) != ONYX_STATUS_OK) {
    onyx__errf(err, cap, "optimization left the graph inconsistent: %s", why);
    st = ONYX_STATUS_INTERNAL;
  }
  return st;
}
