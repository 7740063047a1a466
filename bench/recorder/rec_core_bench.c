/* rec_core_bench.c: what the recorder's own code costs per event, without CUDA.
 *
 * Measures, in one run on the CPU:
 *   ref     copying an event into an array (the floor any recorder pays);
 *   ring    rec_ring_push from one thread with a consumer draining (the application thread's
 *           whole cost inside gpurec, besides CUPTI itself);
 *   core    rec_core_push_batch of N events through the real core: writer thread ordering,
 *           zstd and write(2), until the trace is closed (throughput of the writer);
 * plus the bytes per event of the file written, for a synthetic PyTorch-like pattern (allocs
 * and frees of a few hundred distinct sizes on 2 streams, ~8 us apart).
 * Usage: rec_core_bench [EVENTS] [OUT.zst] [fill]   (defaults 5000000, /tmp/rec_core_bench.zst)
 * "fill": frees pushed without a size and the core's fill_free_sizes on, as the callback
 * capture runs it (the writer looks every free up in its live-allocation table); then also
 * "burst": one producer calls rec_core_push (drops when the ring is full, as the callback
 * capture does) at 2 M events/s, timestamps from the clock: how many the core drops. */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "recorder/rec_core.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t bench_now(void *ctx) {
  (void)ctx;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void make_events(gmt_event_t *ev, size_t n) {
  uint64_t seed = 42, ts = 0;
  for (size_t i = 0; i < n; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    memset(&ev[i], 0, sizeof ev[i]);
    size_t slot = (i / 2) % 512;
    ev[i].kind = (i % 2 == 0) ? GMT_EV_ALLOC : GMT_EV_FREE;
    ev[i].addr = 0x7f0000000000ull + slot * 0x200000ull;
    ev[i].size = 512ull << ((seed >> 33) % 12);
    if (ev[i].kind == GMT_EV_FREE) ev[i].size = ev[i - 1].size;
    ts += 2000 + (seed >> 50) % 12000;
    ev[i].ts_ns = ts;
    ev[i].stream = 13 + (slot % 2);
    ev[i].corr_id = i + 1;
    ev[i].flags = GMT_F_ASYNC;
    ev[i].mem_kind = GMT_MEM_DEVICE;
  }
}

typedef struct drain_arg {
  rec_ring_t *r;
  size_t want;
} drain_arg_t;

static void *drainer(void *p) {
  drain_arg_t *a = p;
  gmt_event_t buf[4096];
  size_t got = 0;
  while (got < a->want) got += rec_ring_pop(a->r, buf, 4096);
  return NULL;
}

int main(int argc, char **argv) {
  size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 5000000;
  if (n < 2) n = 2;
  const char *out = argc > 2 ? argv[2] : "/tmp/rec_core_bench.zst";
  gmt_event_t *ev = malloc(n * sizeof *ev), *copy = malloc(n * sizeof *ev);
  if (!ev || !copy) return 1;
  make_events(ev, n);
  memset(copy, 0, n * sizeof *copy); /* fault the pages in: the reference times the copy only */

  double t0 = now_s();
  for (size_t i = 0; i < n; i++) copy[i] = ev[i];
  double ref = now_s() - t0;
  /* keep the copy loop from being optimised away */
  uint64_t sum = 0;
  for (size_t i = 0; i < n; i += 4096) sum += copy[i].addr;
  if (sum == 1) printf("%" PRIu64 "\n", sum);

  rec_ring_t *r;
  if (rec_ring_create(&r, 65536, NULL) < 0) return 1;
  drain_arg_t a = {r, n};
  pthread_t th;
  pthread_create(&th, NULL, drainer, &a);
  t0 = now_s();
  for (size_t i = 0; i < n; i++)
    while (rec_ring_push(r, &ev[i]) < 0) {
    }
  double ring = now_s() - t0;
  pthread_join(th, NULL);
  rec_ring_destroy(r);

  rec_config_t cfg;
  memset(&cfg, 0, sizeof cfg);
  gmt_header_init(&cfg.header);
  cfg.path = out;
  cfg.header.capture_mode = GMT_CAPTURE_SYNTHETIC;
  if (argc > 3 && strcmp(argv[3], "fill") == 0) {
    cfg.fill_free_sizes = 1;
    for (size_t i = 0; i < n; i++)
      if (ev[i].kind == GMT_EV_FREE) ev[i].size = 0;
  }
  rec_core_t *c;
  gm_err_t err;
  if (rec_core_start(&c, &cfg, NULL, &err) < 0) {
    fprintf(stderr, "rec_core_bench: %s\n", err.msg);
    return 1;
  }
  gmt_header_free(&cfg.header);
  rec_core_gpu_ready(c);
  t0 = now_s();
  size_t dropped = 0;
  for (size_t i = 0; i < n; i += 512)
    dropped += rec_core_push_batch(c, ev + i, n - i < 512 ? n - i : 512, 1000000000ull);
  double push = now_s() - t0;
  rec_core_stop(c);
  double total = now_s() - t0;
  rec_core_stats_t st;
  rec_core_stats(c, &st);
  rec_core_destroy(c);
  struct stat sb;
  uint64_t bytes = stat(out, &sb) == 0 ? (uint64_t)sb.st_size : 0;

  printf("events %zu\n", n);
  printf("ref   copy event          %7.1f ns/event\n", ref * 1e9 / (double)n);
  printf("ring  push (consumer on)  %7.1f ns/event  (%.1fx ref)\n", ring * 1e9 / (double)n,
         ring / ref);
  printf("core  push_batch          %7.1f ns/event\n", push * 1e9 / (double)n);
  printf("core  push..closed        %7.1f ns/event  (%.2f M events/s through the writer)\n",
         total * 1e9 / (double)n, (double)n / total / 1e6);
  printf("file  %" PRIu64 " bytes, %.2f bytes/event, written %" PRIu64 ", dropped %zu\n", bytes,
         (double)bytes / (double)n, st.written, dropped);
  if (argc > 3 && strcmp(argv[3], "fill") == 0) {
    /* burst: the callback capture's situation, events stamped by the real clock */
    rec_config_t bc;
    memset(&bc, 0, sizeof bc);
    gmt_header_init(&bc.header);
    bc.path = out;
    bc.fill_free_sizes = 1;
    rec_hooks_t hk;
    memset(&hk, 0, sizeof hk);
    hk.now_ns = bench_now;
    if (rec_core_start(&c, &bc, &hk, &err) < 0) return 1;
    gmt_header_free(&bc.header);
    rec_core_gpu_ready(c);
    size_t lost = 0;
    t0 = now_s();
    const uint64_t gap = 500; /* 2 M events/s, the rate of the GPU churn test */
    uint64_t start = bench_now(NULL);
    for (size_t i = 0; i < n; i++) {
      while (bench_now(NULL) < start + i * gap) {
      }
      ev[i].ts_ns = bench_now(NULL);
      if (rec_core_push(c, &ev[i]) < 0) lost++;
    }
    double bt = now_s() - t0;
    rec_core_stop(c);
    rec_core_destroy(c);
    printf("burst %.2f M events/s offered, dropped %zu (%.2f %%)\n", (double)n / bt / 1e6, lost,
           100.0 * (double)lost / (double)n);
  }
  free(ev);
  free(copy);
  return 0;
}
