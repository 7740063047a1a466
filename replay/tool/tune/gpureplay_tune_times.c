/* gpureplay_tune_times.c: where --tune's time goes, phase by phase, on stderr when
 * GPUREPLAY_TUNE_TIMES is set (bench/analyze/report_2core.sh's breakdown; issue 28 item 2):
 * each line the phase's wall and process CPU seconds and the replays it ran. Nothing is printed
 * otherwise, and nothing here changes what the tuner does. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "replay/tool/tune/gpureplay_tune.h"

static double clock_s(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void gr_tune_times_start(gr_tune_times_t *tt) {
  const char *e = getenv("GPUREPLAY_TUNE_TIMES");
  tt->on = e && *e && *e != '0';
  tt->wall = clock_s(CLOCK_MONOTONIC);
  tt->cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID);
  tt->replays = 0;
}

void gr_tune_times_mark(gr_tune_times_t *tt, const char *phase, uint64_t replays) {
  if (!tt->on) return;
  double w = clock_s(CLOCK_MONOTONIC), c = clock_s(CLOCK_PROCESS_CPUTIME_ID);
  fprintf(stderr, "gpureplay: tune phase %-28s wall %7.3f s  cpu %7.3f s  replays %" PRIu64 "\n", phase, w - tt->wall,
          c - tt->cpu, replays - tt->replays);
  tt->wall = w;
  tt->cpu = c;
  tt->replays = replays;
}
