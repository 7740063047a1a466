/* pt_alloc.c: the allocation and free paths of torch 2.11's DeviceCachingAllocator.
 *
 * malloc(size, stream): round_size -> pool (small iff rounded <= 1 MiB) -> best fit in the
 * pool's (stream, size, address) order (get_free_block, with the max_split_size and
 * max_non_split_rounding rules) -> on a miss: GC (only with a memory fraction), alloc_block
 * (fraction limit, then cudaMalloc of get_allocation_size, or expandable growth), then
 * release_available_cached_blocks + alloc_block, then release_cached_blocks (empty_cache) +
 * alloc_block counted as a retry, then OOM. A found block is split when should_split says so;
 * the remainder keeps the higher addresses and goes back to the pool.
 * free(block): merge with a free neighbour on each side (same segment, same mapped state),
 * back into the pool. Blocks never cross segments.
 *
 * Workload assumption: allocs ~= frees, few live blocks (thousands), many events: every path
 * is O(log n) in the pool size, and block structs come from a free-list (no malloc once warm). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "replay/policies/pytorch/pt_internal.h"

int pt_cmp_size(const pt_block_t *a, const pt_block_t *b) {
  if (a->stream != b->stream) return a->stream < b->stream ? -1 : 1;
  if (a->size != b->size) return a->size < b->size ? -1 : 1;
  if (a->addr != b->addr) return a->addr < b->addr ? -1 : 1;
  return 0;
}

int pt_cmp_addr(const pt_block_t *a, const pt_block_t *b) {
  if (a->stream != b->stream) return a->stream < b->stream ? -1 : 1;
  if (a->addr != b->addr) return a->addr < b->addr ? -1 : 1;
  return 0;
}

_Static_assert(offsetof(pt_block_t, prev) == 64 && sizeof(pt_block_t) == 128, "pt_block_t: two cache lines, the hot one first");

RB_GENERATE(pt_unmapped_tree, pt_block, rb, pt_cmp_addr)

/* ---- block and segment structs ---- */

/* 256 spare blocks more. 0, or -1 when host memory ran out. */
static __attribute__((noinline)) int slab_new(rp_policy_t *p) {
  pt_slab_t *s = aligned_alloc(64, sizeof *s); /* sizeof is a multiple of 64 */
  if (!s) return -1;
  memset(s, 0, sizeof *s); /* where = PT_IN_NONE: the slab walks skip spare blocks */
  s->next = p->slabs;
  p->slabs = s;
  for (int i = 255; i >= 0; i--) {
    s->blocks[i].link = p->spare;
    p->spare = &s->blocks[i];
  }
  return 0;
}

static inline __attribute__((always_inline)) pt_block_t *block_new(rp_policy_t *p) {
  if (!p->spare && slab_new(p) != 0) return NULL;
  pt_block_t *b = p->spare;
  p->spare = b->link;
  /* Field by field, not memset: a memset of the block compiled to `rep stos`, whose start-up
   * cost was 5 % of a replay. grp, bin, gc_base and seq are set where they mean something. */
  b->addr = b->size = b->stream = 0;
  b->rb.rbe_left = b->rb.rbe_right = b->rb.rbe_parent = NULL;
  b->rb.rbe_color = 0;
  b->allocated = b->where = b->small = b->expandable = b->in_hash = 0;
  b->mapped = 1;
  b->prev = b->next = b->link = NULL;
  b->seg = NULL;
  b->grp = NULL;
  p->n_blocks++;
  return b;
}

pt_block_t *pt_block_new(rp_policy_t *p) { return block_new(p); }

static inline __attribute__((always_inline)) void block_put(rp_policy_t *p, pt_block_t *b) {
  b->where = PT_IN_NONE; /* the slab walks (release_all, check) take it for a spare */
  b->allocated = 0;
  b->link = p->spare;
  p->spare = b;
  p->n_blocks--;
}

void pt_block_put(rp_policy_t *p, pt_block_t *b) { block_put(p, b); }

