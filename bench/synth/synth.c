/* synth.c: the "transformer" model of synth.h (a PyTorch-like training loop, emitted as
 * allocator events), and the entry points that serve both models (fill, stream, write).
 *
 * Model (what the format and replay benchmarks assume a real job looks like):
 *  - a transformer of L blocks; weights and biases allocated once at start, Adam states
 *    (exp_avg, exp_avg_sq, fp32) lazily at the first optimizer step: long-lived;
 *  - each step: an input batch copied in on a second stream (freed with record_stream
 *    semantics: free_requested, then free later); forward allocates per block ~10 saved
 *    activations plus short-lived temporaries; backward walks the blocks in reverse,
 *    allocating gradient temporaries and freeing the saved activations (near LIFO), and
 *    allocates parameter gradients; the optimizer runs foreach kernels with a few large
 *    temporaries; zero_grad(set_to_none) frees the gradients;
 *  - one step in 8 uses a different sequence-length bucket (other sizes);
 *  - addresses come from a per-size LIFO free list over a bump pointer, as a caching
 *    allocator or cudaMallocAsync pool would give: the same request sequence reuses the
 *    same addresses;
 *  - timestamps: monotonic ns, gaps from a mixture of short (~2 us, back-to-back calls)
 *    and long (~30 us, kernel launches in between) exponentials (the CPU runs ahead of the
 *    GPU), and 100 ms + ~50 ms between steps (it waits for the GPU once per step);
 *  - markers "step", "forward", "backward", "optimizer" with size = step number;
 *  - the batch (o->batch, default 8) scales the inputs and activations, not the parameters,
 *    so runs at two batches make the same allocations in the same order (gpurec predict's
 *    tests and benchmark); with o->callsites each allocation names its role.
 * Events are stream-ordered (cudaMallocAsync, capture mode "requests"). With o->streamed, the
 * same requests come as gpurec's default mode records PyTorch's caching allocator before its
 * merge (rec_torch_stream.c): flagged GMT_F_TORCH_STREAM, a free as free_requested then free
 * (free_completed, at the same time unless a stream-event wait came between), fresh addresses
 * carved from segments (2 MiB for blocks up to 1 MiB, 20 MiB below 10 MiB, else the size rounded
 * to 2 MiB), each a segment_alloc with the driver's cudaMalloc beside it, unflagged, as CUPTI
 * sees it; no empty_cache (the model keeps its segments).
 * The same step code fills a caller's array (synth_fill: stops when it is full) or, for the
 * stream, a buffer that grows to one step's events. */
#include "bench/synth/synth.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "bench/synth/synth_dynamic.h"

const char *const synth_strings[SYNTH_N_STRINGS] = {"step", "forward", "backward", "optimizer"};
enum { STR_STEP = 1, STR_FWD, STR_BWD, STR_OPT };

const char *const synth_callsites[SYNTH_N_CALLSITES] = {
    "model.py:12:init_weights", "train.py:40:load_batch", "model.py:60:embed",
    "model.py:71:qkv_in", "model.py:72:qkv", "model.py:74:attn_scores", "model.py:76:attn_out",
    "model.py:77:proj", "model.py:79:residual", "model.py:81:mlp_in", "model.py:82:mlp_act",
    "model.py:84:mlp_out", "model.py:86:norm", "model.py:75:softmax_tmp", "model.py:83:gelu_tmp",
    "model.py:90:logits", "train.py:45:loss", "autograd:grad_logits", "autograd:grad_out",
    "autograd:grad_qkv_in", "autograd:grad_qkv", "autograd:grad_scores", "autograd:grad_attn",
    "autograd:grad_proj", "autograd:grad_residual", "autograd:grad_mlp_in", "autograd:grad_mlp_act",
    "autograd:grad_mlp_out", "autograd:grad_norm", "autograd:param_grad", "optim/adam.py:178:init_state",
    "optim/adam.py:791:foreach_tmp"};
enum {
  SITE_WEIGHT, SITE_INPUT, SITE_EMB, SITE_SAVED, /* + 0..9 */
  SITE_TMP_SCORES = SITE_SAVED + 10, SITE_TMP_MLP, SITE_LOGITS, SITE_LOSS, SITE_GLOGITS, SITE_GOUT,
  SITE_GRAD, /* + 0..9 */
  SITE_PGRAD = SITE_GRAD + 10, SITE_ADAM, SITE_FOREACH
};

