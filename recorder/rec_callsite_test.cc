// rec_callsite_test.cc: the callsite walker and its interning, driven by a fake frame source
// (a Python stack made of plain structs, read through the same function pointers as CPython's),
// and the owner of a driver call, found through real shared libraries.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <time.h>

#include <cstddef>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "recorder/rec_callsite.h"

namespace {

struct Code {
  std::string file, name;
  int first;
  uint64_t serial;  // changes when a "freed" code object's memory is reused
};
struct Frame {
  Code *code;  // nullptr: not a code frame (a C shim)
  int lasti;
  Frame *back;
};

// The "thread's" innermost frame; per thread like a real thread state.
thread_local Frame *t_top = nullptr;
int g_text_calls = 0;

const void *Top(void *) { return t_top; }
const void *Back(void *, const void *f) { return static_cast<const Frame *>(f)->back; }
const void *CodeOf(void *, const void *f) { return static_cast<const Frame *>(f)->code; }
int Lasti(void *, const void *f, const void *) { return static_cast<const Frame *>(f)->lasti; }
int Line(void *, const void *c, int lasti) {
  return static_cast<const Code *>(c)->first + (lasti < 0 ? 0 : lasti / 10);
}
uint64_t Ident(void *, const void *c) { return static_cast<const Code *>(c)->serial; }
int Text(void *, const void *c, char *file, size_t nf, char *name, size_t nn) {
  const Code *k = static_cast<const Code *>(c);
  g_text_calls++;
  snprintf(file, nf, "%s", k->file.c_str());
  snprintf(name, nn, "%s", k->name.c_str());
  return 1;
}

rec_pyframes_t Fake() {
  rec_pyframes_t s = {};
  s.top = Top;
  s.back = Back;
  s.code = CodeOf;
  s.lasti = Lasti;
  s.line = Line;
  s.ident = Ident;
  s.text = Text;
  return s;
}

rec_callsites_t *Make(rec_cs_mode_t mode, unsigned max = 0) {
  rec_pyframes_t s = Fake();
  rec_callsites_t *c = nullptr;
  gm_err_t err;
  gm_err_clear(&err);
  EXPECT_EQ(rec_callsites_create(&c, mode, &s, max, &err), GM_OK) << err.msg;
  return c;
}

std::string Str(rec_callsites_t *c, uint32_t id) {
  const char *s = rec_callsites_string(c, id);
  return s ? s : "(null)";
}

// train.py:main -> model.py:forward -> torch/nn/modules/linear.py:forward -> <C shim>
struct Stack {
  Code main_{"/home/u/train.py", "main", 10, 1};
  Code fwd{"/home/u/model.py", "forward", 40, 2};
  Code lin{"/opt/v/lib/python3.12/site-packages/torch/nn/modules/linear.py", "forward", 120, 3};
  Code fz{"<frozen importlib._bootstrap>", "_call_with_frames_removed", 200, 4};
  Frame f_main{&main_, 30, nullptr};
  Frame f_fwd{&fwd, 20, &f_main};
  Frame f_lin{&lin, 50, &f_fwd};
  Frame f_shim{nullptr, 0, &f_lin};
};

}  // namespace

TEST(Callsite, LibraryFiles) {
  EXPECT_TRUE(rec_cs_is_library("/opt/v/lib/python3.12/site-packages/torch/nn/functional.py"));
  EXPECT_TRUE(rec_cs_is_library("/usr/lib/python3/dist-packages/numpy/core.py"));
  EXPECT_TRUE(rec_cs_is_library("/usr/lib/python3.11/threading.py"));
  EXPECT_TRUE(rec_cs_is_library("/root/.local/share/uv/python/cpython-3.13/lib/python3.13t/abc.py"));
  EXPECT_TRUE(rec_cs_is_library("/usr/lib64/python3.10/contextlib.py"));
  EXPECT_TRUE(rec_cs_is_library("<frozen runpy>"));
  EXPECT_TRUE(rec_cs_is_library(""));
  EXPECT_FALSE(rec_cs_is_library("/home/u/train.py"));
  EXPECT_FALSE(rec_cs_is_library("/home/u/python3.12/train.py"));  // not under lib/
  EXPECT_FALSE(rec_cs_is_library("/home/u/lib/python3.x/train.py"));
  EXPECT_FALSE(rec_cs_is_library("<string>"));  // python -c
  EXPECT_FALSE(rec_cs_is_library("<stdin>"));
}

