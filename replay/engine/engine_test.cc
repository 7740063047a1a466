// engine_test.cc: the replay engine on hand-written event arrays, with two small fake
// policies (a direct one and a 1 MiB-rounding cache) so that every expected number can be
// worked out by hand: anomalies, skipped kinds, peaks, fragmentation, the timeline, OOMs
// under a capacity, determinism of the simulator.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

#include "formats/gmt_testutil.h"
#include "replay/engine/rp_engine.h"

using gmt_test::Ev;

namespace {

constexpr uint64_t MiB = 1ull << 20;

// engine_ids_test is this file run with ENGINE_TEST_IDS=1 (one compile for both targets, BUILD).
bool OverIds() {
  static const bool over = std::getenv("ENGINE_TEST_IDS") != nullptr;
  return over;
}

// ---- fake policies -------------------------------------------------------------------

struct Fake {
  rp_driver_t drv;
  bool cache;           // round to 1 MiB and keep freed blocks for reuse by exact size
  bool lie;             // report allocated 0 (to test the engine's invariant check)
  std::map<uint64_t, uint64_t> live;  // addr -> rounded size
  std::multimap<uint64_t, uint64_t> cached;  // rounded size -> addr
  rp_policy_stats_t st{};
};

Fake *F(rp_policy_t *p) { return reinterpret_cast<Fake *>(p); }
const Fake *F(const rp_policy_t *p) { return reinterpret_cast<const Fake *>(p); }

gm_status_t fake_create_common(const char *conf, const rp_driver_t *drv, rp_policy_t **out,
                               gm_err_t *err, bool cache) {
  bool lie = false;
  if (strcmp(conf, "lie") == 0) lie = true;
  else if (conf[0] != '\0') return gm_err_set(err, GM_ERR_INVAL, "unknown key '%s'", conf);
  Fake *f = new Fake();
  f->drv = *drv;
  f->cache = cache;
  f->lie = lie;
  *out = reinterpret_cast<rp_policy_t *>(f);
  return GM_OK;
}
gm_status_t direct_create(const char *c, const rp_driver_t *d, rp_policy_t **o, gm_err_t *e) {
  return fake_create_common(c, d, o, e, false);
}
gm_status_t cache_create(const char *c, const rp_driver_t *d, rp_policy_t **o, gm_err_t *e) {
  return fake_create_common(c, d, o, e, true);
}
void fake_destroy(rp_policy_t *p) { delete F(p); }

gm_status_t empty(Fake *f) {
  for (auto &kv : f->cached) {
    gm_status_t s = f->drv.mem_free(f->drv.ctx, kv.second, kv.first);
    if (s != GM_OK) return s;
  }
  f->cached.clear();
  f->st.cached_bytes = 0;
  return GM_OK;
}

gm_status_t fake_alloc(rp_policy_t *p, uint64_t size, uint64_t, uint64_t *addr, gm_err_t *err) {
  Fake *f = F(p);
  uint64_t sz = f->cache ? (size + MiB - 1) / MiB * MiB : size;
  if (sz == 0) sz = f->cache ? MiB : 1;
  auto it = f->cached.find(sz);
  if (it != f->cached.end()) {
    *addr = it->second;
    f->cached.erase(it);
    f->st.cached_bytes -= sz;
  } else {
    gm_status_t s = f->drv.mem_alloc(f->drv.ctx, sz, addr);
    if (s == GM_ERR_NOMEM && f->cache && !f->cached.empty()) {
      f->st.alloc_retries++;
      if ((s = empty(f)) != GM_OK) return s;
      s = f->drv.mem_alloc(f->drv.ctx, sz, addr);
    }
    if (s == GM_ERR_NOMEM) {
      f->st.ooms++;
      return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
    }
    if (s != GM_OK) return gm_err_set(err, s, "driver failed");
  }
  f->live[*addr] = sz;
  f->st.allocated_bytes += sz;
  return GM_OK;
}

gm_status_t fake_free(rp_policy_t *p, uint64_t addr, gm_err_t *err) {
  Fake *f = F(p);
  auto it = f->live.find(addr);
  if (it == f->live.end()) return gm_err_set(err, GM_ERR_CORRUPT, "free of unknown block");
  uint64_t sz = it->second;
  f->live.erase(it);
  f->st.allocated_bytes -= sz;
  if (f->cache) {
    f->cached.emplace(sz, addr);
    f->st.cached_bytes += sz;
    return GM_OK;
  }
  return f->drv.mem_free(f->drv.ctx, addr, sz);
}

gm_status_t fake_empty_cache(rp_policy_t *p, gm_err_t *) { return empty(F(p)); }

gm_status_t fake_release_all(rp_policy_t *p, gm_err_t *) {
  Fake *f = F(p);
  for (auto &kv : f->live) f->drv.mem_free(f->drv.ctx, kv.first, kv.second);
  f->live.clear();
  f->st.allocated_bytes = 0;
  return empty(f);
}

void fake_stats(const rp_policy_t *p, rp_policy_stats_t *out) {
  *out = F(p)->st;
  if (F(p)->lie) out->allocated_bytes = 0;
}
gm_status_t fake_check(const rp_policy_t *, gm_err_t *) { return GM_OK; }
const char *direct_spec(const rp_policy_t *) { return "fakedirect"; }
const char *cache_spec(const rp_policy_t *) { return "fakecache"; }

const rp_policy_ops_t kDirect = {"fakedirect", "test", direct_create, fake_destroy, fake_alloc,
                                 fake_free, fake_empty_cache, fake_release_all, fake_stats,
                                 fake_check, direct_spec};
const rp_policy_ops_t kCache = {"fakecache", "test", cache_create, fake_destroy, fake_alloc,
                                fake_free, fake_empty_cache, fake_release_all, fake_stats,
                                fake_check, cache_spec};

// ---- event helpers -------------------------------------------------------------------

gmt_event_t A(uint64_t ts, uint64_t addr, uint64_t size) { return Ev(GMT_EV_ALLOC, ts, addr, size, 0); }
gmt_event_t Fr(uint64_t ts, uint64_t addr) { return Ev(GMT_EV_FREE, ts, addr, 0, 0); }
// A requests trace: the framework's stream-ordered requests, and a library's synchronous ones.
gmt_event_t AA(uint64_t ts, uint64_t addr, uint64_t size) {
  gmt_event_t e = Ev(GMT_EV_ALLOC, ts, addr, size, 0);
  e.flags = GMT_F_ASYNC;
  e.stream = 7;
  return e;
}
gmt_event_t FA(uint64_t ts, uint64_t addr) {
  gmt_event_t e = Ev(GMT_EV_FREE, ts, addr, 0, 0);
  e.flags = GMT_F_ASYNC;
  e.stream = 7;
  return e;
}
gmt_event_t AS(uint64_t ts, uint64_t addr, uint64_t size) {
  gmt_event_t e = Ev(GMT_EV_ALLOC, ts, addr, size, 0);
  e.stream = GMT_STREAM_NONE;
  return e;
}

struct Replay {
  rp_backend_t *b = nullptr;
  rp_engine_t *e = nullptr;
  rp_result_t *r = static_cast<rp_result_t *>(calloc(1, sizeof(rp_result_t)));
  gm_err_t err{};
  Replay(const rp_policy_ops_t &ops, uint64_t capacity = 0, int check = 1, const char *conf = "",
         int external_sync = 0, int serve_failed = 0, int vmm_requests = 0, int event_timing = 0,
         uint64_t late_mallocs = 0, int peak_only = 0) {
    rp_sim_opts_t so{};
    so.capacity = capacity;
    EXPECT_EQ(rp_sim_backend_create(&so, &b, &err), GM_OK);
    rp_engine_opts_t eo{};
    eo.device = -1;
    eo.check = check;
    eo.capacity = capacity;
    eo.serve_failed = serve_failed;
    eo.vmm_requests = vmm_requests;
    eo.event_timing = event_timing;
    eo.late_mallocs = late_mallocs;
    eo.peak_only = peak_only;
    EXPECT_EQ(rp_engine_create(&ops, conf, b, &eo, &e, &err), GM_OK) << err.msg;
    EXPECT_EQ(rp_engine_set_external_sync(e, external_sync, &err), GM_OK) << err.msg;
  }
  // engine_ids_test (ENGINE_TEST_IDS=1, BUILD): every replay over address numbers
  // (rp_engine_use_ids), numbered here across the Feed calls of a replay in order of first
  // appearance, as rp_addr_ids_build does.
  std::map<uint64_t, uint32_t> ids;
  rp_addr_ids_t numbering{};  // room for the numbers (no spares kept: a table of its own)
  bool numbered = false;
  gm_status_t Feed(const std::vector<gmt_event_t> &v) {
    if (!OverIds()) return rp_engine_feed(e, v.data(), v.size(), &err);
    if (!numbered) {
      numbering.count = 1u << 21;
      EXPECT_EQ(rp_engine_use_ids(e, &numbering, &err), GM_OK) << err.msg;
      numbered = true;
    }
    std::vector<uint32_t> id;
    for (const gmt_event_t &ev : v) id.push_back(ids.emplace(ev.addr, (uint32_t)ids.size()).first->second);
    return rp_engine_feed_ids(e, v.data(), id.data(), v.size(), &err);
  }
  void Finish() { ASSERT_EQ(rp_engine_finish(e, r, &err), GM_OK) << err.msg; }
  ~Replay() {
    rp_engine_destroy(e);
    if (b) b->destroy(b);
    free(r);
  }
};

}  // namespace

