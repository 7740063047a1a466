/* engine_internal.h: the engine's state, shared by engine.c (event loop) and the files it
 * uses: engine_driver.c (the counting driver between policy and backend), engine_events.c and
 * engine_vmm.c (which say what to replay; engine.c replays it), engine_peak.c,
 * engine_timeline.c, engine_finish.c. Internal to //replay/engine. */
#ifndef RP_ENGINE_INTERNAL_H
#define RP_ENGINE_INTERNAL_H

#include <stdint.h>
#include <time.h>

#include "replay/engine/rp_engine.h"
#include "replay/engine/rp_dense.h"
#include "replay/engine/rp_map.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Map value for an alloc that failed (OOM): its FREE is expected, not an anomaly. */
#define RP_NO_BLOCK UINT64_MAX

/* Fixed number of time buckets; when time runs past the last one, adjacent pairs merge and
 * the bucket width doubles. Each bucket keeps the maximum of each series, so the peak is
 * always in the timeline. */
/* One bucket's maxima, together: an add touches one cache line, not four arrays' worth. */
typedef struct rp_tl_bucket {
  uint64_t ts; /* ts of the reserved maximum; UINT64_MAX = empty bucket */
  uint64_t reserved, allocated, requested;
} rp_tl_bucket_t;

typedef struct rp_timeline {
  uint64_t t0;
  int started;
  unsigned shift; /* bucket width = 1 << shift ns */
  size_t n;       /* buckets in use: [0, n) */
  rp_tl_bucket_t b[RP_TIMELINE_MAX];
} rp_timeline_t;

void rp_timeline_init(rp_timeline_t *t);
void rp_timeline_add_slow(rp_timeline_t *t, uint64_t ts, uint64_t reserved, uint64_t allocated,
                          uint64_t requested);
/* One sample into its bucket (the maximum of each series). Inline: once per request. */
static inline void rp_timeline_add(rp_timeline_t *t, uint64_t ts, uint64_t reserved, uint64_t allocated,
                                   uint64_t requested) {
  uint64_t rel = ts > t->t0 ? ts - t->t0 : 0; /* out-of-order stamps land in the first bucket */
  uint64_t idx = rel >> t->shift;
  if (!t->started || idx >= RP_TIMELINE_MAX) {
    rp_timeline_add_slow(t, ts, reserved, allocated, requested);
    return;
  }
  if (idx >= t->n) t->n = idx + 1;
  rp_tl_bucket_t *b = &t->b[idx];
  if (b->ts == UINT64_MAX) {
    b->ts = ts;
    b->reserved = reserved;
    b->allocated = allocated;
    b->requested = requested;
    return;
  }
  if (reserved > b->reserved) {
    b->reserved = reserved;
    b->ts = ts;
  }
  if (allocated > b->allocated) b->allocated = allocated;
  if (requested > b->requested) b->requested = requested;
}
/* Non-empty buckets in time order; returns how many (<= RP_TIMELINE_MAX). */
size_t rp_timeline_export(const rp_timeline_t *t, uint64_t *ts, uint64_t *reserved,
                          uint64_t *allocated, uint64_t *requested);

typedef struct rp_vmm rp_vmm_t;
void rp_vmm_free(rp_vmm_t *v);

