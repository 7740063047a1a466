/* inj_stream.c: the injection library's side of gpurec's default source for PyTorch: PyTorch's
 * requests streamed into a trace of their own while the job runs (rec_tracker.c), next to the
 * process's CUPTI trace, on the same clock.
 *
 * gpurec's sitecustomize calls gpumem_torch_stream(torch.__version__) once PyTorch's CUDA is up.
 * A second core (rec_core.c: its own ring and writer thread, flushed every 250 ms so that a
 * SIGKILL loses at most that much plus the ordering margin) writes "<stem>.stream[.rankR].pidP.zst"
 * beside the CUPTI trace, capture mode torch. After the job gpurec merges the two into the
 * process's one trace (snap_merge_stream_file) and removes this one; if gpurec itself was killed
 * both stay, and this one alone replays (it holds every request). Failing to attach (an unknown
 * torch, a stripped library, another allocator backend) writes nothing and returns -1: the
 * caller then records the history, saying why. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "recorder/cupti_inject.h"
#include "recorder/rec_tracker.h"

#define STREAM_FLUSH_NS 250000000ull
#define STREAM_RING_EVENTS (1u << 18) /* 256 Ki events, 14 MiB: ~80 ms of a 3 M/s loop */

static rec_core_t *g_stream;

static void say(const char *fmt, const char *a, const char *b) {
  char line[1400];
  int n = snprintf(line, sizeof line, fmt, a, b);
  if (n > 0 && write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1) < 0) {
  }
}

static const char *stream_string(void *ctx, uint32_t id) { return rec_callsites_string(inj.cs, id); }

static void stream_warn(void *ctx, const char *msg) { inj_warn("PyTorch's request stream: %s", msg); }

EXPORT int gpumem_torch_stream(const char *version);
EXPORT int gpumem_torch_stream(const char *version) {
  if (g_stream) return 0;
  if (!inj.core || getpid() != inj.pid) return -2; /* not recording */
  char why[1024];
  if (!rec_tracker_version_known(version)) {
    snprintf(why, sizeof why, "torch %s: its allocator's trace entry layout is not known to this "
             "recorder (known: torch 2.11)", version ? version : "(unknown)");
    say("[gpurec] cannot stream PyTorch's requests: %s%s\n", why, "");
    return -1;
  }
  rec_config_t cfg;
  memset(&cfg, 0, sizeof cfg);
  gmt_header_init(&cfg.header);
  gm_err_t err;
  gm_err_clear(&err);
  const char *tmpl = getenv(REC_ENV_OUT);
  if (!tmpl || !*tmpl) tmpl = "gpumem.zst";
  int rank;
  rec_prov_rank(&rank, NULL, NULL);
  char path[4200];
  if (rec_trace_name_tag(tmpl, "stream", rank, (long)getpid(), path, sizeof path, &err) < 0 ||
      rec_prov_fill(&cfg.header, GMT_CAPTURE_TORCH, &err) < 0 ||
      gmt_header_set(&cfg.header.tool, "gpurec " GPUREC_VERSION, &err) < 0 ||
      gmt_header_kv_set(&cfg.header, "torch_stream.source", "allocator trace tracker", &err) < 0 ||
      gmt_header_kv_set(&cfg.header, "framework.pytorch", version, &err) < 0) {
    say("[gpurec] cannot stream PyTorch's requests: %s%s\n", err.msg, "");
    gmt_header_free(&cfg.header);
    return -1;
  }
  cfg.path = path;
  cfg.flush_interval_ns = STREAM_FLUSH_NS;
  cfg.ring_events = STREAM_RING_EVENTS;
  rec_hooks_t hooks = {.now_ns = inj_now, .warn = stream_warn};
  if (inj.cs) hooks.string = stream_string;
  rec_core_t *core = NULL;
  gm_status_t s = rec_core_start(&core, &cfg, &hooks, &err);
  gmt_header_free(&cfg.header);
  if (s < 0) {
    say("[gpurec] cannot stream PyTorch's requests: %s%s\n", err.msg, "");
    return -1;
  }
  int r = rec_tracker_attach(REC_TRACKER_OBJECT, version, core, inj.cs, inj_now, why, sizeof why);
  if (r < 0) {
    say("[gpurec] cannot stream PyTorch's requests: %s%s\n", why, "");
    rec_core_stop(core); /* no event, no context: no file */
    rec_core_destroy(core);
    return -1;
  }
  rec_core_gpu_ready(core);
  g_stream = core;
  return 1;
}

void inj_stream_stop(void) {
  if (!g_stream) return;
  rec_tracker_detach();
  rec_core_stop(g_stream);
}

void inj_stream_stop_from_signal(uint64_t timeout_ns) {
  if (!g_stream) return;
  rec_tracker_detach();
  rec_core_stop_from_signal(g_stream, timeout_ns);
}

void inj_stream_in_child(void) {
  rec_tracker_detach();
  g_stream = NULL;
}