pt_seg_t *pt_seg_new(rp_policy_t *p) {
  pt_seg_t *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->lnext = p->segs;
  if (p->segs) p->segs->lprev = s;
  p->segs = s;
  p->n_segs++;
  return s;
}

void pt_seg_put(rp_policy_t *p, pt_seg_t *s) {
  if (s->lprev) s->lprev->lnext = s->lnext;
  else p->segs = s->lnext;
  if (s->lnext) s->lnext->lprev = s->lprev;
  p->n_segs--;
  free(s);
}

/* insert_into_blocks: also restarts the block's GC age. */
static inline __attribute__((always_inline)) int free_insert(rp_policy_t *p, pt_block_t *b) {
  pt_pool_t *pool = pt_pool_of(p, b);
  if (pt_bins_insert(&pool->free, b) != 0) return -1;
  b->gc_base = pool->get_free_calls;
  b->where = PT_IN_FREE;
  return 0;
}

static inline __attribute__((always_inline)) void free_remove(rp_policy_t *p, pt_block_t *b) {
  pt_bins_remove(&pt_pool_of(p, b)->free, b);
  b->where = PT_IN_NONE;
}

int pt_free_insert(rp_policy_t *p, pt_block_t *b) { return free_insert(p, b); }
void pt_free_remove(rp_policy_t *p, pt_block_t *b) { free_remove(p, b); }

void pt_unmapped_insert(rp_policy_t *p, pt_block_t *b) {
  b->where = PT_IN_UNMAPPED;
  RB_INSERT(pt_unmapped_tree, &pt_pool_of(p, b)->unmapped, b);
}

void pt_unmapped_remove(rp_policy_t *p, pt_block_t *b) {
  RB_REMOVE(pt_unmapped_tree, &pt_pool_of(p, b)->unmapped, b);
  b->where = PT_IN_NONE;
}

/* try_merge_blocks: src (a neighbour of dst) is absorbed when it is free and has dst's mapped
 * state. Returns the bytes absorbed. */
uint64_t pt_try_merge(rp_policy_t *p, pt_block_t *dst, pt_block_t *src) {
  if (!src || src->allocated || src->mapped != dst->mapped) return 0;
  if (dst->prev == src) {
    dst->addr = src->addr;
    dst->prev = src->prev;
    if (dst->prev) dst->prev->next = dst;
  } else {
    dst->next = src->next;
    if (dst->next) dst->next->prev = dst;
  }
  dst->size += src->size;
  if (src->mapped) pt_free_remove(p, src);
  else pt_unmapped_remove(p, src);
  pt_block_put(p, src);
  return 1;
}

/* ---- helpers of malloc ---- */

typedef struct params {
  uint64_t size;       /* rounded */
  uint64_t stream;
  uint64_t alloc_size; /* get_allocation_size */
  pt_pool_t *pool;
  pt_block_t *block;
  int in_tree; /* block is still in its pool's free set (found there by get_free_block) */
} params_t;

static int is_split(const pt_block_t *b) { return b->prev || b->next; }

static uint64_t expandable_size(const pt_block_t *b) {
  return b->size + (b->next && !b->next->mapped ? b->next->size : 0);
}

/* get_free_block's walk from an expandable segment's block: with expandable segments, best
 * fit by the size a block could grow to into the unmapped range after it; without, the
 * first block that is not expandable. NULL: none. */
static __attribute__((noinline)) pt_block_t *expandable_fit(rp_policy_t *p, pt_block_t *b) {
  if (p->conf.expandable_segments) {
    pt_block_t *n = pt_bins_next_in_stream(b);
    while (b->expandable && n && expandable_size(n) < expandable_size(b)) {
      b = n;
      n = pt_bins_next_in_stream(n);
    }
    return b;
  }
  do b = pt_bins_next_in_stream(b);
  while (b && b->expandable);
  return b;
}

