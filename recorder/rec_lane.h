/* rec_lane.h: per-thread single-producer queues into the recorder's core (rec_lane.c); the
 * core's own (rec_core.c). Sources push through rec_core.h's rec_core_lane / rec_lane_push. */
#ifndef REC_LANE_H
#define REC_LANE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "formats/gmt.h"
#include "recorder/rec_core.h"

typedef struct rec_lanes {
  _Atomic(rec_lane_t *) first; /* every lane made, newest first */
  size_t capacity;             /* events per lane, a power of two */
  pthread_key_t key;           /* the calling thread's lane; its destructor gives it back */
  int key_ok;
  /* the core's: a push fails once either flag is set, counts its drop, wakes the writer */
  const _Atomic int *failed, *stop_req;
  _Atomic uint64_t *drops;
  void (*wake)(void *ctx);
  void *ctx;
} rec_lanes_t;

/* events: each lane's capacity (rounded up to a power of two, at least 1024). -1: no lanes
 * (no thread key): rec_lanes_take then returns NULL and sources push through the ring. */
int rec_lanes_init(rec_lanes_t *ls, size_t events);
/* After every producer is done (the core's end). */
void rec_lanes_destroy(rec_lanes_t *ls);
/* The calling thread's lane: its own, a free one, or a new one; NULL if none can be had. */
rec_lane_t *rec_lanes_take(rec_lanes_t *ls);
/* The writer thread: hands every event pushed so far to take(), lane by lane, each lane's in
 * order; frees the lanes of ended threads once empty. Returns how many. */
size_t rec_lanes_drain(rec_lanes_t *ls, void (*take)(void *ctx, const gmt_event_t *evs, size_t n),
                       void *ctx);
/* Events pushed into every lane so far. */
uint64_t rec_lanes_pushed(rec_lanes_t *ls);

#endif
