// pt_reference_test.cc: the pytorch policy against a naive reference model on randomized op
// programs. The reference is written separately from the C model, straight from torch 2.11's
// DeviceCachingAllocator: segments are plain vectors of blocks in address order, the pools are
// rebuilt and sorted on every lookup (O(n log n) per step), no trees, no hashes, no links.
// After every op both must agree on the status, the address, the driver call log (which IS the
// segment_alloc / segment_map sequence) and the statistics; the C model's invariant checker
// runs after every op too. A failure prints the seed and the op index.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "replay/policies/pytorch/rp_pytorch.h"
#include "replay/policies/testing/fake_driver.h"

namespace {

constexpr uint64_t MiB = 1024 * 1024, GiB = 1024 * MiB;

struct RBlock {
  uint64_t addr, size;
  bool allocated, mapped;
  int64_t gc_base;
};

struct RSeg {
  uint64_t base, size, stream, page, mapped;
  bool small, exp;
  std::vector<RBlock> b;  // tiles [base, base + size) in address order
};

struct Ref;
struct Pos {  // a block by segment and address
  RSeg *s;
  uint64_t addr;
};

// The fake driver (replay/policies/testing) as both sides use it: 2 MiB pages, every call logged.
struct Driver {
  rp_fake_driver_t f;
  explicit Driver(uint64_t cap) {
    rp_fake_driver_init(&f, cap, 2 * MiB, 0);
    f.keep_log = 1;
  }
  ~Driver() { rp_fake_driver_fini(&f); }
  Driver(const Driver &) = delete;
  Driver &operator=(const Driver &) = delete;
  bool SameLog(const Driver &o) const {
    if (f.nlog != o.f.nlog) return false;
    for (size_t i = 0; i < f.nlog; i++) {
      const rp_fake_call_t &a = f.log[i], &b = o.f.log[i];
      if (a.op != b.op || a.addr != b.addr || a.size != b.size || a.ok != b.ok) return false;
    }
    return true;
  }
  std::string Text() const {
    std::string s(rp_fake_driver_log_text(&f, nullptr, 0) + 1, '\0');
    s.resize(rp_fake_driver_log_text(&f, &s[0], s.size()));
    return s;
  }
};

struct Ref {
  rp_pytorch_conf_t c;
  Driver fd;
  std::vector<std::unique_ptr<RSeg>> segs;
  int64_t calls[2] = {0, 0};
  uint64_t total = 0, allocated = 0, allowed = 0;
  bool limit = false, gc = false;
  rp_policy_stats_t st{};

  Ref(const rp_pytorch_conf_t &conf, uint64_t cap) : c(conf), fd(cap) {
    limit = c.memory_fraction < 1.0;
    allowed = limit ? (uint64_t)(c.memory_fraction * (double)cap) : 0;
    gc = limit && c.gc_threshold > 0;
  }

  static size_t Idx(const RSeg *s, uint64_t addr) {
    for (size_t i = 0; i < s->b.size(); i++)
      if (s->b[i].addr == addr) return i;
    ADD_FAILURE() << "no block at " << addr;
    return 0;
  }
  static size_t Containing(const RSeg *s, uint64_t addr) {
    for (size_t i = 0; i < s->b.size(); i++)
      if (addr >= s->b[i].addr && addr < s->b[i].addr + s->b[i].size) return i;
    ADD_FAILURE() << "no block holds " << addr;
    return 0;
  }
  RBlock &B(Pos p) { return p.s->b[Idx(p.s, p.addr)]; }

  struct Entry {
    uint64_t stream, size, addr;
    RSeg *s;
  };
  // the pool's free mapped blocks sorted by (stream, size, addr)
  std::vector<Entry> Free(bool small) {
    std::vector<Entry> v;
    for (auto &s : segs)
      if (s->small == small)
        for (auto &b : s->b)
          if (!b.allocated && b.mapped) v.push_back({s->stream, b.size, b.addr, s.get()});
    std::sort(v.begin(), v.end(), [](const Entry &x, const Entry &y) {
      return std::tie(x.stream, x.size, x.addr) < std::tie(y.stream, y.size, y.addr);
    });
    return v;
  }
  uint64_t ExpSize(const Entry &e) {
    size_t i = Idx(e.s, e.addr);
    uint64_t n = e.s->b[i].size;
    if (i + 1 < e.s->b.size() && !e.s->b[i + 1].mapped) n += e.s->b[i + 1].size;
    return n;
  }
  bool Alone(const Entry &e) { return e.s->b.size() == 1; }