TEST(Engine, DirectPeaksAndCalls) {
  Replay run(kDirect);
  ASSERT_EQ(run.Feed({A(0, 0x1000, 100), A(1, 0x2000, 200), Fr(2, 0x1000), A(3, 0x3000, 50),
                      Fr(4, 0x2000), Fr(5, 0x3000)}),
            GM_OK);
  run.Finish();
  EXPECT_EQ(run.r->events, 6u);
  EXPECT_EQ(run.r->peak_reserved_bytes, 300u);
  EXPECT_EQ(run.r->peak_requested_bytes, 300u);
  EXPECT_EQ(run.r->lower_bound_bytes, 300u);
  EXPECT_EQ(run.r->peak_allocated_bytes, 300u);
  EXPECT_EQ(run.r->device_alloc_calls, 3u);
  EXPECT_EQ(run.r->device_free_calls, 3u);
  EXPECT_EQ(run.r->end_reserved_bytes, 0u);
  EXPECT_DOUBLE_EQ(run.r->fragmentation_at_peak, 0.0);
  EXPECT_EQ(run.r->ooms, 0u);
  EXPECT_EQ(run.r->first_oom_event, -1);
  EXPECT_STREQ(run.r->policy, "fakedirect");
  EXPECT_STREQ(run.r->backend, "sim");
}

// The observer hears every driver call that moved reserved memory and every served ALLOC, each
// with the index of the event that caused it: a cached block's reuse makes no call, an
// empty_cache frees, and what finish releases comes after the last event.
struct Seen {
  std::vector<std::vector<uint64_t>> calls;  // {call, addr, size, event}
  std::vector<std::vector<uint64_t>> served; // {trace addr, block addr, event}
};
void SeenCall(void *ctx, int call, uint64_t addr, uint64_t size, uint64_t event) {
  static_cast<Seen *>(ctx)->calls.push_back({(uint64_t)call, addr, size, event});
}
void SeenServed(void *ctx, const gmt_event_t *ev, uint64_t addr, uint64_t event) {
  static_cast<Seen *>(ctx)->served.push_back({ev->addr, addr, event});
}

TEST(Engine, ObserverHearsDriverCallsAndServedBlocksWithTheirEvent) {
  Seen seen;
  rp_engine_observer_t obs{&seen, SeenCall, SeenServed};
  rp_sim_opts_t so{};
  rp_backend_t *b = nullptr;
  gm_err_t err{};
  ASSERT_EQ(rp_sim_backend_create(&so, &b, &err), GM_OK);
  rp_engine_opts_t eo{};
  eo.device = -1;
  eo.observer = &obs;
  rp_engine_t *e = nullptr;
  ASSERT_EQ(rp_engine_create(&kCache, "", b, &eo, &e, &err), GM_OK) << err.msg;
  std::vector<gmt_event_t> v = {A(0, 0x1000, 100), A(1, 0x2000, 2 * MiB), Fr(2, 0x1000),
                                A(3, 0x3000, 50), Fr(4, 0x2000), Ev(GMT_EV_EMPTY_CACHE, 5, 0, 0, 0)};
  ASSERT_EQ(rp_engine_feed(e, v.data(), v.size(), &err), GM_OK) << err.msg;
  rp_result_t *r = static_cast<rp_result_t *>(calloc(1, sizeof(rp_result_t)));
  ASSERT_EQ(rp_engine_finish(e, r, &err), GM_OK) << err.msg;
  ASSERT_EQ(seen.calls.size(), 4u);
  uint64_t a1 = seen.calls[0][1], a2 = seen.calls[1][1];
  EXPECT_EQ(seen.calls[0], (std::vector<uint64_t>{RP_CALL_MEM_ALLOC, a1, MiB, 0}));
  EXPECT_EQ(seen.calls[1], (std::vector<uint64_t>{RP_CALL_MEM_ALLOC, a2, 2 * MiB, 1}));
  EXPECT_EQ(seen.calls[2], (std::vector<uint64_t>{RP_CALL_MEM_FREE, a2, 2 * MiB, 5}));
  EXPECT_EQ(seen.calls[3], (std::vector<uint64_t>{RP_CALL_MEM_FREE, a1, MiB, 6}));
  ASSERT_EQ(seen.served.size(), 3u);
  EXPECT_EQ(seen.served[0], (std::vector<uint64_t>{0x1000, a1, 0}));
  EXPECT_EQ(seen.served[1], (std::vector<uint64_t>{0x2000, a2, 1}));
  EXPECT_EQ(seen.served[2], (std::vector<uint64_t>{0x3000, a1, 3}));  // the cached block again
  free(r);
  rp_engine_destroy(e);
  b->destroy(b);
}

TEST(Engine, AnomaliesAreCountedNotFatal) {
  Replay run(kDirect);
  ASSERT_EQ(run.Feed({Fr(0, 0x9000),                       // never allocated
                      A(1, 0x1000, 100), Fr(2, 0x1000), Fr(3, 0x1000),  // double free
                      A(4, 0x2000, 100), A(5, 0x2000, 300),              // over a live block
                      Fr(6, 0x2000)}),
            GM_OK)
      << run.err.msg;
  run.Finish();
  EXPECT_EQ(run.r->skipped.unknown_free, 1u);
  EXPECT_EQ(run.r->skipped.double_free, 1u);
  EXPECT_EQ(run.r->skipped.alloc_over_live, 1u);
  // The implied free of the first block keeps requested bytes honest: 300, not 400.
  EXPECT_EQ(run.r->peak_requested_bytes, 300u);
  EXPECT_EQ(run.r->end_requested_bytes, 0u);
  EXPECT_EQ(run.r->end_reserved_bytes, 0u);
}

TEST(Engine, NonRequestsAreSkippedAndCounted) {
  Replay run(kDirect);
  std::vector<gmt_event_t> v = {
      Ev(GMT_EV_SEGMENT_ALLOC, 0, 0x1, 2 * MiB, 0), Ev(GMT_EV_VMM_MAP, 0, 0x2, 2 * MiB, 0),
      Ev(GMT_EV_MARKER, 0, 0, 0, 0),                Ev(GMT_EV_ALLOC, 0, 0x3, 15, 0).Mem(GMT_MEM_DEVICE_STATIC),
      Ev(GMT_EV_ALLOC, 0, 0x4, 64, 0).Mem(GMT_MEM_PINNED), Ev(GMT_EV_ALLOC, 0, 0x5, 64, 0).Mem(GMT_MEM_UNKNOWN),
      Ev(GMT_EV_ALLOC, 0, 0x6, 64, 0).Dev(1),  // device 0 came first: skipped
      Ev(GMT_EV_FREE_REQUESTED, 0, 0x5, 0, 0),      Ev(GMT_EV_ALLOC_FAILED, 0, 0, 1 << 30, 0),
  };
  ASSERT_EQ(run.Feed(v), GM_OK);
  run.Finish();
  EXPECT_EQ(run.r->skipped.not_request, 3u);
  EXPECT_EQ(run.r->skipped.other_memory, 2u);
  EXPECT_EQ(run.r->skipped.other_device, 1u);
  EXPECT_EQ(run.r->skipped.free_requested, 1u);
  EXPECT_EQ(run.r->skipped.trace_ooms, 1u);
  EXPECT_EQ(run.r->allocs, 1u);
  EXPECT_EQ(run.r->device, 0);
  EXPECT_EQ(run.r->peak_requested_bytes, 64u);
  EXPECT_EQ(run.r->events, v.size());
}

TEST(Engine, FirstAllocatingDeviceIsReplayed) {
  Replay run(kDirect);
  std::vector<gmt_event_t> v = {Ev(GMT_EV_ALLOC, 0, 0x1, 10, 0).Dev(3),
                                Ev(GMT_EV_ALLOC, 0, 0x2, 20, 0)};
  ASSERT_EQ(run.Feed(v), GM_OK);
  run.Finish();
  EXPECT_EQ(run.r->device, 3);
  EXPECT_EQ(run.r->peak_requested_bytes, 10u);
}

TEST(Engine, FragmentationAtPeakAndTimeWeightedMean) {
  Replay run(kCache);
  // A: 1 MiB; freed into the cache; B: 2 MiB needs a new segment -> reserved 3, allocated 2.
  ASSERT_EQ(run.Feed({A(0, 0x1000, MiB), Fr(10, 0x1000), A(30, 0x2000, 2 * MiB), Fr(40, 0x2000)}),
            GM_OK);
  run.Finish();
  EXPECT_EQ(run.r->peak_reserved_bytes, 3 * MiB);
  EXPECT_EQ(run.r->peak_allocated_bytes, 2 * MiB);
  EXPECT_NEAR(run.r->fragmentation_at_peak, 1.0 / 3.0, 1e-12);
  // Byte-time weighted: [0,10) 1 MiB reserved, 1 allocated; [10,30) 1 reserved, 0 allocated;
  // [30,40) 3 reserved, 2 allocated  ->  1 - (10 + 0 + 20) / (10 + 20 + 30) = 0.5
  EXPECT_NEAR(run.r->fragmentation_mean, 0.5, 1e-12);
  EXPECT_EQ(run.r->lower_bound_bytes, 2 * MiB);
}

TEST(Engine, FragmentationAtPeakIsTheBestUseOfThePeak) {
  Replay run(kCache);
  // Peak 3 MiB reached with 2 MiB allocated; then C reuses A's cached 1 MiB: still at the
  // peak, now fully used. A preallocated arena is judged by its best use, not its first.
  ASSERT_EQ(run.Feed({A(0, 0x1000, MiB), Fr(1, 0x1000), A(2, 0x2000, 2 * MiB), A(3, 0x3000, MiB)}),
            GM_OK);
  run.Finish();
  EXPECT_EQ(run.r->peak_reserved_bytes, 3 * MiB);
  EXPECT_DOUBLE_EQ(run.r->fragmentation_at_peak, 0.0);
}

