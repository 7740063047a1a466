/* gpureplay_memviz.c: records one policy's simulated run for the memory_viz export
 * (gpureplay_memviz.h) and drives the export, device by device.
 *
 * The recording is a tap (rp_policy_tap_t) that the engine puts between itself and the policy:
 * the policy is created over a driver of the tap's own that forwards to the engine's counting
 * driver, so the tap sees every segment the policy takes or gives back, in order, with the
 * request that caused it; and the engine calls the tap's ops, which forward to the policy and
 * note each block it hands out (its address, the size asked, the block's own size from the
 * policy's allocated bytes) and each one it takes back. The engine is fed one event at a time
 * so that each entry carries its trace event's time, stream and callsite, and so that a
 * free_requested of the trace (a free that waits on stream events) is noted where the program
 * asked it, before the policy gets the block back.
 *
 * What the engine does at the end (release_all: everything back to the driver) is not the
 * program's and is not recorded: the final state is the one after the trace's last event. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "replay/tool/export/export_memviz_internal.h"
#include "replay/engine/rp_engine.h"

/* ---- the recorded run ------------------------------------------------------------------- */

void mv_run_init(mv_run_t *r, int device, uint64_t capacity) {
  memset(r, 0, sizeof *r);
  r->device = device;
  r->capacity = capacity;
  rp_map_init(&r->trace_to_block);
}

void mv_run_free(mv_run_t *r) {
  mv_block_t *b, *bt;
  HASH_ITER(hh, r->blocks, b, bt) {
    HASH_DEL(r->blocks, b);
    free(b);
  }
  mv_seg_t *s, *st;
  HASH_ITER(hh, r->segs, s, st) {
    HASH_DEL(r->segs, s);
    free(s);
  }
  free(r->maps);
  free(r->ev);
  rp_map_free(&r->trace_to_block);
  memset(r, 0, sizeof *r);
}

static void oom_host(mv_run_t *r) {
  if (r->st == GM_OK) r->st = GM_ERR_NOMEM;
}

static uint64_t stream_of(uint64_t s) { return s == GMT_STREAM_NONE ? 0 : s; }

static void push(mv_run_t *r, int action, uint64_t addr, uint64_t size, uint64_t stream, uint32_t site) {
  if (r->n == r->cap) {
    size_t nc = r->cap ? 2 * r->cap : 4096;
    mv_ev_t *nv = realloc(r->ev, nc * sizeof *nv);
    if (!nv) {
      oom_host(r);
      return;
    }
    r->ev = nv;
    r->cap = nc;
  }
  mv_ev_t *e = &r->ev[r->n++];
  e->ts_ns = r->cur ? r->cur->ts_ns : 0;
  e->addr = addr;
  e->size = size;
  e->stream = stream_of(stream);
  e->site = site;
  e->action = (uint8_t)action;
}

static void reserve(mv_run_t *r, uint64_t size, int grow) {
  if (!grow) {
    r->reserved = size > r->reserved ? 0 : r->reserved - size;
    return;
  }
  r->reserved += size;
  if (r->reserved > r->peak_reserved) {
    r->peak_reserved = r->reserved;
    r->peak_pending = 1;
  }
}

/* Mapped pages: a sorted array of disjoint runs; a run that touches another of the same stream
 * joins it (one expandable segment per stream, as PyTorch keeps them). */
static int maps_insert(mv_run_t *r, size_t i, uint64_t addr, uint64_t size, uint64_t stream, uint32_t site) {
  if (r->n_maps == r->cap_maps) {
    size_t nc = r->cap_maps ? 2 * r->cap_maps : 16;
    mv_seg_t *nm = realloc(r->maps, nc * sizeof *nm);
    if (!nm) {
      oom_host(r);
      return -1;
    }
    r->maps = nm;
    r->cap_maps = nc;
  }
  memmove(&r->maps[i + 1], &r->maps[i], (r->n_maps - i) * sizeof *r->maps);
  memset(&r->maps[i], 0, sizeof r->maps[i]);
  r->maps[i].addr = addr;
  r->maps[i].size = size;
  r->maps[i].stream = stream;
  r->maps[i].site = site;
  r->maps[i].expandable = 1;
  r->n_maps++;
  return 0;
}

