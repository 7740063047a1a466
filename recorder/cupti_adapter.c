/* cupti_adapter.c: the injection library's entry point and life cycle (its CUPTI callbacks and
 * activity buffers are cupti_capture.c's, what the two share cupti_inject.h).
 *
 * The CUDA driver loads libgpumem_inject.so from CUDA_INJECTION64_PATH during cuInit and calls
 * InitializeInjection() (the library's one exported symbol). We then
 *   - find libcupti at run time (never linked: a tool built against one toolkit must run with
 *     another install's CUPTI, and start without one): the copy already in the process (torch
 *     loads its own), $GPUMEM_CUPTI, $CUDA_HOME, /usr/local/cuda*, the nvidia-cuda-cupti wheel in
 *     the usual site-packages, then the loader's own search;
 *   - capture allocations one of two ways (GPUMEM_CAPTURE):
 *     callbacks (default): driver-API callbacks only, for the allocation, free, VMM and trim
 *       calls (cupti_callback.c); each call's exit is stamped and pushed into the ring on the
 *       calling thread; no activity kind is enabled. About 4x cheaper per event than activity
 *       records (bench/RESULTS.md, "Recorder");
 *     activity: the MEMORY2 and MEMORY_POOL activity kinds (records arrive in CUPTI's buffers,
 *       on CUPTI's thread, converted by rec_cupti_convert()), plus API callbacks for what
 *       records miss: failed allocations, the VMM calls behind expandable segments, pool trims.
 *       Sees what no API call shows: module globals (DEVICE_STATIC), CUPTI's pool records;
 *   - start the CUDA-free core (rec_core.c), which writes the trace off the application's threads.
 * Any failure here: one "[gpurec] ..." line on stderr, recording off, the application unharmed.
 *
 * Callsites (GPUMEM_CALLSITES=user, the default; stack; none): each allocation made on a thread
 * that runs Python code carries the program's innermost frame ("train.py:42:forward") or the
 * whole stack, interned (rec_callsite.c); the rare calls that are not a framework's requests
 * (synchronous allocations, VMM reserve/map) also carry the library that made them,
 * "[libnccl.so.2]" (rec_owner.c). Frees carry none: the replay knows them by address.
 *
 * GPUMEM_SELFTEST=N replaces CUPTI with N synthetic CUpti_ActivityMemory4 records pushed through
 * the same conversion and core: CI runs the real library end to end without a GPU. */
#include <dlfcn.h>
#include <inttypes.h>
#include <glob.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uthash.h>

#include <cuda.h>
#include <cupti.h>

#include "recorder/cupti_inject.h"

#define SIGNAL_FINISH_NS 3000000000ull
#include "recorder/cupti_callback.h"
#include "recorder/cupti_convert.h"
#include "recorder/cupti_devmem.h"
#include "recorder/rec_pause.h"
#include "recorder/rec_sites.h"
#include "recorder/rec_torch_stream.h"

inj_state_t inj = {.once = PTHREAD_ONCE_INIT};

/* ---- diagnostics ---------------------------------------------------------------------------- */

static void note_manifest(const char *line) {
  if (!inj.manifest[0]) return;
  FILE *f = fopen(inj.manifest, "a");
  if (!f) return;
  fprintf(f, "#%s\n", line);
  fclose(f);
}

/* One warning per process, then silence: the application's stderr is not ours. */
void inj_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void inj_warn(const char *fmt, ...) {
  if (atomic_exchange(&inj.warned, 1)) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  char line[1100];
  int n = snprintf(line, sizeof line, "[gpurec] %s\n", msg);
  if (n > 0 && write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1) < 0) {
  }
  note_manifest(msg);
}

static void core_warn(void *ctx, const char *msg) { inj_warn("%s", msg); }

static const char *cupti_err(CUptiResult r) {
  const char *s = NULL;
  if (inj.api.cuptiGetResultString && inj.api.cuptiGetResultString(r, &s) == CUPTI_SUCCESS && s)
    return s;
  return "unknown CUPTI error";
}