TEST(Engine, EmptyCacheEventReleasesCachedMemory) {
  Replay run(kCache);
  ASSERT_EQ(run.Feed({A(0, 0x1000, MiB), Fr(1, 0x1000), Ev(GMT_EV_EMPTY_CACHE, 2, 0, 0, 0)}), GM_OK);
  EXPECT_EQ(rp_engine_reserved(run.e), 0u);
  run.Finish();
  EXPECT_EQ(run.r->empty_caches, 1u);
  EXPECT_EQ(run.r->device_free_calls, 1u);
}

TEST(Engine, OomUnderCapacityRecordsFirstEvent) {
  Replay run(kDirect, 4 * MiB);
  ASSERT_EQ(run.Feed({A(5, 0x1000, 2 * MiB), A(6, 0x2000, 2 * MiB), A(7, 0x3000, 2 * MiB),
                      Fr(8, 0x3000),  // the failed block's free: expected, not an anomaly
                      A(9, 0x4000, MiB)}),
            GM_OK)
      << run.err.msg;
  run.Finish();
  EXPECT_EQ(run.r->ooms, 2u);
  EXPECT_EQ(run.r->first_oom_event, 2);
  EXPECT_EQ(run.r->first_oom_ts_ns, 7);
  EXPECT_EQ(run.r->driver_nomem, 2u);
  EXPECT_EQ(run.r->skipped.unknown_free, 0u);
  EXPECT_EQ(run.r->peak_reserved_bytes, 4 * MiB);
  EXPECT_EQ(run.r->capacity_bytes, 4 * MiB);
  // The lower bound is the trace's: what the program asked for, served or not.
  EXPECT_EQ(run.r->peak_requested_bytes, 6 * MiB);
}

TEST(Engine, CacheRetriesAfterFreeingItsCache) {
  Replay run(kCache, 4 * MiB);
  ASSERT_EQ(run.Feed({A(0, 0x1000, 3 * MiB), Fr(1, 0x1000), A(2, 0x2000, 2 * MiB)}), GM_OK);
  run.Finish();
  EXPECT_EQ(run.r->alloc_retries, 1u);
  EXPECT_EQ(run.r->ooms, 0u);
  EXPECT_EQ(run.r->peak_reserved_bytes, 3 * MiB);
}

TEST(Engine, TimelineIsBoundedAndKeepsThePeak) {
  Replay run(kDirect, 0, /*check=*/0);
  std::vector<gmt_event_t> v;
  const int n = 200000;
  for (int i = 0; i < n; i++) {
    uint64_t ts = 1000000 + (uint64_t)i * 997;
    uint64_t size = (i == 123457) ? 1000 * MiB : 4096;  // one short spike
    v.push_back(A(ts, 0x100000 + (uint64_t)i * 0x10000, size));
    v.push_back(Fr(ts + 1, 0x100000 + (uint64_t)i * 0x10000));
  }
  ASSERT_EQ(run.Feed(v), GM_OK);
  run.Finish();
  ASSERT_GT(run.r->timeline_n, 100u);
  ASSERT_LE(run.r->timeline_n, (size_t)RP_TIMELINE_MAX);
  uint64_t mx = 0, mreq = 0, spike_ts = 0;
  for (size_t i = 0; i < run.r->timeline_n; i++) {
    if (run.r->tl_reserved[i] > mx) {
      mx = run.r->tl_reserved[i];
      spike_ts = run.r->tl_ts[i];
    }
    if (run.r->tl_requested[i] > mreq) mreq = run.r->tl_requested[i];
    if (i) {
      EXPECT_LT(run.r->tl_ts[i - 1], run.r->tl_ts[i]);
    }
  }
  EXPECT_EQ(mx, run.r->peak_reserved_bytes);
  EXPECT_EQ(mx, 1000 * MiB);
  EXPECT_EQ(mreq, run.r->peak_requested_bytes);
  EXPECT_EQ(spike_ts, 1000000 + 123457ull * 997);  // the bucket keeps the peak's own time
}

TEST(Engine, HostMemoryFollowsLiveBlocksNotTraceLength) {
  if (OverIds()) GTEST_SKIP() << "over address numbers the table follows the numbering (events in memory), by design";
  Replay run(kDirect, 0, 0);
  std::vector<gmt_event_t> v;
  for (int i = 0; i < 100000; i++) {
    v.push_back(A(i, 0x1000 + (uint64_t)i * 512, 512));  // a fresh address every time
    v.push_back(Fr(i, 0x1000 + (uint64_t)i * 512));
  }
  ASSERT_EQ(run.Feed(v), GM_OK);
  size_t small = rp_engine_host_bytes(run.e);
  ASSERT_EQ(run.Feed(v), GM_OK);  // the same again: 200k more events, still one live block
  ASSERT_EQ(run.Feed(v), GM_OK);
  EXPECT_LE(rp_engine_host_bytes(run.e), small);
  EXPECT_LT(rp_engine_host_bytes(run.e), 200u * 1024);
}

TEST(Engine, CheckFlagCatchesABrokenPolicy) {
  Replay run(kDirect, 0, 1, "lie");
  gm_status_t st = run.Feed({A(0, 0x1000, 100)});
  EXPECT_EQ(st, GM_ERR_CORRUPT);
  EXPECT_NE(std::string(run.err.msg).find("event 0"), std::string::npos) << run.err.msg;
  EXPECT_NE(std::string(run.err.msg).find("allocated 0 < live requested 100"), std::string::npos)
      << run.err.msg;
}

TEST(Engine, BadConfIsTheNamedPolicyError) {
  rp_backend_t *b = nullptr;
  gm_err_t err{};
  ASSERT_EQ(rp_sim_backend_create(nullptr, &b, &err), GM_OK);
  rp_engine_t *e = nullptr;
  EXPECT_EQ(rp_engine_create(&kDirect, "bogus", b, nullptr, &e, &err), GM_ERR_INVAL);
  EXPECT_EQ(e, nullptr);
  EXPECT_NE(std::string(err.msg).find("bogus"), std::string::npos);
  b->destroy(b);
}

TEST(Sim, DeterministicAcrossRuns) {
  std::vector<gmt_event_t> v;
  uint64_t x = 12345;
  for (int i = 0; i < 5000; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    uint64_t slot = (x >> 33) % 64;
    if ((x >> 20) & 1) v.push_back(A(i, 0x10000 + slot * 0x1000, (x >> 40) % (8 * MiB) + 1));
    else v.push_back(Fr(i, 0x10000 + slot * 0x1000));
  }
  Replay a(kCache, 64 * MiB), b(kCache, 64 * MiB);
  ASSERT_EQ(a.Feed(v), GM_OK) << a.err.msg;
  ASSERT_EQ(b.Feed(v), GM_OK) << b.err.msg;
  a.Finish();
  b.Finish();
  EXPECT_EQ(a.r->peak_reserved_bytes, b.r->peak_reserved_bytes);
  EXPECT_EQ(a.r->ooms, b.r->ooms);
  EXPECT_EQ(a.r->device_alloc_calls, b.r->device_alloc_calls);
  ASSERT_EQ(a.r->timeline_n, b.r->timeline_n);
  EXPECT_EQ(0, memcmp(a.r->tl_reserved, b.r->tl_reserved, a.r->timeline_n * sizeof(uint64_t)));
}

TEST(Sim, CapacityCountsWholeGranulesAndMapsMustBeGranular) {
  rp_backend_t *b = nullptr;
  gm_err_t err{};
  rp_sim_opts_t o{};
  o.capacity = 4 * MiB;
  ASSERT_EQ(rp_sim_backend_create(&o, &b, &err), GM_OK);
  uint64_t a1 = 0, a2 = 0, a3 = 0;
  EXPECT_EQ(b->drv.mem_alloc(b->drv.ctx, 1, &a1), GM_OK);  // takes a whole 2 MiB granule
  EXPECT_EQ(b->drv.mem_alloc(b->drv.ctx, 2 * MiB, &a2), GM_OK);
  EXPECT_EQ(b->drv.mem_alloc(b->drv.ctx, 1, &a3), GM_ERR_NOMEM);
  EXPECT_EQ(a1 % 512, 0u);
  EXPECT_NE(a1, a2);
  EXPECT_EQ(b->drv.mem_free(b->drv.ctx, a1, 1), GM_OK);
  uint64_t va = 0;
  EXPECT_EQ(b->drv.va_reserve(b->drv.ctx, 64 * MiB, &va), GM_OK);
  EXPECT_EQ(b->drv.map(b->drv.ctx, va, MiB), GM_ERR_INVAL);
  EXPECT_EQ(b->drv.map(b->drv.ctx, va, 2 * MiB), GM_OK);
  EXPECT_EQ(b->drv.map(b->drv.ctx, va + 2 * MiB, 2 * MiB), GM_ERR_NOMEM);
  EXPECT_NE(b->drv.alloc_async, nullptr);  // the pool model (SimPool below)
  EXPECT_EQ(b->drv.granularity, 2 * MiB);
  EXPECT_EQ(b->drv.total_memory, 4 * MiB);
  b->destroy(b);
}

TEST(Hist, QuantilesWithinABucket) {
  rp_hist_t h{};
  for (int i = 1; i <= 1000; i++) rp_hist_add(&h, (uint64_t)i * 1000);  // 1 us .. 1 ms
  uint64_t p50 = rp_hist_quantile(&h, 0.5), p99 = rp_hist_quantile(&h, 0.99);
  EXPECT_GE(p50, 500000u);
  EXPECT_LE(p50, 500000u * 110 / 100);
  EXPECT_GE(p99, 990000u);
  EXPECT_LE(p99, 990000u * 110 / 100);
  rp_hist_t z{};
  EXPECT_EQ(rp_hist_quantile(&z, 0.5), 0u);
  rp_hist_add(&z, 3);
  EXPECT_EQ(rp_hist_quantile(&z, 0.99), 4u);
}

// ---- external memory (requests traces) and the driver's own pool trims --------------------

