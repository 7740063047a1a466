/* rec_ring.h: the event ring's layout and its push, inline for the recorder core's hot path
 * (rec_core_push_entry); private to the rec_core library (rec_ring.c has the rest). */
#ifndef REC_RING_H
#define REC_RING_H

#include <stdatomic.h>

#include "recorder/rec_core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rec_slot {
  _Atomic uint64_t seq;
  gmt_event_t ev;
} rec_slot_t;

/* head and tail on separate cache lines: producers hammer head, the consumer owns tail. Each
 * line holds its own copy of the slots' address and mask, so a push reads one line of the ring
 * besides its slot (a producer's lines are cold between allocations in a training step). */
struct rec_ring {
  _Alignas(64) _Atomic uint64_t head;
  rec_slot_t *slots;
  uint64_t mask;
  int prefetchw; /* the CPU has PREFETCHW (else the slot ahead is prefetched for reading) */
  _Alignas(64) uint64_t tail;
  rec_slot_t *cslots; /* the consumer's copies */
  uint64_t cmask;
};

/* In place, for a ring inside another structure (the core's, beside its flags line):
 * rec_ring_create without the allocation of the ring itself; rec_ring_fini frees its slots. */
gm_status_t rec_ring_init(rec_ring_t *r, size_t capacity, gm_err_t *err);
void rec_ring_fini(rec_ring_t *r);

/* A slot a few pushes ahead of the one just published, asked for with intent to write: when a
 * push comes to it, its line (the consumer wrote its sequence last lap) is here and owned,
 * instead of a read-for-ownership from the consumer's cache, a far L3 slice or memory (on the GPU
 * machine's Xeon, tens of ns per push, in a tight loop as in a step). Ahead by REC_RING_AHEAD,
 * not 1: an allocation's free_requested and free_completed come back to back, so the next slot
 * is wanted at once; each push prefetches one, so in the steady state every slot is asked for
 * REC_RING_AHEAD pushes (a microsecond or more in a training step) before it is written. */
#define REC_RING_AHEAD 4
static inline void rec_ring_prefetch_ahead(const rec_ring_t *r, uint64_t pos) {
  const void *p = &r->slots[(pos + REC_RING_AHEAD) & r->mask];
#if defined(__x86_64__)
  if (r->prefetchw) {
    __asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
    return;
  }
#endif
  __builtin_prefetch(p, 0, 3);
}

/* rec_ring_push (rec_core.h) */
static inline int rec_ring_push_inline(rec_ring_t *r, const gmt_event_t *ev) {
  uint64_t pos = atomic_load_explicit(&r->head, memory_order_relaxed);
  rec_slot_t *s;
  for (;;) {
    s = &r->slots[pos & r->mask];
    uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
    int64_t dif = (int64_t)(seq - pos);
    if (dif == 0) {
      /* the slot is free for this lap: claim the position */
      if (atomic_compare_exchange_weak_explicit(&r->head, &pos, pos + 1, memory_order_relaxed,
                                                memory_order_relaxed))
        break;
    } else if (dif < 0) {
      return -1; /* the consumer has not freed this slot yet: full */
    } else {
      pos = atomic_load_explicit(&r->head, memory_order_relaxed);
    }
  }
  s->ev = *ev;
  atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
  rec_ring_prefetch_ahead(r, pos);
  return 0;
}

#ifdef __cplusplus
}
#endif
#endif /* REC_RING_H */
