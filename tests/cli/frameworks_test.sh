#!/bin/bash
# frameworks_test.sh: every framework's trace gets its own framework's answer (issue 10).
# The JAX corpus (traces/recorded/jax: real recordings on an H100) through info, gpureplay
# --sweep and gpuanalyze report: the trace names JAX, says what it holds, is swept with JAX's
# settings and gets a line to paste in JAX's words, never PyTorch's; CuPy's pool blocks are
# said to be pool blocks and get no setting; XLA's platform allocator's VMM buffers are the
# requests; a native trace warns that it holds segments, not requests.
# Usage: frameworks_test.sh GPUANALYZE GPUREPLAY JAX_CORPUS_FILE...
set -u
GA=$(realpath "$1"); RP=$(realpath "$2"); shift 2
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
has rep.txt "paste: export XLA_PYTHON_CLIENT_PREALLOCATE=false"
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

[ "$fails" = 0 ] || { echo "$fails failure(s)"; exit 1; }
echo PASS