TEST(Engine, SyncIsExternalOnlyInRequestsTracesWithAsyncAllocs) {
  EXPECT_EQ(rp_sync_is_external(GMT_CAPTURE_REQUESTS, 1), 1);
  EXPECT_EQ(rp_sync_is_external(GMT_CAPTURE_REQUESTS, 0), 0);  // a CUDA C program's own
  EXPECT_EQ(rp_sync_is_external(GMT_CAPTURE_NATIVE, 1), 0);
  EXPECT_EQ(rp_sync_is_external(GMT_CAPTURE_TORCH, 1), 0);
  EXPECT_EQ(rp_sync_is_external(GMT_CAPTURE_IMPORT, 1), 0);
  EXPECT_EQ(rp_sync_is_external(GMT_CAPTURE_UNKNOWN, 1), 0);
}

// The shape of train_amp.requests.zst: tensors through cudaMallocAsync, a cuBLAS workspace
// through cudaMalloc in between, freed synchronously at the end.
std::vector<gmt_event_t> RequestsWithWorkspace() {
  return {AA(0, 0x1000, 100), AS(1, 0x9000, 64 * MiB), AA(2, 0x2000, 200), FA(3, 0x1000),
          Fr(4, 0x9000), AA(5, 0x3000, 50), FA(6, 0x2000), FA(7, 0x3000)};
}

TEST(Engine, ExternalSyncAllocsAreCountedApartNotReplayed) {
  Replay run(kDirect, 0, 1, "", 1);
  ASSERT_EQ(run.Feed(RequestsWithWorkspace()), GM_OK) << run.err.msg;
  run.Finish();
  EXPECT_EQ(run.r->external_sync, 1);
  EXPECT_EQ(run.r->external_allocs, 1u);
  EXPECT_EQ(run.r->external_frees, 1u);
  EXPECT_EQ(run.r->external_peak_bytes, 64 * MiB);
  EXPECT_EQ(run.r->external_end_bytes, 0u);
  // The policy saw the three tensors only: three driver allocs, reserved and the bound 300.
  EXPECT_EQ(run.r->allocs, 3u);
  EXPECT_EQ(run.r->frees, 3u);
  EXPECT_EQ(run.r->device_alloc_calls, 3u);
  EXPECT_EQ(run.r->peak_reserved_bytes, 300u);
  EXPECT_EQ(run.r->lower_bound_bytes, 300u);
  EXPECT_EQ(run.r->peak_requested_bytes, 300u);
  // Both together: 100 + 64 MiB at t=1, 300 + 64 MiB at t=2 (the workspace is freed at t=4).
  EXPECT_EQ(run.r->peak_reserved_plus_external_bytes, 300u + 64 * MiB);
  EXPECT_EQ(run.r->skipped.unknown_free, 0u);
  EXPECT_EQ(run.r->events, RequestsWithWorkspace().size());
}

TEST(Engine, WithoutTheRuleSyncAllocsAreRequests) {
  Replay run(kDirect);
  ASSERT_EQ(run.Feed(RequestsWithWorkspace()), GM_OK) << run.err.msg;
  run.Finish();
  EXPECT_EQ(run.r->external_sync, 0);
  EXPECT_EQ(run.r->external_allocs, 0u);
  EXPECT_EQ(run.r->allocs, 4u);
  EXPECT_EQ(run.r->lower_bound_bytes, 300u + 64 * MiB);
  EXPECT_EQ(run.r->peak_reserved_bytes, 300u + 64 * MiB);
  EXPECT_EQ(run.r->peak_reserved_plus_external_bytes, run.r->peak_reserved_bytes);
}

// A torch-history trace (capture mode 6): PyTorch's requests from its history (synchronous
// allocs, no flag), another library's memory flagged GMT_F_EXTERNAL (even a stream-ordered one),
// and its VMM map: external without the requests rule, never in the recorded allocator's figure.
TEST(Engine, ExternalFlagIsExternalWithoutTheRule) {
  std::vector<gmt_event_t> v = {AS(0, 0x1000, 100), AS(1, 0x9000, 64 * MiB), AA(2, 0xa000, 32 * MiB),
                                Ev(GMT_EV_VMM_MAP, 3, 0xb000, 2 * MiB, 0), AS(4, 0x2000, 200), Fr(5, 0x1000),
                                Fr(6, 0x9000), FA(7, 0xa000), Fr(8, 0x2000)};
  for (size_t i : {1, 2, 3, 6, 7}) v[i].flags |= GMT_F_EXTERNAL;
  Replay run(kDirect);
  ASSERT_EQ(run.Feed(v), GM_OK) << run.err.msg;
  run.Finish();
  EXPECT_EQ(run.r->external_sync, 0);
  EXPECT_EQ(run.r->external_allocs, 2u);
  EXPECT_EQ(run.r->external_frees, 2u);
  EXPECT_EQ(run.r->external_peak_bytes, 96 * MiB);
  EXPECT_EQ(run.r->allocs, 2u);
  EXPECT_EQ(run.r->peak_reserved_bytes, 300u);
  EXPECT_EQ(run.r->lower_bound_bytes, 300u);
  EXPECT_EQ(run.r->skipped.unknown_free, 0u);
  EXPECT_EQ(run.r->recorded_mapped_peak_bytes, 0u);  // the map was another library's
}

TEST(Engine, ExternalAnomaliesKeepTheCountHonest) {
  Replay run(kDirect, 0, 1, "", 1);
  ASSERT_EQ(run.Feed({AA(0, 0x1000, 10), AS(1, 0x9000, 100), AS(2, 0x9000, 300),  // missed free
                      Fr(3, 0x9000), Fr(4, 0x9000),                               // double free
                      AS(5, 0xa000, 7)}),
            GM_OK)
      << run.err.msg;
  run.Finish();
  EXPECT_EQ(run.r->skipped.alloc_over_live, 1u);
  EXPECT_EQ(run.r->skipped.double_free, 1u);
  EXPECT_EQ(run.r->skipped.unknown_free, 0u);
  EXPECT_EQ(run.r->external_allocs, 3u);
  EXPECT_EQ(run.r->external_frees, 1u);
  EXPECT_EQ(run.r->external_peak_bytes, 300u);  // the implied free: 300, not 400
  EXPECT_EQ(run.r->external_end_bytes, 7u);
  EXPECT_EQ(run.r->lower_bound_bytes, 10u);
}

TEST(Engine, AsyncFreeOfAnExternalAddressIsMatchedThere) {
  // Frees are matched by address whatever their flags (a library may free with cudaFreeAsync).
  Replay run(kDirect, 0, 1, "", 1);
  ASSERT_EQ(run.Feed({AS(0, 0x9000, 100), FA(1, 0x9000), AA(2, 0x9000, 50), FA(3, 0x9000)}),
            GM_OK)
      << run.err.msg;
  run.Finish();
  EXPECT_EQ(run.r->external_frees, 1u);
  EXPECT_EQ(run.r->external_end_bytes, 0u);
  EXPECT_EQ(run.r->allocs, 1u);
  EXPECT_EQ(run.r->frees, 1u);
  EXPECT_EQ(run.r->end_requested_bytes, 0u);
}

TEST(Engine, PoolTrimRecordsAreNotEmptyCache) {
  // CUPTI's pool_trim is the driver's pool trimming itself (at the recorded run's
  // synchronizations): PyTorch's native allocator keeps its cache through them.
  Replay run(kCache);
  gmt_event_t trim = Ev(GMT_EV_POOL_TRIM, 2, 0x302000000, 0, 0);
  ASSERT_EQ(run.Feed({A(0, 0x1000, MiB), Fr(1, 0x1000), trim}), GM_OK);
  EXPECT_EQ(rp_engine_reserved(run.e), MiB);
  // An explicit trim (cudaMemPoolTrimTo: torch.cuda.empty_cache()) is recorded as
  // empty_cache, and that one is replayed.
  ASSERT_EQ(run.Feed({Ev(GMT_EV_EMPTY_CACHE, 3, 0x302000000, 0, 0)}), GM_OK);
  EXPECT_EQ(rp_engine_reserved(run.e), 0u);
  run.Finish();
  EXPECT_EQ(run.r->empty_caches, 1u);
  EXPECT_EQ(run.r->skipped.not_request, 1u);
}

TEST(Engine, ExternalReadingIsChosenBeforeTheFirstEvent) {
  Replay run(kDirect);
  ASSERT_EQ(run.Feed({AA(0, 0x1000, 10)}), GM_OK);
  EXPECT_EQ(rp_engine_set_external_sync(run.e, 1, &run.err), GM_ERR_INVAL);
  run.Finish();
  EXPECT_EQ(run.r->external_sync, 0);
}

TEST(Engine, ExternalMemoryTakesCapacity) {
  // A 66 MiB device: the library's 64 MiB workspace leaves the policy 2 MiB, as on the GPU.
  Replay run(kDirect, 66 * MiB, 1, "", 1);
  ASSERT_EQ(run.Feed({AS(0, 0x9000, 64 * MiB), AA(1, 0x1000, 4 * MiB),  // OOM: 2 MiB left
                      Fr(2, 0x9000), AA(3, 0x2000, 4 * MiB),            // fits once freed
                      AS(4, 0xa000, 80 * MiB)}),                        // past the device
            GM_OK)
      << run.err.msg;
  run.Finish();
  EXPECT_EQ(run.r->ooms, 2u);
  EXPECT_EQ(run.r->first_oom_event, 1);
  EXPECT_EQ(run.r->peak_reserved_bytes, 4 * MiB);
  EXPECT_EQ(run.r->external_allocs, 2u);  // the failed one is still the program's request
  EXPECT_EQ(run.r->external_peak_bytes, 80 * MiB);  // asked for, as the lower bound counts
  EXPECT_EQ(run.r->lower_bound_bytes, 8 * MiB);     // the failed tensor was never freed
}

// ---- the recorded run's failed requests ------------------------------------------------

