#!/bin/bash
# frameworks_test.sh: every framework's trace gets its own framework's answer (issue 10).
# The JAX corpus (traces/recorded/jax: real recordings on an H100) through info, gpureplay
# --sweep and gpuanalyze report: the trace names JAX, says what it holds, is swept with JAX's
# settings and gets a line to paste in JAX's words, never PyTorch's; CuPy's pool blocks are
# said to be pool blocks and get no setting; XLA's platform allocator's VMM buffers are the
# requests; a native trace warns that it holds segments, not requests.
# TensorFlow is not on our GPU machines: a hand-written TF-style trace (a CSV in the text form,
# the header naming TensorFlow) checks its sweep and its advice.
# Usage: frameworks_test.sh GPUANALYZE GPUREPLAY GPUREC JAX_CORPUS_FILE...
set -u
GA=$(realpath "$1"); RP=$(realpath "$2"); GR=$(realpath "$3"); shift 3
D=""
for f in "$@"; do case "$f" in *.zst) D=$(dirname "$(realpath "$f")"); break;; esac; done
T=${TEST_TMPDIR:-$(mktemp -d)}/fw
rm -rf "$T" && mkdir -p "$T" && cd "$T" || exit 1
fails=0
fail() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
has() { grep -qF -- "$2" "$1" || fail "$1 lacks '$2': $(head -c 2000 "$1")"; }
hasnt() { ! grep -qF -- "$2" "$1" || fail "$1 has '$2': $(grep -F -- "$2" "$1" | head -3)"; }

