/* snap_merge_streamed.c: the torch-history merge of a streamed recording.
 *
 * PyTorch's requests streamed into the process's trace (rec_torch_stream.c) are its requests, in
 * the trace's order, on its clock: the merged trace is written in one pass over that file, each
 * request as it is read, CUPTI's events merged in by time as a second reader of the same file
 * meets them. Nothing is held per event: the first pass counts the driver's calls and PyTorch's
 * segment calls per (kind, address, size) (snap_stream.c), every other CUPTI event is decided by
 * its kind (snap_side_kind), and the readers give back the pages they have decoded
 * (GMT_READ_DROP_BEHIND). So a recording of any length merges in a few MiB: what grows is the
 * distinct segments and live allocations. (snap_merge_file_held: the same merge holding every
 * CUPTI event and segment call, the reference of the tests.) Before the pass: the plan of the
 * snapshot (the allocator's settings, the blocks alive where the stream starts: the synthetic
 * initial state) with what it needs of the segment calls and the OOMs; each segment call takes
 * its driver call's identity, matched in the trace's order per (kind, address, size). Times are
 * those of a history (microseconds), as the in-memory merge of a history writes them. */
#include <stdlib.h>
#include <string.h>

#include "recorder/snapshot/snap_side.h"

/* Header room for the marks of a cut recording's merge (gmt_writer_mark after the events). */
#define SNAP_MERGE_ROOM 512

/* The CUPTI events kept up to time t (all: to the end), written. */
static gm_status_t cupti_until(snap_out_t *o, uint64_t t, int all, gm_err_t *err) {
  gm_status_t s = GM_OK;
  while (s == GM_OK && (s = snap_side_peek(o, err)) == GM_OK && o->has_next) {
    gmt_event_t *e = &o->next;
    if (!all && e->ts_ns >= t) break; /* a request first on a tie */
    o->has_next = 0;
    if (e->ts_ns < o->last) e->ts_ns = o->last;
    o->last = e->ts_ns;
    e->callsite = GMT_NO_STRING;
    if (o->has_str) s = gmt_writer_intern(o->w, o->str, &e->callsite, err);
    if (s == GM_OK) s = gmt_writer_append(o->w, e, err);
    o->written++;
  }
  return s;
}

static gm_status_t stream_requests(snap_out_t *o, const char *path, const snap_pass_t *ps, gm_err_t *err) {
  snap_side_t *c = o->c;
  /* the synthetic initial state, where the stream starts (as the in-memory plan times it) */
  uint64_t t0 = c->stream_first_ts / 1000u * 1000u;
  gm_status_t s = GM_OK;
  if (c->compact && (s = gmt_reader_open_flags(&o->rb, path, GMT_READ_SALVAGE | GMT_READ_DROP_BEHIND, err)) == GM_OK)
    s = snap_bounded_open(c->bd, path, GMT_READ_SALVAGE | GMT_READ_DROP_BEHIND, err);
  for (size_t k = 0; k < ps->synthetic && s == GM_OK; k++) {
    gmt_event_t e = ps->evs[k]->ev;
    if ((s = cupti_until(o, t0, 0, err))) break;
    e.ts_ns = o->last = t0 > o->last ? t0 : o->last;
    s = gmt_writer_append(o->w, &e, err);
    o->written++;
  }
  gmt_reader_t *r = NULL;
  if (s == GM_OK) s = gmt_reader_open_flags(&r, path, GMT_READ_SALVAGE | GMT_READ_DROP_BEHIND, err);
  size_t kept = 0;
  uint64_t nread = 0;
  gmt_event_t ev;
  while (s == GM_OK && (s = gmt_reader_next(r, &ev, err)) == GM_OK) {
    snap_side_progress(c, r, 2, ++nread, 0);
    if (!(ev.flags & GMT_F_TORCH_STREAM)) continue;
    gmt_event_t e = ev;
    e.flags &= ~GMT_F_TORCH_STREAM;
    e.callsite = GMT_NO_STRING;
    if (e.kind == GMT_EV_ALLOC_FAILED) e.corr_id = 0; /* the device's free bytes: the header has them */
    if (c->compact && (e.kind == GMT_EV_SEGMENT_ALLOC || e.kind == GMT_EV_SEGMENT_FREE)) {
      if ((s = snap_bounded_claim(c->bd, &e, err))) break; /* the driver call's identity */
    } else if (!c->compact && snap_stream_kept(e.kind) && kept < c->ntorch_kept) {
      const gmt_event_t *m = &c->torch[kept++];
      if (e.kind == GMT_EV_SEGMENT_ALLOC || e.kind == GMT_EV_SEGMENT_FREE) { /* matched before */
        e.corr_id = m->corr_id;
        e.context = m->context;
      }
    }
    uint64_t t = e.ts_ns / 1000u * 1000u;
    if ((s = cupti_until(o, t, 0, err))) break;
    e.ts_ns = o->last = t > o->last ? t : o->last;
    const char *site = ev.callsite != GMT_NO_STRING ? gmt_reader_string(r, ev.callsite) : NULL;
    if (site) s = gmt_writer_intern(o->w, site, &e.callsite, err);
    if (s == GM_OK) s = gmt_writer_append(o->w, &e, err);
    o->written++;
  }
  if (s == GM_END) s = GM_OK;
  if (r) snap_side_progress(c, r, 2, nread, 1);
  gmt_reader_close(r);
  if (s == GM_OK) s = cupti_until(o, 0, 1, err);
  gmt_reader_close(o->rb);
  o->rb = NULL;
  snap_cls_free(o->cls);
  o->cls = NULL;
  free(o->str);
  o->str = NULL;
  return s;
}

