/* rec_torch.c: gpurec's sitecustomize.py: PyTorch's requests from an unmodified script
 * (--mode=auto, the default, and --mode=torch), and CuPy's pool switched to per-array requests
 * (--mode=auto and --mode=requests).
 *
 * The launcher puts a directory holding the sitecustomize.py below on PYTHONPATH. Python runs
 * it at start-up; it waits (an import hook, nothing else) until the program imports torch,
 * then wraps torch.cuda._lazy_init so that the moment CUDA is initialised:
 *   - auto mode (GPUMEM_TORCH_STACKS=none): it asks the injection library to stream PyTorch's
 *     allocator trace into the process's trace (gpumem_torch_stream, rec_torch_stream.c: every
 *     request as it happens, flushed every 0.5 s, nothing lost to a ring or a kill), and dumps
 *     the snapshot at once (the allocator's settings and its state where the stream starts:
 *     empty). Where the stream cannot be attached (an unknown torch, another allocator) the
 *     recorder says why and this falls back to the history below, and says that too;
 *   - otherwise (torch mode, --stacks=python, or that fallback):
 *     torch.cuda.memory._record_memory_history(max_entries=N, ...), without stacks (context=None,
 *     ~35 ns per entry on an H200) or with Python stacks (stacks="python", ~808 ns): a ring of the
 *     N newest entries, dumped by atexit as snap.<rank|->.<pid>.pickle in the launcher's
 *     directory; where SIGTERM still has its default action, a handler exits through
 *     SystemExit(143) so the dump runs. SIGKILL loses the history.
 * Streamed, each alloc entry carries its callsite (read by the tracker on the allocating
 * thread); in the history fallback it asks the injection library to hook PyTorch's per-request
 * report (gpumem_torch_sites, rec_sites.c), which gives each request its callsite at a cache
 * lookup's cost (GPUMEM_TORCH_SITES=0: neither, for measurements; GPUMEM_TORCH_STREAM=0: the history, for
 * measurements). Processes that import torch but never touch CUDA (torchrun's agent) record
 * nothing. A user's own sitecustomize.py is run after ours. After the child exits the launcher
 * merges each pickle with its process's own trace (snap_merge_file, auto mode: the streamed
 * entries are taken from that trace) or converts it beside it (snap_import_file_prov, torch
 * mode). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "recorder/rec_torch.h"

static const char sitecustomize_py[] =
    "# Written by gpurec (recorder/rec_torch.c): waits for the program to import a framework,\n"
    "# then, in auto and torch modes, records PyTorch's memory history, and in auto and requests\n"
    "# modes switches CuPy's\n"
    "# pool to per-array stream-ordered allocations (cudaMallocAsync) so that each array request\n"
    "# reaches the recorder with its exact size.\n"
    "import os as _os, sys as _sys\n"
    "\n"
    "def _gpurec_warn(msg):\n"
    "    _sys.stderr.write('[gpurec] %s\\n' % msg)\n"
    "\n"
    "def _gpurec_after_import(name, patch):\n"
    "    # an import hook, nothing else: patch(module) once the program has imported `name`\n"
    "    import importlib.abc, importlib.util\n"
    "\n"
    "    class Finder(importlib.abc.MetaPathFinder):\n"
    "        def find_spec(self, fullname, path, target=None):\n"
    "            if fullname != name:\n"
    "                return None\n"
    "            _sys.meta_path.remove(self)\n"
    "            spec = importlib.util.find_spec(name)\n"
    "            if spec is None or spec.loader is None:\n"
    "                return spec\n"
    "            orig_exec = spec.loader.exec_module\n"
    "\n"
    "            def exec_module(module):\n"
    "                orig_exec(module)\n"
    "                try:\n"
    "                    patch(module)\n"
    "                except Exception as e:\n"
    "                    _gpurec_warn('cannot hook %s: %s' % (name, e))\n"
    "            spec.loader.exec_module = exec_module\n"
    "            return spec\n"
    "    _sys.meta_path.insert(0, Finder())\n"
    "\n"
    "def _gpurec_on_term():\n"
    "    # SIGTERM's default action skips atexit, and so the dump: exit through SystemExit instead\n"
    "    # (status 143 as the signal gives). Only where nobody took SIGTERM, from the main thread.\n"
    "    import signal, threading\n"
    "    if threading.current_thread() is not threading.main_thread():\n"
    "        return\n"
    "    if signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:\n"
    "        return\n"
    "\n"
    "    def on_term(signum, frame):\n"
    "        raise SystemExit(128 + signum)\n"
    "    signal.signal(signal.SIGTERM, on_term)\n"
    "\n"
    "def _gpurec_sites():\n"
    "    # each request's callsite, read by the recorder on the allocating thread from PyTorch's\n"
    "    # per-request report (recorder/rec_sites.c); the recorder says itself why it cannot\n"
    "    lib = _os.environ.get('CUDA_INJECTION64_PATH')\n"
    "    if not lib:\n"
    "        return\n"
    "    try:\n"
    "        import ctypes\n"
    "        ctypes.CDLL(lib).gpumem_torch_sites()\n"
    "    except (OSError, AttributeError) as e:\n"
    "        _gpurec_warn('no callsites for PyTorch requests: %s' % e)\n"
    "\n"
    "def _gpurec_stream(torch):\n"
    "    # PyTorch's allocator trace streamed into the recording as it happens\n"
    "    # (recorder/rec_torch_stream.c); False: the recorder said why it cannot\n"
    "    lib = _os.environ.get('CUDA_INJECTION64_PATH')\n"
    "    if not lib:\n"
    "        return False\n"
    "    try:\n"
    "        import ctypes\n"
    "        f = ctypes.CDLL(lib).gpumem_torch_stream\n"
    "        f.argtypes = [ctypes.c_char_p]\n"
    "        return f(str(torch.__version__).encode()) == 0\n"
    "    except (OSError, AttributeError) as e:\n"
    "        _gpurec_warn('PyTorch allocator trace not streamed: %s' % e)\n"
    "        return False\n"
    "\n"
    "def _gpurec_limits(torch, out_dir):\n"
    "    # the limit the job sets itself and its OOM's message, noted for the replay's OOM verdict\n"
    "    # (gpurec writes them into the trace's header: gpurec_history.c)\n"
    "    path = _os.path.join(out_dir, 'notes.%s.%d.txt' % (_os.environ.get('RANK') or '-', _os.getpid()))\n"
    "\n"
    "    def note(key, value):\n"
    "        try:\n"
    "            with open(path, 'a') as f:\n"
    "                f.write('%s=%s\\n' % (key, ' '.join(str(value).split())[:300]))\n"
    "        except OSError as e:\n"
    "            _gpurec_warn('cannot note %s: %s' % (key, e))\n"
    "    cuda = torch.cuda\n"
    "    orig = getattr(cuda, 'set_per_process_memory_fraction', None)\n"
    "    if orig is not None:\n"
    "        def set_per_process_memory_fraction(fraction, device=None):\n"
    "            r = orig(fraction, device)\n"
    "            note('torch.per_process_memory_fraction', float(fraction))\n"
    "            try:  # and the device it limits (an index, a torch.device, 'cuda:1', None: the current)\n"
    "                if isinstance(device, int):\n"
    "                    idx = device\n"
    "                elif device is None:\n"
    "                    idx = cuda.current_device()\n"
    "                else:\n"
    "                    idx = cuda._utils._get_device_index(device)\n"
    "                note('torch.per_process_memory_fraction.%d' % int(idx), float(fraction))\n"
    "            except Exception:\n"
    "                pass\n"
    "            return r\n"
    "        cuda.set_per_process_memory_fraction = set_per_process_memory_fraction\n"
    "        mem = getattr(cuda, 'memory', None)\n"
    "        if mem is not None and getattr(mem, 'set_per_process_memory_fraction', None) is orig:\n"
    "            mem.set_per_process_memory_fraction = set_per_process_memory_fraction\n"
    "    hook = _sys.excepthook\n"
    "\n"
    "    def excepthook(t, v, tb):\n"
    "        oom = getattr(torch, 'OutOfMemoryError', None) or getattr(cuda, 'OutOfMemoryError', None)\n"
    "        if oom is not None and isinstance(v, oom):\n"
    "            msg = ' '.join(str(v).split())\n"
    "            i = msg.find(' allowed')\n"
    "            if i > 200:  # the clause that gives the limit, kept whole\n"
    "                msg = msg[:120] + ' ... ' + msg[max(0, i - 60):i + 8]\n"
    "            note('oom.message', msg)\n"
    "        hook(t, v, tb)\n"
    "    _sys.excepthook = excepthook\n"
    "\n"
    "def _gpurec_torch():\n"
    "    out_dir = _os.environ.get('GPUMEM_TORCH_DIR')\n"
    "    if not out_dir:\n"
    "        return\n"
    "    max_entries = int(_os.environ.get('GPUMEM_TORCH_MAX_ENTRIES', '1000000'))\n"
    "    stacks = _os.environ.get('GPUMEM_TORCH_STACKS', 'python')\n"
    "    state = {'on': False}\n"
    "\n"
    "    def enable(torch):\n"
    "        if state['on']:\n"
    "            return\n"
    "        state['on'] = True\n"
    "        auto = stacks == 'none' and _os.environ.get('GPUMEM_MODE') == 'auto'\n"
    "        streamed = auto and _os.environ.get('GPUMEM_TORCH_STREAM', '1') != '0' and \\\n"
    "            _gpurec_stream(torch)\n"
    "        if not streamed:\n"
    "            try:\n"
    "                if stacks == 'none':\n"
    "                    # no context: PyTorch gathers no stack per entry (its cheapest history)\n"
    "                    torch.cuda.memory._record_memory_history(max_entries=max_entries, context=None,\n"
    "                                                             stacks='python')\n"
    "                else:\n"
    "                    torch.cuda.memory._record_memory_history(max_entries=max_entries, stacks='python')\n"
    "            except Exception as e:\n"
    "                _gpurec_warn('cannot enable PyTorch memory history: %s' % e)\n"
    "                return\n"
    "            if auto:\n"
    "                _gpurec_warn('PyTorch memory history instead: a ring of the newest %d entries, '\n"
    "                             'dumped at exit (a longer job keeps only its tail, a killed one none)'\n"
    "                             % max_entries)\n"
    "        # streamed: each alloc entry brings its callsite; the history needs the report hook\n"
    "        if auto and not streamed and _os.environ.get('GPUMEM_TORCH_SITES', '1') != '0':\n"
    "            _gpurec_sites()\n"
    "        import atexit\n"
    "\n"
    "        def dump():\n"
    "            rank = _os.environ.get('RANK') or '-'\n"
    "            path = _os.path.join(out_dir, 'snap.%s.%d.pickle' % (rank, _os.getpid()))\n"
    "            try:\n"
    "                torch.cuda.memory._dump_snapshot(path)\n"
    "            except Exception as e:\n"
    "                _gpurec_warn('cannot dump PyTorch memory history: %s' % e)\n"
    "        if streamed:\n"
    "            # the requests stream into the trace; the snapshot now gives the allocator's\n"
    "            # settings and its state where the stream starts (a killed job keeps both)\n"
    "            dump()\n"
    "        else:\n"
    "            atexit.register(dump)\n"
    "        _gpurec_on_term()\n"
    "\n"
    "    def patch(torch):\n"
    "        _gpurec_limits(torch, out_dir)\n"
    "        cuda = torch.cuda\n"
    "        orig = cuda._lazy_init\n"
    "\n"
    "        def _lazy_init(*a, **k):\n"
    "            r = orig(*a, **k)\n"
    "            enable(torch)\n"
    "            return r\n"
    "        cuda._lazy_init = _lazy_init\n"
    "        if cuda.is_initialized():\n"
    "            enable(torch)\n"
    "    _gpurec_after_import('torch', patch)\n"
    "\n"
    "def _gpurec_cupy():\n"
    "    if _os.environ.get('GPUMEM_CUPY_ALLOCATOR') != 'async':\n"
    "        return\n"
    "\n"
    "    def patch(cupy):\n"
    "        cupy.cuda.set_allocator(cupy.cuda.MemoryAsyncPool().malloc)\n"
    "    _gpurec_after_import('cupy', patch)\n"
    "\n"
    "def _gpurec_chain():\n"
    "    # run the user's own sitecustomize, which ours shadows\n"
    "    import importlib.machinery, importlib.util\n"
    "    here = _os.path.dirname(_os.path.abspath(__file__))\n"
    "    rest = [p for p in _sys.path if _os.path.abspath(p or '.') != here]\n"
    "    spec = importlib.machinery.PathFinder.find_spec('sitecustomize', rest)\n"
    "    if spec and spec.loader:\n"
    "        mod = importlib.util.module_from_spec(spec)\n"
    "        spec.loader.exec_module(mod)\n"
    "\n"
    "for _f in (_gpurec_torch, _gpurec_cupy):\n"
    "    try:\n"
    "        _f()\n"
    "    except Exception as _e:\n"
    "        _gpurec_warn('%s' % _e)\n"
    "_gpurec_chain()\n";

gm_status_t rec_torch_write_site(const char *dir, gm_err_t *err) {
  char path[4200];
  snprintf(path, sizeof path, "%s/sitecustomize.py", dir);
  FILE *f = fopen(path, "w");
  if (!f) return gm_err_set(err, GM_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
  size_t n = sizeof sitecustomize_py - 1;
  int bad = fwrite(sitecustomize_py, 1, n, f) != n;
  if (fclose(f) != 0 || bad)
    return gm_err_set(err, GM_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
  return GM_OK;
}

/* "snap.<rank|->.<pid>.pickle" */
static int parse_snap(const char *name, int *rank, long *pid) {
  char r[32];
  long p;
  char tail[16];
  if (sscanf(name, "snap.%31[^.].%ld.%15s", r, &p, tail) != 3 || strcmp(tail, "pickle") != 0)
    return 0;
  *rank = strcmp(r, "-") == 0 ? -1 : atoi(r);
  *pid = p;
  return 1;
}

int rec_torch_list(const char *dir, rec_torch_snap_t *out, int cap) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) && n < cap) {
    int rank;
    long pid;
    if (!parse_snap(e->d_name, &rank, &pid)) continue;
    snprintf(out[n].path, sizeof out[n].path, "%s/%s", dir, e->d_name);
    out[n].rank = rank;
    out[n].pid = pid;
    n++;
  }
  closedir(d);
  return n;
}
