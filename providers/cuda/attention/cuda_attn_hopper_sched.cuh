/*
 * Which work items each CTA of the Hopper prefill kernel's persistent grid takes, and in
 * what order (cuda_attn_hopper.cu). An item is row block mi (128 query rows) of query
 * head bh = b · nq + h, so a KV group's query heads are neighbours.
 *
 * Two schedules, both static (no counter in memory, so nothing to reset between launches
 * or graph replays):
 * - heavy first (the default): items in the order (row block from the last down, head),
 *   round r of the grid taking the r-th G of them, dealt forwards in even rounds and
 *   backwards in odd ones (a snake), so long items start first and short ones fill the
 *   tail. A round holds one row block of every head, so every KV group's K/V is read at
 *   once (B4 S4096 D128: 64 MB against 50 MB of L2; 66 % L2 hits in ncu).
 * - paired: a unit is a head's row blocks u and m_blocks − 1 − u. Under a causal mask the
 *   two see keys adding to the same count whatever u is, so dealing units round-robin
 *   (CTA c takes unit r·G + c) balances the CTAs without sorting by weight, and the G
 *   units of a round come from a few neighbouring heads: their K/V meet in L2. The last
 *   heads (about two rounds of units) stay heavy first, snaked, starting with the CTAs
 *   that got no unit in the paired part's last round, to even out the tail. Selected
 *   with onyx__cuda_attn_hopper_schedule = 1: at B4 S4096 on an H100 it read the same as
 *   heavy first (514 TFLOP/s both, medians of 7 rotated rounds), so L2 reuse is not what
 *   that shape lacks; kept, tested, for longer keys where a group's K/V is larger.
 * A host-side simulation of the causal shapes (132 CTAs, an item's cost its key tiles
 * plus half a tile) puts the paired schedule's busiest CTA 0.2–1.3 % further above the
 * mean than the heavy-first one's (2.4 % at B1 S16384, where units are long).
 */
#pragma once

#include <stdint.h>

