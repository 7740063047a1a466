// rec_core_test.cc: the CUDA-free recorder core, fed with synthetic CUPTI records built here
// (the CUDA headers are on the CI machine; no GPU, no libcupti), read back with the trace reader.
#include <cuda.h>
#include <cupti.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "formats/gmt_testutil.h"

extern "C" {
#include "formats/gmt.h"
#include "recorder/cupti_callback.h"
#include "recorder/cupti_convert.h"
#include "recorder/rec_core.h"
#include "recorder/rec_summary.h"
}

using gmt_test::Ev;

namespace {

std::string TmpPath(const char *name) {
  const char *d = getenv("TEST_TMPDIR");
  return std::string(d ? d : "/tmp") + "/" + name;
}

CUpti_ActivityMemory4 Mem(int op, int kind, uint64_t addr, uint64_t bytes, uint64_t ts,
                          uint32_t stream, int async) {
  CUpti_ActivityMemory4 m;
  memset(&m, 0, sizeof m);
  m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  m.memoryOperationType = (CUpti_ActivityMemoryOperationType)op;
  m.memoryKind = (CUpti_ActivityMemoryKind)kind;
  m.address = addr;
  m.bytes = bytes;
  m.timestamp = ts;
  m.streamId = async ? stream : CUPTI_INVALID_STREAM_ID;
  m.isAsync = async;
  m.deviceId = 1;
  m.contextId = 7;
  m.correlationId = 42;
  return m;
}

std::vector<gmt_event_t> ReadAll(const std::string &path, gmt_reader_stats_t *st = nullptr) {
  gmt_reader_t *r;
  gm_err_t err;
  gm_err_clear(&err);
  EXPECT_EQ(gmt_reader_open(&r, path.c_str(), &err), GM_OK) << err.msg;
  std::vector<gmt_event_t> out;
  gmt_event_t ev;
  gm_status_t s;
  while ((s = gmt_reader_next(r, &ev, &err)) == GM_OK) out.push_back(ev);
  EXPECT_EQ(s, GM_END) << err.msg;
  if (st) *st = *gmt_reader_stats(r);
  gmt_reader_close(r);
  return out;
}

struct FakeClock {
  std::atomic<uint64_t> now{0};
  std::atomic<int> ticks{0};
  std::atomic<int> warned{0};
  std::string warning;
};

uint64_t FakeNow(void *ctx) { return static_cast<FakeClock *>(ctx)->now.load(); }
void FakeTick(void *ctx) { static_cast<FakeClock *>(ctx)->ticks++; }
void FakeWarn(void *ctx, const char *msg) {
  auto *c = static_cast<FakeClock *>(ctx);
  c->warning = msg; // before the count the test thread waits on (it then reads the text)
  c->warned++;
}
void FakeFill(void *, gmt_header_t *h) { gmt_header_set(&h->gpu_name, "Fake GPU", nullptr); }

rec_config_t Config(const std::string &path) {
  rec_config_t cfg;
  memset(&cfg, 0, sizeof cfg);
  gmt_header_init(&cfg.header);
  cfg.path = path.c_str();
  cfg.flush_interval_ns = 20000000ull;  // 20 ms: quick tests
  cfg.open_after_ns = 1;
  return cfg;
}

// The hooks of a fake source on clk, its warnings kept there. now: the core reads clk's time
// (else it has no clock: it writes what it holds); tick: the source's periodic hand-over of its
// records is counted (the callback capture has none).
rec_hooks_t Hooks(FakeClock *clk, bool now, bool tick) {
  rec_hooks_t hooks = {};
  hooks.ctx = clk;
  hooks.warn = FakeWarn;
  if (now) hooks.now_ns = FakeNow;
  if (tick) hooks.tick = FakeTick;
  return hooks;
}

// A core started on cfg with hooks (nullptr: none); cfg's header freed (the core has a copy).
rec_core_t *Start(rec_config_t *cfg, const rec_hooks_t *hooks) {
  rec_core_t *c = nullptr;
  gm_err_t err;
  gm_err_clear(&err);
  EXPECT_EQ(rec_core_start(&c, cfg, hooks, &err), GM_OK) << err.msg;
  gmt_header_free(&cfg->header);
  return c;
}

TEST(CuptiConvert, MemoryRecordsKeepEveryField) {
  CUpti_ActivityMemory4 a = Mem(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION,
                                CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0x7000, 4096, 1500, 13, 1);
  a.memoryPoolConfig.address = 0x99;
  gmt_event_t ev;
  ASSERT_EQ(rec_cupti_convert(&a, 1000, &ev), 1);
  EXPECT_EQ(ev.kind, GMT_EV_ALLOC);
  EXPECT_EQ(ev.ts_ns, 500u);
  EXPECT_EQ(ev.addr, 0x7000u);
  EXPECT_EQ(ev.size, 4096u);
  EXPECT_EQ(ev.stream, 13u);
  EXPECT_EQ(ev.flags, GMT_F_ASYNC | GMT_F_FROM_POOL);
  EXPECT_EQ(ev.device, 1);
  EXPECT_EQ(ev.context, 7u);
  EXPECT_EQ(ev.corr_id, 42u);
  EXPECT_EQ(ev.mem_kind, GMT_MEM_DEVICE);

  CUpti_ActivityMemory4 f = Mem(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE,
                                CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0x7000, 4096, 900, 5, 0);
  ASSERT_EQ(rec_cupti_convert(&f, 1000, &ev), 1);
  EXPECT_EQ(ev.kind, GMT_EV_FREE);
  EXPECT_EQ(ev.ts_ns, 0u);  // before the trace's start: clamped
  EXPECT_EQ(ev.stream, GMT_STREAM_NONE);  // synchronous: CUPTI's stream id is meaningless
  EXPECT_EQ(ev.flags, 0u);

  CUpti_ActivityMemory4 s = Mem(CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION,
                                CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC, 0x10, 15, 1000, 0, 0);
  ASSERT_EQ(rec_cupti_convert(&s, 0, &ev), 1);
  EXPECT_EQ(ev.mem_kind, GMT_MEM_DEVICE_STATIC);
  s.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
  ASSERT_EQ(rec_cupti_convert(&s, 0, &ev), 1);
  EXPECT_EQ(ev.mem_kind, GMT_MEM_PINNED);
  s.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_MANAGED;
  ASSERT_EQ(rec_cupti_convert(&s, 0, &ev), 1);
  EXPECT_EQ(ev.mem_kind, GMT_MEM_MANAGED);

  s.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_INVALID;
  EXPECT_EQ(rec_cupti_convert(&s, 0, &ev), 0);
}

TEST(CuptiConvert, PoolRecordsAndOtherKinds) {
  CUpti_ActivityMemoryPool3 p;
  memset(&p, 0, sizeof p);
  p.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
  p.memoryPoolOperationType = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED;
  p.address = 0xabc;
  p.minBytesToKeep = 1 << 20;
  p.size = 64 << 20;
  p.timestamp = 2000;
  p.deviceId = 3;
  gmt_event_t ev;
  ASSERT_EQ(rec_cupti_convert(&p, 1000, &ev), 1);
  EXPECT_EQ(ev.kind, GMT_EV_POOL_TRIM);
  EXPECT_EQ(ev.size, 1u << 20);  // what the trim keeps
  EXPECT_EQ(ev.addr, 0xabcu);
  EXPECT_EQ(ev.device, 3);
  EXPECT_EQ(ev.ts_ns, 1000u);
  p.memoryPoolOperationType = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED;
  ASSERT_EQ(rec_cupti_convert(&p, 0, &ev), 1);
  EXPECT_EQ(ev.kind, GMT_EV_POOL_CREATE);
  EXPECT_EQ(ev.size, 64u << 20);
  p.memoryPoolOperationType = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED;
  ASSERT_EQ(rec_cupti_convert(&p, 0, &ev), 1);
  EXPECT_EQ(ev.kind, GMT_EV_POOL_DESTROY);

  CUpti_ActivityKernel9 k;
  memset(&k, 0, sizeof k);
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  EXPECT_EQ(rec_cupti_convert(&k, 0, &ev), 0);
}

TEST(RecRing, FifoAndFull) {
  rec_ring_t *r;
  ASSERT_EQ(rec_ring_create(&r, 3, nullptr), GM_OK);
  EXPECT_EQ(rec_ring_capacity(r), 4u);
  gmt_event_t ev;
  memset(&ev, 0, sizeof ev);
  for (int i = 0; i < 4; i++) {
    ev.addr = i;
    EXPECT_EQ(rec_ring_push(r, &ev), 0);
  }
  EXPECT_EQ(rec_ring_push(r, &ev), -1);
  gmt_event_t out[8];
  ASSERT_EQ(rec_ring_pop(r, out, 2), 2u);
  EXPECT_EQ(out[0].addr, 0u);
  EXPECT_EQ(out[1].addr, 1u);
  ev.addr = 9;
  EXPECT_EQ(rec_ring_push(r, &ev), 0);
  ASSERT_EQ(rec_ring_pop(r, out, 8), 3u);
  EXPECT_EQ(out[2].addr, 9u);
  EXPECT_EQ(rec_ring_pop(r, out, 8), 0u);
  rec_ring_destroy(r);
}

TEST(RecRing, ManyProducersLoseNothing) {
  rec_ring_t *r;
  ASSERT_EQ(rec_ring_create(&r, 1024, nullptr), GM_OK);
  const int kThreads = 4, kPer = 20000;
  std::atomic<bool> done{false};
  std::vector<int> seen(kThreads * kPer, 0);
  std::thread consumer([&] {
    gmt_event_t out[64];
    size_t got = 0;
    while (got < (size_t)kThreads * kPer) {
      size_t n = rec_ring_pop(r, out, 64);
      for (size_t i = 0; i < n; i++) seen[out[i].addr]++;
      got += n;
      if (!n) std::this_thread::yield();
    }
    done = true;
  });
  std::vector<std::thread> prod;
  for (int t = 0; t < kThreads; t++)
    prod.emplace_back([&, t] {
      gmt_event_t ev;
      memset(&ev, 0, sizeof ev);
      for (int i = 0; i < kPer; i++) {
        ev.addr = (uint64_t)t * kPer + i;
        while (rec_ring_push(r, &ev) < 0) std::this_thread::yield();
      }
    });
  for (auto &p : prod) p.join();
  consumer.join();
  for (int v : seen) ASSERT_EQ(v, 1);
  rec_ring_destroy(r);
}

// Synthetic CUPTI records -> conversion -> core (writer thread) -> file -> reader.
TEST(RecCore, SyntheticRecordsRoundTripInTimestampOrder) {
  std::string path = TmpPath("core_roundtrip.zst");
  FakeClock clk;
  rec_hooks_t hooks = Hooks(&clk, true, true);
  hooks.fill_header = FakeFill;
  rec_config_t cfg = Config(path);
  cfg.header.pid = 4242;
  cfg.header.capture_mode = GMT_CAPTURE_REQUESTS;
  rec_core_t *c = Start(&cfg, &hooks);
  ASSERT_NE(c, nullptr);
  rec_core_gpu_ready(c);
  // CUPTI delivers late batches while callbacks push at once: push out of order.
  const uint64_t t0 = 1000000;
  std::vector<CUpti_ActivityMemory4> recs = {
      Mem(1, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0xa000, 512, t0 + 30, 13, 1),
      Mem(1, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0xb000, 1 << 20, t0 + 10, CUPTI_INVALID_STREAM_ID, 0),
      Mem(2, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0xa000, 512, t0 + 50, 13, 1),
      Mem(2, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 0xb000, 1 << 20, t0 + 40, 0, 0),
  };
  std::vector<gmt_event_t> evs;
  for (auto &m : recs) {
    gmt_event_t ev;
    ASSERT_EQ(rec_cupti_convert(&m, t0, &ev), 1);
    evs.push_back(ev);
  }
  EXPECT_EQ(rec_core_push_batch(c, evs.data(), evs.size(), 0), 0u);
  gmt_event_t oom;
  memset(&oom, 0, sizeof oom);
  oom.kind = GMT_EV_ALLOC_FAILED;
  oom.ts_ns = 20;
  oom.size = 1ull << 50;
  oom.stream = GMT_STREAM_NONE;
  EXPECT_EQ(rec_core_push(c, &oom), 0);
  rec_core_add_dropped(c, 3);
  clk.now = 1000000000;
  ASSERT_EQ(rec_core_stop(c), GM_OK);
  rec_core_stats_t st;
  rec_core_stats(c, &st);
  EXPECT_EQ(st.pushed, 5u);
  EXPECT_EQ(st.written, 5u);
  EXPECT_TRUE(st.closed);
  rec_core_destroy(c);
  EXPECT_EQ(clk.warned, 0);

  gmt_reader_stats_t rs;
  auto got = ReadAll(path, &rs);
  ASSERT_EQ(got.size(), 5u);
  const uint64_t want_ts[] = {10, 20, 30, 40, 50};
  const unsigned want_kind[] = {GMT_EV_ALLOC, GMT_EV_ALLOC_FAILED, GMT_EV_ALLOC, GMT_EV_FREE,
                                GMT_EV_FREE};
  for (size_t i = 0; i < got.size(); i++) {
    EXPECT_EQ(got[i].ts_ns, want_ts[i]) << i;
    EXPECT_EQ(got[i].kind, want_kind[i]) << i;
  }
  EXPECT_EQ(got[0].addr, 0xb000u);
  EXPECT_EQ(got[0].stream, GMT_STREAM_NONE);
  EXPECT_EQ(got[1].size, 1ull << 50);
  EXPECT_EQ(got[2].stream, 13u);
  EXPECT_EQ(got[2].flags, GMT_F_ASYNC);
  EXPECT_EQ(got[4].addr, 0xa000u);
  EXPECT_EQ(rs.dropped, 3u);
  EXPECT_FALSE(rs.truncated);

  gmt_reader_t *r;
  gm_err_t err;
  ASSERT_EQ(gmt_reader_open(&r, path.c_str(), &err), GM_OK);
  const gmt_header_t *h = gmt_reader_header(r);
  EXPECT_EQ(h->pid, 4242u);
  EXPECT_EQ(h->capture_mode, (uint32_t)GMT_CAPTURE_REQUESTS);
  ASSERT_NE(h->gpu_name, nullptr);
  EXPECT_STREQ(h->gpu_name, "Fake GPU");  // filled by the source just before the file opened
  gmt_reader_close(r);

  rec_summary_t sum;
  ASSERT_EQ(rec_summary_read(path.c_str(), &sum, &err), GM_OK) << err.msg;
  EXPECT_EQ(sum.events, 5u);
  EXPECT_EQ(sum.peak_live, (1u << 20) + 512u);  // both live between ts 30 and 40
  EXPECT_EQ(sum.dropped, 3u);
  EXPECT_EQ(sum.by_kind[GMT_EV_ALLOC_FAILED], 1u);
}

// Events the source has not handed over yet stay back: the writer only writes what is older
// than the source's clock (minus a margin) at each tick, and everything at stop.
TEST(RecCore, HoldsEventsNewerThanTheHorizonUntilStop) {
  std::string path = TmpPath("core_horizon.zst");
  FakeClock clk;
  clk.now = 100000000;  // 100 ms
  rec_hooks_t hooks = Hooks(&clk, true, true);
  rec_config_t cfg = Config(path);
  rec_core_t *c = Start(&cfg, &hooks);
  ASSERT_NE(c, nullptr);
  gmt_event_t ev = Ev(GMT_EV_ALLOC, 1000, 0, 0);  // old: written at the next tick
  rec_core_push(c, &ev);
  ev.ts_ns = 95000000;  // within the 10 ms margin of the horizon: held back
  rec_core_push(c, &ev);
  for (int i = 0; i < 200 && clk.ticks < 3; i++) usleep(10000);
  ASSERT_GE(clk.ticks, 3);
  rec_core_stats_t st;
  rec_core_stats(c, &st);
  EXPECT_EQ(st.written, 1u);
  ASSERT_EQ(rec_core_stop(c), GM_OK);
  rec_core_stats(c, &st);
  EXPECT_EQ(st.written, 2u);
  rec_core_destroy(c);
  EXPECT_EQ(ReadAll(path).size(), 2u);
}

// A chunk reaches the disk within a flush interval, so a killed process leaves a readable file.
TEST(RecCore, FlushedChunksAreReadableBeforeStop) {
  std::string path = TmpPath("core_live.zst");
  rec_config_t cfg = Config(path);
  rec_core_t *c = Start(&cfg, nullptr);
  ASSERT_NE(c, nullptr);
  gmt_event_t ev = Ev(GMT_EV_ALLOC, 0, 0, 0);
  for (int i = 0; i < 100; i++) {
    ev.ts_ns = i;
    ev.addr = 0x1000 * i;
    rec_core_push(c, &ev);
  }
  gmt_reader_stats_t rs;
  memset(&rs, 0, sizeof rs);
  std::vector<gmt_event_t> got;
  for (int i = 0; i < 100 && got.size() < 100; i++) {
    usleep(20000);
    struct stat sb;
    if (stat(path.c_str(), &sb) == 0 && sb.st_size > 0) got = ReadAll(path, &rs);
  }
  EXPECT_EQ(got.size(), 100u);
  EXPECT_TRUE(rs.truncated);  // no index yet: what a SIGKILL leaves
  rec_core_destroy(c);
  ReadAll(path, &rs);
  EXPECT_FALSE(rs.truncated);
}

TEST(RecCore, NoContextNoEventsNoFile) {
  std::string path = TmpPath("core_nothing.zst");
  unlink(path.c_str());
  rec_config_t cfg = Config(path);
  rec_core_t *c = Start(&cfg, nullptr);
  ASSERT_NE(c, nullptr);
  usleep(50000);
  ASSERT_EQ(rec_core_stop(c), GM_OK);
  rec_core_destroy(c);
  struct stat sb;
  EXPECT_NE(stat(path.c_str(), &sb), 0);  // torchrun's agent: CUDA loaded, nothing done
}

TEST(RecCore, ContextWithoutEventsLeavesEmptyTrace) {
  std::string path = TmpPath("core_empty.zst");
  rec_config_t cfg = Config(path);
  rec_core_t *c = Start(&cfg, nullptr);
  ASSERT_NE(c, nullptr);
  rec_core_gpu_ready(c);
  ASSERT_EQ(rec_core_stop(c), GM_OK);
  rec_core_destroy(c);
  gmt_reader_stats_t rs;
  EXPECT_EQ(ReadAll(path, &rs).size(), 0u);
  EXPECT_FALSE(rs.truncated);
}

TEST(RecCore, UnwritablePathWarnsOnceAndDropsEvents) {
  FakeClock clk;
  rec_hooks_t hooks = Hooks(&clk, false, false);
  std::string path = "/nonexistent-dir/x.zst";
  rec_config_t cfg = Config(path);
  rec_core_t *c = Start(&cfg, &hooks);
  ASSERT_NE(c, nullptr);
  rec_core_gpu_ready(c);
  gmt_event_t ev = Ev(GMT_EV_ALLOC, 0, 0, 0);
  for (int i = 0; i < 200 && !clk.warned; i++) usleep(5000);
  EXPECT_EQ(clk.warned, 1);
  EXPECT_NE(clk.warning.find("recording stopped"), std::string::npos) << clk.warning;
  EXPECT_EQ(rec_core_push(c, &ev), -1);
  EXPECT_EQ(rec_core_stop(c), GM_ERR_IO);
  EXPECT_EQ(clk.warned, 1);
  rec_core_destroy(c);
}

std::vector<gmt_event_t> RunCore(const std::string &path, int fill, std::vector<gmt_event_t> evs);

gmt_coverage_t CoverageOf(const std::string &path, gmt_reader_stats_t *st = nullptr) {
  gmt_reader_t *r;
  gm_err_t err;
  gm_err_clear(&err);
  gmt_coverage_t c;
  memset(&c, 0, sizeof c);
  EXPECT_EQ(gmt_reader_open(&r, path.c_str(), &err), GM_OK) << err.msg;
  if (!r) return c;
  gmt_event_t ev;
  while (gmt_reader_next(r, &ev, &err) == GM_OK) {
  }
  gmt_coverage(gmt_reader_header(r), gmt_reader_stats(r), &c);
  if (st) *st = *gmt_reader_stats(r);
  gmt_reader_close(r);
  return c;
}

// A failing source (or a full disk) stops the recording; the application runs on, and the file
// keeps its chunks and says in its header where and why it stops (issue 24, SPEC.md §3.4).
TEST(RecCore, SourceFailureMarksWhereTheTraceStops) {
  std::string path = TmpPath("core_fail.zst");
  FakeClock clk;
  rec_hooks_t hooks = Hooks(&clk, false, false);
  rec_config_t cfg = Config(path);
  rec_core_t *c = Start(&cfg, &hooks);
  ASSERT_NE(c, nullptr);
  gmt_event_t ev = Ev(GMT_EV_ALLOC, 777, 0, 0);
  rec_core_push(c, &ev);
  for (int i = 0; i < 100; i++) {
    rec_core_stats_t st;
    rec_core_stats(c, &st);
    if (st.written == 1 && st.file_bytes > 0) break;
    usleep(10000);
  }
  rec_core_fail(c, "CUPTI stopped");
  for (int i = 0; i < 200 && !clk.warned; i++) usleep(5000);
  EXPECT_EQ(clk.warning.rfind("CUPTI stopped; the trace keeps its first 1 events", 0), 0u) << clk.warning;
  EXPECT_EQ(rec_core_push(c, &ev), -1);
  rec_core_destroy(c);
  gmt_reader_stats_t rs;
  auto got = ReadAll(path, &rs);
  EXPECT_EQ(got.size(), 1u);
  gmt_coverage_t cov = CoverageOf(path);
  EXPECT_TRUE(cov.partial);
  EXPECT_EQ(cov.why, GMT_COV_STOPPED);
  EXPECT_STREQ(cov.stopped, "CUPTI stopped");
  ASSERT_TRUE(cov.has_end);
  EXPECT_EQ(cov.to_event, 1u);
  EXPECT_EQ(cov.to_ns, 777u);
}

// What the recording knows it missed is in the header at close: frees of addresses it never saw
// allocated (it began after the process allocated), records dropped. PyTorch's streamed blocks
// are not driver allocations and never count.
TEST(RecCore, CloseMarksFreesNeverSeenAllocated) {
  gmt_event_t torch_free = Ev(GMT_EV_FREE, 70, 0xc000, 512);
  torch_free.flags = GMT_F_TORCH_STREAM;
  std::vector<gmt_event_t> evs = {
      Ev(GMT_EV_ALLOC, 10, 0xa000, 512),
      Ev(GMT_EV_FREE, 20, 0xa000, 0).Mem(GMT_MEM_UNKNOWN),
      Ev(GMT_EV_FREE, 30, 0xb000, 0).Mem(GMT_MEM_UNKNOWN),  // allocated before the recording
      Ev(GMT_EV_FREE, 40, 0xb100, 0).Mem(GMT_MEM_UNKNOWN),
      torch_free,
  };
  const std::string path = TmpPath("unseen_frees.zst");
  ASSERT_EQ(RunCore(path, 1, evs).size(), 5u);
  gmt_coverage_t cov = CoverageOf(path);
  EXPECT_TRUE(cov.partial);
  EXPECT_EQ(cov.why, GMT_COV_LATE_START);
  EXPECT_EQ(cov.unseen_frees, 2u);
  char line[1024];
  EXPECT_NE(std::string(gmt_coverage_text(&cov, line, sizeof line)).find("2 frees of addresses it never saw allocated"),
            std::string::npos) << line;

  const std::string whole = TmpPath("seen_frees.zst");
  ASSERT_EQ(RunCore(whole, 1, {evs[0], evs[1], torch_free}).size(), 3u);
  cov = CoverageOf(whole);
  EXPECT_FALSE(cov.partial);
}

// rec_core_sync (a Python that finalized and dies of SIGINT): everything pushed is in the file
// at once, the trace left open.
TEST(RecCore, SyncWritesEverythingWithoutClosing) {
  FakeClock clk;
  rec_hooks_t hooks = Hooks(&clk, true, false);
  const std::string path = TmpPath("sync.zst");
  rec_config_t cfg = Config(path);
  cfg.flush_interval_ns = 60ull * 1000000000ull;  // no periodic flush within this test
  rec_core_t *c = Start(&cfg, &hooks);
  ASSERT_NE(c, nullptr);
  rec_core_gpu_ready(c);
  clk.now = 1000;
  for (int i = 0; i < 100; i++) {
    gmt_event_t ev = Ev(GMT_EV_ALLOC, 900 + i, 0x1000 + 64 * i, 64);
    ASSERT_EQ(rec_core_push(c, &ev), 0);
  }
  EXPECT_EQ(rec_core_sync(c, 5000000000ull), 1);
  gmt_reader_stats_t rs;
  EXPECT_EQ(ReadAll(path, &rs).size(), 100u);  // the newest too (horizon without its margin)
  EXPECT_TRUE(rs.truncated);
  rec_core_destroy(c);
  EXPECT_EQ(ReadAll(path, &rs).size(), 100u);
  EXPECT_FALSE(rs.truncated);
}

// The flush bounds what a SIGKILL loses: with threads pushing as fast as they can (a ring that
// never empties), the file still holds every event older than about one flush interval (the
// issue's bound: 1 s; the interval is 0.5 s).
TEST(RecCore, BusyRingStillFlushesWithinTheInterval) {
  const std::string path = TmpPath("busy.zst");
  rec_hooks_t hooks = {};
  hooks.now_ns = [](void *) -> uint64_t {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
  };
  rec_config_t cfg = Config(path);
  cfg.flush_interval_ns = REC_FLUSH_INTERVAL_NS;
  cfg.ring_events = 4096;
  rec_core_t *c = Start(&cfg, &hooks);
  ASSERT_NE(c, nullptr);
  rec_core_gpu_ready(c);
  std::atomic<int> stop{0};
  std::vector<std::thread> producers;
  for (int t = 0; t < 2; t++)
    producers.emplace_back([&, t] {
      uint64_t i = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        gmt_event_t ev = Ev(GMT_EV_ALLOC, hooks.now_ns(nullptr), 0x100000ull * (t + 1) + 64 * (i++ % 4096), 64);
        rec_core_push(c, &ev);
      }
    });
  usleep(2000000);
  const uint64_t at = hooks.now_ns(nullptr);
  // a copy of the file as it is now: what a SIGKILL at `at` would leave
  const std::string snap = TmpPath("busy_snapshot.zst");
  ASSERT_EQ(system(("cp " + path + " " + snap).c_str()), 0);
  stop = 1;
  for (auto &p : producers) p.join();
  gmt_reader_t *r;
  ASSERT_EQ(gmt_reader_open_flags(&r, snap.c_str(), GMT_READ_SALVAGE, nullptr), GM_OK);
  gmt_event_t ev;
  uint64_t last = 0, n = 0;
  while (gmt_reader_next(r, &ev, nullptr) == GM_OK) last = ev.ts_ns, n++;
  gmt_reader_close(r);
  ASSERT_GT(n, 0u);
  EXPECT_GE(last + 1000000000ull, at) << "the file's newest event is " << (at - last) / 1000000 << " ms old";
  rec_core_destroy(c);
}

