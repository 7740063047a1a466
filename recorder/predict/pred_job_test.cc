// pred_job_test.cc: one job as users run it (pred_job.c): the value masked wherever it stands as
// a whole number in the command line, the script that decides what is another job, and a
// prediction from recordings run as `python scale.py 8 out/rb8` whose header carries the
// command at the target.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "formats/gmt.h"
#include "recorder/predict/pred.h"
#include "recorder/predict/pred_check.h"
#include "recorder/predict/pred_internal.h"

namespace {

std::string Mask(const char *cmd, double v) {
  char out[512];
  pred_mask_command(cmd, v, out, sizeof out);
  return out;
}

TEST(PredJob, ValueMaskedWhereverItStandsAsAWholeNumber) {
  EXPECT_EQ(Mask("python scale.py 8 out/rb8", 8), "python scale.py {} out/rb{}");
  EXPECT_EQ(Mask("python train.py --bs=8", 8), "python train.py --bs={}");
  EXPECT_EQ(Mask("python train.py --batch 8 --out runs/bs8/", 8), "python train.py --batch {} --out runs/bs{}/");
  EXPECT_EQ(Mask("python train.py b8 log_b8.txt bs:8", 8), "python train.py b{} log_b{}.txt bs:{}");
  // other numbers stay: 128 and 0.8 are not 8, a version is not the value
  EXPECT_EQ(Mask("python3.11 train.py --bs=8 --dim=128 --lr=0.8", 8), "python3.11 train.py --bs={} --dim=128 --lr=0.8");
  EXPECT_EQ(Mask("python train.py --seq=128 --bs=8", 128), "python train.py --seq={} --bs=8");
  EXPECT_EQ(Mask("python train.py --scale=0.5", 0.5), "python train.py --scale={}");
  char out[512];
  EXPECT_EQ(pred_mask_command("python train.py --dim=128", 8, out, sizeof out), 0);
  // a short buffer stays terminated
  char small[8];
  pred_mask_command("python scale.py 8", 8, small, sizeof small);
  EXPECT_EQ(std::string(small), "python ");
}

std::string Id(const char *cmd) {
  char out[512];
  pred_job_identity(cmd, out, sizeof out);
  return out;
}

TEST(PredJob, TheScriptOrModuleIsTheJob) {
  EXPECT_EQ(Id("python3 -u /home/u/train.py --bs=8"), "python train.py");
  EXPECT_EQ(Id("/usr/bin/python3.11 -m pkg.train --bs=8"), "python -m pkg.train");
  EXPECT_EQ(Id("torchrun --nproc_per_node=2 train.py"), "torchrun train.py");
  EXPECT_EQ(Id("./run_job --bs 8"), "run_job");
}

TEST(PredJob, CommandsThatDifferBeyondTheValueWarnAnotherScriptIsAnError) {
  char warn[GM_ERR_MSG_MAX] = "";
  gm_err_t err{};
  EXPECT_EQ(pred_job_compare("a", "python scale.py 8 out/rb8", 8, "b", "python scale.py 16 out/rb16", 16, warn, sizeof warn,
                             &err),
            GM_OK);
  EXPECT_STREQ(warn, "");
  EXPECT_EQ(pred_job_compare("a", "python scale.py 8 --seed=1", 8, "b", "python scale.py 16 --seed=2", 16, warn, sizeof warn,
                             &err),
            GM_OK);
  EXPECT_NE(std::string(warn).find("differ beyond the value"), std::string::npos) << warn;
  EXPECT_EQ(pred_job_compare("a", "python train.py 8", 8, "b", "python eval.py 16", 16, nullptr, 0, &err), GM_ERR_INVAL);
  EXPECT_NE(std::string(err.msg).find("different jobs"), std::string::npos) << err.msg;
  EXPECT_EQ(pred_job_compare("a", "python -m a.train 8", 8, "b", "python -m b.train 16", 16, nullptr, 0, &err), GM_ERR_INVAL);
}

std::string Tmp(const std::string &name) {
  const char *d = getenv("TEST_TMPDIR");
  return std::string(d ? d : "/tmp") + "/" + std::to_string(getpid()) + "_" + name;
}

// testdata/NAME.csv with its command line replaced, imported
std::string WithCommand(const std::string &name, const std::string &cmd) {
  const char *src = getenv("TEST_SRCDIR");
  std::ifstream in(std::string(src ? src : ".") + "/gpumem/recorder/predict/testdata/" + name + ".csv");
  std::stringstream all, out;
  all << in.rdbuf();
  std::string line;
  while (std::getline(all, line)) out << (line.rfind("#command_line=", 0) == 0 ? "#command_line=" + cmd : line) << "\n";
  std::string csv = Tmp(name + ".csv"), zst = Tmp(name + "_" + std::to_string(cmd.size()) + ".zst");
  std::ofstream(csv) << out.str();
  FILE *f = fopen(csv.c_str(), "rb");
  gm_err_t err{};
  EXPECT_EQ(gmt_csv_import(f, csv.c_str(), zst.c_str(), nullptr, &err), GM_OK) << err.msg;
  fclose(f);
  return zst;
}

TEST(PredJob, AJobRunAsUsersRunItIsPredictedWithItsCommandAtTheTarget) {
  std::string a = WithCommand("affine8", "python scale.py 8 out/rb8"), b = WithCommand("affine16", "python scale.py 16 out/rb16");
  pred_input_t in[] = {{a.c_str(), 8}, {b.c_str(), 16}};
  pred_opts_t o{32, -1, "test"};
  pred_result_t res{};
  gm_err_t err{};
  std::string out = Tmp("p32.zst");
  ASSERT_EQ(pred_run(in, 2, &o, out.c_str(), &res, &err), GM_OK) << err.msg;
  ASSERT_FALSE(res.refused) << res.reason;
  EXPECT_STREQ(res.warning, "");
  gmt_reader_t *r = nullptr;
  ASSERT_EQ(gmt_reader_open(&r, out.c_str(), &err), GM_OK) << err.msg;
  EXPECT_STREQ(gmt_reader_header(r)->command_line, "python scale.py 32 out/rb32");
  gmt_reader_close(r);
  // a seed that differs: one job with a warning, the prediction the same
  std::string c = WithCommand("affine16", "python scale.py 16 out/rb16 --seed=3");
  pred_input_t in2[] = {{a.c_str(), 8}, {c.c_str(), 16}};
  ASSERT_EQ(pred_run(in2, 2, &o, Tmp("p32b.zst").c_str(), &res, &err), GM_OK) << err.msg;
  EXPECT_FALSE(res.refused) << res.reason;
  EXPECT_NE(std::string(res.warning).find("--same-job"), std::string::npos) << res.warning;
}

// Allocations of one token in another order (autograd's first of a step at another batch):
// paired by their size law, not their position; a buffer only one run makes stays unpaired.
TEST(PredAlignReorder, SameTokenInAnotherOrderIsPairedBySizeLaw) {
  // tokens: 1 = a callsite, 0 = none (the backward); at 8 and at 16 (k = 2)
  const uint64_t at[] = {1, 0, 0, 0, 0, 1}, as[] = {100, 10000, 300000, 7000000, 50000, 100};
  const uint64_t bt[] = {1, 0, 0, 0, 0, 0, 1}, bs[] = {100, 600000, 20000, 14000000, 100000, 777777, 100};
  int64_t m[6];
  ASSERT_GE(pred_diff_sized(at, as, 6, bt, bs, 7, 2.0, m, 100), 0);
  EXPECT_EQ(m[0], 0);
  EXPECT_EQ(m[1], 2); // 10000 -> 20000, though 600000 came first
  EXPECT_EQ(m[2], 1); // 300000 -> 600000
  EXPECT_EQ(m[3], 3);
  EXPECT_EQ(m[4], 4);
  EXPECT_EQ(m[5], 6);
  // 777777 (a workspace only the larger run makes) has no partner: nothing of a points at it
  for (int64_t x : m) EXPECT_NE(x, 5);
}

}  // namespace