gm_status_t snap_merge_streamed(const pkr_val_t *root, snap_side_t *c, const char *path, const char *out_path,
                                const char *stacks, const gmt_writer_opts_t *opts, snap_merge_stats_t *ms,
                                gm_err_t *err) {
  snap_pass_t ps;
  size_t nplan = c->ntorch_kept;
  const gmt_event_t *plan = c->compact ? snap_bounded_plan(c->bd, &nplan) : c->torch;
  gm_status_t s = snap_plan_streamed(root, plan, nplan, &ps, err);
  if (s) return s;
  ps.start_time_ns += c->header.start_time_ns; /* the stream is on the trace's own clock */
  snap_segq_t *queues = NULL;
  uint64_t dropped = 0, external = 0, segments = 0, seen = 0;
  if (c->compact) { /* counted in the first pass; each call decided again as it is written */
    uint64_t own = 0;
    snap_bounded_counts(c->bd, &segments, &seen, &own, &external);
    dropped = own;
  } else {
    snap_site_t *sites = NULL; /* an older recorder's notes: the stream carries callsites now */
    size_t nsites = 0;
    s = snap_match_classify(&ps, c, &queues, &dropped, &external, &sites, &nsites, err);
    free(sites);
  }
  dropped += c->other_dropped; /* the CUPTI events not held, decided by their kind */
  external += c->other_external;
  /* each segment call takes its driver call's identity, in the trace's order (compact: as it
   * is written) */
  for (size_t k = 0; k < c->ntorch_kept && s == GM_OK && !c->compact; k++) {
    gmt_event_t *e = &c->torch[k];
    if (e->kind != GMT_EV_SEGMENT_ALLOC && e->kind != GMT_EV_SEGMENT_FREE) continue;
    segments++;
    seen += (uint64_t)snap_match_claim(queues, c, e);
  }
  gmt_header_t h;
  gmt_header_init(&h);
  if (s == GM_OK) s = snap_fill_header(&h, root, &ps, &c->header, err);
  if (s == GM_OK) {
    h.capture_mode = GMT_CAPTURE_TORCH_HISTORY;
    h.start_time_ns = c->header.start_time_ns;
    char tool[64];
    snprintf(tool, sizeof tool, "gpurec %s", GM_VERSION);
    if ((s = gmt_header_set(&h.tool, tool, err)) == GM_OK &&
        (s = gmt_header_kv_set(&h, "torch_history.stacks", stacks ? stacks : "none", err)) == GM_OK &&
        (s = gmt_header_kv_set(&h, "torch_history.source", "stream", err)) == GM_OK &&
        (s = snap_kv_u64(&h, "torch_history.segments", segments, err)) == GM_OK &&
        (s = snap_kv_u64(&h, "torch_history.segments_seen_by_cupti", seen, err)) == GM_OK &&
        (s = snap_kv_u64(&h, "torch_history.external_events", external, err)) == GM_OK &&
        (s = snap_kv_u64(&h, "torch_history.cupti_dropped", dropped, err)) == GM_OK &&
        (s = gmt_header_kv_set(&h, "torch_history.clock", "cupti", err)) == GM_OK && c->truncated)
      s = gmt_header_kv_set(&h, "torch_history.cupti_truncated", "1", err);
    /* each alloc carries its callsite: a note of its own (as the history's notes are counted)
     * that always finds its alloc */
    if (s == GM_OK && c->stream_sites &&
        (s = snap_kv_u64(&h, "torch_history.alloc_site_notes", c->stream_sites, err)) == GM_OK)
      s = snap_kv_u64(&h, "torch_history.allocs_with_callsite", c->stream_sites, err);
  }
  if (s == GM_OK) s = snap_side_mark_coverage(&h, &ps, c, path, err);
  /* a recording cut (its process killed, its file truncated): the header says where the merge
   * stops, once it is written (damaged chunks inside it are cupti_lost: a gap, not an end) */
  if (c->cut && h.room < SNAP_MERGE_ROOM) h.room = SNAP_MERGE_ROOM;
  gmt_writer_t *w = NULL;
  if (s == GM_OK) s = gmt_writer_open_atomic(&w, out_path, &h, opts, err);
  if (s == GM_OK) {
    gmt_writer_add_dropped(w, c->dropped_records);
    snap_out_t o;
    memset(&o, 0, sizeof o);
    o.w = w;
    o.c = c;
    s = stream_requests(&o, path, &ps, err);
    if (s == GM_OK && c->cut) {
      gmt_coverage_t end;
      memset(&end, 0, sizeof end);
      end.partial = 1;
      end.why = GMT_COV_CUPTI_LOST | GMT_COV_TRUNCATED;
      end.has_end = 1;
      end.to_event = o.written;
      end.to_ns = o.last;
      s = gmt_writer_mark(w, &end, err);
    }
    if (s == GM_OK) s = gmt_writer_close(w, err);
    else gmt_writer_abandon(w);
  }
  if (ms) {
    ms->entries = c->ntorch;
    ms->history_events = ps.synthetic + c->ntorch;
    ms->segments = segments;
    ms->segments_seen = seen;
    ms->external = external;
    ms->cupti_dropped = dropped;
    ms->cupti_truncated = c->truncated;
    ms->site_notes = c->stream_sites;
    ms->allocs = c->stream_allocs;
    ms->allocs_with_callsite = c->stream_sites;
    ms->streamed = 1;
  }
  snap_match_free(&queues);
  gmt_header_free(&h);
  snap_plan_free(&ps);
  return s;
}
