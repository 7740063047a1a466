/* gmt_mkvectors.c: writes the test vectors of SPEC.md "Test vectors" (traces/valid/ and
 * traces/invalid/), so they can be regenerated after a deliberate format change:
 *   bazel run //formats:gmt_mkvectors -- $PWD/traces
 * Valid traces get their expected text form (NAME.csv) next to them. Invalid ones are made
 * from valid ones by one deliberate defect each; traces/invalid/EXPECTED says what a reader
 * must report for each, and formats/gmt_vectors_test.cc checks it. Deterministic. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gmt_internal.h"

static void die(const char *what, const gm_err_t *e) {
  fprintf(stderr, "gmt_mkvectors: error: %s: %s\n", what, e ? e->msg : "failed");
  exit(1);
}

static gmt_event_t ev(uint64_t ts, unsigned kind, uint64_t addr, uint64_t size, uint64_t stream) {
  gmt_event_t e;
  memset(&e, 0, sizeof e);
  e.ts_ns = ts;
  e.kind = (uint8_t)kind;
  e.addr = addr;
  e.size = size;
  e.stream = stream;
  e.mem_kind = GMT_MEM_DEVICE;
  e.context = 1;
  return e;
}

static gmt_writer_t *open_w(const char *dir, const char *name, uint32_t chunk_events, int fancy_header) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  gmt_header_t h;
  gmt_header_init(&h);
  h.capture_mode = GMT_CAPTURE_SYNTHETIC;
  h.pid = 1234;
  h.start_time_ns = 1795000000000000000ull;
  h.gpu_total_mem = 85899345920ull;
  gmt_header_set(&h.host, "vector-host", NULL);
  gmt_header_set(&h.tool, "gmt_mkvectors", NULL);
  gmt_header_set(&h.gpu_name, "NVIDIA H100 80GB HBM3", NULL);
  if (fancy_header) {
    h.rank = 3;
    h.world_size = 8;
    gmt_header_set(&h.gpu_uuid, "GPU-00000000-1111-2222-3333-444444444444", NULL);
    gmt_header_set(&h.driver_version, "580.65.06", NULL);
    gmt_header_set(&h.cuda_version, "13.0", NULL);
    gmt_header_set(&h.cupti_version, "26", NULL);
    gmt_header_set(&h.command_line, "python train.py --name \"a,b\"\tx=1\\2\nline two \xc3\xa9", NULL);
    gmt_header_kv_set(&h, "PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True,max_split_size_mb:128", NULL);
    gmt_header_kv_set(&h, "TF_GPU_ALLOCATOR", "cuda_malloc_async", NULL);
  }
  gmt_writer_opts_t o;
  memset(&o, 0, sizeof o);
  o.chunk_events = chunk_events;
  gmt_writer_t *w;
  gm_err_t err;
  if (gmt_writer_open(&w, path, &h, &o, &err) != GM_OK) die(path, &err);
  gmt_header_free(&h);
  return w;
}

static void put(gmt_writer_t *w, gmt_event_t e) {
  gm_err_t err;
  if (gmt_writer_append(w, &e, &err) != GM_OK) die("append", &err);
}

static void done(gmt_writer_t *w) {
  gm_err_t err;
  if (gmt_writer_close(w, &err) != GM_OK) die("close", &err);
}

/* every kind once, strings, one chunk */
static void all_kinds(const char *dir) {
  gmt_writer_t *w = open_w(dir, "valid/all-kinds.zst", 0, 0);
  gm_err_t err;
  uint32_t step, fwd;
  if (gmt_writer_intern(w, "step", &step, &err) || gmt_writer_intern(w, "model.py:42 forward", &fwd, &err)) die("intern", &err);
  uint64_t a = 0x7f3a00000000ull, t = 1000;
  gmt_event_t e = ev(t, GMT_EV_MARKER, 0, 0, GMT_STREAM_NONE);
  e.callsite = step;
  e.mem_kind = GMT_MEM_UNKNOWN;
  e.context = 0;
  put(w, e);
  put(w, ev(t += 10, GMT_EV_POOL_CREATE, 1, 0, GMT_STREAM_NONE));
  put(w, ev(t += 10, GMT_EV_VMM_RESERVE, a, 1ull << 30, GMT_STREAM_NONE));
  put(w, ev(t += 10, GMT_EV_VMM_MAP, a, 2ull << 20, GMT_STREAM_NONE));
  put(w, ev(t += 10, GMT_EV_SEGMENT_ALLOC, a, 2ull << 20, 7));
  e = ev(t += 10, GMT_EV_ALLOC, a, 1024, 7);
  e.callsite = fwd;
  e.flags = GMT_F_ASYNC | GMT_F_FROM_POOL;
  e.corr_id = 17;
  put(w, e);
  e = ev(t += 10, GMT_EV_ALLOC, a + 1024, 512, 7);
  e.mem_kind = GMT_MEM_PINNED;
  e.device = 1;
  put(w, e);
  put(w, ev(t += 10, GMT_EV_ALLOC_FAILED, 0, 80ull << 30, 7));
  put(w, ev(t += 10, GMT_EV_FREE_REQUESTED, a, 1024, 7));
  put(w, ev(t += 10, GMT_EV_FREE, a, 1024, 7));
  e = ev(t += 10, GMT_EV_FREE, a + 1024, 512, 7);
  e.mem_kind = GMT_MEM_PINNED;
  e.device = 1;
  e.flags = GMT_F_SYNTHETIC;
  put(w, e);
  put(w, ev(t += 10, GMT_EV_EMPTY_CACHE, 0, 0, GMT_STREAM_NONE));
  put(w, ev(t += 10, GMT_EV_SEGMENT_FREE, a, 2ull << 20, 7));
  put(w, ev(t += 10, GMT_EV_POOL_TRIM, 1, 0, GMT_STREAM_NONE));
  put(w, ev(t += 10, GMT_EV_VMM_UNMAP, a, 2ull << 20, GMT_STREAM_NONE));
  put(w, ev(t += 10, GMT_EV_VMM_RELEASE, a, 1ull << 30, GMT_STREAM_NONE));
  put(w, ev(t += 10, GMT_EV_POOL_DESTROY, 1, 0, GMT_STREAM_NONE));
  put(w, ev(t += 10, GMT_EV_DEVICE_USAGE, GMT_USAGE_PROCESS, 552599552, GMT_STREAM_NONE));
  done(w);
}

