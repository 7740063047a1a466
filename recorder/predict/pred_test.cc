// pred_test.cc: gpurec predict's library: the size fit, the alignment, and whole predictions
// from traces whose truth is known (bench/synth at several batches; the hand-made CSV traces of
// testdata/, make_csv.py), compared event by event with the trace of the real run at the target.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "bench/synth/synth.h"
#include "formats/gmt.h"
#include "recorder/predict/pred.h"
#include "recorder/predict/pred_internal.h"

namespace {

std::string Tmp(const std::string &name) {
  static int n = 0;
  const char *d = getenv("TEST_TMPDIR");
  return std::string(d ? d : "/tmp") + "/" + std::to_string(getpid()) + "_" + std::to_string(n++) + "_" + name;
}

// A testdata CSV trace, imported into a .zst.
std::string Csv(const std::string &name) {
  const char *src = getenv("TEST_SRCDIR");
  std::string in = std::string(src ? src : ".") + "/gpumem/recorder/predict/testdata/" + name + ".csv";
  std::string out = Tmp(name + ".zst");
  FILE *f = fopen(in.c_str(), "rb");
  EXPECT_NE(f, nullptr) << in;
  if (!f) return out;
  gm_err_t err{};
  EXPECT_EQ(gmt_csv_import(f, in.c_str(), out.c_str(), nullptr, &err), GM_OK) << err.msg;
  fclose(f);
  return out;
}

std::string Synth(unsigned batch, uint64_t events, int callsites) {
  synth_opts_t o{};
  o.events = events;
  o.seed = 3;
  o.layers = 4;
  o.hidden = 512;
  o.batch = batch;
  o.callsites = (uint32_t)callsites;
  std::string out = Tmp("synth" + std::to_string(batch) + ".zst");
  gm_err_t err{};
  EXPECT_EQ(synth_write(&o, out.c_str(), nullptr, &err), GM_OK) << err.msg;
  return out;
}

// (kind, size, callsite string) of every event: what a prediction must get right. Addresses,
// correlation ids and string ids may differ.
std::vector<std::pair<int, uint64_t>> KindsAndSizes(const std::string &path, std::vector<std::string> *sites = nullptr) {
  std::vector<std::pair<int, uint64_t>> v;
  gmt_reader_t *r = nullptr;
  gm_err_t err{};
  EXPECT_EQ(gmt_reader_open(&r, path.c_str(), &err), GM_OK) << err.msg;
  if (!r) return v;
  gmt_event_t e;
  while (gmt_reader_next(r, &e, &err) == GM_OK) {
    v.push_back({e.kind, e.size});
    if (sites) {
      const char *s = gmt_reader_string(r, e.callsite);
      sites->push_back(s ? s : "");
    }
  }
  gmt_reader_close(r);
  return v;
}

std::string HeaderKv(const std::string &path, const char *key) {
  gmt_reader_t *r = nullptr;
  gm_err_t err{};
  if (gmt_reader_open(&r, path.c_str(), &err) != GM_OK) return "(unreadable)";
  const char *v = gmt_header_kv_get(gmt_reader_header(r), key);
  std::string s = v ? v : "(absent)";
  gmt_reader_close(r);
  return s;
}

struct Outcome {
  gm_status_t st;
  pred_result_t res;
  gm_err_t err;
  std::string out;
};

Outcome Predict(std::vector<std::pair<std::string, double>> in, double at, double minc = -1) {
  std::vector<pred_input_t> v;
  for (auto &p : in) v.push_back({p.first.c_str(), p.second});
  Outcome r{};
  r.out = Tmp("predicted.zst");
  pred_opts_t o{at, minc, "test"};
  r.st = pred_run(v.data(), v.size(), &o, r.out.c_str(), &r.res, &r.err);
  return r;
}

bool Exists(const std::string &p) { return access(p.c_str(), F_OK) == 0; }

// ---- the fit ------------------------------------------------------------------------------

TEST(PredFit, AffineFromTwoPointsIsExact) {
  double v[] = {8, 16};
  uint64_t s[] = {8 * 3000 + 100, 16 * 3000 + 100};
  pred_fit_t f;
  pred_fit_points(v, s, 2, 1, 32, &f);
  EXPECT_EQ(f.degree, 1);
  EXPECT_TRUE(f.consistent);
  EXPECT_EQ(pred_fit_eval(&f, 32, 1), 32u * 3000 + 100);
}

TEST(PredFit, RoundedSizesStayConsistentAndRoundUp) {
  // c * v rounded up to 512 as PyTorch's history records it: the fit is within a granule
  double v[] = {4, 8};
  auto r512 = [](uint64_t x) { return (x + 511) / 512 * 512; };
  uint64_t s[] = {r512(4 * 1000), r512(8 * 1000)};
  pred_fit_t f;
  pred_fit_points(v, s, 2, 512, 32, &f);
  EXPECT_TRUE(f.consistent);
  uint64_t p = pred_fit_eval(&f, 32, 512);
  EXPECT_EQ(p % 512, 0u);
  EXPECT_LE(p > r512(32000) ? p - r512(32000) : r512(32000) - p, 3 * 512u);
}

TEST(PredFit, ThreePointsFindTheQuadraticTerm) {
  double v[] = {4, 8, 16};
  uint64_t s[3];
  for (int i = 0; i < 3; i++) s[i] = (uint64_t)(30000 * v[i] * v[i] + 7 * v[i] + 512);
  pred_fit_t f;
  pred_fit_points(v, s, 3, 1, 32, &f);
  EXPECT_EQ(f.degree, 2);
  EXPECT_TRUE(f.consistent);
  EXPECT_EQ(pred_fit_eval(&f, 32, 1), 30000u * 32 * 32 + 7 * 32 + 512);
}

TEST(PredFit, ThreePointsOnALineStayAffine) {
  double v[] = {4, 8, 16};
  uint64_t s[] = {4 * 777 + 5, 8 * 777 + 5, 16 * 777 + 5};
  pred_fit_t f;
  pred_fit_points(v, s, 3, 1, 64, &f);
  EXPECT_EQ(f.degree, 1);
  EXPECT_TRUE(f.consistent);
}

TEST(PredFit, ASmallNegativeConstantIsATensor) {
  // logits[:, :-1] in the sequence length: (S - 1) * k
  double v[] = {256, 512};
  uint64_t s[] = {255 * 65536, 511 * 65536};
  pred_fit_t f;
  pred_fit_points(v, s, 2, 1, 1024, &f);
  EXPECT_TRUE(f.consistent);
  EXPECT_EQ(pred_fit_eval(&f, 1024, 1), 1023u * 65536);
}

TEST(PredFit, APureSquareFromTwoPointsIsATensorsLaw) {
  double v[] = {256, 384};
  uint64_t s[] = {256ull * 256 * 48, 384ull * 384 * 48};  // attention scores through two lengths
  pred_fit_t f;
  pred_fit_points(v, s, 2, 1, 768, &f);
  EXPECT_TRUE(f.consistent);
  EXPECT_EQ(f.degree, 2);
  EXPECT_EQ(pred_fit_eval(&f, 768, 1), 768ull * 768 * 48);
  uint64_t off[] = {256ull * 256 * 48, 384ull * 384 * 48 + 4096};  // off the square by more than the granule
  pred_fit_points(v, off, 2, 512, 768, &f);
  EXPECT_FALSE(f.consistent);
}

TEST(PredFit, ImplausibleFitsAreInconsistent) {
  pred_fit_t f;
  double v[] = {8, 16};
  uint64_t shrinking[] = {1 << 20, 1 << 10};  // two different allocations paired
  pred_fit_points(v, shrinking, 2, 1, 32, &f);
  EXPECT_FALSE(f.consistent);
  uint64_t parabola[] = {8 * 8 * 300 + 8 * 5000, 16 * 16 * 300 + 16 * 5000};  // a square and a line, two points
  pred_fit_points(v, parabola, 2, 1, 32, &f);
  EXPECT_FALSE(f.consistent);
  uint64_t one[] = {4096};
  pred_fit_points(v, one, 1, 1, 32, &f);
  EXPECT_EQ(f.degree, 0);
  EXPECT_FALSE(f.consistent);
}

// ---- the alignment ------------------------------------------------------------------------

TEST(PredDiff, InsertionsAndDeletionsStayUnpairedWithoutShiftingTheRest) {
  std::vector<uint64_t> a = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<uint64_t> b = {1, 2, 9, 3, 4, 6, 7, 8};  // 9 inserted, 5 deleted
  std::vector<int64_t> m(a.size());
  EXPECT_EQ(pred_diff(a.data(), a.size(), b.data(), b.size(), m.data(), 100), 2);
  std::vector<int64_t> want = {0, 1, 3, 4, -1, 5, 6, 7};
  EXPECT_EQ(m, want);
}

TEST(PredDiff, RepeatedTokensAnchorEachOther) {
  // a callsite repeated per layer, one layer's extra buffer in b only
  std::vector<uint64_t> a = {1, 2, 1, 2, 1, 2, 3};
  std::vector<uint64_t> b = {1, 2, 1, 5, 2, 1, 2, 3};
  std::vector<int64_t> m(a.size());
  EXPECT_EQ(pred_diff(a.data(), a.size(), b.data(), b.size(), m.data(), 100), 1);
  for (size_t i = 0; i < a.size(); i++) ASSERT_GE(m[i], 0) << i;
  for (size_t i = 0; i < a.size(); i++) EXPECT_EQ(a[i], b[(size_t)m[i]]) << i;
}

TEST(PredDiff, TooManyEditsLeaveEverythingUnpaired) {
  std::vector<uint64_t> a(50), b(50);
  for (size_t i = 0; i < 50; i++) a[i] = i, b[i] = 100 + i;
  std::vector<int64_t> m(a.size());
  EXPECT_EQ(pred_diff(a.data(), a.size(), b.data(), b.size(), m.data(), 10), -1);
  for (int64_t x : m) EXPECT_EQ(x, -1);
}

TEST(PredAlign, MarkersKeepADifferenceInsideItsStep) {
  // two steps; step 0 of b has an extra allocation: step 1 must pair one to one
  auto ev = [](unsigned kind, uint32_t cs, uint64_t size, uint64_t addr) {
    gmt_event_t e{};
    e.kind = (uint8_t)kind;
    e.callsite = cs;
    e.size = size;
    e.addr = addr;
    e.mem_kind = GMT_MEM_DEVICE;
    return e;
  };
  std::vector<gmt_event_t> a = {ev(GMT_EV_MARKER, 9, 0, 0), ev(GMT_EV_ALLOC, 1, 10, 1), ev(GMT_EV_ALLOC, 1, 10, 2),
                                ev(GMT_EV_MARKER, 9, 1, 0), ev(GMT_EV_ALLOC, 1, 10, 3), ev(GMT_EV_ALLOC, 2, 10, 4)};
  std::vector<gmt_event_t> b = {ev(GMT_EV_MARKER, 9, 0, 0), ev(GMT_EV_ALLOC, 1, 20, 1), ev(GMT_EV_ALLOC, 1, 20, 2),
                                ev(GMT_EV_ALLOC, 1, 20, 5), ev(GMT_EV_MARKER, 9, 1, 0), ev(GMT_EV_ALLOC, 1, 20, 3),
                                ev(GMT_EV_ALLOC, 2, 20, 4)};
  pred_rec_t ra, rb;
  gm_err_t err{};
  ASSERT_EQ(pred_rec_from_events(&ra, a.data(), a.size(), 1, &err), GM_OK);
  ASSERT_EQ(pred_rec_from_events(&rb, b.data(), b.size(), 2, &err), GM_OK);
  std::vector<int64_t> m(ra.n_alloc);
  uint64_t unaligned = 9;
  ASSERT_EQ(pred_align(&ra, &rb, m.data(), 100, &unaligned, &err), GM_OK);
  EXPECT_EQ(unaligned, 0u);
  EXPECT_EQ(m[2], 3);  // step 1's first allocation: b's fourth
  EXPECT_EQ(m[3], 4);
  pred_rec_free(&ra);
  pred_rec_free(&rb);
}

// ---- whole predictions --------------------------------------------------------------------

TEST(Predict, SynthBatchPairPredictsTheRealRunEventForEvent) {
  for (int callsites = 0; callsites < 2; callsites++) {
    SCOPED_TRACE(callsites ? "with callsites" : "without callsites");
    std::string a = Synth(8, 60000, callsites), b = Synth(16, 60000, callsites), real = Synth(32, 60000, callsites);
    Outcome r = Predict({{a, 8}, {b, 16}}, 32);
    ASSERT_EQ(r.st, GM_OK) << r.err.msg;
    ASSERT_FALSE(r.res.refused) << r.res.reason;
    EXPECT_DOUBLE_EQ(r.res.confidence, 1.0);
    EXPECT_EQ(r.res.reference, 1u);
    auto p = KindsAndSizes(r.out), t = KindsAndSizes(real);
    ASSERT_EQ(p.size(), t.size());
    size_t wrong = 0;
    for (size_t i = 0; i < p.size(); i++) wrong += p[i] != t[i];
    EXPECT_EQ(wrong, 0u);
    EXPECT_EQ(HeaderKv(r.out, "predicted.at"), "32");
    EXPECT_EQ(HeaderKv(r.out, "predicted.inputs"), a + "@8 " + b + "@16");
    EXPECT_EQ(HeaderKv(r.out, "predicted.confidence"), "1.0000");
  }
}

TEST(Predict, AffineCsvFromTwoAndThree) {
  std::string a4 = Csv("affine4"), a8 = Csv("affine8"), a16 = Csv("affine16"), a32 = Csv("affine32");
  for (auto in : {std::vector<std::pair<std::string, double>>{{a8, 8}, {a16, 16}},
                  std::vector<std::pair<std::string, double>>{{a4, 4}, {a8, 8}, {a16, 16}}}) {
    Outcome r = Predict(in, 32);
    ASSERT_EQ(r.st, GM_OK) << r.err.msg;
    ASSERT_FALSE(r.res.refused) << r.res.reason;
    EXPECT_FALSE(r.res.quadratic);
    std::vector<std::string> ps, ts;
    EXPECT_EQ(KindsAndSizes(r.out, &ps), KindsAndSizes(a32, &ts));
    EXPECT_EQ(ps, ts);
  }
}

TEST(Predict, APureSquareFromTwoRecordings) {
  std::string q8 = Csv("quad8"), q16 = Csv("quad16"), q32 = Csv("quad32");
  Outcome two = Predict({{q8, 8}, {q16, 16}}, 32);
  ASSERT_EQ(two.st, GM_OK) << two.err.msg;
  ASSERT_FALSE(two.res.refused) << two.res.reason;
  EXPECT_TRUE(two.res.quadratic);
  EXPECT_EQ(KindsAndSizes(two.out), KindsAndSizes(q32));
}

TEST(Predict, OtherQuadraticSizesNeedThreeRecordings) {
  std::string q4 = Csv("parab4"), q8 = Csv("parab8"), q16 = Csv("parab16"), q32 = Csv("parab32");
  Outcome two = Predict({{q8, 8}, {q16, 16}}, 32);
  ASSERT_EQ(two.st, GM_OK) << two.err.msg;
  EXPECT_TRUE(two.res.refused);
  EXPECT_NE(std::string(two.res.reason).find("follow no affine function"), std::string::npos) << two.res.reason;
  EXPECT_NE(std::string(two.res.advice).find("record once more at 24"), std::string::npos) << two.res.advice;
  EXPECT_FALSE(Exists(two.out));
  Outcome three = Predict({{q4, 4}, {q8, 8}, {q16, 16}}, 32);
  ASSERT_EQ(three.st, GM_OK) << three.err.msg;
  ASSERT_FALSE(three.res.refused) << three.res.reason;
  EXPECT_TRUE(three.res.quadratic);
  EXPECT_EQ(KindsAndSizes(three.out), KindsAndSizes(q32));
  EXPECT_EQ(HeaderKv(three.out, "predicted.fit"), "quadratic");
}

TEST(Predict, AllocationPresentOnlyAtLargerValuesIsCarried) {
  std::string e8 = Csv("extra8"), e16 = Csv("extra16"), e32 = Csv("extra32");
  // the workspace exists from 12 up: at the default threshold the recordings cannot tell its
  // size at 32, and say which recording to make instead of the one at 8
  Outcome r = Predict({{e8, 8}, {e16, 16}}, 32);
  ASSERT_EQ(r.st, GM_OK) << r.err.msg;
  ASSERT_TRUE(r.res.refused);
  EXPECT_NE(std::string(r.res.reason).find("did not make at 8"), std::string::npos) << r.res.reason;
  EXPECT_NE(std::string(r.res.advice).find(e16 + "@16 NEW.zst@24"), std::string::npos) << r.res.advice;
  EXPECT_EQ(std::string(r.res.advice).find(e8), std::string::npos) << r.res.advice;
  // accepted at a lower threshold: carried (present at 16, so at 32), everything else exact
  Outcome low = Predict({{e8, 8}, {e16, 16}}, 32, 0.5);
  ASSERT_EQ(low.st, GM_OK) << low.err.msg;
  ASSERT_FALSE(low.res.refused);
  EXPECT_EQ(low.res.carried, 3u);  // one per step
  EXPECT_LT(low.res.confidence, 0.95);
  EXPECT_GT(low.res.confidence, 0.5);
  std::vector<std::string> ps, ts;
  auto p = KindsAndSizes(low.out, &ps), t = KindsAndSizes(e32, &ts);
  ASSERT_EQ(p.size(), t.size());
  EXPECT_EQ(ps, ts);
  for (size_t i = 0; i < p.size(); i++) {
    if (ps[i] == "model.py:30:workspace") {  // carried at its size at 16; freed right after
      EXPECT_EQ(p[i].second, 16u * 500000);
      i++;
      continue;
    }
    EXPECT_EQ(p[i], t[i]) << i;
  }
}

// A job whose truth is known, written as a CSV trace: 4 weights of 1 MiB, then per step a
// transient buffer (allocated and freed before the activations) of ws bytes, then 8
// activations of 100000 * b bytes live together (the peak of requested bytes). extra: a small
// transient workspace more per step (an allocation the job makes only at some values).
std::string Job(unsigned b, uint64_t ws, bool extra = false) {
  std::string in = Tmp("job" + std::to_string(b) + ".csv"), out = Tmp("job" + std::to_string(b) + ".zst");
  FILE *f = fopen(in.c_str(), "w");
  EXPECT_NE(f, nullptr);
  if (!f) return out;
  fprintf(f, "# gpumem trace, text form 1\n#capture_mode=torch\n#gpu_name=H100\n#gpu_total_mem=85899345920\n"
             "#command_line=python job.py --batch=%u\nts_ns,kind,device,stream,addr,size,mem_kind,callsite\n"
             "#string.1=model.py:1:weight\n#string.2=model.py:2:buffer\n#string.3=model.py:3:act\n"
             "#string.4=model.py:4:extra\n", b);
  uint64_t ts = 1000, addr = 0x10000000;
  auto ev = [&](const char *kind, uint64_t a, uint64_t size, int cs) {
    fprintf(f, "%llu,%s,0,0,0x%llx,%llu,device,%d\n", (unsigned long long)ts, kind, (unsigned long long)a,
            (unsigned long long)size, cs);
    ts += 1000;
  };
  for (int i = 0; i < 4; i++, addr += 0x10000000) ev("alloc", addr, 1 << 20, 1);
  for (int step = 0; step < 2; step++) {
    ev("alloc", addr, ws, 2);
    ev("free", addr, ws, 2);
    if (extra) {
      ev("alloc", addr, 4096, 4);
      ev("free", addr, 4096, 4);
    }
    uint64_t a0 = addr + 0x10000000;
    for (int i = 0; i < 8; i++) ev("alloc", a0 + (uint64_t)i * 0x10000000, 100000ull * b, 3);
    for (int i = 0; i < 8; i++) ev("free", a0 + (uint64_t)i * 0x10000000, 100000ull * b, 3);
  }
  fclose(f);
  FILE *g = fopen(in.c_str(), "rb");
  gm_err_t err{};
  EXPECT_EQ(gmt_csv_import(g, in.c_str(), out.c_str(), nullptr, &err), GM_OK) << err.msg;
  fclose(g);
  return out;
}

TEST(PredFit, AGrowingSizeWithALargeFixedPartIsNoTensor) {
  // seen on an H100: a backward buffer of 48, 96, 132 MiB at batch 4, 8, 16
  pred_fit_t f;
  double v2[] = {8, 16};
  uint64_t two[] = {96ull << 20, 132ull << 20};
  pred_fit_points(v2, two, 2, 512, 32, &f);
  EXPECT_EQ(f.degree, 1);
  EXPECT_FALSE(f.consistent);
  double v3[] = {4, 8, 16};
  uint64_t three[] = {48ull << 20, 96ull << 20, 132ull << 20};
  pred_fit_points(v3, three, 3, 512, 32, &f);
  EXPECT_FALSE(f.consistent);
  // a step-like workspace (a size the library picks): a parabola fits three points exactly,
  // with a fixed part larger than the smallest size
  uint64_t steps[] = {3 << 20, 4 << 20, 8 << 20};
  pred_fit_points(v3, steps, 3, 1, 32, &f);
  EXPECT_EQ(f.degree, 2);
  EXPECT_FALSE(f.consistent);
  // proportional, or with a small fixed part ((S + 1) * k): a tensor
  uint64_t prop[] = {8 * 65536 + 65536, 16 * 65536 + 65536};
  pred_fit_points(v2, prop, 2, 1, 32, &f);
  EXPECT_TRUE(f.consistent);
  // constant (a weight): no growing part, any size
  uint64_t weight[] = {1 << 20, 1 << 20};
  pred_fit_points(v2, weight, 2, 1, 32, &f);
  EXPECT_TRUE(f.consistent);
}

TEST(Predict, AnUncertainBufferOffThePeakIsRefused) {
  // The buffer is freed before the peak of requested bytes: the live-bytes confidence is 100 %
  // either way. Its size follows no tensor's law (3 MiB at 8, 4 MiB at 16): at 32 it is not
  // known. Against a peak of 8 * 3.2 MB + 4 MiB it is more than 1 %: refused, naming it.
  std::string b8 = Job(8, 3 << 20), b16 = Job(16, 4 << 20);
  Outcome r = Predict({{b8, 8}, {b16, 16}}, 32);
  ASSERT_EQ(r.st, GM_OK) << r.err.msg;
  ASSERT_TRUE(r.res.refused);
  EXPECT_EQ(r.res.confidence, 1.0);
  EXPECT_GT(r.res.uncertain_share, 0.01);
  EXPECT_NE(std::string(r.res.reason).find("shape the allocator's segments even when not live at the peak"),
            std::string::npos) << r.res.reason;
  EXPECT_NE(std::string(r.res.reason).find("model.py:2:buffer, 4194304 bytes at 16"), std::string::npos) << r.res.reason;
  EXPECT_NE(std::string(r.res.advice).find("record once more at 24"), std::string::npos) << r.res.advice;
  EXPECT_FALSE(Exists(r.out));
  // the same buffer at 1/32 of the size: under 1 % of the peak, the prediction stands
  std::string s8 = Job(8, 3 << 15), s16 = Job(16, 4 << 15);
  Outcome ok = Predict({{s8, 8}, {s16, 16}}, 32);
  ASSERT_EQ(ok.st, GM_OK) << ok.err.msg;
  ASSERT_FALSE(ok.res.refused) << ok.res.reason;
  EXPECT_GT(ok.res.uncertain_share, 0.0);
  EXPECT_LT(ok.res.uncertain_share, 0.01);
  // a buffer proportional to the batch is certain: nothing uncertain at all
  std::string p8 = Job(8, 8 << 20), p16 = Job(16, 16 << 20);
  Outcome prop = Predict({{p8, 8}, {p16, 16}}, 32);
  ASSERT_EQ(prop.st, GM_OK) << prop.err.msg;
  ASSERT_FALSE(prop.res.refused) << prop.res.reason;
  EXPECT_EQ(prop.res.uncertain_share, 0.0);
  // a lower --min-confidence accepts the uncertain one
  Outcome low = Predict({{b8, 8}, {b16, 16}}, 32, 0.9);
  ASSERT_EQ(low.st, GM_OK) << low.err.msg;
  EXPECT_FALSE(low.res.refused) << low.res.reason;
}

TEST(Predict, AnotherAlgorithmAtTheSmallValueIsRefusedWithTheRecordingToAdd) {
  Outcome r = Predict({{Csv("algo4"), 4}, {Csv("affine8"), 8}}, 16);
  ASSERT_EQ(r.st, GM_OK) << r.err.msg;
  ASSERT_TRUE(r.res.refused);
  EXPECT_NE(std::string(r.res.reason).find("did not make at 4"), std::string::npos) << r.res.reason;
  EXPECT_NE(std::string(r.res.advice).find("record once more at 12"), std::string::npos) << r.res.advice;
  EXPECT_EQ(r.res.suggest, 12);
  EXPECT_FALSE(Exists(r.out));
}

TEST(Predict, WithoutCallsitesAShiftedPairingIsNoticed) {
  // no callsites: an extra allocation at 8 shifts the pairing by order; the sizes then fit no
  // tensor and the prediction is refused rather than silently wrong
  Outcome r = Predict({{Csv("nocsextra8"), 8}, {Csv("nocs16"), 16}}, 32);
  ASSERT_EQ(r.st, GM_OK) << r.err.msg;
  EXPECT_TRUE(r.res.refused);
  Outcome ok = Predict({{Csv("nocs8"), 8}, {Csv("nocs16"), 16}}, 32);
  ASSERT_EQ(ok.st, GM_OK) << ok.err.msg;
  ASSERT_FALSE(ok.res.refused) << ok.res.reason;
  EXPECT_EQ(KindsAndSizes(ok.out), KindsAndSizes(Csv("nocs32")));
}

TEST(Predict, StructuralChangesAreRefused) {
  std::string a8 = Csv("affine8");
  Outcome steps = Predict({{a8, 8}, {Csv("steps16"), 16}}, 32);
  ASSERT_EQ(steps.st, GM_OK) << steps.err.msg;
  ASSERT_TRUE(steps.res.refused);
  EXPECT_NE(std::string(steps.res.reason).find("different steps"), std::string::npos) << steps.res.reason;
  EXPECT_NE(std::string(steps.res.reason).find("3 'step'"), std::string::npos) << steps.res.reason;
  Outcome streams = Predict({{a8, 8}, {Csv("streams16"), 16}}, 32);
  ASSERT_EQ(streams.st, GM_OK);
  ASSERT_TRUE(streams.res.refused);
  EXPECT_NE(std::string(streams.res.reason).find("streams: 1 at 8, 2 at 16"), std::string::npos) << streams.res.reason;
  EXPECT_FALSE(Exists(streams.out));
}

TEST(Predict, BadInputsAreErrorsThatNameThem) {
  std::string a8 = Csv("affine8");
  struct Case {
    std::string other;
    double value;
    const char *says;
  } cases[] = {
      {Csv("job16"), 16, "different jobs"},
      {Csv("setting16"), 16, "different settings: PYTORCH_CUDA_ALLOC_CONF"},
      {Csv("device16"), 16, "different devices"},
      {Csv("oom16"), 16, "ran out of memory"},
      {a8, 8, "both at 8"},
      {Tmp("missing.zst"), 16, "cannot read"},
  };
  for (auto &c : cases) {
    SCOPED_TRACE(c.says);
    Outcome r = Predict({{a8, 8}, {c.other, c.value}}, 32);
    EXPECT_LT(r.st, 0);
    EXPECT_NE(std::string(r.err.msg).find(c.says), std::string::npos) << r.err.msg;
    EXPECT_FALSE(Exists(r.out));
  }
  Outcome one = Predict({{a8, 8}}, 32);
  EXPECT_EQ(one.st, GM_ERR_INVAL);
}

TEST(Predict, ParseInput) {
  char buf[64];
  pred_input_t in;
  gm_err_t err{};
  ASSERT_EQ(pred_parse_input("runs/a@b.zst@12.5", buf, sizeof buf, &in, &err), GM_OK);
  EXPECT_STREQ(in.path, "runs/a@b.zst");
  EXPECT_EQ(in.value, 12.5);
  EXPECT_EQ(pred_parse_input("a.zst", buf, sizeof buf, &in, &err), GM_ERR_INVAL);
  EXPECT_EQ(pred_parse_input("a.zst@", buf, sizeof buf, &in, &err), GM_ERR_INVAL);
  EXPECT_EQ(pred_parse_input("a.zst@-3", buf, sizeof buf, &in, &err), GM_ERR_INVAL);
  EXPECT_EQ(pred_parse_input("a.zst@8x", buf, sizeof buf, &in, &err), GM_ERR_INVAL);
}

// ---- allocations made in another order, paired by their size law (issue 26 item 2) ---------

TEST(Predict, ScratchInAnotherOrderIsPairedByItsSizeLaw) {
  // an autotuner's callsite-less scratch (A B A B A B C C C after the forward) comes as C C C A B
  // A B A B at 16: the alignment pairs one run and leaves the C's unpaired, more than one
  // candidate each; 8 and 32 fix their law (90000 b), 16's sizes are on it: paired by it, and
  // the prediction at 64 is the real trace event for event (in 32's order)
  std::string t8 = Csv("tune8"), r16 = Csv("tunerot16"), t32 = Csv("tune32");
  Outcome r = Predict({{t8, 8}, {r16, 16}, {t32, 32}}, 64);
  ASSERT_EQ(r.st, GM_OK) << r.err.msg;
  ASSERT_FALSE(r.res.refused) << r.res.reason;
  EXPECT_DOUBLE_EQ(r.res.confidence, 1.0);
  EXPECT_EQ(r.res.matched_all, r.res.allocs);
  EXPECT_EQ(KindsAndSizes(r.out), KindsAndSizes(Csv("tune64")));
  // one of 16's C's off the law (100000 b): the group is not paired, they stay unmade at 16
  Outcome off = Predict({{t8, 8}, {Csv("tuneoff16"), 16}, {t32, 32}}, 64);
  ASSERT_EQ(off.st, GM_OK) << off.err.msg;
  EXPECT_TRUE(off.res.refused);
  EXPECT_LT(off.res.matched_all, off.res.allocs);
  EXPECT_NE(std::string(off.res.reason).find("did not make at 16"), std::string::npos) << off.res.reason;
  // from 16 and 32 alone no other recording fixes the law: left as the alignment leaves them
  Outcome two = Predict({{r16, 16}, {t32, 32}}, 64);
  ASSERT_EQ(two.st, GM_OK) << two.err.msg;
  EXPECT_TRUE(two.res.refused);
  EXPECT_GT(two.res.drift_allocs, 0u);
}

}  // namespace

