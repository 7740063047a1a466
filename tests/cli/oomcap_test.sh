#!/bin/bash
# oomcap_test.sh: the OOM verdict within the limit the job set itself (issue 25, item 4). Two
# recordings of the same job that ran out of memory on an H200 (150109880320 B): five 512 MiB
# tensors live, a sixth refused. One holds what gpurec's sitecustomize writes when the job called
# torch.cuda.set_per_process_memory_fraction(0.02) and died of the OutOfMemoryError ("2.80 GiB
# allowed"): its verdict is within 0.02 x the device (3002197606 B), where no setting serves 3 GiB
# of live tensors. The other holds neither: within the GPU's memory the default serves it, and
# the verdict says the limit the run had is unknown instead of naming a change.
# Usage: oomcap_test.sh GPUANALYZE GPUREPLAY GPUREC
set -u
GA=$(realpath "$1"); RP=$(realpath "$2"); GR=$(realpath "$3")
T=${TEST_TMPDIR:-$(mktemp -d)}/oomcap
rm -rf "$T" && mkdir -p "$T" && cd "$T" || exit 1
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
has() { grep -qF -- "$2" "$1" || fail "$1 lacks '$2': $(cat "$1")"; }
lacks() { ! grep -qF -- "$2" "$1" || fail "$1 has '$2': $(cat "$1")"; }

# write NAME WITH_CAP: the job's trace in CSV text form
write() {
  local M=$((1 << 20)) t=0 i
  {
    echo "# gpumem trace, text form 1"
    echo "#capture_mode=torch"
    echo "#gpu_name=NVIDIA H200"
    echo "#gpu_total_mem=150109880320"
    echo "#kv.gpu_mem_info_total=150109880320"
    echo "#kv.framework.pytorch=2.11.0"
    if [ "$2" = 1 ]; then
      echo "#kv.device_usage=sampled"
      echo "#kv.torch.per_process_memory_fraction=0.02"
      echo "#kv.oom.message=CUDA out of memory. Tried to allocate 512.00 MiB. GPU 0 has a total capacity of 139.80 GiB of which 136.56 GiB is free. 2.80 GiB allowed; Of the allocated memory 2.50 GiB is allocated by PyTorch"
    fi
    echo "ts_ns,kind,device,stream,addr,size,mem_kind,callsite"
    echo "#string.1=job.py:12:step"
    [ "$2" = 1 ] && echo "500,device_usage,0,-,0x1,$((530 * M)),device,0"
    for i in 0 1 2 3 4; do t=$((t + 1000)); printf '%d,alloc,0,0,0x%x,%d,device,1\n' $t $((0x7f0000000000 + i * 512 * M)) $((512 * M)); done
    t=$((t + 1000)); echo "$t,alloc_failed,0,0,0x0,$((512 * M)),device,1"
    for i in 0 1 2 3 4; do t=$((t + 1000)); printf '%d,free,0,0,0x%x,%d,device,0\n' $t $((0x7f0000000000 + i * 512 * M)) $((512 * M)); done
  } >"$1.csv"
  "$GR" import "$1.csv" -o "$1.zst" >/dev/null 2>"$1.import.err" || fail "import $1: $(cat "$1.import.err")"
}
write capped 1
write plain 0

# The cap: the fraction times cuMemGetInfo's total (3002197606 B), before the message's rounded
# 2.80 GiB, for PyTorch's allocator alone: the recorded CUDA context (530 MiB) is beside it, so
# the replay refuses the request the job's run refused (the sixth; five live), not an earlier one.
"$GA" report --gpureplay="$RP" --db=capped.db capped.zst >capped.out 2>capped.err || fail "report capped: $(cat capped.err)"
has capped.out "replayed within 3.31 GiB (the limit the recorded run set itself: 2.80 GiB (set_per_process_memory_fraction(0.02)) for the allocator, beside the CUDA context and module code (530.00 MiB))"
has capped.out "every PyTorch setting ran out of memory in replay within 3.31 GiB; the job needs at least 3.00 GiB"
lacks capped.out "139.80 GiB"
lacks capped.out "the smallest change that would have served it"
"$GA" oom --gpureplay="$RP" capped.zst >capped.oom 2>capped.oom.err || fail "oom capped: $(cat capped.oom.err)"
has capped.oom "(the limit the recorded run set itself: 2.80 GiB (set_per_process_memory_fraction(0.02))"
has capped.oom "live then: 2.50 GiB in 5 allocations + 530.00 MiB CUDA context and module code (recorded)"
has capped.oom "no setting helps: the live bytes alone exceed the device by 208.88 MiB"
"$RP" capped.zst --json -p pytorch >capped.json 2>capped.json.err || fail "gpureplay capped: $(cat capped.json.err)"
python3 -c "
import json; d = json.loads(open('capped.json').readline())
assert d['capacity_bytes'] - d['context_bytes'] == 3002197606, (d['capacity_bytes'], d['context_bytes'])
assert d['first_oom_event'] == 6 and d['ooms'] == 1, d" || fail "gpureplay capped: not the job's limit or not its failure: $(cat capped.json)"

# Without the keys: the verdict says the limit is unknown (the GPU's memory assumed, said so).
"$GA" report --gpureplay="$RP" --db=plain.db plain.zst >plain.out 2>plain.err || fail "report plain: $(cat plain.err)"
has plain.out "replayed within 139.80 GiB (the recorded GPU's memory; the limit the job had is unknown"
has plain.out "the default (pytorch) serves every request within 139.80 GiB in replay, the one the run failed included: the limit the run had was lower and is unknown"
lacks plain.out "set itself"
lacks plain.out "the smallest change that would have served it"
"$GA" oom --gpureplay="$RP" plain.zst >plain.oom 2>plain.oom.err || fail "oom plain: $(cat plain.oom.err)"
has plain.oom "the recorded run failed 1 request; this replay served it within the capacity: the limit the run had was lower and is unknown"

if [ "$fails" -gt 0 ]; then
  echo "$fails failure(s)" >&2
  exit 1
fi
echo "oomcap_test: ok"
