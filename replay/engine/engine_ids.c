/* engine_ids.c: the trace's addresses numbered densely, once per trace (rp_addr_ids_build), so
 * that each replay of it (a sweep's 28) indexes an array by number (rp_dense.h) where it would
 * probe a hash map by address per event.
 *
 * Numbers follow the order of first appearance, and are given to the events whose address the
 * engine's block map may be asked about: allocations, frees, free_requested and the VMM events
 * (a VMM buffer's request has its event's address: engine_vmm.c). Other events get RP_NO_ID.
 * One hash probe per such event, here only. */
#include <stdlib.h>
#include <string.h>

#include "replay/engine/rp_engine.h"
#include "replay/engine/rp_map.h"

static int names_block(unsigned kind) {
  switch (kind) {
    case GMT_EV_ALLOC:
    case GMT_EV_FREE:
    case GMT_EV_FREE_REQUESTED:
    case GMT_EV_VMM_RESERVE:
    case GMT_EV_VMM_MAP:
    case GMT_EV_VMM_UNMAP:
    case GMT_EV_VMM_RELEASE:
      return 1;
    default:
      return 0;
  }
}

gm_status_t rp_addr_ids_build(const gmt_event_t *evs, size_t n, rp_addr_ids_t *out, gm_err_t *err) {
  memset(out, 0, sizeof *out);
  uint32_t *id = malloc((n ? n : 1) * sizeof *id);
  rp_map_t m;
  rp_map_init(&m);
  if (!id) return gm_err_set(err, GM_ERR_NOMEM, "out of host memory for the address numbers");
  uint32_t count = 0;
  for (size_t i = 0; i < n; i++) {
    if (!names_block(evs[i].kind)) {
      id[i] = RP_NO_ID;
      continue;
    }
    int was = 0;
    rp_map_entry_t *x = rp_map_claim(&m, evs[i].addr, &was);
    if (!x || (!was && count == RP_NO_ID)) {
      free(id);
      rp_map_free(&m);
      return gm_err_set(err, GM_ERR_NOMEM, x ? "too many addresses to number" : "out of host memory for the address numbers");
    }
    if (!was) x->a = count++;
    id[i] = (uint32_t)x->a;
  }
  rp_map_free(&m);
  out->evs = evs;
  out->n = n;
  out->id = id;
  out->count = count;
  return GM_OK;
}

void rp_addr_ids_free(rp_addr_ids_t *ids) {
  free(ids->id);
  memset(ids, 0, sizeof *ids);
}
