/* fid_replay.c: the fidelity harness's replay (fid_replay.h), through the replay engine.
 *
 * The trace is read once, in order. Its segment events make the oracle (the expected
 * sequence, each tagged with the tensor request it happened in); every event is also fed, one
 * at a time, to the replay engine of each device that allocates (replay/engine: the API
 * gpureplay drives), so that the replay's driver calls of two devices interleave as their
 * requests do. The engine's observer reports each driver call the policy makes, with the
 * index of the event that caused it (the "actual" sequence), and each block it hands out
 * (where it lands, against where the real run put it).
 *
 * The backend is the harness's own: it places segments as fid_addr_t says (the oracle's
 * addresses need the sequence so far, which only the harness has), hands out VA reservations
 * from a bump pointer (2 MiB aligned, never reused, so a replay is deterministic), and fails a
 * mem_alloc or map past the device's memory with GM_ERR_NOMEM, as the policy's OOM path expects. */
#include "tests/fidelity/fid_replay.h"

#include <stdlib.h>
#include <string.h>

#include "formats/gmt.h"
#include "replay/engine/rp_engine.h"
#include "replay/engine/va_model.h"

#define FID_MAX_DEV 64

/* Segments in creation order, to name where a block was placed: (segment number, offset). */
typedef struct seg_list {
  struct {
    uint64_t addr, size;
    int live;
  } *v;
  size_t n, cap;
} seg_list_t;

static int segs_add(seg_list_t *s, uint64_t addr, uint64_t size) {
  if (s->n == s->cap) {
    size_t nc = s->cap ? s->cap * 2 : 64;
    void *nv = realloc(s->v, nc * sizeof(*s->v));
    if (!nv) return -1;
    s->v = nv;
    s->cap = nc;
  }
  s->v[s->n].addr = addr;
  s->v[s->n].size = size;
  s->v[s->n].live = 1;
  s->n++;
  return 0;
}

static void segs_kill(seg_list_t *s, uint64_t addr) {
  for (size_t k = s->n; k-- > 0;)
    if (s->v[k].live && s->v[k].addr == addr) {
      s->v[k].live = 0;
      return;
    }
}

/* Segment number holding addr (-1 if none), and the offset in it. */
static int64_t segs_find(const seg_list_t *s, uint64_t addr, uint64_t *off) {
  for (size_t k = s->n; k-- > 0;)
    if (s->v[k].live && addr >= s->v[k].addr && addr < s->v[k].addr + s->v[k].size) {
      *off = addr - s->v[k].addr;
      return (int64_t)k;
    }
  return -1;
}

/* One replay: the oracle as read so far and what the replay did. */
typedef struct run {
  fid_result_t *res;
  fid_addr_t addr_mode;
  seg_list_t esegs, asegs; /* the snapshot's and the replay's cudaMalloc segments (all devices) */
  uint64_t *req_of;        /* event index -> index of the request it is or follows */
  size_t n_events, cap_events;
  gmt_event_t *reqs;       /* the requests (ALLOC, FREE), for the divergence's words */
  size_t nreq, capreq;
  uint64_t tcur;           /* the replay's reserved bytes now, all devices */
  int nomem;               /* host memory ran out while recording */
} run_t;

/* One device: its backend and its engine (fed every event from `first` on). */
typedef struct fdev {
  rp_backend_t b;
  run_t *run;
  uint16_t device;
  uint64_t next; /* bump pointer */
  uint64_t cur;  /* reserved bytes now (this device) */
  rp_va_t *va;   /* FID_ADDR_DRIVER */
  uint64_t first;
  rp_engine_observer_t obs;
  rp_engine_t *e;
} fdev_t;

const char *fid_op_name(unsigned op) {
  switch (op) {
    case FID_SEG_ALLOC: return "segment_alloc";
    case FID_SEG_FREE: return "segment_free";
    case FID_MAP: return "segment_map";
    case FID_UNMAP: return "segment_unmap";
    default: return "?";
  }
}

static int seq_push(fid_seq_t *s, unsigned op, uint16_t dev, uint64_t size, uint64_t req,
                    uint64_t addr) {
  if (s->n == s->cap) {
    size_t nc = s->cap ? s->cap * 2 : 64;
    fid_seg_t *nv = realloc(s->v, nc * sizeof(*nv));
    if (!nv) return -1;
    s->v = nv;
    s->cap = nc;
  }
  s->v[s->n].op = (uint8_t)op;
  s->v[s->n].device = dev;
  s->v[s->n].size = size;
  s->v[s->n].req = req;
  s->v[s->n].addr = addr;
  s->n++;
  return 0;
}

/* ---- the backend ---------------------------------------------------------------------------- */

