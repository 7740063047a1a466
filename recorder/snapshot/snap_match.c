/* snap_match.c: which of the CUPTI trace's driver calls are PyTorch's own, in the merge of a
 * history (or a streamed recording held whole): an alloc whose address and size are a segment of
 * the history (its free matched by the address), a VMM call on a range the history mapped;
 * failed allocations and pool trims left out; the rest flagged external. The segment calls are
 * queued per (kind, address, size), in time order, for the history's segment events to claim
 * one by one (their correlation id and context). */
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "recorder/snapshot/snap_side.h"

/* The CUPTI events of one (kind, address, size), in time order, for the history's segment events
 * to claim one by one. */
typedef struct snap_segq {
  snap_key_t key; /* kind: GMT_EV_ALLOC or GMT_EV_FREE (the CUPTI side's), or 0 */
  size_t *idx, n, cap, next;
  UT_hash_handle hh;
} snap_segq_t;

static snap_segq_t *q_find(snap_segq_t *h, uint8_t kind, uint64_t addr, uint64_t size) {
  snap_key_t k = SNAP_KEY(kind, addr, size);
  snap_segq_t *q;
  HASH_FIND(hh, h, &k, sizeof k, q);
  return q;
}

static snap_segq_t *q_get(snap_segq_t **h, uint8_t kind, uint64_t addr, uint64_t size) {
  snap_segq_t *q = q_find(*h, kind, addr, size);
  if (q) return q;
  if (!(q = calloc(1, sizeof *q))) return NULL;
  q->key = SNAP_KEY(kind, addr, size);
  HASH_ADD(hh, *h, key, sizeof q->key, q);
  return q;
}

static int q_push(snap_segq_t *q, size_t i) {
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

void snap_match_free(snap_segq_t **h) {
  snap_segq_t *q, *t;
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
gm_status_t snap_match_classify(const snap_pass_t *ps, snap_side_t *c, snap_segq_t **queues, uint64_t *dropped,
                                uint64_t *external, snap_site_t **sites, size_t *nsites, gm_err_t *err) {
  snap_segq_t *segs = NULL; /* (addr, size) of the history's segments: a set */
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
  snap_segq_t *live = NULL;
  for (size_t i = 0; i < c->n && st == GM_OK; i++) {
    snap_cev_t *ce = &c->v[i];
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
    if (e->kind == GMT_EV_ALLOC && snap_device_mem(e) && q_find(segs, 0, e->addr, e->size)) {
      snap_segq_t *q = q_get(queues, GMT_EV_ALLOC, e->addr, e->size), *l = q_get(&live, 0, e->addr, 0);
      if (!q || !l || q_push(q, i) < 0) {
        st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
      } else {
        l->n = 1;
        l->next = (size_t)e->size;
      }
      ce->pytorch = drop = 1;
    } else if (e->kind == GMT_EV_FREE && snap_device_mem(e)) {
      snap_segq_t *l = q_find(live, 0, e->addr, 0);
      if (l && l->n) {
        uint64_t size = (uint64_t)l->next;
        snap_segq_t *q = q_get(queues, GMT_EV_FREE, e->addr, size);
        if (!q || q_push(q, i) < 0) st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
        l->n = 0;
        ce->pytorch = drop = 1;
      }
    } else if (snap_is_vmm(e->kind) && snap_device_mem(e) && nmaps &&
               ranges_overlap(maps, nmaps, e->addr, e->addr + (e->size ? e->size : 1))) {
      ce->pytorch = drop = 1;
    } else if ((e->kind == GMT_EV_ALLOC_FAILED && snap_device_mem(e)) || e->kind == GMT_EV_EMPTY_CACHE) {
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
  snap_match_free(&live);
  snap_match_free(&segs);
  free(maps);
  return st;
}

/* A history segment event takes the identity of the CUPTI call it matches. */
int snap_match_claim(snap_segq_t *queues, const snap_side_t *c, gmt_event_t *e) {
  uint8_t kind = e->kind == GMT_EV_SEGMENT_ALLOC ? GMT_EV_ALLOC : GMT_EV_FREE;
  snap_segq_t *q = q_find(queues, kind, e->addr, e->size);
  if (!q || q->next >= q->n) return 0;
  const gmt_event_t *ce = &c->v[q->idx[q->next++]].ev;
  e->corr_id = ce->corr_id;
  e->context = ce->context;
  return 1;
}
