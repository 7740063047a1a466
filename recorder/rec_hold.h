/* rec_hold.h: the registry of held events inside the recorder's core (rec_hold.c); private to
 * rec_core.c and rec_hold.c. The producers' side is in rec_core.h. */
#ifndef REC_HOLD_H
#define REC_HOLD_H

#include <pthread.h>
#include <stdatomic.h>

#include "recorder/rec_core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rec_holds {
  pthread_mutex_t mu;          /* opening and closing slots */
  _Atomic(rec_hold_t *) head;  /* every slot ever made, newest first; freed by rec_holds_fini */
} rec_holds_t;

void rec_holds_init(rec_holds_t *hs);
void rec_holds_fini(rec_holds_t *hs);
rec_hold_t *rec_holds_open(rec_holds_t *hs);
/* The slot's thread has ended: what it still holds goes into ring (or is counted in *lost
 * when the ring is full), and the slot waits for another thread. */
void rec_holds_close(rec_holds_t *hs, rec_hold_t *h, rec_ring_t *ring, _Atomic uint64_t *lost);
/* Writer thread: every held event pushed into ring. Returns how many could not be (ring full:
 * they stay held; drain the ring and call again). */
size_t rec_holds_steal(rec_holds_t *hs, rec_ring_t *ring);
/* Writer thread: a ring entry -> the events it stands for (1, or 2 for REC_F_FREE_PAIR). */
size_t rec_hold_expand(const gmt_event_t *in, gmt_event_t out[2]);

#ifdef __cplusplus
}
#endif
#endif /* REC_HOLD_H */
