#!/bin/bash
# self_check_table.sh: traces/recorded/selfcheck/TABLE.md from the recordings and real runs
# beside it (runs.jsonl, written by tests/gpu/self_check.sh on the GPU machine): for each real
# job, what it reserved unrecorded and recorded, the peak of its own segments in the trace, the
# replay under the setting it ran with, and what `gpuanalyze report` says of them.
#   self_check_table.sh GPUANALYZE GPUREPLAY DIR > TABLE.md
# Verdicts: exact (the replay, the segments and both runs all equal, and the report says so);
# in range (the segments and both runs equal, the replay's placement or timing range holds
# them, and the report says so); MISS otherwise, and the script exits 1.
set -u
GA=$(realpath "$1"); RP=$(realpath "$2"); D=$(realpath "$3")
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export GPUREPLAY=$RP
bad=0 n=0 exact=0
notes=()
echo "# The replay against its own run: real models, recorded by plain gpurec"
echo
echo "Made by \`tests/gpu/self_check.sh\` (jobs: tests/gpu/self_check_jobs.py) and"
echo "\`tests/tables/self_check_table.sh\` (CI: //tests/tables:self_check_test). Each job ran twice, recorded"
echo "and unrecorded (torch.cuda.max_memory_reserved() of each); the trace holds the recorded run's own"
echo "segments; gpureplay replays it under the setting the job ran with; \`gpuanalyze report\` compares them."
echo
echo "| job | batch | setting | unrecorded run (B) | recorded run (B) | its segments in the trace (B) | replay (B) | verdict | report says |"
echo "|---|---:|---|---:|---:|---:|---:|---|---|"
# runs.jsonl read once (Python), each row replayed once (its --json line and its results file)
python3 -c '
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    print("\t".join(str(x) for x in (r["trace"], r["job"], r["batch"], r["setting"], r["unrecorded_max_memory_reserved"],
                                      r["recorded_max_memory_reserved"], r.get("note", ""))))' "$D/runs.jsonl" > "$T/rows.tsv"
while IFS=$'\t' read -r trace job batch setting plain rec note; do
  [[ -n $note ]] && notes+=("- $job: $note.")
  pol=pytorch
  [[ $setting == expandable ]] && pol=pytorch:expandable_segments:True
  js=$("$RP" -q --json -p "$pol" -o "$T/r.json" "$D/$trace" 2> /dev/null)
  rep=$(grep -o '"peak_reserved_bytes":[0-9]*' <<< "$js" | head -1 | cut -d: -f2)
  seg=$(grep -o '"recorded_mapped_peak_bytes":[0-9]*' <<< "$js" | head -1 | cut -d: -f2)
  # the report's own check, from that replay (report would replay the whole sweep)
  said=$("$GA" load -q --db "$T/r.db" "$D/$trace" "$T/r.json" 2>&1 && "$GA" recommend --db "$T/r.db" 2>&1 |
    grep -o 'checked against the run: .*\|the replay misses this run by [^:]*' | head -1)
  rm -f "$T/r.db"
  verdict=MISS
  if [[ -n $seg && $seg == "$plain" && $seg == "$rec" ]]; then
    if [[ $rep == "$seg" && $said == *"exactly what the run reserved"* ]]; then verdict=exact; exact=$((exact + 1))
    elif [[ $said == *"inside the replay's range"* ]]; then verdict="in range"
    fi
  fi
  [[ $verdict == MISS ]] && bad=$((bad + 1))
  n=$((n + 1))
  echo "| $job | $batch | $setting | $plain | $rec | ${seg:--} | ${rep:--} | $verdict | ${said:-nothing} |"
done < "$T/rows.tsv"
echo
echo "$exact of $n exact: the replay under the job's own setting, the segments in its trace, the recorded run"
echo "and the unrecorded run all equal; $((n - exact - bad)) in range (the run's figure inside the replay's placement or timing"
echo "range); $bad missed. GPU: $(head -1 "$D/runs.jsonl" | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print(r["device"] + ", torch " + r["torch"])')."
for x in "${notes[@]}"; do echo; echo "$x"; done
[[ $bad == 0 ]]
