// gmt_test.cc: writer/reader round trips, chunking, seeking, strings, integrity reports.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "formats/gmt.h"
#include "formats/gmt_internal.h"
#include "formats/gmt_testutil.h"

using gmt_test::Ev;

using gmt_test::ReadAll;
using gmt_test::TempPath;

namespace {


bool Same(const gmt_event_t &a, const gmt_event_t &b) { return memcmp(&a, &b, sizeof a) == 0; }

// Random events covering every kind and field extreme.
std::vector<gmt_event_t> RandomEvents(size_t n, uint32_t seed, uint32_t max_callsite) {
  std::mt19937_64 rng(seed);
  const uint64_t extremes[] = {0, 1, 127, 128, 0xffffffffull, 1ull << 63, UINT64_MAX - 1, UINT64_MAX};
  std::vector<gmt_event_t> v;
  uint64_t ts = 0;
  for (size_t i = 0; i < n; i++) {
    gmt_event_t e;
    memset(&e, 0, sizeof e);
    bool ext = rng() % 8 == 0;
    auto pick = [&](uint64_t normal) { return ext ? extremes[rng() % 8] : normal; };
    ts = (rng() % 16 == 0) ? ts - rng() % 1000 : ts + rng() % 100000;  // not always monotonic
    e.ts_ns = ext && rng() % 4 == 0 ? extremes[rng() % 8] : ts;
    e.kind = (uint8_t)(1 + i % (GMT_EV_KIND_MAX - 1));
    e.addr = pick(0x7f0000000000ull + (rng() % 4096) * 512);
    e.size = pick(512ull << (rng() % 20));
    e.stream = rng() % 5 == 0 ? GMT_STREAM_NONE : pick(rng() % 3);
    e.corr_id = pick(i * 3);
    e.callsite = max_callsite ? (uint32_t)(rng() % (max_callsite + 1)) : 0;
    e.context = ext ? UINT32_MAX : (uint32_t)(rng() % 2);
    e.flags = ext ? UINT32_MAX : (uint32_t)(rng() % 8);
    e.device = ext ? UINT16_MAX : (uint16_t)(rng() % 2);
    e.mem_kind = (uint8_t)(rng() % GMT_MEM_KIND_MAX);
    v.push_back(e);
  }
  return v;
}

std::string WriteTrace(const std::vector<gmt_event_t> &evs, uint32_t chunk_events, uint32_t strings = 0,
                       bool close = true) {
  std::string path = TempPath("t.zst");
  gmt_header_t h;
  gmt_header_init(&h);
  h.capture_mode = GMT_CAPTURE_SYNTHETIC;
  gmt_header_set(&h.host, "box", nullptr);
  gmt_header_kv_set(&h, "PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True", nullptr);
  gmt_writer_opts_t o = {};
  o.chunk_events = chunk_events;
  gmt_writer_t *w;
  gm_err_t err;
  EXPECT_EQ(gmt_writer_open(&w, path.c_str(), &h, &o, &err), GM_OK) << err.msg;
  gmt_header_free(&h);
  for (uint32_t i = 1; i <= strings; i++) {
    uint32_t id;
    EXPECT_EQ(gmt_writer_intern(w, ("frame_" + std::to_string(i) + " at x.py:" + std::to_string(i)).c_str(), &id,
                                &err),
              GM_OK);
    EXPECT_EQ(id, i);
  }
  for (auto &e : evs) EXPECT_EQ(gmt_writer_append(w, &e, &err), GM_OK) << err.msg;
  if (close) EXPECT_EQ(gmt_writer_close(w, &err), GM_OK) << err.msg;
  else gmt_writer_abandon(w);
  return path;
}

std::vector<gmt_event_t> ReadEvents(gmt_reader_t *r, gm_status_t *last) {
  std::vector<gmt_event_t> out;
  gmt_event_t e;
  gm_err_t err;
  gm_status_t s;
  while ((s = gmt_reader_next(r, &e, &err)) == GM_OK) out.push_back(e);
  *last = s;
  return out;
}

}  // namespace

