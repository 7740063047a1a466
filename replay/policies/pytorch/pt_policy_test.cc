// pt_policy_test.cc: the pytorch policy on hand-computed scenarios, with a fake driver of
// limited capacity; the invariant checker runs after every operation.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "replay/policies/pytorch/rp_pytorch.h"
#include "replay/policies/testing/fake_driver.h"

namespace {

constexpr uint64_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;

// The fake driver's log as text ("A2048K M!20480K ..."), and the sizes of its successful
// segment allocations and mappings in order (the segment_alloc sequence a fidelity harness sees).
std::string LogText(const rp_fake_driver_t &f) {
  std::string s(rp_fake_driver_log_text(&f, nullptr, 0) + 1, '\0');
  s.resize(rp_fake_driver_log_text(&f, &s[0], s.size()));
  return s;
}
// The segment the driver handed out last (its addresses only grow: the highest).
uint64_t LastSegment(const rp_fake_driver_t &f) {
  for (size_t i = f.nlog; i-- > 0;)
    if (f.log[i].op == 'A' && f.log[i].ok) return f.log[i].addr;
  return 0;
}
std::vector<uint64_t> SegmentAllocs(const rp_fake_driver_t &f) {
  std::vector<uint64_t> v;
  for (size_t i = 0; i < f.nlog; i++)
    if ((f.log[i].op == 'A' || f.log[i].op == 'M') && f.log[i].ok) v.push_back(f.log[i].size);
  return v;
}

struct Model {
  rp_fake_driver_t fd;
  rp_policy_t *p = nullptr;
  const rp_policy_ops_t *ops = &rp_pytorch_ops;