static uint64_t bump(fdev_t *d, uint64_t size) {
  uint64_t a = d->next;
  d->next += (size + (2u << 20) - 1) & ~(uint64_t)((2u << 20) - 1);
  d->next += 2u << 20; /* a gap: blocks of two segments are never adjacent */
  return a;
}

static gm_status_t d_mem_alloc(void *ctx, uint64_t size, uint64_t *addr) {
  fdev_t *d = ctx;
  run_t *r = d->run;
  if (d->cur + size > d->b.drv.total_memory) return GM_ERR_NOMEM;
  const fid_seq_t *ex = &r->res->expected;
  size_t at = r->res->actual.n;
  if (r->addr_mode == FID_ADDR_DRIVER) {
    if (rp_va_alloc(d->va, size, addr) != GM_OK) return GM_ERR_IO; /* not NOMEM: no OOM path */
  } else if (r->addr_mode == FID_ADDR_ORACLE && at < ex->n && ex->v[at].op == FID_SEG_ALLOC &&
             ex->v[at].size == size && ex->v[at].device == d->device)
    *addr = ex->v[at].addr; /* the address the CUDA driver gave the real run */
  else
    *addr = bump(d, size);
  if (segs_add(&r->asegs, *addr, size)) r->nomem = 1;
  d->cur += size;
  return GM_OK;
}

static gm_status_t d_mem_free(void *ctx, uint64_t addr, uint64_t size) {
  fdev_t *d = ctx;
  segs_kill(&d->run->asegs, addr);
  if (d->va && rp_va_release(d->va, addr) != GM_OK) return GM_ERR_IO;
  d->cur -= size;
  return GM_OK;
}

static gm_status_t d_va_reserve(void *ctx, uint64_t size, uint64_t *addr) {
  *addr = bump(ctx, size);
  return GM_OK;
}

static gm_status_t d_va_release(void *ctx, uint64_t addr, uint64_t size) {
  (void)ctx, (void)addr, (void)size;
  return GM_OK;
}

static gm_status_t d_map(void *ctx, uint64_t addr, uint64_t size) {
  fdev_t *d = ctx;
  (void)addr;
  if (d->cur + size > d->b.drv.total_memory) return GM_ERR_NOMEM;
  d->cur += size;
  return GM_OK;
}

static gm_status_t d_unmap(void *ctx, uint64_t addr, uint64_t size) {
  fdev_t *d = ctx;
  (void)addr;
  d->cur -= size;
  return GM_OK;
}

static void d_destroy(rp_backend_t *b) { (void)b; /* the run owns the device */ }

/* ---- the observer --------------------------------------------------------------------------- */

static void o_driver_call(void *ctx, int call, uint64_t addr, uint64_t size, uint64_t event) {
  fdev_t *d = ctx;
  run_t *r = d->run;
  unsigned op = call == RP_CALL_MEM_ALLOC ? FID_SEG_ALLOC
                : call == RP_CALL_MEM_FREE ? FID_SEG_FREE
                : call == RP_CALL_MAP      ? FID_MAP
                                           : FID_UNMAP;
  if (seq_push(&r->res->actual, op, d->device, size, r->req_of[d->first + event], addr)) r->nomem = 1;
  if (op == FID_SEG_ALLOC || op == FID_MAP) {
    r->tcur += size;
    if (r->tcur > r->res->actual_peak) r->res->actual_peak = r->tcur;
  } else {
    r->tcur -= size;
  }
}

/* The first block placed at another (segment number, offset) than in the real run. */
static void o_served(void *ctx, const gmt_event_t *ev, uint64_t addr, uint64_t event) {
  fdev_t *d = ctx;
  run_t *r = d->run;
  fid_result_t *res = r->res;
  if (res->place_diverge >= 0) return;
  uint64_t req = r->req_of[d->first + event], eo = 0, ao = 0;
  int64_t es = segs_find(&r->esegs, ev->addr, &eo), as = segs_find(&r->asegs, addr, &ao);
  if (es < 0 || (es == as && eo == ao)) return;
  res->place_diverge = (int64_t)req;
  snprintf(res->place_detail, sizeof(res->place_detail),
           "first block placed differently: request #%llu (alloc %llu B, stream %llu) at "
           "segment #%lld + %llu in the snapshot, segment #%lld + %llu in the replay",
           (unsigned long long)req, (unsigned long long)ev->size, (unsigned long long)ev->stream,
           (long long)es, (unsigned long long)eo, (long long)as, (unsigned long long)ao);
}