TEST(Writer, RoundTripsEveryKindAndExtreme) {
  auto evs = RandomEvents(20000, 1, 0);
  std::string path = WriteTrace(evs, 3000);
  gmt_reader_t *r;
  gm_err_t err;
  ASSERT_EQ(gmt_reader_open(&r, path.c_str(), &err), GM_OK) << err.msg;
  gm_status_t last;
  auto got = ReadEvents(r, &last);
  EXPECT_EQ(last, GM_END);
  ASSERT_EQ(got.size(), evs.size());
  for (size_t i = 0; i < evs.size(); i++) ASSERT_TRUE(Same(got[i], evs[i])) << "event " << i;
  const gmt_reader_stats_t *st = gmt_reader_stats(r);
  EXPECT_EQ(st->chunks, 7u);
  EXPECT_EQ(st->events, 20000u);
  EXPECT_FALSE(st->truncated);
  EXPECT_TRUE(st->has_index);
  EXPECT_EQ(gmt_reader_chunk_count(r), 7u);
  EXPECT_STREQ(gmt_reader_header(r)->host, "box");
  EXPECT_STREQ(gmt_header_kv_get(gmt_reader_header(r), "PYTORCH_CUDA_ALLOC_CONF"), "expandable_segments:True");
  EXPECT_EQ(gmt_reader_header(r)->format_version, (uint32_t)GMT_FORMAT_VERSION);
  gmt_reader_close(r);
  remove(path.c_str());
}

TEST(Writer, HeaderRoundTripsEveryField) {
  gmt_header_t h;
  gmt_header_init(&h);
  h.capture_mode = GMT_CAPTURE_NATIVE;
  h.rank = 3;
  h.world_size = 8;
  h.pid = 4242;
  h.start_time_ns = UINT64_MAX;
  h.gpu_total_mem = 80ull << 30;
  char **strs[] = {&h.host, &h.gpu_name, &h.gpu_uuid, &h.driver_version, &h.cuda_version, &h.cupti_version,
                   &h.tool, &h.command_line};
  for (size_t i = 0; i < sizeof strs / sizeof *strs; i++)
    gmt_header_set(strs[i], ("v\n=" + std::to_string(i) + ",\xc3\xa9").c_str(), nullptr);
  gmt_header_kv_set(&h, "A", "1", nullptr);
  gmt_header_kv_set(&h, "B", "", nullptr);
  std::string path = TempPath("h.zst");
  gmt_writer_t *w;
  gm_err_t err;
  ASSERT_EQ(gmt_writer_open(&w, path.c_str(), &h, nullptr, &err), GM_OK);
  ASSERT_EQ(gmt_writer_close(w, &err), GM_OK);
  gmt_reader_t *r;
  ASSERT_EQ(gmt_reader_open(&r, path.c_str(), &err), GM_OK) << err.msg;
  const gmt_header_t *g = gmt_reader_header(r);
  EXPECT_EQ(g->capture_mode, (uint32_t)GMT_CAPTURE_NATIVE);
  EXPECT_EQ(g->rank, 3);
  EXPECT_EQ(g->world_size, 8);
  EXPECT_EQ(g->pid, 4242u);
  EXPECT_EQ(g->start_time_ns, UINT64_MAX);
  EXPECT_EQ(g->gpu_total_mem, 80ull << 30);
  EXPECT_STREQ(g->command_line, "v\n=7,\xc3\xa9");
  EXPECT_STREQ(g->host, "v\n=0,\xc3\xa9");
  ASSERT_EQ(g->n_kv, 2u);
  EXPECT_STREQ(gmt_header_kv_get(g, "B"), "");
  gmt_event_t e;
  EXPECT_EQ(gmt_reader_next(r, &e, &err), GM_END);
  gmt_reader_close(r);
  gmt_header_free(&h);
  remove(path.c_str());
}

