/* engine.c: the replay engine: trace events in, policy calls out, costs measured.
 *
 * Model: the trace is the request stream of one program (tensor allocs and frees with their
 * exact sizes and streams). Each ALLOC becomes a policy alloc of the same size on the same
 * stream; the policy's block address is remembered under the trace address (rp_map), so the
 * trace's FREE can hand the policy back its own block. Reserved memory is not asked of the
 * policy: the engine sits between the policy and the backend (the counting driver in
 * engine_driver.c) and sums what the policy really took from the device.
 *
 * External memory: with rp_engine_set_external_sync (a `requests` trace:
 * rp_sync_is_external), a synchronous device allocation is a library's own cudaMalloc beside
 * the framework's allocator (cuBLAS workspaces and the like): PyTorch's native allocator would
 * never have seen it, so it is kept in a map of its own and counted apart, and its free is
 * matched there. An allocation flagged GMT_F_EXTERNAL (a torch-history trace: another
 * library's driver call beside PyTorch's history) is external memory whatever the rule.
 *
 * The end of a replay (what is left released, the result filled in) is engine_finish.c.
 *
 * The event loop is engine_loop.c: it replays the plain requests itself and hands every other
 * event to rp_engine_one here.
 *
 * Workload: tens of millions of events; per event one hash lookup and one policy call.
 * Memory: the map follows the live blocks, the timeline is fixed (RP_TIMELINE_MAX buckets),
 * so nothing grows with the trace's length. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "replay/engine/engine_internal.h"

gm_status_t rp_engine_create(const rp_policy_ops_t *ops, const char *conf, rp_backend_t *b,
                             const rp_engine_opts_t *opts, rp_engine_t **out, gm_err_t *err) {
  *out = NULL;
  rp_engine_t *e = calloc(1, sizeof *e);
  if (!e) return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  e->ops = ops;
  e->b = b;
  if (opts) e->opts = *opts;
  else e->opts.device = -1;
  e->device = e->opts.device;
  rp_map_init(&e->blocks);
  rp_map_init(&e->async_sizes);
  rp_map_init(&e->external);
  rp_map_init(&e->pending);
  rp_peak_init(e);
  e->segs_overflow = e->opts.peak_only; /* no segment map, no snapshot (engine_peak.c) */
  e->first_oom_event = -1;
  e->first_oom_ts = -1;
  e->ff_event = -1;
  rp_timeline_init(&e->tl);
  rp_engine_driver_init(e);
  gm_status_t st = e->opts.tap ? e->opts.tap->create(e->opts.tap->ctx, ops, conf ? conf : "", &e->drv, &e->ops,
                                                     &e->pol, err)
                               : ops->create(conf ? conf : "", &e->drv, &e->pol, err);
  if (st != GM_OK) {
    rp_engine_destroy(e);
    return st;
  }
  if (e->ops->allocated_bytes) e->pol_allocated = e->ops->allocated_bytes(e->pol);
  *out = e;
  return GM_OK;
}

void rp_engine_destroy(rp_engine_t *e) {
  if (!e) return;
  if (e->pol) e->ops->destroy(e->pol);
  rp_map_free(&e->blocks);
  if (e->dense_home) {
    *e->dense_home = e->dense;
    rp_addr_ids_table_back(e->ids, e->dense_home);
  }
  rp_map_free(&e->async_sizes);
  rp_map_free(&e->external);
  rp_vmm_free(e->vmm);
  rp_events_free_all(e);
  rp_peak_free(e);
  free(e);
}

uint64_t rp_engine_reserved(const rp_engine_t *e) { return e->reserved; }

uint64_t rp_engine_ooms(const rp_engine_t *e) { return e->ooms; }

gm_status_t rp_engine_set_external_sync(rp_engine_t *e, int on, gm_err_t *err) {
  if (e->events)
    return gm_err_set(err, GM_ERR_INVAL, "external memory must be chosen before the first event");
  e->external_sync = on != 0;
  return GM_OK;
}