TEST(RecProv, TraceNamesCarryRankAndPid) {
  char out[256];
  ASSERT_EQ(rec_trace_name("run.zst", 0, 123, out, sizeof out, nullptr), GM_OK);
  EXPECT_STREQ(out, "run.rank0.pid123.zst");
  ASSERT_EQ(rec_trace_name("/d/run-%p.zst", -1, 77, out, sizeof out, nullptr), GM_OK);
  EXPECT_STREQ(out, "/d/run-77.pid77.zst");
  ASSERT_EQ(rec_trace_name("noext", 3, 5, out, sizeof out, nullptr), GM_OK);
  EXPECT_STREQ(out, "noext.rank3.pid5.zst");
  ASSERT_EQ(rec_trace_name_tag("run.zst", "torch", 1, 9, out, sizeof out, nullptr), GM_OK);
  EXPECT_STREQ(out, "run.torch.rank1.pid9.zst");
  EXPECT_EQ(rec_trace_name("run.zst", 0, 1, out, 8, nullptr), GM_ERR_INVAL);
}

TEST(RecProv, HeaderHasRankCommandLineAndAllocatorEnv) {
  setenv("RANK", "3", 1);
  setenv("WORLD_SIZE", "8", 1);
  setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True", 1);
  setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", ".5", 1);
  setenv("UNRELATED_VAR", "x", 1);
  gmt_header_t h;
  gmt_header_init(&h);
  ASSERT_EQ(rec_prov_fill(&h, GMT_CAPTURE_NATIVE, nullptr), GM_OK);
  EXPECT_EQ(h.rank, 3);
  EXPECT_EQ(h.world_size, 8);
  EXPECT_EQ(h.pid, (uint32_t)getpid());
  EXPECT_EQ(h.capture_mode, (uint32_t)GMT_CAPTURE_NATIVE);
  EXPECT_GT(h.start_time_ns, 1600000000ull * 1000000000ull);
  ASSERT_NE(h.command_line, nullptr);
  EXPECT_NE(std::string(h.command_line).find("rec_core_test"), std::string::npos);
  ASSERT_NE(gmt_header_kv_get(&h, "PYTORCH_CUDA_ALLOC_CONF"), nullptr);
  EXPECT_STREQ(gmt_header_kv_get(&h, "PYTORCH_CUDA_ALLOC_CONF"), "expandable_segments:True");
  EXPECT_STREQ(gmt_header_kv_get(&h, "XLA_PYTHON_CLIENT_MEM_FRACTION"), ".5");
  EXPECT_EQ(gmt_header_kv_get(&h, "UNRELATED_VAR"), nullptr);
  gmt_header_free(&h);
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
}

