/*
 * Private to the CUDA attention kernels (providers/cuda/attention/). Nothing here
 * crosses the ABI or leaves libonyx_cuda.so. Included from C11 (the op files) and from
 * CUDA C++ (the device files), so it is plain C with sized integers.
 *
 * Files, one concern each:
 *   cuda_attn_util.c   attributes, kernel state, messages, workspace lookup, host reads
 *   cuda_attn_plan.c   routes and workspace bytes: a pure function of geometry shared by
 *                      workspace() and compute()
 *   cuda_attn_route.c  which kernel runs a problem: the Hopper route where it is correct
 *                      and built, else the plan's route
 *   cuda_attn_hopper.cu the Hopper prefill route (sm_90a): TMA, wgmma, warp specialisation
 *   cuda_attn_decode.cu the decode route: split keys over a grid of one CTA per SM, a
 *                      producer warp streaming K/V through an mbarrier ring, the splits
 *                      merged inside the launch, the new rows appended in it
 *   cuda_attn_flash.cu the tensor-core route (float16, bfloat16): FlashAttention-2 style
 *                      online softmax, mma.sync m16n8k16, Q heads of a KV group packed
 *                      into one CTA's rows, split-K (flash-decoding) with a merge pass
 *   cuda_attn_ref.cu   the reference route (float32, and any head size): a scores
 *                      region, a row softmax and P·V on CUDA cores
 *   cuda_attn_kv.cu    present/staging fill: past rows, new rows (rotated keys), zeros
 *   cuda_attn_gqa.c    com.microsoft GroupQueryAttention
 *   cuda_attn_onnx.c   ONNX Attention (opsets 23, 24)
 */
#ifndef ONYX_CUDA_ATTN_IMPL_H
#define ONYX_CUDA_ATTN_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ attention problem */

/* Where a problem's per-batch geometry comes from. */
typedef enum onyx__cuda_attn_mode {
  ONYX__CUDA_ATTN_GQA = 0, /* total_b = seqlens[b] + 1, past_b = first ? 0 : total_b − sq */
  ONYX__CUDA_ATTN_ONNX = 1 /* keys [0, min(nonpad[b] or total, mask_len)), q_pos0 = past or
                              nonpad[b] − sq */
} onyx__cuda_attn_mode;

/*
 * One attention problem as the device kernels see it. Element (not byte) strides.
 * Query row (b, s, h) at q[b·q_bs + s·q_ss + h·q_hs], output likewise; key row j of
 * (b, kv head g) at k[b·k_bs + g·k_gs + j·k_rs]; value likewise. Query head h reads kv
 * head h / group.
 */
