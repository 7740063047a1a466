/* snap_stream.c: gpurec's default capture for PyTorch when its requests were streamed
 * (recorder/rec_tracker.c): the process's request stream merged with its CUPTI trace into one
 * trace, capture mode torch-history, as snap_merge.c does with a history pickle.
 *
 * The two inputs are traces of one process on one clock (the injection library's), each in time
 * order, so the merge streams: a first pass over the request stream collects PyTorch's segments
 * ((address, size) of every segment alloc/free) and the ranges it mapped (expandable segments);
 * the second walks both traces at once and writes each event as it comes. Memory is what those
 * sets hold (one entry per distinct segment), never a copy of the events, so a 10^8-event run
 * merges in a few MiB. The CUPTI events are classified as snap_merge.c does: PyTorch's own
 * driver calls (an alloc at a segment's address and size and its free, a VMM call inside a
 * mapped range), failed device allocations and empty_cache are left out (the stream says them
 * with PyTorch's words); every other one is another library's memory, flagged GMT_F_EXTERNAL.
 * A stream that ends early (the process was SIGKILLed: it is flushed every 250 ms) is merged as
 * far as it goes, and the header says where it stops. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "recorder/snapshot/snap_import.h"

typedef struct seg {
  uint64_t key[2]; /* address, size */
  uint64_t live;   /* for CUPTI's allocs: the size while the address is PyTorch's */
  UT_hash_handle hh;
} seg_t;

typedef struct range {
  uint64_t lo, hi;
} range_t;

typedef struct side {
  gmt_reader_t *r;
  gmt_event_t ev;
  int has; /* ev holds the next event */
  int truncated;
  gm_status_t st;
} side_t;

