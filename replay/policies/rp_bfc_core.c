/* rp_bfc_core.c: TensorFlow/XLA's BFC allocator, rule by rule.
 *
 * Model (openxla/xla xla/tsl/framework/bfc_allocator.cc):
 *  - Requests are rounded up to a multiple of 256 B (RoundedBytes). A 0-byte request, which
 *    TF answers with nullptr, is served as 256 B here so the replay keeps one address per
 *    live block.
 *  - Memory comes in regions from the driver (Extend). Each region starts as one free chunk;
 *    chunks are split and merged only inside their region, neighbours linked by address.
 *  - Free chunks sit in 21 bins; bin i holds sizes in [256 << i, 256 << (i+1)), the last bin
 *    everything >= 256 MiB. Each bin is ordered by (size, address). The search starts at the
 *    bin of the rounded size and takes the first chunk with size >= rounded, going up the
 *    bins: globally the smallest fitting chunk, lowest address on ties. (Here the bins are
 *    finer, rp_sizeclass.h's classes, which split TF's bins and give the same order and so
 *    the same chunk: a bitmap of the non-empty classes finds the next one.)
 *  - Split (ShouldSplitChunk): when chunk >= 2 * rounded, or chunk - rounded >=
 *    max_internal_fragmentation_bytes (128 MiB unless fragmentation_fraction is set). The
 *    allocation keeps the low end; the remainder becomes a free chunk.
 *  - Free: the chunk merges with a free next neighbour, then a free previous one.
 *  - Extend(rounded): available = memory_limit - pool_bytes rounded down to 256; fail if
 *    rounded > available. Double curr_region_allocation_bytes_ while it is < rounded. Ask the
 *    driver for min(curr, available); on failure back off by a factor 0.9 (computed in
 *    float, as TF does: size_t * float), rounded up to 256, strictly decreasing, until the
 *    driver says yes or the size drops under rounded. If curr was not doubled for this
 *    request it doubles after a successful extension. curr starts at RoundedBytes(min(limit,
 *    2 MiB)) with allow_growth, else RoundedBytes(limit) (one region of the whole limit).
 *  - OOM path (AllocateRawInternal): find; else Extend and find; else, with
 *    garbage_collection, give every region with no chunk in use back to the driver
 *    (DeallocateFreeRegions, only if limit - pool + their bytes >= rounded) and Extend and
 *    find again; else OOM. TF's AllocateRawInternalWithRetry then waits up to 10 s for
 *    other threads to free memory; a sequential replay has no such frees, so that wait can
 *    never succeed and is not modelled.
 *  - Overflow guards TF lacks: curr_region_allocation_bytes_ stops doubling at 2^63 (TF's
 *    size_t would wrap to 0 and spin in Extend's doubling loop, after some 43 extensions
 *    from 2 MiB), and a request that would need it doubled past that fails to extend.
 * VMM sub-allocator (opts.sub_allocator = RP_BFC_SUB_VMM, rp_bfc_vmm.h), BFC's side
 * (coalesce_regions_ = SupportsCoalescing() = true):
 *  - Extend counts bytes_received (the padded size) into pool_bytes, so the pool can pass
 *    the limit by up to a granule; available = memory_limit_ - pool_bytes is size_t
 *    arithmetic and then wraps to a huge value: from there on the limit no longer binds and
 *    only the address reservation (2 x the limit) and the device stop the growth. Kept.
 *  - AddOrExtendAllocationRegion: a new region that starts where an existing one ends
 *    extends it; its chunk is linked after that region's last chunk and merged with it when
 *    that chunk is free (TryToCoalesce in Extend). Regions are kept sorted by address.
 *  - DeallocateRegions frees a region through the sub-allocator's Free and takes its size
 *    off pool_bytes whether or not the sub-allocator really unmapped it.
 * Streams: TF's BFC is stream-agnostic (one compute stream per device); the stream of a
 * request is ignored.
 * Structures: each size class a libbsd red-black tree keyed (size, address) (mostly of one
 * chunk: the empty and one-chunk trees take a short way), a bitmap of the non-empty ones;
 * chunks in use are in a uthash table by address; chunk records are recycled through a free
 * list. */
#include "replay/policies/rp_bfc_core.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

/* libbsd's RB_GENERATE_STATIC marks its functions __unused, which libbsd leaves undefined
 * (a glibc struct has a member of that name); define it only for the tree macros, last. */
