/* replay_bench.c: the replay engine's figures (bench/RESULTS.md, section "replay").
 *
 *   replay_bench speed [EVENTS|TRACE] events/s per policy, one core, events in memory; the
 *                                    reference in the same run is the trace reader's decode
 *                                    speed over the same events and the engine with a no-op
 *                                    policy (the engine's own cost)
 *   replay_bench mem EVENTS|TRACE    max RSS of one pytorch replay fed from the streaming
 *                                    generator (the input is never held): run for 1 M and
 *                                    10 M events, memory must not grow with length
 *   replay_bench one TRACE SPEC [REPS] one setting, REPS times (for a profiler; SPEC none:
 *                                    the engine with the no-op policy)
 *   replay_bench sweep [EVENTS|TRACE] the --sweep grid over an EVENTS trace with 2 jobs, the
 *                                    trace decoded once (preload) vs a reader per job
 *   replay_bench ids [EVENTS|TRACE] [ROUNDS] the address numbering alone (engine_ids.c), median
 *                                    CPU of ROUNDS (21): of the events in memory
 *                                    (rp_addr_ids_build), and batch by batch as a streamed replay
 *                                    reads (65,536 a batch), with the numbers and counting only
 *   REPLAY_BENCH_MAP set in the environment: the engine's block map keyed by address (the
 *   streamed replay's) where events in memory are replayed over their address numbers
 *   replay_bench ratio EVENTS ROUNDS MAX [SPEC]
 *                                    the regression check CI runs (replay_speed_ratio_test):
 *                                    SPEC (pytorch) and the reference, `direct`, alternated on
 *                                    the same events ROUNDS times; the median over rounds of
 *                                    CPU(SPEC) / CPU(direct) must be at most MAX, else exit 1
 *
 * Times are wall clock and, for single-threaded parts, the thread's CPU time too: the build
 * machine is shared, so CPU time is the figure that does not depend on the neighbours. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench/synth/synth.h"
#include "formats/gmt.h"
#include "replay/tool/gpureplay.h"
#include "replay/engine/rp_engine.h"

static double wall(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double cpu(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const gm_err_t *e) {
  fprintf(stderr, "replay_bench: %s\n", e->msg);
  exit(1);
}

/* ---- a no-op policy: the engine's own cost per event ------------------------------------- */

static rp_policy_stats_t null_stats_v;
static gm_status_t null_create(const char *c, const rp_driver_t *d, rp_policy_t **o, gm_err_t *e) {
  *o = (rp_policy_t *)&null_stats_v;
  return GM_OK;
}
static void null_destroy(rp_policy_t *p) {}
static gm_status_t null_alloc(rp_policy_t *p, uint64_t size, uint64_t s, uint64_t *a, gm_err_t *e) {
  static uint64_t next = 4096;
  *a = next += 512;
  return GM_OK;
}
static gm_status_t null_free(rp_policy_t *p, uint64_t a, gm_err_t *e) { return GM_OK; }
static gm_status_t null_empty(rp_policy_t *p, gm_err_t *e) { return GM_OK; }
static void null_stats(const rp_policy_t *p, rp_policy_stats_t *o) { memset(o, 0, sizeof *o); }
static gm_status_t null_check(const rp_policy_t *p, gm_err_t *e) { return GM_OK; }
static const char *null_spec(const rp_policy_t *p) { return "(engine only)"; }
static const rp_policy_ops_t null_ops = {"null", "engine only", null_create, null_destroy, null_alloc,
                                         null_free, null_empty, null_empty, null_stats, null_check,
                                         null_spec};

/* Without a trace file the input is bench/synth's "dynamic" model, seed 1 (a fresh address
 * for every allocation: the worst case for the block map). */
static const synth_opts_t gen_opts = {0, 1, 0, 0, 0, SYNTH_DYNAMIC, 0, 0};

static void out_of_memory(void) {
  fprintf(stderr, "replay_bench: out of memory\n");
  exit(1);
}

