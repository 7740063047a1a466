/* gpurec_stream.c: after the job, each PyTorch process's streamed requests (inj_stream.c, the
 * allocator's trace tracker, rec_tracker.c) merged with the CUPTI trace of the same process into
 * that process's one trace, which it replaces (capture mode torch-history, as the history's merge
 * in snapshot/snap_merge.c, whose rules it follows):
 *   - every streamed event is kept, in its order, its time moved onto the CUPTI trace's clock;
 *   - CUPTI events that are PyTorch's own driver calls (an alloc whose address and size are one of
 *     the stream's segments and the free of that address, a VMM call on a range the stream mapped),
 *     failed driver allocations, pool trims and the per-request callsite notes (the stream has
 *     its callsites) are left out;
 *   - every other CUPTI event (another library's memory) is kept, flagged GMT_F_EXTERNAL.
 * Memory: the CUPTI trace is read whole (for a PyTorch process it holds segments and other
 * libraries' calls, not requests); the stream is read twice, one chunk at a time: once for the
 * set of its segments, once to merge. A run of 10^8 requests needs the segment set only.
 * If gpurec was killed before this ran, both files stay: the stream file alone replays. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uthash.h>

#include "base/gm_base.h"
#include "formats/gmt.h"
#include "recorder/gpurec_history.h"
#include "recorder/rec_core.h"

typedef struct seg {
  uint64_t key[2]; /* addr, size; size 0: a live CUPTI allocation of addr (value: its size) */
  uint64_t val;
  UT_hash_handle hh;
} seg_t;

typedef struct range {
  uint64_t lo, hi;
} range_t;

typedef struct pass1 {
  seg_t *segs;
  range_t *maps;
  size_t nmaps;
  uint64_t events, dropped;
  int truncated;
} pass1_t;

static seg_t *seg_find(seg_t *h, uint64_t a, uint64_t b) {
  uint64_t k[2] = {a, b};
  seg_t *s = NULL;
  HASH_FIND(hh, h, k, sizeof k, s);
  return s;
}

static int seg_add(seg_t **h, uint64_t a, uint64_t b, uint64_t val) {
  seg_t *s = seg_find(*h, a, b);
  if (!s) {
    if (!(s = calloc(1, sizeof *s))) return -1;
    s->key[0] = a;
    s->key[1] = b;
    HASH_ADD(hh, *h, key, sizeof s->key, s);
  }
  s->val = val;
  return 0;
}

static void seg_free_all(seg_t **h) {
  seg_t *s, *t;
  HASH_ITER(hh, *h, s, t) {
    HASH_DEL(*h, s);
    free(s);
  }
}