// ---- the model: loaded once, predicted at many targets (gpurec predict --fit) ---------------

TEST(PredModel, ManyTargetsFromOneLoadEqualSeparateRuns) {
  std::string a = Synth(8, 20000, 1), b = Synth(16, 20000, 1), c = Synth(32, 20000, 1);
  pred_input_t in[2] = {{a.c_str(), 8}, {b.c_str(), 16}};
  pred_model_t *m = nullptr;
  pred_result_t res;
  gm_err_t err{};
  ASSERT_EQ(pred_model_open(in, 2, &m, &res, &err), GM_OK) << err.msg;
  ASSERT_FALSE(res.refused);
  // 32, then back to 10 (the reference turns to the recording at 8: re-aligned), then 32 again
  for (double at : {32.0, 10.0, 32.0}) {
    SCOPED_TRACE(at);
    pred_opts_t o{at, -1, "test"};
    ASSERT_EQ(pred_model_at(m, &o, &res, &err), GM_OK) << err.msg;
    ASSERT_FALSE(res.refused) << res.reason;
    EXPECT_EQ(res.reference, at < 12.5 ? 0u : 1u);
    gmt_event_t *ev = nullptr;
    size_t n = 0;
    ASSERT_EQ(pred_model_events(m, &ev, &n, &err), GM_OK) << err.msg;
    Outcome sep = Predict({{a, 8}, {b, 16}}, at);
    ASSERT_EQ(sep.st, GM_OK) << sep.err.msg;
    EXPECT_EQ(sep.res.peak_live, res.peak_live);
    auto want = KindsAndSizes(sep.out);
    ASSERT_EQ(want.size(), n);
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++) wrong += want[i] != std::make_pair((int)ev[i].kind, ev[i].size);
    EXPECT_EQ(wrong, 0u);
    if (at == 32.0) {
      EXPECT_EQ(want, KindsAndSizes(c));  // and the job's own run at 32
    }
    free(ev);
  }
  pred_model_close(m);
}

