#!/usr/bin/env bash
# speed_ratio_test.sh REPLAY_BENCH: the replay-speed regression check (issue 28). The PyTorch
# policy and the reference (the engine with the `direct` policy) replay the same 10^6 synthetic
# events in the same process, alternated over 9 rounds; the median of CPU(pytorch)/CPU(direct)
# must stay at most MAX. A ratio, not a speed: CI machines are shared and their speed varies.
# MAX and how it was chosen: bench/RESULTS.md, "CI time and the replay-speed check".
set -eu
MAX=1.03
exec "$1" ratio 1000000 9 "$MAX" pytorch
