/*
 * bench_attention_rounds — the shapes of the GPU attention issue's bar, timed in
 * interleaved rounds beside PyTorch's cuDNN attention, so that one run's ratio does not
 * hang on which side happened to meet a slow stretch of the device (one 50-call median of
 * the same op moved by 5 % within a run at B4 S4096; the anchor runs minutes later in
 * bench_attention_cuda).
 *
 *   onyx_bench_attention_rounds [tools/torch_sdpa_serve.py | -] [rounds, default 5]
 *
 * Every round times each shape in turn: the op as the dispatcher routes it; for prefill
 * also the Hopper kernel in tunings (onyx__cuda_attn_hopper_tune 10: the copy warps and
 * plain stores, the production kernel before H9 in PERF_NOTES; 8: the production kernel
 * with the presents left unwritten, so the column beside "onyx" prices the present write;
 * 12: the production kernel with lazy rescaling), in an order rotated every round; and
 * the anchor on the same shape, through one Python process kept running
 * (tools/torch_sdpa_serve.py, inputs made once per shape). All sides use the same method:
 * 10 warm-up calls, the median of 50 calls each between CUDA events. Even rounds time
 * Onyx first, odd rounds the anchor first. Printed: each round's numbers, then per shape
 * each side's median over the rounds, the ratio of the medians, the smallest and largest
 * round ratio and how many rounds reach the bar. No thresholds are enforced:
 * numbers to read.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_attention_op.h"
#include "cuda_attn_impl.h"

enum { MAX_ROUNDS = 15, N_SHAPES = 6 };
/* Columns of a round: the op, then prefill variants (the tunings), the anchor. */
enum { COL_OP, COL_BEFORE, COL_NO_PRESENT, COL_LAZY, COL_ANCHOR, N_COLS };
static const char *const k_col_names[N_COLS] = {"onyx", "pre-H9", "no-pres", "lazy", "cudnn"};

/* The Hopper kernel's tuning for each Onyx column (onyx__cuda_attn_hopper_tune; -1: the
 * launch decides). */
static const int k_col_tune[COL_ANCHOR] = {-1, 10, 8, 12};

/* kind, B, Hq, Hkv, S (prefill) or Skv (decode), D, and the bar (× cuDNN). */
typedef struct shape {
  bool prefill;
  int B, hq, hkv, s, d;
  double bar;
} shape;

static const shape k_shapes[N_SHAPES] = {
    {true, 1, 32, 8, 4096, 128, 1.0},   {true, 4, 32, 8, 4096, 128, 1.0},
    {true, 1, 14, 2, 2048, 64, 0.9},    {false, 1, 32, 8, 32768, 128, 1.1},
    {false, 16, 32, 8, 4096, 128, 1.1}, {false, 64, 32, 8, 2048, 128, 1.1},
};

/* The anchor's process: one shape a line in, "ms=<median>" a line out. */
typedef struct anchor {
  FILE *to, *from;
  pid_t pid;
  bool ok;
} anchor;

