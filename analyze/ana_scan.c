/* ana_scan.c: one streaming pass over a trace's events.
 *
 * Model: live requested bytes = sum of ALLOC sizes not yet FREEd, for memory kinds that are
 * GPU memory requests (device and unknown, as gpureplay replays them; pinned host, managed,
 * pageable, arrays and module statics are counted by kind but never as live GPU bytes). Allocations are keyed by
 * (device, address); a FREE pairs with the live ALLOC at its address. An ALLOC over an
 * address still live closes the old one (counted as an anomaly); a FREE of an address that is
 * not live is counted and otherwise ignored.
 * Workload: allocs ~= frees, near-LIFO, tens of millions of events: the live set is a uthash
 * table whose entries are recycled through a free list (no malloc per event in steady state),
 * and the timeline is a fixed array of buckets whose width doubles when time runs past it. */
#include "analyze/ana.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* gm_key_hash (base): uthash's Jenkins hash cost more than the table over these short keys */
#define HASH_FUNCTION(keyptr, keylen, hashv) ((hashv) = gm_key_hash((keyptr), (size_t)(keylen)))
#include <uthash.h>

typedef struct live {
  uint64_t key_addr;
  uint16_t key_dev;
  ana_pair_t p;
  UT_hash_handle hh;
} live_t;

typedef struct stream_ent {
  uint64_t id;
  UT_hash_handle hh;
} stream_ent_t;

typedef struct bucket {
  uint64_t max, last;
  int filled;
} bucket_t;

struct ana_scan {
  ana_pair_fn fn;
  void *ctx;
  ana_summary_t sum;
  live_t *live;      /* uthash head */
  live_t *spare;     /* recycled entries, linked through hh.next */
  stream_ent_t *streams;
  uint8_t dev_seen[65536 / 8];
  uint64_t live_bytes, live_allocs, seg_live;
  uint64_t map_live; /* mapped VMM bytes (expandable segments): reserved too */
  uint64_t dev_live[ANA_MAX_LISTED]; /* live bytes of summary.devices[i] */
  int last_dev;                      /* index of the last device looked up */
  uint64_t dev_prev_ts[ANA_MAX_LISTED]; /* time of summary.devices[i]'s last event */
  bucket_t buckets[ANA_TIMELINE_POINTS];
  uint64_t width; /* ns per bucket */
  int finished;
  gmt_owners_t *owners; /* NULL until ana_scan_set_trace: then every event goes through it */
  gmt_string_fn str;
  void *str_ctx;
};

/* Hash key: device and address packed into one buffer region of the struct. */
#define KEYLEN (offsetof(live_t, key_dev) + sizeof(uint16_t) - offsetof(live_t, key_addr))
_Static_assert(offsetof(live_t, key_dev) == offsetof(live_t, key_addr) + 8, "find_live's key layout");

int ana_counts_as_device(unsigned mem_kind) {
  return mem_kind == GMT_MEM_DEVICE || mem_kind == GMT_MEM_UNKNOWN;
}

gm_status_t ana_scan_new(ana_scan_t **out, ana_pair_fn fn, void *ctx, gm_err_t *err) {
  ana_scan_t *s = calloc(1, sizeof *s);
  if (!s) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  s->fn = fn;
  s->ctx = ctx;
  s->width = 1024; /* ~1 us to start; doubles as the trace grows */
  s->last_dev = -1;
  *out = s;
  return GM_OK;
}

void ana_scan_free(ana_scan_t *s) {
  if (!s) return;
  live_t *e, *tmp;
  HASH_ITER(hh, s->live, e, tmp) {
    HASH_DEL(s->live, e);
    free(e);
  }
  while (s->spare) {
    live_t *n = s->spare->hh.next;
    free(s->spare);
    s->spare = n;
  }
  gmt_owners_free(s->owners);
  stream_ent_t *se, *st;
  HASH_ITER(hh, s->streams, se, st) {
    HASH_DEL(s->streams, se);
    free(se);
  }
  free(s);
}

gm_status_t ana_scan_set_trace(ana_scan_t *s, const gmt_header_t *h, gmt_string_fn str, void *ctx,
                               gm_err_t *err) {
  gmt_owners_free(s->owners);
  s->owners = NULL;
  s->str = str;
  s->str_ctx = ctx;
  return gmt_owners_new(&s->owners, h, err);
}

