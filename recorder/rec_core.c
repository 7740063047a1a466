/* rec_core.c: the recorder's writer thread and its life cycle.
 *
 * Model: producers push decoded events into the lock-free ring (rec_ring.c). One writer thread
 * drains the ring every few milliseconds into a pending buffer, and every flush interval
 *   1. notes the source's clock (horizon), 2. asks the source to hand over everything it buffers
 *   (CUPTI's activity buffers), 3. sorts the pending events by timestamp and writes those older
 *   than the horizon minus a small margin, 4. cuts a chunk and flushes it to the OS.
 * So events reach the file in timestamp order even though CUPTI delivers records in late batches
 * while API callbacks (failed allocations, VMM calls) arrive at once, and no written chunk is
 * older than about one flush interval: a SIGKILL loses at most the last second.
 * Each pass drains at most one ring's worth, so a ring kept busy by the application's threads
 * never starves the flush: what a SIGKILL loses stays within about one flush interval.
 * Failure (disk full, a bad path): warn once through the source's hook, stop accepting events,
 * cut the file back to its last complete chunk and mark its header partial, `stopped` with the
 * reason and the window's end (gmt_writer_stop: in place, inside the header's room), so the
 * application runs on and the trace says where it stops. A normal close marks the header
 * partial too where the recording knows it is: records dropped, or frees of addresses it never
 * saw allocated (a recording that began after the process allocated) (SPEC.md §3.4). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uthash.h>

#include "recorder/rec_core.h"
#include "recorder/rec_ring.h"
#if REC_HAVE_TICKS
#include <x86intrin.h>
#endif

enum { STOP_NONE = 0, STOP_NORMAL = 1, STOP_SIGNAL = 2 };
#define DRAIN_BATCH 4096
#define IDLE_SLEEP_NS 10000000ull /* 10 ms between ring drains when idle */
/* REC_TS_TICKS: readings of both clocks kept for the conversion; a counter reading older than the
 * oldest kept (its event waited in the ring through that many drains) is placed on that oldest
 * interval's line, extended back. */
#define TICK_SAMPLES 64
#define TICK_SKEW 65536 /* counter ticks (~20 us) two cores' counters may differ by */
/* A source without a tick hook (the callback capture) pushes every event at once, stamped just
 * before: the writer may then write what is older than now - margin at any time. Doing so
 * whenever this many events wait, instead of only every flush interval, keeps each sort and
 * compression pass short, so the single writer thread is back draining the ring before it
 * fills (a 0.5 s pass at ~2 M events/s took long enough to overflow a 65536-event ring). */
#ifndef EARLY_EMIT_EVENTS
#define EARLY_EMIT_EVENTS 32768
#endif

/* A live allocation, for fill_free_sizes (writer thread only). */
typedef struct live {
  uint64_t addr;
  uint64_t size;
  uint8_t mem_kind;
  UT_hash_handle hh;
} live_t;

typedef struct pend {
  gmt_event_t ev;
  uint64_t arrival; /* keeps the sort stable: same timestamp, order of arrival */
} pend_t;

struct rec_core {
  rec_config_t cfg;
  char *path, *manifest;
  rec_hooks_t hooks;
  pthread_t thread;
  int thread_started;
  pthread_mutex_t mu;
  pthread_cond_t cv;

  /* read by every push: a cache line of their own, written only when the recording stops; the
   * ring's head line right after it, in place (not behind a pointer on this line): a push's two
   * loads of the core are independent, so a cold push waits for one miss here, not two in a row */
  _Alignas(64) _Atomic int stop_req;
  _Atomic int done;     /* writer thread finished (closed or failed) */
  _Atomic int failed;
  _Atomic int gpu_ready;
  _Atomic int sync_req; /* rec_core_sync: write everything pushed so far, then clear */
  _Atomic int bad_ticks; /* a REC_TS_TICKS reading was not the counter's: pushes read their own */
  rec_ring_t ring;
  /* counters the writer updates as it goes (pushes are counted by the ring's head) */
  _Alignas(64) _Atomic uint64_t written, ring_drops, src_drops, file_bytes, bad_tick_events;
  char fail_msg[512];
  _Atomic int fail_req;

