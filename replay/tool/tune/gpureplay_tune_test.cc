// gpureplay_tune_test.cc: the tuner on synthetic traces whose optimum is known.
//
// PyTorch: A (100 MiB) and B (100 MiB) live, A freed, C (150 MiB) asked. The caching allocator
// keeps A's segment and takes a new one for C: 350 MiB reserved. No allocator can reserve less
// than what is live at once, B + C = 250 MiB, and PyTorch reaches it only when a memory limit
// (per_process_memory_fraction) makes it give A's cached segment back before taking C's: the
// search must find that point, the sweep grid does not have it (its fraction is 0.9 of the
// device). The capacity bisection: on a device of 250 MiB the default fails in the second step
// (B is split out of C's cached 150 MiB segment, so after an OOM empties the cache only A's
// 100 MiB segment goes back: 50 + 100 + 150 = 300 MiB), and fits in 300 MiB; the tuned point
// fits in 250 MiB.
//
// JAX: one 100 MiB buffer. A preallocated arena of 100 MiB is the least that serves it; JAX
// rounds its limit up to 2 MiB, so the bisection of XLA_PYTHON_CLIENT_MEM_FRACTION must end
// at an arena of exactly 100 MiB.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "replay/tool/tune/gpureplay_tune.h"

namespace {

constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t kDevice = 1024 * MiB;

gmt_event_t ev(uint8_t kind, uint64_t ts, uint64_t addr, uint64_t size) {
  gmt_event_t e;
  memset(&e, 0, sizeof e);
  e.kind = kind;
  e.ts_ns = ts;
  e.addr = addr;
  e.size = size;
  e.stream = 7;
  e.flags = 0;
  e.mem_kind = GMT_MEM_DEVICE;
  e.callsite = GMT_NO_STRING;
  return e;
}

struct Loaded {
  std::vector<gmt_event_t> evs;
  gr_loaded_t lt;
  gr_config_t cfg;
  explicit Loaded(unsigned frameworks) {
    memset(&lt, 0, sizeof lt);
    memset(&cfg, 0, sizeof cfg);
    lt.info.path = "synthetic";
    lt.info.frameworks = frameworks;
    lt.info.device_memory = kDevice;
    lt.total_memory = kDevice;
    cfg.cuda_ordinal = -1;
    cfg.jobs = 2;
    cfg.serve_failed = 1;
    cfg.device_memory = kDevice;
  }
  void done() {
    lt.evs = evs.data();
    lt.n_evs = evs.size();
  }
};

const gr_tune_point_t &pt(const gr_tune_t &t, int i) {
  EXPECT_GE(i, 0);
  return t.pts[i];
}

Loaded fragmenting_trace() {
  Loaded l(GMT_FW_PYTORCH);
  const uint64_t a = 0x10000000, b = 0x20000000, c = 0x30000000;
  for (int step = 0; step < 3; step++) { // the same step three times: a training loop
    uint64_t t0 = (uint64_t)step * 1000000000ull;
    l.evs.push_back(ev(GMT_EV_ALLOC, t0 + 1, a, 100 * MiB));
    l.evs.push_back(ev(GMT_EV_ALLOC, t0 + 2, b, 100 * MiB));
    l.evs.push_back(ev(GMT_EV_FREE, t0 + 3, a, 100 * MiB));
    l.evs.push_back(ev(GMT_EV_ALLOC, t0 + 4, c, 150 * MiB));
    l.evs.push_back(ev(GMT_EV_FREE, t0 + 5, b, 100 * MiB));
    l.evs.push_back(ev(GMT_EV_FREE, t0 + 6, c, 150 * MiB));
  }
  l.done();
  return l;
}

TEST(Tune, PyTorchSearchFindsTheKnownOptimum) {
  Loaded l = fragmenting_trace();
  gr_tune_opts_t o = {GR_TUNE_SEARCH, 0.01, 1};
  gr_tune_t t;
  gm_err_t err;
  ASSERT_EQ(gr_tune_run(&l.cfg, &l.lt, &o, &t, &err), GM_OK) << err.msg;
  EXPECT_EQ(t.lower_bound, 250 * MiB);
  EXPECT_EQ(pt(t, t.dflt).peak_reserved, 350 * MiB);
  EXPECT_EQ(pt(t, t.best_grid).peak_reserved, 350 * MiB) << pt(t, t.best_grid).spec;
  EXPECT_EQ(pt(t, t.best).peak_reserved, 250 * MiB) << pt(t, t.best).spec;
  EXPECT_NE(std::string(pt(t, t.best).spec).find("per_process_memory_fraction"), std::string::npos)
      << pt(t, t.best).spec;
  EXPECT_EQ(pt(t, t.dflt).needs_bytes, 300 * MiB);
  EXPECT_EQ(pt(t, t.best).needs_bytes, 250 * MiB);
  // The front starts at the optimum and only gets faster as it gets bigger.
  ASSERT_GT(t.n_front, 0);
  EXPECT_EQ(pt(t, t.front[0]).peak_reserved, 250 * MiB);
  for (int i = 1; i < t.n_front; i++) {
    EXPECT_GT(pt(t, t.front[i]).peak_reserved, pt(t, t.front[i - 1]).peak_reserved);
    EXPECT_LT(pt(t, t.front[i]).time_mid_s, pt(t, t.front[i - 1]).time_mid_s);
  }
  // The tuned spec, replayed on its own, gives what the search saw.
  rp_result_t *r = new rp_result_t;
  const char *sp[1] = {pt(t, t.best).spec};
  ASSERT_EQ(gr_run_loaded(&l.cfg, &l.lt, sp, 1, &r, &err), GM_OK) << err.msg;
  EXPECT_EQ(r->peak_reserved_bytes, 250 * MiB);
  EXPECT_EQ(r->ooms, 0u);
  delete r;
  gr_tune_free(&t);
}

TEST(Tune, BoundedDescentMatchesExhaustiveHere) {
  Loaded l = fragmenting_trace();
  gr_tune_t d, x;
  gm_err_t err;
  gr_tune_opts_t od = {GR_TUNE_BOUNDED, 0.01, 0}, ox = {GR_TUNE_EXHAUSTIVE, 0.01, 0};
  ASSERT_EQ(gr_tune_run(&l.cfg, &l.lt, &od, &d, &err), GM_OK) << err.msg;
  ASSERT_EQ(gr_tune_run(&l.cfg, &l.lt, &ox, &x, &err), GM_OK) << err.msg;
  EXPECT_EQ(pt(x, x.best).peak_reserved, 250 * MiB) << pt(x, x.best).spec;
  EXPECT_EQ(pt(d, d.best).peak_reserved, pt(x, x.best).peak_reserved);
  EXPECT_LT(d.replays, x.replays);
  gr_tune_free(&d);
  gr_tune_free(&x);
}

TEST(Tune, TimeBudgetPicksTheFasterPoint) {
  // A budget of nothing: the choice is the fastest point of the front, not the smallest.
  Loaded l = fragmenting_trace();
  gr_tune_opts_t o = {GR_TUNE_SEARCH, 1e-12, 0};
  gr_tune_t t;
  gm_err_t err;
  ASSERT_EQ(gr_tune_run(&l.cfg, &l.lt, &o, &t, &err), GM_OK) << err.msg;
  ASSERT_GT(t.n_front, 0);
  EXPECT_EQ(t.chosen, t.front[t.n_front - 1]);
  gr_tune_free(&t);
}

TEST(Tune, TimeModelUsesTheMeasuredLatencies) {
  double lo, mid, hi;
  gr_tune_time(GR_CALL_SEGMENT, 1000, 0, &lo, &mid, &hi);
  EXPECT_NEAR(lo, 1000 * 41.0e-6, 1e-9); // cuMemAlloc p50, bench/RESULTS.md
  EXPECT_NEAR(hi, 1000 * 81.9e-6, 1e-9);
  gr_tune_time(GR_CALL_MAP, 10, 0, &lo, &mid, &hi);
  EXPECT_NEAR(lo, 10 * 327.7e-6, 1e-9);
  EXPECT_LE(lo, mid);
  EXPECT_LE(mid, hi);
}

TEST(Tune, PyTorchSpecWritesBothRoundupForms) {
  gr_pt_point_t p;
  memset(&p, 0, sizeof p);
  char s[512];
  gr_pt_spec(&p, s, sizeof s);
  EXPECT_STREQ(s, "pytorch");
  p.roundup[0] = p.roundup[1] = p.roundup[2] = 4;
  gr_pt_spec(&p, s, sizeof s);
  EXPECT_STREQ(s, "pytorch:roundup_power2_divisions:4");
  p.roundup[0] = 8;
  p.roundup[1] = 0;
  p.roundup[2] = 2;
  p.max_split_mb = 200;
  p.non_split_mb = 64;
  p.gc_pct = 60;
  p.fraction_ppm = 250000;
  gr_pt_spec(&p, s, sizeof s);
  EXPECT_STREQ(s, "pytorch:max_split_size_mb:200,max_non_split_rounding_mb:64,"
                  "roundup_power2_divisions:[32:8,64:0,128:0,256:0,>:2],"
                  "garbage_collection_threshold:0.60,per_process_memory_fraction:0.250000");
}

TEST(Tune, JaxBisectionFindsTheSmallestArena) {
  Loaded l(GMT_FW_JAX);
  for (int i = 0; i < 4; i++) {
    l.evs.push_back(ev(GMT_EV_ALLOC, 10 * (uint64_t)i + 1, 0x10000000, 100 * MiB));
    l.evs.push_back(ev(GMT_EV_FREE, 10 * (uint64_t)i + 2, 0x10000000, 100 * MiB));
  }
  l.done();
  gr_tune_opts_t o = {GR_TUNE_SEARCH, 0.01, 0};
  gr_tune_t t;
  gm_err_t err;
  ASSERT_EQ(gr_tune_run(&l.cfg, &l.lt, &o, &t, &err), GM_OK) << err.msg;
  EXPECT_STREQ(t.policy_name, "jax");
  EXPECT_EQ(pt(t, t.best).peak_reserved, 100 * MiB) << pt(t, t.best).spec;
  EXPECT_NE(std::string(pt(t, t.best).spec).find("MEM_FRACTION="), std::string::npos);
  // The default preallocates 75 % of the device.
  EXPECT_EQ(pt(t, t.dflt).peak_reserved, 768 * MiB);
  gr_tune_free(&t);
}

TEST(Tune, TensorFlowBisectionBeatsItsGrid) {
  // The same 100 MiB buffer under TensorFlow: the bisection of per_process_gpu_memory_fraction
  // ends at the smallest region that holds it, below every point of TF's grid.
  Loaded l(GMT_FW_TENSORFLOW);
  for (int i = 0; i < 4; i++) {
    l.evs.push_back(ev(GMT_EV_ALLOC, 10 * (uint64_t)i + 1, 0x10000000, 100 * MiB));
    l.evs.push_back(ev(GMT_EV_FREE, 10 * (uint64_t)i + 2, 0x10000000, 100 * MiB));
  }
  l.done();
  gr_tune_opts_t o = {GR_TUNE_SEARCH, 0.01, 0};
  gr_tune_t t;
  gm_err_t err;
  ASSERT_EQ(gr_tune_run(&l.cfg, &l.lt, &o, &t, &err), GM_OK) << err.msg;
  EXPECT_STREQ(t.policy_name, "tf");
  ASSERT_GE(t.best_grid, 0);
  EXPECT_NE(std::string(pt(t, t.best).spec).find("per_process_gpu_memory_fraction="), std::string::npos)
      << pt(t, t.best).spec;
  EXPECT_LT(pt(t, t.best).peak_reserved, pt(t, t.best_grid).peak_reserved);
  EXPECT_GE(pt(t, t.best).peak_reserved, 100 * MiB);
  EXPECT_LE(pt(t, t.best).peak_reserved, 104 * MiB) << pt(t, t.best).spec;
  gr_tune_free(&t);
}

} // namespace