/* Fold pairs of buckets until ts fits: keeps the max and the last value of each pair. */
static void timeline_note(ana_scan_t *s, uint64_t ts, uint64_t live) {
  while (ts / s->width >= ANA_TIMELINE_POINTS) {
    for (size_t i = 0; i < ANA_TIMELINE_POINTS / 2; i++) {
      bucket_t a = s->buckets[2 * i], b = s->buckets[2 * i + 1], m;
      m.filled = a.filled || b.filled;
      m.max = a.max > b.max ? a.max : b.max;
      m.last = b.filled ? b.last : a.last;
      s->buckets[i] = m;
    }
    memset(&s->buckets[ANA_TIMELINE_POINTS / 2], 0, sizeof(bucket_t) * (ANA_TIMELINE_POINTS / 2));
    s->width *= 2;
  }
  bucket_t *b = &s->buckets[ts / s->width];
  if (!b->filled || live > b->max) b->max = live;
  b->last = live;
  b->filled = 1;
}

static live_t *entry_get(ana_scan_t *s) {
  live_t *e = s->spare;
  if (e) {
    s->spare = e->hh.next;
    memset(e, 0, sizeof *e);
    return e;
  }
  return calloc(1, sizeof *e);
}

static void entry_put(ana_scan_t *s, live_t *e) {
  e->hh.next = s->spare;
  s->spare = e;
}

static live_t *find_live(ana_scan_t *s, uint16_t dev, uint64_t addr) {
  struct { /* the key's bytes as live_t lays them out (KEYLEN) */
    uint64_t addr;
    uint16_t dev;
  } k = {addr, dev};
  live_t *e = NULL;
  HASH_FIND(hh, s->live, &k, KEYLEN, e);
  return e;
}

static int log10_floor(uint64_t v) {
  int k = 0;
  while (v >= 10) {
    v /= 10;
    k++;
  }
  return k;
}

static void note_lifetime(ana_scan_t *s, const ana_pair_t *p) {
  if (!ana_counts_as_device(p->mem_kind)) return;
  int i = p->free_seq == UINT64_MAX ? 0 : 1 + log10_floor(p->t_free - p->t_alloc);
  s->sum.life_allocs[i]++;
  s->sum.life_bytes[i] += p->size;
}

/* Index of device in summary.devices (the first ANA_MAX_LISTED seen), -1 beyond them. */
static int dev_index(ana_scan_t *s, uint16_t device) {
  if (s->last_dev >= 0 && s->sum.devices[s->last_dev] == device) return s->last_dev;
  uint64_t n = s->sum.n_devices < ANA_MAX_LISTED ? s->sum.n_devices : ANA_MAX_LISTED;
  for (uint64_t i = 0; i < n; i++)
    if (s->sum.devices[i] == device) return s->last_dev = (int)i;
  return -1;
}

static gm_status_t close_pair(ana_scan_t *s, live_t *e, uint64_t seq, uint64_t ts, gm_err_t *err) {
  HASH_DEL(s->live, e);
  e->p.free_seq = seq;
  e->p.t_free = ts;
  note_lifetime(s, &e->p);
  if (ana_counts_as_device(e->p.mem_kind)) {
    s->live_bytes -= e->p.size;
    s->live_allocs--;
    int d = dev_index(s, e->p.device);
    if (d >= 0) s->dev_live[d] -= e->p.size;
  }
  gm_status_t st = s->fn ? s->fn(s->ctx, &e->p, err) : GM_OK;
  entry_put(s, e);
  return st;
}

static void note_stream(ana_scan_t *s, uint64_t id) {
  stream_ent_t *e;
  HASH_FIND(hh, s->streams, &id, sizeof id, e);
  if (e) return;
  e = calloc(1, sizeof *e);
  if (!e) return; /* the count is a statistic; losing one under OOM is harmless */
  e->id = id;
  HASH_ADD(hh, s->streams, id, sizeof id, e);
  if (s->sum.n_streams < ANA_MAX_LISTED) s->sum.streams[s->sum.n_streams] = id;
  s->sum.n_streams++;
}

