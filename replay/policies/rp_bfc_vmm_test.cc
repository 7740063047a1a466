// TF's GpuVirtualMemAllocator (rp_bfc_vmm.c) alone, then under the BFC core with coalescing
// regions. Every expected figure is worked out by hand from the source's rules, quoted in
// rp_bfc_vmm.h and rp_bfc_core.c; the backpedal sizes are TF's float arithmetic
// (RoundedBytes(bytes * 0.9f)), written out step by step where a test needs them.
#include <gtest/gtest.h>

#include <cstdint>

#include "replay/policies/rp_bfc_vmm.h"
#include "replay/policies/rp_bfc_core.h"
#include "replay/policies/testing/fake_driver.h"

namespace {

constexpr uint64_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;

// ---- the sub-allocator on its own --------------------------------------------------------

struct Vmm {
  rp_fake_driver_t f;
  rp_bfc_vmm_t v{};
  gm_err_t err{};
  Vmm(uint64_t capacity, uint64_t gran, uint64_t va_bytes) {
    rp_fake_driver_init(&f, capacity, gran, 0);
    EXPECT_EQ(rp_bfc_vmm_init(&v, &f.drv, va_bytes, &err), GM_OK) << err.msg;
  }
  ~Vmm() {
    EXPECT_EQ(rp_bfc_vmm_release(&v, &f.drv, &err), GM_OK) << err.msg;
    EXPECT_EQ(f.used, 0u);
    EXPECT_EQ(f.errors, 0u) << "the sub-allocator misused the driver";
    rp_bfc_vmm_fini(&v);
    rp_fake_driver_fini(&f);
  }
  gm_status_t Alloc(uint64_t n, uint64_t *addr, uint64_t *got) {
    gm_status_t st = rp_bfc_vmm_alloc(&v, &f.drv, n, addr, got, &err);
    gm_err_t e{};
    EXPECT_EQ(rp_bfc_vmm_check(&v, &e), GM_OK) << e.msg;
    return st;
  }
  void Free(uint64_t addr, uint64_t n) {
    EXPECT_EQ(rp_bfc_vmm_free(&v, &f.drv, addr, n, &err), GM_OK) << err.msg;
    gm_err_t e{};
    EXPECT_EQ(rp_bfc_vmm_check(&v, &e), GM_OK) << e.msg;
  }
};

TEST(BfcVmm, ReservesAlignedUpAndPadsEachAllocToTheGranularity) {
  Vmm m(64 * MiB, 2 * MiB, 5 * MiB + 1);  // AlignUp(5 MiB + 1, 2 MiB) = 6 MiB
  EXPECT_EQ(m.v.va_size, 6 * MiB);
  EXPECT_EQ(m.f.calls.va_reserve, 1u);
  uint64_t a = 0, b = 0, c = 0, got = 0;
  ASSERT_EQ(m.Alloc(1, &a, &got), GM_OK);
  EXPECT_EQ(got, 2 * MiB);  // bytes_received = padded
  ASSERT_EQ(m.Alloc(2 * MiB + 1, &b, &got), GM_OK);
  EXPECT_EQ(got, 4 * MiB);
  EXPECT_EQ(b, a + 2 * MiB);  // back to back at next_alloc_offset_
  EXPECT_EQ(m.v.next_off, 6 * MiB);
  // next_va + padded > base + size: the reservation is full
  EXPECT_EQ(m.Alloc(1, &c, &got), GM_ERR_NOMEM);
  EXPECT_EQ(m.v.va_ooms, 1u);
  EXPECT_EQ(m.f.calls.map, 2u);  // refused before any driver call
  EXPECT_EQ(m.f.used, 6 * MiB);
}

TEST(BfcVmm, DriverRefusalIsANullptr) {
  Vmm m(4 * MiB, 2 * MiB, 16 * MiB);
  uint64_t a = 0, got = 0;
  EXPECT_EQ(m.Alloc(6 * MiB, &a, &got), GM_ERR_NOMEM);  // 6 MiB of pages on a 4 MiB device
  EXPECT_EQ(m.v.next_off, 0u);                           // nothing moved
  EXPECT_EQ(m.v.va_ooms, 0u);
  ASSERT_EQ(m.Alloc(4 * MiB, &a, &got), GM_OK);
  EXPECT_EQ(a, m.v.base);
}

TEST(BfcVmm, FreeAtTheEndMovesTheOffsetBackAHoleInTheMiddleStays) {
  Vmm m(64 * MiB, 2 * MiB, 16 * MiB);
  uint64_t a = 0, b = 0, c = 0, got = 0;
  ASSERT_EQ(m.Alloc(2 * MiB, &a, &got), GM_OK);
  ASSERT_EQ(m.Alloc(4 * MiB, &b, &got), GM_OK);
  m.Free(a, 2 * MiB);  // not the last mapping: a hole, never reused
  EXPECT_EQ(m.v.next_off, 6 * MiB);
  EXPECT_EQ(m.f.used, 4 * MiB);
  m.Free(b, 4 * MiB);  // the last one: next_alloc_offset_ = b - base, not 0
  EXPECT_EQ(m.v.next_off, 2 * MiB);
  ASSERT_EQ(m.Alloc(2 * MiB, &c, &got), GM_OK);
  EXPECT_EQ(c, b);
  EXPECT_EQ(m.f.calls.unmap, 2u);
}

TEST(BfcVmm, FreeTakesConsecutiveMappingsAndChecksTheSum) {
  Vmm m(64 * MiB, 2 * MiB, 32 * MiB);
  uint64_t a = 0, b = 0, c = 0, got = 0;
  ASSERT_EQ(m.Alloc(2 * MiB, &a, &got), GM_OK);
  ASSERT_EQ(m.Alloc(4 * MiB, &b, &got), GM_OK);
  ASSERT_EQ(m.Alloc(2 * MiB, &c, &got), GM_OK);
  // From b: 4 MiB >= 2 MiB stops the walk; 4 MiB != 2 MiB: "Invalid size", nothing freed
  m.Free(b, 2 * MiB);
  EXPECT_EQ(m.v.refused_frees, 1u);
  EXPECT_EQ(m.f.used, 8 * MiB);
  // An address that starts no mapping: "Could not find GPU vmem mapping"
  m.Free(b + 2 * MiB, 2 * MiB);
  EXPECT_EQ(m.v.refused_frees, 2u);
  // a and b together (a coalesced BFC region): two unmaps, the offset stays (c is after)
  m.Free(a, 6 * MiB);
  EXPECT_EQ(m.v.refused_frees, 2u);
  EXPECT_EQ(m.f.calls.unmap, 2u);
  EXPECT_EQ(m.f.used, 2 * MiB);
  EXPECT_EQ(m.v.next_off, 8 * MiB);
}

TEST(BfcVmm, TheIntSumRefusesEveryFreeOfTwoGiBOrMore) {
  Vmm m(16 * GiB, 2 * MiB, 12 * GiB);
  uint64_t a = 0, b = 0, c = 0, got = 0;
  ASSERT_EQ(m.Alloc(1 * GiB, &a, &got), GM_OK);
  ASSERT_EQ(m.Alloc(1 * GiB, &b, &got), GM_OK);
  // int total: 1 GiB, then 1 GiB + 1 GiB = 2^31 -> INT_MIN, read as size_t 2^64 - 2^31:
  // the walk stops and the sum is not 2 GiB. Refused; both stay mapped.
  m.Free(a, 2 * GiB);
  EXPECT_EQ(m.v.refused_frees, 1u);
  EXPECT_EQ(m.f.used, 2 * GiB);
  m.Free(a, 1 * GiB);  // below 2^31 the int holds the sum: freed
  EXPECT_EQ(m.v.refused_frees, 1u);
  EXPECT_EQ(m.f.used, 1 * GiB);
  // One 4 GiB mapping: the int wraps to 0 (< n), the walk runs off the end, 0 != 4 GiB.
  ASSERT_EQ(m.Alloc(4 * GiB, &c, &got), GM_OK);
  m.Free(c, 4 * GiB);
  EXPECT_EQ(m.v.refused_frees, 2u);
  EXPECT_EQ(m.f.used, 5 * GiB);
  EXPECT_EQ(m.f.calls.unmap, 1u);
}

TEST(BfcVmm, RejectsDriversWithoutVmmOrOddGranularity) {
  rp_fake_driver_t f;
  rp_fake_driver_init(&f, 64 * MiB, 3 * MiB, 0);
  rp_bfc_vmm_t v{};
  gm_err_t err{};
  EXPECT_EQ(rp_bfc_vmm_init(&v, &f.drv, 8 * MiB, &err), GM_ERR_INVAL);
  EXPECT_STREQ(err.msg, "VMM granularity 3145728 is not a power of two");
  f.drv.granularity = 2 * MiB;
  f.drv.map = nullptr;
  EXPECT_EQ(rp_bfc_vmm_init(&v, &f.drv, 8 * MiB, &err), GM_ERR_INVAL);
  EXPECT_STREQ(err.msg, "the VMM sub-allocator needs a driver with VMM calls");
  EXPECT_EQ(f.calls.va_reserve, 0u);
  rp_fake_driver_fini(&f);
}

// ---- the BFC core on it --------------------------------------------------------------------

struct Core {
  rp_fake_driver_t f;
  rp_bfc_t *b = nullptr;
  gm_err_t err{};
  Core(uint64_t limit, bool growth, int sub, uint64_t capacity, uint64_t gran = 2 * MiB) {
    rp_fake_driver_init(&f, capacity, gran, 0);
    rp_bfc_opts_t o{};
    o.memory_limit = limit;
    o.allow_growth = growth;
    o.garbage_collection = 1;
    o.sub_allocator = sub;
    EXPECT_EQ(rp_bfc_new(&f.drv, &o, &b, &err), GM_OK) << err.msg;
  }
  ~Core() {
    EXPECT_EQ(rp_bfc_release_all(b, &err), GM_OK) << err.msg;
    EXPECT_EQ(f.used, 0u) << "release_all left driver memory behind";
    rp_bfc_delete(b);
    EXPECT_EQ(f.errors, 0u) << "the allocator misused the driver";
    rp_fake_driver_fini(&f);
  }
  void Check() {
    gm_err_t e{};
    ASSERT_EQ(rp_bfc_check(b, &e), GM_OK) << e.msg;
  }
  gm_status_t Try(uint64_t size, uint64_t *a) {
    gm_status_t st = rp_bfc_alloc(b, size, a, &err);
    Check();
    return st;
  }
  uint64_t Alloc(uint64_t size) {
    uint64_t a = 0;
    EXPECT_EQ(Try(size, &a), GM_OK) << "alloc " << size << ": " << err.msg;
    return a;
  }
  void Free(uint64_t a) {
    EXPECT_EQ(rp_bfc_free(b, a, &err), GM_OK) << err.msg;
    Check();
  }
  rp_policy_stats_t Stats() {
    rp_policy_stats_t s{};
    rp_bfc_stats(b, &s);
    return s;
  }
};

TEST(BfcCoreVmm, ReservesTwiceTheLimitAtCreation) {
  Core c(33 * MiB, true, RP_BFC_SUB_VMM, 64 * MiB);
  EXPECT_EQ(c.f.calls.va_reserve, 1u);              // TF creates the sub-allocator with the BFC
  EXPECT_EQ(rp_bfc_vmm_va_size(c.b), 66 * MiB);      // AlignUp(2 x 33 MiB, 2 MiB)
  EXPECT_EQ(c.f.calls.map, 0u);                      // no memory before the first request
}

// The second region is appended to the first and its chunk merges with the free tail, so an
// allocation straddles the two mappings. DeviceMemAllocator: two regions, no merge.
TEST(BfcCoreVmm, RegionsCoalesceAndChunksMergeAcrossTheSeam) {
  Core c(64 * MiB, true, RP_BFC_SUB_VMM, 64 * MiB);
  uint64_t a1 = c.Alloc(1 * MiB);  // region 2 MiB (growth), split: 1 MiB used + 1 MiB free
  EXPECT_EQ(rp_bfc_vmm_next_offset(c.b), 2 * MiB);
  // 3 MiB: the free 1 MiB is too small. Extend: curr 4 MiB >= 3 MiB, bytes 4 MiB, mapped at
  // base + 2 MiB = the end of the first region: the region grows to 6 MiB and the new 4 MiB
  // chunk merges with the free 1 MiB before it -> 5 MiB at a1 + 1 MiB. 5 < 2 x 3 and
  // 5 - 3 < 128 MiB: no split, the whole 5 MiB is handed out.
  uint64_t a2 = c.Alloc(3 * MiB);
  EXPECT_EQ(a2, a1 + 1 * MiB);
  EXPECT_EQ(rp_bfc_region_count(c.b), 1);
  EXPECT_EQ(rp_bfc_pool_bytes(c.b), 6 * MiB);
  EXPECT_EQ(c.Stats().allocated_bytes, 6 * MiB);
  EXPECT_EQ(c.Stats().merges, 1u);  // the seam
  EXPECT_EQ(c.f.calls.map, 2u);
  EXPECT_EQ(rp_bfc_next_region_bytes(c.b), 8 * MiB);
  c.Free(a1);
  c.Free(a2);
  EXPECT_EQ(c.Stats().merges, 2u);
}

TEST(BfcCoreVmm, DeviceSubAllocatorKeepsTheRegionsApart) {
  Core c(64 * MiB, true, RP_BFC_SUB_DEVICE, 64 * MiB);
  c.Alloc(1 * MiB);
  c.Alloc(3 * MiB);  // a region of its own: 4 MiB, no split (4 < 6, 1 MiB < 128 MiB)
  EXPECT_EQ(rp_bfc_region_count(c.b), 2);
  EXPECT_EQ(c.Stats().allocated_bytes, 5 * MiB);
  EXPECT_EQ(c.Stats().merges, 0u);
  EXPECT_EQ(c.f.calls.va_reserve, 0u);
}

// Padding takes the pool past the limit; then `memory_limit_ - pool_bytes` wraps and the
// limit stops binding: only the 2 x limit reservation stops the growth.
TEST(BfcCoreVmm, PaddingPassesTheLimitAndTheLimitStopsBinding) {
  const uint64_t limit = 5 * MiB + 100;  // not a granule multiple, as real limits are not
  Core c(limit, false, RP_BFC_SUB_VMM, 64 * MiB);
  EXPECT_EQ(rp_bfc_vmm_va_size(c.b), 12 * MiB);  // AlignUp(10 MiB + 200, 2 MiB)
  // No growth: curr = RoundedBytes(limit) = 5 MiB + 256; available = limit rounded down to
  // 256 = 5 MiB; bytes = 5 MiB, padded to 6 MiB: the pool is 6 MiB, over the limit.
  uint64_t a1 = c.Alloc(1 * MiB);
  EXPECT_EQ(rp_bfc_pool_bytes(c.b), 6 * MiB);
  EXPECT_EQ(rp_bfc_next_region_bytes(c.b), 10 * MiB + 512);  // doubled after the extension
  uint64_t a2 = c.Alloc(5 * MiB);                             // the free 5 MiB, exactly
  EXPECT_EQ(a2, a1 + 1 * MiB);
  // 2 MiB: nothing free. available = limit - 6 MiB wraps to ~2^64: no refusal. bytes =
  // curr = 10 MiB + 512 -> 10486272; the reservation has 6 MiB left, so the sub-allocator
  // refuses and BFC backpedals: 9437696, 8494080, 7644672, 6880256 (all refused), then
  // 6192384, padded to 6 MiB: mapped at base + 6 MiB, the region grows to 12 MiB.
  uint64_t a3 = c.Alloc(2 * MiB);
  EXPECT_EQ(a3, a1 + 6 * MiB);
  EXPECT_EQ(rp_bfc_vmm_va_ooms(c.b), 5u);
  EXPECT_EQ(rp_bfc_pool_bytes(c.b), 12 * MiB);  // 2.4 x the limit
  EXPECT_EQ(c.f.used, 12 * MiB);
  EXPECT_EQ(rp_bfc_region_count(c.b), 1);
  EXPECT_EQ(c.Stats().allocated_bytes, 8 * MiB);  // 1 + 5 + 2 (6 MiB chunk split: 6 >= 4)
  // 5 MiB: the 4 MiB free chunk is too small, the reservation is full. curr = 20 MiB + 1024
  // and every backpedal step (20972544 ... 5331712, 14 of them) is refused for address
  // space; 4798720 < 5 MiB ends it. No region is free: out of memory.
  uint64_t a4 = 0;
  EXPECT_EQ(c.Try(5 * MiB, &a4), GM_ERR_NOMEM);
  EXPECT_EQ(rp_bfc_vmm_va_ooms(c.b), 19u);
  EXPECT_EQ(c.Stats().ooms, 1u);
  EXPECT_EQ(c.f.calls.map, 2u);
}

TEST(BfcCoreVmm, WithoutPaddingTheLimitBinds) {
  Core c(5 * MiB + 100, false, RP_BFC_SUB_DEVICE, 64 * MiB);
  c.Alloc(1 * MiB);
  c.Alloc(4 * MiB);  // the whole 5 MiB region is handed out (4 MiB chunk, no split)
  uint64_t a = 0;
  EXPECT_EQ(c.Try(2 * MiB, &a), GM_ERR_NOMEM);  // available = 100 B -> 0 < 2 MiB
  EXPECT_EQ(rp_bfc_pool_bytes(c.b), 5 * MiB);
}

// Garbage collection of a small region: unmapped, the offset moves back, VA reused.
TEST(BfcCoreVmm, CollectedRegionGivesItsAddressesBack) {
  Core c(10 * MiB, true, RP_BFC_SUB_VMM, 64 * MiB);
  uint64_t a1 = c.Alloc(2 * MiB);  // region 2 MiB, one chunk
  c.Free(a1);
  // 9 MiB: the free 2 MiB is too small; available 8 MiB < 9 MiB: no extension. GC: the
  // free 2 MiB region goes (9 MiB <= 10 - 2 + 2), unmapped, offset back to 0. Extend: curr
  // 4 -> 16 MiB, bytes = min(16, 10) = 10 MiB at base: a2 == a1, 10 MiB chunk (no split).
  uint64_t a2 = c.Alloc(9 * MiB);
  EXPECT_EQ(a2, a1);
  EXPECT_EQ(c.Stats().alloc_retries, 1u);
  EXPECT_EQ(c.f.calls.unmap, 1u);
  EXPECT_EQ(rp_bfc_vmm_refused_frees(c.b), 0u);
  EXPECT_EQ(rp_bfc_vmm_next_offset(c.b), 10 * MiB);
  EXPECT_EQ(c.Stats().allocated_bytes, 10 * MiB);
}

// A free region of 2 GiB: TF's Free refuses it (int sum), BFC still drops it from the pool.
// The device keeps the 2 GiB, so the retry cannot get its 2.5 GiB: out of memory with a pool
// of 0 under a 3 GiB limit. The same program on DeviceMemAllocator succeeds.
TEST(BfcCoreVmm, CollectingTwoGiBLeavesItMappedAndTheRetryFails) {
  Core c(3 * GiB, true, RP_BFC_SUB_VMM, 4 * GiB);
  uint64_t a1 = c.Alloc(2 * GiB);  // curr 2 MiB -> 2 GiB, one 2 GiB mapping
  c.Free(a1);
  // 2.5 GiB: available 1 GiB: no. GC: the region (2 GiB) goes, 2.5 <= 3 - 2 + 2; Free is
  // refused. Extend: curr 2 -> 4 GiB, bytes = min(4, 3) = 3 GiB: the device has 2 GiB left
  // (4 - the 2 still mapped): refused; 2899102720 refused; 2609192448 < 2.5 GiB: stop.
  uint64_t a2 = 0;
  EXPECT_EQ(c.Try(2 * GiB + 512 * MiB, &a2), GM_ERR_NOMEM);
  EXPECT_EQ(rp_bfc_vmm_refused_frees(c.b), 1u);
  EXPECT_EQ(rp_bfc_pool_bytes(c.b), 0u);
  EXPECT_EQ(rp_bfc_vmm_mapped_bytes(c.b), 2 * GiB);
  EXPECT_EQ(c.f.used, 2 * GiB);
  EXPECT_EQ(c.f.calls.map, 3u);
  EXPECT_EQ(c.f.calls.nomem, 2u);
  EXPECT_EQ(c.Stats().alloc_retries, 1u);
  EXPECT_EQ(c.Stats().ooms, 1u);
  // 1 GiB: curr stayed 4 GiB, bytes = 3 GiB at base + 2 GiB (the offset never moved back):
  // refused by the device, then 2899102720, 2609192448, 2348273152 too; 2113445888, padded
  // to 2113929216 (2016 MiB), fits. A new region (nothing ends there any more); 2016 MiB
  // splits (992 MiB left >= 128 MiB).
  uint64_t a3 = c.Alloc(1 * GiB);
  EXPECT_EQ(a3, a1 + 2 * GiB);
  EXPECT_EQ(rp_bfc_pool_bytes(c.b), 2016 * MiB);
  EXPECT_EQ(c.f.used, 2 * GiB + 2016 * MiB);
  EXPECT_EQ(c.f.calls.map, 8u);
  EXPECT_EQ(rp_bfc_region_count(c.b), 1);
  EXPECT_EQ(rp_bfc_next_region_bytes(c.b), 8 * GiB);
}

TEST(BfcCoreVmm, DeviceSubAllocatorGetsTheSameRetry) {
  Core c(3 * GiB, true, RP_BFC_SUB_DEVICE, 4 * GiB);
  uint64_t a1 = c.Alloc(2 * GiB);
  c.Free(a1);
  c.Alloc(2 * GiB + 512 * MiB);  // GC frees the 2 GiB segment; 3 GiB fits the device
  EXPECT_EQ(rp_bfc_pool_bytes(c.b), 3 * GiB);
  EXPECT_EQ(c.f.calls.mem_free, 1u);
}

TEST(BfcCoreVmm, NeedsAVmmDriver) {
  rp_fake_driver_t f;
  rp_fake_driver_init(&f, 64 * MiB, 2 * MiB, 0);
  f.drv.va_reserve = nullptr;
  rp_bfc_opts_t o{};
  o.memory_limit = 32 * MiB;
  o.sub_allocator = RP_BFC_SUB_VMM;
  rp_bfc_t *b = nullptr;
  gm_err_t err{};
  EXPECT_EQ(rp_bfc_new(&f.drv, &o, &b, &err), GM_ERR_INVAL);
  EXPECT_STREQ(err.msg, "bfc: the VMM sub-allocator needs a driver with VMM calls");
  rp_fake_driver_fini(&f);
}

}  // namespace