TEST(Writer, CutsChunksByBytesAndAge) {
  std::vector<gmt_event_t> evs;
  for (int i = 0; i < 1000; i++) evs.push_back(Ev(GMT_EV_ALLOC, i * 1000, 0x1000 + i * 4096, 4096 + i));
  std::string path = TempPath("a.zst");
  gmt_writer_opts_t o = {};
  o.chunk_age_ns = 100000;  // 100 events per chunk
  gmt_writer_t *w;
  gm_err_t err;
  ASSERT_EQ(gmt_writer_open(&w, path.c_str(), nullptr, &o, &err), GM_OK);
  ASSERT_EQ(gmt_writer_append_n(w, evs.data(), evs.size(), &err), GM_OK);
  ASSERT_EQ(gmt_writer_close(w, &err), GM_OK);
  gmt_reader_t *r;
  ASSERT_EQ(gmt_reader_open(&r, path.c_str(), &err), GM_OK);
  EXPECT_EQ(gmt_reader_chunk_count(r), 10u);
  gmt_reader_close(r);
  o.chunk_age_ns = 0;
  o.chunk_bytes = 2000;
  ASSERT_EQ(gmt_writer_open(&w, path.c_str(), nullptr, &o, &err), GM_OK);
  ASSERT_EQ(gmt_writer_append_n(w, evs.data(), evs.size(), &err), GM_OK);
  ASSERT_EQ(gmt_writer_close(w, &err), GM_OK);
  ASSERT_EQ(gmt_reader_open(&r, path.c_str(), &err), GM_OK);
  EXPECT_GT(gmt_reader_chunk_count(r), 3u);
  EXPECT_LT(gmt_reader_chunk_count(r), 100u);
  gm_status_t last;
  EXPECT_EQ(ReadEvents(r, &last).size(), 1000u);
  gmt_reader_close(r);
  remove(path.c_str());
}

TEST(Writer, RejectsUnknownKindAndUninternedCallsite) {
  std::string path = TempPath("k.zst");
  gmt_writer_t *w;
  gm_err_t err;
  ASSERT_EQ(gmt_writer_open(&w, path.c_str(), nullptr, nullptr, &err), GM_OK);
  gmt_event_t e = Ev(99, 1, 0, 0);
  EXPECT_EQ(gmt_writer_append(w, &e, &err), GM_ERR_INVAL);
  e = Ev(GMT_EV_ALLOC, 1, 0, 0);
  e.callsite = 5;
  EXPECT_EQ(gmt_writer_append(w, &e, &err), GM_ERR_INVAL);
  EXPECT_NE(std::string(err.msg).find("never interned"), std::string::npos);
  gmt_writer_abandon(w);
  remove(path.c_str());
}

TEST(Strings, EveryChunkCarriesTheStringsItUses) {
  auto evs = RandomEvents(5000, 2, 40);
  std::string path = WriteTrace(evs, 500, 40);
  gmt_reader_t *r;
  gm_err_t err;
  ASSERT_EQ(gmt_reader_open(&r, path.c_str(), &err), GM_OK);
  // Seek straight to the last chunk: its callsites must resolve without reading the others.
  uint64_t n = gmt_reader_chunk_count(r);
  ASSERT_EQ(n, 10u);
  ASSERT_EQ(gmt_reader_seek_chunk(r, n - 1, &err), GM_OK);
  gmt_event_t e;
  int checked = 0;
  while (gmt_reader_next(r, &e, &err) == GM_OK) {
    if (!e.callsite) continue;
    const char *s = gmt_reader_string(r, e.callsite);
    ASSERT_NE(s, nullptr) << e.callsite;
    EXPECT_EQ(std::string(s), "frame_" + std::to_string(e.callsite) + " at x.py:" + std::to_string(e.callsite));
    checked++;
  }
  EXPECT_GT(checked, 100);
  EXPECT_EQ(gmt_reader_string(r, 0), nullptr);
  gmt_reader_close(r);
  remove(path.c_str());
}