/* Counts an event earlier than its device's event before (the device seen just before). */
static void note_order(ana_scan_t *s, const gmt_event_t *ev, uint64_t seq) {
  int i = dev_index(s, ev->device);
  if (i < 0) return;
  ana_summary_t *m = &s->sum;
  uint64_t prev = s->dev_prev_ts[i];
  if (ev->ts_ns < prev) {
    if (!m->ts_backward++) m->ts_backward_first_seq = seq, m->ts_backward_device = ev->device;
    if (prev - ev->ts_ns > m->ts_backward_max_ns) m->ts_backward_max_ns = prev - ev->ts_ns;
  } else {
    s->dev_prev_ts[i] = ev->ts_ns;
  }
}

char *ana_out_of_order_text(const ana_summary_t *m, char *buf, size_t n) {
  if (!m->ts_backward) {
    if (n) buf[0] = 0;
    return buf;
  }
  char back[32];
  uint64_t b = m->ts_backward_max_ns;
  if (b < 1000) snprintf(back, sizeof back, "%" PRIu64 " ns", b);
  else if (b < 1000000) snprintf(back, sizeof back, "%.3f us", (double)b / 1e3);
  else snprintf(back, sizeof back, "%.3f ms", (double)b / 1e6);
  snprintf(buf, n,
           "%" PRIu64 " events are earlier than an event before them on the same device (the first: event %" PRIu64
           " on device %u; up to %s back): durations and timelines drawn from the times are approximate",
           m->ts_backward, m->ts_backward_first_seq, (unsigned)m->ts_backward_device, back);
  return buf;
}

gm_status_t ana_scan_event(ana_scan_t *s, const gmt_event_t *ev, gm_err_t *err) {
  ana_summary_t *m = &s->sum;
  uint64_t seq = m->events++;
  if (seq == 0) m->first_ts_ns = m->min_ts_ns = ev->ts_ns;
  if (ev->ts_ns > m->last_ts_ns) m->last_ts_ns = ev->ts_ns;
  if (ev->ts_ns < m->min_ts_ns) m->min_ts_ns = ev->ts_ns;
  if (ev->kind < GMT_EV_KIND_MAX) m->by_kind[ev->kind]++;
  if (ev->kind == GMT_EV_ALLOC && (ev->flags & GMT_F_ASYNC) &&
      (ev->mem_kind == GMT_MEM_DEVICE || ev->mem_kind == GMT_MEM_UNKNOWN))
    m->async_device_allocs++;
  if (!(s->dev_seen[ev->device / 8] & (1u << (ev->device % 8)))) {
    s->dev_seen[ev->device / 8] |= (uint8_t)(1u << (ev->device % 8));
    if (m->n_devices < ANA_MAX_LISTED) m->devices[m->n_devices] = ev->device;
    m->n_devices++;
  }
  note_order(s, ev, seq);
  if (ev->callsite > m->max_callsite) m->max_callsite = ev->callsite;
  gm_status_t st = s->owners ? gmt_owners_event(s->owners, ev, s->str, s->str_ctx, err) : GM_OK;
  if (st < 0) return st;
  switch (ev->kind) {
    case GMT_EV_ALLOC: {
      note_stream(s, ev->stream);
      live_t *old = find_live(s, ev->device, ev->addr);
      if (old) {
        m->double_alloc++;
        st = close_pair(s, old, seq, ev->ts_ns, err);
        if (st < 0) return st;
      }
      live_t *e = entry_get(s);
      if (!e) return gm_err_set(err, GM_ERR_NOMEM, "out of memory at event %" PRIu64, seq);
      e->key_addr = ev->addr;
      e->key_dev = ev->device;
      e->p.alloc_seq = seq;
      e->p.free_seq = UINT64_MAX;
      e->p.t_alloc = ev->ts_ns;
      e->p.addr = ev->addr;
      e->p.size = ev->size;
      e->p.stream = ev->stream;
      e->p.callsite = ev->callsite;
      e->p.device = ev->device;
      e->p.mem_kind = ev->mem_kind;
      HASH_ADD(hh, s->live, key_addr, KEYLEN, e);
      if (ana_counts_as_device(ev->mem_kind)) {
        m->requested_bytes_total += ev->size;
        int c = ev->size ? 64 - __builtin_clzll(ev->size) : 0;
        m->size_allocs[c]++;
        m->size_bytes[c] += ev->size;
        s->live_bytes += ev->size;
        s->live_allocs++;
        int d = dev_index(s, ev->device);
        if (d >= 0 && (s->dev_live[d] += ev->size) > m->device_peak[d]) m->device_peak[d] = s->dev_live[d];
        if (s->live_bytes > m->peak_live_bytes) {
          m->peak_live_bytes = s->live_bytes;
          m->peak_live_seq = seq;
          m->peak_live_ts_ns = ev->ts_ns;
        }
      }
      break;
    }
    case GMT_EV_FREE: {
      live_t *e = find_live(s, ev->device, ev->addr);
      if (!e) {
        m->unknown_free++;
        break;
      }
      st = close_pair(s, e, seq, ev->ts_ns, err);
      if (st < 0) return st;
      break;
    }
    case GMT_EV_SEGMENT_ALLOC:
      s->seg_live += ev->size;
      if (s->seg_live > m->peak_segment_bytes) m->peak_segment_bytes = s->seg_live;
      break;
    case GMT_EV_SEGMENT_FREE:
      s->seg_live = s->seg_live >= ev->size ? s->seg_live - ev->size : 0;
      break;
    case GMT_EV_ALLOC_FAILED:
      if (!ana_counts_as_device(ev->mem_kind)) break;
      if (m->failed_allocs++ == 0) {
        m->failed_seq = seq;
        m->failed_ts_ns = ev->ts_ns;
        m->failed_size = ev->size;
        m->failed_stream = ev->stream;
        m->failed_callsite = ev->callsite;
        m->failed_device = ev->device;
        m->failed_live_bytes = s->live_bytes;
        m->failed_segment_bytes = s->seg_live + s->map_live;
      }
      break;
    case GMT_EV_VMM_MAP:
      if (ana_counts_as_device(ev->mem_kind)) s->map_live += ev->size;
      break;
    case GMT_EV_VMM_UNMAP:
      if (ana_counts_as_device(ev->mem_kind)) s->map_live -= s->map_live >= ev->size ? ev->size : s->map_live;
      break;
    default:
      break;
  }
  timeline_note(s, ev->ts_ns, s->live_bytes);
  return GM_OK;
}