typedef struct onyx__cuda_attn_params {
  uint32_t dtype; /* onyx_dtype of q, k, v, y (and cos/sin/sink) */
  int32_t batch, nq, nkv, group, sq, hk, hv;
  float scale;   /* applied to q·k */
  float softcap; /* 0: off */

  const void *q;
  int64_t q_bs, q_ss, q_hs;
  void *y;
  int64_t y_bs, y_ss, y_hs;
  const void *k;
  int64_t k_bs, k_gs, k_rs;
  const void *v;
  int64_t v_bs, v_gs, v_rs;
  int64_t kv_rows; /* rows of k/v per (b, g): no key at or past it is read */

  uint32_t mode;          /* onyx__cuda_attn_mode */
  const int32_t *seqlens; /* GQA, device */
  int32_t first;          /* GQA: first prompt (every past_b is 0) */
  int64_t total, past;    /* ONNX: keys in k/v, past rows among them */
  const int64_t *nonpad;  /* ONNX opset 24, device, or NULL */
  int64_t mask_len;       /* keys >= mask_len are masked (INT64_MAX: none) */
  int32_t causal;
  int64_t window; /* > 0: row at p sees keys >= p − window + 1 */

  /* Rotary of query rows (keys were rotated when written): cos/sin (rot_rows, rot_half)
   * of dtype. Position of (b, s): pos_ids[b·pos_bs + s·pos_ss] + s·pos_add_s, else
   * past_b + s. Positions outside the table are clamped (the host validated them). */
  const void *cos, *sin;
  int32_t rot_half;
  int64_t rot_rows;
  int32_t interleaved;
  const int64_t *pos_ids;
  int64_t pos_bs, pos_ss, pos_add_s;

  /* Additive bias (float32/float16/bfloat16) or boolean mask (true keeps), element
   * (b, h, s, j) at mask[b·m_bs + h·m_hs + s·m_ss + j·m_js]; NULL: none. */
  const void *mask;
  uint32_t mask_dtype;
  int64_t m_bs, m_hs, m_ss, m_js;

  /* Softmax sink: head_sink[h] (dtype), or 0 with smooth softmax. */
  const void *sink;
  int32_t smooth;

  /* Split-K partials (flash route, n_split > 1): see onyx__cuda_attn_plan. */
  float *partials;
  int32_t n_split;
  /* Decode route with a split: one arrival counter per (b, kv head), zero at entry and
   * left zero at exit (the merging unit resets its own), so nothing zeroes them on the
   * stream. NULL: the counters after the partials, zeroed by a memset before each
   * launch. */
  uint32_t *counters;

  int32_t shared_kv; /* GQA: present aliases past (ONNX Runtime's shared buffer) */

  /* Decode route only. append = 1: the kernel itself writes the new rows into k/v (then
   * the present buffers, written through these pointers), keys rotated with cos/sin at
   * the positions onyx__cuda_attn_kv_fill would use; new row s of (b, g) is at
   * new_k[b·nk_bs + g·nk_gs + s·nk_ss] (new_v likewise) and goes to row past_b + s,
   * past_b as in onyx__cuda_kv_fill. 0: k/v already hold every row. */
  int32_t append;
  const void *new_k, *new_v;
  int64_t nk_bs, nk_gs, nk_ss;

  /* Hopper route only, the first prompt. fill_present = 1: k/v are the new rows
   * themselves (kv_rows == sq; GQA: every past_b 0, ONNX: no past) and the kernel also
   * copies them into the presents, row j of (b, g) to present_k[b·pr_bs + g·pr_gs +
   * j·pr_rs] (present_v likewise), with warps that otherwise idle, so no fill launch
   * runs before it. */
  int32_t fill_present;
  void *present_k, *present_v;
  int64_t pr_bs, pr_gs, pr_rs;
} onyx__cuda_attn_params;

/* ------------------------------------------------------------------ routes and plans */

typedef enum onyx__cuda_attn_route {
  ONYX__CUDA_ROUTE_FLASH = 0,  /* tensor cores: float16/bfloat16, hk == hv in the set below */
  ONYX__CUDA_ROUTE_REF = 1,    /* CUDA cores with a scores region: float32, other heads */
  ONYX__CUDA_ROUTE_HOPPER = 2, /* sm_90a prefill (wgmma, TMA): chosen at dispatch, never by
                                  the plan; it needs no workspace, so it runs only where the
                                  plan is the flash route without a split */
  ONYX__CUDA_ROUTE_DECODE = 3  /* decode and short chunks (query rows × group <= 16):
                                  chosen at dispatch where the plan is the flash route with
                                  the decode tile; the same split and partials (counters
                                  included) as the plan declares */
} onyx__cuda_attn_route;

/* Tile shapes of the flash route. */
typedef enum onyx__cuda_attn_tile {
  ONYX__CUDA_TILE_PREFILL = 0,    /* 4 warps × 16 rows, each warp all 64 keys of a tile */
  ONYX__CUDA_TILE_DECODE = 1,     /* 1 × 16 rows, 4 warps split the 64 keys of a tile,
                                     2-deep K/V ring (bench variant) */
  ONYX__CUDA_TILE_PREFILL128 = 2, /* 8 warps × 16 rows (bench variant) */
  ONYX__CUDA_TILE_PREFILL_M2 = 3, /* 4 warps × 2 × 16 rows, K/V fragments reused twice
                                     (head sizes up to 128; bench variant) */
  ONYX__CUDA_TILE_DECODE3 = 4     /* DECODE with a 3-deep K/V ring: the decode tile */
} onyx__cuda_attn_tile;

/* Rows of one CTA per tile shape. */
int32_t onyx__cuda_attn_tile_rows(uint32_t tile);

/* The split-K heuristic aims for about one decode CTA per SM (132 on an H200): the
 * 3-deep decode tile streams K/V near the memory's rate with one CTA per SM, and more
 * splits only add merge traffic (bench_attention_cuda's split sweep, H200, 2026-11-29).
 * A constant, so the plan stays a pure function of geometry. */