TEST(PredModel, EventsBeforeAPredictionOrAfterARefusalAreAnError) {
  std::string q8 = Csv("parab8"), q16 = Csv("parab16");
  pred_input_t in[2] = {{q8.c_str(), 8}, {q16.c_str(), 16}};
  pred_model_t *m = nullptr;
  pred_result_t res;
  gm_err_t err{};
  ASSERT_EQ(pred_model_open(in, 2, &m, &res, &err), GM_OK) << err.msg;
  gmt_event_t *ev = nullptr;
  size_t n = 0;
  EXPECT_EQ(pred_model_events(m, &ev, &n, &err), GM_ERR_INVAL);
  pred_opts_t o{32, -1, nullptr};
  ASSERT_EQ(pred_model_at(m, &o, &res, &err), GM_OK) << err.msg;
  EXPECT_TRUE(res.refused); // a parabola (not a pure square) from two recordings
  EXPECT_EQ(pred_model_events(m, &ev, &n, &err), GM_ERR_INVAL);
  pred_model_close(m);
}

TEST(PredModel, ParallelLoadNamesTheFirstBadInputInOrder) {
  std::string a = Csv("affine8");
  pred_input_t in[3] = {{a.c_str(), 8}, {"/nonexistent/one.zst", 16}, {"/nonexistent/two.zst", 32}};
  pred_model_t *m = nullptr;
  pred_result_t res;
  gm_err_t err{};
  EXPECT_LT(pred_model_open(in, 3, &m, &res, &err), 0);
  EXPECT_EQ(m, nullptr);
  EXPECT_NE(std::string(err.msg).find("cannot read '/nonexistent/one.zst'"), std::string::npos) << err.msg;
}

