/* gpureplay_run.c: replaying one trace under many policies, in parallel.
 *
 * Each policy run is a job: its own backend, its own engine, the same events. Jobs run on
 * --jobs threads taking the next job from a shared counter (runs differ a lot in cost:
 * `direct` is cheap, an expandable pytorch run is not, so a static split would idle cores).
 *
 * Where the events come from: when several policies replay one trace and the decoded events
 * fit in memory (gmt_event_t is 56 bytes: 1 M events = 56 MB; at most 2 GiB and 32 times the
 * file, so a small file of millions of identical events is not blown up), the trace is decoded once
 * and every job reads the shared array; otherwise each job opens its own reader over the
 * file (decoding costs each job again, memory stays flat). bench/replay measures both.
 *
 * The cuda backend runs one job at a time on the calling thread (the CUDA context is
 * current there, and latencies measured with other replays running beside are worthless). */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "replay/gpureplay.h"
#include "replay/rp_cuda.h"

/* The --sweep grid: every user-settable PyTorch key at values people try, a few
 * combinations, and the other frameworks' allocators. */
const char *const gr_sweep_grid[] = {
    "pytorch",
    "pytorch:expandable_segments:True",
    "pytorch:max_split_size_mb:64",
    "pytorch:max_split_size_mb:128",
    "pytorch:max_split_size_mb:256",
    "pytorch:max_split_size_mb:512",
    "pytorch:roundup_power2_divisions:4",
    "pytorch:roundup_power2_divisions:[256:1,512:2,1024:4,>:8]",
    "pytorch:garbage_collection_threshold:0.8,per_process_memory_fraction:0.9",
    "pytorch:expandable_segments:True,roundup_power2_divisions:4",
    "pytorch:max_split_size_mb:128,roundup_power2_divisions:[256:1,512:2,1024:4,>:8],"
    "garbage_collection_threshold:0.8,per_process_memory_fraction:0.9",
    "bfc",
    "bfc:growth",
    "prealloc",
    "direct",
    NULL,
};

/* JAX's settings (jax policy, JAX's words): the default preallocation, growth, smaller
 * preallocations, the platform allocator; cuda_async where there is a GPU. */
static const char *const jax_grid[] = {
    "jax",
    "jax:XLA_PYTHON_CLIENT_PREALLOCATE=false",
    "jax:XLA_PYTHON_CLIENT_MEM_FRACTION=.5",
    "jax:XLA_PYTHON_CLIENT_MEM_FRACTION=.25",
    "jax:XLA_PYTHON_CLIENT_MEM_FRACTION=.1",
    "jax:XLA_PYTHON_CLIENT_ALLOCATOR=platform",
    "jax:XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async,XLA_PYTHON_CLIENT_PREALLOCATE=false",
    NULL,
};

/* TensorFlow's (tf policy, TF's words). */
static const char *const tf_grid[] = {
    "tf",
    "tf:TF_FORCE_GPU_ALLOW_GROWTH=true",
    "tf:per_process_gpu_memory_fraction=0.5",
    "tf:per_process_gpu_memory_fraction=0.25",
    "tf:TF_GPU_ALLOCATOR=cuda_malloc_async",
    NULL,
};

/* CuPy's default pool, and what the arrays need (set_allocator(None)). */
static const char *const cupy_grid[] = {"cupy", "direct", NULL};

/* RAPIDS RMM (an imported log): its pool resources are not modelled; the driver's allocator
 * (cuda_memory_resource) and pool (cuda_async_memory_resource) are, and the caching allocators
 * say what they would reserve for the same requests. */
static const char *const rmm_grid[] = {"direct", "async", "pytorch", "pytorch:expandable_segments:True", "bfc:growth", NULL};

const char *const *gr_sweep_grid_for(unsigned framework) {
  switch (framework) {
    case GMT_FW_JAX: return jax_grid;
    case GMT_FW_TENSORFLOW: return tf_grid;
    case GMT_FW_CUPY: return cupy_grid;
    case GMT_FW_RMM: return rmm_grid;
    default: return gr_sweep_grid;
  }
}

int gr_policy_from_env(const char *spec, char *out, size_t n) {
  static const char *const vars[] = {"PYTORCH_CUDA_ALLOC_CONF=", "PYTORCH_ALLOC_CONF="};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    size_t l = strlen(vars[i]);
    if (strncmp(spec, vars[i], l) != 0) continue;
    const char *conf = spec + l;
    /* A value pasted with its shell quotes. */
    size_t cl = strlen(conf);
    if (cl >= 2 && (conf[0] == '\'' || conf[0] == '"') && conf[cl - 1] == conf[0]) {
      conf++;
      cl -= 2;
    }
    int w;
    if (strstr(conf, "backend:cudaMallocAsync")) w = snprintf(out, n, "async");
    else if (cl == 0) w = snprintf(out, n, "pytorch");
    else w = snprintf(out, n, "pytorch:%.*s", (int)cl, conf);
    return w >= 0 && (size_t)w < n ? 0 : -1;
  }
  /* JAX's and TensorFlow's variables (and TF's GPUOptions fields) are their policies' own
   * words: the whole line is the conf, "A=1 B=2" as a shell exports it. */
  static const struct {
    const char *prefix, *policy;
  } words[] = {
      {"XLA_PYTHON_CLIENT_", "jax"},  {"XLA_CLIENT_MEM_FRACTION=", "jax"},
      {"TF_", "tf"},                  {"per_process_gpu_memory_fraction=", "tf"},
      {"memory_limit=", "tf"},
  };
  for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
    if (strncmp(spec, words[i].prefix, strlen(words[i].prefix)) == 0) {
      int w = snprintf(out, n, "%s:%s", words[i].policy, spec);
      return w >= 0 && (size_t)w < n ? 0 : -1;
    }
  int w = snprintf(out, n, "%s", spec);
  return w >= 0 && (size_t)w < n ? 0 : -1; /* never a spec cut short: a cut token reads as another */
}