static int by_alloc_seq(live_t *a, live_t *b) {
  return a->p.alloc_seq < b->p.alloc_seq ? -1 : a->p.alloc_seq > b->p.alloc_seq;
}

gm_status_t ana_scan_finish(ana_scan_t *s, gm_err_t *err) {
  if (s->finished) return GM_OK;
  s->finished = 1;
  s->sum.live_bytes_at_end = s->live_bytes;
  s->sum.live_allocs_at_end = s->live_allocs;
  if (s->owners) s->sum.owners = *gmt_owners_result(s->owners);
  /* Emit the never-freed in allocation order so tables read naturally. */
  HASH_SORT(s->live, by_alloc_seq);
  live_t *e, *tmp;
  HASH_ITER(hh, s->live, e, tmp) {
    HASH_DEL(s->live, e);
    note_lifetime(s, &e->p);
    gm_status_t st = s->fn ? s->fn(s->ctx, &e->p, err) : GM_OK;
    free(e);
    if (st < 0) return st;
  }
  return GM_OK;
}

const ana_summary_t *ana_scan_summary(const ana_scan_t *s) { return &s->sum; }

size_t ana_scan_timeline(const ana_scan_t *s, uint64_t *ts, uint64_t *live, size_t cap) {
  size_t n = 0;
  uint64_t carry = 0;
  size_t last_filled = 0;
  for (size_t i = 0; i < ANA_TIMELINE_POINTS; i++)
    if (s->buckets[i].filled) last_filled = i;
  for (size_t i = 0; i <= last_filled && n < cap; i++) {
    const bucket_t *b = &s->buckets[i];
    uint64_t v = carry;
    if (b->filled) {
      v = b->max > carry ? b->max : carry;
      carry = b->last;
    }
    ts[n] = i * s->width;
    live[n] = v;
    n++;
  }
  return n;
}