  /* writer thread only */
  gmt_writer_t *w;
  pend_t *pend;
  size_t npend, cap_pend;
  uint64_t arrivals;
  uint64_t start_mono;
  gmt_event_t batch[DRAIN_BATCH];
  uint64_t reported_drops;
  int stopped_once;
  live_t *live;      /* fill_free_sizes: live allocations by address */
  live_t *live_free; /* recycled entries */
  uint32_t *cs_map;  /* hooks.string: the source's callsite id -> the trace's string id */
  size_t ncs_map;
  rec_mapped_t mapped; /* DEVICE_USAGE records: each device's mapped bytes (rec_devmem.c) */
  /* REC_TS_TICKS: readings of (counter, now_ns) in increasing order, the last TICK_SAMPLES kept
   * (a ring: smp_n of them, the newest at smp_next - 1); tick_start: the first, at rec_core_start */
  struct { uint64_t tick, ns; } smp[TICK_SAMPLES];
  unsigned smp_n, smp_next;
  uint64_t tick_start;
  uint64_t unseen_frees; /* fill_free_sizes: frees of addresses never seen allocated */
};

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

/* ---- writer-thread helpers ------------------------------------------------------------------ */

static void fail_now(rec_core_t *c, const char *msg) {
  if (atomic_exchange(&c->failed, 1)) return;
  if (c->w) {
    /* what is on disk stays readable up to its last chunk, and says that it stops there */
    uint64_t last_ts = 0, events = gmt_writer_events_written(c->w, &last_ts);
    gmt_coverage_t cov;
    memset(&cov, 0, sizeof cov);
    snprintf(cov.stopped, sizeof cov.stopped, "%s", msg);
    gm_err_t err;
    gm_err_clear(&err);
    gm_status_t s = gmt_writer_stop(c->w, &cov, &err);
    c->w = NULL;
    char full[GM_ERR_MSG_MAX + 768];
    if (s == GM_OK)
      snprintf(full, sizeof full, "%s; the trace keeps its first %" PRIu64 " events (to t=%.3f s) and says "
               "where it stops", msg, events, (double)last_ts / 1e9);
    else
      snprintf(full, sizeof full, "%s; the trace keeps its first %" PRIu64 " events but could not be marked "
               "(%s)", msg, events, err.msg);
    if (c->hooks.warn) c->hooks.warn(c->hooks.ctx, full);
  } else if (c->hooks.warn) {
    c->hooks.warn(c->hooks.ctx, msg);
  }
  c->npend = 0;
}

/* ---- counter readings onto the clock (REC_TS_TICKS) -------------------------------------------- */

static inline uint64_t counter(void) {
#if REC_HAVE_TICKS
  return __rdtsc();
#else
  return 0;
#endif
}

/* One reading of both clocks (the counter's the mean of one before and one after now_ns), kept
 * if both went forward since the last. Returns the counter as read last. */
static uint64_t tick_sample(rec_core_t *c) {
  if (!c->hooks.now_ns || !REC_HAVE_TICKS) return 0;
  uint64_t t0 = counter(), ns = c->hooks.now_ns(c->hooks.ctx), t1 = counter();
  uint64_t tick = t0 + (t1 - t0) / 2;
  if (c->smp_n) {
    unsigned last = (c->smp_next + TICK_SAMPLES - 1) % TICK_SAMPLES;
    if (tick <= c->smp[last].tick || ns < c->smp[last].ns) return t1;
  } else {
    c->tick_start = tick;
  }
  c->smp[c->smp_next].tick = tick;
  c->smp[c->smp_next].ns = ns;
  c->smp_next = (c->smp_next + 1) % TICK_SAMPLES;
  if (c->smp_n < TICK_SAMPLES) c->smp_n++;
  return t1;
}

/* ns on the line through readings a and b (a.tick < b.tick) at tick, never below 0 */
static uint64_t on_line(uint64_t ta, uint64_t na, uint64_t tb, uint64_t nb, uint64_t tick) {
  double r = (double)(nb - na) / (double)(tb - ta);
  if (tick >= ta) return na + (uint64_t)((double)(tick - ta) * r);
  uint64_t back = (uint64_t)((double)(ta - tick) * r);
  return back < na ? na - back : 0;
}