// ---- the callback capture: synthetic driver-API parameter structs --------------------------

TEST(CuptiCallback, AllocationsReadTheReturnedPointerAndSize) {
  gmt_event_t ev;
  rec_cb_need_t need;
  CUdeviceptr ptr = 0x7f00001000;
  cuMemAlloc_v2_params a = {&ptr, 4096};
  ASSERT_EQ(rec_cb_convert(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &a, CUDA_SUCCESS, 0, &ev, &need), 1);
  EXPECT_EQ(ev.kind, GMT_EV_ALLOC);
  EXPECT_EQ(ev.addr, 0x7f00001000u);
  EXPECT_EQ(ev.size, 4096u);
  EXPECT_EQ(ev.stream, GMT_STREAM_NONE);
  EXPECT_EQ(ev.mem_kind, GMT_MEM_DEVICE);
  EXPECT_EQ(ev.flags, 0u);
  EXPECT_EQ(need.has_stream, 0);
  // activity capture: MEMORY2 has the success, the callback only the failure
  EXPECT_EQ(rec_cb_convert(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &a, CUDA_SUCCESS, 1, &ev, &need), 0);

  // a failure: the size asked for, no address (the out-pointer is not read)
  cuMemAlloc_v2_params big = {nullptr, 1ull << 50};
  ASSERT_EQ(rec_cb_convert(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &big, CUDA_ERROR_OUT_OF_MEMORY, 0,
                           &ev, &need), 1);
  EXPECT_EQ(ev.kind, GMT_EV_ALLOC_FAILED);
  EXPECT_EQ(ev.size, 1ull << 50);
  EXPECT_EQ(ev.addr, 0u);
  ASSERT_EQ(rec_cb_convert(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &big, CUDA_ERROR_OUT_OF_MEMORY, 1,
                           &ev, &need), 1);
  EXPECT_EQ(ev.kind, GMT_EV_ALLOC_FAILED);
  // other errors are no OOM (the runtime retries some driver calls inside one success)
  EXPECT_EQ(rec_cb_convert(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &big, CUDA_ERROR_INVALID_VALUE, 0,
                           &ev, &need), 0);
  cuMemAllocAsync_params bad = {nullptr, 64, nullptr};
  EXPECT_EQ(rec_cb_convert(CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync, &bad, CUDA_ERROR_NOT_SUPPORTED, 0,
                           &ev, &need), 0);

  cuMemAllocManaged_params m = {&ptr, 100, 1};
  ASSERT_EQ(rec_cb_convert(CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged, &m, CUDA_SUCCESS, 0, &ev, &need), 1);
  EXPECT_EQ(ev.mem_kind, GMT_MEM_MANAGED);
  EXPECT_EQ(ev.size, 100u);

  void *host = reinterpret_cast<void *>(0x5000);
  cuMemAllocHost_v2_params h = {&host, 64};
  ASSERT_EQ(rec_cb_convert(CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2, &h, CUDA_SUCCESS, 0, &ev, &need), 1);
  EXPECT_EQ(ev.mem_kind, GMT_MEM_PINNED);
  EXPECT_EQ(ev.addr, 0x5000u);
  cuMemHostAlloc_params ha = {&host, 96, 0};
  ASSERT_EQ(rec_cb_convert(CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc, &ha, CUDA_SUCCESS, 0, &ev, &need), 1);
  EXPECT_EQ(ev.mem_kind, GMT_MEM_PINNED);
  EXPECT_EQ(ev.size, 96u);

  size_t pitch = 512;
  cuMemAllocPitch_v2_params pp = {&ptr, &pitch, 500, 10, 4};
  ASSERT_EQ(rec_cb_convert(CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2, &pp, CUDA_SUCCESS, 0, &ev, &need), 1);
  EXPECT_EQ(ev.size, 5120u);  // the pitch the driver chose x height
  ASSERT_EQ(rec_cb_convert(CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2, &pp, CUDA_ERROR_OUT_OF_MEMORY,
                           0, &ev, &need), 1);
  EXPECT_EQ(ev.size, 5000u);  // failed: width x height asked for
}