// ---- sizes in the alignment, the per-setting check's inputs, recordings that drift --------------

TEST(PredDiff, SizesKeepIdenticalTokensFromShifting) {
  // a run without callsites (autograd's backward thread): every token equal. b, at twice the
  // value, makes one allocation more (the second); by tokens alone the edit script may drop any
  // one of them, with sizes only the right one
  std::vector<uint64_t> ta(4, 7), tb(5, 7);
  std::vector<uint64_t> sa = {3072, 1 << 20, 4 << 20, 3072}, sb = {3072, 9 << 20, 2 << 20, 8 << 20, 3072};
  std::vector<int64_t> m(4);
  EXPECT_EQ(pred_diff_sized(ta.data(), sa.data(), 4, tb.data(), sb.data(), 5, 2.0, m.data(), 100), 1);
  std::vector<int64_t> want = {0, 2, 3, 4};
  EXPECT_EQ(m, want);
  // a size that follows no law (a workspace: 96 MiB, then 132 MiB at twice the value) between
  // two pairs, as many on each side: paired in order, for the fit to judge
  std::vector<uint64_t> wa = {3072, 96ull << 20, 3072}, wb = {3072, 132ull << 20, 3072};
  std::vector<int64_t> mw(3);
  pred_diff_sized(ta.data(), wa.data(), 3, tb.data(), wb.data(), 3, 2.0, mw.data(), 100);
  std::vector<int64_t> wantw = {0, 1, 2};
  EXPECT_EQ(mw, wantw);
}

