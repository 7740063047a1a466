// gmt_coverage_test.cc: the coverage marks (SPEC.md §3.4) round-trip through a header, and the
// verdict folds in the reader's stats; an unmarked header with clean stats is complete.
#include <gtest/gtest.h>

#include <string>

#include "formats/gmt.h"

namespace {

TEST(Coverage, UnmarkedCleanIsComplete) {
  gmt_header_t h;
  gmt_header_init(&h);
  gmt_reader_stats_t st{};
  gmt_coverage_t c;
  gmt_coverage(&h, &st, &c);
  EXPECT_EQ(c.partial, 0);
  char buf[512];
  EXPECT_STREQ(gmt_coverage_text(&c, buf, sizeof buf), "");
  gmt_header_free(&h);
}

TEST(Coverage, MarkRoundTripsAndSaysLowerBound) {
  gmt_header_t h;
  gmt_header_init(&h);
  gmt_coverage_t in{};
  in.partial = 1;
  in.why = GMT_COV_HISTORY_RING | GMT_COV_LATE_START;
  in.has_window = 1;
  in.from_ns = 1500000000;
  in.from_event = 45;
  in.alive_bytes = 8ull << 30;
  in.alive_count = 3;
  in.reserved_bytes = 8ull << 30;
  in.history_entries = 1000000;
  in.max_entries = 1000000;
  gm_err_t err;
  ASSERT_EQ(gmt_coverage_mark(&h, &in, &err), GM_OK);
  EXPECT_STREQ(gmt_header_kv_get(&h, "coverage"), "partial");
  EXPECT_STREQ(gmt_header_kv_get(&h, "coverage.why"), "history_ring late_start");
  gmt_coverage_t out;
  gmt_coverage(&h, nullptr, &out);
  EXPECT_EQ(out.partial, 1);
  EXPECT_EQ(out.why, in.why);
  EXPECT_EQ(out.from_event, 45u);
  EXPECT_EQ(out.alive_bytes, 8ull << 30);
  char buf[1024];
  std::string t = gmt_coverage_text(&out, buf, sizeof buf);
  EXPECT_EQ(t.rfind("PARTIAL trace: it covers the run from t=1.500 s (event 45) on; alive at its start: 8.00 GiB in 3 "
                    "request",
                    0),
            0u)
      << t;
  EXPECT_NE(t.find("lower bound"), std::string::npos) << t;
  EXPECT_NE(t.find("1000000 entries of max_entries 1000000"), std::string::npos) << t;
  gmt_header_free(&h);
}

TEST(Coverage, StatsMakeAnUnmarkedTracePartial) {
  gmt_header_t h;
  gmt_header_init(&h);
  gmt_reader_stats_t st{};
  st.dropped = 7;
  st.truncated = 1;
  gmt_coverage_t c;
  gmt_coverage(&h, &st, &c);
  EXPECT_EQ(c.partial, 1);
  EXPECT_EQ(c.why, GMT_COV_DROPPED | GMT_COV_TRUNCATED);
  char buf[1024];
  std::string t = gmt_coverage_text(&c, buf, sizeof buf);
  EXPECT_NE(t.find("dropped 7 records"), std::string::npos) << t;
  // An older snapshot import: synthetic initial events say the history started late.
  gm_err_t err;
  ASSERT_EQ(gmt_header_kv_set(&h, "torch.snapshot.synthetic_initial_events", "12", &err), GM_OK);
  gmt_coverage(&h, nullptr, &c);
  EXPECT_EQ(c.why, GMT_COV_LATE_START);
  // A producer's explicit "complete" wins over old hints, not over the stats.
  ASSERT_EQ(gmt_header_kv_set(&h, "coverage", "complete", &err), GM_OK);
  gmt_coverage(&h, nullptr, &c);
  EXPECT_EQ(c.partial, 0);
  gmt_coverage(&h, &st, &c);
  EXPECT_EQ(c.partial, 1);
  gmt_header_free(&h);
}

}  // namespace
