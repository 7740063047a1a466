// ana_test.cc: the analyzer library: scanner, schema, loaders (idempotent, interrupted),
// report tables and CSV against numbers computed here from the events the test wrote,
// escaping, recommendation.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "formats/gmt_testutil.h"
#include "analyze/ana.h"
#include "formats/gmt_salvage_check.h"

using gmt_test::Ev;

namespace {

std::string TmpDir() {
  const char *t = getenv("TEST_TMPDIR");
  return t ? t : "/tmp";
}

std::string Unique(const std::string &stem) {
  static int n = 0;
  return TmpDir() + "/" + stem + "-" + std::to_string(getpid()) + "-" + std::to_string(n++);
}

struct Fixture {
  std::vector<gmt_event_t> evs;
  uint32_t callsite = 0;
};


// Random alloc/free program on two streams; frees carry the size 0 as recorders write them.
std::vector<gmt_event_t> RandomProgram(unsigned seed, size_t n) {
  std::mt19937_64 rng(seed);
  std::vector<gmt_event_t> out;
  std::vector<uint64_t> live;
  uint64_t t = 0, next = 1 << 20;
  for (size_t i = 0; i < n; i++) {
    t += 1 + rng() % 5000;
    if (live.empty() || (live.size() < 200 && rng() % 2)) {
      uint64_t size = 1 + rng() % (1u << (rng() % 24));
      out.push_back(Ev(GMT_EV_ALLOC, t, next, size, rng() % 2 ? 7 : 9));
      live.push_back(next);
      next += 1 << 25;
    } else {
      size_t k = rng() % live.size();
      out.push_back(Ev(GMT_EV_FREE, t, live[k], 0, 7));
      live[k] = live.back();
      live.pop_back();
    }
  }
  return out;
}

void WriteTrace(const std::string &path, std::vector<gmt_event_t> evs, const char *cmdline = "python train.py",
                int rank = -1, uint64_t start = 1700000000000000000ull, const char *conf = nullptr,
                const char *callsite = nullptr) {
  gmt_header_t h;
  gmt_header_init(&h);
  gm_err_t err = {};
  h.pid = 4242;
  h.rank = rank;
  h.world_size = rank >= 0 ? 2 : -1;
  h.start_time_ns = start;
  h.capture_mode = GMT_CAPTURE_SYNTHETIC;
  ASSERT_EQ(gmt_header_set(&h.host, "node1", &err), GM_OK);
  ASSERT_EQ(gmt_header_set(&h.command_line, cmdline, &err), GM_OK);
  if (conf) {
    ASSERT_EQ(gmt_header_kv_set(&h, "PYTORCH_CUDA_ALLOC_CONF", conf, &err), GM_OK);
  }
  gmt_writer_t *w = nullptr;
  gmt_writer_opts_t o = {};
  o.chunk_events = 1000;
  ASSERT_EQ(gmt_writer_open(&w, path.c_str(), &h, &o, &err), GM_OK) << err.msg;
  if (callsite) {
    uint32_t id = 0;
    ASSERT_EQ(gmt_writer_intern(w, callsite, &id, &err), GM_OK);
    for (auto &e : evs)
      if (e.kind == GMT_EV_ALLOC) e.callsite = id;
  }
  ASSERT_EQ(gmt_writer_append_n(w, evs.data(), evs.size(), &err), GM_OK) << err.msg;
  ASSERT_EQ(gmt_writer_close(w, &err), GM_OK) << err.msg;
  gmt_header_free(&h);
}

// What the tests expect, computed straight from the events (independent of ana_scan).
struct Expect {
  uint64_t peak = 0, peak_seq = 0;
  std::map<int, std::pair<uint64_t, uint64_t>> size_hist;  // log2 -> allocs, bytes
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> live_at_peak_by_stream;
  uint64_t never_freed = 0;
};

Expect Compute(const std::vector<gmt_event_t> &evs) {
  Expect x;
  std::map<uint64_t, gmt_event_t> live;
  uint64_t cur = 0;
  std::map<uint64_t, gmt_event_t> at_peak;
  for (size_t i = 0; i < evs.size(); i++) {
    const auto &e = evs[i];
    if (e.kind == GMT_EV_ALLOC) {
      live[e.addr] = e;
      cur += e.size;
      int c = 0;
      while ((2ull << c) <= e.size) c++;
      x.size_hist[c].first++;
      x.size_hist[c].second += e.size;
      if (cur > x.peak) {
        x.peak = cur;
        x.peak_seq = i;
        at_peak = live;
      }
    } else if (e.kind == GMT_EV_FREE) {
      auto it = live.find(e.addr);
      if (it != live.end()) {
        cur -= it->second.size;
        live.erase(it);
      }
    }
  }
  for (auto &kv : at_peak) {
    x.live_at_peak_by_stream[kv.second.stream].first++;
    x.live_at_peak_by_stream[kv.second.stream].second += kv.second.size;
  }
  x.never_freed = live.size();
  return x;
}

int64_t Scalar(ana_db_t *db, const std::string &sql) {
  sqlite3 *h = static_cast<sqlite3 *>(ana_db_sqlite(db));
  sqlite3_stmt *st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sqlite3_errmsg(h) << " in " << sql;
  int64_t v = -1;
  if (sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

// Every table's row count: a cheap fingerprint of the database's contents.
std::string Fingerprint(ana_db_t *db) {
  std::string out;
  for (const char *t : {"traces", "trace_kv", "trace_kinds", "trace_devices", "strings", "events", "open_allocs",
                        "size_histogram", "lifetime_histogram", "trace_timeline", "results", "runs",
                        "run_timeline"})
    out += std::string(t) + "=" + std::to_string(Scalar(db, std::string("SELECT COUNT(*) FROM ") + t)) + " ";
  out += "sum=" + std::to_string(Scalar(db, "SELECT TOTAL(size) + TOTAL(ts_ns) FROM events"));
  return out;
}

constexpr int64_t kG = 1ll << 30;  // figures above the advice floor (64 MiB, 1 %)

std::string ResultsJson(const std::string &trace, uint64_t start, const std::vector<std::string> &policies,
                        const std::vector<int64_t> &reserved, int64_t lower, bool broken_last = false,
                        const std::vector<std::pair<int64_t, int64_t>> &ranges = {},
                        const std::string &moved_by = "stream_events", const std::vector<int64_t> &bump = {},
                        const std::vector<std::string> &tune = {}) {
  std::ostringstream o;
  o << "{\"format\":\"gpumem-results\",\"version\":1,\"tool\":\"fake\",\"created_unix_ns\":1,\"runs\":[";
  for (size_t i = 0; i < policies.size(); i++) {
    if (i) o << ",";
    o << "{\"trace\":\"" << trace << "\",\"trace_start_time_ns\":" << start << ",\"trace_pid\":4242,"
      << "\"policy\":\"" << policies[i] << "\",\"backend\":\"sim\",\"capacity_bytes\":0,\"events\":10,";
    if (!(broken_last && i + 1 == policies.size())) o << "\"peak_reserved_bytes\":" << reserved[i] << ",";
    o << "\"peak_allocated_bytes\":" << lower << ",\"peak_requested_bytes\":" << lower
      << ",\"lower_bound_bytes\":" << lower << ",\"fragmentation_at_peak\":0.25,\"fragmentation_mean\":0.1,"
      << "\"device_alloc_calls\":" << (10 + i) << ",\"device_free_calls\":1,\"alloc_retries\":0,\"ooms\":0,"
      << "\"first_oom_event\":-1,\"first_oom_ts_ns\":-1,\"replay_seconds\":0.5,\"events_per_second\":20.0,"
      << "\"some_future_key\":{\"x\":1},";
    if (i < bump.size() && bump[i] > 0) o << "\"placement_bump_bytes\":" << bump[i] << ",";
    if (i < tune.size() && !tune[i].empty()) o << "\"tune\":" << tune[i] << ",";
    if (i < ranges.size() && ranges[i].first >= 0)
      o << "\"timing_sensitive\":" << (ranges[i].first != ranges[i].second ? "true" : "false")
        << ",\"peak_reserved_range\":{\"low_bytes\":" << ranges[i].first << ",\"high_bytes\":" << ranges[i].second
        << ",\"moved_by\":\"" << moved_by << "\"},";
    o
      << "\"timeline\":{\"ts_ns\":[0,100,200],\"reserved\":[0," << reserved[i] << "," << reserved[i]
      << "],\"allocated\":[0," << lower << ",0],\"requested\":[0," << lower << ",0]}}";
  }
  o << "]}";
  return o.str();
}

void WriteFile(const std::string &path, const std::string &text) {
  std::ofstream f(path);
  f << text;
}

std::vector<std::vector<std::string>> ReadCsv(const std::string &path) {
  std::ifstream f(path);
  std::vector<std::vector<std::string>> rows;
  std::string line;
  while (std::getline(f, line)) {
    std::vector<std::string> cells;
    std::string cell;
    std::istringstream ls(line);
    while (std::getline(ls, cell, ',')) cells.push_back(cell);
    if (!line.empty() && line.back() == ',') cells.push_back("");
    rows.push_back(cells);
  }
  return rows;
}

}  // namespace

TEST(Scan, PairsPeakAndAnomalies) {
  std::vector<ana_pair_t> pairs;
  ana_scan_t *s = nullptr;
  gm_err_t err = {};
  ASSERT_EQ(ana_scan_new(&s, [](void *ctx, const ana_pair_t *p, gm_err_t *) {
    static_cast<std::vector<ana_pair_t> *>(ctx)->push_back(*p);
    return GM_OK;
  }, &pairs, &err), GM_OK);
  std::vector<gmt_event_t> evs = {
      Ev(GMT_EV_ALLOC, 10, 0x1000, 100, 7), Ev(GMT_EV_ALLOC, 20, 0x2000, 300, 7),
      Ev(GMT_EV_ALLOC, 25, 0x9000, 5000, 7).Mem(GMT_MEM_PINNED),  // host memory: not GPU bytes
      Ev(GMT_EV_FREE, 30, 0x1000, 0, 7), Ev(GMT_EV_FREE, 35, 0x5000, 0, 7),  // unknown free
      Ev(GMT_EV_ALLOC, 40, 0x3000, 50, 7), Ev(GMT_EV_ALLOC, 50, 0x3000, 60, 7),  // alloc over live
  };
  for (auto &e : evs) ASSERT_EQ(ana_scan_event(s, &e, &err), GM_OK);
  ASSERT_EQ(ana_scan_finish(s, &err), GM_OK);
  const ana_summary_t *m = ana_scan_summary(s);
  EXPECT_EQ(m->events, 7u);
  EXPECT_EQ(m->peak_live_bytes, 400u);
  EXPECT_EQ(m->peak_live_seq, 1u);
  EXPECT_EQ(m->unknown_free, 1u);
  EXPECT_EQ(m->double_alloc, 1u);
  EXPECT_EQ(m->live_bytes_at_end, 360u);
  EXPECT_EQ(m->by_kind[GMT_EV_ALLOC], 5u);
  ASSERT_EQ(pairs.size(), 5u);  // 0x1000 freed, 0x3000 replaced, then 3 never freed at the end
  EXPECT_EQ(pairs[0].addr, 0x1000u);
  EXPECT_EQ(pairs[0].free_seq, 3u);
  EXPECT_EQ(pairs[1].addr, 0x3000u);
  EXPECT_EQ(pairs[1].free_seq, 6u);
  EXPECT_EQ(pairs[2].free_seq, UINT64_MAX);
  EXPECT_EQ(m->life_allocs[0], 2u);  // never freed GPU allocations (the pinned one is not GPU memory)
  ana_scan_free(s);
}

TEST(Schema, CreatesVersionedSchemaAndRefusesOthers) {
  gm_err_t err = {};
  ana_db_t *db = nullptr;
  std::string p = Unique("schema") + ".db";
  ASSERT_EQ(ana_db_open(&db, p.c_str(), &err), GM_OK) << err.msg;
  EXPECT_EQ(Scalar(db, "SELECT version FROM schema_version"), ANA_SCHEMA_VERSION);
  EXPECT_GE(Scalar(db, "SELECT COUNT(*) FROM sqlite_master WHERE type='view'"), 6);
  ASSERT_EQ(sqlite3_exec(static_cast<sqlite3 *>(ana_db_sqlite(db)), "UPDATE schema_version SET version=99",
                         nullptr, nullptr, nullptr), SQLITE_OK);
  ana_db_close(db);
  EXPECT_EQ(ana_db_open(&db, p.c_str(), &err), GM_ERR_VERSION);
  EXPECT_NE(std::string(err.msg).find("newer"), std::string::npos) << err.msg;

  std::string other = Unique("other") + ".db";
  sqlite3 *h = nullptr;
  sqlite3_open(other.c_str(), &h);
  sqlite3_exec(h, "CREATE TABLE x(a)", nullptr, nullptr, nullptr);
  sqlite3_close(h);
  EXPECT_EQ(ana_db_open(&db, other.c_str(), &err), GM_ERR_FORMAT);
  EXPECT_NE(std::string(err.msg).find("not a gpumem database"), std::string::npos) << err.msg;

  std::string junk = Unique("junk") + ".db";
  WriteFile(junk, std::string(8192, 'x'));
  EXPECT_LT(ana_db_open(&db, junk.c_str(), &err), 0);
  EXPECT_NE(std::string(err.msg).find("cannot open database"), std::string::npos) << err.msg;
}

TEST(Load, TraceMatchesIndependentComputationAndReloadChangesNothing) {
  auto evs = RandomProgram(1, 20000);
  Expect x = Compute(evs);
  std::string trace = Unique("t") + ".zst", dbp = Unique("load") + ".db";
  WriteTrace(trace, evs, "python train.py", -1, 1700000000000000000ull, nullptr, "model.py:12 forward");
  gm_err_t err = {};
  ana_db_t *db = nullptr;
  ASSERT_EQ(ana_db_open(&db, dbp.c_str(), &err), GM_OK);
  const char *in[] = {trace.c_str()};
  ana_load_stats_t st = {};
  ASSERT_EQ(ana_db_load(db, in, 1, nullptr, &st, &err), GM_OK) << err.msg;
  EXPECT_EQ(st.traces_loaded, 1u);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) FROM events"), 20000);
  EXPECT_EQ(Scalar(db, "SELECT peak_live_bytes FROM traces"), (int64_t)x.peak);
  EXPECT_EQ(Scalar(db, "SELECT peak_live_seq FROM traces"), (int64_t)x.peak_seq);
  EXPECT_EQ(Scalar(db, "SELECT SUM(size) FROM v_live_at_peak"), (int64_t)x.peak);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) FROM open_allocs"), (int64_t)x.never_freed);
  // Row order is trace order; seq is the event index.
  EXPECT_EQ(Scalar(db, "SELECT ts_ns FROM v_events WHERE seq=123"), (int64_t)evs[123].ts_ns);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) FROM strings WHERE text='model.py:12 forward'"), 1);
  // The histograms made at load agree with the views over allocations.
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) FROM (SELECT trace_id,size_log2,allocs,bytes FROM size_histogram"
                       " EXCEPT SELECT trace_id,size_log2,allocs,bytes FROM v_size_histogram)"), 0);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) FROM (SELECT * FROM v_lifetime_histogram EXCEPT"
                       " SELECT * FROM lifetime_histogram)"), 0);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) FROM size_histogram"), (int64_t)x.size_hist.size());
  for (auto &kv : x.size_hist)
    EXPECT_EQ(Scalar(db, "SELECT allocs FROM size_histogram WHERE size_log2=" + std::to_string(kv.first)),
              (int64_t)kv.second.first);
  std::string before = Fingerprint(db);
  ana_load_stats_t st2 = {};
  ASSERT_EQ(ana_db_load(db, in, 1, nullptr, &st2, &err), GM_OK) << err.msg;
  EXPECT_EQ(st2.traces_skipped, 1u);
  EXPECT_EQ(Fingerprint(db), before);
  ana_db_close(db);
}