static int range_cmp(const void *a, const void *b) {
  const range_t *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int overlaps(const pass1_t *p, uint64_t lo, uint64_t hi) {
  size_t a = 0, b = p->nmaps; /* first range with hi > lo */
  while (a < b) {
    size_t m = (a + b) / 2;
    if (p->maps[m].hi <= lo) a = m + 1;
    else b = m;
  }
  return a < p->nmaps && p->maps[a].lo < hi;
}

static gm_status_t stream_pass1(const char *path, pass1_t *p, gm_err_t *err) {
  gmt_reader_t *rd = NULL;
  gm_status_t s = gmt_reader_open_flags(&rd, path, GMT_READ_SALVAGE, err);
  if (s) return s;
  size_t cap = 0;
  const gmt_event_t *v;
  size_t n;
  while ((s = gmt_reader_next_view(rd, &v, &n, err)) == GM_OK) {
    for (size_t i = 0; i < n && s == GM_OK; i++) {
      const gmt_event_t *e = &v[i];
      p->events++;
      if (e->kind == GMT_EV_SEGMENT_ALLOC) {
        if (seg_add(&p->segs, e->addr, e->size, 1) < 0) s = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
      } else if ((e->kind == GMT_EV_VMM_MAP || e->kind == GMT_EV_VMM_UNMAP) && e->size) {
        if (p->nmaps == cap) {
          cap = cap ? cap * 2 : 256;
          range_t *nm = realloc(p->maps, cap * sizeof *nm);
          if (!nm) {
            s = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
            break;
          }
          p->maps = nm;
        }
        p->maps[p->nmaps++] = (range_t){e->addr, e->addr + e->size};
      }
    }
    if (s) break;
  }
  if (s == GM_END) s = GM_OK;
  const gmt_reader_stats_t *rs = gmt_reader_stats(rd);
  p->dropped = rs->dropped;
  p->truncated = rs->truncated || gmt_stats_partial(rs);
  gmt_reader_close(rd);
  if (p->nmaps) {
    qsort(p->maps, p->nmaps, sizeof *p->maps, range_cmp);
    size_t j = 0;
    for (size_t i = 1; i < p->nmaps; i++) {
      if (p->maps[i].lo <= p->maps[j].hi) {
        if (p->maps[i].hi > p->maps[j].hi) p->maps[j].hi = p->maps[i].hi;
      } else {
        p->maps[++j] = p->maps[i];
      }
    }
    p->nmaps = j + 1;
  }
  return s;
}

/* One CUPTI event kept, with its string copied. */
typedef struct cev {
  gmt_event_t ev;
  char *str;
} cev_t;

static int device_mem(const gmt_event_t *e) {
  return e->mem_kind == GMT_MEM_DEVICE || e->mem_kind == GMT_MEM_UNKNOWN;
}

static int is_vmm(unsigned k) {
  return k == GMT_EV_VMM_RESERVE || k == GMT_EV_VMM_MAP || k == GMT_EV_VMM_UNMAP || k == GMT_EV_VMM_RELEASE;
}

/* The CUPTI trace's events other than PyTorch's own, flagged external. */
static gm_status_t cupti_keep(const char *path, const pass1_t *p, gmt_header_t *h, cev_t **out, size_t *nout,
                              uint64_t *left_out, uint64_t *dropped, int *truncated, gm_err_t *err) {
  gmt_reader_t *rd = NULL;
  gm_status_t s = gmt_reader_open_flags(&rd, path, GMT_READ_SALVAGE, err);
  if (s) return s;
  s = gmt_header_copy(h, gmt_reader_header(rd), err);
  seg_t *live = NULL; /* key (addr, 0): a CUPTI allocation that is one of PyTorch's segments */
  cev_t *v = NULL;
  size_t n = 0, cap = 0;
  gmt_event_t e;
  while (s == GM_OK && (s = gmt_reader_next(rd, &e, err)) == GM_OK) {
    int drop = 0;
    if (e.kind == GMT_EV_ALLOC_SITE || e.kind == GMT_EV_EMPTY_CACHE ||
        (e.kind == GMT_EV_ALLOC_FAILED && device_mem(&e))) {
      drop = 1;
    } else if (e.kind == GMT_EV_ALLOC && device_mem(&e) && seg_find(p->segs, e.addr, e.size)) {
      if (seg_add(&live, e.addr, 0, 1) < 0) s = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
      drop = 1;
    } else if (e.kind == GMT_EV_FREE && device_mem(&e)) {
      seg_t *l = seg_find(live, e.addr, 0);
      if (l && l->val) {
        l->val = 0;
        drop = 1;
      }
    } else if (is_vmm(e.kind) && device_mem(&e) && p->nmaps && overlaps(p, e.addr, e.addr + (e.size ? e.size : 1))) {
      drop = 1;
    }
    if (drop) {
      (*left_out)++;
      continue;
    }
    if (n == cap) {
      cap = cap ? cap * 2 : 1024;
      cev_t *nv = realloc(v, cap * sizeof *nv);
      if (!nv) {
        s = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
        break;
      }
      v = nv;
    }
    if (e.kind != GMT_EV_MARKER && e.kind != GMT_EV_DEVICE_USAGE) e.flags |= GMT_F_EXTERNAL;
    const char *str = e.callsite != GMT_NO_STRING ? gmt_reader_string(rd, e.callsite) : NULL;
    v[n].ev = e;
    v[n].str = str ? strdup(str) : NULL;
    if (str && !v[n].str) s = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
    n++;
  }
  if (s == GM_END) s = GM_OK;
  const gmt_reader_stats_t *rs = gmt_reader_stats(rd);
  *dropped = rs->dropped;
  *truncated = rs->truncated || gmt_stats_partial(rs);
  gmt_reader_close(rd);
  seg_free_all(&live);
  *out = v;
  *nout = n;
  return s;
}

static gm_status_t kv_u64(gmt_header_t *h, const char *k, uint64_t v, gm_err_t *err) {
  char b[32];
  snprintf(b, sizeof b, "%llu", (unsigned long long)v);
  return gmt_header_kv_set(h, k, b, err);
}

static gm_status_t append_with_string(gmt_writer_t *w, gmt_event_t *e, const char *str, gm_err_t *err) {
  e->callsite = GMT_NO_STRING;
  gm_status_t s = str ? gmt_writer_intern(w, str, &e->callsite, err) : GM_OK;
  return s ? s : gmt_writer_append(w, e, err);
}

gm_status_t gpurec_stream_merge(const char *stream_path, const char *cupti_path, const char *out_path,
                                gpurec_stream_stats_t *st, gm_err_t *err) {
  memset(st, 0, sizeof *st);
  pass1_t p;
  memset(&p, 0, sizeof p);
  gmt_header_t h;
  gmt_header_init(&h);
  cev_t *cv = NULL;
  size_t nc = 0;
  uint64_t cdropped = 0;
  int ctrunc = 0;
  gmt_reader_t *rd = NULL;
  gmt_writer_t *w = NULL;
  gm_status_t s = stream_pass1(stream_path, &p, err);
  if (s) gm_err_wrap(err, "cannot read the request stream '%s'", stream_path);
  if (s == GM_OK && (s = cupti_keep(cupti_path, &p, &h, &cv, &nc, &st->cupti_left_out, &cdropped, &ctrunc, err)))
    gm_err_wrap(err, "cannot read the CUPTI trace '%s'", cupti_path);
  if (s == GM_OK) s = gmt_reader_open_flags(&rd, stream_path, GMT_READ_SALVAGE, err);
  int64_t shift = 0;
  if (s == GM_OK) {
    const gmt_header_t *sh = gmt_reader_header(rd);
    shift = (int64_t)(sh->start_time_ns - h.start_time_ns);
    h.capture_mode = GMT_CAPTURE_TORCH_HISTORY;
    const char *fw = gmt_header_kv_get(sh, "framework.pytorch");
    if ((s = gmt_header_set(&h.tool, "gpurec " GM_VERSION, err)) == GM_OK &&
        (s = gmt_header_kv_set(&h, "torch_stream.source", "allocator trace tracker", err)) == GM_OK &&
        (!fw || (s = gmt_header_kv_set(&h, "framework.pytorch", fw, err)) == GM_OK) &&
        (s = kv_u64(&h, "torch_stream.events", p.events, err)) == GM_OK &&
        (s = kv_u64(&h, "torch_stream.dropped", p.dropped, err)) == GM_OK &&
        (s = kv_u64(&h, "torch_history.external_events", nc, err)) == GM_OK &&
        (s = kv_u64(&h, "torch_history.cupti_dropped", st->cupti_left_out, err)) == GM_OK &&
        (s = gmt_header_kv_set(&h, "torch_history.stacks", "none", err)) == GM_OK && p.truncated)
      s = gmt_header_kv_set(&h, "torch_stream.truncated", "1", err);
    if (s == GM_OK && ctrunc) s = gmt_header_kv_set(&h, "torch_history.cupti_truncated", "1", err);
  }
  if (s == GM_OK) s = gmt_writer_open_atomic(&w, out_path, &h, NULL, err);
  if (s == GM_OK) {
    gmt_writer_add_dropped(w, cdropped + p.dropped);
    size_t i = 0;
    uint64_t last = 0;
    gmt_event_t e;
    int more = 1;
    gm_status_t rs = gmt_reader_next(rd, &e, err);
    if (rs == GM_END) more = 0;
    else if (rs) s = rs;
    while (s == GM_OK && (more || i < nc)) {
      uint64_t t = 0;
      if (more) {
        int64_t x = (int64_t)e.ts_ns + shift;
        t = x > 0 ? (uint64_t)x : 0;
        if (t < last) t = last;
      }
      if (more && (i >= nc || t <= cv[i].ev.ts_ns)) {
        const char *str = e.callsite != GMT_NO_STRING ? gmt_reader_string(rd, e.callsite) : NULL;
        e.ts_ns = last = t;
        s = append_with_string(w, &e, str, err);
        st->stream_events++;
        if (s == GM_OK) {
          rs = gmt_reader_next(rd, &e, err);
          if (rs == GM_END) more = 0;
          else if (rs) s = rs;
        }
      } else {
        cev_t *c = &cv[i++];
        if (c->ev.ts_ns < last) c->ev.ts_ns = last;
        last = c->ev.ts_ns;
        s = append_with_string(w, &c->ev, c->str, err);
        st->cupti_kept++;
      }
    }
    if (s == GM_OK) s = gmt_writer_close(w, err);
    else gmt_writer_abandon(w);
  }
  st->stream_dropped = p.dropped;
  st->stream_truncated = p.truncated;
  if (rd) gmt_reader_close(rd);
  for (size_t i = 0; i < nc; i++) free(cv[i].str);
  free(cv);
  free(p.maps);
  seg_free_all(&p.segs);
  gmt_header_free(&h);
  return s;
}

/* Each CUPTI trace of the run whose process streamed its requests takes them in; a stream
 * without a CUPTI trace becomes the process's trace. */
void gpurec_merge_streams(const char *tmpl, gpurec_run_t *r, int quiet) {
  int ncupti = r->ntraces;
  for (int t = 0; t < ncupti; t++) {
    gmt_reader_t *rd = NULL;
    if (gmt_reader_open(&rd, r->traces[t], NULL) < 0) continue;
    const gmt_header_t *h = gmt_reader_header(rd);
    long pid = (long)h->pid;
    int rank = h->rank;
    gmt_reader_close(rd);
    char sp[4200];
    gm_err_t err;
    gm_err_clear(&err);
    struct stat sb;
    if (rec_trace_name_tag(tmpl, "stream", rank, pid, sp, sizeof sp, &err) < 0 || stat(sp, &sb) != 0) continue;
    gpurec_stream_stats_t st;
    if (gpurec_stream_merge(sp, r->traces[t], r->traces[t], &st, &err) < 0) {
      fprintf(stderr, "gpurec: error: cannot merge PyTorch's request stream '%s' into %s (both kept; the "
                      "stream replays on its own): %s\n", sp, r->traces[t], err.msg);
      continue;
    }
    unlink(sp);
    if (!quiet) {
      fprintf(stderr, "gpurec: %s: PyTorch's requests streamed as they happened (%llu events) merged with "
                      "the CUPTI trace (%llu events of other libraries)\n", r->traces[t],
              (unsigned long long)st.stream_events, (unsigned long long)st.cupti_kept);
      if (st.stream_dropped || st.stream_truncated)
        fprintf(stderr, "gpurec: warning: %s is PARTIAL: %llu of PyTorch's requests were lost%s; a replay "
                        "is a lower bound\n", r->traces[t], (unsigned long long)st.stream_dropped,
                st.stream_truncated ? " and the stream ended early (process killed)" : "");
    }
  }
}