TEST(Reader, SeeksByChunkAndReportsChunkInfo) {
  std::vector<gmt_event_t> evs;
  for (int i = 0; i < 1000; i++) evs.push_back(Ev(GMT_EV_ALLOC, 1000 + i * 10, i, i));
  std::string path = WriteTrace(evs, 100);
  gmt_reader_t *r;
  gm_err_t err;
  ASSERT_EQ(gmt_reader_open(&r, path.c_str(), &err), GM_OK);
  ASSERT_EQ(gmt_reader_chunk_count(r), 10u);
  uint64_t ts, n;
  ASSERT_EQ(gmt_reader_chunk_info(r, 7, &ts, &n, &err), GM_OK);
  EXPECT_EQ(ts, 1000u + 700 * 10);
  EXPECT_EQ(n, 100u);
  EXPECT_EQ(gmt_reader_chunk_info(r, 10, &ts, &n, &err), GM_ERR_INVAL);
  ASSERT_EQ(gmt_reader_seek_chunk(r, 7, &err), GM_OK);
  gmt_event_t e;
  ASSERT_EQ(gmt_reader_next(r, &e, &err), GM_OK);
  EXPECT_EQ(e.addr, 700u);
  ASSERT_EQ(gmt_reader_seek_chunk(r, 2, &err), GM_OK);
  gmt_event_t batch[1000];
  size_t got;
  ASSERT_EQ(gmt_reader_next_batch(r, batch, 1000, &got, &err), GM_OK);
  EXPECT_EQ(got, 100u);  // a batch never spans chunks
  EXPECT_EQ(batch[0].addr, 200u);
  EXPECT_EQ(gmt_reader_seek_chunk(r, 10, &err), GM_ERR_INVAL);
  EXPECT_EQ(gmt_reader_stats(r)->seq_gaps, 0u);
  gmt_reader_close(r);
  remove(path.c_str());
}

// The file-backed memory this process maps (kB), from /proc (0 where there is none).
long RssFileKb() {
  FILE *f = fopen("/proc/self/status", "r");
  long kb = 0;
  char line[256];
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "RssFile: %ld", &kb) == 1) break;
  if (f) fclose(f);
  return kb;
}

// GMT_READ_DROP_BEHIND gives back the pages of the chunks decoded (the file's resident part
// stays a few MiB however long it is), and reads the same events, a seek back included.
TEST(Reader, DropBehindReadsTheSameAndGivesPagesBack) {
  std::vector<gmt_event_t> evs = RandomEvents(1500000, 11, 0);
  std::string path = WriteTrace(evs, 4096);
  FILE *f = fopen(path.c_str(), "rb");
  ASSERT_TRUE(f);
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fclose(f);
  ASSERT_GT(size, 12L << 20) << "a file of many times the MiB the reader keeps";
  gm_err_t err;
  for (unsigned flags : {GMT_READ_STRICT, GMT_READ_DROP_BEHIND, GMT_READ_SALVAGE | GMT_READ_DROP_BEHIND}) {
    gmt_reader_t *r;
    ASSERT_EQ(gmt_reader_open_flags(&r, path.c_str(), flags, &err), GM_OK) << err.msg;
    long before = RssFileKb(), most = before;
    std::vector<gmt_event_t> got;
    gmt_event_t e;
    while (gmt_reader_next(r, &e, &err) == GM_OK) {
      got.push_back(e);
      if (got.size() % 65536 == 0) most = std::max(most, RssFileKb());
    }
    ASSERT_EQ(got.size(), evs.size()) << flags;
    for (size_t i = 0; i < evs.size(); i++) ASSERT_TRUE(Same(got[i], evs[i])) << flags << " event " << i;
    if (flags & GMT_READ_DROP_BEHIND) EXPECT_LT(most - before, 4L << 10) << "kB resident of a " << size << " B file";
    else EXPECT_GT(most - before, (size >> 10) / 2) << "the plain reader keeps the file mapped";
    ASSERT_EQ(gmt_reader_seek_chunk(r, 0, &err), GM_OK);  // pages given back are read again
    for (size_t i = 0; i < 10000; i++) {
      ASSERT_EQ(gmt_reader_next(r, &e, &err), GM_OK) << err.msg;
      ASSERT_TRUE(Same(e, evs[i])) << flags << " after the seek, event " << i;
    }
    gmt_reader_close(r);
  }
  remove(path.c_str());
}

