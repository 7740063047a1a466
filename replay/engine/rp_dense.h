/* rp_dense.h: the engine's block map (trace address -> policy block) over dense numbers of the
 * trace's addresses (rp_addr_ids_t, numbered once per trace) instead of the addresses
 * themselves: an array indexed by the number where rp_map probes a hash table. Internal to
 * //replay/engine.
 *
 * It behaves as an rp_map would under the same claims and removes, in everything the engine
 * reads back: which keys are live (with their values), the live count, and which keys were
 * removed "since the last rehash" (how the engine tells a double free from a free of an
 * address never seen: rp_map.h). rp_map's rehash happens at a claim when 2 * (used + 1) > cap,
 * and sizes the table from the live count; here the same counters decide the same moments
 * (no table is rebuilt: an epoch number moves on, and a removed entry counts as removed only in
 * the epoch it was removed in). Live entries are walked in number order (rp_map walks them in
 * slot order: the engine's walk, engine_peak.c, sorts what it collects by address).
 *
 * Memory: an entry per number (32 bytes) and two bits of walk index: it follows the trace's
 * distinct addresses, which the caller already holds the events of. A table is reused from
 * replay to replay (rp_dense_reset: no fresh pages to fault in and zero each time). */
#ifndef RP_DENSE_H
#define RP_DENSE_H

#include <stddef.h>
#include <stdint.h>

#include "replay/engine/rp_map.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rp_dense {
  /* slots[id]: key the trace address; a, b, c as in the engine's rp_map; state 1 live, 2 * epoch
   * when removed in that epoch, 0 never claimed */
  rp_map_entry_t *slots;
  uint64_t *bits;  /* bit id: live */
  uint64_t *words; /* bit w: bits[w] != 0 (the walk skips empty stretches 4096 ids at a time) */
  uint32_t n;      /* numbers: ids are < n */
  uint32_t epoch;  /* rehashes of the emulated rp_map so far */
  size_t cap, live, used; /* the emulated rp_map's */
} rp_dense_t;

/* A table for ids [0, n). Returns 0, or -1 when memory ran out (then *d is empty). */
int rp_dense_init(rp_dense_t *d, uint32_t n);
void rp_dense_free(rp_dense_t *d);

/* The live entry of id, or NULL (rp_map_get). */
static inline rp_map_entry_t *rp_dense_get(const rp_dense_t *d, uint32_t id) {
  rp_map_entry_t *e = &d->slots[id];
  return e->state == 1 ? e : NULL;
}
/* 1 if id was removed since the last (emulated) rehash and not claimed again (rp_map_was_removed). */
static inline int rp_dense_was_removed(const rp_dense_t *d, uint32_t id) {
  return d->cap != 0 && d->slots[id].state == 2u * d->epoch;
}
/* Make id (trace address key) live and return its entry; *was_live as rp_map_claim. Mark a
 * live entry removed (rp_map_remove). Inline: once per request. */
static inline rp_map_entry_t *rp_dense_claim(rp_dense_t *d, uint32_t id, uint64_t key, int *was_live) {
  if (2 * (d->used + 1) > d->cap) { /* rp_map's rehash: freed keys dropped, sized from the live */
    size_t cap = 1024; /* rp_map.c's MIN_CAP */
    while (cap < 4 * (d->live + 1)) cap *= 2;
    d->cap = cap;
    d->used = d->live;
    d->epoch++;
  }
  rp_map_entry_t *e = &d->slots[id];
  *was_live = e->state == 1;
  if (e->state != 1) {
    d->live++;
    if (e->state != 2u * d->epoch) { /* not a slot removed in this epoch: a new one, zero */
      d->used++;
      e->a = e->b = 0;
      e->c = 0;
    }
    e->key = key;
    e->state = 1;
    uint64_t *w = &d->bits[id >> 6];
    if (!*w) d->words[id >> 12] |= 1ull << ((id >> 6) & 63);
    *w |= 1ull << (id & 63);
  }
  return e;
}

static inline void rp_dense_remove(rp_dense_t *d, rp_map_entry_t *e) {
  size_t id = (size_t)(e - d->slots);
  e->state = 2u * d->epoch;
  d->live--;
  uint64_t *w = &d->bits[id >> 6];
  *w &= ~(1ull << (id & 63));
  if (!*w) d->words[id >> 12] &= ~(1ull << ((id >> 6) & 63));
}

/* The first live id at or after i, or d->n (the walk, as rp_map_next_live). */
size_t rp_dense_next_live(const rp_dense_t *d, size_t i);
/* Empty again, as after rp_dense_init, for another replay over the same numbers: the live
 * entries are cleared (a walk), the rest is told apart by the epoch, which goes on. */
void rp_dense_reset(rp_dense_t *d);
/* Bytes the table holds. */
size_t rp_dense_bytes(const rp_dense_t *d);

#ifdef __cplusplus
}
#endif
#endif /* RP_DENSE_H */
