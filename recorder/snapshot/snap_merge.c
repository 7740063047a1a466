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
 * snapshot's settings added and capture mode torch-history. */
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "recorder/snapshot/snap_import.h"
#include "recorder/snapshot/snap_internal.h"

/* One CUPTI event with its string (copied: the reader keeps one chunk's strings). */
typedef struct cev {
  gmt_event_t ev;
  char *str;
  int pytorch; /* one of PyTorch's own driver calls (matched to the history) */
} cev_t;

typedef struct cupti_side {
  cev_t *v;
  size_t n, cap;
  gmt_header_t header;
  uint64_t dropped_records; /* CUPTI's own drop count */
  int truncated;
  int cut; /* ... its file ends before its index */
  /* PyTorch's allocator trace as the recorder streamed it: counted, and (not compact) of its
   * events those the header and the matching need (segment and VMM calls, OOMs) kept; the
   * requests are read again from the file as the merged trace is written (merge_streamed) */
  gmt_event_t *torch;
  size_t ntorch_kept, torch_cap;
  uint64_t ntorch, stream_allocs, stream_sites, stream_first_ts;
  /* compact (a streamed recording): no event held; the driver calls that may be PyTorch's own
   * (driver_call) and its segment calls are counted by bd (snap_stream.c), every other CUPTI
   * event is decided by its kind (side_kind) and counted here; the merge reads them all again
   * from the file */
  int compact;
  snap_bounded_t *bd;
  uint64_t other_dropped, other_external;
  /* what the merge is doing, for a terminal (snap_merge_file_progress) */
  snap_progress_fn progress;
  void *progress_ctx;
} cupti_side_t;

static void cupti_free(cupti_side_t *c) {
  for (size_t i = 0; i < c->n; i++) free(c->v[i].str);
  free(c->v);
  free(c->torch);
  snap_bounded_free(c->bd);
  gmt_header_free(&c->header);
}

static int device_mem(const gmt_event_t *e) {
  return e->mem_kind == GMT_MEM_DEVICE || e->mem_kind == GMT_MEM_UNKNOWN;
}

static int is_vmm(unsigned k) {
  return k == GMT_EV_VMM_RESERVE || k == GMT_EV_VMM_MAP || k == GMT_EV_VMM_UNMAP || k == GMT_EV_VMM_RELEASE;
}

/* A CUPTI event that may be one of PyTorch's own driver calls: which it is depends on the whole
 * recording (classify). */
static int driver_call(const gmt_event_t *e) {
  return (e->kind == GMT_EV_ALLOC || e->kind == GMT_EV_FREE || is_vmm(e->kind)) && device_mem(e);
}

/* What classify makes of any other CUPTI event, from its kind alone (the same rules). */
enum { SIDE_OUT, SIDE_DROPPED, SIDE_KEPT, SIDE_EXTERNAL };
static int side_kind(const gmt_event_t *e) {
  if (e->kind == GMT_EV_ALLOC_SITE) return SIDE_OUT; /* an older recorder's note: the stream carries callsites */
  if ((e->kind == GMT_EV_ALLOC_FAILED && device_mem(e)) || e->kind == GMT_EV_EMPTY_CACHE) return SIDE_DROPPED;
  if (e->kind == GMT_EV_MARKER || e->kind == GMT_EV_DEVICE_USAGE) return SIDE_KEPT; /* no one's memory */
  return SIDE_EXTERNAL;
}

/* Progress every 2^20 events of a pass (and at its end). */
static void progress(const cupti_side_t *c, gmt_reader_t *r, int pass, uint64_t events, int end) {
  if (!c->progress || !c->compact || (!end && (events & ((1u << 20) - 1)))) return;
  c->progress(c->progress_ctx, pass, events, gmt_reader_stats(r)->chunks, gmt_reader_chunk_count(r));
}