TEST(Load, InterruptedLoadLeavesDatabaseAsItWas) {
  std::string t1 = Unique("a") + ".zst", t2 = Unique("b") + ".zst", dbp = Unique("int") + ".db";
  WriteTrace(t1, RandomProgram(2, 3000), "a", -1, 1);
  WriteTrace(t2, RandomProgram(3, 5000), "b", -1, 2);
  gm_err_t err = {};
  ana_db_t *db = nullptr;
  ASSERT_EQ(ana_db_open(&db, dbp.c_str(), &err), GM_OK);
  const char *first[] = {t1.c_str()};
  ana_load_stats_t st = {};
  ASSERT_EQ(ana_db_load(db, first, 1, nullptr, &st, &err), GM_OK);
  std::string before = Fingerprint(db);

  // A fault midway through the second trace: neither that trace nor anything else stays.
  ana_load_opts_t o = {};
  o.fault_after_events = 2500;
  const char *second[] = {t2.c_str()};
  EXPECT_LT(ana_db_load(db, second, 1, &o, &st, &err), 0);
  EXPECT_NE(std::string(err.msg).find("fault injected"), std::string::npos) << err.msg;
  EXPECT_EQ(Fingerprint(db), before);

  // A results file broken in its last run, after a good trace in the same load.
  std::string bad = Unique("bad") + ".json";
  WriteFile(bad, ResultsJson(t2, 2, {"pytorch", "direct"}, {100, 90}, 80, /*broken_last=*/true));
  const char *mixed[] = {t2.c_str(), bad.c_str()};
  EXPECT_LT(ana_db_load(db, mixed, 2, nullptr, &st, &err), 0);
  EXPECT_NE(std::string(err.msg).find("peak_reserved_bytes"), std::string::npos) << err.msg;
  EXPECT_EQ(Fingerprint(db), before);

  // Truncated JSON.
  std::string cut = Unique("cut") + ".json";
  std::string good = ResultsJson(t2, 2, {"pytorch"}, {100}, 80);
  WriteFile(cut, good.substr(0, good.size() / 2));
  const char *c[] = {cut.c_str()};
  EXPECT_EQ(ana_db_load(db, c, 1, nullptr, &st, &err), GM_ERR_FORMAT);
  EXPECT_EQ(Fingerprint(db), before);
  ana_db_close(db);

  // The database still opens and holds what it held.
  ASSERT_EQ(ana_db_open(&db, dbp.c_str(), &err), GM_OK);
  EXPECT_EQ(Fingerprint(db), before);
  ana_db_close(db);
}

