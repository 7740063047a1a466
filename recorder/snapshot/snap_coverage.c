/* snap_coverage.c: does a PyTorch history cover the whole run? Marks the trace (SPEC.md §3.4).
 *
 * PyTorch's memory history is a ring of max_entries entries per device that keeps the newest:
 * on a long job it holds only the tail of the run. Two signs say so. (1) Memory alive before
 * its first entry (snap_state.c synthesises it as the initial state: a free whose alloc is
 * gone, a segment or live block no entry mentions): the history started after the run did,
 * because the ring filled or recording began late. (2) A device's history holds max_entries
 * entries, when the ring's size is known (gpurec sets it: GPUMEM_TORCH_MAX_ENTRIES, 1000000 by
 * default): the ring filled even if what fell out left nothing alive. The window starts at the
 * first entry after the synthesised state; what was alive then is the synthesised state. */
#include <stdlib.h>
#include <string.h>

#include "recorder/snapshot/snap_internal.h"

void snap_coverage_of(const snap_pass_t *ps, uint64_t ring, gmt_coverage_t *c) {
  memset(c, 0, sizeof *c);
  c->history_entries = ps->max_dev_entries;
  c->max_entries = ring;
  if (ps->synthetic) c->why |= GMT_COV_LATE_START;
  if (ring && ps->max_dev_entries >= ring) c->why |= GMT_COV_HISTORY_RING;
  if (!c->why) return;
  c->partial = 1;
  for (size_t k = 0; k < ps->synthetic && k < ps->n; k++) {
    const gmt_event_t *e = &ps->evs[k]->ev;
    switch (e->kind) {
      case GMT_EV_ALLOC: c->alive_bytes += e->size; c->alive_count++; break;
      case GMT_EV_SEGMENT_ALLOC:
      case GMT_EV_VMM_MAP: c->reserved_bytes += e->size; break;
      default: break;
    }
  }
  c->has_window = 1;
  c->from_event = ps->synthetic;
  c->from_ns = ps->synthetic < ps->n ? ps->evs[ps->synthetic]->ev.ts_ns : 0;
}

gm_status_t snap_coverage_mark(gmt_header_t *h, const gmt_coverage_t *c, gm_err_t *err) {
  gmt_coverage_t merged = *c, prov;
  gmt_coverage(h, NULL, &prov); /* what the provenance header (a CUPTI trace) already said */
  if (prov.partial) {
    merged.partial = 1;
    merged.why |= prov.why;
  }
  return gmt_coverage_mark(h, &merged, err);
}
