/* export_perfetto.c: a replayed run as Trace Event Format JSON (see export_perfetto.h).
 *
 * Model: one process (pid 1) per file. Counters are process-scoped "C" events, one counter
 * name per series ("live bytes", "reserved: POLICY"): a counter with several args is drawn
 * as a stacked area, which would add the policies' reservations up. Allocations are "X"
 * events; viewers require the slices of one track to nest, and allocations overlap freely, so
 * each stream gets lanes (tracks "stream S #L") filled greedily in start order.
 * Workload: 10 M events and more; the JSON's size is bounded by the slice cap and the
 * timeline's points, never by the trace. The trace is read twice: first for the peak of live
 * bytes (which allocations were alive then), then to pick the slices with a bounded heap.
 * Streaming writer (fprintf through gm_out): nothing is held but the chosen slices. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "replay/tool/export/export_perfetto.h"
#include "replay/engine/rp_map.h"

#define CALLSITE_CACHE_MAX 65536 /* distinct callsite texts kept (the rest: "callsite #id") */
#define CALLSITE_TEXT 200        /* bytes of a callsite's text kept */
#define SIZE_BITS 49             /* sizes up to GMT_MAX_SIZE (2^48) fit; larger ones are clamped */
#define SIZE_MASK ((1ull << SIZE_BITS) - 1)

typedef struct slice {
  uint64_t start, end, size, addr, seq;
  uint32_t callsite;
  uint16_t stream; /* index into the stream table */
  uint8_t freed, at_peak, external;
  uint32_t tid;
} slice_t;

typedef struct exp {
  const rp_result_t *r0;
  int device;
  uint64_t streams[GR_PERFETTO_STREAMS]; /* the last entry stands for "other streams" */
  int n_streams;
  rp_map_t live;      /* addr -> a: start ts, b: size | stream << 49 | external bit 62 | at-peak bit 63, c: callsite */
  rp_map_t callsites; /* id -> a: malloc'd text */
  size_t n_callsites;
  slice_t *heap;
  size_t n_heap;
  uint64_t seq, peak_idx, last_ts;
  gr_perfetto_stats_t st;
} exp_t;

static int is_request(const exp_t *x, const gmt_event_t *ev) {
  return (ev->kind == GMT_EV_ALLOC || ev->kind == GMT_EV_FREE) && ev->device == x->device &&
         (ev->mem_kind == GMT_MEM_DEVICE || ev->mem_kind == GMT_MEM_UNKNOWN);
}

static int stream_index(exp_t *x, uint64_t s) {
  for (int i = 0; i < x->n_streams; i++)
    if (x->streams[i] == s) return i;
  if (x->n_streams < GR_PERFETTO_STREAMS - 1) {
    x->streams[x->n_streams] = s;
    return x->n_streams++;
  }
  return GR_PERFETTO_STREAMS - 1;
}

/* Heap order: the root is the slice to give up first (not alive at the peak, smallest, latest). */
static int worse(const slice_t *a, const slice_t *b) {
  if (a->at_peak != b->at_peak) return a->at_peak < b->at_peak;
  if (a->size != b->size) return a->size < b->size;
  return a->seq > b->seq;
}

static void sift_down(slice_t *h, size_t n, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < n && worse(&h[l], &h[m])) m = l;
    if (r < n && worse(&h[r], &h[m])) m = r;
    if (m == i) return;
    slice_t t = h[i];
    h[i] = h[m];
    h[m] = t;
    i = m;
  }
}

static void heap_offer(exp_t *x, const slice_t *s) {
  if (x->n_heap < GR_PERFETTO_MAX_SLICES) {
    size_t i = x->n_heap++;
    x->heap[i] = *s;
    while (i && worse(&x->heap[i], &x->heap[(i - 1) / 2])) {
      slice_t t = x->heap[i];
      x->heap[i] = x->heap[(i - 1) / 2];
      x->heap[(i - 1) / 2] = t;
      i = (i - 1) / 2;
    }
  } else if (worse(&x->heap[0], s)) {
    x->heap[0] = *s;
    sift_down(x->heap, x->n_heap, 0);
  }
}

/* Whether an allocation of this size could still be chosen (the heap's worst only gets better). */
static int could_keep(const exp_t *x, uint64_t size, int at_peak) {
  if (x->n_heap < GR_PERFETTO_MAX_SLICES) return 1;
  const slice_t *w = &x->heap[0];
  return at_peak > w->at_peak || (at_peak == w->at_peak && size > w->size);
}

