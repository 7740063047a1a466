/* stream_entry_bench.c: the streamed default's tracker body (recorder/rec_torch_entry.c) per entry,
 * on the CPU, without PyTorch or a GPU: synthetic TraceEntry buffers (torch 2.11's layout) fed to
 * rec_ts_entry() from 1 or 2 threads into a real recorder core (its writer thread compressing
 * into a file), in a training step's pattern: per allocation an alloc, a free_requested and its
 * free_completed at once (1 in 32 completed later, as after record_stream), a segment alloc and
 * free every 64 allocations.
 *
 * States, one block each per round, the order rotated round by round (tests/gpu/stream_cost.py's
 * method: this VM is loaded, so only paired differences within a round mean anything):
 *   idle:    the tracker returns at once (REC_TS_BENCH_IGNORE): the harness's own cost;
 *   entries: every entry into the ring, no callsite (REC_TS_BENCH_NO_SITES);
 *   sites:   and each alloc's callsite (REC_TS_BENCH_FULL: the streamed default; without --sites
 *            there is no Python, as in autograd's thread: the same as entries).
 * Each block's figure is its threads' CPU time (CLOCK_THREAD_CPUTIME_ID) per entry fed, or with
 * --inside the counter's time (rdtscp) around each allocation's entries only, eviction and gap
 * left out.
 * Printed: ns per entry added over idle (median over rounds of the paired differences, 95 %
 * interval). Old and new code are compared by running the two builds alternately.
 * --evict KIB: between allocations each thread writes one word in each of --touch (64) lines of
 * its own KIB buffer (rotating through it), as a step's working set evicts the recorder's lines: the
 * recorder's cost per entry then counts its cache misses too.
 * --code N: and calls N of 4096 functions, each on its own line (their code evicts the recorder's
 * code from the instruction cache and L2, as PyTorch's and Python's code does in a step).
 * --gap NS: and spins NS between allocations (the rest of a step's work: keeps the rate of entries
 * within what the writer thread drains, as in a real job, ~1-2 M entries/s at most).
 * --ring EVENTS: the recorder's ring of that many events (default the core's, 65536: 4 MiB of
 * slots). A ring larger than this machine's L3 (--ring 1048576: 64 MiB) makes each slot's line
 * come from memory when a push comes back to it, as it comes from a far L3 slice on the GPU
 * machine's Xeon (its cross-core and L3 latencies are 2-3x this VM's).
 * --python (with STREAM_LIB, loaded by stream_entry_py.py): the callsites from this process's
 * CPython (rec_pyframe.c, the real frame reader), the one worker being the calling thread.
 * --sites: each alloc reads a callsite from a fake 8-frame Python stack (7 library frames, then
 * the program's), through rec_callsites_capture as in a real run; without it, a Python-less
 * caller (no callsite).
 * Usage: stream_entry_bench [--threads N] [--rounds R] [--block CYCLES] [--evict KIB [--touch LINES]] [--code N] [--gap NS] [--ring EVENTS] [--sites] [--inside]
 *        [--out FILE]   (FILE: the trace written meanwhile, removed at the end; default /tmp) */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "recorder/rec_callsite.h"
#include "recorder/rec_core.h"
#include "recorder/rec_torch_entry.h"

/* The recorder's functions this bench calls, per build compared: the working tree's, and with
 * STREAM_AB (stream_entry_ab.sh) an older commit's, its symbols renamed old_* by objcopy. */
typedef struct impl {
  const char *name;
  gm_status_t (*core_start)(rec_core_t **, const rec_config_t *, const rec_hooks_t *, gm_err_t *);
  void (*gpu_ready)(rec_core_t *);
  gm_status_t (*core_stop)(rec_core_t *);
  void (*stats)(const rec_core_t *, rec_core_stats_t *);
  void (*destroy)(rec_core_t *);
  gm_status_t (*cs_create)(rec_callsites_t **, rec_cs_mode_t, const rec_pyframes_t *, unsigned, gm_err_t *);
  void (*cs_destroy)(rec_callsites_t *);
  const char *(*cs_string)(const rec_callsites_t *, uint32_t);
  void (*start)(rec_core_t *, rec_callsites_t *, uint64_t (*)(void *));
  void (*entry)(const void *, const void *);
  int (*bench)(int);
  uint64_t (*lost)(void);
} impl_t;

