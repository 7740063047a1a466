// engine_loop_test.cc: the event loop's own path for the plain requests (engine_loop.c) gives
// every figure the general path gives (rp_engine_one, which opts.check forces for every event:
// the loop leaves a checked replay to it). Random traces mix plain requests with everything the
// loop hands over or counts inline: PyTorch's free_requested ... free pairs (back to back, late,
// never completed), stream-ordered blocks freed on other streams, external and host memory,
// other devices, anomalies (double, unknown frees, allocs over live blocks, oversize), OOMs
// under a capacity, empty_cache, recorded failures, segments and markers, stamps out of order;
// replayed by the real policies over both block maps (rp_map, address numbers), every event
// timing, followers (peak_only) and external sync, fed in chunks of random sizes.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "formats/gmt_testutil.h"
#include "replay/engine/rp_engine.h"
#include "replay/policies/rp_policy.h"

namespace {

constexpr uint64_t MiB = 1ull << 20;

std::vector<gmt_event_t> RandomTrace(uint64_t seed, size_t n) {
  std::mt19937_64 rng(seed);
  std::vector<gmt_event_t> v;
  std::vector<uint64_t> live, gone;
  uint64_t ts = 1000, next = 0x7f0000000000ull;
  auto pick = [&](std::vector<uint64_t> &from) {
    size_t k = rng() % from.size();
    uint64_t a = from[k];
    from[k] = from.back();
    from.pop_back();
    return a;
  };
  while (v.size() < n) {
    unsigned r = rng() % 100;
    ts += rng() % 4 == 0 ? 0 : 1 + rng() % 20000;  // equal stamps too
    uint64_t t = rng() % 50 == 0 && ts > 5000 ? ts - 5000 : ts;  // now and then out of order
    uint64_t stream = rng() % 3 == 0 ? 9 : 7;
    if (r < 45 || live.empty()) {
      uint64_t size = rng() % 8 == 0 ? (1 + rng() % 64) * MiB : 512 * (1 + rng() % 4096) + rng() % 512;
      uint64_t addr = rng() % 40 == 0 && !live.empty() ? live[rng() % live.size()] : (next += 1 << 26);  // over a live one
      gmt_test::Ev e(GMT_EV_ALLOC, t, addr, size, stream);
      if (rng() % 3 == 0) e.flags |= GMT_F_ASYNC;
      if (rng() % 60 == 0) e.flags |= GMT_F_EXTERNAL;
      if (rng() % 20 == 0) e.mem_kind = GMT_MEM_UNKNOWN;
      if (rng() % 200 == 0) e.size = UINT64_MAX - 7;  // oversize
      v.push_back(e);
      if (addr == next) live.push_back(addr);
    } else if (r < 85) {
      uint64_t addr = pick(live);
      unsigned how = rng() % 10;
      if (how < 4) v.push_back(gmt_test::Ev(GMT_EV_FREE_REQUESTED, t, addr, 0, stream));  // back to back
      if (how == 4) {  // waits: something else comes between
        v.push_back(gmt_test::Ev(GMT_EV_FREE_REQUESTED, t, addr, 0, stream));
        v.push_back(gmt_test::Ev(GMT_EV_ALLOC, t + 1, next += 1 << 26, 4096, stream));
        live.push_back(next);
      }
      if (how == 5) {  // never completed
        v.push_back(gmt_test::Ev(GMT_EV_FREE_REQUESTED, t, addr, 0, stream));
        continue;
      }
      v.push_back(gmt_test::Ev(GMT_EV_FREE, t + 2, addr, 0, rng() % 4 == 0 ? 9 : stream));
      gone.push_back(addr);
    } else if (r < 88 && !gone.empty()) {
      v.push_back(gmt_test::Ev(GMT_EV_FREE, t, gone[rng() % gone.size()], 0, stream));  // double free
    } else if (r < 89) {
      v.push_back(gmt_test::Ev(GMT_EV_FREE, t, 0x1234000 + (rng() % 16) * 4096, 0, stream));  // unknown
    } else if (r < 92) {
      gmt_test::Ev e(rng() % 2 ? GMT_EV_ALLOC : GMT_EV_FREE, t, next += 1 << 26, 8192, stream);
      if (rng() % 2) e.mem_kind = GMT_MEM_PINNED;
      else e.device = 1;
      v.push_back(e);
    } else if (r < 94) {
      v.push_back(gmt_test::Ev(GMT_EV_SEGMENT_ALLOC, t, next += 1 << 26, 2 * MiB, stream));
    } else if (r < 95) {
      v.push_back(gmt_test::Ev(GMT_EV_MARKER, t, 0, 0));
    } else if (r < 96) {
      v.push_back(gmt_test::Ev(GMT_EV_EMPTY_CACHE, t, 0, 0));
    } else if (r < 97) {
      v.push_back(gmt_test::Ev(GMT_EV_ALLOC_FAILED, t, 0, (1 + rng() % 512) * MiB, stream));
    } else {
      gmt_test::Ev e(GMT_EV_FREE_REQUESTED, t, live[rng() % live.size()], 0, stream);
      if (rng() % 2) e.mem_kind = GMT_MEM_PINNED;
      else e.device = 1;
      v.push_back(e);
    }
  }
  return v;
}

struct Setting {
  const char *policy;
  uint64_t capacity;
  int event_timing, peak_only, external_sync, ids;
};

// The result of one replay (its time figures zeroed), or the error it stopped with.
std::string Replay(const std::vector<gmt_event_t> &v, const rp_addr_ids_t *ids, const Setting &s, int check,
                   uint64_t seed) {
  size_t l = strcspn(s.policy, ":");
  std::string name(s.policy, l);
  bool no_counter = name[0] == '-';  // "-NAME": the policy without its allocated-bytes counter (stats asked)
  if (no_counter) name.erase(0, 1);
  const rp_policy_ops_t *ops = rp_policy_find(name.c_str());
  EXPECT_NE(ops, nullptr) << name;
  if (!ops) return "no policy";
  rp_policy_ops_t bare;
  if (no_counter) {
    bare = *ops;
    bare.allocated_bytes = nullptr;
    ops = &bare;
  }
  rp_backend_t *b = nullptr;
  rp_engine_t *e = nullptr;
  gm_err_t err{};
  rp_sim_opts_t so{};
  so.capacity = s.capacity;
  EXPECT_EQ(rp_sim_backend_create(&so, &b, &err), GM_OK);
  rp_engine_opts_t eo{};
  eo.device = -1;
  eo.check = check;
  eo.capacity = s.capacity;
  eo.event_timing = s.event_timing;
  eo.late_mallocs = 2;
  eo.peak_only = s.peak_only;
  eo.serve_failed = 1;
  std::string out;
  if (rp_engine_create(ops, s.policy[l] == ':' ? s.policy + l + 1 : "", b, &eo, &e, &err) != GM_OK ||
      rp_engine_set_external_sync(e, s.external_sync, &err) != GM_OK || (ids && rp_engine_use_ids(e, ids, &err) != GM_OK))
    out = std::string("setup: ") + err.msg;
  std::mt19937_64 rng(seed);  // the same chunks for both paths
  for (size_t i = 0; out.empty() && i < v.size();) {
    size_t k = std::min(v.size() - i, (size_t)(1 + rng() % 700));
    if (rp_engine_feed_ids(e, v.data() + i, ids ? ids->id + i : nullptr, k, &err) != GM_OK)
      out = std::string("feed: ") + err.msg;
    i += k;
  }
  if (out.empty()) {
    rp_result_t *r = static_cast<rp_result_t *>(calloc(1, sizeof(rp_result_t)));
    if (rp_engine_finish(e, r, &err) != GM_OK) {
      out = std::string("finish: ") + err.msg;
    } else {
      r->replay_seconds = r->events_per_second = 0;
      out.assign(reinterpret_cast<const char *>(r), sizeof *r);
    }
    free(r);
  }
  rp_engine_destroy(e);
  if (b) b->destroy(b);
  return out;
}

TEST(EngineLoop, EveryFigureAsTheGeneralPathGivesIt) {
  const char *policies[] = {"pytorch", "pytorch:expandable_segments:True", "bfc:growth", "async", "direct", "-pytorch"};
  int runs = 0, differ = 0;
  for (uint64_t seed = 1; seed <= 6; seed++) {
    std::vector<gmt_event_t> v = RandomTrace(seed, 2500);
    rp_addr_ids_t ids{};
    gm_err_t err{};
    ASSERT_EQ(rp_addr_ids_build(v.data(), v.size(), &ids, &err), GM_OK) << err.msg;
    for (const char *p : policies)
      for (uint64_t cap : {(uint64_t)0, 96 * MiB})
        for (int timing : {RP_EVENTS_RECORDED, RP_EVENTS_EARLY, RP_EVENTS_LATE})
          for (int peak_only = 0; peak_only < 2; peak_only++) {
            Setting s{p, cap, timing, peak_only, (int)(seed % 2), (int)(seed / 2 % 2)};
            std::string general = Replay(v, s.ids ? &ids : nullptr, s, 1, seed);
            std::string loop = Replay(v, s.ids ? &ids : nullptr, s, 0, seed);
            runs++;
            if (general != loop) differ++;
            EXPECT_TRUE(general == loop) << (general.size() == sizeof(rp_result_t) ? "" : general) << " seed " << seed << " " << p << " capacity " << cap << " timing " << timing
                                         << " peak_only " << peak_only << " external_sync " << s.external_sync
                                         << " ids " << s.ids;
          }
    rp_addr_ids_free(&ids);
  }
  EXPECT_EQ(differ, 0) << runs << " runs";
}

}  // namespace
