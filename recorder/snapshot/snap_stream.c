/* snap_stream.c: the matching of a streamed recording's merge (snap_merge_streamed.c)
 * in memory that grows with the distinct segments, never with the number of events.
 *
 * What the merge must know before it writes a byte (its header) depends on the whole recording:
 * which of CUPTI's driver calls are PyTorch's own (a cudaMalloc whose address and size are one of
 * PyTorch's segments, the cudaFree of such an allocation, a VMM call on a range PyTorch mapped:
 * left out), which are other libraries' (kept, external), how many of PyTorch's segment calls the
 * driver saw. The merge that held every event (snap_match.c) decides it call by call; here the
 * first pass only counts, per (kind, address, size) and per range, and the second pass decides
 * each call again as it reads it, by the same rules:
 *   - a device alloc is PyTorch's if (address, size) is one of its segments;
 *   - a device free is PyTorch's if the last alloc at its address, not freed since, was (a state
 *     per address; held merge: the last of PyTorch's allocs there, the same unless the driver
 *     gave out a live address twice);
 *   - a VMM call is PyTorch's if it touches a range PyTorch mapped (ranges kept once each).
 * Each segment call of PyTorch's takes the identity (correlation id, context) of the driver call
 * of the same (kind, address, size) in the same rank among those, as in the held merge: a third
 * reader of the file runs ahead of the writing to find it; it keeps only the calls that will be
 * claimed and that it passed before their claimer (what CUPTI delivered late, a flush's worth).
 * The snapshot's plan (the initial state, the header's OOMs) gets, of PyTorch's own calls, the
 * first per segment address, every OOM, and per device two VMM calls with the same least and
 * final mapped bytes: all its initial state reads. */
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "recorder/snapshot/snap_internal.h"

enum { K_SEG = 0, K_ALLOC = 1, K_FREE = 2, K_VMM = 3, K_MAP = 4 };

/* snap_key_t's kind: K_*, or K_FIRST: a (device, address) whose first segment call is planned */
#define K_FIRST 5

typedef struct corr {
  uint64_t corr_id;
  uint32_t context;
} corr_t;

/* One (kind, address, size): PyTorch's calls and the driver's, and the driver's identities
 * waiting for their claimer. */
typedef struct kc {
  snap_key_t k;
  uint64_t ntorch, ncupti, taken, queued;
  corr_t *q;
  size_t qhead, qn, qcap;
  UT_hash_handle hh;
} kc_t;

typedef struct addr_st {
  uint64_t addr, size;
  int live;
  UT_hash_handle hh;
} addr_st_t;

struct snap_cls {
  addr_st_t *by_addr;
};

typedef struct dev_vmm {
  int seen;
  size_t slot; /* the plan's two events for this device */
  int64_t net, minnet;
  uint64_t minaddr;
} dev_vmm_t;

typedef struct range {
  uint64_t lo, hi;
} range_t;

struct snap_bounded {
  kc_t *keys;
  snap_cls_t first; /* pass 1's state per address */
  gmt_event_t *plan;
  size_t nplan, plan_cap;
  dev_vmm_t *vmm;
  size_t nvmm;
  range_t *ranges;
  size_t nranges;
  uint64_t segments, pytorch, external;
  /* pass 2: the reader that finds the driver calls the segment calls claim */
  gmt_reader_t *rc;
  snap_cls_t ahead;
  int rc_end;
};

static kc_t *kc_find(kc_t *h, uint32_t kind, uint64_t addr, uint64_t size) {
  snap_key_t k = SNAP_KEY(kind, addr, size);
  kc_t *c;
  HASH_FIND(hh, h, &k, sizeof k, c);
  return c;
}

static kc_t *kc_get(kc_t **h, uint32_t kind, uint64_t addr, uint64_t size) {
  kc_t *c = kc_find(*h, kind, addr, size);
  if (c) return c;
  if (!(c = calloc(1, sizeof *c))) return NULL;
  c->k = SNAP_KEY(kind, addr, size);
  HASH_ADD(hh, *h, k, sizeof c->k, c);
  return c;
}

static void cls_clear(snap_cls_t *s) {
  addr_st_t *a, *t;
  HASH_ITER(hh, s->by_addr, a, t) {
    HASH_DEL(s->by_addr, a);
    free(a);
  }
}

snap_cls_t *snap_cls_new(void) { return calloc(1, sizeof(snap_cls_t)); }

