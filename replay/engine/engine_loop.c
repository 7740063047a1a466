/* engine_loop.c: the event loop (rp_engine_feed, rp_engine_feed_ids).
 *
 * Most events of most traces are the plain requests: an ALLOC or a FREE of device memory on the
 * replayed device, not external, with no free waiting on stream events. Those are replayed here
 * by a loop that keeps the running figures (counts, live bytes, peaks, the fragmentation
 * integrals, the timeline's current bucket) in locals and stores them back only when it hands
 * an event to the general path (engine.c rp_engine_one: every other event, and the requests in
 * the rare states the loop leaves to it), calls out (an OOM, the reserved peak's snapshot), or
 * returns. It computes what rp_engine_one and rp_engine_observe compute, in the same order and
 * the same arithmetic, so every figure is the same bit for bit; an event it is not sure of goes
 * to rp_engine_one before the loop has changed anything for it. The loop is instantiated for the
 * block map (rp_map or the dense table) and for follower replays (opts.peak_only: no
 * observation). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "replay/engine/engine_internal.h"

#define RARE(x) __builtin_expect(!!(x), 0)

/* The figures the loop keeps in locals: the engine's fields of the same names. */
typedef struct run {
  uint64_t ev0; /* e->events - the index of the event: e->events when storing at event i is ev0 + i */
  uint64_t allocs, frees, requested, served, allocated;
  uint64_t peak_allocated, peak_requested, peak_need;
  uint64_t last_ts, last_allocated, last_reserved;
  double alloc_time, res_time, alloc_ops, res_ops;
  double last_alloc_d, last_res_d; /* (double)last_allocated, (double)last_reserved */
  uint64_t req_log2;                /* rp_run_facts_t.request_log2 (rp_pol_alloc's) */
} run_t;

static inline void run_load(const rp_engine_t *e, run_t *r, size_t i) {
  r->ev0 = e->events - i;
  r->allocs = e->allocs;
  r->frees = e->frees;
  r->requested = e->requested;
  r->served = e->served;
  r->allocated = e->allocated;
  r->peak_allocated = e->peak_allocated;
  r->peak_requested = e->peak_requested;
  r->peak_need = e->peak_need;
  r->last_ts = e->last_ts;
  r->last_allocated = e->last_allocated;
  r->last_reserved = e->last_reserved;
  r->alloc_time = e->alloc_time;
  r->res_time = e->res_time;
  r->alloc_ops = e->alloc_ops;
  r->res_ops = e->res_ops;
  r->last_alloc_d = (double)e->last_allocated;
  r->last_res_d = (double)e->last_reserved;
  r->req_log2 = e->req_log2;
}

static inline void run_store(rp_engine_t *e, const run_t *r, size_t i) {
  e->events = r->ev0 + i;
  e->allocs = r->allocs;
  e->frees = r->frees;
  e->requested = r->requested;
  e->served = r->served;
  e->allocated = r->allocated;
  e->peak_allocated = r->peak_allocated;
  e->peak_requested = r->peak_requested;
  e->peak_need = r->peak_need;
  e->last_ts = r->last_ts;
  e->last_allocated = r->last_allocated;
  e->last_reserved = r->last_reserved;
  e->alloc_time = r->alloc_time;
  e->res_time = r->res_time;
  e->alloc_ops = r->alloc_ops;
  e->res_ops = r->res_ops;
  e->req_log2 = r->req_log2;
}

/* The timeline's bucket that timestamps [lo, lo + w) fall in, non-empty (w = 0: none known). */
typedef struct tl_cur {
  uint64_t lo, w;
  rp_tl_bucket_t *b;
} tl_cur_t;