gm_status_t rp_engine_use_ids(rp_engine_t *e, const rp_addr_ids_t *ids, gm_err_t *err) {
  if (e->events || e->use_ids)
    return gm_err_set(err, GM_ERR_INVAL, "address numbers must be chosen once, before the first event");
  rp_dense_t *t = rp_addr_ids_table(ids);
  if (!t) return gm_err_set(err, GM_ERR_NOMEM, "out of host memory for the block table (%u addresses)", ids->count);
  e->dense = *t;
  e->dense_home = t;
  e->ids = ids;
  e->use_ids = 1;
  return GM_OK;
}

size_t rp_engine_host_bytes(const rp_engine_t *e) {
  return sizeof *e + rp_map_bytes(&e->blocks) + rp_dense_bytes(&e->dense) + rp_map_bytes(&e->async_sizes) +
         rp_map_bytes(&e->external) + rp_map_bytes(&e->pending) + e->cap_held * 3 * sizeof(uint64_t);
}

/* Engine-side invariants plus the policy's own walk. */
static gm_status_t check_now(rp_engine_t *e, gm_err_t *err) {
  if (e->ops->check) {
    gm_status_t st = e->ops->check(e->pol, err);
    if (st != GM_OK) return st;
  }
  if (e->pol_allocated) { /* the counter read after each request is the one stats reports */
    rp_policy_stats_t s;
    e->ops->stats(e->pol, &s);
    if (s.allocated_bytes != *e->pol_allocated)
      return gm_err_set(err, GM_ERR_CORRUPT, "policy's allocated-bytes counter %" PRIu64 " != its stats %" PRIu64,
                        *e->pol_allocated, s.allocated_bytes);
  }
  if (e->allocated > e->reserved)
    return gm_err_set(err, GM_ERR_CORRUPT, "allocated %" PRIu64 " > reserved %" PRIu64,
                      e->allocated, e->reserved);
  if (e->allocated < e->served)
    return gm_err_set(err, GM_ERR_CORRUPT, "allocated %" PRIu64 " < live requested %" PRIu64,
                      e->allocated, e->served);
  return GM_OK;
}

/* After every request: fold the new state into peaks, the fragmentation integral and the
 * timeline. The reserved peak itself is also tracked per driver call (engine_driver.c). */
static inline void read_allocated(rp_engine_t *e) {
  if (e->pol_allocated) {
    e->allocated = *e->pol_allocated;
  } else {
    rp_policy_stats_t s;
    e->ops->stats(e->pol, &s);
    e->allocated = s.allocated_bytes;
  }
}

/* The reserved peak's part of observe: fragmentation at the peak and the snapshot. Out of
 * line: it does anything only when this op raised the peak, or reserved is at the peak and
 * more is allocated or a snapshot waits (rp_engine_peak_due). */
void rp_engine_observe_peak(rp_engine_t *e, uint64_t ts) {
  if (e->peak_dirty) {
    /* This op raised the reserved peak: fragmentation at the peak starts from its result. */
    e->peak_dirty = 0;
    e->alloc_at_peak = e->allocated;
    e->frag_at_peak = e->reserved ? 1.0 - (double)e->allocated / (double)e->reserved : 0.0;
    if (e->b->driver_used) e->driver_used_at_peak = e->b->driver_used(e->b);
    e->snap_pending = 1;
  } else if (e->reserved == e->peak_reserved && e->allocated > e->alloc_at_peak) {
    /* Still at the peak (a preallocated arena stays there): the peak's fragmentation is
     * what the best use of it wasted, not the first moment's emptiness. */
    e->alloc_at_peak = e->allocated;
    e->frag_at_peak = 1.0 - (double)e->allocated / (double)e->reserved;
    e->snap_pending = 1;
  }
  /* The memory at that moment, for the report (engine_peak.c; paid from a budget). */
  if (e->snap_pending && e->reserved == e->peak_reserved) rp_peak_maybe_snapshot(e, ts);
}

