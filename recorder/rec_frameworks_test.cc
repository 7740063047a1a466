// rec_frameworks_test.cc: the recorder names the frameworks a process loaded, with the
// version from the pip metadata beside them. A tiny real shared library is copied into fake
// site-packages layouts (jaxlib, torch/lib, cupy_backends) and dlopen()ed.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "formats/gmt.h"
#include "recorder/rec_core.h"

namespace {

std::string Tmp() {
  const char *t = getenv("TEST_TMPDIR");
  return std::string(t ? t : "/tmp") + "/fw" + std::to_string(getpid());
}

void MkdirP(const std::string &p) {
  std::string cur;
  for (size_t i = 0; i <= p.size(); i++) {
    if (i == p.size() || (p[i] == '/' && i > 0)) mkdir(p.substr(0, i).c_str(), 0755);
  }
}

void Copy(const std::string &from, const std::string &to) {
  std::ifstream in(from, std::ios::binary);
  std::ofstream out(to, std::ios::binary);
  out << in.rdbuf();
}

// Puts the library at site/<rel> and loads it; returns the handle.
void *Load(const std::string &site, const std::string &rel) {
  std::string path = site + "/" + rel;
  MkdirP(path.substr(0, path.rfind('/')));
  Copy("recorder/testdata/libfakefw.so", path);
  void *h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(h, nullptr) << dlerror();
  return h;
}

}  // namespace

TEST(Frameworks, NoneLoadedNoneNamed) {
  gmt_header_t h;
  gmt_header_init(&h);
  EXPECT_EQ(rec_frameworks_fill(&h), 0);
  EXPECT_EQ(gmt_header_frameworks(&h), 0u);
  gmt_header_free(&h);
}

TEST(Frameworks, NamedWithTheirPipVersions) {
  std::string site = Tmp() + "/venv/lib/python3.12/site-packages";
  MkdirP(site + "/jax-0.11.2.dist-info");
  MkdirP(site + "/jaxlib-0.11.1.dist-info");
  MkdirP(site + "/cupy_cuda13x-14.2.0.dist-info");
  void *a = Load(site, "jax_plugins/xla_cuda13/xla_cuda_plugin.so");
  void *b = Load(site, "cupy_backends/cuda/api/runtime.so");
  void *c = Load(site, "torch/lib/libtorch_cuda.so");  // no torch dist-info: version unknown
  gmt_header_t h;
  gmt_header_init(&h);
  EXPECT_EQ(rec_frameworks_fill(&h), 3);
  ASSERT_NE(gmt_header_kv_get(&h, "framework.jax"), nullptr);
  EXPECT_STREQ(gmt_header_kv_get(&h, "framework.jax"), "0.11.2");  // jax's, not jaxlib's
  EXPECT_STREQ(gmt_header_kv_get(&h, "framework.cupy"), "14.2.0");
  EXPECT_STREQ(gmt_header_kv_get(&h, "framework.pytorch"), "unknown");
  EXPECT_EQ(gmt_header_kv_get(&h, "framework.tensorflow"), nullptr);
  EXPECT_EQ(gmt_header_frameworks(&h), GMT_FW_JAX | GMT_FW_CUPY | GMT_FW_PYTORCH);
  EXPECT_EQ(gmt_framework_single(gmt_header_frameworks(&h)), 0u);  // several: no single one
  char buf[128];
  EXPECT_STREQ(gmt_header_frameworks_text(&h, buf, sizeof buf), "PyTorch unknown, JAX 0.11.2, CuPy 14.2.0");
  gmt_header_free(&h);
  dlclose(a);
  dlclose(b);
  dlclose(c);
}

// A trace that says nothing is PyTorch's only when it is a PyTorch history.
TEST(Frameworks, OlderTracesAreUnknownUnlessTorchMode) {
  gmt_header_t h;
  gmt_header_init(&h);
  h.capture_mode = GMT_CAPTURE_REQUESTS;
  EXPECT_EQ(gmt_header_frameworks(&h), 0u);
  char buf[64];
  EXPECT_STREQ(gmt_header_frameworks_text(&h, buf, sizeof buf), "unknown (not recorded)");
  h.capture_mode = GMT_CAPTURE_TORCH;
  EXPECT_EQ(gmt_header_frameworks(&h), GMT_FW_PYTORCH);
  gmt_header_free(&h);
}