struct rp_engine {
  const rp_policy_ops_t *ops;
  rp_policy_t *pol;
  const uint64_t *pol_allocated; /* ops->allocated_bytes, or NULL: ask stats */
  rp_backend_t *b;
  rp_driver_t drv; /* counting wrapper around b->drv, what the policy sees */
  rp_engine_opts_t opts;
  int device;
  rp_map_t blocks;      /* trace addr -> (policy block: rp_pol_alloc, requested size) */
  /* rp_engine_use_ids: the same map over the trace's address numbers (rp_blocks_* below pick) */
  int use_ids;
  uint32_t cur_id; /* the number of the event being replayed's address */
  rp_dense_t dense;            /* a copy of *dense_home, whose numbering ids gets it back at destroy */
  rp_dense_t *dense_home;
  const rp_addr_ids_t *ids;
  rp_map_t async_sizes; /* alloc_async addr -> size (reserved accounting of `async`) */
  int external_sync;    /* rp_engine_set_external_sync */
  rp_vmm_t *vmm;        /* opts.vmm_requests: live VMM reservations (engine_vmm.c) */
  rp_map_t external;    /* external trace addr -> size */
  uint64_t ext_live, ext_peak, ext_allocs, ext_frees, ext_maps;
  uint64_t peak_total;  /* peak of reserved + ext_live */
  uint64_t pool_res;    /* the pool's reservation as last read (backends with pool_reserved) */
  uint64_t events, allocs, frees, empty_caches, ooms;
  uint64_t reserved, allocated, requested; /* requested: live bytes the trace asked for */
  uint64_t served; /* live requested bytes the policy did serve (not OOM) */
  uint64_t peak_reserved, peak_allocated, peak_requested;
  int peak_dirty;
  double frag_at_peak;
  uint64_t alloc_at_peak; /* most allocated seen while reserved was at its peak */
  uint64_t driver_used_at_peak;
  uint64_t alloc_calls, free_calls, va_calls, pool_trims, driver_nomem;
  uint64_t pool_allocs; /* alloc_async calls: the figure is the stream-ordered pool's */
  uint64_t largest_alloc, req_log2; /* rp_run_facts_t's: the largest mem_alloc/map, request sizes */
  int64_t first_oom_event, first_oom_ts;
  uint64_t oom_size, oom_stream, oom_live, oom_ext, oom_reserved;
  uint32_t oom_callsite;
  int oom_cause, has_oom_report;
  rp_oom_report_t oom_report;
  uint64_t peak_need;       /* peak of requested + ext_live */
  uint64_t rec_segments;    /* the recorded allocator's segments + mapped VMM bytes, live */
  uint64_t rec_peak;        /* ... and their peak */
  uint64_t pool_lo, pool_hi; /* the recorded stream-ordered allocations' address extent */
  uint64_t failures, failures_served;
  int64_t ff_event;         /* first recorded failure (-1: none) */
  uint64_t ff_ts, ff_size, ff_stream, ff_live, ff_rec_reserved, ff_reserved;
  uint32_t ff_callsite;
  int ff_served;
  rp_skip_counts_t skipped;
  int have_ts;
  uint64_t last_ts, last_reserved, last_allocated;
  double alloc_time, res_time; /* integrals of allocated and reserved over time (byte-ns) */
  double alloc_ops, res_ops;   /* the same summed per request */
  double t_start;
  rp_timeline_t tl;
  /* engine_events.c: frees that wait on stream events. */
  rp_map_t pending;          /* torch: trace addr -> (allocs at its free_requested, freed early) */
  int req_valid, req_early;  /* the last request event was this free_requested */
  uint64_t req_addr, req_allocs, req_ts;
  uint64_t first_stream;     /* the stream of the first allocation (if stream_seen) */
  int stream_seen, multi_stream;          /* allocations on two streams or more: record_stream is possible */
  uint64_t ontime_frees;     /* torch: event frees found by their delay (engine_events.c) */
  struct rp_held *held;      /* late timing: blocks the program freed, not yet given back */
  size_t n_held, cap_held;
  uint64_t event_frees, event_frees_requested;
  /* engine_peak.c: the live segments (addr -> size, kind: 0 mem_alloc, 1 a mapped page) and
   * the snapshot at the reserved peak. */
  rp_map_t segs;
  rp_peak_snapshot_t *snap;
  struct rp_peak_raw *raw[2]; /* the pending moment, not yet built into snap; a spare */
  int snap_pending;     /* the peak moved since the last snapshot */
  uint64_t snap_events;  /* e->events at the last snapshot */
  uint64_t snap_elements; /* blocks + segments it walked */
  int segs_overflow;      /* more than SEG_MAX segments: not followed, no snapshot */
};

/* The block map (trace address -> policy block, requested size, stream): rp_map keyed by the
 * address, or under rp_engine_use_ids the dense table indexed by the address's number. Every
 * lookup is of the address of the event being replayed (a VMM event's request has its
 * address), so the number is e->cur_id. */