TEST(CuptiCallback, StreamOrderedCallsAskForTheirStream) {
  gmt_event_t ev;
  rec_cb_need_t need;
  CUdeviceptr ptr = 0x9000;
  CUstream s = reinterpret_cast<CUstream>(0x1234);
  cuMemAllocAsync_params a = {&ptr, 256, s};
  ASSERT_EQ(rec_cb_convert(CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync, &a, CUDA_SUCCESS, 0, &ev, &need), 1);
  EXPECT_EQ(ev.kind, GMT_EV_ALLOC);
  EXPECT_EQ(ev.flags, GMT_F_ASYNC | GMT_F_FROM_POOL);
  EXPECT_EQ(need.has_stream, 1);
  EXPECT_EQ(need.stream, (const void *)s);
  EXPECT_EQ(need.per_thread, 0);
  ASSERT_EQ(rec_cb_convert(CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz, &a, CUDA_SUCCESS, 0, &ev, &need), 1);
  EXPECT_EQ(need.per_thread, 1);
  ASSERT_EQ(rec_cb_convert(CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync, &a, CUDA_ERROR_OUT_OF_MEMORY, 0,
                           &ev, &need), 1);
  EXPECT_EQ(ev.kind, GMT_EV_ALLOC_FAILED);
  EXPECT_EQ(ev.size, 256u);
  EXPECT_EQ(need.has_stream, 1);  // a failed async request still names its stream

  cuMemAllocFromPoolAsync_params fp = {&ptr, 77, reinterpret_cast<CUmemoryPool>(0x88), s};
  ASSERT_EQ(rec_cb_convert(CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz, &fp, CUDA_SUCCESS, 0,
                           &ev, &need), 1);
  EXPECT_EQ(ev.size, 77u);
  EXPECT_EQ(need.stream, (const void *)s);
  EXPECT_EQ(need.per_thread, 1);

  cuMemFreeAsync_params f = {0x9000, s};
  ASSERT_EQ(rec_cb_convert(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync, &f, CUDA_SUCCESS, 0, &ev, &need), 1);
  EXPECT_EQ(ev.kind, GMT_EV_FREE);
  EXPECT_EQ(ev.addr, 0x9000u);
  EXPECT_EQ(ev.size, 0u);  // unknown at the call: the core fills it
  EXPECT_EQ(ev.flags, GMT_F_ASYNC | GMT_F_FROM_POOL);
  EXPECT_EQ(need.has_stream, 1);
  EXPECT_EQ(rec_cb_convert(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync, &f, CUDA_ERROR_INVALID_VALUE, 0,
                           &ev, &need), 0);
  EXPECT_EQ(rec_cb_convert(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync, &f, CUDA_SUCCESS, 1, &ev, &need), 0);
}