/* A reading that cannot be the counter's: counted, its event clamped to what the readings say. */
static uint64_t bad_tick(rec_core_t *c, uint64_t ns) {
  atomic_fetch_add_explicit(&c->bad_tick_events, 1, memory_order_relaxed);
  atomic_store_explicit(&c->bad_ticks, 1, memory_order_relaxed);
  return ns;
}

/* The time of counter reading tick, between the two kept readings around it (every event of a
 * batch was pushed before the reading taken after the batch's pop, so none is newer; now: the
 * counter read then, which a reading not kept (a clock that did not go forward) still bounds). */
static uint64_t tick_to_ns(rec_core_t *c, uint64_t tick, uint64_t now) {
  if (!c->smp_n) return 0; /* no now_ns: no clock to put it on */
  unsigned newest = (c->smp_next + TICK_SAMPLES - 1) % TICK_SAMPLES;
  unsigned oldest = (c->smp_next + TICK_SAMPLES - c->smp_n) % TICK_SAMPLES;
  /* the counters of two cores may differ by a little: so little is clamped, not wrong */
  if (tick > c->smp[newest].tick)
    return tick <= now + TICK_SKEW ? c->smp[newest].ns : bad_tick(c, c->smp[newest].ns);
  if (tick < c->tick_start)
    return c->tick_start - tick <= TICK_SKEW ? c->smp[oldest].ns : bad_tick(c, c->smp[oldest].ns);
  unsigned nx = newest;
  for (unsigned k = 1; k < c->smp_n; k++) {
    unsigned i = (newest + TICK_SAMPLES - k) % TICK_SAMPLES;
    if (c->smp[i].tick <= tick)
      return on_line(c->smp[i].tick, c->smp[i].ns, c->smp[nx].tick, c->smp[nx].ns, tick);
    nx = i;
  }
  if (c->smp_n == 1) return c->smp[newest].ns;
  /* older than every kept reading: the oldest interval's line */
  unsigned o1 = (oldest + 1) % TICK_SAMPLES;
  return on_line(c->smp[oldest].tick, c->smp[oldest].ns, c->smp[o1].tick, c->smp[o1].ns, tick);
}

/* The counter readings of a popped batch onto the clock, with a reading of both taken now. */
static void batch_times(rec_core_t *c, gmt_event_t *ev, size_t n) {
  size_t i = 0;
  while (i < n && !(ev[i].ts_ns & REC_TS_TICKS)) i++;
  if (i == n) return;
  uint64_t now = tick_sample(c);
  for (; i < n; i++)
    if (ev[i].ts_ns & REC_TS_TICKS) ev[i].ts_ns = tick_to_ns(c, ev[i].ts_ns & ~REC_TS_TICKS, now);
}

static int drain(rec_core_t *c) {
  int any = 0;
  size_t n, budget = c->cfg.ring_events; /* then back to flushing, however busy the ring */
  while (budget && (n = rec_ring_pop(&c->ring, c->batch, budget < DRAIN_BATCH ? budget : DRAIN_BATCH)) > 0) {
    budget -= n;
    any = 1;
    if (atomic_load(&c->failed)) continue;
    batch_times(c, c->batch, n);
    if (c->npend + n > c->cap_pend) {
      size_t cap = c->cap_pend ? c->cap_pend : 8192;
      while (cap < c->npend + n) cap *= 2;
      pend_t *p = realloc(c->pend, cap * sizeof *p);
      if (!p) {
        fail_now(c, "out of memory buffering events; recording stopped");
        continue;
      }
      c->pend = p;
      c->cap_pend = cap;
    }
    for (size_t i = 0; i < n; i++) {
      c->pend[c->npend].ev = c->batch[i];
      c->pend[c->npend].arrival = c->arrivals++;
      c->npend++;
    }
  }
  return any;
}

static int cmp_pend(const void *a, const void *b) {
  const pend_t *x = a, *y = b;
  if (x->ev.ts_ns != y->ev.ts_ns) return x->ev.ts_ns < y->ev.ts_ns ? -1 : 1;
  return x->arrival < y->arrival ? -1 : x->arrival > y->arrival;
}

