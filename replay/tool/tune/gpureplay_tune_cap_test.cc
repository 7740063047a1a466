// gpureplay_tune_cap_test.cc: the capacity answers (gpureplay_tune_cap.c) on generated traces:
// a replay's span of capacities is the set that gives the same replay (and no wider), and the
// search that skips the steps spans answer for finds what the plain bisection (as it was
// before spans, written out again here as the reference) finds, with fewer replays, from a
// hint and from capacities known before too; the edges: a job that needs nothing, one that
// fits its lower bound exactly, one that fits no capacity. The generated jobs are not all
// monotone in the capacity (an OOM empties PyTorch's cache, and a larger device can fragment
// worse): the answers must be the bisection's there too, not merely another boundary.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "formats/gmt_testutil.h"
#include "replay/tool/tune/gpureplay_tune.h"

namespace {

constexpr uint64_t MiB = 1ull << 20;
constexpr uint64_t kDevice = 4096 * MiB;

struct Job {
  std::vector<gmt_event_t> evs;
  gr_loaded_t lt;
  gr_config_t cfg;
  gr_tune_opts_t o = {GR_TUNE_SEARCH, 0.01, 1};
  gr_tune_t t;
  gr_tune_ctx_t c;
  explicit Job(std::vector<gmt_event_t> e, uint64_t context = 0) : evs(std::move(e)) {
    memset(&lt, 0, sizeof lt);
    memset(&cfg, 0, sizeof cfg);
    lt.info.path = "generated";
    lt.info.frameworks = GMT_FW_PYTORCH;
    lt.info.device_memory = kDevice;
    lt.info.context_bytes = context;
    lt.total_memory = kDevice;
    lt.evs = evs.data();
    lt.n_evs = evs.size();
    cfg.cuda_ordinal = -1;
    cfg.jobs = 2;
    cfg.serve_failed = 1;
    cfg.device_memory = kDevice;
    gr_tune_init(&t, &cfg, &lt, &o, 1000000000ull);
    c = {cfg, &lt, &t, &o, 0};
  }
  ~Job() { gr_tune_free(&t); }
  // The point of spec (replayed unlimited, as the search replays it).
  gr_tune_point_t *point(const char *spec) {
    int idx = -1;
    gm_err_t err;
    const char *sp[1] = {spec};
    EXPECT_EQ(gr_tune_eval(&c, sp, 1, &idx, &err), GM_OK) << err.msg;
    return idx >= 0 ? &t.pts[idx] : nullptr;
  }
  // One replay within cap bytes (0: unlimited), to its end.
  rp_result_t replay(const char *spec, uint64_t cap) {
    rp_result_t *r = new rp_result_t;
    gr_config_t k = cfg;
    k.capacity = cap;
    gm_err_t err;
    const char *sp[1] = {spec};
    EXPECT_EQ(gr_run_loaded(&k, &lt, sp, 1, &r, &err), GM_OK) << err.msg;
    rp_result_t out = *r;
    delete r;
    return out;
  }
  bool fits(const char *spec, uint64_t units) {
    reference_replays++;
    return replay(spec, units << 21).ooms == 0;
  }
  uint64_t reference_replays = 0;
};

// A training-like job: n requests of 1..max_mib MiB (some large, from their own segments),
// at most `live` of them live, freed in random order; a few sizes repeat, as layers do.
std::vector<gmt_event_t> generated(unsigned seed, int n, int live, int max_mib) {
  std::mt19937_64 rng(seed);
  std::vector<gmt_event_t> evs;
  std::vector<std::pair<uint64_t, uint64_t>> held;
  uint64_t ts = 1, next = 0x10000000;
  for (int i = 0; i < n || !held.empty(); i++) {
    bool alloc = i < n && (held.empty() || ((int)held.size() < live && rng() % 3 != 0));
    if (alloc) {
      uint64_t size = (1 + rng() % (uint64_t)max_mib) * MiB - (rng() % 4) * 4096;
      if (rng() % 4 == 0) size = (uint64_t)(3 + seed % 5) * MiB; // a repeating size
      evs.push_back(gmt_test::Ev(GMT_EV_ALLOC, ts++, next, size, 7).Cs(GMT_NO_STRING));
      held.push_back({next, size});
      next += 0x10000000;
    } else {
      size_t k = rng() % held.size();
      evs.push_back(gmt_test::Ev(GMT_EV_FREE, ts++, held[k].first, held[k].second, 7).Cs(GMT_NO_STRING));
      held.erase(held.begin() + (long)k);
    }
  }
  return evs;
}

// The capacity search as it was before spans (gpureplay_tune.c at 489147a): a round of two
// points spread over (lo, hi) in doubles, each tried at ceil(x) 2 MiB steps; the answer ceil(hi).
// hint, no, yes: as gr_tune_point_needs_hint and _within take them (bytes, 0: none).
uint64_t reference_needs(Job &j, const gr_tune_point_t &p, bool *above, uint64_t hint = 0, uint64_t no = 0,
                         uint64_t yes = 0) {
  *above = false;
  hint >>= 21;
  no >>= 21;
  yes >>= 21;
  uint64_t top = p.ok ? p.peak_reserved : j.t.capacity > p.peak_reserved ? j.t.capacity : p.peak_reserved;
  top += j.t.context_bytes;
  double lo = (double)(j.t.lower_bound >> 21), hi = (double)((top + (2u << 20) - 1) >> 21) + 1;
  if (lo >= 1) lo -= 1;
  bool fit = false;
  if (no && (double)no > lo && (double)no < hi) lo = (double)no;
  if (yes && (double)yes > lo && (double)yes <= hi) hi = (double)yes, fit = true;
  if (hint > 1 && (double)hint > lo && (double)hint <= hi) {
    bool f0 = j.fits(p.spec, hint - 1), f1 = j.fits(p.spec, hint);
    if (f1 && !f0) return hint << 21;
    if (f0) hi = (double)(hint - 1), fit = true;
    else if (f1) hi = (double)hint, fit = true;
    else lo = (double)hint;
  }
  auto round = [](double l, double h, int k, double *x) {
    for (int i = 0; i < k; i++) x[i] = l + (h - l) * (double)(i + 1) / (double)(k + 1);
  };
  auto narrow = [](const double *x, const int *f, int k, double *l, double *h) {
    double nl = *l, nh = *h;
    for (int i = k - 1; i >= 0; i--)
      if (f[i]) nh = x[i];
    for (int i = 0; i < k; i++)
      if (!f[i] && x[i] < nh) nl = x[i];
    *l = nl;
    *h = nh;
  };
  for (int tries = 0; tries < 6 && !fit; tries++) {
    double x[3];
    int f[3], k = hi - lo > 1.0 ? 2 : 0;
    x[0] = hi;
    round(lo, hi, k, x + 1);
    for (int i = 0; i <= k; i++) f[i] = j.fits(p.spec, (uint64_t)ceil(x[i]));
    if (!f[0]) {
      lo = hi;
      hi *= 2;
      continue;
    }
    fit = true;
    narrow(x + 1, f + 1, k, &lo, &hi);
  }
  if (!fit) {
    *above = true;
    return (uint64_t)lo << 21;
  }
  while (hi - lo > 1.0) {
    double x[2];
    int f[2];
    round(lo, hi, 2, x);
    for (int i = 0; i < 2; i++) f[i] = j.fits(p.spec, (uint64_t)ceil(x[i]));
    narrow(x, f, 2, &lo, &hi);
  }
  return (uint64_t)ceil(hi) << 21;
}

const char *const kSpecs[] = {"pytorch", "pytorch:max_split_size_mb:24", "pytorch:expandable_segments:True",
                              "pytorch:garbage_collection_threshold:0.6", "bfc"};

// Every capacity in a replay's span gives that replay again, and the capacities just outside
// it do not.
TEST(TuneCapacity, ASpanIsExactlyTheCapacitiesThatGiveTheSameReplay) {
  int checked = 0;
  for (unsigned seed = 1; seed <= 6; seed++) {
    Job j(generated(seed, 300, 12, 40), seed % 2 ? 0 : 5 * MiB + 12345);
    for (const char *spec : {"pytorch", "pytorch:expandable_segments:True"}) {
      rp_result_t u = j.replay(spec, 0);
      // within, at and below the peak: some fit, some run out
      for (uint64_t cap : {u.peak_reserved_bytes * 9 / 10, u.peak_reserved_bytes * 3 / 4}) {
        rp_result_t r = j.replay(spec, cap);
        ASSERT_TRUE(r.same_capacity_known) << seed << " " << spec;
        uint64_t ctx = j.lt.info.context_bytes, lo = r.same_capacity_lo + ctx, hi = r.same_capacity_hi;
        ASSERT_LE(lo, cap) << seed << " " << spec;
        ASSERT_GE(hi == UINT64_MAX ? UINT64_MAX : hi + ctx, cap) << seed << " " << spec;
        auto same = [&](const rp_result_t &a) {
          return a.ooms == r.ooms && a.peak_reserved_bytes == r.peak_reserved_bytes &&
                 a.device_alloc_calls == r.device_alloc_calls && a.driver_nomem == r.driver_nomem &&
                 a.alloc_retries == r.alloc_retries;
        };
        EXPECT_TRUE(same(j.replay(spec, lo))) << seed << " " << spec << " at " << lo;
        if (lo > ctx + 1) {
          EXPECT_FALSE(same(j.replay(spec, lo - 1))) << seed << " " << spec << " below " << lo;
        }
        if (hi != UINT64_MAX) {
          EXPECT_TRUE(same(j.replay(spec, hi + ctx))) << seed << " " << spec << " at " << hi + ctx;
          EXPECT_FALSE(same(j.replay(spec, hi + ctx + 1))) << seed << " " << spec << " above " << hi + ctx;
        }
        checked++;
      }
      // unlimited: the same replay from what it used up
      ASSERT_TRUE(u.same_capacity_known);
      EXPECT_EQ(u.same_capacity_hi, UINT64_MAX);
      EXPECT_EQ(j.replay(spec, u.same_capacity_lo + j.lt.info.context_bytes).ooms, 0u);
    }
  }
  EXPECT_EQ(checked, 24);
}

// The search answers what the bisection answered, for every generated job and setting, with
// fewer replays over them all.
TEST(TuneCapacity, SpansFindWhatTheBisectionFinds) {
  uint64_t replays = 0, reference = 0;
  int compared = 0;
  for (unsigned seed = 1; seed <= 12; seed++) {
    Job j(generated(seed, 400, 8 + (int)seed % 10, 20 + 10 * ((int)seed % 4)), seed % 3 ? 0 : 7 * MiB);
    for (const char *spec : kSpecs) {
      gr_tune_point_t *p = j.point(spec);
      ASSERT_NE(p, nullptr);
      gr_tune_point_t ref = *p;
      bool above = false;
      uint64_t want = reference_needs(j, ref, &above);
      uint64_t before = j.t.replays;
      gm_err_t err;
      ASSERT_EQ(gr_tune_point_needs(&j.c, p, &err), GM_OK) << err.msg;
      replays += j.t.replays - before;
      EXPECT_EQ(p->needs_bytes, want) << "seed " << seed << " " << spec;
      EXPECT_EQ(p->needs_above, above) << "seed " << seed << " " << spec;
      // the answer fits and the step below it does not
      EXPECT_EQ(j.replay(spec, p->needs_bytes).ooms, 0u) << "seed " << seed << " " << spec;
      EXPECT_GT(j.replay(spec, p->needs_bytes - (2u << 20)).ooms, 0u) << "seed " << seed << " " << spec;
      compared++;
    }
    reference += j.reference_replays;
  }
  EXPECT_EQ(compared, 12 * (int)(sizeof kSpecs / sizeof kSpecs[0]));
  printf("capacity replays: %llu by spans, %llu by bisection\n", (unsigned long long)replays,
         (unsigned long long)reference);
  EXPECT_LT(replays * 4, reference * 3); // a quarter fewer at least, over the lot
}

// A hint (a reduced trace's answer) and capacities already replayed start the search where
// they say, and it still ends on the bisection's answer.
TEST(TuneCapacity, HintsAndKnownCapacitiesGiveTheSameAnswer) {
  for (unsigned seed = 20; seed <= 24; seed++) {
    Job j(generated(seed, 400, 12, 30));
    gr_tune_point_t *p = j.point("pytorch");
    bool above;
    uint64_t plain = reference_needs(j, *p, &above);
    gm_err_t err;
    for (uint64_t hint : {plain, plain - 6 * MiB, plain + 40 * MiB}) {
      gr_tune_point_t a = *p;
      ASSERT_EQ(gr_tune_point_needs_hint(&j.c, &a, hint, &err), GM_OK) << err.msg;
      EXPECT_EQ(a.needs_bytes, reference_needs(j, *p, &above, hint)) << seed << " hint " << hint;
    }
    // capacities known before: one that runs out (its span too), one that fits (without)
    rp_result_t r = j.replay("pytorch", plain - 10 * MiB);
    ASSERT_GT(r.ooms, 0u);
    gr_tune_span_t none = {0, 0}, no_same = gr_tune_span_of(&j.t, &r);
    EXPECT_NE(no_same.lo, 0u);
    gr_tune_point_t b = *p, d = *p;
    ASSERT_EQ(gr_tune_point_needs_within(&j.c, &b, plain - 10 * MiB, no_same, 0, none, &err), GM_OK);
    EXPECT_EQ(b.needs_bytes, reference_needs(j, *p, &above, 0, plain - 10 * MiB)) << seed;
    ASSERT_EQ(gr_tune_point_needs_within(&j.c, &d, 0, none, plain + 10 * MiB, none, &err), GM_OK);
    EXPECT_EQ(d.needs_bytes, reference_needs(j, *p, &above, 0, 0, plain + 10 * MiB)) << seed;
  }
}

// The edges: a job that allocates nothing needs no device memory; one request alone needs
// itself (2 MiB steps, the context inside); a hard limit below the request fits no capacity.
TEST(TuneCapacity, NothingNeededExactlyTheRequestAndNothingFits) {
  gm_err_t err;
  {
    Job j({gmt_test::Ev(GMT_EV_MARKER, 1, 0, 0, 7).Cs(GMT_NO_STRING)});
    gr_tune_point_t *p = j.point("pytorch");
    ASSERT_EQ(gr_tune_point_needs(&j.c, p, &err), GM_OK) << err.msg;
    EXPECT_TRUE(p->needs_none);
  }
  {
    std::vector<gmt_event_t> e = {gmt_test::Ev(GMT_EV_ALLOC, 1, 0x1000000, 100 * MiB, 7).Cs(GMT_NO_STRING),
                                  gmt_test::Ev(GMT_EV_FREE, 2, 0x1000000, 100 * MiB, 7).Cs(GMT_NO_STRING)};
    Job j(e, 3 * MiB);
    gr_tune_point_t *p = j.point("pytorch");
    gr_tune_point_t ref = *p;
    uint64_t before = j.t.replays;
    ASSERT_EQ(gr_tune_point_needs(&j.c, p, &err), GM_OK) << err.msg;
    EXPECT_EQ(p->needs_bytes, 104 * MiB); // 100 MiB + 3 MiB of context, in 2 MiB steps
    EXPECT_FALSE(p->needs_above);
    bool above;
    EXPECT_EQ(reference_needs(j, ref, &above), 104 * MiB);
    // the unlimited replay says 104 fits: one round below it (the bisection tries the top too)
    EXPECT_LE(j.t.replays - before, 2u);
    EXPECT_GT(j.reference_replays, 2u);
  }
  {
    std::vector<gmt_event_t> e = {gmt_test::Ev(GMT_EV_ALLOC, 1, 0x1000000, 600 * MiB, 7).Cs(GMT_NO_STRING),
                                  gmt_test::Ev(GMT_EV_FREE, 2, 0x1000000, 600 * MiB, 7).Cs(GMT_NO_STRING)};
    Job j(e);
    const char *spec = "pytorch:per_process_memory_fraction:0.1"; // 409.6 MiB of the 4 GiB device
    gr_tune_point_t *p = j.point(spec);
    ASSERT_FALSE(p->ok);
    gr_tune_point_t ref = *p;
    bool above;
    uint64_t want = reference_needs(j, ref, &above);
    ASSERT_EQ(gr_tune_point_needs(&j.c, p, &err), GM_OK) << err.msg;
    EXPECT_TRUE(above);
    EXPECT_TRUE(p->needs_above);
    EXPECT_EQ(p->needs_bytes, want);
  }
}

}  // namespace