TEST(Reader, SkipsUnknownKindsAndExtensions) {
  std::string path = TempPath("u.zst");
  gmt_writer_t *w;
  gm_err_t err;
  ASSERT_EQ(gmt_writer_open(&w, path.c_str(), nullptr, nullptr, &err), GM_OK);
  for (int i = 0; i < 30; i++) {
    gmt_event_t e = Ev(i % 3 == 1 ? 200 : GMT_EV_ALLOC, i, i, i);
    const char ext[] = "future field";
    ASSERT_EQ(gmt_writer_append_raw(w, &e, i % 2 ? ext : nullptr, i % 2 ? sizeof ext : 0, &err), GM_OK);
  }
  ASSERT_EQ(gmt_writer_close(w, &err), GM_OK);
  gmt_reader_t *r;
  ASSERT_EQ(gmt_reader_open(&r, path.c_str(), &err), GM_OK);
  gm_status_t last;
  auto got = ReadEvents(r, &last);
  EXPECT_EQ(last, GM_END);
  ASSERT_EQ(got.size(), 20u);
  EXPECT_EQ(got[1].addr, 2u);
  EXPECT_EQ(gmt_reader_stats(r)->unknown_records, 10u);
  gmt_reader_close(r);
  remove(path.c_str());
}

TEST(Reader, ReportsSequenceGapsAndDrops) {
  std::string path = TempPath("g.zst");
  gmt_writer_t *w;
  gm_err_t err;
  ASSERT_EQ(gmt_writer_open(&w, path.c_str(), nullptr, nullptr, &err), GM_OK);
  gmt_event_t e = Ev(GMT_EV_ALLOC, 1, 1, 1);
  ASSERT_EQ(gmt_writer_append(w, &e, &err), GM_OK);
  gmt_writer_add_dropped(w, 5);
  ASSERT_EQ(gmt_writer_flush(w, &err), GM_OK);
  gmt_writer_skip_seq(w, 2);
  ASSERT_EQ(gmt_writer_append(w, &e, &err), GM_OK);
  gmt_writer_add_dropped(w, 7);
  ASSERT_EQ(gmt_writer_close(w, &err), GM_OK);
  gmt_reader_t *r;
  ASSERT_EQ(gmt_reader_open(&r, path.c_str(), &err), GM_OK);
  gm_status_t last;
  EXPECT_EQ(ReadEvents(r, &last).size(), 2u);
  EXPECT_EQ(last, GM_END);
  EXPECT_EQ(gmt_reader_stats(r)->seq_gaps, 2u);
  EXPECT_EQ(gmt_reader_stats(r)->dropped, 12u);
  gmt_reader_close(r);
  remove(path.c_str());
}

TEST(Reader, CutAtEveryByteNeverCrashesAndReturnsEveryCompleteChunk) {
  auto evs = RandomEvents(600, 3, 5);
  std::string path = WriteTrace(evs, 100, 5);
  std::string full = ReadAll(path);
  remove(path.c_str());
  // Where each chunk ends, from a clean read: a prefix holding chunk k's last byte has k+1 chunks.
  std::vector<size_t> chunk_end;
  {
    size_t pos = gmt_test::HeaderLen(full);
    while (pos + 8 <= full.size() && gmt_get32((const uint8_t *)full.data() + pos) == GMT_MAGIC_CHUNK) {
      const uint8_t *d = (const uint8_t *)full.data() + pos + 8;
      pos += 8 + GMT_CHUNK_DESC_SIZE + gmt_get32(d + 40);
      chunk_end.push_back(pos);
    }
  }
  ASSERT_EQ(chunk_end.size(), 6u);
  for (size_t cut = 0; cut < full.size(); cut++) {
    gmt_reader_t *r;
    gm_err_t err;
    gm_status_t s = gmt_reader_open_mem(&r, full.data(), cut, &err);
    if (s != GM_OK) {
      ASSERT_TRUE(s == GM_ERR_TRUNCATED || (cut == 0 && s == GM_ERR_FORMAT)) << cut << ": " << err.msg;
      continue;
    }
    gm_status_t last;
    auto got = ReadEvents(r, &last);
    ASSERT_EQ(last, GM_END) << "cut at " << cut;
    size_t complete = 0;
    while (complete < chunk_end.size() && chunk_end[complete] <= cut) complete++;
    ASSERT_EQ(got.size(), complete * 100) << "cut at " << cut;
    for (size_t i = 0; i < got.size(); i++) ASSERT_TRUE(Same(got[i], evs[i]));
    EXPECT_TRUE(gmt_reader_stats(r)->truncated) << cut;
    gmt_reader_close(r);
  }
}

