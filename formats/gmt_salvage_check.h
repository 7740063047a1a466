// gmt_salvage_check.h: the salvage property (SPEC.md "Salvage") checked on one trace's bytes:
// damage each chunk in turn (a byte of its compressed data, of its descriptor, its frame
// magic), the index, the footer, and a chunk together with the index, and read with
// GMT_READ_SALVAGE. Every other chunk's events must come back exactly, in order, and the stats
// must count exactly what was lost. Used by formats/gmt_salvage_test.cc (made-up traces) and
// tests/salvage (every real trace in traces/).
#ifndef GMT_SALVAGE_CHECK_H
#define GMT_SALVAGE_CHECK_H

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "formats/gmt.h"
#include "formats/gmt_internal.h"

namespace gmt_test {

struct ChunkSpan {
  size_t off, len;  // descriptor frame + zstd frame
  uint32_t events;  // records, as the descriptor says (unknown kinds included)
};

struct TraceMap {
  size_t header_len = 0, index_off = 0, footer_off = 0;
  bool complete = false;  // ends in index + footer
  std::vector<ChunkSpan> chunks;
};

// Where the frames of a good trace lie (the test's own walk, independent of the reader's).
inline bool MapTrace(const std::string &t, TraceMap *m) {
  const uint8_t *b = reinterpret_cast<const uint8_t *>(t.data());
  if (t.size() < GMT_FRAME_HDR) return false;
  size_t pos = GMT_FRAME_HDR + gmt_get32(b + 4);
  m->header_len = pos;
  while (pos + GMT_FRAME_HDR <= t.size()) {
    uint32_t magic = gmt_get32(b + pos), size = gmt_get32(b + pos + 4);
    if (magic == GMT_MAGIC_CHUNK) {
      const uint8_t *d = b + pos + GMT_FRAME_HDR;
      size_t len = GMT_FRAME_HDR + size + gmt_get32(d + 40);
      m->chunks.push_back({pos, len, gmt_get32(d + 32)});
      pos += len;
    } else if (magic == GMT_MAGIC_INDEX) {
      m->index_off = pos;
      m->footer_off = pos + GMT_FRAME_HDR + size;
      m->complete = m->footer_off + GMT_FOOTER_FRAME == t.size();
      return true;
    } else {
      pos += GMT_FRAME_HDR + size;
    }
  }
  return pos == t.size();
}

struct Read {
  gm_status_t st = GM_OK;  // of open, else of the last next_batch (GM_END when all went well)
  std::vector<gmt_event_t> evs;
  gmt_reader_stats_t stats{};
  std::string msg, damage;
};

inline Read ReadBytes(const std::string &t, unsigned flags) {
  Read r;
  gmt_reader_t *rd = nullptr;
  gm_err_t err;
  gm_err_clear(&err);
  r.st = gmt_reader_open_mem_flags(&rd, t.data(), t.size(), flags, &err);
  if (r.st != GM_OK) {
    r.msg = err.msg;
    return r;
  }
  gmt_event_t buf[1024];
  size_t n = 0;
  while ((r.st = gmt_reader_next_batch(rd, buf, 1024, &n, &err)) == GM_OK) r.evs.insert(r.evs.end(), buf, buf + n);
  if (r.st < 0) r.msg = err.msg;
  r.stats = *gmt_reader_stats(rd);
  if (gmt_reader_damage(rd)) r.damage = gmt_reader_damage(rd);
  gmt_reader_close(rd);
  return r;
}

inline bool SameEvents(const std::vector<gmt_event_t> &a, const std::vector<gmt_event_t> &b) {
  return a.size() == b.size() && (a.empty() || memcmp(a.data(), b.data(), a.size() * sizeof a[0]) == 0);
}

// Flips bits of byte at (t[off] ^= 0x5a): always a change.
inline std::string Flip(std::string t, size_t off) {
  t[off] = (char)(t[off] ^ 0x5a);
  return t;
}

// Checks the whole property on trace bytes t (a good trace, complete or truncated). Returns
// the number of damaged reads checked.
inline int CheckSalvage(const std::string &t, const std::string &label) {
  SCOPED_TRACE(label);
  TraceMap m;
  EXPECT_TRUE(MapTrace(t, &m)) << "not a well-formed trace";
  Read good = ReadBytes(t, GMT_READ_STRICT);
  EXPECT_EQ(good.st, GM_END) << good.msg;
  if (good.st != GM_END) return 0;
  // Each chunk's own events: the header with that chunk alone (a truncated file) reads them.
  std::vector<std::vector<gmt_event_t>> per;
  std::vector<uint64_t> dropped;
  for (const ChunkSpan &c : m.chunks) {
    Read alone = ReadBytes(t.substr(0, m.header_len) + t.substr(c.off, c.len), GMT_READ_STRICT);
    per.push_back(alone.evs);
    dropped.push_back(alone.stats.dropped);
  }
  size_t total = 0;
  for (auto &p : per) total += p.size();
  EXPECT_EQ(total, good.evs.size()) << "chunks do not add up";
  int checked = 0;
  auto expect_without = [&](size_t i) {
    std::vector<gmt_event_t> v;
    for (size_t j = 0; j < per.size(); j++)
      if (j != i) v.insert(v.end(), per[j].begin(), per[j].end());
    return v;
  };
  auto check = [&](const std::string &bad, const std::string &what, size_t lost_chunk, bool index_ok,
                   bool strict_sees_it = true) {
    SCOPED_TRACE(what);
    checked++;
    Read strict = ReadBytes(bad, GMT_READ_STRICT);
    if (strict_sees_it) {
      EXPECT_EQ(strict.st, GM_ERR_CORRUPT) << "a strict reader must refuse: " << strict.msg;
    }
    Read s = ReadBytes(bad, GMT_READ_SALVAGE);
    ASSERT_EQ(s.st, GM_END) << s.msg;
    EXPECT_FALSE(s.damage.empty());
    EXPECT_EQ(s.stats.index_damaged, index_ok ? 0 : 1);
    EXPECT_EQ(s.stats.truncated, good.stats.truncated);
    if (lost_chunk == SIZE_MAX) {  // nothing but the index was damaged: everything comes back
      EXPECT_TRUE(SameEvents(s.evs, good.evs)) << s.evs.size() << " of " << good.evs.size() << " events";
      EXPECT_EQ(s.stats.damaged_chunks, 0u);
      EXPECT_FALSE(gmt_stats_partial(&s.stats));
      return;
    }
    std::vector<gmt_event_t> want = expect_without(lost_chunk);
    EXPECT_TRUE(SameEvents(s.evs, want)) << s.evs.size() << " events, want " << want.size();
    EXPECT_EQ(s.stats.damaged_chunks, 1u);
    EXPECT_TRUE(gmt_stats_partial(&s.stats));
    EXPECT_EQ(s.stats.chunks, m.chunks.size() - 1);
    if (index_ok && m.complete) {  // the index says how many events were lost
      EXPECT_EQ(s.stats.lost_events, m.chunks[lost_chunk].events);
      EXPECT_EQ(s.stats.uncounted_chunks, 0u);
    } else {  // found by scanning: the chunk is counted, its events are not known
      EXPECT_EQ(s.stats.lost_events, 0u);
      EXPECT_EQ(s.stats.uncounted_chunks, 1u);
    }
    EXPECT_EQ(s.stats.seq_gaps, good.stats.seq_gaps);
    // the damaged chunk's count of records the source dropped is lost with it
    EXPECT_EQ(s.stats.dropped + dropped[lost_chunk], good.stats.dropped);
  };
  for (size_t i = 0; i < m.chunks.size(); i++) {
    const ChunkSpan &c = m.chunks[i];
    std::string n = "chunk " + std::to_string(i) + " of " + std::to_string(m.chunks.size());
    size_t data = c.off + GMT_FRAME_HDR + GMT_CHUNK_DESC_SIZE;  // the zstd frame
    check(Flip(t, data + (c.off + c.len - data) / 2), n + ": a byte of its compressed data", i, true);
    check(Flip(t, c.off + GMT_FRAME_HDR + 16), n + ": its sequence number", i, true);
    check(Flip(t, c.off + 1), n + ": its frame magic", i, true);
    // A frame size that runs past the end of a truncated file looks like the truncation itself
    // to a strict reader; salvage tells them apart by finding good chunks after it, which the
    // last chunk does not have.
    if (m.complete || i + 1 < m.chunks.size())
      check(Flip(t, c.off + 5), n + ": its frame size", i, true, m.complete);
    if (m.complete) {
      // the index and this chunk: the chunk is found by scanning
      check(Flip(Flip(t, data + (c.off + c.len - data) / 2), m.index_off + GMT_FRAME_HDR + 12),
            n + " and the index", i, false);
    }
  }
  if (m.complete) {
    check(Flip(t, m.index_off + GMT_FRAME_HDR + 12), "the index's chunk count", SIZE_MAX, false);
    check(Flip(t, m.footer_off - 3), "the last byte of the index's last entry", SIZE_MAX, false);
    check(Flip(t, m.footer_off + 14), "the footer's index offset", SIZE_MAX, false);
    check(Flip(t, m.footer_off + 9), "the footer's magic", SIZE_MAX, false);
  }
  return checked;
}

}  // namespace gmt_test
#endif