  bool GetFree(bool small, uint64_t stream, uint64_t size, Pos *out) {
    if (gc) calls[small ? 0 : 1]++;
    auto v = Free(small);
    size_t i = 0;
    while (i < v.size() && std::tie(v[i].stream, v[i].size) < std::tie(stream, size)) i++;
    if (i == v.size() || v[i].stream != stream) return false;
    if (v[i].s->exp)
      while (v[i].s->exp && i + 1 < v.size() && v[i + 1].stream == stream && ExpSize(v[i + 1]) < ExpSize(v[i])) i++;
    if (size < c.max_split_size && v[i].size >= c.max_split_size) return false;
    if (size >= c.max_split_size && v[i].size >= size + c.max_non_split_rounding) return false;
    *out = {v[i].s, v[i].addr};
    return true;
  }

  void RemoveSeg(RSeg *s) {
    segs.erase(std::find_if(segs.begin(), segs.end(), [&](auto &u) { return u.get() == s; }));
  }
  void Release(const Entry &e) {  // cudaFree of a whole free segment
    fd.f.drv.mem_free(&fd.f, e.s->base, e.s->size);
    total -= e.s->size;
    RemoveSeg(e.s);
  }

  void Gc() {
    uint64_t thr = (uint64_t)(c.gc_threshold * (double)allowed);
    if (total <= thr) return;
    uint64_t target = total - thr, got = 0, age_sum = 0;
    int64_t n = 0;
    for (auto &e : Free(false))
      if (Alone(e)) age_sum += (uint64_t)(calls[1] - B({e.s, e.addr}).gc_base), n++;
    if (!n) return;
    bool freed = true;
    while (got < target && freed && n > 0) {
      double avg = (double)age_sum / (double)n;
      freed = false;
      for (auto &e : Free(false)) {
        uint64_t age = (uint64_t)(calls[1] - B({e.s, e.addr}).gc_base);
        if (Alone(e) && !e.s->exp && (double)age >= avg) {
          freed = true;
          got += e.size;
          age_sum -= age;
          n--;
          Release(e);
        }
      }
    }
  }

  // map the pages covering [addr, addr+size) of the unmapped block at addr
  bool Map(RSeg *s, uint64_t addr, uint64_t size, bool small) {
    uint64_t off = addr - s->base, b0 = off / s->page, b1 = (off + size + s->page - 1) / s->page;
    uint64_t start = s->base + b0 * s->page, bytes = (b1 - b0) * s->page;
    if (fd.f.drv.map(&fd.f, start, bytes) != GM_OK) return false;
    size_t i = Idx(s, addr);
    RBlock blk = s->b[i];
    std::vector<RBlock> repl{{blk.addr, bytes, false, true, calls[small ? 0 : 1]}};
    if (bytes < blk.size) repl.push_back({blk.addr + bytes, blk.size - bytes, false, false, 0});
    s->b.erase(s->b.begin() + (long)i);
    s->b.insert(s->b.begin() + (long)i, repl.begin(), repl.end());
    MergeAround(s, i, small);
    total += bytes;
    s->mapped += bytes;
    return true;
  }
  // merge the free block at index i with free neighbours of the same mapped state
  int MergeAround(RSeg *s, size_t i, bool small) {
    int n = 0;
    if (i > 0 && !s->b[i - 1].allocated && s->b[i - 1].mapped == s->b[i].mapped) {
      s->b[i - 1].size += s->b[i].size;
      s->b[i - 1].gc_base = s->b[i].gc_base;
      s->b.erase(s->b.begin() + (long)i);
      i--;
      n++;
    }
    if (i + 1 < s->b.size() && !s->b[i + 1].allocated && s->b[i + 1].mapped == s->b[i].mapped) {
      s->b[i].size += s->b[i + 1].size;
      s->b.erase(s->b.begin() + (long)i + 1);
      n++;
    }
    s->b[i].gc_base = calls[small ? 0 : 1];
    return n;
  }