static gm_status_t dev_start(fdev_t *d, run_t *r, uint16_t device, uint64_t total_memory,
                             const char *conf, gm_err_t *err) {
  memset(d, 0, sizeof(*d));
  d->run = r;
  d->device = device;
  d->next = ((uint64_t)device + 1) << 44;
  d->first = r->n_events - 1; /* from the event being read */
  rp_driver_t *v = &d->b.drv;
  v->ctx = d;
  v->mem_alloc = d_mem_alloc;
  v->mem_free = d_mem_free;
  v->va_reserve = d_va_reserve;
  v->va_release = d_va_release;
  v->map = d_map;
  v->unmap = d_unmap;
  v->granularity = 2u << 20;
  v->total_memory = total_memory;
  snprintf(d->b.name, sizeof(d->b.name), "fid:%u", device);
  d->b.destroy = d_destroy;
  if (r->addr_mode == FID_ADDR_DRIVER) {
    /* one address space per device, the first region's top 2^44 apart */
    rp_va_opts_t vo = {RP_VA_DRIVER, ((uint64_t)device + 2) << 44, 2u << 20, 0, 0};
    if (!(d->va = rp_va_new(&vo))) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  }
  d->obs.ctx = d;
  d->obs.driver_call = o_driver_call;
  d->obs.served = o_served;
  rp_engine_opts_t eo = {0};
  eo.device = device;
  eo.event_timing = RP_EVENTS_RECORDED;
  eo.observer = &d->obs;
  const rp_policy_ops_t *ops = rp_policy_find("pytorch");
  if (!ops) return gm_err_set(err, GM_ERR_INVAL, "unknown policy 'pytorch'");
  gm_status_t st = rp_engine_create(ops, conf, &d->b, &eo, &d->e, err);
  if (st != GM_OK) gm_err_wrap(err, "policy 'pytorch:%s'", conf);
  return st;
}

/* ---- the replay ----------------------------------------------------------------------------- */

void fid_result_free(fid_result_t *res) {
  free(res->expected.v);
  free(res->actual.v);
  memset(&res->expected, 0, sizeof(res->expected));
  memset(&res->actual, 0, sizeof(res->actual));
}

/* The first divergence, in words. */
static void compare(fid_result_t *r, const gmt_event_t *reqs, size_t nreq) {
  size_t n = r->expected.n < r->actual.n ? r->expected.n : r->actual.n;
  size_t k = 0;
  while (k < n && r->expected.v[k].op == r->actual.v[k].op &&
         r->expected.v[k].size == r->actual.v[k].size && r->expected.v[k].req == r->actual.v[k].req &&
         r->expected.v[k].device == r->actual.v[k].device)
    k++;
  if (k == r->expected.n && k == r->actual.n) {
    r->diverge = -1;
    r->detail[0] = 0;
    return;
  }
  r->diverge = (int64_t)k;
  char e[200] = "(none: the snapshot has no more)", a[200] = "(none: the replay made no more)";
  const fid_seg_t *x = k < r->expected.n ? &r->expected.v[k] : NULL;
  const fid_seg_t *y = k < r->actual.n ? &r->actual.v[k] : NULL;
  if (x)
    snprintf(e, sizeof(e), "%s %llu B on device %u during request #%llu", fid_op_name(x->op),
             (unsigned long long)x->size, x->device, (unsigned long long)x->req);
  if (y)
    snprintf(a, sizeof(a), "%s %llu B on device %u during request #%llu", fid_op_name(y->op),
             (unsigned long long)y->size, y->device, (unsigned long long)y->req);
  uint64_t q = x ? x->req : y->req;
  char rq[300] = "";
  if (q < nreq) {
    const gmt_event_t *ev = &reqs[q];
    snprintf(rq, sizeof(rq), "; request #%llu is %s of %llu B on stream %llu at trace addr 0x%llx",
             (unsigned long long)q, ev->kind == GMT_EV_ALLOC ? "alloc" : "free",
             (unsigned long long)ev->size, (unsigned long long)ev->stream,
             (unsigned long long)ev->addr);
  }
  snprintf(r->detail, sizeof(r->detail),
           "segment event #%zu differs: snapshot %s, replay %s%s (segment events: snapshot %zu, "
           "replay %zu)",
           k, e, a, rq, r->expected.n, r->actual.n);
}

static gm_status_t pick_conf(const gmt_header_t *h, const char *conf, const char *extra,
                             fid_result_t *res, gm_err_t *err) {
  const char *c = conf;
  if (!c) c = gmt_header_kv_get(h, "torch.alloc_conf");
  if (!c) c = gmt_header_kv_get(h, "PYTORCH_CUDA_ALLOC_CONF");
  if (!c) c = "";
  int n = snprintf(res->conf, sizeof(res->conf), "%s%s%s", c, (*c && extra && *extra) ? "," : "",
                   extra ? extra : "");
  if (n < 0 || (size_t)n >= sizeof(res->conf))
    return gm_err_set(err, GM_ERR_INVAL, "allocator settings too long");
  return GM_OK;
}

