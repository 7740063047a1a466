// rp_jax_test.cc: the `jax` policy: JAX's settings in JAX's words, mapped onto the BFC core,
// the direct policy (platform) or the async pool (cuda_async); errors name the setting.
#include <gtest/gtest.h>

#include <string>

#include "replay/policies/rp_policies.h"
#include "replay/policies/testing/fake_driver.h"

namespace {

constexpr uint64_t MiB = 1ull << 20;

struct Jax {
  rp_fake_driver_t f;
  rp_policy_t *p = nullptr;
  gm_err_t err{};
  gm_status_t st;
  explicit Jax(const char *conf, uint64_t total = 1000 * MiB) {
    rp_fake_driver_init(&f, total, 1, 0);
    f.drv.total_memory = total;
    st = rp_jax_ops.create(conf, &f.drv, &p, &err);
  }
  uint64_t Pool() {
    rp_policy_stats_t s;
    rp_jax_ops.stats(p, &s);
    return s.allocated_bytes + s.cached_bytes; /* what the BFC took from the driver */
  }
  ~Jax() {
    if (p) {
      rp_jax_ops.release_all(p, &err);
      rp_jax_ops.destroy(p);
    }
    rp_fake_driver_fini(&f);
  }
};

}  // namespace

// The default preallocates 75 % of the device, rounded up to 2 MiB as JAX 0.11 does, at the
// first request: 0.75 x 1000 MiB = 750 MiB (already a multiple of 2 MiB).
TEST(Jax, DefaultPreallocatesThreeQuarters) {
  Jax j("");
  ASSERT_EQ(j.st, GM_OK) << j.err.msg;
  uint64_t a;
  ASSERT_EQ(rp_jax_ops.alloc(j.p, 1000, 0, &a, &j.err), GM_OK);
  EXPECT_EQ(j.Pool(), 750 * MiB);
  EXPECT_STREQ(rp_jax_ops.spec(j.p), "jax");
}

// 0.3 x 1001 MiB = 300.3 MiB, rounded up to 302 MiB.
TEST(Jax, FractionLimitRoundsUpToTwoMiB) {
  Jax j("XLA_PYTHON_CLIENT_MEM_FRACTION=.3", 1001 * MiB);
  ASSERT_EQ(j.st, GM_OK) << j.err.msg;
  uint64_t a;
  ASSERT_EQ(rp_jax_ops.alloc(j.p, 1000, 0, &a, &j.err), GM_OK);
  EXPECT_EQ(j.Pool(), 302 * MiB);
  EXPECT_STREQ(rp_jax_ops.spec(j.p), "jax:XLA_PYTHON_CLIENT_MEM_FRACTION=.3");
}

// Growth: the BFC's first region is 2 MiB; a limit still applies (OOM past it).
TEST(Jax, GrowthStartsSmallAndKeepsTheLimit) {
  Jax j("XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_CLIENT_MEM_FRACTION=0.01");  // limit 10 MiB
  ASSERT_EQ(j.st, GM_OK) << j.err.msg;
  uint64_t a, b;
  ASSERT_EQ(rp_jax_ops.alloc(j.p, 1000, 0, &a, &j.err), GM_OK);
  EXPECT_EQ(j.Pool(), 2 * MiB);
  EXPECT_EQ(rp_jax_ops.alloc(j.p, 20 * MiB, 0, &b, &j.err), GM_ERR_NOMEM);
}

// platform: each buffer from the driver, rounded up to the 2 MiB VMM granularity.
TEST(Jax, PlatformIsDirectRoundedToTheGranularity) {
  Jax j("XLA_PYTHON_CLIENT_ALLOCATOR=platform");
  ASSERT_EQ(j.st, GM_OK) << j.err.msg;
  uint64_t a;
  ASSERT_EQ(rp_jax_ops.alloc(j.p, 3 * MiB, 0, &a, &j.err), GM_OK);
  rp_policy_stats_t s;
  rp_jax_ops.stats(j.p, &s);
  EXPECT_EQ(s.allocated_bytes, 4 * MiB);
}

TEST(Jax, BadWordsNameTheSettingAndTheAcceptedValues) {
  struct {
    const char *conf, *msg;
  } cases[] = {
      {"XLA_PYTHON_CLIENT_PREALLOCATE=maybe", "XLA_PYTHON_CLIENT_PREALLOCATE='maybe' (accepted: true, false, 1, 0)"},
      {"XLA_PYTHON_CLIENT_MEM_FRACTION=1.5", "(accepted: a number in (0, 1])"},
      {"XLA_PYTHON_CLIENT_MEM_FRACTION=nan", "(accepted: a number in (0, 1])"},
      {"XLA_PYTHON_CLIENT_MEM_FRACTION=.5,XLA_CLIENT_MEM_FRACTION=.5", "set twice"},
      {"XLA_PYTHON_CLIENT_ALLOCATOR=bogus", "(accepted: default, bfc, platform, cuda_async)"},
      {"XLA_PYTHON_CLIENT_PREALOCATE=false", "unknown key 'XLA_PYTHON_CLIENT_PREALOCATE'"},
      {"growth", "is not KEY=VALUE"},
      {"XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async", "add XLA_PYTHON_CLIENT_PREALLOCATE=false"},
  };
  for (const auto &c : cases) {
    Jax j(c.conf);
    EXPECT_EQ(j.st, GM_ERR_INVAL) << c.conf;
    EXPECT_NE(std::string(j.err.msg).find(c.msg), std::string::npos) << c.conf << " -> " << j.err.msg;
  }
}