TEST(CuptiCallback, FreesVmmTrimsAndOthers) {
  gmt_event_t ev;
  rec_cb_need_t need;
  cuMemFree_v2_params f = {0xabc000};
  ASSERT_EQ(rec_cb_convert(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, &f, CUDA_SUCCESS, 0, &ev, &need), 1);
  EXPECT_EQ(ev.kind, GMT_EV_FREE);
  EXPECT_EQ(ev.mem_kind, GMT_MEM_UNKNOWN);  // device or managed: from the allocation
  cuMemFree_v2_params null_free = {0};
  EXPECT_EQ(rec_cb_convert(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, &null_free, CUDA_SUCCESS, 0, &ev, &need), 0);
  cuMemFreeHost_params fh = {reinterpret_cast<void *>(0x5000)};
  ASSERT_EQ(rec_cb_convert(CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost, &fh, CUDA_SUCCESS, 0, &ev, &need), 1);
  EXPECT_EQ(ev.mem_kind, GMT_MEM_PINNED);

  cuMemPoolTrimTo_params t = {reinterpret_cast<CUmemoryPool>(0x42), 1024};
  ASSERT_EQ(rec_cb_convert(CUPTI_DRIVER_TRACE_CBID_cuMemPoolTrimTo, &t, CUDA_SUCCESS, 0, &ev, &need), 1);
  EXPECT_EQ(ev.kind, GMT_EV_EMPTY_CACHE);
  EXPECT_EQ(ev.addr, 0x42u);
  EXPECT_EQ(ev.size, 1024u);

  CUdeviceptr va = 0x10000000;
  cuMemAddressReserve_params r = {&va, 1 << 21, 0, 0, 0};
  ASSERT_EQ(rec_cb_convert(CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve, &r, CUDA_SUCCESS, 1, &ev, &need), 1);
  EXPECT_EQ(ev.kind, GMT_EV_VMM_RESERVE);
  EXPECT_EQ(ev.addr, 0x10000000u);
  cuMemMap_params mp = {0x10000000, 1 << 21, 0, 0, 0};
  ASSERT_EQ(rec_cb_convert(CUPTI_DRIVER_TRACE_CBID_cuMemMap, &mp, CUDA_SUCCESS, 0, &ev, &need), 1);
  EXPECT_EQ(ev.kind, GMT_EV_VMM_MAP);
  EXPECT_EQ(ev.size, 1u << 21);
  EXPECT_EQ(need.vmm_map, 1);
  cuMemUnmap_params um = {0x10000000, 1 << 21};
  ASSERT_EQ(rec_cb_convert(CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, &um, CUDA_SUCCESS, 0, &ev, &need), 1);
  EXPECT_EQ(ev.kind, GMT_EV_VMM_UNMAP);
  cuMemAddressFree_params af = {0x10000000, 1 << 21};
  ASSERT_EQ(rec_cb_convert(CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree, &af, CUDA_SUCCESS, 0, &ev, &need), 1);
  EXPECT_EQ(ev.kind, GMT_EV_VMM_RELEASE);
  EXPECT_EQ(rec_cb_convert(CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree, &af, CUDA_ERROR_INVALID_VALUE, 0,
                           &ev, &need), 0);
  cuMemCreate_params cr = {nullptr, 1ull << 50, nullptr, 0};
  EXPECT_EQ(rec_cb_convert(CUPTI_DRIVER_TRACE_CBID_cuMemCreate, &cr, CUDA_SUCCESS, 0, &ev, &need), 0);
  ASSERT_EQ(rec_cb_convert(CUPTI_DRIVER_TRACE_CBID_cuMemCreate, &cr, CUDA_ERROR_OUT_OF_MEMORY, 0, &ev, &need), 1);
  EXPECT_EQ(ev.kind, GMT_EV_ALLOC_FAILED);
  EXPECT_EQ(ev.size, 1ull << 50);
  EXPECT_EQ(rec_cb_convert(CUPTI_DRIVER_TRACE_CBID_cuMemRelease, &cr, CUDA_SUCCESS, 0, &ev, &need), 0);
  EXPECT_EQ(rec_cb_convert(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &cr, CUDA_SUCCESS, 0, &ev, &need), 0);

  // every cbid the capture enables converts to something for some outcome
  for (unsigned i = 0; i < rec_cb_capture_ncbids; i++)
    EXPECT_NE(rec_cb_capture_cbids[i], (uint32_t)CUPTI_DRIVER_TRACE_CBID_cuMemRelease);
  EXPECT_GE(rec_cb_capture_ncbids, 19u);
}