#define STREAM_COMPUTE 7u
#define STREAM_COPY 13u
#define BASE_ADDR 0x7f3a00000000ull

typedef struct flist {
  uint64_t size;
  uint64_t *addr;
  size_t n, cap;
  UT_hash_handle hh;
} flist_t;

typedef struct tensor {
  uint64_t addr, size;
} tensor_t;

typedef struct gen {
  const synth_opts_t *o;
  gmt_event_t *out;
  uint64_t n, cap;
  uint64_t rng, ts, corr, bump;
  uint64_t seg_end; /* streamed: where the newest segment ends */
  flist_t *free_by_size;
  int grow; /* streaming: out is ours and grows (cap is its size), never "full" */
  int oom;  /* streaming: it could not grow */
} gen_t;

static uint64_t rnd(gen_t *g) { /* splitmix64 */
  uint64_t z = (g->rng += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static double unif(gen_t *g) { return ((rnd(g) >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
static uint64_t expo(gen_t *g, double mean) { return (uint64_t)(-log(unif(g)) * mean); }

static int full(const gen_t *g) { return !g->grow && g->n >= g->cap; }

/* Room for one more event: in a caller's array while it is not full; in the stream's
 * buffer, growing it. */
static int room(gen_t *g) {
  if (g->n < g->cap) return 1;
  if (!g->grow || g->oom) return 0;
  uint64_t nc = g->cap ? 2 * g->cap : 4096;
  gmt_event_t *no = realloc(g->out, nc * sizeof *no);
  if (!no) {
    g->oom = 1;
    return 0;
  }
  g->out = no;
  g->cap = nc;
  return 1;
}

/* One event; at the time of the one before unless advance. NULL when there is no room. */
static gmt_event_t *emit_at(gen_t *g, unsigned kind, uint64_t addr, uint64_t size, uint64_t stream,
                            uint32_t callsite, int advance) {
  if (!room(g)) return NULL;
  if (advance) g->ts += rnd(g) % 5 < 3 ? 300 + expo(g, 2000) : 1000 + expo(g, 30000);
  gmt_event_t *e = &g->out[g->n++];
  memset(e, 0, sizeof *e);
  e->ts_ns = g->ts;
  e->kind = (uint8_t)kind;
  e->addr = addr;
  e->size = size;
  e->stream = stream;
  e->callsite = callsite;
  if (kind == GMT_EV_MARKER) {
    e->stream = GMT_STREAM_NONE;
    return e;
  }
  e->device = 0;
  e->mem_kind = GMT_MEM_DEVICE;
  if (g->o->streamed) { /* a TraceEntry as rec_torch_stream.c writes it: no correlation, no context */
    e->flags = GMT_F_TORCH_STREAM;
    return e;
  }
  g->corr += 1 + rnd(g) % 6;
  e->corr_id = g->corr;
  e->context = 1;
  e->flags = GMT_F_ASYNC | GMT_F_FROM_POOL;
  return e;
}

static void emit(gen_t *g, unsigned kind, uint64_t addr, uint64_t size, uint64_t stream, uint32_t callsite) {
  emit_at(g, kind, addr, size, stream, callsite, 1);
}

/* Streamed: a new segment for a block of size that does not fit in the newest one: the
 * driver's cudaMalloc as CUPTI records it, then the allocator's segment_alloc. */
static void new_segment(gen_t *g, uint64_t size, uint64_t stream) {
  const uint64_t mib = 1ull << 20;
  uint64_t seg = size <= mib ? 2 * mib : size < 10 * mib ? 20 * mib : (size + 2 * mib - 1) / (2 * mib) * (2 * mib);
  g->bump = g->seg_end;
  g->seg_end += seg;
  gmt_event_t *d = emit_at(g, GMT_EV_ALLOC, g->bump, seg, GMT_STREAM_NONE, 0, 1);
  if (d) {
    d->flags = 0;
    d->corr_id = ++g->corr;
    d->context = 1;
  }
  emit_at(g, GMT_EV_SEGMENT_ALLOC, g->bump, seg, stream, 0, 0);
}

static uint64_t round512(uint64_t s) { return (s + 511) & ~511ull; }

static tensor_t alloc(gen_t *g, uint64_t size, uint64_t stream, int site) {
  size = round512(size);
  flist_t *f;
  HASH_FIND(hh, g->free_by_size, &size, sizeof size, f);
  tensor_t t = {0, size};
  if (f && f->n) t.addr = f->addr[--f->n];
  else {
    if (g->o->streamed && g->bump + size > g->seg_end) new_segment(g, size, stream);
    t.addr = g->bump;
    g->bump += size;
  }
  emit(g, GMT_EV_ALLOC, t.addr, size, stream, g->o->callsites ? (uint32_t)(SYNTH_N_STRINGS + 1 + site) : 0);
  return t;
}

/* requested: its free_requested came before (a stream-event wait: record_stream). */
static void release_after(gen_t *g, tensor_t t, uint64_t stream, int requested) {
  if (g->o->streamed && !requested) { /* free_requested, free_completed at once */
    emit(g, GMT_EV_FREE_REQUESTED, t.addr, t.size, stream, 0);
    emit_at(g, GMT_EV_FREE, t.addr, t.size, stream, 0, 0);
  } else {
    emit(g, GMT_EV_FREE, t.addr, t.size, stream, 0);
  }
  flist_t *f;
  HASH_FIND(hh, g->free_by_size, &t.size, sizeof t.size, f);
  if (!f) {
    f = calloc(1, sizeof *f);
    if (!f) return;
    f->size = t.size;
    HASH_ADD(hh, g->free_by_size, size, sizeof f->size, f);
  }
  if (f->n == f->cap) {
    size_t nc = f->cap ? f->cap * 2 : 8;
    uint64_t *na = realloc(f->addr, nc * sizeof *na);
    if (!na) return;
    f->addr = na;
    f->cap = nc;
  }
  f->addr[f->n++] = t.addr;
}

static void release(gen_t *g, tensor_t t, uint64_t stream) { release_after(g, t, stream, 0); }

/* Per block: parameter sizes (bytes, fp16) and the activations forward saves. */
#define N_PARAMS 12
#define N_SAVED 10

static void params_of(uint64_t H, uint64_t sz[N_PARAMS]) {
  uint64_t p[N_PARAMS] = {H * 3 * H, 3 * H, H * H, H, H * 4 * H, 4 * H, 4 * H * H, H, H, H, H, H};
  for (int i = 0; i < N_PARAMS; i++) sz[i] = p[i] * 2;
}

static void step(gen_t *g, uint64_t s, tensor_t *weights, tensor_t *adam, int *adam_ready, tensor_t *grads,
                 tensor_t *saved) {
  const uint32_t L = g->o->layers, two = g->o->streams > 1;
  const uint64_t H = g->o->hidden, B = g->o->batch, heads = H / 128;
  uint64_t S = (rnd(g) % 8 == 0) ? 512 + 512 * (rnd(g) % 3) : 1024; /* sequence bucket */
  uint64_t T = B * S;                                                /* tokens */
  uint64_t psz[N_PARAMS];
  params_of(H, psz);
  g->ts += 100000000 + expo(g, 50000000); /* the CPU waits for the GPU (loss.item()), loads data */
  emit(g, GMT_EV_MARKER, 0, s, 0, STR_STEP);
  uint64_t in_stream = two ? STREAM_COPY : STREAM_COMPUTE;
  tensor_t ids = alloc(g, T * 8, in_stream, SITE_INPUT), labels = alloc(g, T * 8, in_stream, SITE_INPUT);
  emit(g, GMT_EV_MARKER, 0, s, 0, STR_FWD);
  tensor_t emb = alloc(g, T * H * 2, STREAM_COMPUTE, SITE_EMB);
  const uint64_t saved_sz[N_SAVED] = {T * H * 2, T * 3 * H * 2, heads * B * S * S * 2, T * H * 2, T * H * 2,
                                      T * H * 2, T * 4 * H * 2, T * 4 * H * 2, T * H * 2, T * H * 2};
  for (uint32_t l = 0; l < L && !full(g); l++)
    for (int a = 0; a < N_SAVED; a++) {
      saved[l * N_SAVED + a] = alloc(g, saved_sz[a], STREAM_COMPUTE, SITE_SAVED + a);
      if (a == 2 || a == 6) { /* scores and mlp in: a temporary on the side */
        tensor_t t = alloc(g, saved_sz[a] / (a == 2 ? 1 : 4), STREAM_COMPUTE, a == 2 ? SITE_TMP_SCORES : SITE_TMP_MLP);
        release(g, t, STREAM_COMPUTE);
      }
    }
  tensor_t logits = alloc(g, T * 32000 * 2, STREAM_COMPUTE, SITE_LOGITS);
  tensor_t loss = alloc(g, 512, STREAM_COMPUTE, SITE_LOSS);
  emit(g, GMT_EV_MARKER, 0, s, 0, STR_BWD);
  tensor_t glog = alloc(g, T * 32000 * 2, STREAM_COMPUTE, SITE_GLOGITS);
  release(g, logits, STREAM_COMPUTE);
  release(g, loss, STREAM_COMPUTE);
  tensor_t gout = alloc(g, T * H * 2, STREAM_COMPUTE, SITE_GOUT);
  release(g, glog, STREAM_COMPUTE);
  for (int32_t l = (int32_t)L - 1; l >= 0 && !full(g); l--) {
    for (int a = N_SAVED - 1; a >= 0; a--) {
      tensor_t gt = alloc(g, saved_sz[a], STREAM_COMPUTE, SITE_GRAD + a);
      release(g, saved[l * N_SAVED + a], STREAM_COMPUTE);
      if (a % 3 == 0) {
        int p = (a / 3) * 3; /* this op's parameter gradients */
        for (int k = p; k < p + 3 && k < N_PARAMS; k++)
          if (!grads[l * N_PARAMS + k].addr) grads[l * N_PARAMS + k] = alloc(g, psz[k], STREAM_COMPUTE, SITE_PGRAD);
      }
      release(g, gt, STREAM_COMPUTE);
    }
  }
  for (uint32_t l = 0; l < L; l++)
    for (int k = 0; k < N_PARAMS; k++)
      if (!grads[l * N_PARAMS + k].addr) grads[l * N_PARAMS + k] = alloc(g, psz[k], STREAM_COMPUTE, SITE_PGRAD);
  release(g, gout, STREAM_COMPUTE);
  release(g, emb, STREAM_COMPUTE);
  emit(g, GMT_EV_MARKER, 0, s, 0, STR_OPT);
  if (!*adam_ready) { /* lazy state init at the first step */
    for (uint32_t i = 0; i < L * N_PARAMS * 2; i++) adam[i] = alloc(g, psz[(i / 2) % N_PARAMS] * 2, STREAM_COMPUTE, SITE_ADAM);
    *adam_ready = 1;
  }
  for (uint32_t l = 0; l < L; l += 4) { /* foreach kernels over groups of blocks */
    tensor_t t1 = alloc(g, 4 * psz[4] * 2, STREAM_COMPUTE, SITE_FOREACH), t2 = alloc(g, 4 * psz[6] * 2, STREAM_COMPUTE, SITE_FOREACH);
    release(g, t2, STREAM_COMPUTE);
    release(g, t1, STREAM_COMPUTE);
  }
  for (uint32_t i = 0; i < L * N_PARAMS; i++) { /* zero_grad(set_to_none=True) */
    if (grads[i].addr) release(g, grads[i], STREAM_COMPUTE);
    grads[i].addr = 0;
  }
  if (two) { /* the batch was used on the compute stream: freed when that work is done */
    emit(g, GMT_EV_FREE_REQUESTED, ids.addr, ids.size, in_stream, 0);
    emit(g, GMT_EV_FREE_REQUESTED, labels.addr, labels.size, in_stream, 0);
  }
  release_after(g, ids, in_stream, two);
  release_after(g, labels, in_stream, two);
  (void)weights;
}

/* The transformer model's state between steps. */
typedef struct tf {
  synth_opts_t o;
  gen_t g;
  tensor_t *weights, *adam, *grads, *saved;
  int adam_ready;
  uint64_t s; /* the next step */
} tf_t;

static void tf_free(tf_t *t) {
  if (!t) return;
  flist_t *f, *tmp;
  HASH_ITER(hh, t->g.free_by_size, f, tmp) {
    HASH_DEL(t->g.free_by_size, f);
    free(f->addr);
    free(f);
  }
  if (t->g.grow) free(t->g.out);
  free(t->weights);
  free(t->adam);
  free(t->grads);
  free(t->saved);
  free(t);
}

/* out/cap: the caller's array (synth_fill); out NULL: the stream's own growing buffer. The
 * parameters are allocated here, before the first step. NULL when out of host memory. */
static tf_t *tf_new(const synth_opts_t *oin, gmt_event_t *out, uint64_t cap) {
  tf_t *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->o = *oin;
  synth_opts_t *o = &t->o;
  if (!o->layers) o->layers = 24;
  if (!o->hidden) o->hidden = 2048;
  if (!o->streams) o->streams = 2;
  if (!o->batch) o->batch = 8;
  gen_t g = {o, out, 0, cap, o->seed * 0x2545F4914F6CDD1Dull + 1, 1000000, 0, BASE_ADDR, BASE_ADDR, NULL, out == NULL, 0};
  t->g = g;
  size_t np = (size_t)o->layers * N_PARAMS;
  t->weights = calloc(np, sizeof *t->weights);
  t->adam = calloc(2 * np, sizeof *t->adam);
  t->grads = calloc(np, sizeof *t->grads);
  t->saved = calloc((size_t)o->layers * N_SAVED, sizeof *t->saved);
  if (!t->weights || !t->adam || !t->grads || !t->saved) {
    tf_free(t);
    return NULL;
  }
  uint64_t psz[N_PARAMS];
  params_of(o->hidden, psz);
  for (size_t i = 0; i < np; i++) t->weights[i] = alloc(&t->g, psz[i % N_PARAMS], STREAM_COMPUTE, SITE_WEIGHT);
  return t;
}

static void tf_step(tf_t *t) {
  step(&t->g, t->s, t->weights, t->adam, &t->adam_ready, t->grads, t->saved);
  if (t->s % 200 == 199 && !t->o.streamed) emit(&t->g, GMT_EV_EMPTY_CACHE, 0, 0, GMT_STREAM_NONE, 0);
  t->s++;
}

struct synth_gen {
  tf_t *tf;          /* transformer */
  synth_dyn_t *dyn;  /* dynamic */
  size_t pos;        /* transformer: events of tf->g.out already handed out */
};

int synth_model_from_name(const char *name) {
  if (!strcmp(name, "transformer")) return SYNTH_TRANSFORMER;
  if (!strcmp(name, "dynamic")) return SYNTH_DYNAMIC;
  return -1;
}

synth_gen_t *synth_gen_new(const synth_opts_t *o) {
  synth_gen_t *g = calloc(1, sizeof *g);
  if (!g) return NULL;
  if (o->model == SYNTH_DYNAMIC) g->dyn = synth_dyn_new(o->seed, o->layers);
  else g->tf = tf_new(o, NULL, 0);
  if (!g->dyn && !g->tf) {
    free(g);
    return NULL;
  }
  return g;
}

void synth_gen_free(synth_gen_t *g) {
  if (!g) return;
  synth_dyn_free(g->dyn);
  tf_free(g->tf);
  free(g);
}

size_t synth_gen_next(synth_gen_t *g, gmt_event_t *out, size_t cap) {
  if (g->dyn) return synth_dyn_next(g->dyn, out, cap);
  gen_t *b = &g->tf->g;
  if (g->pos == b->n) { /* the next step into the emptied buffer */
    b->n = 0;
    g->pos = 0;
    tf_step(g->tf);
  }
  if (b->oom) return 0;
  size_t n = (size_t)b->n - g->pos;
  if (n > cap) n = cap;
  memcpy(out, b->out + g->pos, n * sizeof *out);
  g->pos += n;
  return n;
}

void synth_fill(const synth_opts_t *o, gmt_event_t *evs) {
  uint64_t done = 0;
  if (o->model == SYNTH_DYNAMIC) {
    synth_gen_t *g = synth_gen_new(o);
    size_t k = 1;
    while (g && done < o->events && k) done += k = synth_gen_next(g, evs + done, (size_t)(o->events - done));
    synth_gen_free(g);
  } else {
    tf_t *t = tf_new(o, evs, o->events);
    while (t && !full(&t->g)) tf_step(t);
    done = t ? t->g.n : 0;
    tf_free(t);
  }
  for (uint64_t ts = done ? evs[done - 1].ts_ns : 1000000; done < o->events; done++) { /* out of host memory */
    memset(&evs[done], 0, sizeof evs[done]);
    evs[done].ts_ns = ts;
    evs[done].kind = GMT_EV_MARKER;
    evs[done].stream = GMT_STREAM_NONE;
    evs[done].callsite = STR_STEP;
  }
}

gm_status_t synth_header(const synth_opts_t *o, gmt_header_t *h, gm_err_t *err) {
  gmt_header_init(h);
  h->capture_mode = GMT_CAPTURE_SYNTHETIC;
  h->pid = 4242;
  h->start_time_ns = 1795000000000000000ull;
  h->gpu_total_mem = 80ull << 30;
  const int dyn = o->model == SYNTH_DYNAMIC, streamed = !dyn && o->streamed;
  if (streamed) h->capture_mode = GMT_CAPTURE_NATIVE; /* gpurec's auto mode, before its merge */
  char cmd[192];
  int n = snprintf(cmd, sizeof cmd, "gmsynth%s --events %llu --seed %llu", dyn ? " --model dynamic" : "",
                   (unsigned long long)o->events, (unsigned long long)o->seed);
  if (!dyn && o->batch && n > 0 && (size_t)n < sizeof cmd)
    n += snprintf(cmd + n, sizeof cmd - (size_t)n, " --batch %u", o->batch);
  if (!dyn && o->callsites && n > 0 && (size_t)n < sizeof cmd)
    n += snprintf(cmd + n, sizeof cmd - (size_t)n, " --callsites");
  if (streamed && n > 0 && (size_t)n < sizeof cmd) snprintf(cmd + n, sizeof cmd - (size_t)n, " --streamed");
  if (o->world_size) { /* the ranks of one job: one command line, a process each */
    h->rank = (int32_t)o->rank;
    h->world_size = (int32_t)o->world_size;
    h->pid = 4242 + o->rank;
    snprintf(cmd, sizeof cmd, "gmsynth job --world-size %u", o->world_size);
  }
  gm_status_t s = gmt_header_set(&h->host, "synthetic", err);
  if (s == GM_OK) s = gmt_header_set(&h->gpu_name, "synthetic 80GB GPU", err);
  if (s == GM_OK) s = gmt_header_set(&h->tool, "gmsynth 0.1.0", err);
  if (s == GM_OK) s = gmt_header_set(&h->command_line, cmd, err);
  /* the dynamic model's events are cudaMalloc-like: no async backend to name */
  if (s == GM_OK && !dyn && !streamed) s = gmt_header_kv_set(h, "PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync", err);
  if (s == GM_OK && streamed) s = gmt_header_kv_set(h, "gpurec_mode", "auto", err); /* what gpurec import looks for */
  if (s != GM_OK) gmt_header_free(h);
  return s;
}

gm_status_t synth_write(const synth_opts_t *o, const char *path, const gmt_writer_opts_t *wo, gm_err_t *err) {
  synth_gen_t *g = synth_gen_new(o);
  if (!g) return gm_err_set(err, GM_ERR_NOMEM, "out of host memory for the generator");
  gmt_header_t h;
  gmt_writer_t *w = NULL;
  gm_status_t s = synth_header(o, &h, err);
  if (s == GM_OK) {
    s = gmt_writer_open(&w, path, &h, wo, err);
    gmt_header_free(&h);
  }
  for (int i = 0; s == GM_OK && i < SYNTH_N_STRINGS; i++) {
    uint32_t id;
    s = gmt_writer_intern(w, synth_strings[i], &id, err);
  }
  for (int i = 0; s == GM_OK && o->callsites && o->model != SYNTH_DYNAMIC && i < SYNTH_N_CALLSITES; i++) {
    uint32_t id;
    s = gmt_writer_intern(w, synth_callsites[i], &id, err);
  }
  gmt_event_t buf[4096];
  for (uint64_t done = 0; s == GM_OK && done < o->events;) {
    size_t want = o->events - done < 4096 ? (size_t)(o->events - done) : 4096;
    size_t n = synth_gen_next(g, buf, want);
    if (!n) s = gm_err_set(err, GM_ERR_NOMEM, "out of host memory after %llu events", (unsigned long long)done);
    else s = gmt_writer_append_n(w, buf, n, err);
    done += n;
  }
  if (s == GM_OK) s = gmt_writer_close(w, err);
  else if (w) gmt_writer_abandon(w);
  synth_gen_free(g);
  return s;
}
