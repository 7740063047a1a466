"""cs_probe_test.py LIB: the recorder's callsite reader against this process's real CPython.

The probe library (cs_probe.c) captures the calling thread's callsite as the injection library
does inside a driver call. Called through ctypes.CDLL the GIL is released during the call, as in
a PyTorch operator; through ctypes.PyDLL it is held. Each check compares with the frame Python
itself reports. Exit 0 when all hold; skipped (exit 0, a line saying so) on a Python the reader
does not read (outside 3.10-3.13)."""
import ctypes
import os
import sys
import tempfile
import threading

LIB = sys.argv[1]
fails = []


def check(what, got, want):
    ok = got == want
    print(("ok   " if ok else "FAIL ") + what + ": " + got + ("" if ok else "   (want " + want + ")"))
    if not ok:
        fails.append(what)


def load(cls):
    lib = cls(os.path.abspath(LIB))
    lib.cs_probe.restype = ctypes.c_int
    lib.cs_probe_owner.restype = ctypes.c_int
    lib.cs_probe_misses.restype = ctypes.c_ulong
    return lib


nogil = load(ctypes.CDLL)
withgil = load(ctypes.PyDLL)
why = ctypes.create_string_buffer(256)
ok = nogil.cs_probe_init(1, why, 256)
if ok != 1:
    print("SKIP: Python %d.%d: %s" % (sys.version_info[0], sys.version_info[1], why.value.decode()))
    sys.exit(0 if not (3, 10) <= sys.version_info[:2] <= (3, 13) else 1)

ME = sys._getframe().f_code.co_filename


def user_alloc(lib):
    buf = ctypes.create_string_buffer(8192)
    lib.cs_probe(buf, 8192); line = sys._getframe().f_lineno  # noqa: E702 (same line on purpose)
    return buf.value.decode(), line


got, line = user_alloc(nogil)
check("no GIL, user frame", got, "%s:%d:user_alloc" % (ME, line))
got, line = user_alloc(withgil)
check("GIL held, user frame", got, "%s:%d:user_alloc" % (ME, line))

# the same line again: a cache hit, no new string
m0 = nogil.cs_probe_misses()
for _ in range(1000):
    got2, _ = user_alloc(nogil)
check("1000 repeats: no miss", str(nogil.cs_probe_misses() - m0), "0")

# through a library in site-packages: the user frame is the caller's
site = tempfile.mkdtemp()
libdir = os.path.join(site, "lib", "python3.99", "site-packages")
os.makedirs(libdir)
with open(os.path.join(libdir, "fakelib_cs.py"), "w") as f:
    f.write("import ctypes\n\ndef alloc(lib):\n    buf = ctypes.create_string_buffer(8192)\n"
            "    lib.cs_probe(buf, 8192)\n    return buf.value.decode()\n")
sys.path.insert(0, libdir)
import fakelib_cs  # noqa: E402


def calls_library():
    got = fakelib_cs.alloc(nogil); line = sys._getframe().f_lineno  # noqa: E702
    return got, line


got, line = calls_library()
check("library frame skipped", got, "%s:%d:calls_library" % (ME, line))


# a thread of its own (its own thread state and frames)
res = {}


def in_thread():
    res["got"], res["line"] = user_alloc(nogil)


t = threading.Thread(target=in_thread)
t.start()
t.join()
check("other thread", res["got"], "%s:%d:user_alloc" % (ME, res["line"]))

# a generator and a lambda frame
def gen():
    yield user_alloc(nogil)


got, line = next(gen())
check("inside a generator", got, "%s:%d:user_alloc" % (ME, line))

# stack mode: every frame, innermost first, library paths shortened
nogil.cs_probe_init(2, why, 256)


def outer():
    got = fakelib_cs.alloc(nogil); line = sys._getframe().f_lineno  # noqa: E702
    return got, line


got, line = outer()
top = got.split(" < ")
check("stack: innermost is the library, shortened", top[0], "fakelib_cs.py:5:alloc")
check("stack: then the caller", top[1], "%s:%d:outer" % (ME, line))
check("stack: then the module", top[2].rsplit(":", 1)[1], "<module>")

# owner: the caller of the probe library is ctypes' own extension (or libffi)
nogil.cs_probe_init(1, why, 256)
buf = ctypes.create_string_buffer(8192)
nogil.cs_probe_owner(buf, 8192); line = sys._getframe().f_lineno  # noqa: E702
owner, _, py = buf.value.decode().partition(" < ")
print("     owner of the probe's call: " + owner)
check("owner is a library in brackets", str(owner.startswith("[") and owner.endswith("]")), "True")
check("owner then the Python frame", py, "%s:%d:<module>" % (ME, line))

# cost, for the record: the user frame under 6 library frames, as under torch.nn's call chain
nogil.cs_probe_init(1, why, 256)
nogil.cs_probe_bench.restype = ctypes.c_double
with open(os.path.join(libdir, "fakelib_deep.py"), "w") as f:
    f.write("def d(lib, k):\n    return lib.cs_probe_bench(200000) if k == 0 else d(lib, k - 1)\n")
import fakelib_deep  # noqa: E402
print("     cost: %.1f ns per capture (user frame under 6 library frames)" % fakelib_deep.d(nogil, 5))
nogil.cs_probe_init(2, why, 256)
print("     cost: %.1f ns per capture in stack mode (same stack)" % fakelib_deep.d(nogil, 5))

print("%d checks failed" % len(fails) if fails else "all checks passed (Python %s)" % sys.version.split()[0])
sys.exit(1 if fails else 0)