static inline void tl_locate(rp_timeline_t *t, uint64_t ts, tl_cur_t *c) {
  c->lo = c->w = 0;
  c->b = NULL;
  if (!t->started || ts < t->t0) return; /* before t0: bucket 0 by rp_timeline_add's rule, not by range */
  uint64_t idx = (ts - t->t0) >> t->shift;
  if (idx >= RP_TIMELINE_MAX || idx >= t->n || t->b[idx].ts == UINT64_MAX) return;
  c->lo = t->t0 + (idx << t->shift);
  c->w = 1ull << t->shift;
  c->b = &t->b[idx];
}

/* Nothing waits on stream events, no external block is live, no synchronous allocation is
 * external: the requests need none of the tests of those cases (the loop's `calm`). */
static inline int calm_now(const rp_engine_t *e) {
  return !e->req_valid && !e->n_held && !e->pending.live && !e->external.live && !e->external_sync;
}

/* Can the loop take the next events? What it needs of the engine whatever the event (the rest
 * is tested per event). These change only in events rp_engine_one replays. */
static int loop_ready(const rp_engine_t *e) {
  return !e->opts.check && !e->opts.observer && e->device >= 0 &&
         (e->opts.peak_only || e->have_ts); /* the first request observed: rp_engine_one's */
}

static gm_status_t fail(rp_engine_t *e, const gmt_event_t *ev, gm_err_t *err) {
  if (e->b->last_error[0] && err) {
    size_t l = strlen(err->msg);
    snprintf(err->msg + l, sizeof err->msg - l, " (driver: %s)", e->b->last_error);
  }
  return gm_err_wrap(err, "event %" PRIu64 " (kind %u, %" PRIu64 " bytes at 0x%" PRIx64 ")", e->events,
                     (unsigned)ev->kind, ev->size, ev->addr);
}

/* Events [i, n): the plain requests here, the others through rp_engine_one. Returns n; or i
 * when a request failed (*st set, the engine's state as rp_engine_one leaves it then) or event
 * i's address number is out of range (the caller's error, nothing done for it); or i + 1 when
 * event i, replayed by rp_engine_one, left the engine not loop_ready, or calm (the calm loop's
 * turn). dense: the block map is e->dense over ids; peak_only: e->opts.peak_only; calm_only: the
 * engine is calm (calm_now) and the loop takes only the plain requests a calm engine has,
 * returning i, nothing done, at the first other event (the other loop's). */