static void open_file(rec_core_t *c) {
  if (c->w || atomic_load(&c->failed)) return;
  gmt_header_t h;
  gm_err_t err;
  gm_err_clear(&err);
  if (gmt_header_copy(&h, &c->cfg.header, &err) < 0) {
    fail_now(c, err.msg);
    return;
  }
  if (c->hooks.fill_header) c->hooks.fill_header(c->hooks.ctx, &h);
  h.room = REC_HEADER_ROOM; /* for the coverage marks of a stop, a close or gpurec after a kill */
  gm_status_t s = gmt_writer_open(&c->w, c->path, &h, &c->cfg.writer, &err);
  gmt_header_free(&h);
  if (s < 0) {
    char msg[GM_ERR_MSG_MAX + 64];
    snprintf(msg, sizeof msg, "cannot write trace: %s; recording stopped", err.msg);
    c->w = NULL;
    fail_now(c, msg);
    return;
  }
  if (c->manifest) {
    /* one short O_APPEND write: atomic between the processes of one job */
    int fd = open(c->manifest, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) {
      char line[4200];
      int len = snprintf(line, sizeof line, "%s\n", c->path);
      if (len > 0 && (size_t)len < sizeof line && write(fd, line, (size_t)len) < 0) {
        /* the launcher then falls back to the trace name it can compute */
      }
      close(fd);
    }
  }
}

/* fill_free_sizes: remember allocations, complete frees that came without a size. */
static void track_live(rec_core_t *c, gmt_event_t *ev) {
  live_t *e = NULL;
  if (ev->kind == GMT_EV_ALLOC) {
    HASH_FIND(hh, c->live, &ev->addr, sizeof ev->addr, e);
    if (!e) {
      if ((e = c->live_free)) c->live_free = e->hh.next;
      else if (!(e = malloc(sizeof *e))) return; /* the free then stays size 0 */
      e->addr = ev->addr;
      HASH_ADD(hh, c->live, addr, sizeof e->addr, e);
    }
    e->size = ev->size;
    e->mem_kind = ev->mem_kind;
  } else if (ev->kind == GMT_EV_FREE) {
    HASH_FIND(hh, c->live, &ev->addr, sizeof ev->addr, e);
    if (!e) { /* the driver freed it (only successful frees are events): allocated before we began */
      if (!(ev->flags & GMT_F_TORCH_STREAM)) c->unseen_frees++; /* PyTorch's blocks are not driver calls */
      return;
    }
    if (ev->size == 0) ev->size = e->size;
    if (ev->mem_kind == GMT_MEM_UNKNOWN) ev->mem_kind = e->mem_kind;
    HASH_DEL(c->live, e);
    e->hh.next = c->live_free;
    c->live_free = e;
  }
}

static void free_live(rec_core_t *c) {
  live_t *e, *tmp;
  HASH_ITER(hh, c->live, e, tmp) {
    HASH_DEL(c->live, e);
    free(e);
  }
  while ((e = c->live_free)) {
    c->live_free = e->hh.next;
    free(e);
  }
}

/* The trace's string id for the source's callsite id (hooks.string), interned on first use;
 * GMT_NO_STRING if the source has no text for it. */
static gm_status_t map_callsite(rec_core_t *c, uint32_t *id, gm_err_t *err) {
  if (*id == GMT_NO_STRING || !c->hooks.string) return GM_OK;
  if (*id >= c->ncs_map) {
    size_t n = c->ncs_map ? c->ncs_map : 1024;
    while (n <= *id) n *= 2;
    uint32_t *m = realloc(c->cs_map, n * sizeof *m);
    if (!m) return gm_err_set(err, GM_ERR_NOMEM, "out of memory for callsites");
    memset(m + c->ncs_map, 0, (n - c->ncs_map) * sizeof *m);
    c->cs_map = m;
    c->ncs_map = n;
  }
  if (!c->cs_map[*id]) {
    const char *text = c->hooks.string(c->hooks.ctx, *id);
    if (!text) {
      *id = GMT_NO_STRING;
      return GM_OK;
    }
    gm_status_t s = gmt_writer_intern(c->w, text, &c->cs_map[*id], err);
    if (s < 0) return s;
  }
  *id = c->cs_map[*id];
  return GM_OK;
}