/* The devices of k events into devs (first appearance order); seen: a bit per ordinal. */
static void scan_devices(const gmt_event_t *evs, size_t k, uint64_t *seen, int *devs, int max, int *n) {
  for (size_t i = 0; i < k; i++) {
    const gmt_event_t *e = &evs[i];
    if (e->kind != GMT_EV_ALLOC && e->kind != GMT_EV_VMM_MAP && e->kind != GMT_EV_ALLOC_FAILED) continue;
    if (e->mem_kind != GMT_MEM_DEVICE && e->mem_kind != GMT_MEM_UNKNOWN) continue;
    uint64_t bit = 1ull << (e->device % 64);
    if (seen[e->device / 64] & bit) continue;
    seen[e->device / 64] |= bit;
    if (*n < max) devs[*n] = e->device;
    (*n)++;
  }
}

gm_status_t gr_trace_devices(const char *path, int *devs, int max, int *n, gm_err_t *err) {
  gmt_reader_t *r = NULL;
  *n = 0;
  /* Every good chunk's devices: a damaged trace is for the replay to refuse (--strict) or salvage. */
  gm_status_t st = gmt_reader_open_flags(&r, path, GMT_READ_SALVAGE, err);
  if (st != GM_OK) return gm_err_wrap(err, "cannot open '%s'", path);
  uint64_t seen[1024] = {0}; /* a bit per device ordinal (uint16_t) */
  gmt_event_t buf[4096];
  size_t k = 0;
  gm_err_t rerr;
  while (gmt_reader_next_batch(r, buf, sizeof buf / sizeof buf[0], &k, &rerr) == GM_OK)
    scan_devices(buf, k, seen, devs, max, n);
  gmt_reader_close(r);
  return GM_OK;
}

gm_status_t gr_trace_frameworks(const char *path, unsigned *set, gm_err_t *err) {
  gmt_reader_t *r = NULL;
  /* The header only: a damaged index is for the replay to refuse (--strict) or salvage. */
  gm_status_t st = gmt_reader_open_flags(&r, path, GMT_READ_SALVAGE, err);
  if (st != GM_OK) return gm_err_wrap(err, "cannot open '%s'", path);
  *set = gmt_header_frameworks(gmt_reader_header(r));
  gmt_reader_close(r);
  return GM_OK;
}

#define BATCH 4096
#define PRELOAD_MAX_BYTES (2ull << 30)
#define PRELOAD_RATIO 32                 /* decoded bytes per byte of file, at most */
#define PRELOAD_FLOOR_BYTES (64ull << 20) /* below this, preload whatever the ratio */

typedef struct job {
  const gr_config_t *cfg;
  const char *path;
  const char *spec;
  const gmt_event_t *evs; /* preloaded events, or NULL: read the file */
  size_t n_evs;
  uint64_t total_memory;
  int external_sync; /* rp_engine_set_external_sync for this trace */
  int vmm_requests;  /* rp_engine_opts_t.vmm_requests for this trace */
  int count_other;   /* rp_engine_opts_t.count_other for this trace */
  uint64_t context_bytes; /* taken out of the capacity (gpureplay_context.c) */
  int decode_ahead; /* read the file in a thread of its own (one job running alone) */
  int event_timing; /* RP_EVENTS_*: when frees that wait on stream events happen */
  int pool_model;   /* RP_POOL_*: the simulated stream-ordered pool's reuse */
  gmt_reader_stats_t reader_stats; /* what the reader found (streamed jobs) */
  char damage[GM_ERR_MSG_MAX];
  int has_reader_stats;
  rp_result_t *res;
  gm_status_t st;
  gm_err_t err;
} job_t;

typedef struct pool {
  job_t *jobs;
  int n;
  atomic_int next;
  atomic_int done;
  _Atomic uint64_t events; /* replayed so far, all jobs (progress) */
} pool_t;

static gm_status_t make_backend(const job_t *j, rp_backend_t **b, gm_err_t *err) {
  const gr_config_t *c = j->cfg;
  if (c->cuda_ordinal >= 0) {
    rp_cuda_opts_t o = {gr_capacity_left(c->capacity, j->context_bytes), j->total_memory, c->cuda_real_addresses,
                        c->addresses};
    gm_status_t st = rp_cuda_backend_create(c->cuda_ordinal, &o, b, err);
    if (st != GM_OK) return gm_err_wrap(err, "cuda:%d", c->cuda_ordinal);
    return GM_OK;
  }
  rp_sim_opts_t o = {gr_capacity_left(c->capacity, j->context_bytes), c->granularity, j->total_memory,
                     j->pool_model, 0, c->addresses};
  return rp_sim_backend_create(&o, b, err);
}

/* Decode-ahead: a reader thread fills a ring of batches while the engine replays the
 * previous ones, so a single replay from a file costs max(decode, replay), not the sum. Used
 * when one job runs alone (with several jobs the cores are already busy replaying). */
#define RING 4
#define RING_BATCH 16384