static inline __attribute__((always_inline)) int get_free_block(rp_policy_t *p, params_t *a) {
  pt_pool_t *pool = a->pool;
  if (p->gc_active) pool->get_free_calls++;
  /* torch's lower_bound, then its checks that the block is on the request's stream: here the
   * search stays within the stream's group and answers NULL where torch's stream check fails */
  pt_block_t *b = pt_bins_lower_in_stream(&pool->free, a->stream, a->size);
  if (!b) return 0;
  if (b->expandable && !(b = expandable_fit(p, b))) return 0;
  uint64_t msplit = p->conf.max_split_size;
  if (a->size < msplit && b->size >= msplit) return 0; /* no oversize block for a small request */
  if (a->size >= msplit && b->size >= a->size + p->conf.max_non_split_rounding) return 0;
  a->block = b; /* still in the set: pt_malloc takes it out, or leaves its remainder there */
  a->in_tree = 1;
  return 1;
}

/* cudaFree of a whole unsplit, non-expandable free block (release_block). */
static gm_status_t release_block(rp_policy_t *p, pt_block_t *b, gm_err_t *err) {
  gm_status_t s = p->drv.mem_free(p->drv.ctx, b->addr, b->size);
  if (s != GM_OK) return gm_err_set(err, s, "pytorch: cudaFree of %" PRIu64 " bytes: %s", b->size, gm_status_str(s));
  p->total_allocated_memory -= b->size;
  pt_free_remove(p, b);
  pt_seg_put(p, b->seg);
  pt_block_put(p, b);
  return GM_OK;
}

/* garbage_collect_cached_blocks: free aged unsplit large blocks of every stream until reserved
 * is back under threshold * allowed maximum. Runs only with a memory fraction. */
static gm_status_t garbage_collect(rp_policy_t *p, gm_err_t *err) {
  uint64_t threshold = rp_pytorch_gc_threshold(&p->conf, p->allowed_max);
  if (p->total_allocated_memory <= threshold) return GM_OK;
  uint64_t target = p->total_allocated_memory - threshold, reclaimed = 0, total_age = 0;
  int64_t count = 0;
  pt_pool_t *pool = &p->pools[1];
  pt_block_t *b, *n;
  for (b = pt_bins_first(&pool->free); b; b = pt_bins_next(&pool->free, b)) {
    if (!is_split(b)) {
      total_age += (uint64_t)(pool->get_free_calls - b->gc_base);
      count++;
    }
  }
  if (count == 0) return GM_OK;
  int freed = 1;
  while (reclaimed < target && freed && count > 0) {
    double age_threshold = (double)total_age / (double)count;
    freed = 0;
    for (b = pt_bins_first(&pool->free); b; b = n) {
      n = pt_bins_next(&pool->free, b);
      uint64_t age = (uint64_t)(pool->get_free_calls - b->gc_base);
      if (!is_split(b) && !b->expandable && (double)age >= age_threshold) {
        freed = 1;
        reclaimed += b->size;
        total_age -= age;
        count--;
        gm_status_t s = release_block(p, b, err);
        if (s != GM_OK) return s;
      }
    }
  }
  return GM_OK;
}

/* alloc_block: a new segment (or expandable growth). 1 found, 0 out of memory, < 0 error. */
static int alloc_block(rp_policy_t *p, params_t *a, int is_retry, gm_err_t *err) {
  if (is_retry) p->st.alloc_retries++;
  if (p->has_limit && p->total_allocated_memory + a->alloc_size > p->allowed_max) return 0;
  if (p->conf.expandable_segments) return pt_expand_alloc(p, a->pool, a->stream, a->size, &a->block, err);
  uint64_t addr = 0;
  gm_status_t s = p->drv.mem_alloc(p->drv.ctx, a->alloc_size, &addr);
  if (s == GM_ERR_NOMEM) return 0;
  if (s != GM_OK) return gm_err_set(err, s, "pytorch: cudaMalloc of %" PRIu64 " bytes: %s", a->alloc_size, gm_status_str(s));
  pt_seg_t *seg = pt_seg_new(p);
  pt_block_t *b = seg ? pt_block_new(p) : NULL;
  if (!b) return gm_err_set(err, GM_ERR_NOMEM, "pytorch: out of host memory");
  seg->base = addr;
  seg->size = a->alloc_size;
  seg->stream = a->stream;
  seg->is_small = a->pool->is_small;
  b->addr = addr;
  b->size = a->alloc_size;
  b->stream = a->stream;
  pt_block_attach(b, seg);
  p->total_allocated_memory += a->alloc_size;
  a->block = b;
  return 1;
}

