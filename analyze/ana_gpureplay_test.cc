// ana_gpureplay_test.cc: the analyzer's side of a replay without the replayer: a child's
// stdout and stderr captured whole (both large at once: no stall), its exit and signal, its
// error line picked from its warnings; the setting a trace ran with; and `oom`'s reading of
// gpureplay --explain-oom's object, said in text and passed on as JSON with the paste line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "analyze/ana_gpureplay.h"
#include "formats/gmt.h"

namespace {

constexpr uint64_t MiB = 1ull << 20;

TEST(AnaTool, CapturesBothStreamsWhole) {
  // 3 MB on each: far past a pipe's 64 KiB, so a reader of one stream only would stall.
  char *argv[] = {(char *)"/bin/sh", (char *)"-c",
                  (char *)"head -c 3000000 /dev/zero | tr '\\0' a; head -c 3000000 /dev/zero | tr '\\0' b >&2; "
                          "echo x; exit 3",
                  nullptr};
  gm_tool_run_t r;
  gm_err_t err = {};
  ASSERT_EQ(gm_tool_capture(argv, NULL, &r, &err), GM_OK) << err.msg;
  EXPECT_EQ(r.exit_status, 3);
  EXPECT_EQ(r.signal, 0);
  EXPECT_EQ(r.out_len, 3000002u);
  EXPECT_EQ(r.err_len, 3000000u);
  EXPECT_EQ(std::string(r.out + 3000000), "x\n");
  EXPECT_EQ(r.err[2999999], 'b');
  gm_tool_run_free(&r);
}

TEST(AnaTool, SignalAndMissingBinary) {
  char *argv[] = {(char *)"/bin/sh", (char *)"-c", (char *)"echo 'gpureplay: warning: w' >&2; kill -9 $$", nullptr};
  gm_tool_run_t r;
  gm_err_t err = {};
  ASSERT_EQ(gm_tool_capture(argv, NULL, &r, &err), GM_OK) << err.msg;
  EXPECT_EQ(r.exit_status, -1);
  EXPECT_EQ(r.signal, 9);
  char msg[256], *rest = nullptr;
  EXPECT_EQ(gm_tool_message(&r, "gpureplay", msg, sizeof msg, &rest), 0);
  EXPECT_STREQ(msg, "gpureplay was killed by signal 9");
  EXPECT_STREQ(rest, "gpureplay: warning: w\n");
  free(rest);
  gm_tool_run_free(&r);
  char *missing[] = {(char *)"/nonexistent/gpureplay", nullptr};
  EXPECT_EQ(gm_tool_capture(missing, NULL, &r, &err), GM_ERR_IO);
  EXPECT_STREQ(err.msg, "cannot run '/nonexistent/gpureplay': No such file or directory");
}

TEST(AnaTool, MessageFromWarnings) {
  gm_tool_run_t r = {};
  char text[] = "gpureplay: warning: 'x.zst' is damaged\ngpureplay: error: cannot open 'x.zst': chunk 1: boom\n";
  r.err = text;
  r.err_len = strlen(text);
  r.exit_status = 1;
  char msg[256], *rest = nullptr;
  EXPECT_EQ(gm_tool_message(&r, "gpureplay", msg, sizeof msg, &rest), 1);
  EXPECT_STREQ(msg, "cannot open 'x.zst': chunk 1: boom");
  EXPECT_STREQ(rest, "gpureplay: warning: 'x.zst' is damaged\n");
  free(rest);
  // A usage error has no "error: "; its "try" line is gpureplay's, not ours to repeat.
  char usage[] = "gpureplay: bad --policy 'p': unknown policy 'p'\ntry 'gpureplay --help'\n";
  r.err = usage;
  r.err_len = strlen(usage);
  r.exit_status = 2;
  EXPECT_EQ(gm_tool_message(&r, "gpureplay", msg, sizeof msg, &rest), 1);
  EXPECT_STREQ(msg, "bad --policy 'p': unknown policy 'p'");
  EXPECT_STREQ(rest, "");
  free(rest);
  r.exit_status = 4;
  r.err = (char *)"";
  r.err_len = 0;
  EXPECT_EQ(gm_tool_message(&r, "gpureplay", msg, sizeof msg, &rest), 0);
  EXPECT_STREQ(msg, "gpureplay failed (exit status 4)");
  free(rest);
}

std::string Trace(const char *name, unsigned mode, const char *key, const char *value) {
  const char *dir = getenv("TEST_TMPDIR");
  std::string path = std::string(dir ? dir : "/tmp") + "/" + std::to_string(getpid()) + "_" + name;
  gmt_header_t h;
  gmt_header_init(&h);
  h.capture_mode = mode;
  gm_err_t err = {};
  if (key) {
    EXPECT_EQ(gmt_header_kv_set(&h, key, value, &err), GM_OK) << err.msg;
  }
  gmt_writer_t *w = nullptr;
  EXPECT_EQ(gmt_writer_open(&w, path.c_str(), &h, nullptr, &err), GM_OK) << err.msg;
  EXPECT_EQ(gmt_writer_close(w, &err), GM_OK) << err.msg;
  gmt_header_free(&h);
  return path;
}

TEST(AnaTool, TheSettingATraceRanWith) {
  char spec[1100];
  gm_err_t err = {};
  std::string hist = Trace("hist.zst", GMT_CAPTURE_TORCH, "PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True");
  ASSERT_EQ(ana_trace_ran_with(hist.c_str(), GMT_READ_STRICT, spec, sizeof spec, &err), GM_OK) << err.msg;
  EXPECT_STREQ(spec, "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
  // A requests-mode trace records the conf gpurec set, not the user's.
  std::string req = Trace("req.zst", GMT_CAPTURE_REQUESTS, "PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync");
  ASSERT_EQ(ana_trace_ran_with(req.c_str(), GMT_READ_STRICT, spec, sizeof spec, &err), GM_OK) << err.msg;
  EXPECT_STREQ(spec, "pytorch");
  std::string jax = Trace("jax.zst", GMT_CAPTURE_REQUESTS, "framework.jax", "0.4.30");
  ASSERT_EQ(ana_trace_ran_with(jax.c_str(), GMT_READ_STRICT, spec, sizeof spec, &err), GM_OK) << err.msg;
  EXPECT_STREQ(spec, "jax");
  std::string tf = Trace("tf.zst", GMT_CAPTURE_REQUESTS, "framework.tensorflow", "2.17");
  ASSERT_EQ(ana_trace_ran_with(tf.c_str(), GMT_READ_STRICT, spec, sizeof spec, &err), GM_OK) << err.msg;
  EXPECT_STREQ(spec, "tf");
  EXPECT_EQ(ana_trace_ran_with("/nonexistent.zst", GMT_READ_STRICT, spec, sizeof spec, &err), GM_ERR_IO);
}

TEST(AnaTool, PeakOfTheFirstRun) {
  uint64_t peak = 0;
  char policy[64];
  gm_err_t err = {};
  const char *lines = "{\"policy\":\"jax\",\"peak_reserved_plus_external_bytes\":41943040}\n"
                      "{\"policy\":\"jax\",\"peak_reserved_plus_external_bytes\":1}\n";
  ASSERT_EQ(ana_replay_peak_read(lines, &peak, policy, sizeof policy, &err), GM_OK) << err.msg;
  EXPECT_EQ(peak, 40 * MiB);
  EXPECT_STREQ(policy, "jax");
  EXPECT_EQ(ana_replay_peak_read("{\"policy\":\"jax\"}", &peak, policy, sizeof policy, &err), GM_ERR_FORMAT);
  EXPECT_EQ(ana_replay_peak_read("", &peak, policy, sizeof policy, &err), GM_ERR_FORMAT);
}

std::string Text(const ana_oom_t &o, const char *path) {
  char *buf = nullptr;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ana_oom_print_text(f, path, &o);
  fclose(f);
  std::string s(buf, len);
  free(buf);
  return s;
}

// The object of replay/README.md "Why it ran out of memory", by hand: 6 MiB fails on stream 1
// within 20 MiB with 12 MiB free in three 4 MiB blocks; expandable segments fit.
const char *kOom =
    "{\"trace\":\"t.zst\",\"policy\":\"pytorch\",\"capacity_bytes\":20971520,\"capacity_note\":\"\","
    "\"needs_bytes\":16777216,\"peak_reserved_bytes\":20971520,\"recorded_failures\":0,\"ooms\":1,"
    "\"frameworks\":\"PyTorch 2.9\",\"device_memory_bytes\":20971520,\"requests\":5,"
    "\"recorded_failures_served\":0,\"oom\":true,"
    "\"request\":{\"event\":6,\"ts_ns\":1500000000,\"size_bytes\":6291456,\"stream\":1,"
    "\"callsite\":\"model.py:10\\nforward\",\"cause\":\"policy\"},"
    "\"live\":{\"bytes\":8388608,\"allocs\":2,\"external_bytes\":0,\"reserved_bytes\":20971520,"
    "\"top_callsites\":[{\"callsite\":\"opt.py:5 step\",\"bytes\":8388608,\"allocs\":2}],"
    "\"other_callsites_bytes\":0,\"other_callsites\":0},"
    "\"free\":{\"rounded_size_bytes\":6291456,\"free_bytes\":12582912,\"free_blocks\":3,"
    "\"largest_free_bytes\":4194304,\"too_small_bytes\":12582912,\"other_stream_bytes\":0,"
    "\"other_pool_bytes\":0,\"not_splittable_bytes\":0,\"limit_bytes\":0,\"at_limit\":false,"
    "\"allocated_bytes\":8388608,\"largest_too_small_bytes\":4194304,\"note\":\"\"},"
    "\"fix\":{\"live_exceeds_device\":false,\"live_excess_bytes\":0,"
    "\"setting\":\"pytorch:expandable_segments:True\",\"setting_peak_reserved_bytes\":16777216,"
    "\"setting_from\":\"the sweep grid\",\"capacity_bytes\":41943040,\"grid_tried\":10,\"grid_fit\":3,"
    "\"tune_tried\":0}}";

TEST(AnaOom, SaysGpureplaysAnswer) {
  ana_oom_t o;
  gm_err_t err = {};
  ASSERT_EQ(ana_oom_read(kOom, &o, &err), GM_OK) << err.msg;
  EXPECT_EQ(Text(o, "t.zst"),
            "t.zst: pytorch within 20.00 MiB (given)\n"
            "failed request: 6.00 MiB on stream 1, event 6 at 1.500 s (1 OOM in all)\n"
            "  callsite: model.py:10\\x0aforward\n"
            "live then: 8.00 MiB in 2 allocations; the setting had reserved 20.00 MiB\n"
            "      8.00 MiB      2x  opt.py:5 step\n"
            "reserved but free: 12.00 MiB in 3 blocks (largest 4.00 MiB); none could serve the request, rounded to "
            "6.00 MiB:\n"
            "     12.00 MiB  too small: each block smaller than the request (largest 4.00 MiB)\n"
            "smallest change that fits:\n"
            "  setting: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (peak reserved 16.00 MiB; from the sweep "
            "grid, 3 of 10 other settings fit)\n"
            "  capacity: 40.00 MiB with pytorch (20.00 MiB more than 20.00 MiB)\n");
  // --json: gpureplay's object as it came, the paste line right after the setting.
  char *buf = nullptr;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ASSERT_EQ(ana_oom_print_json(f, &o, &err), GM_OK) << err.msg;
  fclose(f);
  std::string want = std::string(kOom) + "\n";
  std::string at = "\"setting\":\"pytorch:expandable_segments:True\",";
  want.insert(want.find(at) + at.size(), "\"paste\":\"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\",");
  EXPECT_EQ(std::string(buf, len), want);
  free(buf);
  ana_oom_free(&o);
}

TEST(AnaOom, NoOomAndMissingKeys) {
  ana_oom_t o;
  gm_err_t err = {};
  const char *none =
      "{\"trace\":\"t.zst\",\"policy\":\"jax\",\"capacity_bytes\":0,\"capacity_note\":\"\",\"needs_bytes\":16777216,"
      "\"peak_reserved_bytes\":20971520,\"recorded_failures\":0,\"ooms\":0,\"device_memory_bytes\":0,"
      "\"requests\":5,\"oom\":false}";
  ASSERT_EQ(ana_oom_read(none, &o, &err), GM_OK) << err.msg;
  EXPECT_EQ(Text(o, "t.zst"),
            "t.zst: jax, unlimited device (no --capacity, and the trace recorded no failed request)\n"
            "no out-of-memory: all 5 requests were served (peak reserved 20.00 MiB, needs at least 16.00 MiB)\n");
  ana_oom_free(&o);
  // An object without a figure the text needs is refused, naming it.
  std::string bad = kOom;
  bad.replace(bad.find("\"bytes\":8388608,\"allocs\":2,\"external"), 16, "\"bytez\":8388608,");
  EXPECT_EQ(ana_oom_read(bad.c_str(), &o, &err), GM_ERR_FORMAT);
  EXPECT_STREQ(err.msg, "gpureplay --explain-oom: live.bytes is missing (an older gpureplay than this gpuanalyze?)");
  EXPECT_EQ(ana_oom_read("not json", &o, &err), GM_ERR_FORMAT);
  EXPECT_EQ(ana_oom_read("[1]", &o, &err), GM_ERR_FORMAT);
}

}  // namespace