TEST(Predict, AnUncertainBufferIsCheckableWithBothEndsOfItsRange) {
  // the buffer of AnUncertainBufferOffThePeakIsRefused: 3 MiB at 8, 4 MiB at 16 (no tensor's
  // law). Refused, but checkable: the trace can be written with it at the ends of its plausible
  // range at 32 (the smallest recorded, 3 MiB; the largest of the recorded sizes scaled with the
  // value: 3 MiB * 32 / 8)
  std::string b8 = Job(8, 3 << 20), b16 = Job(16, 4 << 20);
  pred_input_t in[2] = {{b8.c_str(), 8}, {b16.c_str(), 16}};
  pred_model_t *m = nullptr;
  pred_result_t res;
  gm_err_t err{};
  ASSERT_EQ(pred_model_open(in, 2, &m, &res, &err), GM_OK) << err.msg;
  pred_opts_t o{32, -1, nullptr};
  ASSERT_EQ(pred_model_at(m, &o, &res, &err), GM_OK) << err.msg;
  ASSERT_TRUE(res.refused);
  EXPECT_TRUE(res.checkable);
  EXPECT_EQ(res.drift_allocs, 0u);
  std::string lo = Tmp("lo.zst"), hi = Tmp("hi.zst"), fit = Tmp("fit.zst");
  ASSERT_EQ(pred_model_write_variant(m, &o, PRED_SIZES_LOW, lo.c_str(), &res, &err), GM_OK) << err.msg;
  ASSERT_EQ(pred_model_write_variant(m, &o, PRED_SIZES_HIGH, hi.c_str(), &res, &err), GM_OK) << err.msg;
  ASSERT_EQ(pred_model_write(m, &o, fit.c_str(), &res, &err), GM_OK) << err.msg;
  std::vector<std::string> sites;
  auto l = KindsAndSizes(lo, &sites), h = KindsAndSizes(hi), f = KindsAndSizes(fit);
  ASSERT_EQ(l.size(), h.size());
  ASSERT_EQ(l.size(), f.size());
  int buffers = 0;
  for (size_t i = 0; i < l.size(); i++) {
    if (sites[i] == "model.py:2:buffer") {
      buffers++;
      EXPECT_EQ(l[i].second, 3u << 20) << i;
      EXPECT_EQ(h[i].second, 12u << 20) << i;
      EXPECT_GE(f[i].second, l[i].second);
      EXPECT_LE(f[i].second, h[i].second);
    } else {
      EXPECT_EQ(l[i], f[i]) << i;  // every certain size as fitted
      EXPECT_EQ(h[i], f[i]) << i;
    }
  }
  EXPECT_EQ(buffers, 4);  // alloc and free, two steps
  EXPECT_EQ(HeaderKv(lo, "predicted.sizes"), "low end");
  EXPECT_EQ(HeaderKv(fit, "predicted.sizes"), "(absent)");
  // the library's own run writes nothing on this refusal (only gpurec's check may answer)
  Outcome r = Predict({{b8, 8}, {b16, 16}}, 32);
  EXPECT_TRUE(r.res.refused);
  EXPECT_FALSE(Exists(r.out));
  pred_model_close(m);
}