static gmt_event_t *make_events(size_t n) {
  gmt_event_t *evs = malloc(n * sizeof *evs);
  if (!evs) out_of_memory();
  synth_opts_t o = gen_opts;
  o.events = n;
  synth_fill(&o, evs);
  return evs;
}

/* All events of a trace file, decoded into memory. */
static gmt_event_t *load_trace(const char *path, size_t *n) {
  gmt_reader_t *r = NULL;
  gm_err_t e;
  if (gmt_reader_open(&r, path, &e) != GM_OK) die(&e);
  size_t cap = 1 << 20, len = 0, k = 0;
  gmt_event_t *evs = malloc(cap * sizeof *evs);
  for (;;) {
    if (len == cap) evs = realloc(evs, (cap *= 2) * sizeof *evs);
    if (!evs) {
      fprintf(stderr, "replay_bench: out of memory\n");
      exit(1);
    }
    gm_status_t st = gmt_reader_next_batch(r, evs + len, cap - len, &k, &e);
    if (st == GM_END) break;
    if (st != GM_OK) die(&e);
    len += k;
  }
  gmt_reader_close(r);
  *n = len;
  return evs;
}

static void write_trace(const char *path, const gmt_event_t *evs, size_t n) {
  gmt_header_t h;
  gmt_header_init(&h);
  h.capture_mode = GMT_CAPTURE_SYNTHETIC;
  h.gpu_total_mem = 80ull << 30;
  gmt_writer_t *w = NULL;
  gm_err_t e;
  if (gmt_writer_open(&w, path, &h, NULL, &e) != GM_OK) die(&e);
  if (gmt_writer_append_n(w, evs, n, &e) != GM_OK) die(&e);
  if (gmt_writer_close(w, &e) != GM_OK) die(&e);
  gmt_header_free(&h);
}

static int quiet; /* replay_one prints nothing (ratio mode prints its own lines) */
/* The events' address numbers (rp_addr_ids_build, once per set of events, as gpureplay does for
 * events in memory), or NULL: the engine's block map keyed by address. */
static const rp_addr_ids_t *bench_ids;

/* bench_ids for evs (built once; CPU seconds into *secs), unless map: NULL. */
static const rp_addr_ids_t *number(const gmt_event_t *evs, size_t n, int map, double *secs) {
  static rp_addr_ids_t ids;
  gm_err_t err;
  *secs = 0;
  if (map) return NULL;
  double c0 = cpu();
  if (rp_addr_ids_build(evs, n, &ids, &err) != GM_OK) die(&err);
  *secs = cpu() - c0;
  return &ids;
}

/* Replay evs with one policy on the simulator; prints and returns CPU events/s. */
static double replay_one(const rp_policy_ops_t *ops, const char *conf, const gmt_event_t *evs,
                         size_t n) {
  rp_backend_t *b = NULL;
  rp_engine_t *e = NULL;
  gm_err_t err;
  rp_sim_opts_t so = {0, 0, 80ull << 30, RP_POOL_HEAP, 0};
  if (rp_sim_backend_create(&so, &b, &err) != GM_OK) die(&err);
  rp_engine_opts_t eo = {-1, 0, 0, 0, 0, RP_EVENTS_RECORDED, 0};
  if (rp_engine_create(ops, conf, b, &eo, &e, &err) != GM_OK) die(&err);
  const rp_addr_ids_t *ids = bench_ids && bench_ids->evs == evs && bench_ids->n == n ? bench_ids : NULL;
  double w0 = wall(), c0 = cpu();
  if (ids && rp_engine_use_ids(e, ids, &err) != GM_OK) die(&err);
  for (size_t i = 0; i < n; i += 4096)
    if (rp_engine_feed_ids(e, evs + i, ids ? ids->id + i : NULL, n - i < 4096 ? n - i : 4096, &err) != GM_OK)
      die(&err);
  double c = cpu() - c0, w = wall() - w0;
  rp_result_t *r = malloc(sizeof *r);
  if (!r || rp_engine_finish(e, r, &err) != GM_OK) die(&err);
  if (!quiet)
    printf("  %-36s %8.2f M events/s CPU  (%6.3f s CPU, %6.3f s wall)  peak reserved %" PRIu64 " MiB\n",
           r->policy, (double)n / c / 1e6, c, w, r->peak_reserved_bytes >> 20);
  free(r);
  rp_engine_destroy(e);
  b->destroy(b);
  return (double)n / c;
}

