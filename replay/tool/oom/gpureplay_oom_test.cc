// gpureplay_oom_test.cc: gr_oom_explain on hand-made traces whose answer is worked out by hand
// from PyTorch's rules (pt_alloc.c): a request of 4 MiB gets a 20 MiB segment (kLargeBuffer,
// requests under 10 MiB), split front to back; a freed block stays in its segment (split
// segments are never given back) and belongs to the stream that allocated it.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <jansson.h>
#include <unistd.h>
#include "formats/gmt_testutil.h"
#include "replay/tool/gpureplay.h"
#include "replay/tool/gpureplay_trace.h"

using gmt_test::Ev;

namespace {

constexpr uint64_t MiB = 1ull << 20;

using gmt_test::TempPath;


// Writes the trace; ALLOC events with callsite 1 get "model.py:10 forward", 2 "opt.py:5 step".
std::string Write(const char *name, const std::vector<gmt_event_t> &in) {
  std::string path = TempPath(name);
  gmt_header_t h;
  gmt_header_init(&h);
  h.capture_mode = GMT_CAPTURE_SYNTHETIC;
  h.start_time_ns = 1700000000000000000ull;
  gm_err_t err = {};
  gmt_writer_t *w = nullptr;
  EXPECT_EQ(gmt_writer_open(&w, path.c_str(), &h, nullptr, &err), GM_OK) << err.msg;
  uint32_t ids[3] = {0, 0, 0};
  EXPECT_EQ(gmt_writer_intern(w, "model.py:10 forward", &ids[1], &err), GM_OK);
  EXPECT_EQ(gmt_writer_intern(w, "opt.py:5 step", &ids[2], &err), GM_OK);
  std::vector<gmt_event_t> evs = in;
  for (auto &e : evs) e.callsite = e.callsite ? ids[e.callsite] : 0;
  EXPECT_EQ(gmt_writer_append_n(w, evs.data(), evs.size(), &err), GM_OK) << err.msg;
  EXPECT_EQ(gmt_writer_close(w, &err), GM_OK) << err.msg;
  gmt_header_free(&h);
  return path;
}

gr_config_t Config(uint64_t capacity) {
  gr_config_t c;
  memset(&c, 0, sizeof c);
  c.cuda_ordinal = -1;
  c.capacity = capacity;
  c.jobs = 2;
  c.read_flags = GMT_READ_STRICT;
  c.preload = 1;
  c.device = -1;
  c.late_mallocs = 1;
  return c;
}

// Four 4 MiB blocks on stream 1 in one 20 MiB segment (4 MiB left at its end), the first and
// the third freed: 12 MiB free in three 4 MiB blocks, 8 MiB live. Then `size` on `stream`.
std::vector<gmt_event_t> Holes(uint64_t size, uint64_t stream) {
  std::vector<gmt_event_t> v;
  uint64_t t = 1000;
  for (int i = 0; i < 4; i++) v.push_back(Ev(GMT_EV_ALLOC, t += 10, 0x1000 * (i + 1), 4 * MiB, 1).Cs(i % 2 ? 2 : 1));
  v.push_back(Ev(GMT_EV_FREE, t += 10, 0x1000, 0, 1));
  v.push_back(Ev(GMT_EV_FREE, t += 10, 0x3000, 0, 1));
  v.push_back(Ev(GMT_EV_ALLOC, t += 10, 0x9000, size, stream).Cs(1));
  v.push_back(Ev(GMT_EV_FREE, t += 10, 0x9000, 0, stream));
  return v;
}

TEST(OomExplain, FreeBlocksTooSmall) {
  std::string p = Write("oom_small.zst", Holes(6 * MiB, 1));
  gr_config_t c = Config(20 * MiB);
  gr_oom_t o;
  gm_err_t err = {};
  ASSERT_EQ(gr_oom_explain(&c, p.c_str(), "pytorch", &o, &err), GM_OK) << err.msg;
  ASSERT_TRUE(o.found);
  EXPECT_EQ(o.event, 6);
  EXPECT_EQ(o.size, 6 * MiB);
  EXPECT_EQ(o.stream, 1u);
  EXPECT_STREQ(o.callsite_text, "model.py:10 forward");
  EXPECT_EQ(o.cause, RP_OOM_POLICY);
  EXPECT_EQ(o.live_bytes, 8 * MiB);
  EXPECT_EQ(o.live_allocs, 2u);
  EXPECT_EQ(o.reserved_bytes, 20 * MiB);
  ASSERT_TRUE(o.has_report);
  EXPECT_EQ(o.why.rounded_size, 6 * MiB);
  EXPECT_EQ(o.why.free_bytes, 12 * MiB);
  EXPECT_EQ(o.why.free_blocks, 3u);
  EXPECT_EQ(o.why.largest_free, 4 * MiB);
  EXPECT_EQ(o.why.too_small_bytes, 12 * MiB);
  EXPECT_EQ(o.why.other_stream_bytes, 0u);
  // B (callsite 2) and D (callsite 2) are live: one callsite, 8 MiB.
  ASSERT_EQ(o.n_top, 1);
  EXPECT_STREQ(o.top[0].text, "opt.py:5 step");
  EXPECT_EQ(o.top[0].bytes, 8 * MiB);
  EXPECT_FALSE(o.live_exceeds);
  // A second 20 MiB segment serves it: 40 MiB.
  EXPECT_EQ(o.fits_capacity, 40 * MiB);
}

// What gpureplay --explain-oom --json prints (and gpuanalyze oom reads): the struct's figures
// under their keys; a callsite that is not UTF-8 is escaped, never dropped.
TEST(OomExplain, JsonCarriesTheFigures) {
  std::string p = Write("oom_json.zst", Holes(6 * MiB, 1));
  gr_config_t c = Config(20 * MiB);
  gr_oom_t o;
  gm_err_t err = {};
  ASSERT_EQ(gr_oom_explain(&c, p.c_str(), "pytorch", &o, &err), GM_OK) << err.msg;
  ASSERT_TRUE(o.found);
  snprintf(o.top[0].text, sizeof o.top[0].text, "opt.py:5 \xff step");
  char *buf = nullptr;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ASSERT_EQ(gr_oom_print_json(f, "t.zst", &o, &err), GM_OK) << err.msg;
  fclose(f);
  ASSERT_EQ(std::string(buf).find('\n'), len - 1) << buf;  // one line
  json_error_t je;
  json_t *j = json_loads(buf, 0, &je);
  ASSERT_NE(j, nullptr) << je.text << ": " << buf;
  auto num = [](json_t *o, const char *k) { return (uint64_t)json_integer_value(json_object_get(o, k)); };
  json_t *q = json_object_get(j, "request"), *l = json_object_get(j, "live"), *fr = json_object_get(j, "free"),
         *fx = json_object_get(j, "fix");
  EXPECT_STREQ(json_string_value(json_object_get(j, "trace")), "t.zst");
  EXPECT_TRUE(json_is_true(json_object_get(j, "oom")));
  EXPECT_EQ(num(j, "capacity_bytes"), 20 * MiB);
  EXPECT_EQ(num(j, "requests"), o.requests);
  EXPECT_EQ(num(q, "event"), 6u);
  EXPECT_EQ(num(q, "size_bytes"), 6 * MiB);
  EXPECT_STREQ(json_string_value(json_object_get(q, "callsite")), "model.py:10 forward");
  EXPECT_STREQ(json_string_value(json_object_get(q, "cause")), "policy");
  EXPECT_EQ(num(l, "bytes"), 8 * MiB);
  json_t *t0 = json_array_get(json_object_get(l, "top_callsites"), 0);
  EXPECT_STREQ(json_string_value(json_object_get(t0, "callsite")), "opt.py:5 \\xff step");
  EXPECT_EQ(num(t0, "bytes"), 8 * MiB);
  EXPECT_EQ(num(fr, "too_small_bytes"), 12 * MiB);
  EXPECT_EQ(num(fr, "largest_too_small_bytes"), 4 * MiB);
  EXPECT_EQ(num(fr, "allocated_bytes"), o.why.allocated_bytes);
  EXPECT_EQ(num(fx, "capacity_bytes"), 40 * MiB);
  EXPECT_EQ(num(fx, "grid_tried"), (uint64_t)o.grid_tried);
  if (o.fix_found) EXPECT_STREQ(json_string_value(json_object_get(fx, "setting")), o.fix_spec);
  else EXPECT_TRUE(json_is_null(json_object_get(fx, "setting")));
  json_decref(j);
  free(buf);
}

TEST(OomExplain, FreeBlocksOnAnotherStream) {
  std::string p = Write("oom_stream.zst", Holes(2 * MiB, 2));
  gr_config_t c = Config(20 * MiB);
  gr_oom_t o;
  gm_err_t err = {};
  ASSERT_EQ(gr_oom_explain(&c, p.c_str(), nullptr, &o, &err), GM_OK) << err.msg;
  ASSERT_TRUE(o.found);
  EXPECT_EQ(o.stream, 2u);
  ASSERT_TRUE(o.has_report);
  // Each free block (4 MiB) is larger than the 2 MiB request: only the stream keeps them.
  EXPECT_EQ(o.why.other_stream_bytes, 12 * MiB);
  EXPECT_EQ(o.why.too_small_bytes, 0u);
  EXPECT_EQ(o.why.free_bytes, 12 * MiB);
  EXPECT_FALSE(o.live_exceeds);
  EXPECT_EQ(o.fits_capacity, 40 * MiB);
}

TEST(OomExplain, BfcArenaHolesAtItsLimit) {
  // XLA's BFC inside a 20 MiB arena (prealloc): the same holes; BFC has no streams, so the
  // request on stream 2 fails only because every free chunk is smaller, against the arena.
  std::string p = Write("oom_bfc.zst", Holes(6 * MiB, 2));
  gr_config_t c = Config(64 * MiB);
  gr_oom_t o;
  gm_err_t err = {};
  ASSERT_EQ(gr_oom_explain(&c, p.c_str(), "prealloc:size=20MiB", &o, &err), GM_OK) << err.msg;
  ASSERT_TRUE(o.found);
  ASSERT_TRUE(o.has_report);
  EXPECT_EQ(o.why.free_bytes, 12 * MiB);
  EXPECT_EQ(o.why.free_blocks, 3u);
  EXPECT_EQ(o.why.too_small_bytes, 12 * MiB);
  EXPECT_EQ(o.why.other_stream_bytes, 0u);
  EXPECT_EQ(o.why.limit_bytes, 20 * MiB);
  EXPECT_TRUE(o.why.at_limit);
  EXPECT_FALSE(o.live_exceeds);
}

TEST(OomExplain, LiveBytesAloneExceedTheDevice) {
  std::vector<gmt_event_t> v;
  for (int i = 0; i < 4; i++) v.push_back(Ev(GMT_EV_ALLOC, 100 + i, 0x1000 * (i + 1), 6 * MiB, 1).Cs(1));
  std::string p = Write("oom_live.zst", v);
  gr_config_t c = Config(20 * MiB);
  gr_oom_t o;
  gm_err_t err = {};
  ASSERT_EQ(gr_oom_explain(&c, p.c_str(), "pytorch", &o, &err), GM_OK) << err.msg;
  ASSERT_TRUE(o.found);
  EXPECT_EQ(o.event, 3);
  EXPECT_EQ(o.live_bytes, 18 * MiB);
  EXPECT_EQ(o.needs_bytes, 24 * MiB);
  EXPECT_TRUE(o.live_exceeds);
  EXPECT_EQ(o.live_excess, 4 * MiB);
  EXPECT_FALSE(o.fix_found); // no setting is looked for: none can help
  // 20 MiB holds three (18 MiB, split), the fourth needs its own 20 MiB segment.
  EXPECT_EQ(o.fits_capacity, 40 * MiB);
}

TEST(OomExplain, NoOomUnderTheCapacity) {
  std::string p = Write("oom_none.zst", Holes(6 * MiB, 1));
  gr_config_t c = Config(64 * MiB);
  gr_oom_t o;
  gm_err_t err = {};
  ASSERT_EQ(gr_oom_explain(&c, p.c_str(), "pytorch", &o, &err), GM_OK) << err.msg;
  EXPECT_FALSE(o.found);
  EXPECT_EQ(o.ooms, 0u);
  EXPECT_EQ(o.requests, 5u);
  EXPECT_EQ(o.needs_bytes, 16 * MiB);
}

TEST(OomExplain, OnlyTheFrameworksOwnSettings) {
  // Within 30 MiB no PyTorch setting serves the 6 MiB request (a large request takes a new
  // segment of at least 20 MiB, expandable segments map 20 MiB pages; gpureplay --tune agrees:
  // "every pytorch setting tried ran out of memory"), though `direct` or `prealloc` would:
  // those are not PyTorch's settings, so no setting is the answer, and the capacity is.
  std::string p = Write("oom_fix.zst", Holes(6 * MiB, 1));
  gr_config_t c = Config(30 * MiB);
  gr_oom_t o;
  gm_err_t err = {};
  ASSERT_EQ(gr_oom_explain(&c, p.c_str(), "pytorch", &o, &err), GM_OK) << err.msg;
  ASSERT_TRUE(o.found);
  EXPECT_FALSE(o.fix_found) << o.fix_spec;
  EXPECT_EQ(o.grid_tried, 10);  // the PyTorch grid less the default
  EXPECT_GT(o.tune_tried, 0);
  EXPECT_EQ(o.fits_capacity, 40 * MiB);
}

}  // namespace