static int resolve_api(void) {
#define X(name, ret, args)                                                                         \
  if (!(*(void **)&inj.api.name = dlsym(inj.lib, #name))) return 0;
  CUPTI_FNS(X)
#undef X
  *(void **)&inj.api.cuptiSubscribe_v2 = dlsym(inj.lib, "cuptiSubscribe_v2");
  return 1;
}

/* ---- the core's hooks (the clock and the header's device: cupti_device.c) ------------------ */

static const char *hook_string(void *ctx, uint32_t id) { return rec_callsites_string(inj.cs, id); }

static void hook_tick(void *ctx) { inj.api.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); }

static void hook_final(void *ctx) { inj.api.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); }

/* ---- life cycle ----------------------------------------------------------------------------- */

static void at_exit(void) {
  if (inj.diag_count && getpid() == inj.pid) {
    char line[160];
    int n = snprintf(line, sizeof line, "[gpurec] diag count_calls: %" PRIu64 " driver calls, %"
                     PRIu64 " of them memory calls\n", atomic_load(&inj.n_calls),
                     atomic_load(&inj.n_mem_calls));
    if (n > 0 && write(2, line, (size_t)n) < 0) {
    }
  }
  if (inj.core && getpid() == inj.pid) {
    rec_devmem_at_exit(inj.core); /* the context and the modules loaded by now */
    rec_core_stop(inj.core);
    rec_core_stats_t st;
    rec_core_stats(inj.core, &st);
    if (st.bad_ticks) /* a torch whose TraceEntry.time_ is not the counter (rec_torch_entry.c) */
      inj_warn("%" PRIu64 " of PyTorch's allocator entries carried a time that is not the CPU's counter "
               "reading: their times were clamped, and the recorder read the counter itself after",
               st.bad_ticks);
  }
}

/* Python that dies of an uncaught KeyboardInterrupt re-raises SIGINT with its default action
 * after finalizing, without exit(): at_exit never runs. Py_AtExit's functions run at the end of
 * the finalization: everything recorded until then goes to the file (not closed: a program that
 * embeds Python may go on using CUDA after it). */
static void at_py_finalize(void) {
  if (inj.core && getpid() == inj.pid) rec_core_sync(inj.core, SIGNAL_FINISH_NS);
}

static void hook_python_finalize(void) {
  int (*py_atexit)(void (*)(void)) = (int (*)(void (*)(void)))dlsym(RTLD_DEFAULT, "Py_AtExit");
  if (py_atexit) py_atexit(at_py_finalize); /* -1 when its 32 slots are taken: atexit still runs */
}

/* SIGTERM, SIGHUP, SIGINT, SIGQUIT, SIGABRT with the default action would end the process
 * without atexit: finish the trace first (bounded wait), then die of the same signal so the
 * exit status is unchanged. */
static void on_term(int sig) {
  if (inj.core && getpid() == inj.pid) rec_core_stop_from_signal(inj.core, SIGNAL_FINISH_NS);
  signal(sig, SIG_DFL);
  raise(sig);
}

static void install_term(int sig) {
  struct sigaction old;
  if (sigaction(sig, NULL, &old) != 0 || old.sa_handler != SIG_DFL) return; /* the app's own */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_term;
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, NULL);
}

/* A fork()ed child (DataLoader worker) inherits the core but not its writer thread. */
static void in_child(void) {
  inj.core = NULL;
  rec_sites_attach(NULL, NULL, NULL);
  rec_pause_detach();
}

/* What the header says about callsites: the mode, and why Python frames are not read. */
static const char *callsites_header(void) {
  static char buf[256];
  if (!inj.cs) return "none";
  snprintf(buf, sizeof buf, "%s%s%s", rec_cs_mode_name(inj.cs_mode), inj.cs_why[0] ? "; " : "",
           inj.cs_why);
  return buf;
}

/* GPUMEM_CALLSITES: the table, and the frame source when this process runs CPython. Callsites
 * are the callback capture's: the activity capture's records arrive on CUPTI's thread. */
static void start_callsites(void) {
  const char *env = getenv(REC_ENV_CALLSITES);
  inj.cs_mode = rec_cs_mode_parse(env);
  if (inj.cs_mode < 0) {
    inj_warn("%s=%s: not none, user or stack; recording without callsites", REC_ENV_CALLSITES,
              env);
    inj.cs_mode = REC_CS_NONE;
  }
  if (inj.cs_mode == REC_CS_NONE || (inj.activity && !inj.selftest)) return;
  rec_pyframes_t src;
  int py = rec_pyframes_cpython(&src, inj.cs_why, sizeof inj.cs_why);
  gm_err_t err;
  gm_err_clear(&err);
  if (rec_callsites_create(&inj.cs, (rec_cs_mode_t)inj.cs_mode, py ? &src : NULL, 0, &err) < 0) {
    inj.cs = NULL;
    return;
  }
  rec_owner_prime(); /* backtrace() loads libgcc_s on its first call: here, not in a callback */
}

