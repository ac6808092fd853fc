/*
 * Per-node timing of a session created with `profile`: how often each node ran, its
 * total and its first time (the first run pays for lazy initialisation: module
 * loading, library handles, heuristics), plus planning and admission per run and
 * device graph replays. A device node is waited for before its clock stops, so its
 * time is its own; profiling therefore serialises the device and slows the run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "profile_impl.h"
#include "session_impl.h"

struct onyx__profile {
  size_t nodes;
  double *total_ms, *first_ms;
  uint64_t *calls;
  double plan_ms, replay_ms;
  uint64_t plans, replays;
};

double onyx__now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

onyx__profile *onyx__profile_new(size_t nodes) {
  onyx__profile *p = calloc(1, sizeof *p);
  if (p == NULL) return NULL;
  p->nodes = nodes;
  p->total_ms = calloc(nodes + 1, sizeof *p->total_ms);
  p->first_ms = calloc(nodes + 1, sizeof *p->first_ms);
  p->calls = calloc(nodes + 1, sizeof *p->calls);
  if (!p->total_ms || !p->first_ms || !p->calls) {
    onyx__profile_free(p);
    return NULL;
  }
  return p;
}

void onyx__profile_free(onyx__profile *p) {
  if (p == NULL) return;
  free(p->total_ms);
  free(p->first_ms);
  free(p->calls);
  free(p);
}

void onyx__profile_node(onyx__profile *p, size_t node, double ms) {
  if (p == NULL || node >= p->nodes) return;
  if (p->calls[node]++ == 0) p->first_ms[node] = ms;
  p->total_ms[node] += ms;
}

void onyx__profile_plan(onyx__profile *p, double ms) {
  if (p == NULL) return;
  p->plans++;
  p->plan_ms += ms;
}

void onyx__profile_replay(onyx__profile *p, double ms) {
  if (p == NULL) return;
  p->replays++;
  p->replay_ms += ms;
}

/* Orders node indices by total time, largest first (insertion sort: a few thousand
 * nodes at most, and no global state for qsort's comparator). */
static void sort_by_total(const onyx__profile *p, size_t *order) {
  for (size_t i = 1; i < p->nodes; ++i) {
    size_t v = order[i], j = i;
    for (; j > 0 && p->total_ms[order[j - 1]] < p->total_ms[v]; --j) order[j] = order[j - 1];
    order[j] = v;
  }
}

/* The slowest nodes first; the rest summed on one line. */
#define PROFILE_ROWS 25

void onyx_session_write_profile(const onyx_session *s, void *stream) {
  FILE *f = stream ? stream : stdout;
  const onyx__profile *p = s ? s->profile : NULL;
  if (p == NULL) {
    fprintf(f, "profile: off (create the session with profile = true)\n");
    return;
  }
  size_t *order = malloc((p->nodes + 1) * sizeof *order);
  if (order == NULL) return;
  double total = p->plan_ms + p->replay_ms;
  for (size_t i = 0; i < p->nodes; ++i) {
    order[i] = i;
    total += p->total_ms[i];
  }
  sort_by_total(p, order);
  fprintf(f, "profile: %.3f ms in all; %llu planned runs, %llu graph replays\n", total,
          (unsigned long long)p->plans, (unsigned long long)p->replays);
  fprintf(f, "  %-6s %-28s %-8s %7s %11s %10s %9s\n", "node", "op", "provider", "calls", "total ms",
          "first ms", "mean ms");
  double rest = 0;
  size_t rest_nodes = 0;
  for (size_t k = 0; k < p->nodes; ++k) {
    size_t i = order[k];
    if (p->calls[i] == 0) continue;
    if (k >= PROFILE_ROWS) {
      rest += p->total_ms[i];
      rest_nodes++;
      continue;
    }
    const onyx__node *n = &s->graph->nodes[i];
    fprintf(f, "  #%-5zu %-28.28s %-8.8s %7llu %11.3f %10.3f %9.3f\n", i, n->op_type,
            s->nodes[i].provider->name, (unsigned long long)p->calls[i], p->total_ms[i],
            p->first_ms[i], p->total_ms[i] / (double)p->calls[i]);
  }
  if (rest_nodes) fprintf(f, "  %zu more nodes: %.3f ms\n", rest_nodes, rest);
  if (p->plans)
    fprintf(f, "  %-44s %7llu %11.3f %10s %9.3f\n", "(planning and admission)",
            (unsigned long long)p->plans, p->plan_ms, "", p->plan_ms / (double)p->plans);
  if (p->replays)
    fprintf(f, "  %-44s %7llu %11.3f %10s %9.3f\n", "(device graph replays)",
            (unsigned long long)p->replays, p->replay_ms, "", p->replay_ms / (double)p->replays);
  free(order);
}
