/* rec_tclock.h: a cheap per-thread reading of the recorder's clock, from the CPU's time-stamp
 * counter (rec_tclock.c). */
#ifndef REC_TCLOCK_H
#define REC_TCLOCK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One thread's map from counter ticks onto the recorder's clock. Zero-initialised: calibrates
 * on first use. */
typedef struct rec_tclock {
  uint64_t tick0, ns0; /* the last calibration point */
  double ns_per_tick;  /* 0: no rate yet */
  double cal_ticks;    /* REC_TCLOCK_CAL_NS in ticks */
  uint64_t last;       /* the last time handed out: never less */
  unsigned left;       /* readings until the next calibration */
} rec_tclock_t;

#define REC_TCLOCK_CAL_READS 256    /* readings between calibrations at most */
#define REC_TCLOCK_CAL_NS 1000000.0 /* counter time between calibrations at most */
#define REC_TCLOCK_MIN_NS 10000u    /* the shortest interval a rate is read from */

/* The time of counter value tick on now's clock: now(ctx) itself at a calibration (the first
 * reading, then after REC_TCLOCK_CAL_READS readings or REC_TCLOCK_CAL_NS of counter time, or a
 * counter that went back), else the line through the last calibration point at the rate of the
 * interval before it. Never less than the reading before. */
uint64_t rec_tclock_read(rec_tclock_t *c, uint64_t tick, uint64_t (*now)(void *ctx), void *ctx);

/* rec_tclock_read with its common case (a rate known, within the calibration's interval) inline,
 * for a caller's hot path: the same time. */
static inline uint64_t rec_tclock_read_inline(rec_tclock_t *c, uint64_t tick, uint64_t (*now)(void *ctx),
                                              void *ctx) {
  if (__builtin_expect(c->ns_per_tick > 0 && c->left && tick >= c->tick0 &&
                           (double)(tick - c->tick0) < c->cal_ticks, 1)) {
    c->left--;
    uint64_t t = c->ns0 + (uint64_t)((double)(tick - c->tick0) * c->ns_per_tick);
    if (t < c->last) t = c->last;
    return c->last = t;
  }
  return rec_tclock_read(c, tick, now, ctx);
}

/* The CPU's counter (x86-64: rdtsc); REC_TCLOCK_TICKS is 0 where there is none (then call the
 * clock itself). */
#if defined(__x86_64__)
#include <x86intrin.h>
#define REC_TCLOCK_TICKS 1
static inline uint64_t rec_tclock_ticks(void) { return __rdtsc(); }
#else
#define REC_TCLOCK_TICKS 0
static inline uint64_t rec_tclock_ticks(void) { return 0; }
#endif

#ifdef __cplusplus
}
#endif
#endif /* REC_TCLOCK_H */