TEST(Callsite, Modes) {
  EXPECT_EQ(rec_cs_mode_parse(nullptr), REC_CS_USER);
  EXPECT_EQ(rec_cs_mode_parse(""), REC_CS_USER);
  EXPECT_EQ(rec_cs_mode_parse("none"), REC_CS_NONE);
  EXPECT_EQ(rec_cs_mode_parse("stack"), REC_CS_STACK);
  EXPECT_EQ(rec_cs_mode_parse("all"), -1);
  EXPECT_STREQ(rec_cs_mode_name(REC_CS_USER), "user");
}

TEST(Callsite, InnermostUserFrameSkipsLibrariesAndShims) {
  Stack s;
  t_top = &s.f_shim;
  rec_callsites_t *c = Make(REC_CS_USER);
  uint32_t id = rec_callsites_capture(c);
  EXPECT_EQ(Str(c, id), "/home/u/model.py:42:forward");
  // the line is the instruction's: another instruction in the same function, another string
  s.f_fwd.lasti = 35;
  uint32_t id2 = rec_callsites_capture(c);
  EXPECT_EQ(Str(c, id2), "/home/u/model.py:43:forward");
  EXPECT_NE(id, id2);
  // called directly from train.py, through a frozen module
  Frame fz{&s.fz, 0, &s.f_main};
  Frame lin{&s.lin, 0, &fz};
  t_top = &lin;
  EXPECT_EQ(Str(c, rec_callsites_capture(c)), "/home/u/train.py:13:main");
  t_top = nullptr;
  EXPECT_EQ(rec_callsites_capture(c), 0u);  // no Python on this thread
  rec_callsites_destroy(c);
}

TEST(Callsite, OnlyLibraryFramesGiveTheInnermostShortened) {
  Stack s;
  Frame lin{&s.lin, 7, nullptr};
  t_top = &lin;
  rec_callsites_t *c = Make(REC_CS_USER);
  EXPECT_EQ(Str(c, rec_callsites_capture(c)), "torch/nn/modules/linear.py:120:forward");
  rec_callsites_destroy(c);
  t_top = nullptr;
}

TEST(Callsite, SteadyStateIsACacheHit) {
  Stack s;
  t_top = &s.f_shim;
  rec_callsites_t *c = Make(REC_CS_USER);
  uint32_t id = rec_callsites_capture(c);
  rec_callsites_stats_t st;
  rec_callsites_stats(c, &st);
  EXPECT_EQ(st.misses, 1u);
  int texts = g_text_calls;
  for (int i = 0; i < 1000; i++) ASSERT_EQ(rec_callsites_capture(c), id);
  rec_callsites_stats(c, &st);
  EXPECT_EQ(st.misses, 1u);
  EXPECT_EQ(st.strings, 1u);
  EXPECT_EQ(g_text_calls, texts);  // no string read again
  // cost per capture, for the record (walk of 4 frames, all cached)
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  const int N = 1000000;
  for (int i = 0; i < N; i++) rec_callsites_capture(c);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double ns = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / N;
  printf("[ cost ] user-mode capture, 4 frames, cached: %.1f ns\n", ns);
  rec_callsites_destroy(c);
  t_top = nullptr;
}

