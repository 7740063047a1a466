// Tests of the memory_viz export (gpureplay --export-snapshot): the pickle writer's encodings
// read back by the project's own pickle reader, and exported runs read back and replayed.
//
// The round trip: a trace replayed under a policy and exported, the pickle imported as a trace
// (the same code as `gpurec import`), that trace replayed under the same policy: the same peak
// reserved, live (lower bound) and allocated bytes as the direct replay.
#include <gtest/gtest.h>
#include <stdio.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "formats/gmt.h"
#include "formats/pkw.h"
#include "recorder/snapshot/snap_import.h"
#include "formats/pkr.h"
#include "replay/tool/gpureplay.h"
#include "replay/tool/export/export_memviz.h"

namespace {

std::string Tmp(const std::string &name) {
  static int n = 0;
  const char *d = getenv("TEST_TMPDIR");
  return std::string(d ? d : "/tmp") + "/mv_" + std::to_string(getpid()) + "_" + std::to_string(n++) + "_" + name;
}

std::vector<uint8_t> ReadAll(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// A pickle written by fn through pkw, its bytes.
template <typename F>
std::vector<uint8_t> Write(int protocol, F fn, gm_status_t *st = nullptr) {
  char *buf = nullptr;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  pkw_t w;
  pkw_init(&w, f, protocol);
  fn(&w);
  gm_err_t err{};
  gm_status_t s = pkw_finish(&w, &err);
  if (st) *st = s;
  fclose(f);
  std::vector<uint8_t> out(buf, buf + len);
  free(buf);
  return out;
}

struct Doc {
  std::vector<uint8_t> buf;
  pkr_doc_t *doc = nullptr;
  gm_err_t err{};
  gm_status_t st;
  explicit Doc(std::vector<uint8_t> b) : buf(std::move(b)) { st = pkr_parse(buf.data(), buf.size(), &doc, &err); }
  ~Doc() { pkr_doc_free(doc); }
  const pkr_val_t *root() const { return pkr_doc_root(doc); }
};

std::string Str(const pkr_val_t *v) { return v && v->type == PKR_STR ? std::string(v->s, v->len) : "<not a str>"; }
int64_t Int(const pkr_val_t *v) {
  int64_t i = -12345;
  EXPECT_TRUE(pkr_int(v, &i));
  return i;
}
const pkr_val_t *Get(const pkr_val_t *d, const char *k) { return pkr_dict_get(d, k); }

// ---- the writer ------------------------------------------------------------------------------

TEST(Pkw, IntsAsCPythonEncodesThem) {
  // opcode bytes of pickletools: K BININT1, M BININT2, J BININT, \x8a LONG1
  auto one = [](int64_t v) { return Write(4, [v](pkw_t *w) { pkw_int(w, v); }); };
  EXPECT_EQ(one(255), (std::vector<uint8_t>{0x80, 4, 'K', 0xff, '.'}));
  EXPECT_EQ(one(300), (std::vector<uint8_t>{0x80, 4, 'M', 0x2c, 0x01, '.'}));
  EXPECT_EQ(one(-1), (std::vector<uint8_t>{0x80, 4, 'J', 0xff, 0xff, 0xff, 0xff, '.'}));
  EXPECT_EQ(one(1ll << 31), (std::vector<uint8_t>{0x80, 4, 0x8a, 5, 0, 0, 0, 0x80, 0, '.'}));
  EXPECT_EQ(one(-(1ll << 31) - 1), (std::vector<uint8_t>{0x80, 4, 0x8a, 5, 0xff, 0xff, 0xff, 0x7f, 0xff, '.'}));
  std::vector<int64_t> vals = {0, 1, 255, 256, 65535, 65536, INT32_MAX, INT32_MIN, 1ll << 31, 139637976727552ll,
                               -(1ll << 40), INT64_MAX, INT64_MIN};
  for (int64_t v : vals) {
    Doc d(one(v));
    ASSERT_EQ(d.st, GM_OK) << v << ": " << d.err.msg;
    int64_t got = 0;
    ASSERT_TRUE(pkr_int(d.root(), &got)) << v;
    EXPECT_EQ(got, v);
  }
  Doc big(Write(4, [](pkw_t *w) { pkw_uint(w, UINT64_MAX); }));
  ASSERT_EQ(big.st, GM_OK);
  EXPECT_EQ(big.root()->type, PKR_BIGINT);  // 2^64-1 is wider than int64: the reader says so
}

TEST(Pkw, StringsAreValidUtf8) {
  std::string bad = "ok\xff\xc3(end";  // a stray byte and a cut sequence
  Doc d(Write(4, [&](pkw_t *w) { pkw_str(w, bad.data(), bad.size()); }));
  ASSERT_EQ(d.st, GM_OK);
  EXPECT_EQ(Str(d.root()), "ok\xef\xbf\xbd\xef\xbf\xbd(end");
  std::string longs(300, 'x');  // past SHORT_BINUNICODE's 255 bytes: BINUNICODE
  auto b = Write(4, [&](pkw_t *w) { pkw_cstr(w, longs.c_str()); });
  EXPECT_EQ(b[2], 'X');
  EXPECT_EQ(Str(Doc(b).root()), longs);
  std::string accents = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80";
  EXPECT_EQ(Str(Doc(Write(2, [&](pkw_t *w) { pkw_cstr(w, accents.c_str()); })).root()), accents);
}

TEST(Pkw, ContainersBatchedAndMemo) {
  // a list of 2500 (three APPENDS batches), a dict of 2500 items,
  // a memo entry written once and got twice, memo ids past 255 (LONG_BINPUT / BINPUT), a tuple
  for (int protocol : {2, 3, 4}) {
    gm_status_t st;
    auto b = Write(
        protocol,
        [](pkw_t *w) {
          pkw_dict_begin(w);
          pkw_cstr(w, "list");
          pkw_list_begin(w);
          for (int i = 0; i < 2500; i++) pkw_int(w, i);
          pkw_end(w);
          pkw_cstr(w, "dict");
          pkw_dict_begin(w);
          for (int i = 0; i < 2500; i++) pkw_kv_int(w, ("k" + std::to_string(i)).c_str(), i);
          pkw_end(w);
          uint32_t last = 0;
          for (int i = 0; i < 300; i++) {
            pkw_cstr(w, ("m" + std::to_string(i)).c_str());
            last = pkw_memo(w);
            pkw_float(w, i + 0.5);
          }
          pkw_cstr(w, "got");
          pkw_get(w, last);
          pkw_cstr(w, "tuple");
          pkw_tuple_begin(w);
          pkw_int(w, 0);
          pkw_none(w);
          pkw_bool(w, 1);
          pkw_end(w);
          pkw_end(w);
        },
        &st);
    ASSERT_EQ(st, GM_OK) << protocol;
    Doc d(b);
    ASSERT_EQ(d.st, GM_OK) << protocol << ": " << d.err.msg;
    const pkr_val_t *l = Get(d.root(), "list");
    ASSERT_EQ(l->type, PKR_LIST);
    ASSERT_EQ(l->n, 2500u);
    EXPECT_EQ(Int(l->items[2499]), 2499);
    const pkr_val_t *dd = Get(d.root(), "dict");
    ASSERT_EQ(dd->n, 5000u);
    EXPECT_EQ(Int(Get(dd, "k1234")), 1234);
    EXPECT_EQ(Str(Get(d.root(), "got")), "m299");
    EXPECT_DOUBLE_EQ(Get(d.root(), "m7")->f, 7.5);
    const pkr_val_t *t = Get(d.root(), "tuple");
    ASSERT_EQ(t->type, PKR_TUPLE);
    ASSERT_EQ(t->n, 3u);
    EXPECT_EQ(t->items[1]->type, PKR_NONE);
    EXPECT_EQ(t->items[2]->type, PKR_BOOL);
  }
  // batches of 1000 items, as CPython writes them (memory_viz appends a batch in one call)
  auto b = Write(4, [](pkw_t *w) {
    pkw_list_begin(w);
    for (int i = 0; i < 1001; i++) pkw_int(w, 7);
    pkw_end(w);
  });
  std::vector<uint8_t> want = {0x80, 4, ']', '('};
  for (int i = 0; i < 1000; i++) want.push_back('K'), want.push_back(7);
  for (int c : {int('e'), int('('), int('K'), 7, int('e'), int('.')}) want.push_back((uint8_t)c);
  EXPECT_EQ(b, want);
}

TEST(Pkw, MisuseAndWriteErrorsAreStatuses) {
  gm_status_t st;
  Write(4, [](pkw_t *w) { pkw_end(w); }, &st);
  EXPECT_EQ(st, GM_ERR_INVAL);
  Write(4, [](pkw_t *w) { pkw_list_begin(w); }, &st);
  EXPECT_EQ(st, GM_ERR_INVAL);
  Write(4, [](pkw_t *w) { pkw_dict_begin(w); pkw_cstr(w, "k"); pkw_end(w); }, &st);
  EXPECT_EQ(st, GM_ERR_INVAL);
  Write(4, [](pkw_t *w) { pkw_get(w, 3); }, &st);
  EXPECT_EQ(st, GM_ERR_INVAL);
  FILE *full = fopen("/dev/full", "w");
  ASSERT_NE(full, nullptr);
  pkw_t w;
  pkw_init(&w, full, 4);
  for (int i = 0; i < 100000; i++) pkw_int(&w, i);
  gm_err_t err{};
  EXPECT_EQ(pkw_finish(&w, &err), GM_ERR_IO);
  fclose(full);
}

// ---- the export ------------------------------------------------------------------------------

// A small training-like trace in the text form: two callsites, a free that waits on stream
// events and completes, one that never completes (pending at the end), a live block at the end.
const char kTrace[] =
    "#gpu_total_mem=85899345920\n"
    "ts_ns,kind,device,stream,addr,size,mem_kind,flags,corr_id,callsite,context\n"
    "#string.1=train.py:10:forward < train.py:40:main\n"
    "#string.2=train.py:12:backward\n"
    "1000,alloc,0,7,0x1000,3145728,device,0x0,0,1,0\n"
    "2000,alloc,0,7,0x2000,500,device,0x0,0,2,0\n"
    "3000,alloc,0,7,0x3000,31457280,device,0x0,0,1,0\n"
    "4000,free_requested,0,7,0x1000,3145728,device,0x0,0,0,0\n"
    "4500,alloc,0,7,0x5000,4194304,device,0x0,0,2,0\n"
    "5000,free,0,7,0x1000,3145728,device,0x0,0,0,0\n"
    "6000,free,0,7,0x2000,500,device,0x0,0,0,0\n"
    "7000,alloc,0,7,0x4000,10485760,device,0x0,0,2,0\n"
    "8000,free_requested,0,7,0x3000,31457280,device,0x0,0,0,0\n"
    "9000,free,0,7,0x5000,4194304,device,0x0,0,0,0\n"
    "9500,alloc,0,7,0x6000,73400320,device,0x0,0,1,0\n"
    "9600,free,0,7,0x6000,73400320,device,0x0,0,0,0\n";

std::string MakeTrace(const std::string &csv) {
  std::string path = Tmp("t.zst");
  FILE *in = fmemopen(const_cast<char *>(csv.data()), csv.size(), "r");
  gm_err_t err{};
  EXPECT_EQ(gmt_csv_import(in, "test.csv", path.c_str(), nullptr, &err), GM_OK) << err.msg;
  fclose(in);
  return path;
}

gr_config_t Config(const char **spec) {
  gr_config_t c;
  memset(&c, 0, sizeof c);
  c.policies = spec;
  c.n_policies = 1;
  c.cuda_ordinal = -1;
  c.jobs = 1;
  c.preload = -1;
  c.serve_failed = 1;
  c.device = -1;
  c.event_timing = RP_EVENTS_RECORDED;
  c.late_mallocs = 1;
  c.read_flags = GMT_READ_SALVAGE;
  return c;
}

rp_result_t Replay(const std::string &trace, const char *spec, uint64_t capacity = 0) {
  const char *specs[1] = {spec};
  gr_config_t c = Config(specs);
  c.capacity = capacity;
  rp_result_t *r = new rp_result_t();
  gr_trace_info_t info;
  gm_err_t err{};
  EXPECT_EQ(gr_run_trace(&c, trace.c_str(), &info, &r, &err), GM_OK) << err.msg;
  rp_result_t out = *r;
  delete r;
  return out;
}

std::string Export(const std::string &trace, const char *spec, gr_memviz_stats_t *st, uint64_t capacity = 0) {
  const char *specs[1] = {spec};
  gr_config_t c = Config(specs);
  c.capacity = capacity;
  std::string out = Tmp("x.pickle");
  gm_err_t err{};
  EXPECT_EQ(gr_memviz_export(&c, trace.c_str(), spec, out.c_str(), st, &err), GM_OK) << err.msg;
  return out;
}

// The blocks of every segment tile it; their states and sizes add up to the segment's figures.
void CheckSegments(const pkr_val_t *segs, int *live, int *pending) {
  *live = *pending = 0;
  ASSERT_EQ(segs->type, PKR_LIST);
  for (size_t i = 0; i < segs->n; i++) {
    const pkr_val_t *s = segs->items[i];
    int64_t at = Int(Get(s, "address")), total = Int(Get(s, "total_size")), alloc = 0;
    const pkr_val_t *bl = Get(s, "blocks");
    ASSERT_EQ(bl->type, PKR_LIST);
    ASSERT_GT(bl->n, 0u);
    for (size_t k = 0; k < bl->n; k++) {
      const pkr_val_t *b = bl->items[k];
      EXPECT_EQ(Int(Get(b, "address")), at) << "segment " << i << " block " << k;
      std::string state = Str(Get(b, "state"));
      EXPECT_LE(Int(Get(b, "requested_size")), Int(Get(b, "size")));
      if (state == "active_allocated") (*live)++, alloc += Int(Get(b, "size"));
      else if (state == "active_pending_free") (*pending)++;
      else EXPECT_EQ(state, "inactive");
      EXPECT_EQ(Get(b, "frames")->type, PKR_LIST);
      at += Int(Get(b, "size"));
    }
    EXPECT_EQ(at, Int(Get(s, "address")) + total);
    EXPECT_EQ(alloc, Int(Get(s, "allocated_size")));
    EXPECT_EQ(Get(s, "is_expandable")->type, PKR_BOOL);
    EXPECT_EQ(Get(s, "segment_pool_id")->type, PKR_TUPLE);
  }
}

std::map<std::string, int> Actions(const pkr_val_t *trace) {
  std::map<std::string, int> n;
  for (size_t i = 0; i < trace->n; i++) n[Str(Get(trace->items[i], "action"))]++;
  return n;
}

TEST(MemvizExport, RoundTripsThroughTheImporter) {
  std::string trace = MakeTrace(kTrace);
  for (const char *spec : {"pytorch", "pytorch:expandable_segments:True", "bfc", "direct", "prealloc:1GiB"}) {
    SCOPED_TRACE(spec);
    gr_memviz_stats_t st;
    std::string out = Export(trace, spec, &st);
    Doc d(ReadAll(out));
    ASSERT_EQ(d.st, GM_OK) << d.err.msg;
    const pkr_val_t *dt = Get(d.root(), "device_traces");
    ASSERT_EQ(dt->n, 1u);
    auto act = Actions(dt->items[0]);
    EXPECT_EQ(act["alloc"], 6);
    EXPECT_EQ(act["free_completed"], 4);  // 0x3000's free never completes, 0x4000 is never freed
    EXPECT_EQ(act["free_requested"], 5);
    EXPECT_EQ(act["snapshot"], 1);
    EXPECT_EQ(act["oom"], 0);
    bool expandable = strstr(spec, "expandable") != nullptr;
    EXPECT_EQ(act["segment_map"] > 0, expandable);
    EXPECT_EQ(act["segment_alloc"] > 0, !expandable);
    int live, pending;
    CheckSegments(Get(d.root(), "segments"), &live, &pending);
    EXPECT_EQ(live, 1);     // 0x4000
    EXPECT_EQ(pending, 1);  // 0x3000
    // the frames of callsite 1, innermost first
    const pkr_val_t *first = dt->items[0]->items[0];
    for (size_t i = 0; Str(Get(first, "action")) != "alloc"; i++) first = dt->items[0]->items[i + 1];
    const pkr_val_t *fr = Get(first, "frames");
    ASSERT_EQ(fr->n, 2u);
    EXPECT_EQ(Str(Get(fr->items[0], "filename")), "train.py");
    EXPECT_EQ(Int(Get(fr->items[0], "line")), 10);
    EXPECT_EQ(Str(Get(fr->items[0], "name")), "forward");
    EXPECT_EQ(Str(Get(fr->items[1], "name")), "main");
    // imported back and replayed: the same figures as the direct replay
    std::string back = Tmp("back.zst");
    gm_err_t err{};
    snap_import_stats_t ist;
    ASSERT_EQ(snap_import_file(out.c_str(), back.c_str(), nullptr, &ist, &err), GM_OK) << err.msg;
    EXPECT_EQ(ist.synthetic, 0u);  // the final segments agree with the trace
    rp_result_t a = Replay(trace, spec), b = Replay(back, spec);
    EXPECT_EQ(a.peak_reserved_bytes, b.peak_reserved_bytes);
    EXPECT_EQ(a.peak_requested_bytes, b.peak_requested_bytes);
    EXPECT_EQ(a.peak_allocated_bytes, b.peak_allocated_bytes);
    EXPECT_EQ(a.peak_reserved_bytes, st.dev[0].peak_reserved);
    EXPECT_EQ(a.allocs, b.allocs);
  }
}

TEST(MemvizExport, OutOfMemoryAndDevices) {
  // within 64 MiB the 70 MiB request fails: an oom entry with torch's device_free key
  std::string trace = MakeTrace(kTrace);
  gr_memviz_stats_t st;
  Doc d(ReadAll(Export(trace, "pytorch", &st, 64ull << 20)));
  ASSERT_EQ(d.st, GM_OK);
  const pkr_val_t *t = Get(d.root(), "device_traces")->items[0];
  int ooms = 0;
  for (size_t i = 0; i < t->n; i++)
    if (Str(Get(t->items[i], "action")) == "oom") {
      ooms++;
      EXPECT_EQ(Int(Get(t->items[i], "size")), 73400320);
      EXPECT_NE(Get(t->items[i], "device_free"), nullptr);
      EXPECT_EQ(Get(t->items[i], "addr"), nullptr);
    }
  EXPECT_EQ(ooms, 1);
  EXPECT_EQ(st.dev[0].ooms, 1u);
  // devices 0 and 2: device_traces is indexed by ordinal, device 1's list empty
  std::string two = MakeTrace(std::string(kTrace) + "9700,alloc,2,0,0x9000,1048576,device,0x0,0,2,0\n");
  Doc d2(ReadAll(Export(two, "pytorch", &st)));
  ASSERT_EQ(d2.st, GM_OK);
  const pkr_val_t *dt = Get(d2.root(), "device_traces");
  ASSERT_EQ(dt->n, 3u);
  EXPECT_EQ(dt->items[1]->n, 0u);
  EXPECT_EQ(Actions(dt->items[2])["alloc"], 1);
  EXPECT_EQ(st.n_devices, 2);
  const pkr_val_t *segs = Get(d2.root(), "segments");
  int on2 = 0;
  for (size_t i = 0; i < segs->n; i++) on2 += Int(Get(segs->items[i], "device")) == 2;
  EXPECT_EQ(on2, 1);
}

TEST(MemvizExport, CallsitesFromStrangers) {
  // a 100 KB callsite with bytes that are not UTF-8, and 3000 distinct callsites
  std::string csv = "ts_ns,kind,device,stream,addr,size,mem_kind,flags,corr_id,callsite,context\n#string.1=";
  for (int i = 0; i < 25000; i++) csv += "a\\xff";  // the text form's escape of the byte 0xff
  csv += ":7:f\n1,alloc,0,0,0x100,4096,device,0x0,0,1,0\n";
  for (int i = 0; i < 3000; i++)
    csv += "#string." + std::to_string(i + 2) + "=f" + std::to_string(i) + ".py:" + std::to_string(i) + ":g\n" +
           std::to_string(i + 2) + ",alloc,0,0," + std::to_string(0x10000 + i * 16) + ",8,device,0x0,0," +
           std::to_string(i + 2) + ",0\n";
  std::string trace = MakeTrace(csv);
  gr_memviz_stats_t st;
  std::string out = Export(trace, "pytorch", &st);
  EXPECT_EQ(st.callsites, 3001u);
  Doc d(ReadAll(out));
  ASSERT_EQ(d.st, GM_OK) << d.err.msg;
  const pkr_val_t *t = Get(d.root(), "device_traces")->items[0];
  size_t longest = 0;
  for (size_t i = 0; i < t->n; i++) {
    const pkr_val_t *fr = Get(t->items[i], "frames");
    for (size_t k = 0; k < fr->n; k++) {
      std::string f = Str(Get(fr->items[k], "filename"));
      longest = f.size() > longest ? f.size() : longest;
      for (unsigned char c : f) ASSERT_LT(c, 0xf5) << "not UTF-8";
      if (f.size() > 100) {
        EXPECT_NE(f.find("a\xef\xbf\xbd"), std::string::npos);  // U+FFFD for 0xff
      }
    }
  }
  EXPECT_GT(longest, 100u);
  EXPECT_LE(longest, 1600u);  // cut at 512 bytes, each of them 3 at most once made valid
}

TEST(MemvizExport, RefusesWhatItCannotWrite) {
  std::string trace = MakeTrace(kTrace);
  const char *specs[1] = {"async"};
  gr_config_t c = Config(specs);
  gr_memviz_stats_t st;
  gm_err_t err{};
  std::string out = Tmp("async.pickle");
  EXPECT_EQ(gr_memviz_export(&c, trace.c_str(), "async", out.c_str(), &st, &err), GM_ERR_INVAL);
  EXPECT_NE(std::string(err.msg).find("no segment map"), std::string::npos) << err.msg;
  EXPECT_NE(access(out.c_str(), F_OK), 0);
  // an unwritable place: an error, nothing written, an old file kept
  specs[0] = "pytorch";
  EXPECT_EQ(gr_memviz_export(&c, trace.c_str(), "pytorch", "/nonexistent-dir/x.pickle", &st, &err), GM_ERR_IO);
  std::string old = Tmp("old.pickle");
  FILE *f = fopen(old.c_str(), "w");
  fputs("old", f);
  fclose(f);
  EXPECT_NE(gr_memviz_export(&c, "/nonexistent.zst", "pytorch", old.c_str(), &st, &err), GM_OK);
  auto kept = ReadAll(old);
  EXPECT_EQ(std::string(kept.begin(), kept.end()), "old");
}

}  // namespace
