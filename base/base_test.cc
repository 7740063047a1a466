// base_test.cc: cause chains, size/fraction parsing, option tables.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
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

// Issue 12 item 7: a value outside an option's range is one error naming the option, the
// value as given and the accepted range; both ends are accepted.
TEST(Opts, RangeNamesValueAndAcceptedRange) {
  struct R {
    uint64_t gran = 0, jobs = 0;
  };
  const gm_opt_t opts[] = {
      {"granularity", 0, GM_OPT_SIZE, "SIZE", "g", offsetof(R, gran), 512, 2ull << 20},
      {"jobs", 'j', GM_OPT_U64, "N", "j", offsetof(R, jobs), 1, 256},
      {nullptr, 0, GM_OPT_FLAG, nullptr, nullptr, 0},
  };
  char *pos[8];
  int npos;
  struct {
    const char *arg;
    const char *msg;  // "" = accepted
  } cases[] = {
      {"--granularity=1GiB", "--granularity=1GiB: out of range (accepted: 512 B to 2.00 MiB)"},
      {"--granularity=511", "--granularity=511: out of range (accepted: 512 B to 2.00 MiB)"},
      {"--granularity=512", ""},
      {"--granularity=2MiB", ""},
      {"--jobs=0", "--jobs=0: out of range (accepted: 1 to 256)"},
      {"--jobs=257", "--jobs=257: out of range (accepted: 1 to 256)"},
      {"-j256", ""},
      {"--jobs=18446744073709551616", "--jobs: '18446744073709551616' is too large"},
  };
  for (const auto &k : cases) {
    R r;
    gm_err_t e{};
    const char *argv[] = {"t", k.arg};
    gm_status_t st = gm_opts_parse(opts, 2, (char **)argv, &r, pos, &npos, 0, &e);
    if (!*k.msg) {
      EXPECT_EQ(st, GM_OK) << k.arg << ": " << e.msg;
    } else {
      EXPECT_EQ(st, GM_ERR_INVAL) << k.arg;
      EXPECT_STREQ(e.msg, k.msg) << k.arg;
    }
  }
}

