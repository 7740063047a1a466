// gpureplay_tune_period_test.cc: the steady state of a training trace (gpureplay_tune_period.c)
// and the search on it (gpureplay_tune_reduce.c) on traces whose structure is known.
//
// The training loop below: weights allocated once (the warm-up), then steps of two kinds, A
// (common: activations of 3 sizes) and B (every 7th: a longer sequence, larger activations),
// each taking the live set back to the weights. The scan must find the boundary after the
// warm-up, the step length of A as the period, the two kinds, and a reduced trace in which
// every free names a live allocation and whose live set ends where the whole trace's does.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "formats/gmt_testutil.h"
#include "replay/tool/tune/gpureplay_tune.h"

namespace {

constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t kDevice = 8192 * MiB;

gmt_event_t ev(uint8_t kind, uint64_t ts, uint64_t addr, uint64_t size) {
  return gmt_test::Ev(kind, ts, addr, size, 7);
}

// steps: how many; every `rare`-th is kind B (0: never).
std::vector<gmt_event_t> training(int steps, int rare) {
  std::vector<gmt_event_t> v;
  uint64_t ts = 1000;
  for (int w = 0; w < 4; w++) v.push_back(ev(GMT_EV_ALLOC, ts += 10, 0x1000000000ull + w * 0x10000000ull, 64 * MiB));
  for (int s = 0; s < steps; s++) {
    bool b = rare && s % rare == rare - 1;
    uint64_t k = b ? 3 : 1;
    v.push_back(ev(GMT_EV_MARKER, ts += 1000, 0, (uint64_t)s)); // a step marker: its value is the step
    uint64_t a1 = 0x2000000000ull, a2 = 0x2100000000ull, a3 = 0x2200000000ull;
    v.push_back(ev(GMT_EV_ALLOC, ts += 10, a1, k * 100 * MiB));
    v.push_back(ev(GMT_EV_ALLOC, ts += 10, a2, k * 40 * MiB));
    v.push_back(ev(GMT_EV_FREE, ts += 10, a1, k * 100 * MiB));
    v.push_back(ev(GMT_EV_ALLOC, ts += 10, a3, k * 150 * MiB));
    v.push_back(ev(GMT_EV_FREE, ts += 10, a2, k * 40 * MiB));
    v.push_back(ev(GMT_EV_FREE, ts += 10, a3, k * 150 * MiB));
  }
  return v;
}

// Every free names a live allocation; returns the live set at the end.
std::set<uint64_t> check_consistent(const gmt_event_t *evs, size_t n) {
  std::map<uint64_t, uint64_t> live;
  uint64_t last_ts = 0;
  for (size_t i = 0; i < n; i++) {
    const gmt_event_t &e = evs[i];
    EXPECT_GE(e.ts_ns, last_ts) << "event " << i << ": time goes back";
    last_ts = e.ts_ns;
    if (e.kind == GMT_EV_ALLOC) {
      EXPECT_EQ(live.count(e.addr), 0u) << "event " << i << ": allocated twice";
      live[e.addr] = e.size;
    } else if (e.kind == GMT_EV_FREE) {
      auto it = live.find(e.addr);
      EXPECT_TRUE(it != live.end() && it->second == e.size) << "event " << i << ": frees what is not live";
      if (it != live.end()) live.erase(it);
    }
  }
  std::set<uint64_t> out;
  for (auto &kv : live) out.insert(kv.first);
  return out;
}

TEST(TunePeriod, FindsTheStepTheKindsAndAConsistentReducedTrace) {
  std::vector<gmt_event_t> v = training(700, 7);
  gr_period_t p;
  gm_err_t err;
  ASSERT_EQ(gr_period_scan_events(v.data(), v.size(), &p, &err), GM_OK) << err.msg;
  ASSERT_TRUE(p.found) << p.why;
  EXPECT_EQ(p.events, v.size());
  EXPECT_EQ(p.warmup, 4u + 7u);    // the weights and step 0, up to its last free back to them
  EXPECT_EQ(p.phases, 2);          // A and B
  EXPECT_EQ(p.period, 7u);         // marker + 6 events of a step
  EXPECT_LT(p.n_evs * 10, v.size()); // a tenth of the trace at most
  EXPECT_GT(p.n_evs, 4u + 3 * 7u);
  // A and B both in it, each at least twice
  int b = 0;
  for (size_t i = 0; i < p.n_evs; i++) b += p.evs[i].kind == GMT_EV_ALLOC && p.evs[i].size == 300 * MiB;
  EXPECT_GE(b, 2);
  std::set<uint64_t> whole = check_consistent(v.data(), v.size());
  std::set<uint64_t> reduced = check_consistent(p.evs, p.n_evs);
  EXPECT_EQ(whole, reduced);
  gr_period_free(&p);
}

TEST(TunePeriod, NoPeriodInATraceThatNeverReturns) {
  std::vector<gmt_event_t> v;
  uint64_t ts = 0;
  for (uint64_t i = 0; i < 5000; i++) { // grows: each step keeps one more block
    v.push_back(ev(GMT_EV_ALLOC, ts += 10, 0x1000000 + i * 0x100000, MiB));
    v.push_back(ev(GMT_EV_ALLOC, ts += 10, 0x9000000000ull, 2 * MiB));
    v.push_back(ev(GMT_EV_FREE, ts += 10, 0x9000000000ull, 2 * MiB));
  }
  gr_period_t p;
  gm_err_t err;
  ASSERT_EQ(gr_period_scan_events(v.data(), v.size(), &p, &err), GM_OK) << err.msg;
  EXPECT_FALSE(p.found);
  EXPECT_NE(std::string(p.why), "");
  EXPECT_EQ(p.n_evs, 0u);
  EXPECT_EQ(p.events, v.size());
}

TEST(TunePeriod, ARecordedFailureIsSearchedWhole) {
  std::vector<gmt_event_t> v = training(200, 0);
  v.insert(v.begin() + 50, ev(GMT_EV_ALLOC_FAILED, v[50].ts_ns, 0, 9000 * MiB));
  gr_period_t p;
  gm_err_t err;
  ASSERT_EQ(gr_period_scan_events(v.data(), v.size(), &p, &err), GM_OK) << err.msg;
  EXPECT_FALSE(p.found);
  EXPECT_EQ(p.failures, 1u);
  EXPECT_NE(std::string(p.why).find("failed"), std::string::npos) << p.why;
}

// The events v held as the tuner's decoded trace of a kDevice GPU (PyTorch's), and a config
// that replays them on the simulator on two threads.
void LoadedOf(std::vector<gmt_event_t> &v, gr_loaded_t *lt, gr_config_t *cfg) {
  memset(lt, 0, sizeof *lt);
  memset(cfg, 0, sizeof *cfg);
  lt->info.path = "synthetic";
  lt->info.frameworks = GMT_FW_PYTORCH;
  lt->info.device_memory = kDevice;
  lt->total_memory = kDevice;
  lt->evs = v.data();
  lt->n_evs = v.size();
  cfg->cuda_ordinal = -1;
  cfg->jobs = 2;
  cfg->serve_failed = 1;
  cfg->device_memory = kDevice;
}

// The search on the reduced trace gives the full search's advice, every figure of it from
// whole-trace replays.
TEST(TunePeriod, ReducedSearchKeepsTheAdvice) {
  std::vector<gmt_event_t> v = training(700, 7);
  gr_loaded_t lt;
  gr_config_t cfg;
  LoadedOf(v, &lt, &cfg);
  gr_tune_opts_t o = {GR_TUNE_SEARCH, 0.01, 1, 1, GR_REDUCE_ALWAYS, 0};
  gr_tune_t full, red;
  gm_err_t err;
  ASSERT_EQ(gr_tune_run(&cfg, &lt, &o, &full, &err), GM_OK) << err.msg;
  gr_period_t p;
  ASSERT_EQ(gr_period_scan_events(v.data(), v.size(), &p, &err), GM_OK) << err.msg;
  ASSERT_TRUE(p.found) << p.why;
  gr_loaded_t rl = lt;
  rl.evs = p.evs;
  rl.n_evs = p.n_evs;
  ASSERT_EQ(gr_tune_run_reduced(&cfg, &lt, &rl, &p, &o, &red, NULL, &err), GM_OK) << err.msg;
  ASSERT_GE(full.chosen, 0);
  ASSERT_GE(red.chosen, 0);
  const gr_tune_point_t &a = full.pts[full.chosen], &b = red.pts[red.chosen];
  EXPECT_STREQ(a.spec, b.spec);
  EXPECT_EQ(a.peak_reserved, b.peak_reserved);
  EXPECT_EQ(a.alloc_calls, b.alloc_calls); // a whole-trace figure: the reduced trace has fewer
  EXPECT_EQ(a.needs_bytes, b.needs_bytes);
  EXPECT_EQ(full.duration_ns, red.duration_ns);
  EXPECT_STREQ(full.pts[full.dflt].spec, red.pts[red.dflt].spec);
  EXPECT_EQ(full.pts[full.dflt].needs_bytes, red.pts[red.dflt].needs_bytes);
  EXPECT_NE(std::string(red.searched).find("confirmed on the whole trace"), std::string::npos) << red.searched;
  gr_tune_free(&full);
  gr_tune_free(&red);
  gr_period_free(&p);
}

// A reduced search over v, its finalists confirmed on the whole trace in rounds (the shortcut:
// runners-up the reduced figures separate left out while the smallest is within the budget) or
// all at once (confirm_all).
struct Reduced {
  gr_loaded_t lt;
  gr_config_t cfg;
  gr_period_t p;
  gr_tune_t t;
  gm_status_t st;
  gm_err_t err;
  Reduced(std::vector<gmt_event_t> &v, double budget, int confirm_all) {
    memset(&t, 0, sizeof t);
    LoadedOf(v, &lt, &cfg);
    cfg.timing_range = 1;
    gr_tune_opts_t o = {GR_TUNE_SEARCH, budget, 1, 1, GR_REDUCE_ALWAYS, 0, confirm_all};
    st = gr_period_scan_events(v.data(), v.size(), &p, &err);
    if (st == GM_OK && !p.found) st = gm_err_set(&err, GM_ERR_INVAL, "no period: %s", p.why);
    gr_loaded_t rl = lt;
    rl.evs = p.evs;
    rl.n_evs = p.n_evs;
    if (st == GM_OK) st = gr_tune_run_reduced(&cfg, &lt, &rl, &p, &o, &t, NULL, &err);
  }
  ~Reduced() {
    gr_tune_free(&t);
    gr_period_free(&p);
  }
  const gr_tune_point_t *at(int i) const { return i >= 0 ? &t.pts[i] : nullptr; }
};

// Every figure of a point the advice names: the same in both.
void ExpectSamePoint(const gr_tune_point_t *a, const gr_tune_point_t *b, const char *what) {
  ASSERT_EQ(a == nullptr, b == nullptr) << what;
  if (!a) return;
  EXPECT_STREQ(a->spec, b->spec) << what;
  EXPECT_EQ(a->peak_reserved, b->peak_reserved) << what;
  EXPECT_EQ(a->alloc_calls, b->alloc_calls) << what;
  EXPECT_EQ(a->free_calls, b->free_calls) << what;
  EXPECT_EQ(a->worst_bytes, b->worst_bytes) << what;
  EXPECT_EQ(a->best_bytes, b->best_bytes) << what;
  EXPECT_EQ(a->needs_bytes, b->needs_bytes) << what;
  EXPECT_EQ(a->needs_above, b->needs_above) << what;
}

void ExpectSameAdvice(const Reduced &s, const Reduced &a) {
  ExpectSamePoint(s.at(s.t.chosen), a.at(a.t.chosen), "chosen");
  ExpectSamePoint(s.at(s.t.best), a.at(a.t.best), "best");
  ExpectSamePoint(s.at(s.t.best_grid), a.at(a.t.best_grid), "best of the grid");
  ExpectSamePoint(s.at(s.t.dflt), a.at(a.t.dflt), "default");
  EXPECT_EQ(s.t.keep_default, a.t.keep_default);
  EXPECT_EQ(s.t.lower_bound, a.t.lower_bound);
  // what the shortcut confirmed is a part of what all confirm, with the same figures
  EXPECT_LE(s.t.n, a.t.n);
  for (int i = 0; i < s.t.n; i++) {
    int k = gr_tune_find(&a.t, s.t.pts[i].spec);
    ASSERT_GE(k, 0) << s.t.pts[i].spec << ": confirmed by the shortcut alone";
    EXPECT_EQ(s.t.pts[i].peak_reserved, a.t.pts[k].peak_reserved) << s.t.pts[i].spec;
  }
}

// Training with the weights' optimizer state: steps of kinds A and B as training() and a third
// kind C every `rare`-th step that holds a large temporary across the step boundary's frees.
std::vector<gmt_event_t> training3(int steps, int rare) {
  std::vector<gmt_event_t> v = training(steps, 7);
  uint64_t ts = v.back().ts_ns;
  for (int s = 0; s < steps / rare; s++) {
    v.push_back(ev(GMT_EV_MARKER, ts += 1000, 0, (uint64_t)(steps + s)));
    uint64_t a1 = 0x3000000000ull, a2 = 0x3100000000ull;
    v.push_back(ev(GMT_EV_ALLOC, ts += 10, a1, 700 * MiB + (uint64_t)(s % 3) * 3 * MiB));
    v.push_back(ev(GMT_EV_ALLOC, ts += 10, a2, 13 * MiB));
    v.push_back(ev(GMT_EV_FREE, ts += 10, a1, 700 * MiB + (uint64_t)(s % 3) * 3 * MiB));
    v.push_back(ev(GMT_EV_ALLOC, ts += 10, a1, 900 * MiB));
    v.push_back(ev(GMT_EV_FREE, ts += 10, a2, 13 * MiB));
    v.push_back(ev(GMT_EV_FREE, ts += 10, a1, 900 * MiB));
  }
  return v;
}

// The shortcut (runners-up the steady state separates left out while the smallest is within
// the budget) gives the advice of confirming every finalist, on traces of known structure and
// budgets that do and do not settle the choice in the first round.
TEST(TuneReduced, ShortcutGivesTheAdviceOfConfirmingEveryFinalist) {
  std::vector<std::vector<gmt_event_t>> traces = {training(700, 7), training3(900, 5)};
  for (size_t k = 0; k < traces.size(); k++)
    for (double budget : {0.01, 1e6}) {
      SCOPED_TRACE("trace " + std::to_string(k) + ", budget " + std::to_string(budget));
      Reduced s(traces[k], budget, 0), a(traces[k], budget, 1);
      ASSERT_EQ(s.st, GM_OK) << s.err.msg;
      ASSERT_EQ(a.st, GM_OK) << a.err.msg;
      ExpectSameAdvice(s, a);
      // a budget every point meets settles the choice in the first round, one none meets (the
      // recorded durations here are microseconds) takes the second: both paths taken
      if (budget > 1) EXPECT_LT(s.t.n, a.t.n) << s.t.searched;
      else EXPECT_NE(std::string(s.t.searched).find("in two rounds"), std::string::npos) << s.t.searched;
    }
}

// A budget nothing meets: the first round cannot settle the choice, the second confirms the
// rest, and the points are those of confirming all at once, in the same order.
TEST(TuneReduced, AnUnsettledChoiceConfirmsEveryFinalist) {
  std::vector<gmt_event_t> v = training3(900, 5);
  Reduced s(v, 1e-12, 0), a(v, 1e-12, 1);
  ASSERT_EQ(s.st, GM_OK) << s.err.msg;
  ASSERT_EQ(a.st, GM_OK) << a.err.msg;
  ExpectSameAdvice(s, a);
  ASSERT_EQ(s.t.n, a.t.n);
  for (int i = 0; i < s.t.n; i++) EXPECT_STREQ(s.t.pts[i].spec, a.t.pts[i].spec) << i;
  for (int i = 0; i < s.t.n_front && i < a.t.n_front; i++) EXPECT_EQ(s.t.front[i], a.t.front[i]) << i;
  EXPECT_EQ(s.t.n_front, a.t.n_front);
}

} // namespace