  Model(const char *conf, uint64_t capacity = 8 * GiB) {
    rp_fake_driver_init(&fd, capacity, 2 * MiB, 0);
    fd.keep_log = 1;
    gm_err_t e{};
    EXPECT_EQ(ops->create(conf, &fd.drv, &p, &e), GM_OK) << e.msg;
  }
  ~Model() {
    if (p) ops->destroy(p);
    rp_fake_driver_fini(&fd);
  }
  Model(const Model &) = delete;  // fd.drv.ctx points at fd
  Model &operator=(const Model &) = delete;
  const rp_fake_call_t &LastCall() const { return fd.log[fd.nlog - 1]; }
  void Check() {
    gm_err_t e{};
    ASSERT_EQ(ops->check(p, &e), GM_OK) << e.msg;
  }
  uint64_t Alloc(uint64_t size, uint64_t stream = 0) {
    uint64_t a = 0;
    gm_err_t e{};
    gm_status_t s = ops->alloc(p, size, stream, &a, &e);
    EXPECT_EQ(s, GM_OK) << e.msg;
    Check();
    return a;
  }
  gm_status_t TryAlloc(uint64_t size, uint64_t stream = 0) {
    uint64_t a = 0;
    gm_err_t e{};
    gm_status_t s = ops->alloc(p, size, stream, &a, &e);
    Check();
    return s;
  }
  void Free(uint64_t a) {
    gm_err_t e{};
    EXPECT_EQ(ops->free(p, a, &e), GM_OK) << e.msg;
    Check();
  }
  void EmptyCache() {
    gm_err_t e{};
    EXPECT_EQ(ops->empty_cache(p, &e), GM_OK) << e.msg;
    Check();
  }
  rp_policy_stats_t Stats() {
    rp_policy_stats_t s;
    ops->stats(p, &s);
    return s;
  }
  std::string Log() { return LogText(fd); }
};

TEST(PytorchPolicy, ThreeMiBGetsTwentyMiBSegmentWithSeventeenMiBRemainder) {
  Model m("");
  uint64_t a = m.Alloc(3 * MiB);
  EXPECT_EQ(SegmentAllocs(m.fd), std::vector<uint64_t>{20 * MiB});
  EXPECT_EQ(m.Stats().allocated_bytes, 3 * MiB);
  EXPECT_EQ(m.Stats().cached_bytes, 17 * MiB);
  EXPECT_EQ(m.Stats().splits, 1u);
  uint64_t b = m.Alloc(17 * MiB);  // the remainder, at the higher address
  EXPECT_EQ(b, a + 3 * MiB);
  EXPECT_EQ(m.fd.nlog, 1u);
  m.Free(a);
  m.Free(b);
  EXPECT_EQ(m.Stats().merges, 1u);
  EXPECT_EQ(m.Stats().cached_bytes, 20 * MiB);
}

TEST(PytorchPolicy, TenAndAHalfMiBSplitsTwelveMiBSegment) {
  Model m("");
  uint64_t a = m.Alloc(21 * MiB / 2);
  EXPECT_EQ(SegmentAllocs(m.fd), std::vector<uint64_t>{12 * MiB});
  EXPECT_EQ(m.Stats().cached_bytes, 3 * MiB / 2);  // 1.5 MiB > 1 MiB: split off
  EXPECT_EQ(m.Alloc(3 * MiB / 2), a + 21 * MiB / 2);
  // 11 MiB: the 1 MiB remainder is not > 1 MiB, so the block is not split
  uint64_t c = m.Alloc(11 * MiB);
  (void)c;
  EXPECT_EQ(m.Stats().splits, 1u);
  EXPECT_EQ(m.Stats().allocated_bytes, 12 * MiB + 12 * MiB);
}

TEST(PytorchPolicy, SmallRequestsShareTwoMiBSegments) {
  Model m("");
  uint64_t a = m.Alloc(1000);
  uint64_t b = m.Alloc(1000);
  EXPECT_EQ(b, a + 1024);
  EXPECT_EQ(SegmentAllocs(m.fd), std::vector<uint64_t>{2 * MiB});
  uint64_t c = m.Alloc(MiB);  // still small pool (<= 1 MiB)
  EXPECT_EQ(c, a + 2048);
  uint64_t d = m.Alloc(MiB);  // does not fit: a new 2 MiB segment
  EXPECT_EQ(d, LastSegment(m.fd));
  EXPECT_EQ(SegmentAllocs(m.fd), (std::vector<uint64_t>{2 * MiB, 2 * MiB}));
}

TEST(PytorchPolicy, OversizeBlocksAreNotSplitAndNotGivenToSmallRequests) {
  Model m("max_split_size_mb:40");
  uint64_t a = m.Alloc(50 * MiB);
  m.Free(a);
  uint64_t b = m.Alloc(45 * MiB);  // oversize request: takes the 50 MiB block whole (50 < 45 + 20)
  EXPECT_EQ(b, a);
  EXPECT_EQ(m.Stats().allocated_bytes, 50 * MiB);
  EXPECT_EQ(m.Stats().splits, 0u);
  m.Free(b);
  uint64_t c = m.Alloc(30 * MiB);  // below max_split: never served from an oversize block
  EXPECT_NE(c, a);
  EXPECT_EQ(SegmentAllocs(m.fd), (std::vector<uint64_t>{50 * MiB, 30 * MiB}));
  m.Free(c);
  // max_non_split_rounding: a 100 MiB cached block is too big for 70 MiB (100 >= 70 + 20)
  uint64_t d = m.Alloc(100 * MiB);
  m.Free(d);
  uint64_t e = m.Alloc(70 * MiB);
  EXPECT_NE(e, d);
  EXPECT_EQ(SegmentAllocs(m.fd), (std::vector<uint64_t>{50 * MiB, 30 * MiB, 100 * MiB, 70 * MiB}));
}

TEST(PytorchPolicy, StreamsNeverShareFreeBlocks) {
  Model m("");
  uint64_t a = m.Alloc(1000, 1);
  m.Free(a);
  uint64_t b = m.Alloc(1000, 2);
  EXPECT_NE(a, b);
  EXPECT_EQ(SegmentAllocs(m.fd), (std::vector<uint64_t>{2 * MiB, 2 * MiB}));
  EXPECT_EQ(m.Alloc(1000, 1), a);  // back on stream 1: the cached block
}

TEST(PytorchPolicy, OomPathFreesCacheRetriesThenFails) {
  Model m("", 72 * MiB);
  uint64_t a = m.Alloc(30 * MiB);
  m.Alloc(30 * MiB);
  m.Free(a);
  m.Alloc(40 * MiB);  // cudaMalloc fails, empty_cache frees the cached 30 MiB, retry succeeds
  EXPECT_EQ(m.Log(), "A30720K A30720K A!40960K F30720K A40960K ");
  EXPECT_EQ(m.Stats().alloc_retries, 1u);
  EXPECT_EQ(m.Stats().ooms, 0u);
  EXPECT_EQ(m.TryAlloc(40 * MiB), GM_ERR_NOMEM);
  EXPECT_EQ(m.Stats().alloc_retries, 2u);
  EXPECT_EQ(m.Stats().ooms, 1u);
  EXPECT_EQ(m.Log(), "A30720K A30720K A!40960K F30720K A40960K A!40960K A!40960K ");
}

TEST(PytorchPolicy, ReleaseAvailableFreesOversizeBlocksFirst) {
  Model m("max_split_size_mb:20", 100 * MiB);
  uint64_t a = m.Alloc(30 * MiB), b = m.Alloc(25 * MiB), c = m.Alloc(25 * MiB);
  m.Free(a);
  m.Free(b);
  (void)c;
  // 25 MiB requests get 26 MiB segments. 35 MiB: no cached block fits; cudaMalloc fails
  // (82 + 36 > 100); no single cached oversize block >= 35 MiB, so the largest ones of the
  // stream go until 35 MiB are freed: 30 then 26.
  EXPECT_EQ(m.TryAlloc(35 * MiB), GM_OK);
  EXPECT_EQ(m.Log(), "A30720K A26624K A26624K A!36864K F30720K F26624K A36864K ");
  EXPECT_EQ(m.Stats().alloc_retries, 0u);
}

TEST(PytorchPolicy, FreeOfUnknownAddressIsAnError) {
  Model m("");
  gm_err_t e{};
  EXPECT_EQ(m.ops->free(m.p, 12345, &e), GM_ERR_INVAL);
  EXPECT_NE(std::string(e.msg).find("unknown address"), std::string::npos);
}

TEST(PytorchPolicy, EmptyCacheFreesOnlyUnsplitSegmentsInPoolOrder) {
  Model m("");
  uint64_t a = m.Alloc(30 * MiB), b = m.Alloc(3 * MiB), c = m.Alloc(1000);
  (void)b;
  m.Free(a);
  m.Free(c);
  m.EmptyCache();  // the 20 MiB segment is split (3 MiB live): kept
  EXPECT_EQ(m.Log(), "A30720K A20480K A2048K F30720K F2048K ");
  EXPECT_EQ(m.Stats().cached_bytes, 17 * MiB);
}

TEST(PytorchPolicy, ExpandableSegmentsGrowByPagesAndUnmapOnEmptyCache) {
  Model m("expandable_segments:True", 1 * GiB);
  uint64_t a = m.Alloc(3 * MiB);
  ASSERT_EQ(m.fd.nlog, 2u);
  EXPECT_EQ(m.fd.log[0].op, 'R');  // VA for 9/8 of the device in 20 MiB pages
  EXPECT_EQ(m.fd.log[0].size, (GiB + GiB / 8 + 20 * MiB - 1) / (20 * MiB) * (20 * MiB));
  EXPECT_EQ(m.fd.log[1].op, 'M');
  EXPECT_EQ(m.fd.log[1].size, 20 * MiB);
  uint64_t b = m.Alloc(30 * MiB);  // grows the same segment by one page, right after a
  EXPECT_EQ(b, a + 3 * MiB);
  EXPECT_EQ(SegmentAllocs(m.fd), (std::vector<uint64_t>{20 * MiB, 20 * MiB}));
  EXPECT_EQ(m.Stats().cached_bytes, 7 * MiB);
  uint64_t c = m.Alloc(1000);  // small pool: its own segment with 2 MiB pages
  EXPECT_EQ(m.LastCall().size, 2 * MiB);
  m.Free(a);
  m.EmptyCache();  // a's 3 MiB hold no whole page: nothing to unmap there
  EXPECT_EQ(m.fd.used, 42 * MiB);
  m.Free(b);
  m.Free(c);
  m.EmptyCache();  // every page unmapped, both reservations released
  EXPECT_EQ(m.fd.used, 0u);
  EXPECT_TRUE(rp_fake_driver_count(&m.fd, RP_FAKE_VA, nullptr) == 0);
  EXPECT_EQ(m.Stats().cached_bytes, 0u);
  size_t n = m.fd.nlog;
  EXPECT_EQ(m.fd.log[n - 4].op, 'U');
  EXPECT_EQ(m.fd.log[n - 4].size, 40 * MiB);
  EXPECT_EQ(m.fd.log[n - 3].op, 'X');
  EXPECT_EQ(m.fd.log[n - 2].op, 'U');
  EXPECT_EQ(m.fd.log[n - 1].op, 'X');
}

TEST(PytorchPolicy, ExpandableUnmapsWholeFreePagesInsideTheSegment) {
  Model m("expandable_segments:True", 1 * GiB);
  uint64_t a = m.Alloc(30 * MiB), b = m.Alloc(50 * MiB), c = m.Alloc(5 * MiB);
  EXPECT_EQ(b, a + 30 * MiB);
  EXPECT_EQ(m.fd.used, 100 * MiB);
  m.Free(b);  // [30, 80) free: whole pages [40, 80) can go
  m.EmptyCache();
  EXPECT_EQ(m.LastCall().op, 'U');
  EXPECT_EQ(m.LastCall().addr, a + 40 * MiB);
  EXPECT_EQ(m.LastCall().size, 40 * MiB);
  EXPECT_EQ(m.fd.used, 60 * MiB);
  // the hole is the lowest unmapped range: the next growth fills it
  uint64_t d = m.Alloc(45 * MiB);
  EXPECT_EQ(d, a + 30 * MiB);
  EXPECT_EQ(m.LastCall().op, 'M');
  EXPECT_EQ(m.LastCall().addr, a + 40 * MiB);
  EXPECT_EQ(m.LastCall().size, 40 * MiB);
  (void)c;
}

TEST(PytorchPolicy, ExpandableBestFitCountsTheUnmappedTailAsSize) {
  Model m("expandable_segments:True", 1 * GiB);
  uint64_t a = m.Alloc(30 * MiB);  // maps 40 MiB: [a 30][free 10][unmapped]
  uint64_t b = m.Alloc(10 * MiB);  // exact fit: [a][b][unmapped]
  uint64_t c = m.Alloc(15 * MiB);  // grows by a page: [a][b][c 15][free 5][unmapped]
  EXPECT_EQ(b, a + 30 * MiB);
  EXPECT_EQ(c, a + 40 * MiB);
  m.Free(a);
  // 4 MiB: the 5 MiB block is the smallest fit but could grow into the unmapped tail, so it
  // counts as huge; the 30 MiB block is the best fit by that measure
  EXPECT_EQ(m.Alloc(4 * MiB), a);
}

TEST(PytorchPolicy, GarbageCollectionNeedsAMemoryFraction) {
  {
    Model m("per_process_memory_fraction:0.5,garbage_collection_threshold:0.5", 400 * MiB);
    uint64_t a = m.Alloc(60 * MiB), b = m.Alloc(60 * MiB);
    m.Free(a);
    m.Free(b);
    m.Alloc(70 * MiB);  // reserved 120 > 0.5 * 200: both aged blocks are freed first
    EXPECT_EQ(m.Log(), "A61440K A61440K F61440K F61440K A71680K ");
  }
  {
    Model m("garbage_collection_threshold:0.5", 400 * MiB);
    uint64_t a = m.Alloc(60 * MiB), b = m.Alloc(60 * MiB);
    m.Free(a);
    m.Free(b);
    m.Alloc(70 * MiB);
    EXPECT_EQ(m.Log(), "A61440K A61440K A71680K ");
  }
}

TEST(PytorchPolicy, MemoryFractionLimitsWithoutCallingTheDriver) {
  Model m("per_process_memory_fraction:0.5", 400 * MiB);
  m.Alloc(150 * MiB);
  EXPECT_EQ(m.TryAlloc(60 * MiB), GM_ERR_NOMEM);
  EXPECT_EQ(m.Log(), "A153600K ");
  EXPECT_EQ(m.Stats().ooms, 1u);
  EXPECT_EQ(m.Stats().alloc_retries, 1u);
}

TEST(PytorchPolicy, ReleaseAllReturnsEverything) {
  for (const char *conf : {"", "expandable_segments:True"}) {
    Model m(conf, 1 * GiB);
    uint64_t a = m.Alloc(3 * MiB);
    m.Alloc(100 * MiB);
    m.Alloc(1000, 7);
    m.Free(a);
    gm_err_t e{};
    EXPECT_EQ(m.ops->release_all(m.p, &e), GM_OK) << e.msg;
    m.Check();
    EXPECT_EQ(m.fd.used, 0u) << conf;
    EXPECT_TRUE(rp_fake_driver_segments(&m.fd, nullptr) == 0);
    EXPECT_TRUE(rp_fake_driver_count(&m.fd, RP_FAKE_VA, nullptr) == 0);
    EXPECT_EQ(m.Stats().allocated_bytes, 0u);
    m.Alloc(5 * MiB);  // usable again
  }
}

// release_all unmaps the expandable segments whose first block is live in the order torch's
// code here always used: the oldest such malloc first (the policy no longer keeps a list of its
// live blocks; it orders them by their malloc number). Streams 2, 1, 3 each get a segment of
// their own, in neither stream nor address order; a younger block of stream 2 is not a head.
TEST(PytorchPolicy, ReleaseAllUnmapsLiveSegmentsOldestMallocFirst) {
  Model m("expandable_segments:True");
  uint64_t a2 = m.Alloc(3 * MiB, 2);
  uint64_t a1 = m.Alloc(3 * MiB, 1);
  uint64_t a3 = m.Alloc(3 * MiB, 3);
  m.Alloc(3 * MiB, 2);
  uint64_t b1 = m.Alloc(5 * MiB, 1);
  m.Free(b1);  // a free block, not a head: the segment's order stays its head's
  size_t mark = m.fd.nlog;
  gm_err_t e{};
  ASSERT_EQ(m.ops->release_all(m.p, &e), GM_OK) << e.msg;
  std::vector<uint64_t> unmapped;
  for (size_t i = mark; i < m.fd.nlog; i++)
    if (m.fd.log[i].op == 'U') unmapped.push_back(m.fd.log[i].addr);
  EXPECT_EQ(unmapped, (std::vector<uint64_t>{a2, a1, a3}));
}

TEST(PytorchPolicy, BackendFailureStopsTheReplay) {
  Model m("");
  m.fd.cuda_error = 1;
  EXPECT_EQ(m.TryAlloc(1000), GM_ERR_CUDA);
  EXPECT_EQ(m.Stats().ooms, 0u);
}

TEST(PytorchPolicy, SpecIsCanonical) {
  Model m("max_split_size_mb: 128 ,expandable_segments:False");
  EXPECT_STREQ(m.ops->spec(m.p), "pytorch:max_split_size_mb:128,expandable_segments:False");
  Model d("");
  EXPECT_STREQ(d.ops->spec(d.p), "pytorch");
}

TEST(PytorchPolicy, CreateRejectsBadConfNamingTheKey) {
  rp_fake_driver_t fd;
  rp_fake_driver_init(&fd, GiB, 2 * MiB, 0);
  rp_policy_t *p = nullptr;
  gm_err_t e{};
  EXPECT_EQ(rp_pytorch_ops.create("max_split_size_mb:5", &fd.drv, &p, &e), GM_ERR_INVAL);
  rp_fake_driver_fini(&fd);
  EXPECT_EQ(p, nullptr);
  EXPECT_NE(std::string(e.msg).find("max_split_size_mb"), std::string::npos);
}

// The handle API (what the engine uses) serves exactly as the address API: the same random
// program of allocs and frees (two streams, splits, merges, oversize blocks, empty_cache) run
// through each, and through both mixed, gives the same addresses and stats at every step;
// check() walks every structure after each op. A block taken by handle is not found by address.
TEST(PytorchPolicy, HandleApiServesAsTheAddressApi) {
  for (const char *conf : {"", "max_split_size_mb:64", "expandable_segments:True",
                           "roundup_power2_divisions:4,garbage_collection_threshold:0.6,per_process_memory_fraction:0.5"}) {
    for (unsigned seed = 1; seed <= 3; seed++) {
      Model byaddr(conf, 4 * GiB), byhandle(conf, 4 * GiB);
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
      for (int op = 0; op < 3000; op++) {
        gm_err_t e{};
        uint64_t r = rnd();
        if (r % 97 == 0) {
          ASSERT_EQ(byaddr.ops->empty_cache(byaddr.p, &e), GM_OK) << e.msg;
          ASSERT_EQ(byhandle.ops->empty_cache(byhandle.p, &e), GM_OK) << e.msg;
        } else if (live.empty() || r % 5 < 3) {
          uint64_t size = (r >> 8) % 4 == 0 ? 1 + (r >> 16) % (120 * MiB) : 1 + (r >> 16) % (900 * KiB);
          uint64_t stream = (r >> 40) % 3 == 0 ? 7 : 0;
          uint64_t a1 = 0, a2 = 0, h = 0;
          gm_status_t s1 = byaddr.ops->alloc(byaddr.p, size, stream, &a1, &e);
          bool handled = (r >> 44) % 4 != 0; /* mostly by handle, some by address */
          gm_status_t s2 = handled ? byhandle.ops->alloc_h(byhandle.p, size, stream, &a2, &h, &e)
                                   : byhandle.ops->alloc(byhandle.p, size, stream, &a2, &e);
          ASSERT_EQ(s1, s2) << conf << " seed " << seed << " op " << op;
          if (s1 == GM_OK) {
            ASSERT_EQ(a1, a2) << conf << " seed " << seed << " op " << op;
            if (handled) {
              ASSERT_EQ(byhandle.ops->handle_addr(byhandle.p, h), a2);
            }
            live.push_back({a1, h, handled});
          }
        } else {
          size_t i = (r >> 8) % live.size();
          Live l = live[i];
          live[i] = live.back();
          live.pop_back();
          ASSERT_EQ(byaddr.ops->free(byaddr.p, l.addr, &e), GM_OK) << e.msg;
          if (l.handled) {
            EXPECT_EQ(byhandle.ops->free(byhandle.p, l.addr, &e), GM_ERR_INVAL); /* not by address */
            ASSERT_EQ(byhandle.ops->free_h(byhandle.p, l.handle, &e), GM_OK) << e.msg;
          } else {
            ASSERT_EQ(byhandle.ops->free(byhandle.p, l.addr, &e), GM_OK) << e.msg;
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
      EXPECT_EQ(LogText(byaddr.fd), LogText(byhandle.fd));
      EXPECT_EQ(byaddr.fd.peak_used, byhandle.fd.peak_used);
    }
  }
}

}  // namespace
