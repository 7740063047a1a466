/* pt_check.c: the invariant walker behind rp_pytorch_ops.check (tests call it after every op).
 *
 * Checked: every block is in exactly the structure its state says (live: found in the slabs,
 * and for the address API in the live hash; free tree,
 * unmapped tree); blocks of a segment tile it exactly, in address order, with consistent
 * prev/next links; no two neighbours are both free with the same mapped state (they would
 * have merged); free/unmapped trees hold only their pool's blocks; reserved bytes (cudaMalloc
 * segments plus mapped expandable pages) equal total_allocated_memory; allocated bytes equal
 * the sum of live block sizes; the block count matches. O(n); for tests. */
#include "replay/policies/pytorch/pt_internal.h"

#define FAIL(...) return gm_err_set(err, GM_ERR_CORRUPT, "pytorch: check: " __VA_ARGS__)

static gm_status_t check_segment(const rp_policy_t *p, const pt_block_t *head, uint64_t *nblocks, uint64_t *mapped,
                                 gm_err_t *err) {
  const pt_seg_t *seg = head->seg;
  if (head->addr != seg->base) FAIL("segment 0x%" PRIx64 " head block at 0x%" PRIx64, seg->base, head->addr);
  uint64_t end = seg->base;
  for (const pt_block_t *b = head; b; b = b->next) {
    (*nblocks)++;
    if (b->seg != seg) FAIL("block 0x%" PRIx64 " linked into another segment", b->addr);
    if (b->small != seg->is_small || b->expandable != seg->expandable) FAIL("block 0x%" PRIx64 " kind flags stale", b->addr);
    if (b->addr != end) FAIL("gap or overlap at 0x%" PRIx64 " (expected 0x%" PRIx64 ")", b->addr, end);
    if (b->size == 0) FAIL("empty block at 0x%" PRIx64, b->addr);
    if (b->next && b->next->prev != b) FAIL("broken prev link after 0x%" PRIx64, b->addr);
    if (b->stream != seg->stream) FAIL("block 0x%" PRIx64 " on another stream than its segment", b->addr);
    int want = b->allocated ? PT_IN_LIVE : b->mapped ? PT_IN_FREE : PT_IN_UNMAPPED;
    if (b->where != want) FAIL("block 0x%" PRIx64 " is in structure %d, expected %d", b->addr, b->where, want);
    if (!b->mapped && b->allocated) FAIL("allocated block 0x%" PRIx64 " is unmapped", b->addr);
    if (!seg->expandable && !b->mapped) FAIL("unmapped block in a cudaMalloc segment");
    if (b->next && !b->allocated && !b->next->allocated && b->mapped == b->next->mapped)
      FAIL("free neighbours 0x%" PRIx64 " and 0x%" PRIx64 " not merged", b->addr, b->next->addr);
    if (seg->expandable && !b->mapped && ((b->addr - seg->base) % seg->page || b->size % seg->page))
      FAIL("unmapped range 0x%" PRIx64 " not page aligned", b->addr);
    if (b->mapped) *mapped += b->size;
    end += b->size;
  }
  if (end != seg->base + seg->size) FAIL("segment 0x%" PRIx64 " blocks end at 0x%" PRIx64 ", not at its end", seg->base, end);
  return GM_OK;
}