TEST(Predict, NearestRecordingsThatAllocateDifferentlyAreRefused) {
  // extra8 lacks the workspace that extra16 and extra32 make (one per step): from 16 and 32 the
  // prediction at 64 stands on recordings that agree; from 8 and 16 they do not: refused, named
  std::string e8 = Csv("extra8"), e16 = Csv("extra16"), e32 = Csv("extra32");
  Outcome agree = Predict({{e16, 16}, {e32, 32}}, 64);
  ASSERT_EQ(agree.st, GM_OK) << agree.err.msg;
  EXPECT_EQ(agree.res.drift_allocs, 0u);
  Outcome drift = Predict({{e8, 8}, {e16, 16}}, 32, 0.5);  // accepted for want of confidence ...
  ASSERT_EQ(drift.st, GM_OK) << drift.err.msg;
  EXPECT_FALSE(drift.res.refused);  // ... and below the default, the drift is not a refusal
  EXPECT_EQ(drift.res.drift_allocs, 3u);
  Outcome three = Predict({{e8, 8}, {e16, 16}, {e32, 32}}, 64);  // the two nearest agree
  ASSERT_EQ(three.st, GM_OK) << three.err.msg;
  EXPECT_EQ(three.res.drift_allocs, 0u);
}

// ---- allocations the job begins to make between the recordings (issue 26 item 2) ----------