void snap_cls_free(snap_cls_t *s) {
  if (!s) return;
  cls_clear(s);
  free(s);
}

snap_bounded_t *snap_bounded_new(void) { return calloc(1, sizeof(snap_bounded_t)); }

void snap_bounded_free(snap_bounded_t *b) {
  if (!b) return;
  kc_t *c, *t;
  HASH_ITER(hh, b->keys, c, t) {
    HASH_DEL(b->keys, c);
    free(c->q);
    free(c);
  }
  cls_clear(&b->first);
  cls_clear(&b->ahead);
  gmt_reader_close(b->rc);
  free(b->plan);
  free(b->vmm);
  free(b->ranges);
  free(b);
}

static int device_mem(const gmt_event_t *e) {
  return e->mem_kind == GMT_MEM_DEVICE || e->mem_kind == GMT_MEM_UNKNOWN;
}

static int is_vmm(unsigned k) {
  return k == GMT_EV_VMM_RESERVE || k == GMT_EV_VMM_MAP || k == GMT_EV_VMM_UNMAP || k == GMT_EV_VMM_RELEASE;
}

/* A device alloc or free at its address: which key it counts under (its size: the free's is the
 * alloc's); 0 for a free of nothing live. */
static int cls_step(snap_cls_t *s, const gmt_event_t *e, uint64_t *size) {
  addr_st_t *a;
  HASH_FIND(hh, s->by_addr, &e->addr, sizeof e->addr, a);
  if (e->kind == GMT_EV_ALLOC) {
    if (!a) {
      if (!(a = calloc(1, sizeof *a))) return -1;
      a->addr = e->addr;
      HASH_ADD(hh, s->by_addr, addr, sizeof a->addr, a);
    }
    a->size = *size = e->size;
    a->live = 1;
    return 1;
  }
  if (!a || !a->live) return 0;
  a->live = 0;
  *size = a->size;
  /* a freed address is rarely used again by the same kind of call: forget it (memory stays
   * that of the live ones) */
  HASH_DEL(s->by_addr, a);
  free(a);
  return 1;
}

static gm_status_t nomem(gm_err_t *err) { return gm_err_set(err, GM_ERR_NOMEM, "out of memory"); }

static gmt_event_t *plan_add(snap_bounded_t *b, const gmt_event_t *e) {
  if (b->nplan == b->plan_cap) {
    size_t cap = b->plan_cap ? b->plan_cap * 2 : 64;
    gmt_event_t *n = realloc(b->plan, cap * sizeof *n);
    if (!n) return NULL;
    b->plan = n;
    b->plan_cap = cap;
  }
  b->plan[b->nplan] = *e;
  return &b->plan[b->nplan++];
}

gm_status_t snap_bounded_torch(snap_bounded_t *b, const gmt_event_t *e, gm_err_t *err) {
  if (e->kind == GMT_EV_ALLOC_FAILED) return plan_add(b, e) ? GM_OK : nomem(err);
  if (e->kind == GMT_EV_SEGMENT_ALLOC || e->kind == GMT_EV_SEGMENT_FREE) {
    b->segments++;
    kc_t *seg = kc_get(&b->keys, K_SEG, e->addr, e->size);
    kc_t *c = kc_get(&b->keys, e->kind == GMT_EV_SEGMENT_ALLOC ? K_ALLOC : K_FREE, e->addr, e->size);
    kc_t *first = kc_find(b->keys, K_FIRST, e->addr, e->device);
    if (!seg || !c) return nomem(err);
    c->ntorch++;
    if (first) return GM_OK;
    if (!kc_get(&b->keys, K_FIRST, e->addr, e->device) || !plan_add(b, e)) return nomem(err);
    return GM_OK;
  }
  if (e->kind != GMT_EV_VMM_MAP && e->kind != GMT_EV_VMM_UNMAP) return GM_OK;
  if (e->size && !kc_get(&b->keys, K_MAP, e->addr, e->addr + e->size)) return nomem(err);
  if ((size_t)e->device >= b->nvmm) {
    size_t n = (size_t)e->device + 1;
    dev_vmm_t *v = realloc(b->vmm, n * sizeof *v);
    if (!v) return nomem(err);
    memset(v + b->nvmm, 0, (n - b->nvmm) * sizeof *v);
    b->vmm = v;
    b->nvmm = n;
  }
  dev_vmm_t *d = &b->vmm[e->device];
  if (!d->seen) { /* the device's first: two slots in the plan, filled at the end */
    d->seen = 1;
    d->slot = b->nplan;
    gmt_event_t x = *e;
    x.size = 0;
    if (!plan_add(b, &x) || !plan_add(b, &x)) return nomem(err);
  }
  d->net += e->kind == GMT_EV_VMM_MAP ? (int64_t)e->size : -(int64_t)e->size;
  if (d->net < d->minnet) {
    d->minnet = d->net;
    d->minaddr = e->addr;
  }
  return GM_OK;
}

