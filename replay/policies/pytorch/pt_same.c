/* pt_same.c: when two PYTORCH_CUDA_ALLOC_CONF settings replay a trace alike (same_run).
 *
 * A sweep replays one trace under a dozen settings, and on most traces several of them never
 * reach the case their key is about: max_split_size_mb above every segment, a memory fraction
 * far above the peak, roundup intervals no request falls in. Such a setting's replay is the
 * default's, call for call. This file proves it from what the other replay showed
 * (rp_run_facts_t), so gpureplay copies the result instead of replaying.
 *
 * The proof is by induction over the requests: both replays start empty and take the same
 * requests; while their states are equal, a decision can differ only at a check that reads a
 * key the two settings hold differently (pt_alloc.c, pt_conf.c), and each rule below shows
 * that no such check changes an outcome on the run that was seen:
 *
 *  - roundup_power2_divisions: read by round_size only. Equal (d <= 1 reads as off) on every
 *    interval a request of the run fell in: the same block sizes (rp_pytorch_same_rounding).
 *  - max_split_size_mb, max_non_split_rounding_mb: read by get_free_block, should_split,
 *    release_available and the OOM report. With max_split_size above the largest segment, no
 *    block and no rounded request (each fits in its block) reaches it: both get_free_block
 *    rules are false, should_split's size test is true, release_available finds no block to
 *    free (it runs only after a failed cudaMalloc anyway) and max_non_split_rounding is read
 *    only past max_split_size. Dormant in both settings, they may differ.
 *  - per_process_memory_fraction, garbage_collection_threshold: the limit is read by
 *    alloc_block, the threshold by garbage_collect (which returns at once while reserved is
 *    at most the threshold; its ages count only for itself). A clean run (no failed or retried
 *    allocation) whose peak is within a setting's limit and threshold never met them. One more
 *    case: a limit met while max_split_size is in force can be passed by release_available
 *    freeing oversize blocks and the retry succeeding, unseen by the clean flag: there the run
 *    must also have freed no segment.
 *  - large_segment_size_mb (segment sizes) and expandable_segments (a different allocator
 *    path): must be equal, and expandable segments are never compared: equal settings only.
 *
 * A run that failed or retried an allocation proves nothing but equal settings. Tests:
 * replay/engine/same_run_test.cc replays both settings of random pairs on random and
 * adversarial traces and checks that same_run's 1 always means equal results. */
#include <string.h>

#include "replay/policies/pytorch/pt_internal.h"

/* Does the fraction (and the GC under it) never act on a clean run of peak bytes? */
static int limit_dormant(const rp_pytorch_conf_t *c, const rp_run_facts_t *f) {
  if (c->memory_fraction >= 1.0) return 1;
  uint64_t allowed = rp_pytorch_allowed_max(c, f->total_memory);
  if (f->peak_reserved > allowed) return 0;
  return c->gc_threshold <= 0.0 || f->peak_reserved <= rp_pytorch_gc_threshold(c, allowed);
}

/* The limit and GC as pt_create and garbage_collect read them: equal effect. */
static int same_limit(const rp_pytorch_conf_t *a, const rp_pytorch_conf_t *b, uint64_t total) {
  int la = a->memory_fraction < 1.0, lb = b->memory_fraction < 1.0;
  if (la != lb) return 0;
  if (!la) return 1; /* no limit: the GC threshold is never read */
  uint64_t ma = rp_pytorch_allowed_max(a, total), mb = rp_pytorch_allowed_max(b, total);
  int ga = a->gc_threshold > 0.0, gb = b->gc_threshold > 0.0;
  if (ma != mb || ga != gb) return 0;
  return !ga || rp_pytorch_gc_threshold(a, ma) == rp_pytorch_gc_threshold(b, mb);
}

static int same_conf(const rp_pytorch_conf_t *a, const rp_pytorch_conf_t *b) {
  return a->max_split_size == b->max_split_size && a->max_non_split_rounding == b->max_non_split_rounding &&
         a->large_segment_size == b->large_segment_size &&
         !memcmp(a->roundup_divisions, b->roundup_divisions, sizeof a->roundup_divisions) &&
         a->gc_threshold == b->gc_threshold && a->memory_fraction == b->memory_fraction &&
         a->expandable_segments == b->expandable_segments;
}

int pt_same_run(const char *conf_a, const char *conf_b, const rp_run_facts_t *f) {
  rp_pytorch_conf_t a, b;
  gm_err_t err;
  rp_pytorch_conf_default(&a);
  rp_pytorch_conf_default(&b);
  if (rp_pytorch_conf_parse(conf_a, &a, &err) != GM_OK || rp_pytorch_conf_parse(conf_b, &b, &err) != GM_OK) return 0;
  /* pt_create refuses a fraction without the device's total memory */
  if ((a.memory_fraction < 1.0 || b.memory_fraction < 1.0) && f->total_memory == 0) return 0;
  if (same_conf(&a, &b)) return 1;
  if (!f->clean || a.expandable_segments || b.expandable_segments) return 0;
  if (a.large_segment_size != b.large_segment_size) return 0;
  if (!rp_pytorch_same_rounding(&a, &b, f->request_log2)) return 0;
  int split_dormant = a.max_split_size > f->largest_alloc && b.max_split_size > f->largest_alloc;
  if (!split_dormant && (a.max_split_size != b.max_split_size || a.max_non_split_rounding != b.max_non_split_rounding))
    return 0;
  if (same_limit(&a, &b, f->total_memory)) return 1;
  if (!limit_dormant(&a, f) || !limit_dormant(&b, f)) return 0;
  return split_dormant || f->segment_frees == 0;
}