static int start_core(unsigned mode) {
  rec_config_t cfg;
  memset(&cfg, 0, sizeof cfg);
  gmt_header_init(&cfg.header);
  gm_err_t err;
  gm_err_clear(&err);
  const char *tmpl = getenv(REC_ENV_OUT);
  if (!tmpl || !*tmpl) tmpl = "gpumem.zst";
  int rank;
  rec_prov_rank(&rank, NULL, NULL);
  char path[4096];
  const char *modename = getenv(REC_ENV_MODE);
  if (rec_trace_name(tmpl, rank, (long)getpid(), path, sizeof path, &err) < 0 ||
      rec_prov_fill(&cfg.header, mode, &err) < 0 ||
      gmt_header_set(&cfg.header.tool, "gpurec " GPUREC_VERSION, &err) < 0 ||
      gmt_header_kv_set(&cfg.header, "gpurec_mode", modename && *modename ? modename : "native",
                        &err) < 0 ||
      gmt_header_kv_set(&cfg.header, "gpurec_capture",
                        inj.selftest ? "selftest" : inj.activity ? "activity" : "callbacks",
                        &err) < 0 ||
      gmt_header_kv_set(&cfg.header, "gpurec_callsites", callsites_header(), &err) < 0) {
    inj_warn("cannot start recording: %s; the program runs on unrecorded", err.msg);
    gmt_header_free(&cfg.header);
    return 0;
  }
  cfg.path = path;
  cfg.manifest = inj.manifest[0] ? inj.manifest : NULL;
  cfg.fill_free_sizes = !inj.activity;
  rec_hooks_t hooks = {.fill_header = inj_fill_header, .now_ns = inj_now, .warn = core_warn,
                       .string = hook_string};
  if (!inj.selftest && inj.activity) { /* only activity records wait in CUPTI's buffers */
    hooks.tick = hook_tick;
    hooks.final_flush = hook_final;
  }
  gm_status_t s = rec_core_start(&inj.core, &cfg, &hooks, &err);
  gmt_header_free(&cfg.header);
  if (s < 0) {
    inj_warn("cannot start recording: %s; the program runs on unrecorded", err.msg);
    inj.core = NULL;
    return 0;
  }
  rec_sites_attach(inj.core, inj.cs, inj_now);
  pthread_atfork(NULL, NULL, in_child);
  atexit(at_exit);
  hook_python_finalize();
  install_term(SIGTERM);
  install_term(SIGHUP);
  install_term(SIGINT); /* ^C to a program without a handler of its own (Python has one) */
  install_term(SIGQUIT);
  install_term(SIGABRT); /* abort(): the trace is finished before the process dies of it */
  return 1;
}

/* GPUMEM_SELFTEST=N: N synthetic MEMORY2 records (allocs and frees on two streams) and a pool
 * trim, through the same conversion and core as a real run, delivered as CUPTI delivers them:
 * batches that wait for the writer (inj_buf_completed), so a slow machine (a sanitizer build)
 * drops nothing and the trace's content does not depend on timing. */