#define ONYX__CUDA_ATTN_SMS 132
/* Only problems with at most this many rows (query rows × group heads) per kv head
 * are split (decode, short chunks): splitting prefill costs large partials. */
#define ONYX__CUDA_ATTN_SPLIT_MAX_ROWS 64
/* A key split covers at least this many keys. */
#define ONYX__CUDA_ATTN_SPLIT_MIN_KEYS 256
/* Most splits. */
#define ONYX__CUDA_ATTN_MAX_SPLITS 128
/* Largest head the reference route takes (its query row lives in shared memory). */
#define ONYX__CUDA_ATTN_REF_MAX_HEAD 1024

typedef struct onyx__cuda_attn_plan {
  uint32_t route;          /* onyx__cuda_attn_route */
  uint32_t tile;           /* onyx__cuda_attn_tile (flash route) */
  int32_t row_tiles;       /* CTAs along the (query row × group head) rows of a kv head */
  int32_t n_split;         /* key splits (1: none) */
  uint64_t partials_bytes; /* split-K partials (0 without a split) */
  uint64_t scores_bytes;   /* reference route scores (0 on the flash route) */
  uint64_t counters_bytes; /* with a split: one 32-bit arrival counter per (b, kv head) for
                              a caller that keeps the decode route's counters itself
                              (zeroed once, left zero by the kernel); 0 without a split */
  int64_t key_cols;        /* columns of the scores region (reference route) */
} onyx__cuda_attn_plan;

/* Tests and the benchmark only: when >= 0, the flash route uses this tile
 * (onyx__cuda_attn_tile) instead of its own choice, where the tile takes the head
 * size. Not thread-safe; production code never sets it. */
extern int onyx__cuda_attn_force_tile;
/* Tests and the benchmark only: when > 0, the flash route splits keys this many ways
 * (capped at ONYX__CUDA_ATTN_MAX_SPLITS). */
extern int onyx__cuda_attn_force_split;

/* Tests and the benchmark only: 0 keeps every problem off the Hopper route (-1: the
 * dispatcher decides). Not thread-safe; production code never sets it. */
extern int onyx__cuda_attn_force_hopper;
/* Tests and the benchmark only: a variant of the Hopper kernel (0: the production one;
 * 1: without the consumers' ping-pong, unchained; 2: a CTA per work item, not persistent;
 * 3: unchained, an item's first Q·Kᵀ waiting for the item before to end). */
extern int onyx__cuda_attn_hopper_variant;
/* Tests and the benchmark only: the Hopper kernel's schedule (1: paired units, else heavy
 * first; cuda_attn_hopper_sched.cuh). */
extern int onyx__cuda_attn_hopper_schedule;
/* Tests and the benchmark only: 0 makes the Hopper kernel's loads plain (else K/V ask L2
 * for evict_last, Q for evict_first). */
extern int onyx__cuda_attn_hopper_l2_hints;
/* Tests and the benchmark only: a tuning of the Hopper kernel. Beside the kernel before
 * the TMA stores (copy warps for the presents, plain stores for the output): 1 K of the
 * next key tile loaded before V of this one; 2 three V buffers; 3 both; 4 lazy rescaling
 * of the accumulator; 5 lazy with three V buffers; 6 the wait for P·V kept after the
 * softmax (ptxas otherwise hoists it above); 7 lazy with that wait. Around the production
 * kernel: 8 the presents left unwritten (timing only); 9 only the presents by TMA
 * stores; 10 neither store (the kernel before); 11 only the output by TMA stores; 12
 * lazy rescaling. Else the launch decides. */
extern int onyx__cuda_attn_hopper_tune;
/* Tests and the benchmark only: 0 keeps the first prompt's present write in the fill
 * launch (otherwise the Hopper kernel writes it wherever it takes the problem). */
extern int onyx__cuda_attn_fused_present;
/* Tests only: whether the last dispatched problem had the Hopper kernel write the
 * presents. */
int onyx__cuda_attn_last_fill_present(void);
/* What onyx__cuda_attn_run returns for a fill_present problem the Hopper kernel did not
 * take: nothing ran, and the presents are still to be written. */
#define ONYX__CUDA_ATTN_NOT_TAKEN (-1)
/* Tests only: the route (onyx__cuda_attn_route) of the last dispatched problem. */
uint32_t onyx__cuda_attn_last_route(void);