static void close_slice(exp_t *x, rp_map_entry_t *e, uint64_t end, int freed) {
  slice_t s;
  memset(&s, 0, sizeof s);
  s.addr = e->key;
  s.start = e->a;
  s.end = end < e->a ? e->a : end;
  s.size = e->b & SIZE_MASK;
  s.stream = (uint16_t)((e->b >> SIZE_BITS) & 0x3f); /* < GR_PERFETTO_STREAMS */
  s.external = (uint8_t)((e->b >> 62) & 1);
  s.at_peak = (uint8_t)((e->b >> 63) & 1) && (!freed || x->seq > x->peak_idx);
  s.callsite = e->c;
  s.freed = (uint8_t)freed;
  s.seq = x->seq;
  heap_offer(x, &s);
}

static gm_status_t cache_callsite(exp_t *x, const gmt_reader_t *rd, uint32_t id, gm_err_t *err) {
  if (id == GMT_NO_STRING || x->n_callsites >= CALLSITE_CACHE_MAX || rp_map_get(&x->callsites, id)) return GM_OK;
  const char *t = gmt_reader_string(rd, id);
  if (!t) return GM_OK;
  size_t l = strnlen(t, CALLSITE_TEXT);
  char *c = malloc(l + 1);
  if (!c || rp_map_put(&x->callsites, id, (uint64_t)(uintptr_t)c, 0) < 0) {
    free(c);
    return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  }
  memcpy(c, t, l);
  c[l] = '\0';
  x->n_callsites++;
  return GM_OK;
}

/* One pass over the trace. pass 0: the peak of live bytes (x->peak_idx); pass 1: the slices. */
static gm_status_t scan(exp_t *x, const char *path, unsigned flags, int pass, gm_err_t *err) {
  gmt_reader_t *rd = NULL;
  gm_status_t st = gmt_reader_open_flags(&rd, path, flags, err);
  if (st != GM_OK) return gm_err_wrap(err, "cannot read '%s'", path);
  uint64_t live = 0, count = 0;
  x->seq = 0;
  const gmt_event_t *evs;
  size_t n;
  while ((st = gmt_reader_next_view(rd, &evs, &n, err)) == GM_OK && n) {
    for (size_t i = 0; i < n && st == GM_OK; i++) {
      const gmt_event_t *ev = &evs[i];
      if (!is_request(x, ev)) continue;
      x->seq++;
      if (ev->ts_ns > x->last_ts) x->last_ts = ev->ts_ns;
      rp_map_entry_t *e = rp_map_get(&x->live, ev->addr);
      if (e) { /* a free, or an alloc over a live block (the engine frees the old one first) */
        if (pass == 0) {
          live -= e->b;
          count--;
        }
        else close_slice(x, e, ev->ts_ns, 1);
        rp_map_remove(&x->live, e);
      }
      if (ev->kind != GMT_EV_ALLOC) continue;
      uint64_t size = ev->size < SIZE_MASK ? ev->size : SIZE_MASK;
      uint64_t ext = x->r0->external_sync && !(ev->flags & GMT_F_ASYNC);
      if (pass == 0) {
        if (ext) size = 0; /* external memory: not in the live bytes (nor their peak) */
        x->st.allocations++;
        if (rp_map_put(&x->live, ev->addr, 0, size) < 0) st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
        live += size;
        count++;
        if (live > x->st.peak_live_bytes) {
          x->st.alive_at_peak = count;
          x->st.peak_live_bytes = live;
          x->st.peak_ts_ns = ev->ts_ns;
          x->peak_idx = x->seq;
        }
        continue;
      }
      int at_peak = x->seq <= x->peak_idx;
      if (!could_keep(x, size, at_peak)) continue; /* never chosen: not even tracked */
      uint64_t b = size | (uint64_t)stream_index(x, ev->stream) << SIZE_BITS | ext << 62 | (uint64_t)at_peak << 63;
      if (rp_map_put(&x->live, ev->addr, ev->ts_ns, b) < 0) {
        st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
        break;
      }
      rp_map_get(&x->live, ev->addr)->c = ev->callsite;
      st = cache_callsite(x, rd, ev->callsite, err);
    }
    if (st != GM_OK) break;
  }
  if (st == GM_END) st = GM_OK;
  if (st != GM_OK) gm_err_wrap(err, "cannot read '%s'", path);
  gmt_reader_close(rd);
  if (st == GM_OK && pass == 1) /* never freed: alive until the end */
    for (size_t i = 0; i < x->live.cap; i++)
      if (x->live.slots[i].state == 1) close_slice(x, &x->live.slots[i], x->last_ts, 0);
  rp_map_free(&x->live);
  rp_map_init(&x->live);
  return st;
}

