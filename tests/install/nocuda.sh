#!/usr/bin/env bash
# tests/install/nocuda.sh: the README's install story on a machine without the CUDA toolkit, as
# CI runs it (tools/test). Run as root.
#   1. Hides every CUDA toolkit here: a private mount namespace (unshare -m) with an empty,
#      read-only tmpfs over /usr/local/cuda* and over any include dir of /usr/local holding
#      cuda.h; CUDA_HOME and friends unset. Checks that the compiler finds no <cuda.h>.
#      (A machine with no toolkit, such as a fresh CI runner, has nothing to hide.)
#   2. Runs tools/demo there with a Bazel output base of its own (so every action really runs
#      without CUDA; kept in ~/.cache/gpumem so a second run is incremental): the tools build
#      without CUDA headers, the injection library against NVIDIA's header wheels
#      (tools/setup -> tools/cuda_headers). Then the CUDA-dependent tests on those headers:
#      the driver-declaration check and gpurec's end-to-end test of the injection library.
#   3. tests/install/wheel_test.sh there: builds the wheel, installs it into a fresh venv, runs it.
set -euo pipefail
self="$(readlink -f "$0")"
cd "$(dirname "$self")/../.."

if [[ -z "${GPUMEM_NOCUDA_INSIDE:-}" ]]; then
  declare -A hide=()
  for d in /usr/local/cuda /usr/local/cuda-* /usr/local/include; do
    d="$(readlink -f "$d" 2>/dev/null || true)"
    [[ -d "$d" ]] || continue
    if [[ "$d" == /usr/local/cuda* || -e "$d/cuda.h" || -e "$d/cupti.h" ]]; then hide["$d"]=1; fi
  done
  export GPUMEM_NOCUDA_INSIDE=1
  unset CUDA_HOME CUDA_PATH GPUMEM_CUDA_PATH GPUMEM_CUPTI
  if ((${#hide[@]})); then
    # shellcheck disable=SC2016
    exec unshare -m --propagation private bash -c '
      for d in "${@:2}"; do mount -t tmpfs -o ro,size=4k gpumem-no-cuda "$d" || exit 1; done
      exec "$1"' bash "$self" "${!hide[@]}"
  fi
fi

echo "nocuda: CUDA toolkit hidden: $(ls -d /usr/local/cuda*/include/cuda.h /usr/local/include/cuda.h 2>/dev/null | wc -l) cuda.h left under /usr/local"
if echo '#include <cuda.h>' | gcc -E -x c - >/dev/null 2>&1; then
  echo "nocuda: FAIL: the compiler still finds <cuda.h>" >&2
  exit 1
fi

# Bazel with an output base of its own, leaving the checkout's bazel-* links alone.
T="$(mktemp -d)"
real_bazel="$(command -v bazel)"
cache="${GPUMEM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpumem}"
mkdir -p "$T/bin" "$cache"
printf 'build --symlink_prefix=/\n' >"$T/bazelrc"
cat >"$T/bin/bazel" <<EOF
#!/bin/sh
exec "$real_bazel" --output_base="$cache/bazel-nocuda" --bazelrc="$T/bazelrc" "\$@"
EOF
chmod +x "$T/bin/bazel"
export PATH="$T/bin:$PATH"
trap 'bazel shutdown >/dev/null 2>&1 || true; rm -rf "$T"' EXIT

echo "nocuda: tools/demo"
if ! GPUMEM_DEMO_DIR="$T/demo" tools/demo >"$T/demo.log" 2>&1; then
  cat "$T/demo.log"
  echo "nocuda: FAIL: tools/demo without the CUDA toolkit" >&2
  exit 1
fi
grep -E "^  (best policy|paste):" "$T/demo.log"
[[ -s "$T/demo/report.html" ]] || { echo "nocuda: FAIL: no report.html" >&2; exit 1; }
found="$(cat "$(bazel info output_base 2>/dev/null)/external/cuda/FOUND")"
echo "nocuda: CUDA headers from $found"
[[ "$found" == *"(header wheels)" ]] || { echo "nocuda: FAIL: expected the header wheels" >&2; exit 1; }
bazel test //replay/cuda:cuda_driver_abi_test //recorder:gpurec_test //recorder:rec_core_test 2>&1 | tail -4

echo "nocuda: tests/install/wheel_test.sh"
tests/install/wheel_test.sh