// What `gpuanalyze recommend` prints for the database db.
std::string RecommendText(ana_db_t *db) {
  gm_err_t err = {};
  char *buf = nullptr;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  EXPECT_EQ(ana_recommend(db, f, &err), GM_OK) << err.msg;
  fclose(f);
  std::string rec(buf, len);
  free(buf);
  return rec;
}

// The same for a fresh database dbp loaded with the trace t and its results js.
std::string RecommendOfFiles(const std::string &t, const std::string &js, const std::string &dbp) {
  gm_err_t err = {};
  ana_db_t *db = nullptr;
  EXPECT_EQ(ana_db_open(&db, dbp.c_str(), &err), GM_OK);
  const char *in[] = {t.c_str(), js.c_str()};
  ana_load_stats_t st = {};
  EXPECT_EQ(ana_db_load(db, in, 2, nullptr, &st, &err), GM_OK) << err.msg;
  std::string rec = RecommendText(db);
  ana_db_close(db);
  return rec;
}

// gpuanalyze report loads the trace while gpureplay writes its results: results_ready is
// called once, after the trace and before the results file (written only then here); its
// error rolls the whole load back, the trace too.
struct Ready {
  std::string js, body;
  int calls = 0;
  bool fail = false;
};
gm_status_t ReadyWrite(void *ctx, gm_err_t *err) {
  Ready *r = static_cast<Ready *>(ctx);
  r->calls++;
  if (r->fail) return gm_err_set(err, GM_ERR_IO, "gpureplay failed (exit status 1)");
  WriteFile(r->js, r->body);
  return GM_OK;
}

TEST(Load, ResultsReadyIsAwaitedBeforeTheResultsAndItsErrorRollsBack) {
  std::string t = Unique("w") + ".zst", js = Unique("w") + ".json", dbp = Unique("wait") + ".db";
  WriteTrace(t, RandomProgram(4, 1000), "python x.py", -1, 777);
  Ready r{js, ResultsJson(t, 777, {"pytorch", "direct"}, {300 * kG, 150 * kG}, 120 * kG)};
  WriteFile(js, "not yet");  // what a results file holds before gpureplay has written it
  gm_err_t err = {};
  ana_db_t *db = nullptr;
  ASSERT_EQ(ana_db_open(&db, dbp.c_str(), &err), GM_OK);
  const char *in[] = {t.c_str(), js.c_str()};
  ana_load_opts_t o = {};
  o.results_ready = ReadyWrite;
  o.results_ctx = &r;
  ana_load_stats_t st = {};
  r.fail = true;
  EXPECT_LT(ana_db_load(db, in, 2, &o, &st, &err), 0);
  EXPECT_EQ(r.calls, 1);
  EXPECT_STREQ(err.msg, "gpureplay failed (exit status 1)");
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) FROM traces"), 0);
  r.fail = false;
  ASSERT_EQ(ana_db_load(db, in, 2, &o, &st, &err), GM_OK) << err.msg;
  EXPECT_EQ(r.calls, 2);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) FROM traces"), 1);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) FROM v_runs WHERE trace_id IS NOT NULL"), 2);
  ana_db_close(db);
}

TEST(Load, ResultsJoinTracesAndKeepUnknownKeys) {
  std::string t = Unique("r") + ".zst", js = Unique("r") + ".json", dbp = Unique("res") + ".db";
  WriteTrace(t, RandomProgram(4, 1000), "python x.py", -1, 777);
  WriteFile(js, ResultsJson(t, 777, {"pytorch", "pytorch:expandable_segments:True", "direct"},
                            {300 * kG, 200 * kG, 150 * kG}, 120 * kG));
  gm_err_t err = {};
  ana_db_t *db = nullptr;
  ASSERT_EQ(ana_db_open(&db, dbp.c_str(), &err), GM_OK);
  const char *in[] = {js.c_str(), t.c_str()};  // results before their trace: joined by a view
  ana_load_stats_t st = {};
  ASSERT_EQ(ana_db_load(db, in, 2, nullptr, &st, &err), GM_OK) << err.msg;
  EXPECT_EQ(st.runs, 3u);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) FROM v_runs WHERE trace_id=1"), 3);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) FROM run_timeline"), 9);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) FROM runs WHERE summary_json LIKE '%some_future_key%'"), 3);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) FROM runs WHERE summary_json LIKE '%timeline%'"), 0);
  ASSERT_EQ(ana_db_load(db, in, 2, nullptr, &st, &err), GM_OK);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) FROM runs"), 3);

  std::string rec = RecommendText(db);
  EXPECT_NE(rec.find("paste: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"), std::string::npos) << rec;
  EXPECT_NE(rec.find("saving vs default (pytorch, 300.00 GiB): 100.00 GiB (33.3%)"), std::string::npos) << rec;
  EXPECT_NE(rec.find("waste: "), std::string::npos) << rec;
  EXPECT_NE(rec.find("above the lower bound"), std::string::npos) << rec;
  ana_db_close(db);
}

TEST(Report, CsvMatchesIndependentComputation) {
  auto evs = RandomProgram(5, 8000);
  Expect x = Compute(evs);
  std::string t = Unique("c") + ".zst", dbp = Unique("csv") + ".db", dir = Unique("csvdir");
  std::string t2 = Unique("c2") + ".zst";
  WriteTrace(t, evs, "torchrun rank0", 0, 10);
  auto evs2 = RandomProgram(6, 4000);
  Expect x2 = Compute(evs2);
  WriteTrace(t2, evs2, "torchrun rank1", 1, 11);
  gm_err_t err = {};
  ana_db_t *db = nullptr;
  ASSERT_EQ(ana_db_open(&db, dbp.c_str(), &err), GM_OK);
  const char *in[] = {t.c_str(), t2.c_str()};
  ana_load_stats_t st = {};
  ASSERT_EQ(ana_db_load(db, in, 2, nullptr, &st, &err), GM_OK) << err.msg;
  ASSERT_EQ(ana_report_csv(db, dir.c_str(), &err), GM_OK) << err.msg;
  ana_db_close(db);

  auto sizes = ReadCsv(dir + "/size_histogram.csv");
  ASSERT_GE(sizes.size(), 2u);
  EXPECT_EQ(sizes[0][0], "trace_id");
  std::map<uint64_t, std::pair<uint64_t, uint64_t>> got;
  for (size_t i = 1; i < sizes.size(); i++)
    if (sizes[i][0] == "1") got[std::stoull(sizes[i][1])] = {std::stoull(sizes[i][2]), std::stoull(sizes[i][3])};
  ASSERT_EQ(got.size(), x.size_hist.size());
  for (auto &kv : x.size_hist) EXPECT_EQ(got[1ull << kv.first], kv.second) << "class " << kv.first;

  auto streams = ReadCsv(dir + "/live_at_peak_by_stream.csv");
  EXPECT_EQ(streams[0][3], "live_bytes");
  uint64_t total = 0;
  for (size_t i = 1; i < streams.size(); i++) {
    if (streams[i][0] != "1") continue;
    auto want = x.live_at_peak_by_stream[std::stoull(streams[i][1])];
    EXPECT_EQ(std::stoull(streams[i][2]), want.first);
    EXPECT_EQ(std::stoull(streams[i][3]), want.second);
    total += std::stoull(streams[i][3]);
  }
  EXPECT_EQ(total, x.peak);

  auto ranks = ReadCsv(dir + "/ranks.csv");
  ASSERT_EQ(ranks.size(), 3u);  // header + 2 ranks, side by side
  EXPECT_EQ(ranks[1][1], "0");
  EXPECT_EQ(std::stoull(ranks[1][4]), x.peak);
  EXPECT_EQ(std::stoull(ranks[2][4]), x2.peak);
  for (const char *name : {"traces", "runs", "live_at_peak_largest", "live_at_peak_by_callsite", "lifetimes", "timeline"}) {
    auto rows = ReadCsv(dir + "/" + name + ".csv");
    ASSERT_FALSE(rows.empty()) << name;
    EXPECT_EQ(rows[0][0], "trace_id") << name;
  }
}