std::vector<gmt_event_t> RunCore(const std::string &path, int fill, std::vector<gmt_event_t> evs) {
  FakeClock clk;
  rec_hooks_t hooks = Hooks(&clk, true, false);
  rec_config_t cfg = Config(path);
  cfg.fill_free_sizes = fill;
  rec_core_t *c = Start(&cfg, &hooks);
  if (!c) return {};
  rec_core_gpu_ready(c);
  for (auto &e : evs) EXPECT_EQ(rec_core_push(c, &e), 0);
  clk.now = 1000000000;
  EXPECT_EQ(rec_core_stop(c), GM_OK);
  rec_core_destroy(c);
  return ReadAll(path);
}

TEST(RecCore, FillsFreeSizesFromTheAllocationInTimestampOrder) {
  // pushed out of order (threads race to the ring); the sizes follow timestamp order
  std::vector<gmt_event_t> evs = {
      Ev(GMT_EV_FREE, 40, 0xa000, 0).Mem(GMT_MEM_UNKNOWN),         // frees the second 0xa000
      Ev(GMT_EV_ALLOC, 10, 0xa000, 512).Mem(GMT_MEM_MANAGED),
      Ev(GMT_EV_FREE, 20, 0xa000, 0).Mem(GMT_MEM_UNKNOWN),
      Ev(GMT_EV_ALLOC, 30, 0xa000, 2048),      // address reused, new size
      Ev(GMT_EV_FREE, 50, 0xdead, 0).Mem(GMT_MEM_UNKNOWN),         // never allocated: stays 0
      Ev(GMT_EV_FREE, 60, 0xa000, 0).Mem(GMT_MEM_UNKNOWN),         // double free: nothing live
  };
  auto got = RunCore(TmpPath("fill_sizes.zst"), 1, evs);
  ASSERT_EQ(got.size(), 6u);
  EXPECT_EQ(got[1].ts_ns, 20u);
  EXPECT_EQ(got[1].size, 512u);
  EXPECT_EQ(got[1].mem_kind, GMT_MEM_MANAGED);
  EXPECT_EQ(got[3].ts_ns, 40u);
  EXPECT_EQ(got[3].size, 2048u);
  EXPECT_EQ(got[3].mem_kind, GMT_MEM_DEVICE);
  EXPECT_EQ(got[4].size, 0u);
  EXPECT_EQ(got[5].size, 0u);

  auto raw = RunCore(TmpPath("nofill_sizes.zst"), 0, evs);
  ASSERT_EQ(raw.size(), 6u);
  EXPECT_EQ(raw[1].size, 0u);  // off: written as pushed
}

