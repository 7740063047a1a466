/* pt_internal.h: the data structures of the pytorch policy, shared by its .c files only.
 *
 * Mirrors DeviceCachingAllocator's state: blocks (a segment is a doubly linked list of blocks
 * tiling it), two pools (small, large) each with its free mapped blocks in the order (stream,
 * size, address) (BlockComparatorSize; pt_bins.h: size-class bins) and a tree of unmapped
 * expandable ranges
 * ordered by (stream, address) (BlockComparatorAddress), live blocks found by address (hash),
 * and total_allocated_memory (what the driver has given us). Streams compare by their numeric
 * id, as torch compares cudaStream_t pointer values (snapshots record those values). */
#ifndef PT_INTERNAL_H
#define PT_INTERNAL_H

#include <bsd/sys/tree.h>
#include <inttypes.h>
#include <stdint.h>
#include <string.h>

#include "replay/policies/pytorch/pt_bins.h"
#include "replay/policies/pytorch/rp_pytorch.h"

/* uthash: a cheap multiplicative hash of the 8-byte address key, and no exit() on OOM. */
#define HASH_FUNCTION(keyptr, keylen, hashv)                       \
  do {                                                             \
    uint64_t k_;                                                   \
    memcpy(&k_, (keyptr), sizeof k_);                              \
    k_ *= 0x9E3779B97F4A7C15ull;                                   \
    (hashv) = (unsigned)(k_ >> 32);                                \
  } while (0)
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(obj) ((obj)->hash_oom = 1)
#include <uthash.h>

#define PT_MiB (1024ull * 1024ull)
#define PT_MIN_BLOCK 512ull
#define PT_SMALL_SIZE (1ull * PT_MiB)
#define PT_SMALL_BUFFER (2ull * PT_MiB)

typedef struct pt_seg pt_seg_t;

/* Two cache lines (slabs are 64-byte aligned): the first holds what a search, an insert into
 * a bin and a merge test read (key, tree links, state), the second the segment links and the
 * rest. No hash handle and no live list here: the address API keeps its own nodes (pt_addr_t)
 * and the live blocks are found by walking the slabs (release_all, check). */
typedef struct pt_block {
  uint64_t addr, size, stream;
  RB_ENTRY(pt_block) rb;        /* in a bin of pool->free or in pool->unmapped, never both */
  uint8_t allocated, mapped;
  uint8_t where;                /* PT_IN_NONE / PT_IN_FREE / PT_IN_UNMAPPED / PT_IN_LIVE */
  uint8_t small, expandable;    /* copies of seg->is_small / seg->expandable (no seg load) */
  uint8_t in_hash;              /* live and found by address (taken by alloc, not alloc_h) */
  uint16_t bin;                 /* in pool->free: its bin in grp */
  /* second line */
  struct pt_block *prev, *next; /* neighbours inside the segment (torch: split links) */
  pt_bgroup_t *grp;             /* in pool->free: its stream's group */
  pt_seg_t *seg;
  int64_t gc_base;              /* pool's get_free_block count when (re)inserted */
  struct pt_block *link;        /* block free-list and short work lists */
  uint64_t seq;                 /* live: p->seq when malloc handed it out (release_all's order) */
} __attribute__((aligned(64))) pt_block_t;

/* A live block handed out by the address API (alloc / free by address): found by address. */
typedef struct pt_addr {
  uint64_t addr;
  pt_block_t *b;
  int hash_oom;
  UT_hash_handle hh;
} pt_addr_t;

enum { PT_IN_NONE = 0, PT_IN_FREE = 1, PT_IN_UNMAPPED = 2, PT_IN_LIVE = 3 };

RB_HEAD(pt_unmapped_tree, pt_block);
RB_PROTOTYPE(pt_unmapped_tree, pt_block, rb, pt_cmp_addr)
/* (stream, size, address): BlockComparatorSize, the free pools' order. */
int pt_cmp_size(const pt_block_t *a, const pt_block_t *b);
int pt_cmp_addr(const pt_block_t *a, const pt_block_t *b);

/* A cudaMalloc segment, or an expandable segment's VA reservation. */
struct pt_seg {
  uint64_t base, size; /* expandable: the whole reserved range */
  uint64_t stream;
  uint64_t page;       /* expandable: bytes per page (2 MiB small, large_segment_size large) */
  uint64_t mapped;     /* expandable: bytes mapped now */
  uint8_t is_small, expandable;
  pt_seg_t *lprev, *lnext;
};

typedef struct pt_pool {
  pt_bins_t free;
  struct pt_unmapped_tree unmapped;
  int is_small;
  int64_t get_free_calls; /* get_free_blocks_call_count: GC's age clock */
} pt_pool_t;

typedef struct pt_slab {
  pt_block_t blocks[256]; /* first: 64-byte aligned (aligned_alloc) */
  struct pt_slab *next;
} pt_slab_t;

