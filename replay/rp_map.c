/* rp_map.c: open-addressing hash map keyed by device address (see rp_map.h for the design).
 *
 * Workload: the engine does one lookup per FREE and one put per ALLOC, on keys that are
 * 512-byte aligned device addresses; a Fibonacci multiplicative hash spreads those aligned
 * keys over the table's top bits. */
#include "replay/rp_map.h"

#include <stdlib.h>

#define MIN_CAP 1024u

static size_t slot_of(const rp_map_t *m, uint64_t key) {
  return (size_t)((key * 0x9E3779B97F4A7C15ull) >> m->shift);
}

void rp_map_init(rp_map_t *m) {
  m->slots = NULL;
  m->cap = m->live = m->used = 0;
  m->shift = 64;
}

void rp_map_free(rp_map_t *m) {
  free(m->slots);
  rp_map_init(m);
}

/* The slot holding key (any state but empty), or the empty slot where it would go. */
static rp_map_entry_t *probe(const rp_map_t *m, uint64_t key) {
  size_t mask = m->cap - 1, i = slot_of(m, key);
  for (;;) {
    rp_map_entry_t *e = &m->slots[i];
    if (e->state == 0 || e->key == key) return e;
    i = (i + 1) & mask;
  }
}

rp_map_entry_t *rp_map_get(const rp_map_t *m, uint64_t key) {
  if (m->cap == 0) return NULL;
  rp_map_entry_t *e = probe(m, key);
  return e->state == 1 ? e : NULL;
}

int rp_map_was_removed(const rp_map_t *m, uint64_t key) {
  if (m->cap == 0) return 0;
  return probe(m, key)->state == 2;
}

/* Rebuild with only the live entries, at load <= 1/4. */
static int rehash(rp_map_t *m) {
  size_t cap = MIN_CAP;
  unsigned shift = 64 - 10;
  while (cap < 4 * (m->live + 1)) {
    cap *= 2;
    shift--;
  }
  rp_map_entry_t *slots = calloc(cap, sizeof *slots);
  if (!slots) return -1;
  rp_map_t n = {slots, cap, 0, 0, shift};
  for (size_t i = 0; i < m->cap; i++) {
    rp_map_entry_t *o = &m->slots[i];
    if (o->state != 1) continue;
    *probe(&n, o->key) = *o;
    n.live++;
  }
  n.used = n.live;
  free(m->slots);
  *m = n;
  return 0;
}

int rp_map_put(rp_map_t *m, uint64_t key, uint64_t a, uint64_t b) {
  if (2 * (m->used + 1) > m->cap && rehash(m) != 0) return -1;
  rp_map_entry_t *e = probe(m, key);
  if (e->state != 1) m->live++;
  if (e->state == 0) m->used++;
  e->key = key;
  e->a = a;
  e->b = b;
  e->state = 1;
  return 0;
}

rp_map_entry_t *rp_map_claim(rp_map_t *m, uint64_t key, int *was_live) {
  if (2 * (m->used + 1) > m->cap && rehash(m) != 0) return NULL;
  rp_map_entry_t *e = probe(m, key);
  *was_live = e->state == 1;
  if (e->state != 1) {
    m->live++;
    if (e->state == 0) m->used++;
    e->key = key;
    e->state = 1;
  }
  return e;
}

void rp_map_remove(rp_map_t *m, rp_map_entry_t *e) {
  e->state = 2;
  m->live--;
}

size_t rp_map_bytes(const rp_map_t *m) { return m->cap * sizeof(rp_map_entry_t); }
