// gmt_salvage_test.cc: GMT_READ_SALVAGE (SPEC.md "Salvage") on made-up traces: every chunk, the
// index and the footer damaged in turn (gmt_salvage_check.h), complete and truncated files,
// empty chunks that only carry a dropped count, unknown record kinds, a bad block of zeros, and
// random damage (seeded) where whatever comes back must be whole chunks, in order, and every
// chunk the damage did not touch.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "formats/gmt.h"
#include "formats/gmt_internal.h"
#include "formats/gmt_salvage_check.h"
#include "formats/gmt_testutil.h"

using gmt_test::CheckSalvage;
using gmt_test::ReadAll;
using gmt_test::ReadBytes;
using gmt_test::TempPath;
using gmt_test::TraceMap;

namespace {

struct Opts {
  size_t events = 1200;
  uint32_t chunk_events = 100;
  bool close = true;
  bool drops = false;   // an empty chunk carrying only a dropped count every 3 chunks
  bool unknown = false; // a record of an unknown kind every 7 events
};

// A training-loop-like trace with callsite strings, written with the real writer.
std::string Make(const Opts &o) {
  std::string path = TempPath("s.zst");
  gmt_header_t h;
  gmt_header_init(&h);
  h.capture_mode = GMT_CAPTURE_SYNTHETIC;
  h.pid = 77;
  gmt_writer_opts_t wo = {};
  wo.chunk_events = o.chunk_events;
  gmt_writer_t *w = nullptr;
  gm_err_t err;
  EXPECT_EQ(gmt_writer_open(&w, path.c_str(), &h, &wo, &err), GM_OK) << err.msg;
  gmt_header_free(&h);
  uint32_t cs[3];
  for (int i = 0; i < 3; i++)
    EXPECT_EQ(gmt_writer_intern(w, ("model.py:" + std::to_string(10 * i) + " forward").c_str(), &cs[i], &err), GM_OK);
  std::mt19937_64 rng(42);
  for (size_t i = 0; i < o.events; i++) {
    gmt_event_t e;
    memset(&e, 0, sizeof e);
    e.ts_ns = 1000 * i;
    e.kind = i % 2 ? GMT_EV_FREE : GMT_EV_ALLOC;
    e.addr = 0x7f0000000000ull + (i / 2 % 16) * (4u << 20);
    e.size = (1 + rng() % 8) << 20;
    e.stream = 7;
    e.mem_kind = GMT_MEM_DEVICE;
    e.callsite = cs[i % 3];
    e.corr_id = i;
    if (o.unknown && i % 7 == 3) {
      gmt_event_t u = e;
      u.kind = 200;
      EXPECT_EQ(gmt_writer_append_raw(w, &u, nullptr, 0, &err), GM_OK) << err.msg;
    }
    EXPECT_EQ(gmt_writer_append(w, &e, &err), GM_OK) << err.msg;
    if (o.drops && i % (3 * o.chunk_events) == 0 && i) {
      EXPECT_EQ(gmt_writer_flush(w, &err), GM_OK);
      gmt_writer_add_dropped(w, 5);
      EXPECT_EQ(gmt_writer_flush(w, &err), GM_OK);
    }
  }
  if (o.close) EXPECT_EQ(gmt_writer_close(w, &err), GM_OK) << err.msg;
  else gmt_writer_abandon(w);
  std::string t = ReadAll(path);
  remove(path.c_str());
  return t;
}

}  // namespace

TEST(Salvage, EveryChunkAndTheIndexOfACompleteTrace) {
  std::string t = Make({});
  EXPECT_GT(CheckSalvage(t, "complete, 12 chunks"), 50);
}

TEST(Salvage, EveryChunkOfATruncatedTrace) {
  Opts o;
  o.close = false;
  std::string t = Make(o);
  EXPECT_GT(CheckSalvage(t, "truncated, 12 chunks"), 40);
}

TEST(Salvage, EmptyChunksWithDropsAndUnknownKinds) {
  Opts o;
  o.drops = true;
  o.unknown = true;
  o.chunk_events = 150;
  EXPECT_GT(CheckSalvage(Make(o), "drops and unknown kinds"), 40);
}

TEST(Salvage, OneChunkTraceLosesItsOnlyChunk) {
  Opts o;
  o.events = 50;
  EXPECT_GT(CheckSalvage(Make(o), "one chunk"), 5);
}