typedef struct ring {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  gmt_reader_t *r;
  gmt_event_t *buf[RING];
  size_t n[RING];
  int head, tail, count, done, stop; /* done: the reader reached the end or failed */
  gm_status_t st;
  gm_err_t err;
} ring_t;

static void *ring_reader(void *arg) {
  ring_t *q = arg;
  for (;;) {
    pthread_mutex_lock(&q->mu);
    while (q->count == RING && !q->stop) pthread_cond_wait(&q->cv, &q->mu);
    int slot = q->tail, stop = q->stop;
    pthread_mutex_unlock(&q->mu);
    if (stop) break;
    size_t k = 0;
    gm_status_t st = gmt_reader_next_batch(q->r, q->buf[slot], RING_BATCH, &k, &q->err);
    pthread_mutex_lock(&q->mu);
    if (st != GM_OK) {
      q->st = st == GM_END ? GM_OK : st;
      q->done = 1;
      pthread_cond_broadcast(&q->cv);
      pthread_mutex_unlock(&q->mu);
      break;
    }
    q->n[slot] = k;
    q->tail = (q->tail + 1) % RING;
    q->count++;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
  }
  return NULL;
}

static gm_status_t feed_ring(rp_engine_t *e, gmt_reader_t *r, const char *path, pool_t *p,
                             gm_err_t *err) {
  ring_t q;
  memset(&q, 0, sizeof q);
  q.r = r;
  gmt_event_t *mem = malloc((size_t)RING * RING_BATCH * sizeof *mem);
  if (!mem) return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  for (int i = 0; i < RING; i++) q.buf[i] = mem + (size_t)i * RING_BATCH;
  pthread_mutex_init(&q.mu, NULL);
  pthread_cond_init(&q.cv, NULL);
  pthread_t t;
  if (pthread_create(&t, NULL, ring_reader, &q) != 0) {
    free(mem);
    return GM_ERR_UNSUPPORTED; /* the caller reads without the thread */
  }
  gm_status_t st = GM_OK;
  for (;;) {
    pthread_mutex_lock(&q.mu);
    while (q.count == 0 && !q.done) pthread_cond_wait(&q.cv, &q.mu);
    if (q.count == 0) { /* done and drained */
      pthread_mutex_unlock(&q.mu);
      if (q.st != GM_OK) {
        *err = q.err;
        st = gm_err_wrap(err, "cannot read '%s'", path);
      }
      break;
    }
    int slot = q.head;
    pthread_mutex_unlock(&q.mu);
    st = rp_engine_feed(e, q.buf[slot], q.n[slot], err);
    if (p) atomic_fetch_add(&p->events, q.n[slot]);
    pthread_mutex_lock(&q.mu);
    q.head = (q.head + 1) % RING;
    q.count--;
    if (st != GM_OK) q.stop = 1;
    pthread_cond_broadcast(&q.cv);
    pthread_mutex_unlock(&q.mu);
    if (st != GM_OK) break;
  }
  pthread_join(t, NULL);
  pthread_mutex_destroy(&q.mu);
  pthread_cond_destroy(&q.cv);
  free(mem);
  return st;
}

static void keep_damage(const gmt_reader_t *r, char *damage) {
  const char *d = gmt_reader_damage(r);
  snprintf(damage, GM_ERR_MSG_MAX, "%s", d ? d : "");
}

static gm_status_t feed_file(rp_engine_t *e, const char *path, unsigned flags, pool_t *p, int ahead,
                             gmt_reader_stats_t *stats, char *damage, gm_err_t *err) {
  gmt_reader_t *r = NULL;
  gm_status_t st = gmt_reader_open_flags(&r, path, flags, err);
  if (st != GM_OK) return gm_err_wrap(err, "cannot open '%s'", path);
  if (ahead) {
    st = feed_ring(e, r, path, p, err);
    if (st != GM_ERR_UNSUPPORTED) {
      *stats = *gmt_reader_stats(r);
      keep_damage(r, damage);
      gmt_reader_close(r);
      return st;
    }
  }
  gmt_event_t *buf = malloc(BATCH * sizeof *buf);
  if (!buf) {
    gmt_reader_close(r);
    return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  }
  for (;;) {
    size_t n = 0;
    st = gmt_reader_next_batch(r, buf, BATCH, &n, err);
    if (st == GM_END) {
      st = GM_OK;
      break;
    }
    if (st != GM_OK) {
      gm_err_wrap(err, "cannot read '%s'", path);
      break;
    }
    if ((st = rp_engine_feed(e, buf, n, err)) != GM_OK) break;
    if (p) atomic_fetch_add(&p->events, n);
  }
  free(buf);
  *stats = *gmt_reader_stats(r);
  keep_damage(r, damage);
  gmt_reader_close(r);
  return st;
}

