/* rp_sizeclass.h: size classes and a bitmap of non-empty classes, for the free-block bins of
 * the caching allocators (pytorch/pt_bins.c, rp_bfc_core.c).
 *
 * A class is log-linear in the size counted in units of 2^shift bytes: 16 exact classes
 * (sizes below 16 units), then 8 per power of two. It is monotonic (a larger size never has a
 * smaller class), so a set ordered by (size, address) inside each class and by class across
 * classes is ordered by (size, address) as a whole, and the first block >= a size is in its
 * class or is the least block of the next non-empty class. Classes refine the powers of two:
 * TF's BFC bins ([256 << i, 256 << (i + 1)) with shift 8) are unions of them. */
#ifndef RP_SIZECLASS_H
#define RP_SIZECLASS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RP_SC_N 448 /* 16 + 54 octaves x 8 (shift >= 8), rounded up to whole bitmap words */
#define RP_SC_WORDS (RP_SC_N / 64)

/* x = size >> shift, e = log2(x | 8): x < 16 is its own class (e = 3); from 16 on,
 * 16 + 8 (e - 4) + the next 3 bits after the leading one, i.e. 8 (e - 3) + (x >> (e - 3)) with
 * x >> (e - 3) in [8, 16): one form for both, no branch (pt_bins_class is the same for shift 9). */
static inline uint32_t rp_sc_class(uint64_t size, unsigned shift) {
  uint64_t x = size >> shift;
  uint32_t sh = 60u - (uint32_t)__builtin_clzll(x | 8u); /* e - 3 */
  return 8u * sh + (uint32_t)(x >> sh);
}

/* Which classes are non-empty: a bit per class, and a bit per word that has one set (a
 * search past the size's own word is two bit scans, not a walk over the words). */
typedef struct rp_sc_map {
  uint64_t sum;
  uint64_t w[RP_SC_WORDS];
} rp_sc_map_t;

static inline int rp_sc_has(const rp_sc_map_t *m, uint32_t k) { return (int)(m->w[k / 64] >> (k % 64) & 1u); }
static inline void rp_sc_set(rp_sc_map_t *m, uint32_t k) {
  m->w[k / 64] |= 1ull << (k % 64);
  m->sum |= 1ull << (k / 64);
}
static inline void rp_sc_clear(rp_sc_map_t *m, uint32_t k) {
  if (!(m->w[k / 64] &= ~(1ull << (k % 64)))) m->sum &= ~(1ull << (k / 64));
}

/* The first non-empty class >= k (RP_SC_N when none). */
static inline uint32_t rp_sc_next(const rp_sc_map_t *m, uint32_t k) {
  if (k >= RP_SC_N) return RP_SC_N;
  uint32_t w = k / 64;
  uint64_t b = m->w[w] & (~0ull << (k % 64));
  if (b) return w * 64 + (uint32_t)__builtin_ctzll(b);
  uint64_t s = w + 1 < 64 ? m->sum & (~0ull << (w + 1)) : 0;
  if (!s) return RP_SC_N;
  w = (uint32_t)__builtin_ctzll(s);
  return w * 64 + (uint32_t)__builtin_ctzll(m->w[w]);
}

/* The last non-empty class <= k (UINT32_MAX when none); k < RP_SC_N. */
static inline uint32_t rp_sc_prev(const rp_sc_map_t *m, uint32_t k) {
  uint32_t w = k / 64;
  uint64_t b = m->w[w] & (~0ull >> (63 - k % 64));
  if (b) return w * 64 + 63u - (uint32_t)__builtin_clzll(b);
  uint64_t s = m->sum & ((1ull << w) - 1);
  if (!s) return UINT32_MAX;
  w = 63u - (uint32_t)__builtin_clzll(s);
  return w * 64 + 63u - (uint32_t)__builtin_clzll(m->w[w]);
}

#ifdef __cplusplus
}
#endif
#endif /* RP_SIZECLASS_H */