static void maps_add(mv_run_t *r, uint64_t addr, uint64_t size, uint64_t stream, uint32_t site) {
  size_t i = 0;
  while (i < r->n_maps && r->maps[i].addr < addr) i++;
  int join_prev = i > 0 && r->maps[i - 1].addr + r->maps[i - 1].size == addr && r->maps[i - 1].stream == stream;
  int join_next = i < r->n_maps && addr + size == r->maps[i].addr && r->maps[i].stream == stream;
  if (join_prev) {
    r->maps[i - 1].size += size;
    if (join_next) {
      r->maps[i - 1].size += r->maps[i].size;
      memmove(&r->maps[i], &r->maps[i + 1], (r->n_maps - i - 1) * sizeof *r->maps);
      r->n_maps--;
    }
  } else if (join_next) {
    r->maps[i].addr = addr;
    r->maps[i].size += size;
  } else {
    maps_insert(r, i, addr, size, stream, site);
  }
}

/* Cut [addr, addr + size) out of the runs; returns the stream of the first run it touched. */
static uint64_t maps_remove(mv_run_t *r, uint64_t addr, uint64_t size) {
  uint64_t end = addr + size, stream = 0;
  int found = 0;
  for (size_t i = 0; i < r->n_maps;) {
    mv_seg_t *m = &r->maps[i];
    uint64_t me = m->addr + m->size;
    if (me <= addr || m->addr >= end) {
      i++;
      continue;
    }
    if (!found) stream = m->stream;
    found = 1;
    if (m->addr < addr && me > end) { /* a hole in the middle: the run splits in two */
      m->size = addr - m->addr;
      maps_insert(r, i + 1, end, me - end, m->stream, m->site);
      break;
    }
    if (m->addr < addr) {
      m->size = addr - m->addr;
      i++;
    } else if (me > end) {
      m->size = me - end;
      m->addr = end;
      i++;
    } else {
      memmove(m, m + 1, (r->n_maps - i - 1) * sizeof *m);
      r->n_maps--;
    }
  }
  return stream;
}

/* ---- the tap ------------------------------------------------------------------------------ */

typedef struct tap {
  const rp_policy_ops_t *ops; /* the policy's */
  rp_policy_t *inner;
  mv_run_t *run;
  rp_driver_t down; /* the engine's counting driver */
  rp_driver_t drv;  /* what the policy calls: this file's, forwarding to down */
} tap_t;

static gm_status_t d_mem_alloc(void *ctx, uint64_t size, uint64_t *addr) {
  tap_t *t = ctx;
  mv_run_t *r = t->run;
  gm_status_t st = t->down.mem_alloc(t->down.ctx, size, addr);
  if (st != GM_OK || r->finished) return st;
  mv_seg_t *s = calloc(1, sizeof *s);
  if (!s) {
    oom_host(r);
    return st;
  }
  s->addr = *addr;
  s->size = size;
  s->stream = stream_of(r->cur_stream);
  s->site = r->cur_site;
  HASH_ADD(hh, r->segs, addr, sizeof s->addr, s);
  push(r, MV_SEGMENT_ALLOC, *addr, size, r->cur_stream, r->cur_site);
  reserve(r, size, 1);
  return st;
}

static gm_status_t d_mem_free(void *ctx, uint64_t addr, uint64_t size) {
  tap_t *t = ctx;
  mv_run_t *r = t->run;
  gm_status_t st = t->down.mem_free(t->down.ctx, addr, size);
  if (st != GM_OK || r->finished) return st;
  mv_seg_t *s = NULL;
  HASH_FIND(hh, r->segs, &addr, sizeof addr, s);
  uint64_t stream = s ? s->stream : 0;
  uint32_t site = s ? s->site : 0;
  if (s) {
    HASH_DEL(r->segs, s);
    free(s);
  }
  push(r, MV_SEGMENT_FREE, addr, size, stream, site);
  reserve(r, size, 0);
  return st;
}

static gm_status_t d_map(void *ctx, uint64_t addr, uint64_t size) {
  tap_t *t = ctx;
  mv_run_t *r = t->run;
  gm_status_t st = t->down.map(t->down.ctx, addr, size);
  if (st != GM_OK || r->finished) return st;
  maps_add(r, addr, size, stream_of(r->cur_stream), r->cur_site);
  push(r, MV_SEGMENT_MAP, addr, size, r->cur_stream, r->cur_site);
  reserve(r, size, 1);
  return st;
}