void rp_engine_observe(rp_engine_t *e, uint64_t ts) {
  read_allocated(e);
  if (e->allocated > e->peak_allocated) e->peak_allocated = e->allocated;
  if (e->requested > e->peak_requested) e->peak_requested = e->requested;
  if (e->requested + e->ext_live > e->peak_need) e->peak_need = e->requested + e->ext_live;
  if (rp_engine_peak_due(e, e->reserved, e->allocated)) rp_engine_observe_peak(e, ts);
  /* Mean fragmentation is weighted by bytes and time: 1 - (integral of allocated dt) /
   * (integral of reserved dt), i.e. the share of reserved byte-seconds that held no block.
   * Accumulating the two integrals costs a multiply per request where a per-request ratio
   * would cost a division (the engine's hottest instruction when it did). */
  if (e->have_ts && ts > e->last_ts) {
    double dt = (double)(ts - e->last_ts);
    e->alloc_time += (double)e->last_allocated * dt;
    e->res_time += (double)e->last_reserved * dt;
  }
  if (!e->have_ts || ts > e->last_ts) e->last_ts = ts;
  e->have_ts = 1;
  e->last_allocated = e->allocated;
  e->last_reserved = e->reserved;
  e->alloc_ops += (double)e->allocated; /* the same per request, for traces without time */
  e->res_ops += (double)e->reserved;
  rp_timeline_add(&e->tl, ts, e->reserved, e->allocated, e->requested);
}

/* A failed request; the first is described: the request, what was live, and the policy's
 * own account of its free bytes (asked at once, before the next event changes them). */
void rp_engine_note_oom(rp_engine_t *e, const gmt_event_t *ev, int cause) {
  e->ooms++;
  if (e->first_oom_event >= 0) return;
  e->first_oom_event = (int64_t)e->events;
  e->first_oom_ts = (int64_t)ev->ts_ns;
  e->oom_size = ev->size;
  e->oom_stream = ev->stream;
  e->oom_callsite = ev->callsite;
  e->oom_cause = ev->size > RP_REQUEST_MAX ? RP_OOM_OVERSIZE : cause; /* a served failed request too */
  e->oom_live = e->requested;
  e->oom_ext = e->ext_live;
  e->oom_reserved = e->reserved;
  if (e->oom_cause == RP_OOM_POLICY && e->ops->oom_report) {
    memset(&e->oom_report, 0, sizeof e->oom_report);
    e->has_oom_report = e->ops->oom_report(e->pol, ev->size, ev->stream, &e->oom_report) != 0;
  }
}

static gm_status_t do_free(rp_engine_t *e, rp_map_entry_t *m, gm_err_t *err) {
  gm_status_t st = GM_OK;
  if (m->a != RP_NO_BLOCK) {
    st = rp_pol_free(e, m->a, err);
    e->served -= m->b;
  }
  e->requested -= m->b;
  rp_blocks_remove(e, m);
  return st;
}

static gm_status_t do_alloc(rp_engine_t *e, const gmt_event_t *ev, gm_err_t *err) {
  int was_live = 0;
  rp_map_entry_t *m = rp_blocks_claim(e, ev->addr, &was_live);
  if (!m) return gm_err_set(err, GM_ERR_NOMEM, "out of host memory for the block map");
  return rp_engine_alloc_claimed(e, ev, m, was_live, err);
}