  bool ExpandAlloc(bool small, uint64_t stream, uint64_t size, Pos *out) {
    // unmapped ranges of this stream and pool, lowest address first
    std::vector<std::pair<RSeg *, uint64_t>> un;
    for (auto &s : segs)
      if (s->small == small && s->exp && s->stream == stream)
        for (auto &b : s->b)
          if (!b.mapped) un.push_back({s.get(), b.addr});
    std::sort(un.begin(), un.end(), [](auto &x, auto &y) { return x.second < y.second; });
    RSeg *cs = nullptr;
    uint64_t ca = 0;
    for (auto &[s, a] : un) {
      size_t i = Idx(s, a);
      if (i > 0 && !s->b[i - 1].allocated) i--;
      uint64_t have = 0;
      for (size_t j = i; j < s->b.size() && have < size && !s->b[j].allocated; j++) have += s->b[j].size;
      if (have >= size) {
        cs = s;
        ca = s->b[i].addr;
        break;
      }
    }
    if (!cs) {
      uint64_t page = small ? 2 * MiB : c.large_segment_size;
      uint64_t tm = fd.f.drv.total_memory, va = page * ((tm + tm / 8 + page - 1) / page), base = 0;
      fd.f.drv.va_reserve(&fd.f, va, &base);
      auto s = std::make_unique<RSeg>(RSeg{base, va, stream, page, 0, small, true, {{base, va, false, false, 0}}});
      cs = s.get();
      ca = base;
      segs.push_back(std::move(s));
    }
    RBlock cb = B({cs, ca});
    if (!cb.mapped) {
      if (!Map(cs, ca, std::min(cb.size, size), small)) return false;
      ca = cs->b[Containing(cs, ca)].addr;
    }
    while (B({cs, ca}).size < size) {
      size_t i = Idx(cs, ca);
      RBlock nx = cs->b[i + 1];
      if (!Map(cs, nx.addr, std::min(size - cs->b[i].size, nx.size), small)) return false;
      ca = cs->b[Containing(cs, ca)].addr;
    }
    *out = {cs, ca};
    return true;
  }

  bool AllocBlock(bool small, uint64_t stream, uint64_t size, uint64_t asize, bool retry, Pos *out) {
    if (retry) st.alloc_retries++;
    if (limit && total + asize > allowed) return false;
    if (c.expandable_segments) return ExpandAlloc(small, stream, size, out);
    uint64_t a = 0;
    if (fd.f.drv.mem_alloc(&fd.f, asize, &a) != GM_OK) return false;
    segs.push_back(std::make_unique<RSeg>(RSeg{a, asize, stream, 0, 0, small, false, {{a, asize, false, true, 0}}}));
    total += asize;
    *out = {segs.back().get(), a};
    return true;
  }

  bool ReleaseAvailable(bool small, uint64_t stream, uint64_t size) {
    if (c.max_split_size == UINT64_MAX) return false;
    uint64_t key = std::max(size, c.max_split_size);
    auto v = Free(small);
    size_t i = 0;
    while (i < v.size() && std::tie(v[i].stream, v[i].size) < std::tie(stream, key)) i++;
    if (i == v.size() || v[i].stream != stream || v[i].s->exp) {
      if (i == 0) return false;
      uint64_t got = 0;
      for (size_t j = i; j-- > 0;) {
        if (!(got < key && v[j].size >= c.max_split_size && v[j].stream == stream)) break;
        if (!v[j].s->exp) got += v[j].size, Release(v[j]);
      }
      return got >= key;
    }
    Release(v[i]);
    return true;
  }

  void Unmap(RSeg *s, uint64_t addr, bool small) {
    size_t i = Idx(s, addr);
    RBlock blk = s->b[i];
    uint64_t off = blk.addr - s->base;
    uint64_t b0 = (off + s->page - 1) / s->page, b1 = (off + blk.size) / s->page;
    if (b0 >= b1) return;
    uint64_t us = s->base + b0 * s->page, un = (b1 - b0) * s->page;
    fd.f.drv.unmap(&fd.f, us, un);
    int64_t now = calls[small ? 0 : 1];
    std::vector<RBlock> repl;
    if (us > blk.addr) repl.push_back({blk.addr, us - blk.addr, false, true, now});
    repl.push_back({us, un, false, false, 0});
    if (blk.addr + blk.size > us + un) repl.push_back({us + un, blk.addr + blk.size - us - un, false, true, now});
    s->b.erase(s->b.begin() + (long)i);
    s->b.insert(s->b.begin() + (long)i, repl.begin(), repl.end());
    size_t m = Idx(s, us);
    if (m > 0 && !s->b[m - 1].mapped) s->b[m - 1].size += s->b[m].size, s->b.erase(s->b.begin() + (long)m), m--;
    if (m + 1 < s->b.size() && !s->b[m + 1].mapped) s->b[m].size += s->b[m + 1].size, s->b.erase(s->b.begin() + (long)m + 1);
    total -= un;
    s->mapped -= un;
  }

  void ReleaseBlocks(bool small) {
    std::vector<Entry> exp;
    for (auto &e : Free(small)) {
      if (e.s->exp) exp.push_back(e);
      else if (Alone(e)) Release(e);
    }
    for (auto &e : exp) {
      Unmap(e.s, e.addr, small);
      if (e.s->b.size() == 1 && !e.s->b[0].mapped) {
        fd.f.drv.va_release(&fd.f, e.s->base, e.s->size);
        RemoveSeg(e.s);
      }
    }
  }
  void EmptyCache() {
    ReleaseBlocks(false);
    ReleaseBlocks(true);
  }

