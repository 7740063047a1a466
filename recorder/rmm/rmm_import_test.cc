// rmm_import_test.cc: RMM allocation logs in the form RMM writes them (logging_resource_adaptor_impl.cpp:
// "%t,%H:%M:%S.%f," then "allocate,%p,%zu,STREAM"), read back from the trace; each bad case gives
// one error naming its line and leaves no trace behind; each tolerance is counted.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>
#include "recorder/rmm/rmm_import.h"

namespace {

const char kHead[] = "Thread,Time,Action,Pointer,Size,Stream\n";

std::string TempPath(const std::string &name) {
  const char *dir = getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + std::to_string(getpid()) + "_" + name;
}

struct Result {
  gm_status_t st;
  std::string msg;
  rmm_import_stats_t stats;
  std::vector<gmt_event_t> evs;
  std::vector<std::string> callsites;
  std::string framework, holds;
};

Result Import(const std::string &text, const std::string &name = "rmm_log.csv") {
  Result r;
  std::string out = TempPath("rmm.zst");
  unlink(out.c_str());
  FILE *in = fmemopen((void *)text.data(), text.size(), "r");
  gm_err_t err = {};
  r.st = rmm_import(in, name.c_str(), out.c_str(), 0, nullptr, &r.stats, &err);
  fclose(in);
  r.msg = err.msg;
  gmt_reader_t *rd = nullptr;
  if (r.st != GM_OK) {
    EXPECT_NE(access(out.c_str(), F_OK), 0) << "a failed import left " << out;
    return r;
  }
  EXPECT_EQ(gmt_reader_open(&rd, out.c_str(), &err), GM_OK) << err.msg;
  char fw[128];
  r.framework = gmt_header_frameworks_text(gmt_reader_header(rd), fw, sizeof fw);
  r.holds = gmt_trace_holds(gmt_reader_header(rd), -1, 0);
  gmt_event_t ev;
  while (gmt_reader_next(rd, &ev, &err) == GM_OK) {
    r.evs.push_back(ev);
    const char *cs = gmt_reader_string(rd, ev.callsite);
    r.callsites.push_back(cs ? cs : "");
  }
  gmt_reader_close(rd);
  unlink(out.c_str());
  return r;
}

TEST(RmmImport, RmmsOwnFormat) {
  Result r = Import(std::string(kHead) +
                    "140573312345856,10:00:00.000100,allocate,0x7f8a40000000,1024,0x55d0c0a1b2c0\n"
                    "140573312345900,10:00:00.000350,allocate,0x7f8a40000400,2048,0\n"
                    "140573312345856,10:00:01.500100,free,0x7f8a40000000,1024,0x55d0c0a1b2c0\n"
                    "140573312345856,10:00:02.000000,allocate failure,(nil),85899345920,0x55d0c0a1b2c0\n");
  ASSERT_EQ(r.st, GM_OK) << r.msg;
  ASSERT_EQ(r.evs.size(), 4u);
  EXPECT_EQ(r.evs[0].kind, GMT_EV_ALLOC);
  EXPECT_EQ(r.evs[0].ts_ns, 0u);
  EXPECT_EQ(r.evs[0].addr, 0x7f8a40000000u);
  EXPECT_EQ(r.evs[0].size, 1024u);
  EXPECT_EQ(r.evs[0].stream, 0x55d0c0a1b2c0u);
  EXPECT_EQ(r.evs[0].mem_kind, GMT_MEM_DEVICE);
  EXPECT_EQ(r.callsites[0], "RMM thread 140573312345856");
  EXPECT_EQ(r.evs[1].ts_ns, 250000u);  // microseconds of the time of day, relative to the first line
  EXPECT_EQ(r.evs[1].stream, 0u);
  EXPECT_EQ(r.callsites[1], "RMM thread 140573312345900");
  EXPECT_EQ(r.evs[2].kind, GMT_EV_FREE);
  EXPECT_EQ(r.evs[2].addr, 0x7f8a40000000u);
  EXPECT_EQ(r.evs[2].ts_ns, 1500000000u);
  EXPECT_EQ(r.evs[3].kind, GMT_EV_ALLOC_FAILED);
  EXPECT_EQ(r.evs[3].size, 85899345920u);
  EXPECT_EQ(r.stats.allocs, 2u);
  EXPECT_EQ(r.stats.frees, 1u);
  EXPECT_EQ(r.stats.failures, 1u);
  EXPECT_EQ(r.stats.threads, 2u);
  EXPECT_EQ(r.stats.streams, 2u);
  EXPECT_EQ(r.stats.live_at_end, 1u);
  EXPECT_EQ(r.stats.live_bytes_at_end, 2048u);
  EXPECT_EQ(r.stats.peak_live_bytes, 3072u);
  EXPECT_EQ(r.stats.device, 0);
  EXPECT_EQ(r.framework, "RAPIDS RMM unknown");
  EXPECT_NE(r.holds.find("not modelled"), std::string::npos) << r.holds;
}

// The forms RMM's user guide and older releases show: seconds since the epoch, `deallocate`,
// fmt's 0x0 for a null pointer; CRLF line ends; a device from Python's per-device file name.
TEST(RmmImport, OtherWrittenForms) {
  Result r = Import(std::string("Thread,Time,Action,Pointer,Size,Stream\r\n") +
                        "1,1634567890.123456,allocate,0x7f8a40000000,1024,0x7f8a38001020\r\n"
                        "1,1634567890.234567,deallocate,0x7f8a40000000,1024,0x7f8a38001020\r\n"
                        "1,1634567890.3,allocate,0x0,0,0x0\r\n",
                    "/logs/rmm_log.dev3.csv");
  ASSERT_EQ(r.st, GM_OK) << r.msg;
  ASSERT_EQ(r.evs.size(), 2u);
  EXPECT_EQ(r.evs[1].kind, GMT_EV_FREE);
  EXPECT_EQ(r.evs[1].ts_ns, 111111000u);
  EXPECT_EQ(r.evs[0].device, 3);
  EXPECT_EQ(r.stats.device, 3);
  EXPECT_EQ(r.stats.epoch_time, 1);
  EXPECT_EQ(r.stats.null_skipped, 1u);
}

TEST(RmmImport, DeviceFromFileName) {
  EXPECT_EQ(rmm_log_device("rmm_log.dev1.csv"), 1);
  EXPECT_EQ(rmm_log_device("/a.dev9/rmm_log.csv"), 0);  // a directory's name does not count
  EXPECT_EQ(rmm_log_device("rmm_log.dev12"), 12);
  EXPECT_EQ(rmm_log_device("rmm_log.device.csv"), 0);
  EXPECT_EQ(rmm_log_device("rmm.csv"), 0);
}

// Tolerances: a small step back (clamped), midnight (a day added), a last line without its
// newline (dropped), null frees and zero-byte null allocations (skipped), blank lines.
TEST(RmmImport, Tolerances) {
  Result r = Import(std::string(kHead) +
                    "7,23:59:59.900000,allocate,0x1000,512,0x1\n"
                    "7,23:59:59.800000,allocate,0x2000,512,0x1\n"  // 100 ms back: clamped
                    "\n"
                    "7,00:00:00.100000,free,0x1000,512,0x1\n"      // midnight
                    "7,00:00:00.200000,free,(nil),0,0x1\n"
                    "7,00:00:00.300000,allocate,0x3000,51");       // cut short
  ASSERT_EQ(r.st, GM_OK) << r.msg;
  ASSERT_EQ(r.evs.size(), 3u);
  EXPECT_EQ(r.evs[1].ts_ns, 0u);
  EXPECT_EQ(r.evs[2].ts_ns, 200000000u);
  EXPECT_EQ(r.stats.clamped, 1u);
  EXPECT_EQ(r.stats.midnights, 1u);
  EXPECT_EQ(r.stats.truncated_last_line, 1);
  EXPECT_EQ(r.stats.null_skipped, 1u);
  EXPECT_EQ(r.stats.allocs, 2u);
}

struct Bad {
  const char *what, *lines, *error;
};

// Each bad case: one error that names the line and says what is wrong; no trace written.
TEST(RmmImport, BadInput) {
  const Bad cases[] = {
      {"not RMM's header", "Thread,Time,Action\n1,10:00:00.0,allocate,0x1,1,0\n",
       "line 1: not an RMM allocation log: expected the line 'Thread,Time,Action,Pointer,Size,Stream'"},
      {"too few columns", "@1,10:00:00.000001,allocate,0x10,5\n", "line 2: too few columns: expected 6"},
      {"too many columns", "@1,10:00:00.000001,allocate,0x10,5,0,9\n", "line 2: too many columns"},
      {"unknown action", "@1,10:00:00.000001,alloc,0x10,5,0\n", "line 2: unknown Action 'alloc'"},
      {"bad size", "@1,10:00:00.000001,allocate,0x10,-5,0\n", "line 2: bad Size '-5'"},
      {"bad pointer", "@1,10:00:00.000001,allocate,zz,5,0\n", "line 2: bad Pointer 'zz'"},
      {"bad stream", "@1,10:00:00.000001,allocate,0x10,5,0xg\n", "line 2: bad Stream '0xg'"},
      {"bad time", "@1,25:00:00.000001,allocate,0x10,5,0\n", "line 2: bad Time '25:00:00.000001'"},
      {"bad thread", "@x1,10:00:00.000001,allocate,0x10,5,0\n", "line 2: bad Thread 'x1'"},
      {"free of an unknown pointer", "@1,10:00:00.000001,allocate,0x10,5,0\n1,10:00:00.000002,free,0x20,5,0\n",
       "line 3: free of 0x20, which is not allocated"},
      {"double free", "@1,10:00:00.1,allocate,0x10,5,0\n1,10:00:00.2,free,0x10,5,0\n1,10:00:00.3,free,0x10,5,0\n",
       "line 4: free of 0x10, which is not allocated"},
      {"free with another size", "@1,10:00:00.1,allocate,0x10,5,0\n1,10:00:00.2,free,0x10,6,0\n",
       "line 3: free of 0x10 with 6 bytes; line 2 allocated it with 5"},
      {"allocate over a live block", "@1,10:00:00.1,allocate,0x10,5,0\n1,10:00:00.2,allocate,0x10,5,0\n",
       "line 3: allocate at 0x10, which line 2 allocated and no line freed"},
      {"allocate of bytes at null", "@1,10:00:00.1,allocate,(nil),5,0\n", "line 2: allocate of 5 bytes at a null pointer"},
      {"time going back", "@1,10:00:05.0,allocate,0x10,5,0\n1,10:00:01.0,allocate,0x20,5,0\n",
       "line 3: Time 10:00:01.0 is 4.000 s earlier than the line before"},
      {"time in two forms", "@1,10:00:05.0,allocate,0x10,5,0\n1,1634567890.1,allocate,0x20,5,0\n",
       "line 3: Time '1634567890.1' is in another form"},
      {"NUL byte", "@1,10:00:00.1,allocate,0x10,5\0,0\n", "line 2: NUL byte in the line"},
      {"empty", "", "empty: not an RMM allocation log"},
  };
  for (const Bad &b : cases) {
    std::string text = b.lines;
    static const char nul[] = "@1,10:00:00.1,allocate,0x10,5\0,0\n";
    if (!strcmp(b.what, "NUL byte")) text = std::string(nul, sizeof nul - 1);
    if (!text.empty() && text[0] == '@') text = std::string(kHead) + text.substr(1);
    Result r = Import(text);
    EXPECT_EQ(r.st, GM_ERR_FORMAT) << b.what;
    EXPECT_EQ(r.msg.find(b.error), 0u) << b.what << ": got '" << r.msg << "'";
    EXPECT_EQ(r.msg.find('\n'), std::string::npos) << b.what;
  }
}

// A log longer than one chunk, with many live blocks: what the replay reads is what was logged.
TEST(RmmImport, ManyLines) {
  std::string text = kHead;
  char line[128];
  const int n = 200000;
  for (int i = 0; i < n; i++) {
    snprintf(line, sizeof line, "%d,10:%02d:%02d.%06d,allocate,0x%x,%d,0x%x\n", i % 3, (i / 60000000) % 60,
             (i / 1000000) % 60, i % 1000000, 0x1000 + i * 16, 16 + i % 100, i % 4);
    text += line;
    if (i % 2) {
      snprintf(line, sizeof line, "%d,10:%02d:%02d.%06d,free,0x%x,%d,0x%x\n", i % 3, (i / 60000000) % 60,
               (i / 1000000) % 60, i % 1000000, 0x1000 + (i - 1) * 16, 16 + (i - 1) % 100, i % 4);
      text += line;
    }
  }
  Result r = Import(text);
  ASSERT_EQ(r.st, GM_OK) << r.msg;
  EXPECT_EQ(r.evs.size(), (size_t)(n + n / 2));
  EXPECT_EQ(r.stats.allocs, (uint64_t)n);
  EXPECT_EQ(r.stats.frees, (uint64_t)n / 2);
  EXPECT_EQ(r.stats.threads, 3u);
  EXPECT_EQ(r.stats.streams, 4u);
  EXPECT_EQ(r.stats.live_at_end, (uint64_t)n / 2);
}

}  // namespace
