/* fid_replay.c: the fidelity harness's minimal engine and recording driver (fid_replay.h).
 *
 * The recording driver hands out addresses from a bump pointer (2 MiB aligned, never reused, so
 * a replay is deterministic) and appends every mem_alloc / mem_free / map / unmap to the
 * "actual" sequence with the current request index. Trace addresses are mapped to the policy's
 * block addresses through a hash table, since the policy chooses its own addresses. */
#include "tests/fidelity/fid_replay.h"

#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "formats/gmt.h"
#include "replay/policies/rp_policy.h"
#include "replay/engine/va_model.h"

#define FID_MAX_DEV 64

typedef struct addr_map {
  uint64_t key; /* trace addr | device << 48 */
  uint64_t addr;
  uint64_t size;
  UT_hash_handle hh;
} addr_map_t;

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

typedef struct rec_drv {
  rp_driver_t drv;
  fid_result_t *res;
  uint16_t device;
  uint64_t next; /* bump pointer */
  uint64_t cur;  /* reserved bytes now (this device) */
  uint64_t *total_cur, *total_peak; /* over all devices */
  const uint64_t *req;
  seg_list_t *segs; /* the replay's cudaMalloc segments (all devices) */
  fid_addr_t addr_mode;
  rp_va_t *va; /* FID_ADDR_DRIVER */
  int nomem;
} rec_drv_t;

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

static gm_status_t rec(rec_drv_t *d, unsigned op, uint64_t size, uint64_t addr) {
  if (seq_push(&d->res->actual, op, d->device, size, *d->req, addr)) {
    d->nomem = 1;
    return GM_ERR_IO; /* not NOMEM: that would run the policy's OOM path */
  }
  if (op == FID_SEG_ALLOC || op == FID_MAP) {
    d->cur += size;
    *d->total_cur += size;
    if (*d->total_cur > *d->total_peak) *d->total_peak = *d->total_cur;
  } else {
    d->cur -= size;
    *d->total_cur -= size;
  }
  return GM_OK;
}

static uint64_t bump(rec_drv_t *d, uint64_t size) {
  uint64_t a = d->next;
  d->next += (size + (2u << 20) - 1) & ~(uint64_t)((2u << 20) - 1);
  d->next += 2u << 20; /* a gap: blocks of two segments are never adjacent */
  return a;
}

static gm_status_t d_mem_alloc(void *ctx, uint64_t size, uint64_t *addr) {
  rec_drv_t *d = ctx;
  if (d->cur + size > d->drv.total_memory) return GM_ERR_NOMEM;
  const fid_seq_t *ex = &d->res->expected;
  size_t at = d->res->actual.n;
  if (d->addr_mode == FID_ADDR_DRIVER) {
    if (rp_va_alloc(d->va, size, addr) != GM_OK) {
      d->nomem = 1;
      return GM_ERR_IO;
    }
  } else if (d->addr_mode == FID_ADDR_ORACLE && at < ex->n && ex->v[at].op == FID_SEG_ALLOC && ex->v[at].size == size &&
      ex->v[at].device == d->device)
    *addr = ex->v[at].addr; /* the address the CUDA driver gave the real run */
  else
    *addr = bump(d, size);
  if (segs_add(d->segs, *addr, size)) d->nomem = 1;
  return rec(d, FID_SEG_ALLOC, size, *addr);
}
static gm_status_t d_mem_free(void *ctx, uint64_t addr, uint64_t size) {
  rec_drv_t *d = ctx;
  segs_kill(d->segs, addr);
  if (d->va && rp_va_release(d->va, addr) != GM_OK) {
    d->nomem = 1;
    return GM_ERR_IO;
  }
  return rec(ctx, FID_SEG_FREE, size, addr);
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
  rec_drv_t *d = ctx;
  if (d->cur + size > d->drv.total_memory) return GM_ERR_NOMEM;
  return rec(d, FID_MAP, size, addr);
}
static gm_status_t d_unmap(void *ctx, uint64_t addr, uint64_t size) {
  return rec(ctx, FID_UNMAP, size, addr);
}

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

