/* engine_ids.c: the trace's addresses numbered densely, once per trace (rp_addr_ids_build), so
 * that each replay of it (a sweep's 28) indexes an array by number (rp_dense.h) where it would
 * probe a hash map by address per event.
 *
 * Numbers follow the order of first appearance, and are given to the events whose address the
 * engine's block map may be asked about: allocations, frees, free_requested and the VMM events
 * (a VMM buffer's request has its event's address: engine_vmm.c). Other events get RP_NO_ID.
 * One hash probe per such event, here only (its own table, 16 bytes a slot at load <= 1/2).
 *
 * The engines' tables for these numbers (rp_dense_t, 32 bytes a number) are kept with the
 * numbering between replays (a few spares, taken and given back without a lock by the threads
 * that replay): a table of fresh pages cost each replay more in page faults than its probes. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "replay/engine/engine_internal.h"
#include "replay/engine/rp_bigmem.h"

#define SPARES 8
struct rp_ids_spares {
  _Atomic(rp_dense_t *) t[SPARES];
};

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

/* The numbering's own hash table: sized once for every block event naming a new address (no
 * rehash), probed linearly; the slot of the event PREFETCH ahead is fetched while this one is
 * probed (the probes of a large trace miss the caches: their latencies overlap so). */
typedef struct slot {
  uint64_t key;
  uint32_t id; /* RP_NO_ID: empty */
  uint32_t pad;
} slot_t;
#define PREFETCH 16

static inline size_t home(uint64_t key, unsigned shift) { return (size_t)((key * 0x9E3779B97F4A7C15ull) >> shift); }

gm_status_t rp_addr_ids_build(const gmt_event_t *evs, size_t n, rp_addr_ids_t *out, gm_err_t *err) {
  memset(out, 0, sizeof *out);
  size_t nb = 0;
  for (size_t i = 0; i < n; i++) nb += (size_t)names_block(evs[i].kind);
  size_t cap = 1024;
  unsigned shift = 64 - 10;
  while (cap < 2 * nb) {
    cap *= 2;
    shift--;
  }
  uint32_t *id = rp_bigmem_alloc((n ? n : 1) * sizeof *id);
  slot_t *tab = rp_bigmem_alloc(cap * sizeof *tab);
  struct rp_ids_spares *sp = calloc(1, sizeof *sp);
  if (!id || !tab || !sp || nb >= RP_NO_ID) {
    rp_bigmem_free(id, (n ? n : 1) * sizeof *id);
    rp_bigmem_free(tab, cap * sizeof *tab);
    free(sp);
    return gm_err_set(err, GM_ERR_NOMEM, nb >= RP_NO_ID ? "too many addresses to number" : "out of host memory for the address numbers");
  }
  for (size_t j = 0; j < cap; j++) tab[j].id = RP_NO_ID;
  uint32_t count = 0;
  size_t mask = cap - 1;
  for (size_t i = 0; i < n; i++) {
    if (i + PREFETCH < n) __builtin_prefetch(&tab[home(evs[i + PREFETCH].addr, shift)], 1);
    if (!names_block(evs[i].kind)) {
      id[i] = RP_NO_ID;
      continue;
    }
    uint64_t key = evs[i].addr;
    size_t j = home(key, shift);
    while (tab[j].id != RP_NO_ID && tab[j].key != key) j = (j + 1) & mask;
    if (tab[j].id == RP_NO_ID) { /* load <= 1/2: an empty slot is always found */
      tab[j].key = key;
      tab[j].id = count++;
    }
    id[i] = tab[j].id;
  }
  rp_bigmem_free(tab, cap * sizeof *tab);
  out->evs = evs;
  out->n = n;
  out->id = id;
  out->count = count;
  out->spares = sp;
  return GM_OK;
}

void rp_addr_ids_free(rp_addr_ids_t *ids) {
  for (int i = 0; ids->spares && i < SPARES; i++) {
    rp_dense_t *t = atomic_exchange(&ids->spares->t[i], NULL);
    if (t) rp_dense_free(t);
    free(t);
  }
  free(ids->spares);
  rp_bigmem_free(ids->id, (ids->n ? ids->n : 1) * sizeof *ids->id);
  memset(ids, 0, sizeof *ids);
}

rp_dense_t *rp_addr_ids_table(const rp_addr_ids_t *ids) {
  for (int i = 0; ids->spares && i < SPARES; i++) {
    rp_dense_t *t = atomic_exchange(&ids->spares->t[i], NULL);
    if (t) return t; /* reset when given back */
  }
  rp_dense_t *t = malloc(sizeof *t);
  if (t && rp_dense_init(t, ids->count) != 0) {
    free(t);
    t = NULL;
  }
  return t;
}

void rp_addr_ids_table_back(const rp_addr_ids_t *ids, rp_dense_t *t) {
  rp_dense_reset(t);
  for (int i = 0; ids->spares && i < SPARES; i++) {
    rp_dense_t *none = NULL;
    if (atomic_compare_exchange_strong(&ids->spares->t[i], &none, t)) return;
  }
  rp_dense_free(t);
  free(t);
}