gmt_event_t Failed(uint64_t ts, uint64_t size, uint32_t callsite = 0) {
  gmt_event_t e = Ev(GMT_EV_ALLOC_FAILED, ts, 0, size, 0);
  e.callsite = callsite;
  return e;
}

TEST(Engine, RecordedFailureIsDescribedEvenWhenNotReplayed) {
  Replay run(kDirect);
  ASSERT_EQ(run.Feed({Ev(GMT_EV_SEGMENT_ALLOC, 0, 0x100000, 8 * MiB, 0), A(1, 0x1000, 3 * MiB),
                      Failed(2, 4 * MiB, 5), Failed(3, 1 * MiB)}),
            GM_OK);
  run.Finish();
  EXPECT_EQ(run.r->recorded_failures, 2u);
  EXPECT_EQ(run.r->recorded_failures_served, 0u);  // not asked: serve_failed is off
  EXPECT_EQ(run.r->skipped.trace_ooms, 2u);
  EXPECT_EQ(run.r->first_failure_event, 2);
  EXPECT_EQ(run.r->first_failure_ts_ns, 2u);
  EXPECT_EQ(run.r->first_failure_size, 4 * MiB);
  EXPECT_EQ(run.r->first_failure_callsite, 5u);
  EXPECT_EQ(run.r->first_failure_live_bytes, 3 * MiB);
  EXPECT_EQ(run.r->first_failure_recorded_reserved_bytes, 8 * MiB);  // the recorded segment
  EXPECT_EQ(run.r->lower_bound_bytes, 3 * MiB);
}

TEST(Engine, ServedFailureCountsAtItsMomentAndIsGivenBack) {
  Replay run(kDirect, 0, 1, "", 0, 1);
  ASSERT_EQ(run.Feed({A(0, 0x1000, 3 * MiB), Failed(1, 4 * MiB), Fr(2, 0x1000), A(3, 0x2000, 1 * MiB)}),
            GM_OK);
  run.Finish();
  EXPECT_EQ(run.r->recorded_failures, 1u);
  EXPECT_EQ(run.r->recorded_failures_served, 1u);
  EXPECT_EQ(run.r->first_failure_served, 1);
  EXPECT_EQ(run.r->ooms, 0u);
  EXPECT_EQ(run.r->lower_bound_bytes, 7 * MiB);           // 3 live + the 4 asked for
  EXPECT_EQ(run.r->peak_reserved_bytes, 7 * MiB);
  EXPECT_EQ(run.r->first_failure_reserved_bytes, 7 * MiB);
  EXPECT_EQ(run.r->peak_requested_plus_external_bytes, 7 * MiB);
  EXPECT_EQ(run.r->end_requested_bytes, 1 * MiB);          // given back at once
  EXPECT_EQ(run.r->skipped.trace_ooms, 0u);
}

// A failed request no device could hold (a wrapped-around size: traces/valid/extremes.zst's
// 2^64 - 1): an OOM whatever the policy, as an oversize ALLOC, and in no figure: counted into
// the lower bound it wrapped it around (gpuanalyze then refused the results' -1).
TEST(Engine, OversizeFailureIsAnOomInNoFigure) {
  Replay run(kDirect, 0, 1, "", 0, 1);
  ASSERT_EQ(run.Feed({A(0, 0x1000, 3 * MiB), Failed(1, UINT64_MAX), Fr(2, 0x1000)}), GM_OK);
  run.Finish();
  EXPECT_EQ(run.r->recorded_failures, 1u);
  EXPECT_EQ(run.r->recorded_failures_served, 0u);
  EXPECT_EQ(run.r->ooms, 1u);
  EXPECT_EQ(run.r->first_oom_event, 1);
  EXPECT_EQ(run.r->skipped.oversize, 1u);
  EXPECT_EQ(run.r->lower_bound_bytes, 3 * MiB);
  EXPECT_EQ(run.r->peak_requested_bytes, 3 * MiB);
  EXPECT_EQ(run.r->peak_reserved_bytes, 3 * MiB);
}

TEST(Engine, FailureThatDoesNotFitTheCapacityIsAnOom) {
  Replay run(kDirect, 6 * MiB, 1, "", 0, 1);
  ASSERT_EQ(run.Feed({A(0, 0x1000, 4 * MiB), Failed(1, 4 * MiB), Fr(2, 0x1000)}), GM_OK);
  run.Finish();
  EXPECT_EQ(run.r->recorded_failures_served, 0u);
  EXPECT_EQ(run.r->first_failure_served, 0);
  EXPECT_EQ(run.r->ooms, 1u);
  EXPECT_EQ(run.r->first_oom_event, 1);
  EXPECT_EQ(run.r->lower_bound_bytes, 8 * MiB);  // asked for, served or not
  EXPECT_EQ(run.r->peak_reserved_bytes, 4 * MiB);
  EXPECT_EQ(run.r->first_failure_reserved_bytes, 4 * MiB);
}

TEST(Engine, NeedsAtLeastCountsExternalMemoryBesideTheRequests) {
  // 64 MiB of a library's own beside 8 MiB of tensors: the device must hold 72 MiB at once,
  // while the allocator's lower bound is 8 MiB.
  Replay run(kDirect, 0, 1, "", 1);
  ASSERT_EQ(run.Feed({AS(0, 0x9000, 64 * MiB), AA(1, 0x1000, 8 * MiB), Fr(2, 0x9000), FA(3, 0x1000),
                      AA(4, 0x2000, 16 * MiB)}),
            GM_OK);
  run.Finish();
  EXPECT_EQ(run.r->lower_bound_bytes, 16 * MiB);
  EXPECT_EQ(run.r->external_peak_bytes, 64 * MiB);
  EXPECT_EQ(run.r->peak_requested_plus_external_bytes, 72 * MiB);
}

// ---- buffers mapped one by one through the VMM API (XLA's platform allocator) ----------

namespace {
gmt_event_t V(gmt_kind_t kind, uint64_t ts, uint64_t addr, uint64_t size) {
  gmt_event_t e = Ev(kind, ts, addr, size, 0);
  e.stream = GMT_STREAM_NONE;
  return e;
}
}  // namespace

TEST(EngineVmm, WholeReservationMapsAreRequests) {
  Replay run(kDirect, 0, 1, "", 1, 0, 1);
  ASSERT_EQ(run.Feed({V(GMT_EV_VMM_RESERVE, 0, 0x10000000, 2 * MiB),
                      V(GMT_EV_VMM_MAP, 1, 0x10000000, 2 * MiB),
                      V(GMT_EV_VMM_RESERVE, 2, 0x20000000, 6 * MiB),
                      V(GMT_EV_VMM_MAP, 3, 0x20000000, 6 * MiB),
                      V(GMT_EV_VMM_UNMAP, 4, 0x10000000, 2 * MiB),
                      V(GMT_EV_VMM_RELEASE, 5, 0x10000000, 2 * MiB),
                      V(GMT_EV_VMM_UNMAP, 6, 0x20000000, 6 * MiB),
                      V(GMT_EV_VMM_RELEASE, 7, 0x20000000, 6 * MiB)}),
            GM_OK)
      << run.err.msg;
  run.Finish();
  EXPECT_EQ(run.r->allocs, 2u);
  EXPECT_EQ(run.r->frees, 2u);
  EXPECT_EQ(run.r->skipped.vmm_buffers, 2u);
  EXPECT_EQ(run.r->lower_bound_bytes, 8 * MiB);
  EXPECT_EQ(run.r->peak_reserved_bytes, 8 * MiB);
  EXPECT_EQ(run.r->end_requested_bytes, 0u);
  EXPECT_EQ(run.r->skipped.not_request, 0u);
}

// Pages of one big reservation (expandable segments, a pool grown in place) are not requests.
TEST(EngineVmm, PartialMapsArePagesNotRequests) {
  Replay run(kDirect, 0, 1, "", 1, 0, 1);
  ASSERT_EQ(run.Feed({V(GMT_EV_VMM_RESERVE, 0, 0x40000000, 64 * MiB),
                      V(GMT_EV_VMM_MAP, 1, 0x40000000, 20 * MiB),
                      V(GMT_EV_VMM_MAP, 2, 0x41400000, 20 * MiB),
                      V(GMT_EV_VMM_UNMAP, 3, 0x41400000, 20 * MiB),
                      V(GMT_EV_VMM_UNMAP, 4, 0x40000000, 20 * MiB),
                      V(GMT_EV_VMM_RELEASE, 5, 0x40000000, 64 * MiB)}),
            GM_OK)
      << run.err.msg;
  run.Finish();
  EXPECT_EQ(run.r->allocs, 0u);
  EXPECT_EQ(run.r->skipped.vmm_pages, 4u);
  EXPECT_EQ(run.r->skipped.vmm_unmap_unmapped, 0u);
  EXPECT_EQ(run.r->skipped.vmm_release_unknown, 0u);
}

// Pairs that do not match are anomalies, counted; nothing crashes, nothing is lost silently.
TEST(EngineVmm, MismatchedPairsAreCountedAnomalies) {
  Replay run(kDirect, 0, 1, "", 1, 0, 1);
  ASSERT_EQ(run.Feed({V(GMT_EV_VMM_MAP, 0, 0x50000000, 2 * MiB),        // no reservation
                      V(GMT_EV_VMM_UNMAP, 1, 0x60000000, 2 * MiB),      // never mapped
                      V(GMT_EV_VMM_RELEASE, 2, 0x70000000, 2 * MiB),    // never reserved
                      V(GMT_EV_VMM_RESERVE, 3, 0x80000000, 4 * MiB),
                      V(GMT_EV_VMM_MAP, 4, 0x80000000, 4 * MiB),
                      V(GMT_EV_VMM_RELEASE, 5, 0x80000000, 4 * MiB),    // released while mapped
                      V(GMT_EV_VMM_UNMAP, 6, 0x50000000, 2 * MiB)}),    // frees the first one
            GM_OK)
      << run.err.msg;
  run.Finish();
  EXPECT_EQ(run.r->skipped.vmm_map_unreserved, 1u);
  EXPECT_EQ(run.r->skipped.vmm_unmap_unmapped, 1u);
  EXPECT_EQ(run.r->skipped.vmm_release_unknown, 1u);
  EXPECT_EQ(run.r->skipped.vmm_release_mapped, 1u);
  EXPECT_EQ(run.r->allocs, 2u);
  EXPECT_EQ(run.r->frees, 2u);
  EXPECT_EQ(run.r->end_requested_bytes, 0u);
  EXPECT_EQ(run.r->lower_bound_bytes, 6 * MiB);
}

