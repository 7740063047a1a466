// bfc and prealloc against a naive reference model on randomized op programs.
//
// The reference is written from TF's rules again, independently of rp_bfc_core.c: plain
// vectors, O(n) scans, no bins, no trees, no hash. Best fit = the free chunk with the
// smallest (size, address) that fits, which is what TF's bins-of-sorted-sets search yields.
// Both run on their own fake driver with identical parameters (and identical injected
// driver failures), and are compared after every op: status, address, stats, driver calls
// and driver memory. The real one's invariant walker runs after every op as well.
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
};

class RefBfc {
 public:
  RefBfc(const rp_driver_t *drv, RefParams p) : d_(*drv), p_(p) {
    uint64_t first = p.growth ? std::min<uint64_t>(p.limit, 2 * MiB) : p.limit;
    curr_ = Round(first);
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
    for (const Region &r : regions_) d_.mem_free(d_.ctx, r.addr, r.size);
    regions_.clear();
    chunks_.clear();
  }

  uint64_t Pool() const {
    uint64_t s = 0;
    for (const Region &r : regions_) s += r.size;
    return s;
  }

  rp_policy_stats_t st{};

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

  int Extend(uint64_t r) {
    uint64_t pool = Pool();
    uint64_t avail = p_.limit > pool ? (p_.limit - pool) / 256 * 256 : 0;
    if (r > avail) return 0;
    bool doubled = false;
    while (curr_ < r) {
      curr_ *= 2;
      doubled = true;
    }
    uint64_t bytes = std::min(curr_, avail), addr = 0;
    gm_status_t s;
    while ((s = d_.mem_alloc(d_.ctx, bytes, &addr)) == GM_ERR_NOMEM) {
      uint64_t next = Round((uint64_t)((float)bytes * 0.9f));
      bytes = next >= bytes ? bytes - 256 : next;
      if (bytes < r) return 0;
    }
    if (s != GM_OK) return -1;
    if (!doubled) curr_ *= 2;
    regions_.push_back(Region{addr, bytes, next_id_});
    chunks_.push_back(Chunk{addr, bytes, false, next_id_});
    next_id_++;
    return 1;
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
    std::vector<Region> keep;
    for (const Region &g : regions_) {
      if (!RegionEmpty(g.id)) {
        keep.push_back(g);
        continue;
      }
      d_.mem_free(d_.ctx, g.addr, g.size);
      chunks_.erase(std::remove_if(chunks_.begin(), chunks_.end(), [&](const Chunk &c) { return c.region == g.id; }),
                    chunks_.end());
    }
    regions_ = keep;
    return true;
  }

  rp_driver_t d_;
  RefParams p_;
  uint64_t curr_;
  uint64_t next_id_ = 0;
  std::vector<Region> regions_;
  std::vector<Chunk> chunks_;
};

struct Case {
  const rp_policy_ops_t *ops;
  const char *conf;
  RefParams ref;
  uint64_t capacity, granularity;
  uint64_t max_size;  // request sizes up to this (log-uniform)
};

uint64_t RandSize(std::mt19937_64 &rng, uint64_t max) {
  if (rng() % 50 == 0) return 0;
  double lo = 0, hi = std::log2((double)max);
  double e = std::uniform_real_distribution<double>(lo, hi)(rng);
  uint64_t s = (uint64_t)std::exp2(e);
  if (rng() % 4 == 0) s = s / 256 * 256;  // exact multiples hit the boundaries
  return s ? s : 1;
}

void RunProgram(const Case &k, uint64_t seed, int nops) {
  SCOPED_TRACE("policy " + std::string(k.ops->name) + ":" + k.conf + " seed " + std::to_string(seed));
  rp_fake_driver_t fr, ff;  // real policy, reference model
  rp_fake_driver_init(&fr, k.capacity, k.granularity, 0);
  rp_fake_driver_init(&ff, k.capacity, k.granularity, 0);
  rp_policy_t *p = nullptr;
  gm_err_t err{};
  ASSERT_EQ(k.ops->create(k.conf, &fr.drv, &p, &err), GM_OK) << err.msg;
  RefBfc ref(&ff.drv, k.ref);
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> live;
  for (int op = 0; op < nops && !testing::Test::HasFailure(); op++) {
    SCOPED_TRACE("op " + std::to_string(op));
    bool do_free = !live.empty() && (rng() % 100 < 45);
    if (do_free) {
      size_t i = rng() % live.size();
      uint64_t a = live[i];
      live[i] = live.back();
      live.pop_back();
      ASSERT_EQ(k.ops->free(p, a, &err), GM_OK) << err.msg;
      ASSERT_EQ(ref.Free(a), GM_OK);
    } else {
      uint64_t size = RandSize(rng, k.max_size);
      if (rng() % 40 == 0) fr.fail_next = ff.fail_next = 1 + rng() % 3;  // driver hiccups
      uint64_t ar = 0, af = 0;
      gm_status_t sr = k.ops->alloc(p, size, rng() % 3, &ar, &err);
      gm_status_t sf = ref.Alloc(size, &af);
      fr.fail_next = ff.fail_next = 0;
      ASSERT_EQ(sr, sf) << "alloc " << size << ": " << err.msg;
      if (sr == GM_OK) {
        ASSERT_EQ(ar, af) << "alloc " << size;
        live.push_back(ar);
      }
    }
    gm_err_t ce{};
    ASSERT_EQ(k.ops->check(p, &ce), GM_OK) << ce.msg;
    rp_policy_stats_t s{};
    k.ops->stats(p, &s);
    ASSERT_EQ(s.allocated_bytes, ref.st.allocated_bytes);
    ASSERT_EQ(s.cached_bytes, ref.Pool() - ref.st.allocated_bytes);
    ASSERT_EQ(s.splits, ref.st.splits);
    ASSERT_EQ(s.merges, ref.st.merges);
    ASSERT_EQ(s.ooms, ref.st.ooms);
    ASSERT_EQ(s.alloc_retries, ref.st.alloc_retries);
    ASSERT_EQ(fr.calls.mem_alloc, ff.calls.mem_alloc);
    ASSERT_EQ(fr.calls.mem_free, ff.calls.mem_free);
    ASSERT_EQ(fr.used, ff.used);
  }
  ASSERT_EQ(k.ops->release_all(p, &err), GM_OK) << err.msg;
  ref.ReleaseAll();
  EXPECT_EQ(fr.used, 0u);
  EXPECT_EQ(fr.errors, 0u);
  EXPECT_EQ(ff.errors, 0u);
  k.ops->destroy(p);
  rp_fake_driver_fini(&fr);
  rp_fake_driver_fini(&ff);
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
};

TEST(BfcModel, MatchesReferenceOnRandomPrograms) {
  for (const Case &k : kCases)
    for (uint64_t seed = 1; seed <= 12 && !HasFailure(); seed++) RunProgram(k, seed, 2500);
}

}  // namespace