/* Fewest query rows per head that the Hopper route takes (one CTA has 128). */
#define ONYX__CUDA_ATTN_HOPPER_MIN_ROWS 128

/* Whether the flash route takes this dtype and head geometry. */
bool onyx__cuda_attn_flash_ok(uint32_t dtype, int64_t hk, int64_t hv);

/* The plan for a problem; max_keys bounds the keys of any row (the scores columns). */
void onyx__cuda_attn_plan_make(uint32_t dtype, int64_t batch, int64_t nq, int64_t nkv, int64_t sq,
                               int64_t hk, int64_t hv, int64_t max_keys, onyx__cuda_attn_plan *out);

/* Partials layout inside the split-K region: O floats (rows·n_split·hv) then (m, l)
 * pairs (rows·n_split·2), rows = batch·nq·sq in (b, h, s) order; then one 32-bit
 * arrival counter per (b, kv head) for the decode route's in-launch merge where the
 * caller has no counters of its own (zeroed before each launch; the flash route leaves
 * them alone). */
uint64_t onyx__cuda_attn_partials_floats(int64_t batch, int64_t nq, int64_t sq, int64_t hv,
                                         int64_t n_split);
/* Bytes of the split-K region: the partials above and the counters. */
uint64_t onyx__cuda_attn_partials_bytes(int64_t batch, int64_t nq, int64_t nkv, int64_t sq,
                                        int64_t hv, int64_t n_split);

/* NULL when the Hopper route runs this problem (its pointers and strides set, the plan
 * made), else why not: a feature it lacks, a layout TMA cannot read, a device or build
 * without sm_90a. */
const char *onyx__cuda_attn_hopper_refusal(const onyx__cuda_attn_params *p,
                                           const onyx__cuda_attn_plan *plan);

/* Most rows (query rows × group heads of one kv head) the decode route takes: one
 * m16n8k16 tile. */
#define ONYX__CUDA_ATTN_DECODE_MAX_ROWS 16

/* Tests and the benchmark only: 0 keeps every problem off the decode route (-1: the
 * dispatcher decides). Not thread-safe; production code never sets it. */
extern int onyx__cuda_attn_force_decode;
/* The decode route cuts a (b, kv head)'s keys, from the actual length on the device
 * (the plan splits for the buffer's capacity), into splits of this many keys, at most
 * the plan's and none below 4 splits' worth: ONYX__CUDA_ATTN_DECODE_SPLIT_KEYS. Tests
 * and the benchmark may set it (> 0); 0 keeps every planned split (the route before
 * 2026-12-02). Not thread-safe. */
#define ONYX__CUDA_ATTN_DECODE_SPLIT_KEYS 128
extern int onyx__cuda_attn_decode_split_keys;
/* 1 (default): where the length uses fewer splits than planned, split 0 (which appends
 * the new rows) takes no cache tile; 0: it takes its share (tests and the benchmark). */
extern int onyx__cuda_attn_decode_split0_alone;
/* 1 (default): the decode kernel is launched as a programmatic dependent (PDL) of the
 * kernel before it, waits for it before touching global memory, and lets the next one
 * launch early. 0: plain launches (tests and the benchmark). */
extern int onyx__cuda_attn_pdl;
/* CTAs of a decode launch: 0 (default) one per SM (the slots); > 0 at most that many;
 * -1 the fewest that keep the number of unit rounds (every CTA the same count of
 * units). Tests and the benchmark only (the tail and per-SM rate); not thread-safe. */
extern int onyx__cuda_attn_decode_grid;
/* Tests and the benchmark only: a variant of the decode kernel (0: the production one,
 * routed by units a CTA: v8 where the grid deals some CTA more than one unit, else v3;
 * 1..8: the variants of cuda_attn_decode.cu, a TMA one falling back to cp.async where
 * TMA cannot read the layout). Not thread-safe; production code never sets it. */
extern int onyx__cuda_attn_decode_variant;
/* Tests and the benchmark only: the variant (1..8) the last decode launch ran, its work
 * units (every planned split, live or not) and its CTAs; zeros before the first. */
void onyx__cuda_attn_decode_last(int *out_variant, int64_t *out_units, int *out_grid);

/* NULL when the decode route runs this problem (pointers, strides and the plan's split
 * set), else why not: a feature it lacks (softcap, mask or bias), a head size, more
 * rows than one tile, a layout its 16-byte loads cannot read, no device it runs on. */