// Issue 12 item 8 (OWASP CSV injection): text cells from the input that a spreadsheet would run
// as formulas start with a quote and are quoted; a ';' or TAB inside text is quoted; numbers,
// negative ones too, are written as they are. The text report escapes control characters.
TEST(Report, CsvNeutralisesFormulasAndTextEscapesControls) {
  auto evs = RandomProgram(7, 600);
  std::string t = Unique("f") + ".zst", dbp = Unique("f") + ".db", dir = Unique("fdir");
  WriteTrace(t, evs, "=HYPERLINK(\"http://x\";\"y\")", -1, 1, nullptr, "\x1b[2J-2+3+cmd|' /C calc'!A0");
  gm_err_t err = {};
  ana_db_t *db = nullptr;
  ASSERT_EQ(ana_db_open(&db, dbp.c_str(), &err), GM_OK);
  const char *in[] = {t.c_str()};
  ana_load_stats_t st = {};
  ASSERT_EQ(ana_db_load(db, in, 1, nullptr, &st, &err), GM_OK) << err.msg;
  ASSERT_EQ(ana_report_csv(db, dir.c_str(), &err), GM_OK) << err.msg;
  char *buf = nullptr;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ASSERT_EQ(ana_report_text(db, f, &err), GM_OK) << err.msg;
  fclose(f);
  std::string text(buf, len);
  free(buf);
  ana_db_close(db);
  std::ifstream tf(dir + "/traces.csv");
  std::string traces((std::istreambuf_iterator<char>(tf)), std::istreambuf_iterator<char>());
  EXPECT_NE(traces.find(",\"'=HYPERLINK(\"\"http://x\"\";\"\"y\"\")\","), std::string::npos) << traces;
  EXPECT_EQ(traces.find(",=HYPERLINK"), std::string::npos) << traces;
  std::ifstream cf(dir + "/live_at_peak_by_callsite.csv");
  std::string cs((std::istreambuf_iterator<char>(cf)), std::istreambuf_iterator<char>());
  EXPECT_NE(cs.find(",\"'\x1b[2J-2+3+cmd|' /C calc'!A0\","), std::string::npos) << cs;  // a control in front too
  EXPECT_NE(cs.find("trace_id,callsite,allocs,live_bytes\n"), std::string::npos) << cs;    // our names as they are
  EXPECT_EQ(text.find('\x1b'), std::string::npos) << "an escape reached the terminal";
  EXPECT_NE(text.find("\\x1b[2J-2+3+cmd"), std::string::npos) << text;
  EXPECT_NE(text.find("=HYPERLINK(\"http://x\";\"y\")"), std::string::npos) << text;  // the terminal shows it as it is
}

TEST(Escape, HtmlAndScriptJson) {
  char *buf = nullptr;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ana_json_string(f, "a</script><b>\"&\xe2\x80\xa8z\xe2\x80\xa9\x01\xff");
  fputc('|', f);
  ana_html_escape(f, "<script>alert('x')</script>&\"");
  fclose(f);
  std::string s(buf, len);
  free(buf);
  EXPECT_EQ(s, "\"a\\u003c/script\\u003e\\u003cb\\u003e\\\"\\u0026\\u2028z\\u2029\\u0001\\ufffd\"|"
               "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;");
}