struct rp_policy {
  rp_pytorch_conf_t conf;
  rp_driver_t drv;
  pt_pool_t pools[2];    /* [0] small, [1] large */
  pt_addr_t *live;       /* uthash head: the live blocks the address API handed out */
  uint64_t seq;          /* mallocs so far: a live block's seq orders the live blocks */
  pt_seg_t *segs;        /* all segments */
  uint64_t total_allocated_memory; /* torch's name: bytes the driver gave us */
  uint64_t allowed_max;  /* per_process_memory_fraction * total_memory */
  int has_limit;         /* fraction < 1 (torch: allowed_memory_maximum has a value) */
  int gc_active;         /* has_limit && garbage_collection_threshold > 0 */
  int round_plain;       /* no roundup_power2_divisions: round_size is a multiple of 512 */
  uint64_t allocated_bytes;
  uint64_t n_blocks, n_segs;
  rp_policy_stats_t st;
  pt_block_t *spare;     /* free-list of block structs */
  pt_block_t *sink;      /* written where a split's front has no block before it (a select) */
  pt_slab_t *slabs;
  char spec[1024];
};

/* Link b to its segment (and cache the segment's pool and kind in the block). */
static inline void pt_block_attach(pt_block_t *b, pt_seg_t *s) {
  b->seg = s;
  b->small = s->is_small;
  b->expandable = s->expandable;
}

/* The pool of a block (a select on its copy of the segment's kind). */
static inline pt_pool_t *pt_pool_of(rp_policy_t *p, const pt_block_t *b) { return &p->pools[b->small ? 0 : 1]; }

/* pt_bins.c: a pool's free set (pt_bins.h); its operations on every request's path (insert,
 * remove, the search within a stream, a key lowered in place, a place taken) are inline in
 * pt_bins_ops.h. Insert: 0, or -1 when host memory ran out. */
void pt_bins_init(pt_bins_t *s);
void pt_bins_clear(pt_bins_t *s);
/* The first block >= (stream, size, 0) in the order (NULL: none). */
pt_block_t *pt_bins_lower(pt_bins_t *s, uint64_t stream, uint64_t size);
/* The next block within the stream only (NULL past its last block). */
pt_block_t *pt_bins_next_in_stream(pt_block_t *b);
pt_block_t *pt_bins_first(const pt_bins_t *s);
pt_block_t *pt_bins_last(const pt_bins_t *s);
pt_block_t *pt_bins_next(const pt_bins_t *s, pt_block_t *b);
pt_block_t *pt_bins_prev(const pt_bins_t *s, pt_block_t *b);
/* The bins against their trees (bits, least blocks, groups and counts): NULL, or what is
 * wrong. O(n + bins); for tests and the check op. */
const char *pt_bins_verify(const pt_bins_t *s);

#include "replay/policies/pytorch/pt_bins_ops.h"

/* pt_alloc.c */
pt_block_t *pt_block_new(rp_policy_t *p);
void pt_block_put(rp_policy_t *p, pt_block_t *b);

/* Insert: 0, or -1 when host memory ran out. */
int pt_free_insert(rp_policy_t *p, pt_block_t *b);
void pt_free_remove(rp_policy_t *p, pt_block_t *b);
void pt_unmapped_insert(rp_policy_t *p, pt_block_t *b);
void pt_unmapped_remove(rp_policy_t *p, pt_block_t *b);
uint64_t pt_try_merge(rp_policy_t *p, pt_block_t *dst, pt_block_t *src);
pt_seg_t *pt_seg_new(rp_policy_t *p);
void pt_seg_put(rp_policy_t *p, pt_seg_t *s);
gm_status_t pt_malloc(rp_policy_t *p, uint64_t size, uint64_t stream, pt_block_t **out, gm_err_t *err);
/* pt_malloc's block is live (where PT_IN_LIVE, seq set) but not found by address: the address API adds
 * it to the hash (pt_alloc_op), the handle API does not (the engine keeps the block). */
gm_status_t pt_free(rp_policy_t *p, pt_block_t *b, gm_err_t *err);
/* The handle API's entries (rp_policy_ops_t.alloc_h, free_h): the handle is the block. */
gm_status_t pt_malloc_h(rp_policy_t *p, uint64_t size, uint64_t stream, uint64_t *addr, uint64_t *handle, gm_err_t *err);
gm_status_t pt_free_h(rp_policy_t *p, uint64_t handle, gm_err_t *err);
gm_status_t pt_release_cached(rp_policy_t *p, gm_err_t *err);

/* pt_expand.c: expandable segments. Results: 1 found, 0 out of memory, < 0 driver error. */
int pt_expand_alloc(rp_policy_t *p, pt_pool_t *pool, uint64_t stream, uint64_t size, pt_block_t **out, gm_err_t *err);
int pt_expand_unmap(rp_policy_t *p, pt_block_t *b, gm_err_t *err);
int pt_expand_release_segment(rp_policy_t *p, pt_block_t *b, gm_err_t *err);

/* pt_oom.c */
int pt_oom_report(const rp_policy_t *p, uint64_t size, uint64_t stream, rp_oom_report_t *o);

/* pt_check.c */
gm_status_t pt_check(const rp_policy_t *p, gm_err_t *err);

/* pt_same.c: rp_policy_ops_t.same_run */
int pt_same_run(const char *conf_a, const char *conf_b, const rp_run_facts_t *ran);

#endif /* PT_INTERNAL_H */