/* field extremes, escapes in the header, a string with odd bytes */
static void extremes(const char *dir) {
  gmt_writer_t *w = open_w(dir, "valid/extremes.zst", 0, 1);
  gm_err_t err;
  uint32_t s;
  if (gmt_writer_intern(w, "frame \"q\",comma\\back\nnewline \xe2\x9c\x93", &s, &err)) die("intern", &err);
  gmt_event_t e = ev(0, GMT_EV_ALLOC, 0, 0, 0);
  put(w, e);
  /* the largest block that can exist (GMT_MAX_SIZE: the text form refuses larger ones), and
   * the largest size a failed request may have asked for */
  e = ev(UINT64_MAX, GMT_EV_ALLOC, UINT64_MAX, GMT_MAX_SIZE, UINT64_MAX - 1);
  e.corr_id = UINT64_MAX;
  e.callsite = s;
  e.context = UINT32_MAX;
  e.flags = UINT32_MAX;
  e.device = UINT16_MAX;
  e.mem_kind = GMT_MEM_ARRAY;
  put(w, e);
  put(w, ev(1, GMT_EV_FREE, UINT64_MAX, GMT_MAX_SIZE, UINT64_MAX - 1)); /* time going back */
  put(w, ev(1, GMT_EV_ALLOC_FAILED, 0, UINT64_MAX, UINT64_MAX - 1));
  e = ev(2, GMT_EV_MARKER, 0, 0, GMT_STREAM_NONE);
  e.mem_kind = GMT_MEM_UNKNOWN;
  put(w, e);
  done(w);
}

/* a training loop over several chunks, with drops */
static void loop(const char *dir, const char *name, int gap, int close) {
  gmt_writer_t *w = open_w(dir, name, 40, 1);
  gm_err_t err;
  uint32_t step;
  if (gmt_writer_intern(w, "step", &step, &err)) die("intern", &err);
  uint64_t t = 5000, base = 0x7f0000000000ull, corr = 100;
  for (int s = 0; s < 6; s++) {
    gmt_event_t m = ev(t += 100000, GMT_EV_MARKER, 0, (uint64_t)s, GMT_STREAM_NONE);
    m.callsite = step;
    m.mem_kind = GMT_MEM_UNKNOWN;
    m.context = 0;
    put(w, m);
    if (s == 3) gmt_writer_add_dropped(w, 2);
    for (int i = 0; i < 12; i++) {
      gmt_event_t e = ev(t += 1000 + (uint64_t)(i * 37 % 11), GMT_EV_ALLOC, base + (uint64_t)i * 0x100000, 4096ull << (i % 5), 7);
      e.corr_id = corr += 3;
      e.flags = GMT_F_ASYNC;
      put(w, e);
    }
    for (int i = 11; i >= 0; i--) {
      gmt_event_t e = ev(t += 700, GMT_EV_FREE, base + (uint64_t)i * 0x100000, 4096ull << (i % 5), 7);
      e.corr_id = corr += 2;
      e.flags = GMT_F_ASYNC;
      put(w, e);
    }
    if (gap && s == 2) {
      if (gmt_writer_flush(w, &err)) die("flush", &err);
      gmt_writer_skip_seq(w, 1);
    }
  }
  if (close) done(w);
  else gmt_writer_abandon(w);
}

static void empty(const char *dir) { done(open_w(dir, "valid/empty.zst", 0, 0)); }

