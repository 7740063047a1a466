/* ptbench.c: throughput of the pytorch policy alone (no engine, no trace decoding), on a
 * synthetic training-like op stream, against glibc malloc/free on the same op stream in the
 * same run (sizes divided by 1024 so glibc stays off mmap) as a yardstick.
 *
 * Workload: a model of L layers; each step allocates L activations (sizes drawn once from a
 * mix of small, 1-10 MiB and large tensors, varied by +-3% per step like variable-length
 * batches), a backward pass frees them in reverse order while allocating and freeing gradient
 * temporaries, on one stream (every 8th step also a second stream). Events = allocs + frees.
 *
 * With JITTER=0 every step repeats the same sizes (a training loop: blocks are reused exactly);
 * with JITTER=3 sizes vary by +-3% per step (variable-length batches: many splits and merges,
 * thousands of cached blocks).
 *
 * usage: ptbench [EVENTS] [CONF] [JITTER%]   (default 20000000 events, conf "", jitter 3) */
#define _POSIX_C_SOURCE 200809L
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "replay/policies/pytorch/rp_pytorch.h"

typedef struct op {
  uint32_t kind; /* 0 alloc, 1 free */
  uint32_t slot;
  uint64_t size;
  uint64_t stream;
} op_t;

static uint64_t next_addr = 1ull << 32;
static gm_status_t d_alloc(void *c, uint64_t size, uint64_t *addr) {
  (void)c;
  *addr = next_addr;
  next_addr += (size + (2u << 20) - 1) / (2u << 20) * (2u << 20);
  return GM_OK;
}
static gm_status_t d_free(void *c, uint64_t addr, uint64_t size) { return GM_OK; }
static gm_status_t d_reserve(void *c, uint64_t size, uint64_t *addr) { return d_alloc(c, size, addr); }
static gm_status_t d_map(void *c, uint64_t addr, uint64_t size) { return GM_OK; }

static uint64_t rng = 88172645463325252ull;
static uint64_t g_jitter = 3;
static uint64_t xr(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int l_pad(size_t i) { return i % 3 != 0; }

static op_t *make_ops(size_t n, size_t *nslots) {
  enum { L = 96 };
  uint64_t base[L];
  for (int i = 0; i < L; i++) {
    uint64_t k = xr() % 10;
    base[i] = k < 5 ? 1 + xr() % (1u << 20) : k < 8 ? (1u << 20) + xr() % (9u << 20) : (10u << 20) + xr() % (90u << 20);
  }
  op_t *ops = malloc(n * sizeof *ops);
  size_t i = 0;
  *nslots = 2 * L + 2;
  uint64_t jitter_pct = g_jitter;
  for (uint64_t step = 0; i < n; step++) {
    uint64_t stream = step % 8 == 7 ? 1 : 0;
    for (int l = 0; l < L && i < n; l++) {
      uint64_t jitter = base[l] * jitter_pct / 100;
      uint64_t sz = base[l] - jitter + (jitter ? xr() % (2 * jitter + 1) : 0);
      ops[i++] = (op_t){0, (uint32_t)l, sz ? sz : 1, stream};
    }
    for (int l = L - 1; l >= 0 && i + 3 <= n; l--) {
      ops[i++] = (op_t){0, (uint32_t)(L + l), base[l] / 2 + 1, stream};
      ops[i++] = (op_t){1, (uint32_t)(L + l), 0, stream};
      ops[i++] = (op_t){1, (uint32_t)l, 0, stream};
    }
    while (i < n && l_pad(i)) ops[i++] = (op_t){1, (uint32_t)(2 * L), 0, stream};
  }
  return ops;
}

int main(int argc, char **argv) {
  size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 20000000;
  const char *conf = argc > 2 ? argv[2] : "";
  g_jitter = argc > 3 ? strtoull(argv[3], NULL, 10) : 3;
  size_t nslots;
  op_t *ops = make_ops(n, &nslots);
  uint64_t *addr = calloc(nslots, sizeof *addr);
  void **ptr = calloc(nslots, sizeof *ptr);
  char *live = calloc(nslots, 1);

  rp_driver_t drv = {.mem_alloc = d_alloc, .mem_free = d_free, .va_reserve = d_reserve, .va_release = d_free,
                     .map = d_map, .unmap = d_free, .granularity = 2u << 20, .total_memory = 80ull << 30};
  rp_policy_t *p = NULL;
  gm_err_t err;
  if (rp_pytorch_ops.create(conf, &drv, &p, &err) != GM_OK) {
    fprintf(stderr, "ptbench: error: %s\n", err.msg);
    return 1;
  }
  double best = 1e30, best_ref = 1e30;
  for (int rep = 0; rep < 5; rep++) {
    double t0 = now();
    for (size_t i = 0; i < n; i++) {
      op_t o = ops[i];
      if (o.kind == 0) {
        if (live[o.slot]) continue;
        if (rp_pytorch_ops.alloc(p, o.size, o.stream, &addr[o.slot], &err) != GM_OK) {
          fprintf(stderr, "ptbench: error: %s\n", err.msg);
          return 1;
        }
        live[o.slot] = 1;
      } else if (live[o.slot]) {
        rp_pytorch_ops.free(p, addr[o.slot], &err);
        live[o.slot] = 0;
      }
    }
    double t = now() - t0;
    if (t < best) best = t;
    for (size_t s = 0; s < nslots; s++)
      if (live[s]) rp_pytorch_ops.free(p, addr[s], &err), live[s] = 0;
    t0 = now();
    for (size_t i = 0; i < n; i++) {
      op_t o = ops[i];
      if (o.kind == 0) {
        if (live[o.slot]) continue;
        ptr[o.slot] = malloc(o.size / 1024 + 1);
        live[o.slot] = 1;
      } else if (live[o.slot]) {
        free(ptr[o.slot]);
        live[o.slot] = 0;
      }
    }
    t = now() - t0;
    if (t < best_ref) best_ref = t;
    for (size_t s = 0; s < nslots; s++)
      if (live[s]) free(ptr[s]), live[s] = 0;
  }
  rp_policy_stats_t st;
  rp_pytorch_ops.stats(p, &st);
  printf("conf '%s' jitter %" PRIu64 "%%: %zu events, pytorch policy %.1f M events/s (%.1f ns/event), glibc malloc/free %.1f M events/s, "
         "ratio %.2f; splits %" PRIu64 ", merges %" PRIu64 ", %" PRIu64 " B cached at the end\n",
         conf, g_jitter, n, n / best / 1e6, best / n * 1e9, n / best_ref / 1e6, best_ref / best, st.splits, st.merges, st.cached_bytes);
  rp_pytorch_ops.destroy(p);
  return 0;
}
