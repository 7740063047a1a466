// Tests of the snapshot -> trace conversion: hand-built snapshots (every action, settings,
// frames, annotations, a late-started history), not-a-snapshot errors, and a real pickle of
// the corpus (traces/snapshots) checked against what torch reported for that run.
#include "recorder/snapshot/snap_import.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "formats/gmt.h"
#include "formats/pkr.h"
#include "formats/pk_testutil.h"

namespace {

std::string TmpPath(const char *name) {
  const char *d = getenv("TEST_TMPDIR");
  return std::string(d ? d : "/tmp") + "/" + name;
}

std::string WriteFile(const char *name, const std::vector<uint8_t> &b) {
  std::string p = TmpPath(name);
  FILE *f = fopen(p.c_str(), "wb");
  fwrite(b.data(), 1, b.size(), f);
  fclose(f);
  return p;
}

struct Trace {
  gmt_reader_t *r = nullptr;
  std::vector<gmt_event_t> ev;
  explicit Trace(const std::string &path) {
    gm_err_t err{};
    if (gmt_reader_open(&r, path.c_str(), &err) != GM_OK) { ADD_FAILURE() << err.msg; return; }
    gmt_event_t e;
    gm_status_t st;
    while ((st = gmt_reader_next(r, &e, &err)) == GM_OK) ev.push_back(e);
    EXPECT_EQ(st, GM_END) << err.msg;
  }
  ~Trace() { gmt_reader_close(r); }
  const char *kv(const char *k) { return gmt_header_kv_get(gmt_reader_header(r), k); }
  std::string str(uint32_t id) { const char *s = gmt_reader_string(r, id); return s ? s : ""; }
};

// One trace entry dict.
void Entry(Pk &p, const char *action, int64_t addr, int64_t size, int64_t stream, int64_t t,
           bool frames = false) {
  p.dict().mark();
  p.kvs("action", action).kv("addr", addr).kv("size", size).kv("stream", stream).kv("time_us", t);
  if (frames) {
    p.str("frames").list().mark();
    p.dict().mark().kvs("name", "convert").kvs("filename", "/opt/v/lib/python3.12/site-packages/torch/nn/modules/module.py").kv("line", 1370).setitems();
    p.dict().mark().kvs("name", "main").kvs("filename", "/w/train.py").kv("line", 25).setitems();
    p.appends();
  }
  p.setitems();
}

std::vector<uint8_t> HandSnapshot() {
  const int64_t T = 1795262363399030LL, A = 139670365143040LL;
  Pk p;
  p.proto(4).dict().mark();
  p.str("segments").list();
  p.str("device_traces").list().mark().list().mark();
  Entry(p, "segment_alloc", A, 20 << 20, 0, T, true);
  Entry(p, "alloc", A, 3 << 20, 0, T + 2, true);
  Entry(p, "free_requested", A, 3 << 20, 0, T + 5);
  Entry(p, "free_completed", A, 3 << 20, 0, T + 6);
  Entry(p, "segment_map", A + (1LL << 30), 2 << 20, 7, T + 8);
  Entry(p, "segment_unmap", A + (1LL << 30), 2 << 20, 7, T + 9);
  Entry(p, "oom", 12345, 1LL << 40, 0, T + 10);
  Entry(p, "snapshot", 0, 0, 0, T + 11);
  Entry(p, "some_future_action", 0, 0, 0, T + 12);
  Entry(p, "segment_free", A, 20 << 20, 0, T + 13);
  p.appends().appends();
  p.str("allocator_settings").dict().mark();
  p.kvs("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:64").kv("max_split_size", 64 << 20);
  p.str("garbage_collection_threshold").f64(0.0).str("expandable_segments").boolean(false);
  p.str("roundup_power2_divisions").dict().mark().kv("1", 4).kv("2", 4).setitems();
  p.setitems();
  p.str("external_annotations").list().mark();
  p.dict().mark().kvs("stage", "START").kvs("name", "step").kv("device", 0).kv("time_us", T + 3).setitems();
  p.appends();
  p.setitems().stop();
  return p.b;
}

TEST(SnapImport, ConvertsEveryAction) {
  std::string in = WriteFile("hand.pickle", HandSnapshot()), out = TmpPath("hand.zst");
  gm_err_t err{};
  snap_import_stats_t st{};
  ASSERT_EQ(snap_import_file(in.c_str(), out.c_str(), nullptr, &st, &err), GM_OK) << err.msg;
  EXPECT_EQ(st.entries, 10u);
  EXPECT_EQ(st.skipped, 1u);
  EXPECT_EQ(st.devices, 1u);
  Trace t(out);
  const gmt_header_t *h = gmt_reader_header(t.r);
  EXPECT_EQ(h->capture_mode, (uint32_t)GMT_CAPTURE_TORCH);
  EXPECT_EQ(h->start_time_ns, 1795262363399030ULL * 1000);
  ASSERT_NE(t.kv("PYTORCH_CUDA_ALLOC_CONF"), nullptr);
  EXPECT_STREQ(t.kv("PYTORCH_CUDA_ALLOC_CONF"), "max_split_size_mb:64");
  EXPECT_STREQ(t.kv("torch.allocator_settings.max_split_size"), "67108864");
  EXPECT_STREQ(t.kv("torch.allocator_settings.roundup_power2_divisions"), "[1:4,2:4]");
  EXPECT_STREQ(t.kv("torch.alloc_conf"), "max_split_size_mb:64,roundup_power2_divisions:4");
  EXPECT_STREQ(t.kv("torch.snapshot.synthetic_initial_events"), "0");
  EXPECT_STREQ(t.kv("coverage"), "complete");  // recorded from the start (SPEC.md §3.4)
  // 9 converted entries + 1 annotation marker, in order (the annotation by its time)
  const unsigned kinds[] = {GMT_EV_SEGMENT_ALLOC, GMT_EV_ALLOC, GMT_EV_MARKER, GMT_EV_FREE_REQUESTED,
                            GMT_EV_FREE, GMT_EV_VMM_MAP, GMT_EV_VMM_UNMAP, GMT_EV_ALLOC_FAILED,
                            GMT_EV_MARKER, GMT_EV_SEGMENT_FREE};
  ASSERT_EQ(t.ev.size(), 10u);
  for (size_t k = 0; k < 10; k++) EXPECT_EQ(t.ev[k].kind, kinds[k]) << k;
  EXPECT_EQ(t.ev[0].ts_ns, 0u);
  EXPECT_EQ(t.ev[1].ts_ns, 2000u);
  EXPECT_EQ(t.ev[1].size, 3u << 20);
  EXPECT_EQ(t.ev[1].addr, 139670365143040ULL);
  EXPECT_EQ(t.ev[1].stream, 0u);
  EXPECT_EQ(t.ev[5].stream, 7u);
  EXPECT_EQ(t.ev[7].size, 1ULL << 40);
  EXPECT_EQ(t.ev[7].addr, 0u);
  EXPECT_EQ(t.str(t.ev[2].callsite), "START step");
  EXPECT_EQ(t.str(t.ev[8].callsite), "torch.snapshot");
  EXPECT_EQ(t.str(t.ev[1].callsite),
            "torch/nn/modules/module.py:1370:convert < /w/train.py:25:main");
  EXPECT_EQ(t.ev[0].callsite, t.ev[1].callsite);  // same stack, same string id
  for (auto &e : t.ev) EXPECT_EQ(e.flags & GMT_F_SYNTHETIC, 0u);
}

// Provenance the pickle lacks comes from prov (the CUPTI trace of the same run, or
// --gpu-memory); the snapshot's own fields win where both have one.
TEST(SnapImport, ProvenanceFillsWhatThePickleLacks) {
  std::string in = WriteFile("prov.pickle", HandSnapshot()), out = TmpPath("prov.zst");
  gmt_header_t prov;
  gmt_header_init(&prov);
  prov.gpu_total_mem = 150109880320ULL;
  prov.pid = 4242;
  prov.rank = 1;
  prov.capture_mode = GMT_CAPTURE_REQUESTS;
  prov.start_time_ns = 7;
  ASSERT_EQ(gmt_header_set(&prov.gpu_name, "NVIDIA H200", nullptr), GM_OK);
  ASSERT_EQ(gmt_header_set(&prov.tool, "gpurec 0.1.0", nullptr), GM_OK);
  ASSERT_EQ(gmt_header_kv_set(&prov, "PYTORCH_CUDA_ALLOC_CONF", "backend:native", nullptr), GM_OK);
  ASSERT_EQ(gmt_header_kv_set(&prov, "gpurec_mode", "torch", nullptr), GM_OK);
  gm_err_t err{};
  ASSERT_EQ(snap_import_file_prov(in.c_str(), out.c_str(), nullptr, &prov, nullptr, &err), GM_OK)
      << err.msg;
  gmt_header_free(&prov);
  Trace t(out);
  const gmt_header_t *h = gmt_reader_header(t.r);
  EXPECT_EQ(h->gpu_total_mem, 150109880320ULL);
  EXPECT_EQ(h->pid, 4242u);
  EXPECT_EQ(h->rank, 1);
  EXPECT_STREQ(h->gpu_name, "NVIDIA H200");
  EXPECT_EQ(h->capture_mode, (uint32_t)GMT_CAPTURE_TORCH);           // the snapshot's
  EXPECT_EQ(h->start_time_ns, 1795262363399030ULL * 1000);          // the snapshot's
  EXPECT_STREQ(h->tool, "gpurec " GM_VERSION " import");             // the importer's
  EXPECT_STREQ(t.kv("PYTORCH_CUDA_ALLOC_CONF"), "max_split_size_mb:64");  // the snapshot's
  EXPECT_STREQ(t.kv("gpurec_mode"), "torch");                        // only in prov
  EXPECT_EQ(t.ev.size(), 10u);
}

// A history that starts late: a free whose alloc is missing, a segment_free whose segment_alloc
// is missing, and a final segment with a live block that the trace never mentions.
TEST(SnapImport, LateHistoryGetsSyntheticInitialState) {
  const int64_t T = 1000, S1 = 1LL << 30, S2 = 2LL << 30;
  Pk p;
  p.proto(4).dict().mark();
  p.str("segments").list().mark();
  p.dict().mark().kv("device", 0).kv("address", S2).kv("total_size", 2 << 20).kv("stream", 0);
  p.str("is_expandable").boolean(false).str("blocks").list().mark();
  p.dict().mark().kv("address", S2).kv("size", 4096).kv("requested_size", 4000).kvs("state", "active_allocated").setitems();
  p.dict().mark().kv("address", S2 + 4096).kv("size", 512).kv("requested_size", 100).kvs("state", "inactive").setitems();
  p.appends().setitems();
  p.appends();
  p.str("device_traces").list().mark().list().mark();
  Entry(p, "free_requested", S1 + 512, 1000, 0, T);
  Entry(p, "free_completed", S1 + 512, 1000, 0, T + 1);
  Entry(p, "segment_free", S1, 20 << 20, 0, T + 2);
  Entry(p, "segment_alloc", S1, 20 << 20, 0, T + 3);  // re-allocated at the same address
  Entry(p, "alloc", S1, 5000, 0, T + 4);
  p.appends().appends();
  p.setitems().stop();
  std::string in = WriteFile("late.pickle", p.b), out = TmpPath("late.zst");
  gm_err_t err{};
  ASSERT_EQ(snap_import_file(in.c_str(), out.c_str(), nullptr, nullptr, &err), GM_OK) << err.msg;
  Trace t(out);
  EXPECT_STREQ(t.kv("torch.snapshot.synthetic_initial_events"), "4");
  // The trace says it covers part of the run: from event 4 (the first entry), with the 4000 B
  // block and the 1000 B one alive then, in 22 MiB of segments (SPEC.md §3.4).
  EXPECT_STREQ(t.kv("coverage"), "partial");
  EXPECT_STREQ(t.kv("coverage.why"), "late_start");
  EXPECT_STREQ(t.kv("coverage.from_event"), "4");
  EXPECT_STREQ(t.kv("coverage.from_ns"), "0");
  EXPECT_STREQ(t.kv("coverage.alive_count"), "2");
  EXPECT_STREQ(t.kv("coverage.alive_bytes"), "5000");
  EXPECT_STREQ(t.kv("coverage.reserved_bytes"), std::to_string((20 << 20) + (2 << 20)).c_str());
  ASSERT_EQ(t.ev.size(), 9u);
  // segments first (by address), then the blocks
  EXPECT_EQ(t.ev[0].kind, GMT_EV_SEGMENT_ALLOC);
  EXPECT_EQ(t.ev[0].addr, (uint64_t)S1);
  EXPECT_EQ(t.ev[0].size, 20u << 20);
  EXPECT_EQ(t.ev[1].kind, GMT_EV_SEGMENT_ALLOC);
  EXPECT_EQ(t.ev[1].addr, (uint64_t)S2);
  EXPECT_EQ(t.ev[1].size, 2u << 20);
  EXPECT_EQ(t.ev[2].kind, GMT_EV_ALLOC);
  EXPECT_EQ(t.ev[2].addr, (uint64_t)S1 + 512);
  EXPECT_EQ(t.ev[2].size, 1000u);
  EXPECT_EQ(t.ev[3].kind, GMT_EV_ALLOC);
  EXPECT_EQ(t.ev[3].addr, (uint64_t)S2);
  EXPECT_EQ(t.ev[3].size, 4000u);
  for (int k = 0; k < 4; k++) {
    EXPECT_EQ(t.ev[k].flags & GMT_F_SYNTHETIC, GMT_F_SYNTHETIC) << k;
    EXPECT_EQ(t.ev[k].ts_ns, 0u);
  }
  EXPECT_EQ(t.ev[4].kind, GMT_EV_FREE_REQUESTED);
  EXPECT_EQ(t.ev[4].flags & GMT_F_SYNTHETIC, 0u);
}

TEST(SnapImport, NotASnapshotIsOneClearError) {
  gm_err_t err{};
  std::string out = TmpPath("x.zst");
  Pk list;
  list.proto(4).list().stop();
  std::string a = WriteFile("list.pickle", list.b);
  EXPECT_EQ(snap_import_file(a.c_str(), out.c_str(), nullptr, nullptr, &err), GM_ERR_FORMAT);
  EXPECT_NE(std::string(err.msg).find("not a PyTorch memory snapshot"), std::string::npos) << err.msg;
  Pk nokeys;
  nokeys.proto(4).dict().mark().kv("x", 1).setitems().stop();
  std::string b = WriteFile("nokeys.pickle", nokeys.b);
  EXPECT_EQ(snap_import_file(b.c_str(), out.c_str(), nullptr, nullptr, &err), GM_ERR_FORMAT);
  std::string c = WriteFile("text.pickle", {'h', 'e', 'l', 'l', 'o'});
  EXPECT_EQ(snap_import_file(c.c_str(), out.c_str(), nullptr, nullptr, &err), GM_ERR_FORMAT);
  EXPECT_NE(std::string(err.msg).find("is not a pickle"), std::string::npos) << err.msg;
  EXPECT_EQ(snap_import_file(TmpPath("nope.pickle").c_str(), out.c_str(), nullptr, nullptr, &err),
            GM_ERR_IO);
  Pk evil;  // a snapshot-shaped dict with a GLOBAL inside
  evil.proto(4).dict().mark().str("device_traces").raw({'c', 'o', 's', '\n', 's', 'y', 's', 't', 'e', 'm', '\n'}).setitems().stop();
  std::string d = WriteFile("evil.pickle", evil.b);
  EXPECT_EQ(snap_import_file(d.c_str(), out.c_str(), nullptr, nullptr, &err), GM_ERR_FORMAT);
  EXPECT_NE(std::string(err.msg).find("GLOBAL"), std::string::npos) << err.msg;
  std::vector<uint8_t> whole = HandSnapshot();
  for (size_t n = 2; n < whole.size(); n += 7) {
    std::string e = WriteFile("cut.pickle", std::vector<uint8_t>(whole.begin(), whole.begin() + n));
    EXPECT_EQ(snap_import_file(e.c_str(), out.c_str(), nullptr, nullptr, &err), GM_ERR_FORMAT) << n;
  }
}


// torch 2.1 layout: no time_us, no allocator_settings, no annotations; two devices. Each
// device's order is kept; without times the devices follow each other.
TEST(SnapImport, Torch21LayoutAndTwoDevices) {
  Pk p;
  p.proto(2).dict().mark();
  p.str("segments").list();
  p.str("device_traces").list().mark();
  for (int dev = 0; dev < 2; dev++) {
    p.list().mark();
    for (int k = 0; k < 3; k++) {
      p.dict().mark().kvs("action", k == 0 ? "segment_alloc" : k == 1 ? "alloc" : "free_completed");
      p.kv("addr", (int64_t)(dev + 1) << 30).kv("size", k == 0 ? 2 << 20 : 1000 + dev).kv("stream", 0);
      p.str("frames").list();
      p.setitems();
    }
    p.appends();
  }
  p.appends();
  p.setitems().stop();
  std::string in = WriteFile("t21.pickle", p.b), out = TmpPath("t21.zst");
  gm_err_t err{};
  snap_import_stats_t st{};
  ASSERT_EQ(snap_import_file(in.c_str(), out.c_str(), nullptr, &st, &err), GM_OK) << err.msg;
  EXPECT_EQ(st.devices, 2u);
  Trace t(out);
  EXPECT_STREQ(t.kv("torch.snapshot.time"), "none");
  EXPECT_EQ(t.kv("torch.alloc_conf"), nullptr);
  EXPECT_EQ(gmt_reader_header(t.r)->start_time_ns, 0u);
  ASSERT_EQ(t.ev.size(), 6u);
  for (int k = 0; k < 6; k++) {
    EXPECT_EQ(t.ev[k].device, k / 3) << k;
    EXPECT_EQ(t.ev[k].ts_ns, 0u);
    EXPECT_EQ(t.ev[k].callsite, (uint32_t)GMT_NO_STRING);
  }
  EXPECT_EQ(t.ev[1].size, 1000u);
  EXPECT_EQ(t.ev[4].size, 1001u);
  EXPECT_EQ(t.ev[2].kind, GMT_EV_FREE);
}

// Two devices with times: merged by time, each device's own order kept even where its clock
// steps back (the trace's clock is made monotonic instead of reordering).
TEST(SnapImport, DevicesMergeByTimeKeepingEachOrder) {
  Pk p;
  p.proto(4).dict().mark();
  p.str("device_traces").list().mark();
  p.list().mark();
  Entry(p, "alloc", 1 << 20, 512, 0, 100);
  Entry(p, "alloc", 2 << 20, 512, 0, 90);  // clock stepped back
  Entry(p, "alloc", 3 << 20, 512, 0, 300);
  p.appends();
  p.list().mark();
  Entry(p, "alloc", 4 << 20, 512, 0, 200);
  p.appends();
  p.appends();
  p.setitems().stop();
  std::string in = WriteFile("merge.pickle", p.b), out = TmpPath("merge.zst");
  gm_err_t err{};
  ASSERT_EQ(snap_import_file(in.c_str(), out.c_str(), nullptr, nullptr, &err), GM_OK) << err.msg;
  Trace t(out);
  ASSERT_EQ(t.ev.size(), 4u);
  const uint64_t addrs[] = {1u << 20, 2u << 20, 4u << 20, 3u << 20};
  const uint64_t ts[] = {0, 0, 100000, 200000};  // from the first entry (100 us); 90 clamps
  for (int k = 0; k < 4; k++) {
    EXPECT_EQ(t.ev[k].addr, addrs[k]) << k;
    EXPECT_EQ(t.ev[k].ts_ns, ts[k]) << k;
  }
}


// Real snapshots whose ring buffer dropped the start of the history (traces/snapshots/late):
// the synthetic initial state plus the kept entries must add up to the final `segments` list,
// in reserved bytes and in live blocks.
TEST(SnapImport, LateRealSnapshotsRebuildTheMissingState) {
  const char *src = getenv("TEST_SRCDIR");
  ASSERT_NE(src, nullptr);
  const char *files[] = {"train_amp.default.late400.pickle", "train_amp.expandable.late400.pickle",
                         "train_ckpt.default.late400.pickle", "two_streams.default.late400.pickle"};
  for (const char *f : files) {
    SCOPED_TRACE(f);
    std::string in = std::string(src) + "/gpumem/traces/snapshots/late/" + f;
    std::string out = TmpPath("late-real.zst");
    gm_err_t err{};
    ASSERT_EQ(snap_import_file(in.c_str(), out.c_str(), nullptr, nullptr, &err), GM_OK) << err.msg;
    // what the final segments list says
    FILE *fp = fopen(in.c_str(), "rb");
    ASSERT_NE(fp, nullptr);
    std::vector<uint8_t> buf(1 << 22);
    buf.resize(fread(buf.data(), 1, buf.size(), fp));
    fclose(fp);
    pkr_doc_t *doc = nullptr;
    ASSERT_EQ(pkr_parse(buf.data(), buf.size(), &doc, &err), GM_OK) << err.msg;
    const pkr_val_t *segs = pkr_dict_get(pkr_doc_root(doc), "segments");
    ASSERT_NE(segs, nullptr);
    int64_t final_bytes = 0, live = 0, v;
    for (size_t k = 0; k < segs->n; k++) {
      ASSERT_TRUE(pkr_int(pkr_dict_get(segs->items[k], "total_size"), &v));
      final_bytes += v;
      const pkr_val_t *bl = pkr_dict_get(segs->items[k], "blocks");
      for (size_t b = 0; b < bl->n; b++) {
        const pkr_val_t *st = pkr_dict_get(bl->items[b], "state");
        live += pkr_str_eq(st, "active_allocated") || pkr_str_eq(st, "active_pending_free");
      }
    }
    pkr_doc_free(doc);
    // what the trace adds up to
    Trace t(out);
    int64_t bytes = 0, blocks = 0, synthetic = 0;
    for (auto &e : t.ev) {
      synthetic += (e.flags & GMT_F_SYNTHETIC) != 0;
      if (e.kind == GMT_EV_SEGMENT_ALLOC || e.kind == GMT_EV_VMM_MAP) bytes += (int64_t)e.size;
      if (e.kind == GMT_EV_SEGMENT_FREE || e.kind == GMT_EV_VMM_UNMAP) bytes -= (int64_t)e.size;
      if (e.kind == GMT_EV_ALLOC) blocks++;
      if (e.kind == GMT_EV_FREE) blocks--;
    }
    EXPECT_EQ(bytes, final_bytes);
    EXPECT_EQ(blocks, live);
    if (std::string(f).rfind("two_streams", 0) == 0)
      EXPECT_EQ(synthetic, 0);  // the whole history fit in the buffer
    else
      EXPECT_GT(synthetic, 0);
  }
}

// A real snapshot: torch 2.11 on an H200 (traces/snapshots/README.md).
TEST(SnapImport, RealCorpusSnapshotMatchesTorchCounts) {
  const char *src = getenv("TEST_SRCDIR");
  ASSERT_NE(src, nullptr);
  std::string in = std::string(src) + "/gpumem/traces/snapshots/train_amp.default.pickle";
  std::string out = TmpPath("train_amp.zst");
  gm_err_t err{};
  snap_import_stats_t st{};
  ASSERT_EQ(snap_import_file(in.c_str(), out.c_str(), nullptr, &st, &err), GM_OK) << err.msg;
  EXPECT_EQ(st.entries, 5316u);
  EXPECT_EQ(st.skipped, 0u);
  Trace t(out);
  size_t n[GMT_EV_KIND_MAX] = {};
  uint64_t cur = 0, peak = 0, prev = 0;
  for (auto &e : t.ev) {
    n[e.kind]++;
    EXPECT_GE(e.ts_ns, prev);
    prev = e.ts_ns;
    if (e.kind == GMT_EV_SEGMENT_ALLOC) cur += e.size, peak = std::max(peak, cur);
    if (e.kind == GMT_EV_SEGMENT_FREE) cur -= e.size;
  }
  EXPECT_EQ(n[GMT_EV_ALLOC], 1864u);
  EXPECT_EQ(n[GMT_EV_FREE_REQUESTED], 1704u);
  EXPECT_EQ(n[GMT_EV_FREE], 1704u);
  EXPECT_EQ(n[GMT_EV_SEGMENT_ALLOC], 44u);
  EXPECT_EQ(n[GMT_EV_MARKER], 16u);  // optimizer step / zero_grad annotations
  EXPECT_EQ(peak, 1161822208u);       // torch.cuda.max_memory_reserved() of that run
  EXPECT_STREQ(t.kv("torch.alloc_conf"), "");
  EXPECT_STREQ(t.kv("torch.snapshot.synthetic_initial_events"), "0");
  // the allocating op, then the script's own frames
  EXPECT_EQ(t.str(t.ev[1].callsite),
            "torch/nn/modules/module.py:1370:convert < /work/main/traces/workloads/train_amp.py:25:main"
            " < /work/main/traces/workloads/train_amp.py:41:<module>");
}

}  // namespace

