/* rp_map.c: open-addressing hash map keyed by device address (see rp_map.h for the design).
 *
 * Workload: the engine does one lookup per FREE and one put per ALLOC, on keys that are
 * 512-byte aligned device addresses; a Fibonacci multiplicative hash spreads those aligned
 * keys over the table's top bits.
 *
 * Probing reads a byte per slot (rp_map_t.meta: 0 empty, else LIVE or FREED | 6 bits of the
 * key's hash), 16 slots per SSE2 compare, and loads an entry only where its byte says the key may
 * be there: the slot found is the one a slot-by-slot linear probe finds (the first that is
 * empty or holds the key), so the table's layout, and with it the freed slots a double free
 * is told by, are what they were before the bytes. A rehash finds the live entries from the
 * bytes' top bits (a movemask: no branch per slot). On a table of mostly freed slots (a trace with a fresh
 * address per allocation) the probe and the rehash were the engine's largest costs. */
#include "replay/engine/rp_map.h"

#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define MIN_CAP 1024u
#define GROUP 16u /* slots per byte compare */

static inline uint64_t hash_of(uint64_t key) { return key * 0x9E3779B97F4A7C15ull; }
static inline size_t slot_of(const rp_map_t *m, uint64_t h) { return (size_t)(h >> m->shift); }
#define LIVE 0x80u
#define FREED 0x40u
#define TAG 0x3Fu
/* Bits below those that pick the slot (cap <= 2^32 slots): independent of the slot. */
static inline uint8_t tag_of(uint64_t h) { return (uint8_t)((h >> 24) & TAG); }

void rp_map_init(rp_map_t *m) {
  m->slots = NULL;
  m->meta = NULL;
  m->cap = m->live = m->used = 0;
  m->shift = 64;
  m->spare = NULL;
  m->spare_meta = NULL;
  m->spare_cap = 0;
}

void rp_map_free(rp_map_t *m) {
  free(m->slots);
  free(m->meta);
  free(m->spare);
  free(m->spare_meta);
  rp_map_init(m);
}

/* Index of the slot holding key (any state but empty), or of the empty slot where it would
 * go: the first such slot from key's home slot on, wrapping around. */
static size_t probe(const rp_map_t *m, uint64_t key) {
  uint64_t h = hash_of(key);
  size_t mask = m->cap - 1, i = slot_of(m, h);
  uint8_t tag = tag_of(h);
  const uint8_t *meta = m->meta;
#ifdef __SSE2__
  const __m128i vt = _mm_set1_epi8((char)tag), vz = _mm_setzero_si128(), vm = _mm_set1_epi8((char)TAG);
  while (i + GROUP <= m->cap) {
    __m128i v = _mm_loadu_si128((const __m128i *)(meta + i));
    unsigned empty = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, vz));
    unsigned cand = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_and_si128(v, vm), vt));
    if (empty) cand &= (empty & -empty) - 1u; /* only slots before the first empty one */
    while (cand) {
      size_t j = i + (size_t)__builtin_ctz(cand);
      if (m->slots[j].key == key) return j;
      cand &= cand - 1u;
    }
    if (empty) return i + (size_t)__builtin_ctz(empty);
    i += GROUP;
  }
  i &= mask; /* the last slots before the wrap (and anything after it): one by one */
#endif
  for (;;) {
    uint8_t b = meta[i];
    if (b == 0 || ((b & TAG) == tag && m->slots[i].key == key)) return i;
    i = (i + 1) & mask;
  }
}

rp_map_entry_t *rp_map_get(const rp_map_t *m, uint64_t key) {
  if (m->cap == 0) return NULL;
  rp_map_entry_t *e = &m->slots[probe(m, key)];
  return e->state == 1 ? e : NULL;
}

int rp_map_was_removed(const rp_map_t *m, uint64_t key) {
  if (m->cap == 0) return 0;
  return m->slots[probe(m, key)].state == 2;
}

/* Rebuild with only the live entries, at load <= 1/4. The live entries are re-inserted in
 * slot order, as before the bytes existed: the new layout is the one it always was. */