#define SELFTEST_BATCH 512
#define SELFTEST_WAIT_NS 2000000000ull /* longer than CUPTI's 50 ms: a test must not drop */
static void selftest(long n) {
  inj.t0 = inj_mono_ns();
  start_callsites();
  if (!start_core(GMT_CAPTURE_SYNTHETIC)) return;
  rec_core_gpu_ready(inj.core);
  gmt_event_t evs[SELFTEST_BATCH];
  size_t nev = 0;
  for (long i = 0; i < n; i++) {
    CUpti_ActivityMemory4 m;
    memset(&m, 0, sizeof m);
    m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
    m.memoryOperationType = (i % 2 == 0) ? CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION
                                         : CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
    m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m.address = 0x7f0000000000ull + (uint64_t)(i / 2 % 64) * 0x100000ull;
    m.bytes = 512u * (uint64_t)(1 + (i / 2) % 64);
    m.timestamp = inj_mono_ns();
    m.correlationId = (uint32_t)i + 1;
    m.isAsync = 1;
    m.streamId = 7 + (uint32_t)((i / 2) % 2);
    gmt_event_t *ev = &evs[nev];
    if (rec_cupti_convert(&m, inj.t0, ev)) {
      if (inj.cs && ev->kind == GMT_EV_ALLOC) ev->callsite = rec_callsites_capture(inj.cs);
      if (++nev == SELFTEST_BATCH) {
        rec_core_push_batch(inj.core, evs, nev, SELFTEST_WAIT_NS);
        nev = 0;
      }
    }
  }
  if (nev) rec_core_push_batch(inj.core, evs, nev, SELFTEST_WAIT_NS);
  const char *usage = getenv("GPUMEM_SELFTEST_DEVMEM"); /* tests: one context sample of N bytes */
  if (usage && *usage) { /* (inj_fill_header's selftest branch writes kv device_usage) */
    gmt_event_t ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = GMT_EV_DEVICE_USAGE;
    ev.addr = GMT_USAGE_PROCESS;
    ev.size = strtoull(usage, NULL, 10);
    ev.stream = GMT_STREAM_NONE;
    ev.mem_kind = GMT_MEM_DEVICE;
    ev.ts_ns = inj_now(NULL); /* after the records: the writer subtracts what they left mapped */
    rec_core_push_entry(inj.core, &ev, SELFTEST_WAIT_NS);
  }
  const char *vmm = getenv("GPUMEM_SELFTEST_VMM");
  if (vmm && *vmm == '1') { /* one reserve, as a library's own VMM call: its owner's callsite */
    gmt_event_t ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = GMT_EV_VMM_RESERVE;
    ev.addr = 0x7e0000000000ull;
    ev.size = 2u << 20;
    ev.stream = GMT_STREAM_NONE;
    ev.mem_kind = GMT_MEM_DEVICE;
    ev.ts_ns = inj_now(NULL);
    if (inj.cs) ev.callsite = inj_callsite_of(CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve, &ev);
    rec_core_push_entry(inj.core, &ev, SELFTEST_WAIT_NS);
  }
  CUpti_ActivityMemoryPool3 p;
  memset(&p, 0, sizeof p);
  p.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
  p.memoryPoolOperationType = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED;
  p.address = 0x1000;
  p.timestamp = inj_mono_ns();
  gmt_event_t ev;
  if (rec_cupti_convert(&p, inj.t0, &ev)) rec_core_push_entry(inj.core, &ev, SELFTEST_WAIT_NS);
}

static unsigned env_mode(void) {
  const char *m = getenv(REC_ENV_MODE);
  /* auto: JAX, TF and CuPy switched, a process without a framework asks per request anyway;
   * a PyTorch process is made native when the header is filled (inj_fill_header) */
  if (m && (strcmp(m, "requests") == 0 || strcmp(m, "auto") == 0)) return GMT_CAPTURE_REQUESTS;
  return GMT_CAPTURE_NATIVE; /* native, torch (whose CUPTI side is native), or unset */
}