// A recording killed in the middle: live buffers stay live, the replay ends cleanly.
TEST(EngineVmm, KilledMidwayLeavesLiveBuffers) {
  Replay run(kDirect, 0, 1, "", 1, 0, 1);
  ASSERT_EQ(run.Feed({V(GMT_EV_VMM_RESERVE, 0, 0x10000000, 2 * MiB),
                      V(GMT_EV_VMM_MAP, 1, 0x10000000, 2 * MiB),
                      V(GMT_EV_VMM_RESERVE, 2, 0x20000000, 2 * MiB)}),
            GM_OK);
  run.Finish();
  EXPECT_EQ(run.r->allocs, 1u);
  EXPECT_EQ(run.r->end_requested_bytes, 2 * MiB);
}

// Without the option, VMM records are the recorded allocator's: skipped and counted.
TEST(EngineVmm, OffByDefault) {
  Replay run(kDirect);
  ASSERT_EQ(run.Feed({V(GMT_EV_VMM_RESERVE, 0, 0x10000000, 2 * MiB),
                      V(GMT_EV_VMM_MAP, 1, 0x10000000, 2 * MiB)}),
            GM_OK);
  run.Finish();
  EXPECT_EQ(run.r->allocs, 0u);
  EXPECT_EQ(run.r->skipped.not_request, 2u);
  EXPECT_EQ(run.r->recorded_mapped_peak_bytes, 2 * MiB);
}

// The recorded run's own pool reservation: its stream-ordered allocations' address extent, from
// the 32 MiB-aligned start of the pool, rounded up to the 32 MiB chunk; synchronous ones are not
// the pool's.
TEST(Engine, RecordedPoolReservationIsTheAddressExtentInChunks) {
  Replay run(kDirect);
  const uint64_t base = 0x302000000ull;  // 32 MiB aligned, as the driver's pool was
  ASSERT_EQ(run.Feed({AA(0, base, 20 * MiB), AA(1, base + 40 * MiB, 20 * MiB), FA(2, base),
                      A(3, 0x7f0000000000ull, 300 * MiB)}),
            GM_OK);
  run.Finish();
  EXPECT_EQ(run.r->recorded_pool_reserved_bytes, 64 * MiB);  // extent 60 MiB -> two chunks
  Replay none(kDirect);
  ASSERT_EQ(none.Feed({A(0, base, 20 * MiB)}), GM_OK);
  none.Finish();
  EXPECT_EQ(none.r->recorded_pool_reserved_bytes, 0u);
}

// ---- frees that wait on stream events (engine_events.c) --------------------------------

namespace {
gmt_event_t Req(uint64_t ts, uint64_t addr) { return Ev(GMT_EV_FREE_REQUESTED, ts, addr, 0, 0); }

// Peak reserved of events under one timing, with the 1 MiB caching fake (reuse by size).
uint64_t PeakUnder(const std::vector<gmt_event_t> &v, int timing, uint64_t late = 0,
                   uint64_t *event_frees = nullptr) {
  Replay run(kCache, 0, 1, "", 0, 0, 0, timing, late);
  EXPECT_EQ(run.Feed(v), GM_OK) << run.err.msg;
  rp_result_t r;
  EXPECT_EQ(rp_engine_finish(run.e, &r, &run.err), GM_OK);
  EXPECT_EQ(r.skipped.unknown_free + r.skipped.double_free + r.skipped.alloc_over_live, 0u);
  EXPECT_EQ(r.end_requested_bytes, 0u);
  if (event_frees) *event_frees = r.event_frees;
  return r.peak_reserved_bytes;
}
}  // namespace

TEST(EngineEvents, TorchFreeThatWaitsIsFoundAndTimedThreeWays) {
  // a is freed by the program (free_requested) but its event is pending at b's malloc: b
  // cannot reuse a (recorded: 2 MiB). Early: a came back at once and b reuses it (1 MiB).
  std::vector<gmt_event_t> v = {A(0, 0xa, MiB), Req(1, 0xa), A(2, 0xb, MiB), Fr(3, 0xa),
                                Fr(4, 0xb)};
  uint64_t n = 0;
  EXPECT_EQ(PeakUnder(v, RP_EVENTS_RECORDED, 0, &n), 2 * MiB);
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(PeakUnder(v, RP_EVENTS_EARLY), 1 * MiB);
  EXPECT_EQ(PeakUnder(v, RP_EVENTS_LATE), 2 * MiB);
  // Late by two mallocs: c cannot reuse a either.
  v.insert(v.begin() + 4, A(4, 0xc, MiB));
  v.push_back(Fr(6, 0xc));
  EXPECT_EQ(PeakUnder(v, RP_EVENTS_RECORDED), 2 * MiB);
  EXPECT_EQ(PeakUnder(v, RP_EVENTS_LATE, 1), 2 * MiB);
  EXPECT_EQ(PeakUnder(v, RP_EVENTS_LATE, 2), 3 * MiB);
}

TEST(EngineEvents, BackToBackFreeNeedsNoEventAndIsNeverDelayed) {
  std::vector<gmt_event_t> v = {A(0, 0xa, MiB), Req(1, 0xa), Fr(1, 0xa), A(2, 0xb, MiB),
                                Fr(3, 0xb)};
  uint64_t n = 7;
  EXPECT_EQ(PeakUnder(v, RP_EVENTS_LATE, 5, &n), 1 * MiB);
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(PeakUnder(v, RP_EVENTS_EARLY), 1 * MiB);
}

// A block whose event completed in time comes back in the next malloc's process_events():
// its free follows its free_requested with nothing between, but tens of microseconds later,
// where a plain free_block() is in the same call. In a multi-stream trace that delay marks
// a waiting free (on time here, possibly late in another run); one stream never does.
TEST(EngineEvents, TorchFreeOnTimeAtTheNextMallocIsFoundByItsDelay) {
  gmt_event_t side = A(1, 0xc, MiB);
  side.stream = 9;
  std::vector<gmt_event_t> v = {A(0, 0xa, MiB), side,         Req(1000, 0xa),
                                Fr(31000, 0xa), A(31500, 0xb, MiB), Fr(40000, 0xb),
                                Fr(41000, 0xc)};
  uint64_t n = 0;
  EXPECT_EQ(PeakUnder(v, RP_EVENTS_RECORDED, 0, &n), 2 * MiB);  // b reuses a
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(PeakUnder(v, RP_EVENTS_EARLY), 2 * MiB);
  EXPECT_EQ(PeakUnder(v, RP_EVENTS_LATE), 3 * MiB);  // a still pending at b's malloc
  // The same delay in a trace of one stream: a plain free (record_stream needs a second one).
  std::vector<gmt_event_t> one = v;
  one[1].stream = 0;
  EXPECT_EQ(PeakUnder(one, RP_EVENTS_LATE, 0, &n), 2 * MiB);
  EXPECT_EQ(n, 0u);
  // Two streams, but the free 2 us after its request: free_block() in the same call.
  std::vector<gmt_event_t> quick = v;
  quick[3].ts_ns = 3000;
  EXPECT_EQ(PeakUnder(quick, RP_EVENTS_LATE, 0, &n), 2 * MiB);
  EXPECT_EQ(n, 0u);
}

// A free still waiting when the trace ends (no malloc after the event completed, so PyTorch
// never logged its free_completed) waited on an event: it counts, and early gives it back.
TEST(EngineEvents, TorchFreeNeverCompletedCountsAsWaiting) {
  for (int timing : {RP_EVENTS_RECORDED, RP_EVENTS_EARLY}) {
    Replay run(kCache, 0, 1, "", 0, 0, 0, timing, 0);
    ASSERT_EQ(run.Feed({A(0, 0xa, MiB), Req(1, 0xa), A(2, 0xb, MiB), Fr(3, 0xb)}), GM_OK);
    run.Finish();
    EXPECT_EQ(run.r->event_frees, 1u);
    EXPECT_EQ(run.r->event_frees_requested, 1u);
    EXPECT_EQ(run.r->peak_reserved_bytes, timing == RP_EVENTS_EARLY ? 1 * MiB : 2 * MiB);
  }
}

TEST(EngineEvents, RequestsTraceFreeOnAnotherStreamWaits) {
  gmt_event_t other = FA(3, 0xa);
  other.stream = 9;  // freed on another stream than the one it was allocated on
  std::vector<gmt_event_t> v = {AA(0, 0xa, MiB), other, AA(4, 0xb, MiB), FA(5, 0xb)};
  uint64_t n = 0;
  EXPECT_EQ(PeakUnder(v, RP_EVENTS_RECORDED, 0, &n), 1 * MiB);  // recorded = early here
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(PeakUnder(v, RP_EVENTS_LATE), 2 * MiB);
  std::vector<gmt_event_t> same = {AA(0, 0xa, MiB), FA(3, 0xa), AA(4, 0xb, MiB), FA(5, 0xb)};
  EXPECT_EQ(PeakUnder(same, RP_EVENTS_LATE, 0, &n), 1 * MiB);
  EXPECT_EQ(n, 0u);
}