TEST(Predict, ABufferMadeFromSomeValueOnIsSizedThroughTheRecordingsThatMakeIt) {
  // late8 lacks the buffer held through the backward (300000 b bytes from b = 12 on); 16 and 32
  // make it: the job makes it towards 64, and its law through 16 and 32 gives the real trace
  std::string l8 = Csv("late8"), l16 = Csv("late16"), l32 = Csv("late32");
  Outcome r = Predict({{l8, 8}, {l16, 16}, {l32, 32}}, 64);
  ASSERT_EQ(r.st, GM_OK) << r.err.msg;
  ASSERT_FALSE(r.res.refused) << r.res.reason;
  EXPECT_DOUBLE_EQ(r.res.confidence, 1.0);
  EXPECT_EQ(KindsAndSizes(r.out), KindsAndSizes(Csv("late64")));
}

TEST(Predict, ABufferLackingNearerTheTargetStaysUncertain) {
  // at 14, 8 (which lacks it) is nearer than 32: whether the job makes it at 14 is not known
  std::string l8 = Csv("late8"), l16 = Csv("late16"), l32 = Csv("late32");
  Outcome between = Predict({{l8, 8}, {l16, 16}, {l32, 32}}, 14);
  ASSERT_EQ(between.st, GM_OK) << between.err.msg;
  EXPECT_LT(between.res.confidence, 1.0);
  EXPECT_TRUE(between.res.refused);
  // and made in one recording only, its size has no law: refused, as the recordings drift
  Outcome two = Predict({{l8, 8}, {l16, 16}}, 32);
  ASSERT_EQ(two.st, GM_OK) << two.err.msg;
  EXPECT_TRUE(two.res.refused);
  EXPECT_LT(two.res.confidence, 1.0);
}

TEST(Predict, ADriftSpannedByAThirdRecordingIsAnUncertainSize) {
  // ws16 makes a small workspace (5000 b bytes) that ws8 and ws4 do not: 8 and 16 drift; 4 makes
  // every allocation 8 and 16 share, so their sizes are fitted through three points and the
  // workspace is an uncertain size (here under 1 % of the peak: answered)
  std::string w4 = Csv("ws4"), w8 = Csv("ws8"), w16 = Csv("ws16");
  Outcome three = Predict({{w4, 4}, {w8, 8}, {w16, 16}}, 32);
  ASSERT_EQ(three.st, GM_OK) << three.err.msg;
  EXPECT_EQ(three.res.drift_allocs, 3u);
  EXPECT_TRUE(three.res.drift_spanned);
  EXPECT_FALSE(three.res.refused) << three.res.reason;
  EXPECT_GT(three.res.uncertain_max, 0u);  // the workspace, uncertain where it is live
  // from 8 and 16 alone the shared sizes' laws are not checked across the change: refused, and
  // checkable with every shared size off the peak between its size at 16 and its fitted one
  // (ASharedSizeOffThePeakMayStopAtTheReference)
  Outcome two = Predict({{w8, 8}, {w16, 16}}, 32);
  ASSERT_EQ(two.st, GM_OK) << two.err.msg;
  EXPECT_FALSE(two.res.drift_spanned);
  ASSERT_TRUE(two.res.refused);
  EXPECT_TRUE(two.res.checkable);
  EXPECT_FALSE(Exists(two.out));
  EXPECT_NE(std::string(two.res.reason).find("do not make the same allocations"), std::string::npos) << two.res.reason;
  // nor when the third does not make what 8 and 16 share (its scores come from another callsite)
  Outcome other = Predict({{Csv("algo4"), 4}, {w8, 8}, {w16, 16}}, 32);
  ASSERT_EQ(other.st, GM_OK) << other.err.msg;
  EXPECT_FALSE(other.res.drift_spanned);
  ASSERT_TRUE(other.res.refused);
  EXPECT_NE(std::string(other.res.reason).find("do not make the same allocations"), std::string::npos)
      << other.res.reason;
}