/* Does the trace hold PyTorch's streamed requests? Read up to the first one. */
static int stream_probe(const char *path) {
  gmt_reader_t *r = NULL;
  if (gmt_reader_open_flags(&r, path, GMT_READ_SALVAGE, NULL) != GM_OK) return 0;
  gmt_event_t buf[512];
  size_t n = 0;
  int found = 0;
  while (!found && gmt_reader_next_batch(r, buf, sizeof buf / sizeof buf[0], &n, NULL) == GM_OK)
    for (size_t i = 0; i < n && !found; i++) found = (buf[i].flags & GMT_F_TORCH_STREAM) != 0;
  gmt_reader_close(r);
  return found;
}

/* The streamed events kept in memory: a segment's or a mapping's (matched to the driver's
 * calls before anything is written) and an OOM's (the header says its free bytes). */
static int stream_kept(unsigned k) {
  return k == GMT_EV_SEGMENT_ALLOC || k == GMT_EV_SEGMENT_FREE || k == GMT_EV_VMM_MAP ||
         k == GMT_EV_VMM_UNMAP || k == GMT_EV_ALLOC_FAILED;
}

/* One event of the CUPTI side, with its callsite's string copied out of the reader. */
static gm_status_t cupti_add(cupti_side_t *c, gmt_reader_t *r, const gmt_event_t *ev, gm_err_t *err) {
  if (c->n == c->cap) {
    size_t cap = c->cap ? c->cap * 2 : 1024;
    cev_t *nv = realloc(c->v, cap * sizeof *nv);
    if (!nv) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
    c->v = nv;
    c->cap = cap;
  }
  cev_t *e = &c->v[c->n++];
  memset(e, 0, sizeof *e);
  e->ev = *ev;
  const char *s = ev->callsite != GMT_NO_STRING ? gmt_reader_string(r, ev->callsite) : NULL;
  if (s && !(e->str = strdup(s))) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  return GM_OK;
}

static gm_status_t cupti_read(const char *path, cupti_side_t *c, gm_err_t *err) {
  gmt_reader_t *r = NULL;
  gm_status_t st = gmt_reader_open_flags(&r, path, GMT_READ_SALVAGE | GMT_READ_DROP_BEHIND, err);
  if (st != GM_OK) return st;
  st = gmt_header_copy(&c->header, gmt_reader_header(r), err);
  gmt_event_t ev;
  uint64_t nread = 0;
  while (st == GM_OK && (st = gmt_reader_next(r, &ev, err)) == GM_OK) {
    progress(c, r, 1, ++nread, 0);
    if (!(ev.flags & GMT_F_TORCH_STREAM)) {
      if (!c->compact) {
        st = cupti_add(c, r, &ev, err);
      } else if (driver_call(&ev)) {
        st = snap_bounded_driver(c->bd, &ev, err);
      } else {
        int k = side_kind(&ev);
        c->other_dropped += k == SIDE_DROPPED;
        c->other_external += k == SIDE_EXTERNAL;
      }
      continue;
    }
    /* a request, not a driver call */
    if (!c->ntorch++ || ev.ts_ns < c->stream_first_ts) c->stream_first_ts = ev.ts_ns;
    if (ev.kind == GMT_EV_ALLOC) {
      c->stream_allocs++;
      c->stream_sites += ev.callsite != GMT_NO_STRING;
    }
    if (!stream_kept(ev.kind)) continue;
    if (c->compact) {
      st = snap_bounded_torch(c->bd, &ev, err);
      continue;
    }
    if (c->ntorch_kept == c->torch_cap) {
      size_t cap = c->torch_cap ? c->torch_cap * 2 : 256;
      gmt_event_t *nv = realloc(c->torch, cap * sizeof *nv);
      if (!nv) {
        st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
        break;
      }
      c->torch = nv;
      c->torch_cap = cap;
    }
    c->torch[c->ntorch_kept++] = ev;
  }
  if (st == GM_END) st = GM_OK;
  if (st == GM_OK && c->compact) st = snap_bounded_finish(c->bd, err);
  progress(c, r, 1, nread, 1);
  const gmt_reader_stats_t *rs = gmt_reader_stats(r);
  c->dropped_records = rs->dropped;
  c->truncated = rs->truncated || gmt_stats_partial(rs);
  c->cut = rs->truncated;
  gmt_reader_close(r);
  return st;
}

