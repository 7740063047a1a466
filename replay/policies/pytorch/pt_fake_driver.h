// pt_fake_driver.h: a test driver for the pytorch policy tests: a device of fixed capacity
// that hands out segment addresses and VA ranges from bump pointers (never reused, so two
// instances fed the same calls give the same addresses) and logs every call.
#ifndef PT_FAKE_DRIVER_H
#define PT_FAKE_DRIVER_H

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "replay/policies/rp_policy.h"

struct FakeCall {
  char op;  // 'A' mem_alloc, 'F' mem_free, 'R' va_reserve, 'X' va_release, 'M' map, 'U' unmap
  uint64_t addr, size;
  bool ok;
  bool operator==(const FakeCall &o) const { return op == o.op && addr == o.addr && size == o.size && ok == o.ok; }
};

struct FakeDriver {
  uint64_t capacity;
  uint64_t used = 0, peak = 0;
  uint64_t next_seg = 1ull << 32, next_va = 1ull << 44;
  std::map<uint64_t, uint64_t> segs;  // cudaMalloc segments: addr -> size
  std::map<uint64_t, uint64_t> vas;   // reservations: addr -> size
  std::set<uint64_t> pages;           // mapped 2 MiB pages
  std::vector<FakeCall> log;
  bool hard_error = false;            // a backend failure
  rp_driver_t drv{};

  static constexpr uint64_t kGran = 2ull << 20;

  explicit FakeDriver(uint64_t cap) : capacity(cap) {
    drv.ctx = this;
    drv.mem_alloc = [](void *c, uint64_t size, uint64_t *addr) { return static_cast<FakeDriver *>(c)->Alloc(size, addr); };
    drv.mem_free = [](void *c, uint64_t addr, uint64_t size) { return static_cast<FakeDriver *>(c)->Free(addr, size); };
    drv.va_reserve = [](void *c, uint64_t size, uint64_t *addr) { return static_cast<FakeDriver *>(c)->Reserve(size, addr); };
    drv.va_release = [](void *c, uint64_t addr, uint64_t size) { return static_cast<FakeDriver *>(c)->Release(addr, size); };
    drv.map = [](void *c, uint64_t addr, uint64_t size) { return static_cast<FakeDriver *>(c)->Map(addr, size); };
    drv.unmap = [](void *c, uint64_t addr, uint64_t size) { return static_cast<FakeDriver *>(c)->Unmap(addr, size); };
    drv.granularity = kGran;
    drv.total_memory = cap;
  }
  void Use(int64_t d) {
    used += d;
    if (used > peak) peak = used;
  }
  gm_status_t Alloc(uint64_t size, uint64_t *addr) {
    if (hard_error) return GM_ERR_CUDA;
    bool ok = used + size <= capacity;
    log.push_back({'A', ok ? next_seg : 0, size, ok});
    if (!ok) return GM_ERR_NOMEM;
    *addr = next_seg;
    segs[next_seg] = size;
    next_seg += (size + kGran - 1) / kGran * kGran + kGran;  // a gap: segments never touch
    Use(size);
    return GM_OK;
  }
  gm_status_t Free(uint64_t addr, uint64_t size) {
    log.push_back({'F', addr, size, true});
    auto it = segs.find(addr);
    if (it == segs.end() || it->second != size) return GM_ERR_INVAL;
    segs.erase(it);
    used -= size;
    return GM_OK;
  }
  gm_status_t Reserve(uint64_t size, uint64_t *addr) {
    log.push_back({'R', next_va, size, true});
    *addr = next_va;
    vas[next_va] = size;
    next_va += size + (1ull << 30);
    return GM_OK;
  }
  gm_status_t Release(uint64_t addr, uint64_t size) {
    log.push_back({'X', addr, size, true});
    auto it = vas.find(addr);
    if (it == vas.end() || it->second != size) return GM_ERR_INVAL;
    for (uint64_t a = addr; a < addr + size; a += kGran)
      if (pages.count(a)) return GM_ERR_INVAL;  // still mapped
    vas.erase(it);
    return GM_OK;
  }
  bool InVa(uint64_t addr, uint64_t size) const {
    auto it = vas.upper_bound(addr);
    if (it == vas.begin()) return false;
    --it;
    return addr >= it->first && addr + size <= it->first + it->second;
  }
  gm_status_t Map(uint64_t addr, uint64_t size) {
    bool ok = used + size <= capacity;
    log.push_back({'M', addr, size, ok});
    if (!ok) return GM_ERR_NOMEM;
    if (size == 0 || size % kGran || addr % kGran || !InVa(addr, size)) return GM_ERR_INVAL;
    for (uint64_t a = addr; a < addr + size; a += kGran)
      if (!pages.insert(a).second) return GM_ERR_INVAL;  // mapped twice
    Use(size);
    return GM_OK;
  }
  gm_status_t Unmap(uint64_t addr, uint64_t size) {
    log.push_back({'U', addr, size, true});
    if (size == 0 || size % kGran || addr % kGran) return GM_ERR_INVAL;
    for (uint64_t a = addr; a < addr + size; a += kGran)
      if (!pages.erase(a)) return GM_ERR_INVAL;  // was not mapped
    used -= size;
    return GM_OK;
  }
  // The segment_alloc sequence as a fidelity harness sees it: sizes of successful
  // mem_alloc / map calls, in order.
  std::vector<uint64_t> SegmentAllocs() const {
    std::vector<uint64_t> v;
    for (auto &c : log)
      if ((c.op == 'A' || c.op == 'M') && c.ok) v.push_back(c.size);
    return v;
  }
  static std::string Str(const std::vector<FakeCall> &l) {
    std::string s;
    for (auto &c : l) s += std::string(1, c.op) + (c.ok ? "" : "!") + std::to_string(c.size >> 10) + "K ";
    return s;
  }
};

#endif  // PT_FAKE_DRIVER_H
