/* gmt_owners.c: who holds each byte a process mapped on a device, and when the device held
 * the most: the one definition gpurec's summary, `gpuanalyze info`, the database and the
 * report share (issue 17, item 3).
 *
 * Owners. The framework's allocator holds its requests (ALLOC of device memory) and, where the
 * trace has them, its reservation (SEGMENT_ALLOC, and the VMM maps of PyTorch's expandable
 * segments in a torch-mode trace); at a moment it holds the larger of the two (the requests
 * live inside the segments). Everything else is another owner's: a VMM map that is not a
 * request (NCCL maps its buffers so) and, in a requests-mode trace that holds stream-ordered
 * requests, a synchronous allocation (a library's cudaMalloc beside the framework, as the
 * replay counts it: replay/engine/engine.c "External memory"), and in a torch-history trace every
 * event flagged GMT_F_EXTERNAL (the CUPTI side of the merge: another library's driver calls,
 * SPEC.md 3.2). Such memory is named by its callsite
 * when the recorder wrote "[libname]" (no Python frame: the library that called the driver),
 * else "unknown driver allocations". A callsite "[lib]" on any event makes it that library's.
 * The CUDA context and the module code the driver loads are in no allocation event: the
 * recorder samples the driver's count at context creation and at the end and writes what it
 * counted beyond the trace's own maps as DEVICE_USAGE events (SPEC.md 5.4.1); they are kept
 * per device apart from the owners above (the first, the last and the largest sample), NVML's
 * per-process samples preferred over the whole device's (which count other processes too).
 *
 * Stream: the per-event work is one hash lookup (by device and address) for events that add
 * or remove bytes, and a per-device sum; entries are recycled, so a long trace costs no malloc
 * per event. A synchronous allocation before the first stream-ordered one counts as the
 * framework's (the order a recorded PyTorch/TF run has: the pool is created first). */
#include <stdlib.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/gm_base.h"

/* gm_key_hash (base): uthash's Jenkins hash cost more than the table over these short keys */
#define HASH_FUNCTION(keyptr, keylen, hashv) ((hashv) = gm_key_hash((keyptr), (size_t)(keylen)))
#include <uthash.h>

#include "formats/gmt.h"

typedef struct blk {
  uint64_t addr;
  uint16_t dev;
  uint16_t space; /* 0 ALLOC/FREE, 1 SEGMENT_*, 2 VMM_MAP/UNMAP: a segment and its first block
                     share an address */
  uint16_t pad[2];
  uint64_t size;
  int owner;
  UT_hash_handle hh;
} blk_t;
#define BLK_KEYLEN (offsetof(blk_t, pad) - offsetof(blk_t, addr))
_Static_assert(offsetof(blk_t, dev) == 8 && offsetof(blk_t, space) == 10 && BLK_KEYLEN == 12, "find's key layout");

typedef struct cs_ent {
  uint32_t id;
  int owner; /* -1: not a library's callsite */
  UT_hash_handle hh;
} cs_ent_t;

struct gmt_owners {
  gmt_owners_result_t r;
  unsigned mode;
  int vmm_requests; /* XLA's platform allocator: whole-reservation maps are the requests */
  int async_seen;
  blk_t *live, *spare;
  cs_ent_t *cs;
  uint64_t cur[GMT_OWNER_DEVICES][GMT_OWNERS_MAX];
  uint64_t other[GMT_OWNER_DEVICES]; /* sum of cur[d][k] for k >= GMT_OWNER_UNKNOWN */
  uint64_t req_live, req_peak;       /* ALLOCs of all owners, all devices: "peak live" */
  /* DEVICE_USAGE samples per device and method (index GMT_USAGE_* - 1) */
  struct usage {
    unsigned n;
    uint64_t first, last, max;
  } usage[GMT_OWNER_DEVICES][2];
};

