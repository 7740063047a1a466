// bfc, prealloc and tf against a naive reference model on randomized op programs.
//
// The reference is written from TF's rules again, independently of rp_bfc_core.c and
// rp_bfc_vmm.c: plain vectors, O(n) scans, no bins, no trees, no hash. Best fit = the free
// chunk with the smallest (size, address) that fits, which is what TF's bins-of-sorted-sets
// search yields. With the VMM sub-allocator (TF's GpuVirtualMemAllocator) it keeps its own
// mapping list and offset, pads to the granularity, lets regions that meet coalesce and
// frees with TF's `int total_bytes` loop written as TF wrote it. Both run on their own fake
// driver with identical parameters (and identical injected driver failures), and are
// compared after every op: status, address, stats, driver calls and driver memory. The
// real one's invariant walker runs after every op as well. A failure prints the case and
// the seed (SCOPED_TRACE); rerun one with --gtest_filter and the seed loop narrowed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "replay/policies/rp_policies.h"
#include "replay/policies/testing/fake_driver.h"

namespace {

constexpr uint64_t KiB = 1024, MiB = 1024 * KiB, GiB = 1024 * MiB;

struct RefParams {
  uint64_t limit;
  bool growth;
  bool gc;
  uint64_t max_frag;
  bool vmm = false;  // GpuVirtualMemAllocator underneath (coalescing regions)
};

class RefBfc {
 public:
  RefBfc(const rp_driver_t *drv, RefParams p) : d_(*drv), p_(p) {
    uint64_t first = p.growth ? std::min<uint64_t>(p.limit, 2 * MiB) : p.limit;
    curr_ = Round(first);
    if (p.vmm) {  // Create: AlignUp(total_bytes * 2, granularity)
      gran_ = d_.granularity;
      va_size_ = (2 * p.limit + gran_ - 1) / gran_ * gran_;
      d_.va_reserve(d_.ctx, va_size_, &va_base_);
    }
  }

  gm_status_t Alloc(uint64_t size, uint64_t *addr) {
    uint64_t r = Round(size == 0 ? 1 : size);
    if (Take(r, addr)) return GM_OK;
    int x = Extend(r);
    if (x < 0) return GM_ERR_CUDA;
    if (x > 0 && Take(r, addr)) return GM_OK;
    if (p_.gc && FreeEmptyRegions(r)) {
      st.alloc_retries++;
      x = Extend(r);
      if (x < 0) return GM_ERR_CUDA;
      if (x > 0 && Take(r, addr)) return GM_OK;
    }
    st.ooms++;
    return GM_ERR_NOMEM;
  }

  gm_status_t Free(uint64_t addr) {
    size_t i = 0;
    while (i < chunks_.size() && !(chunks_[i].used && chunks_[i].addr == addr)) i++;
    if (i == chunks_.size()) return GM_ERR_INVAL;
    chunks_[i].used = false;
    st.allocated_bytes -= chunks_[i].size;
    Chunk c = chunks_[i];
    chunks_.erase(chunks_.begin() + i);
    for (size_t j = 0; j < chunks_.size(); j++)  // the free chunk right after
      if (!chunks_[j].used && chunks_[j].region == c.region && chunks_[j].addr == c.addr + c.size) {
        c.size += chunks_[j].size;
        chunks_.erase(chunks_.begin() + j);
        st.merges++;
        break;
      }
    for (size_t j = 0; j < chunks_.size(); j++)  // the free chunk right before
      if (!chunks_[j].used && chunks_[j].region == c.region && chunks_[j].addr + chunks_[j].size == c.addr) {
        c.addr = chunks_[j].addr;
        c.size += chunks_[j].size;
        chunks_.erase(chunks_.begin() + j);
        st.merges++;
        break;
      }
    chunks_.push_back(c);
    return GM_OK;
  }

