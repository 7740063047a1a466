// The fidelity harness: every snapshot of traces/snapshots (MANIFEST.tsv) is imported, replayed
// with the pytorch policy under its own allocator settings, and must give the snapshot's exact
// segment sequence (sizes, order, the request each happened in) and its exact peak reserved.
// The first divergence is printed in detail. Also: the harness itself on hand-made traces.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <cstdlib>
#include <string>
#include <vector>

#include "formats/gmt_testutil.h"
#include "formats/gmt.h"
#include "recorder/snapshot/snap_import.h"
#include "tests/fidelity/fid_manifest.h"
#include "tests/fidelity/fid_addresses.h"
#include "tests/fidelity/fid_replay.h"

using gmt_test::Ev;

namespace {

std::string Tmp(const std::string &name) {
  const char *d = getenv("TEST_TMPDIR");
  return std::string(d ? d : "/tmp") + "/" + name;
}

std::string CorpusDir() {
  const char *s = getenv("TEST_SRCDIR");
  return std::string(s ? s : ".") + "/gpumem/traces/snapshots/";
}


std::string WriteTrace(const char *name, const std::vector<gmt_event_t> &evs, const char *conf) {
  std::string p = Tmp(name);
  gmt_header_t h;
  gmt_header_init(&h);
  gm_err_t err{};
  h.capture_mode = GMT_CAPTURE_TORCH;
  EXPECT_EQ(gmt_header_kv_set(&h, "torch.alloc_conf", conf, &err), GM_OK);
  gmt_writer_t *w = nullptr;
  EXPECT_EQ(gmt_writer_open(&w, p.c_str(), &h, nullptr, &err), GM_OK) << err.msg;
  for (auto &e : evs) EXPECT_EQ(gmt_writer_append(w, &e, &err), GM_OK);
  EXPECT_EQ(gmt_writer_close(w, &err), GM_OK);
  gmt_header_free(&h);
  return p;
}

// torch: a 3 MiB request takes a 20 MiB segment; a 512 B one a 2 MiB small segment; a 30 MiB
// one a 30 MiB segment; after its free, a 25 MiB request splits the cached 30 MiB block.
TEST(FidelityHarness, AgreesWithACorrectOracle) {
  const uint64_t M = 1 << 20;
  std::string p = WriteTrace("ok.zst",
                             {Ev(GMT_EV_SEGMENT_ALLOC, 0, 1 << 30, 20 * M, 0), Ev(GMT_EV_ALLOC, 0, 1 << 30, 3 * M, 0),
                              Ev(GMT_EV_SEGMENT_ALLOC, 0, 2u << 30, 2 * M, 0), Ev(GMT_EV_ALLOC, 0, 2u << 30, 512, 0),
                              Ev(GMT_EV_SEGMENT_ALLOC, 0, 3u << 30, 30 * M, 0), Ev(GMT_EV_ALLOC, 0, 3u << 30, 30 * M, 0),
                              Ev(GMT_EV_FREE_REQUESTED, 0, 3u << 30, 30 * M, 0), Ev(GMT_EV_FREE, 0, 3u << 30, 30 * M, 0),
                              Ev(GMT_EV_ALLOC, 0, 3u << 30, 25 * M, 0)},
                             "");
  fid_result_t r;
  gm_err_t err{};
  ASSERT_EQ(fid_replay(p.c_str(), nullptr, nullptr, 80ULL << 30, FID_ADDR_ORACLE, &r, &err), GM_OK) << err.msg;
  EXPECT_EQ(r.diverge, -1) << r.detail;
  EXPECT_EQ(r.requests, 5u);
  EXPECT_EQ(r.expected.n, 3u);
  EXPECT_EQ(r.expected_peak, 52 * M);
  EXPECT_EQ(r.actual_peak, 52 * M);
  fid_result_free(&r);
}

TEST(FidelityHarness, ReportsTheFirstDivergenceWithItsRequest) {
  const uint64_t M = 1 << 20;
  std::string p = WriteTrace("bad.zst",
                             {Ev(GMT_EV_SEGMENT_ALLOC, 0, 1 << 30, 20 * M, 0), Ev(GMT_EV_ALLOC, 0, 1 << 30, 3 * M, 0),
                              Ev(GMT_EV_SEGMENT_ALLOC, 0, 2u << 30, 4 * M, 0), Ev(GMT_EV_ALLOC, 0, 2u << 30, 512, 7)},
                             "");
  fid_result_t r;
  gm_err_t err{};
  ASSERT_EQ(fid_replay(p.c_str(), nullptr, nullptr, 80ULL << 30, FID_ADDR_ORACLE, &r, &err), GM_OK) << err.msg;
  EXPECT_EQ(r.diverge, 1);
  std::string d = r.detail;
  EXPECT_NE(d.find("snapshot segment_alloc 4194304 B"), std::string::npos) << d;
  EXPECT_NE(d.find("replay segment_alloc 2097152 B"), std::string::npos) << d;
  EXPECT_NE(d.find("request #1 is alloc of 512 B on stream 7"), std::string::npos) << d;
  fid_result_free(&r);
  // The settings come from the trace: with expandable segments the same requests map pages.
  std::string q = WriteTrace("exp.zst", {Ev(GMT_EV_ALLOC, 0, 1 << 30, 3 * M, 0)}, "expandable_segments:True");
  ASSERT_EQ(fid_replay(q.c_str(), nullptr, nullptr, 80ULL << 30, FID_ADDR_ORACLE, &r, &err), GM_OK) << err.msg;
  EXPECT_STREQ(r.conf, "expandable_segments:True");
  ASSERT_EQ(r.actual.n, 1u);
  EXPECT_EQ(r.actual.v[0].op, FID_MAP);
  EXPECT_EQ(r.diverge, 0);  // the trace claims no segment event
  fid_result_free(&r);
}

std::vector<fid_entry_t> Manifest() {
  fid_entry_t *v = nullptr;
  size_t n = 0;
  gm_err_t err{};
  std::vector<fid_entry_t> out;
  if (fid_manifest_read((CorpusDir() + "MANIFEST.tsv").c_str(), &v, &n, &err) == GM_OK)
    out.assign(v, v + n);
  free(v);
  return out;
}

}  // namespace