// DEVICE_USAGE: the source pushes the driver's count; the writer subtracts what the trace holds
// mapped on that device at the sample's time (in timestamp order, whatever the push order),
// and leaves out a count below it.
TEST(RecCore, DeviceUsageIsTheCountBeyondTheTracesMaps) {
  const uint64_t MiB = 1ull << 20;
  gmt_event_t u0 = Ev(GMT_EV_DEVICE_USAGE, 5, GMT_USAGE_PROCESS, 500 * MiB);
  gmt_event_t u1 = Ev(GMT_EV_DEVICE_USAGE, 60, GMT_USAGE_PROCESS, 700 * MiB);
  gmt_event_t u2 = Ev(GMT_EV_DEVICE_USAGE, 60, GMT_USAGE_DEVICE, 100 * MiB);  // < mapped
  gmt_event_t other = Ev(GMT_EV_DEVICE_USAGE, 60, GMT_USAGE_PROCESS, 450 * MiB);
  other.device = 1;  // nothing mapped on device 1
  gmt_event_t vmm = Ev(GMT_EV_VMM_MAP, 30, 0xb000, 32 * MiB);
  gmt_event_t pinned = Ev(GMT_EV_ALLOC, 35, 0xc000, 64 * MiB).Mem(GMT_MEM_PINNED);  // host memory
  std::vector<gmt_event_t> evs = {
      u1, u2, other,                                          // pushed first, stamped last
      Ev(GMT_EV_ALLOC, 10, 0xa000, 100 * MiB),
      Ev(GMT_EV_ALLOC, 20, 0xa800, 20 * MiB),
      vmm, pinned,
      Ev(GMT_EV_FREE, 40, 0xa800, 0).Mem(GMT_MEM_UNKNOWN),        // size filled: 20 MiB
      u0,
  };
  auto got = RunCore(TmpPath("device_usage.zst"), 1, evs);
  ASSERT_EQ(got.size(), 8u);  // u2 left out
  EXPECT_EQ(got[0].kind, GMT_EV_DEVICE_USAGE);
  EXPECT_EQ(got[0].size, 500 * MiB);  // at t=5 nothing was mapped
  EXPECT_EQ(got[6].kind, GMT_EV_DEVICE_USAGE);
  EXPECT_EQ(got[6].addr, GMT_USAGE_PROCESS);
  EXPECT_EQ(got[6].size, 700 * MiB - 100 * MiB - 32 * MiB);  // the 20 MiB block was freed
  EXPECT_EQ(got[7].device, 1);
  EXPECT_EQ(got[7].size, 450 * MiB);
}

