/* pt_oom.c: the pytorch policy's account of an out-of-memory (rp_oom_report_t).
 *
 * Called just after pt_malloc failed: its OOM path has already released every cached block
 * it could (release_cached_blocks), so the free blocks left are the ones torch's OOM message
 * calls "reserved but unallocated": pieces of segments that still hold a live block (a
 * segment is given back only whole), or expandable pages. Each is put under the first rule
 * of get_free_block that kept it from this request: another stream (blocks never move
 * between streams), the other size class (the small pool serves only requests of <= 1 MiB),
 * smaller than the rounded request, or large enough but not split for it (an oversize block
 * above max_split_size for a request below it, or a block max_non_split_rounding larger than
 * a request above it). Reads the pools; changes nothing. */
#include <stdio.h>

#include "replay/policies/pytorch/pt_internal.h"

static void classify(const rp_policy_t *p, const pt_block_t *b, uint64_t rs, uint64_t stream,
                     int pool_small, rp_oom_report_t *o) {
  o->free_bytes += b->size;
  o->free_blocks++;
  if (b->size > o->largest_free) o->largest_free = b->size;
  uint64_t msplit = p->conf.max_split_size;
  if (b->stream != stream) o->other_stream_bytes += b->size;
  else if ((int)b->small != pool_small) o->other_pool_bytes += b->size;
  else if (b->size < rs) {
    o->too_small_bytes += b->size;
    if (b->size > o->largest_too_small) o->largest_too_small = b->size;
  } else if ((rs < msplit && b->size >= msplit) ||
             (rs >= msplit && b->size >= rs + p->conf.max_non_split_rounding))
    o->not_splittable_bytes += b->size;
}

int pt_oom_report(const rp_policy_t *p, uint64_t size, uint64_t stream, rp_oom_report_t *o) {
  uint64_t rs = size > RP_REQUEST_MAX ? size : rp_pytorch_round_size(&p->conf, size);
  int small = rs <= PT_SMALL_SIZE;
  o->rounded_size = rs;
  o->segment_size = size > RP_REQUEST_MAX ? 0 : rp_pytorch_allocation_size(&p->conf, rs);
  o->allocated_bytes = p->allocated_bytes;
  for (int i = 0; i < 2; i++) {
    for (pt_block_t *b = pt_bins_first(&p->pools[i].free); b; b = pt_bins_next(&p->pools[i].free, b))
      classify(p, b, rs, stream, small, o);
  }
  if (p->has_limit) {
    o->limit_bytes = p->allowed_max;
    o->at_limit = p->total_allocated_memory + o->segment_size > p->allowed_max;
  }
  if (p->conf.expandable_segments)
    snprintf(o->note, sizeof o->note, "expandable segments: a segment grows by mapping pages; "
             "free pages are unmapped on OOM, so what stays free is inside mapped pages");
  return 1;
}