#ifndef __unused
#define __unused __attribute__((__unused__))
#endif
#include <bsd/sys/tree.h>

#include "replay/policies/rp_bfc_vmm.h"
#include "replay/policies/rp_sizeclass.h"

typedef struct chunk chunk_t;
typedef struct region region_t;

struct chunk {
  uint64_t addr, size;
  chunk_t *prev, *next; /* address neighbours inside the region */
  region_t *region;
  int in_use;
  int in_hash; /* in use and found by address (taken by rp_bfc_alloc, not rp_bfc_alloc_h) */
  int bin; /* its size class (rp_sizeclass.h), -1 when not in a bin */
  RB_ENTRY(chunk) link;
  UT_hash_handle hh;
};

struct region {
  uint64_t addr, size;
  chunk_t *first;
  region_t *prev, *next; /* creation order; by address with the VMM sub-allocator, as TF's
                            region vector (the order only decides which region goes to
                            the driver first in garbage collection) */
};

static int chunk_cmp(const chunk_t *a, const chunk_t *b) {
  if (a->size != b->size) return a->size < b->size ? -1 : 1;
  if (a->addr != b->addr) return a->addr < b->addr ? -1 : 1;
  return 0;
}

RB_HEAD(bin_tree, chunk);
RB_GENERATE_STATIC(bin_tree, chunk, link, chunk_cmp)

struct rp_bfc {
  rp_driver_t drv;
  rp_bfc_opts_t opts;
  uint64_t max_frag;
  uint64_t curr_region_bytes; /* curr_region_allocation_bytes_ */
  uint64_t pool_bytes;        /* stats_.pool_bytes */
  struct bin_tree bins[RP_SC_N];  /* by size class: finer than TF's bins, same order */
  rp_sc_map_t bin_map;           /* which classes are non-empty */
  uint64_t nbinned;
  chunk_t *in_use; /* uthash by addr */
  region_t *regions, *regions_tail;
  int nregions;
  chunk_t *spare; /* recycled chunk records, linked by next */
  rp_policy_stats_t st;
  int vmm;         /* sub-allocator is GpuVirtualMemAllocator: coalescing regions */
  rp_bfc_vmm_t v;
};

static uint64_t rounded_bytes(uint64_t n) {
  return (n + RP_BFC_MIN_ALLOC - 1) / RP_BFC_MIN_ALLOC * RP_BFC_MIN_ALLOC;
}

int rp_bfc_bin_for_size(uint64_t size) {
  uint64_t v = (size < RP_BFC_MIN_ALLOC ? RP_BFC_MIN_ALLOC : size) >> 8;
  int b = 63 - __builtin_clzll(v);
  return b < RP_BFC_NUM_BINS - 1 ? b : RP_BFC_NUM_BINS - 1;
}

static chunk_t *chunk_new(rp_bfc_t *b) {
  chunk_t *c = b->spare;
  if (c)
    b->spare = c->next;
  else
    c = malloc(sizeof *c);
  if (c) memset(c, 0, sizeof *c);
  return c;
}

static void chunk_recycle(rp_bfc_t *b, chunk_t *c) {
  c->next = b->spare;
  b->spare = c;
}

/* The class of a chunk size: 256-byte units (kMinAllocationSize). */
static inline uint32_t size_class(uint64_t size) { return rp_sc_class(size, 8); }

static void bin_insert(rp_bfc_t *b, chunk_t *c) {
  uint32_t k = size_class(c->size);
  struct bin_tree *t = &b->bins[k];
  c->bin = (int)k;
  if (RB_EMPTY(t)) { /* the state RB_INSERT leaves: a black root */
    RB_LEFT(c, link) = RB_RIGHT(c, link) = RB_PARENT(c, link) = NULL;
    RB_COLOR(c, link) = RB_BLACK;
    RB_ROOT(t) = c;
    rp_sc_set(&b->bin_map, k);
  } else {
    RB_INSERT(bin_tree, t, c);
  }
  b->nbinned++;
}

static void bin_remove(rp_bfc_t *b, chunk_t *c) {
  struct bin_tree *t = &b->bins[c->bin];
  if (RB_ROOT(t) == c && !RB_LEFT(c, link) && !RB_RIGHT(c, link)) RB_ROOT(t) = NULL;
  else RB_REMOVE(bin_tree, t, c);
  if (RB_EMPTY(t)) rp_sc_clear(&b->bin_map, (uint32_t)c->bin);
  b->nbinned--;
  c->bin = -1;
}