cp "$D"/*.zst .
# info: framework and content
"$GA" info jax_train_shapes.requests.zst >info.txt 2>&1 || fail "info rc=$?"
has info.txt "framework:      JAX 0.11.2"
has info.txt "holds:          requests: stream-ordered allocations, exact sizes"
"$GA" info cupy_varsize.native.zst >info2.txt 2>&1 || fail "info cupy rc=$?"
has info2.txt "holds:          pool blocks: CuPy's memory pool"

# gpureplay --sweep: JAX's grid, in JAX's words, and nothing of PyTorch's
"$RP" jax_free_regrow.requests.zst --sweep >sweep.txt 2>sweep.err || fail "sweep rc=$?"
has sweep.txt "framework: JAX 0.11.2; the trace holds requests"
has sweep.txt "jax:XLA_PYTHON_CLIENT_PREALLOCATE=false"
has sweep.txt "jax:XLA_PYTHON_CLIENT_MEM_FRACTION=.5"
hasnt sweep.txt "pytorch"
# its growth figure is JAX's own peak_pool_bytes (PREDICTION.md)
grep "jax:XLA_PYTHON_CLIENT_PREALLOCATE=false$" sweep.txt | grep -q "2.00 GiB" || fail "growth: $(cat sweep.txt)"

# the line users paste is a policy
"$RP" jax_eager_grow.requests.zst -p "XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_PYTHON_CLIENT_MEM_FRACTION=0.031258" \
  --json >paste.json 2>/dev/null || fail "paste-line policy rc=$?"
grep -q '"ooms":[1-9]' paste.json || fail "the tight fraction must run out of memory: $(cat paste.json)"
"$RP" jax_eager_grow.requests.zst -p XLA_PYTHON_CLIENT_MEM_FRACTION=2 >bad.txt 2>bad.err
[ $? = 2 ] || fail "a bad JAX value must be a usage error"
has bad.err "accepted: a number in (0, 1]"

# the report: JAX named, JAX's line, never PyTorch's
"$GA" report jax_train_shapes.requests.zst --html r.html >rep.txt 2>rep.err || fail "report rc=$?: $(cat rep.err)"
has rep.txt "framework: JAX 0.11.2 (advice in JAX's words)"
# the tuner by default searches no hard limit: growth stays the advice, and it says how to ask
# for more; with --limits: the smallest fraction that serves every request, 44 % below growth,
# with the caveat of a hard limit; the sweep alone (--no-tune) advises growth too
has rep.txt "paste: export XLA_PYTHON_CLIENT_PREALLOCATE=false"
has rep.txt "the sweep grid's best, jax:XLA_PYTHON_CLIENT_PREALLOCATE=false (2.03 GiB), is already the best: the search found nothing smaller within the budget (\`gpuanalyze report --limits\` searches hard limits too)"
hasnt rep.txt "MEM_FRACTION=0.014327"
"$GA" report --limits jax_train_shapes.requests.zst --db limits.db --html r3.html >rep3.txt 2>&1 || fail "report --limits rc=$?"
has rep3.txt "paste: export XLA_PYTHON_CLIENT_MEM_FRACTION=0.014327"
has rep3.txt "beats the sweep grid's best, jax:XLA_PYTHON_CLIENT_PREALLOCATE=false (2.03 GiB), by 920.00 MiB (44.2%)"
has rep3.txt "(scale it for another GPU) and a hard limit, found at the edge for this recording"
"$GA" report --no-tune jax_train_shapes.requests.zst --db sweep.db --html r2.html >rep2.txt 2>&1 || fail "report --no-tune rc=$?"
has rep2.txt "paste: export XLA_PYTHON_CLIENT_PREALLOCATE=false"
hasnt rep2.txt "tuned (gpureplay --tune)"
has rep.txt "saving vs default (jax,"
has rep.txt "XLA compiles a different program"
hasnt rep.txt "PYTORCH_CUDA_ALLOC_CONF"
[ -s r.html ] || fail "no HTML report"

# CuPy: a native recording holds pool blocks: said, and no setting advised
"$GA" report cupy_varsize.native.zst --html c.html >cupy.txt 2>&1 || fail "cupy report rc=$?"
has cupy.txt "no setting advised: a native recording holds"
hasnt cupy.txt "paste:"
# ... its requests-mode recording is replayed through CuPy's pool model: the pool it predicts is
# CuPy's own pool_total_bytes of the real run (794832896, runs.jsonl)
"$RP" cupy_varsize.requests.zst --sweep --json >cs.json 2>/dev/null || fail "cupy sweep rc=$?"
grep '"policy":"cupy"' cs.json | grep -q '"peak_reserved_bytes":794832896,' || fail "cupy pool: $(cat cs.json)"
"$GA" report cupy_varsize.requests.zst --html c2.html >cupy2.txt 2>&1 || fail "cupy report 2 rc=$?"
has cupy2.txt "framework: CuPy 14.2.0 (advice in CuPy's words)"
has cupy2.txt "paste: unset CUPY_GPU_MEMORY_LIMIT"
hasnt cupy2.txt "PYTORCH"

# a native JAX trace: the BFC's regions, not requests
"$RP" jax_train_shapes.native.zst -p jax:XLA_PYTHON_CLIENT_PREALLOCATE=false >nat.txt 2>&1 || fail "native rc=$?"
has nat.txt "the trace holds segments"
has nat.txt "warning: the requests replayed peak at"

# XLA's platform allocator: one VMM reservation + map per buffer, replayed as the requests
"$RP" jax_train_shapes.platform-run1.zst -p jax:XLA_PYTHON_CLIENT_ALLOCATOR=platform --json >plat.json 2>/dev/null ||
  fail "platform rc=$?"
grep -q '"device_alloc_calls":2585,' plat.json || fail "platform: $(cat plat.json)"
"$RP" jax_train_shapes.platform-run1.zst -p direct --vmm-buffers=skip --json >skip.json 2>/dev/null || fail "skip rc=$?"
grep -q '"device_alloc_calls":7,' skip.json || fail "--vmm-buffers=skip: $(cat skip.json)"

# TensorFlow: a requests-mode trace of a TF job (hand-written): 40 steps, each a 96 MiB
# activation and a 24 MiB gradient that live across the next step, growing slowly
{
  echo "# gpumem trace, text form 1"
  echo "#capture_mode=requests"
  echo "#pid=7"
  echo "#start_time_ns=1795000000000000000"
  echo "#gpu_total_mem=85017493504"
  echo "#kv.TF_GPU_ALLOCATOR=cuda_malloc_async"
  echo "#kv.framework.tensorflow=2.17.0"
  echo "ts_ns,kind,device,stream,addr,size,mem_kind,flags,corr_id,callsite,context"
  t=1000
  for i in $(seq 1 40); do
    a=$((0x100000000 + i * 0x40000000)); g=$((a + 0x20000000))
    echo "$t,alloc,0,3,$(printf 0x%x $a),$((100663296 + i * 1048576)),device,0x3,0,0,1"; t=$((t + 10))
    echo "$t,alloc,0,3,$(printf 0x%x $g),25165824,device,0x3,0,0,1"; t=$((t + 10))
    if [ "$i" -gt 1 ]; then
      p=$((0x100000000 + (i - 1) * 0x40000000))
      echo "$t,free,0,3,$(printf 0x%x $p),0,device,0x3,0,0,1"; t=$((t + 10))
      echo "$t,free,0,3,$(printf 0x%x $((p + 0x20000000))),0,device,0x3,0,0,1"; t=$((t + 10))
    fi
  done
} >tfjob.csv
"$GR" import tfjob.csv -o tfjob.zst 2>/dev/null || fail "import tfjob.csv rc=$?"
"$RP" tfjob.zst --sweep >tfs.txt 2>&1 || fail "tf sweep rc=$?"
has tfs.txt "framework: TensorFlow 2.17.0"
has tfs.txt "tf:TF_FORCE_GPU_ALLOW_GROWTH=true"
hasnt tfs.txt "pytorch"
hasnt tfs.txt "jax"
"$RP" tfjob.zst -p "TF_FORCE_GPU_ALLOW_GROWTH=true per_process_gpu_memory_fraction=0.5" >tfp.txt 2>&1 ||
  fail "a TF line as --policy rc=$?: $(cat tfp.txt)"
has tfp.txt "tf:TF_FORCE_GPU_ALLOW_GROWTH=true per_process_gpu_memory_fraction=0.5"
"$GA" report tfjob.zst --html tf.html >tfr.txt 2>&1 || fail "tf report rc=$?"
has tfr.txt "framework: TensorFlow 2.17.0 (advice in TensorFlow's words)"
has tfr.txt "paste: cfg = tf.compat.v1.ConfigProto(); cfg.gpu_options.per_process_gpu_memory_fraction = 0.25  (the Session's config)"
hasnt tfr.txt "per_process_gpu_memory_fraction = 0.005267"
"$GA" report --limits tfjob.zst --db tfl.db --html tf3.html >tfr3.txt 2>&1 || fail "tf report --limits rc=$?"
has tfr3.txt "paste: cfg = tf.compat.v1.ConfigProto(); cfg.gpu_options.per_process_gpu_memory_fraction = 0.005267"
has tfr3.txt "beats the sweep grid's best, tf:TF_FORCE_GPU_ALLOW_GROWTH=true (1.00 GiB), by 596.96 MiB (58.3%)"
"$GA" report --no-tune tfjob.zst --db tfs.db --html tf2.html >tfr2.txt 2>&1 || fail "tf report --no-tune rc=$?"
has tfr2.txt "paste: export TF_FORCE_GPU_ALLOW_GROWTH=true"
has tfr.txt "saving vs default (tf,"
hasnt tfr.txt "PYTORCH"
hasnt tfr.txt "XLA_"

[ "$fails" = 0 ] || { echo "$fails failure(s)"; exit 1; }
echo PASS
