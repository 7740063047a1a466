/* gpureplay_numbering.c: the trace's addresses numbered (rp_addr_ids_t) on a thread of its own
 * while the trace is decoded into memory, for the replays that will share both.
 *
 * Before a sweep's replays can start, the trace is decoded (~50 ms for a million events here)
 * and its addresses numbered (~20-30 ms): both serial, one core idle. The numbering needs only
 * the events decoded so far, so a thread follows the decoder batch by batch and is done
 * moments after it (bench/RESULTS.md, helper sweep6). The numbers are those of
 * rp_addr_ids_build: the same builder over the same events in the same order.
 *
 * The decoder's array may move when the trace is longer than its index said (a realloc):
 * gr_numbering_pause joins the thread first, and the rest is numbered after the decode. */
#include <pthread.h>
#include <stdlib.h>

#include "replay/tool/gpureplay_trace.h"

struct gr_numbering {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  const gmt_event_t *evs; /* the decoder's array and how much of it is decoded */
  size_t avail;
  int closing; /* no more for the thread: it numbers what is there and ends */
  int running; /* the thread exists (not joined yet) */
  pthread_t tid;
  rp_ids_builder_t *b;
};

static void *follow_decoder(void *arg) {
  gr_numbering_t *nb = arg;
  size_t done = 0;
  for (;;) {
    pthread_mutex_lock(&nb->mu);
    while (nb->avail == done && !nb->closing) pthread_cond_wait(&nb->cv, &nb->mu);
    const gmt_event_t *evs = nb->evs;
    size_t to = nb->avail;
    int last = nb->closing;
    pthread_mutex_unlock(&nb->mu);
    if (to > done) rp_addr_ids_add(nb->b, evs, to); /* a failure is kept in the builder for end */
    done = to;
    if (last) break;
  }
  return NULL;
}

gr_numbering_t *gr_numbering_start(size_t hint) {
  gr_numbering_t *nb = calloc(1, sizeof *nb);
  if (!nb) return NULL;
  nb->b = rp_addr_ids_begin(hint);
  pthread_mutex_init(&nb->mu, NULL);
  pthread_cond_init(&nb->cv, NULL);
  nb->running = nb->b && pthread_create(&nb->tid, NULL, follow_decoder, nb) == 0;
  return nb;
}

void gr_numbering_more(gr_numbering_t *nb, const gmt_event_t *evs, size_t avail) {
  if (!nb || !nb->running) return;
  pthread_mutex_lock(&nb->mu);
  nb->evs = evs;
  nb->avail = avail;
  pthread_cond_signal(&nb->cv);
  pthread_mutex_unlock(&nb->mu);
}

void gr_numbering_pause(gr_numbering_t *nb) {
  if (!nb || !nb->running) return;
  pthread_mutex_lock(&nb->mu);
  nb->closing = 1;
  pthread_cond_signal(&nb->cv);
  pthread_mutex_unlock(&nb->mu);
  pthread_join(nb->tid, NULL);
  nb->running = 0;
}

gm_status_t gr_numbering_end(gr_numbering_t *nb, const gmt_event_t *evs, size_t n, rp_addr_ids_t *out,
                             gm_err_t *err) {
  if (!nb) return rp_addr_ids_build(evs, n, out, err);
  gr_numbering_pause(nb);
  gm_status_t st = rp_addr_ids_end(nb->b, evs, n, out, err); /* the rest, if the thread stopped short */
  nb->b = NULL;
  gr_numbering_cancel(nb);
  return st;
}

void gr_numbering_cancel(gr_numbering_t *nb) {
  if (!nb) return;
  gr_numbering_pause(nb);
  if (nb->b) {
    rp_addr_ids_t none;
    gm_err_t ignored;
    if (rp_addr_ids_end(nb->b, NULL, 0, &none, &ignored) == GM_OK) rp_addr_ids_free(&none);
  }
  pthread_mutex_destroy(&nb->mu);
  pthread_cond_destroy(&nb->cv);
  free(nb);
}
