// ana_diff_test.cc: ana_diff on two hand-made traces whose answer is worked out by hand:
// callsites matched by text across traces (their ids differ), growth at each trace's peak,
// new and gone callsites, the normalised timeline's maxima, and the same through the database.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "analyze/ana_diff.h"

namespace {

constexpr uint64_t MiB = 1ull << 20;

struct E {
  uint8_t kind;
  uint64_t addr, size;
  const char *site;  // ALLOC only
};

std::string Write(const char *name, const std::vector<E> &in, const std::vector<const char *> &intern_order) {
  const char *dir = getenv("TEST_TMPDIR");
  std::string path = std::string(dir ? dir : "/tmp") + "/" + std::to_string(getpid()) + "_" + name;
  gmt_header_t h;
  gmt_header_init(&h);
  h.capture_mode = GMT_CAPTURE_SYNTHETIC;
  h.start_time_ns = 1700000000000000000ull + strlen(name);  // distinct traces
  gm_err_t err = {};
  gmt_writer_t *w = nullptr;
  EXPECT_EQ(gmt_writer_open(&w, path.c_str(), &h, nullptr, &err), GM_OK) << err.msg;
  std::vector<uint32_t> ids;
  for (const char *s : intern_order) {
    uint32_t id = 0;
    EXPECT_EQ(gmt_writer_intern(w, s, &id, &err), GM_OK);
    ids.push_back(id);
  }
  std::vector<gmt_event_t> evs;
  uint64_t t = 0;
  for (const E &e : in) {
    gmt_event_t g;
    memset(&g, 0, sizeof g);
    g.kind = e.kind;
    g.ts_ns = t += 1000;
    g.addr = e.addr;
    g.size = e.size;
    g.stream = 7;
    g.mem_kind = GMT_MEM_DEVICE;
    for (size_t i = 0; e.site && i < intern_order.size(); i++)
      if (strcmp(e.site, intern_order[i]) == 0) g.callsite = ids[i];
    evs.push_back(g);
  }
  EXPECT_EQ(gmt_writer_append_n(w, evs.data(), evs.size(), &err), GM_OK) << err.msg;
  EXPECT_EQ(gmt_writer_close(w, &err), GM_OK) << err.msg;
  gmt_header_free(&h);
  return path;
}

const ana_diff_site_t *Find(const ana_diff_t &d, const char *text) {
  for (size_t i = 0; i < d.n_sites; i++)
    if (strcmp(d.sites[i].text, text) == 0) return &d.sites[i];
  return nullptr;
}

// A: X 10 MiB and Y 5 MiB live at the peak (15 MiB), then a later X of 1 MiB after both freed.
// B: X 15 MiB and Z 3 MiB at the peak (18 MiB); no Y. Ids are interned in different orders.
void Traces(std::string *a, std::string *b) {
  *a = Write("diff_a.zst",
             {{GMT_EV_ALLOC, 0x1000, 10 * MiB, "x.py:1"}, {GMT_EV_ALLOC, 0x2000, 5 * MiB, "y.py:2"},
              {GMT_EV_FREE, 0x1000, 0, nullptr}, {GMT_EV_FREE, 0x2000, 0, nullptr},
              {GMT_EV_ALLOC, 0x3000, 1 * MiB, "x.py:1"}},
             {"x.py:1", "y.py:2"});
  *b = Write("diff_b.zst",
             {{GMT_EV_ALLOC, 0x1000, 3 * MiB, "z.py:3"}, {GMT_EV_ALLOC, 0x2000, 15 * MiB, "x.py:1"},
              {GMT_EV_FREE, 0x2000, 0, nullptr}},
             {"z.py:3", "x.py:1"});
}

TEST(Diff, CallsitesByTextGrowthNewGone) {
  std::string a, b;
  Traces(&a, &b);
  ana_diff_t d;
  gm_err_t err = {};
  ASSERT_EQ(ana_diff_traces(a.c_str(), b.c_str(), GMT_READ_STRICT, &d, &err), GM_OK) << err.msg;
  EXPECT_EQ(d.side[0].peak_live, 15 * MiB);
  EXPECT_EQ(d.side[1].peak_live, 18 * MiB);
  EXPECT_EQ(d.side[0].allocs, 3u);
  ASSERT_EQ(d.n_sites, 3u);
  // By growth: x +5 MiB, z +3 MiB, y -5 MiB.
  EXPECT_STREQ(d.sites[0].text, "x.py:1");
  EXPECT_STREQ(d.sites[1].text, "z.py:3");
  EXPECT_STREQ(d.sites[2].text, "y.py:2");
  const ana_diff_site_t *x = Find(d, "x.py:1");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->peak_bytes[0], 10 * MiB);
  EXPECT_EQ(x->peak_bytes[1], 15 * MiB);
  EXPECT_EQ(x->allocs[0], 2u);  // the later 1 MiB one too, not live at the peak
  EXPECT_EQ(x->bytes[0], 11 * MiB);
  EXPECT_EQ(d.new_sites, 1u);
  EXPECT_EQ(d.new_bytes, 3 * MiB);
  EXPECT_EQ(d.gone_sites, 1u);
  EXPECT_EQ(d.gone_bytes, 5 * MiB);
  uint64_t max0 = 0, max1 = 0;
  for (int k = 0; k < ANA_DIFF_POINTS; k++) {
    max0 = std::max(max0, d.live[0][k]);
    max1 = std::max(max1, d.live[1][k]);
  }
  EXPECT_EQ(max0, 15 * MiB);
  EXPECT_EQ(max1, 18 * MiB);
  EXPECT_EQ(d.live[0][ANA_DIFF_POINTS - 1], 1 * MiB);  // what is live at A's end
  ana_diff_free(&d);
}

TEST(Diff, FromTheDatabase) {
  std::string a, b;
  Traces(&a, &b);
  ana_db_t *db = nullptr;
  gm_err_t err = {};
  ASSERT_EQ(ana_db_open(&db, ":memory:", &err), GM_OK) << err.msg;
  const char *in[2] = {a.c_str(), b.c_str()};
  ana_load_stats_t st = {};
  ana_load_opts_t o = {};
  ASSERT_EQ(ana_db_load(db, in, 2, &o, &st, &err), GM_OK) << err.msg;
  ana_diff_t d;
  ASSERT_EQ(ana_diff_db(db, 1, 2, GMT_READ_STRICT, &d, &err), GM_OK) << err.msg;
  EXPECT_EQ(d.side[1].peak_live, 18 * MiB);
  EXPECT_FALSE(d.side[0].has_reserved);  // no replay loaded
  EXPECT_EQ(d.n_sites, 3u);
  ana_diff_free(&d);
  EXPECT_NE(ana_diff_db(db, 1, 9, GMT_READ_STRICT, &d, &err), GM_OK);
  EXPECT_NE(std::string(err.msg).find("no trace 9"), std::string::npos) << err.msg;
  ana_db_close(db);
}

}  // namespace
