/* pred_bench.c: how long `gpurec predict` takes on large recordings.
 *   pred_bench [EVENTS] [DIR]   (default 5000000 events, DIR $TMPDIR or /tmp)
 * Writes two synthetic recordings of one job (bench/synth, transformer, callsites on) at batch
 * 8 and 16 with EVENTS events each, then predicts batch 32 from them through pred_run (what
 * `gpurec predict` calls), three times, and prints wall-clock and CPU seconds (the process's,
 * so the zstd work of reader and writer counts) and events per second. The recordings are
 * written once and reused while they exist. Also checks the prediction: every size equal to a
 * recording made at batch 32 (written too). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "bench/synth/synth.h"
#include "formats/gmt.h"
#include "recorder/predict/pred.h"

static double now(clockid_t c) {
  struct timespec t;
  clock_gettime(c, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int make(const char *path, unsigned batch, uint64_t events) {
  struct stat st;
  if (stat(path, &st) == 0) return 0;
  synth_opts_t o;
  memset(&o, 0, sizeof o);
  o.events = events;
  o.seed = 1;
  o.batch = batch;
  o.callsites = 1;
  gm_err_t err;
  if (synth_write(&o, path, NULL, &err) != GM_OK) {
    fprintf(stderr, "pred_bench: cannot write '%s': %s\n", path, err.msg);
    return -1;
  }
  return 0;
}

/* Sizes of both traces equal, event for event? */
static int same_sizes(const char *a, const char *b) {
  gmt_reader_t *ra, *rb;
  gm_err_t err;
  if (gmt_reader_open(&ra, a, &err) != GM_OK) return 0;
  if (gmt_reader_open(&rb, b, &err) != GM_OK) {
    gmt_reader_close(ra);
    return 0;
  }
  gmt_event_t ea, eb;
  int same = 1;
  for (;;) {
    gm_status_t sa = gmt_reader_next(ra, &ea, &err), sb = gmt_reader_next(rb, &eb, &err);
    if (sa != sb) same = 0;
    if (sa != GM_OK || sb != GM_OK) break;
    if (ea.kind != eb.kind || ea.size != eb.size) {
      same = 0;
      break;
    }
  }
  gmt_reader_close(ra);
  gmt_reader_close(rb);
  return same;
}

int main(int argc, char **argv) {
  uint64_t events = argc > 1 ? strtoull(argv[1], NULL, 10) : 5000000;
  const char *dir = argc > 2 ? argv[2] : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  char a[4096], b[4096], real[4096], out[4096];
  snprintf(a, sizeof a, "%s/pred_bench_%llu_b8.zst", dir, (unsigned long long)events);
  snprintf(b, sizeof b, "%s/pred_bench_%llu_b16.zst", dir, (unsigned long long)events);
  snprintf(real, sizeof real, "%s/pred_bench_%llu_b32.zst", dir, (unsigned long long)events);
  snprintf(out, sizeof out, "%s/pred_bench_%llu_predicted32.zst", dir, (unsigned long long)events);
  if (make(a, 8, events) < 0 || make(b, 16, events) < 0 || make(real, 32, events) < 0) return 1;
  pred_input_t in[2] = {{a, 8}, {b, 16}};
  pred_opts_t o = {32, -1, "pred_bench"};
  printf("recordings: 2 x %llu events (batch 8, 16) -> batch 32\n", (unsigned long long)events);
  for (int rep = 0; rep < 3; rep++) {
    pred_result_t res;
    gm_err_t err;
    double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID);
    gm_status_t s = pred_run(in, 2, &o, out, &res, &err);
    double w = now(CLOCK_MONOTONIC) - w0, c = now(CLOCK_PROCESS_CPUTIME_ID) - c0;
    if (s != GM_OK || res.refused) {
      fprintf(stderr, "pred_bench: %s\n", s != GM_OK ? err.msg : res.reason);
      return 1;
    }
    printf("run %d: %.2f s wall, %.2f s CPU; read %.2f M events/s (wall), wrote %llu events, confidence %.4f\n", rep + 1, w,
           c, 2.0 * (double)events / w / 1e6, (unsigned long long)res.events, res.confidence);
  }
  int same = same_sizes(out, real);
  printf("prediction equals the batch-32 recording in every event's kind and size: %s\n", same ? "yes" : "NO");
  return same ? 0 : 1;
}
