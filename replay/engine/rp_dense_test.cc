// rp_dense against rp_map, its reference: the same random claims, removes and lookups, keyed by
// address in the map and by the address's number in the dense table, give the same answers
// (live or not, values, "removed since the last rehash", the live count) and the same live
// entries in a walk. The engine's double-free count and its peak snapshot read exactly those.
// And the numbering those numbers come from (rp_addr_ids_build) against a std::map, and batch
// by batch (rp_addr_numbering) against it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <unordered_map>
#include <vector>

#include "replay/engine/rp_dense.h"
#include "replay/engine/rp_engine.h"
#include "replay/engine/rp_map.h"

namespace {

struct Pair {
  rp_map_t map;
  rp_dense_t dense;
  std::unordered_map<uint64_t, uint32_t> ids;  // address -> number, in order of first use
  std::vector<uint64_t> keys;                  // number -> address

  explicit Pair(uint32_t n) {
    rp_map_init(&map);
    EXPECT_EQ(rp_dense_init(&dense, n), 0);
  }
  ~Pair() {
    rp_map_free(&map);
    rp_dense_free(&dense);
  }
  uint32_t Id(uint64_t key) {
    auto it = ids.find(key);
    if (it != ids.end()) return it->second;
    uint32_t id = (uint32_t)keys.size();
    ids.emplace(key, id);
    keys.push_back(key);
    return id;
  }
  std::vector<uint64_t> MapWalk() const {
    std::vector<uint64_t> v;
    for (size_t i = rp_map_next_live(&map, 0); i < map.cap; i = rp_map_next_live(&map, i + 1))
      v.push_back(map.slots[i].key);
    std::sort(v.begin(), v.end());
    return v;
  }
  std::vector<uint64_t> DenseWalk() const {
    std::vector<uint64_t> v;
    for (size_t i = rp_dense_next_live(&dense, 0); i < dense.n; i = rp_dense_next_live(&dense, i + 1)) {
      EXPECT_EQ(dense.slots[i].state, 1u);
      v.push_back(dense.slots[i].key);
    }
    std::sort(v.begin(), v.end());
    return v;
  }
};

// fresh: share of operations on a never-seen address (a trace allocating at fresh addresses
// fills the map with removed slots: rehashes with many of them); the rest reuse a small pool.
// rounds: the same table reset and used again (a new rp_map each round, the numbering kept).
void RunProgram(unsigned seed, int ops, double fresh, size_t pool, int rounds = 1) {
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  Pair p((uint32_t)(ops * rounds) + 1);
  uint64_t next_fresh = 1ull << 40;
  for (int round = 0; round < rounds; round++) {
    if (round > 0) {
      rp_map_free(&p.map);
      rp_map_init(&p.map);
      rp_dense_reset(&p.dense);
      ASSERT_TRUE(p.DenseWalk().empty());
    }
    for (int op = 0; op < ops; op++) {
      uint64_t key = u(rng) < fresh ? (next_fresh += 512) : 0x1000 + 512 * (rng() % pool);
      uint32_t id = p.Id(key);
      ASSERT_LT(id, p.dense.n);
      double r = u(rng);
      if (r < 0.45) {  // an allocation
        int wm = -1, wd = -1;
        rp_map_entry_t *m = rp_map_claim(&p.map, key, &wm);
        rp_map_entry_t *d = rp_dense_claim(&p.dense, id, key, &wd);
        ASSERT_TRUE(m && d);
        ASSERT_EQ(wm, wd) << "op " << op;
        // what a claimed entry holds before the caller writes it (a slot removed in this epoch
        // keeps its values, a new one is zero: the engine leaves c as found on some paths)
        ASSERT_EQ(m->a, d->a) << "op " << op;
        ASSERT_EQ(m->b, d->b) << "op " << op;
        ASSERT_EQ(m->c, d->c) << "op " << op;
        m->a = d->a = rng();
        m->b = d->b = rng();
        if (rng() % 2) m->c = d->c = (uint32_t)rng();
      } else {  // a free: found and removed, or told double from unknown
        rp_map_entry_t *m = rp_map_get(&p.map, key);
        rp_map_entry_t *d = rp_dense_get(&p.dense, id);
        ASSERT_EQ(m != nullptr, d != nullptr) << "op " << op;
        if (m) {
          ASSERT_EQ(m->a, d->a);
          ASSERT_EQ(m->b, d->b);
          ASSERT_EQ(m->c, d->c);
          rp_map_remove(&p.map, m);
          rp_dense_remove(&p.dense, d);
        } else {
          ASSERT_EQ(rp_map_was_removed(&p.map, key), rp_dense_was_removed(&p.dense, id)) << "op " << op;
        }
      }
      ASSERT_EQ(p.map.live, p.dense.live);
      ASSERT_EQ(p.map.cap, p.dense.cap);
      ASSERT_EQ(p.map.used, p.dense.used);
      if (op % 997 == 0) {
        ASSERT_EQ(p.MapWalk(), p.DenseWalk()) << "op " << op;
      }
    }
    ASSERT_EQ(p.MapWalk(), p.DenseWalk());
  }
}

TEST(RpDense, AsRpMapOnReusedAddresses) {
  for (unsigned seed = 1; seed <= 4; seed++) RunProgram(seed, 60000, 0.0, 3000);
}

TEST(RpDense, AsRpMapOnFreshAddresses) {
  for (unsigned seed = 11; seed <= 14; seed++) RunProgram(seed, 60000, 0.6, 200);
}

TEST(RpDense, AsRpMapOnALargeLiveSet) {
  // many live at once: rehashes that grow the table, walks over long stretches
  RunProgram(21, 200000, 0.3, 50000);
}

TEST(RpDense, AsANewRpMapAfterAReset) {
  // what the last replay left live, removed or written is in none of the next one's answers
  RunProgram(31, 40000, 0.3, 2000, 3);
}

TEST(RpDense, WalkFindsLiveNumbersAcrossEmptyStretches) {
  rp_dense_t d;
  ASSERT_EQ(rp_dense_init(&d, 300000), 0);
  const uint32_t live[] = {0, 63, 64, 4095, 4096, 100000, 299999};
  int w;
  for (uint32_t id : live) rp_dense_claim(&d, id, id, &w);
  std::vector<size_t> got;
  for (size_t i = rp_dense_next_live(&d, 0); i < d.n; i = rp_dense_next_live(&d, i + 1)) got.push_back(i);
  EXPECT_EQ(got, std::vector<size_t>(std::begin(live), std::end(live)));
  rp_dense_remove(&d, &d.slots[4096]);
  EXPECT_EQ(rp_dense_next_live(&d, 4096), 100000u);
  rp_dense_free(&d);
}

}  // namespace