gm_status_t rp_bfc_new(const rp_driver_t *drv, const rp_bfc_opts_t *opts, rp_bfc_t **out, gm_err_t *err) {
  rp_bfc_t *b = calloc(1, sizeof *b);
  if (!b) return gm_err_set(err, GM_ERR_NOMEM, "bfc: out of host memory");
  b->drv = *drv;
  b->opts = *opts;
  b->max_frag = opts->max_internal_frag ? opts->max_internal_frag : RP_BFC_MAX_FRAG;
  uint64_t lim = opts->memory_limit;
  b->curr_region_bytes =
      rounded_bytes(opts->allow_growth ? (lim < RP_BFC_GROWTH_START ? lim : RP_BFC_GROWTH_START) : lim);
  for (int i = 0; i < RP_SC_N; i++) RB_INIT(&b->bins[i]);
  if (opts->sub_allocator == RP_BFC_SUB_VMM) {
    uint64_t va = opts->vmm_va_bytes;
    if (va == 0) va = lim > UINT64_MAX / 2 ? UINT64_MAX / 2 : lim * 2; /* total_bytes * 2 */
    gm_status_t st = rp_bfc_vmm_init(&b->v, drv, va, err);
    if (st < 0) {
      free(b);
      return gm_err_wrap(err, "bfc");
    }
    b->vmm = 1;
  }
  *out = b;
  return GM_OK;
}

static void drop_region_chunks(rp_bfc_t *b, region_t *r) {
  chunk_t *c = r->first;
  while (c) {
    chunk_t *n = c->next;
    if (c->in_use) {
      if (c->in_hash) HASH_DEL(b->in_use, c);
      b->st.allocated_bytes -= c->size;
    } else {
      bin_remove(b, c);
    }
    chunk_recycle(b, c);
    c = n;
  }
  r->first = NULL;
}

static void region_unlink(rp_bfc_t *b, region_t *r) {
  if (r->prev) r->prev->next = r->next; else b->regions = r->next;
  if (r->next) r->next->prev = r->prev; else b->regions_tail = r->prev;
  b->nregions--;
  b->pool_bytes -= r->size;
  free(r);
}

void rp_bfc_delete(rp_bfc_t *b) {
  if (!b) return;
  while (b->regions) {
    region_t *r = b->regions;
    drop_region_chunks(b, r);
    region_unlink(b, r);
  }
  while (b->spare) {
    chunk_t *c = b->spare;
    b->spare = c->next;
    free(c);
  }
  rp_bfc_vmm_fini(&b->v);
  free(b);
}

/* FindChunkPtr: best fit from the request's bin upward, split by TF's rule. */
static chunk_t *find_chunk(rp_bfc_t *b, uint64_t rounded) {
  chunk_t key;
  key.size = rounded;
  key.addr = 0;
  /* the first chunk >= (rounded, 0): in rounded's class, else the least of the next class */
  uint32_t k = size_class(rounded);
  chunk_t *c = rp_sc_has(&b->bin_map, k) ? RB_NFIND(bin_tree, &b->bins[k], &key) : NULL;
  if (!c) {
    k = rp_sc_next(&b->bin_map, k + 1);
    if (k < RP_SC_N) c = RB_MIN(bin_tree, &b->bins[k]);
  }
  if (c) {
    bin_remove(b, c);
    if (c->size >= rounded * 2 || c->size - rounded >= b->max_frag) {
      chunk_t *rest = chunk_new(b);
      if (!rest) {
        bin_insert(b, c);
        return NULL;
      }
      rest->addr = c->addr + rounded;
      rest->size = c->size - rounded;
      rest->region = c->region;
      rest->prev = c;
      rest->next = c->next;
      if (c->next) c->next->prev = rest;
      c->next = rest;
      c->size = rounded;
      bin_insert(b, rest);
      b->st.splits++;
    }
    c->in_use = 1; /* rp_bfc_alloc adds it to the address table, rp_bfc_alloc_h does not */
    b->st.allocated_bytes += c->size;
    return c;
  }
  return NULL;
}

/* The sub-allocator's Alloc: DeviceMemAllocator hands out exactly `bytes`, the VMM one pads
 * them to its granularity. GM_ERR_NOMEM is TF's nullptr. */
