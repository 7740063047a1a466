#!/bin/bash
# ranks_test.sh: the ranks of one job side by side and every mapped byte by owner (issue 17,
# items 2 and 3), on traces with known answers:
#  - three ranks written by hand (CSV text form, requests mode, world size 3): rank r holds
#    50 MiB of weights and (r+1) x 100 MiB of activations at once, so its framework peak is
#    150, 250, 350 MiB; rank 0 also maps 64 MiB through NCCL ("[libnccl.so.2]") and 2 MiB
#    with no callsite (unknown), so it maps 216 MiB at most. Sizes are 2 MiB multiples: the
#    default setting reserves exactly the live bytes. Rank 2 limits the job; max/min = 2.33.
#  - four ranks from the synthetic generator (gmsynth --world-size 4, batch 2, 4, 6, 8).
#  - the real DDP traces (traces/recorded/ddp.rank0/1.requests.zst): NCCL's 194 maps each.
#  - two real ranks whose own advice differs (traces/recorded/ddp1): `report` of both says the
#    one setting for the whole job, in the text and at the top of the HTML.
# Usage: ranks_test.sh GPUANALYZE GPUREPLAY GPUREC GMSYNTH DDP0 DDP1 TORCH_TRACE ONE0 ONE1
set -u
GA=$(realpath "$1"); RP=$(realpath "$2"); GR=$(realpath "$3"); GS=$(realpath "$4")
D0=$(realpath "$5"); D1=$(realpath "$6"); TT=$(realpath "$7"); O0=$(realpath "$8"); O1=$(realpath "$9")
T=${TEST_TMPDIR:-$(mktemp -d)}/ranks
rm -rf "$T" && mkdir -p "$T" && cd "$T" || exit 1
export GPUREPLAY=$RP
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
has() { grep -qF -- "$2" "$1" || fail "$1 lacks '$2': $(head -c 3000 "$1")"; }
M=1048576
for r in 0 1 2; do
  {
    echo "# gpumem trace, text form 1"
    echo "#capture_mode=requests"
    echo "#rank=$r"
    echo "#world_size=3"
    echo "#pid=$((100 + r))"
    echo "#start_time_ns=1795000000000000000"
    echo "#gpu_total_mem=85899345920"
    echo "#command_line=python train.py --ddp"
    echo "#kv.framework.pytorch=2.11.0"
    echo "ts_ns,kind,device,stream,addr,size,mem_kind,flags,corr_id,callsite,context"
    echo "#string.1=train.py:10 weights"
    echo "#string.2=train.py:20 activations"
    echo "#string.3=[libnccl.so.2]"
    echo "100,alloc,0,7,0x100000000,$((50 * M)),device,0x3,0,1,1"
    t=200
    for i in $(seq 1 $((r + 1))); do
      echo "$t,alloc,0,7,$(printf 0x%x $((0x200000000 + i * 0x10000000))),$((100 * M)),device,0x3,0,2,1"
      t=$((t + 10))
    done
    if [ "$r" = 0 ]; then
      echo "$t,vmm_map,0,-,0x7f0000000000,$((64 * M)),device,0x0,0,3,1"
      echo "$((t + 1)),vmm_map,0,-,0x7f1000000000,$((2 * M)),device,0x0,0,0,1"
      t=$((t + 10))
    fi
    for i in $(seq 1 $((r + 1))); do
      echo "$t,free,0,7,$(printf 0x%x $((0x200000000 + i * 0x10000000))),0,device,0x3,0,0,1"
      t=$((t + 10))
    done
  } >r$r.csv
  "$GR" import r$r.csv -o r$r.zst 2>/dev/null || fail "import r$r rc=$?"
done

# item 3: info attributes every mapped byte; gpurec's and info's peak live are one figure
"$GA" info r0.zst >i0.txt 2>&1 || fail "info rc=$?"
has i0.txt "peak live:      150.00 MiB"
has i0.txt "mapped:         216.00 MiB at most on device 0 (the framework's 150.00 MiB and 66.00 MiB of other owners then)"
has i0.txt "libnccl.so.2                    64.00 MiB at the peak"
has i0.txt "unknown driver allocations       2.00 MiB at the peak"
has i0.txt "CUDA context                   not recorded"