/* Write pending events with ts < limit (all of them for UINT64_MAX), in timestamp order. */
static void emit(rec_core_t *c, uint64_t limit) {
  if (!c->npend || atomic_load(&c->failed)) return;
  if (!c->w) open_file(c);
  if (!c->w) return;
  qsort(c->pend, c->npend, sizeof *c->pend, cmp_pend);
  size_t k = 0;
  while (k < c->npend && c->pend[k].ev.ts_ns < limit) k++;
  gm_err_t err;
  gm_err_clear(&err);
  for (size_t i = 0; i < k; i++) {
    if (c->cfg.fill_free_sizes) track_live(c, &c->pend[i].ev);
    if (rec_mapped_apply(&c->mapped, &c->pend[i].ev) < 0) continue; /* a count the maps exceed */
    if (map_callsite(c, &c->pend[i].ev.callsite, &err) < 0 ||
        gmt_writer_append(c->w, &c->pend[i].ev, &err) < 0) {
      char msg[GM_ERR_MSG_MAX + 64];
      snprintf(msg, sizeof msg, "cannot write trace: %s; recording stopped", err.msg);
      fail_now(c, msg);
      return;
    }
  }
  atomic_fetch_add(&c->written, k);
  memmove(c->pend, c->pend + k, (c->npend - k) * sizeof *c->pend);
  c->npend -= k;
}

static void flush_file(rec_core_t *c) {
  if (!c->w || atomic_load(&c->failed)) return;
  uint64_t total = atomic_load(&c->src_drops) + atomic_load(&c->ring_drops);
  if (total > c->reported_drops) gmt_writer_add_dropped(c->w, total - c->reported_drops);
  c->reported_drops = total;
  gm_err_t err;
  gm_err_clear(&err);
  if (gmt_writer_flush(c->w, &err) < 0) {
    char msg[GM_ERR_MSG_MAX + 64];
    snprintf(msg, sizeof msg, "cannot write trace: %s; recording stopped", err.msg);
    fail_now(c, msg);
    return;
  }
  atomic_store(&c->file_bytes, gmt_writer_bytes(c->w));
}

/* What the recording knows it missed, in the header before the index (SPEC.md §3.4). */
static void mark_known_losses(rec_core_t *c) {
  gmt_coverage_t cov;
  memset(&cov, 0, sizeof cov);
  int dropped = atomic_load(&c->src_drops) + atomic_load(&c->ring_drops) > 0;
  if (dropped) cov.why |= GMT_COV_DROPPED;
  if (c->unseen_frees && !dropped) { /* a dropped allocation leaves its free unseen: said already */
    cov.why |= GMT_COV_LATE_START;
    cov.unseen_frees = c->unseen_frees;
  }
  if (!cov.why) return;
  cov.partial = 1;
  gm_err_t err;
  gm_err_clear(&err);
  if (gmt_writer_mark(c->w, &cov, &err) < 0 && c->hooks.warn) {
    char msg[GM_ERR_MSG_MAX + 64];
    snprintf(msg, sizeof msg, "cannot mark the trace partial: %s", err.msg);
    c->hooks.warn(c->hooks.ctx, msg);
  }
}

