"""python -m gpumem_tools TOOL ARGS...: run a tool where the console scripts are not on PATH."""
import sys

from gpumem_tools import __version__
from gpumem_tools._launch import BIN_DIR, TOOLS, run

if len(sys.argv) < 2 or sys.argv[1] not in TOOLS:
    sys.stderr.write("usage: python -m gpumem_tools {%s} ARGS...\n"
                     "gpumem-tools %s, tools in %s\n" % ("|".join(TOOLS), __version__, BIN_DIR))
    sys.exit(2)
sys.exit(run(sys.argv[1], sys.argv[2:]))