// Readable test names and parameters in failures (instead of a byte dump).
void PrintTo(const fid_entry_t &e, std::ostream *os) { *os << e.file; }

namespace {

class Corpus : public ::testing::TestWithParam<fid_entry_t> {};

TEST_P(Corpus, ReplayMatchesTheRealAllocatorSegmentForSegment) {
  const fid_entry_t &e = GetParam();
  std::string in = CorpusDir() + e.file, out = Tmp(std::string(e.file) + ".zst");
  gm_err_t err{};
  snap_import_stats_t st{};
  ASSERT_EQ(snap_import_file(in.c_str(), out.c_str(), nullptr, &st, &err), GM_OK) << err.msg;
  std::string extra = e.fraction[0] ? std::string("per_process_memory_fraction:") + e.fraction : "";
  fid_result_t r;
  ASSERT_EQ(fid_replay(out.c_str(), nullptr, extra.empty() ? nullptr : extra.c_str(), e.total_memory,
                       FID_ADDR_ORACLE, &r, &err),
            GM_OK)
      << err.msg;
  // The oracle is consistent with what torch reported for the run.
  EXPECT_EQ(r.expected_peak, e.max_reserved) << "snapshot sum vs torch.cuda.max_memory_reserved";
  EXPECT_EQ(r.diverge, -1) << e.file << " under pytorch:" << r.conf << ": " << r.detail << "; "
                           << (r.place_diverge >= 0 ? r.place_detail : "");
  EXPECT_EQ(r.actual_peak, r.expected_peak) << e.file << " under pytorch:" << r.conf;
  EXPECT_EQ(r.ooms, 0u);
  // Block for block: every tensor lands in the same segment at the same offset as in the real run.
  EXPECT_EQ(r.place_diverge, -1) << r.place_detail;
  fid_result_free(&r);
}

std::string Name(const ::testing::TestParamInfo<fid_entry_t> &i) {
  std::string s = std::string(i.param.workload) + "_" + i.param.setting;
  for (char &c : s)
    if (!isalnum((unsigned char)c)) c = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Snapshots, Corpus, ::testing::ValuesIn(Manifest()), Name);

TEST(FidelityCorpus, HasTheSixKindsOfTheIssue) {
  std::vector<std::string> want = {"train_amp.default.pickle", "infer_varlen.default.pickle",
                                   "train_ckpt.default.pickle", "two_streams.default.pickle",
                                   "train_amp.expandable.pickle", "infer_varlen.maxsplit64.pickle"};
  auto m = Manifest();
  for (auto &w : want) {
    bool found = false;
    for (auto &e : m) found |= w == e.file;
    EXPECT_TRUE(found) << w;
  }
}

}  // namespace