static gm_status_t sub_alloc(rp_bfc_t *b, uint64_t bytes, uint64_t *addr, uint64_t *received, gm_err_t *err) {
  if (b->vmm) return rp_bfc_vmm_alloc(&b->v, &b->drv, bytes, addr, received, err);
  *received = bytes;
  return b->drv.mem_alloc(b->drv.ctx, bytes, addr);
}

/* The region that ends at addr (AddOrExtendAllocationRegion's preceding region), or NULL. */
static region_t *region_ending_at(rp_bfc_t *b, uint64_t addr) {
  for (region_t *r = b->regions_tail; r; r = r->prev)
    if (r->addr + r->size == addr) return r;
  return NULL;
}

/* Coalescing Extend: the new bytes join region r; their chunk follows r's last chunk and
 * merges with it when it is free (TryToCoalesce). */
static int extend_region(rp_bfc_t *b, region_t *r, uint64_t addr, uint64_t size) {
  chunk_t *c = chunk_new(b);
  if (!c) return -1;
  chunk_t *last = r->first;
  while (last->next) last = last->next;
  r->size += size;
  if (!last->in_use) {
    bin_remove(b, last);
    last->size += size;
    chunk_recycle(b, c);
    bin_insert(b, last);
    b->st.merges++;
    return 1;
  }
  c->addr = addr;
  c->size = size;
  c->region = r;
  c->prev = last;
  last->next = c;
  bin_insert(b, c);
  return 1;
}

/* A new region in the list: at the tail (creation order), or by address with the VMM
 * sub-allocator (TF's sorted region vector). */
static void region_link(rp_bfc_t *b, region_t *r) {
  region_t *after = b->regions_tail;
  if (b->vmm)
    while (after && after->addr > r->addr) after = after->prev;
  r->prev = after;
  r->next = after ? after->next : b->regions;
  if (r->next) r->next->prev = r; else b->regions_tail = r;
  if (after) after->next = r; else b->regions = r;
  b->nregions++;
}

/* Extend: one more region. Returns 1 (extended), 0 (cannot), <0 (driver failure). */
static int extend(rp_bfc_t *b, uint64_t rounded, gm_err_t *err) {
  uint64_t available;
  if (b->vmm) /* TF's size_t subtraction: wraps once the padded pool passed the limit */
    available = b->opts.memory_limit - b->pool_bytes;
  else
    available = b->opts.memory_limit > b->pool_bytes ? b->opts.memory_limit - b->pool_bytes : 0;
  available = available / RP_BFC_MIN_ALLOC * RP_BFC_MIN_ALLOC;
  if (rounded > available) return 0;
  int increased = 0;
  while (rounded > b->curr_region_bytes) {
    if (b->curr_region_bytes > UINT64_MAX / 2) return 0; /* see "Overflow guards" */
    b->curr_region_bytes *= 2;
    increased = 1;
  }
  uint64_t bytes = b->curr_region_bytes < available ? b->curr_region_bytes : available;
  uint64_t addr = 0, received = 0;
  gm_status_t st = sub_alloc(b, bytes, &addr, &received, err);
  while (st == GM_ERR_NOMEM) {
    /* kBackpedalFactor is a float: the product is computed in single precision. */
    float f = (float)bytes * 0.9f;
    uint64_t back = rounded_bytes((uint64_t)f);
    if (back >= bytes) back = bytes - RP_BFC_MIN_ALLOC;
    bytes = back;
    if (bytes < rounded) return 0;
    st = sub_alloc(b, bytes, &addr, &received, err);
  }
  if (st < 0) return b->vmm ? st : gm_err_wrap(err, "bfc: device allocation of %" PRIu64 " bytes", bytes);
  if (!increased && b->curr_region_bytes <= UINT64_MAX / 2) b->curr_region_bytes *= 2;
  b->pool_bytes += received;
  if (b->vmm) {
    region_t *grow = region_ending_at(b, addr);
    if (grow) {
      if (extend_region(b, grow, addr, received) < 0) return gm_err_set(err, GM_ERR_NOMEM, "bfc: out of host memory");
      return 1;
    }
  }
  region_t *r = calloc(1, sizeof *r);
  chunk_t *c = chunk_new(b);
  if (!r || !c) {
    free(r);
    if (c) chunk_recycle(b, c);
    return gm_err_set(err, GM_ERR_NOMEM, "bfc: out of host memory");
  }
  r->addr = addr;
  r->size = received;
  r->first = c;
  region_link(b, r);
  c->addr = addr;
  c->size = received;
  c->region = r;
  bin_insert(b, c);
  return 1;
}

