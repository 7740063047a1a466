// base_test.cc: cause chains, size/fraction parsing, option tables.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>

#include "base/gm_base.h"

TEST(Err, WrapBuildsCauseChainOuterFirst) {
  gm_err_t e;
  gm_err_clear(&e);
  EXPECT_EQ(gm_err_set(&e, GM_ERR_CORRUPT, "zstd: %s", "corrupted block"), GM_ERR_CORRUPT);
  EXPECT_EQ(gm_err_wrap(&e, "chunk %d at offset %d", 17, 1048576), GM_ERR_CORRUPT);
  gm_err_wrap(&e, "cannot open '%s'", "x.zst");
  EXPECT_STREQ(e.msg, "cannot open 'x.zst': chunk 17 at offset 1048576: zstd: corrupted block");
  EXPECT_EQ(e.status, GM_ERR_CORRUPT);
}

TEST(Err, WrapNeverOverflows) {
  gm_err_t e;
  gm_err_set(&e, GM_ERR_IO, "inner");
  std::string big(3000, 'x');
  for (int i = 0; i < 10; i++) gm_err_wrap(&e, "%s", big.c_str());
  EXPECT_LT(strlen(e.msg), sizeof e.msg);
  EXPECT_EQ(e.status, GM_ERR_IO);
}

TEST(Err, NullErrOnlyReturnsStatus) {
  EXPECT_EQ(gm_err_set(nullptr, GM_ERR_IO, "x"), GM_ERR_IO);
}

TEST(Size, ParsesUnits) {
  uint64_t v = 0;
  EXPECT_EQ(gm_parse_size("512", &v, nullptr), GM_OK);
  EXPECT_EQ(v, 512u);
  EXPECT_EQ(gm_parse_size("20MiB", &v, nullptr), GM_OK);
  EXPECT_EQ(v, 20u << 20);
  EXPECT_EQ(gm_parse_size("1.5GiB", &v, nullptr), GM_OK);
  EXPECT_EQ(v, 3ull << 29);
  EXPECT_EQ(gm_parse_size("2 MB", &v, nullptr), GM_OK);
  EXPECT_EQ(v, 2000000u);
  EXPECT_EQ(gm_parse_size("64k", &v, nullptr), GM_OK);
  EXPECT_EQ(v, 65536u);
}

TEST(Size, RejectsGarbage) {
  uint64_t v = 7;
  gm_err_t e;
  EXPECT_EQ(gm_parse_size("-1", &v, &e), GM_ERR_INVAL);
  EXPECT_EQ(gm_parse_size("12 parsecs", &v, &e), GM_ERR_INVAL);
  EXPECT_NE(std::string(e.msg).find("unknown unit"), std::string::npos);
  EXPECT_EQ(gm_parse_size("", &v, &e), GM_ERR_INVAL);
  EXPECT_EQ(gm_parse_size("1.5", &v, &e), GM_ERR_INVAL);
  EXPECT_EQ(gm_parse_size("99999999999999999999", &v, &e), GM_ERR_INVAL);
  EXPECT_EQ(gm_parse_size("20000000TiB", &v, &e), GM_ERR_INVAL);
  EXPECT_EQ(v, 7u);
}

TEST(Fraction, Range) {
  double f = 0;
  EXPECT_EQ(gm_parse_fraction("0.75", &f, nullptr), GM_OK);
  EXPECT_DOUBLE_EQ(f, 0.75);
  EXPECT_EQ(gm_parse_fraction("1.5", &f, nullptr), GM_ERR_INVAL);
  EXPECT_EQ(gm_parse_fraction("x", &f, nullptr), GM_ERR_INVAL);
}

TEST(Size, Formats) {
  char b[32];
  EXPECT_STREQ(gm_format_size(512, b, sizeof b), "512 B");
  EXPECT_STREQ(gm_format_size(3ull << 29, b, sizeof b), "1.50 GiB");
}