/* Append to a growing array of `size`-byte elements. */
static int grow_push(void *pv, size_t *n, size_t *cap, const void *x, size_t size) {
  void **p = pv;
  if (*n == *cap) {
    size_t nc = *cap ? *cap * 2 : 1024;
    void *nv = realloc(*p, nc * size);
    if (!nv) return -1;
    *p = nv;
    *cap = nc;
  }
  memcpy((char *)*p + *n * size, x, size);
  (*n)++;
  return 0;
}

/* A segment event of the trace: the oracle. Synthetic initial segments are state, not
 * decisions: they are not compared (the replay's policy cannot be seeded with them), but they
 * count towards the peak. */
static gm_status_t oracle(run_t *r, unsigned op, const gmt_event_t *ev, uint64_t req, uint64_t *ecur,
                          gm_err_t *err) {
  fid_result_t *res = r->res;
  if (!(ev->flags & GMT_F_SYNTHETIC) && seq_push(&res->expected, op, ev->device, ev->size, req, ev->addr))
    return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  if (op == FID_SEG_ALLOC && segs_add(&r->esegs, ev->addr, ev->size))
    return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  if (op == FID_SEG_FREE) segs_kill(&r->esegs, ev->addr);
  if (op == FID_SEG_ALLOC || op == FID_MAP) {
    *ecur += ev->size;
    if (*ecur > res->expected_peak) res->expected_peak = *ecur;
  } else {
    *ecur -= ev->size;
  }
  return GM_OK;
}

gm_status_t fid_replay(const char *trace_path, const char *conf, const char *extra_conf,
                       uint64_t total_memory, fid_addr_t addr_mode, fid_result_t *res, gm_err_t *err) {
  memset(res, 0, sizeof(*res));
  res->diverge = -1;
  res->place_diverge = -1;
  gmt_reader_t *rd = NULL;
  gm_status_t st = gmt_reader_open(&rd, trace_path, err);
  if (st) return st;
  if ((st = pick_conf(gmt_reader_header(rd), conf, extra_conf, res, err))) {
    gmt_reader_close(rd);
    return st;
  }
  run_t r = {0};
  r.res = res;
  r.addr_mode = addr_mode;
  fdev_t *dev[FID_MAX_DEV] = {0};
  int order[FID_MAX_DEV], ndev = 0; /* devices in the order they started */
  uint64_t req = 0, ecur = 0;
  gmt_event_t ev;
  while (st == GM_OK && (st = gmt_reader_next(rd, &ev, err)) == GM_OK) {
    if (ev.device >= FID_MAX_DEV) {
      st = gm_err_set(err, GM_ERR_UNSUPPORTED, "device %u: the harness replays at most %d devices",
                      ev.device, FID_MAX_DEV);
      break;
    }
    if (ev.flags & GMT_F_SYNTHETIC) res->synthetic++;
    int is_req = ev.kind == GMT_EV_ALLOC || ev.kind == GMT_EV_FREE;
    if (grow_push(&r.req_of, &r.n_events, &r.cap_events, &req, sizeof(req)) ||
        (is_req && grow_push(&r.reqs, &r.nreq, &r.capreq, &ev, sizeof(ev)))) {
      st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
      break;
    }
    unsigned op = ev.kind == GMT_EV_SEGMENT_ALLOC ? FID_SEG_ALLOC
                  : ev.kind == GMT_EV_SEGMENT_FREE ? FID_SEG_FREE
                  : ev.kind == GMT_EV_VMM_MAP      ? FID_MAP
                  : ev.kind == GMT_EV_VMM_UNMAP    ? FID_UNMAP
                                                   : 0;
    if (op && (st = oracle(&r, op, &ev, req, &ecur, err))) break;
    if (is_req && !dev[ev.device]) { /* its engine starts at its first request */
      if (!(dev[ev.device] = malloc(sizeof(fdev_t)))) {
        st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
        break;
      }
      order[ndev++] = ev.device;
      if ((st = dev_start(dev[ev.device], &r, ev.device, total_memory, res->conf, err))) break;
    }
    for (int k = 0; k < ndev && st == GM_OK; k++) st = rp_engine_feed(dev[order[k]]->e, &ev, 1, err);
    if (st == GM_OK && r.nomem) st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
    if (is_req) req++;
  }
  if (st == GM_END) st = GM_OK;
  res->requests = req;
  if (st == GM_OK) compare(res, r.reqs, r.nreq);
  for (int k = 0; k < ndev; k++) {
    fdev_t *d = dev[order[k]];
    res->ooms += d->e ? rp_engine_ooms(d->e) : 0;
    d->obs.driver_call = NULL; /* what the policy gives back at its end is not the run's */
    d->obs.served = NULL;
    rp_engine_destroy(d->e);
    rp_va_free_all(d->va);
    free(d);
  }
  free(r.req_of);
  free(r.reqs);
  free(r.esegs.v);
  free(r.asegs.v);
  gmt_reader_close(rd);
  return st;
}
