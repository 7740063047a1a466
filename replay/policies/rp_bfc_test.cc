// Golden cases for the bfc and prealloc policies, every expected number computed by hand
// from TF's rules (see rp_bfc_core.c): rounding, bins, split and no-split boundaries,
// coalescing, region growth sizes, backpedal, garbage collection, prealloc arena OOM.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "replay/policies/rp_bfc_core.h"
#include "replay/policies/rp_policies.h"
#include "replay/policies/testing/fake_driver.h"

namespace {

constexpr uint64_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;

// One policy instance on its own fake driver; the invariant walker runs after every op.
struct Bench {
  rp_fake_driver_t f;
  const rp_policy_ops_t *ops;
  rp_policy_t *p = nullptr;
  gm_err_t err{};

  Bench(const rp_policy_ops_t *o, const char *conf, uint64_t capacity, uint64_t gran = 1) : ops(o) {
    rp_fake_driver_init(&f, capacity, gran, 0);
    gm_status_t st = ops->create(conf, &f.drv, &p, &err);
    EXPECT_EQ(st, GM_OK) << err.msg;
  }
  ~Bench() {
    if (p) {
      EXPECT_EQ(ops->release_all(p, &err), GM_OK) << err.msg;
      EXPECT_EQ(f.used, 0u) << "release_all left driver memory behind";
      ops->destroy(p);
    }
    EXPECT_EQ(f.errors, 0u) << "the policy misused the driver";
    rp_fake_driver_fini(&f);
  }
  void Check() {
    gm_err_t e{};
    ASSERT_EQ(ops->check(p, &e), GM_OK) << e.msg;
  }
  uint64_t Alloc(uint64_t size) {
    uint64_t a = 0;
    gm_status_t st = ops->alloc(p, size, 0, &a, &err);
    EXPECT_EQ(st, GM_OK) << "alloc " << size << ": " << err.msg;
    Check();
    return a;
  }
  gm_status_t TryAlloc(uint64_t size) {
    uint64_t a = 0;
    gm_status_t st = ops->alloc(p, size, 0, &a, &err);
    Check();
    return st;
  }
  void Free(uint64_t a) {
    EXPECT_EQ(ops->free(p, a, &err), GM_OK) << err.msg;
    Check();
  }
  rp_policy_stats_t Stats() {
    rp_policy_stats_t s{};
    ops->stats(p, &s);
    return s;
  }
  // Sizes of the segments the driver holds, in allocation order of the fake's array.
  std::string Segments() {
    std::string out;
    for (int i = 0; i < f.nblocks; i++)
      if (f.blocks[i].kind == RP_FAKE_SEGMENT) out += std::to_string(f.blocks[i].size / KiB) + "K ";
    return out;
  }
};

TEST(BfcBins, PowerOfTwoBinsFrom256) {
  EXPECT_EQ(rp_bfc_bin_for_size(256), 0);
  EXPECT_EQ(rp_bfc_bin_for_size(511), 0);
  EXPECT_EQ(rp_bfc_bin_for_size(512), 1);
  EXPECT_EQ(rp_bfc_bin_for_size(1024), 2);
  EXPECT_EQ(rp_bfc_bin_for_size(1 * MiB), 12);
  EXPECT_EQ(rp_bfc_bin_for_size(256 * MiB - 256), 19);
  EXPECT_EQ(rp_bfc_bin_for_size(256 * MiB), 20);
  EXPECT_EQ(rp_bfc_bin_for_size(80 * GiB), 20);
}

TEST(BfcAlloc, RoundsTo256AndPacksFromRegionStart) {
  Bench b(&rp_bfc_ops, "growth,limit=64MiB", 64 * MiB);
  uint64_t a1 = b.Alloc(1);
  uint64_t a2 = b.Alloc(257);
  uint64_t a3 = b.Alloc(0);  // served as 256 B: one address per live block
  EXPECT_EQ(a2, a1 + 256);
  EXPECT_EQ(a3, a1 + 256 + 512);
  EXPECT_EQ(b.Stats().allocated_bytes, 256u + 512u + 256u);
  EXPECT_EQ(b.f.calls.mem_alloc, 1u);
  EXPECT_EQ(b.Segments(), "2048K ");  // allow_growth: the first region is 2 MiB
  EXPECT_EQ(b.Stats().cached_bytes, 2 * MiB - 1024);
}

TEST(BfcSplit, SplitsAtTwiceTheRequestNotBelow) {
  Bench b(&rp_bfc_ops, "growth,limit=64MiB", 64 * MiB);
  uint64_t a = b.Alloc(1 * MiB);  // 2 MiB chunk >= 2 * 1 MiB: split
  EXPECT_EQ(b.Stats().splits, 1u);
  EXPECT_EQ(b.Stats().allocated_bytes, 1 * MiB);
  b.Free(a);  // merges back with the 1 MiB remainder
  EXPECT_EQ(b.Stats().merges, 1u);
  uint64_t c = b.Alloc(1 * MiB + 1);  // rounded 1 MiB + 256: 2 MiB < 2x, 1 MiB - 256 < 128 MiB
  EXPECT_EQ(c, a);
  EXPECT_EQ(b.Stats().splits, 1u);
  EXPECT_EQ(b.Stats().allocated_bytes, 2 * MiB);  // the whole chunk, padding included
}

TEST(BfcSplit, SplitsWhenWasteReaches128MiB) {
  Bench b(&rp_bfc_ops, "limit=1GiB", 2 * GiB);
  b.Alloc(600 * MiB);  // 1 GiB chunk < 1200 MiB, but 424 MiB left >= 128 MiB: split
  EXPECT_EQ(b.Stats().splits, 1u);
  EXPECT_EQ(b.Segments(), "1048576K ");  // no growth: one region of the whole limit
  b.Alloc(300 * MiB);  // 424 MiB chunk < 600 MiB and 124 MiB < 128 MiB: no split
  EXPECT_EQ(b.Stats().splits, 1u);
  EXPECT_EQ(b.Stats().allocated_bytes, 1 * GiB);
}

TEST(BfcSplit, FragmentationFractionRaisesTheWasteCap) {
  Bench b(&rp_bfc_ops, "limit=1GiB,fragmentation_fraction=0.5", 2 * GiB);
  b.Alloc(600 * MiB);  // 424 MiB < 512 MiB cap and < 2x: no split
  EXPECT_EQ(b.Stats().splits, 0u);
  EXPECT_EQ(b.Stats().allocated_bytes, 1 * GiB);
}

TEST(BfcFree, CoalescesWithBothNeighbours) {
  Bench b(&rp_bfc_ops, "growth,limit=64MiB", 64 * MiB);
  uint64_t x = b.Alloc(256), y = b.Alloc(256), z = b.Alloc(256);
  EXPECT_EQ(b.Stats().splits, 3u);
  b.Free(x);  // neighbours: none before, y in use after
  EXPECT_EQ(b.Stats().merges, 0u);
  b.Free(z);  // merges with the free rest of the region
  EXPECT_EQ(b.Stats().merges, 1u);
  b.Free(y);  // merges with z+rest after and x before
  EXPECT_EQ(b.Stats().merges, 3u);
  uint64_t w = b.Alloc(2 * MiB);  // the region is one free chunk again
  EXPECT_EQ(w, x);
  EXPECT_EQ(b.f.calls.mem_alloc, 1u);
}

TEST(BfcFit, BestFitSmallestChunkThenLowestAddress) {
  Bench b(&rp_bfc_ops, "growth,limit=64MiB", 64 * MiB);
  uint64_t a = b.Alloc(1024), s1 = b.Alloc(256), c = b.Alloc(512), s2 = b.Alloc(256);
  uint64_t e = b.Alloc(512), s3 = b.Alloc(256);
  (void)s1, (void)s2, (void)s3;
  b.Free(a);  // holes: 1024 @a, 512 @c, 512 @e (each between live blocks)
  b.Free(c);
  b.Free(e);
  EXPECT_EQ(b.Alloc(300), c);   // 512: two equal holes, the lower address wins
  EXPECT_EQ(b.Alloc(512), e);   // the other 512
  EXPECT_EQ(b.Alloc(600), a);   // 768 fits only the 1024 hole: 1024 < 1536, no split
  EXPECT_EQ(b.Stats().allocated_bytes, 1024u + 512 + 512 + 256 * 3);
}

TEST(BfcGrowth, RegionsDoubleAsTensorFlowDoes) {
  Bench b(&rp_bfc_ops, "growth,limit=64MiB", 64 * MiB);
  b.Alloc(1 * MiB);   // region 2 MiB; next 4 MiB
  b.Alloc(2 * MiB);   // 1 MiB left: region 4 MiB; next 8 MiB
  b.Alloc(20 * MiB);  // 8 < 20: doubled to 32 MiB for this request; stays 32
  EXPECT_EQ(b.Segments(), "2048K 4096K 32768K ");
  // 30 MiB: the free 2 + 12 MiB are too small, 64 - 38 = 26 MiB left under the limit,
  // no region is wholly free: OOM without a driver call.
  EXPECT_EQ(b.TryAlloc(30 * MiB), GM_ERR_NOMEM);
  EXPECT_EQ(b.Stats().ooms, 1u);
  EXPECT_EQ(b.f.calls.mem_alloc, 3u);
  b.Alloc(26 * MiB);  // region min(32, 26) MiB: the rest of the limit
  EXPECT_EQ(b.Segments(), "2048K 4096K 32768K 26624K ");
  EXPECT_EQ(b.f.used, 64 * MiB);
}

TEST(BfcGrowth, BackpedalsByNinetyPercentInFloat) {
  // The limit (100 MiB) is more than the device holds (64 MiB): the first region is asked
  // at 100 MiB, then 90, 81, 72.9, 65.6 (each * 0.9f rounded up to 256 B), then 59.05 fits.
  Bench b(&rp_bfc_ops, "limit=100MiB", 64 * MiB);
  b.Alloc(1 * MiB);
  EXPECT_EQ(b.f.calls.mem_alloc, 6u);
  EXPECT_EQ(b.f.calls.nomem, 5u);
  EXPECT_EQ(b.Segments(), std::to_string(61917696 / KiB) + "K ");
  // 100 MiB - 61917696 B = 42939904 B under the limit: a 60 MiB request cannot extend.
  EXPECT_EQ(b.TryAlloc(60 * MiB), GM_ERR_NOMEM);
  EXPECT_EQ(b.f.calls.mem_alloc, 6u);
}

TEST(BfcGc, FreesEmptyRegionsAndRetries) {
  Bench b(&rp_bfc_ops, "growth,limit=8MiB", 8 * MiB);
  uint64_t one = b.Alloc(1 * MiB);  // region 2 MiB
  b.Alloc(2 * MiB);                 // region 4 MiB (next 8)
  b.Free(one);                      // region 1 is wholly free
  // 3 MiB: 2 MiB free in region 2, 8 - 6 = 2 MiB under the limit. GC gives region 1 back
  // (2 + 2 >= 3) and extends by min(8, 4) = 4 MiB.
  b.Alloc(3 * MiB);
  EXPECT_EQ(b.Stats().alloc_retries, 1u);
  EXPECT_EQ(b.f.calls.mem_free, 1u);
  EXPECT_EQ(b.Segments(), "4096K 4096K ");
}

TEST(BfcGc, OffMeansOom) {
  Bench b(&rp_bfc_ops, "growth,limit=8MiB,garbage_collection=false", 8 * MiB);
  uint64_t one = b.Alloc(1 * MiB);
  b.Alloc(2 * MiB);
  b.Free(one);
  EXPECT_EQ(b.TryAlloc(3 * MiB), GM_ERR_NOMEM);
  EXPECT_EQ(b.Stats().alloc_retries, 0u);
  EXPECT_EQ(b.f.calls.mem_free, 0u);
}

TEST(BfcDefault, PreallocatesTheLimitAtFirstRequest) {
  Bench b(&rp_bfc_ops, "", 16 * GiB);
  EXPECT_EQ(b.f.calls.mem_alloc, 0u);  // lazily, as TF's Extend
  b.Alloc(1);
  EXPECT_EQ(b.f.used, 16 * GiB - 1800 * MiB);
  Bench c(&rp_bfc_ops, "prealloc=0.5", 16 * GiB);
  c.Alloc(1);
  EXPECT_EQ(c.f.used, 8 * GiB);
  EXPECT_EQ(rp_bfc_tf_default_limit(1 * GiB), 1 * GiB - 225 * MiB);
}

TEST(Prealloc, ArenaServesUntilFullThenOoms) {
  Bench b(&rp_prealloc_ops, "16MiB", 64 * MiB);
  b.Alloc(1 * MiB);
  EXPECT_EQ(b.Segments(), "16384K ");
  b.Alloc(15 * MiB);  // exactly the rest: no split
  EXPECT_EQ(b.Stats().cached_bytes, 0u);
  EXPECT_EQ(b.TryAlloc(1), GM_ERR_NOMEM);
  EXPECT_EQ(b.Stats().ooms, 1u);
  EXPECT_EQ(b.f.calls.mem_alloc, 1u);
  EXPECT_NE(std::string(b.err.msg).find("out of memory"), std::string::npos) << b.err.msg;
}

TEST(Prealloc, DefaultsToThreeQuartersOfTotal) {
  Bench b(&rp_prealloc_ops, "", 64 * MiB);
  b.Alloc(1);
  EXPECT_EQ(b.f.used, 48 * MiB);
  Bench c(&rp_prealloc_ops, "0.5", 64 * MiB);
  c.Alloc(1);
  EXPECT_EQ(c.f.used, 32 * MiB);
  EXPECT_STREQ(c.ops->spec(c.p), "prealloc:0.5");
}

TEST(Prealloc, FreeOfUnknownAddressIsAnErrorNotACrash) {
  Bench b(&rp_prealloc_ops, "1MiB", 64 * MiB);
  uint64_t a = b.Alloc(256);
  EXPECT_EQ(b.ops->free(b.p, a + 256, &b.err), GM_ERR_INVAL);
  b.Free(a);
  EXPECT_EQ(b.ops->free(b.p, a, &b.err), GM_ERR_INVAL);  // double free
  b.Check();
}

// The handle API (what the engine uses) serves exactly as the address API, for bfc, prealloc
// and through the jax and tf wrappers (whose inner policy may have no handle API: direct):
// the same random program of allocs and frees through each, and through both mixed, gives the
// same addresses, stats and driver calls at every step; check() walks every structure after
// each op. A chunk taken by handle is not found by address.
TEST(BfcHandles, HandleApiServesAsTheAddressApi) {
  const char *const kSpecs[][2] = {{"bfc", "growth"},
                                   {"bfc", "limit=1GiB"},
                                   {"prealloc", "0.5"},
                                   {"jax", "XLA_PYTHON_CLIENT_PREALLOCATE=false"},
                                   {"tf", "TF_FORCE_GPU_ALLOW_GROWTH=true"},
                                   {"tf", "TF_GPU_ALLOCATOR=cuda_malloc"}};
  for (const auto &spec : kSpecs) {
    const rp_policy_ops_t *ops = rp_policy_find(spec[0]);
    ASSERT_NE(ops, nullptr) << spec[0];
    ASSERT_NE(ops->alloc_h, nullptr) << spec[0];
    for (unsigned seed = 1; seed <= 3; seed++) {
      Bench byaddr(ops, spec[1], 4 * GiB), byhandle(ops, spec[1], 4 * GiB);
      struct Live {
        uint64_t addr, handle;
        bool handled;
      };
      std::vector<Live> live;
      uint64_t x = seed * 0x9E3779B97F4A7C15ull;
      auto rnd = [&x]() {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        return x;
      };
      for (int op = 0; op < 2000; op++) {
        gm_err_t e{};
        uint64_t r = rnd();
        if (live.empty() || r % 5 < 3) {
          uint64_t size = (r >> 8) % 4 == 0 ? 1 + (r >> 16) % (120 * MiB) : 1 + (r >> 16) % (900 * KiB);
          uint64_t a1 = 0, a2 = 0, h = 0;
          gm_status_t s1 = ops->alloc(byaddr.p, size, 0, &a1, &e);
          bool handled = (r >> 44) % 4 != 0; /* mostly by handle, some by address */
          gm_status_t s2 = handled ? ops->alloc_h(byhandle.p, size, 0, &a2, &h, &e)
                                   : ops->alloc(byhandle.p, size, 0, &a2, &e);
          ASSERT_EQ(s1, s2) << spec[0] << ":" << spec[1] << " seed " << seed << " op " << op;
          if (s1 == GM_OK) {
            ASSERT_EQ(a1, a2) << spec[0] << ":" << spec[1] << " seed " << seed << " op " << op;
            if (handled) {
              ASSERT_EQ(ops->handle_addr(byhandle.p, h), a2);
            }
            live.push_back({a1, h, handled});
          }
        } else {
          size_t i = (r >> 8) % live.size();
          Live l = live[i];
          live[i] = live.back();
          live.pop_back();
          ASSERT_EQ(ops->free(byaddr.p, l.addr, &e), GM_OK) << e.msg;
          if (l.handled) {
            if (ops->free_h(byhandle.p, l.handle, &e) != GM_OK) FAIL() << e.msg;
          } else {
            ASSERT_EQ(ops->free(byhandle.p, l.addr, &e), GM_OK) << e.msg;
          }
        }
        byaddr.Check();
        byhandle.Check();
        rp_policy_stats_t a = byaddr.Stats(), b = byhandle.Stats();
        ASSERT_EQ(a.allocated_bytes, b.allocated_bytes) << op;
        ASSERT_EQ(a.cached_bytes, b.cached_bytes) << op;
        ASSERT_EQ(a.splits, b.splits) << op;
        ASSERT_EQ(a.merges, b.merges) << op;
        ASSERT_EQ(a.ooms, b.ooms) << op;
      }
      EXPECT_EQ(byaddr.f.calls.mem_alloc, byhandle.f.calls.mem_alloc);
      EXPECT_EQ(byaddr.f.calls.mem_free, byhandle.f.calls.mem_free);
      EXPECT_EQ(byaddr.f.peak_used, byhandle.f.peak_used);
    }
  }
}

// A chunk taken by handle is not freed by its address, nor twice by its handle.
TEST(BfcHandles, HandleChunkIsNotFoundByAddress) {
  Bench b(&rp_bfc_ops, "growth", 1 * GiB);
  uint64_t a = 0, h = 0;
  gm_err_t e{};
  ASSERT_EQ(b.ops->alloc_h(b.p, 4096, 0, &a, &h, &e), GM_OK) << e.msg;
  b.Check();
  EXPECT_EQ(b.ops->free(b.p, a, &e), GM_ERR_INVAL);
  ASSERT_EQ(b.ops->free_h(b.p, h, &e), GM_OK) << e.msg;
  b.Check();
  EXPECT_EQ(b.ops->free_h(b.p, h, &e), GM_ERR_INVAL);
  EXPECT_EQ(b.Stats().allocated_bytes, 0u);
}

}  // namespace