#define IMPL(name, p)                                                                          \
  {name, p##rec_core_start, p##rec_core_gpu_ready, p##rec_core_stop, p##rec_core_stats,       \
   p##rec_core_destroy, p##rec_callsites_create, p##rec_callsites_destroy,                    \
   p##rec_callsites_string, p##rec_ts_entry_start, p##rec_ts_entry, p##rec_ts_entry_bench,    \
   p##rec_ts_entry_lost}
#ifdef STREAM_AB
gm_status_t old_rec_core_start(rec_core_t **, const rec_config_t *, const rec_hooks_t *, gm_err_t *);
void old_rec_core_gpu_ready(rec_core_t *);
gm_status_t old_rec_core_stop(rec_core_t *);
void old_rec_core_stats(const rec_core_t *, rec_core_stats_t *);
void old_rec_core_destroy(rec_core_t *);
gm_status_t old_rec_callsites_create(rec_callsites_t **, rec_cs_mode_t, const rec_pyframes_t *, unsigned, gm_err_t *);
void old_rec_callsites_destroy(rec_callsites_t *);
const char *old_rec_callsites_string(const rec_callsites_t *, uint32_t);
void old_rec_ts_entry_start(rec_core_t *, rec_callsites_t *, uint64_t (*)(void *));
void old_rec_ts_entry(const void *, const void *);
int old_rec_ts_entry_bench(int);
uint64_t old_rec_ts_entry_lost(void);
static const impl_t impls[] = {IMPL("new", ), IMPL("old", old_)};
#else
static const impl_t impls[] = {IMPL("this", )};
#endif
#define NIMPL ((int)(sizeof impls / sizeof impls[0]))

static uint64_t mono(void *ctx) {
  (void)ctx;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static rec_callsites_t *g_cs[2];
static const char *cs_string(void *ctx, uint32_t id) {
  const impl_t *im = ctx;
  int v = im == &impls[0] ? 0 : 1;
  return im->cs_string(g_cs[v], id);
}
static void warn(void *ctx, const char *msg) { (void)ctx; fprintf(stderr, "stream_entry_bench: recorder: %s\n", msg); }

/* the calling thread's CPU time: a block's figure without the time it was preempted on this
 * loaded machine (its cache lines lost meanwhile still count) */
static uint64_t cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The counter around each allocation's entries only (the eviction between allocations is the
 * noisiest part of a block and no part of the recorder's cost). */
#if defined(__x86_64__)
#include <x86intrin.h>
static uint64_t ticks(void) {
  unsigned aux;
  return __rdtscp(&aux);
}
#else
static uint64_t ticks(void) { return mono(NULL); }
#endif
static double g_ns_per_tick = 1.0;

/* ---- a fake Python stack for the callsite reader ------------------------------------------- */

typedef struct fcode {
  const char *file, *name;
  int first;
} fcode_t;
typedef struct fframe {
  const fcode_t *code;
  const struct fframe *back;
  int lasti;
} fframe_t;

#define DEPTH 8
static fcode_t g_codes[DEPTH];
static fframe_t g_frames[DEPTH];

static const void *f_top(void *ctx) { (void)ctx; return &g_frames[0]; }
static const void *f_back(void *ctx, const void *f) { (void)ctx; return ((const fframe_t *)f)->back; }
static const void *f_code(void *ctx, const void *f) { (void)ctx; return ((const fframe_t *)f)->code; }
static int f_lasti(void *ctx, const void *f, const void *code) { (void)ctx; (void)code; return ((const fframe_t *)f)->lasti; }
static int f_line(void *ctx, const void *code, int lasti) { (void)ctx; return ((const fcode_t *)code)->first + lasti / 2; }
static uint64_t f_ident(void *ctx, const void *code) {
  (void)ctx;
  const fcode_t *c = code;
  return (uint64_t)(uintptr_t)c->file * 0x9E3779B97F4A7C15ull ^ (uint64_t)(uintptr_t)c->name ^ (uint64_t)c->first;
}
static int f_text(void *ctx, const void *code, char *file, size_t nf, char *name, size_t nn) {
  (void)ctx;
  const fcode_t *c = code;
  snprintf(file, nf, "%s", c->file);
  snprintf(name, nn, "%s", c->name);
  return 1;
}

static void fake_stack(void) {
  static const char *lib = "/usr/lib/python3/dist-packages/torch/nn/modules/module.py";
  for (int i = 0; i < DEPTH; i++) {
    g_codes[i] = (fcode_t){i == DEPTH - 1 ? "/home/u/train.py" : lib, "forward", 100 + 10 * i};
    g_frames[i] = (fframe_t){&g_codes[i], i + 1 < DEPTH ? &g_frames[i + 1] : NULL, 2 * i};
  }
}

/* ---- code to evict the instruction caches with -------------------------------------------- */

/* 4096 functions, each on its own 64-byte line: calling --code of them between allocations
 * evicts the recorder's own code from L1i and L2 as a step's PyTorch and Python code does. */
#define CF(n) static __attribute__((noinline, aligned(64))) unsigned cf##n(unsigned x) { return x * 2654435761u + (unsigned)0##n; }
#define CR4(m, p) m(p##0) m(p##1) m(p##2) m(p##3)
#define CF4(p) CR4(CF, p)
#define CF16(p) CF4(p##0) CF4(p##1) CF4(p##2) CF4(p##3)
#define CF64(p) CF16(p##0) CF16(p##1) CF16(p##2) CF16(p##3)
#define CF256(p) CF64(p##0) CF64(p##1) CF64(p##2) CF64(p##3)
#define CF1024(p) CF256(p##0) CF256(p##1) CF256(p##2) CF256(p##3)
CF1024(10) CF1024(11) CF1024(12) CF1024(13)
#define CP(n) cf##n,
#define CP4(p) CR4(CP, p)
#define CP16(p) CP4(p##0) CP4(p##1) CP4(p##2) CP4(p##3)
#define CP64(p) CP16(p##0) CP16(p##1) CP16(p##2) CP16(p##3)
#define CP256(p) CP64(p##0) CP64(p##1) CP64(p##2) CP64(p##3)
#define CP1024(p) CP256(p##0) CP256(p##1) CP256(p##2) CP256(p##3)
static unsigned (*const g_code[4096])(unsigned) = {CP1024(10) CP1024(11) CP1024(12) CP1024(13)};
static _Atomic unsigned g_sink;

static void evict_code(int n, unsigned *at) {
  unsigned x = 1;
  for (int k = 0; k < n; k++) {
    x = g_code[*at](x);
    *at = (*at + 1031) % 4096;
  }
  atomic_fetch_add_explicit(&g_sink, x, memory_order_relaxed);
}

/* ---- the load ----------------------------------------------------------------------------- */

enum { IDLE, ENTRIES, SITES, NSTATES };
static const char *const state_name[NSTATES] = {"idle", "entries", "sites"};
static const int state_mode[NSTATES] = {REC_TS_BENCH_IGNORE, REC_TS_BENCH_NO_SITES, REC_TS_BENCH_FULL};

typedef struct worker {
  pthread_t th;
  int id;
  unsigned char *buf;
  size_t buf_lines, at;
  uint64_t next_addr, pending;
  uint64_t entries; /* entries fed in the last block */
  uint64_t cpu_ns;  /* the thread's CPU time in the last block */
  uint64_t ticks;   /* counter ticks inside the feeding of entries in the last block */
  unsigned code_at;
} worker_t;

static struct {
  int threads, rounds, block, evict_kib, touch, gap_ns, inside, code, python, ring;
  _Atomic int go;   /* block number the workers are to run */
  _Atomic int done; /* workers finished with the current block */
  worker_t w[8];
} B;

static const impl_t *g_im; /* the variant of the current block */

/* A TraceEntry as record_trace builds it: its time_ the counter read just before the trackers
 * (in every state, idle too: PyTorch's own cost). */
static void entry(int action, uint64_t addr, uint64_t stream, uint64_t size) {
  unsigned char e[80];
  memset(e, 0, sizeof e);
#if defined(__x86_64__)
  uint64_t tick = __rdtsc();
  memcpy(e + REC_TE_OFF_TIME, &tick, sizeof tick);
#endif
  int32_t a = action;
  memcpy(e + REC_TE_OFF_ACTION, &a, sizeof a);
  memcpy(e + REC_TE_OFF_ADDR, &addr, sizeof addr);
  memcpy(e + REC_TE_OFF_STREAM, &stream, sizeof stream);
  memcpy(e + REC_TE_OFF_SIZE, &size, sizeof size);
  g_im->entry(NULL, e);
}

static void one_block(worker_t *w) {
  uint64_t stream = 0x7f0000001000ull + (uint64_t)w->id * 0x100, n = 0;
  w->ticks = 0;
  for (int i = 0; i < B.block; i++) {
    uint64_t t0 = ticks();
    uint64_t a = w->next_addr;
    w->next_addr += 4096;
    entry(REC_TE_ALLOC, a, stream, 4096);
    if (w->pending) {
      entry(REC_TE_FREE_COMPLETED, w->pending, stream, 4096);
      w->pending = 0;
      n++;
    }
    entry(REC_TE_FREE_REQUESTED, a, stream, 4096);
    n += 2;
    if (i % 32 == 31) {
      w->pending = a; /* completed after the next alloc */
    } else {
      entry(REC_TE_FREE_COMPLETED, a, stream, 4096);
      n++;
    }
    if (i % 64 == 63) {
      entry(REC_TE_SEGMENT_ALLOC, a + (1ull << 36), stream, 2u << 20);
      entry(REC_TE_SEGMENT_FREE, a + (1ull << 36), stream, 2u << 20);
      n += 2;
    }
    w->ticks += ticks() - t0;
    for (int k = 0; k < B.touch && w->buf_lines; k++) { /* a stride the prefetcher does not follow */
      w->buf[w->at * 64] += 1;
      w->at = (w->at + 4099) % w->buf_lines;
    }
    if (B.code) evict_code(B.code, &w->code_at);
    if (B.gap_ns) {
      uint64_t until = mono(NULL) + (uint64_t)B.gap_ns;
      while (mono(NULL) < until) {
      }
    }
  }
  w->entries = n;
}

static void *worker_main(void *arg) {
  worker_t *w = arg;
  for (int seen = 0;;) {
    int g;
    while ((g = atomic_load(&B.go)) == seen) usleep(50);
    if (g < 0) break;
    seen = g;
    uint64_t c0 = cpu_now();
    one_block(w);
    w->cpu_ns = cpu_now() - c0;
    atomic_fetch_add(&B.done, 1);
  }
  return NULL;
}

/* One block of variant v in state s on every worker at once; the workers' ns per entry. */
static double run_block(int v, int s, int *blockno) {
  g_im = &impls[v];
  for (int k = 0; k < NIMPL; k++) impls[k].bench(k == v ? state_mode[s] : REC_TS_BENCH_IGNORE);
  if (B.python) { /* the one worker is the calling thread: the one with Python frames */
    uint64_t c0 = cpu_now();
    one_block(&B.w[0]);
    B.w[0].cpu_ns = cpu_now() - c0;
  } else {
    atomic_store(&B.done, 0);
    atomic_store(&B.go, ++*blockno);
    while (atomic_load(&B.done) < B.threads) usleep(20);
  }
  uint64_t n = 0, cpu = 0, tk = 0;
  for (int i = 0; i < B.threads; i++) {
    n += B.w[i].entries;
    cpu += B.w[i].cpu_ns;
    tk += B.w[i].ticks;
  }
  return B.inside ? (double)tk * g_ns_per_tick / (double)n : (double)cpu / (double)n;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* median and a 95 % interval (order statistics) */
static void med_ci(double *v, int n, double *m, double *lo, double *hi) {
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  int k = (int)floor(n / 2.0 - 0.98 * sqrt((double)n));
  if (k < 0) k = 0;
  *m = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  *lo = v[k];
  *hi = v[n - 1 - k];
}

#ifdef STREAM_LIB
int stream_entry_bench_main(int argc, char **argv);
int stream_entry_bench_main(int argc, char **argv) {
#else
int main(int argc, char **argv) {
#endif
  B.threads = 1;
  B.rounds = 30;
  B.block = 20000;
  B.touch = 64;
  int sites = 0;
  const char *out = "/tmp/stream_entry_bench.gmt";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--threads") && i + 1 < argc) B.threads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) B.rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--block") && i + 1 < argc) B.block = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--evict") && i + 1 < argc) B.evict_kib = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--gap") && i + 1 < argc) B.gap_ns = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--ring") && i + 1 < argc) B.ring = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--touch") && i + 1 < argc) B.touch = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--code") && i + 1 < argc) B.code = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
    else if (!strcmp(argv[i], "--sites")) sites = 1;
    else if (!strcmp(argv[i], "--inside")) B.inside = 1;
    else if (!strcmp(argv[i], "--python")) B.python = sites = 1;
    else {
      fprintf(stderr, "stream_entry_bench: error: unknown argument '%s'\n", argv[i]);
      return 2;
    }
  }
  if (B.python && B.threads != 1) {
    fprintf(stderr, "stream_entry_bench: error: --python runs one worker, the calling thread\n");
    return 2;
  }
  if (B.threads < 1 || B.threads > 8 || B.rounds < 3 || B.block < 64 || B.evict_kib < 0 || B.gap_ns < 0 || B.code < 0 || B.ring < 0) {
    fprintf(stderr, "stream_entry_bench: error: --threads 1..8, --rounds >= 3, --block >= 64\n");
    return 2;
  }
  gm_err_t err;
  gm_err_clear(&err);
  rec_core_t *core[2];
  if (sites) fake_stack();
  for (int v = 0; v < NIMPL; v++) {
    const impl_t *im = &impls[v];
    char path[4200];
    snprintf(path, sizeof path, "%s.%s", out, im->name);
    rec_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    gmt_header_init(&cfg.header);
    cfg.path = path;
    cfg.ring_events = (size_t)B.ring;
    rec_hooks_t hooks;
    memset(&hooks, 0, sizeof hooks);
    hooks.ctx = (void *)im;
    hooks.now_ns = mono;
    hooks.string = cs_string;
    hooks.warn = warn;
    if (im->core_start(&core[v], &cfg, &hooks, &err) < 0) {
      fprintf(stderr, "stream_entry_bench: error: %s\n", err.msg);
      return 1;
    }
    gmt_header_free(&cfg.header);
    im->gpu_ready(core[v]);
    g_cs[v] = NULL;
    rec_pyframes_t src = {NULL, f_top, f_back, f_code, f_lasti, f_line, f_ident, f_text};
    char why[256];
    if (B.python && !rec_pyframes_cpython(&src, why, sizeof why)) {
      fprintf(stderr, "stream_entry_bench: error: --python: %s\n", why);
      return 1;
    }
    if (sites && im->cs_create(&g_cs[v], REC_CS_USER, &src, 0, &err) < 0) {
      fprintf(stderr, "stream_entry_bench: error: %s\n", err.msg);
      return 1;
    }
    im->start(core[v], g_cs[v], mono);
  }
  for (int i = 0; i < B.threads; i++) {
    worker_t *w = &B.w[i];
    w->id = i;
    w->next_addr = (uint64_t)(i + 1) << 40;
    w->buf_lines = (size_t)B.evict_kib * 1024 / 64;
    w->buf = w->buf_lines ? calloc(w->buf_lines, 64) : NULL;
    if (!B.python) pthread_create(&w->th, NULL, worker_main, w);
  }
  {
    uint64_t m0 = mono(NULL), k0 = ticks();
    usleep(100000);
    g_ns_per_tick = (double)(mono(NULL) - m0) / (double)(ticks() - k0);
  }
  int blockno = 0, ncols = NIMPL * NSTATES;
  double (*per)[2 * NSTATES] = calloc((size_t)B.rounds, sizeof *per);
  for (int r = -2; r < B.rounds; r++) { /* two rounds of warm-up */
    for (int j = 0; j < ncols; j++) {
      int col = (j + (r + 2)) % ncols;
      double x = run_block(col / NSTATES, col % NSTATES, &blockno);
      if (r >= 0) per[r][col] = x;
    }
  }
  atomic_store(&B.go, -1);
  for (int i = 0; i < B.threads && !B.python; i++) pthread_join(B.w[i].th, NULL);
  uint64_t lost = 0;
  rec_core_stats_t st[2];
  for (int v = 0; v < NIMPL; v++) {
    const impl_t *im = &impls[v];
    im->bench(REC_TS_BENCH_FULL);
    im->core_stop(core[v]);
    im->stats(core[v], &st[v]);
    im->start(NULL, NULL, mono);
    im->destroy(core[v]);
    lost += st[v].ring_drops + im->lost();
    char path[4200];
    snprintf(path, sizeof path, "%s.%s", out, im->name);
    unlink(path);
  }

  double *d = calloc((size_t)B.rounds, sizeof *d), m, lo, hi;
  printf("%s threads=%d sites=%s evict=%dKiBx%d code=%d gap=%dns rounds=%d block=%d:", B.inside ? "inside" : "cpu",
         B.threads, B.python ? "python" : sites ? "fake8" : "none", B.evict_kib, B.touch, B.code, B.gap_ns, B.rounds, B.block);
  for (int v = 0; v < NIMPL; v++) {
    for (int r = 0; r < B.rounds; r++) d[r] = per[r][v * NSTATES + IDLE];
    med_ci(d, B.rounds, &m, &lo, &hi);
    printf("%s %s: idle %.1f ns/entry", v ? ";" : "", impls[v].name, m);
    for (int s2 = ENTRIES; s2 <= SITES; s2++) {
      for (int r = 0; r < B.rounds; r++) d[r] = per[r][v * NSTATES + s2] - per[r][v * NSTATES + IDLE];
      med_ci(d, B.rounds, &m, &lo, &hi);
      printf(", %s %+.1f [%.1f, %.1f]", state_name[s2], m, lo, hi);
    }
    for (int r = 0; r < B.rounds; r++) d[r] = per[r][v * NSTATES + SITES] - per[r][v * NSTATES + ENTRIES];
    med_ci(d, B.rounds, &m, &lo, &hi);
    printf(", callsite %+.1f [%.1f, %.1f]", m, lo, hi);
  }
  if (NIMPL == 2) { /* new - old, each over its own idle, paired within a round */
    for (int s2 = ENTRIES; s2 <= SITES; s2++) {
      for (int r = 0; r < B.rounds; r++)
        d[r] = (per[r][s2] - per[r][IDLE]) - (per[r][NSTATES + s2] - per[r][NSTATES + IDLE]);
      med_ci(d, B.rounds, &m, &lo, &hi);
      printf("; new-old %s %+.1f [%.1f, %.1f]", state_name[s2], m, lo, hi);
    }
  }
  printf(" ns/entry; events written %llu, lost %llu\n", (unsigned long long)(st[0].written + (NIMPL == 2 ? st[1].written : 0)),
         (unsigned long long)lost);
  for (int v = 0; v < NIMPL; v++) impls[v].cs_destroy(g_cs[v]);
  for (int i = 0; i < B.threads; i++) free(B.w[i].buf);
  free(per);
  free(d);
  fflush(stdout);
  return 0;
}