/* DeallocateFreeRegions. Returns 1 if regions went back to the driver. */
static int gc_free_regions(rp_bfc_t *b, uint64_t rounded, gm_err_t *err) {
  if (!b->opts.garbage_collection) return 0;
  uint64_t free_bytes = 0;
  for (region_t *r = b->regions; r; r = r->next)
    if (!r->first->in_use && !r->first->next) free_bytes += r->size;
  if (free_bytes == 0) return 0;
  if (rounded > b->opts.memory_limit - b->pool_bytes + free_bytes) return 0;
  region_t *r = b->regions;
  while (r) {
    region_t *n = r->next;
    /* A region with nothing in use is one free chunk: free chunks are always merged. */
    if (!r->first->in_use && !r->first->next) {
      gm_status_t st = b->vmm ? rp_bfc_vmm_free(&b->v, &b->drv, r->addr, r->size, err)
                              : b->drv.mem_free(b->drv.ctx, r->addr, r->size);
      if (st < 0) return gm_err_wrap(err, "bfc: device free of region 0x%" PRIx64, r->addr);
      drop_region_chunks(b, r);
      region_unlink(b, r);
    }
    r = n;
  }
  return 1;
}

static gm_status_t bfc_take(rp_bfc_t *b, uint64_t size, chunk_t **out, gm_err_t *err) {
  if (size > UINT64_MAX - RP_BFC_MIN_ALLOC) size = UINT64_MAX - RP_BFC_MIN_ALLOC; /* fails below */
  uint64_t rounded = rounded_bytes(size ? size : 1);
  chunk_t *c = find_chunk(b, rounded);
  if (!c) {
    int x = extend(b, rounded, err);
    if (x < 0) return err ? err->status : GM_ERR_CUDA;
    if (x > 0) c = find_chunk(b, rounded);
  }
  if (!c) {
    int g = gc_free_regions(b, rounded, err);
    if (g < 0) return err ? err->status : GM_ERR_CUDA;
    if (g > 0) {
      b->st.alloc_retries++;
      int x = extend(b, rounded, err);
      if (x < 0) return err ? err->status : GM_ERR_CUDA;
      if (x > 0) c = find_chunk(b, rounded);
    }
  }
  if (!c) {
    b->st.ooms++;
    return gm_err_set(err, GM_ERR_NOMEM,
                      "out of memory: %" PRIu64 " bytes (rounded %" PRIu64 "), pool %" PRIu64
                      " of limit %" PRIu64 " bytes",
                      size, rounded, b->pool_bytes, b->opts.memory_limit);
  }
  *out = c;
  return GM_OK;
}

gm_status_t rp_bfc_alloc(rp_bfc_t *b, uint64_t size, uint64_t *addr, gm_err_t *err) {
  chunk_t *c = NULL;
  gm_status_t st = bfc_take(b, size, &c, err);
  if (st != GM_OK) return st;
  HASH_ADD(hh, b->in_use, addr, sizeof(uint64_t), c);
  c->in_hash = 1;
  *addr = c->addr;
  return GM_OK;
}

/* The handle is the chunk itself: the engine keeps it, so its free costs no address lookup. */
gm_status_t rp_bfc_alloc_h(rp_bfc_t *b, uint64_t size, uint64_t *addr, uint64_t *handle, gm_err_t *err) {
  chunk_t *c = NULL;
  gm_status_t st = bfc_take(b, size, &c, err);
  if (st != GM_OK) return st;
  *addr = c->addr;
  *handle = (uint64_t)(uintptr_t)c;
  return GM_OK;
}

uint64_t rp_bfc_handle_addr(const rp_bfc_t *b, uint64_t handle) {
  (void)b;
  return ((const chunk_t *)(uintptr_t)handle)->addr;
}

/* FreeAndMaybeCoalesce of an in-use chunk. */
static void bfc_release(rp_bfc_t *b, chunk_t *c) {
  c->in_use = 0;
  b->st.allocated_bytes -= c->size;
  chunk_t *n = c->next;
  if (n && !n->in_use) {
    bin_remove(b, n);
    c->size += n->size;
    c->next = n->next;
    if (n->next) n->next->prev = c;
    chunk_recycle(b, n);
    b->st.merges++;
  }
  chunk_t *p = c->prev;
  if (p && !p->in_use) {
    bin_remove(b, p);
    p->size += c->size;
    p->next = c->next;
    if (c->next) c->next->prev = p;
    chunk_recycle(b, c);
    c = p;
    b->st.merges++;
  }
  bin_insert(b, c);
}