gm_status_t gmt_owners_new(gmt_owners_t **out, const gmt_header_t *h, gm_err_t *err) {
  gmt_owners_t *o = calloc(1, sizeof *o);
  if (!o) return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
  o->mode = h ? h->capture_mode : GMT_CAPTURE_UNKNOWN;
  const char *xla = h ? gmt_header_kv_get(h, "XLA_PYTHON_CLIENT_ALLOCATOR") : NULL;
  unsigned fw = h ? gmt_header_frameworks(h) : 0;
  o->vmm_requests = xla && !strcmp(xla, "platform") && (!fw || (fw & GMT_FW_JAX));
  snprintf(o->r.names[GMT_OWNER_REQUESTS], sizeof o->r.names[0], "framework allocator: requests");
  snprintf(o->r.names[GMT_OWNER_RESERVED], sizeof o->r.names[0], "framework allocator: reserved");
  snprintf(o->r.names[GMT_OWNER_UNKNOWN], sizeof o->r.names[0], "unknown driver allocations");
  o->r.n_owners = GMT_OWNER_FIRST_LIB;
  *out = o;
  return GM_OK;
}

void gmt_owners_free(gmt_owners_t *o) {
  if (!o) return;
  blk_t *b, *t;
  HASH_ITER(hh, o->live, b, t) {
    HASH_DEL(o->live, b);
    free(b);
  }
  while (o->spare) {
    blk_t *n = o->spare->hh.next;
    free(o->spare);
    o->spare = n;
  }
  cs_ent_t *c, *ct;
  HASH_ITER(hh, o->cs, c, ct) {
    HASH_DEL(o->cs, c);
    free(c);
  }
  free(o);
}

int gmt_owners_library_name(const char *callsite, char *name, size_t n) {
  if (!callsite || callsite[0] != '[') return 0;
  const char *end = strchr(callsite, ']');
  if (!end || end == callsite + 1 || end[1] != '\0') return 0;
  size_t len = (size_t)(end - callsite - 1);
  if (memchr(callsite + 1, '[', len)) return 0;
  snprintf(name, n, "%.*s", (int)len, callsite + 1);
  return 1;
}

/* The library owner a callsite names, or -1; looked up once per callsite id. */
static int lib_owner(gmt_owners_t *o, uint32_t id, gmt_string_fn str, void *ctx) {
  if (id == GMT_NO_STRING || !str) return -1;
  cs_ent_t *c;
  HASH_FIND(hh, o->cs, &id, sizeof id, c);
  if (c) return c->owner;
  char name[GMT_OWNER_NAME];
  int owner = -1;
  if (gmt_owners_library_name(str(ctx, id), name, sizeof name)) {
    for (int k = GMT_OWNER_FIRST_LIB; k < o->r.n_owners; k++)
      if (!strcmp(o->r.names[k], name)) owner = k;
    if (owner < 0 && o->r.n_owners < GMT_OWNERS_MAX) {
      owner = o->r.n_owners++;
      snprintf(o->r.names[owner], sizeof o->r.names[0], "%s", name);
    } else if (owner < 0) {
      owner = GMT_OWNER_UNKNOWN; /* past GMT_OWNERS_MAX libraries: not named */
    }
  }
  if ((c = calloc(1, sizeof *c))) { /* a cache: losing an entry under OOM only costs a lookup */
    c->id = id;
    c->owner = owner;
    HASH_ADD(hh, o->cs, id, sizeof c->id, c);
  }
  return owner;
}

static int history_mode(unsigned mode) { return mode == GMT_CAPTURE_TORCH || mode == GMT_CAPTURE_TORCH_HISTORY; }