static void finish(rec_core_t *c, int from_signal) {
  if (from_signal && c->hooks.final_flush) c->hooks.final_flush(c->hooks.ctx);
  for (int pass = 0; pass < 64 && drain(c); pass++) { /* what was pushed before the stop; threads */
  }                                                    /* pushing on (push_batch) cannot hold it */
  if (!atomic_load(&c->failed)) {
    if (!c->w && (c->npend || atomic_load(&c->gpu_ready)))
      open_file(c); /* a process with a GPU context leaves a trace even without events */
    emit(c, UINT64_MAX);
    flush_file(c);
  }
  if (c->w && !atomic_load(&c->failed)) mark_known_losses(c);
  if (c->w) {
    gm_err_t err;
    gm_err_clear(&err);
    if (gmt_writer_seal(c->w, &err) < 0) { /* the disk filled at the very end: said as any other */
      char msg[GM_ERR_MSG_MAX + 64];
      snprintf(msg, sizeof msg, "cannot write trace: %s; recording stopped", err.msg);
      fail_now(c, msg); /* cuts back to the last whole chunk, marks it, closes */
      return;
    }
    uint64_t bytes = gmt_writer_bytes(c->w);
    if (gmt_writer_close(c->w, &err) < 0) {
      c->w = NULL;
      char msg[GM_ERR_MSG_MAX + 64];
      snprintf(msg, sizeof msg, "cannot finish trace: %s", err.msg);
      fail_now(c, msg);
    } else {
      atomic_store(&c->file_bytes, bytes);
    }
    c->w = NULL;
  }
}

/* rec_core_sync: everything pushed so far onto the disk, the horizon without its margin (the
 * caller says the process is quiet: its interpreter has finished). */
static void sync_now(rec_core_t *c) {
  if (c->hooks.tick && !atomic_load(&c->failed)) c->hooks.tick(c->hooks.ctx);
  for (int pass = 0; pass < 64 && drain(c); pass++) {
  }
  if (!c->w && !atomic_load(&c->failed) && (c->npend || atomic_load(&c->gpu_ready))) open_file(c);
  if (c->w) {
    emit(c, c->hooks.now_ns ? c->hooks.now_ns(c->hooks.ctx) + 1 : UINT64_MAX);
    flush_file(c);
  }
  atomic_store(&c->sync_req, 0);
}

static void *writer_main(void *arg) {
  rec_core_t *c = arg;
  /* The application's signals are for its own threads. SIGXFSZ (a file size limit) stays pending
   * here instead of killing the job, and the write fails with EFBIG: the recording stops, the
   * job runs on. */
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  uint64_t last_tick = mono_ns();
  for (;;) {
    int stop = atomic_load(&c->stop_req);
    if (atomic_load(&c->fail_req)) fail_now(c, c->fail_msg);
    if (stop) {
      finish(c, stop == STOP_SIGNAL);
      break;
    }
    if (atomic_load(&c->sync_req)) {
      sync_now(c);
      continue;
    }
    int any = drain(c);
    uint64_t now = mono_ns();
    /* a process that loaded CUDA but never made a context nor an event (torchrun's agent
     * asking for the device count) leaves no file */
    if (!c->w && !atomic_load(&c->failed) &&
        (atomic_load(&c->gpu_ready) || (c->npend && now - c->start_mono >= c->cfg.open_after_ns)))
      open_file(c);
    if (c->w && !c->hooks.tick && c->npend >= EARLY_EMIT_EVENTS) {
      uint64_t horizon = c->hooks.now_ns ? c->hooks.now_ns(c->hooks.ctx) : UINT64_MAX;
      uint64_t margin = c->cfg.order_margin_ns;
      emit(c, horizon == UINT64_MAX ? horizon : (horizon > margin ? horizon - margin : 0));
    }
    if (now - last_tick >= c->cfg.flush_interval_ns) {
      last_tick = now;
      uint64_t horizon = c->hooks.now_ns ? c->hooks.now_ns(c->hooks.ctx) : UINT64_MAX;
      if (c->hooks.tick && !atomic_load(&c->failed)) c->hooks.tick(c->hooks.ctx);
      drain(c);
      if (c->w) {
        uint64_t margin = c->cfg.order_margin_ns;
        emit(c, horizon == UINT64_MAX ? horizon : (horizon > margin ? horizon - margin : 0));
        flush_file(c);
      }
    }
    if (!any) {
      pthread_mutex_lock(&c->mu);
      if (!atomic_load(&c->stop_req)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t t = (uint64_t)ts.tv_nsec + IDLE_SLEEP_NS;
        ts.tv_sec += (time_t)(t / 1000000000ull);
        ts.tv_nsec = (long)(t % 1000000000ull);
        pthread_cond_timedwait(&c->cv, &c->mu, &ts);
      }
      pthread_mutex_unlock(&c->mu);
    }
  }
  atomic_store(&c->done, 1);
  return NULL;
}

