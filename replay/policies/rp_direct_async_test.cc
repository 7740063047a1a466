// direct and async: call counts, exact sizes, OOM paths, stream forwarding, conf errors.
#include <gtest/gtest.h>

#include <string>

#include "replay/policies/rp_policies.h"
#include "replay/policies/testing/fake_driver.h"

namespace {

constexpr uint64_t MiB = 1024 * 1024;

TEST(Direct, EveryRequestIsOneDriverCallWithTheExactSize) {
  rp_fake_driver_t f;
  rp_fake_driver_init(&f, 64 * MiB, 2 * MiB, 0);
  rp_policy_t *p = nullptr;
  gm_err_t err{};
  ASSERT_EQ(rp_direct_ops.create("", &f.drv, &p, &err), GM_OK) << err.msg;
  uint64_t a = 0, b = 0, c = 0;
  ASSERT_EQ(rp_direct_ops.alloc(p, 1000, 0, &a, &err), GM_OK);
  ASSERT_EQ(rp_direct_ops.alloc(p, 3 * MiB + 1, 0, &b, &err), GM_OK);
  ASSERT_EQ(rp_direct_ops.alloc(p, 0, 0, &c, &err), GM_OK);  // asks the driver for 1 byte
  EXPECT_EQ(f.calls.mem_alloc, 3u);
  uint64_t seg_bytes = 0;
  EXPECT_EQ(rp_fake_driver_segments(&f, &seg_bytes), 3);
  EXPECT_EQ(seg_bytes, 1000 + 3 * MiB + 1 + 1);
  EXPECT_EQ(f.used, 2 * MiB + 4 * MiB + 2 * MiB);  // the driver's rounding, not the policy's
  rp_policy_stats_t s{};
  rp_direct_ops.stats(p, &s);
  EXPECT_EQ(s.allocated_bytes, 1000 + 3 * MiB + 2);
  EXPECT_EQ(s.cached_bytes, 0u);
  ASSERT_EQ(rp_direct_ops.free(p, b, &err), GM_OK);
  EXPECT_EQ(f.calls.mem_free, 1u);
  EXPECT_EQ(rp_direct_ops.free(p, b, &err), GM_ERR_INVAL);  // double free: error, no driver call
  EXPECT_EQ(f.calls.mem_free, 1u);
  ASSERT_EQ(rp_direct_ops.check(p, &err), GM_OK) << err.msg;
  ASSERT_EQ(rp_direct_ops.empty_cache(p, &err), GM_OK);
  EXPECT_EQ(f.calls.mem_free, 1u);
  ASSERT_EQ(rp_direct_ops.release_all(p, &err), GM_OK);
  EXPECT_EQ(f.calls.mem_free, 3u);
  EXPECT_EQ(f.used, 0u);
  EXPECT_EQ(f.errors, 0u);
  EXPECT_STREQ(rp_direct_ops.spec(p), "direct");
  rp_direct_ops.destroy(p);
  rp_fake_driver_fini(&f);
}

TEST(Direct, OomIsTheDriversWithoutRetry) {
  rp_fake_driver_t f;
  rp_fake_driver_init(&f, 4 * MiB, 2 * MiB, 0);
  rp_policy_t *p = nullptr;
  gm_err_t err{};
  ASSERT_EQ(rp_direct_ops.create("", &f.drv, &p, &err), GM_OK);
  uint64_t a = 0;
  ASSERT_EQ(rp_direct_ops.alloc(p, 3 * MiB, 0, &a, &err), GM_OK);
  EXPECT_EQ(rp_direct_ops.alloc(p, 1, 0, &a, &err), GM_ERR_NOMEM);  // 2 MiB page > 1 MiB left
  rp_policy_stats_t s{};
  rp_direct_ops.stats(p, &s);
  EXPECT_EQ(s.ooms, 1u);
  EXPECT_EQ(s.alloc_retries, 0u);
  EXPECT_EQ(f.calls.mem_alloc, 2u);
  ASSERT_EQ(rp_direct_ops.release_all(p, &err), GM_OK);
  rp_direct_ops.destroy(p);
  rp_fake_driver_fini(&f);
}

TEST(Direct, TakesOnlyRound) {
  rp_fake_driver_t f;
  rp_fake_driver_init(&f, 4 * MiB, 1, 0);
  rp_policy_t *p = nullptr;
  gm_err_t err{};
  EXPECT_EQ(rp_direct_ops.create("fast", &f.drv, &p, &err), GM_ERR_INVAL);
  EXPECT_STREQ(err.msg, "direct: unknown key 'fast' (known: round)");
  EXPECT_EQ(rp_direct_ops.create("round=3MiB", &f.drv, &p, &err), GM_ERR_INVAL);
  EXPECT_NE(std::string(err.msg).find("not a power of two"), std::string::npos) << err.msg;
  rp_fake_driver_fini(&f);
}

// round=2MiB: XLA's platform allocator maps every buffer rounded up to the VMM granularity.
TEST(Direct, RoundsEachRequestUp) {
  rp_fake_driver_t f;
  rp_fake_driver_init(&f, 64 * MiB, 1, 0);
  rp_policy_t *p = nullptr;
  gm_err_t err{};
  ASSERT_EQ(rp_direct_ops.create("round=2MiB", &f.drv, &p, &err), GM_OK) << err.msg;
  uint64_t a, b;
  ASSERT_EQ(rp_direct_ops.alloc(p, 1, 0, &a, &err), GM_OK);
  ASSERT_EQ(rp_direct_ops.alloc(p, 2 * MiB + 1, 0, &b, &err), GM_OK);
  rp_policy_stats_t s;
  rp_direct_ops.stats(p, &s);
  EXPECT_EQ(s.allocated_bytes, 2 * MiB + 4 * MiB);
  ASSERT_EQ(rp_direct_ops.free(p, a, &err), GM_OK);
  rp_direct_ops.stats(p, &s);
  EXPECT_EQ(s.allocated_bytes, 4 * MiB);
  EXPECT_EQ(rp_direct_ops.alloc(p, UINT64_MAX, 0, &a, &err), GM_ERR_NOMEM);
  ASSERT_EQ(rp_direct_ops.release_all(p, &err), GM_OK);
  rp_direct_ops.destroy(p);
  rp_fake_driver_fini(&f);
}

TEST(Async, NeedsABackendWithAPool) {
  rp_fake_driver_t f;
  rp_fake_driver_init(&f, 64 * MiB, 2 * MiB, 0);  // no alloc_async (the sim has its model)
  rp_policy_t *p = nullptr;
  gm_err_t err{};
  EXPECT_EQ(rp_async_ops.create("", &f.drv, &p, &err), GM_ERR_UNSUPPORTED);
  EXPECT_STREQ(err.msg, "async policy needs a backend with a stream-ordered pool");
  EXPECT_EQ(rp_async_ops.create("release_threshold=x", &f.drv, &p, &err), GM_ERR_INVAL);  // conf first
  EXPECT_NE(std::string(err.msg).find("'release_threshold'"), std::string::npos) << err.msg;
  rp_fake_driver_fini(&f);
}

TEST(Async, ForwardsExactSizesAndFreesOnTheAllocationStream) {
  rp_fake_driver_t f;
  rp_fake_driver_init(&f, 64 * MiB, 2 * MiB, 1);
  rp_policy_t *p = nullptr;
  gm_err_t err{};
  ASSERT_EQ(rp_async_ops.create("", &f.drv, &p, &err), GM_OK) << err.msg;
  uint64_t a = 0, b = 0;
  ASSERT_EQ(rp_async_ops.alloc(p, 1000, 7, &a, &err), GM_OK);
  ASSERT_EQ(rp_async_ops.alloc(p, 5000, 9, &b, &err), GM_OK);
  EXPECT_EQ(f.calls.alloc_async, 2u);
  EXPECT_EQ(f.calls.mem_alloc, 0u);
  ASSERT_EQ(rp_async_ops.free(p, a, &err), GM_OK);
  EXPECT_EQ(f.calls.free_async, 1u);
  EXPECT_EQ(f.calls.pool_trim, 0u);  // default threshold: never trims on its own
  ASSERT_EQ(rp_async_ops.empty_cache(p, &err), GM_OK);
  EXPECT_EQ(f.calls.pool_trim, 1u);
  rp_policy_stats_t s{};
  rp_async_ops.stats(p, &s);
  EXPECT_EQ(s.allocated_bytes, 5000u);
  ASSERT_EQ(rp_async_ops.release_all(p, &err), GM_OK);
  EXPECT_EQ(f.used, 0u);
  EXPECT_EQ(f.errors, 0u);
  rp_async_ops.destroy(p);
  rp_fake_driver_fini(&f);
}

TEST(Async, ReleaseThresholdTrimsAfterEachFree) {
  rp_fake_driver_t f;
  rp_fake_driver_init(&f, 64 * MiB, 1, 1);
  rp_policy_t *p = nullptr;
  gm_err_t err{};
  ASSERT_EQ(rp_async_ops.create("release_threshold=1MiB", &f.drv, &p, &err), GM_OK) << err.msg;
  EXPECT_STREQ(rp_async_ops.spec(p), "async:release_threshold=1MiB");
  uint64_t a = 0, b = 0;
  ASSERT_EQ(rp_async_ops.alloc(p, 2 * MiB, 0, &a, &err), GM_OK);
  ASSERT_EQ(rp_async_ops.alloc(p, 512 * 1024, 0, &b, &err), GM_OK);
  ASSERT_EQ(rp_async_ops.free(p, b, &err), GM_OK);  // 0.5 MiB cached <= 1 MiB: kept
  EXPECT_EQ(f.used, 2 * MiB + 512 * 1024);
  ASSERT_EQ(rp_async_ops.free(p, a, &err), GM_OK);  // 2.5 MiB cached > 1 MiB: trimmed
  EXPECT_EQ(f.calls.pool_trim, 2u);
  EXPECT_LE(f.used, 1 * MiB);
  ASSERT_EQ(rp_async_ops.release_all(p, &err), GM_OK);
  rp_async_ops.destroy(p);
  rp_fake_driver_fini(&f);
}

TEST(Async, OomTrimsThePoolAndRetriesOnce) {
  rp_fake_driver_t f;
  rp_fake_driver_init(&f, 4 * MiB, 1, 1);
  rp_policy_t *p = nullptr;
  gm_err_t err{};
  ASSERT_EQ(rp_async_ops.create("", &f.drv, &p, &err), GM_OK);
  uint64_t a = 0, b = 0;
  ASSERT_EQ(rp_async_ops.alloc(p, 3 * MiB, 0, &a, &err), GM_OK);
  ASSERT_EQ(rp_async_ops.free(p, a, &err), GM_OK);  // 3 MiB cached in the pool
  ASSERT_EQ(rp_async_ops.alloc(p, 2 * MiB, 0, &b, &err), GM_OK);  // needs the trim
  rp_policy_stats_t s{};
  rp_async_ops.stats(p, &s);
  EXPECT_EQ(s.alloc_retries, 1u);
  EXPECT_EQ(s.ooms, 0u);
  EXPECT_EQ(rp_async_ops.alloc(p, 3 * MiB, 0, &a, &err), GM_ERR_NOMEM);
  rp_async_ops.stats(p, &s);
  EXPECT_EQ(s.alloc_retries, 2u);
  EXPECT_EQ(s.ooms, 1u);
  ASSERT_EQ(rp_async_ops.release_all(p, &err), GM_OK);
  rp_async_ops.destroy(p);
  rp_fake_driver_fini(&f);
}

}  // namespace