static void run_job(job_t *j, pool_t *p) {
  rp_backend_t *b = NULL;
  rp_engine_t *e = NULL;
  gm_err_t *err = &j->err;
  char name[64];
  size_t n = strcspn(j->spec, ":");
  snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), j->spec);
  const char *conf = j->spec[n] == ':' ? j->spec + n + 1 : "";
  const rp_policy_ops_t *ops = rp_policy_find(name);
  if (!ops) {
    j->st = gm_err_set(err, GM_ERR_INVAL, "unknown policy '%s'", name);
    return;
  }
  j->st = make_backend(j, &b, err);
  if (j->st != GM_OK) return;
  rp_engine_opts_t eo = {j->cfg->device, j->cfg->check, j->cfg->capacity, j->cfg->serve_failed,
                         j->vmm_requests, j->event_timing, j->cfg->late_mallocs, j->count_other};
  j->st = rp_engine_create(ops, conf, b, &eo, &e, err);
  if (j->st == GM_OK) j->st = rp_engine_set_external_sync(e, j->external_sync, err);
  if (j->st == GM_OK) {
    if (j->evs) {
      /* A capacity probe (stop_at_oom) needs only whether an OOM happens: it ends at the first. */
      size_t step = j->cfg->stop_at_oom ? 8192 : 65536;
      for (size_t i = 0; i < j->n_evs && j->st == GM_OK; i += step) {
        size_t k = j->n_evs - i < step ? j->n_evs - i : step;
        j->st = rp_engine_feed(e, j->evs + i, k, err);
        if (p) atomic_fetch_add(&p->events, k);
        if (j->cfg->stop_at_oom && rp_engine_ooms(e)) break;
      }
    } else {
      j->st = feed_file(e, j->path, j->cfg->read_flags, p, j->decode_ahead, &j->reader_stats, j->damage, err);
      j->has_reader_stats = 1;
    }
    if (j->st == GM_OK) j->st = rp_engine_finish(e, j->res, err);
    if (j->st == GM_OK) j->res->context_bytes = j->context_bytes;
    if (j->st != GM_OK) gm_err_wrap(err, "policy '%s'", j->spec);
  }
  rp_engine_destroy(e);
  b->destroy(b);
}

static void *worker(void *arg) {
  pool_t *p = arg;
  for (;;) {
    int i = atomic_fetch_add(&p->next, 1);
    if (i >= p->n) break;
    run_job(&p->jobs[i], p);
    atomic_fetch_add(&p->done, 1);
  }
  return NULL;
}

/* Does the trace hold an async device allocation? Decodes from the start and stops at the
 * first one (a framework's first tensor: within the first events of a requests trace); only
 * a trace without any is decoded to its end. A read error ends the scan: the replay itself
 * will report it. */
static int scan_async_alloc(gmt_reader_t *r) {
  gmt_event_t buf[512];
  gm_err_t err;
  for (;;) {
    size_t n = 0;
    if (gmt_reader_next_batch(r, buf, sizeof buf / sizeof buf[0], &n, &err) != GM_OK) return 0;
    for (size_t i = 0; i < n; i++)
      if (buf[i].kind == GMT_EV_ALLOC && (buf[i].flags & GMT_F_ASYNC) &&
          (buf[i].mem_kind == GMT_MEM_DEVICE || buf[i].mem_kind == GMT_MEM_UNKNOWN))
        return 1;
  }
}

/* What the header says, into info (no events read). */
static void info_from_header(const gmt_header_t *h, gr_trace_info_t *info) {
  info->start_time_ns = h->start_time_ns;
  info->pid = h->pid;
  info->gpu_total_mem = h->gpu_total_mem;
  info->capture_mode = h->capture_mode;
  info->frameworks = gmt_header_frameworks(h);
  gmt_header_frameworks_text(h, info->frameworks_text, sizeof info->frameworks_text);
  const char *pat = gmt_header_kv_get(h, "predicted.at"), *pin = gmt_header_kv_get(h, "predicted.inputs"),
             *pconf = gmt_header_kv_get(h, "predicted.confidence");
  if (pat) /* gpurec predict's trace: a run nobody made */
    snprintf(info->predicted, sizeof info->predicted, "the job at %s, predicted from %s (confidence %s)", pat,
             pin ? pin : "?", pconf ? pconf : "?");
  const char *mi = gmt_header_kv_get(h, "gpu_mem_info_total");
  if (mi) gm_parse_u64(mi, &info->gpu_mem_info_total, NULL);
  const char *free_at_oom = gmt_header_kv_get(h, "torch.snapshot.oom_device_free_bytes");
  if (free_at_oom) gm_parse_u64(free_at_oom, &info->recorded_device_free, NULL);
}

/* XLA's platform allocator (the header says so and no other framework's)? */
static int platform_alloc(const gmt_header_t *h, const gr_trace_info_t *info) {
  const char *xla_alloc = gmt_header_kv_get(h, "XLA_PYTHON_CLIENT_ALLOCATOR");
  return xla_alloc && strcmp(xla_alloc, "platform") == 0 && (!info->frameworks || (info->frameworks & GMT_FW_JAX));
}

/* How the requests are read, once has_async_alloc is known (when it was needed). */
static void decide_reading(const gmt_header_t *h, int sync_allocs, int vmm_buffers, int platform,
                           gr_trace_info_t *info) {
  /* XLA's platform allocator maps every buffer through the VMM API: those maps are the
   * requests (when the trace has no stream-ordered ones), and its cuMemAllocs a library's. */
  info->vmm_requests = vmm_buffers == GR_VMM_REQUESTS ||
                       (vmm_buffers == GR_VMM_AUTO && platform && !info->has_async_alloc);
  info->external_sync = sync_allocs == GR_SYNC_EXTERNAL ||
                        (sync_allocs == GR_SYNC_AUTO &&
                         (rp_sync_is_external(info->capture_mode, info->has_async_alloc) ||
                          info->vmm_requests));
  info->holds = gmt_trace_holds(h, info->vmm_requests, info->has_async_alloc);
}

/* Read the header and what the index says; for a requests trace, whether it has async
 * allocations (which decides how its synchronous ones are read). */
