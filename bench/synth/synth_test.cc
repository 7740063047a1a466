// synth_test.cc: the synthetic training loop is deterministic and behaves like one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <vector>

#include "bench/synth/synth.h"

namespace {
std::vector<gmt_event_t> Make(uint64_t n, uint64_t seed) {
  std::vector<gmt_event_t> v(n);
  synth_opts_t o = {n, seed, 0, 0, 0, SYNTH_TRANSFORMER};
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

namespace {
std::vector<gmt_event_t> Stream(const synth_opts_t &o, size_t n, size_t chunk) {
  std::vector<gmt_event_t> v(n);
  synth_gen_t *g = synth_gen_new(&o);
  EXPECT_NE(g, nullptr);
  for (size_t k = 0; g && k < n;) {
    size_t got = synth_gen_next(g, v.data() + k, std::min(chunk, n - k));
    EXPECT_GT(got, 0u);
    if (!got) break;
    k += got;
  }
  synth_gen_free(g);
  return v;
}
}  // namespace

TEST(Synth, StreamGivesTheEventsFillGives) {
  for (uint32_t model : {SYNTH_TRANSFORMER, SYNTH_DYNAMIC}) {
    synth_opts_t o = {30000, 4, 3, 512, 0, model};
    std::vector<gmt_event_t> whole(o.events);
    synth_fill(&o, whole.data());
    auto streamed = Stream(o, o.events, 777);  // chunks that cut steps anywhere
    EXPECT_EQ(memcmp(whole.data(), streamed.data(), whole.size() * sizeof whole[0]), 0) << "model " << model;
  }
}

TEST(Synth, DynamicModelGivesEveryAllocationAFreshAddress) {
  synth_opts_t o = {100000, 1, 0, 0, 0, SYNTH_DYNAMIC};
  auto v = Stream(o, o.events, 4096);
  std::set<uint64_t> seen, live;
  uint64_t allocs = 0, frees = 0;
  std::set<uint64_t> sizes, streams;
  for (const gmt_event_t &e : v) {
    EXPECT_EQ(e.flags, 0u);  // cudaMalloc-like: not stream-ordered, not from a pool
    if (e.kind == GMT_EV_ALLOC) {
      ASSERT_TRUE(seen.insert(e.addr).second) << "address reused: " << e.addr;
      live.insert(e.addr);
      sizes.insert(e.size);
      streams.insert(e.stream);
      allocs++;
    } else {
      ASSERT_EQ(e.kind, GMT_EV_FREE);
      ASSERT_EQ(live.erase(e.addr), 1u) << "free of a block not allocated";
      frees++;
    }
  }
  EXPECT_GT(frees * 10, allocs * 9);   // all but the parameters are freed
  EXPECT_GT(sizes.size(), 10000u);     // dynamic shapes: sizes rarely repeat
  EXPECT_EQ(streams.size(), 2u);
  std::vector<gmt_event_t> again(o.events);
  synth_fill(&o, again.data());
  EXPECT_EQ(memcmp(v.data(), again.data(), v.size() * sizeof v[0]), 0);
}
