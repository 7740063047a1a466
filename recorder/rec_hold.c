/* rec_hold.c: one event held back per producer thread, stolen by the writer when it stays.
 *
 * Why: PyTorch frees a block with no stream uses by calling its trace twice under one lock
 * hold, free_requested then free_completed, same address, size, stream and time (rec_torch_entry.c).
 * Pushed as two ring entries that is two slot lines and two CASes on the ring's shared head per
 * free; held for one call and folded, it is one. The cost on the allocating thread is a store
 * and, on its next event, a compare-and-swap on its own line.
 * Protocol (state of a slot): EMPTY -> HELD by its thread (the event written first, then the
 * state with release); HELD -> EMPTY by its thread when it takes it back (CAS: it won, the event
 * is its own again); HELD -> STEALING -> EMPTY by the writer, which copies the event and pushes
 * it into the ring between the two (or, ring full, back to HELD and retried after a drain).
 * A thread that finds its slot STEALING waits for the writer's push to finish before it pushes
 * anything itself, so the ring keeps the thread's order: the held event is ahead of what the
 * thread pushes next (the free_completed that reuses its time must come after it). The writer's
 * window is one ring push; it steals before each write of the file (every flush interval, each
 * early write) and at the end, so a held event reaches the file no later than a pushed one.
 * Slots are 64-byte aligned (the state and the event on one line), never freed while the core
 * lives, and reused by later threads once their thread has ended. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "recorder/rec_hold.h"

enum { EMPTY = 0, HELD = 1, STEALING = 2 };

struct rec_hold {
  _Alignas(64) _Atomic uint32_t state;
  uint32_t in_use; /* a thread owns it (hs->mu) */
  gmt_event_t ev;
  rec_hold_t *next; /* the registry's list: written once, before the slot is published */
};

_Static_assert(offsetof(rec_hold_t, next) == 64, "a slot's state and event fill one cache line");

void rec_holds_init(rec_holds_t *hs) {
  pthread_mutex_init(&hs->mu, NULL);
  atomic_init(&hs->head, NULL);
}

void rec_holds_fini(rec_holds_t *hs) {
  rec_hold_t *h = atomic_load(&hs->head);
  while (h) {
    rec_hold_t *n = h->next;
    free(h);
    h = n;
  }
  atomic_store(&hs->head, NULL);
  pthread_mutex_destroy(&hs->mu);
}

rec_hold_t *rec_holds_open(rec_holds_t *hs) {
  pthread_mutex_lock(&hs->mu);
  rec_hold_t *h;
  for (h = atomic_load(&hs->head); h; h = h->next)
    if (!h->in_use) break;
  if (!h && (h = aligned_alloc(64, sizeof *h))) {
    memset(h, 0, sizeof *h);
    atomic_init(&h->state, EMPTY);
    h->next = atomic_load(&hs->head);
    atomic_store_explicit(&hs->head, h, memory_order_release);
  }
  if (h) h->in_use = 1;
  pthread_mutex_unlock(&hs->mu);
  return h;
}

void rec_holds_close(rec_holds_t *hs, rec_hold_t *h, rec_ring_t *ring, _Atomic uint64_t *lost) {
  if (!h) return;
  const gmt_event_t *ev = rec_hold_take(h);
  if (ev && rec_ring_push(ring, ev) < 0) atomic_fetch_add(lost, 1);
  pthread_mutex_lock(&hs->mu);
  h->in_use = 0;
  pthread_mutex_unlock(&hs->mu);
}

void rec_hold_put(rec_hold_t *h, const gmt_event_t *ev) {
  h->ev = *ev;
  atomic_store_explicit(&h->state, HELD, memory_order_release);
}

const gmt_event_t *rec_hold_take(rec_hold_t *h) {
  for (unsigned spin = 0;; spin++) {
    uint32_t s = atomic_load_explicit(&h->state, memory_order_acquire);
    if (s == EMPTY) return NULL; /* nothing held, or the writer's push of it is done */
    if (s == HELD && atomic_compare_exchange_strong_explicit(&h->state, &s, EMPTY, memory_order_acquire,
                                                             memory_order_relaxed))
      return &h->ev;
    /* STEALING: the writer is pushing it (one ring push long); wait for that before pushing
     * anything, and take it back if the ring was full (HELD again) */
    if (s == STEALING && spin >= 64) sched_yield();
  }
}

size_t rec_holds_steal(rec_holds_t *hs, rec_ring_t *ring) {
  size_t left = 0;
  for (rec_hold_t *h = atomic_load_explicit(&hs->head, memory_order_acquire); h; h = h->next) {
    uint32_t s = HELD;
    if (atomic_load_explicit(&h->state, memory_order_relaxed) != HELD ||
        !atomic_compare_exchange_strong_explicit(&h->state, &s, STEALING, memory_order_acquire,
                                                 memory_order_relaxed))
      continue;
    gmt_event_t ev = h->ev;
    int pushed = rec_ring_push(ring, &ev) == 0;
    atomic_store_explicit(&h->state, pushed ? EMPTY : HELD, memory_order_release);
    left += !pushed;
  }
  return left;
}

size_t rec_hold_expand(const gmt_event_t *in, gmt_event_t out[2]) {
  out[0] = *in;
  if (!(in->flags & REC_F_FREE_PAIR)) return 1;
  out[0].flags &= ~REC_F_FREE_PAIR;
  out[0].kind = GMT_EV_FREE_REQUESTED;
  out[1] = out[0];
  out[1].kind = GMT_EV_FREE;
  return 2;
}
