/* fmtbench.c: speed and size of the trace format on a synthetic training-loop trace.
 *
 * Measures, on one core and in one run: encode (gmt_writer to a file in the page cache) and
 * decode (gmt_reader over the file in memory, next_batch and next) in events/s, and bytes per
 * event; against references measured on the same events in the same run: memcpy of fixed
 * 29-byte raw records (the speed ceiling of touching the data at all) and plain zstd over
 * those records (what a format without column coding gets). Also prints, per column, its
 * share of a chunk before and after zstd, which is what tuning the codec looks at.
 *   fmtbench [--events N] [--seed N] [--reps N] [--level N] */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "bench/synth/synth.h"
#include "formats/gmt_internal.h"

typedef struct cfg {
  uint64_t events, seed, reps, level, chunk;
  int help, wall;
} cfg_t;

static const gm_opt_t opts[] = {
    {"events", 'n', GM_OPT_U64, "N", "events (default 2000000)", offsetof(cfg_t, events)},
    {"seed", 's', GM_OPT_U64, "N", "synthetic trace seed (default 1)", offsetof(cfg_t, seed)},
    {"reps", 'r', GM_OPT_U64, "N", "repetitions, best is reported (default 5)", offsetof(cfg_t, reps)},
    {"level", 0, GM_OPT_U64, "N", "zstd level (default: the library's)", offsetof(cfg_t, level)},
    {"chunk-events", 0, GM_OPT_U64, "N", "events per chunk (default: the library's)", offsetof(cfg_t, chunk)},
    {"wall", 0, GM_OPT_FLAG, NULL, "time by wall clock, not thread CPU time", offsetof(cfg_t, wall)},
    {"help", 'h', GM_OPT_FLAG, NULL, "show this help", offsetof(cfg_t, help)},
    {NULL, 0, 0, NULL, NULL, 0}};

/* CPU time of this thread (user + system) by default: on a shared machine, time spent waiting
 * for the core is not the format's cost. --wall switches to wall-clock time. */
static clockid_t bench_clock = CLOCK_THREAD_CPUTIME_ID;