static int rehash(rp_map_t *m) {
  size_t cap = MIN_CAP;
  unsigned shift = 64 - 10;
  while (cap < 4 * (m->live + 1)) {
    cap *= 2;
    shift--;
  }
  rp_map_entry_t *slots;
  uint8_t *meta;
  if (m->spare && m->spare_cap == cap) {
    slots = m->spare;
    meta = m->spare_meta;
    memset(slots, 0, cap * sizeof *slots);
    memset(meta, 0, cap);
  } else {
    slots = calloc(cap, sizeof *slots);
    meta = calloc(cap, 1);
    if (!slots || !meta) {
      free(slots);
      free(meta);
      return -1;
    }
    free(m->spare);
    free(m->spare_meta);
  }
  m->spare = NULL;
  m->spare_meta = NULL;
  m->spare_cap = 0;
  rp_map_t n;
  rp_map_init(&n);
  n.slots = slots;
  n.meta = meta;
  n.cap = cap;
  n.shift = shift;
  for (size_t g = 0; g < m->cap; g += GROUP) { /* cap is a multiple of GROUP */
    unsigned live = 0;
#ifdef __SSE2__
    live = (unsigned)_mm_movemask_epi8(_mm_loadu_si128((const __m128i *)(m->meta + g)));
#else
    for (unsigned k = 0; k < GROUP; k++) live |= (unsigned)(m->meta[g + k] >> 7) << k;
#endif
    for (; live; live &= live - 1u) {
      size_t i = g + (size_t)__builtin_ctz(live);
      size_t j = probe(&n, m->slots[i].key);
      n.slots[j] = m->slots[i];
      n.meta[j] = m->meta[i];
      n.live++;
    }
  }
  n.used = n.live;
  if (m->cap == cap) {
    n.spare = m->slots;
    n.spare_meta = m->meta;
    n.spare_cap = cap;
  } else {
    free(m->slots);
    free(m->meta);
  }
  *m = n;
  return 0;
}

int rp_map_put(rp_map_t *m, uint64_t key, uint64_t a, uint64_t b) {
  if (2 * (m->used + 1) > m->cap && rehash(m) != 0) return -1;
  size_t j = probe(m, key);
  rp_map_entry_t *e = &m->slots[j];
  if (e->state != 1) m->live++;
  if (e->state == 0) m->used++;
  e->key = key;
  e->a = a;
  e->b = b;
  e->state = 1;
  m->meta[j] = (uint8_t)(LIVE | tag_of(hash_of(key)));
  return 0;
}

rp_map_entry_t *rp_map_claim(rp_map_t *m, uint64_t key, int *was_live) {
  if (2 * (m->used + 1) > m->cap && rehash(m) != 0) return NULL;
  size_t j = probe(m, key);
  rp_map_entry_t *e = &m->slots[j];
  *was_live = e->state == 1;
  if (e->state != 1) {
    m->live++;
    if (e->state == 0) m->used++;
    e->key = key;
    e->state = 1;
    m->meta[j] = (uint8_t)(LIVE | tag_of(hash_of(key)));
  }
  return e;
}

void rp_map_remove(rp_map_t *m, rp_map_entry_t *e) {
  e->state = 2; /* still probed past and matched by key, as a live slot is */
  uint8_t *b = &m->meta[e - m->slots];
  *b = (uint8_t)(FREED | (*b & TAG));
  m->live--;
}

size_t rp_map_next_live(const rp_map_t *m, size_t i) {
  while (i < m->cap) {
    size_t g = i & ~(size_t)(GROUP - 1); /* cap is a multiple of GROUP */
    unsigned live = 0;
#ifdef __SSE2__
    live = (unsigned)_mm_movemask_epi8(_mm_loadu_si128((const __m128i *)(m->meta + g)));
#else
    for (unsigned k = 0; k < GROUP; k++) live |= (unsigned)(m->meta[g + k] >> 7) << k;
#endif
    live &= ~0u << (i - g);
    if (live) return g + (size_t)__builtin_ctz(live);
    i = g + GROUP;
  }
  return m->cap;
}

size_t rp_map_bytes(const rp_map_t *m) {
  return (m->cap + m->spare_cap) * (sizeof(rp_map_entry_t) + 1);
}