  void ReleaseAll() {
    if (p_.vmm) {  // ~GpuVirtualMemAllocator: every mapping, then the reservation
      for (const Mapping &m : maps_) d_.unmap(d_.ctx, m.va, m.size);
      maps_.clear();
      d_.va_release(d_.ctx, va_base_, va_size_);
    } else {
      for (const Region &r : regions_) d_.mem_free(d_.ctx, r.addr, r.size);
    }
    regions_.clear();
    chunks_.clear();
  }

  uint64_t Pool() const {
    uint64_t s = 0;
    for (const Region &r : regions_) s += r.size;
    return s;
  }

  rp_policy_stats_t st{};
  uint64_t refused_frees = 0;  // VMM frees TF's size check refused

 private:
  struct Chunk {
    uint64_t addr, size;
    bool used;
    uint64_t region;  // id
  };
  struct Region {
    uint64_t addr, size, id;
  };

  static uint64_t Round(uint64_t n) { return (n + 255) / 256 * 256; }

  bool Take(uint64_t r, uint64_t *addr) {
    int best = -1;
    for (size_t i = 0; i < chunks_.size(); i++) {
      const Chunk &c = chunks_[i];
      if (c.used || c.size < r) continue;
      if (best < 0 || c.size < chunks_[best].size || (c.size == chunks_[best].size && c.addr < chunks_[best].addr))
        best = (int)i;
    }
    if (best < 0) return false;
    Chunk &c = chunks_[best];
    if (c.size >= 2 * r || c.size - r >= p_.max_frag) {
      Chunk rest{c.addr + r, c.size - r, false, c.region};
      c.size = r;
      st.splits++;
      chunks_.push_back(rest);
    }
    Chunk &u = chunks_[best];
    u.used = true;
    st.allocated_bytes += u.size;
    *addr = u.addr;
    return true;
  }

  // GpuVirtualMemAllocator::Alloc: pad, check the reservation, map at the next offset.
  gm_status_t SubAlloc(uint64_t bytes, uint64_t *addr, uint64_t *got) {
    if (!p_.vmm) {
      *got = bytes;
      return d_.mem_alloc(d_.ctx, bytes, addr);
    }
    uint64_t padded = (bytes + gran_ - 1) / gran_ * gran_;
    if (next_off_ + padded > va_size_) return GM_ERR_NOMEM;
    gm_status_t s = d_.map(d_.ctx, va_base_ + next_off_, padded);
    if (s != GM_OK) return s;
    maps_.push_back(Mapping{va_base_ + next_off_, padded});
    *addr = va_base_ + next_off_;
    *got = padded;
    next_off_ += padded;
    return GM_OK;
  }

  int Extend(uint64_t r) {
    uint64_t pool = Pool();
    uint64_t avail = p_.limit > pool ? (p_.limit - pool) / 256 * 256 : 0;
    if (p_.vmm) avail = (p_.limit - pool) / 256 * 256;  // size_t: wraps past the limit
    if (r > avail) return 0;
    bool doubled = false;
    while (curr_ < r) {
      curr_ *= 2;
      doubled = true;
    }
    uint64_t bytes = std::min(curr_, avail), addr = 0, got = 0;
    gm_status_t s;
    while ((s = SubAlloc(bytes, &addr, &got)) == GM_ERR_NOMEM) {
      uint64_t next = Round((uint64_t)((float)bytes * 0.9f));
      bytes = next >= bytes ? bytes - 256 : next;
      if (bytes < r) return 0;
    }
    if (s != GM_OK) return -1;
    if (!doubled) curr_ *= 2;
    if (p_.vmm)  // AddOrExtendAllocationRegion + TryToCoalesce
      for (Region &g : regions_)
        if (g.addr + g.size == addr) {
          g.size += got;
          Chunk c{addr, got, false, g.id};
          for (size_t j = 0; j < chunks_.size(); j++)
            if (!chunks_[j].used && chunks_[j].region == g.id && chunks_[j].addr + chunks_[j].size == addr) {
              c.addr = chunks_[j].addr;
              c.size += chunks_[j].size;
              chunks_.erase(chunks_.begin() + j);
              st.merges++;
              break;
            }
          chunks_.push_back(c);
          return 1;
        }
    regions_.push_back(Region{addr, got, next_id_});
    chunks_.push_back(Chunk{addr, got, false, next_id_});
    next_id_++;
    return 1;
  }

