// Tests of the torch-history merge (snap_merge.c): a real snapshot of the corpus merged with a
// CUPTI trace made to look like the one the same process would have written (PyTorch's segment
// calls as the driver saw them, a little later than the history says, plus other libraries'
// memory), checked event by event against the plain import.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "formats/gmt.h"
#include "recorder/snapshot/snap_import.h"
#include "formats/pk_testutil.h"

namespace {

std::string TmpPath(const std::string &name) {
  const char *d = getenv("TEST_TMPDIR");
  return std::string(d ? d : "/tmp") + "/" + name;
}

std::string Corpus(const char *name) {
  const char *src = getenv("TEST_SRCDIR");
  return std::string(src ? src : ".") + "/gpumem/traces/snapshots/" + name;
}

struct Trace {
  gmt_header_t h;
  std::vector<gmt_event_t> ev;
  std::vector<std::string> cs;  // each event's callsite text, "" if none
  explicit Trace(const std::string &path) {
    gmt_header_init(&h);
    gm_err_t err{};
    gmt_reader_t *r = nullptr;
    if (gmt_reader_open(&r, path.c_str(), &err) != GM_OK) {
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
    gmt_reader_close(r);
  }
  ~Trace() { gmt_header_free(&h); }
  std::string kv(const char *k) const {
    const char *v = gmt_header_kv_get(&h, k);
    return v ? v : "(absent)";
  }
};

const uint64_t kLater = 5000000000ull;  // the history starts 5 s after the CUPTI trace
const uint64_t kNccl = 0x10000000ull, kForeignMap = 0x20000000ull;

// The CUPTI trace of the process: each segment call of the import as the driver saw it (300 ns
// after the history's time), and other libraries' memory: an NCCL buffer, pinned host memory, a
// VMM map of a range PyTorch never had, a failed 2 GiB cudaMalloc, a pool trim.
// notes: also the recorder's alloc_site note of every history allocation ("train.py:<n>:step",
// n counting the allocations), with what can go wrong: three notes from before the history, the
// note of allocation 10 lost, an extra note after allocation 20, and allocation 30's made on a
// thread without Python frames (a note without callsite).
// streamed: also each of the import's requests as the recorder streams PyTorch's allocator trace
// (rec_torch_stream.c): flagged GMT_F_TORCH_STREAM, on the CUPTI trace's clock, an OOM's free
// bytes in corr_id; no callsite, or with stream_sites each alloc's "train.py:<n>:step" as the
// tracker reads it (allocation 30's on a thread without Python frames: none).
void WriteCupti(const std::string &path, const Trace &imp, size_t *segment_calls, bool notes = false,
                bool streamed = false, bool stream_sites = false) {
  gmt_header_t h;
  gmt_header_init(&h);
  h.capture_mode = GMT_CAPTURE_NATIVE;
  h.pid = 4242;
  h.start_time_ns = imp.h.start_time_ns - kLater;
  gmt_header_set(&h.gpu_name, "fake GPU", nullptr);
  gmt_header_set(&h.command_line, "python3 train.py", nullptr);
  gmt_header_kv_set(&h, "gpurec_mode", "auto", nullptr);
  gmt_header_kv_set(&h, "framework.pytorch", "2.11.0", nullptr);
  gmt_writer_t *w = nullptr;
  gm_err_t err{};
  ASSERT_EQ(gmt_writer_open(&w, path.c_str(), &h, nullptr, &err), GM_OK) << err.msg;
  std::vector<gmt_event_t> out;
  auto ev = [&](uint64_t ts, unsigned kind, uint64_t addr, uint64_t size, unsigned mem) {
    gmt_event_t e{};
    e.ts_ns = ts;
    e.kind = (uint8_t)kind;
    e.addr = addr;
    e.size = size;
    e.stream = GMT_STREAM_NONE;
    e.mem_kind = (uint8_t)mem;
    e.corr_id = out.size() + 1;
    e.context = 1;
    out.push_back(e);
  };
  *segment_calls = 0;
  ev(1000, GMT_EV_ALLOC, kNccl, 64 << 20, GMT_MEM_DEVICE);
  ev(2000, GMT_EV_ALLOC, 0x30000000ull, 1 << 20, GMT_MEM_PINNED);
  ev(3000, GMT_EV_VMM_MAP, kForeignMap, 2 << 20, GMT_MEM_DEVICE);
  size_t nalloc = 0;
  auto note = [&](uint64_t ts, uint64_t addr, uint16_t dev, const std::string &site) {
    ev(ts, GMT_EV_ALLOC_SITE, addr, 512, GMT_MEM_DEVICE);
    out.back().device = dev;
    out.back().corr_id = 0;
    out.back().callsite = GMT_NO_STRING;
    if (!site.empty()) {
      ASSERT_EQ(gmt_writer_intern(w, site.c_str(), &out.back().callsite, &err), GM_OK);
    }
  };
  if (notes)
    for (uint64_t k = 0; k < 3; k++) note(3100 + k, 0x7000000 + 512 * k, 0, "warmup.py:1:before");
  for (const gmt_event_t &e : imp.ev) {
    if (streamed && !(e.flags & GMT_F_SYNTHETIC) && e.kind != GMT_EV_MARKER) {
      ev(kLater + e.ts_ns, e.kind, e.addr, e.size, GMT_MEM_DEVICE);
      out.back().flags = GMT_F_TORCH_STREAM;
      out.back().stream = e.stream;
      out.back().device = e.device;
      out.back().corr_id = 0;
      out.back().callsite = GMT_NO_STRING;
      if (stream_sites && e.kind == GMT_EV_ALLOC) {
        size_t n = nalloc++;
        if (n != 30) {
          std::string site = "train.py:" + std::to_string(n) + ":step";
          ASSERT_EQ(gmt_writer_intern(w, site.c_str(), &out.back().callsite, &err), GM_OK);
        }
      }
    }
    if (notes && e.kind == GMT_EV_ALLOC && !(e.flags & GMT_F_SYNTHETIC)) {
      size_t n = nalloc++;
      if (n != 10) note(kLater + e.ts_ns + 100, e.addr, e.device, n == 30 ? "" : "train.py:" + std::to_string(n) + ":step");
      if (n == 20) note(kLater + e.ts_ns + 150, 0xdead000, e.device, "train.py:999:extra");
    }
    unsigned kind = 0;
    if (e.kind == GMT_EV_SEGMENT_ALLOC) kind = GMT_EV_ALLOC;
    if (e.kind == GMT_EV_SEGMENT_FREE) kind = GMT_EV_FREE;
    if (e.kind == GMT_EV_VMM_MAP || e.kind == GMT_EV_VMM_UNMAP) kind = e.kind;
    if (!kind || (e.flags & GMT_F_SYNTHETIC)) continue;
    ev(kLater + e.ts_ns + 300, kind, e.addr, e.size, GMT_MEM_DEVICE);
    (*segment_calls)++;
  }
  uint64_t end = out.back().ts_ns;
  ev(end + 10, GMT_EV_ALLOC_FAILED, 0, 2ull << 30, GMT_MEM_DEVICE);
  ev(end + 20, GMT_EV_EMPTY_CACHE, 0, 0, GMT_MEM_DEVICE);
  ev(end + 30, GMT_EV_FREE, kNccl, 64 << 20, GMT_MEM_DEVICE);
  ASSERT_EQ(gmt_writer_append_n(w, out.data(), out.size(), &err), GM_OK) << err.msg;
  ASSERT_EQ(gmt_writer_close(w, &err), GM_OK) << err.msg;
  gmt_header_free(&h);
}

void CheckMerge(const char *pickle, bool vmm) {
  std::string snap = Corpus(pickle), plain = TmpPath(std::string(pickle) + ".plain.zst"),
              cupti = TmpPath(std::string(pickle) + ".cupti.zst");
  gm_err_t err{};
  snap_import_stats_t ist;
  ASSERT_EQ(snap_import_file(snap.c_str(), plain.c_str(), nullptr, &ist, &err), GM_OK) << err.msg;
  Trace imp(plain);
  size_t calls = 0;
  WriteCupti(cupti, imp, &calls);
  ASSERT_GT(calls, 0u);
  snap_merge_stats_t ms;
  // out == the CUPTI trace: it is read whole, then replaced (what gpurec does)
  ASSERT_EQ(snap_merge_file(snap.c_str(), cupti.c_str(), cupti.c_str(), "none", nullptr, &ms, &err), GM_OK)
      << err.msg;
  Trace m(cupti);
  EXPECT_EQ(m.h.capture_mode, (uint32_t)GMT_CAPTURE_TORCH_HISTORY);
  EXPECT_STREQ(gmt_capture_mode_name(m.h.capture_mode), "torch-history");
  EXPECT_EQ(m.h.start_time_ns, imp.h.start_time_ns - kLater);  // the CUPTI trace's clock
  EXPECT_EQ(m.h.pid, 4242u);                                    // its provenance
  EXPECT_STREQ(m.h.gpu_name, "fake GPU");
  EXPECT_EQ(m.kv("torch_history.stacks"), "none");
  EXPECT_EQ(m.kv("torch_history.clock"), "cupti");
  EXPECT_EQ(m.kv("gpurec_mode"), "auto");
  EXPECT_EQ(m.kv("torch.snapshot.devices"), imp.kv("torch.snapshot.devices"));  // the snapshot's
  EXPECT_EQ(gmt_header_frameworks(&m.h), GMT_FW_PYTORCH);
  // every segment call of PyTorch matched; the failed cudaMalloc and the trim left out
  EXPECT_EQ(ms.cupti_dropped, calls + 2);
  EXPECT_EQ(ms.external, 4u);  // NCCL alloc + free, pinned, the foreign map
  EXPECT_EQ(m.kv("torch_history.segments_seen_by_cupti"), m.kv("torch_history.segments"));
  EXPECT_EQ(m.kv("torch_history.external_events"), "4");
  // the history's events, in the import's order, fields as the import's, times moved 5 s on
  std::vector<gmt_event_t> hist, ext;
  for (const gmt_event_t &e : m.ev) (e.flags & GMT_F_EXTERNAL ? ext : hist).push_back(e);
  ASSERT_EQ(hist.size(), imp.ev.size());
  uint64_t prev = 0;
  size_t seg_ids = 0;
  for (size_t i = 0; i < hist.size(); i++) {
    const gmt_event_t &a = hist[i], &b = imp.ev[i];
    ASSERT_EQ(a.kind, b.kind) << i;
    ASSERT_EQ(a.addr, b.addr) << i;
    ASSERT_EQ(a.size, b.size) << i;
    ASSERT_EQ(a.stream, b.stream) << i;
    ASSERT_EQ(a.flags, b.flags) << i;
    ASSERT_EQ(a.callsite, b.callsite) << i;
    ASSERT_EQ(a.ts_ns, b.ts_ns + kLater) << i;
    bool seg = a.kind == GMT_EV_SEGMENT_ALLOC || a.kind == GMT_EV_SEGMENT_FREE;
    if (seg && !(a.flags & GMT_F_SYNTHETIC)) {
      EXPECT_NE(a.corr_id, 0u) << "segment " << i << " carries the driver call's correlation id";
      seg_ids++;
    }
  }
  EXPECT_EQ(vmm, seg_ids == 0);  // expandable segments map instead
  for (const gmt_event_t &e : m.ev) {
    EXPECT_GE(e.ts_ns, prev);
    prev = e.ts_ns;
  }
  ASSERT_EQ(ext.size(), 4u);
  EXPECT_EQ(ext[0].addr, kNccl);
  EXPECT_EQ(ext[0].kind, GMT_EV_ALLOC);
  EXPECT_EQ(ext[2].kind, GMT_EV_VMM_MAP);
  EXPECT_EQ(ext[3].kind, GMT_EV_FREE);
  EXPECT_EQ(ext[3].addr, kNccl);
}

// gpurec's default with PyTorch's allocator trace streamed: the snapshot dumped where the stream
// starts (no entries, the allocator's settings) and the entries in the CUPTI trace give the same
// requests as the history with every entry would: same kinds, addresses, sizes, streams, order
// and times (to the microsecond the history keeps), the segments matched to the driver's calls.
TEST(SnapMerge, StreamedEntriesMergeAsTheHistory) {
  std::string snap = Corpus("train_amp.default.pickle"), plain = TmpPath("stream.plain.zst"),
              cupti = TmpPath("stream.cupti.zst"), start = TmpPath("stream.start.pickle");
  gm_err_t err{};
  snap_import_stats_t ist;
  ASSERT_EQ(snap_import_file(snap.c_str(), plain.c_str(), nullptr, &ist, &err), GM_OK) << err.msg;
  Trace imp(plain);
  size_t synthetic = 0;
  for (const gmt_event_t &e : imp.ev) synthetic += (e.flags & GMT_F_SYNTHETIC) != 0;
  ASSERT_EQ(synthetic, 0u) << "the corpus snapshot's history holds every entry";
  size_t calls = 0;
  WriteCupti(cupti, imp, &calls, false, true);
  Pk pk;  // {"segments": [], "device_traces": [[]], "allocator_settings": {"expandable_segments": False}}
  pk.proto().dict().mark().str("segments").list().str("device_traces").list().list().append()
      .str("allocator_settings").dict().mark().str("expandable_segments").boolean(false).setitems()
      .setitems().stop();
  FILE *f = fopen(start.c_str(), "wb");
  ASSERT_TRUE(f);
  fwrite(pk.b.data(), 1, pk.b.size(), f);
  fclose(f);
  snap_merge_stats_t ms;
  ASSERT_EQ(snap_merge_file(start.c_str(), cupti.c_str(), cupti.c_str(), "none", nullptr, &ms, &err), GM_OK)
      << err.msg;
  EXPECT_TRUE(ms.streamed);
  Trace m(cupti);
  EXPECT_EQ(m.kv("torch_history.source"), "stream");
  EXPECT_EQ(m.kv("torch_history.segments_seen_by_cupti"), m.kv("torch_history.segments"));
  EXPECT_EQ(m.kv("torch.allocator_settings.expandable_segments"), "False");
  std::vector<gmt_event_t> hist;
  for (const gmt_event_t &e : m.ev) {
    EXPECT_FALSE(e.flags & GMT_F_TORCH_STREAM);
    if (!(e.flags & GMT_F_EXTERNAL)) hist.push_back(e);
  }
  std::vector<gmt_event_t> want;  // markers (record_function annotations) are not trace entries
  for (const gmt_event_t &e : imp.ev)
    if (e.kind != GMT_EV_MARKER) want.push_back(e);
  ASSERT_GT(want.size(), 1000u);
  ASSERT_EQ(hist.size(), want.size());
  for (size_t i = 0; i < hist.size(); i++) {
    const gmt_event_t &a = hist[i], &b = want[i];
    ASSERT_EQ(a.kind, b.kind) << i;
    ASSERT_EQ(a.addr, b.addr) << i;
    ASSERT_EQ(a.size, b.size) << i;
    ASSERT_EQ(a.stream, b.stream) << i;
    ASSERT_EQ(a.device, b.device) << i;
    ASSERT_EQ(a.ts_ns / 1000, (b.ts_ns + kLater) / 1000) << i;
  }
  EXPECT_EQ(ms.external, 4u);
}

// Streamed with callsites (the tracker reads each alloc's line as it streams it): every alloc of
// the merged trace has its own, none is an event of its own, none is guessed for the frameless one.
TEST(SnapMerge, StreamedAllocsKeepTheirCallsites) {
  std::string snap = Corpus("train_amp.default.pickle"), plain = TmpPath("ssites.plain.zst"),
              cupti = TmpPath("ssites.cupti.zst"), start = TmpPath("ssites.start.pickle");
  gm_err_t err{};
  snap_import_stats_t ist;
  ASSERT_EQ(snap_import_file(snap.c_str(), plain.c_str(), nullptr, &ist, &err), GM_OK) << err.msg;
  Trace imp(plain);
  size_t calls = 0;
  WriteCupti(cupti, imp, &calls, false, true, true);
  Pk pk;
  pk.proto().dict().mark().str("segments").list().str("device_traces").list().list().append().setitems().stop();
  FILE *f = fopen(start.c_str(), "wb");
  ASSERT_TRUE(f);
  fwrite(pk.b.data(), 1, pk.b.size(), f);
  fclose(f);
  snap_merge_stats_t ms;
  ASSERT_EQ(snap_merge_file(start.c_str(), cupti.c_str(), cupti.c_str(), "none", nullptr, &ms, &err), GM_OK)
      << err.msg;
  Trace m(cupti);
  size_t n = 0;
  for (size_t i = 0; i < m.ev.size(); i++) {
    const gmt_event_t &e = m.ev[i];
    ASSERT_NE(e.kind, GMT_EV_ALLOC_SITE) << i;
    if (e.kind != GMT_EV_ALLOC || (e.flags & GMT_F_EXTERNAL)) continue;
    size_t k = n++;
    EXPECT_EQ(m.cs[i], k == 30 ? "" : "train.py:" + std::to_string(k) + ":step") << "allocation " << k;
  }
  ASSERT_GT(n, 100u);
  EXPECT_EQ(ms.allocs_with_callsite, n - 1);
  EXPECT_EQ(ms.external, 4u);
}

TEST(SnapMerge, SegmentsMatchedOthersExternal) { CheckMerge("train_amp.default.pickle", false); }

TEST(SnapMerge, ExpandableSegmentsVmmMatched) { CheckMerge("train_amp.expandable.pickle", true); }

// A history as long as its ring (max_entries, as gpurec set it) filled it: the merged trace says it
// is partial (SPEC.md §3.4), even when what fell out left nothing alive; the same history under
// the default ring of 1000000 entries is complete.
TEST(SnapMerge, FilledRingMarksThePartialCoverage) {
  std::string snap = Corpus("train_amp.default.pickle"), plain = TmpPath("ring.plain.zst"),
              cupti = TmpPath("ring.cupti.zst");
  gm_err_t err{};
  snap_import_stats_t ist;
  ASSERT_EQ(snap_import_file(snap.c_str(), plain.c_str(), nullptr, &ist, &err), GM_OK) << err.msg;
  Trace imp(plain);
  EXPECT_EQ(imp.kv("coverage"), "complete");
  size_t calls = 0;
  snap_merge_stats_t ms;
  WriteCupti(cupti, imp, &calls);
  unsetenv("GPUMEM_TORCH_MAX_ENTRIES");
  ASSERT_EQ(snap_merge_file(snap.c_str(), cupti.c_str(), cupti.c_str(), "none", nullptr, &ms, &err), GM_OK) << err.msg;
  EXPECT_EQ(Trace(cupti).kv("coverage"), "complete");
  WriteCupti(cupti, imp, &calls);
  setenv("GPUMEM_TORCH_MAX_ENTRIES", std::to_string(ist.entries).c_str(), 1);
  ASSERT_EQ(snap_merge_file(snap.c_str(), cupti.c_str(), cupti.c_str(), "none", nullptr, &ms, &err), GM_OK) << err.msg;
  unsetenv("GPUMEM_TORCH_MAX_ENTRIES");
  Trace m(cupti);
  EXPECT_EQ(m.kv("coverage"), "partial");
  EXPECT_EQ(m.kv("coverage.why"), "history_ring");
  EXPECT_EQ(m.kv("coverage.max_entries"), std::to_string(ist.entries));
  EXPECT_EQ(m.kv("coverage.history_entries"), std::to_string(ist.entries));
  gmt_coverage_t c;
  gmt_coverage(&m.h, nullptr, &c);
  ASSERT_TRUE(c.partial);
  ASSERT_TRUE(c.has_window);
  // the window's first event is the history's first, on the CUPTI clock (5 s after its start)
  ASSERT_LT(c.from_event, m.ev.size());
  EXPECT_EQ(m.ev[c.from_event].ts_ns, c.from_ns);
  EXPECT_EQ(c.from_ns, imp.ev[0].ts_ns + kLater);
}

// The requests' callsites from the recorder's notes: each history allocation without a stack of
// its own gets its note's, whatever went wrong around it; the notes are not events of the merge.
TEST(SnapMerge, NotesGiveAllocationsTheirCallsites) {
  std::string snap = Corpus("train_amp.default.pickle"), plain = TmpPath("sites.plain.zst"),
              cupti = TmpPath("sites.cupti.zst");
  gm_err_t err{};
  snap_import_stats_t ist;
  ASSERT_EQ(snap_import_file(snap.c_str(), plain.c_str(), nullptr, &ist, &err), GM_OK) << err.msg;
  Trace imp(plain);
  size_t calls = 0;
  WriteCupti(cupti, imp, &calls, true);
  snap_merge_stats_t ms;
  ASSERT_EQ(snap_merge_file(snap.c_str(), cupti.c_str(), cupti.c_str(), "none", nullptr, &ms, &err), GM_OK)
      << err.msg;
  Trace m(cupti);
  std::vector<size_t> hist;
  for (size_t i = 0; i < m.ev.size(); i++) {
    EXPECT_NE(m.ev[i].kind, GMT_EV_ALLOC_SITE) << i;
    if (!(m.ev[i].flags & GMT_F_EXTERNAL)) hist.push_back(i);
  }
  ASSERT_EQ(hist.size(), imp.ev.size());
  size_t n = 0, own = 0, got = 0;
  for (size_t i = 0; i < imp.ev.size(); i++) {
    const gmt_event_t &b = imp.ev[i];
    const std::string &mine = m.cs[hist[i]];
    if (b.kind != GMT_EV_ALLOC || (b.flags & GMT_F_SYNTHETIC)) {
      EXPECT_EQ(mine, imp.cs[i]) << i;
      continue;
    }
    size_t k = n++;
    if (!imp.cs[i].empty()) {
      EXPECT_EQ(mine, imp.cs[i]) << "allocation " << k << ": the history's own stack wins";
      own++;
    } else if (k == 10 || k == 30) {
      EXPECT_EQ(mine, "") << "allocation " << k;
    } else {
      EXPECT_EQ(mine, "train.py:" + std::to_string(k) + ":step") << "allocation " << k;
      got++;
    }
  }
  EXPECT_GT(own, 100u);
  EXPECT_GT(got, 100u);
  EXPECT_EQ(ms.allocs, n);
  EXPECT_EQ(ms.site_notes, n - 1 + 4);               // one lost, three early, one extra
  EXPECT_EQ(ms.allocs_with_callsite, n - 2);          // all but the lost one and the frameless one
  EXPECT_EQ(m.kv("torch_history.allocs_with_callsite"), std::to_string(n - 2));
  EXPECT_EQ(ms.cupti_dropped, calls + 2);             // the notes are neither dropped calls...
  EXPECT_EQ(ms.external, 4u);                         // ... nor other libraries' memory
}

TEST(SnapMerge, MissingInputsAreErrors) {
  gm_err_t err{};
  std::string out = TmpPath("never.zst");
  EXPECT_NE(snap_merge_file(Corpus("two_streams.default.pickle").c_str(), "/nonexistent/t.zst", out.c_str(),
                            "none", nullptr, nullptr, &err),
            GM_OK);
  EXPECT_NE(std::string(err.msg).find("cannot read the CUPTI trace '/nonexistent/t.zst'"), std::string::npos)
      << err.msg;
  // a CUPTI trace, but no pickle: nothing written
  std::string cupti = TmpPath("plain_for_err.zst");
  snap_import_stats_t st;
  ASSERT_EQ(snap_import_file(Corpus("two_streams.default.pickle").c_str(), cupti.c_str(), nullptr, &st, &err), GM_OK);
  EXPECT_EQ(snap_merge_file(cupti.c_str(), cupti.c_str(), out.c_str(), "none", nullptr, nullptr, &err),
            GM_ERR_FORMAT);
  EXPECT_NE(std::string(err.msg).find("is not a pickle"), std::string::npos) << err.msg;
  EXPECT_NE(access(out.c_str(), F_OK), 0);
}

}  // namespace
