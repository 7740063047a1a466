/* rp_dense.c: the engine's block map over dense address numbers (see rp_dense.h).
 *
 * Workload: one claim per ALLOC, one get (and a remove) per FREE, as with rp_map; the numbers
 * are given in order of first appearance in the trace, so a trace that allocates at fresh
 * addresses touches entries near the newest ones (where rp_map's hash spreads them over the
 * table and its rehash walks the table again and again). */
#include "replay/engine/rp_dense.h"

#include "replay/engine/rp_bigmem.h"

#include <stdlib.h>
#include <string.h>


static size_t n_words(uint32_t n) { return ((size_t)n + 63) / 64; }

static size_t slots_bytes(uint32_t n) { return (n ? n : 1) * sizeof(rp_map_entry_t); }
static size_t bits_bytes(uint32_t n) { return (n_words(n) ? n_words(n) : 1) * sizeof(uint64_t); }
static size_t words_bytes(uint32_t n) {
  size_t w = n_words((uint32_t)n_words(n));
  return (w ? w : 1) * sizeof(uint64_t);
}

int rp_dense_init(rp_dense_t *d, uint32_t n) {
  memset(d, 0, sizeof *d);
  d->n = n;
  d->slots = rp_bigmem_alloc(slots_bytes(n));
  d->bits = rp_bigmem_alloc(bits_bytes(n));
  d->words = rp_bigmem_alloc(words_bytes(n));
  if (!d->slots || !d->bits || !d->words) {
    rp_dense_free(d);
    return -1;
  }
  return 0;
}

void rp_dense_free(rp_dense_t *d) {
  rp_bigmem_free(d->slots, slots_bytes(d->n));
  rp_bigmem_free(d->bits, bits_bytes(d->n));
  rp_bigmem_free(d->words, words_bytes(d->n));
  memset(d, 0, sizeof *d);
}

size_t rp_dense_next_live(const rp_dense_t *d, size_t i) {
  if (i >= d->n) return d->n;
  size_t w = i >> 6, nw = n_words(d->n);
  uint64_t m = d->bits[w] & (~0ull << (i & 63));
  if (m) return (w << 6) + (size_t)__builtin_ctzll(m);
  for (w++; w < nw;) {
    uint64_t s = d->words[w >> 6] & (~0ull << (w & 63));
    if (s) {
      w = ((w >> 6) << 6) + (size_t)__builtin_ctzll(s);
      return (w << 6) + (size_t)__builtin_ctzll(d->bits[w]);
    }
    w = ((w >> 6) + 1) << 6;
  }
  return d->n;
}

void rp_dense_reset(rp_dense_t *d) {
  size_t nw = n_words(d->n);
  for (size_t s = 0; s < n_words((uint32_t)nw); s++) {
    for (uint64_t ws = d->words[s]; ws; ws &= ws - 1) {
      size_t w = (s << 6) + (size_t)__builtin_ctzll(ws);
      for (uint64_t b = d->bits[w]; b; b &= b - 1) d->slots[(w << 6) + (size_t)__builtin_ctzll(b)].state = 0;
      d->bits[w] = 0;
    }
    d->words[s] = 0;
  }
  d->cap = d->live = d->used = 0; /* the epoch goes on: what was removed before is in none */
}

size_t rp_dense_bytes(const rp_dense_t *d) {
  size_t nw = n_words(d->n);
  return (size_t)d->n * sizeof *d->slots + (nw + n_words((uint32_t)nw)) * sizeof(uint64_t);
}
