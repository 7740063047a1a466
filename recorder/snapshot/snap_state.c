/* snap_state.c: plans a snapshot's events: shape checks, per-device conversion, the merge of
 * devices and annotations by time (each list's own order kept exactly), and the synthetic
 * initial state.
 *
 * Initial state. A history that starts late (recording enabled after the first allocations, or
 * older entries dropped by max_entries) mentions memory that existed before its first entry:
 * a free whose alloc is missing, a segment_free whose segment_alloc is missing, or a segment or
 * live block in the final `segments` list that no entry mentions. Each such segment becomes a
 * SEGMENT_ALLOC, each such block an ALLOC (and FREE_REQUESTED when it was already awaiting its
 * free), all at ts 0 with GMT_F_SYNTHETIC, segments first. For expandable segments the mapped
 * bytes are known but not which pages: the missing bytes become one VMM_MAP at the segment's
 * start (a documented approximation). A history recorded from the start yields none. */
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "recorder/snapshot/snap_internal.h"

typedef struct seen {
  uint64_t key; /* addr | device << 48 */
  UT_hash_handle hh;
} seen_t;

typedef snap_evvec_t evvec_t;

/* Room for exactly n more events (the lists whose length the pickle says up front). */
static int vec_reserve(evvec_t *a, size_t n) {
  if (a->cap - a->n >= n) return 0;
  snap_event_t *nv = realloc(a->v, (a->n + n) * sizeof(*nv));
  if (!nv) return -1;
  a->v = nv;
  a->cap = a->n + n;
  return 0;
}

static int vec_push(evvec_t *a, const snap_event_t *e) {
  if (a->n == a->cap) {
    size_t nc = a->cap ? a->cap * 2 : 256;
    snap_event_t *nv = realloc(a->v, nc * sizeof(*nv));
    if (!nv) return -1;
    a->v = nv;
    a->cap = nc;
  }
  a->v[a->n++] = *e;
  return 0;
}

static void vec_free(evvec_t *a) {
  free(a->v);
  memset(a, 0, sizeof(*a));
}

/* Returns 1 if key was already in the set, 0 if newly added, -1 on no memory. */
static int seen_add(seen_t **set, uint16_t dev, uint64_t addr) {
  uint64_t key = addr | ((uint64_t)dev << 48);
  seen_t *s;
  HASH_FIND(hh, *set, &key, sizeof(key), s);
  if (s) return 1;
  s = malloc(sizeof(*s));
  if (!s) return -1;
  s->key = key;
  HASH_ADD(hh, *set, key, sizeof(key), s);
  return 0;
}

static int seen_has(seen_t *set, uint16_t dev, uint64_t addr) {
  uint64_t key = addr | ((uint64_t)dev << 48);
  seen_t *s;
  HASH_FIND(hh, set, &key, sizeof(key), s);
  return s != NULL;
}

static void seen_free(seen_t **set) {
  seen_t *s, *t;
  HASH_ITER(hh, *set, s, t) {
    HASH_DEL(*set, s);
    free(s);
  }
}

static snap_event_t synth(int kind, uint16_t dev, uint64_t addr, uint64_t size, uint64_t stream) {
  snap_event_t e;
  memset(&e, 0, sizeof(e));
  e.ev.kind = (uint8_t)kind;
  e.ev.device = dev;
  e.ev.addr = addr;
  e.ev.size = size;
  e.ev.stream = stream;
  e.ev.mem_kind = GMT_MEM_DEVICE;
  e.ev.flags = GMT_F_SYNTHETIC;
  return e;
}

static int cmp_synth(const void *a, const void *b) {
  const snap_event_t *x = a, *y = b;
  /* segments and maps, then allocs, then free requests; by device and address within */
  int rx = x->ev.kind == GMT_EV_ALLOC ? 1 : x->ev.kind == GMT_EV_FREE_REQUESTED ? 2 : 0;
  int ry = y->ev.kind == GMT_EV_ALLOC ? 1 : y->ev.kind == GMT_EV_FREE_REQUESTED ? 2 : 0;
  if (rx != ry) return rx - ry;
  if (x->ev.device != y->ev.device) return x->ev.device < y->ev.device ? -1 : 1;
  if (x->ev.addr != y->ev.addr) return x->ev.addr < y->ev.addr ? -1 : 1;
  return 0;
}