gm_status_t rp_engine_alloc_claimed(rp_engine_t *e, const gmt_event_t *ev, rp_map_entry_t *m, int was_live,
                                    gm_err_t *err) {
  if (was_live) {
    /* The recorder missed a free: treat the new alloc as implying it (the slot stays). */
    e->skipped.alloc_over_live++;
    if (m->a != RP_NO_BLOCK) {
      gm_status_t st = rp_pol_free(e, m->a, err);
      if (st != GM_OK) return st;
      e->served -= m->b;
    }
    e->requested -= m->b;
  }
  if (ev->size > RP_REQUEST_MAX) {
    /* No device has it (a wrapped-around size, a cudaMalloc(-1)): an OOM whatever the policy,
     * and not a live request: counted in the lower bound it would make every figure absurd. */
    e->skipped.oversize++;
    rp_engine_note_oom(e, ev, RP_OOM_OVERSIZE);
    m->a = RP_NO_BLOCK;
    m->b = 0;
    e->allocs++;
    return GM_OK;
  }
  uint64_t addr = 0;
  gm_status_t st = rp_pol_alloc(e, ev->size, ev->stream, &addr, err);
  if (st == GM_ERR_NOMEM && e->n_held) {
    /* Out of memory with blocks held for their stream events (late timing): PyTorch's OOM
     * path synchronizes every event first (release_cached_blocks), then retries. */
    st = rp_events_due(e, 1, err);
    if (st == GM_OK) st = rp_pol_alloc(e, ev->size, ev->stream, &addr, err);
  }
  if (st == GM_ERR_NOMEM) {
    rp_engine_note_oom(e, ev, RP_OOM_POLICY);
    addr = RP_NO_BLOCK; /* its FREE, if the trace has one, is then not an anomaly */
  } else if (st != GM_OK) {
    m->a = RP_NO_BLOCK; /* the replay stops; keep the map consistent anyway */
    m->b = 0;
    return st;
  } else {
    e->served += ev->size;
    const rp_engine_observer_t *o = e->opts.observer;
    if (o && o->served) o->served(o->ctx, ev, rp_pol_addr(e, addr), e->events);
  }
  /* Requested counts what the program asked for, served or not: the lower bound is a
   * property of the trace, the same for every policy and capacity. */
  e->requested += ev->size;
  m->a = addr;
  m->b = ev->size;
  /* The stream a stream-ordered block belongs to: a free on another one waits on events
   * (engine_events.c). */
  m->c = (ev->flags & GMT_F_ASYNC) && ev->stream != GMT_STREAM_NONE ? (uint32_t)ev->stream + 1u : 0;
  e->allocs++;
  return GM_OK;
}

int rp_sync_is_external(unsigned capture_mode, int trace_has_async_alloc) {
  return capture_mode == GMT_CAPTURE_REQUESTS && trace_has_async_alloc;
}

/* External memory still occupies the device: it is taken from the backend directly (not
 * through the counting driver, so it is in no reserved figure nor call count), so that a
 * --capacity what-if leaves the policy only what the libraries left the real program, and the
 * cuda backend holds what the real run held. Past the capacity it is an OOM of the replay: the
 * real program would have failed there too. */
static gm_status_t ext_take(rp_engine_t *e, const gmt_event_t *ev, uint64_t *addr,
                            gm_err_t *err) {
  gm_status_t st = e->b->drv.mem_alloc(e->b->drv.ctx, ev->size ? ev->size : 1, addr);
  if (st == GM_ERR_NOMEM) {
    rp_engine_note_oom(e, ev, RP_OOM_EXTERNAL);
    *addr = RP_NO_BLOCK;
    return GM_OK;
  }
  if (st != GM_OK) return gm_err_set(err, st, "external allocation of %" PRIu64 " bytes", ev->size);
  return GM_OK;
}

static gm_status_t ext_give(rp_engine_t *e, rp_map_entry_t *x, gm_err_t *err) {
  if (x->a == RP_NO_BLOCK) return GM_OK;
  gm_status_t st = e->b->drv.mem_free(e->b->drv.ctx, x->a, x->b ? x->b : 1);
  if (st != GM_OK) return gm_err_set(err, st, "external free of %" PRIu64 " bytes", x->b);
  return GM_OK;
}

gm_status_t rp_engine_ext_give(rp_engine_t *e, rp_map_entry_t *x, gm_err_t *err) { return ext_give(e, x, err); }

/* External allocation: remembered by trace address with its size, never seen by the policy.
 * A second alloc at a live external address implies the free the trace missed. */
