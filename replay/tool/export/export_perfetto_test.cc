// export_perfetto_test.cc: gr_export_perfetto on hand-made traces, the JSON read back with
// jansson: what a viewer needs (slices of one track nest; counters per policy), what the user
// is told (otherData), and the bounds (slice cap, alive-at-the-peak first, whole or nothing).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <jansson.h>
#include <sys/stat.h>
#include <unistd.h>
#include "formats/gmt_testutil.h"
#include "replay/tool/export/export_perfetto.h"

using gmt_test::Ev;

namespace {

constexpr uint64_t MiB = 1ull << 20;

using gmt_test::TempPath;


// Callsite 1 is a two-line stack with a quote and a control character in it.
std::string Write(const char *name, const std::vector<gmt_event_t> &in) {
  std::string path = TempPath(name);
  gmt_header_t h;
  gmt_header_init(&h);
  h.capture_mode = GMT_CAPTURE_SYNTHETIC;
  gm_err_t err = {};
  gmt_writer_t *w = nullptr;
  EXPECT_EQ(gmt_writer_open(&w, path.c_str(), &h, nullptr, &err), GM_OK) << err.msg;
  uint32_t id = 0;
  EXPECT_EQ(gmt_writer_intern(w, "model.py:10 \"forward\"\x01\ntrain.py:3 main", &id, &err), GM_OK);
  std::vector<gmt_event_t> evs = in;
  for (auto &e : evs) e.callsite = e.callsite ? id : 0;
  EXPECT_EQ(gmt_writer_append_n(w, evs.data(), evs.size(), &err), GM_OK) << err.msg;
  EXPECT_EQ(gmt_writer_close(w, &err), GM_OK) << err.msg;
  gmt_header_free(&h);
  return path;
}

gr_config_t Config(const char **specs, int n) {
  gr_config_t c;
  memset(&c, 0, sizeof c);
  c.cuda_ordinal = -1;
  c.jobs = 1;
  c.read_flags = GMT_READ_STRICT;
  c.preload = 1;
  c.device = -1;
  c.late_mallocs = 1;
  c.policies = specs;
  c.n_policies = n;
  return c;
}

struct Slice {
  double ts, dur;
  uint64_t bytes;
  bool at_peak;
  std::string name, callsite;
};

struct Export {
  json_t *root = nullptr;
  gr_perfetto_stats_t st{};
  std::map<long, std::vector<Slice>> by_tid;
  std::map<std::string, std::vector<std::pair<double, uint64_t>>> counters;
  std::map<long, std::string> track_names;
  ~Export() { json_decref(root); }
};

// Replays the trace under specs, exports, reads the JSON back.
void ReplayAndExport(const std::string &trace, std::vector<const char *> specs, const std::string &out, Export *x) {
  gr_config_t cfg = Config(specs.data(), (int)specs.size());
  gr_trace_info_t info;
  std::vector<rp_result_t *> res(specs.size());
  for (auto &r : res) r = (rp_result_t *)malloc(sizeof(rp_result_t));
  gm_err_t err = {};
  ASSERT_EQ(gr_run_trace(&cfg, trace.c_str(), &info, res.data(), &err), GM_OK) << err.msg;
  ASSERT_EQ(gr_export_perfetto(out.c_str(), &cfg, trace.c_str(), &info, res.data(), (int)res.size(), &x->st, &err),
            GM_OK)
      << err.msg;
  for (auto r : res) free(r);
  json_error_t je;
  x->root = json_load_file(out.c_str(), 0, &je);
  ASSERT_NE(x->root, nullptr) << je.text << " at line " << je.line;
  json_t *evs = json_object_get(x->root, "traceEvents");
  ASSERT_TRUE(json_is_array(evs));
  size_t i;
  json_t *e;
  json_array_foreach(evs, i, e) {
    std::string ph = json_string_value(json_object_get(e, "ph"));
    std::string name = json_string_value(json_object_get(e, "name"));
    json_t *args = json_object_get(e, "args");
    if (ph == "X") {
      json_t *cs = json_object_get(args, "callsite");
      x->by_tid[(long)json_integer_value(json_object_get(e, "tid"))].push_back(
          {json_number_value(json_object_get(e, "ts")), json_number_value(json_object_get(e, "dur")),
           (uint64_t)json_integer_value(json_object_get(args, "bytes")),
           json_is_true(json_object_get(args, "alive_at_peak")), name, cs ? json_string_value(cs) : ""});
    } else if (ph == "C") {
      x->counters[name].push_back({json_number_value(json_object_get(e, "ts")),
                                   (uint64_t)json_integer_value(json_object_get(args, "bytes"))});
    } else if (ph == "M" && name == "thread_name") {
      x->track_names[(long)json_integer_value(json_object_get(e, "tid"))] =
          json_string_value(json_object_get(args, "name"));
    }
  }
}

uint64_t MaxOf(const std::vector<std::pair<double, uint64_t>> &v) {
  uint64_t m = 0;
  for (auto &p : v) m = std::max(m, p.second);
  return m;
}

// Two streams; on stream 1 three blocks that overlap without nesting (they need two tracks);
// the peak of live bytes (14 MiB) is when A, B and D are live.
TEST(ExportPerfetto, CountersSlicesAndTracks) {
  std::vector<gmt_event_t> v = {
      Ev(GMT_EV_ALLOC, 1000, 0xa000, 4 * MiB, 1).Cs(1),  // A [1000, 5000)
      Ev(GMT_EV_ALLOC, 2000, 0xb000, 2 * MiB, 1),     // B [2000, 7000): overlaps A, not inside it
      Ev(GMT_EV_ALLOC, 3000, 0xd000, 8 * MiB, 2),     // D [3000, 4000) on stream 2
      Ev(GMT_EV_FREE, 4000, 0xd000, 0, 2),
      Ev(GMT_EV_FREE, 5000, 0xa000, 0, 1),
      Ev(GMT_EV_ALLOC, 6000, 0xc000, 1 * MiB, 1),     // C [6000, end): never freed
      Ev(GMT_EV_FREE, 7000, 0xb000, 0, 1),
      Ev(GMT_EV_ALLOC, 9000, 0xe000, 3 * MiB, 1),
      Ev(GMT_EV_FREE, 9500, 0xe000, 0, 1),
  };
  std::string t = Write("pf_basic.zst", v), out = TempPath("pf_basic.json");
  Export x;
  ReplayAndExport(t, {"pytorch", "direct"}, out, &x);
  EXPECT_EQ(x.st.allocations, 5u);
  EXPECT_EQ(x.st.slices, 5u);
  EXPECT_EQ(x.st.alive_at_peak, 3u);
  EXPECT_EQ(x.st.slices_at_peak, 3u);
  EXPECT_EQ(x.st.peak_live_bytes, 14 * MiB);
  json_t *od = json_object_get(x.root, "otherData");
  EXPECT_EQ(json_integer_value(json_object_get(od, "allocations")), 5);
  EXPECT_EQ(json_integer_value(json_object_get(od, "peak_live_bytes")), (json_int_t)(14 * MiB));
  EXPECT_NE(std::string(json_string_value(json_object_get(od, "slices_rule"))).find("5 of 5 written"), std::string::npos);

  // Counters: live bytes peak at 14 MiB; one reserved series per policy, direct's at least live.
  ASSERT_EQ(x.counters.count("live bytes"), 1u);
  EXPECT_EQ(MaxOf(x.counters["live bytes"]), 14 * MiB);
  ASSERT_EQ(x.counters.count("reserved: direct"), 1u);
  ASSERT_EQ(x.counters.count("reserved: pytorch"), 1u);
  EXPECT_GE(MaxOf(x.counters["reserved: direct"]), 14 * MiB);
  EXPECT_GE(MaxOf(x.counters["reserved: pytorch"]), 14 * MiB);

  // Every slice's track is named for its stream, and slices of one track nest.
  std::map<std::string, int> per_stream;
  size_t slices = 0;
  for (auto &kv : x.by_tid) {
    ASSERT_TRUE(x.track_names.count(kv.first)) << kv.first;
    per_stream[x.track_names[kv.first].substr(0, x.track_names[kv.first].find(" #"))]++;
    auto s = kv.second;
    std::sort(s.begin(), s.end(), [](const Slice &a, const Slice &b) { return a.ts < b.ts; });
    for (size_t i = 0; i < s.size(); i++)
      for (size_t j = i + 1; j < s.size(); j++) {
        bool disjoint = s[j].ts >= s[i].ts + s[i].dur;
        bool inside = s[j].ts + s[j].dur <= s[i].ts + s[i].dur;
        EXPECT_TRUE(disjoint || inside) << "track " << kv.first << ": " << s[i].name << " and " << s[j].name;
      }
    slices += s.size();
  }
  EXPECT_EQ(slices, 5u);
  EXPECT_EQ(per_stream["stream 0x1"], 2);  // A and B overlap without nesting: two tracks
  EXPECT_EQ(per_stream["stream 0x2"], 1);

  // The slice of A: named by size and the callsite's first line, the stack kept, escaped.
  bool found = false;
  for (auto &kv : x.by_tid)
    for (auto &s : kv.second)
      if (s.bytes == 4 * MiB) {
        found = true;
        EXPECT_EQ(s.name.rfind("4.00 MiB model.py:10 \"forward\"", 0), 0u) << s.name;
        EXPECT_NE(s.callsite.find("\ntrain.py:3 main"), std::string::npos) << s.callsite;
        EXPECT_EQ(s.callsite.find('\x01'), std::string::npos);
        EXPECT_DOUBLE_EQ(s.ts, 1.0);  // microseconds
        EXPECT_DOUBLE_EQ(s.dur, 4.0);
        EXPECT_TRUE(s.at_peak);
      }
  EXPECT_TRUE(found);
  unlink(t.c_str());
  unlink(out.c_str());
}

// More allocations than the cap: every allocation alive at the peak is written, then the
// largest of the rest; the file stays small.
TEST(ExportPerfetto, CapKeepsThePeakThenTheLargest) {
  std::vector<gmt_event_t> v;
  uint64_t t = 1000;
  const int n_small = 3 * GR_PERFETTO_MAX_SLICES;
  for (int i = 0; i < n_small; i++) {  // short-lived, growing sizes: the largest come last
    v.push_back(Ev(GMT_EV_ALLOC, t += 10, 0x100000 + i, 512 + i, 1));
    v.push_back(Ev(GMT_EV_FREE, t += 10, 0x100000 + i, 0, 1));
  }
  // 1000 x 64 B never freed: the peak (64000 B > any one of the others), each smaller than all others
  for (int i = 0; i < 1000; i++) v.push_back(Ev(GMT_EV_ALLOC, t += 10, 0x900000 + i, 64, 1));
  std::string tp = Write("pf_cap.zst", v), out = TempPath("pf_cap.json");
  Export x;
  ReplayAndExport(tp, {"direct"}, out, &x);
  EXPECT_EQ(x.st.allocations, (uint64_t)n_small + 1000);
  EXPECT_EQ(x.st.slices, (uint64_t)GR_PERFETTO_MAX_SLICES);
  EXPECT_EQ(x.st.alive_at_peak, 1000u);
  EXPECT_EQ(x.st.slices_at_peak, 1000u);
  EXPECT_EQ(x.st.peak_live_bytes, 64000u);
  uint64_t smallest_other = UINT64_MAX;
  size_t n = 0;
  for (auto &kv : x.by_tid)
    for (auto &s : kv.second) {
      n++;
      if (!s.at_peak) smallest_other = std::min(smallest_other, s.bytes);
    }
  EXPECT_EQ(n, (size_t)GR_PERFETTO_MAX_SLICES);
  // The others are the largest: sizes 512+i for the last MAX-1000 of them.
  EXPECT_EQ(smallest_other, 512u + n_small - (GR_PERFETTO_MAX_SLICES - 1000));
  struct stat sb;
  ASSERT_EQ(stat(out.c_str(), &sb), 0);
  EXPECT_LT(sb.st_size, 4 << 20);
  unlink(tp.c_str());
  unlink(out.c_str());
}

// A trace of frees only: a file with no slices that says so, no crash.
TEST(ExportPerfetto, FreesOnly) {
  std::string t = Write("pf_frees.zst", {Ev(GMT_EV_FREE, 10, 0x1000, 0, 1), Ev(GMT_EV_FREE, 20, 0x2000, 0, 1)});
  std::string out = TempPath("pf_frees.json");
  Export x;
  ReplayAndExport(t, {"pytorch"}, out, &x);
  EXPECT_EQ(x.st.allocations, 0u);
  EXPECT_EQ(x.st.slices, 0u);
  EXPECT_TRUE(x.by_tid.empty());
  EXPECT_EQ(MaxOf(x.counters["live bytes"]), 0u);
  unlink(t.c_str());
  unlink(out.c_str());
}

// A file that cannot be written: an error naming it, and an older file of that name kept.
TEST(ExportPerfetto, WholeOrNothing) {
  std::string t = Write("pf_err.zst", {Ev(GMT_EV_ALLOC, 10, 0x1000, MiB, 1)});
  const char *specs[] = {"direct"};
  gr_config_t cfg = Config(specs, 1);
  gr_trace_info_t info;
  rp_result_t *r = (rp_result_t *)malloc(sizeof *r);
  gm_err_t err = {};
  ASSERT_EQ(gr_run_trace(&cfg, t.c_str(), &info, &r, &err), GM_OK) << err.msg;
  EXPECT_NE(gr_export_perfetto("/nonexistent-dir/x.json", &cfg, t.c_str(), &info, &r, 1, nullptr, &err), GM_OK);
  EXPECT_NE(std::string(err.msg).find("/nonexistent-dir"), std::string::npos) << err.msg;
  // A trace that cannot be read: the old output is left as it was.
  std::string out = TempPath("pf_keep.json");
  FILE *f = fopen(out.c_str(), "w");
  fputs("old", f);
  fclose(f);
  gm_err_clear(&err);
  EXPECT_NE(gr_export_perfetto(out.c_str(), &cfg, "/nonexistent.zst", &info, &r, 1, nullptr, &err), GM_OK);
  char buf[8] = {0};
  f = fopen(out.c_str(), "r");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(fread(buf, 1, sizeof buf - 1, f), 3u);
  fclose(f);
  EXPECT_STREQ(buf, "old");
  free(r);
  unlink(t.c_str());
  unlink(out.c_str());
}

}  // namespace
