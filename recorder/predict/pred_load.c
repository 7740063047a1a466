/* pred_load.c: a recording in memory for prediction, and the strings shared by all of them.
 *
 * Kept: the requests and what orders them (alloc, free_requested, free, marker, empty_cache).
 * Left out and counted: the allocator's own segments, VMM and pool records, which belong to
 * the allocator at the recorded value and are what a replay of the prediction recomputes.
 * Callsite and marker names become ids shared by all recordings, so equal strings compare
 * equal across files whatever their ids in each. Streams are numbered by first use: a side
 * stream's handle differs from one process to the next, its place in the program does not.
 * Workload: millions of events, a few thousand strings; events are copied in bulk from the
 * reader's zero-copy view. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "recorder/predict/pred_internal.h"

/* "TRACE.zst@VALUE": a recording and the value it ran at. */
gm_status_t pred_parse_input(const char *arg, char *buf, size_t n, pred_input_t *in, gm_err_t *err) {
  const char *at = strrchr(arg, '@');
  if (!at || at == arg)
    return gm_err_set(err, GM_ERR_INVAL, "'%s': give each recording with the value it ran at, TRACE.zst@VALUE (e.g. run8.zst@8)", arg);
  char *end = NULL;
  errno = 0;
  double v = strtod(at + 1, &end);
  if (!at[1] || *end || errno || !(v > 0) || !isfinite(v))
    return gm_err_set(err, GM_ERR_INVAL, "'%s': the value after '@' must be a positive number, not '%s'", arg, at + 1);
  if ((size_t)(at - arg) >= n) return gm_err_set(err, GM_ERR_INVAL, "'%s': path too long", arg);
  memcpy(buf, arg, (size_t)(at - arg));
  buf[at - arg] = 0;
  in->path = buf;
  in->value = v;
  return GM_OK;
}

/* ---- shared strings --------------------------------------------------------------------- */

typedef struct str_ent {
  uint32_t id;
  UT_hash_handle hh;
  char s[];
} str_ent_t;

struct pred_strings {
  str_ent_t *by_str;
  str_ent_t **by_id; /* [id] */
  uint32_t n, cap;
};

pred_strings_t *pred_strings_new(void) { return calloc(1, sizeof(pred_strings_t)); }

void pred_strings_free(pred_strings_t *t) {
  if (!t) return;
  HASH_CLEAR(hh, t->by_str);
  for (uint32_t i = 1; i <= t->n; i++) free(t->by_id[i]);
  free(t->by_id);
  free(t);
}

uint32_t pred_strings_id(pred_strings_t *t, const char *s) {
  str_ent_t *e;
  size_t len = strlen(s);
  HASH_FIND(hh, t->by_str, s, len, e);
  if (e) return e->id;
  if (t->n + 2 > t->cap) {
    uint32_t nc = t->cap ? 2 * t->cap : 256;
    str_ent_t **nb = realloc(t->by_id, nc * sizeof *nb);
    if (!nb) return 0;
    t->by_id = nb;
    t->cap = nc;
  }
  e = malloc(sizeof *e + len + 1);
  if (!e) return 0;
  memcpy(e->s, s, len + 1);
  e->id = ++t->n;
  t->by_id[e->id] = e;
  HASH_ADD_KEYPTR(hh, t->by_str, e->s, len, e);
  return e->id;
}

const char *pred_strings_get(const pred_strings_t *t, uint32_t id) {
  return id >= 1 && id <= t->n ? t->by_id[id]->s : NULL;
}

uint32_t pred_strings_count(const pred_strings_t *t) { return t->n; }

/* ---- a recording ------------------------------------------------------------------------ */