static gm_status_t d_unmap(void *ctx, uint64_t addr, uint64_t size) {
  tap_t *t = ctx;
  mv_run_t *r = t->run;
  gm_status_t st = t->down.unmap(t->down.ctx, addr, size);
  if (st != GM_OK || r->finished) return st;
  uint64_t stream = maps_remove(r, addr, size);
  push(r, MV_SEGMENT_UNMAP, addr, size, stream, 0);
  reserve(r, size, 0);
  return st;
}

static gm_status_t d_va_reserve(void *ctx, uint64_t size, uint64_t *addr) {
  tap_t *t = ctx;
  return t->down.va_reserve(t->down.ctx, size, addr);
}
static gm_status_t d_va_release(void *ctx, uint64_t addr, uint64_t size) {
  tap_t *t = ctx;
  return t->down.va_release(t->down.ctx, addr, size);
}
static gm_status_t d_alloc_async(void *ctx, uint64_t size, uint64_t stream, uint64_t *addr) {
  tap_t *t = ctx;
  return t->down.alloc_async(t->down.ctx, size, stream, addr);
}
static gm_status_t d_free_async(void *ctx, uint64_t addr, uint64_t stream) {
  tap_t *t = ctx;
  return t->down.free_async(t->down.ctx, addr, stream);
}
static gm_status_t d_pool_trim(void *ctx, uint64_t keep) {
  tap_t *t = ctx;
  return t->down.pool_trim(t->down.ctx, keep);
}

static gm_status_t t_alloc(rp_policy_t *p, uint64_t size, uint64_t stream, uint64_t *addr, gm_err_t *err) {
  tap_t *t = (tap_t *)p;
  mv_run_t *r = t->run;
  rp_policy_stats_t s0, s1;
  t->ops->stats(t->inner, &s0);
  r->cur_stream = stream;
  r->cur_site = r->cur ? r->cur->callsite : 0;
  gm_status_t st = t->ops->alloc(t->inner, size, stream, addr, err);
  if (r->finished) return st;
  if (st == GM_ERR_NOMEM) {
    uint64_t free_bytes = r->capacity > r->reserved ? r->capacity - r->reserved : 0;
    push(r, MV_OOM, free_bytes, size, stream, r->cur_site);
    r->ooms++;
    if (r->peak_pending) { /* the peak was reached on the way to this failure */
      r->peak_pending = 0;
      r->peak_at = r->n;
    }
    return st;
  }
  if (st != GM_OK) return st;
  t->ops->stats(t->inner, &s1);
  mv_block_t *b = calloc(1, sizeof *b);
  if (!b) {
    oom_host(r);
    return st;
  }
  b->addr = *addr;
  b->requested = size;
  /* the block's own size: what the policy's allocated bytes grew by (its rounding) */
  b->size = s1.allocated_bytes > s0.allocated_bytes ? s1.allocated_bytes - s0.allocated_bytes : size;
  if (b->size < size) b->size = size;
  b->stream = stream_of(stream);
  b->site = r->cur_site;
  b->trace_addr = r->cur ? r->cur->addr : 0;
  mv_block_t *old = NULL;
  HASH_FIND(hh, r->blocks, addr, sizeof *addr, old);
  if (old) { /* a policy never hands out a live address twice; keep the table sane if one did */
    HASH_DEL(r->blocks, old);
    free(old);
  }
  HASH_ADD(hh, r->blocks, addr, sizeof b->addr, b);
  if (r->cur && rp_map_put(&r->trace_to_block, r->cur->addr, *addr, 0) < 0) oom_host(r);
  push(r, MV_ALLOC, *addr, size, stream, b->site);
  r->requested += size;
  if (r->requested > r->peak_requested) r->peak_requested = r->requested;
  r->allocated = s1.allocated_bytes;
  if (r->allocated > r->peak_allocated) r->peak_allocated = r->allocated;
  if (r->peak_pending) { /* this request took the reserved bytes to their peak */
    r->peak_pending = 0;
    r->peak_at = r->n;
  }
  return st;
}