TEST(EngineEvents, HeldBlockLeavesItsTraceAddressToTheNextAlloc) {
  // The recorded run reuses a's address right after its free; under late timing a is still
  // held: the new alloc at 0xa is a new block, not an alloc over a live one.
  std::vector<gmt_event_t> v = {A(0, 0xa, MiB), Req(1, 0xa), A(2, 0xb, MiB), Fr(3, 0xa),
                                A(4, 0xa, MiB), Fr(5, 0xa), Fr(6, 0xb)};
  EXPECT_EQ(PeakUnder(v, RP_EVENTS_RECORDED), 2 * MiB);
  EXPECT_EQ(PeakUnder(v, RP_EVENTS_LATE, 3), 3 * MiB);
}

TEST(EngineEvents, EmptyCacheSynchronizesPendingEvents) {
  Replay run(kCache, 0, 1, "", 0, 0, 0, RP_EVENTS_LATE, 100);
  ASSERT_EQ(run.Feed({A(0, 0xa, MiB), Req(1, 0xa), A(2, 0xb, MiB), Fr(3, 0xa)}), GM_OK);
  EXPECT_EQ(rp_engine_reserved(run.e), 2 * MiB);
  ASSERT_EQ(run.Feed({Ev(GMT_EV_EMPTY_CACHE, 4, 0, 0, 0)}), GM_OK);
  EXPECT_EQ(rp_engine_reserved(run.e), 1 * MiB);  // a came back and was released
  run.Finish();
  EXPECT_EQ(run.r->event_frees, 1u);
  EXPECT_EQ(run.r->event_timing, RP_EVENTS_LATE);
  EXPECT_EQ(run.r->late_mallocs, 100u);
}

// ---- the simulated stream-ordered pool (sim_pool.c) -------------------------------------

namespace {
struct Pool {
  rp_backend_t *b = nullptr;
  gm_err_t err{};
  explicit Pool(int model, uint64_t capacity = 0) {
    rp_sim_opts_t so{};
    so.pool_model = model;
    so.capacity = capacity;
    EXPECT_EQ(rp_sim_backend_create(&so, &b, &err), GM_OK) << err.msg;
  }
  ~Pool() { b->destroy(b); }
  uint64_t Alloc(uint64_t size, uint64_t stream) {
    uint64_t a = 0;
    EXPECT_EQ(b->drv.alloc_async(b->drv.ctx, size, stream, &a), GM_OK);
    return a;
  }
  void Free(uint64_t a, uint64_t stream) { EXPECT_EQ(b->drv.free_async(b->drv.ctx, a, stream), GM_OK); }
  uint64_t Reserved() { return b->pool_reserved(b); }
};
}  // namespace

TEST(SimPool, GrowsByChunksAtTheTopOfOneHeap) {
  Pool heap(RP_POOL_HEAP), chunks(RP_POOL_CHUNKS), ideal(RP_POOL_IDEAL);
  for (Pool *p : {&heap, &chunks, &ideal}) {
    p->Alloc(40 * MiB, 1);
    p->Alloc(40 * MiB, 1);
  }
  // heap: 64 MiB (24 free at the top), then 16 more needed -> one 32 MiB chunk joins it.
  EXPECT_EQ(heap.Reserved(), 96 * MiB);
  // chunks: each 40 MiB request gets a 64 MiB chunk of its own.
  EXPECT_EQ(chunks.Reserved(), 128 * MiB);
  // ideal: 80 MiB live, rounded up to the chunk.
  EXPECT_EQ(ideal.Reserved(), 96 * MiB);
}

TEST(SimPool, SameStreamModelKeepsAFreeFromOtherStreams) {
  Pool any(RP_POOL_HEAP), same(RP_POOL_SAME_STREAM);
  for (Pool *p : {&any, &same}) {
    uint64_t a = p->Alloc(20 * MiB, 1);
    p->Free(a, 1);
    p->Alloc(20 * MiB, 2);
  }
  EXPECT_EQ(any.Reserved(), 32 * MiB);   // stream 2 reuses stream 1's free at once
  EXPECT_EQ(same.Reserved(), 64 * MiB);  // it may not: 12 MiB free at the top + a new chunk
  // The freeing stream itself reuses it.
  Pool own(RP_POOL_SAME_STREAM);
  own.Free(own.Alloc(20 * MiB, 1), 1);
  own.Alloc(20 * MiB, 1);
  EXPECT_EQ(own.Reserved(), 32 * MiB);
}

TEST(SimPool, TrimReleasesOnlyChunksWithNothingLive) {
  Pool p(RP_POOL_CHUNKS);
  uint64_t a = p.Alloc(10 * MiB, 1);
  uint64_t b = p.Alloc(30 * MiB, 1);  // does not fit the first chunk's 22 MiB: a second chunk
  EXPECT_EQ(p.Reserved(), 64 * MiB);
  p.Free(b, 1);
  EXPECT_EQ(p.Reserved(), 64 * MiB);  // the release threshold PyTorch sets: never on its own
  EXPECT_EQ(p.b->drv.pool_trim(p.b->drv.ctx, 0), GM_OK);
  EXPECT_EQ(p.Reserved(), 32 * MiB);  // a's chunk stays
  p.Free(a, 1);
  EXPECT_EQ(p.b->drv.pool_trim(p.b->drv.ctx, 0), GM_OK);
  EXPECT_EQ(p.Reserved(), 0u);
  // After a trim the pool grows again from nothing, and frees of unknown blocks are refused.
  p.Alloc(MiB, 1);
  EXPECT_EQ(p.Reserved(), 32 * MiB);
  EXPECT_EQ(p.b->drv.free_async(p.b->drv.ctx, 0x1234, 1), GM_ERR_INVAL);
}

TEST(SimPool, TrimOfTheHeapCutsFreeRangesAtChunkEdges) {
  Pool p(RP_POOL_HEAP);
  uint64_t a = p.Alloc(40 * MiB, 1);  // heap: one 64 MiB chunk
  uint64_t b = p.Alloc(40 * MiB, 1);  // 24 free at the top + a 32 MiB chunk; b spans both
  EXPECT_EQ(p.Reserved(), 96 * MiB);
  p.Free(a, 1);
  EXPECT_EQ(p.b->drv.pool_trim(p.b->drv.ctx, 0), GM_OK);
  EXPECT_EQ(p.Reserved(), 96 * MiB);  // b overlaps both chunks: nothing can go
  p.Free(b, 1);
  EXPECT_EQ(p.b->drv.pool_trim(p.b->drv.ctx, 0), GM_OK);
  EXPECT_EQ(p.Reserved(), 0u);
  p.Alloc(100 * MiB, 3);
  EXPECT_EQ(p.Reserved(), 128 * MiB);
}

TEST(SimPool, CapacityRefusesAChunk) {
  Pool p(RP_POOL_HEAP, 48 * MiB);
  uint64_t a = 0;
  EXPECT_EQ(p.b->drv.alloc_async(p.b->drv.ctx, 10 * MiB, 1, &a), GM_OK);
  EXPECT_EQ(p.b->drv.alloc_async(p.b->drv.ctx, 30 * MiB, 1, &a), GM_ERR_NOMEM);
  EXPECT_EQ(p.Reserved(), 32 * MiB);
}

TEST(EngineEvents, OutOfMemoryWaitsForPendingEventsBeforeFailing) {
  // 4 MiB of device (2 MiB granules): a is held (late), b takes the rest; c fails unless a
  // comes back first, as PyTorch's OOM path synchronizes the events and retries.
  Replay ok(kCache, 4 * MiB, 1, "", 0, 0, 0, RP_EVENTS_LATE, 100);
  ASSERT_EQ(ok.Feed({A(0, 0xa, 2 * MiB), Req(1, 0xa), A(2, 0xb, 2 * MiB), Fr(3, 0xa), A(4, 0xc, 2 * MiB)}),
            GM_OK);
  ok.Finish();
  EXPECT_EQ(ok.r->ooms, 0u);  // c reuses a once its event is synchronized
  EXPECT_EQ(ok.r->peak_reserved_bytes, 4 * MiB);
  Replay big(kCache, 4 * MiB, 1, "", 0, 0, 0, RP_EVENTS_LATE, 100);
  ASSERT_EQ(big.Feed({A(0, 0xa, 2 * MiB), Req(1, 0xa), A(2, 0xb, 2 * MiB), Fr(3, 0xa), A(4, 0xc, 4 * MiB)}),
            GM_OK);
  big.Finish();
  EXPECT_EQ(big.r->ooms, 1u);  // 4 MiB cannot fit beside b even then: a real OOM
}

TEST(Engine, PeakSnapshotSplitsTheWasteAndMapsSegments) {
  Replay run(kCache);
  // fakecache: one 1 MiB-rounded segment per new block size. At the peak (5 MiB): A's 1 MiB
  // segment holds 100 KiB (rounding 924 KiB), B's 1 MiB segment is cached (freed), C's 3 MiB
  // segment holds 3 MiB.
  ASSERT_EQ(run.Feed({A(0, 0xa000, 100 << 10), A(1, 0xb000, 1 * MiB), Fr(2, 0xb000), A(3, 0xc000, 3 * MiB),
                      Fr(4, 0xc000), Fr(5, 0xa000)}),
            GM_OK);
  run.Finish();
  const rp_peak_snapshot_t &p = run.r->peak;
  ASSERT_TRUE(p.valid);
  EXPECT_EQ(p.event, 3u);
  EXPECT_EQ(p.reserved_bytes, 5 * MiB);
  EXPECT_EQ(p.requested_bytes, 3 * MiB + (100 << 10));
  EXPECT_EQ(p.allocated_bytes, 4 * MiB);
  EXPECT_EQ(p.rounding_bytes, MiB - (100 << 10));
  EXPECT_EQ(p.free_in_segments_bytes, 0u);
  EXPECT_EQ(p.cached_segments_bytes, MiB);
  EXPECT_EQ(p.rounding_bytes + p.free_in_segments_bytes + p.cached_segments_bytes + p.requested_bytes,
            p.reserved_bytes);
  EXPECT_EQ(p.segments, 3u);
  EXPECT_EQ(p.segments_in_use, 2u);
  ASSERT_EQ(p.n_segs, 3u);
  uint64_t live = 0, blocks = 0;
  for (size_t i = 0; i < p.n_segs; i++) {
    if (i) {
      EXPECT_LT(p.seg[i - 1].addr, p.seg[i].addr);  // address order
    }
    live += p.seg[i].live_bytes;
    blocks += p.seg[i].blocks;
    if (p.seg[i].size == 3 * MiB) {
      ASSERT_EQ(p.seg[i].n_spans, 1u);
      EXPECT_EQ(p.seg[i].span_off[0], 0u);
      EXPECT_EQ(p.seg[i].span_len[0], 3 * MiB);
    }
  }
  EXPECT_EQ(live, p.requested_bytes);
  EXPECT_EQ(blocks, 2u);
}