/* The synthetic initial state from the device lists and the final segments. */
static gm_status_t initial_state(const pkr_val_t *root, evvec_t *lists, size_t ndev,
                                 evvec_t *out, gm_err_t *err) {
  seen_t *blocks = NULL, *segs = NULL;
  int64_t *net = calloc(ndev ? ndev : 1, sizeof(*net)), *minnet = calloc(ndev ? ndev : 1, sizeof(*minnet));
  uint64_t *minaddr = calloc(ndev ? ndev : 1, sizeof(*minaddr));
  gm_status_t st = GM_OK;
  if (!net || !minnet || !minaddr) st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  for (size_t d = 0; d < ndev && st == GM_OK; d++) {
    for (size_t k = 0; k < lists[d].n && st == GM_OK; k++) {
      gmt_event_t *e = &lists[d].v[k].ev;
      int r = 0;
      snap_event_t s;
      switch (e->kind) {
        case GMT_EV_ALLOC: r = seen_add(&blocks, e->device, e->addr); break;
        case GMT_EV_FREE_REQUESTED:
        case GMT_EV_FREE:
          r = seen_add(&blocks, e->device, e->addr);
          if (r == 0) {
            s = synth(GMT_EV_ALLOC, e->device, e->addr, e->size, e->stream);
            if (vec_push(out, &s)) r = -1;
            if (e->kind == GMT_EV_FREE) {
              s.ev.kind = GMT_EV_FREE_REQUESTED;
              if (vec_push(out, &s)) r = -1;
            }
          }
          break;
        case GMT_EV_SEGMENT_ALLOC: r = seen_add(&segs, e->device, e->addr); break;
        case GMT_EV_SEGMENT_FREE:
          r = seen_add(&segs, e->device, e->addr);
          if (r == 0) {
            s = synth(GMT_EV_SEGMENT_ALLOC, e->device, e->addr, e->size, e->stream);
            if (vec_push(out, &s)) r = -1;
          }
          break;
        case GMT_EV_VMM_MAP:
        case GMT_EV_VMM_UNMAP:
          net[d] += e->kind == GMT_EV_VMM_MAP ? (int64_t)e->size : -(int64_t)e->size;
          if (net[d] < minnet[d]) {
            minnet[d] = net[d];
            minaddr[d] = e->addr;
          }
          break;
        default: break;
      }
      if (r < 0) st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
    }
  }
  /* Expandable bytes unmapped before ever being mapped in the window. */
  for (size_t d = 0; d < ndev && st == GM_OK; d++) {
    if (minnet[d] < 0) {
      snap_event_t s = synth(GMT_EV_VMM_MAP, (uint16_t)d, minaddr[d], (uint64_t)-minnet[d], 0);
      if (vec_push(out, &s)) st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
      net[d] -= minnet[d];
    }
  }
  /* Final segments the window never mentions, and live blocks it never allocated. */
  const pkr_val_t *segments = pkr_dict_get(root, "segments");
  for (size_t k = 0; st == GM_OK && segments && segments->type == PKR_LIST && k < segments->n; k++) {
    const pkr_val_t *sg = segments->items[k];
    uint64_t dev = 0, addr = 0, total = 0, stream = 0;
    int64_t exp = 0;
    if (!sg || sg->type != PKR_DICT) continue;
    if (sg->n / 2 > SNAP_MAX_RECORD_KEYS) {
      st = gm_err_set(err, GM_ERR_FORMAT, "segments[%zu]: a dict of %zu keys is not a segment (limit SNAP_MAX_RECORD_KEYS = %d)",
                      k, sg->n / 2, SNAP_MAX_RECORD_KEYS);
      break;
    }
    if (!pkr_claim(sg)) {
      st = gm_err_set(err, GM_ERR_FORMAT, "segments[%zu]: the same dict as an earlier record (a snapshot makes one per record)", k);
      break;
    }
    if ((st = snap_field_u64(sg, "device", 4095, &dev, err)) || (st = snap_field_u64(sg, "address", INT64_MAX, &addr, err)) ||
        (st = snap_field_u64(sg, "total_size", GMT_MAX_SIZE, &total, err)) ||
        (st = snap_field_u64(sg, "stream", INT64_MAX, &stream, err))) {
      gm_err_wrap(err, "segments[%zu]", k);
      break;
    }
    pkr_int(pkr_dict_get(sg, "is_expandable"), &exp);
    if (dev >= ndev || total == 0) continue;
    snap_event_t s;
    if (exp) {
      /* expandable: whatever the final mapping holds beyond the window's net maps */
      if (net[dev] >= (int64_t)total) {
        net[dev] -= (int64_t)total;
      } else {
        s = synth(GMT_EV_VMM_MAP, (uint16_t)dev, addr, total - (uint64_t)net[dev], stream);
        net[dev] = 0;
        if (vec_push(out, &s)) st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
      }
    } else if (!seen_has(segs, (uint16_t)dev, (uint64_t)addr)) {
      s = synth(GMT_EV_SEGMENT_ALLOC, (uint16_t)dev, addr, total, stream);
      if (vec_push(out, &s)) st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
    }
    const pkr_val_t *bl = pkr_dict_get(sg, "blocks");
    for (size_t b = 0; st == GM_OK && bl && bl->type == PKR_LIST && b < bl->n; b++) {
      const pkr_val_t *blk = bl->items[b];
      if (!blk || blk->type != PKR_DICT || blk->n / 2 > SNAP_MAX_RECORD_KEYS || !pkr_claim(blk)) {
        st = gm_err_set(err, GM_ERR_FORMAT, "segments[%zu].blocks[%zu]: not a block (a dict of at most %d keys, one per block)",
                        k, b, SNAP_MAX_RECORD_KEYS);
        break;
      }
      const pkr_val_t *state = pkr_dict_get(blk, "state");
      int live = pkr_str_eq(state, "active_allocated");
      /* torch 2.11 says active_pending_free (a free requested, waiting on record_stream events) */
      int awaiting = pkr_str_eq(state, "active_pending_free") || pkr_str_eq(state, "active_awaiting_free");
      uint64_t baddr = 0, req = 0;
      if (!live && !awaiting) continue;
      const char *rk = pkr_dict_get(blk, "requested_size") ? "requested_size" : "size";
      if ((st = snap_field_u64(blk, "address", INT64_MAX, &baddr, err)) ||
          (st = snap_field_u64(blk, rk, GMT_MAX_SIZE, &req, err))) {
        gm_err_wrap(err, "segments[%zu].blocks[%zu]", k, b);
        break;
      }
      if (seen_has(blocks, (uint16_t)dev, baddr)) continue;
      s = synth(GMT_EV_ALLOC, (uint16_t)dev, baddr, req, stream);
      if (vec_push(out, &s)) st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
      if (awaiting && st == GM_OK) {
        s.ev.kind = GMT_EV_FREE_REQUESTED;
        if (vec_push(out, &s)) st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
      }
    }
  }
  if (st == GM_OK && out->n) qsort(out->v, out->n, sizeof(*out->v), cmp_synth);
  seen_free(&blocks);
  seen_free(&segs);
  free(net);
  free(minnet);
  free(minaddr);
  return st;
}