static int enable_cupti(void) {
  CUptiResult r;
  if (inj.api.cuptiGetVersion(&inj.version) != CUPTI_SUCCESS || inj.version < 130000) {
    inj_warn("CUPTI at %s has API version %u; this recorder reads CUDA 13 records (API >= "
              "130000): not recording, the program runs on",
              inj.lib_path, inj.version);
    return 0;
  }
  char holder[128] = "";
  if (inj.api.cuptiSubscribe_v2) {
    CUpti_SubscriberParams sp;
    memset(&sp, 0, sizeof sp);
    sp.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    sp.subscriberName = "gpurec";
    sp.oldSubscriberName = holder;
    sp.oldSubscriberSize = sizeof holder;
    r = inj.api.cuptiSubscribe_v2(&inj.sub, inj_on_callback, NULL, &sp);
  } else {
    r = inj.api.cuptiSubscribe(&inj.sub, inj_on_callback, NULL);
  }
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    inj_warn("another CUPTI client%s%s holds CUPTI (a profiler, Nsight Systems?): not recording, "
              "the program runs on",
              holder[0] ? " " : "", holder);
    return 0;
  }
  if (r != CUPTI_SUCCESS) {
    inj_warn("cuptiSubscribe: %s: not recording, the program runs on", cupti_err(r));
    return 0;
  }
  /* GPUMEM_CALLBACKS=0 (diagnostic): activity records only, no API callbacks, so no OOM, VMM
   * or trim events; used to measure what the callbacks cost */
  inj.api.cuptiEnableCallback(1, inj.sub, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
  inj.api.cuptiEnableCallback(1, inj.sub, CUPTI_CB_DOMAIN_RESOURCE,
                            CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
  if (!inj.activity) {
    /* the callback capture: only the driver calls that allocate, free, map or trim; no
     * runtime domain (the runtime's cudaMalloc* reach the driver's cuMemAlloc* and are seen
     * there), no activity kind */
    inj.api.cuptiEnableCallback(1, inj.sub, CUPTI_CB_DOMAIN_RESOURCE,
                              CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING);
    if (inj.diag_subscribe_only) return 1;
    if (inj.diag_count) {
      CUptiResult (*dom)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain) =
          (CUptiResult(*)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain))dlsym(
              inj.lib, "cuptiEnableDomain");
      for (unsigned i = 0; i < rec_cb_capture_ncbids; i++)
        if (rec_cb_capture_cbids[i] < sizeof inj.mem_cbid) inj.mem_cbid[rec_cb_capture_cbids[i]] = 1;
      if (dom && dom(1, inj.sub, CUPTI_CB_DOMAIN_DRIVER_API) == CUPTI_SUCCESS) return 1;
      inj_warn("GPUMEM_DIAG=count_calls: cannot enable the driver domain; counting memory calls");
    }
    for (unsigned i = 0; i < rec_cb_capture_ncbids; i++) {
      r = inj.api.cuptiEnableCallback(1, inj.sub, CUPTI_CB_DOMAIN_DRIVER_API, rec_cb_capture_cbids[i]);
      if (r != CUPTI_SUCCESS) {
        inj_warn("cannot enable CUPTI callback %u: %s: not recording, the program runs on",
                  rec_cb_capture_cbids[i], cupti_err(r));
        return 0;
      }
    }
    rec_pause_attach(inj.lib, inj.sub, inj.core); /* gpumem_bench_cupti (rec_pause.c) */
    return 1;
  }
  const char *cb = getenv("GPUMEM_CALLBACKS");
  int callbacks = !(cb && strcmp(cb, "0") == 0);
  for (size_t i = 0; callbacks && i < inj_ndriver_cbids; i++)
    inj.api.cuptiEnableCallback(1, inj.sub, CUPTI_CB_DOMAIN_DRIVER_API, inj_driver_cbids[i]);
  for (size_t i = 0; callbacks && i < inj_nruntime_cbids; i++)
    inj.api.cuptiEnableCallback(1, inj.sub, CUPTI_CB_DOMAIN_RUNTIME_API, inj_runtime_cbids[i]);
  if ((r = inj.api.cuptiActivityRegisterCallbacks(inj_buf_requested, inj_buf_completed)) != CUPTI_SUCCESS ||
      (r = inj.api.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMORY2)) != CUPTI_SUCCESS ||
      (r = inj.api.cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMORY_POOL)) != CUPTI_SUCCESS) {
    inj_warn("cannot enable CUPTI memory records: %s: not recording, the program runs on",
              cupti_err(r));
    return 0;
  }
  return 1;
}

static void init_once(void) {
  inj.pid = getpid();
  const char *man = getenv(REC_ENV_MANIFEST);
  if (man) snprintf(inj.manifest, sizeof inj.manifest, "%s", man);
  const char *cap = getenv(REC_ENV_CAPTURE);
  inj.activity = cap && strcmp(cap, "activity") == 0;
  /* diagnostic for the benchmark: the callbacks stay enabled but record nothing, which
   * separates CUPTI's dispatch cost from this library's own work per event */
  const char *diag = getenv("GPUMEM_DIAG");
  inj.diag_empty = diag && strcmp(diag, "empty_callbacks") == 0;
  inj.diag_subscribe_only = diag && strcmp(diag, "subscribe_only") == 0;
  inj.diag_count = diag && strcmp(diag, "count_calls") == 0;
  if (diag && strcmp(diag, "inert") == 0) return;
  const char *st = getenv(REC_ENV_SELFTEST);
  if (st && *st) {
    inj.selftest = 1;
    selftest(strtol(st, NULL, 10));
    return;
  }
  inj.lib = rec_cupti_open(inj.lib_path, sizeof inj.lib_path);
  if (!inj.lib) {
    const char *env = getenv(REC_ENV_CUPTI);
    inj_warn("CUPTI (libcupti.so) not found%s%s (set %s to its path): not recording, the "
              "program runs on",
              env && *env ? " at " : "", env && *env ? env : " under CUDA_HOME, /usr/local/cuda*, "
              "the nvidia-cuda-cupti wheel or the loader path", REC_ENV_CUPTI);
    return;
  }
  if (!resolve_api()) {
    inj_warn("%s lacks functions this recorder needs: not recording, the program runs on",
              inj.lib_path);
    return;
  }
  inj.t0 = inj_now_raw();
  start_callsites();
  /* the core first: CUPTI may deliver records as soon as activity is enabled */
  if (!start_core(env_mode())) return;
  if (!enable_cupti()) rec_core_fail(inj.core, "recording off");
  else rec_devmem_start(inj_now);
}

