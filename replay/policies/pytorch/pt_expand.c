/* pt_expand.c: expandable segments (expandable_segments:True) as torch 2.11 does them.
 *
 * One VA reservation per (stream, pool) that grows: a segment reserves
 * page * ceil((total_memory + total_memory/8) / page) bytes of address space (page = 2 MiB for
 * the small pool, large_segment_size for the large pool) and maps pages on demand. Unmapped
 * ranges are blocks with mapped = 0 kept in the pool's (stream, address) tree. Growth
 * (try_allocate_expandable_block) looks for the lowest-address unmapped range of the stream
 * (preferring a free block right before it) whose free + unmapped run is large enough, and maps
 * whole pages there; a miss reserves a new segment. Pages are given back only by
 * release_cached_blocks (empty_cache / OOM retry): whole free pages inside free blocks are
 * unmapped, and a segment left with nothing mapped releases its reservation.
 *
 * Driver calls: va_reserve when a segment is created, one map per map_block (SEGMENT_MAP), one
 * unmap per unmap_block (SEGMENT_UNMAP), va_release when the segment goes. */
#include "replay/policies/pytorch/pt_internal.h"

static int allocatable(const pt_block_t *b) { return b && !b->allocated; }

/* Enough free or unmapped bytes in a row starting at b? */
static int has_space(const pt_block_t *b, uint64_t size) {
  uint64_t bytes = 0;
  while (bytes < size && allocatable(b)) {
    bytes += b->size;
    b = b->next;
  }
  return bytes >= size;
}

/* Bytes of address space one segment of the pool reserves: whole pages covering 1 1/8 of
 * the device's memory (torch: prop.totalGlobalMem + prop.totalGlobalMem / 8). */
static uint64_t segment_bytes(const rp_policy_t *p, const pt_pool_t *pool) {
  uint64_t page = pool->is_small ? PT_SMALL_BUFFER : p->conf.large_segment_size;
  uint64_t total = p->drv.total_memory;
  return (total + total / 8 + page - 1) / page * page;
}

/* A request larger than a whole segment (1 1/8 of the device) fits in none: the search is
 * skipped (it could only fail, and a trace of many such requests would make it quadratic);
 * torch then reserves one more segment and fails to map it all, and so do we. */
static int find_expandable_block(rp_policy_t *p, pt_pool_t *pool, uint64_t stream, uint64_t size,
                                 pt_block_t **out, gm_err_t *err) {
  pt_block_t key;
  key.addr = 0, key.size = 0, key.stream = stream;
  for (pt_block_t *c = size > segment_bytes(p, pool) ? NULL : RB_NFIND(pt_unmapped_tree, &pool->unmapped, &key);
       c && c->stream == stream; c = RB_NEXT(pt_unmapped_tree, &pool->unmapped, c)) {
    pt_block_t *cand = allocatable(c->prev) ? c->prev : c;
    if (has_space(cand, size)) {
      *out = cand;
      return 1;
    }
  }
  uint64_t page = pool->is_small ? PT_SMALL_BUFFER : p->conf.large_segment_size;
  uint64_t pages = segment_bytes(p, pool) / page;
  uint64_t base = 0;
  gm_status_t s = p->drv.va_reserve(p->drv.ctx, page * pages, &base);
  if (s != GM_OK) return gm_err_set(err, s, "pytorch: cuMemAddressReserve of %" PRIu64 " bytes: %s", page * pages, gm_status_str(s));
  pt_seg_t *seg = pt_seg_new(p);
  pt_block_t *b = seg ? pt_block_new(p) : NULL;
  if (!b) return gm_err_set(err, GM_ERR_NOMEM, "pytorch: out of host memory");
  seg->base = base;
  seg->size = page * pages;
  seg->stream = stream;
  seg->page = page;
  seg->is_small = (uint8_t)pool->is_small;
  seg->expandable = 1;
  b->addr = base;
  b->size = seg->size;
  b->stream = stream;
  pt_block_attach(b, seg);
  b->mapped = 0;
  pt_unmapped_insert(p, b);
  *out = b;
  return 1;
}

/* map_block: map the pages covering the first `size` bytes of the unmapped block b; the rest
 * stays unmapped after it; b merges with free mapped neighbours and goes into the pool. */
