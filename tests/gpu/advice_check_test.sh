#!/bin/bash
# advice_check_test.sh: tests/gpu/advice_check.sh without a GPU (its dry run: the built tools,
# the fragment job's plan as its trace, train_ckpt's requests trace standing in for the other new
# jobs, each run replaced by a stand-in printing a figure relative to the prediction). Checks the
# advice is parsed from gpuanalyze report and applied the way a shell takes the paste line, the
# verdicts (exact, miss, MORE THAN THE DEFAULT), one run when the default is kept, the real-run
# records and the archive; that the tuner advises max_split_size_mb for the fragment job's plan;
# and advice_table.py on the report's "keep the default" form and on a JAX result.
# Usage: advice_check_test.sh GPUREC GPUREPLAY GPUANALYZE STANDIN_TRACE
set -u
T=${TEST_TMPDIR:-$(mktemp -d)}
B=$T/bin
mkdir -p "$B"
ln -sf "$(realpath "$1")" "$B/gpurec"
ln -sf "$(realpath "$2")" "$B/gpureplay"
ln -sf "$(realpath "$3")" "$B/gpuanalyze"
STANDIN=$(realpath "$4")
HERE=$(dirname "$(realpath "$0")")
TAB=$HERE/advice_table.py
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

bash -n "$HERE/advice_check.sh" || fail "advice_check.sh does not parse"

cat > "$T/fake.tsv" <<'EOF'
fragment recorded 1
fragment advised pred
fragment default pred+500000000
hf_gpt2 recorded 2
hf_gpt2 advised pred+2097152
hf_gpt2 default pred+1000000000
nanogpt recorded 3
nanogpt advised pred
nanogpt default pred-1
infer_varlen advised pred
EOF
run() { # OUTDIR JOBS
  PATH=$B:$PATH OUT=$T/$1 ADVICE_WORK=$T/w$1 ADVICE_DRY=$T/fake.tsv ADVICE_DRY_TRACE=$STANDIN \
    ADVICE_JOBS=$2 bash "$HERE/advice_check.sh" none > "$T/$1.log" 2>&1
}
run o1 fragment,hf_gpt2,nanogpt,infer_varlen
rc=$?
[ "$rc" = 3 ] || fail "a miss and a run above the default: exit $rc, not 3"
grep -q '^ADVICE CHECK: FAIL$' "$T/o1.log" || fail "no FAIL line"
row() { grep "^| $1 |" "$T/o1/advice_check.txt" | tail -1; }
verdict() { row "$1" | awk -F'|' '{ gsub(/^ +| +$/, "", $7); print $7 }'; }
[ "$(verdict fragment)" = exact ] || fail "fragment: '$(row fragment)'"
[ "$(verdict hf_gpt2)" = miss ] || fail "hf_gpt2 (2 MiB above the prediction): '$(row hf_gpt2)'"
[ "$(verdict nanogpt)" = "exact, MORE THAN THE DEFAULT" ] || fail "nanogpt (1 B above the default): '$(row nanogpt)'"
[ "$(verdict infer_varlen)" = exact ] || fail "infer_varlen: '$(row infer_varlen)'"
row fragment | grep -q 'max_split_size_mb' ||
  fail "the tuner does not advise max_split_size_mb for the fragment job's plan: '$(row fragment)'"
grep -q '^3 of 4 advised runs exact to the byte, 0 inside the stated range, 1 missed or did not run; 1 reserve more than the default; 1 advice lines hold max_split_size_mb$' "$T/o1.log" ||
  fail "summary: $(grep 'advised runs' "$T/o1.log")"

# the paste line applied as a shell takes it: the stand-in printed the setting it saw
mkdir -p "$T/x" && tar -C "$T/x" -xzf "$T/o1/advice.tar.gz" || fail "no archive"
X=$T/x/advice
conf() { sed -n 's/.*"alloc_conf": "\([^"]*\)".*/\1/p' "$X/runs/$1.out"; }
spec=$(python3 "$TAB" advice "$X/fragment.report.txt" | head -1)
[ "pytorch:$(conf fragment.advised)" = "$spec" ] || fail "fragment advised run saw '$(conf fragment.advised)', the report chose '$spec'"
[ -z "$(conf fragment.default)" ] || fail "fragment default run saw '$(conf fragment.default)'"
spec=$(python3 "$TAB" advice "$X/hf_gpt2.report.txt" | head -1)
[ "pytorch:$(conf hf_gpt2.advised)" = "$spec" ] || fail "hf_gpt2 advised run saw '$(conf hf_gpt2.advised)', the report chose '$spec'"
[ -e "$X/runs/infer_varlen.default.out" ] && fail "infer_varlen keeps the default: one run, not two"
for f in fragment.zst hf_gpt2.zst nanogpt.zst table.md runs.jsonl summary.txt fragment.replay.json; do
  [ -s "$X/$f" ] || fail "archive lacks $f"
