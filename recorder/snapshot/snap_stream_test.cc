// Tests of the merge of a long streamed recording (snap_merge_streamed.c): the CUPTI side
// read again from the file (what it holds is PyTorch's possible driver calls, not the recording)
// gives the same bytes as the merge that held every CUPTI event; every request is in the merged
// trace, in order; a cut or damaged recording merges as far as it goes and says so.
// The recording: bench/synth's training loop as gpurec's default mode streams it (gmsynth
// --streamed), with other libraries' memory, usage samples, failed calls and pool trims woven in.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "bench/synth/synth.h"
#include "formats/gmt.h"
#include "recorder/snapshot/snap_internal.h"

namespace {

std::string TmpPath(const std::string &name) {
  const char *d = getenv("TEST_TMPDIR");
  return std::string(d ? d : "/tmp") + "/" + name;
}

std::string Bytes(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

struct Trace {
  gmt_header_t h;
  std::vector<gmt_event_t> ev;
  std::vector<std::string> cs;
  gmt_reader_stats_t st{};
  explicit Trace(const std::string &path, unsigned flags = GMT_READ_STRICT) {
    gmt_header_init(&h);
    gm_err_t err{};
    gmt_reader_t *r = nullptr;
    if (gmt_reader_open_flags(&r, path.c_str(), flags, &err) != GM_OK) {
      ADD_FAILURE() << err.msg;
      return;
    }
    gmt_header_copy(&h, gmt_reader_header(r), &err);
    gmt_event_t e;
    while (gmt_reader_next(r, &e, &err) == GM_OK) {
      ev.push_back(e);
      const char *t = e.callsite != GMT_NO_STRING ? gmt_reader_string(r, e.callsite) : nullptr;
      cs.push_back(t ? t : "");
    }
    st = *gmt_reader_stats(r);
    gmt_reader_close(r);
  }
  ~Trace() { gmt_header_free(&h); }
  std::string kv(const char *k) const {
    const char *v = gmt_header_kv_get(&h, k);
    return v ? v : "(absent)";
  }
};

const uint64_t kForeign = 0x10000000ull;

// What the merge makes of a CUPTI event woven in (its kind, flags).
struct Woven {
  int external = 0, kept = 0, left_out = 0;
};

// n streamed events of the training loop (callsites on), every 97th followed by a CUPTI event of
// another library or of no one's memory: an NCCL-like device buffer (with its owner's callsite)
// and its free, pinned host memory, a VMM reserve, a device usage sample, a failed cudaMalloc,
// a pool trim, an older recorder's alloc_site note. With churn, every 211th also by a cache
// emptied and filled again: one of three 2 MiB segments freed and allocated again, each with the
// driver's call beside it (one in 5 allocs' calls written a round late, after the allocator's
// event, as CUPTI's buffers may deliver them; one in 7 never seen, and so the free of that
// segment is not the free of anything the driver allocated), and every 307th by an expandable
// segment's map or
// unmap of one of four ranges, with the driver's call.
void WriteRecording(const std::string &path, uint64_t n, uint32_t chunk_events, Woven *w, bool churn = false) {
  synth_opts_t o{};
  o.events = n;
  o.seed = 7;
  o.layers = 4;
  o.hidden = 512;
  o.callsites = 1;
  o.streamed = 1;
  gmt_header_t h;
  gm_err_t err{};
  ASSERT_EQ(synth_header(&o, &h, &err), GM_OK) << err.msg;
  gmt_writer_opts_t wo{};
  wo.chunk_events = chunk_events;
  gmt_writer_t *wr = nullptr;
  ASSERT_EQ(gmt_writer_open(&wr, path.c_str(), &h, &wo, &err), GM_OK) << err.msg;
  gmt_header_free(&h);
  for (int i = 0; i < SYNTH_N_STRINGS; i++) {
    uint32_t id;
    ASSERT_EQ(gmt_writer_intern(wr, synth_strings[i], &id, &err), GM_OK);
  }
  for (int i = 0; i < SYNTH_N_CALLSITES; i++) {
    uint32_t id;
    ASSERT_EQ(gmt_writer_intern(wr, synth_callsites[i], &id, &err), GM_OK);
  }
  uint32_t owner;
  ASSERT_EQ(gmt_writer_intern(wr, "nccl/transport.cc:88:alloc", &owner, &err), GM_OK);
  synth_gen_t *g = synth_gen_new(&o);
  ASSERT_NE(g, nullptr);
  uint64_t done = 0, woven = 0, corr = 1u << 30, cycles = 0, maps = 0;
  std::vector<gmt_event_t> late;  // driver calls CUPTI delivers a few rounds late
  gmt_event_t e;
  auto pair = [&](uint8_t kind, uint64_t addr, uint64_t size, bool call, bool defer) {
    gmt_event_t d{}, t{};
    d.ts_ns = t.ts_ns = e.ts_ns;
    d.kind = kind == GMT_EV_SEGMENT_ALLOC ? (uint8_t)GMT_EV_ALLOC : kind == GMT_EV_SEGMENT_FREE ? (uint8_t)GMT_EV_FREE : kind;
    d.addr = t.addr = addr;
    d.size = t.size = size;
    d.mem_kind = t.mem_kind = GMT_MEM_DEVICE;
    d.stream = GMT_STREAM_NONE;
    d.callsite = t.callsite = GMT_NO_STRING;
    d.context = 1;
    d.corr_id = ++corr;
    t.kind = kind;
    t.stream = 7;
    t.flags = GMT_F_TORCH_STREAM;
    if (call && !defer) {
      ASSERT_EQ(gmt_writer_append(wr, &d, &err), GM_OK) << err.msg;
    }
    if (call && defer) late.push_back(d);
    ASSERT_EQ(gmt_writer_append(wr, &t, &err), GM_OK) << err.msg;
  };
  while (done < n) {
    ASSERT_EQ(synth_gen_next(g, &e, 1), 1u);
    ASSERT_EQ(gmt_writer_append(wr, &e, &err), GM_OK) << err.msg;
    ++done;
    if (churn && done % 211 == 0) {
      uint64_t j = cycles++, a = 0x7d0000000000ull + (j % 3) * (4u << 20);
      for (const gmt_event_t &d : late) ASSERT_EQ(gmt_writer_append(wr, &d, &err), GM_OK) << err.msg;
      late.clear();
      if (j >= 3) pair(GMT_EV_SEGMENT_FREE, a, 2u << 20, true, false);
      pair(GMT_EV_SEGMENT_ALLOC, a, 2u << 20, j % 7 != 6, j % 5 == 4);
    }
    if (churn && done % 307 == 0) {
      uint64_t k = maps++, r = 0x7c0000000000ull + (k / 2 % 4) * (2u << 20);
      pair(k % 2 ? GMT_EV_VMM_UNMAP : GMT_EV_VMM_MAP, r, 2u << 20, true, false);
    }
    if (done % 97) continue;
    gmt_event_t c{};
    c.ts_ns = e.ts_ns;
    c.stream = GMT_STREAM_NONE;
    c.callsite = GMT_NO_STRING;
    c.mem_kind = GMT_MEM_DEVICE;
    c.context = 1;
    c.corr_id = ++corr;
    c.size = 1u << 20;
    int k = (int)(woven++ % 8);
    switch (k) {
      case 0: c.kind = GMT_EV_ALLOC, c.addr = kForeign + woven * 4096, c.callsite = owner, w->external++; break;
      case 1: c.kind = GMT_EV_FREE, c.addr = kForeign + (woven - 1) * 4096, w->external++; break;
      case 2: c.kind = GMT_EV_ALLOC, c.mem_kind = GMT_MEM_PINNED, c.addr = 0x5000 + woven, w->external++; break;
      case 3: c.kind = GMT_EV_VMM_RESERVE, c.addr = 0x7e0000000000ull + woven * (2u << 20), w->external++; break;
      case 4: c.kind = GMT_EV_DEVICE_USAGE, c.addr = GMT_USAGE_PROCESS, c.size = 500u << 20, w->kept++; break;
      case 5: c.kind = GMT_EV_ALLOC_FAILED, c.size = 1ull << 40, w->left_out++; break;
      case 6: c.kind = GMT_EV_EMPTY_CACHE, c.size = 0, w->left_out++; break;
      default: c.kind = GMT_EV_ALLOC_SITE, c.addr = 0x1234, c.callsite = owner, w->left_out++; break;
    }
    ASSERT_EQ(gmt_writer_append(wr, &c, &err), GM_OK) << err.msg;
  }
  for (const gmt_event_t &d : late) ASSERT_EQ(gmt_writer_append(wr, &d, &err), GM_OK) << err.msg;
  synth_gen_free(g);
  ASSERT_EQ(gmt_writer_close(wr, &err), GM_OK) << err.msg;
}

// The merged trace's requests are the recording's streamed events, in order, flag cleared, on
// microseconds; the first `upto` of them when the recording was cut.
void ExpectRequests(const Trace &rec, const Trace &m, size_t *nreq) {
  std::vector<size_t> want;
  for (size_t i = 0; i < rec.ev.size(); i++)
    if (rec.ev[i].flags & GMT_F_TORCH_STREAM) want.push_back(i);
  size_t k = 0;
  uint64_t last = 0;
  for (size_t i = 0; i < m.ev.size(); i++) {
    const gmt_event_t &e = m.ev[i];
    ASSERT_FALSE(e.flags & GMT_F_TORCH_STREAM) << i;
    ASSERT_GE(e.ts_ns, last) << i;
    last = e.ts_ns;
    if ((e.flags & GMT_F_EXTERNAL) || e.kind == GMT_EV_MARKER || e.kind == GMT_EV_DEVICE_USAGE) continue;
    ASSERT_LT(k, want.size()) << i;
    const gmt_event_t &r = rec.ev[want[k]];
    ASSERT_EQ(e.kind, r.kind) << i;
    ASSERT_EQ(e.addr, r.addr) << i;
    ASSERT_EQ(e.size, r.size) << i;
    ASSERT_EQ(e.stream, r.stream) << i;
    ASSERT_EQ(e.ts_ns / 1000, r.ts_ns / 1000) << i;
    ASSERT_EQ(m.cs[i], rec.cs[want[k]]) << i;
    k++;
  }
  *nreq = k;
}

}  // namespace

// The merge that reads the CUPTI side again from the file writes the very bytes of the one that
// held it, and every request is there.
TEST(SnapStream, MergeEqualsTheMergeThatHeldEverything) {
  std::string rec = TmpPath("long.rec.zst"), a = TmpPath("long.a.zst"), b = TmpPath("long.b.zst");
  Woven w;
  WriteRecording(rec, 600000, 8192, &w, true);
  gm_err_t err{};
  snap_merge_stats_t ma, mb;
  ASSERT_EQ(snap_merge_file(nullptr, rec.c_str(), a.c_str(), "none", nullptr, &ma, &err), GM_OK) << err.msg;
  ASSERT_EQ(snap_merge_file_held(nullptr, rec.c_str(), b.c_str(), &mb, &err), GM_OK) << err.msg;
  std::string ba = Bytes(a), bb = Bytes(b);
  ASSERT_GT(ba.size(), 100000u);
  EXPECT_TRUE(ba == bb) << "the merges differ (" << ba.size() << " vs " << bb.size() << " bytes)";
  EXPECT_EQ(ma.external, mb.external);
  EXPECT_EQ(ma.cupti_dropped, mb.cupti_dropped);
  EXPECT_EQ(ma.segments, mb.segments);
  EXPECT_EQ(ma.segments_seen, mb.segments_seen);
  // other libraries' memory, and the driver's frees of segments whose alloc it never saw
  EXPECT_GT(ma.external, (uint64_t)w.external);
  Trace r(rec), m(a);
  size_t nreq = 0, markers = 0, usage = 0, ext = 0, owned = 0;
  ExpectRequests(r, m, &nreq);
  EXPECT_EQ(nreq, ma.entries);
  for (size_t i = 0; i < m.ev.size(); i++) {
    markers += m.ev[i].kind == GMT_EV_MARKER;
    usage += m.ev[i].kind == GMT_EV_DEVICE_USAGE;
    ext += (m.ev[i].flags & GMT_F_EXTERNAL) != 0;
    owned += m.cs[i] == "nccl/transport.cc:88:alloc";
    EXPECT_NE(m.ev[i].kind, GMT_EV_ALLOC_SITE) << i;
    EXPECT_NE(m.ev[i].kind, GMT_EV_EMPTY_CACHE) << i;
  }
  EXPECT_EQ(ext, ma.external);
  EXPECT_EQ(usage, (size_t)w.kept);
  EXPECT_GT(markers, 100u);
  EXPECT_EQ(owned, (size_t)(w.external + 3) / 4);  // the foreign buffers keep their owner's line
  EXPECT_EQ(m.kv("torch_history.source"), "stream");
  EXPECT_GT(ma.segments, 5000u);
  // each segment call took its driver call's identity but those whose call was never seen
  // (one alloc in 7, and the free of each of those)
  EXPECT_LT(ma.segments_seen, ma.segments);
  EXPECT_GT(ma.segments_seen, ma.segments * 8 / 10);
  EXPECT_LT(ma.segments_seen, ma.segments * 9 / 10);
  EXPECT_EQ(m.kv("coverage"), "complete");
}

// A recording cut in the middle (its process killed, its file truncated) merges up to its last
// whole chunk; the header says the trace is partial and where it stops. A damaged chunk inside
// is skipped: partial, the events after it still merged.
TEST(SnapStream, CutOrDamagedRecordingMergesAsFarAsItGoes) {
  std::string rec = TmpPath("cut.rec.zst"), cut = TmpPath("cut.cut.zst"), out = TmpPath("cut.out.zst");
  Woven w;
  WriteRecording(rec, 200000, 4096, &w);
  std::string all = Bytes(rec);
  {
    std::ofstream f(cut, std::ios::binary);
    f.write(all.data(), (std::streamsize)(all.size() * 6 / 10));
  }
  gm_err_t err{};
  snap_merge_stats_t ms;
  ASSERT_EQ(snap_merge_file(nullptr, cut.c_str(), out.c_str(), "none", nullptr, &ms, &err), GM_OK) << err.msg;
  EXPECT_TRUE(ms.cupti_truncated);
  Trace r(cut, GMT_READ_SALVAGE), m(out);
  ASSERT_TRUE(r.st.truncated);
  size_t nreq = 0;
  ExpectRequests(r, m, &nreq);
  EXPECT_GT(nreq, 50000u);
  EXPECT_LT(nreq, 150000u);
  gmt_coverage_t c;
  gmt_coverage(&m.h, nullptr, &c);
  EXPECT_TRUE(c.partial);
  EXPECT_TRUE(c.why & GMT_COV_CUPTI_LOST);
  EXPECT_TRUE(c.why & GMT_COV_TRUNCATED);
  ASSERT_TRUE(c.has_end);
  EXPECT_EQ(c.to_event, m.ev.size());
  EXPECT_EQ(c.to_ns, m.ev.back().ts_ns);

  // a damaged chunk in the middle of the whole recording
  std::string bad = all;
  for (size_t i = bad.size() / 2; i < bad.size() / 2 + 64; i++) bad[i] ^= 0x5a;
  {
    std::ofstream f(cut, std::ios::binary);
    f.write(bad.data(), (std::streamsize)bad.size());
  }
  ASSERT_EQ(snap_merge_file(nullptr, cut.c_str(), out.c_str(), "none", nullptr, &ms, &err), GM_OK) << err.msg;
  Trace rd(cut, GMT_READ_SALVAGE), md(out);
  ASSERT_GT(rd.st.damaged_chunks, 0u);
  ExpectRequests(rd, md, &nreq);
  EXPECT_GT(nreq, 150000u);
  gmt_coverage(&md.h, nullptr, &c);
  EXPECT_TRUE(c.partial);
  EXPECT_TRUE(c.why & GMT_COV_CUPTI_LOST);
  EXPECT_FALSE(c.has_end);  // a gap, not an end
}