/* ---- matching CUPTI's driver calls to the history's segments -------------------------------- */

typedef struct seg_key {
  uint64_t addr, size;
  uint8_t kind; /* GMT_EV_ALLOC or GMT_EV_FREE: the CUPTI side's kind */
} seg_key_t;

/* The CUPTI events of one (kind, address, size), in time order, for the history's segment events
 * to claim one by one. */
typedef struct seg_q {
  seg_key_t key;
  size_t *idx, n, cap, next;
  UT_hash_handle hh;
} seg_q_t;

static seg_q_t *q_find(seg_q_t *h, uint8_t kind, uint64_t addr, uint64_t size) {
  seg_key_t k;
  memset(&k, 0, sizeof k);
  k.addr = addr;
  k.size = size;
  k.kind = kind;
  seg_q_t *q;
  HASH_FIND(hh, h, &k, sizeof k, q);
  return q;
}

static seg_q_t *q_get(seg_q_t **h, uint8_t kind, uint64_t addr, uint64_t size) {
  seg_q_t *q = q_find(*h, kind, addr, size);
  if (q) return q;
  if (!(q = calloc(1, sizeof *q))) return NULL;
  q->key.addr = addr;
  q->key.size = size;
  q->key.kind = kind;
  HASH_ADD(hh, *h, key, sizeof q->key, q);
  return q;
}

static int q_push(seg_q_t *q, size_t i) {
  if (q->n == q->cap) {
    size_t cap = q->cap ? q->cap * 2 : 4;
    size_t *ni = realloc(q->idx, cap * sizeof *ni);
    if (!ni) return -1;
    q->idx = ni;
    q->cap = cap;
  }
  q->idx[q->n++] = i;
  return 0;
}

static void q_free_all(seg_q_t **h) {
  seg_q_t *q, *t;
  HASH_ITER(hh, *h, q, t) {
    HASH_DEL(*h, q);
    free(q->idx);
    free(q);
  }
}

/* Address ranges the history mapped (expandable segments), sorted and joined. */
typedef struct range {
  uint64_t lo, hi;
} range_t;

