// pred_replay_test.cc: --fit's replayer (pred_replay.c): the two integers read from a line
// of gpureplay's JSON whatever comes around them, and the replayer against stand-in gpureplay
// scripts (the order of the results, a short answer, a failure, the folder removed).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "recorder/predict/pred_replay.h"

namespace {

uint64_t Get(const char *json, const char *key, gm_status_t want = GM_OK) {
  gm_err_t err;
  gm_err_clear(&err);
  uint64_t v = 12345;
  EXPECT_EQ(pred_rp_json_u64(json, key, &v, &err), want) << json << ": " << err.msg;
  return v;
}

TEST(FitJson, TopLevelKeysOnly) {
  // gpureplay's compact form, the key after nested objects and arrays that hold the same name
  const char *line =
      "{\"trace\":\"a \\\"q\\\" \\\\\",\"range\":{\"peak_reserved_bytes\":7,\"x\":[1,{\"ooms\":9}]},"
      "\"s\":\"\\\"ooms\\\":5,\",\"peak_reserved_bytes\":18446744073709551615,\"ooms\":0}";
  EXPECT_EQ(Get(line, "peak_reserved_bytes"), UINT64_MAX);
  EXPECT_EQ(Get(line, "ooms"), 0u);
  EXPECT_EQ(Get("{ \"a\" : true , \"b\" : null, \"ooms\" : 42 }", "ooms"), 42u);
  EXPECT_EQ(Get("{\"a\":-1.5e3,\"ooms\":3}\n", "ooms"), 3u);
}

TEST(FitJson, RefusesWhatIsNotAnUnsignedInteger) {
  Get("{\"ooms\":-1}", "ooms", GM_ERR_FORMAT);
  Get("{\"ooms\":1.5}", "ooms", GM_ERR_FORMAT);
  Get("{\"ooms\":\"1\"}", "ooms", GM_ERR_FORMAT);
  Get("{\"ooms\":18446744073709551616}", "ooms", GM_ERR_FORMAT);  // 2^64
  Get("{\"ooms\":1", "ooms", GM_ERR_FORMAT);                     // cut short
  Get("{\"range\":{\"ooms\":1}}", "ooms", GM_ERR_FORMAT);        // nested only
  Get("{\"x\":\"unended", "ooms", GM_ERR_FORMAT);
  Get("[{\"ooms\":1}]", "ooms", GM_ERR_FORMAT);
  Get("", "ooms", GM_ERR_FORMAT);
  Get("{\"oom\":1,\"oomsx\":2}", "ooms", GM_ERR_FORMAT);
}

// A stand-in gpureplay: a shell script in the test's folder.
std::string Script(const char *name, const std::string &body) {
  std::string dir = getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp";
  std::string path = dir + "/" + name;
  std::ofstream(path) << "#!/bin/sh\n" << body;
  chmod(path.c_str(), 0755);
  return path;
}

TEST(FitReplayer, ResultsInTheOrderOfTheSettings) {
  // a line per setting as gpureplay prints them, then a second device's (ignored); it checks
  // that it was asked for the settings, the capacity and the trace after "--"
  std::string tool = Script("gr_ok", R"(case "$*" in *"--capacity=1000 --policy=p1 --policy=p2 -- /x.zst"*) ;; *) echo "bad args: $*" >&2; exit 1;; esac
echo '{"policy":"p1","peak_reserved_bytes":10,"ooms":0}'
echo '{"policy":"p2","ooms":4,"alloc_retries":3,"peak_reserved_bytes":20}'
echo '{"policy":"p1","peak_reserved_bytes":99,"ooms":9}'
)");
  pred_rp_t *r = nullptr;
  gm_err_t err;
  gm_err_clear(&err);
  ASSERT_EQ(pred_rp_open(tool.c_str(), &r, &err), GM_OK) << err.msg;
  std::string dir = pred_rp_path(r, "");
  struct stat sb;
  ASSERT_EQ(stat(dir.c_str(), &sb), 0);
  const char *specs[] = {"p1", "p2"};
  pred_rp_opts_t o = {1000, 0, 2};
  pred_rp_result_t res[2];
  ASSERT_EQ(pred_rp_replay(r, "/x.zst", "x", &o, specs, 2, res, &err), GM_OK) << err.msg;
  EXPECT_EQ(res[0].peak_reserved_bytes, 10u);
  EXPECT_EQ(res[0].ooms, 0u);
  EXPECT_EQ(res[1].peak_reserved_bytes, 20u);
  EXPECT_EQ(res[1].ooms, 4u);
  EXPECT_EQ(res[0].alloc_retries, 0u);  // absent (an older gpureplay): none said
  EXPECT_EQ(res[1].alloc_retries, 3u);
  pred_rp_close(r);
  EXPECT_NE(stat(dir.c_str(), &sb), 0) << "the folder is left: " << dir;
}

TEST(FitReplayer, ShortAnswersAndFailuresAreErrors) {
  std::string few = Script("gr_few", "echo '{\"peak_reserved_bytes\":1,\"ooms\":0}'\n");
  std::string fail = Script("gr_fail", "echo 'gpureplay: error: cannot open x: broken' >&2\nexit 1\n");
  std::string usage = Script("gr_usage",
                             "echo \"gpureplay: bad --policy 'q': unknown policy 'q'\" >&2\n"
                             "echo \"try 'gpureplay --help'\" >&2\nexit 2\n");
  gm_err_t err;
  pred_rp_opts_t o = {0, 0, 1};
  const char *specs[] = {"a", "b"};
  pred_rp_result_t res[2];
  pred_rp_t *r = nullptr;
  ASSERT_EQ(pred_rp_open(few.c_str(), &r, &err), GM_OK);
  EXPECT_EQ(pred_rp_replay(r, "/t.zst", "the prediction at 3", &o, specs, 2, res, &err), GM_ERR_FORMAT);
  EXPECT_STREQ(err.msg, "gpureplay on the prediction at 3: 1 result for 2 settings");
  pred_rp_close(r);
  ASSERT_EQ(pred_rp_open(fail.c_str(), &r, &err), GM_OK);
  EXPECT_EQ(pred_rp_replay(r, "/t.zst", "t.zst", &o, specs, 2, res, &err), GM_ERR_IO);
  EXPECT_STREQ(err.msg, "gpureplay on t.zst (exit status 1): cannot open x: broken");
  pred_rp_close(r);
  ASSERT_EQ(pred_rp_open(usage.c_str(), &r, &err), GM_OK);
  char **list = nullptr;
  int n = 0;
  EXPECT_EQ(pred_rp_list(r, "/t.zst", specs, 1, 0, &list, &n, &err), GM_ERR_INVAL);
  EXPECT_STREQ(err.msg, "bad --policy 'q': unknown policy 'q'");
  pred_rp_close(r);
}

TEST(FitReplayer, ListsTheSettings) {
  std::string tool = Script("gr_list", R"(case "$*" in
  *--sweep*) printf 'pytorch\nbfc\ndirect\n';;
  *) for a; do case $a in --policy=*) echo "${a#--policy=}";; esac; done;;
