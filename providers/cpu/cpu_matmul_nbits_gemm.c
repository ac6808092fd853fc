/*
 * The fp32 route of MatMulNBits for many rows (prefill): dequantized tiles fed to the
 * float32 GEMM micro-kernel (cpu_gemm_impl.h).
 *
 * A is packed once per run into the micro-kernel's slivers (workspace nbits_pack_a).
 * Then each task takes a range of 16-column tiles; for each K slice of up to
 * ONYX__CPU_KC rows it dequantizes the tile's codes into one B sliver of kc × 16 floats
 * (workspace nbits_tiles: a few KiB a task, it stays in L1) and runs the micro-kernel
 * over every row sliver of A against it, accumulating into the task's tile of Y. The
 * sliver is rebuilt for every tile and slice and thrown away: the weights stay packed,
 * and the dequantizing costs one pass over the codes per run, shared by all rows.
 */
#include "cpu_gemm_impl.h"
#include "cpu_nbits.h"

bool onyx__nb_gemm_route(int64_t m) { return m >= ONYX__NB_GEMM_MIN_M; }

/* Rows of A rounded up to whole slivers of the GEMM ISA. */
static int64_t nb_rows_pad(int64_t m) {
  int64_t mr = onyx__cpu_gemm_isa_get()->mr;
  return (m + mr - 1) / mr * mr;
}

void onyx__nb_gemm_scratch(const onyx__pc_nb_attrs *a, int64_t m, uint32_t tasks,
                           uint64_t *out_pack_a, uint64_t *out_tiles) {
  const uint64_t rows = (uint64_t)nb_rows_pad(m);
  *out_pack_a = rows * (uint64_t)a->k * sizeof(float);
  *out_tiles = (uint64_t)(tasks ? tasks : 1) *
               ((uint64_t)ONYX__CPU_KC * ONYX__NB_TILE + rows * ONYX__NB_TILE) * sizeof(float);
}

typedef struct nb_gemm_job {
  const onyx__nb_gemm_args *g;
  const onyx__cpu_gemm_isa *isa;
  onyx__cpu_gemm a; /* A's description for the packing */
  int64_t rows;     /* rows padded to whole slivers */
  int64_t slices;   /* K slices of up to ONYX__CPU_KC */
  size_t tasks;
} nb_gemm_job;

/* K slice s: [s·KC, ...) of depth kc; its packed A starts at s·KC·rows floats. */
static int64_t nb_slice_kc(const nb_gemm_job *j, int64_t s) {
  int64_t k0 = s * ONYX__CPU_KC, k = j->g->w->k;
  return k - k0 < ONYX__CPU_KC ? k - k0 : ONYX__CPU_KC;
}

static void nb_pack_slices(void *arg, int64_t s0, int64_t s1) {
  const nb_gemm_job *j = arg;
  for (int64_t s = s0; s < s1; ++s)
    onyx__cpu_pack_a(&j->a, 0, s * ONYX__CPU_KC, j->g->m, nb_slice_kc(j, s), j->isa->mr,
                     j->g->pack_a + s * ONYX__CPU_KC * j->rows);
}

static void nb_gemm_task(void *arg, size_t task) {
  const nb_gemm_job *j = arg;
  const onyx__nb_gemm_args *g = j->g;
  const int64_t tiles = g->w->tiles, mr = j->isa->mr;
  const int64_t t0 = tiles * (int64_t)task / (int64_t)j->tasks;
  const int64_t t1 = tiles * (int64_t)(task + 1) / (int64_t)j->tasks;
  float *sliver = g->tiles + task * (ONYX__CPU_KC * ONYX__NB_TILE + j->rows * ONYX__NB_TILE);
  float *acc = sliver + ONYX__CPU_KC * ONYX__NB_TILE; /* rows × 16 */
  for (int64_t t = t0; t < t1; ++t) {
    for (int64_t s = 0; s < j->slices; ++s) {
      const int64_t kc = nb_slice_kc(j, s);
      const float *ap = g->pack_a + s * ONYX__CPU_KC * j->rows;
      g->isa->dequant(g->w, t, s * ONYX__CPU_KC, kc, sliver);
      for (int64_t r = 0; r < g->m; r += mr)
        j->isa->micro(kc, ap + r * kc, sliver, acc + r * ONYX__NB_TILE, ONYX__NB_TILE,
                      g->m - r < mr ? g->m - r : mr, ONYX__NB_TILE, s > 0);
    }
    g->store(g->store_arg, 0, g->m, t, acc);
  }
}

void onyx__nb_gemm_run(const onyx__cpu_provider *p, const onyx__nb_gemm_args *g) {
  nb_gemm_job j = {.g = g,
                   .isa = onyx__cpu_gemm_isa_get(),
                   .a = {.m = g->m,
                         .n = g->w->n,
                         .k = g->w->k,
                         .alpha = 1.0f,
                         .ab_dtype = g->a_dtype,
                         .a = g->a,
                         .lda = g->w->k},
                   .rows = nb_rows_pad(g->m),
                   .slices = (g->w->k + ONYX__CPU_KC - 1) / ONYX__CPU_KC};
  onyx__cpu_parallel_range(p, j.slices, 1, nb_pack_slices, &j);
  j.tasks = g->tasks < (uint64_t)g->w->tiles ? g->tasks : (size_t)g->w->tiles;
  if (j.tasks < 1) j.tasks = 1;
  onyx__cpu_parallel_for(p, j.tasks, nb_gemm_task, &j);
}