/* external_annotations [{stage, name, device, time_us}] -> MARKER "START name" on its device. */
static gm_status_t annotations(const pkr_val_t *root, size_t ndev, evvec_t *out, gm_err_t *err) {
  const pkr_val_t *an = pkr_dict_get(root, "external_annotations");
  if (an && an->type == PKR_LIST && vec_reserve(out, an->n)) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  for (size_t k = 0; an && an->type == PKR_LIST && k < an->n; k++) {
    const pkr_val_t *a = an->items[k];
    if (a && a->type == PKR_DICT && a->n / 2 > SNAP_MAX_RECORD_KEYS)
      return gm_err_set(err, GM_ERR_FORMAT, "external_annotations[%zu]: a dict of %zu keys is not an annotation (limit SNAP_MAX_RECORD_KEYS = %d)",
                        k, a->n / 2, SNAP_MAX_RECORD_KEYS);
    if (a && a->type == PKR_DICT && !pkr_claim(a))
      return gm_err_set(err, GM_ERR_FORMAT, "external_annotations[%zu]: the same dict as an earlier record (a snapshot makes one per record)", k);
    const pkr_val_t *stage = pkr_dict_get(a, "stage"), *name = pkr_dict_get(a, "name");
    int64_t dev = 0, t = 0;
    if (!name || name->type != PKR_STR || !pkr_int(pkr_dict_get(a, "time_us"), &t)) continue;
    pkr_int(pkr_dict_get(a, "device"), &dev);
    if (dev < 0 || (ndev && (size_t)dev >= ndev)) continue;
    snap_event_t e = synth(GMT_EV_MARKER, (uint16_t)dev, 0, 0, GMT_STREAM_NONE);
    e.ev.flags = 0;
    e.time_us = t;
    e.has_time = 1;
    e.marker = SNAP_MARK_ANNOTATION;
    e.frames = name;
    e.stage = stage && stage->type == PKR_STR ? stage : NULL;
    if (vec_push(out, &e)) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  }
  return GM_OK;
}