static gm_status_t t_free(rp_policy_t *p, uint64_t addr, gm_err_t *err) {
  tap_t *t = (tap_t *)p;
  mv_run_t *r = t->run;
  mv_block_t *b = NULL;
  HASH_FIND(hh, r->blocks, &addr, sizeof addr, b);
  if (b && !r->finished) {
    if (!b->pending) push(r, MV_FREE_REQUESTED, b->addr, b->requested, b->stream, b->site);
    push(r, MV_FREE_COMPLETED, b->addr, b->requested, b->stream, b->site);
    r->requested -= b->requested < r->requested ? b->requested : r->requested;
    rp_map_entry_t *m = rp_map_get(&r->trace_to_block, b->trace_addr);
    if (m && m->a == b->addr) rp_map_remove(&r->trace_to_block, m);
    r->cur_stream = b->stream;
    r->cur_site = b->site;
    HASH_DEL(r->blocks, b);
    free(b);
  }
  gm_status_t st = t->ops->free(t->inner, addr, err);
  if (st == GM_OK && !r->finished) {
    rp_policy_stats_t s;
    t->ops->stats(t->inner, &s);
    r->allocated = s.allocated_bytes;
  }
  return st;
}

static gm_status_t t_empty_cache(rp_policy_t *p, gm_err_t *err) {
  tap_t *t = (tap_t *)p;
  t->run->cur_stream = 0;
  t->run->cur_site = 0;
  return t->ops->empty_cache(t->inner, err);
}

static gm_status_t t_release_all(rp_policy_t *p, gm_err_t *err) {
  tap_t *t = (tap_t *)p;
  t->run->finished = 1;
  return t->ops->release_all(t->inner, err);
}

static void t_destroy(rp_policy_t *p) {
  tap_t *t = (tap_t *)p;
  if (!t) return;
  t->ops->destroy(t->inner);
  free(t);
}

static void t_stats(const rp_policy_t *p, rp_policy_stats_t *out) {
  const tap_t *t = (const tap_t *)p;
  t->ops->stats(t->inner, out);
}

static gm_status_t t_check(const rp_policy_t *p, gm_err_t *err) {
  const tap_t *t = (const tap_t *)p;
  return t->ops->check ? t->ops->check(t->inner, err) : GM_OK;
}

static const char *t_spec(const rp_policy_t *p) {
  const tap_t *t = (const tap_t *)p;
  return t->ops->spec(t->inner);
}

static int t_oom_report(const rp_policy_t *p, uint64_t size, uint64_t stream, rp_oom_report_t *out) {
  const tap_t *t = (const tap_t *)p;
  return t->ops->oom_report ? t->ops->oom_report(t->inner, size, stream, out) : 0;
}

static const rp_policy_ops_t kTapOps = {
    "memviz-tap", "records a policy's run for gpureplay --export-snapshot",
    NULL, t_destroy, t_alloc, t_free, t_empty_cache, t_release_all, t_stats, t_check, t_spec, t_oom_report,
};

static gm_status_t tap_create(void *ctx, const rp_policy_ops_t *inner, const char *conf, const rp_driver_t *drv,
                              const rp_policy_ops_t **ops, rp_policy_t **out, gm_err_t *err) {
  tap_t *t = calloc(1, sizeof *t);
  if (!t) return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  t->ops = inner;
  t->run = ctx;
  t->down = *drv;
  t->drv = *drv;
  t->drv.ctx = t;
  t->drv.mem_alloc = drv->mem_alloc ? d_mem_alloc : NULL;
  t->drv.mem_free = drv->mem_free ? d_mem_free : NULL;
  t->drv.map = drv->map ? d_map : NULL;
  t->drv.unmap = drv->unmap ? d_unmap : NULL;
  t->drv.va_reserve = drv->va_reserve ? d_va_reserve : NULL;
  t->drv.va_release = drv->va_release ? d_va_release : NULL;
  t->drv.alloc_async = drv->alloc_async ? d_alloc_async : NULL;
  t->drv.free_async = drv->free_async ? d_free_async : NULL;
  t->drv.pool_trim = drv->pool_trim ? d_pool_trim : NULL;
  gm_status_t st = inner->create(conf, &t->drv, &t->inner, err);
  if (st != GM_OK) {
    free(t);
    return st;
  }
  *ops = &kTapOps;
  *out = (rp_policy_t *)t;
  return GM_OK;
}

/* ---- one device's run ----------------------------------------------------------------------- */

