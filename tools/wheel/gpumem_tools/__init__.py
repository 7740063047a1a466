"""gpumem-tools: record a GPU job's memory allocations once (gpurec), replay them under other
allocator settings (gpureplay) and find the one that fits (gpuanalyze).

The tools are native programs shipped in this package's bin/ folder; the console scripts
gpurec, gpureplay and gpuanalyze exec them (gpumem_tools._launch), and
`python -m gpumem_tools TOOL ARGS...` does the same where the scripts are not on PATH."""

__version__ = "@VERSION@"