/* The merge's heap of list heads, ordered by (time, list). */
typedef struct merge_head {
  int64_t t;
  size_t list;
} merge_head_t;

static int head_less(const merge_head_t *a, const merge_head_t *b) {
  return a->t != b->t ? a->t < b->t : a->list < b->list;
}

static merge_head_t head_of(const evvec_t *l, size_t pos, size_t list, int64_t last) {
  const snap_event_t *e = &l->v[pos];
  merge_head_t h = {e->has_time ? e->time_us : last, list};
  return h;
}

static void heap_push(merge_head_t *h, size_t *n, merge_head_t v) {
  size_t i = (*n)++;
  while (i > 0 && head_less(&v, &h[(i - 1) / 2])) {
    h[i] = h[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h[i] = v;
}

static merge_head_t heap_pop(merge_head_t *h, size_t *n) {
  merge_head_t top = h[0], v = h[--*n];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= *n) break;
    if (c + 1 < *n && head_less(&h[c + 1], &h[c])) c++;
    if (!head_less(&h[c], &v)) break;
    h[i] = h[c];
    i = c;
  }
  if (*n) h[i] = v;
  return top;
}

/* The rest of a plan once the device lists hold their entries: annotations, the synthetic
 * initial state, the time origin and the merge by time (snap_plan and snap_plan_streamed). */
static gm_status_t plan_finish(const pkr_val_t *root, evvec_t *lists, size_t ndev, snap_pass_t *ps,
                               gm_status_t st, gm_err_t *err) {
  ps->devices = ndev;
  if (st == GM_OK) st = annotations(root, ndev, &lists[ndev], err);
  if (st == GM_OK) st = initial_state(root, lists, ndev, &lists[ndev + 1], err);
  /* Time origin: the earliest time of any list's first timed event. */
  int64_t t0 = 0;
  for (size_t l = 0; l <= ndev && st == GM_OK; l++) {
    for (size_t k = 0; k < lists[l].n; k++) {
      if (!lists[l].v[k].has_time) continue;
      if (!ps->has_time || lists[l].v[k].time_us < t0) t0 = lists[l].v[k].time_us;
      ps->has_time = 1;
      break;
    }
  }
  ps->start_time_ns = ps->has_time && t0 > 0 ? (uint64_t)t0 * 1000u : 0;
  size_t total = 0;
  for (size_t l = 0; l < ndev + 2; l++) total += lists[l].n;
  if (st == GM_OK && total) {
    ps->evs = malloc(total * sizeof(*ps->evs));
    if (!ps->evs) st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  }
  if (st == GM_OK) {
    /* synthetic state first, at ts 0 */
    evvec_t *sy = &lists[ndev + 1];
    for (size_t k = 0; k < sy->n; k++) ps->evs[ps->n++] = &sy->v[k];
    ps->synthetic = sy->n;
    /* k-way merge by time; untimed events keep their list's last time; ties: lower list first.
     * A heap of the lists' heads: up to 4097 lists, so a scan of all of them per event would
     * make a hostile many-device snapshot quadratic. */
    size_t *pos = calloc(ndev + 1, sizeof(*pos));
    int64_t *last = calloc(ndev + 1, sizeof(*last));
    merge_head_t *heap = calloc(ndev + 1, sizeof(*heap));
    size_t nh = 0;
    if (!pos || !last || !heap) st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
    for (size_t l = 0; l <= ndev && st == GM_OK; l++) {
      last[l] = t0;
      if (lists[l].n) heap_push(heap, &nh, head_of(&lists[l], 0, l, t0));
    }
    uint64_t prev_ts = 0;
    while (st == GM_OK && nh) {
      merge_head_t top = heap_pop(heap, &nh);
      size_t best = top.list;
      int64_t bt = top.t;
      snap_event_t *e = &lists[best].v[pos[best]++];
      last[best] = bt;
      uint64_t ts = bt > t0 ? (uint64_t)(bt - t0) * 1000u : 0;
      if (ts < prev_ts) ts = prev_ts; /* the trace's clock never runs backwards */
      prev_ts = ts;
      e->ev.ts_ns = ts;
      ps->evs[ps->n++] = e;
      if (pos[best] < lists[best].n) heap_push(heap, &nh, head_of(&lists[best], pos[best], best, bt));
    }
    free(pos);
    free(last);
    free(heap);
  }
  ps->lists = lists; /* the events stay there; ps->evs points at them */
  ps->nlists = ndev + 2;
  if (st != GM_OK) snap_plan_free(ps);
  return st;
}

