/* synth_dynamic.c: the "dynamic" model of bench/synth: a training-like request stream with
 * random tensor sizes and dynamic shapes, each allocation at a fresh address.
 *
 * Shape (what PyTorch training looks like to an allocator): parameters allocated once; then
 * steps, each a forward pass (per layer: a few activations kept for backward plus a
 * short-lived workspace), a backward pass in reverse order (gradient temporaries; the
 * layer's activations freed), and an optimizer tail. Layer sizes are fixed per layer but a
 * per-step "sequence length" scales them by 0.75-1.25 (dynamic shapes), which is what makes
 * caching allocators fragment. Sizes mix small (<1 MiB), medium (1-10 MiB) and large
 * tensors; 10% of layers run on a second stream (id 7). Events are cudaMalloc-like (no
 * flags, no correlation ids, no markers) and every allocation gets an address never used
 * before: the worst case for an address-keyed block map, and the input the replay
 * benchmarks and the gpureplay/cuda-backend tests were built on (it was bench/replay's own
 * generator). Its footprint stays within a few GiB, so it replays under a 4 GiB device.
 *
 * Generation is streaming: one step at a time into a buffer, so a benchmark can replay 10 M
 * events without holding them (the engine's memory figure must not include the input). */
#include "bench/synth/synth_dynamic.h"

#include <stdlib.h>
#include <string.h>

#define ACTS 3 /* activations kept per layer */

typedef struct layer {
  uint64_t act[ACTS], work, grad; /* base sizes */
  uint64_t stream;
  uint64_t live[ACTS];            /* addresses of this step's activations */
  uint64_t live_size[ACTS];
} layer_t;

struct synth_dyn {
  uint64_t rng, ts, next_addr;
  unsigned n_layers;
  layer_t *layers;
  int params_done;
  gmt_event_t *buf;
  size_t len, pos, cap;
  int oom; /* the buffer could not grow: the stream ends */
};

static uint64_t rnd(synth_dyn_t *s) {
  s->rng ^= s->rng << 13;
  s->rng ^= s->rng >> 7;
  s->rng ^= s->rng << 17;
  return s->rng;
}

static double unit(synth_dyn_t *s) { return (double)(rnd(s) >> 11) * (1.0 / 9007199254740992.0); }

/* log-uniform in [lo, hi) */
static uint64_t log_size(synth_dyn_t *s, double lo, double hi) {
  double l = __builtin_log(lo), h = __builtin_log(hi);
  return (uint64_t)__builtin_exp(l + (h - l) * unit(s));
}

static uint64_t pick_size(synth_dyn_t *s) {
  double u = unit(s);
  if (u < 0.60) return log_size(s, 512, 1 << 20);
  if (u < 0.92) return log_size(s, 1 << 20, 10 << 20);
  return log_size(s, 10 << 20, 96 << 20);
}

static void push(synth_dyn_t *s, uint8_t kind, uint64_t addr, uint64_t size, uint64_t stream) {
  if (s->oom) return;
  if (s->len == s->cap) {
    size_t nc = s->cap ? 2 * s->cap : 4096;
    gmt_event_t *nb = realloc(s->buf, nc * sizeof *nb);
    if (!nb) {
      s->oom = 1;
      return;
    }
    s->buf = nb;
    s->cap = nc;
  }
  gmt_event_t *e = &s->buf[s->len++];
  memset(e, 0, sizeof *e);
  s->ts += 1000 + rnd(s) % 9000;
  e->ts_ns = s->ts;
  e->kind = kind;
  e->addr = addr;
  e->size = size;
  e->stream = stream;
  e->mem_kind = GMT_MEM_DEVICE;
}

static uint64_t new_addr(synth_dyn_t *s, uint64_t size) {
  uint64_t a = s->next_addr;
  s->next_addr += (size + 511) / 512 * 512 + 512;
  return a;
}

static void gen_step(synth_dyn_t *s) {
  s->len = s->pos = 0;
  if (!s->params_done) {
    s->params_done = 1;
    for (unsigned i = 0; i < 4 * s->n_layers; i++) {
      uint64_t sz = pick_size(s);
      push(s, GMT_EV_ALLOC, new_addr(s, sz), sz, 0);
    }
  }
  double scale = 0.75 + 0.5 * unit(s); /* this step's sequence length */
  for (unsigned i = 0; i < s->n_layers; i++) {
    layer_t *l = &s->layers[i];
    for (int k = 0; k < ACTS; k++) {
      uint64_t sz = (uint64_t)((double)l->act[k] * scale) + 1;
      l->live[k] = new_addr(s, sz);
      l->live_size[k] = sz;
      push(s, GMT_EV_ALLOC, l->live[k], sz, l->stream);
    }
    uint64_t w = (uint64_t)((double)l->work * scale) + 1, wa = new_addr(s, w);
    push(s, GMT_EV_ALLOC, wa, w, l->stream);
    push(s, GMT_EV_FREE, wa, w, l->stream);
  }
  for (unsigned i = s->n_layers; i-- > 0;) {
    layer_t *l = &s->layers[i];
    uint64_t g = (uint64_t)((double)l->grad * scale) + 1, ga = new_addr(s, g);
    push(s, GMT_EV_ALLOC, ga, g, l->stream);
    for (int k = ACTS; k-- > 0;) push(s, GMT_EV_FREE, l->live[k], l->live_size[k], l->stream);
    push(s, GMT_EV_FREE, ga, g, l->stream);
  }
  for (int k = 0; k < 4; k++) { /* optimizer scratch */
    uint64_t sz = 4096u << k, a = new_addr(s, sz);
    push(s, GMT_EV_ALLOC, a, sz, 0);
    push(s, GMT_EV_FREE, a, sz, 0);
  }
}

synth_dyn_t *synth_dyn_new(uint64_t seed, unsigned layers) {
  synth_dyn_t *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->rng = seed * 0x9E3779B97F4A7C15ull + 0x1234567;
  if (!s->rng) s->rng = 1;
  s->n_layers = layers ? layers : 64;
  s->next_addr = 0x7f0000000000ull;
  s->layers = calloc(s->n_layers, sizeof *s->layers);
  if (!s->layers) {
    free(s);
    return NULL;
  }
  for (unsigned i = 0; i < s->n_layers; i++) {
    layer_t *l = &s->layers[i];
    for (int k = 0; k < ACTS; k++) l->act[k] = pick_size(s);
    l->work = pick_size(s);
    l->grad = pick_size(s);
    l->stream = unit(s) < 0.1 ? 7 : 0;
  }
  return s;
}

void synth_dyn_free(synth_dyn_t *s) {
  if (!s) return;
  free(s->layers);
  free(s->buf);
  free(s);
}

size_t synth_dyn_next(synth_dyn_t *s, gmt_event_t *out, size_t cap) {
  if (s->pos == s->len) gen_step(s);
  if (s->oom) return 0;
  size_t n = s->len - s->pos;
  if (n > cap) n = cap;
  memcpy(out, s->buf + s->pos, n * sizeof *out);
  s->pos += n;
  return n;
}
