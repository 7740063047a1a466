"""stream_entry_py.py LIB ARGS...: stream_entry_bench's main, LIB built as a shared library
(stream_entry_ab.sh with AB_PY=1), run from a Python stack like a training step's allocation:
the program's own line, then 7 frames of library code (a file under dist-packages), then the C
call through ctypes.CDLL (without the GIL, as PyTorch's allocator runs). With --python the
callsites are read by the recorder's real CPython frame reader (recorder/rec_pyframe.c), every
allocation on this thread, and LIB is dlopen()ed as the injection library is."""
import ctypes
import sys

LIB_FILE = "/usr/lib/python3/dist-packages/torch/nn/modules/module.py"
LIB_SRC = "".join("def lib%d(fn, *a):\n    return lib%d(fn, *a)\n" % (i, i + 1) for i in range(6))
LIB_SRC += "def lib6(fn, *a):\n    return fn(*a)\n"
lib_ns = {}
exec(compile(LIB_SRC, LIB_FILE, "exec"), lib_ns)


def main():
    lib = ctypes.CDLL(sys.argv[1])
    args = [b"stream_entry_bench"] + [a.encode() for a in sys.argv[2:]] + [b"--python"]
    argv = (ctypes.c_char_p * len(args))(*args)
    fn = lib.stream_entry_bench_main
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p * len(args)]
    rc = lib_ns["lib0"](fn, len(args), argv)  # this line is the program's callsite
    sys.exit(rc)


main()