/* unknown kinds and extension bytes from a "newer writer": skipped by this reader */
static void future_records(const char *dir) {
  gmt_writer_t *w = open_w(dir, "valid/future-records.zst", 0, 0);
  gm_err_t err;
  for (int i = 0; i < 8; i++) {
    gmt_event_t e = ev(100 + (uint64_t)i, i % 2 ? 77 : GMT_EV_ALLOC, 0x1000 * (uint64_t)(i + 1), 512, 7);
    const char ext[] = "field from the future";
    if (gmt_writer_append_raw(w, &e, i % 3 ? ext : NULL, i % 3 ? sizeof ext : 0, &err)) die("append", &err);
  }
  done(w);
}

static unsigned char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) die(path, NULL);
  fseek(f, 0, SEEK_END);
  *n = (size_t)ftell(f);
  rewind(f);
  unsigned char *b = malloc(*n + 1);
  if (!b || fread(b, 1, *n, f) != *n) die(path, NULL);
  fclose(f);
  return b;
}

static void spit(const char *dir, const char *name, const unsigned char *b, size_t n) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(b, 1, n, f) != n || fclose(f)) die(path, NULL);
}

/* Offset of the descriptor frame of chunk k in a trace. */
static size_t chunk_off(const unsigned char *b, int k) {
  size_t pos = 8 + gmt_get32(b + 4);
  for (int i = 0; i < k; i++) pos += 8 + GMT_CHUNK_DESC_SIZE + gmt_get32(b + pos + 8 + 40);
  return pos;
}

static void invalid(const char *dir) {
  char path[4096];
  loop(dir, "invalid/sequence-gap.zst", 1, 1);
  snprintf(path, sizeof path, "%s/valid/training-loop.zst", dir);
  size_t n;
  unsigned char *b = slurp(path, &n);
  b[0] ^= 0xff;
  spit(dir, "invalid/bad-magic.zst", b, n);
  b[0] ^= 0xff;
  size_t c3 = chunk_off(b, 3), c4 = chunk_off(b, 4);
  spit(dir, "invalid/truncated-mid-chunk.zst", b, (c3 + c4) / 2);
  size_t c1 = chunk_off(b, 1);
  b[c1 + 8 + GMT_CHUNK_DESC_SIZE + 20] ^= 0x10; /* inside chunk 1's zstd frame */
  spit(dir, "invalid/flipped-bit.zst", b, n);
  b[c1 + 8 + GMT_CHUNK_DESC_SIZE + 20] ^= 0x10;
  size_t io = gmt_get64(b + n - GMT_FOOTER_FRAME + 12);
  b[io + 8 + GMT_INDEX_FIXED + 3] ^= 0x01; /* chunk 0's offset in the index */
  spit(dir, "invalid/damaged-index.zst", b, n);
  free(b);
  gmt_writer_t *w = open_w(dir, "invalid/future-version.zst", 0, 0);
  put(w, ev(1, GMT_EV_ALLOC, 0x1000, 512, 7));
  gmt_writer_force_versions(w, 3, 2);
  done(w);
  spit(dir, "invalid/empty-file.zst", (const unsigned char *)"", 0);
  /* a valid zstd frame that is not a trace: "hello\n" compressed */
  static const unsigned char plain[] = {0x28, 0xb5, 0x2f, 0xfd, 0x24, 0x06, 0x31, 0x00, 0x00, 0x68, 0x65,
                                        0x6c, 0x6c, 0x6f, 0x0a, 0x17, 0x2d, 0x2c, 0x29};
  spit(dir, "invalid/plain-zstd.zst", plain, sizeof plain);
}

static void csv_of(const char *dir, const char *name) {
  char in[4096], out[4096];
  snprintf(in, sizeof in, "%s/valid/%s.zst", dir, name);
  snprintf(out, sizeof out, "%s/valid/%s.csv", dir, name);
  gmt_reader_t *r;
  gm_err_t err;
  if (gmt_reader_open(&r, in, &err) != GM_OK) die(in, &err);
  FILE *f = fopen(out, "w");
  if (!f || gmt_csv_export(r, f, &err) != GM_OK) die(out, &err);
  fclose(f);
  gmt_reader_close(r);
}

int main(int argc, char **argv) {
  if (argc != 2 || argv[1][0] == '-') {
    fprintf(stderr, "usage: gmt_mkvectors TRACES_DIR   (writes TRACES_DIR/valid and TRACES_DIR/invalid)\n");
    return 2;
  }
  const char *dir = argv[1];
  all_kinds(dir);
  extremes(dir);
  loop(dir, "valid/training-loop.zst", 0, 1);
  empty(dir);
  future_records(dir);
  const char *valid[] = {"all-kinds", "extremes", "training-loop", "empty", "future-records"};
  for (size_t i = 0; i < sizeof valid / sizeof *valid; i++) csv_of(dir, valid[i]);
  invalid(dir);
  return 0;
}