done
python3 - "$X/runs.jsonl" <<'EOF' || fail "runs.jsonl"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
want = {("fragment", "recorded"), ("fragment", "advised"), ("fragment", "default"), ("hf_gpt2", "recorded"),
        ("hf_gpt2", "advised"), ("hf_gpt2", "default"), ("nanogpt", "recorded"), ("nanogpt", "advised"),
        ("nanogpt", "default"), ("infer_varlen", "advised")}
got = {(r["job"], r["variant"]) for r in rows}
assert got == want and len(rows) == len(want), sorted(got ^ want)
for r in rows:
    assert r["rc"] == 0 and isinstance(r["result"]["max_memory_reserved"], int), r
    assert r["variant"] == "recorded" or r["policy"].startswith("pytorch"), r
    assert r["trace"] in ("traces/recorded/infer_varlen.requests.zst",) or r["trace"].startswith("traces/recorded/advice/") or r["variant"] == "recorded", r
EOF

# all runs as predicted and none above the default: exit 0
cat > "$T/fake.tsv" <<'EOF'
fragment recorded 1
fragment advised pred
fragment default pred+1
infer_varlen advised pred
EOF
run o2 fragment,infer_varlen || fail "all exact: exit $?: $(tail -3 "$T/o2.log")"
grep -q '^ADVICE CHECK: PASS$' "$T/o2.log" || fail "no PASS line"

# the report's other forms, and the figures
cat > "$T/keep.txt" <<'EOF'
t.zst:
  framework: PyTorch 2.11.0+cu130 (advice in PyTorch's words)
  keep the default (pytorch): no setting is reliably smaller
    the default reserves 730.00 MiB (730.00 MiB..730.00 MiB with what the replay cannot tell: timing, placement)
  paste: nothing (the default)
EOF
[ "$(python3 "$TAB" advice "$T/keep.txt" | head -1)" = pytorch ] || fail "keep the default: spec"
[ "$(python3 "$TAB" advice "$T/keep.txt" | sed -n 2p)" = "" ] || fail "keep the default: paste"
echo "  waste: 1 MiB" > "$T/none.txt"
python3 "$TAB" advice "$T/none.txt" > /dev/null 2>&1 && fail "a report without advice is accepted"
printf 'noise\nGPUMEM_RESULT {"stats": {"peak_pool_bytes": 2183135232, "pool_bytes": 1}}\n' > "$T/jax.out"
[ "$(python3 "$TAB" figure "$T/jax.out")" = 2183135232 ] || fail "JAX figure"
printf 'Traceback: out of memory\n' > "$T/dead.out"
[ "$(python3 "$TAB" figure "$T/dead.out")" = "?" ] || fail "a run without a result"
echo '{"peak_reserved_bytes": 100, "peak_reserved_range": {"low_bytes": 90, "high_bytes": 120}}' > "$T/r.json"
python3 "$TAB" row j pytorch "" "$T/r.json" "$T/jax.out" "$T/jax.out" | grep -q '| miss |$' || fail "row: outside the range"
printf 'GPUMEM_RESULT {"max_memory_reserved": 110}\n' > "$T/in.out"
python3 "$TAB" row j pytorch "" "$T/r.json" "$T/in.out" "$T/in.out" | grep -q '| 100 (90..120) | 110 | 110 | in range |$' ||
  fail "row: inside the range: $(python3 "$TAB" row j pytorch "" "$T/r.json" "$T/in.out" "$T/in.out")"

# the jobs file: its usage, and the fragment plan written whole
python3 "$HERE/advice_jobs.py" bogus 2> /dev/null && fail "advice_jobs.py takes an unknown job"
python3 "$HERE/advice_jobs.py" fragment --csv "$T/f.csv" && "$B/gpurec" import -q "$T/f.csv" -o "$T/f.zst" ||
  fail "fragment plan does not import"
[ "$(grep -c ',alloc,' "$T/f.csv")" = 120 ] && [ "$(grep -c ',free,' "$T/f.csv")" = 119 ] ||
  fail "fragment plan: 120 allocations and 119 frees expected"

if [ "$fails" = 0 ]; then echo "PASS"; else echo "$fails failed"; cat "$T/o1.log"; exit 1; fi