# capacity questions count the other owners: 150 MiB of requests and 66 MiB of maps do not
# fit in 200 MiB (the default, --count-other=auto, in a requests trace), the requests alone do
"$RP" r0.zst -p pytorch --capacity=200MiB >c1.txt 2>&1; has c1.txt "external: 2 VMM maps of other owners (NCCL, ...), peak 66.00 MiB"
grep -q "^ *1 *150.00 MiB .* 1  #2 " c1.txt || fail "maps counted: no OOM in 200 MiB: $(cat c1.txt)"
"$RP" r0.zst -p pytorch --capacity=200MiB --count-other=no >c2.txt 2>&1
grep -q "^ *1 *150.00 MiB .* 0  fits" c2.txt || fail "--count-other=no: $(cat c2.txt)"
"$RP" r0.zst -p pytorch --count-other=maybe >/dev/null 2>c3.txt; [ $? = 2 ] || fail "bad --count-other rc"

# torch-history (gpurec's default): the CUPTI side's maps carry GMT_F_EXTERNAL (0x8). PyTorch's
# 100 MiB segment and request, an unflagged 20 MiB map (its expandable page: the framework's)
# and NCCL's flagged 64 MiB map: 184 MiB mapped at most, NCCL's 64 MiB counted in a capacity
{
  echo "# gpumem trace, text form 1"
  echo "#capture_mode=torch-history"
  echo "#pid=77"
  echo "#start_time_ns=1795000000000000000"
  echo "#gpu_total_mem=85899345920"
  echo "ts_ns,kind,device,stream,addr,size,mem_kind,flags,corr_id,callsite,context"
  echo "#string.1=[libnccl.so.2]"
  echo "100,segment_alloc,0,7,0x100000000,$((100 * M)),device,0x0,0,0,1"
  echo "110,alloc,0,7,0x100000000,$((100 * M)),device,0x0,0,0,1"
  echo "120,vmm_map,0,-,0x7f0000000000,$((64 * M)),device,0x8,0,1,1"
  echo "130,vmm_map,0,-,0x7f8000000000,$((20 * M)),device,0x0,0,0,1"
  echo "140,free,0,7,0x100000000,0,device,0x0,0,0,1"
} >th.csv
"$GR" import th.csv -o th.zst 2>/dev/null || fail "import th rc=$?"
"$GA" info th.zst >th.txt 2>&1 || fail "info th rc=$?"
has th.txt "mapped:         184.00 MiB at most on device 0 (the framework's 120.00 MiB and 64.00 MiB of other owners then)"
has th.txt "libnccl.so.2                    64.00 MiB at the peak"
"$RP" th.zst -p pytorch --capacity=150MiB >th1.txt 2>&1
has th1.txt "external: 1 VMM map of other owners (NCCL, ...), peak 64.00 MiB"
grep -q "^ *1 .* 1  #2 " th1.txt || fail "torch-history: NCCL's map not counted in 150 MiB: $(cat th1.txt)"
"$RP" th.zst -p pytorch --capacity=150MiB --count-other=no >th2.txt 2>&1
grep -q "^ *1 *100.00 MiB .* 0  fits" th2.txt || fail "torch-history --count-other=no: $(cat th2.txt)"

