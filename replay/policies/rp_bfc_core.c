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
 * list (rp_bfc_state.h). Its figures, OOM report and invariant walker: rp_bfc_inspect.c. */
#include "replay/policies/rp_bfc_core.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "replay/policies/rp_bfc_state.h"

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

static void bin_insert(rp_bfc_t *b, chunk_t *c) {
  uint32_t k = bfc_size_class(c->size);
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
      bfc_rounded_bytes(opts->allow_growth ? (lim < RP_BFC_GROWTH_START ? lim : RP_BFC_GROWTH_START) : lim);
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
  uint32_t k = bfc_size_class(rounded);
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
    uint64_t back = bfc_rounded_bytes((uint64_t)f);
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
  uint64_t rounded = bfc_rounded_bytes(size ? size : 1);
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
