/* replay_synth_main.c: write a synthetic training-like trace (synth.h) of N events.
 *   replay_synth OUT.zst [EVENTS] [SEED]     (defaults: 1000000 events, seed 1)
 * For the replay benchmarks and the gpureplay CLI tests. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/gm_base.h"
#include "bench/replay/synth.h"
#include "formats/gmt.h"

int main(int argc, char **argv) {
  gm_log_init("replay_synth", GM_LOG_WARN);
  if (argc < 2 || argc > 4) {
    fprintf(stderr, "usage: replay_synth OUT.zst [EVENTS] [SEED]\n");
    return 2;
  }
  uint64_t events = 1000000, seed = 1;
  gm_err_t err;
  if ((argc > 2 && gm_parse_u64(argv[2], &events, &err) != GM_OK) ||
      (argc > 3 && gm_parse_u64(argv[3], &seed, &err) != GM_OK)) {
    fprintf(stderr, "replay_synth: %s\n", err.msg);
    return 2;
  }
  gmt_header_t h;
  gmt_header_init(&h);
  h.capture_mode = GMT_CAPTURE_SYNTHETIC;
  h.start_time_ns = 1795262059000000000ull;
  h.gpu_total_mem = 80ull << 30;
  h.pid = 4242;
  gmt_writer_t *w = NULL;
  if (gmt_header_set(&h.tool, "replay_synth", &err) != GM_OK ||
      gmt_writer_open(&w, argv[1], &h, NULL, &err) != GM_OK) {
    gm_log_err(&err);
    gmt_header_free(&h);
    return 1;
  }
  gr_synth_t *s = gr_synth_new(seed, 0);
  gmt_event_t buf[4096];
  uint64_t done = 0;
  gm_status_t st = GM_OK;
  while (s && done < events && st == GM_OK) {
    size_t n = gr_synth_next(s, buf, 4096);
    if (n > events - done) n = (size_t)(events - done);
    st = gmt_writer_append_n(w, buf, n, &err);
    done += n;
  }
  gr_synth_free(s);
  if (st == GM_OK) st = gmt_writer_close(w, &err);
  else gmt_writer_abandon(w);
  gmt_header_free(&h);
  if (st != GM_OK) {
    gm_err_wrap(&err, "cannot write '%s'", argv[1]);
    gm_log_err(&err);
    return 1;
  }
  return 0;
}
