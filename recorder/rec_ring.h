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
  _Alignas(64) uint64_t tail;
  rec_slot_t *cslots; /* the consumer's copies */
  uint64_t cmask;
};

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
  return 0;
}

#ifdef __cplusplus
}
#endif
#endif /* REC_RING_H */