  // GpuVirtualMemAllocator::Free, with TF's own types.
  void SubFree(uint64_t ptr, size_t num_bytes) {
    if (!p_.vmm) {
      d_.mem_free(d_.ctx, ptr, num_bytes);
      return;
    }
    size_t first = 0;
    while (first < maps_.size() && maps_[first].va < ptr) first++;
    if (first == maps_.size() || maps_[first].va != ptr) {
      refused_frees++;
      return;
    }
    int num_mappings_to_free = 0;
    int total_bytes = 0;
    for (size_t it = first; it != maps_.size() && (size_t)(long)total_bytes < num_bytes; ++it) {
      ++num_mappings_to_free;
      total_bytes = (int)(unsigned)((uint64_t)(long)total_bytes + maps_[it].size);
    }
    if ((size_t)(long)total_bytes != num_bytes) {
      refused_frees++;
      return;
    }
    for (int i = 0; i < num_mappings_to_free; i++) d_.unmap(d_.ctx, maps_[first + i].va, maps_[first + i].size);
    if (first + num_mappings_to_free == maps_.size()) next_off_ = ptr - va_base_;
    maps_.erase(maps_.begin() + first, maps_.begin() + first + num_mappings_to_free);
  }

  bool RegionEmpty(uint64_t id) const {
    for (const Chunk &c : chunks_)
      if (c.region == id && c.used) return false;
    return true;
  }

  bool FreeEmptyRegions(uint64_t r) {
    uint64_t empty = 0;
    for (const Region &g : regions_)
      if (RegionEmpty(g.id)) empty += g.size;
    if (empty == 0 || r > p_.limit - Pool() + empty) return false;
    if (p_.vmm)  // TF's region vector is sorted by address
      std::sort(regions_.begin(), regions_.end(), [](const Region &a, const Region &b) { return a.addr < b.addr; });
    std::vector<Region> keep;
    for (const Region &g : regions_) {
      if (!RegionEmpty(g.id)) {
        keep.push_back(g);
        continue;
      }
      SubFree(g.addr, g.size);
      chunks_.erase(std::remove_if(chunks_.begin(), chunks_.end(), [&](const Chunk &c) { return c.region == g.id; }),
                    chunks_.end());
    }
    regions_ = keep;
    return true;
  }

  struct Mapping {
    uint64_t va, size;
  };

