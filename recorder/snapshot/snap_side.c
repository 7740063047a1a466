/* snap_side.c: the CUPTI side of the torch-history merge (snap_merge.c): the trace the process's
 * recorder wrote, read once. Held event by event (a history's merge, and the reference merge of
 * the tests), or, for a streamed recording (compact), nothing held: PyTorch's segment calls and
 * the driver calls that may be its own counted (snap_stream.c), every other event decided by its
 * kind; the merge then walks the events kept again (snap_side_peek), from memory or from the
 * file. Also where the history's clock falls on the trace's, and the history's coverage. */
#include <stdlib.h>
#include <string.h>

#include "recorder/snapshot/snap_side.h"

void snap_side_free(snap_side_t *c) {
  for (size_t i = 0; i < c->n; i++) free(c->v[i].str);
  free(c->v);
  free(c->torch);
  snap_bounded_free(c->bd);
  gmt_header_free(&c->header);
}

/* Progress every 2^20 events of a pass (and at its end). */
void snap_side_progress(const snap_side_t *c, gmt_reader_t *r, int pass, uint64_t events, int end) {
  if (!c->progress || !c->compact || (!end && (events & ((1u << 20) - 1)))) return;
  c->progress(c->progress_ctx, pass, events, gmt_reader_stats(r)->chunks, gmt_reader_chunk_count(r));
}