TEST(Reader, AbandonedWriterLeavesTruncatedTraceWithFlushedChunks) {
  auto evs = RandomEvents(250, 4, 0);
  std::string path = WriteTrace(evs, 100, 0, /*close=*/false);
  gmt_reader_t *r;
  gm_err_t err;
  ASSERT_EQ(gmt_reader_open(&r, path.c_str(), &err), GM_OK);
  gm_status_t last;
  EXPECT_EQ(ReadEvents(r, &last).size(), 200u);
  EXPECT_EQ(last, GM_END);
  EXPECT_TRUE(gmt_reader_stats(r)->truncated);
  EXPECT_FALSE(gmt_reader_stats(r)->has_index);
  EXPECT_EQ(gmt_reader_chunk_count(r), 0u);
  EXPECT_EQ(gmt_reader_seek_chunk(r, 0, &err), GM_ERR_UNSUPPORTED);
  gmt_reader_close(r);
  remove(path.c_str());
}

TEST(Reader, EveryFlippedBitIsDetectedWithOneClearError) {
  auto evs = RandomEvents(300, 5, 3);
  std::string path = WriteTrace(evs, 100, 3);
  std::string full = ReadAll(path);
  remove(path.c_str());
  size_t header = gmt_test::HeaderLen(full);
  int opened_failed = 0, read_failed = 0;
  for (size_t byte = 0; byte < full.size(); byte++) {
    for (int bit = 0; bit < 8; bit += 3) {
      std::string bad = full;
      bad[byte] ^= (char)(1 << bit);
      gmt_reader_t *r;
      gm_err_t err;
      gm_status_t s = gmt_reader_open_mem(&r, bad.data(), bad.size(), &err);
      if (s != GM_OK) {
        ASSERT_TRUE(s == GM_ERR_CORRUPT || s == GM_ERR_FORMAT || s == GM_ERR_VERSION) << byte << ": " << s;
        opened_failed++;
        continue;
      }
      gm_status_t last;
      auto got = ReadEvents(r, &last);
      // Either an error naming the chunk, or (a flip that turned the footer into garbage
      // that no longer looks like a footer) nothing but a truncation report. Never wrong data.
      if (last == GM_END) {
        ASSERT_EQ(got.size(), evs.size()) << "flip at " << byte;
        for (size_t i = 0; i < got.size(); i++) ASSERT_TRUE(Same(got[i], evs[i])) << "flip at " << byte;
        ASSERT_GE(byte, full.size() - GMT_FOOTER_FRAME) << "flip at " << byte << " went unnoticed";
        ASSERT_TRUE(gmt_reader_stats(r)->truncated);
      } else {
        ASSERT_EQ(last, GM_ERR_CORRUPT) << byte;
        gmt_event_t e;
        ASSERT_EQ(gmt_reader_next(r, &e, &err), GM_ERR_CORRUPT);  // sticky: the same error again
        EXPECT_NE(std::string(err.msg).find("chunk "), std::string::npos) << err.msg;
        read_failed++;
      }
      gmt_reader_close(r);
    }
  }
  EXPECT_GT(read_failed, 100);
  EXPECT_GT(opened_failed, (int)header);
}

