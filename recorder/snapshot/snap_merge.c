/* snap_merge.c: gpurec's default capture for PyTorch (capture mode torch-history): PyTorch's own
 * memory history of a process, merged with the CUPTI trace the same process wrote, into one
 * trace.
 *
 * Why two sources: the history holds PyTorch's requests exactly (the caching allocator left as
 * the user configured it, which a request-level CUPTI capture cannot do), but knows nothing of
 * the memory other libraries take from the driver beside it (NCCL's buffers and VMM maps,
 * workspaces outside PyTorch's pool, pinned host memory). The CUPTI trace sees every driver call
 * but, for PyTorch, only its segments. So:
 *   - the history's events come as `gpurec import` makes them (same order, same fields: a replay
 *     of the merged trace is the replay of a torch-mode trace), their times moved from PyTorch's
 *     wall clock (µs) onto the CUPTI trace's clock (its start_time_ns);
 *   - CUPTI events that are PyTorch's own driver calls (an alloc/free whose address and size are
 *     a segment of the history, a VMM call on a range the history mapped) are left out, and the
 *     history's segment events they match take their correlation id and context: the check that
 *     the driver saw each segment (header torch_history.segments_seen_by_cupti);
 *   - failed driver allocations and pool trims are left out too: PyTorch retries a failed
 *     cudaMalloc after freeing its cache, and its history says which requests failed;
 *   - every other CUPTI event is kept, merged by time, flagged GMT_F_EXTERNAL (a marker excepted):
 *     another library's memory (its allocations, frees, VMM calls, pool records), external to a
 *     replay;
 *   - the alloc_site notes (the callsite of each request, read on the allocating thread by the
 *     recorder's hook, recorder/rec_sites.c) are not events of the merged trace: each gives its
 *     callsite to the history's alloc it belongs to (snap_sites.c), where the history has none.
 * The header is the CUPTI trace's (host, GPU, versions, command line, environment) with the
 * snapshot's settings added and capture mode torch-history.
 * This file: the merge of a history (held in memory) and the entry points. The CUPTI side is
 * read by snap_side.c, its calls matched to the history's segments by snap_match.c; a streamed
 * recording is merged by snap_merge_streamed.c. */
#include <stdlib.h>
#include <string.h>

#include "recorder/snapshot/snap_import.h"
#include "recorder/snapshot/snap_side.h"