/* ---- public --------------------------------------------------------------------------------- */

gm_status_t rec_core_start(rec_core_t **out, const rec_config_t *cfg, const rec_hooks_t *hooks,
                           gm_err_t *err) {
  rec_core_t *c = aligned_alloc(_Alignof(rec_core_t), sizeof *c); /* its hot lines apart */
  if (c) memset(c, 0, sizeof *c);
  if (!c) return gm_err_set(err, GM_ERR_NOMEM, "recorder: out of memory");
  c->cfg = *cfg;
  if (!c->cfg.flush_interval_ns) c->cfg.flush_interval_ns = REC_FLUSH_INTERVAL_NS;
  if (!c->cfg.open_after_ns) c->cfg.open_after_ns = 1000000000ull;
  if (!c->cfg.order_margin_ns) c->cfg.order_margin_ns = 10000000ull;
  if (!c->cfg.ring_events) c->cfg.ring_events = 65536;
  if (hooks) c->hooks = *hooks;
  gm_status_t s;
  c->path = strdup(cfg->path ? cfg->path : "");
  c->manifest = cfg->manifest ? strdup(cfg->manifest) : NULL;
  if (!c->path || (cfg->manifest && !c->manifest)) {
    s = gm_err_set(err, GM_ERR_NOMEM, "recorder: out of memory");
    goto fail;
  }
  if ((s = gmt_header_copy(&c->cfg.header, &cfg->header, err)) < 0) goto fail;
  if ((s = rec_ring_init(&c->ring, c->cfg.ring_events, err)) < 0) goto fail_hdr;
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->cv, NULL);
  c->start_mono = mono_ns();
  tick_sample(c); /* the first reading: no counter reading pushed from now on is older */
  int e = pthread_create(&c->thread, NULL, writer_main, c);
  if (e) {
    s = gm_err_set(err, GM_ERR_IO, "recorder: cannot start writer thread: %s", strerror(e));
    rec_ring_fini(&c->ring);
    goto fail_hdr;
  }
  c->thread_started = 1;
  *out = c;
  return GM_OK;
fail_hdr:
  gmt_header_free(&c->cfg.header);
fail:
  free(c->path);
  free(c->manifest);
  free(c);
  return s;
}

int rec_core_push(rec_core_t *c, const gmt_event_t *ev) {
  if (atomic_load_explicit(&c->failed, memory_order_relaxed) ||
      atomic_load_explicit(&c->stop_req, memory_order_relaxed))
    return -1;
  if (rec_ring_push(&c->ring, ev) < 0) {
    atomic_fetch_add_explicit(&c->ring_drops, 1, memory_order_relaxed);
    return -1;
  }
  return 0;
}

size_t rec_core_push_batch(rec_core_t *c, const gmt_event_t *evs, size_t n, uint64_t max_wait_ns) {
  size_t dropped = 0;
  uint64_t deadline = 0;
  for (size_t i = 0; i < n; i++) {
    if (atomic_load(&c->failed) || atomic_load(&c->done)) {
      dropped += n - i;
      break;
    }
    if (rec_ring_push(&c->ring, &evs[i]) == 0) continue;
    /* ring full: this is the source's own thread, so it may wait for the writer a little */
    uint64_t now = mono_ns();
    if (!deadline) deadline = now + max_wait_ns;
    if (now >= deadline) {
      atomic_fetch_add(&c->ring_drops, 1);
      dropped++;
      continue;
    }
    sleep_ns(100000);
    i--;
  }
  return dropped;
}

/* rec_core_push_entry once the producers' counter readings were found wrong: its own instead. */
static __attribute__((cold, noinline)) int push_own_tick(rec_core_t *c, const gmt_event_t *ev, uint64_t max_wait_ns) {
  gmt_event_t e = *ev;
  e.ts_ns = counter() | REC_TS_TICKS;
  return rec_core_push_batch(c, &e, 1, max_wait_ns) ? -1 : 0;
}