# item 2: the ranks side by side, replayed here
"$GA" ranks r0.zst r1.zst r2.zst >k.txt 2>k.err || fail "ranks rc=$? $(cat k.err)"
has k.txt "job: python train.py --ddp (world size 3, 3 rank-devices loaded)"
has k.txt "limiting: rank 2 device 0 (peak reserved under the job's setting 350.00 MiB)"
has k.txt "spread: max/min 2.33"
has k.txt "job setting: pytorch"
has k.txt "the largest peak reserved over ranks: 350.00 MiB; under the default pytorch: 350.00 MiB"
has k.txt "100.00 MiB .. 300.00 MiB (rank 0 .. rank 2)  train.py:20 activations"
grep -q "^ *0 *0 *150.00 MiB *216.00 MiB *150.00 MiB" k.txt || fail "rank 0's row: $(cat k.txt)"
grep -q "^ *2 *0 *350.00 MiB *350.00 MiB *350.00 MiB *350.00 MiB  <- limits the job" k.txt || fail "rank 2's row: $(cat k.txt)"
has k.err "wrote ranks.db"
# a second time: the replays in ranks.db are reused, the figures the same
"$GA" ranks r0.zst r1.zst r2.zst >k2.txt 2>k2.err || fail "ranks again rc=$?"
grep -q "replaying" k2.err && fail "replayed again: $(cat k2.err)"
cmp -s k.txt k2.txt || fail "second run differs: $(diff k.txt k2.txt)"
"$GA" ranks --db ranks.db --json >k.json || fail "json rc=$?"
grep -q '"limiting_rank":2,"limiting_device":0' k.json || fail "json limiting: $(cat k.json)"
grep -q '"rank":0,"device":0,"trace_id":[0-9]*,"peak_live_bytes":157286400,"peak_mapped_bytes":226492416,"default_reserved_bytes":157286400' k.json || fail "json rank 0: $(cat k.json)"
"$GA" ranks --db ranks.db --csv >k.csv || fail "csv rc=$?"
[ "$(wc -l <k.csv)" = 4 ] || fail "csv rows: $(cat k.csv)"
grep -q '^"python train.py --ddp",3,2,0,367001600,367001600,367001600,367001600,"pytorch[^"]*",1$' k.csv || fail "csv rank 2: $(cat k.csv)"
# results files given: loaded, nothing replayed; a run loaded twice (two results files of the
# same sweep) counts once per rank
"$RP" r0.zst r1.zst r2.zst -p pytorch -p direct -q -o a.json >/dev/null 2>&1 || fail "a.json rc=$?"
"$RP" r0.zst r1.zst r2.zst -p pytorch -p direct -q -o b.json >/dev/null 2>&1 || fail "b.json rc=$?"
"$GA" ranks --db dup.db r0.zst r1.zst r2.zst a.json b.json >dup.txt 2>dup.err || fail "dup rc=$?"
grep -q "replaying" dup.err && fail "replayed though results were given: $(cat dup.err)"
has dup.txt "job setting: pytorch (the largest peak reserved over ranks: 350.00 MiB"
# the report's section and owners table
"$GA" report --db ranks.db >rep.txt || fail "report rc=$?"
has rep.txt "ranks of one job:"
has rep.txt "Memory by owner"
has rep.txt "CUDA context (not recorded)"
# two ranks told two things alone (rank 0: keep the default, 62 MiB under the floor; rank 1:
# expandable segments): `report` of both gives the job's one setting, after the ranks' own
# advice in the text, above the ranks' sections in the HTML, with its copy button
cp "$O0" one0.zst && cp "$O1" one1.zst
"$GA" report one0.zst one1.zst --html one.html >one.txt 2>one.err || fail "report of two ranks rc=$? $(cat one.err)"
grep -q "^  paste: nothing (the default)" one.txt || fail "rank 0's own advice changed: $(cat one.txt)"
grep -q "^  paste: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" one.txt || fail "rank 1's own advice changed: $(cat one.txt)"
has one.txt "ranks of one job:"
has one.txt "job setting: pytorch:expandable_segments:True (the largest peak reserved over ranks: 4.94 GiB; under the default pytorch: 5.07 GiB)"
has one.txt "  paste on every rank: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
[ "$(grep -n 'ranks of one job:' one.txt | cut -d: -f1)" -gt "$(grep -n '^  paste: ' one.txt | tail -1 | cut -d: -f1)" ] ||
  fail "the job's setting is not after the ranks' own advice: $(cat one.txt)"
has one.html '<section id="job-1" class="job"><h2>One setting for the whole job</h2>'
has one.html '<code id="paste-job-1">PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True</code>'
[ "$(grep -n 'id="job-1"' one.html | cut -d: -f1)" -lt "$(grep -n 'id="trace-1"' one.html | cut -d: -f1)" ] ||
  fail "the job's box is not above the ranks' sections"
"$GA" recommend --db report.db >rec.txt 2>&1 || fail "recommend rc=$?"
has rec.txt "  paste on every rank: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
# one trace alone, or traces of no common job: no job box
"$GA" report one0.zst --db alone.db --html alone.html >alone.txt 2>/dev/null || fail "report of one rank rc=$?"
grep -q "ranks of one job\|paste on every rank" alone.txt && fail "a job's setting from one rank: $(cat alone.txt)"
grep -q 'class="job"' alone.html && fail "a job box from one rank"
# usage
"$GA" ranks --json --csv --db ranks.db >/dev/null 2>u.err; [ $? = 2 ] || fail "json+csv not a usage error"
"$GA" ranks --db nosuch.db >/dev/null 2>n.err; [ $? = 1 ] || fail "missing db rc"
has n.err "cannot open database 'nosuch.db': no such file"