static gm_status_t probe(const char *path, unsigned flags, int sync_allocs, int vmm_buffers, gr_trace_info_t *info,
                         gm_err_t *err) {
  gmt_reader_t *r = NULL;
  gm_status_t st = gmt_reader_open_flags(&r, path, flags, err);
  if (st != GM_OK) return gm_err_wrap(err, "cannot open '%s'", path);
  const gmt_header_t *h = gmt_reader_header(r);
  info->path = path;
  info_from_header(h, info);
  info->has_context = gr_header_has_context(h);
  int platform = platform_alloc(h, info);
  info->events_in_index = 0;
  uint64_t nc = gmt_reader_chunk_count(r);
  for (uint64_t i = 0; i < nc; i++) {
    uint64_t ts = 0, ev = 0;
    if (gmt_reader_chunk_info(r, i, &ts, &ev, NULL) == GM_OK) info->events_in_index += ev;
  }
  if ((sync_allocs == GR_SYNC_AUTO && info->capture_mode == GMT_CAPTURE_REQUESTS) ||
      (vmm_buffers == GR_VMM_AUTO && platform))
    info->has_async_alloc = scan_async_alloc(r);
  decide_reading(h, sync_allocs, vmm_buffers, platform, info);
  gmt_reader_close(r);
  return GM_OK;
}

int gr_count_other(const gr_config_t *cfg, const gr_trace_info_t *info) {
  if (cfg->count_other == GR_OTHER_NO) return RP_OTHER_NONE;
  if (cfg->count_other == GR_OTHER_YES) return RP_OTHER_ALL_MAPS;
  /* In a requests trace a VMM map that is not a request is another owner's (NCCL); in torch,
   * torch-history and native traces unflagged maps are the framework's own pages (expandable
   * segments), and another owner's carry GMT_F_EXTERNAL (torch-history's CUPTI side). */
  return info->capture_mode == GMT_CAPTURE_REQUESTS && !info->vmm_requests ? RP_OTHER_ALL_MAPS
                                                                           : RP_OTHER_FLAGGED_MAPS;
}

/* Decode the whole trace into one array (the shared input of all jobs). */
static gm_status_t preload(const char *path, unsigned flags, uint64_t hint, gmt_event_t **out, size_t *n,
                           gr_trace_info_t *info, gm_err_t *err) {
  gmt_reader_t *r = NULL;
  gm_status_t st = gmt_reader_open_flags(&r, path, flags, err);
  if (st != GM_OK) return gm_err_wrap(err, "cannot open '%s'", path);
  /* the index's count is a hint from the file: it sizes the first allocation, never more than
   * what auto preloading allows */
  size_t cap = hint && hint <= PRELOAD_MAX_BYTES / sizeof(gmt_event_t) ? (size_t)hint : 65536, len = 0;
  gmt_event_t *evs = malloc(cap * sizeof *evs);
  while (evs) {
    if (len == cap) {
      gmt_event_t *g = realloc(evs, 2 * cap * sizeof *evs);
      if (!g) break;
      evs = g;
      cap *= 2;
    }
    size_t k = 0;
    st = gmt_reader_next_batch(r, evs + len, cap - len, &k, err);
    if (st == GM_END) break;
    if (st != GM_OK) {
      gm_err_wrap(err, "cannot read '%s'", path);
      free(evs);
      gmt_reader_close(r);
      return st;
    }
    len += k;
  }
  const gmt_reader_stats_t *s = gmt_reader_stats(r);
  info->truncated = s->truncated;
  info->seq_gaps = s->seq_gaps;
  info->dropped = s->dropped;
  info->stats = *s;
  keep_damage(r, info->damage);
  gmt_reader_close(r);
  if (!evs) return gm_err_set(err, GM_ERR_NOMEM, "out of host memory decoding '%s'", path);
  *out = evs;
  *n = len;
  return GM_OK;
}

/* The text of string id (a callsite), read from the trace up to where it is defined. */
static void callsite_text(const char *path, uint32_t id, char *out, size_t n) {
  out[0] = '\0';
  gmt_reader_t *r = NULL;
  if (gmt_reader_open_flags(&r, path, GMT_READ_SALVAGE, NULL) != GM_OK) return; /* best effort: past damage */
  gmt_event_t buf[512];
  const char *s = gmt_reader_string(r, id);
  while (!s) {
    size_t k = 0;
    if (gmt_reader_next_batch(r, buf, sizeof buf / sizeof buf[0], &k, NULL) != GM_OK) break;
    s = gmt_reader_string(r, id);
  }
  if (s) snprintf(out, n, "%s", s);
  gmt_reader_close(r);
}

static void show_progress(pool_t *p, uint64_t total, const char *path) {
  uint64_t done = atomic_load(&p->events);
  double pct = total ? 100.0 * (double)done / (double)total : 0.0;
  if (pct > 100.0) pct = 100.0;
  fprintf(stderr, "\rgpureplay: %s: %d/%d policies done, %.0f%%   ", path, atomic_load(&p->done),
          p->n, pct);
}

/* Run the pool's jobs: on the calling thread (cuda, or one job without progress to show),
 * else on cfg->jobs threads. */
