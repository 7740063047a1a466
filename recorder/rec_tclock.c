/* rec_tclock.c: the recorder's clock read from the CPU's time-stamp counter.
 *
 * Why: gpurec's default streams three PyTorch allocator entries per allocation
 * (rec_torch_stream.c), each wanting a time on the recorder's clock, whose reading (CUPTI's
 * timestamp or the vDSO's monotonic clock) costs ~35 ns on the H200 machine: a third of what
 * streaming costs a tight allocation loop. The counter costs a few ns. Each thread keeps its own
 * map (no shared state, no lock) and re-reads the real clock every REC_TCLOCK_CAL_READS readings
 * or REC_TCLOCK_CAL_NS of counter time, so the map's error is what the rate can drift within
 * a millisecond, and an interval's rate is read from the real clock at both ends. */
#include "recorder/rec_tclock.h"

uint64_t rec_tclock_read(rec_tclock_t *c, uint64_t tick, uint64_t (*now)(void *ctx), void *ctx) {
  uint64_t t;
  if (c->ns_per_tick > 0 && c->left && tick >= c->tick0 && (double)(tick - c->tick0) < c->cal_ticks) {
    c->left--;
    t = c->ns0 + (uint64_t)((double)(tick - c->tick0) * c->ns_per_tick);
  } else {
    t = now(ctx);
    if (!c->ns0 || tick < c->tick0) { /* first reading, or a counter that went back: start over */
      c->tick0 = tick;
      c->ns0 = t;
      c->ns_per_tick = 0;
    } else if (t >= c->ns0 + REC_TCLOCK_MIN_NS && tick > c->tick0) {
      c->ns_per_tick = (double)(t - c->ns0) / (double)(tick - c->tick0);
      c->cal_ticks = REC_TCLOCK_CAL_NS / c->ns_per_tick;
      c->tick0 = tick;
      c->ns0 = t;
    } /* else: too short an interval to read a rate from; keep the point, read the clock again */
    c->left = REC_TCLOCK_CAL_READS;
  }
  if (t < c->last) t = c->last;
  return c->last = t;
}