/* release_available_cached_blocks: with max_split_size set, cudaFree one cached oversize
 * block large enough for the request, or else the largest oversize blocks of this stream
 * until their sizes add up to it. 1 if enough was freed, 0 if not, < 0 error. */
static int release_available(rp_policy_t *p, params_t *a, gm_err_t *err) {
  uint64_t msplit = p->conf.max_split_size;
  if (msplit == UINT64_MAX) return 0;
  pt_pool_t *pool = a->pool;
  uint64_t want = a->size < msplit ? msplit : a->size;
  pt_block_t *it = pt_bins_lower(&pool->free, a->stream, want);
  if (!it || it->stream != a->stream || it->expandable) {
    pt_block_t *first = pt_bins_first(&pool->free);
    if (it == first) return 0;
    it = it ? pt_bins_prev(&pool->free, it) : pt_bins_last(&pool->free);
    uint64_t released = 0;
    while (released < want && it->size >= msplit && it->stream == a->stream) {
      pt_block_t *cur = it;
      int is_first = cur == first;
      if (!is_first) it = pt_bins_prev(&pool->free, it);
      if (!cur->expandable) {
        released += cur->size;
        gm_status_t s = release_block(p, cur, err);
        if (s != GM_OK) return s;
      }
      if (is_first) break;
    }
    return released >= want;
  }
  gm_status_t s = release_block(p, it, err);
  return s != GM_OK ? s : 1;
}

/* release_blocks: cudaFree every unsplit free block of the pool, in pool order; unmap the free
 * pages of expandable segments and release segments left with nothing mapped. */
static gm_status_t release_blocks(rp_policy_t *p, pt_pool_t *pool, gm_err_t *err) {
  pt_block_t *b, *n, *to_unmap = NULL, **tail = &to_unmap;
  for (b = pt_bins_first(&pool->free); b; b = n) {
    n = pt_bins_next(&pool->free, b);
    if (b->expandable) {
      b->link = NULL;
      *tail = b;
      tail = &b->link;
    } else if (!is_split(b)) {
      gm_status_t s = release_block(p, b, err);
      if (s != GM_OK) return s;
    }
  }
  for (b = to_unmap; b; b = n) {
    n = b->link;
    int r = pt_expand_unmap(p, b, err);
    if (r < 0) return (gm_status_t)r;
    if (!b->mapped && !is_split(b)) {
      r = pt_expand_release_segment(p, b, err);
      if (r < 0) return (gm_status_t)r;
    }
  }
  return GM_OK;
}

/* release_cached_blocks == torch.cuda.empty_cache(): large pool first, then small. */
gm_status_t pt_release_cached(rp_policy_t *p, gm_err_t *err) {
  gm_status_t s = release_blocks(p, &p->pools[1], err);
  return s != GM_OK ? s : release_blocks(p, &p->pools[0], err);
}

/* Both rules, then a select (the pool alternates at random): no branch. */
static int should_split(rp_policy_t *p, const pt_block_t *b, uint64_t size) {
  uint64_t remaining = b->size - size;
  int small_rule = remaining >= PT_MIN_BLOCK;
  int large_rule = (size < p->conf.max_split_size) & (remaining > PT_SMALL_SIZE);
  int sel = b->small | (p->conf.expandable_segments != 0);
  return (small_rule & sel) | (large_rule & (sel ^ 1)); /* GCC makes a branch of a ?: here */
}

/* The remainder of a split (b, its front just cut off) back into its pool. When b was found in
 * the free set it is still there under its old key; the remainder's key (same stream,
 * smaller size) is below the old one, so it keeps b's place in the order (no remove and
 * insert) when it stays in its size class and the block before it still sorts before it
 * (pt_bins_shrunk). A split is most allocations. 0, or -1 when host memory ran out. */