/* gpurec's sitecustomize calls this (ctypes) once PyTorch's CUDA is up and its history is on: each
 * request PyTorch's allocator serves gets its callsite from then on (rec_sites.c). Returns the
 * hooked slots (0: already), -1 when PyTorch cannot be hooked (said once on stderr), -2 when
 * nothing is recorded (no trace, or callsites off). */
EXPORT int gpumem_torch_sites(void);
EXPORT int gpumem_torch_sites(void) {
  char why[512];
  int r = rec_sites_hook(REC_SITES_OBJECT, REC_SITES_SYMBOL, why, sizeof why);
  if (r == -1) inj_warn("no callsites for PyTorch's requests: %s", why);
  return r;
}

/* gpurec's sitecustomize, once PyTorch's CUDA is up in default mode: stream PyTorch's allocator
 * trace into this process's trace (rec_torch_stream.c). torch_version is torch.__version__.
 * Returns 0, -1 when it cannot (the reason said once on stderr: the sitecustomize then records
 * PyTorch's history instead), -2 when nothing is recorded. */
EXPORT int gpumem_torch_stream(const char *torch_version);
EXPORT int gpumem_torch_stream(const char *torch_version) {
  if (!inj.core) return -2;
  char why[512];
  /* each request's callsite comes with its alloc entry (GPUMEM_TORCH_SITES=0: none, to measure) */
  const char *sites = getenv("GPUMEM_TORCH_SITES");
  rec_callsites_t *cs = sites && strcmp(sites, "0") == 0 ? NULL : inj.cs;
  int r = rec_torch_stream_attach(inj.core, cs, inj_now, torch_version, REC_TS_C10_OBJECT,
                                  REC_TS_TORCH_OBJECT, why, sizeof why);
  if (r < 0) inj_warn("PyTorch's allocator trace cannot be streamed: %s", why);
  return r;
}

/* Benchmarks only (tests/gpu/rec_inproc_bench.py): what the stream's tracker does with each
 * entry (REC_TS_BENCH_*: 0 all, 1 nothing, 2 no callsite); returns the previous mode, -1 if
 * nothing is streamed. */
EXPORT int gpumem_bench_stream(int mode);
EXPORT int gpumem_bench_stream(int mode) { return rec_torch_stream_bench(mode); }

/* Benchmarks only: the recorder's clock (inj_now: CUPTI's timestamp when capturing activity)
 * and the vDSO's monotonic clock, n calls each; the mean ns of one call of each. */
EXPORT void gpumem_bench_clock(int n, double *now_ns, double *mono);
EXPORT void gpumem_bench_clock(int n, double *now_ns, double *mono) {
  volatile uint64_t sink = 0;
  uint64_t t0 = inj_mono_ns();
  for (int i = 0; i < n; i++) sink += inj_now(NULL);
  uint64_t t1 = inj_mono_ns();
  for (int i = 0; i < n; i++) sink += inj_mono_ns();
  uint64_t t2 = inj_mono_ns();
  (void)sink;
  *now_ns = n > 0 ? (double)(t1 - t0) / n : 0;
  *mono = n > 0 ? (double)(t2 - t1) / n : 0;
}

/* The hook off again (tests/gpu/sites_bench.py: its cost measured against no hook, step by step
 * in one process); gpumem_torch_sites() puts it back. Returns the slots restored, -1 if none. */
EXPORT int gpumem_torch_sites_off(void);
EXPORT int gpumem_torch_sites_off(void) {
  char why[512];
  return rec_sites_unhook(REC_SITES_OBJECT, REC_SITES_SYMBOL, why, sizeof why);
}

EXPORT int InitializeInjection(void);
EXPORT int InitializeInjection(void) {
  pthread_once(&inj.once, init_once);
  return 1; /* never fail the driver's initialisation because of the recorder */
}
