// rp_cupy_test.cc: the `cupy` policy against CuPy's memory.pyx rules, on hand-written op
// sequences whose figures are worked out in the comments.
#include <gtest/gtest.h>

#include <string>

#include "replay/policies/rp_policies.h"
#include "replay/policies/testing/fake_driver.h"

namespace {

constexpr uint64_t MiB = 1ull << 20;

struct Pool {
  rp_fake_driver_t f;
  rp_policy_t *p = nullptr;
  gm_err_t err{};
  gm_status_t st;
  explicit Pool(const char *conf = "", uint64_t capacity = 64 * MiB) {
    rp_fake_driver_init(&f, capacity, 1, 0);
    f.drv.total_memory = capacity;
    st = rp_cupy_ops.create(conf, &f.drv, &p, &err);
  }
  uint64_t A(uint64_t size, uint64_t stream = 7) {
    uint64_t a = 0;
    EXPECT_EQ(rp_cupy_ops.alloc(p, size, stream, &a, &err), GM_OK) << err.msg;
    EXPECT_EQ(rp_cupy_ops.check(p, &err), GM_OK) << err.msg;
    return a;
  }
  void F(uint64_t a) {
    EXPECT_EQ(rp_cupy_ops.free(p, a, &err), GM_OK) << err.msg;
    EXPECT_EQ(rp_cupy_ops.check(p, &err), GM_OK) << err.msg;
  }
  rp_policy_stats_t S() {
    rp_policy_stats_t s;
    rp_cupy_ops.stats(p, &s);
    return s;
  }
  ~Pool() {
    if (p) {
      EXPECT_EQ(rp_cupy_ops.release_all(p, &err), GM_OK) << err.msg;
      rp_cupy_ops.destroy(p);
    }
    EXPECT_EQ(f.errors, 0u);
    rp_fake_driver_fini(&f);
  }
};

}  // namespace

// 1000 B -> 1024 B (512-byte units): one cudaMalloc of exactly that.
TEST(Cupy, RoundsTo512AndMallocsTheRoundedSize) {
  Pool p;
  ASSERT_EQ(p.st, GM_OK);
  p.A(1000);
  EXPECT_EQ(p.S().allocated_bytes, 1024u);
  EXPECT_EQ(p.f.calls.mem_alloc, 1u);
  p.A(0);  // Memory(0): nothing
  EXPECT_EQ(p.f.calls.mem_alloc, 1u);
}

// A freed 4 MiB chunk serves 1 MiB by splitting; the 3 MiB rest serves the next; freeing
// both merges them back into one 4 MiB chunk that serves 4 MiB without a new cudaMalloc.
TEST(Cupy, SplitsAndMergesInsideOneAllocation) {
  Pool p;
  uint64_t a = p.A(4 * MiB);
  p.F(a);
  uint64_t b = p.A(1 * MiB), c = p.A(3 * MiB);
  EXPECT_EQ(b, a);
  EXPECT_EQ(c, a + 1 * MiB);
  EXPECT_EQ(p.f.calls.mem_alloc, 1u);
  p.F(b);
  p.F(c);
  EXPECT_EQ(p.S().cached_bytes, 4 * MiB);
  uint64_t d = p.A(4 * MiB);
  EXPECT_EQ(d, a);
  EXPECT_EQ(p.f.calls.mem_alloc, 1u);
  EXPECT_EQ(p.S().merges, 1u);  // c into b when c is freed (b was already free)
}

// Best fit over bins: of free 2 MiB and 6 MiB chunks, 1.5 MiB takes the 2 MiB one.
TEST(Cupy, SmallestFittingBinFirst) {
  Pool p;
  uint64_t x = p.A(6 * MiB), y = p.A(2 * MiB), z = p.A(512);
  p.F(x);
  p.F(y);
  uint64_t w = p.A(3 * MiB / 2);
  EXPECT_EQ(w, y);
  (void)z;
}

// Arenas are per stream: a chunk freed on stream 1 is not reused on stream 2.
TEST(Cupy, ArenasArePerStream) {
  Pool p;
  uint64_t a = p.A(2 * MiB, 1);
  p.F(a);
  p.A(2 * MiB, 2);
  EXPECT_EQ(p.f.calls.mem_alloc, 2u);
  p.A(2 * MiB, 1);
  EXPECT_EQ(p.f.calls.mem_alloc, 2u);
}

// The limit fails at once, without freeing cached memory (_try_malloc); a driver refusal frees
// the whole free allocations (free_all_blocks) and retries.
TEST(Cupy, LimitFailsAtOnceDriverRefusalFreesAndRetries) {
  Pool lim("CUPY_GPU_MEMORY_LIMIT=5242880");  // 5 MiB
  uint64_t a = lim.A(4 * MiB);
  lim.F(a);
  uint64_t b = 0;
  EXPECT_EQ(rp_cupy_ops.alloc(lim.p, 5 * MiB, 7, &b, &lim.err), GM_ERR_NOMEM);
  EXPECT_EQ(lim.S().cached_bytes, 4 * MiB);  // still cached

  Pool dev("", 8 * MiB);
  uint64_t c = dev.A(6 * MiB);
  dev.F(c);
  dev.A(4 * MiB + 512);  // splits the 6 MiB chunk
  uint64_t d = dev.A(2 * MiB);  // no fit in the 1.5 MiB rest; the driver has 2 MiB left
  (void)d;
  EXPECT_EQ(dev.S().alloc_retries, 0u);
  Pool dev2("", 8 * MiB);
  uint64_t e = dev2.A(6 * MiB);
  dev2.F(e);
  dev2.A(4 * MiB, 9);  // another stream: the 6 MiB chunk is whole and free: freed to make room
  EXPECT_EQ(dev2.S().alloc_retries, 1u);
  EXPECT_EQ(dev2.S().cached_bytes, 0u);
}

TEST(Cupy, BadLimitNamesTheSetting) {
  Pool p("CUPY_GPU_MEMORY_LIMIT=lots");
  EXPECT_EQ(p.st, GM_ERR_INVAL);
  EXPECT_NE(std::string(p.err.msg).find("accepted: bytes, or a percentage"), std::string::npos) << p.err.msg;
  Pool q("limit=5");
  EXPECT_EQ(q.st, GM_ERR_INVAL);
  EXPECT_NE(std::string(q.err.msg).find("known: CUPY_GPU_MEMORY_LIMIT"), std::string::npos) << q.err.msg;
}