TEST(Recommend, ConfWarningsAndEnvLines) {
  char msgs[8][256];
  EXPECT_EQ(ana_conf_warnings("backend:cudaMallocAsync,max_split_size_mb:128", msgs, 8), 1);
  EXPECT_NE(std::string(msgs[0]).find("max_split_size_mb"), std::string::npos);
  EXPECT_EQ(ana_conf_warnings("backend:cudaMallocAsync", msgs, 8), 0);
  EXPECT_EQ(ana_conf_warnings("max_split_size_mb:128", msgs, 8), 0);
  EXPECT_EQ(ana_conf_warnings("garbage_collection_threshold:0.6", msgs, 8), 1);
  EXPECT_NE(std::string(msgs[0]).find("per_process_memory_fraction"), std::string::npos);
  EXPECT_EQ(ana_conf_warnings("garbage_collection_threshold:0.6,per_process_memory_fraction:0.8", msgs, 8), 0);
  char line[512];
  ana_policy_env_line("pytorch:expandable_segments:True", 0, line, sizeof line);
  EXPECT_STREQ(line, "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
  ana_policy_env_line("prealloc:0.5", 0, line, sizeof line);
  EXPECT_EQ(std::string(line).rfind("XLA_PYTHON_CLIENT_MEM_FRACTION=0.50", 0), 0u) << line;
  ana_policy_env_line("prealloc:30GiB", 80ull << 30, line, sizeof line);
  EXPECT_EQ(std::string(line).rfind("XLA_PYTHON_CLIENT_MEM_FRACTION=0.38", 0), 0u) << line;
  ana_policy_env_line("bfc:growth", 0, line, sizeof line);
  EXPECT_EQ(std::string(line).rfind("TF_FORCE_GPU_ALLOW_GROWTH=true", 0), 0u) << line;
  ana_policy_env_line("pytorch:a b", 0, line, sizeof line);
  EXPECT_STREQ(line, "PYTORCH_CUDA_ALLOC_CONF='a b'");
}

TEST(Recommend, NamesRunsWithoutTheirTraceAndJaxMisconfiguration) {
  std::string t = Unique("jax") + ".zst", js = Unique("orphan") + ".json", dbp = Unique("rec") + ".db";
  // A JAX job with the platform allocator: its arena settings do nothing.
  gmt_header_t h;
  gmt_header_init(&h);
  gm_err_t err = {};
  h.start_time_ns = 5;
  ASSERT_EQ(gmt_header_kv_set(&h, "XLA_PYTHON_CLIENT_ALLOCATOR", "platform", &err), GM_OK);
  ASSERT_EQ(gmt_header_kv_set(&h, "XLA_PYTHON_CLIENT_MEM_FRACTION", ".5", &err), GM_OK);
  gmt_writer_t *w = nullptr;
  ASSERT_EQ(gmt_writer_open(&w, t.c_str(), &h, nullptr, &err), GM_OK) << err.msg;
  auto evs = RandomProgram(7, 100);
  ASSERT_EQ(gmt_writer_append_n(w, evs.data(), evs.size(), &err), GM_OK);
  ASSERT_EQ(gmt_writer_close(w, &err), GM_OK);
  gmt_header_free(&h);
  WriteFile(js, ResultsJson("elsewhere.zst", 999, {"pytorch", "direct"}, {300, 200}, 100));
  ana_db_t *db = nullptr;
  ASSERT_EQ(ana_db_open(&db, dbp.c_str(), &err), GM_OK);
  const char *in[] = {t.c_str(), js.c_str()};
  ana_load_stats_t st = {};
  ASSERT_EQ(ana_db_load(db, in, 2, nullptr, &st, &err), GM_OK) << err.msg;
  std::string rec = RecommendText(db);
  EXPECT_NE(rec.find("XLA_PYTHON_CLIENT_MEM_FRACTION=.5 is ignored with XLA_PYTHON_CLIENT_ALLOCATOR=platform"),
            std::string::npos) << rec;
  EXPECT_NE(rec.find("elsewhere.zst: 2 replay runs, but the trace is not loaded"), std::string::npos) << rec;
  EXPECT_NE(rec.find("no replay runs loaded for this trace"), std::string::npos) << rec;
  ana_db_close(db);
}

TEST(Scan, PerDevicePeaks) {
  ana_scan_t *s = nullptr;
  gm_err_t err = {};
  ASSERT_EQ(ana_scan_new(&s, nullptr, nullptr, &err), GM_OK);
  std::vector<gmt_event_t> evs = {Ev(GMT_EV_ALLOC, 1, 0x1000, 100, 7), Ev(GMT_EV_ALLOC, 2, 0x1000, 50, 7),
                                  Ev(GMT_EV_FREE, 3, 0x1000, 0, 7), Ev(GMT_EV_ALLOC, 4, 0x2000, 70, 7)};
  evs[1].device = 1;  // same address, other device: a different allocation
  evs[3].device = 1;
  for (auto &e : evs) ASSERT_EQ(ana_scan_event(s, &e, &err), GM_OK);
  ASSERT_EQ(ana_scan_finish(s, &err), GM_OK);
  const ana_summary_t *m = ana_scan_summary(s);
  ASSERT_EQ(m->n_devices, 2u);
  EXPECT_EQ(m->devices[0], 0u);
  EXPECT_EQ(m->device_peak[0], 100u);
  EXPECT_EQ(m->device_peak[1], 120u);
  EXPECT_EQ(m->peak_live_bytes, 150u);  // summed over devices
  EXPECT_EQ(m->double_alloc, 0u);
  ana_scan_free(s);
}

// Times that go back on one device are counted (issue 14 "Bad input"), per device: device 1's
// own order is kept though its events interleave with device 0's later ones; durations count
// from the earliest event.
TEST(Scan, EventsOutOfOrderPerDevice) {
  ana_scan_t *s = nullptr;
  gm_err_t err = {};
  ASSERT_EQ(ana_scan_new(&s, nullptr, nullptr, &err), GM_OK);
  std::vector<gmt_event_t> evs = {Ev(GMT_EV_ALLOC, 500, 0x1000, 8, 7), Ev(GMT_EV_ALLOC, 100, 0x1000, 8, 7),
                                  Ev(GMT_EV_FREE, 600, 0x1000, 0, 7), Ev(GMT_EV_ALLOC, 200, 0x2000, 8, 7),
                                  Ev(GMT_EV_FREE, 300, 0x2000, 0, 7), Ev(GMT_EV_FREE, 650, 0x1000, 0, 7)};
  evs[1].device = 1;  // device 1: 100, then 650: in order
  evs[5].device = 1;
  for (auto &e : evs) ASSERT_EQ(ana_scan_event(s, &e, &err), GM_OK);
  ASSERT_EQ(ana_scan_finish(s, &err), GM_OK);
  const ana_summary_t *m = ana_scan_summary(s);
  EXPECT_EQ(m->ts_backward, 2u);  // device 0: 200 and 300 after 600
  EXPECT_EQ(m->ts_backward_first_seq, 3u);
  EXPECT_EQ(m->ts_backward_device, 0u);
  EXPECT_EQ(m->ts_backward_max_ns, 400u);
  EXPECT_EQ(m->min_ts_ns, 100u);
  EXPECT_EQ(m->first_ts_ns, 500u);
  char buf[320];
  EXPECT_STREQ(ana_out_of_order_text(m, buf, sizeof buf),
               "2 events are earlier than an event before them on the same device (the first: event 3 on device 0; "
               "up to 400 ns back): durations and timelines drawn from the times are approximate");
  ana_scan_free(s);
}

// A timing-dependent figure is a range: ranked by its high end, printed as a range, and the
// overlap with another setting said (issue 11).
std::string RecommendFor(const std::vector<std::pair<int64_t, int64_t>> &ranges,
                         const std::string &moved_by = "stream_events") {
  std::string t = Unique("rg") + ".zst", js = Unique("rg") + ".json", dbp = Unique("rg") + ".db";
  WriteTrace(t, RandomProgram(5, 200), "python x.py", -1, 4242);
  std::vector<std::pair<int64_t, int64_t>> scaled;  // in GiB: above the advice floor (64 MiB, 1 %)
  for (auto r : ranges) scaled.push_back(r.first < 0 ? r : std::make_pair(r.first * kG, r.second * kG));
  WriteFile(js, ResultsJson(t, 4242, {"pytorch", "pytorch:expandable_segments:True", "pytorch:roundup_power2_divisions:4"},
                            {300 * kG, 200 * kG, 250 * kG}, 120 * kG, false, scaled, moved_by));
  return RecommendOfFiles(t, js, dbp);
}

TEST(Recommend, ARangeRanksByItsHighEndAndIsNeverExact) {
  // expandable's figure (200) is the least, but its range reaches 400: roundup (250, exact) wins.
  std::string rec = RecommendFor({{-1, -1}, {200, 400}, {-1, -1}});
  EXPECT_NE(rec.find("best policy: pytorch:roundup_power2_divisions:4 (peak reserved 250.00 GiB)"), std::string::npos) << rec;
  EXPECT_NE(rec.find("ranked by the high end of each range"), std::string::npos) << rec;
  EXPECT_NE(rec.find("it is not surely the least"), std::string::npos) << rec;  // 200..400 overlaps 250
  EXPECT_EQ(rec.find("range: peak reserved"), std::string::npos) << rec;          // the best is exact
  // A narrow range still wins, and is printed as a range.
  rec = RecommendFor({{-1, -1}, {200, 240}, {-1, -1}});
  EXPECT_NE(rec.find("best policy: pytorch:expandable_segments:True (peak reserved 200.00 GiB)"), std::string::npos) << rec;
  EXPECT_NE(rec.find("range: peak reserved 200.00 GiB..240.00 GiB, not exact"), std::string::npos) << rec;
  EXPECT_EQ(rec.find("not surely the least"), std::string::npos) << rec;  // 250 > 240: no overlap
  // No ranges at all: not a word about them.
  rec = RecommendFor({});
  EXPECT_EQ(rec.find("range"), std::string::npos) << rec;
}

TEST(Recommend, TheSimulatedPoolIsShownNeverAdvised) {
  // The pool's range (200..240) would win on its high end, but a simulated pool is not advice.
  std::string rec = RecommendFor({{-1, -1}, {200, 240}, {-1, -1}}, "async_pool");
  EXPECT_NE(rec.find("best policy: pytorch:roundup_power2_divisions:4 (peak reserved 250.00 GiB)"), std::string::npos) << rec;
  EXPECT_NE(rec.find("pytorch:expandable_segments:True: 200.00 GiB..240.00 GiB, the driver's stream-ordered pool simulated"),
            std::string::npos) << rec;
  EXPECT_EQ(rec.find("ranked by the high end"), std::string::npos) << rec;
}


// No advice inside the error (issue 25): a saving inside the placement spread (the default's
// figure under a bump pointer differs by more than the saving) or below the floor (64 MiB, 1 %)
// is not advised; the same saving with no spread is.
std::string RecommendWith(const std::vector<int64_t> &reserved, const std::vector<int64_t> &bump) {
  std::string t = Unique("fl") + ".zst", js = Unique("fl") + ".json", dbp = Unique("fl") + ".db";
  WriteTrace(t, RandomProgram(7, 200), "python x.py", -1, 4343);
  WriteFile(js, ResultsJson(t, 4343, {"pytorch", "pytorch:max_split_size_mb:256"}, reserved, reserved[1] / 2, false, {},
                            "stream_events", bump));
  return RecommendOfFiles(t, js, dbp);
}

TEST(Recommend, ASavingInsideThePlacementSpreadIsNotAdvised) {
  const int64_t M = 1ll << 20;
  // issue 25's GPT-2 job: 9256828928 B by default, 102 MiB less advised; under a bump pointer
  // the advised setting reserves 144 MiB more than the default (what the real run did).
  std::string rec = RecommendWith({9256828928, 9256828928 - 102 * M}, {0, 9256828928 + 144 * M});
  EXPECT_NE(rec.find("keep the default (pytorch): no setting is reliably smaller"), std::string::npos) << rec;
  EXPECT_NE(rec.find("paste: nothing (the default)"), std::string::npos) << rec;
  EXPECT_EQ(rec.find("max_split_size_mb:256'"), std::string::npos) << rec;
  EXPECT_EQ(rec.find("best policy"), std::string::npos) << rec;
  // The same saving with no spread: 102 MiB is above the floor (64 MiB; 1 % = 88 MiB): advised.
  rec = RecommendWith({9256828928, 9256828928 - 102 * M}, {});
  EXPECT_NE(rec.find("best policy: pytorch:max_split_size_mb:256"), std::string::npos) << rec;
  // Below the floor without any spread: 60 MiB of 9 GiB is not advised.
  rec = RecommendWith({9256828928, 9256828928 - 60 * M}, {});
  EXPECT_NE(rec.find("keep the default (pytorch)"), std::string::npos) << rec;
  EXPECT_EQ(ana_advice_floor(9256828928), 92568289);
  EXPECT_EQ(ana_advice_floor(1ll << 30), 64 * M);
}

// ---- identity, salvage, concurrency (issue 12) -------------------------------------------------

namespace {

std::vector<std::string> g_warnings;
void Collect(void *, const char *msg) { g_warnings.push_back(msg); }

}  // namespace

// The tuner's path (gpureplay --tune's results: its "chosen" point is the advice): the same
// floor on the worst case the tuner counted (tune.worst_bytes / tune.best_bytes: timing,
// placement, a predicted trace's sizes), or on the bump pointer's figure it writes beside the
// chosen point. Issue 25's GPT-2 figures: 102 MiB saved, 144 MiB more than the default under
// a bump pointer.
std::string RecommendTuned(const std::vector<int64_t> &bump, const std::string &chosen_worst) {
  const int64_t M = 1ll << 20, d = 9256828928, z = d - 102 * M;
  std::string t = Unique("tn") + ".zst", js = Unique("tn") + ".json", dbp = Unique("tn") + ".db";
  WriteTrace(t, RandomProgram(7, 200), "python x.py", -1, 4545);
  const std::string note = ",\"needs_bytes\":0,\"driver_time_p50_s\":0.001,\"driver_time_p99_s\":0.002,"
                           "\"budget_s\":0.01,\"smallest_gpu_gib\":16";
  WriteFile(js, ResultsJson(t, 4545, {"pytorch", "pytorch:max_split_size_mb:256"}, {d, z}, z / 2, false, {},
                            "stream_events", bump,
                            {"{\"role\":\"default\",\"from_grid\":true" + note + "}",
                             "{\"role\":\"chosen\",\"from_grid\":false" + note + chosen_worst + "}"}));
  return RecommendOfFiles(t, js, dbp);
}

TEST(Recommend, ASavingInsideThePlacementSpreadIsNotAdvisedOnTheTunerPath) {
  const int64_t M = 1ll << 20, d = 9256828928;
  // No spread: the tuner's choice is the advice (102 MiB is above the floor, 88 MiB).
  std::string rec = RecommendTuned({}, "");
  EXPECT_NE(rec.find("best policy: pytorch:max_split_size_mb:256"), std::string::npos) << rec;
  EXPECT_NE(rec.find("tuned (gpureplay --tune)"), std::string::npos) << rec;
  // The chosen point's bump-pointer figure (gpureplay --tune writes it beside the point):
  // 144 MiB over the default. Kept.
  rec = RecommendTuned({0, d + 144 * M}, "");
  EXPECT_NE(rec.find("keep the default (pytorch): no setting is reliably smaller"), std::string::npos) << rec;
  EXPECT_NE(rec.find("paste: nothing (the default)"), std::string::npos) << rec;
  EXPECT_EQ(rec.find("best policy"), std::string::npos) << rec;
  // The worst case the tuner counted (here a predicted trace's sizes on top): kept.
  rec = RecommendTuned({}, ",\"worst_bytes\":" + std::to_string(d - 20 * M) + ",\"best_bytes\":" +
                               std::to_string(d - 110 * M));
  EXPECT_NE(rec.find("keep the default (pytorch)"), std::string::npos) << rec;
  // A worst case that runs out of memory is never reliably smaller.
  rec = RecommendTuned({}, ",\"worst_oom\":true");
  EXPECT_NE(rec.find("keep the default (pytorch)"), std::string::npos) << rec;
  EXPECT_NE(rec.find("out of memory"), std::string::npos) << rec;
  // A worst case the tuner counted that is still past the floor: advised.
  rec = RecommendTuned({}, ",\"worst_bytes\":" + std::to_string(d - 100 * M) + ",\"best_bytes\":" +
                               std::to_string(d - 104 * M));
  EXPECT_NE(rec.find("best policy: pytorch:max_split_size_mb:256"), std::string::npos) << rec;
  EXPECT_NE(rec.find("its worst and best case: 8.52 GiB..8.52 GiB"), std::string::npos) << rec;
}

TEST(Identity, SamePathWithNewContentReplacesTheTraceAndItsRuns) {
  std::string t = Unique("same") + ".zst", copy = Unique("copy") + ".zst", js = Unique("same") + ".json";
  std::string dbp = Unique("ident") + ".db", fresh = Unique("fresh") + ".db";
  WriteTrace(t, RandomProgram(7, 3000), "python a.py", -1, 1111);
  WriteFile(js, ResultsJson(t, 1111, {"pytorch", "direct"}, {300, 150}, 120));
  gm_err_t err = {};
  ana_db_t *db = nullptr;
  ASSERT_EQ(ana_db_open(&db, dbp.c_str(), &err), GM_OK);
  ana_load_opts_t o = {};
  o.warn = Collect;
  g_warnings.clear();
  const char *first[] = {t.c_str(), js.c_str()};
  ana_load_stats_t st = {};
  ASSERT_EQ(ana_db_load(db, first, 2, &o, &st, &err), GM_OK) << err.msg;
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) FROM v_runs WHERE trace_id IS NOT NULL"), 2);
  // The same bytes under another name are the same trace: skipped.
  WriteFile(copy, [&] { std::ifstream f(t, std::ios::binary); std::stringstream s; s << f.rdbuf(); return s.str(); }());
  const char *c[] = {copy.c_str()};
  st = {};
  ASSERT_EQ(ana_db_load(db, c, 1, &o, &st, &err), GM_OK);
  EXPECT_EQ(st.traces_skipped, 1u);
  EXPECT_TRUE(g_warnings.empty());
  // Recorded again under the same name: the old trace and the runs that replayed it go.
  WriteTrace(t, RandomProgram(8, 2000), "python a.py", -1, 2222);
  const char *again[] = {t.c_str()};
  st = {};
  ASSERT_EQ(ana_db_load(db, again, 1, &o, &st, &err), GM_OK) << err.msg;
  EXPECT_EQ(st.traces_loaded, 1u);
  ASSERT_EQ(g_warnings.size(), 1u);
  EXPECT_NE(g_warnings[0].find("' has changed since it was loaded on "), std::string::npos) << g_warnings[0];
  EXPECT_NE(g_warnings[0].find("(trace 1, 3000 events): replacing that trace and its replay runs"), std::string::npos)
      << g_warnings[0];
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) FROM traces"), 1);
  EXPECT_EQ(Scalar(db, "SELECT start_time_ns FROM traces"), 2222);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) FROM runs"), 0);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) FROM results"), 0);
  // Nothing of the old trace is left: the same as a fresh database with the new trace alone.
  std::string replaced = Fingerprint(db);
  ana_db_close(db);
  ASSERT_EQ(ana_db_open(&db, fresh.c_str(), &err), GM_OK);
  ASSERT_EQ(ana_db_load(db, again, 1, nullptr, &st, &err), GM_OK);
  EXPECT_EQ(Fingerprint(db), replaced);
  ana_db_close(db);
}