// torch writes an OOM entry's free device memory under "device_free" (no "addr"):
// torch/csrc/cuda/memory_snapshot.cpp. The importer keeps it in the header.
TEST(SnapImport, OomDeviceFreeAsTorchWritesIt) {
  const int64_t T = 1795262363399030LL, A = 139670365143040LL;
  Pk p;
  p.proto(4).dict().mark();
  p.str("segments").list();
  p.str("device_traces").list().mark().list().mark();
  Entry(p, "segment_alloc", A, 20 << 20, 0, T);
  Entry(p, "alloc", A, 3 << 20, 0, T + 2);
  p.dict().mark();
  p.kvs("action", "oom").kv("device_free", 987654321).kv("size", 1LL << 40).kv("stream", 0).kv("time_us", T + 3);
  p.setitems();
  p.appends().appends();
  p.setitems().stop();
  std::string in = WriteFile("oomfree.pickle", p.b), out = TmpPath("oomfree.zst");
  gm_err_t err{};
  ASSERT_EQ(snap_import_file(in.c_str(), out.c_str(), nullptr, nullptr, &err), GM_OK) << err.msg;
  Trace t(out);
  ASSERT_NE(t.kv("torch.snapshot.oom_device_free_bytes"), nullptr);
  EXPECT_STREQ(t.kv("torch.snapshot.oom_device_free_bytes"), "987654321");
  bool failed = false;
  for (const gmt_event_t &e : t.ev)
    if (e.kind == GMT_EV_ALLOC_FAILED) {
      failed = true;
      EXPECT_EQ(e.addr, 0u);
      EXPECT_EQ(e.size, 1ULL << 40);
    }
  EXPECT_TRUE(failed);
}
