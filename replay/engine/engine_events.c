/* engine_events.c: frees that wait on stream events (record_stream), and when they happen.
 *
 * Model (PyTorch's CUDACachingAllocator, c10/cuda/CUDACachingAllocator.cpp): free() of a
 * block that record_stream() marked as used on other streams records a CUDA event on each
 * of them and keeps the block (the history says free_requested); free_block() runs, in the
 * same call, only for a block without such uses (free_requested then free, back to back).
 * The events are queried by process_events() at the start of every later malloc(), per
 * stream oldest first, stopping at the first one not ready; a block whose last event has
 * completed is freed there (free, just before that malloc's alloc). empty_cache() and the
 * OOM path synchronize every event first. When the block comes back is therefore a race
 * between the CPU, which reaches the next malloc, and the GPU, which finishes the other
 * stream's work: on a run where one event was still pending the next tensor cannot reuse
 * the block, and the allocator may grow a segment instead (issue 11: 82 MiB on time, up to
 * 322 MiB with a long kernel on the side stream).
 *
 * Which frees wait on events: in a torch trace (PyTorch's own history), a free_requested
 * not followed at once by its free, or never followed by it (the event was still pending
 * when the program ended: no malloc came after it to see it complete); also, in a trace that
 * allocates on two streams or more, a free_requested followed by its free only
 * RP_ONTIME_GAP_NS or more later: free_block() runs in the same call as free_requested for a
 * block without stream uses (0-5 us apart on an H100, 2026-11-25: traces/recorded/
 * stream_events), while a block whose event completed in time comes back in the next
 * malloc's process_events(), after whatever the program did in between (12-90 us there).
 * Such a free was on time in the recorded run and could have been late in another; a
 * single-stream trace never takes this rule (record_stream hands a block to another stream
 * that allocates). In a requests trace (cudaMallocAsync backend), a free
 * on another stream than the block was allocated on (the async backend frees at once,
 * ordered after the recorded streams; the native allocator would have held the block).
 *
 * Three timings (rp_engine_opts_t.event_timing):
 *  - recorded: as the trace has it (the point figure);
 *  - early: every event done when the program freed the block (torch: the block comes back
 *    at its free_requested; requests: the recorded free already is that);
 *  - late: every event still pending at the next late_mallocs allocations after the program
 *    freed the block, and never earlier than recorded: it comes back just before the
 *    allocation after those, at an empty_cache, or when an allocation runs out of memory
 *    (PyTorch synchronizes every event before it gives up; engine.c retries once).
 * The range gpureplay reports is [min, max] of the three peaks: a caching allocator is not
 * monotone in when frees happen, so neither end alone is taken as a bound.
 *
 * A held block (late) leaves the trace-address map (the recorded run may reuse its address
 * at once) and waits in a short list with its policy address. Requested bytes follow the
 * program (the tensor is gone when it freed it); the policy's allocated bytes keep the
 * block until it comes back, as PyTorch's do.
 *
 * Cost: a free_requested is remembered in one slot and goes to a map only when its free
 * does not follow at once, so a trace without record_stream pays a compare per free; the
 * cross-stream test of a requests trace reads the block's entry the free looks up anyway. */
#include <stdlib.h>

#include "replay/engine/engine_internal.h"

struct rp_held {
  uint64_t pol_addr, size;
  uint64_t due; /* comes back before the allocation made when e->allocs reaches this */
};

void rp_events_alloc_seen(rp_engine_t *e, const gmt_event_t *ev) {
  if (!e->stream_seen) {
    e->stream_seen = 1;
    e->first_stream = ev->stream;
  } else if (ev->stream != e->first_stream) e->multi_stream = 1;
}

uint64_t rp_events_never_freed(const rp_engine_t *e) {
  return e->pending.live + (e->req_valid ? 1u : 0u);
}

void rp_events_free_all(rp_engine_t *e) {
  rp_map_free(&e->pending);
  free(e->held);
  e->held = NULL;
  e->n_held = e->cap_held = 0;
}

/* The free_requested in the slot was not followed at once by its free: its block waits. */
static gm_status_t commit(rp_engine_t *e, gm_err_t *err) {
  if (!e->req_valid) return GM_OK;
  e->req_valid = 0;
  if (rp_map_put(&e->pending, e->req_addr, e->req_allocs, (uint64_t)e->req_early) != 0)
    return gm_err_set(err, GM_ERR_NOMEM, "out of host memory for pending frees");
  return GM_OK;
}

