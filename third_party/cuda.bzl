"""cuda_repository: the CUDA toolkit as a local repository, found at fetch time.

Looks at $GPUMEM_CUDA_PATH, then $CUDA_HOME, then /usr/local/cuda. Only the headers and
link stubs are needed to build; at run time the recorder finds libcupti itself."""

def _cuda_repository_impl(ctx):
    path = ctx.os.environ.get("GPUMEM_CUDA_PATH") or ctx.os.environ.get("CUDA_HOME") or "/usr/local/cuda"
    root = ctx.path(path)
    if not root.get_child("include").get_child("cupti.h").exists:
        fail("CUDA toolkit with CUPTI not found at '%s' (set GPUMEM_CUDA_PATH)" % path)
    for name in ["include", "lib64"]:
        ctx.symlink(root.get_child(name), name)
    ctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % ctx.name)
    ctx.symlink(ctx.attr.build_file, "BUILD")

cuda_repository = repository_rule(
    implementation = _cuda_repository_impl,
    attrs = {"build_file": attr.label(default = "//third_party:cuda.BUILD")},
    environ = ["GPUMEM_CUDA_PATH", "CUDA_HOME"],
    local = True,
)