static inline __attribute__((always_inline)) int remainder_to_pool(rp_policy_t *p, pt_block_t *b, int in_tree) {
  if (in_tree) {
    pt_pool_t *pool = pt_pool_of(p, b);
    b->gc_base = pool->get_free_calls; /* as pt_free_insert: its GC age restarts */
    return pt_bins_shrunk(&pool->free, b);
  }
  return free_insert(p, b);
}

/* No cached block fits (a.size, a.stream): GC, a new segment (alloc_block), the release
 * paths, then out of memory. GM_OK with a->block set, or the failure. Out of line: the
 * cache serves all but a few hundred of a replay's requests. */
static __attribute__((noinline)) gm_status_t malloc_miss(rp_policy_t *p, params_t *a, gm_err_t *err) {
  a->alloc_size = rp_pytorch_allocation_size(&p->conf, a->size);
  if (p->gc_active) {
    gm_status_t s = garbage_collect(p, err);
    if (s != GM_OK) return s;
  }
  int found = alloc_block(p, a, 0, err);
  if (found == 0) {
    found = release_available(p, a, err);
    if (found == 1) found = alloc_block(p, a, 0, err);
  }
  if (found == 0) {
    gm_status_t s = pt_release_cached(p, err);
    if (s != GM_OK) return s;
    found = alloc_block(p, a, 1, err);
  }
  if (found < 0) return (gm_status_t)found;
  if (!found) {
    p->st.ooms++;
    return gm_err_set(err, GM_ERR_NOMEM,
                      "pytorch: out of memory: tried to allocate %" PRIu64 " bytes (segment %" PRIu64 ") on stream %" PRIu64,
                      a->size, a->alloc_size, a->stream);
  }
  return GM_OK;
}

static __attribute__((noinline)) gm_status_t too_large(rp_policy_t *p, uint64_t orig, gm_err_t *err) {
  p->st.ooms++;
  return gm_err_set(err, GM_ERR_NOMEM, "pytorch: out of memory: tried to allocate %" PRIu64 " bytes, more than any device has", orig);
}

static __attribute__((noinline)) gm_status_t no_host_memory(gm_err_t *err) {
  return gm_err_set(err, GM_ERR_NOMEM, "pytorch: out of host memory");
}

/* torch's round_size: without roundup_power2_divisions (the default) a multiple of 512 at
 * once; with them, pt_conf.c's. */
static inline uint64_t round_size(const rp_policy_t *p, uint64_t size) {
  if (!p->round_plain) return rp_pytorch_round_size(&p->conf, size);
  return size < PT_MIN_BLOCK ? PT_MIN_BLOCK : (size + PT_MIN_BLOCK - 1) & ~(PT_MIN_BLOCK - 1);
}

/* malloc; inline in its two entries (the address API's pt_malloc, the handle API's
 * pt_malloc_h), with the bins' operations inline in it: one call per request. */
static inline __attribute__((always_inline)) gm_status_t malloc_block(rp_policy_t *p, uint64_t orig, uint64_t stream,
                                                                      pt_block_t **out, gm_err_t *err) {
  if (orig > RP_REQUEST_MAX) return too_large(p, orig, err); /* round_size would wrap around */
  params_t a = {0};
  a.size = round_size(p, orig);
  a.stream = stream;
  a.pool = &p->pools[a.size > PT_SMALL_SIZE]; /* an index, not a branch: sizes mix both pools */
  if (!get_free_block(p, &a)) {
    gm_status_t s = malloc_miss(p, &a, err);
    if (s != GM_OK) return s;
  }
  pt_block_t *b = a.block;
  if (!should_split(p, b, a.size)) {
    if (a.in_tree) free_remove(p, b);
  } else {
    pt_block_t *nb = block_new(p);
    if (!nb) return no_host_memory(err);
    nb->addr = b->addr;
    nb->size = a.size;
    nb->stream = b->stream;
    nb->seg = b->seg; /* pt_block_attach, with b's copies of the segment's flags (no seg load) */
    nb->small = b->small;
    nb->expandable = b->expandable;
    nb->prev = b->prev;
    pt_block_t **link = nb->prev ? &nb->prev->next : &p->sink; /* a select, not a branch */
    *link = nb;
    nb->next = b;
    b->prev = nb;
    b->addr += a.size;
    b->size -= a.size;
    if (remainder_to_pool(p, b, a.in_tree) != 0) return no_host_memory(err);
    p->st.splits++;
    b = nb;
  }
  b->allocated = 1;
  b->where = PT_IN_LIVE;
  b->seq = ++p->seq;
  p->allocated_bytes += b->size;
  *out = b;
  return GM_OK;
}