TEST(RecCore, WithoutTickWritesEarlyWhenManyEventsWait) {
  // The callback capture has no tick hook: with many events waiting the writer must not hold
  // them for a whole flush interval (its ring would overflow at ~2 M events/s).
  FakeClock clk;
  rec_hooks_t hooks = Hooks(&clk, true, false);
  const std::string path = TmpPath("early_emit.zst");
  rec_config_t cfg = Config(path);
  cfg.flush_interval_ns = 60ull * 1000000000ull;  // never within this test
  cfg.fill_free_sizes = 1;
  rec_core_t *c = Start(&cfg, &hooks);
  ASSERT_NE(c, nullptr);
  rec_core_gpu_ready(c);
  clk.now = 10000000000ull;
  std::vector<gmt_event_t> evs;
  for (int i = 0; i < 50000; i++)
    evs.push_back(Ev(i % 2 ? GMT_EV_FREE : GMT_EV_ALLOC, 1000 + i, 0x1000 + (i / 2) * 64, i % 2 ? 0 : 64));
  EXPECT_EQ(rec_core_push_batch(c, evs.data(), evs.size(), 1000000000ull), 0u);
  rec_core_stats_t st = {};
  for (int i = 0; i < 500 && st.written == 0; i++) {
    usleep(10000);
    rec_core_stats(c, &st);
  }
  EXPECT_GE(st.written, 32768u);  // before any flush interval
  ASSERT_EQ(rec_core_stop(c), GM_OK);
  rec_core_destroy(c);
  auto got = ReadAll(path);
  ASSERT_EQ(got.size(), 50000u);
  for (size_t i = 1; i < got.size(); i += 2) ASSERT_EQ(got[i].size, 64u) << i;
}

#if REC_HAVE_TICKS
uint64_t MonoNow(void *) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

// Events stamped with the CPU's counter (REC_TS_TICKS), from three threads at once: the writer
// puts each on the clock where the clock read together with the counter says (reference: the
// clock read by the pushing thread right after its counter), each thread's in push order.
TEST(RecCore, CounterReadingsGoOntoTheClock) {
  rec_hooks_t hooks = {};
  hooks.now_ns = MonoNow;
  const std::string path = TmpPath("ticks.zst");
  rec_config_t cfg = Config(path);
  rec_core_t *c = Start(&cfg, &hooks);
  ASSERT_NE(c, nullptr);
  rec_core_gpu_ready(c);
  const int threads = 3, per = 20000;
  std::vector<std::vector<uint64_t>> when(threads);  // the clock right after each counter reading
  std::vector<std::thread> th;
  for (int t = 0; t < threads; t++)
    th.emplace_back([&, t] {
      for (int i = 0; i < per; i++) {
        gmt_event_t e = Ev(GMT_EV_ALLOC, 0, 0x100000u * (t + 1) + 64u * i, 64);
        e.ts_ns = __rdtsc() | REC_TS_TICKS;
        when[t].push_back(MonoNow(nullptr));
        e.stream = t;
        while (rec_core_push_entry(c, &e, 1000000000ull) < 0) {
        }
        if (i % 1000 == 0) usleep(2000);  // readings of both clocks between
      }
    });
  for (auto &x : th) x.join();
  rec_core_stats_t st;
  rec_core_stats(c, &st);
  EXPECT_EQ(st.bad_ticks, 0u);
  ASSERT_EQ(rec_core_stop(c), GM_OK);
  rec_core_destroy(c);
  auto got = ReadAll(path);
  ASSERT_EQ(got.size(), (size_t)threads * per);
  std::vector<size_t> next(threads);
  std::vector<int64_t> off;
  for (const gmt_event_t &e : got) {
    int t = (int)e.stream;
    size_t i = next[t]++;
    ASSERT_EQ(e.addr, 0x100000u * (t + 1) + 64u * i) << "thread " << t << ": in push order";
    off.push_back((int64_t)(when[t][i] - e.ts_ns));  // >= 0 up to the two clocks' reading error
  }
  std::sort(off.begin(), off.end());
  EXPECT_LT(std::llabs(off[off.size() / 2]), 2000) << "the median event within 2 us of the clock";
  EXPECT_GT(off[off.size() / 100], -2000) << "not after the moment its counter was read";
}

// A clock that goes back (its readings then not kept) is no fault of the producers' counter
// readings: they are clamped to the last reading kept, not counted as bad, and nothing is
// replaced.
TEST(RecCore, ACounterReadingPastAClockThatWentBackIsNotBad) {
  FakeClock clk;
  clk.now = 10000000000ull;
  rec_hooks_t hooks = Hooks(&clk, true, false);
  const std::string path = TmpPath("ticks_clock_back.zst");
  rec_config_t cfg = Config(path);
  rec_core_t *c = Start(&cfg, &hooks);
  ASSERT_NE(c, nullptr);
  rec_core_gpu_ready(c);
  clk.now = 5000000000ull;  // back by 5 s
  for (int i = 0; i < 100; i++) {
    gmt_event_t e = Ev(GMT_EV_ALLOC, 0, 0x1000u + 64u * i, 64);
    e.ts_ns = __rdtsc() | REC_TS_TICKS;
    ASSERT_EQ(rec_core_push_entry(c, &e, 1000000000ull), 0);
    if (i % 10 == 0) usleep(1000);
  }
  ASSERT_EQ(rec_core_stop(c), GM_OK);
  rec_core_stats_t st;
  rec_core_stats(c, &st);
  EXPECT_EQ(st.bad_ticks, 0u);
  rec_core_destroy(c);
  auto got = ReadAll(path);
  ASSERT_EQ(got.size(), 100u);
  for (size_t i = 0; i < got.size(); i++) {
    EXPECT_EQ(got[i].ts_ns, 10000000000ull) << "the last reading kept";
    EXPECT_EQ(got[i].addr, 0x1000u + 64u * i) << "in push order";
  }
}
#endif

}  // namespace

// gpurec's end-of-run summary reads a trace back with formats' gmt_owners, the definition
// `gpuanalyze info` prints (issue 17 item 3: they printed 6.31 vs 5.55 GiB). On the recorded
// DDP rank 1 (tests/cli/ranks_test checks info's lines): peak live 437925888 bytes (every live
// request, as info's), mapped 1247426560 at most on device 1, 943982592 of it NCCL's maps and
// libraries' cudaMallocs.
TEST(RecSummary, PeakLiveIsInfosAndTheRestIsNamed) {
  rec_summary_t s;
  gm_err_t err;
  gm_err_clear(&err);
  ASSERT_EQ(rec_summary_read("traces/recorded/ddp.rank1.requests.zst", &s, &err), GM_OK) << err.msg;
  EXPECT_EQ(s.peak_live, 437925888u);
  EXPECT_EQ(s.peak_mapped, 1247426560u);
  EXPECT_EQ(s.mapped_other, 943982592u);
  EXPECT_EQ(s.mapped_device, 1u);
  EXPECT_EQ(s.peak_mapped - s.mapped_other, 303443968u);  // the framework's requests then
}