// Issue 12 item 8: nothing a terminal acts on survives; UTF-8 text does, and a cut never splits
// a character or an escape.
TEST(Escape, ControlsC1AndInvalidUtf8BecomeHex) {
  char b[256];
  EXPECT_STREQ(gm_escape("a\x1b]0;x\x07\x1b[2Jb", b, sizeof b), "a\\x1b]0;x\\x07\\x1b[2Jb");
  EXPECT_STREQ(gm_escape("line\nfake\rtab\t\x7f", b, sizeof b), "line\\x0afake\\x0dtab\\x09\\x7f");
  EXPECT_STREQ(gm_escape("csi \xc2\x9b" "1m", b, sizeof b), "csi \\xc2\\x9b1m");       // U+009B, C1
  EXPECT_STREQ(gm_escape("lone \x9b" "1m \xff\xc3", b, sizeof b), "lone \\x9b1m \\xff\\xc3");  // not UTF-8
  EXPECT_STREQ(gm_escape("\xed\xa0\x80 \xc0\xaf", b, sizeof b), "\\xed\\xa0\\x80 \\xc0\\xaf");  // surrogate, overlong
  EXPECT_STREQ(gm_escape("caf\xc3\xa9 \xe6\xa8\xa1\xe5\x9e\x8b \xf0\x9f\x94\xa5 a\\b", b, sizeof b),
               "caf\xc3\xa9 \xe6\xa8\xa1\xe5\x9e\x8b \xf0\x9f\x94\xa5 a\\b");  // UTF-8 and backslash pass
  EXPECT_STREQ(gm_escape(nullptr, b, sizeof b), "");
  EXPECT_STREQ(gm_escape("ab\x1b", b, 6), "ab");          // "\x1b" does not fit in 3 bytes: left out whole
  EXPECT_STREQ(gm_escape("a\xc3\xa9", b, 3), "a");        // nor half a character
  // gm_escape_cut marks a cut (issue 14: callsites of 100 KB), and only a cut
  EXPECT_STREQ(gm_escape_cut("abcdefgh", b, 9), "abcdefgh");
  EXPECT_STREQ(gm_escape_cut("abcdefghi", b, 9), "abcde...");
  EXPECT_STREQ(gm_escape_cut("ab\x1b" "cdefgh", b, 9), "ab...");   // the escape whole or not at all
  EXPECT_STREQ(gm_escape_cut("abcdef", b, 3), "ab");
  char *out = nullptr;
  size_t len = 0;
  FILE *f = open_memstream(&out, &len);
  gm_fputs_escaped("x\x1b[31my", f);
  fclose(f);
  EXPECT_EQ(std::string(out, len), "x\\x1b[31my");
  free(out);
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

// ---- gm_input.c: kinds of file, advice, output checks, did-you-mean ----------------------

TEST(FileKind, TellsTheFiveKindsApartByTheirFirstBytes) {
  const unsigned char trace[] = {0x50, 0x2A, 0x4D, 0x18, 40, 0, 0, 0, 'G', 'M', 'T', 'H'};
  EXPECT_EQ(gm_file_kind_of(trace, sizeof trace), GM_FILE_TRACE);
  const unsigned char zstd[] = {0x28, 0xB5, 0x2F, 0xFD, 0, 0};
  EXPECT_EQ(gm_file_kind_of(zstd, sizeof zstd), GM_FILE_ZSTD);
  const unsigned char pickle[] = {0x80, 0x04, 0x95, 0};
  EXPECT_EQ(gm_file_kind_of(pickle, sizeof pickle), GM_FILE_PICKLE);
  const unsigned char pickle1[] = {0x80, 0x01};  // protocol 1 is not what torch writes
  EXPECT_EQ(gm_file_kind_of(pickle1, sizeof pickle1), GM_FILE_UNKNOWN);
  EXPECT_EQ(gm_file_kind_of("SQLite format 3\0xyz", 19), GM_FILE_DATABASE);
  const char csv[] = "# gpumem trace, text form 1\n#pid=1\n";
  EXPECT_EQ(gm_file_kind_of(csv, sizeof csv - 1), GM_FILE_CSV);
  const char bare_csv[] = "ts_ns,kind,device\n1,alloc,0\n";
  EXPECT_EQ(gm_file_kind_of(bare_csv, sizeof bare_csv - 1), GM_FILE_CSV);
  const char rmm[] = "Thread,Time,Action,Pointer,Size,Stream\n1,10:00:00.000001,allocate,0x10,5,0\n";
  EXPECT_EQ(gm_file_kind_of(rmm, sizeof rmm - 1), GM_FILE_RMM_LOG);
  const char json[] = "  {\"format\":\"gpumem-results\",\"version\":1}";
  EXPECT_EQ(gm_file_kind_of(json, sizeof json - 1), GM_FILE_RESULTS);
  const char other_json[] = "{\"format\":\"something-else\"}";
  EXPECT_EQ(gm_file_kind_of(other_json, sizeof other_json - 1), GM_FILE_UNKNOWN);
  EXPECT_EQ(gm_file_kind_of("", 0), GM_FILE_EMPTY);
  EXPECT_EQ(gm_file_kind("/nonexistent/x.zst"), GM_FILE_MISSING);
  EXPECT_EQ(gm_file_kind("/"), GM_FILE_DIR);
}

TEST(FileKind, AdviceNamesTheCommandThatTakesTheFile) {
  char buf[512];
  EXPECT_EQ(gm_file_advice("snap.pickle", GM_FILE_PICKLE, GM_WANT(GM_FILE_TRACE), buf, sizeof buf), 1);
  EXPECT_NE(std::string(buf).find("`gpurec import snap.pickle -o snap.zst`"), std::string::npos) << buf;
  EXPECT_EQ(gm_file_advice("run/t.zst", GM_FILE_TRACE, GM_WANT(GM_FILE_PICKLE) | GM_WANT(GM_FILE_CSV), buf,
                           sizeof buf), 1);
  EXPECT_NE(std::string(buf).find("already a gpumem trace: nothing to import"), std::string::npos) << buf;
  EXPECT_EQ(gm_file_advice("r.db", GM_FILE_DATABASE, GM_WANT(GM_FILE_TRACE), buf, sizeof buf), 1);
  EXPECT_NE(std::string(buf).find("`gpuanalyze report --db r.db`"), std::string::npos) << buf;
  // A wanted kind, or one there is nothing to say about, gets no advice.
  EXPECT_EQ(gm_file_advice("t.zst", GM_FILE_TRACE, GM_WANT(GM_FILE_TRACE), buf, sizeof buf), 0);
  EXPECT_EQ(gm_file_advice("t.zst", GM_FILE_UNKNOWN, GM_WANT(GM_FILE_TRACE), buf, sizeof buf), 0);
}

TEST(Output, CheckedBeforeAnyWork) {
  gm_err_t e;
  gm_err_clear(&e);
  EXPECT_EQ(gm_output_check("/nonexistent/dir/t.zst", &e), GM_ERR_IO);
  EXPECT_STREQ(e.msg, "cannot write '/nonexistent/dir/t.zst': directory '/nonexistent/dir' does not exist");
  EXPECT_EQ(gm_output_check("/", &e), GM_ERR_IO);
  EXPECT_NE(std::string(e.msg).find("is a directory"), std::string::npos) << e.msg;
  const char *tmp = getenv("TEST_TMPDIR");
  std::string ok = std::string(tmp ? tmp : "/tmp") + "/out.zst";
  EXPECT_EQ(gm_output_check(ok.c_str(), &e), GM_OK) << e.msg;
  EXPECT_EQ(gm_output_check("relative-name.zst", &e), GM_OK) << e.msg;  // the working directory
}

TEST(Closest, SuggestsTyposNotStrangers) {
  const char *const opts[] = {"sweep", "policy", "capacity", "json", nullptr};
  EXPECT_STREQ(gm_closest("sweeep", opts, 5), "sweep");
  EXPECT_STREQ(gm_closest("capcity", opts, 5), "capacity");
  EXPECT_STREQ(gm_closest("polciy", opts, 5), "policy");  // two letters swapped: one edit
  EXPECT_EQ(gm_closest("frobnicate", opts, 5), nullptr);
  EXPECT_EQ(gm_closest("sweep", opts, 5), nullptr);  // exact: not a typo
  const char *const keys[] = {"expandable_segments", "max_split_size_mb"};
  EXPECT_STREQ(gm_closest("expandable_segment", keys, 2), "expandable_segments");
}

TEST(Opts, UnknownLongOptionSuggestsTheNearest) {
  struct C {
    int sweep;
  } c{};
  const gm_opt_t opts[] = {{"sweep", 0, GM_OPT_FLAG, nullptr, "x", offsetof(C, sweep)}, {nullptr, 0, GM_OPT_FLAG, nullptr, nullptr, 0}};
  char a0[] = "t", a1[] = "--sweeep";
  char *argv[] = {a0, a1};
  char *pos[2];
  int npos = 0;
  gm_err_t e;
  gm_err_clear(&e);
  EXPECT_EQ(gm_opts_parse(opts, 2, argv, &c, pos, &npos, 0, &e), GM_ERR_INVAL);
  EXPECT_STREQ(e.msg, "unknown option '--sweeep' (did you mean '--sweep'?)");
}