gm_status_t fid_replay(const char *trace_path, const char *conf, const char *extra_conf,
                       uint64_t total_memory, fid_addr_t addr_mode, fid_result_t *res, gm_err_t *err) {
  memset(res, 0, sizeof(*res));
  res->diverge = -1;
  res->place_diverge = -1;
  seg_list_t esegs = {0}, asegs = {0};
  gmt_reader_t *r = NULL;
  gm_status_t st = gmt_reader_open(&r, trace_path, err);
  if (st) return st;
  if ((st = pick_conf(gmt_reader_header(r), conf, extra_conf, res, err))) {
    gmt_reader_close(r);
    return st;
  }
  char spec[1100];
  snprintf(spec, sizeof(spec), "pytorch:%s", res->conf);
  rec_drv_t drv[FID_MAX_DEV];
  memset(drv, 0, sizeof(drv));
  const rp_policy_ops_t *ops[FID_MAX_DEV] = {0};
  rp_policy_t *pol[FID_MAX_DEV] = {0};
  uint64_t req = 0, tcur = 0, tpeak = 0, ecur = 0;
  addr_map_t *map = NULL, *m, *tmp;
  gmt_event_t *reqs = NULL;
  size_t nreq = 0, capreq = 0;
  gmt_event_t ev;
  while (st == GM_OK && (st = gmt_reader_next(r, &ev, err)) == GM_OK) {
    if (ev.device >= FID_MAX_DEV) {
      st = gm_err_set(err, GM_ERR_UNSUPPORTED, "device %u: the harness replays at most %d devices",
                      ev.device, FID_MAX_DEV);
      break;
    }
    if (ev.flags & GMT_F_SYNTHETIC) res->synthetic++;
    unsigned op = ev.kind == GMT_EV_SEGMENT_ALLOC ? FID_SEG_ALLOC
                  : ev.kind == GMT_EV_SEGMENT_FREE ? FID_SEG_FREE
                  : ev.kind == GMT_EV_VMM_MAP      ? FID_MAP
                  : ev.kind == GMT_EV_VMM_UNMAP    ? FID_UNMAP
                                                   : 0;
    if (op) {
      /* The oracle. Synthetic initial segments are state, not decisions: they are not compared
       * (the replay's policy cannot be seeded with them), but they count towards the peak. */
      if (!(ev.flags & GMT_F_SYNTHETIC) && seq_push(&res->expected, op, ev.device, ev.size, req, ev.addr))
        st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
      if (op == FID_SEG_ALLOC && segs_add(&esegs, ev.addr, ev.size))
        st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
      if (op == FID_SEG_FREE) segs_kill(&esegs, ev.addr);
      if (op == FID_SEG_ALLOC || op == FID_MAP) {
        ecur += ev.size;
        if (ecur > res->expected_peak) res->expected_peak = ecur;
      } else {
        ecur -= ev.size;
      }
      continue;
    }
    if (ev.kind != GMT_EV_ALLOC && ev.kind != GMT_EV_FREE) continue;
    if (!pol[ev.device]) {
      rec_drv_t *d = &drv[ev.device];
      memset(d, 0, sizeof(*d));
      d->drv.ctx = d;
      d->drv.mem_alloc = d_mem_alloc;
      d->drv.mem_free = d_mem_free;
      d->drv.va_reserve = d_va_reserve;
      d->drv.va_release = d_va_release;
      d->drv.map = d_map;
      d->drv.unmap = d_unmap;
      d->drv.granularity = 2u << 20;
      d->drv.total_memory = total_memory;
      d->res = res;
      d->device = ev.device;
      d->next = ((uint64_t)ev.device + 1) << 44;
      d->total_cur = &tcur;
      d->total_peak = &tpeak;
      d->req = &req;
      d->segs = &asegs;
      d->addr_mode = addr_mode;
      if (addr_mode == FID_ADDR_DRIVER) {
        /* one address space per device, the first region's top 2^44 apart */
        rp_va_opts_t vo = {RP_VA_DRIVER, ((uint64_t)ev.device + 2) << 44, 2u << 20, 0, 0};
        if (!(d->va = rp_va_new(&vo))) {
          st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
          break;
        }
      }
      if ((st = rp_policy_create(spec, &d->drv, &ops[ev.device], &pol[ev.device], err))) {
        gm_err_wrap(err, "policy '%s'", spec);
        break;
      }
    }
    if (nreq == capreq) {
      size_t nc = capreq ? capreq * 2 : 1024;
      gmt_event_t *nr = realloc(reqs, nc * sizeof(*nr));
      if (!nr) {
        st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
        break;
      }
      reqs = nr;
      capreq = nc;
    }
    reqs[nreq++] = ev;
    uint64_t key = ev.addr | ((uint64_t)ev.device << 48);
    HASH_FIND(hh, map, &key, sizeof(key), m);
    if (ev.kind == GMT_EV_ALLOC) {
      uint64_t a = 0;
      gm_err_t e2;
      gm_status_t s2 = ops[ev.device]->alloc(pol[ev.device], ev.size, ev.stream, &a, &e2);
      if (s2 == GM_ERR_NOMEM) {
        res->ooms++;
      } else if (s2 != GM_OK) {
        st = gm_err_set(err, s2, "request #%llu (alloc %llu B): %s", (unsigned long long)req,
                        (unsigned long long)ev.size, e2.msg);
      } else if (m) {
        st = gm_err_set(err, GM_ERR_CORRUPT, "request #%llu: trace allocates 0x%llx twice",
                        (unsigned long long)req, (unsigned long long)ev.addr);
      } else if (!(m = malloc(sizeof(*m)))) {
        st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
      } else {
        uint64_t eo = 0, ao = 0;
        int64_t es = segs_find(&esegs, ev.addr, &eo), as = segs_find(&asegs, a, &ao);
        if (res->place_diverge < 0 && es >= 0 && (es != as || eo != ao)) {
          res->place_diverge = (int64_t)req;
          snprintf(res->place_detail, sizeof(res->place_detail),
                   "first block placed differently: request #%llu (alloc %llu B, stream %llu) at "
                   "segment #%lld + %llu in the snapshot, segment #%lld + %llu in the replay",
                   (unsigned long long)req, (unsigned long long)ev.size,
                   (unsigned long long)ev.stream, (long long)es, (unsigned long long)eo,
                   (long long)as, (unsigned long long)ao);
        }
        m->key = key;
        m->addr = a;
        m->size = ev.size;
        HASH_ADD(hh, map, key, sizeof(key), m);
      }
    } else if (m) { /* a free of something the policy failed to allocate is dropped */
      gm_err_t e2;
      gm_status_t s2 = ops[ev.device]->free(pol[ev.device], m->addr, &e2);
      if (s2 != GM_OK)
        st = gm_err_set(err, s2, "request #%llu (free 0x%llx): %s", (unsigned long long)req,
                        (unsigned long long)ev.addr, e2.msg);
      HASH_DEL(map, m);
      free(m);
    }
    for (int k = 0; k < FID_MAX_DEV && st == GM_OK; k++)
      if (drv[k].nomem && pol[k]) st = gm_err_set(err, GM_ERR_NOMEM, "out of memory");
    req++;
  }
  if (st == GM_END) st = GM_OK;
  res->requests = req;
  res->actual_peak = tpeak;
  if (st == GM_OK) compare(res, reqs, nreq);
  HASH_ITER(hh, map, m, tmp) {
    HASH_DEL(map, m);
    free(m);
  }
  for (int k = 0; k < FID_MAX_DEV; k++) {
    if (pol[k]) ops[k]->destroy(pol[k]);
    rp_va_free_all(drv[k].va);
  }
  free(reqs);
  free(esegs.v);
  free(asegs.v);
  gmt_reader_close(r);
  return st;
}