gm_status_t rp_bfc_free(rp_bfc_t *b, uint64_t addr, gm_err_t *err) {
  chunk_t *c = NULL;
  HASH_FIND(hh, b->in_use, &addr, sizeof(uint64_t), c);
  if (!c) return gm_err_set(err, GM_ERR_INVAL, "free of unknown address 0x%" PRIx64, addr);
  HASH_DEL(b->in_use, c);
  c->in_hash = 0;
  bfc_release(b, c);
  return GM_OK;
}

gm_status_t rp_bfc_free_h(rp_bfc_t *b, uint64_t handle, gm_err_t *err) {
  chunk_t *c = (chunk_t *)(uintptr_t)handle;
  if (!c || !c->in_use || c->in_hash)
    return gm_err_set(err, GM_ERR_INVAL, "bfc: free of a chunk that is not live by handle");
  bfc_release(b, c);
  return GM_OK;
}

gm_status_t rp_bfc_release_all(rp_bfc_t *b, gm_err_t *err) {
  while (b->regions) {
    region_t *r = b->regions;
    if (!b->vmm) {
      gm_status_t st = b->drv.mem_free(b->drv.ctx, r->addr, r->size);
      if (st < 0) return gm_err_wrap(err, "bfc: device free of region 0x%" PRIx64, r->addr);
    }
    drop_region_chunks(b, r);
    region_unlink(b, r);
  }
  /* VMM: the sub-allocator's destructor unmaps every mapping, refused frees' included. */
  if (b->vmm) return rp_bfc_vmm_release(&b->v, &b->drv, err);
  return GM_OK;
}

const uint64_t *rp_bfc_allocated_bytes(const rp_bfc_t *b) { return &b->st.allocated_bytes; }

void rp_bfc_stats(const rp_bfc_t *b, rp_policy_stats_t *out) {
  *out = b->st;
  out->cached_bytes = b->pool_bytes - b->st.allocated_bytes;
}

/* After a failed request: every free chunk (BFC has no streams and no size classes; a free
 * chunk at least the rounded size would have been taken, so what is left is too small), and
 * the memory limit, which a request fails against when the pool cannot be extended under it. */
void rp_bfc_oom_report(const rp_bfc_t *b, uint64_t size, rp_oom_report_t *o) {
  uint64_t rs = size > RP_REQUEST_MAX ? size : rounded_bytes(size);
  o->rounded_size = rs;
  o->allocated_bytes = b->st.allocated_bytes;
  for (const region_t *r = b->regions; r; r = r->next)
    for (const chunk_t *c = r->first; c; c = c->next) {
      if (c->in_use) continue;
      o->free_bytes += c->size;
      o->free_blocks++;
      if (c->size > o->largest_free) o->largest_free = c->size;
      if (c->size < rs) {
        o->too_small_bytes += c->size;
        if (c->size > o->largest_too_small) o->largest_too_small = c->size;
      }
    }
  o->limit_bytes = b->opts.memory_limit;
  o->at_limit = b->pool_bytes + rs > b->opts.memory_limit;
}

uint64_t rp_bfc_pool_bytes(const rp_bfc_t *b) { return b->pool_bytes; }
uint64_t rp_bfc_next_region_bytes(const rp_bfc_t *b) { return b->curr_region_bytes; }
int rp_bfc_region_count(const rp_bfc_t *b) { return b->nregions; }
uint64_t rp_bfc_vmm_mapped_bytes(const rp_bfc_t *b) { return b->v.mapped; }
uint64_t rp_bfc_vmm_next_offset(const rp_bfc_t *b) { return b->v.next_off; }
uint64_t rp_bfc_vmm_va_size(const rp_bfc_t *b) { return b->v.va_size; }
uint64_t rp_bfc_vmm_va_ooms(const rp_bfc_t *b) { return b->v.va_ooms; }
uint64_t rp_bfc_vmm_refused_frees(const rp_bfc_t *b) { return b->v.refused_frees; }

#define CORRUPT(...) gm_err_set(err, GM_ERR_CORRUPT, "bfc: " __VA_ARGS__)

