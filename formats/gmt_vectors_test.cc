// gmt_vectors_test.cc: the committed test vectors (traces/valid, traces/invalid) read as
// SPEC.md "Test vectors" promises: valid traces give their committed text form, and that text
// imports back to the same text; each invalid trace gives the status traces/invalid/EXPECTED names.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "formats/gmt.h"
#include "formats/gmt_testutil.h"

using gmt_test::ReadAll;
using gmt_test::TempPath;

namespace {

std::string Export(const std::string &path, gm_status_t *st) {
  gmt_reader_t *r;
  gm_err_t err;
  *st = gmt_reader_open(&r, path.c_str(), &err);
  if (*st != GM_OK) return err.msg;
  char *buf = nullptr;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  *st = gmt_csv_export(r, f, &err);
  fclose(f);
  std::string out(buf, len);
  free(buf);
  gmt_reader_close(r);
  return *st == GM_OK ? out : std::string(err.msg);
}

const char *const kValid[] = {"all-kinds", "extremes", "training-loop", "empty", "future-records"};

}  // namespace

TEST(Vectors, ValidTracesGiveTheirCommittedTextForm) {
  for (const char *name : kValid) {
    std::string base = std::string("traces/valid/") + name;
    gm_status_t st;
    std::string got = Export(base + ".zst", &st);
    ASSERT_EQ(st, GM_OK) << name << ": " << got;
    std::string want = ReadAll(base + ".csv");
    ASSERT_FALSE(want.empty()) << name;
    EXPECT_EQ(got, want) << name;
  }
}

TEST(Vectors, TextFormImportsBackToTheSameText) {
  for (const char *name : kValid) {
    std::string csv = std::string("traces/valid/") + name + ".csv", out = TempPath(std::string(name) + ".zst");
    FILE *in = fopen(csv.c_str(), "r");
    ASSERT_NE(in, nullptr) << csv;
    gm_err_t err;
    ASSERT_EQ(gmt_csv_import(in, csv.c_str(), out.c_str(), nullptr, &err), GM_OK) << err.msg;
    fclose(in);
    gm_status_t st;
    EXPECT_EQ(Export(out, &st), ReadAll(csv)) << name;
    remove(out.c_str());
  }
}

TEST(Vectors, FutureRecordsAreSkippedAndCounted) {
  gmt_reader_t *r;
  gm_err_t err;
  ASSERT_EQ(gmt_reader_open(&r, "traces/valid/future-records.zst", &err), GM_OK);
  gmt_event_t e;
  int n = 0;
  while (gmt_reader_next(r, &e, &err) == GM_OK) n++;
  EXPECT_EQ(n, 4);
  EXPECT_EQ(gmt_reader_stats(r)->unknown_records, 4u);
  gmt_reader_close(r);
}

static gm_status_t StatusNamed(const std::string &s) {
  if (s == "OK") return GM_OK;
  if (s == "END") return GM_END;
  if (s == "FORMAT") return GM_ERR_FORMAT;
  if (s == "CORRUPT") return GM_ERR_CORRUPT;
  if (s == "VERSION") return GM_ERR_VERSION;
  if (s == "TRUNCATED") return GM_ERR_TRUNCATED;
  ADD_FAILURE() << "unknown status " << s;
  return GM_ERR_INVAL;
}

TEST(Vectors, InvalidTracesGiveTheStatusTheirNoteNames) {
  std::ifstream ex("traces/invalid/EXPECTED");
  ASSERT_TRUE(ex.good());
  std::string line;
  int checked = 0;
  while (std::getline(ex, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string file, open_s, read_s, events, trunc, gaps, dropped, msg;
    ls >> file >> open_s >> read_s >> events >> trunc >> gaps >> dropped;
    std::getline(ls, msg);
    msg.erase(0, msg.find_first_not_of(' '));
    SCOPED_TRACE(file);
    std::string path = "traces/invalid/" + file;
    gmt_reader_t *r = nullptr;
    gm_err_t err;
    gm_err_clear(&err);
    gm_status_t st = gmt_reader_open(&r, path.c_str(), &err);
    ASSERT_EQ(st, StatusNamed(open_s)) << err.msg;
    std::string last_msg = err.msg;
    if (st == GM_OK) {
      gmt_event_t e;
      uint64_t n = 0;
      while ((st = gmt_reader_next(r, &e, &err)) == GM_OK) n++;
      EXPECT_EQ(st, StatusNamed(read_s)) << err.msg;
      EXPECT_EQ(n, std::stoull(events));
      if (st < 0) last_msg = err.msg;
      const gmt_reader_stats_t *s = gmt_reader_stats(r);
      EXPECT_EQ((uint64_t)s->truncated, std::stoull(trunc));
      EXPECT_EQ(s->seq_gaps, std::stoull(gaps));
      EXPECT_EQ(s->dropped, std::stoull(dropped));
      gmt_reader_close(r);
    }
    if (msg != "-") {
      EXPECT_NE(last_msg.find(msg), std::string::npos) << last_msg;
    }
    checked++;
  }
  EXPECT_GE(checked, 8);
}