static gm_status_t ext_alloc(rp_engine_t *e, const gmt_event_t *ev, gm_err_t *err) {
  int was_live = 0;
  rp_map_entry_t *m = rp_map_claim(&e->external, ev->addr, &was_live);
  if (!m) return gm_err_set(err, GM_ERR_NOMEM, "out of host memory for the external map");
  if (was_live) {
    e->skipped.alloc_over_live++;
    e->ext_live -= m->b;
    gm_status_t st = ext_give(e, m, err);
    m->a = RP_NO_BLOCK;
    if (st != GM_OK) return st;
  }
  m->b = ev->size;
  gm_status_t st = ext_take(e, ev, &m->a, err);
  if (st != GM_OK) {
    m->a = RP_NO_BLOCK;
    m->b = 0;
    return st;
  }
  e->ext_live += ev->size;
  e->ext_allocs++;
  if (e->ext_live > e->ext_peak) e->ext_peak = e->ext_live;
  if (e->reserved + e->ext_live > e->peak_total) e->peak_total = e->reserved + e->ext_live;
  if (e->requested + e->ext_live > e->peak_need) e->peak_need = e->requested + e->ext_live;
  return GM_OK;
}

/* opts.count_other: a VMM map of another owner (NCCL) held beside the policy as external
 * memory from its map to its unmap. ext_alloc counts it as an allocation: undone here. */
static gm_status_t other_map(rp_engine_t *e, const gmt_event_t *ev, gm_err_t *err) {
  if (ev->kind == GMT_EV_VMM_MAP) {
    gm_status_t st = ext_alloc(e, ev, err);
    if (st == GM_OK) {
      e->ext_allocs--;
      e->ext_maps++;
    }
    return st;
  }
  rp_map_entry_t *x = rp_map_get(&e->external, ev->addr);
  if (!x) return GM_OK; /* an unmap of what the trace never mapped: nothing held */
  e->ext_live -= x->b;
  gm_status_t st = ext_give(e, x, err);
  rp_map_remove(&e->external, x);
  return st;
}

/* The recorded allocator's own holdings (segments, mapped VMM bytes) of the replayed device:
 * what it had reserved when a request failed. */
static void track_recorded(rp_engine_t *e, const gmt_event_t *ev) {
  if (e->device >= 0 && ev->device != (unsigned)e->device) return;
  if (ev->mem_kind != GMT_MEM_DEVICE && ev->mem_kind != GMT_MEM_UNKNOWN) return;
  if (ev->flags & GMT_F_EXTERNAL) return; /* another library's, not the recorded allocator's */
  if (ev->kind == GMT_EV_SEGMENT_ALLOC || ev->kind == GMT_EV_VMM_MAP) {
    e->rec_segments += ev->size;
    if (e->rec_segments > e->rec_peak) e->rec_peak = e->rec_segments;
  } else if (ev->kind == GMT_EV_SEGMENT_FREE || ev->kind == GMT_EV_VMM_UNMAP)
    e->rec_segments -= ev->size < e->rec_segments ? ev->size : e->rec_segments;
}

/* A request that failed in the recorded run: described (the first), and with
 * opts.serve_failed asked of the policy at its moment and given back at once. A failed
 * synchronous allocation in a trace read with external memory is a library's own: asked of
 * the device beside the policy, like the external allocation it would have been. */