TEST(Callsite, ReusedCodeAddressIsANewCallsite) {
  Stack s;
  t_top = &s.f_shim;
  rec_callsites_t *c = Make(REC_CS_USER);
  uint32_t id = rec_callsites_capture(c);
  // the code object at the same address is now another function (freed and reallocated)
  s.fwd.file = "/home/u/other.py";
  s.fwd.name = "step";
  s.fwd.serial = 99;
  uint32_t id2 = rec_callsites_capture(c);
  EXPECT_NE(id, id2);
  EXPECT_EQ(Str(c, id2), "/home/u/other.py:42:step");
  EXPECT_EQ(Str(c, id), "/home/u/model.py:42:forward");  // the old string stays
  rec_callsites_destroy(c);
  t_top = nullptr;
}

TEST(Callsite, TablesDoNotShareThreadCaches) {
  Stack s;
  t_top = &s.f_shim;
  rec_callsites_t *a = Make(REC_CS_USER);
  rec_callsites_t *b = Make(REC_CS_USER);
  rec_callsites_intern(b, "something else first");
  uint32_t ia = rec_callsites_capture(a), ib = rec_callsites_capture(b);
  EXPECT_EQ(ia, 1u);
  EXPECT_EQ(ib, 2u);
  EXPECT_EQ(Str(b, ib), "/home/u/model.py:42:forward");
  rec_callsites_destroy(a);
  rec_callsites_destroy(b);
  t_top = nullptr;
}

TEST(Callsite, StackMode) {
  Stack s;
  t_top = &s.f_shim;
  rec_callsites_t *c = Make(REC_CS_STACK);
  uint32_t id = rec_callsites_capture(c);
  EXPECT_EQ(Str(c, id),
            "torch/nn/modules/linear.py:125:forward < /home/u/model.py:42:forward < "
            "/home/u/train.py:13:main");
  EXPECT_EQ(rec_callsites_capture(c), id);
  s.f_main.lasti = 60;  // same innermost frames, another caller line: another stack
  uint32_t id2 = rec_callsites_capture(c);
  EXPECT_NE(id2, id);
  EXPECT_EQ(Str(c, id2),
            "torch/nn/modules/linear.py:125:forward < /home/u/model.py:42:forward < "
            "/home/u/train.py:16:main");
  rec_callsites_destroy(c);
  t_top = nullptr;
}

TEST(Callsite, DeepStacksAreBounded) {
  Code rec{"/home/u/r.py", "recurse", 1, 7};
  std::vector<Frame> fr(5000);
  for (size_t i = 0; i < fr.size(); i++) fr[i] = Frame{&rec, 0, i + 1 < fr.size() ? &fr[i + 1] : nullptr};
  t_top = &fr[0];
  rec_callsites_t *c = Make(REC_CS_STACK);
  std::string s = Str(c, rec_callsites_capture(c));
  EXPECT_LT(s.size(), 8192u);
  EXPECT_EQ(s.substr(s.size() - 6), " < ...");
  rec_callsites_destroy(c);
  // a stack of library frames deeper than the walk: the innermost one
  Code lib{"/x/site-packages/l.py", "f", 1, 8};
  for (auto &f : fr) f.code = &lib;
  c = Make(REC_CS_USER);
  EXPECT_EQ(Str(c, rec_callsites_capture(c)), "l.py:1:f");
  rec_callsites_destroy(c);
  t_top = nullptr;
}

TEST(Callsite, FullTableFoldsIntoOther) {
  Code k{"/home/u/gen.py", "f", 1, 5};
  Frame f{&k, 0, nullptr};
  t_top = &f;
  rec_callsites_t *c = Make(REC_CS_USER, 8);
  std::vector<uint32_t> ids;
  for (int i = 0; i < 20; i++) {
    f.lasti = i * 10;  // a new line each time
    ids.push_back(rec_callsites_capture(c));
  }
  for (int i = 0; i < 8; i++) EXPECT_EQ(Str(c, ids[i]), "/home/u/gen.py:" + std::to_string(1 + i) + ":f");
  for (int i = 8; i < 20; i++) EXPECT_EQ(Str(c, ids[i]), "[other]");
  rec_callsites_stats_t st;
  rec_callsites_stats(c, &st);
  EXPECT_EQ(st.strings, 9u);
  EXPECT_EQ(st.other, 12u);
  EXPECT_EQ(Str(c, rec_callsites_intern(c, "[libnccl.so.2]")), "[other]");
  rec_callsites_destroy(c);
  t_top = nullptr;
}

