/* gpureplay_tune_period.c: the steady state of a training trace, and a reduced trace that
 * stands for it (what `gpureplay --tune` searches on when the trace is long).
 *
 * Model: training repeats itself step after step. At a step boundary the live set (the
 * allocations not yet freed) returns to the same multiset: the weights, the optimizer state.
 * Two points of the trace with the same live set are interchangeable cut points: the events
 * between them take that set back to itself, so any run of such segments, one after another,
 * is a consistent trace (every free names an allocation live at that point).
 *
 * The scan, one pass over the events (an array, or the file streamed: a 10^8-event trace does
 * not fit in memory):
 *  - the live set as a hash (the sum of a mix of (address, size, stream) over live
 *    allocations, VMM maps and freed-but-pending blocks), after every event;
 *  - learning, over the first kLearn events: the live-set value seen most often after a free
 *    (ties: the fewest live bytes, the earliest) is the boundary state;
 *  - then every event: where the live set equals the boundary state a step ends. Each step's
 *    kind is a hash of its (kind, size, stream) tokens: the distinct kinds are the phases;
 *  - kept: the warm-up (everything before the first boundary), the first kFirstSteps steps,
 *    every step whose (previous kind, kind) pair has been kept fewer than kPairs times (with
 *    its predecessor, so the pair stays a pair), and the tail after the last boundary.
 * The reduced trace is only what the search ranks candidates on: every figure the tuner
 * reports comes from a replay of the whole trace (gpureplay_tune_reduce.c). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#include "replay/tool/tune/gpureplay_tune.h"

static const uint64_t kLearn = 4000000;     /* events learned from */
static const int kLearnStates = 1 << 20;    /* live-set values remembered while learning */
static const uint64_t kMinSteps = 6;        /* fewer boundaries: no period */
static const uint64_t kFirstSteps = 3;      /* steps kept after the warm-up, whatever their kind */
static const int kPairs = 2;                /* times each (previous kind, kind) pair is kept */
static const uint64_t kMaxStep = 16000000;  /* events of one step at most (else: no period) */

static uint64_t mix(uint64_t x) { /* splitmix64's finalizer */
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static uint64_t token(const gmt_event_t *e, uint64_t salt) {
  return mix(e->addr ^ mix(e->size + salt) ^ mix(e->stream * 0x9E3779B97F4A7C15ull + e->device));
}

/* The live set's hash and bytes after e. */
static void live_step(const gmt_event_t *e, uint64_t *h, uint64_t *bytes) {
  switch (e->kind) {
    case GMT_EV_ALLOC: *h += token(e, 1); *bytes += e->size; break;
    case GMT_EV_FREE: *h -= token(e, 1); *bytes -= e->size; break;
    case GMT_EV_VMM_MAP: *h += token(e, 2); break;
    case GMT_EV_VMM_UNMAP: *h -= token(e, 2); break;
    default: break;
  }
}

/* A live-set value seen after a free while learning: a slot of an open-addressed table
 * (count 0: empty), twice as many slots as values remembered, so a lookup is about one cache
 * line (the values are mostly new: a chained table's misses were a tenth of the tuner's time). */
typedef struct state {
  uint64_t h;
  uint64_t count, bytes, first;
} state_t;

typedef struct kind {
  uint64_t h;     /* a step's kind, or a (previous kind, kind) pair */
  uint64_t count; /* steps of this kind; pairs: times kept */
  uint64_t len;   /* events of a step of this kind */
  UT_hash_handle hh;
} kind_t;

/* A growable run of events. */
typedef struct evbuf {
  gmt_event_t *e;
  size_t n, cap;
  uint64_t gap_ns; /* between its first event and the event before it in the trace */
} evbuf_t;

static int buf_push(evbuf_t *b, const gmt_event_t *e, size_t n) {
  if (b->n + n > b->cap) {
    size_t nc = b->cap ? b->cap : 4096;
    while (nc < b->n + n) nc *= 2;
    gmt_event_t *g = realloc(b->e, nc * sizeof *g);
    if (!g) return -1;
    b->e = g;
    b->cap = nc;
  }
  memcpy(b->e + b->n, e, n * sizeof *e);
  b->n += n;
  return 0;
}

struct gr_period_scan {
  gr_period_t *p;
  /* learning */
  state_t *states; /* 2 * kLearnStates slots */
  int n_states;
  uint64_t boundary; /* the boundary state, once learned */
  int learned;
  /* segmenting */
  uint64_t h, bytes, idx, prev_ts;
  int in_warmup;
  evbuf_t cur, prev;      /* the step being read; the one before it, if it was not kept */
  int prev_held;          /* prev holds a dropped step (kept if the next one needs it as a pair) */
  uint64_t cur_kind, prev_kind, last_kept_kind;
  kind_t *kinds, *pairs;
  uint64_t *lens;         /* step lengths (the period is their mode) */
  int failed;             /* out of memory or a step too long: no period */
  uint64_t out_last_ts;   /* the reduced trace's last timestamp */
  int devs_seen[GR_MAX_DEVICES], n_devs;
};


static gr_period_scan_t *scan_new(gr_period_t *p) {
  gr_period_scan_t *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  memset(p, 0, sizeof *p);
  s->p = p;
  s->states = calloc(2 * (size_t)kLearnStates, sizeof *s->states);
  if (!s->states) {
    free(s);
    return NULL;
  }
  s->in_warmup = 1;
  return s;
}

static void note_device(gr_period_scan_t *s, const gmt_event_t *e) {
  if (e->kind != GMT_EV_ALLOC && e->kind != GMT_EV_VMM_MAP && e->kind != GMT_EV_ALLOC_FAILED) return;
  for (int i = 0; i < s->n_devs; i++)
    if (s->devs_seen[i] == e->device) return;
  if (s->n_devs < GR_MAX_DEVICES) s->devs_seen[s->n_devs++] = e->device;
  s->p->devices++;
}

/* Learning: the live-set value after each free, counted. */
static void learn(gr_period_scan_t *s, const gmt_event_t *evs, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const gmt_event_t *e = &evs[i];
    live_step(e, &s->h, &s->bytes);
    if (e->kind != GMT_EV_FREE) continue;
    size_t mask = 2 * (size_t)kLearnStates - 1, k = (size_t)mix(s->h) & mask;
    while (s->states[k].count && s->states[k].h != s->h) k = (k + 1) & mask;
    state_t *st = &s->states[k];
    if (st->count) {
      st->count++;
    } else if (s->n_states < kLearnStates) {
      s->n_states++;
      st->h = s->h;
      st->count = 1;
      st->bytes = s->bytes;
      st->first = s->idx + i;
    }
  }
  s->idx += n;
}