static gm_status_t merge_doc(const pkr_val_t *root, snap_side_t *c, const char *out_path, const char *stacks,
                             const gmt_writer_opts_t *opts, snap_merge_stats_t *ms, gm_err_t *err) {
  snap_pass_t ps;
  gm_status_t s;
  if ((s = snap_plan(root, &ps, err))) return s;
  snap_segq_t *queues = NULL;
  uint64_t dropped = 0, external = 0, segments = 0, seen = 0;
  gmt_header_t h;
  gmt_header_init(&h);
  gmt_writer_t *w = NULL;
  snap_cs_cache_t *cache = NULL;
  snap_site_t *sites = NULL;
  size_t nsites = 0, site_hits = 0, allocs = 0;
  const char **site_of = NULL;
  s = snap_match_classify(&ps, c, &queues, &dropped, &external, &sites, &nsites, err);
  if (s == GM_OK && nsites) {
    if (!(site_of = calloc(ps.n + 1, sizeof *site_of))) s = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
    else site_hits = snap_sites_match(&ps, sites, nsites, snap_clock_shift(&ps, &c->header),
                                      snap_clock_aligned(&ps, &c->header), site_of);
    for (size_t k = 0; k < ps.n; k++)
      allocs += ps.evs[k]->ev.kind == GMT_EV_ALLOC && !(ps.evs[k]->ev.flags & GMT_F_SYNTHETIC);
  }
  for (size_t k = 0; k < ps.n && s == GM_OK; k++) {
    gmt_event_t *e = &ps.evs[k]->ev;
    if (e->kind != GMT_EV_SEGMENT_ALLOC && e->kind != GMT_EV_SEGMENT_FREE) continue;
    segments++;
    seen += (uint64_t)snap_match_claim(queues, c, e);
  }
  if (s == GM_OK) s = snap_fill_header(&h, root, &ps, &c->header, err);
  if (s == GM_OK) {
    h.capture_mode = GMT_CAPTURE_TORCH_HISTORY;
    h.start_time_ns = c->header.start_time_ns; /* the CUPTI trace's clock */
    char tool[64];
    snprintf(tool, sizeof tool, "gpurec %s", GM_VERSION);
    if ((s = gmt_header_set(&h.tool, tool, err)) == GM_OK &&
        (s = gmt_header_kv_set(&h, "torch_history.stacks", stacks ? stacks : "none", err)) == GM_OK &&
        (s = gmt_header_kv_set(&h, "torch_history.source", "history", err)) == GM_OK &&
        (s = snap_kv_u64(&h, "torch_history.segments", segments, err)) == GM_OK &&
        (s = snap_kv_u64(&h, "torch_history.segments_seen_by_cupti", seen, err)) == GM_OK &&
        (s = snap_kv_u64(&h, "torch_history.external_events", external, err)) == GM_OK &&
        (s = snap_kv_u64(&h, "torch_history.cupti_dropped", dropped, err)) == GM_OK &&
        (s = gmt_header_kv_set(&h, "torch_history.clock", !ps.has_time ? "none"
                                                       : snap_clock_aligned(&ps, &c->header) ? "cupti" : "own",
                               err)) == GM_OK &&
        c->truncated)
      s = gmt_header_kv_set(&h, "torch_history.cupti_truncated", "1", err);
    /* the callsites of the requests (rec_sites.c's notes): how many allocations got one */
    if (s == GM_OK && nsites && (s = snap_kv_u64(&h, "torch_history.alloc_site_notes", nsites, err)) == GM_OK)
      s = snap_kv_u64(&h, "torch_history.allocs_with_callsite", site_hits, err);
  }
  if (s == GM_OK) s = snap_side_mark_coverage(&h, &ps, c, NULL, err);
  if (s == GM_OK) s = gmt_writer_open_atomic(&w, out_path, &h, opts, err);
  if (s == GM_OK) {
    gmt_writer_add_dropped(w, c->dropped_records);
    /* History time (ns since ps.start_time_ns) onto the CUPTI clock (ns since its start). */
    int64_t shift = snap_clock_shift(&ps, &c->header);
    uint64_t last = 0;
    size_t i = 0, k = 0;
    while (s == GM_OK && (i < c->n || k < ps.n)) {
      while (i < c->n && c->v[i].ev.kind == 0) i++;
      uint64_t ht = 0;
      if (k < ps.n) {
        int64_t t = (int64_t)ps.evs[k]->ev.ts_ns + shift;
        ht = t > 0 ? (uint64_t)t : 0;
        if (ht < last) ht = last;
      }
      if (k < ps.n && (i >= c->n || ht <= c->v[i].ev.ts_ns)) {
        const char *site = site_of ? site_of[k] : NULL;
        snap_event_t *e = ps.evs[k++];
        e->ev.ts_ns = last = ht;
        s = snap_event_strings(w, &cache, e, err);
        if (s == GM_OK && site && e->ev.callsite == GMT_NO_STRING) /* the history's own stack wins */
          s = gmt_writer_intern(w, site, &e->ev.callsite, err);
        if (s == GM_OK) s = gmt_writer_append(w, &e->ev, err);
      } else if (i < c->n) {
        snap_cev_t *ce = &c->v[i++];
        if (ce->ev.ts_ns < last) ce->ev.ts_ns = last;
        last = ce->ev.ts_ns;
        ce->ev.callsite = GMT_NO_STRING;
        if (ce->str) s = gmt_writer_intern(w, ce->str, &ce->ev.callsite, err);
        if (s == GM_OK) s = gmt_writer_append(w, &ce->ev, err);
      }
    }
    if (s == GM_OK) s = gmt_writer_close(w, err);
    else gmt_writer_abandon(w);
  }
  if (ms) {
    ms->entries = ps.entries;
    ms->history_events = ps.n;
    ms->segments = segments;
    ms->segments_seen = seen;
    ms->external = external;
    ms->cupti_dropped = dropped;
    ms->cupti_truncated = c->truncated;
    ms->site_notes = nsites;
    ms->allocs = allocs;
    ms->allocs_with_callsite = site_hits;
    ms->streamed = 0;
  }
  free(site_of);
  free(sites);
  snap_cs_cache_free(&cache);
  snap_match_free(&queues);
  gmt_header_free(&h);
  snap_plan_free(&ps);
  return s;
}