TEST(Salvage, StrictIsTheDefaultAndSaysWhere) {
  std::string t = Make({});
  TraceMap m;
  ASSERT_TRUE(MapTrace(t, &m));
  std::string bad = gmt_test::Flip(t, m.chunks[3].off + 100);
  gmt_reader_t *r = nullptr;
  gm_err_t err;
  ASSERT_EQ(gmt_reader_open_mem(&r, bad.data(), bad.size(), &err), GM_OK);
  gmt_event_t e;
  gm_status_t st;
  size_t n = 0;
  while ((st = gmt_reader_next(r, &e, &err)) == GM_OK) n++;
  EXPECT_EQ(st, GM_ERR_CORRUPT);
  EXPECT_EQ(n, 300u);
  std::string want = "chunk 3 at offset " + std::to_string(m.chunks[3].off) + ": checksum mismatch";
  EXPECT_EQ(std::string(err.msg), want);
  EXPECT_EQ(gmt_reader_damage(r), nullptr);
  gmt_reader_close(r);
  // The salvaging reader reports the same words as its first damage.
  gmt_test::Read s = ReadBytes(bad, GMT_READ_SALVAGE);
  EXPECT_EQ(s.damage, want);
  EXPECT_EQ(s.evs.size(), 1100u);
  EXPECT_EQ(s.stats.lost_events, 100u);
}

TEST(Salvage, BadBlockOfZerosLosesOnlyTheChunksItTouches) {
  std::string t = Make({});
  TraceMap m;
  ASSERT_TRUE(MapTrace(t, &m));
  // 1 KiB of zeros from the middle of chunk 4 (chunks here are ~350 bytes): several chunks.
  size_t from = m.chunks[4].off + m.chunks[4].len / 2, to = from + 1024;
  ASSERT_LT(to, m.index_off);
  std::string bad = t;
  std::fill(bad.begin() + (long)from, bad.begin() + (long)to, '\0');
  uint64_t touched = 0, lost = 0;
  for (auto &c : m.chunks)
    if (c.off < to && c.off + c.len > from) touched++, lost += c.events;
  ASSERT_GE(touched, 3u);
  gmt_test::Read s = ReadBytes(bad, GMT_READ_SALVAGE);
  ASSERT_EQ(s.st, GM_END) << s.msg;
  EXPECT_EQ(s.stats.damaged_chunks, touched);
  EXPECT_EQ(s.stats.lost_events, lost);
  EXPECT_EQ(s.evs.size(), 1200 - lost);
  // Without the index, the sequence numbers count the same chunks.
  bad = gmt_test::Flip(bad, m.index_off + GMT_FRAME_HDR + 12);
  s = ReadBytes(bad, GMT_READ_SALVAGE);
  ASSERT_EQ(s.st, GM_END) << s.msg;
  EXPECT_EQ(s.stats.damaged_chunks, touched);
  EXPECT_EQ(s.stats.uncounted_chunks, touched);
  EXPECT_EQ(s.evs.size(), 1200 - lost);
}

TEST(Salvage, RandomDamageGivesWholeUntouchedChunksInOrder) {
  std::string t = Make({});
  TraceMap m;
  ASSERT_TRUE(MapTrace(t, &m));
  std::vector<std::vector<gmt_event_t>> per;
  for (auto &c : m.chunks) per.push_back(ReadBytes(t.substr(0, m.header_len) + t.substr(c.off, c.len), 0).evs);
  std::mt19937_64 rng(20261125);
  for (int round = 0; round < 300; round++) {
    std::string bad = t;
    int flips = 1 + (int)(rng() % 6);
    std::vector<size_t> at;
    for (int k = 0; k < flips; k++) at.push_back(m.header_len + rng() % (t.size() - m.header_len));
    std::sort(at.begin(), at.end());
    at.erase(std::unique(at.begin(), at.end()), at.end());
    for (size_t a : at) bad[a] = (char)(bad[a] ^ (1 + rng() % 255));
    SCOPED_TRACE("round " + std::to_string(round));
    gmt_test::Read s = ReadBytes(bad, GMT_READ_SALVAGE);
    ASSERT_EQ(s.st, GM_END) << s.msg;
    std::vector<gmt_event_t> want;
    uint64_t touched = 0;
    for (size_t j = 0; j < m.chunks.size(); j++) {
      bool hit = false;
      for (size_t a : at) hit |= a >= m.chunks[j].off && a < m.chunks[j].off + m.chunks[j].len;
      if (hit) touched++;
      else want.insert(want.end(), per[j].begin(), per[j].end());
    }
    EXPECT_TRUE(gmt_test::SameEvents(s.evs, want)) << s.evs.size() << " events, want " << want.size();
    if (!s.stats.index_damaged) {
      EXPECT_EQ(s.stats.damaged_chunks, touched);
    } else {
      EXPECT_LE(s.stats.damaged_chunks, touched);  // a damaged tail counts as one chunk
    }
    EXPECT_EQ(s.stats.damaged_chunks > 0, touched > 0);
  }
}