  gm_status_t Malloc(uint64_t orig, uint64_t stream, uint64_t *addr) {
    uint64_t size = rp_pytorch_round_size(&c, orig);  // checked separately against golden values
    bool small = size <= MiB;
    uint64_t asize = rp_pytorch_allocation_size(&c, size);
    Pos p{};
    bool ok = GetFree(small, stream, size, &p);
    if (!ok) {
      if (gc) Gc();
      ok = AllocBlock(small, stream, size, asize, false, &p) ||
           (ReleaseAvailable(small, stream, size) && AllocBlock(small, stream, size, asize, false, &p));
      if (!ok) {
        EmptyCache();
        ok = AllocBlock(small, stream, size, asize, true, &p);
      }
    }
    if (!ok) {
      st.ooms++;
      return GM_ERR_NOMEM;
    }
    size_t i = Idx(p.s, p.addr);
    RBlock &b = p.s->b[i];
    uint64_t rem = b.size - size;
    bool split = (small || c.expandable_segments) ? rem >= 512 : (size < c.max_split_size && rem > MiB);
    if (split) {
      RBlock rest{b.addr + size, rem, false, true, calls[small ? 0 : 1]};
      b.size = size;
      p.s->b.insert(p.s->b.begin() + (long)i + 1, rest);
      st.splits++;
    }
    p.s->b[i].allocated = true;
    allocated += p.s->b[i].size;
    *addr = p.addr;
    return GM_OK;
  }

