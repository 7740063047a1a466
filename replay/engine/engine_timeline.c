/* engine_timeline.c: the downsampled memory timeline and the latency histogram.
 *
 * Timeline: RP_TIMELINE_MAX buckets of width 2^shift ns from the first timestamp. When an
 * event falls past the last bucket, adjacent pairs merge and the width doubles, so memory is
 * fixed, the trace's duration need not be known in advance, and each bucket holds the
 * maximum of each series over its span: the reserved peak can never be averaged away.
 *
 * Histogram: 8 buckets per power of two; bucket b covers [2^(b/8) ... ) roughly, enough for
 * p50/p99 of driver call latencies within 9%. */
#include <math.h>
#include <string.h>

#include "replay/engine/engine_internal.h"

void rp_timeline_init(rp_timeline_t *t) {
  memset(t, 0, sizeof *t);
  for (size_t i = 0; i < RP_TIMELINE_MAX; i++) t->b[i].ts = UINT64_MAX;
}

static void merge_pairs(rp_timeline_t *t) {
  size_t m = (t->n + 1) / 2;
  for (size_t j = 0; j < m; j++) {
    rp_tl_bucket_t x = t->b[2 * j];
    size_t k = 2 * j + 1;
    if (k < t->n && t->b[k].ts != UINT64_MAX) {
      const rp_tl_bucket_t *y = &t->b[k];
      if (x.ts == UINT64_MAX || y->reserved > x.reserved) {
        x.ts = y->ts;
        x.reserved = y->reserved;
      }
      if (y->allocated > x.allocated) x.allocated = y->allocated;
      if (y->requested > x.requested) x.requested = y->requested;
    }
    t->b[j] = x;
  }
  for (size_t j = m; j < t->n; j++) {
    t->b[j].ts = UINT64_MAX;
    t->b[j].reserved = t->b[j].allocated = t->b[j].requested = 0;
  }
  t->n = m;
  t->shift++;
}

/* The first sample, or one past the last bucket (the buckets merge first): the rare cases of
 * rp_timeline_add (engine_internal.h). */
void rp_timeline_add_slow(rp_timeline_t *t, uint64_t ts, uint64_t reserved, uint64_t allocated,
                          uint64_t requested) {
  if (!t->started) {
    t->started = 1;
    t->t0 = ts;
  }
  uint64_t rel = ts > t->t0 ? ts - t->t0 : 0; /* out-of-order stamps land in the first bucket */
  uint64_t idx = rel >> t->shift;
  while (idx >= RP_TIMELINE_MAX) {
    merge_pairs(t);
    idx >>= 1;
  }
  rp_timeline_add(t, ts, reserved, allocated, requested); /* now in range */
}

size_t rp_timeline_export(const rp_timeline_t *t, uint64_t *ts, uint64_t *reserved,
                          uint64_t *allocated, uint64_t *requested) {
  size_t k = 0;
  for (size_t i = 0; i < t->n; i++) {
    if (t->b[i].ts == UINT64_MAX) continue;
    ts[k] = t->b[i].ts;
    reserved[k] = t->b[i].reserved;
    allocated[k] = t->b[i].allocated;
    requested[k] = t->b[i].requested;
    k++;
  }
  return k;
}

/* Bucket of a latency: 8 * floor(log2 ns) + the next 3 bits of the mantissa. */
static unsigned hist_bucket(uint64_t ns) {
  if (ns < 8) return (unsigned)ns;
  unsigned lg = 63u - (unsigned)__builtin_clzll(ns);
  unsigned sub = (unsigned)((ns >> (lg - 3)) & 7u);
  unsigned b = 8u * lg + sub - 16u; /* lg >= 3: 8*3 - 16 = 8 follows the exact 0..7 */
  return b < RP_HIST_BUCKETS ? b : RP_HIST_BUCKETS - 1;
}

/* Upper edge (exclusive) of bucket b. */
static uint64_t hist_edge(unsigned b) {
  if (b < 8) return b + 1;
  unsigned k = b + 16u, lg = k / 8u, sub = k % 8u;
  return ((8ull + sub + 1) << (lg - 3));
}

void rp_hist_add(rp_hist_t *h, uint64_t ns) {
  h->bucket[hist_bucket(ns)]++;
  h->count++;
}

uint64_t rp_hist_quantile(const rp_hist_t *h, double q) {
  if (h->count == 0) return 0;
  uint64_t rank = (uint64_t)ceil(q * (double)h->count);
  if (rank == 0) rank = 1;
  uint64_t seen = 0;
  for (unsigned b = 0; b < RP_HIST_BUCKETS; b++) {
    seen += h->bucket[b];
    if (seen >= rank) return hist_edge(b);
  }
  return hist_edge(RP_HIST_BUCKETS - 1);
}