# ranks.db holds summaries only; the callsites live at each peak, made at load by a second
# pass over the trace, equal those v_live_at_peak selects from the event rows of a full load
[ "$(sqlite3 ranks.db 'SELECT COUNT(*) FROM events')" = 0 ] || fail "ranks.db holds event rows"
[ "$(sqlite3 ranks.db 'SELECT SUM(events_loaded) FROM traces')" = 0 ] || fail "events_loaded"
"$GA" load -q --db full.db r0.zst r1.zst r2.zst "$TT" || fail "full load rc=$?"
Q1="SELECT trace_id, callsite, allocs, bytes FROM trace_peak_callsites ORDER BY 1, 2"
Q2="SELECT p.trace_id, COALESCE(s.text, '(none)') AS cs, COUNT(*), SUM(p.size) FROM v_live_at_peak p
    LEFT JOIN strings s ON s.trace_id = p.trace_id AND s.string_id = p.callsite GROUP BY 1, 2 ORDER BY 1, 2"
sqlite3 full.db "$Q1" >pc1.txt; sqlite3 full.db "$Q2" >pc2.txt
[ "$(wc -l <pc1.txt)" -gt 8 ] || fail "few callsites: $(cat pc1.txt)"
cmp -s pc1.txt pc2.txt || fail "peak callsites differ from v_live_at_peak: $(diff pc1.txt pc2.txt | head)"

# the synthetic generator's ranks: the largest batch limits the job
for r in 0 1 2 3; do
  "$GS" -o s$r.zst --events 4000 --layers 2 --hidden 256 --batch $((2 * r + 2)) --world-size 4 --rank $r \
    --callsites || fail "gmsynth rc=$?"
done
"$GA" ranks --db s.db s0.zst s1.zst s2.zst s3.zst >s.txt 2>/dev/null || fail "synth ranks rc=$?"
has s.txt "job: gmsynth job --world-size 4 (world size 4, 4 rank-devices loaded)"
has s.txt "limiting: rank 3 device 0"

# the real DDP traces: NCCL's maps are other owners' memory, both ranks side by side
"$GA" info "$D0" >d0.txt || fail "ddp info rc=$?"
has d0.txt "mapped:         1.16 GiB at most on device 0 (the framework's 289.39 MiB and 900.25 MiB of other owners then)"
"$GA" ranks --db ddp.db "$D0" "$D1" >d.txt 2>/dev/null || fail "ddp ranks rc=$?"
has d.txt "(world size 2, 2 rank-devices loaded)"
grep -q "^ *1 *1 *289.39 MiB *1.16 GiB *300.00 MiB *300.00 MiB" d.txt || fail "ddp rank 1 on device 1: $(cat d.txt)"

# no advice inside the error for the job either: two ranks of 6 MiB tensors (10 and 20 live at
# once) reserve 80 and 140 MiB under the default, 60 and 120 MiB with expandable segments: 20 MiB
# on the ranks' worst, under the 64 MiB floor, so the job keeps the default (without the rule it
# was told to paste expandable_segments:True)
for r in 0 1; do
  {
    echo "# gpumem trace, text form 1"
    echo "#capture_mode=requests"
    echo "#rank=$r"
    echo "#world_size=2"
    echo "#pid=$((200 + r))"
    echo "#gpu_total_mem=85899345920"
    echo "#command_line=python small.py --ddp"
    echo "#kv.framework.pytorch=2.11.0"
    echo "ts_ns,kind,device,stream,addr,size,mem_kind,flags,corr_id,callsite,context"
    t=100 n=$((10 * (r + 1)))
    for i in $(seq 1 $n); do
      echo "$t,alloc,0,7,$(printf 0x%x $((0x200000000 + i * 0x10000000))),$((6 * M)),device,0x3,0,0,1"; t=$((t + 10))
    done
    for i in $(seq 1 $n); do
      echo "$t,free,0,7,$(printf 0x%x $((0x200000000 + i * 0x10000000))),0,device,0x3,0,0,1"; t=$((t + 10))
    done
  } >k$r.csv
  "$GR" import k$r.csv -o k$r.zst 2>/dev/null || fail "import k$r rc=$?"
done
"$GA" ranks --db k.db k0.zst k1.zst >k.txt 2>/dev/null || fail "keep ranks rc=$?"
has k.txt "job setting: pytorch (the largest peak reserved over ranks: 140.00 MiB; under the default pytorch: 140.00 MiB)"
has k.txt "keep the default on every rank: no setting is reliably smaller for the job (the least, pytorch:expandable_segments:True, saves at most 20.00 MiB on the ranks' worst, not more than 64.00 MiB: the floor and what the replay cannot tell)"
has k.txt "paste on every rank: unset PYTORCH_CUDA_ALLOC_CONF"

[ "$fails" = 0 ] || { echo "$fails failure(s)"; exit 1; }
echo PASS