static int bench_speed(size_t n, const char *file) {
  gmt_event_t *evs = file ? load_trace(file, &n) : make_events(n);
  printf("speed: %zu events (%s) in memory, one thread\n", n, file ? file : "bench/synth dynamic model");
  char path[] = "/tmp/replay_bench_XXXXXX";
  if (file) {
    snprintf(path, sizeof path, "%s", "");
  } else {
    int fd = mkstemp(path);
    if (fd < 0) return 1;
    close(fd);
    write_trace(path, evs, n);
  }
  const char *trace = file ? file : path;
  /* Reference 1: decoding the same events from a trace file. */
  gmt_reader_t *r = NULL;
  gm_err_t err;
  if (gmt_reader_open(&r, trace, &err) != GM_OK) die(&err);
  gmt_event_t *buf = malloc(4096 * sizeof *buf);
  size_t got = 0, k = 0;
  double c0 = cpu();
  while (gmt_reader_next_batch(r, buf, 4096, &k, &err) == GM_OK) got += k;
  double dc = cpu() - c0;
  gmt_reader_close(r);
  free(buf);
  if (!file) unlink(path);
  printf("  %-36s %8.2f M events/s CPU  (%6.3f s CPU)\n", "reference: trace decode (reader)",
         (double)got / dc / 1e6, dc);
  double nc = 0;
  bench_ids = number(evs, n, getenv("REPLAY_BENCH_MAP") != NULL, &nc);
  if (bench_ids)
    printf("  %-36s %8.2f M events/s CPU  (%6.3f s CPU, once per trace; %u addresses)\n", "addresses numbered",
           (double)n / nc / 1e6, nc, bench_ids->count);
  double eng = replay_one(&null_ops, "", evs, n);
  const char *specs[] = {"direct", "pytorch", "pytorch:expandable_segments:True", "bfc:growth", "prealloc",
                         "jax:XLA_PYTHON_CLIENT_PREALLOCATE=false", "tf:TF_FORCE_GPU_ALLOW_GROWTH=true", NULL};
  for (const char *const *s = specs; *s; s++) {
    char name[64];
    size_t l = strcspn(*s, ":");
    snprintf(name, sizeof name, "%.*s", (int)l, *s);
    const rp_policy_ops_t *ops = rp_policy_find(name);
    if (!ops) continue;
    double v = replay_one(ops, (*s)[l] == ':' ? *s + l + 1 : "", evs, n);
    printf("  %-36s ratio to engine-only %.2f, to decode %.2f\n", "", v / eng,
           v / ((double)got / dc));
  }
  free(evs);
  return 0;
}

/* One setting over a trace in memory, reps times (for profilers: perf record replay_bench one). */
static int bench_one(const char *file, const char *spec, int reps) {
  size_t n = 0;
  gmt_event_t *evs = load_trace(file, &n);
  char name[64];
  size_t l = strcspn(spec, ":");
  snprintf(name, sizeof name, "%.*s", (int)l, spec);
  const rp_policy_ops_t *ops = strcmp(name, "none") == 0 ? &null_ops : rp_policy_find(name);
  if (!ops) {
    fprintf(stderr, "replay_bench: unknown policy '%s'\n", name);
    return 1;
  }
  double nc = 0;
  bench_ids = number(evs, n, getenv("REPLAY_BENCH_MAP") != NULL, &nc);
  for (int i = 0; i < reps; i++) replay_one(ops, spec[l] == ':' ? spec + l + 1 : "", evs, n);
  free(evs);
  return 0;
}

