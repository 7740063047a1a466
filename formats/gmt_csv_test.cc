// gmt_csv_test.cc: the text form: exact round trips, hand-written input, errors that name the line.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>

#include "formats/gmt.h"
#include "formats/gmt_internal.h"
#include "formats/gmt_testutil.h"

using gmt_test::TempPath;

namespace {

std::string Export(const std::string &path) {
  gmt_reader_t *r;
  gm_err_t err;
  EXPECT_EQ(gmt_reader_open(&r, path.c_str(), &err), GM_OK) << err.msg;
  char *buf = nullptr;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  EXPECT_EQ(gmt_csv_export(r, f, &err), GM_OK) << err.msg;
  fclose(f);
  std::string out(buf, len);
  free(buf);
  gmt_reader_close(r);
  return out;
}

gm_status_t Import(const std::string &text, const std::string &out, gm_err_t *err) {
  FILE *in = fmemopen((void *)text.data(), text.size(), "r");
  gm_status_t s = gmt_csv_import(in, "t.csv", out.c_str(), nullptr, err);
  fclose(in);
  return s;
}

}  // namespace

TEST(Csv, RandomTraceRoundTripsExactly) {
  std::string a = TempPath("a.zst"), b = TempPath("b.zst");
  gmt_writer_t *w;
  gm_err_t err;
  gmt_header_t h;
  gmt_header_init(&h);
  gmt_header_set(&h.command_line, "a\\b\nc\td\x01\x7f=", nullptr);
  gmt_header_kv_set(&h, "K=1", "v,2", nullptr);
  gmt_writer_opts_t o = {};
  o.chunk_events = 97;
  ASSERT_EQ(gmt_writer_open(&w, a.c_str(), &h, &o, &err), GM_OK);
  gmt_header_free(&h);
  uint32_t ids[5];
  for (int i = 0; i < 5; i++) ASSERT_EQ(gmt_writer_intern(w, ("s" + std::to_string(i) + ",\n").c_str(), &ids[i], &err), GM_OK);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 1000; i++) {
    gmt_event_t e = {};
    e.ts_ns = rng();
    e.kind = (uint8_t)(1 + rng() % (GMT_EV_KIND_MAX - 1));
    e.addr = rng();
    e.size = rng() >> (rng() % 64);
    if (e.kind != GMT_EV_ALLOC_FAILED) e.size %= GMT_MAX_SIZE + 1;  // the text form refuses more
    e.stream = rng() % 3 == 0 ? GMT_STREAM_NONE : rng() % 5;
    e.corr_id = rng();
    e.callsite = rng() % 3 ? 0 : ids[rng() % 5];
    e.context = (uint32_t)rng();
    e.flags = (uint32_t)rng();
    e.device = (uint16_t)rng();
    e.mem_kind = (uint8_t)(rng() % GMT_MEM_KIND_MAX);
    ASSERT_EQ(gmt_writer_append(w, &e, &err), GM_OK);
    if (i % 250 == 0) gmt_writer_add_dropped(w, i + 1);
  }
  gmt_writer_add_dropped(w, 9);  // drops at the very end: an empty chunk carries them
  ASSERT_EQ(gmt_writer_close(w, &err), GM_OK);
  std::string t1 = Export(a);
  ASSERT_EQ(Import(t1, b, &err), GM_OK) << err.msg;
  std::string t2 = Export(b);
  size_t d = 0;
  while (d < t1.size() && d < t2.size() && t1[d] == t2[d]) d++;
  EXPECT_EQ(t1.size(), t2.size());
  EXPECT_EQ(d, t1.size()) << "first difference: " << t1.substr(d > 80 ? d - 80 : 0, 160) << "\n-- vs --\n"
                          << t2.substr(d > 80 ? d - 80 : 0, 160);
  EXPECT_NE(t1.find("#dropped=9\n"), std::string::npos);
  EXPECT_NE(t1.find("#command_line=a\\\\b\\nc\\td\\x01\\x7f=\n"), std::string::npos) << t1.substr(0, 400);
  gmt_reader_t *r;
  ASSERT_EQ(gmt_reader_open(&r, b.c_str(), &err), GM_OK);
  EXPECT_STREQ(gmt_header_kv_get(gmt_reader_header(r), "K=1"), "v,2");  // '=' in a key is escaped
  gmt_reader_close(r);
  remove(a.c_str());
  remove(b.c_str());
}

TEST(Csv, HandWrittenSubsetWithDefaults) {
  std::string out = TempPath("h.zst");
  gm_err_t err;
  std::string text =
      "# a comment\n"
      "#\n"
      "#host=laptop\n"
      "\n"
      "kind,ts_ns,size,addr\r\n"
      "alloc,10,1024,0x1000\n"
      "free,20,1024,4096\n";
  ASSERT_EQ(Import(text, out, &err), GM_OK) << err.msg;
  gmt_reader_t *r;
  ASSERT_EQ(gmt_reader_open(&r, out.c_str(), &err), GM_OK);
  EXPECT_STREQ(gmt_reader_header(r)->host, "laptop");
  EXPECT_EQ(gmt_reader_header(r)->capture_mode, (uint32_t)GMT_CAPTURE_IMPORT);
  gmt_event_t e;
  ASSERT_EQ(gmt_reader_next(r, &e, &err), GM_OK);
  EXPECT_EQ(e.kind, GMT_EV_ALLOC);
  EXPECT_EQ(e.ts_ns, 10u);
  EXPECT_EQ(e.addr, 0x1000u);
  EXPECT_EQ(e.stream, GMT_STREAM_NONE);
  ASSERT_EQ(gmt_reader_next(r, &e, &err), GM_OK);
  EXPECT_EQ(e.addr, 4096u);
  EXPECT_EQ(gmt_reader_next(r, &e, &err), GM_END);
  gmt_reader_close(r);
  remove(out.c_str());
}