static bool anchor_start(anchor *a, const char *script) {
  memset(a, 0, sizeof *a);
  int in[2], out[2];
  if (pipe(in) != 0) return false;
  if (pipe(out) != 0) {
    close(in[0]);
    close(in[1]);
    return false;
  }
  a->pid = fork();
  if (a->pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    close(in[0]), close(in[1]), close(out[0]), close(out[1]);
    execlp("python3", "python3", "-u", script, (char *)NULL);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  if (a->pid < 0) {
    close(in[1]);
    close(out[0]);
    return false;
  }
  a->to = fdopen(in[1], "w");
  a->from = fdopen(out[0], "r");
  char line[256];
  while (a->to != NULL && a->from != NULL && fgets(line, sizeof line, a->from) != NULL) {
    printf("anchor: %s", line);
    if (strncmp(line, "ready", 5) == 0) return a->ok = true;
  }
  return false;
}

/* The anchor's milliseconds on op's shape; 0 once it has failed. */
static double anchor_ms(anchor *a, const bench_op *op) {
  if (!a->ok) return 0.0;
  char line[256];
  if (fprintf(a->to, "%s %d %d %d %d %d\n", op->prefill ? "prefill" : "decode", op->B, op->hq,
              op->hkv, op->s, op->d) < 0 ||
      fflush(a->to) != 0 || fgets(line, sizeof line, a->from) == NULL) {
    printf("anchor: the process stopped answering\n");
    a->ok = false;
    return 0.0;
  }
  double ms = 0.0;
  if (sscanf(line, "ms=%lf", &ms) == 1 && ms > 0.0) return ms;
  printf("anchor: %s", line);
  return 0.0;
}

static void anchor_stop(anchor *a) {
  if (a->to != NULL) {
    fprintf(a->to, "quit\n");
    fclose(a->to);
  }
  if (a->from != NULL) fclose(a->from);
  if (a->pid > 0) waitpid(a->pid, NULL, 0);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Median of the n > 0 positive values of v (0 when none is). */
static double median(const double *v, int n) {
  double t[MAX_ROUNDS];
  int m = 0;
  for (int i = 0; i < n; ++i)
    if (v[i] > 0.0) t[m++] = v[i];
  if (m == 0) return 0.0;
  qsort(t, (size_t)m, sizeof t[0], cmp_double);
  return m % 2 ? t[m / 2] : 0.5 * (t[m / 2 - 1] + t[m / 2]);
}

/* Rate of op at ms milliseconds: TFLOP/s (prefill) or GB/s of K/V read (decode). */
static double rate(const bench_op *op, double ms) {
  if (ms <= 0.0) return 0.0;
  return op->prefill ? bench_op_work(op) / ms / 1e9 : bench_op_work(op) / ms / 1e6;
}

static void shape_name(const shape *s, char *buf, size_t n) {
  snprintf(buf, n, "%s B%d Hq%d Hkv%d %s%d D%d", s->prefill ? "prefill" : "decode ", s->B, s->hq,
           s->hkv, s->prefill ? "S" : "Skv", s->s, s->d);
}

/* Rate of op in Onyx column c (the tuning only for prefill; 0 for decode past the op). */
static double column_rate(bench_op *op, int c) {
  if (c != COL_OP && !op->prefill) return 0.0;
  uint64_t ws;
  const int was = onyx__cuda_attn_hopper_tune;
  onyx__cuda_attn_hopper_tune = k_col_tune[c];
  const double r = rate(op, bench_op_time(op, &ws, false));
  onyx__cuda_attn_hopper_tune = was;
  return r;
}

/* One round: each shape's columns (COL_*), the anchor first in odd rounds. */
static void run_round(int r, bench_op *ops, anchor *a, double (*out)[MAX_ROUNDS][N_COLS]) {
  for (int i = 0; i < N_SHAPES; ++i) {
    bench_op *op = &ops[i];
    double *o = out[i][r];
    const double anchor_first = r % 2 ? anchor_ms(a, op) : 0.0;
    /* The Onyx columns in a rotated order: the device warms through a round (in one run
     * the last-timed column read 5 % below the first on the same kernel). */
    for (int j = 0; j < COL_ANCHOR; ++j) {
      const int c = (j + r) % COL_ANCHOR;
      o[c] = column_rate(op, c);
    }
    o[COL_ANCHOR] = rate(op, r % 2 ? anchor_first : anchor_ms(a, op));
    char name[64];
    shape_name(&k_shapes[i], name, sizeof name);
    printf("round %d %-34s", r, name);
    for (int c = 0; c < N_COLS; ++c) printf(" %s %7.1f", k_col_names[c], o[c]);
    printf("  x cudnn %.3f\n", o[COL_ANCHOR] > 0.0 ? o[COL_OP] / o[COL_ANCHOR] : 0.0);
    fflush(stdout);
  }
}

static void print_summary(int rounds, double (*res)[MAX_ROUNDS][N_COLS]) {
  printf("\n%-34s", "shape (bf16), medians of rounds");
  for (int c = 0; c < N_COLS; ++c) printf(" %7s", k_col_names[c]);
  printf(" |");
  for (int c = 0; c < COL_ANCHOR; ++c) printf(" %7.7s", k_col_names[c]);
  printf(" | %13s | %s\n", "round x min-max", "rounds at bar");
  printf("%-34s %*s | %*s\n", "", 8 * N_COLS - 1, "", 8 * COL_ANCHOR - 1, "(x cudnn)");
  for (int i = 0; i < N_SHAPES; ++i) {
    double col[N_COLS][MAX_ROUNDS], ratio[MAX_ROUNDS];
    int at_bar = 0;
    for (int r = 0; r < rounds; ++r) {
      for (int c = 0; c < N_COLS; ++c) col[c][r] = res[i][r][c];
      ratio[r] = res[i][r][COL_ANCHOR] > 0.0 ? res[i][r][COL_OP] / res[i][r][COL_ANCHOR] : 0.0;
      at_bar += ratio[r] >= k_shapes[i].bar;
    }
    double lo = 1e300, hi = 0.0;
    for (int r = 0; r < rounds; ++r) {
      if (ratio[r] <= 0.0) continue;
      if (ratio[r] < lo) lo = ratio[r];
      if (ratio[r] > hi) hi = ratio[r];
    }
    double med[N_COLS];
    for (int c = 0; c < N_COLS; ++c) med[c] = median(col[c], rounds);
    const double cd = med[COL_ANCHOR] > 0.0 ? med[COL_ANCHOR] : 1e300;
    char name[64];
    shape_name(&k_shapes[i], name, sizeof name);
    printf("%-34s", name);
    for (int c = 0; c < N_COLS; ++c) printf(" %7.1f", med[c]);
    printf(" |");
    for (int c = 0; c < COL_ANCHOR; ++c) printf(" %7.3f", med[c] / cd);
    printf(" | %6.3f-%6.3f | %d of %d at >= %.1f (%s)\n", hi > 0.0 ? lo : 0.0, hi, at_bar, rounds,
           k_shapes[i].bar, k_shapes[i].prefill ? "TFLOP/s" : "GB/s");
  }
}

int main(int argc, char **argv) {
  const char *script = argc > 1 ? argv[1] : "tools/torch_sdpa_serve.py";
  const int rounds = argc > 2 ? atoi(argv[2]) : 5;
  if (rounds < 1 || rounds > MAX_ROUNDS) {
    fprintf(stderr, "rounds: expected 1 to %d, got %s\n", MAX_ROUNDS, argv[2]);
    return 2;
  }
  if (!ch_have_device()) {
    printf("skipped: no CUDA device\n");
    return 0;
  }
  signal(SIGPIPE, SIG_IGN); /* a dead anchor must not end this process */
  anchor a;
  memset(&a, 0, sizeof a);
  if (strcmp(script, "-") != 0 && !anchor_start(&a, script))
    printf("anchor: %s did not start; Onyx alone\n", script);
  static bench_op ops[N_SHAPES];
  for (int i = 0; i < N_SHAPES; ++i) {
    const shape *s = &k_shapes[i];
    bench_op_open(&ops[i], s->prefill, s->B, s->hq, s->hkv, s->s, s->d);
  }
  static double res[N_SHAPES][MAX_ROUNDS][N_COLS];
  for (int r = 0; r < rounds; ++r) run_round(r, ops, &a, res);
  print_summary(rounds, res);
  for (int i = 0; i < N_SHAPES; ++i) bench_op_close(&ops[i]);
  anchor_stop(&a);
  return 0;
}