/* "RssAnon" and "RssFile" of this process now, in KiB (the reader maps the trace file:
 * those pages are page cache, counted in RSS but not memory the replay holds). */
static void rss_now(long *anon, long *file) {
  char line[256];
  FILE *f = fopen("/proc/self/status", "r");
  *anon = *file = -1;
  while (f && fgets(line, sizeof line, f)) {
    sscanf(line, "RssAnon: %ld", anon);
    sscanf(line, "RssFile: %ld", file);
  }
  if (f) fclose(f);
}

static int bench_mem(size_t n, const char *file) {
  rp_backend_t *b = NULL;
  rp_engine_t *e = NULL;
  gm_err_t err;
  if (rp_sim_backend_create(NULL, &b, &err) != GM_OK) die(&err);
  const rp_policy_ops_t *ops = rp_policy_find("pytorch");
  rp_engine_opts_t eo = {-1, 0, 0, 0, 0, RP_EVENTS_RECORDED, 0};
  if (!ops || rp_engine_create(ops, "", b, &eo, &e, &err) != GM_OK) die(&err);
  synth_gen_t *s = file ? NULL : synth_gen_new(&gen_opts);
  if (!file && !s) out_of_memory();
  gmt_reader_t *r = NULL;
  if (file && gmt_reader_open(&r, file, &err) != GM_OK) die(&err);
  gmt_event_t buf[4096];
  size_t done = 0, max_host = 0;
  long max_anon = 0, anon, fil;
  while (file || done < n) {
    size_t k = 0;
    if (file) {
      gm_status_t st = gmt_reader_next_batch(r, buf, 4096, &k, &err);
      if (st == GM_END) break;
      if (st != GM_OK) die(&err);
    } else {
      k = synth_gen_next(s, buf, 4096);
      if (!k) out_of_memory();
      if (k > n - done) k = n - done;
    }
    if (rp_engine_feed(e, buf, k, &err) != GM_OK) die(&err);
    done += k;
    size_t hb = rp_engine_host_bytes(e);
    if (hb > max_host) max_host = hb;
    if ((done & ((1u << 20) - 1)) < k) { /* about every 1 M events */
      rss_now(&anon, &fil);
      if (anon > max_anon) max_anon = anon;
    }
  }
  rp_result_t *res = malloc(sizeof *res);
  if (!res || rp_engine_finish(e, res, &err) != GM_OK) die(&err);
  rss_now(&anon, &fil);
  if (anon > max_anon) max_anon = anon;
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("mem: %zu events (%s), pytorch: max RSS %ld KiB (anonymous max %ld KiB, file-mapped now "
         "%ld KiB), engine tables max %zu KiB, peak reserved %" PRIu64 " MiB\n",
         done, file ? file : "streamed from the generator", ru.ru_maxrss, max_anon, fil,
         max_host / 1024, res->peak_reserved_bytes >> 20);
  free(res);
  synth_gen_free(s);
  if (r) gmt_reader_close(r);
  rp_engine_destroy(e);
  b->destroy(b);
  return 0;
}

