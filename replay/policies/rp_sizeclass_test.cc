// rp_sizeclass_test.cc: the size classes (monotonic, refining TF's power-of-two bins) and the
// bitmap's next / previous searches against a scan of a plain array of flags.
#include "replay/policies/rp_sizeclass.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace {

TEST(SizeClass, MonotonicAndRefinesPowersOfTwo) {
  for (unsigned shift : {8u, 9u}) {
    uint32_t prev = 0;
    for (uint64_t sz = 0; sz < (64ull << 20); sz += 256) {
      uint32_t k = rp_sc_class(sz, shift);
      ASSERT_GE(k, prev) << sz;
      ASSERT_LT(k, (uint32_t)RP_SC_N);
      prev = k;
    }
    for (int e = 0; e < 64; e++) {  // a power of two starts a class: classes never span one
      uint64_t p = 1ull << e;
      if (p >> shift < 16) continue;
      ASSERT_GT(rp_sc_class(p, shift), rp_sc_class(p - 1, shift)) << e;
    }
    EXPECT_LT(rp_sc_class(UINT64_MAX, shift), (uint32_t)RP_SC_N);
  }
  EXPECT_EQ(rp_sc_class(511, 9), 0u);
  EXPECT_EQ(rp_sc_class(512, 9), 1u);
  EXPECT_EQ(rp_sc_class(1 << 20, 9), rp_sc_class((1 << 20) + (1 << 16), 9));  // an eighth of an octave
  EXPECT_NE(rp_sc_class(1 << 20, 9), rp_sc_class((1 << 20) + (1 << 17), 9));
}

// The classes by their definition (16 exact, then 8 per power of two: the power and the next
// three bits), against rp_sc_class's branch-free form on every size of a range in steps of the
// unit and at every power of two's edges up to 2^64 - 1.
static uint32_t ClassByDefinition(uint64_t size, unsigned shift) {
  uint64_t x = size >> shift;
  if (x < 16) return (uint32_t)x;
  uint32_t e = 0;
  while ((x >> e) > 1) e++;  // floor(log2 x) >= 4
  return 16u + (e - 4u) * 8u + (uint32_t)((x >> (e - 3u)) & 7u);
}

TEST(SizeClass, ClosedFormIsTheDefinition) {
  for (unsigned shift : {8u, 9u}) {
    uint64_t unit = 1ull << shift;
    for (uint64_t sz = 0; sz < (1ull << 24); sz += unit) {
      ASSERT_EQ(rp_sc_class(sz, shift), ClassByDefinition(sz, shift)) << sz;
      ASSERT_EQ(rp_sc_class(sz + unit - 1, shift), ClassByDefinition(sz + unit - 1, shift)) << sz + unit - 1;
    }
    for (int e = 24; e < 64; e++)
      for (uint64_t sz : {(1ull << e) - 1, 1ull << e, (1ull << e) + 1, (1ull << e) + (1ull << (e - 1)) + 12345})
        ASSERT_EQ(rp_sc_class(sz, shift), ClassByDefinition(sz, shift)) << sz;
    EXPECT_EQ(rp_sc_class(UINT64_MAX, shift), ClassByDefinition(UINT64_MAX, shift));
  }
}

TEST(SizeClass, BitmapSearchesAgainstFlags) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 300; round++) {
    rp_sc_map_t m = {};
    std::vector<bool> f(RP_SC_N, false);
    int density = 1 + (int)(rng() % 40);  // from almost empty to dense
    for (int i = 0; i < 2 * density; i++) {
      uint32_t k = (uint32_t)(rng() % RP_SC_N);
      if (rng() % 3) {
        rp_sc_set(&m, k);
        f[k] = true;
      } else {
        rp_sc_clear(&m, k);
        f[k] = false;
      }
    }
    for (uint32_t k = 0; k <= RP_SC_N; k++) {
      uint32_t want = k;
      while (want < RP_SC_N && !f[want]) want++;
      ASSERT_EQ(rp_sc_next(&m, k), want) << "round " << round << " k " << k;
      if (k == RP_SC_N) break;
      ASSERT_EQ(rp_sc_has(&m, k) != 0, (bool)f[k]);
      int64_t p = k;
      while (p >= 0 && !f[(size_t)p]) p--;
      ASSERT_EQ(rp_sc_prev(&m, k), p < 0 ? UINT32_MAX : (uint32_t)p) << "round " << round << " k " << k;
    }
  }
}

}  // namespace