gm_status_t pt_check(const rp_policy_t *cp, gm_err_t *err) {
  rp_policy_t *p = (rp_policy_t *)cp; /* the RB/hash iteration macros take non-const heads */
  uint64_t live = 0, live_bytes = 0, in_trees = 0;
  pt_block_t *b;
  pt_addr_t *n, *tmp;
  uint64_t hashed = 0, spare = 0, slabs = 0;
  for (pt_slab_t *sl = p->slabs; sl; sl = sl->next, slabs++)
    for (int i = 0; i < 256; i++) {
      b = &sl->blocks[i];
      if (b->where == PT_IN_NONE) {
        if (b->allocated) FAIL("a block in no structure is allocated 0x%" PRIx64, b->addr);
        continue;
      }
      if (b->where != PT_IN_LIVE) continue;
      if (!b->allocated) FAIL("live block 0x%" PRIx64 " not allocated", b->addr);
      if (b->seq == 0 || b->seq > p->seq) FAIL("live block 0x%" PRIx64 " has no malloc number", b->addr);
      live++;
      live_bytes += b->size;
      hashed += b->in_hash;
    }
  for (b = p->spare; b; b = b->link) spare++;
  if (spare + p->n_blocks != 256 * slabs) FAIL("%" PRIu64 " spare and %" PRIu64 " used blocks in %" PRIu64 " slabs", spare, p->n_blocks, slabs);
  HASH_ITER(hh, p->live, n, tmp) {
    b = n->b;
    if (b->where != PT_IN_LIVE || !b->allocated || !b->in_hash) FAIL("live hash holds a free block 0x%" PRIx64, b->addr);
    if (n->addr != b->addr) FAIL("live hash node 0x%" PRIx64 " names block 0x%" PRIx64, n->addr, b->addr);
  }
  if (HASH_COUNT(p->live) != hashed) FAIL("%u blocks in the live hash, %" PRIu64 " marked so", HASH_COUNT(p->live), hashed);
  if (live_bytes != p->allocated_bytes) FAIL("allocated bytes %" PRIu64 " != sum of live blocks %" PRIu64, p->allocated_bytes, live_bytes);
  for (int i = 0; i < 2; i++) {
    const pt_block_t *prev = NULL;
    uint64_t in_pool = 0;
    const char *why = pt_bins_verify(&p->pools[i].free);
    if (why) FAIL("free set: %s", why);
    for (b = pt_bins_first(&p->pools[i].free); b; b = pt_bins_next(&p->pools[i].free, b)) {
      if (b->where != PT_IN_FREE || b->allocated || !b->mapped) FAIL("free set holds a block in state %d", b->where);
      if (b->seg->is_small != (i == 0)) FAIL("block 0x%" PRIx64 " in the wrong pool", b->addr);
      if (prev && pt_cmp_size(prev, b) >= 0) FAIL("free set out of order");
      if (b->grp->stream != b->stream || b->bin != pt_bins_class(b->size))
        FAIL("free block 0x%" PRIx64 " in the wrong group or bin", b->addr);
      in_pool++;
      prev = b;
      in_trees++;
    }
    if (in_pool != p->pools[i].free.n) FAIL("free set counts %" PRIu64 " blocks, holds %" PRIu64, p->pools[i].free.n, in_pool);
    RB_FOREACH(b, pt_unmapped_tree, &p->pools[i].unmapped) {
      if (b->where != PT_IN_UNMAPPED || b->mapped || !b->seg->expandable) FAIL("unmapped tree holds a block in state %d", b->where);
      if (b->seg->is_small != (i == 0)) FAIL("unmapped block 0x%" PRIx64 " in the wrong pool", b->addr);
      in_trees++;
    }
  }
  if (live + in_trees != p->n_blocks) FAIL("%" PRIu64 " blocks exist, %" PRIu64 " are indexed", p->n_blocks, live + in_trees);
  /* walk every segment from its head: find heads through the structures */
  uint64_t walked = 0, reserved = 0, nsegs = 0;
  for (pt_seg_t *s = p->segs; s; s = s->lnext) nsegs++;
  if (nsegs != p->n_segs) FAIL("segment list length %" PRIu64 " != %" PRIu64, nsegs, p->n_segs);
  uint64_t heads = 0;
#define VISIT(blk)                                                                        \
  if (!(blk)->prev) {                                                                     \
    uint64_t mapped = 0;                                                                  \
    gm_status_t s_ = check_segment(p, (blk), &walked, &mapped, err);                     \
    if (s_ != GM_OK) return s_;                                                           \
    if ((blk)->seg->expandable && mapped != (blk)->seg->mapped) FAIL("expandable mapped bytes disagree"); \
    reserved += (blk)->seg->expandable ? mapped : (blk)->seg->size;                      \
    heads++;                                                                              \
  }
  for (pt_slab_t *sl = p->slabs; sl; sl = sl->next)
    for (int i = 0; i < 256; i++) {
      b = &sl->blocks[i];
      if (b->where == PT_IN_LIVE) { VISIT(b) }
    }
  for (int i = 0; i < 2; i++) {
    for (b = pt_bins_first(&p->pools[i].free); b; b = pt_bins_next(&p->pools[i].free, b)) { VISIT(b) }
    RB_FOREACH(b, pt_unmapped_tree, &p->pools[i].unmapped) { VISIT(b) }
  }
#undef VISIT
  if (heads != p->n_segs) FAIL("%" PRIu64 " segment heads for %" PRIu64 " segments", heads, p->n_segs);
  if (walked != p->n_blocks) FAIL("segments hold %" PRIu64 " blocks, %" PRIu64 " exist", walked, p->n_blocks);
  if (reserved != p->total_allocated_memory) FAIL("reserved %" PRIu64 " != total_allocated_memory %" PRIu64, reserved, p->total_allocated_memory);
  return GM_OK;
}