namespace {

// The cross-policy table (traces/snapshots/PREDICTION.md): the default-allocator snapshot of each
// workload, replayed under every other setting of the corpus with the driver model's addresses (a
// prediction cannot know the real ones: replay/engine/va_model.h), predicts torch's max_memory_reserved
// of the real run under that setting exactly in all rows but one (train_amp / gc06, an address
// tie the model orders wrongly), and that one within 1.2 % (bump addresses: 28 exact, 1.13 %).
TEST(Prediction, DefaultTracePredictsEverySettingExactButOne) {
  auto m = Manifest();
  ASSERT_FALSE(m.empty());
  int rows = 0, exact = 0;
  for (auto &d : m) {
    if (std::string(d.setting) != "default") continue;
    std::string trace = Tmp(std::string("pred-") + d.file + ".zst");
    gm_err_t err{};
    ASSERT_EQ(snap_import_file((CorpusDir() + d.file).c_str(), trace.c_str(), nullptr, nullptr, &err),
              GM_OK)
        << err.msg;
    for (auto &e : m) {
      if (std::string(e.workload) != d.workload) continue;
      std::string extra = e.fraction[0] ? std::string("per_process_memory_fraction:") + e.fraction : "";
      fid_result_t r;
      ASSERT_EQ(fid_replay(trace.c_str(), e.alloc_conf, extra.empty() ? nullptr : extra.c_str(),
                           e.total_memory, FID_ADDR_DRIVER, &r, &err),
                GM_OK)
          << err.msg;
      double rel = ((double)r.actual_peak - (double)e.max_reserved) / (double)e.max_reserved;
      EXPECT_LE(std::abs(rel), 0.012) << e.workload << " " << e.setting << ": predicted "
                                      << r.actual_peak << ", real " << e.max_reserved;
      exact += r.actual_peak == e.max_reserved;
      rows++;
      fid_result_free(&r);
    }
  }
  EXPECT_GE(rows, 30);
  EXPECT_GE(exact, rows - 1);
}

// Each snapshot replayed under its own settings with the simulator's own (model) addresses, as a
// prediction has them: the segment sequence is the real one in 29 of the 30 (bump addresses: 27).
TEST(Prediction, OwnSettingsWithModelAddressesMatchTheRealSegments) {
  int n = 0, same = 0;
  std::string bad;
  for (auto &e : Manifest()) {
    std::string out = Tmp(std::string("own-") + e.file + ".zst");
    gm_err_t err{};
    ASSERT_EQ(snap_import_file((CorpusDir() + e.file).c_str(), out.c_str(), nullptr, nullptr, &err),
              GM_OK)
        << err.msg;
    std::string extra = e.fraction[0] ? std::string("per_process_memory_fraction:") + e.fraction : "";
    fid_result_t r;
    ASSERT_EQ(fid_replay(out.c_str(), nullptr, extra.empty() ? nullptr : extra.c_str(), e.total_memory,
                         FID_ADDR_DRIVER, &r, &err),
              GM_OK)
        << err.msg;
    n++;
    if (r.diverge == -1) same++;
    else bad += std::string(" ") + e.file;
    fid_result_free(&r);
  }
  EXPECT_EQ(n, 30);
  EXPECT_GE(same, 29) << "diverging:" << bad;
}

// How well the address policies order real segments (fid_addresses.h): the driver model puts
// more same-size segment pairs in the real order than the bump pointer, and more segments at the
// real offset from the one before.
TEST(Addresses, DriverModelOrdersRealSegmentsBetterThanBump) {
  fid_addr_stats_t d{}, b{};
  for (auto &e : Manifest()) {
    if (strstr(e.alloc_conf, "expandable_segments:True")) continue;
    std::string out = Tmp(std::string("va-") + e.file + ".zst");
    gm_err_t err{};
    ASSERT_EQ(snap_import_file((CorpusDir() + e.file).c_str(), out.c_str(), nullptr, nullptr, &err),
              GM_OK)
        << err.msg;
    ASSERT_EQ(fid_address_check(out.c_str(), RP_VA_DRIVER, &d, &err), GM_OK) << err.msg;
    ASSERT_EQ(fid_address_check(out.c_str(), RP_VA_BUMP, &b, &err), GM_OK) << err.msg;
  }
  ASSERT_EQ(d.segments, 804u);
  ASSERT_EQ(d.pairs, 2246u);
  EXPECT_GE(d.pairs_same * 100, d.pairs * 66) << d.pairs_same << " of " << d.pairs;
  EXPECT_GT(d.pairs_same, b.pairs_same);
  EXPECT_GT(d.step, b.step);
}

}  // namespace