gm_status_t rp_bfc_check(const rp_bfc_t *b, gm_err_t *err) {
  uint64_t pool = 0, used = 0, nfree = 0, nhashed = 0;
  int nreg = 0;
  for (const region_t *r = b->regions; r; r = r->next) {
    nreg++;
    pool += r->size;
    if (b->vmm) {
      if (r->prev && r->prev->addr + r->prev->size > r->addr) return CORRUPT("region 0x%" PRIx64 " out of address order", r->addr);
      if (r->prev && r->prev->addr + r->prev->size == r->addr) return CORRUPT("adjacent regions not coalesced at 0x%" PRIx64, r->addr);
      if (!rp_bfc_vmm_tiles(&b->v, r->addr, r->size)) return CORRUPT("region 0x%" PRIx64 " is not a run of live mappings", r->addr);
    }
    uint64_t at = r->addr;
    const chunk_t *prev = NULL;
    for (const chunk_t *c = r->first; c; prev = c, c = c->next) {
      if (c->addr != at) return CORRUPT("chunk 0x%" PRIx64 " not contiguous (expected 0x%" PRIx64 ")", c->addr, at);
      if (c->prev != prev) return CORRUPT("chunk 0x%" PRIx64 " has a wrong prev link", c->addr);
      if (c->region != r) return CORRUPT("chunk 0x%" PRIx64 " points at the wrong region", c->addr);
      if (c->size == 0 || c->size % RP_BFC_MIN_ALLOC) return CORRUPT("chunk 0x%" PRIx64 " size %" PRIu64, c->addr, c->size);
      at += c->size;
      if (c->in_use) {
        const chunk_t *h = NULL;
        HASH_FIND(hh, b->in_use, &c->addr, sizeof(uint64_t), h);
        if (c->in_hash && h != c) return CORRUPT("chunk in use 0x%" PRIx64 " missing from the address table", c->addr);
        if (!c->in_hash && h) return CORRUPT("chunk 0x%" PRIx64 " taken by handle is in the address table", c->addr);
        nhashed += c->in_hash;
        if (c->bin != -1) return CORRUPT("chunk in use 0x%" PRIx64 " is in a bin", c->addr);
        used += c->size;
      } else {
        if (prev && !prev->in_use) return CORRUPT("free neighbours not merged at 0x%" PRIx64, c->addr);
        if (c->bin != (int)size_class(c->size)) return CORRUPT("chunk 0x%" PRIx64 " in class %d, size says %d", c->addr, c->bin, (int)size_class(c->size));
        if (RB_FIND(bin_tree, (struct bin_tree *)&b->bins[c->bin], (chunk_t *)c) != c)
          return CORRUPT("free chunk 0x%" PRIx64 " not found in its bin", c->addr);
        nfree++;
      }
    }
    if (at != r->addr + r->size) return CORRUPT("region 0x%" PRIx64 " chunks cover %" PRIu64 " of %" PRIu64 " bytes", r->addr, at - r->addr, r->size);
  }
  uint64_t binned = b->nbinned;
  for (uint32_t k = 0; k < RP_SC_N; k++)
    if (rp_sc_has(&b->bin_map, k) == RB_EMPTY(&b->bins[k])) return CORRUPT("class %u's bit says %s", k, RB_EMPTY(&b->bins[k]) ? "non-empty" : "empty");
  if (binned != nfree) return CORRUPT("%" PRIu64 " chunks in bins, %" PRIu64 " free in regions", binned, nfree);
  if (HASH_COUNT(b->in_use) != nhashed) return CORRUPT("address table holds %u chunks, regions %" PRIu64, HASH_COUNT(b->in_use), nhashed);
  if (nreg != b->nregions) return CORRUPT("region count %d, list %d", b->nregions, nreg);
  if (pool != b->pool_bytes) return CORRUPT("pool_bytes %" PRIu64 ", regions sum %" PRIu64, b->pool_bytes, pool);
  if (used != b->st.allocated_bytes) return CORRUPT("allocated_bytes %" PRIu64 ", chunks in use sum %" PRIu64, b->st.allocated_bytes, used);
  if (b->vmm) { /* the padded pool may pass the limit (see the header); the mappings hold it */
    if (pool > b->v.mapped) return CORRUPT("pool %" PRIu64 " over the mapped %" PRIu64 " bytes", pool, b->v.mapped);
    return rp_bfc_vmm_check(&b->v, err);
  }
  if (pool > b->opts.memory_limit) return CORRUPT("pool %" PRIu64 " over the limit %" PRIu64, pool, b->opts.memory_limit);
  return GM_OK;
}
