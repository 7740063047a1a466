/* replay_synth_main.c: write a synthetic training-like trace of N events: bench/synth's
 * "dynamic" model (what bench/replay's own generator was; the same events for a seed).
 *   replay_synth OUT.zst [EVENTS] [SEED]     (defaults: 1000000 events, seed 1)
 * = gmsynth -o OUT.zst --model dynamic --events EVENTS --seed SEED; kept because the
 * gpureplay CLI tests and tests/gpu/replay_gpu.sh call it with this command line. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/gm_base.h"
#include "bench/synth/synth.h"
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
  synth_opts_t o = {events, seed, 0, 0, 0, SYNTH_DYNAMIC, 0, 0};
  if (synth_write(&o, argv[1], NULL, &err) != GM_OK) {
    gm_err_wrap(&err, "cannot write '%s'", argv[1]);
    gm_log_err(&err);
    return 1;
  }
  return 0;
}
