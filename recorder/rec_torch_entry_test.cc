// rec_torch_entry_test.cc: PyTorch's trace entries (torch 2.11's bytes, built here) through the
// streamed default's tracker body into a real recorder core, read back with the trace reader.
// The pairing of a free_requested with the free_completed that follows it (one ring entry,
// rec_hold.c) must leave the trace as the unpaired path writes it, and a held free_requested
// must reach the file however the thread goes on: at the next flush, at a sync, at its
// thread's end, at the recording's end.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
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
  unsigned char b[64];
};

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

void Feed(const Entry &e) { rec_ts_entry(nullptr, e.b); }

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
  // a free_requested last: held when the thread ends
  out.push_back(Te(REC_TE_FREE_REQUESTED, thread % 2, next + 1, stream, 4096));
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
  std::vector<gmt_event_t> Finish() {
    EXPECT_EQ(rec_core_stop(core), GM_OK);
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

// The trace of `threads` threads each running its program, in bench mode `mode`; per thread
// (told apart by the address range and stream each uses) its events in file order.
std::map<uint64_t, std::vector<gmt_event_t>> Record(int mode, unsigned seed, int threads, int n) {
  Recording rec("entry_" + std::to_string(mode) + ".gmt");
  rec_ts_entry_bench(mode);
  std::vector<std::vector<Entry>> progs;
  for (int t = 0; t < threads; t++) progs.push_back(Program(seed, t, n));
  std::vector<std::thread> th;
  for (int t = 0; t < threads; t++)
    th.emplace_back([&progs, t] {
      for (const Entry &e : progs[t]) Feed(e);
    });
  for (auto &x : th) x.join();
  std::vector<gmt_event_t> evs = rec.Finish();
  rec_ts_entry_bench(REC_TS_BENCH_FULL);
  std::map<uint64_t, std::vector<gmt_event_t>> per;
  uint64_t last = 0;
  for (const gmt_event_t &e : evs) {
    EXPECT_GE(e.ts_ns, last) << "the file is in time order";
    last = e.ts_ns;
    EXPECT_EQ(e.flags, GMT_F_TORCH_STREAM) << "no ring-only flag reaches the file";
    per[e.stream & ~0xfffull].push_back(e);
  }
  EXPECT_EQ(rec_ts_entry_lost(), 0u);
  return per;
}

bool SameButTime(const gmt_event_t &a, const gmt_event_t &b) {
  gmt_event_t x = a, y = b;
  x.ts_ns = y.ts_ns = 0;
  return memcmp(&x, &y, sizeof x) == 0;
}

TEST(TorchEntry, PairedTraceIsTheUnpairedOne) {
  for (unsigned seed = 1; seed <= 3; seed++) {
    auto unpaired = Record(REC_TS_BENCH_UNPAIRED, seed, 2, 20000);
    auto paired = Record(REC_TS_BENCH_FULL, seed, 2, 20000);
    ASSERT_EQ(unpaired.size(), 2u) << "seed " << seed;
    ASSERT_EQ(paired.size(), 2u) << "seed " << seed;
    size_t pairs = 0;
    for (auto &kv : unpaired) {
      const auto &u = kv.second, &p = paired[kv.first];
      ASSERT_EQ(u.size(), p.size()) << "seed " << seed << " thread stream " << kv.first;
      for (size_t i = 0; i < u.size(); i++) {
        ASSERT_TRUE(SameButTime(u[i], p[i])) << "seed " << seed << " event " << i << " kinds "
                                             << (int)u[i].kind << " " << (int)p[i].kind;
        // the time pattern is the same: a free_completed right after its free_requested
        // shares its time on both paths, and only then
        if (i && u[i].kind == GMT_EV_FREE && u[i - 1].kind == GMT_EV_FREE_REQUESTED &&
            u[i].addr == u[i - 1].addr) {
          EXPECT_EQ(u[i].ts_ns == u[i - 1].ts_ns, p[i].ts_ns == p[i - 1].ts_ns) << i;
          pairs += u[i].stream == u[i - 1].stream;
        }
      }
      EXPECT_EQ(u.back().kind, GMT_EV_FREE_REQUESTED) << "the one held at the thread's end";
    }
    EXPECT_GT(pairs, 10000u) << "the program makes pairs";
  }
}

TEST(TorchEntry, HeldFreeIsWrittenAtTheNextFlush) {
  Recording rec("entry_flush.gmt");
  std::atomic<int> step{0};
  std::thread t([&] {
    Feed(Te(REC_TE_ALLOC, 0, 0x1000, 7, 512));
    Feed(Te(REC_TE_FREE_REQUESTED, 0, 0x1000, 7, 512));  // held: no entry follows for a while
    step = 1;
    while (step.load() != 2) usleep(1000);
    Feed(Te(REC_TE_FREE_COMPLETED, 0, 0x1000, 7, 512));  // after the writer took the request
  });
  while (step.load() != 1) usleep(1000);
  // the writer's flush every 20 ms writes it without any call of the thread's
  for (int i = 0; i < 2000 && rec.Stats().written < 2; i++) usleep(1000);
  EXPECT_EQ(rec.Stats().written, 2u) << "the held free_requested reached the file within flushes";
  step = 2;
  t.join();
  auto evs = rec.Finish();
  ASSERT_EQ(evs.size(), 3u);
  EXPECT_EQ(evs[0].kind, GMT_EV_ALLOC);
  EXPECT_EQ(evs[1].kind, GMT_EV_FREE_REQUESTED);
  EXPECT_EQ(evs[2].kind, GMT_EV_FREE);
  EXPECT_EQ(evs[1].ts_ns, evs[2].ts_ns) << "the completion keeps its request's time";
}

TEST(TorchEntry, HeldFreeIsWrittenBySyncAndAtTheEnd) {
  Recording rec("entry_sync.gmt", 60000000000ull);  // no periodic flush within the test
  std::atomic<int> step{0};
  std::thread t([&] {
    Feed(Te(REC_TE_FREE_REQUESTED, 1, 0x2000, 9, 1024));
    step = 1;
    while (step.load() != 2) usleep(1000);
    Feed(Te(REC_TE_FREE_REQUESTED, 1, 0x3000, 9, 1024));  // held when the recording stops
    step = 3;
    while (step.load() != 4) usleep(1000);
  });
  while (step.load() != 1) usleep(1000);
  EXPECT_EQ(rec_core_sync(rec.core, 5000000000ull), 1);
  EXPECT_EQ(rec.Stats().written, 1u) << "a sync writes what a thread holds";
  step = 2;
  while (step.load() != 3) usleep(1000);
  EXPECT_EQ(rec_core_stop(rec.core), GM_OK);
  step = 4;
  t.join();
  auto evs = rec.Finish();
  ASSERT_EQ(evs.size(), 2u);
  EXPECT_EQ(evs[0].addr, 0x2000u);
  EXPECT_EQ(evs[1].addr, 0x3000u);
}

TEST(TorchEntry, HeldFreeIsPushedWhenItsThreadEnds) {
  Recording rec("entry_threads.gmt");  // 200 threads one after another: slots reused
  for (int i = 0; i < 200; i++) {
    std::thread t([i] {
      Feed(Te(REC_TE_ALLOC, 0, 0x10000 + 0x100 * (uint64_t)i, 3, 256));
      Feed(Te(REC_TE_FREE_REQUESTED, 0, 0x10000 + 0x100 * (uint64_t)i, 3, 256));  // held at exit
    });
    t.join();
  }
  auto evs = rec.Finish();
  ASSERT_EQ(evs.size(), 400u) << "each thread's held free_requested was pushed at its end";
  size_t req = 0;
  for (const gmt_event_t &e : evs) req += e.kind == GMT_EV_FREE_REQUESTED;
  EXPECT_EQ(req, 200u);
}

}  // namespace