static int bench_sweep(size_t n, const char *file) {
  char path[] = "/tmp/replay_bench_XXXXXX";
  if (file) {
    free(load_trace(file, &n));
    snprintf(path, sizeof path, "%s", "");
  } else {
    gmt_event_t *evs = make_events(n);
    int fd = mkstemp(path);
    if (fd < 0) return 1;
    close(fd);
    write_trace(path, evs, n);
    free(evs);
  }
  const char *trace = file ? file : path;
  int np = 0;
  while (gr_sweep_grid[np]) np++;
  printf("sweep: the --sweep grid (%d policies) over %zu events (%s), 2 jobs, sim\n", np, n,
         file ? file : "bench/synth dynamic model");
  rp_result_t **res = calloc((size_t)np, sizeof *res);
  for (int i = 0; i < np; i++) res[i] = malloc(sizeof(rp_result_t));
  for (int mode = 1; mode >= 0; mode--) {
    gr_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.policies = (const char **)gr_sweep_grid;
    cfg.n_policies = np;
    cfg.cuda_ordinal = -1;
    cfg.jobs = 2;
    cfg.preload = mode;
    gr_trace_info_t info;
    gm_err_t err;
    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    double w0 = wall();
    if (gr_run_trace(&cfg, trace, &info, res, &err) != GM_OK) die(&err);
    double w = wall() - w0;
    getrusage(RUSAGE_SELF, &r1);
    double c = (double)(r1.ru_utime.tv_sec - r0.ru_utime.tv_sec + r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) +
               (double)(r1.ru_utime.tv_usec - r0.ru_utime.tv_usec + r1.ru_stime.tv_usec - r0.ru_stime.tv_usec) * 1e-6;
    printf("  %-36s %6.3f s wall, %6.3f s CPU (all threads; %.3f s per core of 2)\n",
           mode ? "decode once (preload)" : "a reader per job", w, c, c / 2);
  }
  for (int i = 0; i < np; i++) free(res[i]);
  free(res);
  if (!file) unlink(path);
  return 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median CPU seconds of rounds numberings of evs: whole (batch 0), else batch by batch, the
 * numbers written (ids) or only counted. */
static double ids_time(const gmt_event_t *evs, size_t n, int rounds, size_t batch, int ids, uint32_t *count) {
  double *t = malloc((size_t)rounds * sizeof *t);
  uint32_t *id = batch ? malloc(batch * sizeof *id) : NULL;
  gm_err_t err;
  if (!t || (batch && !id)) return 0;
  for (int i = 0; i < rounds; i++) {
    double c0 = cpu();
    if (!batch) {
      rp_addr_ids_t whole;
      if (rp_addr_ids_build(evs, n, &whole, &err) != GM_OK) die(&err);
      t[i] = cpu() - c0;
      *count = whole.count;
      rp_addr_ids_free(&whole);
      continue;
    }
    rp_addr_numbering_t *nb = NULL;
    if (rp_addr_numbering_new(RP_NO_ID, &nb, &err) != GM_OK) die(&err);
    for (size_t j = 0; j < n; j += batch)
      if (rp_addr_numbering_next(nb, evs + j, n - j < batch ? n - j : batch, ids ? id : NULL, &err) != GM_OK) die(&err);
    t[i] = cpu() - c0;
    *count = rp_addr_numbering_count(nb);
    rp_addr_numbering_free(nb);
  }
  qsort(t, (size_t)rounds, sizeof *t, cmp_double);
  double med = t[rounds / 2];
  free(t);
  free(id);
  return med;
}

static int bench_numbering(size_t n, const char *file, int rounds) {
  if (rounds < 1 || rounds > 1000) rounds = 21;
  gmt_event_t *evs = file ? load_trace(file, &n) : make_events(n);
  printf("ids: %zu events (%s) in memory, one thread, median of %d\n", n, file ? file : "bench/synth dynamic model",
         rounds);
  const char *what[] = {"numbered whole", "numbered by batches", "counted by batches"};
  for (int k = 0; k < 3; k++) {
    uint32_t count = 0;
    double c = ids_time(evs, n, rounds, k ? 65536 : 0, k < 2, &count);
    printf("  %-36s %8.2f M events/s CPU  (%6.2f ms CPU; %u addresses)\n", what[k], (double)n / c / 1e6, c * 1e3, count);
  }
  free(evs);
  return 0;
}

/* The replay-speed regression check: a ratio of CPU times measured in the same process, round
 * after round, so the machine's load cancels out (an absolute speed would not survive a shared
 * 2-core CI machine). The median of the per-round ratios; the rounds alternate which runs first. */
static int bench_ratio(size_t n, int rounds, double max, const char *spec) {
  if (n == 0 || rounds < 1 || rounds > 1000 || !(max > 0)) {
    fprintf(stderr, "replay_bench: ratio EVENTS ROUNDS MAX: bad arguments\n");
    return 2;
  }
  char name[64];
  size_t l = strcspn(spec, ":");
  snprintf(name, sizeof name, "%.*s", (int)l, spec);
  const rp_policy_ops_t *ops = rp_policy_find(name), *ref = rp_policy_find("direct");
  if (!ops || !ref) {
    fprintf(stderr, "replay_bench: unknown policy '%s'\n", ops ? "direct" : name);
    return 2;
  }
  const char *conf = spec[l] == ':' ? spec + l + 1 : "";
  gmt_event_t *evs = make_events(n);
  double *ratio = malloc((size_t)rounds * sizeof *ratio);
  if (!ratio) out_of_memory();
  quiet = 1;
  double nc = 0;
  bench_ids = number(evs, n, getenv("REPLAY_BENCH_MAP") != NULL, &nc);
  replay_one(ref, "", evs, n); /* warm-up: page in the events, grow the heap */
  printf("ratio: %s against direct, %zu events (bench/synth dynamic model), %d rounds, CPU time\n", spec,
         n, rounds);
  for (int i = 0; i < rounds; i++) {
    double v, r;
    if (i % 2) {
      v = replay_one(ops, conf, evs, n);
      r = replay_one(ref, "", evs, n);
    } else {
      r = replay_one(ref, "", evs, n);
      v = replay_one(ops, conf, evs, n);
    }
    ratio[i] = r / v; /* events/s of direct over the policy's = CPU(policy) / CPU(direct) */
    printf("  round %2d: %s %6.2f M events/s, direct %6.2f M events/s, CPU ratio %.3f\n", i + 1, spec, v / 1e6,
           r / 1e6, ratio[i]);
  }
  qsort(ratio, (size_t)rounds, sizeof *ratio, cmp_double);
  double med = rounds % 2 ? ratio[rounds / 2] : (ratio[rounds / 2 - 1] + ratio[rounds / 2]) / 2;
  int ok = med <= max;
  printf("%s: median CPU(%s) / CPU(direct) = %.3f (min %.3f, max %.3f); limit %.3f\n", ok ? "ok" : "FAIL", spec,
         med, ratio[0], ratio[rounds - 1], max);
  free(ratio);
  free(evs);
  return ok ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: replay_bench speed|mem|sweep|ids [EVENTS] | ratio EVENTS ROUNDS MAX [SPEC]\n");
    return 2;
  }
  /* The argument is an event count, or a trace file to use instead of the generator. */
  const char *file = argc > 2 && access(argv[2], R_OK) == 0 ? argv[2] : NULL;
  size_t n = argc > 2 && !file ? (size_t)strtoull(argv[2], NULL, 10) : 1000000;
  if (strcmp(argv[1], "one") == 0 && file && argc > 3)
    return bench_one(file, argv[3], argc > 4 ? atoi(argv[4]) : 1);
  if (strcmp(argv[1], "speed") == 0) return bench_speed(n, file);
  if (strcmp(argv[1], "mem") == 0) return bench_mem(n, file);
  if (strcmp(argv[1], "ids") == 0) return bench_numbering(n, file, argc > 3 ? atoi(argv[3]) : 21);
  if (strcmp(argv[1], "sweep") == 0) return bench_sweep(n, file);
  if (strcmp(argv[1], "ratio") == 0 && argc > 4)
    return bench_ratio(n, atoi(argv[3]), strtod(argv[4], NULL), argc > 5 ? argv[5] : "pytorch");
  fprintf(stderr, "replay_bench: unknown mode '%s'\n", argv[1]);
  return 2;
}
