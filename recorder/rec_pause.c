/* rec_pause.c: pausing the driver-call capture in-process, for benchmarks only.
 *
 * Issue 15 asks whether the recorder costs at most 1 % of a host-bound PyTorch step; the same
 * variant moves 10-20 % between processes on the GPU machine, so the answer has to come from one
 * process whose steps rotate between capture states (tests/gpu/rec_inproc_bench.py). The sites
 * hook already switches (gpumem_torch_sites / gpumem_torch_sites_off); this file switches the
 * other part of the default recording that costs per call: CUPTI's driver-API callbacks for the
 * memory calls the capture subscribes (rec_cb_capture_cbids, enabled by enable_cupti).
 *
 *   int gpumem_bench_cupti(int mode)
 *     0: the capture's driver callbacks disabled (cuptiEnableCallback(0, ...)); CUPTI stays
 *     loaded and subscribed, with its resource callbacks (context and stream life), so "paused"
 *     is what GPUMEM_DIAG=subscribe_only measures between processes, not an unrecorded process.
 *     1: enabled, capturing (the default). 2: enabled, but the recorder's callback returns at
 *     once (GPUMEM_DIAG=empty_callbacks, switched in-process): CUPTI's dispatch without our work.
 *     Returns 1 when the mode changed, 0 when it was already so, -1 when there is no callback
 *     capture to switch (not recording, GPUMEM_CAPTURE=activity, the self-test, a GPUMEM_DIAG
 *     run, a fork()ed child) or mode is not 0, 1 or 2, -2 when CUPTI refused a switch (the ids
 *     switched so far are switched back: the mode stays as it was).
 *
 * A paused trace must not pass for a whole one: the driver calls made while paused (modes 0
 * and 2) are not recorded, and how many there were is unknown. Each pause (leaving mode 1) adds
 * one to the trace's count of records its source dropped (readers print it: gpureplay's "its
 * source dropped N records"), and the first says so once on stderr. Benchmarks discard such
 * traces. */
#include "recorder/rec_pause.h"

#include <dlfcn.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "recorder/cupti_callback.h"

#define EXPORT __attribute__((visibility("default")))

_Atomic int rec_pause_empty;

typedef CUptiResult(CUPTIAPI *enable_fn)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,
                                         CUpti_CallbackId);

static struct {
  pthread_mutex_t mu; /* the exports may be called from any thread; switching is rare */
  enable_fn enable;
  CUpti_SubscriberHandle sub;
  rec_core_t *core;
  int mode; /* 0 disabled, 1 capturing, 2 empty */
  int said;
} p = {.mu = PTHREAD_MUTEX_INITIALIZER};

void rec_pause_attach(void *cupti, CUpti_SubscriberHandle sub, rec_core_t *core) {
  pthread_mutex_lock(&p.mu);
  *(void **)&p.enable = cupti ? dlsym(cupti, "cuptiEnableCallback") : NULL;
  p.sub = sub;
  p.core = p.enable ? core : NULL;
  p.mode = 1;
  pthread_mutex_unlock(&p.mu);
}

/* Called in the child right after fork(): no other thread runs there, the mutex is not taken. */
void rec_pause_detach(void) {
  p.core = NULL;
  atomic_store_explicit(&rec_pause_empty, 0, memory_order_relaxed);
  p.enable = NULL;
  pthread_mutex_init(&p.mu, NULL);
}

/* All the capture's callback ids to `on`; on a refusal, the ones switched so far back. */
static int set_all(uint32_t on) {
  for (unsigned i = 0; i < rec_cb_capture_ncbids; i++) {
    if (p.enable(on, p.sub, CUPTI_CB_DOMAIN_DRIVER_API, rec_cb_capture_cbids[i]) != CUPTI_SUCCESS) {
      for (unsigned j = 0; j < i; j++)
        p.enable(!on, p.sub, CUPTI_CB_DOMAIN_DRIVER_API, rec_cb_capture_cbids[j]);
      return -2;
    }
  }
  return (int)rec_cb_capture_ncbids;
}

static void say_once(void) {
  if (p.said) return;
  p.said = 1;
  static const char msg[] =
      "[gpurec] capture paused by gpumem_bench_cupti (benchmarks only): the driver calls made "
      "while paused are not in the trace; each pause counts as one record dropped\n";
  if (write(2, msg, sizeof msg - 1) < 0) {
  }
}

EXPORT int gpumem_bench_cupti(int mode);
EXPORT int gpumem_bench_cupti(int mode) {
  if (mode < 0 || mode > 2) return -1;
  pthread_mutex_lock(&p.mu);
  int r = 0;
  if (!p.core) r = -1;
  else if (mode != p.mode) {
    if ((mode == 0) != (p.mode == 0) && set_all(mode != 0) < 0) r = -2;
    if (r == 0) {
      if (p.mode == 1) { /* the gap counted before any call can fall into it */
        rec_core_add_dropped(p.core, 1);
        say_once();
      }
      atomic_store_explicit(&rec_pause_empty, mode == 2, memory_order_relaxed);
      p.mode = mode;
      r = 1;
    }
  }
  pthread_mutex_unlock(&p.mu);
  return r;
}