static inline rp_map_entry_t *rp_blocks_get(rp_engine_t *e, uint64_t addr) {
  return e->use_ids ? rp_dense_get(&e->dense, e->cur_id) : rp_map_get(&e->blocks, addr);
}
static inline rp_map_entry_t *rp_blocks_claim(rp_engine_t *e, uint64_t addr, int *was_live) {
  return e->use_ids ? rp_dense_claim(&e->dense, e->cur_id, addr, was_live)
                    : rp_map_claim(&e->blocks, addr, was_live);
}
static inline void rp_blocks_remove(rp_engine_t *e, rp_map_entry_t *m) {
  if (e->use_ids) rp_dense_remove(&e->dense, m);
  else rp_map_remove(&e->blocks, m);
}
static inline int rp_blocks_was_removed(rp_engine_t *e, uint64_t addr) {
  return e->use_ids ? rp_dense_was_removed(&e->dense, e->cur_id) : rp_map_was_removed(&e->blocks, addr);
}
static inline size_t rp_blocks_live(const rp_engine_t *e) { return e->use_ids ? e->dense.live : e->blocks.live; }
/* The walk over the live entries: for (i = rp_blocks_next(e, 0); i < rp_blocks_end(e); i =
 * rp_blocks_next(e, i + 1)) rp_blocks_at(e, i) (in slot or number order: sort what it finds). */
static inline size_t rp_blocks_end(const rp_engine_t *e) { return e->use_ids ? e->dense.n : e->blocks.cap; }
static inline size_t rp_blocks_next(const rp_engine_t *e, size_t i) {
  return e->use_ids ? rp_dense_next_live(&e->dense, i) : rp_map_next_live(&e->blocks, i);
}
static inline const rp_map_entry_t *rp_blocks_at(const rp_engine_t *e, size_t i) {
  return e->use_ids ? &e->dense.slots[i] : &e->blocks.slots[i];
}

/* engine_ids.c: a table for ids' numbers, empty (a spare kept with the numbering, or a new
 * one; NULL: out of memory), and given back for the next replay (or freed). */
rp_dense_t *rp_addr_ids_table(const rp_addr_ids_t *ids);
void rp_addr_ids_table_back(const rp_addr_ids_t *ids, rp_dense_t *t);

/* The policy's block for a request: its handle where the policy hands one out (alloc_h: the
 * free then costs the policy no address lookup), else its address. What the block map keeps
 * in `a`; RP_NO_BLOCK is never one. */
static inline gm_status_t rp_pol_alloc(rp_engine_t *e, uint64_t size, uint64_t stream, uint64_t *blk,
                                       gm_err_t *err) {
  e->req_log2 |= rp_request_log2_bit(size);
  if (e->ops->alloc_h) {
    uint64_t addr;
    return e->ops->alloc_h(e->pol, size, stream, &addr, blk, err);
  }
  return e->ops->alloc(e->pol, size, stream, blk, err);
}
static inline gm_status_t rp_pol_free(rp_engine_t *e, uint64_t blk, gm_err_t *err) {
  return e->ops->free_h ? e->ops->free_h(e->pol, blk, err) : e->ops->free(e->pol, blk, err);
}
static inline uint64_t rp_pol_addr(const rp_engine_t *e, uint64_t blk) {
  return e->ops->handle_addr ? e->ops->handle_addr(e->pol, blk) : blk;
}

/* opts.vmm_requests: one VMM_* event (engine_vmm.c). Sets *is_req when it stands for a request:
 * *req is then the ALLOC or FREE that engine.c replays. */
gm_status_t rp_engine_vmm(rp_engine_t *e, const gmt_event_t *ev, gmt_event_t *req, int *is_req,
                          gm_err_t *err);

/* engine_events.c: a free_requested ... free pair this far apart, in a multi-stream trace,
 * waited on an event (engine_loop.c tells the pairs that did not apart). */
#define RP_ONTIME_GAP_NS 10000u

/* engine_events.c. Each returns a failure of the policy or of host memory. */
/* A free_requested of the replayed device: remembered. *now: early timing gives the block back
 * at once (the caller frees it, then tells rp_events_freed_early whether it did). */
gm_status_t rp_events_free_requested(rp_engine_t *e, const gmt_event_t *ev, int *now, gm_err_t *err);
void rp_events_freed_early(rp_engine_t *e, int freed);
/* Before a FREE is replayed: *done when it was taken care of here (given back early, or
 * held under late timing); otherwise the caller frees it. */
gm_status_t rp_events_free(rp_engine_t *e, const gmt_event_t *ev, int *done, gm_err_t *err);
/* A requests trace's free of block m (its trace-map entry): counted when it is on another
 * stream than the allocation's; under late timing held (*held: m is gone from the map). */
gm_status_t rp_events_cross(rp_engine_t *e, const gmt_event_t *ev, rp_map_entry_t *m, int *held,
                            gm_err_t *err);
/* Before an allocation (all = 0) or an empty_cache (all = 1): give back the held blocks
 * that are due. */