static double now(void) {
  struct timespec t;
  clock_gettime(bench_clock, &t);
  return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

#define RAW 29
static void pack_raw(const gmt_event_t *e, uint8_t *p) { /* ts, addr, size, kind, stream (u32) */
  gmt_put64(p, e->ts_ns);
  gmt_put64(p + 8, e->addr);
  gmt_put64(p + 16, e->size);
  p[24] = e->kind;
  gmt_put32(p + 25, (uint32_t)e->stream);
}

static void die(const gm_err_t *e) {
  fprintf(stderr, "fmtbench: error: %s\n", e->msg);
  exit(1);
}

int main(int argc, char **argv) {
  cfg_t c = {2000000, 1, 5, 0, 0, 0, 0};
  char *pos[argc > 0 ? argc : 1];
  int npos = 0;
  gm_err_t err;
  if (gm_opts_parse(opts, argc, argv, &c, pos, &npos, 0, &err) != GM_OK || npos || !c.events || !c.reps) {
    fprintf(stderr, "fmtbench: %s\ntry 'fmtbench --help'\n", npos ? "unexpected argument" : err.msg);
    return 2;
  }
  if (c.help) {
    gm_opts_help(stdout, "fmtbench [--events N] [--seed N] [--reps N]",
                 "Encode/decode speed and size of the trace format, with references.", opts);
    return 0;
  }
  if (c.wall) bench_clock = CLOCK_MONOTONIC;
  size_t n = c.events;
  gmt_event_t *evs = malloc(n * sizeof *evs), *back = malloc(4096 * sizeof *evs);
  uint8_t *raw = malloc(n * RAW), *raw2 = malloc(n * RAW);
  if (!evs || !back || !raw || !raw2) return 1;
  synth_opts_t so; /* zero: the defaults (transformer model, 24 blocks, 2 streams) */
  memset(&so, 0, sizeof so);
  so.events = n;
  so.seed = c.seed;
  synth_fill(&so, evs);
  for (size_t i = 0; i < n; i++) pack_raw(&evs[i], raw + i * RAW);

  char path[] = "/tmp/fmtbench_XXXXXX";
  int tfd = mkstemp(path);
  if (tfd < 0) return 1;
  close(tfd);
  gmt_writer_opts_t wo;
  memset(&wo, 0, sizeof wo);
  wo.zstd_level = (int)c.level;
  wo.chunk_events = (uint32_t)c.chunk;
  double enc_best = 1e9, dec_best = 1e9, decv_best = 1e9, dec1_best = 1e9, mc_best = 1e9, zc_best = 1e9, zd_best = 1e9;
  uint64_t bytes = 0;
  size_t zbytes = 0;
  for (uint64_t rep = 0; rep < c.reps; rep++) {
    gmt_writer_t *w;
    double t0 = now();
    if (gmt_writer_open(&w, path, NULL, &wo, &err) != GM_OK) die(&err);
    for (int i = 0; i < SYNTH_N_STRINGS; i++) {
      uint32_t id;
      if (gmt_writer_intern(w, synth_strings[i], &id, &err) != GM_OK) die(&err);
    }
    if (gmt_writer_append_n(w, evs, n, &err) != GM_OK) die(&err);
    if (gmt_writer_close(w, &err) != GM_OK) die(&err);
    double t1 = now();
    if (t1 - t0 < enc_best) enc_best = t1 - t0;
  }
  FILE *f = fopen(path, "rb");
  if (f) fseek(f, 0, SEEK_END);
  bytes = f ? (uint64_t)ftell(f) : 0;
  if (f) rewind(f);
  uint8_t *file = malloc(bytes + 1);
  size_t flen = f ? fread(file, 1, bytes, f) : 0;
  if (f) fclose(f);
  unlink(path);
  uint64_t check = 0;
  for (uint64_t rep = 0; rep < c.reps; rep++) {
    gmt_reader_t *r;
    size_t got, total = 0;
    double t0 = now();
    if (gmt_reader_open_mem(&r, file, flen, &err) != GM_OK) die(&err);
    gm_status_t s;
    while ((s = gmt_reader_next_batch(r, back, 4096, &got, &err)) == GM_OK) {
      total += got;
      check += back[got - 1].addr;
    }
    if (s < 0) die(&err);
    gmt_reader_close(r);
    double t1 = now();
    if (total != n) {
      fprintf(stderr, "fmtbench: decoded %zu events, wrote %zu\n", total, n);
      return 1;
    }
    if (t1 - t0 < dec_best) dec_best = t1 - t0;
    t0 = now();
    if (gmt_reader_open_mem(&r, file, flen, &err) != GM_OK) die(&err);
    const gmt_event_t *view;
    total = 0;
    while ((s = gmt_reader_next_view(r, &view, &got, &err)) == GM_OK) {
      total += got;
      check += view[got - 1].addr;
    }
    if (s < 0 || total != n) die(&err);
    gmt_reader_close(r);
    t1 = now();
    if (t1 - t0 < decv_best) decv_best = t1 - t0;
    t0 = now();
    if (gmt_reader_open_mem(&r, file, flen, &err) != GM_OK) die(&err);
    while ((s = gmt_reader_next(r, back, &err)) == GM_OK) check += back->size;
    gmt_reader_close(r);
    t1 = now();
    if (t1 - t0 < dec1_best) dec1_best = t1 - t0;
  }
  /* references: memcpy and plain zstd over 29-byte records, in 1 MiB blocks like chunks */
  size_t blk = (1u << 20) / RAW * RAW, cap = ZSTD_compressBound(blk);
  uint8_t *zb = malloc(cap * (n * RAW / blk + 1));
  size_t *zl = calloc(n * RAW / blk + 1, sizeof *zl);
  ZSTD_CCtx *cc = ZSTD_createCCtx();
  ZSTD_DCtx *dc = ZSTD_createDCtx();
  int lvl = c.level ? (int)c.level : 3;
  for (uint64_t rep = 0; rep < c.reps; rep++) {
    double t0 = now();
    memcpy(raw2, raw, n * RAW);
    double t1 = now();
    if (t1 - t0 < mc_best) mc_best = t1 - t0;
    check += raw2[n * RAW / 2];
    t0 = now();
    zbytes = 0;
    size_t nb = 0;
    for (size_t off = 0; off < n * RAW; off += blk, nb++) {
      size_t len = n * RAW - off < blk ? n * RAW - off : blk;
      zl[nb] = ZSTD_compressCCtx(cc, zb + nb * cap, cap, raw + off, len, lvl);
      zbytes += zl[nb];
    }
    t1 = now();
    if (t1 - t0 < zc_best) zc_best = t1 - t0;
    t0 = now();
    nb = 0;
    for (size_t off = 0; off < n * RAW; off += blk, nb++) {
      size_t len = n * RAW - off < blk ? n * RAW - off : blk;
      ZSTD_decompressDCtx(dc, raw2 + off, len, zb + nb * cap, zl[nb]);
    }
    t1 = now();
    if (t1 - t0 < zd_best) zd_best = t1 - t0;
  }
  if (memcmp(raw, raw2, n * RAW)) return 1;
  /* per-column breakdown of one chunk-sized slice */
  gmt_enc_t e;
  memset(&e, 0, sizeof e);
  gmt_enc_reset(&e);
  size_t slice = n < 65536 ? n : 65536, start = n > 2 * slice ? n / 2 : 0;
  for (size_t i = start; i < start + slice; i++) gmt_enc_add(&e, &evs[i], NULL, 0);
  gmt_buf_t pl = {0};
  gmt_enc_finish(&e, &pl);

  double M = 1e6;
  printf("events            %zu (synthetic training loop, seed %llu); best of %llu, %s time\n", n,
         (unsigned long long)c.seed, (unsigned long long)c.reps, c.wall ? "wall-clock" : "thread CPU");
  printf("trace file        %llu bytes = %.3f bytes/event; raw records %d bytes/event: ratio %.1fx\n",
         (unsigned long long)flen, (double)flen / n, RAW, (double)RAW * n / flen);
  printf("encode            %8.2f M events/s  (gmt_writer, zstd level %d, to a file)\n", n / enc_best / M, lvl);
  printf("decode view       %8.2f M events/s  (gmt_reader_next_view, zero-copy)\n", n / decv_best / M);
  printf("decode batch      %8.2f M events/s  (gmt_reader_next_batch, 4096 per call)\n", n / dec_best / M);
  printf("decode next       %8.2f M events/s  (gmt_reader_next)\n", n / dec1_best / M);
  printf("ref memcpy raw    %8.2f M events/s  (%d-byte records)\n", n / mc_best / M, RAW);
  printf("ref zstd raw      %8.2f M events/s compress, %.2f M events/s decompress, %.3f bytes/event\n",
         n / zc_best / M, n / zd_best / M, (double)zbytes / n);
  printf("ratios            size: gmt %.2fx smaller than zstd-raw; encode %.2fx, decode (view) %.2fx zstd-raw speed\n",
         (double)zbytes / flen, zc_best / enc_best, zd_best / decv_best);
  printf("columns (one %zu-event chunk; raw bytes/event, alone through zstd bytes/event):\n", slice);
  const char *names[] = {
#define GMT_BN(f, id, coder, csv, fmt) csv,
      GMT_FIELD_LIST(GMT_BN)
#undef GMT_BN
  };
  for (int i = 0; i < GMT_SLOTS; i++) {
    if (!e.col[i].len) continue;
    size_t z = ZSTD_compressCCtx(cc, zb, cap, e.col[i].p, e.col[i].len, lvl);
    printf("  %-12s.%d %7.3f %7.3f\n", names[i / 4], i % 4, (double)e.col[i].len / slice, (double)z / slice);
  }
  size_t zall = ZSTD_compressCCtx(cc, zb, cap, pl.p, pl.len, lvl);
  printf("  %-14s %7.3f %7.3f\n", "whole payload", (double)pl.len / slice, (double)zall / slice);
  fprintf(stderr, "(checksum %llu)\n", (unsigned long long)check);
  return 0;
}
