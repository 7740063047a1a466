/* engine_vmm.c: buffers taken through the CUDA VMM API, replayed as requests
 * (rp_engine_opts_t.vmm_requests).
 *
 * An allocator that gives each buffer its own virtual range (XLA's platform allocator) asks
 * the driver for cuMemAddressReserve + cuMemCreate + cuMemMap of the whole range per buffer,
 * and cuMemUnmap + cuMemAddressFree when the buffer dies: the recorder writes VMM_RESERVE,
 * VMM_MAP, VMM_UNMAP, VMM_RELEASE. Such a buffer is one request, like a cudaMalloc: a map
 * that covers its reservation exactly is the alloc (at the reservation's address, of the
 * mapped size: the buffer rounded up to the granularity, all the trace knows), its unmap the
 * free. A map of part of a reservation is a page of a pool (PyTorch's expandable segments, a
 * BFC region grown in place) and stays the recorded allocator's business.
 *
 * State: the live reservations in a red-black tree by base address, so that an address inside
 * one (a page) is told from an address in none; one O(log n) lookup per VMM event, which are
 * rare beside tensor requests. Pairing mistakes are counted, never fatal: a map outside every
 * reservation (the recorder started late) is still a request; an unmap of nothing mapped is
 * dropped; a release of a mapped buffer frees it first; a reservation over a live one ends
 * the old one as a release would.
 *
 * This file only decides: a VMM event that is a request comes back to engine.c as the ALLOC or
 * FREE it stands for, and engine.c replays it as any other (so calls go one way). */
#include <stdlib.h>

#include "replay/engine/engine_internal.h"

/* libbsd's RB_GENERATE_STATIC marks its functions __unused, which libbsd leaves undefined
 * (as rp_bfc_state.h does: defined only for the tree macros, last). */
#ifndef __unused
#define __unused __attribute__((__unused__))
#endif
#include <bsd/sys/tree.h>

typedef struct vres {
  RB_ENTRY(vres) link;
  uint64_t base, size;
  int mapped_whole; /* mapped by one map of its whole size: a live buffer */
} vres_t;

static int vres_cmp(const vres_t *a, const vres_t *b) {
  return a->base < b->base ? -1 : a->base > b->base;
}

RB_HEAD(vres_tree, vres);
RB_GENERATE_STATIC(vres_tree, vres, link, vres_cmp)

struct rp_vmm {
  struct vres_tree t;
};

void rp_vmm_free(rp_vmm_t *v) {
  if (!v) return;
  vres_t *r, *nx;
  RB_FOREACH_SAFE(r, vres_tree, &v->t, nx) {
    RB_REMOVE(vres_tree, &v->t, r);
    free(r);
  }
  free(v);
}

/* The reservation that holds addr, or NULL. */
static vres_t *holding(rp_vmm_t *v, uint64_t addr) {
  vres_t key = {.base = addr};
  vres_t *r = RB_NFIND(vres_tree, &v->t, &key); /* first base >= addr */
  if (r && r->base == addr) return r;
  r = r ? RB_PREV(vres_tree, &v->t, r) : RB_MAX(vres_tree, &v->t);
  return r && addr - r->base < r->size ? r : NULL;
}

/* The buffer at ev's address (or at addr) dies: its FREE is the request. */
static void buffer_free(const gmt_event_t *ev, uint64_t addr, gmt_event_t *req, int *is_req) {
  *req = *ev;
  req->kind = GMT_EV_FREE;
  req->addr = addr;
  *is_req = 1;
}

static void end_reservation(rp_engine_t *e, vres_t *r, const gmt_event_t *ev, gmt_event_t *req,
                            int *is_req) {
  if (r->mapped_whole) { /* its unmap was not recorded */
    e->skipped.vmm_release_mapped++;
    buffer_free(ev, r->base, req, is_req);
  }
  RB_REMOVE(vres_tree, &e->vmm->t, r);
  free(r);
}

gm_status_t rp_engine_vmm(rp_engine_t *e, const gmt_event_t *ev, gmt_event_t *req, int *is_req,
                          gm_err_t *err) {
  *is_req = 0;
  if (!e->vmm) {
    if (!(e->vmm = calloc(1, sizeof *e->vmm)))
      return gm_err_set(err, GM_ERR_NOMEM, "out of host memory for the VMM reservations");
    RB_INIT(&e->vmm->t);
  }
  vres_t *r = holding(e->vmm, ev->addr);
  switch (ev->kind) {
    case GMT_EV_VMM_RESERVE: {
      if (r && r->base == ev->addr) end_reservation(e, r, ev, req, is_req);
      vres_t *n = calloc(1, sizeof *n);
      if (!n) return gm_err_set(err, GM_ERR_NOMEM, "out of host memory for the VMM reservations");
      n->base = ev->addr;
      n->size = ev->size ? ev->size : 1;
      RB_INSERT(vres_tree, &e->vmm->t, n);
      return GM_OK;
    }
    case GMT_EV_VMM_MAP:
      if (r && (r->base != ev->addr || r->size != ev->size || r->mapped_whole)) {
        e->skipped.vmm_pages++; /* part of a reservation: a pool's page */
        return GM_OK;
      }
      if (r) r->mapped_whole = 1;
      else e->skipped.vmm_map_unreserved++;
      e->skipped.vmm_buffers++;
      *req = *ev;
      req->kind = GMT_EV_ALLOC;
      req->stream = GMT_STREAM_NONE;
      *is_req = 1;
      return GM_OK;
    case GMT_EV_VMM_UNMAP:
      if (r && !(r->mapped_whole && r->base == ev->addr)) {
        if (r->base != ev->addr || r->size != ev->size) e->skipped.vmm_pages++;
        else e->skipped.vmm_unmap_unmapped++;
        return GM_OK;
      }
      if (r) r->mapped_whole = 0;
      else if (!rp_blocks_get(e, ev->addr)) { /* in no reservation, no buffer there */
        e->skipped.vmm_unmap_unmapped++;
        return GM_OK;
      }
      buffer_free(ev, ev->addr, req, is_req);
      return GM_OK;
    case GMT_EV_VMM_RELEASE:
      if (!r || r->base != ev->addr) {
        e->skipped.vmm_release_unknown++;
        return GM_OK;
      }
      end_reservation(e, r, ev, req, is_req);
      return GM_OK;
    default:
      return GM_OK;
  }
}