gm_status_t snap_bounded_driver(snap_bounded_t *b, const gmt_event_t *e, gm_err_t *err) {
  kc_t *c;
  if (is_vmm(e->kind)) {
    c = kc_get(&b->keys, K_VMM, e->addr, e->size);
  } else {
    uint64_t size = 0;
    int r = cls_step(&b->first, e, &size);
    if (r < 0) return nomem(err);
    if (r == 0) { /* a free of nothing live: another library's */
      b->external++;
      return GM_OK;
    }
    c = kc_get(&b->keys, e->kind == GMT_EV_ALLOC ? K_ALLOC : K_FREE, e->addr, size);
  }
  if (!c) return nomem(err);
  c->ncupti++;
  return GM_OK;
}

static int range_cmp(const void *a, const void *b) {
  const range_t *x = a, *y = b;
  return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static int overlaps(const snap_bounded_t *b, uint64_t lo, uint64_t hi) {
  size_t a = 0, z = b->nranges; /* the first range with hi > lo */
  while (a < z) {
    size_t m = a + (z - a) / 2;
    if (b->ranges[m].hi <= lo) a = m + 1;
    else z = m;
  }
  return a < b->nranges && b->ranges[a].lo < hi;
}

static int is_pytorch_key(const snap_bounded_t *b, const kc_t *c) {
  if (c->k.kind == K_VMM) return b->nranges && overlaps(b, c->k.addr, c->k.addr + (c->k.size ? c->k.size : 1));
  return kc_find(b->keys, K_SEG, c->k.addr, c->k.size) != NULL;
}

gm_status_t snap_bounded_finish(snap_bounded_t *b, gm_err_t *err) {
  size_t n = 0;
  kc_t *c, *t;
  HASH_ITER(hh, b->keys, c, t) n += c->k.kind == K_MAP;
  if (n && !(b->ranges = malloc(n * sizeof *b->ranges))) return nomem(err);
  HASH_ITER(hh, b->keys, c, t) {
    if (c->k.kind == K_MAP) b->ranges[b->nranges++] = (range_t){c->k.addr, c->k.size};
  }
  if (b->nranges) {
    qsort(b->ranges, b->nranges, sizeof *b->ranges, range_cmp);
    size_t j = 0;
    for (size_t i = 1; i < b->nranges; i++) {
      if (b->ranges[i].lo <= b->ranges[j].hi) {
        if (b->ranges[i].hi > b->ranges[j].hi) b->ranges[j].hi = b->ranges[i].hi;
      } else {
        b->ranges[++j] = b->ranges[i];
      }
    }
    b->nranges = j + 1;
  }
  HASH_ITER(hh, b->keys, c, t) {
    if (c->k.kind != K_ALLOC && c->k.kind != K_FREE && c->k.kind != K_VMM) continue;
    if (is_pytorch_key(b, c)) {
      b->pytorch += c->ncupti;
    } else {
      b->external += c->ncupti;
      c->ncupti = 0; /* nothing here to claim */
    }
  }
  /* each device's VMM calls as two: down to the least mapped bytes, up to the final ones */
  for (size_t d = 0; d < b->nvmm; d++) {
    dev_vmm_t *v = &b->vmm[d];
    if (!v->seen) continue;
    gmt_event_t *down = &b->plan[v->slot], *up = &b->plan[v->slot + 1];
    down->kind = GMT_EV_VMM_UNMAP;
    down->addr = v->minaddr;
    down->size = (uint64_t)-v->minnet;
    up->kind = GMT_EV_VMM_MAP;
    up->size = (uint64_t)(v->net - v->minnet);
  }
  cls_clear(&b->first);
  return GM_OK;
}

const gmt_event_t *snap_bounded_plan(const snap_bounded_t *b, size_t *n) {
  *n = b->nplan;
  return b->plan;
}

void snap_bounded_counts(const snap_bounded_t *b, uint64_t *segments, uint64_t *seen, uint64_t *pytorch,
                         uint64_t *external) {
  uint64_t s = 0;
  kc_t *c, *t;
  HASH_ITER(hh, b->keys, c, t) {
    if (c->k.kind == K_ALLOC || c->k.kind == K_FREE) s += c->ntorch < c->ncupti ? c->ntorch : c->ncupti;
  }
  *segments = b->segments;
  *seen = s;
  *pytorch = b->pytorch;
  *external = b->external;
}

/* ---- pass 2 ----------------------------------------------------------------------------------- */

/* Is this driver call PyTorch's own? (*kind, *size: the key it claims under; 0 for VMM.) */
static int decide(const snap_bounded_t *b, snap_cls_t *s, const gmt_event_t *e, uint32_t *kind, uint64_t *size,
                  int *nomem_out) {
  *kind = 0;
  if (is_vmm(e->kind)) return b->nranges && overlaps(b, e->addr, e->addr + (e->size ? e->size : 1));
  int r = cls_step(s, e, size);
  if (r < 0) *nomem_out = 1;
  if (r <= 0) return 0;
  *kind = e->kind == GMT_EV_ALLOC ? K_ALLOC : K_FREE;
  return kc_find(b->keys, K_SEG, e->addr, *size) != NULL;
}

int snap_bounded_side(const snap_bounded_t *b, snap_cls_t *s, const gmt_event_t *e) {
  uint32_t kind;
  uint64_t size = 0;
  int oom = 0;
  return decide(b, s, e, &kind, &size, &oom);
}

gm_status_t snap_bounded_open(snap_bounded_t *b, const char *path, unsigned flags, gm_err_t *err) {
  return gmt_reader_open_flags(&b->rc, path, flags, err);
}

static gm_status_t push(kc_t *c, const gmt_event_t *e) {
  if (c->qhead && c->qhead == c->qn) c->qhead = c->qn = 0;
  if (c->qn == c->qcap) {
    if (c->qhead) { /* slide down what is still waiting */
      memmove(c->q, c->q + c->qhead, (c->qn - c->qhead) * sizeof *c->q);
      c->qn -= c->qhead;
      c->qhead = 0;
    }
    if (c->qn == c->qcap) {
      size_t cap = c->qcap ? c->qcap * 2 : 4;
      corr_t *q = realloc(c->q, cap * sizeof *q);
      if (!q) return GM_ERR_NOMEM;
      c->q = q;
      c->qcap = cap;
    }
  }
  c->q[c->qn++] = (corr_t){e->corr_id, e->context};
  c->queued++;
  return GM_OK;
}

gm_status_t snap_bounded_claim(snap_bounded_t *b, gmt_event_t *e, gm_err_t *err) {
  kc_t *c = kc_find(b->keys, e->kind == GMT_EV_SEGMENT_ALLOC ? K_ALLOC : K_FREE, e->addr, e->size);
  if (!c || c->taken >= c->ncupti || c->taken >= c->ntorch) return GM_OK; /* the driver's call unseen */
  while (c->qhead == c->qn) { /* read on to it: it is there (pass 1 counted it) */
    gmt_event_t ev;
    gm_status_t s = b->rc_end ? GM_END : gmt_reader_next(b->rc, &ev, err);
    if (s == GM_END) {
      b->rc_end = 1;
      return gm_err_set(err, GM_ERR_CORRUPT, "the trace changed while it was merged");
    }
    if (s) return s;
    if ((ev.flags & GMT_F_TORCH_STREAM) || !device_mem(&ev) ||
        (ev.kind != GMT_EV_ALLOC && ev.kind != GMT_EV_FREE && !is_vmm(ev.kind)))
      continue;
    uint32_t kind;
    uint64_t size = 0;
    int oom = 0;
    if (!decide(b, &b->ahead, &ev, &kind, &size, &oom)) {
      if (oom) return nomem(err);
      continue;
    }
    if (!kind) continue; /* a VMM call: nothing claims it */
    kc_t *d = kc_find(b->keys, kind, ev.addr, size);
    /* only what will be claimed waits */
    if (d && d->queued < d->ncupti && d->queued < d->ntorch && push(d, &ev) != GM_OK) return nomem(err);
  }
  corr_t k = c->q[c->qhead++];
  e->corr_id = k.corr_id;
  e->context = k.context;
  c->taken++;
  return GM_OK;
}
