/* rec_lane.c: one thread's own queue of events into the recorder's core.
 *
 * Why: the ring (rec_ring.c) takes any thread's event with a CAS on one shared head. On a
 * training step two threads allocate in turn (Python's and autograd's), each under PyTorch's
 * allocator lock, so every event moved the head's cache line between cores and read a slot's
 * sequence line cold: ~2x the cost the same push has in a tight loop on one thread. A thread
 * that makes many events (rec_torch_stream.c: three per allocation) takes a lane instead: a
 * single-producer single-consumer array whose head only its thread writes and whose tail only
 * the writer thread writes. A push is a copy and a release store; the tail is read again only
 * when the lane looks full.
 *
 * Life: a lane is made on a thread's first rec_core_lane() and listed in the core (a lock-free
 * list, never shortened while the core lives); when the thread ends (a pthread key's
 * destructor) the lane is marked orphaned, the writer drains it and marks it free, and the next
 * new thread takes it instead of making one. So lanes are bounded by the threads alive at once.
 * Order: rec_core.c drains the ring, then each lane, numbering events in that order of arrival;
 * events are written sorted by (time, arrival) as before: one thread's events keep their order,
 * two threads' events are ordered by their times (as they were with the ring). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "recorder/rec_lane.h"

enum { LANE_OWNED, LANE_ORPHAN, LANE_FREE };

struct rec_lane {
  /* the producer's line: its head and its view of the tail */
  _Alignas(64) _Atomic uint64_t head;
  uint64_t tail_seen;
  uint64_t mask;
  gmt_event_t *ev;
  rec_lanes_t *owner;
  /* the writer's line */
  _Alignas(64) _Atomic uint64_t tail;
  _Atomic int state;
  struct rec_lane *next; /* set before the lane is listed, never changed */
};

static void sleep_us(long us) {
  struct timespec ts = {0, us * 1000L};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

static int closed(const rec_lanes_t *ls) {
  return atomic_load_explicit(ls->failed, memory_order_relaxed) ||
         atomic_load_explicit(ls->stop_req, memory_order_relaxed);
}

static void lane_orphan(void *arg) {
  rec_lane_t *l = arg;
  atomic_store_explicit(&l->state, LANE_ORPHAN, memory_order_release);
}

int rec_lanes_init(rec_lanes_t *ls, size_t events) {
  /* the rest (the core's flags, drop counter and wake) the caller has set */
  size_t cap = 1024;
  while (cap < events) cap <<= 1;
  ls->capacity = cap;
  atomic_init(&ls->first, NULL);
  ls->key_ok = pthread_key_create(&ls->key, lane_orphan) == 0;
  return ls->key_ok ? 0 : -1;
}

void rec_lanes_destroy(rec_lanes_t *ls) {
  if (ls->key_ok) pthread_key_delete(ls->key); /* no destructor runs for a freed lane */
  ls->key_ok = 0;
  rec_lane_t *l = atomic_load(&ls->first);
  while (l) {
    rec_lane_t *n = l->next;
    free(l->ev);
    free(l);
    l = n;
  }
  atomic_store(&ls->first, NULL);
}

rec_lane_t *rec_lanes_take(rec_lanes_t *ls) {
  if (!ls->key_ok) return NULL;
  rec_lane_t *l = pthread_getspecific(ls->key);
  if (l) return l;
  /* a lane a thread gave back and the writer emptied */
  for (l = atomic_load_explicit(&ls->first, memory_order_acquire); l; l = l->next) {
    int free_ = LANE_FREE;
    if (atomic_compare_exchange_strong(&l->state, &free_, LANE_OWNED)) break;
  }
  if (!l) {
    l = aligned_alloc(64, sizeof *l);
    gmt_event_t *ev = malloc(ls->capacity * sizeof *ev);
    if (!l || !ev) {
      free(l);
      free(ev);
      return NULL;
    }
    memset(l, 0, sizeof *l);
    l->ev = ev;
    l->mask = ls->capacity - 1;
    l->owner = ls;
    atomic_init(&l->state, LANE_OWNED);
    rec_lane_t *head = atomic_load_explicit(&ls->first, memory_order_relaxed);
    do {
      l->next = head;
    } while (!atomic_compare_exchange_weak_explicit(&ls->first, &head, l, memory_order_release,
                                                    memory_order_relaxed));
  }
  l->tail_seen = atomic_load_explicit(&l->tail, memory_order_acquire);
  if (pthread_setspecific(ls->key, l) != 0) {
    atomic_store(&l->state, LANE_ORPHAN); /* the writer frees it once empty */
    return NULL;
  }
  return l;
}

int rec_lane_push(rec_lane_t *l, const gmt_event_t *ev, uint64_t max_wait_ns) {
  rec_lanes_t *ls = l->owner;
  if (closed(ls)) return -1;
  uint64_t h = atomic_load_explicit(&l->head, memory_order_relaxed);
  if (h - l->tail_seen > l->mask) {
    l->tail_seen = atomic_load_explicit(&l->tail, memory_order_acquire);
    /* full: the writer drains every few ms; wake it and wait a little (this thread may hold
     * the framework's lock: a stall costs the job time, a loss costs the trace) */
    for (uint64_t waited = 0; h - l->tail_seen > l->mask; waited += 100000ull) {
      if (waited >= max_wait_ns || closed(ls)) {
        atomic_fetch_add_explicit(ls->drops, 1, memory_order_relaxed);
        return -1;
      }
      ls->wake(ls->ctx);
      sleep_us(100);
      l->tail_seen = atomic_load_explicit(&l->tail, memory_order_acquire);
    }
  }
  l->ev[h & l->mask] = *ev;
  atomic_store_explicit(&l->head, h + 1, memory_order_release);
  /* half full at a quarter's boundary: wake the writer now rather than at its next round */
  if (((h + 1) & (l->mask >> 2)) == 0 && h + 1 - l->tail_seen > (l->mask >> 1)) {
    l->tail_seen = atomic_load_explicit(&l->tail, memory_order_acquire);
    if (h + 1 - l->tail_seen > (l->mask >> 1)) ls->wake(ls->ctx);
  }
  return 0;
}

size_t rec_lanes_drain(rec_lanes_t *ls, void (*take)(void *ctx, const gmt_event_t *evs, size_t n),
                       void *ctx) {
  size_t total = 0;
  for (rec_lane_t *l = atomic_load_explicit(&ls->first, memory_order_acquire); l; l = l->next) {
    int state = atomic_load_explicit(&l->state, memory_order_acquire);
    if (state == LANE_FREE) continue;
    uint64_t t = atomic_load_explicit(&l->tail, memory_order_relaxed);
    uint64_t h = atomic_load_explicit(&l->head, memory_order_acquire);
    while (t != h) {
      /* the part up to the array's end, then the rest */
      size_t at = (size_t)(t & l->mask), n = (size_t)(h - t);
      if (n > l->mask + 1 - at) n = (size_t)(l->mask + 1 - at);
      take(ctx, l->ev + at, n);
      t += n;
      total += n;
    }
    atomic_store_explicit(&l->tail, t, memory_order_release);
    /* orphaned before this drain read its head: everything it pushed is taken */
    if (state == LANE_ORPHAN) atomic_store_explicit(&l->state, LANE_FREE, memory_order_release);
  }
  return total;
}

uint64_t rec_lanes_pushed(rec_lanes_t *ls) {
  uint64_t n = 0;
  for (rec_lane_t *l = atomic_load_explicit(&ls->first, memory_order_acquire); l; l = l->next)
    n += atomic_load_explicit(&l->head, memory_order_relaxed);
  return n;
}
