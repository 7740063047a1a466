// rec_tclock: the counter mapped onto a clock that runs at another rate, drifts, or jumps.
#include "recorder/rec_tclock.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

namespace {

// A fake counter and the clock it is read against: clock = off + tick * rate, the rate
// changeable in flight (drift); reads counts the real clock's readings.
struct Fake {
  uint64_t tick = 1000000;
  double rate = 0.25;  // ns per tick (a 4 GHz counter)
  double ns_at_tick0 = 5e9;
  uint64_t tick0 = 1000000;
  int reads = 0;
  uint64_t ns() const { return (uint64_t)(ns_at_tick0 + (double)(tick - tick0) * rate); }
  void set_rate(double r) {  // from now on, continuously
    ns_at_tick0 = (double)ns();
    tick0 = tick;
    rate = r;
  }
};

uint64_t Now(void *ctx) {
  Fake *f = static_cast<Fake *>(ctx);
  f->reads++;
  return f->ns();
}

TEST(TClock, TracksTheClockAtAFractionOfItsReadings) {
  Fake f;
  rec_tclock_t c{};
  double worst = 0;
  const int n = 100000;
  for (int i = 0; i < n; i++) {
    f.tick += 10000;  // 2.5 us between readings
    uint64_t t = rec_tclock_read(&c, f.tick, Now, &f);
    worst = std::fmax(worst, std::fabs((double)t - (double)f.ns()));
  }
  EXPECT_LE(worst, 2.0) << "ns off the clock at a steady rate";
  EXPECT_LT(f.reads, n / 100) << "the clock itself read at most every ~400 readings (1 ms)";
  EXPECT_GT(f.reads, n / 500);
}

TEST(TClock, FollowsDriftWithinAMillisecondsWorth) {
  Fake f;
  rec_tclock_t c{};
  for (int i = 0; i < 1000; i++) {
    f.tick += 10000;
    rec_tclock_read(&c, f.tick, Now, &f);
  }
  f.set_rate(0.25 * (1 + 1e-4));  // 100 ppm faster from here
  double worst = 0;
  uint64_t prev = 0;
  for (int i = 0; i < 10000; i++) {
    f.tick += 10000;
    uint64_t t = rec_tclock_read(&c, f.tick, Now, &f);
    ASSERT_GE(t, prev);
    prev = t;
    worst = std::fmax(worst, std::fabs((double)t - (double)f.ns()));
  }
  // one interval at the old rate: at most 100 ppm of a millisecond (and a little rounding)
  EXPECT_LE(worst, 1e6 * 1e-4 + 2);
}

TEST(TClock, NeverGoesBackwardsWhenTheClockOrCounterDoes) {
  Fake f;
  rec_tclock_t c{};
  uint64_t prev = 0;
  for (int i = 0; i < 5000; i++) {
    f.tick += 10000;
    if (i == 2000) f.ns_at_tick0 -= 3e5;  // the clock steps back 300 us
    if (i == 3000) f.tick -= 50000;       // the counter goes back (another CPU's)
    uint64_t t = rec_tclock_read(&c, f.tick, Now, &f);
    ASSERT_GE(t, prev) << i;
    prev = t;
  }
  // and it is the clock again once that caught up
  f.tick += 1000000000;
  EXPECT_EQ(rec_tclock_read(&c, f.tick, Now, &f), f.ns());
}

TEST(TClock, ReadingsCloserThanTheMinimumIntervalKeepReadingTheClock) {
  Fake f;
  rec_tclock_t c{};
  // 1 ns apart: no rate can be read from 10 us yet, so each reading is the clock's own
  for (int i = 0; i < 300; i++) {
    f.tick += 4;
    EXPECT_EQ(rec_tclock_read(&c, f.tick, Now, &f), f.ns()) << i;
  }
  EXPECT_EQ(f.reads, 300);
}

}  // namespace