static inline __attribute__((always_inline)) size_t loop(rp_engine_t *e, const gmt_event_t *evs, const uint32_t *ids,
                                                         size_t i, size_t n, const int dense, const int peak_only,
                                                         const int calm_only, gm_status_t *st, gm_err_t *err) {
  run_t r;
  run_load(e, &r, i);
  tl_cur_t tc;
  tl_locate(&e->tl, r.last_ts, &tc);
  rp_policy_t *pol = e->pol;
  gm_status_t (*const alloc_h)(rp_policy_t *, uint64_t, uint64_t, uint64_t *, uint64_t *, gm_err_t *) =
      e->ops->alloc_h;
  gm_status_t (*const alloc)(rp_policy_t *, uint64_t, uint64_t, uint64_t *, gm_err_t *) = e->ops->alloc;
  gm_status_t (*const free_h)(rp_policy_t *, uint64_t, gm_err_t *) = e->ops->free_h;
  gm_status_t (*const free_a)(rp_policy_t *, uint64_t, gm_err_t *) = e->ops->free;
  const uint64_t *pol_allocated = e->pol_allocated;
  const unsigned device = (unsigned)e->device;
  int calm = calm_only || calm_now(e);
  for (; i < n; i++) {
    const gmt_event_t *ev = &evs[i];
    uint32_t id = 0;
    rp_map_entry_t *m;
    if (RARE(ev->kind != GMT_EV_ALLOC && ev->kind != GMT_EV_FREE && (calm_only || ev->kind != GMT_EV_FREE_REQUESTED)))
      goto general;
    if (RARE(ev->mem_kind != GMT_MEM_DEVICE && ev->mem_kind != GMT_MEM_UNKNOWN)) { /* host memory: counted (wanted) */
      if (ev->kind == GMT_EV_FREE_REQUESTED) e->skipped.free_requested++;
      else e->skipped.other_memory++;
      continue;
    }
    if (RARE(ev->device != device)) { /* another device's: counted */
      if (ev->kind == GMT_EV_FREE_REQUESTED) e->skipped.free_requested++;
      else e->skipped.other_device++;
      continue;
    }
    if (dense) {
      id = ids[i];
      if (RARE(id >= e->dense.n)) goto general;
    }
    if (ev->kind == GMT_EV_FREE_REQUESTED) {
      /* PyTorch's history: remembered in the slot for the free that follows (rp_events_free_requested);
       * one already there goes to the pending frees, and early timing frees at once: rp_engine_one's */
      if (e->req_valid || e->opts.event_timing == RP_EVENTS_EARLY) goto general;
      e->skipped.free_requested++;
      if (dense ? e->dense.slots[id].state == 1 : rp_map_get(&e->blocks, ev->addr) != NULL) {
        e->req_valid = 1;
        e->req_addr = ev->addr;
        e->req_allocs = r.allocs;
        e->req_ts = ev->ts_ns;
        e->req_early = 0;
        calm = 0;
      }
      continue; /* not a request: nothing to observe */
    }
    if (ev->kind == GMT_EV_ALLOC) {
      if (RARE((ev->flags & GMT_F_EXTERNAL) || ev->size > RP_REQUEST_MAX)) goto general; /* external; an anomaly */
      if (!calm && ((e->external_sync && !(ev->flags & GMT_F_ASYNC)) || e->req_valid || e->n_held))
        goto general; /* external memory; stream events due first */
      if (dense && RARE(e->dense.slots[id].state == 1)) goto general; /* over a live block */
      /* from here the event is the loop's */
      if (RARE(!e->stream_seen || ev->stream != e->first_stream)) rp_events_alloc_seen(e, ev);
      rp_track_pool(e, ev);
      int was_live = 0;
      m = dense ? rp_dense_claim(&e->dense, id, ev->addr, &was_live) : rp_map_claim(&e->blocks, ev->addr, &was_live);
      if (RARE(!m || was_live)) { /* the map is full, or the recorder missed a free: rp_engine_one's rest */
        run_store(e, &r, i);
        *st = m ? rp_engine_alloc_claimed(e, ev, m, was_live, err)
                : gm_err_set(err, GM_ERR_NOMEM, "out of host memory for the block map");
        if (*st != GM_OK) return i;
        if (!peak_only) rp_engine_observe(e, ev->ts_ns);
        e->events++;
        run_load(e, &r, i + 1);
        tl_locate(&e->tl, r.last_ts, &tc);
        calm = calm_now(e);
        continue;
      }
      uint64_t blk = 0, addr;
      r.req_log2 |= rp_request_log2_bit(ev->size); /* as rp_pol_alloc */
      gm_status_t s = alloc_h ? alloc_h(pol, ev->size, ev->stream, &addr, &blk, err)
                              : alloc(pol, ev->size, ev->stream, &blk, err);
      if (RARE(s != GM_OK)) {
        run_store(e, &r, i);
        if (s != GM_ERR_NOMEM) {
          m->a = RP_NO_BLOCK;
          m->b = 0;
          *st = s;
          return i;
        }
        rp_engine_note_oom(e, ev, RP_OOM_POLICY);
        blk = RP_NO_BLOCK;
      } else {
        r.served += ev->size;
      }
      r.requested += ev->size;
      m->a = blk;
      m->b = ev->size;
      m->c = (ev->flags & GMT_F_ASYNC) && ev->stream != GMT_STREAM_NONE ? (uint32_t)ev->stream + 1u : 0;
      r.allocs++;
    } else {
      /* rp_events_free: the free_requested just before, of this block, back to back (in time too where
       * the trace has two streams); otherwise a free that may wait on stream events */
      int req = 0;
      if (!calm) {
        req = e->req_valid;
        if (req ? e->req_addr != ev->addr || e->req_early ||
                      (e->multi_stream && ev->ts_ns >= e->req_ts + RP_ONTIME_GAP_NS)
                : e->pending.live != 0)
          goto general;
        if (e->external.live && rp_map_get(&e->external, ev->addr)) goto general; /* a library's block */
      }
      if (dense) {
        m = &e->dense.slots[id];
        if (RARE(m->state != 1)) goto general; /* an anomaly */
      } else {
        m = rp_map_get(&e->blocks, ev->addr);
        if (RARE(!m)) goto general;
      }
      /* stream-ordered, freed on another stream: counted (rp_events_cross), held under late timing */
      if (RARE(m->c && ev->stream != GMT_STREAM_NONE && m->c != (uint32_t)ev->stream + 1u)) {
        if (e->opts.event_timing == RP_EVENTS_LATE) goto general;
        e->event_frees++;
      }
      if (req) {
        e->req_valid = 0;
        calm = calm_now(e);
      }
      r.frees++;
      gm_status_t s = GM_OK;
      if (m->a != RP_NO_BLOCK) {
        s = free_h ? free_h(pol, m->a, err) : free_a(pol, m->a, err);
        r.served -= m->b;
      }
      r.requested -= m->b;
      if (dense) rp_dense_remove(&e->dense, m);
      else rp_map_remove(&e->blocks, m);
      if (RARE(s != GM_OK)) {
        run_store(e, &r, i);
        *st = s;
        return i;
      }
    }
    if (!peak_only) { /* rp_engine_observe */
      uint64_t ts = ev->ts_ns, reserved = e->reserved, allocated;
      if (pol_allocated) {
        allocated = *pol_allocated;
      } else { /* a policy without the counter: its stats (read_allocated) */
        rp_policy_stats_t ps;
        e->ops->stats(pol, &ps);
        allocated = ps.allocated_bytes;
      }
      r.allocated = allocated;
      if (allocated > r.peak_allocated) r.peak_allocated = allocated;
      if (r.requested > r.peak_requested) r.peak_requested = r.requested;
      if (r.requested + e->ext_live > r.peak_need) r.peak_need = r.requested + e->ext_live;
      if (RARE(rp_engine_peak_due(e, reserved, allocated))) {
        run_store(e, &r, i);
        rp_engine_observe_peak(e, ts);
      }
      if (ts > r.last_ts) { /* have_ts: loop_ready */
        double dt = (double)(ts - r.last_ts);
        r.alloc_time += r.last_alloc_d * dt;
        r.res_time += r.last_res_d * dt;
        r.last_ts = ts;
      }
      double ad = (double)allocated, rd = (double)reserved;
      r.last_allocated = allocated;
      r.last_reserved = reserved;
      r.last_alloc_d = ad;
      r.last_res_d = rd;
      r.alloc_ops += ad;
      r.res_ops += rd;
      if (ts - tc.lo < tc.w) { /* rp_timeline_add into the bucket of the last one */
        rp_tl_bucket_t *b = tc.b;
        if (reserved > b->reserved) {
          b->reserved = reserved;
          b->ts = ts;
        }
        if (allocated > b->allocated) b->allocated = allocated;
        if (r.requested > b->requested) b->requested = r.requested;
      } else {
        rp_timeline_add(&e->tl, ts, reserved, allocated, r.requested);
        tl_locate(&e->tl, ts, &tc);
      }
    }
    continue;
  general: /* any other event: rp_engine_one, as the caller's loop would */
    if (calm_only) break; /* the other loop's */
    if (dense) {
      id = ids[i];
      if (id >= e->dense.n && id != RP_NO_ID) break; /* the caller's error */
      e->cur_id = id;
    }
    run_store(e, &r, i);
    *st = rp_engine_one(e, ev, err);
    if (*st != GM_OK) return i;
    e->events++;
    if (!loop_ready(e) || calm_now(e)) return i + 1; /* the general way, or the calm loop */
    run_load(e, &r, i + 1);
    tl_locate(&e->tl, r.last_ts, &tc);
    calm = calm_now(e);
  }
  run_store(e, &r, i);
  return i;
}

