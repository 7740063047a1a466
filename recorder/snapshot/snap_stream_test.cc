// snap_stream_test.cc: a request stream (recorder/rec_tracker.c's events) merged with the CUPTI
// trace of the same process (snap_stream.c): PyTorch's own driver calls left out, another
// library's memory kept and flagged external, events in time order, callsites carried over, the
// header saying the source; a stream cut short by a kill merged as far as it goes.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

extern "C" {
#include "formats/gmt.h"
#include "recorder/snapshot/snap_import.h"
}

namespace {

std::string Tmp(const char *name) {
  const char *d = getenv("TEST_TMPDIR");
  return std::string(d ? d : "/tmp") + "/" + name;
}

gmt_event_t Ev(uint64_t ts, uint8_t kind, uint64_t addr, uint64_t size, uint64_t stream = GMT_STREAM_NONE) {
  gmt_event_t e;
  memset(&e, 0, sizeof e);
  e.ts_ns = ts;
  e.kind = kind;
  e.addr = addr;
  e.size = size;
  e.stream = stream;
  e.mem_kind = GMT_MEM_DEVICE;
  return e;
}

void Write(const std::string &path, std::vector<gmt_event_t> evs, int pid, const char *site = nullptr,
           bool finish = true) {
  gmt_header_t h;
  gmt_header_init(&h);
  h.pid = pid;
  gm_err_t err;
  gm_err_clear(&err);
  gmt_writer_t *w = nullptr;
  ASSERT_EQ(gmt_writer_open(&w, path.c_str(), &h, nullptr, &err), GM_OK) << err.msg;
  for (auto &e : evs) {
    if (site && e.kind == GMT_EV_ALLOC) {
      ASSERT_EQ(gmt_writer_intern(w, site, &e.callsite, &err), GM_OK);
    }
    ASSERT_EQ(gmt_writer_append(w, &e, &err), GM_OK) << err.msg;
  }
  if (finish) {
    ASSERT_EQ(gmt_writer_close(w, &err), GM_OK) << err.msg;
  } else {
    gmt_writer_abandon(w);
  }
  gmt_header_free(&h);
}

TEST(SnapStream, MergesStreamWithCupti) {
  const uint64_t A = 0x7f0000000000, B = 0x7f1000000000, S = 0x5555;
  std::string cupti = Tmp("c.zst"), stream = Tmp("s.zst"), out = Tmp("m.zst");
  Write(cupti, {Ev(10, GMT_EV_ALLOC, A, 2 << 20),       // PyTorch's cudaMalloc: left out
                Ev(15, GMT_EV_ALLOC, B, 1 << 20),       // NCCL's: external
                Ev(40, GMT_EV_FREE, A, 0),              // PyTorch's cudaFree: left out
                Ev(50, GMT_EV_ALLOC_FAILED, 0, 1 << 30)},  // PyTorch's retry: left out
        7);
  Write(stream, {Ev(11, GMT_EV_SEGMENT_ALLOC, A, 2 << 20, S), Ev(12, GMT_EV_ALLOC, A, 1000, S),
                 Ev(20, GMT_EV_FREE_REQUESTED, A, 1000, S), Ev(21, GMT_EV_FREE, A, 1000, S),
                 Ev(41, GMT_EV_SEGMENT_FREE, A, 2 << 20, S)},
        7, "train.py:3:step");
  snap_stream_stats_t st;
  gm_err_t err;
  gm_err_clear(&err);
  ASSERT_EQ(snap_merge_stream_file(stream.c_str(), cupti.c_str(), out.c_str(), nullptr, &st, &err), GM_OK)
      << err.msg;
  EXPECT_EQ(st.stream_events, 5u);
  EXPECT_EQ(st.segments, 2u);
  EXPECT_EQ(st.segments_seen, 2u);
  EXPECT_EQ(st.external, 1u);
  EXPECT_EQ(st.cupti_dropped, 3u);
  EXPECT_EQ(st.stream_truncated, 0);
  gmt_reader_t *r = nullptr;
  ASSERT_EQ(gmt_reader_open(&r, out.c_str(), &err), GM_OK) << err.msg;
  EXPECT_EQ(gmt_reader_header(r)->capture_mode, GMT_CAPTURE_TORCH_HISTORY);
  EXPECT_STREQ(gmt_header_kv_get(gmt_reader_header(r), "torch_history.source"), "stream");
  std::vector<gmt_event_t> evs;
  gmt_event_t e;
  while (gmt_reader_next(r, &e, &err) == GM_OK) {
    if (e.kind == GMT_EV_ALLOC && e.addr == A) {
      EXPECT_STREQ(gmt_reader_string(r, e.callsite), "train.py:3:step");
    }
    evs.push_back(e);
  }
  gmt_reader_close(r);
  const uint8_t want[] = {GMT_EV_SEGMENT_ALLOC, GMT_EV_ALLOC, GMT_EV_ALLOC, GMT_EV_FREE_REQUESTED,
                          GMT_EV_FREE, GMT_EV_SEGMENT_FREE};
  ASSERT_EQ(evs.size(), sizeof want);
  for (size_t i = 0; i < evs.size(); i++) EXPECT_EQ(evs[i].kind, want[i]) << i;
  EXPECT_EQ(evs[2].addr, B);
  EXPECT_TRUE(evs[2].flags & GMT_F_EXTERNAL);
  EXPECT_FALSE(evs[1].flags & GMT_F_EXTERNAL);
  EXPECT_EQ(evs[1].stream, S);
}

TEST(SnapStream, KilledStreamMergedAsFarAsItGoes) {
  std::string cupti = Tmp("kc.zst"), stream = Tmp("ks.zst"), out = Tmp("km.zst");
  Write(cupti, {Ev(10, GMT_EV_ALLOC, 0x1000, 2 << 20)}, 9);
  std::vector<gmt_event_t> s = {Ev(11, GMT_EV_SEGMENT_ALLOC, 0x1000, 2 << 20, 1)};
  for (int i = 0; i < 100; i++) s.push_back(Ev(20 + i, GMT_EV_ALLOC, 0x1000 + 512 * i, 512, 1));
  Write(stream, s, 9, nullptr, /*finish=*/false);  // abandoned: what a SIGKILL leaves
  snap_stream_stats_t st;
  gm_err_t err;
  gm_err_clear(&err);
  ASSERT_EQ(snap_merge_stream_file(stream.c_str(), cupti.c_str(), out.c_str(), nullptr, &st, &err), GM_OK)
      << err.msg;
  EXPECT_EQ(st.stream_truncated, 1);
  gmt_reader_t *r = nullptr;
  ASSERT_EQ(gmt_reader_open(&r, out.c_str(), &err), GM_OK) << err.msg;
  const char *at = gmt_header_kv_get(gmt_reader_header(r), "torch_stream.truncated_at_ns");
  ASSERT_NE(at, nullptr);
  EXPECT_EQ(strtoull(at, nullptr, 10), st.stream_last_ns);
  gmt_reader_close(r);
}

}  // namespace