namespace {
struct Cfg {
  int help;
  const char *out;
  uint64_t cap;
  gm_strlist_t pol;
};
const gm_opt_t kOpts[] = {
    {"help", 'h', GM_OPT_FLAG, nullptr, "show help", offsetof(Cfg, help)},
    {"output", 'o', GM_OPT_STR, "PATH", "output file", offsetof(Cfg, out)},
    {"capacity", 0, GM_OPT_SIZE, "SIZE", "GPU size", offsetof(Cfg, cap)},
    {"policy", 0, GM_OPT_LIST, "SPEC", "policy", offsetof(Cfg, pol)},
    {nullptr, 0, GM_OPT_FLAG, nullptr, nullptr, 0},
};
}  // namespace

TEST(Opts, ParsesForms) {
  Cfg c{};
  const char *argv[] = {"t", "-o", "a.zst", "--capacity=40GiB", "x", "--policy", "p1",
                        "--policy=p2", "--", "--help"};
  int argc = sizeof argv / sizeof argv[0];
  char *pos[16];
  int npos = 0;
  ASSERT_EQ(gm_opts_parse(kOpts, argc, (char **)argv, &c, pos, &npos, 0, nullptr), GM_OK);
  EXPECT_STREQ(c.out, "a.zst");
  EXPECT_EQ(c.cap, 40ull << 30);
  ASSERT_EQ(c.pol.n, 2);
  EXPECT_STREQ(c.pol.v[1], "p2");
  EXPECT_EQ(c.help, 0);
  ASSERT_EQ(npos, 2);
  EXPECT_STREQ(pos[0], "x");
  EXPECT_STREQ(pos[1], "--help");
}

TEST(Opts, StopsAtFirstPositionalWhenAsked) {
  Cfg c{};
  const char *argv[] = {"gpurec", "-oout.zst", "python", "-o", "x"};
  char *pos[8];
  int npos = 0;
  ASSERT_EQ(gm_opts_parse(kOpts, 5, (char **)argv, &c, pos, &npos, 1, nullptr), GM_OK);
  EXPECT_STREQ(c.out, "out.zst");
  ASSERT_EQ(npos, 3);
  EXPECT_STREQ(pos[1], "-o");
}

TEST(Opts, ErrorsNameTheOption) {
  Cfg c{};
  gm_err_t e;
  char *pos[8];
  int npos;
  const char *a1[] = {"t", "--bogus"};
  EXPECT_EQ(gm_opts_parse(kOpts, 2, (char **)a1, &c, pos, &npos, 0, &e), GM_ERR_INVAL);
  EXPECT_STREQ(e.msg, "unknown option '--bogus'");
  const char *a2[] = {"t", "--capacity=lots"};
  EXPECT_EQ(gm_opts_parse(kOpts, 2, (char **)a2, &c, pos, &npos, 0, &e), GM_ERR_INVAL);
  EXPECT_NE(std::string(e.msg).find("--capacity: 'lots'"), std::string::npos) << e.msg;
  const char *a3[] = {"t", "-o"};
  EXPECT_EQ(gm_opts_parse(kOpts, 2, (char **)a3, &c, pos, &npos, 0, &e), GM_ERR_INVAL);
  const char *a4[] = {"t", "--help=yes"};
  EXPECT_EQ(gm_opts_parse(kOpts, 2, (char **)a4, &c, pos, &npos, 0, &e), GM_ERR_INVAL);
}

TEST(Opts, HelpListsEveryOption) {
  char *buf = nullptr;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  gm_opts_help(f, "t [options]", "Does things.", kOpts);
  fclose(f);
  std::string s(buf, len);
  free(buf);
  EXPECT_NE(s.find("-o, --output=PATH"), std::string::npos) << s;
  EXPECT_NE(s.find("--policy=SPEC"), std::string::npos);
  EXPECT_NE(s.find("(repeatable)"), std::string::npos);
}