/* The boundary state from what was learned; the segmenting pass starts from the beginning. */
static void learned(gr_period_scan_t *s) {
  state_t *best = NULL;
  for (size_t i = 0; i < 2 * (size_t)kLearnStates; i++) {
    state_t *st = &s->states[i];
    if (st->count && (!best || st->count > best->count || (st->count == best->count && st->bytes < best->bytes) ||
                      (st->count == best->count && st->bytes == best->bytes && st->first < best->first)))
      best = st;
  }
  s->learned = best && best->count >= kMinSteps;
  if (s->learned) s->boundary = best->h;
  free(s->states);
  s->states = NULL;
  s->h = s->bytes = s->idx = 0;
}

/* Appends a run of events to the reduced trace, its timestamps moved back over what was left
 * out before it (the gap before its first event kept). */
static int emit(gr_period_scan_t *s, const evbuf_t *b, int contiguous) {
  gr_period_t *p = s->p;
  if (b->n == 0) return 0;
  if (p->n_evs + b->n > p->cap) {
    size_t nc = p->cap ? p->cap : 65536;
    while (nc < p->n_evs + b->n) nc *= 2;
    gmt_event_t *g = realloc(p->evs, nc * sizeof *g);
    if (!g) return -1;
    p->evs = g;
    p->cap = nc;
  }
  uint64_t base = b->e[0].ts_ns;
  uint64_t start = p->n_evs == 0 ? base : contiguous ? s->out_last_ts + b->gap_ns : s->out_last_ts + b->gap_ns;
  for (size_t i = 0; i < b->n; i++) {
    gmt_event_t *o = &p->evs[p->n_evs++];
    *o = b->e[i];
    o->ts_ns = start + (b->e[i].ts_ns - base);
  }
  s->out_last_ts = p->evs[p->n_evs - 1].ts_ns;
  return 0;
}

static kind_t *kind_get(kind_t **tab, uint64_t h) {
  kind_t *k = NULL;
  HASH_FIND(hh, *tab, &h, sizeof h, k);
  if (!k && (k = calloc(1, sizeof *k))) {
    k->h = h;
    HASH_ADD(hh, *tab, h, sizeof k->h, k);
  }
  return k;
}

static uint64_t pair_of(uint64_t a, uint64_t b) { return mix(a * 31 + mix(b)); }

