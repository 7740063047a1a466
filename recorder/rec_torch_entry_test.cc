// rec_torch_entry_test.cc: PyTorch's trace entries (torch 2.11's bytes, built here) through the
// streamed default's tracker body into a real recorder core, read back with the trace reader and
// compared with a reference model of what each entry must become (the event gpurec import makes
// of the same history entry; a free_completed that follows its free_requested at once shares its
// time), from two threads at once.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif
#include <unistd.h>

#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

extern "C" {
#include "formats/gmt.h"
#include "recorder/rec_core.h"
#include "recorder/rec_torch_entry.h"
}

namespace {

std::string TmpPath(const std::string &name) {
  const char *d = getenv("TEST_TMPDIR");
  return std::string(d ? d : "/tmp") + "/" + name;
}

uint64_t Mono(void *) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct Entry {
  unsigned char b[80];
};

// The CPU's counter, as record_trace stores it in each entry (0 where there is none).
uint64_t Ticks() {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return 0;
#endif
}

Entry Te(int action, int device, uint64_t addr, uint64_t stream, uint64_t size) {
  Entry e;
  memset(&e, 0, sizeof e);
  int32_t a = action;
  int8_t d = (int8_t)device;
  memcpy(e.b + REC_TE_OFF_ACTION, &a, sizeof a);
  memcpy(e.b + REC_TE_OFF_DEVICE, &d, sizeof d);
  memcpy(e.b + REC_TE_OFF_ADDR, &addr, sizeof addr);
  memcpy(e.b + REC_TE_OFF_STREAM, &stream, sizeof stream);
  memcpy(e.b + REC_TE_OFF_SIZE, &size, sizeof size);
  return e;
}

// An entry as PyTorch hands it over: stamped with the counter just before (tick: that reading).
void FeedAt(const Entry &e, uint64_t tick) {
  Entry c = e;
  memcpy(c.b + REC_TE_OFF_TIME, &tick, sizeof tick);
  rec_ts_entry(nullptr, c.b);
}
void Feed(const Entry &e) { FeedAt(e, Ticks()); }

// A training step's pattern on one thread, from a seeded generator: allocations, frees whose
// completion follows at once (most), frees completed later (record_stream: other entries in
// between, some on the same address), segment calls, snapshot entries (no event), OOMs.
std::vector<Entry> Program(unsigned seed, int thread, int n) {
  std::mt19937_64 rng(seed * 7919u + (unsigned)thread);
  uint64_t base = (uint64_t)(thread + 1) << 40, next = base, stream = 0x1000u * (thread + 1);
  std::vector<uint64_t> live, pending;
  std::vector<Entry> out;
  while ((int)out.size() < n) {
    unsigned r = rng() % 100;
    if (r < 40 || live.empty()) {
      uint64_t a = next;
      next += 512 * (1 + rng() % 64);
      live.push_back(a);
      out.push_back(Te(REC_TE_ALLOC, thread % 2, a, stream, (a - base) % 100000 + 512));
    } else if (r < 80) {
      size_t i = rng() % live.size();
      uint64_t a = live[i];
      live.erase(live.begin() + (long)i);
      uint64_t sz = (a - base) % 100000 + 512;
      out.push_back(Te(REC_TE_FREE_REQUESTED, thread % 2, a, stream, sz));
      if (rng() % 8) {
        out.push_back(Te(REC_TE_FREE_COMPLETED, thread % 2, a, stream, sz));
      } else if (rng() % 2) {
        pending.push_back(a);  // completed after other entries
      } else {                 // completed next, but on another stream (not the same fields)
        out.push_back(Te(REC_TE_FREE_COMPLETED, thread % 2, a, stream + 1, sz));
      }
    } else if (r < 88 && !pending.empty()) {
      uint64_t a = pending.back();
      pending.pop_back();
      out.push_back(Te(REC_TE_FREE_COMPLETED, thread % 2, a, stream, (a - base) % 100000 + 512));
    } else if (r < 93) {
      out.push_back(Te(rng() % 2 ? REC_TE_SEGMENT_ALLOC : REC_TE_SEGMENT_FREE, thread % 2,
                       base + (rng() % 16) * (2u << 20), stream, 2u << 20));
    } else if (r < 97) {
      out.push_back(Te(REC_TE_SNAPSHOT, thread % 2, 0, 0, 0));
    } else {
      out.push_back(Te(REC_TE_OOM, thread % 2, 123456789, stream, 1ull << 40));
    }
  }
  out.push_back(Te(REC_TE_FREE_REQUESTED, thread % 2, next + 1, stream, 4096));  // the last
  return out;
}

struct Recording {
  rec_core_t *core = nullptr;
  std::string path;
  explicit Recording(const std::string &name, uint64_t flush_ns = 20000000ull) : path(TmpPath(name)) {
    unlink(path.c_str());
    rec_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    gmt_header_init(&cfg.header);
    cfg.path = path.c_str();
    cfg.flush_interval_ns = flush_ns;
    cfg.open_after_ns = 1;
    rec_hooks_t hooks;
    memset(&hooks, 0, sizeof hooks);
    hooks.now_ns = Mono;
    gm_err_t err;
    gm_err_clear(&err);
    EXPECT_EQ(rec_core_start(&core, &cfg, &hooks, &err), GM_OK) << err.msg;
    gmt_header_free(&cfg.header);
    rec_core_gpu_ready(core);
    rec_ts_entry_start(core, nullptr, Mono);
  }
  rec_core_stats_t Stats() {
    rec_core_stats_t st;
    rec_core_stats(core, &st);
    return st;
  }
  uint64_t last_bad_ticks = 0;
  std::vector<gmt_event_t> Finish() {
    EXPECT_EQ(rec_core_stop(core), GM_OK);
    last_bad_ticks = Stats().bad_ticks;
    rec_ts_entry_start(nullptr, nullptr, Mono);
    rec_core_destroy(core);
    core = nullptr;
    gmt_reader_t *r;
    gm_err_t err;
    gm_err_clear(&err);
    std::vector<gmt_event_t> out;
    EXPECT_EQ(gmt_reader_open(&r, path.c_str(), &err), GM_OK) << err.msg;
    gmt_event_t ev;
    gm_status_t s;
    while ((s = gmt_reader_next(r, &ev, &err)) == GM_OK) out.push_back(ev);
    EXPECT_EQ(s, GM_END) << err.msg;
    gmt_reader_close(r);
    unlink(path.c_str());
    return out;
  }
};

// The reference: the event an entry must become (ts left 0), or none (a snapshot entry).
bool Expected(const Entry &e, gmt_event_t *ev) {
  int32_t action;
  int8_t device;
  uint64_t addr, stream, size;
  memcpy(&action, e.b + REC_TE_OFF_ACTION, sizeof action);
  memcpy(&device, e.b + REC_TE_OFF_DEVICE, sizeof device);
  memcpy(&addr, e.b + REC_TE_OFF_ADDR, sizeof addr);
  memcpy(&stream, e.b + REC_TE_OFF_STREAM, sizeof stream);
  memcpy(&size, e.b + REC_TE_OFF_SIZE, sizeof size);
  static const std::map<int, unsigned> kind = {
      {REC_TE_ALLOC, GMT_EV_ALLOC},           {REC_TE_FREE_REQUESTED, GMT_EV_FREE_REQUESTED},
      {REC_TE_FREE_COMPLETED, GMT_EV_FREE},   {REC_TE_SEGMENT_ALLOC, GMT_EV_SEGMENT_ALLOC},
      {REC_TE_SEGMENT_FREE, GMT_EV_SEGMENT_FREE}, {REC_TE_SEGMENT_MAP, GMT_EV_VMM_MAP},
      {REC_TE_SEGMENT_UNMAP, GMT_EV_VMM_UNMAP}, {REC_TE_OOM, GMT_EV_ALLOC_FAILED}};
  auto k = kind.find(action);
  if (k == kind.end()) return false;
  memset(ev, 0, sizeof *ev);
  ev->kind = (uint8_t)k->second;
  ev->device = (uint16_t)device;
  ev->mem_kind = GMT_MEM_DEVICE;
  ev->flags = GMT_F_TORCH_STREAM;
  ev->size = size;
  ev->stream = stream;
  ev->callsite = GMT_NO_STRING;
  if (action == REC_TE_OOM) ev->corr_id = addr;  // the device's free bytes
  else ev->addr = addr;
  return true;
}

bool SameButTime(const gmt_event_t &a, const gmt_event_t &b) {
  gmt_event_t x = a, y = b;
  x.ts_ns = y.ts_ns = 0;
  return memcmp(&x, &y, sizeof x) == 0;
}

TEST(TorchEntry, EachEntryBecomesItsEvent) {
  for (unsigned seed = 1; seed <= 3; seed++) {
    const int threads = 2;
    Recording rec("entry_" + std::to_string(seed) + ".gmt");
    std::vector<std::vector<Entry>> progs;
    for (int t = 0; t < threads; t++) progs.push_back(Program(seed, t, 20000));
    std::vector<std::thread> th;
    for (int t = 0; t < threads; t++)
      th.emplace_back([&progs, t] {
        for (const Entry &e : progs[t]) Feed(e);
      });
    for (auto &x : th) x.join();
    std::vector<gmt_event_t> evs = rec.Finish();
    // per thread (told apart by the stream each uses), its events in file order
    std::map<uint64_t, std::vector<gmt_event_t>> per;
    uint64_t last = 0;
    for (const gmt_event_t &e : evs) {
      EXPECT_GE(e.ts_ns, last) << "the file is in time order";
      last = e.ts_ns;
      per[e.stream & ~0xfffull].push_back(e);
    }
    ASSERT_EQ(per.size(), (size_t)threads) << "seed " << seed;
    size_t close_time = 0;
    for (int t = 0; t < threads; t++) {
      const auto &got = per[0x1000u * (t + 1)];
      std::vector<gmt_event_t> want;
      std::vector<int> action;
      for (const Entry &e : progs[t]) {
        gmt_event_t ev;
        int32_t a;
        memcpy(&a, e.b, sizeof a);
        if (Expected(e, &ev)) want.push_back(ev), action.push_back(a);
      }
      ASSERT_EQ(got.size(), want.size()) << "seed " << seed << " thread " << t;
      for (size_t i = 0; i < want.size(); i++) {
        ASSERT_TRUE(SameButTime(got[i], want[i])) << "seed " << seed << " thread " << t << " event " << i;
        if (!i) continue;
        EXPECT_GE(got[i].ts_ns, got[i - 1].ts_ns) << "a thread's times never go back";
        // a free_completed right after its own free_requested: the next counter reading, a few
        // ns later on the clock at most (the core's one map for all threads)
        bool follows = action[i] == REC_TE_FREE_COMPLETED && action[i - 1] == REC_TE_FREE_REQUESTED &&
                       want[i].addr == want[i - 1].addr;
        if (follows && got[i].ts_ns - got[i - 1].ts_ns < 100000) close_time++;
      }
    }
    EXPECT_GT(close_time, 10000u) << "the programs free most blocks at once";
    EXPECT_EQ(rec_ts_entry_lost(), 0u);
    EXPECT_EQ(rec.last_bad_ticks, 0u);
  }
}

TEST(TorchEntry, NothingIsPushedWhenIgnoring) {
  Recording rec("entry_ignore.gmt");
  rec_ts_entry_bench(REC_TS_BENCH_IGNORE);
  Feed(Te(REC_TE_ALLOC, 0, 0x1000, 7, 512));
  rec_ts_entry_bench(REC_TS_BENCH_FULL);
  Feed(Te(REC_TE_ALLOC, 0, 0x2000, 7, 512));
  Feed(Te(REC_TE_SNAPSHOT, 0, 0, 0, 0));
  Feed(Te(99, 0, 0x3000, 7, 512));   // an action this torch does not have
  Feed(Te(REC_TE_ALLOC, -1, 0x4000, 7, 512));  // no device
  auto evs = rec.Finish();
  ASSERT_EQ(evs.size(), 1u);
  EXPECT_EQ(evs[0].addr, 0x2000u);
}

#if defined(__x86_64__)
void Spin(uint64_t ns) {
  for (uint64_t t0 = Mono(nullptr); Mono(nullptr) - t0 < ns;) {
  }
}

// The entry's own counter reading is its time: an entry stamped 100 us after the one before, fed
// 300 us after it, is 100 us later in the trace (the tracker's own reading would say 300).
TEST(TorchEntry, TheEntrysCounterReadingIsItsTime) {
  Recording rec("entry_ticks.gmt");
  std::thread th([] {
    uint64_t m0 = Mono(nullptr), t0 = Ticks();
    FeedAt(Te(REC_TE_ALLOC, 0, 0x1000, 7, 512), t0);
    Spin(300000);
    double per_ns = (double)(Ticks() - t0) / (double)(Mono(nullptr) - m0);
    FeedAt(Te(REC_TE_ALLOC, 0, 0x2000, 7, 512), t0 + (uint64_t)(100000 * per_ns));
  });
  th.join();
  auto evs = rec.Finish();
  ASSERT_EQ(evs.size(), 2u);
  ASSERT_EQ(evs[0].addr, 0x1000u);
  ASSERT_EQ(evs[1].addr, 0x2000u);
  double dt = (double)(evs[1].ts_ns - evs[0].ts_ns);
  EXPECT_GT(dt, 80000.0);
  EXPECT_LT(dt, 120000.0) << "the time is the entry's reading, not the tracker's";
  EXPECT_EQ(rec.last_bad_ticks, 0u);
}

// A reading that is not the counter's (0, a time since 1970, one from the future) is counted and
// clamped, and from then on the core reads the counter itself: every entry in order, on the clock.
TEST(TorchEntry, AReadingNotTheCountersIsReplaced) {
  Recording rec("entry_badticks.gmt");
  uint64_t m0 = Mono(nullptr);
  FeedAt(Te(REC_TE_ALLOC, 0, 0x1000, 7, 512), Ticks() + (1ull << 40));
  for (int i = 0; i < 1000 && rec.Stats().bad_ticks == 0; i++) usleep(1000);  // the writer's drain
  ASSERT_EQ(rec.Stats().bad_ticks, 1u);
  for (int i = 0; i < 300; i++) {
    FeedAt(Te(REC_TE_ALLOC, 0, 0x2000 + 0x1000u * i, 7, 512), 0);
    if (i % 100 == 0) Spin(200000);
  }
  uint64_t m1 = Mono(nullptr);
  auto evs = rec.Finish();
  EXPECT_EQ(rec.last_bad_ticks, 1u) << "the readings after were the core's own";
  ASSERT_EQ(evs.size(), 301u);
  for (size_t i = 1; i < evs.size(); i++) {
    EXPECT_GE(evs[i].ts_ns, evs[i - 1].ts_ns);
    EXPECT_EQ(evs[i].addr, 0x2000u + 0x1000u * (i - 1));
    EXPECT_GE(evs[i].ts_ns + 1000, m0);  // the two clocks read together to ~0.1 us
    EXPECT_LE(evs[i].ts_ns, m1 + 1000);
  }
  EXPECT_GT(evs.back().ts_ns - evs[1].ts_ns, 500000u) << "times from real counter readings";
}
#endif

}  // namespace
