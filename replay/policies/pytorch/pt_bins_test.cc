// pt_bins_test.cc: the free-block bins (pt_bins.c) against a naive model, a std::vector kept
// sorted by (stream, size, address), op by op on random programs: inserts, removes, keys
// lowered in place (a split's remainder), a block taking a neighbour's place (a merge),
// searches (global and within a stream), neighbours, and whole walks both ways. Programs
// cover one stream and many (more than the groups kept when empty), sizes of every class,
// and the pathological pool of many same-size blocks (one bin).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <set>
#include <tuple>
#include <vector>

extern "C" {
#include "replay/policies/pytorch/pt_internal.h"
}

namespace {

using Key = std::tuple<uint64_t, uint64_t, uint64_t>;  // (stream, size, addr)

Key KeyOf(const pt_block_t *b) { return Key(b->stream, b->size, b->addr); }

struct Model {
  std::vector<pt_block_t *> v;  // sorted by KeyOf
  std::set<Key> keys;
  void Sort() {
    std::sort(v.begin(), v.end(), [](const pt_block_t *a, const pt_block_t *b) { return KeyOf(a) < KeyOf(b); });
  }
  // Index of the first block >= key (v.size() when none).
  size_t Lower(const Key &k) const {
    size_t i = 0;
    while (i < v.size() && KeyOf(v[i]) < k) i++;
    return i;
  }
  size_t IndexOf(const pt_block_t *b) const { return (size_t)(std::find(v.begin(), v.end(), b) - v.begin()); }
};

struct Program {
  uint64_t seed;
  int ops;
  std::vector<uint64_t> streams;
  int size_kind;  // 0: every class; 1: one size only (the pathological bin)
  size_t target;  // grows to about this many blocks, then hovers
};

void ExpectSameOrder(const pt_bins_t *s, const Model &m, const char *where, uint64_t seed, int op) {
  ASSERT_EQ(s->n, m.v.size()) << where << " seed " << seed << " op " << op;
  size_t i = 0;
  for (pt_block_t *b = pt_bins_first(s); b; b = pt_bins_next(s, b), i++) {
    ASSERT_LT(i, m.v.size()) << where << " seed " << seed << " op " << op;
    ASSERT_EQ(b, m.v[i]) << where << " seed " << seed << " op " << op << " index " << i;
  }
  ASSERT_EQ(i, m.v.size()) << where << " seed " << seed << " op " << op;
  for (pt_block_t *b = pt_bins_last(s); b; b = pt_bins_prev(s, b)) {
    ASSERT_GT(i, 0u) << where << " seed " << seed << " op " << op;
    ASSERT_EQ(b, m.v[--i]) << where << " seed " << seed << " op " << op;
  }
  ASSERT_EQ(i, 0u);
}

// Each bin's least block (kept beside its root) is the model's first block of that stream and
// size class: the model is sorted and classes are monotonic, so a bin's blocks are a run.
void ExpectLeastBlocks(const pt_bins_t *s, const Model &m, uint64_t seed, int op) {
  for (size_t i = 0; i < m.v.size(); i++) {
    const pt_block_t *b = m.v[i];
    uint32_t k = pt_bins_class(b->size);
    bool first = i == 0 || m.v[i - 1]->stream != b->stream || pt_bins_class(m.v[i - 1]->size) != k;
    ASSERT_EQ(b->bin, k) << "seed " << seed << " op " << op;
    const pt_bin_t *bin = &b->grp->bins[k / PT_BINS_CHUNK][k % PT_BINS_CHUNK];
    if (first) {
      ASSERT_EQ(bin->min, b) << "seed " << seed << " op " << op << " index " << i;
    }
  }
  const char *why = pt_bins_verify(s);
  ASSERT_EQ(why, nullptr) << why << " seed " << seed << " op " << op;
}

void RunProgram(const Program &pg) {
  std::mt19937_64 rng(pg.seed);
  auto rnd = [&](uint64_t n) { return n ? (uint64_t)(rng() % n) : 0; };
  std::vector<std::unique_ptr<pt_block_t>> pool;
  pt_bins_t s;
  pt_bins_init(&s);
  Model m;
  auto rand_size = [&]() -> uint64_t {
    if (pg.size_kind == 1) return 2048;
    switch (rnd(4)) {
      case 0: return 512 * (1 + rnd(16));                    // the exact classes
      case 1: return 512 * (1 + rnd(4096));                  // small pool sizes
      case 2: return (20ull << 20) + 512 * rnd(1u << 16);    // large segments' sizes
      default: return 512ull << rnd(40);                     // every octave
    }
  };
  auto new_block = [&](uint64_t stream, uint64_t size, uint64_t addr) {
    pool.emplace_back(new pt_block_t());
    pt_block_t *b = pool.back().get();
    b->stream = stream, b->size = size, b->addr = addr;
    return b;
  };
  auto rand_key = [&]() {
    return Key(pg.streams[rnd(pg.streams.size())], rand_size(), 512 * rnd(1ull << 30));
  };
  for (int op = 0; op < pg.ops; op++) {
    int r = (int)rnd(100);
    bool grow = m.v.size() < pg.target;
    if (m.v.empty() || r < (grow ? 50 : 30)) {  // insert
      Key k = rand_key();
      if (m.keys.count(k)) continue;
      pt_block_t *b = new_block(std::get<0>(k), std::get<1>(k), std::get<2>(k));
      ASSERT_EQ(pt_bins_insert(&s, b), 0);
      m.v.push_back(b);
      m.keys.insert(k);
      m.Sort();
    } else if (r < 55) {  // remove
      pt_block_t *b = m.v[rnd(m.v.size())];
      pt_bins_remove(&s, b);
      m.keys.erase(KeyOf(b));
      m.v.erase(m.v.begin() + (long)m.IndexOf(b));
    } else if (r < 70) {  // a split's remainder: its front cut off, its key lowered in place
      pt_block_t *b = m.v[rnd(m.v.size())];
      if (b->size <= 512) continue;
      uint64_t cut = 512 * (1 + rnd(b->size / 512 - 1));
      Key k(b->stream, b->size - cut, b->addr + cut);
      if (m.keys.count(k)) continue;
      m.keys.erase(KeyOf(b));
      b->size -= cut, b->addr += cut;
      m.keys.insert(k);
      ASSERT_EQ(pt_bins_shrunk(&s, b), 0);
      m.Sort();
    } else if (r < 85) {  // a merge: a new block (old's stream, larger) takes old's place
      pt_block_t *old = m.v[rnd(m.v.size())];
      uint64_t add = rnd(2) ? 512 * (1 + rnd(64)) : rand_size();
      uint64_t addr = rnd(2) && old->addr >= add ? old->addr - add : old->addr;
      Key k(old->stream, old->size + add, addr);
      if (m.keys.count(k)) continue;
      pt_block_t *b = new_block(old->stream, old->size + add, addr);
      ASSERT_EQ(pt_bins_replace(&s, old, b), 0);
      m.keys.erase(KeyOf(old));
      m.v[m.IndexOf(old)] = b;
      m.keys.insert(k);
      m.Sort();
    }
    if (s.ng <= 4 || op % 16 == 0) ExpectLeastBlocks(&s, m, pg.seed, op);
    if (::testing::Test::HasFatalFailure()) return;
    // Searches: a random key and a key at an existing block's size.
    for (int q = 0; q < 2; q++) {
      Key k = rand_key();
      if (q == 1 && !m.v.empty()) {
        const pt_block_t *o = m.v[rnd(m.v.size())];
        k = Key(rnd(2) ? o->stream : std::get<0>(k), o->size + 512 * rnd(3) - 512 * rnd(2), 0);
      }
      uint64_t st = std::get<0>(k), sz = std::get<1>(k);
      size_t i = m.Lower(Key(st, sz, 0));
      pt_block_t *want = i < m.v.size() ? m.v[i] : nullptr;
      ASSERT_EQ(pt_bins_lower(&s, st, sz), want) << "seed " << pg.seed << " op " << op;
      pt_block_t *in_stream = want && want->stream == st ? want : nullptr;
      ASSERT_EQ(pt_bins_lower_in_stream(&s, st, sz), in_stream) << "seed " << pg.seed << " op " << op;
    }
    // Neighbours of a random block.
    if (!m.v.empty()) {
      size_t i = rnd(m.v.size());
      pt_block_t *b = m.v[i];
      pt_block_t *next = i + 1 < m.v.size() ? m.v[i + 1] : nullptr;
      ASSERT_EQ(pt_bins_next(&s, b), next) << "seed " << pg.seed << " op " << op;
      ASSERT_EQ(pt_bins_next_in_stream(b), next && next->stream == b->stream ? next : nullptr);
      ASSERT_EQ(pt_bins_prev(&s, b), i ? m.v[i - 1] : nullptr) << "seed " << pg.seed << " op " << op;
    }
    ASSERT_EQ(pt_bins_first(&s), m.v.empty() ? nullptr : m.v.front());
    ASSERT_EQ(pt_bins_last(&s), m.v.empty() ? nullptr : m.v.back());
    if (op % 50 == 0 || m.v.size() < 8) ExpectSameOrder(&s, m, "walk", pg.seed, op);
    if (::testing::Test::HasFatalFailure()) return;
  }
  ExpectSameOrder(&s, m, "end", pg.seed, pg.ops);
  // Drain in random order: every group emptied (those past the kept ones freed), still usable.
  std::shuffle(m.v.begin(), m.v.end(), rng);
  while (!m.v.empty()) {
    pt_bins_remove(&s, m.v.back());
    m.v.pop_back();
  }
  EXPECT_EQ(s.n, 0u);
  EXPECT_EQ(pt_bins_first(&s), nullptr);
  EXPECT_EQ(pt_bins_lower(&s, 0, 0), nullptr);
  pt_bins_clear(&s);
}

TEST(PtBins, SizeClassIsMonotonic) {
  uint64_t prev = 0;
  for (uint64_t sz = 0; sz < (1ull << 24); sz += 512) {
    uint32_t k = pt_bins_class(sz);
    ASSERT_GE(k, prev) << sz;
    ASSERT_LT(k, (uint32_t)PT_BINS_N);
    prev = k;
  }
  for (int e = 24; e < 64; e++) {
    uint64_t sz = 1ull << e;
    ASSERT_GE(pt_bins_class(sz), pt_bins_class(sz - 512));
    ASSERT_GE(pt_bins_class(sz + (sz >> 3)), pt_bins_class(sz)) << e;
  }
  EXPECT_LT(pt_bins_class(UINT64_MAX), (uint32_t)PT_BINS_N);
  // exact classes below 8 KiB, then a new class every eighth of an octave
  EXPECT_NE(pt_bins_class(512), pt_bins_class(1024));
  EXPECT_EQ(pt_bins_class(1 << 20), pt_bins_class((1 << 20) + 512));
  EXPECT_NE(pt_bins_class(1 << 20), pt_bins_class((1 << 20) + (1 << 17)));
}

// pt_bins_class is rp_sc_class(size, 9) without its branch: equal on every size (each below
// 16 MiB in 512-byte steps and odd ones, then powers of two and their neighbours to 2^64 - 1).
TEST(PtBins, SizeClassIsTheSharedOne) {
  for (uint64_t sz = 0; sz < (1ull << 24); sz += 512) {
    ASSERT_EQ(pt_bins_class(sz), rp_sc_class(sz, 9)) << sz;
    ASSERT_EQ(pt_bins_class(sz + 511), rp_sc_class(sz + 511, 9)) << sz + 511;
  }
  for (int e = 24; e < 64; e++)
    for (uint64_t sz : {(1ull << e) - 1, 1ull << e, (1ull << e) + 1, (1ull << e) + (1ull << (e - 1)) + 12345})
      ASSERT_EQ(pt_bins_class(sz), rp_sc_class(sz, 9)) << sz;
  EXPECT_EQ(pt_bins_class(UINT64_MAX), rp_sc_class(UINT64_MAX, 9));
}

TEST(PtBins, OneStreamAgainstModel) {
  for (uint64_t seed = 1; seed <= 60; seed++) {
    RunProgram(Program{seed, 600, {7}, 0, 40});
    if (HasFatalFailure()) return;
  }
}

TEST(PtBins, FewStreamsAgainstModel) {
  for (uint64_t seed = 100; seed < 140; seed++) {
    RunProgram(Program{seed, 800, {0, 5, UINT64_MAX - 1}, 0, 60});
    if (HasFatalFailure()) return;
  }
}

TEST(PtBins, ManyStreamsGroupsComeAndGo) {
  // More streams than the empty groups kept (8): groups are freed and made again.
  std::vector<uint64_t> streams;
  for (uint64_t i = 0; i < 24; i++) streams.push_back(1000 + 17 * i);
  for (uint64_t seed = 200; seed < 210; seed++) {
    RunProgram(Program{seed, 1500, streams, 0, 30});
    if (HasFatalFailure()) return;
  }
}

TEST(PtBins, ThousandsOfStreams) {
  // One free block on each of 20000 streams, inserted in a random order: the groups (a tree
  // by stream) keep the streams' order; each group holds one small array of bins.
  std::mt19937_64 rng(11);
  std::vector<uint64_t> streams;
  for (uint64_t i = 0; i < 20000; i++) streams.push_back(i * 7919);
  std::shuffle(streams.begin(), streams.end(), rng);
  std::vector<std::unique_ptr<pt_block_t>> blocks;
  pt_bins_t s;
  pt_bins_init(&s);
  for (uint64_t st : streams) {
    blocks.emplace_back(new pt_block_t());
    pt_block_t *b = blocks.back().get();
    b->stream = st, b->size = 512 * (1 + st % 977), b->addr = 512 * st;
    ASSERT_EQ(pt_bins_insert(&s, b), 0);
  }
  uint64_t prev = 0, n = 0;
  for (pt_block_t *b = pt_bins_first(&s); b; b = pt_bins_next(&s, b), n++) {
    if (n) {
      ASSERT_GT(b->stream, prev);
    }
    prev = b->stream;
  }
  EXPECT_EQ(n, streams.size());
  // a stream without blocks: the search answers the next stream's least block
  pt_block_t *b = pt_bins_lower(&s, 7919 * 5 + 1, 0);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->stream, 7919u * 6);
  EXPECT_EQ(pt_bins_lower_in_stream(&s, 7919 * 5 + 1, 0), nullptr);
  for (auto &blk : blocks) pt_bins_remove(&s, blk.get());
  EXPECT_EQ(s.ng, 8u);  // emptied groups past the kept ones are gone
  pt_bins_clear(&s);
}

TEST(PtBins, ManySameSizeBlocksInOneBin) {
  for (uint64_t seed = 300; seed < 303; seed++) {
    RunProgram(Program{seed, 3000, {1, 2}, 1, 1500});
    if (HasFatalFailure()) return;
  }
}

}  // namespace
