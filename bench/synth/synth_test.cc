// synth_test.cc: the synthetic training loop is deterministic and behaves like one.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>
#include <vector>

#include "bench/synth/synth.h"

namespace {
std::vector<gmt_event_t> Make(uint64_t n, uint64_t seed) {
  std::vector<gmt_event_t> v(n);
  synth_opts_t o = {n, seed, 0, 0, 0};
  synth_fill(&o, v.data());
  return v;
}
}  // namespace

TEST(Synth, SameSeedSameTraceOtherSeedOtherTrace) {
  auto a = Make(20000, 1), b = Make(20000, 1), c = Make(20000, 2);
  EXPECT_EQ(memcmp(a.data(), b.data(), a.size() * sizeof a[0]), 0);
  EXPECT_NE(memcmp(a.data(), c.data(), a.size() * sizeof a[0]), 0);
}

TEST(Synth, LooksLikeATrainingLoop) {
  auto v = Make(200000, 3);
  std::map<uint64_t, uint64_t> live;  // addr -> size
  std::set<uint64_t> sizes, streams;
  uint64_t steps = 0, frees = 0, lifo = 0, last_alloc = 0;
  for (size_t i = 0; i < v.size(); i++) {
    const gmt_event_t &e = v[i];
    if (i) {
      ASSERT_GE(e.ts_ns, v[i - 1].ts_ns) << i;  // monotonic
    }
    if (e.kind == GMT_EV_ALLOC) {
      ASSERT_EQ(live.count(e.addr), 0u) << "address handed out twice at " << i;
      live[e.addr] = e.size;
      sizes.insert(e.size);
      streams.insert(e.stream);
      last_alloc = e.addr;
    } else if (e.kind == GMT_EV_FREE) {
      ASSERT_EQ(live.count(e.addr), 1u) << "free of a block not allocated at " << i;
      EXPECT_EQ(live[e.addr], e.size);
      live.erase(e.addr);
      frees++;
      lifo += e.addr == last_alloc;
    } else if (e.kind == GMT_EV_MARKER && e.callsite == 1) {
      steps++;
    }
  }
  EXPECT_GT(steps, 50u);
  EXPECT_EQ(streams.size(), 2u);
  EXPECT_LT(sizes.size(), 200u);  // sizes repeat across steps
  EXPECT_GT(lifo * 10, frees);    // a good share of frees hit the block allocated last
}