/* A free the program asked for that waits on stream events: noted now, completed when the
 * policy gets the block back. */
static void note_free_requested(mv_run_t *r, const gmt_event_t *ev) {
  if (ev->kind != GMT_EV_FREE_REQUESTED || ev->device != (unsigned)r->device) return;
  rp_map_entry_t *m = rp_map_get(&r->trace_to_block, ev->addr);
  if (!m) return;
  mv_block_t *b = NULL;
  uint64_t a = m->a;
  HASH_FIND(hh, r->blocks, &a, sizeof a, b);
  if (!b || b->pending) return;
  push(r, MV_FREE_REQUESTED, b->addr, b->requested, b->stream, b->site);
  b->pending = 1;
}

static gm_status_t run_device(const gr_config_t *cfg, const gr_loaded_t *lt, const char *spec, int engine_device,
                              uint64_t capacity, uint64_t total_memory, mv_run_t *run, rp_result_t *res,
                              gm_err_t *err) {
  char name[64];
  size_t n = strcspn(spec, ":");
  snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), spec);
  const char *conf = spec[n] == ':' ? spec + n + 1 : "";
  const rp_policy_ops_t *ops = rp_policy_find(name);
  if (!ops) return gm_err_set(err, GM_ERR_INVAL, "unknown policy '%s'", name);
  rp_backend_t *b = NULL;
  rp_sim_opts_t so = {capacity, cfg->granularity, total_memory, RP_POOL_HEAP, 0, cfg->addresses};
  gm_status_t st = rp_sim_backend_create(&so, &b, err);
  if (st != GM_OK) return st;
  rp_policy_tap_t tap = {run, tap_create};
  /* the engine's options as gpureplay's runner sets them (gpureplay_run.c run_job) */
  rp_engine_opts_t eo = {engine_device, cfg->check, capacity, cfg->serve_failed, lt->info.vmm_requests,
                         cfg->event_timing, cfg->late_mallocs, gr_count_other(cfg, &lt->info), &tap};
  rp_engine_t *e = NULL;
  st = rp_engine_create(ops, conf, b, &eo, &e, err);
  if (st == GM_OK) st = rp_engine_set_external_sync(e, lt->info.external_sync, err);
  for (size_t i = 0; st == GM_OK && i < lt->n_evs; i++) {
    run->cur = &lt->evs[i];
    note_free_requested(run, &lt->evs[i]);
    st = rp_engine_feed(e, &lt->evs[i], 1, err);
    if (st == GM_OK && run->st != GM_OK) st = gm_err_set(err, run->st, "out of host memory for the export");
  }
  run->cur = NULL;
  if (st == GM_OK) st = rp_engine_finish(e, res, err);
  if (st != GM_OK) gm_err_wrap(err, "policy '%s'", spec);
  rp_engine_destroy(e);
  b->destroy(b);
  return st;
}

static int by_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