static int range_cmp(const void *a, const void *b) {
  const range_t *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int overlaps(const range_t *r, size_t n, uint64_t lo, uint64_t hi) {
  size_t a = 0, b = n; /* the first range that ends after lo */
  while (a < b) {
    size_t m = (a + b) / 2;
    if (r[m].hi <= lo) a = m + 1;
    else b = m;
  }
  return a < n && r[a].lo < hi;
}

static void side_next(side_t *s, gm_err_t *err) {
  s->has = 0;
  if (!s->r) return;
  gm_err_t e;
  gm_err_clear(&e);
  gm_status_t st = gmt_reader_next(s->r, &s->ev, &e);
  if (st == GM_OK) {
    s->has = 1;
  } else if (st != GM_END) { /* damage past what salvage skips: merged as far as it goes */
    s->truncated = 1;
  }
}

static gm_status_t open_side(side_t *s, const char *path, gm_err_t *err) {
  memset(s, 0, sizeof *s);
  gm_status_t st = gmt_reader_open_flags(&s->r, path, GMT_READ_SALVAGE, err);
  if (st != GM_OK) return gm_err_wrap(err, "cannot read '%s'", path);
  side_next(s, err);
  return GM_OK;
}

static void close_side(side_t *s) {
  if (s->r) {
    const gmt_reader_stats_t *rs = gmt_reader_stats(s->r);
    s->truncated |= rs->truncated || gmt_stats_partial(rs);
    gmt_reader_close(s->r);
  }
  s->r = NULL;
}

static gm_status_t kv_u64(gmt_header_t *h, const char *k, uint64_t v, gm_err_t *err) {
  char b[32];
  snprintf(b, sizeof b, "%llu", (unsigned long long)v);
  return gmt_header_kv_set(h, k, b, err);
}

static int device_mem(const gmt_event_t *e) {
  return e->mem_kind == GMT_MEM_DEVICE || e->mem_kind == GMT_MEM_UNKNOWN;
}

static int is_vmm(unsigned k) {
  return k == GMT_EV_VMM_RESERVE || k == GMT_EV_VMM_MAP || k == GMT_EV_VMM_UNMAP || k == GMT_EV_VMM_RELEASE;
}

/* Pass 1: PyTorch's segments and mapped ranges, and the stream's facts. */
static gm_status_t collect(const char *stream_path, seg_t **segs, range_t **maps, size_t *nmaps,
                           snap_stream_stats_t *ms, gm_err_t *err) {
  side_t s;
  gm_status_t st = open_side(&s, stream_path, err);
  size_t cap = 0;
  while (st == GM_OK && s.has) {
    const gmt_event_t *e = &s.ev;
    ms->stream_events++;
    ms->allocs += e->kind == GMT_EV_ALLOC;
    if (e->kind == GMT_EV_SEGMENT_ALLOC || e->kind == GMT_EV_SEGMENT_FREE) {
      ms->segments++;
      uint64_t key[2] = {e->addr, e->size};
      seg_t *g = NULL;
      HASH_FIND(hh, *segs, key, sizeof key, g);
      if (!g) {
        if (!(g = calloc(1, sizeof *g))) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
        memcpy(g->key, key, sizeof key);
        HASH_ADD(hh, *segs, key, sizeof g->key, g);
      }
    } else if ((e->kind == GMT_EV_VMM_MAP || e->kind == GMT_EV_VMM_UNMAP) && e->size) {
      if (*nmaps == cap) {
        cap = cap ? cap * 2 : 256;
        range_t *nm = realloc(*maps, cap * sizeof *nm);
        if (!nm) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
        *maps = nm;
      }
      (*maps)[(*nmaps)++] = (range_t){e->addr, e->addr + e->size};
    }
    if (e->ts_ns > ms->stream_last_ns) ms->stream_last_ns = e->ts_ns;
    side_next(&s, err);
  }
  if (s.r) ms->stream_dropped = gmt_reader_stats(s.r)->dropped;
  close_side(&s);
  ms->stream_truncated = s.truncated;
  if (*nmaps) { /* sorted and joined: a binary search per VMM call */
    qsort(*maps, *nmaps, sizeof **maps, range_cmp);
    size_t j = 0;
    for (size_t i = 1; i < *nmaps; i++) {
      if ((*maps)[i].lo <= (*maps)[j].hi) {
        if ((*maps)[i].hi > (*maps)[j].hi) (*maps)[j].hi = (*maps)[i].hi;
      } else {
        (*maps)[++j] = (*maps)[i];
      }
    }
    *nmaps = j + 1;
  }
  return st;
}

/* 1: PyTorch's own driver call or left out; 0: kept (external or no one's memory). */
static int leave_out(seg_t **segs, seg_t **live, const range_t *maps, size_t nmaps, const gmt_event_t *e,
                     snap_stream_stats_t *ms) {
  if (e->kind == GMT_EV_ALLOC_SITE) return 1;
  if (e->kind == GMT_EV_ALLOC && device_mem(e)) {
    uint64_t key[2] = {e->addr, e->size};
    seg_t *g = NULL;
    HASH_FIND(hh, *segs, key, sizeof key, g);
    if (!g) return 0;
    uint64_t lk[2] = {e->addr, 0};
    seg_t *l = NULL;
    HASH_FIND(hh, *live, lk, sizeof lk, l);
    if (!l && (l = calloc(1, sizeof *l))) {
      memcpy(l->key, lk, sizeof lk);
      HASH_ADD(hh, *live, key, sizeof l->key, l);
    }
    if (l) l->live = e->size;
    ms->segments_seen++;
    return 1;
  }
  if (e->kind == GMT_EV_FREE && device_mem(e)) {
    uint64_t lk[2] = {e->addr, 0};
    seg_t *l = NULL;
    HASH_FIND(hh, *live, lk, sizeof lk, l);
    if (!l || !l->live) return 0;
    l->live = 0;
    ms->segments_seen++;
    return 1;
  }
  if (is_vmm(e->kind) && device_mem(e) && nmaps)
    return overlaps(maps, nmaps, e->addr, e->addr + (e->size ? e->size : 1));
  return (e->kind == GMT_EV_ALLOC_FAILED && device_mem(e)) || e->kind == GMT_EV_EMPTY_CACHE;
}

static gm_status_t write_one(gmt_writer_t *w, side_t *s, gmt_event_t *e, uint64_t *last, gm_err_t *err) {
  if (e->ts_ns < *last) e->ts_ns = *last;
  *last = e->ts_ns;
  const char *str = e->callsite != GMT_NO_STRING ? gmt_reader_string(s->r, e->callsite) : NULL;
  e->callsite = GMT_NO_STRING;
  gm_status_t st = GM_OK;
  if (str) st = gmt_writer_intern(w, str, &e->callsite, err);
  return st == GM_OK ? gmt_writer_append(w, e, err) : st;
}

gm_status_t snap_merge_stream_file(const char *stream_path, const char *cupti_path, const char *out_path,
                                   const gmt_writer_opts_t *opts, snap_stream_stats_t *ms, gm_err_t *err) {
  snap_stream_stats_t local;
  if (!ms) ms = &local;
  memset(ms, 0, sizeof *ms);
  seg_t *segs = NULL, *live = NULL, *g, *tmp;
  range_t *maps = NULL;
  size_t nmaps = 0;
  gmt_writer_t *w = NULL;
  gmt_header_t h;
  gmt_header_init(&h);
  side_t c, s;
  memset(&c, 0, sizeof c);
  memset(&s, 0, sizeof s);
  gm_status_t st = collect(stream_path, &segs, &maps, &nmaps, ms, err);
  if (st == GM_OK) st = open_side(&c, cupti_path, err);
  if (st == GM_OK) st = open_side(&s, stream_path, err);
  if (st == GM_OK) st = gmt_header_copy(&h, gmt_reader_header(c.r), err);
  if (st == GM_OK) {
    h.capture_mode = GMT_CAPTURE_TORCH_HISTORY;
    char tool[64];
    snprintf(tool, sizeof tool, "gpurec %s", GM_VERSION);
    if ((st = gmt_header_set(&h.tool, tool, err)) == GM_OK &&
        (st = gmt_header_kv_set(&h, "torch_history.source", "stream", err)) == GM_OK &&
        (st = gmt_header_kv_set(&h, "torch_history.stacks", "none", err)) == GM_OK &&
        (st = gmt_header_kv_set(&h, "torch_history.clock", "cupti", err)) == GM_OK &&
        (st = kv_u64(&h, "torch_stream.events", ms->stream_events, err)) == GM_OK &&
        (st = kv_u64(&h, "torch_stream.dropped", ms->stream_dropped, err)) == GM_OK &&
        (st = kv_u64(&h, "torch_history.segments", ms->segments, err)) == GM_OK && ms->stream_truncated) {
      /* where the requests stop: a killed process's last flush */
      st = kv_u64(&h, "torch_stream.truncated_at_ns", ms->stream_last_ns, err);
    }
    const char *v = st == GM_OK ? gmt_header_kv_get(gmt_reader_header(s.r), "framework.pytorch") : NULL;
    if (st == GM_OK && v && !gmt_header_kv_get(&h, "framework.pytorch"))
      st = gmt_header_kv_set(&h, "framework.pytorch", v, err);
  }
  if (st == GM_OK) st = gmt_writer_open_atomic(&w, out_path, &h, opts, err);
  uint64_t last = 0;
  while (st == GM_OK && (c.has || s.has)) {
    if (s.has && (!c.has || s.ev.ts_ns <= c.ev.ts_ns)) {
      st = write_one(w, &s, &s.ev, &last, err);
      side_next(&s, err);
      continue;
    }
    gmt_event_t *e = &c.ev;
    if (leave_out(&segs, &live, maps, nmaps, e, ms)) {
      ms->cupti_dropped++;
    } else {
      if (e->kind != GMT_EV_MARKER && e->kind != GMT_EV_DEVICE_USAGE) {
        e->flags |= GMT_F_EXTERNAL;
        ms->external++;
      }
      st = write_one(w, &c, e, &last, err);
    }
    side_next(&c, err);
  }
  if (w) {
    if (st == GM_OK) {
      gmt_writer_add_dropped(w, gmt_reader_stats(c.r)->dropped + gmt_reader_stats(s.r)->dropped);
      st = gmt_writer_close(w, err);
    } else {
      gmt_writer_abandon(w);
    }
  }
  close_side(&c);
  close_side(&s);
  ms->cupti_truncated = c.truncated;
  HASH_ITER(hh, segs, g, tmp) {
    HASH_DEL(segs, g);
    free(g);
  }
  HASH_ITER(hh, live, g, tmp) {
    HASH_DEL(live, g);
    free(g);
  }
  free(maps);
  gmt_header_free(&h);
  return st;
}