TEST(Callsite, NoneModeAndNoSource) {
  Stack s;
  t_top = &s.f_shim;
  rec_callsites_t *c = Make(REC_CS_NONE);
  EXPECT_EQ(rec_callsites_capture(c), 0u);
  EXPECT_EQ(rec_callsites_owner(c, 0, nullptr), 0u);
  rec_callsites_destroy(c);
  gm_err_t err;
  gm_err_clear(&err);
  ASSERT_EQ(rec_callsites_create(&c, REC_CS_USER, nullptr, 0, &err), GM_OK);
  EXPECT_EQ(rec_callsites_capture(c), 0u);
  rec_callsites_destroy(c);
  t_top = nullptr;
}

TEST(Callsite, ThreadsShareStringsNotFrames) {
  rec_callsites_t *c = Make(REC_CS_USER);
  std::vector<std::thread> th;
  std::vector<uint32_t> got(8);
  Code k{"/home/u/w.py", "work", 100, 6};
  for (int t = 0; t < 8; t++) {
    th.emplace_back([&, t] {
      Frame f{&k, (t % 2) * 10, nullptr};
      t_top = &f;
      for (int i = 0; i < 20000; i++) got[t] = rec_callsites_capture(c);
      t_top = nullptr;
    });
  }
  for (auto &x : th) x.join();
  for (int t = 0; t < 8; t++) {
    EXPECT_EQ(Str(c, got[t]), t % 2 ? "/home/u/w.py:101:work" : "/home/u/w.py:100:work");
    EXPECT_EQ(got[t], got[t % 2]);
  }
  rec_callsites_stats_t st;
  rec_callsites_stats(c, &st);
  EXPECT_EQ(st.strings, 2u);
  EXPECT_LE(st.misses, 8u);  // once per thread
  rec_callsites_destroy(c);
}

// Threads that end and threads that start (their control blocks, which key the per-thread caches,
// reused by the C library): every capture is its own thread's line, round after round, and a
// table's entries never leak into another table's captures.
TEST(Callsite, ThreadsComingAndGoingKeepTheirOwnFrames) {
  rec_callsites_t *c = Make(REC_CS_USER), *d = Make(REC_CS_USER);
  Code k{"/home/u/w.py", "work", 100, 6};
  for (int round = 0; round < 40; round++) {
    std::vector<std::thread> th;
    std::vector<std::string> got(6), got_d(6);
    for (int t = 0; t < 6; t++) {
      th.emplace_back([&, t] {
        Frame f{&k, 10 * ((round + t) % 7), nullptr};  // line 100 + (round + t) % 7
        t_top = &f;
        for (int i = 0; i < 200; i++) got[t] = Str(c, rec_callsites_capture(c));
        f.lasti = 10 * ((round + t + 1) % 7);
        got_d[t] = Str(d, rec_callsites_capture(d));
        t_top = nullptr;
      });
    }
    for (auto &x : th) x.join();
    for (int t = 0; t < 6; t++) {
      ASSERT_EQ(got[t], "/home/u/w.py:" + std::to_string(100 + (round + t) % 7) + ":work")
          << "round " << round << " thread " << t;
      ASSERT_EQ(got_d[t], "/home/u/w.py:" + std::to_string(100 + (round + t + 1) % 7) + ":work")
          << "round " << round << " thread " << t;
    }
  }
  rec_callsites_destroy(c);
  rec_callsites_destroy(d);
}

