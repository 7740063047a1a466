/* synth.c: the synthetic training-like request stream (see synth.h for its shape).
 *
 * Generation is streaming: one step at a time into a buffer, so a benchmark can replay 10 M
 * events without holding them (the engine's memory figure must not include the input). */
#include "bench/replay/synth.h"

#include <stdlib.h>
#include <string.h>

#define ACTS 3 /* activations kept per layer */

typedef struct layer {
  uint64_t act[ACTS], work, grad; /* base sizes */
  uint64_t stream;
  uint64_t live[ACTS];            /* addresses of this step's activations */
  uint64_t live_size[ACTS];
} layer_t;

struct gr_synth {
  uint64_t rng, ts, next_addr;
  unsigned n_layers;
  layer_t *layers;
  int params_done;
  gmt_event_t *buf;
  size_t len, pos, cap;
};

static uint64_t rnd(gr_synth_t *s) {
  s->rng ^= s->rng << 13;
  s->rng ^= s->rng >> 7;
  s->rng ^= s->rng << 17;
  return s->rng;
}

static double unit(gr_synth_t *s) { return (double)(rnd(s) >> 11) * (1.0 / 9007199254740992.0); }

/* log-uniform in [lo, hi) */
static uint64_t log_size(gr_synth_t *s, double lo, double hi) {
  double l = __builtin_log(lo), h = __builtin_log(hi);
  return (uint64_t)__builtin_exp(l + (h - l) * unit(s));
}

static uint64_t pick_size(gr_synth_t *s) {
  double u = unit(s);
  if (u < 0.60) return log_size(s, 512, 1 << 20);
  if (u < 0.92) return log_size(s, 1 << 20, 10 << 20);
  return log_size(s, 10 << 20, 96 << 20);
}

static void push(gr_synth_t *s, uint8_t kind, uint64_t addr, uint64_t size, uint64_t stream) {
  if (s->len == s->cap) {
    s->cap = s->cap ? 2 * s->cap : 4096;
    s->buf = realloc(s->buf, s->cap * sizeof *s->buf);
    if (!s->buf) abort(); /* benchmark/test generator: no way to go on */
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

static uint64_t new_addr(gr_synth_t *s, uint64_t size) {
  uint64_t a = s->next_addr;
  s->next_addr += (size + 511) / 512 * 512 + 512;
  return a;
}

static void gen_step(gr_synth_t *s) {
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

gr_synth_t *gr_synth_new(uint64_t seed, unsigned layers) {
  gr_synth_t *s = calloc(1, sizeof *s);
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

void gr_synth_free(gr_synth_t *s) {
  if (!s) return;
  free(s->layers);
  free(s->buf);
  free(s);
}

size_t gr_synth_next(gr_synth_t *s, gmt_event_t *out, size_t cap) {
  if (s->pos == s->len) gen_step(s);
  size_t n = s->len - s->pos;
  if (n > cap) n = cap;
  memcpy(out, s->buf + s->pos, n * sizeof *out);
  s->pos += n;
  return n;
}
