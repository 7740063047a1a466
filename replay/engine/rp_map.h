/* rp_map.h: a hash map from 64-bit keys (device addresses) to two 64-bit values, for the
 * engine (trace address -> policy block, requested size) and the cuda backend (page ->
 * physical handle). Internal to //replay.
 *
 * Open addressing with linear probing. A removed key stays in its slot marked "freed" until
 * the next rehash, which serves two purposes: probing never needs deletion shifts, and the
 * engine can tell a double free (key freed recently) from a free of an address never seen.
 * A rehash drops freed slots and sizes the table from the live count (load <= 1/4 after it),
 * so memory follows the live set, never the length of the trace (at most twice it: the table
 * before the last rehash is kept for the next one when it has the same size). */
#ifndef RP_MAP_H
#define RP_MAP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rp_map_entry {
  uint64_t key;
  uint64_t a; /* engine: policy address; cuda: handle */
  uint64_t b; /* engine: requested size */
  uint32_t state; /* 0 empty, 1 live, 2 freed */
  uint32_t c;     /* engine: the allocating stream + 1 (low 32 bits; 0 none) */
} rp_map_entry_t;

typedef struct rp_map {
  rp_map_entry_t *slots;
  uint8_t *meta; /* a byte per slot: 0 empty, else a hash tag (rp_map.c); slots[].state rules */
  size_t cap;   /* power of two, or 0 before the first put */
  size_t live;  /* state 1 */
  size_t used;  /* state 1 or 2 */
  unsigned shift;
  /* The table before the last rehash when it had the size of the current one: the next
   * rehash of that size (the steady state: a live set of stable size, fresh keys) clears and
   * reuses it instead of a calloc and a free per rehash (whose page faults and cold lines
   * showed in profiles). NULL or spare_cap == cap. */
  rp_map_entry_t *spare;
  uint8_t *spare_meta;
  size_t spare_cap;
} rp_map_t;

void rp_map_init(rp_map_t *m);
void rp_map_free(rp_map_t *m);
/* The live entry for key, or NULL. */
rp_map_entry_t *rp_map_get(const rp_map_t *m, uint64_t key);
/* 1 if key was removed since the last rehash and not put again. */
int rp_map_was_removed(const rp_map_t *m, uint64_t key);
/* Insert or overwrite key as live. Returns 0, or -1 when memory ran out (map unchanged). */
int rp_map_put(rp_map_t *m, uint64_t key, uint64_t a, uint64_t b);
/* Make key live and return its slot (one probe where get + put take two). *was_live says
 * whether it already was: then a and b still hold the old values. NULL: out of memory. The
 * pointer is valid until the next put or claim. */
rp_map_entry_t *rp_map_claim(rp_map_t *m, uint64_t key, int *was_live);
/* Mark a live entry (from rp_map_get) removed. */
void rp_map_remove(rp_map_t *m, rp_map_entry_t *e);
/* The index of the first live slot at or after i, or m->cap if none: a walk over the live
 * entries in slot order (what a loop over slots[] testing state == 1 visits), reading a byte
 * per slot, 16 at a time. for (i = rp_map_next_live(m, 0); i < m->cap; i = rp_map_next_live(m, i + 1)) */
size_t rp_map_next_live(const rp_map_t *m, size_t i);
/* Bytes the table holds (for memory figures). */
size_t rp_map_bytes(const rp_map_t *m);

#ifdef __cplusplus
}
#endif
#endif /* RP_MAP_H */