gm_status_t snap_plan(const pkr_val_t *root, snap_pass_t *ps, gm_err_t *err) {
  memset(ps, 0, sizeof(*ps));
  if (!root || root->type != PKR_DICT)
    return gm_err_set(err, GM_ERR_FORMAT, "not a PyTorch memory snapshot: the pickle is not a dict");
  const pkr_val_t *dt = pkr_dict_get(root, "device_traces");
  const pkr_val_t *segs = pkr_dict_get(root, "segments");
  if ((!dt && !segs) || (dt && dt->type != PKR_LIST) || (segs && segs->type != PKR_LIST))
    return gm_err_set(err, GM_ERR_FORMAT,
                      "not a PyTorch memory snapshot: no 'device_traces' or 'segments' list");
  size_t ndev = dt ? dt->n : 0;
  if (ndev > 4096)
    return gm_err_set(err, GM_ERR_FORMAT, "not a PyTorch memory snapshot: %zu devices", ndev);
  /* lists[0..ndev) devices, lists[ndev] annotations, lists[ndev+1] synthetic initial state */
  evvec_t *lists = calloc(ndev + 2, sizeof(*lists));
  if (!lists) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  gm_status_t st = GM_OK;
  for (size_t d = 0; d < ndev && st == GM_OK; d++) {
    const pkr_val_t *tr = dt->items[d];
    if (!tr || tr->type != PKR_LIST) {
      st = gm_err_set(err, GM_ERR_FORMAT,
                      "not a PyTorch memory snapshot: device_traces[%zu] is not a list", d);
      break;
    }
    if (vec_reserve(&lists[d], tr->n)) st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
    if (tr->n > ps->max_dev_entries) ps->max_dev_entries = tr->n;
    for (size_t k = 0; k < tr->n && st == GM_OK; k++) {
      snap_event_t e;
      gm_status_t r = snap_entry_event(tr->items[k], (uint16_t)d, &e, err);
      ps->entries++;
      if (r == GM_END) {
        ps->skipped++;
      } else if (r != GM_OK) {
        st = gm_err_wrap(err, "device_traces[%zu][%zu]", d, k);
      } else {
        if (e.ev.kind == GMT_EV_MARKER) e.marker = SNAP_MARK_SNAPSHOT;
        if (vec_push(&lists[d], &e)) st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
      }
    }
  }
  return plan_finish(root, lists, ndev, ps, st, err);
}

gm_status_t snap_plan_streamed(const pkr_val_t *root, const gmt_event_t *evs, size_t n, snap_pass_t *ps,
                               gm_err_t *err) {
  memset(ps, 0, sizeof(*ps));
  if (root && root->type != PKR_DICT)
    return gm_err_set(err, GM_ERR_FORMAT, "not a PyTorch memory snapshot: the pickle is not a dict");
  size_t ndev = 0;
  for (size_t k = 0; k < n; k++)
    if ((size_t)evs[k].device + 1 > ndev) ndev = (size_t)evs[k].device + 1;
  evvec_t *lists = calloc(ndev + 2, sizeof(*lists));
  if (!lists) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  gm_status_t st = GM_OK;
  for (size_t k = 0; k < n && st == GM_OK; k++) {
    snap_event_t e;
    memset(&e, 0, sizeof e);
    e.ev = evs[k];
    e.ev.flags &= ~GMT_F_TORCH_STREAM;
    e.ev.callsite = GMT_NO_STRING;
    if (e.ev.kind == GMT_EV_ALLOC_FAILED) { /* the recorder keeps the device's free bytes here */
      e.device_free = e.ev.corr_id;
      e.ev.corr_id = 0;
    }
    e.time_us = (int64_t)(e.ev.ts_ns / 1000u);
    e.has_time = 1;
    ps->entries++;
    if (vec_push(&lists[e.ev.device], &e)) st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  }
  return plan_finish(root, lists, ndev, ps, st, err);
}

void snap_plan_free(snap_pass_t *ps) {
  for (size_t l = 0; l < ps->nlists; l++) vec_free(&ps->lists[l]);
  free(ps->lists);
  ps->lists = NULL;
  ps->nlists = 0;
  free(ps->evs);
  ps->evs = NULL;
  ps->n = 0;
}