TEST(Salvage, DamagedTraceLoadsWhatIsLeftMarkedPartialAndStrictRefuses) {
  std::string t = Unique("dmg") + ".zst", dbp = Unique("dmg") + ".db";
  auto evs = RandomProgram(9, 5000);
  WriteTrace(t, evs, "python d.py", -1, 3333);
  std::string bytes = [&] { std::ifstream f(t, std::ios::binary); std::stringstream s; s << f.rdbuf(); return s.str(); }();
  gmt_test::TraceMap m;
  ASSERT_TRUE(gmt_test::MapTrace(bytes, &m));
  ASSERT_EQ(m.chunks.size(), 5u);
  WriteFile(t, gmt_test::Flip(bytes, m.chunks[2].off + m.chunks[2].len / 2));
  gm_err_t err = {};
  ana_db_t *db = nullptr;
  ASSERT_EQ(ana_db_open(&db, dbp.c_str(), &err), GM_OK);
  std::string before = Fingerprint(db);
  const char *in[] = {t.c_str()};
  ana_load_stats_t st = {};
  EXPECT_EQ(ana_db_load(db, in, 1, nullptr, &st, &err), GM_ERR_CORRUPT);  // strict by default
  EXPECT_NE(std::string(err.msg).find("chunk 2 at offset"), std::string::npos) << err.msg;
  EXPECT_EQ(Fingerprint(db), before);
  ana_load_opts_t o = {};
  o.read_flags = GMT_READ_SALVAGE;
  o.warn = Collect;
  g_warnings.clear();
  ASSERT_EQ(ana_db_load(db, in, 1, &o, &st, &err), GM_OK) << err.msg;
  EXPECT_EQ(st.traces_partial, 1u);
  EXPECT_EQ(Scalar(db, "SELECT events FROM traces"), 4000);
  EXPECT_EQ(Scalar(db, "SELECT partial FROM traces"), 1);
  EXPECT_EQ(Scalar(db, "SELECT damaged_chunks FROM traces"), 1);
  EXPECT_EQ(Scalar(db, "SELECT lost_events FROM traces"), 1000);
  EXPECT_EQ(Scalar(db, "SELECT index_damaged FROM traces"), 0);
  ASSERT_EQ(g_warnings.size(), 1u);
  EXPECT_NE(g_warnings[0].find("is damaged (chunk 2 at offset " + std::to_string(m.chunks[2].off) +
                               ": checksum mismatch): 1 damaged chunk skipped, 1000 events lost; loaded what could "
                               "be read, marked partial"),
            std::string::npos)
      << g_warnings[0];
  EXPECT_NE(RecommendText(db).find("warning: PARTIAL: the trace is damaged (1 damaged chunk skipped, 1000 events lost)"),
            std::string::npos)
      << RecommendText(db);
  ana_db_close(db);
}

TEST(Schema, OlderDatabaseGainsTheNewColumnsAndWal) {
  std::string dbp = Unique("old") + ".db";
  sqlite3 *h = nullptr;
  ASSERT_EQ(sqlite3_open(dbp.c_str(), &h), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(h, ana_schema_sql(), nullptr, nullptr, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(h, "INSERT INTO schema_version VALUES(1, 'gpuanalyze 0.1.0')", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(h);
  gm_err_t err = {};
  ana_db_t *db = nullptr;
  ASSERT_EQ(ana_db_open(&db, dbp.c_str(), &err), GM_OK) << err.msg;
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) FROM pragma_table_info('traces') WHERE name IN"
                       " ('partial','damaged_chunks','lost_events','uncounted_chunks','damaged_bytes',"
                       "'index_damaged','real_path','file_size')"),
            8);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) FROM pragma_table_info('runs') WHERE name='trace_partial'"), 1);
  sqlite3_stmt *st = nullptr;
  sqlite3_prepare_v2(static_cast<sqlite3 *>(ana_db_sqlite(db)), "PRAGMA journal_mode", -1, &st, nullptr);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_STREQ(reinterpret_cast<const char *>(sqlite3_column_text(st, 0)), "wal");
  sqlite3_finalize(st);
  ana_db_close(db);
}

TEST(Concurrency, ReaderReadsWhileAWriterHoldsItAndASecondWriterIsToldWhy) {
  std::string t = Unique("c1") + ".zst", t2 = Unique("c2") + ".zst", dbp = Unique("conc") + ".db";
  WriteTrace(t, RandomProgram(10, 1000), "python c.py", -1, 4444);
  WriteTrace(t2, RandomProgram(11, 1000), "python c.py", -1, 5555);
  gm_err_t err = {};
  ana_db_t *w = nullptr, *r = nullptr;
  ASSERT_EQ(ana_db_open(&w, dbp.c_str(), &err), GM_OK);
  const char *in[] = {t.c_str()};
  ana_load_stats_t st = {};
  ASSERT_EQ(ana_db_load(w, in, 1, nullptr, &st, &err), GM_OK);
  // The writer holds a write transaction with a change not committed yet.
  sqlite3 *wh = static_cast<sqlite3 *>(ana_db_sqlite(w));
  ASSERT_EQ(sqlite3_exec(wh, "BEGIN IMMEDIATE; DELETE FROM events;", nullptr, nullptr, nullptr), SQLITE_OK);
  ASSERT_EQ(ana_db_open_wait(&r, dbp.c_str(), 300, &err), GM_OK) << err.msg;
  EXPECT_EQ(Scalar(r, "SELECT COUNT(*) FROM events"), 1000);  // as it was before the writer began
  const char *in2[] = {t2.c_str()};
  EXPECT_EQ(ana_db_load(r, in2, 1, nullptr, &st, &err), GM_ERR_IO);
  EXPECT_NE(std::string(err.msg).find("' is busy: another process (a gpuanalyze load?) is writing to it; waited 0.3 s"),
            std::string::npos)
      << err.msg;
  ASSERT_EQ(sqlite3_exec(wh, "ROLLBACK", nullptr, nullptr, nullptr), SQLITE_OK);
  ASSERT_EQ(ana_db_load(r, in2, 1, nullptr, &st, &err), GM_OK) << err.msg;  // free again
  EXPECT_EQ(Scalar(r, "SELECT COUNT(*) FROM traces"), 2);
  ana_db_close(r);
  ana_db_close(w);
}