TEST(Csv, ErrorsNameTheLineAndColumnAndLeaveNoFile) {
  struct Case {
    const char *text, *want;
  } cases[] = {
      {"ts_ns,kind,addr\n1,alloc,zz\n", "t.csv:2: column 3 (addr): bad value 'zz'"},
      {"ts_ns,kind\n1,allocate\n", "t.csv:2: column 2 (kind): bad value 'allocate'"},
      {"ts_ns,kind\n1,alloc,3\n", "t.csv:2: expected 2 columns"},
      {"ts_ns,kind,device\n1,alloc,65536\n", "column 3 (device): bad value '65536'"},
      {"ts_ns,kind,stream\n1,alloc,18446744073709551615\n", "column 3 (stream)"},
      {"ts_ns,kind,bogus\n", "t.csv:1: unknown column 'bogus'"},
      {"ts_ns\n", "must name ts_ns and kind"},
      {"#colour=red\nts_ns,kind\n", "t.csv:1: unknown header key 'colour'"},
      {"ts_ns,kind\n#host=x\n", "t.csv:2: header line '#host' after the column line"},
      {"#host=a\\qb\nts_ns,kind\n", "t.csv:1: bad escape"},
      {"#capture_mode=sideways\n", "bad capture_mode 'sideways'"},
      {"ts_ns,kind,callsite\n1,alloc,3\n", "t.csv:2: callsite id 3 was never interned"},
      {"#rank=x\n", "bad rank 'x'"},
      {"", "no column line"},
      // issue 12 item 7: the value, where it is, and what is accepted
      {"ts_ns,kind,size\n1,alloc,-1\n",
       "t.csv:2: column 3 (size): bad value '-1' (accepted: a byte count from 0 to 281474976710656 "
       "(alloc_failed: to 18446744073709551615), decimal or 0x hex)"},
      {"ts_ns,kind,size\n1,alloc,nan\n", "t.csv:2: column 3 (size): bad value 'nan' (accepted: a byte count"},
      {"ts_ns,kind,size\n1,alloc,18446744073709551615\n",
       "t.csv:2: size 18446744073709551615 is out of range for alloc (accepted: 0 to 281474976710656 bytes; "
       "only alloc_failed may ask for more)"},
      {"ts_ns,kind,size\n1,free,0x1000000000001\n", "t.csv:2: size 281474976710657 is out of range for free"},
      {"ts_ns,kind,device\n1,alloc,65536\n",
       "column 3 (device): bad value '65536' (accepted: an integer from 0 to 65535, decimal or 0x hex)"},
      {"ts_ns,kind\n1,allocate\n", "(accepted: an event kind: alloc free alloc_failed"},
      {"ts_ns,kind,addr\n1,alloc,0x1000000000000000000000000000000000000000000000000000\n",
       "column 3 (addr): bad value '0x10000000000000000000000000000000000000...' (accepted"},
  };
  for (const Case &c : cases) {
    std::string out = TempPath("e.zst");
    gm_err_t err;
    EXPECT_EQ(Import(c.text, out, &err), GM_ERR_INVAL) << c.text;
    EXPECT_NE(std::string(err.msg).find(c.want), std::string::npos) << err.msg;
    FILE *f = fopen(out.c_str(), "r");
    EXPECT_EQ(f, nullptr) << "half an import left behind for: " << c.text;
    if (f) fclose(f);
  }
}

// A request that failed may have asked for anything (cudaMalloc(-1)): kept as recorded.
TEST(Csv, FailedRequestOfAnySizeIsKept) {
  std::string out = TempPath("f.zst");
  gm_err_t err;
  ASSERT_EQ(Import("ts_ns,kind,size\n1,alloc_failed,18446744073709551615\n", out, &err), GM_OK) << err.msg;
  gmt_reader_t *r;
  ASSERT_EQ(gmt_reader_open(&r, out.c_str(), &err), GM_OK);
  gmt_event_t e;
  ASSERT_EQ(gmt_reader_next(r, &e, &err), GM_OK);
  EXPECT_EQ(e.size, UINT64_MAX);
  gmt_reader_close(r);
  remove(out.c_str());
}

TEST(Csv, EventFormatNamesEveryFieldAndTheString) {
  gmt_event_t e = {};
  e.ts_ns = 5;
  e.kind = GMT_EV_FREE;
  e.addr = 0xabc;
  e.size = 512;
  e.stream = GMT_STREAM_NONE;
  char buf[512];
  gmt_event_format(&e, nullptr, buf, sizeof buf);
  EXPECT_STREQ(buf,
               "ts_ns=5 kind=free device=0 stream=- addr=0xabc size=512 mem_kind=unknown flags=0x0 corr_id=0 "
               "callsite=0 context=0");
  char small[16];
  gmt_event_format(&e, nullptr, small, sizeof small);
  EXPECT_EQ(strlen(small), 15u);
}
