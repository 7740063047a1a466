"""cuda_repository: the CUDA and CUPTI headers, found at fetch time.

Only the recorder's injection library (recorder/cupti*) and the test that checks
replay/cuda/cuda_driver.h need them; everything else builds without. Nothing links CUDA: at run time
the recorder finds libcupti itself and the cuda:N backend dlopen()s libcuda.so.1.

Where from, first hit wins:
  1. $GPUMEM_CUDA_PATH if set (a toolkit: include/cuda.h, and include/cupti.h or
     extras/CUPTI/include/cupti.h); when set, nothing else is tried;
  2. $CUDA_HOME if set, then /usr/local/cuda (the same layout);
  3. NVIDIA's header wheels unpacked by tools/cuda_headers (run by tools/setup) into
     ${GPUMEM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpumem}/cuda-headers.
With none, the repository still loads: only targets that need the headers fail, with a line
that says what to do."""

def _has(ctx, root, rel):
    return ctx.path(root + "/" + rel).exists

def _toolkit(ctx, root):
    """The include dirs of a toolkit at root, or None."""
    if not _has(ctx, root, "include/cuda.h"):
        return None
    for cupti in ["include", "extras/CUPTI/include"]:
        if _has(ctx, root, cupti + "/cupti.h"):
            return [root + "/include"] + ([root + "/" + cupti] if cupti != "include" else [])
    return None

def _cache_dir(env):
    if env.get("GPUMEM_CACHE"):
        return env["GPUMEM_CACHE"]
    if env.get("XDG_CACHE_HOME"):
        return env["XDG_CACHE_HOME"] + "/gpumem"
    return env.get("HOME", "/root") + "/.cache/gpumem"

_MISSING_BUILD = """# No CUDA headers were found (third_party/cuda.bzl): targets that need them fail here.
package(default_visibility = ["//visibility:public"])

genrule(
    name = "missing",
    outs = ["missing.h"],
    cmd = "echo 'gpumem: error: no CUDA/CUPTI headers for the recorder injection library: %s. Run tools/setup (fetches them from PyPI) or set GPUMEM_CUDA_PATH to a CUDA toolkit.' >&2; exit 1",
)

cc_library(
    name = "headers",
    hdrs = [":missing"],
)
"""

def _cuda_repository_impl(ctx):
    env = ctx.os.environ
    ctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % ctx.name)
    cache = _cache_dir(env) + "/cuda-headers"
    if env.get("GPUMEM_CUDA_PATH"):
        candidates = [(env["GPUMEM_CUDA_PATH"], "$GPUMEM_CUDA_PATH")]
    else:
        candidates = [(env["CUDA_HOME"], "$CUDA_HOME")] if env.get("CUDA_HOME") else []
        candidates += [("/usr/local/cuda", "toolkit"), (cache, "header wheels")]
    tried = []
    for path, what in candidates:
        dirs = _toolkit(ctx, path)
        if dirs:
            ctx.symlink(dirs[0], "include")
            if len(dirs) > 1:
                ctx.symlink(dirs[1], "cupti_include")
            ctx.file("FOUND", "%s (%s)\n" % (path, what))
            ctx.symlink(ctx.attr.build_file, "BUILD")
            return
        tried.append("%s=%s" % (what, path))
    ctx.file("BUILD", _MISSING_BUILD % ("none at " + ", ".join(tried)).replace("$", "$$"))

cuda_repository = repository_rule(
    implementation = _cuda_repository_impl,
    attrs = {"build_file": attr.label(default = "//third_party:cuda.BUILD")},
    environ = ["GPUMEM_CUDA_PATH", "CUDA_HOME", "GPUMEM_CACHE", "XDG_CACHE_HOME", "HOME"],
    local = True,
    configure = True,
)