namespace {

gmt_event_t Event(unsigned kind, uint64_t addr) {
  gmt_event_t e{};
  e.kind = (uint8_t)kind;
  e.addr = addr;
  return e;
}

// The numbering (engine_ids.c) against a std::map: one number per distinct address among the
// events that name a block, in order of first appearance; RP_NO_ID for the others.
void CheckNumbering(const std::vector<gmt_event_t> &evs) {
  rp_addr_ids_t ids;
  gm_err_t err{};
  ASSERT_EQ(rp_addr_ids_build(evs.data(), evs.size(), &ids, &err), GM_OK) << err.msg;
  std::unordered_map<uint64_t, uint32_t> want;
  for (size_t i = 0; i < evs.size(); i++) {
    unsigned k = evs[i].kind;
    if (k == GMT_EV_SEGMENT_ALLOC || k == GMT_EV_EMPTY_CACHE) {
      EXPECT_EQ(ids.id[i], RP_NO_ID) << i;
      continue;
    }
    uint32_t w = want.emplace(evs[i].addr, (uint32_t)want.size()).first->second;
    ASSERT_EQ(ids.id[i], w) << "event " << i;
  }
  EXPECT_EQ(ids.count, want.size());
  EXPECT_EQ(ids.evs, evs.data());
  EXPECT_EQ(ids.n, evs.size());
  rp_addr_ids_free(&ids);
}

// Frees of addresses never allocated outnumber the allocations here: the table grows past its
// sizing.
TEST(AddrIds, NumbersEachAddressOnceInOrderOfFirstAppearance) {
  std::mt19937_64 rng(5);
  std::vector<gmt_event_t> evs;
  const unsigned kinds[] = {GMT_EV_ALLOC, GMT_EV_FREE, GMT_EV_FREE, GMT_EV_FREE, GMT_EV_FREE_REQUESTED,
                            GMT_EV_VMM_MAP, GMT_EV_SEGMENT_ALLOC, GMT_EV_EMPTY_CACHE};
  for (int i = 0; i < 50000; i++) {
    unsigned k = kinds[rng() % (sizeof kinds / sizeof kinds[0])];
    uint64_t a = rng() % 3 ? 0x7f0000000000ull + 512 * (rng() % 20000) : rng();
    evs.push_back(Event(k, a));
  }
  CheckNumbering(evs);
}

// Long traces, where the table is sized from the first 65,536 events when they were mostly
// fresh addresses: a fresh address per allocation throughout; fresh at first then reused (the
// sizing too large); few fresh at first then a fresh one per event (too small: it grows on);
// a few thousand addresses reused throughout (no sizing).
TEST(AddrIds, LongTracesWhateverTheirFirstEventsSuggest) {
  const size_t n = 400000;
  for (int pattern = 0; pattern < 4; pattern++) {
    std::mt19937_64 rng(11 + pattern);
    std::vector<gmt_event_t> evs;
    for (size_t i = 0; i < n; i++) {
      uint64_t fresh = 0x7f0000000000ull + 512 * i, reused = 0x7e0000000000ull + 512 * (rng() % 3000);
      bool use_fresh = pattern == 0 ? rng() % 2 : pattern == 1 ? i < 100000 : pattern == 2 ? i > 150000 : false;
      unsigned k = rng() % 16 == 0 ? GMT_EV_SEGMENT_ALLOC : rng() % 2 ? GMT_EV_ALLOC : GMT_EV_FREE;
      evs.push_back(Event(k, use_fresh ? fresh : reused));
    }
    SCOPED_TRACE(pattern);
    CheckNumbering(evs);
  }
}

// A trace read batch by batch (a streamed replay: rp_addr_numbering) gets the numbers the whole
// trace gets at once, whatever the batches' sizes; counting alone (id NULL) counts the same; a
// count over the limit fails, as the replays it was known for would (their tables sized so).
TEST(AddrIds, BatchByBatchTheSameNumbersAsTheWholeTrace) {
  std::mt19937_64 rng(21);
  std::vector<gmt_event_t> evs;
  const unsigned kinds[] = {GMT_EV_ALLOC, GMT_EV_FREE, GMT_EV_FREE_REQUESTED, GMT_EV_VMM_MAP, GMT_EV_SEGMENT_ALLOC};
  for (int i = 0; i < 120000; i++) {
    uint64_t a = i > 60000 && rng() % 4 == 0 ? 0x7f0000000000ull + 512 * (uint64_t)i : 0x7e0000000000ull + 512 * (rng() % 2500);
    evs.push_back(Event(kinds[rng() % 5], a));
  }
  rp_addr_ids_t whole;
  gm_err_t err{};
  ASSERT_EQ(rp_addr_ids_build(evs.data(), evs.size(), &whole, &err), GM_OK) << err.msg;
  for (size_t batch : {(size_t)1, (size_t)777, (size_t)4096, evs.size()}) {
    rp_addr_numbering_t *nb = nullptr, *counter = nullptr;
    ASSERT_EQ(rp_addr_numbering_new(whole.count, &nb, &err), GM_OK);
    ASSERT_EQ(rp_addr_numbering_new(whole.count, &counter, &err), GM_OK);
    std::vector<uint32_t> id(batch);
    for (size_t i = 0; i < evs.size(); i += batch) {
      size_t k = std::min(batch, evs.size() - i);
      ASSERT_EQ(rp_addr_numbering_next(nb, &evs[i], k, id.data(), &err), GM_OK) << err.msg;
      ASSERT_EQ(rp_addr_numbering_next(counter, &evs[i], k, nullptr, &err), GM_OK) << err.msg;
      for (size_t j = 0; j < k; j++) ASSERT_EQ(id[j], whole.id[i + j]) << "batch " << batch << " event " << i + j;
    }
    EXPECT_EQ(rp_addr_numbering_count(nb), whole.count);
    EXPECT_EQ(rp_addr_numbering_count(counter), whole.count);
    rp_addr_numbering_free(nb);
    rp_addr_numbering_free(counter);
  }
  rp_addr_numbering_t *small = nullptr;
  ASSERT_EQ(rp_addr_numbering_new(whole.count - 1, &small, &err), GM_OK);
  EXPECT_EQ(rp_addr_numbering_next(small, evs.data(), evs.size(), nullptr, &err), GM_ERR_INVAL);
  EXPECT_EQ(rp_addr_numbering_count(small), whole.count - 1);
  rp_addr_numbering_free(small);
  rp_addr_ids_free(&whole);
}

// Built as the events come (rp_addr_ids_begin/add/end, a decoder's numbering thread): the same
// numbers as the one-pass build, whatever the pieces, the array moving between them (a copy
// each time, the old one overwritten) and the hint (exact, too small: the numbers' array
// grows; too large; 0).
TEST(AddrIds, BuiltPieceByPieceAsTheEventsComeGivesTheSameNumbers) {
  const size_t n = 300000;
  std::mt19937_64 rng(3);
  std::vector<gmt_event_t> evs;
  for (size_t i = 0; i < n; i++) {
    uint64_t a = i < 120000 ? 0x7f0000000000ull + 512 * i : 0x7e0000000000ull + 512 * (rng() % 5000);
    evs.push_back(Event(rng() % 16 == 0 ? GMT_EV_EMPTY_CACHE : rng() % 2 ? GMT_EV_ALLOC : GMT_EV_FREE, a));
  }
  rp_addr_ids_t whole;
  gm_err_t err{};
  ASSERT_EQ(rp_addr_ids_build(evs.data(), n, &whole, &err), GM_OK) << err.msg;
  for (size_t hint : {n, n / 7, 2 * n, (size_t)0}) {
    SCOPED_TRACE(hint);
    rp_ids_builder_t *b = rp_addr_ids_begin(hint);
    std::vector<gmt_event_t> moving(evs.begin(), evs.begin() + 1);
    size_t to = 0;
    while (to < n - 5000) {
      to += 1 + rng() % 70000;
      if (to > n - 5000) to = n - 5000;
      std::vector<gmt_event_t> next(evs.begin(), evs.begin() + (long)to);
      std::fill(moving.begin(), moving.end(), Event(GMT_EV_ALLOC, 1));  // the old array is gone
      moving.swap(next);
      rp_addr_ids_add(b, moving.data(), to);
    }
    rp_addr_ids_t ids;
    ASSERT_EQ(rp_addr_ids_end(b, evs.data(), n, &ids, &err), GM_OK) << err.msg;
    EXPECT_EQ(ids.evs, evs.data());
    EXPECT_EQ(ids.n, n);
    EXPECT_EQ(ids.count, whole.count);
    EXPECT_GE(ids.id_cap, n);
    EXPECT_EQ(memcmp(ids.id, whole.id, n * sizeof *ids.id), 0);
    rp_addr_ids_free(&ids);
  }
  rp_addr_ids_free(&whole);
}

}  // namespace