// The limit the recorded run set itself is the OOM verdict's capacity (issue 25): PyTorch's OOM
// message under set_per_process_memory_fraction says "N GiB allowed"; the fraction itself, where
// the trace holds it, times the GPU's memory; without either, the note says the limit is unknown.
typedef std::vector<std::pair<const char *, const char *>> Kvs;

// A one-allocation trace of a gpu_total-byte GPU whose header holds kvs.
std::string WriteWithKvs(const std::string &name, uint64_t gpu_total, const Kvs &kvs) {
  std::string path = TempPath(name.c_str());
  gmt_header_t h;
  gmt_header_init(&h);
  h.capture_mode = GMT_CAPTURE_SYNTHETIC;
  h.start_time_ns = 1700000000000000000ull;
  h.gpu_total_mem = gpu_total;
  gm_err_t err = {};
  for (const auto &kv : kvs) {
    EXPECT_EQ(gmt_header_kv_set(&h, kv.first, kv.second, &err), GM_OK) << err.msg;
  }
  gmt_writer_t *w = nullptr;
  EXPECT_EQ(gmt_writer_open(&w, path.c_str(), &h, nullptr, &err), GM_OK) << err.msg;
  std::vector<gmt_event_t> evs = {Ev(GMT_EV_ALLOC, 1000, 0x1000, 4 * MiB, 1)};
  EXPECT_EQ(gmt_writer_append_n(w, evs.data(), evs.size(), &err), GM_OK) << err.msg;
  EXPECT_EQ(gmt_writer_close(w, &err), GM_OK) << err.msg;
  gmt_header_free(&h);
  return path;
}