// ---- the walk through a layout (CPython 3.11+'s frames as plain memory) ------------------------
// Frames and code objects laid out as memory, with offsets of their own, read through the source's
// functions by one table and through its layout by another: every stack's callsite must be the
// same string (reference: the functions, which the walk used before the layout).

namespace {

struct LCode {
  uint64_t refcnt;
  const void *type;  // at 8, as a PyObject's
  uint64_t st[3];    // the stamp's words
  const char *file, *name;
  int first;
};
struct LFrame {
  LCode *code;
  LFrame *back;
  int lasti;
  char owner;  // kShim: a C-stack shim
};
constexpr char kShim = 3;
char g_code_type, g_other_type;
thread_local LFrame *t_ltop = nullptr;

const void *LTop(void *) { return t_ltop; }
const void *LBack(void *, const void *f) { return static_cast<const LFrame *>(f)->back; }
const void *LCodeOf(void *, const void *f) {
  const LFrame *fr = static_cast<const LFrame *>(f);
  if (fr->owner == kShim) return nullptr;
  return fr->code && fr->code->type == &g_code_type ? fr->code : nullptr;
}
int LLasti(void *, const void *f, const void *) { return static_cast<const LFrame *>(f)->lasti; }
int LLine(void *, const void *c, int lasti) { return static_cast<const LCode *>(c)->first + lasti / 2; }
uint64_t LIdent(void *, const void *c) {
  const LCode *k = static_cast<const LCode *>(c);
  return (uint64_t)(uintptr_t)k->file * 31 ^ (uint64_t)(uintptr_t)k->name ^ (uint64_t)k->first;
}
int LText(void *, const void *c, char *file, size_t nf, char *name, size_t nn) {
  const LCode *k = static_cast<const LCode *>(c);
  snprintf(file, nf, "%s", k->file);
  snprintf(name, nn, "%s", k->name);
  return 1;
}
uint64_t LStamp(void *, const void *c) {
  const LCode *k = static_cast<const LCode *>(c);
  return rec_pystamp(k->st[0], k->st[1], k->st[2]);
}

const rec_pylayout_t kLayout = {offsetof(LFrame, back), offsetof(LFrame, code), (long)offsetof(LFrame, owner),
                                kShim, &g_code_type, offsetof(LCode, st), offsetof(LCode, st) + 8,
                                offsetof(LCode, st) + 16};

rec_callsites_t *MakeLaid(bool layout) {
  rec_pyframes_t s = {};
  s.top = LTop;
  s.back = LBack;
  s.code = LCodeOf;
  s.lasti = LLasti;
  s.line = LLine;
  s.ident = LIdent;
  s.text = LText;
  s.stamp = LStamp;
  s.layout = layout ? &kLayout : nullptr;
  rec_callsites_t *c = nullptr;
  gm_err_t err;
  gm_err_clear(&err);
  EXPECT_EQ(rec_callsites_create(&c, REC_CS_USER, &s, 0, &err), GM_OK) << err.msg;
  return c;
}

}  // namespace

