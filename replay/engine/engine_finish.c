/* engine_finish.c: the end of a replay (rp_engine_finish): the blocks still live released
 * through the policy and the external ones through the driver, the pending peak snapshot and
 * timeline closed, and everything the run measured copied into its rp_result_t (with the
 * backend's call latencies where it measures them). Once per run: nothing here is on the
 * per-event path of engine.c. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/engine/engine_internal.h"

static void fill_latency(rp_engine_t *e, rp_result_t *r) {
  if (!e->b->latency) return;
  const rp_backend_latency_t *l = e->b->latency(e->b);
  if (!l) return;
  r->has_latency = 1;
  r->alloc_p50_ns = rp_hist_quantile(&l->alloc, 0.50);
  r->alloc_p99_ns = rp_hist_quantile(&l->alloc, 0.99);
  r->free_p50_ns = rp_hist_quantile(&l->free, 0.50);
  r->free_p99_ns = rp_hist_quantile(&l->free, 0.99);
  r->alloc_samples = l->alloc.count;
  r->free_samples = l->free.count;
}

gm_status_t rp_engine_finish(rp_engine_t *e, rp_result_t *r, gm_err_t *err) {
  memset(r, 0, sizeof *r);
  if (e->t_start == 0) e->t_start = rp_engine_now_s();
  double secs = rp_engine_now_s() - e->t_start;
  rp_policy_stats_t s;
  e->ops->stats(e->pol, &s);
  snprintf(r->policy, sizeof r->policy, "%s", e->ops->spec ? e->ops->spec(e->pol) : e->ops->name);
  snprintf(r->backend, sizeof r->backend, "%s", e->b->name);
  r->capacity_bytes = e->opts.capacity;
  r->device = e->device;
  r->events = e->events;
  r->allocs = e->allocs;
  r->frees = e->frees;
  r->empty_caches = e->empty_caches;
  r->peak_reserved_bytes = e->peak_reserved;
  r->peak_allocated_bytes = e->peak_allocated;
  r->peak_requested_bytes = e->peak_requested;
  r->lower_bound_bytes = e->peak_requested;
  r->external_sync = e->external_sync;
  r->external_allocs = e->ext_allocs;
  r->external_frees = e->ext_frees;
  r->external_maps = e->ext_maps;
  r->external_peak_bytes = e->ext_peak;
  r->external_end_bytes = e->ext_live;
  r->peak_reserved_plus_external_bytes = e->peak_total;
  r->peak_requested_plus_external_bytes = e->peak_need;
  r->recorded_failures = e->failures;
  r->recorded_failures_served = e->failures_served;
  /* A free still waiting at the end waited on an event too (its block never came back). */
  r->event_frees = e->event_frees + rp_events_never_freed(e);
  r->event_frees_requested = e->event_frees_requested + rp_events_never_freed(e);
  r->event_timing = e->opts.event_timing;
  r->late_mallocs = e->opts.late_mallocs ? e->opts.late_mallocs : 1;
  if (e->b->capacity_span)
    r->same_capacity_known = e->b->capacity_span(e->b, &r->same_capacity_lo, &r->same_capacity_hi);
  if (e->b->placed) {
    r->placed_known = 1;
    r->placed_segments = e->b->placed(e->b);
  }
  r->first_failure_event = e->ff_event;
  r->first_failure_ts_ns = e->ff_ts;
  r->first_failure_size = e->ff_size;
  r->first_failure_stream = e->ff_stream;
  r->first_failure_callsite = e->ff_callsite;
  r->first_failure_served = e->ff_served;
  r->first_failure_live_bytes = e->ff_live;
  r->first_failure_recorded_reserved_bytes = e->ff_rec_reserved;
  r->recorded_mapped_peak_bytes = e->rec_peak;
  r->recorded_pool_reserved_bytes =
      e->pool_hi ? (e->pool_hi - e->pool_lo + RP_POOL_CHUNK - 1) / RP_POOL_CHUNK * RP_POOL_CHUNK : 0;
  r->first_failure_reserved_bytes = e->ff_reserved;
  r->end_reserved_bytes = e->reserved;
  r->end_allocated_bytes = s.allocated_bytes;
  r->end_requested_bytes = e->requested;
  r->fragmentation_at_peak = e->frag_at_peak;
  /* Time-weighted when the trace has time; otherwise (all timestamps equal) per request. */
  if (e->res_time > 0) r->fragmentation_mean = 1.0 - e->alloc_time / e->res_time;
  else if (e->res_ops > 0) r->fragmentation_mean = 1.0 - e->alloc_ops / e->res_ops;
  r->device_alloc_calls = e->alloc_calls;
  r->device_free_calls = e->free_calls;
  r->va_calls = e->va_calls;
  r->pool_allocs = e->pool_allocs;
  r->pool_trims = e->pool_trims;
  r->driver_nomem = e->driver_nomem;
  r->alloc_retries = s.alloc_retries;
  r->ooms = e->ooms;
  r->splits = s.splits;
  r->merges = s.merges;
  r->first_oom_event = e->first_oom_event;
  r->first_oom_ts_ns = e->first_oom_ts;
  r->first_oom_size = e->oom_size;
  r->first_oom_stream = e->oom_stream;
  r->first_oom_callsite = e->oom_callsite;
  r->first_oom_cause = e->oom_cause;
  r->first_oom_live_bytes = e->oom_live;
  r->first_oom_external_bytes = e->oom_ext;
  r->first_oom_reserved_bytes = e->oom_reserved;
  r->has_oom_report = e->has_oom_report;
  r->oom_report = e->oom_report;
  r->skipped = e->skipped;
  r->driver_used_at_peak = e->driver_used_at_peak;
  r->facts = (rp_run_facts_t){e->drv.total_memory, e->peak_reserved, e->largest_alloc, e->req_log2, e->free_calls,
                              e->ooms == 0 && e->driver_nomem == 0 && s.alloc_retries == 0};
  fill_latency(e, r);
  r->replay_seconds = secs;
  r->events_per_second = secs > 0 ? (double)e->events / secs : 0.0;
  rp_peak_finish(e, e->last_ts);
  if (e->snap) r->peak = *e->snap;
  r->timeline_n = rp_timeline_export(&e->tl, r->tl_ts, r->tl_reserved, r->tl_allocated,
                                     r->tl_requested);
  /* Leave the device as we found it (the cuda backend must not leak between runs). The
   * free calls this makes are counted, as a real program's exit would not make them:
   * report the counts from before. */
  gm_status_t st = e->ops->release_all(e->pol, err);
  if (st != GM_OK) return gm_err_wrap(err, "releasing the policy's memory");
  for (size_t i = 0; i < e->external.cap; i++) {
    rp_map_entry_t *x = &e->external.slots[i];
    if (x->state != 1) continue;
    if ((st = rp_engine_ext_give(e, x, err)) != GM_OK) return gm_err_wrap(err, "releasing external memory");
    x->a = RP_NO_BLOCK;
  }
  return GM_OK;
}