/* A JSON string body of at most max source bytes: each line made printable (gm_escape: valid
 * UTF-8, no control characters), then '"' and '\\' escaped; line breaks kept as \\n. */
static void put_json_text(FILE *f, const char *s, size_t max) {
  char line[CALLSITE_TEXT + 1], buf[4 * CALLSITE_TEXT + 64];
  size_t done = 0;
  while (s[done] && done < max) {
    size_t l = strcspn(s + done, "\n"), room = max - done;
    if (l > room) l = room;
    if (l > CALLSITE_TEXT) l = CALLSITE_TEXT;
    memcpy(line, s + done, l);
    line[l] = '\0';
    gm_escape(line, buf, sizeof buf);
    for (const char *p = buf; *p; p++) {
      if (*p == '"' || *p == '\\') fputc('\\', f);
      if ((unsigned char)*p >= 0x20) fputc(*p, f);
    }
    done += l;
    if (s[done] == '\n' && done < max) {
      fputs("\\n", f);
      done++;
    }
  }
}

static const char *callsite_text(const exp_t *x, uint32_t id) {
  rp_map_entry_t *e = id ? rp_map_get(&x->callsites, id) : NULL;
  return e ? (const char *)(uintptr_t)e->a : NULL;
}

static int by_stream_start(const void *pa, const void *pb) {
  const slice_t *a = pa, *b = pb;
  if (a->stream != b->stream) return a->stream < b->stream ? -1 : 1;
  if (a->start != b->start) return a->start < b->start ? -1 : 1;
  return a->end > b->end ? -1 : a->end < b->end;
}

static void put_ts(FILE *f, const char *key, uint64_t ns) {
  fprintf(f, "\"%s\":%" PRIu64 ".%03u", key, ns / 1000, (unsigned)(ns % 1000));
}

static void put_stream_name(FILE *f, const exp_t *x, int si) {
  if (si == GR_PERFETTO_STREAMS - 1) fputs("other streams", f);
  else if (x->streams[si] == GMT_STREAM_NONE) fputs("no stream", f);
  else fprintf(f, "stream 0x%" PRIx64, x->streams[si]);
}

/* Lanes: a track shows the slices that nest (one inside the other, or one after the other), so
 * each lane keeps the stack of its open slices' ends; a slice goes on the first lane of its
 * stream where it fits inside the innermost open slice (or the lane is empty at its start).
 * Long-lived allocations (weights, never freed) nest and share a lane. tid 0: none fits. */
typedef struct lane {
  uint64_t *end;
  size_t n, cap;
} lane_t;

static gm_status_t assign_lanes(exp_t *x, gm_err_t *err) {
  qsort(x->heap, x->n_heap, sizeof *x->heap, by_stream_start);
  lane_t lane[GR_PERFETTO_LANES];
  memset(lane, 0, sizeof lane);
  gm_status_t st = GM_OK;
  int lanes = 0, cur = -1;
  for (size_t i = 0; i < x->n_heap && st == GM_OK; i++) {
    slice_t *s = &x->heap[i];
    if (s->stream != cur) {
      cur = s->stream;
      for (int l = 0; l < lanes; l++) lane[l].n = 0;
      lanes = 0;
    }
    int l = 0;
    for (; l < GR_PERFETTO_LANES; l++) {
      lane_t *ln = &lane[l];
      while (ln->n && ln->end[ln->n - 1] <= s->start) ln->n--;
      if (!ln->n || ln->end[ln->n - 1] >= s->end) break;
    }
    if (l == GR_PERFETTO_LANES) {
      s->tid = 0;
      x->st.dropped_lanes++;
      continue;
    }
    lane_t *ln = &lane[l];
    if (ln->n == ln->cap) {
      size_t c = ln->cap ? 2 * ln->cap : 64;
      uint64_t *e = realloc(ln->end, c * sizeof *e);
      if (!e) {
        st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
        break;
      }
      ln->end = e;
      ln->cap = c;
    }
    ln->end[ln->n++] = s->end;
    if (l >= lanes) lanes = l + 1;
    s->tid = (uint32_t)(1 + s->stream * GR_PERFETTO_LANES + l);
  }
  for (int l = 0; l < GR_PERFETTO_LANES; l++) free(lane[l].end);
  return st;
}

