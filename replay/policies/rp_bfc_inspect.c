/* rp_bfc_inspect.c: what can be read of a BFC core (rp_bfc_core.c) without changing it: its
 * figures, the OOM report after a failed request, and the invariant walker the tests run after
 * every operation (regions tiled by their chunks, free neighbours merged, every free chunk in
 * the bin of its size class, the counters equal to the sums). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "replay/policies/rp_bfc_state.h"

const uint64_t *rp_bfc_allocated_bytes(const rp_bfc_t *b) { return &b->st.allocated_bytes; }

void rp_bfc_stats(const rp_bfc_t *b, rp_policy_stats_t *out) {
  *out = b->st;
  out->cached_bytes = b->pool_bytes - b->st.allocated_bytes;
}

/* After a failed request: every free chunk (BFC has no streams and no size classes; a free
 * chunk at least the rounded size would have been taken, so what is left is too small), and
 * the memory limit, which a request fails against when the pool cannot be extended under it. */
void rp_bfc_oom_report(const rp_bfc_t *b, uint64_t size, rp_oom_report_t *o) {
  uint64_t rs = size > RP_REQUEST_MAX ? size : bfc_rounded_bytes(size);
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
        if (c->bin != (int)bfc_size_class(c->size)) return CORRUPT("chunk 0x%" PRIx64 " in class %d, size says %d", c->addr, c->bin, (int)bfc_size_class(c->size));
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
