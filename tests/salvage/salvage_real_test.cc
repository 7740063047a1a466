// salvage_real_test.cc: salvage (SPEC.md "Salvage") on every real trace in traces/: the
// gpurec recordings (traces/recorded: PyTorch in both captures, JAX and CuPy), the bundled
// example, the valid vectors, and the 30 PyTorch snapshots of traces/snapshots imported into
// traces. Each is checked as it is and re-cut into small chunks (real events, many chunks):
// every chunk, the index and the footer damaged in turn; every other chunk's events come back,
// the lost counts are right (formats/gmt_salvage_check.h).
#include <dirent.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "formats/gmt.h"
#include "formats/gmt_internal.h"
#include "formats/gmt_salvage_check.h"
#include "formats/gmt_testutil.h"
#include "recorder/snapshot/snap_import.h"

using gmt_test::CheckSalvage;
using gmt_test::ReadAll;
using gmt_test::TempPath;

namespace {

void Find(const std::string &dir, const std::string &ext, std::vector<std::string> *out) {
  DIR *d = opendir(dir.c_str());
  if (!d) return;
  while (dirent *e = readdir(d)) {
    std::string n = e->d_name, p = dir + "/" + n;
    if (n == "." || n == "..") continue;
    struct stat sb;
    if (stat(p.c_str(), &sb) != 0) continue;
    if (S_ISDIR(sb.st_mode)) Find(p, ext, out);
    else if (n.size() > ext.size() && n.compare(n.size() - ext.size(), ext.size(), ext) == 0) out->push_back(p);
  }
  closedir(d);
  std::sort(out->begin(), out->end());
}

// Chunks of the re-cut traces: 48, or SALVAGE_RECUT_CHUNKS (at least 4): .bazelrc sets 6 under
// the sanitizers, where every chunk, the index and the footer are still damaged in turn (the
// same paths) at an eighth of the cost; the optimized run keeps 48.
int RecutChunks() {
  const char *v = getenv("SALVAGE_RECUT_CHUNKS");
  return v && *v ? std::max(4, atoi(v)) : 48;
}

// The same header, events and strings, cut into chunks of 64 events, or into RecutChunks()
// chunks when that is fewer (the check costs chunks x events); strings keep their ids.
std::string Recut(const std::string &path) {
  gmt_reader_t *r = nullptr;
  gm_err_t err;
  EXPECT_EQ(gmt_reader_open(&r, path.c_str(), &err), GM_OK) << err.msg;
  if (!r) return "";
  std::vector<gmt_event_t> evs;
  gmt_event_t e;
  while (gmt_reader_next(r, &e, &err) == GM_OK) evs.push_back(e);
  std::map<uint32_t, std::string> strs;
  for (auto &x : evs)
    if (x.callsite && gmt_reader_string(r, x.callsite)) strs[x.callsite] = gmt_reader_string(r, x.callsite);
  std::string out = TempPath("recut.zst");
  gmt_writer_opts_t o = {};
  o.chunk_events = std::max<uint32_t>(64, (uint32_t)(evs.size() / RecutChunks() + 1));
  gmt_writer_t *w = nullptr;
  EXPECT_EQ(gmt_writer_open(&w, out.c_str(), gmt_reader_header(r), &o, &err), GM_OK) << err.msg;
  gmt_reader_close(r);
  for (auto &s : strs) EXPECT_EQ(gmt_writer_intern_id(w, s.first, s.second.c_str(), &err), GM_OK) << err.msg;
  for (auto &x : evs) EXPECT_EQ(gmt_writer_append(w, &x, &err), GM_OK) << err.msg;
  EXPECT_EQ(gmt_writer_close(w, &err), GM_OK) << err.msg;
  std::string t = ReadAll(out);
  remove(out.c_str());
  return t;
}

void CheckFile(const std::string &path, const std::string &name, int *traces, int *reads) {
  auto t0 = std::chrono::steady_clock::now();
  int n = CheckSalvage(ReadAll(path), name);
  n += CheckSalvage(Recut(path), name + " re-cut into small chunks");
  *reads += n;
  (*traces)++;
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  printf("%-60s %6d damaged reads checked in %.2f s\n", name.c_str(), n, s);
}

}  // namespace

TEST(SalvageRealTraces, EveryChunkOfEveryRecordedTrace) {
  std::vector<std::string> files;
  Find("traces", ".zst", &files);
  files.erase(std::remove_if(files.begin(), files.end(),
                             [](const std::string &f) { return f.find("/invalid/") != std::string::npos; }),
              files.end());
  ASSERT_GE(files.size(), 31u) << "traces/recorded (and its callbacks/, jax/), traces/examples, traces/valid";
  int traces = 0, reads = 0;
  for (auto &f : files) CheckFile(f, f, &traces, &reads);
  printf("%d traces, %d damaged reads; re-cut into at most %d chunks%s\n", traces, reads, RecutChunks(),
         RecutChunks() != 48 ? " (SALVAGE_RECUT_CHUNKS: the optimized run cuts 48)" : "");
}

TEST(SalvageRealTraces, EveryChunkOfEveryImportedSnapshot) {
  std::vector<std::string> pickles;
  Find("traces/snapshots", ".pickle", &pickles);
  ASSERT_GE(pickles.size(), 30u);
  int traces = 0, reads = 0;
  for (auto &p : pickles) {
    std::string out = TempPath("snap.zst");
    gm_err_t err;
    ASSERT_EQ(snap_import_file(p.c_str(), out.c_str(), nullptr, nullptr, &err), GM_OK) << p << ": " << err.msg;
    CheckFile(out, p + " (imported)", &traces, &reads);
    remove(out.c_str());
  }
  printf("%d snapshots, %d damaged reads; re-cut into at most %d chunks%s\n", traces, reads, RecutChunks(),
         RecutChunks() != 48 ? " (SALVAGE_RECUT_CHUNKS: the optimized run cuts 48)" : "");
}