namespace {
std::string Slurp(const std::string &path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
size_t Count(const std::string &s, const std::string &what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) n++;
  return n;
}
}  // namespace

TEST(Html, FirstScreenIsTheRecommendersChoiceAndTheTimelineKeepsThePeak) {
  std::string t = Unique("h") + ".zst", js = Unique("h") + ".json", dbp = Unique("h") + ".db",
              html = Unique("h") + ".html";
  WriteTrace(t, RandomProgram(11, 20000), "python x.py", -1, 778);
  WriteFile(js, ResultsJson(t, 778, {"pytorch", "pytorch:expandable_segments:True", "direct", "bfc:growth"},
                            {300 * kG, 200 * kG, 150 * kG, 260 * kG}, 120 * kG));
  gm_err_t err = {};
  ana_db_t *db = nullptr;
  ASSERT_EQ(ana_db_open(&db, dbp.c_str(), &err), GM_OK);
  const char *in[] = {t.c_str(), js.c_str()};
  ana_load_stats_t st = {};
  ASSERT_EQ(ana_db_load(db, in, 2, nullptr, &st, &err), GM_OK) << err.msg;
  // The advice as data is the text's choice.
  ana_advice_t a;
  char *buf = nullptr;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ASSERT_EQ(ana_advise(db, 1, f, &a, &err), GM_OK);
  fclose(f);
  std::string rec(buf, len);
  free(buf);
  EXPECT_EQ(a.runs, 4);
  ASSERT_TRUE(a.advised);
  EXPECT_STREQ(a.best_policy, "pytorch:expandable_segments:True");
  EXPECT_NE(rec.find(std::string("best policy: ") + a.best_policy), std::string::npos) << rec;
  EXPECT_NE(rec.find(std::string("paste: ") + a.paste), std::string::npos) << rec;
  EXPECT_EQ(a.best_reserved, 200 * kG);
  EXPECT_EQ(a.default_reserved, 300 * kG);
  EXPECT_STREQ(a.default_policy, "pytorch");
  EXPECT_EQ(Scalar(db, "SELECT run_id FROM v_runs WHERE policy='pytorch:expandable_segments:True'"), a.best_run_id);
  ASSERT_EQ(ana_report_html(db, html.c_str(), &err), GM_OK) << err.msg;
  std::string h = Slurp(html);
  // One bar per run, the recommended one marked once, the default as run.
  EXPECT_EQ(Count(h, "<g class=\"bar "), 4u);
  EXPECT_EQ(Count(h, "<g class=\"bar best\">"), 1u);
  EXPECT_EQ(Count(h, "<g class=\"bar rec\">"), 1u);
  EXPECT_NE(h.find("<div class=\"cv\">100.00 GiB</div>"), std::string::npos) << h.substr(0, 4000);  // saving 300 - 200
  EXPECT_NE(h.find("33.3% of what it reserves now"), std::string::npos);
  EXPECT_EQ(h.find("<pre"), std::string::npos);
  // The stacked timeline: its top curve (every callsite together) peaks at the trace's peak
  // live bytes, whatever the downsampling did.
  size_t p = h.find("class=\"chart-data\"");
  ASSERT_NE(p, std::string::npos);
  size_t rows = h.find("\"rows\":[", p);
  ASSERT_NE(rows, std::string::npos);
  double max_top = 0;
  size_t nrows = 0;
  for (size_t r = h.find('[', rows + 8); r != std::string::npos && r < h.find("</script>", p);
       r = h.find('[', r + 1)) {
    double x = 0, top = 0;
    if (sscanf(h.c_str() + r, "[%lf,%lf", &x, &top) == 2) {
      max_top = std::max(max_top, top);
      nrows++;
    }
  }
  EXPECT_GT(nrows, 100u);
  EXPECT_LE(nrows, 801u);
  EXPECT_EQ(static_cast<int64_t>(max_top), Scalar(db, "SELECT peak_live_bytes FROM traces WHERE trace_id=1"));
  ana_db_close(db);
}

TEST(Html, TracesWithNothingToReportSaySo) {
  std::string t = Unique("e") + ".zst", dbp = Unique("e") + ".db", html = Unique("e") + ".html";
  std::vector<gmt_event_t> frees;
  for (int i = 0; i < 5; i++) frees.push_back(Ev(GMT_EV_FREE, 10 + i, 0x1000 + 64 * i, 0, 7));
  WriteTrace(t, frees);
  gm_err_t err = {};
  ana_db_t *db = nullptr;
  ASSERT_EQ(ana_db_open(&db, dbp.c_str(), &err), GM_OK);
  ASSERT_EQ(ana_report_html(db, html.c_str(), &err), GM_OK) << err.msg;
  EXPECT_NE(Slurp(html).find("No traces in the database"), std::string::npos);
  const char *in[] = {t.c_str()};
  ana_load_stats_t st = {};
  ASSERT_EQ(ana_db_load(db, in, 1, nullptr, &st, &err), GM_OK) << err.msg;
  ASSERT_EQ(ana_report_html(db, html.c_str(), &err), GM_OK) << err.msg;
  std::string h = Slurp(html);
  EXPECT_NE(h.find("This trace holds only frees (5 of them)"), std::string::npos);
  EXPECT_NE(h.find("No replay runs are loaded"), std::string::npos);
  ana_db_close(db);
}

namespace {
// A random program whose allocations come from 12 callsites, written as a trace.
std::vector<gmt_event_t> WriteCallsiteTrace(const std::string &path, unsigned seed, size_t n, uint64_t start) {
  auto evs = RandomProgram(seed, n);
  gmt_header_t h;
  gmt_header_init(&h);
  gm_err_t err = {};
  h.pid = 4242;
  h.start_time_ns = start;
  h.capture_mode = GMT_CAPTURE_SYNTHETIC;
  EXPECT_EQ(gmt_header_set(&h.command_line, "python many.py", &err), GM_OK);
  gmt_writer_t *w = nullptr;
  gmt_writer_opts_t o = {};
  o.chunk_events = 1000;
  EXPECT_EQ(gmt_writer_open(&w, path.c_str(), &h, &o, &err), GM_OK) << err.msg;
  uint32_t ids[12];
  for (int i = 0; i < 12; i++) {
    std::string cs = "model.py:" + std::to_string(10 + i) + " layer" + std::to_string(i) + " < torch/nn/x.py:1 f";
    EXPECT_EQ(gmt_writer_intern(w, cs.c_str(), &ids[i], &err), GM_OK);
  }
  std::mt19937_64 rng(seed * 7 + 1);
  for (auto &e : evs)
    if (e.kind == GMT_EV_ALLOC && rng() % 13) e.callsite = ids[rng() % 12];  // some without a callsite
  EXPECT_EQ(gmt_writer_append_n(w, evs.data(), evs.size(), &err), GM_OK) << err.msg;
  EXPECT_EQ(gmt_writer_close(w, &err), GM_OK) << err.msg;
  gmt_header_free(&h);
  return evs;
}
}  // namespace

