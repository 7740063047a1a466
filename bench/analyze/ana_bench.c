/* ana_bench.c: the analyzer's figures: load rate into SQLite (events/s), report time and HTML
 * size for a large synthetic training-loop trace (bench/synth).
 *
 * References measured in the same run, on the same trace and machine:
 *  - decode: the trace reader plus the analyzer's one-pass scan, no SQLite (the ceiling);
 *  - naive: one prepared single-row INSERT per event in one transaction, no batching, default
 *    PRAGMAs (the textbook loader), on the first 1 M events.
 * Wall and CPU time are both reported: the machine is shared, so wall time includes waiting.
 *
 * usage: ana_bench [EVENTS (default 10000000)] [DIR (default $TMPDIR or /tmp)] */
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "analyze/ana.h"
#include "bench/synth/synth.h"

static double now(clockid_t c) {
  struct timespec t;
  clock_gettime(c, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

typedef struct timer {
  double wall, cpu;
} timer_t_;

static timer_t_ start(void) { return (timer_t_){now(CLOCK_MONOTONIC), now(CLOCK_PROCESS_CPUTIME_ID)}; }
static timer_t_ stop(timer_t_ t0) {
  return (timer_t_){now(CLOCK_MONOTONIC) - t0.wall, now(CLOCK_PROCESS_CPUTIME_ID) - t0.cpu};
}

static int check(gm_status_t s, gm_err_t *err, const char *what) {
  if (s < 0) {
    fprintf(stderr, "ana_bench: %s: %s\n", what, err->msg);
    exit(1);
  }
  return 0;
}

static long long file_size(const char *p) {
  struct stat sb;
  return stat(p, &sb) == 0 ? (long long)sb.st_size : -1;
}

int main(int argc, char **argv) {
  uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 10000000ull;
  const char *dir = argc > 2 ? argv[2] : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  char trace[4096], db[4096], html[4096], naive[4096], csv[4096];
  snprintf(trace, sizeof trace, "%s/ana_bench.%d.zst", dir, getpid());
  snprintf(db, sizeof db, "%s/ana_bench.%d.db", dir, getpid());
  snprintf(html, sizeof html, "%s/ana_bench.%d.html", dir, getpid());
  snprintf(naive, sizeof naive, "%s/ana_bench_naive.%d.db", dir, getpid());
  snprintf(csv, sizeof csv, "%s/ana_bench_csv.%d", dir, getpid());
  gm_err_t err = {0};

  synth_opts_t so = {.events = n, .seed = 1};
  timer_t_ t = start();
  check(synth_write(&so, trace, NULL, &err), &err, "synth_write");
  t = stop(t);
  printf("trace: %" PRIu64 " synthetic events (bench/synth, seed 1), %lld bytes, written in %.2f s\n", n,
         file_size(trace), t.wall);

  /* Reference 1: decode + scan only. */
  gmt_header_t h;
  ana_summary_t sum;
  gmt_reader_stats_t rs;
  t = start();
  check(ana_trace_summarize(trace, GMT_READ_STRICT, &h, &sum, &rs, NULL, 0, &err), &err, "summarize");
  t = stop(t);
  uint64_t hstart = h.start_time_ns;
  unsigned hpid = h.pid;
  gmt_header_free(&h);
  double dec_rate = (double)n / t.wall;
  printf("reference decode+scan (no SQLite): %.2f s wall, %.2f s cpu: %.2f M events/s\n", t.wall, t.cpu,
         dec_rate / 1e6);

  /* The figure: gpuanalyze load. */
  unlink(db);
  ana_db_t *d = NULL;
  check(ana_db_open(&d, db, &err), &err, "open");
  const char *in[] = {trace};
  ana_load_stats_t st = {0};
  t = start();
  check(ana_db_load(d, in, 1, NULL, &st, &err), &err, "load");
  t = stop(t);
  double load_rate = (double)n / t.wall, load_cpu_rate = (double)n / t.cpu;
  printf("LOAD: %" PRIu64 " events in %.2f s wall (%.2f s cpu): %.2f M events/s wall, %.2f M events/s cpu"
         " (target >= 1 M/s); db %lld bytes\n",
         st.events, t.wall, t.cpu, load_rate / 1e6, load_cpu_rate / 1e6, file_size(db));
  printf("  load / decode+scan = %.2f\n", load_rate / dec_rate);
  ana_db_close(d);

  /* What `gpuanalyze report TRACE` loads: the summaries the report reads, no event rows. */
  {
    char sdb[4200];
    snprintf(sdb, sizeof sdb, "%s.summaries", db);
    unlink(sdb);
    ana_db_t *s = NULL;
    check(ana_db_open(&s, sdb, &err), &err, "open");
    ana_load_opts_t sum_o = {0};
    sum_o.summary_only = 1;
    ana_load_stats_t sst = {0};
    t = start();
    check(ana_db_load(s, in, 1, &sum_o, &sst, &err), &err, "load summaries");
    t = stop(t);
    ana_db_close(s);
    printf("LOAD (report: summaries only, no event rows): %.2f s wall (%.2f s cpu): %.2f M events/s cpu; db %lld bytes\n",
           t.wall, t.cpu, (double)n / t.cpu / 1e6, file_size(sdb));
    unlink(sdb);
  }

  /* A sweep's worth of runs for the trace (what gpureplay --sweep writes: 16 policies, each
   * with a full 2048-point timeline), so the HTML carries the largest timelines it can get. */
  char res[4200];
  snprintf(res, sizeof res, "%s/ana_bench.%d.json", dir, getpid());
  FILE *rf = fopen(res, "w");
  if (!rf) return perror(res), 1;
  fprintf(rf, "{\"format\":\"gpumem-results\",\"version\":1,\"runs\":[");
  uint64_t dur = sum.last_ts_ns;
  for (int k = 0; k < 16; k++) {
    fprintf(rf, "%s{\"policy\":\"pytorch:max_split_size_mb:%d\",\"trace_start_time_ns\":%" PRIu64
                ",\"trace_pid\":%u,\"events\":%" PRIu64 ",\"peak_reserved_bytes\":%" PRIu64
                ",\"peak_allocated_bytes\":%" PRIu64 ",\"peak_requested_bytes\":%" PRIu64
                ",\"lower_bound_bytes\":%" PRIu64 ",\"fragmentation_at_peak\":0.1,\"device_alloc_calls\":1,"
                "\"device_free_calls\":1,\"alloc_retries\":0,\"ooms\":0,",
            k ? "," : "", 64 * (k + 1), hstart, hpid, n, sum.peak_live_bytes + (uint64_t)k * (64u << 20),
            sum.peak_live_bytes, sum.peak_live_bytes, sum.peak_live_bytes);
    /* The largest peak snapshot gpureplay writes (48 segments of 64 live spans each), so the
     * waste split and the segment map cost what they can at most. */
    uint64_t segsz = 20u << 20;
    fprintf(rf, "\"peak_snapshot\":{\"event\":1,\"ts_ns\":%" PRIu64 ",\"reserved_bytes\":%" PRIu64
                ",\"allocated_bytes\":%" PRIu64 ",\"requested_bytes\":%" PRIu64 ",\"rounding_bytes\":0,"
                "\"free_in_segments_bytes\":%u,\"cached_segments_bytes\":0,\"segments\":200,\"segments_in_use\":200,"
                "\"map\":[",
            dur / 2, sum.peak_live_bytes + (uint64_t)k * (64u << 20), sum.peak_live_bytes, sum.peak_live_bytes,
            k * (64u << 20));
    for (int g = 0; g < 48; g++) {
      fprintf(rf, "%s{\"addr\":%" PRIu64 ",\"size\":%" PRIu64 ",\"live_bytes\":%" PRIu64 ",\"blocks\":64,\"spans\":[",
              g ? "," : "", (uint64_t)g * segsz, segsz, segsz / 2);
      for (int q = 0; q < 64; q++) fprintf(rf, "%s[%" PRIu64 ",%" PRIu64 "]", q ? "," : "", segsz / 64 * (uint64_t)q, segsz / 128);
      fputs("]}", rf);
    }
    fputs("]},\"timeline\":{", rf);
    const char *names[4] = {"ts_ns", "reserved", "allocated", "requested"};
    for (int a = 0; a < 4; a++) {
      fprintf(rf, "%s\"%s\":[", a ? "," : "", names[a]);
      for (int i = 0; i < 2048; i++)
        fprintf(rf, "%s%" PRIu64, i ? "," : "",
                a == 0 ? dur / 2048 * (uint64_t)i : (sum.peak_live_bytes / 2048) * (uint64_t)((i * 7 + k) % 2048));
      fputc(']', rf);
    }
    fprintf(rf, "}}");
  }
  fprintf(rf, "]}\n");
  fclose(rf);
  check(ana_db_open(&d, db, &err), &err, "open");
  const char *rin[] = {res};
  ana_load_stats_t rst = {0};
  check(ana_db_load(d, rin, 1, NULL, &rst, &err), &err, "load results");
  ana_db_close(d);
  printf("results: 16 runs x 2048 timeline points loaded\n");

  /* The report, from a freshly opened database as a user would run it. */
  check(ana_db_open(&d, db, &err), &err, "open");
  t = start();
  check(ana_report_html(d, html, &err), &err, "html");
  timer_t_ th = stop(t);
  FILE *devnull = fopen("/dev/null", "w");
  t = start();
  check(ana_report_text(d, devnull, &err), &err, "text");
  timer_t_ tt = stop(t);
  t = start();
  check(ana_report_csv(d, csv, &err), &err, "csv");
  timer_t_ tc = stop(t);
  fclose(devnull);
  ana_db_close(d);
  printf("REPORT: html %.2f s wall (%.2f s cpu), text %.2f s, csv %.2f s (target <= 10 s)\n", th.wall, th.cpu,
         tt.wall, tc.wall);
  printf("HTML: %lld bytes (target <= 5 MB)\n", file_size(html));

  /* Reference 2: the naive loader on the first min(n, 1 M) events. */
  uint64_t nn = n < 1000000 ? n : 1000000;
  unlink(naive);
  sqlite3 *s3 = NULL;
  sqlite3_open(naive, &s3);
  sqlite3_exec(s3, ana_schema_sql(), NULL, NULL, NULL);
  gmt_reader_t *r = NULL;
  check(gmt_reader_open(&r, trace, &err), &err, "open trace");
  sqlite3_stmt *ins = NULL;
  sqlite3_prepare_v2(s3,
                     "INSERT INTO events(trace_id,ts_ns,kind,device,stream,addr,size,mem_kind,flags,corr_id,callsite,context)"
                     " VALUES(1,?,?,?,?,?,?,?,?,?,?,?)",
                     -1, &ins, NULL);
  t = start();
  sqlite3_exec(s3, "BEGIN", NULL, NULL, NULL);
  gmt_event_t ev;
  for (uint64_t i = 0; i < nn && gmt_reader_next(r, &ev, &err) == GM_OK; i++) {
    sqlite3_bind_int64(ins, 1, (sqlite3_int64)ev.ts_ns);
    sqlite3_bind_int(ins, 2, ev.kind);
    sqlite3_bind_int(ins, 3, ev.device);
    sqlite3_bind_int64(ins, 4, (sqlite3_int64)ev.stream);
    sqlite3_bind_int64(ins, 5, (sqlite3_int64)ev.addr);
    sqlite3_bind_int64(ins, 6, (sqlite3_int64)ev.size);
    sqlite3_bind_int(ins, 7, ev.mem_kind);
    sqlite3_bind_int64(ins, 8, ev.flags);
    sqlite3_bind_int64(ins, 9, (sqlite3_int64)ev.corr_id);
    sqlite3_bind_int64(ins, 10, ev.callsite);
    sqlite3_bind_int64(ins, 11, ev.context);
    sqlite3_step(ins);
    sqlite3_reset(ins);
  }
  sqlite3_exec(s3, "COMMIT", NULL, NULL, NULL);
  t = stop(t);
  sqlite3_finalize(ins);
  sqlite3_close(s3);
  gmt_reader_close(r);
  double naive_rate = (double)nn / t.wall;
  printf("reference naive loader (1 row per INSERT, events only, %" PRIu64 " events): %.2f s: %.2f M events/s\n",
         nn, t.wall, naive_rate / 1e6);
  printf("  load / naive = %.2f (the load also pairs allocs with frees and fills the histograms and timeline)\n", load_rate / naive_rate);

  unlink(trace);
  unlink(res);
  unlink(db);
  unlink(naive);
  /* KEEP_HTML=PATH: keep the report there (to open it in a browser). */
  if (getenv("KEEP_HTML") && rename(html, getenv("KEEP_HTML")) != 0) perror("KEEP_HTML");
  unlink(html);
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", csv);
  if (system(cmd) != 0) fprintf(stderr, "ana_bench: could not remove %s\n", csv);
  return 0;
}