  rp_driver_t d_;
  RefParams p_;
  uint64_t curr_;
  uint64_t next_id_ = 0;
  std::vector<Region> regions_;
  std::vector<Chunk> chunks_;
  uint64_t gran_ = 0, va_base_ = 0, va_size_ = 0, next_off_ = 0;
  std::vector<Mapping> maps_;
};

struct Case {
  const rp_policy_ops_t *ops;
  const char *conf;
  RefParams ref;
  uint64_t capacity, granularity;
  uint64_t max_size;  // request sizes up to this (log-uniform)
  unsigned drain = 0;  // > 0: about once in `drain` ops every live block is freed (the region
                       // empties, so garbage collection has whole regions to give back)
};

uint64_t RandSize(std::mt19937_64 &rng, uint64_t max) {
  if (rng() % 50 == 0) return 0;
  double lo = 0, hi = std::log2((double)max);
  double e = std::uniform_real_distribution<double>(lo, hi)(rng);
  uint64_t s = (uint64_t)std::exp2(e);
  if (rng() % 4 == 0) s = s / 256 * 256;  // exact multiples hit the boundaries
  return s ? s : 1;
}

uint64_t RunProgram(const Case &k, uint64_t seed, int nops) {
  SCOPED_TRACE("policy " + std::string(k.ops->name) + ":" + k.conf + " seed " + std::to_string(seed));
  rp_fake_driver_t fr, ff;  // real policy, reference model
  rp_fake_driver_init(&fr, k.capacity, k.granularity, 0);
  rp_fake_driver_init(&ff, k.capacity, k.granularity, 0);
  rp_policy_t *p = nullptr;
  gm_err_t err{};
  EXPECT_EQ(k.ops->create(k.conf, &fr.drv, &p, &err), GM_OK) << err.msg;
  if (!p) return 0;
  RefBfc ref(&ff.drv, k.ref);
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> live;
  for (int op = 0; op < nops && !testing::Test::HasFailure(); op++) {
    SCOPED_TRACE("op " + std::to_string(op));
    bool do_free = !live.empty() && (rng() % 100 < 45);
    if (k.drain && rng() % k.drain == 0) {
      for (uint64_t a : live) {
        EXPECT_EQ(k.ops->free(p, a, &err), GM_OK) << err.msg;
        EXPECT_EQ(ref.Free(a), GM_OK);
      }
      live.clear();
    } else if (do_free) {
      size_t i = rng() % live.size();
      uint64_t a = live[i];
      live[i] = live.back();
      live.pop_back();
      EXPECT_EQ(k.ops->free(p, a, &err), GM_OK) << err.msg;
      EXPECT_EQ(ref.Free(a), GM_OK);
    } else {
      uint64_t size = RandSize(rng, k.max_size);
      if (rng() % 40 == 0) fr.fail_next = ff.fail_next = 1 + rng() % 3;  // driver hiccups
      uint64_t ar = 0, af = 0;
      gm_status_t sr = k.ops->alloc(p, size, rng() % 3, &ar, &err);
      gm_status_t sf = ref.Alloc(size, &af);
      fr.fail_next = ff.fail_next = 0;
      EXPECT_EQ(sr, sf) << "alloc " << size << ": " << err.msg;
      if (sr != sf) break;
      if (sr == GM_OK) {
        EXPECT_EQ(ar, af) << "alloc " << size;
        live.push_back(ar);
      }
    }
    gm_err_t ce{};
    EXPECT_EQ(k.ops->check(p, &ce), GM_OK) << ce.msg;
    rp_policy_stats_t s{};
    k.ops->stats(p, &s);
    EXPECT_EQ(s.allocated_bytes, ref.st.allocated_bytes);
    EXPECT_EQ(s.cached_bytes, ref.Pool() - ref.st.allocated_bytes);
    EXPECT_EQ(s.splits, ref.st.splits);
    EXPECT_EQ(s.merges, ref.st.merges);
    EXPECT_EQ(s.ooms, ref.st.ooms);
    EXPECT_EQ(s.alloc_retries, ref.st.alloc_retries);
    EXPECT_EQ(fr.calls.mem_alloc, ff.calls.mem_alloc);
    EXPECT_EQ(fr.calls.mem_free, ff.calls.mem_free);
    EXPECT_EQ(fr.calls.va_reserve, ff.calls.va_reserve);
    EXPECT_EQ(fr.calls.map, ff.calls.map);
    EXPECT_EQ(fr.calls.unmap, ff.calls.unmap);
    EXPECT_EQ(fr.used, ff.used);
  }
  EXPECT_EQ(k.ops->release_all(p, &err), GM_OK) << err.msg;
  ref.ReleaseAll();
  EXPECT_EQ(fr.used, 0u);
  EXPECT_EQ(fr.errors, 0u);
  EXPECT_EQ(ff.errors, 0u);
  EXPECT_EQ(fr.calls.va_release, ff.calls.va_release);
  k.ops->destroy(p);
  rp_fake_driver_fini(&fr);
  rp_fake_driver_fini(&ff);
  return ref.refused_frees;
}

const uint64_t kFrag = 128 * MiB;

const Case kCases[] = {
    // growth: regions double; the limit binds, GC gives empty regions back
    {&rp_bfc_ops, "growth,limit=32MiB", {32 * MiB, true, true, kFrag}, 32 * MiB, 1, 4 * MiB},
    // the device is smaller than the limit and rounds to 2 MiB: backpedal
    {&rp_bfc_ops, "growth,limit=64MiB", {64 * MiB, true, true, kFrag}, 40 * MiB, 2 * MiB, 6 * MiB},
    {&rp_bfc_ops, "growth,limit=24MiB,garbage_collection=false", {24 * MiB, true, false, kFrag}, 64 * MiB, 1, 3 * MiB},
    // one region of the whole limit
    {&rp_bfc_ops, "limit=16MiB", {16 * MiB, false, true, kFrag}, 64 * MiB, 1, 2 * MiB},
    // a tiny waste cap: the 128 MiB rule's branch taken often
    {&rp_bfc_ops, "limit=64MiB,fragmentation_fraction=0.01", {64 * MiB, false, true, (uint64_t)(0.01 * 64 * MiB)},
     64 * MiB, 1, 4 * MiB},
    // large requests against the default 128 MiB cap
    {&rp_bfc_ops, "growth,limit=4GiB", {4 * GiB, true, true, kFrag}, 3 * GiB, 2 * MiB, 900 * MiB},
    {&rp_prealloc_ops, "8MiB", {8 * MiB, false, false, kFrag}, 64 * MiB, 1, 1 * MiB},
    {&rp_prealloc_ops, "0.5,growth", {32 * MiB, true, false, kFrag}, 64 * MiB, 2 * MiB, 4 * MiB},
    // tf = the bfc core with TF's words turned into options (limit from memory_limit in MiB)
    {&rp_tf_ops, "TF_FORCE_GPU_ALLOW_GROWTH=true,memory_limit=32", {32 * MiB, true, true, kFrag}, 32 * MiB, 1, 4 * MiB},
    {&rp_tf_ops, "memory_limit=16,TF_ENABLE_GPU_GARBAGE_COLLECTION=false", {16 * MiB, false, false, kFrag}, 64 * MiB,
     1, 2 * MiB},
    {&rp_tf_ops, "allow_growth=true,per_process_gpu_memory_fraction=0.5", {32 * MiB, true, true, kFrag}, 64 * MiB,
     2 * MiB, 3 * MiB},
};

// The VMM sub-allocator: padding past limits that are not granule multiples (the limit stops
// binding), a reservation that runs out, coalescing, GC with offsets moving back, regions of
// 2 GiB and more whose frees TF refuses.
const Case kVmmCases[] = {
    {&rp_bfc_ops, "growth,limit=33792.75KiB,sub_allocator=vmm", {33 * MiB + 768, true, true, kFrag, true}, 64 * MiB,
     2 * MiB, 6 * MiB},
    {&rp_bfc_ops, "growth,limit=24MiB,sub_allocator=vmm", {24 * MiB, true, true, kFrag, true}, 40 * MiB, 64 * KiB,
     3 * MiB},
    {&rp_bfc_ops, "limit=16640KiB,sub_allocator=vmm", {16 * MiB + 256 * KiB, false, true, kFrag, true}, 48 * MiB,
     2 * MiB, 3 * MiB},
    {&rp_bfc_ops, "growth,limit=20MiB,garbage_collection=false,sub_allocator=vmm", {20 * MiB, true, false, kFrag, true},
     64 * MiB, 2 * MiB, 4 * MiB},
    {&rp_bfc_ops, "growth,limit=3GiB,sub_allocator=vmm", {3 * GiB, true, true, kFrag, true}, 4 * GiB, 2 * MiB,
     2900 * MiB, 40},
};

TEST(BfcModel, MatchesReferenceOnRandomPrograms) {
  for (const Case &k : kCases)
    for (uint64_t seed = 1; seed <= 12 && !HasFailure(); seed++) RunProgram(k, seed, 2500);
}

TEST(BfcModel, VmmSubAllocatorMatchesReferenceOnRandomPrograms) {
  uint64_t refused = 0;
  for (const Case &k : kVmmCases)
    for (uint64_t seed = 1; seed <= 12 && !HasFailure(); seed++) refused += RunProgram(k, seed, 2500);
  // The 3 GiB case must have reached TF's refused frees, or the test did not cover them.
  EXPECT_GT(refused, 0u);
}

}  // namespace
