#!/usr/bin/env python3
"""mkwheel.py: pack the gpumem tools into a Python wheel (gpumem-tools), standard library only.

    mkwheel.py --bin BAZEL_BIN --out DIR [--root REPO]

Takes gpurec, gpureplay, gpuanalyze and libgpumem_inject.so from BAZEL_BIN (a --config=wheel
build: libraries beyond glibc linked in), puts them in gpumem_tools/bin/ beside the launcher
package (tools/wheel/gpumem_tools), and writes DIST-VERSION-py3-none-PLATFORM.whl into DIR.
Version and name come from base/gm_base.h (GM_VERSION, GM_DIST_NAME).

The platform tag is worked out the way auditwheel does, from the binaries themselves: each
must need nothing but glibc's own libraries (DT_NEEDED), and the newest GLIBC_x.y symbol
version any of them asks for gives manylinux_x_y_ARCH. Anything else is an error, so a wheel
that would not run on another distribution is never written. The zip is reproducible (fixed
timestamps and order)."""
import argparse
import base64
import hashlib
import io
import os
import re
import subprocess
import sys
import zipfile

BINARIES = {  # file in the wheel's bin/ -> path under bazel-bin
    "gpurec": "recorder/gpurec",
    "gpureplay": "replay/gpureplay",
    "gpuanalyze": "analyze/gpuanalyze",
    "libgpumem_inject.so": "recorder/libgpumem_inject.so",
}
# What a manylinux wheel may take from the system (glibc's libraries; auditwheel's policy
# also allows libgcc_s/libstdc++ and X11/GL, which these tools do not need).
ALLOWED_NEEDED = {"libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1",
                  "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}
ARCHES = {"Advanced Micro Devices X86-64": "x86_64", "AArch64": "aarch64"}
EPOCH = (1980, 1, 1, 0, 0, 0)


def die(msg):
    sys.exit("mkwheel: error: " + msg)


def readelf(args, path):
    try:
        return subprocess.run(["readelf", "-W"] + args + [path], check=True, capture_output=True,
                              text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        die("readelf %s: %s" % (path, e))


def inspect(path):
    """(arch, glibc (major, minor)) of one ELF file; dies on a library beyond glibc."""
    arch_m = re.search(r"Machine:\s+(.+)", readelf(["-h"], path))
    arch = ARCHES.get(arch_m.group(1).strip()) if arch_m else None
    if not arch:
        die("%s: unsupported machine %r" % (path, arch_m and arch_m.group(1)))
    needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", readelf(["-d"], path)))
    extra = sorted(needed - ALLOWED_NEEDED)
    if extra:
        die("%s needs %s, which a manylinux wheel cannot assume: build with --config=wheel"
            % (path, ", ".join(extra)))
    versions = [(int(a), int(b)) for a, b in
                re.findall(r"@GLIBC_(\d+)\.(\d+)", readelf(["--dyn-syms"], path))]
    return arch, max(versions, default=(2, 17))


def gm_define(root, name):
    text = open(os.path.join(root, "base", "gm_base.h")).read()
    m = re.search(r'#define %s "([^"]+)"' % name, text)
    if not m:
        die("base/gm_base.h has no %s" % name)
    return m.group(1)


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True, help="bazel-bin of a --config=wheel build")
    ap.add_argument("--out", required=True, help="directory for the .whl")
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    version, dist = gm_define(root, "GM_VERSION"), gm_define(root, "GM_DIST_NAME")
    pkg = "gpumem_tools"
    dist_us = dist.replace("-", "_")

    files = []  # (name in the wheel, bytes, executable)
    arches, glibc = set(), (2, 17)
    for name, rel in BINARIES.items():
        path = os.path.join(a.bin, rel)
        if not os.path.isfile(path):
            die("%s missing (bazel build --config=wheel //:tools //recorder:gpumem_inject)" % path)
        arch, g = inspect(path)
        arches.add(arch)
        glibc = max(glibc, g)
        files.append(("%s/bin/%s" % (pkg, name), open(path, "rb").read(), True))
    if len(arches) != 1:
        die("binaries of several machines: %s" % sorted(arches))
    arch = arches.pop()
    plat = "manylinux_%d_%d_%s" % (glibc[0], glibc[1], arch)
    tag = "py3-none-" + plat

    src = os.path.join(root, "tools", "wheel", pkg)
    for name in sorted(os.listdir(src)):
        if name.endswith(".py"):
            data = open(os.path.join(src, name), "rb").read().replace(b"@VERSION@", version.encode())
            files.append(("%s/%s" % (pkg, name), data, False))

    info = "%s-%s.dist-info" % (dist_us, version)
    readme = open(os.path.join(root, "tools", "wheel", "README.md")).read()
    metadata = "\n".join([
        "Metadata-Version: 2.1",
        "Name: " + dist,
        "Version: " + version,
        "Summary: GPU memory allocation recorder and offline allocator replay: record a job "
        "once, find the allocator setting that fits it (gpurec, gpureplay, gpuanalyze)",
        "Keywords: cuda,gpu,memory,allocator,pytorch,jax,tensorflow,oom,cupti",
        "Classifier: Environment :: GPU :: NVIDIA CUDA",
        "Classifier: Operating System :: POSIX :: Linux",
        "Classifier: Programming Language :: C",
        "Requires-Python: >=3.7",
        "Provides-Extra: cupti",
        'Requires-Dist: nvidia-cuda-cupti>=13; extra == "cupti"',
        "Description-Content-Type: text/markdown",
        "", readme])
    wheel = "Wheel-Version: 1.0\nGenerator: gpumem tools/wheel/mkwheel.py\n" \
            "Root-Is-Purelib: false\nTag: %s\n" % tag
    entry = "[console_scripts]\n" + "".join(
        "%s = %s._launch:%s\n" % (t, pkg, t) for t in ("gpurec", "gpureplay", "gpuanalyze"))
    files += [(info + "/METADATA", metadata.encode(), False),
              (info + "/WHEEL", wheel.encode(), False),
              (info + "/entry_points.txt", entry.encode(), False)]
    record = "".join(record_line(n, d) + "\n" for n, d, _ in files) + info + "/RECORD,,\n"
    files.append((info + "/RECORD", record.encode(), False))

    os.makedirs(a.out, exist_ok=True)
    out = os.path.join(a.out, "%s-%s-%s.whl" % (dist_us, version, tag))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data, exe in files:
            zi = zipfile.ZipInfo(name, EPOCH)
            zi.external_attr = (0o100755 if exe else 0o100644) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    with open(out + ".tmp", "wb") as f:
        f.write(buf.getvalue())
    os.replace(out + ".tmp", out)
    print(out)


if __name__ == "__main__":
    main()