std::string WriteWithKv(const char *name, const char *key, const char *value, uint64_t gpu_total) {
  return WriteWithKvs(name, gpu_total, key ? Kvs{{key, value}} : Kvs{});
}

uint64_t CapacityFor(const std::string &path, std::string *note, int device = 0) {
  gr_trace_info_t info;
  gm_err_t err = {};
  EXPECT_EQ(gr_trace_probe(path.c_str(), GMT_READ_STRICT, 0, 0, &info, &err), GM_OK) << err.msg;
  rp_result_t r;
  memset(&r, 0, sizeof r);
  r.recorded_failures = 1;
  r.device = device;
  char buf[512];
  uint64_t cap = gr_failure_capacity(&info, &r, buf, sizeof buf);
  *note = buf;
  return cap;
}

TEST(OomCapacity, TheLimitTheRunSetItself) {
  const uint64_t total = 150109880320ull;  // an H200's
  std::string note;
  uint64_t cap = CapacityFor(
      WriteWithKv("cap_msg.zst", "oom.message",
                  "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 139.80 GiB of "
                  "which 136.56 GiB is free. Including non-PyTorch memory, this process has 3.25 GiB memory in use. "
                  "2.80 GiB allowed; Of the allocated memory 2.72 GiB is allocated by PyTorch",
                  total),
      &note);
  EXPECT_EQ(cap, (uint64_t)(2.80 * 1073741824.0));
  EXPECT_NE(note.find("the limit the recorded run set itself: 2.80 GiB (the OOM message's \"allowed\")"),
            std::string::npos) << note;
  cap = CapacityFor(WriteWithKv("cap_frac.zst", "torch.per_process_memory_fraction", "0.02", total), &note);
  EXPECT_EQ(cap, (uint64_t)(0.02 * (double)total));
  EXPECT_NE(note.find("set_per_process_memory_fraction(0.02)"), std::string::npos) << note;
  // Both (gpurec records the fraction and the message of the OOM the job died of): the fraction
  // times the total is the limit to the byte; the message's 2.80 GiB is it rounded (an H200 run
  // under 0.02: 3002197606 allowed, "2.80 GiB" = 3006477107).
  {
    std::string path = WriteWithKvs("cap_both.zst", total,
                                    {{"torch.per_process_memory_fraction", "0.02"},
                                     {"gpu_mem_info_total", "150109880320"},
                                     {"oom.message", "CUDA out of memory. 2.80 GiB allowed; Of the allocated"}});
    cap = CapacityFor(path, &note);
    EXPECT_EQ(cap, 3002197606ull);
    EXPECT_NE(note.find("set_per_process_memory_fraction(0.02)"), std::string::npos) << note;
  }
  // The fraction of the device the job set it for (gpurec records the device of each call): the
  // replayed device's own; a device the job set none for has no cap of its own, whatever the
  // plain key (the last call's) says.
  {
    std::string path = WriteWithKvs("cap_dev.zst", total,
                                    {{"torch.per_process_memory_fraction", "0.02"},
                                     {"torch.per_process_memory_fraction.1", "0.02"},
                                     {"torch.per_process_memory_fraction.2", "0.5"}});
    cap = CapacityFor(path, &note, 1);
    EXPECT_EQ(cap, (uint64_t)(0.02 * (double)total));
    EXPECT_NE(note.find("set_per_process_memory_fraction(0.02, 1)"), std::string::npos) << note;
    cap = CapacityFor(path, &note, 2);
    EXPECT_EQ(cap, (uint64_t)(0.5 * (double)total));
    cap = CapacityFor(path, &note, 0);
    EXPECT_EQ(cap, total);
    EXPECT_NE(note.find("the limit the job had is unknown"), std::string::npos) << note;
  }
  // JAX's limit under either name (XLA_CLIENT_MEM_FRACTION is the newer), of the same total.
  for (const char *name : {"XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_CLIENT_MEM_FRACTION"}) {
    std::string path = WriteWithKvs(std::string("cap_") + name + ".zst", total,
                                    {{"framework.jax", "0.7.1"}, {name, "0.25"}});
    cap = CapacityFor(path, &note);
    EXPECT_EQ(cap, (uint64_t)(0.25 * (double)total)) << name;
    EXPECT_NE(note.find(std::string(name) + "=0.25"), std::string::npos) << note;
  }
  // Unknown: the GPU's memory, and the note says the limit is unknown and the real one lower.
  cap = CapacityFor(WriteWithKv("cap_none.zst", nullptr, nullptr, total), &note);
  EXPECT_EQ(cap, total);
  EXPECT_NE(note.find("the limit the job had is unknown"), std::string::npos) << note;
  EXPECT_NE(note.find("the real limit was lower"), std::string::npos) << note;
  EXPECT_EQ(note.find("set itself"), std::string::npos) << note;
  // Unknown with PyTorch's record of the free memory at the failure: what the process could have
  // had, said to be an assumption.
  cap = CapacityFor(WriteWithKv("cap_free.zst", "torch.snapshot.oom_device_free_bytes", "1073741824", total), &note);
  EXPECT_EQ(cap, 1073741824ull);
  EXPECT_NE(note.find("the limit the job had is unknown"), std::string::npos) << note;
}