  void FreeAt(uint64_t addr) {
    for (auto &s : segs)
      for (size_t i = 0; i < s->b.size(); i++)
        if (s->b[i].addr == addr && s->b[i].allocated) {
          s->b[i].allocated = false;
          allocated -= s->b[i].size;
          st.merges += (uint64_t)MergeAround(s.get(), i, s->small);
          return;
        }
    ADD_FAILURE() << "reference: free of unknown " << addr;
  }
};

const char *kConfs[] = {
    "",
    "max_split_size_mb:40",
    "max_split_size_mb:20",
    "roundup_power2_divisions:4",
    "roundup_power2_divisions:[1:4,4:8,>:2]",
    "expandable_segments:True",
    "per_process_memory_fraction:0.5,garbage_collection_threshold:0.6",
    "max_split_size_mb:32,max_non_split_rounding_mb:64,large_segment_size_mb:32",
    "large_segment_size_mb:32",
    "expandable_segments:True,max_split_size_mb:64",
    "expandable_segments:True,per_process_memory_fraction:0.7",
    "per_process_memory_fraction:0.8,garbage_collection_threshold:0.3,max_split_size_mb:30",
};

// What the programs exercised, summed over all of them (the test asserts each path was hit).
struct Coverage {
  uint64_t ops = 0, ooms = 0, retries = 0, failed_calls = 0, frees = 0, maps = 0, unmaps = 0, va_releases = 0, gc_frees = 0;
} g_cov;

uint64_t RandomSize(std::mt19937_64 &r) {
  uint64_t k = r() % 100;
  if (k < 40) return 1 + r() % MiB;
  if (k < 45) return 512 * (1 + r() % 2048);
  if (k < 70) return MiB + 1 + r() % (9 * MiB);
  if (k < 95) return 10 * MiB + r() % (110 * MiB);
  return 100 * MiB + r() % (500 * MiB);
}

void RunProgram(uint64_t seed, int nops) {
  std::mt19937_64 r(seed);
  const char *conf = kConfs[r() % (sizeof kConfs / sizeof kConfs[0])];
  uint64_t caps[] = {256 * MiB, 1 * GiB, 4 * GiB};
  uint64_t cap = caps[r() % 3];
  SCOPED_TRACE("seed " + std::to_string(seed) + " conf '" + conf + "' capacity " + std::to_string(cap >> 20) + " MiB");
  rp_pytorch_conf_t c;
  rp_pytorch_conf_default(&c);
  ASSERT_EQ(rp_pytorch_conf_parse(conf, &c, nullptr), GM_OK);
  Ref ref(c, cap);
  Driver fd(cap);
  rp_policy_t *p = nullptr;
  gm_err_t e{};
  ASSERT_EQ(rp_pytorch_ops.create(conf, &fd.f.drv, &p, &e), GM_OK) << e.msg;
  std::vector<uint64_t> live;
  int nstreams = 1 + (int)(r() % 3);
  for (int op = 0; op < nops; op++) {
    SCOPED_TRACE("op " + std::to_string(op));
    uint64_t k = r() % 100;
    if (k < 2) {
      ASSERT_EQ(rp_pytorch_ops.empty_cache(p, &e), GM_OK) << e.msg;
      ref.EmptyCache();
    } else if (k < 50 && !live.empty()) {
      size_t i = r() % live.size();
      ASSERT_EQ(rp_pytorch_ops.free(p, live[i], &e), GM_OK) << e.msg;
      ref.FreeAt(live[i]);
      live[i] = live.back();
      live.pop_back();
    } else {
      uint64_t size = RandomSize(r), stream = r() % (uint64_t)nstreams, a = 0, ra = 0;
      gm_status_t s = rp_pytorch_ops.alloc(p, size, stream, &a, &e);
      gm_status_t rs = ref.Malloc(size, stream, &ra);
      ASSERT_EQ(s, rs) << "alloc " << size << " on stream " << stream << ": " << e.msg;
      if (s == GM_OK) {
        ASSERT_EQ(a, ra) << "alloc " << size << " on stream " << stream;
        live.push_back(a);
      }
    }
    ASSERT_EQ(rp_pytorch_ops.check(p, &e), GM_OK) << e.msg;
    ASSERT_TRUE(fd.SameLog(ref.fd)) << "\nmodel:     " << fd.Text() << "\nreference: " << ref.fd.Text();
    rp_policy_stats_t st;
    rp_pytorch_ops.stats(p, &st);
    ASSERT_EQ(st.allocated_bytes, ref.allocated);
    ASSERT_EQ(st.cached_bytes, ref.total - ref.allocated);
    ASSERT_EQ(st.alloc_retries, ref.st.alloc_retries);
    ASSERT_EQ(st.ooms, ref.st.ooms);
    ASSERT_EQ(st.splits, ref.st.splits);
    ASSERT_EQ(st.merges, ref.st.merges);
  }
  rp_policy_stats_t st;
  rp_pytorch_ops.stats(p, &st);
  g_cov.ops += (uint64_t)nops;
  g_cov.ooms += st.ooms;
  g_cov.retries += st.alloc_retries;
  for (size_t i = 0; i < fd.f.nlog; i++) {
    const rp_fake_call_t &call = fd.f.log[i];
    g_cov.failed_calls += !call.ok;
    g_cov.frees += call.op == 'F';
    g_cov.maps += call.op == 'M';
    g_cov.unmaps += call.op == 'U';
    g_cov.va_releases += call.op == 'X';
  }
  if (ref.gc) g_cov.gc_frees += std::count_if(fd.f.log, fd.f.log + fd.f.nlog, [](const rp_fake_call_t &x) { return x.op == 'F'; });
  ASSERT_EQ(rp_pytorch_ops.release_all(p, &e), GM_OK) << e.msg;
  EXPECT_EQ(fd.f.used, 0u);
  EXPECT_EQ(rp_fake_driver_count(&fd.f, RP_FAKE_VA, nullptr), 0);
  rp_pytorch_ops.destroy(p);
}

TEST(PytorchReference, RandomProgramsAgreeOpByOp) {
  const char *env = getenv("PT_REF_PROGRAMS");
  int programs = env ? atoi(env) : 2000;
  for (int i = 0; i < programs; i++) {
    RunProgram(0x5eed0000ull + (uint64_t)i, 300);
    if (HasFatalFailure()) return;
  }
  printf("coverage: %llu ops, %llu OOMs, %llu retries, %llu failed driver calls, %llu cudaFree, %llu maps, %llu unmaps, "
         "%llu VA releases, %llu cudaFree with GC on\n",
         (unsigned long long)g_cov.ops, (unsigned long long)g_cov.ooms, (unsigned long long)g_cov.retries,
         (unsigned long long)g_cov.failed_calls, (unsigned long long)g_cov.frees, (unsigned long long)g_cov.maps,
         (unsigned long long)g_cov.unmaps, (unsigned long long)g_cov.va_releases, (unsigned long long)g_cov.gc_frees);
  if (programs >= 500) {
    EXPECT_GT(g_cov.ooms, 0u);
    EXPECT_GT(g_cov.retries, 0u);
    EXPECT_GT(g_cov.failed_calls, 0u);
    EXPECT_GT(g_cov.unmaps, 0u);
    EXPECT_GT(g_cov.va_releases, 0u);
    EXPECT_GT(g_cov.gc_frees, 0u);
  }
}

}  // namespace
