// pt_same_test.cc: same_run (pt_same.c) against whole replays. For random and adversarial
// traces, every setting of a list is replayed on the simulator (driver placement and bump
// pointer, with and without a capacity); wherever same_run says that setting b replays as
// setting a did, b's whole result must be a's (every field but the spec and the timings).
// The traces are built to reach the keys' edges: segments just below and above
// max_split_size_mb, peaks around a memory fraction and its GC threshold, requests in the
// roundup intervals a list sets, empty_cache, streams, OOMs under a capacity.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "formats/gmt_testutil.h"
#include "replay/engine/rp_engine.h"
#include "replay/policies/pytorch/rp_pytorch.h"

using gmt_test::Ev;

namespace {

constexpr uint64_t MiB = 1ull << 20;

struct Outcome {
  rp_result_t r{};
  gm_status_t st = GM_OK;
  std::string err;
};

Outcome Replay(const std::vector<gmt_event_t> &v, const char *conf, uint64_t capacity, uint64_t total, int driver) {
  Outcome out;
  rp_sim_opts_t so{};
  so.capacity = capacity;
  so.total_memory = total;
  so.addresses = driver;
  rp_backend_t *b = nullptr;
  rp_engine_t *e = nullptr;
  gm_err_t err{};
  out.st = rp_sim_backend_create(&so, &b, &err);
  rp_engine_opts_t eo{};
  eo.device = -1;
  eo.capacity = capacity;
  if (out.st == GM_OK) out.st = rp_engine_create(&rp_pytorch_ops, conf, b, &eo, &e, &err);
  if (out.st == GM_OK) out.st = rp_engine_feed(e, v.data(), v.size(), &err);
  if (out.st == GM_OK) out.st = rp_engine_finish(e, &out.r, &err);
  out.err = err.msg;
  rp_engine_destroy(e);
  if (b) b->destroy(b);
  return out;
}

// Every figure of the two results equal, the spec and the timings aside.
bool SameResult(rp_result_t a, rp_result_t b) {
  memset(a.policy, 0, sizeof a.policy);
  memset(b.policy, 0, sizeof b.policy);
  a.replay_seconds = b.replay_seconds = 0;
  a.events_per_second = b.events_per_second = 0;
  return memcmp(&a, &b, sizeof a) == 0;
}

const char *const kSettings[] = {
    "",
    "max_split_size_mb:64",
    "max_split_size_mb:128",
    "max_split_size_mb:129",
    "max_split_size_mb:512",
    "max_split_size_mb:128,max_non_split_rounding_mb:64",
    "max_non_split_rounding_mb:64",
    "roundup_power2_divisions:4",
    "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]",
    "roundup_power2_divisions:[32:1,64:4,>:1]",
    "roundup_power2_divisions:[64:1,>:2]",
    "per_process_memory_fraction:0.9",
    "per_process_memory_fraction:0.5",
    "per_process_memory_fraction:0.25",
    "garbage_collection_threshold:0.8,per_process_memory_fraction:0.9",
    "garbage_collection_threshold:0.5,per_process_memory_fraction:0.5",
    "garbage_collection_threshold:0.2,per_process_memory_fraction:0.9",
    "max_split_size_mb:128,roundup_power2_divisions:[256:1,512:2,1024:4,>:8],garbage_collection_threshold:0.8,"
    "per_process_memory_fraction:0.9",
    "max_split_size_mb:64,per_process_memory_fraction:0.5",
    "large_segment_size_mb:40",
    "expandable_segments:True",
};

// A random program: allocations of sizes drawn around the keys' edges, frees of live ones,
// now and then an empty_cache, on 1-2 streams; big: the largest ordinary request (one seed in
// four keeps every request below 64 MiB, the others reach past 128 MiB).
std::vector<gmt_event_t> Program(unsigned seed, int n, uint64_t big) {
  std::vector<gmt_event_t> v;
  std::vector<uint64_t> live;
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  auto next = [&x]() { return x = x * 6364136223846793005ull + 1442695040888963407ull, x >> 33; };
  static const uint64_t edges[] = {64 * MiB, 128 * MiB, 129 * MiB, 32 * MiB, 10 * MiB, MiB};
  for (int i = 0; i < n; i++) {
    uint64_t r = next() % 100;
    if (!live.empty() && r < 45) {
      size_t k = next() % live.size();
      v.push_back(Ev(GMT_EV_FREE, (uint64_t)i, live[k], 0, 0));
      live[k] = live.back();
      live.pop_back();
      continue;
    }
    if (r == 45 && seed % 3 == 0) {
      v.push_back(Ev(GMT_EV_EMPTY_CACHE, (uint64_t)i, 0, 0, 0));
      continue;
    }
    uint64_t size;
    uint64_t kind = next() % 10;
    if (kind < 4) size = next() % MiB + 1;                                   // small pool
    else if (kind < 7) size = next() % (12 * MiB) + MiB;                     // 1-13 MiB
    else if (kind < 9) size = next() % big + 1;                              // large, to big
    else size = edges[(seed % 4 == 2 ? 3 : 0) + next() % (seed % 4 == 2 ? 3 : 6)] - 512 + next() % 1024;  // an edge
    uint64_t addr = 0x100000 + (uint64_t)i * 0x1000;
    v.push_back(Ev(GMT_EV_ALLOC, (uint64_t)i, addr, size, seed % 2 ? next() % 2 : 0));
    live.push_back(addr);
  }
  return v;
}

struct Tally {
  int proven = 0, proven_differ = 0, unproven_differ = 0, pairs = 0;
  std::set<std::pair<std::string, std::string>> proven_pairs;
};

void CheckAll(const std::vector<gmt_event_t> &v, uint64_t capacity, uint64_t total, int driver, Tally *t,
              const std::string &what) {
  const size_t n = sizeof kSettings / sizeof kSettings[0];
  std::vector<Outcome> runs;
  for (size_t i = 0; i < n; i++) runs.push_back(Replay(v, kSettings[i], capacity, total, driver));
  for (size_t a = 0; a < n; a++) {
    if (runs[a].st != GM_OK) continue;
    for (size_t b = 0; b < n; b++) {
      if (a == b) continue;
      t->pairs++;
      bool equal = runs[b].st == GM_OK && SameResult(runs[a].r, runs[b].r);
      if (rp_pytorch_ops.same_run(kSettings[a], kSettings[b], &runs[a].r.facts)) {
        t->proven++;
        t->proven_pairs.insert({kSettings[a], kSettings[b]});
        EXPECT_TRUE(equal) << what << ": same_run(\"" << kSettings[a] << "\", \"" << kSettings[b]
                           << "\") on its facts, but the replays differ (peak " << runs[a].r.peak_reserved_bytes
                           << " vs " << runs[b].r.peak_reserved_bytes << ", " << runs[b].err << ")";
        if (!equal) t->proven_differ++;
      } else if (!equal) {
        t->unproven_differ++;
      }
    }
  }
}

TEST(PtSame, ProvenPairsReplayAlikeOnRandomPrograms) {
  Tally t;
  for (unsigned seed = 1; seed <= 24; seed++) {
    uint64_t big = seed % 4 == 0 ? 300 * MiB : seed % 4 == 1 ? 120 * MiB : 60 * MiB;
    std::vector<gmt_event_t> v = Program(seed, 600, big);
    for (int driver = 0; driver < 2; driver++) {
      // total memory: the fractions' limits fall below, around and above the peaks
      uint64_t total = (seed % 3 + 1) * 1024 * MiB;
      uint64_t capacity = seed % 5 == 0 ? 700 * MiB : 0;
      CheckAll(v, capacity, total, driver, &t,
               "seed " + std::to_string(seed) + (driver ? " driver" : " bump") +
                   (capacity ? " capacity" : ""));
    }
  }
  EXPECT_EQ(t.proven_differ, 0);
  // not vacuous: many pairs proven, and pairs that a favourable run would prove do differ here
  EXPECT_GT(t.proven, t.pairs / 40) << t.pairs;
  EXPECT_GT(t.unproven_differ, t.pairs / 20) << t.pairs;
  // each rule proved a pair somewhere (a max_split_size_mb, a roundup list, a fraction with GC)
  for (const char *b : {"max_split_size_mb:512", "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]",
                        "garbage_collection_threshold:0.8,per_process_memory_fraction:0.9",
                        "max_split_size_mb:128,roundup_power2_divisions:[256:1,512:2,1024:4,>:8],"
                        "garbage_collection_threshold:0.8,per_process_memory_fraction:0.9"})
    EXPECT_EQ(t.proven_pairs.count({"", b}), 1u) << b;
}

// A limit met while max_split_size is in force: release_available frees the cached oversize
// block and the allocation succeeds, no retry, no OOM, the peak within the limit. The run
// without the limit reserves more: only the segment that was freed tells them apart.
TEST(PtSame, ALimitPassedByFreeingAnOversizeBlockIsNotDormant) {
  std::vector<gmt_event_t> v = {Ev(GMT_EV_ALLOC, 0, 0x1000, 100 * MiB, 0), Ev(GMT_EV_FREE, 1, 0x1000, 0, 0),
                                Ev(GMT_EV_ALLOC, 2, 0x2000, 30 * MiB, 0)};
  const char *limited = "max_split_size_mb:64,per_process_memory_fraction:0.5", *free_ = "max_split_size_mb:64";
  Outcome a = Replay(v, limited, 0, 240 * MiB, 1), b = Replay(v, free_, 0, 240 * MiB, 1);
  ASSERT_EQ(a.st, GM_OK) << a.err;
  ASSERT_EQ(b.st, GM_OK) << b.err;
  EXPECT_TRUE(a.r.facts.clean);
  EXPECT_EQ(a.r.facts.segment_frees, 1u);
  EXPECT_EQ(a.r.peak_reserved_bytes, 100 * MiB);
  EXPECT_EQ(b.r.peak_reserved_bytes, 130 * MiB);
  EXPECT_EQ(rp_pytorch_ops.same_run(limited, free_, &a.r.facts), 0);
  EXPECT_EQ(rp_pytorch_ops.same_run(free_, limited, &b.r.facts), 0);  // its peak is past the limit
}

// The edges one by one, on facts written by hand.
TEST(PtSame, EachKeyIsDormantOnlyPastItsEdge) {
  rp_run_facts_t f = {80ull << 30, 3ull << 30, 128 * MiB, (1ull << 20) | (1ull << 27), 0, 1};
  auto same = [&f](const char *a, const char *b) { return rp_pytorch_ops.same_run(a, b, &f); };
  EXPECT_EQ(same("", "max_split_size_mb:129"), 1);
  EXPECT_EQ(same("", "max_split_size_mb:128"), 0);  // a segment of exactly 128 MiB: oversize
  EXPECT_EQ(same("max_split_size_mb:256", "max_split_size_mb:512,max_non_split_rounding_mb:64"), 1);
  EXPECT_EQ(same("", "roundup_power2_divisions:[256:1,512:2,1024:4,>:8]"), 1);
  EXPECT_EQ(same("", "roundup_power2_divisions:[64:1,128:2,>:1]"), 0);  // a request in [128, 256) MiB
  EXPECT_EQ(same("", "roundup_power2_divisions:[1:2,2:1,>:1]"), 0);     // a request in [1, 2) MiB
  EXPECT_EQ(same("", "per_process_memory_fraction:0.9"), 1);
  EXPECT_EQ(same("", "garbage_collection_threshold:0.8,per_process_memory_fraction:0.9"), 1);
  EXPECT_EQ(same("", "per_process_memory_fraction:0.03"), 0);  // 2.4 GiB: below the peak
  EXPECT_EQ(same("", "garbage_collection_threshold:0.04,per_process_memory_fraction:0.9"), 0);  // GC acts
  EXPECT_EQ(same("", "large_segment_size_mb:40"), 0);
  EXPECT_EQ(same("", "expandable_segments:True"), 0);
  EXPECT_EQ(same("expandable_segments:True", "expandable_segments:True"), 1);  // equal settings
  EXPECT_EQ(same("", "max_split_size_mb:abc"), 0);                              // does not parse
  f.clean = 0;
  EXPECT_EQ(same("", "max_split_size_mb:512"), 0);
  EXPECT_EQ(same("max_split_size_mb:512", " max_split_size_mb : 512"), 1);
  f.clean = 1;
  f.total_memory = 0;  // a fraction cannot be created without the device's memory
  EXPECT_EQ(same("", "per_process_memory_fraction:0.9"), 0);
}

}  // namespace