/* A step ended (s->cur): kept or dropped. */
static void step_end(gr_period_scan_t *s) {
  gr_period_t *p = s->p;
  uint64_t kh = s->cur_kind;
  kind_t *k = kind_get(&s->kinds, kh);
  if (!k) {
    s->failed = 1;
    return;
  }
  if (k->count++ == 0) {
    k->len = s->cur.n;
    p->phases++;
  }
  uint64_t step = p->steps++;
  int keep = step < kFirstSteps;
  kind_t *pr = step > 0 ? kind_get(&s->pairs, pair_of(s->prev_kind, kh)) : NULL;
  if (step > 0 && !pr) {
    s->failed = 1;
    return;
  }
  if (!keep && pr->count < (uint64_t)kPairs) keep = 1;
  int ok = 0;
  if (keep) {
    if (s->prev_held) { /* its predecessor too, so that the pair is a pair */
      kind_t *pp = kind_get(&s->pairs, pair_of(s->last_kept_kind, s->prev_kind));
      if (pp) pp->count++;
      ok |= emit(s, &s->prev, 0);
      p->kept_steps++;
    }
    if (pr) pr->count++;
    ok |= emit(s, &s->cur, 1);
    p->kept_steps++;
    s->last_kept_kind = kh;
    s->prev_held = 0;
    s->cur.n = 0;
  } else { /* held as the next step's possible predecessor */
    evbuf_t t = s->prev;
    s->prev = s->cur;
    s->cur = t;
    s->cur.n = 0;
    s->prev_held = 1;
  }
  if (ok) s->failed = 1;
  s->prev_kind = kh;
}

