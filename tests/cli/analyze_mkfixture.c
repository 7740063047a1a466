/* analyze_mkfixture.c: fixtures for the gpuanalyze end-to-end tests, made with the gmt writer.
 *
 *   analyze_mkfixture trace OUT.zst STEPS [RANK]   a training-loop-like trace: each step
 *       allocates 10 blocks of 1 MiB (stream 7) and 5 of 64 KiB (stream 9), then frees them;
 *       peak live = 10 MiB + 320 KiB = 10813440 bytes. The header carries a hostile command
 *       line and a misconfigured PYTORCH_CUDA_ALLOC_CONF; callsites hold HTML.
 *   analyze_mkfixture frees OUT.zst STEPS   the same trace with its allocations left out: only
 *       frees (of memory allocated before recording began); STEPS 0 with `trace`: no events.
 *   analyze_mkfixture results TRACE.zst OUT.json    a results file for TRACE (header start time
 *       and pid) with three runs, one named like an HTML/script injection.
 * Also the fake gpureplay: when called as "gpureplay TRACE --tune -o OUT" (or --sweep), does
 * `results` (with $ANA_FAKE_LOG set, it appends the options it was given, -o and --jobs
 * aside, to that file); "gpureplay --version" says "fake gpureplay 1". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "formats/gmt.h"

#define PEAK 10813440ull

static int die(const gm_err_t *err) {
  fprintf(stderr, "analyze_mkfixture: %s\n", err->msg);
  return 1;
}

static int make_trace(const char *out, long steps, int rank, int only_frees) {
  gmt_header_t h;
  gm_err_t err = {0};
  gmt_header_init(&h);
  h.pid = 31337;
  h.rank = rank;
  h.world_size = rank >= 0 ? 2 : -1;
  h.start_time_ns = 1763700000000000000ull + (uint64_t)(rank + 1);
  h.capture_mode = GMT_CAPTURE_SYNTHETIC;
  h.gpu_total_mem = 80ull << 30;
  if (gmt_header_set(&h.host, "node-<b>1</b>", &err) < 0 ||
      gmt_header_set(&h.gpu_name, "Fake GPU", &err) < 0 ||
      gmt_header_set(&h.tool, "analyze_mkfixture", &err) < 0 ||
      gmt_header_set(&h.command_line, "python train.py --name '<script>alert(1)</script>'", &err) < 0 ||
      gmt_header_kv_set(&h, "PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync,max_split_size_mb:128", &err) < 0)
    return die(&err);
  gmt_writer_t *w = NULL;
  if (gmt_writer_open(&w, out, &h, NULL, &err) < 0) return die(&err);
  uint32_t cs_big = 0, cs_small = 0;
  if (gmt_writer_intern(w, "model.py:40 forward <img src=x onerror=alert(2)>", &cs_big, &err) < 0 ||
      gmt_writer_intern(w, "optim.py:7 step \xe2\x80\xa8</script>", &cs_small, &err) < 0)
    return die(&err);
  uint64_t t = 0;
  for (long s = 0; s < steps; s++) {
    gmt_event_t e;
    for (int phase = only_frees; phase < 2; phase++)
      for (int i = 0; i < 15; i++) {
        memset(&e, 0, sizeof e);
        e.ts_ns = t += 1000;
        e.kind = phase ? GMT_EV_FREE : GMT_EV_ALLOC;
        e.mem_kind = GMT_MEM_DEVICE;
        e.addr = 0x7f0000000000ull + (uint64_t)i * (2u << 20);
        e.size = phase ? 0 : i < 10 ? 1u << 20 : 64u << 10;
        e.stream = i < 10 ? 7 : 9;
        e.callsite = phase ? 0 : i < 10 ? cs_big : cs_small;
        if (gmt_writer_append(w, &e, &err) < 0) return die(&err);
      }
  }
  if (gmt_writer_close(w, &err) < 0) return die(&err);
  gmt_header_free(&h);
  return 0;
}

static int make_results(const char *trace, const char *out) {
  gm_err_t err = {0};
  gmt_reader_t *r = NULL;
  if (gmt_reader_open(&r, trace, &err) < 0) return die(&err);
  const gmt_header_t *h = gmt_reader_header(r);
  FILE *f = fopen(out, "w");
  if (!f) return perror(out), 1;
  static const char *const pol[] = {"pytorch", "pytorch:expandable_segments:True",
                                    "pytorch:</script><script>console.error(\\\"xss\\\")</script>\\u2028"};
  static const unsigned long long res[] = {20971520, 12582912, 14680064};
  /* Like gpureplay, what changes from one run to the next: when it ran and how fast. */
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  long long stamp = (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
  fprintf(f, "{\"format\":\"gpumem-results\",\"version\":1,\"tool\":\"fake gpureplay\",\"created_unix_ns\":%lld,\"runs\":[",
          stamp);
  for (int i = 0; i < 3; i++)
    fprintf(f,
            "%s{\"trace\":\"%s\",\"trace_start_time_ns\":%llu,\"trace_pid\":%u,\"policy\":\"%s\",\"backend\":\"sim\","
            "\"capacity_bytes\":0,\"events\":100,\"peak_reserved_bytes\":%llu,\"peak_allocated_bytes\":%llu,"
            "\"peak_requested_bytes\":%llu,\"lower_bound_bytes\":%llu,\"fragmentation_at_peak\":0.2,"
            "\"fragmentation_mean\":0.1,\"device_alloc_calls\":%d,\"device_free_calls\":0,\"alloc_retries\":0,"
            "\"ooms\":0,\"first_oom_event\":-1,\"first_oom_ts_ns\":-1,\"replay_seconds\":%.9f,"
            "\"events_per_second\":10000.0,\"timeline\":{\"ts_ns\":[0,15000,30000],\"reserved\":[0,%llu,%llu],"
            "\"allocated\":[0,%llu,0],\"requested\":[0,%llu,0]}}",
            i ? "," : "", "fixture.zst", (unsigned long long)h->start_time_ns, h->pid, pol[i], res[i],
            PEAK, PEAK, PEAK, 5 + i, (double)(stamp % 1000003) / 1e9, res[i], res[i], PEAK, PEAK);
  fprintf(f, "]}\n");
  gmt_reader_close(r);
  return fclose(f) == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc >= 4 && strcmp(argv[1], "trace") == 0)
    return make_trace(argv[2], atol(argv[3]), argc > 4 ? atoi(argv[4]) : -1, 0);
  if (argc == 4 && strcmp(argv[1], "frees") == 0) return make_trace(argv[2], atol(argv[3]), -1, 1);
  if (argc == 4 && strcmp(argv[1], "results") == 0) return make_results(argv[2], argv[3]);
  /* fake gpureplay: --version (the key report reuses replays under), TRACE --tune|--sweep
   * [--jobs=N] [-q] -o OUT */
  if (argc == 2 && strcmp(argv[1], "--version") == 0) return puts("fake gpureplay 1") < 0;
  if (argc >= 5 && (strcmp(argv[2], "--tune") == 0 || strcmp(argv[2], "--sweep") == 0)) {
    for (int i = 3; i + 1 < argc; i++)
      if (strcmp(argv[i], "-o") == 0) {
        const char *log = getenv("ANA_FAKE_LOG"); /* what it was asked: one line per call */
        FILE *f = log ? fopen(log, "a") : NULL;
        if (f) {
          for (int k = 2; k < argc; k++)
            if (k != i && k != i + 1 && strncmp(argv[k], "--jobs=", 7) != 0) fprintf(f, "%s%s", k > 2 ? " " : "", argv[k]);
          fputc('\n', f);
          fclose(f);
        }
        return make_results(argv[1], argv[i + 1]);
      }
  }
  fprintf(stderr, "usage: analyze_mkfixture trace OUT STEPS [RANK] | results TRACE OUT\n");
  return 2;
}