int gmt_owners_of(gmt_owners_t *o, const gmt_event_t *ev, gmt_string_fn str, void *ctx) {
  if (ev->mem_kind != GMT_MEM_DEVICE && ev->mem_kind != GMT_MEM_UNKNOWN) return -1;
  if (ev->flags & GMT_F_EXTERNAL) { /* not the allocator's whose requests the trace holds */
    if (ev->kind != GMT_EV_ALLOC && ev->kind != GMT_EV_VMM_MAP && ev->kind != GMT_EV_SEGMENT_ALLOC) return -1;
    int lib = lib_owner(o, ev->callsite, str, ctx);
    return lib >= 0 ? lib : GMT_OWNER_UNKNOWN;
  }
  switch (ev->kind) {
    case GMT_EV_ALLOC: {
      if (ev->flags & GMT_F_ASYNC) {
        o->async_seen = 1;
        return GMT_OWNER_REQUESTS;
      }
      if (history_mode(o->mode)) return GMT_OWNER_REQUESTS; /* PyTorch's history */
      int lib = lib_owner(o, ev->callsite, str, ctx);
      if (lib >= 0) return lib;
      return o->mode == GMT_CAPTURE_REQUESTS && o->async_seen ? GMT_OWNER_UNKNOWN : GMT_OWNER_REQUESTS;
    }
    case GMT_EV_SEGMENT_ALLOC:
      return GMT_OWNER_RESERVED;
    case GMT_EV_VMM_MAP: {
      int lib = lib_owner(o, ev->callsite, str, ctx);
      if (lib >= 0) return lib;
      if (o->mode == GMT_CAPTURE_REQUESTS)
        return o->vmm_requests && !o->async_seen ? GMT_OWNER_REQUESTS : GMT_OWNER_UNKNOWN;
      return GMT_OWNER_RESERVED; /* expandable segments (torch, torch-history), the allocator's own (native) */
    }
    default:
      return -1;
  }
}

static uint64_t fw_bytes(const uint64_t *cur) {
  return cur[GMT_OWNER_REQUESTS] > cur[GMT_OWNER_RESERVED] ? cur[GMT_OWNER_REQUESTS] : cur[GMT_OWNER_RESERVED];
}

static int dev_slot(gmt_owners_t *o, uint16_t device) {
  for (int i = 0; i < o->r.n_devices; i++)
    if (o->r.dev[i].device == device) return i;
  if (o->r.n_devices >= GMT_OWNER_DEVICES) return -1;
  o->r.dev[o->r.n_devices].device = device;
  return o->r.n_devices++;
}

static void change(gmt_owners_t *o, int owner, uint16_t device, uint16_t space, uint64_t size, int add) {
  int d = dev_slot(o, device);
  if (space == 0) { /* every live request of device memory, whoever asked: `info`'s peak live */
    o->req_live = add ? o->req_live + size : o->req_live - (size < o->req_live ? size : o->req_live);
    if (o->req_live > o->req_peak) o->req_peak = o->req_live;
  }
  if (d < 0) return;
  uint64_t *cur = o->cur[d];
  gmt_owner_dev_t *od = &o->r.dev[d];
  if (add) {
    cur[owner] += size;
    if (owner >= GMT_OWNER_UNKNOWN) o->other[d] += size;
    if (cur[owner] > od->peak[owner]) od->peak[owner] = cur[owner];
    uint64_t total = fw_bytes(cur) + o->other[d];
    if (total > od->peak_mapped) {
      od->peak_mapped = total;
      memcpy(od->at_peak, cur, sizeof od->at_peak);
    }
  } else {
    if (size > cur[owner]) size = cur[owner];
    cur[owner] -= size;
    if (owner >= GMT_OWNER_UNKNOWN) o->other[d] -= size;
  }
}

static uint16_t space_of(unsigned kind) {
  return kind == GMT_EV_SEGMENT_ALLOC || kind == GMT_EV_SEGMENT_FREE ? 1
         : kind == GMT_EV_VMM_MAP || kind == GMT_EV_VMM_UNMAP      ? 2
                                                                   : 0;
}

static blk_t *find(gmt_owners_t *o, const gmt_event_t *ev) {
  struct { /* the key's bytes as blk_t lays them out (BLK_KEYLEN) */
    uint64_t addr;
    uint16_t dev, space;
  } k = {ev->addr, ev->device, (uint16_t)space_of(ev->kind)};
  blk_t *b = NULL;
  HASH_FIND(hh, o->live, &k, BLK_KEYLEN, b);
  return b;
}