TEST(Callsite, LayoutWalkGivesTheFunctionsCallsites) {
  const char *files[] = {"/home/u/train.py", "/home/u/model.py",
                         "/opt/v/lib/python3.12/site-packages/torch/nn/modules/module.py",
                         "/usr/lib/python3.12/contextlib.py", "<frozen runpy>", "/srv/job/step.py"};
  for (unsigned seed = 1; seed <= 3; seed++) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    std::vector<LCode> codes(24);
    for (size_t i = 0; i < codes.size(); i++) {
      // a few objects that are not code (another type), a few sharing a stamp (the same words)
      codes[i] = LCode{1, rng() % 8 ? &g_code_type : &g_other_type, {rng() % 5, i % 7, 9}, files[rng() % 6],
                       i % 2 ? "forward" : "step", (int)(10 * i)};
    }
    std::vector<LFrame> frames(64);
    rec_callsites_t *ref = MakeLaid(false), *lay = MakeLaid(true);
    for (int k = 0; k < 3000; k++) {
      int depth = 1 + (int)(rng() % (k % 50 == 0 ? 40 : 10));  // now and then deeper than the depth cache
      for (int d = 0; d < depth; d++) {
        LFrame &f = frames[(size_t)d];
        f.code = rng() % 16 ? &codes[rng() % codes.size()] : nullptr;
        f.back = d + 1 < depth ? &frames[(size_t)d + 1] : nullptr;
        f.lasti = 2 * (int)(rng() % 4);
        f.owner = rng() % 10 ? 0 : kShim;
      }
      t_ltop = rng() % 50 ? &frames[0] : nullptr;
      for (int again = 0; again < 2; again++) {  // the second a cache hit
        uint32_t a = rec_callsites_capture(ref), b = rec_callsites_capture(lay);
        ASSERT_EQ(Str(lay, b), Str(ref, a)) << "stack " << k << " depth " << depth;
      }
    }
    t_ltop = nullptr;
    rec_callsites_destroy(ref);
    rec_callsites_destroy(lay);
  }
}

// ---- the owner of a driver call ----------------------------------------------------------------
// libowner_caller.so calls libowner_fakecuda.so ("the driver"), which calls back into this test
// ("the recorder"): the owner is the caller library.

namespace {
std::string g_owner;
const char *const kSkipFake[] = {"libowner_fakecuda.", nullptr};
const char *const kSkipBoth[] = {"libowner_fakecuda.", "libowner_caller.", nullptr};
const char *const *g_skip = kSkipFake;

extern "C" void OwnerCallback(void *) {
  char buf[256];
  size_t n = rec_owner_name(g_skip, reinterpret_cast<const void *>(&OwnerCallback), buf, sizeof buf);
  g_owner = n ? buf : "";
}
}  // namespace

TEST(Owner, FirstFrameOutsideTheDriverAndUs) {
  void *fake = dlopen("recorder/testdata/libowner_fakecuda.so", RTLD_NOW | RTLD_GLOBAL);
  ASSERT_NE(fake, nullptr) << dlerror();
  void *caller = dlopen("recorder/testdata/libowner_caller.so", RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(caller, nullptr) << dlerror();
  auto call = reinterpret_cast<void (*)(void (*)(void *), void *)>(dlsym(caller, "owner_caller_alloc"));
  ASSERT_NE(call, nullptr);
  rec_owner_prime();
  g_skip = kSkipFake;
  call(OwnerCallback, nullptr);
  EXPECT_EQ(g_owner, "[libowner_caller.so]");
  // with the caller skipped too, the next object out: this test's own frames are "us", so libc
  g_skip = kSkipBoth;
  call(OwnerCallback, nullptr);
  EXPECT_EQ(g_owner.substr(0, 6), "[libc.");
  // cost, for the record
  g_skip = kSkipFake;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < 2000; i++) call(OwnerCallback, nullptr);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("[ cost ] owner (backtrace + dladdr): %.0f ns per call\n",
         ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 2000);
  EXPECT_EQ(g_owner, "[libowner_caller.so]");
}

TEST(Owner, CallsiteJoinsOwnerAndPythonFrame) {
  Stack s;
  t_top = &s.f_shim;
  rec_callsites_t *c = Make(REC_CS_USER);
  uint32_t py = rec_callsites_capture(c);
  // from this test binary, with nothing skipped but CUDA's libraries: the test is the caller
  uint32_t id = rec_callsites_owner(c, py, nullptr);
  std::string s2 = Str(c, id);
  EXPECT_EQ(s2.front(), '[');
  EXPECT_NE(s2.find("] < /home/u/model.py:42:forward"), std::string::npos) << s2;
  rec_callsites_destroy(c);
  t_top = nullptr;
}
