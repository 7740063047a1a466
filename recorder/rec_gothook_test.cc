// rec_gothook_test.cc: one library's calls to a function of another, redirected through its GOT,
// on three builds of the caller: full RELRO (the GOT read-only once loaded), lazy binding (the
// slot still points at the PLT stub), -fno-plt (a GLOB_DAT slot, no PLT at all).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>

#include "recorder/rec_gothook.h"

namespace {

typedef int (*fn_t)(int);
fn_t g_orig;
int g_calls;

int Repl(int x) {
  g_calls++;
  return g_orig(x) + 1000;  // the real function still runs
}

void *Callee() {
  static void *h = dlopen("recorder/testdata/libhk_callee.so", RTLD_NOW | RTLD_GLOBAL);
  return h;
}

struct Case {
  const char *lib;   // path to dlopen
  const char *name;  // its file name's start, as rec_got_hook is given it
  bool call_first;   // resolve the slot before hooking
};

void Check(const Case &c) {
  ASSERT_NE(Callee(), nullptr) << dlerror();
  void *h = dlopen(c.lib, RTLD_LAZY | RTLD_LOCAL);
  ASSERT_NE(h, nullptr) << dlerror();
  fn_t call = (fn_t)dlsym(h, "hk_call");
  ASSERT_NE(call, nullptr);
  if (c.call_first) {
    EXPECT_EQ(call(1), 20);
  }
  g_orig = nullptr;
  g_calls = 0;
  char why[256] = "";
  EXPECT_EQ(rec_got_hook(c.name, "hk_target", (void *)Repl, (void **)&g_orig, why, sizeof why), 1)
      << why;
  EXPECT_EQ((void *)g_orig, dlsym(Callee(), "hk_target"));
  EXPECT_EQ(call(1), 10 * (2 + 1000));
  EXPECT_EQ(g_calls, 1);
  // again: nothing left to change, the original stays what it was
  fn_t before = g_orig;
  EXPECT_EQ(rec_got_hook(c.name, "hk_target", (void *)Repl, (void **)&g_orig, why, sizeof why), 0);
  EXPECT_EQ(g_orig, before);
  EXPECT_EQ(call(2), 10 * (3 + 1000));
  EXPECT_EQ(g_calls, 2);
  // the callee's own symbol, called directly, is untouched
  EXPECT_EQ(((fn_t)dlsym(Callee(), "hk_target"))(5), 6);
}

TEST(GotHook, FullRelroAfterTheSlotIsBound) {
  Check({"recorder/testdata/libhk_caller.so", "libhk_caller.so", true});
}

TEST(GotHook, LazySlotStillAtThePltStub) {
  Check({"recorder/testdata/libhk_caller_lazy.so", "libhk_caller_lazy.so", false});
}

TEST(GotHook, NoPltGlobDatSlot) {
  Check({"recorder/testdata/libhk_caller_noplt.so", "libhk_caller_noplt.so", false});
}

TEST(GotHook, SaysWhyNot) {
  ASSERT_NE(Callee(), nullptr);
  void *orig = nullptr;
  char why[256] = "";
  EXPECT_EQ(rec_got_hook("libnot_loaded_here.so", "hk_target", (void *)Repl, &orig, why, sizeof why), -1);
  EXPECT_STREQ(why, "libnot_loaded_here.so is not loaded");
  // the callee defines hk_target but calls nothing by that name
  EXPECT_EQ(rec_got_hook("libhk_callee.so", "hk_target", (void *)Repl, &orig, why, sizeof why), -1);
  EXPECT_NE(std::string(why).find("does not call hk_target"), std::string::npos) << why;
  EXPECT_EQ(orig, nullptr);
}

}  // namespace
