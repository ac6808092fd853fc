/*
 * The Hopper prefill kernel's work schedule (cuda_attn_hopper_sched.cuh), walked on the
 * host by the host compiler: no device and no nvcc needed, so every CI build runs it
 * (the sanitizer builds too).
 * - Divisor agrees with integer division;
 * - for every grid, head count, row-block count and both schedules, each CTA's cursor
 *   walk (the consumers') equals its loop walk (the producer's), and the CTAs together
 *   take every (head, row block) exactly once;
 * - on the causal shapes the busiest CTA's key tiles stay near the mean.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

extern "C" { /* cmocka 1.1's header has no C++ guard */
#include <cmocka.h>
}

#include <vector>

#include "cuda_attn_hopper_sched.cuh"

using namespace onyx_cuda_attn::hopper;

static void test_divisor(void **state) {
  (void)state;
  const int big[] = {0, 1, 2, 3, 1000, 65535, 65536, 1 << 20, 123456789, 0x7ffffffe, 0x7fffffff};
  for (uint32_t d = 1; d < 5000; ++d) {
    const Divisor v = make_divisor(d);
    for (int n = 0; n < 3 * (int)d + 5; ++n) assert_int_equal(v.div(n), n / (int)d);
    for (int n : big) assert_int_equal(v.div(n), n / (int)d);
  }
  const uint32_t ds[] = {65537, 1u << 20, 1000003, 0x40000000u, 0x7fffffffu};
  for (uint32_t d : ds) {
    const Divisor v = make_divisor(d);
    for (int n : big) assert_int_equal(v.div(n), n / (int)d);
  }
}

/* One CTA's items in order, by the cursor (next_item) and by the loops (for_each_item). */
static std::vector<int> walk_cursor(const Sched &s, int G, int me) {
  std::vector<int> out;
  Cursor c;
  for (int bh, mi; next_item(s, G, me, c, bh, mi);) out.push_back(bh * s.m_blocks + mi);
  return out;
}
static std::vector<int> walk_loops(const Sched &s, int G, int me) {
  std::vector<int> out;
  for_each_item(s, G, me, [&](int bh, int mi) { out.push_back(bh * s.m_blocks + mi); });
  return out;
}

static void check_cover(int G, int heads, int m_blocks, bool paired) {
  const Sched s = plan_sched(m_blocks, heads, G, paired);
  std::vector<int> seen((size_t)heads * m_blocks, 0);
  for (int me = 0; me < G; ++me) {
    const std::vector<int> a = walk_cursor(s, G, me), b = walk_loops(s, G, me);
    if (a != b)
      fail_msg("G %d heads %d m_blocks %d paired %d: CTA %d's cursor and loop walks differ", G,
               heads, m_blocks, paired, me);
    for (int k : a) {
      assert_true(k >= 0 && k < (int)seen.size());
      ++seen[(size_t)k];
    }
  }
  for (size_t k = 0; k < seen.size(); ++k)
    if (seen[k] != 1)
      fail_msg("G %d heads %d m_blocks %d paired %d: item (head %zu, block %zu) taken %d times", G,
               heads, m_blocks, paired, k / (size_t)m_blocks, k % (size_t)m_blocks, seen[k]);
}

static void test_every_item_once(void **state) {
  (void)state;
  const int grids[] = {1, 3, 132, 133};
  const int heads[] = {1, 2, 7, 32, 128, 448};
  const int blocks[] = {1, 2, 3, 7, 8, 32, 33};
  for (int G : grids)
    for (int h : heads)
      for (int m : blocks)
        for (int paired = 0; paired < 2; ++paired) check_cover(G, h, m, paired != 0);
}

/* The busiest CTA's causal cost (key tiles of its items plus half a tile each) over the
 * mean, for m_blocks row blocks of `heads` heads on 132 CTAs. */
static double busiest_over_mean(int heads, int m_blocks, bool paired) {
  const int G = 132;
  const Sched s = plan_sched(m_blocks, heads, G, paired);
  double worst = 0.0, sum = 0.0;
  for (int me = 0; me < G; ++me) {
    double cost = 0.0;
    for_each_item(s, G, me, [&](int, int mi) { cost += mi + 1.5; });
    worst = cost > worst ? cost : worst;
    sum += cost;
  }
  return worst / (sum / G);
}

static void test_causal_balance(void **state) {
  (void)state;
  /* heads = B · Hq, row blocks of 128 rows: B4 and B1 S4096 Hq32, B2 S8192, B16 S2048. */
  const int shapes[][2] = {{128, 32}, {32, 32}, {64, 64}, {512, 16}};
  for (const auto &sh : shapes) {
    const double heavy = busiest_over_mean(sh[0], sh[1], false);
    const double paired = busiest_over_mean(sh[0], sh[1], true);
    printf("heads %3d row blocks %2d: busiest CTA / mean %.4f heavy first, %.4f paired\n", sh[0],
           sh[1], heavy, paired);
    assert_true(heavy < 1.005);
    assert_true(paired < 1.015);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_divisor),
      cmocka_unit_test(test_every_item_once),
      cmocka_unit_test(test_causal_balance),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