const char *gr_memviz_refuse(const char *spec) {
  if (strncmp(spec, "async", 5) == 0 && (spec[5] == '\0' || spec[5] == ':'))
    return "'async' is the driver's stream-ordered pool: the simulator models how much it reserves, "
           "not its segments, so there is no segment map to export (export pytorch, bfc, prealloc or direct)";
  return NULL;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* One device: run (again within the recorded failure's capacity when there was one, as
 * gpureplay does), then its trace written and its final state kept. */
static gm_status_t export_device(const gr_config_t *cfg, gr_loaded_t *lt, const char *spec, int dev, int engine_dev,
                                 mv_out_t *o, gr_memviz_device_t *ds, char *policy, size_t policy_n,
                                 gm_err_t *err) {
  rp_result_t *res = calloc(1, sizeof *res);
  if (!res) return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  uint64_t total = cfg->device_memory ? cfg->device_memory : cfg->capacity ? cfg->capacity : lt->total_memory;
  mv_run_t run;
  mv_run_init(&run, dev, cfg->capacity);
  gm_status_t st = run_device(cfg, lt, spec, engine_dev, cfg->capacity, total, &run, res, err);
  char note[512];
  uint64_t cap = st == GM_OK && !cfg->capacity ? gr_failure_capacity(&lt->info, res, note, sizeof note) : 0;
  if (cap) {
    uint64_t dm = cfg->device_memory ? cfg->device_memory : lt->info.gpu_total_mem;
    mv_run_free(&run);
    mv_run_init(&run, dev, cap);
    st = run_device(cfg, lt, spec, engine_dev, cap, dm ? dm : cap, &run, res, err);
  }
  if (st == GM_OK && run.peak_reserved != res->peak_reserved_bytes)
    st = gm_err_set(err, GM_ERR_CORRUPT, "device %d: the export saw a peak of %" PRIu64 " reserved bytes, the engine %" PRIu64,
                    dev, run.peak_reserved, res->peak_reserved_bytes);
  if (st == GM_OK) {
    mv_out_trace(o, &run);
    st = mv_out_keep(o, &run, err);
    ds->device = dev;
    ds->events = run.n + (run.peak_at ? 1 : 0);
    ds->peak_reserved = run.peak_reserved;
    ds->peak_requested = run.peak_requested;
    ds->peak_allocated = run.peak_allocated;
    ds->end_segments = HASH_COUNT(run.segs) + run.n_maps;
    ds->end_blocks = HASH_COUNT(run.blocks);
    ds->ooms = run.ooms;
    snprintf(policy, policy_n, "%s", res->policy);
  }
  mv_run_free(&run);
  free(res);
  return st;
}

gm_status_t gr_memviz_export(const gr_config_t *cfg, const char *path, const char *spec,
                             const char *out_path, gr_memviz_stats_t *stats, gm_err_t *err) {
  double t0 = now_s();
  memset(stats, 0, sizeof *stats);
  snprintf(stats->policy, sizeof stats->policy, "%s", spec);
  const char *why = gr_memviz_refuse(spec);
  if (why) return gm_err_set(err, GM_ERR_INVAL, "%s", why);
  int devs[GR_MAX_DEVICES], nd = 0;
  gm_status_t st = gr_trace_devices(path, devs, GR_MAX_DEVICES, &nd, err);
  if (st != GM_OK) return st;
  if (nd > GR_MAX_DEVICES) nd = GR_MAX_DEVICES;
  qsort(devs, (size_t)nd, sizeof *devs, by_int);
  gr_loaded_t lt;
  mv_out_t o;
  memset(&o, 0, sizeof o);
  gm_out_t *file = NULL;
  st = gr_trace_load(cfg, path, &lt, err);
  if (st == GM_OK) st = mv_out_sites(&o, path, err);
  if (st == GM_OK) st = gm_out_open(&file, out_path, err);
  if (st == GM_OK) {
    mv_out_begin(&o, gm_out_file(file), lt.info.start_time_ns);
    int next = 0; /* device_traces is indexed by ordinal: empty lists for the devices between */
    for (int i = 0; i < nd && st == GM_OK; i++) {
      for (; next < devs[i]; next++) mv_out_empty_trace(&o);
      next = devs[i] + 1;
      st = export_device(cfg, &lt, spec, devs[i], nd > 1 ? devs[i] : -1, &o, &stats->dev[i], stats->policy,
                         sizeof stats->policy, err);
      stats->n_devices = i + 1;
    }
    if (st == GM_OK) {
      stats->callsites = o.n_sites;
      stats->seconds = now_s() - t0;
      st = mv_out_end(&o, path, spec, stats, err);
    }
    stats->bytes = o.w.bytes;
    if (st == GM_OK) st = gm_out_commit(file, err);
    else gm_out_abort(file);
  }
  mv_out_free(&o);
  gr_loaded_free(&lt);
  stats->seconds = now_s() - t0;
  return st;
}

const char *gr_memviz_describe(const gr_memviz_stats_t *st, const char *out_path, char *buf, size_t n) {
  char size[32], peak[32];
  gm_format_size(st->bytes, size, sizeof size);
  if (st->n_devices == 0) {
    snprintf(buf, n, "wrote %s (%s, no device allocates: an empty snapshot, %s)", out_path, st->policy, size);
    return buf;
  }
  gm_format_size(st->dev[0].peak_reserved, peak, sizeof peak);
  snprintf(buf, n, "wrote %s (%s, %d device%s, %" PRIu64 " entries, %s, peak reserved %s on device %d)", out_path,
           st->policy, st->n_devices, st->n_devices == 1 ? "" : "s", st->dev[0].events, size, peak, st->dev[0].device);
  return buf;
}