static uint64_t gcd64(uint64_t a, uint64_t b) {
  while (b) {
    uint64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* The events a prediction works on: the requests and markers. Another library's memory beside
 * them (GMT_F_EXTERNAL, a torch-history trace) is not the job's allocator's: left out. */
static int kept(unsigned kind, unsigned flags) {
  if (flags & GMT_F_EXTERNAL) return 0;
  return kind == GMT_EV_ALLOC || kind == GMT_EV_FREE || kind == GMT_EV_FREE_REQUESTED || kind == GMT_EV_MARKER ||
         kind == GMT_EV_EMPTY_CACHE;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 0;
  size_t nc = *cap ? *cap : 1024;
  while (nc < need) nc *= 2;
  void *np = realloc(*p, nc * elem);
  if (!np) return -1;
  *p = np;
  *cap = nc;
  return 0;
}

/* The token of one allocation: every field that must be equal for two allocations of two
 * runs to be the same allocation, packed without hashing so that no two differ alike. */
static uint64_t token_of(pred_rec_t *r, const gmt_event_t *e) {
  size_t s = 0;
  while (s < r->n_streams && r->streams[s] != e->stream) s++;
  if (s == r->n_streams && r->n_streams < PRED_MAX_STREAMS) r->streams[r->n_streams++] = e->stream;
  return ((uint64_t)(e->device & 0xff) << 56) | ((uint64_t)(s & 0xff) << 48) | ((uint64_t)(e->mem_kind & 0xff) << 40) |
         (uint64_t)e->callsite;
}

/* Index allocations and markers of r->ev (callsites already shared ids). */
static gm_status_t index_events(pred_rec_t *r, gm_err_t *err) {
  size_t na = 0, nm = 0;
  for (size_t i = 0; i < r->n_ev; i++) {
    na += r->ev[i].kind == GMT_EV_ALLOC;
    nm += r->ev[i].kind == GMT_EV_MARKER;
  }
  r->alloc_ev = malloc((na ? na : 1) * sizeof *r->alloc_ev);
  r->tok = malloc((na ? na : 1) * sizeof *r->tok);
  r->mark_alloc = malloc((nm ? nm : 1) * sizeof *r->mark_alloc);
  r->mark_name = malloc((nm ? nm : 1) * sizeof *r->mark_name);
  if (!r->alloc_ev || !r->tok || !r->mark_alloc || !r->mark_name)
    return gm_err_set(err, GM_ERR_NOMEM, "out of memory indexing %zu allocations", na);
  uint64_t g = 0;
  for (size_t i = 0; i < r->n_ev; i++) {
    const gmt_event_t *e = &r->ev[i];
    if (e->kind == GMT_EV_MARKER) {
      r->mark_alloc[r->n_mark] = r->n_alloc;
      r->mark_name[r->n_mark++] = e->callsite;
    } else if (e->kind == GMT_EV_ALLOC) {
      r->alloc_ev[r->n_alloc] = i;
      r->tok[r->n_alloc++] = token_of(r, e);
      if (e->callsite) r->with_callsite++;
      if (g != 1) g = gcd64(g, e->size);
    }
  }
  r->all_sizes_gcd = g;
  return GM_OK;
}

gm_status_t pred_rec_from_events(pred_rec_t *r, const gmt_event_t *ev, size_t n, double value, gm_err_t *err) {
  memset(r, 0, sizeof *r);
  gmt_header_init(&r->header);
  r->value = value;
  r->ev = malloc((n ? n : 1) * sizeof *r->ev);
  if (!r->ev) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  for (size_t i = 0; i < n; i++) {
    if (ev[i].kind == GMT_EV_ALLOC_FAILED) r->failed++;
    if (kept(ev[i].kind, ev[i].flags)) r->ev[r->n_ev++] = ev[i];
    else r->skipped++;
  }
  return index_events(r, err);
}

/* The kept events of one file, callsites as ids of strs (not yet indexed). */
static gm_status_t load_raw(pred_rec_t *r, const char *path, double value, pred_strings_t *strs, gm_err_t *err) {
  memset(r, 0, sizeof *r);
  gmt_header_init(&r->header);
  r->value = value;
  r->path = path;
  gmt_reader_t *rd;
  gm_status_t s = gmt_reader_open(&rd, path, err);
  if (s < 0) return s;
  s = gmt_header_copy(&r->header, gmt_reader_header(rd), err);
  uint32_t *remap = NULL; /* file's string id -> shared id (0: not yet looked up) */
  size_t remap_cap = 0, ev_cap = 0;
  while (s == GM_OK) {
    const gmt_event_t *v;
    size_t n;
    s = gmt_reader_next_view(rd, &v, &n, err);
    if (s != GM_OK) break;
    if (grow((void **)&r->ev, &ev_cap, r->n_ev + n, sizeof *r->ev) < 0) {
      s = gm_err_set(err, GM_ERR_NOMEM, "out of memory after %zu events", r->n_ev);
      break;
    }
    for (size_t i = 0; i < n; i++) {
      const gmt_event_t *e = &v[i];
      if (e->kind == GMT_EV_ALLOC_FAILED) r->failed++;
      if (!kept(e->kind, e->flags)) {
        r->skipped++;
        continue;
      }
      gmt_event_t *o = &r->ev[r->n_ev++];
      *o = *e;
      if (e->callsite == GMT_NO_STRING) continue;
      if (e->callsite >= remap_cap) {
        size_t old = remap_cap;
        if (grow((void **)&remap, &remap_cap, (size_t)e->callsite + 1, sizeof *remap) < 0) {
          s = gm_err_set(err, GM_ERR_NOMEM, "out of memory for strings");
          break;
        }
        memset(remap + old, 0, (remap_cap - old) * sizeof *remap);
      }
      if (!remap[e->callsite]) {
        const char *str = gmt_reader_string(rd, e->callsite);
        remap[e->callsite] = str ? pred_strings_id(strs, str) : 0;
        if (str && !remap[e->callsite]) {
          s = gm_err_set(err, GM_ERR_NOMEM, "out of memory for strings");
          break;
        }
      }
      o->callsite = remap[e->callsite];
    }
  }
  free(remap);
  if (s == GM_END) {
    const gmt_reader_stats_t *st = gmt_reader_stats(rd);
    if (st->truncated || st->seq_gaps || st->dropped) {
      char what[128] = "";
      if (st->truncated) strcat(what, ", truncated");
      if (st->seq_gaps) strcat(what, ", chunks missing");
      if (st->dropped) strcat(what, ", records dropped by the recorder");
      s = gm_err_set(err, GM_ERR_TRUNCATED,
                     "the recording is incomplete (%s): a prediction needs every allocation of the run; record it again",
                     what + 2);
    } else s = GM_OK;
  }
  gmt_reader_close(rd);
  return s;
}

gm_status_t pred_rec_load(pred_rec_t *r, const char *path, double value, pred_strings_t *strs, gm_err_t *err) {
  gm_status_t s = load_raw(r, path, value, strs, err);
  if (s == GM_OK) s = index_events(r, err);
  return s;
}

/* ---- every recording at once: one thread each (decoding is most of the time) ------------ */

typedef struct load_job {
  pred_rec_t *r;
  const pred_input_t *in;
  pred_strings_t *strs; /* the thread's own; remapped to the shared ones after the join */
  gm_status_t st;
  gm_err_t err;
} load_job_t;

static void *load_worker(void *arg) {
  load_job_t *j = arg;
  j->st = load_raw(j->r, j->in->path, j->in->value, j->strs, &j->err);
  return NULL;
}

gm_status_t pred_load_all(pred_rec_t *rec, const pred_input_t *in, size_t n, pred_strings_t *strs, gm_err_t *err) {
  load_job_t job[PRED_MAX_INPUTS];
  pthread_t tid[PRED_MAX_INPUTS];
  int started[PRED_MAX_INPUTS] = {0};
  gm_status_t s = GM_OK;
  memset(job, 0, sizeof job);
  for (size_t j = 0; j < n; j++) {
    memset(&rec[j], 0, sizeof rec[j]);
    gmt_header_init(&rec[j].header);
    job[j].r = &rec[j];
    job[j].in = &in[j];
    job[j].strs = pred_strings_new();
    if (!job[j].strs) {
      s = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
      break;
    }
  }
  for (size_t j = 0; j < n && s == GM_OK; j++)
    started[j] = pthread_create(&tid[j], NULL, load_worker, &job[j]) == 0;
  for (size_t j = 0; j < n && s == GM_OK; j++) {
    if (started[j]) pthread_join(tid[j], NULL);
    else load_worker(&job[j]);
  }
  /* the first failure in input order, as a sequential load would report it */
  for (size_t j = 0; j < n && s == GM_OK; j++)
    if (job[j].st < 0) {
      *err = job[j].err;
      s = gm_err_wrap(err, "cannot read '%s'", in[j].path);
    }
  for (size_t j = 0; j < n && s == GM_OK; j++) {
    uint32_t ns = pred_strings_count(job[j].strs);
    uint32_t *map = calloc((size_t)ns + 1, sizeof *map);
    if (!map) {
      s = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
      break;
    }
    for (uint32_t i = 1; i <= ns && s == GM_OK; i++)
      if (!(map[i] = pred_strings_id(strs, pred_strings_get(job[j].strs, i))))
        s = gm_err_set(err, GM_ERR_NOMEM, "out of memory for strings");
    for (size_t e = 0; e < rec[j].n_ev && s == GM_OK; e++)
      if (rec[j].ev[e].callsite != GMT_NO_STRING && rec[j].ev[e].callsite <= ns)
        rec[j].ev[e].callsite = map[rec[j].ev[e].callsite];
    free(map);
    if (s == GM_OK) s = index_events(&rec[j], err);
  }
  for (size_t j = 0; j < n; j++) pred_strings_free(job[j].strs);
  return s;
}

void pred_rec_free(pred_rec_t *r) {
  if (!r) return;
  gmt_header_free(&r->header);
  free(r->ev);
  free(r->alloc_ev);
  free(r->tok);
  free(r->mark_alloc);
  free(r->mark_name);
  memset(r, 0, sizeof *r);
}
