#!/bin/bash
# prediction_table.sh: the table of traces/recorded/PREDICTION.md: each recorded requests
# trace (traces/recorded/NAME.requests.zst) replayed under the `pytorch` policy with the
# settings of the snapshot corpus's real runs (traces/snapshots/MANIFEST.tsv: the same
# scripts run without any recorder on the same GPU, torch's own max_memory_reserved and
# max_memory_allocated), prediction against reality.
#   usage: prediction_table.sh GPUREPLAY TRACES_DIR MANIFEST
# Prints the markdown block (header, one row per workload and setting, a summary line).
# Rows whose trace is missing (train_cnn has no requests trace) are left out.
set -u -o pipefail
GR=$1
DIR=$2
MANIFEST=$3

json_int() { # json_int KEY: the integer value of KEY in the JSON line on stdin
  grep -o "\"$1\":[0-9]*" | head -n 1 | cut -d: -f2
}
pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.2f", 100 * (a / b - 1) }'; }

echo "| workload | setting | PYTORCH_CUDA_ALLOC_CONF | predicted peak reserved (B) | real max_memory_reserved (B) | error % | predicted peak allocated (B) | real max_memory_allocated (B) | error % | external allocs / peak (B) | replayed under |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"
rows=0
exact=0
worst=0.00
while IFS=$'\t' read -r file workload setting conf frac total alloc reserved; do
  case "$file" in "#"*|"") continue ;; esac
  trace="$DIR/$workload.requests.zst"
  [ -f "$trace" ] || continue
  spec="pytorch"
  [ "$conf" != "-" ] && spec="pytorch:$conf"
  if [ "$frac" != "-" ]; then
    [ "$conf" = "-" ] && spec="pytorch:per_process_memory_fraction:$frac" ||
      spec="$spec,per_process_memory_fraction:$frac"
  fi
  out=$("$GR" "$trace" --policy="$spec" --json) || { echo "gpureplay failed on $trace" >&2; exit 1; }
  pr=$(printf '%s' "$out" | json_int peak_reserved_bytes)
  pa=$(printf '%s' "$out" | json_int peak_allocated_bytes)
  xn=$(printf '%s' "$out" | json_int external_allocs)
  xp=$(printf '%s' "$out" | json_int external_peak_bytes)
  er=$(pct "$pr" "$reserved")
  ea=$(pct "$pa" "$alloc")
  shown_conf="$conf"
  [ "$conf" = "-" ] && shown_conf="(default)"
  echo "| $workload | $setting | \`$shown_conf\` | $pr | $reserved | $er | $pa | $alloc | $ea | $xn / $xp | \`$spec\` |"
  rows=$((rows + 1))
  [ "$pr" = "$reserved" ] && exact=$((exact + 1))
  worst=$(awk -v w="$worst" -v e="$er" 'BEGIN { e = e < 0 ? -e : e; printf "%.2f", (e > w ? e : w) }')
done <"$MANIFEST"
echo
echo "$rows rows, $exact with peak reserved exact to the byte, largest |error| of peak reserved $worst %"
