/* pt_bins.h: a pool's free blocks in torch's BlockPool order, (stream, size, address)
 * (BlockComparatorSize), held in size-class bins. Internal to the pytorch policy.
 *
 * torch's search, get_free_block, is pool.blocks.lower_bound((stream, size, 0)): the first
 * free block of the stream whose size is >= the request, lowest address on ties. Here: one
 * group per stream (groups in a red-black tree by stream id, the last used one cached), in a
 * group PT_BINS_N bins by size class (rp_sizeclass.h: 16 exact classes of 512 bytes, then 8
 * per power of two; monotonic in the size, so every block of an earlier bin is smaller), a
 * bitmap of the non-empty bins, and in each bin a red-black tree ordered by (size, address)
 * through the block's own links, its least block kept beside the root. A search is its
 * size's bin (on the 1 M-event synthetic trace most bins hold one block), else the least
 * block of the next non-empty bin (a bit scan and one load: 93 % of that trace's searches),
 * else of the next group: the same block the single (stream, size, address) tree gave,
 * without its ~log2(n) dependent loads. The price: a block whose size changes (a split's
 * remainder, a merge) usually changes bin, a remove and an insert on one-block trees where
 * the single tree kept its node in place. A pool of a million same-size blocks (one bin)
 * costs O(log n), as the one tree did; 10^5 streams cost O(log n) a lookup and a kilobyte
 * or two each (an array of 64 bins is made with its first block). The operations on every
 * request's path are inline, in pt_bins_ops.h.
 *
 * A block in the set records its group and bin (pt_block_t.grp, .bin): removal needs no
 * search, and a block whose key changed in place (a split's remainder, a merge taking a
 * neighbour's node) is still found. Blocks are visited in order by pt_bins_first / next /
 * prev / last; a visit may remove the block it stands on after taking its neighbour. */
#ifndef PT_BINS_H
#define PT_BINS_H

#include <bsd/sys/tree.h>
#include <stdint.h>

#include "replay/policies/rp_sizeclass.h"

#define PT_BINS_N RP_SC_N

#define PT_BINS_CHUNK 64 /* bins per lazily allocated array of bins */

struct pt_block;
RB_HEAD(pt_bin_tree, pt_block);

/* A bin: its tree and its least block (NULL when empty), kept beside the root so that a
 * search that lands on the bin takes the least block without walking the tree's left spine
 * (most searches take the least block of the next non-empty bin). */
typedef struct pt_bin {
  struct pt_bin_tree tree;
  struct pt_block *min;
} pt_bin_t;

typedef struct pt_bgroup {
  uint64_t stream;
  uint64_t n;
  rp_sc_map_t map; /* which bins are non-empty */
  RB_ENTRY(pt_bgroup) link; /* in pt_bins_t.groups, by stream */
  /* bin k is bins[k / 64][k % 64]; an array is allocated with its first block, so a stream
   * with a few free blocks costs a kilobyte or two, not every bin */
  pt_bin_t *bins[PT_BINS_N / PT_BINS_CHUNK];
} pt_bgroup_t;

RB_HEAD(pt_group_tree, pt_bgroup);

typedef struct pt_bins {
  struct pt_group_tree groups; /* by stream id: a trace of many streams costs O(log n) */
  pt_bgroup_t *last;           /* the group the last search or insert used */
  uint32_t ng;                 /* groups; a few may be empty (kept for reuse) */
  uint64_t n;
} pt_bins_t;

/* The size class of a size: rp_sc_class(size, 9) (units of torch's 512-byte kMinBlockSize),
 * without its branch (sizes below and above 8 KiB alternate at random in a trace, and every
 * search, insert and move computes a class). With x = size / 512 and e = log2(x | 8) (>= 3),
 * x >> (e - 3) is x's top four bits (8..15: the class within the octave, plus 8) and the
 * octaves before e hold 8 classes each: 8 (e - 3) + (x >> (e - 3)). For x < 16, e is 3 and
 * that is x itself, the exact classes (pt_bins_test compares every form). */
static inline uint32_t pt_bins_class(uint64_t size) {
  uint64_t x = size >> 9;
  uint32_t sh = 60u - (uint32_t)__builtin_clzll(x | 8u); /* e - 3 */
  return 8u * sh + (uint32_t)(x >> sh);
}

#endif /* PT_BINS_H */