static void write_counter(FILE *f, int *first, const char *name, uint64_t ts, uint64_t v, const char *pol) {
  fprintf(f, "%s\n{\"ph\":\"C\",\"pid\":1,\"name\":\"%s", *first ? "" : ",", name);
  if (pol) put_json_text(f, pol, 256);
  fputs("\",", f);
  put_ts(f, "ts", ts);
  fprintf(f, ",\"args\":{\"bytes\":%" PRIu64 "}}", v);
  *first = 0;
}

static void write_json(FILE *f, exp_t *x, const char *trace_path, const gr_trace_info_t *info,
                       rp_result_t *const *res, int n) {
  const rp_result_t *r0 = x->r0;
  char dropped[160] = "";
  if (x->st.dropped_lanes)
    snprintf(dropped, sizeof dropped, "; %" PRIu64 " chosen but left out: more than %d overlapping without nesting on one stream",
             x->st.dropped_lanes, GR_PERFETTO_LANES);
  fputs("{\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"generator\":\"gpureplay " GPUREPLAY_VERSION "\",\"trace\":\"", f);
  put_json_text(f, trace_path, 512);
  fprintf(f, "\",\"device\":%d,\"devices_in_trace\":%d,\"framework\":\"", r0->device, info->n_devices);
  put_json_text(f, info->frameworks_text, 128);
  fprintf(f, "\",\"policies\":%d,\"allocations\":%" PRIu64 ",\"slices\":%" PRIu64 ",\"slices_alive_at_peak\":%" PRIu64
             ",\"alive_at_peak\":%" PRIu64 ",\"peak_live_bytes\":%" PRIu64 ",",
          n, x->st.allocations, x->st.slices, x->st.slices_at_peak, x->st.alive_at_peak, x->st.peak_live_bytes);
  put_ts(f, "peak_live_ts_us", x->st.peak_ts_ns);
  fprintf(f, ",\"slices_rule\":\"at most %d allocations of device %d as slices: every allocation alive at the peak "
             "of live bytes first (largest first), then the largest others; %" PRIu64 " of %" PRIu64
             " written%s\",\"counters_rule\":\"each series at most %d points, each the maximum over its time "
             "bucket (the replay's timeline); live bytes = requested bytes of live allocations\"",
          GR_PERFETTO_MAX_SLICES, r0->device, x->st.slices, x->st.allocations,
          dropped, RP_TIMELINE_MAX);
  if (info->n_devices > 1)
    fputs(",\"note\":\"the trace allocates on several devices: this file shows the first one replayed\"", f);
  fputs("},\n\"traceEvents\":[", f);
  int first = 1;
  fputs("\n{\"ph\":\"M\",\"pid\":1,\"name\":\"process_name\",\"args\":{\"name\":\"gpumem replay: ", f);
  put_json_text(f, trace_path, 200);
  fprintf(f, " (device %d)\"}}", r0->device);
  first = 0;
  /* Counters: live bytes (the same for every policy: from the first), reserved per policy. */
  for (size_t i = 0; i < r0->timeline_n; i++) write_counter(f, &first, "live bytes", r0->tl_ts[i], r0->tl_requested[i], NULL);
  write_counter(f, &first, "live bytes", x->last_ts, r0->end_requested_bytes, NULL);
  x->st.counter_points += r0->timeline_n + 1;
  for (int p = 0; p < n; p++) {
    const rp_result_t *r = res[p];
    for (size_t i = 0; i < r->timeline_n; i++) write_counter(f, &first, "reserved: ", r->tl_ts[i], r->tl_reserved[i], r->policy);
    write_counter(f, &first, "reserved: ", x->last_ts, r->end_reserved_bytes, r->policy);
    x->st.counter_points += r->timeline_n + 1;
    if (r->first_oom_event >= 0) {
      fputs(",\n{\"ph\":\"i\",\"s\":\"p\",\"pid\":1,\"tid\":0,\"name\":\"OOM under ", f);
      put_json_text(f, r->policy, 256);
      fputs("\",", f);
      put_ts(f, "ts", (uint64_t)r->first_oom_ts_ns);
      fprintf(f, ",\"args\":{\"size\":%" PRIu64 ",\"ooms\":%" PRIu64 "}}", r->first_oom_size, r->ooms);
    }
  }
  /* Track names: one per (stream, lane) used. */
  static const size_t n_tids = 1 + GR_PERFETTO_STREAMS * GR_PERFETTO_LANES;
  unsigned char named[1 + GR_PERFETTO_STREAMS * GR_PERFETTO_LANES] = {0};
  for (size_t i = 0; i < x->n_heap; i++) {
    const slice_t *s = &x->heap[i];
    if (!s->tid || s->tid >= n_tids || named[s->tid]) continue;
    named[s->tid] = 1;
    fprintf(f, ",\n{\"ph\":\"M\",\"pid\":1,\"tid\":%u,\"name\":\"thread_name\",\"args\":{\"name\":\"", s->tid);
    put_stream_name(f, x, s->stream);
    fprintf(f, " #%u\"}},\n{\"ph\":\"M\",\"pid\":1,\"tid\":%u,\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":%u}}",
            (s->tid - 1) % GR_PERFETTO_LANES, s->tid, s->tid);
  }
  for (size_t i = 0; i < x->n_heap; i++) {
    const slice_t *s = &x->heap[i];
    if (!s->tid) continue;
    char sz[32];
    const char *cs = callsite_text(x, s->callsite);
    fprintf(f, ",\n{\"ph\":\"X\",\"cat\":\"alloc\",\"pid\":1,\"tid\":%u,\"name\":\"%s", s->tid,
            gm_format_size(s->size, sz, sizeof sz));
    if (cs) { /* the first line of the callsite names the slice; the rest is in args */
      size_t l = strcspn(cs, "\n");
      char line[96];
      snprintf(line, sizeof line, "%.*s", (int)(l < sizeof line - 1 ? l : sizeof line - 1), cs);
      fputc(' ', f);
      put_json_text(f, line, sizeof line);
    }
    fputs("\",", f);
    put_ts(f, "ts", s->start);
    fputc(',', f);
    put_ts(f, "dur", s->end - s->start);
    fprintf(f, ",\"args\":{\"bytes\":%" PRIu64 ",\"addr\":\"0x%" PRIx64 "\",\"freed\":%s,\"alive_at_peak\":%s%s",
            s->size, s->addr, s->freed ? "true" : "false", s->at_peak ? "true" : "false",
            s->external ? ",\"external\":true" : "");
    if (cs) {
      fputs(",\"callsite\":\"", f);
      put_json_text(f, cs, CALLSITE_TEXT);
      fputc('"', f);
    } else if (s->callsite) {
      fprintf(f, ",\"callsite\":\"#%u\"", s->callsite);
    }
    fputs("}}", f);
  }
  fputs("\n]}\n", f);
}

