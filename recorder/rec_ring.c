/* rec_ring.c: bounded lock-free queue between the threads that see allocations and the
 * recorder's writer thread.
 *
 * Model: D. Vyukov's bounded MPMC array queue, used with many producers (application threads
 * in CUPTI callbacks, CUPTI's buffer thread) and one consumer (the writer thread). Each slot
 * carries a sequence number; a producer claims a position with one CAS on the head and
 * publishes the slot with a release store, so a producer never waits for another producer
 * beyond a CAS retry and never takes a lock. Full ring: the push fails and the caller counts
 * a drop; the application is never slowed down to wait for the disk.
 * Workload: bursts of thousands of events per training step, drained at ~100 Hz. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "recorder/rec_ring.h"

/* PREFETCHW (CPUID 0x80000001 ECX bit 8): older CPUs may not take the instruction. */
static int has_prefetchw(void) {
#if defined(__x86_64__)
  unsigned a, b, c, d;
  __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0x80000000u), "c"(0));
  if (a < 0x80000001u) return 0;
  __asm__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0x80000001u), "c"(0));
  return (c >> 8) & 1;
#else
  return 0;
#endif
}

gm_status_t rec_ring_init(rec_ring_t *r, size_t capacity, gm_err_t *err) {
  size_t cap = 2;
  while (cap < capacity) cap <<= 1;
  memset(r, 0, sizeof *r);
  /* one slot per cache line (an event is 56 bytes, its sequence 8): a push touches one line */
  _Static_assert(sizeof(rec_slot_t) == 64, "a ring slot fills one cache line");
  r->slots = aligned_alloc(64, cap * sizeof *r->slots);
  if (!r->slots) return gm_err_set(err, GM_ERR_NOMEM, "event ring of %zu events: out of memory", cap);
  memset(r->slots, 0, cap * sizeof *r->slots);
  for (size_t i = 0; i < cap; i++) atomic_init(&r->slots[i].seq, i);
  r->mask = cap - 1;
  r->prefetchw = has_prefetchw();
  r->cslots = r->slots;
  r->cmask = r->mask;
  atomic_init(&r->head, 0);
  r->tail = 0;
  return GM_OK;
}

void rec_ring_fini(rec_ring_t *r) {
  free(r->slots);
  r->slots = r->cslots = NULL;
}

gm_status_t rec_ring_create(rec_ring_t **out, size_t capacity, gm_err_t *err) {
  rec_ring_t *r = aligned_alloc(64, sizeof *r);
  if (!r) return gm_err_set(err, GM_ERR_NOMEM, "event ring: out of memory");
  gm_status_t s = rec_ring_init(r, capacity, err);
  if (s < 0) {
    free(r);
    return s;
  }
  *out = r;
  return GM_OK;
}

void rec_ring_destroy(rec_ring_t *r) {
  if (!r) return;
  rec_ring_fini(r);
  free(r);
}

size_t rec_ring_capacity(const rec_ring_t *r) { return (size_t)r->mask + 1; }

uint64_t rec_ring_pushed(rec_ring_t *r) { return atomic_load_explicit(&r->head, memory_order_relaxed); }

int rec_ring_push(rec_ring_t *r, const gmt_event_t *ev) { return rec_ring_push_inline(r, ev); }

size_t rec_ring_pop(rec_ring_t *r, gmt_event_t *out, size_t cap) {
  size_t n = 0;
  while (n < cap) {
    rec_slot_t *s = &r->cslots[r->tail & r->cmask];
    uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
    if (seq != r->tail + 1) break; /* empty, or a producer has claimed but not yet published */
    out[n++] = s->ev;
    atomic_store_explicit(&s->seq, r->tail + r->cmask + 1, memory_order_release);
    r->tail++;
  }
  return n;
}