static void run_pool(const gr_config_t *cfg, pool_t *p, uint64_t events, const char *path) {
  int n = p->n;
  int threads = cfg->cuda_ordinal >= 0 ? 1 : cfg->jobs < 1 ? 1 : cfg->jobs > n ? n : cfg->jobs;
  for (int i = 0; i < n; i++) p->jobs[i].decode_ahead = threads == 1;
  uint64_t total = (uint64_t)n * events;
  if (cfg->cuda_ordinal >= 0 || (threads == 1 && !cfg->progress)) {
    worker(p);
    return;
  }
  pthread_t *tids = calloc((size_t)threads, sizeof *tids);
  int started = 0;
  for (int t = 0; tids && t < threads; t++)
    if (pthread_create(&tids[t], NULL, worker, p) == 0) started++;
  if (started == 0) worker(p);
  while (cfg->progress && atomic_load(&p->done) < n) {
    show_progress(p, total, path);
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  for (int t = 0; t < started; t++) pthread_join(tids[t], NULL);
  if (cfg->progress) fprintf(stderr, "\r%*s\r", 78, "");
  free(tids);
}

/* Which range a policy's figure has: one that took its memory from the stream-ordered pool
 * (`async`, JAX's cuda_async, ...) on the simulator, the pool model's; any other policy of a
 * trace whose frees wait on stream events, the events' (engine_events.c). */
static int range_kind(const gr_config_t *cfg, const rp_result_t *r) {
  if (r->pool_allocs) return cfg->cuda_ordinal < 0 ? RP_RANGE_POOL : RP_RANGE_NONE;
  return r->event_frees ? RP_RANGE_EVENTS : RP_RANGE_NONE;
}

/* The two other replays of every policy whose figure depends on timing (events early and
 * late, or the pool ideal and same-stream), folded into res[i] as a range. */
static gm_status_t timing_range(const gr_config_t *cfg, const pool_t *rec, rp_result_t **res,
                                const gmt_event_t *evs, size_t n_evs, const gr_trace_info_t *info,
                                gm_err_t *err) {
  int n = rec->n, m = 0;
  pool_t p;
  memset(&p, 0, sizeof p);
  p.jobs = calloc((size_t)2 * n, sizeof *p.jobs);
  rp_result_t *out = calloc((size_t)2 * n, sizeof *out);
  int *of = calloc((size_t)2 * n, sizeof *of), *var = calloc((size_t)2 * n, sizeof *var);
  if (!p.jobs || !out || !of || !var) {
    free(p.jobs);
    free(out);
    free(of);
    free(var);
    return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  }
  for (int i = 0; i < n; i++) {
    int kind = range_kind(cfg, res[i]);
    res[i]->range_kind = kind;
    /* Variant 0 (early, ideal pool) and 1 (late, chunked same-stream pool). A trace whose
     * waiting frees are all requests-mode ones recorded them early already: no early replay. */
    res[i]->range_a_bytes = res[i]->range_b_bytes = res[i]->peak_reserved_bytes;
    int v0 = kind == RP_RANGE_EVENTS && res[i]->event_frees_requested == 0 ? 1 : 0;
    for (int v = v0; kind != RP_RANGE_NONE && v < 2; v++, m++) {
      job_t *j = &p.jobs[m];
      *j = rec->jobs[i];
      memset(&j->err, 0, sizeof j->err);
      j->st = GM_OK;
      j->has_reader_stats = 0;
      j->evs = evs;
      j->n_evs = n_evs;
      if (kind == RP_RANGE_EVENTS) j->event_timing = v == 0 ? RP_EVENTS_EARLY : RP_EVENTS_LATE;
      else j->pool_model = v == 0 ? RP_POOL_IDEAL : RP_POOL_CHUNKS | RP_POOL_SAME_STREAM;
      j->res = &out[m];
      of[m] = i;
      var[m] = v;
    }
  }
  p.n = m;
  if (m) run_pool(cfg, &p, n_evs ? n_evs : info->events_in_index, info->path);
  gm_status_t st = GM_OK;
  for (int k = 0; k < m && st == GM_OK; k++) {
    if (p.jobs[k].st != GM_OK) {
      *err = p.jobs[k].err;
      st = gm_err_wrap(err, "%s", res[of[k]]->range_kind == RP_RANGE_POOL ? "pool model" : "stream events");
      break;
    }
    rp_result_t *r = res[of[k]];
    if (var[k] == 0) r->range_a_bytes = out[k].peak_reserved_bytes;
    else {
      r->range_b_bytes = out[k].peak_reserved_bytes;
      r->late_mallocs = out[k].late_mallocs;
    }
  }
  for (int i = 0; i < n && st == GM_OK; i++) {
    rp_result_t *r = res[i];
    if (r->range_kind == RP_RANGE_NONE) continue;
    uint64_t a = r->range_a_bytes, b = r->range_b_bytes, c = r->peak_reserved_bytes;
    r->range_low_bytes = a < b ? (a < c ? a : c) : (b < c ? b : c);
    r->range_high_bytes = a > b ? (a > c ? a : c) : (b > c ? b : c);
  }
  free(p.jobs);
  free(out);
  free(of);
  free(var);
  return st;
}

/* Decode the trace once for all its jobs? Preloading holds 56 bytes per event: fine for a real
 * trace (2-5 bytes per event on disk), not for a small file that decodes to millions of
 * identical events (or an index that claims them): auto preloads only what is within
 * PRELOAD_RATIO times the file's size. info: the probe's. */
static int wants_preload(const gr_config_t *cfg, const char *path, const gr_trace_info_t *info) {
  struct stat sb;
  uint64_t file_bytes = stat(path, &sb) == 0 && S_ISREG(sb.st_mode) ? (uint64_t)sb.st_size : 0;
  uint64_t decoded = info->events_in_index * sizeof(gmt_event_t);
  return cfg->preload > 0 ||
         (cfg->preload < 0 && cfg->n_policies > 1 && info->events_in_index > 0 && decoded <= PRELOAD_MAX_BYTES &&
          (decoded <= PRELOAD_FLOOR_BYTES || decoded / PRELOAD_RATIO <= file_bytes));
}

void gr_decoded_free(gr_decoded_t *dec) {
  free(dec->evs);
  memset(dec, 0, sizeof *dec);
}

gm_status_t gr_trace_scan(const gr_config_t *cfg, const char *path, gr_decoded_t *dec, int *devs, int max,
                          int *n, gm_err_t *err) {
  gr_decoded_free(dec);
  *n = 0;
  /* Only where the replay reads as the device scan does (salvaging): --strict refuses a damaged
   * trace in the replay, after the scan found its devices. */
  gr_trace_info_t *info = &dec->info;
  if (cfg->read_flags == GMT_READ_SALVAGE &&
      probe(path, cfg->read_flags, cfg->sync_allocs, cfg->vmm_buffers, info, err) == GM_OK &&
      wants_preload(cfg, path, info) &&
      preload(path, cfg->read_flags, info->events_in_index, &dec->evs, &dec->n_evs, info, err) == GM_OK) {
    dec->path = path;
    uint64_t seen[1024] = {0};
    scan_devices(dec->evs, dec->n_evs, seen, devs, max, n);
    return GM_OK;
  }
  gr_decoded_free(dec); /* anything amiss: the scan of its own, and the replay reports it */
  return gr_trace_devices(path, devs, max, n, err);
}

gm_status_t gr_run_trace(const gr_config_t *cfg, const char *path, gr_trace_info_t *info,
                         rp_result_t **res, gm_err_t *err) {
  memset(info, 0, sizeof *info);
  gm_status_t st = probe(path, cfg->read_flags, cfg->sync_allocs, cfg->vmm_buffers, info, err);
  if (st != GM_OK) return st;
  /* What the frameworks multiply their fractions by is cuMemGetInfo's total, which the
   * recorder writes when it can (gpu_mem_info_total; cuDeviceTotalMem can be 1 MiB less). */
  uint64_t total_memory = cfg->device_memory ? cfg->device_memory
                          : cfg->capacity    ? cfg->capacity
                          : info->gpu_mem_info_total ? info->gpu_mem_info_total
                                                     : info->gpu_total_mem;
  /* Said out loud wherever it matters (prealloc and bfc take a share of it). */
  info->device_memory = total_memory ? total_memory : GR_ASSUMED_DEVICE_MEMORY;
  info->device_memory_assumed = !cfg->device_memory && !info->gpu_total_mem;
  int n = cfg->n_policies;
  gmt_event_t *evs = NULL;
  size_t n_evs = 0;
  int want_preload = wants_preload(cfg, path, info), own_evs = 0;
  const gr_decoded_t *dec = cfg->decoded;
  if (want_preload && dec && dec->evs && dec->path && strcmp(dec->path, path) == 0) {
    evs = dec->evs; /* gr_trace_scan decoded it already */
    n_evs = dec->n_evs;
    info->truncated = dec->info.truncated;
    info->seq_gaps = dec->info.seq_gaps;
    info->dropped = dec->info.dropped;
    info->stats = dec->info.stats;
    snprintf(info->damage, sizeof info->damage, "%s", dec->info.damage);
  } else if (want_preload) {
    if ((st = preload(path, cfg->read_flags, info->events_in_index, &evs, &n_evs, info, err)) != GM_OK) return st;
    own_evs = 1;
  }
  if (st == GM_OK && info->has_context) {
    if (evs) gr_context_from_events(evs, n_evs, cfg->device, info);
    else st = gr_context_from_file(path, cfg->read_flags, cfg->device, info, err);
    if (st != GM_OK) return st;
  }
  pool_t p;
  memset(&p, 0, sizeof p);
  p.jobs = calloc((size_t)n, sizeof *p.jobs);
  if (!p.jobs) {
    if (own_evs) free(evs);
    return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  }
  p.n = n;
  for (int i = 0; i < n; i++) {
    job_t *j = &p.jobs[i];
    j->cfg = cfg;
    j->path = path;
    j->spec = cfg->policies[i];
    j->evs = evs;
    j->n_evs = n_evs;
    j->total_memory = total_memory;
    j->external_sync = info->external_sync;
    j->vmm_requests = info->vmm_requests;
    j->count_other = gr_count_other(cfg, info);
    j->context_bytes = cfg->count_other == GR_OTHER_NO ? 0 : info->context_bytes;
    j->event_timing = cfg->event_timing;
    j->res = res[i];
  }
  run_pool(cfg, &p, n_evs ? n_evs : info->events_in_index, path);
  /* The trace's integrity, from the decode-once pass or from a streamed job's reader. */
  for (int i = 0; !want_preload && i < n; i++)
    if (p.jobs[i].has_reader_stats) {
      info->truncated = p.jobs[i].reader_stats.truncated;
      info->seq_gaps = p.jobs[i].reader_stats.seq_gaps;
      info->dropped = p.jobs[i].reader_stats.dropped;
      info->stats = p.jobs[i].reader_stats;
      snprintf(info->damage, sizeof info->damage, "%s", p.jobs[i].damage);
      break;
    }
  st = GM_OK;
  for (int i = 0; i < n && st == GM_OK; i++)
    if (p.jobs[i].st != GM_OK) {
      *err = p.jobs[i].err;
      st = p.jobs[i].st;
    }
  /* Timing-dependent figures (frees that wait on stream events, the simulated async pool):
   * the same policies again under the other timings; the range goes beside the point. */
  if (st == GM_OK && n > 0 && cfg->timing_range)
    st = timing_range(cfg, &p, res, evs, n_evs, info, err);
  free(p.jobs);
  if (own_evs) free(evs);
  if (st == GM_OK && n > 0 && res[0]->recorded_failures && res[0]->first_failure_callsite)
    callsite_text(path, res[0]->first_failure_callsite, info->failure_callsite,
                  sizeof info->failure_callsite);
  return st;
}

/* ---- decode once, replay many (the tuner) ---- */

gm_status_t gr_trace_load(const gr_config_t *cfg, const char *path, gr_loaded_t *lt, gm_err_t *err) {
  memset(lt, 0, sizeof *lt);
  gr_trace_info_t *info = &lt->info;
  gm_status_t st = probe(path, cfg->read_flags, cfg->sync_allocs, cfg->vmm_buffers, info, err);
  if (st != GM_OK) return st;
  uint64_t total_memory = cfg->device_memory ? cfg->device_memory
                          : cfg->capacity    ? cfg->capacity
                          : info->gpu_mem_info_total ? info->gpu_mem_info_total
                                                     : info->gpu_total_mem;
  info->device_memory = total_memory ? total_memory : GR_ASSUMED_DEVICE_MEMORY;
  info->device_memory_assumed = !cfg->device_memory && !info->gpu_total_mem;
  lt->total_memory = total_memory;
  st = preload(path, cfg->read_flags, info->events_in_index, &lt->evs, &lt->n_evs, info, err);
  if (st == GM_OK && info->has_context) gr_context_from_events(lt->evs, lt->n_evs, cfg->device, info);
  return st;
}

gm_status_t gr_run_loaded(const gr_config_t *cfg, const gr_loaded_t *lt, const char *const *specs,
                          int n, rp_result_t **res, gm_err_t *err) {
  pool_t p;
  memset(&p, 0, sizeof p);
  if (n <= 0) return GM_OK;
  p.jobs = calloc((size_t)n, sizeof *p.jobs);
  if (!p.jobs) return gm_err_set(err, GM_ERR_NOMEM, "out of host memory");
  p.n = n;
  for (int i = 0; i < n; i++) {
    job_t *j = &p.jobs[i];
    j->cfg = cfg;
    j->path = lt->info.path;
    j->spec = specs[i];
    j->evs = lt->evs;
    j->n_evs = lt->n_evs;
    j->total_memory = cfg->device_memory ? cfg->device_memory : lt->total_memory;
    j->external_sync = lt->info.external_sync;
    j->vmm_requests = lt->info.vmm_requests;
    j->count_other = gr_count_other(cfg, &lt->info);
    j->context_bytes = cfg->count_other == GR_OTHER_NO ? 0 : lt->info.context_bytes;
    j->res = res[i];
  }
  int threads = cfg->cuda_ordinal >= 0 ? 1 : cfg->jobs < 1 ? 1 : cfg->jobs > n ? n : cfg->jobs;
  if (threads == 1) {
    worker(&p);
  } else {
    pthread_t tids[256];
    int started = 0;
    for (int t = 0; t < threads && t < 256; t++)
      if (pthread_create(&tids[t], NULL, worker, &p) == 0) started++;
    if (started == 0) worker(&p);
    for (int t = 0; t < started; t++) pthread_join(tids[t], NULL);
  }
  gm_status_t st = GM_OK;
  for (int i = 0; i < n && st == GM_OK; i++)
    if (p.jobs[i].st != GM_OK) {
      *err = p.jobs[i].err;
      st = p.jobs[i].st;
    }
  free(p.jobs);
  return st;
}

void gr_loaded_note_failure(gr_loaded_t *lt, const rp_result_t *r0) {
  if (r0->recorded_failures && r0->first_failure_callsite)
    callsite_text(lt->info.path, r0->first_failure_callsite, lt->info.failure_callsite,
                  sizeof lt->info.failure_callsite);
}

void gr_loaded_free(gr_loaded_t *lt) {
  free(lt->evs);
  lt->evs = NULL;
  lt->n_evs = 0;
}

uint64_t gr_failure_capacity(const gr_trace_info_t *info, const rp_result_t *r, char *note, size_t n) {
  char b1[32], b2[32];
  note[0] = '\0';
  if (!r->recorded_failures) return 0;
  if (info->recorded_device_free) {
    /* PyTorch records the device's free bytes with its OOM: what the process could have had
     * is what its allocator held then plus that. */
    uint64_t held = r->first_failure_recorded_reserved_bytes > r->first_failure_live_bytes
                        ? r->first_failure_recorded_reserved_bytes
                        : r->first_failure_live_bytes;
    snprintf(note, n, "what the recorded process had: %s reserved + %s free on the device at the failure",
             gm_format_size(held, b1, sizeof b1), gm_format_size(info->recorded_device_free, b2, sizeof b2));
    return held + info->recorded_device_free;
  }
  if (info->gpu_total_mem) {
    snprintf(note, n, "the recorded GPU's memory; the CUDA context and other processes held some of it, "
             "so the real limit was lower");
    return info->gpu_total_mem;
  }
  return 0;
}