gm_status_t gr_export_perfetto(const char *path, const gr_config_t *cfg, const char *trace_path,
                               const gr_trace_info_t *info, rp_result_t *const *res, int n,
                               gr_perfetto_stats_t *out, gm_err_t *err) {
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  exp_t *x = calloc(1, sizeof *x);
  if (!x || !(x->heap = malloc(GR_PERFETTO_MAX_SLICES * sizeof *x->heap))) {
    free(x);
    return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  }
  x->r0 = res[0];
  x->device = res[0]->device;
  rp_map_init(&x->live);
  rp_map_init(&x->callsites);
  gm_status_t st = GM_OK;
  if (x->device >= 0) {
    st = scan(x, trace_path, cfg->read_flags, 0, err);
    if (st == GM_OK) st = scan(x, trace_path, cfg->read_flags, 1, err);
  }
  if (st == GM_OK) st = assign_lanes(x, err);
  if (st == GM_OK) {
    for (size_t i = 0; i < x->n_heap; i++) {
      x->st.slices += x->heap[i].tid != 0;
      x->st.slices_at_peak += x->heap[i].tid && x->heap[i].at_peak;
    }
  }
  gm_out_t *o = NULL;
  if (st == GM_OK) st = gm_out_open(&o, path, err);
  if (st == GM_OK) {
    FILE *f = gm_out_file(o);
    if (!f) {
      gm_out_abort(o);
      st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
    } else {
      write_json(f, x, trace_path, info, res, n);
      st = gm_out_commit(o, err);
    }
  }
  struct stat sb;
  if (st == GM_OK && stat(path, &sb) == 0) x->st.bytes = (uint64_t)sb.st_size;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  x->st.seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  if (out) *out = x->st;
  for (size_t i = 0; i < x->callsites.cap; i++)
    if (x->callsites.slots[i].state == 1) free((void *)(uintptr_t)x->callsites.slots[i].a);
  rp_map_free(&x->callsites);
  rp_map_free(&x->live);
  free(x->heap);
  free(x);
  return st;
}