/* The instances: block map (rp_map, dense), observed or a follower's, calm or not. */
#define LOOP(name, dense, peak_only, calm)                                                                       \
  static __attribute__((noinline)) size_t name(rp_engine_t *e, const gmt_event_t *evs, const uint32_t *ids,      \
                                               size_t i, size_t n, gm_status_t *st, gm_err_t *err) {             \
    return loop(e, evs, ids, i, n, dense, peak_only, calm, st, err);                                             \
  }
LOOP(loop_map, 0, 0, 0)
LOOP(loop_map_peak, 0, 1, 0)
LOOP(loop_dense, 1, 0, 0)
LOOP(loop_dense_peak, 1, 1, 0)
LOOP(loop_map_calm, 0, 0, 1)
LOOP(loop_map_peak_calm, 0, 1, 1)
LOOP(loop_dense_calm, 1, 0, 1)
LOOP(loop_dense_peak_calm, 1, 1, 1)

typedef size_t (*loop_fn)(rp_engine_t *, const gmt_event_t *, const uint32_t *, size_t, size_t, gm_status_t *,
                          gm_err_t *);

gm_status_t rp_engine_feed_ids(rp_engine_t *e, const gmt_event_t *evs, const uint32_t *ids, size_t n,
                               gm_err_t *err) {
  if (!ids != !e->use_ids)
    return gm_err_set(err, GM_ERR_INVAL, ids ? "address numbers given to an engine not set up for them (rp_engine_use_ids)"
                                             : "events without their address numbers (rp_engine_use_ids)");
  if (e->t_start == 0) e->t_start = rp_engine_now_s();
  /* The calm loop takes the events while the engine is calm (calm_now) and they are plain; the
   * other loop the rest, back to the calm one when an event it handed to rp_engine_one leaves the
   * engine calm. */
  const loop_fn calm_loop = ids ? (e->opts.peak_only ? loop_dense_peak_calm : loop_dense_calm)
                                : (e->opts.peak_only ? loop_map_peak_calm : loop_map_calm);
  const loop_fn any_loop = ids ? (e->opts.peak_only ? loop_dense_peak : loop_dense)
                               : (e->opts.peak_only ? loop_map_peak : loop_map);
  size_t i = 0;
  while (i < n) {
    if (loop_ready(e)) {
      gm_status_t st = GM_OK;
      if (calm_now(e)) {
        i = calm_loop(e, evs, ids, i, n, &st, err);
        if (st != GM_OK) return fail(e, &evs[i], err);
        if (i == n) break;
      }
      size_t j = any_loop(e, evs, ids, i, n, &st, err);
      if (st != GM_OK) return fail(e, &evs[j], err);
      if (j == n) break;
      if (j != i) {
        i = j;
        continue;
      }
      /* nothing done: event i's address number is out of range (the error below) */
    }
    /* One event the general way. */
    if (ids) {
      e->cur_id = ids[i];
      /* a number out of range is only harmless on an event that names no block */
      if (e->cur_id >= e->dense.n && e->cur_id != RP_NO_ID)
        return gm_err_set(err, GM_ERR_INVAL, "event %" PRIu64 ": address number %u out of range (%u)", e->events,
                          e->cur_id, e->dense.n);
    }
    gm_status_t st = rp_engine_one(e, &evs[i], err);
    if (st != GM_OK) return fail(e, &evs[i], err);
    e->events++;
    i++;
  }
  return GM_OK;
}

gm_status_t rp_engine_feed(rp_engine_t *e, const gmt_event_t *evs, size_t n, gm_err_t *err) {
  return rp_engine_feed_ids(e, evs, NULL, n, err);
}