gm_status_t pt_malloc(rp_policy_t *p, uint64_t orig, uint64_t stream, pt_block_t **out, gm_err_t *err) {
  return malloc_block(p, orig, stream, out, err);
}

gm_status_t pt_malloc_h(rp_policy_t *p, uint64_t size, uint64_t stream, uint64_t *addr, uint64_t *handle, gm_err_t *err) {
  pt_block_t *b = NULL;
  gm_status_t s = malloc_block(p, size, stream, &b, err);
  if (s != GM_OK) return s;
  *addr = b->addr;
  *handle = (uint64_t)(uintptr_t)b;
  return GM_OK;
}

/* The neighbour a segment's end has: never free, so a merge test needs no NULL test. */
static const pt_block_t segment_end = {.allocated = 1};

/* free_block: merge with free neighbours (previous first, then next: try_merge_blocks), back
 * into the pool. b is live, hence mapped: a neighbour merges when it is free and mapped. Both
 * tests are computed before any branch (the next block is free in most frees of a trace, the
 * previous in few). Most frees merge: the first neighbour absorbed (slot) is left in the free
 * set and the merged block (same stream, larger size) takes its place there
 * (pt_bins_replace: its tree node when the order allows) instead of a remove and an insert. */
static inline __attribute__((always_inline)) gm_status_t free_block(rp_policy_t *p, pt_block_t *b, gm_err_t *err) {
  b->in_hash = 0; /* the address API took its node out of p->live already */
  b->allocated = 0;
  b->where = PT_IN_NONE;
  p->allocated_bytes -= b->size;
  pt_block_t *pv = b->prev, *nx = b->next, *slot = NULL;
  const pt_block_t *end = &segment_end;
  __asm__("" : "+r"(end)); /* its fields unknown to GCC: no branch on NULL to fold them in */
  const pt_block_t *pq = pv ? pv : end, *nq = nx ? nx : end;
  unsigned pf = (pq->allocated == 0) & (pq->mapped == 1), nf = (nq->allocated == 0) & (nq->mapped == 1);
  p->st.merges += pf + nf;
  if (pf) {
    b->addr = pv->addr;
    b->size += pv->size;
    b->prev = pv->prev;
    if (b->prev) b->prev->next = b;
    slot = pv;
  }
  if (nf) {
    b->size += nx->size;
    b->next = nx->next;
    if (b->next) b->next->prev = b;
    if (slot) {
      free_remove(p, nx);
      block_put(p, nx);
    } else {
      slot = nx;
    }
  }
  if (slot) {
    pt_pool_t *pool = pt_pool_of(p, slot);
    if (pt_bins_replace(&pool->free, slot, b) != 0) return no_host_memory(err);
    b->gc_base = pool->get_free_calls; /* as pt_free_insert */
    b->where = PT_IN_FREE;
    slot->where = PT_IN_NONE;
    block_put(p, slot);
    return GM_OK;
  }
  if (free_insert(p, b) != 0) return no_host_memory(err);
  return GM_OK;
}

gm_status_t pt_free(rp_policy_t *p, pt_block_t *b, gm_err_t *err) { return free_block(p, b, err); }

gm_status_t pt_free_h(rp_policy_t *p, uint64_t handle, gm_err_t *err) {
  pt_block_t *b = (pt_block_t *)(uintptr_t)handle;
  if (!b || b->where != PT_IN_LIVE || b->in_hash)
    return gm_err_set(err, GM_ERR_INVAL, "pytorch: free of a block that is not live by handle");
  return free_block(p, b, err);
}