static void end_block(gmt_owners_t *o, blk_t *b) {
  change(o, b->owner, b->dev, b->space, b->size, 0);
  HASH_DEL(o->live, b);
  b->hh.next = o->spare;
  o->spare = b;
}

static void usage_sample(gmt_owners_t *o, const gmt_event_t *ev) {
  if (ev->addr != GMT_USAGE_PROCESS && ev->addr != GMT_USAGE_DEVICE) return; /* a newer method */
  int d = dev_slot(o, ev->device);
  if (d < 0) return;
  struct usage *u = &o->usage[d][ev->addr - 1];
  if (!u->n++) u->first = ev->size;
  u->last = ev->size;
  if (ev->size > u->max) u->max = ev->size;
  const struct usage *p = &o->usage[d][0], *use = p->n ? p : &o->usage[d][1];
  gmt_owner_dev_t *od = &o->r.dev[d];
  od->context_method = p->n ? GMT_USAGE_PROCESS : GMT_USAGE_DEVICE;
  od->context_samples = use->n;
  od->context_first = use->first;
  od->context_last = use->last;
  od->context_max = use->max;
}

gm_status_t gmt_owners_event(gmt_owners_t *o, const gmt_event_t *ev, gmt_string_fn str, void *ctx,
                             gm_err_t *err) {
  switch (ev->kind) {
    case GMT_EV_DEVICE_USAGE:
      usage_sample(o, ev);
      return GM_OK;
    case GMT_EV_ALLOC:
    case GMT_EV_VMM_MAP:
    case GMT_EV_SEGMENT_ALLOC: {
      int owner = gmt_owners_of(o, ev, str, ctx);
      if (owner < 0) return GM_OK;
      blk_t *b = find(o, ev);
      if (b) end_block(o, b); /* an add over a live address: the trace missed its end */
      if ((b = o->spare)) {
        o->spare = b->hh.next;
        memset(b, 0, sizeof *b);
      } else if (!(b = calloc(1, sizeof *b))) {
        return gm_err_set(err, GM_ERR_NOMEM, "out of memory");
      }
      b->addr = ev->addr;
      b->dev = ev->device;
      b->space = space_of(ev->kind);
      b->size = ev->size;
      b->owner = owner;
      HASH_ADD(hh, o->live, addr, BLK_KEYLEN, b);
      change(o, owner, ev->device, b->space, ev->size, 1);
      return GM_OK;
    }
    case GMT_EV_FREE:
    case GMT_EV_VMM_UNMAP:
    case GMT_EV_SEGMENT_FREE: {
      blk_t *b = find(o, ev);
      if (b) end_block(o, b);
      return GM_OK;
    }
    default:
      return GM_OK;
  }
}

const gmt_owners_result_t *gmt_owners_result(gmt_owners_t *o) {
  o->r.peak_live = o->req_peak;
  return &o->r;
}

uint64_t gmt_owners_framework_bytes(const gmt_owner_dev_t *d) { return fw_bytes(d->at_peak); }

uint64_t gmt_owners_other_bytes(const gmt_owner_dev_t *d) {
  uint64_t s = 0;
  for (int k = GMT_OWNER_UNKNOWN; k < GMT_OWNERS_MAX; k++) s += d->at_peak[k];
  return s;
}

int gmt_owners_context_bytes(const gmt_owner_dev_t *d, uint64_t *bytes) {
  /* The largest sample: the end's, normally, once the driver has loaded the libraries' kernels
   * (lazily, at their first launch: before the job's peak in a training loop) */
  *bytes = d && d->context_samples ? d->context_max : 0;
  return d && d->context_samples ? 1 : 0;
}

const char *gmt_usage_method_text(unsigned method) {
  switch (method) {
    case GMT_USAGE_PROCESS: return "NVML, this process";
    case GMT_USAGE_DEVICE: return "cuMemGetInfo, the whole device: other processes included";
    default: return "";
  }
}