TEST(Predict, ASharedSizeOffThePeakMayStopAtTheReference) {
  // ws8 and ws16 drift (the workspace only 16 makes): a law through the two may bend past 16, so
  // the temporary (6400 b bytes, freed at once, never live at the peak) ranges from its size at 16
  // to its fitted size at 32; the activations, the scores and their gradients (live at the peak,
  // or of one size with what is) stay as fitted; the workspace keeps its own range
  std::string w8 = Csv("ws8"), w16 = Csv("ws16");
  pred_input_t in[2] = {{w8.c_str(), 8}, {w16.c_str(), 16}};
  pred_model_t *m = nullptr;
  pred_result_t res;
  gm_err_t err{};
  ASSERT_EQ(pred_model_open(in, 2, &m, &res, &err), GM_OK) << err.msg;
  pred_opts_t o{32, -1, nullptr};
  ASSERT_EQ(pred_model_at(m, &o, &res, &err), GM_OK) << err.msg;
  ASSERT_TRUE(res.refused);
  ASSERT_TRUE(res.checkable);
  EXPECT_EQ(res.bent, 12u);  // 4 temporaries a step, 3 steps
  EXPECT_NE(std::string(res.reason).find("may stop growing at their size at 16"), std::string::npos) << res.reason;
  std::string lo = Tmp("lo.zst"), hi = Tmp("hi.zst"), fit = Tmp("fit.zst");
  ASSERT_EQ(pred_model_write_variant(m, &o, PRED_SIZES_LOW, lo.c_str(), &res, &err), GM_OK) << err.msg;
  ASSERT_EQ(pred_model_write_variant(m, &o, PRED_SIZES_HIGH, hi.c_str(), &res, &err), GM_OK) << err.msg;
  ASSERT_EQ(pred_model_write(m, &o, fit.c_str(), &res, &err), GM_OK) << err.msg;
  std::vector<std::string> sites;
  auto l = KindsAndSizes(lo, &sites), h = KindsAndSizes(hi), f = KindsAndSizes(fit);
  ASSERT_EQ(l.size(), f.size());
  ASSERT_EQ(h.size(), f.size());
  int tmps = 0, workspaces = 0;
  for (size_t i = 0; i < l.size(); i++) {
    if (l[i].first != GMT_EV_ALLOC) continue;
    if (sites[i] == "model.py:22:tmp") {
      tmps++;
      EXPECT_EQ(l[i].second, 6400u * 16) << i;
      EXPECT_EQ(f[i].second, 6400u * 32) << i;
      EXPECT_EQ(h[i].second, 6400u * 32) << i;
    } else if (sites[i] == "model.py:30:workspace") {
      workspaces++;
      EXPECT_LE(l[i].second, f[i].second) << i;
      EXPECT_GT(h[i].second, l[i].second) << i;
    } else {
      EXPECT_EQ(l[i], f[i]) << i << " " << sites[i];
      EXPECT_EQ(h[i], f[i]) << i << " " << sites[i];
    }
  }
  EXPECT_EQ(tmps, 12);
  EXPECT_EQ(workspaces, 3);
  pred_model_close(m);
  // a third recording spans the drift: every shared size is fitted through three points, none bent
  Outcome three = Predict({{Csv("ws4"), 4}, {w8, 8}, {w16, 16}}, 32);
  ASSERT_EQ(three.st, GM_OK) << three.err.msg;
  EXPECT_EQ(three.res.bent, 0u);
  // and two recordings that make the same allocations are a straight answer
  Outcome agree = Predict({{Csv("extra16"), 16}, {Csv("extra32"), 32}}, 64);
  ASSERT_EQ(agree.st, GM_OK) << agree.err.msg;
  EXPECT_FALSE(agree.res.refused) << agree.res.reason;
  EXPECT_EQ(agree.res.bent, 0u);
}

// ---- laws the recordings fix beyond a tensor's (issue 26: refuse only what moves the answer) -

TEST(PredFit, ThreePointsOnALineWithAFixedPartAreAKernelsLaw) {
  // XLA's autotuner scratch on the JAX job: 32, 48, 80 MiB at batch 2048, 4096, 8192 (16 MiB
  // plus 8 KiB a row). Through two points a fixed part that large is no tensor's law; three on
  // one line are the kernel's own rule
  double v2[] = {4096, 8192}, v3[] = {2048, 4096, 8192};
  uint64_t two[] = {48ull << 20, 80ull << 20}, three[] = {32ull << 20, 48ull << 20, 80ull << 20};
  pred_fit_t f;
  pred_fit_points(v2, two, 2, 512, 16384, &f);
  EXPECT_FALSE(f.consistent);
  pred_fit_points(v3, three, 3, 512, 16384, &f);
  EXPECT_EQ(f.degree, 1);
  EXPECT_TRUE(f.consistent);
  EXPECT_EQ(pred_fit_eval(&f, 16384, 512), 144ull << 20);
  // off the line by more than a granule: a parabola, still no tensor's (the bent buffer of
  // AGrowingSizeWithALargeFixedPartIsNoTensor stays inconsistent)
  uint64_t bent[] = {32ull << 20, (48ull << 20) + 4096, 80ull << 20};
  pred_fit_points(v3, bent, 3, 512, 16384, &f);
  EXPECT_EQ(f.degree, 2);
  EXPECT_FALSE(f.consistent);
}

TEST(Predict, AnOutlierAtTheFarthestRecordingLeavesTheNearerLaw) {
  // the buffer is 300000 b bytes at 16 and 32, but 500000 at 8 (the job planned it otherwise
  // there: no tensor's law joins 8 and 16). Through all three no law; through 16 and 32 the
  // tensor's: the prediction at 64 is the job at 64, event for event, nothing uncertain
  std::string j8 = Job(8, 500000), j16 = Job(16, 300000ull * 16), j32 = Job(32, 300000ull * 32);
  Outcome r = Predict({{j8, 8}, {j16, 16}, {j32, 32}}, 64);
  ASSERT_EQ(r.st, GM_OK) << r.err.msg;
  ASSERT_FALSE(r.res.refused) << r.res.reason;
  EXPECT_EQ(r.res.near_law, 2u);  // the buffer, at each of two steps
  EXPECT_EQ(r.res.uncertain_max, 0u);
  EXPECT_EQ(KindsAndSizes(r.out), KindsAndSizes(Job(64, 300000ull * 64)));
}

TEST(Predict, ABendBetweenTheNearerRecordingsStaysUncertain) {
  // the GPT-2-like job's backward buffer, scaled: proportional from 8 to 16 (2.4, 4.8 MB), then
  // 8.85 MB at 32 (a parabola through the three turns down before 128), where a line through 16
  // and 32 is a tensor's (a small fixed part) that overshoots. A law joins the farthest
  // recording to the next: the change may lie between the nearer two, so the buffer stays an
  // uncertain size, refused above 1 % of the peak
  std::string j8 = Job(8, 2400000), j16 = Job(16, 4800000), j32 = Job(32, 8850000);
  Outcome r = Predict({{j8, 8}, {j16, 16}, {j32, 32}}, 128);
  ASSERT_EQ(r.st, GM_OK) << r.err.msg;
  EXPECT_EQ(r.res.near_law, 0u);
  EXPECT_TRUE(r.res.refused);
  EXPECT_GT(r.res.uncertain_max, 0u);
}

TEST(Predict, NoNearerLawWhereTheNearestTwoAllocateDifferently) {
  // the outlier of AnOutlierAtTheFarthestRecordingLeavesTheNearerLaw, but at 32 the job makes
  // a workspace more than at 16: it changes how it allocates between the nearest two, where a
  // law bent between them would look straight. The buffer stays an uncertain size (refused
  // above 1 % of the peak); the drift itself is spanned by 8 (whose buffer, 560000 bytes, is
  // within an eighth of 32's over the square of the ratio: the alignment pairs it)
  std::string j8 = Job(8, 560000), j16 = Job(16, 300000ull * 16), j32 = Job(32, 300000ull * 32, true);
  Outcome r = Predict({{j8, 8}, {j16, 16}, {j32, 32}}, 64);
  ASSERT_EQ(r.st, GM_OK) << r.err.msg;
  EXPECT_GT(r.res.drift_allocs, 0u);
  EXPECT_TRUE(r.res.drift_spanned);
  EXPECT_EQ(r.res.near_law, 0u);
  EXPECT_TRUE(r.res.refused);
}