gm_status_t rp_events_due(rp_engine_t *e, int all, gm_err_t *err);
/* Any other request event: a free_requested just before it waits on events. */
gm_status_t rp_events_other(rp_engine_t *e, gm_err_t *err);
void rp_events_free_all(rp_engine_t *e);
/* Every allocation, before it is served: notes whether the trace allocates on several streams. */
void rp_events_alloc_seen(rp_engine_t *e, const gmt_event_t *ev);
/* Frees the program requested that never completed by the end of the trace (torch traces). */
uint64_t rp_events_never_freed(const rp_engine_t *e);

/* engine_peak.c: follow the driver's segments; snapshot the memory (observe() at a peak). */
void rp_peak_init(rp_engine_t *e);
void rp_peak_free(rp_engine_t *e);
void rp_peak_seg_add(rp_engine_t *e, uint64_t addr, uint64_t size, int page);
void rp_peak_seg_remove(rp_engine_t *e, uint64_t addr, uint64_t size, int page);
void rp_peak_maybe_snapshot(rp_engine_t *e, uint64_t ts);
/* End of the replay: a snapshot still pending is taken if reserved is still at the peak. */
void rp_peak_finish(rp_engine_t *e, uint64_t ts);

/* engine.c: one event of any kind, as the general loop replays it (its observation included),
 * for engine_loop.c, which replays the common requests itself and hands it the rest. */
gm_status_t rp_engine_one(rp_engine_t *e, const gmt_event_t *ev, gm_err_t *err);
/* After a request: fold the new state into the peaks, the fragmentation integrals and the
 * timeline (rp_engine_observe); its reserved peak's part alone (fragmentation at the peak, the
 * snapshot), which does something only when rp_engine_peak_due says so. */
void rp_engine_observe(rp_engine_t *e, uint64_t ts);
void rp_engine_observe_peak(rp_engine_t *e, uint64_t ts);
static inline int rp_engine_peak_due(const rp_engine_t *e, uint64_t reserved, uint64_t allocated) {
  return e->peak_dirty || (reserved == e->peak_reserved && (allocated > e->alloc_at_peak || e->snap_pending));
}
/* A failed request (RP_OOM_* cause): counted, the first described. */
void rp_engine_note_oom(rp_engine_t *e, const gmt_event_t *ev, int cause);
/* An ALLOC whose block-map entry m is claimed (was_live: the entry held a live block). */
gm_status_t rp_engine_alloc_claimed(rp_engine_t *e, const gmt_event_t *ev, rp_map_entry_t *m, int was_live,
                                    gm_err_t *err);

/* Point e->drv at the counting functions (only those the backend has). */
void rp_engine_driver_init(rp_engine_t *e);

/* The chunk a stream-ordered pool grows by (engine.c track_pool, engine_finish.c). */
#define RP_POOL_CHUNK (32ull << 20)

/* The driver's stream-ordered pool is one contiguous range of virtual addresses whose backing
 * grows at its top in whole 32 MiB chunks (measured on an H100, tests/gpu/pool_probe.py,
 * traces/recorded/PREDICTION.md "The async pool"), so what a recorded run's pool reserved at
 * its peak is its allocations' address extent rounded up to the chunk: exact on the four
 * recorded runs. This tracks the extent of the stream-ordered allocations of the replayed
 * device as the driver placed them (the recorded addresses): engine.c, engine_loop.c. */
static inline void rp_track_pool(rp_engine_t *e, const gmt_event_t *ev) {
  if (!(ev->flags & GMT_F_ASYNC) || ev->mem_kind != GMT_MEM_DEVICE || !ev->size) return;
  uint64_t lo = ev->addr & ~(RP_POOL_CHUNK - 1), hi = ev->addr + ev->size;
  if (hi < ev->addr) return;
  if (!e->pool_hi || lo < e->pool_lo) e->pool_lo = lo;
  if (hi > e->pool_hi) e->pool_hi = hi;
}

/* Seconds on the monotonic clock (the replay's own time). */
static inline double rp_engine_now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Give an external block (a library's own allocation) back to the driver (engine.c; used by
 * engine_finish.c for those still live at the end). */
gm_status_t rp_engine_ext_give(rp_engine_t *e, rp_map_entry_t *x, gm_err_t *err);

#ifdef __cplusplus
}
#endif
#endif /* RP_ENGINE_INTERNAL_H */