static gm_status_t failed_request(rp_engine_t *e, const gmt_event_t *ev, gm_err_t *err) {
  e->failures++;
  int first = e->ff_event < 0;
  if (first) {
    e->ff_event = (int64_t)e->events;
    e->ff_ts = ev->ts_ns;
    e->ff_size = ev->size;
    e->ff_stream = ev->stream;
    e->ff_callsite = ev->callsite;
    e->ff_live = e->requested + e->ext_live;
    e->ff_rec_reserved = e->rec_segments;
  }
  if (!e->opts.serve_failed) {
    e->skipped.trace_ooms++;
    return GM_OK;
  }
  if (ev->size > RP_REQUEST_MAX) { /* as an oversize ALLOC: an OOM whatever the policy, in no figure */
    e->skipped.oversize++;
    rp_engine_note_oom(e, ev, RP_OOM_OVERSIZE);
    return GM_OK;
  }
  uint64_t ooms = e->ooms, addr = 0;
  gm_status_t st = GM_OK;
  if ((ev->flags & GMT_F_EXTERNAL) || (e->external_sync && !(ev->flags & GMT_F_ASYNC))) {
    /* Counted as asked for, served or not, as ext_alloc counts external memory. */
    st = ext_take(e, ev, &addr, err);
    if (st != GM_OK) return st;
    uint64_t live = e->ext_live + ev->size;
    if (live > e->ext_peak) e->ext_peak = live;
    if (e->reserved + live > e->peak_total) e->peak_total = e->reserved + live;
    if (e->requested + live > e->peak_need) e->peak_need = e->requested + live;
    if (first) e->ff_reserved = e->reserved + live;
    if (e->ooms == ooms) {
      rp_map_entry_t x;
      memset(&x, 0, sizeof x);
      x.a = addr;
      x.b = ev->size;
      st = ext_give(e, &x, err);
    }
  } else {
    st = rp_pol_alloc(e, ev->size, ev->stream, &addr, err);
    if (st == GM_ERR_NOMEM) rp_engine_note_oom(e, ev, RP_OOM_POLICY);
    else if (st != GM_OK) return st;
    /* Asked for, served or not, like every request: in the lower bound at its moment. */
    e->requested += ev->size;
    if (st == GM_OK) e->served += ev->size;
    rp_engine_observe(e, ev->ts_ns);
    if (first) e->ff_reserved = e->reserved + e->ext_live;
    if (st == GM_OK) {
      st = rp_pol_free(e, addr, err);
      e->served -= ev->size;
    } else {
      st = GM_OK;
    }
    e->requested -= ev->size;
  }
  if (e->ooms == ooms) {
    e->failures_served++;
    if (first) e->ff_served = 1;
  }
  return st;
}

/* Is this event for the device memory we replay? Counts what it skips. */
static int wanted(rp_engine_t *e, const gmt_event_t *ev) {
  if (ev->mem_kind != GMT_MEM_DEVICE && ev->mem_kind != GMT_MEM_UNKNOWN) {
    e->skipped.other_memory++;
    return 0;
  }
  if (e->device < 0) {
    if (ev->kind != GMT_EV_ALLOC) return 1; /* nothing allocated yet: harmless either way */
    e->device = ev->device;
  }
  if (ev->device != (unsigned)e->device) {
    e->skipped.other_device++;
    return 0;
  }
  return 1;
}

/* A FREE as the trace gives it: a library's external block, or a request's block. *freed is
 * 0 when it freed nothing (counted as an anomaly) or an external block (nothing to observe). */
static gm_status_t trace_free(rp_engine_t *e, const gmt_event_t *ev, int *freed, gm_err_t *err) {
  *freed = 0;
  if (e->external.live) { /* a library's cudaFree of its own block */
    rp_map_entry_t *x = rp_map_get(&e->external, ev->addr);
    if (x) {
      e->ext_live -= x->b;
      e->ext_frees++;
      gm_status_t st = ext_give(e, x, err);
      rp_map_remove(&e->external, x);
      return st;
    }
  }
  rp_map_entry_t *m = rp_blocks_get(e, ev->addr);
  if (!m) {
    if (rp_blocks_was_removed(e, ev->addr) || rp_map_was_removed(&e->external, ev->addr))
      e->skipped.double_free++;
    else e->skipped.unknown_free++;
    return GM_OK;
  }
  int held = 0;
  gm_status_t st = m->c ? rp_events_cross(e, ev, m, &held, err) : GM_OK; /* c: stream-ordered */
  if (st != GM_OK || held) {
    *freed = held;
    return st;
  }
  e->frees++;
  *freed = 1;
  return do_free(e, m, err);
}

