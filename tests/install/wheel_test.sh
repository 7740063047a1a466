#!/usr/bin/env bash
# tests/install/wheel_test.sh [WHEEL]: the pip package as a user gets it. Installs the wheel
# (default: tools/build_wheel's) into a fresh virtualenv with pip, offline, and from there,
# through the console scripts of the venv (not activated):
#   - imports the package; --version of each tool names the release;
#   - gpurec import -> gpureplay --sweep -> gpuanalyze report on a bundled real snapshot, and
#     compares stdout with the same commands run by the Bazel-built tools (the wheel's are
#     statically linked: same code, same answers);
#   - records through the wheel's injection library (the CUDA-free fake app, GPUMEM_SELFTEST);
#   - where no CUPTI is installed system-wide: a libcupti in the venv's site-packages (where
#     torch's nvidia-cuda-cupti puts it) is found by the non-activated venv's gpurec;
#   - a trace from a newer writer names the package to install;
#   - mkwheel refuses binaries that need more than glibc (the normal, shared-library build).
# Called by tests/install/nocuda.sh (CI: tools/test), there without any CUDA toolkit.
set -uo pipefail
cd "$(dirname "$0")/../.."
fails=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }

T="$(mktemp -d)"
trap 'rm -rf "$T"' EXIT
whl="${1:-}"
if [[ -z "$whl" ]]; then
  whl="$(tools/build_wheel "$T/dist")" || { echo "FAIL: tools/build_wheel"; exit 1; }
fi
bazel build //:tools //recorder:fake_cuda_app >/dev/null 2>&1 || { echo "FAIL: bazel build"; exit 1; }
B="$(bazel info bazel-bin 2>/dev/null)"
version="$(sed -n 's/^#define GM_VERSION "\(.*\)"/\1/p' base/gm_base.h)"
dist="$(sed -n 's/^#define GM_DIST_NAME "\(.*\)"/\1/p' base/gm_base.h)"
echo "wheel: $(basename "$whl") ($(du -k "$whl" | cut -f1) KiB)"

# A fresh virtualenv; pip installs from the file alone (no index).
python3 -m venv "$T/venv" >/dev/null || { echo "FAIL: python3 -m venv (python3-venv installed?)"; exit 1; }
V="$T/venv/bin"
"$V/pip" install -q --no-index "$whl" 2>"$T/pip.err"
check "pip install into a fresh venv" '[[ $? == 0 ]] || { cat "$T/pip.err"; false; }'
check "pip lists $dist $version" '[[ $("$V/pip" list 2>/dev/null | grep -i "^$dist ") == *"$version"* ]]'
out=$("$V/python" -c 'import gpumem_tools; print(gpumem_tools.__version__)')
check "import gpumem_tools: version $version" '[[ $out == "$version" ]]'

unset VIRTUAL_ENV
for t in gpurec gpureplay gpuanalyze; do
  out=$("$V/$t" --version); rc=$?
  check "$t --version from the venv" '[[ $rc == 0 && $(head -1 <<< "$out") == "$t $version ($dist)" && $out == *"trace format "* && $out == *"zstd "* ]]'
done
out=$("$V/python" -m gpumem_tools gpureplay --version)
check "python -m gpumem_tools gpureplay" '[[ $(head -1 <<< "$out") == "gpureplay $version ($dist)" ]]'

# The demo's commands, from the venv and from the Bazel build: same stdout.
snap=traces/snapshots/infer_varlen.default.pickle
mkdir -p "$T/w" "$T/b"
for side in w b; do
  if [[ $side == w ]]; then R="$V/gpurec" P="$V/gpureplay" A="$V/gpuanalyze"; else
    R="$B/recorder/gpurec" P="$B/replay/gpureplay" A="$B/analyze/gpuanalyze"; fi
  (cd "$T/$side" &&
    "$R" import "$OLDPWD/$snap" --gpu-memory=150109880320 -o t.zst >import.out 2>import.err &&
    "$P" t.zst --sweep >sweep.out 2>sweep.err &&
    "$A" report t.zst --html report.html >report.out 2>report.err)
  echo $? >"$T/$side/rc"
done
check "import, replay, report from the venv: exit 0" '[[ $(cat "$T/w/rc") == 0 ]] || { cat "$T"/w/*.err; false; }'
check "the venv's sweep == the Bazel build's" 'cmp -s "$T/w/sweep.out" "$T/b/sweep.out" && [[ -s "$T/w/sweep.out" ]]'
check "the venv's report == the Bazel build's, with a setting to paste" \
  'cmp -s "$T/w/report.out" "$T/b/report.out" && grep -q "paste: PYTORCH_CUDA_ALLOC_CONF=" "$T/w/report.out"'
check "report.html written" '[[ -s "$T/w/report.html" ]] && grep -q "</html>" "$T/w/report.html"'
check "the trace names the writer's version" '"$V/gpuanalyze" info "$T/w/t.zst" | grep -q "^tool: *gpurec $version import$"'

# Recording through the wheel's injection library (found beside the wheel's gpurec).
err=$(cd "$T" && GPUMEM_SELFTEST=500 "$V/gpurec" -o rec.zst -- "$B/recorder/fake_cuda_app" --exit 3 2>&1); rc=$?
check "gpurec -- CMD from the venv: status passes, trace written" \
  '[[ $rc == 3 && $err == *"rec.zst: 501 events"* && $err == *"complete"* ]] || { echo "$err"; false; }'
check "the recording reads back" '"$V/gpuanalyze" info "$T/rec.zst" | grep -q "^tool: *gpurec $version$"'

# CUPTI from the venv's site-packages (torch's nvidia-cuda-cupti layout), venv not activated.
if compgen -G "/usr/local/cuda*/lib64/libcupti.so*" >/dev/null || compgen -G "/usr/local/cuda*/targets/*/lib/libcupti.so*" >/dev/null; then
  echo "skip: a CUDA toolkit's CUPTI is installed here and would be found first (run via tests/install/nocuda.sh)"
else
  site="$("$V/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  mkdir -p "$site/nvidia/cu13/lib"
  printf 'int cuptiActivityEnable(int k) { return 0; }\nint cuptiGetVersion(unsigned *v) { *v = 130042; return 0; }\n' >"$T/cupti.c"
  gcc -shared -fPIC -o "$site/nvidia/cu13/lib/libcupti.so.13" "$T/cupti.c"
  out=$(env -u CUDA_HOME -u CUDA_PATH -u GPUMEM_CUPTI -u PYTHONPATH "$V/gpurec" --version)
  check "gpurec finds CUPTI in the venv's site-packages" '[[ $out == *"CUPTI API 130042 ($site/nvidia/cu13/lib/libcupti.so.13)"* ]] || { echo "$out"; false; }'
fi

# A trace from a newer writer: which package to install.
err=$("$V/gpureplay" traces/invalid/future-version.zst 2>&1); rc=$?
check "newer trace: exit 1, names the package" '[[ $rc == 1 && $err == *"install a newer $dist (pip install -U $dist)"* ]]'

# The check that keeps shared-library builds out of a wheel.
err=$(python3 tools/wheel/mkwheel.py --bin "$B" --out "$T/refused" 2>&1); rc=$?
check "mkwheel refuses binaries needing libzstd.so.1" '[[ $rc != 0 && $err == *"needs "*"libzstd.so.1"* && ! -e "$T/refused" ]]'

if ((fails)); then echo "wheel_test: $fails FAILED"; exit 1; fi
echo "wheel_test: all passed"