const char *onyx__cuda_attn_decode_refusal(const onyx__cuda_attn_params *p,
                                           const onyx__cuda_attn_plan *plan);

/* Runs a problem on the route the plan and onyx__cuda_attn_hopper_refusal choose;
 * scores as for onyx__cuda_attn_reference. Returns a cudaError_t value, or
 * ONYX__CUDA_ATTN_NOT_TAKEN for a fill_present problem off the Hopper route. */
int onyx__cuda_attn_run(const onyx__cuda_attn_params *p, const onyx__cuda_attn_plan *plan,
                        float *scores, int64_t key_cols, void *stream);

/* ------------------------------------------------------------------ launches (.cu) */

/* Whether this device is sm_90 and the sm_90a kernels have an image for it (cached per
 * device). */
int onyx__cuda_attn_hopper_available(void);

/* Hopper route: head sizes 64 and 128, hk == hv; no rotary, softcap, window, mask,
 * sink or smooth softmax (onyx__cuda_attn_hopper_refusal checks). Returns -1, having
 * launched nothing, when the driver refuses a tensor map of the layout. */
int onyx__cuda_attn_hopper(const onyx__cuda_attn_params *p, void *stream);

/* Whether the decode kernel has an image for this device and fits its shared memory
 * (cached per device). */
int onyx__cuda_attn_decode_available(void);

/* Decode route: head sizes 64 and 128, hk == hv, at most 16 rows per kv head; no
 * softcap or mask (onyx__cuda_attn_decode_refusal checks). p->partials and p->n_split
 * from the plan; with a split and no p->counters, the counters after the partials are
 * zeroed on the stream first. Returns a cudaError_t value. */
int onyx__cuda_attn_decode(const onyx__cuda_attn_params *p, void *stream);

/* Each returns a cudaError_t value (0 = success) from the launch; stream is a
 * cudaStream_t (NULL: the legacy default stream). */

/* Flash route: p->partials and p->n_split set from the plan. */
int onyx__cuda_attn_flash(const onyx__cuda_attn_params *p, uint32_t tile, int32_t row_tiles,
                          void *stream);

/* Reference route: scores is a (batch·nq·sq, key_cols) float region. */
int onyx__cuda_attn_reference(const onyx__cuda_attn_params *p, float *scores, int64_t key_cols,
                              void *stream);

/* Fills a KV buffer of one (b, g) row space: rows [0, past_b) from past (when copy_past),
 * rows [past_b, past_b + seq) from the new rows (keys rotated when cos is set), zeros in
 * rows [past_b + seq, rows) (when copy_past). past_b as in onyx__cuda_attn_params. */
typedef struct onyx__cuda_kv_fill {
  uint32_t dtype;
  int32_t batch, nkv, head, seq;
  int64_t rows; /* rows of dst per (b, g) */
  void *dst;
  int64_t d_bs, d_gs, d_rs;
  const void *past; /* may be NULL (no past rows to copy) */
  int64_t p_bs, p_gs, p_rs;
  int64_t past_cap; /* rows of past per (b, g): rows at or past it are never read */
  const void *src;  /* new rows: (b, g, s) at src[b·s_bs + g·s_gs + s·s_rs] */
  int64_t s_bs, s_gs, s_rs;
  int32_t copy_past; /* 0: only the new rows are written (shared buffer) */
  uint32_t mode;     /* onyx__cuda_attn_mode: how past_b is found */
  const int32_t *seqlens;
  int32_t first;
  int64_t past_rows; /* ONNX: the constant past length */
  /* Rotary (keys): as in onyx__cuda_attn_params; cos NULL: none. */
  const void *cos, *sin;
  int32_t rot_half;
  int64_t rot_rows;
  int32_t interleaved;
  const int64_t *pos_ids;
  int64_t pos_bs, pos_ss, pos_add_s;
} onyx__cuda_kv_fill;

int onyx__cuda_attn_kv_fill(const onyx__cuda_kv_fill *f, void *stream);

/* cudaMemsetAsync(dst, 0, bytes) on the stream; a cudaError_t value. */
int onyx__cuda_attn_zero(void *dst, uint64_t bytes, void *stream);

/* cudaGetErrorString of a cudaError_t value. */
const char *onyx__cuda_attn_error_text(int err);

#ifdef __cplusplus
}
#endif

#endif /* ONYX_CUDA_ATTN_IMPL_H */