static int range_cmp(const void *a, const void *b) {
  const range_t *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int ranges_overlap(const range_t *r, size_t n, uint64_t lo, uint64_t hi) {
  size_t a = 0, b = n; /* the first range with r.hi > lo */
  while (a < b) {
    size_t m = a + (b - a) / 2;
    if (r[m].hi <= lo) a = m + 1;
    else b = m;
  }
  return a < n && r[a].lo < hi;
}

/* Mark the CUPTI events that are PyTorch's own (or left out), queue the segment calls for the
 * history to claim, flag the rest external. */
static gm_status_t classify(const snap_pass_t *ps, cupti_side_t *c, seg_q_t **queues, uint64_t *dropped,
                            uint64_t *external, snap_site_t **sites, size_t *nsites, gm_err_t *err) {
  seg_q_t *segs = NULL; /* (addr, size) of the history's segments: a set */
  range_t *maps = NULL;
  size_t nmaps = 0;
  gm_status_t st = GM_OK;
  for (size_t k = 0; k < ps->n && st == GM_OK; k++) {
    const gmt_event_t *e = &ps->evs[k]->ev;
    if (e->kind == GMT_EV_SEGMENT_ALLOC || e->kind == GMT_EV_SEGMENT_FREE) {
      if (!q_get(&segs, 0, e->addr, e->size)) st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
    } else if ((e->kind == GMT_EV_VMM_MAP || e->kind == GMT_EV_VMM_UNMAP) && e->size) {
      range_t *nm = realloc(maps, (nmaps + 1) * sizeof *nm);
      if (!nm) {
        st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
        break;
      }
      maps = nm;
      maps[nmaps].lo = e->addr;
      maps[nmaps].hi = e->addr + e->size;
      nmaps++;
    }
  }
  if (nmaps) {
    qsort(maps, nmaps, sizeof *maps, range_cmp);
    size_t j = 0;
    for (size_t i = 1; i < nmaps; i++) {
      if (maps[i].lo <= maps[j].hi) {
        if (maps[i].hi > maps[j].hi) maps[j].hi = maps[i].hi;
      } else {
        maps[++j] = maps[i];
      }
    }
    nmaps = j + 1;
  }
  /* CUPTI addresses that are PyTorch segments now (n = 1 while live, next = the size): the
   * free is matched by the address its alloc had */
  seg_q_t *live = NULL;
  for (size_t i = 0; i < c->n && st == GM_OK; i++) {
    cev_t *ce = &c->v[i];
    gmt_event_t *e = &ce->ev;
    int drop = 0;
    if (e->kind == GMT_EV_ALLOC_SITE) { /* a request's callsite, for the history's alloc */
      if (!*sites && !(*sites = malloc(c->n * sizeof **sites))) {
        st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
        break;
      }
      (*sites)[(*nsites)++] = (snap_site_t){e->addr, e->ts_ns, e->device, ce->str};
      e->kind = 0;
      continue;
    }
    if (e->kind == GMT_EV_ALLOC && device_mem(e) && q_find(segs, 0, e->addr, e->size)) {
      seg_q_t *q = q_get(queues, GMT_EV_ALLOC, e->addr, e->size), *l = q_get(&live, 0, e->addr, 0);
      if (!q || !l || q_push(q, i) < 0) {
        st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
      } else {
        l->n = 1;
        l->next = (size_t)e->size;
      }
      ce->pytorch = drop = 1;
    } else if (e->kind == GMT_EV_FREE && device_mem(e)) {
      seg_q_t *l = q_find(live, 0, e->addr, 0);
      if (l && l->n) {
        uint64_t size = (uint64_t)l->next;
        seg_q_t *q = q_get(queues, GMT_EV_FREE, e->addr, size);
        if (!q || q_push(q, i) < 0) st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
        l->n = 0;
        ce->pytorch = drop = 1;
      }
    } else if (is_vmm(e->kind) && device_mem(e) && nmaps &&
               ranges_overlap(maps, nmaps, e->addr, e->addr + (e->size ? e->size : 1))) {
      ce->pytorch = drop = 1;
    } else if ((e->kind == GMT_EV_ALLOC_FAILED && device_mem(e)) || e->kind == GMT_EV_EMPTY_CACHE) {
      drop = 1;
    }
    if (drop) {
      (*dropped)++;
      e->kind = 0; /* left out */
    } else if (e->kind != GMT_EV_MARKER && e->kind != GMT_EV_DEVICE_USAGE) { /* no one's memory */
      e->flags |= GMT_F_EXTERNAL;
      (*external)++;
    }
  }
  q_free_all(&live);
  q_free_all(&segs);
  free(maps);
  return st;
}

/* A history segment event takes the identity of the CUPTI call it matches. */
static int claim(seg_q_t *queues, const cupti_side_t *c, gmt_event_t *e) {
  uint8_t kind = e->kind == GMT_EV_SEGMENT_ALLOC ? GMT_EV_ALLOC : GMT_EV_FREE;
  seg_q_t *q = q_find(queues, kind, e->addr, e->size);
  if (!q || q->next >= q->n) return 0;
  const gmt_event_t *ce = &c->v[q->idx[q->next++]].ev;
  e->corr_id = ce->corr_id;
  e->context = ce->context;
  return 1;
}

/* ---- the merge -------------------------------------------------------------------------------- */

/* Where the history's time 0 falls on the CUPTI trace's clock. Both are wall-clock times of the
 * same process (PyTorch's time_us, the recorder's start_time_ns); the history starts when CUDA
 * is first initialised, after the CUPTI trace began. A history that would start more than a
 * second before it (clocks that disagree, or a snapshot of another process) keeps its own
 * timing from the trace's time 0. */
#define SNAP_CLOCK_SLACK_NS 1000000000ll

static int clock_aligned(const snap_pass_t *ps, const gmt_header_t *cupti) {
  if (!ps->has_time || !ps->start_time_ns || !cupti->start_time_ns) return 0;
  return (int64_t)(ps->start_time_ns - cupti->start_time_ns) >= -SNAP_CLOCK_SLACK_NS;
}

static int64_t clock_shift(const snap_pass_t *ps, const gmt_header_t *cupti) {
  return clock_aligned(ps, cupti) ? (int64_t)(ps->start_time_ns - cupti->start_time_ns) : 0;
}

static gm_status_t kv_u64(gmt_header_t *h, const char *k, uint64_t v, gm_err_t *err) {
  char b[32];
  snprintf(b, sizeof b, "%llu", (unsigned long long)v);
  return gmt_header_kv_set(h, k, b, err);
}

/* The history's coverage on the merged trace (SPEC.md §3.4): its window moved onto the CUPTI
 * clock, counted in merged events (the CUPTI events before it come first), and its ring's size
 * as gpurec set it (rec_torch.c reads the same variable; 1000000 by default). */
static gm_status_t side_count_before(cupti_side_t *c, const char *path, uint64_t t, uint64_t *n, gm_err_t *err);

static gm_status_t mark_coverage(gmt_header_t *h, const snap_pass_t *ps, cupti_side_t *c, const char *path,
                                 gm_err_t *err) {
  const char *env = getenv("GPUMEM_TORCH_MAX_ENTRIES");
  uint64_t ring = env && *env ? strtoull(env, NULL, 10) : 1000000u;
  gmt_coverage_t cov;
  snap_coverage_of(ps, ring, &cov);
  if (cov.partial && cov.has_window) {
    int64_t t = (int64_t)cov.from_ns + clock_shift(ps, &c->header);
    cov.from_ns = t > 0 ? (uint64_t)t : 0;
    if (c->compact) { /* the CUPTI side is in the file */
      gm_status_t s = side_count_before(c, path, cov.from_ns, &cov.from_event, err);
      if (s) return s;
    } else {
      for (size_t i = 0; i < c->n; i++) cov.from_event += c->v[i].ev.kind != 0 && c->v[i].ev.ts_ns < cov.from_ns;
    }
  }
  return snap_coverage_mark(h, &cov, err);
}

/* Header room for the marks of a cut recording's merge (gmt_writer_mark after the events). */
#define SNAP_MERGE_ROOM 512

/* ---- the streamed merge -------------------------------------------------------------------
 * PyTorch's requests streamed into the process's trace (rec_torch_stream.c) are its requests, in
 * the trace's order, on its clock: the merged trace is written in one pass over that file, each
 * request as it is read, CUPTI's events merged in by time as a second reader of the same file
 * meets them. Nothing is held per event: the first pass counts the driver's calls and PyTorch's
 * segment calls per (kind, address, size) (snap_stream.c), every other CUPTI event is decided by
 * its kind (side_kind), and the readers give back the pages they have decoded
 * (GMT_READ_DROP_BEHIND). So a recording of any length merges in a few MiB: what grows is the
 * distinct segments and live allocations. (snap_merge_file_held: the same merge holding every
 * CUPTI event and segment call, the reference of the tests.) Before the pass: the plan of the
 * snapshot (the allocator's settings, the blocks alive where the stream starts: the synthetic
 * initial state) with what it needs of the segment calls and the OOMs; each segment call takes
 * its driver call's identity, matched in the trace's order per (kind, address, size). Times are
 * those of a history (microseconds), as the in-memory merge of a history writes them. */

typedef struct stream_out {
  gmt_writer_t *w;
  cupti_side_t *c;
  size_t i;         /* the next of c->v */
  uint64_t last;    /* the last time written */
  uint64_t written; /* events written */
  /* the next CUPTI event to write (with its callsite's text): compact, read again from the file
   * by rb, in the order the first pass read them */
  gmt_reader_t *rb;
  snap_cls_t *cls; /* rb's state per address (snap_bounded_side) */
  int has_next, side_end;
  gmt_event_t next;
  char *str;
  size_t str_cap;
  int has_str;
} stream_out_t;

static gm_status_t keep_str(stream_out_t *o, const char *str, gm_err_t *err) {
  o->has_str = str != NULL;
  if (!str) return GM_OK;
  size_t n = strlen(str) + 1;
  if (n > o->str_cap) {
    char *ns = realloc(o->str, n);
    if (!ns) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
    o->str = ns;
    o->str_cap = n;
  }
  memcpy(o->str, str, n);
  return GM_OK;
}

/* The next CUPTI event kept (not left out) into o->next, as classify decided it. */
static gm_status_t side_peek(stream_out_t *o, gm_err_t *err) {
  cupti_side_t *c = o->c;
  while (!o->has_next && !o->side_end) {
    if (!c->compact) {
      if (o->i >= c->n) {
        o->side_end = 1;
        break;
      }
      cev_t *ce = &c->v[o->i++];
      if (ce->ev.kind == 0) continue;
      o->next = ce->ev;
      gm_status_t s = keep_str(o, ce->str, err);
      if (s) return s;
      o->has_next = 1;
      break;
    }
    gmt_event_t ev;
    gm_status_t s = gmt_reader_next(o->rb, &ev, err);
    if (s == GM_END) {
      o->side_end = 1;
      break;
    }
    if (s) return s;
    if (ev.flags & GMT_F_TORCH_STREAM) continue;
    if (driver_call(&ev)) {
      if (!o->cls && !(o->cls = snap_cls_new())) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
      if (snap_bounded_side(c->bd, o->cls, &ev)) continue; /* PyTorch's own */
      ev.flags |= GMT_F_EXTERNAL;
    } else {
      int k = side_kind(&ev);
      if (k == SIDE_OUT || k == SIDE_DROPPED) continue;
      if (k == SIDE_EXTERNAL) ev.flags |= GMT_F_EXTERNAL;
    }
    o->next = ev;
    if ((s = keep_str(o, ev.callsite != GMT_NO_STRING ? gmt_reader_string(o->rb, ev.callsite) : NULL, err)))
      return s;
    o->has_next = 1;
  }
  return GM_OK;
}

/* The CUPTI events kept up to time t (all: to the end), written. */
static gm_status_t cupti_until(stream_out_t *o, uint64_t t, int all, gm_err_t *err) {
  gm_status_t s = GM_OK;
  while (s == GM_OK && (s = side_peek(o, err)) == GM_OK && o->has_next) {
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

/* How many CUPTI events kept come before time t (a coverage window's first event). */
static gm_status_t side_count_before(cupti_side_t *c, const char *path, uint64_t t, uint64_t *n, gm_err_t *err) {
  stream_out_t o;
  memset(&o, 0, sizeof o);
  o.c = c;
  gm_status_t s = gmt_reader_open_flags(&o.rb, path, GMT_READ_SALVAGE | GMT_READ_DROP_BEHIND, err);
  while (s == GM_OK && (s = side_peek(&o, err)) == GM_OK && o.has_next) {
    *n += o.next.ts_ns < t;
    o.has_next = 0;
  }
  gmt_reader_close(o.rb);
  snap_cls_free(o.cls);
  free(o.str);
  return s;
}

static gm_status_t stream_requests(stream_out_t *o, const char *path, const snap_pass_t *ps, gm_err_t *err) {
  cupti_side_t *c = o->c;
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
    progress(c, r, 2, ++nread, 0);
    if (!(ev.flags & GMT_F_TORCH_STREAM)) continue;
    gmt_event_t e = ev;
    e.flags &= ~GMT_F_TORCH_STREAM;
    e.callsite = GMT_NO_STRING;
    if (e.kind == GMT_EV_ALLOC_FAILED) e.corr_id = 0; /* the device's free bytes: the header has them */
    if (c->compact && (e.kind == GMT_EV_SEGMENT_ALLOC || e.kind == GMT_EV_SEGMENT_FREE)) {
      if ((s = snap_bounded_claim(c->bd, &e, err))) break; /* the driver call's identity */
    } else if (!c->compact && stream_kept(e.kind) && kept < c->ntorch_kept) {
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
  if (r) progress(c, r, 2, nread, 1);
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

static gm_status_t merge_streamed(const pkr_val_t *root, cupti_side_t *c, const char *path, const char *out_path,
                                  const char *stacks, const gmt_writer_opts_t *opts, snap_merge_stats_t *ms,
                                  gm_err_t *err) {
  snap_pass_t ps;
  size_t nplan = c->ntorch_kept;
  const gmt_event_t *plan = c->compact ? snap_bounded_plan(c->bd, &nplan) : c->torch;
  gm_status_t s = snap_plan_streamed(root, plan, nplan, &ps, err);
  if (s) return s;
  ps.start_time_ns += c->header.start_time_ns; /* the stream is on the trace's own clock */
  seg_q_t *queues = NULL;
  uint64_t dropped = 0, external = 0, segments = 0, seen = 0;
  if (c->compact) { /* counted in the first pass; each call decided again as it is written */
    uint64_t own = 0;
    snap_bounded_counts(c->bd, &segments, &seen, &own, &external);
    dropped = own;
  } else {
    snap_site_t *sites = NULL; /* an older recorder's notes: the stream carries callsites now */
    size_t nsites = 0;
    s = classify(&ps, c, &queues, &dropped, &external, &sites, &nsites, err);
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
    seen += (uint64_t)claim(queues, c, e);
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
        (s = kv_u64(&h, "torch_history.segments", segments, err)) == GM_OK &&
        (s = kv_u64(&h, "torch_history.segments_seen_by_cupti", seen, err)) == GM_OK &&
        (s = kv_u64(&h, "torch_history.external_events", external, err)) == GM_OK &&
        (s = kv_u64(&h, "torch_history.cupti_dropped", dropped, err)) == GM_OK &&
        (s = gmt_header_kv_set(&h, "torch_history.clock", "cupti", err)) == GM_OK && c->truncated)
      s = gmt_header_kv_set(&h, "torch_history.cupti_truncated", "1", err);
    /* each alloc carries its callsite: a note of its own (as the history's notes are counted)
     * that always finds its alloc */
    if (s == GM_OK && c->stream_sites &&
        (s = kv_u64(&h, "torch_history.alloc_site_notes", c->stream_sites, err)) == GM_OK)
      s = kv_u64(&h, "torch_history.allocs_with_callsite", c->stream_sites, err);
  }
  if (s == GM_OK) s = mark_coverage(&h, &ps, c, path, err);
  /* a recording cut (its process killed, its file truncated): the header says where the merge
   * stops, once it is written (damaged chunks inside it are cupti_lost: a gap, not an end) */
  if (c->cut && h.room < SNAP_MERGE_ROOM) h.room = SNAP_MERGE_ROOM;
  gmt_writer_t *w = NULL;
  if (s == GM_OK) s = gmt_writer_open_atomic(&w, out_path, &h, opts, err);
  if (s == GM_OK) {
    gmt_writer_add_dropped(w, c->dropped_records);
    stream_out_t o;
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
  q_free_all(&queues);
  gmt_header_free(&h);
  snap_plan_free(&ps);
  return s;
}

static gm_status_t merge_doc(const pkr_val_t *root, cupti_side_t *c, const char *out_path, const char *stacks,
                             const gmt_writer_opts_t *opts, snap_merge_stats_t *ms, gm_err_t *err) {
  snap_pass_t ps;
  gm_status_t s;
  if ((s = snap_plan(root, &ps, err))) return s;
  seg_q_t *queues = NULL;
  uint64_t dropped = 0, external = 0, segments = 0, seen = 0;
  gmt_header_t h;
  gmt_header_init(&h);
  gmt_writer_t *w = NULL;
  snap_cs_cache_t *cache = NULL;
  snap_site_t *sites = NULL;
  size_t nsites = 0, site_hits = 0, allocs = 0;
  const char **site_of = NULL;
  s = classify(&ps, c, &queues, &dropped, &external, &sites, &nsites, err);
  if (s == GM_OK && nsites) {
    if (!(site_of = calloc(ps.n + 1, sizeof *site_of))) s = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
    else site_hits = snap_sites_match(&ps, sites, nsites, clock_shift(&ps, &c->header),
                                      clock_aligned(&ps, &c->header), site_of);
    for (size_t k = 0; k < ps.n; k++)
      allocs += ps.evs[k]->ev.kind == GMT_EV_ALLOC && !(ps.evs[k]->ev.flags & GMT_F_SYNTHETIC);
  }
  for (size_t k = 0; k < ps.n && s == GM_OK; k++) {
    gmt_event_t *e = &ps.evs[k]->ev;
    if (e->kind != GMT_EV_SEGMENT_ALLOC && e->kind != GMT_EV_SEGMENT_FREE) continue;
    segments++;
    seen += (uint64_t)claim(queues, c, e);
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
        (s = kv_u64(&h, "torch_history.segments", segments, err)) == GM_OK &&
        (s = kv_u64(&h, "torch_history.segments_seen_by_cupti", seen, err)) == GM_OK &&
        (s = kv_u64(&h, "torch_history.external_events", external, err)) == GM_OK &&
        (s = kv_u64(&h, "torch_history.cupti_dropped", dropped, err)) == GM_OK &&
        (s = gmt_header_kv_set(&h, "torch_history.clock", !ps.has_time ? "none"
                                                       : clock_aligned(&ps, &c->header) ? "cupti" : "own",
                               err)) == GM_OK &&
        c->truncated)
      s = gmt_header_kv_set(&h, "torch_history.cupti_truncated", "1", err);
    /* the callsites of the requests (rec_sites.c's notes): how many allocations got one */
    if (s == GM_OK && nsites && (s = kv_u64(&h, "torch_history.alloc_site_notes", nsites, err)) == GM_OK)
      s = kv_u64(&h, "torch_history.allocs_with_callsite", site_hits, err);
  }
  if (s == GM_OK) s = mark_coverage(&h, &ps, c, NULL, err);
  if (s == GM_OK) s = gmt_writer_open_atomic(&w, out_path, &h, opts, err);
  if (s == GM_OK) {
    gmt_writer_add_dropped(w, c->dropped_records);
    /* History time (ns since ps.start_time_ns) onto the CUPTI clock (ns since its start). */
    int64_t shift = clock_shift(&ps, &c->header);
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
        cev_t *ce = &c->v[i++];
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
  q_free_all(&queues);
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
  cupti_side_t c;
  memset(&c, 0, sizeof c);
  gmt_header_init(&c.header);
  c.compact = !held && stream_probe(cupti_path); /* streamed: the file read twice, the CUPTI side not held */
  if (c.compact && !(c.bd = snap_bounded_new())) {
    cupti_free(&c);
    return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  }
  c.progress = fn;
  c.progress_ctx = ctx;
  gm_status_t s = cupti_read(cupti_path, &c, err);
  if (s) {
    gm_err_wrap(err, "cannot read the CUPTI trace '%s'", cupti_path);
    cupti_free(&c);
    return s;
  }
  uint8_t *buf = NULL;
  size_t len = 0;
  pkr_doc_t *doc = NULL;
  if (!pickle_path) { /* gpurec import of an unmerged recording: the stream alone */
    s = c.ntorch ? merge_streamed(NULL, &c, cupti_path, out_path, stacks, opts, st, err)
                 : gm_err_set(err, GM_ERR_INVAL, "it holds no unmerged PyTorch requests (it is a gpumem trace "
                                                 "already: gpureplay and gpuanalyze read it as it is)");
  } else if ((s = snap_read_file(pickle_path, &buf, &len, err)) == GM_OK) {
    if (!snap_is_pickle(buf, len))
      s = gm_err_set(err, GM_ERR_FORMAT, "'%s' is not a pickle (a PyTorch memory snapshot is one)", pickle_path);
    else if ((s = pkr_parse(buf, len, &doc, err)) == GM_OK)
      s = c.ntorch ? merge_streamed(pkr_doc_root(doc), &c, cupti_path, out_path, stacks, opts, st, err)
                   : merge_doc(pkr_doc_root(doc), &c, out_path, stacks, opts, st, err);
  }
  pkr_doc_free(doc);
  free(buf);
  cupti_free(&c);
  return s;
}