namespace onyx_cuda_attn {
namespace hopper {

/* Host and device alike: tests walk the schedule on the host (test_hopper_sched.cpp). */
#if defined(__CUDACC__)
#define ONYX_SCHED_FN __host__ __device__ __forceinline__
#else
#define ONYX_SCHED_FN inline
#endif

/* n / d for 0 <= n < 2^31 by a multiply-high and a shift (division by an invariant
 * integer): the producer walks the schedule with 24 registers, where the generic
 * division's temporaries spill. */
struct Divisor {
  uint32_t d, mul, shift;
  ONYX_SCHED_FN int div(int n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t hi = __umulhi((uint32_t)n, mul);
#else
    const uint32_t hi = (uint32_t)(((uint64_t)(uint32_t)n * mul) >> 32);
#endif
    return (int)((hi + (uint32_t)n) >> shift);
  }
};
/* For 1 <= d < 2^31: shift = ceil(log2 d), mul = 2^32 · (2^shift − d) / d + 1. */
inline Divisor make_divisor(uint32_t d) {
  uint32_t shift = 0;
  while (shift < 31 && (1u << shift) < d) ++shift;
  const uint64_t mul = (((uint64_t)1 << 32) * (((uint64_t)1 << shift) - d)) / d + 1;
  return Divisor{d, (uint32_t)mul, shift};
}

/* The schedule of one launch, the same for every CTA. */
struct Sched {
  int m_blocks;           /* row blocks of a head */
  Divisor units_per_head; /* (m_blocks + 1) / 2 */
  int paired_heads;       /* heads [0, paired_heads) are dealt in units; 0: heavy first alone */
  int paired_units;       /* paired_heads · units_per_head */
  int paired_rounds;      /* rounds of the paired part */
  Divisor tail_heads;     /* heads − paired_heads */
  int tail_items;         /* tail_heads · m_blocks */
};

/* CTA me's (of G) unit of paired round r (< paired_rounds): head bh, row blocks hi (the
 * heavy one, first) and lo (the same block for the middle of an odd count); false where
 * the paired part's partial last round has none for it. */
ONYX_SCHED_FN bool paired_unit(const Sched &s, int G, int me, int r, int &bh, int &lo, int &hi) {
  const int u = r * G + me;
  if (u >= s.paired_units) return false;
  bh = s.units_per_head.div(u);
  lo = u - bh * (int)s.units_per_head.d;
  hi = s.m_blocks - 1 - lo;
  return true;
}

/* CTA me's item of tail round q: head bh, row block mi; false past the end. After a
 * paired part the snake starts backwards: the CTAs its last round left idle take the
 * heaviest items. */
ONYX_SCHED_FN bool tail_item(const Sched &s, int G, int me, int q, int &bh, int &mi) {
  const bool forwards = ((q + (s.paired_rounds > 0)) & 1) == 0;
  const int k = q * G + (forwards ? me : G - 1 - me);
  if (k >= s.tail_items) return false;
  const int row = s.tail_heads.div(k); /* rounds of the tail run heavy first */
  mi = s.m_blocks - 1 - row;
  bh = s.paired_heads + (k - row * (int)s.tail_heads.d);
  return true;
}

/* Calls f(bh, mi) for CTA me's items in order: the producer's walk. Two plain loops
 * (one walk with a cursor, as next_item, spills in the producer's 24 registers). */
#if defined(__CUDACC__)
#pragma nv_exec_check_disable /* f is a host lambda in the tests, a device one in the kernel */
#endif
template <typename F> ONYX_SCHED_FN void for_each_item(const Sched &s, int G, int me, F &&f) {
  for (int r = 0, bh, lo, hi; r < s.paired_rounds && paired_unit(s, G, me, r, bh, lo, hi); ++r) {
    f(bh, hi);
    if (lo != hi) f(bh, lo);
  }
  for (int q = 0, bh, mi; tail_item(s, G, me, q, bh, mi); ++q) f(bh, mi);
}

/* One CTA's place in the schedule: its step (in the paired part two a round, the unit's
 * heavy row block then its light one; one a round after it). */
struct Cursor {
  int step = 0;
};

/* CTA me's next item (head bh, row block mi), the same sequence as for_each_item's, as
 * a cursor the consumers advance one item at a time; false once it has none left. */
ONYX_SCHED_FN bool next_item(const Sched &s, int G, int me, Cursor &c, int &bh, int &mi) {
  while (c.step < 2 * s.paired_rounds) {
    const int light = c.step & 1;
    int lo, hi;
    if (!paired_unit(s, G, me, c.step >> 1, bh, lo, hi)) {
      c.step = 2 * s.paired_rounds;
      break;
    }
    ++c.step;
    if (light && lo == hi) continue; /* the middle block of an odd count is a unit alone */
    mi = light ? lo : hi;
    return true;
  }
  const int q = c.step - 2 * s.paired_rounds;
  ++c.step;
  return tail_item(s, G, me, q, bh, mi);
}

/* The schedule for m_blocks row blocks of `heads` heads over G CTAs; paired or heavy
 * first alone. */
inline Sched plan_sched(int m_blocks, int heads, int G, bool paired) {
  Sched s{};
  s.m_blocks = m_blocks;
  const int per_head = (m_blocks + 1) / 2;
  s.units_per_head = make_divisor((uint32_t)per_head);
  if (paired && G > 0) {
    const long long units = (long long)heads * per_head;
    const long long tail_rounds = 2; /* of units left heavy first: the simulation's best */
    const long long want = units / G > tail_rounds ? (units / G - tail_rounds) * G : 0;
    s.paired_heads = (int)(want / per_head);
    s.paired_units = s.paired_heads * per_head;
    s.paired_rounds = (s.paired_units + G - 1) / G;
  }
  s.tail_heads = make_divisor((uint32_t)(heads - s.paired_heads));
  s.tail_items = (heads - s.paired_heads) * m_blocks;
  return s;
}

} // namespace hopper
} // namespace onyx_cuda_attn