/* Does the trace hold PyTorch's streamed requests? Read up to the first one. */
int snap_side_streamed(const char *path) {
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

/* One event of the CUPTI side, with its callsite's string copied out of the reader. */
static gm_status_t cupti_add(snap_side_t *c, gmt_reader_t *r, const gmt_event_t *ev, gm_err_t *err) {
  if (c->n == c->cap) {
    size_t cap = c->cap ? c->cap * 2 : 1024;
    snap_cev_t *nv = realloc(c->v, cap * sizeof *nv);
    if (!nv) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
    c->v = nv;
    c->cap = cap;
  }
  snap_cev_t *e = &c->v[c->n++];
  memset(e, 0, sizeof *e);
  e->ev = *ev;
  const char *s = ev->callsite != GMT_NO_STRING ? gmt_reader_string(r, ev->callsite) : NULL;
  if (s && !(e->str = strdup(s))) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  return GM_OK;
}

gm_status_t snap_side_read(const char *path, snap_side_t *c, gm_err_t *err) {
  gmt_reader_t *r = NULL;
  gm_status_t st = gmt_reader_open_flags(&r, path, GMT_READ_SALVAGE | GMT_READ_DROP_BEHIND, err);
  if (st != GM_OK) return st;
  st = gmt_header_copy(&c->header, gmt_reader_header(r), err);
  gmt_event_t ev;
  uint64_t nread = 0;
  while (st == GM_OK && (st = gmt_reader_next(r, &ev, err)) == GM_OK) {
    snap_side_progress(c, r, 1, ++nread, 0);
    if (!(ev.flags & GMT_F_TORCH_STREAM)) {
      if (!c->compact) {
        st = cupti_add(c, r, &ev, err);
      } else if (snap_driver_call(&ev)) {
        st = snap_bounded_driver(c->bd, &ev, err);
      } else {
        int k = snap_side_kind(&ev);
        c->other_dropped += k == SNAP_SIDE_DROPPED;
        c->other_external += k == SNAP_SIDE_EXTERNAL;
      }
      continue;
    }
    /* a request, not a driver call */
    if (!c->ntorch++ || ev.ts_ns < c->stream_first_ts) c->stream_first_ts = ev.ts_ns;
    if (ev.kind == GMT_EV_ALLOC) {
      c->stream_allocs++;
      c->stream_sites += ev.callsite != GMT_NO_STRING;
    }
    if (!snap_stream_kept(ev.kind)) continue;
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
  snap_side_progress(c, r, 1, nread, 1);
  const gmt_reader_stats_t *rs = gmt_reader_stats(r);
  c->dropped_records = rs->dropped;
  c->truncated = rs->truncated || gmt_stats_partial(rs);
  c->cut = rs->truncated;
  gmt_reader_close(r);
  return st;
}

/* ---- the events kept, in order ------------------------------------------------------------- */

static gm_status_t keep_str(snap_out_t *o, const char *str, gm_err_t *err) {
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
gm_status_t snap_side_peek(snap_out_t *o, gm_err_t *err) {
  snap_side_t *c = o->c;
  while (!o->has_next && !o->side_end) {
    if (!c->compact) {
      if (o->i >= c->n) {
        o->side_end = 1;
        break;
      }
      snap_cev_t *ce = &c->v[o->i++];
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
    if (snap_driver_call(&ev)) {
      if (!o->cls && !(o->cls = snap_cls_new())) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
      if (snap_bounded_side(c->bd, o->cls, &ev)) continue; /* PyTorch's own */
      ev.flags |= GMT_F_EXTERNAL;
    } else {
      int k = snap_side_kind(&ev);
      if (k == SNAP_SIDE_OUT || k == SNAP_SIDE_DROPPED) continue;
      if (k == SNAP_SIDE_EXTERNAL) ev.flags |= GMT_F_EXTERNAL;
    }
    o->next = ev;
    if ((s = keep_str(o, ev.callsite != GMT_NO_STRING ? gmt_reader_string(o->rb, ev.callsite) : NULL, err)))
      return s;
    o->has_next = 1;
  }
  return GM_OK;
}

/* How many CUPTI events kept come before time t (a coverage window's first event). */
static gm_status_t side_count_before(snap_side_t *c, const char *path, uint64_t t, uint64_t *n, gm_err_t *err) {
  snap_out_t o;
  memset(&o, 0, sizeof o);
  o.c = c;
  gm_status_t s = gmt_reader_open_flags(&o.rb, path, GMT_READ_SALVAGE | GMT_READ_DROP_BEHIND, err);
  while (s == GM_OK && (s = snap_side_peek(&o, err)) == GM_OK && o.has_next) {
    *n += o.next.ts_ns < t;
    o.has_next = 0;
  }
  gmt_reader_close(o.rb);
  snap_cls_free(o.cls);
  free(o.str);
  return s;
}

/* ---- the clocks and the coverage ------------------------------------------------------------ */

/* Where the history's time 0 falls on the CUPTI trace's clock. Both are wall-clock times of the
 * same process (PyTorch's time_us, the recorder's start_time_ns); the history starts when CUDA
 * is first initialised, after the CUPTI trace began. A history that would start more than a
 * second before it (clocks that disagree, or a snapshot of another process) keeps its own
 * timing from the trace's time 0. */
#define SNAP_CLOCK_SLACK_NS 1000000000ll

int snap_clock_aligned(const snap_pass_t *ps, const gmt_header_t *cupti) {
  if (!ps->has_time || !ps->start_time_ns || !cupti->start_time_ns) return 0;
  return (int64_t)(ps->start_time_ns - cupti->start_time_ns) >= -SNAP_CLOCK_SLACK_NS;
}

int64_t snap_clock_shift(const snap_pass_t *ps, const gmt_header_t *cupti) {
  return snap_clock_aligned(ps, cupti) ? (int64_t)(ps->start_time_ns - cupti->start_time_ns) : 0;
}

gm_status_t snap_kv_u64(gmt_header_t *h, const char *k, uint64_t v, gm_err_t *err) {
  char b[32];
  snprintf(b, sizeof b, "%llu", (unsigned long long)v);
  return gmt_header_kv_set(h, k, b, err);
}

/* The history's coverage on the merged trace (SPEC.md §3.4): its window moved onto the CUPTI
 * clock, counted in merged events (the CUPTI events before it come first), and its ring's size
 * as gpurec set it (rec_torch.c reads the same variable; 1000000 by default). */
gm_status_t snap_side_mark_coverage(gmt_header_t *h, const snap_pass_t *ps, snap_side_t *c, const char *path,
                                    gm_err_t *err) {
  const char *env = getenv("GPUMEM_TORCH_MAX_ENTRIES");
  uint64_t ring = env && *env ? strtoull(env, NULL, 10) : 1000000u;
  gmt_coverage_t cov;
  snap_coverage_of(ps, ring, &cov);
  if (cov.partial && cov.has_window) {
    int64_t t = (int64_t)cov.from_ns + snap_clock_shift(ps, &c->header);
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