TEST(Reader, NotATraceAndFutureVersion) {
  const char junk[] = "hello, this is not a trace at all";
  gmt_reader_t *r;
  gm_err_t err;
  EXPECT_EQ(gmt_reader_open_mem(&r, junk, sizeof junk, &err), GM_ERR_FORMAT);
  EXPECT_STREQ(err.msg, "not a gpumem trace");
  std::string path = TempPath("v.zst");
  gmt_writer_t *w;
  ASSERT_EQ(gmt_writer_open(&w, path.c_str(), nullptr, nullptr, &err), GM_OK);
  gmt_writer_force_versions(w, 7, 5);
  ASSERT_EQ(gmt_writer_close(w, &err), GM_OK);
  EXPECT_EQ(gmt_reader_open(&r, path.c_str(), &err), GM_ERR_VERSION);
  EXPECT_NE(std::string(err.msg).find("version 5 or newer"), std::string::npos) << err.msg;
  EXPECT_NE(std::string(err.msg).find("install a newer " GM_DIST_NAME), std::string::npos) << err.msg;
  // A gpumem tool as the writer: the message names the release to install.
  gmt_header_t h;
  gmt_header_init(&h);
  ASSERT_EQ(gmt_header_set(&h.tool, "gpurec 0.7.2 import", &err), GM_OK);
  ASSERT_EQ(gmt_writer_open(&w, path.c_str(), &h, nullptr, &err), GM_OK);
  gmt_header_free(&h);
  gmt_writer_force_versions(w, 7, 5);
  ASSERT_EQ(gmt_writer_close(w, &err), GM_OK);
  EXPECT_EQ(gmt_reader_open(&r, path.c_str(), &err), GM_ERR_VERSION);
  EXPECT_EQ(std::string(err.msg),
            "trace needs a reader of format version 5 or newer (written by gpurec 0.7.2 import, "
            "format version 7); this reader reads version " + std::to_string(GMT_FORMAT_VERSION) +
                ": install " GM_DIST_NAME " >= 0.7.2 (pip install -U " GM_DIST_NAME ")");
  EXPECT_EQ(gmt_reader_open(&r, "/nonexistent/x.zst", &err), GM_ERR_IO);
  remove(path.c_str());
}

TEST(Reader, NextViewHandsOutWholeChunksAndMixesWithNext) {
  std::vector<gmt_event_t> evs;
  for (int i = 0; i < 250; i++) evs.push_back(Ev(GMT_EV_ALLOC, i, i, i));
  std::string path = WriteTrace(evs, 100);
  gmt_reader_t *r;
  gm_err_t err;
  ASSERT_EQ(gmt_reader_open(&r, path.c_str(), &err), GM_OK);
  gmt_event_t e;
  ASSERT_EQ(gmt_reader_next(r, &e, &err), GM_OK);
  const gmt_event_t *v;
  size_t n;
  ASSERT_EQ(gmt_reader_next_view(r, &v, &n, &err), GM_OK);
  EXPECT_EQ(n, 99u);  // the rest of chunk 0
  EXPECT_EQ(v[0].addr, 1u);
  ASSERT_EQ(gmt_reader_next_view(r, &v, &n, &err), GM_OK);
  EXPECT_EQ(n, 100u);
  EXPECT_EQ(v[99].addr, 199u);
  ASSERT_EQ(gmt_reader_next(r, &e, &err), GM_OK);
  EXPECT_EQ(e.addr, 200u);
  ASSERT_EQ(gmt_reader_next_view(r, &v, &n, &err), GM_OK);
  EXPECT_EQ(n, 49u);
  EXPECT_EQ(gmt_reader_next_view(r, &v, &n, &err), GM_END);
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(gmt_reader_stats(r)->events, 250u);
  gmt_reader_close(r);
  remove(path.c_str());
}

TEST(Crc32c, KnownValueAndChaining) {
  EXPECT_EQ(gmt_crc32c(0, "123456789", 9), 0xE3069283u);
  std::string s(1000, '\0');
  for (size_t i = 0; i < s.size(); i++) s[i] = (char)(i * 7);
  uint32_t whole = gmt_crc32c(0, s.data(), s.size());
  for (size_t cut : {0, 1, 7, 8, 9, 500, 999})
    EXPECT_EQ(gmt_crc32c(gmt_crc32c(0, s.data(), cut), s.data() + cut, s.size() - cut), whole) << cut;
}

// SPEC.md: every trace is a valid zstd stream. Checked with the zstd command when installed.
TEST(Writer, TraceIsAValidZstdStream) {
  if (system("zstd --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "zstd command not installed";
  auto evs = RandomEvents(3000, 9, 4);
  std::string path = WriteTrace(evs, 1000, 4);
  EXPECT_EQ(system(("zstd -q -t '" + path + "'").c_str()), 0);
  std::string cut = path + ".cut";
  std::string full = ReadAll(path);
  FILE *f = fopen(cut.c_str(), "wb");
  fwrite(full.data(), 1, full.size() - GMT_FOOTER_FRAME, f);  // no footer: still valid zstd
  fclose(f);
  EXPECT_EQ(system(("zstd -q -t '" + cut + "'").c_str()), 0);
  remove(path.c_str());
  remove(cut.c_str());
}
