"""The console entry points: each replaces this Python process with the native tool of the same
name in bin/ (exec, so signals, exit status and stdio are the tool's own)."""
import os
import sys

BIN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin")
TOOLS = ("gpurec", "gpureplay", "gpuanalyze")


def run(tool, args):
    """Execs bin/TOOL with args; returns 1 only if it cannot be started."""
    exe = os.path.join(BIN_DIR, tool)
    env = dict(os.environ)
    if tool == "gpurec":
        # gpurec loads the user's CUPTI at run time; the nvidia-cuda-cupti wheel that torch
        # installs sits in this Python's site-packages, which gpurec cannot guess when the
        # virtualenv is used without being activated.
        sites = [p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages")]
        if env.get("GPUMEM_SITE_PACKAGES"):
            sites.append(env["GPUMEM_SITE_PACKAGES"])
        env["GPUMEM_SITE_PACKAGES"] = os.pathsep.join(sites)
    try:
        os.execve(exe, [tool] + list(args), env)
    except OSError as e:
        sys.stderr.write("%s: error: cannot run %s: %s\n" % (tool, exe, e.strerror))
        return 1


def gpurec():
    return run("gpurec", sys.argv[1:])


def gpureplay():
    return run("gpureplay", sys.argv[1:])


def gpuanalyze():
    return run("gpuanalyze", sys.argv[1:])