__attribute__((hot)) int rec_core_push_entry(rec_core_t *c, const gmt_event_t *ev, uint64_t max_wait_ns) {
  if (__builtin_expect(atomic_load_explicit(&c->bad_ticks, memory_order_relaxed), 0) && (ev->ts_ns & REC_TS_TICKS))
    return push_own_tick(c, ev, max_wait_ns);
  if (!atomic_load_explicit(&c->failed, memory_order_relaxed) &&
      !atomic_load_explicit(&c->done, memory_order_relaxed) && rec_ring_push_inline(&c->ring, ev) == 0)
    return 0;
  return rec_core_push_batch(c, ev, 1, max_wait_ns) ? -1 : 0; /* full: wait there */
}

void rec_core_add_dropped(rec_core_t *c, uint64_t n) { atomic_fetch_add(&c->src_drops, n); }

void rec_core_gpu_ready(rec_core_t *c) { atomic_store(&c->gpu_ready, 1); }

void rec_core_fail(rec_core_t *c, const char *msg) {
  if (atomic_load(&c->fail_req)) return;
  snprintf(c->fail_msg, sizeof c->fail_msg, "%s", msg);
  atomic_store(&c->fail_req, 1);
}

gm_status_t rec_core_stop(rec_core_t *c) {
  if (!c || c->stopped_once) return GM_OK;
  c->stopped_once = 1;
  if (!atomic_load(&c->done) && !atomic_load(&c->failed) && c->hooks.final_flush)
    c->hooks.final_flush(c->hooks.ctx);
  int expected = STOP_NONE;
  atomic_compare_exchange_strong(&c->stop_req, &expected, STOP_NORMAL);
  pthread_mutex_lock(&c->mu);
  pthread_cond_signal(&c->cv);
  pthread_mutex_unlock(&c->mu);
  if (c->thread_started) {
    pthread_join(c->thread, NULL);
    c->thread_started = 0;
  }
  return atomic_load(&c->failed) ? GM_ERR_IO : GM_OK;
}

int rec_core_sync(rec_core_t *c, uint64_t timeout_ns) {
  if (!c || atomic_load(&c->done)) return 0;
  atomic_store(&c->sync_req, 1);
  pthread_mutex_lock(&c->mu);
  pthread_cond_signal(&c->cv);
  pthread_mutex_unlock(&c->mu);
  for (uint64_t waited = 0; waited < timeout_ns; waited += 1000000ull) {
    if (!atomic_load(&c->sync_req) || atomic_load(&c->done)) return !atomic_load(&c->sync_req);
    sleep_ns(1000000ull);
  }
  return 0;
}

int rec_core_stop_from_signal(rec_core_t *c, uint64_t timeout_ns) {
  /* only atomics and nanosleep here: this runs inside a signal handler */
  int expected = STOP_NONE;
  atomic_compare_exchange_strong(&c->stop_req, &expected, STOP_SIGNAL);
  for (uint64_t waited = 0; waited < timeout_ns; waited += 5000000ull) {
    if (atomic_load(&c->done)) return 1;
    struct timespec ts = {0, 5000000L};
    nanosleep(&ts, NULL);
  }
  return atomic_load(&c->done);
}

void rec_core_destroy(rec_core_t *c) {
  if (!c) return;
  rec_core_stop(c);
  rec_ring_fini(&c->ring);
  gmt_header_free(&c->cfg.header);
  pthread_mutex_destroy(&c->mu);
  pthread_cond_destroy(&c->cv);
  free(c->pend);
  free_live(c);
  free(c->cs_map);
  free(c->path);
  free(c->manifest);
  free(c);
}

void rec_core_stats(const rec_core_t *c, rec_core_stats_t *st) {
  rec_core_t *m = (rec_core_t *)c;
  st->pushed = rec_ring_pushed(&m->ring);
  st->written = atomic_load(&m->written);
  st->ring_drops = atomic_load(&m->ring_drops);
  st->src_drops = atomic_load(&m->src_drops);
  st->file_bytes = atomic_load(&m->file_bytes);
  st->failed = atomic_load(&m->failed);
  st->closed = atomic_load(&m->done) && !st->failed;
  st->bad_ticks = atomic_load(&m->bad_tick_events);
}

const char *rec_core_path(const rec_core_t *c) { return c->path; }