esac
)");
  pred_rp_t *r = nullptr;
  gm_err_t err;
  ASSERT_EQ(pred_rp_open(tool.c_str(), &r, &err), GM_OK);
  char **list = nullptr;
  int n = 0;
  ASSERT_EQ(pred_rp_list(r, "/t.zst", nullptr, 0, 0, &list, &n, &err), GM_OK) << err.msg;
  ASSERT_EQ(n, 3);
  EXPECT_STREQ(list[2], "direct");
  pred_rp_free_list(list, n);
  const char *specs[] = {"pytorch:a b", "x"};
  ASSERT_EQ(pred_rp_list(r, "/t.zst", specs, 2, 1 << 30, &list, &n, &err), GM_OK) << err.msg;
  ASSERT_EQ(n, 2);
  EXPECT_STREQ(list[0], "pytorch:a b");
  pred_rp_free_list(list, n);
  // one spec asked, its answer in two lines: refused rather than mismatched
  const char *nl[] = {"a\nb"};
  EXPECT_EQ(pred_rp_list(r, "/t.zst", nl, 1, 0, &list, &n, &err), GM_ERR_FORMAT);
  pred_rp_close(r);
}

TEST(FitReplayer, FindsGpureplayFromTheEnvironment) {
  char out[4096];
  const char *from = nullptr;
  std::string tool = Script("gr_env", "exit 0\n");
  setenv("GPUREPLAY", tool.c_str(), 1);
  EXPECT_EQ(pred_rp_find(out, sizeof out, &from), 1);
  EXPECT_EQ(tool, out);
  EXPECT_STREQ(from, "$GPUREPLAY");
  setenv("GPUREPLAY", "/nonexistent/gpureplay", 1);
  EXPECT_EQ(pred_rp_find(out, sizeof out, &from), 0);
  EXPECT_STREQ(from, "$GPUREPLAY");
  unsetenv("GPUREPLAY");
}

}  // namespace
