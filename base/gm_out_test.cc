// gm_out_test.cc: output files are their old selves or complete (gm_out.c), under fault
// injection: a file size limit (a disk that fills up mid-write: RLIMIT_FSIZE, in a child
// process so the test's own log is not limited), /dev/full, a missing directory, and checks
// that every failure names the path and the reason and leaves no temporary file behind.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "base/gm_base.h"

namespace {

std::string Dir() {
  static int n = 0;
  const char *t = getenv("TEST_TMPDIR");
  std::string d = std::string(t ? t : "/tmp") + "/out-" + std::to_string(getpid()) + "-" + std::to_string(n++);
  mkdir(d.c_str(), 0777);
  return d;
}

std::string Slurp(const std::string &p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void Put(const std::string &p, const std::string &text) { std::ofstream(p, std::ios::binary) << text; }

int Entries(const std::string &dir) {
  int n = 0;
  DIR *d = opendir(dir.c_str());
  while (dirent *e = readdir(d)) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
  closedir(d);
  return n;
}

// Writes `bytes` bytes through gm_out to path; returns the commit status and its message.
gm_status_t WriteOut(const std::string &path, size_t bytes, std::string *msg) {
  gm_err_t err;
  gm_err_clear(&err);
  gm_out_t *o = nullptr;
  gm_status_t s = gm_out_open(&o, path.c_str(), &err);
  if (s == GM_OK) {
    FILE *f = gm_out_file(o);
    for (size_t i = 0; i < bytes; i++) fputc('a' + (int)(i % 26), f);
    s = gm_out_commit(o, &err);
  }
  *msg = err.msg;
  return s;
}

}  // namespace

TEST(Out, CommitReplacesTheOldFileWholeAndKeepsItsMode) {
  std::string d = Dir(), p = d + "/report.html", msg;
  Put(p, "old");
  chmod(p.c_str(), 0640);
  ASSERT_EQ(WriteOut(p, 200000, &msg), GM_OK) << msg;
  EXPECT_EQ(Slurp(p).size(), 200000u);
  struct stat sb;
  ASSERT_EQ(stat(p.c_str(), &sb), 0);
  EXPECT_EQ(sb.st_mode & 0777, 0640u);
  EXPECT_EQ(Entries(d), 1);  // no temporary file left
}

TEST(Out, AbortLeavesTheOldFileAndNoTemporary) {
  std::string d = Dir(), p = d + "/results.json";
  Put(p, "old results");
  gm_out_t *o = nullptr;
  gm_err_t err;
  ASSERT_EQ(gm_out_open(&o, p.c_str(), &err), GM_OK);
  fputs("half of the new", gm_out_file(o));
  EXPECT_EQ(Entries(d), 2);  // the target and the temporary file beside it
  gm_out_abort(o);
  EXPECT_EQ(Slurp(p), "old results");
  EXPECT_EQ(Entries(d), 1);
}

TEST(Out, DiskFullMidWriteFailsNamingPathAndReasonAndKeepsTheOldFile) {
  std::string d = Dir(), p = d + "/big.csv";
  Put(p, "old csv\n");
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  if (pid == 0) {  // a file size limit of 64 KiB: writes past it fail with EFBIG, like a full disk
    close(fds[0]);
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {64 << 10, 64 << 10};
    setrlimit(RLIMIT_FSIZE, &rl);
    std::string msg;
    gm_status_t s = WriteOut(p, 1 << 20, &msg);
    msg = std::to_string((int)s) + ":" + msg;
    if (write(fds[1], msg.data(), msg.size()) < 0) _exit(3);
    _exit(0);
  }
  close(fds[1]);
  char buf[2048];
  ssize_t n = read(fds[0], buf, sizeof buf);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_GT(n, 0);
  std::string got(buf, (size_t)n);
  EXPECT_EQ(got, std::to_string((int)GM_ERR_IO) + ":cannot write '" + p + "': File too large");
  EXPECT_EQ(Slurp(p), "old csv\n");
  EXPECT_EQ(Entries(d), 1);
}

TEST(Out, DevFullIsWrittenInPlaceAndItsErrorReported) {
  std::string msg;
  EXPECT_EQ(WriteOut("/dev/full", 100, &msg), GM_ERR_IO);
  EXPECT_EQ(msg, "cannot write '/dev/full': No space left on device");
  EXPECT_EQ(WriteOut("/dev/null", 100, &msg), GM_OK) << msg;
}

TEST(Out, MissingDirectoryAndADirectoryAsTarget) {
  std::string d = Dir(), msg;
  EXPECT_EQ(WriteOut(d + "/no/such/dir/x.html", 10, &msg), GM_ERR_IO);
  EXPECT_EQ(msg, "cannot write '" + d + "/no/such/dir/x.html': cannot create a file in '" + d +
                     "/no/such/dir': No such file or directory");
  EXPECT_EQ(WriteOut(d, 10, &msg), GM_ERR_IO);
  EXPECT_EQ(msg, "cannot write '" + d + "': it is a directory");
}

TEST(Out, ASymlinkKeepsPointingAtTheNewFile) {
  std::string d = Dir(), target = d + "/real.html", link = d + "/link.html", msg;
  Put(target, "old");
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  ASSERT_EQ(WriteOut(link, 10, &msg), GM_OK) << msg;
  struct stat sb;
  ASSERT_EQ(lstat(link.c_str(), &sb), 0);
  EXPECT_TRUE(S_ISLNK(sb.st_mode));
  EXPECT_EQ(Slurp(target), "abcdefghij");
}

TEST(Out, StdoutToAFullDiskIsAnError) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    int full = open("/dev/full", O_WRONLY);
    dup2(full, 1);
    printf("the table a tool prints\n");
    gm_err_t err;
    gm_err_clear(&err);
    gm_status_t s = gm_stdout_close(&err);
    std::string msg = std::to_string((int)s) + ":" + err.msg;
    if (write(fds[1], msg.data(), msg.size()) < 0) _exit(3);
    _exit(0);
  }
  close(fds[1]);
  char buf[512];
  ssize_t n = read(fds[0], buf, sizeof buf);
  close(fds[0]);
  waitpid(pid, nullptr, 0);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buf, (size_t)n),
            std::to_string((int)GM_ERR_IO) + ":cannot write to standard output: No space left on device");
}
