// rp_map against the slot-by-slot linear probe it replaced (a reference kept here): the same
// random puts, claims, removes and lookups give the same table, slot for slot (key, state,
// values), the same counts, the same "removed since the last rehash" answers and the same
// walk over the live slots (rp_map_next_live). The layout
// is what the engine's double-free count and every walk over the slots depend on.
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "replay/engine/rp_map.h"

namespace {

// The reference: rp_map.c before its probe read a byte per slot (2026-11-25).
struct Ref {
  std::vector<rp_map_entry_t> slots;
  size_t cap = 0, live = 0, used = 0;
  unsigned shift = 64;

  size_t Slot(uint64_t key) const { return (size_t)((key * 0x9E3779B97F4A7C15ull) >> shift); }
  rp_map_entry_t *Probe(uint64_t key) {
    size_t mask = cap - 1, i = Slot(key);
    for (;;) {
      rp_map_entry_t *e = &slots[i];
      if (e->state == 0 || e->key == key) return e;
      i = (i + 1) & mask;
    }
  }
  void Rehash() {
    size_t c = 1024;
    unsigned s = 64 - 10;
    while (c < 4 * (live + 1)) c *= 2, s--;
    Ref n;
    n.slots.assign(c, rp_map_entry_t{});
    n.cap = c;
    n.shift = s;
    for (size_t i = 0; i < cap; i++) {
      if (slots[i].state != 1) continue;
      *n.Probe(slots[i].key) = slots[i];
      n.live++;
    }
    n.used = n.live;
    *this = n;
  }
  rp_map_entry_t *Get(uint64_t key) {
    if (!cap) return nullptr;
    rp_map_entry_t *e = Probe(key);
    return e->state == 1 ? e : nullptr;
  }
  bool WasRemoved(uint64_t key) { return cap && Probe(key)->state == 2; }
  rp_map_entry_t *Claim(uint64_t key, int *was_live) {
    if (2 * (used + 1) > cap) Rehash();
    rp_map_entry_t *e = Probe(key);
    *was_live = e->state == 1;
    if (e->state != 1) {
      live++;
      if (e->state == 0) used++;
      e->key = key;
      e->state = 1;
    }
    return e;
  }
  void Put(uint64_t key, uint64_t a, uint64_t b) {
    int was = 0;
    rp_map_entry_t *e = Claim(key, &was);
    e->a = a;
    e->b = b;
  }
};

void ExpectSame(const rp_map_t &m, const Ref &r, int op) {
  ASSERT_EQ(m.cap, r.cap) << "op " << op;
  // rp_map_next_live visits the live slots in slot order, no other.
  std::vector<size_t> walk, want;
  for (size_t i = rp_map_next_live(&m, 0); i < m.cap; i = rp_map_next_live(&m, i + 1)) walk.push_back(i);
  for (size_t i = 0; i < r.cap; i++)
    if (r.slots[i].state == 1) want.push_back(i);
  ASSERT_EQ(walk, want) << "op " << op;
  ASSERT_EQ(m.live, r.live) << "op " << op;
  ASSERT_EQ(m.used, r.used) << "op " << op;
  for (size_t i = 0; i < r.cap; i++) {
    ASSERT_EQ(m.slots[i].state, r.slots[i].state) << "op " << op << " slot " << i;
    if (r.slots[i].state == 0) continue;
    ASSERT_EQ(m.slots[i].key, r.slots[i].key) << "op " << op << " slot " << i;
    if (r.slots[i].state == 1) {
      ASSERT_EQ(m.slots[i].a, r.slots[i].a) << "op " << op << " slot " << i;
      ASSERT_EQ(m.slots[i].b, r.slots[i].b) << "op " << op << " slot " << i;
    }
  }
}

// universe: how many distinct keys (small: reuse of freed slots; 0: a fresh key per put, the
// synthetic trace's pattern); keys are 512-byte aligned addresses, as the engine's are.
void RunProgram(unsigned seed, uint64_t universe, int ops, int check_every) {
  rp_map_t m;
  rp_map_init(&m);
  Ref r;
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1, fresh = 0x7f0000000000ull;
  auto rnd = [&x]() {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return x;
  };
  std::vector<uint64_t> keys;  // live in the reference
  for (int op = 0; op < ops; op++) {
    uint64_t v = rnd();
    uint64_t key = universe ? 0x10000 + (v >> 20) % universe * 512 : (fresh += 512 * (1 + v % 3));
    switch (v % 8) {
      case 0:
      case 1:
      case 2: {  // claim (the engine's alloc)
        int w1 = 0, w2 = 0;
        rp_map_entry_t *e = rp_map_claim(&m, key, &w1);
        ASSERT_NE(e, nullptr);
        rp_map_entry_t *f = r.Claim(key, &w2);
        ASSERT_EQ(w1, w2) << op;
        e->a = f->a = v;
        e->b = f->b = op;
        if (!w1) keys.push_back(key);
        break;
      }
      case 3: {  // put
        ASSERT_EQ(rp_map_put(&m, key, v, op), 0);
        if (!r.Get(key)) keys.push_back(key);
        r.Put(key, v, op);
        break;
      }
      case 4:
      case 5: {  // remove a live key (the engine's free), sometimes a key never put
        if (keys.empty()) break;
        size_t i = (v >> 8) % keys.size();
        uint64_t k = keys[i];
        keys[i] = keys.back();
        keys.pop_back();
        rp_map_entry_t *e = rp_map_get(&m, k);
        rp_map_entry_t *f = r.Get(k);
        ASSERT_NE(e, nullptr) << op;
        ASSERT_NE(f, nullptr) << op;
        rp_map_remove(&m, e);
        f->state = 2;
        r.live--;
        break;
      }
      default: {  // lookups: live, removed since the last rehash, or neither
        ASSERT_EQ(rp_map_get(&m, key) != nullptr, r.Get(key) != nullptr) << op;
        ASSERT_EQ(rp_map_was_removed(&m, key), (int)r.WasRemoved(key)) << op;
        break;
      }
    }
    if (op % check_every == 0) ExpectSame(m, r, op);
    if (::testing::Test::HasFatalFailure()) break;
  }
  ExpectSame(m, r, ops);
  rp_map_free(&m);
}

TEST(RpMap, SameLayoutAsLinearProbingWithReusedKeys) {
  for (unsigned seed = 1; seed <= 4; seed++) RunProgram(seed, 3000, 60000, 97);
}

TEST(RpMap, SameLayoutAsLinearProbingWithFreshKeys) {
  for (unsigned seed = 1; seed <= 3; seed++) RunProgram(seed, 0, 60000, 101);
}

TEST(RpMap, SameLayoutAsLinearProbingAtHighLoadAndTheWrap) {
  // A universe just over what fits: long probe runs that wrap past the table's end.
  for (unsigned seed = 1; seed <= 3; seed++) RunProgram(seed, 700, 40000, 13);
}

}  // namespace