static int map_block(rp_policy_t *p, pt_block_t *b, uint64_t size, gm_err_t *err) {
  pt_seg_t *seg = b->seg;
  uint64_t off = b->addr - seg->base;
  uint64_t begin = off / seg->page, end = (off + size + seg->page - 1) / seg->page;
  uint64_t bytes = (end - begin) * seg->page;
  gm_status_t s = p->drv.map(p->drv.ctx, seg->base + begin * seg->page, bytes);
  if (s == GM_ERR_NOMEM) return 0;
  if (s != GM_OK) return gm_err_set(err, s, "pytorch: mapping %" PRIu64 " bytes: %s", bytes, gm_status_str(s));
  pt_unmapped_remove(p, b);
  b->mapped = 1;
  if (bytes < b->size) {
    pt_block_t *rest = pt_block_new(p);
    if (!rest) return gm_err_set(err, GM_ERR_NOMEM, "pytorch: out of host memory");
    rest->addr = b->addr + bytes;
    rest->size = b->size - bytes;
    rest->stream = b->stream;
    pt_block_attach(rest, seg);
    rest->mapped = 0;
    rest->prev = b;
    rest->next = b->next;
    if (b->next) b->next->prev = rest;
    b->next = rest;
    pt_unmapped_insert(p, rest);
    b->size = bytes;
  }
  pt_try_merge(p, b, b->prev);
  pt_try_merge(p, b, b->next);
  if (pt_free_insert(p, b) != 0) return gm_err_set(err, GM_ERR_NOMEM, "pytorch: out of host memory");
  p->total_allocated_memory += bytes;
  seg->mapped += bytes;
  return 1;
}

int pt_expand_alloc(rp_policy_t *p, pt_pool_t *pool, uint64_t stream, uint64_t size, pt_block_t **out, gm_err_t *err) {
  pt_block_t *c = NULL;
  int r = find_expandable_block(p, pool, stream, size, &c, err);
  if (r <= 0) return r;
  if (!c->mapped) {
    r = map_block(p, c, c->size < size ? c->size : size, err);
    if (r <= 0) return r;
  }
  /* A driver that mapped a whole segment and the request still does not fit (a capacity set
   * above the device's total memory): out of memory, never a walk past the segment's end. */
  if (!has_space(c, size)) return 0;
  while (c->size < size) {
    /* c is free and mapped, followed by an unmapped block: map some of it; they merge */
    pt_block_t *n = c->next;
    if (!n) /* has_space promised the room: a broken invariant, not a crash */
      return gm_err_set(err, GM_ERR_CORRUPT, "pytorch: expandable segment ends before %" PRIu64 " bytes fit", size);
    uint64_t want = size - c->size;
    r = map_block(p, n, want < n->size ? want : n->size, err);
    if (r <= 0) return r;
    c = n;
  }
  pt_free_remove(p, c);
  *out = c;
  return 1;
}

/* unmap_block: unmap the whole pages inside the free block b (begin rounded up, end down). */
int pt_expand_unmap(rp_policy_t *p, pt_block_t *b, gm_err_t *err) {
  pt_seg_t *seg = b->seg;
  uint64_t off = b->addr - seg->base;
  uint64_t begin = (off + seg->page - 1) / seg->page, end = (off + b->size) / seg->page;
  if (begin >= end) return 0;
  uint64_t ustart = seg->base + begin * seg->page, usize = (end - begin) * seg->page;
  gm_status_t s = p->drv.unmap(p->drv.ctx, ustart, usize);
  if (s != GM_OK) return gm_err_set(err, s, "pytorch: unmapping %" PRIu64 " bytes: %s", usize, gm_status_str(s));
  pt_free_remove(p, b);
  uint64_t before = ustart - b->addr, after = b->size - before - usize;
  if (before > 0) {
    pt_block_t *f = pt_block_new(p);
    if (!f) return gm_err_set(err, GM_ERR_NOMEM, "pytorch: out of host memory");
    f->addr = b->addr;
    f->size = before;
    f->stream = b->stream;
    pt_block_attach(f, seg);
    f->prev = b->prev;
    if (f->prev) f->prev->next = f;
    f->next = b;
    b->prev = f;
    if (pt_free_insert(p, f) != 0) return gm_err_set(err, GM_ERR_NOMEM, "pytorch: out of host memory");
  }
  if (after > 0) {
    pt_block_t *f = pt_block_new(p);
    if (!f) return gm_err_set(err, GM_ERR_NOMEM, "pytorch: out of host memory");
    f->addr = ustart + usize;
    f->size = after;
    f->stream = b->stream;
    pt_block_attach(f, seg);
    f->next = b->next;
    if (f->next) f->next->prev = f;
    f->prev = b;
    b->next = f;
    if (pt_free_insert(p, f) != 0) return gm_err_set(err, GM_ERR_NOMEM, "pytorch: out of host memory");
  }
  b->addr = ustart;
  b->size = usize;
  b->mapped = 0;
  pt_try_merge(p, b, b->prev);
  pt_try_merge(p, b, b->next);
  pt_unmapped_insert(p, b);
  p->total_allocated_memory -= usize;
  seg->mapped -= usize;
  return 1;
}

/* release_expandable_segment: b is the segment's only block and nothing is mapped. */
int pt_expand_release_segment(rp_policy_t *p, pt_block_t *b, gm_err_t *err) {
  pt_seg_t *seg = b->seg;
  gm_status_t s = p->drv.va_release(p->drv.ctx, seg->base, seg->size);
  if (s != GM_OK) return gm_err_set(err, s, "pytorch: releasing %" PRIu64 " bytes of address space: %s", seg->size, gm_status_str(s));
  pt_unmapped_remove(p, b);
  pt_seg_put(p, seg);
  pt_block_put(p, b);
  return 1;
}