gm_status_t rp_engine_one(rp_engine_t *e, const gmt_event_t *ev, gm_err_t *err) {
  gm_status_t st = GM_OK;
  switch (ev->kind) {
    case GMT_EV_ALLOC:
      if (!wanted(e, ev)) return GM_OK;
      if ((ev->flags & GMT_F_EXTERNAL) || (e->external_sync && !(ev->flags & GMT_F_ASYNC)))
        return ext_alloc(e, ev, err);
      rp_events_alloc_seen(e, ev);
      rp_track_pool(e, ev);
      /* process_events() at the start of malloc(); the test is rp_events_due's own no-op case
       * (no free_requested waiting, nothing held), inline: once per request */
      if (e->req_valid || e->n_held) st = rp_events_due(e, 0, err);
      if (st == GM_OK) st = do_alloc(e, ev, err);
      break;
    case GMT_EV_FREE: {
      if (!wanted(e, ev)) return GM_OK;
      int freed = 0, done = 0;
      if (e->req_valid || e->pending.live) { /* else rp_events_free has nothing to do */
        st = rp_events_free(e, ev, &done, err);
        if (st != GM_OK) return st;
      }
      if (done) break;
      st = trace_free(e, ev, &freed, err);
      if (st != GM_OK || !freed) return st;
      break;
    }
    case GMT_EV_VMM_RESERVE:
    case GMT_EV_VMM_MAP:
    case GMT_EV_VMM_UNMAP:
    case GMT_EV_VMM_RELEASE:
      if (e->opts.vmm_requests) {
        if (!wanted(e, ev)) return GM_OK;
        gmt_event_t req;
        int is_req = 0, freed = 1;
        st = rp_engine_vmm(e, ev, &req, &is_req, err);
        if (st != GM_OK || !is_req) return st;
        st = req.kind == GMT_EV_ALLOC ? do_alloc(e, &req, err) : trace_free(e, &req, &freed, err);
        if (st != GM_OK || !freed) return st;
        break;
      }
      track_recorded(e, ev);
      if ((ev->kind == GMT_EV_VMM_MAP || ev->kind == GMT_EV_VMM_UNMAP) &&
          (e->opts.count_other == RP_OTHER_ALL_MAPS ||
           (e->opts.count_other == RP_OTHER_FLAGGED_MAPS && (ev->flags & GMT_F_EXTERNAL))) &&
          wanted(e, ev)) {
        st = other_map(e, ev, err);
        break;
      }
      e->skipped.not_request++;
      return GM_OK;
    case GMT_EV_EMPTY_CACHE:
      if (e->device >= 0 && ev->device != (unsigned)e->device) {
        e->skipped.other_device++;
        return GM_OK;
      }
      /* empty_cache() synchronizes every pending event first. */
      st = rp_events_due(e, 1, err);
      if (st == GM_OK) st = e->ops->empty_cache(e->pol, err);
      e->empty_caches++;
      break;
    case GMT_EV_FREE_REQUESTED: {
      e->skipped.free_requested++;
      if (ev->mem_kind != GMT_MEM_DEVICE && ev->mem_kind != GMT_MEM_UNKNOWN) return GM_OK;
      if (e->device < 0 || ev->device != (unsigned)e->device) return GM_OK;
      int now = 0, freed = 0;
      st = rp_events_free_requested(e, ev, &now, err);
      if (st != GM_OK || !now) return st;
      st = trace_free(e, ev, &freed, err); /* early timing: the block comes back here */
      rp_events_freed_early(e, freed);
      if (st != GM_OK || !freed) return st;
      break;
    }
    case GMT_EV_ALLOC_FAILED:
      if (ev->mem_kind != GMT_MEM_DEVICE && ev->mem_kind != GMT_MEM_UNKNOWN) {
        e->skipped.other_memory++;
        return GM_OK;
      }
      if (e->device >= 0 && ev->device != (unsigned)e->device) {
        e->skipped.other_device++;
        return GM_OK;
      }
      st = rp_events_other(e, err);
      if (st == GM_OK) st = failed_request(e, ev, err);
      break;
    default:
      track_recorded(e, ev);
      e->skipped.not_request++;
      return GM_OK;
  }
  if (st != GM_OK) return st;
  if (e->opts.peak_only) {
    if (!e->opts.check) return GM_OK;
    read_allocated(e); /* check_now's figure */
    return check_now(e, err);
  }
  rp_engine_observe(e, ev->ts_ns);
  if (e->opts.check) return check_now(e, err);
  return GM_OK;
}