/* Segmenting: every event, from the start. */
static void feed(gr_period_scan_t *s, const gmt_event_t *evs, size_t n) {
  gr_period_t *p = s->p;
  for (size_t i = 0; i < n && !s->failed; i++) {
    const gmt_event_t *e = &evs[i];
    if (p->events == 0) p->first_ts = e->ts_ns;
    p->last_ts = e->ts_ns;
    p->events++;
    note_device(s, e);
    if (e->kind == GMT_EV_ALLOC_FAILED) p->failures++;
    if (!s->learned) continue; /* no boundary state: the trace's extent only */
    if (s->cur.n == 0) s->cur.gap_ns = p->events > 1 ? e->ts_ns - s->prev_ts : 0;
    s->prev_ts = e->ts_ns;
    if (buf_push(&s->cur, e, 1) != 0) {
      s->failed = 1;
      break;
    }
    /* what the replay acts on: a marker's value (the step number) is not */
    uint64_t sz = e->kind == GMT_EV_MARKER ? e->callsite : e->size;
    s->cur_kind = mix(s->cur_kind ^ ((uint64_t)e->kind << 56 | e->stream << 40) ^ sz);
    live_step(e, &s->h, &s->bytes);
    if (e->kind == GMT_EV_FREE && s->h == s->boundary) { /* a free brings the live set back */
      if (s->in_warmup) {
        p->warmup = p->events;
        s->in_warmup = 0;
        if (emit(s, &s->cur, 1) != 0) s->failed = 1;
        s->cur.n = 0;
      } else {
        uint64_t *g = p->steps % 1024 ? s->lens : realloc(s->lens, (p->steps + 1024) * sizeof *g);
        if (!g) {
          s->failed = 1;
          break;
        }
        s->lens = g;
        s->lens[p->steps] = s->cur.n;
        step_end(s);
      }
      s->cur_kind = 0;
    } else if (s->cur.n > kMaxStep) {
      s->failed = 1;
      snprintf(p->why, sizeof p->why, "a stretch of more than %" PRIu64 " events without the boundary state",
               kMaxStep);
    }
  }
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* The tail kept, the period and the verdict. */
static gm_status_t scan_end(gr_period_scan_t *s, gm_err_t *err) {
  gr_period_t *p = s->p;
  gm_status_t st = GM_OK;
  if (!s->failed && s->learned && !s->in_warmup) {
    /* the tail: a held step stays out, what follows the last boundary goes in */
    if (emit(s, &s->cur, 0) != 0) s->failed = 1;
  }
  if (p->steps > 0 && s->lens) { /* the period: the most common step length */
    qsort(s->lens, p->steps, sizeof *s->lens, cmp_u64);
    uint64_t best = 0, run = 0;
    for (uint64_t i = 0; i < p->steps; i++) {
      run = i > 0 && s->lens[i] == s->lens[i - 1] ? run + 1 : 1;
      if (run > best) {
        best = run;
        p->period = s->lens[i];
      }
    }
  }
  if (s->failed && !p->why[0]) snprintf(p->why, sizeof p->why, "out of host memory while reducing the trace");
  else if (!s->learned) snprintf(p->why, sizeof p->why, "no live set recurs in the first %" PRIu64 " events", kLearn);
  else if (p->steps < kMinSteps) snprintf(p->why, sizeof p->why, "only %" PRIu64 " step boundaries", p->steps);
  else if (p->failures) snprintf(p->why, sizeof p->why, "the recorded run failed requests (its failure is replayed whole)");
  else if (p->devices > 1) snprintf(p->why, sizeof p->why, "it allocates on %d devices", p->devices);
  else if (p->n_evs * 2 > p->events)
    snprintf(p->why, sizeof p->why, "%" PRIu64 " steps of %d kinds: the steps to keep are half the trace or more",
             p->steps, p->phases);
  p->found = !p->why[0];
  if (!p->found) {
    free(p->evs);
    p->evs = NULL;
    p->n_evs = p->cap = 0;
  }
  return st;
  (void)err;
}

static void scan_free(gr_period_scan_t *s) {
  if (!s) return;
  kind_t *k, *tmp;
  HASH_ITER(hh, s->kinds, k, tmp) {
    HASH_DEL(s->kinds, k);
    free(k);
  }
  HASH_ITER(hh, s->pairs, k, tmp) {
    HASH_DEL(s->pairs, k);
    free(k);
  }
  free(s->states);
  free(s->cur.e);
  free(s->prev.e);
  free(s->lens);
  free(s);
}

gm_status_t gr_period_scan_events(const gmt_event_t *evs, size_t n, gr_period_t *p, gm_err_t *err) {
  gr_period_scan_t *s = scan_new(p);
  if (!s) return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  learn(s, evs, n < kLearn ? n : (size_t)kLearn);
  learned(s);
  feed(s, evs, n);
  gm_status_t st = scan_end(s, err);
  scan_free(s);
  return st;
}

gm_status_t gr_period_scan_file(const char *path, unsigned flags, int progress, gr_period_t *p, gm_err_t *err) {
  gr_period_scan_t *s = scan_new(p);
  if (!s) return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  gmt_reader_t *r = NULL;
  gm_status_t st = gmt_reader_open_flags(&r, path, flags, err);
  if (st != GM_OK) {
    scan_free(s);
    return gm_err_wrap(err, "cannot open '%s'", path);
  }
  uint64_t total = 0, ts;
  for (uint64_t i = 0, nc = gmt_reader_chunk_count(r); i < nc; i++) {
    uint64_t k = 0;
    if (gmt_reader_chunk_info(r, i, &ts, &k, NULL) == GM_OK) total += k;
  }
  /* the first kLearn events are kept: learned from, then segmented with the rest */
  evbuf_t head = {0};
  const gmt_event_t *evs = NULL;
  size_t n = 0;
  int learning = 1;
  uint64_t seen = 0, batches = 0;
  /* the addresses the whole trace's replays will number, counted (rp_addr_numbering) */
  rp_addr_numbering_t *nb = NULL;
  gm_err_t nerr;
  if (rp_addr_numbering_new(GR_STREAM_ADDRS, &nb, &nerr) != GM_OK) nb = NULL;
  while (st == GM_OK && !s->failed) {
    st = gmt_reader_next_view(r, &evs, &n, err);
    if (st != GM_OK || n == 0) break;
    seen += n;
    if (nb && rp_addr_numbering_next(nb, evs, n, NULL, &nerr) != GM_OK) {
      rp_addr_numbering_free(nb);
      nb = NULL;
    }
    if (progress && total && ++batches % 256 == 0)
      fprintf(stderr, "\rgpureplay: %s: looking for the training step: %.0f%%   ", path, 100.0 * (double)seen / (double)total);
    if (learning) {
      if (buf_push(&head, evs, n) != 0) {
        st = gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
        break;
      }
      if (head.n < kLearn) continue;
      learning = 0;
      learn(s, head.e, head.n);
      learned(s);
      feed(s, head.e, head.n);
      free(head.e);
      head.e = NULL;
      continue;
    }
    feed(s, evs, n);
  }
  if (st == GM_END && nb) p->addrs = rp_addr_numbering_count(nb); /* read to its end */
  rp_addr_numbering_free(nb);
  if (st == GM_END) st = GM_OK;
  if (st == GM_OK && learning) { /* the whole trace fit in the learning window */
    learn(s, head.e, head.n);
    learned(s);
    feed(s, head.e, head.n);
  }
  free(head.e);
  gmt_reader_close(r);
  if (progress) fprintf(stderr, "\r%*s\r", 78, "");
  if (st == GM_OK) st = scan_end(s, err);
  scan_free(s);
  if (st != GM_OK) gr_period_free(p);
  return st;
}

void gr_period_free(gr_period_t *p) {
  free(p->evs);
  p->evs = NULL;
  p->n_evs = p->cap = 0;
}