gm_status_t snap_merge_file(const char *pickle_path, const char *cupti_path, const char *out_path,
                            const char *stacks, const gmt_writer_opts_t *opts, snap_merge_stats_t *st,
                            gm_err_t *err) {
  return snap_merge_file_progress(pickle_path, cupti_path, out_path, stacks, opts, st, NULL, NULL, err);
}

static gm_status_t merge_file(const char *pickle_path, const char *cupti_path, const char *out_path,
                              const char *stacks, const gmt_writer_opts_t *opts, snap_merge_stats_t *st,
                              snap_progress_fn fn, void *ctx, int held, gm_err_t *err);

gm_status_t snap_merge_file_progress(const char *pickle_path, const char *cupti_path, const char *out_path,
                                     const char *stacks, const gmt_writer_opts_t *opts, snap_merge_stats_t *st,
                                     snap_progress_fn fn, void *ctx, gm_err_t *err) {
  return merge_file(pickle_path, cupti_path, out_path, stacks, opts, st, fn, ctx, 0, err);
}

gm_status_t snap_merge_file_held(const char *pickle_path, const char *cupti_path, const char *out_path,
                                 snap_merge_stats_t *st, gm_err_t *err) {
  return merge_file(pickle_path, cupti_path, out_path, "none", NULL, st, NULL, NULL, 1, err);
}

static gm_status_t merge_file(const char *pickle_path, const char *cupti_path, const char *out_path,
                              const char *stacks, const gmt_writer_opts_t *opts, snap_merge_stats_t *st,
                              snap_progress_fn fn, void *ctx, int held, gm_err_t *err) {
  if (st) memset(st, 0, sizeof *st);
  snap_side_t c;
  memset(&c, 0, sizeof c);
  gmt_header_init(&c.header);
  c.compact = !held && snap_side_streamed(cupti_path); /* streamed: the file read twice, the CUPTI side not held */
  if (c.compact && !(c.bd = snap_bounded_new())) {
    snap_side_free(&c);
    return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  }
  c.progress = fn;
  c.progress_ctx = ctx;
  gm_status_t s = snap_side_read(cupti_path, &c, err);
  if (s) {
    gm_err_wrap(err, "cannot read the CUPTI trace '%s'", cupti_path);
    snap_side_free(&c);
    return s;
  }
  uint8_t *buf = NULL;
  size_t len = 0;
  pkr_doc_t *doc = NULL;
  if (!pickle_path) { /* gpurec import of an unmerged recording: the stream alone */
    s = c.ntorch ? snap_merge_streamed(NULL, &c, cupti_path, out_path, stacks, opts, st, err)
                 : gm_err_set(err, GM_ERR_INVAL, "it holds no unmerged PyTorch requests (it is a gpumem trace "
                                                 "already: gpureplay and gpuanalyze read it as it is)");
  } else if ((s = snap_read_file(pickle_path, &buf, &len, err)) == GM_OK) {
    if (!snap_is_pickle(buf, len))
      s = gm_err_set(err, GM_ERR_FORMAT, "'%s' is not a pickle (a PyTorch memory snapshot is one)", pickle_path);
    else if ((s = pkr_parse(buf, len, &doc, err)) == GM_OK)
      s = c.ntorch ? snap_merge_streamed(pkr_doc_root(doc), &c, cupti_path, out_path, stacks, opts, st, err)
                   : merge_doc(pkr_doc_root(doc), &c, out_path, stacks, opts, st, err);
  }
  pkr_doc_free(doc);
  free(buf);
  snap_side_free(&c);
  return s;
}
