// va_model_test.cc: each placement rule of replay/engine/va_model.c on the real sequence it was read
// from (segment addresses of traces/snapshots, in MiB from a reference point of the real run).
#include "replay/engine/va_model.h"

#include <gtest/gtest.h>

#include <vector>

namespace {

constexpr uint64_t M = 1ull << 20;
constexpr uint64_t kBase = 0x7f0000000000ull;

struct Va {
  rp_va_t *v;
  explicit Va(rp_va_policy_t p, uint64_t first = 0) {
    rp_va_opts_t o{p, kBase, 0, 0, 0, first};
    v = rp_va_new(&o);
  }
  ~Va() { rp_va_free_all(v); }
  // MiB relative to base (negative: below it).
  int64_t A(uint64_t mib) {
    uint64_t a = 0;
    EXPECT_EQ(rp_va_alloc(v, mib * M, &a), GM_OK);
    return ((int64_t)a - (int64_t)kBase) / (int64_t)M;
  }
  void F(int64_t at) { EXPECT_EQ(rp_va_release(v, (uint64_t)((int64_t)kBase + at * (int64_t)M)), GM_OK); }
};

// R0: train_cnn.default from the 26 MiB segment at -414 MiB on: each segment right after the one
// before (26, 38, 26, 14, 14, 14, 14, 20 MiB), bottom up, inside the first area.
TEST(VaModel, FirstAreaFillsBottomUp) {
  Va v(RP_VA_DRIVER);
  std::vector<uint64_t> sizes = {26, 38, 26, 14, 14, 14, 14, 20};
  std::vector<int64_t> got;
  for (uint64_t s : sizes) got.push_back(v.A(s));
  std::vector<int64_t> want = {-384, -358, -320, -294, -280, -266, -252, -238};  // real: -414 + same steps
  EXPECT_EQ(got, want);
}

// R1: a request rounds up to 2 MiB granules (roundup_list: a 9830547 B request took a 10 MiB
// segment, and the next segment starts 10 MiB on).
TEST(VaModel, SizesRoundToTwoMiB) {
  Va v(RP_VA_DRIVER);
  uint64_t a, b;
  ASSERT_EQ(rp_va_alloc(v.v, 9830547, &a), GM_OK);
  ASSERT_EQ(rp_va_alloc(v.v, 2 * M, &b), GM_OK);
  EXPECT_EQ(b - a, 10 * M);
  ASSERT_EQ(rp_va_alloc(v.v, 0, &b), GM_OK);  // 0 B still takes a granule
  EXPECT_EQ(b - a, 12 * M);
}

// R2 + R3 (+ R4): train_cnn.default once the first area is full, the real sequence: 50 MiB at
// -1694, 76 at -1790, 50 at -1854, 20 at -1714 (the hole after the 76), 20 at -1886, 20 at -1918,
// 50 at -1982, 82 at -2078: each new region the next multiple of 32 MiB (64, 96, 64, 32, 32, 64,
// 96) right below the one before.
TEST(VaModel, NewRegionsAreThirtyTwoMiBMultiplesTopDown) {
  Va v(RP_VA_DRIVER, 32 * M);
  EXPECT_EQ(v.A(32), -32);  // fills the first area
  std::vector<uint64_t> sizes = {50, 76, 50, 20, 20, 20, 50, 82};
  std::vector<int64_t> got;
  for (uint64_t s : sizes) got.push_back(v.A(s) - (-32 - 64) + (-1694));  // in the real run's terms
  EXPECT_EQ(got, (std::vector<int64_t>{-1694, -1790, -1854, -1714, -1886, -1918, -1982, -2078}));
}

// R4: holes left in regions are used first, the lowest first, at their low end. train_cnn.default:
// the 44 MiB region at -1630 (64 MiB) left 20 MiB free; the next 2 MiB segment went to -1586,
// right after the 44 MiB, and later the 20 MiB at -1714 filled the hole after the 76 MiB at -1790
// (96 MiB region), not a new region.
TEST(VaModel, HolesFirstLowestFirst) {
  Va v(RP_VA_DRIVER, 32 * M);
  v.A(32);
  int64_t r44 = v.A(44);
  EXPECT_EQ(v.A(2), r44 + 44);
  int64_t r50 = v.A(50);
  int64_t r76 = v.A(76);
  EXPECT_EQ(r50, r44 - 64);
  EXPECT_EQ(r76, r50 - 96);
  v.A(50);                        // a new region below: 50 in 64, a 14 MiB hole
  EXPECT_EQ(v.A(20), r76 + 76);   // the 20 MiB hole after the 76 MiB (the lower 14 MiB holes are too small)
  EXPECT_EQ(v.A(14), r76 - 64 + 50);  // the lowest hole that fits: after the last 50 MiB
}

// R5: a region whose last segment is freed goes back; a later region may cover its addresses.
// train_cnn.gc06: the 20 MiB segment at -1950 (its own 32 MiB region) freed, then 50 MiB at
// -1982, over it (64 MiB region right below -1918).
TEST(VaModel, EmptyRegionsGoBack) {
  Va v(RP_VA_DRIVER, 32 * M);
  v.A(32);
  int64_t a = v.A(20), b = v.A(20);
  EXPECT_EQ(b, a - 32);
  v.F(b);
  EXPECT_EQ(v.A(50), a - 64);  // over b's old region
  EXPECT_EQ(rp_va_live(v.v), 3u);
}

// A freed segment inside a region that still holds others is a hole (train_cnn.gc06: 26, 38 and
// 26 MiB at -414, -388, -350 freed, then 82 MiB at -414).
TEST(VaModel, FreedNeighboursMergeIntoOneHole) {
  Va v(RP_VA_DRIVER);
  int64_t a = v.A(26), b = v.A(38), c = v.A(26);
  v.A(14);
  v.F(a);
  v.F(c);
  v.F(b);
  EXPECT_EQ(v.A(82), a);
}

TEST(VaModel, BumpAscendsAndNeverReuses) {
  Va v(RP_VA_BUMP);
  int64_t a = v.A(20), b = v.A(2);
  v.F(a);
  int64_t c = v.A(20);
  EXPECT_EQ(a, 0);
  EXPECT_EQ(b, 20);
  EXPECT_EQ(c, 22);
}

TEST(VaModel, BadInput) {
  Va v(RP_VA_DRIVER);
  EXPECT_EQ(rp_va_release(v.v, 12345), GM_ERR_INVAL);
  uint64_t a;
  EXPECT_EQ(rp_va_alloc(v.v, ~0ull, &a), GM_ERR_NOMEM);
  rp_va_opts_t bad{RP_VA_DRIVER, kBase, 3 * M, 0, 0, 0};
  EXPECT_EQ(rp_va_new(&bad), nullptr);
  EXPECT_EQ(rp_va_policy_parse("driver"), RP_VA_DRIVER);
  EXPECT_EQ(rp_va_policy_parse("bump"), RP_VA_BUMP);
  EXPECT_EQ(rp_va_policy_parse("top"), -1);
}

}  // namespace