// Issue 14: the report reads the loader's summaries (ana_load_peak.c), never events. With the
// events loaded too, every summary equals what the views compute from the events.
TEST(Summaries, EqualWhatTheViewsComputeFromEvents) {
  std::string t = Unique("s") + ".zst", dbp = Unique("s") + ".db";
  WriteCallsiteTrace(t, 21, 30000, 9001);
  gm_err_t err = {};
  ana_db_t *db = nullptr;
  ASSERT_EQ(ana_db_open(&db, dbp.c_str(), &err), GM_OK);
  const char *in[] = {t.c_str()};
  ana_load_stats_t st = {};
  ASSERT_EQ(ana_db_load(db, in, 1, nullptr, &st, &err), GM_OK) << err.msg;
  EXPECT_EQ(Scalar(db, "SELECT report_summaries FROM traces"), 1);
  EXPECT_EQ(Scalar(db, "SELECT peak_live_allocs FROM traces"), Scalar(db, "SELECT COUNT(*) FROM v_live_at_peak"));
  EXPECT_EQ(Scalar(db, "SELECT peak_live_callsites FROM traces"),
            Scalar(db, "SELECT COUNT(DISTINCT COALESCE(callsite, -1)) FROM v_live_at_peak"));
  const char *streams = "SELECT trace_id, stream, COUNT(*), SUM(size) FROM v_live_at_peak GROUP BY stream";
  EXPECT_EQ(Scalar(db, std::string("SELECT COUNT(*) FROM (SELECT * FROM trace_peak_streams EXCEPT ") + streams + ")"), 0);
  EXPECT_EQ(Scalar(db, std::string("SELECT COUNT(*) FROM (") + streams + " EXCEPT SELECT * FROM trace_peak_streams)"), 0);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) FROM trace_peak_streams"), 2);
  const char *largest = "SELECT * FROM (SELECT trace_id, alloc_seq, size, device, stream, callsite, t_alloc_ns"
                        " FROM v_live_at_peak ORDER BY size DESC, alloc_seq LIMIT 25)";
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) FROM trace_peak_allocs"), 25);
  EXPECT_EQ(Scalar(db, std::string("SELECT COUNT(*) FROM (SELECT * FROM trace_peak_allocs EXCEPT ") + largest + ")"), 0);
  const char *by_cs = "SELECT p.trace_id, COALESCE(s.text, '(none)'), COUNT(*), SUM(p.size) FROM v_live_at_peak p"
                      " LEFT JOIN strings s ON s.trace_id = p.trace_id AND s.string_id = p.callsite GROUP BY 2";
  EXPECT_EQ(Scalar(db, std::string("SELECT COUNT(*) FROM (") + by_cs + " EXCEPT SELECT * FROM trace_peak_callsites)"), 0);
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) FROM trace_peak_callsites"), 13);  // 12 and none
  // The stacked timeline: 8 callsite classes and the rest; each bucket's classes add up to its
  // total; the highest total is the peak, and at the peak's bucket the classes are the
  // callsites' bytes live at the peak.
  EXPECT_EQ(Scalar(db, "SELECT COUNT(*) FROM trace_stack_classes"), 9);
  EXPECT_EQ(Scalar(db, "SELECT MAX(total_bytes) FROM trace_stack_timeline"), Scalar(db, "SELECT peak_live_bytes FROM traces"));
  EXPECT_LE(Scalar(db, "SELECT COUNT(*) FROM trace_stack_timeline"), 801);
  EXPECT_GT(Scalar(db, "SELECT COUNT(*) FROM trace_stack_timeline"), 700);
  sqlite3 *h = static_cast<sqlite3 *>(ana_db_sqlite(db));
  sqlite3_stmt *q = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(h, "SELECT total_bytes, class_bytes FROM trace_stack_timeline ORDER BY bucket", -1, &q,
                               nullptr), SQLITE_OK);
  int64_t peak = Scalar(db, "SELECT peak_live_bytes FROM traces");
  std::vector<int64_t> at_peak;
  while (sqlite3_step(q) == SQLITE_ROW) {
    int64_t tot = sqlite3_column_int64(q, 0), sum = 0;
    std::vector<int64_t> v;
    std::istringstream ss(reinterpret_cast<const char *>(sqlite3_column_text(q, 1)));
    std::string x;
    while (std::getline(ss, x, ',')) v.push_back(std::stoll(x)), sum += v.back();
    EXPECT_EQ(v.size(), 9u);
    EXPECT_EQ(sum, tot);
    if (tot == peak && at_peak.empty()) at_peak = v;
  }
  sqlite3_finalize(q);
  ASSERT_EQ(at_peak.size(), 9u);
  ASSERT_EQ(sqlite3_prepare_v2(h, "SELECT c.class, c.peak_bytes, (SELECT bytes FROM trace_peak_callsites p"
                               " WHERE p.callsite = COALESCE(c.callsite, '(none)')) FROM trace_stack_classes c"
                               " WHERE c.kind IN ('callsite', 'none') ORDER BY class", -1, &q, nullptr), SQLITE_OK);
  int64_t named = 0;
  while (sqlite3_step(q) == SQLITE_ROW) {
    int c = sqlite3_column_int(q, 0);
    EXPECT_EQ(at_peak[(size_t)c], sqlite3_column_int64(q, 1)) << "class " << c;
    EXPECT_EQ(sqlite3_column_int64(q, 1), sqlite3_column_int64(q, 2)) << "class " << c;
    named += at_peak[(size_t)c];
  }
  sqlite3_finalize(q);
  EXPECT_EQ(at_peak[8], peak - named);
  ana_db_close(db);
}

// The report is the same whether the events were loaded or not (it never reads them), and a
// trace loaded by an older gpuanalyze is refused with what to do, then upgraded by a load that
// keeps its replays.
TEST(Summaries, ReportNeedsNoEventsAndOlderTracesAreUpgraded) {
  std::string t = Unique("u") + ".zst", js = Unique("u") + ".json", full = Unique("full") + ".db",
              small = Unique("small") + ".db", h1 = Unique("u1") + ".html", h2 = Unique("u2") + ".html";
  WriteCallsiteTrace(t, 22, 20000, 9002);
  WriteFile(js, ResultsJson(t, 9002, {"pytorch", "pytorch:expandable_segments:True"}, {300, 200}, 120));
  gm_err_t err = {};
  const char *in[] = {t.c_str(), js.c_str()};
  ana_db_t *a = nullptr, *b = nullptr;
  ana_load_stats_t st = {};
  ASSERT_EQ(ana_db_open(&a, full.c_str(), &err), GM_OK);
  ASSERT_EQ(ana_db_load(a, in, 2, nullptr, &st, &err), GM_OK) << err.msg;
  ana_load_opts_t o = {};
  o.summary_only = 1;
  ASSERT_EQ(ana_db_open(&b, small.c_str(), &err), GM_OK);
  ASSERT_EQ(ana_db_load(b, in, 2, &o, &st, &err), GM_OK) << err.msg;
  EXPECT_EQ(Scalar(b, "SELECT COUNT(*) FROM events"), 0);
  ASSERT_EQ(ana_report_html(a, h1.c_str(), &err), GM_OK) << err.msg;
  ASSERT_EQ(ana_report_html(b, h2.c_str(), &err), GM_OK) << err.msg;
  std::string x = Slurp(h1), y = Slurp(h2);
  EXPECT_GT(x.size(), 10000u);
  EXPECT_TRUE(x == y) << "the report differs with and without events";
  // the callsite table's rows: the top 10 (a stack to click for each with a callsite) and the rest
  int64_t ncs = Scalar(b, "SELECT peak_live_callsites FROM traces");
  int64_t named = Scalar(b, "SELECT COUNT(*) FROM (SELECT callsite FROM trace_peak_callsites ORDER BY bytes DESC,"
                            " callsite LIMIT 10) WHERE callsite <> '(none)'");
  EXPECT_EQ(ncs, 13);
  EXPECT_EQ((int64_t)Count(x, "<details><summary>"), named);
  EXPECT_NE(x.find("the other " + std::to_string(ncs - 10) + " callsites"), std::string::npos);
  // An older gpuanalyze's trace: no summaries.
  ASSERT_EQ(sqlite3_exec(static_cast<sqlite3 *>(ana_db_sqlite(b)), "UPDATE traces SET report_summaries = 0", nullptr,
                         nullptr, nullptr), SQLITE_OK);
  EXPECT_EQ(ana_report_html(b, h2.c_str(), &err), GM_ERR_VERSION);
  EXPECT_NE(std::string(err.msg).find("was loaded by an older gpuanalyze"), std::string::npos) << err.msg;
  EXPECT_NE(std::string(err.msg).find("gpuanalyze load --db"), std::string::npos) << err.msg;
  gm_err_t e2 = {};
  ana_load_stats_t st2 = {};
  ASSERT_EQ(ana_db_load(b, in, 1, &o, &st2, &e2), GM_OK) << e2.msg;
  EXPECT_EQ(st2.traces_loaded, 1u);
  EXPECT_EQ(Scalar(b, "SELECT COUNT(*) FROM traces"), 1);
  EXPECT_EQ(Scalar(b, "SELECT COUNT(*) FROM v_runs WHERE trace_id IS NOT NULL"), 2);  // the replays stayed
  ASSERT_EQ(ana_report_html(b, h2.c_str(), &e2), GM_OK) << e2.msg;
  EXPECT_NE(Slurp(h2).find("expandable_segments"), std::string::npos);
  ana_db_close(a);
  ana_db_close(b);
}

// A job of many ranks: one full section (the rank with the largest peak live), the others rows
// of the ranks table, and a note saying so (256 ranks made 11-75 MB of HTML, one section each).
TEST(Html, ManyRanksGetOneSection) {
  std::string dbp = Unique("rk") + ".db", html = Unique("rk") + ".html";
  gm_err_t err = {};
  ana_db_t *db = nullptr;
  ASSERT_EQ(ana_db_open(&db, dbp.c_str(), &err), GM_OK);
  int64_t best = 0, best_rank = -1;
  for (int r = 0; r < 10; r++) {
    std::string t = Unique("rk" + std::to_string(r)) + ".zst";
    auto evs = RandomProgram(40 + r, 2000 + 300 * r);
    WriteTrace(t, evs, "torchrun job", r, 1000 + r);
    const char *in[] = {t.c_str()};
    ana_load_stats_t st = {};
    ASSERT_EQ(ana_db_load(db, in, 1, nullptr, &st, &err), GM_OK) << err.msg;
    int64_t peak = (int64_t)Compute(evs).peak;
    if (peak > best) best = peak, best_rank = r;
  }
  ASSERT_EQ(ana_report_html(db, html.c_str(), &err), GM_OK) << err.msg;
  std::string h = Slurp(html);
  EXPECT_EQ(Count(h, "<section id=\"trace-"), 1u);
  EXPECT_EQ(Count(h, "class=\"chart\""), 1u);
  EXPECT_NE(h.find("10 ranks of one job (<code>torchrun job</code>): the section below is of rank " +
                   std::to_string(best_rank) + ", the one with the largest peak live"), std::string::npos);
  EXPECT_EQ(Scalar(db, "SELECT rank FROM traces WHERE trace_id = " +
                       h.substr(h.find("<section id=\"trace-") + 19, h.find('"', h.find("<section id=\"trace-") + 19) -
                                                                        (h.find("<section id=\"trace-") + 19))),
            best_rank);
  EXPECT_EQ(Count(h, "<tr>") >= 10, true);  // every rank a row of the ranks table
  ana_db_close(db);
}