gm_status_t rp_events_other(rp_engine_t *e, gm_err_t *err) { return commit(e, err); }

gm_status_t rp_events_due(rp_engine_t *e, int all, gm_err_t *err) {
  gm_status_t st = commit(e, err);
  size_t k = 0;
  for (size_t i = 0; i < e->n_held; i++) {
    struct rp_held h = e->held[i];
    if (st == GM_OK && (all || h.due <= e->allocs)) {
      if (h.pol_addr != RP_NO_BLOCK) {
        e->served -= h.size;
        st = rp_pol_free(e, h.pol_addr, err);
      }
      continue;
    }
    e->held[k++] = h; /* kept in order: blocks come back oldest first */
  }
  e->n_held = k;
  return st;
}

gm_status_t rp_events_free_requested(rp_engine_t *e, const gmt_event_t *ev, int *now, gm_err_t *err) {
  *now = 0;
  gm_status_t st = commit(e, err);
  if (st != GM_OK) return st;
  if (!rp_blocks_get(e, ev->addr)) return GM_OK; /* its free will count the anomaly */
  e->req_valid = 1;
  e->req_addr = ev->addr;
  e->req_allocs = e->allocs;
  e->req_ts = ev->ts_ns;
  e->req_early = 0;
  *now = e->opts.event_timing == RP_EVENTS_EARLY;
  return st;
}

void rp_events_freed_early(rp_engine_t *e, int freed) { e->req_early = freed; }

static gm_status_t hold(rp_engine_t *e, rp_map_entry_t *m, uint64_t due, gm_err_t *err) {
  if (e->n_held == e->cap_held) {
    size_t cap = e->cap_held ? 2 * e->cap_held : 64;
    struct rp_held *h = realloc(e->held, cap * sizeof *h);
    if (!h) return gm_err_set(err, GM_ERR_NOMEM, "out of host memory for held blocks");
    e->held = h;
    e->cap_held = cap;
  }
  e->held[e->n_held].pol_addr = m->a;
  e->held[e->n_held].size = m->b;
  e->held[e->n_held].due = due;
  e->n_held++;
  e->requested -= m->b;
  e->frees++;
  rp_blocks_remove(e, m);
  return GM_OK;
}

gm_status_t rp_events_free(rp_engine_t *e, const gmt_event_t *ev, int *done, gm_err_t *err) {
  *done = 0;
  int waits = 0, early = 0;
  uint64_t since = e->allocs;
  if (e->req_valid && e->req_addr == ev->addr) {
    e->req_valid = 0; /* back to back: no event was needed, unless it came back late */
    early = e->req_early;
    if (e->multi_stream && ev->ts_ns >= e->req_ts + RP_ONTIME_GAP_NS) {
      waits = 1; /* on time, at the next malloc (see the top of this file) */
      since = e->req_allocs;
      e->ontime_frees++;
    }
  } else {
    gm_status_t st = commit(e, err);
    if (st != GM_OK) return st;
    rp_map_entry_t *p = e->pending.live ? rp_map_get(&e->pending, ev->addr) : NULL;
    if (p) {
      waits = 1;
      since = p->a;
      early = (int)p->b;
      rp_map_remove(&e->pending, p);
    }
  }
  if (waits) {
    e->event_frees++;
    e->event_frees_requested++;
  }
  if (early) { /* given back at its free_requested */
    *done = 1;
    return GM_OK;
  }
  if (!waits) return GM_OK; /* a requests trace's cross-stream free: rp_events_cross */
  if (e->opts.event_timing != RP_EVENTS_LATE) return GM_OK;
  uint64_t k = e->opts.late_mallocs ? e->opts.late_mallocs : 1;
  if (e->allocs >= since + k) return GM_OK; /* the recorded free is later already */
  rp_map_entry_t *m = rp_blocks_get(e, ev->addr);
  if (!m) return GM_OK;
  *done = 1;
  return hold(e, m, since + k, err);
}

gm_status_t rp_events_cross(rp_engine_t *e, const gmt_event_t *ev, rp_map_entry_t *m, int *held,
                            gm_err_t *err) {
  *held = 0;
  if (!m->c || ev->stream == GMT_STREAM_NONE || m->c == (uint32_t)ev->stream + 1u) return GM_OK;
  e->event_frees++;
  if (e->opts.event_timing != RP_EVENTS_LATE) return GM_OK; /* recorded = early here */
  uint64_t k = e->opts.late_mallocs ? e->opts.late_mallocs : 1;
  *held = 1;
  return hold(e, m, e->allocs + k, err);
}