// A follower replay (a placement spread's, a timing range's) wants the reserved peak, the OOMs
// and the event figures only: with peak_only those are the full replay's (the policy makes the
// same calls), on random programs under a capacity, with and without the check; what only
// observation gives (allocated peak, fragmentation, timeline, the peak's snapshot) is not kept.
TEST(Engine, PeakOnlyKeepsTheFollowersFiguresOfTheFullReplay) {
  for (unsigned seed = 1; seed <= 20; seed++) {
    std::vector<gmt_event_t> v;
    std::vector<uint64_t> live;
    uint64_t x = seed * 0x9E3779B97F4A7C15ull;
    auto next = [&x]() { return x = x * 6364136223846793005ull + 1442695040888963407ull, x >> 33; };
    for (uint64_t i = 0; i < 3000; i++) {
      if (!live.empty() && next() % 100 < 45) {
        size_t k = next() % live.size();
        v.push_back(Fr(i, live[k]));
        live[k] = live.back();
        live.pop_back();
      } else if (next() % 100 < 2) {
        v.push_back(Ev(GMT_EV_EMPTY_CACHE, i, 0, 0, 0));
      } else {
        uint64_t addr = 0x10000 + i * 0x100;
        v.push_back(A(i, addr, (next() % 6 + 1) * (MiB / 2)));
        live.push_back(addr);
      }
    }
    for (const rp_policy_ops_t *ops : {&kDirect, &kCache}) {
      int check = seed % 2;
      Replay full(*ops, 40 * MiB, check), lean(*ops, 40 * MiB, check, "", 0, 0, 0, 0, 0, /*peak_only=*/1);
      ASSERT_EQ(full.Feed(v), GM_OK) << full.err.msg;
      ASSERT_EQ(lean.Feed(v), GM_OK) << lean.err.msg;
      full.Finish();
      lean.Finish();
      EXPECT_EQ(lean.r->peak_reserved_bytes, full.r->peak_reserved_bytes) << seed;
      EXPECT_EQ(lean.r->ooms, full.r->ooms) << seed;
      EXPECT_EQ(lean.r->late_mallocs, full.r->late_mallocs);
      EXPECT_EQ(lean.r->event_frees, full.r->event_frees);
      EXPECT_EQ(lean.r->device_alloc_calls, full.r->device_alloc_calls);
      EXPECT_EQ(lean.r->end_reserved_bytes, full.r->end_reserved_bytes);
      EXPECT_EQ(lean.r->allocs, full.r->allocs);
      EXPECT_EQ(lean.r->frees, full.r->frees);
      EXPECT_GT(full.r->peak_allocated_bytes, 0u);
      EXPECT_TRUE(full.r->peak.valid);
      EXPECT_GT(full.r->timeline_n, 0u);
      EXPECT_EQ(lean.r->peak_allocated_bytes, 0u);
      EXPECT_FALSE(lean.r->peak.valid);
      EXPECT_EQ(lean.r->timeline_n, 0u);
    }
  }
}

TEST(Engine, PeakOnlyStillChecksThePolicy) {
  Replay run(kDirect, 0, /*check=*/1, "lie", 0, 0, 0, 0, 0, /*peak_only=*/1);
  EXPECT_EQ(run.Feed({A(0, 0x1000, 100)}), GM_ERR_CORRUPT);
  EXPECT_NE(std::string(run.err.msg).find("allocated 0 < live requested 100"), std::string::npos) << run.err.msg;
}

TEST(Engine, PeakSnapshotKeepsTheLaterFullerMomentAtTheSamePeak) {
  Replay run(kCache);
  // The peak (3 MiB) is reached with 2 MiB live; then A's cached segment is reused: still at
  // the peak, nothing cached: the snapshot is that moment (as fragmentation_at_peak is).
  ASSERT_EQ(run.Feed({A(0, 0x1000, MiB), Fr(1, 0x1000), A(2, 0x2000, 2 * MiB), A(3, 0x3000, MiB)}), GM_OK);
  run.Finish();
  EXPECT_EQ(run.r->peak.event, 3u);
  EXPECT_EQ(run.r->peak.cached_segments_bytes, 0u);
  EXPECT_EQ(run.r->peak.requested_bytes, 3 * MiB);
}

TEST(Engine, PeakSnapshotIsBoundedOnAGrowingDirectTrace) {
  // `direct`: every alloc raises the peak. 60k live blocks: snapshots are paid from the
  // budget (2 elements per event), so the replay stays linear; the one still pending at the
  // end is taken then, as reserved is still at the peak.
  Replay run(kDirect, 0, 0);
  std::vector<gmt_event_t> v;
  for (uint64_t i = 0; i < 60000; i++) v.push_back(A(i, 0x100000 + i * 64, 64));
  ASSERT_EQ(run.Feed(v), GM_OK);
  run.Finish();
  ASSERT_TRUE(run.r->peak.valid);
  EXPECT_EQ(run.r->peak.reserved_bytes, run.r->peak_reserved_bytes);
  EXPECT_EQ(run.r->peak.requested_bytes, 60000u * 64);
  EXPECT_EQ(run.r->peak.n_segs, (size_t)RP_SNAP_SEGS);
  EXPECT_EQ(run.r->peak.rounding_bytes, 0u);
}

TEST(Engine, PeakSnapshotMapsTheLargestSegmentsTiesInAddressOrder) {
  // fakecache: a segment per live request, rounded up to the MiB, so segments tie on size;
  // each block's request is unique (its live bytes name it). The map holds the RP_SNAP_SEGS
  // largest, ties taken in address order (here the order of the requests): what the first
  // RP_SNAP_SEGS of a stable sort by descending size give.
  Replay run(kCache);
  std::vector<gmt_event_t> v;
  std::vector<std::pair<uint64_t, uint64_t>> segs; // (MiB-rounded size, request)
  for (uint64_t i = 0; i < 300; i++) {
    uint64_t mibs = 1 + (i * 7919) % 4, req = mibs * MiB - 64 * (i + 1);
    v.push_back(A(i, 0x100000 + i * 64, req));
    segs.push_back({mibs * MiB, req});
  }
  ASSERT_EQ(run.Feed(v), GM_OK);
  run.Finish();
  const rp_peak_snapshot_t &p = run.r->peak;
  ASSERT_TRUE(p.valid);
  ASSERT_EQ(p.n_segs, (size_t)RP_SNAP_SEGS);
  std::vector<size_t> order(segs.size());
  for (size_t i = 0; i < order.size(); i++) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return segs[a].first > segs[b].first; });
  std::vector<size_t> chosen(order.begin(), order.begin() + RP_SNAP_SEGS);
  std::sort(chosen.begin(), chosen.end()); // request order
  std::vector<uint64_t> want, got;
  for (size_t i : chosen) want.push_back(segs[i].second);
  for (size_t i = 0; i < p.n_segs; i++) {
    if (i) {
      EXPECT_LT(p.seg[i - 1].addr, p.seg[i].addr);
    }
    got.push_back(p.seg[i].live_bytes);
  }
  EXPECT_EQ(got, want);
}

TEST(Engine, PeakSnapshotOfAPeakLeftEarlyIsAtLeastHalfWayUp) {
  // The same growth, then everything freed: the peak's last moments were not paid for; the
  // snapshot comes from an earlier peak, at least half the last, and says which.
  Replay run(kDirect, 0, 0);
  std::vector<gmt_event_t> v;
  for (uint64_t i = 0; i < 60000; i++) v.push_back(A(i, 0x100000 + i * 64, 64));
  for (uint64_t i = 0; i < 60000; i++) v.push_back(Fr(60000 + i, 0x100000 + i * 64));
  ASSERT_EQ(run.Feed(v), GM_OK);
  run.Finish();
  ASSERT_TRUE(run.r->peak.valid);
  EXPECT_LE(run.r->peak.reserved_bytes, run.r->peak_reserved_bytes);
  EXPECT_GE(run.r->peak.reserved_bytes, run.r->peak_reserved_bytes / 2);
  EXPECT_EQ(run.r->peak.requested_bytes, run.r->peak.reserved_bytes);
}

TEST(Engine, PeakSnapshotGivesUpPastSixtyFourKiSegments) {
  // A segment per request and 70k of them live: following them would cost what the block map
  // costs; no snapshot rather than a wrong one.
  Replay run(kDirect, 0, 0);
  std::vector<gmt_event_t> v;
  for (uint64_t i = 0; i < 70000; i++) v.push_back(A(i, 0x100000 + i * 64, 64));
  ASSERT_EQ(run.Feed(v), GM_OK);
  run.Finish();
  EXPECT_FALSE(run.r->peak.valid);
  EXPECT_EQ(run.r->peak_reserved_bytes, 70000u * 64);
}
