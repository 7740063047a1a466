// rec_tracker_test.cc: PyTorch's allocator trace tracker reached from C (rec_tracker.c), against a
// C++ stand-in for torch 2.11's libc10_cuda.so (testdata/fake_tracker_c10.cc): the slot found by
// the method's symbol, the hand-built std::function copied per device and called with
// TraceEntry, each action as its event; an unknown torch, a missing allocator and another
// backend refused before anything is called.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

extern "C" {
#include "formats/gmt.h"
#include "recorder/rec_core.h"
#include "recorder/rec_tracker.h"
}

namespace {

std::string TmpPath(const char *name) {
  const char *d = getenv("TEST_TMPDIR");
  return std::string(d ? d : "/tmp") + "/" + name;
}

uint64_t g_now = 1000;
uint64_t Now(void *) { return g_now += 10; }

struct Fake {
  void *h = nullptr;
  void (*set_backend)(int) = nullptr;
  int (*record)(int, int, size_t, size_t, uintptr_t) = nullptr;
  Fake() {
    h = dlopen("recorder/testdata/faketracker/libc10_cuda.so", RTLD_NOW | RTLD_GLOBAL);
    EXPECT_NE(h, nullptr) << dlerror();
    if (!h) return;
    set_backend = reinterpret_cast<void (*)(int)>(dlsym(h, "fake_c10_set_backend"));
    record = reinterpret_cast<int (*)(int, int, size_t, size_t, uintptr_t)>(dlsym(h, "fake_c10_record"));
  }
};

Fake &TheFake() {
  static Fake f;
  return f;
}

rec_core_t *StartCore(const std::string &path) {
  rec_config_t cfg;
  memset(&cfg, 0, sizeof cfg);
  gmt_header_init(&cfg.header);
  cfg.path = path.c_str();
  rec_hooks_t hooks;
  memset(&hooks, 0, sizeof hooks);
  hooks.now_ns = Now;
  rec_core_t *c = nullptr;
  gm_err_t err;
  gm_err_clear(&err);
  EXPECT_EQ(rec_core_start(&c, &cfg, &hooks, &err), GM_OK) << err.msg;
  gmt_header_free(&cfg.header);
  rec_core_gpu_ready(c);
  return c;
}

std::vector<gmt_event_t> ReadAll(const std::string &path) {
  gmt_reader_t *r;
  gm_err_t err;
  gm_err_clear(&err);
  std::vector<gmt_event_t> out;
  if (gmt_reader_open(&r, path.c_str(), &err) != GM_OK) {
    ADD_FAILURE() << err.msg;
    return out;
  }
  gmt_event_t ev;
  while (gmt_reader_next(r, &ev, &err) == GM_OK) out.push_back(ev);
  gmt_reader_close(r);
  return out;
}

// Refusals first: the tracker attaches once per process.
TEST(RecTracker, RefusesWhatItCannotCheck) {
  Fake &f = TheFake();
  ASSERT_NE(f.h, nullptr);
  char why[512];
  EXPECT_EQ(rec_tracker_version_known("2.11.0+cu130"), 1);
  EXPECT_EQ(rec_tracker_version_known("2.10.1"), 0);
  EXPECT_EQ(rec_tracker_attach(REC_TRACKER_OBJECT, "2.12.0", nullptr, nullptr, Now, why, sizeof why), -1);
  EXPECT_NE(std::string(why).find("not known"), std::string::npos) << why;
  EXPECT_EQ(rec_tracker_attach("libnot_loaded.so", "2.11.0", nullptr, nullptr, Now, why, sizeof why), -1);
  EXPECT_NE(std::string(why).find("not loaded"), std::string::npos) << why;
  f.set_backend(0);
  EXPECT_EQ(rec_tracker_attach(REC_TRACKER_OBJECT, "2.11.0", nullptr, nullptr, Now, why, sizeof why), -1);
  EXPECT_NE(std::string(why).find("not set up"), std::string::npos) << why;
  f.set_backend(2);  // its attachAllocatorTraceTracker aborts: never called
  EXPECT_EQ(rec_tracker_attach(REC_TRACKER_OBJECT, "2.11.0", nullptr, nullptr, Now, why, sizeof why), -1);
  EXPECT_NE(std::string(why).find("not the native"), std::string::npos) << why;
  rec_tracker_stats_t st;
  rec_tracker_stats(&st);
  EXPECT_EQ(st.slot, -1);
}

TEST(RecTracker, StreamsEveryActionWithStreamAndDevice) {
  Fake &f = TheFake();
  ASSERT_NE(f.h, nullptr);
  f.set_backend(1);
  std::string path = TmpPath("tracker.zst");
  rec_core_t *core = StartCore(path);
  char why[512] = "";
  ASSERT_EQ(rec_tracker_attach(REC_TRACKER_OBJECT, "2.11.0+cu130", core, nullptr, Now, why, sizeof why), 1) << why;
  EXPECT_EQ(rec_tracker_attach(REC_TRACKER_OBJECT, "2.11.0+cu130", core, nullptr, Now, why, sizeof why), 0);
  rec_tracker_stats_t st;
  rec_tracker_stats(&st);
  EXPECT_EQ(st.slot, 5);  // after the destructor pair, raw_alloc, emptyCache, attachOutOfMemoryObserver
  const uintptr_t s7 = 0x7f00aa00;
  EXPECT_EQ(f.record(3, 1, 0x10000, 2 << 20, s7), 1);  // segment_alloc
  f.record(0, 1, 0x10000, 1000, s7);                    // alloc
  f.record(1, 1, 0x10000, 1000, s7);                    // free_requested
  f.record(2, 1, 0x10000, 1000, s7);                    // free_completed
  f.record(5, 1, 0x20000, 2 << 20, s7);                 // segment_map
  f.record(6, 1, 0x20000, 2 << 20, s7);                 // segment_unmap
  f.record(7, 1, 0, 0, 0);                              // snapshot: left out, not unknown
  f.record(8, 1, 12345, 1 << 30, s7);                   // oom: addr is the free bytes
  f.record(4, 1, 0x10000, 2 << 20, s7);                 // segment_free
  f.record(42, 1, 0, 0, 0);                             // an action this recorder does not know
  rec_tracker_detach();
  f.record(0, 1, 0x30000, 5, s7);  // after detaching: not recorded
  ASSERT_EQ(rec_core_stop(core), GM_OK);
  rec_core_destroy(core);
  rec_tracker_stats(&st);
  EXPECT_EQ(st.entries, 10u);
  EXPECT_EQ(st.pushed, 8u);
  EXPECT_EQ(st.unknown, 1u);
  EXPECT_EQ(st.dropped, 0u);
  std::vector<gmt_event_t> evs = ReadAll(path);
  const uint8_t want[] = {GMT_EV_SEGMENT_ALLOC, GMT_EV_ALLOC, GMT_EV_FREE_REQUESTED, GMT_EV_FREE,
                          GMT_EV_VMM_MAP, GMT_EV_VMM_UNMAP, GMT_EV_ALLOC_FAILED, GMT_EV_SEGMENT_FREE};
  ASSERT_EQ(evs.size(), sizeof want);
  for (size_t i = 0; i < evs.size(); i++) {
    EXPECT_EQ(evs[i].kind, want[i]) << i;
    EXPECT_EQ(evs[i].device, 1) << i;
    EXPECT_EQ(evs[i].stream, s7) << i;
    EXPECT_EQ(evs[i].mem_kind, GMT_MEM_DEVICE) << i;
  }
  EXPECT_EQ(evs[1].addr, 0x10000u);
  EXPECT_EQ(evs[1].size, 1000u);
  EXPECT_EQ(evs[0].size, 2u << 20);
  EXPECT_EQ(evs[6].addr, 0u);
  EXPECT_EQ(evs[6].size, 1u << 30);
}

}  // namespace
