// gmt_mark_test.cc: coverage marks written after the fact (SPEC.md §3.4), in place inside the
// header's room (tag 16): a trace cut by a kill (gmt_trace_mark) and a writer that could not go on
// (gmt_writer_stop, a file size limit standing in for a full disk).
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern "C" {
#include "formats/gmt_internal.h"
}

namespace {

std::string TmpPath(const char *name) {
  const char *d = getenv("TEST_TMPDIR");
  return std::string(d ? d : "/tmp") + "/" + name;
}

std::string Slurp(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

gmt_event_t Alloc(uint64_t ts, uint64_t addr) {
  gmt_event_t e;
  memset(&e, 0, sizeof e);
  e.kind = GMT_EV_ALLOC;
  e.ts_ns = ts;
  e.addr = addr;
  e.size = 4096;
  e.stream = GMT_STREAM_NONE;
  e.callsite = GMT_NO_STRING;
  return e;
}

// Events and coverage as a salvaging reader sees them.
struct Seen {
  std::vector<gmt_event_t> evs;
  gmt_reader_stats_t st;
  gmt_coverage_t cov;
};
Seen Read(const std::string &path) {
  Seen s{};
  gmt_reader_t *r = nullptr;
  gm_err_t err;
  gm_err_clear(&err);
  EXPECT_EQ(gmt_reader_open_flags(&r, path.c_str(), GMT_READ_SALVAGE, &err), GM_OK) << err.msg;
  if (!r) return s;
  gmt_event_t ev;
  while (gmt_reader_next(r, &ev, &err) == GM_OK) s.evs.push_back(ev);
  s.st = *gmt_reader_stats(r);
  gmt_coverage(gmt_reader_header(r), &s.st, &s.cov);
  gmt_reader_close(r);
  return s;
}

// A trace of n events in chunks of 100, left as a killed process leaves it (no index).
void WriteCut(const std::string &path, size_t room, int n) {
  gmt_header_t h;
  gmt_header_init(&h);
  h.pid = 77;
  h.room = room;
  gmt_writer_opts_t o{};
  o.chunk_events = 100;
  gmt_writer_t *w;
  gm_err_t err;
  ASSERT_EQ(gmt_writer_open(&w, path.c_str(), &h, &o, &err), GM_OK) << err.msg;
  for (int i = 0; i < n; i++) {
    gmt_event_t e = Alloc(1000 + i, 0x1000 + 64 * i);
    ASSERT_EQ(gmt_writer_append(w, &e, &err), GM_OK);
  }
  ASSERT_EQ(gmt_writer_flush(w, &err), GM_OK);
  gmt_writer_abandon(w);
  gmt_header_free(&h);
}

TEST(HeaderRoom, EveryRoomButOneRoundTripsAndFits) {
  for (size_t room : {0, 2, 3, 100, 128, 129, 130, 131, 258, 259, 1024}) {
    gmt_header_t h;
    gmt_header_init(&h);
    gmt_header_kv_set(&h, "k", "v", nullptr);
    h.room = room;
    gmt_buf_t b = {0}, bare = {0};
    ASSERT_EQ(gmt_header_encode(&h, 1, 1, &b), 0);
    h.room = 0;
    ASSERT_EQ(gmt_header_encode(&h, 1, 1, &bare), 0);
    EXPECT_EQ(b.len, bare.len + room) << room;
    gmt_header_t d;
    size_t used = 0;
    ASSERT_EQ(gmt_header_decode(b.p, b.len, &d, &used, nullptr), GM_OK) << room;
    EXPECT_EQ(used, b.len);
    EXPECT_EQ(d.room, room);
    EXPECT_STREQ(gmt_header_kv_get(&d, "k"), "v");
    // the same frame length with a longer value: the room shrinks by as much
    gmt_header_kv_set(&d, "k", "vvvvvvvvvv", nullptr);
    gmt_buf_t fit = {0};
    int r = gmt_header_encode_fit(&d, b.len, 1, 1, &fit);
    if (room >= 9 + 2 && room - 9 != 1) {
      ASSERT_EQ(r, 0) << room;
      EXPECT_EQ(fit.len, b.len);
      gmt_header_t d2;
      ASSERT_EQ(gmt_header_decode(fit.p, fit.len, &d2, &used, nullptr), GM_OK);
      EXPECT_STREQ(gmt_header_kv_get(&d2, "k"), "vvvvvvvvvv");
      EXPECT_EQ(d2.room, room - 9);
      gmt_header_free(&d2);
    } else {
      EXPECT_EQ(r, -1) << room;  // too little room (or exactly one byte left)
    }
    gmt_buf_free(&b);
    gmt_buf_free(&bare);
    gmt_buf_free(&fit);
    gmt_header_free(&d);
    gmt_header_free(&h);
  }
}

TEST(TraceMark, AKilledTraceSaysWhereItStopsAndKeepsItsChunks) {
  const std::string path = TmpPath("killed.zst");
  WriteCut(path, 1024, 250);
  const std::string before = Slurp(path);
  gmt_coverage_t add{};
  add.partial = 1;
  add.why = GMT_COV_KILLED;
  add.has_end = 1;
  add.to_event = 250;
  add.to_ns = 1249;
  add.signal = SIGKILL;
  add.has_killed_at = 1;
  add.killed_ns = 3000000000ull;
  add.flush_ns = 500000000ull;
  gm_err_t err;
  ASSERT_EQ(gmt_trace_mark(path.c_str(), &add, &err), GM_OK) << err.msg;
  const std::string after = Slurp(path);
  ASSERT_EQ(after.size(), before.size());
  // only the header frame changed; its length did not
  size_t hlen = 8 + (uint8_t)before[4] + ((uint8_t)before[5] << 8) + ((uint8_t)before[6] << 16);
  EXPECT_EQ(after.substr(hlen), before.substr(hlen));
  EXPECT_NE(after.substr(0, hlen), before.substr(0, hlen));
  Seen s = Read(path);
  EXPECT_EQ(s.evs.size(), 250u);
  EXPECT_TRUE(s.st.truncated);
  EXPECT_TRUE(s.cov.partial);
  EXPECT_EQ(s.cov.why, GMT_COV_KILLED | GMT_COV_TRUNCATED);
  EXPECT_EQ(s.cov.signal, SIGKILL);
  EXPECT_EQ(s.cov.to_event, 250u);
  char line[1024];
  std::string t = gmt_coverage_text(&s.cov, line, sizeof line);
  EXPECT_EQ(t.rfind("PARTIAL trace: it stops at t=0.000 s, after 250 events; what came after is missing", 0), 0u) << t;
  EXPECT_NE(t.find("killed by SIGKILL at t=3.000 s before it finished its trace: requests it made in its last <= 0.5 s"),
            std::string::npos) << t;
  EXPECT_EQ(t.find("ends before its index"), std::string::npos) << t;  // the kill says why

  // marks already there are kept: a second mark adds to them
  gmt_coverage_t more{};
  more.partial = 1;
  more.why = GMT_COV_DROPPED;
  ASSERT_EQ(gmt_trace_mark(path.c_str(), &more, &err), GM_OK) << err.msg;
  s = Read(path);
  EXPECT_EQ(s.cov.why & (GMT_COV_KILLED | GMT_COV_DROPPED), GMT_COV_KILLED | GMT_COV_DROPPED);
  EXPECT_EQ(s.cov.signal, SIGKILL);
}

TEST(TraceMark, WithoutRoomTheFileIsLeftAlone) {
  const std::string path = TmpPath("noroom.zst");
  WriteCut(path, 0, 10);
  const std::string before = Slurp(path);
  gmt_coverage_t add{};
  add.partial = 1;
  add.why = GMT_COV_KILLED;
  gm_err_t err;
  gm_err_clear(&err);
  EXPECT_EQ(gmt_trace_mark(path.c_str(), &add, &err), GM_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(err.msg).find("no room"), std::string::npos) << err.msg;
  EXPECT_EQ(Slurp(path), before);
  EXPECT_EQ(gmt_trace_mark(TmpPath("absent.zst").c_str(), &add, &err), GM_ERR_IO);
}

// What a recorder learns after the trace began (a limit the job set itself) goes into the header
// in place: the chunks untouched, a key already there replaced; too much for the room, or no
// room, leaves the file as it was.
TEST(TraceSetKv, SettingsLandInTheRoomAndNothingElseMoves) {
  const std::string path = TmpPath("setkv.zst");
  WriteCut(path, 1024, 250);
  const std::string before = Slurp(path);
  const char *kv[] = {"torch.per_process_memory_fraction", "0.02", "oom.message", "first try"};
  gm_err_t err;
  ASSERT_EQ(gmt_trace_set_kv(path.c_str(), kv, 2, &err), GM_OK) << err.msg;
  const char *again[] = {"oom.message", "CUDA out of memory. Tried to allocate 2.00 GiB; 2.80 GiB allowed"};
  ASSERT_EQ(gmt_trace_set_kv(path.c_str(), again, 1, &err), GM_OK) << err.msg;
  const std::string after = Slurp(path);
  ASSERT_EQ(after.size(), before.size());
  size_t hlen = 8 + (uint8_t)before[4] + ((uint8_t)before[5] << 8) + ((uint8_t)before[6] << 16);
  EXPECT_EQ(after.substr(hlen), before.substr(hlen));
  gmt_reader_t *r = nullptr;
  ASSERT_EQ(gmt_reader_open_flags(&r, path.c_str(), GMT_READ_SALVAGE, &err), GM_OK) << err.msg;
  const gmt_header_t *h = gmt_reader_header(r);
  ASSERT_NE(gmt_header_kv_get(h, "torch.per_process_memory_fraction"), nullptr);
  EXPECT_STREQ(gmt_header_kv_get(h, "torch.per_process_memory_fraction"), "0.02");
  EXPECT_STREQ(gmt_header_kv_get(h, "oom.message"), again[1]);
  EXPECT_EQ(h->pid, 77u);
  gmt_reader_close(r);
  EXPECT_EQ(Read(path).evs.size(), 250u);

  std::string big(2000, 'x');
  const char *huge[] = {"oom.message", big.c_str()};
  const std::string kept = Slurp(path);
  EXPECT_EQ(gmt_trace_set_kv(path.c_str(), huge, 1, &err), GM_ERR_UNSUPPORTED);
  EXPECT_EQ(Slurp(path), kept);
  const std::string bare = TmpPath("setkv_noroom.zst");
  WriteCut(bare, 0, 10);
  const std::string b0 = Slurp(bare);
  EXPECT_EQ(gmt_trace_set_kv(bare.c_str(), kv, 2, &err), GM_ERR_UNSUPPORTED);
  EXPECT_EQ(Slurp(bare), b0);
}

// The text form keeps the room (#room=N), so a trace written from text can be marked later.
TEST(HeaderRoom, TextFormKeepsIt) {
  const char text[] =
      "#pid=5\n#room=300\n"
      "ts_ns,kind,device,stream,addr,size,mem_kind,flags,corr_id,callsite,context\n"
      "1000,alloc,0,-,0x1000,4096,device,0x0,0,0,0\n";
  FILE *in = fmemopen((void *)text, sizeof text - 1, "r");
  ASSERT_NE(in, nullptr);
  const std::string path = TmpPath("room_text.zst");
  gm_err_t err;
  gm_err_clear(&err);
  ASSERT_EQ(gmt_csv_import(in, "text", path.c_str(), nullptr, &err), GM_OK) << err.msg;
  fclose(in);
  gmt_reader_t *r;
  ASSERT_EQ(gmt_reader_open(&r, path.c_str(), &err), GM_OK) << err.msg;
  EXPECT_EQ(gmt_reader_header(r)->room, 300u);
  char *buf = nullptr;
  size_t len = 0;
  FILE *out = open_memstream(&buf, &len);
  ASSERT_EQ(gmt_csv_export(r, out, &err), GM_OK) << err.msg;
  fclose(out);
  gmt_reader_close(r);
  EXPECT_NE(std::string(buf, len).find("\n#room=300\n"), std::string::npos) << buf;
  free(buf);
  gmt_coverage_t add{};
  add.partial = 1;
  add.why = GMT_COV_KILLED;
  EXPECT_EQ(gmt_trace_mark(path.c_str(), &add, &err), GM_OK) << err.msg;
  EXPECT_TRUE(Read(path).cov.why & GMT_COV_KILLED);
}

// The disk fills (a file size limit here; SIGXFSZ ignored as the recorder's writer thread blocks
// it): the writer stops, the file ends with its last whole chunk and says where and why.
TEST(WriterStop, AFullDiskLeavesAMarkedReadableTrace) {
  const std::string path = TmpPath("full.zst");
  const int per_chunk = 1000;
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {40000, 40000};
    setrlimit(RLIMIT_FSIZE, &rl);
    gmt_header_t h;
    gmt_header_init(&h);
    h.room = 1024;
    gmt_writer_opts_t o{};
    o.chunk_events = per_chunk;
    gmt_writer_t *w;
    gm_err_t err;
    if (gmt_writer_open(&w, path.c_str(), &h, &o, &err) != GM_OK) _exit(3);
    uint64_t x = 88172645463325252ull;  // incompressible sizes: chunks of real bytes
    gm_status_t s = GM_OK;
    for (int i = 0; s == GM_OK && i < 1000000; i++) {
      gmt_event_t e = Alloc(1000 + i, 0x1000 + 64 * (uint64_t)i);
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      e.size = x >> 20;
      s = gmt_writer_append(w, &e, &err);
    }
    if (s == GM_OK) _exit(4);  // the limit was never reached
    gmt_coverage_t why{};
    snprintf(why.stopped, sizeof why.stopped, "%.200s", err.msg);
    _exit(gmt_writer_stop(w, &why, &err) == GM_OK ? 0 : 5);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  ASSERT_EQ(WEXITSTATUS(status), 0);
  struct stat sb;
  ASSERT_EQ(stat(path.c_str(), &sb), 0);
  EXPECT_LE(sb.st_size, 40000);
  Seen s = Read(path);
  ASSERT_GT(s.evs.size(), 0u);
  EXPECT_EQ(s.evs.size() % per_chunk, 0u);  // whole chunks only
  EXPECT_EQ(s.st.damaged_chunks, 0u);
  EXPECT_TRUE(s.cov.partial);
  EXPECT_TRUE(s.cov.why & GMT_COV_STOPPED);
  ASSERT_TRUE(s.cov.has_end);
  EXPECT_EQ(s.cov.to_event, s.evs.size());
  EXPECT_EQ(s.cov.to_ns, s.evs.back().ts_ns);
  EXPECT_NE(std::string(s.cov.stopped).find("File too large"), std::string::npos) << s.cov.stopped;
  char line[1024];
  std::string t = gmt_coverage_text(&s.cov, line, sizeof line);
  EXPECT_NE(t.find("after " + std::to_string(s.evs.size()) + " events"), std::string::npos) << t;
  EXPECT_NE(t.find("the recorder stopped before the run ended (write: File too large)"), std::string::npos) << t;
}

// Writes 10 chunks of 1000 events, then seals: returns the file's size before the index, or
// exits the child with the seal's failure; with `limit` the file size limit (SIGXFSZ ignored).
// The content is the same every time, so a first run without a limit finds where the index begins.
int SealChild(const std::string &path, rlim_t limit, uint64_t *index_off) {
  signal(SIGXFSZ, SIG_IGN);
  if (limit) {
    struct rlimit rl = {limit, limit};
    setrlimit(RLIMIT_FSIZE, &rl);
  }
  gmt_header_t h;
  gmt_header_init(&h);
  h.room = 1024;
  gmt_writer_opts_t o{};
  o.chunk_events = 1000;
  gmt_writer_t *w;
  gm_err_t err;
  if (gmt_writer_open(&w, path.c_str(), &h, &o, &err) != GM_OK) return 3;
  for (int i = 0; i < 10000; i++) {
    gmt_event_t e = Alloc(1000 + i, 0x1000 + 64 * (uint64_t)i);
    if (gmt_writer_append(w, &e, &err) != GM_OK) return 4;
  }
  if (gmt_writer_flush(w, &err) != GM_OK) return 5;
  if (index_off) *index_off = gmt_writer_bytes(w);
  if (gmt_writer_seal(w, &err) == GM_OK) return gmt_writer_close(w, &err) == GM_OK ? 0 : 6;
  gmt_coverage_t why{};
  snprintf(why.stopped, sizeof why.stopped, "cannot write trace: %.200s", err.msg);
  return gmt_writer_stop(w, &why, &err) == GM_OK ? 10 : 7;  // 10: sealing failed, stopped
}

// The disk fills between the last chunk and the end of the index (the recorder's close at a
// job's end): the writer survives the failed seal, and its stop leaves every event, whole
// chunks, marked where it stops; not half an index that no mark explains.
TEST(WriterStop, AFullDiskAtTheIndexKeepsEveryEventAndSaysSo) {
  const std::string path = TmpPath("sealfull.zst");
  uint64_t index_off = 0;
  ASSERT_EQ(SealChild(path, 0, &index_off), 0);  // no limit: where the index starts
  struct stat sb;
  ASSERT_EQ(stat(path.c_str(), &sb), 0);
  ASSERT_GT((uint64_t)sb.st_size, index_off + 20);
  ASSERT_EQ(Read(path).evs.size(), 10000u);
  unlink(path.c_str());
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(SealChild(path, (rlim_t)index_off + 20, nullptr));
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  ASSERT_EQ(WEXITSTATUS(status), 10);  // the seal failed and the writer was there to stop
  ASSERT_EQ(stat(path.c_str(), &sb), 0);
  EXPECT_LE((uint64_t)sb.st_size, index_off + 20);
  Seen s = Read(path);
  EXPECT_EQ(s.evs.size(), 10000u);
  EXPECT_EQ(s.st.damaged_chunks, 0u);
  EXPECT_TRUE(s.cov.partial);
  EXPECT_TRUE(s.cov.why & GMT_COV_STOPPED);
  ASSERT_TRUE(s.cov.has_end);
  EXPECT_EQ(s.cov.to_event, 10000u);
  EXPECT_NE(std::string(s.cov.stopped).find("File too large"), std::string::npos) << s.cov.stopped;
}

// A disk full before the header is written: no file is left that no reader could use.
TEST(WriterStop, NoHeaderNoFile) {
  const std::string path = TmpPath("noheader.zst");
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = {0, 0};
    setrlimit(RLIMIT_FSIZE, &rl);
    gmt_writer_t *w;
    _exit(gmt_writer_open(&w, path.c_str(), nullptr, nullptr, nullptr) == GM_ERR_IO ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  struct stat sb;
  EXPECT_NE(stat(path.c_str(), &sb), 0);
}

}  // namespace
